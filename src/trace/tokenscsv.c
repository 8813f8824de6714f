/* tokenscsv.c: a trace folder's tokens.csv (`step,gemm,tokens`, docs/reference.md): per step
 * and expert GEMM of a Mixture-of-Experts layer, the token rows routed to it (summed over the
 * step's micro-batches; 0: it did not run, its input and gradient amaxes are 0). Read whole at
 * fp8_trace_open (trace_dir.c, which also checks that every GEMM has tensors in the trace),
 * strictly as amax.csv is (amaxcsv.c): every error names the file and line. Also the tables'
 * accessor and the merge of the ranks' tables by GEMM name (data-parallel replicas summed),
 * which the runner's experts.csv and `fp8lab inspect` read.
 */
#include "trace_internal.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8.h"
#include "outfile.h" /* fp8_fopen_regular */
#include "util.h"

#define TOKENS_HEADER "step,gemm,tokens"

/* A non-negative decimal integer filling s: 0, -1 (not one), -2 (beyond int64). */
static int parse_count(const char *s, int64_t *out) {
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

/* The reader's state: the rows so far (gemm: the name's index in order of first appearance)
 * and the distinct names. */
typedef struct {
  fp8_tokens_row *rows;
  size_t nrows, cap;
  fp8_strset set;
  char **name; /* [id], owned */
  size_t ncap;
} reader;

/* A GEMM name's index, added (and checked) when new. */
static int gemm_id(const char *path, size_t line, const char *g, reader *rd, int32_t *id,
                   char *err, size_t errlen) {
  size_t len = strlen(g), k = fp8_strset_get(&rd->set, g, len);
  if (k == SIZE_MAX) {
    char shown[FP8_ESC_LEN], why[FP8_ESC_LEN + 64];
    if (fp8_tensor_name_check(g, len, FP8_NAME_MAX, why, sizeof why) != 0)
      return fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%zu: gemm %s: %s", path, line,
                        fp8_esc(g, shown, sizeof shown), why);
    if (!fp8_expert_of(g, NULL, NULL, 0))
      return fp8_errorf(FP8_EFORMAT, err, errlen,
                        "%s:%zu: gemm %s is not an expert GEMM (a dotted component 'experts' "
                        "followed by the expert index, as in model.layers.0.mlp.experts.3."
                        "gate_up_proj)",
                        path, line, fp8_esc(g, shown, sizeof shown));
    if (rd->set.n > (size_t)INT32_MAX)
      return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: too many distinct GEMM names", path);
    char **nn = fp8_grow(rd->name, rd->set.n, &rd->ncap, sizeof *rd->name, 64);
    if (!nn) return FP8_ENOMEM;
    rd->name = nn;
    char *own = strdup(g);
    int added;
    if (!own) return FP8_ENOMEM;
    if ((k = fp8_strset_put(&rd->set, own, len, &added)) == SIZE_MAX) {
      free(own);
      return FP8_ENOMEM;
    }
    rd->name[k] = own;
  }
  *id = (int32_t)k;
  return FP8_OK;
}

/* One data line (NUL-terminated, CR removed) into a new row. */
static int parse_row(const char *path, size_t line, char *cur, reader *rd, char *err,
                     size_t errlen) {
  size_t nf = 1;
  for (const char *q = cur; *q; q++) nf += *q == ',';
  if (nf != 3)
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%zu: expected 3 fields, found %zu", path,
                      line, nf);
  char *fs = cur, *fg = strchr(fs, ','), *ft;
  *fg++ = '\0';
  ft = strchr(fg, ',');
  *ft++ = '\0';
  char shown[FP8_ESC_LEN];
  fp8_tokens_row r = {0, 0, 0, (uint32_t)line};
  int sr = parse_count(fs, &r.step);
  if (sr != 0)
    return fp8_errorf(FP8_EFORMAT, err, errlen,
                      sr == -2 ? "%s:%zu: step '%s' too large"
                               : "%s:%zu: step '%s' is not a non-negative integer",
                      path, line, fp8_esc(fs, shown, sizeof shown));
  if (!*fg) return fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%zu: empty gemm name", path, line);
  int rc = gemm_id(path, line, fg, rd, &r.gemm, err, errlen);
  if (rc) return rc;
  int tr = parse_count(ft, &r.tokens);
  if (tr != 0)
    return fp8_errorf(FP8_EFORMAT, err, errlen,
                      tr == -2 ? "%s:%zu: tokens '%s' too large"
                               : "%s:%zu: tokens '%s' is not a non-negative integer",
                      path, line, fp8_esc(ft, shown, sizeof shown));
  fp8_tokens_row *nr = fp8_grow(rd->rows, rd->nrows, &rd->cap, sizeof *rd->rows, 256);
  if (!nr) return FP8_ENOMEM;
  rd->rows = nr;
  rd->rows[rd->nrows++] = r;
  return FP8_OK;
}

