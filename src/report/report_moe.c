/* report_moe.c: the report's Mixture-of-Experts section (issue 40; docs/semantics.md,
 * "Mixture-of-Experts"): the routers left out of the FP8 advice (rep_moe_routers, before the
 * recommendations), then (rep_add_moe) under the reference delayed configuration: the share
 * of expert-steps that did not run, the expert groups (one TE GroupedLinear each: one recipe)
 * aggregated with their worst expert, the worst expert tensors, how often an expert runs
 * against how often its largest element clips (a rarely routed expert's history holds the
 * amaxes of the steps it ran, so it spans many more training steps), the clipping on the first
 * step after a gap, and the recipe per expert group. Nothing without an expert tensor.
 * Every number is recomputed from the CSV files by tests/report/test_moe.py. */
#include "report_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h" /* fp8_expert_of, fp8_router_of */

#define MOE_TABLE 20
#define MOE_WORST 10

/* ------------------------------------------------------------------ routers */

/* The GEMM of a tensor name (the name up to its last '.') into out; 0 when it has no role part. */
static int gemm_of(const char *tensor, char *out, size_t n) {
  const char *dot = strrchr(tensor, '.');
  if (!dot || (size_t)(dot - tensor) >= n) return 0;
  memcpy(out, tensor, (size_t)(dot - tensor));
  out[dot - tensor] = '\0';
  return 1;
}

int rep_moe_routers(rep_t *r) {
  r->nrouter_tensors = 0;
  if (!r->tab.ngroups) return FP8_OK;
  unsigned char *is = calloc(r->tab.ntensors + 1, 1);
  if (!is) return FP8_ENOMEM;
  char gemm[FP8_NAME_MAX + FP8_RANK_PREFIX_MAX + 1];
  for (size_t i = 0; i < r->tab.ntensors; i++) {
    if (!gemm_of(r->tab.tensors[i], gemm, sizeof gemm)) continue;
    if (fp8_router_of(gemm, r->tab.tensors, r->tab.ntensors)) {
      is[i] = 1;
      r->nrouter_tensors++;
    }
  }
  if (r->nrouter_tensors && !r->run.routers_fp8) {
    unsigned char *left = calloc(r->tab.ngroups, 1);
    if (!left) {
      free(is);
      return FP8_ENOMEM;
    }
    size_t t = 0; /* groups are by tensor name, as tab.tensors */
    for (size_t g = 0; g < r->tab.ngroups; g++) {
      while (t < r->tab.ntensors && strcmp(r->tab.tensors[t], r->tab.groups[g].tensor) < 0) t++;
      left[g] = t < r->tab.ntensors && is[t] && strcmp(r->tab.tensors[t], r->tab.groups[g].tensor) == 0;
    }
    r->router_group = left;
    r->an.left_out = left;
  }
  free(is);
  return FP8_OK;
}

/* ------------------------------------------------------------------ experts */

static int cmp_ex_group(const void *a, const void *b) {
  const rep_expert *x = a, *y = b;
  int c = strcmp(x->group, y->group);
  if (c) return c;
  return x->expert < y->expert ? -1 : x->expert > y->expert;
}

static int cmp_ex_worst(const void *a, const void *b) {
  const rep_expert *x = a, *y = b;
  if (x->clip != y->clip) return x->clip < y->clip ? 1 : -1;
  if (x->overshoot != y->overshoot) return x->overshoot < y->overshoot ? 1 : -1;
  return x->g < y->g ? -1 : x->g > y->g;
}

