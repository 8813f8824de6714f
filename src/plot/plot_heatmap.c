/* plot_heatmap.c: the heatmap of plot.h (fp8_plot_heatmap): categorical cells coloured on a
 * viridis scale with their values printed in them, category labels (slanted when they do not
 * fit) and a colour bar, on the canvas of plot_canvas.c. */
#include "plot_internal.h"

#include <math.h>
#include <plplot.h>
#include <stdio.h>
#include <string.h>

#include "fp8.h"

/* viridis (matplotlib's, CC0) sampled at 0, 0.1, ..., 1. */
static const uint8_t viridis[11][3] = {{68, 1, 84},    {72, 36, 117},  {65, 68, 135},
                                       {53, 95, 141},  {42, 120, 142}, {33, 145, 140},
                                       {34, 168, 132}, {68, 191, 112}, {122, 209, 81},
                                       {189, 223, 38}, {253, 231, 37}};

static void viridis_rgb(double f, int reverse, double rgb[3]) {
  if (!(f >= 0)) f = 0;
  if (f > 1) f = 1;
  if (reverse) f = 1 - f;
  double t = f * 10;
  int i = (int)t;
  if (i > 9) i = 9;
  t -= i;
  for (int k = 0; k < 3; k++) rgb[k] = viridis[i][k] + t * (viridis[i + 1][k] - viridis[i][k]);
}

/* Accepts a printf format with exactly one conversion of a double (flags, width, precision;
 * %% allowed), nothing that reads other arguments. */
static int format_ok(const char *f) {
  int conv = 0;
  for (const char *p = f; *p; p++) {
    if (*p != '%') continue;
    p++;
    if (*p == '%') continue;
    while (*p && strchr("-+ #0'", *p)) p++;
    while (*p >= '0' && *p <= '9') p++;
    if (*p == '.') {
      p++;
      while (*p >= '0' && *p <= '9') p++;
    }
    if (!*p || !strchr("aAeEfFgG", *p)) return 0;
    conv++;
  }
  return conv == 1;
}

static int heatmap_check(const char *path, const fp8_chart *ch, const fp8_heatmap *hm, char *err,
                         size_t errlen) {
  int rc = plot_check_common(path, ch, err, errlen);
  if (rc != FP8_OK) return rc;
  if (!hm) FAIL(FP8_EINVAL, "%s: heatmap: expected a heatmap description, got NULL", path);
  if (hm->nx == 0 || hm->ny == 0 || !hm->values || hm->nx > 1000 || hm->ny > 1000)
    FAIL(FP8_EINVAL, "%s: heatmap: expected 1..1000 x 1..1000 values, got %zu x %zu%s", path,
         hm->nx, hm->ny, hm->values ? "" : " (values NULL)");
  if (!hm->xlabels || !hm->ylabels)
    FAIL(FP8_EINVAL, "%s: heatmap: expected %zu x labels and %zu y labels, got NULL", path,
         hm->nx, hm->ny);
  if (hm->cell_format && !format_ok(hm->cell_format))
    FAIL(FP8_EINVAL,
         "%s: heatmap: cell_format \"%s\": expected one conversion of a double such as %%.2g",
         path, hm->cell_format);
  return FP8_OK;
}

/* The colour range in colour-scale coordinates (log10 for a log scale). */
static axis heatmap_range(const fp8_heatmap *hm) {
  double lo = INFINITY, hi = -INFINITY;
  size_t ncell = hm->nx * hm->ny;
  for (size_t i = 0; i < ncell; i++) plot_range_add(hm->values[i], hm->logscale, &lo, &hi);
  axis av;
  if (hm->vmin < hm->vmax && (!hm->logscale || hm->vmin > 0)) {
    av.lo = hm->logscale ? log10(hm->vmin) : hm->vmin;
    av.hi = hm->logscale ? log10(hm->vmax) : hm->vmax;
    av.log = hm->logscale;
  } else if (hm->logscale) {
    plot_ax_range(&av, 1, lo, hi, 0, 0);
  } else {
    if (!(lo <= hi)) lo = 0, hi = 1;
    if (lo == hi) lo -= 0.5, hi += 0.5;
    av.lo = lo;
    av.hi = hi;
    av.log = 0;
  }
  return av;
}

/* Where a value falls on the colour scale av: 0..1. */
static double heatmap_frac(const fp8_heatmap *hm, const axis *av, double v) {
  double t = hm->logscale ? (v > 0 ? log10(v) : -INFINITY) : v;
  double f = (t - av->lo) / (av->hi - av->lo);
  return f < 0 ? 0 : f > 1 ? 1 : f;
}

