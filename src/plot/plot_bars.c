/* plot_bars.c: the bar-shaped charts of plot.h: the histogram (fp8_plot_histogram, bars over
 * bin edges with shaded windows behind them) and the grouped bar chart (fp8_plot_bars,
 * categories along x), drawn with the axes, legend and layout of plot_layout.c. */
#include "plot_internal.h"

#include <math.h>
#include <plplot.h>
#include <stdlib.h>
#include <string.h>

#include "fp8.h"

/* ------------------------------------------------------------------ histogram */

static void fill_rect(double x0, double x1, double y0, double y1) {
  PLFLT x[4] = {x0, x1, x1, x0}, y[4] = {y0, y0, y1, y1};
  plfill(4, x, y);
}

static fp8_color window_color(const fp8_window *w, size_t i) {
  static const fp8_color win_auto[] = {FP8_COLOR_SKYBLUE, FP8_COLOR_ORANGE, FP8_COLOR_GREEN,
                                       FP8_COLOR_PURPLE, FP8_COLOR_YELLOW, FP8_COLOR_VERMILLION};
  return w[i].color ? w[i].color : win_auto[i % 6];
}

int fp8_plot_histogram(const char *path, const fp8_chart *ch, const fp8_hist *h,
                       const fp8_window *w, size_t nw, char *err, size_t errlen) {
  int rc = plot_check_common(path, ch, err, errlen);
  if (rc != FP8_OK) return rc;
  if (!h || h->nbins == 0 || !h->edges || !h->counts)
    FAIL(FP8_EINVAL, "%s: histogram: expected nbins >= 1 with edges and counts, got %zu", path,
         h ? h->nbins : 0);
  if (ch->logx) FAIL(FP8_EINVAL, "%s: histogram: logx is not supported (bin the logarithm instead)", path);
  if (nw && !w) FAIL(FP8_EINVAL, "%s: histogram: nw %zu but no windows", path, nw);
  for (size_t i = 0; i < h->nbins; i++)
    if (!isfinite(h->edges[i]) || !isfinite(h->edges[i + 1]) || !(h->edges[i] < h->edges[i + 1]))
      FAIL(FP8_EINVAL, "%s: histogram: expected finite ascending edges, got edges[%zu] %g, edges[%zu] %g",
           path, i, h->edges[i], i + 1, h->edges[i + 1]);
  if ((rc = plot_check_color(path, "histogram", 0, h->color, err, errlen)) != FP8_OK) return rc;
  for (size_t i = 0; i < nw; i++) {
    if (!isfinite(w[i].lo) || !isfinite(w[i].hi) || !(w[i].lo < w[i].hi))
      FAIL(FP8_EINVAL, "%s: window %zu: expected finite lo < hi, got %g, %g", path, i, w[i].lo, w[i].hi);
    if (!(w[i].y0 == 0 && w[i].y1 == 0) && !(w[i].y0 >= 0 && w[i].y0 < w[i].y1 && w[i].y1 <= 1))
      FAIL(FP8_EINVAL, "%s: window %zu: expected 0 <= y0 < y1 <= 1 (or both 0), got %g, %g", path, i,
           w[i].y0, w[i].y1);
    if ((rc = plot_check_color(path, "window", i, w[i].color, err, errlen)) != FP8_OK) return rc;
  }

  double xlo = h->edges[0], xhi = h->edges[h->nbins];
  for (size_t i = 0; i < nw; i++) {
    xlo = fmin(xlo, w[i].lo);
    xhi = fmax(xhi, w[i].hi);
  }
  double ylo = INFINITY, yhi = -INFINITY;
  for (size_t i = 0; i < h->nbins; i++) plot_range_add(h->counts[i], ch->logy, &ylo, &yhi);
  axis ax, ay;
  ax.log = 0;
  if (ch->xmin < ch->xmax) ax.lo = ch->xmin, ax.hi = ch->xmax;
  else ax.lo = xlo, ax.hi = xhi;
  if (!ch->logy && ylo <= yhi) ylo = fmin(ylo, 0); /* bars rise from 0 */
  plot_ax_range(&ay, ch->logy, ylo, yhi, ch->ymin, ch->ymax);
  if (!ch->logy && !(ch->ymin < ch->ymax) && ay.lo < 0 && ylo >= 0) ay.lo = 0;
  plot_ax_bar_floor(&ay, ch, ylo, yhi);

  canvas c;
  if ((rc = plot_canvas_begin(&c, ch, err, errlen)) != FP8_OK) return rc;
  legend L = {0};
  fp8_color bar_col = h->color ? h->color : FP8_COLOR_BLUE;
  plot_legend_add(&L, LEG_BOX, CI_PAL + bar_col, 0, "", h->label);
  for (size_t i = 0; i < nw; i++) {
    fp8_color col = window_color(w, i);
    plot_legend_add(&L, LEG_BOX, CI_PAL_T + col, 0, "", w[i].label);
    L.e[L.n - 1].edge = CI_PAL + col;
  }
  double xt, yt;
  box p = plot_layout_xy(&c, ch, &ax, &ay, &L, 1, 0, &xt, &yt);
  plot_draw_frame(&c, &p, &ax, &ay, ch->grid, 1);
  plot_mode(&c, &p, ax.lo, ax.hi, ay.lo, ay.hi);
  /* Windows: translucent bands (the full height or their part of it) with opaque edges over
   * the full height, dashed unless solid; a band's top and bottom are outlined too. */
  PLINT mark = (PLINT)(6 * c.s / c.ppmm * 1000), space = mark;
  for (size_t i = 0; i < nw; i++) {
    int col = window_color(w, i);
    int full = w[i].y0 == 0 && w[i].y1 == 0;
    double b0 = full ? ay.lo : ay.lo + w[i].y0 * (ay.hi - ay.lo);
    double b1 = full ? ay.hi : ay.lo + w[i].y1 * (ay.hi - ay.lo);
    plcol0(CI_PAL_T + col);
    fill_rect(w[i].lo, w[i].hi, b0, b1);
    if (!full) {
      plcol0(CI_PAL + col);
      plwidth(2.0 * c.s);
      pljoin(w[i].lo, b0, w[i].hi, b0);
      pljoin(w[i].lo, b1, w[i].hi, b1);
    }
  }
  for (size_t i = 0; i < nw; i++) {
    int col = window_color(w, i);
    plcol0(CI_PAL + col);
    plwidth(2.0 * c.s);
    if (!w[i].solid) plstyl(1, &mark, &space);
    pljoin(w[i].lo, ay.lo, w[i].lo, ay.hi);
    pljoin(w[i].hi, ay.lo, w[i].hi, ay.hi);
    plstyl(0, NULL, NULL);
  }
  /* Bars, with a thin white edge so that neighbours stay distinct. */
  for (size_t i = 0; i < h->nbins; i++) {
    double v = plot_ax_map(&ay, h->counts[i]);
    if (!isfinite(v)) continue;
    double base = ch->logy ? ay.lo : 0;
    if (v == base) continue;
    plcol0(CI_PAL + bar_col);
    fill_rect(h->edges[i], h->edges[i + 1], base, v);
    plcol0(CI_WHITE);
    plwidth(1.0 * c.s);
    PLFLT ex[4] = {h->edges[i], h->edges[i], h->edges[i + 1], h->edges[i + 1]};
    PLFLT ey[4] = {base, v, v, base};
    plline(4, ex, ey);
  }
  plot_draw_frame(&c, &p, &ax, &ay, 0, 1);
  plot_draw_axis_labels(&c, &p, &ax, &ay, 1);
  plot_draw_titles(&c, &p, ch, xt, yt);
  plot_legend_draw(&c, &L, &p);
  return plot_canvas_end(&c, FP8_OK, path, ch, err, errlen);
}

