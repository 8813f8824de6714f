/* experiment_recipe.c: the [recipe.<label>] sections of an experiment file: which keys each
 * recipe kind takes, their values (every key may be a comma list, a sweep axis), their
 * defaults, and the expansion of a section into the Cartesian product of its axes, appended
 * to the experiment's configurations (experiment.h).
 */
#include "experiment_internal.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "block.h"
#include "fp4.h"

enum { K_KIND, K_FORMAT, K_HISTORY, K_MARGIN, K_AMAX_COMPUTE, K_EPS, K_POW2, K_ROUNDING, K_BLOCK,
       K_RHT, K_FP4_ROUNDING, K_BLOCK_SCALE, K_E4M3_MAX, K_SR_SEED, K_UNFUSED, K_COUNT };
static const char *const exp_recipe_keys[K_COUNT] = {
    "kind", "format", "history_len", "margin", "amax_compute", "amax_epsilon", "pow2",
    "scale_rounding", "block", "rht", "rounding", "block_scale", "e4m3_max", "sr_seed",
    "unfused_update"};
#define KIND_BIT(k) (1u << (k))
#define ALL_KINDS (KIND_BIT(FP8_KIND_DELAYED) | KIND_BIT(FP8_KIND_CURRENT) | KIND_BIT(FP8_KIND_MXFP8) | \
                   KIND_BIT(FP8_KIND_BLOCK) | KIND_BIT(FP8_KIND_ROWWISE) | KIND_BIT(FP8_KIND_BF16) | \
                   KIND_BIT(FP8_KIND_NVFP4) | KIND_BIT(FP8_KIND_MXFP4))
#define NV KIND_BIT(FP8_KIND_NVFP4)
static const unsigned exp_recipe_key_kinds[K_COUNT] = {
    ALL_KINDS,                                               /* kind */
    /* format: bf16 casts nothing, the FP4 kinds cast to E2M1 */
    ALL_KINDS & ~(KIND_BIT(FP8_KIND_BF16) | NV | KIND_BIT(FP8_KIND_MXFP4)),
    KIND_BIT(FP8_KIND_DELAYED),                              /* history_len */
    KIND_BIT(FP8_KIND_DELAYED) | KIND_BIT(FP8_KIND_CURRENT), /* margin */
    KIND_BIT(FP8_KIND_DELAYED),                              /* amax_compute */
    KIND_BIT(FP8_KIND_CURRENT) | KIND_BIT(FP8_KIND_BLOCK) | KIND_BIT(FP8_KIND_ROWWISE), /* amax_epsilon */
    KIND_BIT(FP8_KIND_CURRENT) | KIND_BIT(FP8_KIND_BLOCK) | KIND_BIT(FP8_KIND_ROWWISE), /* pow2 */
    KIND_BIT(FP8_KIND_MXFP8) | KIND_BIT(FP8_KIND_MXFP4),     /* scale_rounding */
    KIND_BIT(FP8_KIND_BLOCK) | NV,                           /* block */
    NV, NV, NV, NV, NV,      /* rht, rounding, block_scale, e4m3_max, sr_seed */
    KIND_BIT(FP8_KIND_DELAYED),                              /* unfused_update */
};

static int exp_recipe_key(const char *key) {
  for (int k = 0; k < K_COUNT; k++)
    if (strcmp(key, exp_recipe_keys[k]) == 0) return k;
  return -1;
}

/* The keys of a section that are not sweep axes: its tensor subset and its recipe label. */
static int exp_section_key(const char *key) {
  return strcmp(key, "tensors") == 0 || strcmp(key, "label") == 0;
}

/* Parses one item of key k into *v (every axis but amax_epsilon is an integer code).
 * Returns NULL or what was expected. */
