/* engine_composite.c: the composite engine (engine.h, fp8_engine_composite_create): a primary
 * engine and, for what it declines, a CPU engine, behind one engine (ggml's backend scheduler in
 * small). The split is decided once, at creation, from the primary's supports():
 *
 *   quantize_stats, cast, state  of configuration c: the CPU engine where the primary declines
 *                                FP8_OP_QUANTIZE_STATS for c (cpu_q[c]), else the primary
 *   gemm                         a plain request of configuration c: the primary where it
 *                                quantizes c and supports FP8_OP_GEMM for it, else the CPU
 *                                engine (cpu_g[c]); a mixed request (operands of several
 *                                configurations): the CPU engine; with the scales the layer
 *                                carries (the primary's casts' for the configurations it
 *                                quantized)
 *
 * The CPU engine's plan is the caller's with only the cpu_q configurations active and without
 * histograms: amax and histogram of every tensor are the primary's (it loads every tensor and
 * quantizes it). Both engines write the caller's one fp8_tensor_result: the primary directly,
 * the CPU engine through a shadow per tensor that shares its stats, scale and block arrays (its
 * own amax is dropped). Calls go to the primary first, then to the CPU engine, sync included, so
 * that the CPU engine's entries are written last, as the runner's two engines did before.
 * The CPU engine comes from the caller's factory (fp8_engine_cpu_create, src/cpu), as ggml's
 * scheduler is handed its CPU backend: the engine interface sits below both engines. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_impl.h"
#include "util.h"

typedef struct {
  fp8_engine_plan plan;       /* the caller's */
  fp8_engine_plan cpu_plan;   /* active = cpu_q, no histograms */
  fp8_engine *primary, *cpu;  /* cpu: NULL when the primary declines nothing */
  unsigned char *cpu_q;       /* [nconfigs]: quantized by the CPU engine */
  unsigned char *cpu_g;       /* [nconfigs]: GEMMs run by the CPU engine */
  int any_cpu_q;
  int mixed_cpu;              /* mixed GEMM requests go to the CPU engine (a primary of its
                                 own: the primary takes them when it is a CPU engine) */
  fp8_gemm_request *share;    /* scratch, one engine's share of a gemm call */
  size_t share_cap;
  fp8_tensor_result *shadow;  /* [ntensors]: the CPU engine's results, valid until its sync */
} comp_priv;

static const fp8_engine_ops COMP_OPS;

static int comp_supports(const fp8_engine *e, fp8_engine_op op, size_t c) {
  const comp_priv *p = e->priv;
  (void)op;
  return c < p->plan.nconfigs && fp8_plan_active(&p->plan, c); /* on one engine or the other */
}

static int comp_begin_step(fp8_engine *e, int64_t step, char *err, size_t errlen) {
  comp_priv *p = e->priv;
  int rc = fp8_engine_begin_step(p->primary, step, err, errlen);
  if (!rc && p->cpu) rc = fp8_engine_begin_step(p->cpu, step, err, errlen);
  return rc;
}

static int comp_load(fp8_engine *e, size_t t, const fp8_tensor_view *v, char *err, size_t errlen) {
  comp_priv *p = e->priv;
  int rc = fp8_engine_load(p->primary, t, v, err, errlen);
  if (!rc && p->cpu) rc = fp8_engine_load(p->cpu, t, v, err, errlen); /* for its GEMMs too */
  return rc;
}

static int comp_quantize_stats(fp8_engine *e, size_t t, fp8_tensor_result *out, char *err,
                               size_t errlen) {
  comp_priv *p = e->priv;
  int rc = fp8_engine_quantize_stats(p->primary, t, out, err, errlen);
  if (rc || !p->any_cpu_q) return rc;
  if (t >= p->plan.ntensors)
    return fp8_errorf(FP8_EINVAL, err, errlen, "quantize_stats: tensor %zu of %zu", t,
                      p->plan.ntensors);
  fp8_tensor_result *s = &p->shadow[t];
  s->stats = out->stats;
  s->scale = out->scale;
  s->block = out->block;
  return fp8_engine_quantize_stats(p->cpu, t, s, err, errlen);
}

static int comp_cast(fp8_engine *e, size_t t, size_t c, uint8_t *codes, char *err,
                     size_t errlen) {
  comp_priv *p = e->priv;
  if (c >= p->plan.nconfigs)
    return fp8_errorf(FP8_EINVAL, err, errlen, "cast: configuration %zu of %zu", c,
                      p->plan.nconfigs);
  return fp8_engine_cast(p->cpu_q[c] ? p->cpu : p->primary, t, c, codes, err, errlen);
}

/* One engine's share of the requests (cpu: 0 the primary's, 1 the CPU engine's) into
 * p->share; its count, or (size_t)-1 out of memory. */
static size_t share(comp_priv *p, const fp8_gemm_request *req, size_t nreq, int cpu) {
  if (nreq > p->share_cap) {
    fp8_gemm_request *n = realloc(p->share, nreq * sizeof *n);
    if (!n) return (size_t)-1;
    p->share = n;
    p->share_cap = nreq;
  }
  size_t k = 0;
  for (size_t q = 0; q < nreq; q++) {
    int on_cpu = fp8_gemm_request_plain(&req[q]) ? p->cpu_g[req[q].config[0]] : p->mixed_cpu;
    if (on_cpu == cpu) p->share[k++] = req[q];
  }
  return k;
}

