/* block.h: block-scaled FP8 recipes of the CPU simulator (libfp8lab_sim): MXFP8 (OCP MX, one
 * E8M0 scale per 1x32 block), DeepSeek-V3 / TE Float8BlockScaling (1x128 tiles, 128x128
 * blocks) and torchao's per-row scaling, as ../shared/RECIPES.md "Block recipes" defines them
 * (docs/semantics.md: the points it leaves open).
 *
 * A tensor is a row-major float32 matrix [rows, cols] (fp8_block_view_2d() folds an n-D shape).
 * Each block gets its own scale; each element is then quantized exactly as in fp8.h
 * (y = RN32(x*s), q = encode(y), xhat = RN32(decode(q) * RN32(1/s))) with s its block's scale,
 * and the usual fp8_stats are accumulated over all elements. Pure C11 + libm, like fp8.h.
 */
#ifndef FP8LAB_SIM_BLOCK_H
#define FP8LAB_SIM_BLOCK_H

#include "fp8.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- E8M0 (MX shared scales) */

/** How an MXFP8 block's shared exponent is chosen from the block amax b. */
typedef enum {
  FP8_MX_ROUND_CEIL,  /**< TE / NVIDIA (default): e = E8M0_ceil(RN32(b * RN32(1/fp8_max))) */
  FP8_MX_ROUND_FLOOR, /**< OCP MX v1.0: 2^(floor(log2 b) - emax), emax 8 (E4M3) / 15 (E5M2) */
} fp8_mx_rounding;

/** "ceil" / "floor". */
const char *fp8_mx_rounding_name(fp8_mx_rounding r);
/** Parses "ceil" / "floor" (case-insensitive); FP8_OK or FP8_EINVAL. */
int fp8_mx_rounding_parse(const char *s, fp8_mx_rounding *out);

/** E8M0 code of v rounded up to a power of two (TE's float_to_e8m0; code e means 2^(e-127)):
 *  - NaN -> 0xFF, +-inf -> 0xFE, +-0 -> 0 (the sign of v is ignored);
 *  - normal v: v's biased float32 exponent, plus 1 when v's mantissa is non-zero, saturating
 *    at 0xFE (v in (2^127, FLT_MAX] gives 0xFE, never the NaN code);
 *  - subnormal v: the smallest e with 2^(e-127) >= v, i.e. 0 for v <= 2^-127 and 1 above
 *    (TE's clause for exponent field 0; RECIPES.md's wording covers normal v only). */
uint8_t fp8_e8m0_ceil(float v);

/** The E8M0 biased exponent e of an MXFP8 block whose amax is block_amax (>= 0):
 *  - ceil:  e = fp8_e8m0_ceil(RN32(block_amax * RN32(1/fp8_max)));
 *  - floor: e = floor(log2 block_amax) - emax + 127, clamped to [0, 254] (OCP clamps the
 *           shared exponent to E8M0's range); amax 0 gives 0, +inf 0xFE.
 *  Either way NaN gives 0xFF. For finite amax, ceil lies in [0, 247] (E4M3) / [0, 240] (E5M2)
 *  and floor in [0, 246] / [0, 239]: the upper limit is never reached from data.
 *  The scale applied to the elements is fp8_e8m0_scale(e) = 2^(127-e). */
uint8_t fp8_mx_scale_exponent(float block_amax, fp8_format f, fp8_mx_rounding r);

/** OCP MX's floor rule for an element format of largest exponent emax: the E8M0 code of
 *  2^(floor(log2 b) - emax), clamped to [0, 254]; b finite > 0 (MXFP8 and MXFP4 share it). */
uint8_t fp8_e8m0_floor(float b, int emax);

/** 2^(127-e) as float32, exact (ldexpf), for every code: e = 0 gives 2^127 (RECIPES.md; TE's
 *  exp2f_rcp returns 1 there instead), e = 254 gives 2^-127 and e = 255 (NaN) 2^-128, both
 *  float32 subnormals. Dequantization then uses RN32(1/s) = 2^(e-127) exactly for e <= 254;
 *  for e = 255 that is +inf (a NaN scale spoils its block). */
float fp8_e8m0_scale(uint8_t e);

