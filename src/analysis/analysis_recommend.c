/* analysis_recommend.c: recommendations from the per-group statistics (analysis.c): per tensor,
 * the delayed-scaling configuration with the best median SNR within an overflow budget (else
 * current scaling), and one global delayed setting per role; recommendations.csv. The choice
 * rules are documented in analysis.h. */
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
 * below every number. */
static int cmp_larger(double a, double b) {
  if (isnan(a) || isnan(b)) return isnan(a) == isnan(b) ? 0 : (isnan(a) ? 1 : -1);
  return a > b ? -1 : a < b;
}

/* The delayed tie-breaks: smaller history_len, smaller margin, max before most_recent. */
static int cmp_delayed_params(const fp8_steps_group *a, const fp8_steps_group *b) {
  if (a->history_len != b->history_len) return a->history_len < b->history_len ? -1 : 1;
  if (a->margin != b->margin) return a->margin < b->margin ? -1 : 1;
  if (a->amax_compute != b->amax_compute) return a->amax_compute == FP8_AMAX_MAX ? -1 : 1;
  return 0;
}

static int meets(const fp8_group_stats *s, double budget) {
  return s->overflow_rate <= budget; /* false for nan */
}

static void set_config(fp8_recommendation *r, const fp8_steps_group *g) {
  r->in_run = 1;
  r->recipe = g->recipe;
  r->kind = g->kind;
  r->format = g->format;
  r->history_len = g->history_len;
  r->margin = g->margin;
  r->amax_compute = g->amax_compute;
}

static const char *config_words(const fp8_steps_group *g, char *buf, size_t len) {
  if (g->kind == FP8_KIND_DELAYED)
    snprintf(buf, len, "delayed scaling (recipe %s; %s; history_len %d; margin %d; %s)", g->recipe,
             fp8_format_name(g->format), (int)g->history_len, (int)g->margin,
             fp8_amax_compute_name(g->amax_compute));
  else snprintf(buf, len, "current scaling (recipe %s; %s)", g->recipe, fp8_format_name(g->format));
  return buf;
}

/* ------------------------------------------------------------------ tensor scope */

/* Fills r for the tensor whose groups are stats[lo..hi). */
static int recommend_tensor(const fp8_group_stats *st, size_t lo, size_t hi, double budget,
                            fp8_recommendation *r) {
  const fp8_group_stats *best = NULL, *cur = NULL;
  int64_t ndelayed = 0, nmeet = 0;
  double min_ovf = NAN;
  for (size_t i = lo; i < hi; i++) {
    const fp8_group_stats *s = &st[i];
    const fp8_steps_group *g = s->group;
    if (g->kind == FP8_KIND_CURRENT) {
      if (!cur || cmp_larger(s->snr_median, cur->snr_median) < 0) cur = s;
      continue;
    }
    ndelayed++;
    if (!isnan(s->overflow_rate) && !(s->overflow_rate >= min_ovf)) min_ovf = s->overflow_rate;
    if (!meets(s, budget)) continue;
    nmeet++;
    int c = best ? cmp_larger(s->snr_median, best->snr_median) : -1;
    if (c == 0) c = cmp_delayed_params(g, best->group);
    if (c < 0) best = s;
  }
  const fp8_steps_group *g0 = st[lo].group;
  r->scope = FP8_REC_TENSOR;
  r->name = g0->tensor;
  r->role = g0->role;
  r->covers = nmeet;
  r->of = ndelayed;
  r->best_delayed_overflow = min_ovf;
  r->overflow_rate = r->snr_median = NAN;
  char cfg[200];
  if (best) {
    set_config(r, best->group);
    r->meets_budget = 1;
    r->stats = best;
    r->overflow_rate = best->overflow_rate;
    r->snr_median = best->snr_median;
    r->note = fmt_alloc("%s: overflow rate %.3g within the budget %g; median SNR %.2f dB; %lld of "
                        "%lld delayed configurations meet the budget",
                        config_words(best->group, cfg, sizeof cfg), best->overflow_rate, budget,
                        best->snr_median, (long long)nmeet, (long long)ndelayed);
    return r->note ? FP8_OK : FP8_ENOMEM;
  }
  char why[160];
  if (ndelayed == 0) snprintf(why, sizeof why, "no delayed configuration in this run");
  else if (isnan(min_ovf))
    snprintf(why, sizeof why, "no delayed configuration meets the overflow budget %g (no finite "
             "element to measure)", budget);
  else
    snprintf(why, sizeof why, "no delayed configuration meets the overflow budget %g (the lowest "
             "delayed overflow rate is %.3g)", budget, min_ovf);
  r->kind = FP8_KIND_CURRENT;
  if (cur) {
    set_config(r, cur->group);
    r->stats = cur;
    r->overflow_rate = cur->overflow_rate;
    r->snr_median = cur->snr_median;
    r->note = fmt_alloc("%s: use %s; median SNR %.2f dB", why,
                        config_words(cur->group, cfg, sizeof cfg), cur->snr_median);
  } else {
    r->note = fmt_alloc("%s: use current scaling (not in this run)", why);
  }
  return r->note ? FP8_OK : FP8_ENOMEM;
}

