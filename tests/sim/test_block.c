/* test_block.c: block-scaled recipes (src/sim/block.c) against hand-computed values and against
 * a plain per-element reference loop written here from RECIPES.md ("Block recipes"): block
 * amaxes by a literal loop over each block's index set, scales from the format definition
 * (frexp/ldexp in double, not the bit tricks of block.c), codes from testutil's brute-force
 * FP8 encoder. */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "block.h"
#include "testutil.h"

static uint32_t f2u(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
static float u2f(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }

/* xorshift64*: deterministic test data without touching the code under test. */
static uint64_t rng_state = 0x243F6A8885A308D3ull;
static uint64_t rnd(void) {
  rng_state ^= rng_state >> 12; rng_state ^= rng_state << 25; rng_state ^= rng_state >> 27;
  return rng_state * 0x2545F4914F6CDD1Dull;
}
static double rnd_unit(void) { return (double)(rnd() >> 11) / 9007199254740992.0; }
/* Signed values log-uniform over [2^lo, 2^hi). */
static float rnd_logu(double lo, double hi) {
  float v = (float)exp2(lo + (hi - lo) * rnd_unit());
  return (rnd() & 1) ? -v : v;
}

/* ------------------------------------------------------------------ reference */

/* E8M0 round-up from the definition: the smallest e in [0, 254] with 2^(e-127) >= v. */
static int ref_e8m0_ceil(float v) {
  if (isnan(v)) return 255;
  if (isinf(v)) return 254;
  double a = fabs((double)v);
  if (a == 0) return 0;
  for (int e = 0; e <= 254; e++)
    if (ldexp(1.0, e - 127) >= a) return e;
  return 254;
}

static int ref_mx_exponent(float b, fp8_format f, fp8_mx_rounding r) {
  if (isnan(b)) return 255;
  if (r == FP8_MX_ROUND_CEIL) {
    float rcp = (float)(1.0 / (double)fp8_format_max(f)); /* RN32(1/max), via double: same */
    volatile float v = b * rcp;
    return ref_e8m0_ceil(v);
  }
  if (isinf(b)) return 254;
  if (b == 0) return 0;
  double l = floor(log2((double)b)); /* exact for powers of two, subnormals too */
  int e = (int)l - (f == FP8_E4M3 ? 8 : 15) + 127;
  return e < 0 ? 0 : e > 254 ? 254 : e;
}

/* Current scaling per block, written out from RECIPES.md. */
static float ref_current_scale(float amax, fp8_format f, bool pow2, int margin, float eps) {
  float a = amax < eps ? eps : amax;
  if (isinf(a) || isnan(a) || a == 0) return 1.0f;
  float sm = (float)((double)fp8_format_max(f) * ldexp(1.0, -margin));
  float s = sm / a;
  if (isinf(s)) s = FLT_MAX;
  if (pow2) {
    int k;
    frexp((double)s, &k);
    s = (float)ldexp(1.0, k - 1);
  }
  return s;
}

static float ref_block_scale(const fp8_block_params *p, float amax) {
  if (p->kind == FP8_BLOCK_KIND_MXFP8)
    return (float)ldexp(1.0, 127 - ref_mx_exponent(amax, p->format, p->rounding));
  return ref_current_scale(amax, p->format, p->pow2, p->margin, p->amax_epsilon);
}

typedef struct {
  int64_t gr, gc;
  float *scales;        /* [gr * gc] */
  float *xhat;          /* [rows * cols] */
  fp8_stats st;
  int64_t ovf_blocks, scaled;
  double lmin, lmax, lstd;
} ref_result;

/* Block of element (i, j): its grid coordinates. */
static void ref_block_of(const fp8_block_params *p, fp8_block_dir dir, int64_t rows, int64_t cols,
                         int64_t i, int64_t j, int64_t *bi, int64_t *bj) {
  if (p->kind == FP8_BLOCK_KIND_ROWWISE) {
    *bi = dir == FP8_BLOCK_DIR_ROW ? i : 0;
    *bj = dir == FP8_BLOCK_DIR_ROW ? 0 : j;
  } else if (p->square) {
    *bi = i / p->block_len;
    *bj = j / p->block_len;
  } else if (dir == FP8_BLOCK_DIR_ROW) {
    *bi = i;
    *bj = j / p->block_len;
  } else {
    *bi = i / p->block_len;
    *bj = j;
  }
  (void)rows; (void)cols;
}

static void ref_quantize(const float *x, int64_t rows, int64_t cols, const fp8_block_params *p,
                         fp8_block_dir dir, ref_result *r) {
  int64_t L = p->block_len;
  if (p->kind == FP8_BLOCK_KIND_ROWWISE) {
    r->gr = dir == FP8_BLOCK_DIR_ROW ? rows : (rows > 0);
    r->gc = dir == FP8_BLOCK_DIR_ROW ? (cols > 0) : cols;
  } else if (p->square) {
    r->gr = (rows + L - 1) / L; r->gc = (cols + L - 1) / L;
  } else if (dir == FP8_BLOCK_DIR_ROW) {
    r->gr = rows; r->gc = (cols + L - 1) / L;
  } else {
    r->gr = (rows + L - 1) / L; r->gc = cols;
  }
  if (rows == 0 || cols == 0) r->gr = r->gc = 0;
  int64_t nb = r->gr * r->gc;
  float *amax = calloc((size_t)nb + 1, sizeof *amax);
  char *ovf = calloc((size_t)nb + 1, 1);
  r->scales = calloc((size_t)nb + 1, sizeof *r->scales);
  r->xhat = calloc((size_t)(rows * cols) + 1, sizeof *r->xhat);
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) {
      int64_t bi, bj;
      ref_block_of(p, dir, rows, cols, i, j, &bi, &bj);
      float a = fabsf(x[i * cols + j]);
      if (!isnan(a) && a > amax[bi * r->gc + bj]) amax[bi * r->gc + bj] = a;
    }
  for (int64_t b = 0; b < nb; b++) r->scales[b] = ref_block_scale(p, amax[b]);
  fp8_stats_init(&r->st);
  float fmax = fp8_format_max(p->format);
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) {
      int64_t bi, bj;
      ref_block_of(p, dir, rows, cols, i, j, &bi, &bj);
      float s = r->scales[bi * r->gc + bj];
      float xv = x[i * cols + j];
      volatile float y = xv * s;
      uint8_t q = ref_fp8_encode(y, p->format);
      float sinv = 1.0f / s;
      volatile float xh = (float)ref_fp8_value(q, p->format) * sinv;
      r->xhat[i * cols + j] = xh;
      r->st.n++;
      if (!isfinite(xv)) { r->st.nonfinite++; continue; }
      if (xv == 0) r->st.zeros++;
      if (fabsf(y) > fmax) { r->st.overflow++; ovf[bi * r->gc + bj] = 1; }
      if (xv != 0 && (q & 0x7F) == 0) r->st.underflow++;
      if (fp8_code_is_subnormal(q, p->format)) r->st.subnormal++;
      double d = (double)xv - (double)xh;
      r->st.sum_sq_err += d * d;
      r->st.sum_sq += (double)xv * (double)xv;
    }
  r->ovf_blocks = r->scaled = 0;
  double sum = 0, sumsq = 0;
  r->lmin = INFINITY; r->lmax = -INFINITY;
  for (int64_t b = 0; b < nb; b++) {
    r->ovf_blocks += ovf[b];
    if (!(amax[b] > 0) || isinf(amax[b])) continue;
    double l = log2((double)r->scales[b]);
    r->scaled++;
    sum += l; sumsq += l * l;
    if (l < r->lmin) r->lmin = l;
    if (l > r->lmax) r->lmax = l;
  }
  if (r->scaled) {
    double mean = sum / (double)r->scaled;
    double var = sumsq / (double)r->scaled - mean * mean;
    r->lstd = sqrt(var > 0 ? var : 0);
  } else {
    r->lmin = r->lmax = r->lstd = NAN;
  }
  free(amax);
  free(ovf);
}

