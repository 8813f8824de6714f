/* fp8k.h: C-callable launchers of fp8lab's CUDA kernels (C++ stays inside the .cu files).
 *
 * Every function returns 0 (FP8_OK) on success, FP8_EINVAL (1) for a bad argument, or
 * FP8_EDEVICE (6) when a CUDA call fails, with a message in err (when err is not NULL) naming
 * the CUDA call, file and line. The numbers are the same ones defined in src/sim/fp8.h, and the
 * results are bit-identical to the simulator's (RECIPES.md). The one exception is the three
 * double sums (sum_sq_err, sum_sq, sum_sq_hat), which agree to 1e-6 relative (see
 * fp8k_quant_stats).
 *
 * Threading: one context per host thread (a context owns a stream and buffers and is not
 * locked). Every call taking a context selects the context's device first; the timeline
 * kernels at the end take a stream instead and leave the device to the caller.
 */
#ifndef FP8LAB_KERNELS_FP8K_H
#define FP8LAB_KERNELS_FP8K_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Number of usable CUDA devices (0 when there is none or the driver is missing); a reason is
 *  written to why when there is none. */
int fp8k_device_count(char *why, size_t whylen);

/** Encodes every float32 bit pattern in [first, first + count) on the device with the hardware
 *  conversion (cvt.rn.satfinite on sm_89+), writing `count` codes to the host array codes.
 *  e5m2 selects the format. */
int fp8k_encode_range(uint64_t first, uint64_t count, int e5m2, uint8_t *codes, char *err,
                      size_t errlen);

/* ------------------------------------------------------------------ context and tensor */

typedef struct fp8k_ctx fp8k_ctx;

/** Per-configuration statistics: the same layout and meaning as fp8_stats (fp8.h). */
typedef struct {
  int64_t n, nonfinite, zeros, overflow, underflow, subnormal;
  double sum_sq_err, sum_sq;
  int64_t clipped;   /* finite x with |RN32(x*s)| > fp8_clip_bits (saturated, not rounded) */
  double sum_sq_hat; /* sum over finite x of xhat^2 */
} fp8k_stats;

/** Creates a context on `device`: a stream, the decode tables in constant memory, and small
 *  accumulator buffers. Tensor buffers grow on demand and are kept until destroy. */
int fp8k_ctx_create(fp8k_ctx **ctx, int device, char *err, size_t errlen);
/** The context's stream (a cudaStream_t), for callers that order their own copies with its
 *  kernels. */
void *fp8k_ctx_stream(fp8k_ctx *ctx);
/** Frees everything the context owns (NULL is allowed). */
void fp8k_ctx_destroy(fp8k_ctx *ctx);

/** Error sums of fp8k_quant_stats: 0 (the default) computes each term (x - xhat)^2 in float32
 *  with an exact power-of-two rescaling and sums 16 terms pairwise before going to double
 *  (worst-case relative error of each sum below 5e-7; elements outside the safe exponent range
 *  fall back to double), which is what keeps many configurations close to bandwidth. 1 computes
 *  every term in double exactly as quant.c does. Counts, codes, amax, histogram: identical
 *  either way. */
void fp8k_ctx_set_f64_sums(fp8k_ctx *ctx, int on);

/** Copies a tensor to the device: numel elements of dtype (fp8_dtype: F32 = 0, BF16 = 1,
 *  F16 = 2) as raw little-endian bytes, as stored in the trace file. `data` may be unaligned.
 *  It replaces the previous tensor. numel may be 0. */
int fp8k_upload(fp8k_ctx *ctx, const void *data, int64_t numel, int dtype, char *err,
                size_t errlen);

/** amax of the uploaded tensor (max |x|, NaN ignored, inf counts; 0 when empty/all NaN):
 *  one read of the data, like fp8_amax_f32. */
int fp8k_amax(fp8k_ctx *ctx, float *amax, char *err, size_t errlen);

/** The fused pass: ONE read of the uploaded tensor for all configurations (launches of up to 64
 *  configurations each beyond that). For configuration c (format formats[c], fp8_format
 *  E4M3 = 0 / E5M2 = 1, scale scales[c]) it computes, per element x widened exactly to
 *  float32: y = RN32(x*s), code = cvt.rn.satfinite(y), xhat = RN32(decode(code) * RN32(1/s))
 *  with 1/s computed on the host, and out[c] (fp8_stats semantics: n, nonfinite, zeros,
 *  overflow, underflow, subnormal, clipped exact; sum_sq_err, sum_sq and sum_sq_hat within
 *  1e-6 relative of fp8_quantize_f32, the summation order differs).
 *  Optional outputs (NULL to skip, which also skips their work): amax_out (as fp8k_amax),
 *  log2_hist_out[FP8_LOG2_HIST_BINS] (overwritten, not added to: fp8_log2_histogram counts of
 *  the tensor), codes_out (numel bytes on the host: the codes of configuration 0; left
 *  untouched when nconfigs is 0).
 *  nconfigs may be 0 (amax / histogram only). */