/* ------------------------------------------------------------------ role scope */

/* A role's groups sorted by setting (recipe, format, history_len, margin, amax_compute). */
typedef struct {
  const fp8_group_stats *s;
  size_t gi; /* group index: first appearance */
} gref;

static int same_setting(const fp8_steps_group *a, const fp8_steps_group *b) {
  return a->recipe == b->recipe && a->format == b->format && a->history_len == b->history_len &&
         a->margin == b->margin && a->amax_compute == b->amax_compute;
}

static int cmp_gref(const void *x, const void *y) {
  const fp8_steps_group *a = ((const gref *)x)->s->group, *b = ((const gref *)y)->s->group;
  int c = strcmp(a->recipe, b->recipe);
  if (c) return c;
  if (a->format != b->format) return a->format < b->format ? -1 : 1;
  c = cmp_delayed_params(a, b);
  if (c) return c;
  size_t i = ((const gref *)x)->gi, j = ((const gref *)y)->gi;
  return i < j ? -1 : i > j;
}

/* Aggregate of one setting over a role's tensors. */
typedef struct {
  const fp8_steps_group *g; /* a representative (the first) */
  size_t first, lo, hi;     /* first group index; its range in the sorted refs */
  int64_t covers, ran;
  double mean_snr, worst_ovf;
} setting;

static setting aggregate(const gref *refs, size_t lo, size_t hi, double budget) {
  setting st = {refs[lo].s->group, refs[lo].gi, lo, hi, 0, 0, NAN, NAN};
  double sum = 0;
  int64_t nsnr = 0;
  for (size_t k = lo; k < hi; k++) {
    const fp8_group_stats *s = refs[k].s;
    if (refs[k].gi < st.first) st.first = refs[k].gi;
    st.ran++;
    st.covers += meets(s, budget);
    if (!isnan(s->snr_median)) {
      sum += s->snr_median;
      nsnr++;
    }
    if (!isnan(s->overflow_rate) && !(s->overflow_rate <= st.worst_ovf)) st.worst_ovf = s->overflow_rate;
  }
  if (nsnr) st.mean_snr = sum / (double)nsnr;
  return st;
}

/* -1 when a is the better setting (ties as analysis.h says). */
static int cmp_setting(const setting *a, const setting *b, int by_covers) {
  int64_t ka = by_covers ? a->covers : a->ran, kb = by_covers ? b->covers : b->ran;
  if (ka != kb) return ka > kb ? -1 : 1;
  int c = cmp_larger(a->mean_snr, b->mean_snr);
  if (c) return c;
  if (a->g->kind == FP8_KIND_DELAYED) {
    c = cmp_delayed_params(a->g, b->g);
    if (c) return c;
  }
  return a->first < b->first ? -1 : a->first > b->first;
}

/* The best setting among refs[0..n) (sorted by cmp_gref); found = 0 when n = 0. */
static setting best_setting(const gref *refs, size_t n, double budget, int by_covers, int *found) {
  setting best = {0};
  *found = 0;
  for (size_t lo = 0; lo < n;) {
    size_t hi = lo + 1;
    while (hi < n && same_setting(refs[hi].s->group, refs[lo].s->group)) hi++;
    setting s = aggregate(refs, lo, hi, budget);
    if (!*found || cmp_setting(&s, &best, by_covers) < 0) best = s;
    *found = 1;
    lo = hi;
  }
  return best;
}

