// quant.cu: the fused quantize + statistics pass of fp8lab's GPU engine, and current scaling.
//
// What it computes (RECIPES.md, bit-identical to src/sim/quant.c except the three double sums,
// see below): for a tensor uploaded once (F32, BF16 or F16, widened exactly to float32) and up
// to 64 scaling configurations per launch, ONE read of the data gives
//   - amax (NaN ignored, inf counts), the log2|x| histogram (fp8_log2_histogram), the counts of
//     non-finite and zero elements and sum x^2 over finite x;
//   - per configuration c: y = RN32(x * s_c), code = cvt.rn.satfinite.{e4m3,e5m2}(y) (the
//     hardware instruction through __nv_cvt_float2_to_fp8x2; gpu_cast_exhaustive proves it equals
//     fp8_encode), xhat = RN32(decode(code) * sinv_c) with sinv_c = RN32(1/s_c) from the host,
//     overflow / underflow / subnormal / clipped counts (clipped: |y| past the rounding
//     midpoint above max, fp8_clip_bits), sum (x - xhat)^2 and sum xhat^2 over finite x.
// Current scaling (fp8k_current_quant_stats, current.cu) adds an amax pass and a
// one-thread-per-config scale kernel (fp8_current_scale's arithmetic) before the same pass,
// without a host round trip.
//
// Exactness: every multiply is __fmul_rn, every division __fdiv_rn, and the target is built
// with -fmad=false, so nothing is contracted into an FMA. The decode table lives in constant
// memory (a copy of fp8_decode_table) and is staged into shared memory per block, because the
// lanes of a warp index it divergently (constant memory would serialize them).
//
// Error sums: by default each term is computed in float32 on values rescaled by an exact power
// of two 2^K chosen per thread and 16-element chunk, so that every term is a normal float:
// |x| * 2^K < 2^56 and no finite non-zero x of the chunk lies more than 2^80 below the largest.
// Then d = RN32(x - xhat) has relative error <= 2^-24 (it is exact when xhat is within a factor 2
// of x, Sterbenz), d^2 adds 2^-24 twice, and a pairwise sum of 16 positive terms adds at most
// 4 * 2^-24: each chunk's contribution, hence each total, is within 7 * 2^-24 = 4.2e-7 relative
// of the exact sum; the CPU's double sum is within ~n * 2^-53 of it. A chunk outside that range
// (subnormal x, a span over 2^80, |x| < 2^-71) or a configuration whose s or 1/s is not a
// normal float falls back to the literal double arithmetic of quant.c, as does everything with
// fp8k_ctx_set_f64_sums(ctx, 1). Why: a double conversion and three double operations per
// element and configuration make the pass compute-bound at a few configurations on H100/H200
// (FP64 runs at half the FP32 rate and conversions to double at 1/8).
//
// sum xhat^2 (for the cosine similarity) takes another shortcut: decode(code)^2 is exact in
// float32 (an FP8 value has at most 4 significant bits, its square at most 8, and is >= 2^-32),
// so each 16-element chunk sums those squares pairwise in float32 (4 roundings, <= 4 * 2^-24
// relative) and the block multiplies its total by sinv^2 (exact in double) once. That differs
// from quant.c's RN32(decode * sinv)^2 by at most 2^-23 relative per term as long as
// decode * sinv is a normal float for every non-zero code (hfast: the smallest subnormal times
// sinv normal, max times sinv finite): 6 * 2^-24 = 3.6e-7 in all. Other scales, and
// fp8k_ctx_set_f64_sums(ctx, 1), square RN32(decode * sinv) in double as quant.c does.
//
// Reductions: per warp per 16-element iteration (counts packed 3 x 10 bits and summed with one
// redux.sync, the clipped count with a second one only in a warp that saw an overflow; the two
// sums with one butterfly of shuffles, sse in one half-warp and ssh in the other) into per-warp
// shared accumulators; per block into global memory with one atomic per accumulator
// (atomicAdd on double and unsigned long long, atomicMax on the bits of the non-negative amax).
// The order of the double sums therefore varies run to run in the last bits.
//
// Build: part of fp8lab_kernels (cmake --build BUILD --target fp8lab_kernels). Test:
// tests/gpu/test_gpu_quant.c (CPU oracle: fp8_quantize_f32 and friends, label gpu), and the same
// test on the CPU through the CUDA emulator (test_gpu_quant_emu, label cpu; README.md). Benchmark:
// bench/bench_gpu.cu (GB/s against the device-to-device copy measured in the same run).
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "fp8k_internal.cuh"
#include "fp8k_launch.cuh"
#include "quant_load.cuh" /* kChunk, load_chunk */
#include "quant_pass.cuh" /* QParams, c_decode, the pass's device functions */

