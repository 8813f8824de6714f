/* current.c: current (just-in-time) scaling, TE's Float8CurrentScaling, from a tensor's own amax.
 * fp8lab adds `margin` (TE has none): scale = RN32(RN32(fp8_max * 2^-m) / amax).
 */
#include "fp8.h"

#include <float.h>
#include <math.h>
#include <string.h>

int fp8_current_params_check(const fp8_current_params *p) {
  if (!p) return FP8_EINVAL;
  if (!(p->amax_epsilon >= 0.0f) || isinf(p->amax_epsilon)) return FP8_EINVAL;
  if (p->margin < -FP8_MARGIN_LIMIT || p->margin > FP8_MARGIN_LIMIT) return FP8_EINVAL;
  if (p->format != FP8_E4M3 && p->format != FP8_E5M2) return FP8_EINVAL;
  return FP8_OK;
}

float fp8_current_scale(const fp8_current_params *p, float amax) {
  return fp8_current_scale_inf(p, amax, FLT_MAX);
}

float fp8_current_scale_inf(const fp8_current_params *p, float amax, float value_for_inf) {
  float a = amax < p->amax_epsilon ? p->amax_epsilon : amax;
  if (isinf(a) || isnan(a) || a == 0.0f) return 1.0f;
  float s = fp8_scaled_max(p->format, p->margin) / a;
  if (isinf(s)) s = value_for_inf;
  if (p->pow2) {
    uint32_t u;
    memcpy(&u, &s, sizeof u);
    u &= 0xFF800000u;
    memcpy(&s, &u, sizeof s);
  }
  return s;
}
