/* gemm_sample.c: the sampled GEMM error (gemm.h, "sampled GEMM error"; docs/semantics.md).
 *
 * A GEMM's output is sampled as a block: p rows and q columns, each drawn independently with
 * replacement with probability proportional to size (the squared norm of its operand vector,
 * mixed half and half with uniform: a "defensive" mixture, so that no row has a tiny
 * probability), from a splitmix64 stream; all rows when the sample reaches m (likewise
 * columns). The block's entries are dot products over the whole reduction, so the
 * configuration's block is one small FP32 product of the gathered operands, and the reference
 * one small double product, once per layer and step (fp8_gemm_block_f32 / _f64: fixed-order
 * FMA chains, gemm_block.c).
 *
 * With weights u_i = 1 / (m pi_i) and v_j = 1 / (n rho_j) (1 for a side taken whole), the
 * block sums sum(u v d) and sum(u v r) estimate the output's sums (Hansen-Hurwitz, up to m n /
 * (p q)); their ratio R2 estimates R^2 = sum(d) / sum(r) (d = (y - y_ref)^2, r = y_ref^2). Its
 * variance comes from the linearized residual z = u v (d - R2 r) (the delta method for a
 * ratio) under the crossed design z_ij = mu + a_i + b_j + e_ij with independent rows and
 * columns: the block mean has Var = s_a^2 / p + s_b^2 / q + s_e^2 / (p q). The sample variance
 * of the row means S_R estimates s_a^2 + s_e^2 / q, that of the column means S_C estimates
 * s_b^2 + s_e^2 / p, and the two-way residual mean square S_E estimates s_e^2, so
 * Var = max(0, S_R - S_E / q) / p + max(0, S_C - S_E / p) / q + S_E / (p q); a side taken
 * whole has no term of its own (all rows: Var = S_C / q). Then se(R2) = sqrt(Var) /
 * mean(u v r) and the 95% interval is R2 exp(-+1.96 se / R2) (log scale: never negative, and
 * closer to nominal for a ratio of skewed sums); rel_error and its ends are square roots. */
#include "gemm.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fp8.h"

#define Z95 1.959963984540054 /* the normal 97.5% quantile */

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t fp8_gemm_sample_seed(uint64_t gemm_seed, const char *layer, int64_t step,
                              fp8_gemm_kind g) {
  /* a multi-rank trace's rank_<r>/ prefix is not part of it: a rank replayed alone draws the
   * same sample as within its multi-rank trace */
  if (strncmp(layer, "rank_", 5) == 0) {
    const char *c = layer + 5;
    while (*c >= '0' && *c <= '9') c++;
    if (c > layer + 5 && *c == '/') layer = c + 1;
  }
  uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a of the name */
  for (const unsigned char *c = (const unsigned char *)layer; *c; c++)
    h = (h ^ *c) * 0x100000001b3ull;
  uint64_t x = gemm_seed;
  uint64_t s = splitmix64(&x) ^ h;
  x = s;
  s = splitmix64(&x) ^ (uint64_t)step;
  x = s;
  s = splitmix64(&x) ^ (uint64_t)g;
  x = s;
  return splitmix64(&x);
}

/* Uniform double in [0, 1). */
static double unit(uint64_t *st) { return (double)(splitmix64(st) >> 11) * 0x1p-53; }

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* k draws from 0..n-1 with replacement, probability pi_i = (size_i / total + 1 / n) / 2
 * (uniform without sizes or with a non-finite or zero total), sorted, and their weights
 * 1 / (n pi_i) into w; or all of them (weight 1) when k >= n. cdf: scratch [n]. */
static void draw(int64_t *idx, double *w, int64_t k, int64_t n, const double *size, double *cdf,
                 uint64_t *st) {
  if (k >= n) {
    for (int64_t i = 0; i < n; i++) {
      idx[i] = i;
      w[i] = 1.0;
    }
    return;
  }
  double total = 0.0;
  for (int64_t i = 0; size && i < n; i++) total += size[i];
  int pps = size && isfinite(total) && total > 0.0;
  double acc = 0.0;
  for (int64_t i = 0; i < n; i++) {
    acc += pps ? 0.5 * (size[i] / total + 1.0 / (double)n) : 1.0 / (double)n;
    cdf[i] = acc;
  }
  for (int64_t j = 0; j < k; j++) {
    double x = unit(st) * acc;
    int64_t lo = 0, hi = n - 1; /* the first i with cdf[i] > x */
    while (lo < hi) {
      int64_t mid = lo + (hi - lo) / 2;
      if (cdf[mid] > x) hi = mid;
      else lo = mid + 1;
    }
    idx[j] = lo;
  }
  qsort(idx, (size_t)k, sizeof *idx, cmp_i64);
  for (int64_t j = 0; j < k; j++) {
    int64_t i = idx[j];
    double pi = (cdf[i] - (i ? cdf[i - 1] : 0.0)) / acc;
    w[j] = 1.0 / ((double)n * pi);
  }
}

