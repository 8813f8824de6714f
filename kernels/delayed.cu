// delayed.cu: TransformerEngine's fused delayed-scaling update for many slots in one launch.
//
// What it computes: for each slot (one tensor x one configuration), exactly fp8_delayed_update
// (src/sim/delayed.c, RECIPES.md "Delayed scaling"): with last = the amax of the step just
// quantized, last == 0 keeps the state (TE PR #825); otherwise last goes into the ring at head,
// head advances, amax = the max of the ring's history_len entries ignoring NaN (fmaxf semantics;
// max is order-independent, so a warp reduction gives the CPU's value) or last for
// most_recent, and scale = RN32(scaled_max / amax) when amax is finite and > 0, FLT_MAX when
// that quotient is inf. The layout is documented at fp8k_delayed_update_device in fp8k.h. One
// warp per slot: lanes stride over the ring (L up to 2^20), then a shuffle max. A slot whose
// amax_compute carries FP8K_DELAYED_UNFUSED follows TE's unfused path instead (fp8_delayed_params
// unfused_update): last == 0 is rolled in too, and a NaN in the window makes the max NaN
// (torch.max), which keeps the scale.
//
// CPU reference: fp8_delayed_update / fp8_delayed_history; test: tests/gpu/test_gpu_quant.c
// (random amax streams with zeros, inf, NaN and tiny values, L in {1, 2, 3, 16, 1024}, every
// step compared bit for bit; also run on the CPU emulator as test_gpu_quant_emu). Build: part of
// fp8lab_kernels. fp8k_delayed_update_indexed_async is the engine's indexed form on an explicit
// stream (timeline kernels, fp8k.h); fp8k_delayed_update_indexed calls it with the context's.
#include <cuda_runtime.h>

#include <cfloat>
#include <cstdio>
#include <cstring>

#include "fp8k_internal.cuh"
#include "fp8k_launch.cuh"

namespace {

constexpr int kThreads = 256;
constexpr int kSlotsPerBlock = kThreads / 32;

// ring_off == nullptr: slot s's ring at s * L; amax_index == nullptr: its amax is last_amax[s],
// else last_amax[amax_index[s]] (a negative index: not updated, as for amax 0).
__global__ void __launch_bounds__(kThreads)
    delayed_update_kernel(int32_t nslots, int32_t L, float *__restrict__ ring,
                          const int64_t *__restrict__ ring_off, int32_t *__restrict__ head,
                          float *__restrict__ scale, const float *__restrict__ last_amax,
                          const int32_t *__restrict__ amax_index,
                          const int32_t *__restrict__ history_len,
                          const int32_t *__restrict__ amax_compute,
                          const float *__restrict__ scaled_max, float *__restrict__ amax_used) {
  const int lane = threadIdx.x & 31;
  const int64_t slot = (int64_t)blockIdx.x * kSlotsPerBlock + (threadIdx.x >> 5);
  if (slot >= nslots) return; // whole warps leave together
  const int32_t ai = amax_index ? amax_index[slot] : (int32_t)slot;
  const float last = ai < 0 ? 0.0f : last_amax[ai];
  const int32_t ac = amax_compute[slot];
  const bool unfused = (ac & FP8K_DELAYED_UNFUSED) != 0;
  // the module did not run: keep history and scale (fused); a slot outside the phase is never
  // updated, whatever the rule
  if (ai < 0 || (last == 0.0f && !unfused)) {
    if (lane == 0 && amax_used) amax_used[slot] = 0.0f;
    return;
  }
  const int32_t len = history_len[slot];
  float *r = ring + (ring_off ? ring_off[slot] : slot * (int64_t)L);
  const int32_t h = head[slot];
  float amax;
  if ((ac & 1) == FP8_AMAX_MOST_RECENT) {
    amax = last;
  } else {
    // The ring after the write: entry h holds `last` (read from the register, so no lane
    // needs to see another lane's store).
    float m = 0.0f;
    int nan = 0;
    for (int32_t i = lane; i < len; i += 32) {
      float v = i == h ? last : r[i];
      nan |= isnan(v);
      m = v > m ? v : m; // NaN never wins
    }
#pragma unroll
    for (int o = 16; o >= 1; o >>= 1) {
      float v = __shfl_xor_sync(0xFFFFFFFFu, m, o);
      m = v > m ? v : m;
    }
    amax = unfused && __any_sync(0xFFFFFFFFu, nan) ? NAN : m;
  }
  if (lane == 0) {
    r[h] = last;
    head[slot] = h + 1 == len ? 0 : h + 1;
    if (isfinite(amax) && amax > 0.0f) {
      float s;
      if (unfused) { // _default_sf_compute: (fp8_max / amax) / 2^margin, two roundings
        const int m = (ac >> FP8K_DELAYED_MARGIN_SHIFT) - 64;
        s = __fdiv_rn(__fdiv_rn(ldexpf(scaled_max[slot], m), amax), ldexpf(1.0f, m));
      } else {
        s = __fdiv_rn(scaled_max[slot], amax);
      }
      scale[slot] = isinf(s) ? FLT_MAX : s;
    }
    if (amax_used) amax_used[slot] = amax;
  }
}

} // namespace

