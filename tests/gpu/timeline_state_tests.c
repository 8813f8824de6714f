/* timeline_state_tests.c: part of test_gpu_timeline_kernels (see test_gpu_timeline_kernels.c for
 * the whole list): fp8k_tl_amax, fp8k_tl_current_scale, fp8k_tl_amax_gather,
 * fp8k_delayed_update_indexed_async (and the context's fp8k_delayed_update_indexed), fp8k_tl_fill
 * and the argument errors, against the simulator, on g_stream; main runs them through
 * timeline_state_tests. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "timeline_test.h"

/* ------------------------------------------------------------------ amax */

static void test_amax(void) {
  const int64_t sizes[] = {0, 1, 7, 16, 17, 4097, (1 << 16) + 3};
  const int offs[] = {0, 1, 3, 5};
  for (int d = 0; d < 3; d++)
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
      for (size_t oi = 0; oi < sizeof offs / sizeof offs[0]; oi++)
        for (int kind = 0; kind < 3; kind++) { /* random with specials, no inf, all NaN */
          const int64_t n = sizes[si];
          const size_t es = fp8_dtype_size((fp8_dtype)d);
          unsigned char *raw = malloc((size_t)n * es + 1), *dx = dalloc((size_t)(n + 8) * es);
          float *x = malloc((size_t)n * sizeof *x + 4), *da = dalloc(4), got = 12345.0f;
          GH_REQUIRE(raw && dx && x && da, "out of memory");
          for (int64_t i = 0; i < n; i++) {
            uint32_t b = gen_bits((fp8_dtype)d, 1.0f);
            if (kind == 1 && isinf(widen(b, (fp8_dtype)d))) b = 0;
            if (kind == 2) b = d == FP8_DTYPE_F32 ? 0xFFC00000u : d == FP8_DTYPE_BF16 ? 0x7FC0u : 0xFE00u;
            put_bits(raw, (fp8_dtype)d, i, b);
          }
          fp8_dtype_to_f32((fp8_dtype)d, raw, (size_t)n, x);
          const float exp = fp8_amax_f32(x, (size_t)n);
          GH_REQUIRE(h2d(dx + offs[oi] * es, raw, (size_t)n * es) && h2d(da, &got, 4), "copy failed");
          int rc = fp8k_tl_amax(g_stream, dx + offs[oi] * es, d, n, da, g_err, sizeof g_err);
          GH_REQUIRE(rc == 0, "fp8k_tl_amax: %s", g_err);
          GH_REQUIRE(d2h(&got, da, 4), "copy back failed");
          GH_CHECK(f2u(got) == f2u(exp), "amax %s n %lld offset %d kind %d: expected %.9g "
                   "(0x%08x), got %.9g (0x%08x)", fp8_dtype_name((fp8_dtype)d), (long long)n,
                   offs[oi], kind, (double)exp, f2u(exp), (double)got, f2u(got));
          free(raw), free(x), cudaFree(dx), cudaFree(da);
        }
}

/* ------------------------------------------------------------------ current scale, gather */

static void test_current_scale(void) {
  const float amaxes[] = {0.0f, NAN, INFINITY, 1e-45f, 1e-40f, 5e-4f, 1e-3f, 3.3f, 448.0f,
                          57344.0f, 3e38f, FLT_MAX};
  const float eps[] = {0.0f, 1e-3f};
  const int margins[] = {-1, 0, 3};
  float *d = dalloc(2 * sizeof(float));
  GH_REQUIRE(d, "out of memory");
  for (size_t a = 0; a < sizeof amaxes / sizeof amaxes[0]; a++)
    for (int e = 0; e < 2; e++)
      for (int pow2 = 0; pow2 < 2; pow2++)
        for (int m = 0; m < 3; m++)
          for (int f = 0; f < 2; f++) {
            fp8k_current_params p = {eps[e], pow2, margins[m], f};
            fp8_current_params cp = {eps[e], pow2 != 0, margins[m], (fp8_format)f};
            const float exp = fp8_current_scale(&cp, amaxes[a]);
            float got = -1.0f;
            GH_REQUIRE(h2d(d, &amaxes[a], 4) && h2d(d + 1, &got, 4), "copy failed");
            GH_REQUIRE(fp8k_tl_current_scale(g_stream, d, &p, d + 1, g_err, sizeof g_err) == 0,
                       "fp8k_tl_current_scale: %s", g_err);
            GH_REQUIRE(d2h(&got, d + 1, 4), "copy back failed");
            GH_CHECK(f2u(got) == f2u(exp), "current scale, amax %.9g eps %g pow2 %d margin %d "
                     "%s: expected %.9g (0x%08x), got %.9g (0x%08x)", (double)amaxes[a],
                     (double)eps[e], pow2, margins[m], fp8_format_name((fp8_format)f),
                     (double)exp, f2u(exp), (double)got, f2u(got));
          }
  cudaFree(d);
}

