/* test_statistics.c: the statistics of src/analysis: quantiles, runs, the scale lag and the
 * Student-t interval by hand, and the per-group statistics of steps.csv rows against values
 * derived by hand or with numpy. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "results.h" /* fp8_schema_steps */
#include "testutil.h"
#include "analysis_helpers.h"

/* ------------------------------------------------------------------ building blocks */

START_TEST(quantiles_by_hand) {
  /* {1,2,3,4,5}: GSL's quantile is linear interpolation at index f*(n-1) = f*4 */
  const double x[5] = {1, 2, 3, 4, 5};
  ck_assert_double_eq(fp8_analysis_quantile(x, 5, 0.5), 3.0);     /* index 2 */
  ck_assert_double_eq(fp8_analysis_quantile(x, 5, 0.25), 2.0);    /* index 1 */
  ck_assert_double_eq(fp8_analysis_quantile(x, 5, 0.0), 1.0);
  ck_assert_double_eq(fp8_analysis_quantile(x, 5, 1.0), 5.0);
  ck_assert_double_eq_tol(fp8_analysis_quantile(x, 5, 0.05), 1.2, 1e-15);  /* 1 + 0.2*(2-1) */
  ck_assert_double_eq_tol(fp8_analysis_quantile(x, 5, 0.975), 4.9, 1e-15); /* 4 + 0.9*(5-4) */
  ck_assert_double_eq(fp8_analysis_quantile(x, 1, 0.3), 1.0);
  ck_assert(isnan(fp8_analysis_quantile(x, 0, 0.5)));
  ck_assert(isnan(fp8_analysis_quantile(x, 5, 1.5)));
  /* a constant sample gives exactly its value at every f (no interpolation rounding) */
  const double c[4] = {0.1, 0.1, 0.1, 0.1};
  for (double f = 0; f <= 1.0; f += 0.01) ck_assert(fp8_analysis_quantile(c, 4, f) == 0.1);
}
END_TEST

START_TEST(longest_run) {
  const int64_t a[] = {0, 3, 2, 0, 5, 1, 1, 0};
  ck_assert_uint_eq(fp8_analysis_longest_run(a, 8), 3);
  ck_assert_uint_eq(fp8_analysis_longest_run(a, 3), 2);
  ck_assert_uint_eq(fp8_analysis_longest_run(a, 1), 0);
  ck_assert_uint_eq(fp8_analysis_longest_run(a, 0), 0);
  const int64_t all[] = {1, 1, 1};
  ck_assert_uint_eq(fp8_analysis_longest_run(all, 3), 3);
}
END_TEST

START_TEST(scale_lag_by_hand) {
  /* e4m3 margin 0: the just-in-time scale of amax 448 is 1, of 896 is 0.5, of 224 is 2 */
  ck_assert_double_eq(fp8_analysis_scale_lag(1.0, 448.0, FP8_E4M3, 0), 0.0);
  ck_assert_double_eq(fp8_analysis_scale_lag(1.0, 896.0, FP8_E4M3, 0), -1.0); /* too large */
  ck_assert_double_eq(fp8_analysis_scale_lag(0.5, 112.0, FP8_E4M3, 0), 3.0);  /* 4 / 0.5 */
  ck_assert_double_eq(fp8_analysis_scale_lag(0.125, 224.0, FP8_E4M3, 0), 4.0);
  /* margin 1: scaled max 224 */
  ck_assert_double_eq(fp8_analysis_scale_lag(0.5, 448.0, FP8_E4M3, 1), 0.0);
  ck_assert_double_eq(fp8_analysis_scale_lag(1.0, 448.0, FP8_E4M3, 1), -1.0);
  /* e5m2: max 57344 */
  ck_assert_double_eq(fp8_analysis_scale_lag(1.0, 57344.0, FP8_E5M2, 0), 0.0);
  ck_assert_double_eq(fp8_analysis_scale_lag(1.0, 28672.0, FP8_E5M2, 0), 1.0);
  /* no lag for amax 0, inf, nan or a bad scale */
  ck_assert(isnan(fp8_analysis_scale_lag(1.0, 0.0, FP8_E4M3, 0)));
  ck_assert(isnan(fp8_analysis_scale_lag(1.0, INFINITY, FP8_E4M3, 0)));
  ck_assert(isnan(fp8_analysis_scale_lag(1.0, NAN, FP8_E4M3, 0)));
  ck_assert(isnan(fp8_analysis_scale_lag(0.0, 1.0, FP8_E4M3, 0)));
}
END_TEST

