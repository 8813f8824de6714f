/* test_tokens_csv.c: a trace folder's tokens.csv (src/trace/tokenscsv.c, issue 40): a good file
 * read into the table (rows sorted by step then GEMM, names sorted, each row's line), a GEMM
 * whose tensors only a snapshot holds, the ranks' tables and their merge (replicas summed per
 * step, the keep filter), and every refusal with its exact message, through fp8_trace_open
 * and through `fp8lab inspect` (exit 2, the one line). Files are written byte by byte here;
 * the expected tables and messages are worked out by hand in the comments. Also `fp8lab synth`
 * seeing tokens.csv as a trace's file (refused without --force, removed with it). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "synth.h"
#include "testutil.h"
#include "trace.h"
#include "tu_dir.h"
#include "util.h" /* FP8_ERRLEN */

/* amax.csv of the tests: two experts of m.experts.*.up (expert 1's weight only) and one of
 * m.experts.*.down, plus a dense GEMM. */
static const char AMAX[] = "step,tensor,amax\n"
                           "0,m.experts.0.up.input,1\n0,m.experts.0.up.weight,2\n"
                           "0,m.experts.1.up.weight,2\n0,m.experts.3.down.grad_output,4\n"
                           "0,m.attn.input,1\n";

static fp8_trace open_ok(const char *rel) {
  fp8_trace tr;
  char err[FP8_ERRLEN] = "";
  ck_assert_msg(fp8_trace_open(path_in(rel), &tr, err, sizeof err) == FP8_OK, "%s", err);
  return tr;
}

/* Rows out of step order, CRLF lines, trailing blank lines: sorted by step, then GEMM name
 *   names sorted: m.experts.0.up (0), m.experts.1.up (1), m.experts.3.down (2)
 *   file lines:   2: (1, up.1, 0)  3: (0, up.0, 5)  4: (0, down.3, 7)  5: (1, up.0, 9)
 *                 6: (0, up.1, 12)
 *   sorted:       (0, 0, 5, l3) (0, 1, 12, l6) (0, 2, 7, l4) (1, 0, 9, l5) (1, 1, 0, l2) */
START_TEST(tokens_good) {
  mkdir(path_in("t"), 0777);
  put_text("t/amax.csv", AMAX);
  put_text("t/tokens.csv", "step,gemm,tokens\r\n1,m.experts.1.up,0\r\n0,m.experts.0.up,5\n"
                           "0,m.experts.3.down,7\n1,m.experts.0.up,9\n0,m.experts.1.up,12\n\n\n");
  fp8_trace tr = open_ok("t");
  ck_assert_int_eq(tr.has_tokens, 1);
  ck_assert_int_eq(fp8_trace_has_tokens(&tr), 1);
  const fp8_tokens_table *t = fp8_trace_tokens(&tr, 0);
  ck_assert_ptr_eq(t, &tr.tokens);
  ck_assert_ptr_null(fp8_trace_tokens(&tr, 1)); /* a single-rank trace has rank 0 only */
  ck_assert_uint_eq(t->ngemms, 3);
  ck_assert_str_eq(t->gemms[0], "m.experts.0.up");
  ck_assert_str_eq(t->gemms[1], "m.experts.1.up");
  ck_assert_str_eq(t->gemms[2], "m.experts.3.down");
  static const int64_t step[5] = {0, 0, 0, 1, 1}, tok[5] = {5, 12, 7, 9, 0};
  static const int32_t gm[5] = {0, 1, 2, 0, 1};
  static const uint32_t line[5] = {3, 6, 4, 5, 2};
  ck_assert_uint_eq(t->nrows, 5);
  for (int i = 0; i < 5; i++) {
    ck_assert_int_eq(t->rows[i].step, step[i]);
    ck_assert_int_eq(t->rows[i].gemm, gm[i]);
    ck_assert_int_eq(t->rows[i].tokens, tok[i]);
    ck_assert_uint_eq(t->rows[i].line, line[i]);
  }
  fp8_trace_close(&tr);
  /* fp8lab inspect's line: 3 GEMMs, groups m.experts.*.up (experts 0, 1) and
   * m.experts.*.down (3); one of the 5 (step, gemm) rows has 0 tokens */
  char *out = NULL;
  ck_assert_int_eq(run_cli(&out, "inspect t"), 0);
  const char *l2 = strchr(out, '\n');
  ck_assert_ptr_nonnull(l2);
  ck_assert_msg(strncmp(l2 + 1, "tokens.csv: 3 expert GEMMs in 2 groups of 1 to 2 experts, 1 of 5 "
                                "expert-steps with zero tokens (20.0%)\n", 103) == 0, "%s", out);
  free(out);
  /* no tokens.csv: nothing, and the accessor says so */
  mkdir(path_in("n"), 0777);
  put_text("n/amax.csv", AMAX);
  tr = open_ok("n");
  ck_assert_int_eq(tr.has_tokens, 0);
  ck_assert_int_eq(fp8_trace_has_tokens(&tr), 0);
  ck_assert_ptr_null(fp8_trace_tokens(&tr, 0));
  fp8_trace_close(&tr);
  ck_assert_int_eq(run_cli(&out, "inspect n"), 0);
  ck_assert_ptr_null(strstr(out, "tokens.csv"));
  free(out);
  /* a header alone: a table of no rows */
  put_text("n/tokens.csv", "step,gemm,tokens\n");
  tr = open_ok("n");
  ck_assert_int_eq(tr.has_tokens, 1);
  ck_assert_uint_eq(tr.tokens.nrows, 0);
  ck_assert_uint_eq(tr.tokens.ngemms, 0);
  fp8_trace_close(&tr);
}
END_TEST