void fp8_gemm_sample_free(fp8_gemm_sample *s) {
  if (!s) return;
  free(s->rows);
  free(s->cols);
  free(s->u);
  free(s->v);
  free(s->a);
  free(s->b);
  free(s->yref);
  free(s->qa);
  free(s->qb);
  free(s->y);
  free(s->wide);
  memset(s, 0, sizeof *s);
}

/* Grows *p to hold n elements of size es (contents not kept); 0, or -1 out of memory. */
static int grow(void **p, size_t *cap, size_t n, size_t es) {
  if (n <= *cap && *p) return 0;
  free(*p);
  *p = malloc(n * es);
  *cap = *p ? n : 0;
  return *p ? 0 : -1;
}

int fp8_gemm_sample_init(fp8_gemm_sample *s, fp8_gemm_kind g, int64_t tokens, int64_t in,
                         int64_t out, int64_t sample, uint64_t seed, const double *size_a,
                         const double *size_b) {
  if (!s) return FP8_EINVAL;
  if ((int)g < 0 || g >= FP8_GEMM_COUNT || tokens < 0 || in < 0 || out < 0 || sample < 1) {
    fp8_gemm_sample_free(s);
    return FP8_EINVAL;
  }
  if (tokens > INT_MAX || in > INT_MAX || out > INT_MAX) {
    fp8_gemm_sample_free(s);
    return FP8_ERANGE;
  }
  s->g = g;
  switch (g) {
  case FP8_GEMM_FPROP: s->m = tokens; s->n = out; s->k = in; break;
  case FP8_GEMM_DGRAD: s->m = tokens; s->n = in; s->k = out; break;
  default: s->m = out; s->n = in; s->k = tokens; break;
  }
  s->p = sample < s->m ? sample : s->m;
  s->q = sample < s->n ? sample : s->n;
  size_t pk = (size_t)(s->p * s->k) + 1, qk = (size_t)(s->q * s->k) + 1;
  size_t p1 = (size_t)s->p + 1, q1 = (size_t)s->q + 1;
  size_t big = (size_t)(s->m > s->n ? s->m : s->n) + 1, pq = (size_t)(s->p * s->q) + 1;
  /* the widened operands of the reference, or the CDF of the draw (not at the same time) */
  size_t wide = pk + qk > big ? pk + qk : big;
  void **buf[11] = {(void **)&s->rows, (void **)&s->u,  (void **)&s->cols, (void **)&s->v,
                    (void **)&s->a,    (void **)&s->qa, (void **)&s->b,    (void **)&s->qb,
                    (void **)&s->yref, (void **)&s->y,  (void **)&s->wide};
  const size_t need[11] = {p1, p1, q1, q1, pk, pk, qk, qk, pq, pq, wide};
  const size_t es[11] = {sizeof *s->rows, sizeof *s->u, sizeof *s->cols, sizeof *s->v,
                         sizeof *s->a,    sizeof *s->qa, sizeof *s->b,   sizeof *s->qb,
                         sizeof *s->yref, sizeof *s->y, sizeof *s->wide};
  for (int i = 0; i < 11; i++)
    if (grow(buf[i], &s->cap[i], need[i], es[i])) {
      fp8_gemm_sample_free(s);
      return FP8_ENOMEM;
    }
  uint64_t st = seed;
  draw(s->rows, s->u, s->p, s->m, size_a, s->wide, &st);
  draw(s->cols, s->v, s->q, s->n, size_b, s->wide, &st);
  return FP8_OK;
}

/* One element of a source dtype, widened (exactly). */
static inline float elem_f32(fp8_dtype d, const unsigned char *p) {
  if (d == FP8_DTYPE_BF16) {
    uint16_t h;
    memcpy(&h, p, sizeof h);
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
  }
  if (d == FP8_DTYPE_F16) {
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return fp8_f16_to_f32(h);
  }
  float f;
  memcpy(&f, p, sizeof f);
  return f;
}

