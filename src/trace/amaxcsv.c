/* amaxcsv.c: reading a trace's amax.csv (`step,tensor,amax`, one row per step and tensor,
 * optionally followed by `micro`, `te_scale` or both: one row per micro-batch, and the scale
 * TransformerEngine cast with), the per-step amax stream that lets delayed scaling be replayed on
 * every step (and micro-batch), not only on the snapshot steps. Read at fp8_trace_open, a
 * line at a time (the rows are kept, 24 bytes each, the text is not); every error names the
 * file and line. The rows do not keep their line: the rare duplicate row is found by sorting,
 * and its line (and its first occurrence's) by reading the file once more.
 */

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8.h"
#include "outfile.h" /* fp8_fopen_regular */
#include "trace.h"
#include "util.h"

/* A parsed row, the kept row itself: its tensor is the name's index in the order of first
 * appearance, then (index_rows) in the sorted names. */
typedef fp8_amax_row raw_row;

/* The optional columns the header announced (appended after amax, in this order). */
typedef struct {
  int micro, te_scale;
} amax_cols;

#define AMAX_HEADERS                                                                          \
  "'step,tensor,amax', optionally followed by ',micro', ',te_scale' or ',micro,te_scale'"

static int cmp_row(const void *a, const void *b) {
  const raw_row *x = a, *y = b;
  if (x->step != y->step) return x->step < y->step ? -1 : 1;
  if (x->micro != y->micro) return x->micro < y->micro ? -1 : 1;
  return x->tensor < y->tensor ? -1 : x->tensor > y->tensor;
}

/* Parses a non-negative decimal integer that must fill s. */
static int parse_step(const char *s, int64_t *out) {
  if (!*s) return -1;
  int64_t v = 0;
  for (; *s; s++) {
    if (*s < '0' || *s > '9') return -1;
    int d = *s - '0';
    if (v > (INT64_MAX - d) / 10) return -2;
    v = v * 10 + d;
  }
  *out = v;
  return 0;
}

/* Parses the amax (or te_scale) field f with strtof, as a float32 rounds once so that "%.9g"
 * output round-trips exactly. Returns 0 with *out, or fp8_errorf's status naming col. */
static int parse_float(const char *path, size_t line, const char *col, const char *f,
                       float *out, char *err, size_t errlen) {
  char shown[FP8_ESC_LEN]; /* the field as messages show it: escaped only for one */
  char *end = NULL;
  errno = 0;
  float a = *f && *f != ' ' && *f != '\t' ? strtof(f, &end) : 0.0f;
  int e = errno;
  if (!end || end == f || *end || isnan(a) || a < 0 || (isinf(a) && e == ERANGE))
    fp8_esc(f, shown, sizeof shown);
  errno = e; /* strtof's, for the caller's underflow check */
  if (!end || end == f || *end)
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%zu: %s '%s' is not a number", path, line,
                      col, shown);
  if (isnan(a))
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%zu: %s '%s' is NaN", path, line, col,
                      shown);
  if (a < 0)
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%zu: %s '%s' is negative", path, line, col,
                      shown);
  if (isinf(a) && e == ERANGE)
    return fp8_errorf(FP8_EFORMAT, err, errlen,
                      "%s:%zu: %s '%s' overflows float (write inf for infinity)", path, line,
                      col, shown);
  *out = a == 0 ? 0.0f : a; /* -0 -> +0 */
  return FP8_OK;
}

/* te_scale: empty (not given: 0) or a positive finite float. TE's scale is never 0 or inf, so
 * such a value is a broken capture, not a scale to compare with. */
static int parse_te_scale(const char *path, size_t line, const char *f, float *out, char *err,
                          size_t errlen) {
  *out = 0.0f;
  if (!*f) return FP8_OK;
  char shown[FP8_ESC_LEN];
  int rc = parse_float(path, line, "te_scale", f, out, err, errlen);
  if (rc != FP8_OK) return rc;
  int under = errno == ERANGE; /* strtof's, before anything else can set errno */
  if (isinf(*out) || *out == 0.0f) fp8_esc(f, shown, sizeof shown);
  if (isinf(*out))
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%zu: te_scale '%s' is infinite", path,
                      line, shown);
  if (*out == 0.0f)
    return fp8_errorf(FP8_EFORMAT, err, errlen,
                      under ? "%s:%zu: te_scale '%s' underflows float"
                                      : "%s:%zu: te_scale '%s' is zero",
                      path, line, shown);
  return FP8_OK;
}