namespace {

template <int DT, bool HIST>
// 3 blocks (768 threads, 24 KiB of loads in flight) per SM: enough bytes in flight to cover
// HBM latency on H100/H200; at that register cap ptxas -v (sm_90, sm_89) reports 80 registers
// and no spills.
__global__ void __launch_bounds__(kThreads, 3)
    quant_stats_kernel(const void *__restrict__ data, int64_t n, const QParams P,
                       uint8_t *__restrict__ codes, fp8k_acc *__restrict__ acc) {
  __shared__ BlockShared S;
  __shared__ unsigned s_hist[HIST ? FP8_LOG2_HIST_BINS : 1];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  block_setup<HIST>(S, s_hist, P, tid);

  unsigned amax = 0, nonfinite = 0, zeros = 0;
  double sumsq = 0.0;
  const int64_t nchunks = (n + kChunk - 1) / kChunk;
  const int64_t stride = (int64_t)gridDim.x * kThreads;
  // The loop bound is per warp, so that all 32 lanes reach the warp reductions together.
  for (int64_t base = (int64_t)blockIdx.x * kThreads + warp * 32; base < nchunks; base += stride) {
    const int64_t chunk = base + lane;
    Chunk ch;
    ch.valid = 0;
    if (chunk < nchunks) {
      ch.valid = load_chunk<DT>(data, chunk, n, ch.x);
    } else {
#pragma unroll
      for (int j = 0; j < kChunk; j++) ch.x[j] = 0.0f;
    }
    classify<HIST>(ch, P.force_f64 != 0, s_hist, amax, nonfinite, zeros, sumsq);
    for (int c = 0; c < P.nconf; c++) config_step(S, ch, c, chunk, nchunks, codes, lane, warp);
  }
  block_flush<HIST>(S, s_hist, P.nconf, amax, nonfinite, zeros, sumsq, acc);
}

template <int DT>
__global__ void __launch_bounds__(kThreads)
    amax_kernel(const void *__restrict__ data, int64_t n, unsigned *__restrict__ amax_bits) {
  const int64_t nchunks = (n + kChunk - 1) / kChunk;
  unsigned amax = 0;
  for (int64_t chunk = (int64_t)blockIdx.x * kThreads + threadIdx.x; chunk < nchunks;
       chunk += (int64_t)gridDim.x * kThreads) {
    float x[kChunk];
    unsigned valid = load_chunk<DT>(data, chunk, n, x);
#pragma unroll
    for (int j = 0; j < kChunk; j++) {
      unsigned a = __float_as_uint(x[j]) & 0x7FFFFFFFu;
      a = a > 0x7F800000u || !((valid >> j) & 1u) ? 0u : a;
      amax = a > amax ? a : amax;
    }
  }
  __shared__ unsigned s_amax;
  if (threadIdx.x == 0) s_amax = 0;
  __syncthreads();
  amax = __reduce_max_sync(kFull, amax);
  if ((threadIdx.x & 31) == 0) atomicMax(&s_amax, amax);
  __syncthreads();
  if (threadIdx.x == 0 && s_amax) atomicMax(amax_bits, s_amax);
}

// Blocks: enough to fill the device (occupancy), no more than there is work, and enough that
// no block sees 2^31 elements (its shared counters are 32-bit).
template <typename K>
int grid_for(K kernel, const fp8k_ctx *ctx, int64_t n, cudaError_t *e) {
  int per_sm = 0;
  *e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, 0);
  if (*e != cudaSuccess) return 0;
  if (per_sm < 1) per_sm = 1;
  int64_t nchunks = (n + kChunk - 1) / kChunk;
  int64_t need = (nchunks + kThreads - 1) / kThreads;
  int64_t g = (int64_t)ctx->nsm * per_sm;
  if (g > need) g = need;
  int64_t min_g = n / (1ll << 30) + 1;
  if (g < min_g) g = min_g;
  if (g < 1) g = 1;
  return (int)g;
}

