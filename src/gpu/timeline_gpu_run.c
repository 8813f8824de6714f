/* timeline_gpu_run.c: the entry point of the GPU timeline (fp8_timeline_gpu_run, timeline.h):
 * two non-blocking streams, an event before and after every op of every step, the steps of
 * the modes interleaved (warm-up, then rounds of a lead-in and a measured step per mode), the
 * update kernel alone, a device copy for the bandwidth ceiling, and the times read back once
 * everything has run (no host synchronisation between steps, so nothing but the plan orders
 * the streams). */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "fp8_check.h"
#include "fp8k.h"
#include "timeline_gpu_internal.h"
#include "util.h"

/* One step of m's plan: the begin event, then per op its waits, start event, work, end event
 * (a wait's waits between its two events, so that they time the stall). */
static int run_step(tl_run *r, tl_mode *m, char *err, size_t errlen) {
  int rc = FP8_OK;
  const fp8_tl_plan *p = m->plan;
  const int32_t it = m->iters++;
  cudaEvent_t *ev = (cudaEvent_t *)m->ev + (size_t)it * p->nops * 2;
  FP8G_CUDA(cudaEventRecord((cudaEvent_t)m->begin[it], (cudaStream_t)r->st[FP8_TL_COMPUTE]));
  for (size_t i = 0; i < p->nops; i++) {
    const fp8_tl_op *op = &p->ops[i];
    cudaStream_t s = (cudaStream_t)r->st[op->stream];
    for (int pass = 0; pass < 2; pass++) {
      if ((pass == 0) == (op->kind == FP8_TL_WAIT)) { /* waits: before the start, or inside */
        FP8G_CUDA(cudaEventRecord(ev[2 * i], s));
        continue;
      }
      for (int j = 0; j < op->ndeps && !r->a->skip_join; j++) {
        const fp8_tl_dep d = op->dep[j];
        if (d.prev && it == 0) continue;
        cudaEvent_t *de = (cudaEvent_t *)m->ev + (size_t)(it - d.prev) * p->nops * 2;
        FP8G_CUDA(cudaStreamWaitEvent(s, de[2 * (size_t)d.op + 1], 0));
      }
      if (pass == 1 && op->kind != FP8_TL_WAIT) FP8G_CUDA(cudaEventRecord(ev[2 * i], s));
    }
    if ((rc = tl_run_work(r, m, i, err, errlen))) goto done;
    FP8G_CUDA(cudaEventRecord(ev[2 * i + 1], s));
  }
done:
  return rc;
}

static int make_events(void **ev, size_t n, char *err, size_t errlen) {
  int rc = FP8_OK;
  for (size_t i = 0; i < n; i++) FP8G_CUDA(cudaEventCreate((cudaEvent_t *)&ev[i]));
done:
  return rc;
}

static double elapsed_us(void *a, void *b, int *rc, char *err, size_t errlen) {
  float ms = 0;
  cudaError_t e = cudaEventElapsedTime(&ms, (cudaEvent_t)a, (cudaEvent_t)b);
  if (e != cudaSuccess && *rc == FP8_OK)
    *rc = fp8_errorf(FP8_EDEVICE, err, errlen, "cudaEventElapsedTime failed: %s",
                     cudaGetErrorString(e));
  return (double)ms * 1e3;
}

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return a < b ? -1 : a > b;
}

/* reps runs of issue() on stream s, each between two events and waited for: us[reps]. */
typedef int (*issue_fn)(void *ctx, cudaStream_t s, char *err, size_t errlen);
static int time_reps(cudaStream_t s, int reps, issue_fn issue, void *ctx, double *us, char *err,
                     size_t errlen) {
  int rc = FP8_OK;
  cudaEvent_t e[2] = {NULL, NULL};
  FP8G_CUDA(cudaEventCreate(&e[0]));
  FP8G_CUDA(cudaEventCreate(&e[1]));
  for (int k = 0; k < reps && !rc; k++) {
    FP8G_CUDA(cudaEventRecord(e[0], s));
    if ((rc = issue(ctx, s, err, errlen))) goto done;
    FP8G_CUDA(cudaEventRecord(e[1], s));
    FP8G_CUDA(cudaEventSynchronize(e[1]));
    us[k] = elapsed_us(e[0], e[1], &rc, err, errlen);
  }
done:
  if (e[0]) cudaEventDestroy(e[0]);
  if (e[1]) cudaEventDestroy(e[1]);
  return rc;
}

