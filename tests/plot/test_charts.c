/* test_charts.c: the charts of src/plot (line, heatmap, step heatmap, histogram, bars). Each chart
 * is written to a temporary directory and read back with libpng: size, text chunks, and pixels
 * where the layout guarantees something (plot boxes span most of the page, so a point at a given
 * fraction of the data range lies in a known band of pixels): background corners white, a bar's or
 * cell's inside in its exact fill colour. Errors: no file is left behind. */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plot.h"
#include "testutil.h"
#include "plot_helpers.h"
#include "tu_dir.h"

/* The warm-up draws a chart and writes nothing: no file under its sentinel name, in the
 * working directory or anywhere we look; a chart after it is the same as one without it
 * (the same bytes as a chart drawn in a fresh process, test_report's --jobs comparison). */
START_TEST(test_warm_up_writes_nothing) {
  char cwd[4096];
  ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
  ck_assert_int_eq(chdir(g_dir), 0);
  int rc = fp8_plot_warm_up(err, sizeof err);
  ck_assert_int_eq(chdir(cwd), 0);
  ck_assert_msg(rc == FP8_OK, "%s", err);
  DIR *d = opendir(g_dir);
  ck_assert_ptr_nonnull(d);
  int entries = 0;
  for (struct dirent *e; (e = readdir(d));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) entries++;
  closedir(d);
  ck_assert_int_eq(entries, 0);
}
END_TEST

START_TEST(test_palette) {
  uint8_t rgb[3];
  static const uint8_t expect[][3] = {{0, 0, 0},     {0xE6, 0x9F, 0x00}, {0x56, 0xB4, 0xE9},
                                      {0x00, 0x9E, 0x73}, {0xF0, 0xE4, 0x42}, {0x00, 0x72, 0xB2},
                                      {0xD5, 0x5E, 0x00}, {0xCC, 0x79, 0xA7}};
  for (int c = FP8_COLOR_BLACK; c < FP8_COLOR_COUNT; c++) {
    ck_assert_int_eq(fp8_plot_color_rgb((fp8_color)c, rgb), FP8_OK);
    ck_assert_mem_eq(rgb, expect[c - 1], 3);
  }
  ck_assert_int_eq(fp8_plot_color_rgb(FP8_COLOR_COUNT, rgb), FP8_EINVAL);
}
END_TEST

/* ------------------------------------------------------------------ line chart */

START_TEST(test_line_chart) {
  enum { N = 11 };
  double x[N], y[N];
  for (int i = 0; i < N; i++) x[i] = i, y[i] = 1.0;
  fp8_series s = {x, y, N, "constant", FP8_COLOR_ORANGE, FP8_STYLE_LINE, 0, 0, 0};
  double mx[1] = {5}, my[1] = {1.5};
  fp8_markers m = {mx, my, 1, "overflow", FP8_COLOR_VERMILLION, FP8_MARKER_SQUARE};
  fp8_chart c = base_chart("a flat line");
  c.ymin = 0;
  c.ymax = 2;
  const char *p = path_in("line.png");
  ck_assert_msg(fp8_plot_lines(p, &c, &s, 1, &m, 1, err, sizeof err) == FP8_OK, "%s", err);
  assert_info(p, 1200, 800);
  image im = load(p);
  assert_corners_white(&im);
  /* The line (y = 1, half the range) crosses the middle column near the middle row: the plot
   * box's top and bottom margins differ by less than 100 px. */
  uint8_t orange[3], verm[3];
  fp8_plot_color_rgb(FP8_COLOR_ORANGE, orange);
  fp8_plot_color_rgb(FP8_COLOR_VERMILLION, verm);
  ck_assert_int_gt(count_color(&im, 300, 340, 500, 460, orange, 10), 200);
  ck_assert_int_eq(count_color(&im, 300, 100, 500, 300, orange, 10), 0);
  /* The square marker at (5, 1.5): a quarter of the plot height above the line. */
  ck_assert_int_gt(count_color(&im, 450, 180, 750, 330, verm, 10), 20);
  free(im.rgb);
}
END_TEST