/* The distinct tensor names met so far: their set (index: order of first appearance) and
 * the names by that index. */
typedef struct {
  fp8_strset set;
  char **name;  /* [id]: the name (owned: the line it came from is gone) */
  size_t *len;  /* [id]: the name's length */
  size_t *next; /* [id]: the id of the row that followed a row of this name last (SIZE_MAX:
                   none yet): a capture writes its tensors in the same order at every step,
                   so this guess spares the hash of almost every row */
  size_t cap, prev; /* prev: the last row's id (SIZE_MAX: none) */
} name_index;

/* Parses one data line (cur, NUL-terminated, CR removed) into *r (idx: the name's index in
 * ni); cols are the header's. A name is checked the first time it appears: the same bytes
 * pass or fail the same way at every line, and the first is where its error belongs. */
static int parse_row(const char *path, size_t line, char *cur, amax_cols cols, name_index *ni,
                     raw_row *r, char *err, size_t errlen) {
  size_t want = 3 + (size_t)cols.micro + (size_t)cols.te_scale, nf = 1;
  for (const char *q = cur; *q; q++) nf += *q == ',';
  if (nf != want)
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%zu: expected %zu fields, found %zu", path,
                      line, want, nf);
  char *f[5] = {NULL, NULL, NULL, NULL, NULL};
  f[0] = cur;
  for (size_t k = 1; k < want; k++) {
    char *c = strchr(f[k - 1], ',');
    *c = '\0';
    f[k] = c + 1;
  }
  const char *fs = f[0], *ft = f[1], *fa = f[2];
  char shown[FP8_ESC_LEN], why[FP8_ESC_LEN + 64];
  *r = (raw_row){0, 0, 0, 0.0f, 0.0f};
  int sr = parse_step(fs, &r->step);
  if (sr != 0)
    return fp8_errorf(FP8_EFORMAT, err, errlen,
                      sr == -2 ? "%s:%zu: step '%s' too large"
                               : "%s:%zu: step '%s' is not a non-negative integer",
                      path, line, fp8_esc(fs, shown, sizeof shown));
  if (!*ft) return fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%zu: empty tensor name", path, line);
  size_t fl = strlen(ft), id = SIZE_MAX;
  size_t guess = ni->prev != SIZE_MAX ? ni->next[ni->prev] : SIZE_MAX;
  if (guess != SIZE_MAX && ni->len[guess] == fl && memcmp(ni->name[guess], ft, fl) == 0)
    id = guess;
  else
    id = fp8_strset_get(&ni->set, ft, fl);
  if (id == SIZE_MAX) {
    /* the name rules here, so that a bad name is reported at its line of this file */
    if (fp8_tensor_name_check(ft, fl, FP8_NAME_MAX, why, sizeof why) != 0)
      return fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%zu: tensor %s: %s", path, line,
                        fp8_esc(ft, shown, sizeof shown), why);
    int added;
    if (ni->set.n >= ni->cap) { /* the three arrays grow together */
      size_t nc = ni->cap ? 2 * ni->cap : 256;
      char **nn = realloc(ni->name, nc * sizeof *nn);
      if (nn) ni->name = nn;
      size_t *nl = nn ? realloc(ni->len, nc * sizeof *nl) : NULL;
      if (nl) ni->len = nl;
      size_t *nx = nl ? realloc(ni->next, nc * sizeof *nx) : NULL;
      if (!nx) return FP8_ENOMEM;
      ni->next = nx;
      ni->cap = nc;
    }
    char *own = strdup(ft);
    if (!own) return FP8_ENOMEM;
    if ((id = fp8_strset_put(&ni->set, own, fl, &added)) == SIZE_MAX) {
      free(own);
      return FP8_ENOMEM;
    }
    ni->name[id] = own;
    ni->len[id] = fl;
    ni->next[id] = SIZE_MAX;
  }
  if (ni->prev != SIZE_MAX) ni->next[ni->prev] = id;
  ni->prev = id;
  if (id > (size_t)INT32_MAX)
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: too many distinct tensor names", path);
  r->tensor = (int32_t)id;
  int rc = parse_float(path, line, "amax", fa, &r->amax, err, errlen);
  if (rc != FP8_OK) return rc;
  if (cols.micro) {
    const char *fm = f[3];
    if (!*fm) return fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%zu: empty micro", path, line);
    int64_t micro = 0;
    int mr = parse_step(fm, &micro);
    if (mr == 0 && micro > INT32_MAX) mr = -2;
    r->micro = (int32_t)micro;
    if (mr != 0)
      return fp8_errorf(FP8_EFORMAT, err, errlen,
                        mr == -2 ? "%s:%zu: micro '%s' too large (at most 2147483647)"
                                 : "%s:%zu: micro '%s' is not a non-negative integer",
                        path, line, fp8_esc(fm, shown, sizeof shown));
  }
  if (cols.te_scale)
    return parse_te_scale(path, line, f[3 + cols.micro], &r->te_scale, err, errlen);
  return FP8_OK;
}

