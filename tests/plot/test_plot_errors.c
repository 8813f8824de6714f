/* test_plot_errors.c: src/plot's errors: an unwritable path and every invalid argument give the
 * status and a message, and no file is left behind. */
#include <check.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plot.h"
#include "testutil.h"
#include "plot_helpers.h"
#include "tu_dir.h"

/* ------------------------------------------------------------------ errors */

START_TEST(test_unwritable_path) {
  double x[2] = {0, 1};
  fp8_series s = {x, x, 2, "s", 0, 0, 0, 0, 0};
  fp8_chart c = base_chart("nowhere");
  ck_assert_int_eq(fp8_plot_lines(path_in("missing/dir/x.png"), &c, &s, 1, NULL, 0, err, sizeof err),
                   FP8_EIO);
  ck_assert_ptr_nonnull(strstr(err, "missing/dir"));
  ck_assert_int_eq(tu_count_entries(g_dir), 0);
  /* The target is a directory: the temporary file is written, the rename fails, and the
   * temporary is removed. */
  ck_assert_int_eq(mkdir(path_in("adir"), 0755), 0);
  ck_assert_int_eq(fp8_plot_lines(path_in("adir"), &c, &s, 1, NULL, 0, err, sizeof err), FP8_EIO);
  ck_assert_int_eq(tu_count_entries(g_dir), 1);
  /* A file where a directory should be. */
  ck_assert_int_eq(tu_write_file(path_in("file"), "x", 1), 0);
  const char *xl[] = {"a"}, *yl[] = {"b"};
  double v[1] = {1};
  fp8_heatmap h = {1, 1, xl, yl, v, NULL, NULL, 0, 0, 0, 0, 0, NULL, NULL};
  ck_assert_int_eq(fp8_plot_heatmap(path_in("file/h.png"), &c, &h, err, sizeof err), FP8_EIO);
  ck_assert_int_eq(tu_count_entries(g_dir), 2);
}
END_TEST

START_TEST(test_invalid_args) {
  double x[3] = {0, 1, 2}, e[3] = {0, 2, 1};
  fp8_series s = {x, x, 3, "s", 0, 0, 0, 0, 0};
  fp8_chart c = base_chart("bad");
  const char *p = path_in("bad.png");
  /* No series; a series with no points or no y; out-of-range enums. */
  ck_assert_int_eq(fp8_plot_lines(p, &c, &s, 0, NULL, 0, err, sizeof err), FP8_EINVAL);
  ck_assert_ptr_nonnull(strstr(err, "at least one series"));
  fp8_series bad = s;
  bad.n = 0;
  ck_assert_int_eq(fp8_plot_lines(p, &c, &bad, 1, NULL, 0, err, sizeof err), FP8_EINVAL);
  bad = s;
  bad.y = NULL;
  ck_assert_int_eq(fp8_plot_lines(p, &c, &bad, 1, NULL, 0, err, sizeof err), FP8_EINVAL);
  bad = s;
  bad.color = (fp8_color)42;
  ck_assert_int_eq(fp8_plot_lines(p, &c, &bad, 1, NULL, 0, err, sizeof err), FP8_EINVAL);
  fp8_markers m = {NULL, NULL, 2, "m", 0, 0};
  ck_assert_int_eq(fp8_plot_lines(p, &c, &s, 1, &m, 1, err, sizeof err), FP8_EINVAL);
  /* Bad chart: size, text key, missing path. */
  fp8_chart small = c;
  small.width = 100;
  ck_assert_int_eq(fp8_plot_lines(p, &small, &s, 1, NULL, 0, err, sizeof err), FP8_EINVAL);
  fp8_png_text badkey[] = {{"", "v"}};
  fp8_chart bk = c;
  bk.text = badkey;
  bk.ntext = 1;
  ck_assert_int_eq(fp8_plot_lines(p, &bk, &s, 1, NULL, 0, err, sizeof err), FP8_EINVAL);
  ck_assert_int_eq(fp8_plot_lines(NULL, &c, &s, 1, NULL, 0, err, sizeof err), FP8_EINVAL);

  /* Heatmap: zero size, missing labels, a format that is not one double. */
  const char *xl[] = {"a", "b"}, *yl[] = {"c"};
  double v[2] = {1, 2};
  fp8_heatmap h = {0, 1, xl, yl, v, NULL, NULL, 0, 0, 0, 0, 0, NULL, NULL};
  ck_assert_int_eq(fp8_plot_heatmap(p, &c, &h, err, sizeof err), FP8_EINVAL);
  h.nx = 2;
  h.ylabels = NULL;
  ck_assert_int_eq(fp8_plot_heatmap(p, &c, &h, err, sizeof err), FP8_EINVAL);
  h.ylabels = yl;
  const char *fmts[] = {"%s", "%d", "%g %g", "%*g", "no conversion", "%.2g%n"};
  for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++) {
    h.cell_format = fmts[i];
    ck_assert_msg(fp8_plot_heatmap(p, &c, &h, err, sizeof err) == FP8_EINVAL, "format %s", fmts[i]);
  }
  h.cell_format = "%.2g%%";
  ck_assert_int_eq(fp8_plot_heatmap(p, &c, &h, err, sizeof err), FP8_OK);
  unlink(p);

  /* Histogram: no bins, edges not ascending, logx, a window with lo >= hi. */
  fp8_hist hist = {0, x, x, NULL, 0};
  ck_assert_int_eq(fp8_plot_histogram(p, &c, &hist, NULL, 0, err, sizeof err), FP8_EINVAL);
  hist.nbins = 2;
  hist.edges = e;
  ck_assert_int_eq(fp8_plot_histogram(p, &c, &hist, NULL, 0, err, sizeof err), FP8_EINVAL);
  hist.edges = x;
  fp8_chart lx = c;
  lx.logx = 1;
  ck_assert_int_eq(fp8_plot_histogram(p, &lx, &hist, NULL, 0, err, sizeof err), FP8_EINVAL);
  fp8_window w = {2, 1, "w", 0, 0, 0, 0};
  ck_assert_int_eq(fp8_plot_histogram(p, &c, &hist, &w, 1, err, sizeof err), FP8_EINVAL);
  fp8_window wb = {1, 2, "band", 0, 0.5, 0.2, 0}; /* a band upside down */
  ck_assert_int_eq(fp8_plot_histogram(p, &c, &hist, &wb, 1, err, sizeof err), FP8_EINVAL);

  /* Bars: no categories, no series, NULL values. */
  const char *cats[] = {"a", "b"};
  fp8_bar_series bs = {v, "v", 0};
  ck_assert_int_eq(fp8_plot_bars(p, &c, cats, 0, &bs, 1, err, sizeof err), FP8_EINVAL);
  ck_assert_int_eq(fp8_plot_bars(p, &c, cats, 2, &bs, 0, err, sizeof err), FP8_EINVAL);
  bs.values = NULL;
  ck_assert_int_eq(fp8_plot_bars(p, &c, cats, 2, &bs, 1, err, sizeof err), FP8_EINVAL);

  ck_assert_int_eq(tu_count_entries(g_dir), 0);
}
END_TEST

TU_MAIN("plot_errors", "plot", setup, teardown, 120, test_unwritable_path, test_invalid_args)
