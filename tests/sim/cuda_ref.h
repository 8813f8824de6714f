/* cuda_ref.h: C view of CUDA's host FP8 conversions (cuda_ref.cpp). */
#ifndef FP8LAB_CUDA_REF_H
#define FP8LAB_CUDA_REF_H
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
/** 1 when cuda_fp8.h was found at build time. */
int cuda_ref_available(void);
/** __nv_cvt_float_to_fp8(x, __NV_SATFINITE, e5m2 ? __NV_E5M2 : __NV_E4M3) */
uint8_t cuda_ref_encode(float x, int e5m2);
/** float(__nv_cvt_fp8_to_halfraw(code, ...)) */
float cuda_ref_decode(uint8_t code, int e5m2);
#ifdef __cplusplus
}
#endif
#endif
