/* quant.c: amax and the quantize + statistics loop, the simulator's hot path.
 *
 * A tensor is processed in chunks that stay in L1: pass 1 scales and encodes and counts
 * (branch-free, vectorizable), pass 2 decodes through the 256-entry table and accumulates the
 * squared errors in double with four independent partial sums (a fixed order, so results are
 * reproducible run to run). The loops are compiled once per instruction set (generic x86-64,
 * AVX2, AVX-512) and the best the CPU has is taken at run time; all give identical results.
 * The weighted form (a value histogram, valhist.h) has its own fused loop: quant_weighted.c.
 */
#include "fp8.h"
#include "encode_inline.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

#define CHUNK 1024

/* The amax of n float32 values read bytewise (a mapped view may be unaligned). Non-negative
 * floats order like their bit patterns read as int32; NaN (bits above inf) is mapped to 0 so
 * it never wins. Integer max vectorizes without any fast-math flag. */
static float amax_f32_bytes(const unsigned char *b, size_t n) {
  int32_t m = 0;
  for (size_t i = 0; i < n; i++) {
    int32_t a;
    memcpy(&a, b + 4 * i, sizeof a);
    a &= 0x7FFFFFFF;
    a = a > 0x7F800000 ? 0 : a;
    m = a > m ? a : m;
  }
  float r;
  memcpy(&r, &m, sizeof r);
  return r;
}

float fp8_amax_f32(const float *x, size_t n) { return amax_f32_bytes((const unsigned char *)x, n); }

float fp8_amax_dtype(fp8_dtype d, const void *data, size_t n) {
  const unsigned char *b = data;
  if (d == FP8_DTYPE_F32) return amax_f32_bytes(b, n);
  /* BF16: inf 0x7F80, NaN above; F16: inf 0x7C00, NaN above. Signed 16-bit (the magnitudes fit
   * 15 bits): SSE2 has a signed 16-bit max and compare, not an unsigned one, so this loop
   * vectorizes on plain x86-64 (about 9 GB/s against 1.5 with uint16_t) */
  const int16_t inf = d == FP8_DTYPE_BF16 ? 0x7F80 : 0x7C00;
  int16_t m = 0;
  for (size_t i = 0; i < n; i++) {
    int16_t a;
    memcpy(&a, b + 2 * i, sizeof a);
    a &= 0x7FFF;
    a = a > inf ? 0 : a;
    m = a > m ? a : m;
  }
  return d == FP8_DTYPE_BF16 ? fp8_bf16_to_f32((uint16_t)m) : fp8_f16_to_f32((uint16_t)m);
}

/* The log2 bin index (b - FP8_LOG2_HIST_MIN) of x, or -1 for zeros, inf and NaN. */
static inline int log2_bin_index(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  uint32_t e = (u >> 23) & 0xFFu, m = u & 0x7FFFFFu;
  if (e == 0xFFu || (e == 0 && m == 0)) return -1; /* inf, NaN, zeros */
  /* normal: the unbiased exponent; subnormal: the position of the leading mantissa bit */
  int b = e ? (int)e - 127 : (31 - __builtin_clz(m)) - 149;
  return b - FP8_LOG2_HIST_MIN;
}

int fp8_log2_bin_index(float x) { return log2_bin_index(x); }

void fp8_log2_histogram(const float *x, size_t n, int64_t *hist) {
  for (size_t i = 0; i < n; i++) {
    int k = log2_bin_index(x[i]);
    if (k >= 0) hist[k]++;
  }
}

void fp8_stats_init(fp8_stats *st) { memset(st, 0, sizeof *st); }

void fp8_stats_uncast(fp8_stats *st) {
  st->overflow = st->underflow = st->subnormal = st->clipped = 0;
  st->sum_sq_err = 0.0;
  st->sum_sq_hat = st->sum_sq;
}

