/* test_plot.c: the chart library (src/plot/plot_*.c) and its PNG I/O (png_io.c). Each chart
 * is written to a temporary directory and read back with libpng: size, text chunks, and pixels
 * where the layout guarantees something (plot boxes span most of the page, so a point at a
 * given fraction of the data range lies in a known band of pixels): background corners white,
 * a bar's or cell's inside in its exact fill colour. Errors: no file is left behind. */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plot.h"
#include "plot_internal.h" /* plot_xrgb_to_rgb */
#include "png_deflate.h"
#include "testutil.h"

/* Under FP8LAB_SANITIZE: fontconfig and pango (behind PLplot's cairo driver) keep process-wide
 * caches that they never free; LeakSanitizer would report them as leaks. Suppress those
 * libraries only; the hook is unused without the sanitizer. */
static char *tmpdir;
static char err[512];

static void setup(void) {
  tmpdir = tu_mkdtemp();
  err[0] = 0;
}
static void teardown(void) {
  tu_rmtree(tmpdir);
  free(tmpdir);
}

static char *path_in(const char *name) {
  static char buf[4096];
  snprintf(buf, sizeof buf, "%s/%s", tmpdir, name);
  return buf;
}

static int count_entries(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
  closedir(d);
  return n;
}

static const fp8_png_text meta[] = {{"fp8lab-version", "0.1.0"},
                                    {"experiment", "quickstart"},
                                    {"tensor", "layers.0.fc1.input"},
                                    {"configuration", "delayed h=16 m=0 max"}};
#define NMETA (sizeof meta / sizeof meta[0])

/* Image read back for pixel checks. */
typedef struct {
  uint8_t *rgb;
  int w, h;
} image;

static image load(const char *path) {
  image im = {0};
  int rc = fp8_png_read_rgb(path, &im.rgb, &im.w, &im.h, err, sizeof err);
  ck_assert_msg(rc == FP8_OK, "read %s: %s", path, err);
  return im;
}

static const uint8_t *px(const image *im, int x, int y) {
  ck_assert(x >= 0 && y >= 0 && x < im->w && y < im->h);
  return im->rgb + ((size_t)y * im->w + x) * 3;
}

static int near(const uint8_t *p, int r, int g, int b, int tol) {
  return abs(p[0] - r) <= tol && abs(p[1] - g) <= tol && abs(p[2] - b) <= tol;
}

static void assert_color(const image *im, int x, int y, int r, int g, int b, int tol) {
  const uint8_t *p = px(im, x, y);
  ck_assert_msg(near(p, r, g, b, tol), "pixel (%d,%d) is %d,%d,%d, expected %d,%d,%d (+-%d)", x, y,
                p[0], p[1], p[2], r, g, b, tol);
}

static void assert_corners_white(const image *im) {
  assert_color(im, 0, 0, 255, 255, 255, 0);
  assert_color(im, im->w - 1, 0, 255, 255, 255, 0);
  assert_color(im, 0, im->h - 1, 255, 255, 255, 0);
  assert_color(im, im->w - 1, im->h - 1, 255, 255, 255, 0);
}

/* Number of pixels of colour rgb (+-tol) in the rectangle [x0,x1) x [y0,y1). */
static long count_color(const image *im, int x0, int y0, int x1, int y1, const uint8_t rgb[3],
                        int tol) {
  long n = 0;
  for (int y = y0; y < y1; y++)
    for (int x = x0; x < x1; x++)
      if (near(px(im, x, y), rgb[0], rgb[1], rgb[2], tol)) n++;
  return n;
}

/* Longest run of colour rgb (+-tol) along row y: its length, and its ends in *x0, *x1. */
static int longest_run(const image *im, int y, const uint8_t rgb[3], int tol, int *x0, int *x1) {
  int best = 0, start = -1;
  *x0 = *x1 = -1;
  for (int x = 0; x <= im->w; x++) {
    int in = x < im->w && near(px(im, x, y), rgb[0], rgb[1], rgb[2], tol);
    if (in && start < 0) start = x;
    if (!in && start >= 0) {
      if (x - start > best) {
        best = x - start;
        *x0 = start;
        *x1 = x - 1;
      }
      start = -1;
    }
  }
  return best;
}

