/* resultcsv.c: the readers of histograms.csv and gemm.csv (tables.h). Each file is read whole
 * and every line checked against its schema in results.h (the table the runner writes it
 * with): the header must match, fields are found by their FP8_*_COL_* position, and a bad
 * line is "<path>:<line>: <what>". */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outfile.h" /* fp8_read_stream, fp8_errorf */
#include "results.h" /* fp8_schema_histograms, fp8_schema_gemm */
#include "stepscsv_internal.h" /* steps_parse_i64, steps_parse_f64 */
#include "tables.h"
#include "trace.h"   /* fp8_tensor_name_check */
#include "util.h"    /* fp8_grow */

/* ------------------------------------------------------------------ shared line handling */

/* A CSV line of one of the files of the run, after the header: fields split in place at
 * every comma into f[0..max) (a count above max: too many). */
static int split_all(char *line, char **f, int max) {
  int n = 0;
  f[n++] = line;
  for (char *p = line; *p; p++)
    if (*p == ',') {
      *p = 0;
      if (n == max) return max + 1;
      f[n++] = p + 1;
    }
  return n;
}

/* "<path>:<line>: column <name>: expected <what>, found '<field>'" */
static int bad_field(const char *path, int64_t line, const fp8_schema *s, int col, const char *field,
                     const char *what, char *err, size_t errlen) {
  char shown[44];
  return fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%lld: column %s: expected %s, found '%s'", path,
                    (long long)line, s->columns[col], what, fp8_esc(field, shown, sizeof shown));
}

/* A tensor column: the name rules (names of a multi-rank trace carry their rank_<r>/). */
static int check_tensor_field(const char *path, int64_t line, const fp8_schema *s, int col,
                              const char *name, char *err, size_t errlen) {
  char why[FP8_ESC_LEN + 64], shown[FP8_ESC_LEN];
  if (fp8_tensor_name_check(name, strlen(name), FP8_NAME_MAX + FP8_RANK_PREFIX_MAX, why,
                            sizeof why) == 0)
    return FP8_OK;
  return fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%lld: column %s: %s: %s", path, (long long)line,
                    s->columns[col], fp8_esc(name, shown, sizeof shown), why);
}

/* "<path>:<line>: expected <n> fields, found [more than ]<k>" */
static int bad_count(const char *path, int64_t line, int want, int n, char *err, size_t errlen) {
  return fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%lld: expected %d fields, found %s%d", path,
                    (long long)line, want, n > want ? "more than " : "", n > want ? want : n);
}

/* The lines of a text read whole, each cut in place. */
typedef struct {
  char *p, *end;
} lines_t;

/* The next line of it, NUL-terminated without its "\n" or "\r\n", in *ln and *len, and its
 * number in *line; *ln = NULL at the end. FP8_EFORMAT "<path>:<line>: NUL byte in the line". */
static int next_line(lines_t *it, char **ln, size_t *len, int64_t *line, const char *path,
                     char *err, size_t errlen) {
  *ln = NULL;
  if (it->p >= it->end) return FP8_OK;
  char *nl = memchr(it->p, '\n', (size_t)(it->end - it->p)), *s = it->p;
  size_t l = nl ? (size_t)(nl - s) : (size_t)(it->end - s);
  it->p += l + (nl != NULL);
  ++*line;
  if (memchr(s, 0, l))
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%lld: NUL byte in the line", path,
                      (long long)*line);
  s[l] = 0;
  if (l && s[l - 1] == '\r') s[--l] = 0;
  *ln = s;
  *len = l;
  return FP8_OK;
}

/* The whole file at path (with a NUL after it) in *text. */
static int read_whole(const char *path, char **text, size_t *len, char *err, size_t errlen) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return fp8_errorf(FP8_EIO, err, errlen, "%s: cannot open: %s", path, strerror(errno));
  int rc = fp8_read_stream(fp, text, len);
  fclose(fp);
  if (rc) return fp8_errorf(rc, err, errlen, "%s: cannot read", path);
  return FP8_OK;
}

/* The most columns of the files read here (split_all's array) */
enum { RESULT_MAX_COLS = (int)FP8_GEMM_COL_COUNT > (int)FP8_HIST_COL_COUNT
                             ? (int)FP8_GEMM_COL_COUNT : (int)FP8_HIST_COL_COUNT };

/* One data line's fields (ncols of them, split) into the row at row. */
typedef int (*row_parser)(const char *path, int64_t line, char **f, void *row, char *err,
                          size_t errlen);

/* A result file read whole into *text and parsed into *rows (*n of row_size bytes each): the
 * header must be the schema's, every later line non-empty with s->ncols fields, each parsed by
 * parse (fields point into *text). On failure *rows and *text are freed. */
