/* e8m0.c: E8M0, the power-of-two scale of the MX formats (block.h): rounding up (TE), OCP's
 * floor rule and the decoded scale. Its own file because MXFP8 (block.c) and MXFP4 (fp4.c) both
 * use it, and block.c dispatches the FP4 kinds to fp4.c: no call cycle between files. */
#include <math.h>
#include <string.h>

#include "block.h"

static inline uint32_t f2u(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

uint8_t fp8_e8m0_ceil(float v) {
  uint32_t a = f2u(v) & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return 0xFF;
  if (a == 0x7F800000u) return 0xFE;
  uint32_t e = a >> 23, m = a & 0x7FFFFFu;
  /* Exponent field 0: v = m * 2^-149, and 2^-127 = 0x400000 * 2^-149 is E8M0's smallest value
   * (this also maps v = 0 to 0). */
  if (e == 0) return m > 0x400000u ? 1 : 0;
  /* Round up unless exact; 0xFE never rounds up into the NaN code (satfinite). */
  if (m != 0 && e < 0xFE) e++;
  return (uint8_t)e;
}

uint8_t fp8_e8m0_floor(float b, int emax) {
  int k;
  (void)frexpf(b, &k); /* b = m * 2^k with m in [0.5, 1): floor(log2 b) = k - 1, subnormals too */
  int e = (k - 1) - emax + 127;
  return (uint8_t)(e < 0 ? 0 : e > 254 ? 254 : e);
}

float fp8_e8m0_scale(uint8_t e) { return ldexpf(1.0f, 127 - (int)e); }
