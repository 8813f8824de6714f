/* test_amax_csv.c: the amax.csv reader (src/trace/amaxcsv.c): step order, the micro and te_scale
 * columns, bad columns, rows and headers. Every input is written byte by byte here, so the reader
 * is tested independently of the writer (which gets its own round-trip test). Malformed inputs
 * must give the right status and a message naming the file and the tensor, line or byte offset;
 * truncated files must fail cleanly at every length. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "trace.h"
#include "trace_helpers.h"
#include "util.h"

/* ------------------------------------------------------------------ amax.csv */

/* A file in step order whose tensors come in module order, not name order, the same at every
 * step (as captures write it): rows sorted by step, then name; the names seen at every step. */
START_TEST(amax_step_order) {
  char *dir = tu_mkdtemp();
  const char *csv = "step,tensor,amax\n0,z.w,1\n0,b.x,2\n0,m.y,3\n1,z.w,4\n1,b.x,5\n1,m.y,6\n"
                    "2,z.w,7\n2,m.y,8\n2,b.x,9\n";
  write_in(dir, "amax.csv", csv, strlen(csv));
  fp8_trace tr;
  char err[FP8_ERRLEN] = "";
  ck_assert_msg(fp8_trace_open(dir, &tr, err, sizeof err) == FP8_OK, "%s", err);
  ck_assert_uint_eq(tr.namax_names, 3);
  ck_assert_str_eq(tr.amax_names[0], "b.x");
  ck_assert_str_eq(tr.amax_names[1], "m.y");
  ck_assert_str_eq(tr.amax_names[2], "z.w");
  static const float want[9] = {2, 3, 1, 5, 6, 4, 9, 8, 7}; /* (step, name) order */
  ck_assert_uint_eq(tr.namax, 9);
  for (int i = 0; i < 9; i++) {
    ck_assert_int_eq(tr.amax[i].step, i / 3);
    ck_assert_int_eq(tr.amax[i].tensor, i % 3);
    ck_assert(tr.amax[i].amax == want[i]);
  }
  fp8_trace_close(&tr);
  tu_rmtree(dir);
  free(dir);
}
END_TEST

START_TEST(amax_good) {
  char *dir = tu_mkdtemp();
  char v[32];
  snprintf(v, sizeof v, "%.9g", 0.1f); /* 0.100000001 */
  char csv[512];
  snprintf(csv, sizeof csv,
           "step,tensor,amax\n"
           "2,b.weight,%s\n"
           "0,b.weight,inf\n"
           "0,a.input,0\n"
           "2,a.input,1.40129846e-45\n"
           "1,a.input,3.40282347e+38\r\n"
           "10,a.input,448\n"
           "\n\n",
           v);
  write_in(dir, "amax.csv", csv, strlen(csv));
  fp8_trace tr;
  char err[FP8_ERRLEN] = "";
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_OK);
  ck_assert_uint_eq(tr.nsteps, 0);
  ck_assert_uint_eq(tr.namax_names, 2);
  ck_assert_str_eq(tr.amax_names[0], "a.input");
  ck_assert_str_eq(tr.amax_names[1], "b.weight");
  ck_assert_uint_eq(tr.namax, 6);
  static const int64_t steps[6] = {0, 0, 1, 2, 2, 10};
  static const int32_t idx[6] = {0, 1, 0, 0, 1, 0};
  for (int i = 0; i < 6; i++) {
    ck_assert_int_eq(tr.amax[i].step, steps[i]);
    ck_assert_int_eq(tr.amax[i].tensor, idx[i]);
  }
  ck_assert(same_bits(tr.amax[0].amax, 0.0f));
  ck_assert(isinf(tr.amax[1].amax) && tr.amax[1].amax > 0);
  ck_assert(same_bits(tr.amax[2].amax, 3.40282347e+38f));
  ck_assert(same_bits(tr.amax[3].amax, ldexpf(1.0f, -149)));
  ck_assert(same_bits(tr.amax[4].amax, 0.1f)); /* %.9g round trip, bit-exact */
  ck_assert(same_bits(tr.amax[5].amax, 448.0f));
  fp8_trace_close(&tr);
  ck_assert_ptr_null(tr.amax);

  /* header only: no rows */
  write_in(dir, "amax.csv", "step,tensor,amax", 16);
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_OK);
  ck_assert_uint_eq(tr.namax, 0);
  fp8_trace_close(&tr);
  tu_rmtree(dir);
  free(dir);
}
END_TEST

