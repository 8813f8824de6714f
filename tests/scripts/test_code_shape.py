#!/usr/bin/env python3
"""The layering check (scripts/code_shape.py) must fail on an upward include, an upward call, a
run-time lookup outside its one place and an include without use.

On a copy of the source tree with one line planted in src/sim/fp8.c (`#include "report.h"`,
the report being the highest library), code_shape.py must exit 1 and name the file, the line
and the two layers; the same copy without the line must pass. For calls: an object of the
simulator's layer (a static library built here from a planted C file) that calls
fp8_report_generate, given with the real report library, must fail naming both layers and the
symbol; the same planted file calling a function of the simulator itself must pass. A cycle
between two planted objects of one layer is still found. A dlsym planted in src/run/run_split.c
must fail naming its line, and the same text in a comment must not. `#include "util.h"` planted
in src/sim/fp8.c passes when the file uses fp8_errorf, and fails (file, line) when the names
appear only in a comment; a string holding "/*" hides no code after it; a header's multi-line
macro body declares no names.

Usage: test_code_shape.py SOURCE_DIR REPORT_LIB SIM_LIB
"""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SHAPE = os.path.join(os.path.dirname(os.path.dirname(HERE)), "scripts", "code_shape.py")


def shape(*args):
    p = subprocess.run([sys.executable, SHAPE] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    return p.returncode, p.stdout


def expect(cond, what, out):
    if not cond:
        print("FAILED: %s\n%s" % (what, out))
        sys.exit(1)
    print("ok: " + what)


def archive(tmp, name, code):
    """A static library of one object compiled from code."""
    c = os.path.join(tmp, name + ".c")
    with open(c, "w") as f:
        f.write(code)
    o = os.path.join(tmp, name + ".o")
    subprocess.run(["cc", "-c", "-o", o, c], check=True)
    a = os.path.join(tmp, "lib" + name + ".a")
    subprocess.run(["ar", "rcs", a, o], check=True)
    return a


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    src, report_lib, sim_lib = sys.argv[1:]
    tmp = tempfile.mkdtemp(prefix="fp8lab-shape-")
    try:
        # ---- includes: a copy of the tree, then one planted line
        tree = os.path.join(tmp, "tree")
        for d in ("src", "kernels"):
            shutil.copytree(os.path.join(src, d), os.path.join(tree, d))
        rc, out = shape(tree)
        expect(rc == 0, "the copied tree passes", out)
        fp8c = os.path.join(tree, "src", "sim", "fp8.c")
        with open(fp8c) as f:
            lines = f.read().split("\n")
        at = next(i for i, l in enumerate(lines) if l.startswith("#include")) + 1
        lines.insert(at, '#include "report.h"')
        with open(fp8c, "w") as f:
            f.write("\n".join(lines))
        rc, out = shape(tree)
        expect(rc == 1 and ("src/sim/fp8.c:%d: includes report.h (src/report): sim may not use "
                            "report, a higher layer" % (at + 1)) in out,
               "a planted upward include (sim includes report.h) fails, naming file and line", out)
        # a header of the same folder, or of a lower one, is fine when the file uses it
        lines[at] = '#include "util.h"'
        with open(fp8c, "w") as f:
            f.write("\n".join(lines + ["int planted_use(char *e) { return fp8_errorf(0, e, 1, "
                                        "\"x\"); }", ""]))
        rc, out = shape(tree)
        expect(rc == 0, "the same line including a header of its own folder, used, passes", out)
        # ... and fails when none of that header's names is used (a name in a comment is none)
        with open(fp8c, "w") as f:
            f.write("\n".join(lines + ["/* fp8_errorf, FP8_ERRLEN: named here only */", ""]))
        rc, out = shape(tree)
        expect(rc == 1 and ("src/sim/fp8.c:%d: includes util.h and uses none of its names (an "
                            "include without use: a false dependency)" % (at + 1)) in out
               and out.count("without use") == 1,
               "a planted include whose names the file does not use fails, naming file and line",
               out)
        # a "/*" inside a string starts no comment: the code after it is still read (the
        # include used, and a dlsym after the string found)
        with open(fp8c, "w") as f:
            f.write("\n".join(lines + ['static const char *planted_glob = "plots/*.png";',
                                        "int planted_use(char *e) { return fp8_errorf(0, e, 1, "
                                        "\"x\"); }",
                                        'void *planted_sym(void *h) { return dlsym(h, "x"); }',
                                        "/* end */", ""]))
        rc, out = shape(tree)
        expect(rc == 1 and "without use" not in out and
               ("src/sim/fp8.c:%d: looks a name up at run time (dlsym)" % (len(lines) + 3)) in out,
               "a string holding '/*' hides neither the use of util.h nor a dlsym after it", out)
        # a macro's continuation lines declare nothing: a header whose one own name is its
        # macro counts as unused by a file that calls only what the macro's body calls
        with open(os.path.join(tree, "src", "sim", "planted_macro.h"), "w") as f:
            f.write("#define PLANTED_M(e) \\\n  fp8_errorf(0, e, 1, \"x\")\n")
        lines[at] = '#include "planted_macro.h"'
        with open(fp8c, "w") as f:
            f.write("\n".join(lines + ['#include "util.h"',
                                        "int planted_use(char *e) { return fp8_errorf(0, e, 1, "
                                        "\"x\"); }", ""]))
        rc, out = shape(tree)
        expect(rc == 1 and ("src/sim/fp8.c:%d: includes planted_macro.h and uses none of its "
                            "names" % (at + 1)) in out and out.count("without use") == 1,
               "a header's multi-line macro body declares nothing (the include is unused)", out)
        os.remove(os.path.join(tree, "src", "sim", "planted_macro.h"))
        with open(fp8c, "w") as f:
            f.write("\n".join(lines[:at] + lines[at + 1:]))

        # ---- a run-time lookup outside its one place: a dlsym planted in the runner
        split = os.path.join(tree, "src", "run", "run_split.c")
        with open(split) as f:
            orig = f.read()
        with open(split, "a") as f:
            f.write('\n/* dlsym(h, "x") in a comment is fine */\n'
                    'void *planted_lookup(void *h) { return dlsym(h, "fp8_x"); }\n')
        rc, out = shape(tree)
        n = orig.count("\n") + 3
        expect(rc == 1 and ("src/run/run_split.c:%d: looks a name up at run time (dlsym): only "
                            "src/engine/engine_load.c and src/gpu/timeline_nccl.c may" % n) in out
               and out.count("looks a name up") == 1,
               "a planted dlsym in the runner fails, naming file and line (not the comment)", out)
        with open(split, "w") as f:
            f.write(orig)

        # ---- calls: nm over a planted library said to be the simulator's
        up = archive(tmp, "planted_up", "int fp8_report_generate(const char *, const void *, "
                     "void *, char *, unsigned long);\n"
                     "int planted(void) { return fp8_report_generate(0, 0, 0, 0, 0); }\n")
        rc, out = shape(tree, "sim=" + up, "report=" + report_lib)
        expect(rc == 1 and "call: sim -> report: planted_up.o calls fp8_report_generate" in out,
               "a planted upward call (sim calls fp8_report_generate) fails", out)
        down = archive(tmp, "planted_down", "const char *fp8_role_name(int);\n"
                       "const char *planted(void) { return fp8_role_name(0); }\n")
        rc, out = shape(tree, "report=" + down, "sim=" + sim_lib)
        expect(rc == 0 and "layer report     uses sim" in out,
               "a planted downward call (report calls fp8_role_name) passes", out)
        # two objects of one layer that call each other: a cycle, as before
        a = os.path.join(tmp, "cyc_a.c")
        b = os.path.join(tmp, "cyc_b.c")
        with open(a, "w") as f:
            f.write("int cyc_b(int);\nint cyc_a(int x) { return x ? cyc_b(x - 1) : 0; }\n")
        with open(b, "w") as f:
            f.write("int cyc_a(int);\nint cyc_b(int x) { return x ? cyc_a(x - 1) : 1; }\n")
        objs = []
        for c in (a, b):
            objs.append(c[:-2] + ".o")
            subprocess.run(["cc", "-c", "-o", objs[-1], c], check=True)
        cyc = os.path.join(tmp, "libcyc.a")
        subprocess.run(["ar", "rcs", cyc] + objs, check=True)
        rc, out = shape(tree, "run=" + cyc)
        expect(rc == 1 and "cycle between files: run/cyc_a.o <-> run/cyc_b.o" in out,
               "a call cycle between two files fails", out)
        rc, out = shape(tree, "nonsense=" + cyc)
        expect(rc == 2, "a folder that is not a layer is bad usage", out)
    finally:
        shutil.rmtree(tmp)
    print("test_code_shape: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
