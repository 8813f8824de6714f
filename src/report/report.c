/* report.c: the report of a run (see report.h): statistics (analysis.c), recommendations
 * (analysis_recommend.c), charts (plot.h) and the Markdown / notebook document (doc.h) put
 * together around the questions users ask: which tensors overflow under delayed scaling, when
 * and for how long, how stale the delayed scale is after a spike, and which setting to use.
 *
 * This file runs the steps in order, over the state of report_internal.h: the load step
 * (report_load.c: every result file read and checked by src/results' readers, the statistics
 * and the story chosen, report_select.c), then the analysis CSVs, the plots (report_plots.c)
 * and the text (report_text.c), all from what was loaded; run.json's list of outputs then names
 * the report's files too (report_outputs.c).
 */
#include "report.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "plot.h"
#include "doc.h"
#include "outfile.h"
#include "report_internal.h"
#include "util.h"

/* The chart library's driver loading (fp8_plot_warm_up, no text, no thread left behind) on its
 * own thread, while the results are read and analysed: nothing else draws until it is joined,
 * and the plots fork after it (rep_draw_plots). */
static void *warm_up_plots(void *arg) {
  char err[256];
  *(int *)arg = fp8_plot_warm_up(err, sizeof err); /* a failure shows again in the first chart */
  return NULL;
}

int fp8_report_generate(const char *outdir, const fp8_report_options *opt, fp8_report_summary *sum,
                        char *err, size_t errlen) {
  rep_t r;
  memset(&r, 0, sizeof r);
  r.outdir = outdir;
  r.spike_group = -1;
  memset(sum, 0, sizeof *sum);
  int rc = FP8_OK;
  fp8_doc *md = NULL, *nb = NULL;
  char path[4096];

  pthread_t warm;
  int warm_rc = FP8_OK, warming = pthread_create(&warm, NULL, warm_up_plots, &warm_rc) == 0;
  /* every input read and checked, the statistics and the story computed: the rest only puts
   * out what this loaded */
  rc = rep_load(&r, opt, err, errlen);
  if (rc) goto done;
  rc = fp8_analysis_write(&r.an, outdir, err, errlen);
  if (rc) goto done;
  rc = fp8_recommend_write(&r.rec, outdir, err, errlen);
  if (rc) goto done;

  /* plots */
  snprintf(path, sizeof path, "%s/plots", outdir);
  rc = fp8_mkdir_p(path, err, errlen);
  if (rc) goto done;
  snprintf(sum->plots_dir, sizeof sum->plots_dir, "%s", path);
  if (warming) pthread_join(warm, NULL);
  else (void)warm_up_plots(&warm_rc);
  warming = 0;
  int maxt = rep_max_timelines(opt);
  rc = rep_draw_plots(&r, &r.charts, maxt, opt ? opt->procs : 0, err, errlen);
  if (rc) goto done;
  sum->nplots = r.charts.nplots;

  /* report.md in the output dir, the notebook in <outdir>/notebooks_export/ */
  rc = rep_write_advice(&r, err, errlen);
  if (rc) goto done;
  rc = rep_write_te_code(&r, err, errlen);
  if (rc) goto done;
  rc = rep_write_frameworks(&r, err, errlen);
  if (rc) goto done;
  rc = rep_write_fp4_advice(&r, err, errlen);
  if (rc) goto done;
  rc = rep_write_bf16_plan(&r, err, errlen);
  if (rc) goto done;
  rc = rep_write_bf16_plan_frameworks(&r, err, errlen);
  if (rc) goto done;
  md = rep_build_doc(&r, "plots/", "");
  nb = rep_build_doc(&r, "../plots/", "../");
  if (!md || !nb) { rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory"); goto done; }
  rc = fp8_doc_write_markdown(md, outdir, "report.md", err, errlen);
  if (rc) goto done;
  snprintf(path, sizeof path, "%s/notebooks_export", outdir);
  rc = fp8_mkdir_p(path, err, errlen);
  if (rc) goto done;
  char nbname[300];
  snprintf(nbname, sizeof nbname, "%s.ipynb", r.run.name);
  rc = fp8_doc_write_notebook(nb, path, nbname, err, errlen);
  if (rc) goto done;
  snprintf(sum->report_md, sizeof sum->report_md, "%s/report.md", outdir);
  snprintf(sum->notebook, sizeof sum->notebook, "%s/%s", path, nbname);
  rc = rep_record_outputs(&r, nbname, err, errlen);

done:
  if (warming) pthread_join(warm, NULL);
  fp8_doc_free(md);
  fp8_doc_free(nb);
  rep_free(&r);
  return rc;
}
