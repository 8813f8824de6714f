"""The trace of tests/results/test_stream.py and what it must give: the designed amax
sequences of three tensors (`design()`), the trace written from them, the experiment, the
overflow and clipped steps per tensor and configuration worked out by hand (EXPECTED), and
TransformerEngine's recurrence re-implemented from RECIPES.md alone (`te_delayed()`,
`recompute()`). The modules (numpy, ml_dtypes: without them exit 77, skipped, or exit 1 when
FP8LAB_REQUIRE_PYDEPS=1 is set, as .ci/run does) are checked on import.
"""

import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
REF = os.path.join(ROOT, "tools", "reference")

try:
    import numpy as np
    import ml_dtypes  # noqa: F401  (gen_trace's safetensors writer needs it)
except ImportError as e:
    # CI sets FP8LAB_REQUIRE_PYDEPS=1 (.ci/run): there a missing module is a failure, so that
    # the check cannot be skipped silently. Elsewhere: a skip.
    if os.environ.get("FP8LAB_REQUIRE_PYDEPS", "") not in ("", "0"):
        print("FAILED: %s, and FP8LAB_REQUIRE_PYDEPS is set (scripts/install-deps.sh installs "
              "numpy and ml_dtypes)" % e)
        sys.exit(1)
    print("skipped: %s (scripts/install-deps.sh installs numpy and ml_dtypes)" % e)
    sys.exit(77)

sys.path.insert(0, REF)
import gen_trace  # noqa: E402  (the project's safetensors writer)

F32 = np.float32
FLT_MAX = F32(np.finfo(np.float32).max)
E4M3_MAX, E5M2_MAX = F32(448.0), F32(57344.0)

# ------------------------------------------------------------------------------------------
# the trace
# ------------------------------------------------------------------------------------------

NSTEPS = 300
SNAP_STEPS = list(range(0, NSTEPS, 50))     # 0, 50, ..., 250
A = "layer.fc1.input"          # E4M3 under hybrid
B = "layer.fc1.grad_output"    # E5M2 under hybrid
C = "layer.fc2.weight"         # E4M3
TENSORS = sorted([A, B, C])    # stream.csv order (strcmp): fc1.grad_output, fc1.input, fc2.weight
FMT = {A: "e4m3", B: "e5m2", C: "e4m3"}
FMAX = {"e4m3": E4M3_MAX, "e5m2": E5M2_MAX}
C_TIE = F32(29.0 / 56.0)      # C's amax at step 100: RN32(C_TIE * 896) = 464 exactly


