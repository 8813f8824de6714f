/* closedloop_report.h: `fp8lab closedloop STUDY [--out DIR]` (issue 44): loads a closed-loop
 * study folder (its layout: docs/reference.md, "fp8lab closedloop"), compares the open loop
 * with the closed loop (src/analysis' closedloop_stats.h) and writes into DIR the comparison's
 * tables (closedloop_*.csv, src/results' closedloop.h), plots/closedloop_loss.png and
 * plots/closedloop_drift.png, closedloop.md and closedloop.ipynb (src/doc). Every file is
 * written to a temporary name and renamed. */
#ifndef FP8LAB_REPORT_CLOSEDLOOP_REPORT_H
#define FP8LAB_REPORT_CLOSEDLOOP_REPORT_H

#include <stddef.h>
#include <stdint.h>

/** What the comparison wrote, for the command's final message. */
typedef struct {
  char report_md[4400];
  size_t nplots;
  int64_t runs, runs_differing;  /**< closed runs; those whose replay differs from te_scale */
  char first_differing[1024];    /**< "<label> seed <s>: N of M rows ... (first: ...)", or "" */
} fp8_closedloop_summary;

/** Compares the study in dir and writes the report into out (NULL: <dir>/report; created).
 *  FP8_OK (also when the self-check found differing rows: sum->runs_differing says so);
 *  FP8_EIO / FP8_EFORMAT naming the missing or malformed input file (and line); FP8_ENOMEM;
 *  FP8_EWRITE for an output that could not be written. */
int fp8_closedloop_report(const char *dir, const char *out, fp8_closedloop_summary *sum,
                          char *err, size_t errlen);

#endif /* FP8LAB_REPORT_CLOSEDLOOP_REPORT_H */
