/* closedloop_stats.c: the open loop against the closed loop (closedloop_stats.h; the
 * definitions: docs/semantics.md, "Open loop against closed loop"). Loss gaps from loss.csv and
 * eval.csv; the rates, drift and overflow events from the open run's and each closed replay's
 * steps.csv and stream.csv, rows matched by (tensor, step, micro) within one label; Spearman's
 * rho with GSL; the self-check of each replay's scale against the te_scale it was given. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_statistics_double.h>

#include "closedloop_stats.h"
#include "results.h" /* fp8_overshoot */
#include "util.h"    /* fp8_errorf, fp8_esc, fp8_grow */

static int nomem(char *err, size_t errlen) {
  return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
}

static double ratio(double num, double den) { return den > 0 ? num / den : NAN; }

/* ------------------------------------------------------------------ loss */

/* The mean loss over the final window [ceil(0.9 steps), steps) of t into *out. */
static int final_loss(const fp8_loss_table *t, int64_t steps, double *out, char *err,
                      size_t errlen) {
  int64_t from = (9 * steps + 9) / 10; /* ceil(0.9 * steps), exactly */
  double sum = 0;
  size_t n = 0;
  for (size_t i = 0; i < t->n; i++)
    if (t->step[i] >= from && t->step[i] < steps) {
      sum += t->a[i];
      n++;
    }
  if (!n)
    return fp8_errorf(FP8_EFORMAT, err, errlen,
                      "%s: no step in the final window %lld..%lld (the last 10%% of the study's "
                      "%lld steps)",
                      t->path, (long long)from, (long long)steps - 1, (long long)steps);
  *out = sum / (double)n;
  return FP8_OK;
}

void fp8_closedloop_smooth(const fp8_loss_table *t, size_t window, double *out) {
  double sum = 0;
  for (size_t i = 0; i < t->n; i++) {
    sum += t->a[i];
    if (i >= window) sum -= t->a[i - window];
    size_t k = i + 1 < window ? i + 1 : window;
    /* recomputed when the running sum has met a non-finite loss (inf - inf) */
    if (!isfinite(sum)) {
      sum = 0;
      for (size_t j = i + 1 - k; j <= i; j++) sum += t->a[j];
    }
    out[i] = sum / (double)k;
  }
}

static int loss_rows(const fp8_cl_inputs *in, fp8_cl_result *r, char *err, size_t errlen) {
  const fp8_study *st = in->study;
  size_t nl = st->nlabels, ns = st->nseeds;
  r->t.loss = calloc((nl + 1) * ns, sizeof *r->t.loss);
  if (!r->t.loss) return nomem(err, errlen);
  double hp_sum = 0;
  for (size_t k = 0; k < (nl + 1) * ns; k++) {
    size_t l = k / ns, s = k % ns; /* l 0: hp; l > 0: label l - 1 */
    const fp8_loss_table *loss = l ? &in->cl_loss[(l - 1) * ns + s] : &in->hp_loss[s];
    const fp8_loss_table *ev = l ? &in->cl_eval[(l - 1) * ns + s] : &in->hp_eval[s];
    fp8_cl_loss_row *row = &r->t.loss[k];
    row->label = l ? st->labels[l - 1] : "hp";
    row->seed = st->seeds[s];
    int rc = final_loss(loss, st->steps, &row->final_loss, err, errlen);
    if (rc) return rc;
    row->eval_loss_hp = ev->a[ev->n - 1];
    row->eval_loss_fp8 = ev->b[ev->n - 1];
    if (!l) hp_sum += row->final_loss;
    r->t.nloss++;
  }
  r->hp_mean = hp_sum / (double)ns;
  r->band_lo = INFINITY;
  r->band_hi = -INFINITY;
  for (size_t k = 0; k < r->t.nloss; k++) {
    fp8_cl_loss_row *row = &r->t.loss[k];
    row->gap = row->final_loss - r->hp_mean;
    if (k < ns) {
      r->band_lo = fmin(r->band_lo, row->gap);
      r->band_hi = fmax(r->band_hi, row->gap);
    }
  }
  for (size_t l = 0; l < nl; l++) {
    fp8_cl_label_summary *ls = &r->labels[l];
    double gsum = 0, ehp = 0, efp8 = 0;
    ls->gap_min = INFINITY;
    ls->gap_max = -INFINITY;
    for (size_t s = 0; s < ns; s++) {
      const fp8_cl_loss_row *row = &r->t.loss[(l + 1) * ns + s];
      gsum += row->gap;
      ls->gap_min = fmin(ls->gap_min, row->gap);
      ls->gap_max = fmax(ls->gap_max, row->gap);
      ehp += row->eval_loss_hp;
      efp8 += row->eval_loss_fp8;
    }
    ls->mean_gap = gsum / (double)ns;
    ls->inside_band = ls->mean_gap >= r->band_lo && ls->mean_gap <= r->band_hi;
    ls->eval_hp = ehp / (double)ns;
    ls->eval_fp8 = efp8 / (double)ns;
  }
  return FP8_OK;
}