static void ref_free(ref_result *r) { free(r->scales); free(r->xhat); }

static int same_float(float a, float b) { return (isnan(a) && isnan(b)) || f2u(a) == f2u(b); }

static int close_rel(double a, double b, double tol) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
  if (isinf(a) || isinf(b)) return a == b;
  return fabs(a - b) <= tol * fmax(fabs(a), fabs(b)) + 1e-300;
}

/* Runs the library and the reference on x and compares everything, element for element. */
static void check_against_ref(const float *x, int64_t rows, int64_t cols, const fp8_block_params *p,
                              fp8_block_dir dir, const char *what) {
  ref_result r;
  ref_quantize(x, rows, cols, p, dir, &r);
  int64_t gr = -1, gc = -1;
  ck_assert_int_eq(fp8_block_grid(p, dir, rows, cols, &gr, &gc), FP8_OK);
  ck_assert_msg(gr == r.gr && gc == r.gc, "%s: grid %lldx%lld, expected %lldx%lld", what,
                (long long)gr, (long long)gc, (long long)r.gr, (long long)r.gc);
  float *xhat = malloc((size_t)(rows * cols + 1) * sizeof *xhat);
  float *scales = malloc((size_t)(gr * gc + 1) * sizeof *scales);
  fp8_stats st;
  fp8_stats_init(&st);
  fp8_block_stats bst;
  ck_assert_int_eq(fp8_block_quantize_f32(x, rows, cols, p, dir, xhat, scales, &st, &bst), FP8_OK);
  for (int64_t b = 0; b < gr * gc; b++)
    ck_assert_msg(same_float(scales[b], r.scales[b]), "%s: block %lld scale %a, expected %a", what,
                  (long long)b, scales[b], r.scales[b]);
  for (int64_t i = 0; i < rows * cols; i++)
    ck_assert_msg(same_float(xhat[i], r.xhat[i]), "%s: element %lld (x=%a): xhat %a, expected %a",
                  what, (long long)i, x[i], xhat[i], r.xhat[i]);
  ck_assert_int_eq(st.n, r.st.n);
  ck_assert_int_eq(st.nonfinite, r.st.nonfinite);
  ck_assert_int_eq(st.zeros, r.st.zeros);
  ck_assert_msg(st.overflow == r.st.overflow, "%s: overflow %lld vs %lld", what,
                (long long)st.overflow, (long long)r.st.overflow);
  ck_assert_int_eq(st.underflow, r.st.underflow);
  ck_assert_int_eq(st.subnormal, r.st.subnormal);
  ck_assert_msg(close_rel(st.sum_sq_err, r.st.sum_sq_err, 1e-12), "%s: sum_sq_err %.17g vs %.17g",
                what, st.sum_sq_err, r.st.sum_sq_err);
  ck_assert(close_rel(st.sum_sq, r.st.sum_sq, 1e-12));
  ck_assert_int_eq(bst.nblocks, gr * gc);
  ck_assert_int_eq(bst.blocks_with_overflow, r.ovf_blocks);
  ck_assert_int_eq(bst.nblocks_scaled, r.scaled);
  ck_assert(close_rel(bst.log2_scale_min, r.lmin, 0));
  ck_assert(close_rel(bst.log2_scale_max, r.lmax, 0));
  ck_assert_msg(close_rel(bst.log2_scale_std, r.lstd, 1e-9) ||
                    fabs(bst.log2_scale_std - r.lstd) < 1e-9,
                "%s: std %.17g vs %.17g", what, bst.log2_scale_std, r.lstd);
  /* the same call without xhat and scales gives the same statistics */
  fp8_stats st2;
  fp8_stats_init(&st2);
  fp8_block_stats bst2;
  ck_assert_int_eq(fp8_block_quantize_f32(x, rows, cols, p, dir, NULL, NULL, &st2, &bst2), FP8_OK);
  ck_assert(memcmp(&st, &st2, sizeof st) == 0);
  ck_assert_int_eq(bst2.blocks_with_overflow, bst.blocks_with_overflow);
  free(xhat);
  free(scales);
  ref_free(&r);
}

/* ------------------------------------------------------------------ E8M0 */

