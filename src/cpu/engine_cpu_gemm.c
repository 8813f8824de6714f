/* engine_cpu_gemm.c: the CPU engine's gemm op on one worker: a layer's fprop, dgrad and wgrad
 * errors against their double-precision reference (gemm.h) for every request (engine.h
 * fp8_gemm_request: a configuration per operand; a plain request's three are one).
 *
 * Requests whose three operands come from per-tensor configurations use each operand's one
 * scale in all three GEMMs, and the cast is elementwise, so only the sampled token rows are
 * ever needed (gemm.h's sampling: the same rows, the same values, the same CBLAS calls as
 * quantizing the whole tensor and sampling afterwards): the worker widens the sampled rows of
 * input and grad_output and the weight, and keeps no full-size copy. Requests whose three
 * (scale, format) pairs coincide give the same errors: each distinct triple is computed once,
 * in an order in which consecutive triples share operands, so that an operand is quantized
 * again only when its pair changes. An operand of a block kind needs the whole tensor (blocks
 * run along the tokens for wgrad): a layer with such a request is worked on in full, as gemm.h
 * describes, each tensor quantized by its operand's configuration in the orientations its
 * GEMMs need (a mixed request: each by its own section's).
 *
 * The sampled mode (plan->gemm_sample > 0, gemm.h's fp8_gemm_sample) takes each GEMM's sampled
 * rows and columns from the views (the operands' norms first: the draw's sizes) and never
 * widens a whole tensor for per-tensor requests: a request casts its few gathered rows and runs
 * three small FP32 GEMMs. Requests with a block-kind operand still cast whole tensors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_cpu_internal.h"
#include "gemm.h"

static void cast_operand(const float *x, size_t n, float s, int fmt, float *q);

/* Tensor-core accumulation (plan->tensor_core: the cpu_tc_ functions) is engine_cpu_tc.c's. */

static int fmt_of(const fp8_engine_plan *pl, const fp8_engine_layer *l, size_t c, int i) {
  return pl->configs[c].kind == FP8_KIND_BF16 ? -1 : (int)fp8_plan_format(pl, l->tensor[i], c);
}

static int is_block(const fp8_engine_plan *pl, size_t c) {
  return fp8_recipe_kind_is_block(pl->configs[c].kind);
}

/* Whether request q has an operand of a block kind (its GEMMs need the whole tensors). */
static int req_blocks(const fp8_engine_plan *pl, const fp8_gemm_request *q) {
  return is_block(pl, q->config[0]) || is_block(pl, q->config[1]) || is_block(pl, q->config[2]);
}

/* A request's full dequantized operands (g[0..2]: the widened tensors, all tokens): tensor i
 * as configuration cfg[i] casts it. A block kind quantizes it row-wise into g[3 + i] and
 * column-wise into g[6 + i] (TE's layouts: fprop row-wise X and W; dgrad row-wise dY,
 * column-wise W; wgrad column-wise dY and X, blocks along each GEMM's reduction dimension); a
 * per-tensor kind casts it with its scale into g[3 + i], which serves both. held[i]: the
 * configuration whose tensor i g[3 + i] and g[6 + i] hold (-1: none), kept when it is cfg[i]
 * and updated; a caller that writes g[3..8] otherwise resets it. */
static int request_operands(const cpu_priv *p, cpu_scratch *w, const fp8_engine_layer *l,
                            const size_t cfg[3], ptrdiff_t held[3], fp8_gemm_operands *ops) {
  const fp8_engine_plan *pl = &p->plan;
  const int64_t rows[3] = {l->tokens, l->out, l->tokens}, cols[3] = {l->in, l->in, l->out};
  const float *row[3], *col[3];
  for (int i = 0; i < 3; i++) {
    size_t t = l->tensor[i], c = cfg[i];
    int blk = is_block(pl, c);
    row[i] = w->g[3 + i];
    col[i] = blk ? w->g[6 + i] : w->g[3 + i];
    if (held[i] == (ptrdiff_t)c) continue;
    held[i] = -1;
    if (!blk) {
      cast_operand(w->g[i], (size_t)(rows[i] * cols[i]), l->scale[i][c], fmt_of(pl, l, c, i),
                   w->g[3 + i]);
      held[i] = (ptrdiff_t)c;
      continue;
    }
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
    held[i] = (ptrdiff_t)c;
  }
  *ops = (fp8_gemm_operands){row[0], row[1], row[2], col[1], col[2], col[0]};
  return FP8_OK;
}

