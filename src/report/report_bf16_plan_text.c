/* report_bf16_plan_text.c: the report's section "Keeping layers in BF16" (rep_add_bf16_plan,
 * report_internal.h): the BF16 demotion plans of report_bf16_plan.c as a table per plan, each
 * step with the layer it keeps in BF16, what ranked it, the share of the GEMM FLOPs then in
 * BF16 and what is still missing, and where the same plan is in the frameworks' forms. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report_internal.h"

#define SHOWN_STEPS 30 /* the table's steps; bf16_plan.csv has every one */
#define SHOWN_NAMES 4  /* names in a cell, then a count */

static const char *share_text(double v, char *b, size_t n) {
  if (isnan(v)) snprintf(b, n, "n/a");
  else snprintf(b, n, "%.3g%%", 100.0 * v);
  return b;
}

static const char *ratio_text(double v, char *b, size_t n) {
  if (isnan(v)) snprintf(b, n, "n/a");
  else snprintf(b, n, "%.2fx", v);
  return b;
}

/* What is still missing after step k: the count, then up to SHOWN_NAMES names. */
static void left_text(const rep_plan *p, size_t k, char *b, size_t n) {
  size_t left = k ? p->steps[k - 1].left : p->nmiss, at = 0, shown = 0;
  int w = snprintf(b, n, "%zu%s", left, left ? ": " : " (none)");
  at = w > 0 ? (size_t)w : 0;
  for (size_t i = 0; i < p->nmiss && shown < SHOWN_NAMES && at < n; i++) {
    if (p->miss_step[i] <= k) continue;
    w = snprintf(b + at, n - at, "%s%s", shown++ ? ", " : "", p->miss[i]);
    if (w > 0) at += (size_t)w;
  }
  if (left > shown && at < n) snprintf(b + at, n - at, " and %zu more", left - shown);
}

/* The plan's table: step 0 (nothing in BF16), then each step (the first SHOWN_STEPS and the
 * last). */
static void plan_table(const rep_t *r, fp8_doc *d, const rep_plan *p, int which) {
  const char *h8[] = {"step", "layer added to BF16", "clipped steps", "clipped values",
                      "GEMM error ratio", "GEMM FLOPs in BF16", "tensors still missing the budgets"};
  const char *h4[] = {"step", "layer added to BF16", "GEMM error ratio", "verdict", "GEMM FLOPs in BF16",
                      "layers that still do not hold"};
  const int fp8 = which == REP_PLAN_FP8;
  fp8_doc_table_begin(d, fp8 ? 7 : 6, fp8 ? h8 : h4, fp8 ? "rlrrrrl" : "rlrlrl");
  char c[7][1200];
  for (size_t k = 0; k <= p->nsteps; k++) {
    if (k > SHOWN_STEPS && k < p->nsteps) continue;
    const rep_plan_step *s = k ? &p->steps[k - 1] : NULL;
    snprintf(c[0], sizeof c[0], "%zu", k);
    snprintf(c[1], sizeof c[1], "%.*s", s ? (int)s->len : 4, s ? s->name : "none");
    share_text(s ? s->share : r->run.has_model_shape ? 0.0 : NAN, c[5], sizeof c[5]);
    left_text(p, k, c[6], sizeof c[6]);
    if (fp8) {
      snprintf(c[2], sizeof c[2], s ? "%lld" : "", s ? (long long)s->clipped_steps : 0LL);
      snprintf(c[3], sizeof c[3], s ? "%lld" : "", s ? (long long)s->clipped_values : 0LL);
      if (s) ratio_text(s->ratio, c[4], sizeof c[4]);
      else c[4][0] = '\0';
      const char *cells[] = {c[0], c[1], c[2], c[3], c[4], c[5], c[6]};
      fp8_doc_table_row(d, cells);
    } else {
      if (s) ratio_text(s->ratio, c[2], sizeof c[2]);
      else c[2][0] = '\0';
      snprintf(c[3], sizeof c[3], "%s", !s ? "" : s->fails ? "fails" : "too close to call");
      const char *cells[] = {c[0], c[1], c[2], c[3], c[5], c[6]};
      fp8_doc_table_row(d, cells);
    }
  }
  if (p->nsteps > SHOWN_STEPS + 1)
    fp8_doc_markdownf(d, "Steps %d to %zu are in bf16_plan.csv.", SHOWN_STEPS + 1, p->nsteps - 1);
}

