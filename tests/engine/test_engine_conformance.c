/* test_engine_conformance.c: every engine the build has, op by op, against the simulator
 * (src/engine/engine_check.h, the full suite: about 70 configurations, more than one launch of
 * the fused kernel, ties, subnormals, saturation, NaN and inf in F32, BF16 and F16, a tensor that
 * skips a step, a shared reduction slot, the layer GEMMs, the delayed state after each
 * end_phase; every statistic, clipped and sum_sq_hat included, and saturation on both sides of
 * the clipped midpoint). ggml's test-backend-ops in spirit.
 *
 * Built three ways (tests/engine/CMakeLists.txt, src/gpu/CMakeLists.txt):
 *   test_engine_conformance_cpu  the CPU engine with 1 and 2 threads (label cpu)
 *   test_engine_conformance_emu  also the GPU engine, its kernels on the CUDA emulator and the
 *                                host-memory CUDA / cuBLASLt / NCCL mocks (label cpu)
 *   test_engine_conformance      also the GPU engine on the real device (label gpu; exit 77
 *                                "skipped: no CUDA device" without one)
 * With FP8LAB_HAVE_NCCL the GPU engine's plan carries a world-of-one NCCL communicator, so that
 * the amax all-reduce of end_phase runs (and is counted: the test requires it to be called).
 *
 * The composite engine (engine.h, fp8_engine_composite_create) in every build: over a stand-in
 * primary (the CPU engine behind a supports() that declines a third of the configurations'
 * casts, the block kinds and a quarter of the GEMMs) against the simulator, and bit for bit
 * against the plain CPU engine, every result of every step; its fallback lists against the
 * stand-in's rules; and in the emulator and device builds over the GPU engine. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_check.h"
#include "engine_cpu.h"
#include "engine_check_internal.h" /* the check's fixture, for the bit-for-bit comparison */
#include "engine_impl.h"           /* the stand-in primary wraps the CPU engine's op table */

#ifdef FP8LAB_CONF_GPU
#include "device.h" /* before gpu_harness.h: gh_skip_without_device */
#include "engine_gpu.h" /* fp8_engine_gpu_create: the module's sources are compiled in */
#ifdef FP8LAB_HAVE_NCCL
#include "comm_nccl.h"
#endif
#endif
#include "gpu_harness.h"

static char err[1024];

static void report(const char *what, int rc, const fp8_check_report *r) {
  printf("  %s: %lld values compared, %lld mismatches, %lld (op, configuration) pairs declined, "
         "%lld layer GEMMs, %lld all-reduces, %lld statistics with clipped > 0, %lld with "
         "overflow > clipped, %.2f s\n",
         what, r->values, r->mismatches, r->declined, r->gemm_layers, r->comm_calls,
         r->clipped_cases, r->unclipped_cases, r->seconds);
  GH_CHECK(rc == FP8_OK, "%s: the check did not run to its end: %s", what, err);
  GH_CHECK(r->mismatches == 0, "%s: %lld values differ from the simulator; the first: %s", what,
           r->mismatches, r->first);
  GH_CHECK(r->values > 100000, "%s: only %lld values compared", what, r->values);
  GH_CHECK(r->gemm_layers > 0, "%s: no layer GEMM was compared", what);
  /* clipped (and sum_sq_hat) are compared with every other field; these say that the suite
   * reaches both sides of the rounding midpoint above max, so that an engine counting
   * overflow as clipped, or never clipping, fails */
  GH_CHECK(r->clipped_cases > 0, "%s: no per-tensor statistics with clipped > 0", what);
  GH_CHECK(r->unclipped_cases > 0, "%s: no per-tensor statistics with overflow > clipped", what);
}

static void test_cpu_engine(void) {
  for (int threads = 1; threads <= 2; threads++) {
    fp8_check_options o = {.full = 1, .threads = threads};
    fp8_check_report r;
    int rc = fp8_engine_check(fp8_engine_cpu_create, &o, &r, err, sizeof err);
    char what[64];
    snprintf(what, sizeof what, "cpu engine, %d thread%s", threads, threads > 1 ? "s" : "");
    report(what, rc, &r);
    GH_CHECK(r.declined == 0, "%s declined %lld ops (it must run everything)", what, r.declined);
  }
}

/* ---------------------------------------------------------------- the composite engine */

