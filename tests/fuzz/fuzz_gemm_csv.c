/* fuzz_gemm_csv.c: libFuzzer target of the report's gemm.csv reader (rep_load_gemm,
 * src/report/report_read.c), against the configurations of a run like the quickstart's:
 * delayed ones (the reader matches history_len, margin and amax_compute), a current one and a
 * mixed recipe (matched by its label alone). */
#include "fuzz_common.h"

#include "report_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char err[FZ_ERRLEN];
  fz_put("gemm.csv", data, size);
  rep_t *r = calloc(1, sizeof *r);
  cfg_t cfgs[4];
  memset(cfgs, 0, sizeof cfgs);
  if (!r) abort();
  cfgs[0] = (cfg_t){.recipe = "delayed", .kind = FP8_KIND_DELAYED, .h = 1, .m = 0,
                    .ac = FP8_AMAX_MAX};
  cfgs[1] = (cfg_t){.recipe = "delayed", .kind = FP8_KIND_DELAYED, .h = 16, .m = 1,
                    .ac = FP8_AMAX_MOST_RECENT};
  cfgs[2] = (cfg_t){.recipe = "current", .kind = FP8_KIND_CURRENT};
  cfgs[3] = (cfg_t){.recipe = "mixed", .kind = FP8_KIND_DELAYED, .mixed = 1};
  r->outdir = fz_scratch();
  r->cfgs = cfgs;
  r->ncfg = 4;
  int have = 0;
  err[0] = 0;
  int rc = rep_load_gemm(r, &have, err, sizeof err);
  fz_check_status("rep_load_gemm", rc, err);
  for (size_t c = 0; c < 4; c++)
    for (int g = 0; g < 3; g++) {
      for (size_t i = 1; i < cfgs[c].ngemm[g]; i++) /* sorted for the median */
        if (cfgs[c].gemm[g][i] < cfgs[c].gemm[g][i - 1]) abort();
      free(cfgs[c].gemm[g]);
    }
  free(r);
  fz_del("gemm.csv");
  return 0;
}
