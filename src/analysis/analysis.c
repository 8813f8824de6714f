/* analysis.c: per (tensor, configuration) statistics of a loaded steps.csv, computed with GSL
 * (rates, overflow runs, SNR quantiles and a Student-t interval of the mean SNR, the scale lag,
 * the SNR trend), and their CSV (analysis.csv). Columns and definitions: analysis.h. */
#include "analysis.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_fit.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

#include "results.h" /* fp8_overshoot */
#include "util.h"
#include "outfile.h"

/* ------------------------------------------------------------------ building blocks */

double fp8_analysis_quantile(const double *sorted, size_t n, double f) {
  if (n == 0 || !(f >= 0.0 && f <= 1.0)) return NAN;
  double q = gsl_stats_quantile_from_sorted_data(sorted, 1, n, f);
  /* GSL interpolates (1-d)*a + d*b between the order statistics a <= b at index f*(n-1); its
   * rounding may step outside [a, b] by an ulp, e.g. give a constant sample's value +-1 ulp. */
  size_t lhs = (size_t)(f * (double)(n - 1));
  if (lhs >= n - 1) return sorted[n - 1];
  double a = sorted[lhs], b = sorted[lhs + 1];
  if (q < a) q = a;
  if (q > b) q = b;
  return q;
}

/* The f-quantile of x[0..n) (n > 0) as fp8_analysis_quantile gives it on the sorted data, in
 * O(n): x is permuted so that the two order statistics it reads are in place (Wirth's
 * selection), not sorted. */
static void select_kth(double *x, size_t n, size_t k) {
  ptrdiff_t l = 0, m = (ptrdiff_t)n - 1, kk = (ptrdiff_t)k;
  while (l < m) {
    double p = x[kk];
    ptrdiff_t i = l, j = m;
    do {
      while (x[i] < p) i++;
      while (p < x[j]) j--;
      if (i <= j) {
        double t = x[i];
        x[i++] = x[j];
        x[j--] = t;
      }
    } while (i <= j);
    if (j < kk) l = i;
    if (kk < i) m = j;
  }
}

static double quantile_select(double *x, size_t n, double f) {
  size_t lhs = (size_t)(f * (double)(n - 1));
  if (lhs >= n - 1) { /* the largest, at the end */
    size_t top = 0;
    for (size_t i = 1; i < n; i++)
      if (x[i] > x[top]) top = i;
    double t = x[top];
    x[top] = x[n - 1];
    x[n - 1] = t;
    return fp8_analysis_quantile(x, n, f);
  }
  select_kth(x, n, lhs);
  size_t lo = lhs + 1; /* the smallest of the rest next to it */
  for (size_t i = lhs + 2; i < n; i++)
    if (x[i] < x[lo]) lo = i;
  double t = x[lo];
  x[lo] = x[lhs + 1];
  x[lhs + 1] = t;
  return fp8_analysis_quantile(x, n, f);
}

int fp8_analysis_mean_ci(const double *x, size_t n, double level, double *lo, double *hi) {
  if (!(level > 0.0 && level < 1.0) || (!x && n)) return FP8_EINVAL;
  if (n == 0) {
    *lo = *hi = NAN;
    return FP8_OK;
  }
  if (n == 1) {
    *lo = *hi = x[0];
    return FP8_OK;
  }
  /* gsl_stats_mean is a running mean: exact for a constant sample, whose sd is then exactly 0
   * and whose interval is the value */
  double mean = gsl_stats_mean(x, 1, n);
  double sd = gsl_stats_sd_m(x, 1, n, mean); /* n - 1 in the denominator */
  double t = gsl_cdf_tdist_Pinv((1.0 + level) / 2.0, (double)(n - 1));
  double half = t * sd / sqrt((double)n);
  *lo = mean - half;
  *hi = mean + half;
  return FP8_OK;
}

double fp8_analysis_scale_lag(double scale, double amax, fp8_format format, int32_t margin) {
  float a = (float)amax;
  if (!(a > 0.0f) || isinf(a) || !(scale > 0.0) || isinf(scale)) return NAN;
  if (margin < -FP8_MARGIN_LIMIT || margin > FP8_MARGIN_LIMIT) return NAN;
  fp8_current_params p = {.amax_epsilon = 0.0f, .pow2 = false, .margin = margin,
                          .format = format};
  double jit = fp8_current_scale(&p, a);
  return log2(jit / scale);
}

size_t fp8_analysis_longest_run(const int64_t *x, size_t n) {
  size_t best = 0, cur = 0;
  for (size_t i = 0; i < n; i++) {
    cur = x[i] != 0 ? cur + 1 : 0;
    if (cur > best) best = cur;
  }
  return best;
}

/* ------------------------------------------------------------------ one group */