/* ------------------------------------------------------------------ matching within a label */

/* The index of the steps.csv group of (tensor, label), or -1; FP8_EFORMAT when the label has
 * two configurations of the tensor. */
static int find_group(const fp8_steps_table *t, const char *tensor, const char *label,
                      ptrdiff_t *out, char *err, size_t errlen) {
  *out = -1;
  for (size_t g = 0; g < t->ngroups; g++) {
    if (strcmp(t->groups[g].tensor, tensor) || strcmp(t->groups[g].key.recipe, label)) continue;
    if (*out >= 0) {
      char a[FP8_ESC_LEN], b[FP8_ESC_LEN];
      return fp8_errorf(FP8_EFORMAT, err, errlen,
                        "%s: label %s has two configurations of tensor %s (the comparison takes "
                        "one per tensor and label)",
                        t->path, fp8_esc(label, a, sizeof a), fp8_esc(tensor, b, sizeof b));
    }
    *out = (ptrdiff_t)g;
  }
  return FP8_OK;
}

static int find_series(const fp8_stream_table *t, const char *tensor, const char *label,
                       const fp8_stream_series **out, char *err, size_t errlen) {
  *out = NULL;
  for (size_t k = 0; t && k < t->nseries; k++) {
    const fp8_stream_series *s = &t->series[k];
    if (strcmp(s->tensor, tensor) || strcmp(s->key.recipe, label)) continue;
    if (*out) {
      char a[FP8_ESC_LEN], b[FP8_ESC_LEN];
      return fp8_errorf(FP8_EFORMAT, err, errlen,
                        "%s: label %s has two delayed configurations of tensor %s (the "
                        "comparison takes one per tensor and label)",
                        t->path, fp8_esc(label, a, sizeof a), fp8_esc(tensor, b, sizeof b));
    }
    *out = s;
  }
  return FP8_OK;
}

/* Whether a run has rows of the label (steps.csv or stream.csv). */
static int has_label(const fp8_cl_run *run, const char *label) {
  for (size_t g = 0; g < run->steps->ngroups; g++)
    if (strcmp(run->steps->groups[g].key.recipe, label) == 0) return 1;
  for (size_t k = 0; run->stream && k < run->stream->nseries; k++)
    if (strcmp(run->stream->series[k].key.recipe, label) == 0) return 1;
  return 0;
}

/* The sums of one side's matched steps.csv rows. */
typedef struct {
  double clipped, underflow, finite;
  int64_t rows, share_num, share_den;
} side_sums;

static void add_step_row(side_sums *a, const fp8_step_row *row) {
  a->clipped += (double)row->clipped;
  a->underflow += (double)row->underflow;
  a->finite += (double)(row->n - row->nonfinite);
  a->rows++;
}

/* steps.csv: the (tensor, step) pairs of the label present in both runs. */
static int match_steps(const fp8_cl_run *o, const fp8_cl_run *c, const char *label,
                       side_sums *so, side_sums *sc, char *err, size_t errlen) {
  for (size_t g = 0; g < o->steps->ngroups; g++) {
    const fp8_steps_group *og = &o->steps->groups[g];
    if (strcmp(og->key.recipe, label)) continue;
    ptrdiff_t og_check, cg;
    int rc = find_group(o->steps, og->tensor, label, &og_check, err, errlen);
    if (!rc) rc = find_group(c->steps, og->tensor, label, &cg, err, errlen);
    if (rc) return rc;
    if (cg < 0) continue;
    const fp8_steps_group *cgp = &c->steps->groups[cg];
    size_t i = 0, j = 0;
    while (i < og->nrows && j < cgp->nrows) {
      const fp8_step_row *ro = fp8_steps_csv_group_row(o->steps, og, i);
      const fp8_step_row *rc_ = fp8_steps_csv_group_row(c->steps, cgp, j);
      if (ro->step < rc_->step) {
        i++;
      } else if (ro->step > rc_->step) {
        j++;
      } else {
        add_step_row(so, ro);
        add_step_row(sc, rc_);
        i++;
        j++;
      }
    }
  }
  return FP8_OK;
}

