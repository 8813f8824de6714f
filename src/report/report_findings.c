/* report_findings.c: the Findings section of `fp8lab report` (rep_add_findings,
 * report_internal.h). Claims about saturation use `clipped` (saturation past the rounding of
 * the max) and `overshoot` (how far past it the largest element went), over every step of the
 * replay when the run has stream.csv; warm-up rows are left out everywhere and counted in one
 * sentence; current scaling's rounding case is explained once where it shows. Every number
 * quoted here is recomputed from the CSV files by tests/report/test_findings.py, so a sentence
 * added here needs its check there. */
#include "report_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "results.h" /* fp8_overshoot */

#include <gsl/gsl_sort.h>

#define MAX_TABLE 25

/* ------------------------------------------------------------------ the reference */

/* Totals of the reference configuration over its groups (stream steps, or snapshot rows). */
typedef struct {
  size_t tensors, ovf_tensors, clip_tensors, snap_clip_tensors;
  int64_t ovf_steps, clip_steps, clipped, finite, nsteps;
  double worst;       /* the largest overshoot of a non-warm-up step */
  ptrdiff_t worst_g;  /* its group, -1 if none */
  int64_t worst_step, worst_micro; /* micro -1: no micro-batches */
  int64_t bins[5];    /* overflowed steps: not clipped, < 0.5, [0.5, 1), [1, 2), >= 2 binades */
} ref_totals;

static void bin_add(ref_totals *t, int clipped, double ov) {
  t->bins[!clipped ? 0 : ov < 0.5 ? 1 : ov < 1.0 ? 2 : ov < 2.0 ? 3 : 4]++;
}

static void worst_add(ref_totals *t, double ov, size_t g, int64_t step, int64_t micro) {
  if (ov > t->worst) {
    t->worst = ov;
    t->worst_g = (ptrdiff_t)g;
    t->worst_step = step;
    t->worst_micro = micro;
  }
}

/* One group's steps: the stream series when there is one, else the snapshot rows. */
static void totals_group(const rep_t *r, size_t g, ref_totals *t) {
  const fp8_steps_group *gr = &r->tab.groups[g];
  const fp8_group_stats *s = &r->an.stats[g];
  const fp8_stream_series *ser = r->series[g];
  int64_t ovf = 0, clip = 0;
  if (ser) {
    for (size_t i = 0; i < ser->n; i++) {
      if (ser->warmup[i] || !(ser->amax[i] > 0.0f)) continue;
      double ov = fp8_overshoot(ser->amax[i], ser->scale[i], ser->key.format);
      int o = fp8_stream_overflowed(ser->amax[i], ser->scale[i], ser->key.format);
      int c = fp8_stream_clipped(ser->amax[i], ser->scale[i], ser->key.format);
      ovf += o;
      clip += c;
      if (o) bin_add(t, c, ov);
      worst_add(t, ov, g, ser->step[i], rep_micro(r) ? ser->micro[i] : -1);
    }
  } else {
    for (size_t i = 0; i < gr->nrows; i++) {
      const fp8_step_row *row = fp8_steps_csv_group_row(&r->tab, gr, i);
      if (row->warmup || !(row->amax > 0)) continue;
      int64_t c = row->clipped;
      ovf += row->overflow > 0;
      clip += c > 0;
      if (row->overflow > 0) bin_add(t, c > 0, row->overshoot);
      worst_add(t, row->overshoot, g, row->step, -1);
    }
  }
  t->tensors++;
  t->ovf_tensors += ovf > 0;
  t->clip_tensors += clip > 0;
  t->ovf_steps += ovf;
  t->clip_steps += clip;
  t->snap_clip_tensors += s->clipped > 0;
  t->clipped += s->clipped;
  t->finite += s->finite;
}

static ref_totals ref_totals_of(const rep_t *r) {
  ref_totals t;
  memset(&t, 0, sizeof t);
  t.worst = -INFINITY;
  t.worst_g = -1;
  t.worst_micro = -1;
  for (size_t g = 0; g < r->tab.ngroups; g++)
    if (r->gcfg[g] == (size_t)r->ref) totals_group(r, g, &t);
  t.nsteps = r->have_stream ? (int64_t)r->stream.nsteps : 0;
  return t;
}