void fp8_stats_merge(fp8_stats *dst, const fp8_stats *src) {
  dst->n += src->n;
  dst->nonfinite += src->nonfinite;
  dst->zeros += src->zeros;
  dst->overflow += src->overflow;
  dst->underflow += src->underflow;
  dst->subnormal += src->subnormal;
  dst->sum_sq_err += src->sum_sq_err;
  dst->sum_sq += src->sum_sq;
  dst->clipped += src->clipped;
  dst->sum_sq_hat += src->sum_sq_hat;
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

double fp8_stats_cos_sim(const fp8_stats *st) {
  double sx = st->sum_sq, sh = st->sum_sq_hat;
  if (sx == 0.0 && sh == 0.0) return 1.0;
  if (sx == 0.0 || sh == 0.0) return 0.0;
  if (!isfinite(sx) || !isfinite(sh) || !isfinite(st->sum_sq_err)) return NAN;
  /* sum (x - xhat)^2 = sum x^2 + sum xhat^2 - 2 sum x xhat */
  double c = 0.5 * (sx + sh - st->sum_sq_err) / (sqrt(sx) * sqrt(sh));
  return c > 1.0 ? 1.0 : c < -1.0 ? -1.0 : c;
}

uint32_t fp8_clip_bits(fp8_format f) {
  /* E4M3: 464 = 448 + half an ulp ties down to 448, above it the rounding would go to 480;
   * E5M2: 61440 = 57344 + half an ulp ties up to 65536, so from 61440 on (> its predecessor) */
  return f == FP8_E5M2 ? enc_f2u(61440.0f) - 1u : enc_f2u(464.0f);
}

/* ------------------------------------------------------------------ the hot loops
 *
 * Written so that they vectorize without changing a bit of any result: the counters are
 * integers (32-bit within a chunk of at most CHUNK elements, then added to the 64-bit totals),
 * and the double error sums keep their fixed order: element i of a chunk goes to partial sum
 * i mod 4 (the tail to sum 0), the four are added as (e0 + e1) + (e2 + e3), and every term is
 * (double)x - (double)xhat squared, exactly as before. A 4-wide double vector (AVX2), two
 * 2-wide ones (SSE2) or scalar code compute the same lanes in the same order, so the variants
 * below give identical results (tests/sim/test_quantize.c compares every variant the CPU has). */

#define QUANT_INLINE static inline __attribute__((always_inline))

typedef float v4f __attribute__((vector_size(16)));
typedef double v4d __attribute__((vector_size(32)));

/* Pass 1 over one chunk: codes and counters. */
QUANT_INLINE void chunk_encode(const float *restrict x, size_t n,
                               float s, fp8_format f, uint8_t *restrict q, fp8_stats *st) {
  uint32_t maxbits = enc_f2u(fp8_format_max(f)), clipbits = fp8_clip_bits(f);
  uint8_t emask = f == FP8_E4M3 ? 0x78 : 0x7C;
  uint32_t cnt = 0, nonfinite = 0, zeros = 0, overflow = 0, underflow = 0, subnormal = 0;
  uint32_t clipped = 0;
  float y[CHUNK];
  for (size_t i = 0; i < n; i++) y[i] = x[i] * s;
  if (f == FP8_E5M2)
    for (size_t i = 0; i < n; i++) q[i] = ENCODE_E5M2(enc_f2u(y[i]));
  else
    for (size_t i = 0; i < n; i++) q[i] = ENCODE_E4M3(enc_f2u(y[i]));
  for (size_t i = 0; i < n; i++) {
    uint32_t c = 1u;
    uint32_t ax = enc_f2u(x[i]) & 0x7FFFFFFFu;
    uint32_t ay = enc_f2u(y[i]) & 0x7FFFFFFFu;
    uint32_t finite = ax < 0x7F800000u;
    uint32_t code_zero = (q[i] & 0x7F) == 0;
    uint32_t code_sub = ((q[i] & emask) == 0) & !code_zero;
    cnt += c;
    nonfinite += c & (0u - !finite);
    zeros += c & (0u - (ax == 0));
    overflow += c & (0u - (finite & (ay > maxbits)));
    clipped += c & (0u - (finite & (ay > clipbits)));
    underflow += c & (0u - (finite & (ax != 0) & code_zero));
    subnormal += c & (0u - (finite & code_sub));
  }
  st->n += cnt;
  st->nonfinite += nonfinite;
  st->zeros += zeros;
  st->overflow += overflow;
  st->underflow += underflow;
  st->subnormal += subnormal;
  st->clipped += clipped;
}

/* Pass 2 over one chunk: dequantize (table lookup), then accumulate errors over finite
 * elements in double, four lanes in a fixed order. Non-finite elements enter as exact zeros. */
QUANT_INLINE void chunk_error(const float *restrict x, size_t n,
                              const uint8_t *restrict q, const float *restrict table,
                              float scale_inv, float *restrict xhat, fp8_stats *st) {
  float xh[CHUNK], xm[CHUNK], hm[CHUNK];
  if (!st) { /* only the dequantized values (a GEMM operand): no sums to accumulate */
    for (size_t i = 0; i < n; i++) xhat[i] = table[q[i]] * scale_inv;
    return;
  }
  for (size_t i = 0; i < n; i++) xh[i] = table[q[i]] * scale_inv;
  if (xhat) memcpy(xhat, xh, n * sizeof *xh);
  for (size_t i = 0; i < n; i++) {
    int fin = (enc_f2u(x[i]) & 0x7FFFFFFFu) < 0x7F800000u;
    xm[i] = fin ? x[i] : 0.0f;
    hm[i] = fin ? xh[i] : 0.0f;
  }
  /* GCC's generic vectors: one 4-wide double vector under AVX2, two 2-wide ones under SSE2;
   * the lanes are the same either way. */
  /* element by element: lane k of e / s sums elements i with i mod 4 == k, the tail into
   * lane 0, as this loop always has (the results of the per-element path do not change) */
  v4d e = {0, 0, 0, 0}, s = {0, 0, 0, 0}, h = {0, 0, 0, 0};
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    v4f xf, hf;
    memcpy(&xf, xm + i, sizeof xf);
    memcpy(&hf, hm + i, sizeof hf);
    v4d xd = __builtin_convertvector(xf, v4d), hd = __builtin_convertvector(hf, v4d);
    v4d d = xd - hd;
    e += d * d;
    s += xd * xd;
    h += hd * hd;
  }
  for (; i < n; i++) {
    double xd = (double)xm[i], hd = (double)hm[i], d = xd - hd;
    e[0] += d * d;
    s[0] += xd * xd;
    h[0] += hd * hd;
  }
  st->sum_sq_err += (e[0] + e[1]) + (e[2] + e[3]);
  st->sum_sq += (s[0] + s[1]) + (s[2] + s[3]);
  st->sum_sq_hat += (h[0] + h[1]) + (h[2] + h[3]);
}

