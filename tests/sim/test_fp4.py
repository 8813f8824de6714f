#!/usr/bin/env python3
"""fp8lab's FP4 quantizers (src/sim/fp4.h, issue 29) against an independent reference.

  - E2M1 on every BF16 bit pattern against ml_dtypes' float4_e2m1fn (round to nearest even,
    saturating at 6), NaN against TE's rule by hand (code 7: ml_dtypes gives -0), and a hand
    table of the ties and edges;
  - NVFP4 on every E4M3 block scale: 127 rows whose 1x16 block amax is 6 x each non-negative
    E4M3 value under a global amax of 2688 (per-tensor scale 1), so each row's scale is that
    value; codes, scale codes, dequantized values (bit for bit) and the statistics against
    tools/reference/fp4ref.py, a transcription of TransformerEngine's kernels;
  - NVFP4 on random matrices (shapes not multiples of 16, 1x16 and 16x16 blocks, a zero block,
    NaN and inf elements, a block whose E4M3 scale rounds to 0, global amax 0) and MXFP4 with
    both scale rules, the same way; block amaxes where the order of the block scale's products
    changes its E4M3 rounding; 4over6 (MAE and MSE, E4M3 maximum 256 and 448, 1x16 and 16x16)
    against the reference's transcription of TE's rule; the MXFP4 scale exponent by hand;
  - the random Hadamard transform against a dense matrix product (TE's sign vector) rounded to
    BF16; stochastic rounding's expectations: TE's 8-bit rule exactly, over all 256 random
    bytes, and the ideal rule ((y - a)(b - y)) against a Monte Carlo estimate.

Usage: test_fp4.py FP4_DUMP_BIN. Needs numpy and ml_dtypes >= 0.5 (exit 77 without them).
"""
import os
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import ml_dtypes
    ml_dtypes.float4_e2m1fn
except (ImportError, AttributeError) as e:
    print("skipped: %s (numpy and ml_dtypes >= 0.5)" % e)
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "reference"))
import fp4ref  # noqa: E402

BIN = os.path.abspath(sys.argv[1])
FAILS = []


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL:", what)


def e2m1_all(tmp):
    out = os.path.join(tmp, "e2m1.bin")
    subprocess.run([BIN, "e2m1", out], check=True)
    got = np.fromfile(out, np.uint8)
    x = (np.arange(65536, dtype=np.uint32) << 16).view(np.float32)
    want = fp4ref.e2m1_codes(x)
    bad = np.nonzero(got != want)[0]
    check(len(bad) == 0, "E2M1: %d of 65536 BF16 values differ, first %s: got %s want %s"
          % (len(bad), [hex(b) for b in bad[:4]], got[bad[:4]], want[bad[:4]]))
    nan = np.isnan(x)
    check(bool((got[nan] == 7).all()), "E2M1: NaN -> code 7 (+6)")
    # by hand: ties to the even code, saturation, the sign of zero
    hand = [(0.25, 0), (0.2500001, 1), (0.75, 2), (1.25, 2), (1.75, 4), (2.5, 4), (3.5, 6),
            (5.0, 6), (5.0000005, 7), (6.0, 7), (7.0, 7), (1e30, 7), (float("inf"), 7),
            (-0.0, 8), (-0.25, 8), (-6.5, 15), (0.0, 0)]
    for v, c in hand:
        b = struct.unpack("<I", struct.pack("<f", v))[0] >> 16
        if struct.unpack("<f", struct.pack("<I", b << 16))[0] == np.float32(v):
            check(got[b] == c, "E2M1 by hand: %r -> %d, got %d" % (v, c, got[b]))
    print("e2m1: 65536 BF16 values as ml_dtypes, NaN -> +6")


