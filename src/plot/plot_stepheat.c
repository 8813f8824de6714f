/* plot_stepheat.c: the step heatmap of plot.h (fp8_plot_step_heatmap): labelled rows over a
 * numeric x axis with one column per x value (every training step), coloured on a threshold
 * scale (quiet below, loud above), with x ticks, row labels and the colour bar of
 * plot_heatmap.c, on the canvas of plot_canvas.c. */
#include "plot_internal.h"

#include <cairo.h>
#include <math.h>
#include <plplot.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fp8.h"

#define NCOL1 256

/* Quiet: a mid blue at vmin to a light blue at the threshold (never near the white of the
 * background or the grey of the hatching: a tensor whose largest element fits exactly, overshoot
 * -5e-9, must not read as a cell without a value); loud: orange just above it, vermillion, dark
 * red at vmax (Okabe-Ito orange and vermillion at the first two stops). Outside the scale: the
 * band (Okabe-Ito yellow) and the hatching of NaN cells (grey lines on white). */
static const double quiet_lo[3] = {66, 116, 170}, quiet_hi[3] = {158, 202, 236};
static const double loud[3][3] = {{230, 159, 0}, {213, 94, 0}, {110, 0, 10}};
#define BAND_RGB (240u << 16 | 228u << 8 | 66u)
#define HATCH_RGB (150u << 16 | 150u << 8 | 150u)
#define WHITE_RGB 0xFFFFFFu
/* The hatching: 2 px grey lines every 7 px along the diagonal (scaled with the image). */
static uint32_t hatch_rgb(int x, int y, int period) {
  return (x + y) % period < (period + 2) / 4 ? HATCH_RGB : WHITE_RGB;
}
static int hatch_period(const canvas *c) {
  int p = (int)lrint(7 * c->s);
  return p < 4 ? 4 : p;
}

static void lerp3(const double a[3], const double b[3], double t, double out[3]) {
  for (int k = 0; k < 3; k++) out[k] = a[k] + t * (b[k] - a[k]);
}

/* The colour of value v on the scale. */
static void scale_rgb(const fp8_step_heatmap *h, double lo, double hi, double v, double rgb[3]) {
  double thr = h->threshold;
  if (v <= thr) {
    double t = thr > lo ? (v - lo) / (thr - lo) : 1;
    lerp3(quiet_lo, quiet_hi, t < 0 ? 0 : t, rgb);
    return;
  }
  double u = (v - thr) / (hi - thr);
  if (u > 1) u = 1;
  if (u < 0.5) lerp3(loud[0], loud[1], u * 2, rgb);
  else lerp3(loud[1], loud[2], (u - 0.5) * 2, rgb);
}

/* The centre value of colour entry i. */
static double entry_value(double lo, double hi, int i) { return lo + (i + 0.5) / NCOL1 * (hi - lo); }

/* The colour entry of value v: its bin, moved by one so that a value on either side of the
 * threshold never takes an entry of the other side. */
static int entry_of(const fp8_step_heatmap *h, double lo, double hi, double v) {
  double f = (v - lo) / (hi - lo) * NCOL1;
  int i = !(f >= 0) ? 0 : f >= NCOL1 ? NCOL1 - 1 : (int)f;
  if (v > h->threshold)
    while (i < NCOL1 - 1 && entry_value(lo, hi, i) <= h->threshold) i++;
  else
    while (i > 0 && entry_value(lo, hi, i) > h->threshold) i--;
  return i;
}

