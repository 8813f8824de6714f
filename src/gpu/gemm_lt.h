/* gemm_lt.h: the three FP8 GEMMs of a linear layer on the GPU with cuBLASLt, and their error
 * against the unquantized GEMM: the device counterpart of src/engine/gemm.h.
 *
 * A layer has input X [tokens, in], weight W [out, in] and grad_output dY [tokens, out], stored
 * row-major as in the trace (gemm.h), and
 *   fprop  Y  = X  · W^T   [tokens, out]   E4M3 x E4M3 (hybrid), FAST_ACCUM on
 *   dgrad  dX = dY · W     [tokens, in]    E5M2 x E4M3,          FAST_ACCUM off
 *   wgrad  dW = dY^T · X   [out, in]       E5M2 x E4M3,          FAST_ACCUM off
 * (TransformerEngine's choice of fast accumulation; fp8_gemm_lt_set_options changes it). The
 * FP8 operands are codes already quantized with a per-tensor scale (by the simulator or the
 * kernels), each with its scale_inv = RN32(1/scale); the GEMM computes
 *   Y = scale_inv_a * scale_inv_b * sum_k decode(a) * decode(b)
 * in FP32 (CUBLAS_COMPUTE_32F) with the scale_invs as CUBLASLT_MATMUL_DESC_A/B_SCALE_POINTER,
 * output FP32 or BF16, and the output's amax from CUBLASLT_MATMUL_DESC_AMAX_D_POINTER (or, where
 * cuBLASLt does not support that for the output type, from a reduction kernel: same value).
 *
 * Memory: every pointer in this interface is a DEVICE pointer (cudaMalloc'ed, or any pointer
 * the device can read), so that codes produced by the cast kernels never make a round trip
 * through the host; tests upload the simulator's codes with cudaMemcpy. Matrices are dense
 * row-major (row stride = number of columns). Calls are asynchronous on the context's stream
 * (fp8_gemm_lt_stream) except those that return host values (rel_error, layer errors), which
 * synchronize it.
 *
 * Layout (cuBLASLt is column-major and, on sm_89/sm_90, runs FP8 only in the "TN" form: A
 * transposed, B not, both stored with the reduction dimension k contiguous, lda, ldb multiples
 * of 16). A row-major matrix [r, c] read as column-major is its transpose [c, r] with ld = c.
 * Each GEMM is written as the row-major Y[M, N] = P[M, K] · Q[N, K]^T with both P and Q stored
 * K-contiguous; then the column-major D = A^T · B with A := Q (k x m, lda = K), B := P (k x n,
 * ldb = K), m = N, n = M, k = K is exactly Y^T column-major, i.e. Y row-major with ldd = N:
 *   GEMM   M       N     K       P (cuBLASLt B)            Q (cuBLASLt A)
 *   fprop  tokens  out   in      X  [tokens, in]  as is    W  [out, in]    as is
 *   dgrad  tokens  in    out     dY [tokens, out] as is    W^T [in, out]   transposed on device
 *   wgrad  out     in    tokens  dY^T [out, tokens] transp. X^T [in, tokens] transposed on device
 * So cuBLASLt's A is always the right operand (weight or input: E4M3 under hybrid) and B the
 * left one (E5M2 in the backward GEMMs); cuBLASLt has E4M3xE4M3, E4M3xE5M2 and E5M2xE4M3 but no
 * E5M2xE5M2 kernel (format = e5m2 for every role): those return FP8_ERANGE, the caller then
 * uses the CPU (gemm.h). M, N and K that are not multiples of 16 are zero-padded to the next
 * multiple into scratch buffers (code 0 is +0: padded products add exact zeros), the padded
 * output [Mp, Np] is computed and its top-left [M, N] copied out; padded rows and columns of Y
 * are zero, so the amax is unchanged. Aligned, non-transposed operands are used in place.
 *
 * The reference: the same GEMM on the unquantized operands (FP32 or BF16, CUBLAS_COMPUTE_32F:
 * true FP32 arithmetic, no TF32), any layout (cuBLASLt's transpose flags, no copies), FP32 out.
 * rel_error = ||Y - Y_ref||_F / ||Y_ref||_F with the sums in double, as gemm.h (Y_ref there is
 * a double GEMM; here FP32, whose own error is ~1e-6 relative, far below FP8's).
 *
 * Token sampling (gemm_max_tokens): pass the sampled rows (quantized with the whole tensor's
 * scale, as gemm.h does); these functions use the operands as given.
 */
