/* timeline_report.c: timeline.csv, timeline.md and the terminal summary of `fp8lab timeline`
 * (timeline_report.h); the charts are in timeline_plot.c. */
#include "timeline_report.h"

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "outfile.h"
#include "util.h"

/* median (GSL's: the mean of the middle two for an even count), min and max of v[0..n), sorted
 * in place; NaN when n is 0 */
static void spread(double *v, size_t n, double *med, double *lo, double *hi) {
  if (n == 0) {
    *med = *lo = *hi = NAN;
    return;
  }
  gsl_sort(v, 1, n);
  *med = gsl_stats_median_from_sorted_data(v, 1, n);
  *lo = v[0], *hi = v[n - 1];
}

static ptrdiff_t plan_of(const fp8_tl_report *r, fp8_tl_mode m) {
  for (size_t k = 0; k < r->nplans; k++)
    if (r->plans[k].mode == m) return (ptrdiff_t)k;
  return -1;
}

/* The totals of every measured step of plan k: t[s], ok[s] = 0 where step s is incomplete. */
static int step_totals(const fp8_tl_report *r, size_t k, fp8_tl_totals *t, unsigned char *ok) {
  const fp8_tl_plan *p = &r->plans[k];
  fp8_tl_span *sp = malloc((p->nops + 1) * sizeof *sp);
  if (!sp) return FP8_ENOMEM;
  for (int32_t s = 0; s < r->steps; s++) {
    ok[s] = fp8_tl_measured_spans(r->meas, k, s, p, sp) == FP8_OK;
    if (ok[s]) fp8_tl_totals_of(p, sp, &t[s]);
  }
  free(sp);
  return FP8_OK;
}

int fp8_tl_paired(const fp8_tl_report *r, size_t k, size_t kref, double out[3]) {
  const size_t n = (size_t)(r->steps > 0 ? r->steps : 0);
  fp8_tl_totals *t = calloc(2 * n + 1, sizeof *t);
  unsigned char *ok = calloc(2 * n + 1, 1);
  double *d = calloc(n + 1, sizeof *d);
  int rc = t && ok && d ? FP8_OK : FP8_ENOMEM;
  size_t nd = 0;
  if (!rc) rc = step_totals(r, k, t, ok);
  if (!rc) rc = step_totals(r, kref, t + n, ok + n);
  for (size_t s = 0; s < n && !rc; s++)
    if (ok[s] && ok[n + s]) d[nd++] = t[s].step_us - t[n + s].step_us;
  if (!rc) spread(d, nd, &out[0], &out[1], &out[2]);
  free(t), free(ok), free(d);
  return rc;
}

int fp8_tl_stats_of(const fp8_tl_report *r, size_t k, fp8_tl_stats *st) {
  const size_t n = (size_t)(r->steps > 0 ? r->steps : 0);
  const ptrdiff_t none = plan_of(r, FP8_TL_DELAYED_NONE);
  fp8_tl_totals *t = calloc(n + 1, sizeof *t);
  unsigned char *ok = calloc(n + 1, 1);
  double *v = calloc(6 * (n + 1), sizeof *v), lo, hi, vs[3] = {NAN, NAN, NAN};
  int rc = t && ok && v ? FP8_OK : FP8_ENOMEM;
  if (!rc) rc = step_totals(r, k, t, ok);
  if (!rc && none >= 0) rc = fp8_tl_paired(r, k, (size_t)none, vs);
  double *step = v, *exp = v + n, *u0 = v + 2 * n, *u1 = v + 3 * n, *ar = v + 4 * n,
         *sorted = v + 5 * n;
  size_t ns = 0;
  for (size_t s = 0; s < n && !rc; s++)
    if (ok[s]) {
      step[ns] = t[s].step_us, exp[ns] = t[s].exposed_us, u0[ns] = t[s].update_us[0];
      u1[ns] = t[s].update_us[1], ar[ns] = t[s].allreduce_us, ns++;
    }
  /* the measured step whose time is the median (the lower middle one for an even count) */
  st->median_step = -1;
  if (!rc && ns) {
    memcpy(sorted, step, ns * sizeof *sorted);
    gsl_sort(sorted, 1, ns);
    for (size_t s = 0; s < n && st->median_step < 0; s++)
      if (ok[s] && t[s].step_us == sorted[(ns - 1) / 2]) st->median_step = (int32_t)s;
  }
  if (!rc) {
    spread(step, ns, &st->step_med, &st->step_min, &st->step_max);
    spread(exp, ns, &st->exposed_med, &st->exposed_min, &st->exposed_max);
    st->vs_none_med = vs[0], st->vs_none_min = vs[1], st->vs_none_max = vs[2];
    spread(u0, ns, &st->update_med[0], &lo, &hi);
    spread(u1, ns, &st->update_med[1], &lo, &hi);
    spread(ar, ns, &st->allreduce_med, &lo, &hi);
  }
  free(t), free(ok), free(v);
  return rc;
}