static int stepheat_check(const char *path, const fp8_chart *ch, const fp8_step_heatmap *h,
                          char *err, size_t errlen) {
  int rc = plot_check_common(path, ch, err, errlen);
  if (rc != FP8_OK) return rc;
  if (!h) FAIL(FP8_EINVAL, "%s: step heatmap: expected a description, got NULL", path);
  if (h->nx == 0 || h->ny == 0 || h->nx > 10000000 || h->ny > 1000 || !h->values || !h->x)
    FAIL(FP8_EINVAL, "%s: step heatmap: expected 1..10^7 x 1..1000 values with x, got %zu x %zu%s",
         path, h->nx, h->ny, h->values && h->x ? "" : " (values or x NULL)");
  if (!h->ylabels) FAIL(FP8_EINVAL, "%s: step heatmap: expected %zu row labels, got NULL", path, h->ny);
  if (!isfinite(h->threshold)) FAIL(FP8_EINVAL, "%s: step heatmap: threshold must be finite", path);
  for (size_t i = 0; i < h->nx; i++)
    if (!isfinite(h->x[i]) || (i > 0 && !(h->x[i] > h->x[i - 1])))
      FAIL(FP8_EINVAL, "%s: step heatmap: expected finite, strictly ascending x, got x[%zu] %g", path,
           i, h->x[i]);
  if (h->band_label && !(isfinite(h->band) && h->band > h->threshold))
    FAIL(FP8_EINVAL, "%s: step heatmap: expected a finite band > threshold %g, got %g", path,
         h->threshold, h->band);
  if (h->vmin < h->vmax && !(isfinite(h->vmin) && isfinite(h->vmax) && h->vmin <= h->threshold &&
                             h->threshold < h->vmax))
    FAIL(FP8_EINVAL, "%s: step heatmap: expected finite vmin <= threshold < vmax, got %g, %g, %g",
         path, h->vmin, h->threshold, h->vmax);
  return FP8_OK;
}

/* The colour range: the caller's, else the finite data's with the threshold and threshold + 1. */
static void stepheat_range(const fp8_step_heatmap *h, double *lo, double *hi) {
  if (h->vmin < h->vmax) {
    *lo = h->vmin;
    *hi = h->vmax;
    return;
  }
  double a = h->threshold, b = h->threshold + 1;
  for (size_t i = 0; i < h->nx * h->ny; i++)
    if (isfinite(h->values[i])) a = fmin(a, h->values[i]), b = fmax(b, h->values[i]);
  *lo = a;
  *hi = b;
}

/* Column ix's right edge. */
static double col_end(const fp8_step_heatmap *h, size_t ix) {
  if (ix + 1 < h->nx) return h->x[ix + 1];
  return h->x[ix] + (h->nx > 1 ? h->x[ix] - h->x[ix - 1] : 1);
}

typedef struct {
  box p;
  double cap, rcap;    /* tick label and row label sizes */
  int has_nan, has_band; /* the key's entries: NaN cells, band cells */
  double key;          /* the key's height below the x title (0: no key) */
  int key_lines;       /* 1, or 2: its entries one above the other */
  size_t rstep;        /* every rstep-th row labelled */
  double bar_w, bar_gap, bar_lab, xtitle, ytitle;
} step_layout;

/* The width of a key entry: swatch, gap, text and the space before the next one. */
static double key_entry_w(const canvas *c, double cap, const char *text) {
  (void)c;
  return 2.2 * cap + 0.6 * cap + 1.1 * plot_text_w(text, cap) + 2.5 * cap; /* 10% margin */
}

