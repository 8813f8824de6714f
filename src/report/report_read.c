/* report_read.c: the readers of `fp8lab report` for the run's result files other than
 * steps.csv (read by stepscsv.c): run.json (the experiment's name and budget, the trace),
 * histograms.csv (the magnitudes at the spike) and gemm.csv (GEMM errors per configuration).
 * The two CSV files are read through their schemas in results.h, the tables the runner writes
 * them with: the header must match, and fields are found by their FP8_*_COL_* position. */
#include "report_internal.h"

#include <errno.h>
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
#include "stepscsv_internal.h" /* steps_parse_i64, steps_parse_f64 */
#include "trace.h"   /* fp8_tensor_name_check */

/* cfg_t's gemm arrays are indexed by fp8_gemm_kind. */
_Static_assert(FP8_GEMM_COUNT == 3, "cfg_t holds the errors of fprop, dgrad and wgrad");

/* ------------------------------------------------------------------ run.json */

/* experiment.name becomes the notebook's file name (notebooks_export/<name>.ipynb): a name
 * without '/', not "." or "..", under the tensor-name rules otherwise. */
static int is_file_name(const char *s) {
  char why[FP8_ESC_LEN + 64];
  return fp8_tensor_name_check(s, strlen(s), FP8_NAME_MAX, why, sizeof why) == 0 &&
         !strchr(s, '/') && strcmp(s, ".") != 0;
}

/* A number in 0..1 at key of object o ("<what>: expected a number in 0..1"). */
static int budget_of(const char *path, json_t *o, const char *key, double *out, char *err,
                     size_t errlen) {
  json_t *b = json_object_get(o, key);
  if (!json_is_number(b) || !(json_number_value(b) >= 0 && json_number_value(b) <= 1))
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: experiment.%s: expected a number in 0..1",
                      path, key);
  *out = json_number_value(b);
  return FP8_OK;
}

/* The lists of tensors without rows (fp8_left_keys: absent in a run.json written before them),
 * each an array of tensor names: the report names them, so each one passes the name rules as
 * steps.csv's names do. */
static int read_left_out(rep_t *r, json_t *j, const char *path, char *err, size_t errlen) {
  for (int why = FP8_LEFT_NEVER_RAN; why < FP8_LEFT_COUNT; why++) {
    const char *key = fp8_left_keys[why];
    json_t *a = json_object_get(j, key);
    if (!a) continue;
    if (!json_is_array(a))
      return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: %s: expected an array of tensor names",
                        path, key);
    size_t n = json_array_size(a);
    if (!(r->left[why] = calloc(n + 1, sizeof *r->left[why])))
      return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
    for (size_t k = 0; k < n; k++) {
      json_t *v = json_array_get(a, k);
      char why_bad[FP8_ESC_LEN + 64] = "not a string";
      if (!json_is_string(v) ||
          fp8_tensor_name_check(json_string_value(v), json_string_length(v),
                                FP8_NAME_MAX + FP8_RANK_PREFIX_MAX, why_bad, sizeof why_bad) != 0)
        return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: %s[%zu]: expected a tensor name: %s",
                          path, key, k, why_bad);
      if (!(r->left[why][k] = strdup(json_string_value(v))))
        return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
      r->nleft[why] = k + 1;
    }
  }
  return FP8_OK;
}

/* run.json's model_shape (absent in a run.json written before it, or for a trace without
 * Linear layers): each Linear's name, sizes and dtypes, checked as the rest. */
