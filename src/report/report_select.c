/* report_select.c: what `fp8lab report` tells (report_internal.h): the configurations of the
 * run with their aggregates over tensors, the reference delayed configuration the findings
 * are about, the ones drawn on the timelines, the tensors that overflow under it and the worst
 * event (the spike). Plots (report_plots.c) and text (report_text.c) read these choices. */
#include "report_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

#include "util.h" /* fp8_errorf */

/* ------------------------------------------------------------------ configurations */

int rep_cfg_matches(const cfg_t *c, const fp8_config_key *key) {
  if (c->mixed) return strcmp(c->key.recipe, key->recipe) == 0;
  return fp8_config_key_equal(&c->key, key, FP8_KEY_IGNORE_FORMAT);
}

static int cfg_same(const cfg_t *c, const fp8_steps_group *g) {
  return rep_cfg_matches(c, &g->key);
}

/* The same setting (kind and the delayed parameters), whatever the recipe and format. */
static int group_same_setting(const fp8_steps_group *a, const fp8_steps_group *b) {
  return fp8_config_key_equal(&a->key, &b->key, FP8_KEY_IGNORE_RECIPE | FP8_KEY_IGNORE_FORMAT);
}

/* Whether recipe label `recipe` is a mixed recipe: one group per tensor (groups are in tensor
 * order), and not one setting for all of them (a label of one section has one). */
static int label_is_mixed(const fp8_steps_table *t, const char *recipe) {
  const fp8_steps_group *first = NULL;
  const char *prev = NULL;
  int differ = 0;
  for (size_t g = 0; g < t->ngroups; g++) {
    const fp8_steps_group *gr = &t->groups[g];
    if (gr->key.recipe != recipe) continue; /* interned */
    if (prev == gr->tensor) return 0;  /* a sweep: more than one group of a tensor */
    prev = gr->tensor;
    if (!first) first = gr;
    else differ |= !group_same_setting(first, gr);
  }
  return differ;
}

/* "mixed (per tensor)": short enough for the bar charts' axis (the settings are in
 * steps.csv's rows; docs/semantics.md). */
static void mixed_label(cfg_t *c) {
  snprintf(c->label, sizeof c->label, "%s (per tensor)", c->key.recipe);
}

/* A new configuration at r->cfgs[r->ncfg] (zeroed; no GEMM error until gemm.csv gives one,
 * rep_add_gemm: a run without it has no section), the array grown as needed with one spare
 * entry past the last. The array was one entry per group (500 bytes each: 1 GB for the 2.15 M
 * groups of a MoE run of 24 configurations, every entry written). FP8_OK or FP8_ENOMEM. */
static int new_config(rep_t *r, size_t *cap) {
  if (r->ncfg + 2 > *cap) {
    size_t nc = *cap ? 2 * *cap : 16;
    cfg_t *g = realloc(r->cfgs, nc * sizeof *g);
    if (!g) return FP8_ENOMEM;
    r->cfgs = g;
    for (size_t c = *cap; c < nc; c++) {
      memset(&r->cfgs[c], 0, sizeof r->cfgs[c]);
      for (int k = 0; k < FP8_GEMM_COUNT; k++)
        r->cfgs[c].gemm_median[k] = r->cfgs[c].gemm_lo_median[k] = r->cfgs[c].gemm_hi_median[k] = NAN;
    }
    *cap = nc;
  }
  return FP8_OK;
}

/* The configurations in experiment order (a tensor's groups are in file order, and the first
 * tensor with the most groups has them all) and each group's. FP8_OK or FP8_ENOMEM. */
