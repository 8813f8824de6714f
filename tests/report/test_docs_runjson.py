#!/usr/bin/env python3
"""The documentation of run.json and of the notebook's requirements against what fp8lab writes
(issue 42 point 9: docs drift).

1. `fp8lab run` of a small experiment (a section with `tensors`, one without) into a temporary
   folder: run.json's top-level `configurations` is a number, the count of
   `experiment.configurations`, the list whose entries carry `tensors` (the partial section's
   entry, and only it).
2. No page of the documentation (README.md, docs/*.md) says that run.json's `configurations`
   (the top-level count) gives the configurations' `tensors`: the list is
   `experiment.configurations`.
3. Every module the report's notebook imports (src/report/report_notebook.c's cells) that is not
   in Python's standard library is named in the requirements list (docs/reference.md,
   "Building and testing": "Dependencies are ...").

Usage: test_docs_runjson.py FP8LAB_BIN (FP8LAB_SOURCE_DIR: the tree whose docs are read;
default this one). Standard library only.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("FP8LAB_SOURCE_DIR") or os.path.dirname(os.path.dirname(HERE))

EXPERIMENT = """[trace]
path = synth:llm
synth_steps = 4
[recipe.part]
kind = delayed
format = hybrid
history_len = 16
tensors = *.input
[recipe.all]
kind = current
format = hybrid
"""


def check_run_json(binary, errors):
    with tempfile.TemporaryDirectory(prefix="fp8lab_docs_") as tmp:
        ini = os.path.join(tmp, "e.ini")
        with open(ini, "w") as f:
            f.write(EXPERIMENT)
        out = os.path.join(tmp, "out")
        p = subprocess.run([binary, "run", ini, "--out", out, "--quiet", "--no-report"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if p.returncode != 0:
            errors.append("fp8lab run: exit %d\n%s" % (p.returncode, p.stdout))
            return
        with open(os.path.join(out, "run.json")) as f:
            j = json.load(f)
    top, lst = j.get("configurations"), j.get("experiment", {}).get("configurations")
    if not isinstance(lst, list):
        errors.append("run.json: experiment.configurations is %r, not a list" % (lst,))
        return
    if not (isinstance(top, int) and not isinstance(top, bool) and top == len(lst)):
        errors.append("run.json: the top-level configurations is %r, expected the count of "
                      "experiment.configurations, %d" % (top, len(lst)))
    with_t = [c.get("recipe") for c in lst if "tensors" in c]
    if with_t != ["part"] * len(with_t) or not with_t:
        errors.append("run.json: the entries of experiment.configurations with `tensors` are "
                      "those of %s, expected the section `part` (tensors = *.input) alone" % with_t)


def doc_pages():
    pages = [os.path.join(ROOT, "README.md")]
    d = os.path.join(ROOT, "docs")
    pages += sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".md"))
    return pages


def check_docs(errors):
    for page in doc_pages():
        with open(page) as f:
            text = re.sub(r"\s+", " ", f.read())
        for m in re.finditer(r"run\.json's `configurations`[^.;]*?`tensors`", text):
            errors.append("%s: %r: run.json's top-level `configurations` is a count; the list "
                          "with `tensors` is `experiment.configurations`" %
                          (os.path.relpath(page, ROOT), m.group(0)))


def check_requirements(errors):
    with open(os.path.join(ROOT, "src", "report", "report_notebook.c")) as f:
        src = f.read()
    mods = set(re.findall(r'"\s*(?:import|from) (\w+)', src))
    std = set(getattr(sys, "stdlib_module_names", ())) or {"json", "os", "pathlib", "math",
                                                          "re", "sys", "glob"}
    third = sorted(m for m in mods if m not in std)
    if not third:
        errors.append("report_notebook.c: no third-party import found (pandas expected): the "
                      "check reads the wrong thing")
    with open(os.path.join(ROOT, "docs", "reference.md")) as f:
        ref = f.read()
    i = ref.find("Dependencies are Debian packages")
    para = ref[i:ref.find("\n\n", i)] if i >= 0 else ""
    if not para:
        errors.append("docs/reference.md: no requirements paragraph ('Dependencies are Debian "
                      "packages ...')")
    for m in third:
        if not re.search(r"\b%s\b" % re.escape(m), para):
            errors.append("docs/reference.md's requirements list does not name %s, which the "
                          "report's notebook imports (src/report/report_notebook.c)" % m)


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    errors = []
    check_run_json(sys.argv[1], errors)
    check_docs(errors)
    check_requirements(errors)
    if errors:
        print("FAILED: %d:" % len(errors))
        for e in errors:
            print("  - " + e)
        return 1
    print("ok: run.json's configurations is the count of experiment.configurations (the list "
          "with tensors), the docs say so, and the requirements list names the notebook's "
          "imports")
    return 0


if __name__ == "__main__":
    sys.exit(main())
