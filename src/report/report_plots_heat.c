/* report_plots_heat.c: per role the overshoot of each tensor at each step under the reference
 * configuration (report_plots_internal.h), from stream.csv's series when the run has one
 * (rp_series_of), else the snapshot rows; past HEAT_ROWS tensors a role is drawn by layer and
 * as its worst HEAT_WORST tensors. */
#include "report_plots_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8.h"     /* fp8_clip_bits, fp8_format_max */
#include "results.h" /* fp8_overshoot */
#include "util.h"

/* ------------------------------------------------------------------ overshoot heatmaps */

/* One role's overshoot grid under the reference configuration: ny tensors (the first at the
 * top) x nx steps, warm-up cells NaN, steps where every tensor warms up left out. */
typedef struct {
  size_t nx, ny;
  double *x, *v;
  const char **names;
  const char *source;
  size_t loud;   /* cells > 0 */
  size_t clip;   /* cells > band: the largest element clipped */
  double vmax;   /* the largest overshoot (NaN: none) */
  double band;   /* the format's rounding band: (0, band] overflowed by rounding only */
} ograd;

/* The largest overshoot whose largest element can only round to fp8_max: log2 of the format's
 * rounding midpoint (fp8_clip_bits: 464 for E4M3, 61440 for E5M2) over fp8_max (448, 57344):
 * 0.0506 and 0.0995 binades. */
static double round_band(fp8_format f) {
  uint32_t b = fp8_clip_bits(f);
  float m;
  memcpy(&m, &b, sizeof m);
  return log2((double)m / (double)fp8_format_max(f));
}

/* A cell's drawn value: an overflowed largest element that did not clip (fp8_stream_clipped,
 * or no clipped value in a snapshot row) inside the band (0, band], one that clipped above it
 * (both by the float32 comparison, which can differ from the log's last rounding: the value
 * moves by at most that rounding and the band's width). */
static double oband(double v, int clipped, double band) {
  if (!(v > 0) || isinf(v)) return v;
  return clipped ? fmax(v, nextafter(band, INFINITY)) : fmin(v, band);
}

/* The role's groups under the reference configuration into g (room for every group), in the
 * natural order of their tensors' names (layers.2 before layers.10: the model's order). */
typedef struct {
  const char *name;
  size_t g;
} named_group;
static int cmp_group_name(const void *x, const void *y) {
  return fp8_natural_cmp(((const named_group *)x)->name, ((const named_group *)y)->name);
}
static size_t role_groups(const rep_t *r, int role, size_t *g) {
  size_t n = 0;
  for (size_t i = 0; i < r->tab.ngroups; i++)
    if (r->gcfg[i] == (size_t)r->ref && (int)r->tab.groups[i].role == role) g[n++] = i;
  named_group *ng = malloc((n + 1) * sizeof *ng);
  if (!ng) return n; /* out of memory: the name order as it is */
  for (size_t k = 0; k < n; k++) ng[k] = (named_group){r->tab.groups[g[k]].tensor, g[k]};
  qsort(ng, n, sizeof *ng, cmp_group_name);
  for (size_t k = 0; k < n; k++) g[k] = ng[k].g;
  free(ng);
  return n;
}

/* The value of group g at column step (index i of the stream or the step itself); NaN at
 * warm-up, where there is none, and where the tensor did not run (amax 0: no largest element,
 * not "far below the max"). Sets *warm when the cell is a warm-up step. */
static double ocell(const rep_t *r, size_t g, const fp8_stream_series *s, size_t i, int64_t step,
                    double band, int *warm) {
  if (s) {
    *warm = i < s->n && s->warmup[i];
    if (!(i < s->n && s->step[i] == step && !*warm && s->amax[i] > 0.0f)) return NAN;
    return oband(fp8_overshoot(s->amax[i], s->scale[i], s->key.format),
                 fp8_stream_clipped(s->amax[i], s->scale[i], s->key.format), band);
  }
  const fp8_step_row *row = rep_row_at(r, (ptrdiff_t)g, step);
  *warm = row && row->warmup;
  return row && !row->warmup && row->amax > 0 ? oband(row->overshoot, row->clipped > 0, band) : NAN;
}