/* The optional columns micro and te_scale (issue 17): rows sorted by step, then micro, then
 * tensor; te_scale empty is 0 (not given); the same key in two micro-batches is no duplicate. */
START_TEST(amax_micro_te_scale) {
  char *dir = tu_mkdtemp();
  const char *csv = "step,tensor,amax,micro,te_scale\n"
                    "1,a.input,2,0,224\n"
                    "0,b.weight,4,1,\n"
                    "0,a.input,4,1,0.100000001\n"
                    "0,a.input,1,0,1\n"
                    "0,b.weight,3,0,1.5e-40\n";
  write_in(dir, "amax.csv", csv, strlen(csv));
  fp8_trace tr;
  char err[FP8_ERRLEN] = "";
  ck_assert_msg(fp8_trace_open(dir, &tr, err, sizeof err) == FP8_OK, "%s", err);
  ck_assert_uint_eq(tr.namax, 5);
  static const int64_t steps[5] = {0, 0, 0, 0, 1}, micro[5] = {0, 0, 1, 1, 0};
  static const int32_t idx[5] = {0, 1, 0, 1, 0};
  const float amax[5] = {1, 3, 4, 4, 2}, te[5] = {1, 1.5e-40f, 0.1f, 0, 224};
  for (int i = 0; i < 5; i++) {
    ck_assert_int_eq(tr.amax[i].step, steps[i]);
    ck_assert_int_eq(tr.amax[i].micro, micro[i]);
    ck_assert_int_eq(tr.amax[i].tensor, idx[i]);
    ck_assert(same_bits(tr.amax[i].amax, amax[i]));
    ck_assert_msg(same_bits(tr.amax[i].te_scale, te[i]), "row %d: %.9g", i, tr.amax[i].te_scale);
  }
  fp8_trace_close(&tr);
  /* each column alone; without micro every row is micro 0 */
  const char *m = "step,tensor,amax,micro\n0,a,1,7\n";
  write_in(dir, "amax.csv", m, strlen(m));
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_OK);
  ck_assert_int_eq(tr.amax[0].micro, 7);
  ck_assert(same_bits(tr.amax[0].te_scale, 0.0f));
  fp8_trace_close(&tr);
  const char *t = "step,tensor,amax,te_scale\n0,a,1,448\n";
  write_in(dir, "amax.csv", t, strlen(t));
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_OK);
  ck_assert_int_eq(tr.amax[0].micro, 0);
  ck_assert(same_bits(tr.amax[0].te_scale, 448.0f));
  fp8_trace_close(&tr);
  tu_rmtree(dir);
  free(dir);
}
END_TEST

/* Errors of the optional columns: header, body, the message after "amax.csv:". */
typedef struct {
  const char *header, *body, *want;
} csv_bad_cols;