static int assign_configs(rep_t *r) {
  const fp8_steps_table *t = &r->tab;
  size_t cap = 0;
  if (new_config(r, &cap)) return FP8_ENOMEM; /* the spare entry of a table without groups */
  for (size_t g = 0; g < t->ngroups; g++) {
    const fp8_steps_group *gr = &t->groups[g];
    size_t c = 0;
    while (c < r->ncfg && !cfg_same(&r->cfgs[c], gr)) c++;
    if (c == r->ncfg) {
      if (new_config(r, &cap)) return FP8_ENOMEM;
      cfg_t *n = &r->cfgs[r->ncfg++];
      n->key = gr->key;
      n->mixed = label_is_mixed(t, gr->key.recipe);
      if (n->mixed) mixed_label(n);
      else fp8_config_key_label(&n->key, FP8_KEY_LABEL_SHORT, n->label, sizeof n->label);
    }
    r->gcfg[g] = c;
  }
  return FP8_OK;
}

/* Each configuration's overflow and finite totals and the median of its tensors' median SNRs. */
static int aggregate_configs(rep_t *r) {
  const fp8_steps_table *t = &r->tab;
  for (size_t c = 0; c < r->ncfg; c++) {
    double *med = malloc((t->ngroups + 1) * sizeof *med);
    if (!med) return FP8_ENOMEM;
    size_t nm = 0;
    for (size_t g = 0; g < t->ngroups; g++) {
      if (r->gcfg[g] != c) continue;
      const fp8_group_stats *s = &r->an.stats[g];
      r->cfgs[c].overflow += s->overflow;
      r->cfgs[c].finite += s->finite;
      r->cfgs[c].clipped += s->clipped;
      if (s->snr_rows > 0 && isfinite(s->snr_median)) med[nm++] = s->snr_median;
    }
    gsl_sort(med, 1, nm);
    r->cfgs[c].snr_median = nm ? gsl_stats_median_from_sorted_data(med, 1, nm) : NAN;
    free(med);
  }
  return FP8_OK;
}

/* The reference configuration: TE's default (1024, 0, max) when swept, else the longest
 * history with the smallest |margin| and max (any kind but current scaling); and the first
 * current-scaling one. */
static void choose_reference(rep_t *r) {
  r->ref = -1;
  r->cur = -1;
  for (size_t c = 0; c < r->ncfg; c++) {
    const cfg_t *x = &r->cfgs[c];
    if (x->mixed) continue;
    if (x->key.kind == FP8_KIND_CURRENT) {
      if (r->cur < 0) r->cur = (ptrdiff_t)c;
      continue;
    }
    if (r->ref < 0) {
      r->ref = (ptrdiff_t)c;
      continue;
    }
    const cfg_t *b = &r->cfgs[r->ref];
    int xd =
        x->key.history_len == 1024 && x->key.margin == 0 && x->key.amax_compute == FP8_AMAX_MAX;
    int bd =
        b->key.history_len == 1024 && b->key.margin == 0 && b->key.amax_compute == FP8_AMAX_MAX;
    if (xd != bd) {
      if (xd) r->ref = (ptrdiff_t)c;
      continue;
    }
    if ((x->key.amax_compute == FP8_AMAX_MAX) != (b->key.amax_compute == FP8_AMAX_MAX)) {
      if (x->key.amax_compute == FP8_AMAX_MAX) r->ref = (ptrdiff_t)c;
      continue;
    }
    if (abs(x->key.margin) != abs(b->key.margin)) {
      if (abs(x->key.margin) < abs(b->key.margin)) r->ref = (ptrdiff_t)c;
      continue;
    }
    if (x->key.history_len > b->key.history_len) r->ref = (ptrdiff_t)c;
  }
}

/* The delayed configurations drawn on timelines: the reference's recipe, margin and
 * amax_compute, each history length (up to MAX_SHOWN, spread over the range). */
