/* test_gpu_timeline_kernels.c: the timeline kernels (kernels/timeline.cu, fp8k_tl_*; delayed.cu,
 * fp8k_delayed_update_indexed_async) against the CPU simulator, "same operation, two
 * implementations", bit for bit, every launch on a stream created with cudaStreamNonBlocking:
 *  - cast_transpose: shapes [0, 5], [7, 0], [1, 1], [1, 65], [33, 65], [100, 7], [64, 64],
 *    [64, 68], [72, 136], [96, 136], [128, 256], [208, 264], [130, 257], [513, 1031] (the vector
 *    path and its 16-byte transposed stores, partial edge tiles, the per-element path, more
 *    tiles than blocks: the emulated device runs 6); F32, BF16, F16; data with
 *    NaN, +-inf, +-0, subnormals, FP8 ties after scaling, values beyond the format's max; both
 *    formats; scales 1, non-power-of-two, tiny and huge; codes_t NULL and not: codes
 *    (fp8_encode(RN32(x * s))), codes_t, scale_inv (1.0f / s), amax (fp8_amax_f32), and guard
 *    bytes around the outputs untouched; x, codes and codes_t offset by one element (the
 *    fallbacks); amax accumulating over two calls and not reset; an all-NaN tensor (amax 0);
 *  - amax: sizes 0 .. 2^16+3 at element offsets 0, 1, 3, 5 (the kernel's unaligned head), the
 *    stale value reset, fp8_amax_f32's value;
 *  - current_scale: amax 0, NaN, inf, subnormal, normal, huge with amax_epsilon, pow2, margins and
 *    both formats vs fp8_current_scale;
 *  - amax_gather: values moved, sources zeroed, others untouched, n = 0;
 *  - delayed_update_indexed_async (and fp8k_delayed_update_indexed, the context's path) vs
 *    fp8_delayed_update / fp8_delayed_history over 240 random steps of 30 slots (L in 1, 2, 3,
 *    16, 70, rings packed back to back, indices permuted each step, some -1);
 *  - fill: the host's replica of the hash bit for bit, determinism, |x| <= scale, both signs;
 *  - argument errors (FP8_EINVAL and the message).
 * This file has the cast_transpose tests and main; timeline_state_tests.c the others, and
 * timeline_test.h what both use. Label gpu; without a device: "skipped: no CUDA device (...)"
 * and exit 77. The same files built
 * against the CUDA emulator (tests/gpu/emu) is test_gpu_timeline_kernels_emu (label cpu), also
 * with a shuffled schedule. A failure names the first mismatch (index, expected, got). */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "timeline_test.h"

cudaStream_t g_stream;
char g_err[512];

/* ------------------------------------------------------------------ cast_transpose */

typedef struct {
  int64_t rows, cols;
  fp8_dtype d;
  float s;
  int with_t;   /* pass codes_t */
  int x_off;    /* x, codes, codes_t offset by this many elements (bytes for the codes) */
  int codes_off, t_off;
} ct_case;

/* Expected and device outputs of one call. */
static void compare_codes(const char *what, const ct_case *k, const char *name, const uint8_t *exp,
                          const uint8_t *got, int64_t n, int64_t ld, const float *x, float s) {
  int64_t count, i = first_diff(exp, got, n, &count);
  if (i < 0) {
    GH_CHECK(1, "%s", what);
    return;
  }
  int64_t r = ld ? i / ld : 0, c = ld ? i % ld : 0;
  float xv = strcmp(name, "codes") == 0 ? x[i] : x[c * k->rows + r]; /* codes_t: [cols, rows] */
  GH_CHECK(0, "%s: %s[%lld][%lld] (index %lld of %lld; %lld differ): x = %.9g (0x%08x), x*s = "
           "%.9g: expected 0x%02x, got 0x%02x", what, name, (long long)r, (long long)c,
           (long long)i, (long long)n, (long long)count, (double)xv, f2u(xv), (double)(xv * s),
           exp[i], got[i]);
}

/* Runs one cast_transpose on raw (rows * cols elements of k->d) and compares every output with
 * the simulator; amax_start is *amax before the call (the kernel only raises it). */
