/* tensorcore.c: the tensor-core models of FP8 inner products (tensorcore.h).
 *
 * Written from the models' definitions (the MATLAB code of north-numerical-computing/
 * MATLAB-tensor-core, commit b12b5a7: models/H100TC.m, models/tools/Generic_BFMA_TC.m with
 * neab = -10 for FP8, GEMM.m's non-finite rule) and the B200 variant that matches B200's
 * hardware outputs (docs/tensor_cores.md); fp8lab's Python reference is
 * tools/reference/tensorcore.py, written independently on integer significands.
 *
 * H100: the terms' alignment is sign(x) trunc(|x| 2^(13 - M)): a term's significand cut to 13
 * fraction bits at its own exponent and then shifted right by M - e, both truncations toward
 * zero, is one truncation of |x| / 2^(M - 13). Every term is then an integer below 2^15 (a
 * product's significand is below 4), their sum below 2^21: exact in a float, and in a double
 * here. The vector kernel does the same in floats where the range allows (2^-100 <= 2^M <=
 * 2^100: every scaling by a power of two exact, the result normal) and takes this scalar code
 * for any entry outside it. */
#include "tensorcore.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "encode_inline.h" /* enc_f2u: a float's bits */

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define FP8_TC_AVX2 1
#endif

static const char *const TC_NAMES[FP8_TC_MODEL_COUNT] = {"exact", "h100", "b200"};

const char *fp8_tc_model_name(fp8_tc_model m) {
  return (unsigned)m < FP8_TC_MODEL_COUNT ? TC_NAMES[m] : "?";
}

int fp8_tc_model_parse(const char *s, fp8_tc_model *m) {
  for (int i = 0; i < FP8_TC_MODEL_COUNT; i++)
    if (strcmp(s, TC_NAMES[i]) == 0) {
      *m = (fp8_tc_model)i;
      return FP8_OK;
    }
  if (strcmp(s, "h200") == 0) { /* H200TC.m is H100TC.m */
    *m = FP8_TC_H100;
    return FP8_OK;
  }
  return FP8_EINVAL;
}

/* The exponent of a finite non-zero FP8 value x in format f: floor(log2 |x|) clamped below at
 * the format's emin (Generic_BFMA_TC.m: exp = max(floor(log2|x|), emin_in)). */
static int fp8_exp(float x, fp8_format f) {
  int e = (int)((enc_f2u(x) >> 23) & 0xFF) - 127;
  int emin = f == FP8_E4M3 ? -6 : -14;
  return e > emin ? e : emin;
}

/* GEMM.m's non-finite rule when a term or c is not finite: 1 and *out set, else 0. */
static int nonfinite(const float *a, const float *b, int n, float c, float *out) {
  int nan = isnan(c), pinf = c == INFINITY, minf = c == -INFINITY, any = !isfinite(c);
  for (int i = 0; i < n; i++) {
    if (isfinite(a[i]) && isfinite(b[i])) continue;
    float t = a[i] * b[i];
    any = 1;
    nan |= isnan(t);
    pinf |= t == INFINITY;
    minf |= t == -INFINITY;
  }
  if (!any) return 0;
  if (nan || (pinf && minf)) {
    *out = enc_u2f(0x7FC00000u); /* the canonical quiet NaN */
  } else {
    *out = pinf ? INFINITY : -INFINITY;
  }
  return 1;
}

/* The H100 model's final step: the integer sum s (|s| < 2^53) in units of 2^(M - 13), kept to
 * 14 significant bits by truncation (quanta of 2^-139 below 2^-126), +0 for 0, infinity from
 * 2^128 up. */
static float h100_result(double s, int M) {
  if (s == 0.0) return 0.0f;
  double t = fabs(s);
  int lead = M - 13 + ilogb(t);
  int qexp = (lead > -126 ? lead : -126) - 13;
  double kept = trunc(ldexp(t, M - 13 - qexp));
  double v = ldexp(kept, qexp);
  float r = v >= 0x1p128 ? INFINITY : (float)v; /* exact: <= 14 bits, quantum >= 2^-139 */
  return s < 0 ? -r : r;
}

