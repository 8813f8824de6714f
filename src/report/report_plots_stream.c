/* report_plots_stream.c: the amax timelines of every step (report_plots_internal.h): a tensor's
 * amax against what each shown delayed configuration could represent, from stream.csv when
 * the run has one (every replay step), else the snapshot rows of steps.csv; warm-up steps
 * (RECIPES.md "Per-step statistics") kept out. The overshoot heatmaps, from the same series:
 * report_plots_heat.c. */
#include "report_plots_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8.h"
#include "recipe.h"
#include "trace.h"   /* FP8_NAME_MAX, FP8_RANK_PREFIX_MAX */
#include "util.h"

/* One tensor's timeline: n steps, its amax, per shown configuration the largest |x| it could
 * represent (NaN at its warm-up steps and where it has no value), the reference's clipped
 * steps. */
typedef struct {
  size_t n;
  double *x, *amax, *fit[MAX_SHOWN];
  double *cx, *cy;
  size_t nc;
  const char *source; /* "every step" or "snapshot steps" */
} timeline;

static void timeline_free(timeline *t) {
  free(t->x);
  free(t->amax);
  for (size_t k = 0; k < MAX_SHOWN; k++) free(t->fit[k]);
  free(t->cx);
  free(t->cy);
}

static int timeline_alloc(timeline *t, size_t n) {
  memset(t, 0, sizeof *t);
  t->n = n;
  t->x = calloc(n + 1, sizeof *t->x);
  t->amax = calloc(n + 1, sizeof *t->amax);
  t->cx = calloc(n + 1, sizeof *t->cx);
  t->cy = calloc(n + 1, sizeof *t->cy);
  int ok = t->x && t->amax && t->cx && t->cy;
  for (size_t k = 0; k < MAX_SHOWN; k++) {
    t->fit[k] = calloc(n + 1, sizeof **t->fit);
    ok = ok && t->fit[k];
  }
  return ok ? FP8_OK : FP8_ENOMEM;
}

/* The stream series of tensor under configuration c (format f), or NULL. */
const fp8_stream_series *rp_series_of(const rep_t *r, const char *tensor, size_t c, fp8_format f) {
  if (!r->have_stream) return NULL;
  const cfg_t *x = &r->cfgs[c];
  if (x->key.kind != FP8_KIND_DELAYED || x->mixed) return NULL;
  fp8_config_key k = x->key;
  k.format = f;
  return fp8_stream_find(&r->stream, tensor, &k);
}

/* The x position of stream entry i: its step, and for a step of M micro-batches (issue 17)
 * step + k / M for its k-th, so that x ascends strictly and a step keeps its width of 1. */
double rp_stream_x(const fp8_stream_series *s, size_t i) {
  size_t a = i, b = i;
  while (a > 0 && s->step[a - 1] == s->step[i]) a--;
  while (b + 1 < s->n && s->step[b + 1] == s->step[i]) b++;
  return (double)s->step[i] + (b > a ? (double)(i - a) / (double)(b - a + 1) : 0.0);
}

/* From the stream: every step (micro-batch) of the reference series. */
static int timeline_stream(const rep_t *r, const char *tensor, const fp8_stream_series *ref, timeline *t) {
  if (timeline_alloc(t, ref->n) != FP8_OK) return FP8_ENOMEM;
  t->source = rep_micro(r) ? "every micro-batch" : "every step";
  for (size_t i = 0; i < ref->n; i++) {
    t->x[i] = rp_stream_x(ref, i);
    t->amax[i] = ref->amax[i];
    if (!ref->warmup[i] && fp8_stream_clipped(ref->amax[i], ref->scale[i], ref->key.format)) {
      t->cx[t->nc] = t->x[i];
      t->cy[t->nc++] = ref->amax[i];
    }
  }
  for (size_t k = 0; k < r->nshown; k++) {
    const fp8_stream_series *s = rp_series_of(r, tensor, r->shown[k], ref->key.format);
    for (size_t i = 0; i < ref->n; i++) {
      int ok = s && s->n == ref->n && s->step[i] == ref->step[i] && !s->warmup[i];
      t->fit[k][i] = ok ? fp8_format_max(s->key.format) / (double)s->scale[i] : NAN;
    }
  }
  return FP8_OK;
}

