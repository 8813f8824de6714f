/* block_fp4.c: the FP4 kinds (NVFP4, MXFP4) behind fp8_block_quantize_f32 (block.h), on fp4.h's
 * quantizers. A column-wise pass quantizes the transpose (each column one contiguous row of
 * it), after TE's Hadamard transform of its runs of 16 when p->rht, and transposes the
 * dequantized values back. The block statistics come from a second pass over the blocks: each
 * block's amax and element multiplier (NVFP4: 1 / (s * RN32(1 / S_enc)), MXFP4: 2^(127 - e)).
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "block.h"
#include "fp4.h"

void fp8_block_fp4_stats(const float *amax, const float *mult, int64_t n, fp8_block_stats *bst) {
  int64_t overflowed = 0, scaled = 0;
  double mn = 0.0, mx = 0.0, mean = 0.0, m2 = 0.0, peak = 0.0;
  for (int64_t i = 0; i < n; i++) {
    float a = amax[i], mu = mult[i];
    overflowed += a * mu > FP8_E2M1_MAX; /* the amax element has the largest |y| */
    double pk = (double)a * (double)mu;
    if (pk > peak) peak = pk;
    if (!(a > 0.0f) || isinf(a)) continue;
    double v = log2((double)mu);
    scaled++;
    if (scaled == 1 || v < mn) mn = v;
    if (scaled == 1 || v > mx) mx = v;
    double d = v - mean; /* Welford: one pass, block order */
    mean += d / (double)scaled;
    m2 += d * (v - mean);
  }
  bst->nblocks = n;
  bst->blocks_with_overflow = overflowed;
  bst->nblocks_scaled = scaled;
  bst->log2_scale_min = scaled ? mn : NAN;
  bst->log2_scale_max = scaled ? mx : NAN;
  bst->log2_scale_std = scaled ? sqrt(m2 / (double)scaled) : NAN;
  bst->overshoot = peak > 0.0 ? log2(peak / (double)FP8_E2M1_MAX) : -INFINITY;
}

static float amax_of(const float *x, int64_t cols, int64_t r0, int64_t r1, int64_t c0,
                     int64_t c1) {
  float a = 0.0f;
  for (int64_t r = r0; r < r1; r++)
    for (int64_t c = c0; c < c1; c++) a = fmaxf(a, fabsf(x[r * cols + c]));
  return a;
}

/* The inverse of fp8_rht16 on every run of 16 of t (n a multiple of 16), in double, rounded
 * once to float32: M = diag(s) H / 4 is orthogonal, so x = y M^T, x_i = s_i sum_j y_j H_ij / 4. */
static void rht16_inverse(float *t, size_t n) {
  for (size_t g = 0; g < n; g += 16) {
    double out[16];
    for (int i = 0; i < 16; i++) {
      double acc = 0.0;
      for (int j = 0; j < 16; j++) {
        int odd = 0;
        for (unsigned v = (unsigned)(i & j); v; v &= v - 1) odd ^= 1;
        acc += odd ? -(double)t[g + j] : (double)t[g + j];
      }
      out[i] = (FP8_RHT_SIGNS >> i & 1u) ? -acc * 0.25 : acc * 0.25;
    }
    for (int i = 0; i < 16; i++) t[g + i] = (float)out[i];
  }
}

/* The multiplier of a block from its scale code. */
static float multiplier(const fp8_block_params *p, uint8_t code, float s_dec) {
  if (p->kind == FP8_BLOCK_KIND_MXFP4) return fp8_e8m0_scale(code);
  return fminf(1.0f / (fp8_decode(code, FP8_E4M3) * s_dec), FLT_MAX);
}

/* Quantizes the row-major [rows, cols] matrix m along its rows (fp4.h), writing xh and the
 * statistics; block (i, j)'s multiplier goes to mult[i * mld + j * mstep] when mult is set. */
