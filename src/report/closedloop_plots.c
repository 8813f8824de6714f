/* closedloop_plots.c: the two charts of `fp8lab closedloop` (closedloop_report.h):
 * plots/closedloop_loss.png, the training loss over steps (a running mean over 10 steps): the
 * high-precision seeds as a band (their min and max), each label's mean over its seeds as a
 * line, the forced spike marked; plots/closedloop_drift.png, the median amax drift per step and
 * label (log y when it spans more than a decade), the 10% line and the spike marked. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "closedloop_report_internal.h"
#include "util.h" /* fp8_errorf */
#include "plot.h"

#define SMOOTH_WINDOW 10

/* Label l's line width: wider for earlier labels, so that a later one drawn over an equal
 * earlier one leaves both visible. */
static double label_width(size_t l) { return l < 4 ? 6.0 - 1.4 * (double)l : 1.8; }

static const fp8_color LABEL_COLORS[] = {FP8_COLOR_ORANGE, FP8_COLOR_SKYBLUE, FP8_COLOR_GREEN,
                                         FP8_COLOR_BLUE,   FP8_COLOR_VERMILLION,
                                         FP8_COLOR_PURPLE};

/* The spike's two steps as vertical lines (nothing without a spike). */
static size_t spike_marks(const fp8_study *st, double *xs, fp8_markers *m, char *label,
                          size_t len) {
  if (!st->has_spike) return 0;
  xs[0] = (double)st->spike_first;
  xs[1] = (double)st->spike_last;
  snprintf(label, len, "forced spike (steps %lld..%lld)", (long long)st->spike_first,
           (long long)st->spike_last);
  *m = (fp8_markers){.x = xs, .n = st->spike_first == st->spike_last ? 1 : 2, .label = label,
                     .color = FP8_COLOR_VERMILLION};
  return 1;
}

/* The smoothed loss of t placed at its steps in row[0..steps) (NaN elsewhere). */
static void place_smoothed(const fp8_loss_table *t, int64_t steps, double *tmp, double *row) {
  for (int64_t i = 0; i < steps; i++) row[i] = NAN;
  fp8_closedloop_smooth(t, SMOOTH_WINDOW, tmp);
  for (size_t i = 0; i < t->n; i++)
    if (t->step[i] >= 0 && t->step[i] < steps) row[t->step[i]] = tmp[i];
}

int cl_plot_loss(const cl_study *s, const char *path, char *err, size_t errlen) {
  const fp8_study *st = &s->st;
  size_t T = (size_t)st->steps, nl = st->nlabels, ns = st->nseeds, maxn = 0;
  for (size_t k = 0; k < ns; k++) maxn = s->hp_loss[k].n > maxn ? s->hp_loss[k].n : maxn;
  for (size_t k = 0; k < nl * ns; k++) maxn = s->cl_loss[k].n > maxn ? s->cl_loss[k].n : maxn;
  /* x, hp min, hp max, one mean per label, a row and the smoothing's scratch */
  double *buf = malloc(((3 + nl + 1) * T + maxn) * sizeof *buf);
  fp8_series *ser = calloc(nl + 2, sizeof *ser);
  int rc = FP8_OK;
  if (!buf || !ser) {
    rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
    goto done;
  }
  double *x = buf, *lo = x + T, *hi = lo + T, *mean = hi + T, *row = mean + nl * T,
         *tmp = row + T;
  for (size_t i = 0; i < T; i++) {
    x[i] = (double)i;
    lo[i] = INFINITY;
    hi[i] = -INFINITY;
  }
  for (size_t k = 0; k < ns; k++) {
    place_smoothed(&s->hp_loss[k], st->steps, tmp, row);
    for (size_t i = 0; i < T; i++)
      if (!isnan(row[i])) {
        lo[i] = fmin(lo[i], row[i]);
        hi[i] = fmax(hi[i], row[i]);
      }
  }
  for (size_t i = 0; i < T; i++)
    if (lo[i] > hi[i]) lo[i] = hi[i] = NAN;
  for (size_t l = 0; l < nl; l++) {
    double *m = mean + l * T;
    for (size_t i = 0; i < T; i++) m[i] = 0;
    for (size_t k = 0; k < ns; k++) {
      place_smoothed(&s->cl_loss[l * ns + k], st->steps, tmp, row);
      for (size_t i = 0; i < T; i++) m[i] += row[i] / (double)ns; /* NaN where a seed lacks it */
    }
  }
  /* the recipes first, the hp band's two thin lines over them (they stay visible where a
   * recipe's curve lies on them) */
  for (size_t l = 0; l < nl; l++)
    ser[l] = (fp8_series){.x = x, .y = mean + l * T, .n = T, .label = st->labels[l],
                          .color = LABEL_COLORS[l % 6], .width = label_width(l)};
  ser[nl] = (fp8_series){.x = x, .y = hi, .n = T, .label = "hp: min and max over seeds",
                         .color = FP8_COLOR_BLACK, .dashed = 1, .width = 1.5};
  ser[nl + 1] = (fp8_series){.x = x, .y = lo, .n = T, .color = FP8_COLOR_BLACK, .dashed = 1,
                             .width = 1.5};
  double xs[2];
  char mlabel[96];
  fp8_markers marks;
  size_t nm = spike_marks(st, xs, &marks, mlabel, sizeof mlabel);
  char title[160];
  snprintf(title, sizeof title, "Training loss: FP8 recipes (mean over %zu seed%s) against "
           "high precision", ns, ns == 1 ? "" : "s");
  fp8_png_text text[] = {{"fp8lab-version", FP8LAB_VERSION}, {"study", st->dir}};
  fp8_chart ch = {.title = title, .xlabel = "training step",
                  .ylabel = "training loss (running mean over 10 steps)", .grid = 1,
                  .text = text, .ntext = 2};
  rc = fp8_plot_lines(path, &ch, ser, nl + 2, nm ? &marks : NULL, nm, err, errlen);
done:
  free(buf);
  free(ser);
  return rc;
}

