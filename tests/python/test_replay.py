#!/usr/bin/env python3
"""End-to-end replay against the independent reference (tools/reference/fp8ref.py).

For random traces nobody has seen (gen_trace.py: safetensors and npy snapshots, amax.csv
between them, odd shapes, inf/NaN, FP8 rounding ties, step and tensor selections) and for a
short synthetic llm trace, `fp8lab run` must write a steps.csv whose every row equals the
reference: counts exactly, amax and scale bit-exactly, mse/snr_db to 1e-6 relative. The
"blocks" cases (gen_trace.py --blocks) add the block recipes (mxfp8 ceil/floor, block auto and
1x128 without pow2, rowwise) and GEMM layer triplets: steps.csv's block columns must match too
(nblocks, blocks_with_overflow exactly, log2 scale columns to 1e-9) and gemm.csv row for row
(rel_error to 1e-3 relative). Every case also checks that gemm.csv exists exactly when the
reference expects one (gemm = true and a layer triplet at a snapshot step): absent otherwise.

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


def compare(ini, outdir, trace=None, expect_gemm=None):
    """fp8ref compare of steps.csv and gemm.csv (--gemm: absent when the reference expects
    none). expect_gemm True/False also pins whether the reference expects a gemm.csv at all
    (False: --no-gemm). -> the summary line."""
    gemm = os.path.join(outdir, "gemm.csv")
    cmd = [sys.executable, os.path.join(REF, "fp8ref.py"), "compare", ini,
           os.path.join(outdir, "steps.csv"), "--no-gemm" if expect_gemm is False else "--gemm",
           gemm]
    if trace:
        cmd += ["--trace", trace]
    rc, out = run(cmd)
    assert rc == 0, out
    line = out.strip().splitlines()[-1]
    if expect_gemm is True:
        assert "gemm.csv matches" in line, line
    if expect_gemm is False:
        assert not os.path.exists(gemm), "%s exists, but no gemm.csv is expected" % gemm
    return line


def case_random(binary, tmp, seed, extra, expect_gemm=None, edit=None):
    d = os.path.join(tmp, "rand%d" % seed)
    blocks = "--blocks" in extra
    rc, out = run([sys.executable, os.path.join(REF, "gen_trace.py"), os.path.join(d, "trace"),
                   "--seed", str(seed), "--ini", os.path.join(d, "exp.ini")] + extra)
    assert rc == 0, out
    ini = os.path.join(d, "exp.ini")
    if edit:
        with open(ini) as f:
            text = f.read()
        for a, b in edit:
            assert a in text, a
            text = text.replace(a, b)
        with open(ini, "w") as f:
            f.write(text)
    if blocks:
        cmd = [binary, "run", ini, "--quiet", "--no-report"]
    else:
        cmd = [binary, "run", ini, "--quiet", "--threads", "2"]
    rc, out = run(cmd)
    assert rc == 0, out
    line = compare(ini, os.path.join(d, "out"), expect_gemm=expect_gemm)
    print("  seed %d %s: %s" % (seed, " ".join(extra), line))


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
    # the llm preset has input, weight and grad_output per layer: gemm.csv (gemm defaults to
    # true) exactly when the reference finds triplets with agreeing shapes
    line = compare(ini, os.path.join(d, "out"), trace=os.path.join(d, "out", "trace"))
    print("  synth:llm 60 steps: %s" % line)


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("FP8LAB_BIN", "fp8lab")
    tmp = tempfile.mkdtemp(prefix="fp8lab-replay-")
    cases = [
        # no layer triplets in these traces: gemm.csv must be absent
        ("random seed 11", lambda: case_random(binary, tmp, 11, [], False)),
        ("random seed 12 npy", lambda: case_random(binary, tmp, 12, ["--npy"], False)),
        ("random seed 13 selections", lambda: case_random(binary, tmp, 13, ["--select"], False)),
        ("random seed 14", lambda: case_random(binary, tmp, 14, [], False)),
        ("synth llm", lambda: case_synth(binary, tmp)),
        ("random seed 21 blocks", lambda: case_random(binary, tmp, 21, ["--blocks"], True)),
        ("random seed 22 blocks --select",
         lambda: case_random(binary, tmp, 22, ["--blocks", "--select"], True)),
        # triplets, but [analysis] gemm = false: no gemm.csv
        ("random seed 23 blocks gemm = false",
         lambda: case_random(binary, tmp, 23, ["--blocks"], False,
                             [("gemm = true", "gemm = false")])),
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