static void test_amax_gather(void) {
  enum { M = 700, N = 300 };
  float h[M], ref[M], dst[N], got[M];
  int32_t idx[M];
  for (int i = 0; i < M; i++) {
    h[i] = i % 17 == 0 ? NAN : i % 23 == 0 ? INFINITY : (float)rnd01() * 100.0f;
    idx[i] = i;
  }
  for (int i = M - 1; i > 0; i--) { /* a random permutation: distinct indices */
    int j = (int)(rnd() % (uint64_t)(i + 1)), t = idx[i];
    idx[i] = idx[j], idx[j] = t;
  }
  float *da = dalloc(sizeof h), *dd = dalloc(sizeof dst);
  int32_t *di = dalloc(sizeof idx);
  GH_REQUIRE(da && dd && di && h2d(da, h, sizeof h) && h2d(di, idx, sizeof idx) &&
             dset(dd, 0xEE, sizeof dst), "setup failed");
  GH_REQUIRE(fp8k_tl_amax_gather(g_stream, da, di, 0, dd, g_err, sizeof g_err) == 0 &&
             fp8k_tl_amax_gather(g_stream, NULL, NULL, 0, NULL, g_err, sizeof g_err) == 0,
             "n = 0: %s", g_err);
  GH_REQUIRE(d2h(got, da, sizeof got) && d2h(dst, dd, sizeof dst), "copy back failed");
  GH_CHECK(memcmp(got, h, sizeof h) == 0 && all_bytes((uint8_t *)dst, sizeof dst, 0xEE),
           "n = 0 changed memory");
  GH_REQUIRE(fp8k_tl_amax_gather(g_stream, da, di, N, dd, g_err, sizeof g_err) == 0, "%s", g_err);
  GH_REQUIRE(d2h(got, da, sizeof got) && d2h(dst, dd, sizeof dst), "copy back failed");
  memcpy(ref, h, sizeof h);
  for (int i = 0; i < N; i++) ref[idx[i]] = 0.0f;
  for (int i = 0; i < N; i++)
    if (f2u(dst[i]) != f2u(h[idx[i]])) {
      GH_CHECK(0, "gather: dst[%d] (amax[%d]) expected %.9g, got %.9g", i, (int)idx[i],
               (double)h[idx[i]], (double)dst[i]);
      break;
    }
  for (int i = 0; i < M; i++)
    if (f2u(got[i]) != f2u(ref[i])) {
      GH_CHECK(0, "gather: amax[%d] expected %.9g (%s), got %.9g", i, (double)ref[i],
               ref[i] == 0.0f ? "gathered: reset" : "not gathered: untouched", (double)got[i]);
      break;
    }
  cudaFree(da), cudaFree(dd), cudaFree(di);
}

/* ------------------------------------------------------------------ delayed update */

static float random_amax(void) {
  double u = rnd01();
  if (u < 0.12) return 0.0f;
  if (u < 0.14) return INFINITY;
  if (u < 0.16) return NAN;
  if (u < 0.18) return 1e-45f * (float)(1 + rnd() % 100);
  if (u < 0.20) return FLT_MAX * (float)rnd01();
  return (float)exp(-30.0 + 60.0 * rnd01());
}

/* Device copies of the state of test_delayed_update_async. */
typedef struct {
  float *ring, *scale, *amax, *smax, *used;
  int64_t *off;
  int32_t *head, *index, *len, *comp;
} dstate;

