/* test_quantize.c: quantize + statistics (src/sim/quant*.c, valhist.c): the log2 histogram, a
 * tensor by hand, clipped midpoints, edge cases, every instruction-set variant and the fused and
 * weighted paths against a plain per-element loop. Against values computed by hand and independent
 * references: the format definition evaluated in double (tests/common/testutil.c), a plain loop. */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "valhist.h"
#include "sim_helpers.h"

static uint64_t f2u_d(double x) {
  uint64_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

/* ------------------------------------------------------------------ statistics */

START_TEST(test_log2_histogram) {
  float x[] = {1.0f, 1.999f, 2.0f, -0.75f, 0x1p-149f, 0x3p-149f, 0x1p-127f, FLT_MAX, 0.0f, -0.0f,
               INFINITY, NAN, 0x1.fffffcp-127f /* largest subnormal */};
  int64_t h[FP8_LOG2_HIST_BINS];
  memset(h, 0, sizeof h);
  fp8_log2_histogram(x, sizeof x / sizeof x[0], h);
  /* independent: floor(log2|x|) in double */
  int64_t ref[FP8_LOG2_HIST_BINS];
  memset(ref, 0, sizeof ref);
  int64_t total = 0;
  for (size_t i = 0; i < sizeof x / sizeof x[0]; i++) {
    if (!isfinite(x[i]) || x[i] == 0) continue;
    int b = (int)floor(log2(fabs((double)x[i])));
    ref[b - FP8_LOG2_HIST_MIN]++;
    total++;
  }
  ck_assert_mem_eq(h, ref, sizeof h);
  ck_assert_int_eq(total, 9);
  ck_assert_int_eq(h[0 - FP8_LOG2_HIST_MIN], 2);
  ck_assert_int_eq(h[-149 - FP8_LOG2_HIST_MIN], 1);
  ck_assert_int_eq(h[-148 - FP8_LOG2_HIST_MIN], 1);
  ck_assert_int_eq(h[127 - FP8_LOG2_HIST_MIN], 1);
  ck_assert_int_eq(h[-127 - FP8_LOG2_HIST_MIN], 2);
}
END_TEST

START_TEST(test_stats_hand_tensor) {
  /* E4M3, scale 2: x*s = {2, 1000 (overflow), 2^-11 (underflow), 3*2^-9 (subnormal code 3),
   * 0, NaN, inf, -0, 448 (exactly max: no overflow), 1.0625*2 = 2.125 (tie -> 2)} */
  float x[] = {1.0f, 500.0f, 0x1p-12f, 0x3p-10f, 0.0f, NAN, INFINITY, -0.0f, 224.0f, 1.0625f};
  int n = 10;
  fp8_stats st;
  fp8_stats_init(&st);
  uint8_t q[10];
  float xh[10];
  fp8_quantize_f32(x, (size_t)n, 2.0f, FP8_E4M3, q, xh, &st);
  ck_assert_int_eq(st.n, 10);
  ck_assert_int_eq(st.nonfinite, 2);
  ck_assert_int_eq(st.zeros, 2);
  ck_assert_int_eq(st.overflow, 1);
  ck_assert_int_eq(st.underflow, 1);
  ck_assert_int_eq(st.subnormal, 1);
  ck_assert_uint_eq(q[1], 0x7E);
  ck_assert_uint_eq(q[2], 0x00);
  ck_assert_uint_eq(q[3], 0x03);
  ck_assert_uint_eq(q[5], 0x7F);
  ck_assert_uint_eq(q[6], 0x7E);
  ck_assert_uint_eq(q[7], 0x80);
  ck_assert_float_eq(xh[1], 224.0f);
  ck_assert_float_eq(xh[9], 1.0f);
  /* errors: 500-224, 2^-12 - 0, 1.0625 - 1 ; others exact */
  double err = (500.0 - 224.0) * (500.0 - 224.0) + ldexp(1, -24) + 0.0625 * 0.0625;
  double sq = 1.0 + 250000.0 + ldexp(1, -24) + 9.0 * ldexp(1, -20) + 224.0 * 224.0 + 1.0625 * 1.0625;
  ck_assert_double_eq_tol(st.sum_sq_err, err, err * 1e-15);
  ck_assert_double_eq_tol(st.sum_sq, sq, sq * 1e-15);
  ck_assert_double_eq_tol(fp8_stats_mse(&st), err / 8.0, err * 1e-15);
  ck_assert_double_eq_tol(fp8_stats_snr_db(&st), 10.0 * log10(sq / err), 1e-12);
  /* 1000 is past 464: clipped; 448 exactly is not even an overflow */
  ck_assert_int_eq(st.clipped, 1);
  /* xhat = {1, 224, 0, 3*2^-10, 0, -0, 224, 1} over the finite elements */
  double hq = 1.0 + 224.0 * 224.0 + 9.0 * ldexp(1, -20) + 224.0 * 224.0 + 1.0;
  ck_assert_double_eq_tol(st.sum_sq_hat, hq, hq * 1e-15);
  double xy = 1.0 + 500.0 * 224.0 + 9.0 * ldexp(1, -20) + 224.0 * 224.0 + 1.0625;
  ck_assert_double_eq_tol(fp8_stats_cos_sim(&st), xy / sqrt(sq * hq), 1e-12);
}
END_TEST

/* clipped against its definition at the two formats' midpoints (scale 1): E4M3 464 ties down to
 * 448 (an overflow, not clipped), the next float above it clips; E5M2 61440 ties up (clipped),
 * the float below it rounds down to 57344 (overflow only). The cosine of the edge cases. */
START_TEST(test_clipped_midpoints) {
  float e4[4] = {448.0f, 464.0f, nextafterf(464.0f, INFINITY), -nextafterf(464.0f, INFINITY)};
  float e5[4] = {57344.0f, nextafterf(61440.0f, 0.0f), 61440.0f, -1e30f};
  fp8_stats a, b;
  fp8_stats_init(&a);
  fp8_stats_init(&b);
  fp8_quantize_f32(e4, 4, 1.0f, FP8_E4M3, NULL, NULL, &a);
  fp8_quantize_f32(e5, 4, 1.0f, FP8_E5M2, NULL, NULL, &b);
  ck_assert_int_eq(a.overflow, 3);
  ck_assert_int_eq(a.clipped, 2);
  ck_assert_int_eq(b.overflow, 3);
  ck_assert_int_eq(b.clipped, 2);
  /* the fused F32 path and the weighted path count the same */
  fp8_stats c, d;
  fp8_stats_init(&c);
  fp8_stats_init(&d);
  fp8_quantize_stats_f32(e4, 4, 1.0f, FP8_E4M3, &c);
  uint32_t w[4] = {1, 2, 3, 4};
  fp8_quantize_weighted_f32(e5, w, 4, 1.0f, FP8_E5M2, &d);
  ck_assert_int_eq(c.clipped, 2);
  ck_assert_int_eq(d.clipped, 3 + 4);
  /* cosine: both sums 0 -> 1; everything flushed to zero -> 0 */
  fp8_stats z;
  fp8_stats_init(&z);
  ck_assert_double_eq(fp8_stats_cos_sim(&z), 1.0);
  float tiny[2] = {1e-30f, -1e-30f};
  fp8_quantize_f32(tiny, 2, 1.0f, FP8_E4M3, NULL, NULL, &z);
  ck_assert_double_eq(fp8_stats_cos_sim(&z), 0.0);
}
END_TEST

START_TEST(test_stats_edge) {
  fp8_stats st;
  fp8_stats_init(&st);
  float z[4] = {0, 0, 0, 0};
  fp8_quantize_f32(z, 4, 1.0f, FP8_E5M2, NULL, NULL, &st);
  ck_assert(isinf(fp8_stats_snr_db(&st)));
  ck_assert_double_eq(fp8_stats_mse(&st), 0.0);
  ck_assert_int_eq(st.zeros, 4);
  ck_assert_int_eq(st.underflow, 0);
  fp8_stats_init(&st);
  float nn[2] = {NAN, -INFINITY};
  fp8_quantize_f32(nn, 2, 1.0f, FP8_E4M3, NULL, NULL, &st);
  ck_assert(isnan(fp8_stats_mse(&st)));
  ck_assert_int_eq(st.nonfinite, 2);
  ck_assert_int_eq(st.overflow, 0);
  /* x*s overflows float32 to inf: counts as overflow (finite x) */
  fp8_stats_init(&st);
  float big[1] = {3e38f};
  fp8_quantize_f32(big, 1, 10.0f, FP8_E4M3, NULL, NULL, &st);
  ck_assert_int_eq(st.overflow, 1);
  ck_assert_int_eq(st.nonfinite, 0);
}
END_TEST

START_TEST(test_quantize_vs_plain_loop) {
  /* Random tensors with wide dynamic range, several scales and chunk-crossing sizes, against a
   * plain loop using the brute-force encoder. */
  enum { N = 5000 };
  float *x = malloc(N * sizeof *x);
  uint8_t *q = malloc(N);
  float *xh = malloc(N * sizeof *xh);
  float scales[] = {1.0f, 0.37f, 1234.5f, 3e-5f};
  for (int f = 0; f < 2; f++) {
    for (int si = 0; si < 4; si++) {
      for (int i = 0; i < N; i++) {
        double mag = pow(2.0, -30.0 + 50.0 * rnd_unit());
        x[i] = (float)((rnd() & 1) ? -mag : mag);
        if (i % 97 == 0) x[i] = 0.0f;
        if (i % 1013 == 0) x[i] = NAN;
        if (i % 2503 == 0) x[i] = -INFINITY;
      }
      float s = scales[si];
      fp8_stats st, ref;
      fp8_stats_init(&st);
      fp8_stats_init(&ref);
      size_t cut = 1777; /* feed in two pieces: stats accumulate */
      fp8_quantize_f32(x, cut, s, (fp8_format)f, q, xh, &st);
      fp8_quantize_f32(x + cut, N - cut, s, (fp8_format)f, q + cut, xh + cut, &st);
      float fmax = fp8_format_max((fp8_format)f), sinv = 1.0f / s;
      for (int i = 0; i < N; i++) {
        float y = x[i] * s;
        uint8_t c = ref_fp8_encode(y, (fp8_format)f);
        ck_assert_msg(q[i] == c, "fmt %d i %d: code %02x vs %02x", f, i, q[i], c);
        float xr = (float)ref_fp8_value(c, (fp8_format)f) * sinv;
        ck_assert(f2u(xh[i]) == f2u(xr) || (isnan(xh[i]) && isnan(xr)));
        ref.n++;
        if (!isfinite(x[i])) { ref.nonfinite++; continue; }
        if (x[i] == 0) ref.zeros++;
        if (fabsf(y) > fmax) ref.overflow++;
        if (f == 0 ? fabsf(y) > 464.0f : fabsf(y) >= 61440.0f) ref.clipped++;
        if (x[i] != 0 && (c & 0x7F) == 0) ref.underflow++;
        double v = ref_fp8_value(c, (fp8_format)f);
        if (v != 0 && fabs(v) < ldexp(1, f == 0 ? -6 : -14)) ref.subnormal++;
        double d = (double)x[i] - (double)xr;
        ref.sum_sq_err += d * d;
        ref.sum_sq += (double)x[i] * x[i];
        ref.sum_sq_hat += (double)xr * xr;
      }
      ck_assert_int_eq(st.n, ref.n);
      ck_assert_int_eq(st.clipped, ref.clipped);
      ck_assert_double_eq_tol(st.sum_sq_hat, ref.sum_sq_hat, ref.sum_sq_hat * 1e-12);
      ck_assert_int_eq(st.nonfinite, ref.nonfinite);
      ck_assert_int_eq(st.zeros, ref.zeros);
      ck_assert_int_eq(st.overflow, ref.overflow);
      ck_assert_int_eq(st.underflow, ref.underflow);
      ck_assert_int_eq(st.subnormal, ref.subnormal);
      ck_assert_double_eq_tol(st.sum_sq_err, ref.sum_sq_err, ref.sum_sq_err * 1e-12);
      ck_assert_double_eq_tol(st.sum_sq, ref.sum_sq, ref.sum_sq * 1e-12);
      ck_assert(ref.overflow > 0 || si != 2);
      ck_assert(ref.underflow > 0);
    }
  }
  free(x);
  free(q);
  free(xh);
}
END_TEST

START_TEST(test_quantize_isa_variants_identical) {
  /* Every instruction-set variant of the quantize loops the CPU runs gives the generic loop's
   * codes, dequantized values and statistics bit for bit, weighted or not: random values over
   * 80 binades, ties, subnormals, saturation, NaN, inf and zeros, lengths around the chunk. */
  const size_t ns[] = {0, 1, 3, 1023, 1024, 1025, 4099};
  enum { N = 4099 };
  static float x[N], xh0[N], xh1[N];
  static uint8_t q0[N], q1[N];
  static uint32_t w[N];
  for (size_t i = 0; i < N; i++) {
    uint64_t k = rnd() % 16;
    x[i] = k == 0 ? NAN : k == 1 ? INFINITY : k == 2 ? -0.0f : k == 3 ? 0x1p-140f
         : k == 4 ? 456.0f : (float)(pow(2.0, -40.0 + 80.0 * rnd_unit()) * (rnd() % 2 ? 1 : -1));
    w[i] = (uint32_t)(rnd() % 1000);
  }
  int tested = 0;
  for (int isa = FP8_ISA_AVX2; isa <= FP8_ISA_AVX512; isa++) {
    if (!fp8_isa_available((fp8_isa)isa)) continue;
    tested++;
    for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++)
      for (int f = 0; f < 2; f++) {
        float sc = f ? 3.5f : 0.375f;
        fp8_stats a, b, wa, wb;
        fp8_stats_init(&a);
        fp8_stats_init(&b);
        fp8_stats_init(&wa);
        fp8_stats_init(&wb);
        ck_assert_int_eq(fp8_isa_set(FP8_ISA_GENERIC), FP8_OK);
        fp8_quantize_f32(x, ns[ni], sc, (fp8_format)f, q0, xh0, &a);
        fp8_quantize_weighted_f32(x, w, ns[ni], sc, (fp8_format)f, &wa);
        fp8_stats wc; /* the split form: errors, then the scale-free sum_sq */
        fp8_stats_init(&wc);
        fp8_quantize_weighted_err_f32(x, w, ns[ni], sc, (fp8_format)f, &wc);
        ck_assert(wc.sum_sq == 0.0);
        wc.sum_sq = fp8_weighted_sum_sq(x, w, ns[ni]);
        ck_assert_msg(memcmp(&wa, &wc, sizeof wa) == 0, "split weighted form differs (n %zu)", ns[ni]);
        ck_assert_int_eq(fp8_isa_set((fp8_isa)isa), FP8_OK);
        fp8_quantize_f32(x, ns[ni], sc, (fp8_format)f, q1, xh1, &b);
        fp8_quantize_weighted_f32(x, w, ns[ni], sc, (fp8_format)f, &wb);
        ck_assert_msg(memcmp(q0, q1, ns[ni]) == 0 && memcmp(xh0, xh1, ns[ni] * sizeof(float)) == 0,
                      "%s: codes or values differ (n %zu)", fp8_isa_name((fp8_isa)isa), ns[ni]);
        ck_assert_msg(memcmp(&a, &b, sizeof a) == 0 && memcmp(&wa, &wb, sizeof wa) == 0,
                      "%s: statistics differ (n %zu, %s)", fp8_isa_name((fp8_isa)isa), ns[ni],
                      fp8_format_name((fp8_format)f));
      }
  }
  fp8_isa_set(FP8_ISA_AUTO);
  printf("isa variants compared with generic: %d (auto picks %s)\n", tested,
         fp8_isa_name(fp8_isa_current()));
}
END_TEST