/* A row's contribution to the sizes (fp8_gemm_norms): its squares (x * x in float: exact for
 * BF16 and F16, rounded for F32) over the columns of every gstep-th group of NORM_GROUP, in
 * eight float lanes by column index mod 8, returned as ((l0 + l1) + (l2 + l3)) + ((l4 + l5) +
 * (l6 + l7)); and, when colsq is not NULL, every square added into colsq[j] (float, in row
 * order). No reassociation anywhere, so the plain and the AVX2 builds give the same bits. */
#define NORM_GROUP 32
#define NORM_ROW(NAME, ATTR, T, CONV)                                                           \
  ATTR static float NAME(const void *row_, int64_t cols, int64_t gstep, float *colsq) {         \
    const unsigned char *rowb = row_; /* a trace's data need not be aligned (npy offsets) */   \
    if (colsq)                                                                                  \
      for (int64_t j = 0; j < cols; j++) {                                                      \
        T v;                                                                                    \
        memcpy(&v, rowb + (size_t)j * sizeof v, sizeof v);                                      \
        float x = CONV(v);                                                                      \
        colsq[j] += x * x;                                                                      \
      }                                                                                         \
    float l[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                                      \
    for (int64_t g = 0; g < cols; g += NORM_GROUP * gstep) {                                    \
      int64_t end = cols - g < NORM_GROUP ? cols : g + NORM_GROUP, j = g;                       \
      for (; j + 8 <= end; j += 8)                                                              \
        for (int k = 0; k < 8; k++) {                                                           \
          T v;                                                                                  \
          memcpy(&v, rowb + (size_t)(j + k) * sizeof v, sizeof v);                              \
          float x = CONV(v);                                                                    \
          l[k] += x * x;                                                                        \
        }                                                                                       \
      for (int k = 0; j < end; j++, k++) {                                                      \
        T v;                                                                                    \
        memcpy(&v, rowb + (size_t)j * sizeof v, sizeof v);                                      \
        float x = CONV(v);                                                                      \
        l[k] += x * x;                                                                          \
      }                                                                                         \
    }                                                                                           \
    return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));                   \
  }
