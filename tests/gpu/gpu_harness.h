/* gpu_harness.h: the tiny assertion harness of the GPU tests (label gpu). Header-only, plain
 * C11 + stdio, so the GPU tests build where libcheck is not installed (the device machine,
 * FP8LAB_GPU_ONLY=ON). A test program is a list of test functions:
 *
 *   static void test_something(void) {
 *     GH_CHECK(x == y, "x %d, expected %d", x, y);   // counts, reports, continues
 *     GH_REQUIRE(rc == 0, "%s", err);                 // counts, reports, leaves the function
 *   }
 *   int main(void) {
 *     gh_skip_without_device();                       // "skipped: no CUDA device (...)", exit 77
 *                                                     // (needs device.h; or gh_skip(reason))
 *     GH_RUN(test_something);
 *     return gh_summary();                            // "N passed, M failed"; 0 or 1
 *   }
 *
 * Failures print "FAIL file:line [test]: message" on stderr at once (the message should say
 * what was expected and what was found); each test prints one line with its counts and time.
 */
#ifndef FP8LAB_GPU_HARNESS_H
#define FP8LAB_GPU_HARNESS_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int gh_passed, gh_failed, gh_test_failed, gh_test_checks;
static const char *gh_current = "";

static inline double gh_now(void) {
  struct timespec ts;
  timespec_get(&ts, TIME_UTC);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#define GH_FAIL_MSG_(...)                                                    \
  do {                                                                       \
    gh_failed++;                                                             \
    gh_test_failed++;                                                        \
    fprintf(stderr, "FAIL %s:%d [%s]: ", __FILE__, __LINE__, gh_current);    \
    fprintf(stderr, __VA_ARGS__);                                            \
    fputc('\n', stderr);                                                     \
    fflush(stderr);                                                          \
  } while (0)

/** Counts one check; on failure prints the formatted message and carries on. */
#define GH_CHECK(cond, ...)          \
  do {                               \
    gh_test_checks++;                \
    if (cond) gh_passed++;           \
    else GH_FAIL_MSG_(__VA_ARGS__);  \
  } while (0)

/** Like GH_CHECK, but a failure ends the current test function (use inside void functions
 *  before resources are owned, or after freeing them: it returns at once). */
#define GH_REQUIRE(cond, ...)        \
  do {                               \
    gh_test_checks++;                \
    if (cond) gh_passed++;           \
    else {                           \
      GH_FAIL_MSG_(__VA_ARGS__);     \
      return;                        \
    }                                \
  } while (0)

/** Runs one test function and prints its line. */
#define GH_RUN(fn)                                                                         \
  do {                                                                                     \
    gh_current = #fn;                                                                      \
    gh_test_failed = gh_test_checks = 0;                                                   \
    double t0_ = gh_now();                                                                 \
    fn();                                                                                  \
    printf("%s %s: %d checks, %d failed (%.2f s)\n", gh_test_failed ? "FAIL" : "ok  ", #fn, \
           gh_test_checks, gh_test_failed, gh_now() - t0_);                                \
    fflush(stdout);                                                                        \
  } while (0)

/** Prints "N passed, M failed" and returns the exit code (0 when nothing failed). */
static inline int gh_summary(void) {
  printf("%d passed, %d failed\n", gh_passed, gh_failed);
  return gh_failed ? 1 : 0;
}

/** Prints "skipped: no CUDA device (why)" and exits 77, which CTest reports as skipped. */
static inline void gh_skip(const char *why) {
  printf("skipped: no CUDA device (%s)\n", why);
  fflush(stdout);
  exit(77);
}

#ifdef FP8LAB_GPU_DEVICE_H
/** With src/gpu's device.h included first: gh_skip when device 0 is not usable (the reason
 *  names a missing driver, a driver older than the runtime, or no GPU); prints the device
 *  otherwise. */
static inline void gh_skip_without_device(void) {
  char why[512] = "";
  fp8_gpu_info info;
  if (fp8_gpu_probe(0, &info, why, sizeof why) != 0) gh_skip(why);
  printf("device 0: %s, sm_%d%d, %d SMs, %.1f GiB; driver %d, runtime %d\n", info.name,
         info.cc_major, info.cc_minor, info.sm_count, (double)info.total_mem / (1 << 30),
         info.driver_version, info.runtime_version);
}
#endif

#endif