/* The sampled errors of one request from its full dequantized operands (a request with a
 * block-kind operand): each GEMM's two operands gathered from them. */
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

/* An operand as a per-tensor configuration casts it into q: fmt < 0 for the bf16 kind (not
 * cast: the values themselves), else the format it is quantized to with scale s. */
static void cast_operand(const float *x, size_t n, float s, int fmt, float *q) {
  if (fmt < 0) memcpy(q, x, n * sizeof *q);
  else fp8_quantize_f32(x, n, s, (fp8_format)fmt, NULL, q, NULL);
}

/* The sampled errors of a per-tensor request: each GEMM's gathered original operands cast
 * with their tensors' (scale, format) (the cast is elementwise: gathering commutes).
 * changed[i]: tensor i's (scale, format) differs from the previous call's (all on the first):
 * a GEMM neither of whose operands changed keeps its errors (e holds them). */
static int sampled_per_tensor(const cpu_priv *p, cpu_scratch *w, fp8_gemm_sample *s,
                              const float scale[3], const int fmt[3], const int changed[3],
                              double e[CPU_TC_NV][FP8_GEMM_COUNT]) {
  const fp8_tc_model m = (fp8_tc_model)p->plan.tensor_core;
  for (int g = 0; g < FP8_GEMM_COUNT; g++) {
    int ta = fp8_gemm_operand_tensor((fp8_gemm_kind)g, 0);
    int tb = fp8_gemm_operand_tensor((fp8_gemm_kind)g, 1);
    if (!changed[ta] && !changed[tb]) continue;
    const size_t na = (size_t)(s[g].p * s[g].k), nb = (size_t)(s[g].q * s[g].k);
    if (changed[ta]) cast_operand(s[g].a, na, scale[ta], fmt[ta], s[g].qa);
    if (changed[tb]) cast_operand(s[g].b, nb, scale[tb], fmt[tb], s[g].qb);
    fp8_gemm_sample_error(&s[g], s[g].qa, s[g].qb, &e[0][g], &e[1][g], &e[2][g]);
    e[3][g] = e[0][g];
    e[4][g] = NAN;
    if (m == FP8_TC_EXACT || fmt[ta] < 0 || fmt[tb] < 0) continue;
    int rc = cpu_tc_values(w, s[g].a, na, scale[ta], fmt[ta], s[g].b, nb, scale[tb], fmt[tb]);
    if (rc) return rc;
    const float sab = cpu_tc_sab(scale[ta], scale[tb]);
    /* the other form (fprop only: gemm.h) first: the model's block stays in y */
    for (int alt = g == FP8_GEMM_FPROP; alt >= 0; alt--)
      fp8_gemm_sample_error_tc(&s[g], m, fp8_gemm_tc_promote((fp8_gemm_kind)g, alt),
                               (fp8_format)fmt[ta], (fp8_format)fmt[tb], w->tcv[0], w->tcv[1], sab,
                               alt ? &e[4][g] : &e[0][g], alt ? NULL : &e[1][g],
                               alt ? NULL : &e[2][g]);
  }
  return FP8_OK;
}

/* The three operands' (scale bits, format) of a per-tensor request, for ordering: the
 * operands compared largest first (order[]), so that the largest is quantized once per pair
 * it has and only the smaller ones again when their pairs change. */
typedef struct {
  uint32_t bits[3];
  int fmt[3];
  size_t q;          /* the request */
  const int *order;
} triple_key;

static int cmp_triple(const void *a, const void *b) {
  const triple_key *x = a, *y = b;
  for (int j = 0; j < 3; j++) {
    int i = x->order[j];
    if (x->bits[i] != y->bits[i]) return x->bits[i] < y->bits[i] ? -1 : 1;
    if (x->fmt[i] != y->fmt[i]) return x->fmt[i] < y->fmt[i] ? -1 : 1;
  }
  return x->q < y->q ? -1 : x->q > y->q;
}

static int same_operand(const triple_key *a, const triple_key *b, int i) {
  return a->bits[i] == b->bits[i] && a->fmt[i] == b->fmt[i];
}

