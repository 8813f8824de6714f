/* test_amax_replay.c: how amax.csv feeds the replay: a snapshot that disagrees with amax.csv wins
 * with one warning line; micro-batches (issue 17) update the delayed history per micro-batch,
 * worked out by hand; without the micro column the replay is the old one. */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testutil.h"
#include "tu_dir.h"
#include "tu_traces.h"
#include "run_helpers.h"

/* When amax.csv disagrees with a snapshot the data wins, and one warning line says how often,
 * with the program's prefix like every other line it prints. */
START_TEST(test_amax_mismatch_warning) {
  write_tiny_trace();
  /* the snapshots' amaxes at step 0 are 4 (m.input) and 2 (m.grad_output) */
  put_text("trace/amax.csv", "step,tensor,amax\n0,m.input,5\n1,m.input,8\n");
  put_text("exp.ini", TINY_INI);
  char *out;
  ck_assert_int_eq(run_cli(&out, "run exp.ini --quiet --no-report"), 0);
  ck_assert_str_eq(out, "fp8lab: warning: 1 snapshot amax differs from amax.csv (the snapshot data "
                        "was used)\n");
  free(out);
  put_text("trace/amax.csv", "step,tensor,amax\n0,m.input,5\n0,m.grad_output,3\n");
  ck_assert_int_eq(run_cli(&out, "run exp.ini --quiet --no-report --force"), 0);
  ck_assert_str_eq(out, "fp8lab: warning: 2 snapshot amaxes differ from amax.csv (the snapshot data "
                        "was used)\n");
  free(out);
  const char *p = path_in("out/run.json");
  json_error_t jerr;
  json_t *j = json_load_file(p, 0, &jerr);
  ck_assert_int_eq(json_integer_value(json_object_get(j, "amax_csv_mismatches")), 2);
  json_decref(j);
}
END_TEST

/* ------------------------------------------------------------------ micro-batches (issue 17) */

/* One stream.csv row of m.input under [recipe.d] (E4M3, history 2, margin 0, max) into b. */
static void micro_row(char *b, size_t n, int64_t step, int snap, float amax, float scale,
                      int warm, int micro, const char *te) {
  char ov[64];
  snprintf(ov, sizeof ov, "%.9g", log2((double)amax * (double)scale / 448.0));
  snprintf(b, n, "m.input,input,%lld,d,e4m3,2,0,max,%d,%.9g,%.9g,%s,%d,%d,%s\n", (long long)step,
           snap, amax, scale, ov, warm, micro, te);
}

/* The trace of the micro-batch tests: a snapshot of m.input at step 2 ([1, -2]: amax 2), and the
 * amax.csv given. */
static void write_micro_trace(const char *csv) {
  const char *d = path_in("trace");
  mkdir(d, 0777);
  static const float x2[2] = {1.0f, -2.0f};
  write_f32_step("trace/step_2.safetensors", "m.input", x2, 2);
  put_text("trace/amax.csv", csv);
}

static const char MICRO_INI[] = "[trace]\npath = trace\n[recipe.d]\nkind = delayed\n"
                                "format = e4m3\nhistory_len = 2\n[output]\ndir = out\n";

/* TE updates the delayed history at every micro-batch (RECIPES.md: scale = RN32(448 * 2^-margin
 * / amax_h), amax_h the max of the history of the last 2 non-zero amaxes; scale 1 before any).
 * amax.csv (micro, te_scale): step 0: micro 0 amax 1, micro 1 amax 4; step 1: micro 0 amax 2;
 * step 2: micro 0 amax 8, micro 2 amax 0.5 (no micro 1: not contiguous), snapshot amax 2.
 *   step 0 micro 0: scale 1 (initial; warm-up); fed 1 -> history {1}    -> 448/1 = 448
 *   step 0 micro 1: scale 448 (warm-up ended at micro 0); fed 4 -> {1,4} -> 448/4 = 112
 *   step 1 micro 0: scale 112; fed 2 -> {4,2} -> 448/4 = 112
 *   step 2 micro 0: scale 112; fed 8 (not the snapshot's 2) -> {2,8} -> 448/8 = 56
 *   step 2 micro 2: scale 56; fed 0.5 -> {8,0.5} -> 56
 * The snapshot at step 2 is cast once, with the scale of the step's first micro-batch, 112;
 * amax.csv's max over the step's micro rows (8) differs from its amax (2): one mismatch. */
