/* test_analysis.c: the statistics half of the analysis layer (src/analysis/analysis.h):
 * steps.csv loading and validation, per-group statistics against values derived by hand or
 * with numpy, the Student-t interval, the scale lag, recommendations, and the CSV files. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "results.h" /* fp8_schema_steps */
#include "testutil.h"

/* ------------------------------------------------------------------ helpers */

typedef struct {
  char *s;
  size_t n, cap;
} sbuf;

static void addf(sbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (b->n + (size_t)k + 1 > b->cap) {
    b->cap = 2 * (b->n + (size_t)k + 1) + 256;
    b->s = realloc(b->s, b->cap);
  }
  va_start(ap, fmt);
  vsnprintf(b->s + b->n, (size_t)k + 1, fmt, ap);
  va_end(ap);
  b->n += (size_t)k;
}

/* The steps.csv header as results.h spells it: its first ncols columns, then eol. */
#define V1_COLS FP8_STEPS_COL_NBLOCKS /* the 19 columns before the block columns */
static void add_header(sbuf *b, int ncols, const char *eol) {
  for (int i = 0; i < ncols; i++) addf(b, "%s%s", i ? "," : "", fp8_schema_steps.columns[i]);
  addf(b, "%s", eol);
}

static sbuf with_header(void) {
  sbuf b = {0};
  add_header(&b, V1_COLS, "\n");
  return b;
}

static int parse(const sbuf *b, fp8_steps_table *t, char *err, size_t errlen) {
  return fp8_steps_parse("t.csv", b->s, b->n, t, err, errlen);
}

#define D_CFG "d,delayed,e4m3,16,0,max"
#define C_CFG "c,current,e4m3,,,"
/* a row: tensor, role, step, configuration (6 fields), then the 10 numeric fields as text */
static void add_row(sbuf *b, const char *tensor, const char *role, long step, const char *cfg,
                    const char *rest) {
  addf(b, "%s,%s,%ld,%s,%s\n", tensor, role, step, cfg, rest);
}

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

/* ------------------------------------------------------------------ loading and grouping */

START_TEST(load_and_group) {
  sbuf b = with_header();
  /* file order deliberately not step order for group (t.input, d); two tensors, two configs */
  add_row(&b, "t.input", "input", 20, D_CFG, "1,448,100,0,0,0,0,0,1e-06,30");
  add_row(&b, "t.input", "input", 0, D_CFG, "1,1,100,0,0,0,0,0,1e-06,31");
  add_row(&b, "t.input", "input", 0, C_CFG, "1,448,100,0,0,0,0,0,1e-06,32");
  add_row(&b, "a.weight", "weight", 0, D_CFG, "2,1,100,0,0,0,0,0,1e-06,33");
  add_row(&b, "t.input", "input", 10, D_CFG, "inf,2.5e-07,100,100,0,0,0,0,nan,inf");
  fp8_steps_table t;
  char err[256] = "";
  ck_assert_int_eq(parse(&b, &t, err, sizeof err), FP8_OK);
  ck_assert_uint_eq(t.nrows, 5);
  ck_assert_str_eq(t.path, "t.csv");
  /* rows in file order, every field parsed */
  ck_assert_int_eq(t.rows[0].step, 20);
  ck_assert_int_eq(t.rows[0].line, 2);
  ck_assert_int_eq(t.rows[4].line, 6);
  ck_assert(isinf(t.rows[4].amax));
  ck_assert(t.rows[4].scale == 2.5e-07);
  ck_assert(isnan(t.rows[4].mse) && isinf(t.rows[4].snr_db));
  ck_assert_int_eq(t.rows[4].nonfinite, 100);
  ck_assert_int_eq(t.rows[4].zeros, 0);
  ck_assert_int_eq(t.rows[2].kind, FP8_KIND_CURRENT);
  ck_assert_int_eq(t.rows[2].history_len, 0);
  ck_assert_int_eq(t.rows[0].history_len, 16);
  ck_assert_int_eq(t.rows[0].role, FP8_ROLE_INPUT);
  ck_assert(t.rows[0].tensor == t.rows[1].tensor); /* interned */
  /* groups: tensor name order, then first appearance */
  ck_assert_uint_eq(t.ngroups, 3);
  ck_assert_uint_eq(t.ntensors, 2);
  ck_assert_str_eq(t.tensors[0], "a.weight");
  ck_assert_str_eq(t.tensors[1], "t.input");
  ck_assert_str_eq(t.groups[0].tensor, "a.weight");
  ck_assert_str_eq(t.groups[1].key.recipe, "d");
  ck_assert_str_eq(t.groups[2].key.recipe, "c");
  const fp8_steps_group *g = &t.groups[1];
  ck_assert_uint_eq(g->nrows, 3);
  ck_assert_int_eq(fp8_steps_group_row(&t, g, 0)->step, 0);
  ck_assert_int_eq(fp8_steps_group_row(&t, g, 1)->step, 10);
  ck_assert_int_eq(fp8_steps_group_row(&t, g, 2)->step, 20);
  for (size_t i = 0; i < t.nrows; i++) ck_assert(&t.groups[t.rows[i].group] != NULL);
  ck_assert_uint_eq(t.rows[3].group, 0);
  ck_assert_uint_eq(t.rows[2].group, 2);
  fp8_config_key d16 = {"d", FP8_KIND_DELAYED, FP8_E4M3, 16, 0, FP8_AMAX_MAX};
  fp8_config_key c0 = {"c", FP8_KIND_CURRENT, FP8_E4M3, 0, 0, FP8_AMAX_MAX};
  fp8_config_key d16m1 = {"d", FP8_KIND_DELAYED, FP8_E4M3, 16, 1, FP8_AMAX_MAX};
  ck_assert_int_eq(fp8_steps_find_group(&t, "t.input", &d16), 1);
  ck_assert_int_eq(fp8_steps_find_group(&t, "t.input", &c0), 2);
  ck_assert_int_eq(fp8_steps_find_group(&t, "t.input", &d16m1), -1);
  fp8_steps_free(&t);
  fp8_steps_free(&t); /* twice is fine */

  /* CRLF line ends and a last line without a newline are accepted; a header-only file is empty */
  sbuf c = {0};
  add_header(&c, V1_COLS, "\r\n");
  addf(&c, "x.output,output,3," D_CFG ",1,1,5,0,0,0,0,0,0,inf");
  ck_assert_int_eq(parse(&c, &t, err, sizeof err), FP8_OK);
  ck_assert_uint_eq(t.nrows, 1);
  ck_assert(isinf(t.rows[0].snr_db));
  fp8_steps_free(&t);
  sbuf h = with_header();
  ck_assert_int_eq(parse(&h, &t, err, sizeof err), FP8_OK);
  ck_assert_uint_eq(t.nrows, 0);
  ck_assert_uint_eq(t.ngroups, 0);
  fp8_steps_free(&t);
  free(b.s);
  free(c.s);
  free(h.s);
}
END_TEST