static int read_model_shape(rep_t *r, json_t *j, const char *path, char *err, size_t errlen) {
  json_t *ms = json_object_get(j, "model_shape");
  if (!ms) return FP8_OK;
  json_t *ly = json_object_get(ms, "layers"), *w = json_object_get(ms, "world");
  json_t *a = json_object_get(ms, "linears");
  if (!json_is_object(ms) || !json_is_integer(ly) || json_integer_value(ly) < 1 ||
      !json_is_integer(w) || json_integer_value(w) < 1 || json_integer_value(w) > (1 << 24) ||
      !json_is_array(a) || json_array_size(a) == 0)
    return fp8_errorf(FP8_EFORMAT, err, errlen,
                      "%s: model_shape: expected an object with layers and world (integers >= 1) "
                      "and linears (a non-empty array)", path);
  fp8_tl_shape *s = &r->tl;
  memset(s, 0, sizeof *s);
  if (!(s->linears = calloc(json_array_size(a), sizeof *s->linears)))
    return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  s->layers = (int64_t)json_integer_value(ly);
  s->world = (int64_t)json_integer_value(w);
  s->history_len = 1024;
  r->have_tl = 1; /* freed by rep_free_run_json whatever follows */
  for (size_t k = 0; k < json_array_size(a); k++) {
    json_t *o = json_array_get(a, k), *v[3], *nm = json_object_get(o, "name");
    json_t *dt = json_object_get(o, "dtypes");
    static const char *const keys[3] = {"tokens", "in", "out"};
    char why[FP8_ESC_LEN + 64] = "not a string";
    if (!json_is_string(nm) || fp8_tensor_name_check(json_string_value(nm), json_string_length(nm),
                                                     FP8_NAME_MAX, why, sizeof why) != 0)
      return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: model_shape.linears[%zu].name: %s", path,
                        k, why);
    fp8_tl_linear *l = &s->linears[k];
    for (int i = 0; i < 3; i++) {
      v[i] = json_object_get(o, keys[i]);
      if (!json_is_integer(v[i]) || json_integer_value(v[i]) < 1 ||
          json_integer_value(v[i]) > ((json_int_t)1 << 40))
        return fp8_errorf(FP8_EFORMAT, err, errlen,
                          "%s: model_shape.linears[%zu].%s: expected an integer from 1 to 2^40",
                          path, k, keys[i]);
    }
    l->tokens = (int64_t)json_integer_value(v[0]);
    l->in = (int64_t)json_integer_value(v[1]);
    l->out = (int64_t)json_integer_value(v[2]);
    if (!json_is_array(dt) || json_array_size(dt) != 3)
      return fp8_errorf(FP8_EFORMAT, err, errlen,
                        "%s: model_shape.linears[%zu].dtypes: expected 3 dtype names", path, k);
    for (int i = 0; i < 3; i++) {
      const char *d = json_string_value(json_array_get(dt, (size_t)i));
      int found = 0;
      for (int t = FP8_DTYPE_F32; t <= FP8_DTYPE_F16 && d; t++)
        if (strcmp(d, fp8_dtype_name((fp8_dtype)t)) == 0) l->dtype[i] = (fp8_dtype)t, found = 1;
      if (!found)
        return fp8_errorf(FP8_EFORMAT, err, errlen,
                          "%s: model_shape.linears[%zu].dtypes[%d]: expected F32, BF16 or F16",
                          path, k, i);
    }
    if (!(l->name = strdup(json_string_value(nm))))
      return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
    s->nlinears = k + 1;
  }
  return FP8_OK;
}

void rep_free_run_json(rep_t *r) {
  if (r->have_tl) fp8_tl_shape_free(&r->tl);
  r->have_tl = 0;
  for (int why = 0; why < FP8_LEFT_COUNT; why++) {
    for (size_t k = 0; k < r->nleft[why]; k++) free(r->left[why][k]);
    free(r->left[why]);
    r->left[why] = NULL;
    r->nleft[why] = 0;
  }
}

/* The keys the report takes from run.json, each checked: it is fp8lab's own file, and a
 * corrupted one would give a report of another experiment (or a notebook written outside the
 * folder). A missing run.json is an error: a folder without one was not written by fp8lab run. */