/* A check at the self-check's size (full = 0: a few thousand values, 10 configurations) */
static void report_small(const char *what, int rc, const fp8_check_report *r) {
  printf("  %s (self-check size): %lld values compared, %lld mismatches, %lld declined, "
         "%lld layer GEMMs, %.2f s\n", what, r->values, r->mismatches, r->declined,
         r->gemm_layers, r->seconds);
  GH_CHECK(rc == FP8_OK, "%s: the check did not run to its end: %s", what, err);
  GH_CHECK(r->mismatches == 0, "%s: %lld values differ from the simulator; the first: %s", what,
           r->mismatches, r->first);
  GH_CHECK(r->values > 1000 && r->gemm_layers > 0, "%s: only %lld values and %lld layer GEMMs "
           "compared", what, r->values, r->gemm_layers);
  GH_CHECK(r->declined == 0, "%s: the composite declined %lld ops (it must run everything)", what,
           r->declined);
}

/* The stand-in primary's rules: it declines the casts of every third configuration (from the
 * second on) and of the block kinds, and the GEMMs of every fourth (from the third on). */
static int stub_declines_cast(const fp8_config *cf, size_t c) {
  return c % 3 == 1 || fp8_recipe_kind_is_block(cf->kind);
}
static int stub_declines_gemm(const fp8_config *cf, size_t c) {
  return stub_declines_cast(cf, c) || c % 4 == 2;
}

/* The CPU engine made with only the configurations it casts active (so that it writes nothing
 * for the others: what the composite's CPU engine does not write stays wrong), behind a
 * supports() with the rules above. Plans borrow their arrays: the mask is static. */
static unsigned char g_stub_active[128];
static const fp8_config *g_stub_configs;
static fp8_engine_ops g_stub_ops;
static int g_stub_made;

static int stub_supports(const fp8_engine *e, fp8_engine_op op, size_t c) {
  (void)e;
  const fp8_config *cf = &g_stub_configs[c];
  return op == FP8_OP_QUANTIZE_STATS ? !stub_declines_cast(cf, c) : !stub_declines_gemm(cf, c);
}

static int stub_create(const fp8_engine_plan *plan, fp8_engine **out, char *e, size_t elen) {
  fp8_engine_plan p = *plan;
  for (size_t c = 0; c < plan->nconfigs; c++)
    g_stub_active[c] = !stub_declines_cast(&plan->configs[c], c);
  g_stub_configs = plan->configs;
  p.active = g_stub_active;
  int rc = fp8_engine_cpu_create(&p, out, e, elen);
  if (rc) return rc;
  g_stub_ops = *(*out)->ops;
  g_stub_ops.supports = stub_supports;
  (*out)->ops = &g_stub_ops;
  snprintf((*out)->name, sizeof (*out)->name, "stand-in primary");
  g_stub_made++;
  return FP8_OK;
}

static int composite_of_stub(const fp8_engine_plan *plan, fp8_engine **out, char *e,
                             size_t elen) {
  return fp8_engine_composite_create(stub_create, fp8_engine_cpu_create, plan, out, e, elen);
}

static int composite_of_cpu(const fp8_engine_plan *plan, fp8_engine **out, char *e,
                            size_t elen) {
  return fp8_engine_composite_create(NULL, fp8_engine_cpu_create, plan, out, e, elen);
}

/* The composite over the stand-in against the simulator: nothing declined, nothing differs. At
 * the self-check's size: the full fixture is test_composite_bit_identical's, against the CPU
 * engine that test_cpu_engine holds to the simulator at full size (a second full check here
 * doubled the test's time, past its timeout under ThreadSanitizer in CI). */
static void test_composite_vs_simulator(void) {
  fp8_check_options o = {.full = 0, .threads = 2};
  fp8_check_report r;
  int rc = fp8_engine_check(composite_of_stub, &o, &r, err, sizeof err);
  report_small("composite (stand-in primary + cpu engine)", rc, &r);
  rc = fp8_engine_check(composite_of_cpu, &o, &r, err, sizeof err);
  report_small("composite (cpu engine alone)", rc, &r);
}

/* One engine's results of the fixture's replay: every tensor's result (arrays prefilled with
 * 0xA5 before each step, so that an entry nobody writes shows), the codes of every per-tensor
 * configuration, the layer's GEMM errors and the delayed scales after each end_phase, in one
 * byte stream (out, *len). */
typedef struct {
  unsigned char *b;
  size_t len, cap;
} bytes;

static int put(bytes *o, const void *p, size_t n) {
  if (o->len + n > o->cap) {
    size_t cap = (o->len + n) * 2;
    unsigned char *nb = realloc(o->b, cap);
    if (!nb) return FP8_ENOMEM;
    o->b = nb;
    o->cap = cap;
  }
  memcpy(o->b + o->len, p, n);
  o->len += n;
  return FP8_OK;
}

