/* closedloop.h: the files of a closed-loop study (issue 44; the folder's layout is the
 * contract between tools/closedloop/study.py, which writes it, and `fp8lab closedloop`, which
 * compares its open and closed loops; docs/reference.md, "fp8lab closedloop"):
 * - what the study driver writes and fp8lab reads: study.ini (fp8_study_load), each run's
 *   loss.csv (fp8_loss_csv_load) and eval.csv (fp8_eval_csv_load);
 * - what `fp8lab closedloop` writes: closedloop_loss.csv, closedloop_rates.csv,
 *   closedloop_drift.csv, closedloop_events.csv, closedloop_spearman.csv and
 *   closedloop_selfcheck.csv, their columns (fp8_schema_closedloop_*) and writers.
 * The statistics themselves are src/analysis' (closedloop_stats.h); docs/semantics.md, "Open
 * loop against closed loop", defines each column. In the comparison's files an empty field is
 * "no value" (a NaN of the statistics: a ratio without denominator, an hp run's FP8 loss). */
#ifndef FP8LAB_RESULTS_CLOSEDLOOP_H
#define FP8LAB_RESULTS_CLOSEDLOOP_H

#include <stddef.h>
#include <stdint.h>

#include "results.h" /* fp8_schema */

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ study.ini */

/** STUDY/study.ini's [study] section, validated: labels distinct and non-empty, seeds distinct
 *  non-negative integers, open_seed one of them, steps >= 1, spike (when given) two steps
 *  0 <= first <= last < steps, eval_every >= 1 (when given). */
typedef struct {
  char *dir;                  /**< STUDY, as given */
  char *experiment;           /**< relative to dir ("" when absent: not read here) */
  size_t nlabels;
  char **labels;              /**< in the order to show them */
  size_t nseeds;
  int64_t *seeds;             /**< as listed */
  int64_t open_seed;
  int64_t steps;
  int has_spike;
  int64_t spike_first, spike_last; /**< when has_spike */
  int64_t eval_every;         /**< 0: not given */
} fp8_study;

/** Reads <dir>/study.ini. FP8_OK; FP8_EIO ("<path>: cannot open: ..."); FP8_EFORMAT
 *  ("<path>:<line>: <what>", or "<path>: <key> missing"); FP8_ENOMEM. On failure *s is empty. */
int fp8_study_load(const char *dir, fp8_study *s, char *err, size_t errlen);
void fp8_study_free(fp8_study *s);
/** The index of seed in s->seeds, or -1. */
ptrdiff_t fp8_study_seed_index(const fp8_study *s, int64_t seed);

/* ------------------------------------------------------------------ loss.csv, eval.csv */

/** loss.csv: step,loss, every training step. */
typedef enum { FP8_LOSS_COL_STEP, FP8_LOSS_COL_LOSS, FP8_LOSS_COL_COUNT } fp8_loss_col;
/** eval.csv: step,loss_hp,loss_fp8 (loss_fp8 empty for a high-precision run). */
typedef enum {
  FP8_EVAL_COL_STEP, FP8_EVAL_COL_LOSS_HP, FP8_EVAL_COL_LOSS_FP8, FP8_EVAL_COL_COUNT
} fp8_eval_col;
extern const fp8_schema fp8_schema_loss;
extern const fp8_schema fp8_schema_eval;

/** A loaded loss.csv or eval.csv: steps strictly ascending (>= 0), one value column (loss.csv:
 *  a[] the loss, b NULL) or two (eval.csv: a[] loss_hp, b[] loss_fp8, NaN where empty). Losses
 *  are decimals or inf/-inf/nan (a diverged run); loss and loss_hp are never empty. */
typedef struct {
  char *path;                 /**< as given to the reader */
  size_t n;
  int64_t *step;
  double *a, *b;
} fp8_loss_table;

/** Reads a loss.csv (FP8_OK; FP8_EIO "<path>: cannot open: ..."; FP8_EFORMAT
 *  "<path>:<line>: <what>"; FP8_ENOMEM; on failure *t is empty). */
int fp8_loss_csv_load(const char *path, fp8_loss_table *t, char *err, size_t errlen);
/** Reads an eval.csv, likewise (at least one row). */
int fp8_eval_csv_load(const char *path, fp8_loss_table *t, char *err, size_t errlen);
void fp8_loss_table_free(fp8_loss_table *t);

/* ------------------------------------------------------------------ the comparison's files */

