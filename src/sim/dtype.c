/* dtype.c: exact widening of the trace dtypes (F32, BF16, F16; little-endian) to float32. */
#include "fp8.h"

#include <float.h>
#include <math.h>
#include <string.h>

size_t fp8_dtype_size(fp8_dtype d) { return d == FP8_DTYPE_F32 ? 4 : 2; }

const char *fp8_dtype_name(fp8_dtype d) {
  switch (d) {
  case FP8_DTYPE_F32: return "F32";
  case FP8_DTYPE_BF16: return "BF16";
  case FP8_DTYPE_F16: return "F16";
  }
  return "?";
}

float fp8_dtype_max(fp8_dtype d) {
  switch (d) {
  case FP8_DTYPE_BF16: return fp8_bf16_to_f32(0x7F7Fu);
  case FP8_DTYPE_F16: return 65504.0f;
  case FP8_DTYPE_F32: break;
  }
  return FLT_MAX;
}

float fp8_bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

float fp8_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu, u;
  if (e == 0x1F) {
    u = sign | 0x7F800000u | (m << 13); /* inf, or NaN keeping its payload */
  } else if (e != 0) {
    u = sign | ((e + 112u) << 23) | (m << 13);
  } else {
    /* zero or subnormal: m * 2^-24 is exact in float32 */
    float f = ldexpf((float)m, -24);
    memcpy(&u, &f, sizeof u);
    u |= sign;
  }
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static uint16_t load_u16(const unsigned char *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

void fp8_dtype_to_f32(fp8_dtype d, const void *src, size_t n, float *dst) {
  const unsigned char *p = src;
  switch (d) {
  case FP8_DTYPE_F32:
    for (size_t i = 0; i < n; i++) {
      uint32_t u = (uint32_t)p[4 * i] | ((uint32_t)p[4 * i + 1] << 8) |
                   ((uint32_t)p[4 * i + 2] << 16) | ((uint32_t)p[4 * i + 3] << 24);
      memcpy(&dst[i], &u, sizeof u);
    }
    break;
  case FP8_DTYPE_BF16:
    for (size_t i = 0; i < n; i++) dst[i] = fp8_bf16_to_f32(load_u16(p + 2 * i));
    break;
  case FP8_DTYPE_F16:
    for (size_t i = 0; i < n; i++) dst[i] = fp8_f16_to_f32(load_u16(p + 2 * i));
    break;
  }
}
