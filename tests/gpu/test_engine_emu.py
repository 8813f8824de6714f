#!/usr/bin/env python3
"""The whole program on the GPU engine, without a GPU: `fp8lab run --device gpu` with
FP8LAB_GPU_MODULE naming fp8lab-gpu-emu.so (the GPU module, src/gpu/engine_gpu*.c, over the real
kernels of kernels/*.cu compiled through the CUDA emulator of tests/gpu/emu and the host-memory
CUDA runtime / cuBLASLt of tests/gpu/mock_cuda.c), loaded by fp8lab as a real run loads
fp8lab-gpu.so, self-check included, against `fp8lab run --device cpu`, compared by
scripts/compare_runs.py
with the parity rule of the GPU engine: every cell identical (stream.csv, clipped and the other
saturation columns included) except the columns computed from the double sums (mse, snr_db:
1e-6 relative; cos_sim, cos_sim_min: 1e-6 times their condition number) and gemm.csv's rel_error (the mock cuBLASLt
accumulates in its own order: 1e-3 relative, and 0.1 for fprop, whose real fast accumulation
the mock does not have). What this proves: the module's loading and self-check, engine_gpu.c's
calls (upload, the amax/histogram pass, the delayed pass on device-resident scales and its split
into launches of 64, current scaling's kernels, the fused update per phase, the GEMMs with
scale_inv pointers), and the runner's per-op fallback (block kinds, E5M2 x E5M2 GEMMs) are
right; what it cannot prove: the hardware's own behaviour (scripts/device-check.sh does that on a
GPU).

Cases (small: the emulator runs a block's 256 threads as fibers, ~1000x slower than the CPU
engine):
  - gemm: `synth llm` 2 steps, delayed hybrid and e5m2 (whose GEMMs cuBLASLt declines: the CPU
    computes them), current, mxfp8 (CPU), nvfp4 (Four Over Six; stochastic rounding) and mxfp4
    (their casts on the emulated GPU, kernels/fp4.cu; their GEMMs on the CPU), gemm = true,
    gemm_error = exact (the cuBLASLt path:
    the sampled default runs on the CPU engine) with token sampling;
  - many: 1 step, 70 per-tensor configurations (two launches of the fused kernel: 64 + 6);
  - ranks: a two-rank run folder with reduce_amax (the engine reduces over each tensor's
    ranks in end_phase);
  - unfused: delayed scaling under TE's fused update and its unfused path (unfused_update,
    issue 40) on amax.csv steps where half the tensors did not run, margin 10 included;
and: `--device auto` takes the emulated GPU (its self-check passes); a module whose engine is
wrong by one count (fp8lab-gpu-broken.so, tests/gpu/broken_module.c) makes `--device auto` warn
in one line and run on the CPU, and `--device gpu` fail with exit 1 naming the first mismatch;
a module that does not load makes `--device auto` warn in one line and run on the CPU;
`fp8lab run --device gpu` without FP8LAB_GPU_MODULE on this machine (no GPU) fails with one
line naming the reason, exit status 1, and writes no steps.csv.

Usage: test_engine_emu.py FP8LAB_BIN FP8LAB_GPU_EMU_MODULE FP8LAB_GPU_BROKEN_MODULE
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
COMPARE = os.path.join(ROOT, "scripts", "compare_runs.py")

GEMM_INI = """[trace]
path = trace
steps = 0-1
[recipe.d]
kind = delayed
format = hybrid
history_len = 1, 16
[recipe.d5]
kind = delayed
format = e5m2
history_len = 1, 16
[recipe.c]
kind = current
format = hybrid
pow2 = true
[recipe.mx]
kind = mxfp8
[recipe.nv]
kind = nvfp4
block_scale = 4over6_mae
[recipe.nvsr]
kind = nvfp4
rounding = stochastic
sr_seed = 3
[recipe.mx4]
kind = mxfp4
[analysis]
gemm = true
gemm_error = exact
gemm_max_tokens = 24
"""

# 5 formats x ... : delayed hybrid 4 x 3 x 2 = 24, e4m3 24, e5m2 2 x 3 x 2 = 12, current 10 -> 70
MANY_INI = """[trace]
path = trace
steps = 0
[recipe.h]
kind = delayed
format = hybrid
history_len = 1, 2, 16, 1024
margin = 0, 1, 3
amax_compute = max, most_recent
[recipe.e4]
kind = delayed
format = e4m3
history_len = 1, 2, 16, 1024
margin = 0, 1, 3
amax_compute = max, most_recent
[recipe.e5]
kind = delayed
format = e5m2
history_len = 1, 1024
margin = 0, 1, -2
amax_compute = max, most_recent
[recipe.c1]
kind = current
format = hybrid
[recipe.c1f]
kind = current
format = e4m3, e5m2
[recipe.c2]
kind = current
format = hybrid
pow2 = true
[recipe.c2f]
kind = current
format = e4m3, e5m2
pow2 = true
[recipe.c3]
kind = current
format = hybrid
margin = 2
amax_epsilon = 1e-20
[recipe.c3f]
kind = current
format = e4m3, e5m2
margin = 2
amax_epsilon = 1e-20
[recipe.c4]
kind = current
format = e5m2
margin = -1
[analysis]
gemm = false
"""

RANKS_INI = """[trace]
path = run
reduce_amax = true
[recipe.d]
kind = delayed
format = hybrid
history_len = 1, 8
[recipe.c]
kind = current
format = e4m3
[analysis]
gemm = false
"""

# issue 40: the fused update (an amax of 0 keeps the state) and TE's unfused one (the 0 rolled
# in; margin 10: _default_sf_compute's two roundings) side by side, on amax.csv steps where
# some tensors did not run (unfused_setup writes them)
UNFUSED_INI = """[trace]
path = trace
[recipe.fused]
kind = delayed
format = hybrid
history_len = 1, 2, 4
margin = 0, 10
[recipe.unfused]
kind = delayed
format = hybrid
history_len = 1, 2, 4
margin = 0, 10
unfused_update = true
[analysis]
gemm = false
"""


def unfused_setup(d):
    """amax.csv rows at steps 2 .. 13 for the snapshot's tensors (read from step_0's
    safetensors header): every other tensor gets 0 at steps 4 .. 9 (it did not run), and one
    tensor a tiny 1e-38 at step 11 (margin 10: the unfused scale is FLT_MAX, the fused finite)."""
    import struct
    with open(os.path.join(d, "trace", "step_0.safetensors"), "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        names = sorted(k for k in json.loads(f.read(n)) if k != "__metadata__")
    with open(os.path.join(d, "trace", "amax.csv"), "w") as f:
        f.write("step,tensor,amax\n")
        for t in range(2, 14):
            for k, name in enumerate(names):
                a = 0 if (k % 2 and 4 <= t <= 9) else (1.5 + k) * 1.25 ** (t % 5)
                if k == 0 and t == 11:
                    a = 1e-38
                f.write("%d,%s,%.9g\n" % (t, name, a))


def run(cmd, cwd=None, module=None):
    env = dict(os.environ)
    env.pop("FP8LAB_GPU_MODULE", None)
    if module:
        env["FP8LAB_GPU_MODULE"] = module
    p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       env=env)
    return p.returncode, p.stdout


def field(result, key):
    for tok in result.split():
        if tok.startswith(key + "="):
            return tok.split("=", 1)[1]
    return None


def main():
    if len(sys.argv) != 4:
        print("usage: test_engine_emu.py FP8LAB_BIN FP8LAB_GPU_EMU_MODULE FP8LAB_GPU_BROKEN_MODULE")
        return 2
    fp8lab, emu, broken = sys.argv[1], sys.argv[2], sys.argv[3]
    tmp = tempfile.mkdtemp(prefix="fp8lab-emu-")
    failures = []

    def check(cond, what, out=""):
        print(("ok    " if cond else "FAIL  ") + what)
        sys.stdout.flush()
        if not cond:
            failures.append(what)
            if out:
                print(out)

    def case(name, ini_text, setup, want_configs, want_gemm):
        d = os.path.join(tmp, name)
        os.makedirs(d)
        for cmd in setup:
            if callable(cmd):
                cmd(d)
                continue
            rc, out = run([fp8lab] + cmd, cwd=d)
            assert rc == 0, out
        with open(os.path.join(d, "exp.ini"), "w") as f:
            f.write(ini_text)
        rc, out = run([fp8lab, "run", "exp.ini", "--device", "gpu", "--no-report", "--quiet",
                       "--threads", "2", "--out", "gpu"], cwd=d, module=emu)
        check(rc == 0, "%s: fp8lab --device gpu runs on the emulated GPU module" % name, out)
        if rc != 0:
            return
        rc, out = run([fp8lab, "run", "exp.ini", "--device", "cpu", "--no-report", "--quiet",
                       "--out", "cpu"], cwd=d)
        assert rc == 0, out
        with open(os.path.join(d, "gpu", "run.json")) as f:
            runjson = f.read()
        check('"engine": "gpu: mock device' in runjson,
              "%s: run.json names the (emulated) GPU engine" % name, runjson[:400])
        sc = json.loads(runjson)["engine_details"]["self_check"]
        check(sc.get("ran") is True and sc.get("passed") is True and sc.get("values_compared", 0) > 1000,
              "%s: run.json records the passed self-check: %s" % (name, sc))
        check('"configurations": %d' % want_configs in runjson,
              "%s: %d configurations" % (name, want_configs), runjson[:400])
        rc, out = run([sys.executable, COMPARE, os.path.join(d, "cpu"), os.path.join(d, "gpu"),
                       "--show", "8"])
        res = [l for l in out.splitlines() if l.startswith("RESULT ")]
        res = res[-1] if res else ""
        check(rc == 0 and field(res, "status") == "PASS" and
              field(res, "exact_identical") == "yes" and int(field(res, "rows") or 0) > 100,
              "%s: GPU engine (emulated) = CPU: %s" % (name, res), out)
        gemm = field(res, "gemm_max_rel")
        check((gemm != "none") == want_gemm,
              "%s: gemm.csv %s" % (name, "compared" if want_gemm else "absent"), out)

    try:
        case("gemm", GEMM_INI, [["synth", "llm", "trace", "--steps", "2", "--seed", "4"]], 9, True)
        case("many", MANY_INI, [["synth", "spiky", "trace", "--steps", "1", "--seed", "9"]], 70,
             False)
        case("ranks", RANKS_INI, [["synth", "llm", "run/rank_0", "--steps", "2", "--seed", "1"],
                                  ["synth", "underflow", "run/rank_1", "--steps", "2", "--seed",
                                   "2"]], 3, False)
        case("unfused", UNFUSED_INI, [["synth", "llm", "trace", "--steps", "2", "--seed", "5"],
                                      unfused_setup], 12, False)

        # --device auto takes the GPU engine once its self-check passes
        d = os.path.join(tmp, "gemm")
        rc, out = run([fp8lab, "run", "exp.ini", "--no-report", "--quiet", "--out", "auto"],
                      cwd=d, module=emu)
        with open(os.path.join(d, "auto", "run.json")) as f:
            rj = json.load(f)
        check(rc == 0 and rj["engine"].startswith("gpu: mock device") and
              rj["engine_details"]["device"] == "auto",
              "--device auto picks the (emulated) GPU: engine %s" % rj["engine"], out)
        # a module that is wrong by one count: auto warns once and runs on the CPU, gpu fails
        rc, out = run([fp8lab, "run", "exp.ini", "--no-report", "--quiet", "--out", "broken_auto"],
                      cwd=d, module=broken)
        lines = [l for l in out.splitlines() if l.strip()]
        with open(os.path.join(d, "broken_auto", "run.json")) as f:
            rj = json.load(f)
        sc = rj["engine_details"]["self_check"]
        check(rc == 0 and len(lines) == 1 and "self-check" in lines[0] and
              "running on the CPU" in lines[0] and rj["engine"] == "cpu" and
              sc["ran"] is True and sc["passed"] is False and "overflow" in sc["note"],
              "--device auto with a failing self-check: one warning, the CPU: %s" %
              (lines[0] if lines else ""), out)
        rc, out = run([fp8lab, "run", "exp.ini", "--device", "gpu", "--quiet", "--out",
                       "broken_gpu"], cwd=d, module=broken)
        lines = [l for l in out.splitlines() if l.strip()]
        check(rc == 1 and len(lines) == 1 and "self-check" in lines[0] and "overflow" in lines[0] and
              not os.path.exists(os.path.join(d, "broken_gpu")),
              "--device gpu with a failing self-check: exit 1, one line: %s" %
              (lines[0] if lines else ""), out)

        # a module that cannot be loaded (a missing library, here a missing file): auto warns
        # once and runs on the CPU
        rc, out = run([fp8lab, "run", "exp.ini", "--no-report", "--quiet", "--out", "noload"],
                      cwd=d, module=os.path.join(tmp, "no-such-module.so"))
        lines = [l for l in out.splitlines() if l.strip()]
        check(rc == 0 and len(lines) == 1 and "cannot load the GPU module" in lines[0] and
              "running on the CPU" in lines[0],
              "--device auto with a module that does not load: one warning, the CPU: %s" %
              (lines[0] if lines else ""), out)

        # the real binary on a machine without a GPU: a clear one-line failure, nothing written
        d = os.path.join(tmp, "gemm")
        rc, out = run([fp8lab, "run", "exp.ini", "--device", "gpu", "--quiet", "--out", "nogpu"],
                      cwd=d)
        lines = [l for l in out.splitlines() if l.strip()]
        if rc == 0:
            print("note: a CUDA device is usable here; the no-device check is skipped")
        else:
            check(rc == 1 and len(lines) == 1 and "--device gpu" in lines[0] and
                  not os.path.exists(os.path.join(d, "nogpu", "steps.csv")),
                  "fp8lab --device gpu without a device: exit 1, one line: %s" %
                  (lines[0] if lines else ""), out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
