/* test_budget_subnormals.c: every budget is a fraction in 0..1, subnormals included (issue 41,
 * item 9): flush_budget = 1e-320 was refused as "outside 0..1" because strtod reports ERANGE for
 * a result below the smallest normal double. Each budget key of [analysis] (overflow_budget,
 * step_budget, flush_budget) and `fp8lab report --budget` take a subnormal as strtod's nearest
 * double, and a decimal below the smallest subnormal as 0; overflow and negatives stay refused.
 * Through `fp8lab run` first: the run is accepted (exit 0) and run.json records the budget as
 * that same double; then the report's --budget. */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "experiment.h"
#include "experiment_helpers.h"
#include "testutil.h"
#include "tu_dir.h"

/* The number after "key": in a run.json (jansson's %.17g): parsed with strtod, errno ignored. */
static double json_number(const char *js, const char *key) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\": ", key);
  const char *p = strstr(js, pat);
  ck_assert_msg(p != NULL, "no %s in %s", key, js);
  return strtod(p + strlen(pat), NULL);
}

START_TEST(test_budget_subnormals_run) {
  /* 1e-320 (subnormal), 4.9e-324 (the smallest subnormal), 2.2250738585072009e-308 (the largest
   * subnormal): each is its own double, not 0 */
  put_text("b.ini", "[trace]\npath = synth:llm\nsynth_steps = 2\n[recipe.d]\nkind = delayed\n"
                    "[analysis]\nflush_budget = 1e-320\noverflow_budget = 4.9e-324\n"
                    "step_budget = 2.2250738585072009e-308\n[output]\ndir = out\n");
  char *out = NULL;
  int rc = run_cli(&out, "run b.ini --quiet");
  ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
  free(out);
  char *js = tu_read_file(path_in("out/run.json"), NULL);
  ck_assert_ptr_nonnull(js);
  ck_assert(json_number(js, "flush_budget") == 1e-320);
  ck_assert(json_number(js, "overflow_budget") == 4.9e-324);
  ck_assert(json_number(js, "step_budget") == 2.2250738585072009e-308);
  ck_assert(json_number(js, "flush_budget") > 0.0);
  free(js);
  /* the report's --budget: a subnormal, and a decimal below the smallest subnormal */
  rc = run_cli(&out, "report out --budget 1e-320 --quiet");
  ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
  free(out);
  rc = run_cli(&out, "report out --budget 1e-400 --quiet");
  ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
  free(out);
  /* still refused: past 1, overflow, negative */
  static const char *const bad[] = {"1.5", "1e400", "-1e-320"};
  for (size_t i = 0; i < 3; i++) {
    rc = run_cli(&out, "report out --budget %s", bad[i]);
    char want[128];
    snprintf(want, sizeof want, "fp8lab report: --budget wants a fraction in 0..1, got '%s'\n",
             bad[i]);
    ck_assert_msg(rc == 2, "--budget %s: exit %d", bad[i], rc);
    ck_assert_str_eq(out, want);
    free(out);
  }
}
END_TEST

/* The loader: each budget key's value, exactly strtod's double. */
START_TEST(test_budget_subnormals_load) {
  static const char *const keys[] = {"overflow_budget", "step_budget", "flush_budget"};
  static const char *const vals[] = {"1e-320", "4.9e-324", "2.2250738585072009e-308", "1e-400",
                                     "0", "1"};
  for (size_t k = 0; k < 3; k++)
    for (size_t v = 0; v < 6; v++) {
      char text[256];
      snprintf(text, sizeof text, "[trace]\npath = t\n[recipe.d]\nkind = delayed\n[analysis]\n"
                                  "%s = %s\n", keys[k], vals[v]);
      put_text("l.ini", text);
      fp8_experiment ex;
      char err[1024];
      ck_assert_msg(fp8_experiment_load(path_in("l.ini"), &ex, err, sizeof err) == FP8_OK,
                    "%s = %s: %s", keys[k], vals[v], err);
      double got = k == 0 ? ex.overflow_budget : k == 1 ? ex.step_budget : ex.flush_budget;
      double want = strtod(vals[v], NULL);
      ck_assert_msg(got == want, "%s = %s: %.17g, want %.17g", keys[k], vals[v], got, want);
      ck_assert_int_eq(ex.analysis_line[k == 0   ? FP8_EXP_AKEY_OVERFLOW_BUDGET
                                        : k == 1 ? FP8_EXP_AKEY_STEP_BUDGET
                                                 : FP8_EXP_AKEY_FLUSH_BUDGET],
                       6);
      fp8_experiment_free(&ex);
    }
  ck_assert(strtod("1e-320", NULL) > 0.0 && strtod("1e-320", NULL) < DBL_MIN);
  ck_assert(strtod("1e-400", NULL) == 0.0);
  /* refused, with the key's message: overflow, negative, past 1 */
  static const char *const bad[] = {"1e400", "-1e-320", "1.0000001"};
  for (size_t k = 0; k < 3; k++)
    for (size_t v = 0; v < 3; v++) {
      char text[256], want[4200];
      snprintf(text, sizeof text, "[trace]\npath = t\n[recipe.d]\nkind = delayed\n[analysis]\n"
                                  "%s = %s\n", keys[k], bad[v]);
      put_text("l.ini", text);
      fp8_experiment ex;
      char err[1024];
      ck_assert_int_eq(fp8_experiment_load(path_in("l.ini"), &ex, err, sizeof err), FP8_EINVAL);
      snprintf(want, sizeof want, "%s:6: bad %s \"%s\" (expected", path_in("l.ini"), keys[k],
               bad[v]);
      ck_assert_msg(strncmp(err, want, strlen(want)) == 0, "%s", err);
    }
}
END_TEST

int main(void) {
  Suite *s = suite_create("budget_subnormals");
  TCase *tc = tcase_create("budgets");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_budget_subnormals_run);
  tcase_add_test(tc, test_budget_subnormals_load);
  suite_add_tcase(s, tc);
  return tu_run_suite(s);
}
