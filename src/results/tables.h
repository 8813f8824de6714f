/* tables.h: the replay's result files read back into memory, for the analysis and the report:
 * steps.csv (fp8_steps_load: every field validated, rows in file order, grouped by
 * configuration) and stream.csv (fp8_stream_load: one series per tensor and delayed
 * configuration). Their columns are the schemas of results.h, which the runner writes them
 * with: a file and its reader have one owner, this folder. stepscsv.c, stepscsv_groups.c and
 * streamcsv.c implement it.
 */
#ifndef FP8LAB_RESULTS_TABLES_H
#define FP8LAB_RESULTS_TABLES_H

#include <stddef.h>
#include <stdint.h>

#include "fp8.h"
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
  int64_t line;                  /**< line number in the file (header = 1) */
  size_t group;                  /**< index into fp8_steps_table.groups */
} fp8_step_row;

/** The rows of one (tensor, recipe, format, history_len, margin, amax_compute) key. */
typedef struct {
  const char *tensor;
  fp8_role role;
  const char *recipe;
  fp8_recipe_kind kind;
  fp8_format format;
  int32_t history_len, margin;   /**< 0 for current scaling */
  fp8_amax_compute amax_compute;
  size_t nrows;
  size_t *rows;                  /**< nrows indices into fp8_steps_table.rows, by step ascending */
} fp8_steps_group;

/** A loaded steps.csv. */
typedef struct {
  char *path;                    /**< as given to fp8_steps_load */
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
int fp8_steps_load(const char *path, fp8_steps_table *table, char *err, size_t errlen);

/** Same as fp8_steps_load on len bytes of text in memory; name is used in messages. */
int fp8_steps_parse(const char *name, const char *text, size_t len, fp8_steps_table *table,
                    char *err, size_t errlen);

/** Frees everything the table owns (safe on a zeroed or failed table, and twice). */
void fp8_steps_free(fp8_steps_table *table);

/** The row of a group's i-th step (i < group->nrows). */
const fp8_step_row *fp8_steps_group_row(const fp8_steps_table *table, const fp8_steps_group *g,
                                        size_t i);

/** Index of the group with this key, or -1. For current scaling pass history_len = margin = 0
 *  and FP8_AMAX_MAX. */
ptrdiff_t fp8_steps_find_group(const fp8_steps_table *table, const char *tensor,
                               const char *recipe, fp8_format format, int32_t history_len,
                               int32_t margin, fp8_amax_compute amax_compute);

/* ------------------------------------------------------------------ stream.csv in memory */

/** One (tensor, delayed configuration) of stream.csv: its rows, (step, micro) ascending (a step
 *  of several micro-batches has one entry per micro-batch). */
typedef struct {
  const char *tensor;            /**< owned by the stream table */
  fp8_role role;
  const char *recipe;
  fp8_format format;
  int32_t history_len, margin;
  fp8_amax_compute amax_compute;
  size_t n;
  int64_t *step;
  float *amax, *scale;           /**< float32, as the replay held them */
  unsigned char *snapshot, *warmup;
  int64_t *micro;                /**< 0 in a stream.csv without the column */
  float *te_scale;               /**< TE's scale; 0: none given (empty, or no column) */
} fp8_stream_series;

/** A loaded stream.csv (results.h fp8_schema_stream): every replay step x tensor x delayed
 *  configuration, as the runner writes it: at each step the same series in the same order. */
typedef struct {
  char *path;
  size_t nseries, nsteps;
  fp8_stream_series *series;     /**< the order of the rows within a step */
  void *priv_;
} fp8_stream_table;

/** Reads and validates a stream.csv. @return FP8_OK; FP8_EIO (cannot open: "<path>: ...");
 *  FP8_EFORMAT ("<path>:<line>: <what>"); FP8_ENOMEM. On failure the table is empty. */
int fp8_stream_load(const char *path, fp8_stream_table *t, char *err, size_t errlen);
void fp8_stream_free(fp8_stream_table *t);
/** The series of a delayed steps.csv group (same tensor and configuration key), or NULL. */
const fp8_stream_series *fp8_stream_find(const fp8_stream_table *t, const char *tensor,
                                         const char *recipe, fp8_format format,
                                         int32_t history_len, int32_t margin,
                                         fp8_amax_compute amax_compute);
/** 1 when the step's largest element overflowed: RN32(amax * scale) > fp8_max (float32). */
int fp8_stream_overflowed(float amax, float scale, fp8_format f);
/** 1 when it clipped: RN32(amax * scale) past the rounding midpoint (fp8_clip_bits). */
int fp8_stream_clipped(float amax, float scale, fp8_format f);

#ifdef __cplusplus
}
#endif

#endif /* FP8LAB_RESULTS_TABLES_H */