/* The page around the cells: y category labels on the left, the colour bar and its labels on
 * the right, the column labels below (horizontal if they fit, else slanted). */
typedef struct {
  box p;              /* the cells */
  double cap;         /* tick and category label size */
  double ytitle, xtitle;
  double bar_w, bar_gap, bar_lab, bar_title; /* colour bar, its tick labels and title (px) */
  int slant;          /* column labels at 45 degrees */
  double xlab_h, xcap; /* their height and size */
  size_t xmaxc;       /* their length limit (characters) */
} heat_layout;

/* Also sets av's ticks for the height of the colour bar. */
static heat_layout heatmap_layout(const canvas *c, const fp8_chart *ch, const fp8_heatmap *hm,
                                  axis *av) {
  heat_layout H;
  double cap = c->fs * 0.95;
  H.cap = cap;
  double ylw = 0;
  for (size_t i = 0; i < hm->ny; i++)
    ylw = fmax(ylw, plot_text_w(hm->ylabels[i] ? hm->ylabels[i] : "", cap));
  ylw = fmin(ylw, c->W * 0.25);
  H.ytitle = (ch->ylabel && *ch->ylabel) ? 2.4 * c->fs : 0;
  H.xtitle = (ch->xlabel && *ch->xlabel) ? 2.4 * c->fs : 0;
  box p;
  p.t = (ch->title && *ch->title) ? 4.2 * c->fs : 1.8 * c->fs;
  p.l = 1.0 * c->fs + H.ytitle + ylw + 0.8 * cap;
  H.bar_w = 28 * c->s;
  H.bar_gap = 24 * c->s;
  plot_ax_ticks(av, 600 * c->s, 3.0 * cap); /* provisional, for the label width */
  H.bar_lab = (plot_ax_label_chars(av) * DIGIT_W + 1.0) * cap;
  H.bar_title = (hm->colorbar_label && *hm->colorbar_label) ? 2.4 * c->fs : 0;
  p.r = c->W - (H.bar_gap + H.bar_w + H.bar_lab + H.bar_title + 1.0 * c->fs);
  double slot = (p.r - p.l) / (double)hm->nx, xlw = 0;
  for (size_t i = 0; i < hm->nx; i++)
    xlw = fmax(xlw, plot_text_w(hm->xlabels[i] ? hm->xlabels[i] : "", cap));
  H.slant = xlw > 0.95 * slot;
  H.xlab_h = H.slant ? fmin(xlw, c->H * 0.3) * M_SQRT1_2 + 1.5 * cap : 2.2 * cap;
  p.b = c->H - (1.0 * c->fs + H.xlab_h + H.xtitle + 0.6 * c->fs);
  plot_ax_ticks(av, p.b - p.t, 3.0 * cap);
  H.xcap = H.slant ? fmin(cap, slot * M_SQRT1_2 / 1.4) : cap;
  H.xmaxc = H.slant ? (size_t)(c->H * 0.3 / (TEXT_CHAR_W * H.xcap))
                    : (size_t)(slot / (TEXT_CHAR_W * H.xcap)) + 1;
  if (H.slant) {
    size_t n0 = plot_utf8_len(hm->xlabels[0] ? hm->xlabels[0] : "");
    plot_fit_first_slanted(c, &p, hm->nx, n0 < H.xmaxc ? n0 : H.xmaxc, H.xcap);
  }
  H.p = p;
  return H;
}