/* The steps Megatron-LM's first/last flags can express (whole transformer blocks at the ends). */
static void megatron_words(const rep_plan *p, int delayed, char *b, size_t n) {
  int w = snprintf(b, n, "Megatron-LM's --first-last-layers-bf16 expresses the steps whose layers "
                   "are whole transformer blocks at the model's ends");
  size_t at = w > 0 ? (size_t)w : 0, shown = 0, more = 0;
  for (size_t k = 0; k < p->nsteps && at < n; k++) {
    const rep_plan_step *s = &p->steps[k];
    if (s->mg_start < 0) continue;
    if (shown == SHOWN_NAMES) {
      more++;
      continue;
    }
    w = snprintf(b + at, n - at, "%s step %zu (--num-layers-at-start-in-bf16 %d "
                 "--num-layers-at-end-in-bf16 %d)", shown++ ? "," : ":", k + 1, s->mg_start,
                 s->mg_end);
    if (w > 0) at += (size_t)w;
  }
  if (!shown)
    snprintf(b, n, "no step's layers are whole transformer blocks at the model's ends: "
             "Megatron-LM's per-module file expresses the plan, not its first/last-layer flags");
  else if (more && at < n)
    at += (size_t)snprintf(b + at, n - at, " and %zu more", more);
  if (shown && delayed && at < n)
    snprintf(b + at, n - at, ", but Megatron-LM refuses it with delayed scaling (\"Delayed "
             "scaling does not support first / last layer in BF16.\"): its per-module file "
             "expresses the plan");
}

static void fp8_part(const rep_t *r, fp8_doc *d, const rep_plan *p) {
  const fp8_recommendation *x = p->x;
  char ref[480] = "";
  if (p->ref >= 0)
    snprintf(ref, sizeof ref, ", then the layer's GEMM-error ratio to %s's (per GEMM the lower "
             "median over the snapshot steps of the two errors' quotient; the largest of its "
             "GEMMs)", r->cfgs[p->ref].dlabel);
  fp8_doc_heading(d, 3, "FP8: under the answer's setting");
  if (!p->nsteps) {
    fp8_doc_markdownf(d, "The answer's setting (%s) fits every tensor: no layer needs BF16.",
                      r->cfgs[p->cfg].dlabel);
    return;
  }
  fp8_doc_markdownf(d, "Under the answer's whole-model setting alone (DelayedScaling, history_len "
                    "%d, margin %d, %s; no per-tensor fix), %zu tensor%s of %lld miss the budgets, "
                    "in %zu layer%s. They are kept in BF16 one at a time, costliest first: the "
                    "clipped steps of the layer's tensors under that setting (warm-up left out), "
                    "then their clipped values at the snapshot steps%s. The answer fixes these "
                    "tensors module by module (advice.ini: a larger margin, current scaling or "
                    "BF16); this plan is the other way: the one setting for the rest of the "
                    "model, and these layers out of FP8.",
                    (int)x->key.history_len, (int)x->key.margin,
                    fp8_amax_compute_name(x->key.amax_compute), p->nmiss,
                    p->nmiss == 1 ? "" : "s", (long long)x->of, p->nsteps,
                    p->nsteps == 1 ? "" : "s", ref);
  plan_table(r, d, p, REP_PLAN_FP8);
  char b[1200], sh[32];
  megatron_words(p, 1, b, sizeof b);
  fp8_doc_markdownf(d, "Step %zu brings every tensor within the budgets with %s of the GEMM FLOPs "
                    "in BF16. Each tensor's fit is its own (its cast and its delayed history), so "
                    "a step changes no other tensor's rows and what is left is read off the "
                    "whole-model replay; %s.",
                    p->nsteps, share_text(p->steps[p->nsteps - 1].share, sh, sizeof sh), b);
}