static void findings_reference(const rep_t *r, fp8_doc *d, const ref_totals *t,
                               int64_t snap_steps) {
  const cfg_t *ref = &r->cfgs[r->ref];
  char over[320];
  if (rep_micro(r))
    snprintf(over, sizeof over, "Over the %zu micro-batches of the replay (%lld steps; every "
             "micro-batch of stream.csv, snapshot or amax.csv, each a cast; each tensor's warm-up "
             "micro-batches and those it did not run left out)", r->stream.nmicro,
             (long long)t->nsteps);
  else if (r->have_stream)
    snprintf(over, sizeof over, "Over the %lld steps of the replay (every step of stream.csv, "
             "snapshot or amax.csv; each tensor's warm-up steps and the steps it did not run left "
             "out)", (long long)t->nsteps);
  else
    snprintf(over, sizeof over, "Over the %lld snapshot steps (this run has no stream.csv; "
             "warm-up left out)", (long long)snap_steps);
  /* clipping first (issue 25 point 6): an overflow by rounding only costs under half an ulp */
  fp8_doc_markdownf(d,
                    "Reference configuration: **%s** (TransformerEngine's default is history_len "
                    "1024, margin 0, amax_compute max; Megatron-LM's is history_len 1, margin 0, "
                    "most_recent). %s, under it the largest element of **%zu "
                    "of %zu tensors** clipped, i.e. saturated past the rounding of the max, at some "
                    "%s (%lld tensor-%s in all). Counting also the overflows by rounding only (a "
                    "hair above the max, saturated with an error under half an FP8 ulp), %zu "
                    "tensors overflowed (%lld tensor-%s).",
                    ref->label, over, t->clip_tensors, t->tensors, rep_unit(r, 0),
                    (long long)t->clip_steps, rep_unit(r, 1), t->ovf_tensors,
                    (long long)t->ovf_steps, rep_unit(r, 1));
  /* with a clipped step the worst event (report_worst.c) is the largest overshoot: said there */
  char at[64] = "";
  if (t->worst_micro >= 0) snprintf(at, sizeof at, ", micro-batch %lld", (long long)t->worst_micro);
  if (t->worst_g >= 0 && t->worst > 0 && !t->clip_steps)
    fp8_doc_markdownf(d, "The largest overshoot (by rounding only: no %s clipped): **%s at step "
                      "%lld%s**, %.2f binades (%.2fx) past the max.", rep_unit(r, 0),
                      r->tab.groups[t->worst_g].tensor, (long long)t->worst_step, at, t->worst,
                      exp2(t->worst));
  char b[64];
  if (r->stream_only) return; /* no snapshot steps */
  fp8_doc_markdownf(d, "At the snapshot steps, %zu of %zu tensors have clipped values (%lld of %lld "
                    "values, rate %s).", t->snap_clip_tensors, t->tensors, (long long)t->clipped,
                    (long long)t->finite,
                    rep_fmt_rate(t->finite ? (double)t->clipped / (double)t->finite : NAN, b, sizeof b));
}

/* ------------------------------------------------------------------ warm-up, rounding */

static void findings_warmup(const rep_t *r, fp8_doc *d) {
  int64_t rows = 0, under = 0, clip = 0, steps[6];
  size_t nsteps = 0;
  for (size_t i = 0; i < r->tab.nrows; i++) {
    const fp8_step_row *row = &r->tab.rows[i];
    if (!row->warmup) continue;
    rows++;
    under += row->underflow;
    clip += row->clipped;
    int seen = 0;
    for (size_t k = 0; k < nsteps; k++) seen |= steps[k] == row->step;
    if (!seen && nsteps < 6) steps[nsteps++] = row->step;
  }
  if (!rows) return;
  char list[160] = "";
  size_t n = 0;
  for (size_t k = 0; k < nsteps && k < 5; k++)
    n += (size_t)snprintf(list + n, sizeof list - n, "%s%lld", k ? ", " : "", (long long)steps[k]);
  if (nsteps > 5) snprintf(list + n, sizeof list - n, ", ...");
  char who[300];
  if (r->run.warmup_steps >= 0)
    snprintf(who, sizeof who, "the first %lld steps of the replay (`[analysis] warmup_steps = "
             "%lld`)", (long long)r->run.warmup_steps, (long long)r->run.warmup_steps);
  else
    snprintf(who, sizeof who, "each tensor's steps before a non-zero amax entered its history "
             "(here step%s %s), where delayed scaling's scale is still 1 (the same steps for every "
             "configuration, so that all are compared over the same steps),", nsteps > 1 ? "s" : "",
             list);
  fp8_doc_markdownf(d, "Warm-up: %s are left out of every rate, count and recommendation: %lld rows "
                    "of steps.csv, holding %lld values flushed to zero and %lld clipped values.",
                    who, (long long)rows, (long long)under, (long long)clip);
}

