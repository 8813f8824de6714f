/* fuzz_stream_npy.c: libFuzzer target of the compact stream's reader (fp8_stream_load of a
 * stream.npy with its stream.json, src/results/streamcsv.c; issue 27). The input is both
 * files: its first two bytes (little endian) are stream.json's length, then stream.json, then
 * stream.npy. A table it accepts is checked as fuzz_stream_csv's is (every series the same
 * steps, ascending) and goes through the report's stream statistics. */
#include "fuzz_common.h"

#include "analysis.h"
#include "tables.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  size_t jl = (size_t)data[0] | (size_t)data[1] << 8;
  if (jl > size - 2) jl = size - 2;
  char path[1200], err[FZ_ERRLEN];
  fz_put("stream.json", data + 2, jl);
  fz_put("stream.npy", data + 2 + jl, size - 2 - jl);
  fp8_stream_table t;
  int rc = fp8_stream_load(fz_path("stream.npy", path, sizeof path), &t, err, sizeof err);
  fz_check_status("fp8_stream_load", rc, err);
  if (rc == FP8_OK) {
    for (size_t i = 0; i < t.nseries; i++) {
      const fp8_stream_series *s = &t.series[i];
      if (s->n != t.nmicro) abort();
      for (size_t k = 0; k < s->n; k++)
        if (s->step[k] != t.series[0].step[k] || s->micro[k] != t.series[0].micro[k]) abort();
      fp8_group_stats o;
      memset(&o, 0, sizeof o);
      if (fp8_analysis_stream_series(s, &o) != FP8_OK) abort();
      (void)fp8_stream_find(&t, s->tensor, &s->key);
    }
    fp8_stream_free(&t);
  }
  fz_del("stream.json");
  fz_del("stream.npy");
  return 0;
}