static float h100_mma(fp8_format fa, fp8_format fb, const float *a, const float *b, int n,
                      float c) {
  int M = -133;
  for (int i = 0; i < n; i++)
    if (a[i] != 0.0f && b[i] != 0.0f) { /* a product of non-zero FP8 values is >= 2^-32 */
      int e = fp8_exp(a[i], fa) + fp8_exp(b[i], fb);
      if (e > M) M = e;
    }
  if (c != 0.0f) {
    int ce = (int)((enc_f2u(c) >> 23) & 0xFF) - 127;
    if (ce < -126) ce = -126;
    if (ce > M) M = ce;
  }
  const double scale = ldexp(1.0, 13 - M);
  double s = 0.0;
  for (int i = 0; i < n; i++) s += trunc((double)(a[i] * b[i]) * scale); /* exact product */
  s += trunc((double)c * scale);
  return h100_result(s, M);
}

static int bitlen_u128(unsigned __int128 u) {
  uint64_t hi = (uint64_t)(u >> 64), lo = (uint64_t)u;
  return hi ? 128 - __builtin_clzll(hi) : lo ? 64 - __builtin_clzll(lo) : 0;
}

/* The exact sum of the n products truncated toward zero to float32 (-0 when every product is
 * a negative zero). In double when that is exact: always for E4M3 x E4M3 (products are
 * multiples of 2^-18 below 2^18: a sum of 32 needs 41 bits), else when no addition rounded
 * (Knuth's TwoSum error of every addition is 0); otherwise in 128-bit integers, units of 2^-32
 * (every FP8 value is a multiple of 2^-16). */
static float b200_products(fp8_format fa, fp8_format fb, const float *a, const float *b, int n) {
  int negzero = 1;
  double s = 0.0, err = 0.0;
  const int check = !(fa == FP8_E4M3 && fb == FP8_E4M3);
  for (int i = 0; i < n; i++) {
    float p = a[i] * b[i]; /* exact */
    negzero &= p == 0.0f && signbit(p);
    double t = s + (double)p;
    if (check) {
      double bb = t - s;
      err += fabs((s - (t - bb)) + ((double)p - bb));
    }
    s = t;
  }
  if (err == 0.0) {
    if (s == 0.0) return negzero ? -0.0f : 0.0f;
    uint64_t u;
    memcpy(&u, &s, sizeof u);
    u &= ~(((uint64_t)1 << 29) - 1); /* 24 significant bits, toward zero */
    memcpy(&s, &u, sizeof s);
    return (float)s; /* exact: products' sums are far inside float32's normal range */
  }
  __int128 N = 0;
  for (int i = 0; i < n; i++)
    N += (__int128)(int64_t)(a[i] * 65536.0f) * (int64_t)(b[i] * 65536.0f);
  if (N == 0) return 0.0f; /* not all products are zeros here: TwoSum was exact otherwise */
  unsigned __int128 u = N < 0 ? -(unsigned __int128)N : (unsigned __int128)N;
  int L = bitlen_u128(u), sh = L > 24 ? L - 24 : 0;
  float t = ldexpf((float)(uint64_t)(u >> sh), sh - 32); /* truncated toward zero to 24 bits */
  return N < 0 ? -t : t;
}

static float b200_mma(fp8_format fa, fp8_format fb, const float *a, const float *b, int n,
                      float c) {
  return b200_products(fa, fb, a, b, n) + c;
}

float fp8_tc_mma(fp8_tc_model m, fp8_format fa, fp8_format fb, const float *a, const float *b,
                 int n, float c) {
  float r;
  if (m == FP8_TC_EXACT) {
    float acc = c;
    for (int i = 0; i < n; i++) acc = fmaf(a[i], b[i], acc);
    return acc;
  }
  if (nonfinite(a, b, n, c, &r)) return r;
  return m == FP8_TC_H100 ? h100_mma(fa, fb, a, b, n, c) : b200_mma(fa, fb, a, b, n, c);
}

