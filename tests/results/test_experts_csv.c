/* test_experts_csv.c: experts.csv's writer and reader (src/results/experts_csv.c, issue 40):
 * rows written to the exact text worked out here (an expert that never ran: empty min and max),
 * nothing left beside the file; read back field for field; a missing file (FP8_EIO); and every
 * refusal of the reader with its exact message ("<path>:<line>: <what>"), the columns checked
 * on their own and against each other (steps_run * tokens_min <= tokens <= steps_run *
 * tokens_max, group and expert as the GEMM's name gives them, names in order). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tables.h"
#include "testutil.h"
#include "tu_dir.h"
#include "util.h" /* FP8_ERRLEN */

#define HEADER "gemm,group,expert,steps,steps_run,tokens,tokens_min,tokens_max\n"

START_TEST(experts_write_read) {
  const fp8_expert_row rows[3] = {
      {"model.layers.0.mlp.experts.0.gate_up_proj", "model.layers.0.mlp.experts.*.gate_up_proj",
       0, 10, 7, 123456789012LL, 1, 99999999999LL, 0},
      {"model.layers.0.mlp.experts.12.gate_up_proj", "model.layers.0.mlp.experts.*.gate_up_proj",
       12, 10, 0, 0, -1, -1, 0},
      {"te.linear_fc1.experts.3", "te.linear_fc1.experts.*", 3, 0, 0, 0, -1, -1, 0}};
  char err[FP8_ERRLEN] = "";
  ck_assert_msg(fp8_experts_csv_write(g_dir, rows, 3, err, sizeof err) == FP8_OK, "%s", err);
  ck_assert_int_eq(tu_count_entries(g_dir), 1); /* the temporary renamed, nothing else */
  char *got = tu_read_file(path_in("experts.csv"), NULL);
  ck_assert_str_eq(got, HEADER
                   "model.layers.0.mlp.experts.0.gate_up_proj,model.layers.0.mlp.experts.*."
                   "gate_up_proj,0,10,7,123456789012,1,99999999999\n"
                   "model.layers.0.mlp.experts.12.gate_up_proj,model.layers.0.mlp.experts.*."
                   "gate_up_proj,12,10,0,0,,\n"
                   "te.linear_fc1.experts.3,te.linear_fc1.experts.*,3,0,0,0,,\n");
  free(got);
  fp8_experts_table t;
  ck_assert_msg(fp8_experts_csv_load(path_in("experts.csv"), &t, err, sizeof err) == FP8_OK, "%s",
                err);
  ck_assert_str_eq(t.path, path_in("experts.csv"));
  ck_assert_uint_eq(t.nrows, 3);
  for (size_t i = 0; i < 3; i++) {
    ck_assert_str_eq(t.rows[i].gemm, rows[i].gemm);
    ck_assert_str_eq(t.rows[i].group, rows[i].group);
    ck_assert_int_eq(t.rows[i].expert, rows[i].expert);
    ck_assert_int_eq(t.rows[i].steps, rows[i].steps);
    ck_assert_int_eq(t.rows[i].steps_run, rows[i].steps_run);
    ck_assert_int_eq(t.rows[i].tokens, rows[i].tokens);
    ck_assert_int_eq(t.rows[i].tokens_min, rows[i].tokens_min);
    ck_assert_int_eq(t.rows[i].tokens_max, rows[i].tokens_max);
    ck_assert_int_eq(t.rows[i].line, (int64_t)i + 2);
  }
  fp8_experts_csv_free(&t);
  fp8_experts_csv_free(&t); /* twice: safe */
  /* no rows: the header alone, read as an empty table */
  ck_assert_int_eq(fp8_experts_csv_write(g_dir, NULL, 0, err, sizeof err), FP8_OK);
  got = tu_read_file(path_in("experts.csv"), NULL);
  ck_assert_str_eq(got, HEADER);
  free(got);
  ck_assert_int_eq(fp8_experts_csv_load(path_in("experts.csv"), &t, err, sizeof err), FP8_OK);
  ck_assert_uint_eq(t.nrows, 0);
  fp8_experts_csv_free(&t);
  /* missing: FP8_EIO, the table empty */
  char want[1024];
  snprintf(want, sizeof want, "%s: cannot open: No such file or directory", path_in("none.csv"));
  ck_assert_int_eq(fp8_experts_csv_load(path_in("none.csv"), &t, err, sizeof err), FP8_EIO);
  ck_assert_str_eq(err, want);
  ck_assert_ptr_null(t.rows);
  ck_assert_ptr_null(t.path);
}
END_TEST

/* The refusals: the file's data lines (after the header) and the message after "<path>:". */
typedef struct {
  const char *rows;
  const char *msg;
} bad_case;

