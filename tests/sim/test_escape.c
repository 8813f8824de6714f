/* test_escape.c: fp8_escape's rules (src/sim/util.h, docs/semantics.md), case by case: control
 * bytes, backslashes, bytes that are not UTF-8, and where a message too long is cut. */
#include <check.h>

#include "testutil.h"
#include "util.h"
#include "tu_dir.h"

/* ------------------------------------------------------------------ one-line messages */

/* fp8_escape's rules, case by case (docs/semantics.md). */
START_TEST(escape_rules) {
  static const struct {
    const char *in;
    size_t len;
    const char *out;
  } C[] = {
      {"plain.name-0", 12, "plain.name-0"},
      {"a\nb\rc\td", 7, "a\\nb\\rc\\td"},
      {"back\\slash", 10, "back\\\\slash"},
      {"\x1b[31mred\x1b[0m", 12, "\\x1b[31mred\\x1b[0m"},
      {"nul\0x", 5, "nul\\x00x"},
      {"del\x7f", 4, "del\\x7f"},
      {"caf\xc3\xa9 \xce\xb1 \xf0\x9f\x98\x80", 13, "caf\xc3\xa9 \xce\xb1 \xf0\x9f\x98\x80"},
      {"c1\xc2\x9b", 4, "c1\\xc2\\x9b"},              /* U+009B, CSI */
      {"bad\xff\xfe", 5, "bad\\xff\\xfe"},             /* not UTF-8 */
      {"over\xc0\xaf", 6, "over\\xc0\\xaf"},           /* overlong '/' */
      {"sur\xed\xa0\x80", 6, "sur\\xed\\xa0\\x80"},    /* a surrogate */
      {"cut\xe2\x82", 5, "cut\\xe2\\x82"},             /* a sequence cut short */
      {"big\xf4\x90\x80\x80", 7, "big\\xf4\\x90\\x80\\x80"}, /* above U+10FFFF */
  };
  char out[FP8_ESC_LEN];
  for (size_t i = 0; i < sizeof C / sizeof *C; i++)
    ck_assert_str_eq(fp8_escape(C[i].in, C[i].len, out, sizeof out), C[i].out);
  /* too long: cut between escapes, "..." after at most outlen - 4 bytes */
  ck_assert_str_eq(fp8_escape("abcdefgh", 8, out, 9), "abcdefgh");
  ck_assert_str_eq(fp8_escape("abcdefghi", 9, out, 9), "abcde...");
  ck_assert_str_eq(fp8_escape("ab\ncdefgh", 9, out, 9), "ab\\nc...");
  ck_assert_str_eq(fp8_escape("abcd\ncdefgh", 11, out, 9), "abcd...");
  ck_assert_str_eq(fp8_escape("\x1b\x1b\x1b", 3, out, 9), "\\x1b...");
  /* the printing net keeps backslashes (the escapes a message already holds) */
  ck_assert_str_eq(fp8_escape_line("a\\nb\nc\x1b", out, sizeof out), "a\\nb\\nc\\x1b");
}
END_TEST

TU_MAIN("escape", "strict", setup, teardown, 0, escape_rules)