float fp8_tc_dot(fp8_tc_model m, fp8_format fa, fp8_format fb, const float *a, const float *b,
                 int64_t k, int64_t promote) {
  if (m == FP8_TC_EXACT) return fp8_tc_mma(m, fa, fb, a, b, (int)(k > 0x7FFFFFFF ? 0 : k), 0.0f);
  const int64_t run = promote > 0 ? promote : k; /* terms between promotions */
  float acc = 0.0f;
  for (int64_t r0 = 0; r0 < k; r0 += run) {
    float part = 0.0f;
    int64_t r1 = r0 + run < k ? r0 + run : k;
    for (int64_t t = r0; t < r1; t += FP8_TC_MMA_K) {
      int nb = (int)(r1 - t < FP8_TC_MMA_K ? r1 - t : FP8_TC_MMA_K);
      part = fp8_tc_mma(m, fa, fb, a + t, b + t, nb, part);
    }
    acc = promote > 0 ? acc + part : part;
  }
  return acc;
}

void fp8_tc_block_plain(fp8_tc_model m, fp8_format fa, fp8_format fb, int64_t p, int64_t q,
                        int64_t k, const float *a, const float *b, int64_t promote, float scale,
                        float *y) {
  for (int64_t i = 0; i < p; i++)
    for (int64_t j = 0; j < q; j++)
      y[i * q + j] = fp8_tc_dot(m, fa, fb, a + i * k, b + j * k, k, promote) * scale;
}

#ifdef FP8_TC_AVX2
/* A tile's operands: up to four rows of A (their values, their exponents' powers of two, and
 * each MMA block's largest and smallest non-zero of those), eight columns of B packed
 * [k][8] with the same, the columns themselves (for the scalar model), k and the form. */
typedef struct {
  fp8_format fa, fb;
  const float *a[4], *ax[4], *axm[4], *axn[4];
  const float *bp, *bx, *bxm, *bxn;
  const float *bcol[8];
  int64_t k, promote;
} tile_args;

/* The end of an MMA block: with promotion, every `promote` terms (and at the end) each row's
 * partial sum added to its FP32 accumulator and restarted from 0. */
static inline __attribute__((always_inline, target("avx2"))) void
promote_step(const int nr, int64_t promote, int64_t *since, int nb, int last, __m256 acc[4],
             __m256 part[4]) {
  *since += nb;
  if (promote > 0 && (*since == promote || last)) {
    for (int r = 0; r < nr; r++) {
      acc[r] = _mm256_add_ps(acc[r], part[r]);
      part[r] = _mm256_setzero_ps();
    }
    *since = 0;
  }
}

/* The H100 model for nr rows (nr <= 4) x eight columns at once: rows a[r] (k values) with
 * their exponents' powers of two ax[r] (0 for a zero value), eight columns of B packed
 * bp[t * 8 + l] with theirs bx[t * 8 + l]. Per MMA block: products and the largest product
 * exponent (a product of powers of two is exact; each packed B vector serves the nr rows),
 * then per row the chain's (fast: d; promoted: the partial) alignment scale 2^(13 - M) and the
 * truncated terms as int32 (cvttps: toward zero), summed exactly, kept to 14 bits by masking
 * the float's low 10 fraction bits. Lanes whose 2^M falls outside [2^-100, 2^100] (or whose c
 * is subnormal) are redone by the scalar model for that block. */
