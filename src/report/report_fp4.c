/* report_fp4.c: the report's FP4 section and advice_fp4.ini (issue 29), for a run with an FP4
 * configuration (kind nvfp4 or mxfp4).
 *
 * Per role: each configuration's clipped and flushed values (and, under stochastic rounding,
 * the expected flushed ones), and the GEMM errors of the GEMMs the role enters. Per layer:
 * whether it holds under each FP4 configuration. The criterion ([analysis] fp4_gemm_ratio, R):
 * a layer holds when each of its fprop, dgrad and wgrad errors (median over the snapshot steps)
 * is at most R times the FP8 reference's (current scaling when the run has it, else the
 * reference delayed configuration). Clipping budgets rarely bind under FP4's two-level scales,
 * so the GEMM error, not the clipped rate, decides. advice_fp4.ini then gives the layers that
 * hold under the advised NVFP4 configuration that configuration, and the others the FP8
 * configuration of the lowest GEMM error (a higher precision, as published NVFP4 runs keep
 * some layers in BF16 or MXFP8). */
#include <gsl/gsl_sort.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "outfile.h"
#include "report_fp4_internal.h"
#include "util.h"

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* One per-step ratio of configuration c at layer l, GEMM g. */
typedef struct {
  size_t c, l;
  int g;
  int64_t step;
  double q, lo, hi;
  int rec; /* recomputed exactly */
} rv;

static int cmp_rv(const void *a, const void *b) {
  const rv *x = a, *y = b;
  if (x->c != y->c) return x->c < y->c ? -1 : 1;
  if (x->l != y->l) return x->l < y->l ? -1 : 1;
  if (x->g != y->g) return x->g < y->g ? -1 : 1;
  return x->step < y->step ? -1 : x->step > y->step;
}

/* (layer, GEMM, step) order, for the exact cost and the reference's rows */
static int cmp_lgs(const void *a, const void *b) {
  const rv *x = a, *y = b;
  if (x->l != y->l) return x->l < y->l ? -1 : 1;
  if (x->g != y->g) return x->g < y->g ? -1 : 1;
  return x->step < y->step ? -1 : x->step > y->step;
}

gstat *rep_fp4_st(const rep_t *r, size_t c, size_t l) {
  return &r->fp4->st[(c * r->fp4->nlayers + l) * 3];
}

static int is_fp4(const rep_t *r, size_t c) { return fp8_recipe_kind_is_fp4(r->cfgs[c].key.kind); }

/* An FP4 configuration, or a mixed recipe with FP4 tensors (advice_fp4.ini's label). */
int rep_fp4_has(const rep_t *r, size_t c) {
  if (!r->cfgs[c].mixed) return is_fp4(r, c);
  for (size_t g = 0; g < r->tab.ngroups; g++)
    if (r->gcfg[g] == c && fp8_recipe_kind_is_fp4(r->tab.groups[g].key.kind)) return 1;
  return 0;
}

/* Whether GEMM g of layer l has an FP4 operand under mixed recipe c: the sections of its two
 * operands' tensors (their groups' kinds). */
static int mixed_gemm_has_fp4(const rep_t *r, size_t c, size_t l, int g) {
  for (int o = 0; o < 2; o++) {
    char name[1200];
    snprintf(name, sizeof name, "%s.%s", r->fp4->layers[l], fp8_gemm_operand_role((fp8_gemm_kind)g, o));
    ptrdiff_t gr = rep_group_of(r, name, c);
    if (gr >= 0 && fp8_recipe_kind_is_fp4(r->tab.groups[gr].key.kind)) return 1;
  }
  return 0;
}

/* The layer's verdict under c: fails when a GEMM fails, holds when all three hold, too close
 * to call otherwise; V_NONE when a GEMM has no ratio. A mixed recipe is judged on the GEMMs
 * with an FP4 operand (the others take no ratio: gemm.csv), V_NONE without one. *worst: the
 * GEMM of the largest median ratio. */
