/* report_te.c: the report's "Held against TransformerEngine" section (rep_add_te_check): where
 * the trace gave TE's own scale (amax.csv's te_scale, carried into stream.csv), how often the
 * replayed scale differs from it, per delayed configuration. The replay is bit-exact by design,
 * so the comparison is exact (float32 equality): one differing bit is a mismatch. A trace
 * imported from TE's debug logs may also hold TE's overflows% (te_overflows.csv in the trace
 * folder, fp8lab import-te): the iterations TE saw an element overflow against those whose
 * largest element overflowed in the replay. Without either the section is absent
 * (docs/semantics.md, issues 17 and 28). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outfile.h" /* fp8_fopen_regular */
#include "report_internal.h"
#include "sha256.h"  /* fp8_sha256_mem: te_overflows.csv against run.json's inputs[] */
#include "te_log.h"  /* FP8_TE_OVERFLOWS_FILE */
#include "util.h"    /* fp8_grow */

/* One delayed configuration's totals (the series' key without tensor and format: a hybrid
 * configuration spans E4M3 and E5M2 tensors, as elsewhere in the report). */
typedef struct rep_te {
  const fp8_stream_series *key; /* its first series */
  int64_t rows, mismatches;
  double max_rel;                /* largest |te - replay| / replay over the rows with te */
  const fp8_stream_series *first; /* the first mismatch (step, micro, then tensor order) */
  size_t first_i;
  /* TE's overflows% (te_overflows.csv): the stream rows it was logged for, those TE saw
   * overflow (> 0), those whose largest element overflowed in the replay, the rows where the
   * two disagree and the first of them */
  int64_t orows, te_over, rp_over, odis;
  const fp8_stream_series *ofirst;
  size_t ofirst_i;
  /* the rows of tensors TE logged less often than every iteration (a trace from TE's debug
   * log): with TE's scale, at a logged overflows%; counted apart, never compared (te_comparable) */
  int64_t nc_rows, nc_orows;
} te_cfg;

/* te_overflows.csv, sorted by (tensor, step). */
typedef struct {
  const char *tensor; /* into buf */
  int64_t step;
  float pct;
} te_ovf;

typedef struct {
  te_ovf *v;
  size_t n;
  char *buf;
  int found; /* the file was there */
} ovf_table;

static int cmp_ovf(const void *a, const void *b) {
  const te_ovf *x = a, *y = b;
  int c = strcmp(x->tensor, y->tensor);
  if (c) return c;
  return (x->step > y->step) - (x->step < y->step);
}

/* The file the report reads is the one the run used, or none (issue 41): want (NULL: a run.json
 * without hashes, no check) is its sha256 in run.json's inputs[]; data (len bytes, NULL: the
 * file is gone) what is there now. FP8_OK, or FP8_EINVAL with one line saying what to do. */
static int same_as_run(const char *path, const char *want, const char *data, size_t len,
                       char *err, size_t errlen) {
  char now[FP8_SHA256_HEX];
  if (!want) return FP8_OK;
  if (data && fp8_sha256_mem(data, len, now) != FP8_OK)
    return fp8_errorf(FP8_ENOMEM, err, errlen, "%s: out of memory", path);
  if (data && strcmp(now, want) == 0) return FP8_OK;
  return fp8_errorf(FP8_EINVAL, err, errlen, "%s: %s since the run (run.json's inputs[] record "
                    "its sha256 %.12s...), so the report cannot hold TE's overflows%% against "
                    "this run; run the experiment again (fp8lab run --force) to report on the "
                    "trace as it is now", path, data ? "changed" : "gone", want);
}

/* <dir>/te_overflows.csv into t (absent: t->found 0), checked against want, its sha256 when the
 * run recorded one (same_as_run). Lines "step,tensor,overflows_pct" after that header; the
 * tensor is what lies between the first and the last comma. */
