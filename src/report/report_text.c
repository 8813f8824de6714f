/* report_text.c: the text of `fp8lab report` (doc.h, written as report.md and as the
 * notebook): the findings about the reference configuration and the spike, the
 * recommendations (analysis_recommend.c's, and the GEMM error's), the plots with their
 * captions (report_plots.c), the tables per configuration and role, and the notebook's cells
 * that load the CSV files. */
#include "report_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

#define fmt_rate rep_fmt_rate
#define fmt_db rep_fmt_db

/* ------------------------------------------------------------------ the other sections */

/* Current scaling where the run has no configuration of it: not run, or (no snapshots) run but
 * without rows of its own: its scale is each step's own amax, its largest element never clips. */
static const char *current_words(const rep_t *r) {
  return r->stream_only ? "current scaling (no stream rows: it never clips)"
                        : "current scaling (not in this run)";
}

/* The configurations (distinct, not bf16, passing ok when given) tied with best within their
 * intervals (rep_gemm_tied, issue 42), as "; tied within the interval with a; b" (empty: none):
 * a ranking of sampled errors names its ties instead of choosing on a point estimate. */
static const char *tied_with(const rep_t *r, size_t best, const unsigned char *ok, char *buf,
                             size_t len) {
  size_t at = 0, n = 0;
  buf[0] = 0;
  for (size_t c = 0; c < r->ncfg && at < len; c++) {
    const cfg_t *x = &r->cfgs[c];
    if (c == best || x->same_as != c || x->key.kind == FP8_KIND_BF16 || (ok && !ok[c]) ||
        isnan(x->gemm_median[0]) || !rep_gemm_tied(&r->cfgs[best], x))
      continue;
    if (n++ >= 4) continue; /* four names, then how many more */
    /* "; " between names: a label may hold a comma ("delayed m=2 recent, any L") */
    int k = snprintf(buf + at, len - at, "%s%s", n > 1 ? "; " : "; tied within the interval with ",
                     x->dlabel);
    if (k > 0) at += (size_t)k;
  }
  if (n > 4 && at < len) snprintf(buf + at, len - at, " and %zu more", n - 4);
  return buf;
}

