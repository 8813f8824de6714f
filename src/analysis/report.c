/* report.c: the report of a run (see report.h): statistics (analysis.c), recommendations
 * (analysis_recommend.c), charts (plot.c) and the Markdown / notebook document (doc.c) put
 * together around the questions users ask: which tensors overflow under delayed scaling, when
 * and for how long, how stale the delayed scale is after a spike, and which setting to use.
 *
 * A "configuration" here is (recipe label, kind, history_len, margin, amax_compute): with
 * format = hybrid one configuration spans E4M3 and E5M2 tensors, and the aggregates over
 * tensors (heatmaps, bars) add them up.
 */
#include "report.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <jansson.h>

#include "analysis.h"
#include "doc.h"
#include "outfile.h"
#include "plot.h"

#define MAX_SHOWN 4
#define MAX_PLOTS 64

typedef struct {
  const char *recipe;
  fp8_recipe_kind kind;
  int32_t h, m;
  fp8_amax_compute ac;
  char label[160];
  /* aggregates over all tensors */
  int64_t overflow, finite;
  double snr_median; /* median over tensors of their median SNR */
  /* gemm.csv: rel_error per GEMM (fprop, dgrad, wgrad) over layers and steps */
  double *gemm[3];
  size_t ngemm[3], capgemm[3];
  double gemm_median[3];
} cfg_t;

typedef struct {
  char file[320];  /* under plots/ */
  char alt[256];
  char caption[1024];
} plot_t;

typedef struct {
  const char *outdir;
  char name[256];
  char trace[1024];
  double budget;
  fp8_steps_table tab;
  fp8_analysis an;
  fp8_recommendations rec;
  int have_tab, have_an, have_rec;
  cfg_t *cfgs;
  size_t ncfg;
  size_t *gcfg;         /* per group: its configuration */
  ptrdiff_t ref;        /* the reference delayed configuration (TE-like), -1 if none */
  ptrdiff_t cur;        /* the first current-scaling configuration, -1 if none */
  size_t shown[MAX_SHOWN];
  size_t nshown;        /* delayed configurations drawn on timelines */
  plot_t plots[MAX_PLOTS];
  size_t nplots;
  /* the event the report centres on: the worst overflow under the reference configuration */
  ptrdiff_t spike_group;
  int64_t spike_step;
  size_t spike_row;
  char pngtext_version[64];
} rep_t;

/* ------------------------------------------------------------------ configurations */

static int cfg_same(const cfg_t *c, const fp8_steps_group *g) {
  return c->kind == g->kind && c->h == g->history_len && c->m == g->margin &&
         (g->kind != FP8_KIND_DELAYED || c->ac == g->amax_compute) && strcmp(c->recipe, g->recipe) == 0;
}

static void cfg_label(cfg_t *c) {
  if (c->kind == FP8_KIND_DELAYED)
    snprintf(c->label, sizeof c->label, "%s L=%d m=%d %s", c->recipe, (int)c->h, (int)c->m,
             c->ac == FP8_AMAX_MAX ? "max" : "recent");
  else
    snprintf(c->label, sizeof c->label, "%s (%s)", c->recipe, fp8_recipe_kind_name(c->kind));
}

static int build_configs(rep_t *r) {
  const fp8_steps_table *t = &r->tab;
  r->cfgs = calloc(t->ngroups + 1, sizeof *r->cfgs);
  r->gcfg = calloc(t->ngroups + 1, sizeof *r->gcfg);
  if (!r->cfgs || !r->gcfg) return FP8_ENOMEM;
  /* configurations in experiment order: a tensor's groups are in file order, and the first
   * tensor with the most groups has them all */
  for (size_t g = 0; g < t->ngroups; g++) {
    const fp8_steps_group *gr = &t->groups[g];
    size_t c = 0;
    while (c < r->ncfg && !cfg_same(&r->cfgs[c], gr)) c++;
    if (c == r->ncfg) {
      cfg_t *n = &r->cfgs[r->ncfg++];
      n->recipe = gr->recipe;
      n->kind = gr->kind;
      n->h = gr->history_len;
      n->m = gr->margin;
      n->ac = gr->amax_compute;
      cfg_label(n);
    }
    r->gcfg[g] = c;
  }
  for (size_t c = 0; c < r->ncfg; c++) {
    double *med = malloc((t->ngroups + 1) * sizeof *med);
    if (!med) return FP8_ENOMEM;
    size_t nm = 0;
    for (size_t g = 0; g < t->ngroups; g++) {
      if (r->gcfg[g] != c) continue;
      const fp8_group_stats *s = &r->an.stats[g];
      r->cfgs[c].overflow += s->overflow;
      r->cfgs[c].finite += s->finite;
      if (s->snr_rows > 0 && isfinite(s->snr_median)) med[nm++] = s->snr_median;
    }
    gsl_sort(med, 1, nm);
    r->cfgs[c].snr_median = nm ? gsl_stats_median_from_sorted_data(med, 1, nm) : NAN;
    free(med);
  }
  /* reference delayed configuration: TE's default (1024, 0, max) when swept, else the longest
   * history with the smallest |margin| and max */
  r->ref = -1;
  r->cur = -1;
  for (size_t c = 0; c < r->ncfg; c++) {
    const cfg_t *x = &r->cfgs[c];
    if (x->kind == FP8_KIND_CURRENT) {
      if (r->cur < 0) r->cur = (ptrdiff_t)c;
      continue;
    }
    if (r->ref < 0) {
      r->ref = (ptrdiff_t)c;
      continue;
    }
    const cfg_t *b = &r->cfgs[r->ref];
    int xd = x->h == 1024 && x->m == 0 && x->ac == FP8_AMAX_MAX;
    int bd = b->h == 1024 && b->m == 0 && b->ac == FP8_AMAX_MAX;
    if (xd != bd) {
      if (xd) r->ref = (ptrdiff_t)c;
      continue;
    }
    if ((x->ac == FP8_AMAX_MAX) != (b->ac == FP8_AMAX_MAX)) {
      if (x->ac == FP8_AMAX_MAX) r->ref = (ptrdiff_t)c;
      continue;
    }
    if (abs(x->m) != abs(b->m)) {
      if (abs(x->m) < abs(b->m)) r->ref = (ptrdiff_t)c;
      continue;
    }
    if (x->h > b->h) r->ref = (ptrdiff_t)c;
  }
  /* delayed configurations drawn on timelines: the reference's recipe, margin and
   * amax_compute, each history length (up to MAX_SHOWN, spread over the range) */
  if (r->ref >= 0) {
    const cfg_t *b = &r->cfgs[r->ref];
    size_t cand[256], nc = 0;
    for (size_t c = 0; c < r->ncfg && nc < 256; c++) {
      const cfg_t *x = &r->cfgs[c];
      if (x->kind == FP8_KIND_DELAYED && x->m == b->m && x->ac == b->ac && strcmp(x->recipe, b->recipe) == 0)
        cand[nc++] = c;
    }
    /* ascending history_len */
    for (size_t i = 1; i < nc; i++)
      for (size_t j = i; j > 0 && r->cfgs[cand[j]].h < r->cfgs[cand[j - 1]].h; j--) {
        size_t tmp = cand[j];
        cand[j] = cand[j - 1];
        cand[j - 1] = tmp;
      }
    if (nc <= MAX_SHOWN) {
      for (size_t i = 0; i < nc; i++) r->shown[r->nshown++] = cand[i];
    } else {
      for (size_t i = 0; i < MAX_SHOWN; i++) r->shown[r->nshown++] = cand[i * (nc - 1) / (MAX_SHOWN - 1)];
    }
  }
  return FP8_OK;
}

/* The group of tensor `tensor` under configuration c, or -1. */
static ptrdiff_t group_of(const rep_t *r, const char *tensor, size_t c) {
  for (size_t g = 0; g < r->tab.ngroups; g++)
    if (r->gcfg[g] == c && strcmp(r->tab.groups[g].tensor, tensor) == 0) return (ptrdiff_t)g;
  return -1;
}

