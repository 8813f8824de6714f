/* gpu_cast_exhaustive.c: the GPU's hardware FP8 conversion (cvt.rn.satfinite) against
 * fp8_encode on all 2^32 float32 bit patterns, both formats. Label gpu; exit 77 with
 * "skipped: no CUDA device" where there is none. Uses tests/gpu/gpu_harness.h (no libcheck),
 * so it builds with FP8LAB_GPU_ONLY=ON on the device machine. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8.h"
#include "fp8k.h"
#include "gpu_harness.h"

static void check_format(fp8_format f) {
  enum { BLOCK = 1 << 26 };
  uint8_t *dev = malloc(BLOCK);
  float *x = malloc((size_t)BLOCK * sizeof *x);
  uint8_t *mine = malloc(BLOCK);
  char err[256] = "";
  uint64_t mismatches = 0;
  int rc = 0;
  if (!dev || !x || !mine) {
    GH_CHECK(0, "out of memory");
    goto done;
  }
  for (uint64_t base = 0; base < (1ull << 32); base += BLOCK) {
    rc = fp8k_encode_range(base, BLOCK, f == FP8_E5M2, dev, err, sizeof err);
    if (rc) break;
    for (uint32_t i = 0; i < BLOCK; i++) {
      uint32_t u = (uint32_t)(base + i);
      memcpy(&x[i], &u, 4);
    }
    fp8_encode_array(x, BLOCK, f, mine);
    for (uint32_t i = 0; i < BLOCK; i++)
      if (mine[i] != dev[i]) {
        if (mismatches < 5)
          fprintf(stderr, "%s mismatch: bits 0x%08x: sim 0x%02x, gpu 0x%02x\n",
                  fp8_format_name(f), (uint32_t)(base + i), mine[i], dev[i]);
        mismatches++;
      }
  }
  GH_CHECK(rc == 0, "fp8k_encode_range (%s): %s", fp8_format_name(f), err);
  printf("gpu_cast_exhaustive %s: 4294967296 patterns, %llu mismatches\n", fp8_format_name(f),
         (unsigned long long)mismatches);
  GH_CHECK(mismatches == 0, "%s: %llu of 2^32 patterns encode differently on the GPU (first ones "
           "above)", fp8_format_name(f), (unsigned long long)mismatches);
done:
  free(dev);
  free(x);
  free(mine);
}

static void test_e4m3(void) { check_format(FP8_E4M3); }
static void test_e5m2(void) { check_format(FP8_E5M2); }

int main(void) {
  char why[256] = "";
  if (fp8k_device_count(why, sizeof why) == 0) gh_skip(why); /* "skipped: ...", exit 77 */
  GH_RUN(test_e4m3);
  GH_RUN(test_e5m2);
  return gh_summary();
}
