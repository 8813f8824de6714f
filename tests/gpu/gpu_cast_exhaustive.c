/* gpu_cast_exhaustive.c: the GPU's hardware FP8 conversion (cvt.rn.satfinite) against
 * fp8_encode on all 2^32 float32 bit patterns, both formats. Label gpu; exit 77 with
 * "skipped: no CUDA device" where there is none. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8.h"
#include "testutil.h"
#include "fp8k.h"

static void check_format(fp8_format f) {
  enum { BLOCK = 1 << 26 };
  uint8_t *dev = malloc(BLOCK);
  float *x = malloc((size_t)BLOCK * sizeof *x);
  uint8_t *mine = malloc(BLOCK);
  char err[256];
  uint64_t mismatches = 0;
  for (uint64_t base = 0; base < (1ull << 32); base += BLOCK) {
    int rc = fp8k_encode_range(base, BLOCK, f == FP8_E5M2, dev, err, sizeof err);
    ck_assert_msg(rc == 0, "%s", err);
    for (uint32_t i = 0; i < BLOCK; i++) {
      uint32_t u = (uint32_t)(base + i);
      memcpy(&x[i], &u, 4);
    }
    fp8_encode_array(x, BLOCK, f, mine);
    for (uint32_t i = 0; i < BLOCK; i++)
      if (mine[i] != dev[i]) {
        if (mismatches == 0)
          fprintf(stderr, "first mismatch bits 0x%08x: sim 0x%02x, gpu 0x%02x\n", (uint32_t)(base + i),
                  mine[i], dev[i]);
        mismatches++;
      }
  }
  printf("gpu_cast_exhaustive %s: 4294967296 patterns, %llu mismatches\n", fp8_format_name(f),
         (unsigned long long)mismatches);
  ck_assert_uint_eq(mismatches, 0);
  free(dev);
  free(x);
  free(mine);
}

START_TEST(test_e4m3) { check_format(FP8_E4M3); }
END_TEST
START_TEST(test_e5m2) { check_format(FP8_E5M2); }
END_TEST

int main(void) {
  char why[256] = "";
  if (fp8k_device_count(why, sizeof why) == 0) {
    printf("skipped: no CUDA device (%s)\n", why);
    return 77;
  }
  Suite *s = suite_create("gpu_cast");
  TCase *tc = tcase_create("exhaustive");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, test_e4m3);
  tcase_add_test(tc, test_e5m2);
  suite_add_tcase(s, tc);
  return tu_run_suite(s);
}
