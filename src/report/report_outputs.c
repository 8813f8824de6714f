/* report_outputs.c: the report's files in run.json's "outputs" (outputs.h), so that the list
 * names every file of the run folder that fp8lab wrote: the runner lists its own, the report
 * replaces the entries of any earlier report of the folder with the files it wrote itself, and
 * removes the earlier report's files it did not write again (a plot of a tensor that is no
 * longer among the worst). */
#include "report_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "outfile.h"
#include "outputs.h"

/* The files this report wrote, in the order it wrote them. */
static int report_outputs(const rep_t *r, const char *nbname, fp8_outputs *o) {
  char name[512];
  int rc = fp8_outputs_add(o, "analysis.csv");
  if (!rc) rc = fp8_outputs_add(o, "recommendations.csv");
  for (size_t i = 0; i < r->nplots && !rc; i++) {
    snprintf(name, sizeof name, "plots/%s", r->plots[i].file);
    rc = fp8_outputs_add(o, name);
  }
  if (!rc) rc = fp8_outputs_add(o, "report.md");
  if (!rc && r->wrote_advice) rc = fp8_outputs_add(o, "advice.ini");
  snprintf(name, sizeof name, "notebooks_export/%s", nbname);
  if (!rc) rc = fp8_outputs_add(o, name);
  return rc;
}

int rep_record_outputs(const rep_t *r, const char *nbname, char *err, size_t errlen) {
  char path[4200];
  snprintf(path, sizeof path, "%s/run.json", r->outdir);
  json_error_t jerr;
  /* a folder without a run.json (or with one jansson cannot read back) has no list to keep */
  json_t *root = json_load_file(path, 0, &jerr);
  if (!json_is_object(root)) {
    json_decref(root);
    return FP8_OK;
  }
  fp8_outputs mine = {0}, earlier = {0};
  json_t *outs = json_array(), *old = json_object_get(root, "outputs");
  int rc = report_outputs(r, nbname, &mine);
  /* the runner's entries stay (in their order), an earlier report's give way to this one's */
  for (size_t i = 0; i < json_array_size(old) && !rc; i++) {
    json_t *e = json_array_get(old, i);
    const char *name = json_string_value(e);
    if (!name || !fp8_output_of_report(name)) rc = json_array_append(outs, e) ? FP8_ENOMEM : FP8_OK;
    else rc = fp8_outputs_add(&earlier, name);
  }
  for (size_t i = 0; i < mine.n && !rc; i++)
    rc = json_array_append_new(outs, json_string(mine.names[i])) ? FP8_ENOMEM : FP8_OK;
  char *dump = NULL;
  if (!rc && json_object_set(root, "outputs", outs) != 0) rc = FP8_ENOMEM;
  if (!rc && !(dump = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER))) rc = FP8_ENOMEM;
  if (rc) {
    fp8_errorf(rc, err, errlen, "run.json: out of memory");
  } else {
    fp8_outfile of;
    rc = fp8_outfile_open(&of, r->outdir, "run.json", err, errlen);
    if (!rc) {
      fputs(dump, of.fp);
      fputc('\n', of.fp);
      rc = fp8_outfile_commit(&of, err, errlen);
    }
  }
  if (!rc) fp8_outputs_remove_stale(r->outdir, &earlier, &mine);
  free(dump);
  json_decref(outs);
  json_decref(root);
  fp8_outputs_free(&mine);
  fp8_outputs_free(&earlier);
  return rc;
}
