/* test_amax_only_unserved.c: a trace of amaxes alone (amax.csv without snapshots) serves only the
 * experiment's delayed configurations (their stream) and the [analysis] keys that act on it
 * (step_budget, warmup_steps, routers); every other [recipe.*] section and every [analysis]
 * key the file gives whose effect needs the tensors' values or shapes is named, not dropped
 * (issue 41, item 8): one stderr warning per section or key at its file:line, run.json's
 * "unserved" list, and the report's first paragraph, each by its label. The same experiment
 * over a trace with snapshots serves everything: "unserved": [] and no warning. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "run_helpers.h"
#include "testutil.h"
#include "tu_dir.h"

#define EXP_BODY                                                                                \
  "[recipe.delayed]\nkind = delayed\nhistory_len = 1, 2\n"  /* 3-5 */                           \
  "[recipe.cur]\nkind = current\n"                          /* 6-7 */                           \
  "[recipe.mx8]\nkind = mxfp8\n"                            /* 8-9 */                           \
  "[recipe.blk]\nkind = block\n"                            /* 10-11 */                         \
  "[recipe.row]\nkind = rowwise\n"                          /* 12-13 */                         \
  "[recipe.fp4]\nkind = nvfp4\nlabel = nv\n"                /* 14-16 */                         \
  "[recipe.mx4]\nkind = mxfp4\n"                            /* 17-18 */                         \
  "[recipe.keep]\nkind = bf16\n"                            /* 19-20 */                         \
  "[analysis]\noverflow_budget = 1e-4\nstep_budget = 0.05\nflush_budget = 0.01\n"  /* 21-24 */ \
  "routers = fp8\nfp4_gemm_ratio = 8\nwarmup_steps = 1\ngemm = true\n"           /* 25-28 */ \
  "gemm_error = sampled\ngemm_sample = 8\ngemm_seed = 3\ngemm_max_tokens = 64\n" /* 29-32 */ \
  "cost_tokens = 4096\n"                                                          /* 33 */    \
  "[output]\ndir = out\n"

/* What is not served, in file order: a section's name, label, kind and header line; a key's
 * name and line. */
typedef struct {
  const char *section, *key, *label, *kind;
  int line;
} want_t;
static const want_t WANT[] = {
    {"recipe.cur", NULL, "cur", "current", 6},
    {"recipe.mx8", NULL, "mx8", "mxfp8", 8},
    {"recipe.blk", NULL, "blk", "block", 10},
    {"recipe.row", NULL, "row", "rowwise", 12},
    {"recipe.fp4", NULL, "nv", "nvfp4", 14},
    {"recipe.mx4", NULL, "mx4", "mxfp4", 17},
    {"recipe.keep", NULL, "keep", "bf16", 19},
    {"analysis", "overflow_budget", NULL, NULL, 22},
    {"analysis", "flush_budget", NULL, NULL, 24},
    {"analysis", "fp4_gemm_ratio", NULL, NULL, 26},
    {"analysis", "gemm", NULL, NULL, 28},
    {"analysis", "gemm_error", NULL, NULL, 29},
    {"analysis", "gemm_sample", NULL, NULL, 30},
    {"analysis", "gemm_seed", NULL, NULL, 31},
    {"analysis", "gemm_max_tokens", NULL, NULL, 32},
    {"analysis", "cost_tokens", NULL, NULL, 33},
};
#define NWANT (sizeof WANT / sizeof WANT[0])

/* Two tensors, four steps of amax.csv, no snapshot. */
static void write_amax_trace(void) {
  mkdir(path_in("trace"), 0777);
  put_text("trace/amax.csv", "step,tensor,amax\n0,m.input,2\n0,m.weight,1\n1,m.input,4\n"
                             "1,m.weight,1\n2,m.input,300\n2,m.weight,1\n3,m.input,2\n"
                             "3,m.weight,1\n");
}

static const char *str_of(json_t *o, const char *key) {
  json_t *v = json_object_get(o, key);
  ck_assert_msg(json_is_string(v), "%s: not a string", key);
  return json_string_value(v);
}

