/* fp8.h: the public interface of fp8lab's CPU simulator (libfp8lab_sim).
 *
 * Bit-exact FP8 formats (E4M3, E5M2), tensor quantization with a scale, amax, the per-step
 * statistics, and the state and update rules of delayed and current scaling, all as
 * ../shared/RECIPES.md defines them (docs/semantics.md: the points it leaves open).
 * Pure C11 + libm: no files, no CUDA. Everything else in fp8lab (trace replay, GPU engine, analysis) is checked against this.
 */
#ifndef FP8LAB_SIM_FP8_H
#define FP8LAB_SIM_FP8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FP8LAB_VERSION "0.1.0"

/* ---------------------------------------------------------------- status codes */

/** Status codes returned by fp8lab functions (0 = success). */
typedef enum {
  FP8_OK = 0,     /**< success */
  FP8_EINVAL = 1, /**< invalid argument or parameter value */
  FP8_ENOMEM = 2, /**< out of memory */
  FP8_EIO = 3,    /**< a file could not be opened, read, written or renamed */
  FP8_EFORMAT = 4,/**< input data is malformed (bad header, wrong size, bad value) */
  FP8_ERANGE = 5, /**< a value lies outside what is supported */
  FP8_EDEVICE = 6,/**< a CUDA, cuBLASLt or NCCL call failed, or no device is usable */
  FP8_EWRITE = 7, /**< an output file could not be written once it was open (disk full, quota,
                       I/O error): a failure of the run, not of its input (FP8_EIO) */
} fp8_status;

/** A short constant description of a status code. */
const char *fp8_strerror(int status);

/* ---------------------------------------------------------------- formats */

typedef enum { FP8_E4M3, FP8_E5M2 } fp8_format;

#define FP8_E4M3_MAX 448.0f
#define FP8_E5M2_MAX 57344.0f

/** Largest finite value of the format (448 or 57344). */
float fp8_format_max(fp8_format f);
/** "e4m3" or "e5m2": the one spelling of a format's name (parsers and writers use it). */
const char *fp8_format_name(fp8_format f);
/** Parses "e4m3" / "e5m2" (case-insensitive); returns FP8_OK or FP8_EINVAL. */
int fp8_format_parse(const char *s, fp8_format *out);

/** Encodes a float32 to FP8: round to nearest even, saturate to +-max (infinities too), NaN to
 *  the NaN code 0x7F. Identical to CUDA's __nv_cvt_float_to_fp8(x, __NV_SATFINITE, f). */
uint8_t fp8_encode(float x, fp8_format f);
/** Decodes an FP8 code to float32 (exact). NaN codes give the float bits 0x7FFFFFFF, as CUDA's host
 *  conversion does; E5M2 0x7C/0xFC give +-inf. */
float fp8_decode(uint8_t code, fp8_format f);
/** The 256-entry decode table of a format (same values as fp8_decode). */
const float *fp8_decode_table(fp8_format f);
/** Encodes n floats (the vectorizable loop behind fp8_encode). */
void fp8_encode_array(const float *x, size_t n, fp8_format f, uint8_t *codes);

/** True when a code is a non-zero subnormal of its format. */
bool fp8_code_is_subnormal(uint8_t code, fp8_format f);

/* ---------------------------------------------------------------- source dtypes */

typedef enum { FP8_DTYPE_F32, FP8_DTYPE_BF16, FP8_DTYPE_F16 } fp8_dtype;

/** Bytes per element of a source dtype. */
size_t fp8_dtype_size(fp8_dtype d);
/** "F32", "BF16", "F16" (safetensors spelling). */
const char *fp8_dtype_name(fp8_dtype d);
/** Exact widening of n BF16 / F16 / F32 values (raw little-endian bit patterns) to float32. */
void fp8_dtype_to_f32(fp8_dtype d, const void *src, size_t n, float *dst);
float fp8_bf16_to_f32(uint16_t h);
float fp8_f16_to_f32(uint16_t h);
/** The largest finite value of a source dtype, as a float: FLT_MAX, 0x1.fep127 (BF16,
 *  3.3895e38), 65504 (F16). TE's block kernels scale with it when fp8_max / amax overflows. */
float fp8_dtype_max(fp8_dtype d);

#define FP8_MAX_DIMS 8

/** One tensor of one step: a view into data someone else owns (little-endian, C order). The
 *  trace readers make them from mapped files; the engines quantize them. */
