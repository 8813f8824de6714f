/* cast_exhaustive.c: fp8_encode and fp8_encode_array against CUDA's host conversion
 * __nv_cvt_float_to_fp8(x, __NV_SATFINITE, fmt) on all 2^32 float32 bit patterns, and
 * fp8_decode against CUDA's decode on all 256 codes, bit for bit.
 * Usage: cast_exhaustive e4m3|e5m2. Exit 77 (skipped) when cuda_fp8.h was not found. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_ref.h"
#include "fp8.h"
#include "testutil.h"

static fp8_format g_fmt;

static uint32_t f2u(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }

START_TEST(test_decode_all_codes) {
  int e5m2 = g_fmt == FP8_E5M2;
  for (int c = 0; c < 256; c++) {
    float mine = fp8_decode((uint8_t)c, g_fmt), ref = cuda_ref_decode((uint8_t)c, e5m2);
    ck_assert_msg(f2u(mine) == f2u(ref), "%s code 0x%02x: fp8_decode %a (0x%08x), CUDA %a (0x%08x)",
                  fp8_format_name(g_fmt), c, mine, f2u(mine), ref, f2u(ref));
    ck_assert_msg(f2u(fp8_decode_table(g_fmt)[c]) == f2u(ref), "table differs at 0x%02x", c);
  }
}
END_TEST

START_TEST(test_encode_all_floats) {
  enum { BLOCK = 1 << 16 };
  int e5m2 = g_fmt == FP8_E5M2;
  float *x = malloc(BLOCK * sizeof *x);
  uint8_t *q = malloc(BLOCK);
  uint64_t mismatches = 0, checked = 0;
  uint32_t first_bad = 0;
  int have_bad = 0;
  for (uint64_t base = 0; base < (1ull << 32); base += BLOCK) {
    for (uint32_t i = 0; i < BLOCK; i++) {
      uint32_t u = (uint32_t)(base + i);
      memcpy(&x[i], &u, 4);
    }
    fp8_encode_array(x, BLOCK, g_fmt, q);
    for (uint32_t i = 0; i < BLOCK; i++) {
      uint8_t ref = cuda_ref_encode(x[i], e5m2);
      uint8_t one = fp8_encode(x[i], g_fmt);
      if (ref != q[i] || ref != one) {
        if (!have_bad) { first_bad = (uint32_t)(base + i); have_bad = 1; }
        mismatches++;
      }
      checked++;
    }
  }
  printf("cast_exhaustive %s: %llu float32 patterns checked, %llu mismatches\n",
         fp8_format_name(g_fmt), (unsigned long long)checked, (unsigned long long)mismatches);
  if (have_bad) {
    float fb; memcpy(&fb, &first_bad, 4);
    ck_abort_msg("first mismatch at bits 0x%08x (%a): fp8lab 0x%02x / 0x%02x, CUDA 0x%02x", first_bad,
                 fb, fp8_encode(fb, g_fmt), q[0], cuda_ref_encode(fb, e5m2));
  }
  ck_assert_uint_eq(checked, 1ull << 32);
  free(x);
  free(q);
}
END_TEST

int main(int argc, char **argv) {
  if (argc != 2 || fp8_format_parse(argv[1], &g_fmt) != FP8_OK) {
    fprintf(stderr, "usage: cast_exhaustive e4m3|e5m2\n");
    return 2;
  }
  if (!cuda_ref_available()) {
    printf("skipped: cuda_fp8.h not found at build time (no CUDA toolkit headers)\n");
    return 77;
  }
  Suite *s = suite_create("cast_exhaustive");
  TCase *tc = tcase_create(argv[1]);
  tcase_set_timeout(tc, 1200);
  tcase_add_test(tc, test_decode_all_codes);
  tcase_add_test(tc, test_encode_all_floats);
  suite_add_tcase(s, tc);
  return tu_run_suite(s);
}
