#!/usr/bin/env python3
"""The closed-loop emulator's casts, through the Python binding (python/fp8lab/emu.py over
libfp8lab_emu.so), against the independent reference (tools/reference/fp8ref.py: encode,
decode, quantize_stats, DelayedState, current_scale) and ml_dtypes (BF16).

For E4M3 and E5M2, at scale 1 and at a scale that is not a power of two (delayed scaling after
an amax of 3, so 448/3 and 57344/3), the values cast are: every finite code's value, every
midpoint between adjacent codes (a tie: RN32(x*s) lands on it exactly, found for the scale
among x's float32 neighbours), the float32 values just above and below each midpoint, values
beyond the max (between max and the clip threshold, at it, far past, FLT_MAX), values below
half the smallest subnormal, +-0, +-inf, NaN; both signs; then 2^20 random float32 bit
patterns. Each batch goes through qdq along dir 0, dir 1 and in place (out = x); required:
xhat bit for bit the reference's (NaN where it is NaN), the counts (n, nonfinite, zeros,
overflow, underflow, subnormal, clipped) exactly quantize_stats', the double sums within 1e-12
relative (their summation order differs), the amax and the scale exactly the reference's.
Current scaling's scale from the batch's amax too. BF16 (kind bf16): xhat equals ml_dtypes'
float32 -> bfloat16 -> float32 on the same values (NaN stays NaN).
Prints the counts compared; 0 differences required.

Usage: test_emu_parity.py (FP8LAB_EMU_LIB: the library; else the checkout's build)
Exit 77 = skipped (numpy or ml_dtypes missing; exit 1 instead when FP8LAB_REQUIRE_PYDEPS=1).
"""
import math
import os
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
    import ml_dtypes
    import fp8ref
except ImportError as e:
    require("%s (the reference needs numpy and ml_dtypes: scripts/install-deps.sh)" % e)

from fp8lab.emu import Recipe, library_path  # noqa: E402

F32 = np.float32
FAILS = []
COUNTS = {"values": 0, "ties": 0, "batches": 0, "scales": 0, "bf16": 0}


def fail(what):
    FAILS.append(what)
    if len(FAILS) <= 20:
        print("FAIL: " + what)


def bits(a):
    return np.ascontiguousarray(a, dtype=F32).view(np.uint32)


def same_f32(a, b):
    """Positions where a and b differ as float32 (NaN equals NaN, whatever its payload)."""
    a, b = np.asarray(a, F32), np.asarray(b, F32)
    nan = np.isnan(a) & np.isnan(b)
    return np.flatnonzero(~nan & (bits(a) != bits(b)))


def finite_codes(fmt):
    vals = fp8ref.decode(np.arange(256, dtype=np.uint8), fmt)
    return np.unique(vals[np.isfinite(vals)].astype(F32))  # ascending, +-0 once


def on_grid(targets, s):
    """For each float32 target t, an x with RN32(x * s) == t when one exists among the float32
    neighbours of RN32(t / s) (else that quotient): the casts then meet the target exactly."""
    s = F32(s)
    out = np.empty_like(targets)
    hit = 0
    with np.errstate(all="ignore"):
        for i, t in enumerate(targets):
            x0 = F32(t / s)
            best = x0
            for k in range(-4, 5):
                x = x0
                step = np.inf if k > 0 else -np.inf
                for _ in range(abs(k)):
                    x = np.nextafter(x, F32(step), dtype=F32)
                if F32(x * s) == t:
                    best = x
                    hit += 1
                    break
            out[i] = best
    return out, hit