/* ---------------------------------------------------------------- recipes */

/** How each block's scale is computed. */
typedef enum {
  FP8_BLOCK_KIND_MXFP8,   /**< OCP MX: 1x32 blocks, power-of-two E8M0 scale */
  FP8_BLOCK_KIND_BLOCK,   /**< DeepSeek-V3 / TE Float8BlockScaling: 1x128 tiles or 128x128
                               blocks, current scaling per block */
  FP8_BLOCK_KIND_ROWWISE, /**< torchao rowwise: current scaling per row (or column) */
  FP8_BLOCK_KIND_NVFP4,   /**< NVFP4 (fp4.h): E2M1 elements, 1x16 runs or 16x16 blocks with E4M3
                               scales under a per-tensor FP32 scale (issue 29) */
  FP8_BLOCK_KIND_MXFP4,   /**< OCP MXFP4 (fp4.h): E2M1 elements, 1x32 blocks, E8M0 scales */
} fp8_block_kind;

/** True for the FP4 block kinds (E2M1 elements: fp4.h does the casting). */
bool fp8_block_kind_is_fp4(fp8_block_kind k);

/** "mxfp8" / "block" / "rowwise" / "nvfp4" / "mxfp4". */
const char *fp8_block_kind_name(fp8_block_kind k);
/** Parses the names above (case-insensitive); FP8_OK or FP8_EINVAL. */
int fp8_block_kind_parse(const char *s, fp8_block_kind *out);

/** The `block` key of a block recipe: 1x128 tiles, 128x128 blocks, or auto (128x128 for
 *  weights, 1x128 for every other role). */
typedef enum { FP8_BLOCK_SHAPE_1X128, FP8_BLOCK_SHAPE_128X128, FP8_BLOCK_SHAPE_AUTO } fp8_block_shape;

/** "1x128" / "128x128" / "auto". */
const char *fp8_block_shape_name(fp8_block_shape s);
/** Parses "1x128" / "128x128" / "auto" (case-insensitive); FP8_OK or FP8_EINVAL. */
int fp8_block_shape_parse(const char *s, fp8_block_shape *out);
/** True when shape s means 128x128 blocks for a tensor of role r (auto: weights only). */
bool fp8_block_shape_is_square(fp8_block_shape s, fp8_role r);

#define FP8_MX_BLOCK 32     /**< elements per MXFP8 block */
#define FP8_BLOCK_TILE 128  /**< elements per side of a DeepSeek-V3 tile / block */

/** One block recipe, resolved for one tensor. Fill it with one of the fp8_block_params_*()
 *  helpers, or by hand. */
typedef struct {
  fp8_block_kind kind;
  fp8_format format;
  /** Elements per block along the blocked dimension: 32 (MXFP8), 128 (block), 0 = the whole
   *  dimension (rowwise). Any value >= 1 is accepted (tests use small blocks). */
  int64_t block_len;
  /** block_len x block_len 2-D blocks (128x128 weights) instead of 1 x block_len runs.
   *  Only for FP8_BLOCK_KIND_BLOCK. */
  bool square;
  fp8_mx_rounding rounding; /**< MXFP8 only */
  /* Current-scaling parameters of each block (block, rowwise), exactly as
   * fp8_current_scale(): scale = RN32(RN32(fp8_max * 2^-margin) / max(amax, eps)), 1 for an
   * amax of 0, inf or NaN, pow2 truncating it to a power of two. MXFP8 needs margin 0 and
   * amax_epsilon 0 (fp8_block_params_check) and ignores pow2 (its scales are powers of two). */
  bool pow2;
  int32_t margin;
  float amax_epsilon;
  /** Block kind only: the scale when fp8_max / amax overflows float32 (an amax below about
   *  1.3e-36 for E4M3), TE's value_for_inf: Float8BlockScaling's kernels take the input
   *  dtype's largest finite value (fp8_dtype_max: 3.3895e38 for BF16), before pow2's
   *  truncation. 0 stands for FLT_MAX (float32 input), as do rowwise and current scaling. */
  float inf_scale;
  /* FP4 kinds (issue 29; fp4.h). format is unused there (E2M1 elements; keep FP8_E4M3). */
  int fp4_rule;        /**< nvfp4: fp8_nvfp4_scale_rule (max6, 4over6 MAE / MSE) */
  float e4m3_max;      /**< nvfp4: the per-tensor scale's E4M3 maximum, 448 or 256 (0: 448) */
  bool stochastic;     /**< nvfp4: stochastic rounding (a seeded draw; expectation in bst) */
  uint64_t sr_seed;    /**< the draw's seed (fp8_fp4_sr) */
  bool rht;            /**< nvfp4, column-wise passes only: TE's random Hadamard transform of
                            each column's runs of 16 before quantizing (the wgrad operands;
                            skipped when rows is not a multiple of 16); xhat holds the
                            dequantized values transformed back (in double, then float32) */
} fp8_block_params;