/* Student-t interval: mean -+ t_{(1+level)/2, n-1} * s / sqrt(n), s with n - 1. The t quantiles
 * are closed forms, independent of GSL (p = 0.975): df 1 (Cauchy) tan(pi (p - 1/2)) =
 * 12.706204736174696; df 2: (2p - 1) / sqrt(2p(1 - p)) = 4.302652729749462; df 4, with
 * a = 4p(1 - p): 2 sqrt(cos(acos(sqrt(a)) / 3) / sqrt(a) - 1) = 2.7764451051977934; df 7 has
 * none: 2.364624251592801 from bisection on Simpson's rule over the t density in plain Python
 * (tables: 2.365). Means and sds by hand below. */
START_TEST(mean_ci_reference) {
  double lo, hi;
  /* {10, 14}: mean 12, s = sqrt(4 + 4) = 2.8284271247461903, half = 12.7062... * s / sqrt 2
   * = 2 * 12.706204736174696 */
  const double two[2] = {10.0, 14.0};
  ck_assert_int_eq(fp8_analysis_mean_ci(two, 2, 0.95, &lo, &hi), FP8_OK);
  ck_assert_double_eq_tol(lo, 12.0 - 25.412409472349392, 1e-9);
  ck_assert_double_eq_tol(hi, 12.0 + 25.412409472349392, 1e-9);
  /* {1, 2, 6}: mean 3, squares 4 + 1 + 9 = 14, s = sqrt 7, half = 4.3026... * sqrt(7/3)
   * = 6.572410607728428 */
  const double three[3] = {1.0, 2.0, 6.0};
  ck_assert_int_eq(fp8_analysis_mean_ci(three, 3, 0.95, &lo, &hi), FP8_OK);
  ck_assert_double_eq_tol(lo, 3.0 - 6.572410607728428, 1e-9);
  ck_assert_double_eq_tol(hi, 3.0 + 6.572410607728428, 1e-9);
  /* the SNRs of group_snr_statistics: mean 23.1875,
   * s = sqrt(sum (y - mean)^2 / 7) = 5.902163646857456,
   * half = 2.364624251592801 * s / sqrt 8 = 4.934332291655183 */
  const double y[8] = {25.1, 24.3, 26.7, 8.9, 25.5, 24.8, 23.2, 27.0};
  ck_assert_int_eq(fp8_analysis_mean_ci(y, 8, 0.95, &lo, &hi), FP8_OK);
  ck_assert_double_eq_tol(lo, 23.1875 - 4.934332291655183, 1e-9);
  ck_assert_double_eq_tol(hi, 23.1875 + 4.934332291655183, 1e-9);
  /* another level: df 1 at 90% is tan(0.45 pi) = 6.313751514675041, half = 2 * that */
  ck_assert_int_eq(fp8_analysis_mean_ci(two, 2, 0.90, &lo, &hi), FP8_OK);
  ck_assert_double_eq_tol(hi - lo, 4.0 * 6.313751514675041, 1e-9);
  /* constant data: exactly the value; one value: itself; none: nan; bad level */
  const double c[5] = {0.1, 0.1, 0.1, 0.1, 0.1};
  ck_assert_int_eq(fp8_analysis_mean_ci(c, 5, 0.95, &lo, &hi), FP8_OK);
  ck_assert(lo == 0.1 && hi == 0.1);
  ck_assert_int_eq(fp8_analysis_mean_ci(y, 1, 0.95, &lo, &hi), FP8_OK);
  ck_assert(lo == 25.1 && hi == 25.1);
  ck_assert_int_eq(fp8_analysis_mean_ci(y, 0, 0.95, &lo, &hi), FP8_OK);
  ck_assert(isnan(lo) && isnan(hi));
  ck_assert_int_eq(fp8_analysis_mean_ci(y, 8, 1.0, &lo, &hi), FP8_EINVAL);
  ck_assert_int_eq(fp8_analysis_mean_ci(y, 8, 0.0, &lo, &hi), FP8_EINVAL);
  ck_assert_int_eq(fp8_analysis_mean_ci(y, 8, NAN, &lo, &hi), FP8_EINVAL);
}
END_TEST