/* The counts of a grid (cells > 0, cells past the band, the largest finite value). */
static void ograd_tally(ograd *o) {
  o->loud = o->clip = 0;
  o->vmax = NAN;
  for (size_t i = 0; i < o->nx * o->ny; i++) {
    if (o->v[i] > 0) o->loud++;
    if (o->v[i] > o->band) o->clip++;
    if (isfinite(o->v[i]) && !(o->v[i] <= o->vmax)) o->vmax = o->v[i];
  }
}

static int ograd_fill(const rep_t *r, const size_t *g, size_t ng, ograd *o) {
  const fp8_steps_group *g0 = &r->tab.groups[g[0]];
  const fp8_stream_series *s0 = rp_series_of(r, g0->tensor, (size_t)r->ref, g0->key.format);
  size_t n = s0 ? s0->n : g0->nrows;
  o->source = !s0 ? "the snapshot steps"
              : rep_micro(r) ? "every micro-batch (stream.csv)" : "every step (stream.csv)";
  o->x = calloc(n + 1, sizeof *o->x);
  o->v = calloc((n + 1) * ng, sizeof *o->v);
  o->names = calloc(ng + 1, sizeof *o->names);
  const fp8_stream_series **ss = calloc(ng + 1, sizeof *ss);
  if (!o->x || !o->v || !o->names || !ss) {
    free(ss);
    return FP8_ENOMEM;
  }
  o->ny = ng;
  o->vmax = NAN;
  o->band = round_band(g0->key.format);
  for (size_t k = 0; k < ng; k++) {
    const fp8_steps_group *gr = &r->tab.groups[g[k]];
    ss[k] = s0 ? rp_series_of(r, gr->tensor, (size_t)r->ref, gr->key.format) : NULL;
    o->names[ng - 1 - k] = gr->tensor;
  }
  for (size_t i = 0; i < n; i++) {
    int64_t step = s0 ? s0->step[i] : fp8_steps_csv_group_row(&r->tab, g0, i)->step;
    int all_warm = 1;
    for (size_t k = 0; k < ng; k++) {
      int warm = 0;
      double v = ocell(r, g[k], ss[k], i, step, o->band, &warm);
      all_warm &= warm;
      o->v[(ng - 1 - k) * (n + 1) + o->nx] = v;
    }
    if (all_warm) continue;
    o->x[o->nx++] = s0 ? rp_stream_x(s0, i) : (double)step;
  }
  /* pack the rows to nx columns */
  for (size_t k = 0; k < ng; k++)
    memmove(o->v + k * o->nx, o->v + k * (n + 1), o->nx * sizeof *o->v);
  ograd_tally(o);
  free(ss);
  return FP8_OK;
}

/* The views of a role's heatmap: every tensor; with more tensors than HEAT_ROWS, their
 * layers (each row the largest of its tensors) and the worst HEAT_WORST tensors. */
enum { VIEW_ALL, VIEW_LAYERS, VIEW_WORST };
#define HEAT_ROWS 64
#define HEAT_WORST 32
#define HEAT_ROWS_MAX 1000 /* fp8_plot_step_heatmap's most rows */