int fp8_analysis_group(const fp8_steps_table *t, const fp8_steps_group *g, fp8_group_stats *o) {
  memset(o, 0, sizeof *o);
  o->group = g;
  o->first_overflow_step = -1;
  size_t n = g->nrows;
  o->steps = (int64_t)n;
  size_t cap = n ? n : 1;
  double *snr = malloc(cap * sizeof *snr), *snr_x = malloc(cap * sizeof *snr_x);
  double *lag = malloc(cap * sizeof *lag);
  int64_t *ovf = malloc(cap * sizeof *ovf);
  double *cs = malloc(cap * sizeof *cs);
  int rc = FP8_OK;
  o->overshoot_max = NAN;
  o->stream_steps = o->stream_overshoot_step = -1;
  o->overshoot_p50 = o->overshoot_p95 = o->stream_overshoot_max = NAN;
  if (!snr || !snr_x || !lag || !ovf || !cs) {
    rc = FP8_ENOMEM;
    goto done;
  }
  size_t ns = 0, nl = 0, nc = 0, nrow = 0;
  fp8_tally tally; /* what summary.csv counts too (results.h), over the rows past the warm-up */
  fp8_tally_init(&tally);
  for (size_t i = 0; i < n; i++) {
    const fp8_step_row *r = fp8_steps_csv_group_row(t, g, i);
    if (r->warmup) { /* kept out of rates and recommendations, counted (docs/semantics.md) */
      o->warmup_steps++;
      continue;
    }
    fp8_tally_add(&tally, r->n, r->nonfinite, r->overflow, r->underflow, r->subnormal,
                  r->clipped, r->overshoot);
    if (!isnan(r->cos_sim)) cs[nc++] = r->cos_sim;
    ovf[nrow++] = r->overflow;
    if (r->overflow > 0 && o->first_overflow_step < 0) o->first_overflow_step = r->step;
    if (!isnan(r->mse)) { /* the row has finite elements */
      snr_x[ns] = (double)r->step;
      snr[ns++] = r->snr_db < FP8_ANALYSIS_SNR_CAP_DB ? r->snr_db : FP8_ANALYSIS_SNR_CAP_DB;
    }
    double l = fp8_analysis_scale_lag(r->scale, r->amax, r->format,
                                      g->key.kind == FP8_KIND_DELAYED ? r->margin : 0);
    if (!isnan(l)) lag[nl++] = g->key.kind == FP8_KIND_DELAYED ? l : 0.0;
  }
  o->steps = tally.steps;
  o->finite = tally.finite;
  o->overflow = tally.overflow;
  o->underflow = tally.underflow;
  o->subnormal = tally.subnormal;
  o->clipped = tally.clipped;
  o->steps_with_overflow = tally.steps_with_overflow;
  o->steps_with_clipped = tally.steps_with_clipped;
  o->overshoot_max = tally.overshoots ? tally.overshoot_max : NAN;
  o->clipped_rate = fp8_tally_rate(&tally, tally.clipped);
  o->clip_step_rate = nrow ? (double)o->steps_with_clipped / (double)nrow : NAN;
  o->cos_median = NAN;
  if (nc) {
    gsl_sort(cs, 1, nc);
    o->cos_median = fp8_analysis_quantile(cs, nc, 0.5);
  }
  o->overflow_rate = fp8_tally_rate(&tally, tally.overflow);
  o->underflow_rate = fp8_tally_rate(&tally, tally.underflow);
  o->subnormal_rate = fp8_tally_rate(&tally, tally.subnormal);
  o->longest_overflow_run = (int64_t)fp8_analysis_longest_run(ovf, nrow);

  o->snr_rows = (int64_t)ns;
  o->snr_mean = o->snr_median = o->snr_p5 = o->snr_min = NAN;
  o->snr_ci_lo = o->snr_ci_hi = o->snr_slope = NAN;
  if (ns > 0) {
    o->snr_mean = gsl_stats_mean(snr, 1, ns);
    rc = fp8_analysis_mean_ci(snr, ns, FP8_ANALYSIS_CI_LEVEL, &o->snr_ci_lo, &o->snr_ci_hi);
    if (rc) goto done;
    /* no mean of clipped SNRs exceeds the cap: cutting the interval there loses no coverage */
    if (o->snr_ci_hi > FP8_ANALYSIS_SNR_CAP_DB) o->snr_ci_hi = FP8_ANALYSIS_SNR_CAP_DB;
    if (ns >= 2) { /* steps are distinct within a group */
      double c0, c1, cov00, cov01, cov11, sumsq;
      if (gsl_fit_linear(snr_x, 1, snr, 1, ns, &c0, &c1, &cov00, &cov01, &cov11, &sumsq) == 0)
        o->snr_slope = c1 * 1000.0;
    }
    gsl_sort(snr, 1, ns);
    o->snr_median = fp8_analysis_quantile(snr, ns, 0.5);
    o->snr_p5 = fp8_analysis_quantile(snr, ns, 0.05);
    o->snr_min = snr[0];
  }
  o->lag_rows = (int64_t)nl;
  o->lag_median = o->lag_worst = NAN;
  if (nl > 0) {
    gsl_sort(lag, 1, nl);
    o->lag_median = fp8_analysis_quantile(lag, nl, 0.5);
    o->lag_worst = lag[0];
  }
done:
  free(snr);
  free(snr_x);
  free(lag);
  free(ovf);
  free(cs);
  return rc;
}

