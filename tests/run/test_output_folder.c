/* test_output_folder.c: the run's output folder (src/run): where it goes and when it may be reused
 * (--out, [output] dir, --force), and an error found in the trace writes nothing: no folder is
 * created for it, one that was there is left as it was. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testutil.h"
#include "tu_dir.h"
#include "tu_traces.h"
#include "run_helpers.h"

START_TEST(test_output_dir_rules) {
  write_tiny_trace();
  put_text("exp.ini", TINY_INI);
  const char *od = path_in("out");
  mkdir(od, 0777);
  put_text("out/precious.txt", "keep me");
  char *out;
  int rc = run_cli(&out, "run exp.ini --quiet");
  ck_assert_int_eq(rc, 2);
  ck_assert_msg(strstr(out, "out: output directory is not empty") != NULL, "%s", out);
  ck_assert_int_eq(count_lines(out), 1);
  free(out);
  const char *p = path_in("out/steps.csv");
  struct stat sb;
  ck_assert_int_ne(stat(p, &sb), 0); /* nothing written */
  ck_assert_int_eq(run_cli(&out, "run exp.ini --quiet --force"), 0);
  free(out);
  ck_assert_int_eq(stat(p, &sb), 0);
  p = path_in("out/precious.txt");
  char *keep = tu_read_file(p, NULL);
  ck_assert_str_eq(keep, "keep me");
  free(keep);
  /* an output directory that cannot be created (a file is in the way) */
  put_text("afile", "x");
  rc = run_cli(&out, "run exp.ini --quiet --out afile/sub");
  ck_assert_int_eq(rc, 2);
  ck_assert_msg(strstr(out, "afile/sub") != NULL && count_lines(out) == 1, "%s", out);
  free(out);
}
END_TEST

static int entries(const char *rel) {
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "ls -A '%s/%s' | wc -l", g_dir, rel);
  char *out;
  ck_assert_int_eq(tu_run(cmd, &out), 0);
  int n = atoi(out);
  free(out);
  return n;
}

/* An error found in the trace (after the experiment file parsed) writes nothing: no output
 * folder is created for it (not even the parents of a nested one), a folder that was there
 * (empty, or an old run's with --force) is left as it was. A synth: trace has to be generated
 * into the output folder before its checks: a folder the run created is removed again, and an
 * old run's trace that --force was to replace is put back. */
START_TEST(test_no_folder_on_input_error) {
  char *out;
  write_two_rank_trace();
  put_text("r3.ini", "[trace]\npath = run\nreduce_amax = true\nreduce_group = 3\n"
                     "[recipe.d]\nkind = delayed\n");
  ck_assert_int_eq(run_cli(&out, "run r3.ini --out a/b/c"), 2);
  ck_assert_str_eq(out, "fp8lab: r3.ini:4: reduce_group = 3 does not divide the 2 ranks of run "
                        "(expected one of 1, 2)\n");
  free(out);
  ck_assert(!exists("a"));
  /* the trace's own errors too: a truncated snapshot */
  write_tiny_trace();
  put_text("exp.ini", TINY_INI);
  put_text("trace/step_7.safetensors", "\x40\x00\x00\x00\x00\x00\x00\x00{\"a.input\":");
  ck_assert_int_eq(run_cli(&out, "run exp.ini --out o4"), 2);
  free(out);
  ck_assert(!exists("o4"));
  /* a folder that was there stays, empty */
  const char *d = path_in("empty");
  mkdir(d, 0777);
  ck_assert_int_eq(run_cli(&out, "run r3.ini --out empty"), 2);
  free(out);
  ck_assert(exists("empty"));
  ck_assert_int_eq(entries("empty"), 0);
  /* synth: generated, then refused (tensors selects nothing): the new folder is gone */
  put_text("sy.ini", "[trace]\npath = synth:llm\nsynth_steps = 4\ntensors = zzz*\n"
                     "[recipe.d]\nkind = delayed\n");
  ck_assert_int_eq(run_cli(&out, "run sy.ini --out sy/out"), 2);
  ck_assert_str_eq(out, "fp8lab: sy.ini:4: tensors = zzz* selects none of the tensors of the trace "
                        "sy/out/synth_trace\n");
  free(out);
  ck_assert(!exists("sy"));
  ck_assert_int_eq(run_cli(&out, "run sy.ini --out empty"), 2);
  free(out);
  ck_assert_int_eq(entries("empty"), 0);
  /* ... and over an old run with --force, the old trace stays what it was */
  put_text("prev.ini", "[trace]\npath = synth:llm\nsynth_steps = 4\n[recipe.d]\nkind = delayed\n");
  ck_assert_int_eq(run_cli(&out, "run prev.ini --quiet --no-report --out prev"), 0);
  free(out);
  char *before = read_out("prev/synth_trace/amax.csv");
  int n_before = entries("prev"), nt_before = entries("prev/synth_trace");
  put_text("sy6.ini", "[trace]\npath = synth:llm\nsynth_steps = 6\ntensors = zzz*\n"
                      "[recipe.d]\nkind = delayed\n");
  ck_assert_int_eq(run_cli(&out, "run sy6.ini --force --out prev"), 2);
  free(out);
  char *after = read_out("prev/synth_trace/amax.csv");
  ck_assert_str_eq(after, before);
  ck_assert_int_eq(entries("prev"), n_before);
  ck_assert_int_eq(entries("prev/synth_trace"), nt_before);
  free(before);
  free(after);
}
END_TEST

TU_MAIN("output_folder", "cli", setup, teardown, 120, test_output_dir_rules,
        test_no_folder_on_input_error)
