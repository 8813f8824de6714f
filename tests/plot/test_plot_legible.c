/* test_plot_legible.c: the plots read true without their captions (issue 42 case 8). The step
 * heatmap's cells outside its scale (a cell without a value hatched, a largest element a hair
 * below the max (-5e-9) in the quiet scale's blue, an overflow by rounding only in the band's
 * yellow, apart from a clipping one), the bar chart's log axis leaving out a category far below
 * the others (bf16 at 1e-7 among FP8 errors at 1e-2..1e-1) and naming it below the chart, the
 * line chart's minimum y span, and row labels shortened at their start. Pixels are read back
 * from the PNG; the expected colours are plot.h's (Okabe-Ito yellow #F0E442, the quiet scale's
 * light end (158, 202, 236), the hatching's grey 150 on white), the expected geometry a hand
 * calculation from the chart's layout rules.
 *
 * Built with -DFP8LAB_OLD_API (no band, log_exclude, min_yspan, fp8_plot_bars_excluded), the
 * heatmap and bar tests compile against the library before issue 42 and fail there: that is
 * how they were checked against the old behaviour. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plot.h"
#include "testutil.h"
#include "plot_helpers.h"
#include "tu_dir.h"
#ifndef FP8LAB_OLD_API
#include "plot_internal.h" /* plot_plain_text_start */
#endif

/* ------------------------------------------------------------------ step heatmap */

/* One row of five steps on the scale [-4, 4] around 0: a clipping cell (1.5 binades), a cell
 * without a value (the tensor did not run), -5e-9 (the largest element fits: never clipped), 0.03
 * (overflowed by rounding only: inside the band (0, 0.0506], E4M3's rounding midpoint 464 over
 * 448), and a clipping cell again. The first cell's colour (orange towards vermillion: much red,
 * no blue) finds the cells along the row; the others are at whole cell widths from it. */
