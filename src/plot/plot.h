/* plot.h: a small, generic chart library: line charts, heatmaps, histograms, grouped bar
 * charts and Gantt charts, drawn with PLplot into memory (the extcairo device) and written as
 * PNG with the caller's text chunks (png_io.h). It knows nothing of fp8lab's data: callers
 * pass arrays.
 *
 * Conventions shared by every chart:
 * - Size defaults to 1200x800 px; white background; text in DejaVu Sans ("sans"), scaled with
 *   the image; the legend sits outside the plot box, to the right, so it never hides data
 *   (at most 64 entries; labels beyond about a third of the width are shortened with an
 *   ellipsis). Values outside the range (given or automatic) are clipped at the plot box.
 * - Colours are the Okabe-Ito palette (fp8_plot_color), safe for colour-blind readers.
 * - A log axis (logx/logy) shows decades; values that cannot be drawn on it (NaN, +-inf,
 *   <= 0) are skipped, as NaN and +-inf are on a linear axis. A line is broken (a gap) at a
 *   skipped point rather than joined across it.
 * - Text strings are UTF-8 and drawn literally (PLplot's '#' escapes are neutralised).
 * - Every function returns an fp8 status (FP8_OK, FP8_EINVAL for bad arguments, FP8_EIO when
 *   the PNG cannot be written, FP8_ENOMEM) with a one-line message in err, and leaves no
 *   file behind on failure (written to a temporary name and renamed).
 * - Each chart uses its own PLplot stream, ended before returning: charts are independent.
 *   Calls are serialised by a mutex (PLplot's stream table is process-wide), so calling from
 *   several threads is safe but not parallel. PLplot prints nothing on normal use.
 */
#ifndef FP8LAB_PLOT_PLOT_H
#define FP8LAB_PLOT_PLOT_H

#include <stddef.h>
#include <stdint.h>

#include "png_io.h"

/** Okabe-Ito colours. FP8_COLOR_AUTO (0, what a zeroed struct holds) picks the next colour
 *  in the order orange, sky blue, bluish green, blue, vermillion, reddish purple, black,
 *  yellow (yellow last: it is faint on white). */
typedef enum {
  FP8_COLOR_AUTO = 0,
  FP8_COLOR_BLACK,     /**< #000000 */
  FP8_COLOR_ORANGE,    /**< #E69F00 */
  FP8_COLOR_SKYBLUE,   /**< #56B4E9 */
  FP8_COLOR_GREEN,     /**< #009E73 bluish green */
  FP8_COLOR_YELLOW,    /**< #F0E442 */
  FP8_COLOR_BLUE,      /**< #0072B2 */
  FP8_COLOR_VERMILLION,/**< #D55E00 */
  FP8_COLOR_PURPLE,    /**< #CC79A7 reddish purple */
  FP8_COLOR_COUNT
} fp8_color;

/** The RGB value of a colour (FP8_COLOR_AUTO gives the first automatic one, orange);
 *  FP8_EINVAL for a value outside the enum. */
int fp8_plot_color_rgb(fp8_color c, uint8_t rgb[3]);

/** Point-marker glyphs (drawn as Unicode symbols). */
typedef enum {
  FP8_MARKER_NONE = 0,
  FP8_MARKER_CIRCLE,   /**< filled circle */
  FP8_MARKER_SQUARE,   /**< filled square */
  FP8_MARKER_TRIANGLE, /**< filled triangle, pointing up */
  FP8_MARKER_DIAMOND,  /**< filled diamond */
  FP8_MARKER_CROSS,    /**< heavy x */
  FP8_MARKER_COUNT
} fp8_marker;

