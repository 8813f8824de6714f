// bench_gpu.cu: bandwidth of fp8lab's fused quantize + statistics pass (kernels/quant.cu) on a
// 1 GiB BF16 tensor, against the device-to-device cudaMemcpy bandwidth measured in the same run
// (the ceiling a streaming kernel can reach; the goal is >= 85% of it), and the cost of current
// scaling (an amax pass, then the fused pass: two reads) against delayed scaling (one read);
// then the timeline kernels (timeline.cu): cast_transpose of a BF16 [16384, 8192] tensor with
// and without the transposed copy, and the amax kernel, against the same copy bandwidth.
//
// Not a test: correctness is tests/gpu/test_gpu_quant (GPU vs the CPU simulator). Build and run:
//   cmake --build BUILD --target bench_gpu && BUILD/kernels/bench_gpu [GiB]
// GB/s are 1e9 bytes/s. The copy counts its bytes read + written (as bandwidthTest does); the
// fused and amax kernels count the bytes they read (their writes are a few KiB), cast_transpose
// its bytes read + written (2 + 1 + 1 per element with codes_t). Times are the best of 10 runs
// measured with CUDA events on the context's stream; "kernel" times exclude the small copies
// back to the host and the synchronization that the fp8k_* calls add ("call" times include them).
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "fp8k_internal.cuh"

#define BENCH_CHECK(call)                                                                   \
  do {                                                                                      \
    cudaError_t e_ = (call);                                                                \
    if (e_ != cudaSuccess) {                                                                \
      fprintf(stderr, "%s failed at %s:%d: %s\n", #call, __FILE__, __LINE__,                \
              cudaGetErrorString(e_));                                                      \
      exit(1);                                                                              \
    }                                                                                       \
  } while (0)
#define FP8K_OK_OR_DIE(expr)                                                                \
  do {                                                                                      \
    if ((expr) != 0) {                                                                      \
      fprintf(stderr, "%s: %s\n", #expr, err);                                              \
      exit(1);                                                                              \
    }                                                                                       \
  } while (0)

static const int kReps = 10;

// BF16 values with log-uniform magnitudes over 2^-20 .. 2^6 and random signs, from a hash of
// the index (deterministic, no host copy of 1 GiB).
__global__ void fill_bf16(uint16_t *out, int64_t n) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    uint64_t z = (uint64_t)i * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    uint32_t sign = (uint32_t)(z & 1) << 15, e = 127 - 20 + (uint32_t)((z >> 8) % 27);
    out[i] = (uint16_t)(sign | (e << 7) | ((z >> 40) & 0x7F));
  }
}

struct Timer {
  cudaEvent_t a, b;
  cudaStream_t s;
  explicit Timer(cudaStream_t st) : s(st) {
    BENCH_CHECK(cudaEventCreate(&a));
    BENCH_CHECK(cudaEventCreate(&b));
  }
  ~Timer() {
    cudaEventDestroy(a);
    cudaEventDestroy(b);
  }
  void start() { BENCH_CHECK(cudaEventRecord(a, s)); }
  double stop_ms() {
    float ms = 0;
    BENCH_CHECK(cudaEventRecord(b, s));
    BENCH_CHECK(cudaEventSynchronize(b));
    BENCH_CHECK(cudaEventElapsedTime(&ms, a, b));
    return ms;
  }
};

static void report(const char *what, double ms, double bytes, double ceiling_gbs) {
  double gbs = bytes / (ms * 1e-3) / 1e9;
  printf("  %-52s %9.3f ms %8.1f GB/s %6.1f%% of copy\n", what, ms, gbs, 100.0 * gbs / ceiling_gbs);
}

