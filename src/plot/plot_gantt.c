/* plot_gantt.c: the Gantt chart of plot.h (fp8_plot_gantt): bars [start, end) on labelled
 * horizontal lanes over a linear x axis (e.g. the ops of a training step on a GPU's streams),
 * coloured by kind, with the x ticks and titles of plot_layout.c and its legend of the kinds
 * drawn, on the canvas of plot_canvas.c.
 *
 * Bars are placed in page pixels (plot_page_mode), not through PLplot's world coordinates,
 * so that their edges fall on whole pixels: a bar widened to min_bar_px covers exactly that
 * many columns, and the 1 px gap that separates back-to-back wide bars of one lane is white,
 * not a blend. Bars of one lane and colour whose pixel spans overlap (the many tiny ops of a
 * long step) are filled as one rectangle. */
#include "plot_internal.h"

#include <math.h>
#include <plplot.h>
#include <stdio.h>
#include <string.h>

#include "fp8.h"

#define GANTT_MAX_LANES 64
#define GANTT_MAX_KINDS 64
#define GANTT_MAX_BARS 1000000
#define GANTT_MAX_MIN_PX 100.0
#define BAR_FILL 0.7 /* of a lane's height */

static int gantt_check_bars(const char *path, const fp8_gantt *g, char *err, size_t errlen) {
  for (size_t i = 0; i < g->nbars; i++) {
    const fp8_gantt_bar *b = &g->bars[i];
    if (!isfinite(b->start) || !isfinite(b->end))
      FAIL(FP8_EINVAL, "%s: gantt: bar %zu: expected finite start and end, got %g, %g", path, i,
           b->start, b->end);
    if (b->end < b->start)
      FAIL(FP8_EINVAL, "%s: gantt: bar %zu: end %g before start %g", path, i, b->end, b->start);
    if (b->lane >= g->nlanes)
      FAIL(FP8_EINVAL, "%s: gantt: bar %zu: lane %zu out of range (nlanes %zu)", path, i, b->lane,
           g->nlanes);
    if (b->kind >= g->nkinds)
      FAIL(FP8_EINVAL, "%s: gantt: bar %zu: kind %zu out of range (nkinds %zu)", path, i, b->kind,
           g->nkinds);
  }
  return FP8_OK;
}

static int gantt_check(const char *path, const fp8_chart *ch, const fp8_gantt *g, char *err,
                       size_t errlen) {
  int rc = plot_check_common(path, ch, err, errlen);
  if (rc != FP8_OK) return rc;
  if (!g) FAIL(FP8_EINVAL, "%s: gantt: expected a description, got NULL", path);
  if (ch->logx)
    FAIL(FP8_EINVAL, "%s: gantt: logx is not supported (durations would not compare)", path);
  if (ch->xmin < ch->xmax && !(isfinite(ch->xmin) && isfinite(ch->xmax)))
    FAIL(FP8_EINVAL, "%s: gantt: expected a finite x window, got %g..%g", path, ch->xmin, ch->xmax);
  if (g->nlanes == 0 || g->nlanes > GANTT_MAX_LANES)
    FAIL(FP8_EINVAL, "%s: gantt: expected 1..%d lanes, got %zu", path, GANTT_MAX_LANES, g->nlanes);
  if (!g->lane_labels)
    FAIL(FP8_EINVAL, "%s: gantt: expected %zu lane labels, got NULL", path, g->nlanes);
  if (g->nkinds > GANTT_MAX_KINDS)
    FAIL(FP8_EINVAL, "%s: gantt: expected at most %d kinds, got %zu", path, GANTT_MAX_KINDS,
         g->nkinds);
  if (g->nkinds && !g->kind_labels)
    FAIL(FP8_EINVAL, "%s: gantt: expected %zu kind labels, got NULL", path, g->nkinds);
  for (size_t k = 0; g->kind_colors && k < g->nkinds; k++)
    if ((rc = plot_check_color(path, "gantt kind", k, g->kind_colors[k], err, errlen)) != FP8_OK)
      return rc;
  if (g->nbars > GANTT_MAX_BARS)
    FAIL(FP8_EINVAL, "%s: gantt: expected at most %d bars, got %zu", path, GANTT_MAX_BARS,
         g->nbars);
  if (g->nbars && !g->bars) FAIL(FP8_EINVAL, "%s: gantt: nbars %zu but bars NULL", path, g->nbars);
  if (!(g->min_bar_px >= 0 && g->min_bar_px <= GANTT_MAX_MIN_PX))
    FAIL(FP8_EINVAL, "%s: gantt: expected min_bar_px in 0..%g, got %g", path, GANTT_MAX_MIN_PX,
         g->min_bar_px);
  if (g->ntop && !g->top_kinds)
    FAIL(FP8_EINVAL, "%s: gantt: ntop %zu but top_kinds NULL", path, g->ntop);
  for (size_t t = 0; t < g->ntop; t++)
    if (g->top_kinds[t] >= g->nkinds)
      FAIL(FP8_EINVAL, "%s: gantt: top_kinds[%zu] %zu out of range (nkinds %zu)", path, t,
           g->top_kinds[t], g->nkinds);
  return gantt_check_bars(path, g, err, errlen);
}