def design():
    """-> {tensor: [amax of step t, t = 0..299]} as float32, and {tensor: set of steps that
    have NO amax.csv row} (the module did not run and wrote nothing; other zero steps have an
    explicit 0 row). Rows: every other (step, tensor).

    A (E4M3): absent at steps 0-2 (first amax at step 3); slow decay d_t = 2 * 0.999^t (0.1%
      a step); step 60 a 2x spike; no row at 120, an explicit 0 at 121; step 150 (a snapshot
      step) a 5x spike that decays by 0.7 a step over 151-154 (1.2 x base at 154, still above
      the baseline, which takes over at 155); a slow RISE of 0.5% a step over 200-219 from
      d_199, then the decay again from where the rise ended; one-step bumps of 1.03x at 270
      and 1.05x at 280.
    B (E5M2): g_t = 1e-3 * 0.998^t from step 0; a 3x spike at 30; explicit 0 rows at 100-102
      and no rows at 103-104 (step 100 is a snapshot step without B); 1.5x at 105 when the
      module runs again; a 10x spike at 200 (a snapshot step) halving over 201-203 (1.25 x
      base at 203), baseline from 204.
    C (E4M3): explicit 0 rows at 0-4, inf at 5, then 0.5 (a power of two: 448 / 0.5 = 896 is
      exact, so 0.5 * 896 is exactly 448, the max: never an overflow, overshoot exactly 0),
      except at step 100 (a snapshot step): C_TIE = RN32(29/56), whose product with 896 rounds
      to exactly 464 (its error, at most 464 2^-25, is under half an ulp of 464, 2^-16): past
      the max, but the tie of 448 and 480, which rounds down: overflow without clipping."""
    a, b, c = [], [], []
    d199 = 2 * 0.999 ** 199
    top = d199 * 1.005 ** 20                   # the rise's end, step 219

    def base_a(t):
        if t <= 199:
            return 2 * 0.999 ** t
        if t <= 219:
            return d199 * 1.005 ** (t - 199)
        return top * 0.999 ** (t - 219)

    for t in range(NSTEPS):
        v = base_a(t)
        if t < 3 or t in (120, 121):
            v = 0.0
        elif t == 60:
            v = 2 * v
        elif 150 <= t <= 154:
            v = 5 * base_a(150) * 0.7 ** (t - 150)
        elif t == 270:
            v = 1.03 * v
        elif t == 280:
            v = 1.05 * v
        a.append(v)
        g = 1e-3 * 0.998 ** t
        if t == 30:
            g = 3 * g
        elif 100 <= t <= 104:
            g = 0.0
        elif t == 105:
            g = 1.5 * g
        elif 200 <= t <= 203:
            g = 10 * (1e-3 * 0.998 ** 200) * 0.5 ** (t - 200)
        b.append(g)
        c.append(0.0 if t < 5 else math.inf if t == 5 else C_TIE if t == 100 else 0.5)
    amax = {A: [F32(v) for v in a], B: [F32(v) for v in b], C: [F32(v) for v in c]}
    no_row = {A: {0, 1, 2, 120}, B: {103, 104}, C: set()}
    return amax, no_row


def snapshot_tensor(amax):
    """A small tensor whose max |x| is exactly amax (float32)."""
    k = np.arange(64, dtype=np.float64)
    x = (float(amax) * np.cos(k) * 0.9).astype(np.float32)
    x[5] = -amax
    x[17] = amax
    return x


def write_trace(d, amax, no_row):
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(1313)
    for t in SNAP_STEPS:
        tensors = [(n, "F32", snapshot_tensor(amax[n][t])) for n in TENSORS
                   if amax[n][t] != 0]           # a module that did not run: not in the file
        gen_trace.write_safetensors(os.path.join(d, "step_%d.safetensors" % t), tensors, rng)
    with open(os.path.join(d, "amax.csv"), "w") as f:
        f.write("step,tensor,amax\n")
        for t in range(NSTEPS):
            for n in TENSORS:
                if t in no_row[n]:
                    continue
                v = amax[n][t]
                f.write("%d,%s,%s\n" % (t, n, "inf" if np.isinf(v) else "%.9g" % float(v)))


# (label, history_len, margin, amax_compute): the delayed configurations in experiment order
CONFIGS = [("d", 1, 0, "max"), ("d", 1, 1, "max"), ("d", 16, 0, "max"), ("d", 16, 1, "max"),
           ("d", 1024, 0, "max"), ("d", 1024, 1, "max"), ("mr", 1024, 0, "most_recent")]

EXPERIMENT = """[trace]
path = trace

[recipe.d]
kind = delayed
format = hybrid
history_len = 1, 16, 1024
margin = 0, 1
amax_compute = max

[recipe.cur]
kind = current
format = hybrid

[recipe.mr]
kind = delayed
format = hybrid
history_len = 1024
margin = 0
amax_compute = most_recent

[output]
dir = {out}
{analysis}"""

