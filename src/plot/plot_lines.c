/* plot_lines.c: the line chart of plot.h (fp8_plot_lines): series as lines, post steps or
 * points, broken at values the axis cannot show, plus annotation markers (vertical lines or
 * points), drawn with the axes, legend and layout of plot_layout.c. */
#include "plot_internal.h"

#include <math.h>
#include <plplot.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8.h"

/* Unicode glyphs of fp8_marker (DejaVu Sans has all of them). */
static const char *const marker_glyph[FP8_MARKER_COUNT] = {"", "\u25CF", "\u25A0", "\u25B2",
                                                           "\u25C6", "\u2716"};

/* Draws a polyline through the drawable points of (x, y), broken at undrawable ones; a lone
 * drawable point becomes a dot. step: post steps. */
static int draw_polyline(const axis *ax, const axis *ay, const double *x, const double *y,
                         size_t n, int step) {
  PLFLT *px = malloc(sizeof(PLFLT) * (2 * n + 1)), *py = malloc(sizeof(PLFLT) * (2 * n + 1));
  if (!px || !py) {
    free(px);
    free(py);
    return FP8_ENOMEM;
  }
  size_t m = 0;
  for (size_t i = 0; i <= n; i++) {
    double xv = i < n ? plot_ax_map(ax, x[i]) : NAN, yv = i < n ? plot_ax_map(ay, y[i]) : NAN;
    if (isfinite(xv) && isfinite(yv)) {
      if (step && m > 0) {
        px[m] = xv;
        py[m] = py[m - 1];
        m++;
      }
      px[m] = xv;
      py[m] = yv;
      m++;
      continue;
    }
    if (m >= 2) plline((PLINT)m, px, py);
    else if (m == 1) plstring(1, px, py, "\u2022");
    m = 0;
  }
  free(px);
  free(py);
  return FP8_OK;
}

static void draw_points(const canvas *c, const axis *ax, const axis *ay, const double *x,
                        const double *y, size_t n, const char *glyph, double cap) {
  plot_text_size(c, cap);
  for (size_t i = 0; i < n; i++) {
    PLFLT xv = plot_ax_map(ax, x[i]), yv = plot_ax_map(ay, y[i]);
    if (isfinite(xv) && isfinite(yv)) plstring(1, &xv, &yv, glyph);
  }
}

static int mark_color(const fp8_markers *m) {
  return CI_PAL + (m->color ? m->color : FP8_COLOR_VERMILLION);
}

