/* bench_tensorcore.c: what tensor-core accumulation does to an FP8 GEMM and what its model
 * costs (issue 46; src/sim/tensorcore.h).
 *
 * Accuracy: A [p, K] and B [q, K] with standard Gaussian entries (splitmix64 + Box-Muller,
 * seeded), each cast to E4M3 with its own per-tensor scale 448 / amax (current scaling). Every
 * output entry y = sum_k a_k b_k of the FP8 values is computed exactly (double: E4M3 products
 * are multiples of 2^-18 below 2^18, a sum of K <= 2^20 of them fits 53 bits) and as
 *   fp32    the CPU's FP32 GEMM (fmaf chain in k order, gemm.h's sampled block),
 *   fast    the tensor-core model with fast accumulation (TE's fprop under per-tensor scaling),
 *   promote the model with promotion to FP32 every 128 products (TE's dgrad and wgrad; the
 *           split accumulator DeepSeek-V3 adopted),
 * for h100 and b200. Per entry the relative accumulation error |y - y_exact| / |y_exact| (the
 * FP8 quantization itself is not counted: both sides use the same FP8 values); reported: its
 * median, 99th percentile and maximum over the p x q entries, the normwise
 * ||Y - Y_exact||_F / ||Y_exact||_F, and the share of entries above 2% (DeepSeek-V3's figure).
 *
 * Cost: the sampled GEMM error's block (64 x 64 entries, default K) by fp8_gemm_block_f32
 * (today's) and by fp8_tc_block (h100 fast and promoted; b200 fast), A and B interleaved,
 * median of the repetitions (the thread's CPU time, so that other processes on a loaded machine
 * do not count), as a ratio to the FP32 block.
 *
 * Usage: bench_tensorcore [K [p q [seed [reps]]]]   (defaults 4096, 128 128, 46, 15) */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "fp8.h"
#include "gemm.h"
#include "tensorcore.h"

