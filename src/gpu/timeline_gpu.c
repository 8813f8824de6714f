/* timeline_gpu.c: `fp8lab timeline` on a GPU: runs the plans of src/timeline/timeline.h (one
 * training step's ops per mode) on two streams and times every op with CUDA events. Exported
 * by the GPU module as fp8_timeline_gpu_run; the same file over the CUDA emulator and the
 * mocks is what tests/gpu/test_timeline_gpu.c checks in CI (the dependencies of every op, read
 * from the mock's CUDA call log, against the step's data flow).
 *
 * What runs, per op (kernels/timeline.cu, gemm_lt.c):
 *   cast       fp8k_tl_cast_transpose: the operand's codes row-wise and transposed, scale_inv,
 *              and (delayed modes) the atomic amax into the tensor's amax slot, TE's
 *              cast_transpose on Hopper
 *   amax       fp8k_tl_amax (memset + amax pass), scale: fp8k_tl_current_scale (current)
 *   fprop/dgrad/wgrad  fp8_gemm_lt_fp8_tn on the cast's copies (no GEMM-side copies), BF16 out
 *   gather     fp8k_tl_amax_gather: the phase's amax slots into one buffer, slots zeroed
 *   allreduce  NCCL all-reduce MAX on that buffer (a world of one: timeline_nccl.c)
 *   update     fp8k_delayed_update_indexed_async: every slot of the phase, one launch
 *   wait       cudaStreamWaitEvent on the update's event (the op's events bracket it)
 * Every dependency of the plan is a cudaStreamWaitEvent on the end event of the op it names
 * (of this step, or of the same plan's previous step), issued before the op's start event.
 *
 * Memory: one buffer per operand (and source dtype) holds the largest such tensor of any
 * Linear, and every Linear uses it, so a 24-layer model needs the memory of one layer: every
 * tensor is read from and written to device memory either way (each is far larger than L2, or
 * separated from its next use by larger ones), so the times are those of distinct buffers. The
 * values are random (fp8k_tl_fill); GEMM and cast times do not depend on them to first order.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8.h"
#include "fp8_check.h"
#include "fp8k.h"
#include "gemm_lt.h"
#include "timeline.h"
#include "timeline_gpu_internal.h"
#include "timeline_nccl.h"

/* ------------------------------------------------------------------ buffers */

static size_t elems(const fp8_tl_linear *l, int o) {
  return o == FP8_TL_INPUT    ? (size_t)(l->tokens * l->in)
         : o == FP8_TL_WEIGHT ? (size_t)(l->out * l->in)
                              : (size_t)(l->tokens * l->out);
}

/* The operand buffers (one per operand and dtype, filled once), the FP8 copies and the GEMM
 * output, sized by the largest Linear. */
int tl_alloc_data(tl_run *r, char *err, size_t errlen) {
  int rc = FP8_OK;
  const fp8_tl_shape *s = r->a->shape;
  size_t maxn[3] = {0}, maxy = 0;
  for (size_t i = 0; i < s->nlinears; i++) {
    const fp8_tl_linear *l = &s->linears[i];
    for (int o = 0; o < 3; o++) {
      size_t n = elems(l, o);
      if (n > maxn[o]) maxn[o] = n;
      if (n * fp8_dtype_size(l->dtype[o]) > r->xcap[o][l->dtype[o]])
        r->xcap[o][l->dtype[o]] = n * fp8_dtype_size(l->dtype[o]);
    }
    size_t y[3] = {(size_t)(l->tokens * l->out), (size_t)(l->tokens * l->in),
                   (size_t)(l->out * l->in)};
    for (int g = 0; g < 3; g++)
      if (y[g] > maxy) maxy = y[g];
  }
  for (int o = 0; o < 3; o++) {
    FP8G_CUDA(cudaMalloc((void **)&r->q[o], maxn[o] ? maxn[o] : 1));
    FP8G_CUDA(cudaMalloc((void **)&r->qt[o], maxn[o] ? maxn[o] : 1));
    for (int d = 0; d < 3; d++) {
      if (!r->xcap[o][d]) continue;
      FP8G_CUDA(cudaMalloc(&r->x[o][d], r->xcap[o][d]));
      rc = fp8k_tl_fill(r->st[0], r->x[o][d], d, (int64_t)(r->xcap[o][d] / fp8_dtype_size(d)),
                        (uint64_t)(17 + 3 * o + d), fp8_tl_fill_amplitude((fp8_tl_operand)o),
                        err, errlen);
      if (rc) goto done;
    }
  }
  FP8G_CUDA(cudaMalloc(&r->y, 2 * (maxy ? maxy : 1)));
  FP8G_CUDA(cudaStreamSynchronize(r->st[0]));
done:
  return rc;
}

