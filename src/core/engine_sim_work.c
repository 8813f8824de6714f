/* engine_sim_work.c: the work of one queued op of the CPU engine on one worker (see
 * engine_sim.c): a tensor's amax, histogram and the statistics of every active configuration,
 * each distinct (scale, format) evaluated once, from the exact value histogram of a BF16/F16
 * tensor or chunk by chunk over the widened tensor while the chunk is in L1 (block kinds over
 * the whole matrix); a layer's three GEMMs against their double-precision reference (gemm.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_sim_internal.h"
#include "gemm.h"
#include "valhist.h"

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

/* The distinct (scale, format) pairs of the tensor's active per-tensor configurations: u[j] is
 * the j-th pair's representative configuration, map[c] the pair configuration c uses (sorted by
 * scale bits, format, configuration: the order the pairs are evaluated in does not change any
 * result). Returns the number of pairs. */
static int cmp_pair(const void *a, const void *b) {
  const pair_key *x = a, *y = b;
  if (x->bits != y->bits) return x->bits < y->bits ? -1 : 1;
  if (x->fmt != y->fmt) return x->fmt < y->fmt ? -1 : 1;
  return x->c < y->c ? -1 : x->c > y->c;
}

static size_t distinct_pairs(const sim_priv *p, size_t t, const fp8_tensor_result *out,
                             sim_scratch *w) {
  const fp8_engine_plan *pl = &p->plan;
  size_t nk = 0, nu = 0;
  for (size_t c = 0; c < pl->nconfigs; c++) {
    if (!fp8_plan_active(pl, c) || fp8_recipe_kind_is_block(pl->configs[c].kind)) continue;
    uint32_t bits;
    memcpy(&bits, &out->scale[c], sizeof bits);
    w->keys[nk++] = (pair_key){bits, (int)fp8_plan_format(pl, t, c), c};
  }
  if (nk > 1) qsort(w->keys, nk, sizeof *w->keys, cmp_pair);
  for (size_t k = 0; k < nk; k++) {
    if (k == 0 || w->keys[k].bits != w->keys[k - 1].bits || w->keys[k].fmt != w->keys[k - 1].fmt)
      w->uniq[nu++] = w->keys[k].c;
    w->map[w->keys[k].c] = nu - 1;
  }
  return nu;
}

/* The tensor's per-tensor statistics, one evaluation per distinct (scale, format): from the
 * value histogram (hist != NULL), else element by element over L1-sized chunks of x. */
static void per_tensor_stats(const sim_priv *p, size_t t, fp8_tensor_result *out, sim_scratch *w,
                             const fp8_valhist *hist, const float *x, size_t n) {
  const fp8_engine_plan *pl = &p->plan;
  size_t nu = distinct_pairs(p, t, out, w);
  for (size_t j = 0; j < nu; j++) fp8_stats_init(&w->ust[j]);
  if (hist) {
    for (size_t j = 0; j < nu; j++)
      fp8_valhist_quantize(hist, out->scale[w->uniq[j]], fp8_plan_format(pl, t, w->uniq[j]), &w->ust[j]);
  } else {
    for (size_t off = 0; off < n; off += CHUNK) {
      size_t m = n - off < CHUNK ? n - off : CHUNK;
      for (size_t j = 0; j < nu; j++)
        fp8_quantize_f32(x + off, m, out->scale[w->uniq[j]], fp8_plan_format(pl, t, w->uniq[j]),
                         NULL, NULL, &w->ust[j]);
    }
  }
  for (size_t c = 0; c < pl->nconfigs; c++)
    if (fp8_plan_active(pl, c) && !fp8_recipe_kind_is_block(pl->configs[c].kind))
      fp8_stats_merge(&out->stats[c], &w->ust[w->map[c]]);
}

static int same_block_params(const fp8_block_params *a, const fp8_block_params *b) {
  return a->kind == b->kind && a->format == b->format && a->block_len == b->block_len &&
         a->square == b->square && a->rounding == b->rounding && a->pow2 == b->pow2 &&
         a->margin == b->margin && a->amax_epsilon == b->amax_epsilon;
}

/* Block kinds over the [rows, cols] view (blocks along the last dimension), each distinct
 * recipe once (e.g. format = hybrid and e4m3 are one recipe for a forward tensor). */
