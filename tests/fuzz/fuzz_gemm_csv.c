/* fuzz_gemm_csv.c: libFuzzer target of the gemm.csv reader (fp8_gemm_csv_load,
 * src/results/gemm_csv.c) and of the report's matching of its rows to the configurations
 * (rep_add_gemm, src/report/report_load.c), against the configurations of a run like the
 * quickstart's: delayed ones (matched by history_len, margin and amax_compute), a current one
 * and a mixed recipe (matched by its label alone). */
#include "fuzz_common.h"

#include "report_internal.h"
#include "tables.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char err[FZ_ERRLEN], path[4200];
  fz_put("gemm.csv", data, size);
  snprintf(path, sizeof path, "%s/gemm.csv", fz_scratch());
  rep_t *r = calloc(1, sizeof *r);
  cfg_t cfgs[4];
  memset(cfgs, 0, sizeof cfgs);
  if (!r) abort();
  cfgs[0].key = (fp8_config_key){.recipe = "delayed", .kind = FP8_KIND_DELAYED, .history_len = 1,
                                 .margin = 0, .amax_compute = FP8_AMAX_MAX};
  cfgs[1].key = (fp8_config_key){.recipe = "delayed", .kind = FP8_KIND_DELAYED,
                                 .history_len = 16, .margin = 1,
                                 .amax_compute = FP8_AMAX_MOST_RECENT};
  cfgs[2].key = (fp8_config_key){.recipe = "current", .kind = FP8_KIND_CURRENT};
  cfgs[3].key = (fp8_config_key){.recipe = "mixed", .kind = FP8_KIND_DELAYED};
  cfgs[3].mixed = 1;
  r->outdir = fz_scratch();
  r->cfgs = cfgs;
  r->ncfg = 4;
  int have = 0;
  err[0] = 0;
  fp8_gemm_table t;
  int rc = fp8_gemm_csv_load(path, &t, err, sizeof err);
  fz_check_status("fp8_gemm_csv_load", rc, err);
  if (rc == FP8_OK) {
    err[0] = 0;
    rc = rep_add_gemm(r, &t, path, &have, err, sizeof err);
    fz_check_status("rep_add_gemm", rc, err);
  }
  fp8_gemm_csv_free(&t);
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
