/* engine_sim_work.c: the work of one queued op of the CPU engine on one worker (see
 * engine_sim.c): a tensor widened once to float32, its amax and histogram, then every active
 * configuration evaluated chunk by chunk while the chunk is in L1 (block kinds over the whole
 * matrix); a layer's three GEMMs against their double-precision reference (gemm.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_sim_internal.h"
#include "gemm.h"

#define CHUNK 4096

int sim_reserve(float **buf, size_t *cap, size_t n) {
  if (n <= *cap && *buf) return 0;
  free(*buf);
  *buf = malloc((n ? n : 1) * sizeof **buf);
  *cap = *buf ? n : 0;
  return *buf ? 0 : -1;
}

float sim_config_scale(const sim_priv *p, size_t t, size_t c, float amax) {
  const fp8_config *cf = &p->plan.configs[c];
  if (cf->kind == FP8_KIND_DELAYED) return p->dl[t * p->plan.nconfigs + c].scale;
  fp8_current_params cp = fp8_config_current_params(cf, fp8_plan_format(&p->plan, t, c));
  return fp8_current_scale(&cp, amax);
}

static void task_fail(sim_task *task, int rc, const char *what) {
  task->rc = rc;
  snprintf(task->err, sizeof task->err, "%s: out of memory", what);
}

/* quantize_stats of one tensor: every active configuration of the plan. */
static void quantize_task(sim_priv *p, sim_scratch *w, sim_task *task) {
  const fp8_engine_plan *pl = &p->plan;
  const size_t t = task->t, nc = pl->nconfigs;
  const fp8_tensor_view *v = p->view[t];
  fp8_tensor_result *out = task->out;
  size_t n = (size_t)v->numel;
  char what[300];
  snprintf(what, sizeof what, "tensor %s", v->name);
  if (sim_reserve(&w->x, &w->xcap, n)) {
    task_fail(task, FP8_ENOMEM, what);
    return;
  }
  float *x = w->x;
  fp8_dtype_to_f32(v->dtype, v->data, n, x);
  out->amax = fp8_amax_f32(x, n);
  if (pl->histograms) {
    memset(out->hist, 0, sizeof out->hist);
    fp8_log2_histogram(x, n, out->hist);
  }
  for (size_t c = 0; c < nc; c++) {
    if (!fp8_plan_active(pl, c)) continue;
    fp8_stats_init(&out->stats[c]);
    out->scale[c] = fp8_recipe_kind_is_block(pl->configs[c].kind) ? NAN
                                                                    : sim_config_scale(p, t, c, out->amax);
  }
  /* block kinds: blocks along the last dimension of the [rows, cols] view */
  int64_t rows, cols;
  fp8_block_view_2d(v->shape, v->ndim, &rows, &cols);
  for (size_t c = 0; c < nc; c++) {
    const fp8_config *cf = &pl->configs[c];
    if (!fp8_plan_active(pl, c) || !fp8_recipe_kind_is_block(cf->kind)) continue;
    fp8_block_params bp = fp8_config_block_params(cf, pl->roles[t], fp8_plan_format(pl, t, c));
    if (fp8_block_quantize_f32(x, rows, cols, &bp, FP8_BLOCK_DIR_ROW, NULL, NULL, &out->stats[c],
                               &out->block[c]) == FP8_ENOMEM) {
      task_fail(task, FP8_ENOMEM, what);
      return;
    }
  }
  for (size_t off = 0; off < n; off += CHUNK) {
    size_t m = n - off < CHUNK ? n - off : CHUNK;
    for (size_t c = 0; c < nc; c++)
      if (fp8_plan_active(pl, c) && !fp8_recipe_kind_is_block(pl->configs[c].kind))
        fp8_quantize_f32(x + off, m, out->scale[c], fp8_plan_format(pl, t, c), NULL, NULL,
                         &out->stats[c]);
  }
}

/* A block configuration's three GEMM errors: each operand quantized row-wise and column-wise
 * into g[3..8] (TE's layouts: fprop row-wise X and W; dgrad row-wise dY, column-wise W; wgrad
 * column-wise dY and X, blocks along each GEMM's reduction dimension). */