/* The header line: which optional columns follow step,tensor,amax; -1 for any other. */
static int parse_header(const char *h, amax_cols *cols) {
  static const char *const hs[4] = {"step,tensor,amax", "step,tensor,amax,micro",
                                    "step,tensor,amax,te_scale",
                                    "step,tensor,amax,micro,te_scale"};
  for (int k = 0; k < 4; k++)
    if (strcmp(h, hs[k]) == 0) {
      *cols = (amax_cols){k & 1, (k >> 1) & 1};
      return 0;
    }
  return -1;
}

/* A NUL byte anywhere is the file's error, before any other (as when the file was read
 * whole): after another error at line `line`, the rest of the file is searched for one, in
 * blocks, nothing kept. 0, or the NUL's line. */
static size_t nul_after(FILE *fp, size_t line) {
  char b[1 << 16];
  size_t n;
  line++; /* the rest starts on the next line */
  while ((n = fread(b, 1, sizeof b, fp)) > 0) {
    const char *z = memchr(b, '\0', n);
    for (const char *q = b; q < (z ? z : b + n); q++) line += *q == '\n';
    if (z) return line;
  }
  return 0;
}

/* Reads the file a line at a time (the rows are kept, not its text): the header, then rows;
 * blank lines only at the end. */
static int parse_lines(const char *path, FILE *fp, raw_row **rows, size_t *nrows,
                       amax_cols *cols, name_index *ni, char *err, size_t errlen) {
  size_t cap = 0, line = 0, blank_line = 0, lncap = 0;
  char *cur = NULL;
  int rc = FP8_OK, nul_here = 0;
  for (ssize_t got; rc == FP8_OK && (got = getline(&cur, &lncap, fp)) >= 0;) {
    size_t ll = (size_t)got;
    line++;
    if ((nul_here = memchr(cur, '\0', ll) != NULL)) {
      rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%zu: NUL byte in the file", path, line);
      break;
    }
    if (ll > 0 && cur[ll - 1] == '\n') cur[--ll] = '\0';
    if (ll > 0 && cur[ll - 1] == '\r') cur[--ll] = '\0'; /* CRLF files */
    if (line == 1) {
      char shown[FP8_ESC_LEN];
      if (parse_header(cur, cols) != 0)
        rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s:1: expected header " AMAX_HEADERS
                        ", found '%s'", path, fp8_esc(cur, shown, sizeof shown));
      continue;
    }
    if (ll == 0) {
      if (!blank_line) blank_line = line;
      continue;
    }
    if (blank_line) {
      rc = fp8_errorf(FP8_EFORMAT, err, errlen,
                      "%s:%zu: blank line (only trailing blank lines are allowed)", path,
                      blank_line);
      break;
    }
    raw_row r;
    if ((rc = parse_row(path, line, cur, *cols, ni, &r, err, errlen)) != FP8_OK) break;
    raw_row *nr = fp8_grow(*rows, *nrows, &cap, sizeof **rows, 256);
    if (!nr) {
      rc = FP8_ENOMEM;
      break;
    }
    *rows = nr;
    (*rows)[(*nrows)++] = r;
  }
  int read_failed = ferror(fp);
  free(cur);
  size_t nul = rc == FP8_EFORMAT && !nul_here ? nul_after(fp, line) : 0;
  if (nul) return fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%zu: NUL byte in the file", path, nul);
  if (rc) return rc;
  if (read_failed)
    return fp8_errorf(FP8_EIO, err, errlen, "%s: read failed: %s", path, strerror(errno));
  if (line == 0)
    return fp8_errorf(FP8_EFORMAT, err, errlen,
                      "%s:1: expected header " AMAX_HEADERS ", found an empty file", path);
  return FP8_OK;
}