static const csv_bad_cols CSV_BAD_COLS[] = {
    {"step,tensor,amax,micro", "0,a,1,\n", "2: empty micro"},
    {"step,tensor,amax,micro", "0,a,1,-1\n", "2: micro '-1' is not a non-negative integer"},
    {"step,tensor,amax,micro", "0,a,1,1.0\n", "2: micro '1.0' is not a non-negative integer"},
    {"step,tensor,amax,micro", "0,a,1,99999999999999999999\n",
     "2: micro '99999999999999999999' too large"},
    /* a row keeps its micro-batch in 32 bits (issue 27: 24 bytes a row) */
    {"step,tensor,amax,micro", "0,a,1,2147483648\n",
     "2: micro '2147483648' too large (at most 2147483647)"},
    /* duplicates found by sorting, their lines by reading again: the smallest duplicate line,
     * its key's first line, also when the file is out of step order */
    {"step,tensor,amax,micro", "3,a,1,2147483647\n0,b,1,0\n3,a,1,2147483647\n0,b,1,0\n",
     "4: duplicate row for step 3, micro 2147483647, tensor a (first at line 2)"},
    {"step,tensor,amax,micro", "0,a,1\n", "2: expected 4 fields, found 3"},
    {"step,tensor,amax,micro,te_scale", "0,a,1,0\n", "2: expected 5 fields, found 4"},
    {"step,tensor,amax,micro,te_scale", "0,a,1,0,1,2\n", "2: expected 5 fields, found 6"},
    {"step,tensor,amax,micro", "0,a,1,0\n0,b,1,0\n0,a,1,1\n0,a,2,0\n",
     "5: duplicate row for step 0, micro 0, tensor a (first at line 2)"},
    {"step,tensor,amax,te_scale", "0,a,1,0\n", "2: te_scale '0' is zero"},
    {"step,tensor,amax,te_scale", "0,a,1,-0\n", "2: te_scale '-0' is zero"},
    {"step,tensor,amax,te_scale", "0,a,1,-2\n", "2: te_scale '-2' is negative"},
    {"step,tensor,amax,te_scale", "0,a,1,nan\n", "2: te_scale 'nan' is NaN"},
    {"step,tensor,amax,te_scale", "0,a,1,inf\n", "2: te_scale 'inf' is infinite"},
    {"step,tensor,amax,te_scale", "0,a,1,1e39\n", "2: te_scale '1e39' overflows float"},
    {"step,tensor,amax,te_scale", "0,a,1,1e-50\n", "2: te_scale '1e-50' underflows float"},
    {"step,tensor,amax,te_scale", "0,a,1,abc\n", "2: te_scale 'abc' is not a number"},
    {"step,tensor,amax,te_scale", "0,a,1, 2\n", "2: te_scale ' 2' is not a number"},
    {"step,tensor,amax,micro,te_scale", "0,a,1,0,2x\n", "2: te_scale '2x' is not a number"},
    {"step,tensor,amax,te_scale,micro", "0,a,1,1,0\n",
     "1: expected header 'step,tensor,amax', optionally followed by ',micro', ',te_scale' or "
     "',micro,te_scale', found 'step,tensor,amax,te_scale,micro'"},
    {"step,tensor,amax,micro,", "0,a,1,0,\n", "1: expected header"},
};

START_TEST(amax_bad_cols) {
  const csv_bad_cols *c = &CSV_BAD_COLS[_i];
  char *dir = tu_mkdtemp();
  char csv[512];
  snprintf(csv, sizeof csv, "%s\n%s", c->header, c->body);
  write_in(dir, "amax.csv", csv, strlen(csv));
  fp8_trace tr;
  char err[FP8_ERRLEN] = "";
  int rc = fp8_trace_open(dir, &tr, err, sizeof err);
  ck_assert_msg(rc == FP8_EFORMAT, "case %d: rc %d (%s)", _i, rc, err);
  char want[512];
  snprintf(want, sizeof want, "%s/amax.csv:%s", dir, c->want);
  ck_assert_msg(strstr(err, want) == err, "case %d: '%s', want '%s'", _i, err, want);
  ck_assert_ptr_null(tr.amax);
  tu_rmtree(dir);
  free(dir);
}
END_TEST

typedef struct {
  const char *body; /* text after the header line */
  const char *want; /* after "amax.csv:" */
} csv_bad;

static const csv_bad CSV_BAD[] = {
    {"0,a,1\n1,a,abc\n", "3: amax 'abc' is not a number"},
    {"0,a,1.5x\n", "2: amax '1.5x' is not a number"},
    {"0,a,\n", "2: amax '' is not a number"},
    {"0,a, 1\n", "2: amax ' 1' is not a number"},
    {"0,a,nan\n", "2: amax 'nan' is NaN"},
    {"0,a,-1\n", "2: amax '-1' is negative"},
    {"0,a,-inf\n", "2: amax '-inf' is negative"},
    {"0,a,1e39\n", "2: amax '1e39' overflows float"},
    {"-3,a,1\n", "2: step '-3' is not a non-negative integer"},
    {"1.5,a,1\n", "2: step '1.5' is not a non-negative integer"},
    {",a,1\n", "2: step '' is not a non-negative integer"},
    {"99999999999999999999,a,1\n", "2: step '99999999999999999999' too large"},
    {"0,,1\n", "2: empty tensor name"},
    {"0,a,1,2\n", "2: expected 3 fields, found 4"},
    {"0,a\n", "2: expected 3 fields, found 2"},
    {"0,a,1\n\n1,a,2\n", "3: blank line"},
    {"0,a,1\n0,b,1\n5,a,2\n0,a,3\n", "5: duplicate row for step 0, tensor a (first at line 2)"},
    /* files in step order (sorted one step at a time): the duplicate with the smallest line */
    {"0,a,1\n0,b,1\n0,a,3\n1,a,1\n", "4: duplicate row for step 0, tensor a (first at line 2)"},
    {"0,b,1\n0,a,1\n0,b,2\n0,a,2\n", "4: duplicate row for step 0, tensor b (first at line 2)"},
    /* a name is checked where it first appears, after names seen before */
    {"0,a,1\n0,b,1\n1,a,1\n1,b,1\n1,c\x01,1\n", "6: tensor c\\x01: "},
};

