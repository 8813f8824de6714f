/* report_read.c: the readers of `fp8lab report` for the run's result files other than
 * steps.csv (read by stepscsv.c): run.json (the experiment's name and budget, the trace),
 * histograms.csv (the magnitudes at the spike) and gemm.csv (GEMM errors per configuration).
 * The two CSV files are read through their schemas in results.h, the tables the runner writes
 * them with: the header must match, and fields are found by their FP8_*_COL_* position. */
#include "report_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <jansson.h>

#include "gemm.h"    /* fp8_gemm_name */
#include "outfile.h" /* fp8_errorf */
#include "results.h" /* fp8_schema_histograms, fp8_schema_gemm */

/* cfg_t's gemm arrays are indexed by fp8_gemm_kind. */
_Static_assert(FP8_GEMM_COUNT == 3, "cfg_t holds the errors of fprop, dgrad and wgrad");

/* ------------------------------------------------------------------ run.json */

void rep_read_run_json(rep_t *r, double *budget_out, double *step_budget_out) {
  char path[4200];
  snprintf(path, sizeof path, "%s/run.json", r->outdir);
  json_error_t jerr;
  json_t *j = json_load_file(path, 0, &jerr);
  const char *slash = strrchr(r->outdir, '/');
  snprintf(r->name, sizeof r->name, "%s", slash && slash[1] ? slash + 1 : r->outdir);
  snprintf(r->trace, sizeof r->trace, "%s", "(unknown)");
  *budget_out = *step_budget_out = -1;
  r->warmup_override = -1;
  if (!j) return;
  json_t *ex = json_object_get(j, "experiment");
  const char *nm = json_string_value(json_object_get(ex, "name"));
  if (nm && *nm) snprintf(r->name, sizeof r->name, "%s", nm);
  json_t *b = json_object_get(ex, "overflow_budget");
  if (json_is_number(b)) *budget_out = json_number_value(b);
  json_t *sb = json_object_get(ex, "step_budget");
  if (json_is_number(sb)) *step_budget_out = json_number_value(sb);
  json_t *wu = json_object_get(ex, "warmup_steps");
  if (json_is_integer(wu)) r->warmup_override = (int64_t)json_integer_value(wu);
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

/* Splits line (modified in place) at its first n - 1 commas: f[0..n), the last field holding
 * the rest of the line. Returns the number of fields found. */
static int split_n(char *line, char **f, int n) {
  int k = 0;
  f[k++] = line;
  for (char *p = line; *p && k < n; p++)
    if (*p == ',') {
      *p = 0;
      f[k++] = p + 1;
    }
  return k;
}

/* An integer field: the whole field (after leading blanks), as sscanf reads it. */
static int scan_ll(const char *s, long long *v) {
  int end = 0;
  return sscanf(s, "%lld%n", v, &end) == 1 && s[end] == 0;
}

static int scan_int(const char *s, int *v) {
  int end = 0;
  return sscanf(s, "%d%n", v, &end) == 1 && s[end] == 0;
}

/* ------------------------------------------------------------------ histograms.csv */

int rep_load_histogram(const rep_t *r, const char *tensor, int64_t step, double *counts,
                       int *lo_bin, int *nbins) {
  const fp8_schema *s = &fp8_schema_histograms;
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", r->outdir, s->file);
  FILE *fp = fopen(path, "r");
  if (!fp) return FP8_EIO;
  char line[4096];
  int lo = 1000, hi = -1000, header = 1;
  double tmp[FP8_LOG2_HIST_BINS] = {0};
  while (fgets(line, sizeof line, fp)) {
    if (header) {
      header = 0;
      line[strcspn(line, "\r\n")] = 0;
      if (!fp8_schema_match_header(s, line)) break; /* hi < lo: no histogram */
      continue;
    }
    /* a line that does not parse, or of another tensor or step, is skipped; the count field
     * holds the rest of the line (its newline) */
    char *f[FP8_HIST_COL_COUNT];
    if (split_n(line, f, FP8_HIST_COL_COUNT) != FP8_HIST_COL_COUNT) continue;
    if (strcmp(f[FP8_HIST_COL_TENSOR], tensor) != 0) continue;
    long long st, cnt;
    int bin;
    if (!scan_ll(f[FP8_HIST_COL_STEP], &st) || !scan_int(f[FP8_HIST_COL_LOG2_BIN], &bin) ||
        sscanf(f[FP8_HIST_COL_COUNT_], "%lld", &cnt) != 1 || st != step)
      continue;
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

/* Adds one row's rel_error to the configuration it belongs to (none: ignored); sets *have. */
static int gemm_add(rep_t *r, char **f, int g, double v, int *have, char *err, size_t errlen) {
  int is_delayed = strcmp(f[FP8_GEMM_COL_KIND], "delayed") == 0;
  int h = is_delayed ? atoi(f[FP8_GEMM_COL_HISTORY_LEN]) : 0;
  int m = is_delayed ? atoi(f[FP8_GEMM_COL_MARGIN]) : 0;
  for (size_t c = 0; c < r->ncfg; c++) {
    cfg_t *x = &r->cfgs[c];
    if (strcmp(x->recipe, f[FP8_GEMM_COL_RECIPE]) != 0) continue;
    if (!x->mixed && strcmp(fp8_recipe_kind_name(x->kind), f[FP8_GEMM_COL_KIND]) != 0) continue;
    if (!x->mixed && is_delayed && (x->h != h || x->m != m ||
                       strcmp(fp8_amax_compute_name(x->ac), f[FP8_GEMM_COL_AMAX_COMPUTE]) != 0))
      continue;
    if (x->ngemm[g] == x->capgemm[g]) {
      size_t nc = x->capgemm[g] ? 2 * x->capgemm[g] : 64;
      double *nb = realloc(x->gemm[g], nc * sizeof *nb);
      if (!nb) return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
      x->gemm[g] = nb;
      x->capgemm[g] = nc;
    }
    if (!isnan(v)) x->gemm[g][x->ngemm[g]++] = v;
    *have = 1;
    break;
  }
  return FP8_OK;
}

int rep_load_gemm(rep_t *r, int *have, char *err, size_t errlen) {
  const fp8_schema *s = &fp8_schema_gemm;
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", r->outdir, s->file);
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
      if (!fp8_schema_match_header(s, line)) {
        rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s:1: not a %s header", path, s->file);
        break;
      }
      continue;
    }
    /* one field more than the columns stays in the last one: rel_error then fails to parse */
    char *f[FP8_GEMM_COL_COUNT];
    if (split_n(line, f, FP8_GEMM_COL_COUNT) != FP8_GEMM_COL_COUNT) {
      rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%lld: expected %d fields", path,
                      (long long)lineno, FP8_GEMM_COL_COUNT);
      break;
    }
    int g = -1;
    for (int k = 0; k < FP8_GEMM_COUNT; k++)
      if (strcmp(f[FP8_GEMM_COL_GEMM], fp8_gemm_name((fp8_gemm_kind)k)) == 0) g = k;
    char *end;
    double v = strtod(f[FP8_GEMM_COL_REL_ERROR], &end);
    if (g < 0 || *end) {
      rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%lld: bad gemm or rel_error", path,
                      (long long)lineno);
      break;
    }
    if ((rc = gemm_add(r, f, g, v, have, err, errlen)) != FP8_OK) break;
  }
  fclose(fp);
  for (size_t c = 0; c < r->ncfg; c++)
    for (int g = 0; g < 3; g++) {
      cfg_t *x = &r->cfgs[c];
      gsl_sort(x->gemm[g], 1, x->ngemm[g]);
      x->gemm_median[g] =
          x->ngemm[g] ? gsl_stats_median_from_sorted_data(x->gemm[g], 1, x->ngemm[g]) : NAN;
    }
  return rc;
}