#ifndef FP8LAB_GPU_GEMM_LT_H
#define FP8LAB_GPU_GEMM_LT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fp8.h"
#include "gemm.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Element types of GEMM outputs and of the reference's inputs. */
typedef enum {
  FP8_LT_F32,  /**< float32 */
  FP8_LT_BF16, /**< bfloat16 (raw 16-bit patterns) */
} fp8_lt_dtype;

/** One FP8 tensor on the device: codes in the layout the trace stores it (gemm.h). */
typedef struct {
  const uint8_t *codes;   /**< device, row-major, dense; NULL = tensor not available */
  const float *scale_inv; /**< device pointer to one float: RN32(1/scale) */
  fp8_format format;
} fp8_lt_operand;

/** A layer's three FP8 operands: input [tokens, in], weight [out, in], grad_output [tokens, out].
 *  GEMMs whose operands are missing (codes NULL) are not available. */
typedef struct {
  int64_t tokens, in, out;
  fp8_lt_operand input, weight, grad_output;
} fp8_lt_layer;

/** Behaviour switches; fp8_gemm_lt_options_default() gives TransformerEngine's. */
typedef struct {
  bool fast_accum[FP8_GEMM_COUNT]; /**< CUBLASLT_MATMUL_DESC_FAST_ACCUM per GEMM: fprop on,
                                        dgrad and wgrad off */
  bool amax_from_cublaslt;         /**< ask cuBLASLt for the amax (AMAX_D_POINTER) before
                                        falling back to the kernel; false: always the kernel */
} fp8_gemm_lt_options;

fp8_gemm_lt_options fp8_gemm_lt_options_default(void);

/** What the last fp8_gemm_lt_fp8 call did (for tests, benchmarks and logs). */
typedef struct {
  int64_t m, n, k;          /**< cuBLASLt's m, n, k after padding (m = Np, n = Mp, k = Kp) */
  bool padded;              /**< some dimension was padded (output copied out of scratch) */
  int copies;               /**< operands copied (padding and/or transpose): 0, 1 or 2 */
  bool amax_cublaslt;       /**< amax came from AMAX_D_POINTER (else from the kernel, or none) */
  bool fast_accum;
  size_t workspace;         /**< workspace bytes of the algorithm chosen by the heuristic */
} fp8_gemm_lt_info;

typedef struct fp8_gemm_lt fp8_gemm_lt;

/** Creates a context on CUDA device `device`: its stream, cuBLASLt handle and 32 MiB workspace,
 *  reused by every call (with a small cache of matmul descriptors and heuristic choices).
 *  FP8_EDEVICE with the reason when there is no usable device, the driver is too old, or the
 *  device has no FP8 tensor cores (compute capability < 8.9). *out is NULL on error. */
int fp8_gemm_lt_create(fp8_gemm_lt **out, int device, char *err, size_t errlen);
void fp8_gemm_lt_free(fp8_gemm_lt *ctx);

/** The context's cudaStream_t (as void *): order your own kernels and copies with it. */
void *fp8_gemm_lt_stream(fp8_gemm_lt *ctx);
/** Runs the context's calls on `stream` (a cudaStream_t of the caller's, e.g. the compute
 *  stream of fp8lab timeline) instead of its own; NULL: its own again. */
void fp8_gemm_lt_set_stream(fp8_gemm_lt *ctx, void *stream);
/** Waits for the context's stream; FP8_EDEVICE with the error of any failed asynchronous work. */
int fp8_gemm_lt_sync(fp8_gemm_lt *ctx, char *err, size_t errlen);

void fp8_gemm_lt_set_options(fp8_gemm_lt *ctx, const fp8_gemm_lt_options *opt);
fp8_gemm_lt_options fp8_gemm_lt_get_options(const fp8_gemm_lt *ctx);
/** Details of the last fp8_gemm_lt_fp8 call. */
fp8_gemm_lt_info fp8_gemm_lt_last_info(const fp8_gemm_lt *ctx);

/** Output shape [rows, cols] and reduction length k of GEMM g for a layer (gemm.h's table). */
void fp8_gemm_lt_shape(fp8_gemm_kind g, int64_t tokens, int64_t in, int64_t out, int64_t *rows,
                       int64_t *cols, int64_t *k);