/* The file a line at a time: the header, rows, blank lines only at the end (amax.csv's
 * rules). */
static int parse_lines(const char *path, FILE *fp, reader *rd, char *err, size_t errlen) {
  size_t line = 0, blank_line = 0, lncap = 0;
  char *cur = NULL;
  int rc = FP8_OK;
  for (ssize_t got; rc == FP8_OK && (got = getline(&cur, &lncap, fp)) >= 0;) {
    size_t ll = (size_t)got;
    line++;
    if (memchr(cur, '\0', ll)) {
      rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%zu: NUL byte in the file", path, line);
      break;
    }
    if (ll > 0 && cur[ll - 1] == '\n') cur[--ll] = '\0';
    if (ll > 0 && cur[ll - 1] == '\r') cur[--ll] = '\0';
    if (line == 1) {
      char shown[FP8_ESC_LEN];
      if (strcmp(cur, TOKENS_HEADER) != 0)
        rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s:1: expected header '" TOKENS_HEADER
                        "', found '%s'", path, fp8_esc(cur, shown, sizeof shown));
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
    if (line > UINT32_MAX) {
      rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%zu: too many lines (at most %lu)", path,
                      line, (unsigned long)UINT32_MAX);
      break;
    }
    rc = parse_row(path, line, cur, rd, err, errlen);
  }
  int read_failed = ferror(fp);
  free(cur);
  if (rc) return rc;
  if (read_failed)
    return fp8_errorf(FP8_EIO, err, errlen, "%s: read failed: %s", path, strerror(errno));
  if (line == 0)
    return fp8_errorf(FP8_EFORMAT, err, errlen,
                      "%s:1: expected header '" TOKENS_HEADER "', found an empty file", path);
  return FP8_OK;
}

static int cmp_name_ptr(const void *a, const void *b) {
  return strcmp(**(char *const *const *)a, **(char *const *const *)b);
}

static int cmp_row(const void *a, const void *b) {
  const fp8_tokens_row *x = a, *y = b;
  if (x->step != y->step) return x->step < y->step ? -1 : 1;
  if (x->gemm != y->gemm) return x->gemm < y->gemm ? -1 : 1;
  return x->line < y->line ? -1 : x->line > y->line;
}

/* The names sorted (rows re-indexed), the rows sorted by step, gemm and line; a (step, gemm)
 * given twice is refused at the earliest line that repeats one. */
static int index_rows(const char *path, reader *rd, char *err, size_t errlen) {
  size_t nn = rd->set.n;
  char ***ord = malloc((nn + 1) * sizeof *ord);
  int32_t *rank = malloc((nn + 1) * sizeof *rank);
  char **sorted = malloc((nn + 1) * sizeof *sorted);
  int rc = FP8_OK;
  if (!ord || !rank || !sorted) {
    rc = FP8_ENOMEM;
    goto done;
  }
  for (size_t i = 0; i < nn; i++) ord[i] = &rd->name[i];
  qsort(ord, nn, sizeof *ord, cmp_name_ptr);
  for (size_t k = 0; k < nn; k++) {
    size_t id = (size_t)(ord[k] - rd->name);
    rank[id] = (int32_t)k;
    sorted[k] = rd->name[id];
  }
  if (nn) memcpy(rd->name, sorted, nn * sizeof *sorted); /* a header alone: no names, NULL */
  for (size_t i = 0; i < rd->nrows; i++) rd->rows[i].gemm = rank[rd->rows[i].gemm];
  if (rd->nrows) qsort(rd->rows, rd->nrows, sizeof *rd->rows, cmp_row);
  const fp8_tokens_row *dup = NULL, *first = NULL;
  for (size_t i = 1; i < rd->nrows; i++) {
    const fp8_tokens_row *a = &rd->rows[i - 1], *b = &rd->rows[i];
    if (a->step != b->step || a->gemm != b->gemm) continue;
    /* b repeats the key of an earlier row; the first row of the key is where it began */
    size_t f = i - 1;
    while (f > 0 && rd->rows[f - 1].step == b->step && rd->rows[f - 1].gemm == b->gemm) f--;
    if (!dup || b->line < dup->line) {
      dup = b;
      first = &rd->rows[f];
    }
  }
  if (dup) {
    char shown[FP8_ESC_LEN];
    rc = fp8_errorf(FP8_EFORMAT, err, errlen,
                    "%s:%u: duplicate row for step %lld, gemm %s (first at line %u)", path,
                    dup->line, (long long)dup->step,
                    fp8_esc(rd->name[dup->gemm], shown, sizeof shown), first->line);
  }
done:
  free(ord);
  free(rank);
  free(sorted);
  return rc;
}