/* ------------------------------------------------------------------ the stream */

int fp8_analysis_stream_series(const fp8_stream_series *s, fp8_group_stats *o) {
  double *ov = malloc((s->n ? s->n : 1) * sizeof *ov);
  if (!ov) return FP8_ENOMEM;
  size_t k = 0;
  o->stream_steps = o->stream_overflow_steps = o->stream_clipped_steps = 0;
  o->stream_overshoot_step = -1;
  double top = -INFINITY;
  for (size_t i = 0; i < s->n; i++) {
    /* steps of this tensor: a step where it did not run (amax 0) is none of its steps */
    if (s->warmup[i] || !(s->amax[i] > 0.0f)) continue;
    o->stream_steps++;
    o->stream_overflow_steps += fp8_stream_overflowed(s->amax[i], s->scale[i], s->key.format);
    o->stream_clipped_steps += fp8_stream_clipped(s->amax[i], s->scale[i], s->key.format);
    ov[k] = fp8_overshoot(s->amax[i], s->scale[i], s->key.format);
    if (ov[k] > top) top = ov[k], o->stream_overshoot_step = s->step[i];
    k++;
  }
  o->overshoot_p50 = o->overshoot_p95 = o->stream_overshoot_max = NAN;
  if (k) { /* selection, not a sort: 40,320 series of 10^4 steps in a 70B sweep (issue 27) */
    o->overshoot_p95 = quantile_select(ov, k, 0.95);
    o->overshoot_p50 = quantile_select(ov, k, 0.5);
    o->stream_overshoot_max = quantile_select(ov, k, 1.0);
  }
  o->clip_step_rate = o->stream_steps ? (double)o->stream_clipped_steps / (double)o->stream_steps
                                      : NAN;
  free(ov);
  return FP8_OK;
}

/* The groups of each series: first[k] the first group of series k (SIZE_MAX: none), next[i]
 * the next group of group i's series. */
typedef struct {
  fp8_analysis *a;
  size_t *first, *next;
  const char *path;
  char *err;
  size_t errlen;
} stream_ctx;

static int stream_one(const fp8_stream_series *s, size_t k, void *ctx) {
  stream_ctx *c = ctx;
  for (size_t i = c->first[k]; i != SIZE_MAX; i = c->next[i])
    if (fp8_analysis_stream_series(s, &c->a->stats[i]) != FP8_OK)
      return fp8_errorf(FP8_ENOMEM, c->err, c->errlen, "%s: analysis: out of memory", c->path);
  return FP8_OK;
}

int fp8_analysis_add_stream(fp8_analysis *a, const fp8_stream_table *st, char *err,
                            size_t errlen) {
  if (!st) return FP8_OK;
  stream_ctx c = {a, malloc((st->nseries + 1) * sizeof *c.first),
                  malloc((a->nstats + 1) * sizeof *c.next), st->path, err, errlen};
  unsigned char *want = calloc(st->nseries + 1, 1);
  int rc = FP8_OK;
  if (!c.first || !c.next || !want) {
    rc = fp8_errorf(FP8_ENOMEM, err, errlen, "%s: analysis: out of memory", st->path);
    goto done;
  }
  for (size_t k = 0; k < st->nseries; k++) c.first[k] = SIZE_MAX;
  for (size_t i = a->nstats; i-- > 0;) { /* prepended: each list in group order */
    const fp8_steps_group *g = a->stats[i].group;
    if (g->key.kind != FP8_KIND_DELAYED) continue;
    const fp8_stream_series *s = fp8_stream_find(st, g->tensor, &g->key);
    if (!s) continue;
    size_t k = (size_t)(s - st->series);
    c.next[i] = c.first[k];
    c.first[k] = i;
    want[k] = 1;
  }
  /* series by series (a stream.npy's scales read from the file by blocks of tensors) */
  rc = fp8_stream_visit(st, want, stream_one, &c, err, errlen);
done:
  free(c.first);
  free(c.next);
  free(want);
  return rc;
}

/* ------------------------------------------------------------------ all groups */

