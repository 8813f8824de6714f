/* report_answer.c: the report's first section (rep_add_answer, report_internal.h): the one
 * TransformerEngine recipe to use for the whole model (the model-scope recommendation), the
 * tensors it is not enough for and what to do for each (a larger margin this sweep tried, or
 * current scaling for that module), how the answer moves when both budgets are 10x tighter or
 * looser, and what the sweep did not try. tests/report/test_findings.py recomputes the setting
 * from the CSVs. */
#include "report_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static const fp8_recommendation *model_rec(const fp8_recommendations *rec) {
  for (size_t i = 0; i < rec->nrecs; i++)
    if (rec->recs[i].scope == FP8_REC_MODEL) return &rec->recs[i];
  return NULL;
}

/* The groups of tensor `name` (contiguous in the analysis, whose groups are in tensor-name order,
 * strcmp): [*lo, *hi), found by bisection (called once per misfit: tens of thousands of expert
 * tensors at a Mixture-of-Experts model's size). */
static void tensor_groups(const rep_t *r, const char *name, size_t *lo, size_t *hi) {
  size_t a = 0, b = r->an.nstats; /* the first group whose tensor is >= name */
  while (a < b) {
    size_t m = a + (b - a) / 2;
    if (strcmp(r->an.stats[m].group->tensor, name) < 0) a = m + 1;
    else b = m;
  }
  size_t i = a;
  if (i < r->an.nstats && strcmp(r->an.stats[i].group->tensor, name) != 0) i = r->an.nstats;
  *lo = i;
  while (i < r->an.nstats && strcmp(r->an.stats[i].group->tensor, name) == 0) i++;
  *hi = i;
}

static int fits(const fp8_group_stats *s, const fp8_budgets *b) { return fp8_budgets_fit(b, s); }

/* a and b on one line of the sweep: the same setting but for format and margin */
static int same_line(const fp8_config_key *a, const fp8_config_key *b) {
  return fp8_config_key_equal(a, b, FP8_KEY_IGNORE_FORMAT | FP8_KEY_IGNORE_MARGIN);
}

/* What to do for a tensor the model setting x does not fit (rep_remedy, report_internal.h):
 * the smallest larger margin on x's line that fits it; else current scaling, unless every
 * current configuration of the tensor misses the budgets (the flush budget: current scaling
 * never clips) and the sweep kept it in BF16 (kind bf16: fits every budget). */
int32_t rep_remedy(const rep_t *r, const fp8_recommendation *x, const char *name) {
  size_t lo, hi;
  tensor_groups(r, name, &lo, &hi);
  int32_t best = -1;
  int cur = 0, cur_fits = 0, keep = 0;
  for (size_t i = lo; i < hi; i++) {
    const fp8_group_stats *s = &r->an.stats[i];
    const fp8_steps_group *g = s->group;
    if (g->key.kind == FP8_KIND_CURRENT) cur = 1, cur_fits |= fits(s, &r->rec.budgets);
    keep |= g->key.kind == FP8_KIND_BF16;
    if (g->key.kind != FP8_KIND_DELAYED || !same_line(&g->key, &x->key) ||
        g->key.margin <= x->key.margin || !fits(s, &r->rec.budgets))
      continue;
    if (best < 0 || g->key.margin < best) best = g->key.margin;
  }
  if (best >= 0) return best;
  int flush = r->rec.budgets.has_flush && !r->rec.budgets.stream_only;
  return flush && keep && (!cur || !cur_fits) ? REP_REMEDY_BF16 : REP_REMEDY_CURRENT;
}

const fp8_recommendation *rep_model_rec(const rep_t *r) { return model_rec(&r->rec); }

size_t rep_module_len(const char *tensor) {
  const char *dot = strrchr(tensor, '.');
  return dot ? (size_t)(dot - tensor) : strlen(tensor);
}

/* The largest margin the sweep tried on x's line. */
static int32_t largest_margin(const rep_t *r, const fp8_recommendation *x) {
  int32_t m = x->key.margin;
  for (size_t i = 0; i < r->an.nstats; i++) {
    const fp8_steps_group *g = r->an.stats[i].group;
    if (g->key.kind == FP8_KIND_DELAYED && same_line(&g->key, &x->key) && g->key.margin > m)
      m = g->key.margin;
  }
  return m;
}

