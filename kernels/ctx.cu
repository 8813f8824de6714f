// ctx.cu: the GPU kernels' context (fp8k.h): device, stream, accumulators and scale buffers
// allocated once, the decode table copied to quant.cu's constant memory, the tensor uploaded
// once per step (fp8k_upload) for every pass that reads it (quant.cu, current.cu, delayed.cu).
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "fp8k_internal.cuh"

extern "C" int fp8k_ctx_create(fp8k_ctx **out, int device, char *err, size_t errlen) {
  int rc = 0, ndev = 0;
  fp8k_ctx *ctx = nullptr;
  FP8G_REQUIRE_EINVAL(out != nullptr, "fp8k_ctx_create: ctx is NULL");
  *out = nullptr;
  FP8G_CUDA(cudaGetDeviceCount(&ndev));
  FP8G_REQUIRE_EINVAL(device >= 0 && device < ndev, "fp8k_ctx_create: device %d, expected 0..%d", device,
               ndev - 1);
  ctx = static_cast<fp8k_ctx *>(calloc(1, sizeof *ctx));
  if (!ctx) {
    if (err && errlen) snprintf(err, errlen, "fp8k_ctx_create: out of host memory");
    return FP8_ENOMEM;
  }
  ctx->device = device;
  FP8G_CUDA(cudaSetDevice(device));
  FP8G_CUDA(cudaDeviceGetAttribute(&ctx->nsm, cudaDevAttrMultiProcessorCount, device));
  FP8G_CUDA(cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking));
  FP8G_CUDA(cudaMalloc(&ctx->d_acc, sizeof(fp8k_acc)));
  FP8G_CUDA(cudaMallocHost(&ctx->h_acc, sizeof(fp8k_acc)));
  FP8G_CUDA(cudaMalloc(&ctx->d_scales, FP8K_MAX_CONFIGS * sizeof(float)));
  FP8G_CUDA(cudaMallocHost(&ctx->h_scales, FP8K_MAX_CONFIGS * sizeof(float)));
  FP8G_CUDA(fp8k_copy_decode_tables());
  // The table was copied on the legacy stream, from pageable memory (the DMA may still be in
  // flight when the call returns); the context's non-blocking stream does not wait for it.
  FP8G_CUDA(cudaDeviceSynchronize());
  *out = ctx;
  ctx = nullptr;
done:
  fp8k_ctx_destroy(ctx);
  return rc;
}

extern "C" void fp8k_ctx_destroy(fp8k_ctx *ctx) {
  if (!ctx) return;
  cudaSetDevice(ctx->device);
  if (ctx->stream) cudaStreamSynchronize(ctx->stream);
  cudaFree(ctx->d_data);
  cudaFree(ctx->d_codes);
  cudaFree(ctx->d_acc);
  cudaFreeHost(ctx->h_acc);
  cudaFree(ctx->d_scales);
  cudaFreeHost(ctx->h_scales);
  cudaFree(ctx->d_delayed);
  if (ctx->stream) cudaStreamDestroy(ctx->stream);
  free(ctx);
}

extern "C" void *fp8k_ctx_stream(fp8k_ctx *ctx) { return ctx ? (void *)ctx->stream : nullptr; }

extern "C" void fp8k_ctx_set_f64_sums(fp8k_ctx *ctx, int on) {
  if (ctx) ctx->f64_sums = on != 0;
}

extern "C" int fp8k_upload(fp8k_ctx *ctx, const void *data, int64_t numel, int dtype, char *err,
                           size_t errlen) {
  int rc = 0;
  size_t bytes = 0;
  FP8G_REQUIRE_EINVAL(ctx != nullptr, "fp8k_upload: ctx is NULL");
  FP8G_REQUIRE_EINVAL(dtype >= FP8_DTYPE_F32 && dtype <= FP8_DTYPE_F16,
               "fp8k_upload: dtype %d, expected 0 (F32), 1 (BF16) or 2 (F16)", dtype);
  FP8G_REQUIRE_EINVAL(numel >= 0 && numel <= (1ll << 40), "fp8k_upload: numel %lld outside [0, 2^40]",
               (long long)numel);
  FP8G_REQUIRE_EINVAL(numel == 0 || data != nullptr, "fp8k_upload: data is NULL for %lld elements",
               (long long)numel);
  FP8G_CUDA(cudaSetDevice(ctx->device));
  ctx->numel = 0;
  bytes = (size_t)numel * fp8_dtype_size((fp8_dtype)dtype);
  FP8G_CUDA(fp8k_grow(&ctx->d_data, &ctx->data_cap, bytes + 64));
  if (bytes) {
    FP8G_CUDA(cudaMemcpyAsync(ctx->d_data, data, bytes, cudaMemcpyHostToDevice, ctx->stream));
    FP8G_CUDA(cudaStreamSynchronize(ctx->stream));
  }
  ctx->numel = numel;
  ctx->dtype = dtype;
done:
  return rc;
}