START_TEST(test_amax_only_names_what_it_cannot_serve) {
  write_amax_trace();
  put_text("e.ini", "[trace]\npath = trace\n" EXP_BODY);
  char *out = NULL;
  int rc = run_cli(&out, "run e.ini --quiet");
  ck_assert_msg(rc == 0, "exit %d: %s", rc, out);

  /* run.json: the list, in file order, with each entry's fields */
  json_error_t jerr;
  json_t *j = json_load_file(path_in("out/run.json"), 0, &jerr);
  ck_assert_msg(j != NULL, "%s", jerr.text);
  ck_assert_int_eq(json_integer_value(json_object_get(j, "configurations")), 9);
  json_t *un = json_object_get(j, "unserved");
  ck_assert_msg(json_is_array(un), "no unserved list");
  ck_assert_uint_eq(json_array_size(un), NWANT);

  /* stderr: exactly one warning line per entry, nothing else (--quiet) */
  ck_assert_int_eq(count_lines(out), (int)NWANT);
  char *report = tu_read_file(path_in("out/report.md"), NULL);
  ck_assert_ptr_nonnull(report);
  /* the first paragraph: after the title, up to the blank line */
  char *p1 = strstr(report, "Replay of ");
  ck_assert_ptr_nonnull(p1);
  char *end = strstr(p1, "\n\n");
  ck_assert_ptr_nonnull(end);
  *end = '\0';
  ck_assert_msg(strstr(p1, "through 2 FP8 scaling configurations") != NULL, "%s", p1);
  ck_assert_msg(strstr(p1, "**The experiment's 7 more configurations (7 [recipe.*] sections) and "
                           "9 [analysis] keys had nothing to act on**") != NULL, "%s", p1);

  const char *line = out;
  for (size_t i = 0; i < NWANT; i++) {
    const want_t *w = &WANT[i];
    json_t *e = json_array_get(un, i);
    ck_assert_str_eq(str_of(e, "section"), w->section);
    ck_assert_int_eq(json_integer_value(json_object_get(e, "line")), w->line);
    const char *why = str_of(e, "why");
    ck_assert_msg(strlen(why) > 40, "%s: why %s", w->section, why);
    char prefix[512], named[1024];
    if (w->key) {
      ck_assert_str_eq(str_of(e, "key"), w->key);
      ck_assert_ptr_null(json_object_get(e, "label"));
      snprintf(prefix, sizeof prefix, "fp8lab: warning: e.ini:%d: [analysis] %s has nothing to act "
               "on: the trace has no snapshots, only amaxes; ", w->line, w->key);
      snprintf(named, sizeof named, "`[analysis] %s` (line %d): %s", w->key, w->line, why);
    } else {
      ck_assert_ptr_null(json_object_get(e, "key"));
      ck_assert_str_eq(str_of(e, "label"), w->label);
      ck_assert_str_eq(str_of(e, "kind"), w->kind);
      ck_assert_int_eq(json_integer_value(json_object_get(e, "configurations")), 1);
      if (strcmp(w->section + 7, w->label) != 0)
        snprintf(prefix, sizeof prefix, "fp8lab: warning: e.ini:%d: [%s] (label %s, kind %s, 1 "
                 "configuration) has nothing to act on: the trace has no snapshots, only "
                 "amaxes; ", w->line, w->section, w->label, w->kind);
      else
        snprintf(prefix, sizeof prefix, "fp8lab: warning: e.ini:%d: [%s] (kind %s, 1 "
                 "configuration) has nothing to act on: the trace has no snapshots, only "
                 "amaxes; ", w->line, w->section, w->kind);
      snprintf(named, sizeof named, "`[%s]` (label `%s`, kind %s, 1 configuration, line %d): %s",
               w->section, w->label, w->kind, w->line, why);
    }
    /* the stderr line: the prefix, then run.json's why, then the newline */
    const char *nl = strchr(line, '\n');
    ck_assert_ptr_nonnull(nl);
    ck_assert_msg(strncmp(line, prefix, strlen(prefix)) == 0, "line %zu: want %s, got %.*s", i,
                  prefix, (int)(nl - line), line);
    ck_assert_msg((size_t)(nl - line) == strlen(prefix) + strlen(why) &&
                      strncmp(line + strlen(prefix), why, strlen(why)) == 0,
                  "line %zu: want why %s, got %.*s", i, why, (int)(nl - line), line);
    line = nl + 1;
    /* the report's first paragraph names it, by label, with the same why */
    ck_assert_msg(strstr(p1, named) != NULL, "report's first paragraph lacks %s:\n%s", named, p1);
  }
  /* two entries by hand: the nvfp4 section under its label, and the flush budget */
  ck_assert_ptr_nonnull(strstr(out, "fp8lab: warning: e.ini:14: [recipe.fp4] (label nv, kind "
                                    "nvfp4, 1 configuration) has nothing to act on: the trace "
                                    "has no snapshots, only amaxes; NVFP4 scales each block of "
                                    "16 values and casts them to E2M1, which needs the tensors' "
                                    "values: no rows, and no FP4 section\n"));
  ck_assert_ptr_nonnull(strstr(out, "fp8lab: warning: e.ini:24: [analysis] flush_budget has "
                                    "nothing to act on: the trace has no snapshots, only amaxes; "
                                    "it counts the values a configuration flushes to zero, which "
                                    "needs the tensors' values: no tensor is advised current "
                                    "scaling or BF16 by it\n"));
  /* served: the delayed section and the keys that act on the stream are not named */
  static const char *const served[] = {"recipe.delayed", "step_budget", "routers", "warmup_steps"};
  for (size_t k = 0; k < 4; k++) {
    ck_assert_msg(strstr(out, served[k]) == NULL, "%s named in %s", served[k], out);
    ck_assert_msg(strstr(p1, served[k]) == NULL, "%s named in %s", served[k], p1);
  }
  free(report);
  json_decref(j);
  free(out);
}
END_TEST

/* The same experiment over a trace with snapshots: every section has rows, every key acts. */
START_TEST(test_snapshots_serve_everything) {
  put_text("s.ini", "[trace]\npath = synth:llm\nsynth_steps = 2\n" EXP_BODY);
  char *out = NULL;
  int rc = run_cli(&out, "run s.ini --quiet --no-report");
  ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
  ck_assert_str_eq(out, "");
  free(out);
  json_error_t jerr;
  json_t *j = json_load_file(path_in("out/run.json"), 0, &jerr);
  ck_assert_msg(j != NULL, "%s", jerr.text);
  json_t *un = json_object_get(j, "unserved");
  ck_assert(json_is_array(un));
  ck_assert_uint_eq(json_array_size(un), 0);
  ck_assert_int_gt(json_integer_value(json_object_get(j, "rows")), 0);
  json_decref(j);
}
END_TEST

int main(void) {
  Suite *s = suite_create("amax_only_unserved");
  TCase *tc = tcase_create("unserved");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_amax_only_names_what_it_cannot_serve);
  tcase_add_test(tc, test_snapshots_serve_everything);
  suite_add_tcase(s, tc);
  return tu_run_suite(s);
}
