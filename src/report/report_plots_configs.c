/* report_plots_configs.c: the plots across configurations (report_plots_internal.h): per role
 * heatmaps over history_len x margin of the two budgets' quantities (clipped values over
 * finite values; steps whose largest element clipped), per-configuration bars (clipped and
 * overflow rates, clipped steps, p5 SNR, each drawn only when the configurations differ) and
 * the GEMM error. */
#include "report_plots_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

#include "util.h"

/* ------------------------------------------------------------------ history x margin */

typedef struct {
  int32_t hs[64], ms[64];
  size_t nh, nm;
  char xl[64][16], yl[64][16];
  const char *xp[64], *yp[64];
} hm_axes;

static void sort_i32(int32_t *v, size_t n) {
  for (size_t i = 1; i < n; i++)
    for (size_t j = i; j > 0 && v[j] < v[j - 1]; j--) {
      int32_t t = v[j];
      v[j] = v[j - 1];
      v[j - 1] = t;
    }
}

/* Whether configuration x is a sibling of the reference (same recipe and amax_compute). */
static int sibling(const cfg_t *x, const cfg_t *b) {
  return x->key.kind == FP8_KIND_DELAYED && !x->mixed &&
         x->key.amax_compute == b->key.amax_compute && strcmp(x->key.recipe, b->key.recipe) == 0;
}

/* The history lengths and margins swept with the reference's recipe; 0 when fewer than 2 cells. */
static int hm_collect(const rep_t *r, hm_axes *A) {
  const cfg_t *b = &r->cfgs[r->ref];
  A->nh = A->nm = 0;
  for (size_t c = 0; c < r->ncfg; c++) {
    const cfg_t *x = &r->cfgs[c];
    if (!sibling(x, b)) continue;
    size_t i = 0;
    while (i < A->nh && A->hs[i] != x->key.history_len) i++;
    if (i == A->nh && A->nh < 64) A->hs[A->nh++] = x->key.history_len;
    i = 0;
    while (i < A->nm && A->ms[i] != x->key.margin) i++;
    if (i == A->nm && A->nm < 64) A->ms[A->nm++] = x->key.margin;
  }
  if (A->nh * A->nm < 2) return 0;
  sort_i32(A->hs, A->nh);
  sort_i32(A->ms, A->nm);
  for (size_t i = 0; i < A->nh; i++) {
    snprintf(A->xl[i], sizeof A->xl[i], "%d", (int)A->hs[i]);
    A->xp[i] = A->xl[i];
  }
  for (size_t i = 0; i < A->nm; i++) {
    snprintf(A->yl[i], sizeof A->yl[i], "%d", (int)A->ms[i]);
    A->yp[i] = A->yl[i];
  }
  return 1;
}

/* One role's cells: the clipped rate (clipped over finite values of all its tensors), the worst
 * tensor's clipped rate (what the value budget judges: each tensor on its own) and the worst
 * tensor's clip_step_rate. Returns whether any cell has data. */
static int hm_cells(const rep_t *r, const hm_axes *A, int role, double *clip, double *wclip,
                    double *steps) {
  const cfg_t *b = &r->cfgs[r->ref];
  int any = 0;
  for (size_t iy = 0; iy < A->nm; iy++)
    for (size_t ix = 0; ix < A->nh; ix++) {
      int64_t cl = 0, f = 0;
      double worst = NAN, wc = NAN;
      for (size_t g = 0; g < r->tab.ngroups; g++) {
        const cfg_t *c = &r->cfgs[r->gcfg[g]];
        if ((int)r->tab.groups[g].role != role || !sibling(c, b) ||
            c->key.history_len != A->hs[ix] || c->key.margin != A->ms[iy])
          continue;
        const fp8_group_stats *s = &r->an.stats[g];
        cl += s->clipped;
        f += s->finite;
        if (isfinite(s->clip_step_rate) && !(s->clip_step_rate <= worst)) worst = s->clip_step_rate;
        if (isfinite(s->clipped_rate) && !(s->clipped_rate <= wc)) wc = s->clipped_rate;
      }
      clip[iy * A->nh + ix] = f > 0 ? (double)cl / (double)f : NAN;
      wclip[iy * A->nh + ix] = wc;
      steps[iy * A->nh + ix] = worst;
      any |= f > 0;
    }
  return any;
}

