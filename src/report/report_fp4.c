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
#include <gsl/gsl_statistics_double.h>
#include <stdlib.h>
#include <string.h>

#include "outfile.h"
#include "report_internal.h"
#include "util.h"

struct rep_fp4 {
  size_t nlayers;
  char **layers; /* strcmp order */
  double *med;   /* [ncfg][nlayers][3]: median rel_error over the steps; NaN: no row */
  ptrdiff_t ref; /* the FP8 configuration of the criterion; -1: none */
  ptrdiff_t fallback, advised; /* the FP8 configuration for the other layers, the NVFP4 one */
};

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

typedef struct {
  size_t c, l;
  int g;
  double v;
} gv;

static int cmp_gv(const void *a, const void *b) {
  const gv *x = a, *y = b;
  if (x->c != y->c) return x->c < y->c ? -1 : 1;
  if (x->l != y->l) return x->l < y->l ? -1 : 1;
  if (x->g != y->g) return x->g < y->g ? -1 : 1;
  return x->v < y->v ? -1 : x->v > y->v;
}

static double *med_at(const rep_t *r, size_t c, size_t l) {
  return &r->fp4->med[(c * r->fp4->nlayers + l) * 3];
}

static int is_fp4(const rep_t *r, size_t c) { return fp8_recipe_kind_is_fp4(r->cfgs[c].key.kind); }

/* An FP4 configuration, or a mixed recipe with FP4 tensors (advice_fp4.ini's label). */
static int has_fp4(const rep_t *r, size_t c) {
  if (!r->cfgs[c].mixed) return is_fp4(r, c);
  for (size_t g = 0; g < r->tab.ngroups; g++)
    if (r->gcfg[g] == c && fp8_recipe_kind_is_fp4(r->tab.groups[g].key.kind)) return 1;
  return 0;
}

/* The largest ratio of configuration c's three errors to the reference's at layer l; NaN when
 * one is missing; 0 / 0 counts as 1 (both exact). */
static double worst_ratio(const rep_t *r, size_t c, size_t l) {
  const double *a = med_at(r, c, l), *b = med_at(r, (size_t)r->fp4->ref, l);
  double w = 0.0;
  for (int g = 0; g < 3; g++) {
    if (isnan(a[g]) || isnan(b[g])) return NAN;
    double q = b[g] > 0.0 ? a[g] / b[g] : a[g] > 0.0 ? INFINITY : 1.0;
    if (q > w) w = q;
  }
  return w;
}

static int holds(const rep_t *r, size_t c, size_t l) {
  double w = worst_ratio(r, c, l);
  return !isnan(w) && w <= r->run.fp4_gemm_ratio;
}

static double mean3(const double *m) { return (m[0] + m[1] + m[2]) / 3.0; }