/* Only the dequantized values (a GEMM operand: no codes, no counts): table[code(x * s)] *
 * scale_inv computed in the float domain, the same bits. The encoder's rounding (encode_bits)
 * applied to the float's own bits: the mantissa rounded to the format's bits (ties to even; a
 * carry into the exponent is right), below the smallest normal |y| + magic - magic (a multiple
 * of the smallest subnormal, exact), from the saturation bound on the largest finite value, the
 * sign put back; NaN is the table's NaN (code 0x7F), so the product with scale_inv is too. */
#define FAKEQ(NAME, MS, MINN, SAT, MAGIC)                                                        \
  QUANT_INLINE void NAME(const float *restrict x, size_t n, float s, float scale_inv,          \
                         uint32_t maxbits, float nan, float *restrict xhat) {                  \
    for (size_t i = 0; i < n; i++) {                                                            \
      uint32_t u = enc_f2u(x[i] * s), a = u & 0x7FFFFFFFu;                                      \
      uint32_t lsb = (a >> (MS)) & 1u;                                                          \
      uint32_t normal = (a + ((1u << ((MS)-1)) - 1u) + lsb) & ~((1u << (MS)) - 1u);             \
      uint32_t sub = enc_f2u((enc_u2f(a) + (MAGIC)) - (MAGIC));                                  \
      uint32_t r = a < (MINN) ? sub : normal;                                                   \
      r = a >= (SAT) ? maxbits : r;                                                             \
      float v = enc_u2f(r | (u & 0x80000000u));                                                 \
      v = a > 0x7F800000u ? nan : v;                                                            \
      xhat[i] = v * scale_inv;                                                                  \
    }                                                                                           \
  }
FAKEQ(fakequant_e4m3, 20, 0x3C800000u, 0x43E80001u, 16384.0f)
FAKEQ(fakequant_e5m2, 21, 0x38800000u, 0x47700000u, 128.0f)
#undef FAKEQ

