/* valhist.h: exact value histograms of 16-bit tensors (BF16, F16), and the statistics of
 * quantizing a tensor computed from its histogram instead of its elements.
 *
 * A BF16 or F16 tensor holds at most 65,536 distinct values. One pass over the data counts
 * each bit pattern; every configuration's quantization is then evaluated once per occupied
 * value and weighted by its count (a real tensor-step of a million elements typically occupies a
 * few thousand patterns). This is exact for everything but the two double sums:
 *   - n, nonfinite, zeros, overflow, underflow, subnormal: identical to fp8_quantize_f32 over the
 *     elements (each element's classification depends on its value only);
 *   - amax and the log2 histogram: identical to fp8_amax_f32 / fp8_log2_histogram;
 *   - sum_sq_err and sum_sq: sum over occupied values v, in ascending bit-pattern order, of
 *     count(v) * t(v) with t(v) = (v - xhat(v))^2 (resp. v^2) in double, four partial sums like
 *     quant.c. Both this and the per-element sum are floating-point sums of the same n
 *     non-negative terms (a term repeated c times here is one product c * t); each is within
 *     N * 2^-53 * S of the exact sum S (N the number of additions and products on the way,
 *     at most n), so the two differ by at most 2 * n * 2^-53 relative: 2.2e-10 for a million
 *     elements, far below the 1e-6 every comparison in fp8lab allows (docs/semantics.md;
 *     tests/test_sim.c checks the bound on random tensors against an exact reference).
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
  size_t m;         /**< distinct bit patterns */
  float *v;         /**< [m] their values widened to float32, ascending bit pattern */
  uint32_t *w;      /**< [m] how many elements have each */
  uint32_t *count;  /**< [65536] scratch, all zero between calls */
  uint64_t *seen;   /**< [1024] scratch: a bit per occupied pattern, zero between calls */
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

/** The weighted form behind it: the statistics of a multiset holding w[i] copies of x[i]. */
void fp8_quantize_weighted_f32(const float *x, const uint32_t *w, size_t n, float s,
                               fp8_format f, fp8_stats *st);

#ifdef __cplusplus
}
#endif

#endif /* FP8LAB_SIM_VALHIST_H */
