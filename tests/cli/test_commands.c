/* test_commands.c: the command line's small commands through the real binary: --help, --version,
 * `synth` and `inspect` (its columns under long names, and tensors that never ran told from
 * tensors skipped at some steps, with exact step counts). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testutil.h"
#include "tu_dir.h"
#include "tu_traces.h"

START_TEST(test_help_version_synth_inspect) {
  char *out;
  ck_assert_int_eq(run_cli(&out, "--version"), 0);
  ck_assert_msg(strstr(out, "fp8lab " FP8LAB_VERSION) != NULL, "%s", out);
  free(out);
  ck_assert_int_eq(run_cli(&out, "--help"), 0);
  ck_assert(strstr(out, "run EXP.ini") != NULL);
  /* the overview names every command the dispatcher takes */
  const char *commands[] = {"\n  run ", "\n  synth ", "\n  inspect ", "\n  import-te ",
                            "\n  report ", "\n  timeline "};
  for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
    ck_assert_msg(strstr(out, commands[i]) != NULL, "--help does not name%s:\n%s", commands[i], out);
  free(out);
  ck_assert_int_eq(run_cli(&out, "run --help"), 0);
  ck_assert(strstr(out, "--threads") != NULL);
  /* every file a run writes, the report's included */
  const char *outputs[] = {"steps.csv", "stream.csv", "summary.csv", "histograms.csv", "gemm.csv", "run.json",
                           "analysis.csv", "recommendations.csv", "report.md",
                           "notebooks_export/<experiment>.ipynb", "plots/"};
  for (size_t i = 0; i < sizeof outputs / sizeof *outputs; i++)
    ck_assert_msg(strstr(out, outputs[i]) != NULL, "run --help does not name %s:\n%s", outputs[i], out);
  free(out);
  ck_assert_int_eq(run_cli(&out, "synth llm st --steps 12 --seed 3"), 0);
  free(out);
  ck_assert_int_eq(run_cli(&out, "inspect st"), 0);
  ck_assert_msg(strstr(out, "layers.0.fc1.input") != NULL && strstr(out, "BF16") != NULL, "%s", out);
  free(out);
  ck_assert_int_eq(run_cli(&out, "inspect does-not-exist"), 2);
  ck_assert(strstr(out, "does-not-exist") != NULL);
  free(out);
  ck_assert_int_eq(run_cli(&out, "synth nope st2"), 2);
  free(out);
  /* synth into a folder that holds a trace: refused without --force (the two would mix),
   * with --force its trace files are replaced and nothing else there is touched */
  put_text("st/notes.txt", "keep");
  ck_assert_int_eq(run_cli(&out, "synth llm st --steps 40"), 2);
  ck_assert_str_eq(out, "fp8lab: st: already holds a trace (12 snapshots and amax.csv): a new one "
                        "would mix with it (use --force to replace its files)\n");
  free(out);
  ck_assert_int_eq(run_cli(&out, "synth llm st --steps 40 --force"), 0);
  free(out);
  ck_assert_int_eq(run_cli(&out, "inspect st"), 0);
  ck_assert_msg(strstr(out, "20 snapshot steps (0..38)") != NULL, "%s", out);
  free(out);
  const char *kp = path_in("st/notes.txt");
  char *keep = tu_read_file(kp, NULL);
  ck_assert_str_eq(keep, "keep");
  free(keep);
  ck_assert_int_eq(run_cli(&out, "synth --help"), 0);
  ck_assert(strstr(out, "--force") != NULL);
  free(out);
}
END_TEST

/* The line of out that starts with name and a blank (malloc'ed, without its newline). */
static char *line_of_tensor(const char *out, const char *name) {
  char prefix[128];
  snprintf(prefix, sizeof prefix, "%s ", name);
  char *l = find_row(out, prefix);
  ck_assert_msg(l != NULL, "no line for %s in:\n%s", name, out);
  return l;
}

/* A line of inspect's table ends with the zero note; its first fields are as counted by hand. */
static void expect_inspect_line(const char *out, const char *name, const char *role,
                                const char *dtype, long long snaps, const char *range,
                                const char *note) {
  char *l = line_of_tensor(out, name);
  char nm[64], rl[64], dt[64], shape[64], steps[64];
  long long sn;
  ck_assert_msg(sscanf(l, "%63s %63s %63s %63s %lld %63s", nm, rl, dt, shape, &sn, steps) == 6, "%s", l);
  ck_assert_str_eq(rl, role);
  ck_assert_str_eq(dt, dtype);
  ck_assert_int_eq(sn, snaps);
  char tail[256];
  snprintf(tail, sizeof tail, " %s%s%s", range, *note ? " " : "", note);
  size_t lt = strlen(tail), ll = strlen(l);
  ck_assert_msg(ll >= lt && strcmp(l + ll - lt, tail) == 0, "line '%s' does not end with '%s'", l, tail);
  free(l);
}

/* inspect's columns line up under their headers whatever the names' length (issue 25: a Llama
 * name of 61 characters pushed its row's columns 21 to the right of the header's). */
