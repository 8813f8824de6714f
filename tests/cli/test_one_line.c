/* test_one_line.c: every message that quotes input bytes stays one line, those bytes escaped
 * (issue 16): the libraries' messages on crafted inputs (safetensors, npy, experiment files,
 * steps.csv, plot file names) and the command line's. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tables.h"
#include "testutil.h"
#include "trace.h"
#include "util.h"
#include "tu_dir.h"
#include "tu_traces.h"
#include "tu_ini.h"

/* One case: a message of the library on crafted input, the escaped text it must hold. */
START_TEST(one_line_library) {
  char err[FP8_ERRLEN] = "";
  fp8_step s;
  /* safetensors: jansson's error quotes the input near the error */
  put_st("x.safetensors", "{\"a\":1}\n\x1b" "x", -1, 0);
  ck_assert_int_eq(open_st(&s, err, sizeof err), FP8_EFORMAT);
  assert_one_line(err);
  ck_assert_msg(strstr(err, "end of file expected near '\\x1b'"), "%s", err);
  /* a __metadata__ key and a dtype */
  put_st("x.safetensors", "{\"__metadata__\":{\"k\\u001b[2J\":1}}", -1, 0);
  ck_assert_int_eq(open_st(&s, err, sizeof err), FP8_EFORMAT);
  assert_one_line(err);
  ck_assert_msg(strstr(err, "__metadata__ value of k\\x1b[2J is an integer"), "%s", err);
  put_st("x.safetensors", "{\"t\":{\"dtype\":\"F\\n32\",\"shape\":[1],\"data_offsets\":[0,4]}}", -1, 4);
  ck_assert_int_eq(open_st(&s, err, sizeof err), FP8_EFORMAT);
  assert_one_line(err);
  ck_assert_msg(strstr(err, "tensor t: dtype F\\n32 not supported"), "%s", err);
  /* npy: a key and a descr of the header */
  mkdir(path_in("step_0"), 0777);
  static const char hk[] = "\x93NUMPY\x01\x00\x20\x00{'de\x1b[Ar': '<f4', }            \n";
  put_file("step_0/t.npy", hk, sizeof hk - 1);
  ck_assert_int_eq(fp8_npy_open_step(path_in("step_0"), &s, err, sizeof err), FP8_EFORMAT);
  assert_one_line(err);
  ck_assert_msg(strstr(err, "unexpected or repeated key 'de\\x1b[Ar' at byte 11"), "%s", err);
  static const char hd[] = "\x93NUMPY\x01\x00\x3b\x00{'descr': '<f\r\n', 'fortran_order': False, "
                           "'shape': (), }  \n";
  put_file("step_0/t.npy", hd, sizeof hd - 1);
  ck_assert_int_eq(fp8_npy_open_step(path_in("step_0"), &s, err, sizeof err), FP8_EFORMAT);
  assert_one_line(err);
  ck_assert_msg(strstr(err, "dtype '<f\\r\\n' not supported"), "%s", err);
  /* experiment files: an unknown key or section is quoted escaped (its bytes passed the line
   * check, so only a backslash is left to escape) */
  static const char k[] = INI_HEAD "mar\\gin = 1\n";
  ck_assert_int_eq(load_ini(k, sizeof k - 1, err, sizeof err), FP8_EINVAL);
  ck_assert_msg(strstr(err, ":5: unknown key mar\\\\gin in [recipe.d]"), "%s", err);
  static const char sec[] = "[tr\\ace]\n";
  ck_assert_int_eq(load_ini(sec, sizeof sec - 1, err, sizeof err), FP8_EINVAL);
  ck_assert_msg(strstr(err, ":1: unknown section [tr\\\\ace]"), "%s", err);
  /* a tab passes the line check, but not into a message (fuzz_experiment found these raw:
   * tests/fuzz/corpus/experiment/regress-tab-in-key) */
  static const char tab[] = "1e-5[\tr::l\n";
  ck_assert_int_eq(load_ini(tab, sizeof tab - 1, err, sizeof err), FP8_EINVAL);
  assert_one_line(err);
  ck_assert_msg(strstr(err, ":1: key 1e-5[\\tr outside any section"), "%s", err);
  static const char dup[] = INI_HEAD "m\targin = 1\nm\targin = 2\n";
  ck_assert_int_eq(load_ini(dup, sizeof dup - 1, err, sizeof err), FP8_EINVAL);
  assert_one_line(err);
  ck_assert_msg(strstr(err, ":5: unknown key m\\targin in [recipe.d]"), "%s", err);
  static const char val[] = "[trace]\npath = tr\n[recipe.x]\nkind = cur\trent\n";
  ck_assert_int_eq(load_ini(val, sizeof val - 1, err, sizeof err), FP8_EINVAL);
  assert_one_line(err);
  ck_assert_msg(strstr(err, ":4: bad kind \"cur\\trent\""), "%s", err);
  static const char lab[] = "[recipe.a\tb]\n";
  ck_assert_int_eq(load_ini(lab, sizeof lab - 1, err, sizeof err), FP8_EINVAL);
  assert_one_line(err);
  ck_assert_msg(strstr(err, ":1: bad character '\\t' in recipe label a\\tb"), "%s", err);
  /* steps.csv: a field quoted in a message, a name with a CR */
  fp8_steps_table t;
  char csv[2048];
  snprintf(csv, sizeof csv, "%s\n%s\n", "tensor,role,step,recipe,kind,format,history_len,margin,"
           "amax_compute,amax,scale,n,nonfinite,zeros,overflow,underflow,subnormal,mse,snr_db",
           "a.input,in\x1b[1Aput,0,d,current,e4m3,,,,1,1,1,0,0,0,0,0,0,1");
  ck_assert_int_eq(fp8_steps_csv_parse("s.csv", csv, strlen(csv), &t, err, sizeof err), FP8_EFORMAT);
  assert_one_line(err);
  ck_assert_msg(strstr(err, "found 'in\\x1b[1Aput'"), "%s", err);
  snprintf(csv, sizeof csv, "%s\n%s\n", "tensor,role,step,recipe,kind,format,history_len,margin,"
           "amax_compute,amax,scale,n,nonfinite,zeros,overflow,underflow,subnormal,mse,snr_db",
           "a\rb.input,input,0,d,current,e4m3,,,,1,1,1,0,0,0,0,0,0,1");
  ck_assert_int_eq(fp8_steps_csv_parse("s.csv", csv, strlen(csv), &t, err, sizeof err), FP8_EFORMAT);
  ck_assert_str_eq(err, "s.csv:2: column tensor: a\\rb.input: name holds the control character "
                        "\\r at byte 1");
  /* two names for one plot file, one with a backslash */
  const char *names[] = {"a\\b.input", "a_b.input"};
  ck_assert_int_eq(fp8_tensor_files_distinct(names, 2, "tr", err, sizeof err), FP8_EFORMAT);
  ck_assert_str_eq(err, "tr: tensors a\\\\b.input and a_b.input would both be drawn as "
                        "plots/amax_a_b.input.png; rename one");
}
END_TEST