int fp8k_quant_stats(fp8k_ctx *ctx, const float *scales, const int *formats, int nconfigs,
                     fp8k_stats *out, float *amax_out, int64_t *log2_hist_out,
                     uint8_t *codes_out, char *err, size_t errlen);

/** fp8k_quant_stats with the scales in device memory (d_scales[nconfigs], e.g. the delayed
 *  state an engine keeps on the device): sinv = RN32(1/s) computed on the device, the same IEEE
 *  division as the host's. Statistics only (no amax, no histogram); codes_out (nullable):
 *  configuration 0's codes. nconfigs >= 1, in launches of up to 64. */
int fp8k_quant_stats_dscales(fp8k_ctx *ctx, const float *d_scales, const int *formats,
                             int nconfigs, fp8k_stats *out, uint8_t *codes_out, char *err,
                             size_t errlen);

/* ------------------------------------------------------------------ current scaling */

/** One FP4 configuration (issue 29; fp8_block_params of kind nvfp4 or mxfp4 with C types). */
typedef struct {
  int mx;           /**< 1: MXFP4 (1x32, E8M0); 0: NVFP4 (1x16, E4M3 scales, tensor scale) */
  int square;       /**< NVFP4: 16x16 blocks */
  int rule;         /**< NVFP4: fp8_nvfp4_scale_rule (0 max6, 1 4over6 MAE, 2 4over6 MSE) */
  float e4m3_max;   /**< NVFP4: 448 or 256 (0: 448) */
  int floor_rule;   /**< MXFP4: 1 for the OCP floor exponent, 0 for ceil */
  int stochastic;   /**< NVFP4: stochastic rounding, the seeded draw of fp4.h */
  uint64_t sr_seed;
} fp8k_fp4_params;

/** Per block of an FP4 cast (row-major block order, nunits = blocks, nrun per block row): its
 *  amax and element multiplier, copied back (malloc'd; fp8k_fp4_blocks_free), for the block
 *  statistics (fp8_block_fp4_stats); and stochastic rounding's expectation (NaN without it). */
typedef struct {
  int64_t nunits, nrun;
  float *amax, *mult;
  double underflow_expected, sum_sq_err_expected;
} fp8k_fp4_blocks;

/** The row-wise FP4 cast of the uploaded tensor viewed as [rows, cols] (rows * cols = its
 *  elements): fp8_block_quantize_f32 of kind nvfp4 / mxfp4, DIR_ROW, emulated in float32
 *  (kernels/fp4.cu). amax_g: NVFP4's tensor amax (fp8k_amax). out: the counts exact, the double
 *  sums within 1e-6 relative (another order). */
int fp8k_fp4_quant_stats(fp8k_ctx *ctx, int64_t rows, int64_t cols, const fp8k_fp4_params *p,
                         float amax_g, fp8k_stats *out, fp8k_fp4_blocks *blocks, char *err,
                         size_t errlen);
static inline void fp8k_fp4_blocks_free(fp8k_fp4_blocks *b) {
  free(b->amax);
  free(b->mult);
  b->amax = b->mult = NULL;
}

/** One current-scaling configuration (fp8_current_params with C types). */
typedef struct {
  float amax_epsilon;
  int32_t pow2;   /**< non-zero: scale truncated to a power of two (bits & 0xFF800000) */
  int32_t margin; /**< fp8lab extension: scaled_max = fp8_max * 2^-margin */
  int32_t format; /**< fp8_format */
} fp8k_current_params;

/** Current scaling entirely on the device: an amax pass over the uploaded tensor, the scale of
 *  each configuration from it (fp8_current_scale's arithmetic exactly, computed by one small
 *  kernel), then the fused pass with those scales read from device memory (no host round
 *  trip in between: two reads of the data, the cost the benchmark compares with delayed
 *  scaling's one). out[c] as fp8k_quant_stats; scales_out[nconfigs] (nullable) the scales
 *  used; amax_out (nullable) the tensor's amax; codes_out (nullable) configuration 0's codes.
 *  nconfigs <= 64 per call. */
int fp8k_current_quant_stats(fp8k_ctx *ctx, const fp8k_current_params *params, int nconfigs,
                             fp8k_stats *out, float *scales_out, float *amax_out,
                             uint8_t *codes_out, char *err, size_t errlen);