/* judge: the values the budget outlines go by (NULL: v). */
static int hm_draw(const rep_t *r, rep_charts *drawn, const hm_axes *A, int role, int metric,
                   const double *v, const double *judge, char *err, size_t errlen) {
  const cfg_t *b = &r->cfgs[r->ref];
  const char *rname = rp_role_name(role);
  char title[512], file[200], path[4600];
  snprintf(title, sizeof title, "%s tensors, %s, amax_compute = %s: %s", rname, b->key.recipe,
           b->key.amax_compute == FP8_AMAX_MAX ? "max" : "most_recent",
           metric == 0 ? "clipped rate (clipped / finite values, all tensors)"
           : rep_micro(r) ? "micro-batches whose largest element clipped (worst tensor)"
                          : "steps whose largest element clipped (worst tensor)");
  snprintf(file, sizeof file, "heatmap_%s_%s.png", metric == 0 ? "clipped" : "clipsteps", rname);
  rp_plot_path(r, file, path, sizeof path);
  fp8_png_text text[] = {{"fp8lab-version", FP8LAB_VERSION},
                         {"experiment", r->run.name},
                         {"role", rname},
                         {"configuration", b->key.recipe},
                         {"plot", metric == 0 ? "clipped rate heatmap" : "clipped steps heatmap"}};
  fp8_chart ch = {.title = title,
                  .xlabel = rep_micro(r) ? "history_len (micro-batches)" : "history_len (steps)",
                  .ylabel = "margin (binades)", .text = text, .ntext = 5};
  fp8_heatmap hm = {.nx = A->nh, .ny = A->nm, .xlabels = A->xp, .ylabels = A->yp, .values = v,
                    .cell_format = "%.2g", .logscale = 1, .reverse = 1,
                    .colorbar_label = metric == 0 ? "clipped rate (fraction of values, log scale)"
                                      : rep_micro(r) ? "fraction of micro-batches clipped (log scale)"
                                                     : "fraction of steps clipped (log scale)",
                    .budget = metric == 0 ? r->rec.budgets.value : r->rec.budgets.step,
                    .budget_values = judge};
  char blabel[96];
  snprintf(blabel, sizeof blabel, "%s budget %.3g%s", metric == 0 ? "value" : "step",
           hm.budget, metric == 0 ? " (every tensor)" : "");
  hm.budget_label = blabel;
  int rc = !rp_my_chart(drawn) ? FP8_OK : fp8_plot_heatmap(path, &ch, &hm, err, errlen);
  if (rc) return rc;
  plot_t *p = rp_plot_add(drawn, file);
  if (!p) return FP8_OK;
  snprintf(p->alt, sizeof p->alt, "%s heatmap for %s tensors", metric == 0 ? "clipped rate" : "clipped steps",
           rname);
  if (metric == 0)
    snprintf(p->caption, sizeof p->caption,
             "Clipped rate of all %s tensors (values saturated past the rounding midpoint over finite "
             "values, snapshot steps without warm-up: the value budget's quantity) for each amax history "
             "length and margin; 0 takes the lightest colour; outlined cells are those where every "
             "%s tensor is within the value budget (%.3g, the line on the colour bar) on its own.",
             rname, rname, r->rec.budgets.value);
  else
    snprintf(p->caption, sizeof p->caption,
             "Fraction of the steps (%s, warm-up left out) whose largest element clipped, for the worst "
             "%s tensor (the step budget's quantity, which each tensor must meet), for each amax history "
             "length and margin; 0 takes the lightest colour; outlined cells are within the step "
             "budget (%.3g), the line on the colour bar.",
             rep_micro(r) ? "every micro-batch of stream.csv"
             : r->have_stream ? "every step of stream.csv" : "snapshot steps", rname,
             r->rec.budgets.step);
  drawn->nplots++;
  return FP8_OK;
}

static int differs(const double *v, size_t n, double tol);

/* Per role: heatmaps over history_len x margin of the clipped rate and of the clipped steps,
 * each only when its cells differ (a map of one value, e.g. weights that never clip, says
 * nothing). */