static void add_recommendations(const rep_t *r, fp8_doc *d) {
  char b1[64], b2[64], b3[64];
  fp8_doc_heading(d, 2, "Recommendations per role and per tensor");
  if (r->stream_only)
    fp8_doc_markdownf(d,
                      "Budget (no snapshots: the step budget alone): a delayed configuration fits a "
                      "tensor when its largest element clips at no more than %.3g of its %s "
                      "(`step_budget`, counted over %s); warm-up does not count. Per tensor: at each "
                      "history length the smallest margin that fits, then the shorter history; when "
                      "none fits, current scaling. Per role: one delayed setting for all tensors of "
                      "the role, the one that fits the most of them. The column \"decided by\" says "
                      "which criterion chose each row over the runner-up.",
                      r->rec.budgets.step, rep_unit(r, 1),
                      rep_micro(r) ? "every micro-batch of the replay (stream.csv)"
                                   : "every step of the replay (stream.csv)");
  else
  fp8_doc_markdownf(d,
                    "Budgets: a delayed configuration fits a tensor when at most %.3g of its values "
                    "clip at the snapshot steps (value budget, `overflow_budget`) and the largest "
                    "element clips at no more than %.3g of its %s (step budget, `step_budget`, "
                    "counted over %s); warm-up does not count. Per tensor: at each history "
                    "length the smallest margin that fits, and of those the best 5th-percentile SNR "
                    "over steps (differences under %.2f dB are ties, broken by the lower underflow "
                    "rate, then the shorter history); when none fits, current scaling. Per role: one "
                    "delayed setting for all tensors of the role, the one that fits the most of them "
                    "(then the same criteria). The column \"decided by\" says which criterion chose "
                    "each row over the runner-up.",
                    r->rec.budgets.value, r->rec.budgets.step, rep_unit(r, 1),
                    rep_micro(r) ? "every micro-batch of the replay (stream.csv)"
                    : r->have_stream ? "every step of the replay (stream.csv)" : "the snapshot steps",
                    FP8_ANALYSIS_SNR_TIE_DB);
  char res[800];
  rep_budget_resolution(r, res, sizeof res);
  if (res[0]) fp8_doc_markdown(d, res);
  char hclip[64]; /* a fraction of micro-batches under gradient accumulation (issue 42) */
  snprintf(hclip, sizeof hclip, "clipped %s (worst tensor)", rep_unit(r, 1));
  const char *hdr[] = {"role", "setting", "fits", "clipped rate (worst tensor)", hclip,
                       "p5 SNR (dB, mean)", "decided by", "does not fit"};
  fp8_doc_table_begin(d, 8, hdr, "llrrrrll");
  for (size_t i = r->rec.ntensor_recs; i < r->rec.nrecs; i++) {
    const fp8_recommendation *x = &r->rec.recs[i];
    char setting[256], fits[64];
    if (!x->in_run) snprintf(setting, sizeof setting, "%s", current_words(r));
    else if (x->key.kind == FP8_KIND_DELAYED)
      snprintf(setting, sizeof setting, "%s: history_len %d, margin %d, %s", x->key.recipe,
               (int)x->key.history_len, (int)x->key.margin,
               fp8_amax_compute_name(x->key.amax_compute));
    else snprintf(setting, sizeof setting, "%s (current scaling)", x->key.recipe);
    snprintf(fits, sizeof fits, "%lld of %lld", (long long)x->covers, (long long)x->of);
    char b4[64], misfit[512] = "";
    size_t nm = 0;
    for (size_t k = 0; k < x->nmisfits && nm < sizeof misfit; k++)
      nm += (size_t)snprintf(misfit + nm, sizeof misfit - nm, "%s%s", k ? ", " : "", x->misfits[k]);
    const char *cells[] = {x->name, setting, fits, fmt_rate(x->clipped_rate, b1, sizeof b1),
                           fmt_rate(x->clip_step_rate, b4, sizeof b4), fmt_db(x->snr_p5, b2, sizeof b2),
                           x->decided_by ? x->decided_by : "", misfit};
    fp8_doc_table_row(d, cells);
  }
  size_t ncur = 0;
  for (size_t i = 0; i < r->rec.ntensor_recs; i++)
    if (!r->rec.recs[i].meets_budget) ncur++;
  if (ncur) {
    fp8_doc_markdownf(d, "**%zu tensor%s need%s current scaling**: no delayed configuration of this run fits "
                      "%s within %s.",
                      ncur, ncur == 1 ? "" : "s", ncur == 1 ? "s" : "", ncur == 1 ? "it" : "them",
                      r->stream_only ? "the step budget" : "both budgets");
    const char *h2[] = {"tensor", "best delayed clipped rate", "recommended"};
    fp8_doc_table_begin(d, 3, h2, "lrl");
    for (size_t i = 0; i < r->rec.ntensor_recs; i++) {
      const fp8_recommendation *x = &r->rec.recs[i];
      if (x->meets_budget) continue;
      const char *cells[] = {x->name, fmt_rate(x->best_delayed_overflow, b3, sizeof b3),
                             x->in_run ? x->key.recipe : current_words(r)};
      fp8_doc_table_row(d, cells);
    }
  } else {
    fp8_doc_markdownf(d, "Every tensor has a delayed configuration within %s (recommendations.csv "
                         "lists the best one per tensor, with the criterion that decided).",
                      r->stream_only ? "the step budget" : "both budgets");
  }
  /* with gemm.csv: the configuration that keeps the overflow budget over all tensors and gives
   * the smallest GEMM error (the error that finally reaches the training) */
  size_t best = (size_t)-1, bestd = (size_t)-1;
  double bv = INFINITY, bdv = INFINITY;
  for (size_t c = 0; c < r->ncfg; c++) {
    const cfg_t *x = &r->cfgs[c];
    if (x->same_as != c || x->key.kind == FP8_KIND_BF16) continue; /* once; FP8 ones only */
    double m = (x->gemm_median[0] + x->gemm_median[1] + x->gemm_median[2]) / 3.0;
    double ov = x->finite ? (double)x->clipped / (double)x->finite : NAN;
    if (isnan(m) || !(ov <= r->rec.overflow_budget)) continue;
    if (m < bv) { bv = m; best = c; }
    if (x->key.kind == FP8_KIND_DELAYED && !x->mixed && m < bdv) { bdv = m; bestd = c; }
  }
  if (best != (size_t)-1) {
    char tie[1024];
    unsigned char *ok = calloc(r->ncfg + 1, 1); /* within the value budget */
    for (size_t c = 0; ok && c < r->ncfg; c++) {
      const cfg_t *x = &r->cfgs[c];
      ok[c] = x->finite && (double)x->clipped / (double)x->finite <= r->rec.overflow_budget;
    }
    fp8_doc_markdownf(d,
                      "Taking the GEMM error into account: among the configurations whose clipped rate over "
                      "all tensors is within the value budget, **%s** gives the smallest GEMM error (mean of the "
                      "median fprop, dgrad and wgrad relative errors: %.3g%s)%s%s%s.",
                      r->cfgs[best].dlabel, bv, ok ? tied_with(r, best, ok, tie, sizeof tie) : "",
                      bestd != (size_t)-1 && bestd != best ? "; the best delayed one is " : "",
                      bestd != (size_t)-1 && bestd != best ? r->cfgs[bestd].dlabel : "",
                      bestd != (size_t)-1 && bestd != best ? "" : "");
    free(ok);
    if (bestd != (size_t)-1 && bestd != best)
      fp8_doc_markdownf(d, "(%s: %.3g, %.1f%% more than %s.)", r->cfgs[bestd].dlabel, bdv, 100.0 * (bdv / bv - 1.0),
                        r->cfgs[best].dlabel);
  } else if (r->ncfg && !isnan(r->cfgs[0].gemm_median[0])) {
    fp8_doc_markdown(d, "Taking the GEMM error into account: no configuration keeps the value budget over "
                        "all tensors; see the GEMM error table.");
  }
}

