/* fuzz_tokens_csv.c: libFuzzer target of the tokens.csv reader (src/trace/tokenscsv.c, read by
 * fp8_trace_open): the input is tokens.csv beside a fixed amax.csv of three expert GEMMs and a
 * router. On success the table is checked against what trace.h promises: rows sorted by step,
 * then GEMM, each (step, GEMM) once, tokens >= 0, every GEMM index naming one of the sorted
 * distinct GEMMs, each an expert GEMM (fp8_expert_of); on failure, the status and message. */
#include "fuzz_common.h"

#include "trace.h"

static const char k_amax[] =
    "step,tensor,amax\n"
    "0,m.layers.0.mlp.experts.0.gate_up_proj.input,1\n"
    "0,m.layers.0.mlp.experts.1.gate_up_proj.input,2\n"
    "0,m.layers.0.mlp.experts.12.down_proj.weight,3\n"
    "0,m.layers.0.mlp.gate.input,4\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char dir[1200], err[FZ_ERRLEN];
  fz_mkdir("t");
  fz_put("t/amax.csv", (const uint8_t *)k_amax, sizeof k_amax - 1);
  fz_put("t/tokens.csv", data, size);
  fp8_trace tr;
  memset(&tr, 0, sizeof tr);
  int rc = fp8_trace_open(fz_path("t", dir, sizeof dir), &tr, err, sizeof err);
  fz_check_status("fp8_trace_open (tokens.csv)", rc, err);
  if (rc == FP8_OK) {
    const fp8_tokens_table *t = fp8_trace_tokens(&tr, 0);
    if (!t || !fp8_trace_has_tokens(&tr)) abort();
    for (size_t i = 0; i < t->ngemms; i++) {
      if (!fp8_expert_of(t->gemms[i], NULL, NULL, 0)) abort();
      if (i && strcmp(t->gemms[i - 1], t->gemms[i]) >= 0) abort();
    }
    for (size_t i = 0; i < t->nrows; i++) {
      const fp8_tokens_row *r = &t->rows[i];
      if (r->gemm < 0 || (size_t)r->gemm >= t->ngemms || r->tokens < 0 || r->step < 0) abort();
      if (i && (r->step < r[-1].step || (r->step == r[-1].step && r->gemm <= r[-1].gemm))) abort();
    }
    fp8_trace_close(&tr);
  }
  fz_del("t/tokens.csv");
  fz_del("t/amax.csv");
  return 0;
}