/* Whether bar b lies in the x range [lo, hi] (an empty bar: on it; else overlapping it). */
static int bar_visible(const fp8_gantt_bar *b, double lo, double hi) {
  if (b->start == b->end) return b->start >= lo && b->start <= hi;
  return b->start < hi && b->end > lo;
}

/* The x axis: the caller's window, else the bars' range (from 0 when it starts there). */
static axis gantt_xaxis(const fp8_chart *ch, const fp8_gantt *g) {
  double lo = INFINITY, hi = -INFINITY;
  for (size_t i = 0; i < g->nbars; i++) {
    plot_range_add(g->bars[i].start, 0, &lo, &hi);
    plot_range_add(g->bars[i].end, 0, &lo, &hi);
  }
  axis ax;
  plot_ax_range(&ax, 0, lo, hi, ch->xmin, ch->xmax);
  return ax;
}

typedef struct {
  box p;
  double lh;          /* lane height (px) */
  double cap, rcap;   /* tick label and lane label sizes */
  size_t rstep;       /* every rstep-th lane labelled (only when lanes are very thin) */
  size_t rmaxc;       /* lane label length limit (characters) */
  double xt, yt;      /* where the axis titles go */
  double minpx, gap;  /* narrowest bar and the gap between wide ones (px) */
} gantt_layout;

/* plot_layout_xy places the box for the legend and titles; the left margin is then the lane
 * labels' (not numeric tick labels'), and the x ticks are chosen again for the box's width. */
static gantt_layout gantt_place(const canvas *c, const fp8_chart *ch, const fp8_gantt *g,
                                axis *ax, legend *L) {
  gantt_layout G;
  axis ay = {0, (double)g->nlanes, 0, 1};
  G.p = plot_layout_xy(c, ch, ax, &ay, L, 1, 0, &G.xt, &G.yt);
  G.cap = c->fs * 0.95;
  G.lh = (G.p.b - G.p.t) / (double)g->nlanes;
  G.rcap = fmax(fmin(G.cap, 0.6 * G.lh), 6.0);
  G.rstep = (size_t)ceil(G.rcap * 1.3 / G.lh);
  if (G.rstep < 1) G.rstep = 1;
  G.rmaxc = (size_t)(c->W * 0.25 / (TEXT_CHAR_W * G.rcap));
  if (G.rmaxc > 40) G.rmaxc = 40; /* thin lanes' small text: still no more than bars' labels */
  double lw = 0; /* the widest label as drawn (shortened) */
  for (size_t i = 0; i < g->nlanes; i++) {
    size_t n = plot_utf8_len(g->lane_labels[i] ? g->lane_labels[i] : "");
    lw = fmax(lw, (double)(n < G.rmaxc ? n : G.rmaxc) * TEXT_CHAR_W * G.rcap);
  }
  double ytitle = (ch->ylabel && *ch->ylabel) ? 2.4 * c->fs : 0;
  G.p.l = 1.0 * c->fs + ytitle + lw + 0.8 * G.rcap;
  plot_ax_ticks(ax, G.p.r - G.p.l, 8 * DIGIT_W * G.cap);
  plot_ax_ticks(ax, G.p.r - G.p.l, (plot_ax_label_chars(ax) + 3) * DIGIT_W * G.cap);
  G.minpx = ceil((g->min_bar_px > 0 ? g->min_bar_px : 2.0) * c->W / 1200.0 - 1e-9);
  if (G.minpx < 1) G.minpx = 1;
  G.gap = fmax(1.0, floor(c->s + 0.5));
  return G;
}

/* A lane's pending fill: bars of one colour whose pixel spans overlap, merged (lanes do not
 * overlap, so each keeps its own: the order of draws within a lane is kept). */
typedef struct {
  int on;
  size_t lane;
  int color;
  double x0, x1;
} run;

