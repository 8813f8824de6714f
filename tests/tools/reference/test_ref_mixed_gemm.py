#!/usr/bin/env python3
"""Self-test of the reference's GEMMs of mixed recipes and NVFP4 operands (issue 45;
tools/reference/fp8ref.py layer_requests, fp4_reference, Nvfp4Recipe, ratio_estimate, and
fp4ref.py's vectorized nvfp4_xhat, stochastic rounding and Hadamard transform): against
fp4ref.nvfp4 (TE's kernels, transcribed element by element), loops by hand and hand-made
experiments.

Run: python3 tests/tools/reference/test_ref_mixed_gemm.py (needs numpy and ml_dtypes: without
them exit 77, skipped, or exit 1 when FP8LAB_REQUIRE_PYDEPS=1 is set, as .ci/run does)
"""
import math
import os
import sys
import tempfile

import ml_dtypes

from ref_common import F32, R, main, np, test  # noqa: E402

import fp4ref as P  # noqa: E402  (ref_common put tools/reference on the path)


def matrix(rng, shape, spread=6.0):
    x = (rng.standard_normal(shape) * np.exp(rng.uniform(-spread, 2, shape))).astype(np.float32)
    x[rng.random(shape) < 0.05] = 0
    return x


@test
def nvfp4_xhat_equals_the_elementwise_transcription():
    """Round to nearest, 1x16 and 16x16 blocks, partial runs and blocks, zeros: bit for bit
    fp4ref.nvfp4's xhat."""
    rng = np.random.default_rng(5)
    for shape in ((37, 45), (32, 64), (16, 16), (5, 3), (1, 17)):
        for square in (False, True):
            x = matrix(rng, shape)
            amax = np.nanmax(np.abs(x))
            want = P.nvfp4(x, square, amax)[2]
            got = P.nvfp4_xhat(x, square, amax)
            assert np.array_equal(want.view(np.uint32), got.view(np.uint32)), (shape, square)


