/* fp4.c: see fp4.h. Every float operation is one float32 operation in the order TE's kernels
 * do them (the library builds with -ffp-contract=off: no fused multiply-adds). */
#include "fp4.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const float E2M1_VALUES[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

/* The cast, inlined into the loops below: the midpoints between neighbours, counted without
 * branches (a tie goes to the even index: > at the odd index's lower midpoint, >= at its upper
 * one); above 5 (inf too) 6, saturating; NaN becomes +6 (satfinite: +MAX_NORM). */
static inline uint8_t enc(float y) {
  if (y != y) return 7;
  uint32_t bits;
  memcpy(&bits, &y, sizeof bits);
  float a = fabsf(y);
  int m = (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) + (a >= 3.5f) +
          (a > 5.0f);
  return (uint8_t)((bits >> 31) << 3 | (uint32_t)m);
}

static inline float dec(uint8_t code) {
  float v = E2M1_VALUES[code & 7];
  return code & 8 ? -v : v;
}

/* fmaxf(a, |v|) for a >= 0 without the libm call: a NaN v is ignored, as fmaxf does. */
static inline float max_abs(float a, float v) {
  v = fabsf(v);
  return v > a ? v : a;
}

uint8_t fp8_e2m1_encode(float y) { return enc(y); }

float fp8_e2m1_decode(uint8_t code) { return dec(code); }

int fp8_e2m1_clips(float y) { return fabsf(y) >= 7.0f; }

float fp8_nvfp4_global_scale(float amax, float e4m3_max) {
  float s = fminf(e4m3_max * FP8_E2M1_MAX / amax, FLT_MAX);
  if (amax == 0.0f || s == 0.0f) return 1.0f;
  return s;
}

uint8_t fp8_nvfp4_block_scale(float block_amax, float s_enc) {
  const float fp4_max_inv = 1.0f / FP8_E2M1_MAX;
  return fp8_encode(fminf(block_amax * (s_enc * fp4_max_inv), FLT_MAX), FP8_E4M3);
}

uint8_t fp8_fp4_sr_byte(uint64_t seed, uint64_t i) {
  uint64_t z = seed + i * 0x9E3779B97F4A7C15ull + 0x9E3779B97F4A7C15ull; /* splitmix64 */
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return (uint8_t)(z ^ (z >> 31));
}

/* Stochastic rounding of y (|y| < 6) with byte r: the lower grid neighbour's index k, the
 * probability u / 256 of going up (u = floor(256 f), TE's 8-bit rule) and the code drawn. */
static inline uint8_t enc_sr(float y, uint8_t r, int *k, double *p_up) {
  float a = fabsf(y);
  int i = (a >= 0.5f) + (a >= 1.0f) + (a >= 1.5f) + (a >= 2.0f) + (a >= 3.0f) + (a >= 4.0f);
  double f = ((double)a - E2M1_VALUES[i]) / ((double)E2M1_VALUES[i + 1] - E2M1_VALUES[i]);
  double u = floor(256.0 * f);
  *k = i;
  *p_up = u / 256.0;
  uint32_t bits;
  memcpy(&bits, &y, sizeof bits);
  return (uint8_t)((bits >> 31) << 3 | (uint32_t)(i + (u > (double)r)));
}

/* One element cast with multiplier e and dequantized with dq: its code, value and stats.
 * sr (NULL: round to nearest) draws with byte number idx and accumulates the expectation. */
