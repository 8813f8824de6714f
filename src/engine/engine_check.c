/* engine_check.c: an engine against the simulator, op by op (see engine_check.h). The oracle
 * is src/sim called directly, with its own delayed states and its own amax reduction; the
 * engine under test sees only engine.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine.h"
#include "engine_check.h"
#include "engine_check_internal.h"
#include "gemm.h"
#include "util.h"

#define SUM_RTOL 1e-6  /* the three double sums: another summation order (engine.h) */
#define GEMM_RTOL 1e-6 /* exact by construction (engine_check.h); room for the last bits */

typedef struct {
  const chk_fixture *f;
  fp8_engine *e;
  fp8_engine_plan plan;
  fp8_check_report *rep;
  fp8_engine_comm comm;            /* counts the engine's all-reduces, then calls opt->comm */
  const fp8_engine_comm *inner;
  fp8_delayed_state *dl;           /* the oracle's states [ntensors * nconfigs] */
  fp8_tensor_view view[CHK_TENSORS];
  void *data[CHK_TENSORS];         /* this step's bytes (NULL: the tensor does not run) */
  float *x[CHK_TENSORS];           /* the same widened */
  fp8_tensor_result got[CHK_TENSORS], want[CHK_TENSORS];
  float amax[CHK_TENSORS];
  int step;
  int slots;                       /* the plan has the fixture's reduction slots (else none) */
} chk_run;

static int counted_allreduce(void *ctx, float *buf, size_t count, char *err, size_t errlen) {
  chk_run *k = ctx;
  k->rep->comm_calls++;
  return k->inner->allreduce_max(k->inner->ctx, buf, count, err, errlen);
}

/* ---------------------------------------------------------------- comparisons */

static void mismatch(chk_run *k, size_t t, size_t c, const char *what, double got, double want) {
  fp8_check_report *r = k->rep;
  if (r->mismatches++ || r->first[0]) return;
  char cfg[128] = "";
  if (c != (size_t)-1) {
    const fp8_config *cf = &k->f->configs[c];
    snprintf(cfg, sizeof cfg, ", configuration %zu (%s %s L=%d m=%d)", c,
             fp8_recipe_kind_name(cf->kind), fp8_kind_format_name(cf->kind, k->f->formats[t * k->f->nconfigs + c]),
             (int)cf->history_len, (int)cf->margin);
  }
  snprintf(r->first, sizeof r->first, "step %d, tensor %s (%s)%s: %s %.9g, simulator %.9g",
           k->step, k->f->names[t], fp8_dtype_name(k->f->dtype[t]), cfg, what, got, want);
}

static void same_bits(chk_run *k, size_t t, size_t c, const char *what, float got, float want) {
  k->rep->values++;
  if (memcmp(&got, &want, sizeof got) != 0 && !(isnan(got) && isnan(want)))
    mismatch(k, t, c, what, got, want);
}

static void same_i64(chk_run *k, size_t t, size_t c, const char *what, int64_t got, int64_t want) {
  k->rep->values++;
  if (got != want) mismatch(k, t, c, what, (double)got, (double)want);
}

static void close_rel(chk_run *k, size_t t, size_t c, const char *what, double got, double want,
                      double rtol) {
  k->rep->values++;
  if (got == want || (isnan(got) && isnan(want))) return;
  double d = fabs(got - want), m = fmax(fabs(got), fabs(want));
  if (!(d <= rtol * m)) mismatch(k, t, c, what, got, want);
}

static void same_stats(chk_run *k, size_t t, size_t c, const fp8_stats *g, const fp8_stats *w) {
  same_i64(k, t, c, "n", g->n, w->n);
  same_i64(k, t, c, "nonfinite", g->nonfinite, w->nonfinite);
  same_i64(k, t, c, "zeros", g->zeros, w->zeros);
  same_i64(k, t, c, "overflow", g->overflow, w->overflow);
  same_i64(k, t, c, "underflow", g->underflow, w->underflow);
  same_i64(k, t, c, "subnormal", g->subnormal, w->subnormal);
  close_rel(k, t, c, "sum_sq_err", g->sum_sq_err, w->sum_sq_err, SUM_RTOL);
  close_rel(k, t, c, "sum_sq", g->sum_sq, w->sum_sq, SUM_RTOL);
  same_i64(k, t, c, "clipped", g->clipped, w->clipped);
  close_rel(k, t, c, "sum_sq_hat", g->sum_sq_hat, w->sum_sq_hat, SUM_RTOL);
}

