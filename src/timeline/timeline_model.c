/* timeline_model.c: the model behind `fp8lab timeline` without a GPU (timeline.h): each op's
 * time from what it reads, writes and computes and from a few device parameters, and a step's
 * schedule from the plan's streams and events. Every formula is in timeline.h and
 * docs/semantics.md ("The timeline model"); tests/timeline/test_timeline.c checks them by hand. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fp8.h" /* FP8_BWD */
#include "timeline.h"
#include "util.h"

/* The defaults. hbm_gbps: a device-to-device copy measured on an H200 of this workplace
 * (4.3 TB/s, bytes read + written; KINDS.md, 2026-10-28), and the same share (0.9) of the
 * H100 SXM's 3.35 TB/s. fp8_tflops: two thirds of the datasheets' 1979 dense FP8 TFLOP/s,
 * the share cuBLASLt reaches on large GEMMs in public measurements (a lead: scripts/device-
 * check.sh measures it). kernel_us, allreduce_*: leads, not measurements (docs/overlap.md);
 * allreduce_us is a small all-reduce between ranks (one node's NVLink), hop_us what each
 * doubling of the ranks adds. */
static const fp8_tl_device BUILTIN[] = {
    {"h100", 3000.0, 1300.0, 3.0, 10.0, 6.0, 100.0},
    {"h200", 4300.0, 1300.0, 3.0, 10.0, 6.0, 100.0},
};

int fp8_tl_device_builtin(const char *name, fp8_tl_device *d) {
  for (size_t i = 0; i < sizeof BUILTIN / sizeof *BUILTIN; i++)
    if (strcmp(name, BUILTIN[i].name) == 0) {
      *d = BUILTIN[i];
      return FP8_OK;
    }
  return FP8_EINVAL;
}

static double mem_us(double bytes, const fp8_tl_device *d) { return bytes / (d->hbm_gbps * 1e3); }

static double ceil_log2(int64_t w) {
  double k = 0;
  for (int64_t v = 1; v < w; v *= 2) k++;
  return k;
}

double fp8_tl_model_op_us(const fp8_tl_op *op, int64_t world, const fp8_tl_device *d) {
  switch (op->kind) {
  case FP8_TL_WAIT:
    return 0.0;
  case FP8_TL_ALLREDUCE:
    /* world 1: NCCL's call on one rank, at most one short kernel (TE skips the call) */
    if (world <= 1) return d->kernel_us;
    return d->allreduce_us + d->allreduce_hop_us * ceil_log2(world) +
           2.0 * (double)(world - 1) / (double)world * op->bytes / (d->allreduce_gbps * 1e3);
  case FP8_TL_FPROP:
  case FP8_TL_DGRAD:
  case FP8_TL_WGRAD:
    return fmax(fmax(d->kernel_us, op->flops / (d->fp8_tflops * 1e6)), mem_us(op->bytes, d));
  default:
    return fmax(op->launches * d->kernel_us, mem_us(op->bytes, d));
  }
}

double fp8_tl_model_update_us(const fp8_tl_device *d, int64_t n, int32_t L) {
  return fmax(d->kernel_us, mem_us(4.0 * (double)n * (double)L + 16.0 * (double)n, d));
}

void fp8_tl_totals_of(const fp8_tl_plan *p, const fp8_tl_span *span, fp8_tl_totals *t) {
  memset(t, 0, sizeof *t);
  for (size_t i = 0; i < p->nops; i++) {
    const fp8_tl_op *op = &p->ops[i];
    const double us = span[i].end_us - span[i].start_us;
    if (op->stream == FP8_TL_COMPUTE) {
      if (span[i].end_us > t->step_us) t->step_us = span[i].end_us;
      if (fp8_tl_is_bookkeeping(p->mode, op->kind)) t->exposed_us += us;
    }
    switch (op->kind) {
    case FP8_TL_UPDATE:
      t->update_us[op->phase == FP8_BWD] += us;
      break;
    case FP8_TL_ALLREDUCE:
      t->allreduce_us += us;
      t->allreduces++;
      t->allreduce_bytes += op->bytes;
      break;
    case FP8_TL_FPROP:
    case FP8_TL_DGRAD:
    case FP8_TL_WGRAD:
      t->gemm_us += us;
      break;
    case FP8_TL_CAST:
      t->cast_us += us;
      break;
    default:
      break;
    }
    t->bytes += op->bytes;
    t->flops += op->flops;
    t->launches += op->launches;
  }
}

int fp8_tl_model_run(const fp8_tl_plan *p, const fp8_tl_shape *s, const fp8_tl_device *d,
                     fp8_tl_span *span, fp8_tl_totals *out, char *err, size_t errlen) {
  /* end times (absolute) of every op in the two simulated steps */
  double *end = malloc(2 * (p->nops ? p->nops : 1) * sizeof *end);
  fp8_tl_span *sp = span ? span : malloc((p->nops ? p->nops : 1) * sizeof *sp);
  if (!end || !sp) {
    free(end);
    if (!span) free(sp);
    return fp8_errorf(FP8_ENOMEM, err, errlen, "timeline model: out of memory");
  }
  double clock[FP8_TL_NSTREAMS] = {0};
  double begin = 0;
  for (int k = 0; k < 2; k++) {
    double *e = end + (size_t)k * p->nops;
    begin = clock[FP8_TL_COMPUTE];
    for (size_t i = 0; i < p->nops; i++) {
      const fp8_tl_op *op = &p->ops[i];
      double start = clock[op->stream], ready = start;
      for (int j = 0; j < op->ndeps; j++) {
        if (op->dep[j].prev && k == 0) continue;
        const double de = end[(size_t)(k - op->dep[j].prev) * p->nops + (size_t)op->dep[j].op];
        if (de > ready) ready = de;
      }
      /* a wait's span is the stall itself; any other op starts once its events are done */
      if (op->kind != FP8_TL_WAIT) start = ready;
      e[i] = ready + fp8_tl_model_op_us(op, s->world, d);
      clock[op->stream] = e[i];
      if (k == 1) sp[i] = (fp8_tl_span){start - begin, e[i] - begin};
    }
  }
  fp8_tl_totals_of(p, sp, out);
  free(end);
  if (!span) free(sp);
  return FP8_OK;
}

int fp8_tl_measured_spans(const fp8_tl_measurement *m, size_t k, int32_t step,
                          const fp8_tl_plan *p, fp8_tl_span *span) {
  size_t found = 0;
  for (size_t i = 0; i < m->nrec; i++) {
    const fp8_tl_record *r = &m->rec[i];
    if (r->plan != (int32_t)k || r->step != step || r->op < 0 || (size_t)r->op >= p->nops)
      continue;
    span[r->op] = (fp8_tl_span){r->start_us, r->end_us};
    found++;
  }
  return found == p->nops ? FP8_OK : FP8_EINVAL;
}
