/* tu_dir.c: the definitions of tu_dir.h (see there). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tu_dir.h"

char *g_dir;

void setup(void) { g_dir = tu_mkdtemp(); }

void teardown(void) {
  tu_rmtree(g_dir);
  free(g_dir);
}

char *path_in(const char *rel) {
  char *p = malloc(strlen(g_dir) + strlen(rel) + 2);
  sprintf(p, "%s/%s", g_dir, rel);
  return p;
}

void write_text(const char *rel, const char *text) {
  char *p = path_in(rel);
  ck_assert_int_eq(tu_write_file(p, text, strlen(text)), 0);
  free(p);
}

/* Returns the line of steps.csv whose first fields match prefix (malloc'ed), or NULL. */
char *find_row(const char *csv, const char *prefix) {
  const char *p = csv;
  while (p && *p) {
    const char *nl = strchr(p, '\n');
    size_t len = nl ? (size_t)(nl - p) : strlen(p);
    if (strncmp(p, prefix, strlen(prefix)) == 0) {
      char *r = malloc(len + 1);
      memcpy(r, p, len);
      r[len] = 0;
      return r;
    }
    p = nl ? nl + 1 : NULL;
  }
  return NULL;
}

int count_lines(const char *s) {
  int n = 0;
  for (; *s; s++) n += *s == '\n';
  return n;
}

/* g_dir/rel (static buffer, one at a time). */
const char *in_dir(const char *rel) {
  static char p[4096];
  snprintf(p, sizeof p, "%s/%s", g_dir, rel);
  return p;
}

void put_file(const char *rel, const void *data, size_t n) {
  ck_assert_int_eq(tu_write_file(in_dir(rel), data, n), 0);
}

void put_text(const char *rel, const char *text) { put_file(rel, text, strlen(text)); }

/* An error message is one line: no newline, CR, ESC or other control byte in it. */
void assert_one_line(const char *err) {
  for (const unsigned char *p = (const unsigned char *)err; *p; p++)
    ck_assert_msg(*p >= 0x20 && *p != 0x7f, "control byte 0x%02x at %td in '%s'", *p,
                  (const char *)p - err, err);
}

/* fp8lab report out (in g_dir): exit 2 with exactly "fp8lab: report: <want>\n". */
void expect_report(const char *want) {
  char *out = NULL, full[8192];
  int rc = run_cli(&out, "report out --quiet");
  snprintf(full, sizeof full, "fp8lab: report: %s\n", want);
  ck_assert_msg(rc == 2, "exit %d: %s", rc, out);
  ck_assert_str_eq(out, full);
  free(out);
}
