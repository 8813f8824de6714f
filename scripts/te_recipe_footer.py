#!/usr/bin/env python3
"""te_recipe.py's code (src/report/te_recipe_apply.py, plain Python that linters and editors
read) as the C string array FOOTER in src/report/report_te_code.c, which writes it after the
advice's constants. Pieces under 3000 bytes, split before a top-level definition where one
fits, else at a line (C11 guarantees string literals of 4095 bytes).

Usage: te_recipe_footer.py [--check]   (--check: exit 1 when the C array is not the .py's)
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = os.path.join(ROOT, "src", "report", "te_recipe_apply.py")
C = os.path.join(ROOT, "src", "report", "report_te_code.c")


def pieces(src):
    parts = re.split(r'(?m)^(?=(?:def |class |TE_GEMM|_ATTRIBUTE|_GOVERNS|# Transformer))', src)
    split = []
    for p in parts:
        while len(p) > 3000:
            k = p.rindex("\n", 0, 3000) + 1
            split.append(p[:k])
            p = p[k:]
        split.append(p)
    chunks, cur = [], ""
    for p in split:
        if len(cur) + len(p) > 3000 and cur:
            chunks.append(cur)
            cur = p
        else:
            cur += p
    chunks.append(cur)
    return chunks


def literal(chunk):
    lines, out = chunk.split("\n"), []
    for i, line in enumerate(lines):
        if i == len(lines) - 1 and line == "":
            break
        esc = line.replace("\\", "\\\\").replace('"', '\\"')
        out.append('    "%s%s"' % (esc, "\\n" if i < len(lines) - 1 else ""))
    return "\n".join(out)


def main():
    with open(PY) as f:
        src = "\n\n" + f.read().split("\n", 3)[3].lstrip("\n")  # without its own header
    arr = "static const char *const FOOTER[] = {\n" + ",\n\n".join(
        literal(c) for c in pieces(src)) + "};\n"
    with open(C) as f:
        s = f.read()
    a = s.index("static const char *const FOOTER[] = {")
    b = s.index("void rep_put_te_footer(FILE *fp) {")
    new = s[:a] + arr + "\n" + s[b:]
    if sys.argv[1:] == ["--check"]:
        if new != s:
            print("%s: FOOTER is not %s: run scripts/te_recipe_footer.py" % (C, PY))
            return 1
        return 0
    with open(C, "w") as f:
        f.write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
