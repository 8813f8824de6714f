/* gemm.csv: one row per (snapshot step, layer, GEMM, configuration) and its relative error
 * (results.h fp8_schema_gemm): its columns, its row writer (fp8_gemm_csv_put_row, the
 * runner's run_gemm.c) and its reader (fp8_gemm_csv_load, tables.h): the file read whole, the
 * header matched against the columns, every field checked ("<path>:<line>: <what>"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csv_internal.h" /* the row builder, the table loader, csv_parse_* */
#include "gemm.h"         /* fp8_gemm_name; tensorcore.h */
#include "results.h"
#include "tables.h"

/* ------------------------------------------------------------------ the columns */

static const char *const GEMM_COLS[FP8_GEMM_COL_COUNT] = {
    "layer", "gemm", "step", "recipe", "kind", "history_len", "margin", "amax_compute",
    "rel_error", "rel_error_lo", "rel_error_hi", "ratio", "ratio_lo", "ratio_hi", "ratio_mode",
    "tensor_core", "accumulation", "rel_error_exact_acc", "rel_error_alt_acc"};

/* gemm.csv: 9 columns (exact errors), 11 with the sampled mode's interval (issue 27), 15 with
 * the FP4 verdict's paired ratio (issue 42), 19 with the tensor-core columns (issue 46) */
_Static_assert((int)FP8_GEMM_COL_COUNT <= (int)CSV_MAX_COLS,
               "csv_load_table reads at most CSV_MAX_COLS columns");
const fp8_schema fp8_schema_gemm = {"gemm.csv", GEMM_COLS, FP8_GEMM_COL_COUNT,
                                    {FP8_GEMM_COL_REL_ERROR_LO, FP8_GEMM_COL_RATIO,
                                     FP8_GEMM_COL_TENSOR_CORE, FP8_GEMM_COL_COUNT, 0}};

static const char *const ACC_NAMES[3] = {"exact", "fast", "promoted"};

const char *fp8_gemm_acc_name(fp8_gemm_acc a) {
  return (unsigned)a < 3 ? ACC_NAMES[a] : "";
}

static const char *const RATIO_MODES[4] = {"", "sampled", "exact", "recomputed"};

const char *fp8_gemm_ratio_mode_name(fp8_gemm_ratio_mode m) {
  return (unsigned)m < 4 ? RATIO_MODES[m] : "";
}

int fp8_gemm_csv_ncols(int sampled, int fp4_ratio, int tensor_core) {
  return tensor_core ? FP8_GEMM_COL_COUNT
         : fp4_ratio ? FP8_GEMM_COL_TENSOR_CORE
         : sampled   ? FP8_GEMM_COL_RATIO
                     : FP8_GEMM_COL_REL_ERROR_LO;
}

/* ------------------------------------------------------------------ the writer */

void fp8_gemm_csv_put_row(FILE *fp, const char *layer, int gemm_kind, int64_t step,
                          const fp8_config *cf, double rel_error, const double *interval) {
  fp8_gemm_csv_put_row_n(fp, fp8_gemm_csv_ncols(interval != NULL, 0, 0), layer, gemm_kind, step,
                         cf, rel_error, interval, NULL, NULL);
}

void fp8_gemm_csv_put_row_n(FILE *fp, int ncols, const char *layer, int gemm_kind, int64_t step,
                            const fp8_config *cf, double rel_error, const double *interval,
                            const fp8_gemm_ratio_cols *ratio, const fp8_gemm_tc_cols *tc) {
  csv_line l;
  csv_line_init(&l, fp);
  csv_line_str(&l, layer);
  csv_line_chr(&l, ',');
  csv_line_str(&l, fp8_gemm_name((fp8_gemm_kind)gemm_kind));
  csv_line_chr(&l, ',');
  csv_line_i64(&l, step);
  csv_line_chr(&l, ',');
  csv_line_str(&l, cf->label);
  csv_line_chr(&l, ',');
  csv_line_str(&l, fp8_recipe_kind_name(cf->kind));
  csv_line_chr(&l, ',');
  csv_put_delayed_cols(&l, cf);
  csv_line_num(&l, rel_error);
  if (ncols > FP8_GEMM_COL_REL_ERROR_LO) {
    csv_line_chr(&l, ',');
    if (interval) csv_line_num(&l, interval[0]);
    csv_line_chr(&l, ',');
    if (interval) csv_line_num(&l, interval[1]);
  }
  if (ncols > FP8_GEMM_COL_RATIO) {
    int have = ratio && ratio->mode != FP8_GEMM_RATIO_NONE;
    const double v[3] = {have ? ratio->ratio : 0, have ? ratio->lo : 0, have ? ratio->hi : 0};
    for (int k = 0; k < 3; k++) {
      csv_line_chr(&l, ',');
      if (have) csv_line_num(&l, v[k]);
    }
    csv_line_chr(&l, ',');
    if (have) csv_line_str(&l, fp8_gemm_ratio_mode_name(ratio->mode));
  }
  if (ncols > FP8_GEMM_COL_TENSOR_CORE) {
    csv_line_chr(&l, ',');
    csv_line_str(&l, fp8_tc_model_name(tc ? (fp8_tc_model)tc->model : FP8_TC_EXACT));
    csv_line_chr(&l, ',');
    csv_line_str(&l, fp8_gemm_acc_name(tc ? tc->acc : FP8_GEMM_ACC_EXACT));
    csv_line_chr(&l, ',');
    csv_line_num(&l, tc ? tc->exact_acc : rel_error);
    csv_line_chr(&l, ',');
    /* the other form: fprop's under a model (a NaN error written "nan"), empty otherwise, as
     * the reader wants it */
    if (tc && tc->model != FP8_TC_EXACT && gemm_kind == FP8_GEMM_FPROP)
      csv_line_num(&l, tc->alt_acc);
  }
  csv_line_chr(&l, '\n');
  csv_line_flush(&l);
}

