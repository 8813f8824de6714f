/* report_plots_internal.h: what the files of the report's plots share (not public).
 * report_plots.c draws them in turn (rep_draw_plots, forked processes), with the helpers
 * below; report_plots_stream.c the amax timelines and report_plots_heat.c the overshoot
 * heatmaps (from stream.csv when the run has one), report_plots_steps.c the dynamic range and the SNR over steps,
 * report_plots_configs.c the history x margin heatmaps and the per-configuration bars. Every
 * rep_plot_* function computes its charts in every process and draws those rp_my_chart gives it,
 * listing each in drawn->plots. */
#ifndef FP8LAB_REPORT_REPORT_PLOTS_INTERNAL_H
#define FP8LAB_REPORT_REPORT_PLOTS_INTERNAL_H

#include <stdio.h>
#include <string.h>

#include "plot.h"
#include "report_internal.h"
#include "trace.h" /* fp8_tensor_file_stem */

/* The helpers the chart files share, inline here (each chart file uses them and report_plots.c
 * calls the chart files, so a file of their own or report_plots.c would be a call cycle). */

/* Whether this process draws the report's next chart (every chart asks once, in order). */
static inline int rp_my_chart(rep_charts *drawn) {
  return drawn->mine[drawn->chart_i++ % (size_t)drawn->nprocs];
}

/* The next entry of drawn->plots for file (counted by the caller: drawn->nplots++), NULL when full. */
static inline plot_t *rp_plot_add(rep_charts *drawn, const char *file) {
  if (drawn->nplots == MAX_PLOTS) return NULL;
  plot_t *p = &drawn->plots[drawn->nplots];
  memset(p, 0, sizeof *p);
  snprintf(p->file, sizeof p->file, "%s", file);
  return p;
}

/* <outdir>/plots/<file>. */
static inline void rp_plot_path(const rep_t *r, const char *file, char *out, size_t n) {
  snprintf(out, n, "%s/plots/%s", r->outdir, file);
}

/* A tensor name as a file name part: [A-Za-z0-9.-], the rest '_' (fp8_tensor_file_stem: the
 * one mapping, which fp8lab run checks is injective). */
static inline void rp_sanitize(const char *in, char *out, size_t n) {
  fp8_tensor_file_stem(in, out, n);
}

/* The role's name in file names and titles ("other" for FP8_ROLE_UNKNOWN). */
static inline const char *rp_role_name(int role) {
  return role == FP8_ROLE_UNKNOWN ? "other" : fp8_role_name((fp8_role)role);
}

/* The line styles of the shown delayed configurations (k < MAX_SHOWN): colour, dashes and a
 * width decreasing with k, so that a later one drawn over an equal earlier one shows both. */
static inline void rp_shown_style(size_t k, fp8_color *color, int *dashed, double *width) {
  static const fp8_color colors[MAX_SHOWN] = {FP8_COLOR_ORANGE, FP8_COLOR_SKYBLUE, FP8_COLOR_GREEN,
                                              FP8_COLOR_PURPLE};
  static const double widths[MAX_SHOWN] = {7.0, 4.5, 3.0, 1.8};
  *color = colors[k % MAX_SHOWN];
  *dashed = (int)(k % 2);
  *width = widths[k % MAX_SHOWN];
}

/* report_plots_stream.c */
int rep_plot_timelines(const rep_t *r, rep_charts *drawn, int max_timelines, char *err,
                       size_t errlen);
/* The stream series of tensor under configuration c (format f), or NULL (no stream, or c not
 * a plain delayed configuration). */
const fp8_stream_series *rp_series_of(const rep_t *r, const char *tensor, size_t c, fp8_format f);
/* The x position of stream entry i: its step (micro-batches spread within it). */
double rp_stream_x(const fp8_stream_series *s, size_t i);
/* report_plots_heat.c */
int rep_plot_overshoot_maps(const rep_t *r, rep_charts *drawn, char *err, size_t errlen);
/* report_plots_steps.c */
int rep_plot_dynamic_range(const rep_t *r, rep_charts *drawn, char *err, size_t errlen);
int rep_plot_snr(const rep_t *r, rep_charts *drawn, char *err, size_t errlen);
/* report_plots_configs.c */
int rep_plot_config_maps(const rep_t *r, rep_charts *drawn, char *err, size_t errlen);
int rep_plot_bars(const rep_t *r, rep_charts *drawn, char *err, size_t errlen);
int rep_plot_gemm(const rep_t *r, rep_charts *drawn, char *err, size_t errlen);
/* report_plots_moe.c: per role, every expert's clipped share of the steps it ran (a row per
 * expert group, a column per expert); nothing without an expert tensor. */
int rep_plot_experts(const rep_t *r, rep_charts *drawn, char *err, size_t errlen);

#endif