/* Current scaling's one "overflow" per step: amax * RN32(max / amax) a hair above the max. */
static void findings_rounding(const rep_t *r, fp8_doc *d) {
  if (r->cur < 0 || !r->tab.has_clipped) return; /* without the column nothing tells them apart */
  int64_t rows = 0, hair = 0;
  for (size_t i = 0; i < r->tab.nrows; i++) {
    const fp8_step_row *row = &r->tab.rows[i];
    if (r->gcfg[row->group] != (size_t)r->cur || row->warmup) continue;
    rows++;
    hair += row->overflow > row->clipped;
  }
  if (!hair) return;
  fp8_doc_markdownf(d, "Under current scaling (recipe %s), %lld of %lld rows count an overflow that is not "
                    "clipped: the tensor's amax times RN32(max/amax) rounds a hair above the max, and "
                    "the cast saturates it with an error under half an FP8 ulp. Such rounding "
                    "overflows are not counted as clipped anywhere in this report.",
                    r->cfgs[r->cur].key.recipe, (long long)hair, (long long)rows);
}

/* ------------------------------------------------------------------ tables */

static void findings_roles(const rep_t *r, fp8_doc *d, const ov_t *ov, size_t nov) {
  fp8_doc_markdownf(d, "By role, under %s (%s):", r->cfgs[r->ref].label,
                    rep_micro(r) ? "every micro-batch of the replay"
                    : r->have_stream ? "every step of the replay" : "the snapshot steps");
  char h2[64], h3[64], h4[64];
  snprintf(h2, sizeof h2, "with an overflowed %s", rep_unit(r, 0));
  snprintf(h3, sizeof h3, "with a clipped %s", rep_unit(r, 0));
  snprintf(h4, sizeof h4, "clipped %s", rep_unit(r, 1));
  const char *hdr[] = {"role", "tensors", h2, h3, h4, "worst overshoot (binades)"};
  fp8_doc_table_begin(d, 6, hdr, "lrrrrr");
  for (int role = FP8_ROLE_INPUT; role <= FP8_ROLE_UNKNOWN; role++) {
    int64_t nt = 0, no = 0, nc = 0, steps = 0;
    double worst = -INFINITY;
    for (size_t g = 0; g < r->tab.ngroups; g++)
      if (r->gcfg[g] == (size_t)r->ref && (int)r->tab.groups[g].role == role) nt++;
    if (!nt) continue;
    for (size_t i = 0; i < nov; i++) {
      if ((int)r->tab.groups[ov[i].g].role != role) continue;
      no++;
      nc += ov[i].clip_steps > 0;
      steps += ov[i].clip_steps;
      if (ov[i].overshoot > worst) worst = ov[i].overshoot;
    }
    char c[5][32];
    snprintf(c[0], 32, "%lld", (long long)nt);
    snprintf(c[1], 32, "%lld", (long long)no);
    snprintf(c[2], 32, "%lld", (long long)nc);
    snprintf(c[3], 32, "%lld", (long long)steps);
    if (no) snprintf(c[4], 32, "%.2f", worst);
    else snprintf(c[4], 32, "n/a");
    const char *cells[] = {fp8_rec_role_name((fp8_role)role), c[0], c[1], c[2], c[3], c[4]};
    fp8_doc_table_row(d, cells);
  }
}

