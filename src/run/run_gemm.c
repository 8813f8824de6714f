/* run_gemm.c: the GEMM errors of one part (rank) of a snapshot step, for gemm.csv. A layer is
 * `<layer>.input`, `<layer>.weight` and `<layer>.grad_output`, all three selected and present at
 * the step with matching shapes (gemm.h). Each layer's GEMM requests (engine.h
 * fp8_gemm_request): a configuration that applies to all three operands (its section's
 * tensors) its own; a shared recipe label whose sections split the three one mixed request,
 * each operand from the section that takes its tensor (docs/semantics.md, "GEMMs of a mixed
 * recipe"). The engine runs them (its primary or its CPU engine: engine.h's composite) with the
 * scales the three casts used at this step; rows come out in layer (strcmp), GEMM,
 * configuration order, a mixed request's where the first of its configurations is. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.h"
#include "run_segs.h"
#include "runner_internal.h"
#include "util.h"

static int cmp_cstr(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The index of `<layer>.<role>` when it is selected and present at this step, else -1. */
static ssize_t layer_tensor(const run_t *r, const char *layer, const char *role) {
  char name[1024];
  if ((size_t)snprintf(name, sizeof name, "%s.%s", layer, role) >= sizeof name) return -1;
  ssize_t idx = run_find_tensor(r, name);
  return idx >= 0 && r->t[idx].view ? idx : -1;
}

/* The layer's engine description, or 0 when it is not a complete layer at this step. */
static int layer_of(const run_t *r, const char *name, fp8_engine_layer *l) {
  static const char *const roles[3] = {"input", "weight", "grad_output"};
  ssize_t idx[3];
  for (int i = 0; i < 3; i++)
    if ((idx[i] = layer_tensor(r, name, roles[i])) < 0) return 0;
  int64_t rows[3], cols[3];
  for (int i = 0; i < 3; i++) {
    const fp8_tensor_view *v = r->t[idx[i]].view;
    fp8_block_view_2d(v->shape, v->ndim, &rows[i], &cols[i]);
  }
  /* X [T, in], W [out, in], dY [T, out] */
  if (rows[0] != rows[2] || cols[0] != cols[1] || rows[1] != cols[2] || rows[0] == 0 ||
      cols[0] == 0 || rows[1] == 0)
    return 0;
  *l = (fp8_engine_layer){.name = name, .tokens = rows[0], .in = cols[0], .out = rows[1]};
  for (int i = 0; i < 3; i++) {
    l->tensor[i] = (size_t)idx[i];
    l->scale[i] = r->t[idx[i]].res.scale;
  }
  return 1;
}

/* The configuration of the shared label whose first section is `first` that takes tensor t
 * (a shared label's sections are one configuration each; docs/semantics.md), or SIZE_MAX. */
static size_t label_config(const run_t *r, size_t first, size_t t) {
  const fp8_experiment *ex = r->ex;
  for (size_t s = first; s < ex->nsections; s++) {
    const fp8_recipe_section *sec = &ex->sections[s];
    if (sec->label_first == first && r->covers[t * r->nconfigs + sec->first_config])
      return sec->first_config;
  }
  return SIZE_MAX;
}

/* The layer's requests into out (at most nconfigs), their rel left for the caller: in
 * configuration order, a mixed request at its first configuration. */
static size_t layer_requests(const run_t *r, const fp8_engine_layer *l, fp8_gemm_request *out) {
  const fp8_experiment *ex = r->ex;
  const size_t nc = r->nconfigs;
  size_t n = 0;
  for (size_t c = 0; c < nc; c++) {
    if (r->covers[l->tensor[0] * nc + c] && r->covers[l->tensor[1] * nc + c] &&
        r->covers[l->tensor[2] * nc + c]) {
      out[n++] = (fp8_gemm_request){{c, c, c}, NULL};
      continue;
    }
    const fp8_recipe_section *sec = &ex->sections[ex->config_section[c]];
    /* a mixed request sits at the first of its operands' configurations: c must take one */
    if (sec->label_count < 2 ||
        !(r->covers[l->tensor[0] * nc + c] || r->covers[l->tensor[1] * nc + c] ||
          r->covers[l->tensor[2] * nc + c]))
      continue;
    size_t cfg[3], first = SIZE_MAX;
    for (int i = 0; i < 3; i++) {
      cfg[i] = label_config(r, sec->label_first, l->tensor[i]);
      first = cfg[i] < first ? cfg[i] : first;
    }
    if (first == c) out[n++] = (fp8_gemm_request){{cfg[0], cfg[1], cfg[2]}, NULL};
  }
  return n;
}

