// cast_check.cu: the device's own FP8 conversion over ranges of float32 bit patterns, so the
// gpu test can compare the hardware (cvt.rn.satfinite.e4m3x2/e5m2x2.f32 on sm_89+) with the
// CPU simulator bit for bit. Build: part of the fp8lab_kernels target (sm_90, sm_89).
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>

#include "fp8.h"
#include "fp8_check.h"
#include "fp8k.h"
#include "fp8k_launch.cuh"

__global__ void encode_range_kernel(uint32_t first, uint32_t count, int e5m2, uint8_t *out) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) {
    uint32_t bits = first + i;
    float x = __uint_as_float(bits);
    out[i] = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, e5m2 ? __NV_E5M2 : __NV_E4M3);
  }
}

extern "C" int fp8k_device_count(char *why, size_t whylen) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    if (why) snprintf(why, whylen, "%s", e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device");
    return 0;
  }
  return n;
}

extern "C" int fp8k_encode_range(uint64_t first, uint64_t count, int e5m2, uint8_t *codes,
                                 char *err, size_t errlen) {
  int rc = 0;
  uint8_t *d = nullptr;
  if (count == 0) return 0;
  if (first + count > (1ull << 32) || count > 0xFFFFFFFFull) {
    if (err && errlen) snprintf(err, errlen, "fp8k_encode_range: range beyond 2^32");
    return FP8_EINVAL;
  }
  FP8G_CUDA(cudaMalloc(&d, count));
  FP8K_LAUNCH(1024, 256, 0, 0, encode_range_kernel)((uint32_t)first, (uint32_t)count, e5m2, d);
  FP8G_CUDA(cudaGetLastError()); // the launch itself
  FP8G_CUDA(cudaMemcpy(codes, d, count, cudaMemcpyDeviceToHost));
done:
  if (d) cudaFree(d);
  return rc;
}
