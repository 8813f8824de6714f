/* report_outputs.c: the report's files in run.json's "outputs" (run_json.h,
 * fp8_run_json_set_report_outputs, on the run.json the report read), so that the list names every
 * file of the run folder that fp8lab wrote: the runner lists its own, the report replaces the
 * entries of any earlier report of the folder with the files it wrote itself, and removes the
 * earlier report's files it did not write again (a plot of a tensor that is no longer among the
 * worst). */
#include "report_internal.h"

#include <stdio.h>

#include "outputs.h"
#include "util.h"

/* The files this report wrote, in the order it wrote them. */
static int report_outputs(const rep_t *r, const char *nbname, fp8_outputs *o) {
  char name[512];
  int rc = fp8_outputs_add(o, "analysis.csv");
  if (!rc) rc = fp8_outputs_add(o, "recommendations.csv");
  for (size_t i = 0; i < r->charts.nplots && !rc; i++) {
    snprintf(name, sizeof name, "plots/%s", r->charts.plots[i].file);
    rc = fp8_outputs_add(o, name);
  }
  if (!rc) rc = fp8_outputs_add(o, "report.md");
  if (!rc && r->wrote_advice) rc = fp8_outputs_add(o, "advice.ini");
  if (!rc && r->wrote_te_code) rc = fp8_outputs_add(o, "te_recipe.py");
  if (!rc && (r->wrote_frameworks & 1)) rc = fp8_outputs_add(o, "megatron_args.txt");
  if (!rc && (r->wrote_frameworks & 2)) rc = fp8_outputs_add(o, "megatron_precision.yaml");
  if (!rc && (r->wrote_frameworks & 4)) rc = fp8_outputs_add(o, "torchao_config.py");
  if (!rc && r->wrote_fp4_advice) rc = fp8_outputs_add(o, "advice_fp4.ini");
  for (size_t i = 0; i < FP8_PLAN_OUTPUTS && !rc; i++) /* the BF16 demotion plans */
    if (r->wrote_plan & 1 << i) rc = fp8_outputs_add(o, fp8_plan_outputs[i].name);
  snprintf(name, sizeof name, "notebooks_export/%s", nbname);
  if (!rc) rc = fp8_outputs_add(o, name);
  return rc;
}

int rep_record_outputs(const rep_t *r, const char *nbname, char *err, size_t errlen) {
  fp8_outputs mine = {0};
  int rc = report_outputs(r, nbname, &mine);
  if (rc) rc = fp8_errorf(rc, err, errlen, "run.json: out of memory");
  else rc = fp8_run_json_set_report_outputs(&r->run, r->outdir, &mine, err, errlen);
  fp8_outputs_free(&mine);
  return rc;
}