/* What the stream's matched rows feed besides the shares: the events per period and the
 * drift values (the open_seed's run only). */
typedef struct {
  const fp8_study *st;
  int64_t ev[4][3];            /* period (before, during, after, all) x (open, closed, both) */
  size_t nd, capd;
  double *dstep, *dval;        /* drift: step, value */
  int nomem;
} stream_acc;

static int period_of(const fp8_study *st, int64_t step) {
  if (!st->has_spike) return 3;
  return step < st->spike_first ? 0 : step <= st->spike_last ? 1 : 2;
}

static void share_add(side_sums *a, double overshoot, float amax) {
  if (amax > 0 && isfinite(overshoot)) {
    a->share_den++;
    a->share_num += overshoot > 0;
  }
}

static void stream_pair(const fp8_stream_series *os, size_t i, const fp8_stream_series *cs,
                        size_t j, side_sums *so, side_sums *sc, stream_acc *acc) {
  double oo = fp8_overshoot(os->amax[i], os->scale[i], os->key.format);
  double oc = fp8_overshoot(cs->amax[j], cs->scale[j], cs->key.format);
  share_add(so, oo, os->amax[i]);
  share_add(sc, oc, cs->amax[j]);
  if (!acc) return;
  int p = period_of(acc->st, os->step[i]);
  for (int k = 0; k < 2; k++) { /* its period, and `all` */
    int q = k ? 3 : p;
    if (k && p == 3) break;
    acc->ev[q][0] += oo > 0;
    acc->ev[q][1] += oc > 0;
    acc->ev[q][2] += oo > 0 && oc > 0;
  }
  float ao = os->amax[i], ac = cs->amax[j];
  if (ao > 0 && isfinite(ao) && isfinite(ac)) {
    if (acc->nd == acc->capd) {
      size_t cap = acc->capd;
      double *s = fp8_grow(acc->dstep, acc->nd, &cap, sizeof *s, 1024);
      if (s) acc->dstep = s;
      double *v = s ? realloc(acc->dval, cap * sizeof *v) : NULL;
      if (!v) {
        acc->nomem = 1;
        return;
      }
      acc->dval = v;
      acc->capd = cap;
    }
    acc->dstep[acc->nd] = (double)os->step[i];
    acc->dval[acc->nd++] = fabs((double)ac / (double)ao - 1.0);
  }
}

/* stream.csv: the (tensor, step, micro) rows of the label present in both runs. */
static int match_stream(const fp8_cl_run *o, const fp8_cl_run *c, const char *label,
                        side_sums *so, side_sums *sc, stream_acc *acc, char *err, size_t errlen) {
  for (size_t k = 0; o->stream && c->stream && k < o->stream->nseries; k++) {
    const fp8_stream_series *os = &o->stream->series[k], *chk, *cs;
    if (strcmp(os->key.recipe, label)) continue;
    int rc = find_series(o->stream, os->tensor, label, &chk, err, errlen);
    if (!rc) rc = find_series(c->stream, os->tensor, label, &cs, err, errlen);
    if (rc) return rc;
    if (!cs) continue;
    size_t i = 0, j = 0;
    while (i < os->n && j < cs->n) {
      int64_t d = os->step[i] != cs->step[j] ? os->step[i] - cs->step[j]
                                             : os->micro[i] - cs->micro[j];
      if (d < 0) {
        i++;
      } else if (d > 0) {
        j++;
      } else {
        stream_pair(os, i++, cs, j++, so, sc, acc);
      }
    }
    if (acc && acc->nomem) return nomem(err, errlen);
  }
  return FP8_OK;
}

static void rates_row(fp8_cl_rates_row *r, const char *label, const char *source, int64_t seed,
                      const side_sums *a) {
  r->label = label;
  r->source = source;
  r->seed = seed;
  r->clipped_rate = ratio(a->clipped, a->finite);
  r->underflow_rate = ratio(a->underflow, a->finite);
  r->overflow_step_share = ratio((double)a->share_num, (double)a->share_den);
  r->rows = a->rows;
  r->stream_rows = a->share_den;
}

/* ------------------------------------------------------------------ drift, events */

typedef struct {
  double step, val;
} drift_pt;

static int cmp_drift(const void *a, const void *b) {
  const drift_pt *x = a, *y = b;
  if (x->step != y->step) return x->step < y->step ? -1 : 1;
  return (x->val > y->val) - (x->val < y->val);
}

