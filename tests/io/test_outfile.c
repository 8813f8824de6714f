/* test_outfile.c: output files (src/io/outfile.c) on a full disk: a write that fails mid-run or at
 * its commit is exit 1 with one line naming the file, and neither a temporary nor a partial file
 * is left behind (the run's files and the report's). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "tu_dir.h"
#include "tu_traces.h"

/* Runs fp8lab with the temporary file `.<name>.tmp.<pid>` of dir (relative to the test dir) a
 * symlink to /dev/full, where every write fails with ENOSPC as on a full disk: the shell makes
 * the link with its own pid and execs fp8lab, which keeps that pid. */
static int run_disk_full(char **out, const char *dir, const char *name, const char *args) {
  char cmd[8192];
  /* the rows of the step loop are written into the checkpoint folder (.fp8lab-checkpoint/
   * steps.csv, histograms.csv: renamed at the commit), the other files to .<name>.tmp.<pid> */
  int part = strcmp(name, "steps.csv") == 0 || strcmp(name, "histograms.csv") == 0 ||
             strcmp(name, "stream.csv") == 0;
  if (part)
    snprintf(cmd, sizeof cmd, "cd '%s' && mkdir -p %s/.fp8lab-checkpoint && ln -s /dev/full "
             "%s/.fp8lab-checkpoint/%s && exec \"%s\" %s", g_dir, dir, dir, name, tu_bin(), args);
  else
    snprintf(cmd, sizeof cmd, "cd '%s' && mkdir -p %s && sh -c 'ln -s /dev/full %s/.%s.tmp.$$ && "
             "exec \"%s\" %s'", g_dir, dir, dir, name, tu_bin(), args);
  return tu_run(cmd, out);
}

/* An output write that fails mid-run or at its commit (disk full) is a runtime failure: exit 1
 * (docs/reference.md, the output folder), one line naming the file; the file is not left behind (no temporary, no partial
 * file under its name). Writes of the run (steps.csv through the step loop's check, summary.csv
 * and run.json at the end) and of the report. */
START_TEST(test_write_failure_exit_1) {
  if (access("/dev/full", W_OK) != 0) {
    printf("test_write_failure_exit_1: skipped: no writable /dev/full\n");
    return;
  }
  write_tiny_trace();
  put_text("exp.ini", TINY_INI);
  char *out;
  const char *files[] = {"steps.csv", "summary.csv", "histograms.csv", "run.json", "stream.csv"};
  for (int i = 0; i < 5; i++) {
    char dir[32];
    snprintf(dir, sizeof dir, "full%d", i);
    char args[128];
    snprintf(args, sizeof args, "run exp.ini --quiet --force --no-report --out %s", dir);
    int rc = run_disk_full(&out, dir, files[i], args);
    char want[256];
    snprintf(want, sizeof want, "fp8lab: %s/%s: write failed: No space left on device\n", dir, files[i]);
    ck_assert_msg(rc == 1, "%s: exit %d: %s", files[i], rc, out);
    ck_assert_str_eq(out, want);
    free(out);
    char rel[64];
    snprintf(rel, sizeof rel, "%s/%s", dir, files[i]);
    const char *p = path_in(rel);
    struct stat sb;
    ck_assert_msg(lstat(p, &sb) != 0, "%s left behind", rel);
  }
  /* mid-run: a steps.csv larger than the stdio buffer fails in the step loop */
  ck_assert_int_eq(run_cli(&out, "synth llm big --steps 6 --seed 2"), 0);
  free(out);
  put_text("big.ini", "[trace]\npath = big\n[recipe.d]\nkind = delayed\nhistory_len = 1, 2, 4, 8\n"
                      "margin = 0, 1\n[analysis]\ngemm = false\n");
  int rc = run_disk_full(&out, "fullbig", "steps.csv", "run big.ini --quiet --force --no-report --out fullbig");
  ck_assert_msg(rc == 1, "exit %d: %s", rc, out);
  ck_assert_str_eq(out, "fp8lab: fullbig/steps.csv: write failed: No space left on device\n");
  free(out);
  /* mid-run in stream.csv's writer thread (its rows outgrow the stdio buffer at the first
   * step): the step loop's check, or the drain before a checkpoint, says so */
  rc = run_disk_full(&out, "fullbig2", "stream.csv",
                     "run big.ini --quiet --force --no-report --checkpoint-interval 0 --out fullbig2");
  ck_assert_msg(rc == 1, "exit %d: %s", rc, out);
  ck_assert_str_eq(out, "fp8lab: fullbig2/stream.csv: write failed: No space left on device\n");
  free(out);
  const char *left = path_in("fullbig2/stream.csv");
  ck_assert_msg(access(left, F_OK) != 0, "fullbig2/stream.csv left behind");
  /* the report's files */
  ck_assert_int_eq(run_cli(&out, "run exp.ini --quiet --no-report --out rep"), 0);
  free(out);
  rc = run_disk_full(&out, "rep", "analysis.csv", "report rep --quiet");
  ck_assert_msg(rc == 1, "exit %d: %s", rc, out);
  ck_assert_str_eq(out, "fp8lab: report: rep/analysis.csv: write failed: No space left on device\n");
  free(out);
  rc = run_disk_full(&out, "rep", "report.md", "report rep --quiet");
  ck_assert_msg(rc == 1, "exit %d: %s", rc, out);
  ck_assert_str_eq(out, "fp8lab: report: rep/report.md: write failed: No space left on device\n");
  free(out);
  /* fp8lab synth: its amax.csv (temporary amax.csv.tmp.<pid>) */
  char cmd[8192];
  snprintf(cmd, sizeof cmd, "cd '%s' && mkdir syn && sh -c 'ln -s /dev/full syn/amax.csv.tmp.$$ && "
           "exec \"%s\" synth llm syn --steps 2'", g_dir, tu_bin());
  rc = tu_run(cmd, &out);
  ck_assert_msg(rc == 1, "exit %d: %s", rc, out);
  ck_assert_msg(strncmp(out, "fp8lab: syn/amax.csv.tmp.", 25) == 0 && count_lines(out) == 1 &&
                strstr(out, ": write failed: No space left on device\n") != NULL, "%s", out);
  free(out);
}
END_TEST

TU_MAIN("outfile", "cli", setup, teardown, 120, test_write_failure_exit_1)