static int cmp_tensor(const void *a, const void *b) {
  const raw_row *x = a, *y = b;
  return x->tensor < y->tensor ? -1 : x->tensor > y->tensor;
}

typedef struct {
  const char *name;
  size_t id;
} named_id;
static int cmp_named(const void *a, const void *b) {
  return strcmp(((const named_id *)a)->name, ((const named_id *)b)->name);
}

/* The error of the duplicate rows found by sorting: the file read once more, the first row
 * whose (step, micro, tensor) is among the duplicated keys dk (sorted by cmp_row) and was seen
 * before names itself and the line of the key's first row. rank: first-appearance name index ->
 * sorted index. */
static int duplicate_error(const char *path, amax_cols cols, name_index *ni, const int32_t *rank,
                           const raw_row *dk, size_t nd, const char **names, char *err,
                           size_t errlen) {
  size_t *first = calloc(nd + 1, sizeof *first);
  FILE *fp = first ? fp8_fopen_regular(path, NULL, 0) : NULL;
  if (!fp) {
    free(first);
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: duplicate rows for step %lld, tensor %s",
                      path, (long long)dk[0].step, names[dk[0].tensor]);
  }
  char *cur = NULL, e2[8];
  size_t lncap = 0, line = 0;
  int rc = FP8_OK;
  for (ssize_t got; rc == FP8_OK && (got = getline(&cur, &lncap, fp)) > 0;) {
    size_t ll = (size_t)got;
    if (++line == 1) continue;
    if (ll > 0 && cur[ll - 1] == '\n') cur[--ll] = '\0';
    if (ll > 0 && cur[ll - 1] == '\r') cur[--ll] = '\0';
    raw_row r;
    if (!ll || parse_row(path, line, cur, cols, ni, &r, e2, sizeof e2) != FP8_OK) continue;
    r.tensor = rank[r.tensor];
    const raw_row *k = bsearch(&r, dk, nd, sizeof *dk, cmp_row);
    if (!k) continue;
    size_t d = (size_t)(k - dk);
    if (!first[d]) {
      first[d] = line;
      continue;
    }
    char shown[FP8_ESC_LEN], micro[48] = "";
    if (cols.micro) snprintf(micro, sizeof micro, ", micro %lld", (long long)r.micro);
    rc = fp8_errorf(FP8_EFORMAT, err, errlen,
                    "%s:%zu: duplicate row for step %lld%s, tensor %s (first at line %zu)", path,
                    line, (long long)r.step, micro, fp8_esc(names[r.tensor], shown, sizeof shown),
                    first[d]);
  }
  free(cur);
  fclose(fp);
  free(first);
  return rc ? rc : fp8_errorf(FP8_EFORMAT, err, errlen, "%s: duplicate rows", path);
}

/* The distinct names, sorted (into names: ni's count of them), each row's index into them;
 * rows sorted by step, then micro, then index; a repeated (step, micro, tensor) is an error
 * (the message names the micro-batch when the file has the column). A file in step (and
 * micro) order, as captures write it, is sorted one step at a time. */
