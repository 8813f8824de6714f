/* fuzz_te_log.c: libFuzzer target of `fp8lab import-te` (fp8_te_import, src/trace/te_log.c):
 * the input is rank 0's statistics log. On success what it wrote must be a trace fp8lab reads:
 * amax.csv through fp8_amax_csv_read, with as many rows as the import says it wrote, and
 * te_log.json beside it, and the counts of dropped cut-off lines and ranks without an amax row
 * agree with the warnings; on failure, the usual status and one-line message checks. An input
 * whose last line has no newline is imported twice: without and with FP8_TE_DROP_CUT_LINE. */
#include "fuzz_common.h"

#include "te_log.h"
#include "trace.h"

/* One import of the log with flags; out/ is removed afterwards. */
static void import_once(const char *logs, const char *out, unsigned flags) {
  char path[1300], err[FZ_ERRLEN];
  fp8_te_import_summary sum;
  int rc = fp8_te_import(logs, out, 1, flags, &sum, err, sizeof err);
  fz_check_status("fp8_te_import", rc, err);
  if (rc == FP8_OK) {
    fp8_trace tr;
    memset(&tr, 0, sizeof tr);
    snprintf(path, sizeof path, "%s/amax.csv", out);
    int r2 = fp8_amax_csv_read(path, &tr, err, sizeof err);
    if (r2 != FP8_OK) {
      fprintf(stderr, "fuzz: the imported amax.csv does not read back: %s\n", err);
      abort();
    }
    if (tr.namax != sum.amax_rows || sum.ranks != 1) abort();
    /* one rank: at most one cut-off line, and a warning for it and for a rank without amax */
    if (sum.cut_lines_dropped > (flags & FP8_TE_DROP_CUT_LINE ? 1u : 0u) ||
        sum.nwarnings != sum.cut_lines_dropped + sum.ranks_without_amax ||
        sum.ranks_without_amax != (sum.amax_rows == 0))
      abort();
    snprintf(path, sizeof path, "%s/te_log.json", out);
    if (access(path, F_OK) != 0) abort();
    for (size_t i = 0; i < tr.namax_names; i++) free(tr.amax_names[i]);
    free(tr.amax_names);
    free(tr.amax);
    fp8_te_import_summary_free(&sum);
  }
  fz_del("out/amax.csv");
  fz_del("out/te_log.json");
  fz_del("out/te_overflows.csv");
  rmdir(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char logs[1200], out[1200];
  fz_mkdir("logs");
  fz_put("logs/nvdlfw_inspect_globalrank-0.log", data, size);
  fz_path("logs", logs, sizeof logs);
  fz_path("out", out, sizeof out);
  import_once(logs, out, 0);
  /* --drop-cut-line differs only for a log whose last line has no newline */
  if (size && data[size - 1] != '\n') import_once(logs, out, FP8_TE_DROP_CUT_LINE);
  fz_del("logs/nvdlfw_inspect_globalrank-0.log");
  return 0;
}
