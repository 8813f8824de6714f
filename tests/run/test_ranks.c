/* test_ranks.c: multi-rank traces: delayed scales of two ranks worked out by hand with and without
 * [trace] reduce_amax, strided reduction groups, a two-rank replay through the report, their
 * errors, and the MPI replay's assignment of ranks to processes. */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testutil.h"
#include "outfile.h"
#include "run_mpi.h"
#include "trace.h"
#include "tu_dir.h"
#include "tu_traces.h"
#include "run_helpers.h"
#include "util.h"

/* Delayed scaling with history_len 2, margin 0, max: the scale a step uses is
 * RN32(448 / max of the last two non-zero amaxes fed to the update), 1 before any.
 *   independent ranks: rank 0 is fed 2, 4, 1 -> step 3 uses 448 / max(4, 1) = 112, so 10 * 112
 *     saturates (overflow 1); rank 1 is fed 100, (0: kept), 16 -> 448 / max(100, 16) = 4.48.
 *   reduce_amax (one group of both): both are fed max(2, 100) = 100, max(4, -) = 4,
 *     max(1, 16) = 16 -> 448 / max(4, 16) = 28 for both ranks; 10 * 28 = 280 fits.
 * The amax column and the statistics stay each rank's own; current scaling is per rank. */
START_TEST(test_ranks_by_hand) {
  write_two_rank_trace();
  put_text("ind.ini", "[trace]\npath = run\n[recipe.d]\nkind = delayed\nhistory_len = 2\n"
                      "[recipe.c]\nkind = current\n[output]\ndir = ind\n");
  put_text("red.ini", "[trace]\npath = run\nreduce_amax = true\n[recipe.d]\nkind = delayed\n"
                      "history_len = 2\n[recipe.c]\nkind = current\n[output]\ndir = red\n");
  put_text("g1.ini", "[trace]\npath = run\nreduce_amax = true\nreduce_group = 1\n[recipe.d]\n"
                     "kind = delayed\nhistory_len = 2\n[recipe.c]\nkind = current\n"
                     "[output]\ndir = g1\n");
  char *out;
  const char *inis[3] = {"ind.ini", "red.ini", "g1.ini"};
  for (int i = 0; i < 3; i++) {
    int rc = run_cli(&out, "run %s --quiet --no-report", inis[i]);
    ck_assert_msg(rc == 0, "%s: rc %d: %s", inis[i], rc, out);
    free(out);
  }
  char expect[256];
  float s100 = 448.0f / 100.0f, c10 = 448.0f / 10.0f;

  char *ind = read_out("ind/steps.csv");
  /* header + 2 snapshot steps x 2 ranks x 2 configurations, in step, tensor-name order */
  ck_assert_int_eq(count_lines(ind), 1 + 8);
  static const char *order[8] = {"rank_0/m.input,input,0,d,", "rank_0/m.input,input,0,c,",
                                 "rank_1/m.input,input,0,d,", "rank_1/m.input,input,0,c,",
                                 "rank_0/m.input,input,3,d,", "rank_0/m.input,input,3,c,",
                                 "rank_1/m.input,input,3,d,", "rank_1/m.input,input,3,c,"};
  const char *line = strchr(ind, '\n') + 1;
  for (int i = 0; i < 8; i++) {
    ck_assert_msg(strncmp(line, order[i], strlen(order[i])) == 0, "row %d: %.60s", i + 1, line);
    line = strchr(line, '\n') + 1;
  }
  /* step 0: scale 1 on both ranks, each with its own amax */
  expect_row(ind, "rank_0/m.input,input,0,d,delayed,e4m3,2,0,max,2,1,2,0,0,0,");
  expect_row(ind, "rank_1/m.input,input,0,d,delayed,e4m3,2,0,max,100,1,2,0,0,0,");
  /* step 3 */
  expect_row(ind, "rank_0/m.input,input,3,d,delayed,e4m3,2,0,max,10,112,2,0,0,1,");
  snprintf(expect, sizeof expect, "rank_1/m.input,input,3,d,delayed,e4m3,2,0,max,10,%.9g,2,0,0,0,",
           (double)s100);
  expect_row(ind, expect);
  snprintf(expect, sizeof expect, "rank_0/m.input,input,3,c,current,e4m3,,,,10,%.9g,", (double)c10);
  expect_row(ind, expect);

  char *red = read_out("red/steps.csv");
  ck_assert_int_eq(count_lines(red), 1 + 8);
  expect_row(red, "rank_0/m.input,input,0,d,delayed,e4m3,2,0,max,2,1,2,0,0,0,");
  expect_row(red, "rank_1/m.input,input,0,d,delayed,e4m3,2,0,max,100,1,2,0,0,0,");
  expect_row(red, "rank_0/m.input,input,3,d,delayed,e4m3,2,0,max,10,28,2,0,0,0,");
  expect_row(red, "rank_1/m.input,input,3,d,delayed,e4m3,2,0,max,10,28,2,0,0,0,");
  /* current scaling is not reduced */
  expect_row(red, expect);
  /* rank 0's step-3 row, all of it: 10 * 28 = 280 lies between the E4M3 values 256 and 288
   * (steps of 32 in that binade) and rounds to 288; 0.25 * 28 = 7 is exact. Dequantized with
   * RN32(1/28) (not exact), each error in double. */
  float sinv = 1.0f / 28.0f, xs[2] = {10.0f, 0.25f}, qs[2] = {288.0f, 7.0f};
  double e2 = 0, x2 = 0;
  float xhs[2];
  for (int i = 0; i < 2; i++) {
    float xh = xhs[i] = qs[i] * sinv;
    double dd = (double)xs[i] - (double)xh;
    e2 += dd * dd;
    x2 += (double)xs[i] * (double)xs[i];
  }
  char *r = find_row(red, "rank_0/m.input,input,3,d,");
  ck_assert_ptr_nonnull(r);
  /* 280 is below 448; step 0 fed the group's 100 into both ranks' histories: not warm-up */
  cut_tail(r, 0, log2(280.0 / 448.0), cos_of(xs, xhs, 2), 0);
  snprintf(expect, sizeof expect,
           "rank_0/m.input,input,3,d,delayed,e4m3,2,0,max,10,28,2,0,0,0,0,0,%.9g,%.9g,,,,,", e2 / 2.0,
           10.0 * log10(x2 / e2));
  ck_assert_str_eq(r, expect);
  free(r);

  /* groups of one rank: the same as no reduction, byte for byte */
  char *g1 = read_out("g1/steps.csv");
  ck_assert_str_eq(g1, ind);
  char *si = read_out("ind/summary.csv"), *sg = read_out("g1/summary.csv");
  ck_assert_str_eq(si, sg);
  ck_assert_ptr_nonnull(strstr(si, "\nrank_1/m.input,input,d,delayed,e4m3,2,0,max,2,"));

  /* run.json: the ranks, the reduction and every rank's files */
  const char *p = path_in("red/run.json");
  json_error_t jerr;
  json_t *j = json_load_file(p, 0, &jerr);
  ck_assert_ptr_nonnull(j);
  json_t *tro = json_object_get(j, "trace");
  ck_assert_int_eq(json_integer_value(json_object_get(tro, "ranks")), 2);
  ck_assert(json_is_true(json_object_get(tro, "reduce_amax")));
  ck_assert_int_eq(json_integer_value(json_object_get(tro, "reduce_group")), 2);
  ck_assert_int_eq(json_integer_value(json_object_get(tro, "snapshot_steps")), 2);
  ck_assert_int_eq(json_integer_value(json_object_get(tro, "amax_rows")), 3);
  ck_assert_int_eq(json_integer_value(json_object_get(j, "steps_replayed")), 4);
  ck_assert_int_eq(json_integer_value(json_object_get(j, "tensors")), 2);
  ck_assert_uint_eq(json_array_size(json_object_get(j, "inputs")), 1 + 2 * 3); /* ini; 2 + csv per rank */
  json_decref(j);
  /* a single-rank run.json has none of these keys */
  write_tiny_trace();
  put_text("one.ini", TINY_INI);
  ck_assert_int_eq(run_cli(&out, "run one.ini --quiet --no-report --out one"), 0);
  free(out);
  p = path_in("one/run.json");
  j = json_load_file(p, 0, &jerr);
  ck_assert_ptr_null(json_object_get(json_object_get(j, "trace"), "ranks"));
  json_decref(j);

  /* inspect sees the ranks' tensors */
  ck_assert_int_eq(run_cli(&out, "inspect run"), 0);
  ck_assert_msg(strstr(out, "rank_0/m.input") && strstr(out, "rank_1/m.input"), "%s", out);
  free(out);
  /* ... and, as the runner, takes a tensor's role from its name within the rank: a bare
   * "weight" is a weight, not "(unknown)" as the prefixed name "rank_0/weight" would be */
  {
    float w[2] = {1.0f, -0.5f};
    fp8_tensor_out tw[1] = {{"weight", FP8_DTYPE_F32, 1, {2}, w}};
    char e2[FP8_ERRLEN];
    for (int rk = 0; rk < 2; rk++) {
      char rel[64];
      snprintf(rel, sizeof rel, "bare/rank_%d", rk);
      const char *d = path_in(rel);
      ck_assert_int_eq(fp8_mkdir_p(d, e2, sizeof e2), FP8_OK);
      snprintf(rel, sizeof rel, "bare/rank_%d/step_0.safetensors", rk);
      const char *f = path_in(rel);
      ck_assert_int_eq(fp8_safetensors_write(f, tw, 1, NULL, e2, sizeof e2), FP8_OK);
    }
    ck_assert_int_eq(run_cli(&out, "inspect bare"), 0);
    const char *l0 = strstr(out, "rank_0/weight"), *l1 = strstr(out, "rank_1/weight");
    ck_assert_msg(l0 && l1 && !strstr(out, "(unknown)"), "%s", out);
    char nm[64], role[64];
    ck_assert_int_eq(sscanf(l0, "%63s %63s", nm, role), 2);
    ck_assert_str_eq(role, "weight");
    ck_assert_int_eq(sscanf(l1, "%63s %63s", nm, role), 2);
    ck_assert_str_eq(role, "weight");
    free(out);
  }
  free(ind);
  free(red);
  free(g1);
  free(si);
  free(sg);
}
END_TEST