/* The row of group g at step s, or NULL. */
static const fp8_step_row *row_at(const rep_t *r, ptrdiff_t g, int64_t step) {
  if (g < 0) return NULL;
  const fp8_steps_group *gr = &r->tab.groups[g];
  for (size_t i = 0; i < gr->nrows; i++) {
    const fp8_step_row *row = fp8_steps_group_row(&r->tab, gr, i);
    if (row->step == step) return row;
  }
  return NULL;
}

/* ------------------------------------------------------------------ run.json */

static void read_run_json(rep_t *r, double *budget_out) {
  char path[4200];
  snprintf(path, sizeof path, "%s/run.json", r->outdir);
  json_error_t jerr;
  json_t *j = json_load_file(path, 0, &jerr);
  const char *slash = strrchr(r->outdir, '/');
  snprintf(r->name, sizeof r->name, "%s", slash && slash[1] ? slash + 1 : r->outdir);
  snprintf(r->trace, sizeof r->trace, "%s", "(unknown)");
  *budget_out = -1;
  if (!j) return;
  json_t *ex = json_object_get(j, "experiment");
  const char *nm = json_string_value(json_object_get(ex, "name"));
  if (nm && *nm) snprintf(r->name, sizeof r->name, "%s", nm);
  json_t *b = json_object_get(ex, "overflow_budget");
  if (json_is_number(b)) *budget_out = json_number_value(b);
  json_t *tr = json_object_get(j, "trace");
  const char *tp = json_string_value(json_object_get(tr, "path"));
  const char *preset = json_string_value(json_object_get(tr, "synth_preset"));
  if (preset)
    snprintf(r->trace, sizeof r->trace, "synthetic '%s' trace (%lld steps, seed %lld)", preset,
             (long long)json_integer_value(json_object_get(tr, "synth_steps")),
             (long long)json_integer_value(json_object_get(tr, "synth_seed")));
  else if (tp)
    snprintf(r->trace, sizeof r->trace, "%s", tp);
  json_decref(j);
}

/* ------------------------------------------------------------------ histograms.csv */

/* Loads the log2 histogram of (tensor, step); *lo_bin is the bin of counts[0]. */
static int load_histogram(const rep_t *r, const char *tensor, int64_t step, double *counts,
                          int *lo_bin, int *nbins) {
  char path[4200];
  snprintf(path, sizeof path, "%s/histograms.csv", r->outdir);
  FILE *fp = fopen(path, "r");
  if (!fp) return FP8_EIO;
  char line[4096];
  int lo = 1000, hi = -1000;
  double tmp[FP8_LOG2_HIST_BINS] = {0};
  size_t tl = strlen(tensor);
  while (fgets(line, sizeof line, fp)) {
    if (strncmp(line, tensor, tl) != 0 || line[tl] != ',') continue;
    long long st, cnt;
    int bin;
    if (sscanf(line + tl + 1, "%lld,%d,%lld", &st, &bin, &cnt) != 3 || st != step) continue;
    if (bin < FP8_LOG2_HIST_MIN || bin >= FP8_LOG2_HIST_MIN + FP8_LOG2_HIST_BINS) continue;
    tmp[bin - FP8_LOG2_HIST_MIN] = (double)cnt;
    if (bin < lo) lo = bin;
    if (bin > hi) hi = bin;
  }
  fclose(fp);
  if (hi < lo) return FP8_EFORMAT;
  *lo_bin = lo;
  *nbins = hi - lo + 1;
  for (int b = lo; b <= hi; b++) counts[b - lo] = tmp[b - FP8_LOG2_HIST_MIN];
  return FP8_OK;
}

/* ------------------------------------------------------------------ gemm.csv */

/* Reads gemm.csv (absent: no GEMM section) into the configurations' rel_error lists. */
static int load_gemm(rep_t *r, int *have, char *err, size_t errlen) {
  char path[4200];
  snprintf(path, sizeof path, "%s/gemm.csv", r->outdir);
  *have = 0;
  FILE *fp = fopen(path, "r");
  if (!fp) return FP8_OK;
  char line[2048];
  int64_t lineno = 0;
  int rc = FP8_OK;
  while (fgets(line, sizeof line, fp)) {
    lineno++;
    line[strcspn(line, "\r\n")] = 0;
    if (lineno == 1) {
      if (strcmp(line, "layer,gemm,step,recipe,kind,history_len,margin,amax_compute,rel_error") != 0) {
        rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s:1: not a gemm.csv header", path);
        break;
      }
      continue;
    }
    char *f[9];
    int n = 0;
    f[n++] = line;
    for (char *p = line; *p && n < 9; p++)
      if (*p == ',') {
        *p = 0;
        f[n++] = p + 1;
      }
    if (n != 9) {
      rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%lld: expected 9 fields", path, (long long)lineno);
      break;
    }
    int g = strcmp(f[1], "fprop") == 0 ? 0 : strcmp(f[1], "dgrad") == 0 ? 1 : strcmp(f[1], "wgrad") == 0 ? 2 : -1;
    char *end;
    double v = strtod(f[8], &end);
    if (g < 0 || *end) {
      rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%lld: bad gemm or rel_error", path, (long long)lineno);
      break;
    }
    int is_delayed = strcmp(f[4], "delayed") == 0;
    for (size_t c = 0; c < r->ncfg; c++) {
      cfg_t *x = &r->cfgs[c];
      if (strcmp(x->recipe, f[3]) != 0 || strcmp(fp8_recipe_kind_name(x->kind), f[4]) != 0) continue;
      if (is_delayed && (x->h != atoi(f[5]) || x->m != atoi(f[6]) ||
                         strcmp(fp8_amax_compute_name(x->ac), f[7]) != 0))
        continue;
      if (x->ngemm[g] == x->capgemm[g]) {
        size_t nc = x->capgemm[g] ? 2 * x->capgemm[g] : 64;
        double *nb = realloc(x->gemm[g], nc * sizeof *nb);
        if (!nb) {
          rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
          goto done;
        }
        x->gemm[g] = nb;
        x->capgemm[g] = nc;
      }
      if (!isnan(v)) x->gemm[g][x->ngemm[g]++] = v;
      *have = 1;
      break;
    }
  }
done:
  fclose(fp);
  for (size_t c = 0; c < r->ncfg; c++)
    for (int g = 0; g < 3; g++) {
      cfg_t *x = &r->cfgs[c];
      gsl_sort(x->gemm[g], 1, x->ngemm[g]);
      x->gemm_median[g] = x->ngemm[g] ? gsl_stats_median_from_sorted_data(x->gemm[g], 1, x->ngemm[g]) : NAN;
    }
  return rc;
}

/* ------------------------------------------------------------------ plots */

static plot_t *plot_add(rep_t *r, const char *file) {
  if (r->nplots == MAX_PLOTS) return NULL;
  plot_t *p = &r->plots[r->nplots];
  memset(p, 0, sizeof *p);
  snprintf(p->file, sizeof p->file, "%s", file);
  return p;
}

static void plot_path(const rep_t *r, const char *file, char *out, size_t n) {
  snprintf(out, n, "%s/plots/%s", r->outdir, file);
}

static void sanitize(const char *in, char *out, size_t n) {
  size_t k = 0;
  for (; *in && k + 1 < n; in++) {
    char ch = *in;
    out[k++] = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                       ch == '-' || ch == '.'
                   ? ch
                   : '_';
  }
  out[k] = 0;
}

/* 1. amax timeline of one tensor, with the largest |x| each shown delayed configuration can
 * represent (fp8_max / scale) and the steps where the reference configuration overflowed. */
