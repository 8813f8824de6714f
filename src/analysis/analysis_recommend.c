/* analysis_recommend.c: recommendations from the per-group statistics (analysis.c): per tensor,
 * the smallest margin that fits both budgets at each history length and the best of those by
 * the 5th-percentile SNR (else current scaling), and one global delayed setting per role;
 * recommendations.csv. The choice rules are documented in analysis.h. */
#include "analysis.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "analysis_internal.h"
#include "outfile.h"

const char *fp8_rec_role_name(fp8_role r) {
  return r == FP8_ROLE_UNKNOWN ? "(no role)" : fp8_role_name(r);
}

/* A malloc'ed printf; NULL when out of memory. */
static char *fmt_alloc(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) return NULL;
  char *s = malloc((size_t)n + 1);
  if (!s) return NULL;
  va_start(ap, fmt);
  vsnprintf(s, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return s;
}

/* -1 / 0 / 1: a better than b / same / worse, by a value where larger is better and nan ranks
 * below every number; differences within tol are ties. */
static int cmp_larger_tol(double a, double b, double tol) {
  if (isnan(a) || isnan(b)) return isnan(a) == isnan(b) ? 0 : (isnan(a) ? 1 : -1);
  if (fabs(a - b) <= tol) return 0;
  return a > b ? -1 : 1;
}

static int cmp_larger(double a, double b) { return cmp_larger_tol(a, b, 0.0); }

/* The same where smaller is better. */
static int cmp_smaller(double a, double b) {
  if (isnan(a) || isnan(b)) return isnan(a) == isnan(b) ? 0 : (isnan(a) ? 1 : -1);
  return a < b ? -1 : a > b;
}

/* The delayed tie-breaks: smaller history_len, smaller margin, max before most_recent. */
static int cmp_delayed_params(const fp8_steps_group *a, const fp8_steps_group *b) {
  if (a->key.history_len != b->key.history_len)
    return a->key.history_len < b->key.history_len ? -1 : 1;
  if (a->key.margin != b->key.margin) return a->key.margin < b->key.margin ? -1 : 1;
  if (a->key.amax_compute != b->key.amax_compute)
    return a->key.amax_compute == FP8_AMAX_MAX ? -1 : 1;
  return 0;
}

int fp8_budgets_fit(const fp8_budgets *b, const fp8_group_stats *s) {
  if (b->stream_only) return s->clip_step_rate <= b->step; /* no snapshot: no values to count */
  return s->clipped_rate <= b->value && s->clip_step_rate <= b->step && /* false for nan */
         (!b->has_flush || s->underflow_rate <= b->flush);
}

/* "; p5 SNR 12.34 dB" (what), or nothing in a run without snapshots (no SNR to quote). */
static const char *p5_words(const fp8_budgets *b, const char *what, double v, char *buf,
                            size_t n) {
  if (b->stream_only) return "";
  snprintf(buf, n, "; %s %.2f dB", what, v);
  return buf;
}

static int fits(const fp8_group_stats *s, const fp8_budgets *b) { return fp8_budgets_fit(b, s); }

/* Same (recipe, format, history_len, amax_compute): configurations that differ in margin only.
 * nofmt: the format is not compared (the model scope: one hybrid section's configuration spans
 * E4M3 and E5M2 tensors). */
static int same_line_f(const fp8_steps_group *a, const fp8_steps_group *b, int nofmt) {
  return fp8_config_key_equal(&a->key, &b->key, FP8_KEY_IGNORE_KIND | FP8_KEY_IGNORE_MARGIN |
                                          (nofmt ? FP8_KEY_IGNORE_FORMAT : 0));
}

static int same_line(const fp8_steps_group *a, const fp8_steps_group *b) {
  return same_line_f(a, b, 0);
}

static void set_config(fp8_recommendation *r, const fp8_steps_group *g) {
  r->in_run = 1;
  r->key = g->key;
}

static void set_values(fp8_recommendation *r, const fp8_group_stats *s) {
  r->stats = s;
  r->overflow_rate = s->overflow_rate;
  r->snr_median = s->snr_median;
  r->clipped_rate = s->clipped_rate;
  r->clip_step_rate = s->clip_step_rate;
  r->snr_p5 = s->snr_p5;
  r->underflow_rate = s->underflow_rate;
}

