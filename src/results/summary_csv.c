/* summary.csv: one row per (tensor, configuration), totals over the snapshot steps (results.h
 * fp8_schema_summary): its columns, the totals the runner accumulates row by row
 * (fp8_summary_acc; the counts shared with analysis.csv are fp8_tally's) and the file written
 * from them at the end of a run (fp8_summary_csv_write). fp8lab reads it back nowhere: the
 * report computes its own statistics from steps.csv (analysis.csv), a user's spreadsheet reads
 * this one. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "csv_internal.h" /* the row builder */
#include "outfile.h"
#include "results.h"

/* ------------------------------------------------------------------ the columns */

static const char *const SUMMARY_COLS[FP8_SUMMARY_COL_COUNT] = {
    "tensor", "role", "recipe", "kind", "format", "history_len", "margin", "amax_compute",
    "steps", "n", "nonfinite", "zeros", "overflow", "underflow", "subnormal", "overflow_rate",
    "underflow_rate", "subnormal_rate", "steps_with_overflow", "mse", "snr_db", "snr_db_min",
    "amax_max", "clipped", "clipped_rate", "steps_with_clipped", "overshoot_max", "scale_inv_min",
    "scale_inv_max", "cos_sim_min"};

/* summary.csv had 23 columns before issue 13 appended 7 */
const fp8_schema fp8_schema_summary = {"summary.csv", SUMMARY_COLS, FP8_SUMMARY_COL_COUNT,
                                       {FP8_SUMMARY_COL_CLIPPED, FP8_SUMMARY_COL_COUNT, 0, 0}};

/* ------------------------------------------------------------------ the counts both files share */

void fp8_tally_init(fp8_tally *t) {
  memset(t, 0, sizeof *t);
  t->overshoot_max = -INFINITY;
}

void fp8_tally_add(fp8_tally *t, int64_t n, int64_t nonfinite, int64_t overflow,
                   int64_t underflow, int64_t subnormal, int64_t clipped, double overshoot) {
  t->steps++;
  t->finite += n - nonfinite;
  t->overflow += overflow;
  t->underflow += underflow;
  t->subnormal += subnormal;
  t->clipped += clipped;
  t->steps_with_overflow += overflow > 0;
  t->steps_with_clipped += clipped > 0;
  if (isnan(overshoot)) return; /* none (a steps.csv written before the column) */
  t->overshoots++;
  if (overshoot > t->overshoot_max) t->overshoot_max = overshoot;
}

double fp8_tally_rate(const fp8_tally *t, int64_t count) {
  return t->finite > 0 ? (double)count / (double)t->finite : NAN;
}

/* ------------------------------------------------------------------ the totals of a run */

void fp8_summary_acc_init(fp8_summary_acc *a) {
  memset(a, 0, sizeof *a);
  fp8_tally_init(&a->tally);
  fp8_stats_init(&a->st);
  a->snr_min = INFINITY;
  a->scale_inv_min = a->scale_inv_max = NAN;
  a->cos_min = INFINITY;
}

void fp8_summary_acc_add(fp8_summary_acc *a, const fp8_steps_row *r) {
  const fp8_stats *st = r->stats;
  double snr = fp8_stats_snr_db(st), cs = fp8_stats_cos_sim(st);
  fp8_tally_add(&a->tally, st->n, st->nonfinite, st->overflow, st->underflow, st->subnormal,
                st->clipped, fp8_steps_csv_row_overshoot(r));
  fp8_stats_merge(&a->st, st);
  if (snr < a->snr_min) a->snr_min = snr;
  if (r->amax > a->amax_max) a->amax_max = r->amax;
  if (cs < a->cos_min) a->cos_min = cs;
  if (fp8_recipe_kind_has_scale(r->config->kind)) {
    float si = 1.0f / r->scale; /* RN32(1/s): the scale_inv TE stores and the dequantization uses */
    if (!(si >= a->scale_inv_min)) a->scale_inv_min = si; /* NaN start: the first step sets it */
    if (!(si <= a->scale_inv_max)) a->scale_inv_max = si;
  }
}

/* ------------------------------------------------------------------ the file */

void fp8_summary_csv_put_row(FILE *fp, const char *tensor, fp8_role role, const fp8_config *cf,
                             fp8_format format, const fp8_summary_acc *a) {
  const fp8_stats *st = &a->st;
  const fp8_tally *t = &a->tally;
  csv_line l;
  csv_line_init(&l, fp);
  csv_line_str(&l, tensor);
  csv_line_chr(&l, ',');
  csv_line_str(&l, fp8_role_name(role));
  csv_line_chr(&l, ',');
  csv_put_config_cols(&l, cf, format);
  csv_line_i64(&l, t->steps);
  csv_line_chr(&l, ',');
  /* the element counts: n, nonfinite and zeros are the merged statistics', the rest the
   * tally's (the one source of those counts, their rates and steps_with_*, as analysis.csv's) */
  const int64_t counts[6] = {st->n, st->nonfinite, st->zeros, t->overflow, t->underflow,
                             t->subnormal};
  for (int k = 0; k < 6; k++) {
    csv_line_i64(&l, counts[k]);
    csv_line_chr(&l, ',');
  }
  const double rates[3] = {fp8_tally_rate(t, t->overflow), fp8_tally_rate(t, t->underflow),
                           fp8_tally_rate(t, t->subnormal)};
  csv_put_nums(&l, rates, 3);
  csv_line_i64(&l, t->steps_with_overflow);
  csv_line_chr(&l, ',');
  const double error[4] = {fp8_stats_mse(st), fp8_stats_snr_db(st), a->snr_min, a->amax_max};
  csv_put_nums(&l, error, 4);
  csv_line_i64(&l, t->clipped);
  csv_line_chr(&l, ',');
  const double clipped_rate = fp8_tally_rate(t, t->clipped);
  csv_put_nums(&l, &clipped_rate, 1);
  csv_line_i64(&l, t->steps_with_clipped);
  csv_line_chr(&l, ',');
  csv_put_nums(&l, &t->overshoot_max, 1);
  if (fp8_recipe_kind_has_scale(cf->kind)) csv_line_num(&l, a->scale_inv_min);
  csv_line_chr(&l, ',');
  if (fp8_recipe_kind_has_scale(cf->kind)) csv_line_num(&l, a->scale_inv_max);
  csv_line_chr(&l, ',');
  csv_line_num(&l, a->cos_min);
  csv_line_chr(&l, '\n');
  csv_line_flush(&l);
}

int fp8_summary_csv_write(const char *dir, const fp8_summary_table *s, char *err, size_t errlen) {
  fp8_outfile of;
  int rc = fp8_schema_open(&of, dir, &fp8_schema_summary, err, errlen);
  if (rc) return rc;
  for (size_t i = 0; i < s->ntensors; i++)
    for (size_t c = 0; c < s->nconfigs; c++)
      if (s->acc[i][c].tally.steps) /* a configuration that covers the tensor, and a step */
        fp8_summary_csv_put_row(of.fp, s->names[i], s->roles[i], &s->configs[c],
                                s->formats[i * s->nconfigs + c], &s->acc[i][c]);
  return fp8_outfile_commit(&of, err, errlen);
}
