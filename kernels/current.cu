// current.cu: current (just-in-time) scaling on the device, fp8k_current_quant_stats: the amax
// pass of quant.cu, one thread per configuration computing fp8_current_scale's scale from it
// (src/sim/current.c's arithmetic: amax_epsilon floor, RN32(scaled_max / amax), FLT_MAX for
// inf, pow2 rounding down to a power of two), then quant.cu's fused pass reading those scales
// from device memory: no host round trip between the three. Tested with quant.cu's kernels by
// tests/gpu/test_gpu_quant.c (on a device, and on the CPU through the CUDA emulator).
#include <cuda_runtime.h>

#include <cfloat>
#include <cstring>

#include "fp8k_device.cuh" /* fp8k_current_scale */
#include "fp8k_internal.cuh"
#include "fp8k_launch.cuh"

namespace {

struct CurParams {
  float eps[FP8K_MAX_CONFIGS];
  float scaled_max[FP8K_MAX_CONFIGS];
  int pow2[FP8K_MAX_CONFIGS];
  int nconf;
};

// fp8_current_scale (src/sim/current.c) on the device, one thread per configuration
// (fp8k_device.cuh has the arithmetic, shared with timeline.cu's fp8k_tl_current_scale).
__global__ void current_scale_kernel(const unsigned *__restrict__ amax_bits, const CurParams P,
                                     float *__restrict__ scales) {
  int c = threadIdx.x;
  if (c >= P.nconf) return;
  scales[c] = fp8k_current_scale(__uint_as_float(*amax_bits), P.eps[c], P.scaled_max[c],
                                 P.pow2[c] != 0);
}

} // namespace

extern "C" int fp8k_current_quant_stats(fp8k_ctx *ctx, const fp8k_current_params *params,
                                        int nconfigs, fp8k_stats *out, float *scales_out,
                                        float *amax_out, uint8_t *codes_out, char *err,
                                        size_t errlen) {
  int rc = 0;
  CurParams C;
  int formats[FP8K_MAX_CONFIGS];
  memset(&C, 0, sizeof C);
  FP8G_REQUIRE_EINVAL(ctx != nullptr && params != nullptr && out != nullptr,
               "fp8k_current_quant_stats: NULL argument");
  FP8G_REQUIRE_EINVAL(nconfigs >= 1 && nconfigs <= FP8K_MAX_CONFIGS,
               "fp8k_current_quant_stats: nconfigs %d outside [1, %d]", nconfigs,
               FP8K_MAX_CONFIGS);
  for (int c = 0; c < nconfigs; c++) {
    fp8_current_params p = {params[c].amax_epsilon, params[c].pow2 != 0, params[c].margin,
                            (fp8_format)params[c].format};
    FP8G_REQUIRE_EINVAL(fp8_current_params_check(&p) == FP8_OK,
                 "fp8k_current_quant_stats: configuration %d: amax_epsilon %g, margin %d, "
                 "format %d out of range", c, (double)p.amax_epsilon, (int)p.margin,
                 (int)params[c].format);
    C.eps[c] = p.amax_epsilon;
    C.scaled_max[c] = fp8_scaled_max(p.format, p.margin);
    C.pow2[c] = p.pow2;
    formats[c] = p.format;
  }
  C.nconf = nconfigs;
  FP8G_CUDA(cudaSetDevice(ctx->device));
  if (ctx->numel == 0) { // amax 0: scale 1 (no kernel needed, same arithmetic)
    for (int c = 0; c < nconfigs; c++) {
      fp8_current_params p = {params[c].amax_epsilon, params[c].pow2 != 0, params[c].margin,
                              (fp8_format)params[c].format};
      if (scales_out) scales_out[c] = fp8_current_scale(&p, 0.0f);
      memset(&out[c], 0, sizeof out[c]);
    }
    if (amax_out) *amax_out = 0.0f;
    goto done;
  }
  rc = fp8k_launch_amax(ctx, err, errlen);
  if (rc) goto done;
  FP8K_LAUNCH(1, FP8K_MAX_CONFIGS, 0, ctx->stream, current_scale_kernel)(
      &ctx->d_acc->amax_bits, C, ctx->d_scales);
  FP8G_CUDA(cudaGetLastError());
  rc = fp8k_launch_quant(ctx, nullptr, ctx->d_scales, formats, nconfigs, 0, codes_out != nullptr,
                         err, errlen);
  if (rc) goto done;
  FP8G_CUDA(cudaMemcpyAsync(ctx->h_acc, ctx->d_acc, sizeof(fp8k_acc), cudaMemcpyDeviceToHost,
                             ctx->stream));
  FP8G_CUDA(cudaMemcpyAsync(ctx->h_scales, ctx->d_scales, nconfigs * sizeof(float),
                             cudaMemcpyDeviceToHost, ctx->stream));
  if (codes_out)
    FP8G_CUDA(cudaMemcpyAsync(codes_out, ctx->d_codes, (size_t)ctx->numel,
                               cudaMemcpyDeviceToHost, ctx->stream));
  FP8G_CUDA(cudaStreamSynchronize(ctx->stream));
  fp8k_fill_stats(ctx, ctx->h_acc, nconfigs, out);
  if (scales_out) memcpy(scales_out, ctx->h_scales, nconfigs * sizeof(float));
  if (amax_out) memcpy(amax_out, &ctx->h_acc->amax_bits, sizeof *amax_out);
done:
  return rc;
}