static int index_rows(const char *path, raw_row *rows, size_t nrows, amax_cols cols,
                      name_index *ni, const char **names, char *err, size_t errlen) {
  size_t nn = ni->set.n;
  named_id *ord = malloc((nn + 1) * sizeof *ord);
  int32_t *rank = malloc((nn + 1) * sizeof *rank);
  if (!ord || !rank) {
    free(ord);
    free(rank);
    return FP8_ENOMEM;
  }
  for (size_t i = 0; i < nn; i++) ord[i] = (named_id){ni->name[i], i};
  qsort(ord, nn, sizeof *ord, cmp_named);
  for (size_t k = 0; k < nn; k++) {
    names[k] = ord[k].name;
    rank[ord[k].id] = (int32_t)k;
  }
  free(ord);
  int in_order = 1;
  for (size_t i = 0; i < nrows; i++) {
    rows[i].tensor = rank[rows[i].tensor];
    if (i && (rows[i].step < rows[i - 1].step ||
              (rows[i].step == rows[i - 1].step && rows[i].micro < rows[i - 1].micro)))
      in_order = 0;
  }
  if (!in_order) {
    qsort(rows, nrows, sizeof *rows, cmp_row);
  } else { /* each (step, micro) run by tensor: the same order as cmp_row's */
    for (size_t b = 0, e; b < nrows; b = e) {
      for (e = b + 1; e < nrows && rows[e].step == rows[b].step && rows[e].micro == rows[b].micro; e++) {}
      qsort(rows + b, e - b, sizeof *rows, cmp_tensor);
    }
  }
  /* duplicated keys: sorted next to each other */
  size_t nd = 0;
  raw_row *dk = NULL;
  for (size_t i = 1; i < nrows; i++)
    if (cmp_row(&rows[i], &rows[i - 1]) == 0 && (nd == 0 || cmp_row(&dk[nd - 1], &rows[i]) != 0)) {
      raw_row *g = realloc(dk, (nd + 1) * sizeof *dk);
      if (!g) {
        free(dk);
        free(rank);
        return FP8_ENOMEM;
      }
      dk = g;
      dk[nd++] = rows[i];
    }
  int rc = nd ? duplicate_error(path, cols, ni, rank, dk, nd, names, err, errlen) : FP8_OK;
  free(dk);
  free(rank);
  return rc;
}

int fp8_amax_csv_read(const char *path, fp8_trace *tr, char *err, size_t errlen) {
  int rc = FP8_OK;
  size_t nrows = 0, nnames = 0;
  raw_row *rows = NULL;
  const char **names = NULL;
  char **owned = NULL;
  fp8_amax_row *outrows = NULL;
  name_index ni = {{0}, NULL, NULL, NULL, 0, SIZE_MAX};
  if (err && errlen) err[0] = '\0';

  FILE *fp = fp8_fopen_regular(path, err, errlen); /* a FIFO: "not a regular file" */
  if (!fp) return FP8_EIO;
  setvbuf(fp, NULL, _IOFBF, 1 << 16);
  amax_cols cols = {0, 0};
  rc = parse_lines(path, fp, &rows, &nrows, &cols, &ni, err, errlen);
  fclose(fp);
  if (rc != FP8_OK) goto done;
  if (nrows > 0) {
    nnames = ni.set.n;
    names = malloc((nnames + 1) * sizeof *names);
    owned = malloc((nnames + 1) * sizeof *owned);
    if (!names || !owned) {
      rc = FP8_ENOMEM;
      goto done;
    }
    rc = index_rows(path, rows, nrows, cols, &ni, names, err, errlen);
    if (rc != FP8_OK) goto done;
    outrows = rows; /* the kept rows, the block shrunk to them */
    rows = NULL;
    fp8_amax_row *shrunk = realloc(outrows, nrows * sizeof *outrows);
    if (shrunk) outrows = shrunk;
    /* the names, sorted, handed over (the set's copies) */
    for (size_t i = 0; i < nnames; i++) owned[i] = (char *)names[i];
    ni.set.n = 0; /* not the map's to free any more */
    for (size_t i = 0; i < nnames; i++) ni.name[i] = NULL;
  }
  tr->amax = outrows;
  tr->namax = nrows;
  tr->amax_names = owned;
  tr->namax_names = nnames;
  outrows = NULL;
  owned = NULL;
done:
  if (rc == FP8_ENOMEM && err && errlen && !err[0])
    fp8_errorf(rc, err, errlen, "%s: out of memory", path);
  free(owned);
  free(outrows);
  free(names);
  free(rows);
  for (size_t i = 0; ni.name && i < ni.set.n; i++) free(ni.name[i]);
  fp8_strset_free(&ni.set);
  free(ni.name);
  free(ni.len);
  free(ni.next);
  return rc;
}
