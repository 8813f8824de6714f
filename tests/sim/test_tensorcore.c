/* test_tensorcore.c: the tensor-core models (src/sim/tensorcore.h, issue 46) against
 * - the outputs real tensor cores gave: every certified inner product of
 *   tests/tools/tensorcore_data/certified_<FMT>.bin (5,000 per format: H100, H200 with c = 0,
 *   B200 with its c; tools/reference/tc_certified.py built them from model_validation/ and
 *   README.md there gives their source and licence), bit for bit;
 * - the Python reference (tools/reference/tensorcore.py) on 20,000 and 10^6 random vectors per
 *   format and model, and the published H100TC.m under GNU Octave on the same 10^6
 *   (tools/reference/tc_vectors.py's generator, rebuilt here; the FNV-1a hash of the expected
 *   outputs is stored, not the vectors: tensorcore_hashes.h, tests/tools/tensorcore_data/
 *   octave.md; about 4 s, hence the test case's 120 s timeout);
 * - hand calculations of swamping, fast accumulation and promotion;
 * and the vector kernel against the scalar definition. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "encode_inline.h" /* enc_f2u, enc_u2f: a float's bits and back */
#include "tensorcore.h"
#include "testutil.h"

static uint32_t le32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* ------------------------------------------------------------------ certified values */

/* The mismatches of model m on the certified file of format f against GPU column gpu (0 H100,
 * 1 H200, 2 B200): H100 and H200 with c = 0 (how they were measured), B200 with its c. */
static int certified_misses(fp8_format f, fp8_tc_model m, int gpu, int *records) {
  char rel[128];
  snprintf(rel, sizeof rel, "tests/tools/tensorcore_data/certified_%s.bin",
           f == FP8_E4M3 ? "E4M3" : "E5M2");
  char *path = tu_path(tu_source_dir(), rel);
  size_t len = 0;
  unsigned char *data = (unsigned char *)tu_read_file(path, &len);
  ck_assert_msg(data != NULL, "cannot read %s", path);
  ck_assert_uint_eq(len % 80, 0);
  int miss = 0;
  *records = (int)(len / 80);
  for (size_t r = 0; r < len / 80; r++) {
    const unsigned char *p = data + 80 * r;
    float a[32], b[32];
    for (int i = 0; i < 32; i++) {
      a[i] = fp8_decode(p[i], f);
      b[i] = fp8_decode(p[32 + i], f);
    }
    float c = gpu == 2 ? enc_u2f(le32(p + 64)) : 0.0f;
    uint32_t want = le32(p + 68 + 4 * gpu);
    miss += enc_f2u(fp8_tc_mma(m, f, f, a, b, 32, c)) != want;
  }
  free(data);
  free(path);
  return miss;
}

/* Every certified sample equals the model of its GPU: 0 mismatches of 5,000 for H100 and H200
 * (the h100 model) and B200 (the b200 model), E4M3 and E5M2. The other model misses as many
 * as the Python reference counts (docs/tensor_cores.md: the b200 model on H100's data as
 * exact accumulation does, 2,989 and 1,797; the h100 model on B200's, 4,997 each): the data
 * separate the models. */
START_TEST(certified_outputs) {
  const fp8_format F[2] = {FP8_E4M3, FP8_E5M2};
  const int b200_on_h100[2] = {2989, 1797};
  for (int k = 0; k < 2; k++) {
    int n = 0;
    ck_assert_int_eq(certified_misses(F[k], FP8_TC_H100, 0, &n), 0);
    ck_assert_int_eq(n, 5000);
    ck_assert_int_eq(certified_misses(F[k], FP8_TC_H100, 1, &n), 0);
    ck_assert_int_eq(certified_misses(F[k], FP8_TC_B200, 2, &n), 0);
    ck_assert_int_eq(certified_misses(F[k], FP8_TC_B200, 0, &n), b200_on_h100[k]);
    ck_assert_int_eq(certified_misses(F[k], FP8_TC_H100, 2, &n), 4997);
  }
}
END_TEST

/* ------------------------------------------------------------------ random vectors */