int rep_fp4_prepare(rep_t *r, const fp8_gemm_table *t, char *err, size_t errlen) {
  int any = 0;
  for (size_t c = 0; c < r->ncfg; c++) any |= has_fp4(r, c);
  if (!any) return FP8_OK;
  struct rep_fp4 *f = calloc(1, sizeof *f);
  gv *v = malloc((t->n + 1) * sizeof *v);
  const char **names = malloc((t->n + 1) * sizeof *names);
  if (!f || !v || !names) goto nomem;
  r->fp4 = f;
  size_t nn = 0;
  for (size_t i = 0; i < t->n; i++) names[nn++] = t->rows[i].layer;
  qsort(names, nn, sizeof *names, cmp_str);
  size_t nl = 0;
  for (size_t i = 0; i < nn; i++)
    if (!nl || strcmp(names[i], names[nl - 1]) != 0) names[nl++] = names[i];
  f->layers = calloc(nl + 1, sizeof *f->layers);
  f->med = malloc((r->ncfg * nl * 3 + 1) * sizeof *f->med);
  if (!f->layers || !f->med) goto nomem;
  for (size_t l = 0; l < nl; l++)
    if (!(f->layers[l] = strdup(names[l]))) goto nomem;
  f->nlayers = nl;
  for (size_t k = 0; k < r->ncfg * nl * 3; k++) f->med[k] = NAN;
  size_t nv = 0;
  for (size_t i = 0; i < t->n; i++) {
    const fp8_gemm_row *row = &t->rows[i];
    if (isnan(row->rel_error)) continue;
    size_t c = 0;
    while (c < r->ncfg && !rep_cfg_matches(&r->cfgs[c], &row->key)) c++;
    const char *const *at = bsearch(&row->layer, names, nl, sizeof *names, cmp_str);
    if (c == r->ncfg || !at) continue; /* rep_add_gemm reports such a row */
    v[nv++] = (gv){c, (size_t)(at - names), (int)row->gemm, row->rel_error};
  }
  qsort(v, nv, sizeof *v, cmp_gv);
  double *buf = malloc((nv + 1) * sizeof *buf);
  if (!buf) goto nomem;
  for (size_t i = 0; i < nv;) {
    size_t j = i, n = 0;
    while (j < nv && v[j].c == v[i].c && v[j].l == v[i].l && v[j].g == v[i].g) buf[n++] = v[j++].v;
    med_at(r, v[i].c, v[i].l)[v[i].g] = gsl_stats_median_from_sorted_data(buf, 1, n);
    i = j;
  }
  free(buf);
  /* the criterion's FP8 reference; the fallback: the FP8 configuration of the lowest mean of
   * its three median errors (bf16 and mixed recipes excluded); the advised FP4 configuration:
   * the NVFP4 one under which most layers hold (ties: the lower mean error) */
  f->ref = r->cur >= 0 ? r->cur : r->ref;
  f->fallback = f->advised = -1;
  double best = INFINITY;
  for (size_t c = 0; c < r->ncfg; c++) {
    const cfg_t *x = &r->cfgs[c];
    double m = mean3(x->gemm_median);
    if (x->same_as != c || x->mixed || is_fp4(r, c) || x->key.kind == FP8_KIND_BF16 || isnan(m))
      continue;
    if (m < best) best = m, f->fallback = (ptrdiff_t)c;
  }
  if (f->ref >= 0 && nl > 0) {
    size_t most = 0;
    double err_best = INFINITY;
    for (size_t c = 0; c < r->ncfg; c++) {
      if (r->cfgs[c].key.kind != FP8_KIND_NVFP4 || r->cfgs[c].mixed || r->cfgs[c].same_as != c)
        continue;
      size_t n = 0;
      for (size_t l = 0; l < nl; l++) n += (size_t)holds(r, c, l);
      double m = mean3(r->cfgs[c].gemm_median);
      if (f->advised < 0 || n > most || (n == most && m < err_best))
        f->advised = (ptrdiff_t)c, most = n, err_best = m;
    }
  }
  free(v);
  free(names);
  return FP8_OK;
nomem:
  free(v);
  free(names);
  return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
}

void rep_fp4_free(rep_t *r) {
  struct rep_fp4 *f = r->fp4;
  if (!f) return;
  for (size_t l = 0; f->layers && l < f->nlayers; l++) free(f->layers[l]);
  free(f->layers);
  free(f->med);
  free(f);
  r->fp4 = NULL;
}

/* The GEMMs a role enters as an operand (fp8lab's layer triplet), as a bit mask. */
static unsigned role_gemms(int role) {
  return role == FP8_ROLE_INPUT ? 1u | 4u : role == FP8_ROLE_WEIGHT ? 1u | 2u
       : role == FP8_ROLE_GRAD_OUTPUT ? 2u | 4u : 0u;
}

static void role_table(const rep_t *r, fp8_doc *d, int role) {
  static const char *const gname[3] = {"fprop", "dgrad", "wgrad"};
  unsigned gm = role_gemms(role);
  char h[3][48];
  const char *hdr[7] = {"configuration", "clipped rate", "flushed rate",
                        "flushed rate, expected (SR)"};
  int nh = 4;
  for (int g = 0; g < 3; g++)
    if (gm >> g & 1u) {
      snprintf(h[g], sizeof h[g], "%s error", gname[g]);
      hdr[nh++] = h[g];
    }
  fp8_doc_heading(d, 3, fp8_role_name((fp8_role)role));
  static const char align[] = "lrrrrrrrrrrrrrrrrr";
  char al[8];
  snprintf(al, sizeof al, "%.*s", nh, align);
  fp8_doc_table_begin(d, nh, hdr, al);
  for (size_t c = 0; c < r->ncfg; c++) {
    if (r->cfgs[c].same_as != c) continue;
    int64_t clip = 0, und = 0, fin = 0;
    double uexp = 0.0;
    int have_exp = 0, any = 0;
    for (size_t g = 0; g < r->tab.ngroups; g++) {
      const fp8_steps_group *grp = &r->tab.groups[g];
      if (r->gcfg[g] != c || (int)grp->role != role) continue;
      for (size_t k = 0; k < grp->nrows; k++) {
        const fp8_step_row *row = &r->tab.rows[grp->rows[k]];
        if (row->warmup) continue;
        any = 1;
        clip += row->clipped;
        und += row->underflow;
        fin += row->n - row->nonfinite;
        if (!isnan(row->underflow_expected)) have_exp = 1, uexp += row->underflow_expected;
      }
    }
    if (!any) continue;
    char b[6][32];
    const char *cells[7] = {r->cfgs[c].dlabel,
                            rep_fmt_rate(fin ? (double)clip / (double)fin : NAN, b[0], 32),
                            rep_fmt_rate(fin ? (double)und / (double)fin : NAN, b[1], 32),
                            have_exp ? rep_fmt_rate(fin ? uexp / (double)fin : NAN, b[2], 32) : ""};
    int n = 4;
    for (int g = 0; g < 3; g++)
      if (gm >> g & 1u) cells[n++] = rep_fmt_rate(r->cfgs[c].gemm_median[g], b[3 + g], 32);
    fp8_doc_table_row(d, cells);
  }
}