static inline __attribute__((always_inline, target("avx2"))) void
h100_tile(const int nr, const tile_args *ta, float out[4][8]) {
  const fp8_format fa = ta->fa, fb = ta->fb;
  const float *const *a = ta->a, *const *ax = ta->ax, *const *axm = ta->axm;
  const float *bp = ta->bp, *bx = ta->bx, *bxm = ta->bxm, *const *bcol = ta->bcol;
  const int64_t k = ta->k, promote = ta->promote;
  const __m256 lo = _mm256_set1_ps(0x1p-100f), hi = _mm256_set1_ps(0x1p100f);
  const __m256 zero = _mm256_setzero_ps();
  const __m256 expmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7F800000));
  const __m256 keep14 = _mm256_castsi256_ps(_mm256_set1_epi32((int)0xFFFFFC00u));
  const __m256 two13 = _mm256_set1_ps(8192.0f), inv13 = _mm256_set1_ps(0x1p-13f);
  __m256 prod[4][FP8_TC_MMA_K];
  __m256 acc[4], part[4];
  for (int r = 0; r < nr; r++) acc[r] = part[r] = zero;
  int64_t since = 0; /* terms in the partial sums since the last promotion */
  for (int64_t t0 = 0, blk = 0; t0 < k; t0 += FP8_TC_MMA_K, blk++) {
    const int nb = (int)(k - t0 < FP8_TC_MMA_K ? k - t0 : FP8_TC_MMA_K);
    /* A row whose c is a normal float in range and at least the block's bound on its products'
     * exponents (the largest 2^e of its a values times that of each column's b values) aligns
     * to c: M = c's exponent without the products' pass. The others take it. */
    int need[4], any = 0;
    const __m256 bm = _mm256_loadu_ps(bxm + blk * 8);
    for (int r = 0; r < nr; r++) {
      const __m256 cpow = _mm256_and_ps(part[r], expmask);
      const __m256 ub = _mm256_mul_ps(_mm256_broadcast_ss(axm[r] + blk), bm);
      __m256 ok = _mm256_and_ps(_mm256_cmp_ps(cpow, ub, _CMP_GE_OQ), _mm256_cmp_ps(cpow, lo, _CMP_GE_OQ));
      ok = _mm256_and_ps(ok, _mm256_cmp_ps(cpow, hi, _CMP_LE_OQ));
      need[r] = _mm256_movemask_ps(ok) != 0xFF;
      any |= need[r];
    }
    __m256 mx[4] = {zero, zero, zero, zero};
    if (any)
      for (int t = 0; t < nb; t++) {
        const __m256 bv = _mm256_loadu_ps(bp + (t0 + t) * 8), be = _mm256_loadu_ps(bx + (t0 + t) * 8);
        for (int r = 0; r < nr; r++) {
          if (!need[r]) continue;
          prod[r][t] = _mm256_mul_ps(_mm256_broadcast_ss(a[r] + t0 + t), bv);
          mx[r] = _mm256_max_ps(mx[r], _mm256_mul_ps(_mm256_broadcast_ss(ax[r] + t0 + t), be));
        }
      }
    for (int r = 0; r < nr; r++) {
      const __m256 c = part[r], cpow = _mm256_and_ps(c, expmask);
      if (!need[r]) { /* M = c's exponent: the terms from the products, scaled on the fly */
        const __m256 sc = _mm256_div_ps(two13, cpow);
        __m256i s = _mm256_cvttps_epi32(_mm256_mul_ps(c, sc));
        for (int t = 0; t < nb; t++) {
          const __m256 pr = _mm256_mul_ps(_mm256_broadcast_ss(a[r] + t0 + t),
                                          _mm256_loadu_ps(bp + (t0 + t) * 8));
          s = _mm256_add_epi32(s, _mm256_cvttps_epi32(_mm256_mul_ps(pr, sc)));
        }
        part[r] = _mm256_mul_ps(_mm256_and_ps(_mm256_cvtepi32_ps(s), keep14), _mm256_mul_ps(cpow, inv13));
        continue;
      }
      __m256 M = _mm256_max_ps(mx[r], cpow);
      __m256 bad = _mm256_or_ps(_mm256_cmp_ps(M, lo, _CMP_LT_OQ), _mm256_cmp_ps(M, hi, _CMP_GT_OQ));
      bad = _mm256_or_ps(bad, _mm256_cmp_ps(cpow, expmask, _CMP_EQ_OQ)); /* c not finite */
      bad = _mm256_or_ps(bad, _mm256_andnot_ps(_mm256_cmp_ps(cpow, zero, _CMP_NEQ_OQ),
                                               _mm256_cmp_ps(c, zero, _CMP_NEQ_UQ)));
      /* no term at all (every product zero, c = 0): +0, not a range failure */
      const __m256 none = _mm256_cmp_ps(M, zero, _CMP_EQ_OQ);
      bad = _mm256_andnot_ps(none, bad);
      M = _mm256_blendv_ps(M, two13, none); /* any power of two in range: every term is 0 */
      const __m256 sc = _mm256_div_ps(two13, M); /* 2^(13 - M): a power of two, exact */
      __m256i s = _mm256_cvttps_epi32(_mm256_mul_ps(c, sc));
      for (int t = 0; t < nb; t++)
        s = _mm256_add_epi32(s, _mm256_cvttps_epi32(_mm256_mul_ps(prod[r][t], sc)));
      __m256 d = _mm256_mul_ps(_mm256_and_ps(_mm256_cvtepi32_ps(s), keep14), _mm256_mul_ps(M, inv13));
      const int badm = _mm256_movemask_ps(bad);
      if (badm) { /* those lanes by the scalar model */
        float dv[8], cv[8], col[FP8_TC_MMA_K];
        _mm256_storeu_ps(dv, d);
        _mm256_storeu_ps(cv, c);
        for (int l = 0; l < 8; l++)
          if (badm >> l & 1) {
            for (int t = 0; t < nb; t++) col[t] = bcol[l][t0 + t];
            dv[l] = fp8_tc_mma(FP8_TC_H100, fa, fb, a[r] + t0, col, nb, cv[l]);
          }
        d = _mm256_loadu_ps(dv);
      }
      part[r] = d;
    }
    promote_step(nr, promote, &since, nb, t0 + nb >= k, acc, part);
  }
  for (int r = 0; r < nr; r++) _mm256_storeu_ps(out[r], promote > 0 ? acc[r] : part[r]);
}


