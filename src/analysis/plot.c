/* plot.c: see plot.h. Each chart: a white RGB buffer handed to a fresh PLplot stream on the
 * memcairo device (plsmem: 3 bytes per pixel; memcairo draws over the buffer's contents and
 * never paints a background, hence the white fill), the data drawn in a plot viewport, then
 * every piece of text (title, axis labels, tick labels, legend) drawn in page coordinates
 * (one world unit = one pixel, y up) so that its place is computed here, in pixels, and nothing
 * is clipped by the plot viewport. The stream is ended, and the buffer encoded by png.c.
 *
 * Text sizes are cap heights in pixels: PLplot's character height (plschr, mm) is what the
 * cairo driver renders as the height of a capital (measured: 5 mm at 72 dpi gives 14 px caps),
 * and a DejaVu Sans character is at most ~0.8 cap heights wide on average, the figure used to
 * reserve room for text whose width only cairo knows. */
#include "plot.h"

#include <math.h>
#include <plplot.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8.h"

/* PLplot's stream table, abort handler and device list are process-wide. */
static pthread_mutex_t plot_lock = PTHREAD_MUTEX_INITIALIZER;
static char plot_abort_msg[256]; /* guarded by plot_lock */

static const uint8_t okabe_ito[FP8_COLOR_COUNT][3] = {
    {230, 159, 0}, /* AUTO: first automatic colour (orange) */
    {0, 0, 0},       {230, 159, 0}, {86, 180, 233}, {0, 158, 115},
    {240, 228, 66},  {0, 114, 178}, {213, 94, 0},   {204, 121, 167}};
static const fp8_color auto_order[] = {FP8_COLOR_ORANGE, FP8_COLOR_SKYBLUE,    FP8_COLOR_GREEN,
                                       FP8_COLOR_BLUE,   FP8_COLOR_VERMILLION, FP8_COLOR_PURPLE,
                                       FP8_COLOR_BLACK,  FP8_COLOR_YELLOW};
#define N_AUTO (sizeof auto_order / sizeof auto_order[0])

/* Unicode glyphs of fp8_marker (DejaVu Sans has all of them). */
static const char *const marker_glyph[FP8_MARKER_COUNT] = {"", "\u25CF", "\u25A0", "\u25B2",
                                                           "\u25C6", "\u2716"};

/* cmap0 layout: background, foreground, the palette opaque, then translucent, then greys. */
enum {
  CI_BG = 0,
  CI_FG = 1,
  CI_PAL = 2,                        /* + fp8_color (1..8): opaque palette */
  CI_PAL_T = CI_PAL + FP8_COLOR_COUNT, /* + fp8_color: palette at alpha 0.25 (windows) */
  CI_GRID = CI_PAL_T + FP8_COLOR_COUNT,
  CI_NA,
  CI_WHITE,
  CI_AXIS_GREY,
  CI_COUNT
};

#define DEFAULT_W 1200
#define DEFAULT_H 800

int fp8_plot_color_rgb(fp8_color c, uint8_t rgb[3]) {
  if ((int)c < 0 || c >= FP8_COLOR_COUNT) return FP8_EINVAL;
  memcpy(rgb, okabe_ito[c], 3);
  return FP8_OK;
}

/* ------------------------------------------------------------------ the canvas */

typedef struct {
  int W, H;
  uint8_t *rgb;
  PLINT prev_stream;
  int open;      /* a stream is current and not yet ended */
  double ppmm;   /* pixels per mm on the page */
  double s;      /* size factor: 1 at 1200x800 */
  double fs;     /* base text size (cap height, px) */
  size_t auto_i; /* next automatic colour */
} canvas;

static void on_plabort(PLCHAR_VECTOR msg) {
  if (!plot_abort_msg[0]) snprintf(plot_abort_msg, sizeof plot_abort_msg, "%s", msg);
}

static int memcairo_available(void) {
  /* plgDevs fills caller arrays of at least as many entries as there are drivers. */
  const char *menu[128], *names[128];
  const char **mp = menu, **np = names;
  int n = 128;
  plgDevs(&mp, &np, &n);
  for (int i = 0; i < n && i < 128; i++)
    if (np[i] && strcmp(np[i], "memcairo") == 0) return 1;
  return 0;
}

static int check_size(const fp8_chart *ch, int *W, int *H, char *err, size_t errlen) {
  *W = ch->width ? ch->width : DEFAULT_W;
  *H = ch->height ? ch->height : DEFAULT_H;
  if (*W < 300 || *H < 200 || *W > 8000 || *H > 8000) {
    snprintf(err, errlen, "chart size %dx%d: expected 300..8000 x 200..8000 pixels", *W, *H);
    return FP8_EINVAL;
  }
  return FP8_OK;
}

static void set_color0(int i, const uint8_t rgb[3], double alpha) {
  plscol0a(i, rgb[0], rgb[1], rgb[2], alpha);
}

/* Takes the lock, allocates the white buffer and starts a stream on it. On failure nothing is
 * held. */
static int canvas_begin(canvas *c, const fp8_chart *ch, char *err, size_t errlen) {
  memset(c, 0, sizeof *c);
  int rc = check_size(ch, &c->W, &c->H, err, errlen);
  if (rc != FP8_OK) return rc;
  c->rgb = malloc((size_t)c->W * (size_t)c->H * 3);
  if (!c->rgb) {
    snprintf(err, errlen, "out of memory for a %dx%d chart", c->W, c->H);
    return FP8_ENOMEM;
  }
  memset(c->rgb, 255, (size_t)c->W * (size_t)c->H * 3);
  pthread_mutex_lock(&plot_lock);
  if (!memcairo_available()) {
    pthread_mutex_unlock(&plot_lock);
    free(c->rgb);
    c->rgb = NULL;
    snprintf(err, errlen, "PLplot has no memcairo device (install plplot-driver-cairo)");
    return FP8_EIO;
  }
  plot_abort_msg[0] = 0;
  plsabort(on_plabort);
  plgstrm(&c->prev_stream);
  PLINT strm;
  plmkstrm(&strm);
  plsdev("memcairo");
  plsmem(c->W, c->H, c->rgb);
  plscmap0n(CI_COUNT);
  static const uint8_t white[3] = {255, 255, 255}, black[3] = {0, 0, 0},
                       grid[3] = {225, 225, 225}, na[3] = {190, 190, 190},
                       axisgrey[3] = {90, 90, 90};
  set_color0(CI_BG, white, 1.0);
  set_color0(CI_FG, black, 1.0);
  for (int k = 0; k < FP8_COLOR_COUNT; k++) {
    set_color0(CI_PAL + k, okabe_ito[k], 1.0);
    set_color0(CI_PAL_T + k, okabe_ito[k], 0.25);
  }
  set_color0(CI_GRID, grid, 1.0);
  set_color0(CI_NA, na, 1.0);
  set_color0(CI_WHITE, white, 1.0);
  set_color0(CI_AXIS_GREY, axisgrey, 1.0);
  plinit();
  c->open = 1;
  pladv(0);
  PLFLT x0, x1, y0, y1;
  plgspa(&x0, &x1, &y0, &y1);
  c->ppmm = (x1 > x0) ? c->W / (x1 - x0) : 72.0 / 25.4;
  c->s = sqrt((double)c->W * c->H / ((double)DEFAULT_W * DEFAULT_H));
  if (c->s < 0.75) c->s = 0.75; /* below that, text is no longer legible */
  c->fs = 13.0 * c->s;
  plsfont(PL_FCI_SANS, PL_FCI_UPRIGHT, PL_FCI_MEDIUM);
  return FP8_OK;
}

