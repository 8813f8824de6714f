/* tables.h: the replay's result files read back into memory, for the analysis and the report:
 * steps.csv (fp8_steps_csv_load: every field validated, rows in file order, grouped by
 * configuration), stream.csv or stream.npy (fp8_stream_load: one series per tensor and delayed
 * configuration), histograms.csv (fp8_histograms_csv_load), gemm.csv (fp8_gemm_csv_load) and
 * experts.csv (fp8_experts_csv_load; its writer is here too, beside its row).
 * Their columns are the schemas of results.h, which the runner writes them with: a file and
 * its reader have one owner, this folder, and one file of it (steps_csv.c with
 * steps_csv_groups.c, stream.c with stream_csv.c and stream_npy.c, histograms_csv.c,
 * gemm_csv.c, experts_csv.c). run.json's reader is run_json.h's.
 */
#ifndef FP8LAB_RESULTS_TABLES_H
#define FP8LAB_RESULTS_TABLES_H

#include <stddef.h>
#include <stdint.h>

#include "config_key.h"
#include "fp8.h"
#include "gemm.h"   /* fp8_gemm_kind */
#include "recipe.h" /* fp8_recipe_kind, fp8_amax_compute */

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ steps.csv in memory */

/** One row of steps.csv, as validated numbers. Strings point into the table (interned: equal
 *  names are the same pointer). */
typedef struct {
  const char *tensor;
  fp8_role role;                 /**< FP8_ROLE_UNKNOWN for an empty role column */
  int64_t step;                  /**< >= 0 */
  const char *recipe;            /**< section label */
  fp8_recipe_kind kind;
  fp8_format format;
  int32_t history_len;           /**< delayed: >= 1; current: 0 (column empty) */
  int32_t margin;                /**< delayed: |m| <= 64; current: 0 (column empty) */
  fp8_amax_compute amax_compute; /**< delayed only (FP8_AMAX_MAX for current) */
  double amax;                   /**< >= 0, may be inf */
  double scale;                  /**< > 0, finite; NaN for block kinds (per-block scales) */
  int64_t n, nonfinite, zeros, overflow, underflow, subnormal; /**< counts, each <= n */
  double mse;                    /**< >= 0; nan exactly when the row has no finite element */
  double snr_db;                 /**< may be inf (error 0); never nan or -inf */
  int64_t nblocks, blocks_with_overflow; /**< block kinds; -1 for per-tensor kinds */
  double log2_scale_min, log2_scale_max, log2_scale_std; /**< block kinds; NaN otherwise */
  int64_t clipped;               /**< <= overflow; overflow in a file written before the column
                                      (fp8_steps_table.has_clipped 0) */
  double overshoot;              /**< log2(amax s / fp8_max), -inf for amax 0; NaN: no column */
  double cos_sim;                /**< cosine of x and xhat; NaN: no column (or no finite data) */
  int warmup;                    /**< 1: a warm-up step of the tensor (docs/semantics.md) */
  /** stochastic rounding's expected underflow count and mse (FP4 kinds); NaN: none */
  double underflow_expected, mse_expected;
  int64_t line;                  /**< line number in the file (header = 1) */
  size_t group;                  /**< index into fp8_steps_table.groups */
} fp8_step_row;

/** The rows of one (tensor, recipe, format, history_len, margin, amax_compute) key. */
typedef struct {
  const char *tensor;
  fp8_role role;
  fp8_config_key key;            /**< recipe interned; history_len, margin 0 for current */
  size_t nrows;
  size_t *rows;                  /**< nrows indices into fp8_steps_table.rows, by step ascending */
} fp8_steps_group;

/** The configuration key of a row (a group holds its own: fp8_steps_group.key). */
static inline fp8_config_key fp8_step_row_key(const fp8_step_row *r) {
  fp8_config_key k = {r->recipe, r->kind, r->format, r->history_len, r->margin, r->amax_compute};
  return k;
}