int fp8_tokens_csv_read(const char *path, fp8_tokens_table *t, char *err, size_t errlen) {
  reader rd;
  memset(&rd, 0, sizeof rd);
  memset(t, 0, sizeof *t);
  if (err && errlen) err[0] = '\0';
  FILE *fp = fp8_fopen_regular(path, err, errlen); /* a FIFO: "not a regular file" */
  if (!fp) return FP8_EIO;
  int rc = parse_lines(path, fp, &rd, err, errlen);
  fclose(fp);
  if (rc == FP8_OK) rc = index_rows(path, &rd, err, errlen);
  size_t ngemms = rd.set.n;
  fp8_strset_free(&rd.set); /* (its keys are rd.name's, freed with the table) */
  if (rc == FP8_OK) {
    *t = (fp8_tokens_table){rd.nrows, rd.rows, ngemms, rd.name};
    return FP8_OK;
  }
  if (rc == FP8_ENOMEM && err && errlen && !err[0])
    fp8_errorf(rc, err, errlen, "%s: out of memory", path);
  fp8_tokens_table junk = {rd.nrows, rd.rows, ngemms, rd.name};
  fp8_tokens_free(&junk);
  return rc;
}

/* ------------------------------------------------------------------ the trace's GEMMs */

void fp8_tokens_find_tensors(const fp8_tokens_table *t, const char *const *names, size_t n,
                             unsigned char *found) {
  for (size_t g = 0; g < t->ngemms; g++) {
    if (found[g]) continue;
    const char *gm = t->gemms[g];
    size_t gl = strlen(gm), lo = 0, hi = n;
    while (lo < hi) { /* the first name >= "<gemm>." */
      size_t mid = (lo + hi) / 2;
      int c = strncmp(names[mid], gm, gl);
      if (c < 0 || (c == 0 && names[mid][gl] < '.')) lo = mid + 1;
      else hi = mid;
    }
    for (size_t k = lo; k < n && strncmp(names[k], gm, gl) == 0 && names[k][gl] == '.'; k++) {
      const char *role = names[k] + gl + 1;
      if (!strchr(role, '.') && fp8_role_of_tensor(role) != FP8_ROLE_UNKNOWN) {
        found[g] = 1;
        break;
      }
    }
  }
}

/* ------------------------------------------------------------------ per rank, merged */

const fp8_tokens_table *fp8_trace_tokens(const fp8_trace *tr, size_t r) {
  if (tr->nranks) return r < tr->nranks && tr->ranks[r].has_tokens ? &tr->ranks[r].tokens : NULL;
  return r == 0 && tr->has_tokens ? &tr->tokens : NULL;
}