/* The configuration whose key columns GEMM g's row of request q carries: its operands'
 * configuration when they share the key columns (kind and the delayed parameters), else a
 * copy of the first one's with kind "mixed" (docs/semantics.md, "GEMMs of a mixed recipe"). */
static const fp8_config *row_config(const run_t *r, const fp8_gemm_request *q, int g,
                                    fp8_config *tmp) {
  const fp8_config *a = &r->ex->configs[q->config[fp8_gemm_operand_tensor((fp8_gemm_kind)g, 0)]];
  const fp8_config *b = &r->ex->configs[q->config[fp8_gemm_operand_tensor((fp8_gemm_kind)g, 1)]];
  if (a->kind == b->kind &&
      (a->kind != FP8_KIND_DELAYED || (a->history_len == b->history_len && a->margin == b->margin &&
                                       a->amax_compute == b->amax_compute)))
    return a;
  *tmp = *a;
  tmp->kind = FP8_KIND_MIXED;
  return tmp;
}

/* Whether request q has an operand of a block kind: the engine then computes all its GEMMs in
 * FP32, the tensor-core model applying to none (engine.h, engine_cpu_gemm.c's req_blocks). */
static int req_has_block(const fp8_experiment *ex, const fp8_gemm_request *q) {
  for (int i = 0; i < 3; i++)
    if (fp8_recipe_kind_is_block(ex->configs[q->config[i]].kind)) return 1;
  return 0;
}

/* The configuration GEMM g of request q is divided by (the FP4 ratio: engine.h
 * fp8_engine_gemm's rule), and its plain request among the layer's req[0..n) (-1: none). */
static ptrdiff_t ratio_request(const run_t *r, const fp8_gemm_request *q, int g,
                               const fp8_gemm_request *req, size_t n) {
  return fp8_gemm_request_find_plain(req, n, fp8_gemm_request_ratio_ref(r->ratio_ref, q, g));
}