/* Scales for the edge cases of the quantize loops: ordinary, huge, tiny, and the fallback's
 * (not finite and > 0). */
static const float EDGE_SCALES[] = {1.0f, 0.375f, 3.5f, 1234.5f, 3e-5f, 0.0f, -2.0f, INFINITY, NAN};

START_TEST(test_quantize_stats_fused) {
  /* fp8_quantize_stats_f32 against fp8_quantize_f32's statistics, bit for bit, on every
   * instruction set the CPU runs: lengths around the 4- and 8-wide steps and the 1024-value
   * chunks, both formats, scales that put values on rounding ties (x s exactly halfway
   * between two FP8 values), saturation (448 < |y| <= 464 rounds to 448 but counts as
   * overflow), subnormal and zero codes, NaN, inf, +-0; statistics that accumulate over calls;
   * and scales that are not finite and > 0 (the fallback). */
  enum { N = 5000 };
  static float x[N];
  for (size_t i = 0; i < N; i++) {
    uint64_t k = rnd() % 20;
    float sg = rnd() % 2 ? 1.0f : -1.0f;
    x[i] = k == 0 ? NAN : k == 1 ? sg * INFINITY : k == 2 ? -0.0f : k == 3 ? 0.0f
         : k == 4 ? sg * 0x1p-140f : k == 5 ? sg * 456.0f : k == 6 ? sg * 464.0f
         : k == 7 ? sg * 0x1.9p-9f /* between subnormal steps */ : k == 8 ? sg * 0x1p-10f /* tie to 0 */
         : k == 9 ? sg * 0x1.1p0f /* an E4M3 tie at s = 1 */ : k == 10 ? sg * 61440.0f
         : (float)(pow(2.0, -40.0 + 80.0 * rnd_unit()) * sg);
  }
  const size_t ns[] = {0, 1, 3, 4, 5, 7, 8, 9, 12, 1023, 1024, 1025, 1028, 1029, 1031, 2051, N};
  int variants = 0;
  for (int isa = FP8_ISA_GENERIC; isa <= FP8_ISA_AVX512; isa++) {
    if (!fp8_isa_available((fp8_isa)isa)) continue;
    variants++;
    ck_assert_int_eq(fp8_isa_set((fp8_isa)isa), FP8_OK);
    for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++)
      for (int f = 0; f < 2; f++)
        for (size_t si = 0; si < sizeof EDGE_SCALES / sizeof *EDGE_SCALES; si++) {
          fp8_stats a, b;
          fp8_stats_init(&a);
          fp8_stats_init(&b);
          a.sum_sq_err = b.sum_sq_err = 0.125; /* accumulates onto what is there */
          a.overflow = b.overflow = 7;
          fp8_quantize_f32(x, ns[ni], EDGE_SCALES[si], (fp8_format)f, NULL, NULL, &a);
          fp8_quantize_stats_f32(x, ns[ni], EDGE_SCALES[si], (fp8_format)f, &b);
          ck_assert_msg(memcmp(&a, &b, sizeof a) == 0,
                        "%s n %zu %s s %g: n %lld/%lld nf %lld/%lld z %lld/%lld o %lld/%lld u %lld/%lld sub %lld/%lld "
                        "e %.17g/%.17g sq %.17g/%.17g",
                        fp8_isa_name((fp8_isa)isa), ns[ni], fp8_format_name((fp8_format)f), (double)EDGE_SCALES[si],
                        (long long)a.n, (long long)b.n, (long long)a.nonfinite, (long long)b.nonfinite,
                        (long long)a.zeros, (long long)b.zeros, (long long)a.overflow, (long long)b.overflow,
                        (long long)a.underflow, (long long)b.underflow, (long long)a.subnormal,
                        (long long)b.subnormal, a.sum_sq_err, b.sum_sq_err, a.sum_sq, b.sum_sq);
        }
  }
  fp8_isa_set(FP8_ISA_AUTO);
  ck_assert_int_ge(variants, 1);
  printf("fused statistics compared on %d instruction sets\n", variants);
}
END_TEST