static inline void put_element(float x, float e, float dq, uint8_t *code, float *xhat,
                               fp8_stats *st, fp8_fp4_sr *sr, uint64_t idx) {
  float y = x * e;
  int k = 0;
  double p_up = 0.0;
  uint8_t c = sr && fabsf(y) < FP8_E2M1_MAX
                  ? enc_sr(y, fp8_fp4_sr_byte(sr->seed, sr->index0 + idx), &k, &p_up)
                  : enc(y);
  float h = dec(c) * dq;
  if (code) *code = c;
  if (xhat) *xhat = h;
  if (!st) return;
  st->n++;
  if (!isfinite(x)) {
    st->nonfinite++;
    return;
  }
  if (x == 0.0f) st->zeros++;
  if (fabsf(y) > FP8_E2M1_MAX) st->overflow++;
  if (fabsf(y) >= 7.0f) st->clipped++; /* fp8_e2m1_clips */
  if (x != 0.0f && (c & 7) == 0) st->underflow++;
  if ((c & 7) == 1) st->subnormal++;
  double d = (double)x - (double)h;
  st->sum_sq_err += d * d;
  st->sum_sq += (double)x * (double)x;
  st->sum_sq_hat += (double)h * (double)h;
  if (!sr) return;
  if (!(fabsf(y) < FP8_E2M1_MAX)) { /* saturated: no randomness */
    sr->sum_sq_err += d * d;
    return;
  }
  /* the two outcomes, each dequantized as the drawn one is */
  uint8_t sgn = c & 8;
  float lo = dec((uint8_t)(sgn | k)) * dq, hi = dec((uint8_t)(sgn | (k + 1))) * dq;
  double dl = (double)x - (double)lo, dh = (double)x - (double)hi;
  sr->sum_sq_err += p_up * dh * dh + (1.0 - p_up) * dl * dl;
  if (x != 0.0f && k == 0) sr->underflow += 1.0 - p_up;
}

/* fmaxf of |x| over rows [r0, r1) and columns [c0, c1) of the [*, cols] matrix x. */
static float block_amax(const float *x, int64_t cols, int64_t r0, int64_t r1, int64_t c0,
                        int64_t c1) {
  float a = 0.0f;
  for (int64_t r = r0; r < r1; r++)
    for (int64_t c = c0; c < c1; c++) a = max_abs(a, x[r * cols + c]);
  return a;
}

/* 4over6: one candidate scale code's error over rows [r0, r1) and columns [c0, c1): per row
 * the float32 sum in column order, then the rows' sums as TE's tree (offsets 8, 4, 2, 1; a
 * 1x16 run has one row). */
static float cand_error(const float *x, int64_t cols, int64_t r0, int64_t r1, int64_t c0,
                        int64_t c1, uint8_t sc, float s_dec, float amax_g, float range, int mse) {
  float s = fp8_decode(sc, FP8_E4M3);
  float e = fminf(1.0f / (s * s_dec), FLT_MAX);
  float row[FP8_NVFP4_BLOCK] = {0};
  for (int64_t r = r0; r < r1; r++) {
    float acc = 0.0f;
    for (int64_t c = c0; c < c1; c++) {
      float xv = x[r * cols + c];
      float q = dec(enc(xv * e));
      float d = ((q * s) * amax_g) / range - xv;
      acc += mse ? d * d : fabsf(d);
    }
    row[r - r0] = acc;
  }
  for (int off = FP8_NVFP4_BLOCK / 2; off >= 1; off /= 2)
    for (int i = 0; i < off; i++) row[i] += row[i + off];
  return row[0];
}

/* The block's scale code under p's rule (s_enc and s_dec: the per-tensor scales). */
static uint8_t choose_scale(const float *x, int64_t cols, int64_t r0, int64_t r1, int64_t c0,
                            int64_t c1, const fp8_nvfp4_params *p, float e4m3_max, float s_enc,
                            float s_dec) {
  float amax = block_amax(x, cols, r0, r1, c0, c1);
  if (p->rule == FP8_NVFP4_MAX6) return fp8_nvfp4_block_scale(amax, s_enc);
  float base = amax / FP8_E2M1_MAX * s_enc;
  uint8_t s6 = fp8_encode(fminf(base, FP8_E4M3_MAX), FP8_E4M3);
  uint8_t s4 = fp8_encode(fminf(base * 1.5f, FP8_E4M3_MAX), FP8_E4M3);
  float range = FP8_E2M1_MAX * e4m3_max;
  int mse = p->rule == FP8_NVFP4_4OVER6_MSE;
  float e6 = cand_error(x, cols, r0, r1, c0, c1, s6, s_dec, p->global_amax, range, mse);
  float e4 = cand_error(x, cols, r0, r1, c0, c1, s4, s_dec, p->global_amax, range, mse);
  return e4 < e6 ? s4 : s6;
}