extern "C" int fp8k_delayed_update_device(fp8k_ctx *ctx, int32_t nslots, int32_t L, float *ring,
                                          int32_t *head, float *scale, const float *last_amax,
                                          const int32_t *history_len,
                                          const int32_t *amax_compute, const float *scaled_max,
                                          float *amax_used, char *err, size_t errlen) {
  int rc = 0;
  FP8G_REQUIRE_EINVAL(ctx != nullptr, "fp8k_delayed_update_device: ctx is NULL");
  FP8G_REQUIRE_EINVAL(nslots >= 0 && L >= 1 && L <= FP8_HISTORY_LIMIT,
               "fp8k_delayed_update_device: nslots %d, L %d (expected nslots >= 0, 1 <= L <= %d)",
               (int)nslots, (int)L, FP8_HISTORY_LIMIT);
  if (nslots == 0) goto done;
  FP8G_CUDA(cudaSetDevice(ctx->device));
  FP8K_LAUNCH((unsigned)(((int64_t)nslots + kSlotsPerBlock - 1) / kSlotsPerBlock), kThreads, 0, ctx->stream,
              delayed_update_kernel)(nslots, L, ring, nullptr, head, scale, last_amax, nullptr,
                                     history_len, amax_compute, scaled_max, amax_used);
  FP8G_CUDA(cudaGetLastError());
done:
  return rc;
}

extern "C" int fp8k_delayed_update_indexed_async(void *stream, int32_t nslots, float *ring,
                                                 const int64_t *ring_off, int32_t *head,
                                                 float *scale, const float *amax,
                                                 const int32_t *amax_index,
                                                 const int32_t *history_len,
                                                 const int32_t *amax_compute,
                                                 const float *scaled_max, float *amax_used,
                                                 char *err, size_t errlen) {
  int rc = 0;
  FP8G_REQUIRE_EINVAL(nslots >= 0, "fp8k_delayed_update_indexed: nslots %d < 0", (int)nslots);
  if (nslots == 0) goto done;
  FP8G_REQUIRE_EINVAL(ring && ring_off && head && scale && amax && amax_index && history_len &&
                   amax_compute && scaled_max,
               "fp8k_delayed_update_indexed: NULL array");
  FP8K_LAUNCH((unsigned)(((int64_t)nslots + kSlotsPerBlock - 1) / kSlotsPerBlock), kThreads, 0,
              static_cast<cudaStream_t>(stream), delayed_update_kernel)(
      nslots, 1, ring, ring_off, head, scale, amax, amax_index, history_len, amax_compute,
      scaled_max, amax_used);
  FP8G_CUDA(cudaGetLastError());
done:
  return rc;
}

extern "C" int fp8k_delayed_update_indexed(fp8k_ctx *ctx, int32_t nslots, float *ring,
                                           const int64_t *ring_off, int32_t *head, float *scale,
                                           const float *amax, const int32_t *amax_index,
                                           const int32_t *history_len,
                                           const int32_t *amax_compute, const float *scaled_max,
                                           float *amax_used, char *err, size_t errlen) {
  int rc = 0;
  FP8G_REQUIRE_EINVAL(ctx != nullptr, "fp8k_delayed_update_indexed: ctx is NULL");
  if (nslots == 0) goto done;
  FP8G_CUDA(cudaSetDevice(ctx->device));
  rc = fp8k_delayed_update_indexed_async(ctx->stream, nslots, ring, ring_off, head, scale, amax,
                                         amax_index, history_len, amax_compute, scaled_max,
                                         amax_used, err, errlen);
done:
  return rc;
}