static step_layout stepheat_layout(const canvas *c, const fp8_chart *ch, const fp8_step_heatmap *h,
                                   axis *ax, axis *av) {
  step_layout L;
  L.cap = c->fs * 0.95;
  L.ytitle = (ch->ylabel && *ch->ylabel) ? 2.4 * c->fs : 0;
  L.xtitle = (ch->xlabel && *ch->xlabel) ? 2.4 * c->fs : 0;
  box p;
  p.t = (ch->title && *ch->title) ? 4.2 * c->fs : 1.8 * c->fs;
  L.has_nan = L.has_band = 0;
  for (size_t i = 0; i < h->nx * h->ny; i++) {
    double v = h->values[i];
    if (isnan(v)) L.has_nan = 1;
    else if (h->band_label && v > h->threshold && v <= h->band) L.has_band = 1;
  }
  /* the key: one line, or two when its entries do not fit side by side */
  double kw = 0;
  if (L.has_nan) kw += key_entry_w(c, L.cap, h->nan_label ? h->nan_label : "no value");
  if (L.has_band) kw += key_entry_w(c, L.cap, h->band_label);
  L.key_lines = kw > c->W - 2.0 * c->fs && L.has_nan && L.has_band ? 2 : 1;
  L.key = L.has_nan || L.has_band ? 1.9 * c->fs * L.key_lines : 0;
  p.b = c->H - (1.0 * c->fs + 2.2 * L.cap + L.xtitle + 0.6 * c->fs + L.key);
  double rowh = (p.b - p.t) / (double)h->ny;
  L.rcap = fmax(fmin(L.cap, 0.7 * rowh), 6.0);
  L.rstep = (size_t)ceil(L.rcap * 1.3 / rowh);
  if (L.rstep < 1) L.rstep = 1;
  double ylw = 0;
  for (size_t i = 0; i < h->ny; i++)
    ylw = fmax(ylw, plot_text_w(h->ylabels[i] ? h->ylabels[i] : "", L.rcap));
  ylw = fmin(ylw, c->W * 0.3);
  p.l = 1.0 * c->fs + L.ytitle + ylw + 0.8 * L.rcap;
  L.bar_w = 28 * c->s;
  L.bar_gap = 24 * c->s;
  plot_ax_ticks(av, p.b - p.t, 3.0 * L.cap);
  L.bar_lab = (plot_ax_label_chars(av) * DIGIT_W + 1.0) * L.cap;
  double bar_title = (h->colorbar_label && *h->colorbar_label) ? 2.4 * c->fs : 0;
  p.r = c->W - (L.bar_gap + L.bar_w + L.bar_lab + bar_title + 1.0 * c->fs);
  plot_ax_ticks(ax, p.r - p.l, 8 * DIGIT_W * L.cap);
  plot_ax_ticks(ax, p.r - p.l, (plot_ax_label_chars(ax) + 3) * DIGIT_W * L.cap);
  if (h->integer_x && ax->step < 1) ax->step = 1; /* no tick between two numbered columns */
  L.p = p;
  return L;
}

/* The pixel of value v: its colour entry; a value at or below the threshold whose entry lies
 * above it (vmin at the threshold: entry 0 is above it) the quiet scale's own colour, a
 * value that fits exactly must not look saturated. */
static uint32_t cell_rgb(const fp8_step_heatmap *h, double lo, double hi, double v,
                         const uint32_t *cmap) {
  if (h->band_label && v > h->threshold && v <= h->band) return BAND_RGB;
  int i = entry_of(h, lo, hi, v);
  if (v > h->threshold || entry_value(lo, hi, i) <= h->threshold) return cmap[i];
  double rgb[3];
  scale_rgb(h, lo, hi, v, rgb);
  return (uint32_t)lrint(rgb[0]) << 16 | (uint32_t)lrint(rgb[1]) << 8 | (uint32_t)lrint(rgb[2]);
}

/* The cells, white lines between rows (when they are tall enough), the frame and x ticks.
 * The cells are drawn as pixels straight into the canvas's image (a polygon per cell through
 * PLplot cost seconds a chart at 560 rows x 1,200 columns: issue 27): each pixel column takes
 * the largest value of the columns (steps) that overlap it, NaN only when all of them are. With
 * more steps than the plot has pixels across, a cell drawn per step would leave each pixel the
 * colour of whichever step came last: a loud step among quiet ones would vanish. The loud end
 * of the scale is what must not be hidden. */
