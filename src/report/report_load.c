/* report_load.c: the report's load step (report_internal.h): every input of the run read and
 * validated into memory first (run.json, steps.csv, histograms.csv, stream.csv, gemm.csv, by
 * their readers in src/results), then the statistics, the recommendations and the choices of
 * the story (report_select.c) computed once. The plots and the text are functions of what this
 * step loaded: none of them opens a file of the run. */
#include "report_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h> /* access */

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

#include "outputs.h" /* run.json's list of the run's files */
#include "results.h" /* the schemas' file names */
#include "trace.h"   /* fp8_tensor_files_distinct */
#include "util.h"

/* cfg_t's gemm arrays are indexed by fp8_gemm_kind. */
_Static_assert(FP8_GEMM_COUNT == 3, "cfg_t holds the errors of fprop, dgrad and wgrad");

/* The trace as the report's header names it: a synthetic trace's preset, steps and seed, else
 * "trace <folder>" with its absolute path (run.json's trace.abs_path; the path as the
 * experiment resolved it, e.g. exp/../traces/llama, for a run.json from before that key). */
static void describe_trace(rep_t *r) {
  const fp8_run_record *run = &r->run;
  if (run->synth_preset)
    snprintf(r->trace, sizeof r->trace, "synthetic '%s' trace (%lld steps, seed %lld)",
             run->synth_preset, (long long)run->synth_steps, (long long)run->synth_seed);
  else {
    const char *path = run->trace_abs_path ? run->trace_abs_path : run->trace_path;
    const char *q = strchr(path, '`') ? "" : "`"; /* a code span: _ and * stay literal */
    snprintf(r->trace, sizeof r->trace, "trace %s%s%s", q, path, q);
  }
}

/* Each configuration's medians of its rows' rel_error_lo and rel_error_hi per GEMM (NaN
 * without sampled intervals): the intervals ties are judged by (rep_gemm_tied, issue 42). */
static int gemm_interval_medians(rep_t *r, const fp8_gemm_table *t, char *err, size_t errlen) {
  double *lo = malloc((t->n + 1) * sizeof *lo), *hi = malloc((t->n + 1) * sizeof *hi);
  if (!lo || !hi) {
    free(lo);
    free(hi);
    return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  }
  for (size_t c = 0; c < r->ncfg; c++)
    for (int g = 0; g < FP8_GEMM_COUNT; g++) {
      size_t n = 0;
      for (size_t i = 0; i < t->n; i++) {
        const fp8_gemm_row *row = &t->rows[i];
        if ((int)row->gemm != g || isnan(row->rel_lo) || isnan(row->rel_hi) ||
            !rep_cfg_matches(&r->cfgs[c], &row->key))
          continue;
        lo[n] = row->rel_lo, hi[n++] = row->rel_hi;
      }
      gsl_sort(lo, 1, n);
      gsl_sort(hi, 1, n);
      r->cfgs[c].gemm_lo_median[g] = n ? gsl_stats_median_from_sorted_data(lo, 1, n) : NAN;
      r->cfgs[c].gemm_hi_median[g] = n ? gsl_stats_median_from_sorted_data(hi, 1, n) : NAN;
    }
  free(lo);
  free(hi);
  return FP8_OK;
}

/* Adds gemm.csv's rows to the configurations they belong to (each configuration's rel_error
 * per GEMM, sorted, and their medians); *have = 1 when a row was added. A row of no
 * configuration of steps.csv is an error (the two files come from one run). */
int rep_add_gemm(rep_t *r, const fp8_gemm_table *t, const char *path, int *have, char *err,
                 size_t errlen) {
  int rc = FP8_OK;
  double *hw = malloc((t->n + 1) * sizeof *hw); /* the sampled rows' relative half-widths */
  size_t nhw = 0;
  if (!hw) return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  for (size_t i = 0; i < t->n && !rc; i++) {
    const fp8_gemm_row *row = &t->rows[i];
    int g = (int)row->gemm;
    if (row->rel_error > 0 && isfinite(row->rel_lo) && isfinite(row->rel_hi) &&
        isfinite(row->rel_error))
      hw[nhw++] = (row->rel_hi - row->rel_lo) / 2.0 / row->rel_error;
    size_t c = 0;
    while (c < r->ncfg && !rep_cfg_matches(&r->cfgs[c], &row->key)) c++;
    if (c == r->ncfg) {
      rc = fp8_errorf(FP8_EFORMAT, err, errlen,
                      "%s:%lld: recipe %s (%s) is not a configuration of steps.csv", path,
                      (long long)row->line, row->key.recipe, fp8_recipe_kind_name(row->key.kind));
      break;
    }
    cfg_t *x = &r->cfgs[c];
    if (x->ngemm[g] == x->capgemm[g]) {
      size_t nc = x->capgemm[g] ? 2 * x->capgemm[g] : 64;
      double *nb = realloc(x->gemm[g], nc * sizeof *nb);
      if (!nb) {
        rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
        break;
      }
      x->gemm[g] = nb;
      x->capgemm[g] = nc;
    }
    if (!isnan(row->rel_error)) x->gemm[g][x->ngemm[g]++] = row->rel_error;
    *have = 1;
  }
  for (size_t c = 0; c < r->ncfg; c++)
    for (int g = 0; g < FP8_GEMM_COUNT; g++) {
      cfg_t *x = &r->cfgs[c];
      gsl_sort(x->gemm[g], 1, x->ngemm[g]);
      x->gemm_median[g] =
          x->ngemm[g] ? gsl_stats_median_from_sorted_data(x->gemm[g], 1, x->ngemm[g]) : NAN;
    }
  if (!rc) rc = gemm_interval_medians(r, t, err, errlen);
  gsl_sort(hw, 1, nhw);
  r->gemm_halfwidth = nhw ? gsl_stats_median_from_sorted_data(hw, 1, nhw) : NAN;
  free(hw);
  return rc;
}