static void run_flush(const canvas *c, const gantt_layout *G, run *r) {
  if (!r->on) return;
  double top = floor(G->p.t + r->lane * G->lh + 0.5 * (1 - BAR_FILL) * G->lh + 0.5);
  double bot = floor(G->p.t + (r->lane + 1) * G->lh - 0.5 * (1 - BAR_FILL) * G->lh + 0.5);
  if (bot <= top) bot = top + 1;
  /* The cairo driver strokes a filled polygon's outline too, at the line width: at 1 px, the
   * polygon inset by half a pixel covers exactly the columns and rows [x0, x1) x [top, bot). */
  double x0 = r->x0 + 0.5, x1 = r->x1 - 0.5;
  top += 0.5;
  bot -= 0.5;
  PLFLT x[4] = {x0, x1, x1, x0};
  PLFLT y[4] = {c->H - bot, c->H - bot, c->H - top, c->H - top};
  plcol0(r->color);
  plwidth(1.0);
  plfill(4, x, y);
  r->on = 0;
}

/* Draws bar b (visible in ax) in page pixels: narrow ones widened to minpx and snapped to
 * whole pixels, wide ones snapped and shortened by the gap at their end, both clipped at the
 * box; records the lane's rightmost drawn pixel in lane_end. */
static void gantt_bar(const canvas *c, const gantt_layout *G, const axis *ax,
                      const fp8_gantt_bar *b, int color, int widen, run *runs,
                      double *lane_end) {
  const box *p = &G->p;
  double k = (p->r - p->l) / (ax->hi - ax->lo);
  double x0 = p->l + (b->start - ax->lo) * k, x1 = p->l + (b->end - ax->lo) * k;
  if (x1 - x0 < G->minpx && !widen) {
    x0 = floor(x0 + 0.5);
    x1 = floor(x1 + 0.5);
  } else if (x1 - x0 < G->minpx) {
    x0 = floor((x0 + x1) / 2 - G->minpx / 2 + 0.5);
    x1 = x0 + G->minpx;
  } else {
    x0 = floor(x0 + 0.5);
    x1 = floor(x1 + 0.5);
    if (x1 - x0 >= 4 * G->gap) x1 -= G->gap;
  }
  x0 = fmax(x0, p->l);
  x1 = fmin(x1, p->r);
  if (!(x1 > x0)) return;
  if (x1 > lane_end[b->lane]) lane_end[b->lane] = x1;
  run *r = &runs[b->lane];
  if (r->on && r->lane == b->lane && r->color == color && x0 <= r->x1 && x1 >= r->x0) {
    r->x0 = fmin(r->x0, x0);
    r->x1 = fmax(r->x1, x1);
    return;
  }
  run_flush(c, G, r);
  *r = (run){1, b->lane, color, x0, x1};
}

/* Every visible bar: those of kinds not in top_kinds in the given order, then each top kind's. */
static void gantt_bars(const canvas *c, const gantt_layout *G, const axis *ax, const fp8_gantt *g,
                       const int *kcol, double *lane_end) {
  plot_page_mode(c);
  unsigned char top[GANTT_MAX_KINDS] = {0};
  for (size_t t = 0; t < g->ntop; t++) top[g->top_kinds[t]] = 1;
  run r[GANTT_MAX_LANES] = {{0}};
  for (size_t i = 0; i < g->nbars; i++) {
    const fp8_gantt_bar *b = &g->bars[i];
    if (!top[b->kind] && bar_visible(b, ax->lo, ax->hi))
      gantt_bar(c, G, ax, b, kcol[b->kind], !g->widen_top_only, r, lane_end);
  }
  for (size_t t = 0; t < g->ntop; t++) {
    size_t kind = g->top_kinds[t];
    if (top[kind] != 1) continue; /* listed twice: drawn once */
    top[kind] = 2;
    for (size_t i = 0; i < g->nbars; i++) {
      const fp8_gantt_bar *b = &g->bars[i];
      if (b->kind == kind && bar_visible(b, ax->lo, ax->hi))
        gantt_bar(c, G, ax, b, kcol[kind], 1, r, lane_end);
    }
  }
  for (size_t l = 0; l < g->nlanes; l++) run_flush(c, G, &r[l]);
}

/* Grid lines at the x ticks (behind the bars). */
static void gantt_grid(const canvas *c, const gantt_layout *G, const axis *ax, int grid) {
  if (!grid) return;
  plot_mode(c, &G->p, ax->lo, ax->hi, 0, 1);
  plwidth(1.0 * c->s);
  plcol0(CI_GRID);
  plbox("g", ax->step, 0, "", 0, 0);
}

/* Group separators (whole rows of pixels, like the bars), the frame and its x ticks (over the
 * bars). */
static void gantt_frame(const canvas *c, const gantt_layout *G, const axis *ax,
                        const fp8_gantt *g) {
  if (g->ngroups > 1) {
    plot_page_mode(c);
    plcol0(CI_AXIS_GREY);
    plwidth(G->gap);
    for (size_t l = g->ngroups; l < g->nlanes; l += g->ngroups) {
      double y = floor(G->p.t + l * G->lh + 0.5) + 0.5 * G->gap;
      pljoin(G->p.l, c->H - y, G->p.r, c->H - y);
    }
  }
  plot_mode(c, &G->p, ax->lo, ax->hi, 0, (double)g->nlanes);
  plcol0(CI_FG);
  plwidth(1.0 * c->s);
  plbox("bcst", ax->step, 0, "bc", 0, 0);
}

