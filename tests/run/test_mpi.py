#!/usr/bin/env python3
"""The MPI replay (issue 26): `mpirun -np N fp8lab run` against the one-process run, byte for byte.

Traces from tools/reference/gen_trace.py, 4 ranks:
  - reduce_amax over contiguous groups of 2 (ranks {0, 1}, {2, 3}), with the GEMM layers
    (gemm.csv) and the report;
  - strided groups (reduce_group = 2, reduce_stride = 2: {0, 2}, {1, 3}) with two micro-batches
    at every amax.csv step of every rank (stream.csv per micro-batch);
  - a single-rank trace with GEMM layers and the report (its layers spread over the
    processes: a layer's input, weight and grad_output in one process);
  - a trace with a tokens.csv per rank (issue 40: experts.csv, process 0's, the same bytes);
  - an expert-parallel Mixture-of-Experts trace (gen_trace.py --moe 4 --ranks 2: each rank its
    own experts, both the attention and router tensors; experts without tokens at some steps;
    delayed scaling fused and unfused, reduce_amax; issue 40);
  - [trace] warm_history (issue 42): gen_trace.py --select (steps a-b:2 after the first
    snapshot: warm steps before the range and between, snapshot steps among them) on a 4-rank
    trace with reduce_amax and on a single-rank trace, -np 2 and 3;
  - a single-rank trace whose names interleave (layers `a.fc`, `a.fc-2` and `a.fc.h`, whose
    tensors do not sort next to each other, and lone tensors between them), so that process 0
    must merge the processes' rows by tensor and by layer.
For N = 1, 2, 3, 4 (more processes than ranks included, and oversubscribed on a 2-core
machine: --oversubscribe) every output file equals the one-process run's: steps.csv,
summary.csv, histograms.csv, stream.csv, gemm.csv, analysis.csv, recommendations.csv,
advice.ini, report.md; run.json too, but for its times and the process count (which it records
as `processes` when N > 1). Then the failures:
  - a truncated snapshot in rank_1/: every process exits 2, one `fp8lab:` line naming the file,
    no output folder left;
  - a process killed mid-run (SIGKILL to MPI rank 1 of 2, checkpoints after every step): the
    job ends (mpirun stops the others), and `--resume` continues it from its last checkpoint
    (after step > 0) to the same bytes: with the same process count (mpirun -np 2), with
    another (-np 3) and with one process, each on a copy of the killed folder.

With the GPU module over the CUDA emulator (fp8lab-gpu-emu.so next to the binary: CUDA's headers
were found), the GPU engine under MPI: `mpirun -np 1 fp8lab run --device gpu` bootstraps an
NCCL communicator over MPI (process 0's unique id broadcast; the mock NCCL: a world of one) and
exchanges the amaxes through it (run.json's amax_exchange "NCCL..., world 1"); -np 2, where the
mock NCCL refuses a world of two, falls back to MPI_Allreduce on every process and says why. Both
write the one-process GPU run's files byte for byte, and that run agrees with the CPU engine's
by the GPU engine's parity rule (scripts/compare_runs.py).

Usage: test_mpi.py FP8LAB_BIN   (exit 77 = skipped: mpirun, numpy or ml_dtypes missing). As
root, Open MPI needs OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM), which this script sets.
"""
import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
GEN = os.path.join(ROOT, "tools", "reference", "gen_trace.py")

if shutil.which("mpirun") is None:
    print("skipped: no mpirun")
    sys.exit(77)
try:
    import numpy  # noqa: F401  (gen_trace.py)
    import ml_dtypes  # noqa: F401
