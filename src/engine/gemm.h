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
 * The exact mode (gemm_error = exact) is fp8_gemm_ref / fp8_gemm_error below; the sampled mode
 * (the default) is fp8_gemm_sample at the end of this file.
 *
 * Token sampling (exact mode; max_tokens > 0 and < tokens): the GEMMs use only tokens
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
#include "tensorcore.h" /* fp8_tc_model: the tensor-core accumulation */

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

/* ---------------------------------------------------------------- tensor-core accumulation
 *
 * [analysis] tensor_core = h100 | b200 (issue 46; docs/semantics.md "Tensor-core
 * accumulation"): a per-tensor configuration's GEMM as an FP8 tensor core computes it. The
 * operands are given as FP8 values (the floats their codes decode to: va, vb, formats fa, fb)
 * and the product of their scale_inv's sab = RN32(RN32(1/s_a) RN32(1/s_b)); each output entry
 * is fp8_tc_dot's (MMAs of 32 terms in reduction order, fast accumulation or promotion every
 * 128 terms) times sab. fp8_gemm_tc_promote says which GEMM takes which: TE's per-tensor
 * recipes run fprop with fast accumulation (use_split_accumulator = False) and dgrad, wgrad
 * with the split accumulator; `alt` gives the other form. The engines compute the other form
 * for fprop only (fprop promoted: DeepSeek-V3's comparison, the report's side-by-side): no TE
 * recipe runs dgrad or wgrad with fast accumulation, and it would cost a third more. */
static inline int64_t fp8_gemm_tc_promote(fp8_gemm_kind g, int alt) {
  int fast = g == FP8_GEMM_FPROP;
  return (alt ? !fast : fast) ? 0 : FP8_TC_PROMOTE;
}

/** fp8_gemm_error with the tensor-core model: the operands as FP8 values in the stored layouts
 *  of fp8_gemm_error (the reduction-major copies it needs are made here), sab their scale_inv
 *  product, model m, promote as fp8_tc_dot's. @return FP8_OK, FP8_EINVAL, FP8_ENOMEM. */
int fp8_gemm_error_tc(const fp8_gemm_ref *ref, fp8_gemm_kind g, const float *va, const float *vb,
                      fp8_format fa, fp8_format fb, float sab, fp8_tc_model m, int64_t promote,
                      double *rel_error);

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

/* ---------------------------------------------------------------- sampled GEMM error
 *
 * gemm_error = sampled (docs/semantics.md, "GEMM errors"): each GEMM's output Y [m, n] is
 * estimated from a p x q block of entries: p output rows and q output columns (p = min(sample,
 * m), q = min(sample, n); all rows when sample >= m, likewise columns), each entry one dot
 * product over the whole reduction length k. Every GEMM is written C = A · B^T with its two
 * operands gathered reduction-major: A [p, k], B [q, k]:
 *   fprop  A = X rows (tokens),         B = W rows (out)        k = in
 *   dgrad  A = dY rows (tokens),        B = W columns (in)      k = out
 *   wgrad  A = dY columns (out),        B = X columns (in)      k = tokens
 * Rows and columns are drawn independently, with replacement, with probability proportional to
 * size (PPS): pi_i = (|A_i|^2 / sum |A|^2 + 1 / m) / 2 for row i (A_i the operand vector of
 * output row i, from the original operand), likewise for columns with B_j; so a few outlier
 * channels, which carry most of ||Y|| and of its error, are in nearly every sample, weighted by
 * 1 / (m pi_i). The reference block is computed once in double (the gathered original operands
 * widened); each configuration quantizes its gathered operands (a per-tensor cast is
 * elementwise, so gathering and casting commute; block recipes gather from their full
 * dequantized operands) and runs one FP32 GEMM of the block. The estimate of rel_error^2 is
 * the weighted ratio sum(w d) / sum(w r) over the block (d = (y - y_ref)^2, r = y_ref^2,
 * w = u_i v_j the two weights); its variance is the crossed (rows x columns) random-effects
 * variance of the linearized residual z = w (d - R^2 r); the interval is 95% on the log
 * scale (gemm_sample.c). */

