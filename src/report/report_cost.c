/* report_cost.c: the replay report's "Cost per step (model)": what delayed scaling's
 * bookkeeping would cost per training step of the traced model, from the timeline model
 * (src/timeline/timeline.h) on run.json's model_shape, every mode on the built-in H200. A short
 * table; `fp8lab timeline TRACE` measures it on a GPU and docs/overlap.md reads it.
 *
 * The section states the shape it models (Linears, layers, tokens per step, world), takes the
 * production run's tokens per step from `[analysis] cost_tokens` when given (each Linear's
 * tokens scaled by cost_tokens / the captured batch's), and says so next to the shares when
 * the captured batch leaves most GEMMs at the launch latency (issue 25 point 5). Under gradient
 * accumulation (stream.csv's micro-batches, M per step) the step is M passes of the captured
 * shape, each followed by TransformerEngine's delayed bookkeeping: the table is one pass's
 * model x M (issue 42 point 5), cost_tokens split over the M passes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "report_internal.h"

/* GEMMs of a plan that the model times at the shortest kernel (launch-bound). */
static size_t launch_bound(const fp8_tl_plan *p, const fp8_tl_device *d, size_t *ngemm) {
  size_t n = 0;
  *ngemm = 0;
  for (size_t i = 0; i < p->nops; i++) {
    const fp8_tl_op *op = &p->ops[i];
    if (op->kind != FP8_TL_FPROP && op->kind != FP8_TL_DGRAD && op->kind != FP8_TL_WGRAD) continue;
    (*ngemm)++;
    n += fp8_tl_model_op_us(op, 1, d) <= d->kernel_us;
  }
  return n;
}

/* Micro-batches per step: the stream's (step, micro-batch) pairs over its steps, rounded (1
 * without a stream or without micro-batches). */
static int64_t micro_per_step(const rep_t *r) {
  if (!rep_micro(r) || !r->stream.nsteps) return 1;
  int64_t m = llround((double)r->stream.nmicro / (double)r->stream.nsteps);
  return m < 1 ? 1 : m;
}

