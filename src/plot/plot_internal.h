/* plot_internal.h: what the chart library's files share (not public). plot_canvas.c owns the
 * PLplot stream, the colours and the text primitives; plot_layout.c the axes, ticks, frame,
 * legend, titles and the placement of the plot box; plot_lines.c, plot_heatmap.c,
 * plot_stepheat.c, plot_bars.c and plot_gantt.c are the chart kinds of plot.h built from them.
 *
 * Coordinates: "page" positions are pixels from the top-left corner of the image (text is
 * placed in them, see plot_page_mode); "plotting" coordinates are the data's along an axis
 * (log10 of it on a log axis). Text sizes are cap heights in pixels. */
#ifndef FP8LAB_PLOT_PLOT_INTERNAL_H
#define FP8LAB_PLOT_PLOT_INTERNAL_H

#include <cairo.h>
#include <math.h>
#include <plplot.h>
#include <stddef.h>
#include <stdio.h>

#include "plot.h"

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
  CI_WHITE_T, /* white at alpha 0.8: a plate behind text drawn over data */
  CI_COUNT
};

/* Average character width of mixed text in cap heights (DejaVu Sans: digits 0.83, lower case
 * ~0.7; measured on rendered labels), and of tick labels (digits). */
#define TEXT_CHAR_W 0.74
#define DIGIT_W 0.85

/* Argument checks of the public functions: the message into (err, errlen), return code. */
#define FAIL(code, ...)                                                                        \
  do {                                                                                         \
    snprintf(err, errlen, __VA_ARGS__);                                                        \
    return (code);                                                                             \
  } while (0)

/* ------------------------------------------------------------------ plot_canvas.c */

typedef struct {
  int W, H;
  uint8_t *rgb;
  cairo_t *cr;   /* the stream's cairo context (on plot_canvas.c's surface) */
  PLINT prev_stream;
  int open;      /* a stream is current and not yet ended */
  double ppmm;   /* pixels per mm on the page */
  double s;      /* size factor: 1 at 1200x800 */
  double fs;     /* base text size (cap height, px) */
  size_t auto_i; /* next automatic colour */
} canvas;

/* Takes the lock, allocates the white buffer and starts a stream on it. On failure nothing is
 * held. */
int plot_canvas_begin(canvas *c, const fp8_chart *ch, char *err, size_t errlen);
/* A chart's path that draws it but writes no file (fp8_plot_warm_up). */
extern const char plot_no_file[];
/* Ends the stream, restores the caller's one, releases the lock; writes the PNG when rc is
 * FP8_OK and path is not plot_no_file. Frees the buffer in every case. */
int plot_canvas_end(canvas *c, int rc, const char *path, const fp8_chart *ch, char *err,
                    size_t errlen);
/* n pixels of a cairo RGB24 surface row (a native-order 0xXXRRGGBB word each) to r, g, b
 * bytes (3n). isa: -1 the fastest this CPU runs, 0 the generic loop, 1 SSSE3 (x86-64 only;
 * the caller checks the CPU); the same bytes whichever runs. */
void plot_xrgb_to_rgb(const uint8_t *in, uint8_t *out, size_t n, int isa);
/* want, or the next automatic colour for FP8_COLOR_AUTO. */
fp8_color plot_pick_color(canvas *c, fp8_color want);

/* Checks every chart's path, chart description and size. */
int plot_check_common(const char *path, const fp8_chart *ch, char *err, size_t errlen);
/* Checks the colour of item i of a kind ("series", "window"...). */
int plot_check_color(const char *path, const char *what, size_t i, fp8_color col, char *err,
                     size_t errlen);

void plot_text_size(const canvas *c, double cap_px);
/* Characters (not bytes) of UTF-8 text. */
size_t plot_utf8_len(const char *s);
/* Width estimate of s (characters, not PLplot escapes) at cap height cap. */
double plot_text_w(const char *s, double cap);
/* Copies user text for PLplot: '#' (PLplot's escape character) doubled, shortened to at most
 * maxchars characters with an ellipsis (maxchars 0: no limit). */
void plot_plain_text(const char *s, size_t maxchars, char *out, size_t outlen);
/* plot_plain_text, shortened in the middle: the first (maxchars - 1) / 2 characters, the
 * ellipsis, then the last characters (tensor names differ at both ends: the layer at the start,
 * the expert, the GEMM and the role at the end). */
void plot_plain_text_mid(const char *s, size_t maxchars, char *out, size_t outlen);
/* plot_plain_text, shortened at the start: an ellipsis, then the longest tail of s that
 * begins after a '.' and fits in maxchars with it ("…layers.3.self_attn.k_proj.input"); when
 * no such tail fits, the part after the last '.' whole (longer than maxchars), and without a
 * '.', the last maxchars - 1 characters. */
void plot_plain_text_start(const char *s, size_t maxchars, char *out, size_t outlen);
/* Page coordinates: one unit per pixel, origin at the bottom left, no clipping inside the page. */
void plot_page_mode(const canvas *c);
/* Draws already-escaped text at pixel (x, ytop) measured from the top-left corner, rotated by
 * angle degrees, justified by just (0 left, 0.5 centre, 1 right) along its direction and
 * centred vertically on ytop. Needs plot_page_mode. */
void plot_text_raw(const canvas *c, double x, double ytop, double angle, double just,
                   double cap, int color, const char *s);
/* plot_text_raw of user text (plot_plain_text; NULL or "" draws nothing). */
void plot_text_user(const canvas *c, double x, double ytop, double angle, double just,
                    double cap, int color, const char *s, size_t maxchars);