/* The label's drift rows (per step: median and p90 over its matched rows) appended to r. */
static int drift_rows(fp8_cl_result *r, size_t l, const char *label, stream_acc *acc,
                      size_t *cap, char *err, size_t errlen) {
  fp8_cl_label_summary *ls = &r->labels[l];
  ls->diverge_step = -1;
  ls->worst_drift = NAN;
  ls->worst_drift_step = -1;
  if (!acc->nd) return FP8_OK;
  drift_pt *pts = malloc(acc->nd * sizeof *pts);
  double *vals = malloc(acc->nd * sizeof *vals);
  if (!pts || !vals) {
    free(pts);
    free(vals);
    return nomem(err, errlen);
  }
  for (size_t i = 0; i < acc->nd; i++) pts[i] = (drift_pt){acc->dstep[i], acc->dval[i]};
  qsort(pts, acc->nd, sizeof *pts, cmp_drift);
  int rc = FP8_OK;
  for (size_t i = 0; i < acc->nd;) {
    size_t j = i;
    while (j < acc->nd && pts[j].step == pts[i].step) {
      vals[j - i] = pts[j].val;
      j++;
    }
    fp8_cl_drift_row *g = fp8_grow(r->t.drift, r->t.ndrift, cap, sizeof *g, 256);
    if (!g) {
      rc = nomem(err, errlen);
      break;
    }
    r->t.drift = g;
    fp8_cl_drift_row *row = &g[r->t.ndrift++];
    row->label = label;
    row->step = (int64_t)pts[i].step;
    row->tensors = (int64_t)(j - i);
    row->median_drift = gsl_stats_median_from_sorted_data(vals, 1, j - i);
    row->p90_drift = gsl_stats_quantile_from_sorted_data(vals, 1, j - i, 0.9);
    if (ls->diverge_step < 0 && row->median_drift > FP8_CL_DRIFT_LIMIT)
      ls->diverge_step = row->step;
    if (isnan(ls->worst_drift) || row->median_drift > ls->worst_drift) {
      ls->worst_drift = row->median_drift;
      ls->worst_drift_step = row->step;
    }
    i = j;
  }
  free(pts);
  free(vals);
  return rc;
}

static void events_rows(fp8_cl_result *r, const fp8_study *st, const char *label,
                        const stream_acc *acc) {
  static const char *const PERIODS[4] = {"before", "during", "after", "all"};
  for (int p = st->has_spike ? 0 : 3; p < 4; p++) {
    fp8_cl_events_row *e = &r->t.events[r->t.nevents++];
    e->label = label;
    e->period = PERIODS[p];
    e->open_events = acc->ev[p][0];
    e->closed_events = acc->ev[p][1];
    e->both = acc->ev[p][2];
    e->precision = ratio((double)e->both, (double)e->open_events);
    e->recall = ratio((double)e->both, (double)e->closed_events);
  }
}

/* ------------------------------------------------------------------ per label */

static int label_rows(const fp8_cl_inputs *in, fp8_cl_result *r, size_t l, size_t *dcap,
                      char *err, size_t errlen) {
  const fp8_study *st = in->study;
  const char *label = st->labels[l];
  char shown[FP8_ESC_LEN];
  if (!has_label(&in->open, label))
    return fp8_errorf(FP8_EFORMAT, err, errlen,
                      "%s: no row of label %s of study.ini (the open run replays every label: "
                      "its recipe column)",
                      in->open.steps->path, fp8_esc(label, shown, sizeof shown));
  stream_acc acc = {.st = st};
  int rc = FP8_OK;
  for (size_t s = 0; !rc && s < st->nseeds; s++) {
    const fp8_cl_run *c = &in->closed[l * st->nseeds + s];
    if (!has_label(c, label)) {
      rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s: no row of label %s", c->steps->path,
                      fp8_esc(label, shown, sizeof shown));
      break;
    }
    int is_open = st->seeds[s] == st->open_seed;
    side_sums so = {0}, sc = {0};
    rc = match_steps(&in->open, c, label, &so, &sc, err, errlen);
    if (!rc) rc = match_stream(&in->open, c, label, &so, &sc, is_open ? &acc : NULL, err, errlen);
    if (rc) break;
    if (is_open) rates_row(&r->t.rates[r->t.nrates++], label, "open", st->seeds[s], &so);
    rates_row(&r->t.rates[r->t.nrates++], label, "closed", st->seeds[s], &sc);
    r->labels[l].has_stream |= sc.share_den > 0 || so.share_den > 0;
  }
  if (!rc) rc = drift_rows(r, l, label, &acc, dcap, err, errlen);
  if (!rc) events_rows(r, st, label, &acc);
  free(acc.dstep);
  free(acc.dval);
  return rc;
}

/* ------------------------------------------------------------------ Spearman, self-check */