/* The steps of group g: the stream series (every step) when there is one, else the rows. */
static void ex_steps(const rep_t *r, rep_expert *e) {
  const fp8_group_stats *s = &r->an.stats[e->g];
  const fp8_stream_series *ser = r->series ? r->series[e->g] : NULL;
  e->overshoot = -INFINITY;
  if (ser) {
    fp8_format f = r->tab.groups[e->g].key.format;
    int prev_ran = 1;
    for (size_t i = 0; i < ser->n; i++) { /* micro-batches count one by one, as the history */
      int ran = ser->amax[i] > 0.0f;
      e->total++;
      e->ran += ran;
      if (ran && !ser->warmup[i] && !prev_ran && ser->scale) {
        e->gap_steps++;
        e->gap_clip += fp8_stream_clipped(ser->amax[i], ser->scale[i], f);
      }
      prev_ran = ran;
    }
    e->ran_nw = s->stream_steps;
    e->clip = s->stream_clipped_steps;
    if (!isnan(s->stream_overshoot_max)) e->overshoot = s->stream_overshoot_max;
    return;
  }
  const fp8_steps_group *gr = &r->tab.groups[e->g];
  for (size_t i = 0; i < gr->nrows; i++) {
    const fp8_step_row *row = fp8_steps_csv_group_row(&r->tab, gr, i);
    e->total++;
    e->ran += row->amax > 0;
  }
  e->ran_nw = s->steps;
  e->clip = s->steps_with_clipped;
  if (!isnan(s->overshoot_max)) e->overshoot = s->overshoot_max;
}

static int cmp_row_gemm(const void *key, const void *row) {
  return strcmp((const char *)key, ((const fp8_expert_row *)row)->gemm);
}

/* experts.csv's tokens per step run of the GEMM of tensor t (its rank prefix dropped): NaN
 * without a row or a step run. */
static double tokens_of(const rep_t *r, const char *t) {
  if (!r->have_experts) return NAN;
  size_t rank;
  const char *name = fp8_trace_split_rank(t, &rank);
  char gemm[FP8_NAME_MAX + FP8_RANK_PREFIX_MAX + 1];
  if (!gemm_of(name ? name : t, gemm, sizeof gemm)) return NAN;
  const fp8_expert_row *row = bsearch(gemm, r->experts_csv.rows, r->experts_csv.nrows,
                                      sizeof *r->experts_csv.rows, cmp_row_gemm);
  return row && row->steps_run > 0 ? (double)row->tokens / (double)row->steps_run : NAN;
}

/* The expert tensors of the reference configuration, by group then expert (malloc'ed; NULL and
 * *n = 0 with none, or out of memory). */
static rep_expert *experts(const rep_t *r, size_t *n) {
  *n = 0;
  if (r->ref < 0) return NULL;
  size_t cap = 0;
  for (size_t g = 0; g < r->tab.ngroups; g++)
    cap += r->gcfg[g] == (size_t)r->ref && fp8_expert_of(r->tab.groups[g].tensor, NULL, NULL, 0);
  if (!cap) return NULL;
  rep_expert *ex = calloc(cap, sizeof *ex);
  if (!ex) return NULL;
  for (size_t g = 0; g < r->tab.ngroups; g++) {
    if (r->gcfg[g] != (size_t)r->ref) continue;
    rep_expert *e = &ex[*n];
    if (!fp8_expert_of(r->tab.groups[g].tensor, &e->expert, e->group, sizeof e->group)) continue;
    e->g = g;
    ex_steps(r, e);
    e->tokens = tokens_of(r, r->tab.groups[g].tensor);
    (*n)++;
  }
  qsort(ex, *n, sizeof *ex, cmp_ex_group);
  return ex;
}

static fp8_role ex_role(const rep_t *r, const rep_expert *e) { return r->tab.groups[e->g].role; }

static const char *pct(double num, double den, char *buf, size_t n) {
  if (!(den > 0)) snprintf(buf, n, "-");
  else snprintf(buf, n, "%.3g%%", 100.0 * num / den);
  return buf;
}

/* Bins of the share of steps an expert ran. */
#define NBINS 4
static const double k_bin_hi[NBINS] = {0.25, 0.5, 0.9, 1.0 + 1e-9};
static const char *const k_bin_name[NBINS] = {"under 25%", "25-50%", "50-90%", "90% or more"};

static int bin_of(const rep_expert *e) {
  double share = e->total ? (double)e->ran / (double)e->total : 0.0;
  int b = 0;
  while (b < NBINS - 1 && share >= k_bin_hi[b]) b++;
  return b;
}

static int cmp_tokens(const void *a, const void *b) {
  const rep_expert *x = *(const rep_expert *const *)a, *y = *(const rep_expert *const *)b;
  if (x->tokens != y->tokens) return x->tokens < y->tokens ? -1 : 1;
  return x->g < y->g ? -1 : x->g > y->g;
}