static void same_block(chk_run *k, size_t t, size_t c, const fp8_block_stats *g,
                       const fp8_block_stats *w) {
  same_i64(k, t, c, "nblocks", g->nblocks, w->nblocks);
  same_i64(k, t, c, "blocks_with_overflow", g->blocks_with_overflow, w->blocks_with_overflow);
  close_rel(k, t, c, "log2_scale_min", g->log2_scale_min, w->log2_scale_min, 0);
  close_rel(k, t, c, "log2_scale_max", g->log2_scale_max, w->log2_scale_max, 0);
  close_rel(k, t, c, "log2_scale_std", g->log2_scale_std, w->log2_scale_std, 0);
  close_rel(k, t, c, "overshoot", g->overshoot, w->overshoot, 0);
  /* stochastic rounding's expectation (FP4): double sums, another order on a device */
  close_rel(k, t, c, "underflow_expected", g->underflow_expected, w->underflow_expected, SUM_RTOL);
  close_rel(k, t, c, "sum_sq_err_expected", g->sum_sq_err_expected, w->sum_sq_err_expected,
            SUM_RTOL);
}

static int supports(const chk_run *k, fp8_engine_op op, size_t c) {
  return fp8_engine_supports(k->e, op, c);
}

/* ---------------------------------------------------------------- the oracle */

static float oracle_scale(const chk_run *k, size_t t, size_t c) {
  const chk_fixture *f = k->f;
  const fp8_config *cf = &f->configs[c];
  if (cf->kind == FP8_KIND_DELAYED) return k->dl[t * f->nconfigs + c].scale;
  fp8_current_params cp = fp8_config_current_params(cf, f->formats[t * f->nconfigs + c]);
  return fp8_current_scale(&cp, k->want[t].amax);
}

static int oracle_tensor(chk_run *k, size_t t) {
  const chk_fixture *f = k->f;
  fp8_tensor_result *w = &k->want[t];
  size_t n = (size_t)f->numel[t];
  w->amax = fp8_amax_f32(k->x[t], n);
  memset(w->hist, 0, sizeof w->hist);
  fp8_log2_histogram(k->x[t], n, w->hist);
  int64_t rows, cols;
  fp8_block_view_2d(k->view[t].shape, k->view[t].ndim, &rows, &cols);
  for (size_t c = 0; c < f->nconfigs; c++) {
    const fp8_config *cf = &f->configs[c];
    fp8_format fm = f->formats[t * f->nconfigs + c];
    fp8_stats_init(&w->stats[c]);
    if (fp8_recipe_kind_is_block(cf->kind)) {
      fp8_block_params bp = fp8_config_block_params(cf, f->roles[t], fm, f->dtype[t]);
      w->scale[c] = NAN;
      if (fp8_block_quantize_f32(k->x[t], rows, cols, &bp, FP8_BLOCK_DIR_ROW, NULL, NULL,
                                 &w->stats[c], &w->block[c]))
        return FP8_ENOMEM;
    } else {
      w->scale[c] = oracle_scale(k, t, c);
      fp8_quantize_f32(k->x[t], n, w->scale[c], fm, NULL, NULL, &w->stats[c]);
    }
  }
  return FP8_OK;
}

/* The oracle's end of a phase: the reduction slots' max over the phase's tensors (NaN never
 * occurs: amaxes ignore NaN), the world of one all-reduce (the identity), the update. */
