/* runner.h: replays a trace through every configuration of an experiment and writes the
 * results (steps.csv, summary.csv, histograms.csv, gemm.csv, run.json) into the output directory.
 *
 * One pass over the steps of the trace (the union of snapshot steps and amax.csv steps, in
 * ascending order). At each step the runner feeds the engine (engine.h) the step's tensors, one
 * rank at a time (only that rank's snapshot is mapped, so memory stays bounded by one rank's
 * step), writes the engine's results as rows (results.h), then ends the step's two phases, in
 * which the engine reduces the amaxes (reduce_amax: over the ranks of each group) and updates
 * its delayed-scaling state. The engine is a composite (engine.h): the configurations the
 * primary engine (options' factory) does not support for an op go to its CPU engine for that op.
 */
#ifndef FP8LAB_RUN_RUNNER_H
#define FP8LAB_RUN_RUNNER_H

#include <stddef.h>

#include "amax_exchange.h"
#include "engine.h"
#include "engine_choice.h"
#include "experiment.h"
#include "run_folder.h" /* fp8_run_folder */
#include "run_json.h" /* fp8_left_reason, fp8_left_keys */

typedef struct {
  const char *out_dir; /**< overrides [output] dir when not NULL */
  int force;           /**< allow writing into a non-empty output directory */
  int threads;         /**< worker threads (>= 1) */
  int quiet;           /**< no progress bar */
  int progress;        /**< draw a progress bar on stderr (caller decides: a terminal) */
  const char *argv0;   /**< for run.json */
  int resume;          /**< continue the interrupted run of the output directory from its
                            checkpoint (docs/design.md, "Crash consistency and resume") */
  double checkpoint_s; /**< seconds between checkpoints (0: after every step) */
  int report_follows;  /**< the caller writes the report next: the folder stays marked in
                            progress and locked (fp8_run_summary.folder) until the caller's
                            fp8_run_folder_close */
  fp8_engine_factory engine;        /**< NULL: the CPU engine */
  const fp8_engine_choice *choice;  /**< NULL: "cpu", no self-check */
  /** The amax exchange between the processes' GPUs (amax_exchange.h), from the engine selection
   *  when the GPU engine runs (src/engine/engine_load.h): under MPI the amaxes go through it
   *  (run_split.c); NULL: MPI_Allreduce. */
  const fp8_amax_exchange *exchange;
} fp8_run_options;

/* fp8_left_reason and fp8_left_keys (run.json's lists of the tensors without rows): run_json.h */

/** What a run produced, for the caller's final message. */
typedef struct {
  char out_dir[4096];
  long long rows;
  long long gemm_rows; /**< rows of gemm.csv (0: no layer triplet, no gemm.csv) */
  long long stream_rows; /**< rows of stream.csv (0: no delayed configuration, no stream.csv) */
  long long steps;
  long long tensors;
  long long configs;
  long long mismatches; /**< snapshot amaxes that amax.csv disagrees with (the data was used) */
  long long left_out[FP8_LEFT_COUNT]; /**< tensors without rows, per reason */
  char left_note[4096]; /**< "8 never ran: a, b, c and 5 more; left out of statistics" ("": none) */
  double wall_s;
  char engine[256];    /**< the engine's name */
  long long resumed_at; /**< --resume: the steps the interrupted run had done (-1: none) */
  char split_note[512]; /**< MPI: "MPI: 4 processes (the trace's layers, balanced by their
                             bytes), 2.9 to 3.1 MB of snapshot data each; amaxes exchanged by
                             MPI_Allreduce" ("": no MPI) */
  fp8_run_folder folder; /**< with report_follows: the folder held (its lock, its marker),
                              for the caller's fp8_run_folder_close after the report */
  /** the experiment's sections and [analysis] keys the run could not serve (it has no snapshot
   *  rows: a trace of amaxes alone), as run.json's unserved lists them; the caller names each
   *  and frees the array (free(); NULL when none) */
  fp8_unserved *unserved;
  size_t nunserved;
} fp8_run_summary;

/** Runs an experiment end to end. Returns FP8_OK, or a status with a one-line message in err.
 *  Bad input (trace, experiment, output dir) gives FP8_EINVAL / FP8_EFORMAT / FP8_EIO before
 *  anything is written: the output directory is created only after the trace's checks, and a
 *  run that fails before its first result is in place removes what it created; outputs are
 *  written to temporary names (the rows: partial files of the checkpoint, run_resume.c) and
 *  renamed at the end. While it writes the folder it holds its lock and in-progress marker
 *  (run_folder.h); with opt->resume it continues the interrupted run found there. */
int fp8_run_experiment(const fp8_experiment *ex, const fp8_run_options *opt, fp8_run_summary *sum,
                       char *err, size_t errlen);

#endif /* FP8LAB_RUN_RUNNER_H */
