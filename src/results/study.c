/* study.c: the inputs of `fp8lab closedloop` that the study driver writes (closedloop.h;
 * /work/notes' layout, docs/reference.md "fp8lab closedloop"): study.ini, read line by line
 * (one [study] section of key = value lines, ';' or '#' comments, also after a value when a
 * space precedes them, as inih reads experiment files), and each run's loss.csv and eval.csv
 * through the tables' loader (csv_internal.h). Every error names the file and the line. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "closedloop.h"
#include "csv_internal.h"
#include "util.h" /* fp8_errorf, fp8_esc, fp8_grow */

/* ------------------------------------------------------------------ study.ini */

void fp8_study_free(fp8_study *s) {
  if (!s) return;
  free(s->dir);
  free(s->experiment);
  for (size_t i = 0; i < s->nlabels; i++) free(s->labels[i]);
  free(s->labels);
  free(s->seeds);
  memset(s, 0, sizeof *s);
}

ptrdiff_t fp8_study_seed_index(const fp8_study *s, int64_t seed) {
  for (size_t i = 0; i < s->nseeds; i++)
    if (s->seeds[i] == seed) return (ptrdiff_t)i;
  return -1;
}

static char *trim(char *s) {
  while (*s == ' ' || *s == '\t') s++;
  size_t n = strlen(s);
  while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r')) s[--n] = 0;
  return s;
}

/* The comma-separated items of v (trimmed, none empty) into *items: their number, or -1 for
 * an empty item, -2 out of memory. */
static long split_list(char *v, char ***items) {
  size_t n = 0, cap = 0;
  char **out = NULL;
  for (char *p = v;;) {
    char *c = strchr(p, ',');
    if (c) *c = 0;
    char *t = trim(p);
    if (!*t) {
      free(out);
      return -1;
    }
    char **g = fp8_grow(out, n, &cap, sizeof *out, 8);
    if (!g) {
      free(out);
      return -2;
    }
    out = g;
    out[n++] = t;
    if (!c) break;
    p = c + 1;
  }
  *items = out;
  return (long)n;
}

static int parse_int(const char *t, int64_t *v) { return csv_parse_i64(t, 0, v); }

/* One key = value line of [study] into s. */
static int study_key(fp8_study *s, const char *path, int line, const char *key, char *val,
                     unsigned *seen, char *err, size_t errlen) {
  static const char *const KEYS[] = {"experiment", "labels", "seeds", "open_seed",
                                     "steps",      "spike",  "eval_every"};
  char shown[FP8_ESC_LEN], vshown[FP8_ESC_LEN];
  int k = -1;
  for (int i = 0; i < 7; i++)
    if (strcmp(key, KEYS[i]) == 0) k = i;
  if (k < 0)
    return fp8_errorf(FP8_EFORMAT, err, errlen,
                      "%s:%d: unknown key %s in [study] (expected experiment, labels, seeds, "
                      "open_seed, steps, spike, eval_every)",
                      path, line, fp8_esc(key, shown, sizeof shown));
  if (*seen & (1u << k))
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%d: key %s given twice", path, line, key);
  *seen |= 1u << k;
  fp8_esc(val, vshown, sizeof vshown);
  if (k == 0) {
    s->experiment = strdup(val);
    return s->experiment ? FP8_OK : fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  }
  if (k == 3 || k == 4 || k == 6) {
    int64_t v;
    if (!parse_int(val, &v) || (k != 3 && v < 1))
      return fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%d: %s: expected %s, found '%s'", path,
                        line, key, k == 3 ? "a seed (an integer >= 0)" : "an integer >= 1",
                        vshown);
    *(k == 3 ? &s->open_seed : k == 4 ? &s->steps : &s->eval_every) = v;
    return FP8_OK;
  }
  char **items = NULL;
  long n = split_list(val, &items);
  if (n == -2) return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  if (n < 0)
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%d: %s: empty item in '%s'", path, line, key,
                      vshown);
  int rc = FP8_OK;
  if (k == 1) { /* labels */
    s->labels = calloc((size_t)n, sizeof *s->labels);
    for (long i = 0; s->labels && i < n; i++) {
      for (long j = 0; j < i; j++)
        if (strcmp(items[i], items[j]) == 0)
          rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%d: labels: '%s' listed twice", path,
                          line, fp8_esc(items[i], shown, sizeof shown));
      if (!rc && strcmp(items[i], "hp") == 0)
        rc = fp8_errorf(FP8_EFORMAT, err, errlen,
                        "%s:%d: labels: 'hp' names the high-precision runs, not a recipe", path,
                        line);
      if (rc) break;
      if (!(s->labels[i] = strdup(items[i]))) break;
      s->nlabels = (size_t)i + 1;
    }
    if (!rc && s->nlabels != (size_t)n) rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  } else if (k == 2) { /* seeds */
    s->seeds = calloc((size_t)n, sizeof *s->seeds);
    if (!s->seeds) rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
    for (long i = 0; !rc && i < n; i++) {
      if (!parse_int(items[i], &s->seeds[i]))
        rc = fp8_errorf(FP8_EFORMAT, err, errlen,
                        "%s:%d: seeds: expected integers >= 0, found '%s'", path, line,
                        fp8_esc(items[i], shown, sizeof shown));
      for (long j = 0; !rc && j < i; j++)
        if (s->seeds[j] == s->seeds[i])
          rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%d: seeds: %lld listed twice", path,
                          line, (long long)s->seeds[i]);
      s->nseeds = (size_t)i + 1;
    }
  } else { /* spike: first, last */
    if (n != 2 || !parse_int(items[0], &s->spike_first) || !parse_int(items[1], &s->spike_last) ||
        s->spike_first > s->spike_last)
      rc = fp8_errorf(FP8_EFORMAT, err, errlen,
                      "%s:%d: spike: expected two steps 'first, last' with first <= last, "
                      "found '%s'",
                      path, line, vshown);
    s->has_spike = !rc;
  }
  free(items);
  return rc;
}