/* A two-rank replay through the report: plots of rank_<r>/ tensors are files in plots/, the
 * report and the notebook are written. */
START_TEST(test_ranks_report) {
  char *out;
  ck_assert_int_eq(run_cli(&out, "synth llm run/rank_0 --steps 12 --seed 1"), 0);
  free(out);
  ck_assert_int_eq(run_cli(&out, "synth spiky run/rank_1 --steps 12 --seed 5"), 0);
  free(out);
  put_text("rep.ini", "[trace]\npath = run\nreduce_amax = true\n"
                      "tensors = layers.0.*, rank_1/layers.1.fc1.*\n[recipe.d]\nkind = delayed\n"
                      "history_len = 1, 16\nmargin = 0, 1\n[recipe.c]\nkind = current\n"
                      "[output]\ndir = out\n");
  int rc = run_cli(&out, "run rep.ini --quiet");
  ck_assert_msg(rc == 0, "rc %d: %s", rc, out);
  free(out);
  char *rep = read_out("out/report.md");
  ck_assert_ptr_nonnull(strstr(rep, "rank_"));
  free(rep);
  char *an = read_out("out/analysis.csv");
  ck_assert_ptr_nonnull(strstr(an, "\nrank_0/layers.0.fc1.input,input,"));
  ck_assert_ptr_nonnull(strstr(an, "\nrank_1/layers.0.fc1.input,input,"));
  /* a glob with '/' looks at the rank-prefixed name */
  ck_assert_ptr_nonnull(strstr(an, "\nrank_1/layers.1.fc1.input,input,"));
  ck_assert_ptr_null(strstr(an, "\nrank_0/layers.1.fc1.input,input,"));
  free(an);
  const char *p = path_in("out/notebooks_export/rep.ipynb");
  struct stat sb;
  ck_assert_msg(stat(p, &sb) == 0, "%s", p);
  p = path_in("out/plots/rank_0");
  ck_assert_int_ne(stat(p, &sb), 0); /* no sub-folder from the '/' of the names */
  p = path_in("out/plots/dynamic_range.png");
  ck_assert_int_eq(stat(p, &sb), 0);
}
END_TEST

