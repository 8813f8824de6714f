/* fp4.h: the FP4 element format E2M1 and the NVFP4 and MXFP4 block quantizers of the CPU
 * simulator (libfp8lab_sim; issue 29), as TransformerEngine's CUDA kernels compute them
 * (docs/semantics.md "FP4": every formula with its source, and where TE's Python reference and
 * torchao differ). Pure C11 + libm, like fp8.h. The recipe kinds `nvfp4` and `mxfp4`
 * (recipe.h) quantize through these, as block kinds (block.c, block_fp4.c: fp8_block_quantize_f32).
 *
 * E2M1: sign, 2 exponent bits (bias 1), 1 mantissa bit: +-{0, 0.5, 1, 1.5, 2, 3, 4, 6}; no inf
 * or NaN. A code is 4 bits: sign << 3 | index into that list.
 */
#ifndef FP8LAB_SIM_FP4_H
#define FP8LAB_SIM_FP4_H

#include <stdint.h>

#include "block.h" /* fp8_mx_rounding */
#include "fp8.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FP8_E2M1_MAX 6.0f
/** E4M3 max times E2M1 max: NVFP4's per-tensor scale is 2688 / amax. */
#define FP8_NVFP4_RANGE 2688.0f
#define FP8_NVFP4_BLOCK 16 /**< elements per NVFP4 block (and side of a 2-D weight block) */
#define FP8_MXFP4_BLOCK 32 /**< elements per MXFP4 block */

/** Encodes float32 y to E2M1 as PTX cvt.rn.satfinite.e2m1x2.f32 does: round to nearest, ties
 *  to the even code; |y| > 6 (infinities too) saturates to +-6; NaN gives +6 (code 7, TE's
 *  reading of satfinite); the sign of a zero result is kept (-0 and tiny negatives: code 8). */
uint8_t fp8_e2m1_encode(float y);
/** Decodes the low 4 bits of code (exact; code 8 is -0). */
float fp8_e2m1_decode(uint8_t code);
/** 1 when |y|'s cast is past the rounding midpoint above 6 (|y| >= 7, whose unbounded rounding
 *  is 8): the saturation branch, fp8lab's "clipped" for E2M1 (finite y). */
int fp8_e2m1_clips(float y);

/** NVFP4's per-tensor encode scale from the tensor's amax (TE's
 *  compute_global_encode_scaling_factor_FP4): fminf(e4m3_max * 6 / amax, FLT_MAX), and 1 when
 *  amax is 0 or the quotient is 0 (amax inf). e4m3_max is 448 (256 for TE's 4over6 tensors). */
float fp8_nvfp4_global_scale(float amax, float e4m3_max);
/** The E4M3 code of a block's scale: RN-saturating E4M3 of block_amax * (S_enc * RN32(1/6)),
 *  E4M3 subnormals and 0 included (TE's compute_decoding_scaling_factor). */
uint8_t fp8_nvfp4_block_scale(float block_amax, float s_enc);

/** The block scale rule: TE's plain one (max6), or "Four Over Six" (TE v2.17+,
 *  quantize_4over6_nvfp4.cuh), which tries the block at its scale and at 1.5x it (its amax then
 *  maps to 4) and keeps the one whose dequantized error is smaller. */
typedef enum { FP8_NVFP4_MAX6, FP8_NVFP4_4OVER6_MAE, FP8_NVFP4_4OVER6_MSE } fp8_nvfp4_scale_rule;

/** Stochastic rounding of the elements (NVFP4's gradients, issue 29). The codes, xhat and the
 *  fp8_stats counts take one seeded draw: element i (row-major index in the matrix given) rounds
 *  up when floor(256 f) > r_i, r_i the low byte of splitmix64(seed + index0 + i) (fp8lab's own
 *  stream, not TE's Philox). The expectation over TE's 8-bit rule is accumulated exactly:
 *  rounding up with probability floor(256 f) / 256 (fp8_e2m1_sr_expect). */
typedef struct {
  uint64_t seed;
  uint64_t index0;    /**< the first element's number in the draw (column-wise passes offset it) */
  double underflow;   /**< ACCUMULATED: expected count of finite non-zero x whose code is +-0 */
  double sum_sq_err;  /**< ACCUMULATED: expected sum over finite x of (x - xhat)^2 */
} fp8_fp4_sr;

/** The random byte of element i of a draw (splitmix64's output, low byte). */
uint8_t fp8_fp4_sr_byte(uint64_t seed, uint64_t i);

/** NVFP4 parameters of one quantization. */
typedef struct {
  int square;        /**< 16x16 blocks (TE's 2-D weights) instead of 1x16 */
  float global_amax; /**< the amax the per-tensor scale comes from (the tensor's: fmaxf, NaN
                          ignored), given so that a caller can pass a reduced one */
  float e4m3_max;    /**< the E4M3 maximum of the per-tensor scale: 448 (0 means 448), or 256
                          (TE's default for 4over6 tensors: room for the 1.5x scale) */
  fp8_nvfp4_scale_rule rule;
  fp8_fp4_sr *sr;    /**< NULL: round to nearest; else stochastic rounding, as fp8_fp4_sr says */
} fp8_nvfp4_params;

