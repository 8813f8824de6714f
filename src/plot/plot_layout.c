/* plot_layout.c: what surrounds the data of an x/y chart (plot_internal.h): axis ranges and
 * ticks with their labels, the frame, the legend right of the plot box, the titles, and the
 * layout that places the plot box so that all of them fit on the page. Drawn on the canvas of
 * plot_canvas.c by the chart kinds (plot_lines.c, plot_heatmap.c, plot_bars.c). */
#include "plot_internal.h"

#include <math.h>
#include <plplot.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ axes */

double plot_ax_map(const axis *a, double v) {
  if (!isfinite(v)) return NAN;
  if (a->log) return v > 0 ? log10(v) : NAN;
  return v;
}

void plot_range_add(double v, int logscale, double *lo, double *hi) {
  if (!isfinite(v) || (logscale && v <= 0)) return;
  if (v < *lo) *lo = v;
  if (v > *hi) *hi = v;
}

void plot_ax_range(axis *a, int logscale, double dlo, double dhi, double ulo, double uhi) {
  a->log = logscale;
  if (ulo < uhi && (!logscale || ulo > 0)) {
    a->lo = logscale ? log10(ulo) : ulo;
    a->hi = logscale ? log10(uhi) : uhi;
    return;
  }
  if (!(dlo <= dhi)) {
    dlo = logscale ? 1 : 0;
    dhi = logscale ? 10 : 1;
  }
  if (logscale) {
    a->lo = floor(log10(dlo) + 1e-9);
    a->hi = ceil(log10(dhi) - 1e-9);
    if (a->hi <= a->lo) a->hi = a->lo + 1;
    return;
  }
  if (dlo == dhi) {
    double d = dlo == 0 ? 1 : fabs(dlo) * 0.1;
    dlo -= d;
    dhi += d;
  }
  double pad = 0.04 * (dhi - dlo);
  a->lo = dlo == 0 ? 0 : dlo - pad;
  a->hi = dhi == 0 ? 0 : dhi + pad;
}

/* Bars rise from the bottom of a log axis: one whose value sits on the automatic lower decade
 * would have no height, so the axis then starts a decade lower; and one reaching the upper
 * decade would touch the frame, so the axis then ends a fifth of a decade higher. */
void plot_ax_bar_floor(axis *a, const fp8_chart *ch, double dlo, double dhi) {
  if (!a->log || (ch->ymin < ch->ymax && ch->ymin > 0) || !(dlo > 0 && dlo <= dhi)) return;
  if (log10(dlo) - a->lo < 0.15) a->lo -= 1;
  if (a->hi - log10(dhi) < 0.05) a->hi += 0.2;
}

/* A "nice" step (1, 2, 2.5, 5 x 10^k) giving at most maxticks intervals over span. */
static double nice_step(double span, int maxticks) {
  if (maxticks < 1) maxticks = 1;
  double raw = span / maxticks;
  double p = pow(10.0, floor(log10(raw)));
  static const double m[] = {1, 2, 2.5, 5, 10};
  for (int i = 0; i < 5; i++)
    if (m[i] * p >= raw * (1 - 1e-9)) return m[i] * p;
  return 10 * p;
}

/* Decimal places that print every multiple of step exactly enough. */
static int step_decimals(double step) {
  int d = 0;
  double v = step;
  while (d < 12 && fabs(v - nearbyint(v)) > 1e-6 * fabs(v)) {
    v *= 10;
    d++;
  }
  return d;
}

