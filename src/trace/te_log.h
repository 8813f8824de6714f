/* te_log.h: TransformerEngine's debug statistics logs imported as a trace (`fp8lab import-te`,
 * issue 28; docs/semantics.md, "TransformerEngine debug logs").
 *
 * TE (>= 2.4, transformer_engine.debug over nvidia-dlfw-inspect) writes, with LogTensorStats,
 * one text file per process, <log_dir>/nvdlfw_inspect_statistics_logs/
 * nvdlfw_inspect[_<YYYYmmdd_HHMMSS>]_globalrank-<R>.log, each line
 *   <asctime> - INFO - <layer>_<tensor>_<stat> \t\t\t\t iteration=<%06d> \t\t\t\t value=<%.4f>
 * The `cur_amax` lines become the trace's amax.csv (one per rank: rank_<r>/amax.csv when there
 * are several files), step = TE's iteration, tensor = <layer>.<role> (activation -> input,
 * weight -> weight, output -> output, gradient -> grad_output, dgrad -> grad_input; wgrad has
 * no role: TE does not cast it to FP8). A value that reads 0.0000 (an amax below 5e-5, or a
 * zero tensor: the four decimals cannot tell) is left out and counted. te_log.json records
 * the source files, the logging intervals (the log's; each tensor's and each statistic's: TE
 * lets each have its own freq) and those counts.
 * Only what TE writes is taken (docs/semantics.md, "TransformerEngine debug logs"): one
 * iteration=/value= pair per line after a name without whitespace, a finite value with exactly
 * four decimals that fits float32 (or inf, -inf; nan only for a statistic other than
 * cur_amax), every line ended by a newline (a cut-off last line is an error, or dropped and
 * counted with FP8_TE_DROP_CUT_LINE), the logs regular files. */
#ifndef FP8LAB_TRACE_TE_LOG_H
#define FP8LAB_TRACE_TE_LOG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** te_log.json, the import's record in the trace folder, and the keys of it that run.json's
 *  trace.te_log carries on (the trace reader reads them, fp8_trace's te_* fields; the run's
 *  run.json writes them again and the report reads them there): spelled here only. */
#define FP8_TE_LOG_FILE "te_log.json"
#define FP8_TE_LOG_INTERVAL "interval"
#define FP8_TE_LOG_ZERO_VALUES "zero_values"
#define FP8_TE_LOG_COARSE_VALUES "coarse_values"
/** schema 2 (issue 41): "intervals_differ" at the top level; in each entry of "tensors" (its
 *  "tensor" name) the tensor's own cur_amax "interval" (also first_iteration, last_iteration
 *  and "statistics": each statistic's interval). run.json's trace.te_log carries the intervals
 *  on as "tensor_intervals" (name -> interval). */
#define FP8_TE_LOG_INTERVALS_DIFFER "intervals_differ"
#define FP8_TE_LOG_TENSORS "tensors"
#define FP8_TE_LOG_TENSOR "tensor"
#define FP8_TE_LOG_TENSOR_INTERVALS "tensor_intervals"

/** fp8_te_import's flags: a last line without a newline (a write cut off when the job ended)
 *  is dropped, counted (te_log.json's cut_lines_dropped) and warned about, not an error. */
#define FP8_TE_DROP_CUT_LINE 1u

/** TE's overflows% per (iteration, tensor), beside te_log.json: the report's TE section reads
 *  it, and only as the run recorded it (run.json inputs[], its sha256; issue 41). */
#define FP8_TE_OVERFLOWS_FILE "te_overflows.csv"

/** What an import found (for the command's summary line; te_log.json has it all). */
typedef struct {
  size_t ranks;          /**< log files, one per global rank */
  size_t lines;          /**< statistics lines read, over all files */
  size_t amax_rows;      /**< cur_amax values written to amax.csv, over all ranks */
  size_t tensors;        /**< distinct tensors (<layer>.<role>) of the amax rows written, over
                              all ranks */
  size_t cut_lines_dropped;  /**< cut-off last lines dropped (FP8_TE_DROP_CUT_LINE) */
  size_t ranks_without_amax; /**< ranks whose log gave no amax row (empty, or all 0.0000) */
  char **warnings;       /**< [nwarnings] lines for stderr (no newline): the dropped cut-off
                              lines (file:line), the ranks without an amax row (rank, file);
                              set on success only: fp8_te_import_summary_free */
  size_t nwarnings;
  size_t zero_values;    /**< cur_amax values that read 0.0000: left out */
  size_t coarse_values;  /**< written, with fewer than 3 significant digits */
  size_t other_lines;    /**< statistics other than cur_amax (and wgrad's cur_amax) */
  int64_t interval;      /**< the logging interval inferred from the iterations (0: one): the
                              gcd over every tensor (each tensor's own is in te_log.json) */
  int64_t first, last;   /**< the first and last logged iteration */
  int64_t interval_min, interval_max; /**< the tensors' own intervals: the least and the
                              largest (equal unless they differ per tensor) */
  int ranks_identical;   /**< every rank logged the same cur_amax lines (TE's default
                              reduction over all ranks) */
} fp8_te_import_summary;

/** Reads the statistics logs in logdir (TE's log_dir, or its nvdlfw_inspect_statistics_logs
 *  folder) and writes a trace as tracedir: created (with its parents), or an empty folder
 *  replaced; a non-empty tracedir is an error unless force is set and it is an earlier
 *  import's folder (te_log.json lists every file in it: docs/capture.md), which is then
 *  replaced whole. The trace is written into <parent>/.<base>.fp8lab-import.<pid> and moved
 *  in at the end (over an earlier import, swapped atomically), so a failure leaves tracedir as
 *  it was. Bad input or a refused folder: FP8_EFORMAT / FP8_EINVAL with err naming the file
 *  and line or the folder and the entry; FP8_EWRITE (a failed write), FP8_EIO, FP8_ENOMEM
 *  otherwise. */
int fp8_te_import(const char *logdir, const char *tracedir, int force, unsigned flags,
                  fp8_te_import_summary *sum, char *err, size_t errlen);

/** Frees the summary's warnings (safe on a zeroed summary and twice). */
void fp8_te_import_summary_free(fp8_te_import_summary *sum);

/** The role suffix fp8lab gives TE's tensor name (activation, weight, output, gradient,
 *  dgrad), or NULL (wgrad, or not a TE tensor name). */
const char *fp8_te_role_of(const char *te_tensor, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* FP8LAB_TRACE_TE_LOG_H */