/* ------------------------------------------------------------------ group statistics */

static fp8_group_stats stats_of(const sbuf *b, size_t gi, fp8_steps_table *t) {
  char err[256];
  ck_assert_msg(parse(b, t, err, sizeof err) == FP8_OK, "%s", err);
  ck_assert(gi < t->ngroups);
  fp8_group_stats s;
  ck_assert_int_eq(fp8_analysis_group(t, &t->groups[gi], &s), FP8_OK);
  return s;
}

START_TEST(group_snr_statistics) {
  /* SNRs 25.1 24.3 26.7 8.9 25.5 24.8 23.2 27.0 at steps 0, 10, ..., 70. Expected values from
   * numpy 1.x: y.mean(), np.median(y), np.percentile(y, 5) (default 'linear', the same rule as
   * gsl_stats_quantile_from_sorted_data), np.polyfit(x, y, 1)[0] * 1000. p5 by hand:
   * sorted[0] + 0.35 * (sorted[1] - sorted[0]) = 8.9 + 0.35 * 14.3 = 13.905. */
  const double y[8] = {25.1, 24.3, 26.7, 8.9, 25.5, 24.8, 23.2, 27.0};
  sbuf b = with_header();
  for (int i = 0; i < 8; i++) {
    char rest[128];
    snprintf(rest, sizeof rest, "1,448,1000,0,0,0,0,0,1e-06,%.9g", y[i]);
    add_row(&b, "x.input", "input", 10L * i, C_CFG, rest);
  }
  fp8_steps_table t;
  fp8_group_stats s = stats_of(&b, 0, &t);
  ck_assert_int_eq(s.steps, 8);
  ck_assert_int_eq(s.snr_rows, 8);
  ck_assert_double_eq_tol(s.snr_mean, 23.1875, 1e-12);
  ck_assert_double_eq_tol(s.snr_median, 24.95, 1e-12);
  ck_assert_double_eq_tol(s.snr_p5, 13.905, 1e-12);
  ck_assert_double_eq(s.snr_min, 8.9);
  ck_assert_double_eq_tol(s.snr_slope, 22.2619047619048, 1e-9);
  /* the Student-t interval: 23.1875 -+ 4.934332291655183 (mean_ci_reference) */
  ck_assert_double_eq_tol(s.snr_ci_lo, 18.253167708344817, 1e-9);
  ck_assert_double_eq_tol(s.snr_ci_hi, 28.121832291655183, 1e-9);
  /* reproducible: the same group again gives bit-identical statistics */
  fp8_group_stats s2;
  ck_assert_int_eq(fp8_analysis_group(&t, &t.groups[0], &s2), FP8_OK);
  ck_assert(s2.snr_ci_lo == s.snr_ci_lo && s2.snr_ci_hi == s.snr_ci_hi);
  /* current scaling: lag 0 by construction */
  ck_assert_int_eq(s.lag_rows, 8);
  ck_assert_double_eq(s.lag_median, 0.0);
  ck_assert_double_eq(s.lag_worst, 0.0);
  ck_assert_double_eq(s.overflow_rate, 0.0);
  ck_assert_int_eq(s.first_overflow_step, -1);
  fp8_steps_csv_free(&t);
  free(b.s);
}
END_TEST