static int read_run_json(rep_t *r, json_t *j, const char *path, double *budget_out,
                         double *step_budget_out, char *err, size_t errlen) {
  char shown[FP8_ESC_LEN];
  if (!json_is_object(j))
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: expected a JSON object", path);
  json_t *ex = json_object_get(j, "experiment");
  if (!json_is_object(ex))
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: experiment: expected an object", path);
  json_t *nm = json_object_get(ex, "name");
  if (!json_is_string(nm))
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: experiment.name: expected a string", path);
  if (!is_file_name(json_string_value(nm)) || strlen(json_string_value(nm)) != json_string_length(nm))
    return fp8_errorf(FP8_EFORMAT, err, errlen,
                      "%s: experiment.name '%s' is not a file name (a name without '/', not . or "
                      ".., printable UTF-8 of 1 to %d bytes)",
                      path, fp8_escape(json_string_value(nm), json_string_length(nm), shown,
                                       sizeof shown), FP8_NAME_MAX);
  snprintf(r->name, sizeof r->name, "%s", json_string_value(nm));
  int rc = budget_of(path, ex, "overflow_budget", budget_out, err, errlen);
  if (!rc) rc = budget_of(path, ex, "step_budget", step_budget_out, err, errlen);
  if (rc) return rc;
  json_t *wu = json_object_get(ex, "warmup_steps");
  if (wu && (!json_is_integer(wu) || json_integer_value(wu) < 0))
    return fp8_errorf(FP8_EFORMAT, err, errlen,
                      "%s: experiment.warmup_steps: expected an integer >= 0", path);
  if (wu) r->warmup_override = (int64_t)json_integer_value(wu);
  if ((rc = read_left_out(r, j, path, err, errlen)) != FP8_OK) return rc;
  if ((rc = read_model_shape(r, j, path, err, errlen)) != FP8_OK) return rc;
  json_t *tr = json_object_get(j, "trace");
  if (!json_is_object(tr))
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: trace: expected an object", path);
  json_t *tp = json_object_get(tr, "path"), *preset = json_object_get(tr, "synth_preset");
  if (!json_is_string(tp))
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: trace.path: expected a string", path);
  if (preset) {
    json_t *st = json_object_get(tr, "synth_steps"), *sd = json_object_get(tr, "synth_seed");
    if (!json_is_string(preset) || !json_is_integer(st) || !json_is_integer(sd))
      return fp8_errorf(FP8_EFORMAT, err, errlen,
                        "%s: trace: expected synth_preset (a string), synth_steps and synth_seed "
                        "(integers) together", path);
    snprintf(r->trace, sizeof r->trace, "synthetic '%s' trace (%lld steps, seed %lld)",
             json_string_value(preset), (long long)json_integer_value(st),
             (long long)json_integer_value(sd));
  } else {
    snprintf(r->trace, sizeof r->trace, "%s", json_string_value(tp));
  }
  return FP8_OK;
}

int rep_read_run_json(rep_t *r, double *budget_out, double *step_budget_out, char *err,
                      size_t errlen) {
  char path[4200];
  snprintf(path, sizeof path, "%s/run.json", r->outdir);
  *budget_out = *step_budget_out = -1;
  r->warmup_override = -1;
  rep_free_run_json(r); /* a second read replaces the lists of the first */
  FILE *fp = fopen(path, "rb");
  if (!fp)
    return fp8_errorf(FP8_EIO, err, errlen,
                      "%s: cannot open: %s (fp8lab report reads a folder that fp8lab run wrote)",
                      path, strerror(errno));
  json_error_t jerr;
  json_t *j = json_loadf(fp, JSON_REJECT_DUPLICATES, &jerr);
  fclose(fp);
  int rc;
  if (!j) {
    char text[FP8_ESC_LEN];
    rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%d: not JSON: %s", path, jerr.line,
                    fp8_esc(jerr.text, text, sizeof text));
  } else {
    rc = read_run_json(r, j, path, budget_out, step_budget_out, err, errlen);
  }
  json_decref(j);
  return rc;
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

/* A CSV line of one of the files of the run, after the header: fields split in place at
 * every comma into f[0..max) (a count above max: too many). */
static int split_all(char *line, char **f, int max) {
  int n = 0;
  f[n++] = line;
  for (char *p = line; *p; p++)
    if (*p == ',') {
      *p = 0;
      if (n == max) return max + 1;
      f[n++] = p + 1;
    }
  return n;
}

/* "<path>:<line>: column <name>: expected <what>, found '<field>'" */
static int bad_field(const char *path, int64_t line, const fp8_schema *s, int col, const char *field,
                     const char *what, char *err, size_t errlen) {
  char shown[44];
  return fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%lld: column %s: expected %s, found '%s'", path,
                    (long long)line, s->columns[col], what, fp8_esc(field, shown, sizeof shown));
}