static const char *config_words(const fp8_steps_group *g, char *buf, size_t len) {
  return fp8_config_key_label(&g->key, FP8_KEY_LABEL_WORDS, buf, len);
}

/* ------------------------------------------------------------------ tensor scope */

/* The ranking of two fitting candidates; *why names the criterion that decided. */
static int cmp_candidate(const fp8_group_stats *a, const fp8_group_stats *b, const char **why) {
  int c = cmp_larger_tol(a->snr_p5, b->snr_p5, FP8_ANALYSIS_SNR_TIE_DB);
  if (c) return *why = "p5 SNR", c;
  c = cmp_smaller(a->underflow_rate, b->underflow_rate);
  if (c) return *why = "underflow rate", c;
  *why = "parameters";
  c = cmp_delayed_params(a->group, b->group);
  return c ? c : (a < b ? -1 : a > b);
}

/* 1 when s fits and no configuration of the tensor (stats[lo..hi)) with a smaller margin on
 * the same line fits: the smallest margin that fits at its history length. */
static int smallest_fitting(const fp8_group_stats *st, size_t lo, size_t hi, size_t i,
                            const fp8_budgets *b) {
  const fp8_steps_group *g = st[i].group;
  if (g->key.kind != FP8_KIND_DELAYED || !fits(&st[i], b)) return 0;
  for (size_t k = lo; k < hi; k++) {
    const fp8_steps_group *h = st[k].group;
    if (k != i && h->key.kind == FP8_KIND_DELAYED && same_line(g, h) &&
        h->key.margin < g->key.margin && fits(&st[k], b))
      return 0;
  }
  return 1;
}