static void run_ct(const char *what, const ct_case *k, fp8_format f, const unsigned char *raw,
                   float amax_start) {
  const int64_t n = k->rows * k->cols;
  const size_t es = fp8_dtype_size(k->d), nb = (size_t)n + 2 * GUARD;
  float *x = malloc((size_t)n * sizeof *x + 4), sc[3] = {k->s, u2f(0xFFC00001u), amax_start};
  uint8_t *exp = malloc((size_t)n + 1), *exp_t = malloc((size_t)n + 1), *got = malloc(nb),
          *got_t = malloc(nb);
  unsigned char *dx = dalloc((size_t)(n + 1) * es + 16);
  uint8_t *dc = dalloc(nb), *dt = dalloc(nb);
  float *dsc = dalloc(sizeof sc);
  GH_REQUIRE(x && exp && exp_t && got && got_t && dx && dc && dt && dsc, "%s: out of memory", what);
  fp8_dtype_to_f32(k->d, raw, (size_t)n, x);
  for (int64_t i = 0; i < n; i++) exp[i] = fp8_encode(x[i] * k->s, f);
  for (int64_t i = 0; i < n; i++) exp_t[(i % k->cols) * k->rows + i / k->cols] = exp[i];
  GH_REQUIRE(h2d(dx + (size_t)k->x_off * es, raw, (size_t)n * es) && h2d(dsc, sc, sizeof sc) &&
             dset(dc, 0xEE, nb) && dset(dt, 0xEE, nb), "%s: copies failed", what);
  int rc = fp8k_tl_cast_transpose(g_stream, dx + (size_t)k->x_off * es, k->d, k->rows, k->cols,
                                  dsc, f, dc + GUARD + k->codes_off,
                                  k->with_t ? dt + GUARD + k->t_off : NULL, dsc + 1, dsc + 2, g_err,
                                  sizeof g_err);
  GH_REQUIRE(rc == 0, "%s: fp8k_tl_cast_transpose returned %d: %s", what, rc, g_err);
  GH_REQUIRE(d2h(got, dc, nb) && d2h(got_t, dt, nb) && d2h(sc, dsc, sizeof sc),
             "%s: copies back failed", what);
  compare_codes(what, k, "codes", exp, got + GUARD + k->codes_off, n, k->cols, x, k->s);
  GH_CHECK(all_bytes(got, GUARD + k->codes_off, 0xEE) &&
           all_bytes(got + GUARD + k->codes_off + n, GUARD - k->codes_off, 0xEE),
           "%s: a byte around codes was written", what);
  if (k->with_t) {
    compare_codes(what, k, "codes_t", exp_t, got_t + GUARD + k->t_off, n, k->rows, x, k->s);
    GH_CHECK(all_bytes(got_t, GUARD + k->t_off, 0xEE) &&
             all_bytes(got_t + GUARD + k->t_off + n, GUARD - k->t_off, 0xEE),
             "%s: a byte around codes_t was written", what);
  } else {
    GH_CHECK(all_bytes(got_t, nb, 0xEE), "%s: codes_t is NULL, yet its buffer changed", what);
  }
  const float sinv = 1.0f / k->s, am = fmaxf(amax_start, fp8_amax_f32(x, (size_t)n));
  GH_CHECK(f2u(sc[1]) == f2u(sinv), "%s: scale_inv expected %.9g (0x%08x), got %.9g (0x%08x)",
           what, (double)sinv, f2u(sinv), (double)sc[1], f2u(sc[1]));
  GH_CHECK(f2u(sc[2]) == f2u(am), "%s: amax expected %.9g (0x%08x), got %.9g (0x%08x)", what,
           (double)am, f2u(am), (double)sc[2], f2u(sc[2]));
  free(x), free(exp), free(exp_t), free(got), free(got_t);
  cudaFree(dx), cudaFree(dc), cudaFree(dt), cudaFree(dsc);
}

/* n elements of gen_bits; no_inf: infinities replaced by 0 (a finite amax, which must then be
 * the exact maximum, NaN still ignored). */