static void test_delayed_update_async(void) {
  enum { NS = 30, M = 40, STEPS = 240 };
  const int32_t Ls[] = {1, 2, 3, 16, 70};
  fp8_delayed_state cpu[NS];
  int64_t off[NS], total = 0;
  int32_t len[NS], comp[NS], idx[NS], head[NS];
  float smax[NS], scale[NS], used[NS], amax[M], *ring, hc[70], hg[70];
  for (int s = 0; s < NS; s++) {
    fp8_delayed_params p = {Ls[s % 5], s % 5 - 2, s % 2 ? FP8_AMAX_MOST_RECENT : FP8_AMAX_MAX,
                            (s / 2) % 2 ? FP8_E5M2 : FP8_E4M3, 0};
    GH_REQUIRE(fp8_delayed_init(&cpu[s], &p) == FP8_OK, "fp8_delayed_init");
    off[s] = total, total += p.history_len, len[s] = p.history_len, comp[s] = p.amax_compute;
    smax[s] = fp8_scaled_max(p.format, p.margin), scale[s] = 1.0f, head[s] = 0;
  }
  fp8k_ctx *ctx = NULL;
  dstate D;
  ring = calloc((size_t)total, sizeof *ring);
  D.ring = dalloc(total * 4), D.scale = dalloc(NS * 4), D.amax = dalloc(M * 4);
  D.smax = dalloc(NS * 4), D.used = dalloc(NS * 4), D.off = dalloc(NS * 8);
  D.head = dalloc(NS * 4), D.index = dalloc(NS * 4), D.len = dalloc(NS * 4), D.comp = dalloc(NS * 4);
  GH_REQUIRE(ring && D.ring && D.scale && D.amax && D.smax && D.used && D.off && D.head &&
             D.index && D.len && D.comp && h2d(D.ring, ring, total * 4) &&
             h2d(D.scale, scale, sizeof scale) && h2d(D.smax, smax, sizeof smax) &&
             h2d(D.off, off, sizeof off) && h2d(D.head, head, sizeof head) &&
             h2d(D.len, len, sizeof len) && h2d(D.comp, comp, sizeof comp),
             "setup failed");
  GH_REQUIRE(fp8k_ctx_create(&ctx, 0, g_err, sizeof g_err) == 0, "fp8k_ctx_create: %s", g_err);
  for (int step = 0; step < STEPS; step++) {
    for (int i = 0; i < M; i++) amax[i] = random_amax();
    for (int s = 0; s < NS; s++) idx[s] = rnd01() < 0.2 ? -1 : (int32_t)((s * 7 + step) % M);
    GH_REQUIRE(h2d(D.amax, amax, sizeof amax) && h2d(D.index, idx, sizeof idx), "copy failed");
    int rc;
    if (step % 3 == 2) { /* the context's entry point: the same kernel on its stream */
      rc = fp8k_delayed_update_indexed(ctx, NS, D.ring, D.off, D.head, D.scale, D.amax, D.index,
                                       D.len, D.comp, D.smax, D.used, g_err, sizeof g_err);
      if (rc == 0 && cudaStreamSynchronize(fp8k_ctx_stream(ctx)) != cudaSuccess) rc = -1;
    } else {
      rc = fp8k_delayed_update_indexed_async(g_stream, NS, D.ring, D.off, D.head, D.scale, D.amax,
                                             D.index, D.len, D.comp, D.smax, D.used, g_err,
                                             sizeof g_err);
    }
    GH_REQUIRE(rc == 0, "step %d: %s", step, g_err);
    GH_REQUIRE(d2h(ring, D.ring, total * 4) && d2h(head, D.head, sizeof head) &&
               d2h(scale, D.scale, sizeof scale) && d2h(used, D.used, sizeof used),
               "copy back failed");
    for (int s = 0; s < NS; s++) {
      const float last = idx[s] < 0 ? 0.0f : amax[idx[s]], a = fp8_delayed_update(&cpu[s], last);
      GH_REQUIRE(f2u(cpu[s].scale) == f2u(scale[s]), "step %d slot %d (L %d, index %d, last "
                 "%.9g): scale expected %.9g, got %.9g", step, s, (int)len[s], (int)idx[s],
                 (double)last, (double)cpu[s].scale, (double)scale[s]);
      GH_REQUIRE(f2u(a) == f2u(used[s]) || (isnan(a) && isnan(used[s])),
                 "step %d slot %d: amax used expected %.9g, got %.9g", step, s, (double)a,
                 (double)used[s]);
      GH_REQUIRE(cpu[s].head == head[s], "step %d slot %d: head expected %d, got %d", step, s,
                 (int)cpu[s].head, (int)head[s]);
      fp8_delayed_state view = cpu[s];
      view.ring = ring + off[s], view.head = head[s];
      fp8_delayed_history(&cpu[s], hc);
      fp8_delayed_history(&view, hg);
      for (int i = 0; i < len[s]; i++)
        GH_REQUIRE(f2u(hc[i]) == f2u(hg[i]) || (isnan(hc[i]) && isnan(hg[i])),
                   "step %d slot %d: history[%d] expected %.9g, got %.9g", step, s, i,
                   (double)hc[i], (double)hg[i]);
    }
  }
  GH_CHECK(fp8k_delayed_update_indexed_async(g_stream, 0, NULL, NULL, NULL, NULL, NULL, NULL,
                                             NULL, NULL, NULL, NULL, g_err, sizeof g_err) == 0,
           "nslots 0: %s", g_err);
  for (int s = 0; s < NS; s++) fp8_delayed_free(&cpu[s]);
  fp8k_ctx_destroy(ctx);
  free(ring);
  cudaFree(D.ring), cudaFree(D.scale), cudaFree(D.amax), cudaFree(D.smax), cudaFree(D.used);
  cudaFree(D.off), cudaFree(D.head), cudaFree(D.index), cudaFree(D.len), cudaFree(D.comp);
}

