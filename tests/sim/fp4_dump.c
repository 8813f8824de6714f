/* fp4_dump.c: fp8lab's FP4 quantizers (src/sim/fp4.h) as a filter, for tests/sim/test_fp4.py
 * to hold against its independent reference (ml_dtypes, tools/reference/fp4ref.py).
 *
 *   fp4_dump e2m1 OUT                      every BF16 bit pattern's E2M1 code, 65536 bytes
 *   fp4_dump nvfp4 ROWS COLS SQUARE AMAX max6|mae|mse E4M3_MAX IN OUT
 *   fp4_dump mxfp4 ROWS COLS ceil|floor IN OUT
 *   fp4_dump rht N IN OUT                  the random Hadamard transform (float32 out)
 *   fp4_dump sr N IN OUT                   per value: p_up, e_sq, p_zero (ideal, then TE's
 *                                          8-bit rule) as doubles, then the 256 codes of
 *                                          fp8_e2m1_encode_sr for r = 0..255
 *
 * IN: ROWS x COLS little-endian float32. OUT: the codes (ROWS x COLS bytes), the scales (one
 * byte per run), the dequantized values (float32), then the statistics n, nonfinite, zeros,
 * overflow, underflow, subnormal, clipped as int64 and sum_sq_err, sum_sq, sum_sq_hat as double.
 * Exit 0, or 2 on bad arguments or files. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp4.h"

static int fail(const char *what) {
  fprintf(stderr, "fp4_dump: %s\n", what);
  return 2;
}

static int quantize(int argc, char **argv) {
  int nv = strcmp(argv[1], "nvfp4") == 0;
  if (argc != (nv ? 10 : 7)) return fail("usage: see tests/sim/fp4_dump.c");
  long long rows = atoll(argv[2]), cols = atoll(argv[3]);
  if (rows < 0 || cols < 0 || rows * cols > (1LL << 28)) return fail("bad shape");
  size_t n = (size_t)(rows * cols), B = nv ? FP8_NVFP4_BLOCK : FP8_MXFP4_BLOCK;
  size_t nruns = (size_t)rows * (((size_t)cols + B - 1) / B);
  float *x = malloc((n + 1) * sizeof *x), *xhat = malloc((n + 1) * sizeof *xhat);
  uint8_t *codes = malloc(n + 1), *scales = malloc(nruns + 1);
  if (!x || !xhat || !codes || !scales) return fail("out of memory");
  FILE *in = fopen(argv[nv ? 8 : 5], "rb");
  if (!in || fread(x, sizeof *x, n, in) != n) return fail("cannot read IN");
  fclose(in);
  fp8_stats st;
  fp8_stats_init(&st);
  int rc;
  if (nv) {
    fp8_nvfp4_params p = {.square = atoi(argv[4]), .global_amax = strtof(argv[5], NULL),
                          .e4m3_max = strtof(argv[7], NULL)};
    p.rule = strcmp(argv[6], "mae") == 0   ? FP8_NVFP4_4OVER6_MAE
           : strcmp(argv[6], "mse") == 0   ? FP8_NVFP4_4OVER6_MSE
           : strcmp(argv[6], "max6") == 0  ? FP8_NVFP4_MAX6
                                           : (fp8_nvfp4_scale_rule)-1;
    if ((int)p.rule < 0) return fail("bad rule");
    rc = fp8_nvfp4_quantize_f32(x, rows, cols, &p, codes, scales, xhat, &st);
  } else {
    fp8_mx_rounding r;
    if (fp8_mx_rounding_parse(argv[4], &r) != FP8_OK) return fail("bad rounding");
    rc = fp8_mxfp4_quantize_f32(x, rows, cols, r, codes, scales, xhat, &st);
  }
  if (rc != FP8_OK) return fail("quantize failed");
  FILE *out = fopen(argv[nv ? 9 : 6], "wb");
  if (!out) return fail("cannot write OUT");
  const int64_t cnt[7] = {st.n, st.nonfinite, st.zeros, st.overflow, st.underflow, st.subnormal,
                          st.clipped};
  const double sums[3] = {st.sum_sq_err, st.sum_sq, st.sum_sq_hat};
  int ok = fwrite(codes, 1, n, out) == n && fwrite(scales, 1, nruns, out) == nruns &&
           fwrite(xhat, sizeof *xhat, n, out) == n && fwrite(cnt, sizeof *cnt, 7, out) == 7 &&
           fwrite(sums, sizeof *sums, 3, out) == 3;
  if (fclose(out) != 0 || !ok) return fail("cannot write OUT");
  free(x);
  free(xhat);
  free(codes);
  free(scales);
  return 0;
}

static float *read_floats(const char *path, size_t n) {
  float *x = malloc((n + 1) * sizeof *x);
  FILE *in = fopen(path, "rb");
  if (!x || !in || fread(x, sizeof *x, n, in) != n) {
    free(x);
    x = NULL;
  }
  if (in) fclose(in);
  return x;
}

static int rht_sr(char **argv) {
  long long nn = atoll(argv[2]);
  if (nn < 0 || nn > (1LL << 24)) return fail("bad N");
  size_t n = (size_t)nn;
  float *x = read_floats(argv[3], n);
  if (!x) return fail("cannot read IN");
  FILE *out = fopen(argv[4], "wb");
  if (!out) return fail("cannot write OUT");
  int ok = 1;
  if (strcmp(argv[1], "rht") == 0) {
    float *y = malloc((n + 1) * sizeof *y);
    ok = y && fp8_rht16(x, n, y) == FP8_OK && fwrite(y, sizeof *y, n, out) == n;
    free(y);
  } else {
    for (size_t i = 0; i < n && ok; i++) {
      double v[6];
      fp8_e2m1_sr_expect(x[i], 0, &v[0], &v[1], &v[2]);
      fp8_e2m1_sr_expect(x[i], 1, &v[3], &v[4], &v[5]);
      uint8_t c[256];
      for (int r = 0; r < 256; r++) c[r] = fp8_e2m1_encode_sr(x[i], (uint8_t)r);
      ok = fwrite(v, sizeof *v, 6, out) == 6 && fwrite(c, 1, 256, out) == 256;
    }
  }
  free(x);
  if (fclose(out) != 0 || !ok) return fail("cannot write OUT");
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 5 && (strcmp(argv[1], "rht") == 0 || strcmp(argv[1], "sr") == 0))
    return rht_sr(argv);
  if (argc == 3 && strcmp(argv[1], "e2m1") == 0) {
    static uint8_t codes[65536];
    for (uint32_t b = 0; b < 65536; b++) {
      uint32_t w = b << 16;
      float f;
      memcpy(&f, &w, sizeof f);
      codes[b] = fp8_e2m1_encode(f);
    }
    FILE *out = fopen(argv[2], "wb");
    if (!out || fwrite(codes, 1, sizeof codes, out) != sizeof codes || fclose(out) != 0)
      return fail("cannot write OUT");
    return 0;
  }
  if (argc >= 2 && (strcmp(argv[1], "nvfp4") == 0 || strcmp(argv[1], "mxfp4") == 0))
    return quantize(argc, argv);
  return fail("usage: see tests/sim/fp4_dump.c");
}