typedef struct {
  char *name;            /**< `<module path>.<role>` */
  fp8_dtype dtype;
  int ndim;
  int64_t shape[FP8_MAX_DIMS];
  int64_t numel;
  const void *data;      /**< numel * fp8_dtype_size(dtype) bytes */
  int64_t full_rows;     /**< the rows (tokens) of the whole tensor when the snapshot holds a
                              subset of them (safetensors metadata fp8lab.rows.<name>: the
                              capture's `rows`, issue 27); 0: the tensor is whole */
} fp8_tensor_view;

/* ---------------------------------------------------------------- roles and HYBRID */

typedef enum {
  FP8_ROLE_INPUT,
  FP8_ROLE_WEIGHT,
  FP8_ROLE_OUTPUT,
  FP8_ROLE_GRAD_OUTPUT,
  FP8_ROLE_GRAD_INPUT,
  FP8_ROLE_UNKNOWN,
} fp8_role;

/** "input", "weight", ... ; "" for FP8_ROLE_UNKNOWN. */
const char *fp8_role_name(fp8_role r);
/** The role of a tensor name `<module path>.<role>`: the text after the last '.'. */
fp8_role fp8_role_of_tensor(const char *tensor_name);
/** True for grad_output and grad_input. */
bool fp8_role_is_backward(fp8_role r);

/** The two halves of a training step, as TE reduces and updates (bit flags: FP8_FWD | FP8_BWD
 *  is both). Forward roles: input, weight, output and tensors without a role; backward roles:
 *  grad_output, grad_input (fp8_role_is_backward). */
typedef enum { FP8_FWD = 1, FP8_BWD = 2 } fp8_phase;

/** What a recipe's `format` key says: one format for all, or HYBRID. */
typedef enum { FP8_SEL_E4M3, FP8_SEL_E5M2, FP8_SEL_HYBRID } fp8_format_sel;

/** "e4m3", "e5m2" (fp8_format_name) or "hybrid": the one spelling of the `format` key's values
 *  (the parser below, run.json, the settings an advice file writes back). */
const char *fp8_format_sel_name(fp8_format_sel sel);
/** Parses "e4m3" / "e5m2" / "hybrid" (case-insensitive). */
int fp8_format_sel_parse(const char *s, fp8_format_sel *out);
/** Resolves the format of a tensor of role r: HYBRID gives E4M3 for forward roles, E5M2 for
 *  backward roles, and FP8_EINVAL for FP8_ROLE_UNKNOWN. */
int fp8_format_resolve(fp8_format_sel sel, fp8_role r, fp8_format *out);

/* ---------------------------------------------------------------- amax */

/** max |x| over n floats; NaN ignored, +-inf count (result inf); 0 for n = 0 or all NaN. */
float fp8_amax_f32(const float *x, size_t n);
/** fp8_amax_f32 of n source values of dtype d (raw little-endian bit patterns, any alignment)
 *  widened to float32, without widening them: BF16 and F16 magnitudes order like their 15-bit
 *  patterns, so the largest pattern that is not NaN is the amax. The amax an engine's
 *  quantize_stats gives, for a replay step that needs the amax alone (a warm step). */
float fp8_amax_dtype(fp8_dtype d, const void *data, size_t n);

/* ---------------------------------------------------------------- statistics */

/** log2 histogram bins: bin b counts finite non-zero x with 2^b <= |x| < 2^(b+1), for
 *  b = FP8_LOG2_HIST_MIN (-149, the smallest float32 subnormal) .. 127; index b - MIN. */
#define FP8_LOG2_HIST_MIN (-149)
#define FP8_LOG2_HIST_BINS 277

/** Adds the floor(log2|x|) of n floats' finite non-zero elements to hist[FP8_LOG2_HIST_BINS]. */
void fp8_log2_histogram(const float *x, size_t n, int64_t *hist);
/** The bin of one value: its index in hist (0 .. FP8_LOG2_HIST_BINS-1), or -1 for +-0, inf
 *  and NaN (which no bin counts). fp8_log2_histogram adds 1 at this index. */
int fp8_log2_bin_index(float x);

/** Per-step statistics of quantizing one tensor with one scale (RECIPES.md). The counters
 *  accumulate across calls of fp8_quantize_f32, so a tensor can be fed in chunks. */