START_TEST(test_e8m0_ceil_hand) {
  struct { uint32_t bits; uint8_t e; } cases[] = {
      {0x3F800000u, 127},  /* 1.0 exactly: no rounding up */
      {0x3F800001u, 128},  /* just above 1 */
      {0x3FC00000u, 128},  /* 1.5 */
      {0x40000000u, 128},  /* 2.0 */
      {0xBFC00000u, 128},  /* -1.5: sign ignored */
      {0x00000000u, 0},    {0x80000000u, 0},
      {0x00000001u, 0},    /* 2^-149 */
      {0x00400000u, 0},    /* 2^-127 = E8M0's smallest value, exactly */
      {0x00400001u, 1},    /* just above 2^-127 */
      {0x00124925u, 0},    /* 2^-120 * RN32(1/448) */
      {0x00492492u, 1},    /* 2^-118 * RN32(1/448) */
      {0x00800000u, 1},    /* 2^-126 (min normal) */
      {0x00800001u, 2},
      {0x7F000000u, 254},  /* 2^127 */
      {0x7F000001u, 254},  /* above 2^127: saturates at 0xFE, never the NaN code */
      {0x7F7FFFFFu, 254},  /* FLT_MAX */
      {0x7F800000u, 254},  /* inf */
      {0xFF800000u, 254},  /* -inf */
      {0x7FC00000u, 255},  /* NaN */
      {0x7B124924u, 247},  /* FLT_MAX * RN32(1/448) */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    float v = u2f(cases[i].bits);
    ck_assert_msg(fp8_e8m0_ceil(v) == cases[i].e, "case %zu: e8m0_ceil(%a) = %d, expected %d", i, v,
                  fp8_e8m0_ceil(v), cases[i].e);
    ck_assert_int_eq(fp8_e8m0_ceil(v), ref_e8m0_ceil(v));
  }
}
END_TEST

START_TEST(test_e8m0_ceil_vs_definition) {
  /* random bit patterns over the whole float32 range, plus the powers of two and neighbours */
  for (int i = 0; i < 200000; i++) {
    float v = u2f((uint32_t)rnd());
    ck_assert_msg(fp8_e8m0_ceil(v) == ref_e8m0_ceil(v), "e8m0_ceil(%a)", v);
  }
  for (int k = -149; k <= 127; k++) {
    float p = ldexpf(1.0f, k);
    float vs[3] = {p, nextafterf(p, 0), nextafterf(p, INFINITY)};
    for (int j = 0; j < 3; j++) ck_assert_int_eq(fp8_e8m0_ceil(vs[j]), ref_e8m0_ceil(vs[j]));
    if (k >= -127) ck_assert_int_eq(fp8_e8m0_ceil(p), k + 127); /* exact powers: no round-up */
  }
}
END_TEST

START_TEST(test_e8m0_scale_limits) {
  ck_assert_uint_eq(f2u(fp8_e8m0_scale(127)), 0x3F800000u); /* 1 */
  ck_assert_uint_eq(f2u(fp8_e8m0_scale(0)), 0x7F000000u);   /* 2^127: amax 0 blocks */
  ck_assert_uint_eq(f2u(fp8_e8m0_scale(1)), 0x7E800000u);   /* 2^126 */
  ck_assert_uint_eq(f2u(fp8_e8m0_scale(253)), 0x00800000u); /* 2^-126 (min normal) */
  ck_assert_uint_eq(f2u(fp8_e8m0_scale(254)), 0x00400000u); /* 2^-127: subnormal, exact */
  ck_assert_uint_eq(f2u(fp8_e8m0_scale(255)), 0x00200000u); /* 2^-128 (the NaN code) */
  for (int e = 0; e < 256; e++) {
    float s = fp8_e8m0_scale((uint8_t)e);
    ck_assert((double)s == ldexp(1.0, 127 - e));
    /* dequantization's RN32(1/s) is exact up to 254 and overflows to inf for 255 */
    float inv = 1.0f / s;
    if (e <= 254) ck_assert((double)inv == ldexp(1.0, e - 127));
    else ck_assert(isinf(inv));
  }
}
END_TEST