/* The update benchmark's state: n slots at history L, every one updated with amax[slot]. */
typedef struct {
  int32_t n;
  float *ring, *scale, *amax, *smax;
  int64_t *off;
  int32_t *head, *hlen, *acomp, *idx;
} update_bench;

static int issue_update(void *ctx, cudaStream_t s, char *err, size_t errlen) {
  update_bench *b = ctx;
  return fp8k_delayed_update_indexed_async(s, b->n, b->ring, b->off, b->head, b->scale, b->amax,
                                           b->idx, b->hlen, b->acomp, b->smax, NULL, err, errlen);
}

/* The update kernel alone: n tensors at history L, every slot updated, reps launches timed. */
static int bench_update(tl_run *r, fp8_tl_measurement *out, char *err, size_t errlen) {
  int rc = FP8_OK;
  const int32_t n = r->a->bench_tensors, L = r->a->bench_history, reps = r->a->bench_reps;
  if (n <= 0 || L <= 0 || reps <= 0) return FP8_OK;
  update_bench b = {.n = n};
  float *amax = malloc((size_t)n * sizeof *amax), *smax = malloc((size_t)n * sizeof *smax);
  int64_t *off = malloc((size_t)n * sizeof *off);
  int32_t *idx = malloc((size_t)n * sizeof *idx), *hlen = malloc((size_t)n * sizeof *hlen);
  out->update_bench_us = calloc((size_t)reps, sizeof *out->update_bench_us);
  FP8G_REQUIRE(amax && smax && off && idx && hlen && out->update_bench_us, FP8_ENOMEM,
               "out of memory");
  for (int32_t i = 0; i < n; i++)
    amax[i] = 1.0f + (float)(i % 97), smax[i] = 448.0f, off[i] = (int64_t)i * L, idx[i] = i,
    hlen[i] = L;
  const size_t nf = (size_t)n * sizeof(float), ni = (size_t)n * sizeof(int32_t);
  FP8G_CUDA(cudaMalloc((void **)&b.ring, nf * (size_t)L));
  FP8G_CUDA(cudaMemset(b.ring, 0, nf * (size_t)L));
  FP8G_CUDA(cudaMalloc((void **)&b.head, ni));
  FP8G_CUDA(cudaMemset(b.head, 0, ni));
  FP8G_CUDA(cudaMalloc((void **)&b.acomp, ni));
  FP8G_CUDA(cudaMemset(b.acomp, 0, ni)); /* FP8_AMAX_MAX */
  if ((rc = tl_dmalloc_copy((void **)&b.amax, amax, nf, err, errlen)) ||
      (rc = tl_dmalloc_copy((void **)&b.smax, smax, nf, err, errlen)) ||
      (rc = tl_dmalloc_copy((void **)&b.scale, smax, nf, err, errlen)) ||
      (rc = tl_dmalloc_copy((void **)&b.off, off, (size_t)n * sizeof(int64_t), err, errlen)) ||
      (rc = tl_dmalloc_copy((void **)&b.idx, idx, ni, err, errlen)) ||
      (rc = tl_dmalloc_copy((void **)&b.hlen, hlen, ni, err, errlen)))
    goto done;
  rc = time_reps((cudaStream_t)r->st[FP8_TL_COMPUTE], reps, issue_update, &b,
                 out->update_bench_us, err, errlen);
  if (!rc) out->nbench = (size_t)reps;
done:
  cudaFree(b.ring), cudaFree(b.scale), cudaFree(b.amax), cudaFree(b.smax), cudaFree(b.off);
  cudaFree(b.head), cudaFree(b.hlen), cudaFree(b.acomp), cudaFree(b.idx);
  free(amax), free(smax), free(off), free(idx), free(hlen);
  return rc;
}

