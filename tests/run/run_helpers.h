/* run_helpers.h: helpers shared by the tests of tests/run (definitions and comments in
 * run_helpers.c). */
#ifndef FP8LAB_TESTS_RUN_HELPERS_H
#define FP8LAB_TESTS_RUN_HELPERS_H

#include "testutil.h"
#include "tu_dir.h"

char *cut_tail(char *row, long long clipped, double overshoot, double cos, int warmup);
double cos_of(const float *x, const float *xh, int n);
void write_f32_step(const char *rel, const char *name, const float *x, int64_t n);
void write_two_rank_trace(void);
char *read_out(const char *rel);
void expect_row(const char *csv, const char *prefix);
int exists(const char *rel);

#endif