START_TEST(test_mx_exponent_ceil_floor) {
  fp8_mx_rounding C = FP8_MX_ROUND_CEIL, F = FP8_MX_ROUND_FLOOR;
  /* exact powers of two: both rules agree, e = k + 119 (E4M3) and k + 112 (E5M2) */
  for (int k = -100; k <= 127; k++) {
    float b = ldexpf(1.0f, k);
    ck_assert_int_eq(fp8_mx_scale_exponent(b, FP8_E4M3, C), k + 119);
    ck_assert_int_eq(fp8_mx_scale_exponent(b, FP8_E4M3, F), k + 119);
    ck_assert_int_eq(fp8_mx_scale_exponent(b, FP8_E5M2, C), k + 112);
    ck_assert_int_eq(fp8_mx_scale_exponent(b, FP8_E5M2, F), k + 112);
  }
  /* b = fp8_max: 448 * RN32(1/448) rounds to exactly 1 -> e 127, elements reach 448 */
  ck_assert_int_eq(fp8_mx_scale_exponent(448.0f, FP8_E4M3, C), 127);
  ck_assert_int_eq(fp8_mx_scale_exponent(448.0f, FP8_E4M3, F), 127);
  ck_assert_int_eq(fp8_mx_scale_exponent(57344.0f, FP8_E5M2, C), 127);
  ck_assert_int_eq(fp8_mx_scale_exponent(57344.0f, FP8_E5M2, F), 127);
  /* (448, 512): ceil scales down one more power (no overflow), floor overflows */
  ck_assert_int_eq(fp8_mx_scale_exponent(480.0f, FP8_E4M3, C), 128);
  ck_assert_int_eq(fp8_mx_scale_exponent(480.0f, FP8_E4M3, F), 127);
  ck_assert_int_eq(fp8_mx_scale_exponent(nextafterf(448.0f, 1e9f), FP8_E4M3, C), 128);
  ck_assert_int_eq(fp8_mx_scale_exponent(511.0f, FP8_E4M3, F), 127);
  /* [256, 448]: the same exponent either way; 255: floor one lower */
  ck_assert_int_eq(fp8_mx_scale_exponent(256.0f, FP8_E4M3, C), 127);
  ck_assert_int_eq(fp8_mx_scale_exponent(255.0f, FP8_E4M3, C), 127);
  ck_assert_int_eq(fp8_mx_scale_exponent(255.0f, FP8_E4M3, F), 126);
  /* special values and limits */
  for (int r = 0; r < 2; r++)
    for (int f = 0; f < 2; f++) {
      ck_assert_int_eq(fp8_mx_scale_exponent(0.0f, (fp8_format)f, (fp8_mx_rounding)r), 0);
      ck_assert_int_eq(fp8_mx_scale_exponent(INFINITY, (fp8_format)f, (fp8_mx_rounding)r), 254);
      ck_assert_int_eq(fp8_mx_scale_exponent(NAN, (fp8_format)f, (fp8_mx_rounding)r), 255);
      ck_assert_int_eq(fp8_mx_scale_exponent(0x1p-149f, (fp8_format)f, (fp8_mx_rounding)r), 0);
    }
  /* largest finite amax: never the saturated codes */
  ck_assert_int_eq(fp8_mx_scale_exponent(FLT_MAX, FP8_E4M3, C), 247);
  ck_assert_int_eq(fp8_mx_scale_exponent(FLT_MAX, FP8_E4M3, F), 246);
  ck_assert_int_eq(fp8_mx_scale_exponent(FLT_MAX, FP8_E5M2, C), 240);
  ck_assert_int_eq(fp8_mx_scale_exponent(FLT_MAX, FP8_E5M2, F), 239);
  /* tiny amax: b * RN32(1/448) subnormal. 2^-120 -> v <= 2^-127 -> e 0 (scale 2^127: the block
   * becomes exactly 128); 2^-118 -> e 1 (scale 2^126: 256). Floor clamps at 0. */
  ck_assert_int_eq(fp8_mx_scale_exponent(0x1p-120f, FP8_E4M3, C), 0);
  ck_assert_int_eq(fp8_mx_scale_exponent(0x1p-119f, FP8_E4M3, C), 0);
  ck_assert_int_eq(fp8_mx_scale_exponent(0x1p-118f, FP8_E4M3, C), 1);
  ck_assert_int_eq(fp8_mx_scale_exponent(0x1p-118f, FP8_E4M3, F), 1);
  ck_assert_int_eq(fp8_mx_scale_exponent(0x1p-130f, FP8_E4M3, F), 0);
  ck_assert_int_eq(fp8_mx_scale_exponent(0x1p-130f, FP8_E4M3, C), 0);
  /* against the definition over random amaxes, all magnitudes */
  for (int i = 0; i < 100000; i++) {
    float b = fabsf(u2f((uint32_t)rnd() & 0x7FFFFFFFu));
    if (isnan(b)) continue;
    for (int r = 0; r < 2; r++)
      for (int f = 0; f < 2; f++)
        ck_assert_msg(fp8_mx_scale_exponent(b, (fp8_format)f, (fp8_mx_rounding)r) ==
                          ref_mx_exponent(b, (fp8_format)f, (fp8_mx_rounding)r),
                      "b=%a f=%d r=%d", b, f, r);
  }
}
END_TEST

/* ------------------------------------------------------------------ parameters and shapes */

