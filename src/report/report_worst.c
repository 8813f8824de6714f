/* report_worst.c: the Findings' worst event (issue 42 point 4; docs/semantics.md "The worst
 * event"): chosen over every cast of the replay (each non-warm-up step, or micro-batch, of the
 * reference configuration's stream), snapshot steps or not, by the overshoot of the largest
 * element that clipped; then, when another event, the snapshot step that lost the most (the
 * story's spike, rep_find_spike: what the values and the SNR measure), the tensors clipped at
 * its step, and how long its scale stayed stale. A fall of the SNR is worded so only when the
 * event cost at least REP_FALL_DB and more than one value. tests/report/test_findings.py
 * recomputes every number from the CSV files. */
#include "report_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "results.h" /* fp8_overshoot */

/* An SNR loss (dB, against current scaling) under which a cast is not said to have "fallen". */
#define REP_FALL_DB 1.0

/* The worst cast: the reference group, its step and micro-batch (-1: no micro-batches), amax
 * and scale, overshoot (binades), and the snapshot row that measured it (NULL: none). */
typedef struct {
  ptrdiff_t g;
  int64_t step, micro;
  double amax, scale, overshoot, fmax;
  const fp8_step_row *row;
} worst_t;

/* Ranks candidate c above the worst so far: the larger overshoot; ties to the measured one
 * (a snapshot row), then the more clipped values; else the first (group, then step order). */
static void worst_take(worst_t *w, const worst_t *c) {
  int better = w->g < 0 || c->overshoot > w->overshoot;
  if (!better && c->overshoot == w->overshoot) {
    int64_t a = c->row ? c->row->clipped : -1, b = w->row ? w->row->clipped : -1;
    better = a > b;
  }
  if (better) *w = *c;
}

static worst_t find_worst(const rep_t *r) {
  worst_t w = {.g = -1};
  for (size_t g = 0; g < r->tab.ngroups; g++) {
    if (r->gcfg[g] != (size_t)r->ref) continue;
    const fp8_stream_series *s = r->series ? r->series[g] : NULL;
    if (s && s->scale) {
      for (size_t i = 0; i < s->n; i++) {
        if (s->warmup[i] || !(s->amax[i] > 0.0f) ||
            !fp8_stream_clipped(s->amax[i], s->scale[i], s->key.format))
          continue;
        /* the snapshot row measures this cast when the cast is the step's first micro-batch:
         * the snapshot is cast with the scale in force there (docs/semantics.md) */
        int first = i == 0 || s->step[i - 1] != s->step[i];
        worst_t c = {.g = (ptrdiff_t)g, .step = s->step[i],
                     .micro = rep_micro(r) ? s->micro[i] : -1, .amax = s->amax[i],
                     .scale = s->scale[i], .fmax = fp8_format_max(s->key.format),
                     .overshoot = fp8_overshoot(s->amax[i], s->scale[i], s->key.format),
                     .row = first ? rep_row_at(r, (ptrdiff_t)g, s->step[i]) : NULL};
        if (c.row && c.row->warmup) c.row = NULL;
        worst_take(&w, &c);
      }
      continue;
    }
    const fp8_steps_group *gr = &r->tab.groups[g];
    for (size_t i = 0; i < gr->nrows; i++) {
      const fp8_step_row *row = fp8_steps_csv_group_row(&r->tab, gr, i);
      if (row->warmup || !(row->amax > 0) || row->clipped <= 0) continue;
      worst_t c = {.g = (ptrdiff_t)g, .step = row->step, .micro = -1, .amax = row->amax,
                   .scale = row->scale, .overshoot = row->overshoot,
                   .fmax = fp8_format_max(row->format), .row = row};
      worst_take(&w, &c);
    }
  }
  return w;
}

/* What a snapshot row measured: its clipped values and the SNR of its cast, against current
 * scaling's at the same tensor and step. "fell to" only for a loss of REP_FALL_DB or more with
 * more than one value clipped (issue 42 point 4: one value costing 0.1 dB is no fall). */
static void measured_words(const rep_t *r, const fp8_step_row *row, char *out, size_t n) {
  char b1[64], b2[64], vals[96];
  const fp8_steps_group *gr = &r->tab.groups[row->group];
  const fp8_step_row *cr =
      r->cur >= 0 ? rep_row_at(r, rep_group_of(r, gr->tensor, (size_t)r->cur), row->step) : NULL;
  rep_fmt_db(row->snr_db, b1, sizeof b1);
  if (row->clipped == 1)
    snprintf(vals, sizeof vals, "one value of %lld clipped", (long long)row->n);
  else
    snprintf(vals, sizeof vals, "%lld of %lld values clipped", (long long)row->clipped,
             (long long)row->n);
  if (cr && row->clipped > 1 && cr->snr_db - row->snr_db >= REP_FALL_DB)
    snprintf(out, n, "%s and the SNR of the cast fell to %s dB (current scaling: %s dB)", vals, b1,
             rep_fmt_db(cr->snr_db, b2, sizeof b2));
  else if (cr && cr->snr_db > row->snr_db)
    snprintf(out, n, "%s, SNR %s dB against %s dB under current scaling", vals, b1,
             rep_fmt_db(cr->snr_db, b2, sizeof b2));
  else if (cr)
    snprintf(out, n, "%s, yet the SNR of the cast did not suffer: %s dB, current scaling %s dB "
             "(the larger delayed scale gave the other values finer steps than the clipped ones "
             "cost)", vals, b1, rep_fmt_db(cr->snr_db, b2, sizeof b2));
  else
    snprintf(out, n, "%s and the SNR of the cast was %s dB", vals, b1);
}