static const char *exp_parse_item(int k, fp8_recipe_kind kind, const char *s, int64_t *v,
                                  double *d, char *expect, size_t nexpect) {
  switch (k) {
  case K_FORMAT: {
    fp8_format_sel f;
    if (fp8_format_sel_parse(s, &f)) return "hybrid, e4m3 or e5m2";
    *v = f;
    return NULL;
  }
  case K_HISTORY:
    if (fp8_exp_parse_i64(s, v) || *v < 1 || *v > FP8_HISTORY_LIMIT) {
      snprintf(expect, nexpect, "an integer in 1..%d", FP8_HISTORY_LIMIT);
      return expect;
    }
    return NULL;
  case K_MARGIN:
    if (fp8_exp_parse_i64(s, v) || *v < -FP8_MARGIN_LIMIT || *v > FP8_MARGIN_LIMIT) {
      snprintf(expect, nexpect, "an integer in %d..%d", -FP8_MARGIN_LIMIT,
               FP8_MARGIN_LIMIT);
      return expect;
    }
    return NULL;
  case K_AMAX_COMPUTE: {
    fp8_amax_compute a;
    if (fp8_amax_compute_parse(s, &a)) return "max or most_recent";
    *v = a;
    return NULL;
  }
  case K_EPS: {
    char *end;
    double x = strtod(s, &end);
    if (end == s || *end || !(x >= 0.0) || !isfinite(x) || !isfinite((float)x))
      return "a number >= 0, finite in float32";
    *d = x;
    *v = 0;
    return NULL;
  }
  case K_POW2: {
    int b;
    if (fp8_exp_parse_bool(s, &b)) return "true, false, 1, 0, yes, no, on or off";
    *v = b;
    return NULL;
  }
  case K_ROUNDING: {
    fp8_mx_rounding r;
    if (fp8_mx_rounding_parse(s, &r)) return "ceil or floor";
    *v = r;
    return NULL;
  }
  case K_BLOCK: {
    if (kind == FP8_KIND_NVFP4) {
      if (strcasecmp(s, "1x16") == 0) *v = FP8_NVFP4_BLOCK_1X16;
      else if (strcasecmp(s, "16x16") == 0) *v = FP8_NVFP4_BLOCK_16X16;
      else if (strcasecmp(s, "auto") == 0) *v = FP8_NVFP4_BLOCK_AUTO;
      else return "1x16, 16x16 or auto";
      return NULL;
    }
    fp8_block_shape b;
    if (fp8_block_shape_parse(s, &b)) return "1x128, 128x128 or auto";
    *v = b;
    return NULL;
  }
  case K_RHT:
  case K_UNFUSED: {
    int b;
    if (fp8_exp_parse_bool(s, &b)) return "true, false, 1, 0, yes, no, on or off";
    *v = b;
    return NULL;
  }
  case K_FP4_ROUNDING:
    if (strcasecmp(s, "nearest") == 0) *v = FP8_FP4_ROUND_NEAREST;
    else if (strcasecmp(s, "stochastic") == 0) *v = FP8_FP4_ROUND_STOCHASTIC;
    else if (strcasecmp(s, "auto") == 0) *v = FP8_FP4_ROUND_AUTO;
    else return "nearest, stochastic or auto";
    return NULL;
  case K_BLOCK_SCALE:
    if (strcasecmp(s, "max6") == 0) *v = FP8_NVFP4_MAX6;
    else if (strcasecmp(s, "4over6_mae") == 0) *v = FP8_NVFP4_4OVER6_MAE;
    else if (strcasecmp(s, "4over6_mse") == 0) *v = FP8_NVFP4_4OVER6_MSE;
    else return "max6, 4over6_mae or 4over6_mse";
    return NULL;
  case K_E4M3_MAX:
    if (fp8_exp_parse_i64(s, v) || (*v != 256 && *v != 448)) return "256 or 448";
    return NULL;
  case K_SR_SEED:
    if (fp8_exp_parse_i64(s, v) || *v < 0) return "an integer >= 0";
    return NULL;
  default:
    return "a value";
  }
}

/* The axes of one section: the values of every key (a one-value axis when the key is absent:
 * its default) and amax_epsilon's value, the one that is not an integer code. */
typedef struct {
  int64_t *vals[K_COUNT];
  size_t nvals[K_COUNT];
  double eps;
} recipe_axes;

/* Checks every key name and finds the section's kind: 0 and *kind, or -1 (reported; "no kind"
 * only when nothing else went wrong in the file). */
