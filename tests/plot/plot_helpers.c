/* plot_helpers.c: the definitions of plot_helpers.h (see there). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plot.h"
#include "plot_helpers.h"
#include "testutil.h"

char err[512];

image load(const char *path) {
  image im = {0};
  int rc = fp8_png_read_rgb(path, &im.rgb, &im.w, &im.h, err, sizeof err);
  ck_assert_msg(rc == FP8_OK, "read %s: %s", path, err);
  return im;
}

const uint8_t *px(const image *im, int x, int y) {
  ck_assert(x >= 0 && y >= 0 && x < im->w && y < im->h);
  return im->rgb + ((size_t)y * im->w + x) * 3;
}

int near(const uint8_t *p, int r, int g, int b, int tol) {
  return abs(p[0] - r) <= tol && abs(p[1] - g) <= tol && abs(p[2] - b) <= tol;
}

void assert_color(const image *im, int x, int y, int r, int g, int b, int tol) {
  const uint8_t *p = px(im, x, y);
  ck_assert_msg(near(p, r, g, b, tol), "pixel (%d,%d) is %d,%d,%d, expected %d,%d,%d (+-%d)", x, y,
                p[0], p[1], p[2], r, g, b, tol);
}

void assert_corners_white(const image *im) {
  assert_color(im, 0, 0, 255, 255, 255, 0);
  assert_color(im, im->w - 1, 0, 255, 255, 255, 0);
  assert_color(im, 0, im->h - 1, 255, 255, 255, 0);
  assert_color(im, im->w - 1, im->h - 1, 255, 255, 255, 0);
}

/* Number of pixels of colour rgb (+-tol) in the rectangle [x0,x1) x [y0,y1). */
long count_color(const image *im, int x0, int y0, int x1, int y1, const uint8_t rgb[3],
                        int tol) {
  long n = 0;
  for (int y = y0; y < y1; y++)
    for (int x = x0; x < x1; x++)
      if (near(px(im, x, y), rgb[0], rgb[1], rgb[2], tol)) n++;
  return n;
}

/* Longest run of colour rgb (+-tol) along row y: its length, and its ends in *x0, *x1. */
int longest_run(const image *im, int y, const uint8_t rgb[3], int tol, int *x0, int *x1) {
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
void assert_info(const char *path, int w, int h) {
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

fp8_chart base_chart(const char *title) {
  fp8_chart c = {0};
  c.title = title;
  c.xlabel = "training step";
  c.ylabel = "value (units)";
  c.text = meta;
  c.ntext = NMETA;
  return c;
}