/* ------------------------------------------------------------------ grouped bars */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

size_t fp8_plot_bars_excluded(const fp8_chart *ch, const char *const *categories, size_t ncat,
                              const fp8_bar_series *series, size_t ns, unsigned char *excluded,
                              char *note, size_t noteLen) {
  if (excluded) memset(excluded, 0, ncat);
  if (note && noteLen) note[0] = 0;
  if (!ch || !ch->logy || ch->ymin < ch->ymax || !(ch->log_exclude > 0) || ncat < 3 ||
      !series || !categories || ns == 0 || !excluded)
    return 0;
  for (size_t j = 0; j < ns; j++)
    if (!series[j].values) return 0;
  double *others = malloc(ncat * ns * sizeof *others);
  if (!others) return 0;
  size_t nex = 0;
  for (size_t i = 0; i < ncat; i++) {
    double top = -INFINITY;
    size_t n = 0;
    for (size_t k = 0; k < ncat; k++)
      for (size_t j = 0; j < ns; j++) {
        double v = series[j].values[k];
        if (!(v > 0) || !isfinite(v)) continue;
        if (k == i) top = fmax(top, log10(v));
        else others[n++] = log10(v);
      }
    if (n == 0 || top == -INFINITY) continue;
    qsort(others, n, sizeof *others, cmp_double);
    double med = n % 2 ? others[n / 2] : 0.5 * (others[n / 2 - 1] + others[n / 2]);
    if (top < med - ch->log_exclude) excluded[i] = 1, nex++;
  }
  free(others);
  if (2 * nex >= ncat) { /* half or more: no "others" to judge by */
    memset(excluded, 0, ncat);
    return 0;
  }
  if (nex && note && noteLen) {
    const char *fmt = ch->bar_format ? ch->bar_format : "%.3g";
    size_t o = (size_t)snprintf(note, noteLen, "not drawn (more than %g decades below the others): ",
                                ch->log_exclude);
    size_t done = 0;
    for (size_t i = 0; i < ncat && o < noteLen; i++) {
      if (!excluded[i]) continue;
      o += (size_t)snprintf(note + o, noteLen - o, "%s%s: ", done++ ? "; " : "",
                            categories[i] ? categories[i] : "");
      int first = 1;
      for (size_t j = 0; j < ns && o < noteLen; j++) {
        double v = series[j].values[i];
        if (isnan(v)) continue;
        if (!first) o += (size_t)snprintf(note + o, noteLen - o, ", ");
        if (o < noteLen) o += (size_t)snprintf(note + o, noteLen - o, fmt, v);
        first = 0;
      }
    }
  }
  return nex;
}