/** MXFP8: 1x32 blocks, the given rounding (FP8_MX_ROUND_CEIL is the default). */
fp8_block_params fp8_block_params_mxfp8(fp8_format f, fp8_mx_rounding r);
/** NVFP4: 1x16 runs, or 16x16 blocks when `square`; the block scale rule (fp4.h) and the
 *  per-tensor scale's E4M3 maximum; nearest rounding, no transform (set them by hand). */
fp8_block_params fp8_block_params_nvfp4(bool square, int rule, float e4m3_max);
/** MXFP4: 1x32 blocks, E8M0 scales rounded as r. */
fp8_block_params fp8_block_params_mxfp4(fp8_mx_rounding r);
/** Block FP8: 1x128 tiles, or 128x128 blocks when `square`; pow2 (default true); the input
 *  dtype d gives inf_scale. */
fp8_block_params fp8_block_params_tile(fp8_format f, bool square, bool pow2, fp8_dtype d);
/** Per row: one current scale per row (per column when quantized column-wise); pow2 (default
 *  true). */
fp8_block_params fp8_block_params_rowwise(fp8_format f, bool pow2);

/** Validates p: known kind and format, block_len >= 0 (0 only for rowwise, >= 1 otherwise),
 *  square only for kinds block and nvfp4, |margin| <= FP8_MARGIN_LIMIT, 0 <= amax_epsilon <
 *  inf, margin = amax_epsilon = 0 for MXFP8 and the FP4 kinds, block_len 16 (nvfp4) or 32
 *  (mxfp4). FP8_OK or FP8_EINVAL. */
int fp8_block_params_check(const fp8_block_params *p);

/** The scale of one block whose amax is `amax` (fmaxf semantics: NaN elements ignored, inf
 *  counts): fp8_e8m0_scale(fp8_mx_scale_exponent(...)) for MXFP8, fp8_current_scale_inf() with
 *  p's format, margin, amax_epsilon, pow2 and inf_scale for block and rowwise. The FP4 kinds'
 *  scales depend on more than the block amax (NVFP4: the tensor's amax too): NAN. */
float fp8_block_scale(const fp8_block_params *p, float amax);

/* ---------------------------------------------------------------- tensors */

/** Views an n-D shape as a matrix [rows, cols]: [product of the leading dimensions, last
 *  dimension]; a 1-D tensor is one row [1, n], a 0-D tensor [1, 1]. FP8_ERANGE when the
 *  element count overflows int64. */
int fp8_block_view_2d(const int64_t *shape, int ndim, int64_t *rows, int64_t *cols);

/** Along which dimension of the stored [rows, cols] matrix the blocks run. */
typedef enum {
  FP8_BLOCK_DIR_ROW, /**< blocks are runs along the last dimension, as stored ("rowwise usage":
                          a 1x32 block is 32 consecutive elements of one row) */
  FP8_BLOCK_DIR_COL, /**< blocks run along the first dimension ("columnwise usage": the
                          layout a GEMM reducing over `rows` needs; a 1x32 block is 32
                          consecutive elements of one column) */
} fp8_block_dir;

/** The grid of blocks: grid_rows x grid_cols blocks, indexed [block along dim 0][block along
 *  dim 1] of the stored matrix. With L = block_len (rowwise: the whole dimension):
 *  DIR_ROW: [rows, ceil(cols/L)]; DIR_COL: [ceil(rows/L), cols]; square: [ceil(rows/L),
 *  ceil(cols/L)] in both directions (a 2-D block is the same block either way). A partial
 *  block at an edge is a block of its own. Either output may be NULL. */
