/* fuzz_run_json.c: libFuzzer target of the readers of a run's run.json: the strict one the
 * report loads (fp8_run_json_read, src/results/run_json_read.c: the experiment's name and
 * budgets, the tensors left out, the model shape, the trace, the outputs) and the lenient list
 * of outputs that --force removes stale files by (fp8_run_json_read_outputs, the same file),
 * whose every name must pass fp8_output_name_ok: a run.json must never make fp8lab remove a
 * file outside the run's own names. */
#include "fuzz_common.h"

#include "outputs.h"
#include "run_json.h"

/* 1 when name could point outside the run folder: absolute, or with a ".." segment. */
static int escapes(const char *name) {
  if (name[0] == '/') return 1;
  for (const char *p = name; *p;) {
    size_t n = strcspn(p, "/");
    if (n == 2 && p[0] == '.' && p[1] == '.') return 1;
    p += n + (p[n] == '/');
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_put("run.json", data, size);
  fp8_run_record *r = calloc(1, sizeof *r);
  if (!r) abort();
  char err[FZ_ERRLEN] = "";
  int rc = fp8_run_json_read(fz_scratch(), r, err, sizeof err);
  fz_check_status("fp8_run_json_read", rc, err);
  if (!memchr(r->name, 0, sizeof r->name)) abort();
  if (rc == FP8_OK && (!r->trace_path || !(r->overflow_budget >= 0 && r->overflow_budget <= 1)))
    abort();
  fp8_run_json_free(r);
  free(r);
  fp8_outputs o = {0};
  if (fp8_run_json_read_outputs(fz_scratch(), &o) != FP8_OK) abort();
  for (size_t i = 0; i < o.n; i++)
    if (!fp8_output_name_ok(o.names[i]) || escapes(o.names[i])) abort();
  fp8_outputs_free(&o);
  fz_del("run.json");
  return 0;
}