static void choose_shown(rep_t *r) {
  if (r->ref < 0) return;
  const cfg_t *b = &r->cfgs[r->ref];
  size_t cand[256], nc = 0;
  for (size_t c = 0; c < r->ncfg && nc < 256; c++) {
    const cfg_t *x = &r->cfgs[c];
    if (x->key.kind == FP8_KIND_DELAYED && !x->mixed &&
        fp8_config_key_equal(&x->key, &b->key,
                             FP8_KEY_IGNORE_FORMAT | FP8_KEY_IGNORE_KIND | FP8_KEY_IGNORE_HISTORY))
      cand[nc++] = c;
  }
  /* ascending history_len */
  for (size_t i = 1; i < nc; i++)
    for (size_t j = i;
         j > 0 && r->cfgs[cand[j]].key.history_len < r->cfgs[cand[j - 1]].key.history_len; j--) {
      size_t tmp = cand[j];
      cand[j] = cand[j - 1];
      cand[j - 1] = tmp;
    }
  if (nc <= MAX_SHOWN) {
    for (size_t i = 0; i < nc; i++) r->shown[r->nshown++] = cand[i];
  } else {
    for (size_t i = 0; i < MAX_SHOWN; i++)
      r->shown[r->nshown++] = cand[i * (nc - 1) / (MAX_SHOWN - 1)];
  }
}

/* Delayed scaling whose scale is the last amax: most_recent at any history_len, or history 1
 * with max (the window's max is the last amax). */
static int recent_class(const cfg_t *x) {
  return x->key.kind == FP8_KIND_DELAYED &&
         (x->key.amax_compute == FP8_AMAX_MOST_RECENT || x->key.history_len == 1);
}

/* Classes of provably identical configurations: the same section (so the same formats and
 * tensors) and margin, both in the recent class: their scales are equal at every step. */
static void find_identical(rep_t *r) {
  r->ndistinct = 0;
  for (size_t c = 0; c < r->ncfg; c++) {
    cfg_t *x = &r->cfgs[c];
    x->same_as = c;
    for (size_t k = 0; k < c && recent_class(x); k++) {
      const cfg_t *y = &r->cfgs[k];
      if (y->same_as == k && recent_class(y) && y->key.margin == x->key.margin &&
          strcmp(y->key.recipe, x->key.recipe) == 0) {
        x->same_as = k;
        break;
      }
    }
    r->ndistinct += x->same_as == c;
  }
  for (size_t c = 0; c < r->ncfg; c++) { /* the labels of the classes of more than one */
    cfg_t *x = &r->cfgs[c];
    snprintf(x->dlabel, sizeof x->dlabel, "%s", x->label);
    if (x->same_as != c) continue;
    size_t members = 0;
    int l1max = 0;
    for (size_t k = c; k < r->ncfg; k++) {
      const cfg_t *y = &r->cfgs[k];
      if (y->same_as != c) continue;
      members++;
      if (y->key.amax_compute == FP8_AMAX_MAX) l1max = 1;
    }
    /* most_recent ignores history_len: the class stands for every one ("any L"); the lengths
     * swept are in the table's text (the labels stay short enough for a chart's axis) */
    if (members > 1)
      snprintf(x->dlabel, sizeof x->dlabel, "%s m=%d recent, any L%s", x->key.recipe,
               (int)x->key.margin,
               l1max ? " = L=1 max" : "");
  }
}

static size_t overflowing(const rep_t *r, ov_t *out);

int rep_build_configs(rep_t *r) {
  const fp8_steps_table *t = &r->tab;
  r->gcfg = calloc(t->ngroups + 1, sizeof *r->gcfg);
  if (!r->gcfg) return FP8_ENOMEM;
  r->gemm_halfwidth = NAN;
  int rc = assign_configs(r);
  if (rc) return rc;
  rc = aggregate_configs(r);
  if (rc) return rc;
  find_identical(r);
  choose_reference(r);
  choose_shown(r);
  /* each group's stream series (its tensor under its delayed configuration) */
  r->series = calloc(t->ngroups + 1, sizeof *r->series);
  r->ov = calloc(t->ngroups + 1, sizeof *r->ov);
  if (!r->series || !r->ov) return FP8_ENOMEM;
  for (size_t g = 0; g < t->ngroups && r->have_stream; g++) {
    const fp8_steps_group *gr = &t->groups[g];
    if (gr->key.kind == FP8_KIND_DELAYED)
      r->series[g] = fp8_stream_find(&r->stream, gr->tensor, &gr->key);
  }
  r->nov = overflowing(r, r->ov);
  return FP8_OK;
}

