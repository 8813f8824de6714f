/* experiment_settings.c: a configuration's keys written back as the lines of an experiment
 * section (fp8_config_settings, experiment.h): what run.json records per configuration and
 * advice files replay. The reading of those keys is experiment_recipe.c's.
 */
#include "experiment.h"

#include <stdio.h>

#include "block.h"

void fp8_config_settings(const fp8_config *cf, char *buf, size_t len) {
  static const char *const nvb[] = {"1x16", "16x16", "auto"};
  static const char *const rnd[] = {"nearest", "stochastic", "auto"};
  static const char *const rule[] = {"max6", "4over6_mae", "4over6_mse"};
  const char *f = fp8_format_sel_name(cf->format);
  const char *tf = cf->pow2 ? "true" : "false";
  int n = snprintf(buf, len, "kind = %s", fp8_recipe_kind_name(cf->kind));
  if (n < 0 || (size_t)n >= len) return;
  buf += n;
  len -= (size_t)n;
  switch (cf->kind) {
  case FP8_KIND_DELAYED:
    /* unfused_update written only when set: the settings of a fused run are as before */
    snprintf(buf, len, "\nformat = %s\nhistory_len = %d\nmargin = %d\namax_compute = %s%s", f,
             (int)cf->history_len, (int)cf->margin, fp8_amax_compute_name(cf->amax_compute),
             cf->unfused_update ? "\nunfused_update = true" : "");
    break;
  case FP8_KIND_CURRENT:
    snprintf(buf, len, "\nformat = %s\nmargin = %d\namax_epsilon = %.9g\npow2 = %s", f,
             (int)cf->margin, (double)cf->amax_epsilon, tf);
    break;
  case FP8_KIND_MXFP8:
  case FP8_KIND_MXFP4:
    snprintf(buf, len, "%s%s\nscale_rounding = %s", cf->kind == FP8_KIND_MXFP8 ? "\nformat = " : "",
             cf->kind == FP8_KIND_MXFP8 ? f : "", fp8_mx_rounding_name((fp8_mx_rounding)cf->mx_rounding));
    break;
  case FP8_KIND_BLOCK:
    snprintf(buf, len, "\nformat = %s\nblock = %s\namax_epsilon = %.9g\npow2 = %s", f,
             fp8_block_shape_name((fp8_block_shape)cf->block_shape), (double)cf->amax_epsilon, tf);
    break;
  case FP8_KIND_ROWWISE:
    snprintf(buf, len, "\nformat = %s\namax_epsilon = %.9g\npow2 = %s", f,
             (double)cf->amax_epsilon, tf);
    break;
  case FP8_KIND_NVFP4: {
    /* sr_seed only where something is drawn: beside rounding = nearest the loader refuses it */
    char seed[48] = "";
    if (cf->fp4_rounding != FP8_FP4_ROUND_NEAREST)
      snprintf(seed, sizeof seed, "\nsr_seed = %llu", (unsigned long long)cf->sr_seed);
    snprintf(buf, len, "\nblock = %s\nrht = %s\nrounding = %s\nblock_scale = %s\ne4m3_max = %d%s",
             nvb[(unsigned)cf->nvfp4_block % 3], cf->rht ? "true" : "false",
             rnd[(unsigned)cf->fp4_rounding % 3], rule[(unsigned)cf->fp4_rule % 3],
             (int)cf->e4m3_max, seed);
    break;
  }
  case FP8_KIND_BF16:
  case FP8_KIND_MIXED: /* no configuration's */
    break;
  }
}