// The timeline kernels (timeline.cu) on a BF16 [16384, 8192] tensor filled by fp8k_tl_fill:
// cast_transpose with the transposed copy (2 bytes read + 1 + 1 written per element), without it
// (2 + 1), and the amax kernel alone (2 read), kernel time on `stream`, against the copy.
static void bench_timeline(cudaStream_t stream, Timer &t, double copy_gbs) {
  const int64_t rows = 16384, cols = 8192, n = rows * cols;
  char err[512] = "";
  void *x = nullptr;
  uint8_t *codes = nullptr, *codes_t = nullptr;
  float *sc = nullptr; // scale, scale_inv, amax
  const float h[3] = {448.0f / 4.0f, 0.0f, 0.0f};
  BENCH_CHECK(cudaMalloc(&x, (size_t)n * 2));
  BENCH_CHECK(cudaMalloc(&codes, (size_t)n));
  BENCH_CHECK(cudaMalloc(&codes_t, (size_t)n));
  BENCH_CHECK(cudaMalloc(&sc, sizeof h));
  BENCH_CHECK(cudaMemcpyAsync(sc, h, sizeof h, cudaMemcpyHostToDevice, stream));
  FP8K_OK_OR_DIE(fp8k_tl_fill(stream, x, FP8_DTYPE_BF16, n, 1, 4.0f, err, sizeof err));
  printf("timeline kernels (best of %d), BF16 [%lld, %lld]:\n", kReps, (long long)rows,
         (long long)cols);
  for (int with_t = 1; with_t >= 0; with_t--) {
    double best = 1e30;
    for (int r = 0; r < kReps; r++) {
      t.start();
      FP8K_OK_OR_DIE(fp8k_tl_cast_transpose(stream, x, FP8_DTYPE_BF16, rows, cols, sc, FP8_E4M3,
                                            codes, with_t ? codes_t : nullptr, sc + 1, sc + 2,
                                            err, sizeof err));
      double ms = t.stop_ms();
      best = ms < best ? ms : best;
    }
    report(with_t ? "cast_transpose + codes_t (2 + 1 + 1 bytes/elem)"
                  : "cast_transpose, no codes_t (2 + 1 bytes/elem)",
           best, (double)n * (with_t ? 4.0 : 3.0), copy_gbs);
  }
  double best = 1e30;
  for (int r = 0; r < kReps; r++) {
    t.start();
    FP8K_OK_OR_DIE(fp8k_tl_amax(stream, x, FP8_DTYPE_BF16, n, sc + 2, err, sizeof err));
    double ms = t.stop_ms();
    best = ms < best ? ms : best;
  }
  report("fp8k_tl_amax (memset + 1 read)", best, (double)n * 2.0, copy_gbs);
  BENCH_CHECK(cudaFree(x));
  BENCH_CHECK(cudaFree(codes));
  BENCH_CHECK(cudaFree(codes_t));
  BENCH_CHECK(cudaFree(sc));
}

