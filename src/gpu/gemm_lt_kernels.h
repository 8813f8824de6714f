/* gemm_lt_kernels.h: the small device helpers behind gemm_lt.c (gemm_lt_kernels.cu), as C
 * launchers returning the launch's cudaError_t. Internal to src/gpu. */
#ifndef FP8LAB_GPU_GEMM_LT_KERNELS_H
#define FP8LAB_GPU_GEMM_LT_KERNELS_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** dst [drows, dcols] (dense, row-major) from the row-major byte matrix src [rows, cols] with
 *  row stride lds: dst[r][c] = src[r][c] (or src[c][r] when `transpose`) where that element
 *  exists, 0 elsewhere. FP8 code 0 is +0, so zero padding adds nothing to a dot product. */
cudaError_t fp8g_copy_pad_u8(const uint8_t *src, int64_t rows, int64_t cols, int64_t lds,
                             int transpose, uint8_t *dst, int64_t drows, int64_t dcols,
                             cudaStream_t stream);

/** *amax = max |y| over n elements of y (float32, or bfloat16 bit patterns when bf16 != 0),
 *  NaN ignored, inf counts (RECIPES.md's amax); *amax must hold +0 before (atomic max of the
 *  float bits). */
cudaError_t fp8g_amax(const void *y, int bf16, int64_t n, float *amax, cudaStream_t stream);

/** Partial sums in double over n elements: sums[3*b + 0] += (y - yref)^2, sums[3*b + 1] +=
 *  yref^2, sums[3*b + 2] += y^2 for b < nblocks (each block writes its own three, no atomics:
 *  the host adds them in a fixed order, so the result is deterministic). y float32 or bf16. */
cudaError_t fp8g_err_sums(const void *y, int bf16, const float *yref, int64_t n, double *sums,
                          int nblocks, cudaStream_t stream);

/** Number of blocks fp8g_err_sums uses for n elements (at most FP8G_ERR_MAX_BLOCKS). */
int fp8g_err_blocks(int64_t n);
#define FP8G_ERR_MAX_BLOCKS 1024

#ifdef __cplusplus
}
#endif

#endif