static void oracle_end_phase(chk_run *k, unsigned phases) {
  const chk_fixture *f = k->f;
  float red[CHK_TENSORS] = {0};
  for (size_t t = 0; t < f->ntensors; t++) {
    size_t slot = k->slots ? f->red_slot[t] : t;
    if (fp8_plan_in_phase(&k->plan, t, phases) && k->amax[t] > red[slot]) red[slot] = k->amax[t];
  }
  for (size_t t = 0; t < f->ntensors; t++) {
    if (!fp8_plan_in_phase(&k->plan, t, phases)) continue;
    float a = red[k->slots ? f->red_slot[t] : t];
    for (size_t c = 0; c < f->nconfigs; c++)
      if (f->configs[c].kind == FP8_KIND_DELAYED) fp8_delayed_update(&k->dl[t * f->nconfigs + c], a);
  }
}

/* ---------------------------------------------------------------- one step */

static int load_step(chk_run *k, char *err, size_t errlen) {
  const chk_fixture *f = k->f;
  for (size_t t = 0; t < f->ntensors; t++) {
    free(k->data[t]);
    free(k->x[t]);
    k->x[t] = NULL;
    if (chk_fixture_data(f, t, k->step, &k->data[t])) return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
    k->amax[t] = 0.0f;
    if (!k->data[t]) continue;
    k->view[t] = (fp8_tensor_view){.name = (char *)f->names[t], .dtype = f->dtype[t],
                                   .ndim = f->ndim[t], .numel = f->numel[t], .data = k->data[t]};
    k->view[t].shape[0] = f->shape[t][0];
    k->view[t].shape[1] = f->shape[t][1];
    if (!(k->x[t] = malloc(((size_t)f->numel[t] + 1) * sizeof(float))))
      return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
    fp8_dtype_to_f32(f->dtype[t], k->data[t], (size_t)f->numel[t], k->x[t]);
  }
  return FP8_OK;
}

static void compare_tensor(chk_run *k, size_t t) {
  const chk_fixture *f = k->f;
  const fp8_tensor_result *g = &k->got[t], *w = &k->want[t];
  same_bits(k, t, (size_t)-1, "amax", g->amax, w->amax);
  for (int b = 0; b < FP8_LOG2_HIST_BINS; b++) same_i64(k, t, (size_t)-1, "histogram bin", g->hist[b], w->hist[b]);
  for (size_t c = 0; c < f->nconfigs; c++) {
    if (!supports(k, FP8_OP_QUANTIZE_STATS, c)) continue;
    same_stats(k, t, c, &g->stats[c], &w->stats[c]);
    if (fp8_recipe_kind_is_block(f->configs[c].kind)) {
      same_block(k, t, c, &g->block[c], &w->block[c]);
      k->rep->values++;
      if (!isnan(g->scale[c])) mismatch(k, t, c, "scale (NaN for block kinds)", g->scale[c], NAN);
    } else {
      same_bits(k, t, c, "scale", g->scale[c], w->scale[c]);
      k->rep->clipped_cases += w->stats[c].clipped > 0;
      k->rep->unclipped_cases += w->stats[c].overflow > w->stats[c].clipped;
    }
  }
}

/* The codes of every supported per-tensor configuration. */
static int compare_casts(chk_run *k, size_t t, char *err, size_t errlen) {
  const chk_fixture *f = k->f;
  size_t n = (size_t)f->numel[t];
  uint8_t *got = malloc(n + 1), *want = malloc(n + 1);
  int rc = got && want ? FP8_OK : fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  for (size_t c = 0; c < f->nconfigs && rc == FP8_OK; c++) {
    if (fp8_recipe_kind_is_block(f->configs[c].kind) || !supports(k, FP8_OP_QUANTIZE_STATS, c)) continue;
    rc = fp8_engine_cast(k->e, t, c, got, err, errlen);
    if (rc) break;
    fp8_quantize_f32(k->x[t], n, k->want[t].scale[c], f->formats[t * f->nconfigs + c], want, NULL, NULL);
    for (size_t i = 0; i < n; i++) {
      k->rep->values++;
      if (got[i] != want[i]) {
        char what[64];
        snprintf(what, sizeof what, "code of element %zu", i);
        mismatch(k, t, c, what, got[i], want[i]);
        break;
      }
    }
  }
  free(got);
  free(want);
  return rc;
}

