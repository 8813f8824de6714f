/* timeline_plot.c: timeline.png and timeline_zoom.png of `fp8lab timeline` (timeline_report.h):
 * one step per mode as a Gantt chart, streams as lanes (the side stream only where a mode uses
 * it), ops coloured by kind, each lane noted with its step time and exposed bookkeeping. The
 * zoom shifts every mode so that the end of its forward pass is at x = 0 and shows the
 * bookkeeping there at a readable width. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plot.h"
#include "timeline_report.h"
#include "util.h"

enum { K_CAST, K_AMAX, K_FPROP, K_DGRAD, K_WGRAD, K_GATHER, K_UPDATE, K_WAIT, K_COUNT };
static const char *const KIND_LABELS[K_COUNT] = {
    "cast (+ amax in delayed)", "amax + scale (current)", "fprop GEMM", "dgrad GEMM",
    "wgrad GEMM", "amax gather + all-reduce", "history + scale update", "wait for the update"};
static const fp8_color KIND_COLORS[K_COUNT] = {
    FP8_COLOR_ORANGE, FP8_COLOR_YELLOW,     FP8_COLOR_BLUE,   FP8_COLOR_SKYBLUE,
    FP8_COLOR_GREEN,  FP8_COLOR_PURPLE,     FP8_COLOR_VERMILLION, FP8_COLOR_BLACK};
/* the bookkeeping of the delayed modes: a few microseconds in a step of milliseconds, drawn
 * last and at least two pixels wide; every other op at its true width */
static const size_t TOP_KINDS[] = {K_GATHER, K_UPDATE, K_WAIT};

static size_t chart_kind(fp8_tl_kind k) {
  switch (k) {
  case FP8_TL_CAST: return K_CAST;
  case FP8_TL_AMAX:
  case FP8_TL_SCALE: return K_AMAX;
  case FP8_TL_FPROP: return K_FPROP;
  case FP8_TL_DGRAD: return K_DGRAD;
  case FP8_TL_WGRAD: return K_WGRAD;
  case FP8_TL_GATHER:
  case FP8_TL_ALLREDUCE: return K_GATHER;
  case FP8_TL_UPDATE: return K_UPDATE;
  default: return K_WAIT;
  }
}

/* What one chart shows: per plan the spans of the step drawn and its totals. */
typedef struct {
  const fp8_tl_report *r;
  fp8_tl_span **sp;     /* [nplans] */
  fp8_tl_totals *tot;   /* [nplans] */
  double *shift;        /* [nplans] subtracted from every time (the zoom) */
  double unit;          /* us per x unit: 1000 (ms) or 1 */
} chart_data;

static int uses_side(const fp8_tl_plan *p) {
  for (size_t i = 0; i < p->nops; i++)
    if (p->ops[i].stream == FP8_TL_SIDE) return 1;
  return 0;
}

/* The end of the forward pass on the compute stream: the end of the last forward op there. */
static double forward_end(const fp8_tl_plan *p, const fp8_tl_span *sp) {
  double e = 0;
  for (size_t i = 0; i < p->nops; i++)
    if (p->ops[i].stream == FP8_TL_COMPUTE && p->ops[i].phase == FP8_FWD &&
        p->ops[i].kind != FP8_TL_WAIT && !fp8_tl_is_bookkeeping(p->mode, p->ops[i].kind))
      e = fmax(e, sp[i].end_us);
  return e;
}

