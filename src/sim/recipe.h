/* recipe.h: recipe kinds and one configuration of a sweep, with the step from a configuration
 * to the simulator's parameters of one tensor (fp8.h for delayed and current scaling, block.h
 * for the block kinds). The experiment parser (src/experiment/experiment.h) produces fp8_config
 * values; the engines and the analysis read them. Pure C11, like the rest of src/sim.
 */
#ifndef FP8LAB_SIM_RECIPE_H
#define FP8LAB_SIM_RECIPE_H

#include "block.h"
#include "fp8.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Recipe kinds: per-tensor (delayed, current), per-block (mxfp8, block, rowwise), and bf16:
 *  the tensor kept in the precision it was captured in (not cast to FP8; issue 28). */
typedef enum {
  FP8_KIND_DELAYED,
  FP8_KIND_CURRENT,
  FP8_KIND_MXFP8,   /**< OCP MX: 1x32 blocks, E8M0 scales (scale_rounding ceil | floor) */
  FP8_KIND_BLOCK,   /**< DeepSeek-V3 / TE Float8BlockScaling: 1x128 / 128x128 (block = auto) */
  FP8_KIND_ROWWISE, /**< one current scale per row (torchao rowwise) */
  FP8_KIND_BF16,    /**< not cast: the captured values themselves (TE: the module outside FP8
                         autocast, in BF16). No scale; nothing overflows, clips or flushes;
                         the error against the captured tensor is 0 */
  FP8_KIND_NVFP4,   /**< NVFP4 (TE NVFP4BlockScaling): E2M1, 1x16 / 16x16 blocks, E4M3 scales
                         under a per-tensor scale; Hadamard transform, stochastic rounding */
  FP8_KIND_MXFP4,   /**< OCP MXFP4: E2M1, 1x32 blocks, E8M0 scales (scale_rounding) */
  FP8_KIND_MIXED,   /**< no configuration's kind: gemm.csv's kind of a GEMM whose two operands
                         come from sections of one recipe label with different kinds or delayed
                         parameters (docs/semantics.md, "GEMMs of a mixed recipe") */
} fp8_recipe_kind;

/** The last kind a configuration may have (FP8_KIND_MIXED is a result file's only). */
#define FP8_KIND_LAST FP8_KIND_MXFP4

/** True for the per-block kinds (steps.csv's scale column is empty for them), FP4 ones too. */
int fp8_recipe_kind_is_block(fp8_recipe_kind k);
/** True for the FP4 kinds (nvfp4, mxfp4): E2M1 elements; steps.csv's format column says e2m1. */
int fp8_recipe_kind_is_fp4(fp8_recipe_kind k);
/** True for the kinds with one scale per tensor (delayed, current): steps.csv's scale column. */
int fp8_recipe_kind_has_scale(fp8_recipe_kind k);
/** The element format's name in the outputs: "e2m1" for the FP4 kinds, else fp8_format_name(f). */
const char *fp8_kind_format_name(fp8_recipe_kind k, fp8_format f);
/** "delayed", "current", "mxfp8", "block", "rowwise", "bf16", "nvfp4", "mxfp4" ("mixed"). */
const char *fp8_recipe_kind_name(fp8_recipe_kind k);

/** One configuration: a recipe section label, its kind, and one value of every key. */
typedef struct {
  char label[64];              /**< the text after "recipe." */
  fp8_recipe_kind kind;
  fp8_format_sel format;
  /* delayed */
  int32_t history_len;
  int32_t margin;              /**< both kinds */
  fp8_amax_compute amax_compute;
  int unfused_update;          /**< TE's unfused update (fp8_delayed_params): one value per
                                    [recipe.*] section, not a sweep axis */
  /* current */
  float amax_epsilon;
  int pow2;                    /**< current, block, rowwise */
  /* block kinds */
  int mx_rounding;             /**< fp8_mx_rounding (mxfp8) */
  int block_shape;             /**< fp8_block_shape (block) */
  /* nvfp4 (issue 29) */
  int nvfp4_block;             /**< fp8_nvfp4_block: 1x16, 16x16 or auto (16x16 for weights) */
  int rht;                     /**< the Hadamard transform on the wgrad operands */
  int fp4_rounding;            /**< fp8_fp4_rounding: nearest, stochastic, auto (gradients) */
  int fp4_rule;                /**< block_scale: fp8_nvfp4_scale_rule */
  float e4m3_max;              /**< the per-tensor scale's E4M3 maximum: 448 or 256 */
  uint64_t sr_seed;            /**< stochastic rounding's draw */
} fp8_config;

/** nvfp4's `block` key. */
typedef enum { FP8_NVFP4_BLOCK_1X16, FP8_NVFP4_BLOCK_16X16, FP8_NVFP4_BLOCK_AUTO } fp8_nvfp4_block;
/** nvfp4's `rounding` key: auto is stochastic for the gradients (grad_output, grad_input), as
 *  TE's NVFP4BlockScaling, and nearest for the forward roles. */
typedef enum { FP8_FP4_ROUND_NEAREST, FP8_FP4_ROUND_STOCHASTIC, FP8_FP4_ROUND_AUTO } fp8_fp4_rounding;

/** 1 when configurations a and b give the same scale at every step of any trace, provably:
 *  both delayed, of one section (label: the same formats and tensors), the same margin, and
 *  both taking the last amax (most_recent ignores history_len; history 1 with max is
 *  most_recent; unfused_update changes nothing there: an amax of 0 keeps the scale under both
 *  rules). The report shows such configurations once. */
int fp8_config_identical(const fp8_config *a, const fp8_config *b);

/** Delayed-scaling parameters of configuration cf (FP8_KIND_DELAYED) for a tensor of format f. */
fp8_delayed_params fp8_config_delayed_params(const fp8_config *cf, fp8_format f);
/** Current-scaling parameters of configuration cf (FP8_KIND_CURRENT) for a tensor of format f. */
fp8_current_params fp8_config_current_params(const fp8_config *cf, fp8_format f);
/** The block recipe of configuration cf (a block kind) for a tensor of role r, format f and
 *  input dtype d (block = auto gives 128x128 blocks to weights, 1x128 tiles to the other
 *  roles; d gives the block kind's inf_scale; block and rowwise take cf's amax_epsilon).
 *  nvfp4: auto blocks are 16x16 for weights; rounding auto is stochastic for the gradient
 *  roles; rht stays false (the GEMM sets it on the wgrad operands' column-wise pass). */
fp8_block_params fp8_config_block_params(const fp8_config *cf, fp8_role r, fp8_format f,
                                         fp8_dtype d);

#ifdef __cplusplus
}
#endif

#endif /* FP8LAB_SIM_RECIPE_H */