START_TEST(group_rates_runs_lag) {
  /* delayed e4m3 margin 0; per row (amax, scale) -> lag by hand: (448,1) 0; (896,1) -1;
   * (112,0.5) 3; (0,1) skipped; (224,0.125) 4. Sorted lags -1 0 3 4: median 1.5, worst -1.
   * Counts n = 1000, nonfinite 10 on step 1: finite 4990; overflow 0 3 2 0 5 -> rate 10/4990,
   * 3 steps with overflow, longest run 2 (steps 1, 2), first at step 1; underflow 1 per row
   * -> 5/4990; subnormal 7 on step 4 -> 7/4990. */
  sbuf b = with_header();
  add_row(&b, "x.output", "output", 0, "d,delayed,e4m3,4,0,max", "448,1,1000,0,0,0,1,0,1e-06,30");
  add_row(&b, "x.output", "output", 1, "d,delayed,e4m3,4,0,max", "896,1,1000,10,0,3,1,0,1e-06,20");
  add_row(&b, "x.output", "output", 2, "d,delayed,e4m3,4,0,max", "112,0.5,1000,0,0,2,1,0,1e-06,inf");
  add_row(&b, "x.output", "output", 3, "d,delayed,e4m3,4,0,max", "0,1,1000,0,999,0,1,0,1e-12,inf");
  add_row(&b, "x.output", "output", 4, "d,delayed,e4m3,4,0,max", "224,0.125,1000,0,0,5,1,7,1e-06,10");
  fp8_steps_table t;
  fp8_group_stats s = stats_of(&b, 0, &t);
  ck_assert_int_eq(s.steps, 5);
  ck_assert_int_eq(s.finite, 4990);
  ck_assert_double_eq(s.overflow_rate, 10.0 / 4990.0);
  ck_assert_double_eq(s.underflow_rate, 5.0 / 4990.0);
  ck_assert_double_eq(s.subnormal_rate, 7.0 / 4990.0);
  ck_assert_int_eq(s.steps_with_overflow, 3);
  ck_assert_int_eq(s.longest_overflow_run, 2);
  ck_assert_int_eq(s.first_overflow_step, 1);
  ck_assert_int_eq(s.lag_rows, 4);
  ck_assert_double_eq(s.lag_median, 1.5);
  ck_assert_double_eq(s.lag_worst, -1.0);
  /* SNRs: inf counts as the 200 dB cap: {30, 20, 200, 200, 10}: mean 92, median 30, min 10 */
  ck_assert_int_eq(s.snr_rows, 5);
  ck_assert_double_eq_tol(s.snr_mean, 92.0, 1e-12);
  ck_assert_double_eq(s.snr_median, 30.0);
  ck_assert_double_eq(s.snr_min, 10.0);
  /* t interval: deviations -62 -72 108 108 -82, squares sum 39080, s = sqrt(39080 / 4) =
   * 98.84331034521254, half = 2.7764451051977934 (df 4) * s / sqrt 5 = 122.7301799189321:
   * 92 -+ half = [-30.7301799189321, 214.73...], the upper end cut to the 200 dB cap */
  ck_assert_double_eq_tol(s.snr_ci_lo, -30.7301799189321, 1e-9);
  ck_assert_double_eq(s.snr_ci_hi, 200.0);
  fp8_steps_csv_free(&t);
  free(b.s);

  /* one step: the interval is the value; an all-nonfinite step is left out of the SNRs and
   * rates; no finite element at all gives nan */
  b = with_header();
  add_row(&b, "y.input", "input", 5, D_CFG, "1,1,100,0,0,0,0,0,1e-06,27.5");
  add_row(&b, "y.input", "input", 6, D_CFG, "inf,1,100,100,0,0,0,0,nan,inf");
  add_row(&b, "z.input", "input", 6, D_CFG, "0,1,100,100,0,0,0,0,nan,inf");
  s = stats_of(&b, 0, &t);
  ck_assert_int_eq(s.snr_rows, 1);
  ck_assert(s.snr_mean == 27.5 && s.snr_median == 27.5 && s.snr_p5 == 27.5 && s.snr_min == 27.5);
  ck_assert(s.snr_ci_lo == 27.5 && s.snr_ci_hi == 27.5);
  ck_assert(isnan(s.snr_slope));
  ck_assert_int_eq(s.lag_rows, 1); /* the inf amax is skipped */
  ck_assert_double_eq(s.lag_median, log2(448.0));
  ck_assert_int_eq(fp8_analysis_group(&t, &t.groups[1], &s), FP8_OK);
  ck_assert_int_eq(s.snr_rows, 0);
  ck_assert(isnan(s.snr_mean) && isnan(s.snr_median) && isnan(s.snr_ci_lo) && isnan(s.overflow_rate));
  ck_assert(isnan(s.lag_median) && isnan(s.lag_worst));
  fp8_steps_csv_free(&t);
  free(b.s);
}
END_TEST

