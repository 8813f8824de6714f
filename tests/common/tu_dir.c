/* tu_dir.c: the definitions of tu_dir.h (see there). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tu_dir.h"

char *g_dir;

/* The paths path_in handed out: the fixture owns them, teardown frees them. */
static char **g_paths;
static size_t g_npaths;

void setup(void) {
  g_dir = tu_mkdtemp();
  ck_assert_ptr_nonnull(g_dir);
}

void teardown(void) {
  tu_rmtree(g_dir);
  free(g_dir);
  g_dir = NULL;
  for (size_t i = 0; i < g_npaths; i++) free(g_paths[i]);
  free(g_paths);
  g_paths = NULL;
  g_npaths = 0;
}

/* g_dir/rel. It stays valid until teardown, so a test holds as many at once as it needs and
 * frees none of them. */
const char *path_in(const char *rel) {
  char **grown = realloc(g_paths, (g_npaths + 1) * sizeof *g_paths);
  ck_assert_ptr_nonnull(grown);
  g_paths = grown;
  return g_paths[g_npaths++] = tu_path(g_dir, rel);
}

/* Writes g_dir/rel (its folder must exist). */
void put_file(const char *rel, const void *data, size_t n) {
  ck_assert_int_eq(tu_write_file(path_in(rel), data, n), 0);
}

void put_text(const char *rel, const char *text) { put_file(rel, text, strlen(text)); }

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
