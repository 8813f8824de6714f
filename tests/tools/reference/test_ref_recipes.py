#!/usr/bin/env python3
"""Self-test of the Python reference (tools/reference/fp8ref.py): delayed scaling by hand and
against its closed form, current scaling, the statistics of hand-made tensors (clipped,
overshoot, cosine similarity).

Run: python3 tests/tools/reference/test_ref_recipes.py (needs numpy and ml_dtypes: without them
exit 77, skipped, or exit 1 when FP8LAB_REQUIRE_PYDEPS=1 is set, as .ci/run does)
Prints one line per failure and a final "N passed, M failed"; exits 1 on any failure.
"""
import math
import sys

from ref_common import F32, R, eq32, main, np, test  # noqa: E402


# --------------------------------------------------------------------------------------------
# delayed scaling
# --------------------------------------------------------------------------------------------


def run_delayed(amaxes, **kw):
    st = R.DelayedState(kw.pop("fmt", "e4m3"), **kw)
    used = []
    for a in amaxes:
        used.append(st.scale)
        st.update(F32(a))
    return used, st.scale


@test
def delayed_hand_sequence_L2():
    tiny = 1e-40
    used, final = run_delayed([2, 4, 1, 0, 0.5, np.inf, 3, tiny, tiny], history_len=2)
    want = [1.0, 224.0, 112.0, 112.0, 112.0,
            448.0,      # window (1, 0.5): the 0 at step 3 was skipped
            448.0,      # inf amax: scale kept
            448.0,      # window (inf, 3): still inf -> kept
            float(F32(448) / F32(3))]   # window (3, tiny) -> 3
    assert [float(u) for u in used] == want, used
    assert final == np.finfo(np.float32).max     # window (tiny, tiny): 448/1e-40 -> FLT_MAX
    assert eq32(used[8], F32(149.333328))


@test
def delayed_L1_margin_and_most_recent():
    used, _ = run_delayed([2, 4, 1], history_len=1, margin=2)          # scaled_max 112
    assert [float(u) for u in used] == [1.0, 56.0, 28.0]
    used, _ = run_delayed([2, 4, 1], history_len=1, margin=-1)         # scaled_max 896
    assert [float(u) for u in used] == [1.0, 448.0, 224.0]
    used, fin = run_delayed([2, np.inf, 8, 0, 1], history_len=1024, amax_compute="most_recent")
    assert [float(u) for u in used] == [1.0, 224.0, 224.0, 56.0, 56.0] and fin == 448
    used, fin = run_delayed([2, np.inf, 8, 0, 1], history_len=1024)    # max: inf blocks updates
    assert [float(u) for u in used] == [1.0, 224.0, 224.0, 224.0, 224.0] and fin == 224
    used, fin = run_delayed([1, 2], fmt="e5m2", history_len=3)
    assert [float(u) for u in used] == [1.0, 57344.0] and fin == 28672.0
    # scaled_max rounding with a margin: 448 * 2^-m stays exact; 2^-(m) with m large -> tiny
    assert R.scaled_max("e4m3", 3) == 56.0 and R.scaled_max("e5m2", -2) == 229376.0


@test
def delayed_window_L5():
    seq = [1, 2, 3, 4, 5, 0, 0, 0.5, 0.25, 0.125, 0.0625, 0.03125]
    used, fin = run_delayed(seq, history_len=5)
    q = lambda a: float(F32(448) / F32(a))
    # scale used = 448 / max of the 5 most recent non-zero amaxes before the step
    assert [float(u) for u in used] == [1.0, q(1), q(2), q(3), q(4), q(5), q(5), q(5),
                                        q(5),   # window 2,3,4,5,.5
                                        q(5),   # window 3,4,5,.5,.25
                                        q(5),   # window 4,5,.5,.25,.125
                                        q(5)], used   # window 5,.5,.25,.125,.0625
    assert float(fin) == 896.0                  # window .5,.25,.125,.0625,.03125
    used, _ = run_delayed(seq, history_len=4)
    assert float(used[10]) == q(5) and float(used[11]) == 896.0