/* The format of the setting: hybrid when its tensors are E4M3 and E5M2, else the one format
 * (the groups of the setting's own kind: a current-scaling answer's are current scaling's). */
static fp8_format_sel setting_format(const rep_t *r, const fp8_recommendation *x) {
  int e4 = 0, e5 = 0;
  for (size_t i = 0; i < r->an.nstats; i++) {
    const fp8_steps_group *g = r->an.stats[i].group;
    if (g->key.kind != x->key.kind ||
        !fp8_config_key_equal(&g->key, &x->key, FP8_KEY_IGNORE_FORMAT))
      continue;
    e4 |= g->key.format == FP8_E4M3;
    e5 |= g->key.format == FP8_E5M2;
  }
  return e4 && e5 ? FP8_SEL_HYBRID : e5 ? FP8_SEL_E5M2 : FP8_SEL_E4M3;
}

/* TE's name of that format (its recipe.Format members). */
static const char *te_format(const rep_t *r, const fp8_recommendation *x) {
  static const char *const te[] = {[FP8_SEL_E4M3] = "E4M3", [FP8_SEL_E5M2] = "E5M2",
                                   [FP8_SEL_HYBRID] = "HYBRID"};
  return te[setting_format(r, x)];
}

const char *rep_te_format(const rep_t *r, const fp8_recommendation *x) {
  return te_format(r, x);
}

const char *rep_setting_format(const rep_t *r, const fp8_recommendation *x) {
  return fp8_format_sel_name(setting_format(r, x));
}

static void answer_misfits(const rep_t *r, fp8_doc *d, const fp8_recommendation *x, int *binding) {
  fp8_doc_markdownf(d, "It is not enough for %zu tensor%s. For each, what fits it: the smallest "
                    "larger margin at the same history length that this sweep tried, else current "
                    "scaling (Float8CurrentScaling) for that module%s:", x->nmisfits,
                    x->nmisfits == 1 ? "" : "s",
                    r->rec.budgets.has_flush && !r->rec.budgets.stream_only
                        ? ", else (where current scaling misses the flush budget and the sweep "
                          "has a bf16 section) the whole module kept in BF16"
                        : "");
  const char *hdr[] = {"tensor", "role", "what to do"};
  fp8_doc_table_begin(d, 3, hdr, "lll");
  for (size_t k = 0; k < x->nmisfits; k++) {
    const char *name = x->misfits[k];
    size_t lo, hi;
    tensor_groups(r, name, &lo, &hi);
    int32_t m = rep_remedy(r, x, name);
    char what[256];
    if (m >= 0) {
      snprintf(what, sizeof what, "margin %d", (int)m);
    } else if (m == REP_REMEDY_BF16) {
      snprintf(what, sizeof what, "BF16 for module %.*s (current scaling misses the flush budget)",
               (int)rep_module_len(name), name);
      (*binding)++;
    } else {
      snprintf(what, sizeof what, "current scaling");
      (*binding)++;
    }
    const char *cells[] = {name, lo < hi ? fp8_rec_role_name(r->an.stats[lo].group->role) : "",
                           what};
    fp8_doc_table_row(d, cells);
  }
}

/* The budgets' resolution (issue 42 point 3): a budget below 1/N, N the most casts a tensor's
 * rate is counted over (the step budget: the non-warm-up stream steps or micro-batches it ran,
 * else its non-warm-up snapshot rows; the value budget: its finite values at the non-warm-up
 * snapshot rows), allows no clipped step (value) for any tensor: say so, with 1/N, the
 * smallest budget the run resolves. Empty when both budgets resolve (or are 0: none by name). */
static void budget_counts(const rep_t *r, int64_t *nsteps, int64_t *nvalues) {
  *nsteps = *nvalues = 0;
  for (size_t g = 0; g < r->tab.ngroups && r->have_an; g++) {
    const fp8_group_stats *s = &r->an.stats[g];
    if (s->group->key.kind != FP8_KIND_DELAYED) continue;
    int64_t k = s->stream_steps >= 0 ? s->stream_steps : s->steps - s->warmup_steps;
    if (k > *nsteps) *nsteps = k;
    if (s->finite > *nvalues) *nvalues = s->finite;
  }
}