/* The 24-column schema: block rows (empty scale, block statistics) beside per-tensor rows. */
START_TEST(block_columns) {
  sbuf b = {0};
  add_header(&b, FP8_STEPS_COL_CLIPPED, "\n");
  addf(&b, "x.input,input,0," C_CFG ",4,112,4,0,0,0,0,0,0,inf,,,,,\n");
  addf(&b, "x.input,input,0,mx,mxfp8,e4m3,,,,4,,4,0,0,0,0,1,0.5,12.5,1,0,-5,-5,0\n");
  addf(&b, "x.input,input,0,blk,block,e4m3,,,,4,,4,0,4,0,0,0,0,inf,1,0,nan,nan,nan\n");
  fp8_steps_table t;
  char err[256];
  ck_assert_msg(parse(&b, &t, err, sizeof err) == FP8_OK, "%s", err);
  ck_assert_uint_eq(t.nrows, 3);
  ck_assert_int_eq(t.rows[0].nblocks, -1);
  ck_assert(isnan(t.rows[1].scale));
  ck_assert_int_eq(t.rows[1].kind, FP8_KIND_MXFP8);
  ck_assert_int_eq(t.rows[1].nblocks, 1);
  ck_assert_double_eq(t.rows[1].log2_scale_min, -5.0);
  ck_assert(isnan(t.rows[2].log2_scale_std));
  fp8_steps_free(&t);
  free(b.s);
  /* a block row with a scale, a per-tensor row with block statistics */
  const char *bad[][2] = {
      {"x.input,input,0,mx,mxfp8,e4m3,,,,4,2,4,0,0,0,0,1,0.5,12.5,1,0,-5,-5,0",
       "t.csv:2: column scale: expected an empty field for block kinds (their scales are per block), found '2'"},
      {"x.input,input,0," C_CFG ",4,112,4,0,0,0,0,0,0,inf,1,,,,",
       "t.csv:2: column nblocks: expected an empty field for per-tensor kinds, found '1'"},
      {"x.input,input,0,mx,mxfp8,e4m3,,,,4,,4,0,0,0,0,1,0.5,12.5,1,2,-5,-5,0",
       "t.csv:2: column blocks_with_overflow: expected a count <= nblocks, found '2'"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    sbuf c = {0};
    add_header(&c, FP8_STEPS_COL_CLIPPED, "\n");
    addf(&c, "%s\n", bad[i][0]);
    ck_assert_int_eq(parse(&c, &t, err, sizeof err), FP8_EFORMAT);
    ck_assert_str_eq(err, bad[i][1]);
    free(c.s);
  }
}
END_TEST

/* Each malformed input with the exact message it must produce. */
static const struct {
  const char *line; /* a data line (line 2), or a whole text when it starts with '!' */
  const char *msg;
} BAD[] = {
    {"!", "t.csv:1: empty file (expected the steps.csv header)"},
    {"!tensor,role,step\n", "t.csv:1: not a steps.csv header: 3 columns, expected 30"},
    {"!tensor,role,stp,recipe\n", "t.csv:1: not a steps.csv header: column 3 is 'stp', expected 'step'"},
    {"x.input,input,0," D_CFG ",1,1,100,0,0,0,0,0,0", "t.csv:2: expected 19 fields, found 18"},
    {"x.input,input,0," D_CFG ",1,1,100,0,0,0,0,0,0,1,2", "t.csv:2: expected 19 fields, found more than 19"},
    {"", "t.csv:2: empty line"},
    {",input,0," D_CFG ",1,1,100,0,0,0,0,0,0,1", "t.csv:2: column tensor: expected a tensor name, found ''"},
    {"x.input,inp,0," D_CFG ",1,1,100,0,0,0,0,0,0,1",
     "t.csv:2: column role: expected input, weight, output, grad_output, grad_input or empty, found 'inp'"},
    {"x.input,input,-1," D_CFG ",1,1,100,0,0,0,0,0,0,1", "t.csv:2: column step: expected a step number >= 0, found '-1'"},
    {"x.input,input,0,d d,delayed,e4m3,16,0,max,1,1,100,0,0,0,0,0,0,1",
     "t.csv:2: column recipe: expected a recipe label (A-Z a-z 0-9 _ . -), found 'd d'"},
    {"x.input,input,0,d,lazy,e4m3,16,0,max,1,1,100,0,0,0,0,0,0,1", "t.csv:2: column kind: expected delayed, current, mxfp8, block, rowwise, bf16, nvfp4 or mxfp4, found 'lazy'"},
    {"x.input,input,0,d,delayed,hybrid,16,0,max,1,1,100,0,0,0,0,0,0,1", "t.csv:2: column format: expected e4m3 or e5m2, found 'hybrid'"},
    {"x.input,input,0,d,delayed,e4m3,0,0,max,1,1,100,0,0,0,0,0,0,1",
     "t.csv:2: column history_len: expected an integer in 1..1048576 for delayed scaling, found '0'"},
    {"x.input,input,0,d,delayed,e4m3,16,,max,1,1,100,0,0,0,0,0,0,1",
     "t.csv:2: column margin: expected an integer in -64..64 for delayed scaling, found ''"},
    {"x.input,input,0,d,delayed,e4m3,16,0,mean,1,1,100,0,0,0,0,0,0,1",
     "t.csv:2: column amax_compute: expected max or most_recent for delayed scaling, found 'mean'"},
    {"x.input,input,0,c,current,e4m3,16,,,1,1,100,0,0,0,0,0,0,1",
     "t.csv:2: column history_len: expected an empty field for non-delayed kinds, found '16'"},
    {"x.input,input,0," D_CFG ",abc,1,100,0,0,0,0,0,0,1", "t.csv:2: column amax: expected a number >= 0 or inf, found 'abc'"},
    {"x.input,input,0," D_CFG ",0x1p3,1,100,0,0,0,0,0,0,1", "t.csv:2: column amax: expected a number >= 0 or inf, found '0x1p3'"},
    {"x.input,input,0," D_CFG ",nan,1,100,0,0,0,0,0,0,1", "t.csv:2: column amax: expected a number >= 0 or inf, found 'nan'"},
    {"x.input,input,0," D_CFG ",1,inf,100,0,0,0,0,0,0,1", "t.csv:2: column scale: expected a finite number > 0, found 'inf'"},
    {"x.input,input,0," D_CFG ",1,1,1e2,0,0,0,0,0,0,1", "t.csv:2: column n: expected a count (integer >= 0), found '1e2'"},
    {"x.input,input,0," D_CFG ",1,1,100,101,0,0,0,0,0,1", "t.csv:2: column nonfinite: 101 exceeds n = 100"},
    {"x.input,input,0," D_CFG ",1,1,100,10,0,91,0,0,0,1", "t.csv:2: column overflow: 91 exceeds the 90 finite elements"},
    {"x.input,input,0," D_CFG ",1,1,100,0,0,0,0,0,nan,1",
     "t.csv:2: column mse: 'nan' but the row has 100 finite elements (nan exactly when there is none)"},
    {"x.input,input,0," D_CFG ",1,1,100,100,0,0,0,0,0,1",
     "t.csv:2: column mse: '0' but the row has 0 finite elements (nan exactly when there is none)"},
    {"x.input,input,0," D_CFG ",1,1,100,0,0,0,0,0,-1,1", "t.csv:2: column mse: expected a finite number >= 0 or nan, found '-1'"},
    {"x.input,input,0," D_CFG ",1,1,100,0,0,0,0,0,0,-inf", "t.csv:2: column snr_db: expected a number or inf, found '-inf'"},
    {"x.input,input,0," D_CFG ",1,1,100,0,0,0,0,0,0,1 ", "t.csv:2: column snr_db: expected a number or inf, found '1 '"},
};

START_TEST(malformed_lines) {
  for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
    sbuf b = {0};
    if (BAD[i].line[0] == '!') addf(&b, "%s", BAD[i].line + 1);
    else {
      b = with_header();
      addf(&b, "%s\n", BAD[i].line);
    }
    fp8_steps_table t;
    char err[512] = "";
    int rc = fp8_steps_parse("t.csv", b.s ? b.s : "", b.n, &t, err, sizeof err);
    ck_assert_msg(rc == FP8_EFORMAT, "case %zu: rc %d (%s)", i, rc, err);
    ck_assert_msg(strcmp(err, BAD[i].msg) == 0, "case %zu:\n got      %s\n expected %s", i, err,
                  BAD[i].msg);
    ck_assert_uint_eq(t.nrows, 0);
    ck_assert_ptr_null(t.rows);
    fp8_steps_free(&t);
    free(b.s);
  }
}
END_TEST