/** Quantizes the row-major [rows, cols] matrix x with NVFP4: per 1x16 run of a row (16x16 block
 *  when square; the last run or block of a row or column may be shorter) the block amax (fmaxf,
 *  NaN ignored), its E4M3 scale s, the element multiplier fminf(1 / (s * RN32(1/S_enc)),
 *  FLT_MAX) (FLT_MAX for s = 0), y = RN32(x * that), code = fp8_e2m1_encode(y). Dequantization
 *  as TE's: xhat = RN32(e2m1(code) * RN32(RN32(s * global_amax) * RN32(1/2688))). Statistics
 *  as for FP8 (fp8.h) with E2M1's max: overflow |y| > 6, clipped fp8_e2m1_clips(y), underflow a
 *  non-zero finite x whose code is +-0, subnormal a code +-0.5 (a 16x16 block's scale is
 *  decided once, at its first row). Writes codes (rows * cols, one
 *  per byte) and scales (one E4M3 code per 1x16 row run: rows * ceil(cols / 16)) when not NULL,
 *  and xhat when not NULL; accumulates into st when not NULL. FP8_OK, FP8_EINVAL or
 *  FP8_ENOMEM. */
/* With rule 4over6 (TE's quantize_4over6_nvfp4.cuh): base = RN32(RN32(block_amax / 6) * S_enc);
 *  the map-to-6 scale E4M3(fminf(base, 448)) and the map-to-4 scale E4M3(fminf(base * 1.5,
 *  448)) (448 even when e4m3_max is 256); each candidate's error is the sum, in element order
 *  and float32, of |d| (MAE) or d * d (MSE) with d = RN32(RN32(RN32(e2m1 * s) * global_amax) /
 *  (6 * e4m3_max)) - x; a 16x16 block adds its 16 row sums as a tree (offsets 8, 4, 2, 1). The
 *  map-to-4 scale is kept only when its error is strictly smaller. */
int fp8_nvfp4_quantize_f32(const float *x, int64_t rows, int64_t cols, const fp8_nvfp4_params *p,
                           uint8_t *codes, uint8_t *scales, float *xhat, fp8_stats *st);

/** The E8M0 exponent of an MXFP4 block (1x32, E2M1 elements, emax 2): ceil:
 *  fp8_e8m0_ceil(RN32(amax * RN32(1/6))) (fp8lab's MXFP8 rule carried to E2M1; torchao's
 *  RCEIL); floor: floor(log2 amax) - 2 + 127 clamped to [0, 254] (OCP MX v1.0; torchao's
 *  FLOOR). NaN gives 0xFF, 0 gives 0. */
uint8_t fp8_mxfp4_scale_exponent(float block_amax, fp8_mx_rounding r);

/** Quantizes the row-major [rows, cols] matrix with MXFP4: 1x32 runs along the rows, the
 *  scale 2^(127 - e), y = RN32(x * scale), fp8_e2m1_encode(y); xhat = e2m1(code) * 2^(e - 127).
 *  Outputs and statistics as fp8_nvfp4_quantize_f32 (scales: one E8M0 code per 1x32 run). */
int fp8_mxfp4_quantize_f32(const float *x, int64_t rows, int64_t cols, fp8_mx_rounding r,
                           uint8_t *codes, uint8_t *scales, float *xhat, fp8_stats *st);

/* ---------------------------------------------------------------- RHT and stochastic rounding */

/** TE's random Hadamard transform sign vector (nvfp4_tensor.py get_wgrad_sign_vector; bit i set:
 *  sign i is -1): fixed, not seeded. */
#define FP8_RHT_SIGNS 0xD7E8u

/** TE's random Hadamard transform of every run of 16 consecutive elements of x (n a multiple
 *  of 16) into y: y[j] = sum_i x[i] * s_i * H[i][j] / 4 with H the 16x16 Sylvester Hadamard
 *  matrix (H[i][j] = (-1)^popcount(i & j)) and s the fixed signs, summed in double (exact when the
 *  16 float32 terms lie within 25 binades of each other) and rounded once to BF16 (TE rounds its MMA's
 *  fp32 result to BF16, cvt.rn.bf16x2.f32; its fp32 accumulation can round first when the 16
 *  terms span more than 24 bits, which fp8lab does not reproduce). x and y may be the same array. FP8_OK or FP8_EINVAL (n not a multiple of 16). */
int fp8_rht16(const float *x, size_t n, float *y);

/** Stochastic rounding of y to E2M1, in expectation: with a <= |y| < b its neighbours on the
 *  grid (b = 6 saturating above) and f = (|y| - a) / (b - a), rounding goes up with probability
 *  p = f (ideal) or floor(256 f) / 256 (te_bits: TE's 8 random bits per element, its software
 *  rule; its hardware cvt.rs is documented the same way). Writes p, the expected squared error
 *  p (b - |y|)^2 + (1 - p) (|y| - a)^2 (ideal: (|y| - a)(b - |y|)) in y's units, and the
 *  probability that the code is +-0 (flushed). |y| >= 6, NaN: p 0, error as round to nearest. */
void fp8_e2m1_sr_expect(float y, int te_bits, double *p_up, double *e_sq, double *p_zero);

/** One stochastic rounding of y to E2M1 with the random byte r (0..255): up when r < 256 f
 *  rounded down, i.e. floor(256 f) > r (TE's software rule; not TE's random stream). */
uint8_t fp8_e2m1_encode_sr(float y, uint8_t r);

#ifdef __cplusplus
}
#endif

#endif /* FP8LAB_SIM_FP4_H */
