#!/usr/bin/env python3
"""Independent Python reference for one tensor-core MMA inner product with FP8 inputs (issue 46):

    d = c + sum_{i=1..32} a_i * b_i      a_i, b_i FP8 (E4M3 or E5M2), c and d float32

as the published bit-accurate models define it: F. A. Khattak and M. Mikaitis, "Accurate Models
of NVIDIA Tensor Cores" (arXiv 2512.07004; ACM TACO), MATLAB code in
github.com/north-numerical-computing/MATLAB-tensor-core (BSD 2-Clause), commit
b12b5a700957655375a1b0c1d0c26e76065da015. Written from the models' definitions (models/H100TC.m,
models/B200TC.m, models/B200TCRN.m, models/tools/GEMM.m, models/tools/Generic_BFMA_TC.m; line
numbers below are of that commit), not translated line by line: the MATLAB code works on bit
strings, this works on integers (numpy int64 where they fit, Python ints for exact sums).

Models (gpu argument):
  "h100", "h200"  sm90: H200TC.m is H100TC.m (H200TC.m:26). All non-zero products and c (if
                  c != 0) aligned to the largest exponent, each significand first cut to 13
                  fraction bits (neab = -10), alignment by truncation, one integer sum, the
                  result truncated toward zero to 14 significant bits (13 fraction bits).
  "b200-repo"     sm100 as the repository's B200TC.m defines it for FP8 (neab = 2: 25 fraction
                  bits kept in alignment, truncation to fp32 at the end). It does NOT match the
                  B200 hardware files (docs/tensor_cores.md); kept to show that.
  "b200-repo-rn"  the same with round-to-nearest-even at the end (B200TCRN.m).
  "b200"          the variant that matches B200's hardware outputs in model_validation: the 32
                  products summed exactly, truncated toward zero to float32, then c added with
                  one round-to-nearest-even to float32 (fp8lab's, found by testing against the
                  hardware files; not in the repository).
  "exact"         the exact sum c + sum a_i*b_i with one round-to-nearest-even to float32 (what
                  fp8lab's CPU GEMM approximates today).

Non-finite inputs follow GEMM.m:157-169 (any NaN -> NaN, +Inf and -Inf -> NaN, else the
infinity); NaN is written as 0x7FC00000 (the hardware files hold no non-finite case, so the NaN
payload is not checked). Block-scaled MMA forms (MXFP8, NVFP4) are outside the paper's scope.

API: inner_product(a_codes, b_codes, c_bits, fmt, gpu) with a_codes, b_codes uint8 arrays of
shape (n, K) (K = 32 for one MMA; any K is accepted and treated as one block), c_bits uint32 of
shape (n,); returns uint32 float32 bit patterns of shape (n,).

Usage (the hardware files' format: a, b one line of 32 float32 hex words per inner product;
c, d one 32-character bit string per line):
  tensorcore.py check A.txt B.txt C.txt D.txt FMT GPU    count the lines the model matches
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fp8ref  # noqa: E402  (FP8 formats: Fmt, decode, encode)

GPUS = ("h100", "h200", "b200", "b200-repo", "b200-repo-rn", "exact")
F32_EMIN = -126          # float32's smallest normal exponent
F32_SUB_EXP = -149       # float32's smallest subnormal: 2^-149
F32_EMAX = 127
NAN_BITS = 0x7FC00000

# Global-alignment parameters of the repository's models for FP8 inputs and fp32 output:
#   neab: extra alignment bits beyond fp32's 23 fraction bits (H100TC.m:109 sets -10 for FP8;
#         B200TC.m:51 keeps the default 2); the significands enter the alignment with 23 + neab
#         fraction bits (Generic_BFMA_TC.m:1070, 1108-1110: uint32(x * 2^23), then bitshift by
#         neab, a truncation when neab < 0).
#   out_frac: fraction bits of the result (GEMM.m:105-109: 23 + neab when neab < 0, else 23).
#   rne: the final rounding (H100TC.m:53 and B200TC.m:54 'rz'; B200TCRN.m:54 'rne').
#   min_exp: the lower limit of the alignment exponent (min_exp_limit = -133, H100TC.m:70,
#            Generic_BFMA_TC.m:1101-1105).
_ALIGN_MODELS = {
    "h100": dict(neab=-10, out_frac=13, rne=False, min_exp=-133),
    "h200": dict(neab=-10, out_frac=13, rne=False, min_exp=-133),
    "b200-repo": dict(neab=2, out_frac=23, rne=False, min_exp=-133),
    "b200-repo-rn": dict(neab=2, out_frac=23, rne=True, min_exp=-133),
}


# --------------------------------------------------------------------------------------------
# operands as sign, integer significand and exponent
# --------------------------------------------------------------------------------------------


def fp8_parts(codes, fmt):
    """FP8 codes -> (negative, m, e, nonfinite): |value| = m * 2^(e - mbits), m the integer
    significand with its implicit bit (normal) or without (subnormal), e the exponent clamped
    below at the format's emin: Generic_BFMA_TC.m:114-121 (exp = max(floor(log2|x|), emin_in),
    sig = x / 2^exp)."""
    fmt = fp8ref.get_fmt(fmt)
    c = np.asarray(codes, dtype=np.uint8).astype(np.int64)
    mbits = fmt.mbits
    ebits = 7 - mbits
    bias = (1 << (ebits - 1)) - 1
    field = (c >> mbits) & ((1 << ebits) - 1)
    frac = c & ((1 << mbits) - 1)
    m = np.where(field > 0, frac + (1 << mbits), frac)
    e = np.maximum(field, 1) - bias
    neg = (c & 0x80) != 0
    with np.errstate(invalid="ignore"):
        nonfinite = ~np.isfinite(fp8ref.decode(codes, fmt))
    return neg, m, e, nonfinite


def f32_parts(bits):
    """float32 bit patterns -> (negative, m, e): |value| = m * 2^(e - 23), m the 24-bit
    significand, e the unbiased exponent with -126 for subnormals and zero
    (Generic_BFMA_TC.m:1074-1080)."""
    b = np.asarray(bits, dtype=np.uint32).astype(np.int64)
    field = (b >> 23) & 0xFF
    frac = b & 0x7FFFFF
    m = np.where(field > 0, frac + (1 << 23), frac)
    e = np.maximum(field, 1) - 127
    return (b >> 31) != 0, m, e


def _bit_length(x):
    """bit length of non-negative int64 values below 2^53 (0 for 0)."""
    _, e = np.frexp(x.astype(np.float64))
    return np.where(x > 0, e, 0).astype(np.int64)


# --------------------------------------------------------------------------------------------
# float32 results from an integer times a power of two
# --------------------------------------------------------------------------------------------


def _round_shift(mag, shift, rne):
    """mag / 2^shift (shift > 0) truncated, or rounded to nearest even; mag, shift int64."""
    s = np.minimum(shift, 62)
    q = mag >> s
    if rne:
        rem = mag - (q << s)
        half = np.where(s > 0, np.left_shift(np.int64(1), np.maximum(s - 1, 0)), 0)
        up = (s > 0) & ((rem > half) | ((rem == half) & ((q & 1) == 1)))
        q = q + up
    return q


def to_f32_bits(neg, mag, unit_exp, frac_bits, rne):
    """float32 bits of (-1)^neg * mag * 2^unit_exp (mag >= 0 int64 below 2^53), kept to
    frac_bits fraction bits after the leading one (to quanta of 2^(-126 - frac_bits) below
    float32's normal range, Generic_BFMA_TC.m:277-281, 296-300), truncated toward zero or
    rounded to nearest even; infinity from 2^128 up (Generic_BFMA_TC.m:329-335). A zero mag
    gives +0 (Generic_BFMA_TC.m:504-507); a non-zero one that vanishes keeps its sign."""
    mag = np.asarray(mag, dtype=np.int64)
    unit_exp = np.asarray(unit_exp, dtype=np.int64)
    lead = unit_exp + _bit_length(mag) - 1                 # exponent of the leading one
    q_exp = np.maximum(lead, F32_EMIN) - frac_bits         # the quantum kept
    shift = q_exp - unit_exp
    kept = np.where(shift > 0, _round_shift(mag, np.maximum(shift, 0), rne),
                    mag << np.clip(-shift, 0, 62))
    v64 = np.ldexp(kept.astype(np.float64), q_exp)        # exact: <= 25 significant bits
    with np.errstate(over="ignore"):
        v = np.where(v64 >= 2.0 ** 128, np.float32(np.inf), v64.astype(np.float32))
    v = np.where(neg & (mag != 0), -v, v)
    return v.astype(np.float32).view(np.uint32)


def _int_to_f32_bits(n, exp, rne):
    """float32 bits of the Python integer n times 2^exp (exp <= -149: every float32 is an
    integer multiple of 2^exp), truncated toward zero or rounded to nearest even."""
    neg = n < 0
    n = abs(n)
    lead = n.bit_length() - 1 + exp
    q_exp = max(lead, F32_EMIN) - 23
    s = q_exp - exp
    q = n >> s if s > 0 else n << -s
    if rne and s > 0:
        rem = n - (q << s)
        half = 1 << (s - 1)
        if rem > half or (rem == half and q & 1):
            q += 1
    if n == 0:
        return 0x80000000 if neg else 0
    v = np.float32(np.inf) if q_exp + q.bit_length() - 1 > F32_EMAX else \
        np.float32(np.ldexp(float(q), q_exp))
    return int(np.array(-v if neg else v, dtype=np.float32).view(np.uint32))


# --------------------------------------------------------------------------------------------
# the models
# --------------------------------------------------------------------------------------------


def _global_alignment(pneg, pm, pe, pfrac, cneg, cm, ce, neab, out_frac, rne, min_exp):
    """Generic_BFMA_TC.m with global_alignment = 1, late_partial_sum = 0, stkbitenabled = 0,
    denorm_prd = 1 (products kept unnormalised, significands in [0, 4)):
    - zero products and a zero c take no part, not even in the largest exponent (lines 73-79,
      1073-1090 with c_min_exp_limit = 0);
    - each significand with 23 + neab fraction bits, truncated (lines 1070, 1108-1110): a
      product's significand pm / 2^pfrac, c's cm / 2^23;
    - the largest exponent, at least min_exp (lines 1098-1105); each significand shifted right
      by its distance to it, truncating; shifts above 31 give 0 (lines 1113, 1127-1128);
    - one exact signed sum (line 501), normalised (norm_helper, lines 594-614): its value is
      sum * 2^(max_exp - 23 - neab);
    - kept to out_frac fraction bits, truncated ('rz': lines 287-290 skip the rounding, 310-311
      keep NoManBitsOut bits) or rounded to nearest even (ieeeround, lines 845-902)."""
    f = 23 + neab
    live = pm != 0
    psig = pm << (f - pfrac) if f >= pfrac else pm >> (pfrac - f)
    csig = cm << neab if neab >= 0 else cm >> -neab
    clive = cm != 0
    low = np.int64(-(1 << 20))
    pe_l = np.where(live, pe, low)
    ce_l = np.where(clive, ce, low)
    max_exp = np.maximum(np.maximum(pe_l.max(axis=1), ce_l), min_exp)
    pshift = max_exp[:, None] - pe_l
    cshift = max_exp - ce_l
    pal = np.where(live & (pshift <= 31), psig >> np.clip(pshift, 0, 62), 0)
    cal = np.where(clive & (cshift <= 31), csig >> np.clip(cshift, 0, 62), 0)
    total = np.where(pneg, -pal, pal).sum(axis=1) + np.where(cneg, -cal, cal)
    return to_f32_bits(total < 0, np.abs(total), max_exp - f, out_frac, rne)


def _exact_sums(pneg, pm, pe, pfrac):
    """the exact sums of the products as Python integers in units of 2^(2 * emin - pfrac)
    (every product of two FP8 values is an integer multiple of it); returns (sums, unit exp)."""
    e0 = int(pe.min()) if pe.size else 0
    ints = np.where(pneg, -pm, pm).astype(object) * (2 ** (pe - e0)).astype(object)
    return ints.sum(axis=1), e0 - pfrac


def _exact_model(pneg, pm, pe, pfrac, c_bits, truncate_products):
    """"exact": c + the exact sum of the products, one RNE to float32. "b200": the exact sum of
    the products truncated toward zero to float32, then c added with one RNE. An exact zero is
    -0 only when every addend is a negative zero (IEEE 754's rule for sums under RNE)."""
    sums, unit = _exact_sums(pneg, pm, pe, pfrac)
    neg_zero_products = ((pm == 0) & pneg).all(axis=1)
    c32 = np.asarray(c_bits, dtype=np.uint32)
    out = np.empty(len(c32), dtype=np.uint32)
    low = F32_SUB_EXP - 32      # divides every product's and every float32's quantum
    assert unit >= low, "products below 2^-181: not FP8 products"
    for i, (s, cb) in enumerate(zip(sums, c32)):
        p = int(s) << (unit - low)
        if truncate_products and p != 0:
            p = _f32_int(_int_to_f32_bits(p, low, rne=False), low)
        total = p + _f32_int(int(cb), low)
        if total == 0:
            out[i] = 0x80000000 if (p == 0 and neg_zero_products[i] and cb == 0x80000000) else 0
        else:
            out[i] = _int_to_f32_bits(total, low, rne=True)
    return out


def _f32_int(bits, exp):
    """the float32 with bits bits as an integer multiple of 2^exp (exp <= -149)."""
    neg = bits >> 31
    field = (bits >> 23) & 0xFF
    frac = bits & 0x7FFFFF
    m = frac + (1 << 23) if field else frac
    v = m << (max(field, 1) - 127 - 23 - exp)
    return -v if neg else v


def inner_product(a_codes, b_codes, c_bits, fmt, gpu, fmt_b=None):
    """d = c + sum_i a_i * b_i for each row, as model gpu computes it (one of GPUS).
    a_codes, b_codes: uint8 FP8 codes of shape (n, K); c_bits: uint32 float32 bits (n,);
    fmt: "e4m3" or "e5m2", the format of a, and of b unless fmt_b names b's (the MMA takes
    E4M3 x E5M2 too: a product's exponent is the sum of its operands' clamped exponents).
    Returns uint32 float32 bits (n,)."""
    if gpu not in GPUS:
        raise ValueError("gpu must be one of %s, not %r" % (", ".join(GPUS), gpu))
    fmt_b = fp8ref.get_fmt(fmt_b if fmt_b is not None else fmt)
    fmt = fp8ref.get_fmt(fmt)
    a = np.atleast_2d(np.asarray(a_codes, dtype=np.uint8))
    b = np.atleast_2d(np.asarray(b_codes, dtype=np.uint8))
    c_bits = np.atleast_1d(np.asarray(c_bits, dtype=np.uint32))
    if a.shape != b.shape or a.shape[0] != c_bits.shape[0]:
        raise ValueError("a, b must be (n, K) and c (n,): %s %s %s"
                         % (a.shape, b.shape, c_bits.shape))
    aneg, am, ae, anf = fp8_parts(a, fmt)
    bneg, bm, be, bnf = fp8_parts(b, fmt_b)
    pneg, pm, pe = aneg ^ bneg, am * bm, ae + be
    pfrac = fmt.mbits + fmt_b.mbits
    if gpu in _ALIGN_MODELS:
        cneg, cm, ce = f32_parts(c_bits)
        out = _global_alignment(pneg, pm, pe, pfrac, cneg, cm, ce, **_ALIGN_MODELS[gpu])
    else:
        out = _exact_model(pneg, pm, pe, pfrac, c_bits, truncate_products=(gpu == "b200"))
    # non-finite operands (GEMM.m:157-169): decided on the values, whatever the model
    nf = anf.any(axis=1) | bnf.any(axis=1) | ((c_bits & 0x7F800000) == 0x7F800000)
    if nf.any():
        with np.errstate(invalid="ignore", over="ignore"):
            av = fp8ref.decode(a, fmt).astype(np.float64)
            bv = fp8ref.decode(b, fmt_b).astype(np.float64)
            cv = c_bits.view(np.float32).astype(np.float64)
            terms = np.concatenate([av * bv, cv[:, None]], axis=1)
        for i in np.nonzero(nf)[0]:
            t = terms[i]
            pinf, minf = (t == np.inf).any(), (t == -np.inf).any()
            if np.isnan(t).any() or (pinf and minf):
                out[i] = NAN_BITS
            elif pinf or minf:
                out[i] = 0x7F800000 if pinf else 0xFF800000
    return out


# --------------------------------------------------------------------------------------------
# the hardware files of model_validation/
# --------------------------------------------------------------------------------------------


def read_words(path, fmt, max_lines=None):
    """a_*.txt / b_*.txt: float32 hex words of FP8 values, one inner product a line -> uint8
    FP8 codes (n, K); every word must be an FP8 value exactly."""
    rows = []
    with open(path) as f:
        for n, line in enumerate(f):
            if max_lines is not None and n >= max_lines:
                break
            rows.append([int(w, 16) for w in line.split()])
    bits = np.array(rows, dtype=np.uint32)
    codes = fp8ref.encode(bits.view(np.float32), fmt)
    back = fp8ref.decode(codes, fmt).view(np.uint32)
    bad = np.nonzero(back != bits)
    if len(bad[0]):
        raise ValueError("%s: line %d word %d (%08x) is not an %s value"
                         % (path, bad[0][0] + 1, bad[1][0] + 1, bits[bad][0], fmt))
    return codes.reshape(bits.shape)


def read_bit_strings(path, max_lines=None):
    """c_*.txt / d_*.txt: one 32-character bit string a line -> uint32 (n,)."""
    out = []
    with open(path) as f:
        for n, line in enumerate(f):
            if max_lines is not None and n >= max_lines:
                break
            s = line.strip()
            if len(s) != 32 or set(s) - {"0", "1"}:
                raise ValueError("%s:%d: not a 32-bit string: %r" % (path, n + 1, s))
            out.append(int(s, 2))
    return np.array(out, dtype=np.uint32)


def main(argv):
    if len(argv) != 8 or argv[1] != "check":
        print(__doc__.split("Usage")[1], file=sys.stderr)
        return 2
    a_path, b_path, c_path, d_path, fmt, gpu = argv[2:]
    a, b = read_words(a_path, fmt), read_words(b_path, fmt)
    c, d = read_bit_strings(c_path), read_bit_strings(d_path)
    got = inner_product(a, b, c, fmt, gpu)
    miss = np.nonzero(got != d)[0]
    print("%s %s: %d of %d match" % (gpu, fmt, len(d) - len(miss), len(d)))
    for i in miss[:5]:
        print("  line %d: model %08x hardware %08x" % (i + 1, got[i], d[i]))
    return 0 if len(miss) == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