int main(int argc, char **argv) {
  char err[512] = "", why[256] = "";
  if (fp8k_device_count(why, sizeof why) == 0) {
    printf("skipped: no CUDA device (%s)\n", why);
    return 0;
  }
  double gib = argc > 1 ? atof(argv[1]) : 1.0;
  int64_t n = (int64_t)(gib * (double)(1ll << 30) / 2.0); // BF16 elements
  size_t bytes = (size_t)n * 2;
  fp8k_ctx *ctx = nullptr;
  FP8K_OK_OR_DIE(fp8k_ctx_create(&ctx, 0, err, sizeof err));
  cudaDeviceProp prop;
  BENCH_CHECK(cudaGetDeviceProperties(&prop, 0));
  printf("bench_gpu: %s, %d SMs; BF16 tensor of %lld elements (%.2f GiB)\n", prop.name,
         prop.multiProcessorCount, (long long)n, (double)bytes / (double)(1ll << 30));

  // The tensor, written straight into the context's buffer (what fp8k_upload would hold).
  BENCH_CHECK(fp8k_grow(&ctx->d_data, &ctx->data_cap, bytes + 64));
  fill_bf16<<<4 * prop.multiProcessorCount, 256, 0, ctx->stream>>>(
      static_cast<uint16_t *>(ctx->d_data), n);
  BENCH_CHECK(cudaGetLastError());
  ctx->numel = n;
  ctx->dtype = FP8_DTYPE_BF16;
  Timer t(ctx->stream);

  // Ceiling: device-to-device copy of the same number of bytes.
  void *dst = nullptr;
  BENCH_CHECK(cudaMalloc(&dst, bytes));
  double best = 1e30;
  for (int r = 0; r < kReps; r++) {
    t.start();
    BENCH_CHECK(cudaMemcpyAsync(dst, ctx->d_data, bytes, cudaMemcpyDeviceToDevice, ctx->stream));
    double ms = t.stop_ms();
    best = ms < best ? ms : best;
  }
  BENCH_CHECK(cudaFree(dst));
  double copy_gbs = 2.0 * (double)bytes / (best * 1e-3) / 1e9;
  printf("  %-52s %9.3f ms %8.1f GB/s (read + write)\n", "cudaMemcpy device to device", best,
         copy_gbs);

  float amax = 0;
  FP8K_OK_OR_DIE(fp8k_amax(ctx, &amax, err, sizeof err));
  float scales[FP8K_MAX_CONFIGS];
  int formats[FP8K_MAX_CONFIGS];
  for (int c = 0; c < 24; c++) { // a delayed-scaling sweep: both formats, margins, histories
    formats[c] = c % 2;
    scales[c] = fp8_format_max((fp8_format)formats[c]) / amax * ldexpf(1.0f, -(c / 2) % 3) *
                (1.0f - 0.01f * (float)(c / 6));
  }

  // Fused pass, kernel time (events around the launch, including the accumulator memset).
  struct {
    const char *name;
    int nconf, hist, f64;
  } cases[] = {{"fused pass, 1 config", 1, 0, 0},
               {"fused pass, 1 config + histogram", 1, 1, 0},
               {"fused pass, 24 configs", 24, 0, 0},
               {"fused pass, 24 configs + histogram", 24, 1, 0},
               {"fused pass, 1 config, f64 error terms", 1, 0, 1},
               {"fused pass, 24 configs, f64 error terms", 24, 0, 1}};
  printf("kernels (best of %d):\n", kReps);
  for (auto &cs : cases) {
    fp8k_ctx_set_f64_sums(ctx, cs.f64);
    best = 1e30;
    for (int r = 0; r < kReps; r++) {
      t.start();
      FP8K_OK_OR_DIE(fp8k_launch_quant(ctx, scales, nullptr, formats, cs.nconf, cs.hist, 0, err,
                                       sizeof err));
      double ms = t.stop_ms();
      best = ms < best ? ms : best;
    }
    report(cs.name, best, (double)bytes, copy_gbs);
  }
  fp8k_ctx_set_f64_sums(ctx, 0);
  best = 1e30;
  for (int r = 0; r < kReps; r++) {
    t.start();
    FP8K_OK_OR_DIE(fp8k_launch_amax(ctx, err, sizeof err));
    double ms = t.stop_ms();
    best = ms < best ? ms : best;
  }
  report("amax pass alone", best, (double)bytes, copy_gbs);

  // Delayed (one read, scales known) vs current (amax pass + scale + fused pass), as the runner
  // calls them (copies back and synchronization included).
  printf("calls (best of %d), 1 configuration:\n", kReps);
  fp8k_stats st[FP8K_MAX_CONFIGS];
  double delayed_ms = 1e30, current_ms = 1e30;
  for (int r = 0; r < kReps; r++) {
    t.start();
    FP8K_OK_OR_DIE(fp8k_quant_stats(ctx, scales, formats, 1, st, &amax, nullptr, nullptr, err,
                                    sizeof err));
    double ms = t.stop_ms();
    delayed_ms = ms < delayed_ms ? ms : delayed_ms;
  }
  fp8k_current_params cp = {0.0f, 0, 0, FP8_E4M3};
  float cscale = 0;
  for (int r = 0; r < kReps; r++) {
    t.start();
    FP8K_OK_OR_DIE(fp8k_current_quant_stats(ctx, &cp, 1, st, &cscale, nullptr, nullptr, err,
                                            sizeof err));
    double ms = t.stop_ms();
    current_ms = ms < current_ms ? ms : current_ms;
  }
  report("delayed: fp8k_quant_stats (1 read)", delayed_ms, (double)bytes, copy_gbs);
  report("current: fp8k_current_quant_stats (2 reads)", current_ms, (double)bytes, copy_gbs);
  printf("  current / delayed time: %.2fx (scale %.9g, overflow %lld, underflow %lld)\n",
         current_ms / delayed_ms, (double)cscale, (long long)st[0].overflow,
         (long long)st[0].underflow);
  bench_timeline(ctx->stream, t, copy_gbs);
  fp8k_ctx_destroy(ctx);
  return 0;
}
