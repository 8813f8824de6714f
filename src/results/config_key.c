/* config_key.c: see config_key.h. */
#include "config_key.h"

#include <string.h>

#include "csv_internal.h" /* csv_parse_i64 */

static int cmp_i(long long a, long long b) { return a < b ? -1 : a > b; }

int fp8_config_key_cmp(const fp8_config_key *a, const fp8_config_key *b, unsigned ignore) {
  int c;
  if (!(ignore & FP8_KEY_IGNORE_RECIPE) && a->recipe != b->recipe &&
      (c = strcmp(a->recipe, b->recipe)) != 0)
    return c < 0 ? -1 : 1;
  if (!(ignore & FP8_KEY_IGNORE_KIND) && (c = cmp_i(a->kind, b->kind))) return c;
  if (!(ignore & FP8_KEY_IGNORE_FORMAT) && (c = cmp_i(a->format, b->format))) return c;
  if (!(ignore & FP8_KEY_IGNORE_HISTORY) && (c = cmp_i(a->history_len, b->history_len))) return c;
  if (!(ignore & FP8_KEY_IGNORE_AMAX_COMPUTE) && (c = cmp_i(a->amax_compute, b->amax_compute)))
    return c; /* FP8_AMAX_MAX (0) first */
  if (!(ignore & FP8_KEY_IGNORE_MARGIN) && (c = cmp_i(a->margin, b->margin))) return c;
  return 0;
}

void fp8_config_key_put_delayed_csv(FILE *fp, const fp8_config_key *k, int delayed) {
  if (delayed && k->kind == FP8_KIND_DELAYED)
    fprintf(fp, "%d,%d,%s,", (int)k->history_len, (int)k->margin,
            fp8_amax_compute_name(k->amax_compute));
  else fputs(",,,", fp);
}

static int is_label_char(char ch) {
  return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
         ch == '_' || ch == '.' || ch == '-';
}

int fp8_config_key_parse(const char *recipe, const char *kind, const char *format,
                         const char *history_len, const char *margin, const char *amax_compute,
                         fp8_config_key *k, const char **what) {
  memset(k, 0, sizeof *k);
  if (!*recipe || strlen(recipe) > 63) return *what = "a recipe label", 0;
  for (const char *p = recipe; *p; p++)
    if (!is_label_char(*p)) return *what = "a recipe label (A-Z a-z 0-9 _ . -)", 0;
  k->recipe = recipe;
  int known = -1;
  for (int x = FP8_KIND_DELAYED; x <= FP8_KIND_LAST; x++)
    if (strcmp(kind, fp8_recipe_kind_name((fp8_recipe_kind)x)) == 0) known = x;
  /* gemm.csv (no format column): a GEMM of a mixed recipe's operands of two settings */
  if (!format && strcmp(kind, fp8_recipe_kind_name(FP8_KIND_MIXED)) == 0) known = FP8_KIND_MIXED;
  if (known < 0)
    return *what = format ? "delayed, current, mxfp8, block, rowwise, bf16, nvfp4 or mxfp4"
                          : "delayed, current, mxfp8, block, rowwise, bf16, nvfp4, mxfp4 or mixed",
           1;
  k->kind = (fp8_recipe_kind)known;
  if (format && fp8_recipe_kind_is_fp4(k->kind)) {
    if (strcmp(format, fp8_kind_format_name(k->kind, FP8_E4M3)) != 0) /* e2m1 */
      return *what = "e2m1 for the FP4 kinds", 2;
    k->format = FP8_E4M3; /* the FP4 kinds' placeholder (recipe.h) */
  } else if (format) {
    if (strcmp(format, fp8_format_name(FP8_E4M3)) == 0) k->format = FP8_E4M3;
    else if (strcmp(format, fp8_format_name(FP8_E5M2)) == 0) k->format = FP8_E5M2;
    else return *what = "e4m3 or e5m2", 2;
  }
  k->amax_compute = FP8_AMAX_MAX;
  const char *const delayed[3] = {history_len, margin, amax_compute};
  if (k->kind != FP8_KIND_DELAYED) {
    for (int col = 0; col < 3; col++)
      if (*delayed[col]) return *what = "an empty field for non-delayed kinds", 3 + col;
    return -1;
  }
  int64_t v;
  if (!csv_parse_i64(history_len, 0, &v) || v < 1 || v > FP8_HISTORY_LIMIT)
    return *what = "an integer in 1..1048576 for delayed scaling", 3;
  k->history_len = (int32_t)v;
  if (!csv_parse_i64(margin, 1, &v) || v < -FP8_MARGIN_LIMIT || v > FP8_MARGIN_LIMIT)
    return *what = "an integer in -64..64 for delayed scaling", 4;
  k->margin = (int32_t)v;
  if (strcmp(amax_compute, fp8_amax_compute_name(FP8_AMAX_MAX)) == 0) k->amax_compute = FP8_AMAX_MAX;
  else if (strcmp(amax_compute, fp8_amax_compute_name(FP8_AMAX_MOST_RECENT)) == 0)
    k->amax_compute = FP8_AMAX_MOST_RECENT;
  else return *what = "max or most_recent for delayed scaling", 5;
  return -1;
}

const char *fp8_config_key_label(const fp8_config_key *k, fp8_config_key_style style, char *buf,
                                 size_t len) {
  int delayed = k->kind == FP8_KIND_DELAYED;
  switch (style) {
  case FP8_KEY_LABEL_TEXT:
    if (delayed)
      snprintf(buf, len, "%s %s history_len %d margin %d %s", k->recipe, fp8_kind_format_name(k->kind, k->format),
               (int)k->history_len, (int)k->margin, fp8_amax_compute_name(k->amax_compute));
    else snprintf(buf, len, "%s %s", k->recipe, fp8_kind_format_name(k->kind, k->format));
    break;
  case FP8_KEY_LABEL_WORDS:
    if (delayed)
      snprintf(buf, len, "delayed scaling (recipe %s; %s; history_len %d; margin %d; %s)",
               k->recipe, fp8_kind_format_name(k->kind, k->format), (int)k->history_len, (int)k->margin,
               fp8_amax_compute_name(k->amax_compute));
    else if (k->kind == FP8_KIND_CURRENT)
      snprintf(buf, len, "current scaling (recipe %s; %s)", k->recipe, fp8_kind_format_name(k->kind, k->format));
    else if (k->kind == FP8_KIND_BF16)
      snprintf(buf, len, "BF16, not cast to FP8 (recipe %s)", k->recipe);
    else
      snprintf(buf, len, "%s (recipe %s; %s)", fp8_recipe_kind_name(k->kind), k->recipe,
               fp8_kind_format_name(k->kind, k->format));
    break;
  case FP8_KEY_LABEL_SHORT:
    if (delayed)
      snprintf(buf, len, "%s L=%d m=%d %s", k->recipe, (int)k->history_len, (int)k->margin,
               k->amax_compute == FP8_AMAX_MAX ? "max" : "recent");
    else if (k->kind == FP8_KIND_CURRENT && strcmp(k->recipe, "current") == 0)
      snprintf(buf, len, "current scaling"); /* not "current (current)" */
    else if (k->kind == FP8_KIND_CURRENT)
      snprintf(buf, len, "%s (current scaling)", k->recipe);
    else
      snprintf(buf, len, "%s (%s)", k->recipe, fp8_recipe_kind_name(k->kind));
    break;
  }
  return buf;
}