/* Checks size and that every meta key is present with its value. */
static void assert_info(const char *path, int w, int h) {
  fp8_png_info info;
  int rc = fp8_png_read_info(path, &info, err, sizeof err);
  ck_assert_msg(rc == FP8_OK, "read_info %s: %s", path, err);
  ck_assert_int_eq(info.width, w);
  ck_assert_int_eq(info.height, h);
  for (size_t i = 0; i < NMETA; i++) {
    const char *v = fp8_png_info_get(&info, meta[i].key);
    ck_assert_msg(v != NULL, "key %s missing", meta[i].key);
    ck_assert_str_eq(v, meta[i].value);
  }
  fp8_png_info_free(&info);
}

static fp8_chart base_chart(const char *title) {
  fp8_chart c = {0};
  c.title = title;
  c.xlabel = "training step";
  c.ylabel = "value (units)";
  c.text = meta;
  c.ntext = NMETA;
  return c;
}

/* ------------------------------------------------------------------ PNG I/O */

START_TEST(test_png_roundtrip) {
  enum { W = 7, H = 5 };
  uint8_t rgb[W * H * 3];
  for (int i = 0; i < W * H * 3; i++) rgb[i] = (uint8_t)(i * 37);
  fp8_png_text t[] = {{"fp8lab-version", "0.1.0"},
                      {"tensor", "blocks.0.fc1.input"},
                      {"note", "\xC3\xA9t\xC3\xA9 (UTF-8, written as iTXt)"},
                      {"empty", ""}};
  const char *p = path_in("rt.png");
  ck_assert_int_eq(fp8_png_write(p, rgb, W, H, t, 4, err, sizeof err), FP8_OK);
  fp8_png_info info;
  ck_assert_int_eq(fp8_png_read_info(p, &info, err, sizeof err), FP8_OK);
  ck_assert_int_eq(info.width, W);
  ck_assert_int_eq(info.height, H);
  ck_assert_uint_eq(info.ntext, 4);
  for (int i = 0; i < 4; i++) {
    ck_assert_str_eq(info.keys[i], t[i].key);
    ck_assert_str_eq(info.values[i], t[i].value);
  }
  ck_assert_ptr_null(fp8_png_info_get(&info, "absent"));
  fp8_png_info_free(&info);
  image im = load(p);
  ck_assert_int_eq(im.w, W);
  ck_assert_int_eq(im.h, H);
  ck_assert_mem_eq(im.rgb, rgb, sizeof rgb);
  free(im.rgb);
  /* Only the file itself: no temporary left. */
  ck_assert_int_eq(count_entries(tmpdir), 1);
}
END_TEST

START_TEST(test_png_errors) {
  uint8_t rgb[12] = {0};
  fp8_png_text bad_key[] = {{" leading space", "v"}};
  fp8_png_text long_key[] = {{"k123456789k123456789k123456789k123456789k123456789k123456789"
                              "k123456789k123456789", "v"}};
  ck_assert_int_eq(fp8_png_write(path_in("a.png"), rgb, 2, 2, bad_key, 1, err, sizeof err), FP8_EINVAL);
  ck_assert_int_eq(fp8_png_write(path_in("a.png"), rgb, 2, 2, long_key, 1, err, sizeof err), FP8_EINVAL);
  ck_assert_int_eq(fp8_png_write(path_in("a.png"), rgb, 0, 2, NULL, 0, err, sizeof err), FP8_EINVAL);
  ck_assert_int_eq(fp8_png_write(path_in("no/such/dir/a.png"), rgb, 2, 2, NULL, 0, err, sizeof err),
                   FP8_EIO);
  ck_assert_ptr_nonnull(strstr(err, "no/such/dir"));
  ck_assert_int_eq(count_entries(tmpdir), 0);

  fp8_png_info info;
  ck_assert_int_eq(fp8_png_read_info(path_in("missing.png"), &info, err, sizeof err), FP8_EIO);
  ck_assert_int_eq(tu_write_file(path_in("fake.png"), "not a png at all", 16), 0);
  ck_assert_int_eq(fp8_png_read_info(path_in("fake.png"), &info, err, sizeof err), FP8_EFORMAT);
  ck_assert_uint_eq(info.ntext, 0);
  /* A truncated PNG is corrupt, not a crash. */
  ck_assert_int_eq(fp8_png_write(path_in("t.png"), rgb, 2, 2, NULL, 0, err, sizeof err), FP8_OK);
  size_t len;
  char *data = tu_read_file(path_in("t.png"), &len);
  ck_assert_ptr_nonnull(data);
  ck_assert_int_eq(tu_write_file(path_in("trunc.png"), data, len - 20), 0);
  free(data);
  ck_assert_int_eq(fp8_png_read_info(path_in("trunc.png"), &info, err, sizeof err), FP8_EFORMAT);
}
END_TEST

