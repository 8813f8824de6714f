#!/usr/bin/env python3
"""The closed-loop emulator (python/fp8lab/emu.py over libfp8lab_emu.so) replays a recorded run
as `fp8lab run` does: its scales and casts are fp8lab's.

Makes a trace (`fp8lab synth llm --steps 40`: amax.csv for every step, snapshots every other
step, skipped modules with amax 0), runs an experiment of three labels (delayed history 16
margin 1 max hybrid; delayed history 4 most_recent margin 0; current) with `fp8lab run`, then
drives one Recipe per label through the steps in order, as a training loop would: at each step,
every tensor with a snapshot is cast (qdq: its amax becomes the slot's pending amax), every
other one gets its amax.csv amax through set_pending, then update(). Required, 0 differences:
  - the scale the emulator holds before each step (Recipe.scale) = stream.csv's scale column for
    that (tensor, step, label), bit for bit, and its format column = Recipe.format;
  - each cast of a snapshot tensor = its steps.csv row of that label: amax and scale bit for
    bit, n, nonfinite, zeros, overflow, underflow, subnormal, clipped exactly, mse within 1e-9
    relative (fp8lab sums a BF16 tensor over its value histogram: another order);
  - the snapshot's amax = amax.csv's for the step.
Prints the rows compared.

Usage: test_emu_stream.py FP8LAB_BIN (FP8LAB_EMU_LIB: the library; else the checkout's build)
Exit 77 = skipped (numpy or ml_dtypes missing; exit 1 instead when FP8LAB_REQUIRE_PYDEPS=1).
"""
import csv
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tools", "reference"))
sys.path.insert(0, os.path.join(ROOT, "tests", "common"))
from pycommon import require  # noqa: E402

try:
    import numpy as np
    import fp8ref  # read_safetensors (needs ml_dtypes)
except ImportError as e:
    require("%s (numpy and ml_dtypes: scripts/install-deps.sh)" % e)

from fp8lab.emu import Recipe, library_path  # noqa: E402

F32 = np.float32
FAILS = []
COUNTS = ("n", "nonfinite", "zeros", "overflow", "underflow", "subnormal", "clipped")

EXP = """[trace]
path = {trace}
[recipe.hyb]
kind = delayed
format = hybrid
history_len = 16
margin = 1
amax_compute = max
[recipe.recent]
kind = delayed
history_len = 4
amax_compute = most_recent
margin = 0
[recipe.cur]
kind = current
"""


def fail(what):
    FAILS.append(what)
    if len(FAILS) <= 20:
        print("FAIL: " + what)


def f32(text):
    return float(F32(float(text)))


