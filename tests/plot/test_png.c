/* test_png.c: the PNG I/O of src/plot (png_io.c, png_deflate.c): round trips with text chunks,
 * errors, Adler-32 and the stored deflate stream against references, the XRGB conversion. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "plot_internal.h" /* plot_xrgb_to_rgb */
#include "png_deflate.h"
#include "testutil.h"
#include "plot_helpers.h"
#include "tu_dir.h"

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
  ck_assert_int_eq(tu_count_entries(g_dir), 1);
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
  ck_assert_int_eq(tu_count_entries(g_dir), 0);

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

/* ------------------------------------------------------------------ labels */

/* A step heatmap's row labels are cut in the middle (issue 40: 89,000 expert tensors named
 * model.layers.L.mlp.experts.E.<gemm>.<role>, cut at the end, left "model.layers.15.mlp.
 * experts.94.do..." and "...ga...": the GEMM lost). Expected strings by hand: maxchars - 1
 * characters kept, (maxchars - 1) / 2 of them from the start, "\u2026" between. */
START_TEST(test_label_cut_middle) {
  char out[256];
  const char *name = "model.layers.15.mlp.experts.94.down_proj.input"; /* 46 characters */
  plot_plain_text_mid(name, 21, out, sizeof out);
  ck_assert_str_eq(out, "model.laye\u2026proj.input"); /* 10 + 10 */
  plot_plain_text_mid(name, 38, out, sizeof out);
  ck_assert_str_eq(out, "model.layers.15.ml\u2026.94.down_proj.input"); /* 18 + 19 */
  plot_plain_text_mid(name, 46, out, sizeof out); /* fits: unchanged */
  ck_assert_str_eq(out, name);
  plot_plain_text_mid(name, 0, out, sizeof out); /* no limit */
  ck_assert_str_eq(out, name);
  /* '#' doubled for PLplot, a character of several bytes counted once */
  plot_plain_text_mid("a#\u00e9bcdefg#h", 6, out, sizeof out); /* 10 characters */
  ck_assert_str_eq(out, "a##\u2026g##h");
  /* the end cut, for comparison (plot_plain_text) */
  plot_plain_text(name, 21, out, sizeof out);
  ck_assert_str_eq(out, "model.layers.15.mlp.\u2026");
}
END_TEST

TU_MAIN("png", "plot", setup, teardown, 120, test_png_roundtrip, test_png_errors, test_png_adler32,
        test_png_deflate_roundtrip, test_xrgb_to_rgb, test_label_cut_middle)