static void add_gemm(const rep_t *r, fp8_doc *d) {
  size_t best = (size_t)-1, floor = (size_t)-1;
  double bestv = INFINITY;
  for (size_t c = 0; c < r->ncfg; c++) {
    const cfg_t *x = &r->cfgs[c];
    if (x->same_as != c) continue;
    double m = (x->gemm_median[0] + x->gemm_median[1] + x->gemm_median[2]) / 3.0;
    if (x->key.kind == FP8_KIND_BF16 && !isnan(m)) floor = c;
    else if (!isnan(m) && m < bestv) {
      bestv = m;
      best = c;
    }
  }
  if (best == (size_t)-1) return;
  char tie[1024];
  fp8_doc_heading(d, 2, "GEMM error");
  fp8_doc_markdownf(d,
                    "What finally matters is the error of the GEMM outputs: for every layer whose input, "
                    "weight and grad_output were captured, fprop, dgrad and wgrad computed from the "
                    "dequantized FP8 operands (block recipes with their blocks along each "
                    "GEMM's reduction dimension, as TransformerEngine lays them out) against the original "
                    "operands (double). Lowest mean of the three medians: **%s** (%.3g%s).",
                    r->cfgs[best].dlabel, bestv, tied_with(r, best, NULL, tie, sizeof tie));
  if (floor != (size_t)-1)
    fp8_doc_markdownf(d, "**%s** casts nothing (kind bf16: the operands as captured): its error "
                      "is the FP32 GEMM's own against the double reference, the floor under "
                      "every FP8 configuration.", r->cfgs[floor].dlabel);
  if (r->run.gemm_sampled && !isnan(r->gemm_halfwidth))
    fp8_doc_markdownf(d, "Each error is estimated from up to %lld x %lld output entries per GEMM "
                      "(`gemm_error = sampled`, rows and columns drawn by their operands' norms); "
                      "gemm.csv gives its 95%% interval, whose half-width is %.0f%% of the "
                      "estimate in the median row. `gemm_error = exact` computes every entry.",
                      (long long)r->run.gemm_sample, (long long)r->run.gemm_sample,
                      100.0 * r->gemm_halfwidth);
  if (r->ref >= 0 && !isnan(r->cfgs[r->ref].gemm_median[0]))
    fp8_doc_markdownf(d, "For comparison, %s: fprop %.3g, dgrad %.3g, wgrad %.3g.", r->cfgs[r->ref].label,
                      r->cfgs[r->ref].gemm_median[0], r->cfgs[r->ref].gemm_median[1], r->cfgs[r->ref].gemm_median[2]);
  rep_tc_intro(r, d);
  rep_gemm_mix_text(r, d);
  const char *hdr[] = {"configuration", "fprop", "dgrad", "wgrad"};
  fp8_doc_table_begin(d, 4, hdr, "lrrr");
  for (size_t c = 0; c < r->ncfg; c++) {
    if (r->cfgs[c].same_as != c) continue;
    char b[3][32];
    for (int g = 0; g < 3; g++) fmt_rate(r->cfgs[c].gemm_median[g], b[g], sizeof b[g]);
    const char *cells[] = {r->cfgs[c].dlabel, b[0], b[1], b[2]};
    fp8_doc_table_row(d, cells);
  }
  rep_tc_text(r, d);
}