/* Multi-rank errors through the CLI: exit 2, one line with file:line or the trace folder. */
/* Strided amax-reduction groups (issue 26): 4 ranks, m.input's step-0 amax 1, 2, 4, 8 on
 * ranks 0..3. reduce_group = 2, reduce_stride = 2 form the groups {0, 2} and {1, 3}: at step 1
 * delayed scaling (history 2) scales ranks 0 and 2 by 448 / max(1, 4) = 112 and ranks 1 and 3
 * by 448 / max(2, 8) = 56; the contiguous groups {0, 1} and {2, 3} give 224 and 56 (at step 2
 * rank 0 clips, so that the report writes advice.ini). Errors: a
 * stride without reduce_group, G x S not dividing the ranks. advice.ini and run.json carry
 * it. */
/* The MPI replay's assignment of ranks to processes (issue 26), by hand: the largest rank
 * first, each to the least loaded process (ties: the lower rank, the lower process). */
START_TEST(test_mpi_assign_by_bytes) {
  const uint64_t b1[4] = {10, 40, 30, 20}, eq[4] = {5, 5, 5, 5};
  int o[4];
  fp8_mpi_assign(b1, 4, 2, o); /* 40 -> p0, 30 -> p1, 20 -> p1 (30 < 40), 10 -> p0 (40 < 50) */
  ck_assert(o[0] == 0 && o[1] == 0 && o[2] == 1 && o[3] == 1);
  fp8_mpi_assign(b1, 4, 3, o); /* 40 -> p0, 30 -> p1, 20 -> p2, 10 -> p2 (20 < 30) */
  ck_assert(o[0] == 2 && o[1] == 0 && o[2] == 1 && o[3] == 2);
  fp8_mpi_assign(eq, 4, 2, o); /* equal sizes: round robin */
  ck_assert(o[0] == 0 && o[1] == 1 && o[2] == 0 && o[3] == 1);
  fp8_mpi_assign(eq, 4, 1, o);
  ck_assert(o[0] == 0 && o[1] == 0 && o[2] == 0 && o[3] == 0);
  fp8_mpi_assign(b1, 2, 4, o); /* more processes than ranks: 10 -> p1 (40 went to p0) */
  ck_assert(o[0] == 1 && o[1] == 0);
}
END_TEST

