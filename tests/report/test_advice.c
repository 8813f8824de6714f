/* test_advice.c: the report's advice.ini replays with `fp8lab run` from another folder (its paths
 * resolved as written). */
#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testutil.h"
#include "tu_dir.h"
#include "tu_traces.h"

START_TEST(test_advice_replays_elsewhere) {
  write_tiny_trace();
  put_text("adv.ini", "[trace]\npath = trace\nsteps = 0-2:1\ntensors = m.*\n"
                      "[recipe.d]\nkind = delayed\nhistory_len = 1, 2\n"
                      "[recipe.c]\nkind = current\n"
                      "[analysis]\noverflow_budget = 1e-6\nstep_budget = 0.001\n"
                      "warmup_steps = 1\ngemm_max_tokens = 64\n"
                      "[output]\ndir = advout\n");
  char *out;
  ck_assert_int_eq(run_cli(&out, "run adv.ini --force --quiet"), 0);
  free(out);
  const char *p = path_in("advout/advice.ini");
  char *adv = tu_read_file(p, NULL);
  ck_assert_msg(adv != NULL, "the run wrote no advice.ini");
  const char *t = path_in("trace");
  char abs[PATH_MAX], want[PATH_MAX + 128];
  ck_assert_ptr_nonnull(realpath(t, abs));
  snprintf(want, sizeof want, "[trace]\npath = %s\nsteps = 0-2:1\ntensors = m.*\n\n", abs);
  ck_assert_msg(strstr(adv, want) != NULL, "no '%s' in advice.ini:\n%s", want, adv);
  ck_assert_msg(strstr(adv, "\n[analysis]\noverflow_budget = 1e-06\nstep_budget = 0.001\n"
                            "warmup_steps = 1\ngemm = true\ngemm_max_tokens = 64\n") != NULL,
                "advice.ini's [analysis] is not the run's:\n%s", adv);
  free(adv);
  /* from another folder, by a relative path */
  const char *d1 = path_in("elsewhere");
  const char *d2 = path_in("elsewhere/deeper");
  mkdir(d1, 0777);
  mkdir(d2, 0777);
  int rc = tu_cli(d2, &out, "run ../../advout/advice.ini --force --quiet");
  ck_assert_msg(rc == 0, "fp8lab run advice.ini from elsewhere/deeper: exit %d:\n%s", rc, out);
  free(out);
  p = path_in("advout/advice/report.md");
  char *rep = tu_read_file(p, NULL);
  ck_assert_msg(rep != NULL, "the replay of advice.ini wrote no report");
  ck_assert_msg(strstr(rep, "The mixed recipe **advice**") &&
                    strstr(rep, "within the budgets of this run's [analysis] (overflow_budget "
                                "1e-06 of the values clipped, step_budget 0.001 of the steps"),
                "the confirmation does not name the advice's budgets:\n%s", rep);
  free(rep);
}
END_TEST

TU_MAIN("advice", "cli", setup, teardown, 120, test_advice_replays_elsewhere)
