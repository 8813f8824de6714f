/* report_tensor_core.c: the GEMM error section's accumulation (issue 46; docs/semantics.md
 * "Tensor-core accumulation"). Every report names how the GEMM errors summed their products;
 * with [analysis] tensor_core = h100 or b200 it also shows what the accumulation costs, from
 * gemm.csv's tensor-core columns: for one per-tensor configuration (the lowest mean of its
 * three GEMM medians), each GEMM's median error with exact accumulation (the FP32 GEMM), as
 * TransformerEngine runs it on that GPU (fprop fast, dgrad and wgrad promoted every 128
 * products) and (fprop) with the other form; and fprop by reduction length K (the trace's GEMM shapes,
 * run.json's model_shape): fast accumulation against promotion, DeepSeek-V3's comparison. */
#include "report_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

#include "gemm.h" /* fp8_gemm_name, fp8_gemm_tc_promote; tensorcore.h */

#define TC_MAX_K 12 /* fprop rows by K at most (the largest K first) */

/* The error columns of one GEMM (or one fprop K): exact accumulation, the model as TE runs
 * it, the other form. */
typedef struct {
  double *v[3];
  size_t n, cap;
  double med[3];
  int64_t kmin, kmax; /* the reduction lengths of its layers (0: unknown) */
  int64_t k;          /* by K: its K */
  size_t nlayers;
} tc_cell;

struct rep_tc {
  size_t c;                 /* the configuration shown */
  tc_cell gemm[FP8_GEMM_COUNT];
  tc_cell byk[TC_MAX_K];
  size_t nk;
  size_t rows;              /* rows the model applied to, all configurations */
};

static int cell_add(tc_cell *x, double e, double m, double a) {
  if (x->n == x->cap) {
    size_t nc = x->cap ? 2 * x->cap : 64;
    for (int i = 0; i < 3; i++) {
      double *nb = realloc(x->v[i], nc * sizeof *nb);
      if (!nb) return FP8_ENOMEM;
      x->v[i] = nb;
    }
    x->cap = nc;
  }
  x->v[0][x->n] = e, x->v[1][x->n] = m, x->v[2][x->n] = a;
  x->n++;
  return FP8_OK;
}

static void cell_medians(tc_cell *x) {
  for (int i = 0; i < 3; i++) {
    size_t n = 0;
    for (size_t j = 0; j < x->n; j++)
      if (!isnan(x->v[i][j])) x->v[i][n++] = x->v[i][j];
    if (n) gsl_sort(x->v[i], 1, n);
    x->med[i] = n ? gsl_stats_median_from_sorted_data(x->v[i], 1, n) : NAN;
  }
}

static void cell_free(tc_cell *x) {
  for (int i = 0; i < 3; i++) free(x->v[i]);
}

/* The reduction length of GEMM g of layer `name` (its Linear in model_shape; a multi-rank
 * trace's rank_<r>/ prefix ignored): fprop in, dgrad out, wgrad tokens; 0: unknown. */
static int64_t layer_k(const rep_t *r, const char *name, int g) {
  if (!r->run.has_model_shape) return 0;
  name = rep_strip_rank(name);
  const fp8_tl_shape *s = &r->run.model_shape;
  for (size_t i = 0; i < s->nlinears; i++)
    if (strcmp(s->linears[i].name, name) == 0)
      return g == FP8_GEMM_FPROP ? s->linears[i].in
             : g == FP8_GEMM_DGRAD ? s->linears[i].out : s->linears[i].tokens;
  return 0;
}