int fp8_analysis_compute(const fp8_steps_table *t, fp8_analysis *a, char *err, size_t errlen) {
  memset(a, 0, sizeof *a);
  if (!t) {
    snprintf(err, errlen, "analysis: no table");
    return FP8_EINVAL;
  }
  a->table = t;
  a->stats = calloc(t->ngroups ? t->ngroups : 1, sizeof *a->stats);
  if (!a->stats) goto nomem;
  for (size_t i = 0; i < t->ngroups; i++)
    if (fp8_analysis_group(t, &t->groups[i], &a->stats[i]) != FP8_OK) goto nomem;
  a->nstats = t->ngroups;
  return FP8_OK;
nomem:
  fp8_analysis_free(a);
  snprintf(err, errlen, "%s: analysis: out of memory", t->path ? t->path : "steps.csv");
  return FP8_ENOMEM;
}

void fp8_analysis_free(fp8_analysis *a) {
  if (!a) return;
  free(a->stats);
  memset(a, 0, sizeof *a);
}

/* ------------------------------------------------------------------ analysis.csv */

static const char *const ANALYSIS_COLS[FP8_ANALYSIS_COL_COUNT] = {
    "tensor", "role", "recipe", "kind", "format", "history_len", "margin", "amax_compute",
    "steps", "overflow_rate", "underflow_rate", "subnormal_rate", "steps_with_overflow",
    "longest_overflow_run", "first_overflow_step", "snr_mean", "snr_median", "snr_p5", "snr_min",
    "snr_ci_lo", "snr_ci_hi", "lag_median", "lag_worst", "snr_slope", "warmup_steps",
    "clipped_rate", "steps_with_clipped", "cos_sim_median", "overshoot_max", "stream_steps",
    "stream_overflow_steps", "stream_clipped_steps", "overshoot_p50", "overshoot_p95",
    "stream_overshoot_max", "clip_step_rate"};

/* (fp8lab never reads it back: its one version is the current one) */
const fp8_schema fp8_schema_analysis = {"analysis.csv", ANALYSIS_COLS, FP8_ANALYSIS_COL_COUNT,
                                        {FP8_ANALYSIS_COL_COUNT, 0, 0, 0, 0}};

int fp8_analysis_write(const fp8_analysis *a, const char *dir, char *err, size_t errlen) {
  fp8_outfile of;
  int rc = fp8_schema_open(&of, dir, &fp8_schema_analysis, err, errlen);
  if (rc) return rc;
  FILE *fp = of.fp;
  for (size_t i = 0; i < a->nstats; i++) {
    const fp8_group_stats *s = &a->stats[i];
    const fp8_steps_group *g = s->group;
    fprintf(fp, "%s,%s,%s,%s,%s,", g->tensor, fp8_role_name(g->role), g->key.recipe,
            fp8_recipe_kind_name(g->key.kind), fp8_kind_format_name(g->key.kind, g->key.format));
    fp8_config_key_put_delayed_csv(fp, &g->key, 1);
    fprintf(fp, "%lld,", (long long)s->steps);
    const double rates[3] = {s->overflow_rate, s->underflow_rate, s->subnormal_rate};
    for (int k = 0; k < 3; k++) {
      fp8_csv_put_num(fp, rates[k]);
      fputc(',', fp);
    }
    fprintf(fp, "%lld,%lld,", (long long)s->steps_with_overflow, (long long)s->longest_overflow_run);
    if (s->first_overflow_step >= 0) fprintf(fp, "%lld", (long long)s->first_overflow_step);
    const double v[9] = {s->snr_mean,  s->snr_median, s->snr_p5,     s->snr_min,  s->snr_ci_lo,
                         s->snr_ci_hi, s->lag_median, s->lag_worst, s->snr_slope};
    for (int k = 0; k < 9; k++) {
      fputc(',', fp);
      fp8_csv_put_num(fp, v[k]);
    }
    fprintf(fp, ",%lld,", (long long)s->warmup_steps);
    fp8_csv_put_num(fp, s->clipped_rate);
    fprintf(fp, ",%lld,", (long long)s->steps_with_clipped);
    fp8_csv_put_num(fp, s->cos_median);
    fputc(',', fp);
    fp8_csv_put_num(fp, s->overshoot_max);
    if (s->stream_steps >= 0) {
      fprintf(fp, ",%lld,%lld,%lld,", (long long)s->stream_steps,
              (long long)s->stream_overflow_steps, (long long)s->stream_clipped_steps);
      const double w[3] = {s->overshoot_p50, s->overshoot_p95, s->stream_overshoot_max};
      for (int k = 0; k < 3; k++) {
        fp8_csv_put_num(fp, w[k]);
        fputc(',', fp);
      }
    } else {
      fputs(",,,,,,,", fp);
    }
    fp8_csv_put_num(fp, s->clip_step_rate);
    fputc('\n', fp);
  }
  return fp8_outfile_commit(&of, err, errlen);
}
