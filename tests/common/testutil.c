/* testutil.c: see testutil.h. */
#include "testutil.h"

#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

double ref_fp8_value(uint8_t code, fp8_format f) {
  int mbits = f == FP8_E4M3 ? 3 : 2, ebits = f == FP8_E4M3 ? 4 : 5;
  int bias = (1 << (ebits - 1)) - 1;
  int e = (code >> mbits) & ((1 << ebits) - 1), m = code & ((1 << mbits) - 1);
  double sign = (code & 0x80) ? -1.0 : 1.0;
  if (f == FP8_E4M3 && e == 15 && m == 7) return NAN;
  if (f == FP8_E5M2 && e == 31) return m ? NAN : sign * INFINITY;
  double mag = e == 0 ? ldexp(m, 1 - bias - mbits) : ldexp((1 << mbits) + m, e - bias - mbits);
  return sign * mag;
}

uint8_t ref_fp8_encode(float y, fp8_format f) {
  if (isnan(y)) return 0x7F;
  double v = y, best_d = INFINITY;
  uint8_t max_code = f == FP8_E4M3 ? 0x7E : 0x7B;
  if (fabs(v) >= ref_fp8_value(max_code, f)) return (uint8_t)(max_code | (signbit(y) ? 0x80 : 0));
  int best = -1;
  for (int c = 0; c < 256; c++) {
    double r = ref_fp8_value((uint8_t)c, f);
    if (!isfinite(r)) continue;
    if ((c & 0x7F) == 0 && (c & 0x80) != (signbit(y) ? 0x80 : 0)) continue; /* sign of zero */
    double d = fabs(r - v);
    if (d < best_d || (d == best_d && best >= 0 && (c & 1) == 0 && (best & 1) == 1)) {
      best_d = d;
      best = c;
    }
  }
  return (uint8_t)best;
}

char *tu_mkdtemp(void) {
  char tmpl[] = "/tmp/fp8lab-test-XXXXXX";
  char *d = mkdtemp(tmpl);
  return d ? strdup(d) : NULL;
}

void tu_rmtree(const char *path) {
  if (!path || !*path || strcmp(path, "/") == 0) return;
  char *cmd = malloc(strlen(path) + 16);
  sprintf(cmd, "rm -rf '%s'", path);
  if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", path);
  free(cmd);
}

char *tu_path(const char *dir, const char *rel) {
  size_t n = strlen(dir) + strlen(rel) + 2;
  char *p = malloc(n);
  ck_assert_ptr_nonnull(p);
  snprintf(p, n, "%s/%s", dir, rel);
  return p;
}

int tu_count_entries(const char *dir) {
  DIR *d = opendir(dir);
  ck_assert_msg(d != NULL, "cannot open %s", dir);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
  closedir(d);
  return n;
}

int tu_write_file(const char *path, const void *data, size_t len) {
  FILE *fp = fopen(path, "wb");
  if (!fp) return -1;
  size_t w = fwrite(data, 1, len, fp);
  return (fclose(fp) == 0 && w == len) ? 0 : -1;
}

char *tu_read_file(const char *path, size_t *len) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return NULL;
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap + 1);
  size_t r;
  while ((r = fread(buf + n, 1, cap - n, fp)) > 0) {
    n += r;
    if (n == cap) buf = realloc(buf, (cap *= 2) + 1);
  }
  fclose(fp);
  buf[n] = 0;
  if (len) *len = n;
  return buf;
}

int tu_run(const char *cmd, char **output) {
  char *full = malloc(strlen(cmd) + 16);
  sprintf(full, "%s 2>&1", cmd);
  FILE *p = popen(full, "r");
  free(full);
  if (!p) return -1;
  size_t cap = 4096, n = 0, r;
  char *buf = malloc(cap + 1);
  while ((r = fread(buf + n, 1, cap - n, p)) > 0) {
    n += r;
    if (n == cap) buf = realloc(buf, (cap *= 2) + 1);
  }
  buf[n] = 0;
  int st = pclose(p);
  if (output) *output = buf;
  else free(buf);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

const char *tu_bin(void) {
  const char *b = getenv("FP8LAB_BIN");
  return b ? b : "./fp8lab";
}

const char *tu_source_dir(void) {
  const char *s = getenv("FP8LAB_SOURCE_DIR");
  return s ? s : "..";
}

int tu_run_suite(Suite *s) {
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}

int tu_run_tcase(const char *suite, const char *tcase, void (*setup)(void),
                 void (*teardown)(void), int timeout, const TTest *const *tests, size_t n) {
  Suite *s = suite_create(suite);
  TCase *tc = tcase_create(tcase);
  if (setup || teardown) tcase_add_checked_fixture(tc, setup, teardown);
  if (timeout > 0) tcase_set_timeout(tc, timeout);
  for (size_t i = 0; i < n; i++) tcase_add_test(tc, tests[i]);
  suite_add_tcase(s, tc);
  return tu_run_suite(s);
}

int tu_cli(const char *dir, char **output, const char *fmt, ...) {
  char args[2048], cmd[4608];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(args, sizeof args, fmt, ap);
  va_end(ap);
  snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s", dir, tu_bin(), args);
  return tu_run(cmd, output);
}