START_TEST(malformed_consistency) {
  char err[512];
  fp8_steps_table t;
  /* a duplicate (group, step) is reported at its second line */
  sbuf b = with_header();
  add_row(&b, "x.input", "input", 0, D_CFG, "1,1,100,0,0,0,0,0,0,1");
  add_row(&b, "x.input", "input", 1, D_CFG, "1,1,100,0,0,0,0,0,0,1");
  add_row(&b, "x.input", "input", 0, D_CFG, "1,1,100,0,0,0,0,0,0,1");
  ck_assert_int_eq(parse(&b, &t, err, sizeof err), FP8_EFORMAT);
  ck_assert_str_eq(err, "t.csv:4: duplicate row: step 0 of tensor x.input, configuration d e4m3 "
                        "history_len 16 margin 0 max, already at line 2");
  free(b.s);
  /* a tensor changing role; a recipe label changing kind */
  b = with_header();
  add_row(&b, "x.input", "input", 0, D_CFG, "1,1,100,0,0,0,0,0,0,1");
  add_row(&b, "x.input", "", 1, D_CFG, "1,1,100,0,0,0,0,0,0,1");
  ck_assert_int_eq(parse(&b, &t, err, sizeof err), FP8_EFORMAT);
  ck_assert_str_eq(err, "t.csv:3: tensor x.input has role '' here but 'input' at line 2");
  free(b.s);
  /* a recipe label may have different kinds for different tensors (sections that share a
   * label, issue 14), but a tensor keeps one kind per label */
  b = with_header();
  add_row(&b, "x.input", "input", 0, D_CFG, "1,1,100,0,0,0,0,0,0,1");
  add_row(&b, "y.input", "input", 0, "d,current,e4m3,,,", "1,1,100,0,0,0,0,0,0,1");
  ck_assert_int_eq(parse(&b, &t, err, sizeof err), FP8_OK);
  ck_assert_uint_eq(t.ngroups, 2);
  ck_assert_int_eq(t.groups[0].key.kind, FP8_KIND_DELAYED);
  ck_assert_int_eq(t.groups[1].key.kind, FP8_KIND_CURRENT);
  fp8_steps_free(&t);
  free(b.s);
  b = with_header();
  add_row(&b, "x.input", "input", 0, D_CFG, "1,1,100,0,0,0,0,0,0,1");
  add_row(&b, "y.input", "input", 0, "d,current,e4m3,,,", "1,1,100,0,0,0,0,0,0,1");
  add_row(&b, "x.input", "input", 1, "d,current,e4m3,,,", "1,1,100,0,0,0,0,0,0,1");
  ck_assert_int_eq(parse(&b, &t, err, sizeof err), FP8_EFORMAT);
  ck_assert_str_eq(err, "t.csv:4: tensor x.input: recipe d is current here but delayed at line 2");
  free(b.s);
  /* a NUL byte */
  b = with_header();
  add_row(&b, "x.input", "input", 0, D_CFG, "1,1,100,0,0,0,0,0,0,1");
  b.s[b.n - 3] = 0;
  ck_assert_int_eq(parse(&b, &t, err, sizeof err), FP8_EFORMAT);
  ck_assert_str_eq(err, "t.csv:2: NUL byte in the line");
  free(b.s);
}
END_TEST

