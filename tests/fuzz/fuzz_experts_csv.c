/* fuzz_experts_csv.c: libFuzzer target of the experts.csv reader (fp8_experts_csv_load,
 * src/results/experts_csv.c), which the report reads back. On success every row is checked
 * against what tables.h promises: GEMM names ascending and each an expert GEMM whose expert and
 * group are fp8_expert_of's, steps >= steps_run >= 0, min and max empty (-1) exactly when it
 * never ran, else min <= max and steps_run * min <= tokens <= steps_run * max; on failure, the
 * status and message. */
#include "fuzz_common.h"

#include "tables.h"
#include "trace.h" /* fp8_expert_of */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[1200], err[FZ_ERRLEN], group[256];
  fz_put("experts.csv", data, size);
  fp8_experts_table t;
  memset(&t, 0, sizeof t);
  int rc = fp8_experts_csv_load(fz_path("experts.csv", path, sizeof path), &t, err, sizeof err);
  fz_check_status("fp8_experts_csv_load", rc, err);
  if (rc == FP8_OK) {
    for (size_t i = 0; i < t.nrows; i++) {
      const fp8_expert_row *r = &t.rows[i];
      int32_t e = -1;
      if (!fp8_expert_of(r->gemm, &e, group, sizeof group) || e != r->expert ||
          strcmp(group, r->group) != 0)
        abort();
      if (i && strcmp(t.rows[i - 1].gemm, r->gemm) >= 0) abort();
      if (r->steps_run < 0 || r->steps < r->steps_run || r->tokens < 0) abort();
      if (r->steps_run == 0 ? (r->tokens_min != -1 || r->tokens_max != -1 || r->tokens != 0)
                            : (r->tokens_min < 1 || r->tokens_min > r->tokens_max ||
                               r->tokens < r->steps_run * r->tokens_min ||
                               r->tokens > r->steps_run * r->tokens_max))
        abort();
    }
  }
  fp8_experts_csv_free(&t);
  fz_del("experts.csv");
  return 0;
}
