/* closedloop_report_text.c: closedloop.md and closedloop.ipynb (src/doc) of `fp8lab
 * closedloop`: the self-check first (loud when a replay did not reproduce its run's scales),
 * then the loss, the rates open against closed, the amax drift and the overflow events, each
 * with its table, and the files. The numbers are those of the CSV files (closedloop_stats.h);
 * docs/semantics.md, "Open loop against closed loop", defines them. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "closedloop_report_internal.h"
#include "doc.h"
#include "util.h" /* fp8_errorf */

/* v with %.4g, "n/a" for NaN */
static const char *num(double v, char *buf, size_t len) {
  if (isnan(v)) return "n/a";
  snprintf(buf, len, "%.4g", v);
  return buf;
}

/* A loss (nats, about 1 here): four decimals, so that 1.0004 does not print as "1". */
static const char *loss_num(double v, char *buf, size_t len) {
  if (isnan(v)) return "n/a";
  snprintf(buf, len, "%.4f", v);
  return buf;
}

static void intro(fp8_doc *d, const cl_study *s) {
  const fp8_study *st = &s->st;
  char labels[1024] = "", seeds[512] = "", spike[128] = "no forced spike";
  for (size_t l = 0; l < st->nlabels; l++)
    snprintf(labels + strlen(labels), sizeof labels - strlen(labels), "%s`%s`", l ? ", " : "",
             st->labels[l]);
  for (size_t k = 0; k < st->nseeds; k++)
    snprintf(seeds + strlen(seeds), sizeof seeds - strlen(seeds), "%s%lld", k ? ", " : "",
             (long long)st->seeds[k]);
  if (st->has_spike)
    snprintf(spike, sizeof spike, "a forced spike at steps %lld..%lld",
             (long long)st->spike_first, (long long)st->spike_last);
  fp8_doc_heading(d, 1, "Open loop against closed loop");
  fp8_doc_markdownf(d,
                    "Study `%s`: recipes %s; seeds %s; %lld training steps; %s. The **open loop** "
                    "replays the high-precision run's trace (seed %lld) under each recipe "
                    "(`open/`); the **closed loop** trains under each recipe and replays its own "
                    "trace (`closed/<label>/seed_<s>/replay/`). Rows are matched by (tensor, "
                    "step, micro-batch) within one label; every number is defined in "
                    "docs/semantics.md, \"Open loop against closed loop\".",
                    st->dir, labels, seeds, (long long)st->steps, spike,
                    (long long)st->open_seed);
}

static void selfcheck(fp8_doc *d, const fp8_cl_result *r) {
  fp8_doc_heading(d, 2, "Self-check: each replay against the scales its run cast with");
  if (r->runs_differing)
    fp8_doc_markdownf(d,
                      "**SELF-CHECK FAILED: in %lld of %zu closed runs fp8lab's replay does not "
                      "reproduce the scale the run cast with (te_scale).** The closed loop's "
                      "rates below are then not those of what the run computed; `fp8lab "
                      "closedloop` exits 1.",
                      (long long)r->runs_differing, r->t.nselfcheck);
  else {
    int64_t te = 0;
    for (size_t k = 0; k < r->t.nselfcheck; k++) te += r->t.selfcheck[k].te_rows;
    fp8_doc_markdown(d, te ? "Every closed run's replay reproduces the scales the run cast with "
                             "(stream.csv's scale equal to te_scale, float32, exactly)."
                           : "No closed run's trace gives a te_scale: nothing to check.");
  }
  fp8_doc_table_begin(d, 4, (const char *[]){"recipe", "seed", "te_scale reproduced", "first difference"},
                      "lrrl");
  for (size_t k = 0; k < r->t.nselfcheck; k++) {
    const fp8_cl_selfcheck_row *q = &r->t.selfcheck[k];
    const fp8_cl_mismatch *m = &r->mismatch[k];
    char seed[24], repro[80], first[400] = "";
    snprintf(seed, sizeof seed, "%lld", (long long)q->seed);
    snprintf(repro, sizeof repro, "%lld of %lld rows", (long long)(q->te_rows - q->differ),
             (long long)q->te_rows);
    if (!q->te_rows) snprintf(repro, sizeof repro, "no te_scale given");
    if (q->differ)
      snprintf(first, sizeof first, "step %lld micro %lld `%s`: %.9g, te_scale %.9g",
               (long long)m->step, (long long)m->micro, m->tensor, (double)m->scale,
               (double)m->te_scale);
    fp8_doc_table_row(d, (const char *[]){q->label, seed, repro, first});
  }
}

