/* closedloop_stats.h: the statistics of `fp8lab closedloop` (issue 44): the open loop (the
 * high-precision trace replayed under each recipe label: STUDY/open) against the closed loop
 * (training runs under each recipe, each replayed: STUDY/closed/<label>/seed_<s>/replay), over
 * tables already loaded by src/results' readers. docs/semantics.md, "Open loop against closed
 * loop", defines every number; in short:
 * - rows are matched by (tensor, step, micro) within one label (steps.csv: (tensor, step));
 * - loss: final_loss = mean loss over steps >= ceil(0.9 steps); gap = final_loss - mean of the
 *   hp seeds' final_loss; the hp band = [min, max] of the hp seeds' gaps;
 * - rates: clipped_rate and underflow_rate over the matched steps.csv rows, each over the
 *   finite elements (sum (n - nonfinite): analysis.csv's rates, fp8_tally); overflow_step_share
 *   = matched stream rows with overshoot > 0 over those with amax > 0 and a finite overshoot;
 * - drift = |amax_closed / amax_open - 1| (amax_open > 0, both finite), per step its median and
 *   90th percentile (gsl_stats_quantile_from_sorted_data) over the matched rows;
 * - events: overshoot > 0; precision = both / open_events, recall = both / closed_events;
 * - Spearman's rho across labels of the open against the closed (open_seed) rates;
 * - self-check: replay rows with a te_scale whose scale differs from it (exact float32).
 * Every function returns an fp8_status with a one-line message naming the file. */
#ifndef FP8LAB_ANALYSIS_CLOSEDLOOP_STATS_H
#define FP8LAB_ANALYSIS_CLOSEDLOOP_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "closedloop.h" /* fp8_study, fp8_loss_table, fp8_cl_tables */
#include "tables.h"     /* fp8_steps_table, fp8_stream_table */

#ifdef __cplusplus
extern "C" {
#endif

/** The final-loss window: steps >= ceil(FP8_CL_FINAL_SHARE * steps) (the last 10%). */
#define FP8_CL_FINAL_SHARE 0.9
/** The trace stops speaking for the FP8 run at the first step whose median drift exceeds
 *  this (10%), and a period whose recall is below FP8_CL_RECALL_LIMIT is named. */
#define FP8_CL_DRIFT_LIMIT 0.1
#define FP8_CL_RECALL_LIMIT 0.5

/** One replayed run folder: its steps.csv and stream.csv (stream NULL: the run has none, no
 *  delayed configuration). */
typedef struct {
  const fp8_steps_table *steps;
  const fp8_stream_table *stream;
} fp8_cl_run;

/** The study's loaded inputs. Closed runs and their losses are label-major: [l * nseeds + s]. */
typedef struct {
  const fp8_study *study;
  fp8_cl_run open;
  const fp8_cl_run *closed;
  const fp8_loss_table *hp_loss, *hp_eval;   /**< [nseeds] */
  const fp8_loss_table *cl_loss, *cl_eval;   /**< [nlabels * nseeds] */
} fp8_cl_inputs;

/** Per label, what the report says beside the tables. */
typedef struct {
  double mean_gap, gap_min, gap_max;     /**< over the label's seeds */
  int inside_band;                       /**< hp band lo <= mean_gap <= hi */
  double eval_hp, eval_fp8;              /**< mean over seeds of eval.csv's last row */
  int64_t diverge_step;                  /**< first step with median drift > 10%; -1: none */
  double worst_drift;                    /**< the largest median drift (NaN: no drift row) */
  int64_t worst_drift_step;
  int has_stream;                        /**< the label has delayed configurations */
} fp8_cl_label_summary;

/** The self-check of one closed run: its first differing row. */
typedef struct {
  int64_t step, micro;                   /**< -1: none differs */
  char tensor[256];
  float scale, te_scale;
} fp8_cl_mismatch;

typedef struct {
  fp8_cl_tables t;                       /**< the rows of the six files */
  double hp_mean, band_lo, band_hi;      /**< the hp seeds' mean final loss, their gaps' range */
  fp8_cl_label_summary *labels;          /**< [nlabels] */
  fp8_cl_mismatch *mismatch;             /**< [nlabels * nseeds], label-major */
  int64_t runs_differing;                /**< closed runs with a differing row */
} fp8_cl_result;

/** Computes everything. FP8_OK; FP8_EFORMAT when the study's tables do not fit together (a
 *  label without rows in the open run or a closed replay, two configurations of one tensor
 *  under a label, a loss.csv without a step in the final window: the file named); FP8_ENOMEM.
 *  On failure *out is empty. */
int fp8_closedloop_compute(const fp8_cl_inputs *in, fp8_cl_result *out, char *err,
                           size_t errlen);
void fp8_closedloop_result_free(fp8_cl_result *r);

/** The smoothed training loss the loss plot draws: out[i] = mean of t->a over rows
 *  max(0, i - window + 1) .. i (a trailing running mean over `window` rows). */
void fp8_closedloop_smooth(const fp8_loss_table *t, size_t window, double *out);

#ifdef __cplusplus
}
#endif

#endif /* FP8LAB_ANALYSIS_CLOSEDLOOP_STATS_H */