static int plot_overshoot_role(const rep_t *r, rep_charts *drawn, int role, const ograd *o,
                               int view, size_t ntensors, char *err, size_t errlen) {
  const char *rname = rp_role_name(role);
  double lo = 0, hi = 1;
  for (size_t i = 0; i < o->nx * o->ny; i++)
    if (isfinite(o->v[i])) lo = fmin(lo, o->v[i]), hi = fmax(hi, o->v[i]);
  lo = floor(fmax(lo, -8.0));
  hi = ceil(fmin(hi, 16.0));
  char title[512], file[200], path[4600], what[160];
  static const char *const suffix[3] = {"", "", "_worst"};
  if (view == VIEW_LAYERS)
    snprintf(what, sizeof what, "the %zu %s tensors by layer (%zu layers; a row: the largest "
             "of its tensors)", ntensors, rname, o->ny);
  else if (view == VIEW_WORST)
    snprintf(what, sizeof what, "the %zu %s tensors of %zu with the largest overshoot", o->ny,
             rname, ntensors);
  else
    snprintf(what, sizeof what, "%s tensors", rname);
  /* a column is a micro-batch when the grid comes from a stream of several a step */
  const char *unit = rep_micro(r) && strstr(o->source, "micro") ? "micro-batch" : "step";
  const char *units = unit[0] == 'm' ? "micro-batches" : "steps";
  if (view == VIEW_ALL)
    snprintf(title, sizeof title, "%s under %s: overshoot per %s (> 0: the largest element "
             "saturated)", what, r->cfgs[r->ref].label, unit);
  else if (view == VIEW_LAYERS)
    snprintf(title, sizeof title, "%s tensors by layer under %s: overshoot per %s (the "
             "largest of a layer's)", rname, r->cfgs[r->ref].label, unit);
  else
    snprintf(title, sizeof title, "The %zu %s tensors of %zu with the largest overshoot under %s",
             o->ny, rname, ntensors, r->cfgs[r->ref].label);
  snprintf(file, sizeof file, "heatmap_overshoot_%s%s.png", rname, suffix[view]);
  rp_plot_path(r, file, path, sizeof path);
  fp8_png_text text[] = {{"fp8lab-version", FP8LAB_VERSION},
                         {"experiment", r->run.name},
                         {"role", rname},
                         {"configuration", r->cfgs[r->ref].label},
                         {"plot", view == VIEW_LAYERS  ? "overshoot heatmap by layer"
                                  : view == VIEW_WORST ? "overshoot heatmap, worst tensors"
                                                       : "overshoot heatmap"}};
  int height = (int)(260 + 30 * o->ny);
  char blabel[128];
  snprintf(blabel, sizeof blabel, "overflow by rounding only (overshoot <= %.2g binades, 0 values "
           "clipped)", o->band);
  fp8_chart ch = {.title = title,
                  .xlabel = unit[0] == 'm' ? "training step (its micro-batches side by side)"
                                           : "training step",
                  .ylabel = view == VIEW_LAYERS ? "layer" : "tensor", .text = text, .ntext = 5,
                  .width = 1400, .height = height < 800 ? 800 : height > 2400 ? 2400 : height};
  fp8_step_heatmap hm = {.nx = o->nx, .ny = o->ny, .x = o->x, .ylabels = o->names, .values = o->v,
                         .threshold = 0, .vmin = lo, .vmax = hi,
                         .colorbar_label = "overshoot log2(amax x scale / fp8_max) (binades)",
                         .band = o->band, .band_label = blabel,
                         .nan_label = "no value: warm-up, or the tensor did not run"};
  int rc = !rp_my_chart(drawn) ? FP8_OK : fp8_plot_step_heatmap(path, &ch, &hm, err, errlen);
  if (rc) return rc;
  plot_t *p = rp_plot_add(drawn, file);
  if (p) {
    char mx[64] = "none";
    if (isfinite(o->vmax)) snprintf(mx, sizeof mx, "%.3g binades", o->vmax);
    snprintf(p->alt, sizeof p->alt, "overshoot heatmap of the %s", what);
    if (view == VIEW_ALL) snprintf(what, sizeof what, "each %s tensor", rname);
    snprintf(p->caption, sizeof p->caption,
             "Overshoot log2(amax x scale / fp8_max) of %s at %s under %s: blue where the largest "
             "element fit (<= 0, including a hair below 0 such as -5e-9; lighter nearer the max); "
             "yellow where it overflowed by rounding only (0 < overshoot <= %.3g binades, the "
             "format's rounding midpoint: every value rounds to fp8_max, none clipped; %zu cells); "
             "orange to dark red where it clipped, by that many binades (%zu cells; %zu of %zu "
             "cells overflowed; largest %s). Hatched: %s of warm-up and %s where the tensor did "
             "not run (%s where every tensor warms up are not drawn).%s",
             what, o->source, r->cfgs[r->ref].label, o->band, o->loud - o->clip, o->clip, o->loud,
             o->nx * o->ny, mx, units, units, units,
             view == VIEW_ALL ? ""
             : view == VIEW_LAYERS
                 ? " A layer is the name up to its first number (model.layers.12); a pixel "
                   "column shows the largest of the columns it covers."
                 : " Chosen by each tensor's largest overshoot over the run, in name order.");
    drawn->nplots++;
  }
  return FP8_OK;
}