static void loss(fp8_doc *d, const cl_study *s, const fp8_cl_result *r) {
  const fp8_study *st = &s->st;
  char a[32], b[32], c[32], e[32], f[32], g[32];
  fp8_doc_heading(d, 2, "Loss");
  fp8_doc_markdownf(d,
                    "Final loss: the mean training loss over steps %lld..%lld (the last 10%%). "
                    "Gap: a run's final loss minus the mean of the high-precision seeds' (%s). "
                    "The noise band is the high-precision seeds' own gaps: [%s, %s]. A recipe "
                    "whose mean gap lies outside it trains measurably differently.",
                    (long long)((9 * st->steps + 9) / 10), (long long)st->steps - 1,
                    loss_num(r->hp_mean, a, sizeof a), num(r->band_lo, b, sizeof b),
                    num(r->band_hi, c, sizeof c));
  fp8_doc_table_begin(d, 7,
                      (const char *[]){"recipe", "mean gap", "gap over seeds", "noise band",
                                       "eval loss, FP8 forward", "eval loss, high-precision forward",
                                       "FP8 - high precision"},
                      "lrrlrrr");
  char band[80];
  snprintf(band, sizeof band, "%s .. %s", num(r->band_lo, a, sizeof a), num(r->band_hi, b, sizeof b));
  double hp_eval = 0;
  for (size_t k = 0; k < st->nseeds; k++) hp_eval += r->t.loss[k].eval_loss_hp / (double)st->nseeds;
  fp8_doc_table_row(d, (const char *[]){"hp", "0", band, "(the band)", "n/a",
                                        loss_num(hp_eval, c, sizeof c), "n/a"});
  for (size_t l = 0; l < st->nlabels; l++) {
    const fp8_cl_label_summary *ls = &r->labels[l];
    char range[80];
    snprintf(range, sizeof range, "%s .. %s", num(ls->gap_min, a, sizeof a),
             num(ls->gap_max, b, sizeof b));
    fp8_doc_table_row(d, (const char *[]){st->labels[l], num(ls->mean_gap, c, sizeof c), range,
                                          ls->inside_band ? "inside" : "**outside**",
                                          loss_num(ls->eval_fp8, e, sizeof e),
                                          loss_num(ls->eval_hp, f, sizeof f),
                                          num(ls->eval_fp8 - ls->eval_hp, g, sizeof g)});
  }
  double width = r->band_hi - r->band_lo;
  for (size_t l = 0; l < st->nlabels; l++) {
    const fp8_cl_label_summary *ls = &r->labels[l];
    double diff = ls->eval_fp8 - ls->eval_hp;
    if (!(fabs(diff) > width)) continue;
    fp8_doc_markdownf(d,
                      "`%s`: its weights evaluated with the FP8 forward give a held-out loss %s "
                      "than with the high-precision forward (by %s, more than the noise band's "
                      "width %s): evaluating in high precision misjudges this recipe, whose "
                      "saturating casts are part of what the model computes.",
                      st->labels[l], diff > 0 ? "higher" : "lower", num(fabs(diff), a, sizeof a),
                      num(width, b, sizeof b));
  }
  fp8_doc_image(d, "plots/closedloop_loss.png", "training loss over steps",
                "Training loss (running mean over 10 steps): the high-precision seeds' min and "
                "max, each recipe's mean over its seeds.");
}