except ImportError as e:
    if os.environ.get("FP8LAB_REQUIRE_PYDEPS", "") not in ("", "0"):
        print("FAILED: %s, and FP8LAB_REQUIRE_PYDEPS is set" % e)
        sys.exit(1)
    print("skipped: %s" % e)
    sys.exit(77)

ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1")
# The machine's MPI must start processes at all (a container without shared memory or a
# resolvable host name cannot): that is not fp8lab's to test, and is said, not hidden.
_probe = subprocess.run(["mpirun", "--oversubscribe", "-np", "2", "true"], env=ENV,
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
if _probe.returncode != 0:
    print("skipped: mpirun cannot start 2 processes on this machine (exit %d): %s"
          % (_probe.returncode, _probe.stdout.strip()[-500:]))
    sys.exit(77)
FILES = ["steps.csv", "summary.csv", "histograms.csv", "stream.csv", "gemm.csv", "analysis.csv",
         "recommendations.csv", "advice.ini", "report.md", "experts.csv"]
VOLATILE = {"started_utc", "wall_time_s", "processes", "process_snapshot_bytes",
            "amax_exchange"}
FAILS = []


def check(cond, msg):
    if not cond:
        FAILS.append(msg)
        print("FAIL: " + msg)
    return cond


def run(cmd, cwd, timeout=300, env=None):
    p = subprocess.run(cmd, cwd=cwd, env=env or ENV, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=timeout)
    return p.returncode, p.stdout


def mpirun(n, args):
    return ["mpirun", "--oversubscribe", "-np", str(n)] + args


def same_outputs(a, b, n):
    """Every file of run a equal to run b's (run.json: the non-volatile keys)."""
    for f in FILES:
        fa, fb = os.path.join(a, f), os.path.join(b, f)
        if not check(os.path.exists(fa) == os.path.exists(fb), "%s: %s in one run only" % (b, f)):
            continue
        if os.path.exists(fa):
            with open(fa, "rb") as x, open(fb, "rb") as y:
                check(x.read() == y.read(), "%s: %s differs from the one-process run's" % (b, f))
    with open(os.path.join(a, "run.json")) as x, open(os.path.join(b, "run.json")) as y:
        ja, jb = json.load(x), json.load(y)
    check(jb.get("processes") == (n if n > 1 else None),
          "%s: run.json processes %r, expected %r" % (b, jb.get("processes"), n if n > 1 else None))
    ka = {k: v for k, v in ja.items() if k not in VOLATILE}
    kb = {k: v for k, v in jb.items() if k not in VOLATILE}
    check(ka == kb, "%s: run.json differs: %s" % (
        b, sorted(k for k in set(ka) | set(kb) if ka.get(k) != kb.get(k))))


def add_micro(trace):
    """Two micro-batches at every amax.csv row of every rank: micro 0 the amax, micro 1 twice it."""
    for r in sorted(os.listdir(trace)):
        path = os.path.join(trace, r, "amax.csv")
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
        with open(path, "w") as f:
            f.write("step,tensor,amax,micro\n")
            for d in rows:
                a = float(d["amax"])
                f.write("%s,%s,%s,0\n%s,%s,%.9g,1\n" % (d["step"], d["tensor"], d["amax"],
                                                       d["step"], d["tensor"], 2 * a))


def make(d, seed, ranks, extra):
    ini = os.path.join(d, "exp.ini")
    args = [sys.executable, GEN, os.path.join(d, "tr"), "--seed", str(seed), "--ini", ini] + extra
    if ranks:
        args += ["--ranks", str(ranks)]
    rc, out = run(args, d)
    assert rc == 0, out
    return ini


def case_identical(binary, tmp, name, seed, ranks, extra, micro=False, report=True,
                   nps=(1, 2, 3, 4)):
    d = os.path.join(tmp, name)
    os.makedirs(d)
    ini = make(d, seed, ranks, extra)
    if micro:
        add_micro(os.path.join(d, "tr"))
    base = [binary, "run", ini, "--quiet", "--threads", "1"] + ([] if report else ["--no-report"])
    rc, out = run(base + ["--out", "one"], d)
    if not check(rc == 0, "%s: one process: exit %d: %s" % (name, rc, out)):
        return
    if "--select" in extra:  # a steps selection that leaves out earlier steps: warm steps
        with open(os.path.join(d, "one", "run.json")) as f:
            tr = json.load(f)["trace"]
        check(tr.get("warm_history") is True and tr.get("steps_before", 0) > 0 and
              tr.get("steps_skipped", 0) > 0, "%s: no warm steps: %s" % (name, tr))
    t = time.time()
    for n in nps:
        rc, out = run(mpirun(n, base + ["--out", "mp%d" % n]), d)
        if check(rc == 0, "%s: -np %d: exit %d: %s" % (name, n, rc, out[-2000:])):
            same_outputs(os.path.join(d, "one"), os.path.join(d, "mp%d" % n), n)
    print("  %s: -np %s identical to one process (%.1f s)" % (name, ",".join(map(str, nps)),
                                                             time.time() - t))


def write_safetensors(path, tensors):
    """F32 tensors {name: numpy array} as a safetensors file (names sorted, data in order)."""
    import numpy as np
    header, blobs, at = {}, [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name], dtype="<f4")
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [at, at + a.nbytes]}
        blobs.append(a.tobytes())
        at += a.nbytes
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h + b"".join(blobs))