void rep_add_fp4(const rep_t *r, fp8_doc *d) {
  const struct rep_fp4 *f = r->fp4;
  if (!f || r->stream_only) return;
  fp8_doc_heading(d, 2, "FP4: NVFP4 and MXFP4");
  fp8_doc_markdown(d,
                   "The FP4 configurations of this run beside the FP8 ones. FP4 keeps one mantissa "
                   "bit to E4M3's three (elements +-{0, 0.5, 1, 1.5, 2, 3, 4, 6}): its scales are "
                   "per block (NVFP4: E4M3 scales of 1x16 runs, 16x16 for weights, under a "
                   "per-tensor scale; MXFP4: power-of-two scales of 1x32 runs), so values seldom "
                   "clip, and what FP4 costs shows in the values flushed to zero and in the GEMM "
                   "error. Per role: clipped and flushed values over the finite values (warm-up "
                   "left out); under stochastic rounding the flushed count is one seeded draw, and "
                   "its exact expectation is beside it; the median GEMM errors of the GEMMs the "
                   "role is an operand of (over layers and snapshot steps).");
  for (int role = FP8_ROLE_INPUT; role <= FP8_ROLE_GRAD_INPUT; role++) {
    int any = 0;
    for (size_t g = 0; g < r->tab.ngroups && !any; g++) any = (int)r->tab.groups[g].role == role;
    if (any) role_table(r, d, role);
  }
  if (f->nlayers == 0) {
    fp8_doc_markdown(d, "Which layers hold under FP4 is measured by their GEMM errors: this run "
                        "has none (`[analysis] gemm = true`, and layers whose input, weight and "
                        "grad_output were captured).");
    return;
  }
  if (f->ref < 0) {
    fp8_doc_markdown(d, "Which layers hold under FP4 is measured against an FP8 configuration "
                        "(current scaling, or delayed scaling): this run has neither.");
    return;
  }
  const cfg_t *ref = &r->cfgs[f->ref];
  fp8_doc_markdownf(d,
                    "**Which layers hold.** A layer holds under an FP4 configuration when each of "
                    "its fprop, dgrad and wgrad errors (median over the snapshot steps) is at "
                    "most %g times %s's (`[analysis] fp4_gemm_ratio`, default 4: E2M1's rounding "
                    "step is 4 times E4M3's, so about 4x is what the format itself costs; more "
                    "means the scaling failed the layer: values flushed, an outlier's block). "
                    "The table gives each layer's largest ratio over its three GEMMs.",
                    r->run.fp4_gemm_ratio, ref->dlabel);
  const char *hdr[1 + 16];
  size_t fc[16], nfc = 0;
  hdr[0] = "layer";
  for (size_t c = 0; c < r->ncfg && nfc < 16; c++)
    if (has_fp4(r, c) && r->cfgs[c].same_as == c) {
      fc[nfc] = c;
      hdr[1 + nfc++] = r->cfgs[c].dlabel;
    }
  char al[20];
  snprintf(al, sizeof al, "%.*s", (int)(1 + nfc), "lrrrrrrrrrrrrrrrrr");
  fp8_doc_table_begin(d, (int)(1 + nfc), hdr, al);
  size_t *held = calloc(nfc + 1, sizeof *held);
  char (*b)[48] = malloc((nfc + 1) * sizeof *b);
  const char **cells = malloc((nfc + 1) * sizeof *cells);
  for (size_t l = 0; held && b && cells && l < f->nlayers; l++) {
    cells[0] = f->layers[l];
    for (size_t k = 0; k < nfc; k++) {
      double w = worst_ratio(r, fc[k], l);
      int ok = holds(r, fc[k], l);
      held[k] += (size_t)ok;
      if (isnan(w)) snprintf(b[k], sizeof b[k], "n/a");
      else snprintf(b[k], sizeof b[k], "%s%.2fx%s", ok ? "" : "**", w, ok ? "" : "** (no)");
      cells[1 + k] = b[k];
    }
    fp8_doc_table_row(d, cells);
  }
  char list[2048];
  size_t at = 0;
  for (size_t k = 0; held && k < nfc && at < sizeof list; k++) {
    int n = snprintf(list + at, sizeof list - at, "%s- %s: %zu of %zu layers hold.", k ? "\n" : "",
                     r->cfgs[fc[k]].dlabel, held[k], f->nlayers);
    if (n > 0) at += (size_t)n;
  }
  if (at) fp8_doc_markdown(d, list);
  free(held);
  free(b);
  free(cells);
  if (f->advised >= 0 && f->fallback >= 0)
    fp8_doc_markdownf(d,
                      "As one experiment: advice_fp4.ini next to this report gives the layers that "
                      "hold %s and the others %s (the FP8 configuration of the lowest GEMM error "
                      "in this run); `fp8lab run advice_fp4.ini` replays it.",
                      r->cfgs[f->advised].dlabel, r->cfgs[f->fallback].dlabel);
}