@test
def delayed_moe_zero_steps_fused_and_unfused():
    """Issue 40: an expert without tokens (amax 0). Fused (TE's default): history and scale
    kept. Unfused (NVTE_UNFUSED_FP8_UPDATE=1, unfused_update = true): the 0 is rolled in and
    the scale recomputed from the window, kept where its max is 0. Scales used at each step."""
    seq = [2, 0, 0, 8, 0, 3, 0, 0, 0]
    s3 = float(F32(448) / F32(3))                      # 149.333328
    for L in (2, 4):
        used, fin = run_delayed(seq, history_len=L)
        assert [float(u) for u in used] == [1, 224, 224, 224, 56, 56, 56, 56, 56] and fin == 56
    used, fin = run_delayed(seq, history_len=2, unfused=True)
    # windows after each step: {0,2} {2,0} {0,0}: kept {0,8} {8,0} {0,3} {3,0} {0,0}: kept
    assert [float(u) for u in used] == [1, 224, 224, 224, 56, 56, s3, s3, s3] and fin == s3
    used, fin = run_delayed(seq, history_len=4, unfused=True)
    # {0,0,0,2} {0,0,2,0} {0,2,0,0} {2,0,0,8} {0,0,8,0} {0,8,0,3} {8,0,3,0} {0,3,0,0}
    assert [float(u) for u in used] == [1, 224, 224, 224, 56, 56, 56, 56, s3] and fin == s3
    # most_recent: a 0 keeps the scale under both rules
    for unf in (False, True):
        _, fin = run_delayed(seq, history_len=4, amax_compute="most_recent", unfused=unf)
        assert fin == s3
    # torch.max propagates NaN: the scale is kept while the NaN is in the window (L = 2: two
    # steps), where the fused kernel's fmaxf ignores it
    used, _ = run_delayed([2, np.nan, 4, 1, 1], history_len=2, unfused=True)
    assert [float(u) for u in used] == [1, 224, 224, 224, 112], used
    used, _ = run_delayed([2, np.nan, 4, 1, 1], history_len=2)
    assert [float(u) for u in used] == [1, 224, 224, 112, 112], used
    # _default_sf_compute's two roundings: 448 / 1e-38 overflows (inf -> FLT_MAX) before the
    # division by 2^8, where the fused scaled_max 1.75 / 1e-38 = 1.75e38 is finite
    _, fin = run_delayed([1e-38], history_len=1, margin=8, unfused=True)
    assert fin == np.finfo(np.float32).max
    _, fin = run_delayed([1e-38], history_len=1, margin=8)
    assert fin == F32(1.75) / F32(1e-38) and np.isfinite(fin)


@test
def delayed_matches_closed_form():
    """scale used at t = scaled_max / max(a_{t-L}..a_{t-1}) over the non-zero amaxes."""
    rng = np.random.default_rng(3)
    for trial in range(300):
        L = int(rng.choice([1, 2, 3, 5, 16]))
        m = int(rng.integers(-2, 4))
        n = int(rng.integers(1, 40))
        seq = np.exp2(rng.uniform(-30, 30, n)).astype(np.float32)
        seq[rng.random(n) < 0.3] = 0
        used, _ = run_delayed(seq, history_len=L, margin=m)
        nz = []
        for t in range(n):
            if nz:
                a = max(nz[-L:])
                s = F32(R.scaled_max("e4m3", m) / F32(a))
                want = np.finfo(np.float32).max if np.isinf(s) else s
            else:
                want = F32(1)
            assert eq32(used[t], want), (trial, t, used[t], want)
            if seq[t] != 0:
                nz.append(seq[t])

# --------------------------------------------------------------------------------------------
# current scaling
# --------------------------------------------------------------------------------------------