int rep_fp4_layer_verdict(const rep_t *r, size_t c, size_t l, int *worst) {
  const gstat *s = rep_fp4_st(r, c, l);
  int v = V_HOLDS, w = -1;
  for (int g = 0; g < 3; g++) {
    if (r->cfgs[c].mixed && !mixed_gemm_has_fp4(r, c, l, g)) continue;
    if (s[g].verdict == V_NONE) return V_NONE;
    if (s[g].verdict == V_FAILS) v = V_FAILS;
    else if (s[g].verdict == V_CLOSE && v == V_HOLDS) v = V_CLOSE;
    if (w < 0 || s[g].m > s[w].m) w = g;
  }
  if (w < 0) return V_NONE;
  if (worst) *worst = w;
  return v;
}

static int holds(const rep_t *r, size_t c, size_t l) { return rep_fp4_layer_verdict(r, c, l, NULL) == V_HOLDS; }

static double mean3(const double *m) { return (m[0] + m[1] + m[2]) / 3.0; }

/* The lower median of v[0..n) (sorted in place). */
static double lower_median(double *v, size_t n) {
  gsl_sort(v, 1, n);
  return v[(n + 1) / 2 - 1];
}

/* The exact mode's multiply-adds of one GEMM of layer l at a step: M N K = tokens x in x out
 * for each of the three, sqrt(numel(input) numel(weight) numel(grad_output)) from steps.csv;
 * NaN when a row is missing. */
static double gemm_madds(const rep_t *r, size_t l, int64_t step) {
  static const char *const roles[3] = {"input", "weight", "grad_output"};
  double prod = 1.0;
  for (int i = 0; i < 3; i++) {
    char name[1200];
    snprintf(name, sizeof name, "%s.%s", r->fp4->layers[l], roles[i]);
    const fp8_step_row *row = rep_row_at(r, rep_group_of(r, name, (size_t)r->fp4->ref), step);
    if (!row) return NAN;
    prod *= (double)row->n;
  }
  return sqrt(prod);
}

/* The per-step ratios of the FP4 configurations (v, *nv): gemm.csv's paired ones (a run with
 * run.json's fp4_reference), else each row's error over the reference's row at the same layer,
 * GEMM and step, with the rows' own intervals (an older run: [lo_c / hi_ref, hi_c / lo_ref],
 * unpaired and wider; exact rows: exact). */
static void collect_ratios(rep_t *r, const fp8_gemm_table *t, const char **names, size_t nl,
                           rv *v, size_t *nv, rv *refs) {
  struct rep_fp4 *f = r->fp4;
  size_t n = 0, nr = 0;
  for (size_t i = 0; i < t->n; i++) {
    const fp8_gemm_row *row = &t->rows[i];
    size_t c = 0;
    while (c < r->ncfg && !rep_cfg_matches(&r->cfgs[c], &row->key)) c++;
    const char *const *at = bsearch(&row->layer, names, nl, sizeof *names, cmp_str);
    if (c == r->ncfg || !at) continue; /* rep_add_gemm reports such a row */
    rv e = {c, (size_t)(at - names), (int)row->gemm, row->step, NAN, NAN, NAN, 0};
    if (!f->paired && (ptrdiff_t)c == f->ref) {
      e.q = row->rel_error, e.lo = row->rel_lo, e.hi = row->rel_hi;
      refs[nr++] = e;
    }
    if (!rep_fp4_has(r, c)) continue;
    if (f->paired) {
      if (row->ratio_mode == FP8_GEMM_RATIO_NONE || isnan(row->ratio)) continue;
      e.q = row->ratio, e.lo = row->ratio_lo, e.hi = row->ratio_hi;
      e.rec = row->ratio_mode == FP8_GEMM_RATIO_RECOMPUTED;
    } else
      e.q = row->rel_error, e.lo = row->rel_lo, e.hi = row->rel_hi;
    v[n++] = e;
  }
  if (!f->paired) { /* divide by the reference's row */
    qsort(refs, nr, sizeof *refs, cmp_lgs);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
      const rv *b = bsearch(&v[i], refs, nr, sizeof *refs, cmp_lgs);
      if (!b || isnan(v[i].q) || isnan(b->q)) continue;
      rv e = v[i];
      double a = e.q, d = b->q;
      e.q = d > 0.0 ? a / d : a > 0.0 ? INFINITY : 1.0;
      if (isnan(e.lo) || isnan(b->lo)) e.lo = e.hi = e.q; /* exact rows */
      else {
        e.lo = b->hi > 0.0 ? fmin(v[i].lo / b->hi, e.q) : 0.0;
        e.hi = b->lo > 0.0 ? fmax(v[i].hi / b->lo, e.q) : INFINITY;
      }
      v[k++] = e;
    }
    n = k;
  }
  *nv = n;
}

