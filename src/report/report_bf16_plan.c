/* report_bf16_plan.c: the BF16 demotion plans (issue 45; report_internal.h, docs/semantics.md
 * "Which layers to keep in BF16"): for the FP8 answer and for the advised FP4 configuration,
 * the layers to keep out of FP8 or FP4, one at a time and costliest first, with what each step
 * leaves missing and its share of the GEMM FLOPs; bf16_plan.csv (a row per step of each plan)
 * and bf16_plan.ini (an experiment whose labels replay each prefix of each plan). The section
 * is report_bf16_plan_text.c's, the framework forms report_frameworks_plan.c's.
 * tests/report/test_bf16_plan.py recomputes both plans from the run's CSVs and replays every
 * prefix. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "experiment.h" /* FP8_EXPERIMENT_MAX_CONFIGS */
#include "report_fp4_internal.h"
#include "timeline.h" /* fp8_tl_layer_prefix */
#include "trace.h"    /* FP8_NAME_MAX */
#include "util.h"

/* ------------------------------------------------------------------ layers */

/* A layer: name[0..len). */
typedef struct {
  const char *name;
  size_t len;
} lname;

static int cmp_lname(const void *pa, const void *pb) {
  const lname *a = pa, *b = pb;
  size_t n = a->len < b->len ? a->len : b->len;
  int c = strncmp(a->name, b->name, n);
  return c ? c : (a->len > b->len) - (a->len < b->len);
}

/* The layer of tensor t: its module without the rank prefix (rep_te_module_len). */
static lname layer_of_tensor(const char *t) {
  const char *s = rep_strip_rank(t);
  return (lname){s, rep_te_module_len(s)};
}

/* The layer of a GEMM (or Linear) name g: the module of its tensors "<g>.<role>". */
static lname layer_of_gemm(const char *g) {
  const char *s = rep_strip_rank(g);
  char buf[FP8_NAME_MAX + 16];
  int n = snprintf(buf, sizeof buf, "%s.input", s);
  size_t len = n > 0 && (size_t)n < sizeof buf ? rep_te_module_len(buf) : strlen(s);
  return (lname){s, len < strlen(s) ? len : strlen(s)};
}

/* The plan's step of layer l (1..nsteps), or 0 when the plan does not keep it in BF16; by[] is
 * the steps' layers in name order with their step (a bisection: a MoE model has ~10^5
 * tensors). */
typedef struct {
  lname l;
  size_t step;
} lstep;

static int cmp_lstep(const void *a, const void *b) {
  return cmp_lname(&((const lstep *)a)->l, &((const lstep *)b)->l);
}

static size_t step_of(const lstep *by, size_t n, lname l) {
  const lstep key = {l, 0};
  const lstep *f = bsearch(&key, by, n, sizeof *by, cmp_lstep);
  return f ? f->step : 0;
}

/* The plan's layers in name order with their step: calloc'ed, NULL when out of memory. */
static lstep *by_name(const rep_plan *p) {
  lstep *by = calloc(p->nsteps + 1, sizeof *by);
  if (!by) return NULL;
  for (size_t k = 0; k < p->nsteps; k++)
    by[k] = (lstep){{p->steps[k].name, p->steps[k].len}, k + 1};
  if (p->nsteps > 1) qsort(by, p->nsteps, sizeof *by, cmp_lstep);
  return by;
}

/* Adds layer l to the steps (once) and returns its entry; NULL when out of memory. */
static rep_plan_step *add_layer(rep_plan *p, size_t *cap, lname l) {
  for (size_t k = 0; k < p->nsteps; k++) /* plans are short: hundreds of layers */
    if (cmp_lname(&(lname){p->steps[k].name, p->steps[k].len}, &l) == 0) return &p->steps[k];
  rep_plan_step *s = fp8_grow(p->steps, p->nsteps, cap, sizeof *s, 16);
  if (!s) return NULL;
  p->steps = s;
  s = &p->steps[p->nsteps++];
  *s = (rep_plan_step){l.name, l.len, 0, 0, NAN, 1, NAN, NAN, 0, -1, -1};
  return s;
}

/* ------------------------------------------------------------------ the ranking keys */