@test
def current_scaling():
    cs = R.current_scale
    assert eq32(cs(3, "e4m3"), F32(448) / F32(3))
    assert cs(3, "e4m3", pow2=True) == 128
    assert cs(448, "e4m3", pow2=True) == 1
    assert cs(449, "e4m3", pow2=True) == 0.5
    assert cs(1, "e5m2", pow2=True) == 32768
    assert cs(0, "e4m3") == 1 and cs(np.inf, "e4m3") == 1 and cs(np.nan, "e4m3") == 1
    assert cs(0, "e4m3", pow2=True) == 1
    assert cs(1e-40, "e4m3") == np.finfo(np.float32).max
    assert cs(1e-40, "e4m3", pow2=True) == 2.0 ** 127
    # epsilon: a = max(a, eps), eps as float32; 448 / float32(1e-3) rounds below 448000
    s = cs(1e-5, "e4m3", amax_epsilon=R.parse_f32("1e-3"))
    assert eq32(s, F32(448) / F32(1e-3)) and float(s) == 447999.96875, float(s)
    assert cs(0, "e4m3", amax_epsilon=F32(1e-3)) == s          # eps also lifts a zero amax
    assert eq32(cs(2, "e4m3", amax_epsilon=F32(1e-3)), F32(224))
    # margin extension: RN32(RN32(448 * 2^-1) / a)
    assert eq32(cs(3, "e4m3", margin=1), F32(224) / F32(3))
    assert eq32(cs(1e-5, "e4m3", amax_epsilon=F32(1e-3), margin=1), F32(224) / F32(1e-3))

# --------------------------------------------------------------------------------------------
# statistics
# --------------------------------------------------------------------------------------------


def hand_tensor():
    return np.array([0.0, -0.0, 1.0625, 500.0, -1000.0, 2.0 ** -10, 3 * 2.0 ** -10, 2.0 ** -12,
                     np.inf, np.nan, 0.5], dtype=np.float32)


@test
def stats_hand_tensor_scale1():
    st = R.quantize_stats(hand_tensor(), F32(1), "e4m3")
    assert st["n"] == 11 and st["nonfinite"] == 2 and st["zeros"] == 2
    assert st["overflow"] == 2, st            # 500 and -1000 saturate
    assert st["underflow"] == 2, st           # 2^-10 (tie to 0) and 2^-12
    assert st["subnormal"] == 1, st           # 3 * 2^-10 -> 2^-8
    err = [0.0625, 52.0, 552.0, 2.0 ** -10, 2.0 ** -10, 2.0 ** -12]
    esum = sum(e * e for e in err)
    xsum = 1.0625 ** 2 + 500.0 ** 2 + 1000.0 ** 2 + 2.0 ** -20 + 9 * 2.0 ** -20 + 2.0 ** -24 + 0.25
    assert math.isclose(st["mse"], esum / 9, rel_tol=1e-15), st
    assert math.isclose(st["snr_db"], 10 * math.log10(xsum / esum), rel_tol=1e-15), st


@test
def stats_hand_tensor_scale_quarter_e5m2():
    # scale 0.25: y = x/4; scale_inv = 4. e5m2: 500/4 = 125 -> 128 (e5m2 has 2 mantissa bits:
    # 112, 128: 125 -> 128), -1000/4 = -250 -> -256, 1.0625/4 = 0.265625 -> 0.25,
    # 2^-12 -> 2^-14 (normal min), 3*2^-10/4 = 3*2^-12 -> 3*2^-12 (exact),
    # 2^-10/4 = 2^-12 exact, 0.5/4 = 0.125 exact
    st = R.quantize_stats(hand_tensor(), F32(0.25), "e5m2")
    assert (st["overflow"], st["underflow"], st["subnormal"]) == (0, 0, 0), st
    err = [1.0625 - 1.0, 500.0 - 512.0, -1000.0 + 1024.0]
    esum = sum(e * e for e in err)
    assert math.isclose(st["mse"], esum / 9, rel_tol=1e-15), st
    # tiny values to e5m2 subnormals: scale 2^-6 -> 2^-12 * 2^-6 = 2^-18 -> underflow (0),
    # 3*2^-10 * 2^-6 = 3 * 2^-16 -> subnormal 3*2^-16 exact
    st = R.quantize_stats(np.array([2.0 ** -12, 3 * 2.0 ** -10], np.float32), F32(2.0 ** -6),
                          "e5m2")
    assert (st["underflow"], st["subnormal"], st["zeros"]) == (1, 1, 0), st
    assert math.isclose(st["mse"], (2.0 ** -12) ** 2 / 2, rel_tol=1e-15)