/* ------------------------------------------------------------------ the reader */

/* The fields of one gemm.csv row (its layer, gemm, step, configuration and rel_error), as
 * steps.csv's are checked, into *row. */
static int parse_gemm_fields(const char *path, int64_t line, char **f, void *out, char *err,
                             size_t errlen) {
  const fp8_schema *s = &fp8_schema_gemm;
  fp8_gemm_row *row = out;
  int rc = csv_check_tensor_field(path, line, s, FP8_GEMM_COL_LAYER, f[FP8_GEMM_COL_LAYER],
                                  err, errlen);
  if (rc) return rc;
  row->layer = f[FP8_GEMM_COL_LAYER];
  int g = -1;
  for (int k = 0; k < FP8_GEMM_COUNT; k++)
    if (strcmp(f[FP8_GEMM_COL_GEMM], fp8_gemm_name((fp8_gemm_kind)k)) == 0) g = k;
#define BAD(col, what) csv_bad_field(path, line, s, col, f[col], what, err, errlen)
  if (g < 0) return BAD(FP8_GEMM_COL_GEMM, "fprop, dgrad or wgrad");
  row->gemm = (fp8_gemm_kind)g;
  if (!csv_parse_i64(f[FP8_GEMM_COL_STEP], 0, &row->step))
    return BAD(FP8_GEMM_COL_STEP, "a step number >= 0");
  /* the configuration's columns (no format column: the key's format stays E4M3, unused) */
  const char *what;
  int bad_col = fp8_config_key_parse(f[FP8_GEMM_COL_RECIPE], f[FP8_GEMM_COL_KIND], NULL,
                                     f[FP8_GEMM_COL_HISTORY_LEN], f[FP8_GEMM_COL_MARGIN],
                                     f[FP8_GEMM_COL_AMAX_COMPUTE], &row->key, &what);
  if (bad_col >= 0) { /* 0 recipe, 1 kind, 3.. the delayed columns */
    static const int col[6] = {FP8_GEMM_COL_RECIPE, FP8_GEMM_COL_KIND, FP8_GEMM_COL_KIND,
                               FP8_GEMM_COL_HISTORY_LEN, FP8_GEMM_COL_MARGIN,
                               FP8_GEMM_COL_AMAX_COMPUTE};
    return BAD(col[bad_col], what);
  }
  if (!csv_parse_f64(f[FP8_GEMM_COL_REL_ERROR], &row->rel_error) || row->rel_error < 0)
    return BAD(FP8_GEMM_COL_REL_ERROR, "a number >= 0, inf or nan"); /* inf: a zero reference */
  row->rel_lo = row->rel_hi = NAN; /* exact errors: no interval */
  /* a 15-column file of the exact mode leaves the interval empty */
  int no_interval = f[FP8_GEMM_COL_RATIO] && !*f[FP8_GEMM_COL_REL_ERROR_LO] &&
                    !*f[FP8_GEMM_COL_REL_ERROR_HI];
  if (f[FP8_GEMM_COL_REL_ERROR_LO] && !no_interval) {
    if (!csv_parse_f64(f[FP8_GEMM_COL_REL_ERROR_LO], &row->rel_lo) || row->rel_lo < 0 ||
        row->rel_lo > row->rel_error)
      return BAD(FP8_GEMM_COL_REL_ERROR_LO, "a number >= 0 and <= rel_error, inf or nan");
    if (!csv_parse_f64(f[FP8_GEMM_COL_REL_ERROR_HI], &row->rel_hi) ||
        row->rel_hi < row->rel_error)
      return BAD(FP8_GEMM_COL_REL_ERROR_HI, "a number >= rel_error, inf or nan");
  }
  row->ratio_mode = FP8_GEMM_RATIO_NONE;
  row->ratio = row->ratio_lo = row->ratio_hi = NAN;
  if (f[FP8_GEMM_COL_RATIO] && *f[FP8_GEMM_COL_RATIO_MODE]) {
    int m = 0;
    for (int k = 1; k < 4; k++)
      if (strcmp(f[FP8_GEMM_COL_RATIO_MODE], RATIO_MODES[k]) == 0) m = k;
    if (!m) return BAD(FP8_GEMM_COL_RATIO_MODE, "sampled, exact, recomputed or empty");
    row->ratio_mode = m;
    if (!csv_parse_f64(f[FP8_GEMM_COL_RATIO], &row->ratio) || row->ratio < 0)
      return BAD(FP8_GEMM_COL_RATIO, "a number >= 0, inf or nan");
    if (!csv_parse_f64(f[FP8_GEMM_COL_RATIO_LO], &row->ratio_lo) || row->ratio_lo < 0 ||
        row->ratio_lo > row->ratio)
      return BAD(FP8_GEMM_COL_RATIO_LO, "a number >= 0 and <= ratio, inf or nan");
    if (!csv_parse_f64(f[FP8_GEMM_COL_RATIO_HI], &row->ratio_hi) || row->ratio_hi < row->ratio)
      return BAD(FP8_GEMM_COL_RATIO_HI, "a number >= ratio, inf or nan");
  } else if (f[FP8_GEMM_COL_RATIO]) {
    for (int k = FP8_GEMM_COL_RATIO; k < FP8_GEMM_COL_RATIO_MODE; k++)
      if (*f[k]) return BAD(k, "empty, as ratio_mode is");
  }
  row->tensor_core = FP8_TC_EXACT;
  row->accumulation = FP8_GEMM_ACC_EXACT;
  row->rel_exact_acc = row->rel_error;
  row->rel_alt_acc = NAN;
  if (f[FP8_GEMM_COL_TENSOR_CORE]) {
    fp8_tc_model m;
    if (fp8_tc_model_parse(f[FP8_GEMM_COL_TENSOR_CORE], &m) ||
        strcmp(f[FP8_GEMM_COL_TENSOR_CORE], "h200") == 0)
      return BAD(FP8_GEMM_COL_TENSOR_CORE, "exact, h100 or b200");
    row->tensor_core = (int)m;
    int a = -1;
    for (int k = 0; k < 3; k++)
      if (strcmp(f[FP8_GEMM_COL_ACCUMULATION], ACC_NAMES[k]) == 0) a = k;
    if (a < 0 || ((a == FP8_GEMM_ACC_EXACT) != (m == FP8_TC_EXACT)))
      return BAD(FP8_GEMM_COL_ACCUMULATION, m == FP8_TC_EXACT ? "exact, as tensor_core is"
                                                              : "fast or promoted");
    row->accumulation = a;
    if (!csv_parse_f64(f[FP8_GEMM_COL_REL_ERROR_EXACT_ACC], &row->rel_exact_acc) ||
        row->rel_exact_acc < 0)
      return BAD(FP8_GEMM_COL_REL_ERROR_EXACT_ACC, "a number >= 0, inf or nan");
    /* the other form: fprop's under a model, empty otherwise (engine.h) */
    int want = m != FP8_TC_EXACT && row->gemm == FP8_GEMM_FPROP;
    if (want ? !csv_parse_f64(f[FP8_GEMM_COL_REL_ERROR_ALT_ACC], &row->rel_alt_acc) ||
                   row->rel_alt_acc < 0
             : *f[FP8_GEMM_COL_REL_ERROR_ALT_ACC] != '\0')
      return BAD(FP8_GEMM_COL_REL_ERROR_ALT_ACC,
                 want ? "a number >= 0, inf or nan"
                      : m == FP8_TC_EXACT ? "empty, as tensor_core is exact"
                                          : "empty on a dgrad or wgrad row");
  }
#undef BAD
  row->line = line;
  return FP8_OK;
}

void fp8_gemm_csv_free(fp8_gemm_table *t) {
  free(t->rows);
  free(t->text_);
  memset(t, 0, sizeof *t);
}

int fp8_gemm_csv_load(const char *path, fp8_gemm_table *t, char *err, size_t errlen) {
  memset(t, 0, sizeof *t);
  return csv_load_table(path, &fp8_schema_gemm, sizeof *t->rows, parse_gemm_fields, &t->text_,
                        &t->rows, &t->n, err, errlen);
}