/* Each (configuration, layer, GEMM)'s lower medians and verdict, and the exact cost. */
static int summarize(rep_t *r, rv *v, size_t nv) {
  struct rep_fp4 *f = r->fp4;
  const double R = r->run.fp4_gemm_ratio;
  double *buf = malloc((3 * nv + 1) * sizeof *buf);
  if (!buf) return FP8_ENOMEM;
  qsort(v, nv, sizeof *v, cmp_rv);
  for (size_t i = 0; i < nv;) {
    size_t j = i, n = 0, nrec = 0;
    while (j < nv && v[j].c == v[i].c && v[j].l == v[i].l && v[j].g == v[i].g) {
      buf[n] = v[j].q, buf[nv + n] = v[j].lo, buf[2 * nv + n] = v[j].hi;
      nrec += (size_t)v[j].rec;
      n++, j++;
    }
    gstat *s = &rep_fp4_st(r, v[i].c, v[i].l)[v[i].g];
    s->n = n, s->nrec = nrec;
    s->m = lower_median(buf, n);
    s->lo = lower_median(buf + nv, n);
    s->hi = lower_median(buf + 2 * nv, n);
    /* at least ceil(n/2) steps within (hi <= R): holds; fewer than ceil(n/2) that could be
     * (lo <= R): fails; else too close to call */
    s->verdict = s->hi <= R ? V_HOLDS : s->lo > R ? V_FAILS : V_CLOSE;
    i = j;
  }
  free(buf);
  /* the exact mode's cost of these GEMMs (the reference's double product, the reference
   * configuration's and each FP4 configuration's FP32 product), and the recomputations' */
  f->nratio = nv;
  qsort(v, nv, sizeof *v, cmp_lgs);
  for (size_t i = 0; i < nv;) {
    size_t j = i, nrec = 0;
    while (j < nv && cmp_lgs(&v[i], &v[j]) == 0) nrec += (size_t)v[j++].rec;
    double mnk = gemm_madds(r, v[i].l, v[i].step);
    if (!isnan(mnk)) {
      f->madd_exact += mnk * (double)(2 + (j - i));
      if (nrec) f->madd_extra += mnk * (double)(2 + nrec);
    }
    f->nrecomp += nrec;
    i = j;
  }
  return FP8_OK;
}

/* Two configurations' GEMM errors (mean of the three medians) tied within their intervals:
 * [mean of the median rel_error_lo, mean of the median rel_error_hi] overlap (sampled rows;
 * exact errors are never tied unless equal). */
int rep_gemm_tied(const cfg_t *a, const cfg_t *b) {
  double alo = mean3(a->gemm_lo_median), ahi = mean3(a->gemm_hi_median);
  double blo = mean3(b->gemm_lo_median), bhi = mean3(b->gemm_hi_median);
  if (isnan(alo) || isnan(ahi) || isnan(blo) || isnan(bhi))
    return mean3(a->gemm_median) == mean3(b->gemm_median);
  return alo <= bhi && blo <= ahi;
}