typedef struct {
  int64_t n;          /**< elements seen */
  int64_t nonfinite;  /**< NaN or +-inf elements */
  int64_t zeros;      /**< elements equal to +-0 */
  int64_t overflow;   /**< finite x with |RN32(x*s)| > fp8_max */
  int64_t underflow;  /**< finite x != 0 whose code is +-0 */
  int64_t subnormal;  /**< finite x whose code is a non-zero subnormal */
  double sum_sq_err;  /**< sum over finite x of (x - xhat)^2, in double */
  double sum_sq;      /**< sum over finite x of x^2, in double */
  /* appended with the saturation and similarity statistics (RECIPES.md, docs/semantics.md) */
  int64_t clipped;    /**< finite x whose |RN32(x*s)| is past the format's rounding midpoint
                           above max (E4M3 > 464, E5M2 >= 61440): the cast's saturation branch */
  double sum_sq_hat;  /**< sum over finite x of xhat^2, in double (for the cosine similarity) */
} fp8_stats;

void fp8_stats_init(fp8_stats *st);
/** Adds src's counters and sums into dst. */
void fp8_stats_merge(fp8_stats *dst, const fp8_stats *src);
/** Turns the statistics of a cast into those of keeping the values as they are (the bf16
 *  kind): n, nonfinite, zeros and sum_sq stay (they do not depend on the cast); overflow,
 *  underflow, subnormal, clipped and sum_sq_err become 0 and sum_sq_hat = sum_sq. */
void fp8_stats_uncast(fp8_stats *st);
/** Mean squared error over finite elements; NaN when there is no finite element. */
double fp8_stats_mse(const fp8_stats *st);
/** 10*log10(sum_sq / sum_sq_err); +inf when the error is 0 (also for an all-zero tensor). */
double fp8_stats_snr_db(const fp8_stats *st);
/** Cosine similarity of the finite x and their dequantized values xhat:
 *  sum x xhat / sqrt(sum x^2 sum xhat^2), with sum x xhat = (sum_sq + sum_sq_hat - sum_sq_err) / 2,
 *  clamped to [-1, 1]; 1 when both sums are 0 (nothing to compare), 0 when exactly one is. */
double fp8_stats_cos_sim(const fp8_stats *st);
/** The bits above which |RN32(x*s)| is counted in `clipped` (as float32 bits, compared > ). */
uint32_t fp8_clip_bits(fp8_format f);

/** Quantizes n floats with scale s to format f: y = RN32(x*s), q = encode(y), and
 *  xhat = RN32(decode(q) * RN32(1/s)). Writes the codes to `codes` when it is not NULL and
 *  the dequantized values to `xhat` when it is not NULL; accumulates statistics into `st` when
 *  it is not NULL. */
void fp8_quantize_f32(const float *x, size_t n, float s, fp8_format f, uint8_t *codes,
                      float *xhat, fp8_stats *st);

/** fp8_quantize_f32's statistics alone (no codes, no xhat), bit for bit the same: counts and
 *  both sums in its order (chunks of 1024 from x, lane i mod 4 within a chunk), in one fused
 *  pass that rounds to the FP8 grid in float arithmetic instead of encoding and decoding
 *  (quant_weighted.c). A scale that is not finite and > 0 takes fp8_quantize_f32 itself. */
void fp8_quantize_stats_f32(const float *x, size_t n, float s, fp8_format f, fp8_stats *st);

/** The instruction sets the quantize loops are compiled for (x86-64; elsewhere only generic).
 *  Every variant gives identical results. */
typedef enum { FP8_ISA_AUTO, FP8_ISA_GENERIC, FP8_ISA_AVX2, FP8_ISA_AVX512 } fp8_isa;
/** Chooses the variant fp8_quantize_f32 uses (AUTO: the best the CPU has, the default):
 *  FP8_OK, or FP8_EINVAL when the CPU lacks it. For tests and benchmarks; not thread-safe. */
int fp8_isa_set(fp8_isa isa);
/** 1 when the CPU can run the variant. */
int fp8_isa_available(fp8_isa isa);
/** The variant in use (after AUTO: which one it picked). */
fp8_isa fp8_isa_current(void);
/** "auto", "generic", "avx2", "avx512". */
const char *fp8_isa_name(fp8_isa isa);

/* ---------------------------------------------------------------- delayed scaling */

typedef enum { FP8_AMAX_MAX, FP8_AMAX_MOST_RECENT } fp8_amax_compute;

/** "max" / "most_recent". */
const char *fp8_amax_compute_name(fp8_amax_compute a);
int fp8_amax_compute_parse(const char *s, fp8_amax_compute *out);

/** Parameters of TE's DelayedScaling for one tensor. */
typedef struct {
  int32_t history_len;           /**< L >= 1 (TE default 1024) */
  int32_t margin;                /**< m: scaled_max = fp8_max * 2^-m; |m| <= FP8_MARGIN_LIMIT */
  fp8_amax_compute amax_compute; /**< max over the window, or the most recent amax */
  fp8_format format;
  int unfused_update;            /**< 0: TE's fused update (an amax of 0 keeps history and scale,
                                      the default); 1: TE's unfused path (NVTE_UNFUSED_FP8_UPDATE=1):
                                      an amax of 0 is rolled in and the scale recomputed from the
                                      history, whose max propagates NaN (torch.max) */
} fp8_delayed_params;