int tl_dmalloc_copy(void **d, const void *h, size_t bytes, char *err, size_t errlen) {
  int rc = FP8_OK;
  FP8G_CUDA(cudaMalloc(d, bytes ? bytes : 4));
  if (bytes) FP8G_CUDA(cudaMemcpy(*d, h, bytes, cudaMemcpyHostToDevice));
done:
  return rc;
}

/* One plan's recipe state: amax slots, scales, scale_invs, and for the delayed modes the
 * history rings (one per tensor, length L), the gather indices and buffers per phase. */
int tl_alloc_mode(tl_run *r, tl_mode *m, const fp8_tl_plan *p, char *err, size_t errlen) {
  int rc = FP8_OK;
  const size_t nt = r->nt;
  const int32_t L = r->a->shape->history_len;
  float *ones = malloc(nt * sizeof *ones) /* the first scales */, *smax = malloc(nt * sizeof *smax);
  int32_t *i32 = malloc(nt * sizeof *i32), *hlen = malloc(nt * sizeof *hlen);
  int64_t *off = malloc(nt * sizeof *off);
  FP8G_REQUIRE(ones && smax && i32 && hlen && off, FP8_ENOMEM, "out of memory");
  m->plan = p;
  for (size_t t = 0; t < nt; t++) { /* the scales start where the data settles them */
    const fp8_tl_operand o = (fp8_tl_operand)(t % 3);
    smax[t] = fp8_scaled_max(fp8_tl_format(o), 0);
    ones[t] = smax[t] / fp8_tl_fill_amplitude(o);
    hlen[t] = L;
    off[t] = (int64_t)t * L;
  }
  FP8G_CUDA(cudaMalloc((void **)&m->amax, nt * sizeof(float)));
  FP8G_CUDA(cudaMemset(m->amax, 0, nt * sizeof(float)));
  if ((rc = tl_dmalloc_copy((void **)&m->scale, ones, nt * sizeof(float), err, errlen))) goto done;
  FP8G_CUDA(cudaMalloc((void **)&m->sinv, nt * sizeof(float)));
  if ((rc = tl_dmalloc_copy((void **)&m->smax, smax, nt * sizeof(float), err, errlen))) goto done;
  if ((rc = tl_dmalloc_copy((void **)&m->hlen, hlen, nt * sizeof(int32_t), err, errlen))) goto done;
  if ((rc = tl_dmalloc_copy((void **)&m->ring_off, off, nt * sizeof(int64_t), err, errlen)))
    goto done;
  FP8G_CUDA(cudaMalloc((void **)&m->ring, nt * (size_t)L * sizeof(float)));
  FP8G_CUDA(cudaMemset(m->ring, 0, nt * (size_t)L * sizeof(float)));
  FP8G_CUDA(cudaMalloc((void **)&m->head, nt * sizeof(int32_t)));
  FP8G_CUDA(cudaMemset(m->head, 0, nt * sizeof(int32_t)));
  FP8G_CUDA(cudaMalloc((void **)&m->acomp, nt * sizeof(int32_t)));
  FP8G_CUDA(cudaMemset(m->acomp, 0, nt * sizeof(int32_t))); /* FP8_AMAX_MAX */
  for (int ph = 0; ph < 2; ph++) {
    const size_t n = p->nphase[ph];
    rc = tl_dmalloc_copy((void **)&m->gidx[ph], p->phase_tensors[ph], n * sizeof(int32_t), err,
                      errlen);
    if (rc) goto done;
    for (size_t t = 0; t < nt; t++) i32[t] = -1; /* slot t reads red[ph][position of t] */
    for (size_t i = 0; i < n; i++) i32[p->phase_tensors[ph][i]] = (int32_t)i;
    if ((rc = tl_dmalloc_copy((void **)&m->uidx[ph], i32, nt * sizeof(int32_t), err, errlen)))
      goto done;
    FP8G_CUDA(cudaMalloc((void **)&m->red[ph], (n ? n : 1) * sizeof(float)));
    FP8G_CUDA(cudaMemset(m->red[ph], 0, (n ? n : 1) * sizeof(float)));
  }
done:
  free(ones), free(smax), free(i32), free(hlen), free(off);
  return rc;
}

void tl_free_mode(tl_mode *m) {
  cudaFree(m->amax), cudaFree(m->scale), cudaFree(m->sinv), cudaFree(m->smax);
  cudaFree(m->ring), cudaFree(m->ring_off), cudaFree(m->head), cudaFree(m->hlen);
  cudaFree(m->acomp);
  for (int ph = 0; ph < 2; ph++) cudaFree(m->gidx[ph]), cudaFree(m->uidx[ph]), cudaFree(m->red[ph]);
  free(m->ev);
  free(m->begin);
}