/* ------------------------------------------------------------------ PNG data (png_deflate.c) */

/* Adler-32 the textbook way (RFC 1950 8.2), one byte at a time. */
static uint32_t adler_ref(const uint8_t *p, size_t n) {
  uint32_t a = 1, b = 0;
  for (size_t i = 0; i < n; i++) {
    a = (a + p[i]) % 65521;
    b = (b + a) % 65521;
  }
  return b << 16 | a;
}

static uint8_t lcg(uint32_t *s) {
  *s = *s * 1664525u + 1013904223u;
  return (uint8_t)(*s >> 24);
}

START_TEST(test_png_adler32) {
  ck_assert_uint_eq(fp8_png_adler32(1, (const uint8_t *)"Wikipedia", 9), 0x11E60398u);
  /* around the 32-byte steps and the reductions every 5536 bytes; all-255 bytes give the
   * largest sums */
  enum { N = 200000 };
  uint8_t *buf = malloc(N);
  ck_assert_ptr_nonnull(buf);
  const size_t lens[] = {0, 1, 31, 32, 33, 5535, 5536, 5537, 11072, 65536, N};
  for (int fill = 0; fill < 2; fill++) {
    uint32_t seed = 7;
    for (size_t i = 0; i < N; i++) buf[i] = fill ? 255 : lcg(&seed);
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
      size_t n = lens[k], h = n / 3;
      ck_assert_uint_eq(fp8_png_adler32(1, buf, n), adler_ref(buf, n));
      ck_assert_uint_eq(fp8_png_adler32(fp8_png_adler32(1, buf, h), buf + h, n - h), adler_ref(buf, n));
      /* every loop variant this CPU runs: the baseline one, and AVX2 where there is one */
      ck_assert_uint_eq(fp8_png_adler32_isa(1, buf, n, 0), adler_ref(buf, n));
#if defined(__x86_64__) && defined(__GNUC__)
      if (__builtin_cpu_supports("avx2")) {
        ck_assert_uint_eq(fp8_png_adler32_isa(1, buf, n, 1), adler_ref(buf, n));
        ck_assert_uint_eq(fp8_png_adler32_isa(fp8_png_adler32_isa(1, buf, h, 1), buf + h, n - h, 1),
                          adler_ref(buf, n));
      }
#endif
    }
  }
  free(buf);
}
END_TEST

/* Written, read back with libpng (zlib inflates the data): the same pixels. The zlib stream's
 * header is valid and its trailer is the Adler-32 of the filtered rows (inflaters need not
 * check it). */
static void roundtrip_image(const char *name, const uint8_t *rgb, int w, int h) {
  const char *p = path_in(name);
  ck_assert_msg(fp8_png_write(p, rgb, w, h, NULL, 0, err, sizeof err) == FP8_OK, "%s: %s", name, err);
  image im = load(p);
  ck_assert_int_eq(im.w, w);
  ck_assert_int_eq(im.h, h);
  ck_assert_msg(memcmp(im.rgb, rgb, (size_t)w * h * 3) == 0, "%s: pixels differ", name);
  free(im.rgb);
  uint8_t *z;
  size_t zn, row = (size_t)w * 3;
  ck_assert_int_eq(fp8_png_deflate(rgb, w, h, &z, &zn), FP8_OK);
  ck_assert(zn > 6 && (z[0] & 15) == 8 && (z[0] * 256 + z[1]) % 31 == 0);
  uint8_t *f = malloc((row + 1) * (size_t)h);
  for (int y = 0; y < h; y++) {
    f[(row + 1) * y] = 0;
    memcpy(f + (row + 1) * y + 1, rgb + row * y, row);
  }
  uint32_t want = adler_ref(f, (row + 1) * (size_t)h);
  uint32_t got = (uint32_t)z[zn - 4] << 24 | (uint32_t)z[zn - 3] << 16 | (uint32_t)z[zn - 2] << 8 | z[zn - 1];
  ck_assert_uint_eq(got, want);
  free(f);
  free(z);
}