void rep_budget_resolution(const rep_t *r, char *buf, size_t n) {
  int64_t nsteps, nvalues;
  budget_counts(r, &nsteps, &nvalues);
  size_t len = 0;
  buf[0] = '\0';
  const double bs = r->rec.budgets.step, bv = r->rec.budgets.value;
  if (nsteps > 0 && bs > 0 && bs < 1.0 / (double)nsteps)
    len += (size_t)snprintf(buf, n, "The step budget %.3g is below 1/%lld = %.3g (%lld: the most "
                            "%s%s a tensor ran, warm-up left out): it allows no clipped %s at "
                            "all; the smallest step budget this run resolves is %.3g.",
                            bs, (long long)nsteps, 1.0 / (double)nsteps, (long long)nsteps,
                            r->have_stream ? rep_unit(r, 1) : "snapshot steps",
                            r->have_stream ? " of the replay" : "",
                            r->have_stream ? rep_unit(r, 0) : "step", 1.0 / (double)nsteps);
  if (!r->stream_only && nvalues > 0 && bv > 0 && bv < 1.0 / (double)nvalues && len < n)
    snprintf(buf + len, n - len, "%sThe value budget %.3g is below 1/%lld = %.3g (%lld: the most "
             "finite values of a tensor at the snapshot steps, warm-up left out): it allows no "
             "clipped value at all; the smallest value budget this run resolves is %.3g.",
             len ? " " : "", bv, (long long)nvalues, 1.0 / (double)nvalues, (long long)nvalues,
             1.0 / (double)nvalues);
}

/* Whether tensor t is a Mixture-of-Experts router left out of the advice (rep_moe_routers). */
static int is_router(const rep_t *r, const char *t) {
  for (size_t g = 0; r->router_group && g < r->an.nstats; g++)
    if (r->router_group[g] && strcmp(r->an.stats[g].group->tensor, t) == 0) return 1;
  return 0;
}

/* The model setting under budgets scaled by f (both). */
static int sensitivity_row(const rep_t *r, fp8_doc *d, double f) {
  fp8_budgets b = r->rec.budgets; /* the flush budget stays: the two clipping budgets scale */
  b.value *= f;
  b.step *= f;
  if (b.step > 1.0) b.step = 1.0;
  if (b.value > 1.0) b.value = 1.0;
  fp8_recommendations rec;
  char err[256];
  if (fp8_analysis_recommend(&r->an, &b, &rec, err, sizeof err) != FP8_OK) return FP8_ENOMEM;
  const fp8_recommendation *x = model_rec(&rec);
  char c[4][160];
  if (r->stream_only) /* the step budget alone */
    snprintf(c[0], sizeof c[0], "%s%g", f == 1.0 ? "**" : "", b.step);
  else
    snprintf(c[0], sizeof c[0], "%s%g, %g", f == 1.0 ? "**" : "", b.value, b.step);
  if (f == 1.0) strcat(c[0], "** (this report)");
  int64_t nsteps, nvalues; /* a scaled budget below the run's resolution allows none at all */
  budget_counts(r, &nsteps, &nvalues);
  int sb = nsteps > 0 && b.step > 0 && b.step < 1.0 / (double)nsteps;
  int vb = !r->stream_only && nvalues > 0 && b.value > 0 && b.value < 1.0 / (double)nvalues;
  if (sb || vb) {
    size_t len = strlen(c[0]);
    if (sb && vb)
      snprintf(c[0] + len, sizeof c[0] - len, " (both below 1/%lld and 1/%lld: none at all)",
               (long long)nvalues, (long long)nsteps);
    else
      snprintf(c[0] + len, sizeof c[0] - len, " (%s budget below 1/%lld: none at all)",
               sb ? "step" : "value", (long long)(sb ? nsteps : nvalues));
  }
  if (!x || !x->in_run || x->key.kind != FP8_KIND_DELAYED)
    snprintf(c[1], sizeof c[1], "none: current scaling");
  else
    snprintf(c[1], sizeof c[1], "history_len %d, margin %d, %s", (int)x->key.history_len,
             (int)x->key.margin, fp8_amax_compute_name(x->key.amax_compute));
  snprintf(c[2], sizeof c[2], "%lld of %lld", x ? (long long)x->covers : 0LL, x ? (long long)x->of : 0LL);
  size_t ncur = 0; /* the routers kept in BF16 are out of the advice: not counted here either */
  for (size_t i = 0; i < rec.ntensor_recs; i++)
    ncur += !rec.recs[i].meets_budget && !is_router(r, rec.recs[i].name);
  snprintf(c[3], sizeof c[3], "%zu", ncur);
  const char *cells[] = {c[0], c[1], c[2], c[3]};
  fp8_doc_table_row(d, cells);
  fp8_recommendations_free(&rec);
  return FP8_OK;
}