START_TEST(test_ranks_strided_groups) {
  static const float amax0[4] = {1.0f, 2.0f, 4.0f, 8.0f};
  const char *top = path_in("run4");
  mkdir(top, 0777);
  for (int r = 0; r < 4; r++) {
    char rel[64];
    snprintf(rel, sizeof rel, "run4/rank_%d", r);
    const char *d = path_in(rel);
    mkdir(d, 0777);
    const float x0[2] = {amax0[r], 0.5f}, x1[2] = {1.0f, 0.25f};
    /* step 2: rank 0's m.input jumps to 1000 and clips (so the report advises current scaling
     * for it, and writes advice.ini) */
    const float x2[2] = {r == 0 ? 1000.0f : 1.0f, 0.25f};
    const float *xs[3] = {x0, x1, x2};
    for (int t = 0; t < 3; t++) {
      snprintf(rel, sizeof rel, "run4/rank_%d/step_%d.safetensors", r, t);
      write_f32_step(rel, "m.input", xs[t], 2);
    }
  }
  static const char *const head = "[recipe.d]\nkind = delayed\nhistory_len = 2\n"
                                  "[recipe.c]\nkind = current\n";
  char ini[512];
  snprintf(ini, sizeof ini, "[trace]\npath = run4\nreduce_amax = true\nreduce_group = 2\n"
           "reduce_stride = 2\n%s[output]\ndir = st\n", head);
  put_text("st.ini", ini);
  snprintf(ini, sizeof ini, "[trace]\npath = run4\nreduce_amax = true\nreduce_group = 2\n"
           "%s[output]\ndir = ct\n", head);
  put_text("ct.ini", ini);
  char *out;
  ck_assert_int_eq(run_cli(&out, "run st.ini --quiet"), 0);
  free(out);
  ck_assert_int_eq(run_cli(&out, "run ct.ini --quiet"), 0);
  free(out);
  char *st = read_out("st/steps.csv"), *ct = read_out("ct/steps.csv");
  static const char *const strided[4] = {"112", "56", "112", "56"},
                           *contiguous[4] = {"224", "224", "56", "56"};
  for (int r = 0; r < 4; r++) {
    char want[128];
    snprintf(want, sizeof want, "rank_%d/m.input,input,1,d,delayed,e4m3,2,0,max,1,%s,", r,
             strided[r]);
    expect_row(st, want);
    snprintf(want, sizeof want, "rank_%d/m.input,input,1,d,delayed,e4m3,2,0,max,1,%s,", r,
             contiguous[r]);
    expect_row(ct, want);
  }
  free(st);
  free(ct);
  char *adv = read_out("st/advice.ini"), *js = read_out("st/run.json");
  ck_assert_msg(strstr(adv, "reduce_amax = true\nreduce_group = 2\nreduce_stride = 2\n") != NULL,
                "%s", adv);
  ck_assert_msg(strstr(js, "\"reduce_stride\": 2") != NULL, "%s", js);
  free(adv);
  free(js);
  /* errors, at the key's line, nothing run */
  put_text("s1.ini", "[trace]\npath = run4\nreduce_amax = true\nreduce_stride = 2\n"
                     "[recipe.d]\nkind = delayed\n");
  ck_assert_int_eq(run_cli(&out, "run s1.ini --out s1"), 2);
  ck_assert_str_eq(out, "fp8lab: s1.ini:4: reduce_stride needs reduce_group (the ranks per group; "
                        "a group is ranks r, r+S, ..., r+(G-1)S)\n");
  free(out);
  put_text("s2.ini", "[trace]\npath = run4\nreduce_amax = true\nreduce_group = 2\n"
                     "reduce_stride = 3\n[recipe.d]\nkind = delayed\n");
  ck_assert_int_eq(run_cli(&out, "run s2.ini --out s2"), 2);
  ck_assert_str_eq(out, "fp8lab: s2.ini:5: reduce_group = 2 x reduce_stride = 3 does not divide "
                        "the 4 ranks of run4 (strided groups tile blocks of G x S ranks)\n");
  free(out);
  put_text("s3.ini", "[trace]\npath = run4/rank_0\nreduce_stride = 2\nreduce_amax = true\n"
                     "[recipe.d]\nkind = delayed\n");
  ck_assert_int_eq(run_cli(&out, "run s3.ini --out s3"), 2);
  ck_assert_str_eq(out, "fp8lab: s3.ini:3: reduce_stride needs a multi-rank trace, but "
                        "run4/rank_0 is a single-rank trace (point path at the folder that holds "
                        "rank_0/, rank_1/, ...)\n");
  free(out);
}
END_TEST