/* Ends the stream, restores the caller's one, releases the lock; writes the PNG when rc is
 * FP8_OK. Frees the buffer in every case. */
static int canvas_end(canvas *c, int rc, const char *path, const fp8_chart *ch, char *err,
                      size_t errlen) {
  if (c->open) {
    plend1();
    plsstrm(c->prev_stream);
    plsabort(NULL);
    c->open = 0;
    if (rc == FP8_OK && plot_abort_msg[0]) {
      snprintf(err, errlen, "%s: PLplot: %s", path, plot_abort_msg);
      rc = FP8_EIO;
    }
    pthread_mutex_unlock(&plot_lock);
  }
  if (rc == FP8_OK) rc = fp8_png_write(path, c->rgb, c->W, c->H, ch->text, ch->ntext, err, errlen);
  free(c->rgb);
  c->rgb = NULL;
  return rc;
}

static fp8_color pick_color(canvas *c, fp8_color want) {
  if (want != FP8_COLOR_AUTO) return want;
  return auto_order[c->auto_i++ % N_AUTO];
}

/* ------------------------------------------------------------------ text */

/* Text sizes are cap heights in pixels. */
static void text_size(const canvas *c, double cap_px) { plschr(cap_px / c->ppmm, 1.0); }

static size_t utf8_len(const char *s) {
  size_t n = 0;
  for (; *s; s++)
    if (((unsigned char)*s & 0xC0) != 0x80) n++;
  return n;
}

/* Average character width of mixed text in cap heights (DejaVu Sans: digits 0.83, lower case
 * ~0.7; measured on rendered labels), and of tick labels (digits). */
#define TEXT_CHAR_W 0.74
#define DIGIT_W 0.85

/* Width estimate of s (characters, not PLplot escapes) at cap height cap. */
static double text_w(const char *s, double cap) { return (double)utf8_len(s) * TEXT_CHAR_W * cap; }

/* Copies user text for PLplot: '#' (PLplot's escape character) doubled, shortened to at most
 * maxchars characters with an ellipsis (maxchars 0: no limit). */
static void plain_text(const char *s, size_t maxchars, char *out, size_t outlen) {
  size_t o = 0, chars = 0, total = utf8_len(s ? s : "");
  if (!s) s = "";
  int cut = maxchars > 1 && total > maxchars;
  for (; *s && o + 8 < outlen; s++) {
    if (((unsigned char)*s & 0xC0) != 0x80) {
      if (cut && chars == maxchars - 1) break;
      chars++;
    }
    if (*s == '#') out[o++] = '#';
    out[o++] = *s;
  }
  if (cut) {
    memcpy(out + o, "\u2026", 3);
    o += 3;
  }
  out[o] = 0;
}

/* Page coordinates: one unit per pixel, origin at the bottom left, no clipping inside the page. */
static void page_mode(const canvas *c) {
  plvpor(0.0, 1.0, 0.0, 1.0);
  plwind(0.0, c->W, 0.0, c->H);
}

/* Draws already-escaped text at pixel (x, ytop) measured from the top-left corner, rotated by
 * angle degrees, justified by just (0 left, 0.5 centre, 1 right) along its direction and
 * centred vertically on ytop. Needs page_mode. */
static void text_raw(const canvas *c, double x, double ytop, double angle, double just,
                     double cap, int color, const char *s) {
  text_size(c, cap);
  plcol0(color);
  double a = angle * M_PI / 180.0;
  plptex(x, c->H - ytop, cos(a), sin(a), just, s);
}

static void text_user(const canvas *c, double x, double ytop, double angle, double just,
                      double cap, int color, const char *s, size_t maxchars) {
  if (!s || !*s) return;
  char buf[1024];
  plain_text(s, maxchars, buf, sizeof buf);
  text_raw(c, x, ytop, angle, just, cap, color, buf);
}

/* The largest cap height <= cap at which s fits in width w (but not below 0.6*cap). */
static double fit_cap(const char *s, double cap, double w) {
  double tw = text_w(s ? s : "", cap);
  if (tw <= w || tw <= 0) return cap;
  double f = w / tw;
  return cap * (f < 0.6 ? 0.6 : f);
}

/* ------------------------------------------------------------------ axes */

typedef struct {
  double lo, hi; /* plotting coordinates (log10 of the data on a log axis) */
  int log;
  double step;   /* linear: major tick step; log: decades between labelled ticks */
} axis;

/* Maps a data value to plotting coordinates, NAN when it cannot be drawn. */
static double ax_map(const axis *a, double v) {
  if (!isfinite(v)) return NAN;
  if (a->log) return v > 0 ? log10(v) : NAN;
  return v;
}

/* Data range [*lo, *hi] over finite (and, for log, positive) values, updated in place. */
static void range_add(double v, int logscale, double *lo, double *hi) {
  if (!isfinite(v) || (logscale && v <= 0)) return;
  if (v < *lo) *lo = v;
  if (v > *hi) *hi = v;
}

/* Sets a's range from the data range [dlo, dhi] (dlo > dhi: no data) or the user's range, in
 * plotting coordinates: log axes snap to whole decades, linear ones get 4% padding unless a
 * bound is zero (bars, counts: they start at the axis). */