/* A stream.npy's scales stay in the file (tables.h): the series the report reads entry by
 * entry are read in, those of the reference configuration (the findings, the heatmaps, the
 * timelines) and of the configurations on the timelines; the statistics of every series came
 * from fp8_analysis_add_stream's one pass. */
/* The step of group g's largest overshoot (its event), over the stream when the run has one,
 * else over the snapshot rows; warm-up left out; -1 when it has none. */
static int64_t event_step(const rep_t *r, size_t g) {
  const fp8_steps_group *gr = &r->tab.groups[g];
  const fp8_group_stats *st = &r->an.stats[g];
  if (st->stream_steps >= 0) return st->stream_overshoot_step; /* the analysis found it */
  double best = -INFINITY;
  int64_t step = -1;
  for (size_t i = 0; i < gr->nrows; i++) {
    const fp8_step_row *row = fp8_steps_csv_group_row(&r->tab, gr, i);
    if (!row->warmup && row->overshoot > best) best = row->overshoot, step = row->step;
  }
  return step;
}

size_t rep_timeline_tensors(const rep_t *r, int max_timelines, const char **out) {
  if (r->ref < 0) return 0;
  size_t ndrawn = 0;
  int64_t events[MAX_TIMELINES];
  if (r->spike_group >= 0) {
    out[ndrawn] = r->tab.groups[r->spike_group].tensor;
    events[ndrawn++] = event_step(r, (size_t)r->spike_group);
  }
  /* the worst event's tensor next (report_worst.c: the largest overshoot of a clipped cast,
   * issue 42 point 4), when it is another event than the spike's */
  ptrdiff_t wi = -1;
  for (size_t i = 0; i < r->nov; i++)
    if (r->ov[i].clip_steps > 0 && (wi < 0 || r->ov[i].overshoot > r->ov[wi].overshoot))
      wi = (ptrdiff_t)i;
  if (wi >= 0 && ndrawn < (size_t)max_timelines && ndrawn < MAX_TIMELINES) {
    int64_t ev = event_step(r, r->ov[wi].g);
    if (!ndrawn || events[0] != ev) {
      out[ndrawn] = r->tab.groups[r->ov[wi].g].tensor;
      events[ndrawn++] = ev;
    }
  }
  for (size_t i = 0; i < r->nov && ndrawn < (size_t)max_timelines && ndrawn < MAX_TIMELINES;
       i++) {
    const char *t = r->tab.groups[r->ov[i].g].tensor;
    if (r->spike_group >= 0 && strcmp(t, r->tab.groups[r->spike_group].tensor) == 0) continue;
    int64_t ev = event_step(r, r->ov[i].g);
    int seen = 0;
    for (size_t k = 0; k < ndrawn; k++) seen |= events[k] == ev || strcmp(out[k], t) == 0;
    if (seen) continue;
    out[ndrawn] = t;
    events[ndrawn++] = ev;
  }
  return ndrawn;
}

int rep_keep_series(rep_t *r, int max_timelines, char *err, size_t errlen) {
  const fp8_stream_table *st = &r->stream;
  unsigned char *want = calloc(st->nseries + 1, 1);
  if (!want) return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  const char *tl[MAX_TIMELINES];
  size_t ntl = rep_timeline_tensors(r, max_timelines, tl);
  size_t cs[MAX_SHOWN + 1], nc = 0;
  if (r->ref >= 0) cs[nc++] = (size_t)r->ref;
  for (size_t k = 0; k < r->nshown; k++) cs[nc++] = r->shown[k];
  for (size_t k = 0; k < st->nseries; k++)
    for (size_t j = 0; j < nc && !want[k]; j++) {
      const cfg_t *x = &r->cfgs[cs[j]]; /* as the plots find them (report_plots_stream.c) */
      want[k] = x->key.kind == FP8_KIND_DELAYED && !x->mixed &&
                fp8_config_key_equal(&x->key, &st->series[k].key,
                                     FP8_KEY_IGNORE_KIND | FP8_KEY_IGNORE_FORMAT);
      /* a shown configuration's series: only the timelines' tensors read it (a MoE run has
       * 10^5 tensors: every tensor's series of 4 more configurations would be 4 x the
       * reference's scales in memory) */
      for (size_t i = 0; want[k] && j > 0 && cs[j] != cs[0]; i++) {
        if (i == ntl) {
          want[k] = 0;
          break;
        }
        if (strcmp(tl[i], st->series[k].tensor) == 0) break;
      }
    }
  for (size_t g = 0; g < r->tab.ngroups; g++) /* the reference's groups (a mixed one too) */
    if (r->series[g] && r->ref >= 0 && r->gcfg[g] == (size_t)r->ref)
      want[r->series[g] - st->series] = 1;
  int rc = fp8_stream_keep(&r->stream, want, err, errlen);
  free(want);
  return rc;
}

