/* closedloop_report.c: `fp8lab closedloop STUDY` (closedloop_report.h): the study folder
 * loaded through src/results' readers (study.ini, steps.csv, stream.csv or stream.npy,
 * loss.csv, eval.csv), the comparison computed (src/analysis' closedloop_stats.h), then its
 * tables, its two charts (closedloop_plots.c) and the document (closedloop_report_text.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "closedloop_report.h"
#include "closedloop_report_internal.h"
#include "util.h" /* fp8_errorf */
#include "outfile.h"

static int nomem(char *err, size_t errlen) {
  return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
}

/* A run folder's steps.csv and its stream (stream.csv, else stream.npy, else none). */
static int load_run(const char *dir, fp8_steps_table *steps, fp8_stream_table *stream,
                    fp8_cl_run *run, char *err, size_t errlen) {
  char path[4400];
  snprintf(path, sizeof path, "%s/steps.csv", dir);
  int rc = fp8_steps_csv_load(path, steps, err, errlen);
  if (rc) return rc;
  run->steps = steps;
  run->stream = NULL;
  snprintf(path, sizeof path, "%s/stream.csv", dir);
  if (access(path, F_OK) != 0) snprintf(path, sizeof path, "%s/stream.npy", dir);
  if (access(path, F_OK) != 0) return FP8_OK; /* no delayed configuration */
  rc = fp8_stream_load(path, stream, err, errlen);
  if (!rc) rc = fp8_stream_keep(stream, NULL, err, errlen);
  if (!rc) run->stream = stream;
  return rc;
}

static int load_losses(const char *dir, fp8_loss_table *loss, fp8_loss_table *ev, char *err,
                       size_t errlen) {
  char path[4400];
  snprintf(path, sizeof path, "%s/loss.csv", dir);
  int rc = fp8_loss_csv_load(path, loss, err, errlen);
  snprintf(path, sizeof path, "%s/eval.csv", dir);
  if (!rc) rc = fp8_eval_csv_load(path, ev, err, errlen);
  return rc;
}

static void study_free(cl_study *s) {
  size_t nl = s->st.nlabels, ns = s->st.nseeds;
  fp8_steps_csv_free(&s->open_steps);
  fp8_stream_free(&s->open_stream);
  for (size_t k = 0; k < ns; k++) {
    if (s->hp_loss) fp8_loss_table_free(&s->hp_loss[k]);
    if (s->hp_eval) fp8_loss_table_free(&s->hp_eval[k]);
  }
  for (size_t k = 0; k < nl * ns; k++) {
    if (s->cl_steps) fp8_steps_csv_free(&s->cl_steps[k]);
    if (s->cl_stream) fp8_stream_free(&s->cl_stream[k]);
    if (s->cl_loss) fp8_loss_table_free(&s->cl_loss[k]);
    if (s->cl_eval) fp8_loss_table_free(&s->cl_eval[k]);
  }
  free(s->cl_steps);
  free(s->cl_stream);
  free(s->closed);
  free(s->hp_loss);
  free(s->hp_eval);
  free(s->cl_loss);
  free(s->cl_eval);
  fp8_study_free(&s->st);
}