/** The FP8 GEMM g of layer l into y (device, [rows, cols] of fp8_gemm_lt_shape, type ytype).
 *  amax: NULL, or a device float set to max |y| (NaN ignored) over the output as written.
 *  @return FP8_OK; FP8_EINVAL (negative sizes, an operand of g missing, NULL scale_inv or y);
 *          FP8_ERANGE (E5M2 x E5M2, which cuBLASLt lacks; or a size beyond what the scratch
 *          arithmetic allows); FP8_ENOMEM (device memory); FP8_EDEVICE (CUDA/cuBLASLt error,
 *          message naming the call). Asynchronous. */
int fp8_gemm_lt_fp8(fp8_gemm_lt *ctx, fp8_gemm_kind g, const fp8_lt_layer *l, fp8_lt_dtype ytype,
                    void *y, float *amax, char *err, size_t errlen);

/** The FP8 GEMM in cuBLASLt's own form, for operands already laid out for it (TransformerEngine's
 *  cast_transpose writes a row-wise and a transposed copy of each operand, so no GEMM copies):
 *  y[M, N] = P[M, K] Q[N, K]^T with P and Q K-contiguous (gemm_lt.h's table: fprop P = X,
 *  Q = W; dgrad P = dY, Q = W^T; wgrad P = dY^T, Q = X^T). g chooses the fast-accumulation
 *  option and names the GEMM in messages. Shapes not multiples of 16 or misaligned operands are
 *  padded / copied as in fp8_gemm_lt_fp8; errors likewise. Asynchronous. */
int fp8_gemm_lt_fp8_tn(fp8_gemm_lt *ctx, fp8_gemm_kind g, const fp8_lt_operand *P,
                       const fp8_lt_operand *Q, int64_t M, int64_t N, int64_t K,
                       fp8_lt_dtype ytype, void *y, float *amax, char *err, size_t errlen);

/** The reference GEMM g on unquantized operands (device, type xtype, the layer's layouts; the
 *  ones g does not use may be NULL) into y (device float32 [rows, cols]). Asynchronous. */
int fp8_gemm_lt_ref(fp8_gemm_lt *ctx, fp8_gemm_kind g, fp8_lt_dtype xtype, const void *input,
                    const void *weight, const void *grad_output, int64_t tokens, int64_t in,
                    int64_t out, float *y, char *err, size_t errlen);

/** rel_error = sqrt(sum (y - y_ref)^2) / sqrt(sum y_ref^2) over n elements (device y of type
 *  ytype, device float y_ref), sums in double; gemm.h's conventions: 0 when both are all zero,
 *  +inf when only y_ref is, non-finite values propagate. Synchronizes. */
int fp8_gemm_lt_rel_error(fp8_gemm_lt *ctx, const void *y, fp8_lt_dtype ytype, const float *y_ref,
                          int64_t n, double *rel_error, char *err, size_t errlen);

/** Layer level, like gemm.h's fp8_gemm_ref_init + fp8_gemm_errors: computes and keeps (in the
 *  context) the three reference outputs of one layer and step from its unquantized operands
 *  (device, type xtype; a NULL operand makes the GEMMs that need it unavailable). */
int fp8_gemm_lt_ref_layer(fp8_gemm_lt *ctx, fp8_lt_dtype xtype, const void *input,
                          const void *weight, const void *grad_output, int64_t tokens, int64_t in,
                          int64_t out, char *err, size_t errlen);

/** The three FP8 GEMMs of one configuration against the kept references: rel_error[g] (NaN for
 *  GEMMs without operands or reference) and, when amax is not NULL, amax[g] = max |Y_g| (host,
 *  NaN when unavailable). l's shape must match the references'. A GEMM cuBLASLt cannot run
 *  (E5M2 x E5M2) makes the call return FP8_ERANGE after trying the others: the caller computes
 *  that one on the CPU. Synchronizes. */
int fp8_gemm_lt_layer_errors(fp8_gemm_lt *ctx, const fp8_lt_layer *l, fp8_lt_dtype ytype,
                             double rel_error[FP8_GEMM_COUNT], float amax[FP8_GEMM_COUNT],
                             char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* FP8LAB_GPU_GEMM_LT_H */
