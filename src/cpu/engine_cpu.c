/* engine_cpu.c: the CPU engine (engine_cpu.h), the GPU engine's peer (src/gpu/engine_gpu.c):
 * the simulator (src/sim) and the GEMM-error reference (src/engine/gemm.h) behind engine.h's
 * op table, a queue and worker threads; the one CPU path of a replay.
 *
 * It owns a fp8_delayed_state (src/sim/delayed.c) per active delayed (tensor, configuration) and
 * is the only caller of fp8_delayed_update in a run. load only notes the view; quantize_stats
 * and gemm queue their work, and sync runs the queue on plan->threads worker threads (quantize
 * tasks first, in queue order, then gemm tasks, whose scales come from those results), each
 * worker with its own scratch buffers, kept for the run. Results do not depend on the number
 * of threads: every task writes only its own outputs, with the simulator's fixed order of
 * arithmetic. The work of one task is in engine_cpu_work.c.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_cpu.h"
#include "engine_cpu_internal.h"
#include "engine_impl.h"
#include "gemm.h"
#include "util.h"

#define CPU_MAX_THREADS 64

static int cpu_supports(const fp8_engine *e, fp8_engine_op op, size_t c) {
  (void)e;
  (void)op;
  (void)c;
  return 1; /* the oracle runs everything */
}

static int cpu_begin_step(fp8_engine *e, int64_t step, char *err, size_t errlen) {
  (void)err;
  (void)errlen;
  cpu_priv *p = e->priv;
  p->step = step;
  memset(p->view, 0, p->plan.ntensors * sizeof *p->view);
  return FP8_OK;
}

static int cpu_load(fp8_engine *e, size_t t, const fp8_tensor_view *v, char *err, size_t errlen) {
  cpu_priv *p = e->priv;
  if (t >= p->plan.ntensors) return fp8_errorf(FP8_EINVAL, err, errlen, "load: tensor %zu of %zu", t, p->plan.ntensors);
  p->view[t] = v;
  return FP8_OK;
}

static int queue(cpu_priv *p, const cpu_task *task, char *err, size_t errlen) {
  cpu_task *nt = fp8_grow(p->tasks, p->ntasks, &p->cap, sizeof *p->tasks, 64);
  if (!nt) return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  p->tasks = nt;
  p->tasks[p->ntasks++] = *task;
  return FP8_OK;
}

static int cpu_quantize_stats(fp8_engine *e, size_t t, fp8_tensor_result *out, char *err,
                              size_t errlen) {
  cpu_priv *p = e->priv;
  if (t >= p->plan.ntensors || !p->view[t])
    return fp8_errorf(FP8_EINVAL, err, errlen, "quantize_stats: tensor %zu is not loaded", t);
  cpu_task task = {.is_gemm = 0, .t = t, .out = out};
  return queue(p, &task, err, errlen);
}

static int cpu_gemm(fp8_engine *e, const fp8_engine_layer *l, const fp8_gemm_request *req,
                    size_t nreq, char *err, size_t errlen) {
  cpu_priv *p = e->priv;
  for (int i = 0; i < 3; i++)
    if (l->tensor[i] >= p->plan.ntensors || !p->view[l->tensor[i]])
      return fp8_errorf(FP8_EINVAL, err, errlen, "layer %s: operand %d is not loaded", l->name, i);
  for (size_t q = 0; q < nreq; q++)
    for (int i = 0; i < 3; i++)
      if (req[q].config[i] >= p->plan.nconfigs)
        return fp8_errorf(FP8_EINVAL, err, errlen, "layer %s: GEMM request %zu: configuration %zu",
                          l->name, q, req[q].config[i]);
  fp8_gemm_request *w = malloc((nreq + 1) * sizeof *w);
  if (!w) return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  if (nreq) memcpy(w, req, nreq * sizeof *w);
  cpu_task task = {.is_gemm = 1, .layer = *l, .req = w, .nreq = nreq};
  int rc = queue(p, &task, err, errlen);
  if (rc) free(w);
  return rc;
}

static int cpu_cast(fp8_engine *e, size_t t, size_t c, uint8_t *codes, char *err, size_t errlen) {
  cpu_priv *p = e->priv;
  if (t >= p->plan.ntensors || !p->view[t] || c >= p->plan.nconfigs ||
      fp8_recipe_kind_is_block(p->plan.configs[c].kind) || !fp8_plan_active(&p->plan, c))
    return fp8_errorf(FP8_EINVAL, err, errlen, "cast: tensor %zu, configuration %zu", t, c);
  const fp8_tensor_view *v = p->view[t];
  size_t n = (size_t)v->numel;
  cpu_scratch *w = &p->scratch[0];
  if (cpu_reserve(&w->x, &w->xcap, n))
    return fp8_errorf(FP8_ENOMEM, err, errlen, "tensor %s: out of memory", v->name);
  fp8_dtype_to_f32(v->dtype, v->data, n, w->x);
  float s = cpu_config_scale(p, t, c, fp8_amax_f32(w->x, n));
  fp8_quantize_f32(w->x, n, s, fp8_plan_format(&p->plan, t, c), codes, NULL, NULL);
  return FP8_OK;
}

