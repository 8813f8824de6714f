/* engine_cpu_gemm.c: the CPU engine's gemm op on one worker: a layer's fprop, dgrad and wgrad
 * errors against their double-precision reference (gemm.h) under every wanted configuration.
 *
 * Per-tensor configurations use each operand's one scale in all three GEMMs, and the cast is
 * elementwise, so only the sampled token rows are ever needed (gemm.h's sampling: the same
 * rows, the same values, the same CBLAS calls as quantizing the whole tensor and sampling
 * afterwards): the worker widens the sampled rows of input and grad_output and the weight, and
 * keeps no full-size copy. Configurations whose three (scale, format) pairs coincide give the
 * same errors: each distinct triple is computed once, in an order in which consecutive triples
 * share operands, so that an operand is quantized again only when its pair changes. Block
 * recipes need the whole tensors (blocks run along the tokens for wgrad): a layer with block
 * configurations to compute is worked on in full, as gemm.h describes.
 *
 * The sampled mode (plan->gemm_sample > 0, gemm.h's fp8_gemm_sample) takes each GEMM's sampled
 * rows and columns from the views (the operands' norms first: the draw's sizes) and never
 * widens a whole tensor for per-tensor configurations: a configuration casts its few gathered
 * rows and runs three small FP32 GEMMs. Block configurations still cast whole tensors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_cpu_internal.h"
#include "gemm.h"

/* A block configuration's operands: each quantized row-wise and column-wise into g[3..8]
 * (TE's layouts: fprop row-wise X and W; dgrad row-wise dY, column-wise W; wgrad column-wise dY
 * and X, blocks along each GEMM's reduction dimension). Full-size operands. */
static int block_operands(const cpu_priv *p, cpu_scratch *w, const fp8_engine_layer *l, size_t c,
                          fp8_gemm_operands *ops) {
  const fp8_engine_plan *pl = &p->plan;
  const int64_t rows[3] = {l->tokens, l->out, l->tokens}, cols[3] = {l->in, l->in, l->out};
  for (int i = 0; i < 3; i++) {
    size_t t = l->tensor[i];
    fp8_block_params bp = fp8_config_block_params(&pl->configs[c], pl->roles[t],
                                                  fp8_plan_format(pl, t, c), p->view[t]->dtype);
    int r1 = fp8_block_quantize_f32(w->g[i], rows[i], cols[i], &bp, FP8_BLOCK_DIR_ROW, w->g[3 + i],
                                    NULL, NULL, NULL);
    /* nvfp4's Hadamard transform: on the column-wise input and grad_output, the wgrad GEMM's
     * operands (TE's), along the tokens; the product is unchanged, as H16/4 is orthogonal */
    bp.rht = pl->configs[c].kind == FP8_KIND_NVFP4 && pl->configs[c].rht && i != 1;
    int r2 = fp8_block_quantize_f32(w->g[i], rows[i], cols[i], &bp, FP8_BLOCK_DIR_COL, w->g[6 + i],
                                    NULL, NULL, NULL);
    if (r1 || r2) return r1 ? r1 : r2;
  }
  *ops = (fp8_gemm_operands){w->g[3], w->g[4], w->g[5], w->g[7], w->g[8], w->g[6]};
  return FP8_OK;
}

/* The sampled errors of one configuration from its full dequantized operands (a block
 * configuration's): each GEMM's two operands gathered from them. */
static void sampled_from_full(fp8_gemm_sample *s, const fp8_gemm_operands *ops,
                              double e[3][FP8_GEMM_COUNT]) {
  const float *a[FP8_GEMM_COUNT] = {ops->fprop_input, ops->dgrad_grad_output,
                                    ops->wgrad_grad_output};
  const float *b[FP8_GEMM_COUNT] = {ops->fprop_weight, ops->dgrad_weight, ops->wgrad_input};
  for (int g = 0; g < FP8_GEMM_COUNT; g++) {
    fp8_gemm_sample_gather(&s[g], 0, a[g], FP8_DTYPE_F32, s[g].qa);
    fp8_gemm_sample_gather(&s[g], 1, b[g], FP8_DTYPE_F32, s[g].qb);
    fp8_gemm_sample_error(&s[g], s[g].qa, s[g].qb, &e[0][g], &e[1][g], &e[2][g]);
  }
}

/* The sampled errors of a per-tensor configuration: each GEMM's gathered original operands
 * cast with their tensors' (scale, format) (the cast is elementwise: gathering commutes).
 * changed[i]: tensor i's (scale, format) differs from the previous call's (all on the first):
 * a GEMM neither of whose operands changed keeps its errors (e holds them). */
/* An operand as configuration c casts it into q: fmt < 0 for the bf16 kind (not cast: the
 * values themselves), else the format it is quantized to with scale s. */