START_TEST(test_line_log_skips_bad_values) {
  double x[6] = {1, 2, 3, 4, 5, 6}, y[6] = {1e-3, NAN, -1, 0, INFINITY, 1e3};
  double x2[3] = {-1, 10, 100}, y2[3] = {1, 10, 100};
  fp8_series s[2] = {{x, y, 6, "with gaps", 0, FP8_STYLE_STEP, FP8_MARKER_CIRCLE, 0, 0},
                     {x2, y2, 3, "points", 0, FP8_STYLE_POINTS, 0, 1, 0}};
  double vx[2] = {3, NAN};
  fp8_markers m = {vx, NULL, 2, "event", 0, 0};
  fp8_chart c = base_chart("log axes");
  c.logx = c.logy = 1;
  c.grid = 1;
  const char *p = path_in("log.png");
  ck_assert_msg(fp8_plot_lines(p, &c, s, 2, &m, 1, err, sizeof err) == FP8_OK, "%s", err);
  assert_info(p, 1200, 800);
  /* Nothing drawable at all still makes a chart (empty axes). */
  double bad[2] = {NAN, -1};
  fp8_series e = {bad, bad, 2, "nothing", 0, 0, 0, 0, 0};
  ck_assert_msg(fp8_plot_lines(path_in("empty.png"), &c, &e, 1, NULL, 0, err, sizeof err) == FP8_OK,
                "%s", err);
}
END_TEST

/* ------------------------------------------------------------------ heatmap */

START_TEST(test_heatmap_single_high_cell) {
  const char *xl[] = {"1", "16", "128"}, *yl[] = {"0", "1", "2"};
  double v[9] = {0, 0, 0, 0, 1, 0, 0, 0, 0};
  fp8_heatmap h = {3, 3, xl, yl, v, NULL, "rate (fraction)", 0, 0, 0, 0, 0, NULL, NULL};
  fp8_chart c = base_chart("one high cell");
  c.xlabel = "history length (steps)";
  c.ylabel = "margin";
  const char *p = path_in("heat.png");
  ck_assert_msg(fp8_plot_heatmap(p, &c, &h, err, sizeof err) == FP8_OK, "%s", err);
  assert_info(p, 1200, 800);
  image im = load(p);
  assert_corners_white(&im);
  /* The plot box spans at least x 150..900, y 60..700: the middle cell holds (540, 390), the
   * left-middle cell (200, 390) and the top-middle cell (540, 120). viridis ends: low
   * #440154, high #FDE725. */
  assert_color(&im, 540, 390, 0xFD, 0xE7, 0x25, 2);
  assert_color(&im, 200, 390, 0x44, 0x01, 0x54, 2);
  assert_color(&im, 540, 120, 0x44, 0x01, 0x54, 2);
  free(im.rgb);
}
END_TEST

START_TEST(test_heatmap_log_nan_text) {
  const char *xl[] = {"1", "16", "128", "1024"}, *yl[] = {"0", "1", "2"};
  double v[12] = {1e-5, 3e-5, 2e-4, 1e-3, 0, 1e-6, 5e-6, NAN, 2e-7, 0.5, 1e-6, 2e-6};
  fp8_heatmap h = {4, 3, xl, yl, v, "%.2g", "overflow rate", 1, 0, 0, 1, 0, NULL, NULL};
  fp8_chart c = base_chart("log colour scale");
  c.width = 1400;
  c.height = 900;
  const char *p = path_in("heatlog.png");
  ck_assert_msg(fp8_plot_heatmap(p, &c, &h, err, sizeof err) == FP8_OK, "%s", err);
  assert_info(p, 1400, 900);
  image im = load(p);
  assert_corners_white(&im);
  /* The NaN cell (column 3, row 1 = middle row) is grey away from its "n/a" text. The plot
   * box spans at least x 180..1050 and y 70..780 here: column 3 holds x 1000, and the middle
   * row y 380..470 when the box is at its largest and smallest. */
  uint8_t grey[3] = {190, 190, 190};
  ck_assert_int_gt(count_color(&im, 990, 360, 1010, 480, grey, 1), 600);
  free(im.rgb);
}
END_TEST

/* ------------------------------------------------------------------ step heatmap */

/* 4 rows x 100 steps on a threshold scale [-4, 4] around 0: quiet -2 everywhere but a barely
 * loud +0.02 block (row 2, steps 40..59), a block beyond vmax (row 3, steps 0..29) and missing
 * values (row 0, steps 80..99). */