START_TEST(test_png_deflate_roundtrip) {
  uint32_t seed = 1;
  uint8_t one[3] = {10, 20, 30};
  roundtrip_image("one.png", one, 1, 1);
  /* noise: literals only, over several 16384-symbol blocks */
  enum { NW = 200, NH = 150 };
  uint8_t *noise = malloc(NW * NH * 3);
  for (int i = 0; i < NW * NH * 3; i++) noise[i] = lcg(&seed);
  roundtrip_image("noise.png", noise, NW, NH);
  free(noise);
  /* flat: runs to the pixel on the left and the row above; a few bytes per row */
  enum { FW = 640, FH = 480 };
  uint8_t *flat = malloc(FW * FH * 3);
  memset(flat, 250, FW * FH * 3);
  roundtrip_image("flat.png", flat, FW, FH);
  uint8_t *z;
  size_t zn;
  ck_assert_int_eq(fp8_png_deflate(flat, FW, FH, &z, &zn), FP8_OK);
  ck_assert_uint_lt(zn, 4096);
  free(z);
  /* a chart-like picture: white, grid lines, a diagonal, a small glyph stamped far apart (the
   * hashed candidate), a noisy band */
  for (int y = 0; y < FH; y++)
    for (int x = 0; x < FW; x++) {
      uint8_t *q = flat + ((size_t)y * FW + x) * 3;
      int grid = x % 64 == 0 || y % 48 == 0, diag = abs(x - 4 * y / 3) < 2;
      int glyph = (x % 97) < 5 && (y % 61) < 7 && ((x * 7 + y * 3) % 5) < 3;
      uint8_t v = grid ? 225 : diag ? 40 : glyph ? 0 : 255;
      q[0] = v;
      q[1] = diag ? 114 : v;
      q[2] = y > 400 && y < 410 ? lcg(&seed) : v;
    }
  roundtrip_image("chart.png", flat, FW, FH);
  free(flat);
  /* rows wider than the 32 KiB window (no match one row up); one pixel wide, 5000 tall (the
   * band of rows moves on many times) */
  enum { WW = 11000, WH = 4, TH = 5000 };
  uint8_t *wide = malloc(WW * WH * 3);
  for (int i = 0; i < WW * 3; i++) wide[i] = wide[WW * 3 + i] = lcg(&seed) & 0xF0;
  for (int i = 0; i < WW * 3; i++) wide[2 * WW * 3 + i] = wide[3 * WW * 3 + i] = (uint8_t)(i / 7);
  roundtrip_image("wide.png", wide, WW, WH);
  for (int i = 0; i < TH * 3; i++) wide[i] = (uint8_t)((i / 3) % 50 < 25 ? 0 : i % 3 * 100 + (i / 900));
  roundtrip_image("tall.png", wide, 1, TH);
  free(wide);
  ck_assert_int_eq(fp8_png_deflate(one, 0, 1, &z, &zn), FP8_EINVAL);
}
END_TEST

/* cairo RGB24 pixels (native 0xXXRRGGBB words) to r, g, b: every variant against the
 * definition, at row lengths around the SSSE3 loop's 4-pixel steps and 16-pixel tail, with
 * the bytes after the row left alone */
START_TEST(test_xrgb_to_rgb) {
  enum { N = 1203 };
  uint32_t *in = malloc(N * sizeof *in);
  uint8_t *want = malloc(3 * N + 16), *got = malloc(3 * N + 16);
  ck_assert(in && want && got);
  uint32_t seed = 11;
  for (size_t i = 0; i < N; i++)
    in[i] = (uint32_t)lcg(&seed) << 24 | (uint32_t)lcg(&seed) << 16 | (uint32_t)lcg(&seed) << 8 | lcg(&seed);
  const size_t lens[] = {0, 1, 3, 4, 5, 15, 16, 17, 19, 20, 21, 35, 36, 1200, N};
  int variants = 1;
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("ssse3")) variants = 2;
#endif
  for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
    size_t n = lens[k];
    memset(want, 0xA5, 3 * N + 16);
    for (size_t i = 0; i < n; i++) {
      want[3 * i] = (uint8_t)(in[i] >> 16);
      want[3 * i + 1] = (uint8_t)(in[i] >> 8);
      want[3 * i + 2] = (uint8_t)in[i];
    }
    for (int isa = -1; isa < variants; isa++) {
      memset(got, 0xA5, 3 * N + 16);
      plot_xrgb_to_rgb((const uint8_t *)in, got, n, isa);
      ck_assert_msg(memcmp(got, want, 3 * N + 16) == 0, "n %zu isa %d", n, isa);
    }
  }
  free(in);
  free(want);
  free(got);
}
END_TEST

