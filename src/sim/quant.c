/* quant.c: amax and the quantize + statistics loop, the simulator's hot path.
 *
 * A tensor is processed in chunks that stay in L1: pass 1 scales and encodes and counts
 * (branch-free, vectorizable), pass 2 decodes through the 256-entry table and accumulates the
 * squared errors in double with four independent partial sums (a fixed order, so results are
 * reproducible run to run).
 */
#include "fp8.h"

#include <math.h>
#include <string.h>

#define CHUNK 1024

static inline uint32_t f2u(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

float fp8_amax_f32(const float *x, size_t n) {
  /* Non-negative floats order like their bit patterns read as int32; NaN (bits above inf) is
   * mapped to 0 so it never wins. Integer max vectorizes without any fast-math flag. */
  int32_t m = 0;
  for (size_t i = 0; i < n; i++) {
    int32_t a;
    memcpy(&a, &x[i], sizeof a);
    a &= 0x7FFFFFFF;
    a = a > 0x7F800000 ? 0 : a;
    m = a > m ? a : m;
  }
  float r;
  memcpy(&r, &m, sizeof r);
  return r;
}

void fp8_log2_histogram(const float *x, size_t n, int64_t *hist) {
  for (size_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, &x[i], sizeof u);
    uint32_t e = (u >> 23) & 0xFFu, m = u & 0x7FFFFFu;
    if (e == 0xFFu || (e == 0 && m == 0)) continue; /* inf, NaN, zeros */
    /* normal: the unbiased exponent; subnormal: the position of the leading mantissa bit */
    int b = e ? (int)e - 127 : (31 - __builtin_clz(m)) - 149;
    hist[b - FP8_LOG2_HIST_MIN]++;
  }
}

void fp8_stats_init(fp8_stats *st) { memset(st, 0, sizeof *st); }

void fp8_stats_merge(fp8_stats *dst, const fp8_stats *src) {
  dst->n += src->n;
  dst->nonfinite += src->nonfinite;
  dst->zeros += src->zeros;
  dst->overflow += src->overflow;
  dst->underflow += src->underflow;
  dst->subnormal += src->subnormal;
  dst->sum_sq_err += src->sum_sq_err;
  dst->sum_sq += src->sum_sq;
}

double fp8_stats_mse(const fp8_stats *st) {
  int64_t finite = st->n - st->nonfinite;
  if (finite <= 0) return NAN;
  return st->sum_sq_err / (double)finite;
}

double fp8_stats_snr_db(const fp8_stats *st) {
  if (st->sum_sq_err == 0.0) return INFINITY;
  return 10.0 * log10(st->sum_sq / st->sum_sq_err);
}

/* Pass 1 over one chunk: codes and counters. */
static void chunk_encode(const float *x, size_t n, float s, fp8_format f, uint8_t *q,
                         fp8_stats *st) {
  uint32_t maxbits = f2u(fp8_format_max(f));
  uint8_t emask = f == FP8_E4M3 ? 0x78 : 0x7C;
  int64_t nonfinite = 0, zeros = 0, overflow = 0, underflow = 0, subnormal = 0;
  float y[CHUNK];
  for (size_t i = 0; i < n; i++) y[i] = x[i] * s;
  fp8_encode_array(y, n, f, q);
  for (size_t i = 0; i < n; i++) {
    uint32_t ax = f2u(x[i]) & 0x7FFFFFFFu;
    uint32_t ay = f2u(y[i]) & 0x7FFFFFFFu;
    int finite = ax < 0x7F800000u;
    int code_zero = (q[i] & 0x7F) == 0;
    int code_sub = (q[i] & emask) == 0 && !code_zero;
    nonfinite += !finite;
    zeros += ax == 0;
    overflow += finite & (ay > maxbits);
    underflow += finite & (ax != 0) & code_zero;
    subnormal += finite & code_sub;
  }
  st->n += (int64_t)n;
  st->nonfinite += nonfinite;
  st->zeros += zeros;
  st->overflow += overflow;
  st->underflow += underflow;
  st->subnormal += subnormal;
}

/* Pass 2 over one chunk: dequantize (table lookup), then accumulate errors over finite
 * elements in double, four lanes at a time so that the sums vectorize in a fixed order. */
static void chunk_error(const float *restrict x, size_t n, const uint8_t *restrict q,
                        const float *restrict table, float scale_inv, float *restrict xhat,
                        fp8_stats *st) {
  float xh[CHUNK];
  for (size_t i = 0; i < n; i++) xh[i] = table[q[i]] * scale_inv;
  if (xhat) memcpy(xhat, xh, n * sizeof *xh);
  double e0 = 0, e1 = 0, e2 = 0, e3 = 0, s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  size_t i = 0;
#define FP8_ERR_TERM(k, e, s)                                                   \
  do {                                                                          \
    int32_t bits_;                                                              \
    memcpy(&bits_, &x[i + (k)], sizeof bits_);                                  \
    int fin_ = (bits_ & 0x7FFFFFFF) < 0x7F800000;                               \
    double xd_ = fin_ ? (double)x[i + (k)] : 0.0;                               \
    double d_ = fin_ ? xd_ - (double)xh[i + (k)] : 0.0;                         \
    e += d_ * d_;                                                               \
    s += xd_ * xd_;                                                             \
  } while (0)
  for (; i + 4 <= n; i += 4) {
    FP8_ERR_TERM(0, e0, s0);
    FP8_ERR_TERM(1, e1, s1);
    FP8_ERR_TERM(2, e2, s2);
    FP8_ERR_TERM(3, e3, s3);
  }
  for (; i < n; i++) FP8_ERR_TERM(0, e0, s0);
#undef FP8_ERR_TERM
  st->sum_sq_err += (e0 + e1) + (e2 + e3);
  st->sum_sq += (s0 + s1) + (s2 + s3);
}

void fp8_quantize_f32(const float *x, size_t n, float s, fp8_format f, uint8_t *codes,
                      float *xhat, fp8_stats *st) {
  const float *table = fp8_decode_table(f);
  float scale_inv = 1.0f / s;
  fp8_stats local;
  fp8_stats_init(&local);
  uint8_t qbuf[CHUNK];
  for (size_t off = 0; off < n; off += CHUNK) {
    size_t m = n - off < CHUNK ? n - off : CHUNK;
    uint8_t *q = codes ? codes + off : qbuf;
    chunk_encode(x + off, m, s, f, q, &local);
    if (st || xhat) chunk_error(x + off, m, q, table, scale_inv, xhat ? xhat + off : NULL, &local);
  }
  if (st) fp8_stats_merge(st, &local);
}
