/* test_sim.c: the simulator core (src/sim) against values computed by hand and against
 * independent references: the format definition evaluated in double (testutil.c), a literal
 * transcription of TE's amax-history array for delayed scaling, and a plain per-element loop
 * for the statistics. */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "valhist.h"

static uint32_t f2u(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
static float u2f(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }

/* xorshift64*: deterministic test data without touching the code under test. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t f2u_d(double x) {
  uint64_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

static uint64_t rnd(void) {
  rng_state ^= rng_state >> 12; rng_state ^= rng_state << 25; rng_state ^= rng_state >> 27;
  return rng_state * 0x2545F4914F6CDD1Dull;
}
static double rnd_unit(void) { return (double)(rnd() >> 11) / 9007199254740992.0; }

/* ------------------------------------------------------------------ formats */

START_TEST(test_decode_matches_definition) {
  for (int f = 0; f < 2; f++)
    for (int c = 0; c < 256; c++) {
      double ref = ref_fp8_value((uint8_t)c, (fp8_format)f);
      float got = fp8_decode((uint8_t)c, (fp8_format)f);
      if (isnan(ref)) {
        ck_assert_msg(isnan(got), "fmt %d code %02x not NaN", f, c);
        ck_assert_uint_eq(f2u(got), 0x7FFFFFFFu);
      } else {
        ck_assert_msg((double)got == ref && !!signbit(got) == !!signbit(ref), "fmt %d code %02x: %a vs %a", f, c,
                      got, ref);
      }
    }
  ck_assert_float_eq(fp8_decode(0x7E, FP8_E4M3), 448.0f);
  ck_assert_float_eq(fp8_decode(0x01, FP8_E4M3), ldexpf(1, -9));
  ck_assert_float_eq(fp8_decode(0x7B, FP8_E5M2), 57344.0f);
  ck_assert_float_eq(fp8_decode(0x01, FP8_E5M2), ldexpf(1, -16));
  ck_assert(isinf(fp8_decode(0x7C, FP8_E5M2)) && fp8_decode(0xFC, FP8_E5M2) < 0);
}
END_TEST

START_TEST(test_encode_hand_cases) {
  struct { float x; fp8_format f; uint8_t code; } cases[] = {
      {1.0f, FP8_E4M3, 0x38},       {-1.0f, FP8_E4M3, 0xB8},
      {1.0625f, FP8_E4M3, 0x38},    /* tie between 1.0 and 1.125: even mantissa 0 */
      {1.1875f, FP8_E4M3, 0x3A},    /* tie between 1.125 and 1.25: even is 1.25 */
      {1.0625001f, FP8_E4M3, 0x39}, /* just above the tie */
      {448.0f, FP8_E4M3, 0x7E},     {464.0f, FP8_E4M3, 0x7E}, /* tie 448/480: 448 (even) */
      {480.0f, FP8_E4M3, 0x7E},     {1e30f, FP8_E4M3, 0x7E},  {-1e30f, FP8_E4M3, 0xFE},
      {INFINITY, FP8_E4M3, 0x7E},   {-INFINITY, FP8_E4M3, 0xFE},
      {NAN, FP8_E4M3, 0x7F},        {-NAN, FP8_E4M3, 0x7F},
      {0.0f, FP8_E4M3, 0x00},       {-0.0f, FP8_E4M3, 0x80},
      {0x1p-10f, FP8_E4M3, 0x00},   /* half the min subnormal: tie to 0 */
      {0x1.000002p-10f, FP8_E4M3, 0x01}, {-0x1p-11f, FP8_E4M3, 0x80},
      {0x3p-10f, FP8_E4M3, 0x02},   /* 1.5 * 2^-9: tie between codes 1 and 2 -> 2 */
      {0x1p-6f, FP8_E4M3, 0x08},    /* min normal */
      {0x1.ep-7f, FP8_E4M3, 0x08},  /* 7.5 * 2^-9 rounds up into the normal range */
      {57344.0f, FP8_E5M2, 0x7B},   {61440.0f, FP8_E5M2, 0x7B}, {61439.996f, FP8_E5M2, 0x7B},
      {INFINITY, FP8_E5M2, 0x7B},   {-INFINITY, FP8_E5M2, 0xFB}, {NAN, FP8_E5M2, 0x7F},
      {1.0f, FP8_E5M2, 0x3C},       {1.125f, FP8_E5M2, 0x3C}, /* tie 1.0/1.25 -> 1.0 */
      {1.375f, FP8_E5M2, 0x3E},     /* tie 1.25/1.5 -> 1.5 */
      {0x1p-17f, FP8_E5M2, 0x00},   {0x3p-17f, FP8_E5M2, 0x02}, {0x1p-14f, FP8_E5M2, 0x04},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint8_t got = fp8_encode(cases[i].x, cases[i].f);
    ck_assert_msg(got == cases[i].code, "case %zu: encode(%a, %s) = 0x%02x, expected 0x%02x", i, cases[i].x,
                  fp8_format_name(cases[i].f), got, cases[i].code);
  }
}
END_TEST

START_TEST(test_encode_random_vs_nearest) {
  /* Random bit patterns concentrated on the FP8 range, against the brute-force nearest value. */
  enum { N = 200000 };
  float *x = malloc(N * sizeof *x);
  uint8_t *q = malloc(N);
  for (int f = 0; f < 2; f++) {
    for (int i = 0; i < N; i++) {
      uint32_t u = (uint32_t)rnd();
      int e = 100 + (int)(rnd() % 50); /* 2^-27 .. 2^22 */
      u = (u & 0x807FFFFFu) | ((uint32_t)e << 23);
      x[i] = i % 7 == 0 ? u2f((uint32_t)rnd()) : u2f(u);
    }
    fp8_encode_array(x, N, (fp8_format)f, q);
    for (int i = 0; i < N; i++) {
      uint8_t ref = ref_fp8_encode(x[i], (fp8_format)f);
      ck_assert_msg(q[i] == ref, "fmt %d x=%a: 0x%02x vs ref 0x%02x", f, x[i], q[i], ref);
      ck_assert_uint_eq(fp8_encode(x[i], (fp8_format)f), q[i]);
    }
  }
  free(x);
  free(q);
}
END_TEST

START_TEST(test_subnormal_codes) {
  ck_assert(fp8_code_is_subnormal(0x01, FP8_E4M3));
  ck_assert(fp8_code_is_subnormal(0x87, FP8_E4M3));
  ck_assert(!fp8_code_is_subnormal(0x08, FP8_E4M3));
  ck_assert(!fp8_code_is_subnormal(0x80, FP8_E4M3));
  ck_assert(fp8_code_is_subnormal(0x03, FP8_E5M2));
  ck_assert(!fp8_code_is_subnormal(0x04, FP8_E5M2));
}
END_TEST

START_TEST(test_names_and_parsing) {
  fp8_format f;
  ck_assert_int_eq(fp8_format_parse("E5M2", &f), FP8_OK);
  ck_assert_int_eq(f, FP8_E5M2);
  ck_assert_int_eq(fp8_format_parse("e4m3fn", &f), FP8_EINVAL);
  ck_assert_float_eq(fp8_format_max(FP8_E4M3), 448.0f);
  ck_assert_float_eq(fp8_format_max(FP8_E5M2), 57344.0f);
  fp8_amax_compute a;
  ck_assert_int_eq(fp8_amax_compute_parse("most_recent", &a), FP8_OK);
  ck_assert_int_eq(a, FP8_AMAX_MOST_RECENT);
  ck_assert_int_eq(fp8_amax_compute_parse("mean", &a), FP8_EINVAL);
  ck_assert_str_eq(fp8_strerror(FP8_EFORMAT), "malformed input");
  ck_assert_str_eq(fp8_strerror(FP8_EWRITE), "write failed");
}
END_TEST

/* ------------------------------------------------------------------ roles and HYBRID */

START_TEST(test_roles_hybrid) {
  ck_assert_int_eq(fp8_role_of_tensor("blocks.0.fc1.input"), FP8_ROLE_INPUT);
  ck_assert_int_eq(fp8_role_of_tensor("blocks.0.fc1.weight"), FP8_ROLE_WEIGHT);
  ck_assert_int_eq(fp8_role_of_tensor("a.output"), FP8_ROLE_OUTPUT);
  ck_assert_int_eq(fp8_role_of_tensor("a.grad_output"), FP8_ROLE_GRAD_OUTPUT);
  ck_assert_int_eq(fp8_role_of_tensor("a.grad_input"), FP8_ROLE_GRAD_INPUT);
  ck_assert_int_eq(fp8_role_of_tensor("a.bias"), FP8_ROLE_UNKNOWN);
  ck_assert_int_eq(fp8_role_of_tensor("a.input.x"), FP8_ROLE_UNKNOWN);
  ck_assert_int_eq(fp8_role_of_tensor("weight"), FP8_ROLE_WEIGHT);
  fp8_format_sel sel;
  ck_assert_int_eq(fp8_format_sel_parse("hybrid", &sel), FP8_OK);
  fp8_format f;
  fp8_role fwd[] = {FP8_ROLE_INPUT, FP8_ROLE_WEIGHT, FP8_ROLE_OUTPUT};
  fp8_role bwd[] = {FP8_ROLE_GRAD_OUTPUT, FP8_ROLE_GRAD_INPUT};
  for (int i = 0; i < 3; i++) {
    ck_assert_int_eq(fp8_format_resolve(FP8_SEL_HYBRID, fwd[i], &f), FP8_OK);
    ck_assert_int_eq(f, FP8_E4M3);
  }
  for (int i = 0; i < 2; i++) {
    ck_assert_int_eq(fp8_format_resolve(FP8_SEL_HYBRID, bwd[i], &f), FP8_OK);
    ck_assert_int_eq(f, FP8_E5M2);
  }
  ck_assert_int_eq(fp8_format_resolve(FP8_SEL_HYBRID, FP8_ROLE_UNKNOWN, &f), FP8_EINVAL);
  ck_assert_int_eq(fp8_format_resolve(FP8_SEL_E5M2, FP8_ROLE_UNKNOWN, &f), FP8_OK);
  ck_assert_int_eq(f, FP8_E5M2);
  ck_assert_int_eq(fp8_format_resolve(FP8_SEL_E4M3, FP8_ROLE_GRAD_OUTPUT, &f), FP8_OK);
  ck_assert_int_eq(f, FP8_E4M3);
}
END_TEST

/* ------------------------------------------------------------------ dtypes */

START_TEST(test_dtype_widening) {
  for (uint32_t h = 0; h < 65536; h++) {
    /* F16 from its definition */
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    if (h & 0x8000) v = -v;
    float got = fp8_f16_to_f32((uint16_t)h);
    if (isnan(v)) ck_assert(isnan(got));
    else ck_assert_msg((double)got == v && !!signbit(got) == !!signbit(v), "f16 %04x", h);
    ck_assert_uint_eq(f2u(fp8_bf16_to_f32((uint16_t)h)), h << 16);
  }
  unsigned char raw[8] = {0x00, 0x00, 0x80, 0x3F, 0x00, 0x00, 0x00, 0xC0}; /* 1.0f, -2.0f LE */
  float out[2];
  fp8_dtype_to_f32(FP8_DTYPE_F32, raw, 2, out);
  ck_assert_float_eq(out[0], 1.0f);
  ck_assert_float_eq(out[1], -2.0f);
  unsigned char bf[4] = {0x80, 0x3F, 0x40, 0xC0}; /* bf16 1.0, -3.0 */
  fp8_dtype_to_f32(FP8_DTYPE_BF16, bf, 2, out);
  ck_assert_float_eq(out[0], 1.0f);
  ck_assert_float_eq(out[1], -3.0f);
  unsigned char hf[4] = {0x00, 0x3C, 0x00, 0xC2}; /* f16 1.0, -3.0 */
  fp8_dtype_to_f32(FP8_DTYPE_F16, hf, 2, out);
  ck_assert_float_eq(out[0], 1.0f);
  ck_assert_float_eq(out[1], -3.0f);
  ck_assert_uint_eq(fp8_dtype_size(FP8_DTYPE_BF16), 2);
  ck_assert_str_eq(fp8_dtype_name(FP8_DTYPE_F16), "F16");
}
END_TEST

/* ------------------------------------------------------------------ amax */

START_TEST(test_amax) {
  float a[] = {1.0f, -3.5f, NAN, 2.0f, -0.0f};
  ck_assert_float_eq(fp8_amax_f32(a, 5), 3.5f);
  float b[] = {NAN, NAN};
  ck_assert_float_eq(fp8_amax_f32(b, 2), 0.0f);
  ck_assert_float_eq(fp8_amax_f32(NULL, 0), 0.0f);
  float c[] = {1.0f, -INFINITY, NAN};
  ck_assert(isinf(fp8_amax_f32(c, 3)));
  float d[3000];
  for (int i = 0; i < 3000; i++) d[i] = (float)(i % 17) - 8.0f;
  d[2999] = -1e-3f;
  d[1500] = -123.25f;
  ck_assert_float_eq(fp8_amax_f32(d, 3000), 123.25f);
}
END_TEST

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

/* ------------------------------------------------------------------ delayed scaling */

/* A literal transcription of RECIPES.md's TE array semantics, for comparison with the ring. */
typedef struct { int L; float h[1024]; float scale; float scaled_max; int most_recent; } te_ref;

static void te_ref_update(te_ref *r, float last) {
  if (last == 0.0f) return;
  float amax_max = last;
  for (int i = 1; i < r->L; i++) amax_max = fmaxf(amax_max, r->h[i]);
  if (r->L == 1) {
    r->h[0] = last;
  } else {
    for (int i = 1; i <= r->L - 2; i++) r->h[i] = r->h[i + 1];
    r->h[r->L - 1] = last;
    r->h[0] = 0.0f;
  }
  float amax = r->most_recent ? last : amax_max;
  if (isfinite(amax) && amax > 0) {
    float s = r->scaled_max / amax;
    r->scale = isinf(s) ? FLT_MAX : s;
  }
}

START_TEST(test_delayed_first_steps) {
  fp8_delayed_params p = {.history_len = 4, .margin = 0, .amax_compute = FP8_AMAX_MAX, .format = FP8_E4M3};
  fp8_delayed_state st;
  ck_assert_int_eq(fp8_delayed_init(&st, &p), FP8_OK);
  ck_assert_float_eq(st.scale, 1.0f); /* step 0 uses 1.0 */
  ck_assert_float_eq(fp8_delayed_update(&st, 2.0f), 2.0f);
  ck_assert_float_eq(st.scale, 224.0f);
  fp8_delayed_update(&st, 8.0f);
  ck_assert_float_eq(st.scale, 56.0f);
  fp8_delayed_update(&st, 1.0f); /* window max still 8 */
  ck_assert_float_eq(st.scale, 56.0f);
  fp8_delayed_update(&st, 1.0f);
  ck_assert_float_eq(st.scale, 56.0f);
  fp8_delayed_update(&st, 1.0f); /* window {8,1,1,1} */
  ck_assert_float_eq(st.scale, 56.0f);
  fp8_delayed_update(&st, 1.0f); /* window {1,1,1,1}: the 8 dropped out (L = 4) */
  ck_assert_float_eq(st.scale, 448.0f);
  fp8_delayed_free(&st);
}
END_TEST

START_TEST(test_delayed_zero_keeps_state) {
  fp8_delayed_params p = {.history_len = 3, .margin = 1, .amax_compute = FP8_AMAX_MAX, .format = FP8_E5M2};
  fp8_delayed_state st;
  fp8_delayed_init(&st, &p);
  ck_assert_float_eq(st.scaled_max, 28672.0f);
  fp8_delayed_update(&st, 7.0f);
  float before[3], after[3];
  fp8_delayed_history(&st, before);
  float s = st.scale;
  ck_assert_float_eq(s, 28672.0f / 7.0f);
  ck_assert_float_eq(fp8_delayed_update(&st, 0.0f), 0.0f);
  fp8_delayed_history(&st, after);
  ck_assert_float_eq(st.scale, s);
  ck_assert_mem_eq(before, after, sizeof before);
  ck_assert_float_eq(after[0], 0.0f);
  ck_assert_float_eq(after[1], 0.0f);
  ck_assert_float_eq(after[2], 7.0f);
  fp8_delayed_free(&st);
}
END_TEST

START_TEST(test_delayed_extremes) {
  fp8_delayed_params p = {.history_len = 1, .margin = 0, .amax_compute = FP8_AMAX_MAX, .format = FP8_E4M3};
  fp8_delayed_state st;
  fp8_delayed_init(&st, &p);
  fp8_delayed_update(&st, 0x1p-140f); /* 448 / tiny = inf -> FLT_MAX */
  ck_assert_float_eq(st.scale, FLT_MAX);
  fp8_delayed_update(&st, 4.0f);
  ck_assert_float_eq(st.scale, 112.0f);
  ck_assert(isinf(fp8_delayed_update(&st, INFINITY))); /* inf: scale kept */
  ck_assert_float_eq(st.scale, 112.0f);
  float h[1];
  fp8_delayed_history(&st, h);
  ck_assert(isinf(h[0])); /* L = 1: the history is just last */
  fp8_delayed_update(&st, NAN); /* NaN: not finite, scale kept */
  ck_assert_float_eq(st.scale, 112.0f);
  fp8_delayed_free(&st);
  /* with max over a window, an inf amax blocks updates until it leaves the window */
  p.history_len = 2;
  fp8_delayed_init(&st, &p);
  fp8_delayed_update(&st, 2.0f);
  fp8_delayed_update(&st, INFINITY);
  fp8_delayed_update(&st, 4.0f);
  ck_assert_float_eq(st.scale, 224.0f);
  fp8_delayed_update(&st, 4.0f);
  ck_assert_float_eq(st.scale, 112.0f);
  fp8_delayed_free(&st);
  /* margin and most_recent */
  p = (fp8_delayed_params){.history_len = 8, .margin = -1, .amax_compute = FP8_AMAX_MOST_RECENT, .format = FP8_E4M3};
  fp8_delayed_init(&st, &p);
  fp8_delayed_update(&st, 100.0f);
  fp8_delayed_update(&st, 3.0f);
  ck_assert_float_eq(st.scale, 896.0f / 3.0f);
  fp8_delayed_free(&st);
  p.history_len = 0;
  ck_assert_int_eq(fp8_delayed_init(&st, &p), FP8_EINVAL);
  p.history_len = 4;
  p.margin = 65;
  ck_assert_int_eq(fp8_delayed_init(&st, &p), FP8_EINVAL);
}
END_TEST

START_TEST(test_delayed_constant_history) {
  /* constant-filled steps: TE layout [0, c, c, c] after three or more steps with L = 4 */
  fp8_delayed_params p = {.history_len = 4, .margin = 0, .amax_compute = FP8_AMAX_MAX, .format = FP8_E4M3};
  fp8_delayed_state st;
  fp8_delayed_init(&st, &p);
  float h[4];
  fp8_delayed_update(&st, 5.0f);
  fp8_delayed_history(&st, h);
  float e1[4] = {0, 0, 0, 5};
  ck_assert_mem_eq(h, e1, sizeof h);
  fp8_delayed_update(&st, 5.0f);
  fp8_delayed_update(&st, 5.0f);
  fp8_delayed_history(&st, h);
  float e3[4] = {0, 5, 5, 5};
  ck_assert_mem_eq(h, e3, sizeof h);
  for (int i = 0; i < 10; i++) fp8_delayed_update(&st, 5.0f);
  fp8_delayed_history(&st, h);
  ck_assert_mem_eq(h, e3, sizeof h);
  ck_assert_float_eq(st.scale, 448.0f / 5.0f);
  fp8_delayed_free(&st);
}
END_TEST

START_TEST(test_delayed_vs_te_array) {
  /* Random amax streams with zeros, tiny, huge, inf and NaN values: the ring equals the literal
   * TE array in scale and history after every step, for several L and both amax_compute. */
  int lens[] = {1, 2, 3, 7, 16, 64};
  for (int li = 0; li < 6; li++)
    for (int mr = 0; mr < 2; mr++)
      for (int margin = -2; margin <= 3; margin += 5) {
        fp8_delayed_params p = {.history_len = lens[li], .margin = margin,
                                .amax_compute = mr ? FP8_AMAX_MOST_RECENT : FP8_AMAX_MAX,
                                .format = margin > 0 ? FP8_E5M2 : FP8_E4M3};
        fp8_delayed_state st;
        fp8_delayed_init(&st, &p);
        te_ref r = {.L = lens[li], .scale = 1.0f, .most_recent = mr};
        r.scaled_max = fp8_format_max(p.format) * ldexpf(1.0f, -margin);
        float h[64];
        for (int t = 0; t < 500; t++) {
          uint64_t k = rnd() % 20;
          float a = k == 0 ? 0.0f : k == 1 ? INFINITY : k == 2 ? NAN : k == 3 ? 0x1p-149f
                  : (float)pow(2.0, -20.0 + 40.0 * rnd_unit());
          fp8_delayed_update(&st, a);
          te_ref_update(&r, a);
          ck_assert_msg(f2u(st.scale) == f2u(r.scale), "L=%d mr=%d t=%d: %a vs %a", lens[li], mr, t,
                        st.scale, r.scale);
          fp8_delayed_history(&st, h);
          for (int i = 0; i < lens[li]; i++)
            ck_assert(f2u(h[i]) == f2u(r.h[i]) || (isnan(h[i]) && isnan(r.h[i])));
        }
        fp8_delayed_free(&st);
      }
}
END_TEST

START_TEST(test_delayed_long_windows) {
  /* The max over long windows, which the state keeps as a monotone queue: long decreasing runs
   * (the max leaves the window at every step), spikes, plateaus of equal values, NaN, inf and
   * zeros, against the literal TE array, 3000 steps. */
  int lens[] = {5, 33, 1024};
  for (int li = 0; li < 3; li++) {
    fp8_delayed_params p = {.history_len = lens[li], .margin = 0, .amax_compute = FP8_AMAX_MAX,
                            .format = FP8_E4M3};
    fp8_delayed_state st;
    ck_assert_int_eq(fp8_delayed_init(&st, &p), FP8_OK);
    te_ref r = {.L = lens[li], .scale = 1.0f, .most_recent = 0, .scaled_max = 448.0f};
    float a = 1000.0f;
    for (int t = 0; t < 3000; t++) {
      uint64_t k = rnd() % 100;
      if (k < 70) a *= 0.99f;                   /* decreasing */
      else if (k < 80) a *= 1.0f;               /* equal to the last */
      else if (k < 85) a = 1e4f * (float)rnd_unit();
      float v = k == 90 ? NAN : k == 91 ? INFINITY : k == 92 ? 0.0f : a;
      /* TE's amax: fmaxf of the new value and the array's L-1 older entries, before the roll */
      float m = v;
      for (int i = 1; i < lens[li]; i++) m = fmaxf(m, r.h[i]);
      float used = fp8_delayed_update(&st, v);
      te_ref_update(&r, v);
      ck_assert_msg(f2u(st.scale) == f2u(r.scale), "L=%d t=%d: scale %a, TE %a", lens[li], t,
                    st.scale, r.scale);
      if (v != 0.0f && !isnan(m))
        ck_assert_msg(f2u(used) == f2u(m), "L=%d t=%d: amax used %a, TE %a", lens[li], t, used, m);
    }
    fp8_delayed_free(&st);
  }
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

/* ------------------------------------------------------------------ current scaling */

START_TEST(test_current_scale) {
  fp8_current_params p = {.amax_epsilon = 0.0f, .pow2 = false, .margin = 0, .format = FP8_E4M3};
  ck_assert_float_eq(fp8_current_scale(&p, 3.0f), 448.0f / 3.0f);
  ck_assert_float_eq(fp8_current_scale(&p, 0.0f), 1.0f);
  ck_assert_float_eq(fp8_current_scale(&p, INFINITY), 1.0f);
  ck_assert_float_eq(fp8_current_scale(&p, NAN), 1.0f);
  ck_assert_float_eq(fp8_current_scale(&p, 0x1p-140f), FLT_MAX);
  p.pow2 = true;
  ck_assert_float_eq(fp8_current_scale(&p, 3.0f), 128.0f); /* 149.33 -> 128 */
  ck_assert_float_eq(fp8_current_scale(&p, 0.5f), 512.0f); /* 896 -> 512 */
  p.pow2 = false;
  p.amax_epsilon = 0.25f;
  ck_assert_float_eq(fp8_current_scale(&p, 0.0f), 1792.0f);
  ck_assert_float_eq(fp8_current_scale(&p, 0.125f), 1792.0f);
  ck_assert_float_eq(fp8_current_scale(&p, 1.0f), 448.0f);
  p.amax_epsilon = 0.0f;
  p.margin = 2;
  p.format = FP8_E5M2;
  ck_assert_float_eq(fp8_current_scale(&p, 7.0f), 14336.0f / 7.0f);
  ck_assert_int_eq(fp8_current_params_check(&p), FP8_OK);
  p.amax_epsilon = -1.0f;
  ck_assert_int_eq(fp8_current_params_check(&p), FP8_EINVAL);
}
END_TEST

int main(void) {
  Suite *s = suite_create("sim");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_decode_matches_definition);
  tcase_add_test(tc, test_encode_hand_cases);
  tcase_add_test(tc, test_encode_random_vs_nearest);
  tcase_add_test(tc, test_subnormal_codes);
  tcase_add_test(tc, test_names_and_parsing);
  tcase_add_test(tc, test_roles_hybrid);
  tcase_add_test(tc, test_dtype_widening);
  tcase_add_test(tc, test_amax);
  tcase_add_test(tc, test_log2_histogram);
  tcase_add_test(tc, test_stats_hand_tensor);
  tcase_add_test(tc, test_clipped_midpoints);
  tcase_add_test(tc, test_stats_edge);
  tcase_add_test(tc, test_quantize_vs_plain_loop);
  tcase_add_test(tc, test_delayed_first_steps);
  tcase_add_test(tc, test_delayed_zero_keeps_state);
  tcase_add_test(tc, test_delayed_extremes);
  tcase_add_test(tc, test_delayed_constant_history);
  tcase_add_test(tc, test_delayed_vs_te_array);
  tcase_add_test(tc, test_delayed_long_windows);
  tcase_add_test(tc, test_quantize_isa_variants_identical);
  tcase_add_test(tc, test_valhist_matches_elements);
  tcase_add_test(tc, test_quantize_stats_fused);
  tcase_add_test(tc, test_quantize_values_only);
  tcase_add_test(tc, test_weighted_decodes_every_code);
  tcase_add_test(tc, test_current_scale);
  suite_add_tcase(s, tc);
  return tu_run_suite(s);
}