int rep_fp4_prepare(rep_t *r, const fp8_gemm_table *t, char *err, size_t errlen) {
  int any = 0;
  for (size_t c = 0; c < r->ncfg; c++) any |= rep_fp4_has(r, c);
  if (!any) return FP8_OK;
  struct rep_fp4 *f = calloc(1, sizeof *f);
  rv *v = malloc((t->n + 1) * sizeof *v), *refs = malloc((t->n + 1) * sizeof *refs);
  const char **names = malloc((t->n + 1) * sizeof *names);
  if (!f || !v || !refs || !names) goto nomem;
  r->fp4 = f;
  size_t nn = 0;
  for (size_t i = 0; i < t->n; i++) names[nn++] = t->rows[i].layer;
  qsort(names, nn, sizeof *names, cmp_str);
  size_t nl = 0;
  for (size_t i = 0; i < nn; i++)
    if (!nl || strcmp(names[i], names[nl - 1]) != 0) names[nl++] = names[i];
  f->layers = calloc(nl + 1, sizeof *f->layers);
  f->st = calloc(r->ncfg * nl * 3 + 1, sizeof *f->st);
  if (!f->layers || !f->st) goto nomem;
  for (size_t l = 0; l < nl; l++)
    if (!(f->layers[l] = strdup(names[l]))) goto nomem;
  f->nlayers = nl;
  for (size_t k = 0; k < r->ncfg * nl * 3; k++)
    f->st[k] = (gstat){NAN, NAN, NAN, 0, 0, V_NONE};
  /* the criterion's FP8 reference: the run's (run.json's fp4_reference, what gemm.csv's
   * ratios divide by), else the report's choice for an older run */
  f->ref = r->cur >= 0 ? r->cur : r->ref;
  if (r->run.has_fp4_reference) {
    f->ref = -1;
    for (size_t c = 0; c < r->ncfg && f->ref < 0; c++)
      if (!r->cfgs[c].mixed && rep_cfg_matches(&r->cfgs[c], &r->run.fp4_reference))
        f->ref = (ptrdiff_t)c;
    f->paired = f->ref >= 0;
  }
  f->fallback = f->advised = f->fallback_tie = -1;
  if (f->ref >= 0) {
    size_t nv = 0;
    collect_ratios(r, t, names, nl, v, &nv, refs);
    if (summarize(r, v, nv)) goto nomem;
  }
  /* the fallback: the FP8 configuration of the lowest mean of its three median errors (bf16,
   * FP4 and mixed recipes excluded); one tied with it within the intervals: the criterion's
   * reference when it is among them (so that the advice does not turn on a draw), and the
   * report says it was tied */
  double best = INFINITY;
  for (size_t c = 0; c < r->ncfg; c++) {
    const cfg_t *x = &r->cfgs[c];
    double m = mean3(x->gemm_median);
    if (x->same_as != c || x->mixed || is_fp4(r, c) || x->key.kind == FP8_KIND_BF16 || isnan(m))
      continue;
    if (m < best) best = m, f->fallback = (ptrdiff_t)c;
  }
  if (f->fallback >= 0 && f->ref >= 0 && f->ref != f->fallback &&
      rep_gemm_tied(&r->cfgs[f->ref], &r->cfgs[f->fallback]) && !isnan(mean3(r->cfgs[f->ref].gemm_median))) {
    f->fallback_tie = f->fallback;
    f->fallback = f->ref;
  }
  /* the advised FP4 configuration: the NVFP4 one under which most layers hold (decided);
   * ties: the first in the experiment (not the lower sampled error, which a draw can flip) */
  if (f->ref >= 0 && nl > 0) {
    size_t most = 0;
    for (size_t c = 0; c < r->ncfg; c++) {
      if (r->cfgs[c].key.kind != FP8_KIND_NVFP4 || r->cfgs[c].mixed || r->cfgs[c].same_as != c)
        continue;
      size_t n = 0;
      for (size_t l = 0; l < nl; l++) n += (size_t)holds(r, c, l);
      if (f->advised >= 0 && n == most) f->advised_tie = 1;
      if (f->advised < 0 || n > most) f->advised = (ptrdiff_t)c, most = n, f->advised_tie = 0;
    }
  }
  free(v);
  free(refs);
  free(names);
  return FP8_OK;
nomem:
  free(v);
  free(refs);
  free(names);
  return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
}

void rep_fp4_free(rep_t *r) {
  struct rep_fp4 *f = r->fp4;
  if (!f) return;
  for (size_t l = 0; f->layers && l < f->nlayers; l++) free(f->layers[l]);
  free(f->layers);
  free(f->st);
  free(f);
  r->fp4 = NULL;
}