int cl_plot_drift(const cl_study *s, const fp8_cl_result *r, const char *path, char *err,
                  size_t errlen) {
  const fp8_study *st = &s->st;
  size_t nl = st->nlabels, nd = r->t.ndrift;
  double *buf = malloc((2 * nd + 4) * sizeof *buf);
  fp8_series *ser = calloc(nl + 1, sizeof *ser);
  int rc = FP8_OK;
  if (!buf || !ser) {
    rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
    goto done;
  }
  double *x = buf, *y = x + nd, *ref = y + nd;
  double pmin = INFINITY, pmax = 0, smin = INFINITY, smax = -INFINITY;
  size_t ns = 0;
  for (size_t l = 0; l < nl; l++) { /* the label's rows are consecutive, steps ascending */
    size_t first = nd, n = 0;
    for (size_t i = 0; i < nd; i++)
      if (r->t.drift[i].label == st->labels[l]) {
        if (first == nd) first = i;
        x[i] = (double)r->t.drift[i].step;
        y[i] = r->t.drift[i].median_drift;
        if (y[i] > 0) pmin = fmin(pmin, y[i]);
        pmax = fmax(pmax, y[i]);
        smin = fmin(smin, x[i]);
        smax = fmax(smax, x[i]);
        n++;
      }
    if (n)
      ser[ns++] = (fp8_series){.x = x + first, .y = y + first, .n = n, .label = st->labels[l],
                               .color = LABEL_COLORS[l % 6], .width = label_width(l)};
  }
  double refx[2] = {smin, smax};
  ref[0] = ref[1] = FP8_CL_DRIFT_LIMIT;
  ser[ns++] = (fp8_series){.x = refx, .y = ref, .n = smin < smax ? 2 : 1,
                           .label = "10%: the trace stops speaking for the run",
                           .color = FP8_COLOR_BLACK, .dashed = 1, .width = 1.5};
  int logy = pmax > 0 && pmin < INFINITY && fmax(pmax, FP8_CL_DRIFT_LIMIT) /
                                                  fmin(pmin, FP8_CL_DRIFT_LIMIT) > 10.0;
  double xs[2];
  char mlabel[96];
  fp8_markers marks;
  size_t nm = spike_marks(st, xs, &marks, mlabel, sizeof mlabel);
  fp8_png_text text[] = {{"fp8lab-version", FP8LAB_VERSION}, {"study", st->dir}};
  char title[160];
  snprintf(title, sizeof title, "Amax drift of the closed loop (seed %lld) from the open loop",
           (long long)st->open_seed);
  fp8_chart ch = {.title = title, .xlabel = "training step",
                  .ylabel = "median over tensors of |amax closed / amax open - 1|",
                  .logy = logy, .grid = 1, .text = text, .ntext = 2};
  if (logy) { /* whole decades, one below the smaller of the data and the 10% line */
    ch.ymin = pow(10.0, floor(log10(fmin(pmin, FP8_CL_DRIFT_LIMIT))) - 1.0);
    ch.ymax = pow(10.0, ceil(log10(fmax(pmax, FP8_CL_DRIFT_LIMIT))));
  }
  rc = fp8_plot_lines(path, &ch, ser, ns, nm ? &marks : NULL, nm, err, errlen);
done:
  free(buf);
  free(ser);
  return rc;
}
