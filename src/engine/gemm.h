/* gemm.h: GEMM-level error of an FP8 recipe configuration for one linear layer at one step.
 *
 * A layer `<layer>` with `<layer>.input` X [tokens, in], `<layer>.weight` W [out, in] and
 * `<layer>.grad_output` dY [tokens, out] has three GEMMs:
 *   fprop  Y  = X  · W^T   [tokens, out]   reduces over `in`
 *   dgrad  dX = dY · W     [tokens, in]    reduces over `out`
 *   wgrad  dW = dY^T · X   [out, in]       reduces over `tokens`
 * The reference (fp8_gemm_ref_init) is computed once per layer and step from the original
 * operands in double precision (cblas_dgemm); each configuration then supplies its dequantized
 * operands and gets rel_error = ||Y - Y_ref||_F / ||Y_ref||_F per GEMM, with Y from an FP32
 * GEMM (cblas_sgemm). CBLAS comes from GSL's interface header and resolves to OpenBLAS at link
 * time (the build links OpenBLAS ahead of gslcblas).
 *
 * How the caller quantizes the operands (TE's layouts; fp8_gemm_operand_colwise()): block and
 * row-wise recipes put each operand's blocks along the GEMM's reduction dimension:
 *   fprop: input and weight row-wise (blocks along `in`, the last dimension as stored);
 *   dgrad: grad_output row-wise (along `out`), weight column-wise (blocks along `out`, the
 *          first dimension: the transposed layout);
 *   wgrad: grad_output and input column-wise (blocks along `tokens`).
 * A 128x128 weight block is the same block in both directions. Per-tensor recipes (delayed,
 * current) use their one scale for every GEMM, so the same dequantized tensor serves all three.
 *
 * Token sampling (max_tokens > 0 and < tokens): the GEMMs use only tokens
 * t_i = floor(i * tokens / max_tokens), i = 0 .. max_tokens-1 (evenly spread, token 0 always
 * in, deterministic). Operands are quantized in full (their scales are those of the whole
 * tensor, blocks along tokens included) and the sampled rows are taken afterwards, so fprop
 * and dgrad are exact row subsets of the full outputs and wgrad is the sum over the sampled
 * tokens only.
 */
#ifndef FP8LAB_ENGINE_GEMM_H
#define FP8LAB_ENGINE_GEMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fp8.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The three GEMMs of a linear layer. */
/** One BLAS thread: OpenBLAS's pthread build starts its server threads when it is loaded, and
 *  each spins (sched_yield) for about 0.1 s of CPU before it sleeps, in every fp8lab process,
 *  competing with the engine's workers; the GEMMs here are small and the workers call BLAS
 *  concurrently anyway. Stops those threads (OpenBLAS's blas_thread_shutdown_, also run at
 *  fork) and sets one thread; does nothing under another CBLAS. Called first in main and when
 *  a CPU engine is created (library callers: the tests). */
void fp8_gemm_blas_single_thread(void);

typedef enum { FP8_GEMM_FPROP, FP8_GEMM_DGRAD, FP8_GEMM_WGRAD } fp8_gemm_kind;
#define FP8_GEMM_COUNT 3

/** "fprop" / "dgrad" / "wgrad". */
const char *fp8_gemm_name(fp8_gemm_kind g);

/** The roles of GEMM g's two operands, a (left) then b (right): fprop (input, weight), dgrad
 *  (grad_output, weight), wgrad (grad_output, input); as role names of fp8.h ("input", ...). */
const char *fp8_gemm_operand_role(fp8_gemm_kind g, int operand);

/** The layer tensor of operand (0 = a, 1 = b) of GEMM g: 0 input, 1 weight, 2 grad_output (the
 *  order of fp8_gemm_errors_per_tensor's arrays and of the engine's GEMM job, engine.h). */
static inline int fp8_gemm_operand_tensor(fp8_gemm_kind g, int operand) {
  return g == FP8_GEMM_FPROP ? (operand == 0 ? 0 : 1)
       : g == FP8_GEMM_DGRAD ? (operand == 0 ? 2 : 1)
                             : (operand == 0 ? 2 : 0);
}

/** Token sampling (the top of this file): the number of tokens the GEMMs use, max_tokens when
 *  0 < max_tokens < tokens, else tokens; and the row of the i-th of them (0 <= i < ntok).
 *  Inline, so that the GPU module needs nothing of gemm.c (and of CBLAS). */
static inline int64_t fp8_gemm_ntok(int64_t tokens, int64_t max_tokens) {
  return max_tokens > 0 && max_tokens < tokens ? max_tokens : tokens;
}
/* floor(i * tokens / ntok) without overflow: both stay <= INT_MAX (fp8_gemm_ref_init) */
static inline int64_t fp8_gemm_token(int64_t i, int64_t tokens, int64_t ntok) {
  return i * tokens / ntok;
}

/** True when cuBLASLt has an FP8 GEMM for operands of formats a and b: every pair but
 *  E5M2 x E5M2 (src/gpu/README.md). The one place this rule is written. */
static inline bool fp8_gemm_lt_has_formats(fp8_format a, fp8_format b) {
  return !(a == FP8_E5M2 && b == FP8_E5M2);
}