static int recommend_tensor(const fp8_group_stats *st, size_t lo, size_t hi, const fp8_budgets *b,
                            fp8_recommendation *r) {
  const fp8_group_stats *best = NULL, *second = NULL, *cur = NULL, *keep = NULL;
  int64_t ndelayed = 0, nfit = 0;
  double min_clip = NAN;
  for (size_t i = lo; i < hi; i++) {
    const fp8_group_stats *s = &st[i];
    const fp8_steps_group *g = s->group;
    if (g->key.kind == FP8_KIND_BF16 && !keep) keep = s;
    if (g->key.kind == FP8_KIND_CURRENT) {
      if (!cur || cmp_larger(s->snr_p5, cur->snr_p5) < 0) cur = s;
      continue;
    }
    if (g->key.kind != FP8_KIND_DELAYED) continue;
    ndelayed++;
    if (!isnan(s->clipped_rate) && !(s->clipped_rate >= min_clip)) min_clip = s->clipped_rate;
    nfit += fits(s, b);
    if (!smallest_fitting(st, lo, hi, i, b)) continue;
    const char *why;
    if (!best || cmp_candidate(s, best, &why) < 0) {
      second = best;
      best = s;
    } else if (!second || cmp_candidate(s, second, &why) < 0) {
      second = s;
    }
  }
  const fp8_steps_group *g0 = st[lo].group;
  r->scope = FP8_REC_TENSOR;
  r->name = g0->tensor;
  r->role = g0->role;
  r->covers = nfit;
  r->of = ndelayed;
  r->best_delayed_overflow = min_clip;
  r->overflow_rate = r->snr_median = r->clipped_rate = r->clip_step_rate = NAN;
  r->snr_p5 = r->underflow_rate = NAN;
  char cfg[200];
  if (best) {
    set_config(r, best->group);
    set_values(r, best);
    r->meets_budget = 1;
    r->decided_by = "only fit";
    if (second) (void)cmp_candidate(best, second, &r->decided_by);
    if (b->stream_only)
      r->note = fmt_alloc("%s: clipped steps %.3g (budget %g; no snapshots: the step budget "
                          "alone); %lld of %lld delayed configurations fit; decided by %s",
                          config_words(best->group, cfg, sizeof cfg), best->clip_step_rate, b->step,
                          (long long)nfit, (long long)ndelayed, r->decided_by);
    else
      r->note = fmt_alloc("%s: clipped rate %.3g (budget %g); clipped steps %.3g (budget %g); p5 SNR "
                          "%.2f dB; %lld of %lld delayed configurations fit; decided by %s",
                          config_words(best->group, cfg, sizeof cfg), best->clipped_rate, b->value,
                          best->clip_step_rate, b->step, best->snr_p5, (long long)nfit,
                          (long long)ndelayed, r->decided_by);
    return r->note ? FP8_OK : FP8_ENOMEM;
  }
  char why[200];
  r->decided_by = "fallback";
  if (ndelayed == 0) snprintf(why, sizeof why, "no delayed configuration in this run");
  else if (b->stream_only)
    snprintf(why, sizeof why, "no delayed configuration fits the step budget %g (no snapshots: "
             "the step budget alone)", b->step);
  else if (isnan(min_clip))
    snprintf(why, sizeof why, "no delayed configuration fits the budgets (no finite element "
             "outside the warm-up to measure)");
  else
    snprintf(why, sizeof why, "no delayed configuration fits the budgets %g of the values and %g "
             "of the steps (the lowest delayed clipped rate is %.3g)", b->value, b->step, min_clip);
  r->key.kind = FP8_KIND_CURRENT;
  /* the flush budget is the one current scaling can miss (it never clips): then the tensor
   * stays in BF16 where the sweep has a bf16 configuration for it (it fits every budget) */
  int cur_misses = cur && b->has_flush && !b->stream_only && !fits(cur, b);
  if (cur_misses && keep) {
    set_config(r, keep->group);
    set_values(r, keep);
    r->note = fmt_alloc("%s; current scaling misses the flush budget too (%s: %.3g of the "
                        "values flushed to zero, budget %g): keep it in BF16 (%s)", why,
                        config_words(cur->group, cfg, sizeof cfg), cur->underflow_rate, b->flush,
                        keep->group->key.recipe);
  } else if (cur) {
    set_config(r, cur->group);
    set_values(r, cur);
    char p5[64];
    r->note = fmt_alloc("%s: use %s%s%s", why, config_words(cur->group, cfg, sizeof cfg),
                        p5_words(b, "p5 SNR", cur->snr_p5, p5, sizeof p5),
                        cur_misses ? "; it misses the flush budget too: a bf16 section in the "
                                     "sweep would let the advice keep it out of FP8" : "");
  } else if (keep && b->has_flush && !b->stream_only) {
    set_config(r, keep->group);
    set_values(r, keep);
    r->note = fmt_alloc("%s; no current scaling in this run: keep it in BF16 (%s)", why,
                        keep->group->key.recipe);
  } else {
    r->note = fmt_alloc("%s: use current scaling (%s)", why,
                        b->stream_only ? "no stream rows: its scale is each step's own amax, "
                                         "its largest element never clips"
                                       : "not in this run");
  }
  return r->note ? FP8_OK : FP8_ENOMEM;
}

/* ------------------------------------------------------------------ role scope */

/* A role's groups sorted by setting (recipe, format, history_len, margin, amax_compute). */
typedef struct {
  const fp8_group_stats *s;
  size_t gi; /* group index: first appearance */
} gref;

static int same_setting(const fp8_steps_group *a, const fp8_steps_group *b, int nofmt) {
  return fp8_config_key_equal(&a->key, &b->key,
                              FP8_KEY_IGNORE_KIND | (nofmt ? FP8_KEY_IGNORE_FORMAT : 0));
}

/* By key (recipe, format, history_len, amax_compute, then margin: a line's margins adjacent and
 * ascending, best_setting), then first appearance. */
static int cmp_gref_key(const void *x, const void *y, int nofmt) {
  const fp8_steps_group *a = ((const gref *)x)->s->group, *b = ((const gref *)y)->s->group;
  int c = fp8_config_key_cmp(&a->key, &b->key,
                             FP8_KEY_IGNORE_KIND | (nofmt ? FP8_KEY_IGNORE_FORMAT : 0));
  if (c) return c;
  size_t i = ((const gref *)x)->gi, j = ((const gref *)y)->gi;
  return i < j ? -1 : i > j;
}

static int cmp_gref(const void *x, const void *y) { return cmp_gref_key(x, y, 0); }
static int cmp_gref_nofmt(const void *x, const void *y) { return cmp_gref_key(x, y, 1); }