static int recipe_kind(exp_ctx *c, fp8_recipe_kind *kind) {
  const exp_entry *kind_ent = NULL;
  char shown[FP8_ESC_LEN];
  for (size_t i = 0; i < c->nents; i++) {
    int k = exp_recipe_key(c->ents[i].key);
    if (k < 0 && !exp_section_key(c->ents[i].key))
      fp8_exp_fail(c, c->ents[i].line,
                   "unknown key %s in [%s] (expected kind, format, history_len, margin, "
                   "amax_compute, unfused_update, amax_epsilon, pow2, scale_rounding, block, "
                   "rht, rounding, block_scale, e4m3_max, sr_seed, tensors or label)",
                   fp8_esc(c->ents[i].key, shown, sizeof shown), c->secname);
    else if (k == K_KIND) kind_ent = &c->ents[i];
  }
  if (!kind_ent) {
    if (!c->has_err)
      fp8_exp_fail(c, c->sec_line,
                   "[%s] has no kind (expected kind = delayed, current, mxfp8, block, rowwise, "
                   "bf16, nvfp4 or mxfp4)",
                   c->secname);
    return -1;
  }
  if (strcasecmp(kind_ent->value, "delayed") == 0) *kind = FP8_KIND_DELAYED;
  else if (strcasecmp(kind_ent->value, "current") == 0) *kind = FP8_KIND_CURRENT;
  else if (strcasecmp(kind_ent->value, "mxfp8") == 0) *kind = FP8_KIND_MXFP8;
  else if (strcasecmp(kind_ent->value, "block") == 0) *kind = FP8_KIND_BLOCK;
  else if (strcasecmp(kind_ent->value, "rowwise") == 0) *kind = FP8_KIND_ROWWISE;
  else if (strcasecmp(kind_ent->value, "bf16") == 0) *kind = FP8_KIND_BF16;
  else if (strcasecmp(kind_ent->value, "nvfp4") == 0) *kind = FP8_KIND_NVFP4;
  else if (strcasecmp(kind_ent->value, "mxfp4") == 0) *kind = FP8_KIND_MXFP4;
  else {
    fp8_exp_fail(c, kind_ent->line,
                 "bad kind \"%s\" (expected a single value: delayed, current, mxfp8, block, "
                 "rowwise, bf16, nvfp4 or mxfp4)",
                 kind_ent->value);
    return -1;
  }
  return 0;
}

/* A format list (items parsed and distinct) may not hold hybrid together with e4m3 or e5m2, in
 * any kind: hybrid resolves to e4m3 for the forward roles and to e5m2 for the backward ones,
 * so for those tensors the two configurations would give rows that nothing tells apart
 * (steps.csv shows the resolved format, gemm.csv has no format column; the report then fails
 * with "duplicate row"). e4m3 with e5m2 is fine: the format column differs. */
static void format_list_check(exp_ctx *c, const exp_entry *e, const int64_t *v, size_t n) {
  int hybrid = 0;
  fp8_format_sel other = FP8_SEL_HYBRID;
  for (size_t j = 0; j < n; j++) {
    if (v[j] == FP8_SEL_HYBRID) hybrid = 1;
    else if (other == FP8_SEL_HYBRID) other = (fp8_format_sel)v[j];
  }
  if (!hybrid || other == FP8_SEL_HYBRID) return;
  int fwd = other == FP8_SEL_E4M3;
  fp8_exp_fail(c, e->line,
               "bad format list \"%s\": hybrid casts the %s roles (%s) to %s too, so their rows "
               "could not be told apart (steps.csv shows the resolved format): use one "
               "[recipe.*] section per format",
               e->value, fwd ? "forward" : "backward",
               fwd ? "input, weight, output" : "grad_output, grad_input", fp8_format_sel_name(other));
}

/* The comma list of key k (a key of kind) into ax->vals[k]: its items parsed, distinct; a bad
 * item is reported and ends the list. -1 when out of memory (c->nomem set), else 0. */