/* The length of name's layer: up to the end of its first dotted component that is a number
 * ("model.layers.12" of "model.layers.12.mlp.up_proj.input"); 0 when it has none. */
static size_t layer_len(const char *name) {
  const char *p = name;
  while (*p) {
    const char *e = strchr(p, '.');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    size_t d = 0;
    while (d < n && p[d] >= '0' && p[d] <= '9') d++;
    if (n > 0 && d == n) return (size_t)(p - name) + n;
    if (!e) break;
    p = e + 1;
  }
  return 0;
}

/* The rows of o (rows ny-1 .. 0: name order top down) grouped by layer into l: each layer's
 * row the largest of its tensors' cells (NaN where all are). Tensors without a layer keep a
 * row each. l->names point into text (owned by the caller, freed after drawing). */
static int ograd_layers(const ograd *o, ograd *l, char **text) {
  size_t ny = o->ny, nx = o->nx, nl = 0;
  size_t *of = malloc((ny + 1) * sizeof *of); /* [row]: its layer */
  char *names = malloc(ny * 100 + 1);
  l->v = malloc((nx * ny + 1) * sizeof *l->v);
  l->names = calloc(ny + 1, sizeof *l->names);
  l->x = malloc((nx + 1) * sizeof *l->x);
  const char **key = calloc(ny + 1, sizeof *key);
  size_t *klen = calloc(ny + 1, sizeof *klen), *count = calloc(ny + 1, sizeof *count);
  int ok = of && names && l->v && l->names && l->x && key && klen && count;
  for (size_t k = 0; ok && k < ny; k++) { /* name order: row ny-1-k */
    const char *nm = o->names[ny - 1 - k];
    size_t len = layer_len(nm), j = 0;
    if (len == 0) len = strlen(nm);
    while (j < nl && !(klen[j] == len && strncmp(key[j], nm, len) == 0)) j++;
    if (j == nl) key[nl] = nm, klen[nl] = len, nl++;
    of[ny - 1 - k] = j;
    count[j]++;
  }
  if (ok) {
    memcpy(l->x, o->x, nx * sizeof *l->x);
    l->nx = nx;
    l->ny = nl;
    l->source = o->source;
    l->band = o->band;
    for (size_t i = 0; i < nx * nl; i++) l->v[i] = NAN;
    for (size_t row = 0; row < ny; row++) {
      double *dst = l->v + (nl - 1 - of[row]) * nx;
      const double *src = o->v + row * nx;
      for (size_t i = 0; i < nx; i++)
        if (!isnan(src[i]) && (isnan(dst[i]) || src[i] > dst[i])) dst[i] = src[i];
    }
    char *w = names;
    for (size_t j = 0; j < nl; j++) {
      int n = snprintf(w, 100, "%.*s (%zu)", (int)(klen[j] > 60 ? 60 : klen[j]), key[j], count[j]);
      l->names[nl - 1 - j] = w;
      w += n + 1;
    }
    ograd_tally(l);
  }
  free(of);
  free(key);
  free(klen);
  free(count);
  if (!ok) free(names);
  *text = ok ? names : NULL;
  return ok ? FP8_OK : FP8_ENOMEM;
}

typedef struct {
  double top;
  size_t row;
} row_top;
static int cmp_row_top(const void *x, const void *y) { /* largest first, NaN last, then row */
  const row_top *a = x, *b = y;
  int an = isnan(a->top), bn = isnan(b->top);
  if (an != bn) return an - bn;
  if (!an && a->top != b->top) return a->top < b->top ? 1 : -1;
  return a->row < b->row ? -1 : a->row > b->row;
}
static int cmp_size(const void *x, const void *y) {
  size_t a = *(const size_t *)x, b = *(const size_t *)y;
  return a < b ? -1 : a > b;
}

/* The HEAT_WORST rows of o with the largest overshoot over the run into w, in o's order;
 * their names without the role's suffix (the title names it), in text (the caller frees it). */