/* Aggregate of one setting over a role's tensors. */
typedef struct {
  const fp8_steps_group *g; /* a representative (the first) */
  size_t first;             /* first group index */
  int64_t covers, ran;
  double mean_snr, mean_p5, mean_under, worst_ovf, worst_clip, worst_steps;
} setting;

/* mean of the non-nan values added */
typedef struct { double sum; int64_t n; } mean_acc;
static void mean_add(mean_acc *m, double v) {
  if (!isnan(v)) m->sum += v, m->n++;
}
static double mean_of(const mean_acc *m) { return m->n ? m->sum / (double)m->n : NAN; }
static void worst_add(double *w, double v) {
  if (!isnan(v) && !(v <= *w)) *w = v;
}

static setting aggregate(const gref *refs, size_t lo, size_t hi, const fp8_budgets *b) {
  setting st = {refs[lo].s->group, refs[lo].gi, 0, 0, NAN, NAN, NAN, NAN, NAN, NAN};
  mean_acc snr = {0, 0}, p5 = {0, 0}, under = {0, 0};
  for (size_t k = lo; k < hi; k++) {
    const fp8_group_stats *s = refs[k].s;
    if (refs[k].gi < st.first) st.first = refs[k].gi;
    st.ran++;
    st.covers += fits(s, b);
    mean_add(&snr, s->snr_median);
    mean_add(&p5, s->snr_p5);
    mean_add(&under, s->underflow_rate);
    worst_add(&st.worst_ovf, s->overflow_rate);
    worst_add(&st.worst_clip, s->clipped_rate);
    worst_add(&st.worst_steps, s->clip_step_rate);
  }
  st.mean_snr = mean_of(&snr);
  st.mean_p5 = mean_of(&p5);
  st.mean_under = mean_of(&under);
  return st;
}

/* -1 when a is the better setting (ties as analysis.h says); *why: the deciding criterion. */
static int cmp_setting(const setting *a, const setting *b, int by_covers, const char **why) {
  int64_t ka = by_covers ? a->covers : a->ran, kb = by_covers ? b->covers : b->ran;
  if (ka != kb) return *why = "fits", ka > kb ? -1 : 1;
  int c = cmp_larger_tol(a->mean_p5, b->mean_p5, FP8_ANALYSIS_SNR_TIE_DB);
  if (c) return *why = "p5 SNR", c;
  c = cmp_smaller(a->mean_under, b->mean_under);
  if (c) return *why = "underflow rate", c;
  *why = "parameters";
  if (a->g->key.kind == FP8_KIND_DELAYED) {
    c = cmp_delayed_params(a->g, b->g);
    if (c) return c;
  }
  return a->first < b->first ? -1 : a->first > b->first;
}

/* The best setting among refs[0..n) (sorted by cmp_gref, so the margins of one line are
 * adjacent and ascending); delayed: only each line's smallest margin with the most covers
 * competes. found = 0 when n = 0; *why as cmp_setting against the runner-up ("only fit"). */
static setting best_setting(const gref *refs, size_t n, const fp8_budgets *b, int by_covers,
                            int nofmt, int64_t need, int *found, const char **why) {
  setting best = {0}, second = {0}, line_best = {0};
  int have_second = 0, have_line = 0;
  *found = 0;
  *why = "only fit";
  const char *w;
  for (size_t lo = 0; lo <= n;) {
    size_t hi = lo + 1;
    while (hi < n && same_setting(refs[hi].s->group, refs[lo].s->group, nofmt)) hi++;
    setting s = {0};
    if (lo < n) s = aggregate(refs, lo, hi, b);
    /* a setting for every tensor of the scope must have run on every one of them: a section
     * with `tensors` (a partial sweep, one part of a mixed label) is not a candidate */
    if (lo < n && by_covers && s.ran < need) {
      lo = hi;
      continue;
    }
    /* the end of a line: its candidate competes */
    int line_ends = have_line && (lo == n || !by_covers || !same_line_f(s.g, line_best.g, nofmt));
    if (line_ends) {
      if (!*found || cmp_setting(&line_best, &best, by_covers, &w) < 0) {
        second = best;
        have_second = *found;
        best = line_best;
      } else if (!have_second || cmp_setting(&line_best, &second, by_covers, &w) < 0) {
        second = line_best;
        have_second = 1;
      }
      *found = 1;
      have_line = 0;
    }
    if (lo == n) break;
    if (!have_line || s.covers > line_best.covers) line_best = s; /* ascending margins */
    have_line = 1;
    lo = hi;
  }
  if (*found && have_second) (void)cmp_setting(&best, &second, by_covers, why);
  return best;
}