#define UP0 "m.experts.0.up,m.experts.*.up,0,"
static const bad_case BAD[] = {
    {"m.experts.0.up,m.experts.*.up,0,1,1,1,1\n", "2: expected 8 fields, found 7"},
    {UP0 "1,1,1,1,1,1\n", "2: expected 8 fields, found more than 8"},
    {"m.attn,m.attn,0,1,1,1,1,1\n",
     "2: column gemm: expected an expert GEMM (a component 'experts' then the index), found "
     "'m.attn'"},
    {"/m.experts.0.up,/m.experts.*.up,0,1,1,1,1,1\n",
     "2: column gemm: /m.experts.0.up: name starts with '/'"},
    {"m.experts.0.up,m.experts.0.up,0,1,1,1,1,1\n",
     "2: column group: expected 'm.experts.*.up', found 'm.experts.0.up'"},
    {"m.experts.0.up,m.experts.*.up,1,1,1,1,1,1\n",
     "2: column expert: expected 0 (the GEMM's index), found '1'"},
    {UP0 "-1,0,0,,\n", "2: column steps: expected an integer >= 0, found '-1'"},
    {UP0 "2,x,0,,\n", "2: column steps_run: expected an integer >= 0, found 'x'"},
    {UP0 "2,0,1.5,,\n", "2: column tokens: expected an integer >= 0, found '1.5'"},
    {UP0 "2,3,3,1,1\n", "2: column steps_run: expected at most steps, found '3'"},
    {UP0 "2,0,0,1,\n", "2: column tokens_min: expected empty (steps_run is 0), found '1'"},
    {UP0 "2,0,0,,1\n", "2: column tokens_max: expected empty (steps_run is 0), found '1'"},
    {UP0 "2,0,5,,\n", "2: column tokens: expected 0 (steps_run is 0), found '5'"},
    {UP0 "2,1,5,,5\n", "2: column tokens_min: expected an integer >= 1, found ''"},
    {UP0 "2,1,5,0,5\n", "2: column tokens_min: expected an integer >= 1, found '0'"},
    {UP0 "2,2,5,3,2\n", "2: column tokens_max: expected at least tokens_min, found '2'"},
    /* 2 steps run, each 1..3 tokens: 2..6 in total; 7 and 1 cannot be */
    {UP0 "2,2,7,1,3\n",
     "2: column tokens: expected a total between steps_run * tokens_min and steps_run * "
     "tokens_max, found '7'"},
    {UP0 "2,2,1,1,3\n",
     "2: column tokens: expected a total between steps_run * tokens_min and steps_run * "
     "tokens_max, found '1'"},
    /* products past int64 are not computed: 3 steps of 3e18 are fine for a total of 9e18 (line 2
     * passes, line 3 fails) */
    {UP0 "3,3,9000000000000000000,3000000000000000000,3000000000000000000\n"
         "m.experts.1.up,m.experts.*.up,1,1,1,1,2,1\n",
     "3: column tokens_max: expected at least tokens_min, found '1'"},
    {"m.experts.1.up,m.experts.*.up,1,1,0,0,,\n" UP0 "1,0,0,,\n",
     "3: gemm m.experts.0.up after m.experts.1.up: the rows are in name order, each GEMM once"},
    {UP0 "1,0,0,,\n" UP0 "1,0,0,,\n",
     "3: gemm m.experts.0.up after m.experts.0.up: the rows are in name order, each GEMM once"},
    {UP0 "1,0,0,,\n\n", "3: empty line"},
};

START_TEST(experts_bad) {
  const bad_case *c = &BAD[_i];
  char text[1024];
  snprintf(text, sizeof text, HEADER "%s", c->rows);
  put_text("experts.csv", text);
  const char *p = path_in("experts.csv");
  char want[2048], err[FP8_ERRLEN] = "";
  snprintf(want, sizeof want, "%s:%s", p, c->msg);
  fp8_experts_table t;
  ck_assert_int_eq(fp8_experts_csv_load(p, &t, err, sizeof err), FP8_EFORMAT);
  ck_assert_str_eq(err, want);
  ck_assert_ptr_null(t.rows);
  ck_assert_uint_eq(t.nrows, 0);
  fp8_experts_csv_free(&t);
}
END_TEST

START_TEST(experts_bad_header) {
  put_text("experts.csv", "gemm,group,expert,steps,steps_run,tokens,tokens_min\n");
  const char *p = path_in("experts.csv");
  char want[1024], err[FP8_ERRLEN] = "";
  snprintf(want, sizeof want, "%s:1: not a experts.csv header (expected 'gemm,group,expert,steps,"
           "steps_run,tokens,tokens_min,tokens_max')", p);
  fp8_experts_table t;
  ck_assert_int_eq(fp8_experts_csv_load(p, &t, err, sizeof err), FP8_EFORMAT);
  ck_assert_str_eq(err, want);
  put_text("experts.csv", "");
  snprintf(want, sizeof want, "%s:1: empty file", p);
  ck_assert_int_eq(fp8_experts_csv_load(p, &t, err, sizeof err), FP8_EFORMAT);
  ck_assert_str_eq(err, want);
}
END_TEST

int main(void) {
  Suite *s = suite_create("experts_csv");
  TCase *tc = tcase_create("experts");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, experts_write_read);
  tcase_add_loop_test(tc, experts_bad, 0, (int)(sizeof BAD / sizeof *BAD));
  tcase_add_test(tc, experts_bad_header);
  suite_add_tcase(s, tc);
  return tu_run_suite(s);
}
