/* test_gantt.c: the timeline's Gantt chart (src/plot/plot_gantt.c): lanes, bars and notes found in
 * the pixels, the zoom, errors. Each chart is written to a temporary directory and read back with
 * libpng: size, text chunks, and pixels where the layout guarantees something (plot boxes span
 * most of the page, so a point at a given fraction of the data range lies in a known band of
 * pixels): background corners white, a bar's or cell's inside in its exact fill colour. Errors: no
 * file is left behind. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plot.h"
#include "testutil.h"
#include "plot_helpers.h"
#include "tu_dir.h"

/* ------------------------------------------------------------------ Gantt chart */

/* Two modes of two lanes each (compute, side) over a 400 ms step in microseconds: long GEMMs,
 * a cast, back-to-back GEMMs of one kind (lane 2), all-reduces, an optimizer op near the end
 * and two tiny amax reductions (0.5 us and 1 us) drawn on top (the 0.5 us one lies inside an
 * all-reduce listed after it). */
static const char *const gantt_lanes[4] = {"delayed: compute", "delayed: side (comm, amax)",
                                           "current: compute", "current: side (comm, amax)"};
static const char *const gantt_kinds[5] = {"GEMM (fp8)", "cast/transpose", "amax reduction",
                                           "all-reduce", "optimizer"};
static const fp8_color gantt_colors[5] = {FP8_COLOR_ORANGE, FP8_COLOR_SKYBLUE, FP8_COLOR_VERMILLION,
                                          FP8_COLOR_GREEN, FP8_COLOR_PURPLE};
static const fp8_gantt_bar gantt_bars[] = {
    {0, 300000, 0, 0},      {300000, 350000, 0, 1},   {350000, 400000, 0, 0},
    {200000, 200001, 1, 2}, {100000, 100000.5, 1, 2}, {50000, 150000, 1, 3},
    {0, 150000, 2, 0},      {150000, 250000, 2, 0},   {250000, 400000, 2, 1},
    {150000, 250000, 3, 3}, {380000, 400000, 3, 4}};
static const char *const gantt_notes[4] = {"step 400.0 ms, exposed 0.05 ms", "comm 100 ms",
                                           "step 400.0 ms, exposed 0.00 ms", NULL};
static const size_t gantt_top[1] = {2};

static fp8_gantt gantt_fixture(void) {
  fp8_gantt g = {0};
  g.nlanes = 4;
  g.lane_labels = gantt_lanes;
  g.lane_notes = gantt_notes;
  g.nkinds = 5;
  g.kind_labels = gantt_kinds;
  g.kind_colors = gantt_colors;
  g.nbars = sizeof gantt_bars / sizeof gantt_bars[0];
  g.bars = gantt_bars;
  g.min_bar_px = 3;
  g.top_kinds = gantt_top;
  g.ntop = 1;
  g.ngroups = 2;
  return g;
}

/* Runs of colour rgb (exact to +-tol) along row y between x0 and x1, at least minlen long. */
static int count_runs(const image *im, int y, int x0, int x1, const uint8_t rgb[3], int tol,
                      int minlen) {
  int n = 0, len = 0;
  for (int x = x0; x <= x1; x++) {
    int in = x < x1 && near(px(im, x, y), rgb[0], rgb[1], rgb[2], tol);
    if (in) len++;
    else {
      if (len >= minlen) n++;
      len = 0;
    }
  }
  return n;
}

/* Pixels darker than mid-grey in rows [y0, y1), all columns. */
static long count_dark(const image *im, int y0, int y1) {
  uint8_t black[3] = {0, 0, 0};
  return count_color(im, 0, y0, im->w, y1, black, 110);
}

/* Bar edges fall on pixel boundaries to within PLplot's device resolution (1/27 px at 1200
 * px): their colours hold to +-GT at the edges. */
#define GT 8

/* The lanes' geometry, found from lane 0's first GEMM [0, 300000): it fills column 450 over
 * the bar's height (70% of a lane), starting at x = px(0). Rows are checked a quarter of a
 * lane below a lane's centre: the notes sit on the centre row. */
typedef struct {
  double c0, lh; /* lane 0's centre row, lane height */
  int xl;        /* px(0): the first bar's left column */
} gantt_geom;

static int lane_row(const gantt_geom *G, int lane) {
  return (int)lrint(G->c0 + (lane + 0.25) * G->lh);
}

