/* report_te.c: the report's "Held against TransformerEngine" section (rep_add_te_check): where
 * the trace gave TE's own scale (amax.csv's te_scale, carried into stream.csv), how often the
 * replayed scale differs from it, per delayed configuration. The replay is bit-exact by design,
 * so the comparison is exact (float32 equality): one differing bit is a mismatch.
 * Without any te_scale in stream.csv the section is absent (docs/semantics.md, issue 17). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report_internal.h"

/* One delayed configuration's totals (the series' key without tensor and format: a hybrid
 * configuration spans E4M3 and E5M2 tensors, as elsewhere in the report). */
typedef struct rep_te {
  const fp8_stream_series *key; /* its first series */
  int64_t rows, mismatches;
  double max_rel;                /* largest |te - replay| / replay over the rows with te */
  const fp8_stream_series *first; /* the first mismatch (step, micro, then tensor order) */
  size_t first_i;
} te_cfg;

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
static void te_add(te_cfg *c, const fp8_stream_series *s, const fp8_stream_series *at,
                   int printed) {
  for (size_t i = 0; i < s->n; i++) {
    float te = s->te_scale[i], sc = s->scale[i];
    if (!(te > 0.0f)) continue; /* not given */
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

typedef struct {
  const fp8_stream_table *t;
  te_cfg *cs;
  size_t n;
  int printed; /* TE's scales from its debug log's four decimals (run.json trace.te_log) */
} te_ctx;

static int te_one(const fp8_stream_series *s, size_t k, void *ctx) {
  te_ctx *x = ctx;
  const fp8_stream_series *at = &x->t->series[k];
  size_t c = 0;
  while (c < x->n && !same_cfg(x->cs[c].key, at)) c++; /* listed by te_totals */
  te_add(&x->cs[c], s, at, x->printed);
  return 0;
}

/* The configurations in stream.csv order (first appearance), with their totals over the
 * series that carry TE's scale; *n of them. NULL when stream.csv has no te_scale at all (or out of
 * memory, or stream.npy cannot be read again: the section is left out). */
static te_cfg *te_totals(const fp8_stream_table *t, size_t *n, int printed) {
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
    if (s->te_scale == prev && k) {
      want[k] = want[k - 1];
      continue;
    }
    prev = s->te_scale;
    for (size_t i = 0; i < s->n && !want[k]; i++) want[k] = s->te_scale[i] > 0.0f;
    any |= want[k];
  }
  te_ctx x = {t, cs, *n, printed};
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

void rep_te_totals(rep_t *r) {
  r->nte = 0;
  r->te = r->have_stream ? te_totals(&r->stream, &r->nte, r->run.has_te_log) : NULL;
}

void rep_add_te_check(const rep_t *r, fp8_doc *d) {
  size_t n = r->nte;
  const te_cfg *cs = r->te;
  if (!cs) return;
  fp8_doc_heading(d, 2, "Held against TransformerEngine");
  char sparse[200] = "";
  if (r->run.te_interval > 1)
    snprintf(sparse, sizeof sparse, "; here the log holds one iteration in %lld, so the "
             "replayed history sees fewer amaxes than TE's did and mismatches are expected",
             (long long)r->run.te_interval);
  if (r->run.has_te_log)
    fp8_doc_markdownf(d, "The trace carries TransformerEngine's own scale from its debug log "
                      "(`scale_inv_min` / `scale_inv_max` of the recipe trained with, TE's "
                      "inverse scale printed with four decimals; amax.csv's te_scale = 1 / "
                      "it). Per delayed configuration: the stream.csv rows that carry it, "
                      "those where the replayed 1 / scale is not within half a unit of the "
                      "fourth decimal of TE's scale_inv (%s), the largest relative difference "
                      "of the scales, and the first mismatch (step, then tensor order). The "
                      "configuration TE ran should show no mismatch%s.",
                      "fp8lab's definition: the scale used at the step, from the amaxes of the "
                      "earlier steps; TE's: the scale_inv of the cast logged at that iteration",
                      sparse);
  else
  fp8_doc_markdown(d, "The trace recorded the scale TransformerEngine cast each tensor with "
                      "(amax.csv's te_scale, per step and micro-batch). Per delayed "
                      "configuration: the stream.csv rows that carry it, those where the "
                      "replayed scale differs from it (exact float32 comparison: the replay is "
                      "bit-exact, so one differing bit counts), the largest relative difference "
                      "|TE - replay| / replay, and the first mismatch (step, micro-batch, then "
                      "tensor order). The configuration TE ran should show no mismatch.");
  const char *hdr[] = {"configuration", "rows with TE's scale", "mismatches",
                       "largest relative difference", "first mismatch"};
  fp8_doc_table_begin(d, 5, hdr, "lrrrl");
  for (size_t c = 0; c < n; c++) {
    const te_cfg *x = &cs[c];
    char label[200], rows[32], mis[32], rel[32], first[400];
    snprintf(label, sizeof label, "%s L=%d m=%d %s", x->key->key.recipe,
             (int)x->key->key.history_len, (int)x->key->key.margin,
             fp8_amax_compute_name(x->key->key.amax_compute));
    snprintf(rows, sizeof rows, "%lld", (long long)x->rows);
    snprintf(mis, sizeof mis, "%lld", (long long)x->mismatches);
    snprintf(rel, sizeof rel, "%.3g", x->max_rel);
    if (x->first)
      snprintf(first, sizeof first, "%s step %lld micro %lld", x->first->tensor,
               (long long)x->first->step[x->first_i], (long long)x->first->micro[x->first_i]);
    else
      snprintf(first, sizeof first, "none");
    const char *cells[] = {label, rows, mis, rel, first};
    fp8_doc_table_row(d, cells);
  }
}
