/* report_plots_moe.c: the Mixture-of-Experts chart (issue 40): per role, every expert of every
 * expert group at once, a row per group (one GEMM of one layer's experts) and a column per
 * expert index, coloured by the share of the steps it ran (warm-up left out) whose largest
 * element clipped under the reference configuration, on the step budget's threshold scale: the
 * grid of a DeepSeek-V3 (58 layers x 2 GEMMs by 256 experts) fits one chart per role, and an
 * expert that never ran is grey. */
#include "report_plots_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MOE_MAX_ROWS 1000 /* fp8_plot_step_heatmap's */

/* One role's chart from ex[0..n) (by group, then expert). */
static int draw_role(const rep_t *r, rep_charts *drawn, const rep_expert *ex, size_t n, int role,
                     char *err, size_t errlen) {
  size_t ny = 0;
  int32_t nx = 0;
  for (size_t i = 0; i < n; i++) {
    if ((int)r->tab.groups[ex[i].g].role != role) continue;
    if (ex[i].expert + 1 > nx) nx = ex[i].expert + 1;
    ny += i == 0 || strcmp(ex[i].group, ex[i - 1].group) != 0;
  }
  if (!ny || ny > MOE_MAX_ROWS) return FP8_OK;
  double *v = malloc(ny * (size_t)nx * sizeof *v), *x = malloc((size_t)nx * sizeof *x);
  char **labels = calloc(ny, sizeof *labels);
  int rc = FP8_ENOMEM;
  if (!v || !x || !labels) goto done;
  for (size_t k = 0; k < ny * (size_t)nx; k++) v[k] = NAN;
  for (int32_t k = 0; k < nx; k++) x[k] = k - 0.5; /* expert k centred on its tick */
  /* rows bottom to top: the last group at the bottom, so that the first reads at the top */
  size_t row = ny;
  const char *prev = NULL;
  for (size_t i = 0; i < n; i++) {
    if ((int)r->tab.groups[ex[i].g].role != role) continue;
    if (!prev || strcmp(ex[i].group, prev) != 0) {
      prev = ex[i].group;
      row--;
      /* the label without the role: the chart is one role's */
      size_t len = strlen(ex[i].group), rl = strlen(fp8_role_name((fp8_role)role));
      if (len > rl + 1 && strcmp(ex[i].group + len - rl, fp8_role_name((fp8_role)role)) == 0)
        len -= rl + 1;
      if (!(labels[row] = malloc(len + 1))) goto done;
      memcpy(labels[row], ex[i].group, len);
      labels[row][len] = '\0';
    }
    if (ex[i].ran_nw > 0)
      v[row * (size_t)nx + (size_t)ex[i].expert] = (double)ex[i].clip / (double)ex[i].ran_nw;
  }
  const cfg_t *b = &r->cfgs[r->ref];
  const char *rname = rp_role_name(role);
  char title[512], file[200], path[4600], cbar[160], ylabel[64];
  snprintf(title, sizeof title, "%s tensors of the experts under %s: share of the %s each ran "
           "whose largest element clipped", rname, b->dlabel, rep_unit(r, 1));
  snprintf(cbar, sizeof cbar, "clipped share of the %s it ran (step budget %.3g)", rep_unit(r, 1),
           r->rec.budgets.step);
  snprintf(ylabel, sizeof ylabel, "expert group (%zu)", ny);
  snprintf(file, sizeof file, "experts_clipsteps_%s.png", rname);
  rp_plot_path(r, file, path, sizeof path);
  fp8_png_text text[] = {{"fp8lab-version", FP8LAB_VERSION},
                         {"experiment", r->run.name},
                         {"role", rname},
                         {"configuration", b->key.recipe},
                         {"plot", "experts clipped steps"}};
  fp8_chart ch = {.title = title, .xlabel = "expert", .ylabel = ylabel, .text = text, .ntext = 5,
                  .width = 1400, .height = ny > 24 ? 900 : 700};
  fp8_step_heatmap hm = {.nx = (size_t)nx, .ny = ny, .x = x, .ylabels = (const char *const *)labels,
                         .values = v, .threshold = r->rec.budgets.step, .vmin = 0,
                         .vmax = 0.1 > 2 * r->rec.budgets.step ? 0.1 : 2 * r->rec.budgets.step,
                         .colorbar_label = cbar};
  rc = !rp_my_chart(drawn) ? FP8_OK : fp8_plot_step_heatmap(path, &ch, &hm, err, errlen);
  if (rc) goto done;
  plot_t *p = rp_plot_add(drawn, file);
  if (p) {
    snprintf(p->alt, sizeof p->alt, "clipped steps of every expert's %s tensor", rname);
    snprintf(p->caption, sizeof p->caption,
             "Every expert's %s tensor under %s: a row per expert group (one GEMM of one layer's "
             "experts, one GroupedLinear), a column per expert; the colour is the share of the %s "
             "the expert ran (warm-up left out) whose largest element clipped, orange to red past "
             "the step budget (%.3g); grey: the expert never ran. Columns are drawn at the "
             "largest value of those a pixel covers.",
             rname, b->dlabel, rep_unit(r, 1), r->rec.budgets.step);
    drawn->nplots++;
  }
done:
  for (size_t k = 0; labels && k < ny; k++) free(labels[k]);
  free(labels);
  free(v);
  free(x);
  return rc;
}

int rep_plot_experts(const rep_t *r, rep_charts *drawn, char *err, size_t errlen) {
  size_t n = 0;
  rep_expert *ex = rep_moe_experts(r, &n);
  if (!ex) return FP8_OK;
  int rc = FP8_OK;
  int roles[] = {FP8_ROLE_INPUT, FP8_ROLE_GRAD_OUTPUT, FP8_ROLE_WEIGHT};
  for (size_t k = 0; k < 3 && !rc; k++) {
    int any = roles[k] != FP8_ROLE_WEIGHT;
    for (size_t i = 0; i < n && !any; i++) /* weights: only when one clipped */
      any = (int)r->tab.groups[ex[i].g].role == roles[k] && ex[i].clip > 0;
    if (any) rc = draw_role(r, drawn, ex, n, roles[k], err, errlen);
  }
  free(ex);
  return rc;
}