void rep_add_cost(const rep_t *r, fp8_doc *d) {
  if (!r->run.has_model_shape) return;
  const fp8_tl_shape *cap = &r->run.model_shape;
  fp8_tl_device dev;
  fp8_tl_device_builtin("h200", &dev);
  /* the modelled shape: the captured one, its tokens scaled to cost_tokens when given */
  fp8_tl_shape s = *cap;
  fp8_tl_linear *lin = malloc((cap->nlinears ? cap->nlinears : 1) * sizeof *lin);
  if (!lin) return;
  int64_t tcap = 0;
  for (size_t i = 0; i < cap->nlinears; i++) {
    lin[i] = cap->linears[i];
    if (cap->linears[i].tokens > tcap) tcap = cap->linears[i].tokens;
  }
  /* the layers recounted from the names: a run.json of before counted an LM head as a layer */
  s.layers = fp8_tl_count_layers(cap);
  const size_t outside = fp8_tl_outside_layers(cap);
  /* gradient accumulation (issue 42 point 5): M micro-batches per step, each a forward and
   * backward pass of the captured shape after which TransformerEngine runs the delayed
   * bookkeeping (amax reduction, history roll, scale update): the step is M passes */
  const int64_t micro = micro_per_step(r);
  const int exact_m = !rep_micro(r) || r->stream.nmicro % r->stream.nsteps == 0;
  const int scaled = r->run.cost_tokens > 0 && tcap > 0;
  /* cost_tokens is per step: each pass takes its M-th */
  const double pass_tokens = scaled ? (double)r->run.cost_tokens / (double)micro : (double)tcap;
  if (scaled)
    for (size_t i = 0; i < cap->nlinears; i++) {
      double t = llround((double)cap->linears[i].tokens * pass_tokens / (double)tcap);
      lin[i].tokens = t < 1 ? 1 : (int64_t)t;
    }
  s.linears = lin;
  const int64_t tokens = scaled ? r->run.cost_tokens : tcap * micro;

  fp8_doc_heading(d, 2, "Cost per step (model)");
  char out_s[160] = "", tok_s[200], world_s[160];
  if (outside)
    snprintf(out_s, sizeof out_s, "; %zu Linear%s outside them, such as an LM head", outside,
             outside == 1 ? "" : "s");
  if (scaled)
    snprintf(tok_s, sizeof tok_s, "`[analysis] cost_tokens`; the trace captured %lld",
             (long long)tcap);
  else
    snprintf(tok_s, sizeof tok_s, "the captured batch");
  if (s.world > 1)
    snprintf(world_s, sizeof world_s, "amax reduction over %lld ranks", (long long)s.world);
  else
    snprintf(world_s, sizeof world_s, "one rank (no all-reduce: TransformerEngine skips it at "
             "world size 1)");
  char micro_s[600] = "", at_s[200];
  if (micro > 1)
    snprintf(micro_s, sizeof micro_s, "; %lld micro-batches per step%s, each a pass of %.0f "
             "tokens", (long long)micro, exact_m ? "" : " on average, rounded", pass_tokens);
  if (micro > 1)
    snprintf(at_s, sizeof at_s, "%.0f tokens per micro-batch pass", pass_tokens);
  else
    snprintf(at_s, sizeof at_s, "%lld tokens per step", (long long)tokens);
  fp8_doc_markdownf(d,
                    "What each way of scaling would cost per training step, as fp8lab's timeline "
                    "model estimates it for an H200: **an estimate, not a measurement**. The "
                    "shape it models: %zu Linears (%lld transformer layer%s%s), %lld tokens per "
                    "step (%s%s), %s, history %d. *Bookkeeping exposed* is the time the GPU's "
                    "compute stream spends in delayed scaling's amax reduction and history "
                    "update, or waiting for them, or (current) in the extra amax pass and scale "
                    "before every cast. `fp8lab timeline <trace>` measures it on a GPU; "
                    "docs/overlap.md explains the modes.",
                    s.nlinears, (long long)s.layers, s.layers == 1 ? "" : "s", out_s,
                    (long long)tokens, tok_s, micro_s, world_s, (int)s.history_len);
  if (micro > 1)
    fp8_doc_markdownf(d, "Gradient accumulation: TransformerEngine runs the delayed bookkeeping "
                      "(amax reduction, history roll, scale update launches) after each "
                      "micro-batch's pass, not once per step, so every column but the share is "
                      "one pass's x %lld micro-batches per step.", (long long)micro);
  static const char *const hdr[] = {"mode", "step (ms)", "bookkeeping exposed (us)", "share",
                                    "memory traffic (GB)", "kernel launches", "all-reduces"};
  fp8_doc_table_begin(d, 7, hdr, "lrrrrrr");
  size_t bound = 0, ngemm = 0;
  for (int m = 0; m < FP8_TL_NMODES; m++) {
    fp8_tl_plan p;
    fp8_tl_totals t;
    char err[256], c[6][48];
    if (fp8_tl_plan_build(&s, (fp8_tl_mode)m, &p, err, sizeof err) != FP8_OK) break;
    int rc = fp8_tl_model_run(&p, &s, &dev, NULL, &t, err, sizeof err);
    if (m == FP8_TL_DELAYED_NONE) bound = launch_bound(&p, &dev, &ngemm);
    fp8_tl_plan_free(&p);
    if (rc) break;
    const double passes = (double)micro; /* one pass's totals x M passes per step */
    snprintf(c[0], sizeof c[0], "%.3f", passes * t.step_us / 1e3);
    snprintf(c[1], sizeof c[1], "%.1f", passes * t.exposed_us);
    snprintf(c[2], sizeof c[2], "%.2f%%", 100.0 * t.exposed_us / t.step_us);
    snprintf(c[3], sizeof c[3], "%.3f", passes * t.bytes / 1e9);
    snprintf(c[4], sizeof c[4], "%lld", (long long)t.launches * (long long)micro);
    snprintf(c[5], sizeof c[5], "%lld", (long long)t.allreduces * (long long)micro);
    const char *cells[] = {fp8_tl_mode_name((fp8_tl_mode)m), c[0], c[1], c[2], c[3], c[4], c[5]};
    fp8_doc_table_row(d, cells);
  }
  /* a batch far below what fills the GPU: most GEMMs at the launch latency */
  if (ngemm && 2 * bound > ngemm)
    fp8_doc_markdownf(d, "**These shares are those of a launch-bound step**: at %s and "
                      "these Linears' sizes, %zu of the %zu GEMMs take the shortest "
                      "kernel's time (%.0f us, the launch latency) in the model, a step far "
                      "smaller than one that fills an H200. "
                      "In a production step the GEMMs grow with the tokens faster than the "
                      "bookkeeping and current scaling's extra read, so their shares are smaller "
                      "there.%s",
                      at_s, bound, ngemm, dev.kernel_us,
                      scaled ? "" : " Set `[analysis] cost_tokens` to the production run's tokens "
                                    "per step (batch x sequence length) to model that step.");
  free(lin);
}