START_TEST(test_quantize_values_only) {
  /* The values-only form (no codes, no statistics: a GEMM operand's cast, rounded in the float
   * domain) against the brute-force encoder's value times 1/s, and bit for bit against the
   * coded form (table lookups), on every instruction set the CPU runs:
   * ties, subnormal steps, saturation bounds, NaN, inf, +-0, scales that are not finite. */
  enum { N = 3000 };
  static float x[N], xv[N], xc[N];
  static uint8_t q[N];
  for (size_t i = 0; i < N; i++) {
    uint64_t k = rnd() % 16;
    float sg = rnd() % 2 ? 1.0f : -1.0f;
    x[i] = k == 0 ? NAN : k == 1 ? sg * INFINITY : k == 2 ? -0.0f : k == 3 ? sg * 0x1p-140f
         : k == 4 ? sg * 464.0f : k == 5 ? sg * 0x1.d0002p8f /* just above 464 */
         : k == 6 ? sg * 61440.0f : k == 7 ? sg * 0x1.dfffep15f : k == 8 ? sg * 0x1p-10f
         : k == 9 ? sg * 0x1.1p0f : k == 10 ? sg * 0x1p-17f /* an E5M2 tie to 0 */
         : (float)(pow(2.0, -40.0 + 80.0 * rnd_unit()) * sg);
  }
  int variants = 0;
  for (int isa = FP8_ISA_GENERIC; isa <= FP8_ISA_AVX512; isa++) {
    if (!fp8_isa_available((fp8_isa)isa)) continue;
    variants++;
    ck_assert_int_eq(fp8_isa_set((fp8_isa)isa), FP8_OK);
    for (int f = 0; f < 2; f++)
      for (size_t si = 0; si < sizeof EDGE_SCALES / sizeof *EDGE_SCALES; si++) {
        float s = EDGE_SCALES[si], sinv = 1.0f / s;
        fp8_quantize_f32(x, N, s, (fp8_format)f, NULL, xv, NULL);
        fp8_quantize_f32(x, N, s, (fp8_format)f, q, xc, NULL);
        for (size_t i = 0; i < N; i++) {
          /* NaN's payload is the compiler's choice of operand order in the product with 1/s */
          ck_assert_msg(f2u(xv[i]) == f2u(xc[i]) || (isnan(xv[i]) && isnan(xc[i])),
                        "%s %s s %g x %a: values-only %a, coded %a", fp8_isa_name((fp8_isa)isa),
                        fp8_format_name((fp8_format)f), (double)s, (double)x[i], (double)xv[i],
                        (double)xc[i]);
          float y = x[i] * s;
          if (isnan(y)) {
            ck_assert(isnan(xv[i]));
            continue;
          }
          float xr = (float)ref_fp8_value(ref_fp8_encode(y, (fp8_format)f), (fp8_format)f) * sinv;
          ck_assert_msg(f2u(xv[i]) == f2u(xr) || (isnan(xv[i]) && isnan(xr)),
                        "%s x %a s %g: %a vs %a", fp8_format_name((fp8_format)f), (double)x[i],
                        (double)s, (double)xv[i], (double)xr);
        }
      }
  }
  fp8_isa_set(FP8_ISA_AUTO);
  ck_assert_int_ge(variants, 1);
}
END_TEST

