/* test_experts.c: experts.csv of `fp8lab run` (src/run/run_experts.c, issue 40) on hand-made
 * Mixture-of-Experts traces (amax.csv and tokens.csv written here), every row worked out by hand
 * in the comments: all steps, a `steps` selection, a `tensors` selection (a GEMM kept by any
 * of its tensors), an expert that never ran, a step tokens.csv does not cover, two ranks
 * holding the same GEMM (data-parallel replicas: tokens summed per step) beside an expert only
 * one rank holds, a rank selection; run.json's outputs; no experts.csv without tokens.csv; the
 * file read back by its reader (src/results). */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "run_helpers.h"
#include "tables.h"
#include "testutil.h"
#include "tu_dir.h"
#include "util.h" /* FP8_ERRLEN */

static const char HEADER[] = "gemm,group,expert,steps,steps_run,tokens,tokens_min,tokens_max\n";

/* The single-rank trace, steps 0..5 of amax.csv (the amaxes do not matter to experts.csv):
 *   m.l0.experts.0.up, m.l0.experts.1.up, m.l0.experts.2.up (input, weight),
 *   m.l1.experts.10.down (grad_output);
 * snapshots of m.attn.input (not an expert) at steps 0, 2 and 5 (a steps selection must take
 * a snapshot step); and tokens.csv (-: no row):
 *   step   e0  e1  e2  d10
 *   0       4   0   0    3
 *   1       0   6   0    -
 *   2       8   2   0    5
 *   3       1   0   0    0
 *   4       0   3   0    2
 *   5       7   9   0    1 */
static void write_moe_trace(void) {
  mkdir(path_in("tr"), 0777);
  char amax[4096];
  int o = snprintf(amax, sizeof amax, "step,tensor,amax\n");
  static const char *const tensors[] = {"m.l0.experts.0.up.input", "m.l0.experts.0.up.weight",
                                        "m.l0.experts.1.up.input", "m.l0.experts.1.up.weight",
                                        "m.l0.experts.2.up.input", "m.l0.experts.2.up.weight",
                                        "m.l1.experts.10.down.grad_output"};
  for (int s = 0; s < 6; s++)
    for (int k = 0; k < 7; k++)
      o += snprintf(amax + o, sizeof amax - (size_t)o, "%d,%s,%d\n", s, tensors[k], 1 + s + k);
  put_text("tr/amax.csv", amax);
  static const float x[4] = {1.0f, -2.0f, 0.5f, 3.0f};
  static const int snaps[3] = {0, 2, 5};
  for (int k = 0; k < 3; k++) {
    char rel[64];
    snprintf(rel, sizeof rel, "tr/step_%d.safetensors", snaps[k]);
    write_f32_step(rel, "m.attn.input", x, 4);
  }
  static const int tok[6][4] = {{4, 0, 0, 3}, {0, 6, 0, -1}, {8, 2, 0, 5},
                                {1, 0, 0, 0}, {0, 3, 0, 2}, {7, 9, 0, 1}};
  static const char *const gemms[4] = {"m.l0.experts.0.up", "m.l0.experts.1.up",
                                       "m.l0.experts.2.up", "m.l1.experts.10.down"};
  char csv[2048];
  o = snprintf(csv, sizeof csv, "step,gemm,tokens\n");
  for (int s = 0; s < 6; s++)
    for (int g = 3; g >= 0; g--) /* not in name order: the file's order is not the output's */
      if (tok[s][g] >= 0)
        o += snprintf(csv + o, sizeof csv - (size_t)o, "%d,%s,%d\n", s, gemms[g], tok[s][g]);
  put_text("tr/tokens.csv", csv);
}

static void run_ini(const char *name, const char *extra, const char *dir) {
  char ini[512], rel[64];
  snprintf(ini, sizeof ini, "[trace]\npath = tr\n%s[recipe.d]\nkind = delayed\n[output]\ndir = %s\n",
           extra, dir);
  snprintf(rel, sizeof rel, "%s.ini", name);
  put_text(rel, ini);
  char *out = NULL;
  int rc = run_cli(&out, "run %s --quiet --no-report", rel);
  ck_assert_msg(rc == 0, "%s: exit %d: %s", rel, rc, out);
  free(out);
}

/* 1 when run.json's outputs list name. */
static int listed(const char *dir, const char *name) {
  char rel[128];
  snprintf(rel, sizeof rel, "%s/run.json", dir);
  json_error_t je;
  json_t *j = json_load_file(path_in(rel), 0, &je);
  ck_assert_ptr_nonnull(j);
  json_t *outs = json_object_get(j, "outputs");
  int hit = 0;
  for (size_t i = 0; i < json_array_size(outs); i++)
    hit |= strcmp(json_string_value(json_array_get(outs, i)), name) == 0;
  json_decref(j);
  return hit;
}