START_TEST(test_stepheat_did_not_run_and_rounding) {
  enum { NX = 5 };
  double x[NX] = {0, 1, 2, 3, 4}, v[NX] = {1.5, NAN, -5e-9, 0.03, 1.5};
  const char *yl[1] = {"model.layers.3.self_attn.k_proj.input"};
  fp8_step_heatmap h = {.nx = NX, .ny = 1, .x = x, .ylabels = yl, .values = v, .threshold = 0,
                        .vmin = -4, .vmax = 4, .colorbar_label = "overshoot (binades)"};
#ifndef FP8LAB_OLD_API
  h.band = log2(464.0 / 448.0);
  h.band_label = "overflow by rounding only";
  h.nan_label = "no value: the tensor did not run";
#endif
  fp8_chart c = base_chart("one tensor, five steps");
  c.ylabel = "tensor";
  const char *p = path_in("stepheat_outside.png");
  ck_assert_msg(fp8_plot_step_heatmap(p, &c, &h, err, sizeof err) == FP8_OK, "%s", err);
  image im = load(p);
  int y = im.h / 2; /* the one row fills the plot's height: its middle is in the cells */
  int a = -1, b = -1;
  for (int xx = 0; xx < im.w && b < 0; xx++) {
    const uint8_t *q = px(&im, xx, y);
    int red = q[0] > 180 && q[2] < 40 && q[1] < 140;
    if (red && a < 0) a = xx;
    if (!red && a >= 0) b = xx;
  }
  ck_assert_msg(a > 0 && b > a + 50, "the first (clipping) cell not found along y %d: %d..%d", y, a, b);
  double w = b - a; /* one cell's width */
  /* the last cell is the clipping colour again, 4 widths on: the columns are where we think */
  const uint8_t *c0 = px(&im, (int)(a + 0.5 * w), y), *c4 = px(&im, (int)(a + 4.5 * w), y);
  ck_assert_msg(near(c4, c0[0], c0[1], c0[2], 2), "cell 4 (%d,%d,%d) is not cell 0's colour (%d,%d,%d)",
                c4[0], c4[1], c4[2], c0[0], c0[1], c0[2]);

  /* cell 1, no value: hatched, grey (150) lines on white and nothing else, in a patch of it */
  int white = 0, grey = 0, other = 0;
  for (int dy = -6; dy <= 6; dy++)
    for (int dx = -6; dx <= 6; dx++) {
      const uint8_t *q = px(&im, (int)(a + 1.5 * w) + dx, y + dy);
      if (near(q, 255, 255, 255, 1)) white++;
      else if (near(q, 150, 150, 150, 1)) grey++;
      else other++;
    }
  ck_assert_msg(white >= 40 && grey >= 20 && other == 0,
                "did-not-run cell: %d white, %d grey (150), %d other pixels of 169: not hatched",
                white, grey, other);

  /* cell 2, -5e-9: the quiet scale's light end (158, 202, 236), a blue that is neither the
   * hatching's white nor its grey: "no overflow", never "did not run" */
  const uint8_t *c2 = px(&im, (int)(a + 2.5 * w), y);
  ck_assert_msg(near(c2, 158, 202, 236, 3), "-5e-9 cell drawn (%d,%d,%d), expected (158,202,236)",
                c2[0], c2[1], c2[2]);
  ck_assert_msg(c2[2] >= c2[0] + 60, "-5e-9 cell (%d,%d,%d) is not blue", c2[0], c2[1], c2[2]);

  /* cell 3, rounding only: yellow, not the clipping cells' colour nor the loud scale's orange */
  const uint8_t *c3 = px(&im, (int)(a + 3.5 * w), y);
  ck_assert_msg(near(c3, 240, 228, 66, 2), "rounding-only cell drawn (%d,%d,%d), expected yellow "
                "(240,228,66)", c3[0], c3[1], c3[2]);
  ck_assert_msg(!near(c3, c0[0], c0[1], c0[2], 40), "rounding-only cell as clipping's colour");
  /* 1.5 on [0, 4]: 0.375 of the loud scale, 3/4 of the way from orange (230,159,0) to
   * vermillion (213,94,0): (217, 110, 0) within a colour entry */
  ck_assert_msg(near(c0, 217, 110, 0, 6), "clipping cell (%d,%d,%d), expected about (217,110,0)",
                c0[0], c0[1], c0[2]);
  free(im.rgb);

#ifndef FP8LAB_OLD_API
  /* a band not above the threshold is refused */
  h.band = 0;
  ck_assert_int_eq(fp8_plot_step_heatmap(path_in("bad.png"), &c, &h, err, sizeof err), FP8_EINVAL);
#endif
}
END_TEST

/* ------------------------------------------------------------------ bars: log axis */

/* Five categories, one series: 0.05, 0.1, 1e-7 (bf16), 0.03, 0.08 on a log axis. bf16 lies
 * 6 decades below the others' median (log10 0.065 = -1.19): left out of the axis and of the
 * chart, and named below it. From the pixels: the bars (blue) are four, and the axis's bottom,
 * recovered from two bars' heights (on a log axis h = (log10 v - lo) * pixels per decade: the
 * 0.1 and 0.05 bars differ by log10 2 decades), is at or above 1e-3, not at 1e-8. */