/* A value label's box in pixels (x0 < x1, y0 < y1 from the top). */
typedef struct {
  double x0, x1, y0, y1;
} label_box;
static int boxes_meet(const label_box *a, const label_box *b) {
  return a->x0 < b->x1 && b->x0 < a->x1 && a->y0 < b->y1 && b->y0 < a->y1;
}

/* The value labels' geometry: the group's width, a bar's, the label's cap height, its gap
 * above the bar and its clearance from the frame (all in the draw_bars units below). */
typedef struct {
  double gw, bw, vcap, gap, pad;
} bar_labels;

/* Raises ay's top so that every bar's value label fits above its bar inside the frame (labels
 * longer than 40% of the plot's height ph excepted: they are left out). */
static void raise_for_labels(const fp8_chart *ch, const fp8_bar_series *series, size_t ns,
                             size_t ncat, const bar_labels *bl, double ph, axis *ay) {
  double hi = ay->hi;
  for (size_t j = 0; j < ns; j++)
    for (size_t i = 0; i < ncat; i++) {
      double m = plot_ax_map(ay, series[j].values[i]);
      if (!isfinite(m)) continue;
      char num[64];
      snprintf(num, sizeof num, ch->bar_format, series[j].values[i]);
      double need = plot_utf8_len(num) * DIGIT_W * bl->vcap + bl->gap + bl->pad;
      if (need > 0.4 * ph || m <= ay->lo) continue;
      hi = fmax(hi, ay->lo + (m - ay->lo) * ph / (ph - need));
    }
  ay->hi = hi;
}

