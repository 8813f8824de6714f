/* run_unserved.c: what a run without snapshot rows cannot serve of its experiment (a trace of
 * amaxes alone: amax.csv without snapshots, TransformerEngine's debug logs through import-te;
 * docs/semantics.md, "What a trace of amaxes alone cannot serve"). Such a run replays the
 * amaxes through its delayed configurations only (the stream); everything that casts, counts
 * or multiplies the tensors' values has nothing to act on:
 *   - every [recipe.*] section whose kind is not delayed (current, mxfp8, block, rowwise,
 *     nvfp4, mxfp4, bf16): no rows;
 *   - the [analysis] keys the file gives whose effect needs the values or the snapshots'
 *     shapes: overflow_budget (the value budget), flush_budget, fp4_gemm_ratio, gemm = true and
 *     the GEMM error's keys, cost_tokens (the cost section's GEMM shapes). step_budget,
 *     warmup_steps and routers act on the stream and are served, as gemm = false (it asks for
 *     nothing).
 * run.json records the list (unserved), fp8lab run names each entry on stderr, the report in
 * its first paragraph: none is dropped silently.
 */
#include "runner_internal.h"

#include <stdlib.h>
#include <string.h>

/* Why a section of kind k has no rows without the values (every kind but delayed). */
static const char *kind_why(fp8_recipe_kind k) {
  switch (k) {
  case FP8_KIND_CURRENT:
    return "current scaling takes each step's scale from that step's own amax, so its largest "
           "element never clips (the report's fallback says so), but what it flushes to zero "
           "and its SNR need the tensors' values: no rows";
  case FP8_KIND_MXFP8:
    return "MXFP8 scales each block of 32 values by that block's own amax, which needs the "
           "tensors' values: no rows";
  case FP8_KIND_BLOCK:
    return "block scaling takes a scale per 1x128 or 128x128 block from that block's own amax, "
           "which needs the tensors' values: no rows";
  case FP8_KIND_ROWWISE:
    return "row-wise scaling takes a scale per row from that row's own amax, which needs the "
           "tensors' values: no rows";
  case FP8_KIND_NVFP4:
    return "NVFP4 scales each block of 16 values and casts them to E2M1, which needs the "
           "tensors' values: no rows, and no FP4 section";
  case FP8_KIND_MXFP4:
    return "MXFP4 scales each block of 32 values and casts them to E2M1, which needs the "
           "tensors' values: no rows, and no FP4 section";
  case FP8_KIND_BF16:
    return "a BF16 section's rows (values flushed to zero, SNR) and the flush budget's advice "
           "to keep a tensor in BF16 need the tensors' values: no rows";
  case FP8_KIND_DELAYED:
  case FP8_KIND_MIXED: /* no section's */
    break;
  }
  return NULL;
}

/* Why [analysis] key k, given in the file, has nothing to act on; NULL: it acts on the
 * stream (or, gemm = false, asks for nothing). */
static const char *key_why(const fp8_experiment *ex, int k) {
  switch ((fp8_exp_analysis_key)k) {
  case FP8_EXP_AKEY_OVERFLOW_BUDGET:
    return "the value budget counts the values that clip at the snapshot steps: without them "
           "the advice is decided by the step budget alone";
  case FP8_EXP_AKEY_FLUSH_BUDGET:
    return "it counts the values a configuration flushes to zero, which needs the tensors' "
           "values: no tensor is advised current scaling or BF16 by it";
  case FP8_EXP_AKEY_FP4_GEMM_RATIO:
    return "it compares the FP4 configurations' GEMM errors with FP8's, which need the "
           "tensors' values: no FP4 section";
  case FP8_EXP_AKEY_GEMM:
    return ex->gemm ? "the GEMM error casts each layer's input, weight and grad_output and "
                      "multiplies them, which needs the tensors' values: no gemm.csv"
                    : NULL;
  case FP8_EXP_AKEY_GEMM_ERROR:
  case FP8_EXP_AKEY_GEMM_SAMPLE:
  case FP8_EXP_AKEY_GEMM_SEED:
  case FP8_EXP_AKEY_GEMM_MAX_TOKENS:
  case FP8_EXP_AKEY_TENSOR_CORE:
    return "it sets how the GEMM error is computed, which needs the tensors' values: no "
           "gemm.csv";
  case FP8_EXP_AKEY_COST_TOKENS:
    return "the cost section models each Linear layer's GEMMs from the shapes of the "
           "snapshots, which the trace does not have: no cost section";
  case FP8_EXP_AKEY_STEP_BUDGET:
  case FP8_EXP_AKEY_WARMUP_STEPS:
  case FP8_EXP_AKEY_ROUTERS:
  case FP8_EXP_AKEY_COUNT:
    break;
  }
  return NULL;
}

int run_unserved(run_t *r) {
  const fp8_experiment *ex = r->ex;
  free(r->unserved);
  r->unserved = NULL;
  r->nunserved = 0;
  r->unserved_done = 1;
  if (r->rows > 0) return FP8_OK; /* snapshot rows: every section and key had values */
  size_t cap = ex->nsections + FP8_EXP_AKEY_COUNT;
  if (!(r->unserved = calloc(cap + 1, sizeof *r->unserved))) return FP8_ENOMEM;
  /* file order: the sections and the keys by line */
  for (size_t i = 0; i < ex->nsections; i++) {
    const fp8_recipe_section *s = &ex->sections[i];
    fp8_recipe_kind kind = s->nconfigs ? ex->configs[s->first_config].kind : FP8_KIND_DELAYED;
    const char *why = kind_why(kind);
    if (!why) continue;
    fp8_unserved *u = &r->unserved[r->nunserved++];
    snprintf(u->section, sizeof u->section, "recipe.%s", s->name);
    snprintf(u->label, sizeof u->label, "%s", s->label);
    snprintf(u->kind, sizeof u->kind, "%s", fp8_recipe_kind_name(kind));
    u->configurations = (long long)s->nconfigs;
    u->line = s->line;
    snprintf(u->why, sizeof u->why, "%s", why);
  }
  for (int k = 0; k < FP8_EXP_AKEY_COUNT; k++) {
    const char *why = ex->analysis_line[k] ? key_why(ex, k) : NULL;
    if (!why) continue;
    fp8_unserved *u = &r->unserved[r->nunserved++];
    snprintf(u->section, sizeof u->section, "analysis");
    snprintf(u->key, sizeof u->key, "%s", fp8_experiment_analysis_keys[k]);
    u->line = ex->analysis_line[k];
    snprintf(u->why, sizeof u->why, "%s", why);
  }
  /* by line: the [analysis] section may come before the recipes (a stable insertion sort) */
  for (size_t i = 1; i < r->nunserved; i++)
    for (size_t j = i; j > 0 && r->unserved[j - 1].line > r->unserved[j].line; j--) {
      fp8_unserved t = r->unserved[j];
      r->unserved[j] = r->unserved[j - 1];
      r->unserved[j - 1] = t;
    }
  return FP8_OK;
}
