// quant_load.cuh: how the kernels read a tensor: quant.cu's 16 elements per thread and iteration
// (kChunk), F32, BF16 or F16 widened exactly to float32, full chunks with 16-byte streaming
// loads; the widening of one element (widen_scalar) or one 16-byte vector (widen_vec), which
// timeline.cu's cast_transpose and amax kernels use too. Device code only, included by quant.cu
// and timeline.cu (inside nothing: its own anonymous namespace).
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

// Elements per 16-byte vector of dtype DT: 4 (F32) or 8 (BF16, F16).
template <int DT>
__host__ __device__ constexpr int vec_elems() { return DT == FP8_DTYPE_F32 ? 4 : 8; }

// The elements of one 16-byte vector of dtype DT (little-endian: the low half of a word is the
// earlier element), widened exactly: x[0 .. vec_elems<DT>()).
template <int DT>
__device__ __forceinline__ void widen_vec(const uint4 v, float *x) {
  const unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int q = 0; q < 4; q++) {
    if (DT == FP8_DTYPE_F32) {
      x[q] = __uint_as_float(w[q]);
    } else {
      unsigned lo = w[q] & 0xFFFFu, hi = w[q] >> 16;
      x[2 * q] = DT == FP8_DTYPE_BF16 ? bf16_to_f32(lo) : f16_to_f32(lo);
      x[2 * q + 1] = DT == FP8_DTYPE_BF16 ? bf16_to_f32(hi) : f16_to_f32(hi);
    }
  }
}

// Loads chunk `chunk` (elements 16*chunk .. 16*chunk+15) of the tensor; returns the mask of the
// elements that exist (the last chunk may be partial; missing elements are set to 0). Full
// chunks use 16-byte streaming loads: `data` must be 16-byte aligned (the context's buffer comes
// from cudaMalloc; timeline.cu's amax kernel passes the aligned part of its tensor), so that
// chunk boundaries are 32- (2-byte dtypes) or 64-byte (F32) aligned.
template <int DT>
__device__ __forceinline__ unsigned load_chunk(const void *__restrict__ data, int64_t chunk,
                                               int64_t n, float (&x)[kChunk]) {
  constexpr int kVec = vec_elems<DT>(); // elements per 16-byte load
  const int64_t i0 = chunk * kChunk;
  if (i0 + kChunk <= n) {
    const uint4 *p = reinterpret_cast<const uint4 *>(data) + chunk * (kChunk / kVec);
#pragma unroll
    for (int k = 0; k < kChunk / kVec; k++) widen_vec<DT>(__ldcs(p + k), x + kVec * k);
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
