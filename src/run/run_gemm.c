/* run_gemm.c: the GEMM errors of one part (rank) of a snapshot step, for gemm.csv. A layer is
 * `<layer>.input`, `<layer>.weight` and `<layer>.grad_output`, all three selected and present at
 * the step with matching shapes (gemm.h). The engine runs each configuration's GEMMs (its
 * primary or its CPU engine: engine.h's composite) with the scales the three casts used at
 * this step; rows come out in layer (strcmp), GEMM, configuration order, for the configurations
 * that apply to all three operands (their sections' tensors). */
#include <math.h>
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

static int any(const unsigned char *m, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (m[i]) return 1;
  return 0;
}

int run_gemm_part(run_t *r, const fp8_step *s, int64_t step, char *err, size_t errlen) {
  /* per layer: estimates, then (sampled) the intervals' lo and hi: engine.h */
  const size_t nc = r->nconfigs, per = (size_t)FP8_GEMM_COUNT * nc;
  const size_t lay = (r->plan.ratio_ref ? 7 : 3) * per;
  const int ncols = fp8_gemm_csv_ncols(r->ex->gemm_sampled, r->fp4_ref >= 0);
  size_t nl = 0;
  int rc = FP8_OK;
  unsigned char *applies = NULL;
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
  if (nv * lay > r->rel_cap) {
    free(r->rel);
    r->rel_cap = 0;
    if (!(r->rel = malloc(nv * lay * sizeof *r->rel))) {
      rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
      goto done;
    }
    r->rel_cap = nv * lay;
  }
  /* a layer's GEMMs under a configuration need it to apply to all three operands */
  if (!(applies = malloc(nv * nc + 1))) {
    rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
    goto done;
  }
  for (size_t i = 0; i < nv; i++)
    for (size_t c = 0; c < nc; c++)
      applies[i * nc + c] = r->covers[ls[i].tensor[0] * nc + c] &&
                            r->covers[ls[i].tensor[1] * nc + c] &&
                            r->covers[ls[i].tensor[2] * nc + c];
  for (size_t i = 0; i < nv && rc == FP8_OK; i++)
    if (any(applies + i * nc, nc))
      rc = fp8_engine_gemm(r->engine, &ls[i], applies + i * nc, r->rel + i * lay, err, errlen);
  if (rc == FP8_OK) rc = fp8_engine_sync(r->engine, err, errlen);
  if (rc) goto done;
  for (size_t i = 0; i < nv; i++) {
    for (int g = 0; g < FP8_GEMM_COUNT; g++)
      for (size_t c = 0; c < nc; c++) {
        if (!applies[i * nc + c]) continue;
        const double *rel = r->rel + i * lay + (size_t)g * nc + c;
        const double interval[2] = {rel[per], rel[2 * per]};
        fp8_gemm_ratio_cols q = {FP8_GEMM_RATIO_NONE, NAN, NAN, NAN};
        size_t ref = (size_t)r->fp4_ref;
        if (r->ratio_ref && r->ratio_ref[c] >= 0 && applies[i * nc + ref]) {
          if (r->ex->gemm_sampled) /* the engine's paired estimate (engine.h) */
            q = (fp8_gemm_ratio_cols){rel[6 * per] == 1.0 ? FP8_GEMM_RATIO_RECOMPUTED
                                                          : FP8_GEMM_RATIO_SAMPLED,
                                      rel[3 * per], rel[4 * per], rel[5 * per]};
          else { /* both exact: their quotient (0 / 0 counts as 1) */
            double a = rel[0], b = r->rel[i * lay + (size_t)g * nc + ref];
            double x = isnan(a) || isnan(b) ? NAN : b > 0.0 ? a / b : a > 0.0 ? INFINITY : 1.0;
            q = (fp8_gemm_ratio_cols){FP8_GEMM_RATIO_EXACT, x, x, x};
          }
        }
        fp8_gemm_csv_put_row_n(r->gemm_fp, ncols, ls[i].name, g, step, &r->ex->configs[c], rel[0],
                               r->ex->gemm_sampled ? interval : NULL, &q);
        r->gemm_rows++;
      }
    if (any(applies + i * nc, nc)) run_segs_layer(r, ls[i].name);
  }
done:
  if (layers)
    for (size_t i = 0; i < nl; i++) free(layers[i]);
  free(layers);
  free(ls);
  free(applies);
  return rc;
}