static void stepheat_cells(const canvas *c, const step_layout *L, const fp8_step_heatmap *h,
                           const axis *ax, double lo, double hi, const uint32_t *cmap) {
  plot_mode(c, &L->p, ax->lo, ax->hi, 0, (double)h->ny);
  cairo_surface_t *sf = cairo_get_target(c->cr);
  cairo_surface_flush(sf);
  unsigned char *data = cairo_image_surface_get_data(sf);
  const int stride = cairo_image_surface_get_stride(sf);
  const box *p = &L->p;
  int x0 = (int)floor(p->l), x1 = (int)ceil(p->r), y0 = (int)floor(p->t), y1 = (int)ceil(p->b);
  if (x0 < 0) x0 = 0;
  if (y0 < 0) y0 = 0;
  if (x1 > c->W) x1 = c->W;
  if (y1 > c->H) y1 = c->H;
  const double uw = (ax->hi - ax->lo) / (p->r - p->l), rowh = (p->b - p->t) / (double)h->ny;
  const int hp = hatch_period(c);
  for (size_t iy = 0; iy < h->ny; iy++) {
    const double *row = h->values + iy * h->nx;
    /* this row's pixel lines: those whose centre lies in it */
    int ya = (int)ceil(p->b - (double)(iy + 1) * rowh - 0.5), yb = (int)ceil(p->b - (double)iy * rowh - 0.5);
    if (ya < y0) ya = y0;
    if (yb > y1) yb = y1;
    if (ya >= yb) continue;
    uint32_t *line = (uint32_t *)(data + (size_t)ya * (size_t)stride);
    size_t ix = 0;
    for (int x = x0; x < x1; x++) {
      double u0 = ax->lo + ((double)x - p->l) * uw, u1 = u0 + uw, v = NAN;
      while (ix + 1 < h->nx && col_end(h, ix) <= u0) ix++; /* the first column reaching u0 */
      for (size_t k = ix; k < h->nx && h->x[k] < u1; k++)
        if (!isnan(row[k]) && (isnan(v) || row[k] > v)) v = row[k];
      line[x] = isnan(v) ? 1u << 24 : cell_rgb(h, lo, hi, v, cmap); /* bit 24: no value */
    }
    for (int y = yb - 1; y >= ya; y--) { /* the first line last: it holds the values */
      uint32_t *out = (uint32_t *)(data + (size_t)y * (size_t)stride);
      for (int x = x0; x < x1; x++)
        out[x] = line[x] >> 24 ? hatch_rgb(x, y, hp) : line[x];
    }
  }
  cairo_surface_mark_dirty(sf);
  if ((L->p.b - L->p.t) / (double)h->ny >= 8 * c->s) {
    plcol0(CI_WHITE);
    plwidth(1.5 * c->s);
    for (size_t iy = 1; iy < h->ny; iy++) pljoin(ax->lo, (double)iy, ax->hi, (double)iy);
  }
  plcol0(CI_FG);
  plwidth(1.0 * c->s);
  plbox("bcst", ax->step, 0, "bc", 0, 0);
}

static void stepheat_labels(const canvas *c, const step_layout *L, const fp8_step_heatmap *h,
                            const axis *ax) {
  plot_page_mode(c);
  const box *p = &L->p;
  plot_x_tick_labels(c, ax, p, L->cap);
  double rowh = (p->b - p->t) / (double)h->ny;
  size_t maxc = (size_t)(c->W * 0.3 / (TEXT_CHAR_W * L->rcap));
  for (size_t iy = 0; iy < h->ny; iy += L->rstep)
    plot_text_user_start(c, p->l - 0.6 * L->rcap, p->b - (iy + 0.5) * rowh, 0, 1.0, L->rcap,
                       CI_FG, h->ylabels[iy], maxc);
}

/* The key below the x title: a swatch and its text for the hatched NaN cells and the band,
 * side by side from the page's left margin (one above the other when they do not fit). */
