#!/usr/bin/env python3
"""`cmake --install` (issue 43's first part): the installed fp8lab runs from any folder and
finds its GPU module.

  - `cmake --install BUILD --prefix P`: P/bin/fp8lab; P/lib/fp8lab/fp8lab-gpu.so exactly when
    the build made BUILD/fp8lab-gpu.so (a CUDA build), never the emulator's module;
    P/lib/fp8lab/libfp8lab_emu.so (the closed-loop emulator's library, issue 44); the docs in
    P/share/doc/fp8lab (README.md, semantics.md) and the shipped experiments in
    P/share/fp8lab/experiments, byte for byte as in the source tree;
  - `P/bin/fp8lab --version` names P/bin/../lib/fp8lab/fp8lab-gpu.so as its GPU module (or
    says none, in a build without CUDA); moved to another prefix Q, the tree still finds its
    module under Q (the loader's path is relative to the binary, not the install prefix);
  - from another working folder, with a relative experiment path and the experiment's relative
    output folder: the installed binary's steps.csv, stream.csv and summary.csv are byte for
    byte the build tree's binary's on the same experiment, and the report with its plots is
    written (nothing is read from the checkout by path).

Usage: test_install.py FP8LAB_BIN CMAKE BUILD_DIR SOURCE_DIR
"""
import filecmp
import os
import shutil
import subprocess
import sys
import tempfile

FAILS = []


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL: " + what)


def run(args, cwd=None):
    p = subprocess.run(args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.returncode, p.stdout


EXP = """[trace]
path = synth:llm
synth_steps = 24
synth_seed = 3

[recipe.delayed]
kind = delayed
history_len = 16, 1024
margin = 0

[recipe.current]
kind = current

[output]
dir = ../%s
"""


def main():
    fp8lab, cmake, build, src = sys.argv[1:5]
    has_module = os.path.exists(os.path.join(build, "fp8lab-gpu.so"))
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "prefix")
        rc, out = run([cmake, "--install", build, "--prefix", p])
        check(rc == 0, "cmake --install: exit %d: %s" % (rc, out[-600:]))
        if rc:
            return
        b = os.path.join(p, "bin", "fp8lab")
        mod = os.path.join(p, "lib", "fp8lab", "fp8lab-gpu.so")
        check(os.access(b, os.X_OK), "no executable bin/fp8lab under the prefix")
        check(os.path.exists(mod) == has_module,
              "lib/fp8lab/fp8lab-gpu.so installed: %s, built: %s" % (os.path.exists(mod), has_module))
        check(os.path.exists(os.path.join(p, "lib", "fp8lab", "libfp8lab_emu.so")),
              "no lib/fp8lab/libfp8lab_emu.so (the closed-loop emulator's library) under the prefix")
        check(not os.path.exists(os.path.join(p, "lib", "fp8lab", "fp8lab-gpu-emu.so")),
              "the emulator's module was installed")
        for rel, srel in (("share/doc/fp8lab/README.md", "README.md"),
                          ("share/doc/fp8lab/semantics.md", "docs/semantics.md"),
                          ("share/fp8lab/experiments/quickstart.ini", "experiments/quickstart.ini")):
            f = os.path.join(p, rel)
            check(os.path.exists(f) and filecmp.cmp(f, os.path.join(src, srel), shallow=False),
                  "%s is not the source tree's %s" % (rel, srel))
        # the GPU module, found relative to the binary: here and after a move
        rc, out = run([b, "--version"], cwd=d)
        want = ("GPU module: %s/bin/../lib/fp8lab/fp8lab-gpu.so" % p if has_module
                else "GPU module: none")
        check(rc == 0 and out.startswith("fp8lab ") and want in out,
              "--version of the installed fp8lab: %r, expected a line %r" % (out, want))
        q = os.path.join(d, "moved")
        shutil.move(p, q)
        rc, out = run([os.path.join(q, "bin", "fp8lab"), "--version"], cwd=d)
        want_q = want.replace(p, q)
        check(rc == 0 and want_q in out, "--version after the move: %r, expected %r" % (out, want_q))
        b = os.path.join(q, "bin", "fp8lab")
        # the same experiment, run from another folder with relative paths, by both binaries
        work = os.path.join(d, "work")
        os.makedirs(os.path.join(work, "exp"))
        for name in ("installed", "built"):
            with open(os.path.join(work, "exp", name + ".ini"), "w") as f:
                f.write(EXP % ("out_" + name))
        for name, binary in (("installed", b), ("built", fp8lab)):
            rc, out = run([binary, "run", os.path.join("exp", name + ".ini"), "--quiet"], cwd=work)
            check(rc == 0, "%s fp8lab run from %s: exit %d: %s" % (name, work, rc, out[-600:]))
        # dir = ../out_X is relative to the experiment file (work/exp/): work/out_X
        oi, ob = os.path.join(work, "out_installed"), os.path.join(work, "out_built")
        for f in ("steps.csv", "stream.csv", "summary.csv"):
            a, c = os.path.join(oi, f), os.path.join(ob, f)
            check(os.path.exists(a) and os.path.exists(c) and filecmp.cmp(a, c, shallow=False),
                  "%s of the installed fp8lab differs from the build's (or is missing)" % f)
        plots = os.path.join(oi, "plots")
        npng = len([x for x in os.listdir(plots) if x.endswith(".png")]) if os.path.isdir(plots) else 0
        check(os.path.exists(os.path.join(oi, "report.md")) and npng > 0,
              "the installed fp8lab wrote no report with plots (%d PNG)" % npng)
        print("installed: bin/fp8lab%s, docs, experiments; moved and still finding its module; "
              "a run from another folder equal to the build's (%d PNG)" %
              (" and lib/fp8lab/fp8lab-gpu.so" if has_module else " (no CUDA: no module)", npng))


if __name__ == "__main__":
    main()
    if FAILS:
        print("%d failure(s)" % len(FAILS))
        sys.exit(1)