int fp8_block_grid(const fp8_block_params *p, fp8_block_dir dir, int64_t rows, int64_t cols,
                   int64_t *grid_rows, int64_t *grid_cols);

/** Per-step block statistics of one tensor (in addition to fp8_stats). */
typedef struct {
  int64_t nblocks;              /**< blocks of the grid (partial ones included) */
  int64_t blocks_with_overflow; /**< blocks holding at least one element counted in `overflow` */
  /** Blocks whose amax is finite and > 0. Only they enter the spread below: an all-zero (or
   *  all-NaN) block has no data-driven scale (1 under current scaling, 2^127 under MXFP8),
   *  and a block holding an inf has its scale fixed by the inf (1, or 2^-127 under MXFP8). */
  int64_t nblocks_scaled;
  double log2_scale_min;        /**< min of log2(scale) over scaled blocks; NaN when none */
  double log2_scale_max;        /**< max of log2(scale) over scaled blocks; NaN when none */
  double log2_scale_std;        /**< population std (divide by N) of log2(scale); NaN when none */
  /** max over the blocks of log2(block amax * block scale / fp8_max), in double: > 0 when the
   *  largest element of some block saturated (by that many binades); -inf when every block
   *  is all zero (or there is none) */
  double overshoot;
  /** Stochastic rounding (FP4 kinds with `stochastic`): the expected count of finite non-zero
   *  elements cast to +-0 and the expected sum of squared errors over the finite elements
   *  (fp8_fp4_sr); NaN otherwise. fp8_stats then hold one seeded draw. */
  double underflow_expected;
  double sum_sq_err_expected;
} fp8_block_stats;

/** Quantizes the row-major float32 matrix x [rows, cols] with recipe p, blocks running along
 *  `dir` (ignored for square blocks).
 *  @param xhat   NULL or [rows, cols]: the dequantized values, same layout as x
 *  @param scales NULL or [grid_rows * grid_cols] (fp8_block_grid): each block's scale (the FP4
 *                kinds: each block's element multiplier, fp4.h)
 *  @param st     NULL or statistics ACCUMULATED (like fp8_quantize_f32) over all elements, each
 *                element with its own block's scale
 *  @param bst    NULL or the block statistics of this call (overwritten)
 *  @return FP8_OK; FP8_EINVAL for bad parameters or negative sizes (or x NULL with elements);
 *          FP8_ENOMEM when the column-wise scratch buffer cannot be allocated (nothing is
 *          written to st then). Element order in the sums: DIR_COL sums column-wise panels,
 *          so the double sums may differ from a DIR_ROW pass in the last bits. */
int fp8_block_quantize_f32(const float *x, int64_t rows, int64_t cols, const fp8_block_params *p,
                           fp8_block_dir dir, float *xhat, float *scales, fp8_stats *st,
                           fp8_block_stats *bst);

/** The block statistics of an FP4 cast from each block's amax and element multiplier, in block
 *  order (block_fp4.c, and the GPU engine from its kernel's arrays: the same arithmetic):
 *  nblocks, blocks_with_overflow (amax * mult > 6), the log2(mult) spread over the blocks whose
 *  amax is finite and > 0, overshoot; the expectation fields are left as they are. */
void fp8_block_fp4_stats(const float *amax, const float *mult, int64_t n, fp8_block_stats *bst);

/** The FP4 kinds' fp8_block_quantize_f32 (block_fp4.c; p already checked, x non-empty). The
 *  NVFP4 per-tensor scale comes from the amax of the values quantized (after the transform
 *  when p->rht: TE's column-wise amax). */
int fp8_block_fp4_quantize(const float *x, int64_t rows, int64_t cols, const fp8_block_params *p,
                           fp8_block_dir dir, float *xhat, float *scales, fp8_stats *st,
                           fp8_block_stats *bst);

#ifdef __cplusplus
}
#endif

#endif /* FP8LAB_SIM_BLOCK_H */