/* ------------------------------------------------------------------ timeline.csv */

/* The tensor column of op i: a tensor, a Linear, or the phase. */
static void op_tensor(const fp8_tl_shape *s, const fp8_tl_op *op, char *out, size_t n) {
  if (op->linear < 0)
    snprintf(out, n, "%s", op->phase == FP8_BWD ? "backward" : "forward");
  else if (op->operand < 0)
    snprintf(out, n, "%s", s->linears[op->linear].name);
  else
    snprintf(out, n, "%s.%s", s->linears[op->linear].name,
             fp8_tl_operand_name((fp8_tl_operand)op->operand));
}

static void csv_rows(FILE *fp, const fp8_tl_report *r, size_t k, int32_t step,
                     const fp8_tl_span *sp, const char *source) {
  const fp8_tl_plan *p = &r->plans[k];
  char tensor[600];
  for (size_t i = 0; i < p->nops; i++) {
    const fp8_tl_op *op = &p->ops[i];
    op_tensor(r->shape, op, tensor, sizeof tensor);
    fprintf(fp, "%s,%d,%s,%s,%s,", fp8_tl_mode_name(p->mode), (int)step,
            fp8_tl_stream_name(op->stream), fp8_tl_kind_name(op->kind), tensor);
    fp8_csv_put_num(fp, sp[i].start_us);
    fputc(',', fp);
    fp8_csv_put_num(fp, sp[i].end_us);
    fprintf(fp, ",%s\n", source);
  }
}

int fp8_tl_write_csv(const char *dir, const fp8_tl_report *r, char *err, size_t errlen) {
  fp8_outfile of;
  size_t most = 1;
  for (size_t k = 0; k < r->nplans; k++)
    if (r->plans[k].nops > most) most = r->plans[k].nops;
  fp8_tl_span *sp = malloc(most * sizeof *sp);
  if (!sp) return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  int rc = fp8_outfile_open(&of, dir, "timeline.csv", err, errlen);
  if (rc) {
    free(sp);
    return rc;
  }
  fputs("mode,step,stream,op,tensor,start_us,end_us,source\n", of.fp);
  for (size_t k = 0; r->meas && k < r->nplans; k++)
    for (int32_t s = 0; s < r->steps; s++)
      if (fp8_tl_measured_spans(r->meas, k, s, &r->plans[k], sp) == FP8_OK)
        csv_rows(of.fp, r, k, s, sp, "measured");
  for (size_t k = 0; k < r->nplans; k++) csv_rows(of.fp, r, k, 0, r->model[k], "model");
  free(sp);
  return fp8_outfile_commit(&of, err, errlen);
}

/* ------------------------------------------------------------------ timeline.md */

static double median_of(double *v, size_t n) {
  double med, lo, hi;
  spread(v, n, &med, &lo, &hi);
  return med;
}

