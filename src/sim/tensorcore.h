/* tensorcore.h: FP8 products summed as a tensor core sums them (issue 46; docs/tensor_cores.md,
 * docs/semantics.md "Tensor-core accumulation").
 *
 * One MMA inner product d = c + sum_{i<n} a_i * b_i (n <= 32, a_i and b_i FP8 values given as
 * the floats they decode to, c and d float32) as the bit-accurate models of F. A. Khattak and
 * M. Mikaitis, "Accurate Models of NVIDIA Tensor Cores" (arXiv 2512.07004) define it, checked
 * bit for bit against the outputs of real H100, H200 and B200 tensor cores
 * (tests/tools/tensorcore_data):
 *
 *   FP8_TC_H100 (sm90, H100 and H200): every non-zero product and a non-zero c aligned to the
 *     largest exponent M (a product's exponent is the sum of its operands' exponents, each
 *     clamped below at its format's emin; c's is its float32 exponent, -126 for a subnormal;
 *     M >= -133); each term kept to 13 fraction bits below 2^M by truncation toward zero
 *     (sign(x) trunc(|x| 2^(13 - M))); one exact integer sum; the result truncated toward zero
 *     to 14 significant bits (13 fraction bits; below 2^-126 to quanta of 2^-139), +0 for 0.
 *   FP8_TC_B200 (sm100): the products summed exactly, the sum truncated toward zero to float32
 *     (-0 only when every product is a negative zero), then c added with one round to nearest
 *     even (the float32 addition).
 *   FP8_TC_EXACT: fmaf(a_i, b_i, acc) in index order from acc = c (the CPU's FP32 GEMM,
 *     gemm.h's sampled block: one rounding per product, not an MMA model).
 * Non-finite operands (GEMM.m's rule): a NaN term, or +Inf with -Inf, gives NaN (0x7FC00000);
 * else an infinite term gives that infinity.
 *
 * The GEMM level (fp8lab's assumption, not the paper's; docs/semantics.md): a dot product of
 * length k runs in MMAs of FP8_TC_MMA_K terms in ascending index order (the last shorter: its
 * missing terms are zero products, which neither model counts). Fast accumulation (promote = 0:
 * cuBLASLt's CUBLASLT_MATMUL_DESC_FAST_ACCUM, TE's fprop under per-tensor scaling) chains the
 * MMAs through the accumulator, d = mma(block, c = d) from d = 0. Promotion every `promote`
 * terms (a multiple of FP8_TC_MMA_K; FP8_TC_PROMOTE = 128, CUTLASS's mma_promotion_interval of
 * 4 MMAs and DeepSeek-V3's N_C) chains a partial sum from 0 over each run of promote terms and
 * adds it to an FP32 accumulator with one rounding (acc = acc + partial). For FP8_TC_EXACT
 * both are the one fmaf chain. */
#ifndef FP8LAB_SIM_TENSORCORE_H
#define FP8LAB_SIM_TENSORCORE_H

#include <stdint.h>

#include "fp8.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { FP8_TC_EXACT = 0, FP8_TC_H100 = 1, FP8_TC_B200 = 2 } fp8_tc_model;
#define FP8_TC_MODEL_COUNT 3
#define FP8_TC_MMA_K 32    /* terms of one FP8 MMA inner product (wgmma / tcgen05 k = 32) */
#define FP8_TC_PROMOTE 128 /* the split accumulator's promotion interval, in terms */

/** "exact", "h100", "b200". */
const char *fp8_tc_model_name(fp8_tc_model m);
/** Parses "exact", "h100", "h200" (the same model as h100) or "b200": FP8_OK or FP8_EINVAL. */
int fp8_tc_model_parse(const char *s, fp8_tc_model *m);

/** One MMA inner product as model m computes it (the top of this file); n <= 32 (more: one
 *  block all the same). fa, fb: the formats a and b were decoded from (their emin). */
float fp8_tc_mma(fp8_tc_model m, fp8_format fa, fp8_format fb, const float *a, const float *b,
                 int n, float c);

/** A dot product of length k as a GEMM's entry: MMAs of 32 terms, fast accumulation
 *  (promote = 0) or promotion every `promote` terms (> 0, a multiple of 32). */
float fp8_tc_dot(fp8_tc_model m, fp8_format fa, fp8_format fb, const float *a, const float *b,
                 int64_t k, int64_t promote);

/** The block y = A B^T (y [p * q] row-major; a [p, k], b [q, k] row-major FP8 values), each
 *  entry fp8_tc_dot(...) times `scale` (one float multiplication: the operands' scale_inv
 *  product, as cuBLASLt's epilogue applies it). The same bits as fp8_tc_dot; H100's runs
 *  eight entries a vector with AVX2 where the CPU has it. */
void fp8_tc_block(fp8_tc_model m, fp8_format fa, fp8_format fb, int64_t p, int64_t q, int64_t k,
                  const float *a, const float *b, int64_t promote, float scale, float *y);
/** The same without the vector kernel: the definition, for tests. */
void fp8_tc_block_plain(fp8_tc_model m, fp8_format fa, fp8_format fb, int64_t p, int64_t q,
                        int64_t k, const float *a, const float *b, int64_t promote, float scale,
                        float *y);

#ifdef __cplusplus
}
#endif

#endif /* FP8LAB_SIM_TENSORCORE_H */