/* The role's tensors that setting d does not fit, as r->misfits and a "; " list (malloc'ed). */
static char *misfit_list(const fp8_analysis *a, int role, const setting *d, const fp8_budgets *b,
                         fp8_recommendation *r, int64_t ntensors, int nofmt) {
  r->misfits = malloc((size_t)ntensors * sizeof *r->misfits);
  if (!r->misfits) return NULL;
  size_t len = 1;
  for (size_t lo = 0; lo < a->nstats;) { /* one tensor's groups are contiguous */
    const char *name = a->stats[lo].group->tensor;
    size_t hi = lo;
    int fit = 0;
    for (; hi < a->nstats && a->stats[hi].group->tensor == name; hi++) {
      const fp8_group_stats *s = &a->stats[hi];
      if (s->group->key.kind == FP8_KIND_DELAYED && same_setting(s->group, d->g, nofmt) &&
          fits(s, b))
        fit = 1;
    }
    if ((role < 0 || (int)a->stats[lo].group->role == role) && !fit &&
        !(a->left_out && a->left_out[lo])) {
      r->misfits[r->nmisfits++] = name;
      len += strlen(name) + 2;
    }
    lo = hi;
  }
  char *list = malloc(len);
  if (!list) return NULL;
  list[0] = 0;
  for (size_t k = 0; k < r->nmisfits; k++) {
    if (k) strcat(list, "; ");
    strcat(list, r->misfits[k]);
  }
  return list;
}

static void set_setting_values(fp8_recommendation *r, const setting *d) {
  r->overflow_rate = d->worst_ovf;
  r->snr_median = d->mean_snr;
  r->clipped_rate = d->worst_clip;
  r->clip_step_rate = d->worst_steps;
  r->snr_p5 = d->mean_p5;
  r->underflow_rate = d->mean_under;
}

/* 1 when a tensor has two delayed groups of one (recipe, history_len, margin, amax_compute):
 * a section with a format list; the model scope then keeps the format in its key. */
static int format_lists(const fp8_analysis *a) {
  for (size_t i = 0; i < a->nstats; i++)
    for (size_t k = i + 1; k < a->nstats && a->stats[k].group->tensor == a->stats[i].group->tensor; k++) {
      const fp8_steps_group *g = a->stats[i].group, *h = a->stats[k].group;
      if (g->key.kind == FP8_KIND_DELAYED && h->key.kind == FP8_KIND_DELAYED &&
          same_setting(g, h, 1))
        return 1;
    }
  return 0;
}

/* role >= 0: one role's tensors (role scope); role < 0: every tensor (the model scope, one
 * setting for the whole model as a TransformerEngine DelayedScaling recipe takes it). */