static void rates(fp8_doc *d, const cl_study *s, const fp8_cl_result *r) {
  const fp8_study *st = &s->st;
  char a[32], b[32], c[32], n1[24], n2[24], seed[24];
  fp8_doc_heading(d, 2, "Clipping, underflow and overflow: open against closed");
  fp8_doc_markdownf(d,
                    "Over the (tensor, step) snapshot rows present in both the open run and the "
                    "closed replay: clipped rate and underflow rate are clipped and underflowed "
                    "elements over finite elements (analysis.csv's rates). Overflow step share: "
                    "of the stream rows (tensor, step, micro-batch) with amax > 0 and a finite "
                    "overshoot, those with overshoot > 0. Source `open` is the open run, "
                    "matched with seed %lld's replay; `closed` rows of other seeds show the "
                    "spread.",
                    (long long)st->open_seed);
  fp8_doc_table_begin(d, 8,
                      (const char *[]){"recipe", "source", "seed", "clipped rate",
                                       "underflow rate", "overflow step share", "rows",
                                       "stream rows"},
                      "llrrrrrr");
  for (size_t k = 0; k < r->t.nrates; k++) {
    const fp8_cl_rates_row *q = &r->t.rates[k];
    snprintf(seed, sizeof seed, "%lld", (long long)q->seed);
    snprintf(n1, sizeof n1, "%lld", (long long)q->rows);
    snprintf(n2, sizeof n2, "%lld", (long long)q->stream_rows);
    fp8_doc_table_row(d, (const char *[]){q->label, q->source, seed,
                                          num(q->clipped_rate, a, sizeof a),
                                          num(q->underflow_rate, b, sizeof b),
                                          num(q->overflow_step_share, c, sizeof c), n1, n2});
  }
  char text[1024] = "";
  for (size_t k = 0; k < r->t.nspearman; k++) {
    const fp8_cl_spearman_row *q = &r->t.spearman[k];
    size_t o = strlen(text);
    if (q->labels < 3)
      snprintf(text + o, sizeof text - o,
               "- `%s`: %lld recipe%s with both rates, fewer than 3: no rank correlation.\n",
               q->rate, (long long)q->labels, q->labels == 1 ? "" : "s");
    else
      snprintf(text + o, sizeof text - o, "- `%s`: Spearman's rho %s over %lld recipes.\n",
               q->rate, num(q->rho, a, sizeof a), (long long)q->labels);
  }
  fp8_doc_markdownf(d,
                    "Does the open loop rank the recipes as the closed loop does? Spearman's rank "
                    "correlation across recipes of the open against the closed (seed %lld) "
                    "rates (1: the same order):\n\n%s",
                    (long long)st->open_seed, text);
}

static void drift(fp8_doc *d, const cl_study *s, const fp8_cl_result *r, int drift_plot) {
  const fp8_study *st = &s->st;
  char a[32], b[32], c[32];
  fp8_doc_heading(d, 2, "Amax drift");
  fp8_doc_markdownf(d,
                    "Drift of a stream row: |amax closed / amax open - 1|, the closed run of "
                    "seed %lld against the open loop, over the rows with amax open > 0 and both "
                    "finite; per step its median and 90th percentile over the tensors "
                    "(closedloop_drift.csv).",
                    (long long)st->open_seed);
  if (!drift_plot) {
    fp8_doc_markdown(d, "No recipe has a delayed configuration: no stream rows, no drift.");
    return;
  }
  fp8_doc_image(d, "plots/closedloop_drift.png", "median amax drift over steps",
                "Median amax drift per step and recipe; the dashed line is 10%. On a log axis a step "
                "of zero drift is not drawn.");
  fp8_doc_table_begin(d, 4,
                      (const char *[]){"recipe", "worst median drift", "at step",
                                       "first step above 10%"},
                      "lrrr");
  for (size_t l = 0; l < st->nlabels; l++) {
    const fp8_cl_label_summary *ls = &r->labels[l];
    snprintf(b, sizeof b, "%lld", (long long)ls->worst_drift_step);
    snprintf(c, sizeof c, "%lld", (long long)ls->diverge_step);
    fp8_doc_table_row(d, (const char *[]){st->labels[l], num(ls->worst_drift, a, sizeof a),
                                          ls->worst_drift_step >= 0 ? b : "n/a",
                                          ls->diverge_step >= 0 ? c : "none"});
  }
}

/* One sentence per label: from which step the recorded trace stops speaking for its run. */
static void speaks_for(fp8_doc *d, const cl_study *s, const fp8_cl_result *r, size_t l) {
  const fp8_study *st = &s->st;
  const fp8_cl_label_summary *ls = &r->labels[l];
  char a[32], low[256] = "";
  for (size_t k = 0; k < r->t.nevents; k++) {
    const fp8_cl_events_row *e = &r->t.events[k];
    if (e->label != st->labels[l] || !(e->recall < FP8_CL_RECALL_LIMIT)) continue;
    size_t o = strlen(low);
    snprintf(low + o, sizeof low - o, "%s%s (%.2g)", o ? ", " : "", e->period, e->recall);
  }
  char recall[320] = "";
  if (*low)
    snprintf(recall, sizeof recall, " Recall below 0.5, the open loop missing most of the run's "
             "overflows: %s.", low);
  if (!ls->has_stream)
    fp8_doc_markdownf(d, "- `%s`: no delayed configuration, no stream to compare.",
                      st->labels[l]);
  else if (ls->diverge_step >= 0)
    fp8_doc_markdownf(d,
                      "- `%s`: the recorded trace speaks for the FP8 run up to step %lld; from "
                      "step %lld on, the median amax drift exceeds 10%%.%s",
                      st->labels[l], (long long)ls->diverge_step - 1,
                      (long long)ls->diverge_step, recall);
  else
    fp8_doc_markdownf(d,
                      "- `%s`: the recorded trace speaks for the FP8 run throughout: the median "
                      "amax drift stays within 10%% (worst %s).%s",
                      st->labels[l], num(ls->worst_drift, a, sizeof a), recall);
}