static void md_intro(FILE *fp, const fp8_tl_report *r) {
  const fp8_tl_shape *s = r->shape;
  const fp8_tl_device *d = r->dev;
  char outside[96] = "";
  if (fp8_tl_outside_layers(s))
    snprintf(outside, sizeof outside, " and %zu outside them (such as an LM head)",
             fp8_tl_outside_layers(s));
  fprintf(fp, "# fp8lab timeline: what delayed scaling's bookkeeping costs per step\n\n");
  fprintf(fp, "%s, fp8lab %s. Shape: %zu Linear layers in %lld transformer layer%s%s (%s). Every "
          "Linear's input, weight and grad_output is cast to FP8 once per step (HYBRID: E4M3 "
          "forward, E5M2 for grad_output), amax history %d, world size %lld for the model.\n\n",
          r->date, FP8LAB_VERSION, s->nlinears, (long long)s->layers, s->layers == 1 ? "" : "s",
          outside, s->source, (int)s->history_len, (long long)s->world);
  if (r->meas)
    fprintf(fp, "**Measured** on %s; all-reduce: %s. %d measured steps per mode, each after a "
            "lead-in step of the same mode, the modes interleaved round by round; medians "
            "(spread: min to max). Device copy: %.0f GB/s (bytes read + written).\n\n",
            r->meas->device, r->meas->nccl, (int)r->steps, r->meas->copy_gbps);
  else
    fprintf(fp, "**Not measured** (%s): every figure below is the model's estimate, not a "
            "measurement.\n\n", r->not_measured ? r->not_measured : "no GPU");
  fprintf(fp, "Model: device `%s`: %.0f GB/s memory bandwidth, %.0f TFLOP/s FP8 GEMMs, %.1f us "
          "the shortest kernel, all-reduce %.1f us + %.1f us per doubling of the world + size / "
          "%.0f GB/s (docs/overlap.md).\n\n",
          d->name, d->hbm_gbps, d->fp8_tflops, d->kernel_us, d->allreduce_us,
          d->allreduce_hop_us, d->allreduce_gbps);
}

static void md_measured(FILE *fp, const fp8_tl_report *r) {
  fprintf(fp, "## Per mode, measured\n\n");
  fprintf(fp, "| mode | step (ms) | spread (ms) | bookkeeping exposed (us) | share of the step | "
          "step minus delayed-none (us), median [min, max] | update fwd / bwd (us) | "
          "all-reduce (us) | model step (ms) | model / measured |\n");
  fprintf(fp, "|---|---:|---|---:|---:|---|---|---:|---:|---:|\n");
  for (size_t k = 0; k < r->nplans; k++) {
    const fp8_tl_stats st = r->stats[k];
    const double model = r->model_tot[k].step_us;
    fprintf(fp, "| %s | %.3f | %.3f to %.3f | %.1f | %.4f%% | %.1f [%.1f, %.1f] | %.1f / %.1f | "
            "%.1f | %.3f | %.2f |\n",
            fp8_tl_mode_name(r->plans[k].mode), st.step_med / 1e3, st.step_min / 1e3,
            st.step_max / 1e3, st.exposed_med, 100.0 * st.exposed_med / st.step_med,
            st.vs_none_med, st.vs_none_min, st.vs_none_max, st.update_med[0], st.update_med[1],
            st.allreduce_med, model / 1e3, model / st.step_med);
  }
  fprintf(fp, "\nA step minus delayed-none's step of the same round is the bookkeeping's cost "
          "seen in step times alone: it drowns in the GEMMs' run-to-run jitter (its spread), "
          "which is why the exposed time is measured directly, with events around every "
          "bookkeeping op and around the wait.\n\n");
}

