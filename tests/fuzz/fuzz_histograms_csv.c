/* fuzz_histograms_csv.c: libFuzzer target of the report's histograms.csv reader
 * (rep_load_histogram, src/report/report_read.c). The reader looks up one (tensor, step):
 * the target asks for the tensor and step of the input's second line (as the report asks for
 * the spike's), and for a fixed one. A histogram it returns must lie within the log2 bins. */
#include "fuzz_common.h"

#include "report_internal.h"
#include "fp8.h"

static void check(const rep_t *r, const char *tensor, int64_t step) {
  double counts[FP8_LOG2_HIST_BINS];
  int lo = 0, n = 0;
  int rc = rep_load_histogram(r, tensor, step, counts, &lo, &n);
  if (rc != FP8_OK) return;
  if (n < 1 || lo < FP8_LOG2_HIST_MIN || lo + n > FP8_LOG2_HIST_MIN + FP8_LOG2_HIST_BINS)
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_put("histograms.csv", data, size);
  rep_t *r = calloc(1, sizeof *r); /* large: not on the stack */
  if (!r) abort();
  r->outdir = fz_scratch();
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
  /* the report checks the whole file first (rep_check_histograms) and then looks up rows */
  char err[FZ_ERRLEN] = "";
  int rc = rep_check_histograms(r, err, sizeof err);
  fz_check_status("rep_check_histograms", rc, err);
  check(r, tensor, step);
  check(r, "layers.0.fc1.input", 0);
  free(r);
  fz_del("histograms.csv");
  return 0;
}
