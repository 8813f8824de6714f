"""fp4ref.py: an independent transcription of NVFP4 and MXFP4 quantization (issue 29), for
tests/sim/test_fp4.py. numpy float32 arithmetic (each operation one IEEE float32 rounding)
and ml_dtypes' float4_e2m1fn / float8_e4m3fn casts; no code shared with fp8lab's C.

The rules are TransformerEngine's CUDA kernels' (transformer_engine/common/cast/nvfp4/
core_nvfp4.cuh, quantize_transpose_nvfp4.cuh, dequantize_nvfp4.cuh at v2.18 / main d0067d0d),
as docs/semantics.md "FP4" states them; the MXFP4 scale rules are torchao's RCEIL (ceil) and
OCP MX v1.0 / torchao FLOOR (floor).
"""
import ml_dtypes
import numpy as np

F32 = np.float32
F = F32
FLT_MAX = F32(np.finfo(np.float32).max)


def e2m1_codes(y):
    """E2M1 codes of float32 array y: ml_dtypes' round-to-nearest-even, saturating at 6 (inf
    too); NaN -> code 7 (+6), TE's satfinite (ml_dtypes would give -0)."""
    y = np.asarray(y, dtype=np.float32)
    c = y.astype(ml_dtypes.float4_e2m1fn).view(np.uint8) & 0xF
    return np.where(np.isnan(y), np.uint8(7), c).astype(np.uint8)


def e2m1_values(codes):
    return (np.asarray(codes, np.uint8) & 0xF).view(ml_dtypes.float4_e2m1fn).astype(np.float32)


def e4m3_rn_sat(v):
    """RN-even E4M3 of float32 v, saturating at 448 (ml_dtypes' cast after clamping: values in
    (448, 464) round to 448 either way); the code and its value."""
    v = np.clip(np.asarray(v, np.float32), -448, 448)
    q = v.astype(ml_dtypes.float8_e4m3fn)
    return q.view(np.uint8), q.astype(np.float32)


def _err_4over6(xb, sc_code, s_dec, amax_g, m, mse):
    """One candidate's error over a block (rows x <=16): float32 per-row sums in column order,
    then TE's tree over 16 rows (offsets 8, 4, 2, 1)."""
    s = F(np.uint8(sc_code).view(ml_dtypes.float8_e4m3fn).astype(np.float32))
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        enc = np.minimum(F(1) / F(s * s_dec), FLT_MAX).astype(np.float32)
        rng6 = F(F(6) * m)
        sums = [F(0)] * 16
        for i, row in enumerate(xb):
            acc = F(0)
            for v in row:
                q = e2m1_values(e2m1_codes(np.array([F(v * enc)], np.float32)))[0]
                d = F(F(F(F(q * s) * amax_g) / rng6) - v)
                acc = F(acc + (F(d * d) if mse else F(abs(d))))
            sums[i] = acc
        for off in (8, 4, 2, 1):
            for i in range(off):
                sums[i] = F(sums[i] + sums[i + off])
    return sums[0]


def nvfp4(x, square, amax_g, e4m3_max=448.0, rule="max6"):
    """TE's NVFP4 of the [rows, cols] float32 matrix x: codes, scale codes per 1x16 run, xhat,
    and the scaled values y that were cast."""
    x = np.asarray(x, np.float32)
    rows, cols = x.shape
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        amax_g = F32(amax_g)
        m = F32(e4m3_max)
        s_enc = np.minimum(F32(m * F32(6)) / amax_g, FLT_MAX).astype(np.float32)
        if amax_g == 0 or s_enc == 0:
            s_enc = F32(1)
        s_dec = F32(1) / s_enc
        k = F32(s_enc * (F32(1) / F32(6)))
        dq_unit = F32(1) / F32(F32(6) * m)
        nrun = (cols + 15) // 16
        codes = np.zeros((rows, cols), np.uint8)
        scales = np.zeros((rows, nrun), np.uint8)
        xhat = np.zeros((rows, cols), np.float32)
        ys = np.zeros((rows, cols), np.float32)
        ax = np.abs(x)
        ax = np.where(np.isnan(ax), F32(0), ax)   # fmaxf: NaN ignored
        for r in range(rows):
            for j in range(nrun):
                c0, c1 = 16 * j, min(16 * j + 16, cols)
                r0, r1 = (r - r % 16, min(r - r % 16 + 16, rows)) if square else (r, r + 1)
                bamax = F32(ax[r0:r1, c0:c1].max())
                if rule == "max6":
                    sc, s = e4m3_rn_sat(np.minimum(F32(bamax * k), FLT_MAX))
                else:  # 4over6 (TE v2.17+): map-to-6 and map-to-4 (1.5x), the smaller error
                    base = F32(F32(bamax / F32(6)) * s_enc)
                    s6 = e4m3_rn_sat(np.minimum(base, F32(448)))[0]
                    s4 = e4m3_rn_sat(np.minimum(F32(base * F32(1.5)), F32(448)))[0]
                    blk = x[r0:r1, c0:c1]
                    e6 = _err_4over6(blk, s6, s_dec, amax_g, m, rule == "mse")
                    e4 = _err_4over6(blk, s4, s_dec, amax_g, m, rule == "mse")
                    sc, s = e4m3_rn_sat(np.uint8(s4 if e4 < e6 else s6).view(ml_dtypes.float8_e4m3fn).astype(np.float32))
                sc, s = np.uint8(sc), F32(s)
                enc = np.minimum(F32(1) / F32(s * s_dec), FLT_MAX).astype(np.float32)
                y = (x[r, c0:c1] * enc).astype(np.float32)
                q = e2m1_codes(y)
                dq = F32(F32(s * amax_g) * dq_unit)
                codes[r, c0:c1] = q
                scales[r, j] = sc
                ys[r, c0:c1] = y
                xhat[r, c0:c1] = (e2m1_values(q) * dq).astype(np.float32)
    return codes, scales, xhat, ys