/* The 28-column schema: clipped, overshoot, cos_sim, warmup. Warm-up rows are counted and left
 * out of every rate; clipped, not overflow, is the value budget's count. */
START_TEST(saturation_columns_and_warmup) {
  sbuf b = {0};
  add_header(&b, FP8_STEPS_COL_WARMUP + 1, "\n");
  /* step 0 (warm-up): 500 of 1000 values saturate; steps 10, 20: one overflow that does not
   * clip (rounding), then one that clips */
  addf(&b, "t.input,input,0," D_CFG ",2000,1,1000,0,0,500,0,0,1,10,,,,,,500,2.1,0.99,1\n");
  addf(&b, "t.input,input,10," D_CFG ",2,224.5,1000,0,0,1,2,0,1e-06,30,,,,,,0,0.001,0.999,0\n");
  addf(&b, "t.input,input,20," D_CFG ",3,224.5,1000,0,0,1,4,0,1e-06,20,,,,,,1,0.6,0.998,0\n");
  fp8_steps_table t;
  char err[256];
  ck_assert_msg(parse(&b, &t, err, sizeof err) == FP8_OK, "%s", err);
  ck_assert_int_eq(t.rows[0].clipped, 500);
  ck_assert(t.rows[0].warmup && !t.rows[1].warmup);
  ck_assert_double_eq(t.rows[2].overshoot, 0.6);
  ck_assert_double_eq(t.rows[1].cos_sim, 0.999);
  fp8_group_stats s;
  ck_assert_int_eq(fp8_analysis_group(&t, &t.groups[0], &s), FP8_OK);
  ck_assert_int_eq(s.warmup_steps, 1);
  ck_assert_int_eq(s.steps, 2);
  ck_assert_int_eq(s.overflow, 2);
  ck_assert_double_eq(s.overflow_rate, 2.0 / 2000.0);
  ck_assert_int_eq(s.clipped, 1);
  ck_assert_double_eq(s.clipped_rate, 1.0 / 2000.0);
  ck_assert_int_eq(s.steps_with_clipped, 1);
  ck_assert_double_eq(s.clip_step_rate, 0.5);
  ck_assert_double_eq(s.underflow_rate, 6.0 / 2000.0);
  ck_assert_double_eq(s.overshoot_max, 0.6);
  ck_assert_double_eq_tol(s.cos_median, 0.9985, 1e-12);
  ck_assert_double_eq(s.snr_p5, 20.0 + 0.05 * 10.0); /* {20, 30}: index 0.05 */
  ck_assert_int_eq(s.stream_steps, -1);
  fp8_steps_csv_free(&t);
  /* a clipped count above overflow is refused */
  sbuf c = {0};
  add_header(&c, FP8_STEPS_COL_WARMUP + 1, "\n");
  addf(&c, "t.input,input,0," D_CFG ",2,1,1000,0,0,1,0,0,1,10,,,,,,2,0,1,0\n");
  ck_assert_int_eq(parse(&c, &t, err, sizeof err), FP8_EFORMAT);
  ck_assert_str_eq(err, "t.csv:2: column clipped: expected a count <= overflow, found '2'");
  fp8_steps_csv_free(&t);
  free(b.s);
  free(c.s);
}
END_TEST

/* Issue 29's columns: an nvfp4 row carries stochastic rounding's expectation, read as written;
 * a delayed row leaves them empty (a value there is refused, as is an expected underflow above
 * the finite elements); a file of the 28-column version reads as NaN. */
