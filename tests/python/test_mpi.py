#!/usr/bin/env python3
"""The MPI replay (issue 26): `mpirun -np N fp8lab run` against the one-process run, byte for byte.

Traces from tools/reference/gen_trace.py, 4 ranks:
  - reduce_amax over contiguous groups of 2 (ranks {0, 1}, {2, 3}), with the GEMM layers
    (gemm.csv) and the report;
  - strided groups (reduce_group = 2, reduce_stride = 2: {0, 2}, {1, 3}) with two micro-batches
    at every amax.csv step of every rank (stream.csv per micro-batch);
  - a single-rank trace (process 0 replays it alone; the others wait).
For N = 1, 2, 3, 4 (more processes than ranks included, and oversubscribed on a 2-core
machine: --oversubscribe) every output file equals the one-process run's: steps.csv,
summary.csv, histograms.csv, stream.csv, gemm.csv, analysis.csv, recommendations.csv,
advice.ini, report.md; run.json too, but for its times and the process count (which it records
as `processes` when N > 1). Then the failures:
  - a truncated snapshot in rank_1/: every process exits 2, one `fp8lab:` line naming the file,
    no output folder left;
  - a process killed mid-run (SIGKILL to MPI rank 1): the job ends (mpirun stops the others),
    and `fp8lab run --resume` with one process completes it to the same bytes;
  - `--resume` under MPI: exit 2, saying to resume with one process.

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
         "recommendations.csv", "advice.ini", "report.md"]
VOLATILE = {"started_utc", "wall_time_s", "processes"}
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


def case_identical(binary, tmp, name, seed, ranks, extra, micro=False, report=True):
    d = os.path.join(tmp, name)
    os.makedirs(d)
    ini = make(d, seed, ranks, extra)
    if micro:
        add_micro(os.path.join(d, "tr"))
    base = [binary, "run", ini, "--quiet", "--threads", "1"] + ([] if report else ["--no-report"])
    rc, out = run(base + ["--out", "one"], d)
    if not check(rc == 0, "%s: one process: exit %d: %s" % (name, rc, out)):
        return
    t = time.time()
    for n in (1, 2, 3, 4):
        rc, out = run(mpirun(n, base + ["--out", "mp%d" % n]), d)
        if check(rc == 0, "%s: -np %d: exit %d: %s" % (name, n, rc, out[-2000:])):
            same_outputs(os.path.join(d, "one"), os.path.join(d, "mp%d" % n), n)
    print("  %s: -np 1..4 identical to one process (%.1f s)" % (name, time.time() - t))


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
    ini = make(d, 72, 4, ["--reduce-amax", "--reduce-group", "2"])
    base = [binary, "run", ini, "--quiet", "--threads", "1"]
    rc, out = run(base + ["--out", "one"], d)
    check(rc == 0, "killed: one process: %s" % out)
    env = dict(ENV, FP8LAB_TEST_STEP_DELAY_MS="300")  # ~90 steps: about 27 s in all
    p = subprocess.Popen(mpirun(2, base + ["--out", "k"]), cwd=d, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    victim = None
    for _ in range(600):  # until rank 1 runs (at most 30 s), then a few steps more
        time.sleep(0.05)
        pids = ranks_of(os.path.join(d, "k")) or ranks_of("k")
        if 1 in pids:
            victim = pids[1]
            break
    time.sleep(1.0)
    if check(victim is not None, "killed: MPI rank 1 not found"):
        os.kill(victim, signal.SIGKILL)
    out, _ = p.communicate(timeout=120)
    check(p.returncode != 0, "killed: mpirun exit %d after a SIGKILL" % p.returncode)
    check(os.path.exists(os.path.join(d, "k", ".fp8lab-run-in-progress")),
          "killed: the folder is not marked as interrupted")
    rc, out = run(base + ["--out", "k", "--resume"], d)
    if check(rc == 0, "killed: --resume with one process: exit %d: %s" % (rc, out)):
        same_outputs(os.path.join(d, "one"), os.path.join(d, "k"), 1)
    print("  MPI rank 1 killed: mpirun exit %d; --resume (one process) completes it, identical"
          % p.returncode)
    # --resume under MPI: refused, every process the same
    rc, out = run(mpirun(2, base + ["--out", "k", "--resume"]), d)
    lines = [l for l in out.splitlines() if l.startswith("fp8lab:")]
    check(rc == 2 and len(lines) == 1 and "--resume is not supported under MPI" in lines[0],
          "resume under MPI: exit %d, %s" % (rc, lines))


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
        case_identical(binary, tmp, "single_rank", 83, 0, [], report=False)
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
