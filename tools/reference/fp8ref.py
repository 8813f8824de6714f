#!/usr/bin/env python3
"""Independent Python reference for fp8lab's steps.csv, gemm.csv, stream.csv and summary.csv
(delayed, current and block FP8 scaling: mxfp8, block, rowwise; NVFP4 with max6 block scales
for gemm.csv only: its steps.csv and summary.csv rows are left out of the comparisons, as
tests/run/test_fp4_run.py checks them against fp4ref.py).

GEMM requests (issue 45; docs/semantics.md "GEMMs of a mixed recipe"): a layer's GEMMs are
computed for each configuration that applies to its input, weight and grad_output, and for
each recipe label shared by sections that split them, each operand quantized by the section
that takes its tensor (layer_requests); a row's kind and delayed columns are its two operands'
configuration's when they agree, else kind "mixed" and empty. With an FP4 configuration the
rows carry the FP4 ratio (ratio, ratio_lo, ratio_hi, ratio_mode) on the GEMMs with an FP4
operand, against the reference configuration's own row (fp4_reference): exact, the quotient;
sampled, the paired estimate, computed again exactly where its interval straddles
[analysis] fp4_gemm_ratio.

Written from shared/RECIPES.md and the replay contract, NOT from the C sources, so that the C
output can be checked against it. Needs numpy and ml_dtypes.

Multi-rank traces (a folder of rank_0/ .. rank_<R-1>/ single-rank traces) replay as one trace
whose tensors are named rank_<r>/<name>; with [trace] reduce_amax = true, the amax that feeds
delayed scaling's update of rank r is, per tensor name and step, the max over the ranks of r's
group (reduce_group ranks, contiguous; default all ranks) of their amaxes (RECIPES.md "Amax
reduction across ranks"). Statistics, current scaling and block recipes stay per rank.

Usage:
  fp8ref.py run EXP.ini OUT.csv [--trace DIR] [--gemm GEMM_OUT] [--stream STREAM_OUT]
                [--summary SUMMARY_OUT]
      write steps.csv (and, with --gemm, gemm.csv when one is expected; with --stream,
      stream.csv when one is expected; with --summary, summary.csv) as the reference does
  fp8ref.py compare EXP.ini STEPS_CSV [--trace DIR] [--gemm GEMM_CSV | --no-gemm GEMM_CSV]
                    [--stream STREAM_CSV] [--summary SUMMARY_CSV]
      check a steps.csv written by fp8lab (exit 0 = match, 1 = mismatch, 2 = error); --gemm
      also checks gemm.csv: it must match when the reference expects one ([analysis] gemm true
      and a layer triplet at a snapshot step) and be ABSENT when it expects none; --no-gemm
      requires that none is expected and that the file is absent. --stream checks stream.csv
      likewise (expected exactly when the experiment has a delayed configuration, absent
      otherwise); --summary checks summary.csv.
  Tolerances: steps.csv counts exact, amax/scale bit-exact, mse/snr_db 1e-6 relative (snr_db
  with an absolute floor of 1e-9 dB: near 0 dB, where a saturated outlier is nearly all of
  both sums, the last bits of the sums move it by more than 1e-6 of itself), nblocks
  and blocks_with_overflow exact, log2_scale_* 1e-9 absolute (widened to one unit of the 9th
  significant digit that "%.9g" keeps; nan == nan); clipped and warmup exact, overshoot as
  the log2 columns (-inf == -inf), cos_sim 1e-9 absolute, widened by cos_sim_bound() where
  its formula cancels (a saturated outlier that is nearly all of sum x^2 and of the error
  sum: there the sums' last bits decide many digits of it); gemm.csv keys exact and in
  order, rel_error 1e-3 relative with an absolute floor of 1e-7 (inf == inf, nan == nan).
  stream.csv: keys exact and in order, role, snapshot and warmup exact, amax and scale
  bit-exact, overshoot as the log2 columns. summary.csv: keys exact and in order, counts
  exact, amax_max and scale_inv_min/max bit-exact (empty for block kinds), rates 1e-8
  relative, mse/snr_db/snr_db_min as in steps.csv, overshoot_max as the log2 columns,
  cos_sim_min as cos_sim (with the largest bound of its rows).

New columns (RECIPES.md "Per-step statistics"; the issue's definitions where RECIPES.md is
silent), derived here from those definitions:
  clipped    finite x whose RN32(x s), rounded to the format's mantissa with an unbounded
             exponent range (round_extended()), lies above fp8_max (the thresholds 464 and
             61440 are not used: the self-test checks that both readings agree)
  overshoot  log2(amax s / fp8_max) in double from the float32 amax and scale, -inf for
             amax 0; block kinds: the largest over the blocks of log2(block amax * block
             scale / fp8_max)
  cos_sim    (sum x^2 + sum xhat^2 - sum (x - xhat)^2) / (2 |x| |xhat|) over the finite x,
             clamped to [-1, 1]; 1 when both norms are 0, 0 when one is
  warmup     1 until a step of the replay has fed the tensor's delayed update a finite
             non-zero amax (its group's max under reduce_amax), the same in every
             configuration; with [analysis] warmup_steps = N the first N replay steps

Delayed scaling (issue 40): an amax of 0 keeps history and scale (TE's fused update, the
default); a delayed section with unfused_update = true follows TE's unfused Python path instead
(transformer_engine/pytorch/quantization.py, _default_get_amax_and_update_history and
_default_sf_compute): every amax is rolled in, 0 included, torch.max over the history (NaN
propagates), scale = (fp8_max / amax) / 2**margin in float32, kept where the max is 0 or not
finite. Experts split over ranks (expert parallelism) are tensors some ranks lack: with
reduce_amax the max is over the ranks of the group that hold the tensor.

[trace] warm_history (issue 42, default true): with a steps selection, the steps of the trace it
leaves out before its last selected step (before its range, or skipped by its stride) feed the
delayed histories as a replay of every step would (a snapshot's amax where the step has one
micro-batch, else amax.csv's, per micro-batch; reduced under reduce_amax; the warm-up flag
follows), and have no row; load_for() reads them into trace.warm, replay_full() feeds them.
warmup_steps = N counts the selected steps.

Module API (used by tests/tools/reference/test_ref_*.py):
  encode(y, fmt) -> uint8 codes, decode(codes, fmt) -> float32, quantize_stats(x, scale, fmt),
  round_extended(), clipped_mask(), overshoot(), cos_sim(), cos_sim_bound(),
  DelayedState, current_scale(), parse_f32(), load_trace(), parse_experiment(), replay(),
  replay_all() (steps rows and gemm rows), replay_full() (steps, gemm, stream, summary rows),
  summary_rows(), compare_rows(), compare_gemm_rows(), compare_stream_rows(),
  compare_summary_rows(), compare_all();
  block recipes: e8m0_ceil(), mx_exponent(), e8m0_scale(), current_scales(), BlockRecipe
  (.quantize(x, role, colwise)); GEMM errors: sample_tokens(), gemm_reference(),
  gemm_errors(), rel_error(), TensorRecipe, layer_triplets(); issue 45: Nvfp4Recipe,
  MixedRecipe, layer_requests(), fp4_reference(), ratio_estimate().
"""

import os
# The GEMMs here are small: OpenBLAS threads only cost (x30 on a busy 2-core machine). Must be
# set before numpy loads OpenBLAS; an explicit setting wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import csv
import fnmatch
import json
import math
import re
import struct
import sys
from fractions import Fraction

import numpy as np
import ml_dtypes

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fp4ref  # noqa: E402  (NVFP4's GEMM operands: fp4ref.nvfp4_xhat, the Hadamard transform)

F32 = np.float32
FLT_MAX = F32(np.finfo(np.float32).max)

# --------------------------------------------------------------------------------------------
# FP8 formats
# --------------------------------------------------------------------------------------------


class Fmt:
    def __init__(self, name, dtype, fp8_max, exp_mask, man_mask):
        self.name = name
        self.dtype = dtype
        self.max = F32(fp8_max)
        self.exp_mask = exp_mask   # exponent bits of the code
        self.man_mask = man_mask   # mantissa bits of the code
        self.mbits = bin(man_mask).count("1")   # mantissa width: 3 (E4M3), 2 (E5M2)


E4M3 = Fmt("e4m3", ml_dtypes.float8_e4m3fn, 448.0, 0x78, 0x07)
E5M2 = Fmt("e5m2", ml_dtypes.float8_e5m2, 57344.0, 0x7C, 0x03)
FORMATS = {"e4m3": E4M3, "e5m2": E5M2}

FWD_ROLES = ("input", "weight", "output")
BWD_ROLES = ("grad_output", "grad_input")


def get_fmt(fmt):
    return fmt if isinstance(fmt, Fmt) else FORMATS[fmt]


def encode(y, fmt):
    """Saturating RN-even encode of float32 values (cvt.rn.satfinite). Returns uint8 codes.

    ml_dtypes rounds float32 -> fp8 to nearest even but does not saturate, so y is clipped to
    [-max, max] first (clipping keeps NaN as NaN and +-inf becomes +-max)."""
    fmt = get_fmt(fmt)
    y = np.asarray(y, dtype=np.float32)
    with np.errstate(invalid="ignore"):
        yc = np.clip(y, -fmt.max, fmt.max)
        return np.ascontiguousarray(yc.astype(fmt.dtype)).view(np.uint8)


def decode(codes, fmt):
    fmt = get_fmt(fmt)
    return np.asarray(codes, dtype=np.uint8).view(fmt.dtype).astype(np.float32)


def is_subnormal_code(codes, fmt):
    fmt = get_fmt(fmt)
    return ((codes & fmt.exp_mask) == 0) & ((codes & fmt.man_mask) != 0)


def round_extended(y, fmt):
    """|y| rounded to nearest-even with fmt's mantissa width and an UNBOUNDED exponent range
    (float32 in, float32 out; inf stays inf). RECIPES.md "clipped": an element clips when this
    lies above fp8_max, i.e. when even a format with more exponents would not have rounded it
    back to the max. Done on the float32 bits: keep the top mbits mantissa bits, round the
    rest half-to-even (a carry moves into the exponent, as it should). Float32 subnormals are
    rounded on their own bit grid, which only matters far below any fp8_max."""
    fmt = get_fmt(fmt)
    a = np.abs(np.asarray(y, dtype=np.float32))
    b = a.view(np.uint32)           # finite: <= 0x7F7FFFFF, so b + 2^20 cannot wrap
    sh = np.uint32(23 - fmt.mbits)
    with np.errstate(over="ignore"):
        r = ((b + np.uint32((1 << (23 - fmt.mbits - 1)) - 1) + ((b >> sh) & np.uint32(1)))
             >> sh) << sh
    r = np.minimum(r, np.uint32(0x7F800000)).view(np.float32)  # past FLT_MAX: inf
    return np.where(np.isnan(a), a, np.where(np.isinf(a), F32(np.inf), r)).astype(np.float32)


def clipped_mask(y, fmt):
    """Elements y = RN32(x*s) that clip (RECIPES.md): round_extended(y) > fp8_max."""
    with np.errstate(invalid="ignore"):
        return round_extended(y, fmt) > get_fmt(fmt).max


def overshoot(amax, scale, fmt):
    """log2(amax * scale / fp8_max) in double from the float32 amax and scale; -inf for amax 0
    (RECIPES.md "overshoot"; > 0: the largest element saturated, by that many binades)."""
    a = float(F32(amax))
    if not a > 0:
        return -math.inf
    v = a * float(F32(scale)) / float(get_fmt(fmt).max)
    return math.inf if math.isinf(v) else math.log2(v)


def cos_sim(sum_sq, sum_sq_hat, sum_sq_err):
    """Cosine similarity of x and xhat from the three double sums over the finite x:
    sum x xhat = (sum x^2 + sum xhat^2 - sum (x - xhat)^2) / 2, over |x| |xhat|, clamped to
    [-1, 1]; 1 when both norms are 0, 0 when exactly one is; nan when a sum is not finite
    (a dequantized inf)."""
    if sum_sq == 0 and sum_sq_hat == 0:
        return 1.0
    if sum_sq == 0 or sum_sq_hat == 0:
        return 0.0
    with np.errstate(all="ignore"):
        c = (sum_sq + sum_sq_hat - sum_sq_err) / (2.0 * math.sqrt(sum_sq) * math.sqrt(sum_sq_hat))
    if math.isnan(c):
        return math.nan
    return max(-1.0, min(1.0, c))


COS_SIM_TOL = 1e-9


def cos_sim_bound(n, sum_sq, sum_sq_hat, sum_sq_err):
    """How far fp8lab's cos_sim may lie from the reference's, both computed by cos_sim()'s
    formula from n double terms per sum that are the same on both sides (x^2, xhat^2,
    (x - xhat)^2 of float32 values) but summed differently: fp8lab's sums are each within
    n 2^-53 relative of the exact sums (docs/semantics.md: the histogram form; its element
    loops within (n - 1) 2^-53), the reference's (numpy's pairwise sum) within (n - 1) 2^-53
    (fsum where the formula cancels: 2^-54). The numerator's error over the denominator:
    (2n + 1) 2^-53 (sum_sq + sum_sq_hat + sum_sq_err) / (2 |x| |xhat|), plus COS_SIM_TOL
    (1e-9); a single term is summed exactly on both sides (bound 1e-9).
    Where xhat is close to x this is ~1e-9 for any realistic n; where the formula cancels (a
    saturated outlier that is nearly all of sum x^2 and of the error sum) the bound grows with
    the cancellation, as it must: the formula itself loses those digits."""
    if n <= 1 or not (sum_sq > 0 and sum_sq_hat > 0) or not all(
            math.isfinite(v) for v in (sum_sq, sum_sq_hat, sum_sq_err)):
        return COS_SIM_TOL
    den = 2.0 * math.sqrt(sum_sq) * math.sqrt(sum_sq_hat)
    return COS_SIM_TOL + (2 * n + 1) * 2.0 ** -53 * (sum_sq + sum_sq_hat + sum_sq_err) / den


def resolve_format(fmt_name, role):
    if fmt_name in FORMATS:
        return fmt_name
    if fmt_name != "hybrid":
        raise ValueError("unknown format %r" % fmt_name)
    if role in FWD_ROLES:
        return "e4m3"
    if role in BWD_ROLES:
        return "e5m2"
    raise ValueError("format hybrid: tensor role %r is not one of %s" %
                     (role, ", ".join(FWD_ROLES + BWD_ROLES)))


def role_of(name):
    return name.rsplit(".", 1)[-1]

# --------------------------------------------------------------------------------------------
# float32 helpers
# --------------------------------------------------------------------------------------------


def f32_bits(v):
    return int(np.asarray(v, dtype=np.float32).view(np.uint32))


def bits_f32(b):
    return np.array([b], dtype=np.uint32).view(np.float32)[0]


def parse_f32(text):
    """Decimal text -> float32 rounded to nearest even directly (like strtof), no double
    rounding. Accepts inf/-inf/infinity/nan with any case and sign."""
    s = text.strip()
    body = s.lower().lstrip("+-")
    neg = s.startswith("-")
    if body in ("inf", "infinity"):
        return F32(-math.inf if neg else math.inf)
    if body == "nan":
        return F32(math.nan)
    d = float(s)  # raises ValueError on junk
    with np.errstate(over="ignore"):
        f = F32(d)
    if np.isfinite(f) and float(f) == d:
        return f  # exact, nothing was rounded twice
    # Rounded: pick among the float32 neighbours of f with exact arithmetic (ties to even).
    a = abs(Fraction(s))
    if a >= Fraction(float(FLT_MAX)) + Fraction(2) ** (127 - 24):
        return F32(-math.inf if neg else math.inf)
    fa = min(abs(f), FLT_MAX)
    with np.errstate(over="ignore"):
        cands = [np.nextafter(fa, F32(0)), fa, np.nextafter(fa, F32(np.inf))]
    best = None
    for c in cands:
        if not np.isfinite(c):
            continue
        key = (abs(Fraction(float(c)) - a), f32_bits(c) & 1)
        if best is None or key < best[0]:
            best = (key, F32(c))
    return F32(-best[1]) if neg else best[1]