static int ograd_worst(const ograd *o, const char *role, ograd *w, char **text) {
  size_t ny = o->ny, nx = o->nx, n = ny < HEAT_WORST ? ny : HEAT_WORST;
  row_top *t = malloc((ny + 1) * sizeof *t);
  size_t *keep = malloc((n + 1) * sizeof *keep);
  w->v = malloc((nx * n + 1) * sizeof *w->v);
  w->names = calloc(n + 1, sizeof *w->names);
  w->x = malloc((nx + 1) * sizeof *w->x);
  int ok = t && keep && w->v && w->names && w->x;
  if (ok) {
    for (size_t row = 0; row < ny; row++) {
      t[row].row = row;
      t[row].top = NAN;
      for (size_t i = 0; i < nx; i++) {
        double v = o->v[row * nx + i];
        if (!isnan(v) && (isnan(t[row].top) || v > t[row].top)) t[row].top = v;
      }
    }
    qsort(t, ny, sizeof *t, cmp_row_top);
    for (size_t k = 0; k < n; k++) keep[k] = t[k].row;
    qsort(keep, n, sizeof *keep, cmp_size);
    memcpy(w->x, o->x, nx * sizeof *w->x);
    w->nx = nx;
    w->ny = n;
    w->source = o->source;
    w->band = o->band;
    size_t room = 0, rl = strlen(role);
    for (size_t k = 0; k < n; k++) room += strlen(o->names[keep[k]]) + 1;
    char *tx = *text = malloc(room + 1);
    ok = tx != NULL;
    for (size_t k = 0; ok && k < n; k++) {
      memcpy(w->v + k * nx, o->v + keep[k] * nx, nx * sizeof *w->v);
      const char *nm = o->names[keep[k]];
      size_t len = strlen(nm);
      if (len > rl + 1 && nm[len - rl - 1] == '.' && strcmp(nm + len - rl, role) == 0)
        len -= rl + 1;
      memcpy(tx, nm, len);
      tx[len] = 0;
      w->names[k] = tx;
      tx += len + 1;
    }
    if (ok) ograd_tally(w);
  }
  free(t);
  free(keep);
  return ok ? FP8_OK : FP8_ENOMEM;
}

static void ograd_free(ograd *o) {
  free(o->x);
  free(o->v);
  free(o->names);
  memset(o, 0, sizeof *o);
}

/* Per role: the overshoot of each tensor at each step under the reference configuration
 * (plots/heatmap_overshoot_<role>.png). */
int rep_plot_overshoot_maps(const rep_t *r, rep_charts *drawn, char *err, size_t errlen) {
  if (r->ref < 0 || r->cfgs[r->ref].key.kind != FP8_KIND_DELAYED) return FP8_OK;
  size_t *g = calloc(r->tab.ngroups + 1, sizeof *g);
  if (!g) return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  int rc = FP8_OK;
  for (int role = FP8_ROLE_INPUT; role <= FP8_ROLE_UNKNOWN && rc == FP8_OK; role++) {
    size_t ng = role_groups(r, role, g);
    if (ng == 0) continue;
    ograd o, l, w;
    memset(&o, 0, sizeof o);
    memset(&l, 0, sizeof l);
    memset(&w, 0, sizeof w);
    char *ltext = NULL, *wtext = NULL;
    if (ograd_fill(r, g, ng, &o) != FP8_OK) rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
    else if (o.nx > 0 && ng <= HEAT_ROWS) rc = plot_overshoot_role(r, drawn, role, &o, VIEW_ALL, ng, err, errlen);
    else if (o.nx > 0) { /* too many rows to read: by layer, and the worst tensors */
      if (ograd_layers(&o, &l, &ltext) != FP8_OK || ograd_worst(&o, rp_role_name(role), &w, &wtext) != FP8_OK)
        rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
      const ograd *by = l.ny < ng ? &l : &o; /* no layer shared by two tensors: all of them */
      if (!rc && by->ny <= HEAT_ROWS_MAX) /* the chart's limit: else the worst alone */
        rc = plot_overshoot_role(r, drawn, role, by, l.ny < ng ? VIEW_LAYERS : VIEW_ALL, ng,
                                 err, errlen);
      if (!rc) rc = plot_overshoot_role(r, drawn, role, &w, VIEW_WORST, ng, err, errlen);
    }
    ograd_free(&o);
    ograd_free(&l);
    ograd_free(&w);
    free(ltext);
    free(wtext);
  }
  free(g);
  return rc;
}