/* ------------------------------------------------------------------ the queue */

typedef struct {
  cpu_priv *p;
  cpu_scratch *w;
  size_t end;                  /* tasks [next, end) of this round */
  pthread_mutex_t *lock;
} worker_arg;

static void *worker(void *arg) {
  worker_arg *a = arg;
  for (;;) {
    pthread_mutex_lock(a->lock);
    size_t k = a->p->next < a->end ? a->p->next++ : (size_t)-1;
    pthread_mutex_unlock(a->lock);
    if (k == (size_t)-1) break;
    cpu_task *t = &a->p->tasks[k];
    t->rc = FP8_OK;
    if (t->is_gemm) cpu_gemm_task(a->p, a->w, t);
    else cpu_quantize_task(a->p, a->w, t);
  }
  return NULL;
}

/* Runs tasks [first, end) on up to p->threads threads. */
static void run_round(cpu_priv *p, size_t first, size_t end) {
  pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  worker_arg args[CPU_MAX_THREADS];
  pthread_t tid[CPU_MAX_THREADS];
  size_t n = end - first;
  int nt = (size_t)p->threads < n ? p->threads : (int)n;
  p->next = first;
  for (int i = 0; i < CPU_MAX_THREADS; i++) args[i] = (worker_arg){p, &p->scratch[i < p->threads ? i : 0], end, &lock};
  int started = 0;
  for (int i = 1; i < nt; i++)
    if (pthread_create(&tid[started], NULL, worker, &args[i]) == 0) started++;
  worker(&args[0]); /* the calling thread is worker 0 */
  for (int i = 0; i < started; i++) pthread_join(tid[i], NULL);
  pthread_mutex_destroy(&lock);
}

static int cpu_sync(fp8_engine *e, char *err, size_t errlen) {
  cpu_priv *p = e->priv;
  /* quantize tasks before gemm tasks (a GEMM reads the scales its operands' casts used) */
  size_t nq = 0;
  for (size_t k = 0; k < p->ntasks; k++)
    if (!p->tasks[k].is_gemm) {
      cpu_task tmp = p->tasks[k];
      memmove(&p->tasks[nq + 1], &p->tasks[nq], (k - nq) * sizeof tmp);
      p->tasks[nq++] = tmp;
    }
  if (nq) run_round(p, 0, nq);
  if (p->ntasks > nq) run_round(p, nq, p->ntasks);
  int rc = FP8_OK;
  for (size_t k = 0; k < p->ntasks; k++) {
    cpu_task *t = &p->tasks[k];
    if (t->rc && rc == FP8_OK) rc = fp8_errorf(t->rc, err, errlen, "%s", t->err);
    if (t->is_gemm) free(t->req);
  }
  p->ntasks = 0;
  return rc;
}

/* ------------------------------------------------------------------ state */

static int cpu_end_phase(fp8_engine *e, unsigned phases, const float *amax, char *err,
                         size_t errlen) {
  cpu_priv *p = e->priv;
  const fp8_engine_plan *pl = &p->plan;
  int rc = cpu_sync(e, err, errlen);
  if (rc) return rc;
  if (pl->red_slot || pl->comm) {
    /* the reduction: each slot's max over its tensors of this phase (NaN ignored), then over
     * the processes of the group */
    size_t nred = fp8_plan_nred(pl);
    for (size_t k = 0; k < nred; k++) p->red[k] = 0.0f;
    for (size_t t = 0; t < pl->ntensors; t++) {
      size_t k = fp8_plan_red_slot(pl, t);
      if (fp8_plan_in_phase(pl, t, phases) && amax[t] > p->red[k]) p->red[k] = amax[t];
    }
    if (pl->comm) {
      rc = pl->comm->allreduce_max(pl->comm->ctx, p->red, nred, err, errlen);
      if (rc) return rc;
    }
  }
  for (size_t t = 0; t < pl->ntensors; t++) {
    if (!fp8_plan_in_phase(pl, t, phases)) continue;
    float a = pl->red_slot || pl->comm ? p->red[fp8_plan_red_slot(pl, t)] : amax[t];
    for (size_t c = 0; c < pl->nconfigs; c++)
      if (pl->configs[c].kind == FP8_KIND_DELAYED && fp8_plan_active(pl, c)) {
        fp8_delayed_state *d = &p->dl[t * pl->nconfigs + c];
        fp8_delayed_update(d, a);
        if (d->oom)
          return fp8_errorf(FP8_ENOMEM, err, errlen, "tensor %s: [recipe.%s]: out of memory for "
                            "the amax history", pl->names[t], pl->configs[c].label);
      }
  }
  return FP8_OK;
}