/** True when operand (0 = a, 1 = b) of GEMM g must be quantized column-wise, i.e. with its
 *  blocks along the first dimension of its stored [rows, cols] matrix (block.h's
 *  FP8_BLOCK_DIR_COL): dgrad's weight and both wgrad operands. False: along the last dimension. */
bool fp8_gemm_operand_colwise(fp8_gemm_kind g, int operand);

/** The double-precision reference of one layer at one step. */
typedef struct {
  int64_t tokens;          /**< tokens of the operands as given */
  int64_t in, out;
  int64_t ntok;            /**< tokens used by the GEMMs (= tokens without sampling) */
  int64_t *tok;            /**< the sampled token indices [ntok]; NULL without sampling */
  bool have[FP8_GEMM_COUNT];     /**< GEMMs whose two operands were given */
  double *y[FP8_GEMM_COUNT];     /**< references: fprop [ntok, out], dgrad [ntok, in],
                                      wgrad [out, in] (row-major); NULL when !have */
  double norm[FP8_GEMM_COUNT];   /**< ||Y_ref||_F (NaN when !have) */
  float *scratch;                /**< the FP32 outputs and sampled operands of fp8_gemm_error,
                                      allocated once with the reference (so a ref serves one
                                      thread at a time) */
} fp8_gemm_ref;

/** Computes the reference GEMMs from the original operands (row-major float32), in double.
 *  Any operand may be NULL: the GEMMs needing it are then not available (have[g] false, their
 *  rel_error NaN). Shapes: input [tokens, in], weight [out, in], grad_output [tokens, out].
 *  @param max_tokens 0 = all tokens, else the number of tokens to sample (see the top of
 *         this file); values >= tokens mean all tokens.
 *  @return FP8_OK; FP8_EINVAL for negative sizes or max_tokens; FP8_ERANGE when a dimension
 *          exceeds CBLAS's int; FP8_ENOMEM. On error *ref is left empty (safe to free). */
int fp8_gemm_ref_init(fp8_gemm_ref *ref, const float *input, const float *weight,
                      const float *grad_output, int64_t tokens, int64_t in, int64_t out,
                      int64_t max_tokens);
void fp8_gemm_ref_free(fp8_gemm_ref *ref);

/** rel_error of GEMM g with the dequantized operands a and b of one configuration, in the
 *  same stored layouts and full token count as given to fp8_gemm_ref_init (fprop: input
 *  [tokens, in], weight [out, in]; dgrad: grad_output [tokens, out], weight [out, in]; wgrad:
 *  grad_output [tokens, out], input [tokens, in]). Y = FP32 GEMM (cblas_sgemm) of the sampled
 *  tokens; rel_error = sqrt(sum (Y - Y_ref)^2) / ||Y_ref||_F, the differences taken and summed
 *  in double. When ||Y_ref||_F is 0: 0 if Y is all zero too, else +inf. Non-finite values
 *  propagate (an inf or NaN operand gives NaN or inf). NaN when !ref->have[g]. Uses the
 *  reference's scratch: one thread at a time per reference.
 *  @return FP8_OK, FP8_EINVAL (a or b NULL while have[g]). */
int fp8_gemm_error(const fp8_gemm_ref *ref, fp8_gemm_kind g, const float *a, const float *b,
                   double *rel_error);

/** The errors of a per-tensor configuration (one scale per tensor, used by every GEMM): for each
 *  GEMM g with want[g] (want NULL: all three), its operands x[i] (i as fp8_gemm_operand_tensor:
 *  input, weight, grad_output, the layouts and full token count given to fp8_gemm_ref_init) are
 *  quantized with scale[i] and format[i] into q[i] (scratch of the same sizes; only the operands
 *  of wanted GEMMs are written) and rel_error[g] is fp8_gemm_error's. Other entries untouched.
 *  @return as fp8_gemm_errors. */
int fp8_gemm_errors_per_tensor(const fp8_gemm_ref *ref, const float *const x[3],
                               const float scale[3], const fp8_format format[3], float *const q[3],
                               const bool want[FP8_GEMM_COUNT],
                               double rel_error[FP8_GEMM_COUNT]);

/** The dequantized operands of one configuration for all three GEMMs (see the top of this file
 *  for which orientation each needs). For a per-tensor recipe, point the two input fields, the
 *  two weight fields and the two grad_output fields at the same arrays. */
typedef struct {
  const float *fprop_input, *fprop_weight;       /**< row-wise, row-wise */
  const float *dgrad_grad_output, *dgrad_weight; /**< row-wise, column-wise */
  const float *wgrad_grad_output, *wgrad_input;  /**< column-wise, column-wise */
} fp8_gemm_operands;

/** fp8_gemm_error() for the three GEMMs: rel_error[FP8_GEMM_FPROP..FP8_GEMM_WGRAD] (NaN for the
 *  unavailable ones). Returns the first error status, after trying all three. */
int fp8_gemm_errors(const fp8_gemm_ref *ref, const fp8_gemm_operands *ops,
                    double rel_error[FP8_GEMM_COUNT]);

#ifdef __cplusplus
}
#endif

#endif /* FP8LAB_ENGINE_GEMM_H */