static void md_model(FILE *fp, const fp8_tl_report *r) {
  fprintf(fp, "## Per mode, the model's estimate\n\n");
  fprintf(fp, "| mode | step (ms) | bookkeeping exposed (us) | share of the step | GEMMs (ms) | "
          "casts (ms) | memory traffic (GB) | kernel launches | all-reduces (payload) | "
          "update fwd / bwd (us) |\n|---|---:|---:|---:|---:|---:|---:|---:|---|---|\n");
  for (size_t k = 0; k < r->nplans; k++) {
    const fp8_tl_totals *t = &r->model_tot[k];
    fprintf(fp, "| %s | %.3f | %.1f | %.4f%% | %.3f | %.3f | %.2f | %lld | %lld (%.0f bytes) | "
            "%.1f / %.1f |\n", fp8_tl_mode_name(r->plans[k].mode), t->step_us / 1e3,
            t->exposed_us, 100.0 * t->exposed_us / t->step_us, t->gemm_us / 1e3,
            t->cast_us / 1e3, t->bytes / 1e9, (long long)t->launches,
            (long long)t->allreduces, t->allreduce_bytes, t->update_us[0], t->update_us[1]);
  }
  fputc('\n', fp);
}

static void md_update(FILE *fp, const fp8_tl_report *r) {
  const fp8_tl_measurement *m = r->meas;
  const fp8_tl_device *d = r->dev;
  const ptrdiff_t k = plan_of(r, FP8_TL_DELAYED_INLINE);
  fprintf(fp, "## The update kernel\n\n| tensors | history | measured (us) | model (us) |\n"
          "|---:|---:|---:|---:|\n");
  for (int ph = 0; k >= 0 && ph < 2; ph++) {
    const size_t n = r->plans[k].nphase[ph];
    fprintf(fp, "| %zu (%s) | %d | ", n, ph ? "backward" : "forward", (int)r->shape->history_len);
    if (r->stats) fprintf(fp, "%.1f", r->stats[k].update_med[ph]);
    else fprintf(fp, "not measured");
    fprintf(fp, " | %.1f |\n", fp8_tl_model_update_us(d, (int64_t)n, r->shape->history_len));
  }
  if (r->bench_tensors > 0) {
    fprintf(fp, "| %d | %d | ", (int)r->bench_tensors, (int)r->bench_history);
    double *v = m && m->nbench ? malloc(m->nbench * sizeof *v) : NULL;
    if (v) {
      memcpy(v, m->update_bench_us, m->nbench * sizeof *v);
      fprintf(fp, "%.1f (median of %zu)", median_of(v, m->nbench), m->nbench);
      free(v);
    } else {
      fprintf(fp, "not measured");
    }
    fprintf(fp, " | %.1f |\n", fp8_tl_model_update_us(d, r->bench_tensors, r->bench_history));
  }
  fprintf(fp, "\nfp8lab's update kernel (kernels/delayed.cu) keeps each history as a ring: it "
          "reads the L entries of a slot and writes one scale. TransformerEngine's "
          "(common/recipe/delayed_scaling.cu, TE >= 1.6) rolls the history in place, reading "
          "and writing all L entries, about twice the bytes; at these sizes both are a single "
          "launch of a few microseconds.\n\n");
}

static void md_per_layer(FILE *fp, const fp8_tl_report *r) {
  const ptrdiff_t ki = plan_of(r, FP8_TL_DELAYED_INLINE), kc = plan_of(r, FP8_TL_CURRENT);
  if (ki < 0 || kc < 0) return;
  const double L = (double)r->shape->layers;
  const double model = (r->model_tot[kc].step_us - r->model_tot[ki].step_us) / L / 1e3;
  fprintf(fp, "## Current minus delayed scaling, per transformer layer\n\n");
  fprintf(fp, "| | current minus delayed-inline (ms per layer) |\n|---|---:|\n");
  double d[3];
  if (r->meas && fp8_tl_paired(r, (size_t)kc, (size_t)ki, d) == FP8_OK && !isnan(d[0]))
    fprintf(fp, "| measured (median over the rounds, [min, max]) | %.3f [%.3f, %.3f] |\n",
            d[0] / L / 1e3, d[1] / L / 1e3, d[2] / L / 1e3);
  else
    fprintf(fp, "| measured | not measured |\n");
  fprintf(fp, "| model | %.3f |\n", model);
  fprintf(fp, "| model, each operand quantized twice (TE's benchmark) | %.3f |\n", 2 * model);
  fprintf(fp, "| TransformerEngine's published figure (H200 NVL) | 1.307 |\n\n");
  fprintf(fp, "TE's figure is 20.285 - 18.978 ms per layer from docs/examples/gemm_profiling "
          "(TE 2.17; hidden 4096, ffn 16384, 24 layers, 15,872 tokens). It times forward calls of "
          "te.Linear for the three GEMM shapes of each Linear, dgrad and wgrad included, so each "
          "operand is quantized twice, with current scaling's amax pass each time, where a "
          "training step quantizes each once and reuses both copies; the delayed update runs "
          "outside its timed loop; and an H200 NVL runs at a lower power limit than an H200 "
          "SXM. The model's line for TE's count is the one to hold against 1.307 ms.\n\n");
}

