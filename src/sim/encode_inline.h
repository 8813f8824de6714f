/* encode_inline.h: the FP8 encoder's body, inline, for the simulator's files that encode in
 * their own loops (fp8.c, quant.c, valhist.c), so that each loop, and each instruction-set
 * variant of quant.c's loops, vectorizes it. Not a public header. */
#ifndef FP8LAB_SIM_ENCODE_INLINE_H
#define FP8LAB_SIM_ENCODE_INLINE_H

#include <stdint.h>
#include <string.h>

/* Per-format constants (see ENCODE_E4M3 / ENCODE_E5M2 below):
 * E4M3: bias 7, 3 mantissa bits, min normal 2^-6, min subnormal 2^-9 (magic 2^14), max 448 =
 *   0x7E. 464 = 448 + half an ulp rounds (ties to even) down to 448; above it saturates.
 * E5M2: bias 15, 2 mantissa bits, min normal 2^-14, min subnormal 2^-16 (magic 2^7), max
 *   57344 = 0x7B. 61440 = 57344 + half an ulp would round to inf (even): saturate from there. */

static inline uint32_t enc_f2u(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

static inline float enc_u2f(uint32_t u) {
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}

/* The encoder's body, shared by the scalar and the array entry points. The constants are
 * passed by value so that, inlined into a loop with literal arguments, they fold away. */
static inline __attribute__((always_inline)) uint8_t
encode_bits(uint32_t u, uint32_t mant_shift, uint32_t rebias,
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
  uint32_t sub = enc_f2u(enc_u2f(a) + magic) - magic_bits;
  uint32_t code = a < min_normal ? sub : normal;
  code = a >= sat_from ? max_code : code;
  code |= sign;
  code = a > 0x7F800000u ? 0x7Fu : code; /* NaN, sign dropped as CUDA does */
  return (uint8_t)code;
}

#define ENCODE_E4M3(u) encode_bits((u), 20, 120u << 3, 0x3C800000u, 0x43E80001u, 16384.0f, 0x46800000u, 0x7E)
#define ENCODE_E5M2(u) encode_bits((u), 21, 112u << 2, 0x38800000u, 0x47700000u, 128.0f, 0x43000000u, 0x7B)


#endif /* FP8LAB_SIM_ENCODE_INLINE_H */
