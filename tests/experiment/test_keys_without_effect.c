/* test_keys_without_effect.c: keys that would do nothing are errors at their file:line, as a key
 * of another kind is (issue 41, item 9): reduce_group and reduce_stride without reduce_amax =
 * true (no amax is reduced), sr_seed with rounding = nearest (nothing is drawn). Each through
 * `fp8lab run` first (exit 2, the one exact line, no output folder), then the loader's message;
 * the keys where they act (reduce_amax = true; rounding stochastic, auto or its default) load.
 * The multi-rank trace is two ranks of amax.csv alone: a run that accepted the keys would replay
 * it with exit 0. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "experiment.h"
#include "experiment_helpers.h"
#include "testutil.h"
#include "tu_dir.h"

#define REDUCE_WHY                                                                              \
  ": it shapes the rank groups over which reduce_amax reduces delayed scaling's amax, and no "  \
  "amax is reduced (set reduce_amax = true, or remove %s)"

static void write_ranks(void) {
  mkdir(path_in("run"), 0777);
  mkdir(path_in("run/rank_0"), 0777);
  mkdir(path_in("run/rank_1"), 0777);
  put_text("run/rank_0/amax.csv", "step,tensor,amax\n0,m.input,2\n1,m.input,4\n");
  put_text("run/rank_1/amax.csv", "step,tensor,amax\n0,m.input,8\n1,m.input,1\n");
}

/* `fp8lab run rel --out o --no-report`: exit 2 with exactly want (one line), no folder o. */
static void expect_cli_refusal(const char *rel, const char *want) {
  char *out = NULL;
  int rc = run_cli(&out, "run %s --out o --no-report", rel);
  ck_assert_msg(rc == 2, "%s: exit %d, output %s", rel, rc, out);
  ck_assert_str_eq(out, want);
  free(out);
  struct stat sb;
  ck_assert_msg(stat(path_in("o"), &sb) != 0, "%s: the output folder was made", rel);
}

/* The loader's message for rel: "<path>:<want>" exactly (want starts with the line). */
static void expect_load_error(const char *rel, const char *want) {
  fp8_experiment ex;
  char err[1024], full[4096 + 1024];
  const char *path = path_in(rel);
  ck_assert_int_eq(fp8_experiment_load(path, &ex, err, sizeof err), FP8_EINVAL);
  snprintf(full, sizeof full, "%s:%s", path, want);
  ck_assert_str_eq(err, full);
}

START_TEST(test_reduce_group_without_reduce_amax) {
  write_ranks();
  char want[1100], msg[1024];
  /* reduce_amax absent */
  put_text("g.ini", "[trace]\npath = run\nreduce_group = 2\n[recipe.d]\nkind = delayed\n");
  snprintf(msg, sizeof msg, "3: reduce_group does nothing without reduce_amax = true" REDUCE_WHY,
           "reduce_group");
  snprintf(want, sizeof want, "fp8lab: g.ini:%s\n", msg);
  expect_cli_refusal("g.ini", want);
  expect_load_error("g.ini", msg);
  /* reduce_amax = false, after it: reported at reduce_group's line, naming reduce_amax's */
  put_text("gf.ini", "[trace]\npath = run\nreduce_group = 2\nreduce_amax = false\n"
                     "[recipe.d]\nkind = delayed\n");
  snprintf(msg, sizeof msg,
           "3: reduce_group does nothing with reduce_amax = false (line 4)" REDUCE_WHY,
           "reduce_group");
  snprintf(want, sizeof want, "fp8lab: gf.ini:%s\n", msg);
  expect_cli_refusal("gf.ini", want);
  expect_load_error("gf.ini", msg);
  /* with reduce_amax = true it acts: loads, and the run reduces over groups of 2 */
  put_text("gt.ini", "[trace]\npath = run\nreduce_amax = true\nreduce_group = 2\n"
                     "[recipe.d]\nkind = delayed\n");
  fp8_experiment ex;
  char err[1024];
  ck_assert_msg(fp8_experiment_load(path_in("gt.ini"), &ex, err, sizeof err) == FP8_OK, "%s", err);
  ck_assert_int_eq(ex.reduce_group, 2);
  fp8_experiment_free(&ex);
  char *out = NULL;
  ck_assert_int_eq(run_cli(&out, "run gt.ini --out ot --no-report --quiet"), 0);
  free(out);
}
END_TEST