static int replay_bytes(fp8_engine_factory make, const chk_fixture *f, bytes *o, char *e,
                        size_t elen) {
  const size_t nc = f->nconfigs, nt = f->ntensors;
  fp8_engine_plan plan = {.ntensors = nt, .names = f->names, .roles = f->roles, .nconfigs = nc,
                          .configs = f->configs, .formats = f->formats, .red_slot = f->red_slot,
                          .nred = f->nred, .histograms = 1, .gemm_max_tokens = f->gemm_max_tokens,
                          .gemm_mixed = 1, .threads = 2};
  fp8_engine *eng = NULL;
  fp8_tensor_result res[CHK_TENSORS];
  fp8_tensor_view view[CHK_TENSORS];
  void *data[CHK_TENSORS] = {0};
  float amax[CHK_TENSORS], *scale = malloc((nc + 1) * sizeof *scale);
  /* the GEMM requests: every configuration's own, then a mixed one per configuration c (input
   * c, weight c + 1, grad_output c + 2: the composite's CPU engine runs it) */
  double *rel = malloc((2 * 3 * nc + 1) * sizeof *rel);
  fp8_gemm_request *req = malloc((2 * nc + 1) * sizeof *req);
  unsigned char *codes = malloc(1 << 20);
  memset(res, 0, sizeof res);
  int rc = scale && rel && req && codes ? FP8_OK : FP8_ENOMEM;
  for (size_t c = 0; c < nc && !rc; c++) {
    req[c] = (fp8_gemm_request){{c, c, c}, rel + 3 * c};
    req[nc + c] = (fp8_gemm_request){{c, (c + 1) % nc, (c + 2) % nc}, rel + 3 * (nc + c)};
  }
  for (size_t t = 0; t < nt && !rc; t++) {
    res[t].stats = malloc(nc * sizeof *res[t].stats);
    res[t].scale = malloc(nc * sizeof *res[t].scale);
    res[t].block = malloc(nc * sizeof *res[t].block);
    if (!res[t].stats || !res[t].scale || !res[t].block) rc = FP8_ENOMEM;
  }
  if (!rc) rc = make(&plan, &eng, e, elen);
  for (int s = 0; s < f->nsteps && !rc; s++) {
    rc = fp8_engine_begin_step(eng, s, e, elen);
    for (size_t t = 0; t < nt && !rc; t++) {
      free(data[t]);
      amax[t] = 0.0f;
      if ((rc = chk_fixture_data(f, t, s, &data[t])) != FP8_OK || !data[t]) continue;
      view[t] = (fp8_tensor_view){.name = (char *)f->names[t], .dtype = f->dtype[t],
                                  .ndim = f->ndim[t], .numel = f->numel[t], .data = data[t]};
      view[t].shape[0] = f->shape[t][0];
      view[t].shape[1] = f->shape[t][1];
      memset(&res[t].amax, 0xA5, sizeof res[t].amax);
      memset(res[t].hist, 0xA5, sizeof res[t].hist);
      memset(res[t].stats, 0xA5, nc * sizeof *res[t].stats);
      memset(res[t].scale, 0xA5, nc * sizeof *res[t].scale);
      memset(res[t].block, 0xA5, nc * sizeof *res[t].block);
      rc = fp8_engine_load(eng, t, &view[t], e, elen);
      if (!rc) rc = fp8_engine_quantize_stats(eng, t, &res[t], e, elen);
    }
    if (!rc) rc = fp8_engine_sync(eng, e, elen);
    for (size_t t = 0; t < nt && !rc; t++) {
      if (!data[t]) continue;
      amax[t] = res[t].amax;
      rc = put(o, &res[t].amax, sizeof res[t].amax);
      if (!rc) rc = put(o, res[t].hist, sizeof res[t].hist);
      if (!rc) rc = put(o, res[t].stats, nc * sizeof *res[t].stats);
      if (!rc) rc = put(o, res[t].scale, nc * sizeof *res[t].scale);
      if (!rc) rc = put(o, res[t].block, nc * sizeof *res[t].block);
      for (size_t c = 0; c < nc && !rc; c++) {
        if (fp8_recipe_kind_is_block(f->configs[c].kind)) continue;
        if ((size_t)f->numel[t] > (1 << 20)) rc = FP8_EINVAL;
        if (!rc) rc = fp8_engine_cast(eng, t, c, codes, e, elen);
        if (!rc) rc = put(o, codes, (size_t)f->numel[t]);
      }
    }
    if (!rc && data[CHK_LAYER_X] && data[CHK_LAYER_W] && data[CHK_LAYER_G]) {
      fp8_engine_layer l = {.name = "l0", .tensor = {CHK_LAYER_X, CHK_LAYER_W, CHK_LAYER_G},
                            .tokens = f->shape[CHK_LAYER_X][0], .in = f->shape[CHK_LAYER_X][1],
                            .out = f->shape[CHK_LAYER_W][0],
                            .scale = {res[CHK_LAYER_X].scale, res[CHK_LAYER_W].scale,
                                      res[CHK_LAYER_G].scale}};
      memset(rel, 0xA5, 2 * 3 * nc * sizeof *rel);
      rc = fp8_engine_gemm(eng, &l, req, 2 * nc, e, elen);
      if (!rc) rc = fp8_engine_sync(eng, e, elen);
      if (!rc) rc = put(o, rel, 2 * 3 * nc * sizeof *rel);
    }
    static const unsigned phase[2] = {FP8_FWD, FP8_BWD};
    for (int p = 0; p < 2 && !rc; p++) {
      rc = fp8_engine_end_phase(eng, phase[p], amax, e, elen);
      for (size_t t = 0; t < nt && !rc; t++) {
        memset(scale, 0xA5, nc * sizeof *scale);
        rc = fp8_engine_state(eng, t, scale, e, elen);
        if (!rc) rc = put(o, scale, nc * sizeof *scale);
      }
    }
  }
  fp8_engine_free(eng);
  for (size_t t = 0; t < nt; t++) {
    free(data[t]);
    free(res[t].stats);
    free(res[t].scale);
    free(res[t].block);
  }
  free(scale);
  free(rel);
  free(req);
  free(codes);
  return rc;
}