START_TEST(test_params_names_shapes) {
  fp8_block_params p = fp8_block_params_mxfp8(FP8_E4M3, FP8_MX_ROUND_CEIL);
  ck_assert_int_eq(p.block_len, 32);
  ck_assert_int_eq(fp8_block_params_check(&p), FP8_OK);
  p.margin = 1;
  ck_assert_int_eq(fp8_block_params_check(&p), FP8_EINVAL); /* MXFP8 has no margin */
  p.margin = 0; p.amax_epsilon = 1e-3f;
  ck_assert_int_eq(fp8_block_params_check(&p), FP8_EINVAL);
  p.amax_epsilon = 0; p.square = true;
  ck_assert_int_eq(fp8_block_params_check(&p), FP8_EINVAL);
  p = fp8_block_params_tile(FP8_E5M2, true, true, FP8_DTYPE_F32);
  ck_assert(p.block_len == 128 && p.square && p.pow2);
  p.margin = 65;
  ck_assert_int_eq(fp8_block_params_check(&p), FP8_EINVAL);
  p.margin = 2; p.amax_epsilon = 1e-3f;
  ck_assert_int_eq(fp8_block_params_check(&p), FP8_OK);
  p.block_len = 0;
  ck_assert_int_eq(fp8_block_params_check(&p), FP8_EINVAL);
  p = fp8_block_params_rowwise(FP8_E4M3, true);
  ck_assert_int_eq(fp8_block_params_check(&p), FP8_OK);
  p.block_len = 128;
  ck_assert_int_eq(fp8_block_params_check(&p), FP8_EINVAL);
  ck_assert_int_eq(fp8_block_params_check(NULL), FP8_EINVAL);

  fp8_block_kind k;
  ck_assert(fp8_block_kind_parse("MXFP8", &k) == FP8_OK && k == FP8_BLOCK_KIND_MXFP8);
  ck_assert(fp8_block_kind_parse("rowwise", &k) == FP8_OK && k == FP8_BLOCK_KIND_ROWWISE);
  ck_assert_int_eq(fp8_block_kind_parse("tile", &k), FP8_EINVAL);
  ck_assert_str_eq(fp8_block_kind_name(FP8_BLOCK_KIND_BLOCK), "block");
  fp8_mx_rounding r;
  ck_assert(fp8_mx_rounding_parse("floor", &r) == FP8_OK && r == FP8_MX_ROUND_FLOOR);
  ck_assert_int_eq(fp8_mx_rounding_parse("nearest", &r), FP8_EINVAL);
  ck_assert_str_eq(fp8_mx_rounding_name(FP8_MX_ROUND_CEIL), "ceil");
  fp8_block_shape s;
  ck_assert(fp8_block_shape_parse("auto", &s) == FP8_OK && s == FP8_BLOCK_SHAPE_AUTO);
  ck_assert(fp8_block_shape_is_square(s, FP8_ROLE_WEIGHT));
  ck_assert(!fp8_block_shape_is_square(s, FP8_ROLE_INPUT));
  ck_assert(!fp8_block_shape_is_square(s, FP8_ROLE_GRAD_OUTPUT));
  ck_assert(!fp8_block_shape_is_square(FP8_BLOCK_SHAPE_1X128, FP8_ROLE_WEIGHT));
  ck_assert(fp8_block_shape_is_square(FP8_BLOCK_SHAPE_128X128, FP8_ROLE_OUTPUT));
  ck_assert_int_eq(fp8_block_shape_parse("128x1", &s), FP8_EINVAL);
  ck_assert_str_eq(fp8_block_shape_name(FP8_BLOCK_SHAPE_128X128), "128x128");

  int64_t rows, cols;
  int64_t sh3[3] = {2, 3, 4}, sh1[1] = {5}, sh0[2] = {0, 4}, shz[2] = {3, 0}, bad[2] = {-1, 2};
  ck_assert(fp8_block_view_2d(sh3, 3, &rows, &cols) == FP8_OK && rows == 6 && cols == 4);
  ck_assert(fp8_block_view_2d(sh1, 1, &rows, &cols) == FP8_OK && rows == 1 && cols == 5);
  ck_assert(fp8_block_view_2d(NULL, 0, &rows, &cols) == FP8_OK && rows == 1 && cols == 1);
  ck_assert(fp8_block_view_2d(sh0, 2, &rows, &cols) == FP8_OK && rows == 0 && cols == 4);
  ck_assert(fp8_block_view_2d(shz, 2, &rows, &cols) == FP8_OK && rows == 3 && cols == 0);
  ck_assert_int_eq(fp8_block_view_2d(bad, 2, &rows, &cols), FP8_EINVAL);
  int64_t huge[3] = {1ll << 40, 1ll << 20, 1ll << 10};
  ck_assert_int_eq(fp8_block_view_2d(huge, 3, &rows, &cols), FP8_ERANGE);

  /* grids: partial blocks are blocks of their own */
  int64_t gr, gc;
  fp8_block_params mx = fp8_block_params_mxfp8(FP8_E4M3, FP8_MX_ROUND_CEIL);
  fp8_block_params t1 = fp8_block_params_tile(FP8_E4M3, false, true, FP8_DTYPE_F32);
  fp8_block_params t2 = fp8_block_params_tile(FP8_E4M3, true, true, FP8_DTYPE_F32);
  fp8_block_params rw = fp8_block_params_rowwise(FP8_E4M3, true);
  ck_assert(fp8_block_grid(&mx, FP8_BLOCK_DIR_ROW, 3, 70, &gr, &gc) == 0 && gr == 3 && gc == 3);
  ck_assert(fp8_block_grid(&mx, FP8_BLOCK_DIR_COL, 70, 3, &gr, &gc) == 0 && gr == 3 && gc == 3);
  ck_assert(fp8_block_grid(&t1, FP8_BLOCK_DIR_ROW, 5, 300, &gr, &gc) == 0 && gr == 5 && gc == 3);
  ck_assert(fp8_block_grid(&t2, FP8_BLOCK_DIR_ROW, 200, 130, &gr, &gc) == 0 && gr == 2 && gc == 2);
  ck_assert(fp8_block_grid(&t2, FP8_BLOCK_DIR_COL, 200, 130, &gr, &gc) == 0 && gr == 2 && gc == 2);
  ck_assert(fp8_block_grid(&rw, FP8_BLOCK_DIR_ROW, 7, 9, &gr, &gc) == 0 && gr == 7 && gc == 1);
  ck_assert(fp8_block_grid(&rw, FP8_BLOCK_DIR_COL, 7, 9, &gr, &gc) == 0 && gr == 1 && gc == 9);
  ck_assert(fp8_block_grid(&rw, FP8_BLOCK_DIR_ROW, 7, 0, &gr, &gc) == 0 && gr == 7 && gc == 0);
  ck_assert_int_eq(fp8_block_grid(&rw, FP8_BLOCK_DIR_ROW, -1, 3, &gr, &gc), FP8_EINVAL);
}
END_TEST

/* ------------------------------------------------------------------ tensors, by hand */

START_TEST(test_mx_hand_blocks) {
  /* one row of 4 blocks of 4 (block_len 4 for readability) + a partial block of 2, E4M3 ceil:
   * amaxes 448 (e 127, scale 1), 896 (e 128, scale 1/2), 0 (e 0, scale 2^127), 480 (e 128),
   * and {inf, 3}: e 0xFE, scale 2^-127, 3 * 2^-127 flushes to zero. */
  fp8_block_params p = fp8_block_params_mxfp8(FP8_E4M3, FP8_MX_ROUND_CEIL);
  p.block_len = 4;
  float x[18] = {448, -1, 0.5f, 2,  896, 3, -5, 7,  0, -0.0f, 0, 0,  480, 1, NAN, -2,  INFINITY, 3};
  float xhat[18], sc[5];
  fp8_stats st;
  fp8_stats_init(&st);
  fp8_block_stats b;
  ck_assert_int_eq(fp8_block_quantize_f32(x, 1, 18, &p, FP8_BLOCK_DIR_ROW, xhat, sc, &st, &b), 0);
  float want_sc[5] = {1.0f, 0.5f, 0x1p127f, 0.5f, 0x1p-127f};
  for (int i = 0; i < 5; i++) ck_assert_msg(sc[i] == want_sc[i], "block %d: %a", i, sc[i]);
  float want[18] = {448, -1, 0.5f, 2,  896, 3, -5, 7,  0, -0.0f, 0, 0,  480, 1, NAN, -2,  INFINITY, 0};
  for (int i = 0; i < 18; i++)
    ck_assert_msg(same_float(xhat[i], want[i]), "element %d: %a expected %a", i, xhat[i], want[i]);
  ck_assert_int_eq(st.n, 18);
  ck_assert_int_eq(st.nonfinite, 2);
  ck_assert_int_eq(st.zeros, 4);
  ck_assert_int_eq(st.overflow, 0);
  ck_assert_int_eq(st.underflow, 1); /* the 3 next to the inf */
  ck_assert(st.sum_sq_err == 9.0);
  ck_assert_int_eq(b.nblocks, 5);
  ck_assert_int_eq(b.blocks_with_overflow, 0);
  ck_assert_int_eq(b.nblocks_scaled, 3); /* the all-zero and the inf block are left out */
  ck_assert(b.log2_scale_min == -1.0 && b.log2_scale_max == 0.0);
  ck_assert(fabs(b.log2_scale_std - sqrt(2.0) / 3.0) < 1e-15); /* {0, -1, -1} */

  /* floor: 480 keeps scale 1 and saturates to 448 (an overflow), 896 -> 2^(9-8): scale 1/2 */
  p.rounding = FP8_MX_ROUND_FLOOR;
  fp8_stats_init(&st);
  ck_assert_int_eq(fp8_block_quantize_f32(x, 1, 18, &p, FP8_BLOCK_DIR_ROW, xhat, sc, &st, &b), 0);
  ck_assert(sc[3] == 1.0f && sc[1] == 0.5f && sc[0] == 1.0f);
  ck_assert(xhat[12] == 448.0f);
  ck_assert_int_eq(st.overflow, 1);
  ck_assert_int_eq(b.blocks_with_overflow, 1);
}
END_TEST