static int plot_timeline(rep_t *r, const char *tensor, char *err, size_t errlen) {
  ptrdiff_t gref = group_of(r, tensor, (size_t)r->ref);
  if (gref < 0) return FP8_OK;
  const fp8_steps_group *gr = &r->tab.groups[gref];
  size_t n = gr->nrows;
  double *x = calloc(n + 1, sizeof *x), *amax = calloc(n + 1, sizeof *amax);
  double *fit = calloc((n + 1) * MAX_SHOWN, sizeof *fit);
  double *ox = calloc(n + 1, sizeof *ox), *oy = calloc(n + 1, sizeof *oy);
  int rc = FP8_OK;
  if (!x || !amax || !fit || !ox || !oy) {
    rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
    goto done;
  }
  size_t no = 0;
  for (size_t i = 0; i < n; i++) {
    const fp8_step_row *row = fp8_steps_group_row(&r->tab, gr, i);
    x[i] = (double)row->step;
    amax[i] = row->amax;
    if (row->overflow > 0) {
      ox[no] = (double)row->step;
      oy[no++] = row->amax;
    }
  }
  fp8_series series[1 + MAX_SHOWN];
  char labels[MAX_SHOWN][200];
  size_t ns = 0;
  series[ns++] = (fp8_series){.x = x, .y = amax, .n = n, .label = "amax of the step", .color = FP8_COLOR_BLACK,
                              .style = FP8_STYLE_LINE, .marker = FP8_MARKER_CIRCLE};
  static const fp8_color colors[MAX_SHOWN] = {FP8_COLOR_ORANGE, FP8_COLOR_SKYBLUE, FP8_COLOR_GREEN, FP8_COLOR_PURPLE};
  for (size_t k = 0; k < r->nshown; k++) {
    ptrdiff_t g = group_of(r, tensor, r->shown[k]);
    if (g < 0) continue;
    double *y = fit + k * (n + 1);
    for (size_t i = 0; i < n; i++) {
      const fp8_step_row *row = row_at(r, g, (int64_t)x[i]);
      y[i] = row ? fp8_format_max(row->format) / row->scale : NAN;
    }
    snprintf(labels[k], sizeof labels[k], "fits under %s", r->cfgs[r->shown[k]].label);
    series[ns++] = (fp8_series){.x = x, .y = y, .n = n, .label = labels[k], .color = colors[k],
                                .style = FP8_STYLE_STEP, .dashed = k % 2};
  }
  char olabel[200];
  snprintf(olabel, sizeof olabel, "overflow under %s", r->cfgs[r->ref].label);
  fp8_markers marks = {.x = ox, .y = oy, .n = no, .label = olabel, .color = FP8_COLOR_VERMILLION,
                       .marker = FP8_MARKER_CROSS};
  char title[512], file[300], path[4600], safe[200];
  snprintf(title, sizeof title, "%s: amax per step and what delayed scaling can represent", tensor);
  sanitize(tensor, safe, sizeof safe);
  snprintf(file, sizeof file, "amax_%s.png", safe);
  plot_path(r, file, path, sizeof path);
  fp8_png_text text[] = {{"fp8lab-version", FP8LAB_VERSION}, {"experiment", r->name}, {"tensor", tensor},
                         {"configuration", r->cfgs[r->ref].label}, {"plot", "amax timeline"}};
  fp8_chart ch = {.title = title, .xlabel = "training step", .ylabel = "|x| (log scale)", .logy = 1,
                  .grid = 1, .text = text, .ntext = 5};
  rc = fp8_plot_lines(path, &ch, series, ns, no ? &marks : NULL, no ? 1 : 0, err, errlen);
  if (rc) goto done;
  plot_t *p = plot_add(r, file);
  if (p) {
    snprintf(p->alt, sizeof p->alt, "amax timeline of %s", tensor);
    snprintf(p->caption, sizeof p->caption,
             "%s: the tensor's amax at each snapshot step (black) against the largest |x| each "
             "delayed configuration could represent at that step (fp8_max / scale, from the "
             "history of earlier steps); crosses mark the steps where %s overflowed.",
             tensor, r->cfgs[r->ref].label);
    r->nplots++;
  }
done:
  free(x);
  free(amax);
  free(fit);
  free(ox);
  free(oy);
  return rc;
}

/* 2. heatmaps over history_len x margin, per role: overflow rate and median SNR. */
static int plot_heatmaps(rep_t *r, char *err, size_t errlen) {
  if (r->ref < 0) return FP8_OK;
  const cfg_t *b = &r->cfgs[r->ref];
  int32_t hs[64], ms[64];
  size_t nh = 0, nm = 0;
  for (size_t c = 0; c < r->ncfg; c++) {
    const cfg_t *x = &r->cfgs[c];
    if (x->kind != FP8_KIND_DELAYED || x->ac != b->ac || strcmp(x->recipe, b->recipe) != 0) continue;
    size_t i = 0;
    while (i < nh && hs[i] != x->h) i++;
    if (i == nh && nh < 64) hs[nh++] = x->h;
    i = 0;
    while (i < nm && ms[i] != x->m) i++;
    if (i == nm && nm < 64) ms[nm++] = x->m;
  }
  if (nh * nm < 2) return FP8_OK;
  for (size_t i = 1; i < nh; i++)
    for (size_t j = i; j > 0 && hs[j] < hs[j - 1]; j--) { int32_t t = hs[j]; hs[j] = hs[j - 1]; hs[j - 1] = t; }
  for (size_t i = 1; i < nm; i++)
    for (size_t j = i; j > 0 && ms[j] < ms[j - 1]; j--) { int32_t t = ms[j]; ms[j] = ms[j - 1]; ms[j - 1] = t; }
  char xl[64][16], yl[64][16];
  const char *xp[64], *yp[64];
  for (size_t i = 0; i < nh; i++) { snprintf(xl[i], sizeof xl[i], "%d", (int)hs[i]); xp[i] = xl[i]; }
  for (size_t i = 0; i < nm; i++) { snprintf(yl[i], sizeof yl[i], "%d", (int)ms[i]); yp[i] = yl[i]; }
  for (int role = FP8_ROLE_INPUT; role <= FP8_ROLE_UNKNOWN; role++) {
    double ov[64 * 64], snr[64 * 64];
    int any = 0;
    for (size_t iy = 0; iy < nm; iy++)
      for (size_t ix = 0; ix < nh; ix++) {
        int64_t o = 0, f = 0;
        double med[4096];
        size_t nmed = 0;
        for (size_t g = 0; g < r->tab.ngroups; g++) {
          const fp8_steps_group *gr = &r->tab.groups[g];
          const cfg_t *c = &r->cfgs[r->gcfg[g]];
          if ((int)gr->role != role || c->kind != FP8_KIND_DELAYED || c->ac != b->ac || c->h != hs[ix] ||
              c->m != ms[iy] || strcmp(c->recipe, b->recipe) != 0)
            continue;
          const fp8_group_stats *s = &r->an.stats[g];
          o += s->overflow;
          f += s->finite;
          if (s->snr_rows > 0 && nmed < 4096) med[nmed++] = s->snr_median;
        }
        ov[iy * nh + ix] = f > 0 ? (double)o / (double)f : NAN;
        gsl_sort(med, 1, nmed);
        snr[iy * nh + ix] = nmed ? gsl_stats_median_from_sorted_data(med, 1, nmed) : NAN;
        any |= f > 0;
      }
    if (!any) continue;
    const char *rname = role == FP8_ROLE_UNKNOWN ? "other" : fp8_role_name((fp8_role)role);
    for (int metric = 0; metric < 2; metric++) {
      char title[512], file[200], path[4600];
      snprintf(title, sizeof title, "%s tensors, %s, amax_compute = %s: %s", rname, b->recipe,
               b->ac == FP8_AMAX_MAX ? "max" : "most_recent",
               metric == 0 ? "overflow rate (saturated / finite elements)" : "median SNR over tensors");
      snprintf(file, sizeof file, "heatmap_%s_%s.png", metric == 0 ? "overflow" : "snr", rname);
      plot_path(r, file, path, sizeof path);
      fp8_png_text text[] = {{"fp8lab-version", FP8LAB_VERSION}, {"experiment", r->name}, {"role", rname},
                             {"configuration", b->recipe}, {"plot", metric == 0 ? "overflow heatmap" : "snr heatmap"}};
      fp8_chart ch = {.title = title, .xlabel = "history_len (steps)", .ylabel = "margin (binades)",
                      .text = text, .ntext = 5};
      fp8_heatmap hm = {.nx = nh, .ny = nm, .xlabels = xp, .ylabels = yp, .values = metric == 0 ? ov : snr,
                        .cell_format = metric == 0 ? "%.2g" : "%.1f",
                        .colorbar_label = metric == 0 ? "overflow rate" : "median SNR (dB)",
                        .reverse = metric == 0};
      int rc = fp8_plot_heatmap(path, &ch, &hm, err, errlen);
      if (rc) return rc;
      plot_t *p = plot_add(r, file);
      if (p) {
        snprintf(p->alt, sizeof p->alt, "%s heatmap for %s tensors", metric == 0 ? "overflow" : "SNR", rname);
        snprintf(p->caption, sizeof p->caption,
                 metric == 0
                     ? "Overflow rate of all %s tensors (saturated values over finite values, all snapshot "
                       "steps) for each amax history length and margin."
                     : "Median over the %s tensors of each tensor's median SNR (dB) for each amax history "
                       "length and margin.",
                 rname);
        r->nplots++;
      }
    }
  }
  return FP8_OK;
}