/* The CLI: arguments it quotes, and paths in the messages it prints. */
START_TEST(one_line_cli) {
  static const struct {
    const char *args, *want;
  } C[] = {
      {"run --threads \"$(printf '\\033[2J')\" e.ini",
       "fp8lab run: --threads wants an integer from 1 to 64, got '\\x1b[2J'\n"},
      {"report \"$(printf 'no\\nwhere')\"",
       "fp8lab: report: no\\nwhere/run.json: cannot open: No such file or directory (fp8lab "
       "report reads a folder that fp8lab run wrote)\n"},
      {"run \"$(printf 'a\\rb.ini')\"", "fp8lab: a\\rb.ini: cannot open: No such file or directory\n"},
      {"\"$(printf 'x\\033]0;t\\007')\"",
       "fp8lab: unknown command 'x\\x1b]0;t\\x07' (run, synth, inspect, report, timeline, import-te, closedloop; see "
       "fp8lab --help)\n"},
  };
  for (size_t i = 0; i < sizeof C / sizeof *C; i++) {
    char *out = NULL;
    ck_assert_int_eq(run_cli(&out, "%s", C[i].args), 2);
    ck_assert_str_eq(out, C[i].want);
    free(out);
  }
}
END_TEST

TU_MAIN("one_line", "strict", setup, teardown, 0, one_line_library, one_line_cli)
