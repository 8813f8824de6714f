/* experiment_helpers.c: the definitions of experiment_helpers.h (see there). */
#include <check.h>

#include "experiment_helpers.h"
#include "testutil.h"
#include "tu_dir.h"

/* Writes text to g_dir/rel (its folder must exist); returns the path (path_in's). */
const char *write_ini(const char *rel, const char *text) {
  put_text(rel, text);
  return path_in(rel);
}

void check_delayed(const fp8_config *c, const char *label, fp8_format_sel f, int32_t hl,
                          int32_t m, fp8_amax_compute ac) {
  ck_assert_str_eq(c->label, label);
  ck_assert_int_eq(c->kind, FP8_KIND_DELAYED);
  ck_assert_int_eq(c->format, f);
  ck_assert_int_eq(c->history_len, hl);
  ck_assert_int_eq(c->margin, m);
  ck_assert_int_eq(c->amax_compute, ac);
}
