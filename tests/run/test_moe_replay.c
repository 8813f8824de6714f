/* test_moe_replay.c: Mixture-of-Experts steps through `fp8lab run` (issue 40): an expert that
 * receives no tokens at a step has amax 0 there; delayed scaling follows TE's fused update
 * (history and scale kept) by default and TE's unfused path with `unfused_update = true` (the 0
 * rolled into the history), worked out by hand; the key's outputs (run.json) and its errors. */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testutil.h"
#include "tu_dir.h"
#include "run_helpers.h"

/* The expert's input, amax by step (amax.csv; 0: no tokens routed to it), and its snapshot at
 * step 0 ([1, -2]: amax 2, the same as amax.csv's). */
static const char MOE_AMAX_CSV[] = "step,tensor,amax\n"
                                   "0,l.experts.3.input,2\n1,l.experts.3.input,0\n"
                                   "2,l.experts.3.input,0\n3,l.experts.3.input,8\n"
                                   "4,l.experts.3.input,0\n5,l.experts.3.input,3\n"
                                   "6,l.experts.3.input,0\n7,l.experts.3.input,0\n"
                                   "8,l.experts.3.input,0\n";

static void write_moe_trace(void) {
  mkdir(path_in("trace"), 0777);
  static const float x0[2] = {1.0f, -2.0f};
  write_f32_step("trace/step_0.safetensors", "l.experts.3.input", x0, 2);
  put_text("trace/amax.csv", MOE_AMAX_CSV);
}

static const char MOE_INI[] = "[trace]\npath = trace\n"
                              "[recipe.fused]\nkind = delayed\nformat = e4m3\nhistory_len = 2, 4\n"
                              "[recipe.unfused]\nkind = delayed\nformat = e4m3\nhistory_len = 2, 4\n"
                              "unfused_update = true\n"
                              "[output]\ndir = out\n";

/* 448/3 in float32: 149.333328 (0x1.2aaaaap+7, RN) */
#define S3 0x1.2aaaaap+7f

/* stream.csv's scale is the one the step used: the scale after the previous step's update (1 at
 * step 0). E4M3, margin 0, scaled_max 448; amaxes 2, 0, 0, 8, 0, 3, 0, 0, 0.
 *   fused, L = 2 and 4 (zeros keep history and scale; windows of non-zero amaxes):
 *     step 0: 1; after 2: {2} 448/2 = 224 (steps 1, 2, 3); after 8: {2,8} 56 (steps 4 ..
 *     8: the 3 enters {8,3} / {2,8,3}, still 56)
 *   unfused, L = 2 (every amax rolled in; a window of zeros keeps the scale):
 *     after step 0 {0,2} 224, 1 {2,0} 224, 2 {0,0} kept 224, 3 {0,8} 56, 4 {8,0} 56,
 *     5 {0,3} 448/3, 6 {3,0} 448/3, 7 {0,0} kept
 *   unfused, L = 4: after 0 .. 2 224 ({0,0,0,2}, {0,0,2,0}, {0,2,0,0}), 3 {2,0,0,8} 56,
 *     4 {0,0,8,0} 56, 5 {0,8,0,3} 56, 6 {8,0,3,0} 56, 7 {0,3,0,0} 448/3
 * The warm-up flag is 1 at step 0 only (no finite non-zero amax fed before), under both rules:
 * a rolled 0 is not a finite non-zero amax, and the flag is the tensor's, not the rule's. */
static const float WANT[4][9] = {
    {1, 224, 224, 224, 56, 56, 56, 56, 56}, /* fused L = 2 */
    {1, 224, 224, 224, 56, 56, 56, 56, 56}, /* fused L = 4 */
    {1, 224, 224, 224, 56, 56, S3, S3, S3}, /* unfused L = 2 */
    {1, 224, 224, 224, 56, 56, 56, 56, S3}, /* unfused L = 4 */
};

/* Field k (0-based) of a CSV line without quoting, into buf. */
static const char *field(const char *line, int k, char *buf, size_t n) {
  const char *p = line;
  for (int i = 0; i < k; i++) {
    p = strchr(p, ',');
    ck_assert_ptr_nonnull(p);
    p++;
  }
  size_t len = strcspn(p, ",\n");
  ck_assert_uint_lt(len, n);
  memcpy(buf, p, len);
  buf[len] = 0;
  return buf;
}

