/* plot_canvas.c: the chart library's plumbing (plot.h): the PLplot stream and its colours,
 * the text primitives, the argument checks every chart shares. Each chart: a fresh PLplot
 * stream on the extcairo device, drawing through a cairo context on a white RGB24 image
 * surface that this file owns and keeps from chart to chart (the driver paints no background,
 * hence the white fill; memcairo, which copies the caller's buffer into its own surface and
 * back a byte at a time, cost a sixth of a report's instructions for the same pixels), the
 * data drawn in a plot viewport, then every piece of text (title, axis labels, tick labels,
 * legend) drawn in page coordinates (one world unit = one pixel, y up) so that its place is
 * computed here, in pixels, and nothing is clipped by the plot viewport. The stream is ended,
 * the surface converted to RGB bytes (one SSSE3 shuffle per 4 pixels where the CPU has it)
 * and encoded by png_io.c. The axes and legend are plot_layout.c; the chart kinds
 * plot_lines.c, plot_heatmap.c and plot_bars.c.
 *
 * Text sizes are cap heights in pixels: PLplot's character height (plschr, mm) is what the
 * cairo driver renders as the height of a capital (measured: 5 mm at 72 dpi gives 14 px caps),
 * and a DejaVu Sans character is at most ~0.8 cap heights wide on average, the figure used to
 * reserve room for text whose width only cairo knows. */
#include "plot_internal.h"

#include <cairo.h>
#include <math.h>
#include <plplot.h>
#include <pthread.h>
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

const char plot_no_file[] = "(chart drawn, not written)";

#define DEFAULT_W 1200
#define DEFAULT_H 800

int fp8_plot_color_rgb(fp8_color c, uint8_t rgb[3]) {
  if ((int)c < 0 || c >= FP8_COLOR_COUNT) return FP8_EINVAL;
  memcpy(rgb, okabe_ito[c], 3);
  return FP8_OK;
}

/* ------------------------------------------------------------------ the canvas */

static void on_plabort(PLCHAR_VECTOR msg) {
  if (!plot_abort_msg[0]) snprintf(plot_abort_msg, sizeof plot_abort_msg, "%s", msg);
}

static int extcairo_available(void) {
  /* plgDevs fills caller arrays of at least as many entries as there are drivers. */
  const char *menu[128], *names[128];
  const char **mp = menu, **np = names;
  int n = 128;
  plgDevs(&mp, &np, &n);
  for (int i = 0; i < n && i < 128; i++)
    if (np[i] && strcmp(np[i], "extcairo") == 0) return 1;
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

/* The drawing surface (cairo RGB24: 32 bits a pixel, x8r8g8b8 in native order), kept from
 * chart to chart of the same size (guarded by plot_lock). */
static cairo_surface_t *g_surface;

static int get_surface(int W, int H) {
  if (g_surface && (cairo_image_surface_get_width(g_surface) != W ||
                    cairo_image_surface_get_height(g_surface) != H)) {
    cairo_surface_destroy(g_surface);
    g_surface = NULL;
  }
  if (!g_surface) {
    g_surface = cairo_image_surface_create(CAIRO_FORMAT_RGB24, W, H);
    if (cairo_surface_status(g_surface) != CAIRO_STATUS_SUCCESS) {
      cairo_surface_destroy(g_surface);
      g_surface = NULL;
      return FP8_ENOMEM;
    }
  }
  cairo_surface_flush(g_surface);
  /* white: the driver paints no background */
  memset(cairo_image_surface_get_data(g_surface), 255,
         (size_t)cairo_image_surface_get_stride(g_surface) * (size_t)H);
  cairo_surface_mark_dirty(g_surface);
  return FP8_OK;
}

/* ------------------------------------------------------------------ pixels */

/* cairo RGB24 is a native-order word per pixel, 0xXXRRGGBB: in little-endian memory b, g, r, x.
 * Byte-swapped and shifted right by 8 it is r, g, b, 0 in memory; four of them make 12 bytes. */
static void xrgb_generic(const uint8_t *in, uint8_t *out, size_t n) {
  size_t i = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  for (; i + 16 + 4 <= n; i += 4, in += 16, out += 12) {
    uint32_t w[4];
    memcpy(w, in, 16);
    for (int k = 0; k < 4; k++) w[k] = __builtin_bswap32(w[k]) >> 8;
    uint64_t lo = (uint64_t)w[0] | (uint64_t)w[1] << 24 | (uint64_t)w[2] << 48;
    uint32_t hi = w[2] >> 16 | w[3] << 8;
    memcpy(out, &lo, 8);
    memcpy(out + 8, &hi, 4);
  }
#endif
  for (; i < n; i++, in += 4, out += 3) {
    uint32_t v;
    memcpy(&v, in, 4);
    out[0] = (uint8_t)(v >> 16);
    out[1] = (uint8_t)(v >> 8);
    out[2] = (uint8_t)v;
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
/* SSSE3: one shuffle makes 12 bytes of 4 pixels; 16-byte stores that overlap, the last 16
 * pixels of a row left to the generic loop so that nothing is written past the row */
__attribute__((target("ssse3"))) static void xrgb_ssse3(const uint8_t *in, uint8_t *out, size_t n) {
  const __m128i sh = _mm_setr_epi8(2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12, -1, -1, -1, -1);
  size_t i = 0;
  for (; i + 16 + 4 <= n; i += 4, in += 16, out += 12)
    _mm_storeu_si128((__m128i *)out, _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)in), sh));
  xrgb_generic(in, out, n - i);
}
#endif

