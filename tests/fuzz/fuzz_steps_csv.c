/* fuzz_steps_csv.c: libFuzzer target of the steps.csv reader (fp8_steps_csv_parse, the in-memory
 * half of fp8_steps_csv_load: src/results/steps_csv*.c). A table it accepts goes on through what
 * `fp8lab report` computes from it next: the statistics of every group (analysis.c) and the
 * recommendations (analysis_recommend.c), whose arithmetic on accepted but odd values (nan,
 * inf, huge counts) UBSan watches. Its groups are checked against analysis.h: every row in
 * exactly one group's list, by step ascending. */
#include "fuzz_common.h"

#include "analysis.h"
#include "tables.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char err[FZ_ERRLEN];
  fp8_steps_table t;
  int rc = fp8_steps_csv_parse("steps.csv", (const char *)data, size, &t, err, sizeof err);
  fz_check_status("fp8_steps_csv_parse", rc, err);
  if (rc != FP8_OK) return 0;
  size_t seen = 0;
  for (size_t g = 0; g < t.ngroups; g++) {
    const fp8_steps_group *gr = &t.groups[g];
    for (size_t i = 0; i < gr->nrows; i++) {
      if (gr->rows[i] >= t.nrows) abort();
      if (i && fp8_steps_csv_group_row(&t, gr, i)->step <=
                   fp8_steps_csv_group_row(&t, gr, i - 1)->step)
        abort();
    }
    seen += gr->nrows;
  }
  if (seen != t.nrows) abort();
  fp8_analysis a;
  rc = fp8_analysis_compute(&t, &a, err, sizeof err);
  if (rc != FP8_OK) abort(); /* FP8_ENOMEM only, and these inputs are small */
  fp8_budgets b = {.value = FP8_ANALYSIS_OVERFLOW_BUDGET, .step = FP8_ANALYSIS_STEP_BUDGET};
  fp8_recommendations rec;
  rc = fp8_analysis_recommend(&a, &b, &rec, err, sizeof err);
  if (rc != FP8_OK) abort();
  fp8_recommendations_free(&rec);
  fp8_analysis_free(&a);
  fp8_steps_csv_free(&t);
  return 0;
}