@test
def stats_corner_tensors():
    st = R.quantize_stats(np.zeros((0,), np.float32), F32(3), "e4m3")
    assert st["n"] == 0 and math.isnan(st["mse"]) and st["snr_db"] == math.inf
    st = R.quantize_stats(np.array([1.0, -2.0, 0.0], np.float32), F32(1), "e4m3")
    assert st["mse"] == 0 and st["snr_db"] == math.inf and st["zeros"] == 1
    st = R.quantize_stats(np.array([np.nan, np.inf], np.float32), F32(1), "e4m3")
    assert st["nonfinite"] == 2 and math.isnan(st["mse"]) and st["overflow"] == 0
    # x * s overflows float32 to inf: still an overflow of a finite x
    st = R.quantize_stats(np.array([1e30], np.float32), np.finfo(np.float32).max, "e4m3")
    assert st["overflow"] == 1
    # scale_inv = RN32(1/s): with s = 3, xhat = decode(q) * float32(1/3)
    x = np.array([1.0], np.float32)
    st = R.quantize_stats(x, F32(3), "e4m3")
    xhat = float(F32(F32(3.0) * (F32(1) / F32(3))))
    assert math.isclose(st["mse"], (1.0 - xhat) ** 2, rel_tol=1e-15), (st, xhat)

@test
def clipped_hand_and_thresholds():
    """clipped (RECIPES.md): |RN32(x s)| rounded with the format's mantissa and an unbounded
    exponent lies above the max; that is E4M3 |y| > 464 (464 ties to 448), E5M2 |y| >= 61440
    (61440 ties to 65536). Both readings, on every float32 near the thresholds and at random."""
    up, dn = (lambda v: np.nextafter(F32(v), F32(np.inf))), (lambda v: np.nextafter(F32(v), F32(0)))
    # E4M3 mantissa: 3 bits; 248 is the midpoint of 240 (1.111b) and 256 (even): a tie up
    e4 = [(448, 448), (460, 448), (464, 448), (up(464), 480), (472, 480), (480, 480),
          (up(240), 240), (dn(248), 240), (248, 256), (up(248), 256),
          (2.0 ** 100 * 1.9375, 2.0 ** 101), (2.0 ** 100 * 1.8125, 2.0 ** 100 * 1.75)]
    for v, want in e4:
        got = float(R.round_extended(np.array([v], np.float32), "e4m3")[0])
        assert got == float(F32(want)), (v, got, want)
    assert float(R.round_extended(np.array([464.0], np.float32), "e4m3")[0]) == 448.0
    assert float(R.round_extended(np.array([-61440.0], np.float32), "e5m2")[0]) == 65536.0
    assert float(R.round_extended(np.array([dn(61440)], np.float32), "e5m2")[0]) == 57344.0
    assert float(R.round_extended(np.array([np.finfo(np.float32).max], np.float32),
                                  "e4m3")[0]) == math.inf
    rng = np.random.default_rng(5)
    for fmt, thr, strict in (("e4m3", 464.0, True), ("e5m2", 61440.0, False)):
        t = F32(thr)
        near = [t]
        for _ in range(40):
            near.append(np.nextafter(near[-1], F32(np.inf)))
        v = t
        for _ in range(40):
            v = np.nextafter(v, F32(0))
            near.append(v)
        y = np.concatenate([np.array(near, np.float32),
                            (rng.uniform(0.5, 2.0, 20000) * thr).astype(np.float32),
                            np.array([np.inf, -np.inf, 0.0, 1e38], np.float32)])
        y = np.concatenate([y, -y])
        want = (np.abs(y) > t) if strict else (np.abs(y) >= t)
        assert np.array_equal(R.clipped_mask(y, fmt), want), fmt
    # through quantize_stats: y = RN32(x s); clipped <= overflow; non-finite x never counts
    x = np.array([232, 233, 224, 240, -300, np.inf, np.nan, 1e30, 0], np.float32)
    st = R.quantize_stats(x, F32(2), "e4m3")     # y: 464, 466, 448, 480, -600, ., ., inf, 0
    assert (st["overflow"], st["clipped"]) == (5, 4), st
    st = R.quantize_stats(np.array([30720, 30719, 28672, 1e9], np.float32), F32(2), "e5m2")
    assert (st["overflow"], st["clipped"]) == (3, 2), st   # 61440 clips, 61438 does not