static int spearman_rows(fp8_cl_result *r, const fp8_study *st, char *err, size_t errlen) {
  static const char *const RATES[3] = {"clipped_rate", "underflow_rate", "overflow_step_share"};
  size_t nl = st->nlabels;
  double *x = malloc(4 * (nl + 1) * sizeof *x);
  if (!x) return nomem(err, errlen);
  double *y = x + nl + 1, *work = y + nl + 1;
  for (int k = 0; k < 3; k++) {
    size_t n = 0;
    for (size_t l = 0; l < nl; l++) {
      double o = NAN, c = NAN;
      for (size_t i = 0; i < r->t.nrates; i++) {
        const fp8_cl_rates_row *q = &r->t.rates[i];
        if (q->label != st->labels[l] || q->seed != st->open_seed) continue;
        double v = k == 0 ? q->clipped_rate : k == 1 ? q->underflow_rate : q->overflow_step_share;
        *(strcmp(q->source, "open") == 0 ? &o : &c) = v;
      }
      if (isfinite(o) && isfinite(c)) {
        x[n] = o;
        y[n++] = c;
      }
    }
    fp8_cl_spearman_row *row = &r->t.spearman[r->t.nspearman++];
    row->rate = RATES[k];
    row->labels = (int64_t)n;
    row->rho = n >= 3 ? gsl_stats_spearman(x, 1, y, 1, n, work) : NAN;
  }
  free(x);
  return FP8_OK;
}

static void selfcheck_row(fp8_cl_result *r, const fp8_study *st, size_t k, const fp8_cl_run *c) {
  fp8_cl_selfcheck_row *row = &r->t.selfcheck[r->t.nselfcheck++];
  fp8_cl_mismatch *m = &r->mismatch[k];
  row->label = st->labels[k / st->nseeds];
  row->seed = st->seeds[k % st->nseeds];
  m->step = m->micro = -1;
  for (size_t q = 0; c->stream && q < c->stream->nseries; q++) {
    const fp8_stream_series *s = &c->stream->series[q];
    for (size_t i = 0; i < s->n; i++) {
      if (s->te_scale[i] == 0) continue; /* none given */
      row->te_rows++;
      if (s->scale[i] == s->te_scale[i]) continue;
      /* the first in stream.csv's order: step, micro, then the series' order */
      if (row->differ++ == 0 || s->step[i] < m->step ||
          (s->step[i] == m->step && s->micro[i] < m->micro)) {
        m->step = s->step[i];
        m->micro = s->micro[i];
        snprintf(m->tensor, sizeof m->tensor, "%s", s->tensor);
        m->scale = s->scale[i];
        m->te_scale = s->te_scale[i];
      }
    }
  }
  r->runs_differing += row->differ > 0;
}

/* ------------------------------------------------------------------ everything */

int fp8_closedloop_compute(const fp8_cl_inputs *in, fp8_cl_result *out, char *err,
                           size_t errlen) {
  memset(out, 0, sizeof *out);
  const fp8_study *st = in->study;
  size_t nl = st->nlabels, ns = st->nseeds;
  out->labels = calloc(nl, sizeof *out->labels);
  out->mismatch = calloc(nl * ns, sizeof *out->mismatch);
  out->t.rates = calloc(nl * (ns + 1), sizeof *out->t.rates);
  out->t.events = calloc(nl * 4, sizeof *out->t.events);
  out->t.spearman = calloc(3, sizeof *out->t.spearman);
  out->t.selfcheck = calloc(nl * ns, sizeof *out->t.selfcheck);
  int rc = FP8_OK;
  if (!out->labels || !out->mismatch || !out->t.rates || !out->t.events || !out->t.spearman ||
      !out->t.selfcheck)
    rc = nomem(err, errlen);
  if (!rc) rc = loss_rows(in, out, err, errlen);
  size_t dcap = 0;
  for (size_t l = 0; !rc && l < nl; l++) rc = label_rows(in, out, l, &dcap, err, errlen);
  if (!rc) rc = spearman_rows(out, st, err, errlen);
  for (size_t k = 0; !rc && k < nl * ns; k++) selfcheck_row(out, st, k, &in->closed[k]);
  if (rc) fp8_closedloop_result_free(out);
  return rc;
}

void fp8_closedloop_result_free(fp8_cl_result *r) {
  if (!r) return;
  free(r->t.loss);
  free(r->t.rates);
  free(r->t.drift);
  free(r->t.events);
  free(r->t.spearman);
  free(r->t.selfcheck);
  free(r->labels);
  free(r->mismatch);
  memset(r, 0, sizeof *r);
}