/* Each lane's note: right of its last drawn bar where it fits in the box, else right-justified
 * at the box's right edge on a translucent white plate (over the bars). */
static void gantt_notes(const canvas *c, const gantt_layout *G, const fp8_gantt *g,
                        const double *lane_end) {
  if (!g->lane_notes) return;
  const box *p = &G->p;
  double ncap = fmax(fmin(0.9 * c->fs, 0.4 * G->lh), 6.0);
  size_t maxc = (size_t)(0.9 * (p->r - p->l) / (TEXT_CHAR_W * ncap));
  plot_page_mode(c);
  for (size_t l = 0; l < g->nlanes; l++) {
    const char *s = g->lane_notes[l];
    if (!s || !*s) continue;
    double yc = p->t + (l + 0.5) * G->lh;
    size_t n = plot_utf8_len(s);
    double tw = (double)(n < maxc ? n : maxc) * TEXT_CHAR_W * ncap;
    double x = fmax(lane_end[l], p->l) + 0.6 * ncap;
    if (x + tw <= p->r - 0.6 * ncap) {
      plot_text_user(c, x, yc, 0, 0.0, ncap, CI_FG, s, maxc);
      continue;
    }
    /* The plate: the estimated width with a margin (cairo's glyphs may run a little wider). */
    double xr = p->r - 0.6 * ncap, xl = xr - 1.04 * tw - 0.6 * ncap;
    PLFLT px[4] = {xl, p->r - 1, p->r - 1, xl};
    PLFLT py[4] = {c->H - (yc + 0.95 * ncap), c->H - (yc + 0.95 * ncap), c->H - (yc - 0.95 * ncap),
                   c->H - (yc - 0.95 * ncap)};
    plcol0(CI_WHITE_T);
    plfill(4, px, py);
    plot_text_user(c, xr, yc, 0, 1.0, ncap, CI_FG, s, maxc);
  }
}

/* x tick labels below the box, lane labels left of it (centred on their lanes). */
static void gantt_labels(const canvas *c, const gantt_layout *G, const axis *ax,
                         const fp8_gantt *g) {
  plot_page_mode(c);
  const box *p = &G->p;
  plot_x_tick_labels(c, ax, p, G->cap);
  for (size_t l = 0; l < g->nlanes; l += G->rstep)
    plot_text_user(c, p->l - 0.6 * G->rcap, p->t + (l + 0.5) * G->lh, 0, 1.0, G->rcap, CI_FG,
                   g->lane_labels[l], G->rmaxc);
}

int fp8_plot_gantt(const char *path, const fp8_chart *ch, const fp8_gantt *g, char *err,
                   size_t errlen) {
  int rc = gantt_check(path, ch, g, err, errlen);
  if (rc != FP8_OK) return rc;
  axis ax = gantt_xaxis(ch, g);
  unsigned char used[GANTT_MAX_KINDS] = {0};
  for (size_t i = 0; i < g->nbars; i++)
    if (bar_visible(&g->bars[i], ax.lo, ax.hi)) used[g->bars[i].kind] = 1;

  canvas c;
  if ((rc = plot_canvas_begin(&c, ch, err, errlen)) != FP8_OK) return rc;
  int kcol[GANTT_MAX_KINDS];
  legend L = {0};
  for (size_t k = 0; k < g->nkinds; k++) {
    kcol[k] = CI_PAL + plot_pick_color(&c, g->kind_colors ? g->kind_colors[k] : FP8_COLOR_AUTO);
    if (used[k]) plot_legend_add(&L, LEG_BOX, kcol[k], 0, "", g->kind_labels[k]);
  }
  gantt_layout G = gantt_place(&c, ch, g, &ax, &L);
  double lane_end[GANTT_MAX_LANES];
  for (size_t l = 0; l < g->nlanes; l++) lane_end[l] = -INFINITY;
  gantt_grid(&c, &G, &ax, ch->grid);
  gantt_bars(&c, &G, &ax, g, kcol, lane_end);
  gantt_frame(&c, &G, &ax, g);
  gantt_notes(&c, &G, g, lane_end);
  gantt_labels(&c, &G, &ax, g);
  plot_draw_titles(&c, &G.p, ch, G.xt, G.yt);
  plot_legend_draw(&c, &L, &G.p);
  return plot_canvas_end(&c, FP8_OK, path, ch, err, errlen);
}