START_TEST(test_weighted_decodes_every_code) {
  /* The weighted loop decodes codes arithmetically, not through the table: every finite code
   * of each format, both signs, as an input that the scale maps exactly onto the code. The
   * dequantized value is then the input exactly, so the error sum is exactly 0 (a lane that
   * decoded one code wrongly would add its squared difference); the subnormal and zero counts
   * are the weights of the codes with exponent field 0, counted by hand here. */
  for (int f = 0; f < 2; f++) {
    const float *tab = fp8_decode_table((fp8_format)f);
    uint8_t emask = f == FP8_E4M3 ? 0x78 : 0x7C;
    const float scales[] = {1.0f, 0.125f, 32.0f};
    for (int si = 0; si < 3; si++) {
      float x[256];
      uint32_t w[256];
      size_t n = 0;
      int64_t want_sub = 0, want_zero = 0, want_n = 0;
      for (int c = 0; c < 256; c++) {
        if (!isfinite(tab[c])) continue;
        x[n] = tab[c] / scales[si]; /* exact: a power of two, no float underflow */
        w[n] = (uint32_t)(1 + rnd() % 7);
        want_n += w[n];
        if ((c & 0x7F) == 0) want_zero += w[n];
        else if ((c & emask) == 0) want_sub += w[n];
        n++;
      }
      ck_assert_uint_eq(n, f == FP8_E4M3 ? 254 : 248); /* 254 = 256 - two NaN; 248 = 256 - 8 */
      fp8_stats st;
      fp8_stats_init(&st);
      fp8_quantize_weighted_f32(x, w, n, scales[si], (fp8_format)f, &st);
      ck_assert_msg(st.sum_sq_err == 0.0, "%s scale %g: error sum %a",
                    fp8_format_name((fp8_format)f), scales[si], st.sum_sq_err);
      ck_assert(st.n == want_n && st.zeros == want_zero && st.subnormal == want_sub);
      ck_assert(st.overflow == 0 && st.underflow == 0 && st.nonfinite == 0);
    }
  }
}
END_TEST

