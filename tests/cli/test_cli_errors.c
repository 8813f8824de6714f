/* test_cli_errors.c: `fp8lab run`'s bad inputs through the real binary: exit 2, one line naming
 * the file (and line), nothing written; a [trace] steps selection that holds no snapshot step is
 * refused up front at the key's line. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testutil.h"
#include "tu_dir.h"
#include "tu_traces.h"

START_TEST(test_bad_inputs) {
  write_tiny_trace();
  char *out;
  /* missing experiment file */
  ck_assert_int_eq(run_cli(&out, "run nope.ini"), 2);
  ck_assert_msg(strstr(out, "nope.ini") != NULL, "%s", out);
  free(out);
  /* bad INI line: file:line */
  put_text("bad.ini", "[trace]\npath = trace\n[recipe.x]\nkind = delayed\nhistory_len = 0\n");
  ck_assert_int_eq(run_cli(&out, "run bad.ini --out o"), 2);
  ck_assert_msg(strstr(out, "bad.ini:5:") != NULL && count_lines(out) == 1, "%s", out);
  free(out);
  /* unknown role with hybrid: names the tensor */
  put_text("trace/amax.csv", "step,tensor,amax\n1,m.input,8\n1,m.bias,3\n");
  put_text("exp.ini", TINY_INI);
  ck_assert_int_eq(run_cli(&out, "run exp.ini --out o2"), 2);
  /* at the line of the section whose hybrid (here its default) needs the role */
  ck_assert_str_eq(out, "fp8lab: exp.ini:3: tensor m.bias: role 'bias' is not one of input, weight, "
                        "output, grad_output, grad_input; [recipe.d] uses format = hybrid, which needs "
                        "a role (set format = e4m3 or e5m2, or leave the tensor out with [trace] "
                        "tensors)\n");
  free(out);
  /* ... or of its format key */
  put_text("h.ini", "[trace]\npath = trace\n[recipe.x]\nkind = delayed\nformat = e4m3\n"
                    "[recipe.y]\nkind = current\n\nformat = hybrid\n");
  ck_assert_int_eq(run_cli(&out, "run h.ini --out o2"), 2);
  ck_assert_msg(strncmp(out, "fp8lab: h.ini:9: tensor m.bias: role 'bias' ", 44) == 0 &&
                strstr(out, "[recipe.y] uses format = hybrid") && count_lines(out) == 1, "%s", out);
  free(out);
  /* a tensors selection that matches nothing: at its line */
  put_text("t.ini", "[trace]\npath = trace\ntensors = zzz*, *.weight\n[recipe.x]\nkind = delayed\n");
  ck_assert_int_eq(run_cli(&out, "run t.ini --out o2"), 2);
  ck_assert_str_eq(out, "fp8lab: t.ini:3: tensors = zzz*, *.weight selects none of the tensors of "
                        "the trace trace\n");
  free(out);
  const char *p = path_in("o2");
  struct stat sb;
  ck_assert_int_ne(stat(p, &sb), 0); /* no output folder */
  /* ... fine with an explicit format */
  put_text("e4.ini", "[trace]\npath = trace\n[recipe.x]\nkind = delayed\nformat = e4m3\n");
  ck_assert_int_eq(run_cli(&out, "run e4.ini --quiet --out o3"), 0);
  free(out);
  /* a truncated snapshot: names the file */
  put_text("trace/amax.csv", "step,tensor,amax\n");
  put_text("trace/step_7.safetensors", "\x40\x00\x00\x00\x00\x00\x00\x00{\"a.input\":");
  ck_assert_int_eq(run_cli(&out, "run exp.ini --out o4"), 2);
  ck_assert_msg(strstr(out, "step_7.safetensors") != NULL && count_lines(out) == 1, "%s", out);
  free(out);
  p = path_in("o4");
  ck_assert_int_ne(stat(p, &sb), 0);
  /* unknown synth preset */
  put_text("s.ini", "[trace]\npath = synth:gpt9\n[recipe.x]\nkind = current\n");
  ck_assert_int_eq(run_cli(&out, "run s.ini --out o5"), 2);
  ck_assert_msg(strstr(out, "gpt9") != NULL, "%s", out);
  free(out);
  /* usage errors */
  ck_assert_int_eq(run_cli(&out, "frobnicate"), 2);
  free(out);
  ck_assert_int_eq(run_cli(&out, "run exp.ini --threads zero"), 2);
  free(out);
  ck_assert_int_eq(run_cli(&out, "run"), 2);
  free(out);
}
END_TEST

/* A [trace] steps selection that holds no snapshot step would give CSVs without a row (and a
 * report that fails on them only after they were written): refused up front at the key's line,
 * like a tensors selection that matches nothing, with and without the report. A selection of
 * amax.csv steps only (step 1) has no row either. */
START_TEST(test_steps_selecting_nothing) {
  write_tiny_trace();
  char *out;
  put_text("s1.ini", "[trace]\npath = trace\nsteps = 5-9\n[recipe.d]\nkind = delayed\n");
  ck_assert_int_eq(run_cli(&out, "run s1.ini --no-report --out o1"), 2);
  ck_assert_str_eq(out, "fp8lab: s1.ini:3: steps = 5-9 selects none of the 2 snapshot steps of "
                        "the trace trace (0..2)\n");
  free(out);
  ck_assert_int_eq(run_cli(&out, "run s1.ini --out o1"), 2);
  ck_assert_str_eq(out, "fp8lab: s1.ini:3: steps = 5-9 selects none of the 2 snapshot steps of "
                        "the trace trace (0..2)\n");
  free(out);
  const char *p = path_in("o1");
  struct stat sb;
  ck_assert_int_ne(stat(p, &sb), 0); /* no output folder */
  put_text("s2.ini", "[trace]\npath = trace\n\nsteps = 1-1:4\n[recipe.d]\nkind = delayed\n");
  ck_assert_int_eq(run_cli(&out, "run s2.ini --no-report --out o2"), 2);
  ck_assert_str_eq(out, "fp8lab: s2.ini:4: steps = 1 selects none of the 2 snapshot steps of "
                        "the trace trace (0..2)\n");
  free(out);
  put_text("s3.ini", "[trace]\npath = trace\nsteps = 1-9:2\n[recipe.d]\nkind = delayed\n");
  ck_assert_int_eq(run_cli(&out, "run s3.ini --no-report --out o3"), 2);
  ck_assert_str_eq(out, "fp8lab: s3.ini:3: steps = 1-9:2 selects none of the 2 snapshot steps of "
                        "the trace trace (0..2)\n");
  free(out);
  /* one snapshot step selected is enough */
  put_text("s4.ini", "[trace]\npath = trace\nsteps = 1-2\n[recipe.d]\nkind = delayed\n");
  ck_assert_int_eq(run_cli(&out, "run s4.ini --quiet --no-report --out o4"), 0);
  free(out);
}
END_TEST

TU_MAIN("cli_errors", "cli", setup, teardown, 120, test_bad_inputs, test_steps_selecting_nothing)
