/* report_plots_steps.c: the plots of the snapshot steps (report_plots_internal.h): the
 * dynamic range of the spike tensor at the spike step against the windows the delayed and the
 * just-in-time scale represent, and that tensor's SNR over the snapshot steps. */
#include "report_plots_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* The dynamic range at the spike: log2|x| histogram against the windows each scale covers,
 * drawn as bands at two heights (and solid against dashed edges) so that they stay apart when
 * they nearly coincide. */
int rep_plot_dynamic_range(const rep_t *r, rep_charts *drawn, char *err, size_t errlen) {
  if (r->spike_group < 0) return FP8_OK;
  const fp8_steps_group *gr = &r->tab.groups[r->spike_group];
  const fp8_step_row *row = &r->tab.rows[r->spike_row];
  double counts[FP8_LOG2_HIST_BINS];
  int lo, nb;
  if (fp8_histograms_csv_get(&r->hist, gr->tensor, row->step, counts, &lo, &nb) != FP8_OK) return FP8_OK;
  double edges[FP8_LOG2_HIST_BINS + 1];
  for (int i = 0; i <= nb; i++) edges[i] = lo + i;
  fp8_format f = row->format;
  double minsub = f == FP8_E4M3 ? -9.0 : -16.0, maxl = log2(fp8_format_max(f));
  double sd = row->scale, sj;
  /* a block kind's row has no one scale (nan): no window to draw for it */
  if (!(sd > 0) || !isfinite(sd)) return FP8_OK;
  const fp8_step_row *cr = r->cur >= 0 ? rep_row_at(r, rep_group_of(r, gr->tensor, (size_t)r->cur), row->step) : NULL;
  if (cr) {
    sj = cr->scale;
  } else {
    fp8_current_params p = {.amax_epsilon = 0, .pow2 = false, .margin = 0, .format = f};
    sj = fp8_current_scale(&p, (float)row->amax);
  }
  double d0 = minsub - log2(sd), d1 = maxl - log2(sd), j0 = minsub - log2(sj), j1 = maxl - log2(sj);
  char l1[256], l2[256];
  snprintf(l1, sizeof l1, "upper band: %s, scale %.3g, |x| 2^%.1f..2^%.1f", r->cfgs[r->ref].label, sd, d0, d1);
  snprintf(l2, sizeof l2, "lower band: current scaling, scale %.3g, |x| 2^%.1f..2^%.1f", sj, j0, j1);
  fp8_window w[2] = {{d0, d1, l1, FP8_COLOR_ORANGE, 0.86, 0.97, 0},
                     {j0, j1, l2, FP8_COLOR_SKYBLUE, 0.73, 0.84, 1}};
  fp8_hist h = {.nbins = (size_t)nb, .edges = edges, .counts = counts, .label = "elements per binade of |x|",
                .color = FP8_COLOR_BLUE};
  char title[512], path[4600], stepbuf[32];
  snprintf(title, sizeof title, "%s at step %lld: magnitudes and the %s range each scale represents",
           gr->tensor, (long long)row->step, fp8_format_name(f));
  snprintf(stepbuf, sizeof stepbuf, "%lld", (long long)row->step);
  rp_plot_path(r, "dynamic_range.png", path, sizeof path);
  fp8_png_text text[] = {{"fp8lab-version", FP8LAB_VERSION},
                         {"experiment", r->run.name},
                         {"tensor", gr->tensor},
                         {"step", stepbuf},
                         {"configuration", r->cfgs[r->ref].label}};
  /* the bars in the lower 70% of the height (from 0.1 up): room for the bands above them */
  double cmax = 1;
  for (int i = 0; i < nb; i++) cmax = fmax(cmax, counts[i]);
  double decades = ceil((log10(cmax) + 1) / 0.7);
  fp8_chart ch = {.title = title, .xlabel = "log2 |x| (binade)", .ylabel = "elements (log scale)", .logy = 1,
                  .grid = 1, .text = text, .ntext = 5, .ymin = 0.1, .ymax = pow(10, decades - 1)};
  int rc = !rp_my_chart(drawn) ? FP8_OK : fp8_plot_histogram(path, &ch, &h, w, 2, err, errlen);
  if (rc) return rc;
  plot_t *p = rp_plot_add(drawn, "dynamic_range.png");
  if (p) {
    snprintf(p->alt, sizeof p->alt, "dynamic range of %s at step %lld", gr->tensor, (long long)row->step);
    snprintf(p->caption, sizeof p->caption,
             "Magnitudes of %s at step %lld (histogram of log2|x|) and the windows %s can represent "
             "(from its smallest subnormal to its max): under the delayed scale of %s (upper orange "
             "band, dashed edges) and under the just-in-time scale (lower blue band, solid edges); the "
             "edges run the full height. Values right of a window saturate, values left of it flush to zero.",
             gr->tensor, (long long)row->step, fp8_format_name(f), r->cfgs[r->ref].label);
    drawn->nplots++;
  }
  return FP8_OK;
}

