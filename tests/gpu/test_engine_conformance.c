/* test_engine_conformance.c: every engine the build has, op by op, against the simulator
 * (src/engine/engine_check.h, the full suite: about 70 configurations, more than one launch of
 * the fused kernel, ties, subnormals, saturation, NaN and inf in F32, BF16 and F16, a tensor that
 * skips a step, a shared reduction slot, the layer GEMMs, the delayed state after each
 * end_phase; every statistic, clipped and sum_sq_hat included, and saturation on both sides of
 * the clipped midpoint). ggml's test-backend-ops in spirit.
 *
 * Built three ways (tests/CMakeLists.txt, src/gpu/CMakeLists.txt):
 *   test_engine_conformance_cpu  the CPU engine with 1 and 2 threads (label cpu)
 *   test_engine_conformance_emu  also the GPU engine, its kernels on the CUDA emulator and the
 *                                host-memory CUDA / cuBLASLt / NCCL mocks (label cpu)
 *   test_engine_conformance      also the GPU engine on the real device (label gpu; exit 77
 *                                "skipped: no CUDA device" without one)
 * With FP8LAB_HAVE_NCCL the GPU engine's plan carries a world-of-one NCCL communicator, so that
 * the amax all-reduce of end_phase runs (and is counted: the test requires it to be called). */
#include <stdio.h>
#include <string.h>

#include "engine.h"
#include "engine_check.h"

#ifdef FP8LAB_CONF_GPU
#include "device.h" /* before gpu_harness.h: gh_skip_without_device */
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
    int rc = fp8_engine_check(fp8_engine_sim_create, &o, &r, err, sizeof err);
    char what[64];
    snprintf(what, sizeof what, "cpu engine, %d thread%s", threads, threads > 1 ? "s" : "");
    report(what, rc, &r);
    GH_CHECK(r.declined == 0, "%s declined %lld ops (it must run everything)", what, r.declined);
  }
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
#ifdef FP8LAB_CONF_GPU
  GH_RUN(test_gpu_engine);
  GH_RUN(test_gpu_engine_no_comm);
#endif
  return gh_summary();
}