/* A GEMM whose tensors only the snapshots hold (the second snapshot: the first has none of
 * it), and a trace of snapshots alone. */
START_TEST(tokens_in_snapshots) {
  static const float x[2] = {1.0f, 2.0f};
  char err[FP8_ERRLEN];
  fp8_tensor_out a = {"m.experts.0.up.input", FP8_DTYPE_F32, 1, {2}, x};
  fp8_tensor_out b = {"m.experts.2.down.weight", FP8_DTYPE_F32, 1, {2}, x};
  mkdir(path_in("s"), 0777);
  ck_assert_int_eq(fp8_safetensors_write(path_in("s/step_0.safetensors"), &a, 1, NULL, err,
                                         sizeof err), FP8_OK);
  ck_assert_int_eq(fp8_safetensors_write(path_in("s/step_4.safetensors"), &b, 1, NULL, err,
                                         sizeof err), FP8_OK);
  put_text("s/tokens.csv", "step,gemm,tokens\n0,m.experts.0.up,3\n4,m.experts.2.down,1\n");
  fp8_trace tr = open_ok("s");
  ck_assert_uint_eq(tr.tokens.ngemms, 2);
  ck_assert_str_eq(tr.tokens.gemms[1], "m.experts.2.down");
  fp8_trace_close(&tr);
  /* with amax.csv beside them: its tensors and the snapshots' count alike */
  put_text("s/amax.csv", AMAX);
  put_text("s/tokens.csv", "step,gemm,tokens\n0,m.experts.3.down,3\n4,m.experts.2.down,1\n");
  tr = open_ok("s");
  ck_assert_uint_eq(tr.tokens.ngemms, 2);
  fp8_trace_close(&tr);
}
END_TEST

/* The refusals: tokens.csv's text, the message after "<path>:" (FP8_EFORMAT), by hand. */
typedef struct {
  const char *text;
  const char *msg;
} bad_case;