int run_gemm_part(run_t *r, const fp8_step *s, int64_t step, char *err, size_t errlen) {
  /* per request: estimates, then (sampled) the intervals' lo and hi, then (an FP4 run,
   * sampled) the paired ratios: engine.h */
  const size_t nc = r->nconfigs, G = FP8_GEMM_COUNT;
  const int tc = r->ex->tensor_core != FP8_TC_EXACT;
  const size_t per = (tc ? 9 : r->plan.ratio_ref ? 7 : 3) * G;
  const int ncols = fp8_gemm_csv_ncols(r->ex->gemm_sampled, r->fp4_ref >= 0, tc);
  size_t nl = 0;
  int rc = FP8_OK;
  fp8_gemm_request *req = NULL;
  size_t *nreq = NULL;
  char **layers = calloc(s->ntensors + 1, sizeof *layers);
  fp8_engine_layer *ls = calloc(s->ntensors + 1, sizeof *ls);
  if (!layers || !ls) {
    rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
    goto done;
  }
  for (size_t k = 0; k < s->ntensors; k++) {
    const char *nm = s->tensors[k].name;
    size_t L = strlen(nm);
    if (L > 6 && strcmp(nm + L - 6, ".input") == 0) {
      if (!(layers[nl] = strndup(nm, L - 6))) {
        rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
        goto done;
      }
      nl++;
    }
  }
  qsort(layers, nl, sizeof *layers, cmp_cstr);
  size_t nv = 0; /* the complete layers, in name order */
  for (size_t i = 0; i < nl; i++) nv += layer_of(r, layers[i], &ls[nv]);
  /* each layer's requests at req + i * nc (nreq[i] of them), their results at r->rel */
  if (!(req = malloc((nv * nc + 1) * sizeof *req)) || !(nreq = calloc(nv + 1, sizeof *nreq))) {
    rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
    goto done;
  }
  size_t total = 0;
  for (size_t i = 0; i < nv; i++) total += nreq[i] = layer_requests(r, &ls[i], req + i * nc);
  if (total * per > r->rel_cap) {
    free(r->rel);
    r->rel_cap = 0;
    if (!(r->rel = malloc(total * per * sizeof *r->rel))) {
      rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
      goto done;
    }
    r->rel_cap = total * per;
  }
  for (size_t i = 0, at = 0; i < nv; i++)
    for (size_t k = 0; k < nreq[i]; k++) req[i * nc + k].rel = r->rel + per * at++;
  for (size_t i = 0; i < nv && rc == FP8_OK; i++)
    if (nreq[i]) rc = fp8_engine_gemm(r->engine, &ls[i], req + i * nc, nreq[i], err, errlen);
  if (rc == FP8_OK) rc = fp8_engine_sync(r->engine, err, errlen);
  if (rc) goto done;
  for (size_t i = 0; i < nv; i++) {
    const fp8_gemm_request *lq = req + i * nc;
    for (int g = 0; g < FP8_GEMM_COUNT; g++)
      for (size_t k = 0; k < nreq[i]; k++) {
        const double *rel = lq[k].rel + g;
        const double interval[2] = {rel[G], rel[2 * G]};
        fp8_gemm_ratio_cols q = {FP8_GEMM_RATIO_NONE, NAN, NAN, NAN};
        ptrdiff_t ref = ratio_request(r, &lq[k], g, lq, nreq[i]);
        if (ref >= 0) {
          if (r->ex->gemm_sampled) /* the engine's paired estimate (engine.h) */
            q = (fp8_gemm_ratio_cols){rel[6 * G] == 1.0 ? FP8_GEMM_RATIO_RECOMPUTED
                                                        : FP8_GEMM_RATIO_SAMPLED,
                                      rel[3 * G], rel[4 * G], rel[5 * G]};
          else { /* both exact: their quotient (0 / 0 counts as 1); the reference's error
                  with the accumulation of the FP4 side (exact: the block-scaled forms are
                  outside the tensor-core models), v 7 under tensor_core (engine.h) */
            double a = rel[0], b = lq[ref].rel[(tc ? 7 : 0) * G + g];
            double x = isnan(a) || isnan(b) ? NAN : b > 0.0 ? a / b : a > 0.0 ? INFINITY : 1.0;
            q = (fp8_gemm_ratio_cols){FP8_GEMM_RATIO_EXACT, x, x, x};
          }
        }
        fp8_config tmp;
        fp8_gemm_tc_cols tcc = {FP8_TC_EXACT, FP8_GEMM_ACC_EXACT, rel[0], NAN};
        int ka = r->ex->configs[lq[k].config[fp8_gemm_operand_tensor((fp8_gemm_kind)g, 0)]].kind;
        int kb = r->ex->configs[lq[k].config[fp8_gemm_operand_tensor((fp8_gemm_kind)g, 1)]].kind;
        /* the model applies where both operands are cast with one scale and the request has
         * no block-kind operand (the engine computes such a request's GEMMs in FP32: engine.h) */
        if (tc && fp8_recipe_kind_has_scale(ka) && fp8_recipe_kind_has_scale(kb) &&
            !req_has_block(r->ex, &lq[k])) {
          tcc.model = r->ex->tensor_core;
          tcc.acc = fp8_gemm_tc_promote((fp8_gemm_kind)g, 0) ? FP8_GEMM_ACC_PROMOTED
                                                             : FP8_GEMM_ACC_FAST;
          tcc.exact_acc = rel[7 * G];
          tcc.alt_acc = rel[8 * G];
        } else if (tc) {
          tcc.exact_acc = rel[7 * G];
        }
        fp8_gemm_csv_put_row_n(r->gemm_fp, ncols, ls[i].name, g, step,
                               row_config(r, &lq[k], g, &tmp), rel[0],
                               r->ex->gemm_sampled ? interval : NULL, &q, tc ? &tcc : NULL);
        r->gemm_rows++;
      }
    if (nreq[i]) run_segs_layer(r, ls[i].name);
  }
done:
  if (layers)
    for (size_t i = 0; i < nl; i++) free(layers[i]);
  free(layers);
  free(ls);
  free(req);
  free(nreq);
  return rc;
}
