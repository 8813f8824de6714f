/* test_formats.c: the FP8 formats of the simulator (src/sim): decode and encode, subnormals,
 * names, roles and HYBRID, dtype widening, amax. Against values computed by hand and independent
 * references: the format definition evaluated in double (tests/common/testutil.c). */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "sim_helpers.h"

static float u2f(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }

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

TU_MAIN("formats", "core", NULL, NULL, 120, test_decode_matches_definition, test_encode_hand_cases,
        test_encode_random_vs_nearest, test_subnormal_codes, test_names_and_parsing,
        test_roles_hybrid, test_dtype_widening, test_amax)