/* Each bar's value, upright above it, centred on it; its box (measured: DIGIT_W per character
 * along, 1.2 cap across) must lie inside the frame, clear of the frame line by pad, and meet
 * no label already drawn (series order, then categories): else it is left out. */
static void draw_value_labels(canvas *c, const box *p, const axis *ax, const axis *ay,
                              const fp8_chart *ch, const fp8_bar_series *series, size_t ns,
                              size_t ncat, const bar_labels *bl) {
  const double gw = bl->gw, bw = bl->bw, vcap = bl->vcap, gap = bl->gap, pad = bl->pad;
  label_box *placed = malloc((ncat * ns + 1) * sizeof *placed);
  size_t np = 0;
  for (size_t j = 0; placed && j < ns; j++)
    for (size_t i = 0; i < ncat; i++) {
      double v = plot_ax_map(ay, series[j].values[i]);
      if (!isfinite(v)) continue;
      if (v > ay->hi) continue; /* the bar leaves the frame: no room above it */
      double xw = i - gw / 2 + (j + 0.5) * bw;
      double xp = p->l + (xw - ax->lo) / (ax->hi - ax->lo) * (p->r - p->l);
      double yp = p->b - (fmax(v, ay->lo) - ay->lo) / (ay->hi - ay->lo) * (p->b - p->t) - gap;
      char num[64];
      snprintf(num, sizeof num, ch->bar_format, series[j].values[i]);
      double len = plot_utf8_len(num) * DIGIT_W * vcap;
      label_box b = {xp - 0.6 * vcap, xp + 0.6 * vcap, yp - len, yp};
      int ok = b.x0 >= p->l + pad && b.x1 <= p->r - pad && b.y0 >= p->t + pad && b.y1 <= p->b;
      for (size_t k = 0; ok && k < np; k++) ok = !boxes_meet(&b, &placed[k]);
      if (!ok) continue;
      placed[np++] = b;
      plot_text_user(c, xp, yp, 90, 0.0, vcap, CI_FG, num, 16);
    }
  free(placed);
}

static int draw_bars(const char *path, const fp8_chart *ch, const char *const *categories,
                     size_t ncat, const fp8_bar_series *series, size_t ns, const char *note,
                     char *err, size_t errlen);

/* Checks, then the categories left out of a log axis removed (their slots too: an empty slot
 * under a category's name would read as a zero) and named in the note. */
int fp8_plot_bars(const char *path, const fp8_chart *ch, const char *const *categories,
                  size_t ncat, const fp8_bar_series *series, size_t ns, char *err, size_t errlen) {
  int rc = plot_check_common(path, ch, err, errlen);
  if (rc != FP8_OK) return rc;
  if (ncat == 0 || !categories) FAIL(FP8_EINVAL, "%s: bar chart: expected at least one category, got 0", path);
  if (ns == 0 || !series) FAIL(FP8_EINVAL, "%s: bar chart: expected at least one series, got 0", path);
  if (ch->logx) FAIL(FP8_EINVAL, "%s: bar chart: logx is not supported (x is categorical)", path);
  for (size_t j = 0; j < ns; j++) {
    if (!series[j].values) FAIL(FP8_EINVAL, "%s: bar series %zu: values NULL", path, j);
    if ((rc = plot_check_color(path, "bar series", j, series[j].color, err, errlen)) != FP8_OK) return rc;
  }

  unsigned char *excl = calloc(ncat, 1);
  char note[1024];
  if (!excl) FAIL(FP8_ENOMEM, "%s: bar chart: out of memory", path);
  size_t nexcl = fp8_plot_bars_excluded(ch, categories, ncat, series, ns, excl, note, sizeof note);
  if (nexcl == 0) {
    free(excl);
    return draw_bars(path, ch, categories, ncat, series, ns, NULL, err, errlen);
  }
  size_t n = ncat - nexcl, k = 0;
  const char **cat = calloc(n, sizeof *cat);
  double *val = calloc(n * ns, sizeof *val);
  fp8_bar_series *ser = calloc(ns, sizeof *ser);
  if (!cat || !val || !ser) {
    free(excl), free(cat), free(val), free(ser);
    FAIL(FP8_ENOMEM, "%s: bar chart: out of memory", path);
  }
  for (size_t i = 0; i < ncat; i++) {
    if (excl[i]) continue;
    cat[k] = categories[i];
    for (size_t j = 0; j < ns; j++) val[j * n + k] = series[j].values[i];
    k++;
  }
  for (size_t j = 0; j < ns; j++) ser[j] = series[j], ser[j].values = val + j * n;
  rc = draw_bars(path, ch, cat, n, ser, ns, note, err, errlen);
  free(excl), free(cat), free(val), free(ser);
  return rc;
}

