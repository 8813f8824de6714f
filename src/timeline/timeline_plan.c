/* timeline_plan.c: the ops of one training step per mode (timeline.h), and the shape of TE's
 * transformer layer from flags. Pure C over src/sim: the GPU module links it (fp8lab_timeline). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8.h" /* FP8_FWD, FP8_BWD */
#include "timeline.h"
#include "util.h"

static const char *const MODE_NAMES[FP8_TL_NMODES] = {"delayed-inline", "delayed-overlap",
                                                      "delayed-none", "current"};
static const char *const KIND_NAMES[FP8_TL_NKINDS] = {
    "cast", "amax", "scale", "fprop", "dgrad", "wgrad", "gather", "allreduce", "update", "wait"};
static const char *const OPERAND_NAMES[FP8_TL_NOPERANDS] = {"input", "weight", "grad_output"};

const char *fp8_tl_mode_name(fp8_tl_mode m) {
  return (unsigned)m < FP8_TL_NMODES ? MODE_NAMES[m] : NULL;
}
int fp8_tl_mode_parse(const char *name, fp8_tl_mode *m) {
  for (int i = 0; i < FP8_TL_NMODES; i++)
    if (strcmp(name, MODE_NAMES[i]) == 0) {
      *m = (fp8_tl_mode)i;
      return FP8_OK;
    }
  return FP8_EINVAL;
}
const char *fp8_tl_stream_name(fp8_tl_stream s) { return s == FP8_TL_SIDE ? "side" : "compute"; }
const char *fp8_tl_kind_name(fp8_tl_kind k) {
  return (unsigned)k < FP8_TL_NKINDS ? KIND_NAMES[k] : NULL;
}
const char *fp8_tl_operand_name(fp8_tl_operand o) {
  return (unsigned)o < FP8_TL_NOPERANDS ? OPERAND_NAMES[o] : NULL;
}

int fp8_tl_is_bookkeeping(fp8_tl_mode m, fp8_tl_kind k) {
  if (m == FP8_TL_CURRENT) return k == FP8_TL_AMAX || k == FP8_TL_SCALE || k == FP8_TL_ALLREDUCE;
  return k == FP8_TL_GATHER || k == FP8_TL_ALLREDUCE || k == FP8_TL_UPDATE || k == FP8_TL_WAIT;
}

void fp8_tl_shape_free(fp8_tl_shape *s) {
  if (!s) return;
  for (size_t i = 0; i < s->nlinears; i++) free(s->linears[i].name);
  free(s->linears);
  s->linears = NULL;
  s->nlinears = 0;
}

#define TL_MAX_ELEMENTS ((int64_t)1 << 40)

int fp8_tl_shape_flags(int64_t layers, int64_t hidden, int64_t ffn, int64_t tokens,
                       fp8_tl_shape *s, char *err, size_t errlen) {
  memset(s, 0, sizeof *s);
  if (layers < 1 || hidden < 1 || ffn < 1 || tokens < 1)
    return fp8_errorf(FP8_EINVAL, err, errlen,
                      "--layers, --hidden, --ffn and --tokens must be at least 1 (got %lld, "
                      "%lld, %lld, %lld)", (long long)layers, (long long)hidden, (long long)ffn,
                      (long long)tokens);
  const int64_t big = hidden > ffn ? hidden : ffn;
  if (layers > 4096 || big > TL_MAX_ELEMENTS / tokens || 3 * hidden > TL_MAX_ELEMENTS / big)
    return fp8_errorf(FP8_EINVAL, err, errlen,
                      "shape too large: at most 4096 layers and 2^40 elements per tensor");
  static const char *const names[4] = {"qkv", "proj", "fc1", "fc2"};
  const int64_t in[4] = {hidden, hidden, hidden, ffn}, out[4] = {3 * hidden, hidden, ffn, hidden};
  s->linears = calloc((size_t)layers * 4, sizeof *s->linears);
  if (!s->linears) return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  for (int64_t l = 0; l < layers; l++)
    for (int j = 0; j < 4; j++) {
      fp8_tl_linear *li = &s->linears[s->nlinears++];
      char name[64];
      snprintf(name, sizeof name, "layers.%lld.%s", (long long)l, names[j]);
      li->name = strdup(name);
      if (!li->name) {
        fp8_tl_shape_free(s);
        return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
      }
      *li = (fp8_tl_linear){li->name, tokens, in[j], out[j],
                            {FP8_DTYPE_BF16, FP8_DTYPE_BF16, FP8_DTYPE_BF16}};
    }
  s->layers = layers;
  s->world = 1;
  s->history_len = 1024;
  snprintf(s->source, sizeof s->source, "--layers %lld --hidden %lld --ffn %lld --tokens %lld",
           (long long)layers, (long long)hidden, (long long)ffn, (long long)tokens);
  return FP8_OK;
}

/* ------------------------------------------------------------------ plans */

typedef struct {
  fp8_tl_plan *p;
  size_t cap;
  const fp8_tl_shape *s;
} builder;