/* The whole loop over a tensor, once per instruction set. */
QUANT_INLINE void quant_body(const float *x, size_t n, float s, fp8_format f,
                             uint8_t *codes, float *xhat, fp8_stats *st) {
  const float *table = fp8_decode_table(f);
  float scale_inv = 1.0f / s;
  if (!codes && !st) {
    if (!xhat) return;
    uint32_t maxbits = enc_f2u(fp8_format_max(f));
    if (f == FP8_E5M2) fakequant_e5m2(x, n, s, scale_inv, maxbits, table[0x7F], xhat);
    else fakequant_e4m3(x, n, s, scale_inv, maxbits, table[0x7F], xhat);
    return;
  }
  fp8_stats local;
  fp8_stats_init(&local);
  uint8_t qbuf[CHUNK];
  for (size_t off = 0; off < n; off += CHUNK) {
    size_t m = n - off < CHUNK ? n - off : CHUNK;
    uint8_t *q = codes ? codes + off : qbuf;
    chunk_encode(x + off, m, s, f, q, &local);
    if (st || xhat)
      chunk_error(x + off, m, q, table, scale_inv, xhat ? xhat + off : NULL, st ? &local : NULL);
  }
  if (st) fp8_stats_merge(st, &local);
}

#define QUANT_VARIANT { quant_body(x, n, s, f, codes, xhat, st); }

typedef void (*quant_fn)(const float *x, size_t n, float s, fp8_format f,
                         uint8_t *codes, float *xhat, fp8_stats *st);

static void quant_generic(const float *x, size_t n, float s, fp8_format f,
                          uint8_t *codes, float *xhat, fp8_stats *st) QUANT_VARIANT

#if defined(__x86_64__) && defined(__GNUC__)
#define FP8_HAVE_ISA_VARIANTS 1
__attribute__((target("avx2"))) static void
quant_avx2(const float *x, size_t n, float s, fp8_format f, uint8_t *codes,
           float *xhat, fp8_stats *st) QUANT_VARIANT

__attribute__((target("avx512f,avx512bw,avx512vl"))) static void
quant_avx512(const float *x, size_t n, float s, fp8_format f, uint8_t *codes,
             float *xhat, fp8_stats *st) QUANT_VARIANT
#endif

/* ------------------------------------------------------------------ dispatch */

/* Chosen at the first call, which the engine's worker threads may make at once: racing first
 * calls pick the same, but plain variables would still be a data race (ThreadSanitizer's report
 * in the command-line tests, issue 16), so both are atomic. quant_isa is stored before quant_impl (seq_cst),
 * so a thread that sees the function set sees its instruction set too. */
static _Atomic(quant_fn) quant_impl;
static _Atomic int quant_isa = FP8_ISA_AUTO;

static int isa_supported(fp8_isa isa) {
  switch (isa) {
  case FP8_ISA_GENERIC: return 1;
#ifdef FP8_HAVE_ISA_VARIANTS
  case FP8_ISA_AVX2: return __builtin_cpu_supports("avx2");
  case FP8_ISA_AVX512:
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl");
#endif
  default: return 0;
  }
}

static quant_fn isa_fn(fp8_isa isa) {
#ifdef FP8_HAVE_ISA_VARIANTS
  if (isa == FP8_ISA_AVX512) return quant_avx512;
  if (isa == FP8_ISA_AVX2) return quant_avx2;
#endif
  return quant_generic;
}

int fp8_isa_available(fp8_isa isa) { return isa_supported(isa); }

const char *fp8_isa_name(fp8_isa isa) {
  switch (isa) {
  case FP8_ISA_AUTO: return "auto";
  case FP8_ISA_GENERIC: return "generic";
  case FP8_ISA_AVX2: return "avx2";
  case FP8_ISA_AVX512: return "avx512";
  }
  return "?";
}

int fp8_isa_set(fp8_isa isa) {
  if (isa == FP8_ISA_AUTO) {
    isa = isa_supported(FP8_ISA_AVX512) ? FP8_ISA_AVX512
        : isa_supported(FP8_ISA_AVX2)   ? FP8_ISA_AVX2 : FP8_ISA_GENERIC;
  } else if (!isa_supported(isa)) {
    return FP8_EINVAL;
  }
  atomic_store(&quant_isa, (int)isa);
  atomic_store(&quant_impl, isa_fn(isa));
  return FP8_OK;
}

fp8_isa fp8_isa_current(void) {
  if (!atomic_load(&quant_impl)) fp8_isa_set(FP8_ISA_AUTO);
  return (fp8_isa)atomic_load(&quant_isa);
}

static quant_fn impl(void) {
  quant_fn f = atomic_load(&quant_impl);
  if (!f) {
    fp8_isa_set(FP8_ISA_AUTO);
    f = atomic_load(&quant_impl);
  }
  return f;
}

void fp8_quantize_f32(const float *x, size_t n, float s, fp8_format f, uint8_t *codes,
                      float *xhat, fp8_stats *st) {
  impl()(x, n, s, f, codes, xhat, st);
}
