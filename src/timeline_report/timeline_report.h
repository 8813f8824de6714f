/* timeline_report.h: the outputs of `fp8lab timeline` (docs/overlap.md reads them):
 *   timeline.csv       mode,step,stream,op,tensor,start_us,end_us,source: every op of every
 *                      measured step (source "measured") and of the model's step ("model")
 *   timeline.md        per mode: step time (median, spread), exposed bookkeeping and its share,
 *                      the update kernel and the all-reduce, the model beside the measurement,
 *                      the update kernel alone, current minus delayed per layer, world sizes
 *   timeline.png       one step per mode as a Gantt chart (streams as lanes)
 *   timeline_zoom.png  the same around the end of the forward pass, where the forward
 *                      bookkeeping runs
 * All written to temporary names and renamed. */
#ifndef FP8LAB_TIMELINE_REPORT_TIMELINE_REPORT_H
#define FP8LAB_TIMELINE_REPORT_TIMELINE_REPORT_H

#include <stdio.h>

#include "timeline.h"

typedef struct {
  const fp8_tl_shape *shape;
  const fp8_tl_device *dev;         /**< the model's device */
  size_t nplans;
  const fp8_tl_plan *plans;         /**< the modes run, in order */
  fp8_tl_span *const *model;        /**< [nplans] the model's spans of one step */
  const fp8_tl_totals *model_tot;   /**< [nplans] */
  const fp8_tl_measurement *meas;   /**< NULL: not measured */
  const struct fp8_tl_stats *stats; /**< [nplans] fp8_tl_stats_of of every plan, computed once;
                                         NULL exactly when meas is */
  const char *not_measured;         /**< why not (no device, --device cpu) */
  int32_t steps;                    /**< measured steps per mode */
  int32_t bench_tensors, bench_history;
  const char *date;                 /**< YYYY-MM-DD of the run */
} fp8_tl_report;

/** Per mode, the measured steps' statistics (all NaN when not measured). */
typedef struct fp8_tl_stats {
  double step_med, step_min, step_max;  /**< step time, us */
  double exposed_med, exposed_min, exposed_max;
  double vs_none_med, vs_none_min, vs_none_max; /**< step minus delayed-none's step of the
                                                    same round, us (NaN without that mode) */
  double update_med[2], allreduce_med;
  int32_t median_step;                  /**< the measured step whose time is the median */
} fp8_tl_stats;

/** The statistics of plan k's measured steps (r->meas must be set). */
int fp8_tl_stats_of(const fp8_tl_report *r, size_t k, fp8_tl_stats *st);
/** Plan k's step time minus plan kref's over the rounds both have a complete measured step in
 *  (A and B of one round ran back to back): out = {median, min, max}, NaN without pairs. */
int fp8_tl_paired(const fp8_tl_report *r, size_t k, size_t kref, double out[3]);

int fp8_tl_write_csv(const char *dir, const fp8_tl_report *r, char *err, size_t errlen);
int fp8_tl_write_md(const char *dir, const fp8_tl_report *r, char *err, size_t errlen);
/** timeline.png and timeline_zoom.png: the measured median step of each mode, else the
 *  model's step. */
int fp8_tl_write_png(const char *dir, const fp8_tl_report *r, char *err, size_t errlen);
/** The summary table on a terminal. */
void fp8_tl_print(FILE *fp, const fp8_tl_report *r);

#endif /* FP8LAB_TIMELINE_REPORT_TIMELINE_REPORT_H */