START_TEST(test_bars_log_axis_excludes_far_category) {
  const char *cat[5] = {"delayed", "current", "bf16", "mxfp8", "nvfp4"};
  double v[5] = {0.05, 0.1, 1e-7, 0.03, 0.08};
  fp8_bar_series s = {v, "GEMM error", FP8_COLOR_BLUE};
  fp8_chart c = base_chart("GEMM error per configuration");
  c.xlabel = "configuration";
  c.ylabel = "relative error (log scale)";
  c.logy = 1;
#ifndef FP8LAB_OLD_API
  c.log_exclude = 3;
  unsigned char ex[5];
  char note[256];
  ck_assert_uint_eq(fp8_plot_bars_excluded(&c, cat, 5, &s, 1, ex, note, sizeof note), 1);
  for (int i = 0; i < 5; i++) ck_assert_int_eq(ex[i], i == 2);
  ck_assert_msg(strstr(note, "bf16: 1e-07") && strstr(note, "3 decades"), "note: %s", note);
  /* 2 decades is not enough to leave out 0.001 among 0.05..0.1 (1.8 decades below): kept */
  double v2[5] = {0.05, 0.1, 1e-3, 0.03, 0.08};
  fp8_bar_series s2 = {v2, "GEMM error", FP8_COLOR_BLUE};
  ck_assert_uint_eq(fp8_plot_bars_excluded(&c, cat, 5, &s2, 1, ex, note, sizeof note), 0);
  ck_assert_str_eq(note, "");
#endif
  const char *p = path_in("bars_log_exclude.png");
  ck_assert_msg(fp8_plot_bars(p, &c, cat, 5, &s, 1, err, sizeof err) == FP8_OK, "%s", err);
  image im = load(p);
  /* the bars: runs of columns holding the series' blue (#0072B2), each with its tallest run */
  int nbars = 0, height[8] = {0};
  int in = 0;
  for (int xx = 0; xx < im.w; xx++) {
    int col = 0;
    for (int yy = 0; yy < im.h; yy++) col += near(px(&im, xx, yy), 0x00, 0x72, 0xB2, 2);
    if (col > 0 && !in && nbars < 8) nbars++;
    if (col > 0 && height[nbars - 1] < col) height[nbars - 1] = col;
    in = col > 0;
  }
  ck_assert_msg(nbars == 4, "%d bars drawn, expected 4 (bf16 left out)", nbars);
  /* bars 0 (0.05) and 1 (0.1): pixels per decade and the axis's bottom */
  double ppd = (height[1] - height[0]) / log10(2.0);
  ck_assert_msg(ppd > 50, "0.1 and 0.05 bars %d and %d px tall: %.1f px a decade", height[1],
                height[0], ppd);
  double lo = -1.0 - height[1] / ppd;
  ck_assert_msg(lo >= -3.05, "the axis reaches down to 1e%.2f: stretched by the bf16 bar", lo);
  /* the note: ink in the bottom 30 pixels of the page, below the x axis title */
  long ink = 0;
  for (int yy = im.h - 30; yy < im.h; yy++)
    for (int xx = 0; xx < im.w; xx++) {
      const uint8_t *q = px(&im, xx, yy);
      ink += q[0] < 100 && q[1] < 100 && q[2] < 100;
    }
  ck_assert_msg(ink > 200, "no note below the chart (%ld dark pixels in its bottom 30 rows)", ink);
  free(im.rgb);
}
END_TEST

#ifndef FP8LAB_OLD_API
/* Value labels stay inside the frame: a bar reaching just below the top decade (0.9 on an
 * axis ending at 1) would have its label run past the top; the axis is raised instead, so
 * no label ink lies above the frame's top line (the first row of frame black from the top,
 * found in the plot's middle column between bars). */
START_TEST(test_bar_labels_inside_frame) {
  const char *cat[3] = {"a", "b", "c"};
  double v1[3] = {0.9, 0.5, 0.2}, v2[3] = {0.8, 0.95, 0.3};
  fp8_bar_series s[2] = {{v1, "one", FP8_COLOR_BLUE}, {v2, "two", FP8_COLOR_ORANGE}};
  fp8_chart c = base_chart(NULL);
  c.title = NULL;
  c.logy = 1;
  c.bar_format = "%.3g";
  const char *p = path_in("bars_labels.png");
  ck_assert_msg(fp8_plot_bars(p, &c, cat, 3, s, 2, err, sizeof err) == FP8_OK, "%s", err);
  image im = load(p);
  /* the frame's top: the first row from the top with a long run of black */
  int top = -1, fx0 = 0, fx1 = 0;
  const uint8_t black[3] = {0, 0, 0};
  for (int yy = 0; yy < im.h / 2 && top < 0; yy++)
    if (longest_run(&im, yy, black, 40, &fx0, &fx1) > im.w / 3) top = yy;
  ck_assert_int_gt(top, 0);
  long above = 0; /* over the frame's width, clear of the y tick labels left of it */
  for (int yy = 0; yy < top - 1; yy++)
    for (int xx = fx0 + 5; xx < fx1 - 5; xx++) {
      const uint8_t *q = px(&im, xx, yy);
      above += q[0] < 120 && q[1] < 120 && q[2] < 120;
    }
  ck_assert_msg(above == 0, "%ld dark pixels above the frame's top (row %d)", above, top);
  free(im.rgb);
}
END_TEST