START_TEST(amax_bad) {
  const csv_bad *c = &CSV_BAD[_i];
  char *dir = tu_mkdtemp();
  char csv[512];
  snprintf(csv, sizeof csv, "step,tensor,amax\n%s", c->body);
  write_in(dir, "amax.csv", csv, strlen(csv));
  fp8_trace tr;
  char err[FP8_ERRLEN] = "";
  int rc = fp8_trace_open(dir, &tr, err, sizeof err);
  ck_assert_msg(rc == FP8_EFORMAT, "case %d: rc %d (%s)", _i, rc, err);
  char want[256];
  snprintf(want, sizeof want, "%s/amax.csv:%s", dir, c->want);
  ck_assert_msg(strcmp(err, want) == 0 || strstr(err, want) == err, "case %d: '%s', want '%s'",
                _i, err, want);
  ck_assert_ptr_null(tr.amax);
  ck_assert_ptr_null(tr.dir);
  tu_rmtree(dir);
  free(dir);
}
END_TEST

/* A NUL byte is the file's error wherever it is, before any other error (the file is read a
 * line at a time: an earlier error must not hide it). */
START_TEST(amax_nul) {
  static const struct {
    const char *text;
    size_t len;
    const char *want;
  } cases[] = {
      {"step,tensor,amax\n0,a,1\n0,b\0,1\n", 30, "3: NUL byte in the file"},
      {"step,tensor,amax\n0,a,x\n0,b,1\n1,\0a,1\n", 36, "4: NUL byte in the file"},
      {"step,tensor\n0,a,1\n\n\n0,a\0", 24, "5: NUL byte in the file"},
      {"step,tensor,amax\n0,a,1\n\0", 24, "3: NUL byte in the file"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char *dir = tu_mkdtemp();
    write_in(dir, "amax.csv", cases[i].text, cases[i].len);
    fp8_trace tr;
    char err[FP8_ERRLEN] = "", want[256];
    ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_EFORMAT);
    snprintf(want, sizeof want, "%s/amax.csv:%s", dir, cases[i].want);
    ck_assert_msg(strcmp(err, want) == 0, "case %zu: '%s', want '%s'", i, err, want);
    tu_rmtree(dir);
    free(dir);
  }
}
END_TEST

START_TEST(amax_bad_header) {
  char *dir = tu_mkdtemp();
  fp8_trace tr;
  char err[FP8_ERRLEN] = "";
  static const char *texts[] = {"", "step,tensor\n0,a\n", "Step,Tensor,Amax\n", "\nstep,tensor,amax\n"};
  for (int i = 0; i < 4; i++) {
    write_in(dir, "amax.csv", texts[i], strlen(texts[i]));
    ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_EFORMAT);
    ck_assert_msg(strstr(err, "amax.csv:1: expected header 'step,tensor,amax'"), "%d: %s", i, err);
  }
  tu_rmtree(dir);
  free(dir);
}
END_TEST

int main(void) {
  Suite *s = suite_create("amax_csv");
  TCase *tc = tcase_create("amax");
  tcase_add_test(tc, amax_good);
  tcase_add_test(tc, amax_step_order);
  tcase_add_test(tc, amax_nul);
  tcase_add_loop_test(tc, amax_bad, 0, (int)(sizeof CSV_BAD / sizeof CSV_BAD[0]));
  tcase_add_test(tc, amax_bad_header);
  tcase_add_test(tc, amax_micro_te_scale);
  tcase_add_loop_test(tc, amax_bad_cols, 0, (int)(sizeof CSV_BAD_COLS / sizeof CSV_BAD_COLS[0]));
  suite_add_tcase(s, tc);
  return tu_run_suite(s);
}