/* A tensor column: the name rules (names of a multi-rank trace carry their rank_<r>/). */
static int check_tensor_field(const char *path, int64_t line, const fp8_schema *s, int col,
                              const char *name, char *err, size_t errlen) {
  char why[FP8_ESC_LEN + 64], shown[FP8_ESC_LEN];
  if (fp8_tensor_name_check(name, strlen(name), FP8_NAME_MAX + FP8_RANK_PREFIX_MAX, why,
                            sizeof why) == 0)
    return FP8_OK;
  return fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%lld: column %s: %s: %s", path, (long long)line,
                    s->columns[col], fp8_esc(name, shown, sizeof shown), why);
}

/* The lines of a text read whole (histograms.csv, gemm.csv), each cut in place. */
typedef struct {
  char *p, *end;
} lines_t;

/* The next line of it, NUL-terminated without its "\n" or "\r\n", in *ln and *len, and its
 * number in *line; *ln = NULL at the end. FP8_EFORMAT "<path>:<line>: NUL byte in the line". */
static int next_line(lines_t *it, char **ln, size_t *len, int64_t *line, const char *path,
                     char *err, size_t errlen) {
  *ln = NULL;
  if (it->p >= it->end) return FP8_OK;
  char *nl = memchr(it->p, '\n', (size_t)(it->end - it->p)), *s = it->p;
  size_t l = nl ? (size_t)(nl - s) : (size_t)(it->end - s);
  it->p += l + (nl != NULL);
  ++*line;
  if (memchr(s, 0, l))
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%lld: NUL byte in the line", path,
                      (long long)*line);
  s[l] = 0;
  if (l && s[l - 1] == '\r') s[--l] = 0;
  *ln = s;
  *len = l;
  return FP8_OK;
}

/* One data line of histograms.csv (NUL-terminated, its '\r' removed). */
static int check_histogram_line(const char *path, int64_t line, char *ln, char *err,
                                size_t errlen) {
  const fp8_schema *s = &fp8_schema_histograms;
  char *f[FP8_HIST_COL_COUNT + 1];
  int n = split_all(ln, f, FP8_HIST_COL_COUNT);
  if (n != FP8_HIST_COL_COUNT)
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%lld: expected %d fields, found %s%d", path,
                      (long long)line, FP8_HIST_COL_COUNT, n > FP8_HIST_COL_COUNT ? "more than " : "",
                      n > FP8_HIST_COL_COUNT ? FP8_HIST_COL_COUNT : n);
  int64_t v;
  int rc = check_tensor_field(path, line, s, FP8_HIST_COL_TENSOR, f[FP8_HIST_COL_TENSOR], err, errlen);
  if (rc) return rc;
  if (!steps_parse_i64(f[FP8_HIST_COL_STEP], 0, &v))
    return bad_field(path, line, s, FP8_HIST_COL_STEP, f[FP8_HIST_COL_STEP], "a step number >= 0",
                     err, errlen);
  if (!steps_parse_i64(f[FP8_HIST_COL_LOG2_BIN], 1, &v) || v < FP8_LOG2_HIST_MIN ||
      v >= FP8_LOG2_HIST_MIN + FP8_LOG2_HIST_BINS) {
    char what[64];
    snprintf(what, sizeof what, "an integer in %d..%d", FP8_LOG2_HIST_MIN,
             FP8_LOG2_HIST_MIN + FP8_LOG2_HIST_BINS - 1);
    return bad_field(path, line, s, FP8_HIST_COL_LOG2_BIN, f[FP8_HIST_COL_LOG2_BIN], what, err,
                     errlen);
  }
  if (!steps_parse_i64(f[FP8_HIST_COL_COUNT_], 0, &v))
    return bad_field(path, line, s, FP8_HIST_COL_COUNT_, f[FP8_HIST_COL_COUNT_],
                     "a count (integer >= 0)", err, errlen);
  return FP8_OK;
}