START_TEST(test_valhist_matches_elements) {
  /* A BF16 and an F16 tensor through the value histogram against the element-wise loop:
   * counts, amax and log2 histogram identical, sums within the bound of valhist.h
   * (2 n 2^-53 relative) and both within it of an exact reference (long double sums of the
   * same terms in the same order as the element loop would pair them do not matter: the exact
   * value is approximated by compensated summation). */
  enum { N = 200003 };
  static uint16_t h[N];
  static float x[N];
  for (int d = 0; d < 2; d++) {
    fp8_dtype dt = d ? FP8_DTYPE_F16 : FP8_DTYPE_BF16;
    for (size_t i = 0; i < N; i++) {
      h[i] = (uint16_t)(rnd() & 0xFFFF);
      if (i % 3) h[i] = (uint16_t)((h[i] & 0x80FF) | (d ? 0x3C00 : 0x3F00)); /* crowd a few binades */
    }
    fp8_dtype_to_f32(dt, h, N, x);
    fp8_valhist vh = {0};
    ck_assert_int_eq(fp8_valhist_build(&vh, dt, h, N), FP8_OK);
    static unsigned char seen[32768];
    size_t distinct = 0; /* magnitudes: v and -v share an entry */
    memset(seen, 0, sizeof seen);
    for (size_t i = 0; i < N; i++) {
      distinct += !seen[h[i] & 0x7FFF];
      seen[h[i] & 0x7FFF] = 1;
    }
    ck_assert_msg(vh.m == distinct, "occupied %zu, distinct magnitudes %zu", vh.m, distinct);
    for (size_t k = 0; k < vh.m; k++) ck_assert(!signbit(vh.v[k]));
    int64_t total = 0;
    for (size_t k = 0; k < vh.m; k++) total += vh.w[k];
    ck_assert_int_eq(total, N);
    /* every count, on both paths of the build: N (a large tensor: eight parts of the counts, no
     * bitmap in the loop) and a 1,001-element prefix (the bitmap path), against a plain count
     * of the patterns, ascending */
    for (int pass = 0; pass < 2; pass++) {
      size_t n = pass ? 1001 : N;
      static uint32_t want[32768];
      memset(want, 0, sizeof want);
      for (size_t i = 0; i < n; i++) want[h[i] & 0x7FFF]++;
      fp8_valhist v2 = {0};
      ck_assert_int_eq(fp8_valhist_build(&v2, dt, h, n), FP8_OK);
      size_t k = 0;
      for (unsigned b = 0; b < 32768; b++) {
        if (!want[b]) continue;
        ck_assert_msg(k < v2.m && v2.w[k] == want[b], "n %zu pattern %u: %u, want %u", n, b,
                      k < v2.m ? v2.w[k] : 0, want[b]);
        float fb = d ? fp8_f16_to_f32((uint16_t)b) : fp8_bf16_to_f32((uint16_t)b);
        ck_assert(f2u(v2.v[k]) == f2u(fb) || (isnan(fb) && isnan(v2.v[k])));
        k++;
      }
      ck_assert_uint_eq(k, v2.m);
      fp8_valhist_free(&v2);
    }
    ck_assert(f2u(fp8_valhist_amax(&vh)) == f2u(fp8_amax_f32(x, N)));
    int64_t ha[FP8_LOG2_HIST_BINS] = {0}, hb[FP8_LOG2_HIST_BINS] = {0};
    fp8_valhist_log2_histogram(&vh, ha);
    fp8_log2_histogram(x, N, hb);
    ck_assert_mem_eq(ha, hb, sizeof ha);
    /* the finite magnitudes first, ascending; the non-finite after them */
    for (size_t k = 0; k < vh.m; k++) {
      ck_assert(isfinite(vh.v[k]) == (k < vh.nfin));
      if (k > 0 && k < vh.nfin) ck_assert(vh.v[k - 1] < vh.v[k]);
    }
    for (int sc_i = 0; sc_i < 8; sc_i++) {
      /* 3 and 1024 saturate some of the random patterns and flush others; 1e-30 flushes all
       * but the largest, 1e30 saturates all but the smallest; 0 and inf take the general loop */
      const float scs[8] = {3.0f, 1024.0f, 3.0f, 1024.0f, 1e-30f, 1e30f, 0.0f, INFINITY};
      int f = sc_i % 2;
      float sc = scs[sc_i];
      fp8_stats a, b;
      fp8_stats_init(&a);
      fp8_stats_init(&b);
      fp8_valhist_quantize(&vh, sc, (fp8_format)f, &a);
      if (sc > 0.0f && isfinite(sc)) {
        /* the sorted form's sums are the general weighted loop's over the finite part, bit for
         * bit, on every instruction set the CPU has; its counts are the element loop's (below) */
        fp8_stats g;
        fp8_stats_init(&g);
        fp8_quantize_weighted_err_f32(vh.v, vh.w, vh.nfin, sc, (fp8_format)f, &g);
        ck_assert_msg(f2u_d(g.sum_sq_err) == f2u_d(a.sum_sq_err), "sorted err %a, general %a",
                      a.sum_sq_err, g.sum_sq_err);
        ck_assert(f2u_d(fp8_weighted_sum_sq(vh.v, vh.w, vh.nfin)) == f2u_d(a.sum_sq));
        ck_assert_msg(f2u_d(g.sum_sq_hat) == f2u_d(a.sum_sq_hat), "sorted hat %a, general %a",
                      a.sum_sq_hat, g.sum_sq_hat);
        for (int isa = FP8_ISA_GENERIC; isa <= FP8_ISA_AVX512; isa++) {
          if (!fp8_isa_available((fp8_isa)isa)) continue;
          ck_assert_int_eq(fp8_isa_set((fp8_isa)isa), FP8_OK);
          fp8_stats c;
          fp8_stats_init(&c);
          fp8_valhist_quantize(&vh, sc, (fp8_format)f, &c);
          ck_assert_msg(memcmp(&a, &c, sizeof a) == 0, "%s differs", fp8_isa_name((fp8_isa)isa));
        }
        fp8_isa_set(FP8_ISA_AUTO);
      }
      fp8_quantize_f32(x, N, sc, (fp8_format)f, NULL, NULL, &b);
      ck_assert(a.n == b.n && a.nonfinite == b.nonfinite && a.zeros == b.zeros &&
                a.overflow == b.overflow && a.underflow == b.underflow && a.subnormal == b.subnormal &&
                a.clipped == b.clipped);
      ck_assert(a.clipped > 0 || sc_i < 5 || sc_i > 5); /* 1e30 saturates all but the smallest */
      if (!(sc > 0.0f && isfinite(sc))) continue; /* 0 * inf: NaN sums either way */
      /* the exact sums, Kahan-compensated in long double over the elements */
      long double se = 0, ce = 0, ss = 0, cs = 0;
      float sinv = 1.0f / sc;
      const float *tab = fp8_decode_table((fp8_format)f);
      for (size_t i = 0; i < N; i++) {
        if (!isfinite(x[i])) continue;
        float xq = tab[fp8_encode(x[i] * sc, (fp8_format)f)] * sinv;
        long double dd = (long double)x[i] - (long double)xq, t1 = dd * dd - ce, u1 = se + t1;
        ce = (u1 - se) - t1;
        se = u1;
        long double xx = (long double)x[i] * x[i], t2 = xx - cs, u2 = ss + t2;
        cs = (u2 - ss) - t2;
        ss = u2;
      }
      double bound = 2.0 * N * 0x1p-53;
      ck_assert_msg(fabs(a.sum_sq_err - b.sum_sq_err) <= bound * b.sum_sq_err, "err sums %.17g %.17g",
                    a.sum_sq_err, b.sum_sq_err);
      ck_assert(fabs(a.sum_sq - b.sum_sq) <= bound * b.sum_sq);
      ck_assert(fabs(a.sum_sq_hat - b.sum_sq_hat) <= bound * b.sum_sq_hat);
      ck_assert(fabsl((long double)a.sum_sq_err - se) <= bound * se);
      ck_assert(fabsl((long double)b.sum_sq_err - se) <= bound * se);
      ck_assert(fabsl((long double)a.sum_sq - ss) <= bound * ss);
    }
    fp8_valhist_free(&vh);
  }
}
END_TEST