/* The warm-up draws a chart and writes nothing: no file under its sentinel name, in the
 * working directory or anywhere we look; a chart after it is the same as one without it
 * (the same bytes as a chart drawn in a fresh process, test_report's --jobs comparison). */
START_TEST(test_warm_up_writes_nothing) {
  char cwd[4096];
  ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
  ck_assert_int_eq(chdir(tmpdir), 0);
  int rc = fp8_plot_warm_up(err, sizeof err);
  ck_assert_int_eq(chdir(cwd), 0);
  ck_assert_msg(rc == FP8_OK, "%s", err);
  DIR *d = opendir(tmpdir);
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
  fp8_step_heatmap h = {NX, NY, x, yl, v, 0, -4, 4, "overshoot (binades)"};
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
   * -2 is halfway from the quiet end (160,186,214) to (240,240,240); beyond vmax dark red. */
  assert_color(&im, 590, 306, 230, 159, 0, 4);
  assert_color(&im, 590, 464, 200, 213, 227, 3);
  assert_color(&im, 925, 620, 190, 190, 190, 2);
  assert_color(&im, 300, 150, 111, 1, 10, 3);
  free(im.rgb);

  /* automatic range: the data's with the threshold; one column; errors */
  fp8_step_heatmap one = {1, NY, x, yl, v, 0, 0, 0, NULL};
  ck_assert_msg(fp8_plot_step_heatmap(path_in("one.png"), &c, &one, err, sizeof err) == FP8_OK, "%s", err);
  double xd[3] = {0, 2, 1};
  fp8_step_heatmap bad = {3, 1, xd, yl, v, 0, 0, 0, NULL};
  ck_assert_int_eq(fp8_plot_step_heatmap(path_in("bad.png"), &c, &bad, err, sizeof err), FP8_EINVAL);
  fp8_step_heatmap badr = {NX, NY, x, yl, v, 5, -4, 4, NULL}; /* threshold outside the range */
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
  fp8_step_heatmap h = {NX, NY, x, yl, v, 0, -4, 4, "overshoot (binades)"};
  fp8_chart c = base_chart("one loud step among 10,000");
  const char *p = path_in("stepheat_many.png");
  ck_assert_msg(fp8_plot_step_heatmap(p, &c, &h, err, sizeof err) == FP8_OK, "%s", err);
  image im = load(p);
  /* the quiet colour of -2 (as in test_step_heatmap) along row 0 (the bottom row) gives the
   * cells' x extent; rows are thirds of the cells' height */
  const uint8_t quiet[3] = {200, 213, 227};
  int qx0 = -1, qx1 = -1, y0 = -1, y1 = -1;
  for (int y = im.h - 1; y >= 0 && y1 < 0; y--) /* the bottom row's lowest line of cells */
    if (longest_run(&im, y, quiet, 3, &qx0, &qx1) > im.w / 2) y1 = y;
  ck_assert_msg(y1 > 0, "no row of quiet cells found");
  for (int y = y1; y >= 0 && near(px(&im, (qx0 + qx1) / 2, y), 200, 213, 227, 3); y--) y0 = y;
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
  fp8_step_heatmap h = {NX, NY, x, yl, v, 0, -4, 4, NULL};
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
  char *log = strdup(path_in("out.log"));
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
  free(log);

  /* The heatmap in between (its own colour map, fonts) changed nothing in the line chart. */
  image a = load(path_in("a.png")), b = load(path_in("b.png"));
  ck_assert_int_eq(a.w, b.w);
  ck_assert_int_eq(a.h, b.h);
  ck_assert_int_eq(memcmp(a.rgb, b.rgb, (size_t)a.w * a.h * 3), 0);
  free(a.rgb);
  free(b.rgb);
}
END_TEST

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
  ck_assert_int_eq(count_entries(tmpdir), 0);
  /* The same description draws (no bars at all too); a file that cannot be written leaves none. */
  ck_assert_msg(fp8_plot_gantt(p, &c, &ok, err, sizeof err) == FP8_OK, "%s", err);
  ok.nbars = 0;
  ok.nkinds = 0;
  ck_assert_msg(fp8_plot_gantt(p, &c, &ok, err, sizeof err) == FP8_OK, "%s", err);
  ck_assert_int_eq(fp8_plot_gantt(path_in("no/dir/g.png"), &c, &ok, err, sizeof err), FP8_EIO);
  ck_assert_int_eq(count_entries(tmpdir), 1);
}
END_TEST