/* The composite over the stand-in gives the plain CPU engine's bytes, every one; its fallback
 * lists are the stand-in's rules; over the CPU engine alone it falls back on nothing. */
static void test_composite_bit_identical(void) {
  chk_fixture f;
  GH_REQUIRE(chk_fixture_init(&f, 1) == FP8_OK, "fixture: out of memory");
  bytes want = {0}, got = {0};
  int rc = replay_bytes(fp8_engine_cpu_create, &f, &want, err, sizeof err);
  GH_CHECK(rc == FP8_OK, "cpu engine: %s", err);
  g_stub_made = 0;
  rc = replay_bytes(composite_of_stub, &f, &got, err, sizeof err);
  GH_CHECK(rc == FP8_OK, "composite: %s", err);
  GH_CHECK(g_stub_made == 1, "the stand-in primary was made %d times, expected once", g_stub_made);
  GH_CHECK(want.len > 1000000 && got.len == want.len, "%zu bytes from the composite, %zu from "
           "the cpu engine (expected equal, over 10^6)", got.len, want.len);
  size_t first = 0;
  while (first < want.len && first < got.len && want.b[first] == got.b[first]) first++;
  GH_CHECK(first == want.len, "the composite's bytes differ from the cpu engine's from byte %zu "
           "of %zu", first, want.len);
  printf("  composite vs cpu engine: %zu bytes of results, casts, GEMM errors and states, "
         "identical\n", first);
  free(want.b);
  free(got.b);

  /* the fallback lists: the stand-in's rules, configuration by configuration */
  fp8_engine_plan plan = {.ntensors = f.ntensors, .names = f.names, .roles = f.roles,
                          .nconfigs = f.nconfigs, .configs = f.configs, .formats = f.formats,
                          .histograms = 1, .threads = 1};
  fp8_engine *e = NULL;
  rc = fp8_engine_composite_create(stub_create, fp8_engine_cpu_create, &plan, &e, err,
                                   sizeof err);
  GH_REQUIRE(rc == FP8_OK, "composite: %s", err);
  GH_CHECK(strcmp(fp8_engine_name(e), "stand-in primary") == 0, "name '%s', expected the "
           "primary's", fp8_engine_name(e));
  size_t nq = 0, ng = 0, bad = 0;
  for (size_t c = 0; c < f.nconfigs; c++) {
    int q = fp8_engine_falls_back(e, FP8_OP_QUANTIZE_STATS, c);
    int g = fp8_engine_falls_back(e, FP8_OP_GEMM, c);
    bad += q != stub_declines_cast(&f.configs[c], c) || g != stub_declines_gemm(&f.configs[c], c);
    bad += !fp8_engine_supports(e, FP8_OP_QUANTIZE_STATS, c) || !fp8_engine_supports(e, FP8_OP_GEMM, c);
    nq += q;
    ng += g;
  }
  GH_CHECK(bad == 0, "%zu configurations with a fallback or supports() other than the rules", bad);
  /* the full fixture: 5 block kinds; (c % 3 == 1) among the per-tensor ones */
  size_t want_q = 0, want_g = 0;
  for (size_t c = 0; c < f.nconfigs; c++) {
    int blk = fp8_recipe_kind_is_block(f.configs[c].kind);
    want_q += blk || c % 3 == 1;
    want_g += blk || c % 3 == 1 || c % 4 == 2;
  }
  GH_CHECK(nq == want_q && ng == want_g && nq > 5 && ng > nq, "falls back: %zu casts and %zu "
           "GEMMs, expected %zu and %zu", nq, ng, want_q, want_g);
  printf("  composite over the stand-in: %zu of %zu configurations' casts and %zu GEMMs on the "
         "cpu engine\n", nq, f.nconfigs, ng);
  fp8_engine_free(e);
  rc = fp8_engine_composite_create(NULL, fp8_engine_cpu_create, &plan, &e, err, sizeof err);
  GH_REQUIRE(rc == FP8_OK, "composite: %s", err);
  GH_CHECK(strcmp(fp8_engine_name(e), "cpu") == 0, "name '%s', expected 'cpu'", fp8_engine_name(e));
  for (size_t c = 0; c < f.nconfigs; c++)
    GH_CHECK(!fp8_engine_falls_back(e, FP8_OP_QUANTIZE_STATS, c) &&
             !fp8_engine_falls_back(e, FP8_OP_GEMM, c),
             "the composite of the cpu engine alone falls back for configuration %zu", c);
  fp8_engine_free(e);
  e = NULL;
  GH_CHECK(fp8_engine_cpu_create(&plan, &e, err, sizeof err) == FP8_OK, "%s", err);
  GH_CHECK(e && !fp8_engine_falls_back(e, FP8_OP_GEMM, 0), "a plain engine falls back");
  fp8_engine_free(e);
  chk_fixture_free(&f);
}