int fp8_nvfp4_quantize_f32(const float *x, int64_t rows, int64_t cols, const fp8_nvfp4_params *p,
                           uint8_t *codes, uint8_t *scales, float *xhat, fp8_stats *st) {
  if (!p || rows < 0 || cols < 0 || (rows * cols > 0 && !x)) return FP8_EINVAL;
  const float e4m3_max = p->e4m3_max > 0.0f ? p->e4m3_max : FP8_E4M3_MAX;
  const float s_enc = fp8_nvfp4_global_scale(p->global_amax, e4m3_max);
  const float s_dec = 1.0f / s_enc;
  /* TE's dequantization: the block scale times the global amax over 6 * 448 */
  const float dq_unit = 1.0f / (FP8_E2M1_MAX * e4m3_max);
  uint8_t *row_scales = p->square ? malloc((size_t)((cols + FP8_NVFP4_BLOCK - 1) / FP8_NVFP4_BLOCK) + 1) : NULL;
  if (p->square && !row_scales) return FP8_ENOMEM;
  const int64_t B = FP8_NVFP4_BLOCK, nrun = (cols + B - 1) / B;
  uint8_t *prev = NULL; /* 16x16 blocks: the block row's scales, decided once at its first row */
  for (int64_t r = 0; r < rows; r++) {
    for (int64_t k = 0; k < nrun; k++) {
      int64_t c0 = k * B, c1 = c0 + B < cols ? c0 + B : cols;
      int64_t r0 = p->square ? r - r % B : r;
      int64_t r1 = p->square ? (r0 + B < rows ? r0 + B : rows) : r + 1;
      uint8_t sc = prev && r != r0 ? prev[k]
                                   : choose_scale(x, cols, r0, r1, c0, c1, p, e4m3_max, s_enc, s_dec);
      float s = fp8_decode(sc, FP8_E4M3);
      float e = fminf(1.0f / (s * s_dec), FLT_MAX);
      float dq = (s * p->global_amax) * dq_unit;
      if (scales) scales[r * nrun + k] = sc;
      if (p->square) row_scales[k] = sc;
      for (int64_t c = c0; c < c1; c++)
        put_element(x[r * cols + c], e, dq, codes ? &codes[r * cols + c] : NULL,
                    xhat ? &xhat[r * cols + c] : NULL, st, p->sr, (uint64_t)(r * cols + c));
    }
    if (p->square) prev = row_scales;
  }
  free(row_scales);
  return FP8_OK;
}

uint8_t fp8_mxfp4_scale_exponent(float block_amax, fp8_mx_rounding r) {
  float b = fabsf(block_amax);
  if (isnan(b)) return 0xFF;
  if (r == FP8_MX_ROUND_CEIL) return fp8_e8m0_ceil(b * (1.0f / FP8_E2M1_MAX));
  if (isinf(b)) return 0xFE;
  if (b == 0.0f) return 0;
  return fp8_e8m0_floor(b, 2); /* E2M1's emax */
}

int fp8_mxfp4_quantize_f32(const float *x, int64_t rows, int64_t cols, fp8_mx_rounding rnd,
                           uint8_t *codes, uint8_t *scales, float *xhat, fp8_stats *st) {
  if (rows < 0 || cols < 0 || (rows * cols > 0 && !x)) return FP8_EINVAL;
  const int64_t B = FP8_MXFP4_BLOCK, nrun = (cols + B - 1) / B;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t k = 0; k < nrun; k++) {
      int64_t c0 = k * B, c1 = c0 + B < cols ? c0 + B : cols;
      uint8_t e = fp8_mxfp4_scale_exponent(block_amax(x, cols, r, r + 1, c0, c1), rnd);
      float s = fp8_e8m0_scale(e), dq = 1.0f / s; /* exact powers of two for e <= 254 */
      if (scales) scales[r * nrun + k] = e;
      for (int64_t c = c0; c < c1; c++)
        put_element(x[r * cols + c], s, dq, codes ? &codes[r * cols + c] : NULL,
                    xhat ? &xhat[r * cols + c] : NULL, st, NULL, 0);
    }
  return FP8_OK;
}