int rep_plot_config_maps(const rep_t *r, rep_charts *drawn, char *err, size_t errlen) {
  if (r->ref < 0) return FP8_OK;
  hm_axes A;
  if (!hm_collect(r, &A)) return FP8_OK;
  for (int role = FP8_ROLE_INPUT; role <= FP8_ROLE_UNKNOWN; role++) {
    double clip[64 * 64], wclip[64 * 64], steps[64 * 64];
    if (!hm_cells(r, &A, role, clip, wclip, steps)) continue;
    size_t n = A.nh * A.nm;
    int rc = differs(clip, n, 1e-12) ? hm_draw(r, drawn, &A, role, 0, clip, wclip, err, errlen)
                                     : FP8_OK;
    if (rc == FP8_OK && differs(steps, n, 1e-12))
      rc = hm_draw(r, drawn, &A, role, 1, steps, NULL, err, errlen);
    if (rc) return rc;
  }
  return FP8_OK;
}

/* ------------------------------------------------------------------ per configuration */

/* Whether the finite values differ by more than tol. */
static int differs(const double *v, size_t n, double tol) {
  double lo = INFINITY, hi = -INFINITY;
  for (size_t i = 0; i < n; i++)
    if (isfinite(v[i])) lo = fmin(lo, v[i]), hi = fmax(hi, v[i]);
  return lo <= hi && hi - lo > tol;
}

/* Per configuration (v: 6 rows of ncfg): clipped rate, overflow rate, mean and worst
 * clip_step_rate over tensors, median and worst p5 SNR over tensors. */
static int bar_values(const rep_t *r, const size_t *idx, size_t n, double *v) {
  double *tmp = malloc((r->tab.ngroups + 1) * sizeof *tmp);
  if (!tmp) return FP8_ENOMEM;
  for (size_t k = 0; k < n; k++) {
    size_t c = idx[k];
    int64_t cl = 0, ov = 0, f = 0;
    double sum = 0, worst = NAN, wsnr = NAN;
    size_t ns = 0, np5 = 0;
    for (size_t g = 0; g < r->tab.ngroups; g++) {
      if (r->gcfg[g] != c) continue;
      const fp8_group_stats *s = &r->an.stats[g];
      cl += s->clipped;
      ov += s->overflow;
      f += s->finite;
      if (isfinite(s->clip_step_rate)) {
        sum += s->clip_step_rate;
        ns++;
        if (!(s->clip_step_rate <= worst)) worst = s->clip_step_rate;
      }
      if (s->snr_rows > 0 && isfinite(s->snr_p5)) {
        tmp[np5++] = s->snr_p5;
        if (!(s->snr_p5 >= wsnr)) wsnr = s->snr_p5;
      }
    }
    gsl_sort(tmp, 1, np5);
    v[0 * n + k] = f ? (double)cl / (double)f : NAN;
    v[1 * n + k] = f ? (double)ov / (double)f : NAN;
    v[2 * n + k] = ns ? sum / (double)ns : NAN;
    v[3 * n + k] = worst;
    v[4 * n + k] = np5 ? gsl_stats_median_from_sorted_data(tmp, 1, np5) : NAN;
    v[5 * n + k] = wsnr;
  }
  free(tmp);
  return FP8_OK;
}

typedef struct {
  const char *file, *plot, *title, *ylabel, *alt, *caption;
  int logy;
  const char *l1, *l2;
  fp8_color c1, c2;
} bar_chart;

static const bar_chart bar_charts[3] = {
    {"recipes_overflow.png", "clipped and overflow rate per configuration",
     "Clipped and overflow rate per configuration (all tensors)", "fraction of values (log scale)",
     "clipped and overflow rate per configuration",
     "Per configuration, over all tensors and snapshot steps without warm-up: values clipped (saturated "
     "past the rounding midpoint: the value budget's quantity) and values overflowed (any saturation), "
     "each over the finite values; a missing bar is zero.",
     1, "clipped rate", "overflow rate", FP8_COLOR_VERMILLION, FP8_COLOR_SKYBLUE},
    {"recipes_clip_steps.png", "clipped steps per configuration",
     "Steps whose largest element clipped, per configuration (mean and worst tensor)",
     "fraction of steps (log scale)", "clipped steps per configuration",
     "Per configuration, the fraction of steps (every step of stream.csv for delayed configurations "
     "when the run has it, else the snapshot steps; warm-up left out) whose largest element clipped: "
     "the mean over tensors and the worst tensor (the step budget's quantity); a missing bar is zero.",
     1, "mean over tensors", "worst tensor", FP8_COLOR_BLUE, FP8_COLOR_VERMILLION},
    {"recipes_snr_p5.png", "p5 snr per configuration",
     "5th-percentile SNR per configuration (median and worst tensor)", "SNR (dB)",
     "p5 SNR per configuration",
     "Per configuration, each tensor's 5th-percentile SNR over its snapshot steps (warm-up left out): "
     "the median over tensors and the worst tensor (kind bf16, which casts nothing, is left out of "
     "these charts).",
     0, "median over tensors", "worst tensor", FP8_COLOR_BLUE, FP8_COLOR_VERMILLION}};