static gantt_geom gantt_find(const image *im, const uint8_t orange[3]) {
  gantt_geom G;
  int top = -1, bot = -1;
  for (int y = 0; y < im->h; y++) /* the first run down the column (lane 2 has one too) */
    if (near(px(im, 450, y), orange[0], orange[1], orange[2], GT)) {
      if (top < 0) top = y;
      bot = y;
    } else if (top >= 0) {
      break;
    }
  ck_assert_msg(top > 0 && bot - top > 60, "no lane-0 bar in column 450 (%d..%d)", top, bot);
  G.c0 = (top + bot) / 2.0;
  G.lh = (bot - top + 1) / 0.7;
  int x0, x1;
  ck_assert_int_gt(longest_run(im, lane_row(&G, 0), orange, GT, &x0, &x1), 300);
  G.xl = x0;
  return G;
}

START_TEST(test_gantt) {
  fp8_gantt g = gantt_fixture();
  fp8_chart c = base_chart("one training step per mode");
  c.xlabel = "time in step (us)";
  c.ylabel = NULL;
  c.grid = 1;
  const char *p = path_in("gantt.png");
  ck_assert_msg(fp8_plot_gantt(p, &c, &g, err, sizeof err) == FP8_OK, "%s", err);
  assert_info(p, 1200, 800);
  image im = load(p);
  assert_corners_white(&im);
  uint8_t orange[3], verm[3], purple[3], grey[3] = {90, 90, 90};
  fp8_plot_color_rgb(FP8_COLOR_ORANGE, orange);
  fp8_plot_color_rgb(FP8_COLOR_VERMILLION, verm);
  fp8_plot_color_rgb(FP8_COLOR_PURPLE, purple);
  gantt_geom G = gantt_find(&im, orange);
  /* Lanes top to bottom fill the plot: lane 0 is the top one, 4 lanes at least 150 px each. */
  ck_assert_msg(G.c0 < 200 && G.lh > 150 && G.lh < 180, "lane 0 at %.1f, lanes %.1f px", G.c0,
                G.lh);
  int y0 = lane_row(&G, 0), y1 = lane_row(&G, 1), y2 = lane_row(&G, 2), y3 = lane_row(&G, 3);
  /* The GEMM of lane 0 ends at px(300000) less the 1 px gap, so the scale is known. */
  int x0, x1;
  longest_run(&im, y0, orange, GT, &x0, &x1);
  double k = (x1 + 2 - x0) / 300000.0; /* px per us */
  assert_color(&im, (int)(G.xl + 150000 * k), y0, orange[0], orange[1], orange[2], 0);
  /* The two tiny amax bars (1 us, 0.5 us among 400 ms) are each 3 columns of vermillion, the
   * 0.5 us one over the all-reduce listed after it (a top kind), at their places. */
  ck_assert_int_eq(count_runs(&im, y1, x0, (int)(G.xl + 300000 * k), verm, GT, 3), 2);
  ck_assert_int_eq(count_runs(&im, y1, x0, (int)(G.xl + 300000 * k), verm, GT, 4), 0);
  int a = (int)lrint(G.xl + 100000 * k), b = (int)lrint(G.xl + 200000 * k);
  ck_assert_int_eq(count_color(&im, a - 3, y1, a + 4, y1 + 1, verm, GT), 3);
  ck_assert_int_eq(count_color(&im, b - 3, y1, b + 4, y1 + 1, verm, GT), 3);
  /* Back-to-back GEMMs of lane 2 (0..150000, 150000..250000): two orange runs with a white
   * column between them, 150 and 100 ms long. */
  int m = (int)lrint(G.xl + 150000 * k);
  assert_color(&im, m - 1, y2, 255, 255, 255, GT);
  assert_color(&im, m - 3, y2, orange[0], orange[1], orange[2], 0);
  assert_color(&im, m + 1, y2, orange[0], orange[1], orange[2], 0);
  ck_assert_int_eq(count_runs(&im, y2, 0, im.w, orange, GT, 90), 2);
  /* The optimizer op (380000..400000, purple) on lane 3, and its legend entry. */
  ck_assert_int_gt(count_color(&im, (int)(G.xl + 385000 * k), y3 - 5, (int)(G.xl + 395000 * k),
                               y3 + 5, purple, 0), 50);
  /* A grey separator between the groups (lanes 1 and 2), none between lanes 0 and 1. */
  int sep = (int)lrint(G.c0 + 1.5 * G.lh), in = (int)lrint(G.c0 + 0.5 * G.lh);
  ck_assert_int_gt(count_color(&im, x0, sep - 3, x1, sep + 4, grey, 30), (x1 - x0) * 8 / 10);
  ck_assert_int_lt(count_color(&im, x0, in - 3, x1, in + 4, grey, 30), 20);
  long dark_notes = count_dark(&im, (int)(G.c0 - 0.5 * G.lh), (int)(G.c0 + 3.5 * G.lh));
  free(im.rgb);

  /* Without the notes: far fewer dark pixels in the lanes (the notes' text). */
  g.lane_notes = NULL;
  ck_assert_msg(fp8_plot_gantt(p, &c, &g, err, sizeof err) == FP8_OK, "%s", err);
  im = load(p);
  long dark_plain = count_dark(&im, (int)(G.c0 - 0.5 * G.lh), (int)(G.c0 + 3.5 * G.lh));
  free(im.rgb);
  ck_assert_msg(dark_notes > dark_plain + 1000, "dark pixels %ld with notes, %ld without",
                dark_notes, dark_plain);
}
END_TEST

