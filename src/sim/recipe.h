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
} fp8_recipe_kind;

#define FP8_KIND_LAST FP8_KIND_BF16

/** True for the per-block kinds (steps.csv's scale column is empty for them). */
int fp8_recipe_kind_is_block(fp8_recipe_kind k);
/** True for the kinds with one scale per tensor (delayed, current): steps.csv's scale column. */
int fp8_recipe_kind_has_scale(fp8_recipe_kind k);
/** "delayed", "current", "mxfp8", "block", "rowwise", "bf16". */
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
  /* current */
  float amax_epsilon;
  int pow2;                    /**< current, block, rowwise */
  /* block kinds */
  int mx_rounding;             /**< fp8_mx_rounding (mxfp8) */
  int block_shape;             /**< fp8_block_shape (block) */
} fp8_config;

/** 1 when configurations a and b give the same scale at every step of any trace, provably:
 *  both delayed, of one section (label: the same formats and tensors), the same margin, and
 *  both taking the last amax (most_recent ignores history_len; history 1 with max is
 *  most_recent). The report shows such configurations once. */
int fp8_config_identical(const fp8_config *a, const fp8_config *b);

/** Delayed-scaling parameters of configuration cf (FP8_KIND_DELAYED) for a tensor of format f. */
fp8_delayed_params fp8_config_delayed_params(const fp8_config *cf, fp8_format f);
/** Current-scaling parameters of configuration cf (FP8_KIND_CURRENT) for a tensor of format f. */
fp8_current_params fp8_config_current_params(const fp8_config *cf, fp8_format f);
/** The block recipe of configuration cf (a block kind) for a tensor of role r, format f and
 *  input dtype d (block = auto gives 128x128 blocks to weights, 1x128 tiles to the other
 *  roles; d gives the block kind's inf_scale; block and rowwise take cf's amax_epsilon). */
fp8_block_params fp8_config_block_params(const fp8_config *cf, fp8_role r, fp8_format f,
                                         fp8_dtype d);

#ifdef __cplusplus
}
#endif

#endif /* FP8LAB_SIM_RECIPE_H */