static int recipe_list(exp_ctx *c, const exp_entry *e, int k, fp8_recipe_kind kind,
                       recipe_axes *ax) {
  exp_list l;
  int rc = fp8_exp_list_split(e->value, &l);
  if (rc < 0) {
    c->nomem = 1;
    return -1;
  }
  if (rc > 0) {
    fp8_exp_fail(c, e->line, "empty item in the list %s = %s", e->key, e->value);
    return 0;
  }
  if (kind != FP8_KIND_DELAYED && k != K_FORMAT && l.n > 1) {
    fp8_exp_fail(c, e->line,
                 "%s must be a single value for kind %s: steps.csv has no column to tell "
                 "such configurations apart (use one [recipe.*] section per setting)",
                 e->key, fp8_recipe_kind_name(kind));
    fp8_exp_list_free(&l);
    return 0;
  }
  if (k == K_UNFUSED && l.n > 1) {
    /* not a sweep axis: steps.csv, summary.csv, stream and gemm.csv have no column for it (their
     * rows are told apart by the recipe label: one section per rule) */
    fp8_exp_fail(c, e->line,
                 "unfused_update must be a single value: steps.csv has no column to tell such "
                 "configurations apart (use one [recipe.*] section per rule: the recipe label "
                 "tells them apart)");
    fp8_exp_list_free(&l);
    return 0;
  }
  int64_t *v = ax->vals[k] = malloc(l.n * sizeof *v);
  if (!v) {
    c->nomem = 1;
    fp8_exp_list_free(&l);
    return -1;
  }
  for (size_t j = 0; j < l.n; j++) {
    char expect[64];
    const char *why = exp_parse_item(k, kind, l.items[j], &v[j], &ax->eps, expect, sizeof expect);
    if (why) {
      fp8_exp_fail(c, e->line, "bad %s \"%s\" (expected %s)", e->key, l.items[j], why);
      break;
    }
    size_t dup = j;
    for (size_t m = 0; m < j; m++)
      if (v[m] == v[j] && k != K_EPS) dup = m;
    if (dup != j) {
      fp8_exp_fail(c, e->line, "duplicate value \"%s\" in the list %s = %s", l.items[j],
                   e->key, e->value);
      break;
    }
    ax->nvals[k] = j + 1;
  }
  if (k == K_FORMAT && ax->nvals[k] == l.n) format_list_check(c, e, v, l.n);
  fp8_exp_list_free(&l);
  return 0;
}

/* sr_seed seeds stochastic rounding's draw: with rounding = nearest nothing is drawn, so the
 * key would be recorded (run.json, advice.ini) though it did nothing: an error at its line, as
 * a key of another kind is. rounding = auto (the default) rounds the gradients stochastically,
 * so sr_seed acts there. rounding takes one value per section (every key of a kind but delayed
 * does), so no list can hold nearest beside stochastic. Called with the section's keys parsed
 * and no default filled in yet. */
static void sr_seed_check(exp_ctx *c, fp8_recipe_kind kind, const recipe_axes *ax) {
  if (kind != FP8_KIND_NVFP4 || !ax->vals[K_SR_SEED] || !ax->vals[K_FP4_ROUNDING] ||
      ax->vals[K_FP4_ROUNDING][0] != FP8_FP4_ROUND_NEAREST)
    return;
  int seed_line = 0, rounding_line = 0;
  for (size_t i = 0; i < c->nents; i++) {
    if (strcmp(c->ents[i].key, "sr_seed") == 0) seed_line = c->ents[i].line;
    if (strcmp(c->ents[i].key, "rounding") == 0) rounding_line = c->ents[i].line;
  }
  fp8_exp_fail(c, seed_line,
               "sr_seed does nothing with rounding = nearest (line %d): it seeds stochastic "
               "rounding's draw, and nearest draws nothing (give rounding = stochastic, or auto "
               "for the gradients alone, or remove sr_seed)",
               rounding_line);
}

/* Absent keys: their default, as a one-value axis. -1 when out of memory (c->nomem set). */
static int recipe_defaults(exp_ctx *c, fp8_recipe_kind kind, recipe_axes *ax) {
  /* TE's recipe classes: DelayedScaling and Float8CurrentScaling default to Format.HYBRID,
   * MXFP8BlockScaling and Float8BlockScaling to Format.E4M3 for every tensor, as do torchao's
   * row-wise recipe and DeepSeek-V3; pow2 defaults to true for block and rowwise (DeepSeek-V3,
   * torchao), false for current */
  /* nvfp4: TE's NVFP4BlockScaling (2-D weights, RHT on, stochastic rounding of gradients);
   * e4m3_max 0 stands for "448, or 256 under 4over6" (TE's defaults), resolved below */
  int64_t defaults[K_COUNT] = {0, FP8_SEL_HYBRID, 1024, 0, FP8_AMAX_MAX, 0, 0, FP8_MX_ROUND_CEIL,
                               kind == FP8_KIND_NVFP4 ? FP8_NVFP4_BLOCK_AUTO : FP8_BLOCK_SHAPE_AUTO,
                               1, FP8_FP4_ROUND_AUTO, FP8_NVFP4_MAX6, 0, 0, 0};
  if (fp8_recipe_kind_is_block(kind)) defaults[K_FORMAT] = FP8_SEL_E4M3;
  defaults[K_POW2] = kind == FP8_KIND_BLOCK || kind == FP8_KIND_ROWWISE;
  for (int k = K_FORMAT; k < K_COUNT; k++) {
    if (ax->vals[k]) continue;
    ax->vals[k] = malloc(sizeof *ax->vals[k]);
    if (!ax->vals[k]) {
      c->nomem = 1;
      return -1;
    }
    ax->vals[k][0] = defaults[k];
    ax->nvals[k] = 1;
  }
  return 0;
}