static int cpu_state(fp8_engine *e, size_t t, float *scale, char *err, size_t errlen) {
  cpu_priv *p = e->priv;
  if (t >= p->plan.ntensors) return fp8_errorf(FP8_EINVAL, err, errlen, "state: tensor %zu", t);
  for (size_t c = 0; c < p->plan.nconfigs; c++)
    if (p->plan.configs[c].kind == FP8_KIND_DELAYED && fp8_plan_active(&p->plan, c))
      scale[c] = p->dl[t * p->plan.nconfigs + c].scale;
  return FP8_OK;
}

static void cpu_free(fp8_engine *e) {
  if (!e) return;
  cpu_priv *p = e->priv;
  if (p) {
    if (p->dl)
      for (size_t i = 0; i < p->plan.ntensors * p->plan.nconfigs; i++) fp8_delayed_free(&p->dl[i]);
    for (size_t k = 0; k < p->ntasks; k++)
      if (p->tasks[k].is_gemm) free(p->tasks[k].req);
    if (p->scratch)
      for (int i = 0; i < p->threads; i++) {
        cpu_scratch *w = &p->scratch[i];
        free(w->x);
        for (int j = 0; j < 9; j++) free(w->g[j]);
        for (int j = 0; j < 3; j++) fp8_gemm_sample_free(&w->smp[j]);
        for (int j = 0; j < 3; j++) free(w->yr[j]);
        for (int j = 0; j < 3; j++) free(w->tcv[j]);
        free(w->norm);
        fp8_valhist_free(&w->vh);
        free(w->keys);
        free(w->uniq);
        free(w->map);
        free(w->ust);
      }
    free(p->scratch);
    free(p->tasks);
    free(p->dl);
    free(p->red);
    free(p->view);
  }
  free(p);
  free(e);
}

static const fp8_engine_ops CPU_OPS = {
    .supports = cpu_supports, .begin_step = cpu_begin_step, .load = cpu_load,
    .quantize_stats = cpu_quantize_stats, .cast = cpu_cast, .gemm = cpu_gemm,
    .sync = cpu_sync, .end_phase = cpu_end_phase, .state = cpu_state, .free = cpu_free};

/* One delayed state per active delayed (tensor, configuration): scale 1, history 0. */
static int init_states(cpu_priv *p, char *err, size_t errlen) {
  const fp8_engine_plan *pl = &p->plan;
  for (size_t t = 0; t < pl->ntensors; t++)
    for (size_t c = 0; c < pl->nconfigs; c++) {
      const fp8_config *cf = &pl->configs[c];
      if (cf->kind != FP8_KIND_DELAYED || !fp8_plan_active(pl, c)) continue;
      fp8_delayed_params dp = fp8_config_delayed_params(cf, fp8_plan_format(pl, t, c));
      int rc = fp8_delayed_init(&p->dl[t * pl->nconfigs + c], &dp);
      if (rc)
        return fp8_errorf(rc, err, errlen, "tensor %s: [recipe.%s]: %s", pl->names[t], cf->label,
                          fp8_strerror(rc));
    }
  return FP8_OK;
}

int fp8_engine_cpu_create(const fp8_engine_plan *plan, fp8_engine **out, char *err,
                          size_t errlen) {
  *out = NULL;
  fp8_engine *e = calloc(1, sizeof *e);
  cpu_priv *p = calloc(1, sizeof *p);
  if (!e || !p) {
    free(e);
    free(p);
    return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  }
  e->ops = &CPU_OPS;
  e->priv = p;
  p->plan = *plan;
  p->threads = plan->threads < 1 ? 1 : plan->threads > CPU_MAX_THREADS ? CPU_MAX_THREADS : plan->threads;
  /* one BLAS thread, once: OpenBLAS's own threads would compete with the workers (gemm.h) */
  fp8_gemm_blas_single_thread();
  snprintf(e->name, sizeof e->name, "cpu");
  size_t nt = plan->ntensors, nslots = nt * plan->nconfigs;
  p->view = calloc(nt + 1, sizeof *p->view);
  p->dl = calloc(nslots + 1, sizeof *p->dl);
  p->red = calloc(fp8_plan_nred(plan) + 1, sizeof *p->red);
  p->scratch = calloc((size_t)p->threads, sizeof *p->scratch);
  int rc = FP8_OK;
  if (!p->view || !p->dl || !p->red || !p->scratch) {
    rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
    goto done;
  }
  for (int i = 0; i < p->threads; i++) { /* the distinct-configuration tables of each worker */
    cpu_scratch *w = &p->scratch[i];
    size_t nc = plan->nconfigs + 1;
    w->keys = malloc(nc * sizeof *w->keys);
    w->uniq = malloc(nc * sizeof *w->uniq);
    w->map = malloc(nc * sizeof *w->map);
    w->ust = malloc(nc * sizeof *w->ust);
    if (!w->keys || !w->uniq || !w->map || !w->ust) {
      rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
      goto done;
    }
  }
  rc = init_states(p, err, errlen);
  (void)fp8_decode_table(FP8_E4M3); /* build the tables before threads share them */
done:
  if (rc) {
    cpu_free(e);
    return rc;
  }
  *out = e;
  return FP8_OK;
}
