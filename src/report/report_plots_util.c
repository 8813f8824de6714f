/* report_plots_util.c: the helpers the report's chart files share (report_plots_internal.h):
 * the chart turn of this process, the plot list, file names and the shown configurations'
 * line styles. */
#include "report_plots_internal.h"

#include <stdio.h>
#include <string.h>

#include "trace.h" /* fp8_tensor_file_stem */

int rp_my_chart(rep_t *r) { return r->mine[r->chart_i++ % (size_t)r->nprocs]; }

plot_t *rp_plot_add(rep_t *r, const char *file) {
  if (r->nplots == MAX_PLOTS) return NULL;
  plot_t *p = &r->plots[r->nplots];
  memset(p, 0, sizeof *p);
  snprintf(p->file, sizeof p->file, "%s", file);
  return p;
}

void rp_plot_path(const rep_t *r, const char *file, char *out, size_t n) {
  snprintf(out, n, "%s/plots/%s", r->outdir, file);
}

void rp_sanitize(const char *in, char *out, size_t n) {
  fp8_tensor_file_stem(in, out, n); /* the one mapping, which fp8lab run checks is injective */
}

const char *rp_role_name(int role) {
  return role == FP8_ROLE_UNKNOWN ? "other" : fp8_role_name((fp8_role)role);
}

void rp_shown_style(size_t k, fp8_color *color, int *dashed, double *width) {
  static const fp8_color colors[MAX_SHOWN] = {FP8_COLOR_ORANGE, FP8_COLOR_SKYBLUE, FP8_COLOR_GREEN,
                                              FP8_COLOR_PURPLE};
  static const double widths[MAX_SHOWN] = {7.0, 4.5, 3.0, 1.8};
  *color = colors[k % MAX_SHOWN];
  *dashed = (int)(k % 2);
  *width = widths[k % MAX_SHOWN];
}