static const bad_case BAD[] = {
    {"", "1: expected header 'step,gemm,tokens', found an empty file"},
    {"step,gemm\n", "1: expected header 'step,gemm,tokens', found 'step,gemm'"},
    {"step,tensor,tokens\n0,m.experts.0.up,1\n",
     "1: expected header 'step,gemm,tokens', found 'step,tensor,tokens'"},
    {"step,gemm,tokens\n0,m.experts.0.up\n", "2: expected 3 fields, found 2"},
    {"step,gemm,tokens\n0,m.experts.0.up,1\n0,m.experts.1.up,1,2\n",
     "3: expected 3 fields, found 4"},
    {"step,gemm,tokens\n-1,m.experts.0.up,1\n", "2: step '-1' is not a non-negative integer"},
    {"step,gemm,tokens\n 1,m.experts.0.up,1\n", "2: step ' 1' is not a non-negative integer"},
    {"step,gemm,tokens\n9223372036854775808,m.experts.0.up,1\n",
     "2: step '9223372036854775808' too large"},
    {"step,gemm,tokens\n0,,1\n", "2: empty gemm name"},
    {"step,gemm,tokens\n0,m.experts.0.up,1.5\n", "2: tokens '1.5' is not a non-negative integer"},
    {"step,gemm,tokens\n0,m.experts.0.up,\n", "2: tokens '' is not a non-negative integer"},
    {"step,gemm,tokens\n0,m.experts.0.up,-3\n", "2: tokens '-3' is not a non-negative integer"},
    {"step,gemm,tokens\n0,m.experts.0.up,9223372036854775808\n",
     "2: tokens '9223372036854775808' too large"},
    {"step,gemm,tokens\n0,/m.experts.0.up,1\n", "2: gemm /m.experts.0.up: name starts with '/'"},
    {"step,gemm,tokens\n0,m.experts.0.up,1\n0,m.attn,1\n",
     "3: gemm m.attn is not an expert GEMM (a dotted component 'experts' followed by the expert "
     "index, as in model.layers.0.mlp.experts.3.gate_up_proj)"},
    {"step,gemm,tokens\n0,m.shared_experts.0.up,1\n",
     "2: gemm m.shared_experts.0.up is not an expert GEMM (a dotted component 'experts' followed "
     "by the expert index, as in model.layers.0.mlp.experts.3.gate_up_proj)"},
    {"step,gemm,tokens\n0,m.experts.0.up,1\n\n1,m.experts.0.up,1\n",
     "3: blank line (only trailing blank lines are allowed)"},
    {"step,gemm,tokens\n0,m.experts.0.up,1\n0,m.experts\0.1.up,1\n", "3: NUL byte in the file"},
    /* the line that repeats a (step, gemm), and the key's first line */
    {"step,gemm,tokens\n0,m.experts.0.up,1\n1,m.experts.0.up,2\n0,m.experts.0.up,3\n"
     "0,m.experts.0.up,4\n",
     "4: duplicate row for step 0, gemm m.experts.0.up (first at line 2)"},
    /* two repeated keys: the one repeated first in the file, whatever the sort order */
    {"step,gemm,tokens\n1,m.experts.0.up,1\n1,m.experts.0.up,2\n0,m.experts.0.up,1\n"
     "0,m.experts.0.up,1\n",
     "3: duplicate row for step 1, gemm m.experts.0.up (first at line 2)"},
    /* GEMMs without tensors: the first named in the file (5 at line 3, before 4 at line 4) */
    {"step,gemm,tokens\n0,m.experts.0.up,1\n0,m.experts.5.up,1\n0,m.experts.4.up,2\n"
     "1,m.experts.5.up,0\n",
     "3: gemm m.experts.5.up has no tensor in the trace (no m.experts.5.up.<role> in amax.csv "
     "or the snapshots)"},
    /* m.experts.1.up.weight is not a tensor `m.experts.1.<role>` of GEMM m.experts.1 */
    {"step,gemm,tokens\n0,m.experts.1,1\n",
     "2: gemm m.experts.1 has no tensor in the trace (no m.experts.1.<role> in amax.csv or the "
     "snapshots)"},
    /* a tensor's name is not its GEMM's */
    {"step,gemm,tokens\n0,m.experts.0.up.input,1\n",
     "2: gemm m.experts.0.up.input has no tensor in the trace (no m.experts.0.up.input.<role> in "
     "amax.csv or the snapshots)"},
};

static size_t text_len(const bad_case *c) {
  /* the NUL case holds a NUL: its length is the literal's, found by its two halves */
  size_t n = strlen(c->text);
  if (strstr(c->msg, "NUL byte")) n += 1 + strlen(c->text + n + 1);
  return n;
}

START_TEST(tokens_bad) {
  const bad_case *c = &BAD[_i];
  mkdir(path_in("b"), 0777);
  put_text("b/amax.csv", AMAX);
  put_file("b/tokens.csv", c->text, text_len(c));
  const char *dir = path_in("b");
  char want[2048], err[FP8_ERRLEN] = "";
  snprintf(want, sizeof want, "%s/tokens.csv:%s", dir, c->msg);
  fp8_trace tr;
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_EFORMAT);
  ck_assert_str_eq(err, want);
  /* the command line: exit 2, that line alone */
  char *out = NULL, full[2200];
  int rc = run_cli(&out, "inspect b");
  snprintf(full, sizeof full, "fp8lab: b/tokens.csv:%s\n", c->msg);
  ck_assert_int_eq(rc, 2);
  ck_assert_str_eq(out, full);
  free(out);
}
END_TEST