def e8m0_ceil(v):
    """The smallest power of two >= float32 v as an E8M0 code (v finite >= 0)."""
    v = F32(v)
    if v == 0:
        return 0
    b = int(np.array(v, np.float32).view(np.uint32))
    e, mant = b >> 23, b & 0x7FFFFF
    if e == 0:
        return 1 if mant > 0x400000 else 0
    return min(e + (mant != 0), 254) if e < 0xFE else e


def mxfp4_exponent(amax, rounding):
    amax = F32(abs(amax))
    if np.isnan(amax):
        return 0xFF
    if rounding == "ceil":
        if np.isinf(amax):
            return 0xFE
        return e8m0_ceil(F32(amax * F32(F32(1) / F32(6))))
    if np.isinf(amax):
        return 0xFE
    if amax == 0:
        return 0
    fl = int(np.floor(np.log2(np.float64(amax))))   # exact for float32 inputs
    return max(0, min(254, fl - 2 + 127))


def mxfp4(x, rounding):
    x = np.asarray(x, np.float32)
    rows, cols = x.shape
    nrun = (cols + 31) // 32
    codes = np.zeros((rows, cols), np.uint8)
    scales = np.zeros((rows, nrun), np.uint8)
    xhat = np.zeros((rows, cols), np.float32)
    ys = np.zeros((rows, cols), np.float32)
    ax = np.where(np.isnan(x), F32(0), np.abs(x))
    for r in range(rows):
        for j in range(nrun):
            c0, c1 = 32 * j, min(32 * j + 32, cols)
            e = mxfp4_exponent(ax[r, c0:c1].max(), rounding)
            s = F32(2.0 ** (127 - e))
            with np.errstate(over="ignore", invalid="ignore"):
                y = (x[r, c0:c1] * s).astype(np.float32)
            q = e2m1_codes(y)
            ys[r, c0:c1] = y
            codes[r, c0:c1] = q
            scales[r, j] = e
            with np.errstate(over="ignore"):  # an inf block: 6 * 2^127
                xhat[r, c0:c1] = (e2m1_values(q) * F32(2.0 ** (e - 127))).astype(np.float32)
    return codes, scales, xhat, ys


def stats(x, codes, xhat, y):
    """fp8lab's counts (docs/semantics.md) from the inputs, codes, xhat and scaled values y."""
    x = np.asarray(x, np.float32).ravel()
    y = np.asarray(y, np.float32).ravel()
    c = np.asarray(codes).ravel() & 7
    h = np.asarray(xhat, np.float32).ravel()
    fin = np.isfinite(x)
    xf, hf = x[fin].astype(np.float64), h[fin].astype(np.float64)
    return {"n": x.size, "nonfinite": int((~fin).sum()), "zeros": int((x == 0).sum()),
            "overflow": int((fin & (np.abs(y) > 6)).sum()),
            "underflow": int((fin & (x != 0) & (c == 0)).sum()),
            "subnormal": int((fin & (c == 1)).sum()),
            "clipped": int((fin & (np.abs(y) >= 7)).sum()),
            "sum_sq_err": float(((xf - hf) ** 2).sum()), "sum_sq": float((xf * xf).sum())}


# ------------------------------------------------------------------ vectorized, for the GEMMs
# (fp8ref.py's replay of NVFP4 GEMM operands, issue 45): the rules above over whole matrices at
# once, NVFP4 max6 only, and stochastic rounding and the Hadamard transform as
# docs/semantics.md "FP4" states them. tests/tools/reference/test_ref_fp4_gemm.py holds them to
# nvfp4() and to loops by hand.