static int read_overflows(const char *dir, const char *want, ovf_table *t, char *err,
                          size_t errlen) {
  memset(t, 0, sizeof *t);
  size_t pn = strlen(dir) + 32;
  char *path = malloc(pn);
  if (!path) return FP8_ENOMEM;
  snprintf(path, pn, "%s/te_overflows.csv", dir);
  FILE *fp = fp8_fopen_regular(path, err, errlen); /* a FIFO: "not a regular file" */
  int rc = FP8_OK;
  if (!fp) {
    if (errno != ENOENT) rc = FP8_EIO; /* err: fp8_fopen_regular's line */
    else rc = same_as_run(path, want, NULL, 0, err, errlen);
    free(path);
    return rc;
  }
  t->found = 1;
  size_t cap = 0, len = 0, capv = 0;
  for (int ch; (ch = fgetc(fp)) != EOF;) {
    if (len + 2 > cap) {
      char *nb = realloc(t->buf, cap = cap ? 2 * cap : 4096);
      if (!nb) {
        rc = FP8_ENOMEM;
        break;
      }
      t->buf = nb;
    }
    t->buf[len++] = (char)ch;
  }
  if (ferror(fp) && rc == FP8_OK) rc = fp8_errorf(FP8_EIO, err, errlen, "%s: read error", path);
  fclose(fp);
  if (rc == FP8_OK) rc = same_as_run(path, want, t->buf ? t->buf : "", len, err, errlen);
  if (rc == FP8_OK && !t->buf) rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s: empty", path);
  if (rc == FP8_OK) t->buf[len] = 0;
  char *p = rc == FP8_OK ? t->buf : NULL;
  for (size_t line = 1; p && *p && rc == FP8_OK; line++) {
    char *nl = strchr(p, '\n');
    if (nl) *nl = 0;
    if (nl > p && nl[-1] == '\r') nl[-1] = 0;
    if (line == 1) {
      if (strcmp(p, "step,tensor,overflows_pct") != 0)
        rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s:1: expected the header "
                        "step,tensor,overflows_pct", path);
    } else {
      char *c1 = strchr(p, ','), *c2 = strrchr(p, ','), *end;
      long long step = 0;
      float v = 0;
      int ok = c1 && c2 > c1 + 1;
      if (ok) {
        *c1 = *c2 = 0;
        errno = 0;
        step = strtoll(p, &end, 10);
        ok = !errno && end != p && !*end && step >= 0;
        v = ok ? strtof(c2 + 1, &end) : 0;
        ok = ok && end != c2 + 1 && !*end && v >= 0.0f && v <= 100.0f;
      }
      if (!ok) {
        rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%zu: expected step,tensor,overflows_pct "
                        "(an integer >= 0, a name, a percentage in 0..100)", path, line);
        break;
      }
      te_ovf *nv = fp8_grow(t->v, t->n, &capv, sizeof *nv, 1024);
      if (!nv) {
        rc = FP8_ENOMEM;
        break;
      }
      t->v = nv;
      t->v[t->n++] = (te_ovf){c1 + 1, (int64_t)step, v};
    }
    p = nl ? nl + 1 : NULL;
  }
  if (rc == FP8_ENOMEM) fp8_errorf(rc, err, errlen, "%s: out of memory", path);
  free(path);
  if (rc == FP8_OK && t->n > 1) qsort(t->v, t->n, sizeof *t->v, cmp_ovf);
  return rc;
}

/* TE's overflows% of tensor at step, or NULL. */
static const te_ovf *ovf_find(const ovf_table *t, const char *tensor, int64_t step) {
  te_ovf key = {tensor, step, 0};
  return t && t->n ? bsearch(&key, t->v, t->n, sizeof *t->v, cmp_ovf) : NULL;
}