def probe_values(fmt, s):
    """The values cast at scale s (see the module's docstring) and the count of ties hit."""
    v = finite_codes(fmt)
    pos = v[v >= 0]
    mids = ((pos[:-1].astype(np.float64) + pos[1:].astype(np.float64)) / 2).astype(F32)
    assert np.all(mids.astype(np.float64) * 2 == pos[:-1].astype(np.float64) + pos[1:])  # exact
    mx = float(fmt.max)
    clip = 464.0 if fmt.name == "e4m3" else 61440.0
    far = np.array([mx * 1.01, (mx + clip) / 2, clip, np.nextafter(F32(clip), F32(np.inf)),
                    clip * 2, 1e30, fp8ref.FLT_MAX], dtype=F32)
    tiny_sub = F32(pos[1])  # the smallest subnormal
    tiny = np.array([tiny_sub / 2, tiny_sub / 2 * F32(0.999), tiny_sub / 4, 1e-30, 1e-45],
                    dtype=F32)
    targets = np.concatenate([pos, mids, far, tiny])
    xs, hit = on_grid(targets, s)
    with np.errstate(all="ignore"):
        up = np.nextafter(xs, F32(np.inf), dtype=F32)
        down = np.nextafter(xs, F32(-np.inf), dtype=F32)
    # ties: the midpoints whose x*s lands on them exactly
    with np.errstate(all="ignore"):
        ties = int(np.count_nonzero((xs[len(pos):len(pos) + len(mids)] * F32(s)) == mids))
    special = np.array([0.0, np.inf, np.nan], dtype=F32)
    allv = np.concatenate([xs, up, down, special])
    allv = np.concatenate([allv, -allv])
    return allv.astype(F32), ties * 2


def ref_xhat(x, s, fmt):
    with np.errstate(all="ignore"):
        y = (x * F32(s)).astype(F32)
        return (fp8ref.decode(fp8ref.encode(y, fmt), fmt) * F32(F32(1.0) / F32(s))).astype(F32)