/** A loaded steps.csv. */
typedef struct {
  char *path;                    /**< as given to fp8_steps_csv_load */
  size_t nrows;
  fp8_step_row *rows;            /**< file order */
  size_t ngroups;
  fp8_steps_group *groups;       /**< tensor name (strcmp), then first appearance in the file */
  size_t ntensors;
  const char **tensors;          /**< distinct tensor names, strcmp order */
  int has_clipped;               /**< the file has the clipped column (else clipped = overflow) */
  void *priv_;                   /**< string storage */
} fp8_steps_table;

/**
 * Reads and validates a steps.csv: the header names the columns of fp8_schema_steps
 * (results.h, the table the runner writes), all 24 or the first 19 of a file written before
 * the block columns; every line has as many fields as the header; numbers are "%.9g"-style
 * decimals (or inf/-inf/nan where allowed), counts non-negative integers each <= n;
 * history_len, margin, amax_compute are present for delayed rows and empty for current rows;
 * a tensor keeps one role, and one kind per recipe label (sections that share a label give
 * different tensors different kinds); a (group, step) pair appears once. A trailing '\r' per line is accepted.
 * @return FP8_OK; FP8_EIO (cannot open or read: "<path>: ..."); FP8_EFORMAT
 *         ("<path>:<line>: <what>"); FP8_ENOMEM. On failure the table is empty (safe to free).
 */
int fp8_steps_csv_load(const char *path, fp8_steps_table *table, char *err, size_t errlen);

/** Same as fp8_steps_csv_load on len bytes of text in memory; name is used in messages. */
int fp8_steps_csv_parse(const char *name, const char *text, size_t len, fp8_steps_table *table,
                        char *err, size_t errlen);

/** Frees everything the table owns (safe on a zeroed or failed table, and twice). */
void fp8_steps_csv_free(fp8_steps_table *table);


/** The row of a group's i-th step (i < group->nrows). */
const fp8_step_row *fp8_steps_csv_group_row(const fp8_steps_table *table, const fp8_steps_group *g,
                                            size_t i);

/** Index of the group of this tensor and key (its kind not compared), or -1. For current
 *  scaling the key holds history_len = margin = 0 and FP8_AMAX_MAX. */
ptrdiff_t fp8_steps_csv_find_group(const fp8_steps_table *table, const char *tensor,
                                   const fp8_config_key *key);

/* ------------------------------------------------------------------ stream.csv in memory */

/** One (tensor, delayed configuration) of stream.csv: its rows, (step, micro) ascending (a step
 *  of several micro-batches has one entry per micro-batch). */
typedef struct {
  const char *tensor;            /**< owned by the stream table */
  fp8_role role;
  fp8_config_key key;            /**< kind delayed; recipe owned by the stream table */
  size_t n;
  int64_t *step;
  float *amax;                   /**< float32, as the replay held it */
  float *scale;                  /**< float32, as the replay held it; NULL for a stream.npy
                                      series until fp8_stream_keep (fp8_stream_visit reads it) */
  unsigned char *snapshot, *warmup;
  int64_t *micro;                /**< 0 in a stream.csv without the column */
  float *te_scale;               /**< TE's scale; 0: none given (empty, or no column) */
} fp8_stream_series;

/** A loaded stream.csv (results.h fp8_schema_stream): every replay step x tensor x delayed
 *  configuration, as the runner writes it: at each step the same series in the same order. */
typedef struct {
  char *path;
  size_t nseries, nsteps;
  /** (step, micro-batch) pairs: nsteps when no step has several micro-batches; more when some
   *  has (the stream's counts are then over micro-batches, as TE's delayed history is) */
  size_t nmicro;
  fp8_stream_series *series;     /**< the order of the rows within a step */
  void *priv_;
} fp8_stream_table;

/** Reads and validates a stream.csv, or a stream.npy (path ending in .npy) with the stream.json
 *  next to it (results.h, the compact stream: the same series, the same checks; errors name
 *  the record and its byte offset). @return FP8_OK; FP8_EIO (cannot open: "<path>: ...");
 *  FP8_EFORMAT ("<path>:<line>: <what>"); FP8_ENOMEM. On failure the table is empty. */