typedef struct {
  uint64_t s;
} sm64;
static uint64_t sm_next(sm64 *g) {
  uint64_t z = (g->s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* One inner product of tools/reference/tc_vectors.py's generator (its docstring is the
 * definition): 32 a and 32 b codes, then c's bits. */
static void tc_vector(sm64 *g, fp8_format f, uint8_t a[32], uint8_t b[32], uint32_t *c) {
  const int mbits = f == FP8_E4M3 ? 3 : 2, fmax = f == FP8_E4M3 ? 15 : 30;
  uint64_t mode = sm_next(g) % 3;
  int lo = 0, hi = fmax;
  if (mode == 1) {
    int center = (int)(sm_next(g) % (uint64_t)(fmax + 1));
    lo = center - 2 > 0 ? center - 2 : 0;
    hi = center + 2 < fmax ? center + 2 : fmax;
  } else if (mode == 2) {
    lo = hi = (int)(sm_next(g) % (uint64_t)(fmax + 1));
  }
  for (int i = 0; i < 64; i++) {
    uint64_t r = sm_next(g);
    int field = lo + (int)(r % (uint64_t)(hi - lo + 1));
    int mant = (int)((r >> 8) % (1u << mbits)), sign = (int)((r >> 16) & 1);
    if (f == FP8_E4M3 && field == 15 && mant == 7) mant = 6;
    uint8_t code = (uint8_t)(sign << 7 | field << mbits | mant);
    if ((r >> 20) % 8 == 0) code = (uint8_t)(sign << 7);
    if (i < 32) a[i] = code;
    else b[i - 32] = code;
  }
  uint64_t cmode = sm_next(g) % 4;
  if (cmode == 0) {
    *c = 0;
  } else if (cmode == 1) {
    uint32_t u = (uint32_t)sm_next(g);
    if (((u >> 23) & 0xFF) == 0xFF) u = (u & ~(0xFFu << 23)) | (254u << 23);
    *c = u;
  } else {
    int R = f == FP8_E4M3 ? 24 : 36;
    int E = (int)(sm_next(g) % (uint64_t)(2 * R + 1)) - R;
    uint32_t mant = (uint32_t)(sm_next(g) & 0x7FFFFF), sign = (uint32_t)(sm_next(g) & 1);
    *c = sign << 31 | (uint32_t)(127 + E) << 23 | mant;
  }
}

static uint64_t fnv_u32(uint64_t h, uint32_t w) {
  for (int i = 0; i < 4; i++) {
    h ^= (w >> (8 * i)) & 0xFF;
    h *= 0x100000001b3ull;
  }
  return h;
}

/* The FNV-1a 64 hash of model m's outputs on the first n vectors of seed. */
static uint64_t vectors_hash(fp8_format f, uint64_t seed, int n, fp8_tc_model m) {
  sm64 g = {seed};
  uint64_t h = 0xcbf29ce484222325ull;
  for (int k = 0; k < n; k++) {
    uint8_t a[32], b[32];
    uint32_t c;
    float x[32], y[32];
    tc_vector(&g, f, a, b, &c);
    for (int i = 0; i < 32; i++) {
      x[i] = fp8_decode(a[i], f);
      y[i] = fp8_decode(b[i], f);
    }
    h = fnv_u32(h, enc_f2u(fp8_tc_mma(m, f, f, x, y, 32, enc_u2f(c))));
  }
  return h;
}


#include "tensorcore_hashes.h" /* TC_HASHES: the stored hashes (octave.md) */

START_TEST(random_vectors) {
  for (size_t i = 0; i < sizeof TC_HASHES / sizeof *TC_HASHES; i++) {
    const tc_hash *t = &TC_HASHES[i];
    uint64_t h = vectors_hash(t->fmt, t->seed, t->n, t->model);
    ck_assert_msg(h == t->hash, "%s %s n=%d: hash %016llx, expected %016llx",
                  t->fmt == FP8_E4M3 ? "e4m3" : "e5m2", fp8_tc_model_name(t->model), t->n,
                  (unsigned long long)h, (unsigned long long)t->hash);
  }
}
END_TEST

/* ------------------------------------------------------------------ by hand */

/* Swamping, by hand: 1 + 31 products of 2^-14 (E4M3 2^-7 * 2^-7). H100: aligned to 2^0 with 13
 * fraction bits each small term is 2^-14 * 2^13 = 0.5, truncated to 0: d = 1. B200 and exact:
 * 1 + 31 * 2^-14 exactly. */
START_TEST(swamping_by_hand) {
  float a[32], b[32];
  a[0] = 1.0f, b[0] = 1.0f;
  for (int i = 1; i < 32; i++) a[i] = b[i] = 0x1p-7f;
  const float exact = 1.0f + 31.0f * 0x1p-14f;
  ck_assert(fp8_tc_mma(FP8_TC_H100, FP8_E4M3, FP8_E4M3, a, b, 32, 0.0f) == 1.0f);
  ck_assert(fp8_tc_mma(FP8_TC_B200, FP8_E4M3, FP8_E4M3, a, b, 32, 0.0f) == exact);
  ck_assert(fp8_tc_mma(FP8_TC_EXACT, FP8_E4M3, FP8_E4M3, a, b, 32, 0.0f) == exact);
  /* c takes part in the alignment and is cut to 13 fraction bits: c = 1 + 2^-20 is 1 */
  for (int i = 0; i < 32; i++) a[i] = b[i] = 0.0f;
  ck_assert(fp8_tc_mma(FP8_TC_H100, FP8_E4M3, FP8_E4M3, a, b, 32, 1.0f + 0x1p-20f) == 1.0f);
  ck_assert(fp8_tc_mma(FP8_TC_B200, FP8_E4M3, FP8_E4M3, a, b, 32, 1.0f + 0x1p-20f) ==
            1.0f + 0x1p-20f);
  /* units of 2^-13 below 2^0: products 1, 2^-13 and 2^-14 are 8192, 1 and 0.5 (cut to 0)
   * units: d = 8193 * 2^-13, 14 significant bits, kept */
  a[0] = b[0] = 1.0f;
  a[1] = 0x1p-7f, b[1] = 0x1p-6f;
  a[2] = 0x1p-7f, b[2] = 0x1p-7f;
  ck_assert(fp8_tc_mma(FP8_TC_H100, FP8_E4M3, FP8_E4M3, a, b, 32, 0.0f) == 1.0f + 0x1p-13f);
  /* negative terms truncate toward zero: -(1 + 2^-14) is -1 */
  a[0] = -1.0f, a[1] = 0.0f, a[2] = -0x1p-7f;
  ck_assert(fp8_tc_mma(FP8_TC_H100, FP8_E4M3, FP8_E4M3, a, b, 32, 0.0f) == -1.0f);
  /* a zero result is +0 on H100 even from negative zeros; B200 keeps -0 of negative zeros */
  for (int i = 0; i < 32; i++) a[i] = -0.0f, b[i] = 1.0f;
  ck_assert_uint_eq(enc_f2u(fp8_tc_mma(FP8_TC_H100, FP8_E4M3, FP8_E4M3, a, b, 32, -0.0f)), 0);
  ck_assert_uint_eq(enc_f2u(fp8_tc_mma(FP8_TC_B200, FP8_E4M3, FP8_E4M3, a, b, 32, -0.0f)),
                    0x80000000u);
}
END_TEST

/* Fast accumulation against promotion, by hand (k = 256, E4M3): one product 16 * 16 = 256
 * first, then 255 products 2^-3 * 2^-3 = 2^-6. Exact: 256 + 255/64 = 259.984375.
 * H100, fast: every MMA aligns to the accumulator's 2^8 (or the 256 itself): a small term is
 * 2^-6 * 2^5 = 0.5 units, truncated: d = 256. Promotion every 128: the first 128 terms give 256
 * as before; the second 128 start from 0: MMA 5 sums 32 * 2^-6 = 0.5 exactly (aligned to
 * 2^-6), MMA 6 aligns to c = 0.5 (2^-1): each term 2^-6 * 2^14 = 256 units, exact: 1.0; then
 * 1.5 and 2.0 (c = 1 and 1.5: 2^0, terms 128 units): the partial 2.0; acc = 256 + 2 = 258.
 * B200: each MMA's exact sum is a float: 259.984375 both ways. */
START_TEST(promotion_by_hand) {
  float a[256], b[256], y[4];
  a[0] = b[0] = 16.0f;
  for (int i = 1; i < 256; i++) a[i] = b[i] = 0.125f;
  ck_assert(fp8_tc_dot(FP8_TC_H100, FP8_E4M3, FP8_E4M3, a, b, 256, 0) == 256.0f);
  ck_assert(fp8_tc_dot(FP8_TC_H100, FP8_E4M3, FP8_E4M3, a, b, 256, FP8_TC_PROMOTE) == 258.0f);
  ck_assert(fp8_tc_dot(FP8_TC_B200, FP8_E4M3, FP8_E4M3, a, b, 256, 0) == 259.984375f);
  ck_assert(fp8_tc_dot(FP8_TC_B200, FP8_E4M3, FP8_E4M3, a, b, 256, FP8_TC_PROMOTE) ==
            259.984375f);
  ck_assert(fp8_tc_dot(FP8_TC_EXACT, FP8_E4M3, FP8_E4M3, a, b, 256, 0) == 259.984375f);
  /* the block form: the same entries times the scale */
  float bb[8 * 256];
  for (int j = 0; j < 8; j++) memcpy(bb + j * 256, b, sizeof b);
  float yy[8];
  fp8_tc_block(FP8_TC_H100, FP8_E4M3, FP8_E4M3, 1, 8, 256, a, bb, 0, 0.5f, yy);
  for (int j = 0; j < 8; j++) ck_assert(yy[j] == 128.0f);
  fp8_tc_block(FP8_TC_H100, FP8_E4M3, FP8_E4M3, 1, 8, 256, a, bb, FP8_TC_PROMOTE, 0.5f, yy);
  for (int j = 0; j < 8; j++) ck_assert(yy[j] == 129.0f);
  (void)y;
}
END_TEST

/* Non-finite operands (GEMM.m's rule): NaN with anything, or +Inf with -Inf, is NaN; an
 * infinity alone stays. */
START_TEST(nonfinite_by_hand) {
  float a[32] = {0}, b[32] = {0};
  for (int i = 0; i < 32; i++) a[i] = b[i] = 1.0f;
  a[3] = INFINITY;
  for (int m = FP8_TC_H100; m <= FP8_TC_B200; m++) {
    ck_assert(fp8_tc_mma((fp8_tc_model)m, FP8_E5M2, FP8_E5M2, a, b, 32, 1.0f) == INFINITY);
    ck_assert(isnan(fp8_tc_mma((fp8_tc_model)m, FP8_E5M2, FP8_E5M2, a, b, 32, -INFINITY)));
    b[3] = 0.0f; /* Inf * 0 */
    ck_assert(isnan(fp8_tc_mma((fp8_tc_model)m, FP8_E5M2, FP8_E5M2, a, b, 32, 0.0f)));
    b[3] = 1.0f;
    ck_assert(isnan(fp8_tc_mma((fp8_tc_model)m, FP8_E5M2, FP8_E5M2, a, b, 32, NAN)));
  }
  fp8_tc_model m;
  ck_assert_int_eq(fp8_tc_model_parse("h200", &m), FP8_OK);
  ck_assert_int_eq(m, FP8_TC_H100);
  ck_assert_int_eq(fp8_tc_model_parse("a100", &m), FP8_EINVAL);
}
END_TEST

/* The vector kernels (h100, b200) give the scalar definition's bits: random FP8 operands of every exponent
 * (a share of zeros and subnormals, rows that nearly cancel), mixed formats, k not a multiple of
 * 32, q not a multiple of 8, fast and promoted, a scale; and blocks with a NaN or an infinity. */
START_TEST(kernel_equals_definition) {
  sm64 g = {46};
  const int64_t p = 5, q = 19, K[3] = {300, 96, 7};
  for (int kk = 0; kk < 3; kk++) {
    int64_t k = K[kk];
    float *a = malloc((size_t)(p * k) * sizeof *a), *b = malloc((size_t)(q * k) * sizeof *b);
    float y1[5 * 19], y2[5 * 19];
    for (int form = 0; form < 4; form++) {
      fp8_format fa = form & 1 ? FP8_E5M2 : FP8_E4M3, fb = form & 2 ? FP8_E4M3 : FP8_E5M2;
      for (int64_t i = 0; i < p * k; i++) {
        uint8_t c = (uint8_t)sm_next(&g);
        float v = fp8_decode(c, fa);
        a[i] = isfinite(v) && sm_next(&g) % 5 ? v : 0.0f;
      }
      for (int64_t i = 0; i < q * k; i++) {
        uint8_t c = (uint8_t)sm_next(&g);
        float v = fp8_decode(c, fb);
        b[i] = isfinite(v) && sm_next(&g) % 5 ? v : 0.0f;
      }
      for (int64_t t = 0; t < k; t++) a[k + t] = -a[t]; /* row 1 against row 0: cancels */
      if (form == 3) a[2 * k + 1] = NAN, b[3 * k + 5] = INFINITY;
      for (int mm = FP8_TC_H100; mm <= FP8_TC_B200; mm++)
        for (int pr = 0; pr < 2; pr++) {
          int64_t promote = pr ? FP8_TC_PROMOTE : 0;
          fp8_tc_block((fp8_tc_model)mm, fa, fb, p, q, k, a, b, promote, 0.75f, y1);
          fp8_tc_block_plain((fp8_tc_model)mm, fa, fb, p, q, k, a, b, promote, 0.75f, y2);
          for (int i = 0; i < p * q; i++)
            ck_assert_msg(enc_f2u(y1[i]) == enc_f2u(y2[i]) || (isnan(y1[i]) && isnan(y2[i])),
                          "%s k %lld form %d promote %lld entry %d: %a vs %a",
                          fp8_tc_model_name((fp8_tc_model)mm), (long long)k, form,
                          (long long)promote, i, y1[i], y2[i]);
        }
    }
    free(a);
    free(b);
  }
}
END_TEST

TU_MAIN("tensorcore", "models", NULL, NULL, 120, certified_outputs, random_vectors,
        swamping_by_hand, promotion_by_hand, nonfinite_by_hand, kernel_equals_definition)