def run_quant(tmp, mode, x, *args):
    rows, cols = x.shape
    fin, fout = os.path.join(tmp, "in.f32"), os.path.join(tmp, "out.bin")
    x.astype("<f4").tofile(fin)
    subprocess.run([BIN, mode, str(rows), str(cols)] + [str(a) for a in args] + [fin, fout],
                   check=True)
    b = open(fout, "rb").read()
    n, B = rows * cols, 16 if mode == "nvfp4" else 32
    nr = rows * ((cols + B - 1) // B)
    codes = np.frombuffer(b[:n], np.uint8).reshape(rows, cols)
    scales = np.frombuffer(b[n:n + nr], np.uint8).reshape(rows, -1) if nr else np.zeros((rows, 0), np.uint8)
    xhat = np.frombuffer(b[n + nr:n + nr + 4 * n], np.float32).reshape(rows, cols)
    cnt = struct.unpack("<7q", b[n + nr + 4 * n:n + nr + 4 * n + 56])
    sums = struct.unpack("<3d", b[n + nr + 4 * n + 56:])
    keys = ["n", "nonfinite", "zeros", "overflow", "underflow", "subnormal", "clipped"]
    st = dict(zip(keys, cnt))
    st["sum_sq_err"], st["sum_sq"] = sums[0], sums[1]
    return codes, scales, xhat, st


def compare(label, got, want, x):
    codes, scales, xhat, st = got
    wc, ws, wx, wy = want
    check(np.array_equal(codes, wc), "%s: codes differ at %s" % (label, np.argwhere(codes != wc)[:3].tolist()))
    check(np.array_equal(scales, ws), "%s: scales differ at %s: %s vs %s" % (
        label, np.argwhere(scales != ws)[:3].tolist(), scales[scales != ws][:3], ws[scales != ws][:3]))
    same = (xhat.view(np.uint32) == wx.view(np.uint32)) | (np.isnan(xhat) & np.isnan(wx))
    check(bool(same.all()), "%s: xhat differs at %s" % (label, np.argwhere(~same)[:3].tolist()))
    ws_ = fp4ref.stats(x, wc, wx, wy)
    for k in ("n", "nonfinite", "zeros", "overflow", "underflow", "subnormal", "clipped"):
        check(st[k] == ws_[k], "%s: %s %d, expected %d" % (label, k, st[k], ws_[k]))
    for k in ("sum_sq_err", "sum_sq"):
        check(abs(st[k] - ws_[k]) <= 1e-9 * max(1.0, abs(ws_[k])), "%s: %s %r vs %r" % (label, k, st[k], ws_[k]))


def every_e4m3_scale(tmp, rng):
    vals = np.arange(0, 0x7F, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float32)
    x = np.zeros((len(vals) + 1, 16), np.float32)
    for i, v in enumerate(vals):
        amax = np.float32(6) * v
        row = (rng.uniform(-1, 1, 16) * amax).astype(np.float32)
        row[rng.integers(16)] = amax if rng.random() < 0.5 else -amax
        x[i] = row
    x[-1, 0] = 2688  # the global amax: per-tensor scale 1
    got = run_quant(tmp, "nvfp4", x, 0, 2688, "max6", 448)
    want = fp4ref.nvfp4(x, False, 2688)
    check(np.array_equal(got[1][:-1, 0], np.arange(0, 0x7F, dtype=np.uint8)),
          "every E4M3 scale: row i's scale code is i")
    compare("every E4M3 scale", got, want, x)
    print("nvfp4: every E4M3 block scale 0x00..0x7e, bit for bit")


def scale_order(tmp, rng):
    """Block amaxes where TE's order, amax * (S_enc * RN32(1/6)), and another one,
    (amax * S_enc) / 6, give different E4M3 scales (found next to each E4M3 midpoint, a few
    float32 steps around it): the case that tells them apart."""
    F = np.float32
    g = F(1000.0)
    s_enc = F(F(2688) / g)
    k = F(s_enc * F(F(1) / F(6)))
    vals = np.arange(1, 0x7E, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float32)
    rows = []
    for lo, hi in zip(vals[:-1], vals[1:]):
        a0 = F(F((np.float64(lo) + np.float64(hi)) / 2) / k)
        for d in range(-40, 41):
            a = (a0.view(np.int32) + np.int32(d)).view(np.float32)
            if fp4ref.e4m3_rn_sat(F(a * k))[0] != fp4ref.e4m3_rn_sat(F(F(a * s_enc) / F(6)))[0]:
                row = (rng.uniform(-1, 1, 16) * a).astype(np.float32)
                row[0] = a
                rows.append(row)
                break
    check(len(rows) > 20, "scale order: %d cases found" % len(rows))
    rows.append(np.full(16, g, np.float32))  # the global amax
    x = np.array(rows, np.float32)
    compare("nvfp4 scale order", run_quant(tmp, "nvfp4", x, 0, repr(float(g)), "max6", 448),
            fp4ref.nvfp4(x, False, g), x)
    # 4over6 divides first: RN32(RN32(amax / 6) * S_enc), here against amax * RN32(S_enc / 6)
    s4 = F(F(256 * 6) / g)
    rows4 = []
    for lo, hi in zip(vals[:-1], vals[1:]):
        a0 = F(F(F((np.float64(lo) + np.float64(hi)) / 2) / s4) * F(6))
        for d in range(-40, 41):
            a = (a0.view(np.int32) + np.int32(d)).view(np.float32)
            te = fp4ref.e4m3_rn_sat(F(F(a / F(6)) * s4))[0]
            if te != fp4ref.e4m3_rn_sat(F(a * F(s4 / F(6))))[0] and a < g:
                row = np.full(16, a, np.float32)
                row[1:] *= rng.uniform(-1, 1, 15).astype(np.float32)
                rows4.append(row)
                break
    check(len(rows4) > 20, "4over6 scale order: %d cases found" % len(rows4))
    rows4.append(np.full(16, g, np.float32))
    x4 = np.array(rows4, np.float32)
    compare("nvfp4 4over6 scale order", run_quant(tmp, "nvfp4", x4, 0, repr(float(g)), "mae", 256),
            fp4ref.nvfp4(x4, False, g, 256, "mae"), x4)
    print("nvfp4: %d (max6) and %d (4over6) block amaxes where the order of the scale's products "
          "matters" % (len(rows) - 1, len(rows4) - 1))


def random_cases(tmp, rng):
    picked4 = 0
    for k, (rows, cols, square) in enumerate(((5, 40, 0), (37, 50, 1), (16, 16, 1), (3, 7, 0),
                                              (33, 64, 1), (1, 1, 0))):
        x = (rng.standard_normal((rows, cols)) * np.exp(rng.uniform(-8, 8, (rows, 1)))).astype(np.float32)
        if rows * cols > 20:
            x[0, :min(16, cols)] = 0                       # a zero block
            x[-1, -1] = np.nan
            x[rows // 2, 0] = np.inf if k % 2 else -np.inf
        amax = np.float32(np.nanmax(np.abs(np.where(np.isinf(x), 0, x))))
        for g in (amax, amax * np.float32(3e6), np.float32(0)):
            # a global amax far above the block's makes its E4M3 scale round to 0 (codes +-6)
            compare("nvfp4 %dx%d square=%d amax=%g" % (rows, cols, square, g),
                    run_quant(tmp, "nvfp4", x, square, repr(float(g)), "max6", 448),
                    fp4ref.nvfp4(x, bool(square), g), x)
        fin = np.where(np.isfinite(x), x, 0).astype(np.float32)  # 4over6: finite tensors
        for rule, m in (("mae", 256), ("mse", 256), ("mae", 448)):
            got = run_quant(tmp, "nvfp4", fin, square, repr(float(amax)), rule, m)
            compare("nvfp4 4over6 %s e4m3_max %d %dx%d square=%d" % (rule, m, rows, cols, square),
                    got, fp4ref.nvfp4(fin, bool(square), amax, m, rule), fin)
            plain = fp4ref.nvfp4(fin, bool(square), amax, m)[1]
            picked4 += int((got[1] != plain).sum())
        for r in ("ceil", "floor"):
            compare("mxfp4 %s %dx%d" % (r, rows, cols), run_quant(tmp, "mxfp4", x, r),
                    fp4ref.mxfp4(x, r), x)
    check(picked4 > 10, "4over6 picked the map-to-4 scale for %d runs (the cases test both)" % picked4)
    # the MXFP4 exponent by hand: ceil rounds amax/6 up to a power of two, floor is OCP's
    hand = {("ceil", 6.0): 127, ("ceil", 6.5): 128, ("ceil", 12.0): 128, ("ceil", 0.0): 0,
            ("floor", 6.0): 127, ("floor", 7.9): 127, ("floor", 8.0): 128, ("floor", 4.0): 127,
            ("floor", 3.99): 126, ("floor", 0.0): 0}
    for (r, a), e in hand.items():
        check(fp4ref.mxfp4_exponent(a, r) == e, "mxfp4 exponent by hand: %s %g -> %d" % (r, a, e))
        x = np.full((1, 32), 0.0, np.float32)
        x[0, 0] = a
        got = run_quant(tmp, "mxfp4", x, r)
        check(got[1][0, 0] == e, "fp8lab's mxfp4 exponent %s %g: %d, expected %d" % (r, a, got[1][0, 0], e))
    print("nvfp4 and mxfp4: random matrices, bit for bit; mxfp4 exponents by hand")


def hadamard():
    """TE's RHT matrix, dense: diag(signs) @ H16 / 4 (signs from the bitmask 0xD7E8)."""
    h = np.array([[(-1) ** bin(i & j).count("1") for j in range(16)] for i in range(16)], np.float64)
    s = np.array([-1.0 if (0xD7E8 >> i) & 1 else 1.0 for i in range(16)])
    assert list(s) == [1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1]  # TE's vector
    return np.diag(s) @ h * 0.25


def rht(tmp, rng):
    """The transform against a dense matrix product in double, rounded to BF16 by ml_dtypes."""
    x = (rng.standard_normal(16 * 64) * np.exp(rng.uniform(-4, 4, 16 * 64))).astype(np.float32)
    x = x.astype(ml_dtypes.bfloat16).astype(np.float32)  # TE transforms BF16 inputs
    fin, fout = os.path.join(tmp, "x.f32"), os.path.join(tmp, "y.f32")
    x.astype("<f4").tofile(fin)
    subprocess.run([BIN, "rht", str(x.size), fin, fout], check=True)
    got = np.fromfile(fout, np.float32)
    want = (x.astype(np.float64).reshape(-1, 16) @ hadamard()).ravel()
    want = want.astype(ml_dtypes.bfloat16).astype(np.float32)
    exact = want.view(np.uint32) == got.view(np.uint32)
    check(bool(exact.all()), "RHT: %d of %d differ, first at %s: %r vs %r" % (
        (~exact).sum(), x.size, np.argwhere(~exact)[:2].ravel().tolist(), got[~exact][:2], want[~exact][:2]))
    # orthogonality: the transform of the transform (in double) gives the input back
    back = want.astype(np.float64).reshape(-1, 16) @ hadamard().T
    scale = np.abs(x.reshape(-1, 16)).max(axis=1, keepdims=True)
    check(bool((np.abs(back - x.reshape(-1, 16)) <= 2.0 ** -7 * scale).all()),
          "RHT: H is orthogonal (H H^T = I): the transform of the transform is the input, within "
          "the BF16 rounding")
    print("rht: %d values, bit for bit with a dense product rounded to BF16" % x.size)


def stochastic(tmp, rng):
    """SR expectations: TE's 8-bit rule exactly by enumerating its 256 random bytes; the ideal
    rule against a Monte Carlo estimate of its own (numpy's uniform draws) within 4 standard
    errors."""
    grid = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6])
    y = np.concatenate([rng.uniform(-6, 6, 60), [0.1, 0.25, 0.3, 2.5, 5.99, -0.01, 0.0, 7.0, -9.0]]).astype(np.float32)
    fin, fout = os.path.join(tmp, "y.f32"), os.path.join(tmp, "sr.bin")
    y.astype("<f4").tofile(fin)
    subprocess.run([BIN, "sr", str(y.size), fin, fout], check=True)
    raw = open(fout, "rb").read()
    rec = 6 * 8 + 256
    n_mc = 20000
    for i, v in enumerate(y):
        e = struct.unpack("<6d", raw[i * rec:i * rec + 48])
        codes = np.frombuffer(raw[i * rec + 48:(i + 1) * rec], np.uint8)
        vals = fp4ref.e2m1_values(codes).astype(np.float64)
        err = ((np.float64(v) - vals) ** 2).mean()
        zero = ((codes & 7) == 0).mean()
        up = (np.abs(vals) > np.abs(np.float64(v)) + 0.0).mean() if abs(v) < 6 else 0.0
        check(abs(e[4] - err) <= 1e-12 and abs(e[5] - zero) <= 1e-12 and abs(e[3] - up) <= 1e-12,
              "SR TE rule at %r: expectation (%g, %g, %g) vs the 256 bytes (%g, %g, %g)"
              % (v, e[3], e[4], e[5], up, err, zero))
        a = abs(float(v))
        if a >= 6:
            continue
        lo = grid[grid <= a].max()
        hi = grid[grid > a].min()
        f = (a - lo) / (hi - lo)
        draws = np.where(rng.random(n_mc) < f, hi, lo)
        sq = (a - draws) ** 2
        se = max(sq.std() / np.sqrt(n_mc), 1e-12)
        check(abs(sq.mean() - e[1]) <= 4 * se, "SR ideal at %r: expected sq err %g, Monte Carlo %g +- %g"
              % (v, e[1], sq.mean(), se))
        check(abs(e[1] - (a - lo) * (hi - a)) <= 1e-12, "SR ideal at %r: (y-a)(b-y)" % v)
    print("sr: TE's 8-bit rule exact over its 256 bytes, the ideal rule within Monte Carlo error")


def main():
    rng = np.random.default_rng(29)
    with tempfile.TemporaryDirectory(prefix="fp8lab_fp4_") as tmp:
        e2m1_all(tmp)
        every_e4m3_scale(tmp, rng)
        scale_order(tmp, rng)
        random_cases(tmp, rng)
        rht(tmp, rng)
        stochastic(tmp, rng)
    if FAILS:
        print("%d check(s) failed" % len(FAILS))
        return 1
    print("ok: fp4")
    return 0


if __name__ == "__main__":
    sys.exit(main())