static unsigned char *gen_tensor(fp8_dtype d, int64_t n, float s, int no_inf) {
  unsigned char *raw = malloc((size_t)n * fp8_dtype_size(d) + 1);
  for (int64_t i = 0; raw && i < n; i++) {
    uint32_t b = gen_bits(d, s);
    put_bits(raw, d, i, no_inf && isinf(widen(b, d)) ? 0u : b);
  }
  return raw;
}

static void t_cast_transpose(fp8_dtype d) {
  static const int64_t shapes[][2] = {{0, 5}, {7, 0}, {1, 1}, {1, 65}, {33, 65}, {100, 7},
                                      {64, 64}, {64, 68}, {72, 136}, {96, 136}, {128, 256},
                                      {208, 264}, {130, 257}, {513, 1031}};
  /* 1, not a power of two, tiny, huge (per dtype, so that x s still reaches FP8's range) */
  const float scales[3][4] = {{1.0f, 0.37f, 1e-40f /* subnormal: 1/s = inf */, 3e30f},
                              {1.0f, 0.37f, 1e-30f, 0x1.8p90f},
                              {1.0f, 0.37f, 0x1.4p-14f, 0x1p12f}};
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
    for (int sc = 0; sc < 4; sc++) {
      ct_case k = {shapes[si][0], shapes[si][1], d, scales[d][sc], 0, 0, 0, 0};
      const int big = k.rows * k.cols > 100000;
      g_ties = 0;
      unsigned char *raw = gen_tensor(d, k.rows * k.cols, k.s, sc == 1);
      GH_REQUIRE(raw, "out of memory");
      if (big && k.s == 1.0f) GH_CHECK(g_ties > 1000, "only %lld FP8 ties in the data", (long long)g_ties);
      for (int f = 0; f < 2; f++)
        for (k.with_t = 1; k.with_t >= (big ? 1 : 0); k.with_t--) {
          char what[160];
          snprintf(what, sizeof what, "cast_transpose %s [%lld, %lld] %s scale %.9g%s",
                   fp8_dtype_name(d), (long long)k.rows, (long long)k.cols,
                   fp8_format_name((fp8_format)f), (double)k.s, k.with_t ? "" : " (no codes_t)");
          run_ct(what, &k, (fp8_format)f, raw, 0.0f);
        }
      free(raw);
    }
}
static void test_cast_transpose_f32(void) { t_cast_transpose(FP8_DTYPE_F32); }
static void test_cast_transpose_bf16(void) { t_cast_transpose(FP8_DTYPE_BF16); }
static void test_cast_transpose_f16(void) { t_cast_transpose(FP8_DTYPE_F16); }

/* Misaligned x, codes and codes_t (each alone, and all three) on shapes the vector path would
 * take; amax accumulating (a start value above the tensor's stays, one below is raised); an
 * all-NaN tensor. */
