/* report_plots_moe.c: the Mixture-of-Experts charts (issue 40): every expert of every layer at
 * once, a column per expert index, coloured by the share of the steps it ran (warm-up left out)
 * whose largest element clipped under the reference configuration, on the step budget's threshold scale. One
 * chart per expert GEMM and role (`gate_up_proj.input`), a row per layer's experts module in the
 * model's order: a DeepSeek-V3's 58 layers by 256 experts fit one chart; an expert that never ran
 * is hatched; weights only where one clipped (they are quantized every step). */
#include "report_plots_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h" /* fp8_natural_cmp */

#define MOE_MAX_ROWS 1000 /* fp8_plot_step_heatmap's */
#define MOE_MAX_CHARTS 12

/* An expert group split at its "*": the rows of a chart are the groups of one (role, suffix),
 * labelled by their prefix (`model.layers.3.mlp.experts`), in natural order. */
typedef struct {
  const rep_expert *e;
  size_t plen;        /* the prefix: the group up to ".*" */
  const char *suffix; /* after "*.": "gate_up_proj.input" */
} moe_ref;

static int cmp_ref(const void *a, const void *b) {
  const moe_ref *x = a, *y = b;
  int c = strcmp(x->suffix, y->suffix);
  if (c) return c;
  char px[REP_EXPERT_GROUP_CAP], py[REP_EXPERT_GROUP_CAP];
  snprintf(px, sizeof px, "%.*s", (int)x->plen, x->e->group);
  snprintf(py, sizeof py, "%.*s", (int)y->plen, y->e->group);
  c = fp8_natural_cmp(px, py);
  if (c) return c;
  c = strcmp(px, py);
  if (c) return c;
  return x->e->expert < y->e->expert ? -1 : x->e->expert > y->e->expert;
}

static int same_row(const moe_ref *a, const moe_ref *b) {
  return strcmp(a->suffix, b->suffix) == 0 && a->plen == b->plen &&
         strncmp(a->e->group, b->e->group, a->plen) == 0;
}

/* One chart: refs[0..n) of one suffix (sorted: rows, then experts). */
static int draw_chart(const rep_t *r, rep_charts *drawn, const moe_ref *refs, size_t n,
                      char *err, size_t errlen) {
  size_t ny = 0;
  int32_t nx = 0;
  for (size_t i = 0; i < n; i++) {
    if (refs[i].e->expert + 1 > nx) nx = refs[i].e->expert + 1;
    ny += i == 0 || !same_row(&refs[i], &refs[i - 1]);
  }
  if (!ny || ny > MOE_MAX_ROWS) return FP8_OK;
  double *v = malloc(ny * (size_t)nx * sizeof *v), *x = malloc((size_t)nx * sizeof *x);
  char **labels = calloc(ny, sizeof *labels);
  int rc = FP8_ENOMEM;
  if (!v || !x || !labels) goto done;
  for (size_t k = 0; k < ny * (size_t)nx; k++) v[k] = NAN;
  for (int32_t k = 0; k < nx; k++) x[k] = k - 0.5; /* expert k centred on its tick */
  /* rows bottom to top: the first (natural order) at the top */
  size_t row = ny;
  for (size_t i = 0; i < n; i++) {
    if (i == 0 || !same_row(&refs[i], &refs[i - 1])) {
      row--;
      if (!(labels[row] = malloc(refs[i].plen + 1))) goto done;
      memcpy(labels[row], refs[i].e->group, refs[i].plen);
      labels[row][refs[i].plen] = '\0';
    }
    const rep_expert *e = refs[i].e;
    if (e->ran_nw > 0) v[row * (size_t)nx + (size_t)e->expert] = (double)e->clip / (double)e->ran_nw;
  }
  const cfg_t *b = &r->cfgs[r->ref];
  char what[160], title[512], file[240], stem[200], path[4700], cbar[160], ylabel[64];
  snprintf(what, sizeof what, "%s", refs[0].suffix); /* "gate_up_proj.input" */
  snprintf(title, sizeof title, "experts' %s under %s: share of the %s each ran whose largest "
           "element clipped", what, b->dlabel, rep_unit(r, 1));
  snprintf(cbar, sizeof cbar, "clipped share of the %s it ran (step budget %.3g)", rep_unit(r, 1),
           r->rec.budgets.step);
  snprintf(ylabel, sizeof ylabel, "experts module (%zu)", ny);
  rp_sanitize(what, stem, sizeof stem);
  snprintf(file, sizeof file, "experts_clipsteps_%s.png", stem);
  rp_plot_path(r, file, path, sizeof path);
  fp8_png_text text[] = {{"fp8lab-version", FP8LAB_VERSION},
                         {"experiment", r->run.name},
                         {"tensors", what},
                         {"configuration", b->key.recipe},
                         {"plot", "experts clipped steps"}};
  fp8_chart ch = {.title = title, .xlabel = "expert", .ylabel = ylabel, .text = text, .ntext = 5,
                  .width = 1400, .height = ny > 24 ? 900 : 700};
  fp8_step_heatmap hm = {.nx = (size_t)nx, .ny = ny, .x = x, .ylabels = (const char *const *)labels,
                         .values = v, .threshold = r->rec.budgets.step, .vmin = 0,
                         .vmax = 0.1 > 2 * r->rec.budgets.step ? 0.1 : 2 * r->rec.budgets.step,
                         .colorbar_label = cbar, .integer_x = 1,
                         .nan_label = "no value: the expert never ran"};
  rc = !rp_my_chart(drawn) ? FP8_OK : fp8_plot_step_heatmap(path, &ch, &hm, err, errlen);
  if (rc) goto done;
  plot_t *p = rp_plot_add(drawn, file);
  if (p) {
    snprintf(p->alt, sizeof p->alt, "clipped steps of every expert's %s", what);
    snprintf(p->caption, sizeof p->caption,
             "Every expert's `%s` under %s: a row per experts module (one GroupedLinear per "
             "layer), a column per expert; the colour is the share of the %s the expert ran "
             "(warm-up left out) whose largest element clipped, orange to red past the step "
             "budget (%.3g); hatched: the expert never ran. Columns are drawn at the largest value "
             "of those a pixel covers.",
             what, b->dlabel, rep_unit(r, 1), r->rec.budgets.step);
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
  size_t n = r->nexperts;
  const rep_expert *ex = r->experts;
  if (!n) return FP8_OK;
  moe_ref *refs = malloc(n * sizeof *refs);
  if (!refs) return FP8_ENOMEM;
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    const char *star = strstr(ex[i].group, ".*");
    while (star && !(star[2] == '.' || star[2] == '\0')) star = strstr(star + 1, ".*");
    if (!star) continue;
    /* weights: only groups where an expert clipped (they are quantized every step) */
    refs[m++] = (moe_ref){&ex[i], (size_t)(star - ex[i].group), star[2] ? star + 3 : ""};
  }
  qsort(refs, m, sizeof *refs, cmp_ref);
  int rc = FP8_OK;
  size_t charts = 0;
  for (size_t lo = 0; lo < m && !rc && charts < MOE_MAX_CHARTS;) {
    size_t hi = lo;
    int any = 0;
    while (hi < m && strcmp(refs[hi].suffix, refs[lo].suffix) == 0) {
      any |= r->tab.groups[refs[hi].e->g].role != FP8_ROLE_WEIGHT || refs[hi].e->clip > 0;
      hi++;
    }
    if (any) {
      rc = draw_chart(r, drawn, refs + lo, hi - lo, err, errlen);
      charts++;
    }
    lo = hi;
  }
  free(refs);
  return rc;
}