/* gemm.h's errors of a block configuration: each operand quantized row-wise and column-wise
 * (TE's layouts, as gemm.h describes them). */
static int oracle_block_gemm(const chk_run *k, const fp8_gemm_ref *ref, const fp8_engine_layer *l,
                             size_t c, double e[FP8_GEMM_COUNT]) {
  const chk_fixture *f = k->f;
  const int64_t rows[3] = {l->tokens, l->out, l->tokens}, cols[3] = {l->in, l->in, l->out};
  float *rw[3] = {NULL, NULL, NULL}, *cw[3] = {NULL, NULL, NULL};
  int rc = FP8_OK;
  for (int i = 0; i < 3 && !rc; i++) {
    size_t t = l->tensor[i], n = (size_t)(rows[i] * cols[i]);
    fp8_block_params bp = fp8_config_block_params(&f->configs[c], f->roles[t],
                                                  f->formats[t * f->nconfigs + c], f->dtype[t]);
    rw[i] = malloc((n + 1) * sizeof(float));
    cw[i] = malloc((n + 1) * sizeof(float));
    if (!rw[i] || !cw[i]) rc = FP8_ENOMEM;
    if (!rc) rc = fp8_block_quantize_f32(k->x[t], rows[i], cols[i], &bp, FP8_BLOCK_DIR_ROW, rw[i], NULL, NULL, NULL);
    bp.rht = f->configs[c].kind == FP8_KIND_NVFP4 && f->configs[c].rht && i != 1; /* TE's wgrad operands */
    if (!rc) rc = fp8_block_quantize_f32(k->x[t], rows[i], cols[i], &bp, FP8_BLOCK_DIR_COL, cw[i], NULL, NULL, NULL);
  }
  fp8_gemm_operands ops = {rw[0], rw[1], rw[2], cw[1], cw[2], cw[0]};
  if (!rc) rc = fp8_gemm_errors(ref, &ops, e);
  for (int i = 0; i < 3; i++) {
    free(rw[i]);
    free(cw[i]);
  }
  return rc;
}

/* The layer's GEMMs: the engine's against gemm.h on the oracle's scales. */
static int compare_gemm(chk_run *k, char *err, size_t errlen) {
  const chk_fixture *f = k->f;
  const size_t nc = f->nconfigs, ti[3] = {CHK_LAYER_X, CHK_LAYER_W, CHK_LAYER_G};
  unsigned char *want = calloc(nc + 1, 1);
  fp8_gemm_request *req = malloc((nc + 1) * sizeof *req);
  double *rel = malloc((3 * nc + 1) * sizeof *rel);
  float *q[3] = {NULL, NULL, NULL};
  fp8_gemm_ref ref;
  memset(&ref, 0, sizeof ref);
  int rc = want && req && rel ? FP8_OK : fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  fp8_engine_layer l = {.name = "l0", .tokens = f->shape[CHK_LAYER_X][0],
                        .in = f->shape[CHK_LAYER_X][1], .out = f->shape[CHK_LAYER_W][0]};
  for (int i = 0; i < 3; i++) {
    l.tensor[i] = ti[i];
    l.scale[i] = k->got[ti[i]].scale;
    if (!rc && !(q[i] = malloc(((size_t)f->numel[ti[i]] + 1) * sizeof(float))))
      rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  }
  size_t nwant = 0;
  for (size_t c = 0; c < nc && !rc; c++) {
    int per_tensor = !fp8_recipe_kind_is_block(f->configs[c].kind);
    want[c] = supports(k, FP8_OP_GEMM, c) && (!per_tensor || supports(k, FP8_OP_QUANTIZE_STATS, c));
    if (want[c]) req[nwant++] = (fp8_gemm_request){{c, c, c}, rel + 3 * c}; /* rel[3c + g] */
    k->rep->declined += !want[c];
  }
  if (!rc && nwant) rc = fp8_engine_gemm(k->e, &l, req, nwant, err, errlen);
  if (!rc && nwant) rc = fp8_engine_sync(k->e, err, errlen);
  if (!rc && nwant)
    rc = fp8_gemm_ref_init(&ref, k->x[ti[0]], k->x[ti[1]], k->x[ti[2]], l.tokens, l.in, l.out,
                           f->gemm_max_tokens);
  for (size_t c = 0; c < nc && !rc; c++) {
    if (!want[c]) continue;
    double e[FP8_GEMM_COUNT];
    const float *x[3] = {k->x[ti[0]], k->x[ti[1]], k->x[ti[2]]};
    if (fp8_recipe_kind_is_block(f->configs[c].kind)) {
      rc = oracle_block_gemm(k, &ref, &l, c, e);
    } else {
      float sc[3];
      fp8_format fm[3];
      for (int i = 0; i < 3; i++) {
        sc[i] = k->want[ti[i]].scale[c];
        fm[i] = f->formats[ti[i] * nc + c];
      }
      rc = fp8_gemm_errors_per_tensor(&ref, x, sc, fm, q, NULL, e);
    }
    if (rc) fp8_errorf(rc, err, errlen, "GEMM oracle: %s", fp8_strerror(rc));
    for (int g = 0; g < FP8_GEMM_COUNT && !rc; g++)
      close_rel(k, CHK_LAYER_X, c, fp8_gemm_name((fp8_gemm_kind)g), rel[3 * c + (size_t)g], e[g], GEMM_RTOL);
  }
  if (!rc && nwant) k->rep->gemm_layers++;
  fp8_gemm_ref_free(&ref);
  for (int i = 0; i < 3; i++) free(q[i]);
  free(want);
  free(req);
  free(rel);
  return rc;
}

