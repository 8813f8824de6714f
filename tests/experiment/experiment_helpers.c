/* experiment_helpers.c: the definitions of experiment_helpers.h (see there). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "experiment_helpers.h"

char *tmpdir;

void setup(void) {
  tmpdir = tu_mkdtemp();
  ck_assert_ptr_nonnull(tmpdir);
}

void teardown(void) {
  tu_rmtree(tmpdir);
  free(tmpdir);
  tmpdir = NULL;
}

/* Writes text to <tmpdir>/<rel> (rel may contain one existing subdir); returns a static path. */
const char *write_ini(const char *rel, const char *text) {
  static char path[4096];
  snprintf(path, sizeof path, "%s/%s", tmpdir, rel);
  ck_assert_int_eq(tu_write_file(path, text, strlen(text)), 0);
  return path;
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