def case_interleaved(binary, tmp):
    """Names whose tensors and layers sort apart: `a.fc-2.*` < `a.fc.grad_output` < `a.fc.h`
    (a lone tensor) < `a.fc.h.*` (a layer) < `a.fc.input`; gemm.csv's layers in strcmp order
    (a.fc < a.fc-2 < a.fc.h) differ from their tensors' order."""
    import numpy as np
    d = os.path.join(tmp, "interleaved")
    os.makedirs(os.path.join(d, "tr"))
    rng = np.random.default_rng(84)
    layers = {"a.fc": (24, 32, 16), "a.fc-2": (24, 16, 40), "a.fc.h": (24, 8, 8),
              "b": (12, 64, 32)}
    for step in (0, 5, 10):
        t = {}
        for name, (tok, n_in, n_out) in layers.items():
            t[name + ".input"] = rng.standard_normal((tok, n_in)) * (1 + step)
            t[name + ".weight"] = rng.standard_normal((n_out, n_in)) * 0.02
            t[name + ".grad_output"] = rng.standard_normal((tok, n_out)) * 1e-4
        t["a.fc.h"] = rng.standard_normal((7, 5)) * 3
        t["a.fc.output"] = rng.standard_normal((24, 16))
        t["a"] = rng.standard_normal((9,)) * 100
        write_safetensors(os.path.join(d, "tr", "step_%d.safetensors" % step), t)
    with open(os.path.join(d, "exp.ini"), "w") as f:
        f.write("[trace]\npath = tr\n[recipe.delayed]\nkind = delayed\nformat = e4m3\n"
                "history_len = 1, 4\nmargin = 0\n[recipe.current]\nkind = current\n"
                "format = e4m3\n"
                "[analysis]\ngemm = true\n")
    base = [binary, "run", "exp.ini", "--quiet", "--threads", "1", "--no-report"]
    rc, out = run(base + ["--out", "one"], d)
    if not check(rc == 0, "interleaved: one process: exit %d: %s" % (rc, out)):
        return
    with open(os.path.join(d, "one", "gemm.csv")) as f:
        layer_order = list(dict.fromkeys(row["layer"] for row in csv.DictReader(f)))
    check(layer_order == ["a.fc", "a.fc-2", "a.fc.h", "b"],
          "interleaved: gemm.csv's layers %s" % layer_order)
    for n in (2, 3, 4):
        rc, out = run(mpirun(n, base + ["--out", "mp%d" % n]), d)
        if check(rc == 0, "interleaved: -np %d: exit %d: %s" % (n, rc, out[-2000:])):
            same_outputs(os.path.join(d, "one"), os.path.join(d, "mp%d" % n), n)
            with open(os.path.join(d, "mp%d" % n, "run.json")) as f:
                pb = json.load(f).get("process_snapshot_bytes", [])
            # six units (the layers a.fc, a.fc-2, a.fc.h with its lone namesake, b; the lone
            # a and a.fc.output) for at most 4 processes: every process has a share
            check(len(pb) == n and all(b > 0 for b in pb),
                  "interleaved: -np %d: process_snapshot_bytes %s" % (n, pb))
    print("  interleaved names: -np 2..4 identical to one process")


