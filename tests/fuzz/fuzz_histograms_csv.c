/* fuzz_histograms_csv.c: libFuzzer target of the histograms.csv reader (fp8_histograms_csv_load and
 * fp8_histograms_csv_get, src/results/histograms_csv.c). The report loads the whole file, then
 * looks up one (tensor, step): the target asks for the tensor and step of the input's second line
 * (as the report asks for the spike's), and for a fixed one. A histogram it returns must lie within
 * the log2 bins. */
#include "fuzz_common.h"

#include "fp8.h"
#include "tables.h"

static void check(const fp8_hist_table *t, const char *tensor, int64_t step) {
  double counts[FP8_LOG2_HIST_BINS];
  int lo = 0, n = 0;
  int rc = fp8_histograms_csv_get(t, tensor, step, counts, &lo, &n);
  if (rc != FP8_OK) return;
  if (n < 1 || lo < FP8_LOG2_HIST_MIN || lo + n > FP8_LOG2_HIST_MIN + FP8_LOG2_HIST_BINS)
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_put("histograms.csv", data, size);
  /* the second line's first two fields */
  char tensor[256] = "layers.0.fc1.input";
  long long step = 0;
  const uint8_t *nl = memchr(data, '\n', size);
  if (nl) {
    const char *p = (const char *)nl + 1, *end = (const char *)data + size;
    size_t k = 0;
    while (p < end && *p != ',' && *p != '\n' && k + 1 < sizeof tensor) tensor[k++] = *p++;
    tensor[k] = 0;
    if (p < end && *p == ',') {
      char num[32];
      size_t j = 0;
      for (p++; p < end && j + 1 < sizeof num && *p != ','; p++) num[j++] = *p;
      num[j] = 0;
      step = strtoll(num, NULL, 10);
    }
  }
  char path[4200], err[FZ_ERRLEN] = "";
  snprintf(path, sizeof path, "%s/histograms.csv", fz_scratch());
  fp8_hist_table t;
  int rc = fp8_histograms_csv_load(path, &t, err, sizeof err);
  fz_check_status("fp8_histograms_csv_load", rc, err);
  if (rc != FP8_OK && t.n != 0) abort(); /* on failure the table is empty */
  check(&t, tensor, step);
  check(&t, "layers.0.fc1.input", 0);
  fp8_histograms_csv_free(&t);
  fz_del("histograms.csv");
  return 0;
}