/* The clipped steps and values of each layer's tensors under configuration c (non-warm-up:
 * the analysis' counts), by the layers in name order. */
static void clipped_keys(const rep_t *r, rep_plan *p, const lstep *by) {
  for (size_t g = 0; g < r->tab.ngroups; g++) {
    if (r->gcfg[g] != p->cfg) continue;
    size_t k = step_of(by, p->nsteps, layer_of_tensor(r->tab.groups[g].tensor));
    if (!k) continue;
    const fp8_group_stats *s = &r->an.stats[g];
    p->steps[k - 1].clipped_steps += s->stream_steps >= 0 ? s->stream_clipped_steps
                                                          : s->steps_with_clipped;
    p->steps[k - 1].clipped_values += s->clipped;
  }
}

/* One (layer, GEMM, step) error of the plan's configuration (which 0) or the reference's (1). */
typedef struct {
  const char *layer;
  int gemm;
  int64_t step;
  int which;
  double err;
} gerr;

static int cmp_gerr(const void *pa, const void *pb) {
  const gerr *a = pa, *b = pb;
  int c = strcmp(a->layer, b->layer);
  if (c) return c;
  if (a->gemm != b->gemm) return a->gemm < b->gemm ? -1 : 1;
  if (a->step != b->step) return a->step < b->step ? -1 : 1;
  return (a->which > b->which) - (a->which < b->which);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The FP8 plan's ratio: per layer of gemm.csv and GEMM, the lower median over the snapshot
 * steps of the plan configuration's error over the reference's at the same step (the FP4
 * verdict's statistic, from the rows: 0 / 0 counts as 1, x / 0 as inf); per plan layer the
 * largest over its GEMMs and GEMM layers. */
static int ratio_keys(const rep_t *r, rep_plan *p, const lstep *by, const fp8_gemm_table *t) {
  if (!t || p->ref < 0) return FP8_OK;
  gerr *e = malloc((2 * t->n + 1) * sizeof *e);
  double *q = malloc((t->n + 1) * sizeof *q);
  if (!e || !q) {
    free(e);
    free(q);
    return FP8_ENOMEM;
  }
  size_t n = 0;
  for (size_t i = 0; i < t->n; i++) {
    const fp8_gemm_row *row = &t->rows[i];
    if (!step_of(by, p->nsteps, layer_of_gemm(row->layer))) continue;
    for (int w = 0; w < 2; w++) {
      const cfg_t *c = &r->cfgs[w ? (size_t)p->ref : p->cfg];
      if (!c->mixed && rep_cfg_matches(c, &row->key))
        e[n++] = (gerr){row->layer, (int)row->gemm, row->step, w, row->rel_error};
    }
  }
  if (n > 1) qsort(e, n, sizeof *e, cmp_gerr);
  for (size_t i = 0; i < n;) { /* one (layer, GEMM) */
    size_t j = i, nq = 0;
    for (; j < n && strcmp(e[j].layer, e[i].layer) == 0 && e[j].gemm == e[i].gemm; j++)
      if (e[j].which == 0 && j + 1 < n && e[j + 1].which == 1 && e[j + 1].step == e[j].step &&
          strcmp(e[j + 1].layer, e[j].layer) == 0 && e[j + 1].gemm == e[j].gemm) {
        double a = e[j].err, b = e[j + 1].err;
        if (!isnan(a) && !isnan(b)) q[nq++] = b > 0 ? a / b : a > 0 ? INFINITY : 1.0;
      }
    if (nq) {
      qsort(q, nq, sizeof *q, cmp_double);
      double m = q[(nq + 1) / 2 - 1];
      rep_plan_step *s = &p->steps[step_of(by, p->nsteps, layer_of_gemm(e[i].layer)) - 1];
      if (isnan(s->ratio) || m > s->ratio) s->ratio = m;
    }
    i = j;
  }
  free(e);
  free(q);
  return FP8_OK;
}

/* Costliest first: FP8: clipped steps, clipped values, ratio (NaN last), descending; FP4: the
 * ratio; then the name. */
static int cmp_fp8(const void *pa, const void *pb) {
  const rep_plan_step *a = pa, *b = pb;
  if (a->clipped_steps != b->clipped_steps) return a->clipped_steps > b->clipped_steps ? -1 : 1;
  if (a->clipped_values != b->clipped_values) return a->clipped_values > b->clipped_values ? -1 : 1;
  if (isnan(a->ratio) != isnan(b->ratio)) return isnan(a->ratio) ? 1 : -1;
  if (a->ratio != b->ratio && !isnan(a->ratio)) return a->ratio > b->ratio ? -1 : 1;
  return cmp_lname(&(lname){a->name, a->len}, &(lname){b->name, b->len});
}

static int cmp_fp4(const void *pa, const void *pb) {
  const rep_plan_step *a = pa, *b = pb;
  if (a->ratio != b->ratio) return a->ratio > b->ratio ? -1 : 1;
  return cmp_lname(&(lname){a->name, a->len}, &(lname){b->name, b->len});
}

/* ------------------------------------------------------------------ FLOPs, Megatron's ends */

/* Each step's FLOPs and cumulative share from run.json's model_shape (rank 0's Linears at the
 * first snapshot step): 3 GEMMs of 2 tokens in out each per Linear. */
static void flops(const rep_t *r, rep_plan *p, const lstep *by) {
  if (!r->run.has_model_shape) return;
  const fp8_tl_shape *s = &r->run.model_shape;
  double total = 0.0;
  for (size_t k = 0; k < p->nsteps; k++) p->steps[k].flops = 0.0;
  for (size_t i = 0; i < s->nlinears; i++) {
    const fp8_tl_linear *l = &s->linears[i];
    double f = 6.0 * (double)l->tokens * (double)l->in * (double)l->out;
    total += f;
    size_t k = step_of(by, p->nsteps, layer_of_gemm(l->name));
    if (k) p->steps[k - 1].flops += f;
  }
  p->total_flops = total;
  double sum = 0.0;
  for (size_t k = 0; k < p->nsteps; k++) {
    sum += p->steps[k].flops;
    p->steps[k].share = total > 0 ? sum / total : NAN;
  }
}

/* A transformer block of the trace: its prefix up to its number (fp8_tl_layer_prefix) and
 * that number, with its layers counted. */
typedef struct {
  const char *name;
  size_t len, stem; /* the prefix, and where its number starts */
  long index;
  size_t layers, kept; /* the trace's layers in the block; of them in the prefix so far */
} block;

static int cmp_block(const void *pa, const void *pb) {
  const block *a = pa, *b = pb;
  int c = cmp_lname(&(lname){a->name, a->stem}, &(lname){b->name, b->stem});
  return c ? c : (a->index > b->index) - (a->index < b->index);
}

/* Each step's Megatron-LM form (docs/frameworks/megatron.md 4.2): the first k layers are the
 * first a and the last b transformer blocks, whole (every layer of the model in those blocks:
 * the trace's, and run.json's model_shape Linears; nothing else), the blocks one numbered run
 * without gaps of one name (`layers.<i>`; layers outside every block, an LM head, are not
 * blocks): then mg_start = a, mg_end = b. Megatron's flags switch whole TransformerLayers by
 * their index. */
static int megatron_ends(const rep_t *r, rep_plan *p) {
  const size_t nt = r->tab.ngroups,
               nlin = r->run.has_model_shape ? r->run.model_shape.nlinears : 0;
  lname *ls = malloc((nt + nlin + 1) * sizeof *ls);
  block *bl = malloc((nt + nlin + 1) * sizeof *bl);
  if (!ls || !bl) {
    free(ls);
    free(bl);
    return FP8_ENOMEM;
  }
  size_t nl = 0, nb = 0;
  /* the model's layers: the trace's, and its Linears (a [trace] tensors selection replays
   * some of them: a block is whole only with every Linear of the model in it) */
  for (size_t g = 0; g < nt; g++) ls[nl++] = layer_of_tensor(r->tab.groups[g].tensor);
  for (size_t i = 0; i < nlin; i++) ls[nl++] = layer_of_gemm(r->run.model_shape.linears[i].name);
  if (nl > 1) qsort(ls, nl, sizeof *ls, cmp_lname);
  size_t u = 0;
  for (size_t i = 0; i < nl; i++)
    if (!u || cmp_lname(&ls[i], &ls[u - 1]) != 0) ls[u++] = ls[i];
  nl = u;
  int ok = 1;
  for (size_t i = 0; i < nl && ok; i++) { /* the layers in numbered blocks (not an LM head) */
    char buf[FP8_NAME_MAX + 16];
    snprintf(buf, sizeof buf, "%.*s", (int)ls[i].len, ls[i].name);
    size_t bp = fp8_tl_layer_prefix(buf), st = bp;
    while (st > 0 && buf[st - 1] >= '0' && buf[st - 1] <= '9') st--;
    if (!bp) continue; /* outside every block: the flags leave it alone */
    if (bp - st > 9) {
      ok = 0;
      break;
    }
    block b = {ls[i].name, bp, st, strtol(buf + st, NULL, 10), 1, 0};
    size_t j = 0;
    while (j < nb && cmp_block(&bl[j], &b) != 0) j++;
    if (j < nb) bl[j].layers++;
    else bl[nb++] = b;
  }
  ok &= nb > 0;
  if (ok) qsort(bl, nb, sizeof *bl, cmp_block);
  for (size_t j = 1; ok && j < nb; j++) /* one name, numbered without gaps */
    ok = cmp_lname(&(lname){bl[j].name, bl[j].stem}, &(lname){bl[0].name, bl[0].stem}) == 0 &&
         bl[j].index == bl[j - 1].index + 1;
  for (size_t k = 0; ok && k < p->nsteps; k++) {
    rep_plan_step *s = &p->steps[k];
    size_t j = 0;
    while (j < nb && !(s->len >= bl[j].len && strncmp(s->name, bl[j].name, bl[j].len) == 0 &&
                       (s->len == bl[j].len || s->name[bl[j].len] == '.')))
      j++;
    if (j == nb) break; /* a layer outside the blocks: no prefix from here on */
    bl[j].kept++;
    size_t a = 0, b = 0, partial = 0, any = 0;
    while (a < nb && bl[a].kept == bl[a].layers) a++;
    while (b < nb - a && bl[nb - 1 - b].kept == bl[nb - 1 - b].layers) b++;
    for (size_t i = a; i < nb - b; i++) partial |= bl[i].kept > 0;
    for (size_t i = 0; i < nb; i++) any |= bl[i].kept > 0;
    if (any && !partial) s->mg_start = (int)a, s->mg_end = (int)b;
  }
  free(ls);
  free(bl);
  return FP8_OK;
}

/* ------------------------------------------------------------------ the plans */

static int finish(const rep_t *r, rep_plan *p, const fp8_gemm_table *t, int fp4) {
  lstep *by = by_name(p);
  if (!by) return FP8_ENOMEM;
  clipped_keys(r, p, by);
  int rc = fp4 ? FP8_OK : ratio_keys(r, p, by, t);
  free(by);
  if (rc) return rc;
  if (p->nsteps > 1) qsort(p->steps, p->nsteps, sizeof *p->steps, fp4 ? cmp_fp4 : cmp_fp8);
  if (!(by = by_name(p))) return FP8_ENOMEM;
  flops(r, p, by);
  p->miss_step = calloc(p->nmiss + 1, sizeof *p->miss_step);
  if (!p->miss_step) rc = FP8_ENOMEM;
  for (size_t i = 0; !rc && i < p->nmiss; i++)
    p->miss_step[i] = step_of(by, p->nsteps, fp4 ? (lname){p->miss[i], strlen(p->miss[i])}
                                                 : layer_of_tensor(p->miss[i]));
  free(by);
  if (rc) return rc;
  for (size_t k = 0; k < p->nsteps; k++)
    for (size_t i = 0; i < p->nmiss; i++) p->steps[k].left += p->miss_step[i] > k + 1;
  if ((rc = megatron_ends(r, p))) return rc;
  /* bf16_plan.ini's prefixes: every one unless the configurations would pass the experiment's
   * limit (each prefix is a label of one or two sections) */
  p->stride = 1;
  while (2 * (p->nsteps / p->stride + 2) + 4 > FP8_EXPERIMENT_MAX_CONFIGS / REP_NPLANS) p->stride++;
  p->have = 1;
  return FP8_OK;
}

static int fp8_plan(const rep_t *r, rep_plan *p, const fp8_gemm_table *t) {
  const fp8_recommendation *x = rep_model_rec(r);
  if (!x || !x->in_run || x->key.kind != FP8_KIND_DELAYED || !x->meets_budget) return FP8_OK;
  size_t c = 0;
  while (c < r->ncfg && (r->cfgs[c].mixed || !rep_cfg_matches(&r->cfgs[c], &x->key))) c++;
  if (c == r->ncfg) return FP8_OK;
  p->cfg = c;
  p->x = x;
  p->ref = r->fp4 && r->fp4->ref >= 0 ? r->fp4->ref : r->cur >= 0 ? r->cur : r->ref;
  if (p->ref == (ptrdiff_t)p->cfg) p->ref = -1; /* the answer is the reference: no ratio */
  p->miss = calloc(x->nmisfits + 1, sizeof *p->miss);
  if (!p->miss) return FP8_ENOMEM;
  size_t cap = 0;
  for (size_t k = 0; k < x->nmisfits; k++) {
    if (!(p->miss[k] = strdup(x->misfits[k]))) return FP8_ENOMEM;
    p->nmiss++;
    if (!add_layer(p, &cap, layer_of_tensor(p->miss[k]))) return FP8_ENOMEM;
  }
  return finish(r, p, t, 0);
}

static int fp4_plan(const rep_t *r, rep_plan *p) {
  const struct rep_fp4 *f = r->fp4;
  if (!f || f->advised < 0 || f->ref < 0) return FP8_OK;
  p->cfg = (size_t)f->advised;
  p->ref = f->ref;
  size_t cap = 0;
  for (size_t l = 0; l < f->nlayers; l++) {
    int v = rep_fp4_layer_verdict(r, p->cfg, l, NULL);
    p->nnone += v == V_NONE;
    if (v != V_FAILS && v != V_CLOSE) continue;
    size_t before = p->nsteps;
    rep_plan_step *s = add_layer(p, &cap, layer_of_gemm(f->layers[l]));
    if (!s) return FP8_ENOMEM;
    if (p->nsteps > before) s->fails = 0; /* fails when one of its GEMM layers fails */
    s->fails |= v == V_FAILS;
    const gstat *st = rep_fp4_st(r, p->cfg, l);
    for (int g = 0; g < 3; g++)
      if (isnan(s->ratio) || st[g].m > s->ratio) s->ratio = st[g].m;
  }
  p->miss = calloc(p->nsteps + 1, sizeof *p->miss);
  if (!p->miss) return FP8_ENOMEM;
  for (size_t k = 0; k < p->nsteps; k++) { /* owned copies: the steps are sorted in finish */
    if (!(p->miss[k] = strndup(p->steps[k].name, p->steps[k].len))) return FP8_ENOMEM;
    p->nmiss++;
  }
  return finish(r, p, NULL, 1);
}

int rep_bf16_plan_prepare(rep_t *r, const fp8_gemm_table *t, char *err, size_t errlen) {
  if (!r->have_rec) return FP8_OK;
  if (!(r->plans = calloc(REP_NPLANS, sizeof *r->plans)))
    return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  int rc = fp8_plan(r, &r->plans[REP_PLAN_FP8], t);
  if (!rc) rc = fp4_plan(r, &r->plans[REP_PLAN_FP4]);
  return rc ? fp8_errorf(rc, err, errlen, "out of memory") : FP8_OK;
}

void rep_bf16_plan_free(rep_t *r) {
  for (int w = 0; r->plans && w < REP_NPLANS; w++) {
    rep_plan *p = &r->plans[w];
    for (size_t i = 0; i < p->nmiss; i++) free(p->miss[i]);
    free(p->miss);
    free(p->miss_step);
    free(p->steps);
  }
  free(r->plans);
  r->plans = NULL;
}

const rep_plan *rep_bf16_plan(const rep_t *r, int which) {
  return r->plans && which >= 0 && which < REP_NPLANS && r->plans[which].have ? &r->plans[which]
                                                                             : NULL;
}

int rep_bf16_plan_replayed(const rep_plan *p, size_t k) {
  return k == p->nsteps || k % p->stride == 0;
}