static void events(fp8_doc *d, const cl_study *s, const fp8_cl_result *r) {
  const fp8_study *st = &s->st;
  char a[32], b[32], n[3][24];
  fp8_doc_heading(d, 2, "Overflow events");
  fp8_doc_markdownf(d,
                    "An event is a stream row (tensor, step, micro-batch) with overshoot > 0. "
                    "Precision: of the open loop's events, the share that happened in the "
                    "closed run (seed %lld) too; recall: of the closed run's events, the share "
                    "the open loop predicted. %s",
                    (long long)st->open_seed,
                    st->has_spike ? "Periods: before the spike, during it, after it, and all "
                                    "steps."
                                  : "One period, all steps (the study has no spike).");
  fp8_doc_table_begin(d, 7,
                      (const char *[]){"recipe", "period", "open events", "closed events",
                                       "both", "precision", "recall"},
                      "llrrrrr");
  for (size_t k = 0; k < r->t.nevents; k++) {
    const fp8_cl_events_row *e = &r->t.events[k];
    snprintf(n[0], sizeof n[0], "%lld", (long long)e->open_events);
    snprintf(n[1], sizeof n[1], "%lld", (long long)e->closed_events);
    snprintf(n[2], sizeof n[2], "%lld", (long long)e->both);
    fp8_doc_table_row(d, (const char *[]){e->label, e->period, n[0], n[1], n[2],
                                          num(e->precision, a, sizeof a),
                                          num(e->recall, b, sizeof b)});
  }
  fp8_doc_markdown(d, "Where the recorded trace stops speaking for the FP8 run (the first step "
                      "whose median amax drift exceeds 10%):");
  for (size_t l = 0; l < st->nlabels; l++) speaks_for(d, s, r, l);
}

static void files(fp8_doc *d) {
  fp8_doc_heading(d, 2, "Files");
  fp8_doc_markdown(d,
                   "- `closedloop_loss.csv`: label, seed, final_loss, gap, eval_loss_hp, "
                   "eval_loss_fp8\n"
                   "- `closedloop_rates.csv`: label, source, seed, clipped_rate, underflow_rate, "
                   "overflow_step_share, rows, stream_rows\n"
                   "- `closedloop_drift.csv`: label, step, tensors, median_drift, p90_drift\n"
                   "- `closedloop_events.csv`: label, period, open_events, closed_events, both, "
                   "precision, recall\n"
                   "- `closedloop_spearman.csv`: rate, labels, rho\n"
                   "- `closedloop_selfcheck.csv`: label, seed, te_rows, differ\n\n"
                   "docs/reference.md (\"fp8lab closedloop\") documents the columns; an empty "
                   "field is no value.");
  fp8_doc_set_target(d, FP8_DOC_NOTEBOOK);
  fp8_doc_code(d, "import pandas as pd\n"
                  "loss = pd.read_csv(\"closedloop_loss.csv\")\n"
                  "rates = pd.read_csv(\"closedloop_rates.csv\")\n"
                  "drift = pd.read_csv(\"closedloop_drift.csv\")\n"
                  "events = pd.read_csv(\"closedloop_events.csv\")\n"
                  "rates");
  fp8_doc_set_target(d, FP8_DOC_BOTH);
}

int cl_write_doc(const cl_study *s, const fp8_cl_result *r, const char *outdir, int drift_plot,
                 char *err, size_t errlen) {
  fp8_doc *d = fp8_doc_new();
  if (!d) return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  intro(d, s);
  selfcheck(d, r);
  loss(d, s, r);
  rates(d, s, r);
  drift(d, s, r, drift_plot);
  events(d, s, r);
  files(d);
  int rc = fp8_doc_write(d, outdir, "closedloop.md", "closedloop.ipynb", err, errlen);
  fp8_doc_free(d);
  return rc;
}