static fp8_tl_op *push(builder *b, fp8_tl_kind k, fp8_tl_stream st, int32_t phase,
                       int32_t linear, int32_t operand) {
  if (b->p->nops == b->cap) {
    size_t cap = b->cap ? 2 * b->cap : 64;
    fp8_tl_op *o = realloc(b->p->ops, cap * sizeof *o);
    if (!o) return NULL;
    b->p->ops = o;
    b->cap = cap;
  }
  fp8_tl_op *op = &b->p->ops[b->p->nops++];
  *op = (fp8_tl_op){.kind = k, .stream = st, .phase = phase, .linear = linear,
                    .operand = operand, .launches = 1};
  return op;
}

static void dep(fp8_tl_op *op, int32_t on, int32_t prev) {
  op->dep[op->ndeps++] = (fp8_tl_dep){on, prev};
}

/* Elements and bytes per element of operand o of Linear i. */
static double numel(const fp8_tl_linear *l, fp8_tl_operand o) {
  if (o == FP8_TL_INPUT) return (double)l->tokens * (double)l->in;
  if (o == FP8_TL_WEIGHT) return (double)l->out * (double)l->in;
  return (double)l->tokens * (double)l->out;
}

/* The ops that quantize operand o of Linear i: the cast alone (delayed), or amax, the
 * sequence-parallel all-reduce of activations and gradients, scale and cast (current). */
static int quantize(builder *b, int32_t i, fp8_tl_operand o, int32_t phase) {
  const fp8_tl_linear *l = &b->s->linears[i];
  const double n = numel(l, o), sz = (double)fp8_dtype_size(l->dtype[o]);
  fp8_tl_op *op;
  if (b->p->mode == FP8_TL_CURRENT) {
    if (!(op = push(b, FP8_TL_AMAX, FP8_TL_COMPUTE, phase, i, o))) return FP8_ENOMEM;
    op->bytes = n * sz + 4, op->launches = 2;
    if (b->s->sequence_parallel && b->s->world > 1 && o != FP8_TL_WEIGHT) {
      if (!(op = push(b, FP8_TL_ALLREDUCE, FP8_TL_COMPUTE, phase, i, o))) return FP8_ENOMEM;
      op->bytes = 4, op->count = 1;
    }
    if (!(op = push(b, FP8_TL_SCALE, FP8_TL_COMPUTE, phase, i, o))) return FP8_ENOMEM;
    op->bytes = 8;
  }
  if (!(op = push(b, FP8_TL_CAST, FP8_TL_COMPUTE, phase, i, o))) return FP8_ENOMEM;
  op->bytes = n * (sz + 2) + 8; /* read x; write the codes twice; scale in, scale_inv out */
  return FP8_OK;
}

static int gemm(builder *b, fp8_tl_kind k, int32_t i, int32_t phase) {
  const fp8_tl_linear *l = &b->s->linears[i];
  const double T = (double)l->tokens, I = (double)l->in, O = (double)l->out;
  fp8_tl_op *op = push(b, k, FP8_TL_COMPUTE, phase, i, -1);
  if (!op) return FP8_ENOMEM;
  op->flops = 2 * T * I * O;
  /* FP8 operands read once, BF16 output written: fprop [T,O], dgrad [T,I], wgrad [O,I] */
  const double out = k == FP8_TL_FPROP ? T * O : k == FP8_TL_DGRAD ? T * I : O * I;
  const double a = k == FP8_TL_WGRAD ? O * T + I * T : k == FP8_TL_FPROP ? T * I + O * I
                                                                          : T * O + I * O;
  op->bytes = a + 2 * out;
  return FP8_OK;
}

/* Gather, all-reduce and update of phase ph after op `last` (the phase's last op): on the
 * compute stream (inline), or on the side stream, started by last's event (overlap). No
 * all-reduce at world 1: TE calls it only when the group has more than one rank. */
static int bookkeeping(builder *b, int32_t ph, int32_t last) {
  const int overlap = b->p->mode == FP8_TL_DELAYED_OVERLAP;
  const fp8_tl_stream st = overlap ? FP8_TL_SIDE : FP8_TL_COMPUTE;
  const int64_t n = (int64_t)b->p->nphase[ph == FP8_FWD ? 0 : 1];
  const int32_t L = b->s->history_len;
  fp8_tl_op *op;
  if (!(op = push(b, FP8_TL_GATHER, st, ph, -1, -1))) return FP8_ENOMEM;
  op->bytes = 12.0 * (double)n, op->count = n;
  if (overlap) dep(op, last, 0);
  if (b->s->world > 1) {
    if (!(op = push(b, FP8_TL_ALLREDUCE, st, ph, -1, -1))) return FP8_ENOMEM;
    op->bytes = 4.0 * (double)n, op->count = n;
  }
  if (!(op = push(b, FP8_TL_UPDATE, st, ph, -1, -1))) return FP8_ENOMEM;
  op->bytes = 4.0 * (double)n * (double)L + 16.0 * (double)n, op->count = n;
  return FP8_OK;
}