START_TEST(test_mx_tiny_and_huge_blocks) {
  /* E8M0 saturation seen through a tensor: a block of 2^-120 gets e 0 (scale 2^127) and is
   * represented exactly; a block of 2^-149 too (e 0), where 2^-149 * 2^127 = 2^-22 flushes. */
  fp8_block_params p = fp8_block_params_mxfp8(FP8_E4M3, FP8_MX_ROUND_CEIL);
  float x[64];
  for (int i = 0; i < 32; i++) x[i] = (i & 1) ? -0x1p-120f : 0x1p-121f;
  for (int i = 32; i < 64; i++) x[i] = 0x1p-149f;
  float xhat[64], sc[2];
  fp8_stats st;
  fp8_stats_init(&st);
  fp8_block_stats b;
  ck_assert_int_eq(fp8_block_quantize_f32(x, 1, 64, &p, FP8_BLOCK_DIR_ROW, xhat, sc, &st, &b), 0);
  ck_assert(sc[0] == 0x1p127f && sc[1] == 0x1p127f);
  for (int i = 0; i < 32; i++) ck_assert(xhat[i] == x[i]);
  for (int i = 32; i < 64; i++) ck_assert(xhat[i] == 0.0f);
  ck_assert_int_eq(st.underflow, 32);
  ck_assert(b.log2_scale_min == 127.0 && b.log2_scale_max == 127.0 && b.log2_scale_std == 0.0);
  /* huge: FLT_MAX with E4M3 ceil -> e 247, scale 2^-120, FLT_MAX * 2^-120 = 256 - 2^-16 -> 256 */
  for (int i = 0; i < 32; i++) x[i] = i == 5 ? FLT_MAX : 1e30f;
  fp8_stats_init(&st);
  ck_assert_int_eq(fp8_block_quantize_f32(x, 1, 32, &p, FP8_BLOCK_DIR_ROW, xhat, sc, &st, &b), 0);
  ck_assert(sc[0] == 0x1p-120f);
  /* 256 * 2^120 = 2^128 is not a float32: the dequantized value overflows to inf, an infinite
   * error; the statistics say so (the block is at the edge of float32, not of FP8) */
  ck_assert(isinf(xhat[5]));
  ck_assert_int_eq(st.overflow, 0);
  /* floor: e 246, scale 2^-119, FLT_MAX * 2^-119 ~ 512 saturates to 448 */
  p.rounding = FP8_MX_ROUND_FLOOR;
  fp8_stats_init(&st);
  ck_assert_int_eq(fp8_block_quantize_f32(x, 1, 32, &p, FP8_BLOCK_DIR_ROW, xhat, sc, &st, &b), 0);
  ck_assert(sc[0] == 0x1p-119f);
  ck_assert(xhat[5] == ldexpf(448.0f, 119));
  ck_assert_int_eq(st.overflow, 1);
}
END_TEST

START_TEST(test_block_pow2_truncation) {
  /* 1x4 tiles (block_len 4), E4M3: amaxes 3, 100, 0 and a partial tile {inf, 1} */
  fp8_block_params p = fp8_block_params_tile(FP8_E4M3, false, true, FP8_DTYPE_F32);
  p.block_len = 4;
  float x[14] = {3, 1, -2, 0.5f,  100, -50, 25, 1,  0, 0, 0, 0,  INFINITY, 1};
  float sc[4];
  fp8_block_stats b;
  ck_assert_int_eq(fp8_block_quantize_f32(x, 1, 14, &p, FP8_BLOCK_DIR_ROW, NULL, sc, NULL, &b), 0);
  ck_assert(sc[0] == 128.0f); /* 448/3 = 149.33 truncated */
  ck_assert(sc[1] == 4.0f);   /* 4.48 */
  ck_assert(sc[2] == 1.0f && sc[3] == 1.0f); /* amax 0 and inf: scale 1 */
  ck_assert(b.nblocks == 4 && b.nblocks_scaled == 2 && b.log2_scale_min == 2.0 &&
            b.log2_scale_max == 7.0 && b.log2_scale_std == 2.5);
  p.pow2 = false;
  ck_assert_int_eq(fp8_block_quantize_f32(x, 1, 14, &p, FP8_BLOCK_DIR_ROW, NULL, sc, NULL, &b), 0);
  ck_assert_uint_eq(f2u(sc[0]), f2u(448.0f / 3.0f));
  ck_assert_uint_eq(f2u(sc[1]), f2u(4.48f));
  /* margin and epsilon as in current scaling */
  p.margin = 1;
  p.amax_epsilon = 1e-3f;
  ck_assert_int_eq(fp8_block_quantize_f32(x, 1, 14, &p, FP8_BLOCK_DIR_ROW, NULL, sc, NULL, &b), 0);
  ck_assert_uint_eq(f2u(sc[0]), f2u(224.0f / 3.0f));
  ck_assert_uint_eq(f2u(sc[2]), f2u(224.0f / 1e-3f)); /* amax 0 raised to eps */
  ck_assert_int_eq(b.nblocks_scaled, 2);               /* still left out of the spread */
}
END_TEST