/* The SNR over the snapshot steps of the spike tensor: shown delayed configurations against
 * current scaling, warm-up rows left out. */
int rep_plot_snr(const rep_t *r, rep_charts *drawn, char *err, size_t errlen) {
  if (r->spike_group < 0) return FP8_OK;
  const char *tensor = r->tab.groups[r->spike_group].tensor;
  size_t cfgs[MAX_SHOWN + 1], nc = 0;
  for (size_t k = 0; k < r->nshown; k++) cfgs[nc++] = r->shown[k];
  if (r->cur >= 0) cfgs[nc++] = (size_t)r->cur;
  fp8_series s[MAX_SHOWN + 1];
  double *buf[MAX_SHOWN + 1][2];
  size_t ns = 0;
  int64_t nwarm = 0;
  int rc = FP8_OK;
  for (size_t k = 0; k < nc; k++) {
    ptrdiff_t g = rep_group_of(r, tensor, cfgs[k]);
    buf[k][0] = buf[k][1] = NULL;
    if (g < 0) continue;
    const fp8_steps_group *gr = &r->tab.groups[g];
    double *x = calloc(gr->nrows + 1, sizeof *x), *y = calloc(gr->nrows + 1, sizeof *y);
    buf[k][0] = x;
    buf[k][1] = y;
    if (!x || !y) { rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory"); goto done; }
    for (size_t i = 0; i < gr->nrows; i++) {
      const fp8_step_row *row = fp8_steps_csv_group_row(&r->tab, gr, i);
      x[i] = (double)row->step;
      y[i] = isfinite(row->snr_db) && !row->warmup ? row->snr_db : NAN;
      nwarm += row->warmup && k == 0;
    }
    int is_cur = r->cfgs[cfgs[k]].key.kind == FP8_KIND_CURRENT;
    fp8_color col = FP8_COLOR_BLACK;
    int dashed = 1;
    double width = 2.5;
    if (!is_cur) rp_shown_style(k, &col, &dashed, &width);
    s[ns++] = (fp8_series){.x = x, .y = y, .n = gr->nrows, .label = r->cfgs[cfgs[k]].label, .color = col,
                           .style = FP8_STYLE_LINE, .marker = is_cur ? FP8_MARKER_SQUARE : FP8_MARKER_CIRCLE,
                           .dashed = dashed, .width = is_cur ? 2.5 : width * 0.6 + 1};
  }
  if (ns) {
    char title[512], path[4600];
    snprintf(title, sizeof title, "%s: SNR of the FP8 cast per snapshot step", tensor);
    rp_plot_path(r, "snr.png", path, sizeof path);
    fp8_png_text text[] = {{"fp8lab-version", FP8LAB_VERSION},
                           {"experiment", r->run.name},
                           {"tensor", tensor},
                           {"plot", "snr over steps"}};
    fp8_chart ch = {.title = title, .xlabel = "training step", .grid = 1, .text = text, .ntext = 4,
                    .ylabel = "SNR (dB; the axis spans at least 3 dB)", .min_yspan = 3};
    rc = !rp_my_chart(drawn) ? FP8_OK : fp8_plot_lines(path, &ch, s, ns, NULL, 0, err, errlen);
    if (rc) goto done;
    plot_t *p = rp_plot_add(drawn, "snr.png");
    if (p) {
      snprintf(p->alt, sizeof p->alt, "SNR over steps of %s", tensor);
      snprintf(p->caption, sizeof p->caption,
               "SNR (10 log10 of signal over quantization error power) of %s at each snapshot step, "
               "delayed configurations (coloured, wider for shorter histories) against current scaling "
               "(black, dashed); the %lld warm-up step%s (scale 1) left out.",
               tensor, (long long)nwarm, nwarm == 1 ? "" : "s");
      drawn->nplots++;
    }
  }
done:
  for (size_t k = 0; k < nc; k++) {
    free(buf[k][0]);
    free(buf[k][1]);
  }
  return rc;
}