/* The model at world size w (and current scaling with the sequence-parallel all-reduces). */
static int md_world_row(FILE *fp, const fp8_tl_report *r, int64_t w, char *err, size_t errlen) {
  fp8_tl_shape s = *r->shape;
  fp8_tl_totals t[3];
  static const fp8_tl_mode modes[3] = {FP8_TL_DELAYED_INLINE, FP8_TL_DELAYED_OVERLAP,
                                       FP8_TL_CURRENT};
  s.world = w;
  s.sequence_parallel = 1;
  for (int i = 0; i < 3; i++) {
    fp8_tl_plan p;
    int rc = fp8_tl_plan_build(&s, modes[i], &p, err, errlen);
    if (!rc) rc = fp8_tl_model_run(&p, &s, r->dev, NULL, &t[i], err, errlen);
    fp8_tl_plan_free(&p);
    if (rc) return rc;
  }
  const double ar = t[0].allreduces ? t[0].allreduce_us / (double)t[0].allreduces : 0.0;
  fprintf(fp, "| %lld | %.1f | %.1f (%.4f%%) | %.1f | %lld x %.1f | %.1f (%.4f%%) |\n",
          (long long)w, ar, t[0].exposed_us, 100.0 * t[0].exposed_us / t[0].step_us,
          t[1].exposed_us, (long long)t[2].allreduces,
          t[2].allreduces ? t[2].allreduce_us / (double)t[2].allreduces : 0.0, t[2].exposed_us,
          100.0 * t[2].exposed_us / t[2].step_us);
  return FP8_OK;
}

static int md_world(FILE *fp, const fp8_tl_report *r, char *err, size_t errlen) {
  fprintf(fp, "## What changes with world size (model)\n\n");
  fprintf(fp, "One GPU shows a world of one; larger worlds are the model's. Delayed scaling "
          "all-reduces each phase's amaxes once per step (%zu and %zu floats here) over its amax "
          "reduction group (TE's default: every rank); current scaling needs no reduction under "
          "data parallelism, and with sequence parallelism all-reduces the 4-byte amax of every "
          "input and grad_output before its cast, on the critical path, over the "
          "tensor-parallel group (usually 8 ranks or fewer: its rows beyond 8 are for "
          "comparison).\n\n", r->plans[0].nphase[0], r->plans[0].nphase[1]);
  fprintf(fp, "| ranks in each all-reduce | delayed: one all-reduce (us) | delayed-inline exposed (us, share) | "
          "delayed-overlap exposed (us) | current, sequence parallel: all-reduces x us | "
          "current exposed (us, share) |\n|---:|---:|---:|---:|---|---:|\n");
  int64_t worlds[6] = {1, 8, 64, 512, 4096, 0};
  size_t nw = 5;
  int64_t own = r->shape->world;
  if (own != 1 && own != 8 && own != 64 && own != 512 && own != 4096) worlds[nw++] = own;
  for (size_t i = 1; i < nw; i++) /* insertion sort: the trace's own world in its place */
    for (size_t j = i; j > 0 && worlds[j - 1] > worlds[j]; j--) {
      int64_t t = worlds[j];
      worlds[j] = worlds[j - 1], worlds[j - 1] = t;
    }
  for (size_t i = 0; i < nw; i++) {
    int rc = md_world_row(fp, r, worlds[i], err, errlen);
    if (rc) return rc;
  }
  fputc('\n', fp);
  return FP8_OK;
}

