/* recipe.c: see recipe.h. */
#include "recipe.h"

#include <string.h>

int fp8_recipe_kind_is_block(fp8_recipe_kind k) {
  return k == FP8_KIND_MXFP8 || k == FP8_KIND_BLOCK || k == FP8_KIND_ROWWISE ||
         fp8_recipe_kind_is_fp4(k);
}

int fp8_recipe_kind_is_fp4(fp8_recipe_kind k) { return k == FP8_KIND_NVFP4 || k == FP8_KIND_MXFP4; }

int fp8_recipe_kind_has_scale(fp8_recipe_kind k) {
  return k == FP8_KIND_DELAYED || k == FP8_KIND_CURRENT;
}

const char *fp8_kind_format_name(fp8_recipe_kind k, fp8_format f) {
  return fp8_recipe_kind_is_fp4(k) ? "e2m1" : fp8_format_name(f);
}

const char *fp8_recipe_kind_name(fp8_recipe_kind k) {
  switch (k) {
  case FP8_KIND_DELAYED: return "delayed";
  case FP8_KIND_CURRENT: return "current";
  case FP8_KIND_MXFP8: return "mxfp8";
  case FP8_KIND_BLOCK: return "block";
  case FP8_KIND_ROWWISE: return "rowwise";
  case FP8_KIND_BF16: return "bf16";
  case FP8_KIND_NVFP4: return "nvfp4";
  case FP8_KIND_MXFP4: return "mxfp4";
  case FP8_KIND_MIXED: return "mixed";
  }
  return "unknown";
}

fp8_delayed_params fp8_config_delayed_params(const fp8_config *cf, fp8_format f) {
  return (fp8_delayed_params){.history_len = cf->history_len, .margin = cf->margin,
                              .amax_compute = cf->amax_compute, .format = f,
                              .unfused_update = cf->unfused_update != 0};
}

fp8_current_params fp8_config_current_params(const fp8_config *cf, fp8_format f) {
  return (fp8_current_params){.amax_epsilon = cf->amax_epsilon, .pow2 = cf->pow2 != 0,
                              .margin = cf->margin, .format = f};
}

fp8_block_params fp8_config_block_params(const fp8_config *cf, fp8_role r, fp8_format f,
                                         fp8_dtype d) {
  fp8_block_params p;
  switch (cf->kind) {
  case FP8_KIND_MXFP8: return fp8_block_params_mxfp8(f, (fp8_mx_rounding)cf->mx_rounding);
  case FP8_KIND_MXFP4: return fp8_block_params_mxfp4((fp8_mx_rounding)cf->mx_rounding);
  case FP8_KIND_NVFP4: {
    bool grad = r == FP8_ROLE_GRAD_OUTPUT || r == FP8_ROLE_GRAD_INPUT;
    bool square = cf->nvfp4_block == FP8_NVFP4_BLOCK_16X16 ||
                  (cf->nvfp4_block == FP8_NVFP4_BLOCK_AUTO && r == FP8_ROLE_WEIGHT);
    p = fp8_block_params_nvfp4(square, cf->fp4_rule, cf->e4m3_max);
    p.stochastic = cf->fp4_rounding == FP8_FP4_ROUND_STOCHASTIC ||
                   (cf->fp4_rounding == FP8_FP4_ROUND_AUTO && grad);
    p.sr_seed = cf->sr_seed;
    return p;
  }
  case FP8_KIND_BLOCK:
    p = fp8_block_params_tile(f, fp8_block_shape_is_square((fp8_block_shape)cf->block_shape, r),
                              cf->pow2 != 0, d);
    break;
  default: p = fp8_block_params_rowwise(f, cf->pow2 != 0); break;
  }
  p.amax_epsilon = cf->amax_epsilon;
  return p;
}

int fp8_config_identical(const fp8_config *a, const fp8_config *b) {
  if (a->kind != FP8_KIND_DELAYED || b->kind != FP8_KIND_DELAYED) return 0;
  int ra = a->amax_compute == FP8_AMAX_MOST_RECENT || a->history_len == 1;
  int rb = b->amax_compute == FP8_AMAX_MOST_RECENT || b->history_len == 1;
  return ra && rb && a->margin == b->margin && a->format == b->format &&
         strcmp(a->label, b->label) == 0;
}
