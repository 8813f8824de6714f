/* report_plots_internal.h: what the files of the report's plots share (not public).
 * report_plots.c draws them in turn (rep_draw_plots, forked processes), report_plots_util.c
 * holds the helpers below; report_plots_stream.c the amax timelines and the overshoot heatmaps (from stream.csv
 * when the run has one), report_plots_steps.c the dynamic range and the SNR over steps,
 * report_plots_configs.c the history x margin heatmaps and the per-configuration bars. Every
 * rep_plot_* function computes its charts in every process and draws those rp_my_chart gives it,
 * listing each in r->plots. */
#ifndef FP8LAB_REPORT_REPORT_PLOTS_INTERNAL_H
#define FP8LAB_REPORT_REPORT_PLOTS_INTERNAL_H

#include "plot.h"
#include "report_internal.h"

/* Whether this process draws the report's next chart (every chart asks once, in order). */
int rp_my_chart(rep_t *r);
/* The next entry of r->plots for file (counted by the caller: r->nplots++), NULL when full. */
plot_t *rp_plot_add(rep_t *r, const char *file);
/* <outdir>/plots/<file>. */
void rp_plot_path(const rep_t *r, const char *file, char *out, size_t n);
/* A tensor name as a file name part: [A-Za-z0-9.-], the rest '_'. */
void rp_sanitize(const char *in, char *out, size_t n);
/* The role's name in file names and titles ("other" for FP8_ROLE_UNKNOWN). */
const char *rp_role_name(int role);
/* The line styles of the shown delayed configurations (k < MAX_SHOWN): colour, dashes and a
 * width decreasing with k, so that a later one drawn over an equal earlier one shows both. */
void rp_shown_style(size_t k, fp8_color *color, int *dashed, double *width);

/* report_plots_stream.c */
int rep_plot_timelines(rep_t *r, int max_timelines, char *err, size_t errlen);
int rep_plot_overshoot_maps(rep_t *r, char *err, size_t errlen);
/* report_plots_steps.c */
int rep_plot_dynamic_range(rep_t *r, char *err, size_t errlen);
int rep_plot_snr(rep_t *r, char *err, size_t errlen);
/* report_plots_configs.c */
int rep_plot_config_maps(rep_t *r, char *err, size_t errlen);
int rep_plot_bars(rep_t *r, char *err, size_t errlen);
int rep_plot_gemm(rep_t *r, char *err, size_t errlen);

#endif
