/* fuzz_amax_csv.c: libFuzzer target of the amax.csv reader (fp8_amax_csv_read,
 * src/trace/amaxcsv.c). On success the rows are checked against what trace.h promises: sorted
 * by step, then micro-batch, then tensor index, unique, every index naming one of the sorted
 * distinct names, te_scale 0 (not given) or positive and finite. */
#include "fuzz_common.h"

#include <math.h>

#include "trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[1200], err[FZ_ERRLEN];
  fz_put("amax.csv", data, size);
  fp8_trace tr;
  memset(&tr, 0, sizeof tr);
  int rc = fp8_amax_csv_read(fz_path("amax.csv", path, sizeof path), &tr, err, sizeof err);
  fz_check_status("fp8_amax_csv_read", rc, err);
  if (rc == FP8_OK) {
    for (size_t i = 0; i < tr.namax; i++) {
      const fp8_amax_row *a = &tr.amax[i];
      if (a->tensor < 0 || (size_t)a->tensor >= tr.namax_names) abort();
      if (a->micro < 0 || !(a->te_scale == 0.0f || (a->te_scale > 0.0f && isfinite(a->te_scale))))
        abort();
      if (i && (a->step < a[-1].step ||
                (a->step == a[-1].step &&
                 (a->micro < a[-1].micro || (a->micro == a[-1].micro && a->tensor <= a[-1].tensor)))))
        abort();
    }
    for (size_t i = 1; i < tr.namax_names; i++)
      if (strcmp(tr.amax_names[i - 1], tr.amax_names[i]) >= 0) abort();
  } else if (tr.namax || tr.amax || tr.amax_names || tr.namax_names) {
    abort(); /* on error they are left empty */
  }
  for (size_t i = 0; i < tr.namax_names; i++) free(tr.amax_names[i]);
  free(tr.amax_names);
  free(tr.amax);
  fz_del("amax.csv");
  return 0;
}
