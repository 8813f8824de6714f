/* report_read.c: the readers of `fp8lab report` for the run's result files other than
 * steps.csv (read by stepscsv.c): run.json (the experiment's name and budget, the trace),
 * histograms.csv (the magnitudes at the spike) and gemm.csv (GEMM errors per configuration).
 */
#include "report_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <jansson.h>

#include "outfile.h" /* fp8_errorf */

/* ------------------------------------------------------------------ run.json */

void rep_read_run_json(rep_t *r, double *budget_out) {
  char path[4200];
  snprintf(path, sizeof path, "%s/run.json", r->outdir);
  json_error_t jerr;
  json_t *j = json_load_file(path, 0, &jerr);
  const char *slash = strrchr(r->outdir, '/');
  snprintf(r->name, sizeof r->name, "%s", slash && slash[1] ? slash + 1 : r->outdir);
  snprintf(r->trace, sizeof r->trace, "%s", "(unknown)");
  *budget_out = -1;
  if (!j) return;
  json_t *ex = json_object_get(j, "experiment");
  const char *nm = json_string_value(json_object_get(ex, "name"));
  if (nm && *nm) snprintf(r->name, sizeof r->name, "%s", nm);
  json_t *b = json_object_get(ex, "overflow_budget");
  if (json_is_number(b)) *budget_out = json_number_value(b);
  json_t *tr = json_object_get(j, "trace");
  const char *tp = json_string_value(json_object_get(tr, "path"));
  const char *preset = json_string_value(json_object_get(tr, "synth_preset"));
  if (preset)
    snprintf(r->trace, sizeof r->trace, "synthetic '%s' trace (%lld steps, seed %lld)", preset,
             (long long)json_integer_value(json_object_get(tr, "synth_steps")),
             (long long)json_integer_value(json_object_get(tr, "synth_seed")));
  else if (tp)
    snprintf(r->trace, sizeof r->trace, "%s", tp);
  json_decref(j);
}

/* ------------------------------------------------------------------ histograms.csv */

int rep_load_histogram(const rep_t *r, const char *tensor, int64_t step, double *counts,
                       int *lo_bin, int *nbins) {
  char path[4200];
  snprintf(path, sizeof path, "%s/histograms.csv", r->outdir);
  FILE *fp = fopen(path, "r");
  if (!fp) return FP8_EIO;
  char line[4096];
  int lo = 1000, hi = -1000;
  double tmp[FP8_LOG2_HIST_BINS] = {0};
  size_t tl = strlen(tensor);
  while (fgets(line, sizeof line, fp)) {
    if (strncmp(line, tensor, tl) != 0 || line[tl] != ',') continue;
    long long st, cnt;
    int bin;
    if (sscanf(line + tl + 1, "%lld,%d,%lld", &st, &bin, &cnt) != 3 || st != step) continue;
    if (bin < FP8_LOG2_HIST_MIN || bin >= FP8_LOG2_HIST_MIN + FP8_LOG2_HIST_BINS) continue;
    tmp[bin - FP8_LOG2_HIST_MIN] = (double)cnt;
    if (bin < lo) lo = bin;
    if (bin > hi) hi = bin;
  }
  fclose(fp);
  if (hi < lo) return FP8_EFORMAT;
  *lo_bin = lo;
  *nbins = hi - lo + 1;
  for (int b = lo; b <= hi; b++) counts[b - lo] = tmp[b - FP8_LOG2_HIST_MIN];
  return FP8_OK;
}

/* ------------------------------------------------------------------ gemm.csv */

int rep_load_gemm(rep_t *r, int *have, char *err, size_t errlen) {
  char path[4200];
  snprintf(path, sizeof path, "%s/gemm.csv", r->outdir);
  *have = 0;
  FILE *fp = fopen(path, "r");
  if (!fp) return FP8_OK;
  char line[2048];
  int64_t lineno = 0;
  int rc = FP8_OK;
  while (fgets(line, sizeof line, fp)) {
    lineno++;
    line[strcspn(line, "\r\n")] = 0;
    if (lineno == 1) {
      if (strcmp(line, "layer,gemm,step,recipe,kind,history_len,margin,amax_compute,rel_error") != 0) {
        rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s:1: not a gemm.csv header", path);
        break;
      }
      continue;
    }
    char *f[9];
    int n = 0;
    f[n++] = line;
    for (char *p = line; *p && n < 9; p++)
      if (*p == ',') {
        *p = 0;
        f[n++] = p + 1;
      }
    if (n != 9) {
      rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%lld: expected 9 fields", path, (long long)lineno);
      break;
    }
    int g = strcmp(f[1], "fprop") == 0 ? 0 : strcmp(f[1], "dgrad") == 0 ? 1 : strcmp(f[1], "wgrad") == 0 ? 2 : -1;
    char *end;
    double v = strtod(f[8], &end);
    if (g < 0 || *end) {
      rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%lld: bad gemm or rel_error", path, (long long)lineno);
      break;
    }
    int is_delayed = strcmp(f[4], "delayed") == 0;
    for (size_t c = 0; c < r->ncfg; c++) {
      cfg_t *x = &r->cfgs[c];
      if (strcmp(x->recipe, f[3]) != 0 || strcmp(fp8_recipe_kind_name(x->kind), f[4]) != 0) continue;
      if (is_delayed && (x->h != atoi(f[5]) || x->m != atoi(f[6]) ||
                         strcmp(fp8_amax_compute_name(x->ac), f[7]) != 0))
        continue;
      if (x->ngemm[g] == x->capgemm[g]) {
        size_t nc = x->capgemm[g] ? 2 * x->capgemm[g] : 64;
        double *nb = realloc(x->gemm[g], nc * sizeof *nb);
        if (!nb) {
          rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
          goto done;
        }
        x->gemm[g] = nb;
        x->capgemm[g] = nc;
      }
      if (!isnan(v)) x->gemm[g][x->ngemm[g]++] = v;
      *have = 1;
      break;
    }
  }
done:
  fclose(fp);
  for (size_t c = 0; c < r->ncfg; c++)
    for (int g = 0; g < 3; g++) {
      cfg_t *x = &r->cfgs[c];
      gsl_sort(x->gemm[g], 1, x->ngemm[g]);
      x->gemm_median[g] = x->ngemm[g] ? gsl_stats_median_from_sorted_data(x->gemm[g], 1, x->ngemm[g]) : NAN;
    }
  return rc;
}
