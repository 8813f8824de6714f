// gemm_lt_kernels.cu: the data movement and reductions around cuBLASLt's FP8 GEMMs (gemm_lt.c):
// zero-padding and transposing FP8 code matrices into the "TN" layout cuBLASLt needs, the
// output amax when cuBLASLt cannot give it (CUBLASLT_MATMUL_DESC_AMAX_D_POINTER unsupported for
// the output type), and the double sums of the relative Frobenius error. All memory-bound and
// small next to the GEMM. Built as part of fp8lab_gpu (sm_90, sm_89); tests/gpu/test_gpu_gemm.c
// checks them through the GEMMs against the CPU, on the GPU and (test_gpu_gemm_mock) on the CPU
// through the CUDA emulator tests/gpu/emu/cuda_emu.h (hence launches through FP8K_LAUNCH,
// kernels/fp8k_launch.cuh).
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>

#include "fp8k_launch.cuh"
#include "gemm_lt_kernels.h"

namespace {

constexpr int TILE = 32;
constexpr int ROWS_PER_PASS = 8;  // block (32, 8): each thread moves 4 elements of a tile

// One 32x32 tile of dst per iteration; grid-stride over tiles in both directions, so any
// shape fits in the grid limits (gridDim.y <= 65535).
__global__ void copy_pad_u8_kernel(const uint8_t *__restrict__ src, int64_t rows, int64_t cols,
                                   int64_t lds, int transpose, uint8_t *__restrict__ dst,
                                   int64_t drows, int64_t dcols) {
  __shared__ uint8_t tile[TILE][TILE + 1];
  const int64_t tiles_r = (drows + TILE - 1) / TILE, tiles_c = (dcols + TILE - 1) / TILE;
  const int tx = threadIdx.x, ty = threadIdx.y;
  for (int64_t br = blockIdx.y; br < tiles_r; br += gridDim.y) {
    for (int64_t bc = blockIdx.x; bc < tiles_c; bc += gridDim.x) {
      const int64_t r0 = br * TILE, c0 = bc * TILE;
      if (transpose) {
        // dst[r][c] = src[c][r]: read the src tile at rows c0.., cols r0.. (coalesced along
        // src rows), write it transposed (coalesced along dst rows).
        for (int i = ty; i < TILE; i += ROWS_PER_PASS) {
          const int64_t sr = c0 + i, sc = r0 + tx;
          tile[i][tx] = (sr < rows && sc < cols) ? src[sr * lds + sc] : (uint8_t)0;
        }
        __syncthreads();
        for (int i = ty; i < TILE; i += ROWS_PER_PASS) {
          const int64_t dr = r0 + i, dc = c0 + tx;
          if (dr < drows && dc < dcols) dst[dr * dcols + dc] = tile[tx][i];
        }
        __syncthreads();
      } else {
        for (int i = ty; i < TILE; i += ROWS_PER_PASS) {
          const int64_t dr = r0 + i, dc = c0 + tx;
          if (dr < drows && dc < dcols)
            dst[dr * dcols + dc] = (dr < rows && dc < cols) ? src[dr * lds + dc] : (uint8_t)0;
        }
      }
    }
  }
}

__device__ __forceinline__ float load_y(const void *y, int bf16, int64_t i) {
  return bf16 ? __bfloat162float(static_cast<const __nv_bfloat16 *>(y)[i])
              : static_cast<const float *>(y)[i];
}

__global__ void amax_kernel(const void *__restrict__ y, int bf16, int64_t n, float *amax) {
  float m = 0.0f;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    float a = fabsf(load_y(y, bf16, i));
    m = fmaxf(m, a);  // fmaxf ignores NaN; inf wins
  }
  for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
  __shared__ float warp_max[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warp_max[warp] = m;
  __syncthreads();
  if (warp == 0) {
    m = lane < (int)(blockDim.x >> 5) ? warp_max[lane] : 0.0f;
    for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    // Non-negative floats (inf included) order like their bit patterns as unsigned ints.
    if (lane == 0) atomicMax(reinterpret_cast<unsigned int *>(amax), __float_as_uint(m));
  }
}

constexpr int ERR_THREADS = 256;

__global__ void err_sums_kernel(const void *__restrict__ y, int bf16, const float *__restrict__ yref,
                                int64_t n, double *sums) {
  double d2 = 0.0, r2 = 0.0, y2 = 0.0;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    const double yv = load_y(y, bf16, i), rv = yref[i];
    const double d = yv - rv;
    d2 += d * d;
    r2 += rv * rv;
    y2 += yv * yv;
  }
  __shared__ double s[3][ERR_THREADS];
  s[0][threadIdx.x] = d2;
  s[1][threadIdx.x] = r2;
  s[2][threadIdx.x] = y2;
  __syncthreads();
  for (int w = ERR_THREADS / 2; w > 0; w >>= 1) {
    if ((int)threadIdx.x < w)
      for (int j = 0; j < 3; j++) s[j][threadIdx.x] += s[j][threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    for (int j = 0; j < 3; j++) sums[3 * blockIdx.x + j] = s[j][0];
}

}  // namespace

extern "C" cudaError_t fp8g_copy_pad_u8(const uint8_t *src, int64_t rows, int64_t cols,
                                        int64_t lds, int transpose, uint8_t *dst, int64_t drows,
                                        int64_t dcols, cudaStream_t stream) {
  if (drows <= 0 || dcols <= 0) return cudaSuccess;
  const int64_t tiles_r = (drows + TILE - 1) / TILE, tiles_c = (dcols + TILE - 1) / TILE;
  dim3 grid((unsigned)(tiles_c < 4096 ? tiles_c : 4096), (unsigned)(tiles_r < 4096 ? tiles_r : 4096));
  FP8K_LAUNCH(grid, dim3(TILE, ROWS_PER_PASS), 0, stream, copy_pad_u8_kernel)(
      src, rows, cols, lds, transpose, dst, drows, dcols);
  return cudaGetLastError();
}

extern "C" cudaError_t fp8g_amax(const void *y, int bf16, int64_t n, float *amax,
                                 cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  int64_t blocks = (n + 1023) / 1024;
  if (blocks > 2048) blocks = 2048;
  FP8K_LAUNCH((unsigned)blocks, 256, 0, stream, amax_kernel)(y, bf16, n, amax);
  return cudaGetLastError();
}

extern "C" int fp8g_err_blocks(int64_t n) {
  int64_t b = (n + 4 * ERR_THREADS - 1) / (4 * ERR_THREADS);
  if (b < 1) b = 1;
  return (int)(b > FP8G_ERR_MAX_BLOCKS ? FP8G_ERR_MAX_BLOCKS : b);
}

extern "C" cudaError_t fp8g_err_sums(const void *y, int bf16, const float *yref, int64_t n,
                                     double *sums, int nblocks, cudaStream_t stream) {
  FP8K_LAUNCH(nblocks, ERR_THREADS, 0, stream, err_sums_kernel)(y, bf16, yref, n, sums);
  return cudaGetLastError();
}
