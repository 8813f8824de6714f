/* fp8.c: the two FP8 formats, bit-exact with CUDA's saturating conversion.
 *
 * Encoding works on the float32 bit pattern with integer arithmetic for normal results and one
 * float addition for subnormal results (adding a "magic" power of two whose ulp is the format's
 * smallest subnormal lets the FPU do the round-to-nearest-even). Every step is a select, so the
 * array loop vectorizes. Decoding is a 256-entry table built once.
 */
#include "fp8.h"

#include <math.h>
#include <string.h>
#include <strings.h>

/* Per-format constants (see ENCODE_E4M3 / ENCODE_E5M2 below):
 * E4M3: bias 7, 3 mantissa bits, min normal 2^-6, min subnormal 2^-9 (magic 2^14), max 448 =
 *   0x7E. 464 = 448 + half an ulp rounds (ties to even) down to 448; above it saturates.
 * E5M2: bias 15, 2 mantissa bits, min normal 2^-14, min subnormal 2^-16 (magic 2^7), max
 *   57344 = 0x7B. 61440 = 57344 + half an ulp would round to inf (even): saturate from there. */

static inline uint32_t f2u(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

static inline float u2f(uint32_t u) {
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}

/* The encoder's body, shared by the scalar and the array entry points. The constants are
 * passed by value so that, inlined into a loop with literal arguments, they fold away. */
static inline uint8_t encode_bits(uint32_t u, uint32_t mant_shift, uint32_t rebias,
                                  uint32_t min_normal, uint32_t sat_from, float magic,
                                  uint32_t magic_bits, uint32_t max_code) {
  uint32_t sign = (u >> 24) & 0x80u;
  uint32_t a = u & 0x7FFFFFFFu;
  /* normal range: round the mantissa to nearest even in the integer domain; a carry into the
   * exponent is the correct result */
  uint32_t lsb = (a >> mant_shift) & 1u;
  uint32_t rounded = a + ((1u << (mant_shift - 1)) - 1u) + lsb;
  uint32_t normal = (rounded >> mant_shift) - rebias;
  /* subnormal range: |x| + magic rounds |x| to a multiple of the min subnormal */
  uint32_t sub = f2u(u2f(a) + magic) - magic_bits;
  uint32_t code = a < min_normal ? sub : normal;
  code = a >= sat_from ? max_code : code;
  code |= sign;
  code = a > 0x7F800000u ? 0x7Fu : code; /* NaN, sign dropped as CUDA does */
  return (uint8_t)code;
}

#define ENCODE_E4M3(u) encode_bits((u), 20, 120u << 3, 0x3C800000u, 0x43E80001u, 16384.0f, 0x46800000u, 0x7E)
#define ENCODE_E5M2(u) encode_bits((u), 21, 112u << 2, 0x38800000u, 0x47700000u, 128.0f, 0x43000000u, 0x7B)

uint8_t fp8_encode(float x, fp8_format f) {
  return f == FP8_E5M2 ? ENCODE_E5M2(f2u(x)) : ENCODE_E4M3(f2u(x));
}

void fp8_encode_array(const float *restrict x, size_t n, fp8_format f, uint8_t *restrict codes) {
  if (f == FP8_E5M2)
    for (size_t i = 0; i < n; i++) codes[i] = ENCODE_E5M2(f2u(x[i]));
  else
    for (size_t i = 0; i < n; i++) codes[i] = ENCODE_E4M3(f2u(x[i]));
}

/* ---------------------------------------------------------------- decode table */

static float decode_e4m3[256];
static float decode_e5m2[256];
static int decode_ready;

/* CUDA's host decode returns the canonical half NaN 0x7FFF, and its host __half2float widens
 * that to 0x7FFFFFFF: fp8lab returns the same bits. */
#define FP8_NAN_BITS 0x7FFFFFFFu

static float decode_compute(uint8_t code, fp8_format f) {
  int mbits = f == FP8_E4M3 ? 3 : 2;
  int bias = f == FP8_E4M3 ? 7 : 15;
  int e = (code & 0x7F) >> mbits;
  int m = code & ((1 << mbits) - 1);
  float s = (code & 0x80) ? -1.0f : 1.0f;
  if (f == FP8_E4M3 && (code & 0x7F) == 0x7F) return u2f(FP8_NAN_BITS);
  if (f == FP8_E5M2 && e == 31) return m == 0 ? s * INFINITY : u2f(FP8_NAN_BITS);
  if (e == 0) return s * ldexpf((float)m, 1 - bias - mbits);
  return s * ldexpf((float)((1 << mbits) | m), e - bias - mbits);
}

static void decode_init(void) {
  /* Building the tables twice (two threads racing) writes identical values: harmless. */
  for (int c = 0; c < 256; c++) {
    decode_e4m3[c] = decode_compute((uint8_t)c, FP8_E4M3);
    decode_e5m2[c] = decode_compute((uint8_t)c, FP8_E5M2);
  }
  decode_ready = 1;
}

const float *fp8_decode_table(fp8_format f) {
  if (!decode_ready) decode_init();
  return f == FP8_E5M2 ? decode_e5m2 : decode_e4m3;
}

float fp8_decode(uint8_t code, fp8_format f) { return fp8_decode_table(f)[code]; }

bool fp8_code_is_subnormal(uint8_t code, fp8_format f) {
  uint8_t emask = f == FP8_E4M3 ? 0x78 : 0x7C;
  return (code & emask) == 0 && (code & 0x7F) != 0;
}

/* ---------------------------------------------------------------- names */

float fp8_format_max(fp8_format f) { return f == FP8_E5M2 ? FP8_E5M2_MAX : FP8_E4M3_MAX; }

const char *fp8_format_name(fp8_format f) { return f == FP8_E5M2 ? "e5m2" : "e4m3"; }

int fp8_format_parse(const char *s, fp8_format *out) {
  if (!s) return FP8_EINVAL;
  if (strcasecmp(s, "e4m3") == 0) *out = FP8_E4M3;
  else if (strcasecmp(s, "e5m2") == 0) *out = FP8_E5M2;
  else return FP8_EINVAL;
  return FP8_OK;
}

const char *fp8_strerror(int status) {
  switch (status) {
  case FP8_OK: return "success";
  case FP8_EINVAL: return "invalid argument";
  case FP8_ENOMEM: return "out of memory";
  case FP8_EIO: return "input/output error";
  case FP8_EFORMAT: return "malformed input";
  case FP8_ERANGE: return "value out of range";
  case FP8_EDEVICE: return "device error";
  default: return "unknown error";
  }
}