# ------------------------------------------------------------------------------------------
# the expected counts, by hand
# ------------------------------------------------------------------------------------------
#
# Notation: r = amax_t / (the max over the history the step's scale came from); the largest
# element overflows when r > 2^m (scale = fp8_max 2^-m / that max), clips when r > 2^m * 464/448
# = 2^m * 1.0357 (E4M3) or r >= 2^m * 61440/57344 = 2^m * 1.0714 (E5M2). A zero amax leaves
# the history alone, so "the history" is the last L NON-ZERO amaxes. Every r below is at
# least 1e-3 away from its threshold (float32 rounding of amax and scale: ~1e-7), and no two
# consecutive non-zero amaxes are equal, so no rounding "hair" decides a count.
#
# A (E4M3):
#   L=1 (the previous non-zero amax): decay steps r = 0.999 (no); 60: r = 2 * 0.999 = 1.998
#     (overflow, clip; m=1: 0.999 no); 61: back to base, r < 1; 120/121 amax 0 (no roll), 122
#     against 119 (r < 1); 150: r = 5 * 0.999 = 4.995 (overflow, clip; m=1 2.4975: both);
#     151-154: r = 0.7, 155: base vs 1.2 x base (no); 200-219: r = 1.005 (20 overflows, no
#     clip; m=1 none); 270: 1.03 * 0.999 = 1.029 (overflow, no clip); 280: 1.05 * 0.999 =
#     1.049 (overflow, clip). m=0: overflow {60, 150, 200..219, 270, 280} = 24, clipped
#     {60, 150, 280} = 3; m=1: {150} and {150}.
#   L=16 (max of the last 16): 60: 2 d_60 / d_44 = 2 * 0.999^16 = 1.968 (overflow, clip; m=1
#     no); 150: 5 * 0.999^16 = 4.92 (both, also m=1: 2.46); 151-166 hold the spike in the
#     window; the rise 200+j (j = 0..19): the window max is max(d_199 0.999^(j-15), the last
#     rise value), r = 1.005^(j+1) / that: j = 0 (1.005 / 0.999^-15 = 0.990) and j = 1 (0.996)
#     do not overflow, j >= 2 do (j = 2: 1.0151 / 1.0131 = 1.002), 18 steps, r <= 1.005 so
#     never a clip; 270: 1.03 * 0.999^15 = 1.0147 (overflow, no clip); 280: the window holds
#     270's bump, 1.05 * 0.999^10 / 1.03 = 1.0093 (overflow, no clip). m=0: overflow
#     {60, 150, 202..219, 270, 280} = 22, clipped {60, 150} = 2; m=1: {150}, {150}.
#   L=1024 (the max of everything so far): 60: 2 d_60 / d_3 = 2 * 0.999^57 = 1.889 (both;
#     m=1 no); 150: 5 d_150 / (2 d_60) = 2.5 * 0.999^90 = 2.285 (both; m=1 1.142: both);
#     nothing later comes near 5 d_150. m=0: {60, 150}, {60, 150}; m=1: {150}, {150}.
#   most_recent ignores the history: the L=1 counts, 24 and 3.
#
# B (E5M2):
#   L=1: 30: 3 * 0.998 = 2.994 (both; m=1 1.497: both); 105 against 99 (100-104 are zero):
#     1.5 * 0.998^6 = 1.482 (both; m=1 0.741 no); 200: 10 * 0.998 = 9.98 (both; m=1 4.99:
#     both); 201-203 halve, 204 is base vs 1.25 x base. m=0: {30, 105, 200} (3, 3); m=1:
#     {30, 200} (2, 2).
#   L=16: 30: 3 * 0.998^16 = 2.905; 105: the last 16 non-zero are 84..99, 1.5 * 0.998^21 =
#     1.438; 200: 10 * 0.998^16 = 9.685. m=0: {30, 105, 200}; m=1: 1.45, 0.72, 4.84:
#     {30, 200}.
#   L=1024: 30: 3 * 0.998^30 = 2.824 (both; m=1 1.412 both); 105: 1.5 g_105 / (3 g_30) =
#     0.5 * 0.998^75 = 0.43 (no); 200: 10 g_200 / (3 g_30) = 3.33 * 0.998^170 = 2.37 (both;
#     m=1 1.19 > 1.0714: both). m=0 and m=1: {30, 200}.
#   most_recent: the L=1 counts, 3 and 3.
#
# C (E4M3): step 5's amax is inf: RN32(inf * 1) = inf is above the max, so the step counts
#   as overflowed and clipped in the stream (in every configuration; it is a warm-up step,
#   kept out of analysis.csv). The inf keeps the scale (RECIPES.md: not finite), and under
#   max it stays in the window for the next L-1 non-zero steps: L=1 scales 896 from step 7,
#   L=16 from step 22 (steps 6..21 use 1), L=1024 never (1.0 throughout); then 0.5 * 896 is
#   exactly 448: no overflow. Step 100: C_TIE * 896 = 464 under the scale 896 (L=1 and L=16
#   with m=0, most_recent): an overflow that does not clip; m=1 (448: 232) and L=1024 (1)
#   no; the scale 448 / C_TIE = 865 that follows (L=1: step 101; L=16: 101-115) gives 0.5 *
#   865 = 433, no. So {5, 100} and {5} for those three, {5} and {5} for the others.
#
# The largest overshoot, log2(r) - m at the worst step (a log2 in double of the float32
# amax and scale: within 1e-6 of these closed forms).

