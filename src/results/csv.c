/* csv.c: what every CSV file of a run shares (csv_internal.h): the schema helpers (results.h:
 * a header written, matched, a column found, a file opened with its header), the line
 * splitter and the field parsers of the readers (integers as digits only, floats as
 * printf("%.9g") writes them), the
 * whole-file loader of the small tables (histograms.csv, gemm.csv) and the number memo of the
 * row builder. A leaf: it calls no other file of the folder. */
#include <errno.h>
#include <float.h> /* FLT_EVAL_METHOD */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "csv_internal.h"
#include "outfile.h" /* fp8_outfile, fp8_read_stream, fp8_errorf */
#include "trace.h"   /* fp8_tensor_name_check */
#include "util.h"    /* fp8_grow */

_Thread_local csv_num_memo csv_memo[512];

/* ------------------------------------------------------------------ schemas */

void fp8_schema_put_header(FILE *fp, const fp8_schema *s) {
  fp8_schema_put_header_n(fp, s, s->ncols);
}

void fp8_schema_put_header_n(FILE *fp, const fp8_schema *s, int ncols) {
  for (int i = 0; i < ncols && i < s->ncols; i++) {
    if (i) fputc(',', fp);
    fputs(s->columns[i], fp);
  }
  fputc('\n', fp);
}

int fp8_schema_match_header(const fp8_schema *s, const char *line) {
  size_t len = strlen(line);
  if (len && line[len - 1] == '\r') len--;
  /* how many leading columns the line names exactly */
  int k = 0;
  size_t pos = 0;
  while (k < s->ncols) {
    size_t n = strlen(s->columns[k]);
    if (pos + n > len || memcmp(line + pos, s->columns[k], n) != 0) return 0;
    pos += n;
    k++;
    if (pos == len) break;
    if (line[pos] != ',') return 0;
    pos++;
  }
  if (pos != len) return 0;
  for (int v = 0; v < 5 && s->versions[v]; v++)
    if (s->versions[v] == k) return k;
  return 0;
}

int fp8_schema_column(const fp8_schema *s, const char *name) {
  for (int i = 0; i < s->ncols; i++)
    if (strcmp(s->columns[i], name) == 0) return i;
  return -1;
}

int fp8_schema_open(fp8_outfile *of, const char *dir, const fp8_schema *s, char *err,
                    size_t errlen) {
  int rc = fp8_outfile_open(of, dir, s->file, err, errlen);
  if (rc == FP8_OK) fp8_schema_put_header(of->fp, s);
  return rc;
}

/* ------------------------------------------------------------------ fields */

/* Digits only (after a '-' where allowed), within int64: strtoll's value for those. */
int csv_parse_i64(const char *s, int allow_neg, int64_t *out) {
  const char *p = s;
  int neg = *p == '-' && allow_neg;
  p += neg;
  if (!*p) return 0;
  uint64_t v = 0;
  for (; *p; p++) {
    if (*p < '0' || *p > '9') return 0;
    unsigned d = (unsigned)(*p - '0');
    if (v > (UINT64_MAX - d) / 10) return 0;
    v = v * 10 + d;
  }
  if (v > (uint64_t)INT64_MAX + (uint64_t)neg) return 0;
  *out = neg && v ? -(int64_t)(v - 1) - 1 : (int64_t)v;
  return 1;
}

/* Clinger's fast path for [+-]digits[.digits][(e|E)[+-]digits]: with at most 19 significant
 * digits forming w <= 2^53 and a decimal exponent e, |e| <= 22, both w and 10^|e| are exact
 * doubles and the one multiplication or division rounds correctly: strtod's value. 0 (and
 * *out untouched) for anything else, which strtod then decides. */