/* The steps a group's tensor ran at, warm-up left out: the non-warm-up steps of its stream
 * series (else its snapshot rows) with a non-zero amax. A module that did not run at a step
 * (amax 0: TransformerEngine keeps its scale) has no largest element there to overflow, and
 * totals_group skips those steps too, so they are no part of "N of M steps". */
static int64_t steps_ran(const rep_t *r, size_t g) {
  const fp8_steps_group *gr = &r->tab.groups[g];
  if (r->an.stats[g].stream_steps >= 0) return r->an.stats[g].stream_steps; /* the analysis's */
  int64_t n = 0;
  for (size_t i = 0; i < gr->nrows; i++) {
    const fp8_step_row *row = fp8_steps_csv_group_row(&r->tab, gr, i);
    n += !row->warmup && row->amax > 0;
  }
  return n;
}

static void findings_table(const rep_t *r, fp8_doc *d, const ov_t *ov, size_t nov) {
  fp8_doc_markdownf(d, "Tensors whose largest element overflowed under %s, most clipped %s first%s:",
                    r->cfgs[r->ref].label, rep_unit(r, 1),
                    rep_micro(r) ? " (counts of micro-batches: \"N of M\" is N of the M "
                                   "micro-batches the tensor ran, warm-up left out)" : "");
  char h2[64], h3[64];
  snprintf(h2, sizeof h2, "%s overflowed", rep_micro(r) ? "micro-batches" : "steps");
  snprintf(h3, sizeof h3, "%s clipped", rep_micro(r) ? "micro-batches" : "steps");
  const char *hdr[] = {"tensor", "role", h2, h3,
                       "worst overshoot (binades)", "clipped rate (values)", "p5 SNR (dB)",
                       "p5 SNR, current (dB)"};
  /* without snapshots the last three (values, SNR) do not exist: the first five */
  fp8_doc_table_begin(d, r->stream_only ? 5 : 8, hdr, r->stream_only ? "llrrr" : "llrrrrrr");
  for (size_t i = 0; i < nov && i < MAX_TABLE; i++) {
    const fp8_steps_group *gr = &r->tab.groups[ov[i].g];
    const fp8_group_stats *s = &r->an.stats[ov[i].g];
    int64_t of = steps_ran(r, ov[i].g);
    char c2[48], c3[48], c4[32], b5[64], b6[64], b7[64];
    snprintf(c2, sizeof c2, "%lld of %lld", (long long)ov[i].ovf_steps, (long long)of);
    snprintf(c3, sizeof c3, "%lld", (long long)ov[i].clip_steps);
    snprintf(c4, sizeof c4, "%.2f", ov[i].overshoot);
    ptrdiff_t gc = r->cur >= 0 ? rep_group_of(r, gr->tensor, (size_t)r->cur) : -1;
    const char *cells[] = {gr->tensor, fp8_rec_role_name(gr->role), c2, c3, c4,
                           rep_fmt_rate(s->clipped_rate, b5, sizeof b5),
                           rep_fmt_db(s->snr_p5, b6, sizeof b6),
                           gc >= 0 ? rep_fmt_db(r->an.stats[gc].snr_p5, b7, sizeof b7) : "n/a"};
    fp8_doc_table_row(d, cells);
  }
  if (nov > MAX_TABLE) fp8_doc_markdownf(d, "... and %zu more (see analysis.csv).", nov - MAX_TABLE);
}

static void findings_overshoot(const rep_t *r, fp8_doc *d, const ref_totals *t) {
  if (!t->ovf_steps) return;
  fp8_doc_markdownf(d, "How far past the max the %lld overflowed tensor-%s went: %lld only by "
                    "rounding (not clipped), %lld by less than 0.5 binade, %lld by 0.5 to 1, %lld "
                    "by 1 to 2, %lld by 2 binades or more.",
                    (long long)t->ovf_steps, rep_unit(r, 1), (long long)t->bins[0],
                    (long long)t->bins[1],
                    (long long)t->bins[2], (long long)t->bins[3], (long long)t->bins[4]);
}

/* Staleness without snapshots: the lag of every non-warm-up step of the reference
 * configuration's stream series with a finite non-zero amax (fp8_analysis_scale_lag). */