/** What every chart needs. Zero-initialise and fill what you use. */
typedef struct {
  const char *title;  /**< drawn above the plot (NULL: none) */
  const char *xlabel; /**< x axis label with its unit, e.g. "training step" */
  const char *ylabel; /**< y axis label with its unit, e.g. "amax (|x|)" */
  int width, height;  /**< pixels; 0 each: 1200 x 800. At least 300 x 200, at most 8000 each */
  int logx, logy;     /**< 1: log10 axis (ignored where a chart says so) */
  double xmin, xmax;  /**< x range when xmin < xmax (and > 0 on a log axis); else automatic */
  double ymin, ymax;  /**< y range, likewise */
  int grid;           /**< 1: light grey grid lines at the major ticks */
  const fp8_png_text *text; /**< text chunks written into the PNG (see png_io.h) */
  size_t ntext;
  /** Bar charts: a dashed horizontal reference line at ref_y with a legend entry, e.g. a
   *  budget (ref_label NULL: none; on a log axis ref_y must be > 0). Other charts ignore it. */
  double ref_y;
  const char *ref_label;
  /** Bar charts: printf format of one double printed above each bar (e.g. "%.3g"), for bars
   *  too close to read off the axis (NULL: none). Other charts ignore it. */
  const char *bar_format;
  /** Bar charts with logy and no ymin/ymax: a category whose every bar lies more than this
   *  many decades below the median of the other categories' bars is left out (no bar, and the
   *  axis range is chosen without it) and named with its values in a line below the chart
   *  (fp8_plot_bars_excluded). 0: none left out. Other charts ignore it. */
  double log_exclude;
  /** Line charts with a linear y axis and no ymin/ymax: the axis spans at least this many
   *  units, centred on the data's range, so that a small difference (a 0.5 dB dip) is not
   *  magnified to the whole height (0: the data's range). Other charts ignore it. */
  double min_yspan;
} fp8_chart;

/** How a series joins its points. */
typedef enum {
  FP8_STYLE_LINE = 0, /**< straight segments */
  FP8_STYLE_STEP,     /**< steps: y[i] holds from x[i] to x[i+1] (a "post" step) */
  FP8_STYLE_POINTS    /**< markers only (marker NONE means circles) */
} fp8_style;

/** One line-chart series: n points (x[i], y[i]), x ascending for LINE and STEP. */
typedef struct {
  const double *x, *y;
  size_t n;
  const char *label;  /**< legend text (NULL or "": no legend entry) */
  fp8_color color;
  fp8_style style;
  fp8_marker marker;  /**< a marker at every point (NONE: none) */
  int dashed;         /**< 1: dashed line */
  double width;       /**< line width in pixels at 1200x800, scaled with the image (0: 2.5);
                           draw wide series first so that a narrower one on top of an equal
                           one stays visible (the legend sample has the same width) */
} fp8_series;

/** Annotations on a line chart: with y == NULL, vertical lines at x[0..n) (dashed); else
 *  marker symbols at (x[i], y[i]), e.g. the steps where a tensor overflowed. */
typedef struct {
  const double *x, *y;
  size_t n;
  const char *label;  /**< one legend entry for all of them (NULL: none) */
  fp8_color color;    /**< AUTO: vermillion */
  fp8_marker marker;  /**< for points; NONE: cross */
} fp8_markers;

/**
 * Loads PLplot's cairo driver and the libraries behind it (a tenth of a report's plotting
 * time) by drawing lines into memory and discarding them, so that a caller can do it on
 * another thread while it reads its data. Draws no text, so it starts no thread of its own
 * (pango's font map does, at the first text). Safe with other charts (the same mutex).
 * FP8_OK, or the chart's error.
 */
int fp8_plot_warm_up(char *err, size_t errlen);

/**
 * Line chart of ns series (ns >= 1, each n >= 1) plus nm annotation sets (m may be NULL when
 * nm is 0), written as a PNG at path.
 */
int fp8_plot_lines(const char *path, const fp8_chart *chart, const fp8_series *series,
                   size_t ns, const fp8_markers *marks, size_t nm, char *err, size_t errlen);