void plot_tick_label(const axis *a, double v, char *out, size_t n) {
  if (a->log) {
    long e = lrint(v);
    if (fabs(v - (double)e) < 1e-6) {
      if (e == 0) snprintf(out, n, "1");
      else if (e == 1) snprintf(out, n, "10");
      else snprintf(out, n, "10#u%ld#d", e);
    } else {
      snprintf(out, n, "%.3g", pow(10.0, v));
    }
    return;
  }
  if (fabs(v) < 1e-9 * a->step) v = 0;
  double big = fmax(fabs(a->lo), fabs(a->hi));
  if ((big >= 1e6 || big < 1e-3) && v != 0) {
    /* Each label self-contained, m x 10^e with 1 <= |m| < 10 and as few decimals as the value
     * needs: 2.5x10^6, 1x10^7; a shared factor at the axis end is easy to miss. */
    int e = (int)floor(log10(fabs(v)) + 1e-9);
    double m = v / pow(10.0, e);
    int d = 0;
    while (d < 6 && fabs(m * pow(10.0, d) - nearbyint(m * pow(10.0, d))) > 1e-6 * pow(10.0, d)) d++;
    if (fabs(m) == 1.0) snprintf(out, n, "%s10#u%d#d", m < 0 ? "-" : "", e);
    else snprintf(out, n, "%.*f\u00D710#u%d#d", d, m, e);
    return;
  }
  if (big >= 1e6 || big < 1e-3) {
    snprintf(out, n, "0");
    return;
  }
  snprintf(out, n, "%.*f", step_decimals(a->step), v);
}

/* Visible length in characters of a tick label (PLplot escapes removed). */
static double tick_chars(const char *s) {
  double n = 0;
  for (; *s; s++) {
    if (*s == '#' && s[1]) {
      s++;
      continue;
    }
    if (((unsigned char)*s & 0xC0) != 0x80) n++;
  }
  return n;
}

void plot_ax_ticks(axis *a, double length_px, double label_px) {
  int maxticks = (int)(length_px / label_px);
  if (maxticks < 2) maxticks = 2;
  if (maxticks > 10) maxticks = 10;
  if (a->log) {
    double dec = a->hi - a->lo;
    a->step = ceil(dec / maxticks);
    if (a->step < 1) a->step = 1;
  } else {
    a->step = nice_step(a->hi - a->lo, maxticks);
  }
}

double plot_ax_label_chars(const axis *a) {
  char buf[64];
  double w = 1;
  int any = 0;
  FOR_TICKS(a, v) {
    plot_tick_label(a, v, buf, sizeof buf);
    double n = tick_chars(buf);
    if (n > w) w = n;
    any = 1;
  }
  if (!any && a->log) w = 6;
  return w;
}

int plot_ax_no_ticks(const axis *a) {
  FOR_TICKS(a, v) { (void)v; return 0; }
  return 1;
}

/* ------------------------------------------------------------------ layout */

void plot_mode(const canvas *c, const box *p, double xlo, double xhi, double ylo,
               double yhi) {
  plvpor(p->l / c->W, p->r / c->W, 1.0 - p->b / c->H, 1.0 - p->t / c->H);
  plwind(xlo, xhi, ylo, yhi);
}

/* Box and ticks of the plot (labels are drawn by draw_tick_labels). grid: 1 for grid lines. */
void plot_draw_frame(const canvas *c, const box *p, const axis *x, const axis *y, int grid,
                     int xticks) {
  plot_mode(c, p, x->lo, x->hi, y->lo, y->hi);
  plwidth(1.0 * c->s);
  double xs = x->log ? 1 : x->step, ys = y->log ? 1 : y->step;
  if (grid) {
    plcol0(CI_GRID);
    char xo[8] = "g", yo[8] = "g";
    if (x->log) strcat(xo, "l");
    if (y->log) strcat(yo, "l");
    plbox(xticks ? xo : "", xs, 0, yo, ys, 0);
  }
  plcol0(CI_FG);
  char xo[16] = "bc", yo[16] = "bcst";
  if (xticks) strcat(xo, "st");
  if (x->log) strcat(xo, "l");
  if (y->log) strcat(yo, "l");
  plbox(xo, xs, 0, yo, ys, 0);
}

double plot_ax_frac(const axis *a, double v) { return (v - a->lo) / (a->hi - a->lo); }

