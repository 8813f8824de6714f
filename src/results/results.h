/* results.h: the one owner of the replay's output schemas (steps.csv, summary.csv, gemm.csv,
 * histograms.csv, stream.csv and the compact stream, experts.csv): one column table per file (fp8_schema,
 * the FP8_*_COL_* enums: the one way a CSV of fp8lab declares its columns, analysis.h's two
 * files included), used by the writers declared here (the runner's rows) and by the readers of
 * this folder (tables.h), so that a column cannot be renamed or moved in one place only. New
 * columns are appended, never renamed (ARCHITECTURE.md); a schema lists the column counts of
 * the older files it still reads.
 *
 * One file of this folder per output file, named for it (steps_csv.c, summary_csv.c,
 * gemm_csv.c, histograms_csv.c, stream_csv.c, stream_npy.c, run_json.c), holding its columns,
 * its writer and its reader; functions are fp8_<file>_<verb> (fp8_steps_csv_put_row,
 * fp8_gemm_csv_load). Numbers are written as fp8_csv_put_num writes them (outfile.h: "%.9g",
 * inf / -inf / nan); docs/outputs.md documents each column.
 */
#ifndef FP8LAB_RESULTS_RESULTS_H
#define FP8LAB_RESULTS_RESULTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "block.h"
#include "outfile.h" /* fp8_outfile */
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
  /* issue 42: the FP4 verdict's paired ratio, only in a run with an FP4 configuration and its
   * FP8 reference (then rel_error_lo and rel_error_hi are there too, empty in the exact mode) */
  FP8_GEMM_COL_RATIO, FP8_GEMM_COL_RATIO_LO, FP8_GEMM_COL_RATIO_HI, FP8_GEMM_COL_RATIO_MODE,
  /* issue 46: [analysis] tensor_core other than exact only (then every column before is there,
   * the interval and ratio ones possibly empty): the row's accumulation model (h100, b200, or
   * exact where it does not apply: a block kind's or a bf16 operand), its GEMM-level form
   * (fast, promoted, exact), the same GEMM's error with exact accumulation (the FP32 GEMM) and
   * fprop's with the model's other form, promoted (empty on other rows) */
  FP8_GEMM_COL_TENSOR_CORE, FP8_GEMM_COL_ACCUMULATION, FP8_GEMM_COL_REL_ERROR_EXACT_ACC,
  FP8_GEMM_COL_REL_ERROR_ALT_ACC,
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

/** experts.csv: one row per expert GEMM of a Mixture-of-Experts trace (one with tokens.csv),
 *  its routed tokens over the replay's steps (tables.h: the row, the writer, the reader). */
typedef enum {
  FP8_EXPERTS_COL_GEMM, FP8_EXPERTS_COL_GROUP, FP8_EXPERTS_COL_EXPERT, FP8_EXPERTS_COL_STEPS,
  FP8_EXPERTS_COL_STEPS_RUN, FP8_EXPERTS_COL_TOKENS, FP8_EXPERTS_COL_TOKENS_MIN,
  FP8_EXPERTS_COL_TOKENS_MAX,
  FP8_EXPERTS_COL_COUNT
} fp8_experts_col;

extern const fp8_schema fp8_schema_steps;
extern const fp8_schema fp8_schema_summary;
extern const fp8_schema fp8_schema_gemm;
extern const fp8_schema fp8_schema_histograms;
extern const fp8_schema fp8_schema_stream;
extern const fp8_schema fp8_schema_experts;

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
/** Opens <dir>/<s->file> as an outfile (a temporary name, renamed by fp8_outfile_commit) and
 *  writes its header: FP8_OK, or fp8_outfile_open's status and message. */
int fp8_schema_open(fp8_outfile *of, const char *dir, const fp8_schema *s, char *err,
                    size_t errlen);

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
double fp8_steps_csv_row_overshoot(const fp8_steps_row *r);

/** Writes one steps.csv row (steps_csv.c). */
void fp8_steps_csv_put_row(FILE *fp, const fp8_steps_row *r);

/* ------------------------------------------------------------------ summary.csv, analysis.csv */

/** What summary.csv and analysis.csv (analysis.h) both count over a (tensor, configuration)'s
 *  steps.csv rows: the rows (steps), their finite elements and the overflowed, underflowed,
 *  subnormal and clipped ones among them, the rows with an overflow and with a clipped
 *  element, the largest overshoot. One accumulation, two row sets, on purpose: summary.csv
 *  counts every snapshot row of the replay, warm-up steps included (the run's totals, made by
 *  the runner from the engines' statistics); analysis.csv only the rows past each tensor's
 *  warm-up (what the recommendations judge, read back from steps.csv). So summary.csv's
 *  overflow_rate, steps_with_overflow, steps_with_clipped and overshoot_max are analysis.csv's
 *  plus the warm-up steps' (equal for a tensor without warm-up rows). */
