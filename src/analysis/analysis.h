/* analysis.h: the statistics half of fp8lab's analysis layer.
 *
 * Reads a run's steps.csv (fp8_steps_csv_load: every field validated, rows kept in file order and
 * grouped by configuration), computes per (tensor, configuration) statistics with GSL
 * (fp8_analysis_compute -> analysis.csv) and recommends a delayed-scaling configuration per
 * tensor and one global setting per role under an overflow budget (fp8_analysis_recommend ->
 * recommendations.csv). It reads result files only, never engine internals; the plots and the
 * report writer (doc.h) sit on top of it.
 *
 *   fp8_steps_table t;
 *   fp8_analysis a;
 *   fp8_recommendations r;
 *   rc = fp8_steps_csv_load("out/run/steps.csv", &t, err, sizeof err);        // FP8_EFORMAT: "file:line: ..."
 *   rc = fp8_analysis_compute(&t, &a, err, sizeof err);
 *   rc = fp8_analysis_recommend(&a, FP8_ANALYSIS_OVERFLOW_BUDGET, &r, err, sizeof err);
 *   rc = fp8_analysis_write(&a, "out/run", err, sizeof err);              // analysis.csv
 *   rc = fp8_recommend_write(&r, "out/run", err, sizeof err);             // recommendations.csv
 *   fp8_recommendations_free(&r); fp8_analysis_free(&a); fp8_steps_csv_free(&t);
 *
 * Every function returns an fp8_status (fp8.h) and writes one line naming the file (and line)
 * into err on failure. The statistics are in double precision.
 *
 * ------------------------------------------------------------------------------------------
 * analysis.csv: one row per (tensor, configuration) group of steps.csv, in group order
 * (tensor name by strcmp, then the configuration's first appearance in steps.csv, which is the
 * experiment's order). Floats "%.9g", inf/-inf/nan as in steps.csv.
 *
 *   tensor, role, recipe, kind, format, history_len, margin, amax_compute
 *                        the configuration key, as in steps.csv (the last three empty for
 *                        current scaling)
 *   steps                rows of the group past the tensor's warm-up (snapshot steps;
 *                        warmup_steps counts the others)
 *   overflow_rate, underflow_rate, subnormal_rate
 *                        sum of overflow (underflow, subnormal) over sum of finite elements
 *                        (n - nonfinite) over the group's rows; nan when there is no finite element
 *                        (these, steps_with_overflow, steps_with_clipped and overshoot_max are
 *                        counted as summary.csv counts them, results.h fp8_tally, but over the
 *                        rows past the tensor's warm-up only, which summary.csv includes: the
 *                        two differ exactly by the warm-up steps, on purpose)
 *   steps_with_overflow  rows with overflow > 0
 *   longest_overflow_run longest run of consecutive rows (in step order; snapshot steps need not
 *                        be contiguous) with overflow > 0; 0 if none
 *   first_overflow_step  step of the first row with overflow > 0; empty if none
 *   snr_mean, snr_median, snr_p5, snr_min
 *                        over the rows that have a finite element (rows with mse = nan are
 *                        skipped); every SNR is first clipped to FP8_ANALYSIS_SNR_CAP_DB (200 dB),
 *                        so an error-free step (snr_db = inf) counts as 200 dB in every SNR
 *                        column. p5 and the median use gsl_stats_quantile_from_sorted_data
 *                        (linear interpolation between order statistics, p5 at index 0.05*(n-1)).
 *                        nan when no row has a finite element
 *   snr_ci_lo, snr_ci_hi Student-t 95% confidence interval of snr_mean over the same n clipped
 *                        SNRs: snr_mean -+ t * s / sqrt(n), s the sample standard deviation
 *                        (n - 1 in the denominator, gsl_stats_sd_m), t = gsl_cdf_tdist_Pinv(0.975,
 *                        n - 1); snr_ci_hi is then cut to 200 dB (no mean of clipped SNRs exceeds
 *                        the cap, so the cut loses no coverage). Coverage: exactly 95% when the
 *                        step SNRs are independent draws from one normal distribution,
 *                        approximately 95% otherwise once n is large (central limit theorem),
 *                        possibly less with few, skewed steps; snapshot steps of a run are not
 *                        independent, which the interval (like any i.i.d. one) does not model.
 *                        One step: both = the value; a constant sample: both = the value;
 *                        nan when no row has a finite element. (It replaced a 1000-resample
 *                        percentile bootstrap: docs/semantics.md, Statistics.)
 *   lag_median, lag_worst
 *                        the scale lag of a row is log2(s_jit / s_used) in binades: s_used the
 *                        scale the row used, s_jit = fp8_current_scale() of the row's own amax
 *                        (epsilon 0, no pow2, the row's margin and format). Sign: lag < 0 means
 *                        the used scale was too large by |lag| binades (amax*s_used above
 *                        the margin-reduced max: values saturate once lag < -margin); lag > 0 means
 *                        it was too small (unused range, more underflow). lag_worst is the
 *                        minimum (most negative) lag. Rows with amax 0 or inf are skipped; current
 *                        scaling rows have lag 0 by construction. nan when no row qualifies.
 *                        (The ratio is s_jit / s_used, not s_used / s_jit, so that the worst,
 *                        overflow-side lag is the most negative one.)
 *   snr_slope            least-squares slope (gsl_fit_linear) of the clipped SNR against the step,
 *                        in dB per 1000 steps: < 0 when accuracy degrades over training; nan with
 *                        fewer than two distinct steps
 *
 * recommendations.csv: the tensor-scope rows (tensor name order), then the role-scope rows
 * (role order input, weight, output, grad_output, grad_input, then tensors without a role),
 * then one model-scope row (name "all tensors": the role rule over every tensor, the setting's
 * key without the format, since one hybrid section spans E4M3 and E5M2 tensors; with it when a
 * section's format list gives a tensor two configurations of one key).
 *
 *   scope                tensor | role
 *   name                 the tensor name, or the role name ("(no role)" for tensors without one)
 *   recipe, kind, format, history_len, margin, amax_compute
 *                        the recommended configuration (delayed parameters empty for current;
 *                        everything but kind empty when current scaling is not in the run)
 *   overflow_rate, snr_median
 *                        tensor scope: that configuration's analysis.csv values; role scope: the
 *                        worst (largest) overflow_rate and the mean snr_median over the role's
 *                        tensors that ran the setting; empty when not in the run
 *   covers, of           tensor scope: delayed configurations of the tensor meeting the budget,
 *                        of its delayed configurations; role scope: tensors of the role the setting
 *                        meets the budget for (for a current-scaling fallback: tensors that ran it),
 *                        of the role's tensors
 *   note                 one plain sentence (quoted per RFC 4180 when it holds a comma or quote)
 *
 *   clipped_rate, clip_step_rate, snr_p5, underflow_rate
 *                        the budgets' two quantities and the two ranking ones (role scope: worst
 *                        clipped_rate and clip_step_rate, mean snr_p5 and underflow_rate)
 *   decided_by           what chose this row over the runner-up: "only fit", "fits" (role scope:
 *                        fits more tensors), "p5 SNR", "underflow rate", "parameters" (the
 *                        final tie-breaks), "fallback" (current scaling: nothing fits)
 *
 * Choice rules. Budgets ([analysis] overflow_budget, the value budget, default 1e-5; step_budget,
 * default 0.01): a delayed configuration FITS a tensor when its clipped_rate (clipped values
 * over finite values of the non-warm-up snapshot rows) is <= the value budget and its
 * clip_step_rate (stream steps, else snapshot rows, whose largest element clipped) <= the step
 * budget, and, when [analysis] flush_budget is given (off by default), its underflow_rate
 * (values flushed to zero over finite values) <= the flush budget. Warm-up rows never count.
 * - tensor: for each (recipe, format, history_len, amax_compute) the smallest margin that fits;
 *   of those candidates the largest snr_p5, differences under FP8_ANALYSIS_SNR_TIE_DB being
 *   ties; then the smaller underflow_rate; then smaller history_len, max before most_recent,
 *   first appearance. None fits (or no delayed configuration): current scaling, its
 *   configuration with the largest snr_p5 (ties: first appearance), or "current scaling (not in
 *   this run)". The clipping budgets do not apply to current scaling, whose one overflow per
 *   step is the rounding of amax * scale a hair above the max (never clipped); the flush budget
 *   does: where that current configuration misses it and the tensor has a bf16 configuration
 *   (kind bf16: nothing cast, it fits every budget), the tensor is kept in BF16 (its first
 *   bf16 configuration), else current scaling with a note. nan never fits or wins.
 * - role: a setting (recipe, format, history_len, margin, amax_compute) covers the role's
 *   tensors it fits; for each (recipe, format, history_len, amax_compute) the smallest margin
 *   with the most covers; of those, the most covers, then the larger mean snr_p5 (ties as
 *   above), the smaller mean underflow_rate, then smaller history_len, max first, first
 *   appearance. If no setting covers any tensor, the current-scaling setting run by the most
 *   tensors (ties: mean snr_p5, first appearance), or "current scaling (not in this run)".
 */