void plot_draw_axis_labels(const canvas *c, const box *p, const axis *x, const axis *y,
                           int xlabels) {
  plot_page_mode(c);
  char buf[64];
  double cap = c->fs * 0.95;
  if (xlabels) {
    if (x->log && plot_ax_no_ticks(x)) {
      double ends[2] = {x->lo, x->hi};
      for (int i = 0; i < 2; i++) {
        plot_tick_label(x, ends[i], buf, sizeof buf);
        plot_text_raw(c, p->l + plot_ax_frac(x, ends[i]) * (p->r - p->l), p->b + 1.2 * cap, 0,
                      0.5, cap, CI_FG, buf);
      }
    }
    FOR_TICKS(x, v) {
      plot_tick_label(x, v, buf, sizeof buf);
      plot_text_raw(c, p->l + plot_ax_frac(x, v) * (p->r - p->l), p->b + 1.4 * cap, 0, 0.5, cap,
                    CI_FG, buf);
    }
  }
  if (y->log && plot_ax_no_ticks(y)) {
    double ends[2] = {y->lo, y->hi};
    for (int i = 0; i < 2; i++) {
      plot_tick_label(y, ends[i], buf, sizeof buf);
      plot_text_raw(c, p->l - 0.6 * cap, p->b - plot_ax_frac(y, ends[i]) * (p->b - p->t), 0, 1.0,
                    cap, CI_FG, buf);
    }
  }
  FOR_TICKS(y, v) {
    plot_tick_label(y, v, buf, sizeof buf);
    plot_text_raw(c, p->l - 0.6 * cap, p->b - plot_ax_frac(y, v) * (p->b - p->t), 0, 1.0, cap,
                  CI_FG, buf);
  }
}

void plot_legend_add(legend *L, leg_kind kind, int color, int dashed, const char *glyph,
                     const char *label) {
  if (!label || !*label || L->n >= sizeof L->e / sizeof L->e[0]) return;
  leg_entry *e = &L->e[L->n++];
  e->kind = kind;
  e->color = color;
  e->edge = -1;
  e->dashed = dashed;
  e->width = 0;
  e->glyph = glyph ? glyph : "";
  e->label = label;
}

/* Wraps s at spaces into at most LEGEND_LINES lines of at most maxchars characters (a word
 * longer than a line is cut; the last line ends in an ellipsis when text remains). Lines are
 * escaped for PLplot. Returns the number of lines. */
static int wrap_label(const char *s, size_t maxchars, char lines[][200]) {
  int n = 0;
  if (maxchars < 4) maxchars = 4;
  while (*s && n < LEGEND_LINES) {
    while (*s == ' ') s++;
    if (!*s) break;
    /* Find the byte end of up to maxchars characters, preferring the last space. */
    size_t chars = 0, i = 0, cut = 0;
    for (; s[i] && chars < maxchars; chars++) {
      i++;
      while (((unsigned char)s[i] & 0xC0) == 0x80) i++;
      if (s[i] == ' ') cut = i;
    }
    size_t take = !s[i] ? i : (cut ? cut : i);
    if (n == LEGEND_LINES - 1 && s[take]) {
      plot_plain_text(s, maxchars, lines[n++], sizeof lines[0]); /* ellipsis */
      break;
    }
    char tmp[200];
    if (take >= sizeof tmp) take = sizeof tmp - 1;
    memcpy(tmp, s, take);
    tmp[take] = 0;
    plot_plain_text(tmp, 0, lines[n++], sizeof lines[0]);
    s += take;
  }
  if (n == 0) lines[n++][0] = 0;
  return n;
}

static double legend_entry_h(const legend *L, const leg_entry *e) {
  return 2.0 * L->cap + (e->nlines - 1) * 1.5 * L->cap;
}

/* Sizes the legend for a plot area of the given height: long labels wrap (at most a third of
 * the width), text shrinks when the entries do not fit the height (down to 0.6 of the base). */