/* fp8_amax_dtype (a warm replay step's amax, without a cast): every BF16 and F16 bit pattern
 * alone, then random tensors with NaN, inf and subnormals at an odd address, against the
 * widening (fp8_dtype_to_f32) followed by fp8_amax_f32, bit for bit. */
START_TEST(test_amax_dtype) {
  unsigned char buf[1 + 4 * 4096];
  float wide[4096];
  for (uint32_t p = 0; p < 65536; p++)
    for (int d = FP8_DTYPE_BF16; d <= FP8_DTYPE_F16; d++) {
      uint16_t h = (uint16_t)p;
      memcpy(buf + 1, &h, 2);
      fp8_dtype_to_f32((fp8_dtype)d, buf + 1, 1, wide);
      float want = fp8_amax_f32(wide, 1), got = fp8_amax_dtype((fp8_dtype)d, buf + 1, 1);
      ck_assert_msg(memcmp(&want, &got, 4) == 0, "dtype %d pattern 0x%04x: %a, want %a", d, p, got,
                    want);
    }
  uint64_t st = 0x9E3779B97F4A7C15ULL;
  for (int trial = 0; trial < 300; trial++) {
    fp8_dtype d = (fp8_dtype)(trial % 3);
    size_t n = 1 + (size_t)(trial * 37 % 4096), es = fp8_dtype_size(d);
    for (size_t i = 0; i < n * es; i++) {
      st ^= st << 13, st ^= st >> 7, st ^= st << 17;
      buf[1 + i] = (unsigned char)(st >> 24);
    }
    /* a tensor of NaNs alone now and then: amax 0 */
    if (trial % 50 == 7)
      for (size_t i = 0; i < n; i++) { /* 0x7FFF, 0x7FFFFFFF: NaN */
        memset(buf + 1 + i * es, 0xFF, es - 1);
        buf[1 + i * es + es - 1] = 0x7F;
      }
    fp8_dtype_to_f32(d, buf + 1, n, wide);
    float want = fp8_amax_f32(wide, n), got = fp8_amax_dtype(d, buf + 1, n);
    ck_assert_msg(memcmp(&want, &got, 4) == 0, "trial %d dtype %d n %zu: %a, want %a", trial, d, n,
                  got, want);
  }
}
END_TEST

TU_MAIN("quantize", "core", NULL, NULL, 120, test_amax_dtype, test_log2_histogram, test_stats_hand_tensor,
        test_clipped_midpoints, test_stats_edge, test_quantize_vs_plain_loop,
        test_quantize_isa_variants_identical, test_valhist_matches_elements,
        test_quantize_stats_fused, test_quantize_values_only, test_weighted_decodes_every_code)