extern "C" int fp8k_delayed_update_host(fp8k_ctx *ctx, int32_t nslots, int32_t L, float *ring,
                                        int32_t *head, float *scale, const float *last_amax,
                                        const int32_t *history_len,
                                        const int32_t *amax_compute, const float *scaled_max,
                                        float *amax_used, char *err, size_t errlen) {
  int rc = 0;
  size_t n = 0, ring_bytes = 0, total = 0;
  char *base = nullptr;
  float *d_ring = nullptr, *d_scale = nullptr, *d_last = nullptr, *d_smax = nullptr,
        *d_used = nullptr;
  int32_t *d_head = nullptr, *d_len = nullptr, *d_comp = nullptr;
  FP8G_REQUIRE_EINVAL(ctx != nullptr, "fp8k_delayed_update_host: ctx is NULL");
  FP8G_REQUIRE_EINVAL(nslots >= 0 && L >= 1 && L <= FP8_HISTORY_LIMIT,
               "fp8k_delayed_update_host: nslots %d, L %d (expected nslots >= 0, 1 <= L <= %d)",
               (int)nslots, (int)L, FP8_HISTORY_LIMIT);
  if (nslots == 0) goto done;
  FP8G_REQUIRE_EINVAL(ring && head && scale && last_amax && history_len && amax_compute && scaled_max,
               "fp8k_delayed_update_host: NULL array");
  for (int32_t s = 0; s < nslots; s++) {
    FP8G_REQUIRE_EINVAL(history_len[s] >= 1 && history_len[s] <= L,
                 "fp8k_delayed_update_host: slot %d: history_len %d outside [1, %d]", (int)s,
                 (int)history_len[s], (int)L);
    FP8G_REQUIRE_EINVAL(head[s] >= 0 && head[s] < history_len[s],
                 "fp8k_delayed_update_host: slot %d: head %d outside [0, %d)", (int)s,
                 (int)head[s], (int)history_len[s]);
    const int32_t ac = amax_compute[s], m = (ac >> FP8K_DELAYED_MARGIN_SHIFT) - 64;
    FP8G_REQUIRE_EINVAL((ac & ~FP8K_DELAYED_UNFUSED) == FP8_AMAX_MAX ||
                     (ac & ~FP8K_DELAYED_UNFUSED) == FP8_AMAX_MOST_RECENT ||
                     ((ac & FP8K_DELAYED_UNFUSED) && (ac & 0xFD) <= 1 && m >= -FP8_MARGIN_LIMIT &&
                      m <= FP8_MARGIN_LIMIT),
                 "fp8k_delayed_update_host: slot %d: amax_compute %d, expected 0 or 1 (or "
                 "FP8K_DELAYED_COMP(0 or 1, 1, margin))", (int)s, (int)ac);
  }
  // One device allocation, carved: ring, then seven arrays of nslots 4-byte values.
  n = (size_t)nslots;
  ring_bytes = n * (size_t)L * sizeof(float);
  total = ring_bytes + 7 * n * 4;
  FP8G_CUDA(cudaSetDevice(ctx->device));
  FP8G_CUDA(fp8k_grow(&ctx->d_delayed, &ctx->delayed_cap, total));
  base = static_cast<char *>(ctx->d_delayed);
  d_ring = reinterpret_cast<float *>(base);
  d_head = reinterpret_cast<int32_t *>(base + ring_bytes);
  d_scale = reinterpret_cast<float *>(base + ring_bytes + 1 * n * 4);
  d_last = reinterpret_cast<float *>(base + ring_bytes + 2 * n * 4);
  d_len = reinterpret_cast<int32_t *>(base + ring_bytes + 3 * n * 4);
  d_comp = reinterpret_cast<int32_t *>(base + ring_bytes + 4 * n * 4);
  d_smax = reinterpret_cast<float *>(base + ring_bytes + 5 * n * 4);
  d_used = reinterpret_cast<float *>(base + ring_bytes + 6 * n * 4);
  FP8G_CUDA(cudaMemcpyAsync(d_ring, ring, ring_bytes, cudaMemcpyHostToDevice, ctx->stream));
  FP8G_CUDA(cudaMemcpyAsync(d_head, head, n * 4, cudaMemcpyHostToDevice, ctx->stream));
  FP8G_CUDA(cudaMemcpyAsync(d_scale, scale, n * 4, cudaMemcpyHostToDevice, ctx->stream));
  FP8G_CUDA(cudaMemcpyAsync(d_last, last_amax, n * 4, cudaMemcpyHostToDevice, ctx->stream));
  FP8G_CUDA(cudaMemcpyAsync(d_len, history_len, n * 4, cudaMemcpyHostToDevice, ctx->stream));
  FP8G_CUDA(cudaMemcpyAsync(d_comp, amax_compute, n * 4, cudaMemcpyHostToDevice, ctx->stream));
  FP8G_CUDA(cudaMemcpyAsync(d_smax, scaled_max, n * 4, cudaMemcpyHostToDevice, ctx->stream));
  rc = fp8k_delayed_update_device(ctx, nslots, L, d_ring, d_head, d_scale, d_last, d_len, d_comp,
                                  d_smax, amax_used ? d_used : nullptr, err, errlen);
  if (rc) goto done;
  FP8G_CUDA(cudaMemcpyAsync(ring, d_ring, ring_bytes, cudaMemcpyDeviceToHost, ctx->stream));
  FP8G_CUDA(cudaMemcpyAsync(head, d_head, n * 4, cudaMemcpyDeviceToHost, ctx->stream));
  FP8G_CUDA(cudaMemcpyAsync(scale, d_scale, n * 4, cudaMemcpyDeviceToHost, ctx->stream));
  if (amax_used)
    FP8G_CUDA(cudaMemcpyAsync(amax_used, d_used, n * 4, cudaMemcpyDeviceToHost, ctx->stream));
  FP8G_CUDA(cudaStreamSynchronize(ctx->stream));
done:
  return rc;
}