/* All six steps:
 *   e0:  6 steps; ran at 0 (4), 2 (8), 3 (1), 5 (7): 4 steps, 20 tokens, min 1, max 8
 *   e1:  6 steps; ran at 1 (6), 2 (2), 4 (3), 5 (9): 4 steps, 20 tokens, min 2, max 9
 *   e2:  6 steps; never ran: 0 steps, 0 tokens, min and max empty
 *   d10: 5 steps (no row at 1); ran at 0 (3), 2 (5), 4 (2), 5 (1): 4 steps, 11, min 1, max 5
 * steps = 1-4:
 *   e0:  4 steps; ran at 2 (8), 3 (1): 2, 9, 1, 8
 *   e1:  4 steps; ran at 1 (6), 2 (2), 4 (3): 3, 11, 2, 6
 *   e2:  4 steps; never
 *   d10: 3 steps (2, 3, 4); ran at 2 (5), 4 (2): 2, 7, 2, 5
 * steps = 0-5:5 (steps 0 and 5):
 *   e0: 2 steps, ran both: 2, 11, 4, 7;  e1: 2, ran at 5: 1, 9, 9, 9;  e2: 2, never;
 *   d10: 2, ran both: 2, 4, 1, 3 */
START_TEST(experts_single_rank) {
  write_moe_trace();
  run_ini("all", "", "all");
  char *got = read_out("all/experts.csv");
  char want[2048];
  snprintf(want, sizeof want, "%s"
           "m.l0.experts.0.up,m.l0.experts.*.up,0,6,4,20,1,8\n"
           "m.l0.experts.1.up,m.l0.experts.*.up,1,6,4,20,2,9\n"
           "m.l0.experts.2.up,m.l0.experts.*.up,2,6,0,0,,\n"
           "m.l1.experts.10.down,m.l1.experts.*.down,10,5,4,11,1,5\n", HEADER);
  ck_assert_str_eq(got, want);
  free(got);
  ck_assert(listed("all", "experts.csv"));

  run_ini("sel", "steps = 1-4\n", "sel");
  got = read_out("sel/experts.csv");
  snprintf(want, sizeof want, "%s"
           "m.l0.experts.0.up,m.l0.experts.*.up,0,4,2,9,1,8\n"
           "m.l0.experts.1.up,m.l0.experts.*.up,1,4,3,11,2,6\n"
           "m.l0.experts.2.up,m.l0.experts.*.up,2,4,0,0,,\n"
           "m.l1.experts.10.down,m.l1.experts.*.down,10,3,2,7,2,5\n", HEADER);
  ck_assert_str_eq(got, want);
  free(got);

  run_ini("stride", "steps = 0-5:5\n", "stride");
  got = read_out("stride/experts.csv");
  snprintf(want, sizeof want, "%s"
           "m.l0.experts.0.up,m.l0.experts.*.up,0,2,2,11,4,7\n"
           "m.l0.experts.1.up,m.l0.experts.*.up,1,2,1,9,9,9\n"
           "m.l0.experts.2.up,m.l0.experts.*.up,2,2,0,0,,\n"
           "m.l1.experts.10.down,m.l1.experts.*.down,10,2,2,4,1,3\n", HEADER);
  ck_assert_str_eq(got, want);
  free(got);

  /* the reader takes the file back, every field as written */
  fp8_experts_table t;
  char err[FP8_ERRLEN] = "";
  ck_assert_msg(fp8_experts_csv_load(path_in("sel/experts.csv"), &t, err, sizeof err) == FP8_OK,
                "%s", err);
  ck_assert_uint_eq(t.nrows, 4);
  ck_assert_str_eq(t.rows[3].gemm, "m.l1.experts.10.down");
  ck_assert_str_eq(t.rows[3].group, "m.l1.experts.*.down");
  ck_assert_int_eq(t.rows[3].expert, 10);
  ck_assert_int_eq(t.rows[3].steps, 3);
  ck_assert_int_eq(t.rows[3].steps_run, 2);
  ck_assert_int_eq(t.rows[3].tokens, 7);
  ck_assert_int_eq(t.rows[3].tokens_min, 2);
  ck_assert_int_eq(t.rows[3].tokens_max, 5);
  ck_assert_int_eq(t.rows[3].line, 5);
  ck_assert_int_eq(t.rows[2].tokens_min, -1);
  ck_assert_int_eq(t.rows[2].tokens_max, -1);
  fp8_experts_csv_free(&t);
}
END_TEST

/* [trace] tensors: a GEMM is kept when any of its tensors is replayed: `*.experts.1.up.weight`
 * keeps e1 (by its weight alone), `*.grad_output` d10; a selection of no expert tensor still
 * writes the file (the trace has tokens.csv), without rows. A trace without tokens.csv: no
 * experts.csv, and run.json does not list one. */