ptrdiff_t rep_group_of(const rep_t *r, const char *tensor, size_t c) {
  for (size_t g = 0; g < r->tab.ngroups; g++)
    if (r->gcfg[g] == c && strcmp(r->tab.groups[g].tensor, tensor) == 0) return (ptrdiff_t)g;
  return -1;
}

const fp8_step_row *rep_row_at(const rep_t *r, ptrdiff_t g, int64_t step) {
  if (g < 0) return NULL;
  const fp8_steps_group *gr = &r->tab.groups[g];
  for (size_t i = 0; i < gr->nrows; i++) {
    const fp8_step_row *row = fp8_steps_csv_group_row(&r->tab, gr, i);
    if (row->step == step) return row;
  }
  return NULL;
}

/* ------------------------------------------------------------------ the story */

static int cmp_ov(const void *a, const void *b) {
  const ov_t *x = a, *y = b;
  if (x->clip_steps != y->clip_steps) return x->clip_steps < y->clip_steps ? 1 : -1;
  if (x->ovf_steps != y->ovf_steps) return x->ovf_steps < y->ovf_steps ? 1 : -1;
  if (x->overshoot != y->overshoot) return x->overshoot < y->overshoot ? 1 : -1;
  return x->g < y->g ? -1 : x->g > y->g;
}

/* Groups of the reference configuration whose largest element overflowed at some step, worst
 * first (clipped steps, overflowed steps, overshoot), into out (room for every group); returns
 * their number. */
static size_t overflowing(const rep_t *r, ov_t *out) {
  size_t n = 0;
  if (r->ref < 0) return 0;
  for (size_t g = 0; g < r->tab.ngroups; g++) {
    if (r->gcfg[g] != (size_t)r->ref) continue;
    const fp8_group_stats *s = &r->an.stats[g];
    ov_t o = {g, 0, 0, s->clipped, -INFINITY};
    if (s->stream_steps >= 0) { /* every step of the replay */
      o.ovf_steps = s->stream_overflow_steps;
      o.clip_steps = s->stream_clipped_steps;
      o.overshoot = s->stream_overshoot_max;
    } else { /* the snapshot rows: a row overflowed when its largest element did */
      o.ovf_steps = s->steps_with_overflow;
      o.clip_steps = s->steps_with_clipped;
      o.overshoot = s->overshoot_max;
    }
    if (o.ovf_steps > 0) out[n++] = o;
  }
  qsort(out, n, sizeof *out, cmp_ov);
  return n;
}

/* The SNR (dB) that clipping row `row` of the reference lost against current scaling at the
 * same tensor and step: > 0 when current scaling's cast was more accurate; NaN without a
 * current-scaling row. */
static double snr_loss(const rep_t *r, const fp8_step_row *row) {
  if (r->cur < 0) return NAN;
  ptrdiff_t gc = rep_group_of(r, r->tab.groups[row->group].tensor, (size_t)r->cur);
  const fp8_step_row *cr = gc >= 0 ? rep_row_at(r, gc, row->step) : NULL;
  return cr ? cr->snr_db - row->snr_db : NAN;
}