/* widen_top_only: the two tiny amax bars (1 us, 0.5 us among 400 ms, a fraction of a pixel)
 * keep their true width when their kind is not a top kind, so no run of 3 columns of their
 * colour is drawn; listed as a top kind they are widened to 3 columns as before. */
START_TEST(test_gantt_widen_top_only) {
  fp8_gantt g = gantt_fixture();
  fp8_chart c = base_chart("widen top kinds only");
  const char *p = path_in("gantt_widen.png");
  uint8_t orange[3], verm[3];
  fp8_plot_color_rgb(FP8_COLOR_ORANGE, orange);
  fp8_plot_color_rgb(FP8_COLOR_VERMILLION, verm);
  g.widen_top_only = 1;
  for (int top = 1; top >= 0; top--) {
    g.ntop = (size_t)top;
    ck_assert_msg(fp8_plot_gantt(p, &c, &g, err, sizeof err) == FP8_OK, "%s", err);
    image im = load(p);
    gantt_geom G = gantt_find(&im, orange);
    int y1 = lane_row(&G, 1), x0, x1;
    longest_run(&im, lane_row(&G, 0), orange, GT, &x0, &x1);
    double k = (x1 + 2 - x0) / 300000.0;
    ck_assert_int_eq(count_runs(&im, y1, x0, (int)(G.xl + 300000 * k), verm, GT, 3), top ? 2 : 0);
    free(im.rgb);
  }
}
END_TEST

/* A zoomed window [100000, 200000]: the optimizer op (380000..400000) leaves no purple pixel
 * (nor a legend entry); GEMMs across the window's edges are clipped at the box. */
START_TEST(test_gantt_zoom) {
  fp8_gantt g = gantt_fixture();
  fp8_chart c = base_chart("zoomed");
  c.xlabel = "time in step (us)";
  c.xmin = 100000;
  c.xmax = 200000;
  c.width = 1400;
  c.height = 900;
  const char *p = path_in("gantt_zoom.png");
  ck_assert_msg(fp8_plot_gantt(p, &c, &g, err, sizeof err) == FP8_OK, "%s", err);
  assert_info(p, 1400, 900);
  image im = load(p);
  assert_corners_white(&im);
  uint8_t orange[3], purple[3];
  fp8_plot_color_rgb(FP8_COLOR_ORANGE, orange);
  fp8_plot_color_rgb(FP8_COLOR_PURPLE, purple);
  ck_assert_int_eq(count_color(&im, 0, 0, im.w, im.h, purple, 2), 0);
  /* Lane 0's GEMM spans the whole box; lane 2's two GEMMs meet at its middle, each half of it. */
  gantt_geom G = gantt_find(&im, orange);
  int x0, x1, a0, a1, b0, b1;
  int y0 = lane_row(&G, 0), y2 = lane_row(&G, 2);
  int whole = longest_run(&im, y0, orange, GT, &x0, &x1);
  ck_assert_int_gt(whole, 700);
  ck_assert(!near(px(&im, x0 - 2, y0), orange[0], orange[1], orange[2], 60));
  ck_assert(!near(px(&im, x1 + 2, y0), orange[0], orange[1], orange[2], 60));
  ck_assert_int_eq(count_runs(&im, y2, 0, im.w, orange, GT, 100), 2);
  longest_run(&im, y2, orange, GT, &a0, &a1);
  ck_assert_int_eq(a0, x0);
  /* the other run: the next orange pixels right of the first */
  for (b0 = a1 + 1; b0 < im.w && !near(px(&im, b0, y2), orange[0], orange[1], orange[2], GT);)
    b0++;
  for (b1 = b0; b1 + 1 < im.w && near(px(&im, b1 + 1, y2), orange[0], orange[1], orange[2], GT);)
    b1++;
  ck_assert_msg(abs((a1 - a0) - (b1 - b0)) <= 3, "halves %d..%d and %d..%d", a0, a1, b0, b1);
  ck_assert_int_eq(b1, x1);
  free(im.rgb);
}
END_TEST

