/* report_text.c: the text of `fp8lab report` (doc.h, written as report.md and as the
 * notebook): the findings about the reference configuration and the spike, the
 * recommendations (analysis_recommend.c's, and the GEMM error's), the plots with their
 * captions (report_plots.c), the tables per configuration and role, and the notebook's cells
 * that load the CSV files. */
#include "report_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

/* A rate as the tables show it: n/a, 0 or 3 significant digits. */
static const char *fmt_rate(double v, char *buf, size_t n) {
  if (isnan(v)) snprintf(buf, n, "n/a");
  else if (v == 0) snprintf(buf, n, "0");
  else snprintf(buf, n, "%.3g", v);
  return buf;
}

/* An SNR in dB: n/a, "exact" at the cap, else one decimal. */
static const char *fmt_db(double v, char *buf, size_t n) {
  if (isnan(v)) snprintf(buf, n, "n/a");
  else if (v >= FP8_ANALYSIS_SNR_CAP_DB) snprintf(buf, n, "exact");
  else snprintf(buf, n, "%.1f", v);
  return buf;
}

/* ------------------------------------------------------------------ findings */

/* The worst event: the spike's amax against what the delayed scale could represent. */
static void findings_spike(rep_t *r, fp8_doc *d) {
  char b1[64], b2[64];
  const fp8_step_row *row = &r->tab.rows[r->spike_row];
  const fp8_steps_group *gr = &r->tab.groups[r->spike_group];
  double fits = fp8_format_max(row->format) / row->scale;
  const fp8_step_row *cr =
      r->cur >= 0 ? rep_row_at(r, rep_group_of(r, gr->tensor, (size_t)r->cur), row->step) : NULL;
  fp8_doc_markdownf(d,
                    "The worst event: **%s at step %lld** reached amax %.4g while the delayed scale, "
                    "taken from earlier steps, could represent only %.4g (%.2g binades too small a "
                    "range): %lld of %lld values saturated and the SNR of the cast fell to %s dB%s%s%s.",
                    gr->tensor, (long long)row->step, row->amax, fits, log2(row->amax / fits),
                    (long long)row->overflow, (long long)row->n, fmt_db(row->snr_db, b1, sizeof b1),
                    cr ? " (current scaling: " : "", cr ? fmt_db(cr->snr_db, b2, sizeof b2) : "",
                    cr ? " dB)" : "");
}

/* Every tensor hit at the spike step, and how long the spike tensor's scale stayed stale. */
static void findings_after_spike(rep_t *r, fp8_doc *d) {
  const fp8_step_row *srow = &r->tab.rows[r->spike_row];
  char list[2048] = "";
  size_t nl = 0, nhit = 0;
  for (size_t g = 0; g < r->tab.ngroups; g++) {
    if (r->gcfg[g] != (size_t)r->ref) continue;
    const fp8_step_row *row = rep_row_at(r, (ptrdiff_t)g, srow->step);
    if (!row || row->overflow <= 1) continue;
    nhit++;
    nl += (size_t)snprintf(list + nl, nl < sizeof list ? sizeof list - nl : 0, "%s%s (%lld values)",
                           nhit > 1 ? ", " : "", r->tab.groups[g].tensor, (long long)row->overflow);
    if (nl >= sizeof list) nl = sizeof list - 1;
  }
  if (nhit)
    fp8_doc_markdownf(d, "At step %lld, %zu tensor%s saturated more than one value: %s.", (long long)srow->step,
                      nhit, nhit == 1 ? "" : "s", list);
  const fp8_steps_group *gr = &r->tab.groups[r->spike_group];
  int64_t stale = 0, until = -1, n_after = 0, uf_after = 0, fin_after = 0, uf_before = 0, fin_before = 0;
  int running = 1;
  for (size_t i = 0; i < gr->nrows; i++) {
    const fp8_step_row *row = fp8_steps_group_row(&r->tab, gr, i);
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
                      stale == n_after ? ", the end of the run" : "", (double)uf_before / (double)fin_before,
                      (double)uf_after / (double)fin_after);
}

