// cuda_ref.cpp: CUDA's own host-side FP8 conversions (cuda_fp8.h), the oracle of the exhaustive
// cast test. Compiled by the host C++ compiler: needs the toolkit's headers, not a GPU.
#include "cuda_ref.h"

#ifdef FP8LAB_HAVE_CUDA_FP8_H
#include <cuda_fp8.h>

extern "C" int cuda_ref_available(void) { return 1; }

extern "C" uint8_t cuda_ref_encode(float x, int e5m2) {
  return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, e5m2 ? __NV_E5M2 : __NV_E4M3);
}

extern "C" float cuda_ref_decode(uint8_t code, int e5m2) {
  __half_raw h = __nv_cvt_fp8_to_halfraw(code, e5m2 ? __NV_E5M2 : __NV_E4M3);
  return __half2float(__half(h));
}
#else
extern "C" int cuda_ref_available(void) { return 0; }
extern "C" uint8_t cuda_ref_encode(float, int) { return 0; }
extern "C" float cuda_ref_decode(uint8_t, int) { return 0.0f; }
#endif