static void test_cast_transpose_fallbacks(void) {
  const int offs[][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {1, 1, 1}, {0, 4, 8}};
  for (int d = 0; d < 3; d++)
    for (size_t o = 0; o < sizeof offs / sizeof offs[0]; o++) {
      ct_case k = {128, 256, (fp8_dtype)d, 0.37f, 1, offs[o][0], offs[o][1], offs[o][2]};
      unsigned char *raw = gen_tensor(k.d, k.rows * k.cols, k.s, 0);
      GH_REQUIRE(raw, "out of memory");
      char what[160];
      snprintf(what, sizeof what, "cast_transpose %s [128, 256] offsets x %d, codes %d, codes_t %d",
               fp8_dtype_name(k.d), k.x_off, k.codes_off, k.t_off);
      run_ct(what, &k, FP8_E4M3, raw, 0.0f);
      free(raw);
    }
  for (int d = 0; d < 3; d++) { /* amax: not reset, accumulates */
    ct_case k = {96, 136, (fp8_dtype)d, 1.0f, 1, 0, 0, 0};
    unsigned char *raw = malloc(96 * 136 * 4);
    GH_REQUIRE(raw, "out of memory");
    for (int64_t i = 0; i < 96 * 136; i++)
      put_bits(raw, k.d, i, to_dtype((float)(rnd01() * 2.0 - 1.0) * 100.0f, k.d));
    run_ct("cast_transpose amax start 1e6 (kept)", &k, FP8_E5M2, raw, 1e6f);
    run_ct("cast_transpose amax start 50 (raised)", &k, FP8_E5M2, raw, 50.0f);
    /* the maximum at every position of a 16-byte vector, in an edge tile, last */
    const int64_t at[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 136 + 9, 70 * 136 + 130, 96 * 136 - 1};
    for (size_t p = 0; p < sizeof at / sizeof at[0]; p++) {
      char what[96];
      snprintf(what, sizeof what, "cast_transpose %s amax at element %lld", fp8_dtype_name(k.d),
               (long long)at[p]);
      unsigned char keep[4];
      memcpy(keep, raw + at[p] * fp8_dtype_size(k.d), fp8_dtype_size(k.d));
      put_bits(raw, k.d, at[p], to_dtype(-500.0f, k.d));
      run_ct(what, &k, FP8_E4M3, raw, 0.0f);
      memcpy(raw + at[p] * fp8_dtype_size(k.d), keep, fp8_dtype_size(k.d));
    }
    for (int64_t i = 0; i < 96 * 136; i++) /* all NaN, both signs, any payload */
      put_bits(raw, k.d, i, k.d == FP8_DTYPE_F32 ? 0x7F800001u | (uint32_t)(rnd() & 0x803FFFFFu)
                                                 : (k.d == FP8_DTYPE_BF16 ? 0x7F81u : 0x7C01u) |
                                                       (uint32_t)(rnd() & 0x803Fu));
    run_ct("cast_transpose all NaN (amax 0)", &k, FP8_E4M3, raw, 0.0f);
    free(raw);
  }
}

/* Two calls into one amax, on different tensors: the max of both. */
static void test_cast_transpose_accumulates(void) {
  const int64_t R = 64, C = 128, n = R * C;
  float *h = malloc(n * sizeof *h), *dx = dalloc(2 * n * sizeof *h), *dsc = dalloc(8);
  uint8_t *dc = dalloc(n);
  GH_REQUIRE(h && dx && dsc && dc, "out of memory");
  float big = 0.0f, sc[2] = {2.0f, 0.0f};
  for (int t = 0; t < 2; t++) {
    for (int64_t i = 0; i < n; i++) h[i] = (float)(rnd01() - 0.5) * (t ? 10.0f : 1000.0f);
    big = fmaxf(big, fp8_amax_f32(h, (size_t)n));
    GH_REQUIRE(h2d(dx + t * n, h, n * sizeof *h), "copy failed");
  }
  GH_REQUIRE(h2d(dsc, sc, sizeof sc), "copy failed");
  for (int t = 0; t < 2; t++)
    GH_REQUIRE(fp8k_tl_cast_transpose(g_stream, dx + t * n, FP8_DTYPE_F32, R, C, dsc, FP8_E4M3,
                                      dc, NULL, NULL, dsc + 1, g_err, sizeof g_err) == 0,
               "call %d: %s", t, g_err);
  GH_REQUIRE(d2h(sc, dsc, sizeof sc), "copy back failed");
  GH_CHECK(f2u(sc[1]) == f2u(big), "amax over two calls: expected %.9g, got %.9g", (double)big,
           (double)sc[1]);
  free(h), cudaFree(dx), cudaFree(dsc), cudaFree(dc);
}

int main(void) {
  char why[256] = "";
  if (fp8k_device_count(why, sizeof why) == 0) gh_skip(why); /* "skipped: ...", exit 77 */
  if (cudaSetDevice(0) != cudaSuccess ||
      cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking) != cudaSuccess) {
    fprintf(stderr, "cannot create a stream on device 0\n");
    return 1;
  }
  GH_RUN(test_cast_transpose_f32);
  GH_RUN(test_cast_transpose_bf16);
  GH_RUN(test_cast_transpose_f16);
  GH_RUN(test_cast_transpose_fallbacks);
  GH_RUN(test_cast_transpose_accumulates);
  timeline_state_tests(&gh_passed, &gh_failed); /* amax, scale, gather, delayed, fill, args */
  cudaStreamDestroy(g_stream);
  return gh_summary();
}