static int draw_bars(const char *path, const fp8_chart *ch, const char *const *categories,
                     size_t ncat, const fp8_bar_series *series, size_t ns, const char *note,
                     char *err, size_t errlen) {
  int rc;
  double ylo = INFINITY, yhi = -INFINITY;
  for (size_t j = 0; j < ns; j++)
    for (size_t i = 0; i < ncat; i++) plot_range_add(series[j].values[i], ch->logy, &ylo, &yhi);
  int ref = ch->ref_label && isfinite(ch->ref_y) && (!ch->logy || ch->ref_y > 0);
  if (ref) plot_range_add(ch->ref_y, ch->logy, &ylo, &yhi);
  if (!ch->logy && ylo <= yhi) ylo = fmin(ylo, 0), yhi = fmax(yhi, 0);
  axis ax = {-0.5, ncat - 0.5, 0, 1}, ay;
  plot_ax_range(&ay, ch->logy, ylo, yhi, ch->ymin, ch->ymax);
  plot_ax_bar_floor(&ay, ch, ylo, yhi);

  canvas c;
  if ((rc = plot_canvas_begin(&c, ch, err, errlen)) != FP8_OK) return rc;
  legend L = {0};
  for (size_t j = 0; j < ns; j++) {
    int ci = CI_PAL + plot_pick_color(&c, series[j].color);
    if (ns > 1 || ref) plot_legend_add(&L, LEG_BOX, ci, 0, "", series[j].label);
  }
  if (ref) plot_legend_add(&L, LEG_LINE, CI_FG, 1, "", ch->ref_label);
  /* Category labels: horizontal when they fit their slot, else slanted at 45 degrees, smaller
   * when slots are narrow, shortened beyond 40 characters (or what fits in 30% of the height). */
  double cap = c.fs * 0.95;
  double est_plot_w = c.W - 8 * c.fs - (L.n ? c.W / 3.0 : 0);
  double slot = est_plot_w / (double)ncat, lw = 0;
  for (size_t i = 0; i < ncat; i++)
    lw = fmax(lw, plot_text_w(categories[i] ? categories[i] : "", cap));
  int slant = lw > 0.95 * slot;
  double xcap = slant ? fmax(fmin(cap, slot * M_SQRT1_2 / 1.3), 0.55 * cap) : cap;
  size_t maxc = 40;
  double extra = 0;
  if (slant) {
    size_t longest = 0;
    for (size_t i = 0; i < ncat; i++) {
      size_t n = plot_utf8_len(categories[i] ? categories[i] : "");
      if (n > longest) longest = n;
    }
    size_t fitc = (size_t)(c.H * 0.3 / M_SQRT1_2 / (TEXT_CHAR_W * xcap));
    if (fitc < maxc) maxc = fitc;
    if (longest < maxc) maxc = longest;
    /* as plot_fit_first_slanted: 0.85 cap per character (capitals, digits, '='), the label's
     * start 0.9 cap below the frame and its half height past the corner, so that the x title
     * stays clear of the longest label (issue 25 point 8) */
    extra = maxc * 0.85 * xcap * M_SQRT1_2 + 1.5 * xcap;
  } else {
    extra = 2.2 * cap;
  }
  double xt, yt, note_h = note && *note ? 1.6 * c.fs : 0;
  box p = plot_layout_xy(&c, ch, &ax, &ay, &L, 0, extra + note_h, &xt, &yt);
  xt -= note_h; /* the note goes below the x title */
  if (slant) {
    size_t n0 = plot_utf8_len(categories[0] ? categories[0] : "");
    plot_fit_first_slanted(&c, &p, ncat, n0 < maxc ? n0 : maxc, xcap);
  }
  /* Value labels: upright, centred on their bar, at most 0.7 of its width thick (a label is
   * about its cap height thick: neighbours stay apart), left out when that is too small to
   * read. Without a user ymax the axis is raised so that every label fits above its bar
   * inside the frame (labels longer than 40% of the height excepted: left out). */
  double gw = 0.8, bw = gw / ns;
  double vcap = fmin(c.fs * 0.7, 0.7 * bw * (p.r - p.l) / (double)ncat);
  int values = ch->bar_format && vcap >= 0.45 * c.fs;
  double gap = 0.4 * vcap, pad = 0.5 * vcap, ph = p.b - p.t;
  bar_labels bl = {gw, bw, vcap, gap, pad};
  if (values && !(ch->ymin < ch->ymax)) raise_for_labels(ch, series, ns, ncat, &bl, ph, &ay);
  plot_draw_frame(&c, &p, &ax, &ay, ch->grid, 0);
  plot_mode(&c, &p, ax.lo, ax.hi, ay.lo, ay.hi);
  c.auto_i = 0; /* the same automatic colours as in the legend */
  for (size_t j = 0; j < ns; j++) {
    plcol0(CI_PAL + plot_pick_color(&c, series[j].color));
    for (size_t i = 0; i < ncat; i++) {
      double v = plot_ax_map(&ay, series[j].values[i]);
      if (!isfinite(v)) continue;
      double base = ch->logy ? ay.lo : 0;
      double x0 = i - gw / 2 + j * bw;
      fill_rect(x0, x0 + bw, base, v);
    }
  }
  if (ref) { /* the reference line over the bars, dashed */
    PLINT mark = 1200, space = 900;
    double y = plot_ax_map(&ay, ch->ref_y);
    plcol0(CI_FG);
    plwidth(2.0 * c.s);
    plstyl(1, &mark, &space);
    pljoin(ax.lo, y, ax.hi, y);
    plstyl(0, NULL, NULL);
  }
  /* Zero line for bars that go negative. */
  if (!ch->logy && ay.lo < 0) {
    plcol0(CI_AXIS_GREY);
    pljoin(ax.lo, 0, ax.hi, 0);
  }
  plot_draw_frame(&c, &p, &ax, &ay, 0, 0);
  /* Category ticks. */
  for (size_t i = 0; i < ncat; i++) {
    double tick = (ay.hi - ay.lo) * 0.012;
    plcol0(CI_FG);
    pljoin((double)i, ay.lo, (double)i, ay.lo + tick);
  }
  plot_draw_axis_labels(&c, &p, &ax, &ay, 0);
  double pslot = (p.r - p.l) / ncat;
  for (size_t i = 0; i < ncat; i++) {
    double x = p.l + (i + 0.5) * pslot;
    if (slant) plot_text_user(&c, x, p.b + 0.9 * xcap, 45, 1.0, xcap, CI_FG, categories[i], maxc);
    else plot_text_user(&c, x, p.b + 1.4 * cap, 0, 0.5, cap, CI_FG, categories[i], maxc);
  }
  if (values) draw_value_labels(&c, &p, &ax, &ay, ch, series, ns, ncat, &bl);
  if (note_h > 0) {
    double ncap = c.fs * 0.85;
    size_t maxc = (size_t)((c.W - 2.0 * c.fs) / (TEXT_CHAR_W * ncap));
    plot_text_user(&c, 1.0 * c.fs, c.H - 0.6 * c.fs - 0.5 * note_h, 0, 0.0, ncap, CI_FG, note,
                   maxc);
  }
  plot_draw_titles(&c, &p, ch, xt, yt);
  plot_legend_draw(&c, &L, &p);
  return plot_canvas_end(&c, FP8_OK, path, ch, err, errlen);
}
