/* test_ini_bytes.c: control bytes and bytes that are not UTF-8 in experiment files (issue 16):
 * refused at their line and column; tabs and UTF-8 text pass. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "experiment.h"
#include "testutil.h"
#include "util.h"
#include "tu_dir.h"
#include "tu_ini.h"

typedef struct {
  const char *text;
  size_t len; /* bytes of text (NUL bytes inside) */
  const char *want; /* after "<path>:" */
} ini_case;

#define INI(s, want) {s, sizeof s - 1, want}

static const ini_case INI_BAD[] = {
    /* the case: the NUL made history 1 the only value */
    INI(INI_HEAD "history_len = 1\0, 4\n", "5: NUL byte at column 16 (a text file has none)"),
    INI(INI_HEAD "margin = 0\x1b[2J\n", "5: control character \\x1b at column 11 (only tab is "
                                        "allowed)"),
    INI(INI_HEAD "margin = 0\r1\n", "5: control character \\r at column 11 (only tab is allowed)"),
    INI(INI_HEAD "margin = 0\v\n", "5: control character \\x0b at column 11 (only tab is "
                                   "allowed)"),
    INI(INI_HEAD "ma\x7frgin = 0\n", "5: control character \\x7f at column 3 (only tab is "
                                     "allowed)"),
    INI("[trace]\npath = synth:llm\n[recipe.\x1b[31md]\n", "3: control character \\x1b at "
                                                          "column 9 (only tab is allowed)"),
    INI(INI_HEAD "margin = 0 ; \x01 in a comment\n", "5: control character \\x01 at column 14 "
                                                     "(only tab is allowed)"),
    INI(INI_HEAD "margin = \xff\n", "5: byte \\xff at column 10 is not UTF-8"),
    INI(INI_HEAD "margin = \xc3\n", "5: byte \\xc3 at column 10 is not UTF-8"),
};

START_TEST(ini_control_bytes) {
  const ini_case *c = &INI_BAD[_i];
  char err[FP8_ERRLEN] = "", want[8192];
  int rc = load_ini(c->text, c->len, err, sizeof err);
  ck_assert_msg(rc == FP8_EINVAL, "case %d: rc %d (%s)", _i, rc, err);
  snprintf(want, sizeof want, "%s:%s", path_in("e.ini"), c->want);
  ck_assert_str_eq(err, want);
  assert_one_line(err);
}
END_TEST

/* What stays legal: tabs, CRLF line ends, a last line without newline, UTF-8 in comments and
 * values, a BOM. */
START_TEST(ini_text_ok) {
  static const char ok[] = "\xef\xbb\xbf[trace]\r\npath\t=\tsynth:llm ; caf\xc3\xa9\r\n"
                           "[recipe.d]\nkind = delayed\nhistory_len = 1, 4\r\n"
                           "[output]\ndir = out/\xce\xb1";
  char err[FP8_ERRLEN] = "";
  put_file("e.ini", ok, sizeof ok - 1);
  fp8_experiment ex;
  ck_assert_msg(fp8_experiment_load(path_in("e.ini"), &ex, err, sizeof err) == FP8_OK, "%s", err);
  ck_assert_uint_eq(ex.nconfigs, 2);
  ck_assert_int_eq(ex.configs[1].history_len, 4);
  ck_assert_ptr_nonnull(strstr(ex.out_dir, "out/\xce\xb1"));
  fp8_experiment_free(&ex);
}
END_TEST

int main(void) {
  Suite *s = suite_create("ini_bytes");
  TCase *tc = tcase_create("strict");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_loop_test(tc, ini_control_bytes, 0, sizeof INI_BAD / sizeof *INI_BAD);
  tcase_add_test(tc, ini_text_ok);
  suite_add_tcase(s, tc);
  return tu_run_suite(s);
}