#ifndef FP8LAB_ANALYSIS_ANALYSIS_H
#define FP8LAB_ANALYSIS_ANALYSIS_H

#include <stddef.h>
#include <stdint.h>

#include "fp8.h"
#include "config_key.h"
#include "results.h" /* fp8_schema */
#include "tables.h" /* fp8_steps_table, fp8_stream_table */

#ifdef __cplusplus
extern "C" {
#endif

/** analysis.csv's columns (documented at the top of this file), declared as results.h
 *  declares the replay's files: an fp8_schema (fp8_schema_analysis) and its column enum. */
typedef enum {
  FP8_ANALYSIS_COL_TENSOR, FP8_ANALYSIS_COL_ROLE, FP8_ANALYSIS_COL_RECIPE, FP8_ANALYSIS_COL_KIND,
  FP8_ANALYSIS_COL_FORMAT, FP8_ANALYSIS_COL_HISTORY_LEN, FP8_ANALYSIS_COL_MARGIN,
  FP8_ANALYSIS_COL_AMAX_COMPUTE, FP8_ANALYSIS_COL_STEPS, FP8_ANALYSIS_COL_OVERFLOW_RATE,
  FP8_ANALYSIS_COL_UNDERFLOW_RATE, FP8_ANALYSIS_COL_SUBNORMAL_RATE,
  FP8_ANALYSIS_COL_STEPS_WITH_OVERFLOW, FP8_ANALYSIS_COL_LONGEST_OVERFLOW_RUN,
  FP8_ANALYSIS_COL_FIRST_OVERFLOW_STEP, FP8_ANALYSIS_COL_SNR_MEAN, FP8_ANALYSIS_COL_SNR_MEDIAN,
  FP8_ANALYSIS_COL_SNR_P5, FP8_ANALYSIS_COL_SNR_MIN, FP8_ANALYSIS_COL_SNR_CI_LO,
  FP8_ANALYSIS_COL_SNR_CI_HI, FP8_ANALYSIS_COL_LAG_MEDIAN, FP8_ANALYSIS_COL_LAG_WORST,
  FP8_ANALYSIS_COL_SNR_SLOPE,
  /* issue 13 */
  FP8_ANALYSIS_COL_WARMUP_STEPS, FP8_ANALYSIS_COL_CLIPPED_RATE,
  FP8_ANALYSIS_COL_STEPS_WITH_CLIPPED, FP8_ANALYSIS_COL_COS_SIM_MEDIAN,
  FP8_ANALYSIS_COL_OVERSHOOT_MAX, FP8_ANALYSIS_COL_STREAM_STEPS,
  FP8_ANALYSIS_COL_STREAM_OVERFLOW_STEPS, FP8_ANALYSIS_COL_STREAM_CLIPPED_STEPS,
  FP8_ANALYSIS_COL_OVERSHOOT_P50, FP8_ANALYSIS_COL_OVERSHOOT_P95,
  FP8_ANALYSIS_COL_STREAM_OVERSHOOT_MAX, FP8_ANALYSIS_COL_CLIP_STEP_RATE,
  FP8_ANALYSIS_COL_COUNT
} fp8_analysis_col;

/** recommendations.csv's columns (documented at the top of this file). */
typedef enum {
  FP8_RECOMMEND_COL_SCOPE, FP8_RECOMMEND_COL_NAME, FP8_RECOMMEND_COL_RECIPE,
  FP8_RECOMMEND_COL_KIND, FP8_RECOMMEND_COL_FORMAT, FP8_RECOMMEND_COL_HISTORY_LEN,
  FP8_RECOMMEND_COL_MARGIN, FP8_RECOMMEND_COL_AMAX_COMPUTE, FP8_RECOMMEND_COL_OVERFLOW_RATE,
  FP8_RECOMMEND_COL_SNR_MEDIAN, FP8_RECOMMEND_COL_COVERS, FP8_RECOMMEND_COL_OF,
  FP8_RECOMMEND_COL_NOTE,
  /* issue 13 */
  FP8_RECOMMEND_COL_CLIPPED_RATE, FP8_RECOMMEND_COL_CLIP_STEP_RATE, FP8_RECOMMEND_COL_SNR_P5,
  FP8_RECOMMEND_COL_UNDERFLOW_RATE, FP8_RECOMMEND_COL_DECIDED_BY,
  FP8_RECOMMEND_COL_COUNT
} fp8_recommend_col;

/** analysis.csv (analysis.c) and recommendations.csv (analysis_recommend.c): written here
 *  only, never read back by fp8lab (a user's spreadsheet or notebook reads them). */
extern const fp8_schema fp8_schema_analysis;
extern const fp8_schema fp8_schema_recommendations;

/** Default of `[analysis] overflow_budget`: the largest acceptable overflow_rate. */
#define FP8_ANALYSIS_OVERFLOW_BUDGET 1e-5
/** SNRs (dB) are clipped to this before any statistic: an error-free step is "200 dB". */
#define FP8_ANALYSIS_SNR_CAP_DB 200.0
/** Confidence level of analysis.csv's snr_ci_lo, snr_ci_hi (fp8_analysis_mean_ci). */
#define FP8_ANALYSIS_CI_LEVEL 0.95

/* ------------------------------------------------------------------ per-group statistics */

/** One analysis.csv row (columns documented at the top of this file). */
typedef struct {
  const fp8_steps_group *group;  /**< key, owned by the table */
  int64_t steps;
  int64_t finite;                /**< sum of n - nonfinite */
  int64_t overflow, underflow, subnormal; /**< totals */
  double overflow_rate, underflow_rate, subnormal_rate;
  int64_t steps_with_overflow;
  int64_t longest_overflow_run;
  int64_t first_overflow_step;   /**< -1 when no row overflowed (the CSV field is empty) */
  int64_t snr_rows;              /**< rows that entered the SNR statistics */
  double snr_mean, snr_median, snr_p5, snr_min, snr_ci_lo, snr_ci_hi;
  int64_t lag_rows;              /**< rows that entered the lag statistics */
  double lag_median, lag_worst;
  double snr_slope;              /**< dB per 1000 steps */
  /* issue 13: warm-up rows are left out of everything above and below, and counted here */
  int64_t warmup_steps;          /**< the group's warm-up rows */
  int64_t clipped;               /**< total (overflow for a file without the column) */
  double clipped_rate;           /**< clipped over finite; nan when there is no finite element */
  int64_t steps_with_clipped;
  double cos_median;             /**< median cos_sim over the rows that have one; nan if none */
  double overshoot_max;          /**< max overshoot over the rows; nan when there is none */
  /* the stream (delayed groups of a run with stream.csv; fp8_analysis_add_stream) */
  int64_t stream_steps;          /**< non-warm-up stream steps the tensor ran (amax > 0); -1: no
                                      stream for this group */
  int64_t stream_overflow_steps; /**< ... whose largest element overflowed (fp8_stream_overflowed) */
  int64_t stream_clipped_steps;  /**< ... whose largest element clipped (fp8_stream_clipped) */
  double overshoot_p50, overshoot_p95, stream_overshoot_max; /**< over those with amax > 0 */
  int64_t stream_overshoot_step; /**< the (first) step of stream_overshoot_max; -1 if none */
  /** The step rate the step budget applies to: stream_clipped_steps / stream_steps, or without
   *  a stream steps_with_clipped / steps (snapshot rows); nan with no step. */
  double clip_step_rate;
} fp8_group_stats;

/** The statistics of every group of a table. */
typedef struct {
  const fp8_steps_table *table;  /**< borrowed: must outlive the analysis */
  size_t nstats;
  fp8_group_stats *stats;        /**< one per group, same index as table->groups */
  /** NULL, or per group: 1 when its tensor is left out of the role and model scopes of the
   *  recommendations (a Mixture-of-Experts router, kept in BF16: docs/semantics.md); its own
   *  tensor-scope recommendation is still made. Set by the caller, owned by it. */
  const unsigned char *left_out;
} fp8_analysis;

/** Computes the statistics of every group. @return FP8_OK, FP8_ENOMEM. */
int fp8_analysis_compute(const fp8_steps_table *table, fp8_analysis *a, char *err,
                         size_t errlen);
/** Adds the stream statistics of every delayed group that stream has a series for (the
 *  stream_* fields, overshoot_p50/p95, clip_step_rate). @return FP8_OK, FP8_ENOMEM. */
int fp8_analysis_add_stream(fp8_analysis *a, const fp8_stream_table *stream, char *err,
                            size_t errlen);
/** One series' stream statistics into o (the stream_* fields, overshoot_p50/p95,
 *  clip_step_rate). @return FP8_OK, FP8_ENOMEM. */
int fp8_analysis_stream_series(const fp8_stream_series *s, fp8_group_stats *o);
/** Computes one group's statistics. @return FP8_OK, FP8_ENOMEM. */
int fp8_analysis_group(const fp8_steps_table *table, const fp8_steps_group *g,
                       fp8_group_stats *out);
void fp8_analysis_free(fp8_analysis *a);
/** Writes <dir>/analysis.csv (temporary name, renamed). @return FP8_OK, FP8_EIO, FP8_ENOMEM. */
int fp8_analysis_write(const fp8_analysis *a, const char *dir, char *err, size_t errlen);

/* Building blocks, public so that the plots and tests use the very same definitions. */

/** gsl_stats_quantile_from_sorted_data(sorted, 1, n, f), kept within the two order statistics
 *  it interpolates (so a constant sample gives exactly its value). nan when n = 0. */
double fp8_analysis_quantile(const double *sorted, size_t n, double f);
/** Student-t interval of the mean of x[0..n) at confidence level: mean -+ t * s / sqrt(n) with
 *  mean = gsl_stats_mean, s = gsl_stats_sd_m (n - 1 in the denominator) and
 *  t = gsl_cdf_tdist_Pinv((1 + level) / 2, n - 1). n = 1: both x[0]; n = 0: nan.
 *  @return FP8_OK, FP8_EINVAL (level outside (0,1), x NULL with n > 0). */
int fp8_analysis_mean_ci(const double *x, size_t n, double level, double *lo, double *hi);
/** The scale lag in binades, log2(s_jit / scale) with s_jit = fp8_current_scale(eps 0, no
 *  pow2, margin, format) of amax; nan when amax is 0, inf or nan, or scale is not > 0. */
double fp8_analysis_scale_lag(double scale, double amax, fp8_format format, int32_t margin);
/** Longest run of consecutive non-zero values in x[0..n). */
size_t fp8_analysis_longest_run(const int64_t *x, size_t n);

/* ------------------------------------------------------------------ recommendations */

/** tensor, role, and model: one setting for every tensor (what one TransformerEngine
 *  DelayedScaling recipe can express) */
typedef enum { FP8_REC_TENSOR, FP8_REC_ROLE, FP8_REC_MODEL } fp8_rec_scope;

/** One recommendations.csv row. */
typedef struct {
  fp8_rec_scope scope;
  const char *name;              /**< tensor name, or fp8_rec_role_name(role) */
  fp8_role role;
  int in_run;                    /**< 0: "current scaling (not in this run)", no configuration */
  int meets_budget;              /**< 1: a delayed configuration within the budget (for role
                                      scope: for at least one tensor) */
  fp8_config_key key;            /**< the configuration (config_key.h): recipe NULL and format
                                      unset when !in_run; kind current then */
  const fp8_group_stats *stats;  /**< tensor scope: the chosen group's statistics; else NULL */
  double overflow_rate, snr_median; /**< nan when !in_run */
  /* issue 13: the budgets' quantities and the deciding criterion (role scope: the worst
   * clipped_rate and clip_step_rate, the mean snr_p5 and underflow_rate of the role's tensors
   * that ran the setting) */
  double clipped_rate, clip_step_rate, snr_p5, underflow_rate;
  const char *decided_by;        /**< "only fit", "fits" (role: more tensors), "p5 SNR",
                                      "underflow rate", "parameters" (the tie-breaks), or
                                      "fallback" (current scaling) */
  int64_t covers, of;
  double best_delayed_overflow;  /**< smallest delayed overflow_rate (tensor scope), nan if none */
  size_t nmisfits;
  const char **misfits;          /**< role scope, delayed pick: the role's tensors it does not fit */
  char *note;                    /**< one sentence, no newline */
} fp8_recommendation;

/** The two budgets (analysis.h "Choice rules"; [analysis] overflow_budget, step_budget). */
typedef struct {
  double value;                  /**< clipped values over finite values, snapshot steps */
  double step;                   /**< steps whose largest element clipped, over the steps */
  int stream_only;               /**< 1: a run without snapshots (issue 28): the value budget
                                      cannot be measured and is not applied; the step budget
                                      decides, over the stream's steps */
  int has_flush;                 /**< 1: the flush budget is on ([analysis] flush_budget) */
  double flush;                  /**< a configuration fits only where its underflow_rate (values
                                      flushed to zero over finite values) <= this: a budget
                                      current scaling can miss (it never clips) */
} fp8_budgets;

/** Default of `[analysis] step_budget`. */
#define FP8_ANALYSIS_STEP_BUDGET 0.01
/** SNR differences below this many dB are ties in the choice rules (p5 SNR). */
#define FP8_ANALYSIS_SNR_TIE_DB 0.05

/** 1 when configuration s fits its tensor within budgets b (analysis.h "Choice rules"): its
 *  clipped_rate within the value budget and its clip_step_rate within the step budget (nan
 *  never fits), and with has_flush its underflow_rate within b->flush; with b->stream_only,
 *  the step budget alone (no snapshot: no value to count). */
int fp8_budgets_fit(const fp8_budgets *b, const fp8_group_stats *s);

typedef struct {
  double overflow_budget;        /**< the value budget (budgets.value) */
  fp8_budgets budgets;
  size_t nrecs;
  fp8_recommendation *recs;      /**< tensor scope (tensor order), then role scope (role order) */
  size_t ntensor_recs;           /**< recs[0..ntensor_recs) are the tensor-scope ones */
} fp8_recommendations;

/** The name used for a role scope: fp8_role_name, or "(no role)" for FP8_ROLE_UNKNOWN. */
const char *fp8_rec_role_name(fp8_role r);
/** Applies the choice rules above. @return FP8_OK; FP8_EINVAL (budget nan or < 0); FP8_ENOMEM. */
int fp8_analysis_recommend(const fp8_analysis *a, const fp8_budgets *budgets,
                           fp8_recommendations *out, char *err, size_t errlen);
void fp8_recommendations_free(fp8_recommendations *r);
/** Writes <dir>/recommendations.csv (temporary name, renamed). */
int fp8_recommend_write(const fp8_recommendations *r, const char *dir, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* FP8LAB_ANALYSIS_ANALYSIS_H */