static int load_csv(const char *path, const fp8_schema *s, size_t row_size, row_parser parse,
                    char **text, void **rows, size_t *n, char *err, size_t errlen) {
  size_t len = 0, cap = 0;
  *rows = NULL;
  *n = 0;
  int rc = read_whole(path, text, &len, err, errlen);
  if (rc) return rc;
  int64_t line = 0;
  lines_t it = {*text, *text + len};
  char *ln, *f[RESULT_MAX_COLS + 1];
  size_t l;
  int ncols = s->ncols; /* the header's version: the fields past it are NULL */
  while (!rc && (rc = next_line(&it, &ln, &l, &line, path, err, errlen)) == FP8_OK && ln) {
    if (line == 1) {
      if ((ncols = fp8_schema_match_header(s, ln)) == 0) {
        char want[256];
        size_t o = 0;
        for (int k = 0; k < s->ncols && o < sizeof want; k++)
          o += (size_t)snprintf(want + o, sizeof want - o, "%s%s", k ? "," : "", s->columns[k]);
        rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s:1: not a %s header (expected '%s')", path,
                        s->file, want);
      }
      continue;
    }
    if (l == 0) {
      rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%lld: empty line", path, (long long)line);
      break;
    }
    int nf = split_all(ln, f, ncols);
    if (nf != ncols) {
      rc = bad_count(path, line, ncols, nf, err, errlen);
      break;
    }
    for (int k = ncols; k < s->ncols; k++) f[k] = NULL;
    char *nr = fp8_grow(*rows, *n, &cap, row_size, 1024);
    if (!nr) {
      rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
      break;
    }
    *rows = nr;
    rc = parse(path, line, f, nr + *n * row_size, err, errlen);
    if (!rc) ++*n;
  }
  if (!rc && line == 0) rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s:1: empty file", path);
  if (rc) {
    free(*rows);
    free(*text);
    *rows = NULL;
    *text = NULL;
    *n = 0;
  }
  return rc;
}

/* ------------------------------------------------------------------ histograms.csv */

/* The fields of one data line of histograms.csv into *row (a row_parser). */
static int parse_histogram_fields(const char *path, int64_t line, char **f, void *out,
                                  char *err, size_t errlen) {
  const fp8_schema *s = &fp8_schema_histograms;
  fp8_hist_row *row = out;
  int64_t v;
  int rc = check_tensor_field(path, line, s, FP8_HIST_COL_TENSOR, f[FP8_HIST_COL_TENSOR], err, errlen);
  if (rc) return rc;
  row->tensor = f[FP8_HIST_COL_TENSOR];
  if (!steps_parse_i64(f[FP8_HIST_COL_STEP], 0, &row->step))
    return bad_field(path, line, s, FP8_HIST_COL_STEP, f[FP8_HIST_COL_STEP], "a step number >= 0",
                     err, errlen);
  if (!steps_parse_i64(f[FP8_HIST_COL_LOG2_BIN], 1, &v) || v < FP8_LOG2_HIST_MIN ||
      v >= FP8_LOG2_HIST_MIN + FP8_LOG2_HIST_BINS) {
    char what[64];
    snprintf(what, sizeof what, "an integer in %d..%d", FP8_LOG2_HIST_MIN,
             FP8_LOG2_HIST_MIN + FP8_LOG2_HIST_BINS - 1);
    return bad_field(path, line, s, FP8_HIST_COL_LOG2_BIN, f[FP8_HIST_COL_LOG2_BIN], what, err,
                     errlen);
  }
  row->bin = (int32_t)v;
  if (!steps_parse_i64(f[FP8_HIST_COL_COUNT_], 0, &row->count))
    return bad_field(path, line, s, FP8_HIST_COL_COUNT_, f[FP8_HIST_COL_COUNT_],
                     "a count (integer >= 0)", err, errlen);
  return FP8_OK;
}

void fp8_hist_free(fp8_hist_table *t) {
  free(t->rows);
  free(t->text_);
  memset(t, 0, sizeof *t);
}

int fp8_hist_load(const char *path, fp8_hist_table *t, char *err, size_t errlen) {
  memset(t, 0, sizeof *t);
  void *rows;
  int rc = load_csv(path, &fp8_schema_histograms, sizeof *t->rows, parse_histogram_fields,
                    &t->text_, &rows, &t->n, err, errlen);
  t->rows = rows;
  return rc;
}