START_TEST(test_micro_batches_by_hand) {
  write_micro_trace("step,tensor,amax,micro,te_scale\n"
                    "0,m.input,1,0,1\n0,m.input,4,1,448\n1,m.input,2,0,112\n"
                    "2,m.input,8,0,\n2,m.input,0.5,2,56\n");
  put_text("exp.ini", MICRO_INI);
  char *out;
  ck_assert_int_eq(run_cli(&out, "run exp.ini --quiet --no-report"), 0);
  ck_assert_str_eq(out, "fp8lab: warning: 1 snapshot amax differs from amax.csv (the snapshot data "
                        "was used)\n");
  free(out);
  char want[2048], row[256];
  size_t o = (size_t)snprintf(want, sizeof want, "tensor,role,step,recipe,format,history_len,margin,"
                              "amax_compute,snapshot,amax,scale,overshoot,warmup,micro,te_scale\n");
  micro_row(row, sizeof row, 0, 0, 1, 1, 1, 0, "1");
  o += (size_t)snprintf(want + o, sizeof want - o, "%s", row);
  micro_row(row, sizeof row, 0, 0, 4, 448, 0, 1, "448");
  o += (size_t)snprintf(want + o, sizeof want - o, "%s", row);
  micro_row(row, sizeof row, 1, 0, 2, 112, 0, 0, "112");
  o += (size_t)snprintf(want + o, sizeof want - o, "%s", row);
  micro_row(row, sizeof row, 2, 1, 8, 112, 0, 0, "");
  o += (size_t)snprintf(want + o, sizeof want - o, "%s", row);
  micro_row(row, sizeof row, 2, 1, 0.5f, 56, 0, 2, "56");
  snprintf(want + o, sizeof want - o, "%s", row);
  char *stream = read_out("out/stream.csv");
  ck_assert_str_eq(stream, want);
  free(stream);
  /* steps.csv: the snapshot's own amax 2, cast with 112 (2 * 112 = 224 fits) */
  char *steps = read_out("out/steps.csv");
  expect_row(steps, "m.input,input,2,d,delayed,e4m3,2,0,max,2,112,2,0,0,0,0,0,");
  ck_assert_int_eq(count_lines(steps), 2);
  free(steps);
}
END_TEST

/* Without the micro column the replay is the old one: one update per step, and the snapshot's
 * amax replaces amax.csv's. amax.csv: step 0: 4, step 1: 2, step 2: 8 (snapshot: 2), step 3: 1.
 *   step 0: scale 1; fed 4 -> 448/4 = 112
 *   step 1: scale 112; fed 2 -> {4,2} -> 112
 *   step 2: scale 112; fed the snapshot's 2 -> {2,2} -> 224 (not 56: 8 is not fed)
 *   step 3: scale 224
 * A micro column of zeros (one micro-batch per step) and an empty te_scale give byte-identical
 * outputs. */
START_TEST(test_micro_absent_is_old_replay) {
  write_micro_trace("step,tensor,amax\n0,m.input,4\n1,m.input,2\n2,m.input,8\n3,m.input,1\n");
  put_text("exp.ini", MICRO_INI);
  char *out;
  ck_assert_int_eq(run_cli(&out, "run exp.ini --quiet --no-report"), 0);
  free(out);
  char want[2048], row[256];
  size_t o = (size_t)snprintf(want, sizeof want, "tensor,role,step,recipe,format,history_len,margin,"
                              "amax_compute,snapshot,amax,scale,overshoot,warmup,micro,te_scale\n");
  micro_row(row, sizeof row, 0, 0, 4, 1, 1, 0, "");
  o += (size_t)snprintf(want + o, sizeof want - o, "%s", row);
  micro_row(row, sizeof row, 1, 0, 2, 112, 0, 0, "");
  o += (size_t)snprintf(want + o, sizeof want - o, "%s", row);
  micro_row(row, sizeof row, 2, 1, 2, 112, 0, 0, "");
  o += (size_t)snprintf(want + o, sizeof want - o, "%s", row);
  micro_row(row, sizeof row, 3, 0, 1, 224, 0, 0, "");
  snprintf(want + o, sizeof want - o, "%s", row);
  char *stream = read_out("out/stream.csv"), *steps = read_out("out/steps.csv");
  char *summary = read_out("out/summary.csv"), *hist = read_out("out/histograms.csv");
  ck_assert_str_eq(stream, want);
  expect_row(steps, "m.input,input,2,d,delayed,e4m3,2,0,max,2,112,2,0,0,0,0,0,");
  put_text("trace/amax.csv", "step,tensor,amax,micro,te_scale\n0,m.input,4,0,\n1,m.input,2,0,\n"
                             "2,m.input,8,0,\n3,m.input,1,0,\n");
  ck_assert_int_eq(run_cli(&out, "run exp.ini --quiet --no-report --force"), 0);
  free(out);
  const char *files[4] = {"out/stream.csv", "out/steps.csv", "out/summary.csv",
                          "out/histograms.csv"};
  char *before[4] = {stream, steps, summary, hist};
  for (int k = 0; k < 4; k++) {
    char *now = read_out(files[k]);
    ck_assert_msg(strcmp(now, before[k]) == 0, "%s differs:\n%s\nvs\n%s", files[k], now, before[k]);
    free(now);
    free(before[k]);
  }
}
END_TEST

TU_MAIN("amax_replay", "cli", setup, teardown, 120, test_micro_batches_by_hand,
        test_micro_absent_is_old_replay, test_amax_mismatch_warning)
