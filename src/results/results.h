/* results.h: the one owner of the replay's output schemas (steps.csv, summary.csv, gemm.csv,
 * histograms.csv): one column table per file, used by the writers (the runner, through the row
 * writers below) and by the readers of this folder (tables.h), so that a column cannot be renamed or
 * moved in one place only. New columns are appended, never renamed (ARCHITECTURE.md); a
 * schema lists the column counts of the older files it still reads.
 *
 * Numbers are written by fp8_csv_put_num (outfile.h: "%.9g", inf / -inf / nan); docs/outputs.md
 * documents each column.
 */
#ifndef FP8LAB_RESULTS_RESULTS_H
#define FP8LAB_RESULTS_RESULTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "block.h"
#include "fp8.h"
#include "recipe.h"

#ifdef __cplusplus
extern "C" {
#endif

/** One output file's columns. */
typedef struct {
  const char *file;            /**< "steps.csv" */
  const char *const *columns;  /**< ncols names, in file order */
  int ncols;
  int versions[5];             /**< column counts a reader accepts (older files first, the
                                    current ncols last), 0-terminated */
} fp8_schema;

/** steps.csv: one row per (snapshot step, tensor, configuration). */
typedef enum {
  FP8_STEPS_COL_TENSOR, FP8_STEPS_COL_ROLE, FP8_STEPS_COL_STEP, FP8_STEPS_COL_RECIPE,
  FP8_STEPS_COL_KIND, FP8_STEPS_COL_FORMAT, FP8_STEPS_COL_HISTORY_LEN, FP8_STEPS_COL_MARGIN,
  FP8_STEPS_COL_AMAX_COMPUTE, FP8_STEPS_COL_AMAX, FP8_STEPS_COL_SCALE, FP8_STEPS_COL_N,
  FP8_STEPS_COL_NONFINITE, FP8_STEPS_COL_ZEROS, FP8_STEPS_COL_OVERFLOW,
  FP8_STEPS_COL_UNDERFLOW, FP8_STEPS_COL_SUBNORMAL, FP8_STEPS_COL_MSE, FP8_STEPS_COL_SNR_DB,
  /* appended with the block recipes (empty for per-tensor kinds) */
  FP8_STEPS_COL_NBLOCKS, FP8_STEPS_COL_BLOCKS_WITH_OVERFLOW, FP8_STEPS_COL_LOG2_SCALE_MIN,
  FP8_STEPS_COL_LOG2_SCALE_MAX, FP8_STEPS_COL_LOG2_SCALE_STD,
  /* appended with saturation that matters (issue 13): all kinds */
  FP8_STEPS_COL_CLIPPED, FP8_STEPS_COL_OVERSHOOT, FP8_STEPS_COL_COS_SIM, FP8_STEPS_COL_WARMUP,
  /* appended with the FP4 kinds (issue 29): stochastic rounding's expectation (empty unless
   * the row's elements were rounded stochastically; the counts hold one seeded draw) */
  FP8_STEPS_COL_UNDERFLOW_EXPECTED, FP8_STEPS_COL_MSE_EXPECTED,
  FP8_STEPS_COL_COUNT
} fp8_steps_col;

/** summary.csv: one row per (tensor, configuration), totals over the snapshot steps. */
typedef enum {
  FP8_SUMMARY_COL_TENSOR, FP8_SUMMARY_COL_ROLE, FP8_SUMMARY_COL_RECIPE, FP8_SUMMARY_COL_KIND,
  FP8_SUMMARY_COL_FORMAT, FP8_SUMMARY_COL_HISTORY_LEN, FP8_SUMMARY_COL_MARGIN,
  FP8_SUMMARY_COL_AMAX_COMPUTE, FP8_SUMMARY_COL_STEPS, FP8_SUMMARY_COL_N,
  FP8_SUMMARY_COL_NONFINITE, FP8_SUMMARY_COL_ZEROS, FP8_SUMMARY_COL_OVERFLOW,
  FP8_SUMMARY_COL_UNDERFLOW, FP8_SUMMARY_COL_SUBNORMAL, FP8_SUMMARY_COL_OVERFLOW_RATE,
  FP8_SUMMARY_COL_UNDERFLOW_RATE, FP8_SUMMARY_COL_SUBNORMAL_RATE,
  FP8_SUMMARY_COL_STEPS_WITH_OVERFLOW, FP8_SUMMARY_COL_MSE, FP8_SUMMARY_COL_SNR_DB,
  FP8_SUMMARY_COL_SNR_DB_MIN, FP8_SUMMARY_COL_AMAX_MAX,
  /* appended with saturation that matters (issue 13) */
  FP8_SUMMARY_COL_CLIPPED, FP8_SUMMARY_COL_CLIPPED_RATE, FP8_SUMMARY_COL_STEPS_WITH_CLIPPED,
  FP8_SUMMARY_COL_OVERSHOOT_MAX, FP8_SUMMARY_COL_SCALE_INV_MIN, FP8_SUMMARY_COL_SCALE_INV_MAX,
  FP8_SUMMARY_COL_COS_SIM_MIN,
  FP8_SUMMARY_COL_COUNT
} fp8_summary_col;

/** gemm.csv: one row per (snapshot step, layer, GEMM, configuration). */
typedef enum {
  FP8_GEMM_COL_LAYER, FP8_GEMM_COL_GEMM, FP8_GEMM_COL_STEP, FP8_GEMM_COL_RECIPE,
  FP8_GEMM_COL_KIND, FP8_GEMM_COL_HISTORY_LEN, FP8_GEMM_COL_MARGIN, FP8_GEMM_COL_AMAX_COMPUTE,
  FP8_GEMM_COL_REL_ERROR,
  FP8_GEMM_COL_REL_ERROR_LO, FP8_GEMM_COL_REL_ERROR_HI, /* issue 27: gemm_error = sampled only */
  FP8_GEMM_COL_COUNT
} fp8_gemm_col;

/** stream.csv: one row per (replay step, micro-batch, tensor, delayed configuration): every
 *  step of the union of snapshot and amax.csv steps, also where the tensor did not run (amax 0);
 *  a step whose amax.csv rows carry several micro-batches has rows for each. */
typedef enum {
  FP8_STREAM_COL_TENSOR, FP8_STREAM_COL_ROLE, FP8_STREAM_COL_STEP, FP8_STREAM_COL_RECIPE,
  FP8_STREAM_COL_FORMAT, FP8_STREAM_COL_HISTORY_LEN, FP8_STREAM_COL_MARGIN,
  FP8_STREAM_COL_AMAX_COMPUTE, FP8_STREAM_COL_SNAPSHOT, FP8_STREAM_COL_AMAX,
  FP8_STREAM_COL_SCALE, FP8_STREAM_COL_OVERSHOOT, FP8_STREAM_COL_WARMUP,
  FP8_STREAM_COL_MICRO, FP8_STREAM_COL_TE_SCALE, /* issue 17: appended */
  FP8_STREAM_COL_COUNT
} fp8_stream_col;

/** histograms.csv: one row per (snapshot step, tensor, occupied log2 bin). */
typedef enum {
  FP8_HIST_COL_TENSOR, FP8_HIST_COL_STEP, FP8_HIST_COL_LOG2_BIN, FP8_HIST_COL_COUNT_,
  FP8_HIST_COL_COUNT
} fp8_hist_col;

extern const fp8_schema fp8_schema_steps;
extern const fp8_schema fp8_schema_summary;
extern const fp8_schema fp8_schema_gemm;
extern const fp8_schema fp8_schema_histograms;
extern const fp8_schema fp8_schema_stream;

/** Writes the header line ("col,col,...\n"). */
void fp8_schema_put_header(FILE *fp, const fp8_schema *s);
/** The header of a file with the first ncols columns of s (a version of s->versions). */
void fp8_schema_put_header_n(FILE *fp, const fp8_schema *s, int ncols);
/** Checks a header line (without its newline; a trailing '\r' is accepted): it must name the
 *  first k columns of s in order, k one of s->versions. Returns k, or 0 when it matches no
 *  version. */
int fp8_schema_match_header(const fp8_schema *s, const char *line);
/** Index of column `name` in s, or -1. */
int fp8_schema_column(const fp8_schema *s, const char *name);

/* ------------------------------------------------------------------ rows */

/** One steps.csv row: a tensor at a step under one configuration. */
typedef struct {
  const char *tensor;
  fp8_role role;
  int64_t step;
  const fp8_config *config;
  fp8_format format;           /**< the resolved format */
  float amax;
  float scale;                 /**< per-tensor kinds; ignored for block kinds */
  const fp8_stats *stats;
  const fp8_block_stats *block;/**< block kinds; ignored otherwise */
  int warmup;                  /**< 1: a warm-up step of this tensor (docs/semantics.md) */
} fp8_steps_row;

/** overshoot of a per-tensor cast: log2(amax * scale / fp8_max) in double; -inf for amax 0. */
double fp8_overshoot(float amax, float scale, fp8_format f);
/** The overshoot column of a steps.csv row (block kinds: the block statistics' own). */
double fp8_steps_row_overshoot(const fp8_steps_row *r);

void fp8_results_put_steps_row(FILE *fp, const fp8_steps_row *r);

/** Totals of one (tensor, configuration) over the snapshot steps (a summary.csv row). */
typedef struct {
  int64_t steps, steps_with_overflow, steps_with_clipped;
  fp8_stats st;
  double snr_min;              /**< start: +inf */
  float amax_max;
  double overshoot_max;        /**< start: -inf */
  float scale_inv_min, scale_inv_max; /**< per-tensor kinds; start: NaN (no step yet) */
  double cos_min;              /**< start: +inf */
} fp8_summary_acc;

void fp8_summary_acc_init(fp8_summary_acc *a);
/** Adds one steps.csv row (its statistics, amax, scale, overshoot). */
void fp8_summary_acc_add(fp8_summary_acc *a, const fp8_steps_row *r);
void fp8_results_put_summary_row(FILE *fp, const char *tensor, fp8_role role,
                                 const fp8_config *cf, fp8_format format,
                                 const fp8_summary_acc *a);

/** One stream.csv row. */
typedef struct {
  const char *tensor;
  fp8_role role;
  int64_t step;
  const fp8_config *config;    /**< a delayed configuration */
  fp8_format format;
  int snapshot;                /**< 1: the step has this tensor's snapshot (a steps.csv row) */
  float amax;                  /**< the tensor's own amax at the step (snapshot, amax.csv, or 0) */
  float scale;                 /**< the scale the step (micro-batch) used */
  int warmup;
  int64_t micro;               /**< the micro-batch (0 without micro rows) */
  float te_scale;              /**< TE's scale from amax.csv; 0: not given (empty column) */
} fp8_stream_row;

void fp8_results_put_stream_row(FILE *fp, const fp8_stream_row *r);
/** A run's table of the stream rows' configuration columns (recipe, format, history_len,
 *  margin, amax_compute), made on first use: one per run and writing thread, for one
 *  configurations array that does not change meanwhile. new: NULL when out of memory (the
 *  columns are then made for each row). */
typedef struct fp8_stream_texts fp8_stream_texts;
fp8_stream_texts *fp8_stream_texts_new(void);
void fp8_stream_texts_free(fp8_stream_texts *t);
/** The stream.csv rows of one tensor at one (step, micro-batch), in configuration order: one
 *  for each c < nconfigs with want[c], configuration configs[c] in format formats[c] with
 *  scale scales[c] (base's config, format and scale are not read). Byte for byte the rows
 *  fp8_results_put_stream_row writes, faster: what they share (the key, the amax, the tail)
 *  and each distinct scale's text and overshoot are formatted once, each configuration's
 *  columns once per run (texts, which may be NULL), and the rows are written at once. */
void fp8_results_put_stream_rows(FILE *fp, const fp8_stream_row *base, const fp8_config *configs,
                                 const fp8_format *formats, const float *scales,
                                 const unsigned char *want, size_t nconfigs,
                                 fp8_stream_texts *texts);

/* ------------------------------------------------------------------ the compact stream
 * stream.npy + stream.json (streamnpy.c; docs/semantics.md "The compact stream"): one NumPy
 * record per replay (step, micro-batch), fields step <i8, micro <i8, amax <f4 [T],
 * te_scale <f4 [T] (NaN: none), snapshot |u1 [T], warmup |u1 [T], scale <f4 [T, C] (NaN where
 * configuration c does not apply to tensor t), T the stream's tensors and C the delayed
 * configurations, as stream.json names them. */

/** The names of stream.npy's positions, for stream.json. */
typedef struct {
  size_t nrec, ntensors, nconfigs;
  const char *const *names;      /**< [ntensors] */
  const fp8_role *roles;         /**< [ntensors] */
  const fp8_config *const *configs; /**< [nconfigs] */
  const unsigned char *applies;  /**< [ntensors * nconfigs] */
  const fp8_format *formats;     /**< [ntensors * nconfigs] (where applies) */
} fp8_streamnpy_index;

#define FP8_STREAMNPY_FILE "stream.npy"
#define FP8_STREAMNPY_INDEX "stream.json"
#define FP8_STREAMNPY_HEADER_MAX 640
/** The .npy header (version 1.0) of nrec records into buf: its length (a multiple of 64), or
 *  -1 when it does not fit. */
int fp8_streamnpy_header(size_t nrec, size_t ntensors, size_t nconfigs, char *buf, size_t len);
size_t fp8_streamnpy_record_size(size_t ntensors, size_t nconfigs);
void fp8_streamnpy_put_record(FILE *fp, int64_t step, int64_t micro, const float *amax,
                              const float *te_scale, const unsigned char *snapshot,
                              const unsigned char *warmup, const float *scale, size_t ntensors,
                              size_t nconfigs);
/** stream.json's text; 0, or -1 (out of memory, or the write failed). */
int fp8_streamnpy_put_index(FILE *fp, const fp8_streamnpy_index *ix);

/** A gemm.csv row; with interval (gemm_error = sampled: lo and hi of rel_error's 95% interval,
 *  the two appended columns) or without (exact: 9 columns, the file as before). */
void fp8_results_put_gemm_row(FILE *fp, const char *layer, int gemm_kind, int64_t step,
                              const fp8_config *cf, double rel_error, const double *interval);

/** The rows of one tensor's log2 histogram at one step (occupied bins only). */
void fp8_results_put_histogram(FILE *fp, const char *tensor, int64_t step,
                               const int64_t hist[FP8_LOG2_HIST_BINS]);

#ifdef __cplusplus
}
#endif

#endif /* FP8LAB_RESULTS_RESULTS_H */