/* 2^e of each FP8 value (its clamped exponent), 0 for a zero; x[n] -> px[n]. Non-finite
 * values: 0 here (their blocks are found by the caller and computed by the scalar model). */
typedef uint32_t u32_alias __attribute__((may_alias));

/* ... and 1 when every value is finite. Eight at a time with AVX2 (the same bits). */
__attribute__((target("avx2"))) static int exp_pow2(const float *x, int64_t n, fp8_format f,
                                                    float *px) {
  const uint32_t fmin = (uint32_t)((f == FP8_E4M3 ? -6 : -14) + 127); /* emin's field */
  const u32_alias *xu = (const u32_alias *)x;
  u32_alias *pu = (u32_alias *)px;
  const __m256i ff = _mm256_set1_epi32(0xFF), vmin = _mm256_set1_epi32((int)fmin);
  const __m256i abs = _mm256_set1_epi32(0x7FFFFFFF), zero = _mm256_setzero_si256();
  __m256i vbad = zero;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i u = _mm256_loadu_si256((const __m256i *)(xu + i));
    __m256i e = _mm256_and_si256(_mm256_srli_epi32(u, 23), ff);
    __m256i nf = _mm256_cmpeq_epi32(e, ff);
    vbad = _mm256_or_si256(vbad, nf);
    e = _mm256_max_epi32(e, vmin);
    __m256i z = _mm256_or_si256(_mm256_cmpeq_epi32(_mm256_and_si256(u, abs), zero), nf);
    _mm256_storeu_si256((__m256i *)(pu + i), _mm256_andnot_si256(z, _mm256_slli_epi32(e, 23)));
  }
  uint32_t bad = (uint32_t)!_mm256_testz_si256(vbad, vbad);
  for (; i < n; i++) {
    uint32_t u = xu[i], e = (u >> 23) & 0xFF;
    bad |= e == 0xFF;
    e = e < fmin ? fmin : e;
    pu[i] = (u & 0x7FFFFFFF) == 0 || e == 0xFF ? 0 : e << 23; /* zero, non-finite: 0 */
  }
  return !bad;
}