static int recommend_role(const fp8_analysis *a, int role, const fp8_budgets *b, gref *dl,
                          gref *cl, fp8_recommendation *r, int *any) {
  size_t nd = 0, nc = 0;
  int64_t ntensors = 0;
  const char *last = NULL;
  int nofmt = role < 0 && !format_lists(a);
  for (size_t i = 0; i < a->nstats; i++) {
    const fp8_steps_group *g = a->stats[i].group;
    if (role >= 0 && (int)g->role != role) continue;
    if (a->left_out && a->left_out[i]) continue;
    if (g->tensor != last) ntensors++; /* groups are sorted by tensor */
    last = g->tensor;
    if (g->key.kind == FP8_KIND_DELAYED) dl[nd++] = (gref){&a->stats[i], i};
    else if (g->key.kind == FP8_KIND_CURRENT) cl[nc++] = (gref){&a->stats[i], i};
  }
  *any = ntensors > 0;
  if (!ntensors) return FP8_OK;
  qsort(dl, nd, sizeof *dl, nofmt ? cmp_gref_nofmt : cmp_gref);
  qsort(cl, nc, sizeof *cl, nofmt ? cmp_gref_nofmt : cmp_gref);
  r->scope = role < 0 ? FP8_REC_MODEL : FP8_REC_ROLE;
  r->role = role < 0 ? FP8_ROLE_UNKNOWN : (fp8_role)role;
  r->name = role < 0 ? "all tensors" : fp8_rec_role_name((fp8_role)role);
  r->of = ntensors;
  r->overflow_rate = r->snr_median = r->best_delayed_overflow = NAN;
  r->clipped_rate = r->clip_step_rate = r->snr_p5 = r->underflow_rate = NAN;
  const char *rn = role < 0 ? "" : role == FP8_ROLE_UNKNOWN ? "role-less " : fp8_role_name((fp8_role)role);
  char rns[40];
  snprintf(rns, sizeof rns, "%s%s", rn, role >= 0 && role != FP8_ROLE_UNKNOWN ? " " : "");
  rn = rns;
  char cfg[200];
  int found;
  setting d = best_setting(dl, nd, b, 1, nofmt, ntensors, &found, &r->decided_by);
  if (found && d.covers > 0) {
    set_config(r, d.g);
    r->meets_budget = 1;
    r->covers = d.covers;
    set_setting_values(r, &d);
    char *list = misfit_list(a, role, &d, b, r, ntensors, nofmt);
    if (!list) return FP8_ENOMEM;
    char p5[64];
    const char *p5w = p5_words(b, "mean p5 SNR", d.mean_p5, p5, sizeof p5);
    if (r->nmisfits == 0)
      r->note = fmt_alloc("%s fits the budgets for all %lld %stensors%s; decided by %s",
                          config_words(d.g, cfg, sizeof cfg), (long long)ntensors, rn, p5w,
                          r->decided_by);
    else
      r->note = fmt_alloc("%s fits the budgets for %lld of %lld %stensors%s; decided by %s; does "
                          "not fit: %s", config_words(d.g, cfg, sizeof cfg), (long long)d.covers,
                          (long long)ntensors, rn, p5w, r->decided_by, list);
    free(list);
    return r->note ? FP8_OK : FP8_ENOMEM;
  }
  char why[200];
  if (nd == 0) snprintf(why, sizeof why, "no delayed configuration in this run for %stensors", rn);
  else
    snprintf(why, sizeof why, "no delayed configuration fits the budgets for any %stensor", rn);
  r->key.kind = FP8_KIND_CURRENT;
  const char *unused;
  setting c = best_setting(cl, nc, b, 0, nofmt, 0, &found, &unused);
  r->decided_by = "fallback";
  if (found) {
    set_config(r, c.g);
    r->covers = c.ran;
    set_setting_values(r, &c);
    char p5[64];
    r->note = fmt_alloc("%s: use %s (run for %lld of %lld tensors)%s", why,
                        config_words(c.g, cfg, sizeof cfg), (long long)c.ran, (long long)ntensors,
                        p5_words(b, "mean p5 SNR", c.mean_p5, p5, sizeof p5));
  } else {
    r->note = fmt_alloc("%s: use current scaling (%s)", why,
                        b->stream_only ? "no stream rows: its scale is each step's own amax, "
                                         "its largest element never clips"
                                       : "not in this run");
  }
  return r->note ? FP8_OK : FP8_ENOMEM;
}

/* ------------------------------------------------------------------ public */