/* Every recipe kind per role: overflow, underflow and SNR of each configuration over the
 * tensors of that role. */
static void add_roles_table(const rep_t *r, fp8_doc *d) {
  fp8_doc_heading(d, 2, "Recipes by role");
  fp8_doc_markdown(d, "Each configuration over the tensors of one role (warm-up steps left out): clipped "
                      "and flushed-to-zero values over all finite values of those tensors, the median "
                      "over the tensors of each tensor's 5th-percentile SNR, and the lowest; the median cosine "
                      "similarity of x and its dequantized cast (TransformerEngine's debug statistic, next "
                      "to SNR).");
  double *med = calloc(r->tab.ngroups + 1, sizeof *med);
  double *cosv = calloc(r->tab.ngroups + 1, sizeof *cosv);
  if (!med || !cosv) {
    free(med);
    free(cosv);
    return;
  }
  for (int role = FP8_ROLE_INPUT; role <= FP8_ROLE_UNKNOWN; role++) {
    int any = 0;
    for (size_t g = 0; g < r->tab.ngroups && !any; g++) any = (int)r->tab.groups[g].role == role;
    if (!any) continue;
    fp8_doc_heading(d, 3, role == FP8_ROLE_UNKNOWN ? "other tensors" : fp8_role_name((fp8_role)role));
    const char *hdr[] = {"configuration", "clipped rate", "underflow rate", "p5 SNR (dB, median)",
                         "p5 SNR (dB, lowest)", "cos sim (median)"};
    fp8_doc_table_begin(d, 6, hdr, "lrrrrr");
    for (size_t c = 0; c < r->ncfg; c++) {
      if (r->cfgs[c].same_as != c) continue;
      int64_t o = 0, u = 0, f = 0;
      size_t nm = 0, nco = 0;
      for (size_t g = 0; g < r->tab.ngroups; g++) {
        if (r->gcfg[g] != c || (int)r->tab.groups[g].role != role) continue;
        const fp8_group_stats *st = &r->an.stats[g];
        o += st->clipped;
        u += st->underflow;
        f += st->finite;
        if (st->snr_rows > 0) med[nm++] = st->snr_p5;
        if (!isnan(st->cos_median)) cosv[nco++] = st->cos_median;
      }
      if (f == 0 && nm == 0) continue;
      gsl_sort(med, 1, nm);
      gsl_sort(cosv, 1, nco);
      char b5[64];
      if (nco) snprintf(b5, sizeof b5, "%.6f", gsl_stats_median_from_sorted_data(cosv, 1, nco));
      else snprintf(b5, sizeof b5, "n/a");
      char b1[64], b2[64], b3[64], b4[64];
      const char *cells[] = {r->cfgs[c].dlabel, fmt_rate(f ? (double)o / (double)f : NAN, b1, sizeof b1),
                             fmt_rate(f ? (double)u / (double)f : NAN, b2, sizeof b2),
                             fmt_db(nm ? gsl_stats_median_from_sorted_data(med, 1, nm) : NAN, b3, sizeof b3),
                             fmt_db(nm ? med[0] : NAN, b4, sizeof b4), b5};
      fp8_doc_table_row(d, cells);
    }
  }
  free(med);
  free(cosv);
}