typedef struct {
  void *dst;
  const void *src;
  size_t bytes;
} copy_bench;

static int issue_copy(void *ctx, cudaStream_t s, char *err, size_t errlen) {
  copy_bench *c = ctx;
  int rc = FP8_OK;
  FP8G_CUDA(cudaMemcpyAsync(c->dst, c->src, c->bytes, cudaMemcpyDeviceToDevice, s));
done:
  return rc;
}

/* The device-to-device copy of the largest operand buffer: the bandwidth ceiling (bytes read +
 * written), median of 5. */
static int bench_copy(tl_run *r, fp8_tl_measurement *out, char *err, size_t errlen) {
  int rc = FP8_OK;
  copy_bench c = {NULL, NULL, 0};
  double t[5];
  for (int o = 0; o < 3; o++)
    for (int d = 0; d < 3; d++)
      if (r->xcap[o][d] > c.bytes) c.bytes = r->xcap[o][d], c.src = r->x[o][d];
  if (!c.src) return FP8_OK;
  FP8G_CUDA(cudaMalloc(&c.dst, c.bytes));
  rc = time_reps((cudaStream_t)r->st[FP8_TL_COMPUTE], 5, issue_copy, &c, t, err, errlen);
  if (rc) goto done;
  qsort(t, 5, sizeof *t, cmp_double);
  out->copy_gbps = t[2] > 0 ? 2.0 * (double)c.bytes / (t[2] * 1e3) : 0.0;
done:
  cudaFree(c.dst);
  return rc;
}

/* Every op's times, in the order the steps were issued (order[] holds plan, iter and step). */
static int collect(tl_run *r, const int32_t (*order)[3], size_t nsteps, fp8_tl_measurement *out,
                   char *err, size_t errlen) {
  int rc = FP8_OK;
  size_t n = 0;
  for (size_t k = 0; k < nsteps; k++) n += r->m[order[k][0]].plan->nops;
  out->rec = calloc(n ? n : 1, sizeof *out->rec);
  if (!out->rec) return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  for (size_t k = 0; k < nsteps && !rc; k++) {
    tl_mode *m = &r->m[order[k][0]];
    const int32_t it = order[k][1];
    void **ev = m->ev + (size_t)it * m->plan->nops * 2;
    for (size_t i = 0; i < m->plan->nops && !rc; i++) {
      fp8_tl_record *x = &out->rec[out->nrec++];
      *x = (fp8_tl_record){order[k][0], it, order[k][2], (int32_t)i, 0, 0, {ev[2 * i], ev[2 * i + 1]}};
      x->start_us = elapsed_us(m->begin[it], ev[2 * i], &rc, err, errlen);
      x->end_us = elapsed_us(m->begin[it], ev[2 * i + 1], &rc, err, errlen);
    }
  }
  return rc;
}