/* The per-configuration bar charts, each only when its values differ between configurations
 * (a chart of equal bars says nothing). */
int rep_plot_bars(const rep_t *r, rep_charts *drawn, char *err, size_t errlen) {
  if (r->ndistinct < 2) return FP8_OK;
  size_t n = 0;
  const char **cat = calloc(r->ncfg, sizeof *cat);
  size_t *idx = calloc(r->ncfg, sizeof *idx);
  double *v = calloc(6 * r->ncfg, sizeof *v);
  int rc = FP8_OK;
  if (!cat || !idx || !v) { rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory"); goto done; }
  /* each class of identical configurations once; kind bf16 casts nothing (no clipping, SNR
   * inf): not an FP8 choice, and its bar would only flatten the others */
  for (size_t c = 0; c < r->ncfg; c++)
    if (r->cfgs[c].same_as == c && r->cfgs[c].key.kind != FP8_KIND_BF16) {
      cat[n] = r->cfgs[c].dlabel;
      idx[n++] = c;
    }
  if (bar_values(r, idx, n, v) != FP8_OK) { rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory"); goto done; }
  for (int k = 0; k < 3 && rc == FP8_OK; k++) {
    const bar_chart *b = &bar_charts[k];
    double *v1 = v + (size_t)(2 * k) * n, *v2 = v1 + n;
    double tol = k == 2 ? 0.5 : 1e-12; /* dB; rates */
    if (!differs(v1, n, tol) && !differs(v2, n, tol)) continue;
    char path[4600];
    rp_plot_path(r, b->file, path, sizeof path);
    fp8_png_text text[] = {
        {"fp8lab-version", FP8LAB_VERSION}, {"experiment", r->run.name}, {"plot", b->plot}};
    /* under gradient accumulation the clipped steps chart counts micro-batches (each a cast) */
    int micro = k == 1 && rep_micro(r);
    fp8_chart ch = {.title = micro ? "Micro-batches whose largest element clipped, per configuration "
                                     "(mean and worst tensor)" : b->title,
                    .xlabel = "configuration",
                    .ylabel = micro ? "fraction of micro-batches (log scale)" : b->ylabel, .logy = b->logy,
                    .grid = 1, .text = text, .ntext = 3, .width = n > 16 ? 1600 : 1200, .height = 900};
    char refl[96];
    if (k < 2) { /* the budget the chart's first quantity is held to */
      ch.ref_y = k == 0 ? r->rec.budgets.value : r->rec.budgets.step;
      snprintf(refl, sizeof refl, "%s budget %g", k == 0 ? "value" : "step", ch.ref_y);
      ch.ref_label = refl;
    }
    fp8_bar_series bs[2] = {{v1, b->l1, b->c1}, {v2, b->l2, b->c2}};
    rc = !rp_my_chart(drawn) ? FP8_OK : fp8_plot_bars(path, &ch, cat, n, bs, 2, err, errlen);
    plot_t *p = rc ? NULL : rp_plot_add(drawn, b->file);
    if (p) {
      snprintf(p->alt, sizeof p->alt, "%s", b->alt);
      char extra[512] = ""; /* issue 42: NVFP4's scale-rounding overflow (report_fp4_text.c) */
      if (k == 0) rep_fp4_overflow_caption(r, extra, sizeof extra);
      if (micro)
        snprintf(p->caption, sizeof p->caption,
                 "Per configuration, the fraction of micro-batches (every micro-batch of stream.csv for "
                 "delayed configurations, each a cast; the snapshot steps for the other kinds; warm-up left "
                 "out) whose largest element clipped: "
                 "the mean over tensors and the worst tensor (the step budget's quantity, counted over "
                 "micro-batches); a missing bar is zero.");
      else
        snprintf(p->caption, sizeof p->caption, "%s%s", b->caption, extra);
      drawn->nplots++;
    }
  }
done:
  free(cat);
  free(idx);
  free(v);
  return rc;
}

/* GEMM error per configuration: median rel_error of fprop, dgrad and wgrad. */
int rep_plot_gemm(const rep_t *r, rep_charts *drawn, char *err, size_t errlen) {
  const char **cat = calloc(r->ncfg + 1, sizeof *cat);
  double *v = calloc(3 * (r->ncfg + 1), sizeof *v);
  unsigned char *excl = calloc(r->ncfg + 1, 1);
  int rc = FP8_OK;
  if (!cat || !v || !excl) { rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory"); goto done; }
  size_t n = 0;
  for (size_t c = 0; c < r->ncfg; c++) {
    if (r->cfgs[c].same_as != c) continue; /* each class of identical configurations once */
    cat[n] = r->cfgs[c].dlabel;
    for (int g = 0; g < 3; g++) v[(size_t)g * r->ncfg + n] = r->cfgs[c].gemm_median[g];
    n++;
  }
  fp8_bar_series bs[3] = {{v, "fprop (input x weight)", FP8_COLOR_BLUE},
                          {v + r->ncfg, "dgrad (grad_output x weight)", FP8_COLOR_ORANGE},
                          {v + 2 * r->ncfg, "wgrad (grad_output^T x input)", FP8_COLOR_GREEN}};
  char path[4600];
  rp_plot_path(r, "gemm_error.png", path, sizeof path);
  fp8_png_text text[] = {
      {"fp8lab-version", FP8LAB_VERSION}, {"experiment", r->run.name}, {"plot", "gemm error"}};
  char title[220], acc[64] = "";
  if (r->run.tensor_core != FP8_TC_EXACT) /* the accumulation the per-tensor bars assume */
    snprintf(acc, sizeof acc, "; %s tensor-core accumulation",
             fp8_tc_model_name((fp8_tc_model)r->run.tensor_core));
  if (r->run.gemm_sampled) /* estimates (gemm.h): say so, and from how many entries */
    snprintf(title, sizeof title, "GEMM output error per configuration (median over layers and "
             "steps; each estimated from %lldx%lld entries%s)", (long long)r->run.gemm_sample,
             (long long)r->run.gemm_sample, acc);
  else
    snprintf(title, sizeof title, "GEMM output error per configuration (median over layers and "
             "steps%s)", acc);
  fp8_chart ch = {.title = title,
                  .xlabel = "configuration", .ylabel = "relative Frobenius error (log scale)", .logy = 1,
                  .grid = 1, .text = text, .ntext = 3, .width = n > 16 ? 1600 : 1200, .height = 900,
                  .bar_format = "%.3g", /* the medians differ by a few percent: print them */
                  .log_exclude = 3}; /* bf16 (1e-7) among FP8 and FP4 (1e-2): named, not drawn */
  rc = !rp_my_chart(drawn) ? FP8_OK : fp8_plot_bars(path, &ch, cat, n, bs, 3, err, errlen);
  if (rc) goto done;
  plot_t *p = rp_plot_add(drawn, "gemm_error.png");
  if (p) {
    snprintf(p->alt, sizeof p->alt, "GEMM error per configuration");
    snprintf(p->caption, sizeof p->caption,
             "||Y - Y_ref|| / ||Y_ref|| of each layer's fprop, dgrad and wgrad computed from the FP8-dequantized "
             "operands (%s) against the original operands (double), median over layers and snapshot "
             "steps.%s",
             r->run.tensor_core == FP8_TC_EXACT
                 ? "FP32 GEMM"
                 : r->run.tensor_core == FP8_TC_H100
                       ? "per-tensor configurations as an H100 tensor core accumulates, fprop fast, "
                         "dgrad and wgrad promoted every 128 products; the others FP32"
                       : "per-tensor configurations as a B200 tensor core accumulates; the others FP32",
             fp8_plot_bars_excluded(&ch, cat, n, bs, 3, excl, NULL, 0)
                 ? " A configuration whose errors all lie more than 3 decades below the median of the "
                   "others' (bf16 among FP8 and FP4) is not drawn, so that it does not stretch the log "
                   "axis: the line below the chart names it with its values."
                 : "");
    drawn->nplots++;
  }
done:
  free(cat);
  free(v);
  free(excl);
  return rc;
}