START_TEST(test_step_heatmap) {
  enum { NX = 100, NY = 4 };
  double x[NX], v[NY * NX];
  for (int i = 0; i < NX; i++) x[i] = i;
  for (int i = 0; i < NY * NX; i++) v[i] = -2;
  for (int i = 40; i < 60; i++) v[2 * NX + i] = 0.02;
  for (int i = 0; i < 30; i++) v[3 * NX + i] = 10;
  for (int i = 80; i < NX; i++) v[i] = NAN;
  const char *yl[NY] = {"layers.0.fc1.input", "layers.1.fc1.input", "layers.2.fc1.input",
                        "layers.3.fc1.input"};
  fp8_step_heatmap h = {NX, NY, x, yl, v, 0, -4, 4, "overshoot (binades)", 0, 0, NULL, NULL};
  fp8_chart c = base_chart("overshoot per step");
  c.ylabel = "tensor";
  const char *p = path_in("stepheat.png");
  ck_assert_msg(fp8_plot_step_heatmap(p, &c, &h, err, sizeof err) == FP8_OK, "%s", err);
  assert_info(p, 1200, 800);
  image im = load(p);
  assert_corners_white(&im);
  /* The cells span at least x 250..950, y 80..680 and at most x 100..1100, y 60..720: steps
   * 40..59 of row 2 hold (590, 306), row 1 (590, 464), steps 80..99 of row 0 (925, 620),
   * steps 0..29 of row 3 (300, 150). Just above the threshold is already orange (#E69F00);
   * -2 is halfway from the quiet end (66,116,170) to (158,202,236); beyond vmax dark red; a
   * missing value hatched: white and grey (150) pixels, both within a few pixels. */
  assert_color(&im, 590, 306, 230, 159, 0, 4);
  assert_color(&im, 590, 464, 112, 159, 203, 3);
  int white = 0, grey = 0;
  for (int dy = -4; dy <= 4; dy++)
    for (int dx = -4; dx <= 4; dx++) {
      white += near(px(&im, 925 + dx, 620 + dy), 255, 255, 255, 1);
      grey += near(px(&im, 925 + dx, 620 + dy), 150, 150, 150, 1);
    }
  ck_assert_msg(white > 20 && grey > 10 && white + grey == 81, "hatching: %d white, %d grey of 81",
                white, grey);
  assert_color(&im, 300, 150, 111, 1, 10, 3);
  free(im.rgb);

  /* automatic range: the data's with the threshold; one column; errors */
  fp8_step_heatmap one = {1, NY, x, yl, v, 0, 0, 0, NULL, 0, 0, NULL, NULL};
  ck_assert_msg(fp8_plot_step_heatmap(path_in("one.png"), &c, &one, err, sizeof err) == FP8_OK, "%s", err);
  double xd[3] = {0, 2, 1};
  fp8_step_heatmap bad = {3, 1, xd, yl, v, 0, 0, 0, NULL, 0, 0, NULL, NULL};
  ck_assert_int_eq(fp8_plot_step_heatmap(path_in("bad.png"), &c, &bad, err, sizeof err), FP8_EINVAL);
  fp8_step_heatmap badr = {NX, NY, x, yl, v, 5, -4, 4, NULL, 0, 0, NULL, NULL}; /* threshold outside the range */
  ck_assert_int_eq(fp8_plot_step_heatmap(path_in("bad.png"), &c, &badr, err, sizeof err), FP8_EINVAL);
}
END_TEST

/* 10,000 steps on a plot about 1,000 pixels wide: about ten steps share a pixel column. Row 0
 * quiet (-2) everywhere; row 1 quiet but for one loud step (+3 at step 5,123, not the last of
 * its pixel's steps); row 2 missing (NaN) but for that one step, also +3. Each pixel column
 * must show the largest of its steps: the loud step appears in rows 1 and 2, at its x, one or
 * two pixels wide, and nowhere else; a plot drawn step by step would leave the pixel the
 * colour of its last step (quiet), and the event would vanish. */