/* The tensors that overflow under the reference configuration (ov[0..nov), worst first). */
static void findings_table(rep_t *r, fp8_doc *d, const ov_t *ov, size_t nov) {
  char b3[64], b4[64], b5[64];
  const cfg_t *ref = &r->cfgs[r->ref];
  fp8_doc_markdownf(d, "Tensors that overflow under %s, most saturated values first:", ref->label);
  const char *hdr[] = {"tensor", "role", "steps with overflow", "longest run (steps)", "first overflow step",
                       "overflow rate", "median SNR (dB)", "median SNR, current (dB)"};
  fp8_doc_table_begin(d, 8, hdr, "llrrrrrr");
  for (size_t i = 0; i < nov && i < 25; i++) {
    const fp8_steps_group *gr = &r->tab.groups[ov[i].g];
    const fp8_group_stats *s = &r->an.stats[ov[i].g];
    char c2[32], c3[32], c4[32];
    snprintf(c2, sizeof c2, "%lld of %lld", (long long)s->steps_with_overflow, (long long)s->steps);
    snprintf(c3, sizeof c3, "%lld", (long long)s->longest_overflow_run);
    snprintf(c4, sizeof c4, "%lld", (long long)s->first_overflow_step);
    ptrdiff_t gc = r->cur >= 0 ? rep_group_of(r, gr->tensor, (size_t)r->cur) : -1;
    const char *cells[] = {gr->tensor, fp8_role_name(gr->role), c2, c3, c4, fmt_rate(s->overflow_rate, b3, sizeof b3),
                           fmt_db(s->snr_median, b4, sizeof b4),
                           gc >= 0 ? fmt_db(r->an.stats[gc].snr_median, b5, sizeof b5) : "n/a"};
    fp8_doc_table_row(d, cells);
  }
  if (nov > 25) fp8_doc_markdownf(d, "... and %zu more (see analysis.csv).", nov - 25);
}

/* Staleness: the worst scale lag of the reference configuration. */
static void findings_lag(rep_t *r, fp8_doc *d) {
  double worst = 0;
  ptrdiff_t wg = -1;
  for (size_t g = 0; g < r->tab.ngroups; g++)
    if (r->gcfg[g] == (size_t)r->ref && r->an.stats[g].lag_rows > 0 && r->an.stats[g].lag_worst < worst) {
      worst = r->an.stats[g].lag_worst;
      wg = (ptrdiff_t)g;
    }
  if (wg >= 0)
    fp8_doc_markdownf(d,
                      "Scale lag (log2 of the just-in-time scale over the delayed scale; negative: the "
                      "delayed scale was too large, values saturate once it is below -margin): the worst "
                      "is %.2f binades for %s; its median is %.2f.",
                      worst, r->tab.groups[wg].tensor, r->an.stats[wg].lag_median);
}

static void add_findings(rep_t *r, fp8_doc *d) {
  size_t ntensors = r->tab.ntensors;
  fp8_doc_heading(d, 2, "Findings");
  if (r->ref < 0) {
    fp8_doc_markdown(d, "This run has no delayed-scaling configuration: there is nothing to compare.");
    return;
  }
  const cfg_t *ref = &r->cfgs[r->ref];
  ov_t *ov = calloc(r->tab.ngroups + 1, sizeof *ov);
  if (!ov) return;
  size_t nov = rep_overflowing(r, ov);
  size_t nreal = 0;
  for (size_t i = 0; i < nov; i++) {
    /* a single saturated element per step is the rounding of the scale itself */
    const fp8_group_stats *s = &r->an.stats[ov[i].g];
    if (s->overflow > s->steps_with_overflow) nreal++;
  }
  fp8_doc_markdownf(d,
                    "Reference configuration: **%s** (TransformerEngine's default is history_len 1024, "
                    "margin 0, amax_compute max). Under it, **%zu of %zu tensors** saturate values at "
                    "some snapshot step (%zu of them more than one value in a step; a single value per "
                    "step is the rounding of the scale itself and harmless).",
                    ref->label, nov, ntensors, nreal);
  if (r->spike_group >= 0 && r->tab.rows[r->spike_row].overflow > 0) {
    findings_spike(r, d);
    findings_after_spike(r, d);
  }
  if (nov) findings_table(r, d, ov, nov);
  findings_lag(r, d);
  free(ov);
}

/* ------------------------------------------------------------------ the other sections */

