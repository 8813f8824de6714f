/* histograms.csv: one row per (snapshot step, tensor, occupied log2 bin) (results.h
 * fp8_schema_histograms): its columns, its row writer (fp8_histograms_csv_put_rows, one
 * tensor's histogram at a step) and its reader (fp8_histograms_csv_load, tables.h; the report's
 * histogram charts take one (tensor, step) back with fp8_histograms_csv_get). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csv_internal.h" /* the row builder, the table loader, csv_parse_i64 */
#include "results.h"
#include "tables.h"

/* ------------------------------------------------------------------ the columns */

static const char *const HIST_COLS[FP8_HIST_COL_COUNT] = {"tensor", "step", "log2_bin", "count"};

_Static_assert((int)FP8_HIST_COL_COUNT <= (int)CSV_MAX_COLS,
               "csv_load_table reads at most CSV_MAX_COLS columns");
const fp8_schema fp8_schema_histograms = {"histograms.csv", HIST_COLS, FP8_HIST_COL_COUNT,
                                          {FP8_HIST_COL_COUNT, 0, 0, 0}};

/* ------------------------------------------------------------------ the writer */

void fp8_histograms_csv_put_rows(FILE *fp, const char *tensor, int64_t step,
                                 const int64_t hist[FP8_LOG2_HIST_BINS]) {
  csv_line l;
  csv_line_init(&l, fp);
  for (int b = 0; b < FP8_LOG2_HIST_BINS; b++) {
    if (!hist[b]) continue;
    csv_line_str(&l, tensor);
    csv_line_chr(&l, ',');
    csv_line_i64(&l, step);
    csv_line_chr(&l, ',');
    csv_line_i64(&l, b + FP8_LOG2_HIST_MIN);
    csv_line_chr(&l, ',');
    csv_line_i64(&l, hist[b]);
    csv_line_chr(&l, '\n');
    if (l.n > 768) csv_line_flush(&l);
  }
  csv_line_flush(&l);
}

/* ------------------------------------------------------------------ the reader */

/* The fields of one data line of histograms.csv into *row (a csv_row_parser). */
static int parse_histogram_fields(const char *path, int64_t line, char **f, void *out,
                                  char *err, size_t errlen) {
  const fp8_schema *s = &fp8_schema_histograms;
  fp8_hist_row *row = out;
  int64_t v;
  int rc = csv_check_tensor_field(path, line, s, FP8_HIST_COL_TENSOR, f[FP8_HIST_COL_TENSOR],
                                  err, errlen);
  if (rc) return rc;
  row->tensor = f[FP8_HIST_COL_TENSOR];
  if (!csv_parse_i64(f[FP8_HIST_COL_STEP], 0, &row->step))
    return csv_bad_field(path, line, s, FP8_HIST_COL_STEP, f[FP8_HIST_COL_STEP],
                         "a step number >= 0", err, errlen);
  if (!csv_parse_i64(f[FP8_HIST_COL_LOG2_BIN], 1, &v) || v < FP8_LOG2_HIST_MIN ||
      v >= FP8_LOG2_HIST_MIN + FP8_LOG2_HIST_BINS) {
    char what[64];
    snprintf(what, sizeof what, "an integer in %d..%d", FP8_LOG2_HIST_MIN,
             FP8_LOG2_HIST_MIN + FP8_LOG2_HIST_BINS - 1);
    return csv_bad_field(path, line, s, FP8_HIST_COL_LOG2_BIN, f[FP8_HIST_COL_LOG2_BIN], what,
                         err, errlen);
  }
  row->bin = (int32_t)v;
  if (!csv_parse_i64(f[FP8_HIST_COL_COUNT_], 0, &row->count))
    return csv_bad_field(path, line, s, FP8_HIST_COL_COUNT_, f[FP8_HIST_COL_COUNT_],
                         "a count (integer >= 0)", err, errlen);
  return FP8_OK;
}

int fp8_histograms_csv_load(const char *path, fp8_hist_table *t, char *err, size_t errlen) {
  memset(t, 0, sizeof *t);
  return csv_load_table(path, &fp8_schema_histograms, sizeof *t->rows, parse_histogram_fields,
                        &t->text_, &t->rows, &t->n, err, errlen);
}

int fp8_histograms_csv_get(const fp8_hist_table *t, const char *tensor, int64_t step,
                           double *counts, int *lo_bin, int *nbins) {
  int lo = 1000, hi = -1000;
  double tmp[FP8_LOG2_HIST_BINS] = {0};
  for (size_t i = 0; i < t->n; i++) {
    const fp8_hist_row *row = &t->rows[i];
    if (row->step != step || strcmp(row->tensor, tensor) != 0) continue;
    tmp[row->bin - FP8_LOG2_HIST_MIN] = (double)row->count;
    if (row->bin < lo) lo = row->bin;
    if (row->bin > hi) hi = row->bin;
  }
  if (hi < lo) return FP8_EFORMAT;
  *lo_bin = lo;
  *nbins = hi - lo + 1;
  for (int b = lo; b <= hi; b++) counts[b - lo] = tmp[b - FP8_LOG2_HIST_MIN];
  return FP8_OK;
}

void fp8_histograms_csv_free(fp8_hist_table *t) {
  free(t->rows);
  free(t->text_);
  memset(t, 0, sizeof *t);
}