static const char MD_READ[] =
    "## How to read this\n\n"
    "- **step**: from the step's first op to the end of its last op on the compute stream.\n"
    "- **bookkeeping exposed**: the time the compute stream spends in, or waiting for, the "
    "bookkeeping: delayed-inline, the gather, all-reduce and update ops on the compute stream; "
    "delayed-overlap, the two waits for the side stream's update (the first cast of the next "
    "step's same phase needs the new scales); current, its amax passes, scale kernels and "
    "sequence-parallel all-reduces. What the side stream takes from the GEMMs' multiprocessors "
    "shows only in the step time.\n"
    "- **delayed-none** is the floor: the same casts and GEMMs without any bookkeeping.\n"
    "- **all-reduce** at world 1 (one GPU) is NCCL's call on one rank, which may put no work on "
    "the GPU at all (TransformerEngine skips the all-reduce at world size 1); larger worlds: "
    "the model's table above.\n"
    "- Where amax is computed: in the cast kernel itself (an atomic max per block into the "
    "tensor's amax slot, TE's cast_transpose), so delayed scaling reads each tensor once; "
    "current scaling reads it once more for its amax before the cast.\n"
    "- timeline.csv has every op of every measured step and of the model's step; "
    "timeline.png shows one step per mode, timeline_zoom.png the end of the forward pass.\n";

int fp8_tl_write_md(const char *dir, const fp8_tl_report *r, char *err, size_t errlen) {
  fp8_outfile of;
  int rc = fp8_outfile_open(&of, dir, "timeline.md", err, errlen);
  if (rc) return rc;
  md_intro(of.fp, r);
  if (r->meas) md_measured(of.fp, r);
  md_model(of.fp, r);
  md_update(of.fp, r);
  md_per_layer(of.fp, r);
  rc = md_world(of.fp, r, err, errlen);
  fputs(MD_READ, of.fp);
  if (rc) {
    fp8_outfile_abort(&of);
    return rc;
  }
  return fp8_outfile_commit(&of, err, errlen);
}

/* ------------------------------------------------------------------ the terminal */

void fp8_tl_print(FILE *fp, const fp8_tl_report *r) {
  char outside[64] = "";
  if (fp8_tl_outside_layers(r->shape))
    snprintf(outside, sizeof outside, " + %zu outside them", fp8_tl_outside_layers(r->shape));
  fprintf(fp, "%zu Linear layers in %lld layers%s (%s), history %d, world %lld\n",
          r->shape->nlinears, (long long)r->shape->layers, outside, r->shape->source,
          (int)r->shape->history_len, (long long)r->shape->world);
  if (r->meas)
    fprintf(fp, "measured on %s (median of %d steps per mode); model: %s\n", r->meas->device,
            (int)r->steps, r->dev->name);
  else
    fprintf(fp, "MODEL ESTIMATE, not a measurement (%s); device model %s\n",
            r->not_measured ? r->not_measured : "no GPU", r->dev->name);
  fprintf(fp, "%-16s %12s %14s %10s %18s\n", "mode", "step (ms)", "exposed (us)", "share",
          "model step (ms)");
  for (size_t k = 0; k < r->nplans; k++) {
    const fp8_tl_totals *t = &r->model_tot[k];
    double step = t->step_us, exposed = t->exposed_us;
    if (r->stats) step = r->stats[k].step_med, exposed = r->stats[k].exposed_med;
    fprintf(fp, "%-16s %12.3f %14.1f %9.4f%% %18.3f\n", fp8_tl_mode_name(r->plans[k].mode),
            step / 1e3, exposed, 100.0 * exposed / step, t->step_us / 1e3);
  }
}