static void legend_layout(const canvas *c, legend *L, double plot_h) {
  L->sample = 40 * c->s;
  L->cap = c->fs;
  double maxw = 0;
  for (int iter = 0; iter < 4; iter++) {
    /* Legend text is reserved at 0.8 cap per character: it must never run off the page. */
    double room = 0.34 * c->W - L->sample - 46 * c->s;
    L->maxchars = (size_t)(room / (0.8 * L->cap));
    if (L->maxchars > LEGEND_MAX_CHARS) L->maxchars = LEGEND_MAX_CHARS;
    double total = 0;
    maxw = 0;
    for (size_t i = 0; i < L->n; i++) {
      leg_entry *e = &L->e[i];
      e->nlines = wrap_label(e->label, L->maxchars, e->lines);
      for (int k = 0; k < e->nlines; k++)
        maxw = fmax(maxw, tick_chars(e->lines[k]) * 0.8 * L->cap);
      total += legend_entry_h(L, e);
    }
    if (total <= plot_h || L->cap <= 0.6 * c->fs + 1e-9) break;
    L->cap = fmax(L->cap * plot_h / total, 0.6 * c->fs);
  }
  L->width = L->n ? 20 * c->s + L->sample + 10 * c->s + maxw + 24 * c->s : 0;
}

void plot_legend_draw(const canvas *c, const legend *L, const box *p) {
  if (!L->n) return;
  plot_page_mode(c);
  double x0 = p->r + 20 * c->s, y = p->t;
  for (size_t i = 0; i < L->n; i++) {
    const leg_entry *e = &L->e[i];
    double yc = y + 1.0 * L->cap; /* centre of the first line */
    double yy = c->H - yc;
    PLFLT lx[2] = {x0, x0 + L->sample}, ly[2] = {yy, yy};
    if (e->kind == LEG_LINE) {
      plcol0(e->color);
      plwidth((e->width > 0 ? e->width : 2.5) * c->s);
      if (e->dashed) {
        PLINT mark = (PLINT)(6 * c->s / c->ppmm * 1000), space = mark;
        plstyl(1, &mark, &space);
      }
      plline(2, lx, ly);
      plstyl(0, NULL, NULL);
    } else if (e->kind == LEG_BOX) {
      double h = 1.1 * L->cap;
      PLFLT bx[4] = {x0 + 4 * c->s, x0 + L->sample - 4 * c->s, x0 + L->sample - 4 * c->s,
                     x0 + 4 * c->s};
      PLFLT by[4] = {yy - h / 2, yy - h / 2, yy + h / 2, yy + h / 2};
      plcol0(e->color);
      plfill(4, bx, by);
      if (e->edge >= 0) {
        PLFLT ex[5] = {bx[0], bx[1], bx[2], bx[3], bx[0]}, ey[5] = {by[0], by[1], by[2], by[3], by[0]};
        plcol0(e->edge);
        plwidth(1.5 * c->s);
        plline(5, ex, ey);
      }
    }
    if (e->glyph[0]) {
      plot_text_size(c, e->kind == LEG_MARKER ? 1.0 * L->cap : 0.75 * L->cap);
      plcol0(e->color);
      PLFLT mx = x0 + L->sample / 2, my = yy;
      plstring(1, &mx, &my, e->glyph);
    }
    for (int k = 0; k < e->nlines; k++)
      plot_text_raw(c, x0 + L->sample + 10 * c->s, yc + k * 1.5 * L->cap, 0, 0.0, L->cap, CI_FG,
                    e->lines[k]);
    y += legend_entry_h(L, e);
  }
}