START_TEST(test_step_heatmap_many_steps) {
  enum { NX = 10000, NY = 3, EV = 5123 };
  double *x = malloc(NX * sizeof *x), *v = malloc(NY * NX * sizeof *v);
  ck_assert(x && v);
  for (int i = 0; i < NX; i++) {
    x[i] = i;
    v[i] = -2;
    v[NX + i] = i == EV ? 3 : -2;
    v[2 * NX + i] = i == EV ? 3 : NAN;
  }
  const char *yl[NY] = {"layers.0.fc1.input", "layers.1.fc1.input", "layers.2.fc1.input"};
  fp8_step_heatmap h = {NX, NY, x, yl, v, 0, -4, 4, "overshoot (binades)", 0, 0, NULL, NULL};
  fp8_chart c = base_chart("one loud step among 10,000");
  const char *p = path_in("stepheat_many.png");
  ck_assert_msg(fp8_plot_step_heatmap(p, &c, &h, err, sizeof err) == FP8_OK, "%s", err);
  image im = load(p);
  /* the quiet colour of -2 (as in test_step_heatmap) along row 0 (the bottom row) gives the
   * cells' x extent; rows are thirds of the cells' height */
  const uint8_t quiet[3] = {112, 159, 203};
  int qx0 = -1, qx1 = -1, y0 = -1, y1 = -1;
  for (int y = im.h - 1; y >= 0 && y1 < 0; y--) /* the bottom row's lowest line of cells */
    if (longest_run(&im, y, quiet, 3, &qx0, &qx1) > im.w / 2) y1 = y;
  ck_assert_msg(y1 > 0, "no row of quiet cells found");
  for (int y = y1; y >= 0 && near(px(&im, (qx0 + qx1) / 2, y), 112, 159, 203, 3); y--) y0 = y;
  int rowh = y1 - y0 + 1; /* row 0's height (the white lines between rows: a pixel or two) */
  ck_assert_int_ge(rowh, 50);
  double ex = qx0 + (EV + 0.5) / NX * (qx1 - qx0 + 1);
  /* loud pixels (orange to dark red: much more red than blue) inside the cells */
  int nloud[NY] = {0, 0, 0};
  for (int y = y0 - 3 * rowh; y <= y1; y++) {
    if (y < 0) continue;
    for (int xx = qx0; xx <= qx1; xx++) {
      const uint8_t *q = px(&im, xx, y);
      if (!(q[0] > 90 && q[0] > q[2] + 60 && q[1] < 180)) continue;
      int row = (y1 - y) / (rowh + 2);
      ck_assert_msg(fabs(xx - ex) <= 2.5, "a loud pixel at x %d (row %d), the event is at x %.1f",
                    xx, row, ex);
      if (row >= 0 && row < NY) nloud[row]++;
    }
  }
  ck_assert_msg(nloud[0] == 0 && nloud[1] >= rowh / 2 && nloud[2] >= rowh / 2,
                "loud pixels per row: %d, %d, %d (row height %d)", nloud[0], nloud[1], nloud[2], rowh);
  free(im.rgb);
  free(x);
  free(v);
}
END_TEST

/* A title far too long for a tall, narrow chart (its text scales with the height): shrunk and,
 * past that, cut, it stays off the page's left and right 12 pixels, where it used to run. */
START_TEST(test_long_title_fits) {
  enum { NX = 10, NY = 2 };
  double x[NX], v[NY * NX];
  for (int i = 0; i < NX; i++) x[i] = i, v[i] = v[NX + i] = -1;
  const char *yl[NY] = {"a", "b"};
  fp8_step_heatmap h = {NX, NY, x, yl, v, 0, -4, 4, NULL, 0, 0, NULL, NULL};
  fp8_chart c = base_chart("input tensors under delayed L=1024 m=0 max: overshoot per step (> 0: "
                           "the largest element saturated) and then a good deal more words");
  c.width = 1400;
  c.height = 2400;
  const char *p = path_in("longtitle.png");
  ck_assert_msg(fp8_plot_step_heatmap(p, &c, &h, err, sizeof err) == FP8_OK, "%s", err);
  image im = load(p);
  long dark = 0, edge = 0;
  for (int y = 0; y < 120; y++)
    for (int xx = 0; xx < im.w; xx++) {
      const uint8_t *q = px(&im, xx, y);
      int ink = q[0] < 128 && q[1] < 128 && q[2] < 128;
      dark += ink;
      edge += ink && (xx < 12 || xx >= im.w - 12);
    }
  ck_assert_msg(dark > 500, "no title drawn (%ld dark pixels)", dark);
  ck_assert_msg(edge == 0, "%ld title pixels within 12 px of the page's sides", edge);
  free(im.rgb);
}
END_TEST

/* ------------------------------------------------------------------ histogram */