/** A heatmap: ny rows by nx columns of values, with categorical labels. */
typedef struct {
  size_t nx, ny;
  const char *const *xlabels; /**< nx column labels, left to right */
  const char *const *ylabels; /**< ny row labels, bottom to top */
  const double *values;       /**< ny*nx values, row-major: values[iy*nx + ix], row 0 at the
                                   bottom. NaN: a grey "n/a" cell */
  const char *cell_format;    /**< printf format of one double for the value printed in each
                                   cell, e.g. "%.2g" (NULL: no values printed) */
  const char *colorbar_label; /**< label of the colour bar, with its unit */
  int logscale;               /**< 1: log10 colour scale (values <= 0 take the lowest colour
                                   and are printed as they are) */
  double vmin, vmax;          /**< colour range when vmin < vmax (values beyond take the end
                                   colours); else the data range (whole decades when log) */
  int reverse;                /**< 1: reversed viridis (dark = low becomes dark = high) */
  /** A budget, when budget_label is not NULL (e.g. "value budget 1e-05": it names the budget
   *  in the colour bar's label, so that the plot reads without its caption): the cells whose
   *  budget value is <= budget are outlined, and the colour bar has a line at the budget (when
   *  it lies in the bar's range). The budget value of cell i is budget_values[i], or values[i]
   *  when budget_values is NULL (a cell may show one quantity and be judged by another: a
   *  role's pooled rate, outlined when its worst tensor is within the budget). */
  double budget;
  const char *budget_label;
  const double *budget_values;
} fp8_heatmap;

/**
 * Heatmap with a viridis colour scale (perceptually uniform, colour-blind safe), the value
 * printed in each cell (white on dark cells, black on light ones) and a colour bar on the
 * right. Uses chart's title, xlabel, ylabel, size and text; logx/logy and ranges are ignored.
 */
int fp8_plot_heatmap(const char *path, const fp8_chart *chart, const fp8_heatmap *heat,
                     char *err, size_t errlen);

/** A heatmap over a numeric x axis (e.g. every training step): ny labelled rows by nx columns,
 *  too many to print values in, coloured on a threshold scale: values <= threshold are
 *  "quiet" (blue, from a mid blue at vmin to a light blue at the threshold: never the white or
 *  grey of a cell without a value), values above it "loud" (orange just above it, through
 *  vermillion to dark red at vmax), so that any value past the threshold stands out, however
 *  little. Two kinds of cell sit outside the scale, each named in a key below the x axis when
 *  the chart has one: NaN cells (no value) are hatched (grey diagonal lines on white), and,
 *  with a band, values in (threshold, band] take yellow (an overflow that cost nothing, such as
 *  one that only rounding reached). */
typedef struct {
  size_t nx, ny;
  const double *x;            /**< nx column positions, strictly ascending: column ix spans
                                   [x[ix], x[ix+1]), the last one as wide as the one before
                                   (1 when nx is 1) */
  const char *const *ylabels; /**< ny row labels, bottom to top */
  const double *values;       /**< ny*nx, row-major (values[iy*nx + ix], row 0 at the bottom);
                                   NaN: a grey cell (no value); -inf: vmin, +inf: vmax */
  double threshold;           /**< the boundary between quiet and loud values */
  double vmin, vmax;          /**< colour range, vmin <= threshold < vmax (values beyond take
                                   the end colours); vmin >= vmax: the data's, widened to
                                   contain threshold and threshold + 1 */
  const char *colorbar_label; /**< with its unit */
  int integer_x;              /**< 1: x ticks at whole numbers only (categories numbered 0, 1,
                                   ..., such as experts, centred on x = k: columns at k - 0.5) */
  /** With band_label (NULL: no band): values in (threshold, band] are drawn yellow, apart from
   *  the loud scale, and the key names them band_label (e.g. "overflow by rounding only");
   *  band > threshold. The caller puts a cell into the band or out of it by its value. */
  double band;
  const char *band_label;
  /** The key's text for the hatched NaN cells (NULL: "no value"), shown when a cell is NaN. */
  const char *nan_label;
} fp8_step_heatmap;