#define FP8_HISTORY_LIMIT (1 << 20)
#define FP8_MARGIN_LIMIT 64

/** State of one tensor under delayed scaling. The history is a ring of the L most recent
 *  non-zero amaxes (every amax, 0 included, under unfused_update); fp8_delayed_history() shows
 *  it in TE's layout. */
typedef struct {
  fp8_delayed_params p;
  float scale;      /**< the scale the next step uses (1.0 at the start) */
  float scaled_max; /**< RN32(fp8_max * 2^-margin) */
  float *ring;      /**< L slots, oldest overwritten first; allocated as they fill (ring_cap
                         slots so far: the first L rolls only ever write slots 0 .. rolls-1) */
  int32_t ring_cap;
  int32_t head;     /**< index of the slot the next amax goes to */
  int64_t updates;  /**< number of rolls (non-zero amaxes seen; every amax under unfused) */
  int64_t nan_roll; /**< unfused_update: the roll number of the latest NaN amax (0: none) */
  /* amax_compute = max: the window's maximum kept as a monotone queue (O(1) amortized per
   * update instead of a scan of the L slots; the max of a set does not depend on how it is
   * found): dq_v[] decreasing values of the window with their roll numbers dq_s[], NaN never
   * entered, a ring of L entries from dq_first. NULL for most_recent. */
  float *dq_v;
  int64_t *dq_s;
  int32_t dq_first, dq_n, dq_cap;
  int oom;          /**< set when an update could not grow the state: that update was skipped */
} fp8_delayed_state;

/** Validates p and allocates the state: scale 1.0, history all 0. */
int fp8_delayed_init(fp8_delayed_state *st, const fp8_delayed_params *p);
void fp8_delayed_free(fp8_delayed_state *st);
/** Validates parameters without allocating (FP8_EINVAL when out of range). */
int fp8_delayed_params_check(const fp8_delayed_params *p);
/** scaled_max = RN32(fp8_max * 2^-margin). */
float fp8_scaled_max(fp8_format f, int32_t margin);

/** The update after a step whose amax was `last` (TE's fused kernel, RECIPES.md): zero keeps
 *  the state; otherwise roll, then scale = scaled_max / amax when amax is finite and > 0
 *  (inf becomes FLT_MAX), else keep. Returns the amax used (max over the window, or last).
 *  With p.unfused_update (TE's unfused path, docs/semantics.md "Mixture-of-Experts"): every
 *  amax is rolled in, 0 included, the window's max is NaN when the window holds a NaN
 *  (torch.max), which keeps the scale, and the scale is RN32(RN32(fp8_max / amax) / 2^margin)
 *  (_default_sf_compute's two roundings); otherwise the same rule.
 *  The state's memory grows with the history as it fills; when that fails, the update is not
 *  made, st->oom is set and NaN returned (the caller reports FP8_ENOMEM). */
float fp8_delayed_update(fp8_delayed_state *st, float last);
/** Writes the history as TE stores it after the last update: out[L-1] the most recent amax,
 *  out[L-1-k] the one k rolls before, out[0] = 0 when L >= 2 (for L = 1, out[0] = last). */
void fp8_delayed_history(const fp8_delayed_state *st, float *out);

/* ---------------------------------------------------------------- current scaling */

/** Parameters of TE's Float8CurrentScaling (margin is an fp8lab extension). */
typedef struct {
  float amax_epsilon; /**< amax is raised to at least this (>= 0) */
  bool pow2;          /**< truncate the scale down to a power of two */
  int32_t margin;
  fp8_format format;
} fp8_current_params;

int fp8_current_params_check(const fp8_current_params *p);
/** The scale for a tensor whose own amax is a (RECIPES.md "Current scaling"). */
float fp8_current_scale(const fp8_current_params *p, float amax);
/** fp8_current_scale() with `value_for_inf` (> 0) in place of FLT_MAX when fp8_max / amax
 *  overflows float32 (TE's compute_scale_from_amax: FLT_MAX for current scaling, the input
 *  dtype's largest finite value for Float8BlockScaling's tiles), before pow2's truncation. */
float fp8_current_scale_inf(const fp8_current_params *p, float amax, float value_for_inf);

#ifdef __cplusplus
}
#endif

#endif /* FP8LAB_SIM_FP8_H */