static int study_load(const char *dir, cl_study *s, char *err, size_t errlen) {
  memset(s, 0, sizeof *s);
  int rc = fp8_study_load(dir, &s->st, err, errlen);
  if (rc) return rc;
  size_t nl = s->st.nlabels, ns = s->st.nseeds;
  s->cl_steps = calloc(nl * ns, sizeof *s->cl_steps);
  s->cl_stream = calloc(nl * ns, sizeof *s->cl_stream);
  s->closed = calloc(nl * ns, sizeof *s->closed);
  s->hp_loss = calloc(ns, sizeof *s->hp_loss);
  s->hp_eval = calloc(ns, sizeof *s->hp_eval);
  s->cl_loss = calloc(nl * ns, sizeof *s->cl_loss);
  s->cl_eval = calloc(nl * ns, sizeof *s->cl_eval);
  if (!s->cl_steps || !s->cl_stream || !s->closed || !s->hp_loss || !s->hp_eval || !s->cl_loss ||
      !s->cl_eval)
    return nomem(err, errlen);
  char path[4200];
  for (size_t k = 0; !rc && k < ns; k++) {
    snprintf(path, sizeof path, "%s/hp/seed_%lld", dir, (long long)s->st.seeds[k]);
    rc = load_losses(path, &s->hp_loss[k], &s->hp_eval[k], err, errlen);
  }
  fp8_cl_run open = {0};
  snprintf(path, sizeof path, "%s/open", dir);
  if (!rc) rc = load_run(path, &s->open_steps, &s->open_stream, &open, err, errlen);
  for (size_t k = 0; !rc && k < nl * ns; k++) {
    snprintf(path, sizeof path, "%s/closed/%s/seed_%lld", dir, s->st.labels[k / ns],
             (long long)s->st.seeds[k % ns]);
    rc = load_losses(path, &s->cl_loss[k], &s->cl_eval[k], err, errlen);
    size_t n = strlen(path);
    snprintf(path + n, sizeof path - n, "/replay");
    if (!rc) rc = load_run(path, &s->cl_steps[k], &s->cl_stream[k], &s->closed[k], err, errlen);
  }
  s->in = (fp8_cl_inputs){.study = &s->st, .open = open, .closed = s->closed,
                          .hp_loss = s->hp_loss, .hp_eval = s->hp_eval, .cl_loss = s->cl_loss,
                          .cl_eval = s->cl_eval};
  return rc;
}

/* The command's summary of the self-check. */
static void summarize(const cl_study *s, const fp8_cl_result *r, fp8_closedloop_summary *sum) {
  sum->runs = (int64_t)r->t.nselfcheck;
  sum->runs_differing = r->runs_differing;
  for (size_t k = 0; k < r->t.nselfcheck; k++) {
    const fp8_cl_selfcheck_row *q = &r->t.selfcheck[k];
    const fp8_cl_mismatch *m = &r->mismatch[k];
    if (!q->differ) continue;
    snprintf(sum->first_differing, sizeof sum->first_differing,
             "%s seed %lld: %lld of %lld rows differ from te_scale (first: step %lld, micro "
             "%lld, tensor %s: scale %.9g, te_scale %.9g)",
             q->label, (long long)q->seed, (long long)q->differ, (long long)q->te_rows,
             (long long)m->step, (long long)m->micro, m->tensor, (double)m->scale,
             (double)m->te_scale);
    break;
  }
  (void)s;
}

int fp8_closedloop_report(const char *dir, const char *out, fp8_closedloop_summary *sum,
                          char *err, size_t errlen) {
  memset(sum, 0, sizeof *sum);
  cl_study s;
  fp8_cl_result r = {0};
  char outdir[4200], path[4400];
  snprintf(outdir, sizeof outdir, "%s", out ? out : "");
  if (!out) snprintf(outdir, sizeof outdir, "%s/report", dir);
  int rc = study_load(dir, &s, err, errlen);
  if (!rc) rc = fp8_closedloop_compute(&s.in, &r, err, errlen);
  snprintf(path, sizeof path, "%s/plots", outdir);
  if (!rc) rc = fp8_mkdir_p(path, err, errlen);
  if (!rc) rc = fp8_closedloop_csv_write(outdir, &r.t, err, errlen);
  snprintf(path, sizeof path, "%s/plots/closedloop_loss.png", outdir);
  if (!rc) rc = cl_plot_loss(&s, path, err, errlen);
  int drift_plot = r.t.ndrift > 0;
  snprintf(path, sizeof path, "%s/plots/closedloop_drift.png", outdir);
  if (!rc && drift_plot) rc = cl_plot_drift(&s, &r, path, err, errlen);
  if (!rc) rc = cl_write_doc(&s, &r, outdir, drift_plot, err, errlen);
  if (!rc) {
    summarize(&s, &r, sum);
    sum->nplots = 1 + (size_t)drift_plot;
    snprintf(sum->report_md, sizeof sum->report_md, "%s/closedloop.md", outdir);
  }
  fp8_closedloop_result_free(&r);
  study_free(&s);
  return rc;
}