int fp8_analysis_recommend(const fp8_analysis *a, const fp8_budgets *budgets,
                           fp8_recommendations *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  if (!a || !a->table || !budgets || !(budgets->value >= 0) || !(budgets->step >= 0)) {
    snprintf(err, errlen, "overflow_budget %g, step_budget %g: expected rates >= 0",
             budgets ? budgets->value : NAN, budgets ? budgets->step : NAN);
    return FP8_EINVAL;
  }
  const fp8_budgets *budget = budgets;
  const fp8_steps_table *t = a->table;
  out->overflow_budget = budgets->value;
  out->budgets = *budgets;
  int rc = FP8_OK;
  size_t cap = t->ntensors + (FP8_ROLE_UNKNOWN + 1) + 1;
  gref *dl = malloc((a->nstats ? a->nstats : 1) * sizeof *dl);
  gref *cl = malloc((a->nstats ? a->nstats : 1) * sizeof *cl);
  out->recs = calloc(cap, sizeof *out->recs);
  if (!dl || !cl || !out->recs) {
    rc = FP8_ENOMEM;
    goto done;
  }
  /* tensor scope: the groups of one tensor are contiguous (table order) */
  for (size_t lo = 0; lo < a->nstats;) {
    size_t hi = lo + 1;
    while (hi < a->nstats && a->stats[hi].group->tensor == a->stats[lo].group->tensor) hi++;
    rc = recommend_tensor(a->stats, lo, hi, budget, &out->recs[out->nrecs]);
    out->nrecs++;
    if (rc) goto done;
    lo = hi;
  }
  out->ntensor_recs = out->nrecs;
  for (int role = FP8_ROLE_INPUT; role <= FP8_ROLE_UNKNOWN; role++) {
    int any;
    rc = recommend_role(a, role, budget, dl, cl, &out->recs[out->nrecs], &any);
    if (any) out->nrecs++;
    if (rc) goto done;
  }
  if (out->nrecs > out->ntensor_recs) { /* the model scope: one setting for every tensor */
    int any;
    rc = recommend_role(a, -1, budget, dl, cl, &out->recs[out->nrecs], &any);
    if (any) out->nrecs++;
    if (rc) goto done;
  }
done:
  free(dl);
  free(cl);
  if (rc) {
    fp8_recommendations_free(out);
    snprintf(err, errlen, "%s: recommendations: out of memory", t->path ? t->path : "steps.csv");
  }
  return rc;
}

void fp8_recommendations_free(fp8_recommendations *r) {
  if (!r) return;
  for (size_t i = 0; i < r->nrecs; i++) {
    free(r->recs[i].note);
    free(r->recs[i].misfits);
  }
  free(r->recs);
  memset(r, 0, sizeof *r);
}

static const char *const RECOMMEND_COLS[FP8_RECOMMEND_COL_COUNT] = {
    "scope", "name", "recipe", "kind", "format", "history_len", "margin", "amax_compute",
    "overflow_rate", "snr_median", "covers", "of", "note", "clipped_rate", "clip_step_rate",
    "snr_p5", "underflow_rate", "decided_by"};

/* (fp8lab never reads it back: its one version is the current one) */
const fp8_schema fp8_schema_recommendations = {"recommendations.csv", RECOMMEND_COLS,
                                               FP8_RECOMMEND_COL_COUNT,
                                               {FP8_RECOMMEND_COL_COUNT, 0, 0, 0, 0}};

int fp8_recommend_write(const fp8_recommendations *r, const char *dir, char *err, size_t errlen) {
  fp8_outfile of;
  int rc = fp8_schema_open(&of, dir, &fp8_schema_recommendations, err, errlen);
  if (rc) return rc;
  FILE *fp = of.fp;
  for (size_t i = 0; i < r->nrecs; i++) {
    const fp8_recommendation *c = &r->recs[i];
    fputs(c->scope == FP8_REC_TENSOR ? "tensor," : c->scope == FP8_REC_ROLE ? "role," : "model,", fp);
    ana_put_text(fp, c->name);
    fputc(',', fp);
    if (c->in_run) ana_put_text(fp, c->key.recipe);
    fprintf(fp, ",%s,%s,", fp8_recipe_kind_name(c->key.kind),
            c->in_run ? fp8_kind_format_name(c->key.kind, c->key.format) : "");
    fp8_config_key_put_delayed_csv(fp, &c->key, c->in_run);
    if (c->in_run) {
      fp8_csv_put_num(fp, c->overflow_rate);
      fputc(',', fp);
      fp8_csv_put_num(fp, c->snr_median);
    } else fputc(',', fp);
    fprintf(fp, ",%lld,%lld,", (long long)c->covers, (long long)c->of);
    ana_put_text(fp, c->note);
    const double v[4] = {c->clipped_rate, c->clip_step_rate, c->snr_p5, c->underflow_rate};
    for (int k = 0; k < 4; k++) {
      fputc(',', fp);
      if (c->in_run) fp8_csv_put_num(fp, v[k]);
    }
    fprintf(fp, ",%s\n", c->decided_by ? c->decided_by : "");
  }
  return fp8_outfile_commit(&of, err, errlen);
}