/* ------------------------------------------------------------------ ops */

static int run_gemm(tl_run *r, tl_mode *m, const fp8_tl_op *op, char *err, size_t errlen) {
  const fp8_tl_linear *l = &r->a->shape->linears[op->linear];
  const size_t tx = fp8_tl_tensor((size_t)op->linear, FP8_TL_INPUT);
  const size_t tw = tx + 1, tg = tx + 2;
  fp8_lt_operand P, Q;
  int64_t M, N, K;
  fp8_gemm_kind g;
  if (op->kind == FP8_TL_FPROP) {
    g = FP8_GEMM_FPROP, M = l->tokens, N = l->out, K = l->in;
    P = (fp8_lt_operand){r->q[0], &m->sinv[tx], FP8_E4M3};
    Q = (fp8_lt_operand){r->q[1], &m->sinv[tw], FP8_E4M3};
  } else if (op->kind == FP8_TL_DGRAD) {
    g = FP8_GEMM_DGRAD, M = l->tokens, N = l->in, K = l->out;
    P = (fp8_lt_operand){r->q[2], &m->sinv[tg], FP8_E5M2};
    Q = (fp8_lt_operand){r->qt[1], &m->sinv[tw], FP8_E4M3};
  } else {
    g = FP8_GEMM_WGRAD, M = l->out, N = l->in, K = l->tokens;
    P = (fp8_lt_operand){r->qt[2], &m->sinv[tg], FP8_E5M2};
    Q = (fp8_lt_operand){r->qt[0], &m->sinv[tx], FP8_E4M3};
  }
  return fp8_gemm_lt_fp8_tn(r->lt, g, &P, &Q, M, N, K, FP8_LT_BF16, r->y, NULL, err, errlen);
}

/* The work of op i of m's plan on its stream (its waits and events are the caller's). */
int tl_run_work(tl_run *r, tl_mode *m, size_t i, char *err, size_t errlen) {
  const fp8_tl_op *op = &m->plan->ops[i];
  void *s = r->st[op->stream];
  const int ph = op->phase == FP8_BWD;
  const int current = m->plan->mode == FP8_TL_CURRENT;
  if (op->linear < 0) { /* a phase's bookkeeping, or a wait */
    const int32_t n = (int32_t)m->plan->nphase[ph];
    switch (op->kind) {
    case FP8_TL_GATHER:
      return fp8k_tl_amax_gather(s, m->amax, m->gidx[ph], n, m->red[ph], err, errlen);
    case FP8_TL_ALLREDUCE:
      return r->nccl ? tl_nccl_allreduce_max(r->nccl, m->red[ph], (size_t)n, s, err, errlen)
                     : FP8_OK;
    case FP8_TL_UPDATE:
      return fp8k_delayed_update_indexed_async(s, (int32_t)r->nt, m->ring, m->ring_off, m->head,
                                               m->scale, m->red[ph], m->uidx[ph], m->hlen,
                                               m->acomp, m->smax, NULL, err, errlen);
    default:
      return FP8_OK;
    }
  }
  const fp8_tl_linear *l = &r->a->shape->linears[op->linear];
  if (op->operand < 0) return run_gemm(r, m, op, err, errlen);
  const int o = op->operand;
  const size_t t = fp8_tl_tensor((size_t)op->linear, (fp8_tl_operand)o);
  const int64_t rows = o == FP8_TL_WEIGHT ? l->out : l->tokens;
  const int64_t cols = o == FP8_TL_GRAD_OUTPUT ? l->out : l->in;
  const void *x = r->x[o][l->dtype[o]];
  switch (op->kind) {
  case FP8_TL_AMAX:
    return fp8k_tl_amax(s, x, (int)l->dtype[o], rows * cols, &m->amax[t], err, errlen);
  case FP8_TL_ALLREDUCE:
    return r->nccl ? tl_nccl_allreduce_max(r->nccl, &m->amax[t], 1, s, err, errlen) : FP8_OK;
  case FP8_TL_SCALE: {
    fp8k_current_params cp = {0.0f, 0, 0, (int32_t)fp8_tl_format((fp8_tl_operand)o)};
    return fp8k_tl_current_scale(s, &m->amax[t], &cp, &m->scale[t], err, errlen);
  }
  default: /* FP8_TL_CAST */
    return fp8k_tl_cast_transpose(s, x, (int)l->dtype[o], rows, cols, &m->scale[t],
                                  (int)fp8_tl_format((fp8_tl_operand)o), r->q[o], r->qt[o],
                                  &m->sinv[t], current ? NULL : &m->amax[t], err, errlen);
  }
}