static int quantize_rows(const float *m, int64_t rows, int64_t cols, const fp8_block_params *p,
                         uint64_t index0, float *xh, float *mult, int64_t mld, int64_t mstep,
                         fp8_stats *st, fp8_block_stats *bst) {
  const int64_t B = p->block_len, nrun = (cols + B - 1) / B;
  uint8_t *codes = malloc((size_t)(rows * nrun));
  if (!codes) return FP8_ENOMEM;
  float gamax = p->kind == FP8_BLOCK_KIND_NVFP4 ? fp8_amax_f32(m, (size_t)(rows * cols)) : 0.0f;
  fp8_fp4_sr sr = {.seed = p->sr_seed, .index0 = index0, .underflow = 0.0, .sum_sq_err = 0.0};
  int rc;
  if (p->kind == FP8_BLOCK_KIND_NVFP4) {
    fp8_nvfp4_params np = {.square = p->square, .global_amax = gamax, .e4m3_max = p->e4m3_max,
                           .rule = (fp8_nvfp4_scale_rule)p->fp4_rule,
                           .sr = p->stochastic ? &sr : NULL};
    rc = fp8_nvfp4_quantize_f32(m, rows, cols, &np, NULL, codes, xh, st);
  } else {
    rc = fp8_mxfp4_quantize_f32(m, rows, cols, p->rounding, NULL, codes, xh, st);
  }
  if (rc) {
    free(codes);
    return rc;
  }
  if (!mult && !bst) { /* a GEMM's operand: the dequantized values alone, no block pass */
    free(codes);
    return FP8_OK;
  }
  const float e4 = p->e4m3_max > 0.0f ? p->e4m3_max : FP8_E4M3_MAX;
  const float s_dec = 1.0f / fp8_nvfp4_global_scale(gamax, e4);
  const int64_t bh = p->square ? B : 1, nbr = (rows + bh - 1) / bh;
  float *ba = malloc((size_t)(nbr * nrun + 1) * sizeof *ba);
  float *bm = malloc((size_t)(nbr * nrun + 1) * sizeof *bm);
  if (!ba || !bm) {
    free(ba);
    free(bm);
    free(codes);
    return FP8_ENOMEM;
  }
  for (int64_t r0 = 0, u = 0; r0 < rows; r0 += bh) {
    int64_t r1 = r0 + bh < rows ? r0 + bh : rows;
    for (int64_t k = 0; k < nrun; k++, u++) {
      int64_t c0 = k * B, c1 = c0 + B < cols ? c0 + B : cols;
      float mu = multiplier(p, codes[r0 * nrun + k], s_dec);
      ba[u] = amax_of(m, cols, r0, r1, c0, c1);
      bm[u] = mu;
      if (mult) mult[(r0 / bh) * mld + k * mstep] = mu;
    }
  }
  free(codes);
  if (bst) {
    fp8_block_fp4_stats(ba, bm, nbr * nrun, bst);
    bst->underflow_expected = p->stochastic ? sr.underflow : NAN;
    bst->sum_sq_err_expected = p->stochastic ? sr.sum_sq_err : NAN;
  }
  free(ba);
  free(bm);
  return FP8_OK;
}

int fp8_block_fp4_quantize(const float *x, int64_t rows, int64_t cols, const fp8_block_params *p,
                           fp8_block_dir dir, float *xhat, float *scales, fp8_stats *st,
                           fp8_block_stats *bst) {
  fp8_stats local;
  fp8_stats_init(&local);
  fp8_block_stats b = {0, 0, 0, NAN, NAN, NAN, -INFINITY, NAN, NAN};
  if (p->stochastic) b.underflow_expected = b.sum_sq_err_expected = 0.0;
  int rc = FP8_OK;
  if (rows > 0 && cols > 0) {
    if (dir == FP8_BLOCK_DIR_ROW || p->square) {
      /* a 2-D block is the same either way; the row-wise pass has no transform */
      int64_t nrun = (cols + p->block_len - 1) / p->block_len;
      rc = quantize_rows(x, rows, cols, p, 0, xhat, scales, nrun, 1, st || bst ? &local : NULL,
                         bst ? &b : NULL);
    } else {
      size_t n = (size_t)(rows * cols);
      float *t = malloc(n * sizeof *t), *th = xhat ? malloc(n * sizeof *th) : NULL;
      if (!t || (xhat && !th)) rc = FP8_ENOMEM;
      if (!rc) {
        for (int64_t i = 0; i < rows; i++)
          for (int64_t j = 0; j < cols; j++) t[j * rows + i] = x[i * cols + j];
        /* TE transforms along the reduction dimension in runs of 16; a length that is not a
         * multiple of 16 has no NVFP4 GEMM in TE and is quantized as it is */
        int rht = p->rht && rows % 16 == 0;
        if (rht) fp8_rht16(t, n, t);
        /* blocks along dim 0: the transpose's block (j, k) is block (k, j) of the grid */
        rc = quantize_rows(t, cols, rows, p, (uint64_t)1 << 48, th, scales, 1, cols,
                           st || bst ? &local : NULL, bst ? &b : NULL);
        /* back to the original basis: a GEMM over any subset of the tokens (gemm_max_tokens)
         * then means what it does without the transform, and over all of them it is the
         * transformed product (M M^T = I) up to float32 rounding */
        if (!rc && th && rht) rht16_inverse(th, n);
      }
      if (!rc && th)
        for (int64_t i = 0; i < rows; i++)
          for (int64_t j = 0; j < cols; j++) xhat[i * cols + j] = th[j * rows + i];
      free(t);
      free(th);
    }
  }
  if (rc) return rc;
  if (st) fp8_stats_merge(st, &local);
  if (bst) *bst = b;
  return FP8_OK;
}