int fp8_plot_lines(const char *path, const fp8_chart *ch, const fp8_series *series, size_t ns,
                   const fp8_markers *marks, size_t nm, char *err, size_t errlen) {
  int rc = plot_check_common(path, ch, err, errlen);
  if (rc != FP8_OK) return rc;
  if (ns == 0 || !series) FAIL(FP8_EINVAL, "%s: line chart: expected at least one series, got 0", path);
  if (nm && !marks) FAIL(FP8_EINVAL, "%s: line chart: nm %zu but no markers", path, nm);
  for (size_t i = 0; i < ns; i++) {
    const fp8_series *s = &series[i];
    if (s->n == 0 || !s->x || !s->y)
      FAIL(FP8_EINVAL, "%s: series %zu (%s): expected n >= 1 points with x and y arrays, got n %zu",
           path, i, s->label ? s->label : "", s->n);
    if ((int)s->style < 0 || s->style > FP8_STYLE_POINTS || (int)s->marker < 0 ||
        s->marker >= FP8_MARKER_COUNT)
      FAIL(FP8_EINVAL, "%s: series %zu: style %d or marker %d out of range", path, i, (int)s->style,
           (int)s->marker);
    if (!(s->width >= 0 && s->width <= 50))
      FAIL(FP8_EINVAL, "%s: series %zu: width %g: expected 0..50 px", path, i, s->width);
    if ((rc = plot_check_color(path, "series", i, s->color, err, errlen)) != FP8_OK) return rc;
  }
  for (size_t i = 0; i < nm; i++) {
    if (marks[i].n && !marks[i].x) FAIL(FP8_EINVAL, "%s: markers %zu: n %zu but no x", path, i, marks[i].n);
    if ((int)marks[i].marker < 0 || marks[i].marker >= FP8_MARKER_COUNT)
      FAIL(FP8_EINVAL, "%s: markers %zu: marker %d out of range", path, i, (int)marks[i].marker);
    if ((rc = plot_check_color(path, "markers", i, marks[i].color, err, errlen)) != FP8_OK)
      return rc;
  }

  /* Data ranges (markers included). */
  double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
  for (size_t i = 0; i < ns; i++)
    for (size_t j = 0; j < series[i].n; j++) {
      double xv = series[i].x[j], yv = series[i].y[j];
      if (!isfinite(xv) || !isfinite(yv) || (ch->logx && xv <= 0) || (ch->logy && yv <= 0)) continue;
      plot_range_add(xv, ch->logx, &xlo, &xhi);
      plot_range_add(yv, ch->logy, &ylo, &yhi);
    }
  for (size_t i = 0; i < nm; i++)
    for (size_t j = 0; j < marks[i].n; j++) {
      plot_range_add(marks[i].x[j], ch->logx, &xlo, &xhi);
      if (marks[i].y) plot_range_add(marks[i].y[j], ch->logy, &ylo, &yhi);
    }
  axis ax, ay;
  plot_ax_range(&ax, ch->logx, xlo, xhi, ch->xmin, ch->xmax);
  if (!ch->logx && !(ch->xmin < ch->xmax) && xlo <= xhi) { /* lines: no padding along x */
    ax.lo = xlo;
    ax.hi = xhi > xlo ? xhi : xlo + 1;
  }
  plot_ax_range(&ay, ch->logy, ylo, yhi, ch->ymin, ch->ymax);
  if (!ch->logy && !(ch->ymin < ch->ymax) && ch->min_yspan > 0 && ylo <= yhi &&
      ay.hi - ay.lo < ch->min_yspan) { /* the minimum span, centred on the data */
    double mid = 0.5 * (ylo + yhi);
    ay.lo = mid - 0.5 * ch->min_yspan;
    ay.hi = mid + 0.5 * ch->min_yspan;
  }

  canvas c;
  if ((rc = plot_canvas_begin(&c, ch, err, errlen)) != FP8_OK) return rc;

  legend L = {0};
  for (size_t i = 0; i < ns; i++) {
    int ci = CI_PAL + plot_pick_color(&c, series[i].color);
    const fp8_series *s = &series[i];
    fp8_marker mk = s->style == FP8_STYLE_POINTS && !s->marker ? FP8_MARKER_CIRCLE : s->marker;
    if (s->style == FP8_STYLE_POINTS)
      plot_legend_add(&L, LEG_MARKER, ci, 0, marker_glyph[mk], s->label);
    else {
      size_t n0 = L.n;
      plot_legend_add(&L, LEG_LINE, ci, s->dashed, marker_glyph[mk], s->label);
      if (L.n > n0) L.e[n0].width = s->width;
    }
  }
  for (size_t i = 0; i < nm; i++) {
    int ci = mark_color(&marks[i]);
    if (marks[i].y)
      plot_legend_add(&L, LEG_MARKER, ci, 0,
                      marker_glyph[marks[i].marker ? marks[i].marker : FP8_MARKER_CROSS],
                      marks[i].label);
    else plot_legend_add(&L, LEG_LINE, ci, 1, "", marks[i].label);
  }

  double xt, yt;
  box p = plot_layout_xy(&c, ch, &ax, &ay, &L, 1, 0, &xt, &yt);
  plot_draw_frame(&c, &p, &ax, &ay, ch->grid, 1);

  /* Vertical marker lines behind the data, then the series, then marker points on top. */
  plot_mode(&c, &p, ax.lo, ax.hi, ay.lo, ay.hi);
  PLINT mark = (PLINT)(6 * c.s / c.ppmm * 1000), space = mark;
  for (size_t i = 0; i < nm; i++) {
    if (marks[i].y) continue;
    plcol0(mark_color(&marks[i]));
    plwidth(2.0 * c.s);
    plstyl(1, &mark, &space);
    for (size_t j = 0; j < marks[i].n; j++) {
      double xv = plot_ax_map(&ax, marks[i].x[j]);
      if (!isfinite(xv)) continue;
      PLFLT lx[2] = {xv, xv}, ly[2] = {ay.lo, ay.hi};
      plline(2, lx, ly);
    }
    plstyl(0, NULL, NULL);
  }
  c.auto_i = 0; /* the same automatic colours as in the legend */
  for (size_t i = 0; i < ns && rc == FP8_OK; i++) {
    const fp8_series *s = &series[i];
    plcol0(CI_PAL + plot_pick_color(&c, s->color));
    plwidth((s->width > 0 ? s->width : 2.5) * c.s);
    if (s->dashed) plstyl(1, &mark, &space);
    if (s->style != FP8_STYLE_POINTS) rc = draw_polyline(&ax, &ay, s->x, s->y, s->n, s->style == FP8_STYLE_STEP);
    plstyl(0, NULL, NULL);
    fp8_marker mk = s->style == FP8_STYLE_POINTS && !s->marker ? FP8_MARKER_CIRCLE : s->marker;
    if (mk) draw_points(&c, &ax, &ay, s->x, s->y, s->n, marker_glyph[mk],
                        (s->style == FP8_STYLE_POINTS ? 0.75 : 0.6) * c.fs);
  }
  for (size_t i = 0; i < nm; i++) {
    if (!marks[i].y) continue;
    plcol0(mark_color(&marks[i]));
    draw_points(&c, &ax, &ay, marks[i].x, marks[i].y, marks[i].n,
                marker_glyph[marks[i].marker ? marks[i].marker : FP8_MARKER_CROSS], 0.9 * c.fs);
  }
  /* The frame again on top, so that data at the edges does not hide it. */
  plot_draw_frame(&c, &p, &ax, &ay, 0, 1);
  plot_draw_axis_labels(&c, &p, &ax, &ay, 1);
  plot_draw_titles(&c, &p, ch, xt, yt);
  plot_legend_draw(&c, &L, &p);
  if (rc == FP8_ENOMEM) snprintf(err, errlen, "out of memory");
  return plot_canvas_end(&c, rc, path, ch, err, errlen);
}