template <int DT, bool HIST>
cudaError_t launch_quant_t(fp8k_ctx *ctx, const QParams &P, uint8_t *codes) {
  cudaError_t e;
  int grid = grid_for(quant_stats_kernel<DT, HIST>, ctx, ctx->numel, &e);
  if (e != cudaSuccess) return e;
  FP8K_LAUNCH(grid, kThreads, 0, ctx->stream, quant_stats_kernel<DT, HIST>)(
      ctx->d_data, ctx->numel, P, codes, ctx->d_acc);
  return cudaGetLastError();
}

template <int DT>
cudaError_t launch_amax_t(fp8k_ctx *ctx) {
  cudaError_t e;
  int grid = grid_for(amax_kernel<DT>, ctx, ctx->numel, &e);
  if (e != cudaSuccess) return e;
  FP8K_LAUNCH(grid, kThreads, 0, ctx->stream, amax_kernel<DT>)(ctx->d_data, ctx->numel,
                                                               &ctx->d_acc->amax_bits);
  return cudaGetLastError();
}

cudaError_t launch_quant(fp8k_ctx *ctx, const QParams &P, bool hist, uint8_t *codes) {
  switch (ctx->dtype) {
  case FP8_DTYPE_F32:
    return hist ? launch_quant_t<FP8_DTYPE_F32, true>(ctx, P, codes)
                : launch_quant_t<FP8_DTYPE_F32, false>(ctx, P, codes);
  case FP8_DTYPE_BF16:
    return hist ? launch_quant_t<FP8_DTYPE_BF16, true>(ctx, P, codes)
                : launch_quant_t<FP8_DTYPE_BF16, false>(ctx, P, codes);
  default:
    return hist ? launch_quant_t<FP8_DTYPE_F16, true>(ctx, P, codes)
                : launch_quant_t<FP8_DTYPE_F16, false>(ctx, P, codes);
  }
}

} // namespace

void fp8k_fill_stats(const fp8k_ctx *ctx, const fp8k_acc *a, int m, fp8k_stats *out) {
  for (int c = 0; c < m; c++) {
    out[c].n = ctx->numel;
    out[c].nonfinite = (int64_t)a->nonfinite;
    out[c].zeros = (int64_t)a->zeros;
    out[c].overflow = (int64_t)a->cnt[c][0];
    out[c].underflow = (int64_t)a->cnt[c][1];
    out[c].subnormal = (int64_t)a->cnt[c][2];
    out[c].sum_sq_err = a->sse[c];
    out[c].sum_sq = a->sum_sq;
    out[c].clipped = (int64_t)a->cnt[c][3];
    out[c].sum_sq_hat = a->ssh[c];
  }
}

// ------------------------------------------------------------------ the decode table

cudaError_t fp8k_copy_decode_tables(void) {
  float tables[2][256];
  memcpy(tables[0], fp8_decode_table(FP8_E4M3), sizeof tables[0]);
  memcpy(tables[1], fp8_decode_table(FP8_E5M2), sizeof tables[1]);
  return cudaMemcpyToSymbol(c_decode, tables, sizeof tables);
}

// ------------------------------------------------------------------ launchers