typedef struct {
  int64_t steps;
  int64_t finite;              /**< sum of n - nonfinite */
  int64_t overflow, underflow, subnormal, clipped; /**< totals */
  int64_t steps_with_overflow, steps_with_clipped;
  double overshoot_max;        /**< the largest non-NaN overshoot; -inf before the first */
  int64_t overshoots;          /**< rows whose overshoot was not NaN (0: overshoot_max unset) */
} fp8_tally;

void fp8_tally_init(fp8_tally *t);
/** Adds one row's counts and overshoot (NaN: none, a steps.csv written before the column). */
void fp8_tally_add(fp8_tally *t, int64_t n, int64_t nonfinite, int64_t overflow,
                   int64_t underflow, int64_t subnormal, int64_t clipped, double overshoot);
/** count over the finite elements (the *_rate columns of both files); NaN without one. */
double fp8_tally_rate(const fp8_tally *t, int64_t count);

/** Totals of one (tensor, configuration) over the snapshot steps (a summary.csv row). */
typedef struct {
  fp8_tally tally;             /**< steps; the overflow, underflow, subnormal and clipped
                                    counts and their rates; steps_with_*, overshoot_max */
  fp8_stats st;                /**< the merged statistics: n, nonfinite, zeros, mse, snr_db
                                    (its copies of the tally's counts are not read) */
  double snr_min;              /**< start: +inf */
  float amax_max;
  float scale_inv_min, scale_inv_max; /**< per-tensor kinds; start: NaN (no step yet) */
  double cos_min;              /**< start: +inf */
} fp8_summary_acc;

void fp8_summary_acc_init(fp8_summary_acc *a);
/** Adds one steps.csv row (its statistics, amax, scale, overshoot). */
void fp8_summary_acc_add(fp8_summary_acc *a, const fp8_steps_row *r);
void fp8_summary_csv_put_row(FILE *fp, const char *tensor, fp8_role role, const fp8_config *cf,
                             fp8_format format, const fp8_summary_acc *a);

/** A run's totals, as summary.csv lists them. */
typedef struct {
  size_t ntensors, nconfigs;
  const char *const *names;          /**< [ntensors] */
  const fp8_role *roles;             /**< [ntensors] */
  const fp8_config *configs;         /**< [nconfigs] */
  const fp8_format *formats;         /**< [ntensors * nconfigs] */
  const fp8_summary_acc *const *acc; /**< [ntensors][nconfigs] */
} fp8_summary_table;

/** Writes <dir>/summary.csv (temporary name, renamed): a row per (tensor, configuration) with
 *  a step, tensors then configurations in order. FP8_OK, or a status with a message. */
int fp8_summary_csv_write(const char *dir, const fp8_summary_table *s, char *err, size_t errlen);

/* ------------------------------------------------------------------ the stream */

/* The compact stream: stream.npy + stream.json (stream_npy.c; docs/semantics.md "The compact
 * stream"): one NumPy record per replay (step, micro-batch), fields step <i8, micro <i8, amax
 * <f4 [T], te_scale <f4 [T] (NaN: none), snapshot |u1 [T], warmup |u1 [T], scale <f4 [T, C]
 * (NaN where configuration c does not apply to tensor t), T the stream's tensors and C the
 * delayed configurations, as stream.json names them. */

/** The stream's tensors (those with a delayed configuration, name order) and its delayed
 *  configurations (experiment order), and which configuration applies to which tensor in what
 *  format: the shape of every record, and stream.json's content. */
typedef struct {
  size_t nrec;                   /**< records (stream.json's; the writer does not read it) */
  size_t ntensors, nconfigs;     /**< T, C */
  const char *const *names;      /**< [ntensors] */
  const fp8_role *roles;         /**< [ntensors] */
  const fp8_config *const *configs; /**< [nconfigs] */
  const unsigned char *applies;  /**< [ntensors * nconfigs] */
  const fp8_format *formats;     /**< [ntensors * nconfigs] (where applies) */
} fp8_stream_layout;
/** The rows of a record: the (tensor, configuration) pairs that apply. */
size_t fp8_stream_layout_rows(const fp8_stream_layout *lay);

/** One replay (step, micro-batch) of the stream, in the layout's shape: what a stream.npy
 *  record holds, and what that (step, micro)'s stream.csv rows are made of. The runner
 *  gathers one per (step, micro-batch), with the scales the engines held before its update. */
typedef struct {
  int64_t step, micro;
  float *amax;                   /**< [T]: the tensor's own amax (its snapshot's, amax.csv's, 0) */
  float *te_scale;               /**< [T]: TE's scale from amax.csv; NaN: none given */
  unsigned char *snapshot;       /**< [T]: 1 when the step has the tensor's snapshot */
  unsigned char *warmup;         /**< [T]: 1 at a warm-up step of the tensor */
  float *scale;                  /**< [T * C]: the scale used; NaN where it does not apply */
} fp8_stream_record;
/** Allocates a record's arrays for T tensors and C configurations: FP8_OK or FP8_ENOMEM. */
int fp8_stream_record_init(fp8_stream_record *r, size_t ntensors, size_t nconfigs);
void fp8_stream_record_free(fp8_stream_record *r);