static int block_gemm(const sim_priv *p, sim_scratch *w, const fp8_engine_layer *l,
                      const fp8_gemm_ref *ref, size_t c, double e[FP8_GEMM_COUNT]) {
  const fp8_engine_plan *pl = &p->plan;
  const int64_t rows[3] = {l->tokens, l->out, l->tokens}, cols[3] = {l->in, l->in, l->out};
  for (int i = 0; i < 3; i++) {
    size_t t = l->tensor[i];
    fp8_block_params bp = fp8_config_block_params(&pl->configs[c], pl->roles[t],
                                                  fp8_plan_format(pl, t, c));
    fp8_stats st;
    fp8_block_stats bs;
    fp8_stats_init(&st);
    int r1 = fp8_block_quantize_f32(w->g[i], rows[i], cols[i], &bp, FP8_BLOCK_DIR_ROW, w->g[3 + i],
                                    NULL, &st, &bs);
    int r2 = fp8_block_quantize_f32(w->g[i], rows[i], cols[i], &bp, FP8_BLOCK_DIR_COL, w->g[6 + i],
                                    NULL, &st, &bs);
    if (r1 || r2) return r1 ? r1 : r2;
  }
  fp8_gemm_operands ops = {w->g[3], w->g[4], w->g[5], w->g[7], w->g[8], w->g[6]};
  return fp8_gemm_errors(ref, &ops, e);
}

/* OpenBLAS's own threads would compete with the engine's workers for the same cores, and the
 * GEMMs here are small: one BLAS thread. Weak, so that another CBLAS still links. */
extern void openblas_set_num_threads(int n) __attribute__((weak));

/* The GEMM errors of one layer under every wanted configuration. */
static void gemm_task(sim_priv *p, sim_scratch *w, sim_task *task) {
  const fp8_engine_plan *pl = &p->plan;
  const fp8_engine_layer *l = &task->layer;
  const size_t nc = pl->nconfigs;
  const size_t count[3] = {(size_t)(l->tokens * l->in), (size_t)(l->out * l->in),
                           (size_t)(l->tokens * l->out)};
  char what[300];
  snprintf(what, sizeof what, "layer %s", l->name);
  if (openblas_set_num_threads) openblas_set_num_threads(1);
  for (int i = 0; i < 9; i++)
    if (sim_reserve(&w->g[i], &w->gcap[i], count[i % 3])) {
      task_fail(task, FP8_ENOMEM, what);
      return;
    }
  for (int i = 0; i < 3; i++) {
    const fp8_tensor_view *v = p->view[l->tensor[i]];
    fp8_dtype_to_f32(v->dtype, v->data, count[i], w->g[i]);
  }
  fp8_gemm_ref ref;
  int rc = fp8_gemm_ref_init(&ref, w->g[0], w->g[1], w->g[2], l->tokens, l->in, l->out,
                             pl->gemm_max_tokens);
  if (rc) {
    task->rc = rc;
    snprintf(task->err, sizeof task->err, "%s: GEMM reference: %s", what, fp8_strerror(rc));
    return;
  }
  for (size_t c = 0; c < nc && rc == FP8_OK; c++) {
    if (!task->want[c]) continue;
    double e[FP8_GEMM_COUNT];
    if (!fp8_recipe_kind_is_block(pl->configs[c].kind)) {
      /* one per-tensor scale: the same dequantized operand in every GEMM */
      const float *x[3] = {w->g[0], w->g[1], w->g[2]};
      float *q[3] = {w->g[3], w->g[4], w->g[5]};
      float sc[3];
      fp8_format fm[3];
      for (int i = 0; i < 3; i++) {
        sc[i] = l->scale[i][c];
        fm[i] = fp8_plan_format(pl, l->tensor[i], c);
      }
      rc = fp8_gemm_errors_per_tensor(&ref, x, sc, fm, q, NULL, e);
    } else {
      rc = block_gemm(p, w, l, &ref, c, e);
    }
    if (rc) {
      task->rc = rc;
      snprintf(task->err, sizeof task->err, "%s: GEMM: %s", what, fp8_strerror(rc));
      break;
    }
    for (int g = 0; g < FP8_GEMM_COUNT; g++) task->rel[(size_t)g * nc + c] = e[g];
  }
  fp8_gemm_ref_free(&ref);
}

void sim_run_task(sim_priv *p, sim_scratch *w, sim_task *task) {
  task->rc = FP8_OK;
  if (task->is_gemm) gemm_task(p, w, task);
  else quantize_task(p, w, task);
}
