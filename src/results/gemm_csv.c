/* gemm.csv: one row per (snapshot step, layer, GEMM, configuration) and its relative error
 * (results.h fp8_schema_gemm): its columns, its row writer (fp8_gemm_csv_put_row, the
 * runner's run_gemm.c) and its reader (fp8_gemm_csv_load, tables.h): the file read whole, the
 * header matched against the columns, every field checked ("<path>:<line>: <what>"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csv_internal.h" /* the row builder, the table loader, csv_parse_* */
#include "gemm.h"         /* fp8_gemm_name */
#include "results.h"
#include "tables.h"

/* ------------------------------------------------------------------ the columns */

static const char *const GEMM_COLS[FP8_GEMM_COL_COUNT] = {
    "layer", "gemm", "step", "recipe", "kind", "history_len", "margin", "amax_compute",
    "rel_error", "rel_error_lo", "rel_error_hi"};

/* gemm.csv: 9 columns (exact errors), 11 with the sampled mode's interval (issue 27) */
const fp8_schema fp8_schema_gemm = {"gemm.csv", GEMM_COLS, FP8_GEMM_COL_COUNT,
                                    {FP8_GEMM_COL_REL_ERROR_LO, FP8_GEMM_COL_COUNT, 0, 0}};

/* ------------------------------------------------------------------ the writer */

void fp8_gemm_csv_put_row(FILE *fp, const char *layer, int gemm_kind, int64_t step,
                          const fp8_config *cf, double rel_error, const double *interval) {
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
  if (interval) {
    csv_line_chr(&l, ',');
    csv_line_num(&l, interval[0]);
    csv_line_chr(&l, ',');
    csv_line_num(&l, interval[1]);
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
  if (f[FP8_GEMM_COL_REL_ERROR_LO]) {
    if (!csv_parse_f64(f[FP8_GEMM_COL_REL_ERROR_LO], &row->rel_lo) || row->rel_lo < 0 ||
        row->rel_lo > row->rel_error)
      return BAD(FP8_GEMM_COL_REL_ERROR_LO, "a number >= 0 and <= rel_error, inf or nan");
    if (!csv_parse_f64(f[FP8_GEMM_COL_REL_ERROR_HI], &row->rel_hi) ||
        row->rel_hi < row->rel_error)
      return BAD(FP8_GEMM_COL_REL_ERROR_HI, "a number >= rel_error, inf or nan");
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