int fp8k_launch_amax(fp8k_ctx *ctx, char *err, size_t errlen) {
  int rc = 0;
  FP8G_CUDA(cudaMemsetAsync(&ctx->d_acc->amax_bits, 0, sizeof(unsigned), ctx->stream));
  if (ctx->numel == 0) goto done;
  switch (ctx->dtype) {
  case FP8_DTYPE_F32: FP8G_CUDA(launch_amax_t<FP8_DTYPE_F32>(ctx)); break;
  case FP8_DTYPE_BF16: FP8G_CUDA(launch_amax_t<FP8_DTYPE_BF16>(ctx)); break;
  default: FP8G_CUDA(launch_amax_t<FP8_DTYPE_F16>(ctx)); break;
  }
done:
  return rc;
}

int fp8k_launch_quant(fp8k_ctx *ctx, const float *scales, const float *d_scales,
                      const int *formats, int nconfigs, int hist, int codes, char *err,
                      size_t errlen) {
  int rc = 0;
  QParams P;
  memset(&P, 0, sizeof P);
  P.nconf = nconfigs;
  P.dev_scales = d_scales;
  P.force_f64 = ctx->f64_sums;
  for (int c = 0; c < nconfigs; c++) {
    P.fmt[c] = formats[c];
    if (!d_scales) {
      P.scale[c] = scales[c];
      P.sinv[c] = 1.0f / scales[c]; // exactly quant.c's scale_inv
    }
  }
  if (codes)
    FP8G_CUDA(fp8k_grow(reinterpret_cast<void **>(&ctx->d_codes), &ctx->codes_cap,
                         (size_t)ctx->numel + 64));
  FP8G_CUDA(cudaMemsetAsync(ctx->d_acc, 0, sizeof(fp8k_acc), ctx->stream));
  if (ctx->numel == 0) goto done;
  FP8G_CUDA(launch_quant(ctx, P, hist != 0, codes ? ctx->d_codes : nullptr));
done:
  return rc;
}

extern "C" int fp8k_amax(fp8k_ctx *ctx, float *amax, char *err, size_t errlen) {
  int rc = 0;
  FP8G_REQUIRE_EINVAL(ctx != nullptr && amax != nullptr, "fp8k_amax: NULL argument");
  FP8G_CUDA(cudaSetDevice(ctx->device));
  rc = fp8k_launch_amax(ctx, err, errlen);
  if (rc) goto done;
  FP8G_CUDA(cudaMemcpyAsync(&ctx->h_acc->amax_bits, &ctx->d_acc->amax_bits, sizeof(unsigned),
                             cudaMemcpyDeviceToHost, ctx->stream));
  FP8G_CUDA(cudaStreamSynchronize(ctx->stream));
  memcpy(amax, &ctx->h_acc->amax_bits, sizeof *amax);
done:
  return rc;
}