/* The B200 model for nr rows (nr <= 4) x eight columns: per MMA block each row's products (exact
 * in float) summed in doubles from -0 (so that a sum is -0 only when every product is a
 * negative zero), exact when the block's exponent spread allows: always for E4M3 x E4M3,
 * else when (largest / smallest non-zero 2^e of a) x (the same of b) <= 2^(46 - mbits_a -
 * mbits_b) (then every product is a multiple of the smallest quantum and 32 of them stay below
 * 2^53 quanta); truncated toward zero to float32 by clearing the low 29 bits of the double's
 * fraction, then c added in float. Other lanes by the scalar model. */
static inline __attribute__((always_inline, target("avx2"))) void
b200_tile(const int nr, const tile_args *ta, float out[4][8]) {
  const fp8_format fa = ta->fa, fb = ta->fb;
  const float *const *a = ta->a, *const *axm = ta->axm, *const *axn = ta->axn;
  const float *bp = ta->bp, *bxm = ta->bxm, *bxn = ta->bxn, *const *bcol = ta->bcol;
  const int64_t k = ta->k, promote = ta->promote;
  const __m256d negz = _mm256_set1_pd(-0.0);
  const __m256d mask29 = _mm256_castsi256_pd(_mm256_set1_epi64x((long long)~((1ULL << 29) - 1)));
  const int e4 = fa == FP8_E4M3 && fb == FP8_E4M3;
  const double lim = ldexp(1.0, 46 - (fa == FP8_E4M3 ? 3 : 2) - (fb == FP8_E4M3 ? 3 : 2));
  __m256 acc[4], part[4];
  for (int r = 0; r < nr; r++) acc[r] = part[r] = _mm256_setzero_ps();
  int64_t since = 0;
  for (int64_t t0 = 0, blk = 0; t0 < k; t0 += FP8_TC_MMA_K, blk++) {
    const int nb = (int)(k - t0 < FP8_TC_MMA_K ? k - t0 : FP8_TC_MMA_K);
    for (int r = 0; r < nr; r++) {
      __m256d slo = negz, shi = negz;
      for (int t = 0; t < nb; t++) {
        const __m256 pv = _mm256_mul_ps(_mm256_broadcast_ss(a[r] + t0 + t),
                                        _mm256_loadu_ps(bp + (t0 + t) * 8));
        slo = _mm256_add_pd(slo, _mm256_cvtps_pd(_mm256_castps256_ps128(pv)));
        shi = _mm256_add_pd(shi, _mm256_cvtps_pd(_mm256_extractf128_ps(pv, 1)));
      }
      slo = _mm256_and_pd(slo, mask29);
      shi = _mm256_and_pd(shi, mask29);
      const __m256 tr = _mm256_set_m128(_mm256_cvtpd_ps(shi), _mm256_cvtpd_ps(slo));
      __m256 d = _mm256_add_ps(tr, part[r]);
      if (!e4) {
        const double ra = (double)axm[r][blk] / (double)axn[r][blk];
        float dv[8], cv[8], col[FP8_TC_MMA_K];
        int any = 0;
        for (int l = 0; l < 8; l++) any |= ra * ((double)bxm[blk * 8 + l] / (double)bxn[blk * 8 + l]) > lim;
        if (any) {
          _mm256_storeu_ps(dv, d);
          _mm256_storeu_ps(cv, part[r]);
          for (int l = 0; l < 8; l++)
            if (ra * ((double)bxm[blk * 8 + l] / (double)bxn[blk * 8 + l]) > lim) {
              for (int t = 0; t < nb; t++) col[t] = bcol[l][t0 + t];
              dv[l] = b200_mma(fa, fb, a[r] + t0, col, nb, cv[l]);
            }
          d = _mm256_loadu_ps(dv);
        }
      }
      part[r] = d;
    }
    promote_step(nr, promote, &since, nb, t0 + nb >= k, acc, part);
  }
  for (int r = 0; r < nr; r++) _mm256_storeu_ps(out[r], promote > 0 ? acc[r] : part[r]);
}