/* plot_text_user shortened in the middle (plot_plain_text_mid). */
void plot_text_user_mid(const canvas *c, double x, double ytop, double angle, double just,
                        double cap, int color, const char *s, size_t maxchars);
/* plot_text_user shortened at the start (plot_plain_text_start). */
void plot_text_user_start(const canvas *c, double x, double ytop, double angle, double just,
                          double cap, int color, const char *s, size_t maxchars);
/* The largest cap height <= cap at which s fits in width w (but not below 0.6*cap). */
double plot_fit_cap(const char *s, double cap, double w);

/* ------------------------------------------------------------------ plot_layout.c: axes */

typedef struct {
  double lo, hi; /* plotting coordinates (log10 of the data on a log axis) */
  int log;
  double step;   /* linear: major tick step; log: decades between labelled ticks */
} axis;

/* Maps a data value to plotting coordinates, NAN when it cannot be drawn. */
double plot_ax_map(const axis *a, double v);
/* Data range [*lo, *hi] over finite (and, for log, positive) values, updated in place. */
void plot_range_add(double v, int logscale, double *lo, double *hi);
/* Sets a's range from the data range [dlo, dhi] (dlo > dhi: no data) or the user's range, in
 * plotting coordinates: log axes snap to whole decades, linear ones get 4% padding unless a
 * bound is zero (bars, counts: they start at the axis). */
void plot_ax_range(axis *a, int logscale, double dlo, double dhi, double ulo, double uhi);
/* Bars rise from the bottom of a log axis: room below the lowest and above the highest. */
void plot_ax_bar_floor(axis *a, const fp8_chart *ch, double dlo, double dhi);
/* Tick label for plotting coordinate v (PLplot markup). */
void plot_tick_label(const axis *a, double v, char *out, size_t n);
/* Chooses the tick step so that labels of the given pixel footprint do not collide. */
void plot_ax_ticks(axis *a, double length_px, double label_px);
/* Widest tick label of a, in characters. */
double plot_ax_label_chars(const axis *a);
/* Whether a log axis has no labelled decade inside it (then its ends are labelled). */
int plot_ax_no_ticks(const axis *a);
/* Where v lies along a: 0 at lo, 1 at hi. */
double plot_ax_frac(const axis *a, double v);

/* Runs the statement after it for every labelled tick v of axis a, in plotting coordinates. */
#define FOR_TICKS(a, v)                                                                        \
  for (double v##_k = ceil((a)->lo / (a)->step - 1e-9), v;                                     \
       v = v##_k * (a)->step, v##_k <= floor((a)->hi / (a)->step + 1e-9); v##_k += 1)

/* ------------------------------------------------------------------ plot_layout.c: layout */

typedef struct {
  double l, r, t, b; /* plot box in pixels from the top-left corner */
} box;
/* The labels of a's ticks below box p (x = a's position along p, text of height cap px):
 * the charts that draw their own x axis in page pixels (Gantt, step heatmap). */
void plot_x_tick_labels(const canvas *c, const axis *a, const box *p, double cap);

/* World coordinates [xlo, xhi] x [ylo, yhi] over plot box p. */
void plot_mode(const canvas *c, const box *p, double xlo, double xhi, double ylo, double yhi);
/* Box and ticks of the plot (labels are drawn by plot_draw_axis_labels). grid: 1 for grid
 * lines; xticks: 0 for a categorical x axis. */
void plot_draw_frame(const canvas *c, const box *p, const axis *x, const axis *y, int grid,
                     int xticks);
/* The tick labels of y, and of x when xlabels. */
void plot_draw_axis_labels(const canvas *c, const box *p, const axis *x, const axis *y,
                           int xlabels);
/* Title and axis titles around plot box p. */
void plot_draw_titles(const canvas *c, const box *p, const fp8_chart *ch, double xtitle_y,
                      double ytitle_x);
/* Moves a plot box's left edge right so that the first of n slanted (45 degree, right-justified
 * at the slot centre) category labels, nchars long at cap height cap, stays on the page. */
void plot_fit_first_slanted(const canvas *c, box *p, size_t n, size_t nchars, double cap);

/* A legend entry. */
typedef enum { LEG_LINE, LEG_MARKER, LEG_BOX } leg_kind;
typedef struct {
  leg_kind kind;
  int color;        /* cmap0 index */
  int edge;         /* cmap0 index of a LEG_BOX outline (-1: none) */
  int dashed;       /* LEG_LINE */
  double width;     /* LEG_LINE width (px at 1200x800; 0: 2.5) */
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

/* Adds an entry (none for an empty label, or beyond 64 entries). */
void plot_legend_add(legend *L, leg_kind kind, int color, int dashed, const char *glyph,
                     const char *label);
/* Draws the legend right of plot box p (sized by plot_layout_xy). */
void plot_legend_draw(const canvas *c, const legend *L, const box *p);
/* Standard layout for x/y charts: margins from the title, tick labels (of the axes as ranged)
 * and legend. extra_bottom: room below the x tick labels (slanted category labels). */
box plot_layout_xy(const canvas *c, const fp8_chart *ch, axis *x, axis *y, legend *L,
                   int xnumeric, double extra_bottom, double *xtitle_y, double *ytitle_x);

/* ------------------------------------------------------------------ plot_heatmap.c */

/* A colour bar in box cb (page pixels): 256 bands of cmap1 from av->lo up to av->hi, its ticks
 * and tick labels (cap) right of it and, when label is not empty, its title bar_lab pixels
 * further right, rotated (plot_heatmap.c's and plot_stepheat.c's). */
void plot_colorbar(const canvas *c, const box *cb, const axis *av, double cap, double bar_lab,
                   const char *label);

#endif
