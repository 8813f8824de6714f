/* results.c: the output schemas and their row writers (see results.h). */
#include "results.h"

#include <math.h>
#include <string.h>

#include "gemm.h"
#include "outfile.h"

static const char *const STEPS_COLS[FP8_STEPS_COL_COUNT] = {
    "tensor", "role", "step", "recipe", "kind", "format", "history_len", "margin",
    "amax_compute", "amax", "scale", "n", "nonfinite", "zeros", "overflow", "underflow",
    "subnormal", "mse", "snr_db", "nblocks", "blocks_with_overflow", "log2_scale_min",
    "log2_scale_max", "log2_scale_std"};

static const char *const SUMMARY_COLS[FP8_SUMMARY_COL_COUNT] = {
    "tensor", "role", "recipe", "kind", "format", "history_len", "margin", "amax_compute",
    "steps", "n", "nonfinite", "zeros", "overflow", "underflow", "subnormal", "overflow_rate",
    "underflow_rate", "subnormal_rate", "steps_with_overflow", "mse", "snr_db", "snr_db_min",
    "amax_max"};

static const char *const GEMM_COLS[FP8_GEMM_COL_COUNT] = {
    "layer", "gemm", "step", "recipe", "kind", "history_len", "margin", "amax_compute",
    "rel_error"};

static const char *const HIST_COLS[FP8_HIST_COL_COUNT] = {"tensor", "step", "log2_bin", "count"};

/* steps.csv had 19 columns before the block recipes appended 5 */
const fp8_schema fp8_schema_steps = {"steps.csv", STEPS_COLS, FP8_STEPS_COL_COUNT,
                                     {FP8_STEPS_COL_NBLOCKS, FP8_STEPS_COL_COUNT, 0, 0}};
const fp8_schema fp8_schema_summary = {"summary.csv", SUMMARY_COLS, FP8_SUMMARY_COL_COUNT,
                                       {FP8_SUMMARY_COL_COUNT, 0, 0, 0}};
const fp8_schema fp8_schema_gemm = {"gemm.csv", GEMM_COLS, FP8_GEMM_COL_COUNT,
                                    {FP8_GEMM_COL_COUNT, 0, 0, 0}};
const fp8_schema fp8_schema_histograms = {"histograms.csv", HIST_COLS, FP8_HIST_COL_COUNT,
                                          {FP8_HIST_COL_COUNT, 0, 0, 0}};

void fp8_schema_put_header(FILE *fp, const fp8_schema *s) {
  for (int i = 0; i < s->ncols; i++) {
    if (i) fputc(',', fp);
    fputs(s->columns[i], fp);
  }
  fputc('\n', fp);
}

int fp8_schema_match_header(const fp8_schema *s, const char *line) {
  size_t len = strlen(line);
  if (len && line[len - 1] == '\r') len--;
  /* how many leading columns the line names exactly */
  int k = 0;
  size_t pos = 0;
  while (k < s->ncols) {
    size_t n = strlen(s->columns[k]);
    if (pos + n > len || memcmp(line + pos, s->columns[k], n) != 0) return 0;
    pos += n;
    k++;
    if (pos == len) break;
    if (line[pos] != ',') return 0;
    pos++;
  }
  if (pos != len) return 0;
  for (int v = 0; v < 4 && s->versions[v]; v++)
    if (s->versions[v] == k) return k;
  return 0;
}

int fp8_schema_column(const fp8_schema *s, const char *name) {
  for (int i = 0; i < s->ncols; i++)
    if (strcmp(s->columns[i], name) == 0) return i;
  return -1;
}

/* recipe, kind, format and the three delayed-scaling columns (empty for other kinds) */
static void put_config_cols(FILE *fp, const fp8_config *c, fp8_format f) {
  fprintf(fp, "%s,%s,%s,", c->label, fp8_recipe_kind_name(c->kind), fp8_format_name(f));
  if (c->kind == FP8_KIND_DELAYED)
    fprintf(fp, "%d,%d,%s,", (int)c->history_len, (int)c->margin,
            fp8_amax_compute_name(c->amax_compute));
  else
    fputs(",,,", fp);
}