START_TEST(test_rowwise_and_colwise_hand) {
  /* 3x2: rows {1, -448}, {0, 0}, {7, 2}; rowwise pow2 E4M3 -> scales 1, 1, 64;
   * column-wise -> columns {1, 0, 7} (448/7 = 64) and {-448, 0, 2} (1) */
  fp8_block_params p = fp8_block_params_rowwise(FP8_E4M3, true);
  float x[6] = {1, -448, 0, 0, 7, 2}, sc[3], xhat[6];
  fp8_block_stats b;
  fp8_stats st;
  fp8_stats_init(&st);
  ck_assert_int_eq(fp8_block_quantize_f32(x, 3, 2, &p, FP8_BLOCK_DIR_ROW, xhat, sc, &st, &b), 0);
  ck_assert(sc[0] == 1.0f && sc[1] == 1.0f && sc[2] == 64.0f);
  ck_assert(b.nblocks == 3 && b.nblocks_scaled == 2);
  ck_assert_int_eq(fp8_block_quantize_f32(x, 3, 2, &p, FP8_BLOCK_DIR_COL, xhat, sc, &st, &b), 0);
  ck_assert(sc[0] == 64.0f && sc[1] == 1.0f);
  for (int i = 0; i < 6; i++) ck_assert(xhat[i] == x[i]);
  ck_assert_int_eq(st.n, 12); /* accumulated over both calls */
}
END_TEST

START_TEST(test_empty_and_errors) {
  fp8_block_params p = fp8_block_params_mxfp8(FP8_E5M2, FP8_MX_ROUND_CEIL);
  fp8_stats st;
  fp8_stats_init(&st);
  fp8_block_stats b;
  for (int d = 0; d < 2; d++) {
    ck_assert_int_eq(fp8_block_quantize_f32(NULL, 0, 5, &p, (fp8_block_dir)d, NULL, NULL, &st, &b), 0);
    ck_assert(b.nblocks == 0 && b.nblocks_scaled == 0 && isnan(b.log2_scale_std) &&
              isnan(b.log2_scale_min) && isnan(b.log2_scale_max));
    ck_assert_int_eq(fp8_block_quantize_f32(NULL, 4, 0, &p, (fp8_block_dir)d, NULL, NULL, &st, &b), 0);
    ck_assert(b.nblocks == 0);
  }
  ck_assert_int_eq(st.n, 0);
  float x[2] = {1, 2};
  ck_assert_int_eq(fp8_block_quantize_f32(NULL, 1, 2, &p, FP8_BLOCK_DIR_ROW, NULL, NULL, &st, &b),
                   FP8_EINVAL);
  ck_assert_int_eq(fp8_block_quantize_f32(x, -1, 2, &p, FP8_BLOCK_DIR_ROW, NULL, NULL, &st, &b),
                   FP8_EINVAL);
  p.margin = 3;
  ck_assert_int_eq(fp8_block_quantize_f32(x, 1, 2, &p, FP8_BLOCK_DIR_ROW, NULL, NULL, &st, &b),
                   FP8_EINVAL);
  ck_assert_int_eq(st.n, 0);
}
END_TEST

/* ------------------------------------------------------------------ tensors vs the reference */

/* Rows of varying magnitude (so that blocks differ), with zero runs, NaN, inf, tiny values. */
static float *make_tensor(int64_t rows, int64_t cols, int specials) {
  float *x = malloc((size_t)(rows * cols + 1) * sizeof *x);
  for (int64_t i = 0; i < rows; i++) {
    double base = -20 + 40 * rnd_unit();
    for (int64_t j = 0; j < cols; j++) {
      double col_base = (j % 37 == 3) ? 6 : 0; /* outlier channels */
      x[i * cols + j] = rnd_logu(base + col_base - 8, base + col_base);
    }
  }
  if (specials && rows * cols > 0) {
    for (int64_t j = 0; j < cols && j < 40; j++) x[j] = 0.0f;        /* a zero run in row 0 */
    x[(rows * cols) / 2] = NAN;
    x[(rows * cols) / 3] = (rnd() & 1) ? INFINITY : -INFINITY;
    x[rows * cols - 1] = 0x1p-140f;
    x[(rows * cols) / 5] = 3e38f;
  }
  return x;
}

START_TEST(test_random_vs_reference) {
  struct { int64_t rows, cols; } shapes[] = {
      {1, 1}, {1, 31}, {3, 70}, {5, 300}, {33, 65}, {129, 130}, {257, 40}, {64, 33}};
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
    int64_t rows = shapes[si].rows, cols = shapes[si].cols;
    for (int specials = 0; specials < 2; specials++) {
      float *x = make_tensor(rows, cols, specials);
      for (int f = 0; f < 2; f++) {
        fp8_block_params ps[7] = {
            fp8_block_params_mxfp8((fp8_format)f, FP8_MX_ROUND_CEIL),
            fp8_block_params_mxfp8((fp8_format)f, FP8_MX_ROUND_FLOOR),
            fp8_block_params_tile((fp8_format)f, false, true, FP8_DTYPE_F32),
            fp8_block_params_tile((fp8_format)f, true, true, FP8_DTYPE_F32),
            fp8_block_params_tile((fp8_format)f, false, false, FP8_DTYPE_F32),
            fp8_block_params_rowwise((fp8_format)f, true),
            fp8_block_params_rowwise((fp8_format)f, false),
        };
        ps[4].margin = 1;
        ps[4].amax_epsilon = 1e-30f;
        for (int k = 0; k < 7; k++)
          for (int d = 0; d < 2; d++) {
            char what[160];
            snprintf(what, sizeof what, "%lldx%lld specials %d %s kind %s len %lld sq %d dir %d",
                     (long long)rows, (long long)cols, specials, fp8_format_name((fp8_format)f),
                     fp8_block_kind_name(ps[k].kind), (long long)ps[k].block_len, ps[k].square, d);
            check_against_ref(x, rows, cols, &ps[k], (fp8_block_dir)d, what);
          }
      }
      free(x);
    }
  }
}
END_TEST