def case_tokens(binary, tmp):
    """A Mixture-of-Experts trace with a tokens.csv per rank (issue 40): 3 ranks, expert 0 on
    every rank (a replica), experts 1..3 one per rank, snapshots at steps 0 and 5, amax.csv and
    tokens.csv at steps 0..9: experts.csv (written by process 0 alone) and every other file
    equal the one-process run's at -np 2 and 3."""
    import numpy as np
    d = os.path.join(tmp, "tokens")
    rng = np.random.default_rng(40)
    for r in range(3):
        rd = os.path.join(d, "tr", "rank_%d" % r)
        os.makedirs(rd)
        gemms = ["m.experts.0.up", "m.experts.%d.up" % (r + 1)]
        for step in (0, 5):
            t = {}
            for g in gemms:
                t[g + ".input"] = rng.standard_normal((8, 16)) * (1 + r)
                t[g + ".weight"] = rng.standard_normal((4, 16)) * 0.02
            write_safetensors(os.path.join(rd, "step_%d.safetensors" % step), t)
        with open(os.path.join(rd, "amax.csv"), "w") as f, \
                open(os.path.join(rd, "tokens.csv"), "w") as k:
            f.write("step,tensor,amax\n")
            k.write("step,gemm,tokens\n")
            for step in range(10):
                for g in gemms:
                    n = int(rng.integers(0, 3)) * int(rng.integers(1, 100))
                    if step not in (0, 5):
                        f.write("%d,%s.input,%.9g\n" % (step, g, 0 if n == 0 else 1 + step))
                    k.write("%d,%s,%d\n" % (step, g, n))
    with open(os.path.join(d, "exp.ini"), "w") as f:
        f.write("[trace]\npath = tr\n[recipe.delayed]\nkind = delayed\nhistory_len = 1, 4\n"
                "[recipe.current]\nkind = current\n")
    base = [binary, "run", "exp.ini", "--quiet", "--threads", "1", "--no-report"]
    rc, out = run(base + ["--out", "one"], d)
    if not check(rc == 0, "tokens: one process: exit %d: %s" % (rc, out)):
        return
    with open(os.path.join(d, "one", "experts.csv")) as f:
        rows = f.read().splitlines()
    check(len(rows) == 1 + 4 and rows[1].startswith("m.experts.0.up,m.experts.*.up,0,10,"),
          "tokens: experts.csv of one process: %s" % rows)
    for n in (2, 3):
        rc, out = run(mpirun(n, base + ["--out", "mp%d" % n]), d)
        if check(rc == 0, "tokens: -np %d: exit %d: %s" % (n, rc, out[-2000:])):
            same_outputs(os.path.join(d, "one"), os.path.join(d, "mp%d" % n), n)
    print("  a trace with tokens.csv: experts.csv and the rest at -np 2, 3 identical to one process")