/* Canonical product order: delayed = format, history_len, margin, amax_compute (last
 * fastest); current = format (its other keys are single values). */
static const int axes_delayed[] = {K_FORMAT, K_HISTORY, K_MARGIN, K_AMAX_COMPUTE};
static const int axes_current[] = {K_FORMAT};

/* Configuration number i of the product into cf (label: the section's). Returns the
 * simulator's parameter check (nonzero: rejected). */
static int recipe_config(fp8_recipe_kind kind, const recipe_axes *ax, size_t i,
                         const char *label, fp8_config *cf) {
  const int *axes = kind == FP8_KIND_DELAYED ? axes_delayed : axes_current;
  size_t naxes = kind == FP8_KIND_DELAYED ? 4 : 1;
  size_t idx[4] = {0}, r = i;
  for (size_t a = naxes; a-- > 0;) {
    idx[a] = r % ax->nvals[axes[a]];
    r /= ax->nvals[axes[a]];
  }
  memset(cf, 0, sizeof *cf);
  snprintf(cf->label, sizeof cf->label, "%s", label);
  cf->kind = kind;
  cf->format = (fp8_format_sel)ax->vals[K_FORMAT][idx[0]];
  if (kind == FP8_KIND_DELAYED) {
    cf->history_len = (int32_t)ax->vals[K_HISTORY][idx[1]];
    cf->margin = (int32_t)ax->vals[K_MARGIN][idx[2]];
    cf->amax_compute = (fp8_amax_compute)ax->vals[K_AMAX_COMPUTE][idx[3]];
    cf->unfused_update = (int)ax->vals[K_UNFUSED][0];
    fp8_delayed_params p = {cf->history_len, cf->margin, cf->amax_compute, FP8_E4M3,
                            cf->unfused_update};
    return fp8_delayed_params_check(&p);
  }
  if (kind == FP8_KIND_CURRENT) {
    cf->margin = (int32_t)ax->vals[K_MARGIN][0];
    cf->amax_epsilon = (float)ax->eps;
    cf->pow2 = (int)ax->vals[K_POW2][0];
    fp8_current_params p = {cf->amax_epsilon, cf->pow2 != 0, cf->margin, FP8_E4M3};
    return fp8_current_params_check(&p);
  }
  cf->pow2 = (int)ax->vals[K_POW2][0];
  if (kind != FP8_KIND_MXFP8 && !fp8_recipe_kind_is_fp4(kind)) cf->amax_epsilon = (float)ax->eps;
  if (kind == FP8_KIND_NVFP4) {
    cf->nvfp4_block = (int)ax->vals[K_BLOCK][0];
    cf->rht = (int)ax->vals[K_RHT][0];
    cf->fp4_rounding = (int)ax->vals[K_FP4_ROUNDING][0];
    cf->fp4_rule = (int)ax->vals[K_BLOCK_SCALE][0];
    int64_t e4 = ax->vals[K_E4M3_MAX][0];
    cf->e4m3_max = e4 ? (float)e4 : cf->fp4_rule == FP8_NVFP4_MAX6 ? 448.0f : 256.0f;
    cf->sr_seed = (uint64_t)ax->vals[K_SR_SEED][0];
  }
  cf->mx_rounding = (int)ax->vals[K_ROUNDING][0];
  cf->block_shape = (int)ax->vals[K_BLOCK][0];
  return 0;
}

/* Appends the product of the section's axes to ex->configs (and format_line to
 * ex->format_lines), within FP8_EXPERIMENT_MAX_CONFIGS for the whole file. */