/* ------------------------------------------------------------------ errors */

START_TEST(test_unwritable_path) {
  double x[2] = {0, 1};
  fp8_series s = {x, x, 2, "s", 0, 0, 0, 0, 0};
  fp8_chart c = base_chart("nowhere");
  ck_assert_int_eq(fp8_plot_lines(path_in("missing/dir/x.png"), &c, &s, 1, NULL, 0, err, sizeof err),
                   FP8_EIO);
  ck_assert_ptr_nonnull(strstr(err, "missing/dir"));
  ck_assert_int_eq(count_entries(tmpdir), 0);
  /* The target is a directory: the temporary file is written, the rename fails, and the
   * temporary is removed. */
  ck_assert_int_eq(mkdir(path_in("adir"), 0755), 0);
  ck_assert_int_eq(fp8_plot_lines(path_in("adir"), &c, &s, 1, NULL, 0, err, sizeof err), FP8_EIO);
  ck_assert_int_eq(count_entries(tmpdir), 1);
  /* A file where a directory should be. */
  ck_assert_int_eq(tu_write_file(path_in("file"), "x", 1), 0);
  const char *xl[] = {"a"}, *yl[] = {"b"};
  double v[1] = {1};
  fp8_heatmap h = {1, 1, xl, yl, v, NULL, NULL, 0, 0, 0, 0, 0, NULL, NULL};
  ck_assert_int_eq(fp8_plot_heatmap(path_in("file/h.png"), &c, &h, err, sizeof err), FP8_EIO);
  ck_assert_int_eq(count_entries(tmpdir), 2);
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

  ck_assert_int_eq(count_entries(tmpdir), 0);
}
END_TEST

static Suite *plot_suite(void) {
  Suite *s = suite_create("plot");
  TCase *tc = tcase_create("plot");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_png_roundtrip);
  tcase_add_test(tc, test_png_errors);
  tcase_add_test(tc, test_png_adler32);
  tcase_add_test(tc, test_png_deflate_roundtrip);
  tcase_add_test(tc, test_xrgb_to_rgb);
  tcase_add_test(tc, test_warm_up_writes_nothing);
  tcase_add_test(tc, test_palette);
  tcase_add_test(tc, test_line_chart);
  tcase_add_test(tc, test_line_log_skips_bad_values);
  tcase_add_test(tc, test_heatmap_single_high_cell);
  tcase_add_test(tc, test_heatmap_log_nan_text);
  tcase_add_test(tc, test_step_heatmap);
  tcase_add_test(tc, test_step_heatmap_many_steps);
  tcase_add_test(tc, test_long_title_fits);
  tcase_add_test(tc, test_histogram);
  tcase_add_test(tc, test_bars);
  tcase_add_test(tc, test_bars_xlabel_clear_of_slanted_labels);
  tcase_add_test(tc, test_bar_value_labels_apart);
  tcase_add_test(tc, test_heatmap_budget_outline);
  tcase_add_test(tc, test_gantt);
  tcase_add_test(tc, test_gantt_zoom);
  tcase_add_test(tc, test_gantt_widen_top_only);
  tcase_add_test(tc, test_gantt_errors);
  tcase_add_test(tc, test_charts_independent_and_quiet);
  tcase_add_test(tc, test_unwritable_path);
  tcase_add_test(tc, test_invalid_args);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run_suite(plot_suite()); }