void plot_xrgb_to_rgb(const uint8_t *in, uint8_t *out, size_t n, int isa) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (isa != 0 && (isa == 1 || __builtin_cpu_supports("ssse3"))) {
    xrgb_ssse3(in, out, n);
    return;
  }
#endif
  (void)isa;
  xrgb_generic(in, out, n);
}

int plot_canvas_begin(canvas *c, const fp8_chart *ch, char *err, size_t errlen) {
  memset(c, 0, sizeof *c);
  int rc = check_size(ch, &c->W, &c->H, err, errlen);
  if (rc != FP8_OK) return rc;
  c->rgb = malloc((size_t)c->W * (size_t)c->H * 3);
  if (!c->rgb) {
    snprintf(err, errlen, "out of memory for a %dx%d chart", c->W, c->H);
    return FP8_ENOMEM;
  }
  pthread_mutex_lock(&plot_lock);
  if (!extcairo_available()) {
    pthread_mutex_unlock(&plot_lock);
    free(c->rgb);
    c->rgb = NULL;
    snprintf(err, errlen, "PLplot has no extcairo device (install plplot-driver-cairo)");
    return FP8_EIO;
  }
  if (get_surface(c->W, c->H) != FP8_OK || !(c->cr = cairo_create(g_surface)) ||
      cairo_status(c->cr) != CAIRO_STATUS_SUCCESS) {
    if (c->cr) cairo_destroy(c->cr);
    c->cr = NULL;
    pthread_mutex_unlock(&plot_lock);
    free(c->rgb);
    c->rgb = NULL;
    snprintf(err, errlen, "out of memory for a %dx%d chart", c->W, c->H);
    return FP8_ENOMEM;
  }
  plot_abort_msg[0] = 0;
  plsabort(on_plabort);
  plgstrm(&c->prev_stream);
  PLINT strm;
  plmkstrm(&strm);
  plsdev("extcairo");
  plspage(0.0, 0.0, c->W, c->H, 0, 0);
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
  set_color0(CI_WHITE_T, white, 0.8);
  plinit();
  pl_cmd(PLESC_DEVINIT, c->cr);
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

int plot_canvas_end(canvas *c, int rc, const char *path, const fp8_chart *ch, char *err,
                    size_t errlen) {
  if (c->open) {
    plend1();
    plsstrm(c->prev_stream);
    plsabort(NULL);
    c->open = 0;
    cairo_destroy(c->cr);
    c->cr = NULL;
    cairo_surface_flush(g_surface);
    const uint8_t *src = cairo_image_surface_get_data(g_surface);
    const size_t stride = (size_t)cairo_image_surface_get_stride(g_surface);
    const size_t W = (size_t)c->W, H = (size_t)c->H;
    for (size_t y = 0; y < H; y++) plot_xrgb_to_rgb(src + y * stride, c->rgb + y * W * 3, W, -1);
    if (rc == FP8_OK && plot_abort_msg[0]) {
      snprintf(err, errlen, "%s: PLplot: %s", path, plot_abort_msg);
      rc = FP8_EIO;
    }
    pthread_mutex_unlock(&plot_lock);
  }
  if (rc == FP8_OK && path != plot_no_file)
    rc = fp8_png_write(path, c->rgb, c->W, c->H, ch->text, ch->ntext, err, errlen);
  free(c->rgb);
  c->rgb = NULL;
  return rc;
}

/* No text: pango's font map, made for the first text, starts threads ("[pango] fontconfig")
 * that live as long as the process, and a process that is to fork (rep_draw_plots) must not
 * have any. Lines and a fill at the default size load the driver and its libraries. */
int fp8_plot_warm_up(char *err, size_t errlen) {
  const fp8_chart ch = {0};
  canvas c;
  int rc = plot_canvas_begin(&c, &ch, err, errlen);
  if (rc != FP8_OK) return rc;
  plot_page_mode(&c);
  PLFLT x[4] = {100, 600, 1100, 100}, y[4] = {100, 700, 100, 100};
  plcol0(CI_PAL + 1);
  plfill(4, x, y);
  plcol0(CI_FG);
  plwidth(2.0);
  plline(4, x, y);
  return plot_canvas_end(&c, FP8_OK, plot_no_file, &ch, err, errlen);
}

fp8_color plot_pick_color(canvas *c, fp8_color want) {
  if (want != FP8_COLOR_AUTO) return want;
  return auto_order[c->auto_i++ % N_AUTO];
}

/* ------------------------------------------------------------------ text */

/* Text sizes are cap heights in pixels. */
void plot_text_size(const canvas *c, double cap_px) { plschr(cap_px / c->ppmm, 1.0); }

size_t plot_utf8_len(const char *s) {
  size_t n = 0;
  for (; *s; s++)
    if (((unsigned char)*s & 0xC0) != 0x80) n++;
  return n;
}

double plot_text_w(const char *s, double cap) {
  return (double)plot_utf8_len(s) * TEXT_CHAR_W * cap;
}

void plot_plain_text(const char *s, size_t maxchars, char *out, size_t outlen) {
  size_t o = 0, chars = 0, total = plot_utf8_len(s ? s : "");
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

void plot_plain_text_mid(const char *s, size_t maxchars, char *out, size_t outlen) {
  size_t total = plot_utf8_len(s ? s : "");
  if (!s || maxchars <= 1 || total <= maxchars) {
    plot_plain_text(s, maxchars, out, outlen);
    return;
  }
  size_t head = (maxchars - 1) / 2, skip_to = total - (maxchars - 1 - head), o = 0, chars = 0;
  int dots = 0;
  for (; *s && o + 8 < outlen; s++) {
    if (((unsigned char)*s & 0xC0) != 0x80) chars++; /* chars: this character's number, 1.. */
    if (chars > head && chars <= skip_to) {
      if (!dots) {
        memcpy(out + o, "\u2026", 3);
        o += 3;
        dots = 1;
      }
      continue;
    }
    if (*s == '#') out[o++] = '#';
    out[o++] = *s;
  }
  out[o] = 0;
}

void plot_plain_text_start(const char *s, size_t maxchars, char *out, size_t outlen) {
  size_t total = plot_utf8_len(s ? s : "");
  if (!s || maxchars <= 1 || total <= maxchars) {
    plot_plain_text(s, maxchars, out, outlen);
    return;
  }
  /* the longest tail that starts after a '.' and fits with the ellipsis, else the last part */
  const char *tail = NULL, *last = NULL;
  for (const char *q = s; *q; q++)
    if (*q == '.' && q[1]) {
      last = q + 1;
      if (!tail && plot_utf8_len(q + 1) + 1 <= maxchars) tail = q + 1;
    }
  if (!tail) tail = last;
  if (!tail) { /* no dot: the last maxchars - 1 characters */
    size_t skip = total - (maxchars - 1), chars = 0;
    for (tail = s; *tail; tail++)
      if (((unsigned char)*tail & 0xC0) != 0x80 && chars++ == skip) break;
  }
  size_t o = 0;
  memcpy(out, "\u2026", 3);
  o = 3;
  for (; *tail && o + 8 < outlen; tail++) {
    if (*tail == '#') out[o++] = '#';
    out[o++] = *tail;
  }
  out[o] = 0;
}

void plot_page_mode(const canvas *c) {
  plvpor(0.0, 1.0, 0.0, 1.0);
  plwind(0.0, c->W, 0.0, c->H);
}

/* Draws already-escaped text at pixel (x, ytop) measured from the top-left corner, rotated by
 * angle degrees, justified by just (0 left, 0.5 centre, 1 right) along its direction and
 * centred vertically on ytop. Needs page_mode. */
void plot_text_raw(const canvas *c, double x, double ytop, double angle, double just,
                   double cap, int color, const char *s) {
  plot_text_size(c, cap);
  plcol0(color);
  double a = angle * M_PI / 180.0;
  plptex(x, c->H - ytop, cos(a), sin(a), just, s);
}

void plot_text_user(const canvas *c, double x, double ytop, double angle, double just,
                    double cap, int color, const char *s, size_t maxchars) {
  if (!s || !*s) return;
  char buf[1024];
  plot_plain_text(s, maxchars, buf, sizeof buf);
  plot_text_raw(c, x, ytop, angle, just, cap, color, buf);
}

void plot_text_user_mid(const canvas *c, double x, double ytop, double angle, double just,
                        double cap, int color, const char *s, size_t maxchars) {
  if (!s || !*s) return;
  char buf[1024];
  plot_plain_text_mid(s, maxchars, buf, sizeof buf);
  plot_text_raw(c, x, ytop, angle, just, cap, color, buf);
}

void plot_text_user_start(const canvas *c, double x, double ytop, double angle, double just,
                          double cap, int color, const char *s, size_t maxchars) {
  if (!s || !*s) return;
  char buf[1024];
  plot_plain_text_start(s, maxchars, buf, sizeof buf);
  plot_text_raw(c, x, ytop, angle, just, cap, color, buf);
}

double plot_fit_cap(const char *s, double cap, double w) {
  double tw = plot_text_w(s ? s : "", cap);
  if (tw <= w || tw <= 0) return cap;
  double f = w / tw;
  return cap * (f < 0.6 ? 0.6 : f);
}

/* ------------------------------------------------------------------ argument checks */

int plot_check_common(const char *path, const fp8_chart *ch, char *err, size_t errlen) {
  if (!path || !*path) FAIL(FP8_EINVAL, "chart: expected an output path, got none");
  if (!ch) FAIL(FP8_EINVAL, "%s: expected a chart description, got NULL", path);
  int W, H;
  int rc = check_size(ch, &W, &H, err, errlen);
  if (rc != FP8_OK) return rc;
  if (ch->ntext && !ch->text) FAIL(FP8_EINVAL, "%s: ntext %zu but no text", path, ch->ntext);
  return FP8_OK;
}

int plot_check_color(const char *path, const char *what, size_t i, fp8_color col, char *err,
                     size_t errlen) {
  if ((int)col < 0 || col >= FP8_COLOR_COUNT)
    FAIL(FP8_EINVAL, "%s: %s %zu: color %d outside 0..%d", path, what, i, (int)col,
         FP8_COLOR_COUNT - 1);
  return FP8_OK;
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