int rep_check_histograms(const rep_t *r, char *err, size_t errlen) {
  const fp8_schema *s = &fp8_schema_histograms;
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", r->outdir, s->file);
  FILE *fp = fopen(path, "rb");
  if (!fp) return fp8_errorf(FP8_EIO, err, errlen, "%s: cannot open: %s", path, strerror(errno));
  char *text = NULL;
  size_t len = 0;
  int rc = fp8_read_stream(fp, &text, &len);
  fclose(fp);
  if (rc) return fp8_errorf(rc, err, errlen, "%s: cannot read", path);
  int64_t line = 0;
  lines_t it = {text, text + len};
  char *ln;
  size_t l;
  while (!rc && (rc = next_line(&it, &ln, &l, &line, path, err, errlen)) == FP8_OK && ln) {
    if (line == 1 && fp8_schema_match_header(s, ln) != FP8_HIST_COL_COUNT) {
      char want[128];
      size_t o = 0;
      for (int k = 0; k < s->ncols; k++)
        o += (size_t)snprintf(want + o, sizeof want - o, "%s%s", k ? "," : "", s->columns[k]);
      rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s:1: not a %s header (expected '%s')", path,
                      s->file, want);
    } else if (line > 1 && l == 0) {
      rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%lld: empty line", path, (long long)line);
    } else if (line > 1) {
      rc = check_histogram_line(path, line, ln, err, errlen);
    }
  }
  if (!rc && line == 0) rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s:1: empty file", path);
  free(text);
  return rc;
}

/* ------------------------------------------------------------------ gemm.csv */

/* Adds one row's rel_error to the configuration it belongs to; sets *have. A row of no
 * configuration of steps.csv is an error (the two files come from one run). */
static int gemm_add(rep_t *r, char **f, int g, double v, int *have, const char *path,
                    int64_t line, char *err, size_t errlen) {
  int is_delayed = strcmp(f[FP8_GEMM_COL_KIND], "delayed") == 0;
  int h = is_delayed ? atoi(f[FP8_GEMM_COL_HISTORY_LEN]) : 0; /* checked by gemm_check */
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
    return FP8_OK;
  }
  return fp8_errorf(FP8_EFORMAT, err, errlen,
                    "%s:%lld: recipe %s (%s) is not a configuration of steps.csv", path,
                    (long long)line, f[FP8_GEMM_COL_RECIPE], f[FP8_GEMM_COL_KIND]);
}

/* The fields of one gemm.csv row (its layer, gemm, step, configuration and rel_error), as
 * steps.csv's are checked; *g gets the gemm kind, *v the rel_error. */