START_TEST(sr_expected_columns) {
  sbuf b = {0};
  add_header(&b, FP8_STEPS_COL_COUNT, "\n");
  addf(&b, "t.grad_output,grad_output,0,nv,nvfp4,e2m1,,,,2,,1000,10,0,3,40,7,1e-06,30,63,2,"
           "-1,3,0.5,0,0.1,0.99,0,41.25,1.5e-06\n");
  addf(&b, "t.input,input,0," D_CFG ",2,224,1000,0,0,0,0,0,1e-06,30,,,,,,0,-1,0.99,0,,\n");
  fp8_steps_table t;
  char err[256];
  ck_assert_msg(parse(&b, &t, err, sizeof err) == FP8_OK, "%s", err);
  ck_assert_int_eq(t.rows[0].kind, FP8_KIND_NVFP4);
  ck_assert_double_eq(t.rows[0].underflow_expected, 41.25);
  ck_assert_double_eq(t.rows[0].mse_expected, 1.5e-06);
  ck_assert(isnan(t.rows[1].underflow_expected) && isnan(t.rows[1].mse_expected));
  fp8_steps_csv_free(&t);
  free(b.s);
  static const char *const bad[2][2] = {
      {"t.input,input,0," D_CFG ",2,224,1000,0,0,0,0,0,1e-06,30,,,,,,0,-1,0.99,0,1,0\n",
       "t.csv:2: column underflow_expected: expected an empty field for non-FP4 kinds, found '1'"},
      {"t.g,grad_output,0,nv,nvfp4,e2m1,,,,2,,1000,10,0,3,40,7,1e-06,30,63,2,-1,3,0.5,0,0.1,"
       "0.99,0,990.5,0\n",
       "t.csv:2: column underflow_expected: expected a number in 0..the finite elements, found "
       "'990.5'"}};
  for (int k = 0; k < 2; k++) {
    sbuf c = {0};
    add_header(&c, FP8_STEPS_COL_COUNT, "\n");
    addf(&c, "%s", bad[k][0]);
    ck_assert_int_eq(parse(&c, &t, err, sizeof err), FP8_EFORMAT);
    ck_assert_str_eq(err, bad[k][1]);
    fp8_steps_csv_free(&t);
    free(c.s);
  }
}
END_TEST

/* Stream statistics of a series worked by hand: E4M3, scale 224 at every step. amax 2 -> 448
 * (not an overflow), 2.0625 -> 462 (overflow, not clipped), 3 -> 672 (clipped), 0 (did not
 * run, no overshoot), and a warm-up step that would clip and is left out. */
START_TEST(stream_series_by_hand) {
  int64_t step[6] = {0, 1, 2, 3, 4, 5};
  float amax[6] = {1000.0f, 2.0f, 2.0625f, 3.0f, 0.0f, 1.0f};
  float scale[6] = {1.0f, 224.0f, 224.0f, 224.0f, 224.0f, 224.0f};
  unsigned char snap[6] = {1, 0, 0, 1, 0, 0}, warm[6] = {1, 0, 0, 0, 0, 0};
  fp8_stream_series ser = {.tensor = "t.input", .role = FP8_ROLE_INPUT, .key.recipe = "d",
                           .key.format = FP8_E4M3, .key.history_len = 4, .key.margin = 0,
                           .key.amax_compute = FP8_AMAX_MAX, .n = 6, .step = step, .amax = amax,
                           .scale = scale, .snapshot = snap, .warmup = warm};
  fp8_group_stats o;
  memset(&o, 0, sizeof o);
  ck_assert_int_eq(fp8_analysis_stream_series(&ser, &o), FP8_OK);
  /* the warm-up step and the step the tensor did not run are none of its steps: 4 */
  ck_assert_int_eq(o.stream_steps, 4);
  ck_assert_int_eq(o.stream_overflow_steps, 2);
  ck_assert_int_eq(o.stream_clipped_steps, 1);
  ck_assert_double_eq(o.clip_step_rate, 1.0 / 4.0);
  /* overshoots of the four steps with amax > 0: log2 of 448/448, 462/448, 672/448, 224/448 */
  ck_assert_double_eq_tol(o.stream_overshoot_max, log2(672.0 / 448.0), 1e-15);
  ck_assert_int_eq(o.stream_overshoot_step, 3); /* amax 3 at step 3 */
  double sorted[4] = {-1.0, 0.0, log2(462.0 / 448.0), log2(1.5)};
  ck_assert_double_eq_tol(o.overshoot_p50, (sorted[1] + sorted[2]) / 2.0, 1e-15);
  ck_assert_double_eq_tol(o.overshoot_p95, sorted[2] + 0.85 * (sorted[3] - sorted[2]), 1e-15);
}
END_TEST

TU_MAIN("statistics", "stats", NULL, NULL, 0, quantiles_by_hand, longest_run, scale_lag_by_hand,
        mean_ci_reference, group_snr_statistics, group_rates_runs_lag,
        saturation_columns_and_warmup, sr_expected_columns, stream_series_by_hand)
