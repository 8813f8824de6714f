/* engine_sim.c: the CPU simulator behind the engine interface (engine.h). The runner does not
 * need it (its own threaded loop is the CPU path); it exists so that the engine code path of
 * the runner, the one the GPU takes, is tested on every machine against the direct path. */
#include "engine_sim.h"

#include <stdlib.h>
#include <string.h>

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
  e->free = sim_free;
  e->priv = p;
  *out = e;
  return FP8_OK;
}