/* A mixed recipe (one label, sections by tensor: e.g. advice.ini's) confirmed or not: the
 * tensors whose own section fits the budgets (current scaling always does: the budgets do not
 * apply to it). */
static void answer_mixed(const rep_t *r, fp8_doc *d) {
  for (size_t c = 0; c < r->ncfg; c++) {
    const cfg_t *m = &r->cfgs[c];
    if (!m->mixed) continue;
    int64_t n = 0, fit = 0;
    for (size_t g = 0; g < r->tab.ngroups; g++) {
      if (r->gcfg[g] != c) continue;
      const fp8_group_stats *s = &r->an.stats[g];
      n++;
      const fp8_budgets *b = &r->rec.budgets;
      fp8_recipe_kind k = s->group->key.kind;
      fit += k == FP8_KIND_DELAYED ? fits(s, b)
           : k == FP8_KIND_CURRENT && b->has_flush && !b->stream_only ? s->underflow_rate <= b->flush
                                                                     : 1;
    }
    char snr[200] = "";
    if (r->rec.budgets.has_flush && !r->rec.budgets.stream_only)
      snprintf(snr, sizeof snr, "; flush_budget %.3g of the values flushed to zero, the one "
               "budget current scaling can miss; a tensor kept in BF16 (kind bf16) casts nothing "
               "and fits them all",
               r->rec.budgets.flush);
    fp8_doc_markdownf(d, "The mixed recipe **%s** (a setting per tensor, its sections' `tensors`): "
                      "**%lld of %lld tensors** within the budgets of this run's [analysis] "
                      "(overflow_budget %.3g of the values clipped, step_budget %.3g of the %s%s; "
                      "an advice.ini carries those it was derived under; current scaling never "
                      "clips, so the two rates do not apply to it)%s.", m->key.recipe,
                      (long long)fit, (long long)n, r->budgets.value, r->budgets.step,
                      rep_unit(r, 1), snr, fit == n ? ": the advice holds on this replay" : "");
  }
}

static void answer_resolution(const rep_t *r, fp8_doc *d) {
  char res[800];
  rep_budget_resolution(r, res, sizeof res);
  if (res[0]) fp8_doc_markdown(d, res);
}