static void stepheat_key(const canvas *c, const step_layout *L, const fp8_step_heatmap *h) {
  if (L->key <= 0) return;
  double cap = L->cap, sw = 2.2 * cap, sh = 1.3 * cap;
  double lh = L->key / L->key_lines;
  double y = c->H - 0.6 * c->fs - L->key + 0.5 * lh; /* the first key line's middle */
  double x = 1.0 * c->fs; /* from the page's left margin: the key may be wider than the plot */
  const char *text[2] = {h->nan_label ? h->nan_label : "no value", h->band_label};
  int on[2] = {L->has_nan, L->has_band};
  cairo_surface_t *sf = cairo_get_target(c->cr);
  for (int k = 0; k < 2; k++) {
    if (!on[k]) continue;
    int xa = (int)lrint(x), xb = (int)lrint(x + sw), ya = (int)lrint(y - 0.5 * sh),
        yb = (int)lrint(y + 0.5 * sh);
    if (xa < 0) xa = 0;
    if (ya < 0) ya = 0;
    if (xb > c->W) xb = c->W;
    if (yb > c->H) yb = c->H;
    cairo_surface_flush(sf);
    unsigned char *data = cairo_image_surface_get_data(sf);
    const int stride = cairo_image_surface_get_stride(sf);
    for (int yy = ya; yy < yb; yy++) {
      uint32_t *row = (uint32_t *)(data + (size_t)yy * (size_t)stride);
      for (int xx = xa; xx < xb; xx++) row[xx] = k == 0 ? hatch_rgb(xx, yy, hatch_period(c)) : BAND_RGB;
    }
    cairo_surface_mark_dirty(sf);
    plot_page_mode(c);
    plcol0(CI_FG);
    plwidth(1.0 * c->s);
    PLFLT bx[5] = {xa, xb, xb, xa, xa}, by[5] = {c->H - ya, c->H - ya, c->H - yb, c->H - yb, c->H - ya};
    plline(5, bx, by);
    plot_text_user(c, x + sw + 0.6 * cap, y, 0, 0.0, cap, CI_FG, text[k], 0);
    x += key_entry_w(c, cap, text[k]);
    if (L->key_lines == 2) x = 1.0 * c->fs, y += lh;
  }
}

int fp8_plot_step_heatmap(const char *path, const fp8_chart *ch, const fp8_step_heatmap *h,
                          char *err, size_t errlen) {
  int rc = stepheat_check(path, ch, h, err, errlen);
  if (rc != FP8_OK) return rc;
  double lo, hi;
  stepheat_range(h, &lo, &hi);
  axis ax = {h->x[0], col_end(h, h->nx - 1), 0, 1}, av = {lo, hi, 0, 1};

  canvas c;
  if ((rc = plot_canvas_begin(&c, ch, err, errlen)) != FP8_OK) return rc;
  PLINT r1[NCOL1], g1[NCOL1], b1[NCOL1];
  for (int i = 0; i < NCOL1; i++) {
    double rgb[3];
    scale_rgb(h, lo, hi, entry_value(lo, hi, i), rgb);
    r1[i] = (PLINT)lrint(rgb[0]);
    g1[i] = (PLINT)lrint(rgb[1]);
    b1[i] = (PLINT)lrint(rgb[2]);
  }
  plscmap1n(NCOL1);
  plscmap1(r1, g1, b1, NCOL1);

  step_layout L = stepheat_layout(&c, ch, h, &ax, &av);
  uint32_t cmap[NCOL1];
  for (int i = 0; i < NCOL1; i++) cmap[i] = (uint32_t)r1[i] << 16 | (uint32_t)g1[i] << 8 | (uint32_t)b1[i];
  stepheat_cells(&c, &L, h, &ax, lo, hi, cmap);
  stepheat_labels(&c, &L, h, &ax);
  stepheat_key(&c, &L, h);
  box cb = {L.p.r + L.bar_gap, L.p.r + L.bar_gap + L.bar_w, L.p.t, L.p.b};
  plot_colorbar(&c, &cb, &av, L.cap, L.bar_lab, h->colorbar_label);
  /* the threshold across the colour bar */
  plot_mode(&c, &cb, 0, 1, av.lo, av.hi);
  plcol0(CI_FG);
  plwidth(2.0 * c.s);
  pljoin(0, h->threshold, 1, h->threshold);
  plot_draw_titles(&c, &L.p, ch, L.p.b + 2.2 * L.cap + 0.5 * L.xtitle + 0.4 * c.fs,
                   1.0 * c.fs + 0.5 * L.ytitle);
  return plot_canvas_end(&c, FP8_OK, path, ch, err, errlen);
}