static void cast_operand(const float *x, size_t n, float s, int fmt, float *q) {
  if (fmt < 0) memcpy(q, x, n * sizeof *q);
  else fp8_quantize_f32(x, n, s, (fp8_format)fmt, NULL, q, NULL);
}

static void sampled_per_tensor(fp8_gemm_sample *s, const float scale[3], const int fmt[3],
                               const int changed[3], double e[3][FP8_GEMM_COUNT]) {
  for (int g = 0; g < FP8_GEMM_COUNT; g++) {
    int ta = fp8_gemm_operand_tensor((fp8_gemm_kind)g, 0);
    int tb = fp8_gemm_operand_tensor((fp8_gemm_kind)g, 1);
    if (!changed[ta] && !changed[tb]) continue;
    if (changed[ta]) cast_operand(s[g].a, (size_t)(s[g].p * s[g].k), scale[ta], fmt[ta], s[g].qa);
    if (changed[tb]) cast_operand(s[g].b, (size_t)(s[g].q * s[g].k), scale[tb], fmt[tb], s[g].qb);
    fp8_gemm_sample_error(&s[g], s[g].qa, s[g].qb, &e[0][g], &e[1][g], &e[2][g]);
  }
}

/* The three operands' (scale bits, format) of a per-tensor configuration, for ordering: the
 * operands compared largest first (order[]), so that the largest is quantized once per pair
 * it has and only the smaller ones again when their pairs change. */
typedef struct {
  uint32_t bits[3];
  int fmt[3];
  size_t c;
  const int *order;
} triple_key;

static int cmp_triple(const void *a, const void *b) {
  const triple_key *x = a, *y = b;
  for (int j = 0; j < 3; j++) {
    int i = x->order[j];
    if (x->bits[i] != y->bits[i]) return x->bits[i] < y->bits[i] ? -1 : 1;
    if (x->fmt[i] != y->fmt[i]) return x->fmt[i] < y->fmt[i] ? -1 : 1;
  }
  return x->c < y->c ? -1 : x->c > y->c;
}

static int same_operand(const triple_key *a, const triple_key *b, int i) {
  return a->bits[i] == b->bits[i] && a->fmt[i] == b->fmt[i];
}

/* The per-tensor configurations: one computation per distinct triple. x[i] are the operands
 * (sampled or full, as ref was made), count[i] their elements, q[i] scratch of that size. */
static int per_tensor_gemms(const cpu_priv *p, const fp8_engine_layer *l, const unsigned char *want,
                            const fp8_gemm_ref *ref, fp8_gemm_sample *smp, float *const x[3],
                            float *const q[3], const size_t count[3], double *rel) {
  const fp8_engine_plan *pl = &p->plan;
  const size_t nc = pl->nconfigs;
  triple_key *k = malloc((nc + 1) * sizeof *k);
  if (!k) return FP8_ENOMEM;
  int order[3] = {0, 1, 2}; /* the operands by size, largest first */
  for (int a = 0; a < 3; a++)
    for (int b = a + 1; b < 3; b++)
      if (count[order[b]] > count[order[a]]) {
        int t = order[a];
        order[a] = order[b];
        order[b] = t;
      }
  size_t nk = 0;
  for (size_t c = 0; c < nc; c++) {
    if (!want[c] || fp8_recipe_kind_is_block(pl->configs[c].kind)) continue;
    k[nk].c = c;
    k[nk].order = order;
    for (int i = 0; i < 3; i++) {
      memcpy(&k[nk].bits[i], &l->scale[i][c], sizeof(uint32_t));
      k[nk].fmt[i] = pl->configs[c].kind == FP8_KIND_BF16 ? -1
                                                          : (int)fp8_plan_format(pl, l->tensor[i], c);
    }
    nk++;
  }
  if (nk > 1) qsort(k, nk, sizeof *k, cmp_triple);
  int rc = FP8_OK;
  const size_t per = (size_t)FP8_GEMM_COUNT * nc;
  double e[3][FP8_GEMM_COUNT]; /* estimate, lo, hi */
  for (size_t j = 0; j < nk && rc == FP8_OK; j++) {
    int fresh = j == 0 || !same_operand(&k[j], &k[j - 1], 0) || !same_operand(&k[j], &k[j - 1], 1) ||
                !same_operand(&k[j], &k[j - 1], 2);
    if (fresh && smp) { /* a new triple, sampled: the gathered operands whose pair changed */
      float sc[3];
      int fm[3], changed[3];
      for (int i = 0; i < 3; i++) {
        sc[i] = l->scale[i][k[j].c];
        fm[i] = k[j].fmt[i];
        changed[i] = j == 0 || !same_operand(&k[j], &k[j - 1], i);
      }
      sampled_per_tensor(smp, sc, fm, changed, e);
    } else if (fresh) { /* a new triple: quantize the operands whose pair changed, then the GEMMs */
      for (int i = 0; i < 3; i++)
        if (j == 0 || !same_operand(&k[j], &k[j - 1], i)) {
          size_t c = k[j].c;
          cast_operand(x[i], count[i], l->scale[i][c], k[j].fmt[i], q[i]);
        }
      fp8_gemm_operands ops = {q[0], q[1], q[2], q[1], q[2], q[0]};
      rc = fp8_gemm_errors(ref, &ops, e[0]);
    }
    for (int g = 0; g < FP8_GEMM_COUNT; g++)
      for (int v = 0; v < (smp ? 3 : 1); v++) rel[(size_t)v * per + (size_t)g * nc + k[j].c] = e[v][g];
  }
  free(k);
  return rc;
}

