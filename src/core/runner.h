/* runner.h: replays a trace through every configuration of an experiment and writes the
 * results (steps.csv, summary.csv, run.json) into the output directory.
 *
 * One pass over the steps of the trace (the union of snapshot steps and amax.csv steps, in
 * ascending order). At a snapshot step each tensor's data is read once: widened to float32
 * with its amax, then every configuration of that tensor is evaluated on cache-sized chunks of
 * that buffer. Memory stays bounded by one step. Delayed-scaling state lives in one slot per
 * (tensor, configuration) and is updated after the step, with the step's amax.
 *
 * A multi-rank trace (rank_<r>/ folders) is replayed as one trace of `rank_<r>/<name>` tensors,
 * a step one rank at a time (memory bounded by one rank's step); the update waits for every
 * rank of the step and, with [trace] reduce_amax, takes each tensor's amax as the max over the
 * ranks of its reduction group (docs/semantics.md).
 */
#ifndef FP8LAB_CORE_RUNNER_H
#define FP8LAB_CORE_RUNNER_H

#include <stddef.h>

#include "engine.h"
#include "experiment.h"
#include "trace.h"

typedef struct {
  const char *out_dir; /**< overrides [output] dir when not NULL */
  int force;           /**< allow writing into a non-empty output directory */
  int threads;         /**< worker threads (>= 1) */
  int quiet;           /**< no progress bar */
  int progress;        /**< draw a progress bar on stderr (caller decides: a terminal) */
  const char *argv0;   /**< for run.json */
  fp8_engine *engine;  /**< NULL: the CPU simulator; else per-tensor recipes run on it
                            (borrowed; the caller frees it) */
} fp8_run_options;

/** What a run produced, for the caller's final message. */
typedef struct {
  char out_dir[4096];
  long long rows;
  long long gemm_rows; /**< rows of gemm.csv (0: no layer triplet, no gemm.csv) */
  long long steps;
  long long tensors;
  long long configs;
  double wall_s;
} fp8_run_summary;

/** Runs an experiment end to end. Returns FP8_OK, or a status with a one-line message in err.
 *  Bad input (trace, experiment, output dir) gives FP8_EINVAL / FP8_EFORMAT / FP8_EIO before
 *  anything is written; outputs are written to temporary names and renamed at the end. */
int fp8_run_experiment(const fp8_experiment *ex, const fp8_run_options *opt, fp8_run_summary *sum,
                       char *err, size_t errlen);

#endif /* FP8LAB_CORE_RUNNER_H */