void rep_add_answer(const rep_t *r, fp8_doc *d) {
  const fp8_recommendation *x = model_rec(&r->rec);
  fp8_doc_heading(d, 2, "The answer");
  answer_mixed(r, d);
  if (!x || !x->in_run || x->key.kind != FP8_KIND_DELAYED || !x->meets_budget) {
    fp8_doc_markdownf(d, "No delayed-scaling setting of this sweep fits the budgets (%.3g of the "
                      "values clipped at the snapshot steps, the largest element clipped at %.3g of "
                      "the steps) for any tensor: use current scaling (Float8CurrentScaling), or "
                      "sweep larger margins.", r->rec.budgets.value, r->rec.budgets.step);
    answer_resolution(r, d);
    return;
  }
  fp8_doc_markdownf(d, "One TransformerEngine recipe for the whole model (a DelayedScaling recipe "
                    "takes one history length and one margin for every tensor):");
  fp8_doc_markdownf(d, "```python\nrecipe = DelayedScaling(fp8_format=Format.%s, amax_history_len=%d, "
                    "margin=%d, amax_compute_algo=\"%s\")\n```",
                    te_format(r, x), (int)x->key.history_len, (int)x->key.margin,
                    fp8_amax_compute_name(x->key.amax_compute));
  const char *why = x->decided_by ? x->decided_by : "";
  const char *words = strcmp(why, "fits") == 0 ? "no other setting fits as many"
                    : strcmp(why, "p5 SNR") == 0
                        ? "of the settings that fit as many, it has the best 5th-percentile SNR"
                    : strcmp(why, "underflow rate") == 0
                        ? "of the settings that fit as many with the same 5th-percentile SNR "
                          "(within 0.05 dB), it flushes the fewest values to zero"
                    : strcmp(why, "parameters") == 0
                        ? "the settings that fit as many tie on SNR and underflow: it is the one "
                          "with the shortest history and smallest margin"
                        : "it is the only setting that fits this many";
  if (r->stream_only)
    fp8_doc_markdownf(d, "It fits the step budget (its largest element clipped at no more than "
                      "%.3g of the %s it ran; warm-up left out; no snapshots, so no value budget) "
                      "for **%lld of %lld tensors**; %s.",
                      r->rec.budgets.step, rep_unit(r, 1), (long long)x->covers, (long long)x->of,
                      words);
  else {
    char flush[120] = "";
    if (r->rec.budgets.has_flush)
      snprintf(flush, sizeof flush, ", at most %.3g of its values flushed to zero (flush_budget)",
               r->rec.budgets.flush);
    fp8_doc_markdownf(d, "It fits the budgets (at most %.3g of a tensor's values clipped at the "
                      "snapshot steps, its largest element clipped at no more than %.3g of the %s "
                      "it ran%s; warm-up left out) for **%lld of %lld tensors**; %s.",
                      r->rec.budgets.value, r->rec.budgets.step, rep_unit(r, 1), flush,
                      (long long)x->covers, (long long)x->of, words);
  }
  answer_resolution(r, d);
  int binding = 0;
  if (x->nmisfits) answer_misfits(r, d, x, &binding);
  fp8_doc_markdown(d, r->stream_only ? "How the answer moves with the step budget:"
                                      : "How the answer moves with the budgets (both scaled together):");
  char hb[64]; /* the step budget counts micro-batches under gradient accumulation */
  if (r->stream_only) snprintf(hb, sizeof hb, "step budget%s", rep_micro(r) ? " (micro-batches)" : "");
  else snprintf(hb, sizeof hb, "budgets (values, %s)", rep_unit(r, 1));
  const char *hdr[] = {hb, "setting", "fits", "tensors needing current scaling"};
  fp8_doc_table_begin(d, 4, hdr, "llrr");
  const double f[3] = {0.1, 1.0, 10.0};
  for (int k = 0; k < 3; k++)
    if (sensitivity_row(r, d, f[k]) != FP8_OK) return;
  if (x->nmisfits)
    fp8_doc_markdown(d, "The same advice as TransformerEngine code: te_recipe.py next to this "
                        "report (`te_recipe.apply(model)` once, then each forward under "
                        "`te_recipe.model_region()`). On TE 2.16 and later it applies the fixes "
                        "per tensor, through one CustomRecipe whose factory knows each module by "
                        "its TE name (a module's input and weight share one delayed setting, "
                        "the larger margin; output and grad_input, which the factory gets "
                        "without a name, take current scaling in E4M3; a tensor in BF16 keeps "
                        "its whole module out of FP8); before 2.16 per module, each advised "
                        "module in its own nested autocast region with the strongest fix among "
                        "its tensors. advice.ini next to this report replays both exactly as "
                        "applied (labels advice and advice_module, and the whole-model setting "
                        "alone beside them): `fp8lab run advice.ini` confirms them. For Megatron-LM: "
                        "megatron_args.txt (with megatron_precision.yaml, its per-module file, "
                        "when modules need current scaling or BF16); "
                        "for torchao, which has no delayed scaling: torchao_config.py (current "
                        "scaling, the modules kept in BF16 left out). Each says what it cannot "
                        "express.");
  int32_t mmax = largest_margin(r, x);
  if (binding)
    fp8_doc_markdownf(
        d,
        "Not tried: margins above %d at history_len %d (the largest this sweep "
        "tried was binding); the %d tensor%s above that need current scaling might fit "
        "margin %d: add it to the sweep to find out.",
        (int)mmax, (int)x->key.history_len, binding, binding == 1 ? "" : "s", (int)mmax + 1);
  else if (x->key.margin == mmax)
    fp8_doc_markdownf(d, "Not tried: the recommended margin %d is the largest this sweep tried at "
                      "history_len %d; a larger one would only add headroom.", (int)mmax,
                      (int)x->key.history_len);
  fp8_doc_markdown(d, "Per-role and per-tensor detail: [Recommendations per role and per "
                      "tensor](#recommendations-per-role-and-per-tensor) (a per-role setting cannot be "
                      "expressed in one DelayedScaling recipe).");
}