int fp8_stream_load(const char *path, fp8_stream_table *t, char *err, size_t errlen);
void fp8_stream_free(fp8_stream_table *t);
/** A steps table without rows for a run without snapshots (issue 28, a stream-only report):
 *  one group per series of the stream (tensor, role, configuration key), no rows, groups by
 *  tensor name (strcmp) then the stream's order, the distinct tensors. Its strings are the
 *  stream's (it must outlive the table). fp8_steps_csv_free frees it. FP8_OK, FP8_ENOMEM. */
int fp8_steps_csv_from_stream(const fp8_stream_table *stream, fp8_steps_table *table);
/** Calls fn on each series (want: [nseries], 0 to skip; NULL: all) with its scales: a series
 *  of stream.csv or a kept one as it is, the others of stream.npy as a copy whose scale is read
 *  from the file by blocks of tensors (bounded memory; valid during the call). Series in
 *  table order; k is the series' index. Stops at fn's first non-zero return and returns it.
 *  FP8_EIO: the file cannot be read again ("<path>: ..."); FP8_ENOMEM. */
int fp8_stream_visit(const fp8_stream_table *t, const unsigned char *want,
                     int (*fn)(const fp8_stream_series *s, size_t k, void *ctx), void *ctx,
                     char *err, size_t errlen);
/** Reads the scales of the wanted series of a stream.npy into the table (their scale no longer
 *  NULL); nothing to do for stream.csv. FP8_OK, FP8_EIO, FP8_ENOMEM. */
int fp8_stream_keep(fp8_stream_table *t, const unsigned char *want, char *err, size_t errlen);
/** The series of a tensor under a delayed configuration key (its kind not compared), or NULL. */
const fp8_stream_series *fp8_stream_find(const fp8_stream_table *t, const char *tensor,
                                         const fp8_config_key *key);
/** 1 when the step's largest element overflowed: RN32(amax * scale) > fp8_max (float32). */
int fp8_stream_overflowed(float amax, float scale, fp8_format f);
/** 1 when it clipped: RN32(amax * scale) past the rounding midpoint (fp8_clip_bits). */
int fp8_stream_clipped(float amax, float scale, fp8_format f);

/* ------------------------------------------------------------------ histograms.csv in memory */

/** One row of histograms.csv: a (tensor, step)'s count of elements with floor(log2|x|) = bin. */
typedef struct {
  const char *tensor;            /**< points into the table's text */
  int64_t step;
  int32_t bin;                   /**< FP8_LOG2_HIST_MIN .. FP8_LOG2_HIST_MIN + BINS - 1 */
  int64_t count;
} fp8_hist_row;

/** A loaded histograms.csv (results.h fp8_schema_histograms). */
typedef struct {
  size_t n;
  fp8_hist_row *rows;            /**< file order */
  char *text_;                   /**< the file, cut into the rows' strings */
} fp8_hist_table;

/** Reads and validates a histograms.csv: the header, then lines of 4 fields (a tensor name, a
 *  step >= 0, a log2 bin in range, a count >= 0); no blank line but a last one. FP8_OK; FP8_EIO
 *  ("<path>: cannot open: ..."); FP8_EFORMAT ("<path>:<line>: <what>"); FP8_ENOMEM. On failure
 *  the table is empty. */
int fp8_histograms_csv_load(const char *path, fp8_hist_table *t, char *err, size_t errlen);
void fp8_histograms_csv_free(fp8_hist_table *t);
/** The histogram of (tensor, step): counts[0..*nbins) for the bins from *lo_bin on (a bin
 *  listed twice: its last count). FP8_EFORMAT when the table has no such rows. */
int fp8_histograms_csv_get(const fp8_hist_table *t, const char *tensor, int64_t step,
                           double *counts, int *lo_bin, int *nbins);

/* ------------------------------------------------------------------ gemm.csv in memory */

