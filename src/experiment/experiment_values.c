/* experiment_values.c: the experiment loader's leaf (experiment_internal.h): recording the
 * first error of a file, and parsing the values of its keys (comma lists, integers, booleans,
 * step ranges, paths relative to the file). It calls nothing in the other experiment*.c files.
 */
#include "experiment_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---------------------------------------------------------------- errors */

/* Keeps its own vsnprintf into c->err_msg (rather than fp8_errorf into an err buffer): the
 * message is only formatted when it is the first failure of the file so far, and the line is
 * kept beside it; fp8_experiment_load prefixes "file:line: " once at the end. */
void fp8_exp_fail(exp_ctx *c, int line, const char *fmt, ...) {
  c->nfail++;
  if (c->has_err && c->err_line <= line) return;
  c->has_err = 1;
  c->err_line = line;
  va_list ap;
  va_start(ap, fmt);
  char raw[sizeof c->err_msg];
  vsnprintf(raw, sizeof raw, fmt, ap);
  va_end(ap);
  /* The safety net for the values a message quotes: a tab (which the line check lets through)
   * or any other control byte cannot reach the terminal raw (fuzz_experiment's one-line
   * check); the keys and labels quoted with fp8_esc pass unchanged. */
  fp8_escape_line(raw, c->err_msg, sizeof c->err_msg);
}

char *fp8_exp_strdup(exp_ctx *c, const char *s) {
  char *d = strdup(s);
  if (!d) c->nomem = 1;
  return d;
}

char *fp8_exp_trim(char *s) {
  while (isspace((unsigned char)*s)) s++;
  size_t n = strlen(s);
  while (n > 0 && isspace((unsigned char)s[n - 1])) s[--n] = '\0';
  return s;
}

/* ---------------------------------------------------------------- value parsing */

void fp8_exp_list_free(exp_list *l) {
  free(l->buf);
  free(l->items);
  memset(l, 0, sizeof *l);
}

/* 0 on success, 1 when an item is empty, -1 when out of memory. */
int fp8_exp_list_split(const char *value, exp_list *l) {
  memset(l, 0, sizeof *l);
  size_t n = 1;
  for (const char *p = value; *p; p++)
    if (*p == ',') n++;
  l->buf = strdup(value);
  l->items = malloc(n * sizeof *l->items);
  if (!l->buf || !l->items) {
    fp8_exp_list_free(l);
    return -1;
  }
  char *p = l->buf;
  for (;;) {
    char *comma = strchr(p, ',');
    if (comma) *comma = '\0';
    char *item = fp8_exp_trim(p);
    if (!*item) {
      fp8_exp_list_free(l);
      return 1;
    }
    l->items[l->n++] = item;
    if (!comma) break;
    p = comma + 1;
  }
  return 0;
}

/* Whole-item base-10 integer. */
int fp8_exp_parse_i64(const char *s, int64_t *out) {
  if (!*s || isspace((unsigned char)*s)) return -1;
  errno = 0;
  char *end;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end) return -1;
  *out = (int64_t)v;
  return 0;
}

int fp8_exp_parse_u64(const char *s, uint64_t *out) {
  if (!*s || isspace((unsigned char)*s) || *s == '-') return -1;
  errno = 0;
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || *end) return -1;
  *out = (uint64_t)v;
  return 0;
}

int fp8_exp_parse_bool(const char *s, int *out) {
  static const char *const yes[] = {"true", "1", "yes", "on"};
  static const char *const no[] = {"false", "0", "no", "off"};
  for (size_t i = 0; i < 4; i++) {
    if (strcasecmp(s, yes[i]) == 0) return *out = 1, 0;
    if (strcasecmp(s, no[i]) == 0) return *out = 0, 0;
  }
  return -1;
}

/* "a", "a-b" or "a-b:stride". Returns NULL or what is wrong. */
const char *fp8_exp_parse_steps(const char *spec, int64_t *a, int64_t *b, int64_t *stride,
                                int *nomem) {
  const char *why = NULL;
  char *buf = strdup(spec);
  if (!buf) {
    *nomem = 1;
    return "out of memory";
  }
  char *range = buf, *st = NULL;
  char *colon = strchr(buf, ':');
  if (colon) {
    *colon = '\0';
    st = fp8_exp_trim(colon + 1);
  }
  range = fp8_exp_trim(range);
  if (*range == '-') {
    why = "steps must be >= 0";
    goto done;
  }
  char *dash = strchr(range, '-');
  char *first = range, *last = NULL;
  if (dash) {
    *dash = '\0';
    last = fp8_exp_trim(dash + 1);
    first = fp8_exp_trim(first);
  } else if (st) {
    why = "a stride needs a range a-b";
    goto done;
  }
  if (fp8_exp_parse_i64(first, a) || (last && fp8_exp_parse_i64(last, b)) ||
      (st && fp8_exp_parse_i64(st, stride))) {
    why = "expected a, a-b or a-b:stride with integers";
    goto done;
  }
  if (!last) *b = *a;
  if (!st) *stride = 1;
  if (*a < 0 || *b < 0) why = "steps must be >= 0";
  else if (*a > *b) why = "the first step is after the last";
  else if (*stride < 1) why = "the stride must be >= 1";
done:
  free(buf);
  return why;
}

/* base_dir/rel, or rel unchanged when it is absolute or base_dir is ".". */
char *fp8_exp_resolve(exp_ctx *c, const char *rel) {
  const char *base = c->ex->base_dir;
  if (rel[0] == '/' || strcmp(base, ".") == 0) return fp8_exp_strdup(c, rel);
  size_t nb = strlen(base), nr = strlen(rel);
  int slash = nb > 0 && base[nb - 1] == '/';
  char *out = malloc(nb + nr + 2);
  if (!out) {
    c->nomem = 1;
    return NULL;
  }
  memcpy(out, base, nb);
  if (!slash) out[nb++] = '/';
  memcpy(out + nb, rel, nr + 1);
  return out;
}