static void add_config_table(const rep_t *r, fp8_doc *d) {
  char b1[64], b2[64];
  fp8_doc_heading(d, 2, "All configurations");
  if (r->ndistinct < r->ncfg)
    fp8_doc_markdownf(d, "%zu distinct of %zu: most_recent ignores history_len and history 1 with max "
                      "is most_recent, so such configurations have the same scale at every step and are "
                      "shown once (steps.csv keeps a row for each).", r->ndistinct, r->ncfg);
  const char *hdr[] = {"configuration", "overflow rate (all tensors)", "clipped rate (all tensors)",
                       "median SNR (dB)"};
  fp8_doc_table_begin(d, 4, hdr, "lrrr");
  for (size_t c = 0; c < r->ncfg; c++) {
    const cfg_t *x = &r->cfgs[c];
    if (x->same_as != c) continue;
    char b3[64];
    const char *cells[] = {x->dlabel, fmt_rate(x->finite ? (double)x->overflow / (double)x->finite : NAN, b1, sizeof b1),
                           fmt_rate(x->finite ? (double)x->clipped / (double)x->finite : NAN, b3, sizeof b3),
                           fmt_db(x->snr_median, b2, sizeof b2)};
    fp8_doc_table_row(d, cells);
  }
}

/* The plots whose file names start with one of prefixes (and were not placed yet), in drawing
 * order: each plot in the section it supports. */
static void add_plots(const rep_t *r, fp8_doc *d, const char *img_prefix,
                      const char *const *prefixes, unsigned char *shown) {
  for (size_t i = 0; shown && i < r->charts.nplots; i++) {
    int match = 0;
    for (size_t k = 0; prefixes[k] && !match; k++)
      match = strncmp(r->charts.plots[i].file, prefixes[k], strlen(prefixes[k])) == 0;
    if (!match || shown[i]) continue;
    shown[i] = 1;
    char path[600];
    snprintf(path, sizeof path, "%s%s", img_prefix, r->charts.plots[i].file);
    fp8_doc_image(d, path, r->charts.plots[i].alt, r->charts.plots[i].caption);
  }
}

/* A table of contents (GitHub-style heading anchors: lower case, spaces to hyphens). */
static void add_contents(fp8_doc *d, int have_gemm, int have_cost, int stream_only, int moe,
                         int plan) {
  fp8_doc_markdownf(d, "Contents: [The answer](#the-answer) · [Findings](#findings) · %s"
                    "[Recommendations per role and per tensor](#recommendations-per-role-and-per-tensor)"
                    "%s%s%s%s · [Definitions](#definitions)",
                    moe ? "[Mixture-of-Experts](#mixture-of-experts) · " : "",
                    have_gemm ? " · [GEMM error](#gemm-error)" : "",
                    plan ? " · [Keeping layers in BF16](#keeping-layers-in-bf16)" : "",
                    stream_only ? "" : " · [Recipes by role](#recipes-by-role) · [All "
                                       "configurations](#all-configurations)",
                    have_cost ? " · [Cost per step (model)](#cost-per-step-model)" : "");
}

/* The definitions every section uses, in a few lines (the whole text: docs/semantics.md). */
static void add_definitions(const rep_t *r, fp8_doc *d) {
  fp8_doc_heading(d, 2, "Definitions");
  fp8_doc_markdownf(d,
                    "- **overflow**: a finite value whose scaled value RN32(x·scale) is above the "
                    "format's max (E4M3 448, E5M2 57344): the cast saturates it.\n"
                    "- **clipped**: an overflow past the rounding midpoint above the max (E4M3 > 464, "
                    "E5M2 >= 61440): its error exceeds rounding. Current scaling's amax times "
                    "RN32(max/amax) can land a hair above the max: an overflow, never clipped.\n"
                    "- **overshoot**: log2(amax·scale / max) of a step: > 0 means the largest element "
                    "saturated, by that many binades (1 binade: a factor of 2).\n"
                    "- **warm-up**: a tensor's %s before a finite non-zero amax entered its delayed "
                    "history (step 0 of a fresh run, where TransformerEngine's scale is 1); the same "
                    "%s for every configuration; left out of rates and recommendations.\n"
                    "- **budgets**: a delayed configuration fits a tensor when at most %.3g of its "
                    "values clip at the snapshot steps and its largest element clips at no more than "
                    "%.3g of the %s it ran%s.\n%s"
                    "- **SNR**: 10·log10(Σx² / Σ(x − x̂)²) of a cast, x̂ the dequantized value; **p5 "
                    "SNR**: the 5th percentile over a tensor's snapshot steps.\n"
                    "- **history_len, margin, amax_compute**: TransformerEngine's DelayedScaling "
                    "parameters; the scale is RN32(max·2^-margin / amax), amax the max over the last "
                    "history_len %s (max) or the last one (most_recent).\n"
                    "- **hybrid**: E4M3 for the forward tensors (input, weight, output), E5M2 for the "
                    "backward ones (grad_output, grad_input).",
                    rep_unit(r, 1), rep_unit(r, 1), r->rec.budgets.value, r->rec.budgets.step,
                    rep_unit(r, 1),
                    r->stream_only ? " (a run without snapshots: the second alone)" : "",
                    rep_micro(r) ? "- **micro-batch**: under gradient accumulation, one forward "
                                   "and backward pass of a step; TransformerEngine casts and "
                                   "updates the delayed history at each, so history_len counts "
                                   "micro-batches; steps.csv's rows are per step (the snapshot "
                                   "holds all its micro-batches).\n" : "",
                    rep_unit(r, 1));
}

