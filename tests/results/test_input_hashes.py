#!/usr/bin/env python3
"""run.json's inputs[]: every file the run read, each with its bytes and its sha256 (issue 41).

The reference is Python's hashlib and the trace folder itself: for each run, inputs[] lists
the experiment file and every regular file of the trace folder (walked here: snapshots,
amax.csv, tokens.csv, a TransformerEngine import's te_log.json and te_overflows.csv), nothing
else, each once; its "sha256" is hashlib.sha256 of the file's bytes (64 lowercase hex digits)
and its "bytes" the file's size. Traces:

  - single-rank: `fp8lab synth llm` (snapshots and amax.csv);
  - multi-rank with snapshots: two `fp8lab synth llm` traces as rank_0/ and rank_1/;
  - multi-rank from TransformerEngine's logs: `fp8lab import-te` of two ranks' logs in TE's
    format (tests/trace/test_te_logs.py's te_line) with overflows%: rank_<r>/amax.csv,
    te_log.json and te_overflows.csv;
  - with --mpi: `mpirun -np 2 fp8lab run` over the multi-rank traces (process 0 writes run.json
    and hashes every rank's files).

Usage: test_input_hashes.py FP8LAB_BIN [--mpi]. Standard library only.
"""
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

BIN = os.path.abspath(sys.argv[1])
MPI = "--mpi" in sys.argv[2:]
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "trace"))
import test_te_logs as tl  # noqa: E402  (TE's log format)

FAILS = []
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1")
HEX = re.compile(r"^[0-9a-f]{64}$")


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL:", what)
    return cond


