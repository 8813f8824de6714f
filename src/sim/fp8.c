/* fp8.c: the two FP8 formats, bit-exact with CUDA's saturating conversion.
 *
 * Encoding works on the float32 bit pattern with integer arithmetic for normal results and one
 * float addition for subnormal results (adding a "magic" power of two whose ulp is the format's
 * smallest subnormal lets the FPU do the round-to-nearest-even). Every step is a select, so the
 * array loop vectorizes. Decoding is a 256-entry table built once.
 */
#include "fp8.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>
#include <strings.h>

#include "encode_inline.h"

uint8_t fp8_encode(float x, fp8_format f) {
  return f == FP8_E5M2 ? ENCODE_E5M2(enc_f2u(x)) : ENCODE_E4M3(enc_f2u(x));
}

void fp8_encode_array(const float *restrict x, size_t n, fp8_format f, uint8_t *restrict codes) {
  if (f == FP8_E5M2)
    for (size_t i = 0; i < n; i++) codes[i] = ENCODE_E5M2(enc_f2u(x[i]));
  else
    for (size_t i = 0; i < n; i++) codes[i] = ENCODE_E4M3(enc_f2u(x[i]));
}

/* ---------------------------------------------------------------- decode table */

static float decode_e4m3[256];
static float decode_e5m2[256];
/* 0: not built, 1: being built, 2: ready. Worker threads may ask for a table at once: one
 * builds it, the others wait for it (plain flags and two threads writing the same values would
 * be a data race, which ThreadSanitizer reports: issue 16). */
static atomic_int decode_state;

/* CUDA's host decode returns the canonical half NaN 0x7FFF, and its host __half2float widens
 * that to 0x7FFFFFFF: fp8lab returns the same bits. */
#define FP8_NAN_BITS 0x7FFFFFFFu

static float decode_compute(uint8_t code, fp8_format f) {
  int mbits = f == FP8_E4M3 ? 3 : 2;
  int bias = f == FP8_E4M3 ? 7 : 15;
  int e = (code & 0x7F) >> mbits;
  int m = code & ((1 << mbits) - 1);
  float s = (code & 0x80) ? -1.0f : 1.0f;
  if (f == FP8_E4M3 && (code & 0x7F) == 0x7F) return enc_u2f(FP8_NAN_BITS);
  if (f == FP8_E5M2 && e == 31) return m == 0 ? s * INFINITY : enc_u2f(FP8_NAN_BITS);
  if (e == 0) return s * ldexpf((float)m, 1 - bias - mbits);
  return s * ldexpf((float)((1 << mbits) | m), e - bias - mbits);
}

static void decode_init(void) {
  int none = 0;
  if (atomic_compare_exchange_strong(&decode_state, &none, 1)) {
    for (int c = 0; c < 256; c++) {
      decode_e4m3[c] = decode_compute((uint8_t)c, FP8_E4M3);
      decode_e5m2[c] = decode_compute((uint8_t)c, FP8_E5M2);
    }
    atomic_store_explicit(&decode_state, 2, memory_order_release);
  }
  while (atomic_load_explicit(&decode_state, memory_order_acquire) != 2) {
  }
}

const float *fp8_decode_table(fp8_format f) {
  if (atomic_load_explicit(&decode_state, memory_order_acquire) != 2) decode_init();
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
  if (strcasecmp(s, fp8_format_name(FP8_E4M3)) == 0) *out = FP8_E4M3;
  else if (strcasecmp(s, fp8_format_name(FP8_E5M2)) == 0) *out = FP8_E5M2;
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
  case FP8_EWRITE: return "write failed";
  default: return "unknown error";
  }
}