static int gemm_check(const char *path, int64_t line, char **f, int *g, double *v, char *err,
                      size_t errlen) {
  const fp8_schema *s = &fp8_schema_gemm;
  int rc = check_tensor_field(path, line, s, FP8_GEMM_COL_LAYER, f[FP8_GEMM_COL_LAYER], err,
                              errlen);
  if (rc) return rc;
  *g = -1;
  for (int k = 0; k < FP8_GEMM_COUNT; k++)
    if (strcmp(f[FP8_GEMM_COL_GEMM], fp8_gemm_name((fp8_gemm_kind)k)) == 0) *g = k;
  int64_t x;
#define BAD(col, what) bad_field(path, line, s, col, f[col], what, err, errlen)
  if (*g < 0) return BAD(FP8_GEMM_COL_GEMM, "fprop, dgrad or wgrad");
  if (!steps_parse_i64(f[FP8_GEMM_COL_STEP], 0, &x)) return BAD(FP8_GEMM_COL_STEP, "a step number >= 0");
  const char *recipe = f[FP8_GEMM_COL_RECIPE];
  size_t nr = strlen(recipe);
  if (nr == 0 || nr > 63 || strspn(recipe, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                           "0123456789_.-") != nr)
    return BAD(FP8_GEMM_COL_RECIPE, "a recipe label (A-Z a-z 0-9 _ . -)");
  const char *kind = f[FP8_GEMM_COL_KIND];
  int known = 0;
  for (int k = FP8_KIND_DELAYED; k <= FP8_KIND_ROWWISE; k++)
    known |= strcmp(kind, fp8_recipe_kind_name((fp8_recipe_kind)k)) == 0;
  if (!known) return BAD(FP8_GEMM_COL_KIND, "delayed, current, mxfp8, block or rowwise");
  if (strcmp(kind, "delayed") != 0) {
    for (int col = FP8_GEMM_COL_HISTORY_LEN; col <= FP8_GEMM_COL_AMAX_COMPUTE; col++)
      if (*f[col]) return BAD(col, "an empty field for non-delayed kinds");
  } else {
    if (!steps_parse_i64(f[FP8_GEMM_COL_HISTORY_LEN], 0, &x) || x < 1 || x > FP8_HISTORY_LIMIT)
      return BAD(FP8_GEMM_COL_HISTORY_LEN, "an integer in 1..1048576 for delayed scaling");
    if (!steps_parse_i64(f[FP8_GEMM_COL_MARGIN], 1, &x) || x < -FP8_MARGIN_LIMIT ||
        x > FP8_MARGIN_LIMIT)
      return BAD(FP8_GEMM_COL_MARGIN, "an integer in -64..64 for delayed scaling");
    const char *ac = f[FP8_GEMM_COL_AMAX_COMPUTE];
    if (strcmp(ac, "max") != 0 && strcmp(ac, "most_recent") != 0)
      return BAD(FP8_GEMM_COL_AMAX_COMPUTE, "max or most_recent for delayed scaling");
  }
  if (!steps_parse_f64(f[FP8_GEMM_COL_REL_ERROR], v) || *v < 0) /* inf: a zero reference */
    return BAD(FP8_GEMM_COL_REL_ERROR, "a number >= 0, inf or nan");
#undef BAD
  return FP8_OK;
}

int rep_load_gemm(rep_t *r, int *have, char *err, size_t errlen) {
  const fp8_schema *s = &fp8_schema_gemm;
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", r->outdir, s->file);
  *have = 0;
  FILE *fp = fopen(path, "rb");
  if (!fp) return FP8_OK; /* a run without GEMMs ([analysis] gemm = false, or no layer triplet) */
  char *text = NULL;
  size_t len = 0;
  int rc = fp8_read_stream(fp, &text, &len);
  fclose(fp);
  if (rc) rc = fp8_errorf(rc, err, errlen, "%s: cannot read", path);
  int64_t line = 0;
  lines_t it = {text, text + len};
  char *ln;
  size_t l;
  while (!rc && (rc = next_line(&it, &ln, &l, &line, path, err, errlen)) == FP8_OK && ln) {
    if (line == 1) {
      if (fp8_schema_match_header(s, ln) != FP8_GEMM_COL_COUNT)
        rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s:1: not a %s header", path, s->file);
      continue;
    }
    if (l == 0) {
      rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%lld: empty line", path, (long long)line);
      break;
    }
    char *f[FP8_GEMM_COL_COUNT + 1];
    int nf = split_all(ln, f, FP8_GEMM_COL_COUNT);
    if (nf != FP8_GEMM_COL_COUNT) {
      rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%lld: expected %d fields, found %s%d", path,
                      (long long)line, FP8_GEMM_COL_COUNT, nf > FP8_GEMM_COL_COUNT ? "more than " : "",
                      nf > FP8_GEMM_COL_COUNT ? FP8_GEMM_COL_COUNT : nf);
      break;
    }
    int g;
    double v;
    rc = gemm_check(path, line, f, &g, &v, err, errlen);
    if (!rc) rc = gemm_add(r, f, g, v, have, path, line, err, errlen);
  }
  if (!rc && line == 0) rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s:1: empty file", path);
  free(text);
  for (size_t c = 0; c < r->ncfg; c++)
    for (int g = 0; g < 3; g++) {
      cfg_t *x = &r->cfgs[c];
      gsl_sort(x->gemm[g], 1, x->ngemm[g]);
      x->gemm_median[g] =
          x->ngemm[g] ? gsl_stats_median_from_sorted_data(x->gemm[g], 1, x->ngemm[g]) : NAN;
    }
  return rc;
}