extern "C" int fp8k_quant_stats(fp8k_ctx *ctx, const float *scales, const int *formats,
                                int nconfigs, fp8k_stats *out, float *amax_out,
                                int64_t *log2_hist_out, uint8_t *codes_out, char *err,
                                size_t errlen) {
  int rc = 0;
  FP8G_REQUIRE_EINVAL(ctx != nullptr, "fp8k_quant_stats: ctx is NULL");
  FP8G_REQUIRE_EINVAL(nconfigs >= 0, "fp8k_quant_stats: nconfigs %d < 0", nconfigs);
  FP8G_REQUIRE_EINVAL(nconfigs == 0 || (scales && formats && out),
               "fp8k_quant_stats: scales, formats and out must not be NULL");
  for (int c = 0; c < nconfigs; c++)
    FP8G_REQUIRE_EINVAL(formats[c] == FP8_E4M3 || formats[c] == FP8_E5M2,
                 "fp8k_quant_stats: formats[%d] = %d, expected 0 (E4M3) or 1 (E5M2)", c,
                 formats[c]);
  FP8G_CUDA(cudaSetDevice(ctx->device));
  // Groups of 64 configurations; the first also produces amax, histogram and codes.
  for (int g = 0; g == 0 || g < nconfigs; g += FP8K_MAX_CONFIGS) {
    int m = nconfigs - g < FP8K_MAX_CONFIGS ? nconfigs - g : FP8K_MAX_CONFIGS;
    bool first = g == 0;
    rc = fp8k_launch_quant(ctx, scales + g * (nconfigs > 0), nullptr, formats + g * (nconfigs > 0),
                           m, first && log2_hist_out,
                           first && codes_out && ctx->numel > 0 && nconfigs > 0, err, errlen);
    if (rc) goto done;
    FP8G_CUDA(cudaMemcpyAsync(ctx->h_acc, ctx->d_acc, sizeof(fp8k_acc), cudaMemcpyDeviceToHost,
                               ctx->stream));
    if (first && codes_out && ctx->numel > 0 && nconfigs > 0)
      FP8G_CUDA(cudaMemcpyAsync(codes_out, ctx->d_codes, (size_t)ctx->numel,
                                 cudaMemcpyDeviceToHost, ctx->stream));
    FP8G_CUDA(cudaStreamSynchronize(ctx->stream));
    fp8k_fill_stats(ctx, ctx->h_acc, m, out + g * (nconfigs > 0));
    if (first) {
      if (amax_out) memcpy(amax_out, &ctx->h_acc->amax_bits, sizeof *amax_out);
      if (log2_hist_out)
        for (int b = 0; b < FP8_LOG2_HIST_BINS; b++)
          log2_hist_out[b] = (int64_t)ctx->h_acc->hist[b];
    }
  }
done:
  return rc;
}

extern "C" int fp8k_quant_stats_dscales(fp8k_ctx *ctx, const float *d_scales, const int *formats,
                                        int nconfigs, fp8k_stats *out, uint8_t *codes_out,
                                        char *err, size_t errlen) {
  int rc = 0;
  FP8G_REQUIRE_EINVAL(ctx != nullptr, "fp8k_quant_stats_dscales: ctx is NULL");
  FP8G_REQUIRE_EINVAL(nconfigs >= 1 && d_scales && formats && out,
               "fp8k_quant_stats_dscales: nconfigs %d (>= 1), d_scales, formats and out needed",
               nconfigs);
  for (int c = 0; c < nconfigs; c++)
    FP8G_REQUIRE_EINVAL(formats[c] == FP8_E4M3 || formats[c] == FP8_E5M2,
                 "fp8k_quant_stats_dscales: formats[%d] = %d, expected 0 (E4M3) or 1 (E5M2)", c,
                 formats[c]);
  FP8G_CUDA(cudaSetDevice(ctx->device));
  // Groups of 64 configurations, each reading its scales from d_scales + g (sinv = RN(1/s) on
  // the device, the host's division); the first also produces configuration 0's codes.
  for (int g = 0; g < nconfigs; g += FP8K_MAX_CONFIGS) {
    int m = nconfigs - g < FP8K_MAX_CONFIGS ? nconfigs - g : FP8K_MAX_CONFIGS;
    bool codes = g == 0 && codes_out && ctx->numel > 0;
    rc = fp8k_launch_quant(ctx, nullptr, d_scales + g, formats + g, m, 0, codes, err, errlen);
    if (rc) goto done;
    FP8G_CUDA(cudaMemcpyAsync(ctx->h_acc, ctx->d_acc, sizeof(fp8k_acc), cudaMemcpyDeviceToHost,
                               ctx->stream));
    if (codes)
      FP8G_CUDA(cudaMemcpyAsync(codes_out, ctx->d_codes, (size_t)ctx->numel,
                                 cudaMemcpyDeviceToHost, ctx->stream));
    FP8G_CUDA(cudaStreamSynchronize(ctx->stream));
    fp8k_fill_stats(ctx, ctx->h_acc, m, out + g);
  }
done:
  return rc;
}