void plot_draw_titles(const canvas *c, const box *p, const fp8_chart *ch, double xtitle_y,
                      double ytitle_x) {
  plot_page_mode(c);
  if (ch->title && *ch->title) {
    /* Centred over the plot when it fits there, else over the page (bold text: 10% wider).
     * A title too long for the page at 0.6 of its size (a tall chart's larger text) goes
     * smaller still, to 0.45, and past that is cut with "..." rather than off both edges. */
    double room = (c->W - 40 * c->s) / 1.1, cap = plot_fit_cap(ch->title, 1.35 * c->fs, room);
    double tw = plot_text_w(ch->title, cap);
    if (tw > room) cap = fmax(cap * room / tw, 0.45 * 1.35 * c->fs);
    /* cut only what does not fit at the final size (a title scaled to fit exactly must not
     * lose its last character to the rounding of room / width) */
    size_t maxc = plot_text_w(ch->title, cap) <= room * (1 + 1e-9)
                      ? 0
                      : (size_t)(room / (TEXT_CHAR_W * cap));
    double half = fmin(1.1 * plot_text_w(ch->title, cap), c->W - 40 * c->s) / 2, x = (p->l + p->r) / 2;
    if (x - half < 20 * c->s || x + half > c->W - 20 * c->s) x = c->W / 2.0;
    plsfont(PL_FCI_SANS, PL_FCI_UPRIGHT, PL_FCI_BOLD);
    plot_text_user(c, x, 0.45 * p->t, 0, 0.5, cap, CI_FG, ch->title, maxc);
    plsfont(PL_FCI_SANS, PL_FCI_UPRIGHT, PL_FCI_MEDIUM);
  }
  if (ch->xlabel && *ch->xlabel)
    plot_text_user(c, (p->l + p->r) / 2, xtitle_y, 0, 0.5,
                   plot_fit_cap(ch->xlabel, 1.1 * c->fs, p->r - p->l), CI_FG, ch->xlabel, 0);
  if (ch->ylabel && *ch->ylabel)
    plot_text_user(c, ytitle_x, (p->t + p->b) / 2, 90, 0.5,
                   plot_fit_cap(ch->ylabel, 1.1 * c->fs, p->b - p->t), CI_FG, ch->ylabel, 0);
}

box plot_layout_xy(const canvas *c, const fp8_chart *ch, axis *x, axis *y, legend *L,
                   int xnumeric, double extra_bottom, double *xtitle_y, double *ytitle_x) {
  double cap = c->fs * 0.95;
  box p;
  p.t = (ch->title && *ch->title) ? 4.2 * c->fs : 1.8 * c->fs;
  double bottom_labels = xnumeric ? 2.2 * cap : 0;
  double xtitle = (ch->xlabel && *ch->xlabel) ? 2.4 * c->fs : 0;
  p.b = c->H - (1.0 * c->fs + bottom_labels + extra_bottom + xtitle + 0.6 * c->fs);
  legend_layout(c, L, p.b - p.t);
  /* y ticks first (their label width sets the left margin). */
  plot_ax_ticks(y, p.b - p.t, 3.0 * cap);
  double ylab_w = plot_ax_label_chars(y) * DIGIT_W * cap;
  double ytitle = (ch->ylabel && *ch->ylabel) ? 2.4 * c->fs : 0;
  p.l = 1.0 * c->fs + ytitle + ylab_w + 0.8 * cap;
  p.r = c->W - (L->n ? L->width : 2.0 * c->fs);
  if (xnumeric) {
    /* Labels need their width plus two characters of space; two passes converge. */
    plot_ax_ticks(x, p.r - p.l, 8 * DIGIT_W * cap);
    plot_ax_ticks(x, p.r - p.l, (plot_ax_label_chars(x) + 3) * DIGIT_W * cap);
  }
  *xtitle_y = p.b + bottom_labels + extra_bottom + 0.5 * xtitle + 0.4 * c->fs;
  *ytitle_x = 1.0 * c->fs + 0.5 * ytitle;
  return p;
}

void plot_fit_first_slanted(const canvas *c, box *p, size_t n, size_t nchars, double cap) {
  /* Slanted labels are often capitals, digits and '=': 0.85 cap per character, plus the half
   * height of the line that sticks out past the corner. */
  double ext = (double)nchars * 0.85 * cap * M_SQRT1_2 + 0.5 * cap + 8 * c->s;
  double k = 0.5 / (double)n; /* the first slot's centre: l + k (r - l) */
  if (p->l + k * (p->r - p->l) < ext) p->l = (ext - k * p->r) / (1 - k);
}

void plot_x_tick_labels(const canvas *c, const axis *a, const box *p, double cap) {
  char buf[64];
  FOR_TICKS(a, v) {
    plot_tick_label(a, v, buf, sizeof buf);
    plot_text_raw(c, p->l + plot_ax_frac(a, v) * (p->r - p->l), p->b + 1.4 * cap, 0, 0.5, cap,
                  CI_FG, buf);
  }
}