/* The index of the last op of `kind` in the plan (the update of a phase; -1: none). */
static int32_t last_of(const fp8_tl_plan *p, fp8_tl_kind kind, int32_t phase) {
  for (size_t i = p->nops; i-- > 0;)
    if (p->ops[i].kind == kind && p->ops[i].phase == phase) return (int32_t)i;
  return -1;
}

static int build(builder *b) {
  fp8_tl_plan *p = b->p;
  const int32_t nl = (int32_t)b->s->nlinears;
  const int delayed = p->mode != FP8_TL_CURRENT, keep = delayed && p->mode != FP8_TL_DELAYED_NONE;
  const int overlap = p->mode == FP8_TL_DELAYED_OVERLAP;
  int32_t wait_fwd = -1, wait_bwd = -1;
  int rc = FP8_OK;
  if (overlap) {
    if (!push(b, FP8_TL_WAIT, FP8_TL_COMPUTE, FP8_FWD, -1, -1)) return FP8_ENOMEM;
    wait_fwd = (int32_t)p->nops - 1;
    p->ops[wait_fwd].launches = 0;
  }
  for (int32_t i = 0; i < nl && !rc; i++) {
    rc = quantize(b, i, FP8_TL_INPUT, FP8_FWD);
    if (!rc) rc = quantize(b, i, FP8_TL_WEIGHT, FP8_FWD);
    if (!rc) rc = gemm(b, FP8_TL_FPROP, i, FP8_FWD);
  }
  if (!rc && keep) rc = bookkeeping(b, FP8_FWD, (int32_t)p->nops - 1);
  if (!rc && overlap) {
    if (!push(b, FP8_TL_WAIT, FP8_TL_COMPUTE, FP8_BWD, -1, -1)) return FP8_ENOMEM;
    wait_bwd = (int32_t)p->nops - 1;
    p->ops[wait_bwd].launches = 0;
  }
  for (int32_t i = nl - 1; i >= 0 && !rc; i--) {
    rc = quantize(b, i, FP8_TL_GRAD_OUTPUT, FP8_BWD);
    if (!rc) rc = gemm(b, FP8_TL_DGRAD, i, FP8_BWD);
    if (!rc) rc = gemm(b, FP8_TL_WGRAD, i, FP8_BWD);
  }
  if (!rc && keep) rc = bookkeeping(b, FP8_BWD, (int32_t)p->nops - 1);
  if (rc || !overlap) return rc;
  /* each phase's first cast waits for that phase's update of the step before */
  dep(&p->ops[wait_fwd], last_of(p, FP8_TL_UPDATE, FP8_FWD), 1);
  dep(&p->ops[wait_bwd], last_of(p, FP8_TL_UPDATE, FP8_BWD), 1);
  return FP8_OK;
}

int fp8_tl_plan_build(const fp8_tl_shape *s, fp8_tl_mode m, fp8_tl_plan *out, char *err,
                      size_t errlen) {
  memset(out, 0, sizeof *out);
  if (!s || s->nlinears == 0 || (unsigned)m >= FP8_TL_NMODES || s->history_len < 1)
    return fp8_errorf(FP8_EINVAL, err, errlen, "timeline plan: no Linear layers to run");
  builder b = {out, 0, s};
  out->mode = m;
  const size_t nl = s->nlinears;
  out->phase_tensors[0] = malloc(2 * nl * sizeof(int32_t));
  out->phase_tensors[1] = malloc(nl * sizeof(int32_t));
  int rc = out->phase_tensors[0] && out->phase_tensors[1] ? FP8_OK : FP8_ENOMEM;
  for (size_t i = 0; i < nl && !rc; i++) {
    out->phase_tensors[0][out->nphase[0]++] = (int32_t)fp8_tl_tensor(i, FP8_TL_INPUT);
    out->phase_tensors[0][out->nphase[0]++] = (int32_t)fp8_tl_tensor(i, FP8_TL_WEIGHT);
  }
  for (size_t i = nl; i-- > 0 && !rc;)
    out->phase_tensors[1][out->nphase[1]++] = (int32_t)fp8_tl_tensor(i, FP8_TL_GRAD_OUTPUT);
  if (!rc) rc = build(&b);
  if (rc) {
    fp8_tl_plan_free(out);
    return fp8_errorf(rc, err, errlen, "timeline plan: out of memory");
  }
  return FP8_OK;
}

void fp8_tl_plan_free(fp8_tl_plan *p) {
  if (!p) return;
  free(p->ops);
  free(p->phase_tensors[0]);
  free(p->phase_tensors[1]);
  memset(p, 0, sizeof *p);
}

void fp8_tl_measurement_free(fp8_tl_measurement *m) {
  if (!m) return;
  free(m->rec);
  free(m->update_bench_us);
  free(m->scale_state);
  free(m->amax_state);
  m->scale_state = m->amax_state = NULL;
  m->rec = NULL;
  m->update_bench_us = NULL;
  m->nrec = m->nbench = 0;
}