static int compare_state(chk_run *k, char *err, size_t errlen) {
  const chk_fixture *f = k->f;
  float scale[128]; /* chk_fixture_init makes at most 128 configurations */
  for (size_t t = 0; t < f->ntensors; t++) {
    int rc = fp8_engine_state(k->e, t, scale, err, errlen);
    if (rc) return rc;
    for (size_t c = 0; c < f->nconfigs; c++)
      if (f->configs[c].kind == FP8_KIND_DELAYED && supports(k, FP8_OP_QUANTIZE_STATS, c))
        same_bits(k, t, c, "delayed scale after end_phase", scale[c], k->dl[t * f->nconfigs + c].scale);
  }
  return FP8_OK;
}

static int check_step(chk_run *k, char *err, size_t errlen) {
  const chk_fixture *f = k->f;
  int rc = load_step(k, err, errlen);
  if (!rc) rc = fp8_engine_begin_step(k->e, k->step, err, errlen);
  for (size_t t = 0; t < f->ntensors && !rc; t++) {
    if (!k->data[t]) continue;
    rc = fp8_engine_load(k->e, t, &k->view[t], err, errlen);
    if (!rc) rc = fp8_engine_quantize_stats(k->e, t, &k->got[t], err, errlen);
  }
  if (!rc) rc = fp8_engine_sync(k->e, err, errlen);
  for (size_t t = 0; t < f->ntensors && !rc; t++) {
    if (!k->data[t]) continue;
    if (oracle_tensor(k, t)) return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
    compare_tensor(k, t);
    k->amax[t] = k->want[t].amax;
    rc = compare_casts(k, t, err, errlen);
  }
  if (!rc && k->data[CHK_LAYER_X] && k->data[CHK_LAYER_W] && k->data[CHK_LAYER_G])
    rc = compare_gemm(k, err, errlen);
  static const unsigned phase[2] = {FP8_FWD, FP8_BWD};
  for (int p = 0; p < 2 && !rc; p++) {
    rc = fp8_engine_end_phase(k->e, phase[p], k->amax, err, errlen);
    oracle_end_phase(k, phase[p]);
    if (!rc) rc = compare_state(k, err, errlen);
  }
  return rc;
}

/* ---------------------------------------------------------------- the run */