/* The tensors that clipped more than one value at a snapshot step. */
static void spike_list(const rep_t *r, fp8_doc *d, int64_t step) {
  char list[2048] = "";
  size_t nl = 0, nhit = 0;
  for (size_t g = 0; g < r->tab.ngroups; g++) {
    if (r->gcfg[g] != (size_t)r->ref) continue;
    const fp8_step_row *x = rep_row_at(r, (ptrdiff_t)g, step);
    if (!x || x->warmup || x->clipped <= 1) continue;
    nhit++;
    nl += (size_t)snprintf(list + nl, nl < sizeof list ? sizeof list - nl : 0, "%s%s (%lld values)",
                           nhit > 1 ? ", " : "", r->tab.groups[g].tensor, (long long)x->clipped);
    if (nl >= sizeof list) nl = sizeof list - 1;
  }
  if (nhit)
    fp8_doc_markdownf(d, "At step %lld, %zu tensor%s clipped more than one value: %s.",
                      (long long)step, nhit, nhit == 1 ? "" : "s", list);
}

/* How long the spike tensor's scale stayed stale (snapshot rows after the spike). */
static void after_spike(const rep_t *r, fp8_doc *d) {
  const fp8_step_row *srow = &r->tab.rows[r->spike_row];
  const fp8_steps_group *gr = &r->tab.groups[r->spike_group];
  int64_t stale = 0, until = -1, n_after = 0, uf_after = 0, fin_after = 0, uf_before = 0,
          fin_before = 0;
  int running = 1;
  for (size_t i = 0; i < gr->nrows; i++) {
    const fp8_step_row *row = fp8_steps_csv_group_row(&r->tab, gr, i);
    if (row->warmup) continue;
    if (row->step < srow->step) {
      uf_before += row->underflow;
      fin_before += row->n - row->nonfinite;
      continue;
    }
    if (row->step == srow->step) continue;
    n_after++;
    double lag = fp8_analysis_scale_lag(row->scale, row->amax, row->format, row->margin);
    if (running && lag >= 1.0) {
      stale++;
      until = row->step;
      uf_after += row->underflow;
      fin_after += row->n - row->nonfinite;
    } else {
      running = 0;
    }
  }
  if (stale > 0 && fin_before > 0 && fin_after > 0)
    fp8_doc_markdownf(d,
                      "After the spike, the delayed scale of %s stayed at least 2x smaller than the "
                      "just-in-time one for %lld of the %lld following snapshot steps (through step "
                      "%lld%s): the history still holds the spike's amax. Its underflow rate (values "
                      "flushed to zero) went from %.3g before the spike to %.3g in those steps.",
                      gr->tensor, (long long)stale, (long long)n_after, (long long)until,
                      stale == n_after ? ", the end of the run" : "",
                      (double)uf_before / (double)fin_before, (double)uf_after / (double)fin_after);
}

int rep_add_worst(const rep_t *r, fp8_doc *d) {
  worst_t w = find_worst(r);
  const fp8_step_row *spike = r->spike_group >= 0 && r->tab.rows[r->spike_row].clipped > 0
                                  ? &r->tab.rows[r->spike_row] : NULL;
  char meas[600], at[96] = "";
  if (w.g >= 0) {
    const fp8_steps_group *gr = &r->tab.groups[w.g];
    const double fits = w.fmax / w.scale;
    if (w.micro >= 0) snprintf(at, sizeof at, ", micro-batch %lld", (long long)w.micro);
    if (w.row) {
      measured_words(r, w.row, meas, sizeof meas);
    } else {
      const fp8_step_row *row = rep_row_at(r, w.g, w.step);
      snprintf(meas, sizeof meas, "%s", r->stream_only || !row || row->warmup
               ? "not a snapshot step, so its clipped values were not counted"
               : "a later micro-batch of a snapshot step (the snapshot is cast with the first "
                 "one's scale), so its clipped values were not counted");
    }
    fp8_doc_markdownf(d,
                      "The worst event (the largest overshoot of a clipped %s, over every %s of "
                      "the replay): **%s at step %lld%s** reached amax %.4g while the delayed "
                      "scale, taken from earlier %s, could represent only %.4g (%.2f binades, "
                      "%.2fx, too small a range): %s.",
                      rep_unit(r, 0), rep_unit(r, 0), gr->tensor, (long long)w.step, at, w.amax,
                      rep_unit(r, 1), fits, w.overshoot, exp2(w.overshoot), meas);
  }
  if (spike && spike != w.row) {
    const fp8_steps_group *gr = &r->tab.groups[r->spike_group];
    double fits = fp8_format_max(spike->format) / spike->scale;
    measured_words(r, spike, meas, sizeof meas);
    fp8_doc_markdownf(d,
                      "At the snapshot steps (where the values are counted), the one that lost "
                      "the most: **%s at step %lld** reached amax %.4g while the delayed scale "
                      "could represent only %.4g (%.2f binades too small a range): %s.",
                      gr->tensor, (long long)spike->step, spike->amax, fits,
                      log2(spike->amax / fits), meas);
  }
  if (spike) {
    spike_list(r, d, spike->step);
    after_spike(r, d);
  }
  return w.g >= 0;
}