#ifdef FP8LAB_CONF_GPU
#ifdef FP8LAB_HAVE_NCCL
static int nccl_allreduce(void *ctx, float *buf, size_t count, char *e, size_t elen) {
  float *bufs[1] = {buf};
  return fp8_comm_allreduce_max(ctx, bufs, count, e, elen);
}
#endif

static void test_gpu_engine(void) {
  fp8_check_options o = {.full = 1, .threads = 1};
  fp8_engine_comm comm = {0};
#ifdef FP8LAB_HAVE_NCCL
  fp8_comm *c = NULL;
  int crc = fp8_comm_init_local(&c, 1, NULL, err, sizeof err);
  GH_REQUIRE(crc == FP8_OK, "NCCL world of 1: %s", err);
  comm = (fp8_engine_comm){nccl_allreduce, c, "nccl (world 1)"};
  o.comm = &comm;
#endif
  fp8_check_report r;
  int rc = fp8_engine_check(fp8_engine_gpu_create, &o, &r, err, sizeof err);
  report(o.comm ? "gpu engine, NCCL world of 1" : "gpu engine", rc, &r);
  /* the GPU declines the block kinds (5 configurations) and the GEMMs of format = e5m2 */
  GH_CHECK(r.declined > 0, "the GPU engine declined nothing, but it has no block kinds");
#ifdef FP8LAB_HAVE_NCCL
  GH_CHECK(r.comm_calls == 2 * 2 * 6, "end_phase called the NCCL all-reduce %lld times, expected "
           "24 (two phases x six steps x the passes with and without reduction slots)", r.comm_calls);
  fp8_comm_free(c);
#endif
  (void)comm;
}

/* The composite over the GPU engine: the block kinds and the GEMMs without a cuBLASLt kernel
 * on its CPU engine, nothing declined, nothing different from the simulator; its fallback lists
 * are exactly what the GPU engine declines. */
static int composite_of_gpu(const fp8_engine_plan *plan, fp8_engine **out, char *e,
                            size_t elen) {
  return fp8_engine_composite_create(fp8_engine_gpu_create, fp8_engine_cpu_create, plan, out, e,
                                     elen);
}