/* From the snapshot rows of the reference group. */
static int timeline_rows(const rep_t *r, const char *tensor, ptrdiff_t gref, timeline *t) {
  const fp8_steps_group *gr = &r->tab.groups[gref];
  if (timeline_alloc(t, gr->nrows) != FP8_OK) return FP8_ENOMEM;
  t->source = "snapshot steps";
  for (size_t i = 0; i < gr->nrows; i++) {
    const fp8_step_row *row = fp8_steps_csv_group_row(&r->tab, gr, i);
    t->x[i] = (double)row->step;
    t->amax[i] = row->amax;
    if (!row->warmup && row->clipped > 0) {
      t->cx[t->nc] = t->x[i];
      t->cy[t->nc++] = row->amax;
    }
  }
  for (size_t k = 0; k < r->nshown; k++) {
    ptrdiff_t g = rep_group_of(r, tensor, r->shown[k]);
    for (size_t i = 0; i < gr->nrows; i++) {
      const fp8_step_row *row = g >= 0 ? rep_row_at(r, g, (int64_t)t->x[i]) : NULL;
      t->fit[k][i] = row && !row->warmup ? fp8_format_max(row->format) / row->scale : NAN;
    }
  }
  return FP8_OK;
}

/* Whether two curves are the same over the shown steps (NaN where both are NaN). */
static int same_curve(const double *a, const double *b, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (isnan(a[i]) && isnan(b[i])) continue;
    if (!(fabs(a[i] - b[i]) <= 1e-9 * fmax(fabs(a[i]), fabs(b[i])))) return 0;
  }
  return 1;
}

/* The series of a timeline: shown configurations widest first (an equal later one stays
 * visible on top, and its label says which it equals), then the amax in black on top. */
static size_t timeline_series(const rep_t *r, const timeline *t, fp8_series *s, char labels[][340]) {
  size_t ns = 0;
  for (size_t k = 0; k < r->nshown; k++) {
    const char *lab = r->cfgs[r->shown[k]].label;
    size_t j = 0;
    while (j < k && !same_curve(t->fit[j], t->fit[k], t->n)) j++;
    if (j < k)
      snprintf(labels[k], 340, "%s (same as %s)", lab, r->cfgs[r->shown[j]].label);
    else snprintf(labels[k], 340, "%s", lab);
    fp8_color col;
    int dashed;
    double width;
    rp_shown_style(k, &col, &dashed, &width);
    s[ns++] = (fp8_series){.x = t->x, .y = t->fit[k], .n = t->n, .label = labels[k], .color = col,
                           .style = FP8_STYLE_STEP, .dashed = dashed, .width = width};
  }
  const int micro = strcmp(t->source, "every micro-batch") == 0; /* a point per micro-batch */
  s[ns++] = (fp8_series){.x = t->x, .y = t->amax, .n = t->n,
                         .label = micro ? "amax of the micro-batch (the tensor's max |x|)"
                                        : "amax of the step (the tensor's max |x|)",
                         .color = FP8_COLOR_BLACK, .style = FP8_STYLE_LINE,
                         .marker = t->n <= 40 ? FP8_MARKER_CIRCLE : FP8_MARKER_NONE, .width = 1.8};
  return ns;
}