/* 3. dynamic range at the spike: log2|x| histogram against the windows each scale covers. */
static int plot_dynamic_range(rep_t *r, char *err, size_t errlen) {
  if (r->spike_group < 0) return FP8_OK;
  const fp8_steps_group *gr = &r->tab.groups[r->spike_group];
  const fp8_step_row *row = &r->tab.rows[r->spike_row];
  double counts[FP8_LOG2_HIST_BINS];
  int lo, nb;
  if (load_histogram(r, gr->tensor, row->step, counts, &lo, &nb) != FP8_OK) return FP8_OK;
  double edges[FP8_LOG2_HIST_BINS + 1];
  for (int i = 0; i <= nb; i++) edges[i] = lo + i;
  fp8_format f = row->format;
  double minsub = f == FP8_E4M3 ? -9.0 : -16.0, maxl = log2(fp8_format_max(f));
  double sd = row->scale, sj;
  const fp8_step_row *cr = r->cur >= 0 ? row_at(r, group_of(r, gr->tensor, (size_t)r->cur), row->step) : NULL;
  if (cr) {
    sj = cr->scale;
  } else {
    fp8_current_params p = {.amax_epsilon = 0, .pow2 = false, .margin = 0, .format = f};
    sj = fp8_current_scale(&p, (float)row->amax);
  }
  char l1[256], l2[256];
  snprintf(l1, sizeof l1, "%s under %s (scale %.3g)", fp8_format_name(f), r->cfgs[r->ref].label, sd);
  snprintf(l2, sizeof l2, "%s under current scaling (scale %.3g)", fp8_format_name(f), sj);
  fp8_window w[2] = {{minsub - log2(sd), maxl - log2(sd), l1, FP8_COLOR_ORANGE},
                     {minsub - log2(sj), maxl - log2(sj), l2, FP8_COLOR_SKYBLUE}};
  fp8_hist h = {.nbins = (size_t)nb, .edges = edges, .counts = counts, .label = "elements per binade",
                .color = FP8_COLOR_BLUE};
  char title[512], path[4600], stepbuf[32];
  snprintf(title, sizeof title, "%s at step %lld: magnitudes and the range each scale represents", gr->tensor,
           (long long)row->step);
  snprintf(stepbuf, sizeof stepbuf, "%lld", (long long)row->step);
  plot_path(r, "dynamic_range.png", path, sizeof path);
  fp8_png_text text[] = {{"fp8lab-version", FP8LAB_VERSION}, {"experiment", r->name}, {"tensor", gr->tensor},
                         {"step", stepbuf}, {"configuration", r->cfgs[r->ref].label}};
  fp8_chart ch = {.title = title, .xlabel = "log2 |x| (binade)", .ylabel = "elements (log scale)", .logy = 1,
                  .grid = 1, .text = text, .ntext = 5};
  int rc = fp8_plot_histogram(path, &ch, &h, w, 2, err, errlen);
  if (rc) return rc;
  plot_t *p = plot_add(r, "dynamic_range.png");
  if (p) {
    snprintf(p->alt, sizeof p->alt, "dynamic range of %s at step %lld", gr->tensor, (long long)row->step);
    snprintf(p->caption, sizeof p->caption,
             "Magnitudes of %s at step %lld (histogram of log2|x|) and the windows %s can represent "
             "(from its smallest subnormal to its max) under the delayed scale and under the "
             "just-in-time scale: values right of a window saturate, values left of it flush to zero.",
             gr->tensor, (long long)row->step, fp8_format_name(f));
    r->nplots++;
  }
  return FP8_OK;
}