START_TEST(test_inspect_long_names) {
  const char *longname = "model.layers.0.self_attn.q_proj_with_a_very_long_suffix.input";
  char text[256];
  snprintf(text, sizeof text, "step,tensor,amax\n0,%s,2\n0,l.input,3\n1,l.input,5\n", longname);
  const char *tdir = path_in("ln");
  mkdir(tdir, 0777);
  put_text("ln/amax.csv", text);
  char *out;
  ck_assert_int_eq(run_cli(&out, "inspect ln"), 0);
  const char *head = strstr(out, "\ntensor ");
  ck_assert_msg(head != NULL, "%s", out);
  head++;
  const char *hend = strchr(head, '\n');
  /* every column's header offset, from the header line */
  const char *cols[] = {"role", "dtype", "shape", "steps", "amax range"};
  size_t at[5];
  for (int k = 0; k < 5; k++) {
    const char *p = strstr(head, cols[k]);
    ck_assert_msg(p && p < hend, "no %s header in %s", cols[k], out);
    at[k] = (size_t)(p - head);
  }
  /* the fields of each row (role input, dtype -, shape -, snapshots 0, steps -, the range)
   * start at those offsets */
  const char *names[2] = {"l.input", longname}, *range[2] = {"3 .. 5", "2 .. 2"};
  for (int i = 0; i < 2; i++) {
    char *l = line_of_tensor(out, names[i]);
    ck_assert_msg(strlen(l) > at[4], "short line '%s'", l);
    const char *want[5] = {"input ", "- ", "- ", "- ", range[i]};
    for (int k = 0; k < 5; k++)
      ck_assert_msg(strncmp(l + at[k], want[k], strlen(want[k])) == 0 && l[at[k] - 1] == ' ',
                    "column %s of '%s' is not at offset %zu, under its header:\n%s", cols[k],
                    names[i], at[k], out);
    free(l);
  }
  free(out);
}
END_TEST

/* inspect tells a tensor that never ran (no snapshot, amax 0 on every amax.csv row) from one
 * skipped at some steps, and counts the steps exactly: a snapshot and an amax.csv row of the
 * same step are one step, the snapshot's amax deciding (was: "(some steps 0: skipped)" for
 * both, counting amax.csv's zeros only). */
START_TEST(test_inspect_never_ran) {
  write_never_ran_trace();
  char *out;
  ck_assert_int_eq(run_cli(&out, "inspect lo"), 0);
  const char *head = "trace lo: 2 snapshot steps (0..2), 24 amax.csv rows (steps 0..3), 7 tensors "
                     "(4 never ran)\n";
  ck_assert_msg(strncmp(out, head, strlen(head)) == 0, "%s", out);
  for (const char *t = "abcd"; *t; t++) {
    char name[16];
    snprintf(name, sizeof name, "%c.input", *t);
    expect_inspect_line(out, name, "input", "-", 0, "-", "never ran (amax 0 on all 4 steps)");
  }
  expect_inspect_line(out, "m.input", "input", "F32", 2, "4 .. 100", "(0 on 1 of 4 steps: skipped there)");
  /* step 2's snapshot is all zero: a zero step, once although amax.csv has a row there too */
  expect_inspect_line(out, "m.grad_output", "grad_output", "BF16", 2, "2 .. 2",
                      "(0 on 2 of 3 steps: skipped there)");
  expect_inspect_line(out, "x.input", "input", "-", 0, "8 .. 8", "(0 on 2 of 3 steps: skipped there)");
  ck_assert_msg(!strstr(out, "some steps 0"), "%s", out);
  free(out);
  /* a tensor without any zero: no note, and no "never ran" count in the header */
  put_text("lo/amax.csv", "step,tensor,amax\n1,m.input,8\n");
  ck_assert_int_eq(run_cli(&out, "inspect lo"), 0);
  ck_assert_msg(strstr(out, ", 2 tensors\n") != NULL, "%s", out);
  expect_inspect_line(out, "m.input", "input", "F32", 2, "4 .. 100", "");
  expect_inspect_line(out, "m.grad_output", "grad_output", "BF16", 2, "2 .. 2", "(0 on 1 of 2 steps: skipped there)");
  free(out);
}
END_TEST

/* inspect states the trace's micro-batches (issue 42 point 6): how many per step, which steps,
 * counted by hand from amax.csv's micro column; a trace of one micro-batch per step (also a
 * micro column of zeros) says nothing of them, its output as before. */
START_TEST(test_inspect_micro) {
  const char *tdir = path_in("mb");
  mkdir(tdir, 0777);
  char *out;
  /* steps 0 and 1 hold micro-batches 0 and 1, step 2 one: 5 micro-batches over 3 steps */
  put_text("mb/amax.csv", "step,tensor,amax,micro\n0,l.input,2,0\n0,l.grad_output,1,0\n"
           "0,l.input,3,1\n1,l.input,5,0\n1,l.input,4,1\n2,l.input,1,0\n");
  ck_assert_int_eq(run_cli(&out, "inspect mb"), 0);
  ck_assert_msg(strstr(out, "\nmicro-batches (amax.csv's micro): 2 of its 3 steps hold more than "
                            "one (steps 0..1), 1 to 2 per step, 5 micro-batches in all; the "
                            "delayed history advances per micro-batch\n") != NULL, "%s", out);
  free(out);
  /* every step two: 2 steps, 4 micro-batches */
  put_text("mb/amax.csv", "step,tensor,amax,micro\n3,l.input,2,0\n3,l.input,3,1\n"
           "4,l.input,5,0\n4,l.input,4,1\n");
  ck_assert_int_eq(run_cli(&out, "inspect mb"), 0);
  ck_assert_msg(strstr(out, "\nmicro-batches (amax.csv's micro): 2 per step at each of its 2 "
                            "steps, 4 micro-batches in all; the delayed history advances per "
                            "micro-batch\n") != NULL, "%s", out);
  free(out);
  /* one micro-batch per step: no line */
  put_text("mb/amax.csv", "step,tensor,amax,micro\n3,l.input,2,0\n4,l.input,5,0\n");
  ck_assert_int_eq(run_cli(&out, "inspect mb"), 0);
  ck_assert_msg(strstr(out, "micro-batch") == NULL, "%s", out);
  free(out);
}
END_TEST

TU_MAIN("commands", "cli", setup, teardown, 120, test_help_version_synth_inspect,
        test_inspect_never_ran, test_inspect_long_names, test_inspect_micro)
