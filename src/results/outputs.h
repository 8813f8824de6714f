/* outputs.h: the files of a run folder that fp8lab wrote, as run.json's "outputs" lists them:
 * paths relative to the folder (steps.csv, plots/snr.png, notebooks_export/<experiment>.ipynb).
 * The runner lists its own files, the report adds its own (run_json.h,
 * fp8_run_json_set_report_outputs); a run with --force and a report written again remove the
 * files of the previous list that they did not write again, so that a folder never holds a
 * plot, a notebook or a CSV of another run. Only names fp8lab can have written are ever removed
 * (fp8_output_name_ok): never a user's other files.
 */
#ifndef FP8LAB_RESULTS_OUTPUTS_H
#define FP8LAB_RESULTS_OUTPUTS_H

#include <stddef.h>

/** A list of output names (each a copy; in the order added). */
typedef struct {
  char **names;
  size_t n, cap;
} fp8_outputs;

/** Appends a copy of name unless it is there already: FP8_OK or FP8_ENOMEM. */
int fp8_outputs_add(fp8_outputs *o, const char *name);
/** 1 when the list holds name. */
int fp8_outputs_has(const fp8_outputs *o, const char *name);
void fp8_outputs_free(fp8_outputs *o);

/** 1 for the report's framework files: megatron_args.txt, megatron_precision.yaml,
 *  torchao_config.py (issue 45). */
int fp8_output_of_framework(const char *name);
/** The report's files of the BF16 demotion plans (issue 45): bf16_plan.csv, bf16_plan.ini,
 *  megatron_bf16_plan_fp8.txt and .yaml, megatron_bf16_plan_fp4.txt and .yaml,
 *  torchao_bf16_plan.py, te_bf16_plan.py, each with the first bytes the report writes into it (what marks an
 *  interrupted report's file as fp8lab's: src/run's leftovers). File i is written when the
 *  report's wrote_plan has bit 1 << i (src/report/report_internal.h). */
typedef struct {
  const char *name, *sig;
} fp8_plan_output;
#define FP8_PLAN_OUTPUTS 8
extern const fp8_plan_output fp8_plan_outputs[FP8_PLAN_OUTPUTS];
/** 1 for one of fp8_plan_outputs' names. */
int fp8_output_of_plan(const char *name);
/** 1 for a name fp8lab writes into a run folder: a top-level file of its own (the CSVs, run.json,
 *  report.md, advice.ini, te_recipe.py, the framework files, the plans' files, stream.npy and
 *  stream.json),
 *  plots/<name>.png or
 *  notebooks_export/<name>.ipynb, with no further '/' and no
 *  leading '.'; anything else (a path with "..", an absolute path, another extension) is 0. */
int fp8_output_name_ok(const char *name);
/** 1 for the files of the report (analysis.csv, recommendations.csv, report.md, the advice and
 *  plan files, plots/, the notebook), 0 for the runner's. */
int fp8_output_of_report(const char *name);

/** Removes <dir>/<name> for every name of old that passes fp8_output_name_ok and that keep does
 *  not hold (a file or a link, never a directory), then plots/ and notebooks_export/ when that
 *  left them empty: the earlier run's files that the new one did not write again. */
void fp8_outputs_remove_stale(const char *dir, const fp8_outputs *old, const fp8_outputs *keep);

#endif