int rep_tc_load(rep_t *r, const fp8_gemm_table *t) {
  if (r->run.tensor_core == FP8_TC_EXACT) return FP8_OK;
  /* the configuration: the per-tensor one with the lowest mean of its three medians */
  double best = INFINITY;
  size_t bc = (size_t)-1;
  for (size_t c = 0; c < r->ncfg; c++) {
    const cfg_t *x = &r->cfgs[c];
    if (x->same_as != c || x->mixed || !fp8_recipe_kind_has_scale(x->key.kind)) continue;
    double m = (x->gemm_median[0] + x->gemm_median[1] + x->gemm_median[2]) / 3.0;
    if (!isnan(m) && m < best) best = m, bc = c;
  }
  struct rep_tc *tc = calloc(1, sizeof *tc);
  if (!tc) return FP8_ENOMEM;
  r->tc = tc;
  tc->c = bc;
  for (int g = 0; g < FP8_GEMM_COUNT; g++) tc->gemm[g].kmin = INT64_MAX;
  for (size_t i = 0; i < t->n; i++) {
    const fp8_gemm_row *row = &t->rows[i];
    if (row->tensor_core == FP8_TC_EXACT) continue;
    tc->rows++;
    if (bc == (size_t)-1 || !rep_cfg_matches(&r->cfgs[bc], &row->key)) continue;
    int g = (int)row->gemm;
    tc_cell *x = &tc->gemm[g];
    if (cell_add(x, row->rel_exact_acc, row->rel_error, row->rel_alt_acc)) return FP8_ENOMEM;
    int64_t k = layer_k(r, row->layer, g);
    if (k > 0) {
      x->kmin = k < x->kmin ? k : x->kmin;
      x->kmax = k > x->kmax ? k : x->kmax;
    }
    if (g != FP8_GEMM_FPROP || k <= 0) continue;
    size_t j = 0;
    while (j < tc->nk && tc->byk[j].k != k) j++;
    if (j == tc->nk) {
      if (tc->nk == TC_MAX_K) { /* keep the largest K: replace the smallest if smaller */
        size_t s = 0;
        for (size_t q = 1; q < tc->nk; q++) s = tc->byk[q].k < tc->byk[s].k ? q : s;
        if (tc->byk[s].k > k) continue;
        cell_free(&tc->byk[s]);
        memset(&tc->byk[s], 0, sizeof tc->byk[s]);
        j = s;
      } else {
        tc->nk++;
      }
      tc->byk[j].k = k;
    }
    if (cell_add(&tc->byk[j], row->rel_exact_acc, row->rel_error, row->rel_alt_acc))
      return FP8_ENOMEM;
  }
  for (int g = 0; g < FP8_GEMM_COUNT; g++) cell_medians(&tc->gemm[g]);
  for (size_t j = 0; j < tc->nk; j++) cell_medians(&tc->byk[j]);
  /* by K, the largest first */
  for (size_t a = 1; a < tc->nk; a++)
    for (size_t b = a; b > 0 && tc->byk[b - 1].k < tc->byk[b].k; b--) {
      tc_cell s = tc->byk[b];
      tc->byk[b] = tc->byk[b - 1];
      tc->byk[b - 1] = s;
    }
  return FP8_OK;
}

void rep_tc_free(rep_t *r) {
  struct rep_tc *tc = r->tc;
  if (!tc) return;
  for (int g = 0; g < FP8_GEMM_COUNT; g++) cell_free(&tc->gemm[g]);
  for (size_t j = 0; j < tc->nk; j++) cell_free(&tc->byk[j]);
  free(tc);
  r->tc = NULL;
}

static const char *fmt_ratio(double a, double b, char *s, size_t n) {
  if (isnan(a) || isnan(b) || b <= 0.0) snprintf(s, n, "n/a");
  else snprintf(s, n, "%.3fx", a / b);
  return s;
}

void rep_tc_intro(const rep_t *r, fp8_doc *d) {
  const int m = r->run.tensor_core;
  if (m == FP8_TC_EXACT) {
    fp8_doc_markdown(d, "Accumulation: **exact** (`[analysis] tensor_core = exact`, the default): "
                        "each GEMM sums its FP8 products in FP32 with one rounding per product, as "
                        "no tensor core does. On Hopper, TransformerEngine's fprop under per-tensor "
                        "scaling keeps about 14 bits of each MMA's sum (fast accumulation): set "
                        "`tensor_core = h100` (or `b200`) to see what that costs here.");
    return;
  }
  fp8_doc_markdownf(d, "Accumulation: **%s** (`[analysis] tensor_core = %s`): the per-tensor "
                       "configurations' GEMMs sum their FP8 products as the %s tensor core does "
                       "(bit-exact model of one 32-product MMA, checked against the GPU's own "
                       "outputs), fprop with fast accumulation, dgrad and wgrad promoted to FP32 "
                       "every 128 products, as TransformerEngine runs them; block, FP4 and bf16 "
                       "configurations stay exactly accumulated (their block-scaled MMAs are "
                       "not modelled), as do all three GEMMs of a mixed label's layer with a "
                       "block-kind operand, and so does the FP4 verdict's ratio on both sides. "
                       "gemm.csv keeps beside each error the same GEMM's with exact accumulation "
                       "and, for fprop, with promotion.",
                    fp8_tc_model_name((fp8_tc_model)m), fp8_tc_model_name((fp8_tc_model)m),
                    m == FP8_TC_H100 ? "H100 (and H200)" : "B200");
}

