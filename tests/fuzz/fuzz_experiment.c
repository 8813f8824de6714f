/* fuzz_experiment.c: libFuzzer target of the experiment-file parser (fp8_experiment_load,
 * src/experiment/experiment*.c, over libinih): the input is one experiment INI file. On success the
 * expansion is checked against experiment.h (at least one configuration and at most
 * FP8_EXPERIMENT_MAX_CONFIGS, each in a section that holds it) and the selection functions the
 * runner calls next run over a few names and steps: the tensor globs, the steps selection, the
 * rank checks. */
#include "fuzz_common.h"

#include "experiment.h"

static const char *const names[][2] = {
    {"layers.0.fc1.input", "layers.0.fc1.input"},
    {"layers.1.attn.qkv.grad_output", "layers.1.attn.qkv.grad_output"},
    {"rank_0/layers.0.fc1.weight", "layers.0.fc1.weight"},
    {"rank_3/lm_head.output", "lm_head.output"},
    {"", ""},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[1200], err[FZ_ERRLEN];
  fz_put("fuzz.ini", data, size);
  fp8_experiment ex;
  int rc = fp8_experiment_load(fz_path("fuzz.ini", path, sizeof path), &ex, err, sizeof err);
  fz_check_status("fp8_experiment_load", rc, err);
  if (rc == FP8_OK) {
    if (ex.nconfigs < 1 || ex.nconfigs > FP8_EXPERIMENT_MAX_CONFIGS || ex.nsections < 1) abort();
    for (size_t i = 0; i < ex.nconfigs; i++) {
      size_t s = ex.config_section[i];
      if (s >= ex.nsections || i < ex.sections[s].first_config ||
          i >= ex.sections[s].first_config + ex.sections[s].nconfigs)
        abort();
    }
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
      (void)fp8_experiment_tensor_selected(&ex, names[k][1]);
      (void)fp8_experiment_rank_tensor_selected(&ex, names[k][0], names[k][1]);
      for (size_t s = 0; s < ex.nsections; s++)
        (void)fp8_experiment_section_matches(&ex.sections[s], names[k][0], names[k][1]);
    }
    static const int64_t steps[] = {0, 1, 2, 7, 100, 1000000};
    for (size_t k = 0; k < sizeof steps / sizeof steps[0]; k++)
      (void)fp8_experiment_step_selected(&ex, steps[k]);
    rc = fp8_experiment_check_steps(&ex, steps, sizeof steps / sizeof steps[0], "trace", err,
                                    sizeof err);
    fz_check_status("fp8_experiment_check_steps", rc, err);
    for (size_t nranks = 0; nranks <= 4; nranks += 2) {
      rc = fp8_experiment_check_ranks(&ex, nranks, "trace", err, sizeof err);
      fz_check_status("fp8_experiment_check_ranks", rc, err);
      if (rc == FP8_OK && nranks) {
        size_t g = fp8_experiment_reduce_group(&ex, nranks);
        if (g < 1 || g > nranks || nranks % g) abort();
      }
    }
    fp8_experiment_free(&ex);
  }
  fz_del("fuzz.ini");
  return 0;
}