/* The layer's operands widened into g[0..2]: the sampled token rows of input and grad_output
 * (sampled: gemm.h's rows t_i = floor(i * tokens / ntok)) or all of them. */
static void widen_operands(const cpu_priv *p, cpu_scratch *w, const fp8_engine_layer *l,
                           int64_t ntok, int sampled) {
  const int64_t cols[3] = {l->in, l->in, l->out};
  for (int i = 0; i < 3; i++) {
    const fp8_tensor_view *v = p->view[l->tensor[i]];
    size_t es = fp8_dtype_size(v->dtype);
    if (i == 1 || !sampled) {
      size_t n = (size_t)((i == 1 ? l->out : l->tokens) * cols[i]);
      fp8_dtype_to_f32(v->dtype, v->data, n, w->g[i]);
      continue;
    }
    for (int64_t r = 0; r < ntok; r++) {
      int64_t src = fp8_gemm_token(r, l->tokens, ntok);
      fp8_dtype_to_f32(v->dtype, (const unsigned char *)v->data + (size_t)(src * cols[i]) * es,
                       (size_t)cols[i], w->g[i] + r * cols[i]);
    }
  }
}

/* The sampled mode (plan->gemm_sample > 0): each GEMM's sample, its operands gathered from the
 * loaded views and its reference; per-tensor configurations from the gathered operands alone,
 * block configurations from their full dequantized operands (all tokens). */
static int sampled_task(cpu_priv *p, cpu_scratch *w, cpu_task *task, int blocks, const char *what) {
  const fp8_engine_plan *pl = &p->plan;
  const fp8_engine_layer *l = &task->layer;
  const size_t nc = pl->nconfigs, per = (size_t)FP8_GEMM_COUNT * nc;
  fp8_gemm_sample *s = w->smp; /* the worker's, buffers reused */
  int rc = FP8_OK;
  /* the squared norms of each tensor's rows and columns: the sizes the sample is drawn by */
  const int64_t rows[3] = {l->tokens, l->out, l->tokens}, cols[3] = {l->in, l->in, l->out};
  size_t nn = (size_t)(2 * (l->tokens + l->in + l->out) + 1);
  if (nn > w->normcap) {
    free(w->norm);
    w->normcap = (w->norm = malloc(nn * sizeof *w->norm)) ? nn : 0;
  }
  double *norm = w->norm, *rowsq[3], *colsq[3];
  if (!norm) {
    rc = FP8_ENOMEM;
    snprintf(task->err, sizeof task->err, "%s: out of memory", what);
    return rc;
  }
  for (int i = 0, off = 0; i < 3; i++) {
    rowsq[i] = norm + off;
    colsq[i] = rowsq[i] + rows[i];
    off += (int)(rows[i] + cols[i]);
    const fp8_tensor_view *v = p->view[l->tensor[i]];
    fp8_gemm_norms(v->data, v->dtype, rows[i], cols[i], rowsq[i], colsq[i]);
  }
  for (int g = 0; g < FP8_GEMM_COUNT && rc == FP8_OK; g++) {
    uint64_t seed = fp8_gemm_sample_seed(pl->gemm_seed, l->name, p->step, (fp8_gemm_kind)g);
    const double *size[2];
    for (int o = 0; o < 2; o++) {
      int t = fp8_gemm_operand_tensor((fp8_gemm_kind)g, o);
      size[o] = fp8_gemm_operand_colwise((fp8_gemm_kind)g, o) ? colsq[t] : rowsq[t];
    }
    rc = fp8_gemm_sample_init(&s[g], (fp8_gemm_kind)g, l->tokens, l->in, l->out, pl->gemm_sample,
                              seed, size[0], size[1]);
    for (int o = 0; o < 2 && rc == FP8_OK; o++) {
      const fp8_tensor_view *v = p->view[l->tensor[fp8_gemm_operand_tensor((fp8_gemm_kind)g, o)]];
      fp8_gemm_sample_gather(&s[g], o, v->data, v->dtype, o ? s[g].b : s[g].a);
    }
    if (rc == FP8_OK) fp8_gemm_sample_reference(&s[g]);
  }
  if (rc) {
    snprintf(task->err, sizeof task->err, "%s: GEMM sample: %s", what, fp8_strerror(rc));
    goto done;
  }
  rc = per_tensor_gemms(p, l, task->want, NULL, s, NULL, NULL, (const size_t[3]){1, 1, 1},
                        task->rel);
  if (blocks && rc == FP8_OK) {
    const size_t count[3] = {(size_t)(l->tokens * l->in), (size_t)(l->out * l->in),
                             (size_t)(l->tokens * l->out)};
    for (int i = 0; i < 9; i++)
      if (cpu_reserve(&w->g[i], &w->gcap[i], count[i % 3])) {
        cpu_task_fail(task, FP8_ENOMEM, what);
        rc = FP8_ENOMEM;
        goto done;
      }
    for (int i = 0; i < 3; i++) {
      const fp8_tensor_view *v = p->view[l->tensor[i]];
      fp8_dtype_to_f32(v->dtype, v->data, count[i], w->g[i]);
    }
    for (size_t c = 0; c < nc && rc == FP8_OK; c++) {
      if (!task->want[c] || !fp8_recipe_kind_is_block(pl->configs[c].kind)) continue;
      fp8_gemm_operands ops;
      double e[3][FP8_GEMM_COUNT];
      if ((rc = block_operands(p, w, l, c, &ops))) break;
      sampled_from_full(s, &ops, e);
      for (int g = 0; g < FP8_GEMM_COUNT; g++)
        for (int v = 0; v < 3; v++) task->rel[(size_t)v * per + (size_t)g * nc + c] = e[v][g];
    }
  }
  if (rc) snprintf(task->err, sizeof task->err, "%s: GEMM: %s", what, fp8_strerror(rc));
done:
  return rc;
}

