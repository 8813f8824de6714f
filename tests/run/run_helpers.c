/* run_helpers.c: the definitions of run_helpers.h (see there). */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testutil.h"
#include "trace.h"
#include "run_helpers.h"
#include "util.h"

/* The four columns issue 13 appended to a steps.csv row (clipped, overshoot, cos_sim, warmup),
 * checked against independent values: the counts and the flag exactly, the two numbers to 1e-9
 * (they are printed with 9 digits). Returns the row cut after snr_db's block columns, so that
 * the caller compares the rest of it as before. */
char *cut_tail(char *row, long long clipped, double overshoot, double cos, int warmup) {
  ck_assert_ptr_nonnull(row);
  /* issue 29's two columns (stochastic rounding's expectation): empty outside the FP4 kinds */
  size_t len = strlen(row);
  ck_assert_msg(len >= 2 && strcmp(row + len - 2, ",,") == 0, "not empty: %s", row);
  row[len - 2] = 0;
  char *p[4];
  for (int k = 3; k >= 0; k--) {
    p[k] = strrchr(row, ',');
    ck_assert_ptr_nonnull(p[k]);
    *p[k] = 0;
  }
  ck_assert_msg(atoll(p[0] + 1) == clipped, "clipped %s, want %lld", p[0] + 1, clipped);
  double ov = strtod(p[1] + 1, NULL), cs = strtod(p[2] + 1, NULL);
  if (isinf(overshoot)) ck_assert_msg(ov == overshoot, "overshoot %s", p[1] + 1);
  else ck_assert_msg(fabs(ov - overshoot) <= 1e-9 * fmax(1.0, fabs(overshoot)), "overshoot %s, want %.12g", p[1] + 1, overshoot);
  ck_assert_msg(fabs(cs - cos) <= 1e-9, "cos_sim %s, want %.12g", p[2] + 1, cos);
  ck_assert_msg(atoi(p[3] + 1) == warmup, "warmup %s, want %d", p[3] + 1, warmup);
  return row;
}

/* sum x xhat / sqrt(sum x^2 sum xhat^2), straight from the values */
double cos_of(const float *x, const float *xh, int n) {
  double xy = 0, xx = 0, hh = 0;
  for (int i = 0; i < n; i++) {
    xy += (double)x[i] * xh[i];
    xx += (double)x[i] * x[i];
    hh += (double)xh[i] * xh[i];
  }
  return xy / sqrt(xx * hh);
}

void write_f32_step(const char *rel, const char *name, const float *x, int64_t n) {
  char err[FP8_ERRLEN];
  fp8_tensor_out t = {name, FP8_DTYPE_F32, 1, {n}, x};
  ck_assert_msg(fp8_safetensors_write(path_in(rel), &t, 1, NULL, err, sizeof err) == FP8_OK, "%s", err);
}

/* Two ranks of one tensor m.input (E4M3, max 448), snapshots at steps 0 and 3, amax.csv between:
 *          step 0 (data)     step 1 (csv)   step 2 (csv)   step 3 (data)
 *   rank 0 [1, -2]: 2        4              1              [10, 0.25]: 10
 *   rank 1 [100, 0.5]: 100   (no row)       16             [10, -1]: 10
 */
void write_two_rank_trace(void) {
  mkdir(path_in("run"), 0777);
  mkdir(path_in("run/rank_0"), 0777);
  mkdir(path_in("run/rank_1"), 0777);
  static const float a0[2] = {1.0f, -2.0f}, a3[2] = {10.0f, 0.25f};
  static const float b0[2] = {100.0f, 0.5f}, b3[2] = {10.0f, -1.0f};
  write_f32_step("run/rank_0/step_0.safetensors", "m.input", a0, 2);
  write_f32_step("run/rank_0/step_3.safetensors", "m.input", a3, 2);
  put_text("run/rank_0/amax.csv", "step,tensor,amax\n1,m.input,4\n2,m.input,1\n");
  write_f32_step("run/rank_1/step_0.safetensors", "m.input", b0, 2);
  write_f32_step("run/rank_1/step_3.safetensors", "m.input", b3, 2);
  put_text("run/rank_1/amax.csv", "step,tensor,amax\n2,m.input,16\n");
}

char *read_out(const char *rel) {
  char *s = tu_read_file(path_in(rel), NULL);
  ck_assert_msg(s != NULL, "%s missing", rel);
  return s;
}

void expect_row(const char *csv, const char *prefix) {
  char *r = find_row(csv, prefix);
  ck_assert_msg(r != NULL, "no row starting %s in\n%s", prefix, csv);
  free(r);
}

int exists(const char *rel) {
  struct stat sb;
  return lstat(path_in(rel), &sb) == 0;
}
