/* bench_gemm.c: TFLOP/s of fp8lab's cuBLASLt FP8 GEMMs (src/gpu/gemm_lt.h) on one device.
 *
 * Default shape M = N = K = 8192 (fprop form Y[M,N] = X[M,K] . W[N,K]^T, E4M3 x E4M3, BF16 out,
 * FAST_ACCUM on: what torch._scaled_mm(use_fast_accum=True) runs, so bench/scaled_mm.py gives the
 * number to compare with); then the same with the output amax (AMAX_D), without fast
 * accumulation, and the backward forms (dgrad, wgrad: E5M2 x E4M3, with their transposes).
 * Operands: standard normal values encoded to FP8 by the simulator (like torch.randn(...).to(
 * float8)), not zeros (tensor cores run measurably faster on zeros). Timing: CUDA events around
 * `iters` back-to-back calls after `warmup` calls; TFLOP/s = 2 M N K / time.
 *
 * Build: target bench_gemm (src/gpu/CMakeLists.txt). Run: bench_gemm [M N K [iters]].
 * The last line is "RESULT fprop_tflops=<value>" for scripts/device-check.sh. Exit 77 without a
 * device (nothing measured).
 */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "fp8.h"
#include "gemm_lt.h"

static uint64_t rng = 88172645463325252ull;
static double uniform(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return ((double)(rng >> 11) + 0.5) / 9007199254740992.0;
}
static float normal(void) {
  return (float)(sqrt(-2.0 * log(uniform())) * cos(6.283185307179586 * uniform()));
}

static uint8_t *random_codes(size_t n, fp8_format f) {
  uint8_t *h = malloc(n);
  if (!h) return NULL;
  /* 4096 distinct values reused: generating 2^26 normals per operand would dominate the run */
  uint8_t table[4096];
  for (int i = 0; i < 4096; i++) table[i] = fp8_encode(normal(), f);
  for (size_t i = 0; i < n; i++) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    h[i] = table[rng & 4095];
  }
  uint8_t *d = NULL;
  if (cudaMalloc((void **)&d, n) != cudaSuccess || cudaMemcpy(d, h, n, cudaMemcpyHostToDevice)) {
    free(h);
    return NULL;
  }
  free(h);
  return d;
}

typedef struct {
  const char *name;
  fp8_gemm_kind g;
  bool fast, amax;
} variant;

