/* roles.c: tensor roles (input, weight, output, grad_output, grad_input) and the HYBRID
 * format mapping: E4M3 for the forward roles, E5M2 for the backward ones. */
#include "fp8.h"

#include <string.h>
#include <strings.h>

static const char *ROLE_NAMES[] = {"input", "weight", "output", "grad_output", "grad_input"};

const char *fp8_role_name(fp8_role r) {
  return (r >= FP8_ROLE_INPUT && r < FP8_ROLE_UNKNOWN) ? ROLE_NAMES[r] : "";
}

fp8_role fp8_role_of_tensor(const char *name) {
  if (!name) return FP8_ROLE_UNKNOWN;
  const char *dot = strrchr(name, '.');
  const char *suffix = dot ? dot + 1 : name;
  for (int r = FP8_ROLE_INPUT; r < FP8_ROLE_UNKNOWN; r++)
    if (strcmp(suffix, ROLE_NAMES[r]) == 0) return (fp8_role)r;
  return FP8_ROLE_UNKNOWN;
}

bool fp8_role_is_backward(fp8_role r) {
  return r == FP8_ROLE_GRAD_OUTPUT || r == FP8_ROLE_GRAD_INPUT;
}

const char *fp8_format_sel_name(fp8_format_sel sel) {
  switch (sel) {
  case FP8_SEL_E4M3: return fp8_format_name(FP8_E4M3);
  case FP8_SEL_E5M2: return fp8_format_name(FP8_E5M2);
  default: return "hybrid";
  }
}

int fp8_format_sel_parse(const char *s, fp8_format_sel *out) {
  if (!s) return FP8_EINVAL;
  for (int k = FP8_SEL_E4M3; k <= FP8_SEL_HYBRID; k++)
    if (strcasecmp(s, fp8_format_sel_name((fp8_format_sel)k)) == 0) {
      *out = (fp8_format_sel)k;
      return FP8_OK;
    }
  return FP8_EINVAL;
}

int fp8_format_resolve(fp8_format_sel sel, fp8_role r, fp8_format *out) {
  switch (sel) {
  case FP8_SEL_E4M3: *out = FP8_E4M3; return FP8_OK;
  case FP8_SEL_E5M2: *out = FP8_E5M2; return FP8_OK;
  case FP8_SEL_HYBRID:
    if (r == FP8_ROLE_UNKNOWN) return FP8_EINVAL;
    *out = fp8_role_is_backward(r) ? FP8_E5M2 : FP8_E4M3;
    return FP8_OK;
  }
  return FP8_EINVAL;
}