def check_cast(rec, slot, x, s, fmt, what):
    """One batch through qdq three ways, against the reference at scale s."""
    want = ref_xhat(x, s, fmt)
    ref = fp8ref.quantize_stats(x, s, fmt)
    amax = fp8ref.tensor_amax(x)
    n = x.size
    cols = 64
    rows = -(-n // cols)
    pad = np.zeros(rows * cols, dtype=F32)
    pad[:n] = x
    m = pad.reshape(rows, cols)
    runs = []
    xh0, st0 = rec.qdq(slot, x)  # a 1-D array: one row
    runs.append(("1-D", xh0, st0, x))
    xh1, st1 = rec.qdq(slot, m, dir=1)
    runs.append(("[%d,%d] dir 1" % (rows, cols), xh1.ravel()[:n], st1, None))
    inplace = x.copy()
    xh2, st2 = rec.qdq(slot, inplace, out=inplace)
    if xh2 is not inplace:
        fail("%s: qdq(out=x) did not return x" % what)
    runs.append(("in place", inplace, st2, x))
    for how, got, st, _ in runs:
        COUNTS["batches"] += 1
        bad = same_f32(got, want)
        if bad.size:
            i = bad[0]
            fail("%s (%s): %d of %d xhat differ, first x=%r: %r, reference %r" %
                 (what, how, bad.size, n, float(x[i]), float(got[i]), float(want[i])))
        padded = how.startswith("[")
        for k in ("nonfinite", "overflow", "underflow", "subnormal", "clipped"):
            if getattr(st, k) != ref[k]:
                fail("%s (%s): %s %d, reference %d" % (what, how, k, getattr(st, k), ref[k]))
        zeros = ref["zeros"] + (rows * cols - n if padded else 0)
        if st.zeros != zeros or st.n != (rows * cols if padded else n):
            fail("%s (%s): n %d zeros %d, reference %d %d" % (what, how, st.n, st.zeros, n, zeros))
        for k in ("sum_sq_err", "sum_sq", "sum_sq_hat"):
            a, b = getattr(st, k), ref[k]
            if not (a == b or abs(a - b) <= 1e-12 * max(abs(a), abs(b))):
                fail("%s (%s): %s %r, reference %r" % (what, how, k, a, b))
        if st.amax != float(amax) or st.scale != float(F32(s)):
            fail("%s (%s): amax %r scale %r, reference %r %r" %
                 (what, how, st.amax, st.scale, float(amax), float(F32(s))))
        want_os = fp8ref.overshoot(amax, s, fmt)
        if not (st.overshoot == want_os or (math.isnan(st.overshoot) and math.isnan(want_os))):
            fail("%s (%s): overshoot %r, reference %r" % (what, how, st.overshoot, want_os))
    COUNTS["values"] += n * len(runs)


def main():
    print("library: %s" % library_path())
    rng = np.random.default_rng(44)
    randbits = rng.integers(0, 2**32, size=1 << 20, dtype=np.uint64).astype(np.uint32).view(F32)
    with tempfile.TemporaryDirectory() as d:
        ini = os.path.join(d, "parity.ini")
        with open(ini, "w") as f:
            f.write("[trace]\npath = t\n"
                    "[recipe.d4]\nkind = delayed\nformat = e4m3\nhistory_len = 1\n"
                    "[recipe.d5]\nkind = delayed\nformat = e5m2\nhistory_len = 1\n"
                    "[recipe.c4]\nkind = current\nformat = e4m3\n"
                    "[recipe.c5]\nkind = current\nformat = e5m2\n"
                    "[recipe.keep]\nkind = bf16\n")
        for fmt_name, label in (("e4m3", "d4"), ("e5m2", "d5")):
            fmt = fp8ref.FORMATS[fmt_name]
            with Recipe(ini, label) as rec:
                slot = rec.slot("l.input")
                if rec.kind(slot) != "delayed" or rec.format(slot) != fmt_name:
                    fail("%s: slot is %s %s" % (label, rec.kind(slot), rec.format(slot)))
                state = fp8ref.DelayedState(fmt, history_len=1)
                for amax in (None, 3.0):
                    if amax is not None:  # the next scale: fp8_max / 3, not a power of two
                        rec.set_pending(np.array([amax], dtype=F32))
                        rec.update()
                        state.update(F32(amax))
                    s = state.scale
                    COUNTS["scales"] += 1
                    if rec.scale(slot) != float(s):
                        fail("%s: scale %r, reference %r" % (label, rec.scale(slot), float(s)))
                        continue
                    x, ties = probe_values(fmt, s)
                    COUNTS["ties"] += ties
                    check_cast(rec, slot, x, s, fmt, "%s scale %r" % (fmt_name, float(s)))
                    check_cast(rec, slot, randbits, s, fmt,
                               "%s scale %r random bits" % (fmt_name, float(s)))
                    rec.update()  # the casts' amaxes (inf) keep the scale: not finite
                    state.update(F32(np.inf))
                    if rec.scale(slot) != float(s):
                        fail("%s: an infinite amax moved the scale to %r" % (label, rec.scale(slot)))
            with Recipe(ini, "c" + fmt_name[1]) as rec:
                slot = rec.slot("l.weight")
                x, _ = probe_values(fmt, 1.0)
                x = x[np.isfinite(x)]
                for batch in (x, x[np.abs(x) < 100], x[np.abs(x) < 1e-3]):
                    s = fp8ref.current_scale(fp8ref.tensor_amax(batch), fmt)
                    COUNTS["scales"] += 1
                    check_cast(rec, slot, batch, s, fmt, "current %s scale %r" % (fmt_name, float(s)))
                    if rec.scale(slot) != float(s):
                        fail("current %s: scale %r, reference %r" % (fmt_name, rec.scale(slot), float(s)))
        with Recipe(ini, "keep") as rec:
            slot = rec.slot("l.output")
            x = np.concatenate([probe_values(fp8ref.E4M3, 1.0)[0], probe_values(fp8ref.E5M2, 1.0)[0],
                                randbits])
            with np.errstate(invalid="ignore"):
                want = x.astype(ml_dtypes.bfloat16).astype(F32)
            got, st = rec.qdq(slot, x)
            COUNTS["bf16"] += x.size
            bad = same_f32(got, want)
            if bad.size:
                i = bad[0]
                fail("bf16: %d of %d differ, first x=%r: %r, ml_dtypes %r" %
                     (bad.size, x.size, float(x[i]), float(got[i]), float(want[i])))
            if st.sum_sq_err != 0 or st.overflow or not math.isnan(st.scale):
                fail("bf16: statistics %r" % (st,))
    print("compared: %d values in %d casts (E4M3 and E5M2 codes, midpoints, neighbours, "
          "saturation, subnormals, specials, 2^20 random bit patterns), %d ties hit exactly, "
          "%d scales, %d BF16 values" % (COUNTS["values"], COUNTS["batches"], COUNTS["ties"],
                                         COUNTS["scales"], COUNTS["bf16"]))
    if FAILS:
        print("FAILED: %d difference(s)" % len(FAILS))
        return 1
    print("OK: 0 differences")
    return 0


if __name__ == "__main__":
    sys.exit(main())