/* Rank folders, each with its own tokens.csv: each rank's table, and the merge by name
 *   rank_0: up.0 at 0: 5, 1: 0;  up.1 at 0: 2
 *   rank_1: up.0 at 0: 1, 1: 4;  down.3 at 1: 6   (up.0: a replica on both ranks)
 *   merged: (0, up.0, 5 + 1 = 6) (0, up.1, 2) (1, up.0, 0 + 4 = 4) (1, down.3, 6)
 *   names:  m.experts.0.up, m.experts.1.up, m.experts.3.down
 *   keep rank 1 only: (0, up.0, 1) (1, up.0, 4) (1, down.3, 6) */
static int keep_rank1(size_t r, const char *gemm, void *ctx) {
  (void)gemm;
  ++*(int *)ctx;
  return r == 1;
}

START_TEST(tokens_ranks) {
  mkdir(path_in("r"), 0777);
  mkdir(path_in("r/rank_0"), 0777);
  mkdir(path_in("r/rank_1"), 0777);
  put_text("r/rank_0/amax.csv", AMAX);
  put_text("r/rank_1/amax.csv", AMAX);
  put_text("r/rank_0/tokens.csv", "step,gemm,tokens\n0,m.experts.0.up,5\n0,m.experts.1.up,2\n"
                                  "1,m.experts.0.up,0\n");
  put_text("r/rank_1/tokens.csv", "step,gemm,tokens\n0,m.experts.0.up,1\n1,m.experts.0.up,4\n"
                                  "1,m.experts.3.down,6\n");
  fp8_trace tr = open_ok("r");
  ck_assert_int_eq(tr.has_tokens, 0); /* the folder of ranks has none of its own */
  ck_assert_int_eq(fp8_trace_has_tokens(&tr), 1);
  const fp8_tokens_table *t0 = fp8_trace_tokens(&tr, 0), *t1 = fp8_trace_tokens(&tr, 1);
  ck_assert_ptr_nonnull(t0);
  ck_assert_ptr_nonnull(t1);
  ck_assert_ptr_null(fp8_trace_tokens(&tr, 2));
  ck_assert_uint_eq(t0->nrows, 3);
  ck_assert_uint_eq(t1->ngemms, 2);
  ck_assert_str_eq(t1->gemms[1], "m.experts.3.down");
  fp8_tokens_table m;
  char err[FP8_ERRLEN] = "";
  ck_assert_int_eq(fp8_trace_tokens_merge(&tr, NULL, NULL, &m, err, sizeof err), FP8_OK);
  ck_assert_uint_eq(m.ngemms, 3);
  ck_assert_str_eq(m.gemms[0], "m.experts.0.up");
  ck_assert_str_eq(m.gemms[1], "m.experts.1.up");
  ck_assert_str_eq(m.gemms[2], "m.experts.3.down");
  static const int64_t st[4] = {0, 0, 1, 1}, tk[4] = {6, 2, 4, 6};
  static const int32_t gm[4] = {0, 1, 0, 2};
  ck_assert_uint_eq(m.nrows, 4);
  for (int i = 0; i < 4; i++) {
    ck_assert_int_eq(m.rows[i].step, st[i]);
    ck_assert_int_eq(m.rows[i].gemm, gm[i]);
    ck_assert_int_eq(m.rows[i].tokens, tk[i]);
    ck_assert_uint_eq(m.rows[i].line, 0);
  }
  fp8_tokens_free(&m);
  int calls = 0;
  ck_assert_int_eq(fp8_trace_tokens_merge(&tr, keep_rank1, &calls, &m, err, sizeof err), FP8_OK);
  ck_assert_int_eq(calls, 4); /* once per (rank, gemm): 2 + 2 */
  ck_assert_uint_eq(m.ngemms, 2);
  ck_assert_str_eq(m.gemms[1], "m.experts.3.down");
  static const int64_t st1[3] = {0, 1, 1}, tk1[3] = {1, 4, 6};
  static const int32_t gm1[3] = {0, 0, 1};
  ck_assert_uint_eq(m.nrows, 3);
  for (int i = 0; i < 3; i++) {
    ck_assert_int_eq(m.rows[i].step, st1[i]);
    ck_assert_int_eq(m.rows[i].gemm, gm1[i]);
    ck_assert_int_eq(m.rows[i].tokens, tk1[i]);
  }
  fp8_tokens_free(&m);
  fp8_trace_close(&tr);
  /* inspect counts the merge: 4 expert-steps, none with 0 tokens (rank 0's 0 for up.0 at step 1
   * is summed with rank 1's 4) */
  char *out = NULL;
  ck_assert_int_eq(run_cli(&out, "inspect r"), 0);
  ck_assert_msg(strstr(out, "\ntokens.csv: 3 expert GEMMs in 2 groups of 1 to 2 experts, 0 of 4 "
                            "expert-steps with zero tokens (0.0%)\n") != NULL, "%s", out);
  free(out);
  /* a rank's bad file names its own path */
  put_text("r/rank_1/tokens.csv", "step,gemm,tokens\n0,m.experts.9.up,1\n");
  ck_assert_int_eq(fp8_trace_open(path_in("r"), &tr, err, sizeof err), FP8_EFORMAT);
  char want[1024];
  snprintf(want, sizeof want, "%s/rank_1/tokens.csv:2: gemm m.experts.9.up has no tensor in "
           "the trace (no m.experts.9.up.<role> in amax.csv or the snapshots)", path_in("r"));
  ck_assert_str_eq(err, want);
  /* a tokens.csv beside the rank folders belongs to no rank */
  put_text("r/rank_1/tokens.csv", "step,gemm,tokens\n");
  put_text("r/tokens.csv", "step,gemm,tokens\n");
  ck_assert_int_eq(fp8_trace_open(path_in("r"), &tr, err, sizeof err), FP8_EFORMAT);
  snprintf(want, sizeof want, "%s: holds both a single-rank trace (tokens.csv) and rank folders "
           "(rank_0/); a trace is one or the other", path_in("r"));
  ck_assert_str_eq(err, want);
}
END_TEST