START_TEST(test_reduce_stride_without_reduce_amax) {
  write_ranks();
  char want[1100], msg[1024];
  put_text("s.ini", "[trace]\npath = run\n\nreduce_stride = 2\n[recipe.d]\nkind = delayed\n");
  snprintf(msg, sizeof msg, "4: reduce_stride does nothing without reduce_amax = true" REDUCE_WHY,
           "reduce_stride");
  snprintf(want, sizeof want, "fp8lab: s.ini:%s\n", msg);
  expect_cli_refusal("s.ini", want);
  expect_load_error("s.ini", msg);
  /* both keys, reduce_amax = off first: the first of them in the file is reported */
  put_text("gs.ini", "[trace]\npath = run\nreduce_amax = off\nreduce_stride = 1\n"
                     "reduce_group = 2\n[recipe.d]\nkind = delayed\n");
  snprintf(msg, sizeof msg,
           "4: reduce_stride does nothing with reduce_amax = false (line 3)" REDUCE_WHY,
           "reduce_stride");
  snprintf(want, sizeof want, "fp8lab: gs.ini:%s\n", msg);
  expect_cli_refusal("gs.ini", want);
  expect_load_error("gs.ini", msg);
  /* a bad reduce_amax is the error to fix, not the key that needs it */
  put_text("bad.ini", "[trace]\npath = run\nreduce_group = 2\nreduce_amax = sometimes\n"
                      "[recipe.d]\nkind = delayed\n");
  expect_load_error("bad.ini", "4: bad reduce_amax \"sometimes\" (expected true or false)");
}
END_TEST

#define SR_WHY                                                                                  \
  "sr_seed does nothing with rounding = nearest (line %d): it seeds stochastic rounding's "     \
  "draw, and nearest draws nothing (give rounding = stochastic, or auto for the gradients "     \
  "alone, or remove sr_seed)"

START_TEST(test_sr_seed_with_nearest_rounding) {
  write_ranks();
  char want[1100], msg[1024];
  put_text("n.ini", "[trace]\npath = run\n[recipe.nv]\nkind = nvfp4\nrounding = nearest\n"
                    "sr_seed = 7\n[recipe.d]\nkind = delayed\n");
  snprintf(msg, sizeof msg, "6: " SR_WHY, 5);
  snprintf(want, sizeof want, "fp8lab: n.ini:%s\n", msg);
  expect_cli_refusal("n.ini", want);
  expect_load_error("n.ini", msg);
  /* sr_seed before rounding (and NEAREST in capitals): reported at sr_seed's line */
  put_text("n2.ini", "[trace]\npath = run\n[recipe.nv]\nsr_seed = 0\nkind = nvfp4\n"
                     "rounding = NEAREST\n");
  snprintf(msg, sizeof msg, "4: " SR_WHY, 6);
  expect_load_error("n2.ini", msg);
  /* rounding takes one value per section: no list can hold nearest beside stochastic */
  put_text("l.ini", "[trace]\npath = run\n[recipe.nv]\nkind = nvfp4\n"
                    "rounding = nearest, stochastic\nsr_seed = 1\n");
  expect_load_error("l.ini", "5: rounding must be a single value for kind nvfp4: steps.csv has "
                             "no column to tell such configurations apart (use one [recipe.*] "
                             "section per setting)");
  /* where sr_seed acts: stochastic, auto (the gradients), and the default (auto) */
  static const char *const ok[] = {"rounding = stochastic\n", "rounding = auto\n", ""};
  for (size_t i = 0; i < 3; i++) {
    char text[256];
    snprintf(text, sizeof text, "[trace]\npath = run\n[recipe.nv]\nkind = nvfp4\n%ssr_seed = 9\n",
             ok[i]);
    put_text("ok.ini", text);
    fp8_experiment ex;
    char err[1024];
    ck_assert_msg(fp8_experiment_load(path_in("ok.ini"), &ex, err, sizeof err) == FP8_OK,
                  "case %zu: %s", i, err);
    ck_assert_uint_eq(ex.nconfigs, 1);
    ck_assert_uint_eq(ex.configs[0].sr_seed, 9);
    fp8_experiment_free(&ex);
  }
  /* nearest without sr_seed is fine */
  put_text("nn.ini", "[trace]\npath = run\n[recipe.nv]\nkind = nvfp4\nrounding = nearest\n");
  fp8_experiment ex;
  char err[1024];
  ck_assert_msg(fp8_experiment_load(path_in("nn.ini"), &ex, err, sizeof err) == FP8_OK, "%s", err);
  fp8_experiment_free(&ex);
}
END_TEST

int main(void) {
  Suite *s = suite_create("keys_without_effect");
  TCase *tc = tcase_create("keys");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_reduce_group_without_reduce_amax);
  tcase_add_test(tc, test_reduce_stride_without_reduce_amax);
  tcase_add_test(tc, test_sr_seed_with_nearest_rounding);
  suite_add_tcase(s, tc);
  return tu_run_suite(s);
}