/* The tensors of the replay that have no rows (run.json's lists): named, with the reason, so
 * that the tensor count above is not read as every tensor of the trace. Up to LEFT_NAMED names
 * per reason; run.json has the rest. Nothing when none was left out. */
#define LEFT_NAMED 10
static void add_left_out(const rep_t *r, fp8_doc *d) {
  static const char *const what[FP8_LEFT_COUNT] = {
      [FP8_LEFT_NEVER_RAN] = "Never ran (no snapshot, amax 0 at every step of the replay: the "
                             "module was not called)",
      [FP8_LEFT_NO_SNAPSHOT] = "No snapshot at a selected step (a non-zero amax in amax.csv only: "
                               "stream.csv has their steps, the statistics need the data)",
      [FP8_LEFT_NO_RECIPE] = "Taken by no recipe section (the sections' tensors keys)",
  };
  size_t total = 0;
  for (int why = FP8_LEFT_NEVER_RAN; why < FP8_LEFT_COUNT; why++) total += r->run.nleft[why];
  if (!total) return;
  char buf[8192];
  size_t o = (size_t)snprintf(buf, sizeof buf, "**Left out of these numbers: %zu tensor%s** "
                              "of the replay, without rows in steps.csv and summary.csv.", total,
                              total == 1 ? "" : "s");
  for (int why = FP8_LEFT_NEVER_RAN; why < FP8_LEFT_COUNT; why++) {
    size_t n = r->run.nleft[why];
    if (!n) continue;
    o += (size_t)snprintf(buf + o, o < sizeof buf ? sizeof buf - o : 0, " %s, %zu: ", what[why], n);
    for (size_t k = 0; k < n && k < LEFT_NAMED; k++) {
      /* a code span, unless the name holds a backtick (names are printable: the name rules) */
      const char *q = strchr(r->run.left[why][k], '`') ? "" : "`";
      o += (size_t)snprintf(buf + o, o < sizeof buf ? sizeof buf - o : 0, "%s%s%s%s", k ? ", " : "",
                            q, r->run.left[why][k], q);
    }
    if (n > LEFT_NAMED)
      o += (size_t)snprintf(buf + o, o < sizeof buf ? sizeof buf - o : 0, " and %zu more",
                            n - LEFT_NAMED);
    o += (size_t)snprintf(buf + o, o < sizeof buf ? sizeof buf - o : 0, " (run.json: %s).",
                          fp8_left_keys[why]);
  }
  fp8_doc_markdown(d, buf);
}

/* The end of the first paragraph: the experiment's [recipe.*] sections and [analysis] keys
 * that the run could not serve (run.json's unserved: a run without snapshot rows), each named
 * with its line and why, so that the configuration count before it is not read as the whole
 * experiment. A new string ("" when none), NULL when out of memory. */