/* The cells (cmap1 colours, grey n/a), white lines between them and the frame. */
static void heatmap_cells(const canvas *c, const box *p, const fp8_heatmap *hm, const axis *av) {
  plot_mode(c, p, 0, (double)hm->nx, 0, (double)hm->ny);
  for (size_t iy = 0; iy < hm->ny; iy++)
    for (size_t ix = 0; ix < hm->nx; ix++) {
      double v = hm->values[iy * hm->nx + ix];
      PLFLT cx[4] = {(double)ix, ix + 1.0, ix + 1.0, (double)ix};
      PLFLT cy[4] = {(double)iy, (double)iy, iy + 1.0, iy + 1.0};
      if (isnan(v)) plcol0(CI_NA);
      else plcol1(heatmap_frac(hm, av, v));
      plfill(4, cx, cy);
    }
  plcol0(CI_WHITE);
  plwidth(2.0 * c->s);
  for (size_t ix = 1; ix < hm->nx; ix++) {
    PLFLT lx[2] = {(double)ix, (double)ix}, ly[2] = {0, (double)hm->ny};
    pljoin(lx[0], ly[0], lx[1], ly[1]);
  }
  for (size_t iy = 1; iy < hm->ny; iy++) pljoin(0, (double)iy, (double)hm->nx, (double)iy);
  plcol0(CI_FG);
  if (hm->budget_label) { /* the cells within the budget: a thick outline inside the cell */
    const double *bv = hm->budget_values ? hm->budget_values : hm->values;
    plwidth(3.0 * c->s);
    for (size_t iy = 0; iy < hm->ny; iy++)
      for (size_t ix = 0; ix < hm->nx; ix++) {
        double v = bv[iy * hm->nx + ix];
        if (!(v <= hm->budget)) continue;
        const double d = 0.07, x0 = ix + d, x1 = ix + 1.0 - d, y0 = iy + d, y1 = iy + 1.0 - d;
        pljoin(x0, y0, x1, y0);
        pljoin(x1, y0, x1, y1);
        pljoin(x1, y1, x0, y1);
        pljoin(x0, y1, x0, y0);
      }
  }
  plwidth(1.0 * c->s);
  plbox("bc", 0, 0, "bc", 0, 0);
}

/* The value printed in each cell, sized to the cell, white on dark cells and black on light
 * ones; without a cell_format only the missing cells are marked. */
static void heatmap_values(const canvas *c, const box *p, const fp8_heatmap *hm, const axis *av) {
  plot_page_mode(c);
  size_t ncell = hm->nx * hm->ny;
  double cw = (p->r - p->l) / hm->nx, chh = (p->b - p->t) / hm->ny;
  if (!hm->cell_format) {
    for (size_t iy = 0; iy < hm->ny; iy++)
      for (size_t ix = 0; ix < hm->nx; ix++)
        if (isnan(hm->values[iy * hm->nx + ix]))
          plot_text_raw(c, p->l + (ix + 0.5) * cw, p->b - (iy + 0.5) * chh, 0, 0.5,
                        fmin(c->fs, 0.35 * chh), CI_FG, "n/a");
    return;
  }
  char buf[64];
  size_t maxc = 3;
  for (size_t i = 0; i < ncell; i++) {
    snprintf(buf, sizeof buf, hm->cell_format, hm->values[i]);
    if (!isnan(hm->values[i])) maxc = plot_utf8_len(buf) > maxc ? plot_utf8_len(buf) : maxc;
  }
  double vcap = fmin(1.1 * c->fs, fmin(0.85 * cw / (DIGIT_W * maxc), 0.35 * chh));
  vcap = fmax(vcap, 6.0);
  for (size_t iy = 0; iy < hm->ny; iy++)
    for (size_t ix = 0; ix < hm->nx; ix++) {
      double v = hm->values[iy * hm->nx + ix];
      int col = CI_FG;
      if (isnan(v)) {
        snprintf(buf, sizeof buf, "n/a");
      } else {
        char tmp[64];
        snprintf(tmp, sizeof tmp, hm->cell_format, v);
        plot_plain_text(tmp, 0, buf, sizeof buf);
        double rgb[3];
        viridis_rgb(heatmap_frac(hm, av, v), hm->reverse, rgb);
        double lum = 0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2];
        col = lum < 140 ? CI_WHITE : CI_FG;
      }
      plot_text_raw(c, p->l + (ix + 0.5) * cw, p->b - (iy + 0.5) * chh, 0, 0.5, vcap, col, buf);
    }
}

/* The category labels: columns below the cells, rows on their left. */
static void heatmap_labels(const canvas *c, const heat_layout *H, const fp8_heatmap *hm) {
  const box *p = &H->p;
  double cap = H->cap, cw = (p->r - p->l) / hm->nx, chh = (p->b - p->t) / hm->ny;
  for (size_t ix = 0; ix < hm->nx; ix++) {
    double x = p->l + (ix + 0.5) * cw;
    if (H->slant)
      plot_text_user(c, x, p->b + 0.9 * H->xcap, 45, 1.0, H->xcap, CI_FG, hm->xlabels[ix],
                     H->xmaxc);
    else plot_text_user(c, x, p->b + 1.4 * cap, 0, 0.5, cap, CI_FG, hm->xlabels[ix], H->xmaxc);
  }
  size_t ymaxc = (size_t)(c->W * 0.25 / (TEXT_CHAR_W * cap));
  for (size_t iy = 0; iy < hm->ny; iy++)
    plot_text_user(c, p->l - 0.6 * cap, p->b - (iy + 0.5) * chh, 0, 1.0, cap, CI_FG,
                   hm->ylabels[iy], ymaxc);
}