static void fp4_part(const rep_t *r, fp8_doc *d, const rep_plan *p) {
  fp8_doc_heading(d, 3, "FP4: under the advised NVFP4 configuration");
  char none[200] = "";
  if (p->nnone)
    snprintf(none, sizeof none, " (%zu without a ratio, left out: no verdict)", p->nnone);
  if (!p->nsteps) {
    fp8_doc_markdownf(d, "Every layer holds under %s%s: none needs BF16.", r->cfgs[p->cfg].dlabel,
                      none);
    return;
  }
  fp8_doc_markdownf(d, "Under %s (the NVFP4 configuration the FP4 section advises) %zu layer%s "
                    "do%s not hold%s: a GEMM fails when fewer than half of its snapshot steps "
                    "keep its error within %g times %s's, or is too close to call. They are kept "
                    "in BF16 one at a time, the largest ratio first (the lower median over the "
                    "snapshot steps of the layer's worst GEMM).",
                    r->cfgs[p->cfg].dlabel, p->nsteps, p->nsteps == 1 ? "" : "s",
                    p->nsteps == 1 ? "es" : "", none, r->run.fp4_gemm_ratio,
                    p->ref >= 0 ? r->cfgs[p->ref].dlabel : "the FP8 reference");
  plan_table(r, d, p, REP_PLAN_FP4);
  char b[1200], sh[32];
  megatron_words(p, 0, b, sizeof b);
  fp8_doc_markdownf(d, "Step %zu leaves every other layer holding, with %s of the GEMM FLOPs in "
                    "BF16; %s.", p->nsteps,
                    share_text(p->steps[p->nsteps - 1].share, sh, sizeof sh), b);
}

void rep_add_bf16_plan(const rep_t *r, fp8_doc *d) {
  const rep_plan *p8 = rep_bf16_plan(r, REP_PLAN_FP8), *p4 = rep_bf16_plan(r, REP_PLAN_FP4);
  if (!p8 && !p4) return;
  fp8_doc_heading(d, 2, "Keeping layers in BF16");
  char ini[400] = ""; /* the labels bf16_plan.ini holds */
  if (r->wrote_plan & 2)
    snprintf(ini, sizeof ini, "; bf16_plan.ini replays each step (`fp8lab run bf16_plan.ini`: "
             "label %s%s%s keeps the first k layers in BF16)",
             r->wrote_plan & 512 ? "fp8_plan_<k>" : "",
             (r->wrote_plan & 1536) == 1536 ? " or " : "", r->wrote_plan & 1024 ? "fp4_plan_<k>" : "");
  fp8_doc_markdownf(d, "Which layers to keep out of %s so that the rest meets the budgets: each "
                    "plan keeps one layer more in BF16 at each step, costliest first, until "
                    "nothing is left missing: step k keeps the layers of steps 1 to k. A layer is a module as TransformerEngine applies a "
                    "recipe to it (a Linear; the experts of a GroupedLinear are one). A step's "
                    "share is that of the model's GEMM FLOPs then computed in BF16 (three GEMMs "
                    "of 2 x tokens x in x out per Linear, the trace's shapes)%s. bf16_plan.csv "
                    "has every step%s.",
                    p8 && p4 ? "FP8, and out of FP4," : p8 ? "FP8" : "FP4",
                    r->run.has_model_shape ? "" : "; this trace records no Linear shapes (n/a)",
                    ini);
  if (p8) fp8_part(r, d, p8);
  if (p4) fp4_part(r, d, p4);
  if (r->run.reduce_amax)
    fp8_doc_markdown(d, "Amax reduction (reduce_amax): a tensor's amax is reduced with the same "
                        "tensor's on the other ranks of its group, and a layer leaves FP8 on "
                        "every rank at once (its name has no rank prefix), so no tensor left in "
                        "FP8 shares a reduction with one in BF16: the steps' counts hold under it.");
  char files[600];
  size_t at = 0;
  static const struct {
    int bit;
    const char *name;
  } fw[] = {{4, "megatron_bf16_plan_fp8.txt"}, {8, "megatron_bf16_plan_fp8.yaml"},
            {16, "megatron_bf16_plan_fp4.txt"}, {32, "megatron_bf16_plan_fp4.yaml"},
            {64, "torchao_bf16_plan.py"}, {128, "te_bf16_plan.py"}};
  files[0] = '\0';
  for (size_t i = 0; i < sizeof fw / sizeof *fw && at < sizeof files; i++) {
    if (!(r->wrote_plan & fw[i].bit)) continue;
    int w = snprintf(files + at, sizeof files - at, "%s%s", at ? ", " : "", fw[i].name);
    if (w > 0) at += (size_t)w;
  }
  if (at)
    fp8_doc_markdownf(d, "The same plans for Megatron-LM, torchao and TransformerEngine, each "
                         "file saying what it cannot express: %s.", files);
}