/* ------------------------------------------------------------------ lines: minimum span */

/* SNR 31.0 dB for five steps then 31.5: with a minimum span of 3 dB the step between them is a
 * sixth of the plot's height (0.5 / 3), about 100 px of the ~600, not the whole of it. */
START_TEST(test_lines_min_span) {
  double x[10], y[10];
  for (int i = 0; i < 10; i++) x[i] = i, y[i] = i < 5 ? 31.0 : 31.5;
  fp8_series s = {x, y, 10, "delayed", FP8_COLOR_ORANGE, FP8_STYLE_STEP, 0, 0, 0};
  fp8_chart c = base_chart("SNR");
  c.min_yspan = 3;
  const char *p = path_in("lines_span.png");
  ck_assert_msg(fp8_plot_lines(p, &c, &s, 1, NULL, 0, err, sizeof err) == FP8_OK, "%s", err);
  image im = load(p);
  const uint8_t orange[3] = {0xE6, 0x9F, 0x00};
  int ylo = -1, yhi = -1; /* the lowest and highest rows with a long orange run */
  for (int yy = 0; yy < im.h; yy++) {
    int x0, x1;
    if (longest_run(&im, yy, orange, 3, &x0, &x1) > im.w / 8) {
      if (yhi < 0) yhi = yy;
      ylo = yy;
    }
  }
  ck_assert_msg(yhi > 0 && ylo - yhi > 60 && ylo - yhi < 160,
                "31.0 and 31.5 dB %d px apart, expected about 100 (a sixth of the height)",
                ylo - yhi);
  free(im.rgb);
}
END_TEST

/* ------------------------------------------------------------------ row labels */

START_TEST(test_label_cut_at_start) {
  char out[128];
  const char *name = "model.layers.3.self_attn.k_proj.input";
  plot_plain_text_start(name, 30, out, sizeof out); /* "layers.3..." is 31 + 1: too long */
  ck_assert_str_eq(out, "\u2026" "3.self_attn.k_proj.input");
  plot_plain_text_start(name, 33, out, sizeof out);
  ck_assert_str_eq(out, "\u2026" "layers.3.self_attn.k_proj.input");
  plot_plain_text_start(name, 10, out, sizeof out);
  ck_assert_str_eq(out, "\u2026" "input");
  plot_plain_text_start(name, 4, out, sizeof out); /* the role whole, though longer */
  ck_assert_str_eq(out, "\u2026" "input");
  plot_plain_text_start(name, 40, out, sizeof out); /* fits: unchanged */
  ck_assert_str_eq(out, name);
  plot_plain_text_start("abcdefghij", 5, out, sizeof out); /* no dot: the last 4 */
  ck_assert_str_eq(out, "\u2026" "ghij");
  plot_plain_text_start("a#b.c#d", 4, out, sizeof out); /* '#' doubled for PLplot */
  ck_assert_str_eq(out, "\u2026" "c##d");
}
END_TEST
#endif

#ifndef FP8LAB_OLD_API
TU_MAIN("plot_legible", "plot", setup, teardown, 120, test_stepheat_did_not_run_and_rounding,
        test_bars_log_axis_excludes_far_category, test_bar_labels_inside_frame,
        test_lines_min_span, test_label_cut_at_start)
#else
TU_MAIN("plot_legible", "plot", setup, teardown, 120, test_stepheat_did_not_run_and_rounding,
        test_bars_log_axis_excludes_far_category)
#endif