START_TEST(load_from_file) {
  char *dir = tu_mkdtemp();
  char path[512], err[512];
  fp8_steps_table t;
  snprintf(path, sizeof path, "%s/steps.csv", dir);
  /* missing file */
  ck_assert_int_eq(fp8_steps_load(path, &t, err, sizeof err), FP8_EIO);
  ck_assert(strncmp(err, path, strlen(path)) == 0);
  /* a bad line 3 names the path and the line */
  sbuf b = with_header();
  add_row(&b, "x.input", "input", 0, D_CFG, "1,1,100,0,0,0,0,0,0,1");
  add_row(&b, "x.input", "input", 1, D_CFG, "1,1,100,0,0,0,0,0,zero,1");
  ck_assert_int_eq(tu_write_file(path, b.s, b.n), 0);
  ck_assert_int_eq(fp8_steps_load(path, &t, err, sizeof err), FP8_EFORMAT);
  char expect[700];
  snprintf(expect, sizeof expect, "%s:3: column mse: expected a finite number >= 0 or nan, found 'zero'",
           path);
  ck_assert_str_eq(err, expect);
  /* every prefix of a valid file either loads or fails with a message: never a crash */
  free(b.s);
  b = with_header();
  add_row(&b, "x.input", "input", 0, D_CFG, "1,1,100,0,0,0,0,0,0,1");
  add_row(&b, "x.input", "input", 1, C_CFG, "1e-3,448,100,100,0,0,0,0,nan,inf");
  for (size_t k = 0; k <= b.n; k++) {
    err[0] = 0;
    int rc = fp8_steps_parse("p.csv", b.s, k, &t, err, sizeof err);
    ck_assert(rc == FP8_OK || (rc == FP8_EFORMAT && strncmp(err, "p.csv:", 6) == 0));
    fp8_steps_free(&t);
  }
  free(b.s);
  tu_rmtree(dir);
  free(dir);
}
END_TEST

/* Numbers are read to the double strtod gives (the loader's short path covers the %.9g ones;
 * other spellings go to strtod): the expected bits are Python's float(s).hex() of each text. */