/* Each plan's scales after its last step, and the amaxes they came from. */
static int collect_state(tl_run *r, fp8_tl_measurement *out, char *err, size_t errlen) {
  int rc = FP8_OK;
  const size_t nt = r->nt, np = r->a->nplans;
  float *red = malloc((nt ? nt : 1) * sizeof *red);
  out->ntensors = nt;
  out->scale_state = calloc(np * nt + 1, sizeof(float));
  out->amax_state = calloc(np * nt + 1, sizeof(float));
  FP8G_REQUIRE(red && out->scale_state && out->amax_state, FP8_ENOMEM, "out of memory");
  for (size_t k = 0; k < np; k++) {
    tl_mode *m = &r->m[k];
    float *as = out->amax_state + k * nt;
    FP8G_CUDA(cudaMemcpy(out->scale_state + k * nt, m->scale, nt * sizeof(float),
                         cudaMemcpyDeviceToHost));
    FP8G_CUDA(cudaMemcpy(as, m->amax, nt * sizeof(float), cudaMemcpyDeviceToHost));
    const int gathered = m->plan->mode == FP8_TL_DELAYED_INLINE ||
                         m->plan->mode == FP8_TL_DELAYED_OVERLAP;
    for (int ph = 0; ph < 2 && gathered; ph++) {
      const size_t n = m->plan->nphase[ph];
      FP8G_CUDA(cudaMemcpy(red, m->red[ph], n * sizeof(float), cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < n; i++) as[m->plan->phase_tensors[ph][i]] = red[i];
    }
  }
done:
  free(red);
  return rc;
}

static int check_args(const fp8_tl_gpu_args *a, char *err, size_t errlen) {
  int rc = FP8_OK;
  FP8G_REQUIRE(a && a->shape && a->shape->nlinears > 0 && a->plans && a->nplans > 0,
               FP8_EINVAL, "fp8_timeline_gpu_run: nothing to run");
  FP8G_REQUIRE(a->steps >= 1 && a->warmup >= 0 && a->steps <= 1000 && a->warmup <= 1000,
               FP8_EINVAL, "fp8_timeline_gpu_run: steps %d, warm-up %d (1..1000, 0..1000)",
               (int)a->steps, (int)a->warmup);
  FP8G_REQUIRE(a->shape->history_len >= 1 && a->shape->history_len <= FP8_HISTORY_LIMIT,
               FP8_EINVAL, "fp8_timeline_gpu_run: history length %d outside [1, %d]",
               (int)a->shape->history_len, FP8_HISTORY_LIMIT);
  for (size_t k = 0; k < a->nplans; k++)
    FP8G_REQUIRE(a->plans[k].nops > 0, FP8_EINVAL, "fp8_timeline_gpu_run: plan %zu is empty", k);
done:
  return rc;
}

/* Streams, cuBLASLt, NCCL, buffers, every plan's state and events. */
static int setup(tl_run *r, fp8_tl_measurement *out, char *err, size_t errlen) {
  int rc = FP8_OK;
  const fp8_tl_gpu_args *a = r->a;
  const size_t iters = (size_t)a->warmup + 2 * (size_t)a->steps;
  fp8_gpu_info info;
  char why[256] = "";
  if ((rc = fp8_gpu_require_fp8(0, &info, err, errlen))) goto done;
  snprintf(out->device, sizeof out->device, "%.120s (sm_%d%d, %d SMs), driver %d.%d, runtime %d.%d",
           info.name, info.cc_major, info.cc_minor, info.sm_count, info.driver_version / 1000,
           info.driver_version % 1000 / 10, info.runtime_version / 1000,
           info.runtime_version % 1000 / 10);
  FP8G_CUDA(cudaSetDevice(0));
  for (int s = 0; s < FP8_TL_NSTREAMS; s++)
    FP8G_CUDA(cudaStreamCreateWithFlags((cudaStream_t *)&r->st[s], cudaStreamNonBlocking));
  if ((rc = fp8_gemm_lt_create(&r->lt, 0, err, errlen))) goto done;
  fp8_gemm_lt_set_stream(r->lt, r->st[FP8_TL_COMPUTE]);
  r->nccl = tl_nccl_open(a->nccl_library, why, sizeof why);
  out->allreduce = r->nccl != NULL;
  snprintf(out->nccl, sizeof out->nccl, "%s", r->nccl ? tl_nccl_describe(r->nccl) : why);
  if ((rc = tl_alloc_data(r, err, errlen))) goto done;
  r->m = calloc(a->nplans, sizeof *r->m);
  FP8G_REQUIRE(r->m, FP8_ENOMEM, "out of memory");
  for (size_t k = 0; k < a->nplans; k++) {
    tl_mode *m = &r->m[k];
    if ((rc = tl_alloc_mode(r, m, &a->plans[k], err, errlen))) goto done;
    m->ev = calloc(iters * a->plans[k].nops * 2, sizeof *m->ev);
    m->begin = calloc(iters, sizeof *m->begin);
    FP8G_REQUIRE(m->ev && m->begin, FP8_ENOMEM, "out of memory");
    if ((rc = make_events(m->ev, iters * a->plans[k].nops * 2, err, errlen))) goto done;
    if ((rc = make_events(m->begin, iters, err, errlen))) goto done;
  }
  /* the setup's cudaMemset calls run on the legacy stream, which the non-blocking streams do
   * not wait for */
  FP8G_CUDA(cudaDeviceSynchronize());
done:
  return rc;
}

static void teardown(tl_run *r) {
  const size_t iters = (size_t)r->a->warmup + 2 * (size_t)r->a->steps;
  if (r->st[0]) cudaStreamSynchronize((cudaStream_t)r->st[0]);
  if (r->st[1]) cudaStreamSynchronize((cudaStream_t)r->st[1]);
  for (size_t k = 0; r->m && k < r->a->nplans; k++) {
    tl_mode *m = &r->m[k];
    for (size_t i = 0; m->ev && i < iters * m->plan->nops * 2; i++)
      if (m->ev[i]) cudaEventDestroy((cudaEvent_t)m->ev[i]);
    for (size_t i = 0; m->begin && i < iters; i++)
      if (m->begin[i]) cudaEventDestroy((cudaEvent_t)m->begin[i]);
    tl_free_mode(m);
  }
  free(r->m);
  for (int o = 0; o < 3; o++) {
    cudaFree(r->q[o]), cudaFree(r->qt[o]);
    for (int d = 0; d < 3; d++) cudaFree(r->x[o][d]);
  }
  cudaFree(r->y);
  tl_nccl_close(r->nccl);
  fp8_gemm_lt_free(r->lt);
  for (int s = 0; s < FP8_TL_NSTREAMS; s++)
    if (r->st[s]) cudaStreamDestroy((cudaStream_t)r->st[s]);
}

int fp8_timeline_gpu_run(const fp8_tl_gpu_args *a, fp8_tl_measurement *out,
                                    char *err, size_t errlen) {
  tl_run r;
  int32_t(*order)[3] = NULL;
  size_t n = 0;
  memset(&r, 0, sizeof r);
  memset(out, 0, sizeof *out);
  int rc = check_args(a, err, errlen);
  if (rc) return rc;
  r.a = a;
  r.nt = 3 * a->shape->nlinears;
  order = calloc(a->nplans * ((size_t)a->warmup + 2 * (size_t)a->steps), sizeof *order);
  if (!order) return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  if ((rc = setup(&r, out, err, errlen))) goto done;
  /* warm-up per mode, then rounds: every mode a lead-in step and a measured step */
  for (size_t k = 0; k < a->nplans && !rc; k++)
    for (int32_t w = 0; w < a->warmup && !rc; w++) {
      order[n][0] = (int32_t)k, order[n][1] = r.m[k].iters, order[n++][2] = -1;
      rc = run_step(&r, &r.m[k], err, errlen);
    }
  for (int32_t s = 0; s < a->steps && !rc; s++)
    for (size_t k = 0; k < a->nplans && !rc; k++)
      for (int lead = 1; lead >= 0 && !rc; lead--) {
        order[n][0] = (int32_t)k, order[n][1] = r.m[k].iters, order[n++][2] = lead ? -1 : s;
        rc = run_step(&r, &r.m[k], err, errlen);
      }
  if (rc) goto done;
  for (int s = 0; s < FP8_TL_NSTREAMS; s++) {
    cudaError_t e = cudaStreamSynchronize((cudaStream_t)r.st[s]);
    if (e != cudaSuccess) {
      rc = fp8_errorf(FP8_EDEVICE, err, errlen, "the timeline's steps failed on the device: %s",
                      cudaGetErrorString(e));
      goto done;
    }
  }
  if ((rc = collect(&r, (const int32_t(*)[3])order, n, out, err, errlen))) goto done;
  if ((rc = collect_state(&r, out, err, errlen))) goto done;
  if ((rc = bench_update(&r, out, err, errlen))) goto done;
  rc = bench_copy(&r, out, err, errlen);
done:
  teardown(&r);
  free(order);
  if (rc) fp8_tl_measurement_free(out);
  return rc;
}