static uint64_t sm_state;
static uint64_t sm_next(void) {
  uint64_t z = (sm_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static double gauss(void) {
  double u1 = ((double)(sm_next() >> 11) + 1.0) * 0x1p-53, u2 = (double)(sm_next() >> 11) * 0x1p-53;
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* n Gaussian values cast to E4M3 with scale 448 / amax: the FP8 values (decoded). */
static void fp8_gauss(float *v, size_t n) {
  float amax = 0.0f;
  for (size_t i = 0; i < n; i++) {
    v[i] = (float)gauss();
    amax = fabsf(v[i]) > amax ? fabsf(v[i]) : amax;
  }
  float s = 448.0f / amax;
  for (size_t i = 0; i < n; i++) v[i] = fp8_decode(fp8_encode(v[i] * s, FP8_E4M3), FP8_E4M3);
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); /* CPU time: robust to a loaded machine */
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
  const int64_t K = argc > 1 ? atoll(argv[1]) : 4096;
  const int64_t p = argc > 3 ? atoll(argv[2]) : 128, q = argc > 3 ? atoll(argv[3]) : 128;
  sm_state = argc > 4 ? strtoull(argv[4], NULL, 0) : 46;
  const int reps = argc > 5 ? atoi(argv[5]) : 15;
  if (K < 1 || p < 1 || q < 1 || reps < 1) {
    fprintf(stderr, "usage: bench_tensorcore [K [p q [seed [reps]]]]\n");
    return 2;
  }
  float *a = malloc((size_t)(p * K) * sizeof *a), *b = malloc((size_t)(q * K) * sizeof *b);
  float *y = malloc((size_t)(p * q) * sizeof *y);
  double *ex = malloc((size_t)(p * q) * sizeof *ex), *e = malloc((size_t)(p * q) * sizeof *e);
  if (!a || !b || !y || !ex || !e) return 1;
  fp8_gauss(a, (size_t)(p * K));
  fp8_gauss(b, (size_t)(q * K));
  for (int64_t i = 0; i < p; i++)
    for (int64_t j = 0; j < q; j++) {
      double s = 0.0;
      for (int64_t t = 0; t < K; t++) s += (double)a[i * K + t] * (double)b[j * K + t];
      ex[i * q + j] = s;
    }
  printf("# relative accumulation error per output entry, |y - y_exact| / |y_exact|, E4M3 "
         "Gaussian operands, K = %lld, %lld x %lld entries\n",
         (long long)K, (long long)p, (long long)q);
  printf("%-8s %-9s %12s %12s %12s %12s %12s\n", "model", "form", "median", "p99", "max",
         "normwise", "share > 2%");
  struct {
    fp8_tc_model m;
    int64_t promote;
    const char *form;
  } R[] = {{FP8_TC_EXACT, 0, "fp32"},        {FP8_TC_H100, 0, "fast"},
           {FP8_TC_H100, FP8_TC_PROMOTE, "promote"}, {FP8_TC_B200, 0, "fast"},
           {FP8_TC_B200, FP8_TC_PROMOTE, "promote"}};
  for (size_t r = 0; r < sizeof R / sizeof *R; r++) {
    if (R[r].m == FP8_TC_EXACT) fp8_gemm_block_f32(p, q, K, a, b, y);
    else fp8_tc_block(R[r].m, FP8_E4M3, FP8_E4M3, p, q, K, a, b, R[r].promote, 1.0f, y);
    double num = 0.0, den = 0.0;
    size_t n = 0;
    for (int64_t i = 0; i < p * q; i++) {
      double d = (double)y[i] - ex[i];
      num += d * d;
      den += ex[i] * ex[i];
      if (ex[i] != 0.0) e[n++] = fabs(d) / fabs(ex[i]);
    }
    qsort(e, n, sizeof *e, cmp_d);
    double med = n % 2 ? e[n / 2] : 0.5 * (e[n / 2 - 1] + e[n / 2]);
    double p99 = e[(size_t)ceil(0.99 * (double)n) - 1];
    size_t over = 0;
    for (size_t i = 0; i < n; i++) over += e[i] > 0.02;
    printf("%-8s %-9s %12.3e %12.3e %12.3e %12.3e %12.4f\n", fp8_tc_model_name(R[r].m), R[r].form,
           med, p99, e[n - 1], sqrt(num / den), (double)over / (double)n);
  }
  /* the cost: the sampled block (64 x 64) */
  const int64_t bp = 64, bq = 64;
  double *t = malloc((size_t)reps * 4 * sizeof *t);
  float *yb = malloc((size_t)(bp * bq) * sizeof *yb);
  if (!t || !yb || p < bp || q < bq) {
    printf("# cost: skipped (needs p, q >= 64)\n");
    return 0;
  }
  for (int k = 0; k < reps; k++) { /* interleaved */
    double t0 = now();
    fp8_gemm_block_f32(bp, bq, K, a, b, yb);
    double t1 = now();
    fp8_tc_block(FP8_TC_H100, FP8_E4M3, FP8_E4M3, bp, bq, K, a, b, 0, 1.0f, yb);
    double t2 = now();
    fp8_tc_block(FP8_TC_H100, FP8_E4M3, FP8_E4M3, bp, bq, K, a, b, FP8_TC_PROMOTE, 1.0f, yb);
    double t3 = now();
    fp8_tc_block(FP8_TC_B200, FP8_E4M3, FP8_E4M3, bp, bq, K, a, b, 0, 1.0f, yb);
    double t4 = now();
    t[k] = t1 - t0, t[reps + k] = t2 - t1, t[2 * reps + k] = t3 - t2, t[3 * reps + k] = t4 - t3;
  }
  const char *nm[4] = {"fp32 block (today)", "h100 fast", "h100 promote", "b200 fast"};
  double base = 0.0;
  printf("# cost of one 64 x 64 x %lld sampled block, median of %d interleaved runs\n",
         (long long)K, reps);
  for (int v = 0; v < 4; v++) {
    qsort(t + v * reps, (size_t)reps, sizeof *t, cmp_d);
    double m = t[v * reps + reps / 2];
    if (v == 0) base = m;
    printf("%-20s %10.3f ms %8.2fx\n", nm[v], 1e3 * m, m / base);
  }
  free(t), free(yb), free(a), free(b), free(y), free(ex), free(e);
  return 0;
}
