/* plot_helpers.h: PNG read-back and pixel checks shared by the chart tests, which draw into the
 * temporary folder of tu_dir.h (definitions and comments in plot_helpers.c). */
#ifndef FP8LAB_TESTS_PLOT_HELPERS_H
#define FP8LAB_TESTS_PLOT_HELPERS_H

#include "plot.h"
#include "testutil.h"
#include "tu_dir.h"

extern char err[512];

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
image load(const char *path);
const uint8_t *px(const image *im, int x, int y);
int near(const uint8_t *p, int r, int g, int b, int tol);
void assert_color(const image *im, int x, int y, int r, int g, int b, int tol);
void assert_corners_white(const image *im);

long count_color(const image *im, int x0, int y0, int x1, int y1, const uint8_t rgb[3],
                        int tol);
int longest_run(const image *im, int y, const uint8_t rgb[3], int tol, int *x0, int *x1);
void assert_info(const char *path, int w, int h);
fp8_chart base_chart(const char *title);

#endif