/* ------------------------------------------------------------------ delayed scaling */

/** TE's fused delayed-scaling update (src/sim/delayed.c, RECIPES.md) for nslots slots (one per
 *  tensor x configuration) in one launch, one warp per slot. Device layout (row-major):
 *    ring[nslots][L]        slot s's history ring in ring[s*L + 0 .. s*L + history_len[s]-1]
 *                           (the rest of the row is unused); same ring as fp8_delayed_state
 *    head[nslots]           index of the ring entry the next non-zero amax goes to
 *    scale[nslots]          the scale the next step uses (start: 1.0f)
 *    last_amax[nslots]      input: the amax of the step just quantized
 *    history_len[nslots]    1 <= history_len[s] <= L
 *    amax_compute[nslots]   fp8_amax_compute (MAX = 0, MOST_RECENT = 1), or for TE's unfused
 *                           update FP8K_DELAYED_COMP(algo, 1, margin) (unfused_update)
 *    scaled_max[nslots]     fp8_scaled_max(format, margin) of the slot's configuration
 *    amax_used[nslots]      output, nullable: what fp8_delayed_update returns
 *  Per slot: last == 0 keeps the state; otherwise ring[head] = last, head advances, amax = max
 *  of the ring ignoring NaN (or last for most_recent), scale = RN32(scaled_max / amax) when amax
 *  is finite and > 0 (inf -> FLT_MAX). Unfused slots roll last == 0 in as well, and their max
 *  is NaN when the ring holds a NaN (scale kept) and their scale RN32(RN32(fp8_max / amax) /
 *  2^margin), as fp8_delayed_update with unfused_update. fp8_delayed_history's TE layout of a slot is
 *  reconstructed from (ring row, head, history_len) exactly as for fp8_delayed_state.
 *  This variant takes device pointers (for a caller keeping the state on the device); it is
 *  asynchronous on the context's stream. */
/** The bit of amax_compute[s] that selects TE's unfused update for slot s; such a slot also
 *  carries its margin (for _default_sf_compute's (fp8_max / amax) / 2^margin): build the value
 *  with FP8K_DELAYED_COMP. */
#define FP8K_DELAYED_UNFUSED 2
#define FP8K_DELAYED_MARGIN_SHIFT 8
#define FP8K_DELAYED_COMP(amax_compute, unfused, margin)                                        \
  ((int32_t)(amax_compute) |                                                                   \
   ((unfused) ? FP8K_DELAYED_UNFUSED | (((int32_t)(margin) + 64) << FP8K_DELAYED_MARGIN_SHIFT) : 0))

int fp8k_delayed_update_device(fp8k_ctx *ctx, int32_t nslots, int32_t L, float *ring,
                               int32_t *head, float *scale, const float *last_amax,
                               const int32_t *history_len, const int32_t *amax_compute,
                               const float *scaled_max, float *amax_used, char *err,
                               size_t errlen);

/** The same update with the state in host arrays (same layout as above): copies ring, head,
 *  scale and the parameters to the device, runs the one launch, copies ring, head, scale (and
 *  amax_used when not NULL) back, synchronously. Arguments are validated (history_len in
 *  [1, L], head in [0, history_len), amax_compute 0 or 1): FP8_EINVAL naming the slot. */
int fp8k_delayed_update_host(fp8k_ctx *ctx, int32_t nslots, int32_t L, float *ring,
                             int32_t *head, float *scale, const float *last_amax,
                             const int32_t *history_len, const int32_t *amax_compute,
                             const float *scaled_max, float *amax_used, char *err,
                             size_t errlen);

/** The same update for state kept by an engine for a whole run, as TE updates all tensors of
 *  a phase in one launch: slot s's ring is ring[ring_off[s] .. ring_off[s] + history_len[s])
 *  (rings of different lengths packed back to back), and its amax is
 *  amax[amax_index[s]] (amax_index[s] < 0: the slot is not updated in this phase, as for an
 *  amax of 0). Device pointers, asynchronous on the context's stream. */
int fp8k_delayed_update_indexed(fp8k_ctx *ctx, int32_t nslots, float *ring,
                                const int64_t *ring_off, int32_t *head, float *scale,
                                const float *amax, const int32_t *amax_index,
                                const int32_t *history_len, const int32_t *amax_compute,
                                const float *scaled_max, float *amax_used, char *err,
                                size_t errlen);

/* ------------------------------------------------------------------ timeline kernels */

