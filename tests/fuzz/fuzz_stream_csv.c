/* fuzz_stream_csv.c: libFuzzer target of the stream.csv reader (fp8_stream_load,
 * src/results/stream.c, stream_csv.c). A table it accepts is checked against analysis.h (every
 * series the same steps, ascending) and goes on through the stream statistics the report computes
 * (fp8_analysis_stream_series). */
#include "fuzz_common.h"

#include "analysis.h"
#include "tables.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[1200], err[FZ_ERRLEN];
  fz_put("stream.csv", data, size);
  fp8_stream_table t;
  int rc = fp8_stream_load(fz_path("stream.csv", path, sizeof path), &t, err, sizeof err);
  fz_check_status("fp8_stream_load", rc, err);
  if (rc == FP8_OK) {
    for (size_t i = 0; i < t.nseries; i++) {
      const fp8_stream_series *s = &t.series[i];
      if (s->n != t.nsteps) abort();
      for (size_t k = 0; k < s->n; k++) {
        if (k && s->step[k] <= s->step[k - 1]) abort();
        if (s->step[k] != t.series[0].step[k]) abort();
      }
      fp8_group_stats o;
      memset(&o, 0, sizeof o);
      if (fp8_analysis_stream_series(s, &o) != FP8_OK) abort();
      (void)fp8_stream_find(&t, s->tensor, &s->key);
    }
    fp8_stream_free(&t);
  }
  fz_del("stream.csv");
  return 0;
}
