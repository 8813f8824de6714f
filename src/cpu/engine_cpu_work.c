/* engine_cpu_work.c: the work of one queued op of the CPU engine on one worker (see
 * engine_cpu.c): a tensor's amax, histogram and the statistics of every active configuration,
 * each distinct (scale, format) evaluated once, from the exact value histogram of a BF16/F16
 * tensor or chunk by chunk over the widened tensor while the chunk is in L1 (block kinds over
 * the whole matrix). A layer's GEMMs are engine_cpu_gemm.c's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_cpu_internal.h"
#include "valhist.h"

#define CHUNK 4096

int cpu_reserve(float **buf, size_t *cap, size_t n) {
  if (n <= *cap && *buf) return 0;
  free(*buf);
  *buf = malloc((n ? n : 1) * sizeof **buf);
  *cap = *buf ? n : 0;
  return *buf ? 0 : -1;
}

float cpu_config_scale(const cpu_priv *p, size_t t, size_t c, float amax) {
  const fp8_config *cf = &p->plan.configs[c];
  if (cf->kind == FP8_KIND_DELAYED) return p->dl[t * p->plan.nconfigs + c].scale;
  if (cf->kind == FP8_KIND_BF16) return 1.0f; /* not cast: its counts come from scale 1's pass */
  fp8_current_params cp = fp8_config_current_params(cf, fp8_plan_format(&p->plan, t, c));
  return fp8_current_scale(&cp, amax);
}

void cpu_task_fail(cpu_task *task, int rc, const char *what) {
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

static size_t distinct_pairs(const cpu_priv *p, size_t t, const fp8_tensor_result *out,
                             cpu_scratch *w) {
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
 * value histogram (hist != NULL), else element by element over L1-sized chunks of x (the fused
 * statistics loop: fp8_quantize_f32's results without its codes). */
static void per_tensor_stats(const cpu_priv *p, size_t t, fp8_tensor_result *out, cpu_scratch *w,
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
        fp8_quantize_stats_f32(x + off, m, out->scale[w->uniq[j]], fp8_plan_format(pl, t, w->uniq[j]),
                               &w->ust[j]);
    }
  }
  for (size_t c = 0; c < pl->nconfigs; c++)
    if (fp8_plan_active(pl, c) && !fp8_recipe_kind_is_block(pl->configs[c].kind)) {
      fp8_stats_merge(&out->stats[c], &w->ust[w->map[c]]);
      if (pl->configs[c].kind == FP8_KIND_BF16) fp8_stats_uncast(&out->stats[c]);
    }
}

static int same_block_params(const fp8_block_params *a, const fp8_block_params *b) {
  return a->kind == b->kind && a->format == b->format && a->block_len == b->block_len &&
         a->square == b->square && a->rounding == b->rounding && a->pow2 == b->pow2 &&
         a->margin == b->margin && a->amax_epsilon == b->amax_epsilon &&
         a->inf_scale == b->inf_scale && a->fp4_rule == b->fp4_rule &&
         a->e4m3_max == b->e4m3_max && a->stochastic == b->stochastic &&
         a->sr_seed == b->sr_seed && a->rht == b->rht;
}

/* Block kinds over the [rows, cols] view (blocks along the last dimension), each distinct
 * recipe once (e.g. format = hybrid and e4m3 are one recipe for a forward tensor). */
static int block_stats(const cpu_priv *p, size_t t, const fp8_tensor_view *v, const float *x,
                       fp8_tensor_result *out) {
  const fp8_engine_plan *pl = &p->plan;
  int64_t rows, cols;
  fp8_block_view_2d(v->shape, v->ndim, &rows, &cols);
  size_t first = (size_t)-1; /* the first block configuration: where the search for equals starts */
  for (size_t c = 0; c < pl->nconfigs; c++) {
    const fp8_config *cf = &pl->configs[c];
    if (!fp8_plan_active(pl, c) || !fp8_recipe_kind_is_block(cf->kind)) continue;
    fp8_block_params bp = fp8_config_block_params(cf, pl->roles[t], fp8_plan_format(pl, t, c),
                                                  v->dtype);
    size_t same = (size_t)-1;
    for (size_t d = first; d != (size_t)-1 && d < c && same == (size_t)-1; d++) {
      const fp8_config *cd = &pl->configs[d];
      if (!fp8_plan_active(pl, d) || !fp8_recipe_kind_is_block(cd->kind)) continue;
      fp8_block_params bd = fp8_config_block_params(cd, pl->roles[t], fp8_plan_format(pl, t, d),
                                                    v->dtype);
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
void cpu_quantize_task(cpu_priv *p, cpu_scratch *w, cpu_task *task) {
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
    cpu_task_fail(task, FP8_ENOMEM, what);
    return;
  }
  float *x = NULL;
  if (!use_hist || blocks) {
    if (cpu_reserve(&w->x, &w->xcap, n)) {
      cpu_task_fail(task, FP8_ENOMEM, what);
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
                                                                    : cpu_config_scale(p, t, c, out->amax);
  }
  if (blocks && block_stats(p, t, v, x, out) != FP8_OK) {
    cpu_task_fail(task, FP8_ENOMEM, what);
    return;
  }
  per_tensor_stats(p, t, out, w, use_hist ? &w->vh : NULL, x, n);
}