START_TEST(test_histogram) {
  double edges[11], counts[10] = {0};
  for (int i = 0; i <= 10; i++) edges[i] = i;
  counts[5] = 100;
  fp8_window w = {0, 2, "E4M3 range", FP8_COLOR_SKYBLUE, 0, 0, 0};
  fp8_hist hist = {10, edges, counts, NULL, FP8_COLOR_BLUE};
  fp8_chart c = base_chart("one tall bar");
  c.xlabel = "log2 |x|";
  c.ylabel = "count";
  const char *p = path_in("hist.png");
  for (int logy = 0; logy < 2; logy++) {
    c.logy = logy;
    ck_assert_msg(fp8_plot_histogram(p, &c, &hist, &w, 1, err, sizeof err) == FP8_OK, "%s", err);
    assert_info(p, 1200, 800);
    image im = load(p);
    assert_corners_white(&im);
    /* Along row 500 (inside the plot, below the bar's top on both scales): the window [0, 2)
     * in sky blue at 25% over white from the plot's left edge, then white, then bin 5 solid
     * blue. Geometry: the window is 2 bins wide, the bar 1 bin, its centre 5.5 bins from the
     * window's left edge (give or take the lines drawn on the edges: the frame, the window's
     * dashed edges, the bars' white outline, a few pixels each). */
    uint8_t blue[3], win[3] = {213, 236, 250};
    fp8_plot_color_rgb(FP8_COLOR_BLUE, blue);
    int b0, b1, w0, w1;
    ck_assert_msg(longest_run(&im, 500, blue, 2, &b0, &b1) > 40, "no bar on row 500");
    ck_assert_msg(longest_run(&im, 500, win, 3, &w0, &w1) > 80, "no window on row 500");
    double bin = (w1 - w0 + 1) / 2.0;
    ck_assert_msg(fabs((b1 - b0 + 1) - bin) < 0.1 * bin, "bar %d..%d, window %d..%d", b0, b1, w0, w1);
    ck_assert_msg(fabs((b0 + b1 + 1) / 2.0 - w0 - 5.5 * bin) < 0.12 * bin, "bar %d..%d, window %d..%d",
                  b0, b1, w0, w1);
    assert_color(&im, (int)(w0 + 3.5 * bin), 500, 255, 255, 255, 0); /* empty bin 3 */
    free(im.rgb);
  }
  /* The window as a band in the top fifth of the plot (rows ~70..190): shaded on row 120,
   * not on row 500; its solid edges still run the full height. */
  w.y0 = 0.8;
  w.y1 = 1;
  w.solid = 1;
  c.logy = 0;
  ck_assert_msg(fp8_plot_histogram(p, &c, &hist, &w, 1, err, sizeof err) == FP8_OK, "%s", err);
  image im = load(p);
  uint8_t win[3] = {213, 236, 250}, sky[3];
  fp8_plot_color_rgb(FP8_COLOR_SKYBLUE, sky);
  int w0, w1;
  ck_assert_msg(longest_run(&im, 120, win, 3, &w0, &w1) > 80, "no band on row 120");
  ck_assert_msg(longest_run(&im, 500, win, 3, &w0, &w1) < 10, "band reaches row 500");
  /* the right edge solid through rows 450..550 (the left one lies under the frame) */
  ck_assert_int_ge(count_color(&im, 0, 450, 1200, 550, sky, 2), 100);
  free(im.rgb);
}
END_TEST

/* ------------------------------------------------------------------ bars */

START_TEST(test_bars) {
  const char *cats[] = {"layers.0.fc1.input", "a much longer category label that needs slanting",
                        "x"};
  double a[3] = {1, 2, NAN}, b[3] = {0.5, 4, 1};
  fp8_bar_series s[2] = {{a, "delayed", FP8_COLOR_ORANGE}, {b, "current", FP8_COLOR_SKYBLUE}};
  fp8_chart c = base_chart("grouped");
  c.xlabel = "tensor";
  const char *p = path_in("bars.png");
  ck_assert_msg(fp8_plot_bars(p, &c, cats, 3, s, 2, err, sizeof err) == FP8_OK, "%s", err);
  assert_info(p, 1200, 800);
  image im = load(p);
  assert_corners_white(&im);
  uint8_t orange[3], sky[3];
  fp8_plot_color_rgb(FP8_COLOR_ORANGE, orange);
  fp8_plot_color_rgb(FP8_COLOR_SKYBLUE, sky);
  long no = count_color(&im, 0, 0, im.w, im.h, orange, 2);
  long ns = count_color(&im, 0, 0, im.w, im.h, sky, 2);
  /* Bars have equal widths: sky blue (0.5 + 4 + 1 = 5.5) covers more than orange (1 + 2 = 3);
   * both are substantial areas. */
  ck_assert_int_gt(no, 10000);
  ck_assert_int_gt(ns, no);
  free(im.rgb);

  /* Single series, log y, a zero value (no bar). */
  double v[3] = {1e-6, 0, 3e-2};
  fp8_bar_series one = {v, "rate", 0};
  c.logy = 1;
  c.width = 1600;
  c.height = 1000;
  ck_assert_msg(fp8_plot_bars(p, &c, cats, 3, &one, 1, err, sizeof err) == FP8_OK, "%s", err);
  assert_info(p, 1600, 1000);

  /* A reference line (a budget): dashed, in the foreground colour, across the plot; with it
   * the chart holds many more dark pixels (about half of a 2 px line over the plot width, plus
   * its legend sample), and a reference above every bar still shows (the axis takes it in). */
  c.logy = 0;
  c.width = 1200;
  c.height = 800;
  double w3[3] = {1, 2, 3};
  fp8_bar_series three = {w3, "rate", FP8_COLOR_BLUE};
  uint8_t black[3] = {0, 0, 0};
  ck_assert_msg(fp8_plot_bars(p, &c, cats, 3, &three, 1, err, sizeof err) == FP8_OK, "%s", err);
  image im0 = load(p);
  long dark0 = count_color(&im0, 0, 0, im0.w, im0.h, black, 60);
  free(im0.rgb);
  c.ref_y = 10;
  c.ref_label = "budget 10";
  ck_assert_msg(fp8_plot_bars(p, &c, cats, 3, &three, 1, err, sizeof err) == FP8_OK, "%s", err);
  image im1 = load(p);
  long dark1 = count_color(&im1, 0, 0, im1.w, im1.h, black, 60);
  free(im1.rgb);
  ck_assert_msg(dark1 > dark0 + 400, "dark pixels %ld without the line, %ld with it", dark0, dark1);
}
END_TEST