/* With experts.csv: the experts' activation and gradient tensors in four quarters by their
 * GEMM's tokens per step run (fewest first), each quarter's clipped share. */
static void add_tokens(const rep_t *r, fp8_doc *d, const rep_expert *ex, size_t n) {
  const rep_expert **by = malloc((n ? n : 1) * sizeof *by);
  if (!by) return;
  size_t m = 0;
  for (size_t i = 0; i < n; i++)
    if (ex_role(r, &ex[i]) != FP8_ROLE_WEIGHT && !isnan(ex[i].tokens)) by[m++] = &ex[i];
  if (m >= 4) {
    qsort(by, m, sizeof *by, cmp_tokens);
    char sizes[48];
    if (m % 4) snprintf(sizes, sizeof sizes, "%zu or %zu", m / 4, m / 4 + 1);
    else snprintf(sizes, sizeof sizes, "%zu", m / 4);
    fp8_doc_markdownf(d, "By the tokens routed to the expert (experts.csv: its GEMM's tokens per "
                      "%s it ran), the same tensors in four quarters of %s, fewest tokens "
                      "first (steps run: warm-up left out):", rep_unit(r, 0), sizes);
    const char *cols[] = {"tokens per step run", "tensors", "steps run", "clipped steps",
                          "clipped share"};
    fp8_doc_table_begin(d, 5, cols, "lrrrr");
    for (size_t q = 0; q < 4; q++) {
      size_t lo = q * m / 4, hi = (q + 1) * m / 4;
      int64_t ran = 0, clip = 0;
      for (size_t i = lo; i < hi; i++) {
        ran += by[i]->ran_nw;
        clip += by[i]->clip;
      }
      char tk[64], t[24], rs[32], cs[48], sh[32];
      snprintf(tk, sizeof tk, "%.1f to %.1f", by[lo]->tokens, by[hi - 1]->tokens);
      snprintf(t, sizeof t, "%zu", hi - lo);
      snprintf(rs, sizeof rs, "%lld", (long long)ran);
      snprintf(cs, sizeof cs, "%lld", (long long)clip);
      pct((double)clip, (double)ran, sh, sizeof sh);
      const char *row[] = {tk, t, rs, cs, sh};
      fp8_doc_table_row(d, row);
    }
  }
  free(by);
}

static void add_routing(const rep_t *r, fp8_doc *d, const rep_expert *ex, size_t n) {
  int64_t tensors[NBINS] = {0}, ran[NBINS] = {0}, clip[NBINS] = {0}, total[NBINS] = {0};
  int64_t ran_all[NBINS] = {0};
  int64_t gap = 0, gap_clip = 0, run_nw = 0, run_clip = 0;
  for (size_t i = 0; i < n; i++) {
    const rep_expert *e = &ex[i];
    if (ex_role(r, e) == FP8_ROLE_WEIGHT) continue; /* weights are quantized every step */
    int b = bin_of(e);
    tensors[b]++;
    ran[b] += e->ran_nw;
    ran_all[b] += e->ran;
    total[b] += e->total;
    clip[b] += e->clip;
    gap += e->gap_steps;
    gap_clip += e->gap_clip;
    run_nw += e->ran_nw;
    run_clip += e->clip;
  }
  const cfg_t *c = &r->cfgs[r->ref];
  int32_t L = c->key.history_len;
  fp8_doc_heading(d, 3, "How often an expert runs, and how often it clips");
  fp8_doc_markdownf(d,
                    "An expert's delayed history holds the amaxes of the %s it ran: a step it did "
                    "not run rolls nothing in and keeps its scale (TransformerEngine's fused "
                    "update). So for an expert that runs on a share p of the %s, a history of "
                    "%d amaxes spans about %d/p %s of training, and its scale comes from amaxes "
                    "taken on few tokens. Activation and gradient tensors of the experts, by the "
                    "share of %s they ran (%s, %s clipped: its largest element past the rounding "
                    "of the FP8 max; warm-up left out):",
                    rep_unit(r, 1), rep_unit(r, 1), L, L, rep_unit(r, 1), rep_unit(r, 1),
                    c->dlabel, rep_unit(r, 1));
  const char *cols[] = {"ran on", "tensors", "steps run", "clipped steps", "clipped share",
                        "history span (steps)"};
  fp8_doc_table_begin(d, 6, cols, "lrrrrr");
  for (int b = 0; b < NBINS; b++) {
    if (!tensors[b]) continue;
    char t[32], rs[64], cs[32], sh[32], span[48];
    snprintf(t, sizeof t, "%lld", (long long)tensors[b]);
    snprintf(rs, sizeof rs, "%lld of %lld", (long long)ran_all[b], (long long)total[b]);
    snprintf(cs, sizeof cs, "%lld of %lld", (long long)clip[b], (long long)ran[b]);
    pct((double)clip[b], (double)ran[b], sh, sizeof sh);
    if (ran_all[b] > 0)
      snprintf(span, sizeof span, "%.0f", (double)L * (double)total[b] / (double)ran_all[b]);
    else
      snprintf(span, sizeof span, "-");
    const char *row[] = {k_bin_name[b], t, rs, cs, sh, span};
    fp8_doc_table_row(d, row);
  }
  add_tokens(r, d, ex, n);
  char a[32], b2[32];
  if (gap > 0)
    fp8_doc_markdownf(d,
                      "The first %s an expert ran after one or more it did not: %lld, of which "
                      "%lld clipped (%s), against %s over all %lld %s the experts ran.",
                      rep_unit(r, 0), (long long)gap, (long long)gap_clip,
                      pct((double)gap_clip, (double)gap, a, sizeof a),
                      pct((double)run_clip, (double)run_nw, b2, sizeof b2), (long long)run_nw,
                      rep_unit(r, 1));
}

