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
 * the source files, the logging interval and those counts. */
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
/** TE's overflows% per (iteration, tensor), beside te_log.json: the report's TE section reads
 *  it, and only as the run recorded it (run.json inputs[], its sha256; issue 41). */
#define FP8_TE_OVERFLOWS_FILE "te_overflows.csv"

/** What an import found (for the command's summary line; te_log.json has it all). */
typedef struct {
  size_t ranks;          /**< log files, one per global rank */
  size_t lines;          /**< statistics lines read, over all files */
  size_t amax_rows;      /**< cur_amax values written to amax.csv, over all ranks */
  size_t tensors;        /**< distinct tensors (<layer>.<role>) of rank 0 */
  size_t zero_values;    /**< cur_amax values that read 0.0000: left out */
  size_t coarse_values;  /**< written, with fewer than 3 significant digits */
  size_t other_lines;    /**< statistics other than cur_amax (and wgrad's cur_amax) */
  int64_t interval;      /**< the logging interval inferred from the iterations (0: one) */
  int64_t first, last;   /**< the first and last logged iteration */
  int ranks_identical;   /**< every rank logged the same cur_amax lines (TE's default
                              reduction over all ranks) */
} fp8_te_import_summary;

/** Reads the statistics logs in logdir (TE's log_dir, or its nvdlfw_inspect_statistics_logs
 *  folder) and writes a trace into tracedir (created; with force an existing trace's amax.csv,
 *  rank_<r>/amax.csv and te_log.json are replaced, else a non-empty tracedir is an error).
 *  Files are written under temporary names and renamed. Bad input: FP8_EFORMAT with err
 *  naming the file and line; FP8_EIO, FP8_ENOMEM otherwise. */
int fp8_te_import(const char *logdir, const char *tracedir, int force,
                  fp8_te_import_summary *sum, char *err, size_t errlen);

/** The role suffix fp8lab gives TE's tensor name (activation, weight, output, gradient,
 *  dgrad), or NULL (wgrad, or not a TE tensor name). */
const char *fp8_te_role_of(const char *te_tensor, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* FP8LAB_TRACE_TE_LOG_H */