/* ------------------------------------------------------------------ advice.ini */

/* The [trace] section of the run (from run.json): the same trace, synth or a folder by its
 * absolute path (an experiment's paths resolve against its own folder, and run.json's path is
 * relative to where the run was started), and the run's steps, tensors and amax reduction. */
void rep_put_trace(FILE *fp, const rep_t *r) {
  const fp8_run_record *run = &r->run;
  fputs("[trace]\n", fp);
  if (run->synth_preset)
    fprintf(fp, "path = synth:%s\nsynth_steps = %lld\nsynth_seed = %lld\n", run->synth_preset,
            (long long)run->synth_steps, (long long)run->synth_seed);
  else
    fprintf(fp, "path = %s\n", run->trace_abs_path ? run->trace_abs_path
                               : run->trace_path ? run->trace_path : "(the trace of this run)");
  if (run->trace_steps) fprintf(fp, "steps = %s\n", run->trace_steps);
  /* a cold history (warm_history = false, or a run before the key) is replayed cold again */
  if (run->trace_steps && !run->warm_history) fputs("warm_history = false\n", fp);
  if (run->ntrace_tensors) {
    fputs("tensors = ", fp);
    for (size_t i = 0; i < run->ntrace_tensors; i++)
      fprintf(fp, "%s%s", i ? ", " : "", run->trace_tensors[i]);
    fputc('\n', fp);
  }
  if (run->reduce_amax)
    fprintf(fp, "reduce_amax = true\nreduce_group = %lld\n", (long long)run->reduce_group);
  if (run->reduce_amax && run->reduce_stride > 1)
    fprintf(fp, "reduce_stride = %lld\n", (long long)run->reduce_stride);
}

/* v in the fewest digits that read back as v (a budget of 1e-6 stays 1e-06, not
 * 9.9999999999999995e-07). */
static void put_double(FILE *fp, double v) {
  char b[40];
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(b, sizeof b, "%.*g", prec, v);
    if (strtod(b, NULL) == v) break;
  }
  fputs(b, fp);
}

/* The run's [analysis] section, so that the advice is judged by the budgets it was derived
 * under, with the same warm-up and GEMM sampling. */
void rep_put_analysis(FILE *fp, const rep_t *r) {
  const fp8_run_record *run = &r->run;
  fputs("\n[analysis]\noverflow_budget = ", fp);
  put_double(fp, r->budgets.value);
  fputs("\nstep_budget = ", fp);
  put_double(fp, r->budgets.step);
  fputc('\n', fp);
  if (run->warmup_steps >= 0) fprintf(fp, "warmup_steps = %lld\n", (long long)run->warmup_steps);
  if (run->gemm >= 0) fprintf(fp, "gemm = %s\n", run->gemm ? "true" : "false");
  if (run->gemm_max_tokens >= 0)
    fprintf(fp, "gemm_max_tokens = %lld\n", (long long)run->gemm_max_tokens);
  if (run->gemm >= 0) fprintf(fp, "gemm_error = %s\n", run->gemm_sampled ? "sampled" : "exact");
  if (run->gemm_sampled)
    fprintf(fp, "gemm_sample = %lld\ngemm_seed = %lld\n", (long long)run->gemm_sample,
            (long long)run->gemm_seed);
  if (run->tensor_core != FP8_TC_EXACT) /* the accumulation the GEMM errors were judged under */
    fprintf(fp, "tensor_core = %s\n", fp8_tc_model_name((fp8_tc_model)run->tensor_core));
  if (run->cost_tokens > 0) fprintf(fp, "cost_tokens = %lld\n", (long long)run->cost_tokens);
  if (r->budgets.has_flush) {
    fputs("flush_budget = ", fp);
    put_double(fp, r->budgets.flush);
    fputc('\n', fp);
  }
}