def child_env():
    """fp8lab's environment: not this process's sanitizer preload (tests/emu/CMakeLists.txt)."""
    env = dict(os.environ)
    if env.get("FP8LAB_EMU_SANITIZED"):
        env.pop("LD_PRELOAD", None)
        env.pop("ASAN_OPTIONS", None)
    return env


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    binary = sys.argv[1]
    print("library: %s" % library_path())
    with tempfile.TemporaryDirectory() as d:
        trace, out, ini = os.path.join(d, "trace"), os.path.join(d, "out"), os.path.join(d, "x.ini")
        for cmd in ([binary, "synth", "llm", trace, "--steps", "40"], None):
            if cmd is None:
                with open(ini, "w") as f:
                    f.write(EXP.format(trace=trace))
                cmd = [binary, "run", ini, "--force", "--out", out]
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               universal_newlines=True, env=child_env())
            if p.returncode:
                print("FAILED: %s exited %d:\n%s" % (" ".join(cmd), p.returncode, p.stdout))
                return 1
        amax = {}  # step -> {tensor: amax}
        with open(os.path.join(trace, "amax.csv")) as f:
            for r in csv.DictReader(f):
                if r.get("micro", "0") not in ("", "0"):
                    fail("amax.csv has micro-batches: this test feeds one amax per step")
                amax.setdefault(int(r["step"]), {})[r["tensor"]] = F32(float(r["amax"]))
        stream, steps = {}, {}
        with open(os.path.join(out, "stream.csv")) as f:
            for r in csv.DictReader(f):
                stream[(r["tensor"], int(r["step"]), r["recipe"])] = r
        with open(os.path.join(out, "steps.csv")) as f:
            for r in csv.DictReader(f):
                steps[(r["tensor"], int(r["step"]), r["recipe"])] = r
        snaps = {}
        for name in os.listdir(trace):
            if name.startswith("step_") and name.endswith(".safetensors"):
                snaps[int(name[5:-12])] = os.path.join(trace, name)
        tensors = sorted({t for a in amax.values() for t in a})
        nstream = nsteps = 0
        seen_stream, seen_steps = set(), set()
        for label in ("hyb", "recent", "cur"):
            with Recipe(ini, label) as rec:
                slots = {t: rec.slot(t) for t in tensors}
                if any(s is None for s in slots.values()):
                    fail("%s: a tensor without a slot" % label)
                    continue
                for step in sorted(amax):
                    for t in tensors:  # the scale each step uses: the one held before it
                        key = (t, step, label)
                        row = stream.get(key)
                        if row is None:
                            continue
                        seen_stream.add(key)
                        nstream += 1
                        if f32(row["scale"]) != rec.scale(slots[t]):
                            fail("%s step %d %s: emulator scale %r, stream.csv %s" %
                                 (t, step, label, rec.scale(slots[t]), row["scale"]))
                        if row["format"] != rec.format(slots[t]):
                            fail("%s %s: format %s, stream.csv %s" %
                                 (t, label, rec.format(slots[t]), row["format"]))
                    snap = fp8ref.read_safetensors(snaps[step]) if step in snaps else {}
                    cast = set()
                    for t, x in sorted(snap.items()):
                        if t not in slots:
                            continue
                        m = x.reshape(-1, x.shape[-1]) if x.ndim >= 2 else x
                        _, st = rec.qdq(slots[t], m)
                        cast.add(t)
                        if F32(st.amax) != amax[step].get(t):
                            fail("%s step %d: snapshot amax %r, amax.csv %r" %
                                 (t, step, st.amax, amax[step].get(t)))
                        key = (t, step, label)
                        row = steps.get(key)
                        if row is None:
                            fail("%s step %d %s: no steps.csv row" % key)
                            continue
                        seen_steps.add(key)
                        nsteps += 1
                        if f32(row["amax"]) != st.amax or f32(row["scale"]) != st.scale:
                            fail("%s step %d %s: amax %r scale %r, steps.csv %s %s" %
                                 (t, step, label, st.amax, st.scale, row["amax"], row["scale"]))
                        for k in COUNTS:
                            if int(row[k]) != getattr(st, k):
                                fail("%s step %d %s: %s %d, steps.csv %s" %
                                     (t, step, label, k, getattr(st, k), row[k]))
                        fin = st.n - st.nonfinite
                        mse = st.sum_sq_err / fin if fin else math.nan
                        want = float(row["mse"])
                        if not (mse == want or abs(mse - want) <= 1e-8 * abs(want)
                                or (math.isnan(mse) and math.isnan(want))):
                            fail("%s step %d %s: mse %r, steps.csv %s" % (t, step, label, mse,
                                                                          row["mse"]))
                    pend = rec.pending()
                    for t, s in slots.items():
                        if t not in cast:
                            pend[s] = amax[step].get(t, F32(0))
                    rec.set_pending(pend)
                    rec.update()
        missing = (set(stream) - seen_stream) | (set(steps) - seen_steps)
        if missing:
            fail("%d rows of stream.csv / steps.csv not compared, e.g. %r" %
                 (len(missing), sorted(missing)[0]))
        if nstream < 5000 or nsteps < 3000:
            fail("too few rows compared: %d stream, %d steps" % (nstream, nsteps))
    print("compared: %d stream.csv rows (the delayed labels' scales before each step), %d "
          "steps.csv rows (casts of the snapshots: amax, scale, counts, mse), %d tensors, "
          "%d steps" % (nstream, nsteps, len(tensors), len(amax)))
    if FAILS:
        print("FAILED: %d difference(s)" % len(FAILS))
        return 1
    print("OK: 0 differences")
    return 0


if __name__ == "__main__":
    sys.exit(main())
