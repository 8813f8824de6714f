/* closedloop_report_internal.h: what closedloop_report.c (the study loaded, the tables, the
 * document) and closedloop_plots.c (the two charts) share. */
#ifndef FP8LAB_REPORT_CLOSEDLOOP_REPORT_INTERNAL_H
#define FP8LAB_REPORT_CLOSEDLOOP_REPORT_INTERNAL_H

#include "closedloop.h"
#include "closedloop_stats.h"
#include "tables.h"

/** A study loaded: study.ini, the open run, every closed replay (label-major, [l * nseeds + s])
 *  and every run's loss.csv and eval.csv. */
typedef struct {
  fp8_study st;
  fp8_steps_table open_steps;
  fp8_stream_table open_stream;
  fp8_steps_table *cl_steps;      /**< [nlabels * nseeds] */
  fp8_stream_table *cl_stream;    /**< [nlabels * nseeds] */
  fp8_cl_run *closed;             /**< [nlabels * nseeds] */
  fp8_cl_inputs in;
  fp8_loss_table *hp_loss, *hp_eval;  /**< [nseeds] */
  fp8_loss_table *cl_loss, *cl_eval;  /**< [nlabels * nseeds] */
} cl_study;

int cl_plot_loss(const cl_study *s, const char *path, char *err, size_t errlen);
int cl_plot_drift(const cl_study *s, const fp8_cl_result *r, const char *path, char *err,
                  size_t errlen);

/** closedloop.md and closedloop.ipynb in outdir (closedloop_report_text.c); drift_plot: the
 *  drift chart was drawn. */
int cl_write_doc(const cl_study *s, const fp8_cl_result *r, const char *outdir, int drift_plot,
                 char *err, size_t errlen);

#endif