static int recommend_role(const fp8_analysis *a, fp8_role role, double budget, gref *dl, gref *cl,
                          fp8_recommendation *r, int *any) {
  size_t nd = 0, nc = 0;
  int64_t ntensors = 0;
  const char *last = NULL;
  for (size_t i = 0; i < a->nstats; i++) {
    const fp8_steps_group *g = a->stats[i].group;
    if (g->role != role) continue;
    if (g->tensor != last) ntensors++; /* groups are sorted by tensor */
    last = g->tensor;
    if (g->kind == FP8_KIND_DELAYED) dl[nd++] = (gref){&a->stats[i], i};
    else cl[nc++] = (gref){&a->stats[i], i};
  }
  *any = ntensors > 0;
  if (!ntensors) return FP8_OK;
  qsort(dl, nd, sizeof *dl, cmp_gref);
  qsort(cl, nc, sizeof *cl, cmp_gref);
  r->scope = FP8_REC_ROLE;
  r->role = role;
  r->name = fp8_rec_role_name(role);
  r->of = ntensors;
  r->overflow_rate = r->snr_median = r->best_delayed_overflow = NAN;
  const char *rn = role == FP8_ROLE_UNKNOWN ? "role-less" : fp8_role_name(role);
  char cfg[200];
  int found;
  setting d = best_setting(dl, nd, budget, 1, &found);
  if (found && d.covers > 0) {
    set_config(r, d.g);
    r->meets_budget = 1;
    r->covers = d.covers;
    r->overflow_rate = d.worst_ovf;
    r->snr_median = d.mean_snr;
    /* the misfits: the role's tensors without a group of this setting within the budget */
    r->misfits = malloc((size_t)ntensors * sizeof *r->misfits);
    if (!r->misfits) return FP8_ENOMEM;
    size_t len = 1;
    for (size_t lo = 0; lo < a->nstats;) { /* one tensor's groups are contiguous */
      const char *name = a->stats[lo].group->tensor;
      size_t hi = lo;
      int fits = 0;
      for (; hi < a->nstats && a->stats[hi].group->tensor == name; hi++) {
        const fp8_group_stats *s = &a->stats[hi];
        if (s->group->kind == FP8_KIND_DELAYED && same_setting(s->group, d.g) && meets(s, budget))
          fits = 1;
      }
      if (a->stats[lo].group->role == role && !fits) {
        r->misfits[r->nmisfits++] = name;
        len += strlen(name) + 2;
      }
      lo = hi;
    }
    char *list = malloc(len);
    if (!list) return FP8_ENOMEM;
    list[0] = 0;
    for (size_t k = 0; k < r->nmisfits; k++) {
      if (k) strcat(list, "; ");
      strcat(list, r->misfits[k]);
    }
    if (r->nmisfits == 0)
      r->note = fmt_alloc("%s meets the overflow budget %g for all %lld %s tensors; mean median SNR "
                          "%.2f dB", config_words(d.g, cfg, sizeof cfg), budget,
                          (long long)ntensors, rn, d.mean_snr);
    else
      r->note = fmt_alloc("%s meets the overflow budget %g for %lld of %lld %s tensors; mean "
                          "median SNR %.2f dB; does not fit: %s",
                          config_words(d.g, cfg, sizeof cfg), budget, (long long)d.covers,
                          (long long)ntensors, rn, d.mean_snr, list);
    free(list);
    return r->note ? FP8_OK : FP8_ENOMEM;
  }
  char why[160];
  if (nd == 0) snprintf(why, sizeof why, "no delayed configuration in this run for %s tensors", rn);
  else
    snprintf(why, sizeof why, "no delayed configuration meets the overflow budget %g for any %s "
             "tensor", budget, rn);
  r->kind = FP8_KIND_CURRENT;
  setting c = best_setting(cl, nc, budget, 0, &found);
  if (found) {
    set_config(r, c.g);
    r->covers = c.ran;
    r->overflow_rate = c.worst_ovf;
    r->snr_median = c.mean_snr;
    r->note = fmt_alloc("%s: use %s (run for %lld of %lld tensors); mean median SNR %.2f dB", why,
                        config_words(c.g, cfg, sizeof cfg), (long long)c.ran,
                        (long long)ntensors, c.mean_snr);
  } else {
    r->note = fmt_alloc("%s: use current scaling (not in this run)", why);
  }
  return r->note ? FP8_OK : FP8_ENOMEM;
}

/* ------------------------------------------------------------------ public */

int fp8_analysis_recommend(const fp8_analysis *a, double budget, fp8_recommendations *out,
                           char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  if (!a || !a->table || isnan(budget) || budget < 0) {
    snprintf(err, errlen, "overflow_budget %g: expected a rate >= 0", budget);
    return FP8_EINVAL;
  }
  const fp8_steps_table *t = a->table;
  out->overflow_budget = budget;
  int rc = FP8_OK;
  size_t cap = t->ntensors + (FP8_ROLE_UNKNOWN + 1);
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
    rc = recommend_role(a, (fp8_role)role, budget, dl, cl, &out->recs[out->nrecs], &any);
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

int fp8_recommend_write(const fp8_recommendations *r, const char *dir, char *err, size_t errlen) {
  fp8_outfile of;
  int rc = fp8_outfile_open(&of, dir, "recommendations.csv", err, errlen);
  if (rc) return rc;
  FILE *fp = of.fp;
  fputs(FP8_RECOMMEND_HEADER "\n", fp);
  for (size_t i = 0; i < r->nrecs; i++) {
    const fp8_recommendation *c = &r->recs[i];
    fputs(c->scope == FP8_REC_TENSOR ? "tensor," : "role,", fp);
    ana_put_text(fp, c->name);
    fputc(',', fp);
    if (c->in_run) ana_put_text(fp, c->recipe);
    fprintf(fp, ",%s,%s,", fp8_recipe_kind_name(c->kind),
            c->in_run ? fp8_format_name(c->format) : "");
    if (c->in_run && c->kind == FP8_KIND_DELAYED)
      fprintf(fp, "%d,%d,%s,", (int)c->history_len, (int)c->margin,
              fp8_amax_compute_name(c->amax_compute));
    else fputs(",,,", fp);
    if (c->in_run) {
      fp8_csv_put_num(fp, c->overflow_rate);
      fputc(',', fp);
      fp8_csv_put_num(fp, c->snr_median);
    } else fputc(',', fp);
    fprintf(fp, ",%lld,%lld,", (long long)c->covers, (long long)c->of);
    ana_put_text(fp, c->note);
    fputc('\n', fp);
  }
  return fp8_outfile_commit(&of, err, errlen);
}