/* ------------------------------------------------------------------ fill, arguments */

/* The host's replica of fp8k_tl_fill's value (fp8k.h). */
static uint32_t fill_bits(fp8_dtype d, uint64_t seed, int64_t i, float scale) {
  const uint64_t base = mix64(seed + 0x9E3779B97F4A7C15ull);
  const uint64_t z = mix64(base + (uint64_t)(i + 1) * 0x9E3779B97F4A7C15ull);
  const float v = (float)((int32_t)(z >> 40) - (1 << 23)) * 0x1p-23f;
  return to_dtype(v * scale, d);
}

static void test_fill(void) {
  enum { N = 10007 };
  const float scales[] = {3.5f, 1e-3f, 0.37f};
  for (int d = 0; d < 3; d++)
    for (int si = 0; si < 3; si++) {
      const size_t es = fp8_dtype_size((fp8_dtype)d), nb = (N + 2) * es;
      unsigned char *a = malloc(nb), *b = malloc(nb), *dx = dalloc(nb), *dy = dalloc(nb);
      GH_REQUIRE(a && b && dx && dy && dset(dx, 0xEE, nb) && dset(dy, 0xEE, nb), "setup failed");
      const float lim = widen(to_dtype(scales[si], (fp8_dtype)d), (fp8_dtype)d);
      GH_REQUIRE(fp8k_tl_fill(g_stream, dx + es, d, N, 42, scales[si], g_err, sizeof g_err) == 0 &&
                 fp8k_tl_fill(g_stream, dy + es, d, N, 42, scales[si], g_err, sizeof g_err) == 0 &&
                 fp8k_tl_fill(g_stream, dy, d, 0, 42, scales[si], g_err, sizeof g_err) == 0,
                 "fp8k_tl_fill: %s", g_err);
      GH_REQUIRE(d2h(a, dx, nb) && d2h(b, dy, nb), "copy back failed");
      GH_CHECK(memcmp(a, b, nb) == 0, "fill %s: the same seed gave different data",
               fp8_dtype_name((fp8_dtype)d));
      GH_CHECK(all_bytes(a, es, 0xEE) && all_bytes(a + (N + 1) * es, es, 0xEE),
               "fill %s: wrote outside [0, n)", fp8_dtype_name((fp8_dtype)d));
      int64_t neg = 0, pos = 0;
      for (int64_t i = 0; i < N; i++) {
        uint32_t got = 0;
        memcpy(&got, a + (i + 1) * es, es);
        const uint32_t exp = fill_bits((fp8_dtype)d, 42, i, scales[si]);
        const float v = widen(got, (fp8_dtype)d);
        neg += v < 0, pos += v > 0;
        if (got != exp || !(fabsf(v) <= lim)) {
          GH_CHECK(0, "fill %s scale %g: x[%lld] expected 0x%x, got 0x%x (%.9g, limit %.9g)",
                   fp8_dtype_name((fp8_dtype)d), (double)scales[si], (long long)i, exp, got,
                   (double)v, (double)lim);
          break;
        }
      }
      GH_CHECK(neg > N / 3 && pos > N / 3, "fill: %lld negative, %lld positive of %d", (long long)neg,
               (long long)pos, N);
      GH_REQUIRE(fp8k_tl_fill(g_stream, dy + es, d, N, 43, scales[si], g_err, sizeof g_err) == 0 &&
                 d2h(b, dy, nb), "fill seed 43: %s", g_err);
      int64_t same = 0;
      for (int64_t i = 1; i <= N; i++) same += memcmp(a + i * es, b + i * es, es) == 0;
      GH_CHECK(same < N / 10, "fill: seeds 42 and 43 agree on %lld of %d elements", (long long)same, N);
      free(a), free(b), cudaFree(dx), cudaFree(dy);
    }
}