def fmt_g(v):
    """'%.9g' with inf/-inf/nan spelled that way."""
    v = float(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return "%.9g" % v

# --------------------------------------------------------------------------------------------
# amax, scales, statistics
# --------------------------------------------------------------------------------------------


def tensor_amax(x):
    """max |x| ignoring NaN (fmaxf), inf counts; empty or all-NaN -> 0."""
    x = np.asarray(x, dtype=np.float32).ravel()
    if x.size == 0:
        return F32(0)
    return F32(np.fmax.reduce(np.abs(x), initial=np.float32(0)))


def scaled_max(fmt, margin):
    # fp8_max * 2^-m is exact in double for any sane m; one rounding to float32 = RN32.
    with np.errstate(over="ignore"):
        return F32(float(get_fmt(fmt).max) * math.ldexp(1.0, -int(margin)))


def _div32(a, b):
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        return F32(F32(a) / F32(b))


class DelayedState:
    """TE delayed scaling state for one (tensor, configuration): the fused CUDA update by
    default; unfused=True: TE's unfused Python path (NVTE_UNFUSED_FP8_UPDATE=1, issue 40)."""

    def __init__(self, fmt, history_len=1024, margin=0, amax_compute="max", unfused=False):
        if int(history_len) < 1:
            raise ValueError("history_len must be >= 1")
        if amax_compute not in ("max", "most_recent"):
            raise ValueError("amax_compute must be max or most_recent")
        self.fmt = get_fmt(fmt)
        self.L = int(history_len)
        self.margin = int(margin)
        self.amax_compute = amax_compute
        self.unfused = bool(unfused)
        self.scale = F32(1.0)
        # history[1..L-1] of RECIPES.md (slot 0 is always 0 after a roll and never read)
        self.hist = np.zeros(self.L - 1, dtype=np.float32)

    def update(self, last):
        last = F32(last)
        if last == 0 and not self.unfused:
            return self.scale          # module did not run: keep everything (TE PR #825)
        # unfused (quantization.py _default_get_amax_and_update_history): history[0] = last,
        # amax = torch.max(history) -- NaN propagates -- then the roll, for every amax, 0 too
        window = np.concatenate([self.hist, np.array([last], dtype=np.float32)])
        if self.unfused:
            amax_max = F32(np.max(window))       # NaN wins, as torch.max
        else:
            amax_max = F32(np.fmax.reduce(window))  # NaN ignored unless all NaN
        if self.L > 1:
            self.hist = window[1:].copy()        # roll: history[L-1] = last
        amax = amax_max if self.amax_compute == "max" else last
        if np.isfinite(amax) and amax > 0:
            if self.unfused:  # _default_sf_compute: (fp8_max / amax) / 2**margin
                s = _div32(_div32(F32(self.fmt.max), amax), F32(2.0 ** self.margin))
            else:
                s = _div32(scaled_max(self.fmt, self.margin), amax)
            if np.isinf(s):
                s = FLT_MAX
            self.scale = s
        return self.scale


def current_scale(amax, fmt, amax_epsilon=0.0, pow2=False, margin=0):
    a = F32(np.fmax(F32(amax), F32(amax_epsilon)))
    if not np.isfinite(a) or a == 0:
        s = F32(1.0)
    else:
        s = _div32(scaled_max(fmt, margin), a)
        if np.isinf(s):
            s = FLT_MAX
    if pow2:
        s = bits_f32(f32_bits(s) & 0xFF800000)
    return F32(s)


STAT_FIELDS = ("n", "nonfinite", "zeros", "overflow", "underflow", "subnormal", "mse", "snr_db",
               "clipped", "cos_sim")
# not CSV columns: the double sums behind mse, snr_db and cos_sim (summary.csv totals them)
# and the tolerance a cos_sim computed from differently rounded sums needs (cos_sim_bound)
AUX_FIELDS = ("sum_sq", "sum_sq_hat", "sum_sq_err", "cos_sim_tol")


def quantize_stats(x, scale, fmt):
    """Statistics of one tensor quantized with float32 scale `scale` in format fmt."""
    fmt = get_fmt(fmt)
    x = np.asarray(x, dtype=np.float32).ravel()
    s = F32(scale)
    with np.errstate(all="ignore"):
        y = x * s                                   # RN32(x * s)
        codes = encode(y, fmt)
        scale_inv = F32(F32(1.0) / s)               # RN32(1 / s)
        xhat = decode(codes, fmt) * scale_inv        # RN32(decode(q) * scale_inv)
        fin = np.isfinite(x)
        n = int(x.size)
        nonfinite = int(np.count_nonzero(~fin))
        zeros = int(np.count_nonzero(x == 0))
        overflow = int(np.count_nonzero(fin & (np.abs(y) > fmt.max)))
        clipped = int(np.count_nonzero(fin & clipped_mask(y, fmt)))
        underflow = int(np.count_nonzero(fin & (x != 0) & ((codes & 0x7F) == 0)))
        subnormal = int(np.count_nonzero(fin & is_subnormal_code(codes, fmt)))
        xf = x[fin].astype(np.float64)
        xh = xhat[fin].astype(np.float64)
        err = xf - xh
        nfin = xf.size
        e2, x2, h2 = err * err, xf * xf, xh * xh
        esum, xsum, hsum = float(np.sum(e2)), float(np.sum(x2)), float(np.sum(h2))
        if _cos_ill_conditioned(nfin, xsum, hsum, esum):
            # cos_sim's formula cancels (sum x^2 - sum (x - xhat)^2 when xhat is small): take
            # correctly rounded sums (fsum) there, so that the reference is the definition's
            # value and the whole tolerance (cos_sim_bound) is left to fp8lab's rounding
            esum, xsum, hsum = _fsum(e2), _fsum(x2), _fsum(h2)
        mse = esum / nfin if nfin else math.nan
        if esum == 0:
            snr = math.inf
        elif xsum == 0 or math.isinf(esum):
            # an infinite error (a dequantized value beyond float32, possible with MX scales
            # at the float32 edge) gives -inf, as 10*log10(sum_sq / inf) does in C
            snr = -math.inf
        else:
            snr = 10.0 * math.log10(xsum / esum)
    return dict(n=n, nonfinite=nonfinite, zeros=zeros, overflow=overflow, underflow=underflow,
                subnormal=subnormal, mse=mse, snr_db=snr, clipped=clipped,
                cos_sim=cos_sim(xsum, hsum, esum), sum_sq=xsum, sum_sq_hat=hsum, sum_sq_err=esum,
                cos_sim_tol=cos_sim_bound(nfin, xsum, hsum, esum))


def _cos_ill_conditioned(n, sum_sq, sum_sq_hat, sum_sq_err):
    """True when cos_sim's formula amplifies the sums' rounding more than 1000-fold: the
    amplification (sum_sq + sum_sq_hat + sum_sq_err) / (2 |x| |xhat|) of cos_sim_bound() is
    > 1e3 (1 where xhat is close to x). numpy's pairwise sums are within n 2^-53 relative, a
    share cos_sim_bound() allows for, but there exact sums make the reference the
    definition's value and leave the tolerance to fp8lab's rounding."""
    if n <= 1 or not (sum_sq > 0 and sum_sq_hat > 0) or not all(
            math.isfinite(v) for v in (sum_sq, sum_sq_hat, sum_sq_err)):
        return False
    k = (sum_sq + sum_sq_hat + sum_sq_err) / (2.0 * math.sqrt(sum_sq) * math.sqrt(sum_sq_hat))
    return k > 1e3


def _fsum(a):
    """Correctly rounded sum of a float64 array (inf/nan propagate as in a plain sum)."""
    a = np.asarray(a, dtype=np.float64)
    if not np.all(np.isfinite(a)):
        return float(np.sum(a))
    return math.fsum(a.tolist())

# --------------------------------------------------------------------------------------------
# block recipes (RECIPES.md "Block recipes"): mxfp8, block, rowwise
# --------------------------------------------------------------------------------------------
#
# Written from RECIPES.md and docs/semantics.md with whole-array numpy (pad to whole blocks,
# reshape, reduce), not from src/sim/block.c. Readings pinned by the self-test:
# - a tensor is viewed as [product of leading dims, last dim] (1-D: one row, 0-D: 1x1);
#   a partial block at an edge is a block of its own;
# - E8M0 "ceil" is the smallest e in [0, 254] with 2^(e-127) >= v (NaN -> 255, inf -> 254), as
#   TE's float_to_e8m0 computes it (this is also its rounding for float32 subnormals v);
#   "floor" is floor(log2 b) - emax + 127 clamped to [0, 254] (0 -> 0, inf -> 254, NaN -> 255);
# - the element scale of code e is 2^(127-e) exactly (e = 0: 2^127), dequantization RN32(1/s);
# - block and rowwise scale each block like current scaling (margin, amax_epsilon, pow2);
# - block statistics: nblocks, blocks_with_overflow (any element counted in `overflow`),
#   min/max/std (population) of log2(scale) over the blocks whose amax is finite and > 0
#   (NaN when there is none).
#
# Outputs of the runner for these kinds (replay_all() below):
# - steps.csv: one row per tensor, snapshot step and configuration as for current scaling, the
#   per-tensor `scale` column EMPTY (there is one scale per block), history_len, margin and
#   amax_compute empty, `amax` the tensor's amax, the statistics columns computed with each
#   element's own block scale; the block statistics in the 5 columns appended after snr_db
#   (nblocks, blocks_with_overflow, log2_scale_min, log2_scale_max, log2_scale_std; empty for
#   delayed and current rows). The rows use the row-wise orientation (blocks along the last
#   dimension, weights 128x128 under block = auto).
# - gemm.csv: one row per snapshot step, layer, GEMM and configuration, columns
#     layer,gemm,step,recipe,kind,history_len,margin,amax_compute,rel_error
#   layer = the module path with `.input`, `.weight` and `.grad_output` (agreeing shapes) at
#   that step; gemm = fprop | dgrad | wgrad; history_len, margin, amax_compute as in steps.csv;
#   rel_error = ||Y - Y_ref||_F / ||Y_ref||_F printed %.9g. Y is an FP32 GEMM, whose summation
#   order is the BLAS's own, so a comparison of rel_error needs a relative tolerance (1e-3 is
#   ample: the FP32 rounding is ~1e-7 of ||Y||, FP8 errors are percents).

MX_BLOCK = 32
TILE = 128
_EMAX = {"e4m3": 8, "e5m2": 15}


def as_matrix(x):
    """[product of leading dims, last dim] view (float32); 1-D -> [1, n], 0-D -> [1, 1]."""
    x = np.asarray(x, dtype=np.float32)
    if x.ndim == 0:
        return x.reshape(1, 1)
    if x.ndim == 1:
        return x.reshape(1, -1)
    return x.reshape(-1, x.shape[-1])


def e8m0_ceil(v):
    """E8M0 code of |v| rounded up to a power of two (array in, int64 array out)."""
    v = np.abs(np.asarray(v, dtype=np.float32)).astype(np.float64)
    with np.errstate(invalid="ignore"):
        m, k = np.frexp(np.where(np.isfinite(v), v, 1.0))   # v = m * 2^k, m in [0.5, 1)
        up = np.where(m == 0.5, k - 1, k)                   # ceil(log2 v), exact
        e = np.clip(up + 127, 0, 254)
    e = np.where(v == 0, 0, e)
    e = np.where(np.isinf(v), 254, e)
    e = np.where(np.isnan(v), 255, e)
    return e.astype(np.int64)


def mx_exponent(amax, fmt, rounding="ceil"):
    """E8M0 biased exponent of MX blocks whose amaxes are `amax` (array)."""
    fmt = get_fmt(fmt)
    b = np.abs(np.asarray(amax, dtype=np.float32))
    if rounding == "ceil":
        with np.errstate(over="ignore"):
            return e8m0_ceil(b * (F32(1) / fmt.max))       # both products RN32
    if rounding != "floor":
        raise ValueError("MX scale rounding must be ceil or floor, not %r" % rounding)
    bd = b.astype(np.float64)
    with np.errstate(invalid="ignore"):
        _m, k = np.frexp(np.where(np.isfinite(bd) & (bd > 0), bd, 1.0))
    e = np.clip((k - 1) - _EMAX[fmt.name] + 127, 0, 254)
    e = np.where(bd == 0, 0, e)
    e = np.where(np.isinf(bd), 254, e)
    e = np.where(np.isnan(bd), 255, e)
    return e.astype(np.int64)


def e8m0_scale(e):
    """2^(127-e) as float32 (exact; e = 0 -> 2^127, 254 -> 2^-127, 255 -> 2^-128)."""
    return np.ldexp(1.0, 127 - np.asarray(e, dtype=np.int64)).astype(np.float32)


# The largest finite value of each trace dtype: TE's Float8BlockScaling scales with the input
# dtype's (TypeInfo<IType>::max_finite_value) when fp8_max / amax overflows float32.
DTYPE_MAX = {"F32": FLT_MAX, "BF16": F32(float.fromhex("0x1.fep127")), "F16": F32(65504.0)}


def current_scales(amax, fmt, amax_epsilon=0.0, pow2=False, margin=0, value_for_inf=FLT_MAX):
    """current_scale() over an array of amaxes; value_for_inf replaces an infinite quotient."""
    a = np.fmax(np.asarray(amax, dtype=np.float32), F32(amax_epsilon))
    with np.errstate(all="ignore"):
        s = (scaled_max(fmt, margin) / a).astype(np.float32)
    s = np.where(np.isinf(s), F32(value_for_inf), s)
    s = np.where(np.isfinite(a) & (a != 0), s, F32(1)).astype(np.float32)
    if pow2:
        s = (s.view(np.uint32) & np.uint32(0xFF800000)).view(np.float32)
    return s


class BlockRecipe:
    """One block recipe: kind mxfp8 | block | rowwise, format (e4m3 | e5m2 | hybrid).

    mxfp8: rounding ceil | floor; block: block = 1x128 | 128x128 | auto; block and rowwise:
    pow2 (default true), margin, amax_epsilon as current scaling. block_len overrides the
    block length (32 / 128) for tests. dtypes: {role: "F32" | "BF16" | "F16"}, the input
    dtype of each role (default F32): kind block scales with DTYPE_MAX of it where
    fp8_max / amax overflows float32 (TE's value_for_inf), the other kinds with FLT_MAX."""

    def __init__(self, kind, fmt="hybrid", rounding="ceil", block="auto", pow2=True, margin=0,
                 amax_epsilon=0.0, block_len=None, dtypes=None):
        self.dtypes = dict(dtypes or {})
        if kind not in ("mxfp8", "block", "rowwise"):
            raise ValueError("unknown block recipe kind %r" % kind)
        if block not in ("1x128", "128x128", "auto"):
            raise ValueError("block must be 1x128, 128x128 or auto, not %r" % block)
        if kind == "mxfp8" and (margin != 0 or amax_epsilon != 0):
            raise ValueError("mxfp8 takes no margin or amax_epsilon")
        self.kind, self.fmt, self.rounding, self.block = kind, fmt, rounding, block
        self.pow2, self.margin, self.amax_epsilon = pow2, int(margin), F32(amax_epsilon)
        self.block_len = block_len if block_len is not None else (
            MX_BLOCK if kind == "mxfp8" else TILE)

    def square(self, role):
        return self.kind == "block" and (
            self.block == "128x128" or (self.block == "auto" and role == "weight"))

    def scales_for(self, amax, fmt, role="input"):
        if self.kind == "mxfp8":
            return e8m0_scale(mx_exponent(amax, fmt, self.rounding))
        inf = DTYPE_MAX[self.dtypes.get(role, "F32")] if self.kind == "block" else FLT_MAX
        return current_scales(amax, fmt, self.amax_epsilon, self.pow2, self.margin, inf)

    def quantize(self, x, role="input", colwise=False, stats=True):
        """-> dict: stats (quantize_stats fields), nblocks, blocks_with_overflow,
        nblocks_scaled, log2_scale_min/max/std, scales (the block grid, [dim0 blocks, dim1
        blocks]), xhat (2-D, dequantized). colwise: blocks along the first dimension. stats
        False: the block fields and xhat only (a GEMM operand)."""
        fmt = get_fmt(resolve_format(self.fmt, role))
        x2 = as_matrix(x)
        sq = self.square(role)
        if colwise and not sq:
            r = self._quantize_rows(x2.T, fmt, False, role)
            r["xhat"] = r["xhat"].T
            r["scales"] = r["scales"].T
            r["elem_scale"] = r["elem_scale"].T
        else:
            r = self._quantize_rows(x2, fmt, sq, role)
        if not stats:
            return r
        st = quantize_stats(x2.ravel(), r.pop("elem_scale").ravel(), fmt)
        st.update(r)
        return st

    def _quantize_rows(self, x, fmt, square, role="input"):
        rows, cols = x.shape
        if self.kind == "rowwise":
            bh, bl = 1, max(cols, 1)
        else:
            bh, bl = (self.block_len if square else 1), self.block_len
        gr, gc = -(-rows // bh), -(-cols // bl)
        pad = np.zeros((gr * bh, gc * bl), np.float32)     # zeros never raise an amax
        pad[:rows, :cols] = x
        tiles = np.abs(pad).reshape(gr, bh, gc, bl)
        amax = np.fmax.reduce(np.fmax.reduce(tiles, axis=3, initial=F32(0)), axis=1,
                              initial=F32(0))
        scales = self.scales_for(amax, fmt, role).reshape(gr, gc)
        elem = np.repeat(np.repeat(scales, bh, axis=0), bl, axis=1)[:rows, :cols]
        with np.errstate(all="ignore"):
            y = x * elem
            codes = encode(y, fmt)
            xhat = decode(codes, fmt) * (F32(1) / elem)
            ovf = np.isfinite(x) & (np.abs(y) > fmt.max)
        ovf_pad = np.zeros((gr * bh, gc * bl), bool)
        ovf_pad[:rows, :cols] = ovf
        ovf_blocks = ovf_pad.reshape(gr, bh, gc, bl).any(axis=(1, 3))
        ok = np.isfinite(amax) & (amax > 0)
        l2 = np.log2(scales[ok].astype(np.float64))
        # overshoot: the worst block's log2(block amax * block scale / fp8_max) in double
        # (-inf for an all-zero block, so -inf when every block is zero or there is none)
        with np.errstate(divide="ignore", over="ignore"):
            ov = np.log2(amax.reshape(gr, gc).astype(np.float64) * scales.astype(np.float64)
                         / float(fmt.max))
        return dict(scales=scales, elem_scale=elem, xhat=xhat.astype(np.float32),
                    nblocks=int(gr * gc), blocks_with_overflow=int(ovf_blocks.sum()),
                    nblocks_scaled=int(ok.sum()),
                    overshoot=float(ov.max()) if ov.size else -math.inf,
                    log2_scale_min=float(l2.min()) if l2.size else math.nan,
                    log2_scale_max=float(l2.max()) if l2.size else math.nan,
                    log2_scale_std=float(l2.std()) if l2.size else math.nan)


class TensorRecipe:
    """A per-tensor recipe for the GEMM errors: one scale per role (delayed, current), the
    same dequantized tensor for every GEMM."""

    def __init__(self, fmt, scales):
        self.fmt = fmt
        self.scales = scales        # role -> float32 scale

    def quantize(self, x, role="input", colwise=False, stats=False):
        fmt = get_fmt(resolve_format(self.fmt, role))
        s = F32(self.scales[role])
        with np.errstate(all="ignore"):
            xhat = decode(encode(as_matrix(x) * s, fmt), fmt) * (F32(1) / s)
        return dict(xhat=xhat.astype(np.float32))

class Nvfp4Recipe:
    """An NVFP4 configuration's GEMM operands (docs/semantics.md "The recipe kinds nvfp4 and
    mxfp4", "Where the transform applies"): 1x16 runs along the GEMM's reduction dimension
    (16x16 blocks for weights under block = auto), max6 block scales under the per-tensor
    scale of the tensor's amax; stochastic rounding for grad_output and grad_input under
    rounding = auto (its draw: fp4ref.nvfp4_xhat; a column-wise copy's indices from 2^48, in
    the transposed matrix it casts). The column-wise input and grad_output (wgrad's operands)
    take the Hadamard transform along the tokens when rht and their token count is a multiple
    of 16: transformed (BF16), their amax then, quantized, and transformed back (float32)."""

    def __init__(self, cfg):
        self.cfg = cfg

    def quantize(self, x, role="input", colwise=False, stats=False):
        c = self.cfg
        x2 = as_matrix(x)
        square = c.nv_block == "16x16" or (c.nv_block == "auto" and role == "weight")
        sr = c.rounding_fp4 == "stochastic" or (c.rounding_fp4 == "auto" and
                                                role in ("grad_output", "grad_input"))
        seed = c.sr_seed if sr else None
        if not colwise:
            return dict(xhat=fp4ref.nvfp4_xhat(x2, square, tensor_amax(x2), c.e4m3_max, seed))
        t = np.ascontiguousarray(x2.T)
        rht = c.rht and role != "weight" and x2.shape[0] % 16 == 0
        if rht:
            t = fp4ref.rht_rows(t)
        xh = fp4ref.nvfp4_xhat(t, square, tensor_amax(t), c.e4m3_max, seed, 1 << 48)
        if rht:
            xh = fp4ref.rht_rows_back(xh)
        return dict(xhat=np.ascontiguousarray(xh.T))


class MixedRecipe:
    """A GEMM request's operands: each role quantized by its own configuration's recipe (a
    mixed recipe label whose sections split a layer: docs/semantics.md "GEMMs of a mixed
    recipe"), its dequantized operands kept in `cache` under (the role's key, role, colwise)
    (a layer's requests share it: configurations that quantize a tensor alike, once)."""

    def __init__(self, by_role, keys, cache):
        self.by_role, self.keys, self.cache = by_role, keys, cache

    def quantize(self, x, role="input", colwise=False):
        k = (self.keys[role], role, colwise)
        if k not in self.cache:
            self.cache[k] = dict(xhat=self.by_role[role].quantize(x, role, colwise,
                                                                   stats=False)["xhat"])
        return self.cache[k]

# --------------------------------------------------------------------------------------------
# GEMM-level errors
# --------------------------------------------------------------------------------------------
#
# fprop = input x weight^T, dgrad = grad_output x weight, wgrad = grad_output^T x input;
# input [tokens, in], weight [out, in], grad_output [tokens, out]. Block operands are quantized
# with their blocks along each GEMM's reduction dimension (TE): fprop input and weight
# row-wise, dgrad grad_output row-wise and weight column-wise, wgrad both column-wise.

GEMMS = ("fprop", "dgrad", "wgrad")
GEMM_OPERANDS = {"fprop": (("input", False), ("weight", False)),
                 "dgrad": (("grad_output", False), ("weight", True)),
                 "wgrad": (("grad_output", True), ("input", True))}


def sample_tokens(tokens, max_tokens=0):
    """Token rows the GEMMs use: all, or floor(i * tokens / max_tokens) for i < max_tokens."""
    if max_tokens and 0 < max_tokens < tokens:
        return np.array([i * tokens // max_tokens for i in range(max_tokens)], dtype=np.int64)
    return np.arange(tokens, dtype=np.int64)


def _gemm(g, a, b, dtype):
    a = a.astype(dtype)
    b = b.astype(dtype)
    if g == "fprop":
        return a @ b.T
    if g == "dgrad":
        return a @ b
    return a.T @ b


def gemm_reference(x, w, dy, max_tokens=0):
    """-> {gemm: float64 Y_ref} from the original operands (any may be None)."""
    ops = {"input": x, "weight": w, "grad_output": dy}
    tokens = (x if x is not None else dy).shape[0]
    tok = sample_tokens(tokens, max_tokens)
    ref = {}
    for g in GEMMS:
        (ra, _), (rb, _) = GEMM_OPERANDS[g]
        if ops[ra] is None or ops[rb] is None:
            continue
        a = ops[ra][tok]
        b = ops[rb] if rb == "weight" else ops[rb][tok]
        ref[g] = _gemm(g, a, b, np.float64)
    return ref


def rel_error(y, yref):
    d = np.asarray(y, np.float64) - yref
    num = math.sqrt(float(np.sum(d * d)))
    den = math.sqrt(float(np.sum(yref * yref)))
    if den == 0:
        return 0.0 if num == 0 else (math.nan if math.isnan(num) else math.inf)
    return num / den


def gemm_errors(x, w, dy, recipe, max_tokens=0, ref=None):
    """{gemm: rel_error} of one configuration (a BlockRecipe or TensorRecipe): every operand
    is quantized whole in the orientation its GEMM needs, then the sampled tokens are taken;
    Y is a float32 GEMM (numpy/BLAS). `ref` (gemm_reference) may be reused across configs."""
    ops = {"input": x, "weight": w, "grad_output": dy}
    if ref is None:
        ref = gemm_reference(x, w, dy, max_tokens)
    tokens = (x if x is not None else dy).shape[0]
    tok = sample_tokens(tokens, max_tokens)
    out = {}
    for g in GEMMS:
        if g not in ref:
            out[g] = math.nan
            continue
        q = []
        for role, colwise in GEMM_OPERANDS[g]:
            xh = recipe.quantize(ops[role], role, colwise)["xhat"]
            q.append(xh if role == "weight" else xh[tok])
        with np.errstate(all="ignore"):
            y = _gemm(g, q[0], q[1], np.float32)
        out[g] = rel_error(y, ref[g])
    return out

# --------------------------------------------------------------------------------------------
# the sampled GEMM error (docs/semantics.md, "Sampled GEMM error"), written from that text
# --------------------------------------------------------------------------------------------

_M64 = (1 << 64) - 1


class _SplitMix:
    def __init__(self, x):
        self.x = x & _M64

    def next(self):
        self.x = (self.x + 0x9E3779B97F4A7C15) & _M64
        z = self.x
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
        return z ^ (z >> 31)


def sample_seed(gemm_seed, layer, step, g):
    """gemm_seed, the layer name (FNV-1a), the step and the GEMM (0 fprop, 1 dgrad, 2 wgrad),
    each mixed in by one splitmix64 step."""
    m = re.match(r"rank_[0-9]+/", layer)   # a multi-rank trace's prefix is left out
    if m:
        layer = layer[m.end():]
    h = 0xCBF29CE484222325
    for c in layer.encode():
        h = ((h ^ c) * 0x100000001B3) & _M64
    s = _SplitMix(gemm_seed).next() ^ h
    s = _SplitMix(s).next() ^ (step & _M64)
    s = _SplitMix(s).next() ^ GEMMS.index(g)
    return _SplitMix(s).next()


def _draw(k, n, size, sm):
    """k draws of 0..n-1, with replacement, pi_i = (size_i / total + 1/n) / 2 (sequential double
    sums, as the text's CDF), sorted, with weights 1 / (n pi_i); all (weight 1) when k >= n."""
    if k >= n:
        return np.arange(n), np.ones(n)
    total = 0.0
    for v in size:
        total += float(v)
    pps = math.isfinite(total) and total > 0.0
    cdf = np.empty(n)
    acc = 0.0
    for i in range(n):
        acc += 0.5 * (float(size[i]) / total + 1.0 / n) if pps else 1.0 / n
        cdf[i] = acc
    idx = []
    for _ in range(k):
        x = (sm.next() >> 11) * 2.0 ** -53 * acc
        idx.append(min(int(np.searchsorted(cdf, x, side="right")), n - 1))
    idx = np.array(sorted(idx), dtype=np.int64)
    pi = (cdf[idx] - np.where(idx > 0, cdf[np.maximum(idx - 1, 0)], 0.0)) / acc
    return idx, 1.0 / (n * pi)


NORM_ROWS, NORM_COLS, NORM_GROUP = 256, 512, 32


def _sq_sums(m):
    """Squared norms of the rows and the columns of m as the text sums them, over a subsample
    of the other dimension once it is large: a column's over every rstep-th row, rstep =
    max(1, rows // 256); a row's over the columns of every gstep-th group of 32, gstep =
    max(1, cols // 512). x * x in float32; a column's over its rows in order (float32); a row's
    in eight float32 lanes by column index mod 8, ((l0 + l1) + (l2 + l3)) + ((l4 + l5) +
    (l6 + l7)). (Left-out elements enter as +0: the same float sums.)"""
    sq = np.asarray(m, np.float32) ** 2
    r, c = sq.shape
    rstep, gstep = max(1, r // NORM_ROWS), max(1, c // NORM_COLS)
    keep_r = (np.arange(r) % rstep == 0)[:, None]
    keep_c = ((np.arange(c) // NORM_GROUP) % gstep == 0)[None, :]
    sq_c = np.where(keep_r, sq, np.float32(0))
    sq_r = np.where(keep_c, sq, np.float32(0))
    cols = np.cumsum(sq_c, axis=0, dtype=np.float32)[-1] if r else np.zeros(c, np.float32)
    pad = np.zeros((r, -c % 8), np.float32)
    lanes = np.concatenate([sq_r, pad], axis=1).reshape(r, -1, 8)
    lanes = np.cumsum(lanes, axis=1, dtype=np.float32)[:, -1, :] if lanes.shape[1] else \
        np.zeros((r, 8), np.float32)
    l = [lanes[:, k] for k in range(8)]
    rows = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]))
    return rows.astype(np.float64), cols.astype(np.float64)


class GemmSample:
    """One GEMM's sample at a layer and step: rows and columns of its output drawn by their
    operand vectors' squared norms, the gathered originals and the reference block."""

    def __init__(self, g, ops, sample, seed):
        self.g = g
        # a column-wise operand (its blocks along its first dimension) is gathered by columns
        (ra, ca), (rb, cb) = self.spec = GEMM_OPERANDS[g]
        A, B = ops[ra], ops[rb]
        self.m = A.shape[1] if ca else A.shape[0]
        self.n = B.shape[1] if cb else B.shape[0]
        sa = _sq_sums(A)[1 if ca else 0]
        sb = _sq_sums(B)[1 if cb else 0]
        sm = _SplitMix(seed)
        self.rows, self.u = _draw(sample, self.m, sa, sm)
        self.cols, self.v = _draw(sample, self.n, sb, sm)
        a = self.gather(0, A)
        b = self.gather(1, B)
        self.yref = a.astype(np.float64) @ b.astype(np.float64).T

    def gather(self, operand, mat):
        col = self.spec[operand][1]
        idx = self.rows if operand == 0 else self.cols
        return (mat[:, idx].T if col else mat[idx, :]).astype(np.float32)

    def block(self, qa_full, qb_full):
        """The FP32 block of a configuration's whole dequantized operands."""
        with np.errstate(all="ignore"):
            return (self.gather(0, qa_full) @ self.gather(1, qb_full).T).astype(np.float32)

    def error(self, qa_full, qb_full):
        """(rel_error, lo, hi) for a configuration's whole dequantized operands."""
        return self.error_of(self.block(qa_full, qb_full))

    def error_of(self, y):
        """(rel_error, lo, hi) of a configuration's FP32 block."""
        return sample_estimate(self.yref, y, self.u, self.v, len(self.rows) == self.m,
                               len(self.cols) == self.n)

    def ratio(self, yc, yr):
        """(ratio, lo, hi): the paired ratio of two configurations' blocks (the FP4 verdict's,
        docs/semantics.md "The FP4 verdict's paired ratio")."""
        return ratio_estimate(self.yref, yc, yr, self.u, self.v, len(self.rows) == self.m,
                              len(self.cols) == self.n)


def _crossed_var(z, all_rows, all_cols):
    """The block mean's variance of z [p, q] under the crossed (rows x columns) design:
    max(0, S_R - S_E/q)/p + max(0, S_C - S_E/p)/q + S_E/(p q); all rows taken: S_C/q; all
    columns: S_R/p."""
    p, q = z.shape
    rm, cm, gm = z.mean(axis=1), z.mean(axis=0), z.mean()
    SR = float(np.sum((rm - gm) ** 2)) / (p - 1) if p > 1 else 0.0
    SC = float(np.sum((cm - gm) ** 2)) / (q - 1) if q > 1 else 0.0
    if all_rows:
        return SC / q
    if all_cols:
        return SR / p
    res = z - rm[:, None] - cm[None, :] + gm
    SE = float(np.sum(res * res)) / ((p - 1) * (q - 1))
    return max(0.0, SR - SE / q) / p + max(0.0, SC - SE / p) / q + SE / (p * q)


def _weighted_ratio(num, den, w, zero_over_zero, all_rows, all_cols):
    """sqrt(sum(w num) / sum(w den)) with its 95% interval (the sampled GEMM error, num = d and
    den = r; the paired ratio, num = d_c and den = d_ref): the delta method on the linearized
    residual z = w (num - Q den), Q the quotient, with the crossed variance; se = sqrt(Var) /
    mean(w den); Q exp(-+1.96 se / Q), the ends square-rooted. Special cases: an empty block
    NaN; a non-finite sum NaN or inf, lo = hi; sum(w den) = 0: zero_over_zero when sum(w num) is
    0 too, else +inf, with [0, +inf] unless the block is the whole output; Q = 0 or the whole
    output: lo = hi; a sampled side of one draw: [0, +inf]."""
    p, q = w.shape
    with np.errstate(all="ignore"):
        sn = float(np.sum(w * num))
        sd = float(np.sum(w * den))
    if p * q == 0:
        return math.nan, math.nan, math.nan
    if not (math.isfinite(sn) and math.isfinite(sd)):
        v_ = (math.nan if math.isnan(sn) else math.inf) if sd == 0 else math.sqrt(sn / sd)
        return v_, v_, v_
    whole = all_rows and all_cols
    if sd == 0:
        v_ = zero_over_zero if sn == 0 else math.inf
        return (v_, v_, v_) if whole else (v_, 0.0, math.inf)
    Q = sn / sd
    v_ = math.sqrt(Q)
    if whole or Q == 0:
        return v_, v_, v_
    if (p < 2 and not all_rows) or (q < 2 and not all_cols):
        return v_, 0.0, math.inf
    var = _crossed_var(w * (num - Q * den), all_rows, all_cols)
    se = math.sqrt(var) / (sd / (p * q))
    wd = 1.959963984540054 * se / Q
    return v_, math.sqrt(Q * math.exp(-wd)), math.sqrt(Q * math.exp(wd))


def ratio_estimate(yref, yc, yr, u, v, all_rows, all_cols):
    """The FP4 verdict's paired ratio of two configurations' blocks yc and yr (docs/semantics.md
    "The FP4 verdict's paired ratio"): Q = sum(w d_c) / sum(w d_ref), ratio = sqrt(Q), 0 / 0
    counting as 1 (_weighted_ratio)."""
    with np.errstate(all="ignore"):
        dc = (yc.astype(np.float64) - yref) ** 2
        dr = (yr.astype(np.float64) - yref) ** 2
    return _weighted_ratio(dc, dr, np.outer(u, v), 1.0, all_rows, all_cols)


def sample_estimate(yref, y, u, v, all_rows, all_cols):
    """The sampled GEMM error of a configuration's block y (docs/semantics.md "Sampled GEMM
    error"): R2 = sum(w d) / sum(w r), rel_error = sqrt(R2), 0 / 0 counting as 0."""
    with np.errstate(all="ignore"):
        e = y.astype(np.float64) - yref
        d = e * e
        r = yref * yref
    return _weighted_ratio(d, r, np.outer(u, v), 0.0, all_rows, all_cols)


# --------------------------------------------------------------------------------------------
# trace reading
# --------------------------------------------------------------------------------------------


_STEP_FILE = re.compile(r"^step_([0-9]+)\.safetensors$")
_STEP_DIR = re.compile(r"^step_([0-9]+)$")


def read_safetensors(path, dtypes=None):
    """-> {name: float32 ndarray (with shape)}. F32, BF16, F16, little endian."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError("%s: too short for a safetensors file" % path)
    (hlen,) = struct.unpack("<Q", blob[:8])
    if 8 + hlen > len(blob):
        raise ValueError("%s: header length %d beyond the file" % (path, hlen))
    header = json.loads(blob[8:8 + hlen].decode("utf-8"))
    data = memoryview(blob)[8 + hlen:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dt = info["dtype"]
        if dtypes is not None:
            dtypes[name] = dt
        shape = tuple(int(d) for d in info["shape"])
        b0, b1 = (int(v) for v in info["data_offsets"])
        cnt = int(np.prod(shape, dtype=np.int64)) if shape else 1
        size = {"F32": 4, "BF16": 2, "F16": 2}.get(dt)
        if size is None:
            raise ValueError("%s: tensor %s has unsupported dtype %s" % (path, name, dt))
        if b1 - b0 != cnt * size or b1 > len(data) or b0 < 0:
            raise ValueError("%s: tensor %s: bad data_offsets" % (path, name))
        raw = bytes(data[b0:b1])
        if dt == "F32":
            arr = np.frombuffer(raw, dtype="<f4").astype(np.float32)
        elif dt == "F16":
            arr = np.frombuffer(raw, dtype="<f2").astype(np.float32)
        else:
            arr = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        out[name] = arr.reshape(shape)
    return out


def read_npy_dir(path, dtypes=None):
    out = {}
    for root, _dirs, files in os.walk(path):
        for fn in files:
            if not fn.endswith(".npy"):
                continue
            full = os.path.join(root, fn)
            name = os.path.relpath(full, path)[:-4].replace(os.sep, "/")
            arr = np.load(full, allow_pickle=False)
            if arr.dtype not in (np.dtype("<f4"), np.dtype("<f2")):
                raise ValueError("%s: unsupported npy dtype %s" % (full, arr.dtype))
            out[name] = arr.astype(np.float32)
            if dtypes is not None:
                dtypes[name] = "F32" if arr.dtype == np.dtype("<f4") else "F16"
    return out


class StepSel:
    def __init__(self, spec=None):
        self.spec = spec
        if spec is None or spec.strip() == "":
            self.a = self.b = None
            self.stride = 1
            return
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*(?::\s*(\d+)\s*)?)?", spec)
        if not m:
            raise ValueError("bad steps selection %r (a, a-b or a-b:stride)" % spec)
        self.a = int(m.group(1))
        self.b = int(m.group(2)) if m.group(2) is not None else self.a
        self.stride = int(m.group(3)) if m.group(3) is not None else 1
        if self.stride < 1 or self.b < self.a:
            raise ValueError("bad steps selection %r" % spec)

    def __call__(self, t):
        if self.a is None:
            return True
        return self.a <= t <= self.b and (t - self.a) % self.stride == 0


class TensorSel:
    def __init__(self, spec=None):
        self.globs = None
        if spec is not None and spec.strip() != "":
            self.globs = [g.strip() for g in spec.split(",") if g.strip() != ""]

    def __call__(self, name, rank_prefix=None):
        """rank_prefix: "rank_<r>/" for a tensor of a multi-rank trace, whose name is then the
        name within the rank: a glob with a '/' in it looks at the prefixed name, any other
        glob at the name within the rank."""
        if self.globs is None:
            return True
        for g in self.globs:
            subject = name if rank_prefix is None or "/" not in g else rank_prefix + name
            if fnmatch.fnmatchcase(subject, g):
                return True
        return False


class Trace:
    def __init__(self):
        self.snapshots = {}   # step -> {name: float32 array}
        self.dtypes = {}      # (step, name) -> the snapshot's dtype: "F32" | "BF16" | "F16"
        self.csv = {}         # (step, name) -> float32 (several micro-batches: their max)
        # amax.csv's micro column (issue 17): the micro-batches of each step, over all its rows
        # (selected tensors or not); a file without the column has micro 0 on every row
        self.micros = {}      # step -> set of micro values
        self.micro_amax = {}  # (step, micro, name) -> float32
        self.te_scale = {}    # (step, micro, name) -> float32, TE's scale where given
        self.nranks = 0       # 0: a single-rank trace; R: rank_0/ .. rank_<R-1>/, names prefixed
        # [trace] warm_history: the steps the selection leaves out before its last selected
        # step, a Trace of their own (None: a cold history, or no selection); load_for's
        self.warm = None


_RANK_DIR = re.compile(r"^rank_([0-9]+)$")


def load_trace(path, step_sel=None, tensor_sel=None):
    """A single-rank trace, or a folder of rank_<r>/ single-rank traces (names rank_<r>/...)."""
    if not os.path.isdir(path):
        raise ValueError("trace directory %s does not exist" % path)
    ranks = {}
    direct = []
    for fn in os.listdir(path):
        full = os.path.join(path, fn)
        m = _RANK_DIR.match(fn)
        if m and os.path.isdir(full):
            if fn != "rank_%d" % int(m.group(1)):
                raise ValueError("%s: %s: rank folders are named without leading zeros"
                                 % (path, fn))
            ranks[int(m.group(1))] = full
        elif (_STEP_FILE.match(fn) and os.path.isfile(full)) or \
                (_STEP_DIR.match(fn) and os.path.isdir(full)) or fn == "amax.csv":
            direct.append(fn)
    if not ranks:
        return _load_one(path, step_sel, tensor_sel)
    if direct:
        raise ValueError("%s: both rank folders and a single-rank trace (%s)" % (path, direct[0]))
    if sorted(ranks) != list(range(len(ranks))):
        raise ValueError("%s: rank folders are not rank_0 .. rank_%d" % (path, len(ranks) - 1))
    tr = Trace()
    tr.nranks = len(ranks)
    for r in range(tr.nranks):
        prefix = "rank_%d/" % r
        one = _load_one(ranks[r], step_sel, tensor_sel, prefix)
        for t, snap in one.snapshots.items():
            merged = tr.snapshots.setdefault(t, {})
            for name, arr in snap.items():
                merged[prefix + name] = arr
                tr.dtypes[(t, prefix + name)] = one.dtypes[(t, name)]
        for (t, name), a in one.csv.items():
            tr.csv[(t, prefix + name)] = a
        for t, ms in one.micros.items():
            tr.micros.setdefault(t, set()).update(ms)
        for (t, m, name), a in one.micro_amax.items():
            tr.micro_amax[(t, m, prefix + name)] = a
        for (t, m, name), v in one.te_scale.items():
            tr.te_scale[(t, m, prefix + name)] = v
    return tr


def split_rank(name):
    """"rank_<r>/<local>" -> (r, local); (None, name) for a name without a rank prefix."""
    m = re.match(r"^rank_([0-9]+)/(.*)$", name, re.S)
    if not m:
        return None, name
    return int(m.group(1)), m.group(2)


def _load_one(path, step_sel=None, tensor_sel=None, rank_prefix=None):
    step_sel = step_sel or StepSel()
    tensor_sel = tensor_sel or TensorSel()
    tr = Trace()
    for fn in sorted(os.listdir(path)):
        full = os.path.join(path, fn)
        m = _STEP_FILE.match(fn)
        if m and os.path.isfile(full):
            t = int(m.group(1))
            dts = {}
            tensors = read_safetensors(full, dts)
        else:
            m = _STEP_DIR.match(fn)
            if not (m and os.path.isdir(full)):
                continue
            t = int(m.group(1))
            dts = {}
            tensors = read_npy_dir(full, dts)
        if not step_sel(t):
            continue
        snap = tr.snapshots.setdefault(t, {})
        for name, arr in tensors.items():
            if not tensor_sel(name, rank_prefix):
                continue
            if name in snap:
                raise ValueError("step %d: tensor %s given twice" % (t, name))
            snap[name] = arr
            tr.dtypes[(t, name)] = dts[name]
    amax_path = os.path.join(path, "amax.csv")
    if os.path.isfile(amax_path):
        with open(amax_path, newline="") as f:
            rows = list(csv.reader(f))
        cols = ["step", "tensor", "amax"]
        for i, row in enumerate(rows):
            if not row or all(c.strip() == "" for c in row):
                continue
            if i == 0 and row[0].strip() == "step":
                cols = [c.strip() for c in row]
                if cols not in (["step", "tensor", "amax"], ["step", "tensor", "amax", "micro"],
                                ["step", "tensor", "amax", "te_scale"],
                                ["step", "tensor", "amax", "micro", "te_scale"]):
                    raise ValueError("amax.csv line 1: header %s" % ",".join(cols))
                continue
            if len(row) != len(cols):
                raise ValueError("amax.csv line %d: expected %s" % (i + 1, ",".join(cols)))
            f = dict(zip(cols, row))
            t = int(f["step"].strip())
            m = int(f["micro"]) if "micro" in f else 0
            name = f["tensor"].strip()
            if not step_sel(t):
                continue
            tr.micros.setdefault(t, set()).add(m)   # every row counts a micro-batch
            if not tensor_sel(name, rank_prefix):
                continue
            a = parse_f32(f["amax"])
            tr.micro_amax[(t, m, name)] = a
            tr.csv[(t, name)] = max(tr.csv.get((t, name), a), a)
            if f.get("te_scale", "") != "":
                tr.te_scale[(t, m, name)] = parse_f32(f["te_scale"])
    return tr

# --------------------------------------------------------------------------------------------
# experiment
# --------------------------------------------------------------------------------------------


def _strip_inline_comment(v):
    m = re.search(r"\s[;#]", v)
    return v[:m.start()] if m else v


def parse_ini(path):
    """-> list of (section, {key: value}) in file order."""
    sections = []
    cur = None
    with open(path, encoding="utf-8") as f:
        for ln, line in enumerate(f, 1):
            s = line.strip()
            if s == "" or s[0] in ";#":
                continue
            if s.startswith("["):
                if not s.endswith("]"):
                    raise ValueError("%s:%d: bad section line" % (path, ln))
                cur = (s[1:-1].strip(), {})
                sections.append(cur)
                continue
            if "=" not in s:
                raise ValueError("%s:%d: expected key = value" % (path, ln))
            if cur is None:
                raise ValueError("%s:%d: key outside a section" % (path, ln))
            k, v = s.split("=", 1)
            cur[1][k.strip()] = _strip_inline_comment(v).strip()
    return sections


def _list(v):
    return [p.strip() for p in v.split(",") if p.strip() != ""]


def _bool(v):
    lv = v.strip().lower()
    if lv in ("1", "true", "yes", "on"):
        return True
    if lv in ("0", "false", "no", "off"):
        return False
    raise ValueError("bad boolean %r" % v)


BLOCK_KINDS = ("mxfp8", "block", "rowwise")
# kinds whose GEMM errors this reference computes but not their steps.csv and summary.csv rows
# (NVFP4, max6 block scales only: its casts' statistics are tools/reference/fp4ref.py's and
# tests/run/test_fp4_run.py's); their rows are left out of those comparisons
ROWLESS_KINDS = ("nvfp4",)
FP4_KINDS = ("nvfp4", "mxfp4")
_FORMAT_NAMES = ("hybrid", "e4m3", "e5m2")


class Config:
    def __init__(self, label, kind, fmt, history_len=None, margin=0, amax_compute=None,
                 amax_epsilon=0.0, pow2=False, rounding="ceil", block="auto", unfused=False):
        self.label = label
        self.unfused = unfused        # delayed: TE's unfused update (unfused_update = true)
        self.kind = kind
        self.fmt = fmt
        self.history_len = history_len
        self.margin = margin
        self.amax_compute = amax_compute
        self.amax_epsilon = amax_epsilon
        self.pow2 = pow2
        self.rounding = rounding      # mxfp8: scale_rounding
        self.block = block            # block: 1x128 | 128x128 | auto
        # nvfp4: block 1x16 | 16x16 | auto (nv_block), rht, rounding nearest | stochastic |
        # auto, sr_seed, e4m3_max (parse_experiment sets them)
        self.nv_block, self.rht, self.rounding_fp4, self.sr_seed = "auto", True, "auto", 0
        self.e4m3_max = 448.0
        self.section = label          # the [recipe.<section>] it comes from (label: its rows')
        self.tensors = TensorSel()    # the tensors it applies to

    def block_recipe(self, dtypes=None):
        """The BlockRecipe of a block-kind configuration (mxfp8, block, rowwise); dtypes:
        {role: input dtype} (BlockRecipe)."""
        return BlockRecipe(self.kind, self.fmt, rounding=self.rounding, block=self.block,
                           pow2=self.pow2, amax_epsilon=self.amax_epsilon, dtypes=dtypes)

    def __repr__(self):
        return "Config(%s)" % ", ".join("%s=%r" % kv for kv in vars(self).items())


class Experiment:
    def __init__(self):
        self.trace_path = None
        self.steps = StepSel()
        self.tensors = TensorSel()
        self.configs = []
        self.sections = []            # (section, label, TensorSel, configurations), file order
        self.skipped_labels = set()   # recipe sections of kinds this reference does not model
        self.output_dir = None
        self.overflow_budget = 1e-5   # [analysis]: not used by the replay
        self.gemm = True              # [analysis] gemm
        self.gemm_max_tokens = 1024   # [analysis] gemm_max_tokens (0 = all tokens)
        self.gemm_error = "sampled"   # [analysis] gemm_error: sampled | exact
        self.gemm_sample = 64         # [analysis] gemm_sample
        self.gemm_seed = 0            # [analysis] gemm_seed
        self.fp4_gemm_ratio = 4.0     # [analysis] fp4_gemm_ratio: the FP4 ratio's threshold
        self.reduce_amax = False      # [trace] reduce_amax
        self.reduce_group = None      # [trace] reduce_group (None: all ranks form one group)
        self.reduce_stride = 1        # [trace] reduce_stride: a group is r, r+S, ..., r+(G-1)S
        self.warm_history = True      # [trace] warm_history: the steps a steps selection leaves
                                      # out before its last step feed the histories, no rows
        self.warmup_steps = None      # [analysis] warmup_steps (None: warm-up until a tensor's
                                      # delayed update was first fed a finite non-zero amax)


def _single(sec, kv, key, default):
    v = kv.get(key, default)
    if len(_list(v)) != 1:
        raise ValueError("[%s] %s takes one value" % (sec, key))
    return _list(v)[0]


def _formats(sec, kv, default="hybrid"):
    """The format list; its default is TE's recipe class's: hybrid for delayed and current,
    e4m3 for the block kinds (MXFP8BlockScaling, Float8BlockScaling; torchao's row-wise)."""
    fmts = _list(kv.get("format", default))
    for f in fmts:
        if f not in _FORMAT_NAMES:
            raise ValueError("[%s] bad format %r" % (sec, f))
    return fmts


def parse_experiment(path, warn=sys.stderr):
    exp = Experiment()
    base = os.path.dirname(os.path.abspath(path))
    labels = set()
    for sec, kv in parse_ini(path):
        if sec == "trace":
            if "path" in kv:
                exp.trace_path = os.path.normpath(os.path.join(base, kv["path"]))
            if "steps" in kv:
                exp.steps = StepSel(kv["steps"])
            if "tensors" in kv:
                exp.tensors = TensorSel(kv["tensors"])
            if "reduce_amax" in kv:
                exp.reduce_amax = _bool(kv["reduce_amax"])
            if "warm_history" in kv:
                exp.warm_history = _bool(kv["warm_history"])
            if "reduce_group" in kv:
                g = kv["reduce_group"].strip()
                if not re.fullmatch(r"[0-9]+", g) or int(g) < 1:
                    raise ValueError("[trace] reduce_group must be an integer >= 1, not %r" % g)
                exp.reduce_group = int(g)
            if "reduce_stride" in kv:
                g = kv["reduce_stride"].strip()
                if not re.fullmatch(r"[0-9]+", g) or int(g) < 1:
                    raise ValueError("[trace] reduce_stride must be an integer >= 1, not %r" % g)
                if exp.reduce_group is None:
                    raise ValueError("[trace] reduce_stride needs reduce_group")
                exp.reduce_stride = int(g)
        elif sec == "output":
            if "dir" in kv:
                exp.output_dir = os.path.normpath(os.path.join(base, kv["dir"]))
        elif sec == "analysis":
            if "overflow_budget" in kv:
                exp.overflow_budget = float(_single(sec, kv, "overflow_budget", "1e-5"))
            exp.gemm = _bool(_single(sec, kv, "gemm", "true"))
            mt = _single(sec, kv, "gemm_max_tokens", "1024")
            if not re.fullmatch(r"\+?[0-9]+", mt):
                raise ValueError("[analysis] gemm_max_tokens must be an integer >= 0, not %r"
                                 % mt)
            exp.gemm_max_tokens = int(mt)
            exp.gemm_error = _single(sec, kv, "gemm_error", "sampled")
            if exp.gemm_error not in ("sampled", "exact"):
                raise ValueError("[analysis] gemm_error must be sampled or exact, not %r"
                                 % exp.gemm_error)
            exp.gemm_sample = int(_single(sec, kv, "gemm_sample", "64"))
            exp.gemm_seed = int(_single(sec, kv, "gemm_seed", "0"))
            exp.fp4_gemm_ratio = float(_single(sec, kv, "fp4_gemm_ratio", "4"))
            if "warmup_steps" in kv:
                ws = _single(sec, kv, "warmup_steps", "0")
                if not re.fullmatch(r"\+?[0-9]+", ws):
                    raise ValueError("[analysis] warmup_steps must be an integer >= 0, not %r"
                                     % ws)
                exp.warmup_steps = int(ws)
            # step_budget: a budget of the analysis layer, no effect on the replay
            for k in kv:
                if k not in ("overflow_budget", "gemm", "gemm_max_tokens", "warmup_steps",
                             "step_budget", "gemm_error", "gemm_sample", "gemm_seed",
                             "fp4_gemm_ratio"):
                    print("fp8ref: [%s] key %s ignored by the reference" % (sec, k), file=warn)
        elif sec.startswith("recipe."):
            section = sec[len("recipe."):]
            if section in labels:
                raise ValueError("recipe section %s given twice" % section)
            labels.add(section)
            # issue 14: `label` names the recipe label of the rows (default: the section's
            # name); `tensors` the tensors the section's configurations apply to
            label = kv.get("label", section).strip()
            sel = TensorSel(kv["tensors"]) if "tensors" in kv else TensorSel()
            first_config = len(exp.configs)
            kind = kv.get("kind", "").strip()
            if kind == "delayed":
                known = {"kind", "format", "history_len", "margin", "amax_compute",
                         "unfused_update"}
                fmts = _formats(sec, kv)
                # issue 40: one value per section (no output column tells the rules apart)
                unfused = _bool(_single(sec, kv, "unfused_update", "false"))
                hls = [int(v) for v in _list(kv.get("history_len", "1024"))]
                ms = [int(v) for v in _list(kv.get("margin", "0"))]
                acs = _list(kv.get("amax_compute", "max"))
                for h in hls:
                    if h < 1:
                        raise ValueError("[%s] history_len must be >= 1" % sec)
                for a in acs:
                    if a not in ("max", "most_recent"):
                        raise ValueError("[%s] bad amax_compute %r" % (sec, a))
                for f in fmts:
                    for h in hls:
                        for m in ms:
                            for a in acs:
                                exp.configs.append(Config(label, "delayed", f, h, m, a,
                                                          unfused=unfused))
            elif kind == "current":
                known = {"kind", "format", "amax_epsilon", "pow2", "margin"}
                fmts = _formats(sec, kv)
                for key in ("amax_epsilon", "pow2", "margin"):
                    if key in kv and len(_list(kv[key])) > 1:
                        raise ValueError("[%s] only format may be a list for kind current" % sec)
                eps = parse_f32(kv.get("amax_epsilon", "0"))
                pow2 = _bool(kv.get("pow2", "false"))
                m = int(kv.get("margin", "0"))
                for f in fmts:
                    exp.configs.append(Config(label, "current", f, margin=m,
                                              amax_epsilon=eps, pow2=pow2))
            elif kind in BLOCK_KINDS:
                # no margin for these kinds; amax_epsilon for block and rowwise
                fmts = _formats(sec, kv, "e4m3")
                rounding, block, pow2, eps = "ceil", "auto", True, F32(0)
                if kind == "mxfp8":
                    known = {"kind", "format", "scale_rounding"}
                    rounding = _single(sec, kv, "scale_rounding", "ceil")
                    if rounding not in ("ceil", "floor"):
                        raise ValueError("[%s] scale_rounding must be ceil or floor, not %r"
                                         % (sec, rounding))
                else:
                    known = {"kind", "format", "pow2", "amax_epsilon"}
                    pow2 = _bool(_single(sec, kv, "pow2", "true"))
                    eps = parse_f32(_single(sec, kv, "amax_epsilon", "0"))
                    if kind == "block":
                        known.add("block")
                        block = _single(sec, kv, "block", "auto")
                        if block not in ("1x128", "128x128", "auto"):
                            raise ValueError("[%s] block must be 1x128, 128x128 or auto, not %r"
                                             % (sec, block))
                for f in fmts:
                    exp.configs.append(Config(label, kind, f, pow2=pow2, rounding=rounding,
                                              block=block, amax_epsilon=eps))
            elif kind == "nvfp4" and _single(sec, kv, "block_scale", "max6") == "max6":
                # NVFP4 with TE's max6 block scales (docs/semantics.md "The recipe kinds nvfp4
                # and mxfp4"): its GEMM errors only (ROWLESS_KINDS)
                known = {"kind", "block", "rht", "rounding", "block_scale", "e4m3_max", "sr_seed"}
                cfg = Config(label, "nvfp4", "e4m3")
                cfg.nv_block = _single(sec, kv, "block", "auto")
                if cfg.nv_block not in ("1x16", "16x16", "auto"):
                    raise ValueError("[%s] block must be 1x16, 16x16 or auto" % sec)
                cfg.rht = _bool(_single(sec, kv, "rht", "true"))
                cfg.rounding_fp4 = _single(sec, kv, "rounding", "auto")
                if cfg.rounding_fp4 not in ("nearest", "stochastic", "auto"):
                    raise ValueError("[%s] rounding must be nearest, stochastic or auto" % sec)
                cfg.sr_seed = int(_single(sec, kv, "sr_seed", "0"))
                cfg.e4m3_max = float(_single(sec, kv, "e4m3_max", "448"))
                exp.configs.append(cfg)
            else:
                print("fp8ref: [%s] kind %r is not modelled by the reference; skipped"
                      % (sec, kind), file=warn)
                exp.skipped_labels.add(label)
                continue
            known |= {"label", "tensors"}
            for cfg in exp.configs[first_config:]:
                cfg.section = section
                cfg.tensors = sel
            exp.sections.append((section, label, sel, len(exp.configs) - first_config))
            for k in kv:
                if k not in known:
                    print("fp8ref: [%s] key %s ignored by the reference" % (sec, k), file=warn)
    for i, (section, label, sel, n) in enumerate(exp.sections):
        shared = [x for x in exp.sections if x[1] == label]
        if len(shared) > 1 and n != 1:
            raise ValueError("[recipe.%s] shares the label %s: it must be one configuration"
                             % (section, label))
    return exp


def coverage(exp, names):
    """{(tensor, config index)} of the configurations that apply to each tensor (docs/reference.md,
    "Recipes for some tensors; mixed recipes"): a tensor takes, per recipe label, the first
    section in file order whose tensors globs match it (no globs: every tensor); a label
    shared by sections must take every tensor."""
    out = set()
    by_label = {}
    for ci, cfg in enumerate(exp.configs):
        by_label.setdefault(cfg.label, []).append(ci)
    for label, cis in by_label.items():
        sections = []
        for ci in cis:
            if exp.configs[ci].section not in [x[0] for x in sections]:
                sections.append((exp.configs[ci].section, exp.configs[ci].tensors))
        for name in names:
            r, local = split_rank(name)
            prefix = None if r is None else "rank_%d/" % r
            taken = None
            for sec, sel in sections:
                if sel(local, prefix):
                    taken = sec
                    break
            if taken is None:
                if len(sections) > 1:
                    raise ValueError("tensor %s: no section of the label %s takes it"
                                     % (name, label))
                continue
            for ci in cis:
                if exp.configs[ci].section == taken:
                    out.add((name, ci))
    return out

# run.json's lists of the tensors of the replay without a steps.csv row, by reason
# (docs/reference.md, "Tensors that never ran"; docs/semantics.md, issue 17), in the order the
# reasons are tried
LEFT_KEYS = ("tensors_without_recipe", "tensors_never_ran", "tensors_without_snapshot")


def left_out(exp, trace):
    """-> {run.json key: sorted names} of the tensors of the replay that have no steps.csv row:
    no configuration applies to it (tensors_without_recipe); else no snapshot at a selected
    step and no non-zero amax.csv amax at a selected step (tensors_never_ran); else no
    snapshot (tensors_without_snapshot). The trace is loaded with the selections applied."""
    names = set()
    for snap in trace.snapshots.values():
        names |= set(snap)
    in_snapshot = set(names)
    names |= {n for (_t, n) in trace.csv}
    covers = coverage(exp, sorted(names))
    covered = {n for (n, _ci) in covers}
    ran = {n for (_t, n), a in trace.csv.items() if a != 0}
    out = {k: [] for k in LEFT_KEYS}
    for n in sorted(names):
        if n not in covered:
            out["tensors_without_recipe"].append(n)
        elif n in in_snapshot:
            continue  # it has rows, an all-zero snapshot included
        elif n not in ran:
            out["tensors_never_ran"].append(n)
        else:
            out["tensors_without_snapshot"].append(n)
    return out


def compare_run_json(exp, trace, run_json):
    """Messages where run.json's lists of tensors left out differ from left_out()."""
    with open(run_json) as f:
        j = json.load(f)
    msgs = []
    for key, want in left_out(exp, trace).items():
        got = j.get(key)
        if got != want:
            msgs.append("%s: %r, the reference %r" % (key, got, want))
    return msgs


# --------------------------------------------------------------------------------------------
# replay
# --------------------------------------------------------------------------------------------


BLOCK_COLUMNS = ("nblocks", "blocks_with_overflow", "log2_scale_min", "log2_scale_max",
                 "log2_scale_std")
# appended with "saturation that matters" (RECIPES.md clipped, overshoot; the warm-up), every kind
SAT_COLUMNS = ("clipped", "overshoot", "cos_sim", "warmup")
# appended with the FP4 kinds (issue 29): stochastic rounding's expectation; empty for every kind
# whose rows this reference replays (the FP4 kinds' casts are tools/reference/fp4ref.py's)
SR_COLUMNS = ("underflow_expected", "mse_expected")
COLUMNS = ("tensor", "role", "step", "recipe", "kind", "format", "history_len", "margin",
           "amax_compute", "amax", "scale", "n", "nonfinite", "zeros", "overflow", "underflow",
           "subnormal", "mse", "snr_db") + BLOCK_COLUMNS + SAT_COLUMNS + SR_COLUMNS
KEY_COLUMNS = ("tensor", "step", "recipe", "format", "history_len", "margin", "amax_compute")
# stream.csv: one row per replay step (union of snapshot and amax.csv steps), tensor (strcmp)
# and DELAYED configuration (experiment order); written only when there is one
# (issue 17: a step of several micro-batches has rows for each, micro ascending, then tensor;
# micro and te_scale appended)
STREAM_COLUMNS = ("tensor", "role", "step", "recipe", "format", "history_len", "margin",
                  "amax_compute", "snapshot", "amax", "scale", "overshoot", "warmup", "micro",
                  "te_scale")
STREAM_KEY_COLUMNS = ("tensor", "step", "micro", "recipe", "format", "history_len", "margin",
                      "amax_compute")
# summary.csv: one row per (tensor, configuration) with at least one snapshot row, tensor
# (strcmp) then configuration order, totals over its steps.csv rows
SUMMARY_COLUMNS = ("tensor", "role", "recipe", "kind", "format", "history_len", "margin",
                   "amax_compute", "steps", "n", "nonfinite", "zeros", "overflow", "underflow",
                   "subnormal", "overflow_rate", "underflow_rate", "subnormal_rate",
                   "steps_with_overflow", "mse", "snr_db", "snr_db_min", "amax_max", "clipped",
                   "clipped_rate", "steps_with_clipped", "overshoot_max", "scale_inv_min",
                   "scale_inv_max", "cos_sim_min")
SUMMARY_KEY_COLUMNS = ("tensor", "recipe", "format", "history_len", "margin", "amax_compute")
GEMM_COLUMNS = ("layer", "gemm", "step", "recipe", "kind", "history_len", "margin",
                "amax_compute", "rel_error")
GEMM_KEY_COLUMNS = GEMM_COLUMNS[:-1]
GEMM_SAMPLED_COLUMNS = GEMM_COLUMNS + ("rel_error_lo", "rel_error_hi")  # gemm_error = sampled
# with an FP4 configuration (issue 42): the FP4 ratio (rel_error_lo/hi empty in the exact mode)
GEMM_RATIO_COLUMNS = GEMM_SAMPLED_COLUMNS + ("ratio", "ratio_lo", "ratio_hi", "ratio_mode")


def gemm_columns(rows):
    """gemm.csv's columns for these expected rows."""
    if rows and "ratio_mode" in rows[0]:
        return GEMM_RATIO_COLUMNS
    return GEMM_SAMPLED_COLUMNS if rows and "rel_error_lo" in rows[0] else GEMM_COLUMNS
TRIPLET_ROLES = ("input", "weight", "grad_output")


def replay_all(exp, trace):
    """-> (steps rows, gemm rows or None). Row values are python/numpy values, not text;
    gemm rows are None when no gemm.csv is expected ([analysis] gemm = false, or no layer
    triplet at any snapshot step)."""
    r = replay_full(exp, trace)
    return r["steps"], r["gemm"]


def replay_full(exp, trace):
    """-> dict(steps, gemm, stream, summary): the rows of steps.csv, gemm.csv (None when none
    is expected), stream.csv (None when the experiment has no delayed configuration: no file)
    and summary.csv.

    Warm-up (RECIPES.md "Warm-up"; the `warmup` column of steps.csv and stream.csv): a step is
    a warm-up step of a tensor when no EARLIER step of the replay fed the tensor's delayed
    update a finite non-zero amax (the fed amax: the tensor's own, or its group's max under
    reduce_amax). It depends on the tensor and the step only, not on the configuration (so it
    is the same for current and block rows). With [analysis] warmup_steps = N instead, the
    first N steps of the replay (the union of snapshot and amax.csv steps) are warm-up for
    every tensor."""
    steps = sorted(set(trace.snapshots) | {t for (t, _n) in trace.csv})
    # [trace] warm_history: the steps the selection leaves out before its last step (load_for
    # puts them in trace.warm) feed the histories as in training, before the selected steps
    # after them; they write no row and are not counted (si counts the selected steps)
    warm_tr = trace.warm
    warm_steps = sorted(set(warm_tr.snapshots) | set(warm_tr.micros)) if warm_tr is not None else []
    names = set()
    for snap in trace.snapshots.values():
        names |= set(snap)
    names |= {n for (_t, n) in trace.csv}
    names = sorted(names)
    groups = reduction_groups(exp, trace, names)
    covers = coverage(exp, names)   # rows only where a configuration applies
    delayed = [ci for ci, cfg in enumerate(exp.configs) if cfg.kind == "delayed"]
    state = {}
    stats_cache = {}
    used = {}        # (step, tensor, config index) -> the delayed scale that step used
    fed_nonzero = set()   # tensors whose delayed update has been fed a finite non-zero amax
    rows = []
    stream = [] if delayed else None

    def delayed_state(name, ci, fmt):
        st = state.get((name, ci))
        if st is None:
            cfg = exp.configs[ci]
            st = state[(name, ci)] = DelayedState(fmt, cfg.history_len, cfg.margin,
                                                  cfg.amax_compute, cfg.unfused)
        return st

    def warm_of(si, name):
        if exp.warmup_steps is not None:
            return 1 if si < exp.warmup_steps else 0
        return 0 if name in fed_nonzero else 1

    def feed_warm(t):
        """A warm step: the amaxes as a replayed step takes them, fed per micro-batch."""
        snap = warm_tr.snapshots.get(t, {})
        micros = sorted(warm_tr.micros.get(t, ())) or [0]
        for m in micros:
            if len(micros) > 1:
                amaxes = {n: warm_tr.micro_amax.get((t, m, n), F32(0)) for n in names}
            else:
                amaxes = {n: tensor_amax(snap[n]) if n in snap else warm_tr.csv.get((t, n), F32(0))
                          for n in names}
            fed = reduced_amaxes(amaxes, groups)
            for name in names:
                role = role_of(split_rank(name)[1])
                for ci in delayed:
                    delayed_state(name, ci, resolve_format(exp.configs[ci].fmt, role)).update(
                        fed[name])
                if np.isfinite(fed[name]) and fed[name] > 0:
                    fed_nonzero.add(name)

    wi = 0
    for si, t in enumerate(steps):
        while wi < len(warm_steps) and warm_steps[wi] < t:
            feed_warm(warm_steps[wi])
            wi += 1
        snap = trace.snapshots.get(t, {})
        # the step's micro-batches (issue 17): TE updates its history at each one's autocast
        # exit; one micro-batch (or no micro column) is the replay of before, where the
        # snapshot's amax replaces amax.csv's
        micros = sorted(trace.micros.get(t, ())) or [0]
        multi = len(micros) > 1
        amaxes = {}  # this step's amax of every tensor: snapshot data, else amax.csv, else 0
        for name in names:
            if name in snap:
                amaxes[name] = tensor_amax(snap[name])
            else:
                amaxes[name] = trace.csv.get((t, name), F32(0))
        # the snapshot's rows: every cast with the scales before any of the step's updates
        for name in names:
            role = role_of(split_rank(name)[1])
            if name not in snap:
                continue
            x = snap[name]
            a_t = amaxes[name]
            warm = warm_of(si, name)
            for ci, cfg in enumerate(exp.configs):
                fmt = resolve_format(cfg.fmt, role)
                blk = cfg.kind in BLOCK_KINDS
                if cfg.kind == "delayed":
                    s = delayed_state(name, ci, fmt).scale
                elif cfg.kind == "current":
                    s = current_scale(a_t, fmt, cfg.amax_epsilon, cfg.pow2, cfg.margin)
                else:
                    s = None
                if (name, ci) not in covers or cfg.kind in ROWLESS_KINDS:
                    continue
                if blk:
                    rec = cfg.block_recipe({role: trace.dtypes[(t, name)]})
                    ck = (name, t, fmt, cfg.kind, cfg.rounding, rec.square(role), cfg.pow2,
                          f32_bits(cfg.amax_epsilon))
                    stt = stats_cache.get(ck)
                    if stt is None:
                        q = BlockRecipe(cfg.kind, fmt, rounding=cfg.rounding,
                                        block=cfg.block, pow2=cfg.pow2,
                                        amax_epsilon=cfg.amax_epsilon,
                                        dtypes=rec.dtypes).quantize(x, role, colwise=False)
                        stt = {c: q[c] for c in STAT_FIELDS + AUX_FIELDS + BLOCK_COLUMNS
                               + ("overshoot",)}
                        stats_cache[ck] = stt
                else:
                    ck = (name, t, fmt, f32_bits(s))
                    stt = stats_cache.get(ck)
                    if stt is None:
                        stt = stats_cache[ck] = dict(quantize_stats(x, s, fmt),
                                                     overshoot=overshoot(a_t, s, fmt))
                dl = cfg.kind == "delayed"
                row = dict(tensor=name, role=role, step=t, recipe=cfg.label, kind=cfg.kind,
                           format=fmt,
                           history_len=cfg.history_len if dl else "",
                           margin=cfg.margin if dl else "",
                           amax_compute=cfg.amax_compute if dl else "",
                           amax=a_t, scale="" if blk else s, config=ci)
                for c in BLOCK_COLUMNS:
                    row[c] = ""
                row.update(stt)
                row["warmup"] = warm
                rows.append(row)
        for name in names:
            role = role_of(split_rank(name)[1])
            for ci in delayed:
                used[(t, name, ci)] = delayed_state(
                    name, ci, resolve_format(exp.configs[ci].fmt, role)).scale
        # each micro-batch: its stream rows with the scales in force, then its updates
        for m in micros:
            if multi:
                amaxes = {name: trace.micro_amax.get((t, m, name), F32(0)) for name in names}
            fed = reduced_amaxes(amaxes, groups)
            for name in names:
                role = role_of(split_rank(name)[1])
                warm = warm_of(si, name)
                te = trace.te_scale.get((t, m, name), "")
                for ci in delayed:
                    cfg = exp.configs[ci]
                    fmt = resolve_format(cfg.fmt, role)
                    s = delayed_state(name, ci, fmt).scale
                    a_t = amaxes[name]
                    if (name, ci) in covers:
                        stream.append(dict(tensor=name, role=role, step=t, recipe=cfg.label,
                                           format=fmt, history_len=cfg.history_len,
                                           margin=cfg.margin, amax_compute=cfg.amax_compute,
                                           snapshot=1 if name in snap else 0, amax=a_t,
                                           scale=s, overshoot=overshoot(a_t, s, fmt),
                                           warmup=warm, micro=m, te_scale=te))
            for name in names:
                for ci in delayed:
                    state[(name, ci)].update(fed[name])
                if np.isfinite(fed[name]) and fed[name] > 0:
                    fed_nonzero.add(name)
    gemm = gemm_replay(exp, trace, used, covers)
    return dict(steps=rows, gemm=gemm, stream=stream, summary=summary_rows(exp, rows))


def summary_rows(exp, rows):
    """summary.csv rows from the steps rows (with their SUM_FIELDS): one per (tensor,
    configuration) that has rows, tensor name (strcmp) then configuration order; counts
    totalled; rates total count / total finite elements (nan without one); mse and snr_db from
    the total double sums; snr_db_min, cos_sim_min the worst step; amax_max, overshoot_max the
    largest; scale_inv_min/max of RN32(1/scale) over the steps (empty for block kinds)."""
    acc = {}
    for r in rows:
        acc.setdefault((r["tensor"], r["config"]), []).append(r)
    out = []
    for (name, ci) in sorted(acc):
        rs = acc[(name, ci)]
        cfg = exp.configs[ci]
        first = rs[0]
        tot = {c: sum(int(r[c]) for r in rs) for c in ("n", "nonfinite", "zeros", "overflow",
                                                         "underflow", "subnormal", "clipped")}
        fin = tot["n"] - tot["nonfinite"]
        esum = math.fsum(r["sum_sq_err"] for r in rs)
        xsum = math.fsum(r["sum_sq"] for r in rs)
        if esum == 0:
            snr = math.inf
        elif xsum == 0 or math.isinf(esum):
            snr = -math.inf
        else:
            snr = 10.0 * math.log10(xsum / esum)
        blk = cfg.kind in BLOCK_KINDS
        if blk:
            sinv_min = sinv_max = ""
        else:
            with np.errstate(divide="ignore"):
                sinv = [F32(F32(1) / F32(r["scale"])) for r in rs]
            sinv_min, sinv_max = min(sinv), max(sinv)
        cs = [r["cos_sim"] for r in rs if not math.isnan(r["cos_sim"])]
        out.append(dict(
            tensor=name, role=first["role"], recipe=cfg.label, kind=cfg.kind,
            format=first["format"], history_len=first["history_len"], margin=first["margin"],
            amax_compute=first["amax_compute"], steps=len(rs),
            n=tot["n"], nonfinite=tot["nonfinite"], zeros=tot["zeros"],
            overflow=tot["overflow"], underflow=tot["underflow"], subnormal=tot["subnormal"],
            overflow_rate=tot["overflow"] / fin if fin else math.nan,
            underflow_rate=tot["underflow"] / fin if fin else math.nan,
            subnormal_rate=tot["subnormal"] / fin if fin else math.nan,
            steps_with_overflow=sum(1 for r in rs if r["overflow"] > 0),
            mse=esum / fin if fin else math.nan, snr_db=snr,
            snr_db_min=min(r["snr_db"] for r in rs),
            amax_max=max(F32(r["amax"]) for r in rs),
            clipped=tot["clipped"], clipped_rate=tot["clipped"] / fin if fin else math.nan,
            steps_with_clipped=sum(1 for r in rs if r["clipped"] > 0),
            overshoot_max=max(r["overshoot"] for r in rs),
            scale_inv_min=sinv_min, scale_inv_max=sinv_max,
            cos_sim_min=min(cs) if cs else math.inf,
            cos_sim_tol=max(r.get("cos_sim_tol", COS_SIM_TOL) for r in rs)))
    return out


def reduction_groups(exp, trace, names):
    """-> {tensor: group key} when amaxes are reduced (tensors with one key share the reduced
    amax), or None. Groups are reduce_group ranks each: contiguous blocks, or with reduce_stride
    S the ranks r, r+S, ..., r+(G-1)S (blocks of G x S ranks holding S groups)."""
    if not exp.reduce_amax and exp.reduce_group is None:
        return None
    if trace.nranks == 0:
        raise ValueError("reduce_amax = true / reduce_group need a multi-rank trace")
    size = exp.reduce_group or trace.nranks
    stride = exp.reduce_stride
    if trace.nranks % (size * stride):
        raise ValueError("reduce_group = %d x reduce_stride = %d does not divide %d ranks"
                         % (size, stride, trace.nranks))
    if not exp.reduce_amax:
        return None
    # the groups listed rank by rank: block b of G x S ranks holds the S groups
    # {b G S + o + j S : j < G}, o < S
    group_of = {}
    for b in range(trace.nranks // (size * stride)):
        for o in range(stride):
            for j in range(size):
                group_of[b * size * stride + o + j * stride] = (b, o)
    out = {}
    for name in names:
        r, local = split_rank(name)
        out[name] = (local, group_of[r])
    return out


def reduced_amaxes(amaxes, groups):
    """The amax each tensor's delayed update sees: its own, or with groups the max over the
    tensors of its group (a rank without that tensor at this step has 0 here: no effect)."""
    if groups is None:
        return amaxes
    best = {}
    for name, a in amaxes.items():
        k = groups[name]
        if k not in best or a > best[k]:
            best[k] = a
    return {name: best[groups[name]] for name in amaxes}


def replay(exp, trace):
    """-> list of steps.csv row dicts in steps.csv order."""
    return replay_all(exp, trace)[0]


def layer_triplets(snap):
    """-> [(layer, x, w, dy)] (2-D float32 views) of the layers whose input [tokens, in],
    weight [out, in] and grad_output [tokens, out] are all in the snapshot with agreeing
    shapes, in strcmp order of the layer name."""
    layers = set()
    for name in snap:
        for r in TRIPLET_ROLES:
            if name.endswith("." + r):
                layers.add(name[:-len(r) - 1])
    out = []
    for L in sorted(layers):
        ns = ["%s.%s" % (L, r) for r in TRIPLET_ROLES]
        if not all(n in snap for n in ns):
            continue
        x, w, dy = (as_matrix(snap[n]) for n in ns)
        if x.shape[0] != dy.shape[0] or x.shape[1] != w.shape[1] or w.shape[0] != dy.shape[1]:
            continue            # shapes do not agree: the layer is skipped at this step
        out.append((L, x, w, dy))
    return out


def fp4_reference(exp):
    """The configuration the FP4 ratio divides by (docs/semantics.md "Which layers hold";
    run.json's experiment.fp4_reference), or None without an FP4 configuration: the first
    current-scaling one, else the reference one of the other FP8 kinds (not FP4, not bf16): the
    delayed one TE defaults to (history 1024, margin 0, max), else max before most_recent, the
    smallest |margin|, the longest history (a block kind counts as history 0, margin 0, max),
    the first in file order on ties; configurations of a label shared by several sections
    (mixed recipes) left out."""
    if not any(c.kind in FP4_KINDS for c in exp.configs):
        return None
    nsec = {}
    for _sec, label, _sel, _n in exp.sections:
        nsec[label] = nsec.get(label, 0) + 1
    cand = [ci for ci, c in enumerate(exp.configs) if nsec.get(c.label, 1) == 1]
    for ci in cand:
        if exp.configs[ci].kind == "current":
            return ci

    def rank(ci):
        c = exp.configs[ci]
        dl = c.kind == "delayed"
        h, m = (c.history_len, abs(c.margin)) if dl else (0, 0)
        mx = not dl or c.amax_compute == "max"
        return (not (h == 1024 and m == 0 and mx), not mx, m, -h, ci)
    rest = [ci for ci in cand if exp.configs[ci].kind not in FP4_KINDS + ("bf16",)]
    return min(rest, key=rank) if rest else None


def layer_requests(exp, L, covers):
    """The GEMM requests of layer L (docs/semantics.md "GEMMs of a mixed recipe"): a tuple of
    configuration indices (input, weight, grad_output) each, in configuration order: (c, c, c)
    for each configuration that applies to the layer's three operands, and for each recipe
    label shared by several sections whose sections split them, the configuration of the
    section that takes each operand, placed at the first of the three."""
    names = ["%s.%s" % (L, r) for r in TRIPLET_ROLES]
    if covers is None:
        return [(ci, ci, ci) for ci in range(len(exp.configs))]
    nsec = {}
    for _sec, label, _sel, _n in exp.sections:
        nsec[label] = nsec.get(label, 0) + 1
    out = {}
    for ci, cfg in enumerate(exp.configs):
        if all((n, ci) in covers for n in names):
            out[ci] = (ci, ci, ci)
        elif nsec.get(cfg.label, 1) > 1:
            of = [next((cj for cj, cg in enumerate(exp.configs)
                        if cg.label == cfg.label and (n, cj) in covers), None) for n in names]
            if None not in of and min(of) == ci:
                out[ci] = tuple(of)
    return [out[ci] for ci in sorted(out)]


def _role_key(exp, trace, t, L, ci, role, used, for_role):
    """What decides how configuration ci quantizes the layer's tensor of this role (equal keys:
    equal operands) and its recipe object."""
    cfg = exp.configs[ci]
    name = "%s.%s" % (L, role)
    fmt = resolve_format(cfg.fmt, role)
    if cfg.kind in BLOCK_KINDS:
        rec = cfg.block_recipe({role: trace.dtypes[(t, name)]})
        return (cfg.kind, fmt, cfg.rounding, cfg.pow2, f32_bits(cfg.amax_epsilon),
                rec.square(role), rec.dtypes[role]), rec
    if cfg.kind == "nvfp4":
        return ("nvfp4", cfg.nv_block, cfg.rht, cfg.rounding_fp4, cfg.sr_seed,
                cfg.e4m3_max), Nvfp4Recipe(cfg)
    if cfg.kind == "delayed":
        sc = used[(t, name, ci)]
    else:
        sc = current_scale(tensor_amax(for_role[role]), fmt, cfg.amax_epsilon, cfg.pow2,
                           cfg.margin)
    return ("tensor", fmt, f32_bits(sc)), TensorRecipe(cfg.fmt, {role: sc})


def _row_key(cfg_a, cfg_b):
    """The key columns of a GEMM row whose operands come from configurations a and b: theirs
    when kind and the delayed parameters agree, else kind mixed with the delayed ones empty."""
    same = cfg_a.kind == cfg_b.kind and (cfg_a.kind != "delayed" or (
        cfg_a.history_len, cfg_a.margin, cfg_a.amax_compute) == (
        cfg_b.history_len, cfg_b.margin, cfg_b.amax_compute))
    if not same:
        return dict(kind="mixed", history_len="", margin="", amax_compute="")
    dl = cfg_a.kind == "delayed"
    return dict(kind=cfg_a.kind, history_len=cfg_a.history_len if dl else "",
                margin=cfg_a.margin if dl else "", amax_compute=cfg_a.amax_compute if dl else "")


def _quotient(a, b):
    """The ratio of two errors: NaN when either is; 0 / 0 counts as 1, x / 0 as inf."""
    if math.isnan(a) or math.isnan(b):
        return math.nan
    return a / b if b > 0 else (math.inf if a > 0 else 1.0)


def gemm_replay(exp, trace, used, covers=None):
    """gemm.csv rows (see GEMM_COLUMNS), or None when no gemm.csv is expected. `used`: the
    delayed scales of replay_all; `covers`: coverage() (None: every configuration applies to
    every tensor). A layer's requests (layer_requests): a configuration that applies to its
    three operands, and a shared label whose sections split them, each operand quantized by its
    own section. With an FP4 configuration (fp4_reference) the rows carry the FP4 ratio: a
    GEMM with an FP4 operand over the reference's own row at that layer, GEMM and step."""
    if not exp.gemm:
        return None
    any_triplet = False
    rows = []
    ref_ci = fp4_reference(exp)
    R = exp.fp4_gemm_ratio
    for t in sorted(trace.snapshots):
        for L, x, w, dy in layer_triplets(trace.snapshots[t]):
            any_triplet = True
            for_role = {"input": x, "weight": w, "grad_output": dy}
            sampled = exp.gemm_error == "sampled"
            if sampled:
                smp = {g: GemmSample(g, for_role, exp.gemm_sample,
                                     sample_seed(exp.gemm_seed, L, t, g)) for g in GEMMS}
                ref = gemm_reference(x, w, dy, 0)    # the exact errors, for the coverage check
            else:
                ref = gemm_reference(x, w, dy, exp.gemm_max_tokens)
            reqs = layer_requests(exp, L, covers)
            done = {}    # requests that quantize every operand alike share the errors
            res = {}
            opcache = {}  # the dequantized operands, by (role key, role, colwise)
            for q in reqs:
                parts = [_role_key(exp, trace, t, L, ci, r, used, for_role)
                         for ci, r in zip(q, TRIPLET_ROLES)]
                key = tuple(k for k, _ in parts)
                if key not in done:
                    cq = MixedRecipe({r: rec for r, (_, rec) in zip(TRIPLET_ROLES, parts)},
                                     dict(zip(TRIPLET_ROLES, key)), opcache)
                    if sampled:  # the estimate, its interval, the exact error, the FP32 block
                        est = {}
                        for g in GEMMS:
                            (ra, ca), (rb, cb) = GEMM_OPERANDS[g]
                            y = smp[g].block(cq.quantize(for_role[ra], ra, ca)["xhat"],
                                             cq.quantize(for_role[rb], rb, cb)["xhat"])
                            est[g] = smp[g].error_of(y) + (y,)
                        ex = gemm_errors(x, w, dy, cq, 0, ref)
                        done[key] = {g: est[g][:3] + (ex[g], est[g][3]) for g in GEMMS}
                    else:
                        done[key] = gemm_errors(x, w, dy, cq, exp.gemm_max_tokens, ref)
                res[q] = done[key]
            for g in GEMMS:
                (ra, _), (rb, _) = GEMM_OPERANDS[g]
                ia, ib = TRIPLET_ROLES.index(ra), TRIPLET_ROLES.index(rb)
                for q in reqs:
                    ca, cb = exp.configs[q[ia]], exp.configs[q[ib]]
                    row = dict(layer=L, gemm=g, step=t, recipe=ca.label)
                    row.update(_row_key(ca, cb))
                    e = res[q][g]
                    if sampled:  # the estimate, its interval, and (not a column) the exact error
                        row.update(rel_error=e[0], rel_error_lo=e[1], rel_error_hi=e[2],
                                   exact=e[3])
                    else:
                        row.update(rel_error=e)
                    if ref_ci is not None:
                        row.update(rel_error_lo=row.get("rel_error_lo", ""),
                                   rel_error_hi=row.get("rel_error_hi", ""),
                                   ratio="", ratio_lo="", ratio_hi="", ratio_mode="")
                        fp4 = ca.kind in FP4_KINDS or cb.kind in FP4_KINDS
                        rq = (ref_ci, ref_ci, ref_ci)
                        if fp4 and rq in res and q != rq:
                            er = res[rq][g]
                            if not sampled:
                                v = _quotient(e, er)
                                row.update(ratio=v, ratio_lo=v, ratio_hi=v, ratio_mode="exact")
                            else:
                                v, lo, hi = smp[g].ratio(e[4], er[4])
                                mode = "sampled"
                                if lo <= R < hi:   # not decided on the sample: both exact
                                    v = lo = hi = _quotient(e[3], er[3])
                                    mode = "recomputed"
                                row.update(ratio=v, ratio_lo=lo, ratio_hi=hi, ratio_mode=mode)
                    rows.append(row)
    return rows if any_triplet else None


_FLOAT_COLUMNS = ("amax", "scale", "mse", "snr_db", "log2_scale_min", "log2_scale_max",
                  "log2_scale_std", "rel_error", "rel_error_lo", "rel_error_hi", "overshoot",
                  "cos_sim", "overflow_rate",
                  "underflow_rate", "subnormal_rate", "snr_db_min", "amax_max", "clipped_rate",
                  "overshoot_max", "scale_inv_min", "scale_inv_max", "cos_sim_min", "te_scale",
                  "ratio", "ratio_lo", "ratio_hi")


def row_text(row, columns=COLUMNS):
    out = []
    for c in columns:
        v = row.get(c, "") if c in SR_COLUMNS else row[c]
        if c in _FLOAT_COLUMNS and not (isinstance(v, str) and v == ""):
            out.append(fmt_g(v))
        else:
            out.append(str(v))
    return out


def write_csv(rows, out, columns=COLUMNS):
    w = csv.writer(out, lineterminator="\n")
    w.writerow(columns)
    for r in rows:
        w.writerow(row_text(r, columns))


def load_for(ini, trace_override=None):
    exp = parse_experiment(ini)
    path = trace_override or exp.trace_path
    if path is None:
        raise ValueError("%s: no [trace] path and no --trace" % ini)
    if not exp.warm_history or exp.steps.a is None:
        return exp, load_trace(path, exp.steps, exp.tensors)
    # warm_history: every step up to the selection's end is read, then split into the selected
    # steps (the trace every other check sees) and the warm steps before the last selected one
    full = load_trace(path, lambda t: t <= exp.steps.b, exp.tensors)
    sel_steps = [t for t in set(full.snapshots) | set(full.micros) if exp.steps(t)]
    last = max(sel_steps) if sel_steps else -1
    tr, warm = Trace(), Trace()
    for part in (tr, warm):
        part.nranks = full.nranks
    def part_of(t):
        return tr if exp.steps(t) else warm if t < last else None
    for t, snap in full.snapshots.items():
        if part_of(t) is not None:
            part_of(t).snapshots[t] = snap
    for attr in ("dtypes", "csv", "micro_amax", "te_scale"):
        for k, v in getattr(full, attr).items():
            if part_of(k[0]) is not None:
                getattr(part_of(k[0]), attr)[k] = v
    for t, ms in full.micros.items():
        if part_of(t) is not None:
            part_of(t).micros[t] = ms
    tr.warm = warm
    return exp, tr

# --------------------------------------------------------------------------------------------
# compare
# --------------------------------------------------------------------------------------------


def _close(e, g, rel=1e-6, floor=1e-30):
    if math.isnan(e) or math.isnan(g):
        return math.isnan(e) and math.isnan(g)
    if math.isinf(e) or math.isinf(g):
        return e == g
    return abs(e - g) <= max(rel * max(abs(e), abs(g)), floor)


def _close_log2(e, g):
    """log2 scale columns: 1e-9 absolute, widened to one unit of the 9th significant digit
    (the resolution of "%.9g": a non-power-of-two scale has a fractional log2 of ~9 digits)."""
    if math.isnan(e) or math.isnan(g):
        return math.isnan(e) and math.isnan(g)
    if math.isinf(e) or math.isinf(g):
        return e == g
    m = max(abs(e), abs(g))
    digit = 10.0 ** (math.floor(math.log10(m)) - 8) if m > 0 else 0.0
    return abs(e - g) <= max(1e-9, digit)


_SPECIAL_SPELLING = {"inf", "-inf", "nan"}


def _spelled_ok(text):
    """Non-finite floats must be spelled inf, -inf or nan (not -nan, NaN, Infinity...)."""
    t = text.strip()
    try:
        v = float(t)
    except ValueError:
        return False
    return math.isfinite(v) or t in _SPECIAL_SPELLING


def _bits_equal(e, gtext):
    if gtext.strip() == fmt_g(e):   # "%.9g" round-trips float32: the same text, the same bits
        return True
    g = parse_f32(gtext)
    if np.isnan(e) or np.isnan(g):
        return bool(np.isnan(e) and np.isnan(g))
    return f32_bits(e) == f32_bits(g)


def _is_empty(v):
    return isinstance(v, str) and v == ""


def row_set_diff(ek, gk, key_columns, max_report):
    """Messages saying how the expected row keys ek differ from the got ones gk (lists of
    tuples over key_columns): missing and unexpected rows, else the first out-of-order row."""
    from collections import Counter
    ce, cg = Counter(ek), Counter(gk)
    missing = list((ce - cg).elements())
    extra = list((cg - ce).elements())
    msgs = ["row set differs: expected %d rows, got %d" % (len(ek), len(gk))]
    for k in missing[:max_report]:
        msgs.append("  missing row %s" % dict(zip(key_columns, k)))
    for k in extra[:max_report]:
        msgs.append("  unexpected row %s" % dict(zip(key_columns, k)))
    if not missing and not extra:
        i = next(i for i, (a, b) in enumerate(zip(ek, gk)) if a != b)
        msgs.append("  order differs first at data row %d: expected %s, got %s"
                    % (i + 1, dict(zip(key_columns, ek[i])), dict(zip(key_columns, gk[i]))))
    return msgs


def compare_rows(exp_rows, got_text_rows, header, skipped_labels=(), max_report=20):
    """-> list of mismatch messages (empty = match)."""
    msgs = []
    if tuple(header) != COLUMNS:
        msgs.append("header: expected %s, got %s" % (",".join(COLUMNS), ",".join(header)))
        return msgs
    got = [dict(zip(COLUMNS, r)) for r in got_text_rows]
    bad_len = [i for i, r in enumerate(got_text_rows) if len(r) != len(COLUMNS)]
    if bad_len:
        msgs.append("row %d has %d fields, expected %d" % (bad_len[0] + 2,
                    len(got_text_rows[bad_len[0]]), len(COLUMNS)))
        return msgs
    got = [r for r in got if r["recipe"] not in skipped_labels and r["kind"] not in ROWLESS_KINDS]

    def ekey(r):
        return (r["tensor"], str(r["step"]), r["recipe"], r["format"], str(r["history_len"]),
                str(r["margin"]), r["amax_compute"])

    def gkey(r):
        return tuple(r[c] for c in KEY_COLUMNS)

    ek = [ekey(r) for r in exp_rows]
    gk = [gkey(r) for r in got]
    if ek != gk:
        return msgs + row_set_diff(ek, gk, KEY_COLUMNS, max_report)
    for i, (e, g) in enumerate(zip(exp_rows, got)):
        where = "row %d (%s step %s %s %s %s/%s/%s)" % (i + 1, e["tensor"], e["step"], e["recipe"],
                                                       e["format"], e["history_len"], e["margin"],
                                                       e["amax_compute"])
        for c in ("role", "kind"):
            if str(e[c]) != g[c]:
                msgs.append("%s: %s expected %s, got %s" % (where, c, e[c], g[c]))
        # columns that must be empty for this row (scale of block kinds, block columns of
        # delayed and current rows)
        empty = [c for c in ("scale",) + BLOCK_COLUMNS if _is_empty(e[c])] + list(SR_COLUMNS)
        for c in empty:
            if g[c].strip() != "":
                msgs.append("%s: %s expected empty, got %s" % (where, c, g[c]))
        for c in ("amax", "scale", "mse", "snr_db", "log2_scale_min", "log2_scale_max",
                  "log2_scale_std"):
            if c not in empty and not _spelled_ok(g[c]):
                msgs.append("%s: %s written as %r (expected %%.9g or inf/-inf/nan)"
                            % (where, c, g[c]))
        for c in ("amax", "scale"):
            if c in empty:
                continue
            try:
                ok = _bits_equal(e[c], g[c])
            except ValueError:
                ok = False
            if not ok:
                msgs.append("%s: %s expected %s (0x%08x), got %s" % (where, c, fmt_g(e[c]),
                                                                    f32_bits(e[c]), g[c]))
        for c in ("n", "nonfinite", "zeros", "overflow", "underflow", "subnormal",
                  "nblocks", "blocks_with_overflow"):
            if c not in empty and str(e[c]) != g[c].strip():
                msgs.append("%s: %s expected %s, got %s" % (where, c, e[c], g[c]))
        for c in ("mse", "snr_db"):
            try:
                # snr_db = 10 log10(S/E): a relative rounding difference d of S/E (the sums are
                # taken in another order here) moves it by 4.3 d dB, which is not small
                # relative to a value near 0 dB: an absolute floor of 1e-9 dB there
                ok = _close(float(e[c]), float(g[c]), floor=1e-9 if c == "snr_db" else 1e-30)
            except ValueError:
                ok = False
            if not ok:
                msgs.append("%s: %s expected %s, got %s" % (where, c, fmt_g(e[c]), g[c]))
        for c in ("log2_scale_min", "log2_scale_max", "log2_scale_std"):
            if c in empty:
                continue
            try:
                ok = _close_log2(float(e[c]), float(g[c]))
            except ValueError:
                ok = False
            if not ok:
                msgs.append("%s: %s expected %s, got %s" % (where, c, fmt_g(e[c]), g[c]))
        msgs += _check_sat(where, e, g)
        if len(msgs) >= max_report:
            break
    return msgs


def _close_cos(e, g, tol=COS_SIM_TOL):
    """cos_sim: within tol absolute (nan == nan); tol is the row's cos_sim_bound(), 1e-9
    unless the formula cancels."""
    if math.isnan(e) or math.isnan(g):
        return math.isnan(e) and math.isnan(g)
    return abs(e - g) <= tol


def _check_sat(where, e, g):
    """The columns appended for saturation (SAT_COLUMNS) of one steps.csv row: clipped and
    warmup exact, overshoot as the log2 columns (1e-9 absolute; -inf == -inf), cos_sim to
    1e-9 absolute (widened by cos_sim_bound() where its formula cancels)."""
    msgs = []
    for c in ("clipped", "warmup"):
        if str(e[c]) != g[c].strip():
            msgs.append("%s: %s expected %s, got %s" % (where, c, e[c], g[c]))
    tol = e.get("cos_sim_tol", COS_SIM_TOL)
    for c, close in (("overshoot", _close_log2),
                     ("cos_sim", lambda a, b: _close_cos(a, b, tol))):
        if not _spelled_ok(g[c]):
            msgs.append("%s: %s written as %r (expected %%.9g or inf/-inf/nan)" % (where, c, g[c]))
            continue
        if not close(float(e[c]), float(g[c])):
            msgs.append("%s: %s expected %s, got %s" % (where, c, fmt_g(e[c]), g[c]))
    return msgs


def _check_header(name, header, columns, rows):
    """-> messages when the header or a row's field count is wrong (then nothing else is
    compared)."""
    if tuple(header) != columns:
        return ["%s header: expected %s, got %s" % (name, ",".join(columns), ",".join(header))]
    bad = [i for i, r in enumerate(rows) if len(r) != len(columns)]
    if bad:
        return ["%s row %d has %d fields, expected %d" % (name, bad[0] + 2, len(rows[bad[0]]),
                                                          len(columns))]
    return []

def _keyed_rows(name, header, columns, key_columns, exp_rows, got_text_rows, skipped_labels,
                max_report, skipped_kinds=()):
    """The common start of the compare_*_rows: the header and field counts checked, the
    written rows as dicts (skipped labels and kinds left out), their keys equal to the expected
    rows' in order. -> (messages, rows): rows is None when messages say why nothing else can be
    compared."""
    msgs = _check_header(name, header, columns, got_text_rows)
    if msgs:
        return msgs, None
    got = [dict(zip(columns, r)) for r in got_text_rows]
    got = [r for r in got if r["recipe"] not in skipped_labels and r.get("kind") not in skipped_kinds]
    ek = [tuple(str(r[c]) for c in key_columns) for r in exp_rows]
    gk = [tuple(r[c] for c in key_columns) for r in got]
    if ek != gk:
        return row_set_diff(ek, gk, key_columns, max_report), None
    return [], got



def compare_stream_rows(exp_rows, got_text_rows, header, skipped_labels=(), max_report=20):
    """stream.csv: the rows key for key in order (one per replay step, tensor and delayed
    configuration), role and snapshot and warmup exact, amax and scale bit-exact, overshoot
    as the log2 columns. -> list of mismatch messages."""
    msgs, got = _keyed_rows("stream.csv", header, STREAM_COLUMNS, STREAM_KEY_COLUMNS, exp_rows, got_text_rows,
                            skipped_labels, max_report)
    if got is None:
        return msgs
    for i, (e, g) in enumerate(zip(exp_rows, got)):
        where = "stream row %d (%s step %s micro %s %s %s %s/%s/%s)" % (
            i + 1, e["tensor"], e["step"], e["micro"], e["recipe"], e["format"],
            e["history_len"], e["margin"], e["amax_compute"])
        for c in ("role", "snapshot", "warmup"):
            if str(e[c]) != g[c].strip():
                msgs.append("%s: %s expected %s, got %s" % (where, c, e[c], g[c]))
        if _is_empty(e["te_scale"]) != (g["te_scale"] == ""):
            msgs.append("%s: te_scale expected %r, got %r" % (where, e["te_scale"], g["te_scale"]))
        for c in ("amax", "scale") + (() if _is_empty(e["te_scale"]) else ("te_scale",)):
            try:
                ok = _spelled_ok(g[c]) and _bits_equal(e[c], g[c])
            except ValueError:
                ok = False
            if not ok:
                msgs.append("%s: %s expected %s (0x%08x), got %s" % (where, c, fmt_g(e[c]),
                                                                    f32_bits(e[c]), g[c]))
        if not _spelled_ok(g["overshoot"]):
            msgs.append("%s: overshoot written as %r" % (where, g["overshoot"]))
        elif not _close_log2(float(e["overshoot"]), float(g["overshoot"])):
            msgs.append("%s: overshoot expected %s, got %s" % (where, fmt_g(e["overshoot"]),
                                                              g["overshoot"]))
        if len(msgs) >= max_report:
            break
    return msgs


def compare_summary_rows(exp_rows, got_text_rows, header, skipped_labels=(), max_report=20):
    """summary.csv: rows key for key in order; counts exact; amax_max and scale_inv_min/max
    bit-exact (empty for block kinds); rates to 1e-8 relative (one division of the same
    integers, printed with 9 significant digits: up to 5e-9 relative apart); mse, snr_db and
    snr_db_min as in steps.csv (1e-6 relative, snr floor 1e-9 dB);
    overshoot_max as the log2 columns; cos_sim_min to 1e-9 absolute (widened by the largest
    cos_sim_bound() of the rows)."""
    msgs, got = _keyed_rows("summary.csv", header, SUMMARY_COLUMNS, SUMMARY_KEY_COLUMNS, exp_rows, got_text_rows,
                            skipped_labels, max_report, ROWLESS_KINDS)
    if got is None:
        return msgs
    counts = ("steps", "n", "nonfinite", "zeros", "overflow", "underflow", "subnormal",
              "steps_with_overflow", "clipped", "steps_with_clipped")
    checks = [("overflow_rate", lambda a, b: _close(a, b, rel=1e-8)),
              ("underflow_rate", lambda a, b: _close(a, b, rel=1e-8)),
              ("subnormal_rate", lambda a, b: _close(a, b, rel=1e-8)),
              ("clipped_rate", lambda a, b: _close(a, b, rel=1e-8)),
              ("mse", _close),
              ("snr_db", lambda a, b: _close(a, b, floor=1e-9)),
              ("snr_db_min", lambda a, b: _close(a, b, floor=1e-9)),
              ("overshoot_max", _close_log2),
              ("cos_sim_min", None)]
    for i, (e, g) in enumerate(zip(exp_rows, got)):
        where = "summary row %d (%s %s %s %s/%s/%s)" % (
            i + 1, e["tensor"], e["recipe"], e["format"], e["history_len"], e["margin"],
            e["amax_compute"])
        for c in ("role", "kind") + counts:
            if str(e[c]) != g[c].strip():
                msgs.append("%s: %s expected %s, got %s" % (where, c, e[c], g[c]))
        for c in ("amax_max", "scale_inv_min", "scale_inv_max"):
            if _is_empty(e[c]):
                if g[c].strip() != "":
                    msgs.append("%s: %s expected empty, got %s" % (where, c, g[c]))
                continue
            try:
                ok = _spelled_ok(g[c]) and _bits_equal(e[c], g[c])
            except ValueError:
                ok = False
            if not ok:
                msgs.append("%s: %s expected %s (0x%08x), got %s" % (where, c, fmt_g(e[c]),
                                                                    f32_bits(e[c]), g[c]))
        for c, close in checks:
            if close is None:        # cos_sim_min: the worst row's bound covers every row's
                tol = e.get("cos_sim_tol", COS_SIM_TOL)
                close = lambda a, b, tol=tol: _close_cos(a, b, tol)  # noqa: E731
            if not _spelled_ok(g[c]):
                msgs.append("%s: %s written as %r" % (where, c, g[c]))
            elif not close(float(e[c]), float(g[c])):
                msgs.append("%s: %s expected %s, got %s" % (where, c, fmt_g(e[c]), g[c]))
        if len(msgs) >= max_report:
            break
    return msgs


def _close_rel_error(e, g):
    return _close(e, g, rel=1e-3, floor=1e-7)


def compare_gemm_rows(exp_rows, got_text_rows, header, skipped_labels=(), max_report=20,
                      coverage=None, threshold=4.0):
    """gemm.csv: rows key for key in order, rel_error to 1e-3 relative (absolute floor 1e-7,
    inf == inf, nan == nan); with the sampled mode (expected rows with rel_error_lo) the 11
    columns, the interval's ends to the same tolerance, and `coverage` (a dict) counts the rows
    whose exact error (computed here) lies in the written interval (to 1e-6 relative: a whole
    sample's zero-width interval differs from the exact FP32 GEMM in the last bits). With an
    FP4 configuration the 15 columns: the ratio columns empty where expected so, else
    ratio_mode exact and the three values to 1e-3; a sampled ratio whose interval the reference
    finds within 1e-3 of straddling `threshold` may be written sampled or recomputed (the FP32
    sums' last bits decide), its values then not compared. -> list of mismatch messages."""
    cols = gemm_columns(exp_rows)
    sampled = "rel_error_lo" in cols and not (exp_rows and exp_rows[0]["rel_error_lo"] == "")
    msgs, got = _keyed_rows("gemm.csv", header, cols, GEMM_KEY_COLUMNS, exp_rows,
                            got_text_rows, skipped_labels, max_report)
    if got is None:
        return msgs
    values = ("rel_error", "rel_error_lo", "rel_error_hi") if sampled else ("rel_error",)
    for i, (e, g) in enumerate(zip(exp_rows, got)):
        where = "row %d (%s %s step %s %s %s %s/%s/%s)" % (
            i + 1, e["layer"], e["gemm"], e["step"], e["recipe"], e["kind"], e["history_len"],
            e["margin"], e["amax_compute"])
        vals = values
        if "ratio_mode" in cols:
            if not sampled and (g["rel_error_lo"] or g["rel_error_hi"]):
                msgs.append("%s: rel_error_lo/hi written, expected empty (exact mode)" % where)
            em, gm = e["ratio_mode"], g["ratio_mode"]
            near = em in ("sampled", "recomputed") and gm in ("sampled", "recomputed") and any(
                _close_rel_error(float(e[c]), threshold) for c in ("ratio_lo", "ratio_hi"))
            if em != gm and not near:
                msgs.append("%s: ratio_mode expected %r, got %r" % (where, em, gm))
            elif em == "" and any(g[c] for c in ("ratio", "ratio_lo", "ratio_hi")):
                msgs.append("%s: ratio columns written, expected empty" % where)
            elif em != "" and em == gm:
                vals = vals + ("ratio", "ratio_lo", "ratio_hi")
        for c in vals:
            if not _spelled_ok(g[c]):
                msgs.append("%s: %s written as %r (expected %%.9g or inf/-inf/nan)"
                            % (where, c, g[c]))
            elif not _close_rel_error(float(e[c]), float(g[c])):
                msgs.append("%s: %s expected %s, got %s" % (where, c, fmt_g(e[c]), g[c]))
        if sampled and coverage is not None and math.isfinite(e["exact"]):
            lo, hi, ex = float(g["rel_error_lo"]), float(g["rel_error_hi"]), e["exact"]
            coverage["rows"] = coverage.get("rows", 0) + 1
            coverage["inside"] = coverage.get("inside", 0) + (
                lo * (1 - 1e-6) <= ex <= hi * (1 + 1e-6))
        if len(msgs) >= max_report:
            break
    return msgs


def _read_csv(path):
    with open(path, newline="") as f:
        return list(csv.reader(f))


def compare_all(ini, steps_csv, trace_override=None, gemm_csv=None, stream_csv=None,
                summary_csv=None, run_json=None):
    """-> dict(steps_rows, steps_msgs, gemm_rows (None = no gemm.csv expected),
    gemm_msgs (None when gemm_csv was not given), stream_rows (None = no stream.csv expected),
    stream_msgs, summary_rows, summary_msgs (None when that file was not given)). With
    gemm_csv, gemm.csv must match the reference when one is expected, and the file must be
    ABSENT when none is; likewise stream.csv (expected exactly when the experiment has a
    delayed configuration)."""
    exp, tr = load_for(ini, trace_override)
    full = replay_full(exp, tr)
    rows, grows, srows = full["steps"], full["gemm"], full["stream"]
    data = _read_csv(steps_csv)
    if not data:
        smsgs = ["%s is empty" % steps_csv]
    else:
        smsgs = compare_rows(rows, data[1:], data[0], exp.skipped_labels)
    gmsgs = None
    coverage = {}
    if gemm_csv is not None:
        exists = os.path.exists(gemm_csv)
        if grows is None:
            gmsgs = ["%s exists, but no gemm.csv is expected (%s)" % (
                gemm_csv, "[analysis] gemm = false" if not exp.gemm else
                "no layer has input, weight and grad_output with agreeing shapes at a "
                "snapshot step")] if exists else []
        elif not exists:
            gmsgs = ["%s is missing: %d rows expected" % (gemm_csv, len(grows))]
        else:
            gdata = _read_csv(gemm_csv)
            if not gdata:
                gmsgs = ["%s is empty" % gemm_csv]
            else:
                gmsgs = compare_gemm_rows(grows, gdata[1:], gdata[0], exp.skipped_labels,
                                          coverage=coverage, threshold=exp.fp4_gemm_ratio)
    stmsgs = None
    if stream_csv is not None:
        exists = os.path.exists(stream_csv)
        if srows is None:
            stmsgs = ["%s exists, but no stream.csv is expected (no delayed configuration)"
                      % stream_csv] if exists else []
        elif not exists:
            stmsgs = ["%s is missing: %d rows expected" % (stream_csv, len(srows))]
        else:
            sdata = _read_csv(stream_csv)
            stmsgs = ["%s is empty" % stream_csv] if not sdata else compare_stream_rows(
                srows, sdata[1:], sdata[0], exp.skipped_labels)
    summsgs = None
    if summary_csv is not None:
        if not os.path.exists(summary_csv):
            summsgs = ["%s is missing" % summary_csv]
        else:
            udata = _read_csv(summary_csv)
            summsgs = ["%s is empty" % summary_csv] if not udata else compare_summary_rows(
                full["summary"], udata[1:], udata[0], exp.skipped_labels)
    rjmsgs = None if run_json is None else compare_run_json(exp, tr, run_json)
    return dict(run_json_msgs=rjmsgs, steps_rows=len(rows), steps_msgs=smsgs,
                gemm_rows=None if grows is None else len(grows), gemm_msgs=gmsgs,
                gemm_coverage=coverage,
                stream_rows=None if srows is None else len(srows), stream_msgs=stmsgs,
                summary_rows=len(full["summary"]), summary_msgs=summsgs)


def compare_file(ini, steps_csv, trace_override=None, gemm_csv=None):
    """-> (reference steps rows, messages); gemm.csv messages (with gemm_csv) prefixed."""
    r = compare_all(ini, steps_csv, trace_override, gemm_csv)
    return r["steps_rows"], r["steps_msgs"] + ["gemm.csv: " + m for m in r["gemm_msgs"] or []]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("run", help="write steps.csv (and gemm.csv) as the reference computes it")
    p.add_argument("ini")
    p.add_argument("out", help="output CSV path, - for stdout")
    p.add_argument("--trace", help="trace directory (overrides [trace] path)")
    p.add_argument("--gemm", metavar="GEMM_CSV",
                   help="also write gemm.csv here (only when one is expected)")
    p.add_argument("--stream", metavar="STREAM_CSV",
                   help="also write stream.csv here (only when one is expected)")
    p.add_argument("--summary", metavar="SUMMARY_CSV", help="also write summary.csv here")
    p = sub.add_parser("compare", help="check a steps.csv (and gemm.csv) against the reference")
    p.add_argument("ini")
    p.add_argument("steps_csv")
    p.add_argument("--trace", help="trace directory (overrides [trace] path)")
    p.add_argument("--gemm", metavar="GEMM_CSV",
                   help="also check gemm.csv; when the reference expects none "
                        "(gemm = false or no layer triplet) the file must be absent")
    p.add_argument("--no-gemm", metavar="GEMM_CSV",
                   help="require that the reference expects no gemm.csv and that this file "
                        "is absent")
    p.add_argument("--stream", metavar="STREAM_CSV",
                   help="also check stream.csv; when the reference expects none (no delayed "
                        "configuration) the file must be absent")
    p.add_argument("--summary", metavar="SUMMARY_CSV", help="also check summary.csv")
    p.add_argument("--run-json", metavar="RUN_JSON",
                   help="also check run.json's lists of tensors left out (%s)" % ", ".join(LEFT_KEYS))
    args = ap.parse_args(argv)
    try:
        if args.cmd == "run":
            exp, tr = load_for(args.ini, args.trace)
            full = replay_full(exp, tr)
            for path, rows, cols, what in ((args.out, full["steps"], COLUMNS, "steps.csv"),
                                           (args.gemm, full["gemm"], gemm_columns(full["gemm"]),
                                            "gemm.csv"),
                                           (args.stream, full["stream"], STREAM_COLUMNS,
                                            "stream.csv"),
                                           (args.summary, full["summary"], SUMMARY_COLUMNS,
                                            "summary.csv")):
                if not path:
                    continue
                if rows is None:
                    print("fp8ref: no %s expected; %s not written" % (what, path),
                          file=sys.stderr)
                elif path == "-":
                    write_csv(rows, sys.stdout, cols)
                else:
                    with open(path, "w", newline="") as f:
                        write_csv(rows, f, cols)
            return 0
        if args.gemm and args.no_gemm:
            raise ValueError("--gemm and --no-gemm exclude each other")
        r = compare_all(args.ini, args.steps_csv, args.trace, args.gemm or args.no_gemm,
                        args.stream, args.summary, args.run_json)
    except (ValueError, OSError, KeyError) as e:
        print("fp8ref: error: %s" % e, file=sys.stderr)
        return 2
    bad = False
    if r["steps_msgs"]:
        bad = True
        print("steps.csv differs from the reference (%d reference rows):" % r["steps_rows"])
        for m in r["steps_msgs"]:
            print("  " + m)
    if args.no_gemm and r["gemm_rows"] is not None:
        bad = True
        print("gemm.csv: --no-gemm, but the reference expects %d gemm.csv rows"
              % r["gemm_rows"])
    if r["gemm_msgs"]:
        bad = True
        print("gemm.csv differs from the reference (%s reference rows):"
              % ("no" if r["gemm_rows"] is None else r["gemm_rows"]))
        for m in r["gemm_msgs"]:
            print("  " + m)
    if r["stream_msgs"]:
        bad = True
        print("stream.csv differs from the reference (%s reference rows):"
              % ("no" if r["stream_rows"] is None else r["stream_rows"]))
        for m in r["stream_msgs"]:
            print("  " + m)
    if r["summary_msgs"]:
        bad = True
        print("summary.csv differs from the reference (%d reference rows):" % r["summary_rows"])
        for m in r["summary_msgs"]:
            print("  " + m)
    if r["run_json_msgs"]:
        bad = True
        print("run.json's tensors left out differ from the reference:")
        for m in r["run_json_msgs"]:
            print("  " + m)
    if bad:
        return 1
    line = "steps.csv matches the reference: %d rows" % r["steps_rows"]
    if r["gemm_msgs"] is not None:
        line += ("; gemm.csv absent, as expected" if r["gemm_rows"] is None else
                 "; gemm.csv matches: %d rows" % r["gemm_rows"])
        cov = r["gemm_coverage"]
        if cov.get("rows"):
            line += " (sampled: the exact error in the interval in %d of %d)" % (
                cov["inside"], cov["rows"])
    if r["stream_msgs"] is not None:
        line += ("; stream.csv absent, as expected" if r["stream_rows"] is None else
                 "; stream.csv matches: %d rows" % r["stream_rows"])
    if r["summary_msgs"] is not None:
        line += "; summary.csv matches: %d rows" % r["summary_rows"]
    if r["run_json_msgs"] is not None:
        line += "; run.json's tensors left out match"
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