int main(int argc, char **argv) {
  int64_t M = 8192, N = 8192, K = 8192;
  int iters = 50, warmup = 10;
  if (argc >= 4) M = atoll(argv[1]), N = atoll(argv[2]), K = atoll(argv[3]);
  if (argc >= 5) iters = atoi(argv[4]);
  if (M <= 0 || N <= 0 || K <= 0 || iters <= 0) {
    fprintf(stderr, "usage: bench_gemm [M N K [iters]]\n");
    return 2;
  }
  char err[1024];
  fp8_gpu_info info;
  if (fp8_gpu_probe(0, &info, err, sizeof err)) {
    printf("skipped: no CUDA device (%s)\n", err);
    return 77;
  }
  fp8_gemm_lt *ctx = NULL;
  if (fp8_gemm_lt_create(&ctx, 0, err, sizeof err)) {
    fprintf(stderr, "bench_gemm: %s\n", err);
    return 1;
  }
  printf("bench_gemm: %s (sm_%d%d, %d SMs), M=%lld N=%lld K=%lld, %d iterations after %d "
         "warm-up\n", info.name, info.cc_major, info.cc_minor, info.sm_count, (long long)M,
         (long long)N, (long long)K, iters, warmup);
  /* One layer whose three GEMMs all have the shape [M, N] x K:
   * fprop: tokens = M, out = N, in = K; dgrad: tokens = M, in = N, out = K;
   * wgrad: out = M, in = N, tokens = K. Each variant gets its own layer. */
  const size_t big = (size_t)(M > N ? M : N) * (size_t)K;
  uint8_t *c_e4m3 = random_codes(big, FP8_E4M3), *c_e4m3b = random_codes(big, FP8_E4M3);
  uint8_t *c_e5m2 = random_codes(big, FP8_E5M2);
  float *d_sinv = NULL, *d_amax = NULL;
  void *y = NULL;
  const float one[3] = {1.0f, 1.0f, 1.0f};
  if (!c_e4m3 || !c_e4m3b || !c_e5m2 || cudaMalloc((void **)&d_sinv, sizeof one) ||
      cudaMemcpy(d_sinv, one, sizeof one, cudaMemcpyHostToDevice) ||
      cudaMalloc((void **)&d_amax, 4) || cudaMalloc(&y, (size_t)M * (size_t)N * 2)) {
    fprintf(stderr, "bench_gemm: device allocation failed\n");
    return 1;
  }
  const variant vs[] = {
      {"fprop e4m3 x e4m3 -> bf16, fast accum", FP8_GEMM_FPROP, true, false},
      {"fprop e4m3 x e4m3 -> bf16, fast accum, amax", FP8_GEMM_FPROP, true, true},
      {"fprop e4m3 x e4m3 -> bf16, no fast accum", FP8_GEMM_FPROP, false, false},
      {"dgrad e5m2 x e4m3 -> bf16 (W transposed)", FP8_GEMM_DGRAD, false, false},
      {"wgrad e5m2 x e4m3 -> bf16 (both transposed)", FP8_GEMM_WGRAD, false, false},
  };
  cudaStream_t s = (cudaStream_t)fp8_gemm_lt_stream(ctx);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  double fprop_tflops = 0;
  int rc = 0;
  for (size_t v = 0; v < sizeof vs / sizeof vs[0]; v++) {
    fp8_gemm_lt_options o = fp8_gemm_lt_options_default();
    o.fast_accum[vs[v].g] = vs[v].fast;
    fp8_gemm_lt_set_options(ctx, &o);
    fp8_lt_layer l;
    memset(&l, 0, sizeof l);
    fp8_lt_operand e4 = {c_e4m3, d_sinv, FP8_E4M3}, e4b = {c_e4m3b, d_sinv + 1, FP8_E4M3};
    fp8_lt_operand e5 = {c_e5m2, d_sinv + 2, FP8_E5M2};
    if (vs[v].g == FP8_GEMM_FPROP) l.tokens = M, l.out = N, l.in = K, l.input = e4, l.weight = e4b;
    else if (vs[v].g == FP8_GEMM_DGRAD) l.tokens = M, l.in = N, l.out = K, l.grad_output = e5, l.weight = e4;
    else l.out = M, l.in = N, l.tokens = K, l.grad_output = e5, l.input = e4;
    float *am = vs[v].amax ? d_amax : NULL;
    for (int i = 0; i < warmup && !rc; i++)
      rc = fp8_gemm_lt_fp8(ctx, vs[v].g, &l, FP8_LT_BF16, y, am, err, sizeof err);
    if (!rc) rc = fp8_gemm_lt_sync(ctx, err, sizeof err);
    cudaEventRecord(e0, s);
    for (int i = 0; i < iters && !rc; i++)
      rc = fp8_gemm_lt_fp8(ctx, vs[v].g, &l, FP8_LT_BF16, y, am, err, sizeof err);
    cudaEventRecord(e1, s);
    if (!rc) rc = fp8_gemm_lt_sync(ctx, err, sizeof err);
    if (rc) {
      fprintf(stderr, "bench_gemm: %s: %s\n", vs[v].name, err);
      break;
    }
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    const double t = ms / 1e3 / iters, tflops = 2.0 * (double)M * (double)N * (double)K / t / 1e12;
    fp8_gemm_lt_info in = fp8_gemm_lt_last_info(ctx);
    printf("  %-46s %8.3f ms  %7.1f TFLOP/s  (operand copies %d, amax from %s, workspace %zu)\n",
           vs[v].name, t * 1e3, tflops, in.copies,
           vs[v].amax ? (in.amax_cublaslt ? "cuBLASLt" : "kernel") : "-", in.workspace);
    if (v == 0) fprop_tflops = tflops;
  }
  if (!rc) printf("RESULT fprop_tflops=%.1f\n", fprop_tflops);
  fp8_gemm_lt_free(ctx);
  return rc ? 1 : 0;
}