void plot_colorbar(const canvas *c, const box *cb, const axis *av, double cap, double bar_lab,
                   const char *label) {
  plot_mode(c, cb, 0, 1, av->lo, av->hi);
  for (int i = 0; i < 256; i++) {
    double y0 = av->lo + (av->hi - av->lo) * i / 256.0;
    double y1 = av->lo + (av->hi - av->lo) * (i + 1) / 256.0;
    PLFLT bx[4] = {0, 1, 1, 0}, by[4] = {y0, y0, y1, y1};
    plcol1(i / 255.0);
    plfill(4, bx, by);
  }
  plcol0(CI_FG);
  plbox("bc", 0, 0, av->log ? "bcstl" : "bcst", av->log ? 1 : av->step, 0);
  plot_page_mode(c);
  char buf[64];
  if (av->log && plot_ax_no_ticks(av)) {
    double ends[2] = {av->lo, av->hi};
    for (int i = 0; i < 2; i++) {
      plot_tick_label(av, ends[i], buf, sizeof buf);
      plot_text_raw(c, cb->r + 0.6 * cap, cb->b - plot_ax_frac(av, ends[i]) * (cb->b - cb->t), 0,
                    0, cap, CI_FG, buf);
    }
  }
  FOR_TICKS(av, v) {
    plot_tick_label(av, v, buf, sizeof buf);
    plot_text_raw(c, cb->r + 0.6 * cap, cb->b - plot_ax_frac(av, v) * (cb->b - cb->t), 0, 0, cap,
                  CI_FG, buf);
  }
  if (label && *label)
    plot_text_user(c, cb->r + bar_lab + 1.2 * c->fs, (cb->t + cb->b) / 2, 90, 0.5,
                   plot_fit_cap(label, 1.1 * c->fs, cb->b - cb->t), CI_FG, label, 0);
}

int fp8_plot_heatmap(const char *path, const fp8_chart *ch, const fp8_heatmap *hm, char *err,
                     size_t errlen) {
  int rc = heatmap_check(path, ch, hm, err, errlen);
  if (rc != FP8_OK) return rc;
  axis av = heatmap_range(hm);

  canvas c;
  if ((rc = plot_canvas_begin(&c, ch, err, errlen)) != FP8_OK) return rc;
  /* cmap1 = viridis, 256 entries, for the cells and the colour bar. */
  PLINT r1[256], g1[256], b1[256];
  for (int i = 0; i < 256; i++) {
    double rgb[3];
    viridis_rgb(i / 255.0, hm->reverse, rgb);
    r1[i] = (PLINT)lrint(rgb[0]);
    g1[i] = (PLINT)lrint(rgb[1]);
    b1[i] = (PLINT)lrint(rgb[2]);
  }
  plscmap1n(256);
  plscmap1(r1, g1, b1, 256);

  heat_layout H = heatmap_layout(&c, ch, hm, &av);
  heatmap_cells(&c, &H.p, hm, &av);
  heatmap_values(&c, &H.p, hm, &av);
  heatmap_labels(&c, &H, hm);
  box cb = {H.p.r + H.bar_gap, H.p.r + H.bar_gap + H.bar_w, H.p.t, H.p.b};
  char bar_label[512];
  snprintf(bar_label, sizeof bar_label, "%s%s%s%s", hm->colorbar_label ? hm->colorbar_label : "",
           hm->budget_label ? "; outlined: within the " : "",
           hm->budget_label ? hm->budget_label : "", hm->budget_label ? " (line)" : "");
  plot_colorbar(&c, &cb, &av, H.cap, H.bar_lab, H.bar_title ? bar_label : NULL);
  if (hm->budget_label) { /* the budget on the colour bar */
    double y = plot_ax_map(&av, hm->budget);
    if (isfinite(y) && y >= av.lo && y <= av.hi) {
      plot_mode(&c, &cb, 0, 1, av.lo, av.hi);
      plcol0(CI_FG);
      plwidth(3.0 * c.s);
      pljoin(-0.25, y, 1.25, y);
      plwidth(1.0 * c.s);
    }
  }
  plot_draw_titles(&c, &H.p, ch, H.p.b + H.xlab_h + 0.5 * H.xtitle + 0.4 * c.fs,
                   1.0 * c.fs + 0.5 * H.ytitle);
  return plot_canvas_end(&c, FP8_OK, path, ch, err, errlen);
}