/* The files of the run, each read whole and checked: run.json, steps.csv (with rows, distinct
 * plot files), histograms.csv, stream.csv and gemm.csv when the run has them. */
static int read_inputs(rep_t *r, fp8_gemm_table *gemm, int *have_gemm_file, char *err,
                       size_t errlen) {
  char path[4200];
  int rc = fp8_run_json_read(r->outdir, &r->run, err, errlen);
  if (rc) return rc;
  describe_trace(r);
  snprintf(path, sizeof path, "%s/%s", r->outdir, fp8_schema_steps.file);
  if ((rc = fp8_steps_csv_load(path, &r->tab, err, errlen))) return rc;
  r->have_tab = 1;
  char steps_path[4200];
  snprintf(steps_path, sizeof steps_path, "%s", path);
  /* distinct tensors, distinct plot files (fp8lab run checks it too; a steps.csv by hand) */
  if (r->tab.nrows &&
      (rc = fp8_tensor_files_distinct(r->tab.tensors, r->tab.ntensors, path, err, errlen)))
    return rc;
  snprintf(path, sizeof path, "%s/%s", r->outdir, fp8_schema_histograms.file);
  if ((rc = fp8_histograms_csv_load(path, &r->hist, err, errlen))) return rc;
  /* what the run says it wrote (run.json's outputs, read with the rest): stream.csv and
   * gemm.csv are then required (without them the report would quietly answer from the
   * snapshot steps alone, or leave the GEMMs out) */
  const fp8_outputs *listed = &r->run.outputs;
  const char *need[4] = {fp8_schema_stream.file, fp8_schema_gemm.file, FP8_STREAM_NPY_FILE,
                         FP8_STREAM_JSON_FILE};
  int npy = fp8_outputs_has(listed, FP8_STREAM_NPY_FILE); /* the compact stream */
  for (int k = 0; k < 4 && !rc; k++) {
    snprintf(path, sizeof path, "%s/%s", r->outdir, need[k]);
    if (fp8_outputs_has(listed, need[k]) && access(path, F_OK) != 0)
      rc = fp8_errorf(FP8_EIO, err, errlen, "%s: missing, but run.json lists it among the run's "
                      "files: restore it, or run the experiment again (the report needs it)",
                      path);
  }
  if (rc) return rc;
  /* stream.csv (or stream.npy): every step of the delayed configurations (absent: a run
   * without delayed configurations, or one of an fp8lab before it existed; the step budget
   * then uses the snapshot rows) */
  snprintf(path, sizeof path, "%s/%s", r->outdir, npy ? FP8_STREAM_NPY_FILE : fp8_schema_stream.file);
  if (access(path, F_OK) == 0) {
    if ((rc = fp8_stream_load(path, &r->stream, err, errlen))) return rc;
    r->have_stream = 1;
  }
  /* no snapshot rows: a trace of amaxes alone (amax.csv, TE's logs; issue 28). The report is
   * the stream's, over groups made from its series; without a stream there is nothing */
  if (r->tab.nrows == 0) {
    if (!r->have_stream || r->stream.nseries == 0)
      return fp8_errorf(FP8_EFORMAT, err, errlen,
                        "%s: no rows, and no stream of delayed configurations: nothing to report "
                        "(a trace without snapshots is reported from its amax stream, which needs "
                        "a [recipe.*] of kind delayed)",
                        steps_path);
    fp8_steps_csv_free(&r->tab);
    r->have_tab = 0;
    if (fp8_steps_csv_from_stream(&r->stream, &r->tab) != FP8_OK)
      return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
    r->have_tab = 1;
    r->stream_only = 1;
    rc = fp8_tensor_files_distinct(r->tab.tensors, r->tab.ntensors, path, err, errlen);
    if (rc) return rc;
  }
  /* experts.csv: only for a trace with tokens.csv (Mixture-of-Experts, issue 40) */
  snprintf(path, sizeof path, "%s/%s", r->outdir, fp8_schema_experts.file);
  if (access(path, F_OK) == 0) {
    if ((rc = fp8_experts_csv_load(path, &r->experts_csv, err, errlen))) return rc;
    r->have_experts = 1;
  }
  /* gemm.csv: absent for a run without GEMMs ([analysis] gemm = false, or no layer triplet) */
  snprintf(path, sizeof path, "%s/%s", r->outdir, fp8_schema_gemm.file);
  *have_gemm_file = access(path, F_OK) == 0;
  if (*have_gemm_file && (rc = fp8_gemm_csv_load(path, gemm, err, errlen))) return rc;
  return FP8_OK;
}