START_TEST(numbers_parse_exactly) {
  static const struct {
    const char *text;
    double want;
  } v[] = {{"0.000208854675", 0x1.b5fffff5b12c1p-13},  {"8.99519892", 0x1.1fd8ab67cd43cp+3},
           {"1.77305322e-11", 0x1.37eb37dc8b893p-36},  {"1e-22", 0x1.e392010175ee6p-74},
           {"123456789e-30", 0x1.2a800d15b2fe8p-73},   {"0.1", 0x1.999999999999ap-4},
           {"7e22", 0x1.da56a4b0835c0p+75},            {"9007199254740993", 0x1p+53},
           {"1.00000000000000000000001", 0x1p+0},      {"3.4028234663852886e+38", 0x1.fffffep+127}};
  size_t nv = sizeof v / sizeof v[0];
  sbuf b = with_header();
  for (size_t i = 0; i < nv; i++) {
    char rest[256];
    /* the text as amax, mse and snr_db; n = the largest int64 on the first row */
    snprintf(rest, sizeof rest, "%s,1,%s,0,0,0,0,0,%s,%s", v[i].text,
             i ? "100" : "9223372036854775807", v[i].text, v[i].text);
    add_row(&b, "x.input", "input", (long)i, D_CFG, rest);
  }
  fp8_steps_table t;
  char err[256] = "";
  ck_assert_msg(parse(&b, &t, err, sizeof err) == FP8_OK, "%s", err);
  for (size_t i = 0; i < nv; i++) {
    const fp8_step_row *r = &t.rows[i];
    ck_assert_msg(r->amax == v[i].want && r->mse == v[i].want && r->snr_db == v[i].want,
                  "%s: read %a, want %a", v[i].text, r->amax, v[i].want);
  }
  ck_assert(t.rows[0].n == INT64_MAX);
  fp8_steps_free(&t);
  free(b.s);
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
  fp8_steps_free(&t);
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
  fp8_steps_free(&t);
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
  fp8_steps_free(&t);
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
  fp8_steps_free(&t);
  /* a clipped count above overflow is refused */
  sbuf c = {0};
  add_header(&c, FP8_STEPS_COL_WARMUP + 1, "\n");
  addf(&c, "t.input,input,0," D_CFG ",2,1,1000,0,0,1,0,0,1,10,,,,,,2,0,1,0\n");
  ck_assert_int_eq(parse(&c, &t, err, sizeof err), FP8_EFORMAT);
  ck_assert_str_eq(err, "t.csv:2: column clipped: expected a count <= overflow, found '2'");
  fp8_steps_free(&t);
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
  fp8_steps_free(&t);
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
    fp8_steps_free(&t);
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

/* ------------------------------------------------------------------ recommendations */

/* Two steps (0 and 10) of one tensor and configuration: n = 1000 each, `ovf` overflows per
 * step, SNR `snr` on both steps (so the median is snr). */
static void add_cfg(sbuf *b, const char *tensor, const char *role, const char *cfg, int ovf,
                    double snr) {
  char rest[160];
  snprintf(rest, sizeof rest, "1,448,1000,0,0,%d,0,0,1e-06,%.9g", ovf, snr);
  add_row(b, tensor, role, 0, cfg, rest);
  add_row(b, tensor, role, 10, cfg, rest);
}

#define H1 "d,delayed,e4m3,1,0,max"
#define H16 "d,delayed,e4m3,16,0,max"
#define H16M1 "d,delayed,e4m3,16,1,max"
#define H16MR "d,delayed,e4m3,16,0,most_recent"
#define CUR "c,current,e4m3,,,"

static sbuf rec_csv(void) {
  sbuf b = with_header();
  /* a.input: H1 and H16 tie at 30 dB -> smaller history_len wins */
  add_cfg(&b, "a.input", "input", H1, 0, 30);
  add_cfg(&b, "a.input", "input", H16, 0, 30);
  add_cfg(&b, "a.input", "input", H16M1, 0, 29);
  add_cfg(&b, "a.input", "input", CUR, 0, 31);
  /* b.input: H1 overflows (0.1% > budget); H16M1 has the best median among the others */
  add_cfg(&b, "b.input", "input", H1, 1, 35);
  add_cfg(&b, "b.input", "input", H16, 0, 28);
  add_cfg(&b, "b.input", "input", H16M1, 0, 28.5);
  add_cfg(&b, "b.input", "input", CUR, 0, 31);
  /* e.input: every delayed configuration overflows: current, and the role setting misses it */
  add_cfg(&b, "e.input", "input", H1, 2, 20);
  add_cfg(&b, "e.input", "input", H16, 1, 20);
  add_cfg(&b, "e.input", "input", H16M1, 3, 20);
  add_cfg(&b, "e.input", "input", CUR, 0, 25);
  /* c.output: overflows everywhere; current in the run */
  add_cfg(&b, "c.output", "output", H1, 4, 20);
  add_cfg(&b, "c.output", "output", H16, 4, 21);
  add_cfg(&b, "c.output", "output", CUR, 0, 26);
  /* d.output: overflows everywhere; no current scaling for it in the run */
  add_cfg(&b, "d.output", "output", H1, 4, 20);
  add_cfg(&b, "d.output", "output", H16, 5, 21);
  /* w.weight: max and most_recent tie: max wins */
  add_cfg(&b, "w.weight", "weight", H16MR, 0, 31);
  add_cfg(&b, "w.weight", "weight", H16, 0, 31);
  return b;
}

static const fp8_recommendation *rec_named(const fp8_recommendations *r, fp8_rec_scope scope,
                                           const char *name) {
  for (size_t i = 0; i < r->nrecs; i++)
    if (r->recs[i].scope == scope && strcmp(r->recs[i].name, name) == 0) return &r->recs[i];
  ck_abort_msg("no recommendation for %s", name);
  return NULL;
}

START_TEST(recommendations_rules) {
  sbuf b = rec_csv();
  fp8_steps_table t;
  fp8_analysis a;
  fp8_recommendations r;
  char err[256];
  ck_assert_int_eq(parse(&b, &t, err, sizeof err), FP8_OK);
  ck_assert_int_eq(fp8_analysis_compute(&t, &a, err, sizeof err), FP8_OK);
  fp8_budgets bud = {.value = 1e-5, .step = 0.01};
  ck_assert_int_eq(fp8_analysis_recommend(&a, &bud, &r, err, sizeof err), FP8_OK);
  ck_assert_uint_eq(r.ntensor_recs, 6);
  ck_assert_uint_eq(r.nrecs, 6 + 3 + 1); /* roles input, weight, output; the model */
  ck_assert_str_eq(r.recs[0].name, "a.input");
  ck_assert_str_eq(r.recs[6].name, "input");
  ck_assert_str_eq(r.recs[7].name, "weight");
  ck_assert_str_eq(r.recs[8].name, "output");

  const fp8_recommendation *x = rec_named(&r, FP8_REC_TENSOR, "a.input");
  ck_assert(x->in_run && x->meets_budget && x->key.kind == FP8_KIND_DELAYED);
  ck_assert_int_eq(x->key.history_len, 1); /* tie at 30 dB: the smaller history */
  ck_assert_str_eq(x->decided_by, "parameters");
  ck_assert_int_eq(x->covers, 3);
  ck_assert_int_eq(x->of, 3);
  ck_assert_ptr_nonnull(x->stats);
  ck_assert_double_eq(x->snr_median, 30.0);

  /* b.input: H16 margin 0 fits, so margin 1 (28.5 dB) is not a candidate at history 16: the
   * smallest margin that fits is the only candidate */
  x = rec_named(&r, FP8_REC_TENSOR, "b.input");
  ck_assert(x->meets_budget && x->key.history_len == 16 && x->key.margin == 0);
  ck_assert_int_eq(x->covers, 2);
  ck_assert_double_eq(x->snr_median, 28.0);
  ck_assert_double_eq(x->snr_p5, 28.0);
  ck_assert_str_eq(x->decided_by, "only fit");

  x = rec_named(&r, FP8_REC_TENSOR, "c.output");
  ck_assert(!x->meets_budget && x->in_run && x->key.kind == FP8_KIND_CURRENT);
  ck_assert_str_eq(x->key.recipe, "c");
  ck_assert_int_eq(x->covers, 0);
  ck_assert_double_eq(x->best_delayed_overflow, 4.0 / 1000.0);
  ck_assert_str_eq(x->note, "no delayed configuration fits the budgets 1e-05 of the values and "
                            "0.01 of the steps (the lowest delayed clipped rate is 0.004): use "
                            "current scaling (recipe c; e4m3); p5 SNR 26.00 dB");
  ck_assert_str_eq(x->decided_by, "fallback");

  x = rec_named(&r, FP8_REC_TENSOR, "d.output");
  ck_assert(!x->meets_budget && !x->in_run && x->key.kind == FP8_KIND_CURRENT);
  ck_assert_ptr_null(x->key.recipe);
  ck_assert(strstr(x->note, "current scaling (not in this run)") != NULL);
  ck_assert(strstr(x->note, "no delayed configuration fits the budgets") != NULL);

  x = rec_named(&r, FP8_REC_TENSOR, "w.weight");
  ck_assert(x->meets_budget && x->key.amax_compute == FP8_AMAX_MAX);
  ck_assert_str_eq(x->decided_by, "parameters");

  /* role input: H16 and H16M1 both fit a and b (2 of 3), H1 only a: at history 16 margin 0
   * is the smallest with the most; it fits more tensors than H1 */
  x = rec_named(&r, FP8_REC_ROLE, "input");
  ck_assert(x->meets_budget && x->key.kind == FP8_KIND_DELAYED);
  ck_assert_int_eq(x->key.history_len, 16);
  ck_assert_int_eq(x->key.margin, 0);
  ck_assert_int_eq(x->covers, 2);
  ck_assert_int_eq(x->of, 3);
  ck_assert_str_eq(x->decided_by, "fits");
  ck_assert_double_eq_tol(x->snr_p5, (30 + 28 + 20) / 3.0, 1e-12);
  ck_assert_uint_eq(x->nmisfits, 1);
  ck_assert_str_eq(x->misfits[0], "e.input");
  ck_assert_double_eq_tol(x->snr_median, (30 + 28 + 20) / 3.0, 1e-12); /* mean over all 3 */
  ck_assert_double_eq(x->overflow_rate, 1.0 / 1000.0);                  /* worst: e.input */
  ck_assert(strstr(x->note, "does not fit: e.input") != NULL);

  /* the model: only H16 m0 ran on all six tensors (a whole-model setting must have), and it fits
   * a, b and w (3 of 6); the misfits in tensor order */
  ck_assert_int_eq(r.recs[9].scope, FP8_REC_MODEL);
  x = &r.recs[9];
  ck_assert_str_eq(x->name, "all tensors");
  ck_assert(x->meets_budget && x->key.history_len == 16 && x->key.margin == 0 &&
            x->key.amax_compute == FP8_AMAX_MAX);
  ck_assert_int_eq(x->covers, 3);
  ck_assert_int_eq(x->of, 6);
  ck_assert_str_eq(x->decided_by, "only fit");
  ck_assert_uint_eq(x->nmisfits, 3);
  ck_assert_str_eq(x->misfits[0], "c.output");
  ck_assert_str_eq(x->misfits[1], "d.output");
  ck_assert_str_eq(x->misfits[2], "e.input");

  /* role output: nothing fits -> current, run by 1 of 2 tensors */
  x = rec_named(&r, FP8_REC_ROLE, "output");
  ck_assert(!x->meets_budget && x->in_run && x->key.kind == FP8_KIND_CURRENT);
  ck_assert_int_eq(x->covers, 1);
  ck_assert_int_eq(x->of, 2);
  ck_assert(strstr(x->note, "no delayed configuration fits the budgets for any output tensor") !=
            NULL);
  fp8_recommendations_free(&r);

  /* generous budgets (every step of these clips: the step budget must allow all of them):
   * every tensor gets delayed scaling; H1 now wins b.input (35 dB against 28) */
  bud = (fp8_budgets){.value = 0.01, .step = 1.0};
  ck_assert_int_eq(fp8_analysis_recommend(&a, &bud, &r, err, sizeof err), FP8_OK);
  x = rec_named(&r, FP8_REC_TENSOR, "b.input");
  ck_assert(x->meets_budget && x->key.history_len == 1);
  ck_assert_str_eq(x->decided_by, "p5 SNR");
  x = rec_named(&r, FP8_REC_TENSOR, "c.output");
  ck_assert(x->meets_budget && x->key.history_len == 16); /* 21 dB beats 20 */
  /* role input: H1 and H16 m0 fit all three; mean p5 (30+35+20)/3 beats (30+28+20)/3 */
  x = rec_named(&r, FP8_REC_ROLE, "input");
  ck_assert_int_eq(x->covers, 3);
  ck_assert_int_eq(x->key.history_len, 1);
  ck_assert_str_eq(x->decided_by, "p5 SNR");
  ck_assert_uint_eq(x->nmisfits, 0);
  fp8_recommendations_free(&r);
  /* the value budget alone is not enough: one clipping step in two is over a 0.01 step budget */
  bud = (fp8_budgets){.value = 0.01, .step = 0.01};
  ck_assert_int_eq(fp8_analysis_recommend(&a, &bud, &r, err, sizeof err), FP8_OK);
  x = rec_named(&r, FP8_REC_TENSOR, "b.input");
  ck_assert(x->meets_budget && x->key.history_len == 16);
  fp8_recommendations_free(&r);

  bud = (fp8_budgets){.value = NAN, .step = 0.01};
  ck_assert_int_eq(fp8_analysis_recommend(&a, &bud, &r, err, sizeof err), FP8_EINVAL);
  bud = (fp8_budgets){.value = 1e-5, .step = -1};
  ck_assert_int_eq(fp8_analysis_recommend(&a, &bud, &r, err, sizeof err), FP8_EINVAL);
  fp8_analysis_free(&a);
  fp8_steps_free(&t);
  free(b.s);
}
END_TEST

/* ------------------------------------------------------------------ output files */

START_TEST(csv_outputs) {
  sbuf b = rec_csv();
  /* one group with a known full analysis.csv line (z sorts last) */
  add_row(&b, "z.grad_output", "grad_output", 3, "d,delayed,e5m2,2,1,most_recent",
          "57344,0.5,100,0,0,1,2,3,1e-06,12.5");
  fp8_steps_table t;
  fp8_analysis a;
  fp8_recommendations r;
  char err[256];
  ck_assert_int_eq(parse(&b, &t, err, sizeof err), FP8_OK);
  ck_assert_int_eq(fp8_analysis_compute(&t, &a, err, sizeof err), FP8_OK);
  fp8_budgets bud = {.value = FP8_ANALYSIS_OVERFLOW_BUDGET, .step = FP8_ANALYSIS_STEP_BUDGET};
  ck_assert_int_eq(fp8_analysis_recommend(&a, &bud, &r, err, sizeof err), FP8_OK);
  char *dir = tu_mkdtemp();
  ck_assert_int_eq(fp8_analysis_write(&a, dir, err, sizeof err), FP8_OK);
  ck_assert_int_eq(fp8_recommend_write(&r, dir, err, sizeof err), FP8_OK);
  char path[512];
  snprintf(path, sizeof path, "%s/analysis.csv", dir);
  char *text = tu_read_file(path, NULL);
  ck_assert_ptr_nonnull(text);
  ck_assert(strncmp(text, FP8_ANALYSIS_HEADER "\n", strlen(FP8_ANALYSIS_HEADER) + 1) == 0);
  int lines = 0;
  for (char *p = text; *p; p++) lines += *p == '\n';
  ck_assert_int_eq(lines, 1 + (int)t.ngroups);
  /* e5m2 margin 1: scaled max 28672, jit scale of 57344 is 0.5 -> lag 0 */
  ck_assert(strstr(text, "\nz.grad_output,grad_output,d,delayed,e5m2,2,1,most_recent,1,0.01,0.02,"
                         "0.03,1,1,3,12.5,12.5,12.5,12.5,12.5,12.5,0,0,nan,"
                         /* a file without clipped: its overflow stands in; no stream */
                         "0,0.01,1,nan,nan,,,,,,,1\n") != NULL);
  ck_assert(strstr(text, "\na.input,input,c,current,e4m3,,,,2,0,0,0,0,0,,31,31,31,31,31,31,0,0,0,"
                         "0,0,0,nan,nan,,,,,,,0\n") != NULL);
  free(text);
  snprintf(path, sizeof path, "%s/recommendations.csv", dir);
  text = tu_read_file(path, NULL);
  ck_assert_ptr_nonnull(text);
  ck_assert(strncmp(text, FP8_RECOMMEND_HEADER "\n", strlen(FP8_RECOMMEND_HEADER) + 1) == 0);
  ck_assert(strstr(text, "\ntensor,a.input,d,delayed,e4m3,1,0,max,0,30,3,3,delayed scaling") != NULL);
  ck_assert(strstr(text, ",0,0,30,0,parameters\n") != NULL); /* a.input's last columns */
  ck_assert(strstr(text, "\ntensor,d.output,,current,,,,,,,0,2,no delayed configuration") != NULL);
  ck_assert(strstr(text, "\nrole,input,d,delayed,e4m3,16,0,max,0.001,26,2,3,") != NULL);
  ck_assert(strstr(text, "\nrole,output,c,current,e4m3,,,,0,26,1,2,") != NULL);
  free(text);
  /* no temporary file is left behind */
  char *out = NULL;
  char cmd[600];
  snprintf(cmd, sizeof cmd, "ls -A '%s'", dir);
  ck_assert_int_eq(tu_run(cmd, &out), 0);
  ck_assert_str_eq(out, "analysis.csv\nrecommendations.csv\n");
  free(out);
  /* a missing directory is FP8_EIO naming the file */
  char bad[600];
  snprintf(bad, sizeof bad, "%s/no/such", dir);
  ck_assert_int_eq(fp8_analysis_write(&a, bad, err, sizeof err), FP8_EIO);
  ck_assert(strstr(err, "analysis.csv") != NULL);
  fp8_recommendations_free(&r);
  fp8_analysis_free(&a);
  fp8_steps_free(&t);
  tu_rmtree(dir);
  free(dir);
  free(b.s);
}
END_TEST

/* The real thing: fp8lab run on a tiny synthetic trace, then the whole pipeline on its
 * steps.csv; cross-checks against summary.csv (same rates, computed independently by the runner). */
START_TEST(pipeline_on_a_run) {
  char *dir = tu_mkdtemp();
  char ini[600], cmd[2048], path[700], err[512];
  snprintf(ini, sizeof ini, "%s/exp.ini", dir);
  const char *exp = "[trace]\npath = synth:spiky\nsynth_steps = 40\n"
                    "[recipe.delayed]\nkind = delayed\nformat = hybrid\nhistory_len = 1, 16\n"
                    "margin = 0, 1\n[recipe.jit]\nkind = current\nformat = hybrid\n"
                    /* no warm-up: summary.csv's totals (all snapshot steps) are then the
                     * analysis's (which leaves warm-up rows out) */
                    "[analysis]\nwarmup_steps = 0\n";
  ck_assert_int_eq(tu_write_file(ini, exp, strlen(exp)), 0);
  snprintf(cmd, sizeof cmd, "'%s' run '%s' --out '%s/out' --quiet", tu_bin(), ini, dir);
  char *out = NULL;
  int rc = tu_run(cmd, &out);
  ck_assert_msg(rc == 0, "%s", out);
  free(out);
  snprintf(path, sizeof path, "%s/out/steps.csv", dir);
  fp8_steps_table t;
  fp8_analysis a;
  fp8_recommendations r;
  ck_assert_msg(fp8_steps_load(path, &t, err, sizeof err) == FP8_OK, "%s", err);
  ck_assert_uint_eq(t.ngroups, t.ntensors * 5);
  ck_assert_int_eq(fp8_analysis_compute(&t, &a, err, sizeof err), FP8_OK);
  fp8_budgets bud = {.value = 1e-5, .step = 0.01};
  ck_assert_int_eq(fp8_analysis_recommend(&a, &bud, &r, err, sizeof err), FP8_OK);
  ck_assert_uint_eq(r.ntensor_recs, t.ntensors);
  /* summary.csv's rows are in the same order as our groups: compare the rates */
  snprintf(path, sizeof path, "%s/out/summary.csv", dir);
  char *sum = tu_read_file(path, NULL);
  ck_assert_ptr_nonnull(sum);
  char *line = strchr(sum, '\n') + 1;
  for (size_t i = 0; i < a.nstats; i++) {
    char *f[32];
    int nf = 0;
    char *end = strchr(line, '\n');
    *end = 0;
    for (char *p = line;; p++) {
      if (nf == 0 || p[-1] == 0) f[nf++] = p;
      if (!*p) break;
      if (*p == ',') *p = 0;
    }
    const fp8_group_stats *s = &a.stats[i];
    ck_assert_str_eq(f[0], s->group->tensor);
    ck_assert_str_eq(f[2], s->group->key.recipe);
    ck_assert_int_eq(atoll(f[8]), s->steps);
    ck_assert_double_eq_tol(atof(f[15]), s->overflow_rate, 1e-8 * s->overflow_rate + 1e-300);
    ck_assert_double_eq_tol(atof(f[16]), s->underflow_rate, 1e-8 * s->underflow_rate + 1e-300);
    ck_assert_int_eq(atoll(f[18]), s->steps_with_overflow);
    double snr_min = atof(f[21]);
    ck_assert_double_eq_tol(s->snr_min, snr_min > 200 ? 200 : snr_min, 1e-6);
    ck_assert(s->snr_min <= s->snr_p5 && s->snr_p5 <= s->snr_median);
    if (s->group->key.kind == FP8_KIND_CURRENT) ck_assert_double_eq(s->lag_worst, 0.0);
    line = end + 1;
  }
  free(sum);
  ck_assert_int_eq(fp8_analysis_write(&a, dir, err, sizeof err), FP8_OK);
  ck_assert_int_eq(fp8_recommend_write(&r, dir, err, sizeof err), FP8_OK);
  fp8_recommendations_free(&r);
  fp8_analysis_free(&a);
  fp8_steps_free(&t);
  tu_rmtree(dir);
  free(dir);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("analysis");
  TCase *tc = tcase_create("stats");
  tcase_add_test(tc, quantiles_by_hand);
  tcase_add_test(tc, longest_run);
  tcase_add_test(tc, scale_lag_by_hand);
  tcase_add_test(tc, mean_ci_reference);
  tcase_add_test(tc, numbers_parse_exactly);
  tcase_add_test(tc, group_snr_statistics);
  tcase_add_test(tc, group_rates_runs_lag);
  suite_add_tcase(s, tc);
  tc = tcase_create("stepscsv");
  tcase_add_test(tc, load_and_group);
  tcase_add_test(tc, malformed_lines);
  tcase_add_test(tc, malformed_consistency);
  tcase_add_test(tc, load_from_file);
  tcase_add_test(tc, block_columns);
  tcase_add_test(tc, saturation_columns_and_warmup);
  tcase_add_test(tc, sr_expected_columns);
  tcase_add_test(tc, stream_series_by_hand);
  suite_add_tcase(s, tc);
  tc = tcase_create("recommend");
  tcase_add_test(tc, recommendations_rules);
  tcase_add_test(tc, csv_outputs);
  tcase_add_test(tc, pipeline_on_a_run);
  tcase_set_timeout(tc, 120);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run_suite(suite()); }