static char *unserved_text(const rep_t *r) {
  size_t nsec = 0, nkey = 0, len = 1024;
  long long ncfg = 0;
  for (size_t i = 0; i < r->run.nunserved; i++) {
    const fp8_unserved *u = &r->run.unserved[i];
    if (*u->key) nkey++;
    else nsec++, ncfg += u->configurations;
    len += strlen(u->section) + strlen(u->key) + strlen(u->label) + strlen(u->why) + 128;
  }
  char *buf = malloc(len);
  if (!buf || !r->run.nunserved) {
    if (buf) buf[0] = '\0';
    return buf;
  }
  char secs[160] = "", keys[96] = "";
  if (nsec)
    snprintf(secs, sizeof secs, "%lld more configuration%s (%zu [recipe.*] section%s)", ncfg,
             ncfg == 1 ? "" : "s", nsec, nsec == 1 ? "" : "s");
  if (nkey) snprintf(keys, sizeof keys, "%zu [analysis] key%s", nkey, nkey == 1 ? "" : "s");
  size_t o = (size_t)snprintf(buf, len, " **The experiment's %s%s%s had nothing to act on**: "
                              "this trace has no snapshots, only amaxes (run.json `unserved`; "
                              "`fp8lab run` warned of each): ", secs,
                              nsec && nkey ? " and " : "", keys);
  for (size_t i = 0; i < r->run.nunserved && o < len; i++) {
    const fp8_unserved *u = &r->run.unserved[i];
    const char *sep = i + 1 == r->run.nunserved ? "." : "; ";
    if (*u->key)
      o += (size_t)snprintf(buf + o, len - o, "`[%s] %s` (line %d): %s%s", u->section, u->key,
                            u->line, u->why, sep);
    else
      o += (size_t)snprintf(buf + o, len - o, "`[%s]` (label `%s`, kind %s, %lld configuration%s, "
                            "line %d): %s%s", u->section, u->label, u->kind, u->configurations,
                            u->configurations == 1 ? "" : "s", u->line, u->why, sep);
  }
  return buf;
}