static int alloc_results(chk_run *k) {
  size_t nc = k->f->nconfigs;
  for (size_t t = 0; t < k->f->ntensors; t++) {
    fp8_tensor_result *r[2] = {&k->got[t], &k->want[t]};
    for (int i = 0; i < 2; i++) {
      r[i]->stats = calloc(nc, sizeof *r[i]->stats);
      r[i]->scale = calloc(nc, sizeof *r[i]->scale);
      r[i]->block = calloc(nc, sizeof *r[i]->block);
      if (!r[i]->stats || !r[i]->scale || !r[i]->block) return FP8_ENOMEM;
    }
  }
  k->dl = calloc(k->f->ntensors * nc, sizeof *k->dl);
  if (!k->dl) return FP8_ENOMEM;
  for (size_t t = 0; t < k->f->ntensors; t++)
    for (size_t c = 0; c < nc; c++)
      if (k->f->configs[c].kind == FP8_KIND_DELAYED) {
        fp8_delayed_params dp = fp8_config_delayed_params(&k->f->configs[c], k->f->formats[t * nc + c]);
        int rc = fp8_delayed_init(&k->dl[t * nc + c], &dp);
        if (rc) return rc;
      }
  return FP8_OK;
}

static void free_run(chk_run *k) {
  fp8_engine_free(k->e);
  for (size_t t = 0; t < CHK_TENSORS; t++) {
    free(k->data[t]);
    free(k->x[t]);
    fp8_tensor_result *r[2] = {&k->got[t], &k->want[t]};
    for (int i = 0; i < 2; i++) {
      free(r[i]->stats);
      free(r[i]->scale);
      free(r[i]->block);
    }
  }
  if (k->dl)
    for (size_t i = 0; i < k->f->ntensors * k->f->nconfigs; i++) fp8_delayed_free(&k->dl[i]);
  free(k->dl);
}

/* One pass of the check: the fixture's replay with (slots) or without reduction slots. */
static int check_pass(fp8_engine_factory make, const fp8_check_options *opt, const chk_fixture *f,
                      int slots, fp8_check_report *rep, char *err, size_t errlen) {
  chk_run k;
  memset(&k, 0, sizeof k);
  k.f = f;
  k.rep = rep;
  k.slots = slots;
  int rc = alloc_results(&k);
  if (rc) {
    rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
    goto done;
  }
  k.inner = opt->comm;
  k.comm = (fp8_engine_comm){counted_allreduce, &k, opt->comm ? opt->comm->name : NULL};
  k.plan = (fp8_engine_plan){.ntensors = f->ntensors, .names = f->names, .roles = f->roles,
                             .nconfigs = f->nconfigs, .configs = f->configs, .formats = f->formats,
                             .red_slot = slots ? f->red_slot : NULL, .nred = slots ? f->nred : 0,
                             .comm = opt->comm ? &k.comm : NULL, .histograms = 1,
                             .gemm_max_tokens = f->gemm_max_tokens,
                             .threads = opt->threads > 0 ? opt->threads : 1};
  if ((rc = make(&k.plan, &k.e, err, errlen)) != FP8_OK) goto done;
  for (size_t c = 0; c < f->nconfigs; c++) rep->declined += !supports(&k, FP8_OP_QUANTIZE_STATS, c);
  if ((rc = compare_state(&k, err, errlen)) != FP8_OK) goto done; /* scale 1 at the start */
  for (k.step = 0; k.step < f->nsteps && rc == FP8_OK; k.step++) rc = check_step(&k, err, errlen);
done:
  free_run(&k);
  return rc;
}

int fp8_engine_check(fp8_engine_factory make, const fp8_check_options *opt,
                     fp8_check_report *rep, char *err, size_t errlen) {
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  memset(rep, 0, sizeof *rep);
  chk_fixture f;
  int rc = chk_fixture_init(&f, opt->full);
  if (rc) rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  /* with the reduction slots of reduce_amax, then with every tensor its own */
  for (int slots = 1; slots >= 0 && rc == FP8_OK; slots--)
    rc = check_pass(make, opt, &f, slots, rep, err, errlen);
  chk_fixture_free(&f);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  rep->seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  return rc;
}