/** The stream's one writer: records in, stream.csv rows (npy 0) or stream.npy records (npy 1:
 *  its header written already) out to fp, which stays the caller's. The same calls on the
 *  runner's thread and on its row writer thread (src/run/run_writer.c). lay's arrays must
 *  outlive the writer. new: NULL when out of memory. */
typedef struct fp8_stream_writer fp8_stream_writer;
fp8_stream_writer *fp8_stream_writer_new(FILE *fp, int npy, const fp8_stream_layout *lay);
void fp8_stream_writer_put(fp8_stream_writer *w, const fp8_stream_record *rec);
void fp8_stream_writer_free(fp8_stream_writer *w);

#define FP8_STREAM_NPY_FILE "stream.npy"
#define FP8_STREAM_JSON_FILE "stream.json"
#define FP8_STREAM_NPY_HEADER_MAX 640
/** The .npy header (version 1.0) of nrec records into buf: its length (a multiple of 64), or
 *  -1 when it does not fit. */
int fp8_stream_npy_header(size_t nrec, size_t ntensors, size_t nconfigs, char *buf, size_t len);
size_t fp8_stream_npy_record_size(size_t ntensors, size_t nconfigs);
/** stream.json's text of a layout (its nrec records), without the final newline (the caller
 *  frees it; fp8_outfile_write_text adds the newline): NULL when out of memory. */
char *fp8_stream_json_text(const fp8_stream_layout *ix);

/* ------------------------------------------------------------------ gemm.csv, histograms.csv */

/** A gemm.csv row; with interval (gemm_error = sampled: lo and hi of rel_error's 95% interval,
 *  the two appended columns) or without (exact: 9 columns, the file as before). */
/** The FP4 verdict's columns of a gemm.csv row (issue 42; docs/outputs.md): the paired ratio
 *  rel_error / the FP8 reference's rel_error at the same (layer, step, GEMM), its 95% interval
 *  and how it was computed. */
typedef enum {
  FP8_GEMM_RATIO_NONE,       /**< no ratio: the four fields empty (not an FP4 row, or the
                                  reference has no row for the layer) */
  FP8_GEMM_RATIO_SAMPLED,    /**< "sampled": the paired estimate, decided (its interval is on
                                  one side of fp4_gemm_ratio) */
  FP8_GEMM_RATIO_EXACT,      /**< "exact": gemm_error = exact, both errors exact */
  FP8_GEMM_RATIO_RECOMPUTED, /**< "recomputed": the sampled interval straddled fp4_gemm_ratio,
                                  both errors computed again on the whole output */
} fp8_gemm_ratio_mode;
/** "sampled", "exact", "recomputed" ("" for none). */
const char *fp8_gemm_ratio_mode_name(fp8_gemm_ratio_mode m);

typedef struct {
  fp8_gemm_ratio_mode mode;
  double ratio, lo, hi;
} fp8_gemm_ratio_cols;

/** gemm.csv's tensor-core columns of a row (issue 46). */
typedef enum { FP8_GEMM_ACC_EXACT, FP8_GEMM_ACC_FAST, FP8_GEMM_ACC_PROMOTED } fp8_gemm_acc;
/** "exact", "fast", "promoted". */
const char *fp8_gemm_acc_name(fp8_gemm_acc a);
typedef struct {
  int model;               /**< an fp8_tc_model (tensorcore.h): FP8_TC_EXACT where it does not
                                apply to the row */
  fp8_gemm_acc acc;
  double exact_acc, alt_acc; /**< the errors with exact accumulation and the other form
                                  (written on fprop rows under a model only, NaN as "nan";
                                  empty elsewhere) */
} fp8_gemm_tc_cols;

/** The number of gemm.csv columns a run writes: 9 (exact), 11 (sampled: the interval), 15
 *  (with the FP4 ratio: the interval columns, empty in the exact mode, and the four ratio
 *  columns), 19 (tensor_core not exact: all before, possibly empty, and the four tensor-core
 *  columns). */
int fp8_gemm_csv_ncols(int sampled, int fp4_ratio, int tensor_core);

void fp8_gemm_csv_put_row(FILE *fp, const char *layer, int gemm_kind, int64_t step,
                          const fp8_config *cf, double rel_error, const double *interval);
/** The same for a file of ncols columns (fp8_gemm_csv_ncols): with 15, interval NULL writes
 *  empty interval fields and ratio NULL (or mode NONE) four empty ratio fields. */
void fp8_gemm_csv_put_row_n(FILE *fp, int ncols, const char *layer, int gemm_kind, int64_t step,
                            const fp8_config *cf, double rel_error, const double *interval,
                            const fp8_gemm_ratio_cols *ratio, const fp8_gemm_tc_cols *tc);

/** The histograms.csv rows of one tensor's log2 histogram at one step (occupied bins only). */
void fp8_histograms_csv_put_rows(FILE *fp, const char *tensor, int64_t step,
                                 const int64_t hist[FP8_LOG2_HIST_BINS]);

#ifdef __cplusplus
}
#endif

#endif /* FP8LAB_RESULTS_RESULTS_H */