static void add_recommendations(rep_t *r, fp8_doc *d) {
  char b1[64], b2[64], b3[64];
  fp8_doc_heading(d, 2, "Recommendations");
  fp8_doc_markdownf(d,
                    "Per tensor: the configuration with the best median SNR among the delayed "
                    "configurations whose overflow rate is within the budget (%.3g of the values); "
                    "when none is, current scaling. Per role: one delayed setting for all tensors of "
                    "the role, the one that fits the budget for the most tensors.",
                    r->rec.overflow_budget);
  const char *hdr[] = {"role", "setting", "fits", "overflow rate (worst tensor)", "median SNR (dB)", "note"};
  fp8_doc_table_begin(d, 6, hdr, "llrrrl");
  for (size_t i = r->rec.ntensor_recs; i < r->rec.nrecs; i++) {
    const fp8_recommendation *x = &r->rec.recs[i];
    char setting[256], fits[64];
    if (!x->in_run) snprintf(setting, sizeof setting, "current scaling (not in this run)");
    else if (x->kind == FP8_KIND_DELAYED)
      snprintf(setting, sizeof setting, "%s: history_len %d, margin %d, %s", x->recipe, (int)x->history_len,
               (int)x->margin, fp8_amax_compute_name(x->amax_compute));
    else snprintf(setting, sizeof setting, "%s (current scaling)", x->recipe);
    snprintf(fits, sizeof fits, "%lld of %lld", (long long)x->covers, (long long)x->of);
    const char *cells[] = {x->name, setting, fits, fmt_rate(x->overflow_rate, b1, sizeof b1),
                           fmt_db(x->snr_median, b2, sizeof b2), x->note ? x->note : ""};
    fp8_doc_table_row(d, cells);
  }
  size_t ncur = 0;
  for (size_t i = 0; i < r->rec.ntensor_recs; i++)
    if (!r->rec.recs[i].meets_budget) ncur++;
  if (ncur) {
    fp8_doc_markdownf(d, "**%zu tensor%s need%s current scaling**: no delayed configuration of this run keeps "
                      "%s overflow rate within the budget.",
                      ncur, ncur == 1 ? "" : "s", ncur == 1 ? "s" : "", ncur == 1 ? "its" : "their");
    const char *h2[] = {"tensor", "best delayed overflow rate", "recommended"};
    fp8_doc_table_begin(d, 3, h2, "lrl");
    for (size_t i = 0; i < r->rec.ntensor_recs; i++) {
      const fp8_recommendation *x = &r->rec.recs[i];
      if (x->meets_budget) continue;
      const char *cells[] = {x->name, fmt_rate(x->best_delayed_overflow, b3, sizeof b3),
                             x->in_run ? x->recipe : "current scaling (not in this run)"};
      fp8_doc_table_row(d, cells);
    }
  } else {
    fp8_doc_markdown(d, "Every tensor has a delayed configuration within the budget (recommendations.csv "
                        "lists the best one per tensor).");
  }
  /* with gemm.csv: the configuration that keeps the overflow budget over all tensors and gives
   * the smallest GEMM error (the error that finally reaches the training) */
  size_t best = (size_t)-1, bestd = (size_t)-1;
  double bv = INFINITY, bdv = INFINITY;
  for (size_t c = 0; c < r->ncfg; c++) {
    const cfg_t *x = &r->cfgs[c];
    double m = (x->gemm_median[0] + x->gemm_median[1] + x->gemm_median[2]) / 3.0;
    double ov = x->finite ? (double)x->overflow / (double)x->finite : NAN;
    if (isnan(m) || !(ov <= r->rec.overflow_budget)) continue;
    if (m < bv) { bv = m; best = c; }
    if (x->kind == FP8_KIND_DELAYED && m < bdv) { bdv = m; bestd = c; }
  }
  if (best != (size_t)-1) {
    fp8_doc_markdownf(d,
                      "Taking the GEMM error into account: among the configurations whose overflow rate over "
                      "all tensors is within the budget, **%s** gives the smallest GEMM error (mean of the "
                      "median fprop, dgrad and wgrad relative errors: %.3g)%s%s%s.",
                      r->cfgs[best].label, bv, bestd != (size_t)-1 && bestd != best ? "; the best delayed one is " : "",
                      bestd != (size_t)-1 && bestd != best ? r->cfgs[bestd].label : "",
                      bestd != (size_t)-1 && bestd != best ? "" : "");
    if (bestd != (size_t)-1 && bestd != best)
      fp8_doc_markdownf(d, "(%s: %.3g, %.1f%% more than %s.)", r->cfgs[bestd].label, bdv, 100.0 * (bdv / bv - 1.0),
                        r->cfgs[best].label);
  } else if (r->ncfg && !isnan(r->cfgs[0].gemm_median[0])) {
    fp8_doc_markdown(d, "Taking the GEMM error into account: no configuration keeps the overflow budget over "
                        "all tensors; see the GEMM error table.");
  }
}