def case_gpu_emu(binary, tmp):
    module = os.path.join(os.path.dirname(binary), "fp8lab-gpu-emu.so")
    if not os.path.exists(module):
        print("  the GPU engine under MPI: not checked (no fp8lab-gpu-emu.so: built without "
              "CUDA's headers)")
        return
    d = os.path.join(tmp, "gpu_emu")
    os.makedirs(d)
    ini = make(d, 85, 0, ["--blocks"])
    env = dict(ENV, FP8LAB_GPU_MODULE=module)
    base = [binary, "run", ini, "--quiet", "--threads", "1", "--no-report"]
    rc, out = run(base + ["--out", "cpu", "--device", "cpu"], d)
    check(rc == 0, "gpu_emu: CPU run: %s" % out)
    rc, out = run(base + ["--out", "gpu", "--device", "gpu"], d, env=env)
    if not check(rc == 0, "gpu_emu: GPU run: %s" % out):
        return
    rc, out = run([sys.executable, os.path.join(ROOT, "scripts", "compare_runs.py"),
                   os.path.join(d, "cpu"), os.path.join(d, "gpu"), "--quiet"], d)
    check(rc == 0, "gpu_emu: the GPU run disagrees with the CPU run: %s" % out[-1500:])
    seen = []
    for n in (1, 2):
        o = "gpu_mp%d" % n
        rc, out = run(mpirun(n, base + ["--out", o, "--device", "gpu"]), d, env=env)
        if not check(rc == 0, "gpu_emu: -np %d: exit %d: %s" % (n, rc, out[-2000:])):
            continue
        same_outputs(os.path.join(d, "gpu"), os.path.join(d, o), n)
        with open(os.path.join(d, o, "run.json")) as f:
            ex = json.load(f).get("amax_exchange", "")
        if n == 1:
            check(ex.startswith("NCCL") and ex.endswith(", world 1"),
                  "gpu_emu: -np 1: amax_exchange %r, expected NCCL's world of one" % ex)
        else:
            check(ex.startswith("MPI_Allreduce (NCCL: ncclCommInitRank (rank 0 of 2"),
                  "gpu_emu: -np 2: amax_exchange %r, expected MPI with NCCL's reason" % ex)
        seen.append("-np %d: %s" % (n, ex))
    print("  the GPU engine (emulated) under MPI, identical to one process: " + "; ".join(seen))


def case_bad_file(binary, tmp):
    d = os.path.join(tmp, "bad")
    os.makedirs(d)
    ini = make(d, 71, 4, ["--reduce-amax"])
    step = sorted(f for f in os.listdir(os.path.join(d, "tr", "rank_1")) if f.endswith(".safetensors"))[-1]
    bad = os.path.join("tr", "rank_1", step)
    os.truncate(os.path.join(d, bad), 100)
    rc, out = run(mpirun(2, [binary, "run", ini, "--quiet", "--threads", "1", "--out", "o"]), d)
    lines = [l for l in out.splitlines() if l.startswith("fp8lab:")]
    check(rc == 2, "bad file: mpirun exit %d, expected 2" % rc)
    check(len(lines) == 1 and bad in lines[0], "bad file: expected one fp8lab line naming %s, got %s"
          % (bad, lines))
    check(not os.path.exists(os.path.join(d, "o")), "bad file: an output folder was left")
    print("  a truncated snapshot in rank_1/: exit 2, one line: %s" % (lines[0] if lines else "-"))


def ranks_of(out_dir):
    """PIDs of the running fp8lab processes of the run writing out_dir, by MPI rank."""
    found = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmd = f.read().split(b"\0")
            with open("/proc/%s/environ" % pid, "rb") as f:
                env = dict(e.split(b"=", 1) for e in f.read().split(b"\0") if b"=" in e)
        except OSError:
            continue
        if b"run" in cmd and out_dir.encode() in cmd and b"OMPI_COMM_WORLD_RANK" in env:
            found[int(env[b"OMPI_COMM_WORLD_RANK"])] = int(pid)
    return found