/* One tile of model m (h100 or b200), nr = 4 or 1 rows: the kernels specialized for both. */
__attribute__((target("avx2"))) static void run_tile(fp8_tc_model m, int nr, const tile_args *t,
                                                     float out[4][8]) {
  if (m == FP8_TC_H100 && nr == 4) h100_tile(4, t, out);
  else if (m == FP8_TC_H100) h100_tile(1, t, out);
  else if (nr == 4) b200_tile(4, t, out);
  else b200_tile(1, t, out);
}


/* The largest and the smallest non-zero of each MMA block's powers of two: x [k][w] (w lanes)
 * -> mx, mn [nblk][w] (a block of zeros: largest 0, smallest 1, so that every ratio test
 * passes). */
__attribute__((target("avx2"))) static void block_range(const float *x, int64_t k, int w,
                                                       float *mx, float *mn) {
  const __m256 zero = _mm256_setzero_ps(), inf = _mm256_set1_ps(INFINITY);
  for (int64_t b = 0; b * FP8_TC_MMA_K < k; b++) {
    const int64_t t1 = (b + 1) * FP8_TC_MMA_K < k ? (b + 1) * FP8_TC_MMA_K : k;
    if (w == 8) { /* a column group: one vector a step */
      __m256 M = zero, N = inf;
      for (int64_t t = b * FP8_TC_MMA_K; t < t1; t++) {
        __m256 v = _mm256_loadu_ps(x + t * 8);
        M = _mm256_max_ps(M, v);
        N = _mm256_min_ps(N, _mm256_blendv_ps(inf, v, _mm256_cmp_ps(v, zero, _CMP_GT_OQ)));
      }
      N = _mm256_blendv_ps(N, _mm256_set1_ps(1.0f), _mm256_cmp_ps(N, inf, _CMP_EQ_OQ));
      _mm256_storeu_ps(mx + b * 8, M);
      _mm256_storeu_ps(mn + b * 8, N);
      continue;
    }
    if (w == 1 && t1 - b * FP8_TC_MMA_K == FP8_TC_MMA_K) { /* a row's full block: 4 vectors */
      const float *xb = x + b * FP8_TC_MMA_K;
      __m256 M = zero, N = inf;
      for (int q = 0; q < 4; q++) {
        __m256 v = _mm256_loadu_ps(xb + 8 * q);
        M = _mm256_max_ps(M, v);
        N = _mm256_min_ps(N, _mm256_blendv_ps(inf, v, _mm256_cmp_ps(v, zero, _CMP_GT_OQ)));
      }
      float m8[8], n8[8];
      _mm256_storeu_ps(m8, M);
      _mm256_storeu_ps(n8, N);
      float Ms = m8[0], Ns = n8[0];
      for (int l = 1; l < 8; l++) Ms = m8[l] > Ms ? m8[l] : Ms, Ns = n8[l] < Ns ? n8[l] : Ns;
      mx[b] = Ms;
      mn[b] = Ns == INFINITY ? 1.0f : Ns;
      continue;
    }
    for (int l = 0; l < w; l++) {
      float M = 0.0f, N = INFINITY;
      for (int64_t t = b * FP8_TC_MMA_K; t < t1; t++) {
        float v = x[t * w + l];
        M = v > M ? v : M;
        N = v > 0.0f && v < N ? v : N;
      }
      mx[b * w + l] = M;
      mn[b * w + l] = N == INFINITY ? 1.0f : N;
    }
  }
}

/* Asked each time (a flag read, set up before main): a cached answer written by the engine's
 * concurrent workers would be a data race (gemm_block.c's have_avx2_fma says the same). */
static int avx2_ok(void) {
  return __builtin_cpu_supports("avx2");
}
#endif

