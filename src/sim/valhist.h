/* valhist.h: exact value histograms of 16-bit tensors (BF16, F16), and the statistics of
 * quantizing a tensor computed from its histogram instead of its elements.
 *
 * A BF16 or F16 tensor holds at most 65,536 distinct values. One pass over the data counts
 * each bit pattern with its sign bit cleared (every statistic below is symmetric in the sign:
 * the encoding is, |v| decides each count, and v and -v have errors of opposite sign and equal
 * square; so v and -v share one entry); every configuration's quantization is then evaluated
 * once per occupied magnitude and weighted by its count (a real tensor-step of a million
 * elements typically occupies a few thousand). This is exact for everything but the two
 * double sums:
 *   - n, nonfinite, zeros, overflow, underflow, subnormal: identical to fp8_quantize_f32 over the
 *     elements (each element's classification depends on its magnitude only);
 *   - amax and the log2 histogram: identical to fp8_amax_f32 / fp8_log2_histogram;
 *   - sum_sq_err and sum_sq: sum over occupied magnitudes v, in ascending bit-pattern order, of
 *     count(v) * t(v) with t(v) = (v - xhat(v))^2 (resp. v^2) in double, in sixteen partial
 *     sums (value i to sum i mod 16, the last m mod 16 in order: quant_weighted.c); sum_sq,
 *     which no scale changes, once per histogram. Both this and the per-element sum are
 *     floating-point sums of the same n non-negative terms (a term repeated c times here is one
 *     product c * t); each is within N * 2^-53 * S of the exact sum S (N the number of
 *     additions and products on the way, at most n), so the two differ by at most
 *     2 * n * 2^-53 relative: 2.2e-10 for a million elements, far below the 1e-6 every
 *     comparison in fp8lab allows (docs/semantics.md; tests/sim/test_quantize.c checks the bound on
 *     random tensors against an exact reference).
 * Pure C11 like the rest of src/sim.
 */
#ifndef FP8LAB_SIM_VALHIST_H
#define FP8LAB_SIM_VALHIST_H

#include <stddef.h>
#include <stdint.h>

#include "fp8.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The occupied values of one tensor. Reusable: build() replaces the previous contents and
 *  keeps the buffers. */
typedef struct {
  int64_t n;        /**< elements counted */
  size_t m;         /**< distinct magnitudes (bit patterns with the sign bit cleared) */
  float *v;         /**< [m] their values widened to float32 (>= 0 or NaN), ascending pattern */
  uint32_t *w;      /**< [m] how many elements have each, either sign */
  size_t nfin;      /**< v[0 .. nfin) are finite (the non-finite sort last) */
  double sum_sq;    /**< the squared-signal sum over the finite elements (as at the top) */
  uint64_t *cum;    /**< [m + 1] cum[i] = w[0] + ... + w[i - 1] */
  double *wd;       /**< [m] w as doubles */
  uint32_t *count;  /**< [7 * (32768 + 16) + 32768] scratch, all zero between calls */
  uint64_t *seen;   /**< [512] scratch: a bit per occupied magnitude, zero between calls */
} fp8_valhist;

/** Counts the n elements of a BF16 or F16 tensor (raw little-endian 16-bit patterns, any
 *  alignment). n must be below 2^32. FP8_OK, FP8_EINVAL (dtype F32, n too large), FP8_ENOMEM. */
int fp8_valhist_build(fp8_valhist *h, fp8_dtype d, const void *data, size_t n);
void fp8_valhist_free(fp8_valhist *h);

/** fp8_amax_f32 of the tensor. */
float fp8_valhist_amax(const fp8_valhist *h);
/** Adds the tensor's fp8_log2_histogram counts to hist[FP8_LOG2_HIST_BINS]. */
void fp8_valhist_log2_histogram(const fp8_valhist *h, int64_t *hist);
/** fp8_quantize_f32's statistics of the tensor with scale s and format f, accumulated into st
 *  (counts exact, sums as at the top of this file). */
void fp8_valhist_quantize(const fp8_valhist *h, float s, fp8_format f, fp8_stats *st);

/** The weighted form behind it: the statistics of a multiset holding w[i] copies of x[i]
 *  (sums in the order described at the top; sum(w) below 2^32). */
void fp8_quantize_weighted_f32(const float *x, const uint32_t *w, size_t n, float s,
                               fp8_format f, fp8_stats *st);
/** The same without sum_sq (left untouched), and sum_sq alone: together, bit for bit
 *  fp8_quantize_weighted_f32's statistics. */
void fp8_quantize_weighted_err_f32(const float *x, const uint32_t *w, size_t n, float s,
                                   fp8_format f, fp8_stats *st);
double fp8_weighted_sum_sq(const float *x, const uint32_t *w, size_t n);
/** fp8_quantize_weighted_err_f32's sum_sq_err (bit for bit) for x ascending, finite and >= 0,
 *  with the weights given as doubles c[i] = w[i], and a finite positive scale s: what a value
 *  histogram's quantize runs (its counts come from binary searches instead, valhist.c). Its
 *  sum_sq_hat (bit for bit) goes to *hat_sq. */
double fp8_sorted_weighted_err_f32(const float *x, const double *c, size_t n, float s,
                                   fp8_format f, double *hat_sq);

#ifdef __cplusplus
}
#endif

#endif /* FP8LAB_SIM_VALHIST_H */