START_TEST(test_square_same_both_directions) {
  /* a 128x128 block is the same block in both directions: identical results, bit for bit */
  int64_t rows = 200, cols = 300;
  float *x = make_tensor(rows, cols, 1);
  fp8_block_params p = fp8_block_params_tile(FP8_E4M3, true, true, FP8_DTYPE_F32);
  float *h1 = malloc((size_t)(rows * cols) * sizeof *h1), *h2 = malloc((size_t)(rows * cols) * sizeof *h2);
  float s1[6], s2[6];
  fp8_stats a, b;
  fp8_stats_init(&a);
  fp8_stats_init(&b);
  fp8_block_stats ba, bb;
  ck_assert_int_eq(fp8_block_quantize_f32(x, rows, cols, &p, FP8_BLOCK_DIR_ROW, h1, s1, &a, &ba), 0);
  ck_assert_int_eq(fp8_block_quantize_f32(x, rows, cols, &p, FP8_BLOCK_DIR_COL, h2, s2, &b, &bb), 0);
  ck_assert(memcmp(h1, h2, (size_t)(rows * cols) * sizeof *h1) == 0);
  ck_assert(memcmp(s1, s2, sizeof s1) == 0);
  ck_assert(memcmp(&a, &b, sizeof a) == 0);
  ck_assert(memcmp(&ba, &bb, sizeof ba) == 0);
  ck_assert_int_eq(ba.nblocks, 6);
  free(h1); free(h2); free(x);
}
END_TEST

START_TEST(test_colwise_equals_rowwise_of_transpose) {
  /* DIR_COL on x equals DIR_ROW on x^T (element for element, scales transposed), also for a
   * tall matrix whose column panels need several slabs */
  int64_t rows = 300, cols = 150;
  float *x = make_tensor(rows, cols, 1);
  float *xt = malloc((size_t)(rows * cols) * sizeof *xt);
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) xt[j * rows + i] = x[i * cols + j];
  fp8_block_params ps[3] = {fp8_block_params_mxfp8(FP8_E4M3, FP8_MX_ROUND_CEIL),
                            fp8_block_params_tile(FP8_E5M2, false, true, FP8_DTYPE_F32),
                            fp8_block_params_rowwise(FP8_E4M3, false)};
  float *h = malloc((size_t)(rows * cols) * sizeof *h), *ht = malloc((size_t)(rows * cols) * sizeof *ht);
  float *s = malloc((size_t)(rows * cols) * sizeof *s), *st_ = malloc((size_t)(rows * cols) * sizeof *st_);
  for (int k = 0; k < 3; k++) {
    fp8_stats a, b;
    fp8_stats_init(&a);
    fp8_stats_init(&b);
    fp8_block_stats ba, bb;
    int64_t gr, gc;
    ck_assert_int_eq(fp8_block_grid(&ps[k], FP8_BLOCK_DIR_COL, rows, cols, &gr, &gc), 0);
    ck_assert_int_eq(fp8_block_quantize_f32(x, rows, cols, &ps[k], FP8_BLOCK_DIR_COL, h, s, &a, &ba), 0);
    ck_assert_int_eq(fp8_block_quantize_f32(xt, cols, rows, &ps[k], FP8_BLOCK_DIR_ROW, ht, st_, &b, &bb), 0);
    for (int64_t i = 0; i < rows; i++)
      for (int64_t j = 0; j < cols; j++) ck_assert(same_float(h[i * cols + j], ht[j * rows + i]));
    for (int64_t bi = 0; bi < gr; bi++)
      for (int64_t bj = 0; bj < gc; bj++) ck_assert(same_float(s[bi * gc + bj], st_[bj * gr + bi]));
    ck_assert(a.n == b.n && a.overflow == b.overflow && a.underflow == b.underflow &&
              a.subnormal == b.subnormal && a.nonfinite == b.nonfinite && a.zeros == b.zeros);
    ck_assert(close_rel(a.sum_sq_err, b.sum_sq_err, 1e-12));
    ck_assert(ba.nblocks == bb.nblocks && ba.blocks_with_overflow == bb.blocks_with_overflow &&
              ba.nblocks_scaled == bb.nblocks_scaled && ba.log2_scale_min == bb.log2_scale_min &&
              ba.log2_scale_max == bb.log2_scale_max);
  }
  free(x); free(xt); free(h); free(ht); free(s); free(st_);
}
END_TEST

START_TEST(test_mx_matches_current_equivalent_on_uniform_blocks) {
  /* Sanity across recipes: per-element scale = its block's scale. With every block's amax a
   * power of two times 448, MX ceil and block-pow2 scaling give the same scales. */
  fp8_block_params mx = fp8_block_params_mxfp8(FP8_E4M3, FP8_MX_ROUND_CEIL);
  fp8_block_params bl = fp8_block_params_tile(FP8_E4M3, false, true, FP8_DTYPE_F32);
  bl.block_len = 32;
  float x[128], s1[4], s2[4];
  for (int i = 0; i < 128; i++) x[i] = (i % 32 == 0) ? ldexpf(448.0f, i / 32 - 2) : (float)(i % 7) - 3;
  ck_assert_int_eq(fp8_block_quantize_f32(x, 1, 128, &mx, FP8_BLOCK_DIR_ROW, NULL, s1, NULL, NULL), 0);
  ck_assert_int_eq(fp8_block_quantize_f32(x, 1, 128, &bl, FP8_BLOCK_DIR_ROW, NULL, s2, NULL, NULL), 0);
  for (int i = 0; i < 4; i++) ck_assert_msg(s1[i] == s2[i] && s1[i] == ldexpf(1.0f, 2 - i), "%d", i);
}
END_TEST

int main(void) {
  Suite *s = suite_create("block");
  TCase *tc = tcase_create("e8m0");
  tcase_add_test(tc, test_e8m0_ceil_hand);
  tcase_add_test(tc, test_e8m0_ceil_vs_definition);
  tcase_add_test(tc, test_e8m0_scale_limits);
  tcase_add_test(tc, test_mx_exponent_ceil_floor);
  suite_add_tcase(s, tc);
  tc = tcase_create("params");
  tcase_add_test(tc, test_params_names_shapes);
  suite_add_tcase(s, tc);
  tc = tcase_create("tensors");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, test_mx_hand_blocks);
  tcase_add_test(tc, test_mx_tiny_and_huge_blocks);
  tcase_add_test(tc, test_block_pow2_truncation);
  tcase_add_test(tc, test_rowwise_and_colwise_hand);
  tcase_add_test(tc, test_empty_and_errors);
  tcase_add_test(tc, test_random_vs_reference);
  tcase_add_test(tc, test_square_same_both_directions);
  tcase_add_test(tc, test_colwise_equals_rowwise_of_transpose);
  tcase_add_test(tc, test_mx_matches_current_equivalent_on_uniform_blocks);
  suite_add_tcase(s, tc);
  return tu_run_suite(s);
}
