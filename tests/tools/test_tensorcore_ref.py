#!/usr/bin/env python3
"""Issue 46: tools/reference/tensorcore.py (one FP8 MMA inner product as Khattak and Mikaitis's
models define it) against the outputs real H100, H200 and B200 tensor cores gave: the certified
values of tests/tools/tensorcore_data/ (the first 1,000 inner products of each fp32-output file
of north-numerical-computing/MATLAB-tensor-core's model_validation/, and B200 E5M2's line 3936;
README.md there says where from, the licence, and why H100/H200 take c = 0).

- every certified H100 and H200 sample, E4M3 and E5M2, equals the "h100" / "h200" model bit for
  bit; every B200 sample equals the "b200" variant;
- the test can fail: exact accumulation with one rounding ("exact") misses a substantial share
  of the H100 samples (the issue reports 36-60%); the repository's own B200 model ("b200-repo")
  misses B200 samples; B200's line 3936 separates "b200" from "exact";
- the stored files are the ones SHA256SUMS names (edited certified values fail);
- tools/reference/tc_vectors.py's vectorized generator equals its word-for-word form, and
  tensorcore.py's outputs on its random vectors hash to the values tests/sim/tensorcore_hashes.h
  stores for the C model (the entries up to 20,000 vectors; larger ones are checked by the C
  test and tests/tools/tensorcore_data/octave.md).

Run: python3 tests/tools/test_tensorcore_ref.py (needs numpy and ml_dtypes: without them exit
77, skipped, or exit 1 when FP8LAB_REQUIRE_PYDEPS=1 is set, as .ci/run does)
"""
import hashlib
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "reference"))
from ref_common import main, np, test  # noqa: E402  (the skip rule for numpy and ml_dtypes)

sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "reference"))
import tensorcore as T  # noqa: E402

DATA = os.path.join(HERE, "tensorcore_data")
FORMATS = ("E4M3", "E5M2")


def load(fmt, gpu, sub=""):
    """a, b codes, c bits and the hardware's d bits of one certified file set. H100/H200's FP8
    files were measured with c = 0 (WGMMA, D = A*B + D with D zeroed: the repository's
    model_validation/Validate_TC_models.m:69-75 does not read their c files), so c = 0 there."""
    d_dir = os.path.join(DATA, fmt, sub)
    a = T.read_words(os.path.join(d_dir, "a_%s.txt" % fmt), fmt.lower())
    b = T.read_words(os.path.join(d_dir, "b_%s.txt" % fmt), fmt.lower())
    d = T.read_bit_strings(os.path.join(d_dir, "d_%s_fp32.txt" % gpu))
    if gpu == "B200":
        c = T.read_bit_strings(os.path.join(d_dir, "c_B200_fp32.txt"))
    else:
        c = np.zeros(len(d), dtype=np.uint32)
    assert a.shape == (len(d), 32) and b.shape == a.shape and c.shape == d.shape, (fmt, gpu)
    return a, b, c, d


def misses(fmt, gpu, model, sub=""):
    a, b, c, d = load(fmt, gpu, sub)
    got = T.inner_product(a, b, c, fmt.lower(), model)
    bad = np.nonzero(got != d)[0]
    return len(bad), len(d), ["line %d: model %08x hardware %08x" % (i + 1, got[i], d[i])
                              for i in bad[:3]]


@test
def certified_files_unchanged():
    with open(os.path.join(DATA, "SHA256SUMS")) as f:
        sums = [line.split() for line in f if line.strip()]
    assert len(sums) >= 16, len(sums)
    for digest, name in sums:
        with open(os.path.join(DATA, name), "rb") as g:
            assert hashlib.sha256(g.read()).hexdigest() == digest, name


@test
def hopper_matches_hardware():
    for fmt in FORMATS:
        for gpu in ("H100", "H200"):
            n_bad, n, first = misses(fmt, gpu, gpu.lower())
            assert n >= 1000 and n_bad == 0, (gpu, fmt, n_bad, n, first)
            print("%s %s: %d of %d equal the %s model" % (gpu, fmt, n, n, gpu.lower()))


@test
def b200_matches_hardware():
    for fmt in FORMATS:
        n_bad, n, first = misses(fmt, "B200", "b200")
        assert n >= 1000 and n_bad == 0, (fmt, n_bad, n, first)
        print("B200 %s: %d of %d equal the b200 variant" % (fmt, n, n))
    n_bad, n, first = misses("E5M2", "B200", "b200", "B200_line3936")
    assert (n_bad, n) == (0, 1), first


@test
def exact_accumulation_misses_hopper():
    # the check can fail: one rounding of the exact sum is not what H100 computes
    for fmt in FORMATS:
        n_bad, n, _ = misses(fmt, "H100", "exact")
        share = n_bad / n
        print("H100 %s: exact accumulation misses %d of %d (%.1f%%)" % (fmt, n_bad, n,
                                                                       100 * share))
        assert 0.35 <= share <= 0.61, (fmt, n_bad, n)