int rep_load(rep_t *r, const fp8_report_options *opt, char *err, size_t errlen) {
  fp8_gemm_table gemm = {0};
  int have_gemm_file = 0;
  int rc = read_inputs(r, &gemm, &have_gemm_file, err, errlen);
  if (rc) goto done;
  r->budget = opt && opt->overflow_budget >= 0 ? opt->overflow_budget
            : r->run.overflow_budget >= 0      ? r->run.overflow_budget
                                               : FP8_ANALYSIS_OVERFLOW_BUDGET;
  r->budgets.value = r->budget;
  r->budgets.step = opt && opt->step_budget >= 0 ? opt->step_budget
                  : r->run.step_budget >= 0      ? r->run.step_budget
                                                 : FP8_ANALYSIS_STEP_BUDGET;
  r->budgets.stream_only = r->stream_only;
  r->budgets.has_flush = !isnan(r->run.flush_budget);
  r->budgets.flush = r->run.flush_budget;
  if ((rc = fp8_analysis_compute(&r->tab, &r->an, err, errlen))) goto done;
  r->have_an = 1;
  if (r->have_stream && (rc = fp8_analysis_add_stream(&r->an, &r->stream, err, errlen))) goto done;
  if ((rc = rep_moe_routers(r))) {
    fp8_errorf(rc, err, errlen, "out of memory");
    goto done;
  }
  if ((rc = fp8_analysis_recommend(&r->an, &r->budgets, &r->rec, err, errlen))) goto done;
  r->have_rec = 1;
  if ((rc = rep_build_configs(r))) {
    fp8_errorf(rc, err, errlen, "out of memory");
    goto done;
  }
  if ((rc = rep_te_totals(r, err, errlen))) goto done;
  rep_find_spike(r);
  /* after the spike: the timelines' tensors decide which series are kept */
  if (r->have_stream && (rc = rep_keep_series(r, rep_max_timelines(opt), err, errlen)))
    goto done;
  if ((rc = rep_moe_load(r))) { /* after the reference's scales are kept */
    fp8_errorf(rc, err, errlen, "out of memory");
    goto done;
  }
  if (have_gemm_file) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", r->outdir, fp8_schema_gemm.file);
    rc = rep_add_gemm(r, &gemm, path, &r->have_gemm, err, errlen);
    if (!rc && (rc = rep_gemm_mix_load(r, &gemm))) fp8_errorf(rc, err, errlen, "out of memory");
    if (!rc && (rc = rep_tc_load(r, &gemm))) fp8_errorf(rc, err, errlen, "out of memory");
  }
  /* the FP4 section: its per-role rates need no GEMM; its layers come from gemm.csv's rows */
  if (!rc) rc = rep_fp4_prepare(r, &gemm, err, errlen);
  /* the BF16 demotion plans: the FP4 one from its verdicts, the FP8 one's ratios from gemm.csv */
  if (!rc) rc = rep_bf16_plan_prepare(r, have_gemm_file ? &gemm : NULL, err, errlen);
done:
  fp8_gemm_csv_free(&gemm);
  return rc;
}

void rep_free(rep_t *r) {
  for (size_t c = 0; r->cfgs && c < r->ncfg; c++)
    for (int g = 0; g < FP8_GEMM_COUNT; g++) free(r->cfgs[c].gemm[g]);
  free(r->cfgs);
  free(r->gcfg);
  free(r->router_group);
  fp8_experts_csv_free(&r->experts_csv);
  free(r->experts);
  free(r->series);
  free(r->ov);
  free(r->te);
  r->te = NULL;
  rep_fp4_free(r);
  rep_bf16_plan_free(r);
  rep_gemm_mix_free(r);
  rep_tc_free(r);
  r->nte = 0;
  if (r->have_rec) fp8_recommendations_free(&r->rec);
  if (r->have_an) fp8_analysis_free(&r->an);
  if (r->have_tab) fp8_steps_csv_free(&r->tab);
  if (r->have_stream) fp8_stream_free(&r->stream);
  fp8_histograms_csv_free(&r->hist);
  fp8_run_json_free(&r->run);
  r->cfgs = NULL;
  r->gcfg = NULL;
  r->series = NULL;
  r->ov = NULL;
  r->have_rec = r->have_an = r->have_tab = r->have_stream = 0;
}
