#!/usr/bin/env python3
"""Self-test of the Python reference (tools/reference/fp8ref.py): the block kinds (E8M0 and MX
exponents, MX blocks, pow2 row-wise scales) by hand and against a plain loop, and the GEMM
errors by hand, sampled and in every orientation.

Run: python3 tests/tools/reference/test_ref_blocks.py (needs numpy and ml_dtypes: without them
exit 77, skipped, or exit 1 when FP8LAB_REQUIRE_PYDEPS=1 is set, as .ci/run does)
Prints one line per failure and a final "N passed, M failed"; exits 1 on any failure.
"""
import math
import sys

from ref_common import F32, R, bits, eq32, main, np, test  # noqa: E402


# --------------------------------------------------------------------------------------------
# block recipes (mxfp8, block, rowwise) and GEMM errors
# --------------------------------------------------------------------------------------------


def u2f(b):
    return np.array([b], dtype=np.uint32).view(np.float32)[0]


@test
def e8m0_ceil_hand():
    cases = [(0x3F800000, 127), (0x3F800001, 128), (0x3FC00000, 128), (0x40000000, 128),
             (0xBFC00000, 128), (0x00000000, 0), (0x80000000, 0), (0x00000001, 0),
             (0x00400000, 0), (0x00400001, 1), (0x00124925, 0), (0x00492492, 1),
             (0x00800000, 1), (0x00800001, 2), (0x7F000000, 254), (0x7F000001, 254),
             (0x7F7FFFFF, 254), (0x7F800000, 254), (0xFF800000, 254), (0x7FC00000, 255),
             (0x7B124924, 247)]
    got = R.e8m0_ceil(np.array([u2f(b) for b, _ in cases], np.float32))
    for (b, want), g in zip(cases, got):
        assert g == want, (hex(b), g, want)
    # powers of two are not rounded up
    ks = np.arange(-127, 128)
    assert list(R.e8m0_ceil(np.ldexp(np.float32(1), ks).astype(np.float32))) == list(ks + 127)


@test
def mx_exponent_hand():
    for k in range(-100, 128):
        b = F32(2.0 ** k)
        for rnd in ("ceil", "floor"):
            assert R.mx_exponent(b, "e4m3", rnd) == k + 119, (k, rnd)
            assert R.mx_exponent(b, "e5m2", rnd) == k + 112, (k, rnd)
    me = lambda b, f, r: int(R.mx_exponent(F32(b), f, r))  # noqa: E731
    assert me(448, "e4m3", "ceil") == 127 and me(448, "e4m3", "floor") == 127
    assert me(57344, "e5m2", "ceil") == 127 and me(57344, "e5m2", "floor") == 127
    assert me(480, "e4m3", "ceil") == 128 and me(480, "e4m3", "floor") == 127
    assert me(255, "e4m3", "ceil") == 127 and me(255, "e4m3", "floor") == 126
    fmax = np.finfo(np.float32).max
    assert (me(fmax, "e4m3", "ceil"), me(fmax, "e4m3", "floor")) == (247, 246)
    assert (me(fmax, "e5m2", "ceil"), me(fmax, "e5m2", "floor")) == (240, 239)
    assert me(2.0 ** -120, "e4m3", "ceil") == 0 and me(2.0 ** -119, "e4m3", "ceil") == 0
    assert me(2.0 ** -118, "e4m3", "ceil") == 1 and me(2.0 ** -118, "e4m3", "floor") == 1
    for f in ("e4m3", "e5m2"):
        for r in ("ceil", "floor"):
            assert (me(0, f, r), me(np.inf, f, r), me(np.nan, f, r), me(1e-45, f, r)) == \
                (0, 254, 255, 0)
    s = R.e8m0_scale(np.array([127, 0, 1, 253, 254, 255]))
    assert [bits(v) for v in s] == [0x3F800000, 0x7F000000, 0x7E800000, 0x00800000,
                                    0x00400000, 0x00200000]
    with np.errstate(over="ignore"):
        assert np.isinf(F32(1) / s[5]) and (F32(1) / s[4]) == F32(2.0 ** 127)


