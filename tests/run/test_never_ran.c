/* test_never_ran.c: tensors that never ran (amax 0 or no snapshot): `fp8lab run` names those it
 * leaves out of the statistics, with the reason, in its summary line and in run.json, and the
 * report names them too. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "results.h"
#include "tu_dir.h"
#include "tu_traces.h"

/* run.json's list under key, one name a line ("" when empty); NULL when the key is missing. */
static char *run_json_list(const char *rel, const char *key) {
  const char *p = path_in(rel);
  json_error_t jerr;
  json_t *j = json_load_file(p, 0, &jerr);
  ck_assert_msg(j != NULL, "%s: %s", rel, jerr.text);
  json_t *a = json_object_get(j, key);
  char *s = NULL;
  if (json_is_array(a)) {
    s = calloc(1, 4096);
    for (size_t i = 0; i < json_array_size(a); i++) {
      strcat(s, json_string_value(json_array_get(a, i)));
      strcat(s, "\n");
    }
  }
  json_decref(j);
  return s;
}

static void expect_list(const char *rel, const char *key, const char *want) {
  char *got = run_json_list(rel, key);
  ck_assert_msg(got != NULL, "%s: no %s", rel, key);
  ck_assert_str_eq(got, want);
  free(got);
}

/* The lines of out/<file> whose first field is tensor. */
static int rows_of(const char *file, const char *tensor) {
  const char *p = path_in(file);
  char *t = tu_read_file(p, NULL);
  ck_assert_ptr_nonnull(t);
  char prefix[64];
  snprintf(prefix, sizeof prefix, "%s,", tensor);
  int n = 0;
  for (const char *l = t; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
    n += strncmp(l, prefix, strlen(prefix)) == 0;
  free(t);
  return n;
}

/* fp8lab run names the tensors it leaves out of the statistics, with the reason, in its
 * summary line (a few, then a count) and in run.json (all); the report names them too. The
 * counts are those of write_never_ran_trace's comment. */
START_TEST(test_run_names_left_out) {
  write_never_ran_trace();
  put_text("lo.ini", "[trace]\npath = lo\n"
                     "[recipe.d]\nkind = delayed\nhistory_len = 1, 2\n"
                     "[recipe.c]\nkind = current\n"
                     "[output]\ndir = out\n");
  char *out;
  int rc = run_cli(&out, "run lo.ini");
  ck_assert_msg(rc == 0, "rc %d: %s", rc, out);
  /* 4 steps (0..3); 2 snapshot steps x 2 tensors x 3 configurations = 12 rows */
  const char *want = "fp8lab: 4 steps, 7 tensors (4 never ran: a.input, b.input, c.input and 1 more; "
                     "1 without a snapshot at a selected step: x.input; left out of statistics), 3 "
                     "configurations: 12 rows in ";
  ck_assert_msg(strncmp(out, want, strlen(want)) == 0, "%s", out);
  free(out);
  expect_list("out/run.json", "tensors_never_ran", "a.input\nb.input\nc.input\nd.input\n");
  expect_list("out/run.json", "tensors_without_snapshot", "x.input\n");
  expect_list("out/run.json", "tensors_without_recipe", "");
  /* where they are: no steps.csv, summary.csv or histograms.csv row; stream.csv has all 4
   * steps under both delayed configurations */
  static const char *const gone[] = {"a.input", "d.input", "x.input"};
  for (int k = 0; k < 3; k++) {
    ck_assert_int_eq(rows_of("out/steps.csv", gone[k]), 0);
    ck_assert_int_eq(rows_of("out/summary.csv", gone[k]), 0);
    ck_assert_int_eq(rows_of("out/histograms.csv", gone[k]), 0);
    ck_assert_int_eq(rows_of("out/stream.csv", gone[k]), 8);
  }
  ck_assert_int_eq(rows_of("out/summary.csv", "m.input"), 3);
  const char *p = path_in("out/report.md");
  char *md = tu_read_file(p, NULL);
  ck_assert_ptr_nonnull(md);
  ck_assert_msg(strstr(md, "2 tensors at 2 snapshot steps (12 rows of steps.csv)") != NULL, "%s", md);
  ck_assert_msg(strstr(md, "\n**Left out of these numbers: 5 tensors** of the replay, without rows "
                           "in steps.csv and summary.csv. Never ran (no snapshot, amax 0 at every "
                           "step of the replay: the module was not called), 4: `a.input`, "
                           "`b.input`, `c.input`, `d.input` (run.json: tensors_never_ran). No "
                           "snapshot at a selected step (a non-zero amax in amax.csv only: "
                           "stream.csv has their steps, the statistics need the data), 1: "
                           "`x.input` (run.json: tensors_without_snapshot).\n") != NULL, "%s", md);
  free(md);

  /* steps = 2: x.input's non-zero amax (step 1) is not selected, only its 0 of step 2: it
   * never ran in this replay of one step */
  put_text("lo2.ini", "[trace]\npath = lo\nsteps = 2\n"
                      "[recipe.d]\nkind = delayed\nhistory_len = 1, 2\n"
                      "[recipe.c]\nkind = current\n"
                      "[output]\ndir = out2\n");
  rc = run_cli(&out, "run lo2.ini --no-report");
  ck_assert_msg(rc == 0, "rc %d: %s", rc, out);
  want = "fp8lab: 1 steps, 7 tensors (5 never ran: a.input, b.input, c.input and 2 more; left out "
         "of statistics), 3 configurations: 6 rows in ";
  ck_assert_msg(strncmp(out, want, strlen(want)) == 0, "%s", out);
  free(out);
  expect_list("out2/run.json", "tensors_never_ran", "a.input\nb.input\nc.input\nd.input\nx.input\n");
  expect_list("out2/run.json", "tensors_without_snapshot", "");

  /* recipe sections for m.* only: the rest is replayed, but no configuration applies to it
   * (m.input 2 steps x 3 configurations, m.grad_output 2 x 2: 10 rows) */
  put_text("lo3.ini", "[trace]\npath = lo\n"
                      "[recipe.d]\nkind = delayed\nhistory_len = 1, 2\ntensors = m.*\n"
                      "[recipe.c]\nkind = current\ntensors = m.input\n"
                      "[output]\ndir = out3\n");
  rc = run_cli(&out, "run lo3.ini --no-report");
  ck_assert_msg(rc == 0, "rc %d: %s", rc, out);
  want = "fp8lab: 4 steps, 7 tensors (5 that no recipe section takes: a.input, b.input, c.input "
         "and 2 more; left out of statistics), 3 configurations: 10 rows in ";
  ck_assert_msg(strncmp(out, want, strlen(want)) == 0, "%s", out);
  free(out);
  expect_list("out3/run.json", "tensors_never_ran", "");
  expect_list("out3/run.json", "tensors_without_recipe", "a.input\nb.input\nc.input\nd.input\nx.input\n");

  /* nothing left out: the summary line as before */
  put_text("lo/amax.csv", "step,tensor,amax\n1,m.input,8\n");
  rc = run_cli(&out, "run lo.ini --force --no-report");
  ck_assert_msg(rc == 0, "rc %d: %s", rc, out);
  want = "fp8lab: 3 steps, 2 tensors, 3 configurations: 12 rows in ";
  ck_assert_msg(strncmp(out, want, strlen(want)) == 0, "%s", out);
  free(out);
  expect_list("out/run.json", "tensors_never_ran", "");
}
END_TEST

TU_MAIN("never_ran", "cli", setup, teardown, 120, test_run_names_left_out)