typedef enum {
  FP8_CL_LOSS_COL_LABEL, FP8_CL_LOSS_COL_SEED, FP8_CL_LOSS_COL_FINAL_LOSS, FP8_CL_LOSS_COL_GAP,
  FP8_CL_LOSS_COL_EVAL_LOSS_HP, FP8_CL_LOSS_COL_EVAL_LOSS_FP8, FP8_CL_LOSS_COL_COUNT
} fp8_cl_loss_col;
typedef enum {
  FP8_CL_RATES_COL_LABEL, FP8_CL_RATES_COL_SOURCE, FP8_CL_RATES_COL_SEED,
  FP8_CL_RATES_COL_CLIPPED_RATE, FP8_CL_RATES_COL_UNDERFLOW_RATE,
  FP8_CL_RATES_COL_OVERFLOW_STEP_SHARE, FP8_CL_RATES_COL_ROWS, FP8_CL_RATES_COL_STREAM_ROWS,
  FP8_CL_RATES_COL_COUNT
} fp8_cl_rates_col;
typedef enum {
  FP8_CL_DRIFT_COL_LABEL, FP8_CL_DRIFT_COL_STEP, FP8_CL_DRIFT_COL_TENSORS,
  FP8_CL_DRIFT_COL_MEDIAN_DRIFT, FP8_CL_DRIFT_COL_P90_DRIFT, FP8_CL_DRIFT_COL_COUNT
} fp8_cl_drift_col;
typedef enum {
  FP8_CL_EVENTS_COL_LABEL, FP8_CL_EVENTS_COL_PERIOD, FP8_CL_EVENTS_COL_OPEN_EVENTS,
  FP8_CL_EVENTS_COL_CLOSED_EVENTS, FP8_CL_EVENTS_COL_BOTH, FP8_CL_EVENTS_COL_PRECISION,
  FP8_CL_EVENTS_COL_RECALL, FP8_CL_EVENTS_COL_COUNT
} fp8_cl_events_col;
typedef enum {
  FP8_CL_SPEARMAN_COL_RATE, FP8_CL_SPEARMAN_COL_LABELS, FP8_CL_SPEARMAN_COL_RHO,
  FP8_CL_SPEARMAN_COL_COUNT
} fp8_cl_spearman_col;
typedef enum {
  FP8_CL_SELFCHECK_COL_LABEL, FP8_CL_SELFCHECK_COL_SEED, FP8_CL_SELFCHECK_COL_TE_ROWS,
  FP8_CL_SELFCHECK_COL_DIFFER, FP8_CL_SELFCHECK_COL_COUNT
} fp8_cl_selfcheck_col;

extern const fp8_schema fp8_schema_closedloop_loss;
extern const fp8_schema fp8_schema_closedloop_rates;
extern const fp8_schema fp8_schema_closedloop_drift;
extern const fp8_schema fp8_schema_closedloop_events;
extern const fp8_schema fp8_schema_closedloop_spearman;
extern const fp8_schema fp8_schema_closedloop_selfcheck;

/** A row of closedloop_loss.csv (label "hp" for the high-precision seeds). */
typedef struct {
  const char *label;
  int64_t seed;
  double final_loss, gap, eval_loss_hp, eval_loss_fp8;
} fp8_cl_loss_row;
/** A row of closedloop_rates.csv (source "open" or "closed"). */
typedef struct {
  const char *label, *source;
  int64_t seed;
  double clipped_rate, underflow_rate, overflow_step_share;
  int64_t rows, stream_rows;
} fp8_cl_rates_row;
/** A row of closedloop_drift.csv. */
typedef struct {
  const char *label;
  int64_t step, tensors;
  double median_drift, p90_drift;
} fp8_cl_drift_row;
/** A row of closedloop_events.csv (period before, during, after or all). */
typedef struct {
  const char *label, *period;
  int64_t open_events, closed_events, both;
  double precision, recall;
} fp8_cl_events_row;
/** A row of closedloop_spearman.csv (rate clipped_rate, underflow_rate, overflow_step_share). */
typedef struct {
  const char *rate;
  int64_t labels;
  double rho;
} fp8_cl_spearman_row;
/** A row of closedloop_selfcheck.csv. */
typedef struct {
  const char *label;
  int64_t seed, te_rows, differ;
} fp8_cl_selfcheck_row;

/** The comparison's rows, one array per file. */
typedef struct {
  size_t nloss, nrates, ndrift, nevents, nspearman, nselfcheck;
  fp8_cl_loss_row *loss;
  fp8_cl_rates_row *rates;
  fp8_cl_drift_row *drift;
  fp8_cl_events_row *events;
  fp8_cl_spearman_row *spearman;
  fp8_cl_selfcheck_row *selfcheck;
} fp8_cl_tables;

/** Writes the six closedloop_*.csv files into dir (each a temporary name, renamed; numbers
 *  "%.9g", NaN empty). FP8_OK, or the first failing file's status and message. */
int fp8_closedloop_csv_write(const char *dir, const fp8_cl_tables *t, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* FP8LAB_RESULTS_CLOSEDLOOP_H */