static inline float bf16_bits(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
static inline float same_f32(float f) { return f; }
NORM_ROW(norm_row_bf16, , uint16_t, bf16_bits)
NORM_ROW(norm_row_bf16_avx2, __attribute__((target("avx2"))), uint16_t, bf16_bits)
NORM_ROW(norm_row_f16, , uint16_t, fp8_f16_to_f32)
NORM_ROW(norm_row_f32, , float, same_f32)
NORM_ROW(norm_row_f32_avx2, __attribute__((target("avx2"))), float, same_f32)
#undef NORM_ROW

void fp8_gemm_norm_steps(int64_t rows, int64_t cols, int64_t *row_step, int64_t *group_step) {
  *row_step = rows / FP8_GEMM_NORM_ROWS > 1 ? rows / FP8_GEMM_NORM_ROWS : 1;
  *group_step = cols / FP8_GEMM_NORM_COLS > 1 ? cols / FP8_GEMM_NORM_COLS : 1;
}

void fp8_gemm_norms(const void *x, fp8_dtype d, int64_t rows, int64_t cols, double *rowsq,
                    double *colsq) {
  const size_t es = fp8_dtype_size(d);
  int64_t rstep, gstep;
  fp8_gemm_norm_steps(rows, cols, &rstep, &gstep);
  /* asked every call (a read of libgcc's CPU model, filled at start-up): a cached static
   * written by concurrent workers would be a data race */
  const int avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
  float *cs = calloc((size_t)cols + 1, sizeof *cs);
  for (int64_t i = 0; i < rows; i++) {
    if (!cs) { /* out of memory: no sizes (the draw is uniform) */
      rowsq[i] = 0.0;
      continue;
    }
    const void *row = (const unsigned char *)x + (size_t)(i * cols) * es;
    float *c = i % rstep == 0 ? cs : NULL;
    float r = d == FP8_DTYPE_BF16 ? (avx2 ? norm_row_bf16_avx2(row, cols, gstep, c)
                                          : norm_row_bf16(row, cols, gstep, c))
            : d == FP8_DTYPE_F16  ? norm_row_f16(row, cols, gstep, c)
            : avx2                ? norm_row_f32_avx2(row, cols, gstep, c)
                                  : norm_row_f32(row, cols, gstep, c);
    rowsq[i] = (double)r;
  }
  for (int64_t j = 0; j < cols; j++) colsq[j] = cs ? (double)cs[j] : 0.0;
  free(cs);
}

void fp8_gemm_sample_gather(const fp8_gemm_sample *s, int operand, const void *x, fp8_dtype d,
                            float *dst) {
  const int64_t cnt = operand == 0 ? s->p : s->q, k = s->k;
  const int64_t *idx = operand == 0 ? s->rows : s->cols;
  const size_t es = fp8_dtype_size(d);
  const unsigned char *src = x;
  if (!fp8_gemm_operand_colwise(s->g, operand)) { /* rows of a [., k] matrix */
    for (int64_t i = 0; i < cnt; i++)
      fp8_dtype_to_f32(d, src + (size_t)(idx[i] * k) * es, (size_t)k, dst + i * k);
    return;
  }
  /* columns of a [k, C] matrix, C the dimension the indices run over */
  const int64_t C = operand == 0 ? s->m : s->n;
  for (int64_t r = 0; r < k; r++) {
    const unsigned char *row = src + (size_t)(r * C) * es;
    for (int64_t i = 0; i < cnt; i++) dst[i * k + r] = elem_f32(d, row + (size_t)idx[i] * es);
  }
}

void fp8_gemm_sample_reference(fp8_gemm_sample *s) {
  const int64_t p = s->p, q = s->q, k = s->k;
  if (p == 0 || q == 0) return;
  if (k == 0) {
    memset(s->yref, 0, (size_t)(p * q) * sizeof *s->yref);
    return;
  }
  double *ad = s->wide, *bd = s->wide + p * k; /* the widened operands */
  for (int64_t i = 0; i < p * k; i++) ad[i] = (double)s->a[i];
  for (int64_t i = 0; i < q * k; i++) bd[i] = (double)s->b[i];
  fp8_gemm_block_f64(p, q, k, ad, bd, s->yref);
}

void fp8_gemm_sample_estimate(const double *yref, const float *y, const double *u,
                              const double *v, int64_t p, int64_t q, bool all_rows,
                              bool all_cols, double *rel_error, double *lo, double *hi) {
  const int64_t N = p * q;
  const bool whole = all_rows && all_cols;
#define W(i, j) ((u ? u[i] : 1.0) * (v ? v[j] : 1.0))
  double sd = 0.0, sr = 0.0;
  for (int64_t i = 0; i < p; i++)
    for (int64_t j = 0; j < q; j++) {
      double e = (double)y[i * q + j] - yref[i * q + j], w = W(i, j);
      sd += w * e * e;
      sr += w * yref[i * q + j] * yref[i * q + j];
    }
  if (N == 0) {
    *rel_error = *lo = *hi = NAN;
    return;
  }
  if (!isfinite(sd) || !isfinite(sr)) { /* as the exact mode: NaN and inf propagate */
    double r = sr == 0.0 ? (isnan(sd) ? NAN : INFINITY) : sqrt(sd / sr);
    *rel_error = *lo = *hi = r;
    return;
  }
  if (sr == 0.0) {
    *rel_error = sd == 0.0 ? 0.0 : INFINITY;
    *lo = whole ? *rel_error : 0.0;
    *hi = whole ? *rel_error : INFINITY;
    return;
  }
  const double R2 = sd / sr;
  *rel_error = sqrt(R2);
  if (whole || R2 == 0.0) {
    /* whole: exact; R2 == 0 with sr > 0: every sampled d is 0, so z is 0 and so is Var */
    *lo = *hi = *rel_error;
    return;
  }
  /* a sampled side of one draw leaves its term unknown: no interval */
  if ((p < 2 && !all_rows) || (q < 2 && !all_cols)) {
    *lo = 0.0;
    *hi = INFINITY;
    return;
  }
  double *rowm = calloc((size_t)(p + q), sizeof *rowm);
  if (!rowm) {
    *lo = 0.0;
    *hi = INFINITY;
    return;
  }
  /* z_ij = w_ij (d_ij - R2 r_ij): row means, column means, the grand mean, the residual */
  double *colm = rowm + p, gm = 0.0;
#define Z(i, j) (W(i, j) * (((double)y[(i) * q + (j)] - yref[(i) * q + (j)]) * \
                            ((double)y[(i) * q + (j)] - yref[(i) * q + (j)]) - \
                            R2 * yref[(i) * q + (j)] * yref[(i) * q + (j)]))
  for (int64_t i = 0; i < p; i++)
    for (int64_t j = 0; j < q; j++) {
      double z = Z(i, j);
      rowm[i] += z;
      colm[j] += z;
      gm += z;
    }
  for (int64_t i = 0; i < p; i++) rowm[i] /= (double)q;
  for (int64_t j = 0; j < q; j++) colm[j] /= (double)p;
  gm /= (double)N;
  double SR = 0.0, SC = 0.0, SE = 0.0;
  for (int64_t i = 0; i < p; i++) SR += (rowm[i] - gm) * (rowm[i] - gm);
  for (int64_t j = 0; j < q; j++) SC += (colm[j] - gm) * (colm[j] - gm);
  SR = p > 1 ? SR / (double)(p - 1) : 0.0;
  SC = q > 1 ? SC / (double)(q - 1) : 0.0;
  double var;
  if (all_rows) var = SC / (double)q;
  else if (all_cols) var = SR / (double)p;
  else {
    for (int64_t i = 0; i < p; i++)
      for (int64_t j = 0; j < q; j++) {
        double res = Z(i, j) - rowm[i] - colm[j] + gm;
        SE += res * res;
      }
    SE /= (double)((p - 1) * (q - 1));
    double sa = SR - SE / (double)q, sb = SC - SE / (double)p;
    var = (sa > 0.0 ? sa : 0.0) / (double)p + (sb > 0.0 ? sb : 0.0) / (double)q +
          SE / (double)N;
  }