static void findings_lag_stream(const rep_t *r, fp8_doc *d) {
  double worst = 0, median = NAN;
  ptrdiff_t wg = -1;
  int64_t wstep = -1, wmicro = -1;
  size_t wn = 0;
  for (size_t g = 0; g < r->tab.ngroups; g++) {
    const fp8_stream_series *s = r->series ? r->series[g] : NULL;
    if (r->gcfg[g] != (size_t)r->ref || !s || !s->scale) continue;
    double *lag = malloc((s->n + 1) * sizeof *lag), gw = 0;
    if (!lag) return;
    size_t n = 0;
    int64_t gstep = -1, gmicro = -1;
    for (size_t i = 0; i < s->n; i++) {
      if (s->warmup[i]) continue;
      double l = fp8_analysis_scale_lag((double)s->scale[i], (double)s->amax[i],
                                        s->key.format, s->key.margin);
      if (isnan(l)) continue;
      lag[n++] = l;
      if (l < gw) gw = l, gstep = s->step[i], gmicro = rep_micro(r) ? s->micro[i] : -1;
    }
    if (n && gw < worst) {
      gsl_sort(lag, 1, n);
      worst = gw;
      median = fp8_analysis_quantile(lag, n, 0.5);
      wg = (ptrdiff_t)g;
      wstep = gstep;
      wmicro = gmicro;
      wn = n;
    }
    free(lag);
  }
  char at[64] = ""; /* its micro-batch under gradient accumulation (issue 42 point 6) */
  if (wmicro >= 0) snprintf(at, sizeof at, ", micro-batch %lld", (long long)wmicro);
  if (wg >= 0)
    fp8_doc_markdownf(d,
                      "Scale lag (log2 of the just-in-time scale over the delayed scale, at every "
                      "%s of the stream; negative: the delayed scale was too large, values "
                      "saturate once it is below -margin): the worst is %.2f binades for %s at "
                      "step %lld%s, whose median scale lag over its %zu %s is %.2f binades.",
                      rep_unit(r, 0), worst, r->tab.groups[wg].tensor, (long long)wstep, at, wn,
                      rep_unit(r, 1), median);
}

/* Staleness: the worst scale lag of the reference configuration. */
static void findings_lag(const rep_t *r, fp8_doc *d) {
  if (r->stream_only) {
    findings_lag_stream(r, d);
    return;
  }
  double worst = 0;
  ptrdiff_t wg = -1;
  for (size_t g = 0; g < r->tab.ngroups; g++)
    if (r->gcfg[g] == (size_t)r->ref && r->an.stats[g].lag_rows > 0 &&
        r->an.stats[g].lag_worst < worst) {
      worst = r->an.stats[g].lag_worst;
      wg = (ptrdiff_t)g;
    }
  if (wg >= 0)
    fp8_doc_markdownf(d,
                      "Scale lag (log2 of the just-in-time scale over the delayed scale, at the "
                      "snapshot steps; negative: the delayed scale was too large, values saturate "
                      "once it is below -margin): the worst is %.2f binades for %s, whose median "
                      "scale lag over its %lld snapshot steps is %.2f binades.",
                      worst, r->tab.groups[wg].tensor, (long long)r->an.stats[wg].lag_rows,
                      r->an.stats[wg].lag_median);
}

void rep_add_findings(const rep_t *r, fp8_doc *d) {
  fp8_doc_heading(d, 2, "Findings");
  if (r->ref < 0) {
    fp8_doc_markdown(d, "This run has no delayed-scaling configuration: there is nothing to compare.");
    return;
  }
  int64_t snap_steps = 0, last = -1;
  for (size_t i = 0; i < r->tab.nrows; i++)
    if (r->tab.rows[i].step != last) {
      last = r->tab.rows[i].step;
      snap_steps++;
    }
  ref_totals t = ref_totals_of(r);
  findings_reference(r, d, &t, snap_steps);
  findings_warmup(r, d);
  findings_rounding(r, d);
  rep_add_worst(r, d);
  findings_roles(r, d, r->ov, r->nov);
  if (r->nov) findings_table(r, d, r->ov, r->nov);
  findings_overshoot(r, d, &t);
  findings_lag(r, d);
}