static int draw(const char *path, const chart_data *c, const char *title, const char *xlabel,
                double xmin, double xmax, int notes_on, char *err, size_t errlen) {
  const fp8_tl_report *r = c->r;
  size_t nb = 0, nl = 0, cap = 0;
  for (size_t k = 0; k < r->nplans; k++) cap += r->plans[k].nops;
  fp8_gantt_bar *bars = calloc(cap + 1, sizeof *bars);
  char (*labels)[96] = calloc(2 * r->nplans + 1, sizeof *labels);
  char (*notes)[160] = calloc(2 * r->nplans + 1, sizeof *notes);
  const char **lp = calloc(2 * r->nplans + 1, sizeof *lp), **np = calloc(2 * r->nplans + 1, sizeof *np);
  int rc = bars && labels && notes && lp && np ? FP8_OK : FP8_ENOMEM;
  for (size_t k = 0; k < r->nplans && !rc; k++) {
    const fp8_tl_plan *p = &r->plans[k];
    const size_t lane0 = nl, side = uses_side(p);
    for (size_t s = 0; s <= side; s++, nl++) {
      snprintf(labels[nl], sizeof labels[nl], "%s%s", fp8_tl_mode_name(p->mode),
               s ? ": side stream" : "");
      if (s == 0 && notes_on)
        snprintf(notes[nl], sizeof notes[nl], "%.2f ms, %.1f us exposed",
                 c->tot[k].step_us / 1e3, c->tot[k].exposed_us);
      lp[nl] = labels[nl], np[nl] = notes[nl];
    }
    for (size_t i = 0; i < p->nops; i++) {
      const fp8_tl_op *op = &p->ops[i];
      bars[nb++] = (fp8_gantt_bar){(c->sp[k][i].start_us - c->shift[k]) / c->unit,
                                   (c->sp[k][i].end_us - c->shift[k]) / c->unit,
                                   lane0 + (op->stream == FP8_TL_SIDE), chart_kind(op->kind)};
    }
  }
  if (!rc) {
    char src[600], dev[300];
    snprintf(src, sizeof src, "%s", r->shape->source);
    snprintf(dev, sizeof dev, "%s", r->meas ? r->meas->device : "model estimate, not measured");
    fp8_png_text text[] = {{"fp8lab-version", FP8LAB_VERSION}, {"plot", "timeline"},
                           {"shape", src}, {"device", dev}};
    fp8_chart ch = {.title = title, .xlabel = xlabel, .xmin = xmin, .xmax = xmax, .grid = 1,
                    .text = text, .ntext = 4, .width = 1600, .height = 180 + 90 * (int)nl};
    fp8_gantt g = {.nlanes = nl, .lane_labels = lp, .lane_notes = np, .nkinds = K_COUNT,
                   .kind_labels = KIND_LABELS, .kind_colors = KIND_COLORS, .nbars = nb,
                   .bars = bars, .top_kinds = TOP_KINDS, .widen_top_only = 1,
                   .ntop = sizeof TOP_KINDS / sizeof *TOP_KINDS};
    rc = fp8_plot_gantt(path, &ch, &g, err, errlen);
  }
  free(bars), free(labels), free(notes), free(lp), free(np);
  return rc;
}

int fp8_tl_write_png(const char *dir, const fp8_tl_report *r, char *err, size_t errlen) {
  const size_t n = r->nplans;
  chart_data c = {r, calloc(n, sizeof *c.sp), calloc(n, sizeof *c.tot), calloc(n, sizeof(double)),
                  1000.0};
  char path[4200], title[512];
  int rc = c.sp && c.tot && c.shift ? FP8_OK : FP8_ENOMEM;
  for (size_t k = 0; k < n && !rc; k++) {
    c.sp[k] = r->model[k];
    c.tot[k] = r->model_tot[k];
    if (!r->stats || r->stats[k].median_step < 0) continue;
    if (!(c.sp[k] = malloc(r->plans[k].nops * sizeof **c.sp))) rc = FP8_ENOMEM;
    else if (fp8_tl_measured_spans(r->meas, k, r->stats[k].median_step, &r->plans[k], c.sp[k]) ==
             FP8_OK)
      fp8_tl_totals_of(&r->plans[k], c.sp[k], &c.tot[k]);
  }
  const char *what = r->meas ? "measured, the median step of each mode"
                             : "MODEL ESTIMATE (not measured)";
  snprintf(title, sizeof title, "One training step per mode: %zu Linears, %s", r->shape->nlinears,
           what);
  snprintf(path, sizeof path, "%s/timeline.png", dir);
  /* room on the right for each lane's note */
  double end = 1.0;
  for (size_t k = 0; k < n && !rc; k++)
    for (size_t i = 0; i < r->plans[k].nops; i++) end = fmax(end, c.sp[k][i].end_us);
  if (!rc)
    rc = draw(path, &c, title, "time from the step's start (ms)", 0, 1.4 * end / 1e3, 1, err,
              errlen);
  c.unit = 1.0;
  /* the zoom: each mode's end of forward at 0; the window holds the longest run of ops
   * between it and the first backward GEMM, whatever the mode */
  double after = 20.0;
  for (size_t k = 0; k < n && !rc; k++) {
    const fp8_tl_plan *p = &r->plans[k];
    c.shift[k] = forward_end(p, c.sp[k]);
    for (size_t i = 0; i < p->nops; i++)
      if (p->ops[i].kind == FP8_TL_DGRAD) {
        after = fmax(after, c.sp[k][i].start_us - c.shift[k]);
        break;
      }
  }
  snprintf(title, sizeof title, "The end of the forward pass (x = 0 in every mode): %s", what);
  snprintf(path, sizeof path, "%s/timeline_zoom.png", dir);
  if (!rc)
    rc = draw(path, &c, title, "time from the end of the forward GEMMs (us)", -0.2 * after,
              1.3 * after, 0, err, errlen);
  for (size_t k = 0; k < n && c.sp; k++)
    if (c.sp[k] != r->model[k]) free(c.sp[k]);
  free(c.sp), free(c.tot), free(c.shift);
  return rc == FP8_ENOMEM ? fp8_errorf(rc, err, errlen, "out of memory") : rc;
}