#undef Z
#undef W
  free(rowm);
  double se = sqrt(var) / (sr / (double)N);
  double w = Z95 * se / R2;
  *lo = sqrt(R2 * exp(-w));
  *hi = sqrt(R2 * exp(w));
}

void fp8_gemm_sample_error(fp8_gemm_sample *s, const float *qa, const float *qb,
                           double *rel_error, double *lo, double *hi) {
  const int64_t p = s->p, q = s->q, k = s->k;
  if (p > 0 && q > 0) {
    fp8_gemm_block_f32(p, q, k, qa, qb, s->y); /* k = 0: zeros */
  }
  fp8_gemm_sample_estimate(s->yref, s->y, s->u, s->v, p, q, p == s->m, q == s->n, rel_error,
                           lo, hi);
}

void fp8_gemm_sample_error_tc(fp8_gemm_sample *s, fp8_tc_model m, int64_t promote, fp8_format fa,
                              fp8_format fb, const float *va, const float *vb, float sab,
                              double *rel_error, double *lo, double *hi) {
  const int64_t p = s->p, q = s->q, k = s->k;
  double l, h;
  if (p > 0 && q > 0) fp8_tc_block(m, fa, fb, p, q, k, va, vb, promote, sab, s->y);
  fp8_gemm_sample_estimate(s->yref, s->y, s->u, s->v, p, q, p == s->m, q == s->n, rel_error,
                           lo ? lo : &l, hi ? hi : &h);
}

/* ---------------------------------------------------------------- the paired ratio
 * Configuration c and the reference configuration r of the FP4 criterion, estimated on the same
 * block (the same rows, columns and weights: the draw does not depend on the configuration):
 * Q = sum(w d_c) / sum(w d_r) estimates (rel_error_c / rel_error_r)^2 (sum(w y_ref^2) cancels).
 * Its variance is the crossed design's, as the GEMM interval's, of the linearized residual
 * z = w (d_c - Q d_r); se = sqrt(Var) / mean(w d_r); the interval Q exp(-+1.96 se / Q). */

/* The crossed (rows x columns) variance of the block mean of z [p * q] (the GEMM interval's
 * formula, fp8_gemm_sample_estimate): Var = max(0, S_R - S_E / q) / p + max(0, S_C - S_E / p)
 * / q + S_E / (p q); all rows: S_C / q; all columns: S_R / p. NaN when out of memory. */