static void ax_range(axis *a, int logscale, double dlo, double dhi, double ulo, double uhi) {
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
static void ax_bar_floor(axis *a, const fp8_chart *ch, double dlo, double dhi) {
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

/* Tick label for plotting coordinate v (PLplot markup). */
static void tick_label(const axis *a, double v, char *out, size_t n) {
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

/* Chooses the tick step so that labels of the given pixel footprint do not collide. */
static void ax_ticks(axis *a, double length_px, double label_px) {
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

/* Calls f for every labelled tick of a in plotting coordinates. */
#define FOR_TICKS(a, v)                                                                        \
  for (double v##_k = ceil((a)->lo / (a)->step - 1e-9), v;                                     \
       v = v##_k * (a)->step, v##_k <= floor((a)->hi / (a)->step + 1e-9); v##_k += 1)

/* Widest tick label of a, in characters. */
static double ax_label_chars(const axis *a) {
  char buf[64];
  double w = 1;
  int any = 0;
  FOR_TICKS(a, v) {
    tick_label(a, v, buf, sizeof buf);
    double n = tick_chars(buf);
    if (n > w) w = n;
    any = 1;
  }
  if (!any && a->log) w = 6;
  return w;
}

/* Whether a log axis has no labelled decade inside it (then its ends are labelled). */
static int ax_no_ticks(const axis *a) {
  FOR_TICKS(a, v) { (void)v; return 0; }
  return 1;
}

/* ------------------------------------------------------------------ layout */

typedef struct {
  double l, r, t, b; /* plot box in pixels from the top-left corner */
} box;

static void plot_mode(const canvas *c, const box *p, double xlo, double xhi, double ylo,
                      double yhi) {
  plvpor(p->l / c->W, p->r / c->W, 1.0 - p->b / c->H, 1.0 - p->t / c->H);
  plwind(xlo, xhi, ylo, yhi);
}

/* Box and ticks of the plot (labels are drawn by draw_tick_labels). grid: 1 for grid lines. */
static void draw_frame(const canvas *c, const box *p, const axis *x, const axis *y, int grid,
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

static double ax_frac(const axis *a, double v) { return (v - a->lo) / (a->hi - a->lo); }

static void draw_axis_labels(const canvas *c, const box *p, const axis *x, const axis *y,
                             int xlabels) {
  page_mode(c);
  char buf[64];
  double cap = c->fs * 0.95;
  if (xlabels) {
    if (x->log && ax_no_ticks(x)) {
      double ends[2] = {x->lo, x->hi};
      for (int i = 0; i < 2; i++) {
        tick_label(x, ends[i], buf, sizeof buf);
        text_raw(c, p->l + ax_frac(x, ends[i]) * (p->r - p->l), p->b + 1.2 * cap, 0, 0.5, cap,
                 CI_FG, buf);
      }
    }
    FOR_TICKS(x, v) {
      tick_label(x, v, buf, sizeof buf);
      text_raw(c, p->l + ax_frac(x, v) * (p->r - p->l), p->b + 1.4 * cap, 0, 0.5, cap, CI_FG,
               buf);
    }
  }
  if (y->log && ax_no_ticks(y)) {
    double ends[2] = {y->lo, y->hi};
    for (int i = 0; i < 2; i++) {
      tick_label(y, ends[i], buf, sizeof buf);
      text_raw(c, p->l - 0.6 * cap, p->b - ax_frac(y, ends[i]) * (p->b - p->t), 0, 1.0, cap,
               CI_FG, buf);
    }
  }
  FOR_TICKS(y, v) {
    tick_label(y, v, buf, sizeof buf);
    text_raw(c, p->l - 0.6 * cap, p->b - ax_frac(y, v) * (p->b - p->t), 0, 1.0, cap, CI_FG,
             buf);
  }
}

/* A legend entry. */
typedef enum { LEG_LINE, LEG_MARKER, LEG_BOX } leg_kind;
typedef struct {
  leg_kind kind;
  int color;        /* cmap0 index */
  int edge;         /* cmap0 index of a LEG_BOX outline (-1: none) */
  int dashed;       /* LEG_LINE */
  const char *glyph; /* LEG_MARKER, or a marker drawn on a LEG_LINE ("" none) */
  const char *label;
  int nlines;       /* the label wrapped to at most LEGEND_LINES lines */
  char lines[3][200];
} leg_entry;

#define LEGEND_LINES 3
#define LEGEND_MAX_CHARS 48 /* per line */

typedef struct {
  leg_entry e[64];
  size_t n;
  double cap, sample; /* text size, sample width (px) */
  double width;       /* total width incl. the gap to the plot (px) */
  size_t maxchars;    /* per line */
} legend;

static void legend_add(legend *L, leg_kind kind, int color, int dashed, const char *glyph,
                       const char *label) {
  if (!label || !*label || L->n >= sizeof L->e / sizeof L->e[0]) return;
  leg_entry *e = &L->e[L->n++];
  e->kind = kind;
  e->color = color;
  e->edge = -1;
  e->dashed = dashed;
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
      plain_text(s, maxchars, lines[n++], sizeof lines[0]); /* ellipsis */
      break;
    }
    char tmp[200];
    if (take >= sizeof tmp) take = sizeof tmp - 1;
    memcpy(tmp, s, take);
    tmp[take] = 0;
    plain_text(tmp, 0, lines[n++], sizeof lines[0]);
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

static void legend_draw(const canvas *c, const legend *L, const box *p) {
  if (!L->n) return;
  page_mode(c);
  double x0 = p->r + 20 * c->s, y = p->t;
  for (size_t i = 0; i < L->n; i++) {
    const leg_entry *e = &L->e[i];
    double yc = y + 1.0 * L->cap; /* centre of the first line */
    double yy = c->H - yc;
    PLFLT lx[2] = {x0, x0 + L->sample}, ly[2] = {yy, yy};
    if (e->kind == LEG_LINE) {
      plcol0(e->color);
      plwidth(2.5 * c->s);
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
      text_size(c, e->kind == LEG_MARKER ? 1.0 * L->cap : 0.75 * L->cap);
      plcol0(e->color);
      PLFLT mx = x0 + L->sample / 2, my = yy;
      plstring(1, &mx, &my, e->glyph);
    }
    for (int k = 0; k < e->nlines; k++)
      text_raw(c, x0 + L->sample + 10 * c->s, yc + k * 1.5 * L->cap, 0, 0.0, L->cap, CI_FG,
               e->lines[k]);
    y += legend_entry_h(L, e);
  }
}

/* Title and axis titles around plot box p. */
static void draw_titles(const canvas *c, const box *p, const fp8_chart *ch, double xtitle_y,
                        double ytitle_x) {
  page_mode(c);
  if (ch->title && *ch->title) {
    /* Centred over the plot when it fits there, else over the page (bold text: 10% wider). */
    double cap = fit_cap(ch->title, 1.35 * c->fs, (c->W - 40 * c->s) / 1.1);
    double half = 1.1 * text_w(ch->title, cap) / 2, x = (p->l + p->r) / 2;
    if (x - half < 20 * c->s || x + half > c->W - 20 * c->s) x = c->W / 2.0;
    plsfont(PL_FCI_SANS, PL_FCI_UPRIGHT, PL_FCI_BOLD);
    text_user(c, x, 0.45 * p->t, 0, 0.5, cap, CI_FG, ch->title, 0);
    plsfont(PL_FCI_SANS, PL_FCI_UPRIGHT, PL_FCI_MEDIUM);
  }
  if (ch->xlabel && *ch->xlabel)
    text_user(c, (p->l + p->r) / 2, xtitle_y, 0, 0.5, fit_cap(ch->xlabel, 1.1 * c->fs, p->r - p->l),
              CI_FG, ch->xlabel, 0);
  if (ch->ylabel && *ch->ylabel)
    text_user(c, ytitle_x, (p->t + p->b) / 2, 90, 0.5,
              fit_cap(ch->ylabel, 1.1 * c->fs, p->b - p->t), CI_FG, ch->ylabel, 0);
}

/* Standard layout for x/y charts: margins from the title, tick labels (of the axes as ranged)
 * and legend. extra_bottom: room below the x tick labels (slanted category labels). */
static box layout_xy(const canvas *c, const fp8_chart *ch, axis *x, axis *y, legend *L,
                     int xnumeric, double extra_bottom, double *xtitle_y, double *ytitle_x) {
  double cap = c->fs * 0.95;
  box p;
  p.t = (ch->title && *ch->title) ? 4.2 * c->fs : 1.8 * c->fs;
  double bottom_labels = xnumeric ? 2.2 * cap : 0;
  double xtitle = (ch->xlabel && *ch->xlabel) ? 2.4 * c->fs : 0;
  p.b = c->H - (1.0 * c->fs + bottom_labels + extra_bottom + xtitle + 0.6 * c->fs);
  legend_layout(c, L, p.b - p.t);
  /* y ticks first (their label width sets the left margin). */
  ax_ticks(y, p.b - p.t, 3.0 * cap);
  double ylab_w = ax_label_chars(y) * DIGIT_W * cap;
  double ytitle = (ch->ylabel && *ch->ylabel) ? 2.4 * c->fs : 0;
  p.l = 1.0 * c->fs + ytitle + ylab_w + 0.8 * cap;
  p.r = c->W - (L->n ? L->width : 2.0 * c->fs);
  if (xnumeric) {
    /* Labels need their width plus two characters of space; two passes converge. */
    ax_ticks(x, p.r - p.l, 8 * DIGIT_W * cap);
    ax_ticks(x, p.r - p.l, (ax_label_chars(x) + 3) * DIGIT_W * cap);
  }
  *xtitle_y = p.b + bottom_labels + extra_bottom + 0.5 * xtitle + 0.4 * c->fs;
  *ytitle_x = 1.0 * c->fs + 0.5 * ytitle;
  return p;
}

/* Moves a plot box's left edge right so that the first of n slanted (45 degree, right-justified
 * at the slot centre) category labels, nchars long at cap height cap, stays on the page. */
static void fit_first_slanted(const canvas *c, box *p, size_t n, size_t nchars, double cap) {
  /* Slanted labels are often capitals, digits and '=': 0.85 cap per character, plus the half
   * height of the line that sticks out past the corner. */
  double ext = (double)nchars * 0.85 * cap * M_SQRT1_2 + 0.5 * cap + 8 * c->s;
  double k = 0.5 / (double)n; /* the first slot's centre: l + k (r - l) */
  if (p->l + k * (p->r - p->l) < ext) p->l = (ext - k * p->r) / (1 - k);
}

/* ------------------------------------------------------------------ validation helpers */

#define FAIL(code, ...)                                                                        \
  do {                                                                                         \
    snprintf(err, errlen, __VA_ARGS__);                                                        \
    return (code);                                                                             \
  } while (0)

static int check_common(const char *path, const fp8_chart *ch, char *err, size_t errlen) {
  if (!path || !*path) FAIL(FP8_EINVAL, "chart: expected an output path, got none");
  if (!ch) FAIL(FP8_EINVAL, "%s: expected a chart description, got NULL", path);
  int W, H;
  int rc = check_size(ch, &W, &H, err, errlen);
  if (rc != FP8_OK) return rc;
  if (ch->ntext && !ch->text) FAIL(FP8_EINVAL, "%s: ntext %zu but no text", path, ch->ntext);
  return FP8_OK;
}

static int check_color(const char *path, const char *what, size_t i, fp8_color col, char *err,
                       size_t errlen) {
  if ((int)col < 0 || col >= FP8_COLOR_COUNT)
    FAIL(FP8_EINVAL, "%s: %s %zu: color %d outside 0..%d", path, what, i, (int)col,
         FP8_COLOR_COUNT - 1);
  return FP8_OK;
}

/* ------------------------------------------------------------------ line chart */

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
    double xv = i < n ? ax_map(ax, x[i]) : NAN, yv = i < n ? ax_map(ay, y[i]) : NAN;
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
  text_size(c, cap);
  for (size_t i = 0; i < n; i++) {
    PLFLT xv = ax_map(ax, x[i]), yv = ax_map(ay, y[i]);
    if (isfinite(xv) && isfinite(yv)) plstring(1, &xv, &yv, glyph);
  }
}

static int mark_color(const fp8_markers *m) {
  return CI_PAL + (m->color ? m->color : FP8_COLOR_VERMILLION);
}

int fp8_plot_lines(const char *path, const fp8_chart *ch, const fp8_series *series, size_t ns,
                   const fp8_markers *marks, size_t nm, char *err, size_t errlen) {
  int rc = check_common(path, ch, err, errlen);
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
    if ((rc = check_color(path, "series", i, s->color, err, errlen)) != FP8_OK) return rc;
  }
  for (size_t i = 0; i < nm; i++) {
    if (marks[i].n && !marks[i].x) FAIL(FP8_EINVAL, "%s: markers %zu: n %zu but no x", path, i, marks[i].n);
    if ((int)marks[i].marker < 0 || marks[i].marker >= FP8_MARKER_COUNT)
      FAIL(FP8_EINVAL, "%s: markers %zu: marker %d out of range", path, i, (int)marks[i].marker);
    if ((rc = check_color(path, "markers", i, marks[i].color, err, errlen)) != FP8_OK) return rc;
  }

  /* Data ranges (markers included). */
  double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
  for (size_t i = 0; i < ns; i++)
    for (size_t j = 0; j < series[i].n; j++) {
      double xv = series[i].x[j], yv = series[i].y[j];
      if (!isfinite(xv) || !isfinite(yv) || (ch->logx && xv <= 0) || (ch->logy && yv <= 0)) continue;
      range_add(xv, ch->logx, &xlo, &xhi);
      range_add(yv, ch->logy, &ylo, &yhi);
    }
  for (size_t i = 0; i < nm; i++)
    for (size_t j = 0; j < marks[i].n; j++) {
      range_add(marks[i].x[j], ch->logx, &xlo, &xhi);
      if (marks[i].y) range_add(marks[i].y[j], ch->logy, &ylo, &yhi);
    }
  axis ax, ay;
  ax_range(&ax, ch->logx, xlo, xhi, ch->xmin, ch->xmax);
  if (!ch->logx && !(ch->xmin < ch->xmax) && xlo <= xhi) { /* lines: no padding along x */
    ax.lo = xlo;
    ax.hi = xhi > xlo ? xhi : xlo + 1;
  }
  ax_range(&ay, ch->logy, ylo, yhi, ch->ymin, ch->ymax);

  canvas c;
  if ((rc = canvas_begin(&c, ch, err, errlen)) != FP8_OK) return rc;

  legend L = {0};
  for (size_t i = 0; i < ns; i++) {
    int ci = CI_PAL + pick_color(&c, series[i].color);
    const fp8_series *s = &series[i];
    fp8_marker mk = s->style == FP8_STYLE_POINTS && !s->marker ? FP8_MARKER_CIRCLE : s->marker;
    if (s->style == FP8_STYLE_POINTS) legend_add(&L, LEG_MARKER, ci, 0, marker_glyph[mk], s->label);
    else legend_add(&L, LEG_LINE, ci, s->dashed, marker_glyph[mk], s->label);
  }
  for (size_t i = 0; i < nm; i++) {
    int ci = mark_color(&marks[i]);
    if (marks[i].y)
      legend_add(&L, LEG_MARKER, ci, 0,
                 marker_glyph[marks[i].marker ? marks[i].marker : FP8_MARKER_CROSS], marks[i].label);
    else legend_add(&L, LEG_LINE, ci, 1, "", marks[i].label);
  }

  double xt, yt;
  box p = layout_xy(&c, ch, &ax, &ay, &L, 1, 0, &xt, &yt);
  draw_frame(&c, &p, &ax, &ay, ch->grid, 1);

  /* Vertical marker lines behind the data, then the series, then marker points on top. */
  plot_mode(&c, &p, ax.lo, ax.hi, ay.lo, ay.hi);
  PLINT mark = (PLINT)(6 * c.s / c.ppmm * 1000), space = mark;
  for (size_t i = 0; i < nm; i++) {
    if (marks[i].y) continue;
    plcol0(mark_color(&marks[i]));
    plwidth(2.0 * c.s);
    plstyl(1, &mark, &space);
    for (size_t j = 0; j < marks[i].n; j++) {
      double xv = ax_map(&ax, marks[i].x[j]);
      if (!isfinite(xv)) continue;
      PLFLT lx[2] = {xv, xv}, ly[2] = {ay.lo, ay.hi};
      plline(2, lx, ly);
    }
    plstyl(0, NULL, NULL);
  }
  c.auto_i = 0; /* the same automatic colours as in the legend */
  for (size_t i = 0; i < ns && rc == FP8_OK; i++) {
    const fp8_series *s = &series[i];
    plcol0(CI_PAL + pick_color(&c, s->color));
    plwidth(2.5 * c.s);
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
  draw_frame(&c, &p, &ax, &ay, 0, 1);
  draw_axis_labels(&c, &p, &ax, &ay, 1);
  draw_titles(&c, &p, ch, xt, yt);
  legend_draw(&c, &L, &p);
  if (rc == FP8_ENOMEM) snprintf(err, errlen, "out of memory");
  return canvas_end(&c, rc, path, ch, err, errlen);
}

/* ------------------------------------------------------------------ heatmap */

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

int fp8_plot_heatmap(const char *path, const fp8_chart *ch, const fp8_heatmap *hm, char *err,
                     size_t errlen) {
  int rc = check_common(path, ch, err, errlen);
  if (rc != FP8_OK) return rc;
  if (!hm) FAIL(FP8_EINVAL, "%s: heatmap: expected a heatmap description, got NULL", path);
  if (hm->nx == 0 || hm->ny == 0 || !hm->values || hm->nx > 1000 || hm->ny > 1000)
    FAIL(FP8_EINVAL, "%s: heatmap: expected 1..1000 x 1..1000 values, got %zu x %zu%s", path,
         hm->nx, hm->ny, hm->values ? "" : " (values NULL)");
  if (!hm->xlabels || !hm->ylabels)
    FAIL(FP8_EINVAL, "%s: heatmap: expected %zu x labels and %zu y labels, got NULL", path, hm->nx, hm->ny);
  if (hm->cell_format && !format_ok(hm->cell_format))
    FAIL(FP8_EINVAL, "%s: heatmap: cell_format \"%s\": expected one conversion of a double such as %%.2g",
         path, hm->cell_format);

  /* Colour range in colour-scale coordinates (log10 for a log scale). */
  double lo = INFINITY, hi = -INFINITY;
  size_t ncell = hm->nx * hm->ny;
  for (size_t i = 0; i < ncell; i++) range_add(hm->values[i], hm->logscale, &lo, &hi);
  axis av;
  if (hm->vmin < hm->vmax && (!hm->logscale || hm->vmin > 0)) {
    av.lo = hm->logscale ? log10(hm->vmin) : hm->vmin;
    av.hi = hm->logscale ? log10(hm->vmax) : hm->vmax;
    av.log = hm->logscale;
  } else if (hm->logscale) {
    ax_range(&av, 1, lo, hi, 0, 0);
  } else {
    if (!(lo <= hi)) lo = 0, hi = 1;
    if (lo == hi) lo -= 0.5, hi += 0.5;
    av.lo = lo;
    av.hi = hi;
    av.log = 0;
  }

  canvas c;
  if ((rc = canvas_begin(&c, ch, err, errlen)) != FP8_OK) return rc;

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

  /* Layout: y category labels on the left, colour bar and its labels on the right. */
  double cap = c.fs * 0.95;
  double ylw = 0;
  for (size_t i = 0; i < hm->ny; i++) ylw = fmax(ylw, text_w(hm->ylabels[i] ? hm->ylabels[i] : "", cap));
  ylw = fmin(ylw, c.W * 0.25);
  double ytitle = (ch->ylabel && *ch->ylabel) ? 2.4 * c.fs : 0;
  double xtitle = (ch->xlabel && *ch->xlabel) ? 2.4 * c.fs : 0;
  box p;
  p.t = (ch->title && *ch->title) ? 4.2 * c.fs : 1.8 * c.fs;
  p.l = 1.0 * c.fs + ytitle + ylw + 0.8 * cap;
  double bar_w = 28 * c.s, bar_gap = 24 * c.s;
  ax_ticks(&av, 600 * c.s, 3.0 * cap); /* provisional, for the label width */
  double bar_lab = (ax_label_chars(&av) * DIGIT_W + 1.0) * cap;
  double bar_title = (hm->colorbar_label && *hm->colorbar_label) ? 2.4 * c.fs : 0;
  p.r = c.W - (bar_gap + bar_w + bar_lab + bar_title + 1.0 * c.fs);
  /* Column labels: horizontal if they fit, else slanted. */
  double slot = (p.r - p.l) / (double)hm->nx, xlw = 0;
  for (size_t i = 0; i < hm->nx; i++) xlw = fmax(xlw, text_w(hm->xlabels[i] ? hm->xlabels[i] : "", cap));
  int slant = xlw > 0.95 * slot;
  double xlab_h = slant ? fmin(xlw, c.H * 0.3) * M_SQRT1_2 + 1.5 * cap : 2.2 * cap;
  p.b = c.H - (1.0 * c.fs + xlab_h + xtitle + 0.6 * c.fs);
  ax_ticks(&av, p.b - p.t, 3.0 * cap);
  double xcap = slant ? fmin(cap, slot * M_SQRT1_2 / 1.4) : cap;
  size_t xmaxc = slant ? (size_t)(c.H * 0.3 / (TEXT_CHAR_W * xcap))
                       : (size_t)(slot / (TEXT_CHAR_W * xcap)) + 1;
  if (slant) {
    size_t n0 = utf8_len(hm->xlabels[0] ? hm->xlabels[0] : "");
    fit_first_slanted(&c, &p, hm->nx, n0 < xmaxc ? n0 : xmaxc, xcap);
  }

  /* Cells. */
  plot_mode(&c, &p, 0, (double)hm->nx, 0, (double)hm->ny);
  for (size_t iy = 0; iy < hm->ny; iy++)
    for (size_t ix = 0; ix < hm->nx; ix++) {
      double v = hm->values[iy * hm->nx + ix];
      PLFLT cx[4] = {(double)ix, ix + 1.0, ix + 1.0, (double)ix};
      PLFLT cy[4] = {(double)iy, (double)iy, iy + 1.0, iy + 1.0};
      if (isnan(v)) {
        plcol0(CI_NA);
      } else {
        double t = hm->logscale ? (v > 0 ? log10(v) : -INFINITY) : v;
        double f = (t - av.lo) / (av.hi - av.lo);
        plcol1(f < 0 ? 0 : f > 1 ? 1 : f);
      }
      plfill(4, cx, cy);
    }
  /* Thin white lines between cells. */
  plcol0(CI_WHITE);
  plwidth(2.0 * c.s);
  for (size_t ix = 1; ix < hm->nx; ix++) {
    PLFLT lx[2] = {(double)ix, (double)ix}, ly[2] = {0, (double)hm->ny};
    pljoin(lx[0], ly[0], lx[1], ly[1]);
  }
  for (size_t iy = 1; iy < hm->ny; iy++) pljoin(0, (double)iy, (double)hm->nx, (double)iy);
  plcol0(CI_FG);
  plwidth(1.0 * c.s);
  plbox("bc", 0, 0, "bc", 0, 0);

  /* Cell values, sized to the cell. */
  page_mode(&c);
  double cw = (p.r - p.l) / hm->nx, chh = (p.b - p.t) / hm->ny;
  if (hm->cell_format) {
    char buf[64];
    size_t maxc = 3;
    for (size_t i = 0; i < ncell; i++) {
      snprintf(buf, sizeof buf, hm->cell_format, hm->values[i]);
      if (!isnan(hm->values[i])) maxc = utf8_len(buf) > maxc ? utf8_len(buf) : maxc;
    }
    double vcap = fmin(1.1 * c.fs, fmin(0.85 * cw / (DIGIT_W * maxc), 0.35 * chh));
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
          plain_text(tmp, 0, buf, sizeof buf);
          double t = hm->logscale ? (v > 0 ? log10(v) : -INFINITY) : v;
          double f = (t - av.lo) / (av.hi - av.lo), rgb[3];
          viridis_rgb(f < 0 ? 0 : f > 1 ? 1 : f, hm->reverse, rgb);
          double lum = 0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2];
          col = lum < 140 ? CI_WHITE : CI_FG;
        }
        text_raw(&c, p.l + (ix + 0.5) * cw, p.b - (iy + 0.5) * chh, 0, 0.5, vcap, col, buf);
      }
  } else {
    /* Still mark missing cells. */
    for (size_t iy = 0; iy < hm->ny; iy++)
      for (size_t ix = 0; ix < hm->nx; ix++)
        if (isnan(hm->values[iy * hm->nx + ix]))
          text_raw(&c, p.l + (ix + 0.5) * cw, p.b - (iy + 0.5) * chh, 0, 0.5,
                   fmin(c.fs, 0.35 * chh), CI_FG, "n/a");
  }

  /* Category labels. */
  for (size_t ix = 0; ix < hm->nx; ix++) {
    double x = p.l + (ix + 0.5) * cw;
    if (slant) text_user(&c, x, p.b + 0.9 * xcap, 45, 1.0, xcap, CI_FG, hm->xlabels[ix], xmaxc);
    else text_user(&c, x, p.b + 1.4 * cap, 0, 0.5, cap, CI_FG, hm->xlabels[ix], xmaxc);
  }
  size_t ymaxc = (size_t)(c.W * 0.25 / (TEXT_CHAR_W * cap));
  for (size_t iy = 0; iy < hm->ny; iy++)
    text_user(&c, p.l - 0.6 * cap, p.b - (iy + 0.5) * chh, 0, 1.0, cap, CI_FG, hm->ylabels[iy], ymaxc);

  /* Colour bar. */
  box cb = {p.r + bar_gap, p.r + bar_gap + bar_w, p.t, p.b};
  plot_mode(&c, &cb, 0, 1, av.lo, av.hi);
  for (int i = 0; i < 256; i++) {
    double y0 = av.lo + (av.hi - av.lo) * i / 256.0, y1 = av.lo + (av.hi - av.lo) * (i + 1) / 256.0;
    PLFLT bx[4] = {0, 1, 1, 0}, by[4] = {y0, y0, y1, y1};
    plcol1(i / 255.0);
    plfill(4, bx, by);
  }
  plcol0(CI_FG);
  plbox("bc", 0, 0, av.log ? "bcstl" : "bcst", av.log ? 1 : av.step, 0);
  page_mode(&c);
  {
    char buf[64];
    if (av.log && ax_no_ticks(&av)) {
      double ends[2] = {av.lo, av.hi};
      for (int i = 0; i < 2; i++) {
        tick_label(&av, ends[i], buf, sizeof buf);
        text_raw(&c, cb.r + 0.6 * cap, cb.b - ax_frac(&av, ends[i]) * (cb.b - cb.t), 0, 0, cap, CI_FG, buf);
      }
    }
    FOR_TICKS(&av, v) {
      tick_label(&av, v, buf, sizeof buf);
      text_raw(&c, cb.r + 0.6 * cap, cb.b - ax_frac(&av, v) * (cb.b - cb.t), 0, 0, cap, CI_FG, buf);
    }
  }
  if (bar_title)
    text_user(&c, cb.r + bar_lab + 0.5 * bar_title, (cb.t + cb.b) / 2, 90, 0.5,
              fit_cap(hm->colorbar_label, 1.1 * c.fs, cb.b - cb.t), CI_FG, hm->colorbar_label, 0);
  draw_titles(&c, &p, ch, p.b + xlab_h + 0.5 * xtitle + 0.4 * c.fs, 1.0 * c.fs + 0.5 * ytitle);
  return canvas_end(&c, FP8_OK, path, ch, err, errlen);
}

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
  int rc = check_common(path, ch, err, errlen);
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
  if ((rc = check_color(path, "histogram", 0, h->color, err, errlen)) != FP8_OK) return rc;
  for (size_t i = 0; i < nw; i++) {
    if (!isfinite(w[i].lo) || !isfinite(w[i].hi) || !(w[i].lo < w[i].hi))
      FAIL(FP8_EINVAL, "%s: window %zu: expected finite lo < hi, got %g, %g", path, i, w[i].lo, w[i].hi);
    if ((rc = check_color(path, "window", i, w[i].color, err, errlen)) != FP8_OK) return rc;
  }

  double xlo = h->edges[0], xhi = h->edges[h->nbins];
  for (size_t i = 0; i < nw; i++) {
    xlo = fmin(xlo, w[i].lo);
    xhi = fmax(xhi, w[i].hi);
  }
  double ylo = INFINITY, yhi = -INFINITY;
  for (size_t i = 0; i < h->nbins; i++) range_add(h->counts[i], ch->logy, &ylo, &yhi);
  axis ax, ay;
  ax.log = 0;
  if (ch->xmin < ch->xmax) ax.lo = ch->xmin, ax.hi = ch->xmax;
  else ax.lo = xlo, ax.hi = xhi;
  if (!ch->logy && ylo <= yhi) ylo = fmin(ylo, 0); /* bars rise from 0 */
  ax_range(&ay, ch->logy, ylo, yhi, ch->ymin, ch->ymax);
  if (!ch->logy && !(ch->ymin < ch->ymax) && ay.lo < 0 && ylo >= 0) ay.lo = 0;
  ax_bar_floor(&ay, ch, ylo, yhi);

  canvas c;
  if ((rc = canvas_begin(&c, ch, err, errlen)) != FP8_OK) return rc;
  legend L = {0};
  fp8_color bar_col = h->color ? h->color : FP8_COLOR_BLUE;
  legend_add(&L, LEG_BOX, CI_PAL + bar_col, 0, "", h->label);
  for (size_t i = 0; i < nw; i++) {
    fp8_color col = window_color(w, i);
    legend_add(&L, LEG_BOX, CI_PAL_T + col, 0, "", w[i].label);
    L.e[L.n - 1].edge = CI_PAL + col;
  }
  double xt, yt;
  box p = layout_xy(&c, ch, &ax, &ay, &L, 1, 0, &xt, &yt);
  draw_frame(&c, &p, &ax, &ay, ch->grid, 1);
  plot_mode(&c, &p, ax.lo, ax.hi, ay.lo, ay.hi);
  /* Windows: translucent bands with solid dashed edges. */
  PLINT mark = (PLINT)(6 * c.s / c.ppmm * 1000), space = mark;
  for (size_t i = 0; i < nw; i++) {
    int col = window_color(w, i);
    plcol0(CI_PAL_T + col);
    fill_rect(w[i].lo, w[i].hi, ay.lo, ay.hi);
  }
  for (size_t i = 0; i < nw; i++) {
    int col = window_color(w, i);
    plcol0(CI_PAL + col);
    plwidth(2.0 * c.s);
    plstyl(1, &mark, &space);
    pljoin(w[i].lo, ay.lo, w[i].lo, ay.hi);
    pljoin(w[i].hi, ay.lo, w[i].hi, ay.hi);
    plstyl(0, NULL, NULL);
  }
  /* Bars, with a thin white edge so that neighbours stay distinct. */
  for (size_t i = 0; i < h->nbins; i++) {
    double v = ax_map(&ay, h->counts[i]);
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
  draw_frame(&c, &p, &ax, &ay, 0, 1);
  draw_axis_labels(&c, &p, &ax, &ay, 1);
  draw_titles(&c, &p, ch, xt, yt);
  legend_draw(&c, &L, &p);
  return canvas_end(&c, FP8_OK, path, ch, err, errlen);
}

/* ------------------------------------------------------------------ grouped bars */

int fp8_plot_bars(const char *path, const fp8_chart *ch, const char *const *categories,
                  size_t ncat, const fp8_bar_series *series, size_t ns, char *err, size_t errlen) {
  int rc = check_common(path, ch, err, errlen);
  if (rc != FP8_OK) return rc;
  if (ncat == 0 || !categories) FAIL(FP8_EINVAL, "%s: bar chart: expected at least one category, got 0", path);
  if (ns == 0 || !series) FAIL(FP8_EINVAL, "%s: bar chart: expected at least one series, got 0", path);
  if (ch->logx) FAIL(FP8_EINVAL, "%s: bar chart: logx is not supported (x is categorical)", path);
  for (size_t j = 0; j < ns; j++) {
    if (!series[j].values) FAIL(FP8_EINVAL, "%s: bar series %zu: values NULL", path, j);
    if ((rc = check_color(path, "bar series", j, series[j].color, err, errlen)) != FP8_OK) return rc;
  }

  double ylo = INFINITY, yhi = -INFINITY;
  for (size_t j = 0; j < ns; j++)
    for (size_t i = 0; i < ncat; i++) range_add(series[j].values[i], ch->logy, &ylo, &yhi);
  if (!ch->logy && ylo <= yhi) ylo = fmin(ylo, 0), yhi = fmax(yhi, 0);
  axis ax = {-0.5, ncat - 0.5, 0, 1}, ay;
  ax_range(&ay, ch->logy, ylo, yhi, ch->ymin, ch->ymax);
  ax_bar_floor(&ay, ch, ylo, yhi);

  canvas c;
  if ((rc = canvas_begin(&c, ch, err, errlen)) != FP8_OK) return rc;
  legend L = {0};
  for (size_t j = 0; j < ns; j++) {
    int ci = CI_PAL + pick_color(&c, series[j].color);
    if (ns > 1) legend_add(&L, LEG_BOX, ci, 0, "", series[j].label);
  }
  /* Category labels: horizontal when they fit their slot, else slanted at 45 degrees, smaller
   * when slots are narrow, shortened beyond 40 characters (or what fits in 30% of the height). */
  double cap = c.fs * 0.95;
  double est_plot_w = c.W - 8 * c.fs - (L.n ? c.W / 3.0 : 0);
  double slot = est_plot_w / (double)ncat, lw = 0;
  for (size_t i = 0; i < ncat; i++) lw = fmax(lw, text_w(categories[i] ? categories[i] : "", cap));
  int slant = lw > 0.95 * slot;
  double xcap = slant ? fmax(fmin(cap, slot * M_SQRT1_2 / 1.3), 0.55 * cap) : cap;
  size_t maxc = 40;
  double extra = 0;
  if (slant) {
    size_t longest = 0;
    for (size_t i = 0; i < ncat; i++) {
      size_t n = utf8_len(categories[i] ? categories[i] : "");
      if (n > longest) longest = n;
    }
    size_t fitc = (size_t)(c.H * 0.3 / M_SQRT1_2 / (TEXT_CHAR_W * xcap));
    if (fitc < maxc) maxc = fitc;
    if (longest < maxc) maxc = longest;
    extra = maxc * TEXT_CHAR_W * xcap * M_SQRT1_2 + 1.0 * xcap;
  } else {
    extra = 2.2 * cap;
  }
  double xt, yt;
  box p = layout_xy(&c, ch, &ax, &ay, &L, 0, extra, &xt, &yt);
  if (slant) {
    size_t n0 = utf8_len(categories[0] ? categories[0] : "");
    fit_first_slanted(&c, &p, ncat, n0 < maxc ? n0 : maxc, xcap);
  }
  draw_frame(&c, &p, &ax, &ay, ch->grid, 0);
  plot_mode(&c, &p, ax.lo, ax.hi, ay.lo, ay.hi);
  double gw = 0.8, bw = gw / ns;
  c.auto_i = 0; /* the same automatic colours as in the legend */
  for (size_t j = 0; j < ns; j++) {
    plcol0(CI_PAL + pick_color(&c, series[j].color));
    for (size_t i = 0; i < ncat; i++) {
      double v = ax_map(&ay, series[j].values[i]);
      if (!isfinite(v)) continue;
      double base = ch->logy ? ay.lo : 0;
      double x0 = i - gw / 2 + j * bw;
      fill_rect(x0, x0 + bw, base, v);
    }
  }
  /* Zero line for bars that go negative. */
  if (!ch->logy && ay.lo < 0) {
    plcol0(CI_AXIS_GREY);
    pljoin(ax.lo, 0, ax.hi, 0);
  }
  draw_frame(&c, &p, &ax, &ay, 0, 0);
  /* Category ticks. */
  for (size_t i = 0; i < ncat; i++) {
    double tick = (ay.hi - ay.lo) * 0.012;
    plcol0(CI_FG);
    pljoin((double)i, ay.lo, (double)i, ay.lo + tick);
  }
  draw_axis_labels(&c, &p, &ax, &ay, 0);
  double pslot = (p.r - p.l) / ncat;
  for (size_t i = 0; i < ncat; i++) {
    double x = p.l + (i + 0.5) * pslot;
    if (slant) text_user(&c, x, p.b + 0.9 * xcap, 45, 1.0, xcap, CI_FG, categories[i], maxc);
    else text_user(&c, x, p.b + 1.4 * cap, 0, 0.5, cap, CI_FG, categories[i], maxc);
  }
  draw_titles(&c, &p, ch, xt, yt);
  legend_draw(&c, &L, &p);
  return canvas_end(&c, FP8_OK, path, ch, err, errlen);
}

/* LeakSanitizer (FP8LAB_SANITIZE=ON): fontconfig, pango, cairo and glib keep process-lifetime
 * caches that LSan reports as leaks; every program that draws charts links this file, so the
 * suppressions live here. The runtime calls these hooks only in sanitizer builds. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) {
  return "leak:libfontconfig.so\nleak:libpango-1.0.so\nleak:libpangoft2-1.0.so\n"
         "leak:libpangocairo-1.0.so\nleak:libcairo.so\nleak:libglib-2.0.so\n"
         "leak:libgobject-2.0.so\nleak:libharfbuzz.so\n";
}

const char *__lsan_default_options(void);
const char *__lsan_default_options(void) { return "print_suppressions=0"; }