/* One expert group's aggregate (its experts are ex[lo, hi)). */
static void group_row(fp8_doc *d, const rep_expert *ex, size_t lo, size_t hi) {
  int64_t total = 0, ran = 0, clip = 0, ran_nw = 0, clipping = 0;
  size_t worst = lo;
  for (size_t i = lo; i < hi; i++) {
    total += ex[i].total;
    ran += ex[i].ran;
    clip += ex[i].clip;
    ran_nw += ex[i].ran_nw;
    clipping += ex[i].clip > 0;
    if (cmp_ex_worst(&ex[i], &ex[worst]) < 0) worst = i;
  }
  char ne[24], rs[48], cs[48], ce[32], w[64], a[32];
  snprintf(ne, sizeof ne, "%zu", hi - lo);
  snprintf(rs, sizeof rs, "%s", pct((double)ran, (double)total, a, sizeof a));
  snprintf(cs, sizeof cs, "%lld of %lld", (long long)clip, (long long)ran_nw);
  snprintf(ce, sizeof ce, "%lld", (long long)clipping);
  if (ex[worst].clip > 0)
    snprintf(w, sizeof w, "%d (%lld, %+.2f binades)", ex[worst].expert, (long long)ex[worst].clip,
             ex[worst].overshoot);
  else
    snprintf(w, sizeof w, "-");
  char gname[REP_EXPERT_GROUP_CAP + 4];
  snprintf(gname, sizeof gname, "`%s`", ex[lo].group);
  const char *row[] = {gname, ne, rs, cs, ce, w};
  fp8_doc_table_row(d, row);
}

typedef struct {
  size_t lo, hi;
  int64_t clip;
} grp_t;