static double crossed_var(const double *z, int64_t p, int64_t q, bool all_rows, bool all_cols) {
  const int64_t N = p * q;
  double *rowm = calloc((size_t)(p + q), sizeof *rowm);
  if (!rowm) return NAN;
  double *colm = rowm + p, gm = 0.0;
  for (int64_t i = 0; i < p; i++)
    for (int64_t j = 0; j < q; j++) {
      rowm[i] += z[i * q + j];
      colm[j] += z[i * q + j];
      gm += z[i * q + j];
    }
  for (int64_t i = 0; i < p; i++) rowm[i] /= (double)q;
  for (int64_t j = 0; j < q; j++) colm[j] /= (double)p;
  gm /= (double)N;
  double SR = 0.0, SC = 0.0, SE = 0.0, var;
  for (int64_t i = 0; i < p; i++) SR += (rowm[i] - gm) * (rowm[i] - gm);
  for (int64_t j = 0; j < q; j++) SC += (colm[j] - gm) * (colm[j] - gm);
  SR = p > 1 ? SR / (double)(p - 1) : 0.0;
  SC = q > 1 ? SC / (double)(q - 1) : 0.0;
  if (all_rows) var = SC / (double)q;
  else if (all_cols) var = SR / (double)p;
  else {
    for (int64_t i = 0; i < p; i++)
      for (int64_t j = 0; j < q; j++) {
        double res = z[i * q + j] - rowm[i] - colm[j] + gm;
        SE += res * res;
      }
    SE /= (double)((p - 1) * (q - 1));
    double sa = SR - SE / (double)q, sb = SC - SE / (double)p;
    var = (sa > 0.0 ? sa : 0.0) / (double)p + (sb > 0.0 ? sb : 0.0) / (double)q +
          SE / (double)N;
  }
  free(rowm);
  return var;
}

void fp8_gemm_sample_ratio_estimate(const double *yref, const float *yc, const float *yr,
                                    const double *u, const double *v, int64_t p, int64_t q,
                                    bool all_rows, bool all_cols, double *ratio, double *lo,
                                    double *hi) {
  const int64_t N = p * q;
  const bool whole = all_rows && all_cols;
  if (N == 0) {
    *ratio = *lo = *hi = NAN;
    return;
  }
  double *z = malloc((size_t)N * sizeof *z); /* first w d_r, then the residual */
  double sc = 0.0, sr = 0.0;
  for (int64_t i = 0; i < p; i++)
    for (int64_t j = 0; j < q; j++) {
      double w = (u ? u[i] : 1.0) * (v ? v[j] : 1.0);
      double ec = (double)yc[i * q + j] - yref[i * q + j];
      double er = (double)yr[i * q + j] - yref[i * q + j];
      sc += w * ec * ec;
      sr += w * er * er;
    }
  if (!isfinite(sc) || !isfinite(sr)) { /* NaN and inf propagate, as the GEMM errors' */
    double x = sr == 0.0 ? (isnan(sc) ? NAN : INFINITY) : sqrt(sc / sr);
    *ratio = *lo = *hi = x;
    free(z);
    return;
  }
  if (sr == 0.0) { /* the reference's sampled error is 0: 0 / 0 counts as 1 (both exact) */
    *ratio = sc == 0.0 ? 1.0 : INFINITY;
    *lo = whole ? *ratio : 0.0;
    *hi = whole ? *ratio : INFINITY;
    free(z);
    return;
  }
  const double Q = sc / sr;
  *ratio = sqrt(Q);
  if (whole || Q == 0.0) { /* whole: exact; Q == 0: every d_c is 0, so is z and Var */
    *lo = *hi = *ratio;
    free(z);
    return;
  }
  if ((p < 2 && !all_rows) || (q < 2 && !all_cols) || !z) {
    *lo = 0.0;
    *hi = INFINITY;
    free(z);
    return;
  }
  for (int64_t i = 0; i < p; i++)
    for (int64_t j = 0; j < q; j++) {
      double w = (u ? u[i] : 1.0) * (v ? v[j] : 1.0);
      double ec = (double)yc[i * q + j] - yref[i * q + j];
      double er = (double)yr[i * q + j] - yref[i * q + j];
      z[i * q + j] = w * (ec * ec - Q * er * er);
    }
  double var = crossed_var(z, p, q, all_rows, all_cols);
  free(z);
  if (isnan(var)) {
    *lo = 0.0;
    *hi = INFINITY;
    return;
  }
  double se = sqrt(var) / (sr / (double)N);
  double w = Z95 * se / Q;
  *lo = sqrt(Q * exp(-w));
  *hi = sqrt(Q * exp(w));
}

void fp8_gemm_sample_ratio(const fp8_gemm_sample *s, const float *yc, const float *yr,
                           double *ratio, double *lo, double *hi) {
  fp8_gemm_sample_ratio_estimate(s->yref, yc, yr, s->u, s->v, s->p, s->q, s->p == s->m,
                                 s->q == s->n, ratio, lo, hi);
}