void cpu_gemm_task(cpu_priv *p, cpu_scratch *w, cpu_task *task) {
  const fp8_engine_plan *pl = &p->plan;
  const fp8_engine_layer *l = &task->layer;
  const size_t nc = pl->nconfigs;
  int blocks = 0;
  for (size_t c = 0; c < nc; c++) blocks |= task->want[c] && fp8_recipe_kind_is_block(pl->configs[c].kind);
  char what[300];
  snprintf(what, sizeof what, "layer %s", l->name);
  if (pl->gemm_sample > 0) {
    task->rc = sampled_task(p, w, task, blocks, what);
    return;
  }
  const int64_t ntok = fp8_gemm_ntok(l->tokens, pl->gemm_max_tokens);
  const int64_t T = blocks ? l->tokens : ntok; /* the token rows kept */
  const size_t count[3] = {(size_t)(T * l->in), (size_t)(l->out * l->in), (size_t)(T * l->out)};
  for (int i = 0; i < (blocks ? 9 : 6); i++)
    if (cpu_reserve(&w->g[i], &w->gcap[i], count[i % 3])) {
      cpu_task_fail(task, FP8_ENOMEM, what);
      return;
    }
  widen_operands(p, w, l, ntok, !blocks);
  fp8_gemm_ref ref;
  int rc = fp8_gemm_ref_init(&ref, w->g[0], w->g[1], w->g[2], T, l->in, l->out,
                             blocks ? pl->gemm_max_tokens : 0);
  if (rc) {
    task->rc = rc;
    snprintf(task->err, sizeof task->err, "%s: GEMM reference: %s", what, fp8_strerror(rc));
    return;
  }
  float *x[3] = {w->g[0], w->g[1], w->g[2]}, *q[3] = {w->g[3], w->g[4], w->g[5]};
  rc = per_tensor_gemms(p, l, task->want, &ref, NULL, x, q, count, task->rel);
  for (size_t c = 0; c < nc && rc == FP8_OK; c++) {
    if (!task->want[c] || !fp8_recipe_kind_is_block(pl->configs[c].kind)) continue;
    fp8_gemm_operands ops;
    double e[FP8_GEMM_COUNT];
    rc = block_operands(p, w, l, c, &ops);
    if (rc == FP8_OK) rc = fp8_gemm_errors(&ref, &ops, e);
    for (int g = 0; g < FP8_GEMM_COUNT && rc == FP8_OK; g++) task->rel[(size_t)g * nc + c] = e[g];
  }
  if (rc) {
    task->rc = rc;
    snprintf(task->err, sizeof task->err, "%s: GEMM: %s", what, fp8_strerror(rc));
  }
  fp8_gemm_ref_free(&ref);
}