START_TEST(test_gantt_errors) {
  fp8_chart c = base_chart("bad gantt");
  const char *p = path_in("bad.png");
  fp8_gantt_bar bars[2] = {{0, 10, 0, 0}, {10, 20, 1, 1}};
  const char *lanes[2] = {"a", "b"}, *kinds[2] = {"k0", "k1"};
  fp8_gantt ok = {2, lanes, NULL, 2, kinds, NULL, 2, bars, 0, NULL, 0, 0, 0};
  struct {
    const char *want;
  } cases[] = {{"bar 1: lane 2 out of range (nlanes 2)"},
               {"bar 1: kind 5 out of range (nkinds 2)"},
               {"bar 0: end 5 before start 10"},
               {"bar 0: expected finite start and end, got nan, 10"},
               {"expected 1..64 lanes, got 0"},
               {"expected 1..64 lanes, got 65"},
               {"expected at most 1000000 bars, got 1000001"},
               {"top_kinds[0] 7 out of range (nkinds 2)"},
               {"expected min_bar_px in 0..100, got nan"},
               {"gantt kind 1: color 42 outside 0..8"},
               {"logx is not supported"},
               {"expected 2 lane labels, got NULL"},
               {"expected a finite x window, got 0..inf"}};
  const size_t top7 = 7;
  const fp8_color badcol[2] = {FP8_COLOR_BLUE, (fp8_color)42};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    fp8_gantt g = ok;
    fp8_gantt_bar b[2] = {bars[0], bars[1]};
    fp8_chart ch = c;
    g.bars = b;
    switch (i) {
    case 0: b[1].lane = 2; break;
    case 1: b[1].kind = 5; break;
    case 2: b[0].start = 10, b[0].end = 5; break;
    case 3: b[0].start = NAN; break;
    case 4: g.nlanes = 0; break;
    case 5: g.nlanes = 65; break;
    case 6: g.nbars = 1000001; break; /* refused before the bars are read */
    case 7: g.top_kinds = &top7, g.ntop = 1; break;
    case 8: g.min_bar_px = NAN; break;
    case 9: g.kind_colors = badcol; break;
    case 10: ch.logx = 1; break;
    case 11: g.lane_labels = NULL; break;
    case 12: ch.xmin = 0, ch.xmax = INFINITY; break;
    }
    err[0] = 0;
    ck_assert_int_eq(fp8_plot_gantt(p, &ch, &g, err, sizeof err), FP8_EINVAL);
    ck_assert_msg(strstr(err, cases[i].want) != NULL, "case %zu: \"%s\", expected \"%s\"", i, err,
                  cases[i].want);
    ck_assert_msg(strncmp(err, p, strlen(p)) == 0 && !strchr(err, '\n'), "case %zu: \"%s\"", i,
                  err);
  }
  ck_assert_int_eq(fp8_plot_gantt(p, &c, NULL, err, sizeof err), FP8_EINVAL);
  ck_assert_int_eq(tu_count_entries(g_dir), 0);
  /* The same description draws (no bars at all too); a file that cannot be written leaves none. */
  ck_assert_msg(fp8_plot_gantt(p, &c, &ok, err, sizeof err) == FP8_OK, "%s", err);
  ok.nbars = 0;
  ok.nkinds = 0;
  ck_assert_msg(fp8_plot_gantt(p, &c, &ok, err, sizeof err) == FP8_OK, "%s", err);
  ck_assert_int_eq(fp8_plot_gantt(path_in("no/dir/g.png"), &c, &ok, err, sizeof err), FP8_EIO);
  ck_assert_int_eq(tu_count_entries(g_dir), 1);
}
END_TEST

TU_MAIN("gantt", "plot", setup, teardown, 120, test_gantt, test_gantt_zoom,
        test_gantt_widen_top_only, test_gantt_errors)