/* fp8lab synth: tokens.csv is one of a trace's files: refused without --force, removed with it
 * (fp8_synth_remove_trace), the other files kept. */
START_TEST(tokens_synth_force) {
  mkdir(path_in("y"), 0777);
  put_text("y/tokens.csv", "step,gemm,tokens\n");
  put_text("y/tokens.csv.bak", "k");
  char err[FP8_ERRLEN] = "";
  ck_assert_int_eq(fp8_synth_write("llm", path_in("y"), 2, 1, err, sizeof err), FP8_EINVAL);
  ck_assert_ptr_nonnull(strstr(err, "already holds a trace (tokens.csv): a new one"));
  put_text("y/amax.csv", "step,tensor,amax\n");
  ck_assert_int_eq(fp8_synth_write("llm", path_in("y"), 2, 1, err, sizeof err), FP8_EINVAL);
  ck_assert_ptr_nonnull(strstr(err, "already holds a trace (amax.csv and tokens.csv): a new one"));
  put_text("y/step_3.safetensors", "x");
  ck_assert_int_eq(fp8_synth_write("llm", path_in("y"), 2, 1, err, sizeof err), FP8_EINVAL);
  ck_assert_ptr_nonnull(strstr(err, "already holds a trace (1 snapshot, amax.csv and tokens.csv): a new one"));
  char *out = NULL;
  ck_assert_int_eq(run_cli(&out, "synth llm y --steps 2"), 2);
  free(out);
  ck_assert_int_eq(run_cli(&out, "synth llm y --steps 2 --force"), 0);
  free(out);
  struct stat sb;
  ck_assert_int_ne(stat(path_in("y/tokens.csv"), &sb), 0);
  ck_assert_int_eq(stat(path_in("y/tokens.csv.bak"), &sb), 0);
  fp8_trace tr = open_ok("y");
  ck_assert_int_eq(tr.has_tokens, 0);
  fp8_trace_close(&tr);
}
END_TEST

int main(void) {
  Suite *s = suite_create("tokens_csv");
  TCase *tc = tcase_create("tokens");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, tokens_good);
  tcase_add_test(tc, tokens_in_snapshots);
  tcase_add_loop_test(tc, tokens_bad, 0, (int)(sizeof BAD / sizeof *BAD));
  tcase_add_test(tc, tokens_ranks);
  tcase_add_test(tc, tokens_synth_force);
  suite_add_tcase(s, tc);
  return tu_run_suite(s);
}