static int block_stats(const sim_priv *p, size_t t, const fp8_tensor_view *v, const float *x,
                       fp8_tensor_result *out) {
  const fp8_engine_plan *pl = &p->plan;
  int64_t rows, cols;
  fp8_block_view_2d(v->shape, v->ndim, &rows, &cols);
  size_t first = (size_t)-1; /* the first block configuration: where the search for equals starts */
  for (size_t c = 0; c < pl->nconfigs; c++) {
    const fp8_config *cf = &pl->configs[c];
    if (!fp8_plan_active(pl, c) || !fp8_recipe_kind_is_block(cf->kind)) continue;
    fp8_block_params bp = fp8_config_block_params(cf, pl->roles[t], fp8_plan_format(pl, t, c));
    size_t same = (size_t)-1;
    for (size_t d = first; d != (size_t)-1 && d < c && same == (size_t)-1; d++) {
      const fp8_config *cd = &pl->configs[d];
      if (!fp8_plan_active(pl, d) || !fp8_recipe_kind_is_block(cd->kind)) continue;
      fp8_block_params bd = fp8_config_block_params(cd, pl->roles[t], fp8_plan_format(pl, t, d));
      if (same_block_params(&bp, &bd)) same = d;
    }
    if (first == (size_t)-1) first = c;
    if (same != (size_t)-1) {
      out->stats[c] = out->stats[same];
      out->block[c] = out->block[same];
    } else if (fp8_block_quantize_f32(x, rows, cols, &bp, FP8_BLOCK_DIR_ROW, NULL, NULL,
                                      &out->stats[c], &out->block[c]) == FP8_ENOMEM) {
      return FP8_ENOMEM;
    }
  }
  return FP8_OK;
}

/* quantize_stats of one tensor: every active configuration of the plan. BF16 and F16 tensors
 * go through their exact value histogram (valhist.h): one pass over the data, then every
 * configuration over the occupied values only (the path depends on the dtype alone, never on
 * the sweep, so a tensor's sums do not change with the other configurations of a run). */
static void quantize_task(sim_priv *p, sim_scratch *w, sim_task *task) {
  const fp8_engine_plan *pl = &p->plan;
  const size_t t = task->t, nc = pl->nconfigs;
  const fp8_tensor_view *v = p->view[t];
  fp8_tensor_result *out = task->out;
  size_t n = (size_t)v->numel;
  char what[300];
  snprintf(what, sizeof what, "tensor %s", v->name);
  int blocks = 0;
  for (size_t c = 0; c < nc; c++)
    blocks |= fp8_plan_active(pl, c) && fp8_recipe_kind_is_block(pl->configs[c].kind);
  int use_hist = v->dtype != FP8_DTYPE_F32 && n < UINT32_MAX;
  if (use_hist && fp8_valhist_build(&w->vh, v->dtype, v->data, n) != FP8_OK) {
    task_fail(task, FP8_ENOMEM, what);
    return;
  }
  float *x = NULL;
  if (!use_hist || blocks) {
    if (sim_reserve(&w->x, &w->xcap, n)) {
      task_fail(task, FP8_ENOMEM, what);
      return;
    }
    x = w->x;
    fp8_dtype_to_f32(v->dtype, v->data, n, x);
  }
  out->amax = use_hist ? fp8_valhist_amax(&w->vh) : fp8_amax_f32(x, n);
  if (pl->histograms) {
    memset(out->hist, 0, sizeof out->hist);
    if (use_hist) fp8_valhist_log2_histogram(&w->vh, out->hist);
    else fp8_log2_histogram(x, n, out->hist);
  }
  for (size_t c = 0; c < nc; c++) {
    if (!fp8_plan_active(pl, c)) continue;
    fp8_stats_init(&out->stats[c]);
    out->scale[c] = fp8_recipe_kind_is_block(pl->configs[c].kind) ? NAN
                                                                    : sim_config_scale(p, t, c, out->amax);
  }
  if (blocks && block_stats(p, t, v, x, out) != FP8_OK) {
    task_fail(task, FP8_ENOMEM, what);
    return;
  }
  per_tensor_stats(p, t, out, w, use_hist ? &w->vh : NULL, x, n);
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