/* 1 when te_overflows.csv has a row of tensor (a lower bound by name), for want[]. */
static int ovf_has_tensor(const ovf_table *t, const char *tensor) {
  if (!t || !t->n) return 0;
  size_t lo = 0, hi = t->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (strcmp(t->v[mid].tensor, tensor) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo < t->n && strcmp(t->v[lo].tensor, tensor) == 0;
}

static int same_cfg(const fp8_stream_series *a, const fp8_stream_series *b) {
  return fp8_config_key_equal(&a->key, &b->key, FP8_KEY_IGNORE_FORMAT);
}

/* 1 when entry i of s comes before entry j of t in stream.csv's order: (step, micro), then the
 * series order (tensor names, configurations), which is s < t as pointers into one array. */
static int earlier(const fp8_stream_series *s, size_t i, const fp8_stream_series *t, size_t j) {
  if (s->step[i] != t->step[j]) return s->step[i] < t->step[j];
  if (s->micro[i] != t->micro[j]) return s->micro[i] < t->micro[j];
  return s < t;
}

/* Adds series s to its configuration's totals; at is the table's series (s may be a copy
 * that fp8_stream_visit made with the scales read from stream.npy). */
/* TE's overflows% against the replay at entry i of s: TE counts |x| > fp8_max * scale_inv,
 * the replay |RN32(amax * scale)| > fp8_max for the largest element (the stream's only one). */
static void ovf_add(te_cfg *c, const fp8_stream_series *s, const fp8_stream_series *at, size_t i,
                    const ovf_table *ot, int comparable) {
  const te_ovf *o = ovf_find(ot, s->tensor, s->step[i]);
  if (!o || s->micro[i] != 0) return; /* TE logs an iteration; an imported trace has micro 0 */
  if (!comparable) { /* TE's count used TE's scale, which the replay cannot have here */
    c->nc_orows++;
    return;
  }
  float y = s->amax[i] * s->scale[i];
  int te = o->pct > 0.0f, rp = y > fp8_format_max(s->key.format);
  c->orows++;
  c->te_over += te;
  c->rp_over += rp;
  if (te == rp) return;
  c->odis++;
  if (!c->ofirst || earlier(at, i, c->ofirst, c->ofirst_i)) {
    c->ofirst = at;
    c->ofirst_i = i;
  }
}

static void te_add(te_cfg *c, const fp8_stream_series *s, const fp8_stream_series *at,
                   int printed, const ovf_table *ot, int comparable) {
  for (size_t i = 0; i < s->n; i++) {
    if (ot) ovf_add(c, s, at, i, ot, comparable);
    float te = s->te_scale[i], sc = s->scale[i];
    if (!(te > 0.0f)) continue; /* not given */
    if (!comparable) {
      c->nc_rows++;
      continue;
    }
    c->rows++;
    if (te == sc) continue;
    /* TE's debug log printed scale_inv with four decimals (te_scale = 1 / that): the same
     * when the replay's 1 / scale is within half a unit of the fourth decimal of it */
    if (printed && fabs(1.0 / (double)sc - 1.0 / (double)te) <= 5e-5 * (1.0 + 1e-6)) continue;
    c->mismatches++;
    double rel = fabs((double)te - (double)sc) / (double)sc;
    if (rel > c->max_rel) c->max_rel = rel;
    if (!c->first || earlier(at, i, c->first, c->first_i)) {
      c->first = at;
      c->first_i = i;
    }
  }
}

/* 1 when TE's logged scale (and overflows%) of tensor can be held against a replay: always for
 * a trace that recorded TE's scale at every step (fp8lab.capture), and for a trace from TE's
 * debug log when TE logged the tensor's cur_amax at every iteration (its interval is 1). TE's
 * delayed scaling pushes an amax into its history at every iteration; a replay of a tensor
 * logged every k > 1 iterations pushes one per k, so its history, and the scale from it,
 * differ from TE's in any configuration (docs/semantics.md). */
static int te_comparable(const fp8_run_record *run, const char *tensor) {
  return !run->has_te_log || fp8_run_te_tensor_interval(run, tensor) == 1;
}

typedef struct {
  const fp8_stream_table *t;
  te_cfg *cs;
  size_t n;
  const fp8_run_record *run; /* has_te_log: TE's scales from its debug log's four decimals */
  const ovf_table *ot;
} te_ctx;

static int te_one(const fp8_stream_series *s, size_t k, void *ctx) {
  te_ctx *x = ctx;
  const fp8_stream_series *at = &x->t->series[k];
  size_t c = 0;
  while (c < x->n && !same_cfg(x->cs[c].key, at)) c++; /* listed by te_totals */
  te_add(&x->cs[c], s, at, x->run->has_te_log, x->ot, te_comparable(x->run, at->tensor));
  return 0;
}

/* The configurations in stream.csv order (first appearance), with their totals over the
 * series that carry TE's scale; *n of them. NULL when stream.csv has no te_scale at all (or out of
 * memory, or stream.npy cannot be read again: the section is left out). */
static te_cfg *te_totals(const fp8_stream_table *t, size_t *n, const fp8_run_record *run,
                         const ovf_table *ot) {
  te_cfg *cs = calloc(t->nseries + 1, sizeof *cs);
  unsigned char *want = calloc(t->nseries + 1, 1);
  *n = 0;
  int any = 0;
  const float *prev = NULL; /* a stream.npy's series of one tensor share its te_scale */
  for (size_t k = 0; cs && want && k < t->nseries; k++) {
    const fp8_stream_series *s = &t->series[k];
    size_t c = 0; /* every configuration listed, in order, with TE's scale or without */
    while (c < *n && !same_cfg(cs[c].key, s)) c++;
    if (c == *n) cs[(*n)++].key = s;
    if (s->te_scale == prev && k && !(ot && ot->n)) {
      want[k] = want[k - 1];
      continue;
    }
    prev = s->te_scale;
    for (size_t i = 0; i < s->n && !want[k]; i++) want[k] = s->te_scale[i] > 0.0f;
    want[k] |= ovf_has_tensor(ot, s->tensor);
    any |= want[k];
  }
  te_ctx x = {t, cs, *n, run, ot};
  char err[256];
  if (!cs || !want || !any || fp8_stream_visit(t, want, te_one, &x, err, sizeof err) != 0) {
    free(cs);
    free(want);
    *n = 0;
    return NULL;
  }
  free(want);
  return cs;
}

int rep_te_totals(rep_t *r, char *err, size_t errlen) {
  r->nte = 0;
  r->te = NULL;
  if (!r->have_stream) return FP8_OK;
  ovf_table ot = {0};
  int rc = FP8_OK;
  /* te_overflows.csv as the run used it: a run.json with hashes names it in inputs[] (under
   * trace.path, as the run named the folder), or the run had none; an older one, none listed,
   * reads what is there */
  const struct fp8_run_input *in = NULL;
  if (r->run.inputs_hashed && r->run.trace_path) {
    size_t n = strlen(r->run.trace_path) + sizeof FP8_TE_OVERFLOWS_FILE + 1;
    char *p = malloc(n);
    if (!p) return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
    snprintf(p, n, "%s/%s", r->run.trace_path, FP8_TE_OVERFLOWS_FILE);
    in = fp8_run_json_input(&r->run, p);
    free(p);
  }
  int listed = r->run.inputs_hashed ? in != NULL : 1;
  if (listed && r->run.has_te_log && r->run.trace_abs_path &&
      (rc = read_overflows(r->run.trace_abs_path, in && in->sha256[0] ? in->sha256 : NULL, &ot,
                           err, errlen)) != FP8_OK) {
    free(ot.v);
    free(ot.buf);
    return rc;
  }
  r->te = te_totals(&r->stream, &r->nte, &r->run, ot.n ? &ot : NULL);
  r->te_overflow_rows = ot.n;
  free(ot.v);
  free(ot.buf);
  return FP8_OK;
}

static void cfg_label(const te_cfg *x, char *label, size_t n) {
  snprintf(label, n, "%s L=%d m=%d %s", x->key->key.recipe, (int)x->key->key.history_len,
           (int)x->key->key.margin, fp8_amax_compute_name(x->key->key.amax_compute));
}

/* ------------------------------------------------------------------ the tables */

/* The comparability sentence of a trace from TE's debug log: which tensors TE's logged values
 * can be held against a replay for (te_comparable), with what this log holds; what (TE's
 * scale, TE's overflows%) is being compared. rows, nc: the comparable and the other rows. */
static void comparable_words(const rep_t *r, fp8_doc *d, const char *what, int64_t rows,
                             int64_t nc) {
  if (!nc) return;
  char logged[1024], spans[8];
  rep_te_interval_words(r, logged, sizeof logged, spans, sizeof spans);
  size_t n1 = 0;
  for (size_t k = 0; k < r->run.nte_tensors; k++) n1 += r->run.te_tensor_intervals[k] == 1;
  char here[96] = "";
  if (r->run.nte_tensors)
    snprintf(here, sizeof here, " (%zu of the log's %zu tensors)", n1, r->run.nte_tensors);
  fp8_doc_markdownf(d, "%s can be held against a replay only for the tensors whose `cur_amax` "
                    "TE logged at every iteration%s: TE's delayed scaling puts an amax into its "
                    "history at every iteration, a replay of a tensor logged every k > 1 "
                    "iterations has one in k of them, so its replayed history misses TE's "
                    "unlogged iterations and no replayed configuration can reproduce TE's "
                    "scale. This log's tensors were logged %s. %s",
                    what, here, logged,
                    rows ? "The rows of the tensors logged less often are counted apart, in the "
                           "last column, and not compared."
                         : "No tensor was logged at every iteration here, so nothing is "
                           "compared: the table counts the rows only.");
}

/* The table of rows that cannot be compared (no tensor logged at every iteration). */
static void not_compared_table(const rep_t *r, fp8_doc *d, const char *col, int scale) {
  const char *hdr[] = {"configuration", col};
  fp8_doc_table_begin(d, 2, hdr, "lr");
  for (size_t c = 0; c < r->nte; c++) {
    char label[200], v[32];
    cfg_label(&r->te[c], label, sizeof label);
    snprintf(v, sizeof v, "%lld", (long long)(scale ? r->te[c].nc_rows : r->te[c].nc_orows));
    const char *cells[] = {label, v};
    fp8_doc_table_row(d, cells);
  }
}

static void add_scale_table(const rep_t *r, fp8_doc *d) {
  size_t n = r->nte;
  const te_cfg *cs = r->te;
  int64_t rows = 0, nc = 0;
  for (size_t c = 0; c < n; c++) {
    rows += cs[c].rows;
    nc += cs[c].nc_rows;
  }
  if (!rows && !nc) return; /* the log has overflows% but no scale_inv */
  if (r->run.has_te_log) {
    fp8_doc_markdown(d, "The trace carries TransformerEngine's own scale from its debug log "
                        "(`scale_inv_min` / `scale_inv_max` of the recipe trained with, TE's "
                        "inverse scale printed with four decimals; amax.csv's te_scale = 1 / "
                        "it).");
    comparable_words(r, d, "TE's scale", rows, nc);
    if (!rows) {
      not_compared_table(r, d, "rows with TE's scale (not compared)", 1);
      return;
    }
    fp8_doc_markdownf(d, "Per delayed configuration: the stream.csv rows %s that carry TE's "
                      "scale, those where the replayed 1 / scale is not within half a unit of "
                      "the fourth decimal of TE's scale_inv (%s), the largest relative "
                      "difference of the scales, and the first mismatch (step, then tensor "
                      "order)%s. The configuration TE ran should show no mismatch%s (but in the "
                      "first history_len iterations of a log that starts after TE's first "
                      "iteration: TE's history then holds amaxes the log does not).",
                      nc ? "of the tensors logged every iteration" : "",
                      "fp8lab's definition: the scale used at the step, from the amaxes of the "
                      "earlier steps; TE's: the scale_inv of the cast logged at that iteration",
                      nc ? ", then the rows of the tensors logged less often (not compared)" : "",
                      nc ? " on the tensors logged every iteration" : "");
  } else
    fp8_doc_markdown(d, "The trace recorded the scale TransformerEngine cast each tensor with "
                        "(amax.csv's te_scale, per step and micro-batch). Per delayed "
                        "configuration: the stream.csv rows that carry it, those where the "
                        "replayed scale differs from it (exact float32 comparison: the replay is "
                        "bit-exact, so one differing bit counts), the largest relative difference "
                        "|TE - replay| / replay, and the first mismatch (step, micro-batch, then "
                        "tensor order). The configuration TE ran should show no mismatch.");
  const char *hdr[] = {"configuration", "rows with TE's scale", "mismatches",
                       "largest relative difference", "first mismatch",
                       "rows of tensors logged less often (not compared)"};
  size_t ncols = nc ? 6 : 5;
  fp8_doc_table_begin(d, ncols, hdr, nc ? "lrrrlr" : "lrrrl");
  for (size_t c = 0; c < n; c++) {
    const te_cfg *x = &cs[c];
    char label[200], nrows[32], mis[32], rel[32], first[400], other[32];
    cfg_label(x, label, sizeof label);
    snprintf(nrows, sizeof nrows, "%lld", (long long)x->rows);
    snprintf(mis, sizeof mis, "%lld", (long long)x->mismatches);
    snprintf(rel, sizeof rel, "%.3g", x->max_rel);
    snprintf(other, sizeof other, "%lld", (long long)x->nc_rows);
    if (x->first)
      snprintf(first, sizeof first, "%s step %lld micro %lld", x->first->tensor,
               (long long)x->first->step[x->first_i], (long long)x->first->micro[x->first_i]);
    else
      snprintf(first, sizeof first, "none");
    const char *cells[] = {label, nrows, mis, rel, first, other};
    fp8_doc_table_row(d, cells);
  }
}

/* TE's overflows% beside the replay's overflowed largest element (te_overflows.csv). */
static void add_overflow_table(const rep_t *r, fp8_doc *d) {
  int64_t rows = 0, nc = 0;
  for (size_t c = 0; c < r->nte; c++) {
    rows += r->te[c].orows;
    nc += r->te[c].nc_orows;
  }
  if (!rows && !nc) return;
  char cols[400] = "";
  if (rows)
    snprintf(cols, sizeof cols, " beside the replay, per delayed configuration: the stream.csv "
             "rows at a logged iteration%s, those where TE saw an overflow (`overflows%%` > 0), "
             "those whose largest element overflowed in the replay, and the rows where the two "
             "disagree%s", nc ? " of the tensors logged every iteration" : "",
             nc ? ", then the rows of the tensors logged less often (not compared)" : "");
  fp8_doc_markdownf(d, "TransformerEngine's `overflows%%` (logged for the delayed recipe it "
                    "trained with, %zu values in the log)%s. TE's "
                    "definition: 100 x the elements with x > fp8_max x scale_inv or "
                    "x < -fp8_max x scale_inv, over all elements, summed over the iteration's "
                    "micro-batches, printed with four decimals (one element in more than "
                    "2,000,000 reads 0.0000: TE's count can only be lower). fp8lab's: the "
                    "element's RN32(x x scale) past fp8_max; the stream holds the amax only, "
                    "so a row overflowed when RN32(amax x scale) > fp8_max, which is when "
                    "any element did.%s Value rates (TE's `underflows%%`) and `mse` need the "
                    "tensors themselves: capture snapshots (docs/capture.md) to compare them.",
                    r->te_overflow_rows, cols,
                    !rows ? ""
                    : nc ? " The configuration TE ran should show no disagreement on the tensors "
                           "logged every iteration but the 0.0000 ones."
                         : " The configuration TE ran should show no disagreement but the "
                           "0.0000 ones.");
  int64_t said = 0; /* the scale table above said which tensors are comparable */
  for (size_t c = 0; c < r->nte; c++) said += r->te[c].rows + r->te[c].nc_rows;
  if (nc && said)
    fp8_doc_markdownf(d, "TE counted its `overflows%%` with its own scale, which no replay of a "
                      "tensor logged less often than every iteration reproduces (above): %s",
                      rows ? "the rows of those tensors are counted apart, in the last column, "
                             "and not compared."
                           : "nothing is compared here, the table counts the rows only.");
  else
    comparable_words(r, d, "TE's `overflows%`, counted with TE's scale,", rows, nc);
  if (!rows) {
    not_compared_table(r, d, "rows at logged iterations (not compared)", 0);
    return;
  }
  const char *hdr[] = {"configuration", "rows at logged iterations", "TE overflowed",
                       "replay overflowed", "disagree", "first disagreement",
                       "rows of tensors logged less often (not compared)"};
  fp8_doc_table_begin(d, nc ? 7 : 6, hdr, nc ? "lrrrrlr" : "lrrrrl");
  for (size_t c = 0; c < r->nte; c++) {
    const te_cfg *x = &r->te[c];
    char label[200], v[5][32], first[400];
    cfg_label(x, label, sizeof label);
    const int64_t nums[5] = {x->orows, x->te_over, x->rp_over, x->odis, x->nc_orows};
    for (int k = 0; k < 5; k++) snprintf(v[k], sizeof v[k], "%lld", (long long)nums[k]);
    if (x->ofirst)
      snprintf(first, sizeof first, "%s step %lld", x->ofirst->tensor,
               (long long)x->ofirst->step[x->ofirst_i]);
    else
      snprintf(first, sizeof first, "none");
    const char *cells[] = {label, v[0], v[1], v[2], v[3], first, v[4]};
    fp8_doc_table_row(d, cells);
  }
}

void rep_add_te_check(const rep_t *r, fp8_doc *d) {
  if (!r->te) return; /* neither TE's scale nor its overflows% in the trace */
  fp8_doc_heading(d, 2, "Held against TransformerEngine");
  add_scale_table(r, d);
  add_overflow_table(r, d);
}