/* The requests without a block-kind operand: one computation per distinct triple. x[i] are the
 * operands (sampled or full, as ref was made), count[i] their elements, q[i] scratch of that
 * size. */
static int per_tensor_gemms(const cpu_priv *p, cpu_scratch *w, const fp8_engine_layer *l,
                            const fp8_gemm_request *req, size_t nreq, const fp8_gemm_ref *ref,
                            fp8_gemm_sample *smp, float *const x[3], float *const q[3],
                            const size_t count[3]) {
  const fp8_engine_plan *pl = &p->plan;
  triple_key *k = malloc((nreq + 1) * sizeof *k);
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
  for (size_t r = 0; r < nreq; r++) {
    if (req_blocks(pl, &req[r])) continue;
    k[nk].q = r;
    k[nk].order = order;
    for (int i = 0; i < 3; i++) {
      size_t c = req[r].config[i];
      memcpy(&k[nk].bits[i], &l->scale[i][c], sizeof(uint32_t));
      k[nk].fmt[i] = fmt_of(pl, l, c, i);
    }
    nk++;
  }
  if (nk > 1) qsort(k, nk, sizeof *k, cmp_triple);
  int rc = FP8_OK;
  double e[CPU_TC_NV][FP8_GEMM_COUNT]; /* estimate, lo, hi; tensor_core: exact, other form */
  const int tc = p->plan.tensor_core != FP8_TC_EXACT;
  for (size_t j = 0; j < nk && rc == FP8_OK; j++) {
    const fp8_gemm_request *r = &req[k[j].q];
    int fresh = j == 0 || !same_operand(&k[j], &k[j - 1], 0) || !same_operand(&k[j], &k[j - 1], 1) ||
                !same_operand(&k[j], &k[j - 1], 2);
    if (fresh && smp) { /* a new triple, sampled: the gathered operands whose pair changed */
      float sc[3];
      int fm[3], changed[3];
      for (int i = 0; i < 3; i++) {
        sc[i] = l->scale[i][r->config[i]];
        fm[i] = k[j].fmt[i];
        changed[i] = j == 0 || !same_operand(&k[j], &k[j - 1], i);
      }
      rc = sampled_per_tensor(p, w, smp, sc, fm, changed, e);
    } else if (fresh) { /* a new triple: quantize the operands whose pair changed, then the GEMMs */
      for (int i = 0; i < 3; i++)
        if (j == 0 || !same_operand(&k[j], &k[j - 1], i))
          cast_operand(x[i], count[i], l->scale[i][r->config[i]], k[j].fmt[i], q[i]);
      fp8_gemm_operands ops = {q[0], q[1], q[2], q[1], q[2], q[0]};
      rc = fp8_gemm_errors(ref, &ops, e[0]);
      if (rc == FP8_OK && tc) {
        float sc[3];
        for (int i = 0; i < 3; i++) sc[i] = l->scale[i][r->config[i]];
        rc = cpu_tc_exact_errors(p, w, ref, x, count, sc, k[j].fmt, e);
      }
    }
    for (int g = 0; g < FP8_GEMM_COUNT; g++) {
      for (int v = 0; v < (smp ? 3 : 1); v++) r->rel[v * FP8_GEMM_COUNT + g] = e[v][g];
      if (tc)
        for (int v = 3; v < CPU_TC_NV; v++) r->rel[(v + 4) * FP8_GEMM_COUNT + g] = e[v][g];
    }
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

/* ---------------------------------------------------------------- the FP4 verdict's ratio
 * (engine.h: the plan's ratio_ref; gemm.h fp8_gemm_sample_ratio). A block configuration c and
 * its reference configuration r are estimated on the same sample; the reference's three FP32
 * blocks are kept (w->yr) while the block configurations are computed. A ratio whose interval
 * straddles the plan's threshold is computed again on the whole output of that GEMM for both
 * configurations, as the exact mode computes a GEMM error (fp8_gemm_ref over all tokens,
 * fp8_gemm_error: both products FP32 by CBLAS), so that the verdict does not depend on the
 * draw. */

/* The exact recomputations of one layer: each GEMM's whole double reference and the reference
 * configuration's exact error, made when first needed. */
typedef struct {
  fp8_gemm_ref ref[FP8_GEMM_COUNT];
  int have_ref[FP8_GEMM_COUNT];
  double er[FP8_GEMM_COUNT];
  int have_er[FP8_GEMM_COUNT];
  ptrdiff_t er_of;          /* the configuration er belongs to (-1: none yet) */
} exact_cache;

/* The reference configuration r's sampled FP32 blocks of the three GEMMs into w->yr (the
 * same bits as its fp8_gemm_sample_error computed). Uses the samples' qa / qb and, for a block
 * configuration, w->g[3..8] (held: request_operands'). */
static int ratio_ref_blocks(const cpu_priv *p, cpu_scratch *w, const fp8_engine_layer *l,
                            fp8_gemm_sample *s, size_t r, ptrdiff_t held[3]) {
  const fp8_engine_plan *pl = &p->plan;
  fp8_gemm_operands ops;
  const size_t rr[3] = {r, r, r};
  int blk = is_block(pl, r), rc;
  if (blk && (rc = request_operands(p, w, l, rr, held, &ops))) return rc;
  const float *fa[FP8_GEMM_COUNT] = {ops.fprop_input, ops.dgrad_grad_output, ops.wgrad_grad_output};
  const float *fb[FP8_GEMM_COUNT] = {ops.fprop_weight, ops.dgrad_weight, ops.wgrad_input};
  for (int g = 0; g < FP8_GEMM_COUNT; g++) {
    if (cpu_reserve(&w->yr[g], &w->yrcap[g], (size_t)(s[g].p * s[g].q) + 1)) return FP8_ENOMEM;
    if (blk) {
      fp8_gemm_sample_gather(&s[g], 0, fa[g], FP8_DTYPE_F32, s[g].qa);
      fp8_gemm_sample_gather(&s[g], 1, fb[g], FP8_DTYPE_F32, s[g].qb);
    } else {
      int ta = fp8_gemm_operand_tensor((fp8_gemm_kind)g, 0);
      int tb = fp8_gemm_operand_tensor((fp8_gemm_kind)g, 1);
      cast_operand(s[g].a, (size_t)(s[g].p * s[g].k), l->scale[ta][r], fmt_of(pl, l, r, ta), s[g].qa);
      cast_operand(s[g].b, (size_t)(s[g].q * s[g].k), l->scale[tb][r], fmt_of(pl, l, r, tb), s[g].qb);
    }
    if (s[g].p > 0 && s[g].q > 0) fp8_gemm_block_f32(s[g].p, s[g].q, s[g].k, s[g].qa, s[g].qb, w->yr[g]);
  }
  return FP8_OK;
}

/* GEMM g's whole double reference (once per layer): the widened tensors w->g[0..2]. */
static int exact_ref(cpu_scratch *w, const fp8_engine_layer *l, exact_cache *x, int g) {
  if (x->have_ref[g]) return FP8_OK;
  const float *in = g != FP8_GEMM_DGRAD ? w->g[0] : NULL, *wt = g != FP8_GEMM_WGRAD ? w->g[1] : NULL,
              *go = g != FP8_GEMM_FPROP ? w->g[2] : NULL;
  int rc = fp8_gemm_ref_init(&x->ref[g], in, wt, go, l->tokens, l->in, l->out, 0);
  x->have_ref[g] = rc == FP8_OK;
  return rc;
}

static double exact_of(const exact_cache *x, int g, const fp8_gemm_operands *ops, int *rc) {
  const float *a = g == FP8_GEMM_FPROP ? ops->fprop_input
                 : g == FP8_GEMM_DGRAD ? ops->dgrad_grad_output : ops->wgrad_grad_output;
  const float *b = g == FP8_GEMM_FPROP ? ops->fprop_weight
                 : g == FP8_GEMM_DGRAD ? ops->dgrad_weight : ops->wgrad_input;
  double e = NAN;
  int r = fp8_gemm_error(&x->ref[g], (fp8_gemm_kind)g, a, b, &e);
  if (r && !*rc) *rc = r;
  return e;
}

/* The paired ratios of a request (its blocks in s[g].y, its full operands in ops, i.e.
 * w->g[3..8]) against configuration r (its blocks in w->yr), for the GEMMs with need[g]: into
 * out[v][g] (v: ratio, lo, hi, exact; the others untouched). */
static int pair_ratios(const cpu_priv *p, cpu_scratch *w, const fp8_engine_layer *l,
                       fp8_gemm_sample *s, size_t r, const int need[FP8_GEMM_COUNT],
                       const fp8_gemm_operands *ops, exact_cache *x, ptrdiff_t held[3],
                       double out[4][FP8_GEMM_COUNT]) {
  const double R = p->plan.ratio_threshold;
  int redo[FP8_GEMM_COUNT], any = 0, rc = FP8_OK;
  for (int g = 0; g < FP8_GEMM_COUNT; g++) {
    redo[g] = 0;
    if (!need[g]) continue;
    fp8_gemm_sample_ratio(&s[g], s[g].y, w->yr[g], &out[0][g], &out[1][g], &out[2][g]);
    out[3][g] = 0.0;
    /* straddles the threshold: not decided on the sample (NaN compares false: kept) */
    redo[g] = out[1][g] <= R && R < out[2][g];
    any |= redo[g];
  }
  if (!any) return FP8_OK;
  /* a recomputation that cannot be made (out of memory, a dimension over CBLAS's int) leaves
   * the sampled ratio, undecided: the report calls the layer too close to call */
  double ec[FP8_GEMM_COUNT] = {NAN, NAN, NAN};
  for (int g = 0; g < FP8_GEMM_COUNT; g++) {
    int e = FP8_OK;
    if (redo[g] && (exact_ref(w, l, x, g) != FP8_OK || (ec[g] = exact_of(x, g, ops, &e), e)))
      redo[g] = 0;
  }
  if (x->er_of != (ptrdiff_t)r) {
    x->er_of = (ptrdiff_t)r;
    for (int g = 0; g < FP8_GEMM_COUNT; g++) x->have_er[g] = 0;
  }
  int need_er = 0;
  for (int g = 0; g < FP8_GEMM_COUNT; g++) need_er |= redo[g] && !x->have_er[g];
  if (need_er) { /* the request's operands are no longer needed: r's take their place */
    fp8_gemm_operands ro;
    const size_t rr[3] = {r, r, r};
    if (request_operands(p, w, l, rr, held, &ro) != FP8_OK)
      for (int g = 0; g < FP8_GEMM_COUNT; g++) redo[g] &= x->have_er[g];
    for (int g = 0; g < FP8_GEMM_COUNT; g++)
      if (redo[g] && !x->have_er[g]) {
        int e = FP8_OK;
        x->er[g] = exact_of(x, g, &ro, &e);
        x->have_er[g] = e == FP8_OK;
        redo[g] = e == FP8_OK;
      }
  }
  for (int g = 0; g < FP8_GEMM_COUNT; g++) {
    if (!redo[g]) continue;
    double a = ec[g], b = x->er[g];
    double q = isnan(a) || isnan(b) ? NAN : b > 0.0 ? a / b : a > 0.0 ? INFINITY : 1.0;
    out[0][g] = out[1][g] = out[2][g] = q;
    out[3][g] = 1.0;
  }
  return rc;
}

/* A sampled request with a block-kind operand: its errors from its full operands, and its
 * paired ratios (each configuration it is divided by in turn: one in practice). */
static int sampled_request(cpu_priv *p, cpu_scratch *w, cpu_task *task, size_t k,
                           exact_cache *xc, ptrdiff_t *have_yr, ptrdiff_t held[3]) {
  const fp8_engine_plan *pl = &p->plan;
  const fp8_engine_layer *l = &task->layer;
  const fp8_gemm_request *q = &task->req[k];
  fp8_gemm_sample *s = w->smp;
  fp8_gemm_operands ops;
  double e[3][FP8_GEMM_COUNT], r4[4][FP8_GEMM_COUNT];
  int rc = request_operands(p, w, l, q->config, held, &ops);
  if (rc) return rc;
  sampled_from_full(s, &ops, e);
  for (int g = 0; g < FP8_GEMM_COUNT; g++)
    for (int v = 0; v < 3; v++) q->rel[v * FP8_GEMM_COUNT + g] = e[v][g];
  cpu_tc_block_request(pl, q);
  if (!pl->ratio_ref) return FP8_OK;
  for (int v = 0; v < 4; v++)
    for (int g = 0; g < FP8_GEMM_COUNT; g++) r4[v][g] = NAN;
  int64_t refs[FP8_GEMM_COUNT];
  for (int g = 0; g < FP8_GEMM_COUNT; g++)
    refs[g] = fp8_gemm_request_ratio_ref(pl->ratio_ref, q, g);
  for (int g0 = 0; g0 < FP8_GEMM_COUNT && rc == FP8_OK; g0++) {
    int64_t r = refs[g0];
    int need[FP8_GEMM_COUNT], seen = 0;
    for (int g = 0; g < g0; g++) seen |= refs[g] == r;
    if (r < 0 || seen || (size_t)r >= pl->nconfigs) continue;
    for (int g = 0; g < FP8_GEMM_COUNT; g++) need[g] = refs[g] == r;
    if (fp8_gemm_request_plain(q) && q->config[0] == (size_t)r) continue; /* itself */
    if (fp8_gemm_request_find_plain(task->req, task->nreq, r) < 0) continue; /* not in the call */
    if (*have_yr != r) {
      if ((rc = ratio_ref_blocks(p, w, l, s, (size_t)r, held))) break;
      *have_yr = r;
    }
    /* the reference's blocks may have taken w->g[3..8]: the request's operands again */
    if ((rc = request_operands(p, w, l, q->config, held, &ops))) break;
    rc = pair_ratios(p, w, l, s, (size_t)r, need, &ops, xc, held, r4);
  }
  for (int v = 0; v < 4; v++)
    for (int g = 0; g < FP8_GEMM_COUNT; g++) q->rel[(3 + v) * FP8_GEMM_COUNT + g] = r4[v][g];
  return rc;
}

/* The sampled mode (plan->gemm_sample > 0): each GEMM's sample, its operands gathered from the
 * loaded views and its reference; per-tensor requests from the gathered operands alone,
 * requests with a block-kind operand from their full dequantized operands (all tokens). */
static int sampled_task(cpu_priv *p, cpu_scratch *w, cpu_task *task, int blocks, const char *what) {
  const fp8_engine_plan *pl = &p->plan;
  const fp8_engine_layer *l = &task->layer;
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
  rc = per_tensor_gemms(p, w, l, task->req, task->nreq, NULL, s, NULL, NULL,
                        (const size_t[3]){1, 1, 1});
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
    exact_cache xc = {.er_of = -1};
    ptrdiff_t have_yr = -1;            /* the configuration whose blocks w->yr holds */
    ptrdiff_t held[3] = {-1, -1, -1};  /* what w->g[3..8] hold (request_operands) */
    for (size_t k = 0; k < task->nreq && rc == FP8_OK; k++)
      if (req_blocks(pl, &task->req[k])) rc = sampled_request(p, w, task, k, &xc, &have_yr, held);
    for (int g = 0; g < FP8_GEMM_COUNT; g++)
      if (xc.have_ref[g]) fp8_gemm_ref_free(&xc.ref[g]);
  }
  if (rc) snprintf(task->err, sizeof task->err, "%s: GEMM: %s", what, fp8_strerror(rc));
done:
  return rc;
}

void cpu_gemm_task(cpu_priv *p, cpu_scratch *w, cpu_task *task) {
  const fp8_engine_plan *pl = &p->plan;
  const fp8_engine_layer *l = &task->layer;
  int blocks = 0;
  for (size_t k = 0; k < task->nreq; k++) blocks |= req_blocks(pl, &task->req[k]);
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
  rc = per_tensor_gemms(p, w, l, task->req, task->nreq, &ref, NULL, x, q, count);
  ptrdiff_t held[3] = {-1, -1, -1}; /* per_tensor_gemms left g[3..5] as scratch */
  for (size_t k = 0; k < task->nreq && rc == FP8_OK; k++) {
    const fp8_gemm_request *r = &task->req[k];
    if (!req_blocks(pl, r)) continue;
    fp8_gemm_operands ops;
    double e[FP8_GEMM_COUNT];
    rc = request_operands(p, w, l, r->config, held, &ops);
    if (rc == FP8_OK) rc = fp8_gemm_errors(&ref, &ops, e);
    for (int g = 0; g < FP8_GEMM_COUNT && rc == FP8_OK; g++) r->rel[g] = e[g];
    if (rc == FP8_OK) cpu_tc_block_request(pl, r);
  }
  if (rc) {
    task->rc = rc;
    snprintf(task->err, sizeof task->err, "%s: GEMM: %s", what, fp8_strerror(rc));
  }
  fp8_gemm_ref_free(&ref);
}
