/* report.h: `fp8lab report OUTDIR`: turns a run's results (steps.csv, histograms.csv, run.json)
 * into analysis.csv, recommendations.csv, PNG plots, report.md and a Jupyter notebook.
 *
 * Reads results only (never engine internals), so a report can be regenerated without
 * re-running the sweep. Every file is written to a temporary name and renamed. The folder is
 * the caller's to hold (src/run's run_folder.h: its lock, an interrupted run's marker): fp8lab
 * run hands its replay's hold on to the report, fp8lab report takes one first.
 */
#ifndef FP8LAB_REPORT_REPORT_H
#define FP8LAB_REPORT_REPORT_H

#include <stddef.h>

typedef struct {
  double overflow_budget; /**< < 0: take it from run.json ([analysis] overflow_budget), else 1e-5 */
  double step_budget;     /**< < 0: take it from run.json ([analysis] step_budget), else 0.01 */
  int max_timelines;      /**< amax timelines drawn (tensors with the most overflow); 0: 6 */
  int procs;              /**< processes drawing the plots (forked; same files whatever the number):
                               1 draws them here; 0: the online CPUs, at most 4 */
} fp8_report_options;

/** What a report produced, for the caller's final message. */
typedef struct {
  char report_md[4400];
  char notebook[4400];
  char plots_dir[4400];
  size_t nplots;
} fp8_report_summary;

/** Writes the analysis of the run in outdir. Returns an fp8_status with a one-line message. */
int fp8_report_generate(const char *outdir, const fp8_report_options *opt, fp8_report_summary *sum,
                        char *err, size_t errlen);

#endif