static void test_composite_gpu(void) {
#ifdef FP8LAB_CONF_EMU
  /* the emulator runs the GPU engine at full size in test_gpu_engine; here the composite's
   * forwarding over it, at the self-check's size (the emulator is slow under the sanitizers) */
  fp8_check_options o = {.full = 0, .threads = 2};
#else
  fp8_check_options o = {.full = 1, .threads = 2};
#endif
  fp8_check_report r;
  int rc = fp8_engine_check(composite_of_gpu, &o, &r, err, sizeof err);
  if (o.full) {
    report("composite (gpu engine + cpu engine)", rc, &r);
    GH_CHECK(r.declined == 0, "the composite declined %lld ops (it must run everything)",
             r.declined);
  } else {
    report_small("composite (gpu engine + cpu engine)", rc, &r);
  }
  chk_fixture f;
  GH_REQUIRE(chk_fixture_init(&f, 1) == FP8_OK, "fixture: out of memory");
  fp8_engine_plan plan = {.ntensors = f.ntensors, .names = f.names, .roles = f.roles,
                          .nconfigs = f.nconfigs, .configs = f.configs, .formats = f.formats,
                          .histograms = 1, .threads = 1};
  fp8_engine *gpu = NULL, *e = NULL;
  rc = fp8_engine_gpu_create(&plan, &gpu, err, sizeof err);
  if (!rc)
    rc = fp8_engine_composite_create(fp8_engine_gpu_create, fp8_engine_cpu_create, &plan, &e, err,
                                     sizeof err);
  GH_CHECK(rc == FP8_OK, "%s", err);
  size_t bad = 0, nq = 0, ng = 0;
  for (size_t c = 0; c < f.nconfigs && !rc; c++) {
    int q = !fp8_engine_supports(gpu, FP8_OP_QUANTIZE_STATS, c);
    int g = q || !fp8_engine_supports(gpu, FP8_OP_GEMM, c);
    /* the GPU engine's own rule: FP8 block kinds declined, FP4 casts emulated, FP4 GEMMs
     * declined (engine_gpu.c) */
    fp8_recipe_kind kd = f.configs[c].kind;
    bad += q != (fp8_recipe_kind_is_block(kd) && !fp8_recipe_kind_is_fp4(kd));
    bad += fp8_recipe_kind_is_fp4(kd) && !g;
    bad += fp8_engine_falls_back(e, FP8_OP_QUANTIZE_STATS, c) != q;
    bad += fp8_engine_falls_back(e, FP8_OP_GEMM, c) != g;
    nq += q;
    ng += g;
  }
  GH_CHECK(bad == 0 && nq == 5 && ng > nq + 4, "%zu mismatched fallbacks; %zu casts (expected "
           "the 5 FP8 block configurations) and %zu GEMMs (expected those, the 4 FP4 ones and "
           "format = e5m2's) on the cpu engine", bad, nq, ng);
  GH_CHECK(e && gpu && strcmp(fp8_engine_name(e), fp8_engine_name(gpu)) == 0,
           "the composite is not named as its primary");
  fp8_engine_free(e);
  fp8_engine_free(gpu);
  chk_fixture_free(&f);
}

/* The self-check's size without a communicator: end_phase's path for one process. */
static void test_gpu_engine_no_comm(void) {
  fp8_check_options o = {.full = 0, .threads = 1};
  fp8_check_report r;
  int rc = fp8_engine_check(fp8_engine_gpu_create, &o, &r, err, sizeof err);
  printf("  gpu engine, no communicator (the self-check): %lld values, %lld mismatches, %.2f s\n",
         r.values, r.mismatches, r.seconds);
  GH_CHECK(rc == FP8_OK, "the check did not run to its end: %s", err);
  GH_CHECK(r.mismatches == 0, "%lld values differ from the simulator; the first: %s",
           r.mismatches, r.first);
  GH_CHECK(r.values > 10000 && r.gemm_layers > 0, "%lld values, %lld GEMM layers compared",
           r.values, r.gemm_layers);
}
#endif

int main(void) {
#if defined(FP8LAB_CONF_GPU) && !defined(FP8LAB_CONF_EMU)
  gh_skip_without_device();
#endif
  GH_RUN(test_cpu_engine);
  GH_RUN(test_composite_vs_simulator);
  GH_RUN(test_composite_bit_identical);
#ifdef FP8LAB_CONF_GPU
  GH_RUN(test_gpu_engine);
  GH_RUN(test_gpu_engine_no_comm);
  GH_RUN(test_composite_gpu);
#endif
  return gh_summary();
}