/* The lines of the file: [study] and its keys; what is missing or inconsistent afterwards. */
static int study_parse(fp8_study *s, const char *path, FILE *fp, char *err, size_t errlen) {
  char buf[8192];
  int line = 0, in_study = 0, rc = FP8_OK;
  unsigned seen = 0;
  while (!rc && fgets(buf, sizeof buf, fp)) {
    line++;
    size_t len = strlen(buf);
    if (len == sizeof buf - 1 && buf[len - 1] != '\n')
      return fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%d: line longer than %zu bytes", path,
                        line, sizeof buf - 2);
    if (len && buf[len - 1] == '\n') buf[--len] = 0;
    for (char *p = buf; *p; p++) /* a comment: at the start, or after a space */
      if ((*p == ';' || *p == '#') && (p == buf || p[-1] == ' ' || p[-1] == '\t')) {
        *p = 0;
        break;
      }
    char *t = trim(buf);
    if (!*t) continue;
    char shown[FP8_ESC_LEN];
    if (*t == '[') {
      char *e = strchr(t, ']');
      if (e) *e = 0;
      if (!e || strcmp(trim(t + 1), "study") != 0 || in_study)
        return fp8_errorf(FP8_EFORMAT, err, errlen,
                          "%s:%d: expected the one section [study], found '%s'", path, line,
                          fp8_esc(t, shown, sizeof shown));
      in_study = 1;
      continue;
    }
    char *eq = strchr(t, '=');
    if (!eq || !in_study)
      return fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%d: expected %s, found '%s'", path, line,
                        in_study ? "key = value" : "[study] first", fp8_esc(t, shown, sizeof shown));
    *eq = 0;
    rc = study_key(s, path, line, trim(t), trim(eq + 1), &seen, err, errlen);
  }
  if (rc) return rc;
  if (ferror(fp)) return fp8_errorf(FP8_EIO, err, errlen, "%s: cannot read", path);
  static const char *const REQUIRED[] = {"labels", "seeds", "open_seed", "steps"};
  for (int i = 0; i < 4; i++)
    if (!(seen & (2u << i)))
      return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: [study] %s missing", path, REQUIRED[i]);
  if (fp8_study_seed_index(s, s->open_seed) < 0)
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: open_seed %lld is not one of the seeds",
                      path, (long long)s->open_seed);
  if (s->has_spike && s->spike_last >= s->steps)
    return fp8_errorf(FP8_EFORMAT, err, errlen,
                      "%s: spike %lld, %lld: beyond the study's steps 0..%lld", path,
                      (long long)s->spike_first, (long long)s->spike_last,
                      (long long)s->steps - 1);
  if (!s->experiment && !(s->experiment = strdup("")))
    return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  return FP8_OK;
}

