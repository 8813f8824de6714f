/* fuzz_stream_npy.c: libFuzzer target of the compact stream's reader (fp8_stream_load of a
 * stream.npy with its stream.json, src/results/stream_npy.c; issue 27). The input is both
 * files: its first two bytes (little endian) are stream.json's length, then stream.json, then
 * stream.npy. A table it accepts is checked as fuzz_stream_csv's is (every series the same
 * steps, ascending; the scales not in memory) and goes through the report's stream statistics
 * with its scales read back from the file a tensor at a time (fp8_stream_visit) and kept
 * (fp8_stream_keep). */
#include "fuzz_common.h"

#include <math.h>

#include "analysis.h"
#include "tables.h"

/* A series' statistics (what the report takes from it); every scale is positive and finite
 * (the loader checked them): one that is not was read from the wrong place. */
static int stats_one(const fp8_stream_series *s, size_t k, void *ctx) {
  (void)k;
  (void)ctx;
  for (size_t i = 0; i < s->n; i++)
    if (!(s->scale[i] > 0) || isinf(s->scale[i])) abort();
  fp8_group_stats o;
  memset(&o, 0, sizeof o);
  if (fp8_analysis_stream_series(s, &o) != FP8_OK) abort();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  setenv("FP8LAB_TEST_VISIT_BYTES", "1", 0); /* blocks of one tensor: every block boundary */
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
      if (s->n != t.nmicro || s->scale) abort(); /* the scales stay in the file until kept */
      for (size_t k = 0; k < s->n; k++)
        if (s->step[k] != t.series[0].step[k] || s->micro[k] != t.series[0].micro[k]) abort();
      (void)fp8_stream_find(&t, s->tensor, &s->key);
    }
    /* the scales read back a block at a time (every series) and kept (every other one): the
     * same values either way */
    rc = fp8_stream_visit(&t, NULL, stats_one, NULL, err, sizeof err);
    fz_check_status("fp8_stream_visit", rc, err);
    unsigned char *want = calloc(t.nseries + 1, 1);
    if (!want) abort();
    for (size_t i = 0; i < t.nseries; i += 2) want[i] = 1;
    rc = fp8_stream_keep(&t, want, err, sizeof err);
    fz_check_status("fp8_stream_keep", rc, err);
    if (rc == FP8_OK) {
      for (size_t i = 0; i < t.nseries; i++)
        if ((t.series[i].scale != NULL) != want[i]) abort();
      rc = fp8_stream_visit(&t, NULL, stats_one, NULL, err, sizeof err);
      fz_check_status("fp8_stream_visit", rc, err);
    }
    free(want);
    fp8_stream_free(&t);
  }
  fz_del("stream.json");
  fz_del("stream.npy");
  return 0;
}