static int comp_gemm(fp8_engine *e, const fp8_engine_layer *l, const fp8_gemm_request *req,
                     size_t nreq, char *err, size_t errlen) {
  comp_priv *p = e->priv;
  for (size_t q = 0; q < nreq; q++)
    for (int i = 0; i < 3; i++)
      if (req[q].config[i] >= p->plan.nconfigs || !fp8_plan_active(&p->plan, req[q].config[i]))
        return fp8_errorf(FP8_EINVAL, err, errlen, "layer %s: GEMM request %zu: configuration %zu",
                          l->name, q, req[q].config[i]);
  int rc = FP8_OK;
  for (int cpu = 0; cpu < 2 && !rc; cpu++) {
    size_t n = share(p, req, nreq, cpu);
    if (n == (size_t)-1) return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
    if (n && cpu && !p->cpu) /* a mixed request without plan->gemm_mixed */
      return fp8_errorf(FP8_EINVAL, err, errlen, "layer %s: a mixed GEMM request, but the "
                        "plan has no gemm_mixed", l->name);
    if (n) rc = fp8_engine_gemm(cpu ? p->cpu : p->primary, l, p->share, n, err, errlen);
  }
  return rc;
}

static int comp_sync(fp8_engine *e, char *err, size_t errlen) {
  comp_priv *p = e->priv;
  int rc = fp8_engine_sync(p->primary, err, errlen);
  if (!rc && p->cpu) rc = fp8_engine_sync(p->cpu, err, errlen);
  return rc;
}

static int comp_end_phase(fp8_engine *e, unsigned phases, const float *amax, char *err,
                          size_t errlen) {
  comp_priv *p = e->priv;
  int rc = fp8_engine_end_phase(p->primary, phases, amax, err, errlen);
  if (!rc && p->cpu) rc = fp8_engine_end_phase(p->cpu, phases, amax, err, errlen);
  return rc;
}

static int comp_state(fp8_engine *e, size_t t, float *scale, char *err, size_t errlen) {
  comp_priv *p = e->priv;
  int rc = fp8_engine_state(p->primary, t, scale, err, errlen);
  if (!rc && p->cpu) rc = fp8_engine_state(p->cpu, t, scale, err, errlen); /* its active ones */
  return rc;
}

static void comp_free(fp8_engine *e) {
  if (!e) return;
  comp_priv *p = e->priv;
  if (p) {
    fp8_engine_free(p->cpu);
    fp8_engine_free(p->primary);
    free(p->cpu_q);
    free(p->cpu_g);
    free(p->share);
    free(p->shadow);
  }
  free(p);
  free(e);
}

static const fp8_engine_ops COMP_OPS = {
    .supports = comp_supports, .begin_step = comp_begin_step, .load = comp_load,
    .quantize_stats = comp_quantize_stats, .cast = comp_cast, .gemm = comp_gemm,
    .sync = comp_sync, .end_phase = comp_end_phase, .state = comp_state, .free = comp_free};

int fp8_engine_composite_create(fp8_engine_factory primary, fp8_engine_factory cpu,
                                const fp8_engine_plan *plan, fp8_engine **out, char *err,
                                size_t errlen) {
  *out = NULL;
  if (!cpu) return fp8_errorf(FP8_EINVAL, err, errlen, "the composite engine needs a CPU engine");
  const size_t nc = plan->nconfigs;
  fp8_engine *e = calloc(1, sizeof *e);
  comp_priv *p = calloc(1, sizeof *p);
  if (!e || !p) {
    free(e);
    free(p);
    return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  }
  e->ops = &COMP_OPS;
  e->priv = p;
  p->plan = *plan;
  p->cpu_q = calloc(nc + 1, 1);
  p->cpu_g = calloc(nc + 1, 1);
  p->shadow = calloc(plan->ntensors + 1, sizeof *p->shadow);
  int rc = FP8_OK;
  if (!p->cpu_q || !p->cpu_g || !p->shadow) {
    rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
    goto done;
  }
  rc = (primary ? primary : cpu)(plan, &p->primary, err, errlen);
  if (rc) goto done;
  snprintf(e->name, sizeof e->name, "%s", p->primary->name);
  p->mixed_cpu = primary != NULL;
  int need_cpu = plan->gemm_mixed && p->mixed_cpu; /* mixed requests run on a CPU engine */
  for (size_t c = 0; c < nc; c++) {
    if (!fp8_plan_active(plan, c)) continue;
    p->cpu_q[c] = !fp8_engine_supports(p->primary, FP8_OP_QUANTIZE_STATS, c);
    p->cpu_g[c] = p->cpu_q[c] || !fp8_engine_supports(p->primary, FP8_OP_GEMM, c);
    p->any_cpu_q |= p->cpu_q[c];
    need_cpu |= p->cpu_g[c];
  }
  if (!need_cpu) goto done;
  p->cpu_plan = *plan;
  p->cpu_plan.active = p->cpu_q;
  p->cpu_plan.histograms = 0;
  rc = cpu(&p->cpu_plan, &p->cpu, err, errlen);
done:
  if (rc) {
    comp_free(e);
    return rc;
  }
  *out = e;
  return FP8_OK;
}

int fp8_engine_falls_back(const fp8_engine *e, fp8_engine_op op, size_t c) {
  if (!e || e->ops != &COMP_OPS) return 0;
  const comp_priv *p = e->priv;
  if (c >= p->plan.nconfigs) return 0;
  return op == FP8_OP_QUANTIZE_STATS ? p->cpu_q[c] : p->cpu_g[c];
}