/* Issue 25 point 8. */
/* Slanted category labels (upper-case configuration labels, wider than the average text the
 * layout used to assume: 0.74 cap per character): the x title keeps clear of them (it collided with them in recipes_overflow.png and gemm_error.png). The title's ink
 * is what a render with the title has and one with a blank title (same layout) has not; no
 * label ink may lie within 3 pixels of its box. */
START_TEST(test_bars_xlabel_clear_of_slanted_labels) {
  const char *cats[] = {"TE_DEFAULT L=1024 M=0 MAX", "SHORT_MARGIN L=16 M=1 MAX",
                        "MXFP8_FLOOR (MXFP8)", "DEEPSEEK_V3 (BLOCK)", "ROWWISE_TORCHAO (ROWWISE)",
                        "CURRENT SCALING", "WIDE_HISTORY L=4096 M=2 MAX",
                        "MOST_RECENT L=1024 M=0 MOST_RECENT", "DELAYED L=128 M=1 MAX",
                        "DELAYED L=128 M=2 MAX", "MIXED (DELAYED)"};
  double a[11] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  fp8_bar_series s = {a, "rate", FP8_COLOR_BLUE};
  fp8_chart c = base_chart("slanted labels");
  const char *p = path_in("bars_slant.png");
  image im[2];
  for (int k = 0; k < 2; k++) {
    c.xlabel = k == 0 ? "configuration" : " ";
    ck_assert_msg(fp8_plot_bars(p, &c, cats, 11, &s, 1, err, sizeof err) == FP8_OK, "%s", err);
    im[k] = load(p);
  }
  int bx0 = im[0].w, bx1 = -1, by0 = im[0].h, by1 = -1;
  for (int y = 0; y < im[0].h; y++)
    for (int x = 0; x < im[0].w; x++) {
      const uint8_t *q = px(&im[0], x, y), *r = px(&im[1], x, y);
      if (q[0] < 100 && q[1] < 100 && q[2] < 100 && !(r[0] < 100 && r[1] < 100 && r[2] < 100)) {
        if (x < bx0) bx0 = x;
        if (x > bx1) bx1 = x;
        if (y < by0) by0 = y;
        if (y > by1) by1 = y;
      }
    }
  ck_assert_msg(bx1 > bx0 + 50 && by1 > by0 + 8 && by1 - by0 < 40, "title box %d..%d x %d..%d",
                bx0, bx1, by0, by1);
  long near_title = 0;
  for (int y = by0 - 3; y <= by1 + 3; y++)
    for (int x = bx0 - 3; x <= bx1 + 3; x++) {
      const uint8_t *r = px(&im[1], x, y);
      near_title += r[0] < 100 && r[1] < 100 && r[2] < 100;
    }
  ck_assert_msg(near_title == 0, "%ld label pixels within 3 px of the x title's box %d..%d x %d..%d",
                near_title, bx0, bx1, by0, by1);
  free(im[0].rgb);
  free(im[1].rgb);
}
END_TEST

/* Value labels above close bars: each label within its own bar's column, so that the columns
 * holding label ink form one run per bar; or no labels when the bars are too narrow for legible
 * ones. 16 x 3 bars have room for labels; 40 x 3 do not (the labels were sized to 0.9 of a
 * slot's share of the width, wider than the bars' 0.8: neighbours merged into one smear). */