void rep_tc_text(const rep_t *r, fp8_doc *d) {
  const struct rep_tc *tc = r->tc;
  if (!tc || tc->c == (size_t)-1 || !tc->gemm[0].n) return;
  const char *nm = fp8_tc_model_name((fp8_tc_model)r->run.tensor_core);
  fp8_doc_heading(d, 3, "What accumulation costs");
  fp8_doc_markdownf(d, "**%s**, median over layers and steps of each GEMM's relative error: "
                       "with exact accumulation, as TransformerEngine runs it on %s, and, for "
                       "fprop, with the other form (promoted every 128 products; no TE recipe "
                       "runs dgrad or wgrad with fast accumulation). K is the GEMM's reduction "
                       "length.",
                    r->cfgs[tc->c].dlabel, nm);
  const char *hdr[] = {"GEMM", "K", "exact", "TE's form", "model / exact", "other form"};
  fp8_doc_table_begin(d, 6, hdr, "llrrrr");
  for (int g = 0; g < FP8_GEMM_COUNT; g++) {
    const tc_cell *x = &tc->gemm[g];
    if (!x->n) continue;
    char k[48], e[3][32], rt[32], gn[48];
    if (!x->kmax) snprintf(k, sizeof k, "?");
    else if (x->kmin == x->kmax) snprintf(k, sizeof k, "%lld", (long long)x->kmin);
    else snprintf(k, sizeof k, "%lld-%lld", (long long)x->kmin, (long long)x->kmax);
    snprintf(gn, sizeof gn, "%s (%s)", fp8_gemm_name((fp8_gemm_kind)g),
             fp8_gemm_tc_promote((fp8_gemm_kind)g, 0) ? "promoted" : "fast");
    const char *cells[] = {gn, k, rep_fmt_rate(x->med[0], e[0], 32),
                           rep_fmt_rate(x->med[1], e[1], 32),
                           fmt_ratio(x->med[1], x->med[0], rt, sizeof rt),
                           g == FP8_GEMM_FPROP ? rep_fmt_rate(x->med[2], e[2], 32) : ""};
    fp8_doc_table_row(d, cells);
  }
  double worst = 0.0;
  int gw = -1;
  for (int g = 0; g < FP8_GEMM_COUNT; g++) {
    const tc_cell *x = &tc->gemm[g];
    double q = x->med[0] > 0.0 ? fabs(x->med[1] / x->med[0] - 1.0) : NAN;
    if (x->n && !isnan(q) && q >= worst) worst = q, gw = g;
  }
  if (gw >= 0)
    fp8_doc_markdownf(d, "On this trace %s's accumulation changes the median errors by at most "
                         "%.2g%% (%s)%s.", nm, 100.0 * worst, fp8_gemm_name((fp8_gemm_kind)gw),
                      worst < 0.01 ? ": next to FP8's quantization error it does not matter at "
                                     "these reduction lengths"
                                   : "");
  if (!tc->nk) return;
  fp8_doc_markdown(d, "fprop by K (the trace's layer shapes): fast accumulation, which "
                      "TransformerEngine uses for the forward GEMM under per-tensor scaling, "
                      "against promotion to FP32 every 128 products (DeepSeek-V3's remedy, "
                      "section 3.3.2: it measured errors of up to nearly 2% from fast "
                      "accumulation at K = 4096). Medians over the layers of that K and the "
                      "steps.");
  const char *hk[] = {"K", "layers x steps", "exact", "fast", "promoted", "fast / promoted"};
  fp8_doc_table_begin(d, 6, hk, "rrrrrr");
  for (size_t j = 0; j < tc->nk; j++) {
    const tc_cell *x = &tc->byk[j];
    char k[32], n[32], e[3][32], rt[32];
    snprintf(k, sizeof k, "%lld", (long long)x->k);
    snprintf(n, sizeof n, "%zu", x->n);
    const char *cells[] = {k, n, rep_fmt_rate(x->med[0], e[0], 32),
                           rep_fmt_rate(x->med[1], e[1], 32), rep_fmt_rate(x->med[2], e[2], 32),
                           fmt_ratio(x->med[1], x->med[2], rt, sizeof rt)};
    fp8_doc_table_row(d, cells);
  }
}