static int parse_f64_fast(const char *s, double *out) {
#if FLT_EVAL_METHOD == 0
  static const double p10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                 1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
  const char *p = s;
  int neg = *p == '-', any = 0, nd = 0, e = 0;
  if (*p == '-' || *p == '+') p++;
  uint64_t w = 0;
  for (int frac = 0;; p++) {
    if (*p == '.' && !frac) {
      frac = 1;
      continue;
    }
    if (*p < '0' || *p > '9') break;
    any = 1;
    e -= frac;
    if (w == 0 && *p == '0') continue; /* leading zeros are not significant */
    if (++nd > 19) return 0;
    w = w * 10 + (uint64_t)(*p - '0');
  }
  if (!any) return 0;
  if (*p == 'e' || *p == 'E') {
    p++;
    int eneg = *p == '-', x = 0;
    if (*p == '-' || *p == '+') p++;
    if (*p < '0' || *p > '9') return 0;
    for (; *p >= '0' && *p <= '9'; p++)
      if ((x = x * 10 + (*p - '0')) > 9999) return 0;
    e += eneg ? -x : x;
  }
  if (*p || w > (uint64_t)1 << 53 || e < -22 || e > 22) return 0;
  double v = e < 0 ? (double)w / p10[-e] : (double)w * p10[e];
  *out = neg ? -v : v;
  return 1;
#else
  (void)s;
  (void)out;
  return 0;
#endif
}

/* A decimal float as printf("%.9g") writes it, or inf, -inf, nan. No hex, no spaces. */
int csv_parse_f64(const char *s, double *out) {
  if (parse_f64_fast(s, out)) return 1;
  if (strcmp(s, "inf") == 0) return *out = INFINITY, 1;
  if (strcmp(s, "-inf") == 0) return *out = -INFINITY, 1;
  if (strcmp(s, "nan") == 0) return *out = NAN, 1;
  int digit = 0;
  for (const char *q = s; *q; q++) {
    if (*q >= '0' && *q <= '9') digit = 1;
    else if (!strchr(".eE+-", *q)) return 0;
  }
  if (!digit) return 0;
  errno = 0;
  char *end;
  double v = strtod(s, &end);
  if (*end || (errno == ERANGE && isinf(v))) return 0;
  *out = v;
  return 1;
}

int csv_split(char *line, char **f, int max) {
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

/* ------------------------------------------------------------------ a table read whole */

int csv_bad_field(const char *path, int64_t line, const fp8_schema *s, int col,
                  const char *field, const char *what, char *err, size_t errlen) {
  char shown[44];
  return fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%lld: column %s: expected %s, found '%s'", path,
                    (long long)line, s->columns[col], what, fp8_esc(field, shown, sizeof shown));
}

int csv_check_tensor_field(const char *path, int64_t line, const fp8_schema *s, int col,
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

int csv_load_table(const char *path, const fp8_schema *s, size_t row_size, csv_row_parser parse,
                   char **text, void *rows_field, size_t *n, char *err, size_t errlen) {
  size_t len = 0, cap = 0;
  void *rows = NULL;
  *n = 0;
  int rc = read_whole(path, text, &len, err, errlen);
  if (rc) {
    memcpy(rows_field, &rows, sizeof rows);
    return rc;
  }
  if (s->ncols > CSV_MAX_COLS) { /* a schema wider than f below: the caller's static check */
    free(*text);
    *text = NULL;
    memcpy(rows_field, &rows, sizeof rows);
    return fp8_errorf(FP8_EINVAL, err, errlen, "%s: %s has %d columns, more than %d", path,
                      s->file, s->ncols, (int)CSV_MAX_COLS);
  }
  int64_t line = 0;
  lines_t it = {*text, *text + len};
  char *ln, *f[CSV_MAX_COLS + 1];
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
    int nf = csv_split(ln, f, ncols);
    if (nf != ncols) {
      rc = bad_count(path, line, ncols, nf, err, errlen);
      break;
    }
    for (int k = ncols; k < s->ncols; k++) f[k] = NULL;
    char *nr = fp8_grow(rows, *n, &cap, row_size, 1024);
    if (!nr) {
      rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
      break;
    }
    rows = nr;
    rc = parse(path, line, f, nr + *n * row_size, err, errlen);
    if (!rc) ++*n;
  }
  if (!rc && line == 0) rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s:1: empty file", path);
  if (rc) {
    free(rows);
    free(*text);
    rows = NULL;
    *text = NULL;
    *n = 0;
  }
  memcpy(rows_field, &rows, sizeof rows); /* the table's row pointer (any object pointer) */
  return rc;
}