/* 1 when lines holds the line "<key> = <value>". */
static int has_line(const char *lines, const char *key, const char *value) {
  char want[96];
  int n = snprintf(want, sizeof want, "%s = %s", key, value);
  for (const char *p = lines; n > 0 && (size_t)n < sizeof want && (p = strstr(p, want)) != NULL;
       p++)
    if ((p == lines || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0')) return 1;
  return 0;
}

/* The settings of configuration c (report_internal.h): the section's (recipe label and kind),
 * and for delayed scaling the one of c's history_len, margin and amax_compute (a sweep's
 * section records one per configuration). */
const char *rep_settings_of(const rep_t *r, size_t c) {
  const fp8_config_key *k = &r->cfgs[c].key;
  for (size_t i = 0; i < r->run.nsettings; i++) {
    const struct fp8_run_settings *s = &r->run.settings[i];
    if (strcmp(s->recipe, k->recipe) != 0 || strcmp(s->kind, fp8_recipe_kind_name(k->kind)) != 0)
      continue;
    if (k->kind == FP8_KIND_DELAYED) {
      char h[24], m[24];
      snprintf(h, sizeof h, "%d", (int)k->history_len);
      snprintf(m, sizeof m, "%d", (int)k->margin);
      if (!has_line(s->lines, "history_len", h) || !has_line(s->lines, "margin", m) ||
          !has_line(s->lines, "amax_compute", fp8_amax_compute_name(k->amax_compute)))
        continue;
    }
    return s->lines;
  }
  return NULL;
}

int rep_write_fp4_advice(rep_t *r, char *err, size_t errlen) {
  const struct rep_fp4 *f = r->fp4;
  if (!f || f->advised < 0 || f->fallback < 0) return FP8_OK;
  const char *nv = rep_settings_of(r, (size_t)f->advised);
  const char *fb = rep_settings_of(r, (size_t)f->fallback);
  if (!nv || !fb) return FP8_OK; /* a run.json written before the settings */
  fp8_outfile of;
  int rc = fp8_outfile_open(&of, r->outdir, "advice_fp4.ini", err, errlen);
  if (rc) return rc;
  FILE *fp = of.fp;
  fprintf(fp, "; advice_fp4.ini: the report's FP4 answer as one experiment (fp8lab report wrote\n"
          "; it): %s for the layers that hold under it (at least half of the snapshot\n"
          "; steps of each GEMM within %g times %s's error, decided on the\n"
          "; ratio's interval), %s for the others, under the one recipe label\n"
          "; \"advice_fp4\"; beside it %s for every layer. Replay it to confirm:\n"
          ";   fp8lab run advice_fp4.ini\n",
          r->cfgs[f->advised].dlabel, r->run.fp4_gemm_ratio, r->cfgs[f->ref].dlabel,
          r->cfgs[f->fallback].dlabel, r->cfgs[f->advised].dlabel);
  rep_put_trace(fp, r);
  rep_put_analysis(fp, r);
  fprintf(fp, "fp4_gemm_ratio = %g\n", r->run.fp4_gemm_ratio);
  size_t nfail = 0, nclose = 0;
  const size_t adv = (size_t)f->advised;
  for (size_t l = 0; l < f->nlayers; l++) {
    nfail += !holds(r, adv, l);
    nclose += rep_fp4_layer_verdict(r, adv, l, NULL) == V_CLOSE;
  }
  if (nclose) { /* built on decided layers only: the undecided keep FP8 */
    fprintf(fp, "; too close to call under %s (the ratio's interval straddles %g even after the\n"
            "; exact recomputation): FP8 for", r->cfgs[adv].dlabel, r->run.fp4_gemm_ratio);
    for (size_t l = 0; l < f->nlayers; l++)
      if (rep_fp4_layer_verdict(r, adv, l, NULL) == V_CLOSE) fprintf(fp, " %s", f->layers[l]);
    fputc('\n', fp);
  }
  if (nfail) {
    fprintf(fp, "\n[recipe.advice_fp8]\nlabel = advice_fp4\n%s\ntensors = ", fb);
    for (size_t l = 0, n = 0; l < f->nlayers; l++)
      if (!holds(r, (size_t)f->advised, l)) fprintf(fp, "%s%s.*", n++ ? ", " : "", f->layers[l]);
    fputc('\n', fp);
  }
  fprintf(fp, "\n[recipe.advice_fp4]\nlabel = advice_fp4\n%s\n", nv);
  fputs("; no tensors key: every tensor the section above leaves\n", fp);
  fprintf(fp, "\n[recipe.fp4_all]\n%s\n", nv);
  const char *rs = rep_settings_of(r, (size_t)f->ref);
  if (rs) /* the criterion's reference, so that the replay can check the advice */
    fprintf(fp, "\n[recipe.fp8_reference]\n%s\n", rs);
  fputs("\n[output]\ndir = advice_fp4\n", fp);
  rc = fp8_outfile_commit(&of, err, errlen);
  if (!rc) r->wrote_fp4_advice = 1;
  return rc;
}