int fp8_hist_get(const fp8_hist_table *t, const char *tensor, int64_t step, double *counts,
                 int *lo_bin, int *nbins) {
  int lo = 1000, hi = -1000;
  double tmp[FP8_LOG2_HIST_BINS] = {0};
  for (size_t i = 0; i < t->n; i++) {
    const fp8_hist_row *row = &t->rows[i];
    if (row->step != step || strcmp(row->tensor, tensor) != 0) continue;
    tmp[row->bin - FP8_LOG2_HIST_MIN] = (double)row->count;
    if (row->bin < lo) lo = row->bin;
    if (row->bin > hi) hi = row->bin;
  }
  if (hi < lo) return FP8_EFORMAT;
  *lo_bin = lo;
  *nbins = hi - lo + 1;
  for (int b = lo; b <= hi; b++) counts[b - lo] = tmp[b - FP8_LOG2_HIST_MIN];
  return FP8_OK;
}

/* ------------------------------------------------------------------ gemm.csv */

/* The fields of one gemm.csv row (its layer, gemm, step, configuration and rel_error), as
 * steps.csv's are checked, into *row. */
static int parse_gemm_fields(const char *path, int64_t line, char **f, void *out, char *err,
                             size_t errlen) {
  const fp8_schema *s = &fp8_schema_gemm;
  fp8_gemm_row *row = out;
  int rc = check_tensor_field(path, line, s, FP8_GEMM_COL_LAYER, f[FP8_GEMM_COL_LAYER], err,
                              errlen);
  if (rc) return rc;
  row->layer = f[FP8_GEMM_COL_LAYER];
  int g = -1;
  for (int k = 0; k < FP8_GEMM_COUNT; k++)
    if (strcmp(f[FP8_GEMM_COL_GEMM], fp8_gemm_name((fp8_gemm_kind)k)) == 0) g = k;
#define BAD(col, what) bad_field(path, line, s, col, f[col], what, err, errlen)
  if (g < 0) return BAD(FP8_GEMM_COL_GEMM, "fprop, dgrad or wgrad");
  row->gemm = (fp8_gemm_kind)g;
  if (!steps_parse_i64(f[FP8_GEMM_COL_STEP], 0, &row->step))
    return BAD(FP8_GEMM_COL_STEP, "a step number >= 0");
  /* the configuration's columns (no format column: the key's format stays E4M3, unused) */
  const char *what;
  int bad_col = fp8_config_key_parse(f[FP8_GEMM_COL_RECIPE], f[FP8_GEMM_COL_KIND], NULL,
                                     f[FP8_GEMM_COL_HISTORY_LEN], f[FP8_GEMM_COL_MARGIN],
                                     f[FP8_GEMM_COL_AMAX_COMPUTE], &row->key, &what);
  if (bad_col >= 0) { /* 0 recipe, 1 kind, 3.. the delayed columns */
    static const int col[6] = {FP8_GEMM_COL_RECIPE, FP8_GEMM_COL_KIND, FP8_GEMM_COL_KIND,
                               FP8_GEMM_COL_HISTORY_LEN, FP8_GEMM_COL_MARGIN,
                               FP8_GEMM_COL_AMAX_COMPUTE};
    return BAD(col[bad_col], what);
  }
  if (!steps_parse_f64(f[FP8_GEMM_COL_REL_ERROR], &row->rel_error) || row->rel_error < 0)
    return BAD(FP8_GEMM_COL_REL_ERROR, "a number >= 0, inf or nan"); /* inf: a zero reference */
  row->rel_lo = row->rel_hi = NAN; /* exact errors: no interval */
  if (f[FP8_GEMM_COL_REL_ERROR_LO]) {
    if (!steps_parse_f64(f[FP8_GEMM_COL_REL_ERROR_LO], &row->rel_lo) || row->rel_lo < 0 ||
        row->rel_lo > row->rel_error)
      return BAD(FP8_GEMM_COL_REL_ERROR_LO, "a number >= 0 and <= rel_error, inf or nan");
    if (!steps_parse_f64(f[FP8_GEMM_COL_REL_ERROR_HI], &row->rel_hi) ||
        row->rel_hi < row->rel_error)
      return BAD(FP8_GEMM_COL_REL_ERROR_HI, "a number >= rel_error, inf or nan");
  }
#undef BAD
  row->line = line;
  return FP8_OK;
}

void fp8_gemmcsv_free(fp8_gemm_table *t) {
  free(t->rows);
  free(t->text_);
  memset(t, 0, sizeof *t);
}

int fp8_gemmcsv_load(const char *path, fp8_gemm_table *t, char *err, size_t errlen) {
  memset(t, 0, sizeof *t);
  void *rows;
  int rc = load_csv(path, &fp8_schema_gemm, sizeof *t->rows, parse_gemm_fields, &t->text_,
                    &rows, &t->n, err, errlen);
  t->rows = rows;
  return rc;
}