@test
def current_scales_match_scalar():
    rng = np.random.default_rng(3)
    a = np.concatenate([(rng.uniform(0, 1, 3000) * np.exp2(rng.uniform(-140, 128, 3000))),
                        [0.0, np.inf, np.nan, 1e-45, 3.0, 448.0]]).astype(np.float32)
    for fmt in ("e4m3", "e5m2"):
        for eps, pow2, m in ((0.0, False, 0), (0.0, True, 0), (F32(1e-3), True, 2),
                             (F32(1e-30), False, -3)):
            vec = R.current_scales(a, fmt, eps, pow2, m)
            for ai, v in zip(a, vec):
                assert eq32(v, R.current_scale(ai, fmt, eps, pow2, m)), (fmt, ai, v)


@test
def mx_block_hand():
    x = np.array([448, -1, 0.5, 2, 896, 3, -5, 7, 0, -0.0, 0, 0, 480, 1, np.nan, -2,
                  np.inf, 3], np.float32)
    r = R.BlockRecipe("mxfp8", "e4m3", block_len=4).quantize(x)
    assert [float(s) for s in r["scales"].ravel()] == [1.0, 0.5, 2.0 ** 127, 0.5, 2.0 ** -127]
    want = np.array([448, -1, 0.5, 2, 896, 3, -5, 7, 0, -0.0, 0, 0, 480, 1, np.nan, -2,
                     np.inf, 0], np.float32)
    assert np.array_equal(r["xhat"].ravel().view(np.uint32)[~np.isnan(want)],
                          want.view(np.uint32)[~np.isnan(want)])
    assert (r["n"], r["nonfinite"], r["zeros"], r["overflow"], r["underflow"]) == (18, 2, 4, 0, 1)
    assert math.isclose(r["mse"], 9.0 / 16, rel_tol=1e-15)
    assert (r["nblocks"], r["blocks_with_overflow"], r["nblocks_scaled"]) == (5, 0, 3)
    assert (r["log2_scale_min"], r["log2_scale_max"]) == (-1.0, 0.0)
    assert math.isclose(r["log2_scale_std"], math.sqrt(2) / 3, rel_tol=1e-14)
    r = R.BlockRecipe("mxfp8", "e4m3", rounding="floor", block_len=4).quantize(x)
    assert [float(s) for s in r["scales"].ravel()][:4] == [1.0, 0.5, 2.0 ** 127, 1.0]
    assert r["xhat"][0, 12] == 448 and r["overflow"] == 1 and r["blocks_with_overflow"] == 1
    # saturation: 2^-120 blocks exact at scale 2^127, 2^-149 flushes; FLT_MAX: inf xhat (ceil)
    x = np.concatenate([np.full(32, 2.0 ** -120), np.full(32, 2.0 ** -149)]).astype(np.float32)
    r = R.BlockRecipe("mxfp8", "e4m3").quantize(x)
    assert list(r["scales"].ravel()) == [2.0 ** 127, 2.0 ** 127]
    assert np.array_equal(r["xhat"].ravel()[:32], x[:32]) and r["underflow"] == 32
    x = np.full(32, 1e30, np.float32)
    x[5] = np.finfo(np.float32).max
    r = R.BlockRecipe("mxfp8", "e4m3").quantize(x)
    assert r["scales"][0, 0] == F32(2.0 ** -120) and np.isinf(r["xhat"][0, 5])
    r = R.BlockRecipe("mxfp8", "e4m3", rounding="floor").quantize(x)
    assert r["xhat"][0, 5] == F32(448 * 2.0 ** 119) and r["overflow"] == 1