@test
def other_models_miss():
    for fmt in FORMATS:
        # the repository's B200TC.m (truncation at the end) and its RN form miss B200's outputs
        for model, least in (("b200-repo", 0.2), ("b200-repo-rn", 0.02)):
            n_bad, n, _ = misses(fmt, "B200", model)
            print("B200 %s: %s misses %d of %d" % (fmt, model, n_bad, n))
            assert n_bad >= least * n, (fmt, model, n_bad, n)
        # the Hopper model is not Blackwell's, nor the converse
        assert misses(fmt, "B200", "h100")[0] >= 0.9 * 1000
        assert misses(fmt, "H100", "b200")[0] >= 0.3 * 1000
    # the one B200 sample (of 10,000) where exact accumulation and the b200 variant differ
    n_bad, n, _ = misses("E5M2", "B200", "exact", "B200_line3936")
    assert (n_bad, n) == (1, 1)


@test
def random_vectors_hashes():
    import re
    import tc_vectors as V
    for fmt, seed in V.SEEDS.items():
        a, b, c = V.generate(fmt, seed, 300, chunk=70)       # several chunks
        a2, b2, c2 = V.generate_slow(fmt, seed, 300)
        assert (a == a2).all() and (b == b2).all() and (c == c2).all(), fmt
    with open(os.path.join(HERE, "..", "sim", "tensorcore_hashes.h")) as f:
        rows = re.findall(r"\{FP8_(E4M3|E5M2), (0x[0-9A-Fa-f]+), (\d+), FP8_TC_(\w+), "
                          r"0x([0-9a-f]{16})ull\}", f.read())
    small = [r for r in rows if int(r[2]) <= 20000]
    assert len(small) >= 4, rows
    for fmt, seed, n, model, want in small:
        a, b, c = V.generate(fmt.lower(), int(seed, 16), int(n))
        got = V.fnv1a64(T.inner_product(a, b, c, fmt.lower(), model.lower()))
        print("%s %s N=%s: tensorcore.py %016x, stored %s" % (fmt, model, n, got, want))
        assert got == int(want, 16), (fmt, model, n)
    # the port of the repository's B200TC.m ("b200-repo"; not in the C model) against the
    # Octave run of B200TC.m itself: its first 20,000 outputs (octave.md: all 10^6 equal)
    for fmt, want in (("e4m3", 0xf704cf5755d5a0d5), ("e5m2", 0x7bd3ba97d21867c4)):
        a, b, c = V.generate(fmt, V.SEEDS[fmt], 20000)
        got = V.fnv1a64(T.inner_product(a, b, c, fmt, "b200-repo"))
        print("%s b200-repo N=20000: tensorcore.py %016x, Octave B200TC %016x" % (fmt, got, want))
        assert got == want, fmt


@test
def hand_cases():
    # 1 + 2^-13 * ... : the H100 model keeps 13 fraction bits of c, truncated, and of the sum
    one = np.zeros((1, 32), dtype=np.uint8)
    one[0, 0] = 0x38                                   # E4M3 1.0
    one_b = one.copy()
    c = np.array([0x3F800000 | 0x3FF], dtype=np.uint32)   # 1 + 1023 * 2^-23
    e4 = "e4m3"
    assert T.inner_product(one, one_b, c, e4, "h100")[0] == 0x40000000        # 2, truncated
    assert T.inner_product(one, one_b, c, e4, "exact")[0] == 0x40000000 | 0x200   # RNE of 2+1023u
    assert T.inner_product(one, one_b, c, e4, "b200")[0] == 0x40000000 | 0x200
    # products only, below c's exponent: alignment truncates them in the h100 model
    a = np.zeros((1, 32), dtype=np.uint8)
    a[0, 0] = 0x38          # 1
    a[0, 1] = 0x28          # 2^-2
    b = np.zeros((1, 32), dtype=np.uint8)
    b[0, 0] = 0x38          # 1
    b[0, 1] = 0x01          # 2^-9 (subnormal)
    big = np.array([0x41000000], dtype=np.uint32)      # 8: aligns to 2^3, 13 bits: 2^-10 quanta
    assert T.inner_product(a, b, big, e4, "h100")[0] == 0x41100000           # 9: 2^-11 lost
    assert T.inner_product(a, b, big, e4, "exact")[0] == np.float32(9 + 2.0 ** -11).view(np.uint32)
    assert T.inner_product(a, b, big, e4, "b200")[0] == np.float32(9 + 2.0 ** -11).view(np.uint32)
    # zeros and non-finite values
    z = np.zeros((1, 32), dtype=np.uint8)
    for m in T.GPUS:
        assert T.inner_product(z, z, np.array([0], dtype=np.uint32), e4, m)[0] == 0, m
        nan = z.copy()
        nan[0, 3] = 0x7F
        assert T.inner_product(nan, one_b, np.array([0], dtype=np.uint32), e4, m)[0] == T.NAN_BITS
        inf = z.copy()
        inf[0, 0] = 0x7C                               # E5M2 +inf times 1.0 (0x3C)
        b5 = z.copy()
        b5[0, 0] = 0x3C
        assert T.inner_product(inf, b5, np.array([0], dtype=np.uint32), "e5m2", m)[0] == 0x7F800000


if __name__ == "__main__":
    sys.exit(main())