/* What a TransformerEngine training step runs per tensor, for `fp8lab timeline` (timeline.cu).
 * Unlike the context functions above, these take the stream (a cudaStream_t, passed as void *;
 * NULL is the legacy default stream) and device pointers: each call only enqueues work on that
 * stream and returns (no host synchronisation, no allocation, no cudaSetDevice: the caller has
 * selected the device, and every pointer must belong to it). Argument errors are FP8_EINVAL;
 * FP8_EDEVICE reports a failed enqueue or launch (cudaGetLastError), not an error of the kernel
 * itself, which surfaces at the caller's next synchronisation. fp8_dtype: F32 = 0, BF16 = 1,
 * F16 = 2; fp8_format: E4M3 = 0, E5M2 = 1. Device pointers to elements must be aligned to the
 * element size (FP8_EINVAL otherwise); any further alignment only selects a faster path. */

/** x[i] for i < n, from a hash of (seed, i): an integer k uniform in [-2^23, 2^23), v = k 2^-23
 *  (exact, uniform in [-1, 1)), x[i] = RN_dtype(RN32(v * scale)). Deterministic (the same seed
 *  gives the same data on any device and grid), for filling benchmark tensors; |x[i]| <= scale
 *  rounded to dtype. n may be 0. */
int fp8k_tl_fill(void *stream, void *x, int dtype, int64_t n, uint64_t seed, float scale,
                 char *err, size_t errlen);

/** TE's cast_transpose with the amax as a by-product. x is [rows, cols] row-major of dtype;
 *  s = *scale (device); codes[r*cols + c] = encode(RN32(x * s)) in `format` (fp8_encode's
 *  semantics, the hardware cvt.rn.satfinite as in fp8k_quant_stats); codes_t (nullable,
 *  [cols, rows]): codes_t[c*rows + r] = the same code (the columnwise copy TE writes on Hopper
 *  for the wgrad / dgrad GEMMs); scale_inv (nullable): RN32(1/s), the host's 1.0f / s, written
 *  by one thread; amax (nullable): atomic max of |x| over the tensor into *amax (NaN ignored,
 *  inf counts, as fp8_amax_f32), NOT reset here: the caller zeroes it, and a second call
 *  accumulates. rows or cols 0: nothing is read or encoded, but scale_inv is still written.
 *  Fastest with x 16-byte aligned, cols a multiple of 8 (F32: 4), codes 8-byte aligned, and
 *  for codes_t rows a multiple of 16 and codes_t 16-byte aligned (cudaMalloc'ed buffers of
 *  such shapes); other shapes and pointers take an exact per-element path. */
int fp8k_tl_cast_transpose(void *stream, const void *x, int dtype, int64_t rows, int64_t cols,
                           const float *scale, int format, uint8_t *codes, uint8_t *codes_t,
                           float *scale_inv, float *amax, char *err, size_t errlen);

/** TE's compute_amax for current scaling: *amax = 0 (cudaMemsetAsync), then one kernel takes
 *  the atomic max of |x| over n elements of dtype (fp8_amax_f32: NaN ignored, inf counts; 0
 *  for n = 0 or an all-NaN tensor). x needs no alignment beyond its element size. */
int fp8k_tl_amax(void *stream, const void *x, int dtype, int64_t n, float *amax, char *err,
                 size_t errlen);

/** Current scaling's scale from a device amax: one thread computes fp8_current_scale(p, *amax)
 *  exactly (the same device function as fp8k_current_quant_stats) and writes *scale. p is a
 *  host struct, validated like fp8_current_params_check. */
int fp8k_tl_current_scale(void *stream, const float *amax, const fp8k_current_params *p,
                          float *scale, char *err, size_t errlen);

/** The amax gather of delayed scaling's bookkeeping (TE's torch.cat of the amaxes), one launch:
 *  for i < n, dst[i] = amax[index[i]] and amax[index[i]] = 0 (read and reset for the next
 *  phase). The indices must be distinct and valid (not checked: they live on the device).
 *  n may be 0 (no launch). */
int fp8k_tl_amax_gather(void *stream, float *amax, const int32_t *index, int32_t n, float *dst,
                        char *err, size_t errlen);

/** fp8k_delayed_update_indexed on an explicit stream: the same arguments minus ctx, the same
 *  kernel (delayed.cu; fp8k_delayed_update_indexed selects the context's device and calls this
 *  with its stream). nslots may be 0 (no launch). */
int fp8k_delayed_update_indexed_async(void *stream, int32_t nslots, float *ring,
                                      const int64_t *ring_off, int32_t *head, float *scale,
                                      const float *amax, const int32_t *amax_index,
                                      const int32_t *history_len, const int32_t *amax_compute,
                                      const float *scaled_max, float *amax_used, char *err,
                                      size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