START_TEST(experts_tensors_selection) {
  write_moe_trace();
  run_ini("t", "tensors = *.experts.1.up.weight, *.grad_output\n", "t");
  char *got = read_out("t/experts.csv");
  char want[1024];
  snprintf(want, sizeof want, "%s"
           "m.l0.experts.1.up,m.l0.experts.*.up,1,6,4,20,2,9\n"
           "m.l1.experts.10.down,m.l1.experts.*.down,10,5,4,11,1,5\n", HEADER);
  ck_assert_str_eq(got, want);
  free(got);
  run_ini("dense", "tensors = m.attn.*\n", "dense");
  got = read_out("dense/experts.csv");
  ck_assert_str_eq(got, HEADER);
  free(got);
  ck_assert(listed("dense", "experts.csv"));
  remove(path_in("tr/tokens.csv"));
  run_ini("none", "", "none");
  ck_assert(!exists("none/experts.csv"));
  ck_assert(!listed("none", "experts.csv"));
  ck_assert(listed("none", "summary.csv"));
}
END_TEST

/* Two ranks, steps 0..2; m.experts.0.up on both (a replica), m.experts.1.up on rank 0 only,
 * m.experts.3.up on rank 1 only (expert-parallel):
 *   rank 0 tokens: e0 at 0: 2, 1: 0, 2: 5;  e1 at 0, 1, 2: 0
 *   rank 1 tokens: e0 at 0: 3, 1: 0, 2: 1;  e3 at 0: 4, 1: 6 (no row at 2)
 * all ranks:
 *   e0: per step 2+3 = 5, 0+0 = 0, 5+1 = 6: 3 steps, ran 2, 11 tokens, min 5, max 6
 *   e1: 3 steps, never ran;  e3: 2 steps, ran both, 10 tokens, min 4, max 6
 * tensors = rank_1/<any> (rank 1's tensors only):
 *   e0: 3, 0: 3, 1: 0, 2: 1 -> ran 2, 4 tokens, min 1, max 3;  e3 as above; no e1 */
START_TEST(experts_two_ranks) {
  mkdir(path_in("tr"), 0777);
  mkdir(path_in("tr/rank_0"), 0777);
  mkdir(path_in("tr/rank_1"), 0777);
  static const char *const held[2][2] = {{"m.experts.0.up", "m.experts.1.up"},
                                         {"m.experts.0.up", "m.experts.3.up"}};
  for (int r = 0; r < 2; r++) {
    char amax[2048], rel[64];
    int o = snprintf(amax, sizeof amax, "step,tensor,amax\n");
    for (int s = 0; s < 3; s++)
      for (int g = 0; g < 2; g++)
        o += snprintf(amax + o, sizeof amax - (size_t)o, "%d,%s.input,%d\n%d,%s.weight,2\n", s,
                      held[r][g], 1 + s, s, held[r][g]);
    snprintf(rel, sizeof rel, "tr/rank_%d/amax.csv", r);
    put_text(rel, amax);
  }
  put_text("tr/rank_0/tokens.csv", "step,gemm,tokens\n0,m.experts.0.up,2\n0,m.experts.1.up,0\n"
                                   "1,m.experts.0.up,0\n1,m.experts.1.up,0\n2,m.experts.0.up,5\n"
                                   "2,m.experts.1.up,0\n");
  put_text("tr/rank_1/tokens.csv", "step,gemm,tokens\n0,m.experts.0.up,3\n0,m.experts.3.up,4\n"
                                   "1,m.experts.0.up,0\n1,m.experts.3.up,6\n2,m.experts.0.up,1\n");
  run_ini("both", "", "both");
  char *got = read_out("both/experts.csv");
  char want[1024];
  snprintf(want, sizeof want, "%s"
           "m.experts.0.up,m.experts.*.up,0,3,2,11,5,6\n"
           "m.experts.1.up,m.experts.*.up,1,3,0,0,,\n"
           "m.experts.3.up,m.experts.*.up,3,2,2,10,4,6\n", HEADER);
  ck_assert_str_eq(got, want);
  free(got);
  ck_assert(listed("both", "experts.csv"));
  run_ini("r1", "tensors = rank_1/*\n", "r1");
  got = read_out("r1/experts.csv");
  snprintf(want, sizeof want, "%s"
           "m.experts.0.up,m.experts.*.up,0,3,2,4,1,3\n"
           "m.experts.3.up,m.experts.*.up,3,2,2,10,4,6\n", HEADER);
  ck_assert_str_eq(got, want);
  free(got);
}
END_TEST

TU_MAIN("experts", "experts", setup, teardown, 0, experts_single_rank, experts_tensors_selection,
        experts_two_ranks)