static void add_gemm(rep_t *r, fp8_doc *d) {
  size_t best = (size_t)-1;
  double bestv = INFINITY;
  for (size_t c = 0; c < r->ncfg; c++) {
    const cfg_t *x = &r->cfgs[c];
    double m = (x->gemm_median[0] + x->gemm_median[1] + x->gemm_median[2]) / 3.0;
    if (!isnan(m) && m < bestv) {
      bestv = m;
      best = c;
    }
  }
  if (best == (size_t)-1) return;
  fp8_doc_heading(d, 2, "GEMM error");
  fp8_doc_markdownf(d,
                    "What finally matters is the error of the GEMM outputs: for every layer whose input, "
                    "weight and grad_output were captured, fprop, dgrad and wgrad computed from the "
                    "dequantized FP8 operands (FP32 GEMM; block recipes with their blocks along each "
                    "GEMM's reduction dimension, as TransformerEngine lays them out) against the original "
                    "operands (double). Lowest mean of the three medians: **%s** (%.3g).",
                    r->cfgs[best].label, bestv);
  if (r->ref >= 0 && !isnan(r->cfgs[r->ref].gemm_median[0]))
    fp8_doc_markdownf(d, "For comparison, %s: fprop %.3g, dgrad %.3g, wgrad %.3g.", r->cfgs[r->ref].label,
                      r->cfgs[r->ref].gemm_median[0], r->cfgs[r->ref].gemm_median[1], r->cfgs[r->ref].gemm_median[2]);
  const char *hdr[] = {"configuration", "fprop", "dgrad", "wgrad"};
  fp8_doc_table_begin(d, 4, hdr, "lrrr");
  for (size_t c = 0; c < r->ncfg; c++) {
    char b[3][32];
    for (int g = 0; g < 3; g++) fmt_rate(r->cfgs[c].gemm_median[g], b[g], sizeof b[g]);
    const char *cells[] = {r->cfgs[c].label, b[0], b[1], b[2]};
    fp8_doc_table_row(d, cells);
  }
}

/* Every recipe kind per role: overflow, underflow and SNR of each configuration over the
 * tensors of that role. */
static void add_roles_table(rep_t *r, fp8_doc *d) {
  fp8_doc_heading(d, 2, "Recipes by role");
  fp8_doc_markdown(d, "Each configuration over the tensors of one role: saturated and flushed-to-zero values "
                      "over all finite values of those tensors, and the median over the tensors of each "
                      "tensor's median SNR.");
  double *med = calloc(r->tab.ngroups + 1, sizeof *med);
  if (!med) return;
  for (int role = FP8_ROLE_INPUT; role <= FP8_ROLE_UNKNOWN; role++) {
    int any = 0;
    for (size_t g = 0; g < r->tab.ngroups && !any; g++) any = (int)r->tab.groups[g].role == role;
    if (!any) continue;
    fp8_doc_heading(d, 3, role == FP8_ROLE_UNKNOWN ? "other tensors" : fp8_role_name((fp8_role)role));
    const char *hdr[] = {"configuration", "overflow rate", "underflow rate", "median SNR (dB)"};
    fp8_doc_table_begin(d, 4, hdr, "lrrr");
    for (size_t c = 0; c < r->ncfg; c++) {
      int64_t o = 0, u = 0, f = 0;
      size_t nm = 0;
      for (size_t g = 0; g < r->tab.ngroups; g++) {
        if (r->gcfg[g] != c || (int)r->tab.groups[g].role != role) continue;
        const fp8_group_stats *st = &r->an.stats[g];
        o += st->overflow;
        u += st->underflow;
        f += st->finite;
        if (st->snr_rows > 0) med[nm++] = st->snr_median;
      }
      if (f == 0 && nm == 0) continue;
      gsl_sort(med, 1, nm);
      char b1[64], b2[64], b3[64];
      const char *cells[] = {r->cfgs[c].label, fmt_rate(f ? (double)o / (double)f : NAN, b1, sizeof b1),
                             fmt_rate(f ? (double)u / (double)f : NAN, b2, sizeof b2),
                             fmt_db(nm ? gsl_stats_median_from_sorted_data(med, 1, nm) : NAN, b3, sizeof b3)};
      fp8_doc_table_row(d, cells);
    }
  }
  free(med);
}

