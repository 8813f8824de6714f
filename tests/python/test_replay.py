#!/usr/bin/env python3
"""End-to-end replay against the independent reference (tools/reference/fp8ref.py).

For random traces nobody has seen (gen_trace.py: safetensors and npy snapshots, amax.csv
between them, odd shapes, inf/NaN, FP8 rounding ties, step and tensor selections) and for a
short synthetic llm trace, `fp8lab run` must write a steps.csv whose every row equals the
reference: counts exactly, amax and scale bit-exactly, mse/snr_db to 1e-6 relative.

Usage: test_replay.py FP8LAB_BIN    (exit 77 = skipped: numpy or ml_dtypes missing)
"""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
REF = os.path.join(ROOT, "tools", "reference")

try:
    import numpy  # noqa: F401
    import ml_dtypes  # noqa: F401
except ImportError as e:
    print("skipped: %s (scripts/install-deps.sh installs numpy and ml_dtypes)" % e)
    sys.exit(77)


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.returncode, p.stdout


def case_random(binary, tmp, seed, extra):
    d = os.path.join(tmp, "rand%d" % seed)
    rc, out = run([sys.executable, os.path.join(REF, "gen_trace.py"), os.path.join(d, "trace"),
                   "--seed", str(seed), "--ini", os.path.join(d, "exp.ini")] + extra)
    assert rc == 0, out
    rc, out = run([binary, "run", os.path.join(d, "exp.ini"), "--quiet", "--threads", "2"])
    assert rc == 0, out
    rc, out = run([sys.executable, os.path.join(REF, "fp8ref.py"), "compare", os.path.join(d, "exp.ini"),
                   os.path.join(d, "out", "steps.csv")])
    assert rc == 0, out
    print("  seed %d %s: %s" % (seed, " ".join(extra), out.strip().splitlines()[-1]))


def case_synth(binary, tmp):
    d = os.path.join(tmp, "synth")
    os.makedirs(d)
    ini = os.path.join(d, "exp.ini")
    with open(ini, "w") as f:
        f.write("[trace]\npath = synth:llm\nsynth_steps = 60\nsynth_seed = 7\n"
                "[recipe.d]\nkind = delayed\nhistory_len = 1, 16\nmargin = 0, 1\n"
                "amax_compute = max, most_recent\n"
                "[recipe.c]\nkind = current\n[output]\ndir = out\n")
    rc, out = run([binary, "run", ini, "--quiet", "--threads", "1"])
    assert rc == 0, out
    rc, out = run([sys.executable, os.path.join(REF, "fp8ref.py"), "compare", ini,
                   os.path.join(d, "out", "steps.csv"), "--trace", os.path.join(d, "out", "trace")])
    assert rc == 0, out
    print("  synth:llm 60 steps: %s" % out.strip().splitlines()[-1])


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("FP8LAB_BIN", "fp8lab")
    tmp = tempfile.mkdtemp(prefix="fp8lab-replay-")
    cases = [
        ("random seed 11", lambda: case_random(binary, tmp, 11, [])),
        ("random seed 12 npy", lambda: case_random(binary, tmp, 12, ["--npy"])),
        ("random seed 13 selections", lambda: case_random(binary, tmp, 13, ["--select"])),
        ("random seed 14", lambda: case_random(binary, tmp, 14, [])),
        ("synth llm", lambda: case_synth(binary, tmp)),
    ]
    passed = failed = 0
    try:
        for name, fn in cases:
            try:
                fn()
                passed += 1
            except AssertionError as e:
                failed += 1
                print("FAIL %s:\n%s" % (name, e))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