static void recipe_expand(exp_ctx *c, fp8_recipe_kind kind, const recipe_axes *ax,
                          int format_line, const char *label) {
  fp8_experiment *ex = c->ex;
  const int *axes = kind == FP8_KIND_DELAYED ? axes_delayed : axes_current;
  size_t naxes = kind == FP8_KIND_DELAYED ? 4 : 1;
  size_t count = 1;
  int saturated = 0;
  for (size_t a = 0; a < naxes; a++) {
    count *= ax->nvals[axes[a]];
    if (count > FP8_EXPERIMENT_MAX_CONFIGS) {
      saturated = 1;
      break;
    }
  }
  if (saturated || ex->nconfigs + count > FP8_EXPERIMENT_MAX_CONFIGS) {
    fp8_exp_fail(c, c->sec_line,
                 "too many configurations: [%s] expands to %s%zu, %zu before it; the limit is %d",
                 c->secname, saturated ? "more than " : "",
                 saturated ? (size_t)FP8_EXPERIMENT_MAX_CONFIGS : count, ex->nconfigs,
                 FP8_EXPERIMENT_MAX_CONFIGS);
    return;
  }
  /* Exactly the room this section needs, not fp8_grow's one more element: the whole product
   * is appended at once, and the total is bounded by FP8_EXPERIMENT_MAX_CONFIGS. */
  fp8_config *cfgs = realloc(ex->configs, (ex->nconfigs + count) * sizeof *cfgs);
  if (cfgs) ex->configs = cfgs;
  int *lines = cfgs ? realloc(ex->format_lines, (ex->nconfigs + count) * sizeof *lines) : NULL;
  if (!lines) {
    c->nomem = 1;
    return;
  }
  ex->format_lines = lines;
  for (size_t i = 0; i < count; i++) lines[ex->nconfigs + i] = format_line;
  for (size_t i = 0; i < count; i++)
    if (recipe_config(kind, ax, i, label, &ex->configs[ex->nconfigs + i]) != 0) {
      /* unreachable: every value was range-checked above */
      fp8_exp_fail(c, c->sec_line, "[%s]: parameters rejected by the simulator", c->secname);
      return;
    }
  ex->nconfigs += count;
}

/* The section's tensors key: a comma list of distinct globs (as [trace] tensors). */
static void section_tensors(exp_ctx *c, const exp_entry *e, fp8_recipe_section *sec) {
  fp8_exp_globs(c, e, &sec->globs, &sec->nglobs);
  sec->tensors_line = e->line;
}

/* The section's label key: a recipe label (the characters and length of a [recipe.*] name). */
static void section_label(exp_ctx *c, const exp_entry *e, fp8_recipe_section *sec) {
  size_t n = strlen(e->value);
  if (n > EXP_LABEL_MAX) {
    fp8_exp_fail(c, e->line, "label %s too long (%zu characters, at most %d)", e->value, n,
                 EXP_LABEL_MAX);
    return;
  }
  for (const char *p = e->value; *p; p++)
    if (!isalnum((unsigned char)*p) && *p != '_' && *p != '.' && *p != '-') {
      fp8_exp_fail(c, e->line,
                   "bad character '%c' in label %s (a single recipe label; allowed: A-Z a-z 0-9 "
                   "_ . -)",
                   *p, e->value);
      return;
    }
  snprintf(sec->label, sizeof sec->label, "%s", e->value);
  sec->label_line = e->line;
}

/* Appends sec to ex->sections (its configurations were just appended). -1: out of memory. */
static int section_push(exp_ctx *c, fp8_recipe_section *sec) {
  fp8_experiment *ex = c->ex;
  fp8_recipe_section *ss = realloc(ex->sections, (ex->nsections + 1) * sizeof *ss);
  size_t *cs = ss ? realloc(ex->config_section, (ex->nconfigs + 1) * sizeof *cs) : NULL;
  if (ss) ex->sections = ss;
  if (!cs) {
    c->nomem = 1;
    return -1;
  }
  ex->config_section = cs;
  for (size_t i = sec->first_config; i < sec->first_config + sec->nconfigs; i++)
    cs[i] = ex->nsections;
  ex->sections[ex->nsections++] = *sec;
  memset(sec, 0, sizeof *sec);
  return 0;
}