/**
 * Heatmap over a numeric x axis (fp8_step_heatmap): cells without printed values, x ticks of
 * the numeric axis, row labels on the left (smaller when rows are thin), the colour bar on the
 * right with a line at the threshold. Uses chart's title, xlabel, ylabel, size and text;
 * logx/logy and ranges are ignored. With more columns than the plot is pixels wide, each
 * pixel column shows the largest value of the columns it covers (NaN only when all are), so
 * that no loud value is hidden by its neighbours. At most 10^7 columns and 1000 rows. A row
 * label too long for the left margin is shortened at its start, at a '.' (an ellipsis, then
 * the name's last dotted parts: "…layers.3.self_attn.k_proj.input"), so that the end of a
 * tensor's name (its GEMM and role) stays whole; the last part is kept whole even when it
 * alone is too long.
 */
int fp8_plot_step_heatmap(const char *path, const fp8_chart *chart, const fp8_step_heatmap *heat,
                          char *err, size_t errlen);

/** A shaded vertical band [lo, hi) drawn behind a histogram's bars. */
typedef struct {
  double lo, hi;
  const char *label; /**< legend text, e.g. "E4M3 range at scale 2^-3" */
  fp8_color color;   /**< drawn translucent, edges dashed (AUTO: sky blue, orange, green,
                          purple, yellow, vermillion by position) */
  double y0, y1;     /**< the shaded part as fractions of the plot height from the bottom,
                          0 <= y0 < y1 <= 1 (0, 0: the full height): windows that nearly
                          coincide drawn as bands at different heights stay apart. The edges
                          are drawn over the full height either way */
  int solid;         /**< 1: solid edge lines (else dashed), to tell two windows' edges apart */
} fp8_window;

/** Histogram: nbins bars, bin i covering [edges[i], edges[i+1]) (edges ascending). */
typedef struct {
  size_t nbins;
  const double *edges;  /**< nbins + 1 edges */
  const double *counts; /**< nbins counts (>= 0; NaN: no bar) */
  const char *label;    /**< legend text for the bars (NULL: none) */
  fp8_color color;      /**< AUTO: blue */
} fp8_hist;

/**
 * Histogram with nw shaded windows (w may be NULL when nw is 0) behind the bars. With logy,
 * empty bins draw nothing and bars rise from the bottom of the axis. logx is refused
 * (FP8_EINVAL): take the log of the bin edges instead (e.g. bins of log2|x|).
 */
int fp8_plot_histogram(const char *path, const fp8_chart *chart, const fp8_hist *hist,
                       const fp8_window *w, size_t nw, char *err, size_t errlen);

/** One series of a grouped bar chart: values[ncat], one per category (NaN: no bar). */
typedef struct {
  const double *values;
  const char *label;
  fp8_color color;
} fp8_bar_series;

/**
 * Grouped bar chart: ncat categories along x, ns bars in each (side by side, in series
 * order). Long category labels are drawn slanted at 45 degrees and shortened with an ellipsis
 * beyond 40 characters. With logy, values <= 0 draw no bar. logx is refused (FP8_EINVAL).
 * Value labels (bar_format) stand upright, centred on their bar, inside the frame: without a
 * user ymax the axis is raised until every label fits above its bar (a label longer than 40%
 * of the plot height is left out); a label that would still cross the frame (user range) or
 * touch a label already drawn is left out, never drawn over the frame or another label.
 * A legend is drawn only for two or more series (one series: say what it is in ylabel).
 */
int fp8_plot_bars(const char *path, const fp8_chart *chart, const char *const *categories,
                  size_t ncat, const fp8_bar_series *series, size_t ns, char *err,
                  size_t errlen);