/** A GEMM's sample at one layer and step: its gathered original operands and reference. */
typedef struct {
  fp8_gemm_kind g;
  int64_t m, n, k;   /**< the full output [m, n] and reduction length */
  int64_t p, q;      /**< sampled rows and columns (= m, n: all of them, each once) */
  int64_t *rows;     /**< [p] output rows drawn (sorted; repeats possible) */
  int64_t *cols;     /**< [q] output columns drawn */
  double *u, *v;     /**< [p], [q]: their weights 1 / (m pi) (1 when all are taken) */
  float *a, *b;      /**< gathered original operands A [p, k], B [q, k] */
  double *yref;      /**< [p * q] reference block (double) */
  float *qa, *qb;    /**< scratch [p, k], [q, k]: a configuration's gathered operands */
  float *y;          /**< scratch [p * q]: its FP32 block */
  double *wide;      /**< scratch: the reference's widened operands, the draw's CDF */
  size_t cap[11];    /**< capacities of rows, u, cols, v, a, qa, b, qb, yref, y, wide (reuse) */
} fp8_gemm_sample;

/** The sizes the sample is drawn by (fp8_gemm_sample_init): the squared L2 norms of the rows
 *  (rowsq [rows]) and columns (colsq [cols]) of a stored [rows, cols] matrix of dtype d, each
 *  over a subsample of the other dimension once that is large (fp8_gemm_norm_steps): a
 *  column's over every row_step-th row (from row 0), a row's over the columns of every
 *  group_step-th group of 32 (from column 0); all of them below FP8_GEMM_NORM_ROWS and
 *  FP8_GEMM_NORM_COLS. So the sizes cost 1/8 to 1/4 of a pass over a large tensor, not a whole
 *  one; the draw's probabilities are still the ones its weights use. Each square is x * x in
 *  float; a column's added in float in row order, a row's in eight float lanes by column index
 *  mod 8, ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)). */
#define FP8_GEMM_NORM_ROWS 256 /* at least this many rows in a column's norm */
#define FP8_GEMM_NORM_COLS 512 /* at least this many columns (16 groups of 32) in a row's */
void fp8_gemm_norms(const void *x, fp8_dtype d, int64_t rows, int64_t cols, double *rowsq,
                    double *colsq);
/** fp8_gemm_norms' steps: row_step = max(1, rows / FP8_GEMM_NORM_ROWS), group_step = max(1,
 *  cols / FP8_GEMM_NORM_COLS) (integer division). */
void fp8_gemm_norm_steps(int64_t rows, int64_t cols, int64_t *row_step, int64_t *group_step);

/** The seed of GEMM g of a layer at a step: gemm_seed mixed with the layer name (without a
 *  multi-rank trace's leading rank_<r>/), the step and g (splitmix64 over FNV-1a), so that a
 *  sample depends on nothing else (threads, processes, other layers, the rank's trace being
 *  replayed alone or within its multi-rank trace). */
uint64_t fp8_gemm_sample_seed(uint64_t gemm_seed, const char *layer, int64_t step,
                              fp8_gemm_kind g);

/** Draws the sample of GEMM g (output [m, n], reduction k) and allocates its buffers; the
 *  operands are then given with fp8_gemm_sample_gather and the reference with
 *  fp8_gemm_sample_reference. size_a [m] and size_b [n]: the squared norms of the operand
 *  vectors of each output row and column (NULL, or a non-finite or zero total: uniform).
 *  sample >= 1. *s is zeroed or a sample made before, whose buffers are reused (a worker keeps
 *  one per GEMM: no allocation per layer and step once they are large enough).
 *  @return FP8_OK, FP8_EINVAL, FP8_ERANGE (a dimension over CBLAS's int), FP8_ENOMEM (then *s
 *  is empty, safe to free). */
int fp8_gemm_sample_init(fp8_gemm_sample *s, fp8_gemm_kind g, int64_t tokens, int64_t in,
                         int64_t out, int64_t sample, uint64_t seed, const double *size_a,
                         const double *size_b);
void fp8_gemm_sample_free(fp8_gemm_sample *s);

/** Gathers operand `operand` (0 = A, 1 = B) of the sample from the stored matrix x of dtype d
 *  (the operand's tensor as stored, fp8_gemm_operand_tensor: input [tokens, in], weight [out,
 *  in], grad_output [tokens, out]), widened, into dst ([p, k] or [q, k]): its rows, or its
 *  columns where the operand is column-wise (fp8_gemm_operand_colwise: the reduction runs
 *  along the stored matrix's first dimension). */
void fp8_gemm_sample_gather(const fp8_gemm_sample *s, int operand, const void *x, fp8_dtype d,
                            float *dst);

/** The reference block from s->a and s->b (gathered original operands), in double. */
void fp8_gemm_sample_reference(fp8_gemm_sample *s);