def run(cmd, cwd):
    p = subprocess.run(cmd, cwd=cwd, env=ENV, capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout + p.stderr


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def trace_files(tmp, trace):
    """Every regular file under the trace folder, as paths relative to tmp (the run's cwd)."""
    got = set()
    for root, dirs, files in os.walk(os.path.join(tmp, trace)):
        for f in files:
            got.add(os.path.relpath(os.path.join(root, f), tmp))
    return got


def check_inputs(tmp, out, ini, trace, label, want_extra=()):
    if out is None:
        return  # the run failed: said already
    doc = json.load(open(os.path.join(tmp, out, "run.json")))
    ins = doc["inputs"]
    paths = [os.path.normpath(e["path"]) for e in ins]
    want = {ini} | trace_files(tmp, trace)
    check(len(paths) == len(set(paths)) and set(paths) == want,
          "%s: inputs[] against the experiment and the trace folder's files: %s in one only"
          % (label, sorted(set(paths) ^ want)))
    for f in want_extra:
        check(os.path.join(trace, f) in paths, "%s: %s not among the inputs" % (label, f))
    bad = [e["path"] for e in ins
           if not HEX.match(e.get("sha256", "")) or
           e["sha256"] != sha256(os.path.join(tmp, e["path"])) or
           e.get("bytes") != os.path.getsize(os.path.join(tmp, e["path"]))]
    if check(not bad, "%s: sha256 or bytes not the file's: %s" % (label, bad)):
        print("%s: %d inputs, each sha256 equal to hashlib's" % (label, len(ins)))


EXP = """[trace]
path = %s
[recipe.delayed]
kind = delayed
format = hybrid
history_len = 1, 4
margin = 0
"""


def replay(tmp, trace, name, mpi=False):
    ini = name + ".ini"
    with open(os.path.join(tmp, ini), "w") as f:
        f.write(EXP % trace)
    cmd = [BIN, "run", ini, "--out", "out_" + name, "--no-report", "--quiet", "--threads", "1"]
    if mpi:
        cmd = ["mpirun", "--oversubscribe", "-np", "2"] + cmd
    rc, text = run(cmd, tmp)
    if not check(rc == 0, "%s: run exit %d: %s" % (name, rc, text.strip()[-800:])):
        return None, ini
    return "out_" + name, ini


def te_logs(tmp):
    """Two ranks' TE logs with cur_amax and overflows% over 10 iterations."""
    d = os.path.join(tmp, "logs", "nvdlfw_inspect_statistics_logs")
    os.makedirs(d)
    for r in range(2):
        lines = []
        for it in range(10):
            for t, stat in (("activation", "overflows%"), ("weight", "overflows%"),
                            ("gradient", "fp8_delayed_scaling_overflows%")):
                lines.append(tl.te_line("net.fc1_%s_cur_amax" % t, it, 1.5 + it + r))
                lines.append(tl.te_line("net.fc1_%s_%s" % (t, stat), it, 0.01 * (it % 3 == 0)))
        with open(os.path.join(d, "nvdlfw_inspect_globalrank-%d.log" % r), "w") as f:
            f.writelines(lines)
    return os.path.join(tmp, "logs")


def write_npy(path, values):
    """A float32 vector in NumPy's .npy format 1.0, written by hand (no numpy needed)."""
    import struct
    hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d,), }" % len(values)
    hdr += " " * (63 - (10 + len(hdr)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode())
        f.write(struct.pack("<%df" % len(values), *values))


def npy_trace(tmp):
    """An npy trace: step_<N>/ folders of <tensor>.npy files (each file an input), a hidden
    file in one (not read, not an input)."""
    for step in (0, 1):
        d = os.path.join(tmp, "npy", "step_%d" % step)
        os.makedirs(d)
        for k, t in enumerate(("l0.fc1.input", "l0.fc1.weight", "l0.fc1.grad_output")):
            write_npy(os.path.join(d, t + ".npy"), [0.5 * (k + 1) + step, -0.25, 3.0 + k])
    with open(os.path.join(tmp, "npy", "step_1", ".notes"), "w") as f:
        f.write("not a snapshot\n")


def main():
    tmp = tempfile.mkdtemp(prefix="fp8lab-input-hashes-")
    try:
        # single-rank
        rc, text = run([BIN, "synth", "llm", "one", "--steps", "12"], tmp)
        check(rc == 0, "synth one: %s" % text)
        out, ini = replay(tmp, "one", "one")
        check_inputs(tmp, out, ini, "one", "single-rank", ("amax.csv", "step_0.safetensors"))
        # npy step folders: every .npy file of each is an input (the folder cannot be hashed)
        npy_trace(tmp)
        out, ini = replay(tmp, "npy", "npy")
        if out:
            os.remove(os.path.join(tmp, "npy", "step_1", ".notes"))  # the folder's only non-input
        check_inputs(tmp, out, ini, "npy", "npy step folders", ("step_0/l0.fc1.weight.npy",))
        # multi-rank with snapshots
        for r in range(2):
            rc, text = run([BIN, "synth", "llm", "ranks/rank_%d" % r, "--steps", "12",
                            "--seed", str(r + 1)], tmp)
            check(rc == 0, "synth rank %d: %s" % (r, text))
        out, ini = replay(tmp, "ranks", "ranks")
        check_inputs(tmp, out, ini, "ranks", "multi-rank", ("rank_1/amax.csv",))
        # multi-rank from TE's logs: the import's te_log.json and te_overflows.csv too
        rc, text = run([BIN, "import-te", te_logs(tmp), "te"], tmp)
        check(rc == 0, "import-te: %s" % text)
        out, ini = replay(tmp, "te", "te")
        check_inputs(tmp, out, ini, "te", "TE import (2 ranks)",
                     ("te_log.json", "te_overflows.csv", "rank_0/amax.csv"))
        if MPI:
            for trace in ("ranks", "te"):
                out, ini = replay(tmp, trace, trace + "_mpi", mpi=True)
                if out is None:
                    continue
                doc = json.load(open(os.path.join(tmp, out, "run.json")))
                check(doc.get("processes") == 2, "%s under MPI: processes %r"
                      % (trace, doc.get("processes")))
                check_inputs(tmp, out, ini, trace, "%s, mpirun -np 2" % trace)
    finally:
        if not FAILS:
            shutil.rmtree(tmp)
        else:
            print("kept", tmp)
    if FAILS:
        print("%d failures" % len(FAILS))
        sys.exit(1)
    print("input hashes: all checks passed")


if __name__ == "__main__":
    main()