@test
def overshoot_hand():
    assert R.overshoot(F32(448), F32(1), "e4m3") == 0.0
    assert R.overshoot(F32(896), F32(0.5), "e4m3") == 0.0
    assert R.overshoot(F32(2), F32(128), "e4m3") == math.log2(256.0 / 448.0)
    assert R.overshoot(F32(57344 * 2), F32(1), "e5m2") == 1.0
    assert R.overshoot(F32(0), F32(3), "e4m3") == -math.inf
    assert R.overshoot(F32(np.inf), F32(1), "e4m3") == math.inf
    # double arithmetic from the float32 operands: no float32 rounding of amax * scale
    a, sc = F32(3), F32(448) / F32(3)         # 149.333328: 3 * s = 447.999985 in double
    assert R.overshoot(a, sc, "e4m3") == math.log2(3.0 * float(sc) / 448.0) < 0
    assert float(a * sc) == 448.0                 # while RN32(3 * s) is the max itself
    # block kinds: the worst block
    q = R.BlockRecipe("rowwise", "e4m3", pow2=False).quantize(
        np.array([[1, 2], [0, 0], [3, 0]], np.float32), "input")
    assert math.isclose(q["overshoot"], 0.0, abs_tol=1e-12), q["overshoot"]
    q = R.BlockRecipe("mxfp8", "e4m3").quantize(np.zeros((2, 3), np.float32), "input")
    assert q["overshoot"] == -math.inf
    q = R.BlockRecipe("mxfp8", "e4m3", rounding="floor").quantize(
        np.array([500.0, 1.0], np.float32), "input")     # scale 1: log2(500/448)
    assert q["overshoot"] == math.log2(500.0 / 448.0), q["overshoot"]


@test
def cos_sim_hand():
    assert R.cos_sim(0.0, 0.0, 0.0) == 1.0
    assert R.cos_sim(1.0, 0.0, 1.0) == 0.0 and R.cos_sim(0.0, 2.0, 2.0) == 0.0
    assert R.cos_sim(1.0, 1.0, 4.0) == -1.0                  # xhat = -x
    assert R.cos_sim(1.0, 1.0, -1e-12) == 1.0                 # clamped
    assert R.cos_sim(2.0, 2.0, 4.0) == 0.0                   # orthogonal: (2 + 2 - 4) / 4
    assert math.isnan(R.cos_sim(1.0, math.inf, math.inf))
    # quantize_stats: the finite elements only; equal to the direct dot product when the
    # formula is well conditioned
    rng = np.random.default_rng(9)
    x = rng.normal(0, 1, 5000).astype(np.float32)
    x[[3, 7]] = [np.nan, np.inf]
    st = R.quantize_stats(x, F32(40), "e4m3")
    fin = np.isfinite(x)
    xhat = (R.decode(R.encode(x * F32(40), "e4m3"), "e4m3") * (F32(1) / F32(40)))[fin]
    xhat = xhat.astype(np.float64)
    xf = x[fin].astype(np.float64)
    direct = float(np.dot(xf, xhat) / (np.linalg.norm(xf) * np.linalg.norm(xhat)))
    assert abs(st["cos_sim"] - direct) < 1e-12 and 0.99 < st["cos_sim"] < 1, st["cos_sim"]
    assert st["cos_sim_tol"] < 1.01e-9
    st = R.quantize_stats(np.array([1.0, 2.0, 0.0], np.float32), F32(1), "e4m3")
    # exact: 10 / (2 sqrt(5) sqrt(5)), where sqrt(5)^2 rounds to 5 + 1 ulp in double
    assert abs(st["cos_sim"] - 1.0) < 1e-15 and st["sum_sq"] == st["sum_sq_hat"] == 5.0
    st = R.quantize_stats(np.array([2.0 ** -20, 0.0], np.float32), F32(1), "e4m3")
    assert st["cos_sim"] == 0.0                              # everything flushed to zero
    st = R.quantize_stats(np.array([0.0, np.nan], np.float32), F32(1), "e4m3")
    assert st["cos_sim"] == 1.0                              # both norms 0
    # the tolerance grows where the formula cancels (a saturated giant outlier)
    # (2n + 1) 2^-53 (2e18) / (2 1e9 448): 5e-8 for n = 101
    st = R.quantize_stats(np.array([1e9] + [1.0] * 100, np.float32), F32(1), "e4m3")
    assert 4e-8 < st["cos_sim_tol"] < 6e-8, st


if __name__ == "__main__":
    sys.exit(main())