GRID = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], np.float64)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def splitmix_bytes(seed, idx):
    """The low byte of splitmix64's output number i (uint64 array idx; output 0 is the first)
    of the stream seeded with `seed`: z = seed + (i + 1) * golden, then the two xor-shift
    multiplies and the last xor-shift."""
    with np.errstate(over="ignore"):
        z = np.uint64(seed) + (np.asarray(idx, np.uint64) + np.uint64(1)) * _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z & np.uint64(0xFF)).astype(np.int64)


def nvfp4_xhat(x, square, amax_g, e4m3_max=448.0, sr_seed=None, index0=0):
    """Dequantized NVFP4 (max6) of the [rows, cols] float32 matrix x, along its rows (1x16 runs;
    square: each run scaled by its 16x16 block's amax), with the per-tensor amax amax_g.
    sr_seed None: round to nearest; else stochastic rounding: element (r, c) rounds up when
    floor(256 f) > the low byte of splitmix64 output index0 + r * cols + c."""
    x = np.asarray(x, np.float32)
    rows, cols = x.shape
    if rows == 0 or cols == 0:
        return x.copy()
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        amax_g = F32(amax_g)
        m = F32(e4m3_max)
        s_enc = F32(min(F32(F32(m * F32(6)) / amax_g), FLT_MAX))
        if amax_g == 0 or s_enc == 0:
            s_enc = F32(1)
        s_dec = F32(F32(1) / s_enc)
        k = F32(s_enc * F32(F32(1) / F32(6)))
        dq_unit = F32(F32(1) / F32(F32(6) * m))
        nrun = -(-cols // 16)
        ax = np.zeros((-(-rows // 16) * 16, nrun * 16), np.float32)
        ax[:rows, :cols] = np.where(np.isnan(x), F32(0), np.abs(x))
        bam = ax.reshape(ax.shape[0], nrun, 16).max(axis=2)          # [rows16, nrun]
        if square:
            bam = np.repeat(bam.reshape(-1, 16, nrun).max(axis=1), 16, axis=0)
        bam = bam[:rows]
        _, s = e4m3_rn_sat(np.minimum((bam * k).astype(np.float32), FLT_MAX))
        s = s.astype(np.float32)
        enc = np.minimum(F32(1) / (s * s_dec).astype(np.float32), FLT_MAX).astype(np.float32)
        dq = ((s * amax_g).astype(np.float32) * dq_unit).astype(np.float32)
        y = (x * np.repeat(enc, 16, axis=1)[:, :cols]).astype(np.float32)
        vals = e2m1_values(e2m1_codes(y))
        if sr_seed is not None:
            a = np.abs(y).astype(np.float64)
            on = a < 6                                   # NaN and |y| >= 6: as nearest
            kk = np.searchsorted(GRID[1:7], np.where(on, a, 0), side="right")  # a in [G[kk], G[kk+1])
            f = (a - GRID[kk]) / (GRID[kk + 1] - GRID[kk])
            u = np.floor(256 * np.where(on, f, 0))
            idx = np.uint64(index0) + np.arange(rows * cols, dtype=np.uint64).reshape(rows, cols)
            up = u > splitmix_bytes(sr_seed, idx)
            mag = np.where(up, GRID[np.minimum(kk + 1, 7)], GRID[kk])
            sgn = np.where(np.signbit(y), -1.0, 1.0)
            vals = np.where(on, (sgn * mag).astype(np.float32), vals)
        return (vals * np.repeat(dq, 16, axis=1)[:, :cols]).astype(np.float32)


_H16 = np.array([[(-1) ** bin(i & j).count("1") for j in range(16)] for i in range(16)],
                np.float64)
RHT_SIGNS = np.array([-1.0 if (0xD7E8 >> i) & 1 else 1.0 for i in range(16)])
RHT = np.diag(RHT_SIGNS) @ _H16 * 0.25      # a run of 16 (a row vector) times RHT


def rht_rows(t):
    """TE's random Hadamard transform of each row's runs of 16 (cols a multiple of 16), in
    double, rounded to BF16 (as float32)."""
    t = np.asarray(t, np.float32)
    r = t.astype(np.float64).reshape(-1, 16) @ RHT
    return r.astype(ml_dtypes.bfloat16).astype(np.float32).reshape(t.shape)


def rht_rows_back(t):
    """The inverse (RHT is orthogonal: its transpose), in double, rounded once to float32."""
    t = np.asarray(t, np.float32)
    return (t.astype(np.float64).reshape(-1, 16) @ RHT.T).astype(np.float32).reshape(t.shape)