/* ---------------------------------------------------------------- RHT and stochastic rounding */

/* v (a double) rounded once to BF16, to nearest even: 8 significant bits, quantum 2^-133 below
 * BF16's smallest normal 2^-126, infinity above its largest finite value. */
static float round_bf16(double v) {
  if (v == 0.0 || !isfinite(v)) return (float)v;
  int e;
  (void)frexp(v, &e); /* |v| = m 2^e, m in [0.5, 1) */
  int q = e - 8 < -133 ? -133 : e - 8;
  double r = nearbyint(ldexp(v, -q)); /* the default rounding mode: to nearest even */
  return (float)ldexp(r, q);          /* exact in float32, or inf past its range */
}

static int parity(unsigned v) {
  int p = 0;
  for (; v; v &= v - 1) p ^= 1;
  return p;
}

int fp8_rht16(const float *x, size_t n, float *y) {
  if (n % 16) return FP8_EINVAL;
  for (size_t g = 0; g < n; g += 16) {
    double in[16], out[16];
    for (int i = 0; i < 16; i++) in[i] = (FP8_RHT_SIGNS >> i & 1u) ? -(double)x[g + i] : (double)x[g + i];
    for (int j = 0; j < 16; j++) {
      double acc = 0.0;
      for (int i = 0; i < 16; i++) acc += parity((unsigned)(i & j)) ? -in[i] : in[i];
      out[j] = acc * 0.25;
    }
    for (int j = 0; j < 16; j++) y[g + j] = round_bf16(out[j]);
  }
  return FP8_OK;
}

/* The grid neighbours a <= |y| < b (b: the next larger E2M1 magnitude), for |y| < 6. */
static void neighbours(float ay, float *a, float *b) {
  int k = 0;
  while (k < 7 && E2M1_VALUES[k + 1] <= ay) k++;
  *a = E2M1_VALUES[k];
  *b = E2M1_VALUES[k + 1];
}

void fp8_e2m1_sr_expect(float y, int te_bits, double *p_up, double *e_sq, double *p_zero) {
  float ay = fabsf(y);
  if (!(ay < FP8_E2M1_MAX)) { /* saturated (or NaN): the nearest rounding, no randomness */
    double h = isnan(y) ? FP8_E2M1_MAX : fp8_e2m1_decode(fp8_e2m1_encode(y));
    double d = isnan(y) ? 0.0 : (double)y - h;
    *p_up = 0.0;
    *e_sq = d * d;
    *p_zero = 0.0;
    return;
  }
  float a, b;
  neighbours(ay, &a, &b);
  double f = ((double)ay - a) / ((double)b - a);
  double p = te_bits ? floor(256.0 * f) / 256.0 : f;
  *p_up = p;
  *e_sq = p * ((double)b - ay) * ((double)b - ay) + (1.0 - p) * ((double)ay - a) * ((double)ay - a);
  *p_zero = a == 0.0f ? 1.0 - p : 0.0;
}

uint8_t fp8_e2m1_encode_sr(float y, uint8_t r) {
  float ay = fabsf(y);
  if (!(ay < FP8_E2M1_MAX)) return fp8_e2m1_encode(y);
  uint32_t bits;
  memcpy(&bits, &y, sizeof bits);
  float a, b;
  neighbours(ay, &a, &b);
  double f = ((double)ay - a) / ((double)b - a);
  float q = floor(256.0 * f) > (double)r ? b : a;
  return fp8_e2m1_encode(bits >> 31 ? -q : q);
}