@test
def nvfp4_stochastic_rounding_by_hand():
    """Each element: |y| between grid points a < b, f = (|y| - a) / (b - a), up when
    floor(256 f) > the low byte of splitmix64 output index0 + r * cols + c (docs/semantics.md);
    a loop over the elements with Python integers against the vectorized draw."""
    rng = np.random.default_rng(6)
    x = matrix(rng, (6, 40))
    amax = np.nanmax(np.abs(x))
    _, sc, _, ys = P.nvfp4(x, False, amax)
    near = P.nvfp4_xhat(x, False, amax)
    seed, index0 = 12345, 1 << 48
    got = P.nvfp4_xhat(x, False, amax, sr_seed=seed, index0=index0)
    m64 = (1 << 64) - 1
    dq_unit = F32(1) / F32(F32(6) * F32(448))
    nup = 0
    for r in range(6):
        for c in range(40):
            i = index0 + r * 40 + c
            z = (seed + (i + 1) * 0x9E3779B97F4A7C15) & m64
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m64
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m64
            byte = (z ^ (z >> 31)) & 0xFF
            y = float(ys[r, c])
            if not abs(y) < 6:
                assert got[r, c] == near[r, c]
                continue
            k = max(j for j in range(7) if P.GRID[j] <= abs(y))
            f = (abs(y) - P.GRID[k]) / (P.GRID[k + 1] - P.GRID[k])
            up = math.floor(256 * f) > byte
            nup += up
            s = F32(np.uint8(sc[r, c // 16]).view(ml_dtypes.float8_e4m3fn).astype(np.float32))
            dq = F32(F32(s * F32(amax)) * dq_unit)
            want = F32(F32(math.copysign(P.GRID[k + up], y)) * dq)
            assert got[r, c] == want, (r, c, got[r, c], want)
    assert 20 < nup < 220, nup   # the draw rounds some up and some down


@test
def hadamard_transform_and_back():
    """rht_rows: each run of 16 times diag(s) H16 / 4 (s: TE's sign mask 0xD7E8), rounded to
    BF16, against a dense product by hand; rht_rows_back undoes it up to that rounding."""
    rng = np.random.default_rng(7)
    t = matrix(rng, (3, 32), 2.0)
    h = np.array([[(-1) ** bin(i & j).count("1") for j in range(16)] for i in range(16)])
    s = np.array([1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1], np.float64)
    for r in range(3):
        for run in range(2):
            v = t[r, 16 * run:16 * run + 16].astype(np.float64)
            want = np.array([sum(v[i] * s[i] * h[i, j] / 4 for i in range(16)) for j in range(16)])
            want = want.astype(ml_dtypes.bfloat16).astype(np.float32)
            got = P.rht_rows(t)[r, 16 * run:16 * run + 16]
            assert np.array_equal(got, want), (r, run)
    back = P.rht_rows_back(P.rht_rows(t))
    assert np.allclose(back, t, rtol=2 ** -7, atol=1e-30 + 2 ** -7 * np.abs(t).max())


def experiment(text):
    d = tempfile.mkdtemp()
    path = os.path.join(d, "e.ini")
    with open(path, "w") as f:
        f.write("[trace]\npath = t\n" + text)
    return R.parse_experiment(path, warn=open(os.devnull, "w"))


NAMES = ["l.input", "l.weight", "l.grad_output", "k.input", "k.weight", "k.grad_output"]


@test
def layer_requests_by_hand():
    """A shared label of two sections that split layer l (input and weight MXFP8, grad_output
    NVFP4) asks one mixed request, at its first configuration; layer k, wholly in the second
    section, that section's own; a sweep over some tensors none; plain configurations their
    own."""
    exp = experiment("[recipe.cur]\nkind = current\n"
                     "[recipe.fwd]\nlabel = hyb\nkind = mxfp8\ntensors = l.input, l.weight\n"
                     "[recipe.bwd]\nlabel = hyb\nkind = nvfp4\n"
                     "[recipe.part]\nkind = delayed\nhistory_len = 1, 2\ntensors = *.weight\n")
    cov = R.coverage(exp, NAMES)
    assert R.layer_requests(exp, "l", cov) == [(0, 0, 0), (1, 1, 2)]
    assert R.layer_requests(exp, "k", cov) == [(0, 0, 0), (2, 2, 2)]
    # the row's key columns: both operands of one section: its own; else kind mixed
    fwd, bwd = exp.configs[1], exp.configs[2]
    assert R._row_key(fwd, fwd)["kind"] == "mxfp8"
    assert R._row_key(bwd, fwd) == dict(kind="mixed", history_len="", margin="", amax_compute="")
    d1 = R.Config("a", "delayed", "hybrid", 16, 1, "max")
    d2 = R.Config("a", "delayed", "e5m2", 16, 1, "max")
    assert R._row_key(d1, d2) == dict(kind="delayed", history_len=16, margin=1,
                                      amax_compute="max")
    d2.margin = 0
    assert R._row_key(d1, d2)["kind"] == "mixed"


@test
def fp4_reference_by_hand():
    """The FP4 ratio's reference: none without an FP4 configuration; the first current one;
    not one of a shared label; else the delayed one TE defaults to, else max, |margin|,
    history (a block kind: 0, 0, max)."""
    assert R.fp4_reference(experiment("[recipe.c]\nkind = current\n")) is None
    assert R.fp4_reference(experiment(
        "[recipe.d]\nkind = delayed\n[recipe.c]\nkind = current\n[recipe.n]\nkind = nvfp4\n")) == 1
    assert R.fp4_reference(experiment(
        "[recipe.a]\nlabel = m\nkind = current\ntensors = l.*\n[recipe.b]\nlabel = m\n"
        "kind = delayed\n[recipe.d]\nkind = delayed\nhistory_len = 16, 1024\nmargin = 1, 0\n"
        "[recipe.n]\nkind = nvfp4\n")) == 5     # d: (16,1) (16,0) (1024,1) (1024,0)
    assert R.fp4_reference(experiment(
        "[recipe.d]\nkind = delayed\nhistory_len = 4, 16\nmargin = 1, -2\n"
        "amax_compute = most_recent, max\n[recipe.n]\nkind = nvfp4\n")) == 5   # 16, 1, max
    # a block kind beside delayed scaling of history 16, margin 1: history 0, margin 0, max
    assert R.fp4_reference(experiment(
        "[recipe.d]\nkind = delayed\nhistory_len = 16\nmargin = 1\n[recipe.m]\nkind = mxfp8\n"
        "[recipe.n]\nkind = nvfp4\n")) == 1


@test
def paired_ratio_by_hand():
    """The whole output: exact, lo = hi = the quotient of the two errors; sum(w d_ref) = 0 with
    d_c = 0: 1; a sampled side: an interval around the estimate, which is sqrt(Q)."""
    yref = np.array([[1.0, 2.0], [3.0, 4.0]])
    yc = np.array([[1.5, 2.0], [3.0, 3.0]], np.float32)
    yr = np.array([[1.0, 2.5], [3.0, 4.0]], np.float32)
    one = np.ones(2)
    r, lo, hi = R.ratio_estimate(yref, yc, yr, one, one, True, True)
    assert r == lo == hi == math.sqrt((0.25 + 1.0) / 0.25)
    r, lo, hi = R.ratio_estimate(yref, yref.astype(np.float32), yref.astype(np.float32), one,
                                 one, True, True)
    assert (r, lo, hi) == (1.0, 1.0, 1.0)
    rng = np.random.default_rng(8)
    yref = rng.standard_normal((5, 6))
    yc = (yref + 0.1 * rng.standard_normal((5, 6))).astype(np.float32)
    yr = (yref + 0.05 * rng.standard_normal((5, 6))).astype(np.float32)
    u, v = rng.uniform(0.5, 2, 5), rng.uniform(0.5, 2, 6)
    r, lo, hi = R.ratio_estimate(yref, yc, yr, u, v, False, False)
    w = np.outer(u, v)
    q = np.sum(w * (yc - yref) ** 2) / np.sum(w * (yr - yref) ** 2)
    assert abs(r - math.sqrt(q)) <= 1e-12 * r and lo < r < hi, (r, lo, hi)


if __name__ == "__main__":
    sys.exit(main())
