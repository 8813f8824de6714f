/* test_threads.c: the CPU engine's worker threads through `fp8lab run --threads`: 1 and 4 workers
 * write the same files, and GEMM errors from four workers calling the BLAS at once equal the one-
 * worker gemm.csv byte for byte, five times. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tu_dir.h"
#include "tu_traces.h"

START_TEST(test_threads_same_output) {
  write_tiny_trace();
  put_text("exp.ini", TINY_INI);
  char *out;
  ck_assert_int_eq(run_cli(&out, "run exp.ini --quiet --threads 1 --out o1"), 0);
  free(out);
  ck_assert_int_eq(run_cli(&out, "run exp.ini --quiet --threads 4 --out o4"), 0);
  free(out);
  const char *a = path_in("o1/steps.csv");
  const char *b = path_in("o4/steps.csv");
  char *ca = tu_read_file(a, NULL), *cb = tu_read_file(b, NULL);
  ck_assert_str_eq(ca, cb);
  free(ca);
  free(cb);
}
END_TEST

/* GEMM errors do not depend on the worker count or on how the workers interleave: four workers
 * calling the BLAS at once, five times, give the one-worker gemm.csv byte for byte. (A CBLAS
 * that is not safe to call from several threads, such as OpenBLAS's serial build without
 * USE_LOCKING, corrupted one row in about four runs here.) */
START_TEST(test_threads_same_gemm) {
  char *out;
  ck_assert_int_eq(run_cli(&out, "synth llm trace --steps 4 --seed 3"), 0);
  free(out);
  put_text("exp.ini", "[trace]\npath = trace\n[recipe.d]\nkind = delayed\nhistory_len = 1, 4\n"
                      "format = hybrid\n[recipe.d5]\nkind = delayed\nhistory_len = 1, 4\nformat = e5m2\n"
                      "[recipe.c]\nkind = current\n[recipe.mx]\n"
                      "kind = mxfp8\n[analysis]\ngemm = true\ngemm_max_tokens = 24\n"
                      "[output]\ndir = out\n");
  ck_assert_int_eq(run_cli(&out, "run exp.ini --quiet --no-report --threads 1 --out g1"), 0);
  free(out);
  const char *a = path_in("g1/gemm.csv");
  char *ca = tu_read_file(a, NULL);
  ck_assert_ptr_nonnull(ca);
  ck_assert_msg(count_lines(ca) > 100, "only %d gemm.csv lines", count_lines(ca));
  for (int r = 0; r < 5; r++) {
    ck_assert_int_eq(run_cli(&out, "run exp.ini --quiet --no-report --threads 4 --force --out g4"), 0);
    free(out);
    const char *b = path_in("g4/gemm.csv");
    char *cb = tu_read_file(b, NULL);
    ck_assert_ptr_nonnull(cb);
    ck_assert_msg(strcmp(ca, cb) == 0, "run %d: gemm.csv with 4 workers differs from 1 worker's", r);
    free(cb);
  }
  free(ca);
}
END_TEST

TU_MAIN("threads", "cli", setup, teardown, 120, test_threads_same_output, test_threads_same_gemm)