/* The settings lines run.json recorded for configuration c, or NULL. */
static const char *settings_of(const rep_t *r, size_t c) {
  for (size_t k = 0; k < r->run.nsettings; k++)
    if (strcmp(r->run.settings[k].recipe, r->cfgs[c].key.recipe) == 0 &&
        strcmp(r->run.settings[k].kind, fp8_recipe_kind_name(r->cfgs[c].key.kind)) == 0)
      return r->run.settings[k].lines;
  return NULL;
}

int rep_write_fp4_advice(rep_t *r, char *err, size_t errlen) {
  const struct rep_fp4 *f = r->fp4;
  if (!f || f->advised < 0 || f->fallback < 0) return FP8_OK;
  const char *nv = settings_of(r, (size_t)f->advised), *fb = settings_of(r, (size_t)f->fallback);
  if (!nv || !fb) return FP8_OK; /* a run.json written before the settings */
  fp8_outfile of;
  int rc = fp8_outfile_open(&of, r->outdir, "advice_fp4.ini", err, errlen);
  if (rc) return rc;
  FILE *fp = of.fp;
  fprintf(fp, "; advice_fp4.ini: the report's FP4 answer as one experiment (fp8lab report wrote\n"
          "; it): %s for the layers that hold under it (each GEMM error at most %g times\n"
          "; %s's), %s for the others, under the one recipe label\n"
          "; \"advice_fp4\"; beside it %s for every layer. Replay it to confirm:\n"
          ";   fp8lab run advice_fp4.ini\n",
          r->cfgs[f->advised].dlabel, r->run.fp4_gemm_ratio, r->cfgs[f->ref].dlabel,
          r->cfgs[f->fallback].dlabel, r->cfgs[f->advised].dlabel);
  rep_put_trace(fp, r);
  rep_put_analysis(fp, r);
  fprintf(fp, "fp4_gemm_ratio = %g\n", r->run.fp4_gemm_ratio);
  size_t nfail = 0;
  for (size_t l = 0; l < f->nlayers; l++) nfail += !holds(r, (size_t)f->advised, l);
  if (nfail) {
    fprintf(fp, "\n[recipe.advice_fp8]\nlabel = advice_fp4\n%s\ntensors = ", fb);
    for (size_t l = 0, n = 0; l < f->nlayers; l++)
      if (!holds(r, (size_t)f->advised, l)) fprintf(fp, "%s%s.*", n++ ? ", " : "", f->layers[l]);
    fputc('\n', fp);
  }
  fprintf(fp, "\n[recipe.advice_fp4]\nlabel = advice_fp4\n%s\n", nv);
  fputs("; no tensors key: every tensor the section above leaves\n", fp);
  fprintf(fp, "\n[recipe.fp4_all]\n%s\n", nv);
  const char *rs = settings_of(r, (size_t)f->ref);
  if (rs) /* the criterion's reference, so that the replay can check the advice */
    fprintf(fp, "\n[recipe.fp8_reference]\n%s\n", rs);
  fputs("\n[output]\ndir = advice_fp4\n", fp);
  rc = fp8_outfile_commit(&of, err, errlen);
  if (!rc) r->wrote_fp4_advice = 1;
  return rc;
}