/**
 * The categories fp8_plot_bars leaves out of a log axis (chart->log_exclude): excluded[i] = 1
 * for category i when every one of its bars (positive finite values) lies more than
 * log_exclude decades below the median of log10 of the other categories' bars, else 0; the
 * number left out. None is left out when the chart is not logy, has ymin < ymax, log_exclude
 * is not > 0, or when half the categories or more would be (then no "others" to judge by).
 * With note (noteLen > 0): the line drawn below the chart, "not drawn (more than N decades
 * below the others): NAME (v1, v2, ...); ...", or "" when none is left out.
 */
size_t fp8_plot_bars_excluded(const fp8_chart *chart, const char *const *categories,
                              size_t ncat, const fp8_bar_series *series, size_t ns,
                              unsigned char *excluded, char *note, size_t noteLen);

/** One bar of a Gantt chart: [start, end) on lane `lane`, coloured by its kind. */
typedef struct {
  double start, end; /**< x units (e.g. microseconds); finite, end >= start */
  size_t lane;       /**< < nlanes */
  size_t kind;       /**< < nkinds */
} fp8_gantt_bar;

/** A Gantt chart: nbars intervals on nlanes horizontal lanes (e.g. a GPU's streams), each bar
 *  coloured by its kind. */
typedef struct {
  size_t nlanes;                  /**< 1..64 */
  const char *const *lane_labels; /**< nlanes, drawn left of the lanes, lane 0 at the TOP
                                       (NULL entries: unlabelled); shortened with an ellipsis
                                       beyond 40 characters or a quarter of the width */
  const char *const *lane_notes;  /**< nlanes or NULL (NULL entries: none): text drawn right of
                                       each lane's last drawn bar where it fits, else at the
                                       right edge inside the box on a translucent white plate
                                       (e.g. "step 455.2 ms, exposed 0.05 ms") */
  size_t nkinds;                  /**< 0..64 (0 only without bars) */
  const char *const *kind_labels; /**< nkinds legend entries (NULL or "": none); the legend
                                       lists only kinds among the drawn bars */
  const fp8_color *kind_colors;   /**< nkinds, or NULL: automatic in kind order (an AUTO entry
                                       takes the next automatic colour); colours repeat beyond 8 */
  size_t nbars;                   /**< 0..1000000 */
  const fp8_gantt_bar *bars;      /**< drawn in this order (later over earlier) ... */
  double min_bar_px;              /**< bars narrower than this many pixels (at 1200 px width,
                                       scaled with it) are drawn this wide, centred on their
                                       middle, so that microsecond ops stay visible in a step
                                       of hundreds of milliseconds (0: 2 px; at most 100) */
  const size_t *top_kinds;        /**< ... except bars of these kinds, drawn last, in this
                                       order (e.g. the rare tiny ones); NULL: none */
  size_t ntop;
  size_t ngroups;                 /**< lanes come in groups of this many (0 or 1: no groups): a
                                       thin grey line between groups, e.g. 2 lanes (compute,
                                       side) per mode */
  int widen_top_only;             /**< 1: only bars of top_kinds are widened to min_bar_px; the
                                       others keep their width, edges snapped to the nearest
                                       pixel (a sliver narrower than half a pixel may vanish,
                                       so that many of them sum to their true share) */
} fp8_gantt;

/**
 * Gantt chart: the lanes top to bottom over a linear x axis, bars 70% of a lane high, those
 * wide enough (4 px) inset by a 1 px gap at each end so that back-to-back ops of one lane
 * stay apart. Uses chart's title, xlabel, ylabel (beside the lane labels), size, text, grid
 * (vertical lines only) and xmin/xmax: when xmin < xmax a zoomed window (bars outside it are
 * not drawn, bars across its edges are clipped at the box); else the bars' range. logx is
 * refused (FP8_EINVAL: durations would not compare); logy, ymin/ymax, ref_* and bar_format
 * are ignored.
 */
int fp8_plot_gantt(const char *path, const fp8_chart *chart, const fp8_gantt *g, char *err,
                   size_t errlen);

#endif