/** The estimate and its 95% interval for a configuration's gathered operands qa [p, k] and
 *  qb [q, k] (s->qa / s->qb, or others): rel_error, lo <= rel_error <= hi. When the sample is
 *  the whole output (p = m, q = n) lo = hi = rel_error. With sum(r) = 0 over the sample:
 *  rel_error 0 when every d is 0, else +inf, and (unless whole) lo = 0, hi = +inf. Non-finite
 *  values give NaN or inf for all three. */
void fp8_gemm_sample_error(fp8_gemm_sample *s, const float *qa, const float *qb,
                           double *rel_error, double *lo, double *hi);

/** fp8_gemm_sample_error with the tensor-core model: the gathered operands as FP8 values va
 *  [p, k] and vb [q, k] of formats fa, fb, sab their scale_inv product (fp8_gemm_error_tc);
 *  the block into s->y. lo and hi may be NULL. */
void fp8_gemm_sample_error_tc(fp8_gemm_sample *s, fp8_tc_model m, int64_t promote, fp8_format fa,
                              fp8_format fb, const float *va, const float *vb, float sab,
                              double *rel_error, double *lo, double *hi);

/** The paired ratio of two configurations' sampled errors on one sample (docs/semantics.md,
 *  "The FP4 verdict's ratio"): yc and yr [p * q] are configuration c's and the reference
 *  configuration's FP32 blocks of the same rows and columns (s->y after each one's
 *  fp8_gemm_sample_error, or fp8_gemm_block_f32 of its gathered operands).
 *  ratio = sqrt(sum(w d_c) / sum(w d_r)) estimates rel_error_c / rel_error_r (d = (y -
 *  y_ref)^2, w = u_i v_j); lo <= ratio <= hi its 95% interval: the crossed design's variance of
 *  z = w (d_c - Q d_r), Q = ratio^2, se = sqrt(Var) / mean(w d_r), Q exp(-+1.96 se / Q), the
 *  ends square-rooted. The whole output: lo = hi = ratio (exact). sum(w d_r) = 0: ratio 1 when
 *  every d_c is 0 too (both exact), else +inf, and [0, +inf] unless whole. Every d_c = 0 with
 *  sum(w d_r) > 0: [0, 0]. A non-finite sum: NaN or inf, lo = hi = ratio. A sampled side of
 *  one draw: [0, +inf]. */
void fp8_gemm_sample_ratio(const fp8_gemm_sample *s, const float *yc, const float *yr,
                           double *ratio, double *lo, double *hi);
/** The same from the block's parts (as fp8_gemm_sample_estimate's arguments). */
void fp8_gemm_sample_ratio_estimate(const double *yref, const float *yc, const float *yr,
                                    const double *u, const double *v, int64_t p, int64_t q,
                                    bool all_rows, bool all_cols, double *ratio, double *lo,
                                    double *hi);

/** The block Y = A B^T, y [p * q] row-major, of a [p, k] and b [q, k] (row-major): each entry
 *  one chain of fused multiply-adds in reduction order, acc = fma(a[i][t], b[j][t], acc) from
 *  acc = 0, t = 0 .. k-1 (gemm_block.c): the same bits on every CPU, whatever p and q. The
 *  sampled mode's products (its FP32 block and its double reference); the _plain forms are the
 *  definition, for tests (the others take the AVX2 + FMA kernels where the CPU has them). */
void fp8_gemm_block_f32(int64_t p, int64_t q, int64_t k, const float *a, const float *b,
                        float *y);
void fp8_gemm_block_f64(int64_t p, int64_t q, int64_t k, const double *a, const double *b,
                        double *y);
void fp8_gemm_block_f32_plain(int64_t p, int64_t q, int64_t k, const float *a, const float *b,
                              float *y);
void fp8_gemm_block_f64_plain(int64_t p, int64_t q, int64_t k, const double *a,
                              const double *b, double *y);

/** The estimator alone (tested on its own): the block's reference yref and values y
 *  ([p * q], row-major), row weights u [p] and column weights v [q] (NULL: 1), all_rows /
 *  all_cols when every row / column of the output is in the block once (no sampling
 *  variance from that side). */
void fp8_gemm_sample_estimate(const double *yref, const float *y, const double *u,
                              const double *v, int64_t p, int64_t q, bool all_rows,
                              bool all_cols, double *rel_error, double *lo, double *hi);

#ifdef __cplusplus
}
#endif

#endif /* FP8LAB_ENGINE_GEMM_H */