def case_killed(binary, tmp):
    d = os.path.join(tmp, "killed")
    os.makedirs(d)
    ini = make(d, 72, 4, ["--reduce-amax", "--reduce-group", "2", "--blocks"])
    base = [binary, "run", ini, "--quiet", "--threads", "1"]
    rc, out = run(base + ["--out", "one"], d)
    check(rc == 0, "killed: one process: %s" % out)
    env = dict(ENV, FP8LAB_TEST_STEP_DELAY_MS="300")  # ~90 steps: about 27 s in all
    p = subprocess.Popen(mpirun(2, base + ["--out", "k", "--checkpoint-interval", "0"]), cwd=d,
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    victim = None
    for _ in range(600):  # until rank 1 runs (at most 30 s), then a few steps more
        time.sleep(0.05)
        pids = ranks_of(os.path.join(d, "k")) or ranks_of("k")
        if 1 in pids:
            victim = pids[1]
            break
    time.sleep(2.0)
    if check(victim is not None, "killed: MPI rank 1 not found"):
        os.kill(victim, signal.SIGKILL)
    out, _ = p.communicate(timeout=120)
    check(p.returncode != 0, "killed: mpirun exit %d after a SIGKILL" % p.returncode)
    check(os.path.exists(os.path.join(d, "k", ".fp8lab-run-in-progress")),
          "killed: the folder is not marked as interrupted")
    resumed = []
    for n in (2, 3, 1):
        k = "k%d" % n
        shutil.copytree(os.path.join(d, "k"), os.path.join(d, k), symlinks=True)
        cmd = [binary, "run", ini, "--threads", "1", "--no-report", "--out", k, "--resume"]
        rc, out = run(mpirun(n, cmd) if n > 1 else cmd, d)
        at = [l for l in out.splitlines() if l.startswith("fp8lab: resumed ")]
        if check(rc == 0 and len(at) == 1, "killed: --resume with %d processes: exit %d: %s"
                 % (n, rc, out[-2000:])):
            # "fp8lab: resumed <dir> after step S of T": a checkpoint past the first
            step = int(at[0].split(" after step ")[1].split()[0])
            check(step > 0, "killed: resumed from step 0: no checkpoint past the first")
            resumed.append("-np %d after step %d" % (n, step))
            rc, out = run([binary, "report", k, "--quiet"], d)
            check(rc == 0, "killed: report after the resume: %s" % out)
            same_outputs(os.path.join(d, "one"), os.path.join(d, k), n)
    print("  MPI rank 1 of 2 killed: mpirun exit %d; --resume completes it, identical: %s"
          % (p.returncode, ", ".join(resumed)))


def main():
    binary = os.path.abspath(sys.argv[1])
    keep = os.environ.get("FP8LAB_KEEP_TMP")
    tmp = keep if keep else tempfile.mkdtemp(prefix="fp8lab-mpi-")
    os.makedirs(tmp, exist_ok=True)
    try:
        case_identical(binary, tmp, "groups_gemm", 81, 4,
                       ["--reduce-amax", "--reduce-group", "2", "--blocks"])
        case_identical(binary, tmp, "strided_micro", 82, 4,
                       ["--reduce-amax", "--reduce-group", "2", "--reduce-stride", "2"],
                       micro=True, report=False)
        case_identical(binary, tmp, "single_rank", 83, 0, ["--blocks"])
        # Mixture-of-Experts, expert-parallel (issue 40): 4 experts over 2 ranks (rank 0
        # experts 0-1, rank 1 experts 2-3, attention and router on both: the ranks' tensor sets
        # differ), zero-token expert steps, fused and unfused delayed updates, reduce_amax
        # over the ranks that hold a tensor, exact GEMM errors
        case_identical(binary, tmp, "expert_parallel", 84, 2, ["--moe", "4", "--reduce-amax"],
                       report=False)
        # [trace] warm_history (issue 42): a selection whose left-out steps (before its range,
        # and those its stride skips; snapshot steps among them) feed the histories: each
        # process the amaxes of its own ranks' or layers' tensors, exchanged as a step's are
        case_identical(binary, tmp, "warm_ranks", 85, 4, ["--reduce-amax", "--select"],
                       report=False, nps=(2, 3))
        case_identical(binary, tmp, "warm_layers", 86, 0, ["--blocks", "--select"],
                       report=False, nps=(2, 3))
        case_interleaved(binary, tmp)
        case_tokens(binary, tmp)
        case_gpu_emu(binary, tmp)
        case_bad_file(binary, tmp)
        case_killed(binary, tmp)
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)
    if FAILS:
        print("FAILED: %d checks" % len(FAILS))
        return 1
    print("ok: the MPI replay equals the one-process replay byte for byte")
    return 0


if __name__ == "__main__":
    sys.exit(main())