#define EXPECT_EINVAL(call, text)                                                            \
  do {                                                                                       \
    g_err[0] = 0;                                                                            \
    int rc_ = (call);                                                                        \
    GH_CHECK(rc_ == FP8_EINVAL && strstr(g_err, text) != NULL,                               \
             "%s: rc %d, message \"%s\" (expected FP8_EINVAL, \"%s\")", #call, rc_, g_err, text); \
  } while (0)

static void test_bad_arguments(void) {
  unsigned char *dx = dalloc(64);
  float *ds = dalloc(16);
  int32_t *di = dalloc(16);
  GH_REQUIRE(dx && ds && di, "out of memory");
  fp8k_current_params bad = {0.0f, 0, 0, 5};
  EXPECT_EINVAL(fp8k_tl_cast_transpose(g_stream, dx, 3, 2, 2, ds, 0, dx, NULL, NULL, NULL, g_err,
                                       sizeof g_err), "dtype 3");
  EXPECT_EINVAL(fp8k_tl_cast_transpose(g_stream, dx, 0, 2, 2, ds, 2, dx, NULL, NULL, NULL, g_err,
                                       sizeof g_err), "format 2");
  EXPECT_EINVAL(fp8k_tl_cast_transpose(g_stream, dx, 0, -1, 2, ds, 0, dx, NULL, NULL, NULL,
                                       g_err, sizeof g_err), "shape [-1, 2]");
  EXPECT_EINVAL(fp8k_tl_cast_transpose(g_stream, dx, 0, 2, 2, NULL, 0, dx, NULL, NULL, NULL,
                                       g_err, sizeof g_err), "scale is NULL");
  EXPECT_EINVAL(fp8k_tl_cast_transpose(g_stream, NULL, 0, 2, 2, ds, 0, dx, NULL, NULL, NULL,
                                       g_err, sizeof g_err), "must not be NULL");
  EXPECT_EINVAL(fp8k_tl_cast_transpose(g_stream, dx + 1, 1, 2, 2, ds, 0, dx, NULL, NULL, NULL,
                                       g_err, sizeof g_err), "2-byte elements");
  EXPECT_EINVAL(fp8k_tl_amax(g_stream, dx, 0, 4, NULL, g_err, sizeof g_err), "amax is NULL");
  EXPECT_EINVAL(fp8k_tl_amax(g_stream, dx + 2, 0, 4, ds, g_err, sizeof g_err), "4-byte elements");
  EXPECT_EINVAL(fp8k_tl_amax(g_stream, dx, 0, -4, ds, g_err, sizeof g_err), "n -4 < 0");
  EXPECT_EINVAL(fp8k_tl_fill(g_stream, dx, 7, 4, 1, 1.0f, g_err, sizeof g_err), "dtype 7");
  EXPECT_EINVAL(fp8k_tl_current_scale(g_stream, ds, &bad, ds + 1, g_err, sizeof g_err),
                "format 5");
  EXPECT_EINVAL(fp8k_tl_amax_gather(g_stream, ds, di, -1, ds, g_err, sizeof g_err), "n -1 < 0");
  EXPECT_EINVAL(fp8k_tl_amax_gather(g_stream, ds, NULL, 2, ds, g_err, sizeof g_err), "NULL array");
  EXPECT_EINVAL(fp8k_delayed_update_indexed_async(g_stream, -2, NULL, NULL, NULL, NULL, NULL,
                                                  NULL, NULL, NULL, NULL, NULL, g_err,
                                                  sizeof g_err), "nslots -2 < 0");
  /* an empty tensor still writes scale_inv; without scale_inv it is a no-op */
  float sc[2] = {4.0f, 0.0f};
  GH_REQUIRE(h2d(ds, sc, sizeof sc), "copy failed");
  GH_CHECK(fp8k_tl_cast_transpose(g_stream, NULL, 0, 0, 9, ds, 0, NULL, NULL, ds + 1, NULL, g_err,
                                  sizeof g_err) == 0 &&
               fp8k_tl_cast_transpose(g_stream, NULL, 0, 9, 0, ds, 0, NULL, NULL, NULL, NULL,
                                      g_err, sizeof g_err) == 0,
           "empty tensors: %s", g_err);
  GH_REQUIRE(d2h(sc, ds, sizeof sc), "copy back failed");
  GH_CHECK(sc[1] == 0.25f, "empty tensor: scale_inv %.9g, expected 0.25", (double)sc[1]);
  cudaFree(dx), cudaFree(ds), cudaFree(di);
}

/* gpu_harness.h's counters are per file (static): this file runs its tests with its own and adds
 * their totals to the caller's, so that main's gh_summary counts every check. */
void timeline_state_tests(int *passed, int *failed) {
  GH_RUN(test_amax);
  GH_RUN(test_current_scale);
  GH_RUN(test_amax_gather);
  GH_RUN(test_delayed_update_async);
  GH_RUN(test_fill);
  GH_RUN(test_bad_arguments);
  *passed += gh_passed;
  *failed += gh_failed;
}