fp8_doc *rep_build_doc(const rep_t *r, const char *img_prefix, const char *csv_prefix) {
  fp8_doc *d = fp8_doc_new();
  if (!d) return NULL;
  char title[400];
  snprintf(title, sizeof title, "fp8lab report: %s", r->run.name);
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
  char *unserved = unserved_text(r);
  if (r->stream_only)
    fp8_doc_markdownf(d,
                      "Replay of the %s through %zu FP8 scaling configurations (%zu distinct: "
                      "configurations with the same scale at every step are shown once): %zu "
                      "tensors over %zu steps of their amax stream. fp8lab %s.%s",
                      r->trace, r->ncfg, r->ndistinct, r->tab.ntensors, r->stream.nsteps,
                      FP8LAB_VERSION, unserved ? unserved : "");
  else
    fp8_doc_markdownf(d,
                      "Replay of the %s through %zu FP8 scaling configurations (%zu distinct: "
                      "configurations with the same scale at every step are shown once): %zu tensors at "
                      "%zu snapshot steps (%zu rows of steps.csv). fp8lab %s.%s",
                      r->trace, r->ncfg, r->ndistinct, r->tab.ntensors, nsteps, r->tab.nrows,
                      FP8LAB_VERSION, unserved ? unserved : "");
  free(unserved);
  char history[512]; /* the history a steps selection was replayed with */
  rep_history_sentence(r, history, sizeof history);
  if (*history) fp8_doc_markdownf(d, "%s", history);
  if (r->stream_only)
    fp8_doc_markdownf(d, "What these numbers cover: **this trace has no snapshots, only amaxes** "
                      "(amax.csv, or TransformerEngine's debug logs through `fp8lab import-te`): "
                      "the %s whose largest element overflowed or clipped, the overshoot and the "
                      "answer come from every %s of the replay (%zu, stream.csv: delayed "
                      "configurations), and the advice is decided by the step budget alone; value "
                      "rates, SNR and the GEMM error need the tensors' data: record snapshots "
                      "(fp8lab.capture's Recorder, or TransformerEngine's DumpTensors through "
                      "python -m fp8lab.te_dumps; docs/capture.md) and run again. Warm-up "
                      "is left out. Definitions: the last section, and docs/semantics.md in "
                      "fp8lab's source.", rep_unit(r, 1), rep_unit(r, 0),
                      rep_micro(r) ? r->stream.nmicro : r->stream.nsteps);
  else if (rep_micro(r))
    fp8_doc_markdownf(d, "What these numbers cover: this trace has micro-batches (gradient "
                      "accumulation: %zu micro-batches in %zu steps). TransformerEngine casts and "
                      "updates delayed scaling's amax history at every micro-batch, so "
                      "amax_history_len counts micro-batches, and so do the counts of overflowed or "
                      "clipped largest elements, over every micro-batch of the replay (stream.csv: "
                      "delayed configurations); the value rates and SNRs are over the %zu snapshot "
                      "steps (the tensors' data); warm-up is left out of both. Definitions: the last "
                      "section, and docs/semantics.md in fp8lab's source.", r->stream.nmicro,
                      r->stream.nsteps, nsteps);
  else if (r->have_stream)
    fp8_doc_markdownf(d, "What these numbers cover: the steps whose largest element overflowed or "
                      "clipped are counted over every step of the replay (%zu steps, stream.csv: "
                      "delayed configurations); the value rates and SNRs over the %zu snapshot steps "
                      "(the tensors' data); warm-up steps are left out of both. Definitions: the last "
                      "section, and docs/semantics.md in fp8lab's source.", r->stream.nsteps, nsteps);
  else
    fp8_doc_markdownf(d, "What these numbers cover: the %zu snapshot steps (this run has no "
                      "stream.csv); warm-up steps left out. Definitions: the last section, and "
                      "docs/semantics.md in fp8lab's source.", nsteps);
  if (r->run.has_te_log) {
    char logged[1024], spans[1024]; /* the log's interval, or each tensor's (report_te.c) */
    rep_te_interval_words(r, logged, sizeof logged, spans, sizeof spans);
    fp8_doc_markdownf(d, "**The amaxes come from TransformerEngine's debug statistics** (`fp8lab "
                      "import-te` or `python -m fp8lab.te_tb`), logged %s: %s; each amax is TE's "
                      "over all micro-batches of its iteration.", logged, spans);
    if (r->run.te_zero || r->run.te_coarse)
      fp8_doc_markdownf(d, "Precision of the log: %lld logged amaxes read 0.0000 (below 5e-5 in "
                        "TE's four decimals) and were left out (replayed as steps those tensors "
                        "did not run); %lld kept fewer than 3 significant digits (te_log.json "
                        "counts both per tensor). TE's TensorBoard output has them in float32 "
                        "(`python -m fp8lab.te_tb`).",
                        (long long)r->run.te_zero, (long long)r->run.te_coarse);
  }
  if (!r->stream_only) add_left_out(r, d); /* every tensor is "without a snapshot" there */
  unsigned char *shown = calloc(r->charts.nplots + 1, 1);
  int have_gemm = 0;
  for (size_t c = 0; c < r->ncfg; c++) have_gemm |= !isnan(r->cfgs[c].gemm_median[0]);
  add_contents(d, have_gemm, r->run.has_model_shape, r->stream_only, r->nexperts > 0,
               rep_bf16_plan(r, REP_PLAN_FP8) || rep_bf16_plan(r, REP_PLAN_FP4));
  rep_add_answer(r, d);
  rep_add_findings(r, d);
  rep_add_te_check(r, d);
  static const char *const story[] = {"amax_", "heatmap_overshoot_", "dynamic_range", "snr.png", NULL};
  static const char *const sweep[] = {"heatmap_clipped_", "heatmap_clipsteps_", "recipes_", NULL};
  static const char *const gemm[] = {"gemm_error", NULL};
  add_plots(r, d, img_prefix, story, shown);
  static const char *const moe[] = {"experts_", NULL};
  rep_add_moe(r, d);
  add_plots(r, d, img_prefix, moe, shown);
  add_recommendations(r, d);
  add_plots(r, d, img_prefix, sweep, shown);
  add_gemm(r, d);
  add_plots(r, d, img_prefix, gemm, shown);
  rep_add_fp4(r, d);
  rep_add_bf16_plan(r, d);
  if (!r->stream_only) { /* value rates and SNRs: none without snapshots */
    add_roles_table(r, d);
    add_config_table(r, d);
  }
  rep_add_cost(r, d);
  static const char *const any[] = {"", NULL};
  size_t left = 0;
  for (size_t i = 0; shown && i < r->charts.nplots; i++) left += !shown[i];
  if (left) {
    fp8_doc_heading(d, 2, "More plots");
    add_plots(r, d, img_prefix, any, shown);
  }
  free(shown);
  add_definitions(r, d);
  fp8_doc_markdown(d, "Files: steps.csv (per snapshot step, tensor and configuration), stream.csv (every "
                      "step of the replay, tensor and delayed configuration: amax, scale used, overshoot), "
                      "summary.csv, analysis.csv (statistics over steps), recommendations.csv, "
                      "histograms.csv, gemm.csv (when the trace has layer triplets), run.json.");
  rep_add_notebook(r, d, csv_prefix);
  return d;
}