/* 4. SNR over steps of the spike tensor: shown delayed configurations against current. */
static int plot_snr(rep_t *r, char *err, size_t errlen) {
  if (r->spike_group < 0) return FP8_OK;
  const char *tensor = r->tab.groups[r->spike_group].tensor;
  size_t cfgs[MAX_SHOWN + 1], nc = 0;
  for (size_t k = 0; k < r->nshown; k++) cfgs[nc++] = r->shown[k];
  if (r->cur >= 0) cfgs[nc++] = (size_t)r->cur;
  fp8_series s[MAX_SHOWN + 1];
  double *buf[MAX_SHOWN + 1][2];
  size_t ns = 0;
  int rc = FP8_OK;
  static const fp8_color colors[MAX_SHOWN] = {FP8_COLOR_ORANGE, FP8_COLOR_SKYBLUE, FP8_COLOR_GREEN, FP8_COLOR_PURPLE};
  for (size_t k = 0; k < nc; k++) {
    ptrdiff_t g = group_of(r, tensor, cfgs[k]);
    buf[k][0] = buf[k][1] = NULL;
    if (g < 0) continue;
    const fp8_steps_group *gr = &r->tab.groups[g];
    double *x = calloc(gr->nrows + 1, sizeof *x), *y = calloc(gr->nrows + 1, sizeof *y);
    buf[k][0] = x;
    buf[k][1] = y;
    if (!x || !y) { rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory"); goto done; }
    for (size_t i = 0; i < gr->nrows; i++) {
      const fp8_step_row *row = fp8_steps_group_row(&r->tab, gr, i);
      x[i] = (double)row->step;
      y[i] = isfinite(row->snr_db) ? row->snr_db : NAN;
    }
    int is_cur = r->cfgs[cfgs[k]].kind == FP8_KIND_CURRENT;
    s[ns++] = (fp8_series){.x = x, .y = y, .n = gr->nrows, .label = r->cfgs[cfgs[k]].label,
                           .color = is_cur ? FP8_COLOR_BLACK : colors[k % MAX_SHOWN],
                           .style = FP8_STYLE_LINE, .marker = is_cur ? FP8_MARKER_SQUARE : FP8_MARKER_CIRCLE,
                           .dashed = is_cur};
  }
  if (ns) {
    char title[512], path[4600];
    snprintf(title, sizeof title, "%s: SNR of the FP8 cast per step", tensor);
    plot_path(r, "snr.png", path, sizeof path);
    fp8_png_text text[] = {{"fp8lab-version", FP8LAB_VERSION}, {"experiment", r->name}, {"tensor", tensor},
                           {"plot", "snr over steps"}};
    fp8_chart ch = {.title = title, .xlabel = "training step", .ylabel = "SNR (dB)", .grid = 1, .text = text,
                    .ntext = 4};
    rc = fp8_plot_lines(path, &ch, s, ns, NULL, 0, err, errlen);
    if (rc) goto done;
    plot_t *p = plot_add(r, "snr.png");
    if (p) {
      snprintf(p->alt, sizeof p->alt, "SNR over steps of %s", tensor);
      snprintf(p->caption, sizeof p->caption,
               "SNR (10 log10 of signal over quantization error power) of %s at each snapshot step, "
               "delayed configurations against current scaling (black, dashed).", tensor);
      r->nplots++;
    }
  }
done:
  for (size_t k = 0; k < nc; k++) {
    free(buf[k][0]);
    free(buf[k][1]);
  }
  return rc;
}

/* 5. recipe comparison: overflow rate and median SNR per configuration. */
static int plot_bars(rep_t *r, char *err, size_t errlen) {
  if (r->ncfg == 0) return FP8_OK;
  const char **cat = calloc(r->ncfg, sizeof *cat);
  double *ov = calloc(r->ncfg, sizeof *ov), *snr = calloc(r->ncfg, sizeof *snr);
  int rc = FP8_OK;
  if (!cat || !ov || !snr) { rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory"); goto done; }
  int any_ov = 0;
  for (size_t c = 0; c < r->ncfg; c++) {
    cat[c] = r->cfgs[c].label;
    ov[c] = r->cfgs[c].finite ? (double)r->cfgs[c].overflow / (double)r->cfgs[c].finite : NAN;
    any_ov |= ov[c] > 0;
    snr[c] = r->cfgs[c].snr_median;
  }
  for (int metric = 0; metric < 2; metric++) {
    if (metric == 0 && !any_ov) continue;
    char path[4600];
    const char *file = metric == 0 ? "recipes_overflow.png" : "recipes_snr.png";
    plot_path(r, file, path, sizeof path);
    fp8_png_text text[] = {{"fp8lab-version", FP8LAB_VERSION}, {"experiment", r->name},
                           {"plot", metric == 0 ? "overflow per configuration" : "snr per configuration"}};
    fp8_chart ch = {.title = metric == 0 ? "Overflow rate per configuration (all tensors)"
                                         : "Median SNR per configuration (median over tensors)",
                    .xlabel = "configuration", .ylabel = metric == 0 ? "overflow rate (log scale)" : "SNR (dB)",
                    .logy = metric == 0, .grid = 1, .text = text, .ntext = 3,
                    .width = r->ncfg > 16 ? 1600 : 1200, .height = 900};
    fp8_bar_series bs = {.values = metric == 0 ? ov : snr, .label = metric == 0 ? "overflow rate" : "median SNR",
                         .color = metric == 0 ? FP8_COLOR_VERMILLION : FP8_COLOR_BLUE};
    rc = fp8_plot_bars(path, &ch, cat, r->ncfg, &bs, 1, err, errlen);
    if (rc) goto done;
    plot_t *p = plot_add(r, file);
    if (p) {
      snprintf(p->alt, sizeof p->alt, "%s per configuration", metric == 0 ? "overflow rate" : "median SNR");
      snprintf(p->caption, sizeof p->caption, "%s",
               metric == 0 ? "Saturated values over finite values, summed over all tensors and snapshot steps, "
                             "for each configuration (a missing bar is zero)."
                           : "Median over tensors of each tensor's median SNR for each configuration.");
      r->nplots++;
    }
  }
done:
  free(cat);
  free(ov);
  free(snr);
  return rc;
}

/* 6. GEMM error per configuration: median rel_error of fprop, dgrad and wgrad. */
static int plot_gemm(rep_t *r, char *err, size_t errlen) {
  const char **cat = calloc(r->ncfg + 1, sizeof *cat);
  double *v = calloc(3 * (r->ncfg + 1), sizeof *v);
  int rc = FP8_OK;
  if (!cat || !v) { rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory"); goto done; }
  for (size_t c = 0; c < r->ncfg; c++) {
    cat[c] = r->cfgs[c].label;
    for (int g = 0; g < 3; g++) v[(size_t)g * r->ncfg + c] = r->cfgs[c].gemm_median[g];
  }
  fp8_bar_series bs[3] = {{v, "fprop (input x weight)", FP8_COLOR_BLUE},
                          {v + r->ncfg, "dgrad (grad_output x weight)", FP8_COLOR_ORANGE},
                          {v + 2 * r->ncfg, "wgrad (grad_output^T x input)", FP8_COLOR_GREEN}};
  char path[4600];
  plot_path(r, "gemm_error.png", path, sizeof path);
  fp8_png_text text[] = {{"fp8lab-version", FP8LAB_VERSION}, {"experiment", r->name}, {"plot", "gemm error"}};
  fp8_chart ch = {.title = "GEMM output error per configuration (median over layers and steps)",
                  .xlabel = "configuration", .ylabel = "relative Frobenius error (log scale)", .logy = 1,
                  .grid = 1, .text = text, .ntext = 3, .width = r->ncfg > 16 ? 1600 : 1200, .height = 900};
  rc = fp8_plot_bars(path, &ch, cat, r->ncfg, bs, 3, err, errlen);
  if (rc) goto done;
  plot_t *p = plot_add(r, "gemm_error.png");
  if (p) {
    snprintf(p->alt, sizeof p->alt, "GEMM error per configuration");
    snprintf(p->caption, sizeof p->caption,
             "||Y - Y_ref|| / ||Y_ref|| of each layer's fprop, dgrad and wgrad computed from the FP8-dequantized "
             "operands (FP32 GEMM) against the original operands (double), median over layers and snapshot steps.");
    r->nplots++;
  }
done:
  free(cat);
  free(v);
  return rc;
}

/* ------------------------------------------------------------------ the document */

static const char *fmt_rate(double v, char *buf, size_t n) {
  if (isnan(v)) snprintf(buf, n, "n/a");
  else if (v == 0) snprintf(buf, n, "0");
  else snprintf(buf, n, "%.3g", v);
  return buf;
}

static const char *fmt_db(double v, char *buf, size_t n) {
  if (isnan(v)) snprintf(buf, n, "n/a");
  else if (v >= FP8_ANALYSIS_SNR_CAP_DB) snprintf(buf, n, "exact");
  else snprintf(buf, n, "%.1f", v);
  return buf;
}

typedef struct {
  size_t g;
  int64_t steps_with_overflow, overflow;
} ov_t;

static int cmp_ov(const void *a, const void *b) {
  const ov_t *x = a, *y = b;
  if (x->overflow != y->overflow) return x->overflow < y->overflow ? 1 : -1;
  if (x->steps_with_overflow != y->steps_with_overflow) return x->steps_with_overflow < y->steps_with_overflow ? 1 : -1;
  return x->g < y->g ? -1 : x->g > y->g;
}

/* Groups of the reference configuration that overflowed, worst first. */
static size_t overflowing(const rep_t *r, ov_t *out) {
  size_t n = 0;
  if (r->ref < 0) return 0;
  for (size_t g = 0; g < r->tab.ngroups; g++) {
    if (r->gcfg[g] != (size_t)r->ref) continue;
    const fp8_group_stats *s = &r->an.stats[g];
    if (s->overflow > 0 || s->steps_with_overflow > 0)
      out[n++] = (ov_t){g, s->steps_with_overflow, s->overflow};
  }
  qsort(out, n, sizeof *out, cmp_ov);
  return n;
}

static void find_spike(rep_t *r) {
  r->spike_group = -1;
  if (r->ref < 0) return;
  int64_t best = -1;
  int by_overflow = 0;
  for (size_t i = 0; i < r->tab.nrows; i++)
    if (r->gcfg[r->tab.rows[i].group] == (size_t)r->ref && r->tab.rows[i].overflow > 0) by_overflow = 1;
  for (size_t i = 0; i < r->tab.nrows; i++) {
    const fp8_step_row *row = &r->tab.rows[i];
    if (r->gcfg[row->group] != (size_t)r->ref) continue;
    int64_t v = by_overflow ? row->overflow : row->underflow;
    if (v > best) {
      best = v;
      r->spike_group = (ptrdiff_t)row->group;
      r->spike_step = row->step;
      r->spike_row = i;
    }
  }
}

static void add_findings(rep_t *r, fp8_doc *d) {
  char b1[64], b2[64], b3[64], b4[64], b5[64];
  size_t ntensors = r->tab.ntensors;
  fp8_doc_heading(d, 2, "Findings");
  if (r->ref < 0) {
    fp8_doc_markdown(d, "This run has no delayed-scaling configuration: there is nothing to compare.");
    return;
  }
  const cfg_t *ref = &r->cfgs[r->ref];
  ov_t *ov = calloc(r->tab.ngroups + 1, sizeof *ov);
  if (!ov) return;
  size_t nov = overflowing(r, ov);
  size_t nreal = 0;
  for (size_t i = 0; i < nov; i++) {
    /* a single saturated element per step is the rounding of the scale itself */
    const fp8_group_stats *s = &r->an.stats[ov[i].g];
    if (s->overflow > s->steps_with_overflow) nreal++;
  }
  fp8_doc_markdownf(d,
                    "Reference configuration: **%s** (TransformerEngine's default is history_len 1024, "
                    "margin 0, amax_compute max). Under it, **%zu of %zu tensors** saturate values at "
                    "some snapshot step (%zu of them more than one value in a step; a single value per "
                    "step is the rounding of the scale itself and harmless).",
                    ref->label, nov, ntensors, nreal);
  if (r->spike_group >= 0 && r->tab.rows[r->spike_row].overflow > 0) {
    const fp8_step_row *row = &r->tab.rows[r->spike_row];
    const fp8_steps_group *gr = &r->tab.groups[r->spike_group];
    double fits = fp8_format_max(row->format) / row->scale;
    const fp8_step_row *cr = r->cur >= 0 ? row_at(r, group_of(r, gr->tensor, (size_t)r->cur), row->step) : NULL;
    fp8_doc_markdownf(d,
                      "The worst event: **%s at step %lld** reached amax %.4g while the delayed scale, "
                      "taken from earlier steps, could represent only %.4g (%.2g binades too small a "
                      "range): %lld of %lld values saturated and the SNR of the cast fell to %s dB%s%s%s.",
                      gr->tensor, (long long)row->step, row->amax, fits, log2(row->amax / fits),
                      (long long)row->overflow, (long long)row->n, fmt_db(row->snr_db, b1, sizeof b1),
                      cr ? " (current scaling: " : "", cr ? fmt_db(cr->snr_db, b2, sizeof b2) : "",
                      cr ? " dB)" : "");
  }
  if (r->spike_group >= 0 && r->tab.rows[r->spike_row].overflow > 0) {
    /* every tensor hit at the spike step, and how long the spike tensor's scale stayed stale */
    const fp8_step_row *srow = &r->tab.rows[r->spike_row];
    char list[2048] = "";
    size_t nl = 0, nhit = 0;
    for (size_t g = 0; g < r->tab.ngroups; g++) {
      if (r->gcfg[g] != (size_t)r->ref) continue;
      const fp8_step_row *row = row_at(r, (ptrdiff_t)g, srow->step);
      if (!row || row->overflow <= 1) continue;
      nhit++;
      nl += (size_t)snprintf(list + nl, nl < sizeof list ? sizeof list - nl : 0, "%s%s (%lld values)",
                             nhit > 1 ? ", " : "", r->tab.groups[g].tensor, (long long)row->overflow);
      if (nl >= sizeof list) nl = sizeof list - 1;
    }
    if (nhit)
      fp8_doc_markdownf(d, "At step %lld, %zu tensor%s saturated more than one value: %s.", (long long)srow->step,
                        nhit, nhit == 1 ? "" : "s", list);
    const fp8_steps_group *gr = &r->tab.groups[r->spike_group];
    int64_t stale = 0, until = -1, n_after = 0, uf_after = 0, fin_after = 0, uf_before = 0, fin_before = 0;
    int running = 1;
    for (size_t i = 0; i < gr->nrows; i++) {
      const fp8_step_row *row = fp8_steps_group_row(&r->tab, gr, i);
      if (row->step < srow->step) {
        uf_before += row->underflow;
        fin_before += row->n - row->nonfinite;
        continue;
      }
      if (row->step == srow->step) continue;
      n_after++;
      double lag = fp8_analysis_scale_lag(row->scale, row->amax, row->format, row->margin);
      if (running && lag >= 1.0) {
        stale++;
        until = row->step;
        uf_after += row->underflow;
        fin_after += row->n - row->nonfinite;
      } else {
        running = 0;
      }
    }
    if (stale > 0 && fin_before > 0 && fin_after > 0)
      fp8_doc_markdownf(d,
                        "After the spike, the delayed scale of %s stayed at least 2x smaller than the "
                        "just-in-time one for %lld of the %lld following snapshot steps (through step "
                        "%lld%s): the history still holds the spike's amax. Its underflow rate (values "
                        "flushed to zero) went from %.3g before the spike to %.3g in those steps.",
                        gr->tensor, (long long)stale, (long long)n_after, (long long)until,
                        stale == n_after ? ", the end of the run" : "", (double)uf_before / (double)fin_before,
                        (double)uf_after / (double)fin_after);
  }
  if (nov) {
    fp8_doc_markdownf(d, "Tensors that overflow under %s, most saturated values first:", ref->label);
    const char *hdr[] = {"tensor", "role", "steps with overflow", "longest run (steps)", "first overflow step",
                         "overflow rate", "median SNR (dB)", "median SNR, current (dB)"};
    fp8_doc_table_begin(d, 8, hdr, "llrrrrrr");
    for (size_t i = 0; i < nov && i < 25; i++) {
      const fp8_steps_group *gr = &r->tab.groups[ov[i].g];
      const fp8_group_stats *s = &r->an.stats[ov[i].g];
      char c2[32], c3[32], c4[32];
      snprintf(c2, sizeof c2, "%lld of %lld", (long long)s->steps_with_overflow, (long long)s->steps);
      snprintf(c3, sizeof c3, "%lld", (long long)s->longest_overflow_run);
      snprintf(c4, sizeof c4, "%lld", (long long)s->first_overflow_step);
      ptrdiff_t gc = r->cur >= 0 ? group_of(r, gr->tensor, (size_t)r->cur) : -1;
      const char *cells[] = {gr->tensor, fp8_role_name(gr->role), c2, c3, c4, fmt_rate(s->overflow_rate, b3, sizeof b3),
                             fmt_db(s->snr_median, b4, sizeof b4),
                             gc >= 0 ? fmt_db(r->an.stats[gc].snr_median, b5, sizeof b5) : "n/a"};
      fp8_doc_table_row(d, cells);
    }
    if (nov > 25) fp8_doc_markdownf(d, "... and %zu more (see analysis.csv).", nov - 25);
  }
  /* staleness: the worst scale lag of the reference configuration */
  double worst = 0;
  ptrdiff_t wg = -1;
  for (size_t g = 0; g < r->tab.ngroups; g++)
    if (r->gcfg[g] == (size_t)r->ref && r->an.stats[g].lag_rows > 0 && r->an.stats[g].lag_worst < worst) {
      worst = r->an.stats[g].lag_worst;
      wg = (ptrdiff_t)g;
    }
  if (wg >= 0)
    fp8_doc_markdownf(d,
                      "Scale lag (log2 of the just-in-time scale over the delayed scale; negative: the "
                      "delayed scale was too large, values saturate once it is below -margin): the worst "
                      "is %.2f binades for %s; its median is %.2f.",
                      worst, r->tab.groups[wg].tensor, r->an.stats[wg].lag_median);
  free(ov);
}

static void add_recommendations(rep_t *r, fp8_doc *d) {
  char b1[64], b2[64], b3[64];
  fp8_doc_heading(d, 2, "Recommendations");
  fp8_doc_markdownf(d,
                    "Per tensor: the configuration with the best median SNR among the delayed "
                    "configurations whose overflow rate is within the budget (%.3g of the values); "
                    "when none is, current scaling. Per role: one delayed setting for all tensors of "
                    "the role, the one that fits the budget for the most tensors.",
                    r->rec.overflow_budget);
  const char *hdr[] = {"role", "setting", "fits", "overflow rate (worst tensor)", "median SNR (dB)", "note"};
  fp8_doc_table_begin(d, 6, hdr, "llrrrl");
  for (size_t i = r->rec.ntensor_recs; i < r->rec.nrecs; i++) {
    const fp8_recommendation *x = &r->rec.recs[i];
    char setting[256], fits[64];
    if (!x->in_run) snprintf(setting, sizeof setting, "current scaling (not in this run)");
    else if (x->kind == FP8_KIND_DELAYED)
      snprintf(setting, sizeof setting, "%s: history_len %d, margin %d, %s", x->recipe, (int)x->history_len,
               (int)x->margin, fp8_amax_compute_name(x->amax_compute));
    else snprintf(setting, sizeof setting, "%s (current scaling)", x->recipe);
    snprintf(fits, sizeof fits, "%lld of %lld", (long long)x->covers, (long long)x->of);
    const char *cells[] = {x->name, setting, fits, fmt_rate(x->overflow_rate, b1, sizeof b1),
                           fmt_db(x->snr_median, b2, sizeof b2), x->note ? x->note : ""};
    fp8_doc_table_row(d, cells);
  }
  size_t ncur = 0;
  for (size_t i = 0; i < r->rec.ntensor_recs; i++)
    if (!r->rec.recs[i].meets_budget) ncur++;
  if (ncur) {
    fp8_doc_markdownf(d, "**%zu tensor%s need%s current scaling**: no delayed configuration of this run keeps "
                      "%s overflow rate within the budget.",
                      ncur, ncur == 1 ? "" : "s", ncur == 1 ? "s" : "", ncur == 1 ? "its" : "their");
    const char *h2[] = {"tensor", "best delayed overflow rate", "recommended"};
    fp8_doc_table_begin(d, 3, h2, "lrl");
    for (size_t i = 0; i < r->rec.ntensor_recs; i++) {
      const fp8_recommendation *x = &r->rec.recs[i];
      if (x->meets_budget) continue;
      const char *cells[] = {x->name, fmt_rate(x->best_delayed_overflow, b3, sizeof b3),
                             x->in_run ? x->recipe : "current scaling (not in this run)"};
      fp8_doc_table_row(d, cells);
    }
  } else {
    fp8_doc_markdown(d, "Every tensor has a delayed configuration within the budget (recommendations.csv "
                        "lists the best one per tensor).");
  }
  /* with gemm.csv: the configuration that keeps the overflow budget over all tensors and gives
   * the smallest GEMM error (the error that finally reaches the training) */
  size_t best = (size_t)-1, bestd = (size_t)-1;
  double bv = INFINITY, bdv = INFINITY;
  for (size_t c = 0; c < r->ncfg; c++) {
    const cfg_t *x = &r->cfgs[c];
    double m = (x->gemm_median[0] + x->gemm_median[1] + x->gemm_median[2]) / 3.0;
    double ov = x->finite ? (double)x->overflow / (double)x->finite : NAN;
    if (isnan(m) || !(ov <= r->rec.overflow_budget)) continue;
    if (m < bv) { bv = m; best = c; }
    if (x->kind == FP8_KIND_DELAYED && m < bdv) { bdv = m; bestd = c; }
  }
  if (best != (size_t)-1) {
    fp8_doc_markdownf(d,
                      "Taking the GEMM error into account: among the configurations whose overflow rate over "
                      "all tensors is within the budget, **%s** gives the smallest GEMM error (mean of the "
                      "median fprop, dgrad and wgrad relative errors: %.3g)%s%s%s.",
                      r->cfgs[best].label, bv, bestd != (size_t)-1 && bestd != best ? "; the best delayed one is " : "",
                      bestd != (size_t)-1 && bestd != best ? r->cfgs[bestd].label : "",
                      bestd != (size_t)-1 && bestd != best ? "" : "");
    if (bestd != (size_t)-1 && bestd != best)
      fp8_doc_markdownf(d, "(%s: %.3g, %.1f%% more than %s.)", r->cfgs[bestd].label, bdv, 100.0 * (bdv / bv - 1.0),
                        r->cfgs[best].label);
  } else if (r->ncfg && !isnan(r->cfgs[0].gemm_median[0])) {
    fp8_doc_markdown(d, "Taking the GEMM error into account: no configuration keeps the overflow budget over "
                        "all tensors; see the GEMM error table.");
  }
}

static void add_gemm(rep_t *r, fp8_doc *d) {
  size_t best = (size_t)-1;
  double bestv = INFINITY;
  for (size_t c = 0; c < r->ncfg; c++) {
    const cfg_t *x = &r->cfgs[c];
    double m = (x->gemm_median[0] + x->gemm_median[1] + x->gemm_median[2]) / 3.0;
    if (!isnan(m) && m < bestv) {
      bestv = m;
      best = c;
    }
  }
  if (best == (size_t)-1) return;
  fp8_doc_heading(d, 2, "GEMM error");
  fp8_doc_markdownf(d,
                    "What finally matters is the error of the GEMM outputs: for every layer whose input, "
                    "weight and grad_output were captured, fprop, dgrad and wgrad computed from the "
                    "dequantized FP8 operands (FP32 GEMM; block recipes with their blocks along each "
                    "GEMM's reduction dimension, as TransformerEngine lays them out) against the original "
                    "operands (double). Lowest mean of the three medians: **%s** (%.3g).",
                    r->cfgs[best].label, bestv);
  if (r->ref >= 0 && !isnan(r->cfgs[r->ref].gemm_median[0]))
    fp8_doc_markdownf(d, "For comparison, %s: fprop %.3g, dgrad %.3g, wgrad %.3g.", r->cfgs[r->ref].label,
                      r->cfgs[r->ref].gemm_median[0], r->cfgs[r->ref].gemm_median[1], r->cfgs[r->ref].gemm_median[2]);
  const char *hdr[] = {"configuration", "fprop", "dgrad", "wgrad"};
  fp8_doc_table_begin(d, 4, hdr, "lrrr");
  for (size_t c = 0; c < r->ncfg; c++) {
    char b[3][32];
    for (int g = 0; g < 3; g++) fmt_rate(r->cfgs[c].gemm_median[g], b[g], sizeof b[g]);
    const char *cells[] = {r->cfgs[c].label, b[0], b[1], b[2]};
    fp8_doc_table_row(d, cells);
  }
}

/* Every recipe kind per role: overflow, underflow and SNR of each configuration over the
 * tensors of that role. */
static void add_roles_table(rep_t *r, fp8_doc *d) {
  fp8_doc_heading(d, 2, "Recipes by role");
  fp8_doc_markdown(d, "Each configuration over the tensors of one role: saturated and flushed-to-zero values "
                      "over all finite values of those tensors, and the median over the tensors of each "
                      "tensor's median SNR.");
  double *med = calloc(r->tab.ngroups + 1, sizeof *med);
  if (!med) return;
  for (int role = FP8_ROLE_INPUT; role <= FP8_ROLE_UNKNOWN; role++) {
    int any = 0;
    for (size_t g = 0; g < r->tab.ngroups && !any; g++) any = (int)r->tab.groups[g].role == role;
    if (!any) continue;
    fp8_doc_heading(d, 3, role == FP8_ROLE_UNKNOWN ? "other tensors" : fp8_role_name((fp8_role)role));
    const char *hdr[] = {"configuration", "overflow rate", "underflow rate", "median SNR (dB)"};
    fp8_doc_table_begin(d, 4, hdr, "lrrr");
    for (size_t c = 0; c < r->ncfg; c++) {
      int64_t o = 0, u = 0, f = 0;
      size_t nm = 0;
      for (size_t g = 0; g < r->tab.ngroups; g++) {
        if (r->gcfg[g] != c || (int)r->tab.groups[g].role != role) continue;
        const fp8_group_stats *st = &r->an.stats[g];
        o += st->overflow;
        u += st->underflow;
        f += st->finite;
        if (st->snr_rows > 0) med[nm++] = st->snr_median;
      }
      if (f == 0 && nm == 0) continue;
      gsl_sort(med, 1, nm);
      char b1[64], b2[64], b3[64];
      const char *cells[] = {r->cfgs[c].label, fmt_rate(f ? (double)o / (double)f : NAN, b1, sizeof b1),
                             fmt_rate(f ? (double)u / (double)f : NAN, b2, sizeof b2),
                             fmt_db(nm ? gsl_stats_median_from_sorted_data(med, 1, nm) : NAN, b3, sizeof b3)};
      fp8_doc_table_row(d, cells);
    }
  }
  free(med);
}

static void add_config_table(rep_t *r, fp8_doc *d) {
  char b1[64], b2[64];
  fp8_doc_heading(d, 2, "All configurations");
  const char *hdr[] = {"configuration", "overflow rate (all tensors)", "median SNR (dB)"};
  fp8_doc_table_begin(d, 3, hdr, "lrr");
  for (size_t c = 0; c < r->ncfg; c++) {
    const cfg_t *x = &r->cfgs[c];
    const char *cells[] = {x->label, fmt_rate(x->finite ? (double)x->overflow / (double)x->finite : NAN, b1, sizeof b1),
                           fmt_db(x->snr_median, b2, sizeof b2)};
    fp8_doc_table_row(d, cells);
  }
}

/* Builds the document; images are referenced as <img_prefix><file>, CSVs as <csv_prefix>. */
static fp8_doc *build_doc(rep_t *r, const char *img_prefix, const char *csv_prefix) {
  fp8_doc *d = fp8_doc_new();
  if (!d) return NULL;
  char title[400];
  snprintf(title, sizeof title, "fp8lab report: %s", r->name);
  fp8_doc_heading(d, 1, title);
  size_t nsteps = 0;
  {
    int64_t last = -1;
    /* distinct snapshot steps (rows are ordered by step) */
    for (size_t i = 0; i < r->tab.nrows; i++)
      if (r->tab.rows[i].step != last) {
        last = r->tab.rows[i].step;
        nsteps++;
      }
  }
  fp8_doc_markdownf(d,
                    "Replay of the %s through %zu FP8 scaling configurations: %zu tensors at %zu "
                    "snapshot steps (%zu rows of steps.csv). fp8lab %s. Definitions of every number: "
                    "RECIPES.md (TransformerEngine's fused delayed-scaling update, CUDA's saturating casts).",
                    r->trace, r->ncfg, r->tab.ntensors, nsteps, r->tab.nrows, FP8LAB_VERSION);
  add_findings(r, d);
  add_recommendations(r, d);
  fp8_doc_heading(d, 2, "Plots");
  for (size_t i = 0; i < r->nplots; i++) {
    char path[600];
    snprintf(path, sizeof path, "%s%s", img_prefix, r->plots[i].file);
    fp8_doc_image(d, path, r->plots[i].alt, r->plots[i].caption);
  }
  add_gemm(r, d);
  add_roles_table(r, d);
  add_config_table(r, d);
  fp8_doc_markdown(d, "Files: steps.csv (per step, tensor and configuration), summary.csv, analysis.csv "
                      "(statistics over steps), recommendations.csv, histograms.csv, gemm.csv (when the "
                      "trace has layer triplets), run.json.");
  fp8_doc_set_target(d, FP8_DOC_NOTEBOOK);
  fp8_doc_heading(d, 2, "Explore the data");
  fp8_doc_markdownf(d, "The cells below load the run's CSV files (paths relative to this notebook in "
                       "the run's `notebooks_export/` folder).");
  char code[2048];
  snprintf(code, sizeof code,
           "import pandas as pd\n"
           "steps = pd.read_csv(\"%ssteps.csv\")\n"
           "analysis = pd.read_csv(\"%sanalysis.csv\")\n"
           "recommendations = pd.read_csv(\"%srecommendations.csv\")\n"
           "steps.head()",
           csv_prefix, csv_prefix, csv_prefix);
  fp8_doc_code(d, code);
  fp8_doc_code(d, "# tensors and configurations that saturate most\n"
                  "analysis.sort_values(\"overflow_rate\", ascending=False).head(20)");
  fp8_doc_code(d, "# one tensor's amax and scales over steps, per configuration\n"
                  "t = steps[\"tensor\"].iloc[0]\n"
                  "steps[steps[\"tensor\"] == t].pivot_table(index=\"step\", columns=[\"recipe\", \"history_len\", "
                  "\"margin\", \"amax_compute\"], values=\"scale\", dropna=False).head()");
  fp8_doc_set_target(d, FP8_DOC_BOTH);
  return d;
}

/* ------------------------------------------------------------------ entry point */

int fp8_report_generate(const char *outdir, const fp8_report_options *opt, fp8_report_summary *sum,
                        char *err, size_t errlen) {
  rep_t r;
  memset(&r, 0, sizeof r);
  r.outdir = outdir;
  r.spike_group = -1;
  memset(sum, 0, sizeof *sum);
  int rc = FP8_OK;
  fp8_doc *md = NULL, *nb = NULL;
  ov_t *ov = NULL;
  char path[4096];

  double budget_json;
  read_run_json(&r, &budget_json);
  r.budget = opt && opt->overflow_budget >= 0 ? opt->overflow_budget
           : budget_json >= 0                 ? budget_json
                                              : FP8_ANALYSIS_OVERFLOW_BUDGET;

  snprintf(path, sizeof path, "%s/steps.csv", outdir);
  rc = fp8_steps_load(path, &r.tab, err, errlen);
  if (rc) goto done;
  r.have_tab = 1;
  if (r.tab.nrows == 0) {
    rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s: no rows: nothing to report", path);
    goto done;
  }
  rc = fp8_analysis_compute(&r.tab, &r.an, err, errlen);
  if (rc) goto done;
  r.have_an = 1;
  rc = fp8_analysis_write(&r.an, outdir, err, errlen);
  if (rc) goto done;
  rc = fp8_analysis_recommend(&r.an, r.budget, &r.rec, err, errlen);
  if (rc) goto done;
  r.have_rec = 1;
  rc = fp8_recommend_write(&r.rec, outdir, err, errlen);
  if (rc) goto done;
  rc = build_configs(&r);
  if (rc) {
    fp8_errorf(rc, err, errlen, "out of memory");
    goto done;
  }
  find_spike(&r);
  int have_gemm = 0;
  rc = load_gemm(&r, &have_gemm, err, errlen);
  if (rc) goto done;

  /* plots */
  snprintf(path, sizeof path, "%s/plots", outdir);
  rc = fp8_mkdir_p(path, err, errlen);
  if (rc) goto done;
  snprintf(sum->plots_dir, sizeof sum->plots_dir, "%s", path);
  int maxt = opt && opt->max_timelines > 0 ? opt->max_timelines : 6;
  if (r.ref >= 0) {
    ov = calloc(r.tab.ngroups + 1, sizeof *ov);
    if (!ov) { rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory"); goto done; }
    size_t nov = overflowing(&r, ov);
    size_t drawn = 0;
    /* the spike tensor first, then the worst overflowing ones */
    if (r.spike_group >= 0) {
      rc = plot_timeline(&r, r.tab.groups[r.spike_group].tensor, err, errlen);
      if (rc) goto done;
      drawn++;
    }
    for (size_t i = 0; i < nov && drawn < (size_t)maxt; i++) {
      const char *t = r.tab.groups[ov[i].g].tensor;
      if (r.spike_group >= 0 && strcmp(t, r.tab.groups[r.spike_group].tensor) == 0) continue;
      rc = plot_timeline(&r, t, err, errlen);
      if (rc) goto done;
      drawn++;
    }
  }
  rc = plot_dynamic_range(&r, err, errlen);
  if (rc) goto done;
  rc = plot_snr(&r, err, errlen);
  if (rc) goto done;
  rc = plot_heatmaps(&r, err, errlen);
  if (rc) goto done;
  rc = plot_bars(&r, err, errlen);
  if (rc) goto done;
  if (have_gemm) {
    rc = plot_gemm(&r, err, errlen);
    if (rc) goto done;
  }
  sum->nplots = r.nplots;

  /* report.md in the output dir, the notebook in <outdir>/notebooks_export/ */
  md = build_doc(&r, "plots/", "");
  nb = build_doc(&r, "../plots/", "../");
  if (!md || !nb) { rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory"); goto done; }
  rc = fp8_doc_write_markdown(md, outdir, "report.md", err, errlen);
  if (rc) goto done;
  snprintf(path, sizeof path, "%s/notebooks_export", outdir);
  rc = fp8_mkdir_p(path, err, errlen);
  if (rc) goto done;
  char nbname[300];
  snprintf(nbname, sizeof nbname, "%s.ipynb", r.name);
  rc = fp8_doc_write_notebook(nb, path, nbname, err, errlen);
  if (rc) goto done;
  snprintf(sum->report_md, sizeof sum->report_md, "%s/report.md", outdir);
  snprintf(sum->notebook, sizeof sum->notebook, "%s/%s", path, nbname);

done:
  fp8_doc_free(md);
  fp8_doc_free(nb);
  free(ov);
  for (size_t c = 0; r.cfgs && c < r.ncfg; c++)
    for (int g = 0; g < 3; g++) free(r.cfgs[c].gemm[g]);
  free(r.cfgs);
  free(r.gcfg);
  if (r.have_rec) fp8_recommendations_free(&r.rec);
  if (r.have_an) fp8_analysis_free(&r.an);
  if (r.have_tab) fp8_steps_free(&r.tab);
  return rc;
}
