/* experiment_helpers.h: experiment files in the temporary folder of tu_dir.h and the checks
 * shared by the experiment tests (definitions in experiment_helpers.c). */
#ifndef FP8LAB_TESTS_EXPERIMENT_HELPERS_H
#define FP8LAB_TESTS_EXPERIMENT_HELPERS_H

#include <check.h>

#include "testutil.h"
#include "experiment.h"
#include "tu_dir.h"

const char *write_ini(const char *rel, const char *text);

void check_delayed(const fp8_config *c, const char *label, fp8_format_sel f, int32_t hl,
                          int32_t m, fp8_amax_compute ac);

#endif