@test
def block_pow2_rowwise_hand():
    x = np.array([3, 1, -2, 0.5, 100, -50, 25, 1, 0, 0, 0, 0, np.inf, 1], np.float32)
    r = R.BlockRecipe("block", "e4m3", block="1x128", block_len=4).quantize(x)
    assert [float(s) for s in r["scales"].ravel()] == [128.0, 4.0, 1.0, 1.0]
    assert (r["nblocks_scaled"], r["log2_scale_min"], r["log2_scale_max"],
            r["log2_scale_std"]) == (2, 2.0, 7.0, 2.5)
    r = R.BlockRecipe("block", "e4m3", block="1x128", block_len=4, pow2=False, margin=1,
                      amax_epsilon=F32(1e-3)).quantize(x)
    assert eq32(r["scales"][0, 0], F32(224) / F32(3))
    assert eq32(r["scales"][0, 2], F32(224) / F32(1e-3)) and r["nblocks_scaled"] == 2
    x = np.array([[1, -448], [0, 0], [7, 2]], np.float32)
    rw = R.BlockRecipe("rowwise", "e4m3")
    assert list(rw.quantize(x)["scales"].ravel()) == [1.0, 1.0, 64.0]
    r = rw.quantize(x, colwise=True)
    assert list(r["scales"].ravel()) == [64.0, 1.0] and np.array_equal(r["xhat"], x)
    # shapes: n-D viewed as [prod(leading), last]; grids with partial blocks
    assert R.as_matrix(np.zeros((2, 3, 4))).shape == (6, 4)
    assert R.as_matrix(np.zeros(5)).shape == (1, 5) and R.as_matrix(np.float32(2)).shape == (1, 1)
    assert R.BlockRecipe("mxfp8", "e4m3").quantize(np.ones((3, 70)))["scales"].shape == (3, 3)
    assert R.BlockRecipe("mxfp8", "e4m3").quantize(np.ones((70, 3)), colwise=True)[
        "scales"].shape == (3, 3)
    b = R.BlockRecipe("block", "hybrid")
    assert b.quantize(np.ones((200, 130)), "weight")["scales"].shape == (2, 2)
    assert b.quantize(np.ones((200, 130)), "weight", colwise=True)["scales"].shape == (2, 2)
    assert b.quantize(np.ones((5, 300)), "input")["scales"].shape == (5, 3)
    e = R.BlockRecipe("mxfp8", "e5m2").quantize(np.zeros((0, 5), np.float32))
    assert e["nblocks"] == 0 and math.isnan(e["log2_scale_std"])
    try:
        R.BlockRecipe("mxfp8", "e4m3", margin=1)
        raise AssertionError("mxfp8 with a margin accepted")
    except ValueError:
        pass


def plain_block_quantize(x, rec, fmt, colwise, square):
    """The reference's block quantizer re-derived with explicit index sets, block by block,
    scales from the scalar definitions (brute-force E8M0 search, current_scale)."""
    rows, cols = x.shape
    L = rec.block_len
    if rec.kind == "rowwise":
        sets = ([[(i, j) for j in range(cols)] for i in range(rows)] if not colwise else
                [[(i, j) for i in range(rows)] for j in range(cols)])
    elif square:
        sets = [[(i, j) for i in range(a, min(a + L, rows)) for j in range(b, min(b + L, cols))]
                for a in range(0, rows, L) for b in range(0, cols, L)]
    elif not colwise:
        sets = [[(i, j) for j in range(b, min(b + L, cols))] for i in range(rows)
                for b in range(0, cols, L)]
    else:
        sets = [[(i, j) for i in range(a, min(a + L, rows))] for a in range(0, rows, L)
                for j in range(cols)]
    sets = [s for s in sets if s]
    f = R.get_fmt(fmt)
    xhat = np.zeros_like(x)
    scales, ovf_blocks, l2 = [], 0, []
    for s in sets:
        ii = np.array([p[0] for p in s])
        jj = np.array([p[1] for p in s])
        v = x[ii, jj]
        amax = F32(0)
        for e in v:
            if not np.isnan(e) and abs(e) > amax:
                amax = F32(abs(e))
        if rec.kind == "mxfp8":
            if rec.rounding == "ceil":
                t = abs(float(F32(amax * (F32(1) / f.max))))
                e = 254 if math.isinf(t) else next(
                    (k for k in range(255) if 2.0 ** (k - 127) >= t), 254)
            else:
                e = 0 if amax == 0 else 254 if np.isinf(amax) else \
                    min(254, max(0, math.floor(math.log2(float(amax))) - R._EMAX[fmt] + 127))
            sc = F32(2.0 ** (127 - e))
        else:
            sc = R.current_scale(amax, fmt, rec.amax_epsilon, rec.pow2, rec.margin)
        scales.append(sc)
        with np.errstate(all="ignore"):
            y = v * sc
            xhat[ii, jj] = R.decode(R.encode(y, fmt), fmt) * (F32(1) / sc)
            ovf_blocks += bool(np.any(np.isfinite(v) & (np.abs(y) > f.max)))
        if np.isfinite(amax) and amax > 0:
            l2.append(math.log2(float(sc)))
    return xhat, sorted(scales), ovf_blocks, l2