/** One row of gemm.csv: a layer's GEMM at a step under a configuration, and its error. */
typedef struct {
  const char *layer;             /**< points into the table's text */
  fp8_gemm_kind gemm;
  int64_t step;
  fp8_config_key key;            /**< recipe points into the table's text; format: none (the
                                      file has no format column: compare with
                                      FP8_KEY_IGNORE_FORMAT) */
  double rel_error;              /**< >= 0, inf (a zero reference) or nan */
  double rel_lo, rel_hi;         /**< its 95% interval (gemm_error = sampled); NaN: exact */
  /** the FP4 verdict's paired ratio to the FP8 reference and its interval (issue 42); mode
   *  FP8_GEMM_RATIO_NONE and NaN in a file without the columns or on a row without one */
  int ratio_mode;                 /**< fp8_gemm_ratio_mode (results.h) */
  double ratio, ratio_lo, ratio_hi;
  /** the accumulation (issue 46): in a file without the columns, FP8_TC_EXACT, exact, and
   *  rel_exact_acc = rel_error, rel_alt_acc NaN */
  int tensor_core;               /**< fp8_tc_model (tensorcore.h) */
  int accumulation;              /**< fp8_gemm_acc (results.h) */
  double rel_exact_acc, rel_alt_acc;
  int64_t line;                  /**< line number in the file (header = 1) */
} fp8_gemm_row;

/** A loaded gemm.csv (results.h fp8_schema_gemm). */
typedef struct {
  size_t n;
  fp8_gemm_row *rows;            /**< file order */
  char *text_;
} fp8_gemm_table;

/** Reads and validates a gemm.csv: the header, then lines of 9 fields (11 with the sampled
 *  mode's interval) as steps.csv's are
 *  checked (history_len, margin, amax_compute present for delayed rows and empty otherwise).
 *  FP8_OK; FP8_EIO; FP8_EFORMAT ("<path>:<line>: <what>"); FP8_ENOMEM. On failure the table is
 *  empty. */
int fp8_gemm_csv_load(const char *path, fp8_gemm_table *t, char *err, size_t errlen);
void fp8_gemm_csv_free(fp8_gemm_table *t);

/* ------------------------------------------------------------------ experts.csv */

/** One row of experts.csv (results.h fp8_schema_experts; docs/outputs.md): an expert GEMM's
 *  routed tokens over the replay's steps that tokens.csv covers. */
typedef struct {
  const char *gemm, *group;      /**< the GEMM (its name within a rank) and its expert group
                                      (fp8_expert_of: the index as '*'); the reader's point into
                                      the table's text */
  int32_t expert;                /**< the expert index (fp8_expert_of) */
  int64_t steps;                 /**< replay steps with a tokens.csv row for the GEMM */
  int64_t steps_run;             /**< of those, the steps with tokens > 0 */
  int64_t tokens;                /**< their total (over the ranks that hold the GEMM) */
  int64_t tokens_min, tokens_max; /**< over the steps it ran; -1: empty (it never ran) */
  int64_t line;                  /**< line number in the file (header = 1); 0 when written */
} fp8_expert_row;

/** A loaded experts.csv. */
typedef struct {
  char *path;
  size_t nrows;
  fp8_expert_row *rows;          /**< file order: GEMM names ascending (strcmp), each once */
  void *priv_;                   /**< the file's text */
} fp8_experts_table;

/** Writes <dir>/experts.csv (a temporary name, renamed): the header, then rows[0..n) as given
 *  (the caller's order: GEMM names ascending). FP8_OK, or fp8_outfile's status and message. */
int fp8_experts_csv_write(const char *dir, const fp8_expert_row *rows, size_t n, char *err,
                          size_t errlen);
/** Reads and validates an experts.csv: the header, then lines of 8 fields: the gemm an expert
 *  GEMM by the name rules, group and expert those fp8_expert_of gives it, steps >= steps_run
 *  >= 0, tokens >= 0, tokens_min and tokens_max empty when steps_run is 0 (and tokens 0), else
 *  1 <= tokens_min <= tokens_max with steps_run * tokens_min <= tokens <= steps_run *
 *  tokens_max; GEMM names strictly ascending. FP8_OK; FP8_EIO ("<path>: cannot open: ...", a
 *  missing file included); FP8_EFORMAT ("<path>:<line>: <what>"); FP8_ENOMEM. On failure the
 *  table is empty. */
int fp8_experts_csv_load(const char *path, fp8_experts_table *t, char *err, size_t errlen);
void fp8_experts_csv_free(fp8_experts_table *t);

#ifdef __cplusplus
}
#endif

#endif /* FP8LAB_RESULTS_TABLES_H */