void rep_find_spike(rep_t *r) {
  r->spike_group = -1;
  if (r->ref < 0) return;
  int64_t best = -1;
  int by_overflow = 0;
  /* the clipping row (non-warm-up) whose cast lost the most SNR against current scaling, ties
   * to the most clipped values, then the first: so that the worst event never reads better
   * than current scaling (issue 25 point 4). When no clipping row lost SNR (or there is no
   * current scaling), the most clipped values in a row (overflow for a file without clipped);
   * the most underflow when nothing clipped. */
  double best_loss = 0.0;
  for (size_t i = 0; i < r->tab.nrows; i++) {
    const fp8_step_row *row = &r->tab.rows[i];
    if (r->gcfg[row->group] != (size_t)r->ref || row->warmup || row->clipped <= 0) continue;
    by_overflow = 1;
    double loss = snr_loss(r, row);
    if (loss > best_loss || (loss == best_loss && best >= 0 && row->clipped > best)) {
      best_loss = loss;
      best = row->clipped;
      r->spike_group = (ptrdiff_t)row->group;
      r->spike_step = row->step;
      r->spike_row = i;
    }
  }
  if (r->spike_group >= 0) return;
  for (size_t i = 0; i < r->tab.nrows; i++) {
    const fp8_step_row *row = &r->tab.rows[i];
    if (r->gcfg[row->group] != (size_t)r->ref || row->warmup) continue;
    int64_t v = by_overflow ? row->clipped : row->underflow;
    if (v > best) {
      best = v;
      r->spike_group = (ptrdiff_t)row->group;
      r->spike_step = row->step;
      r->spike_row = i;
    }
  }
}

/* ------------------------------------------------------------------ the steps' history */

void rep_history_sentence(const rep_t *r, char *buf, size_t len) {
  const fp8_run_record *run = &r->run;
  buf[0] = '\0';
  if (!run->trace_steps || !r->have_stream || !r->stream.nseries || !r->stream.series[0].n) return;
  long long before = run->steps_before, skipped = run->steps_skipped;
  if (before == 0 && skipped == 0) return; /* the selection leaves out no earlier step */
  char spec[96]; /* "10-299:1" as the experiment wrote it: "10-299" */
  snprintf(spec, sizeof spec, "%s", run->trace_steps);
  size_t n = strlen(spec);
  if (n > 2 && strcmp(spec + n - 2, ":1") == 0) spec[n - 2] = '\0';
  long long first = (long long)r->stream.series[0].step[0];
  if (before < 0 || skipped < 0) { /* a run.json before the counts: a cold history */
    snprintf(buf, len, "Steps %s replayed with each tensor's amax history empty at step %lld "
             "(warm_history = false): where the trace has earlier steps, the delayed scales of "
             "the first steps are not the ones training had.", spec, first);
    return;
  }
  if (run->warm_history && skipped == 0)
    snprintf(buf, len, "Steps %s replayed with the amax history of the %lld earlier step%s of "
             "the trace (warm_history = true): the delayed scales are the ones training had.",
             spec, before, before == 1 ? "" : "s");
  else if (run->warm_history)
    snprintf(buf, len, "Steps %s replayed with the amax history of the %lld steps of the trace "
             "that the selection leaves out before its last step (%lld before step %lld, %lld "
             "skipped by its stride; warm_history = true): the delayed scales are the ones "
             "training had.", spec, before + skipped, before, first, skipped);
  else if (skipped == 0)
    snprintf(buf, len, "Steps %s replayed with each tensor's amax history empty at step %lld, "
             "though the trace has %lld earlier step%s (warm_history = false): the delayed "
             "scales of the first steps are not the ones training had.", spec, first, before,
             before == 1 ? "" : "s");
  else
    snprintf(buf, len, "Steps %s replayed with each tensor's amax history empty at step %lld "
             "and without the %lld steps its stride skips%s (warm_history = false): the delayed "
             "scales are not the ones training had.", spec, first, skipped,
             before ? ", though the trace has earlier steps" : "");
}