START_TEST(test_zero_token_steps_fused_and_unfused) {
  write_moe_trace();
  put_text("exp.ini", MOE_INI);
  char *out;
  ck_assert_int_eq(run_cli(&out, "run exp.ini --quiet --no-report"), 0);
  free(out);
  char *stream = read_out("out/stream.csv");
  ck_assert_str_eq(field(stream, 10, (char[16]){0}, 16), "scale");
  int seen[4][9] = {{0}};
  char f[8][64];
  for (const char *line = strchr(stream, '\n') + 1; *line; line = strchr(line, '\n') + 1) {
    ck_assert_str_eq(field(line, 0, f[0], 64), "l.experts.3.input");
    int step = atoi(field(line, 2, f[1], 64));
    int unfused = strcmp(field(line, 3, f[2], 64), "unfused") == 0;
    int L = atoi(field(line, 5, f[3], 64));
    ck_assert(step >= 0 && step < 9 && (L == 2 || L == 4));
    int k = 2 * unfused + (L == 4);
    float scale = strtof(field(line, 10, f[4], 64), NULL);
    ck_assert_msg(scale == WANT[k][step], "%s L=%d step %d: scale %s, want %.9g",
                  unfused ? "unfused" : "fused", L, step, f[4], (double)WANT[k][step]);
    ck_assert_int_eq(atoi(field(line, 12, f[5], 64)), step == 0);
    /* the amax column: amax.csv's (the snapshot's at step 0) */
    ck_assert(strtof(field(line, 9, f[6], 64), NULL) ==
              (float)(step == 0 ? 2 : step == 3 ? 8 : step == 5 ? 3 : 0));
    seen[k][step]++;
  }
  for (int k = 0; k < 4; k++)
    for (int s = 0; s < 9; s++) ck_assert_int_eq(seen[k][s], 1);
  free(stream);
  /* steps.csv: the snapshot step only, cast with scale 1 under every configuration */
  char *steps = read_out("out/steps.csv");
  ck_assert_int_eq(count_lines(steps), 5);
  free(steps);
  /* run.json: the unfused configurations say so (key and settings), the fused ones as before */
  json_error_t jerr;
  json_t *j = json_load_file(path_in("out/run.json"), 0, &jerr);
  ck_assert_ptr_nonnull(j);
  json_t *cfgs = json_object_get(json_object_get(j, "experiment"), "configurations");
  ck_assert_uint_eq(json_array_size(cfgs), 4);
  for (size_t c = 0; c < 4; c++) {
    json_t *o = json_array_get(cfgs, c);
    const char *recipe = json_string_value(json_object_get(o, "recipe"));
    const char *settings = json_string_value(json_object_get(o, "settings"));
    json_t *u = json_object_get(o, "unfused_update");
    if (c < 2) {
      ck_assert_str_eq(recipe, "fused");
      ck_assert_ptr_null(u);
      ck_assert_ptr_null(strstr(settings, "unfused"));
    } else {
      ck_assert_str_eq(recipe, "unfused");
      ck_assert(json_is_true(u));
      ck_assert_ptr_nonnull(strstr(settings, "\nunfused_update = true"));
    }
  }
  json_decref(j);
}
END_TEST

/* The key is one value per section (steps.csv and the stream have no column for it: the
 * label tells the rules apart), of delayed sections only: one line naming file and line, exit 2,
 * nothing written. */
START_TEST(test_unfused_update_errors) {
  write_moe_trace();
  char *out;
  put_text("exp.ini", "[trace]\npath = trace\n[recipe.d]\nkind = delayed\n"
                      "unfused_update = true, false\n[output]\ndir = out\n");
  ck_assert_int_eq(run_cli(&out, "run exp.ini --quiet --no-report"), 2);
  ck_assert_int_eq(count_lines(out), 1);
  ck_assert_ptr_nonnull(strstr(out, "exp.ini:5: unfused_update must be a single value"));
  free(out);
  put_text("exp.ini", "[trace]\npath = trace\n[recipe.c]\nkind = current\n"
                      "unfused_update = true\n[output]\ndir = out\n");
  ck_assert_int_eq(run_cli(&out, "run exp.ini --quiet --no-report"), 2);
  ck_assert_int_eq(count_lines(out), 1);
  ck_assert_ptr_nonnull(strstr(out, "exp.ini:5: unfused_update is not a key of kind current"));
  free(out);
  ck_assert(!exists("out/steps.csv"));
}
END_TEST

TU_MAIN("moe_replay", "cli", setup, teardown, 120, test_zero_token_steps_fused_and_unfused,
        test_unfused_update_errors)