/* The amax timeline of one tensor (plots/amax_<tensor>.png). */
static int plot_timeline(const rep_t *r, rep_charts *drawn, const char *tensor, char *err,
                         size_t errlen) {
  ptrdiff_t gref = rep_group_of(r, tensor, (size_t)r->ref);
  if (gref < 0) return FP8_OK;
  const fp8_stream_series *sref =
      rp_series_of(r, tensor, (size_t)r->ref, r->tab.groups[gref].key.format);
  timeline t;
  int rc = sref ? timeline_stream(r, tensor, sref, &t) : timeline_rows(r, tensor, gref, &t);
  if (rc != FP8_OK) {
    timeline_free(&t);
    return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  }
  fp8_series series[1 + MAX_SHOWN];
  char labels[MAX_SHOWN][340], clabel[240];
  size_t ns = timeline_series(r, &t, series, labels);
  snprintf(clabel, sizeof clabel, "largest element clipped under %s", r->cfgs[r->ref].label);
  fp8_markers marks = {.x = t.cx, .y = t.cy, .n = t.nc, .label = clabel, .color = FP8_COLOR_VERMILLION,
                       .marker = FP8_MARKER_CROSS};
  char title[512], file[300], path[4600], safe[FP8_NAME_MAX + FP8_RANK_PREFIX_MAX + 1];
  /* the curves are the reference's margin and amax_compute at each history length (choose_shown):
   * the title says so (issue 25 point 8: it said "each delayed configuration") */
  const cfg_t *rc0 = &r->cfgs[r->ref];
  /* under gradient accumulation each point is a micro-batch (issue 42 point 6) */
  const int micro = sref && rep_micro(r);
  snprintf(title, sizeof title, "%s: amax per %s against the largest |x| delayed scaling "
           "represents, per history length (margin %d, %s)", tensor,
           micro ? "micro-batch" : "step", (int)rc0->key.margin,
           fp8_amax_compute_name(rc0->key.amax_compute));
  rp_sanitize(tensor, safe, sizeof safe);
  snprintf(file, sizeof file, "amax_%s.png", safe);
  rp_plot_path(r, file, path, sizeof path);
  fp8_png_text text[] = {{"fp8lab-version", FP8LAB_VERSION},
                         {"experiment", r->run.name},
                         {"tensor", tensor},
                         {"configuration", r->cfgs[r->ref].label},
                         {"plot", "amax timeline"}};
  /* a log axis when the curves span a decade or more, else linear: small overshoots show */
  double lo = INFINITY, hi = 0;
  for (size_t i = 0; i < ns; i++)
    for (size_t j = 0; j < series[i].n; j++)
      if (isfinite(series[i].y[j]) && series[i].y[j] > 0) lo = fmin(lo, series[i].y[j]), hi = fmax(hi, series[i].y[j]);
  int logy = !(hi > 0 && hi < 8 * lo);
  fp8_chart ch = {.title = title,
                  .xlabel = micro ? "training step (its micro-batches between it and the next)"
                                  : "training step",
                  .ylabel = logy ? "magnitude |x| (tensor units, log scale)" : "magnitude |x| (tensor units)",
                  .logy = logy, .grid = 1, .text = text, .ntext = 5};
  rc = !rp_my_chart(drawn)
           ? FP8_OK
           : fp8_plot_lines(path, &ch, series, ns, t.nc ? &marks : NULL, t.nc ? 1 : 0, err, errlen);
  plot_t *p = rc ? NULL : rp_plot_add(drawn, file);
  if (p) {
    snprintf(p->alt, sizeof p->alt, "amax timeline of %s", tensor);
    snprintf(p->caption, sizeof p->caption,
             "%s at %s: the tensor's amax (black) against the largest |x| delayed scaling at margin %d "
             "and amax_compute %s could represent at that step, one curve per history length "
             "(fp8_max / scale, the scale from the amax history of earlier "
             "steps; coloured steps, wider for shorter histories so that equal curves stay visible, "
             "\"same as\" naming a curve equal to another); warm-up %s (scale 1) are left out of "
             "them. Crosses mark the %zu %s where the largest element clipped under %s.%s",
             tensor, t.source, (int)rc0->key.margin, fp8_amax_compute_name(rc0->key.amax_compute),
             micro ? "micro-batches" : "steps", t.nc, micro ? "micro-batches" : "steps",
             r->cfgs[r->ref].label,
             micro ? " A step's micro-batches sit at step + k/M (the k-th of M): each is a cast "
                     "and an update of the delayed history." : "");
    drawn->nplots++;
  }
  timeline_free(&t);
  return rc;
}

/* Amax timelines: the tensors of rep_timeline_tensors, in its order. */
int rep_plot_timelines(const rep_t *r, rep_charts *drawn, int max_timelines, char *err,
                       size_t errlen) {
  const char *tensors[MAX_TIMELINES];
  size_t n = rep_timeline_tensors(r, max_timelines, tensors);
  int rc = FP8_OK;
  for (size_t i = 0; i < n && !rc; i++) rc = plot_timeline(r, drawn, tensors[i], err, errlen);
  return rc;
}