void fp8_results_put_steps_row(FILE *fp, const fp8_steps_row *r) {
  const fp8_stats *st = r->stats;
  int blk = fp8_recipe_kind_is_block(r->config->kind);
  fprintf(fp, "%s,%s,%lld,", r->tensor, fp8_role_name(r->role), (long long)r->step);
  put_config_cols(fp, r->config, r->format);
  fp8_csv_put_num(fp, r->amax);
  fputc(',', fp);
  if (!blk) fp8_csv_put_num(fp, r->scale);
  fprintf(fp, ",%lld,%lld,%lld,%lld,%lld,%lld,", (long long)st->n, (long long)st->nonfinite,
          (long long)st->zeros, (long long)st->overflow, (long long)st->underflow,
          (long long)st->subnormal);
  fp8_csv_put_num(fp, fp8_stats_mse(st));
  fputc(',', fp);
  fp8_csv_put_num(fp, fp8_stats_snr_db(st));
  if (blk) {
    const fp8_block_stats *b = r->block;
    fprintf(fp, ",%lld,%lld,", (long long)b->nblocks, (long long)b->blocks_with_overflow);
    fp8_csv_put_num(fp, b->log2_scale_min);
    fputc(',', fp);
    fp8_csv_put_num(fp, b->log2_scale_max);
    fputc(',', fp);
    fp8_csv_put_num(fp, b->log2_scale_std);
    fputc('\n', fp);
  } else {
    fputs(",,,,,\n", fp);
  }
}

void fp8_summary_acc_init(fp8_summary_acc *a) {
  memset(a, 0, sizeof *a);
  fp8_stats_init(&a->st);
  a->snr_min = INFINITY;
}

void fp8_summary_acc_add(fp8_summary_acc *a, const fp8_stats *st, float amax) {
  double snr = fp8_stats_snr_db(st);
  a->steps++;
  a->steps_with_overflow += st->overflow > 0;
  fp8_stats_merge(&a->st, st);
  if (snr < a->snr_min) a->snr_min = snr;
  if (amax > a->amax_max) a->amax_max = amax;
}

void fp8_results_put_summary_row(FILE *fp, const char *tensor, fp8_role role,
                                 const fp8_config *cf, fp8_format format,
                                 const fp8_summary_acc *a) {
  const fp8_stats *st = &a->st;
  double finite = (double)(st->n - st->nonfinite);
  fprintf(fp, "%s,%s,", tensor, fp8_role_name(role));
  put_config_cols(fp, cf, format);
  fprintf(fp, "%lld,%lld,%lld,%lld,%lld,%lld,%lld,", (long long)a->steps, (long long)st->n,
          (long long)st->nonfinite, (long long)st->zeros, (long long)st->overflow,
          (long long)st->underflow, (long long)st->subnormal);
  fp8_csv_put_num(fp, finite > 0 ? (double)st->overflow / finite : NAN);
  fputc(',', fp);
  fp8_csv_put_num(fp, finite > 0 ? (double)st->underflow / finite : NAN);
  fputc(',', fp);
  fp8_csv_put_num(fp, finite > 0 ? (double)st->subnormal / finite : NAN);
  fprintf(fp, ",%lld,", (long long)a->steps_with_overflow);
  fp8_csv_put_num(fp, fp8_stats_mse(st));
  fputc(',', fp);
  fp8_csv_put_num(fp, fp8_stats_snr_db(st));
  fputc(',', fp);
  fp8_csv_put_num(fp, a->snr_min);
  fputc(',', fp);
  fp8_csv_put_num(fp, a->amax_max);
  fputc('\n', fp);
}

void fp8_results_put_gemm_row(FILE *fp, const char *layer, int gemm_kind, int64_t step,
                              const fp8_config *cf, double rel_error) {
  fprintf(fp, "%s,%s,%lld,%s,%s,", layer, fp8_gemm_name((fp8_gemm_kind)gemm_kind),
          (long long)step, cf->label, fp8_recipe_kind_name(cf->kind));
  if (cf->kind == FP8_KIND_DELAYED)
    fprintf(fp, "%d,%d,%s,", (int)cf->history_len, (int)cf->margin,
            fp8_amax_compute_name(cf->amax_compute));
  else
    fputs(",,,", fp);
  fp8_csv_put_num(fp, rel_error);
  fputc('\n', fp);
}

void fp8_results_put_histogram(FILE *fp, const char *tensor, int64_t step,
                               const int64_t hist[FP8_LOG2_HIST_BINS]) {
  for (int b = 0; b < FP8_LOG2_HIST_BINS; b++)
    if (hist[b])
      fprintf(fp, "%s,%lld,%d,%lld\n", tensor, (long long)step, b + FP8_LOG2_HIST_MIN,
              (long long)hist[b]);
}
