/* run_json_internal.h: what run_json_read.c's strict reader and run_json_inputs.c share (not
 * public; run_json.h is): the readers of inputs[] and of trace.te_log.tensor_intervals, each
 * checking every entry (FP8_EFORMAT naming path and the key; FP8_ENOMEM), into r. */
#ifndef FP8LAB_RESULTS_RUN_JSON_INTERNAL_H
#define FP8LAB_RESULTS_RUN_JSON_INTERNAL_H

#include "run_json.h"

/* inputs[] of document j (absent: none) into r->inputs, r->inputs_hashed. */
int fp8_run_json_read_inputs(fp8_run_record *r, json_t *j, const char *path, char *err,
                             size_t errlen);
/* trace.te_log.tensor_intervals (the object ti) into r, sorted by name. */
int fp8_run_json_read_te_intervals(fp8_run_record *r, json_t *ti, const char *path, char *err,
                                   size_t errlen);

#endif