@test
def block_recipes_vs_plain_loop():
    rng = np.random.default_rng(11)
    for rows, cols in ((1, 1), (3, 70), (33, 65), (130, 129), (5, 300), (257, 9)):
        x = (rng.standard_normal((rows, cols)) *
             np.exp2(rng.uniform(-20, 20, (rows, 1)))).astype(np.float32)
        x[:, ::37] *= 64
        if x.size > 4:
            x.flat[0:3] = 0
            x.flat[x.size // 2] = np.nan
            x.flat[x.size // 3] = -np.inf
            x.flat[-1] = 2.0 ** -140
        for fmt in ("e4m3", "e5m2"):
            recs = [R.BlockRecipe("mxfp8", fmt), R.BlockRecipe("mxfp8", fmt, rounding="floor"),
                    R.BlockRecipe("block", fmt, block="1x128"),
                    R.BlockRecipe("block", fmt, block="128x128"),
                    R.BlockRecipe("block", fmt, block="1x128", pow2=False, margin=1,
                                  amax_epsilon=F32(1e-30)),
                    R.BlockRecipe("rowwise", fmt), R.BlockRecipe("rowwise", fmt, pow2=False)]
            for rec in recs:
                for colwise in (False, True):
                    got = rec.quantize(x, "input", colwise)
                    xh, sc, ob, l2 = plain_block_quantize(x, rec, fmt, colwise,
                                                          rec.square("input"))
                    what = (rows, cols, fmt, rec.kind, rec.block, rec.rounding, colwise)
                    assert np.array_equal(got["xhat"], xh, equal_nan=True), what
                    assert sorted(got["scales"].ravel()) == sc, what
                    assert got["nblocks"] == len(sc) and got["blocks_with_overflow"] == ob, what
                    assert got["nblocks_scaled"] == len(l2), what
                    if l2:
                        assert got["log2_scale_min"] == min(l2) and \
                            got["log2_scale_max"] == max(l2), what
                        assert abs(got["log2_scale_std"] - float(np.std(l2))) < 1e-12, what
                    st = R.quantize_stats(x, 1, fmt)  # n etc. do not depend on the scale
                    assert (got["n"], got["nonfinite"], got["zeros"]) == \
                        (st["n"], st["nonfinite"], st["zeros"]), what
    # a 128x128 block is the same block in both directions; colwise = rowwise of x^T
    x = rng.standard_normal((200, 300)).astype(np.float32) * 10
    b = R.BlockRecipe("block", "e4m3", block="128x128")
    r1, r2 = b.quantize(x, "input"), b.quantize(x, "input", colwise=True)
    assert np.array_equal(r1["xhat"], r2["xhat"]) and r1["mse"] == r2["mse"]
    m = R.BlockRecipe("mxfp8", "e4m3")
    assert np.array_equal(m.quantize(x, colwise=True)["xhat"], m.quantize(x.T)["xhat"].T)
    # n-D tensors are quantized as their [prod(leading), last] view
    x3 = rng.standard_normal((4, 5, 70)).astype(np.float32)
    assert np.array_equal(m.quantize(x3)["xhat"], m.quantize(x3.reshape(20, 70))["xhat"])


@test
def gemm_hand_identity():
    x = np.array([[3, 0], [0, 4]], np.float32)
    w = np.eye(2, dtype=np.float32)
    dy = np.array([[1, 2], [2, 1]], np.float32)
    ref = R.gemm_reference(x, w, dy)
    assert np.array_equal(ref["wgrad"], [[3, 8], [6, 4]])

    class Fixed:   # hands out fixed "dequantized" operands
        def __init__(self, d):
            self.d = d

        def quantize(self, t, role, colwise=False):
            return dict(xhat=self.d[role])
    xq = np.array([[3.5, 0], [0, 4]], np.float32)
    wq = np.diag([1, 1.25]).astype(np.float32)
    e = R.gemm_errors(x, w, dy, Fixed({"input": xq, "weight": w, "grad_output": dy}), ref=ref)
    assert abs(e["fprop"] - 0.1) < 1e-16 and e["dgrad"] == 0
    assert abs(e["wgrad"] - math.sqrt(1.25 / 125)) < 1e-15
    e = R.gemm_errors(x, w, dy, Fixed({"input": x, "weight": wq, "grad_output": dy}))
    assert abs(e["dgrad"] - math.sqrt(0.3125 / 10)) < 1e-15 and e["wgrad"] == 0
    # a per-tensor recipe: 1.0625 ties to 1.0 in E4M3 at scale 1
    x = np.array([[1.0625, 3]], np.float32)
    e = R.gemm_errors(x, np.eye(2, dtype=np.float32), None,
                      R.TensorRecipe("e4m3", {"input": 1, "weight": 1}))
    assert abs(e["fprop"] - 0.0625 / math.sqrt(1.0625 ** 2 + 9)) < 1e-16
    assert math.isnan(e["dgrad"]) and math.isnan(e["wgrad"])
    assert R.rel_error(np.zeros(3), np.zeros(3)) == 0
    assert R.rel_error(np.ones(3), np.zeros(3)) == math.inf


@test
def gemm_sampling_and_orientation():
    assert list(R.sample_tokens(10, 4)) == [0, 2, 5, 7]
    assert list(R.sample_tokens(5, 5)) == list(range(5)) and len(R.sample_tokens(5, 0)) == 5
    rng = np.random.default_rng(5)
    T, n_in, n_out = 96, 80, 48
    x = rng.uniform(-1, 1, (T, n_in)).astype(np.float32)
    x[:, 7] *= 300
    # weight rows over 15 octaves: with power-of-two scales only the subnormal range (and
    # saturation) tells a block's placement, so column-wise blocks must span rows this far apart
    w = (rng.uniform(-1, 1, (n_out, n_in)) * 0.05 *
         (2.0 ** (3 * (np.arange(n_out) % 6)))[:, None]).astype(np.float32)
    dy = rng.uniform(-1, 1, (T, n_out)).astype(np.float32) * 1e-4
    dy[5] *= 1000
    ref = R.gemm_reference(x, w, dy, 40)
    tok = R.sample_tokens(T, 40)
    assert np.allclose(ref["fprop"], x[tok].astype(np.float64) @ w.T.astype(np.float64),
                       rtol=1e-13, atol=0)
    rec = R.BlockRecipe("mxfp8", "hybrid")
    e = R.gemm_errors(x, w, dy, rec, 40, ref)
    for g in R.GEMMS:
        assert 1e-3 < e[g] < 0.2, e
    # by hand from the orientations: dgrad's weight column-wise
    wq = rec.quantize(w, "weight", colwise=True)["xhat"]
    gq = rec.quantize(dy, "grad_output")["xhat"][tok]
    y = gq @ wq
    assert abs(R.rel_error(y, ref["dgrad"]) - e["dgrad"]) < 1e-6 * e["dgrad"]
    wrong = rec.quantize(w, "weight")["xhat"]
    assert R.rel_error(gq @ wrong, ref["dgrad"]) != e["dgrad"]
    # original operands as the "quantized" ones: only float32 rounding remains
    class Identity:
        def quantize(self, t, role, colwise=False):
            return dict(xhat=R.as_matrix(t))
    e0 = R.gemm_errors(x, w, dy, Identity(), 40, ref)
    assert all(v < 1e-6 for v in e0.values()), e0


if __name__ == "__main__":
    sys.exit(main())