void fp8_exp_recipe_end(exp_ctx *c) {
  recipe_axes ax;
  memset(&ax, 0, sizeof ax);
  fp8_recipe_section sec;
  memset(&sec, 0, sizeof sec);
  snprintf(sec.name, sizeof sec.name, "%s", c->secname + 7);
  snprintf(sec.label, sizeof sec.label, "%s", sec.name);
  sec.line = c->sec_line;
  fp8_recipe_kind kind;
  if (recipe_kind(c, &kind) != 0) goto done;
  for (size_t i = 0; i < c->nents && !c->nomem; i++) {
    const exp_entry *e = &c->ents[i];
    if (strcmp(e->key, "tensors") == 0) {
      section_tensors(c, e, &sec);
      continue;
    }
    if (strcmp(e->key, "label") == 0) {
      section_label(c, e, &sec);
      continue;
    }
    int k = exp_recipe_key(e->key);
    if (k <= K_KIND) continue;
    if (!(exp_recipe_key_kinds[k] & KIND_BIT(kind))) {
      fp8_exp_fail(c, e->line, "%s is not a key of kind %s", e->key,
                   fp8_recipe_kind_name(kind));
      continue;
    }
    if (recipe_list(c, e, k, kind, &ax) != 0) break;
  }
  if (!c->nomem && c->nfail == c->sec_nfail) sr_seed_check(c, kind, &ax);
  /* a section with any error expands to nothing */
  if (c->nomem || c->nfail != c->sec_nfail) goto done;
  if (recipe_defaults(c, kind, &ax) != 0) goto done;
  int format_line = c->sec_line;
  for (size_t i = 0; i < c->nents; i++)
    if (strcmp(c->ents[i].key, "format") == 0) format_line = c->ents[i].line;
  for (size_t i = 0; i < c->nents && !sec.list_line; i++) {
    int k = exp_recipe_key(c->ents[i].key);
    if (k > K_KIND && ax.nvals[k] > 1) sec.list_line = c->ents[i].line;
  }
  sec.first_config = c->ex->nconfigs;
  recipe_expand(c, kind, &ax, format_line, sec.label);
  sec.nconfigs = c->ex->nconfigs - sec.first_config;
  if (!c->nomem && c->nfail == c->sec_nfail) section_push(c, &sec);
done:
  for (size_t j = 0; j < sec.nglobs; j++) free(sec.globs[j]);
  free(sec.globs);
  for (int k = 0; k < K_COUNT; k++) free(ax.vals[k]);
}

/* Once every section is read: the sections that share a label (one recipe of the outputs).
 * Each must be one configuration (two rows of a tensor with one label and parameters that
 * the key columns may not tell apart), and a section without tensors takes every tensor the
 * earlier ones of its label leave, so no section of the label may follow it. */
void fp8_exp_labels_end(exp_ctx *c) {
  fp8_experiment *ex = c->ex;
  for (size_t i = 0; i < ex->nsections; i++) {
    fp8_recipe_section *s = &ex->sections[i];
    s->label_first = i;
    s->label_count = 0;
    for (size_t j = 0; j < ex->nsections; j++)
      if (strcmp(ex->sections[j].label, s->label) == 0) {
        if (j < s->label_first) s->label_first = j;
        s->label_count++;
      }
  }
  for (size_t i = 0; i < ex->nsections; i++) {
    const fp8_recipe_section *s = &ex->sections[i];
    if (s->label_count < 2) continue;
    const fp8_recipe_section *first = &ex->sections[s->label_first];
    const fp8_recipe_section *other = first != s ? first : NULL;
    for (size_t j = 0; !other && j < ex->nsections; j++)
      if (j != i && strcmp(ex->sections[j].label, s->label) == 0) other = &ex->sections[j];
    if (s->nconfigs > 1)
      fp8_exp_fail(c, s->list_line ? s->list_line : s->line,
                   "[recipe.%s] shares the recipe label %s with [recipe.%s] (line %d), so it "
                   "must be one configuration, but it expands to %zu: each tensor has one row "
                   "per step under a label (sweep in sections of their own labels)",
                   s->name, s->label, other->name, other->line, s->nconfigs);
    for (size_t j = s->label_first; j < i; j++) {
      const fp8_recipe_section *p = &ex->sections[j];
      if (strcmp(p->label, s->label) == 0 && p->nglobs == 0) {
        fp8_exp_fail(c, s->line,
                     "[recipe.%s] can take no tensor: [recipe.%s] (line %d) comes before it "
                     "with the label %s and has no tensors key, so it takes every tensor (give "
                     "the section that takes the rest last)",
                     s->name, p->name, p->line, s->label);
        break;
      }
    }
  }
}