int fp8_study_load(const char *dir, fp8_study *s, char *err, size_t errlen) {
  memset(s, 0, sizeof *s);
  char path[4200];
  snprintf(path, sizeof path, "%s/study.ini", dir);
  FILE *fp = fp8_fopen_regular(path, err, errlen);
  if (!fp) return FP8_EIO;
  int rc = (s->dir = strdup(dir)) ? study_parse(s, path, fp, err, errlen)
                                  : fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  fclose(fp);
  if (rc) fp8_study_free(s);
  return rc;
}

/* ------------------------------------------------------------------ loss.csv, eval.csv */

static const char *const LOSS_COLS[FP8_LOSS_COL_COUNT] = {"step", "loss"};
static const char *const EVAL_COLS[FP8_EVAL_COL_COUNT] = {"step", "loss_hp", "loss_fp8"};
const fp8_schema fp8_schema_loss = {"loss.csv", LOSS_COLS, FP8_LOSS_COL_COUNT,
                                    {FP8_LOSS_COL_COUNT, 0}};
const fp8_schema fp8_schema_eval = {"eval.csv", EVAL_COLS, FP8_EVAL_COL_COUNT,
                                    {FP8_EVAL_COL_COUNT, 0}};

typedef struct {
  int64_t step;
  double a, b;
} loss_row;

static int parse_loss_fields(const fp8_schema *s, const char *path, int64_t line, char **f,
                             void *out, char *err, size_t errlen) {
  loss_row *r = out;
  if (!csv_parse_i64(f[0], 0, &r->step))
    return csv_bad_field(path, line, s, 0, f[0], "a step (an integer >= 0)", err, errlen);
  if (!csv_parse_f64(f[1], &r->a))
    return csv_bad_field(path, line, s, 1, f[1], "a number", err, errlen);
  r->b = NAN;
  if (s->ncols == 3 && *f[2] && !csv_parse_f64(f[2], &r->b))
    return csv_bad_field(path, line, s, 2, f[2], "a number or empty", err, errlen);
  return FP8_OK;
}
static int parse_loss(const char *path, int64_t line, char **f, void *out, char *err,
                      size_t errlen) {
  return parse_loss_fields(&fp8_schema_loss, path, line, f, out, err, errlen);
}
static int parse_eval(const char *path, int64_t line, char **f, void *out, char *err,
                      size_t errlen) {
  return parse_loss_fields(&fp8_schema_eval, path, line, f, out, err, errlen);
}

static int load_losses(const char *path, const fp8_schema *s, csv_row_parser parse,
                       fp8_loss_table *t, char *err, size_t errlen) {
  memset(t, 0, sizeof *t);
  char *text = NULL;
  loss_row *rows = NULL;
  size_t n = 0;
  int rc = csv_load_table(path, s, sizeof *rows, parse, &text, &rows, &n, err, errlen);
  free(text);
  if (rc) return rc;
  if (n == 0) rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s: no rows", path);
  for (size_t i = 1; !rc && i < n; i++)
    if (rows[i].step <= rows[i - 1].step)
      rc = fp8_errorf(FP8_EFORMAT, err, errlen,
                      "%s:%zu: step %lld after step %lld (steps must ascend)", path, i + 2,
                      (long long)rows[i].step, (long long)rows[i - 1].step);
  if (!rc) {
    t->step = malloc(n * sizeof *t->step);
    t->a = malloc(n * sizeof *t->a);
    t->b = s->ncols == 3 ? malloc(n * sizeof *t->b) : NULL;
    t->path = strdup(path);
    if (!t->step || !t->a || (s->ncols == 3 && !t->b) || !t->path)
      rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  }
  for (size_t i = 0; !rc && i < n; i++) {
    t->step[i] = rows[i].step;
    t->a[i] = rows[i].a;
    if (t->b) t->b[i] = rows[i].b;
  }
  if (!rc) t->n = n;
  free(rows);
  if (rc) fp8_loss_table_free(t);
  return rc;
}

int fp8_loss_csv_load(const char *path, fp8_loss_table *t, char *err, size_t errlen) {
  return load_losses(path, &fp8_schema_loss, parse_loss, t, err, errlen);
}
int fp8_eval_csv_load(const char *path, fp8_loss_table *t, char *err, size_t errlen) {
  return load_losses(path, &fp8_schema_eval, parse_eval, t, err, errlen);
}

void fp8_loss_table_free(fp8_loss_table *t) {
  if (!t) return;
  free(t->path);
  free(t->step);
  free(t->a);
  free(t->b);
  memset(t, 0, sizeof *t);
}