EXPECTED = {   # (tensor, history_len, margin, amax_compute) -> (overflow steps, clipped steps)
    (A, 1, 0, "max"): ({60, 150, 270, 280} | set(range(200, 220)), {60, 150, 280}),
    (A, 1, 1, "max"): ({150}, {150}),
    (A, 16, 0, "max"): ({60, 150, 270, 280} | set(range(202, 220)), {60, 150}),
    (A, 16, 1, "max"): ({150}, {150}),
    (A, 1024, 0, "max"): ({60, 150}, {60, 150}),
    (A, 1024, 1, "max"): ({150}, {150}),
    (A, 1024, 0, "most_recent"): ({60, 150, 270, 280} | set(range(200, 220)), {60, 150, 280}),
    (B, 1, 0, "max"): ({30, 105, 200}, {30, 105, 200}),
    (B, 1, 1, "max"): ({30, 200}, {30, 200}),
    (B, 16, 0, "max"): ({30, 105, 200}, {30, 105, 200}),
    (B, 16, 1, "max"): ({30, 200}, {30, 200}),
    (B, 1024, 0, "max"): ({30, 200}, {30, 200}),
    (B, 1024, 1, "max"): ({30, 200}, {30, 200}),
    (B, 1024, 0, "most_recent"): ({30, 105, 200}, {30, 105, 200}),
}
for _L, _m, _ac in [(1, 0, "max"), (1, 1, "max"), (16, 0, "max"), (16, 1, "max"),
                    (1024, 0, "max"), (1024, 1, "max"), (1024, 0, "most_recent")]:
    EXPECTED[(C, _L, _m, _ac)] = ({5, 100} if _m == 0 and _L != 1024 or _ac == "most_recent"
                                  else {5}, {5})

EXPECTED_OVERSHOOT_MAX = {   # closed forms of log2(r) - m at the worst step; C: the inf step
    (A, 1, 0, "max"): math.log2(5 * 0.999), (A, 1, 1, "max"): math.log2(5 * 0.999) - 1,
    (A, 16, 0, "max"): math.log2(5 * 0.999 ** 16),
    (A, 16, 1, "max"): math.log2(5 * 0.999 ** 16) - 1,
    (A, 1024, 0, "max"): math.log2(2.5 * 0.999 ** 90),
    (A, 1024, 1, "max"): math.log2(2.5 * 0.999 ** 90) - 1,
    (A, 1024, 0, "most_recent"): math.log2(5 * 0.999),
    (B, 1, 0, "max"): math.log2(10 * 0.998), (B, 1, 1, "max"): math.log2(10 * 0.998) - 1,
    (B, 16, 0, "max"): math.log2(10 * 0.998 ** 16),
    (B, 16, 1, "max"): math.log2(10 * 0.998 ** 16) - 1,
    (B, 1024, 0, "max"): math.log2(3 * 0.998 ** 30),
    (B, 1024, 1, "max"): math.log2(3 * 0.998 ** 30) - 1,
    (B, 1024, 0, "most_recent"): math.log2(10 * 0.998),
}
# the first step with a finite non-zero amax: A 3, B 0, C 6 (step 5's inf does not count)
WARMUP_DEFAULT = {A: set(range(0, 4)), B: {0}, C: set(range(0, 7))}