static int cmp_grp(const void *a, const void *b) {
  const grp_t *x = a, *y = b;
  if (x->clip != y->clip) return x->clip < y->clip ? 1 : -1;
  return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static int cmp_name(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The recipe for each expert group that the model setting does not fit in every expert: the
 * largest of its experts' remedies (a GroupedLinear takes one recipe for all its experts). */
static void add_group_advice(const rep_t *r, fp8_doc *d, const rep_expert *ex, const grp_t *gs,
                             size_t ng) {
  const fp8_recommendation *x = NULL;
  for (size_t i = 0; i < r->rec.nrecs; i++)
    if (r->rec.recs[i].scope == FP8_REC_MODEL) x = &r->rec.recs[i];
  const char *setting = NULL;
  int delayed = x && x->key.kind == FP8_KIND_DELAYED && x->meets_budget && x->key.recipe;
  for (size_t c = 0; delayed && c < r->ncfg && !setting; c++)
    if (!r->cfgs[c].mixed && rep_cfg_matches(&r->cfgs[c], &x->key)) setting = r->cfgs[c].label;
  if (!delayed || !setting) {
    fp8_doc_markdown(d, "No delayed setting of this run fits the budgets for the whole model "
                        "(the answer above says what does): no per-group recipe on top of it.");
    return;
  }
  /* the misfits sorted, looked up by bisection (tens of thousands of experts at a model's size) */
  const char **mis = NULL;
  if (x->nmisfits && (mis = malloc(x->nmisfits * sizeof *mis)) != NULL) {
    memcpy(mis, x->misfits, x->nmisfits * sizeof *mis);
    qsort(mis, x->nmisfits, sizeof *mis, cmp_name);
  }
  size_t shown = 0, need = 0;
  for (size_t k = 0; k < ng; k++) {
    /* the most severe remedy of its experts: a margin (larger: worse), then current scaling,
     * then BF16; -3: the setting fits every expert */
    int32_t worst = -3;
    int64_t worst_sev = -1;
    for (size_t i = gs[k].lo; i < gs[k].hi; i++) {
      const char *t = r->tab.groups[ex[i].g].tensor;
      if (!mis || !bsearch(&t, mis, x->nmisfits, sizeof *mis, cmp_name)) continue;
      int32_t rem = rep_remedy(r, x, t);
      int64_t sev = rem >= 0 ? rem : rem == REP_REMEDY_CURRENT ? 1000 : 2000;
      if (sev > worst_sev) {
        worst_sev = sev;
        worst = rem;
      }
    }
    if (worst == -3) continue;
    if (!need++) {
      fp8_doc_markdownf(d, "TransformerEngine's GroupedLinear takes one recipe for all its "
                        "experts, so the advice is per expert group: the model's setting (%s) "
                        "does not fit every expert of these groups; what fits all of them:",
                        setting);
      const char *cols[] = {"expert group", "recipe for the group"};
      fp8_doc_table_begin(d, 2, cols, "ll");
    }
    if (shown++ >= MOE_TABLE) continue;
    char what[96], gname[REP_EXPERT_GROUP_CAP + 4];
    if (worst >= 0) snprintf(what, sizeof what, "margin %d", worst);
    else snprintf(what, sizeof what, "%s", worst == REP_REMEDY_BF16 ? "BF16" : "current scaling");
    snprintf(gname, sizeof gname, "`%s`", ex[gs[k].lo].group);
    const char *row[] = {gname, what};
    fp8_doc_table_row(d, row);
  }
  if (shown > MOE_TABLE)
    fp8_doc_markdownf(d, "(%zu more groups: recommendations.csv lists every tensor.)",
                      shown - MOE_TABLE);
  free(mis);
  if (!need)
    fp8_doc_markdownf(d, "The model's setting (%s, the answer above) fits every expert: one "
                      "recipe for every GroupedLinear.", setting);
}

int rep_moe_load(rep_t *r) {
  free(r->experts);
  r->experts = experts(r, &r->nexperts);
  return r->experts || r->nexperts == 0 ? FP8_OK : FP8_ENOMEM;
}

void rep_add_moe(const rep_t *r, fp8_doc *d) {
  size_t n = r->nexperts;
  const rep_expert *ex = r->experts;
  if (!n) return;
  fp8_doc_heading(d, 2, "Mixture-of-Experts");
  /* groups, experts per group, layers */
  size_t ng = 0;
  for (size_t i = 0; i < n; i++) ng += i == 0 || strcmp(ex[i].group, ex[i - 1].group) != 0;
  grp_t *gs = calloc(ng ? ng : 1, sizeof *gs);
  if (!gs) return;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (i == 0 || strcmp(ex[i].group, ex[i - 1].group) != 0) gs[k++] = (grp_t){i, i, 0};
    gs[k - 1].hi = i + 1;
    gs[k - 1].clip += ex[i].clip;
  }
  int64_t total = 0, ran = 0, ntok = 0;
  size_t maxe = 0;
  for (size_t i = 0; i < n; i++) {
    if ((size_t)ex[i].expert + 1 > maxe) maxe = (size_t)ex[i].expert + 1;
    if (ex_role(r, &ex[i]) != FP8_ROLE_INPUT) continue;
    total += ex[i].total;
    ran += ex[i].ran;
    ntok++;
  }
  char a[32];
  fp8_doc_markdownf(d,
                    "%zu expert tensors in %zu expert groups (a group: one GEMM of one layer's "
                    "experts, `...experts.*...`, as one TransformerEngine GroupedLinear; up to %zu "
                    "experts), under %s. Of the %lld expert-%s of their inputs (%lld expert "
                    "inputs), %lld did not run (%s): no token was routed to the expert, its amax "
                    "is 0 and its delayed history and scale stay as they were (TransformerEngine's "
                    "fused update; docs/semantics.md); its weight is quantized at every %s all "
                    "the same.",
                    n, ng, maxe, r->cfgs[r->ref].dlabel, (long long)total, rep_unit(r, 1),
                    (long long)ntok, (long long)(total - ran),
                    pct((double)(total - ran), (double)total, a, sizeof a), rep_unit(r, 0));
  if (r->nrouter_tensors && r->router_group)
    fp8_doc_markdownf(d, "%zu router tensors (`...gate` or `...router` beside `...experts`) are "
                      "left out of the FP8 advice: keep them in BF16, as Megatron-LM keeps the "
                      "router out of FP8 (`router_dtype` fp32); `[analysis] routers = fp8` "
                      "advises them as any tensor.", r->nrouter_tensors);
  else if (r->nrouter_tensors)
    fp8_doc_markdownf(d, "%zu router tensors (`...gate` or `...router` beside `...experts`) are "
                      "in the FP8 advice (`[analysis] routers = fp8`).", r->nrouter_tensors);
  /* groups, worst first */
  qsort(gs, ng, sizeof *gs, cmp_grp);
  fp8_doc_heading(d, 3, "Expert groups");
  const char *cols[] = {"expert group", "experts", "ran", "clipped steps", "experts that clipped",
                        "worst expert (clipped steps, overshoot)"};
  fp8_doc_table_begin(d, 6, cols, "lrrrrl");
  for (size_t i = 0; i < ng && i < MOE_TABLE; i++) group_row(d, ex, gs[i].lo, gs[i].hi);
  if (ng > MOE_TABLE)
    fp8_doc_markdownf(d, "(%zu more groups, none with more clipped steps than the last shown.)",
                      ng - MOE_TABLE);
  /* the worst expert tensors */
  rep_expert *w = malloc(n * sizeof *w);
  if (w) {
    memcpy(w, ex, n * sizeof *w);
    qsort(w, n, sizeof *w, cmp_ex_worst);
    size_t nw = 0;
    while (nw < n && nw < MOE_WORST && w[nw].clip > 0) nw++;
    if (nw) {
      fp8_doc_heading(d, 3, "The worst experts");
      const char *c2[] = {"tensor", "expert", "ran", "clipped steps", "largest overshoot"};
      fp8_doc_table_begin(d, 5, c2, "lrrrr");
      for (size_t i = 0; i < nw; i++) {
        char t[FP8_NAME_MAX + 8], e[16], rs[48], cs[48], ov[32], b[32];
        snprintf(t, sizeof t, "`%s`", r->tab.groups[w[i].g].tensor);
        snprintf(e, sizeof e, "%d", w[i].expert);
        snprintf(rs, sizeof rs, "%lld of %lld (%s)", (long long)w[i].ran, (long long)w[i].total,
                 pct((double)w[i].ran, (double)w[i].total, b, sizeof b));
        snprintf(cs, sizeof cs, "%lld of %lld", (long long)w[i].clip, (long long)w[i].ran_nw);
        snprintf(ov, sizeof ov, "%+.2f binades", w[i].overshoot);
        const char *row[] = {t, e, rs, cs, ov};
        fp8_doc_table_row(d, row);
      }
    } else {
      fp8_doc_markdown(d, "No expert tensor's largest element clipped.");
    }
    free(w);
  }
  add_routing(r, d, ex, n);
  fp8_doc_heading(d, 3, "A recipe per expert group");
  add_group_advice(r, d, ex, gs, ng);
  free(gs);
}