void fp8_tc_block(fp8_tc_model m, fp8_format fa, fp8_format fb, int64_t p, int64_t q, int64_t k,
                  const float *a, const float *b, int64_t promote, float scale, float *y) {
#ifdef FP8_TC_AVX2
  if (m != FP8_TC_EXACT && k > 0 && avx2_ok() && q >= 8) {
    float *ax = malloc((size_t)(p * k) * sizeof *ax), *bp = malloc((size_t)k * 8 * sizeof *bp);
    float *bx = malloc((size_t)k * 8 * sizeof *bx), *colx = malloc((size_t)k * sizeof *colx);
    const int64_t nblk = (k + FP8_TC_MMA_K - 1) / FP8_TC_MMA_K;
    float *axm = malloc((size_t)(p * nblk) * sizeof *axm), *bxm = malloc((size_t)(nblk * 8) * sizeof *bxm);
    float *axn = malloc((size_t)(p * nblk) * sizeof *axn), *bxn = malloc((size_t)(nblk * 8) * sizeof *bxn);
    if (ax && bp && bx && colx && axm && bxm && axn && bxn) {
      int *afin = malloc((size_t)p * sizeof *afin);
      if (afin) {
        for (int64_t i = 0; i < p; i++) {
          afin[i] = exp_pow2(a + i * k, k, fa, ax + i * k);
          block_range(ax + i * k, k, 1, axm + i * nblk, axn + i * nblk);
        }
        for (int64_t j0 = 0; j0 < q; j0 += 8) {
          int64_t j = j0 + 8 <= q ? j0 : q - 8; /* the last group overlaps the one before */
          const float *bcol[8];
          int bfin = 1;
          for (int l = 0; l < 8; l++) {
            bcol[l] = b + (j + l) * k;
            bfin &= exp_pow2(bcol[l], k, fb, colx);
            for (int64_t t = 0; t < k; t++) {
              bp[t * 8 + l] = bcol[l][t];
              bx[t * 8 + l] = colx[t];
            }
          }
          block_range(bx, k, 8, bxm, bxn);
          for (int64_t i = 0; i < p;) {
            /* four finite rows at a time (fewer at the end); a row or a column group holding a
             * non-finite value by the scalar model */
            if (!bfin || !afin[i]) {
              for (int l = 0; l < 8; l++)
                y[i * q + j + l] = fp8_tc_dot(m, fa, fb, a + i * k, bcol[l], k, promote) * scale;
              i++;
              continue;
            }
            int nr = 1;
            while (nr < 4 && i + nr < p && afin[i + nr]) nr++;
            tile_args ta = {.fa = fa, .fb = fb, .bp = bp, .bx = bx, .bxm = bxm, .bxn = bxn,
                            .k = k, .promote = promote};
            for (int l = 0; l < 8; l++) ta.bcol[l] = bcol[l];
            float out[4][8];
            for (int r0 = 0; r0 < nr; r0 += nr == 4 ? 4 : 1) { /* four rows, or one at a time */
              for (int r = 0; r < 4; r++) {
                int64_t row = i + r0 + (nr == 4 ? r : 0);
                ta.a[r] = a + row * k;
                ta.ax[r] = ax + row * k;
                ta.axm[r] = axm + row * nblk;
                ta.axn[r] = axn + row * nblk;
              }
              float o[4][8];
              run_tile(m, nr == 4 ? 4 : 1, &ta, o);
              for (int r = 0; r < (nr == 4 ? 4 : 1); r++) memcpy(out[r0 + r], o[r], sizeof o[r]);
            }
            for (int r = 0; r < nr; r++)
              for (int l = 0; l < 8; l++) y[(i + r) * q + j + l] = out[r][l] * scale;
            i += nr;
          }
        }
        free(afin);
        free(ax), free(bp), free(bx), free(colx), free(axm), free(bxm), free(axn), free(bxn);
        return;
      }
    }
    free(ax), free(bp), free(bx), free(colx), free(axm), free(bxm), free(axn), free(bxn);
  }
#endif
  fp8_tc_block_plain(m, fa, fb, p, q, k, a, b, promote, scale, y);
}