START_TEST(test_ranks_errors) {
  char *out;
  write_tiny_trace();
  /* reduce_amax on a single-rank trace (e.g. path pointing at one rank_<r>/) */
  put_text("r1.ini", "[trace]\npath = trace\nreduce_amax = true\n[recipe.d]\nkind = delayed\n");
  ck_assert_int_eq(run_cli(&out, "run r1.ini --out o1"), 2);
  ck_assert_str_eq(out, "fp8lab: r1.ini:3: reduce_amax = true needs a multi-rank trace, but trace is a "
                        "single-rank trace (point path at the folder that holds rank_0/, rank_1/, ...)\n");
  free(out);
  const char *p = path_in("o1");
  struct stat sb;
  ck_assert_int_ne(stat(p, &sb), 0);
  /* reduce_group on a synth: trace (one rank), found before anything is generated */
  put_text("r2.ini", "[trace]\npath = synth:llm\nsynth_steps = 4\nreduce_group = 2\n"
                     "reduce_amax = true\n[recipe.d]\nkind = delayed\n");
  ck_assert_int_eq(run_cli(&out, "run r2.ini --out o2"), 2);
  ck_assert_str_eq(out, "fp8lab: r2.ini:4: reduce_group needs a multi-rank trace, but synth:llm is a "
                        "single-rank trace (point path at the folder that holds rank_0/, rank_1/, ...)\n");
  free(out);
  p = path_in("o2");
  ck_assert_int_ne(stat(p, &sb), 0);
  /* reduce_group not dividing the ranks */
  write_two_rank_trace();
  put_text("r3.ini", "[trace]\npath = run\nreduce_amax = true\nreduce_group = 3\n"
                     "[recipe.d]\nkind = delayed\n");
  ck_assert_int_eq(run_cli(&out, "run r3.ini --out o3"), 2);
  ck_assert_str_eq(out, "fp8lab: r3.ini:4: reduce_group = 3 does not divide the 2 ranks of run "
                        "(expected one of 1, 2)\n");
  free(out);
  /* a bad value: a parse error */
  put_text("r4.ini", "[trace]\npath = run\nreduce_amax = sometimes\n[recipe.d]\nkind = delayed\n");
  ck_assert_int_eq(run_cli(&out, "run r4.ini --out o4"), 2);
  ck_assert_str_eq(out, "fp8lab: r4.ini:3: bad reduce_amax \"sometimes\" (expected true or false)\n");
  free(out);
  /* a gap in the ranks, and a single-rank trace beside rank folders: the folder is named */
  const char *d = path_in("run/rank_3");
  mkdir(d, 0777);
  put_text("run/rank_3/amax.csv", "step,tensor,amax\n0,m.input,1\n");
  put_text("r5.ini", "[trace]\npath = run\n[recipe.d]\nkind = delayed\n");
  ck_assert_int_eq(run_cli(&out, "run r5.ini --out o5"), 2);
  ck_assert_str_eq(out, "fp8lab: run: rank_2/ is missing (found 3 rank folders, up to rank_3/; "
                        "expected rank_0/ .. rank_<R-1>/ without gaps)\n");
  free(out);
  d = path_in("run/rank_3");
  tu_rmtree(d);
  put_text("run/amax.csv", "step,tensor,amax\n0,m.input,1\n");
  ck_assert_int_eq(run_cli(&out, "run r5.ini --out o6"), 2);
  ck_assert_str_eq(out, "fp8lab: run: holds both a single-rank trace (amax.csv) and rank folders "
                        "(rank_0/); a trace is one or the other\n");
  free(out);
}
END_TEST

TU_MAIN("ranks", "cli", setup, teardown, 120, test_ranks_by_hand, test_ranks_report,
        test_ranks_errors, test_ranks_strided_groups, test_mpi_assign_by_bytes)
