// quant_load.cuh: how quant.cu's kernels read a tensor: 16 elements per thread and iteration
// (kChunk), F32, BF16 or F16 widened exactly to float32, full chunks with 16-byte streaming
// loads. Device code only, included by quant.cu (inside nothing: its own anonymous namespace).
#ifndef FP8LAB_KERNELS_QUANT_LOAD_CUH
#define FP8LAB_KERNELS_QUANT_LOAD_CUH

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "fp8.h"

namespace {

constexpr int kChunk = 16; // elements per thread per iteration

__device__ __forceinline__ float bf16_to_f32(unsigned h) { return __uint_as_float(h << 16); }
// cvt.f32.f16 is exact for every finite value and infinity; a NaN stays a NaN (its payload does
// not matter: NaN only ever counts as non-finite).
__device__ __forceinline__ float f16_to_f32(unsigned h) {
  return __half2float(__ushort_as_half((unsigned short)h));
}

template <int DT>
__device__ __forceinline__ float widen_scalar(const unsigned char *p, int64_t i) {
  if (DT == FP8_DTYPE_F32) return reinterpret_cast<const float *>(p)[i];
  unsigned h = reinterpret_cast<const unsigned short *>(p)[i];
  return DT == FP8_DTYPE_BF16 ? bf16_to_f32(h) : f16_to_f32(h);
}

// Loads chunk `chunk` (elements 16*chunk .. 16*chunk+15) of the tensor; returns the mask of the
// elements that exist (the last chunk may be partial; missing elements are set to 0). Full
// chunks use 16-byte streaming loads: the device buffer comes from cudaMalloc, so chunk
// boundaries are 32- (2-byte dtypes) or 64-byte (F32) aligned.
template <int DT>
__device__ __forceinline__ unsigned load_chunk(const void *__restrict__ data, int64_t chunk,
                                               int64_t n, float (&x)[kChunk]) {
  const int64_t i0 = chunk * kChunk;
  if (i0 + kChunk <= n) {
    if (DT == FP8_DTYPE_F32) {
      const uint4 *p = reinterpret_cast<const uint4 *>(data) + chunk * 4;
#pragma unroll
      for (int k = 0; k < 4; k++) {
        uint4 v = __ldcs(p + k);
        x[4 * k + 0] = __uint_as_float(v.x);
        x[4 * k + 1] = __uint_as_float(v.y);
        x[4 * k + 2] = __uint_as_float(v.z);
        x[4 * k + 3] = __uint_as_float(v.w);
      }
    } else {
      const uint4 *p = reinterpret_cast<const uint4 *>(data) + chunk * 2;
#pragma unroll
      for (int k = 0; k < 2; k++) {
        uint4 v = __ldcs(p + k);
        unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int q = 0; q < 4; q++) { // little-endian: the low half is the earlier element
          unsigned lo = w[q] & 0xFFFFu, hi = w[q] >> 16;
          x[8 * k + 2 * q] = DT == FP8_DTYPE_BF16 ? bf16_to_f32(lo) : f16_to_f32(lo);
          x[8 * k + 2 * q + 1] = DT == FP8_DTYPE_BF16 ? bf16_to_f32(hi) : f16_to_f32(hi);
        }
      }
    }
    return 0xFFFFu;
  }
  unsigned valid = 0;
  const unsigned char *p = reinterpret_cast<const unsigned char *>(data);
#pragma unroll
  for (int j = 0; j < kChunk; j++) {
    if (i0 + j < n) {
      x[j] = widen_scalar<DT>(p, i0 + j);
      valid |= 1u << j;
    } else {
      x[j] = 0.0f;
    }
  }
  return valid;
}

} // namespace

#endif