static int label_runs(int nc) {
  enum { NS = 3 };
  static char names[40][8];
  const char *cats[40];
  double v[NS][40];
  for (int i = 0; i < nc; i++) {
    snprintf(names[i], sizeof names[i], "c%d", i);
    cats[i] = names[i];
    for (int j = 0; j < NS; j++) v[j][i] = 0.0591 - 0.0001 * j;
  }
  fp8_bar_series s[NS] = {{v[0], "fprop", FP8_COLOR_BLUE},
                          {v[1], "dgrad", FP8_COLOR_ORANGE},
                          {v[2], "wgrad", FP8_COLOR_GREEN}};
  fp8_chart c = base_chart("close bars");
  c.xlabel = "configuration";
  c.bar_format = "%.3g";
  c.ymin = 0;
  c.ymax = 0.2; /* the bars end at 30% of the height: their labels sit in the band above */
  const char *p = path_in("bars_values.png");
  ck_assert_msg(fp8_plot_bars(p, &c, cats, (size_t)nc, s, NS, err, sizeof err) == FP8_OK, "%s",
                err);
  image im = load(p);
  /* the band between the bar tops and the plot's top, inside the frame: label ink only */
  int y0 = im.h * 45 / 100, y1 = im.h * 63 / 100, runs = 0, in = 0, x0 = im.w / 8,
      x1 = im.w * 7 / 10;
  for (int x = x0; x < x1; x++) {
    int dark = 0;
    for (int y = y0; y < y1 && !dark; y++) {
      const uint8_t *q = px(&im, x, y);
      dark = q[0] < 100 && q[1] < 100 && q[2] < 100;
    }
    runs += dark && !in;
    in = dark;
  }
  free(im.rgb);
  return runs;
}

START_TEST(test_bar_value_labels_apart) {
  /* the scan covers x in [w/8, 0.7 w): the bars whose label lies wholly inside it */
  int r16 = label_runs(16), r40 = label_runs(40);
  ck_assert_msg(r16 >= 20, "16 x 3 bars: %d runs of label ink, expected one per label", r16);
  ck_assert_msg(r40 == 0, "40 x 3 bars: %d runs of label ink, expected none (too narrow)", r40);
}
END_TEST

/* A heatmap's budget: the cells within it are outlined. Two cells, 1e-2 (left) and 0 (right),
 * budget 1e-3: with the budget the image gains dark pixels in the right cell only. */
START_TEST(test_heatmap_budget_outline) {
  const char *xl[] = {"1", "1024"}, *yl[] = {"0"};
  double v[2] = {1e-2, 0};
  fp8_heatmap h = {2, 1, xl, yl, v, NULL, "clipped rate", 1, 0, 0, 1, 0, NULL, NULL};
  fp8_chart c = base_chart("budget");
  c.xlabel = "history";
  c.ylabel = "margin";
  const char *p = path_in("heat_budget.png");
  ck_assert_msg(fp8_plot_heatmap(p, &c, &h, err, sizeof err) == FP8_OK, "%s", err);
  image a = load(p);
  h.budget = 1e-3;
  h.budget_label = "value budget 0.001";
  ck_assert_msg(fp8_plot_heatmap(p, &c, &h, err, sizeof err) == FP8_OK, "%s", err);
  image b = load(p);
  ck_assert_int_eq(a.w, b.w);
  /* new dark pixels left of the colour bar (the plot spans at most 80% of the width) */
  long left = 0, right = 0;
  int mid = -1;
  /* the cells' boundary: the white grid line between them on the middle row */
  for (int x = b.w / 4; x < b.w * 3 / 4 && mid < 0; x++) {
    const uint8_t *q = px(&a, x, a.h / 2);
    if (q[0] == 255 && q[1] == 255 && q[2] == 255) mid = x;
  }
  ck_assert_int_gt(mid, 0);
  for (int y = 0; y < b.h; y++)
    for (int x = 0; x < b.w * 8 / 10; x++) {
      const uint8_t *qa = px(&a, x, y), *qb = px(&b, x, y);
      int da = qa[0] < 60 && qa[1] < 60 && qa[2] < 60, db = qb[0] < 60 && qb[1] < 60 && qb[2] < 60;
      if (db && !da) {
        if (x < mid) left++;
        else right++;
      }
    }
  ck_assert_msg(right > 1000 && left == 0, "new dark pixels: %ld left of x %d, %ld right", left,
                mid, right);
  /* judged by other values (budget_values): now the left cell is within, the right not; and
   * a budget of 0 outlines a cell whose value is 0 */
  double bv[2] = {1e-4, 1.0};
  h.budget_values = bv;
  ck_assert_msg(fp8_plot_heatmap(p, &c, &h, err, sizeof err) == FP8_OK, "%s", err);
  image d = load(p);
  long dl = 0, dr = 0;
  for (int y = 0; y < d.h; y++)
    for (int x = 0; x < d.w * 8 / 10; x++) {
      const uint8_t *qa = px(&a, x, y), *qd = px(&d, x, y);
      int da = qa[0] < 60 && qa[1] < 60 && qa[2] < 60, dd = qd[0] < 60 && qd[1] < 60 && qd[2] < 60;
      if (dd && !da) {
        if (x < mid) dl++;
        else dr++;
      }
    }
  ck_assert_msg(dl > 1000 && dr == 0, "budget_values: new dark pixels %ld left, %ld right", dl, dr);
  free(d.rgb);
  h.budget_values = NULL;
  h.budget = 0;
  h.budget_label = "value budget 0";
  ck_assert_msg(fp8_plot_heatmap(p, &c, &h, err, sizeof err) == FP8_OK, "%s", err);
  image z = load(p);
  long zr = 0;
  for (int y = 0; y < z.h; y++)
    for (int x = mid; x < z.w * 8 / 10; x++) {
      const uint8_t *qa = px(&a, x, y), *qz = px(&z, x, y);
      zr += (qz[0] < 60 && qz[1] < 60 && qz[2] < 60) && !(qa[0] < 60 && qa[1] < 60 && qa[2] < 60);
    }
  ck_assert_msg(zr > 1000, "budget 0: %ld new dark pixels in the zero cell", zr);
  free(z.rgb);
  free(a.rgb);
  free(b.rgb);
}
END_TEST