static void add_config_table(rep_t *r, fp8_doc *d) {
  char b1[64], b2[64];
  fp8_doc_heading(d, 2, "All configurations");
  const char *hdr[] = {"configuration", "overflow rate (all tensors)", "median SNR (dB)"};
  fp8_doc_table_begin(d, 3, hdr, "lrr");
  for (size_t c = 0; c < r->ncfg; c++) {
    const cfg_t *x = &r->cfgs[c];
    const char *cells[] = {x->label, fmt_rate(x->finite ? (double)x->overflow / (double)x->finite : NAN, b1, sizeof b1),
                           fmt_db(x->snr_median, b2, sizeof b2)};
    fp8_doc_table_row(d, cells);
  }
}

fp8_doc *rep_build_doc(rep_t *r, const char *img_prefix, const char *csv_prefix) {
  fp8_doc *d = fp8_doc_new();
  if (!d) return NULL;
  char title[400];
  snprintf(title, sizeof title, "fp8lab report: %s", r->name);
  fp8_doc_heading(d, 1, title);
  size_t nsteps = 0;
  {
    int64_t last = -1;
    /* distinct snapshot steps (rows are ordered by step) */
    for (size_t i = 0; i < r->tab.nrows; i++)
      if (r->tab.rows[i].step != last) {
        last = r->tab.rows[i].step;
        nsteps++;
      }
  }
  fp8_doc_markdownf(d,
                    "Replay of the %s through %zu FP8 scaling configurations: %zu tensors at %zu "
                    "snapshot steps (%zu rows of steps.csv). fp8lab %s. Definitions of every number: "
                    "RECIPES.md (TransformerEngine's fused delayed-scaling update, CUDA's saturating casts).",
                    r->trace, r->ncfg, r->tab.ntensors, nsteps, r->tab.nrows, FP8LAB_VERSION);
  add_findings(r, d);
  add_recommendations(r, d);
  fp8_doc_heading(d, 2, "Plots");
  for (size_t i = 0; i < r->nplots; i++) {
    char path[600];
    snprintf(path, sizeof path, "%s%s", img_prefix, r->plots[i].file);
    fp8_doc_image(d, path, r->plots[i].alt, r->plots[i].caption);
  }
  add_gemm(r, d);
  add_roles_table(r, d);
  add_config_table(r, d);
  fp8_doc_markdown(d, "Files: steps.csv (per step, tensor and configuration), summary.csv, analysis.csv "
                      "(statistics over steps), recommendations.csv, histograms.csv, gemm.csv (when the "
                      "trace has layer triplets), run.json.");
  fp8_doc_set_target(d, FP8_DOC_NOTEBOOK);
  fp8_doc_heading(d, 2, "Explore the data");
  fp8_doc_markdownf(d, "The cells below load the run's CSV files (paths relative to this notebook in "
                       "the run's `notebooks_export/` folder).");
  char code[2048];
  snprintf(code, sizeof code,
           "import pandas as pd\n"
           "steps = pd.read_csv(\"%ssteps.csv\")\n"
           "analysis = pd.read_csv(\"%sanalysis.csv\")\n"
           "recommendations = pd.read_csv(\"%srecommendations.csv\")\n"
           "steps.head()",
           csv_prefix, csv_prefix, csv_prefix);
  fp8_doc_code(d, code);
  fp8_doc_code(d, "# tensors and configurations that saturate most\n"
                  "analysis.sort_values(\"overflow_rate\", ascending=False).head(20)");
  fp8_doc_code(d, "# one tensor's amax and scales over steps, per configuration\n"
                  "t = steps[\"tensor\"].iloc[0]\n"
                  "steps[steps[\"tensor\"] == t].pivot_table(index=\"step\", columns=[\"recipe\", \"history_len\", "
                  "\"margin\", \"amax_compute\"], values=\"scale\", dropna=False).head()");
  fp8_doc_set_target(d, FP8_DOC_BOTH);
  return d;
}