# ------------------------------------------------------------------------------------------
# the independent recomputation: TE's recurrence from RECIPES.md
# ------------------------------------------------------------------------------------------


def rn32_div(a, b):
    with np.errstate(over="ignore", divide="ignore"):
        return F32(F32(a) / F32(b))


def te_delayed(amaxes, fmax, L, m, amax_compute):
    """The scale each step uses: RECIPES.md "Delayed scaling", literally. State: scale = 1,
    history[0..L-1] = 0. Per step: the step uses `scale`; then, with last = the step's amax,
    if last == 0 nothing happens; else amax_max = max(history[1..L-1], last) (for L = 1 just
    last), the history rolls (history[i] = history[i+1] for 1 <= i <= L-2, history[L-1] =
    last, history[0] = 0; for L = 1 it is just last), amax = amax_max (max) or last
    (most_recent), and scale = RN32(RN32(fp8_max 2^-m) / amax) when amax is finite and > 0
    (inf becomes FLT_MAX), else unchanged."""
    scale = F32(1.0)
    hist = [F32(0.0)] * L
    scaled_max = F32(float(fmax) * 2.0 ** -m)
    used = []
    for last in amaxes:
        used.append(scale)
        if last == 0:
            continue
        if L == 1:
            amax_max = last
            hist = [last]
        else:
            amax_max = last
            for v in hist[1:]:
                if v > amax_max:          # a plain max: amaxes are never NaN here
                    amax_max = v
            hist = [F32(0.0)] + hist[2:] + [last]
        amax = amax_max if amax_compute == "max" else last
        if np.isfinite(amax) and amax > 0:
            s = rn32_div(scaled_max, amax)
            scale = FLT_MAX if np.isinf(s) else s
    return used


def flags(amax, scale, fmt):
    """(overflowed, clipped, overshoot) of a step's largest element: RN32(amax * scale)
    against the max / the clipping threshold in float32; log2(amax * scale / max) in double."""
    with np.errstate(over="ignore"):
        y = abs(F32(F32(amax) * F32(scale)))
    ovf = bool(y > FMAX[fmt])
    clip = bool(y > F32(464.0)) if fmt == "e4m3" else bool(y >= F32(61440.0))
    if amax == 0:
        ov = -math.inf
    elif np.isinf(amax):
        ov = math.inf
    else:
        ov = math.log2(float(amax) * float(scale) / float(FMAX[fmt]))
    return ovf, clip, ov


def quantile(sorted_vals, f):
    """Linear interpolation between order statistics at f (n - 1) (GSL's
    gsl_stats_quantile_from_sorted_data, which analysis.csv documents)."""
    n = len(sorted_vals)
    h = f * (n - 1)
    i = int(math.floor(h))
    if i + 1 >= n:
        return sorted_vals[-1]
    return sorted_vals[i] + (h - i) * (sorted_vals[i + 1] - sorted_vals[i])


def recompute(amax):
    """-> {(tensor, L, m, ac): dict(scales, ovf, clip, ov)} per step."""
    out = {}
    for n in TENSORS:
        for _label, L, m, ac in CONFIGS:
            used = te_delayed(amax[n], FMAX[FMT[n]], L, m, ac)
            fl = [flags(a, s, FMT[n]) for a, s in zip(amax[n], used)]
            out[(n, L, m, ac)] = dict(scales=used, ovf=[f[0] for f in fl],
                                      clip=[f[1] for f in fl], ov=[f[2] for f in fl])
    return out