/* ------------------------------------------------------------------ independence, quiet */

START_TEST(test_charts_independent_and_quiet) {
  double x[4] = {0, 1, 2, 3}, y[4] = {3, 1, 2, 0};
  fp8_series s = {x, y, 4, "s", 0, 0, FP8_MARKER_DIAMOND, 0, 0};
  fp8_chart c = base_chart("same chart twice");
  const char *xl[] = {"a", "b"}, *yl[] = {"c"};
  double v[2] = {1, 2};
  fp8_heatmap h = {2, 1, xl, yl, v, "%.1f", "z", 0, 0, 0, 0, 0, NULL, NULL};

  /* stdout and stderr go to a file while drawing: PLplot must print nothing. */
  const char *log = path_in("out.log");
  fflush(stdout);
  fflush(stderr);
  int saved1 = dup(1), saved2 = dup(2);
  int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ck_assert_int_ge(fd, 0);
  dup2(fd, 1);
  dup2(fd, 2);
  int r1 = fp8_plot_lines(path_in("a.png"), &c, &s, 1, NULL, 0, err, sizeof err);
  int r2 = fp8_plot_heatmap(path_in("h.png"), &c, &h, err, sizeof err);
  int r3 = fp8_plot_lines(path_in("b.png"), &c, &s, 1, NULL, 0, err, sizeof err);
  fflush(stdout);
  fflush(stderr);
  dup2(saved1, 1);
  dup2(saved2, 2);
  close(fd);
  close(saved1);
  close(saved2);
  ck_assert_int_eq(r1, FP8_OK);
  ck_assert_int_eq(r2, FP8_OK);
  ck_assert_int_eq(r3, FP8_OK);
  size_t len = 99;
  char *out = tu_read_file(log, &len);
  ck_assert_ptr_nonnull(out);
  ck_assert_msg(len == 0, "PLplot printed: %s", out);
  free(out);

  /* The heatmap in between (its own colour map, fonts) changed nothing in the line chart. */
  image a = load(path_in("a.png")), b = load(path_in("b.png"));
  ck_assert_int_eq(a.w, b.w);
  ck_assert_int_eq(a.h, b.h);
  ck_assert_int_eq(memcmp(a.rgb, b.rgb, (size_t)a.w * a.h * 3), 0);
  free(a.rgb);
  free(b.rgb);
}
END_TEST

TU_MAIN("charts", "plot", setup, teardown, 120, test_warm_up_writes_nothing, test_palette,
        test_line_chart, test_line_log_skips_bad_values, test_heatmap_single_high_cell,
        test_heatmap_log_nan_text, test_step_heatmap, test_step_heatmap_many_steps,
        test_long_title_fits, test_histogram, test_bars, test_bars_xlabel_clear_of_slanted_labels,
        test_bar_value_labels_apart, test_heatmap_budget_outline, test_charts_independent_and_quiet)
