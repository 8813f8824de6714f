/* engine_sim.c: the CPU simulator behind the engine interface (engine.h). The runner does not
 * need it (its own threaded loop is the CPU path); it exists so that the engine code path of
 * the runner, the one the GPU takes, is tested on every machine against the direct path.
 * Its gemm hook computes gemm.h's errors and, like cuBLASLt, declines E5M2 x E5M2 GEMMs, so
 * that the runner's CPU fallback for those is exercised too. */
#include "engine_sim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.h"
#include "outfile.h"

typedef struct {
  float *x;
  size_t n, cap;
} sim_priv;

static int sim_load(fp8_engine *e, const fp8_tensor_view *v, float *amax, int64_t *hist, char *err,
                    size_t errlen) {
  sim_priv *p = e->priv;
  size_t n = (size_t)v->numel;
  if (n > p->cap) {
    float *nx = realloc(p->x, (n ? n : 1) * sizeof *nx);
    if (!nx) return fp8_errorf(FP8_ENOMEM, err, errlen, "tensor %s: out of memory", v->name);
    p->x = nx;
    p->cap = n;
  }
  p->n = n;
  fp8_dtype_to_f32(v->dtype, v->data, n, p->x);
  *amax = fp8_amax_f32(p->x, n);
  memset(hist, 0, FP8_LOG2_HIST_BINS * sizeof *hist);
  fp8_log2_histogram(p->x, n, hist);
  return FP8_OK;
}

static int sim_stats(fp8_engine *e, const float *scales, const fp8_format *formats, size_t n,
                     fp8_stats *out, char *err, size_t errlen) {
  (void)err;
  (void)errlen;
  sim_priv *p = e->priv;
  for (size_t i = 0; i < n; i++) {
    fp8_stats_init(&out[i]);
    fp8_quantize_f32(p->x, p->n, scales[i], formats[i], NULL, NULL, &out[i]);
  }
  return FP8_OK;
}

static int sim_gemm(fp8_engine *e, const fp8_engine_gemm_job *job, double *rel, bool *done,
                    char *err, size_t errlen) {
  (void)e;
  const size_t n = job->n;
  const size_t count[3] = {(size_t)(job->tokens * job->in), (size_t)(job->out * job->in),
                           (size_t)(job->tokens * job->out)};
  const float *x[3] = {job->x, job->w, job->g};
  float *q[3] = {NULL, NULL, NULL};
  fp8_gemm_ref ref;
  int rc = fp8_gemm_ref_init(&ref, job->x, job->w, job->g, job->tokens, job->in, job->out,
                             job->max_tokens);
  if (rc) return fp8_errorf(rc, err, errlen, "GEMM reference: %s", fp8_strerror(rc));
  for (int i = 0; i < 3; i++)
    if (!(q[i] = malloc((count[i] + 1) * sizeof(float)))) {
      rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
      goto done;
    }
  for (size_t c = 0; c < n; c++) {
    float sc[3];
    fp8_format fm[3];
    for (int i = 0; i < 3; i++) {
      sc[i] = job->scale[i][c];
      fm[i] = job->format[i][c];
    }
    bool want[FP8_GEMM_COUNT];
    for (int k = 0; k < FP8_GEMM_COUNT; k++) /* like cuBLASLt: no E5M2 x E5M2 */
      want[k] = !(fm[fp8_gemm_operand_tensor((fp8_gemm_kind)k, 0)] == FP8_E5M2 &&
                  fm[fp8_gemm_operand_tensor((fp8_gemm_kind)k, 1)] == FP8_E5M2);
    double r[FP8_GEMM_COUNT];
    rc = fp8_gemm_errors_per_tensor(&ref, x, sc, fm, q, want, r);
    if (rc) {
      fp8_errorf(rc, err, errlen, "GEMM: %s", fp8_strerror(rc));
      goto done;
    }
    for (int k = 0; k < FP8_GEMM_COUNT; k++) {
      rel[(size_t)k * n + c] = want[k] ? r[k] : NAN;
      done[(size_t)k * n + c] = want[k];
    }
  }
done:
  for (int i = 0; i < 3; i++) free(q[i]);
  fp8_gemm_ref_free(&ref);
  return rc;
}

static void sim_free(fp8_engine *e) {
  if (!e) return;
  sim_priv *p = e->priv;
  if (p) free(p->x);
  free(p);
  free(e);
}

int fp8_engine_sim_create(fp8_engine **out, char *err, size_t errlen) {
  fp8_engine *e = calloc(1, sizeof *e);
  sim_priv *p = calloc(1, sizeof *p);
  if (!e || !p) {
    free(e);
    free(p);
    return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  }
  e->name = "sim (engine interface)";
  e->load = sim_load;
  e->stats = sim_stats;
  e->gemm = sim_gemm;
  e->free = sim_free;
  e->priv = p;
  *out = e;
  return FP8_OK;
}