int fp8_trace_has_tokens(const fp8_trace *tr) {
  size_t nparts = tr->nranks ? tr->nranks : 1;
  for (size_t r = 0; r < nparts; r++)
    if (fp8_trace_tokens(tr, r)) return 1;
  return 0;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The merged GEMM names: the kept ones of every rank, sorted and unique (borrowed from the
 * ranks' tables); keepmap[r][g]: the merged index of rank r's GEMM g, -1 when left out. */
static int merge_names(const fp8_trace *tr, size_t nparts,
                       int (*keep)(size_t, const char *, void *), void *ctx, char ***names,
                       size_t *nnames, int32_t **keepmap) {
  size_t total = 0, n = 0;
  for (size_t r = 0; r < nparts; r++) {
    const fp8_tokens_table *t = fp8_trace_tokens(tr, r);
    total += t ? t->ngemms : 0;
  }
  char **all = malloc((total + 1) * sizeof *all);
  if (!all) return FP8_ENOMEM;
  for (size_t r = 0; r < nparts; r++) {
    const fp8_tokens_table *t = fp8_trace_tokens(tr, r);
    if (!t) continue;
    if (!(keepmap[r] = malloc((t->ngemms + 1) * sizeof **keepmap))) {
      free(all);
      return FP8_ENOMEM;
    }
    for (size_t g = 0; g < t->ngemms; g++) {
      keepmap[r][g] = !keep || keep(r, t->gemms[g], ctx) ? 0 : -1;
      if (keepmap[r][g] == 0) all[n++] = t->gemms[g];
    }
  }
  if (n > 1) qsort(all, n, sizeof *all, cmp_str);
  size_t w = 0;
  for (size_t k = 0; k < n; k++)
    if (!w || strcmp(all[w - 1], all[k]) != 0) all[w++] = all[k];
  for (size_t r = 0; r < nparts; r++) {
    const fp8_tokens_table *t = fp8_trace_tokens(tr, r);
    for (size_t g = 0; t && g < t->ngemms; g++) {
      if (keepmap[r][g] < 0) continue;
      char **hit = bsearch(&t->gemms[g], all, w, sizeof *all, cmp_str);
      keepmap[r][g] = (int32_t)(hit - all);
    }
  }
  *names = all;
  *nnames = w;
  return FP8_OK;
}

static int cmp_merged(const void *a, const void *b) {
  const fp8_tokens_row *x = a, *y = b;
  if (x->step != y->step) return x->step < y->step ? -1 : 1;
  return x->gemm < y->gemm ? -1 : x->gemm > y->gemm;
}

int fp8_trace_tokens_merge(const fp8_trace *tr, int (*keep)(size_t r, const char *gemm, void *ctx),
                           void *ctx, fp8_tokens_table *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  size_t nparts = tr->nranks ? tr->nranks : 1, total = 0, nnames = 0, n = 0;
  int32_t **keepmap = calloc(nparts, sizeof *keepmap);
  char **names = NULL;
  fp8_tokens_row *rows = NULL;
  int rc = keepmap ? merge_names(tr, nparts, keep, ctx, &names, &nnames, keepmap) : FP8_ENOMEM;
  for (size_t r = 0; !rc && r < nparts; r++) {
    const fp8_tokens_table *t = fp8_trace_tokens(tr, r);
    total += t ? t->nrows : 0;
  }
  if (!rc && !(rows = malloc((total + 1) * sizeof *rows))) rc = FP8_ENOMEM;
  for (size_t r = 0; !rc && r < nparts; r++) {
    const fp8_tokens_table *t = fp8_trace_tokens(tr, r);
    for (size_t i = 0; t && i < t->nrows; i++) {
      int32_t g = keepmap[r][t->rows[i].gemm];
      if (g >= 0) rows[n++] = (fp8_tokens_row){t->rows[i].step, t->rows[i].tokens, g, 0};
    }
  }
  if (!rc && n > 1) qsort(rows, n, sizeof *rows, cmp_merged);
  size_t w = 0; /* the replicas' rows of a (step, gemm), summed */
  for (size_t k = 0; !rc && k < n; k++) {
    if (w && rows[w - 1].step == rows[k].step && rows[w - 1].gemm == rows[k].gemm) {
      if (rows[w - 1].tokens > INT64_MAX - rows[k].tokens)
        rc = fp8_errorf(FP8_EFORMAT, err, errlen,
                        "%s: the tokens of gemm %s at step %lld summed over the ranks overflow "
                        "a 64-bit integer",
                        tr->dir, names[rows[k].gemm], (long long)rows[k].step);
      else rows[w - 1].tokens += rows[k].tokens;
    } else {
      rows[w++] = rows[k];
    }
  }
  char **own = !rc ? calloc(nnames + 1, sizeof *own) : NULL;
  if (!rc && !own) rc = FP8_ENOMEM;
  for (size_t k = 0; !rc && k < nnames; k++)
    if (!(own[k] = strdup(names[k]))) rc = FP8_ENOMEM;
  if (!rc) {
    *out = (fp8_tokens_table){w, rows, nnames, own};
    rows = NULL;
    own = NULL;
  }
  if (rc == FP8_ENOMEM) fp8_errorf(rc, err, errlen, "%s: out of memory", tr->dir);
  if (own) {
    fp8_tokens_table junk = {0, NULL, nnames, own};
    fp8_tokens_free(&junk);
  }
  free(rows);
  free(names);
  for (size_t r = 0; keepmap && r < nparts; r++) free(keepmap[r]);
  free(keepmap);
  return rc;
}
