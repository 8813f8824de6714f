// fp8k_device.cuh: device functions that more than one kernel file uses, so that each piece of
// RECIPES.md arithmetic has one copy on the device:
//  - fp8k_encode2<FMT>: two float32 values to FP8 codes with the hardware conversion
//    cvt.rn.satfinite.{e4m3,e5m2}x2.f32 (through __nv_cvt_float2_to_fp8x2; gpu_cast_exhaustive
//    proves it equals fp8_encode on all 2^32 inputs); quant_pass.cuh's fused pass and
//    timeline.cu's cast_transpose;
//  - fp8k_current_scale: fp8_current_scale's arithmetic (src/sim/current.c); current.cu's scale
//    kernel and timeline.cu's fp8k_tl_current_scale;
//  - fp8k_abs_bits: |x| as float bits with NaN mapped to 0, the amax of every kernel (unsigned
//    order of non-negative float bits is their numeric order, so a max of bits is fmaxf's).
// Device code only (its own anonymous namespace, like quant_load.cuh).
#ifndef FP8LAB_KERNELS_FP8K_DEVICE_CUH
#define FP8LAB_KERNELS_FP8K_DEVICE_CUH

#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cfloat>

namespace {

// Codes of y0 (low byte) and y1 (high byte) in format FMT (0: E4M3, 1: E5M2): round to nearest
// even, saturate to +-max (infinities too), NaN to the NaN code.
template <int FMT>
__device__ __forceinline__ unsigned fp8k_encode2(float y0, float y1) {
  constexpr __nv_fp8_interpretation_t kInterp = FMT ? __NV_E5M2 : __NV_E4M3;
  return (unsigned)__nv_cvt_float2_to_fp8x2(make_float2(y0, y1), __NV_SATFINITE, kInterp);
}

// fp8_current_scale: a = max(amax, eps) (a NaN amax stays NaN); 1 when a is inf, NaN or 0;
// else RN32(scaled_max / a), inf -> FLT_MAX, with pow2 the float bits masked with 0xFF800000.
// scaled_max is fp8_scaled_max(format, margin), computed on the host.
__device__ __forceinline__ float fp8k_current_scale(float amax, float eps, float scaled_max,
                                                    bool pow2) {
  float a = amax < eps ? eps : amax;
  if (isinf(a) || isnan(a) || a == 0.0f) return 1.0f;
  float s = __fdiv_rn(scaled_max, a);
  if (isinf(s)) s = FLT_MAX;
  if (pow2) s = __uint_as_float(__float_as_uint(s) & 0xFF800000u);
  return s;
}

// |x| as float bits, NaN -> 0 (so NaN never wins a max; inf does).
__device__ __forceinline__ unsigned fp8k_abs_bits(float x) {
  unsigned a = __float_as_uint(x) & 0x7FFFFFFFu;
  return a > 0x7F800000u ? 0u : a;
}

} // namespace

#endif
