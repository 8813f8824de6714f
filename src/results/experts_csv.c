/* experts.csv: one row per expert GEMM of a Mixture-of-Experts trace (results.h
 * fp8_schema_experts; docs/outputs.md): the routed tokens of the replay's steps, from the
 * trace's tokens.csv files (the runner's run_experts.c computes the rows). Its columns, its
 * writer (fp8_experts_csv_write, the whole file at the run's commit) and its reader
 * (fp8_experts_csv_load, tables.h, for the report): the file read whole, every field checked,
 * the columns against each other ("<path>:<line>: <what>"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csv_internal.h" /* the row builder, the table loader, csv_parse_i64 */
#include "results.h"
#include "tables.h"
#include "trace.h" /* fp8_expert_of, the name rules */
#include "util.h"  /* fp8_errorf, fp8_esc */

/* ------------------------------------------------------------------ the columns */

static const char *const EXPERTS_COLS[FP8_EXPERTS_COL_COUNT] = {
    "gemm", "group", "expert", "steps", "steps_run", "tokens", "tokens_min", "tokens_max"};

_Static_assert((int)FP8_EXPERTS_COL_COUNT <= (int)CSV_MAX_COLS,
               "csv_load_table reads at most CSV_MAX_COLS columns");
const fp8_schema fp8_schema_experts = {"experts.csv", EXPERTS_COLS, FP8_EXPERTS_COL_COUNT,
                                       {FP8_EXPERTS_COL_COUNT, 0, 0, 0}};

/* ------------------------------------------------------------------ the writer */

int fp8_experts_csv_write(const char *dir, const fp8_expert_row *rows, size_t n, char *err,
                          size_t errlen) {
  fp8_outfile of;
  int rc = fp8_schema_open(&of, dir, &fp8_schema_experts, err, errlen);
  if (rc) return rc;
  for (size_t i = 0; i < n; i++) {
    const fp8_expert_row *r = &rows[i];
    csv_line l;
    csv_line_init(&l, of.fp);
    csv_line_str(&l, r->gemm);
    csv_line_chr(&l, ',');
    csv_line_str(&l, r->group);
    csv_line_chr(&l, ',');
    const int64_t counts[4] = {r->expert, r->steps, r->steps_run, r->tokens};
    for (int k = 0; k < 4; k++) {
      csv_line_i64(&l, counts[k]);
      csv_line_chr(&l, ',');
    }
    if (r->tokens_min >= 0) csv_line_i64(&l, r->tokens_min); /* empty: it never ran */
    csv_line_chr(&l, ',');
    if (r->tokens_max >= 0) csv_line_i64(&l, r->tokens_max);
    csv_line_chr(&l, '\n');
    csv_line_flush(&l);
  }
  return fp8_outfile_commit(&of, err, errlen);
}

/* ------------------------------------------------------------------ the reader */

/* The fields of one data line of experts.csv into *row (a csv_row_parser): each on its own,
 * then against each other. */
static int parse_expert_fields(const char *path, int64_t line, char **f, void *out, char *err,
                               size_t errlen) {
  const fp8_schema *s = &fp8_schema_experts;
  fp8_expert_row *row = out;
  char why[FP8_ESC_LEN + 64], shown[FP8_ESC_LEN], group[FP8_NAME_MAX + 1];
  const char *gm = f[FP8_EXPERTS_COL_GEMM];
  if (fp8_tensor_name_check(gm, strlen(gm), FP8_NAME_MAX, why, sizeof why) != 0)
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%lld: column gemm: %s: %s", path,
                      (long long)line, fp8_esc(gm, shown, sizeof shown), why);
  int32_t expert = 0;
#define BAD(col, what) csv_bad_field(path, line, s, col, f[col], what, err, errlen)
  if (!fp8_expert_of(gm, &expert, group, sizeof group))
    return BAD(FP8_EXPERTS_COL_GEMM, "an expert GEMM (a component 'experts' then the index)");
  if (strcmp(f[FP8_EXPERTS_COL_GROUP], group) != 0) {
    char what[FP8_ESC_LEN + 16];
    snprintf(what, sizeof what, "'%s'", fp8_esc(group, shown, sizeof shown));
    return BAD(FP8_EXPERTS_COL_GROUP, what);
  }
  int64_t v[6];
  static const int cols[6] = {FP8_EXPERTS_COL_EXPERT,    FP8_EXPERTS_COL_STEPS,
                              FP8_EXPERTS_COL_STEPS_RUN, FP8_EXPERTS_COL_TOKENS,
                              FP8_EXPERTS_COL_TOKENS_MIN, FP8_EXPERTS_COL_TOKENS_MAX};
  for (int k = 0; k < 4; k++)
    if (!csv_parse_i64(f[cols[k]], 0, &v[k]))
      return BAD(cols[k], "an integer >= 0");
  if (v[0] != expert) {
    char what[32];
    snprintf(what, sizeof what, "%d (the GEMM's index)", expert);
    return BAD(FP8_EXPERTS_COL_EXPERT, what);
  }
  if (v[2] > v[1]) return BAD(FP8_EXPERTS_COL_STEPS_RUN, "at most steps");
  for (int k = 4; k < 6; k++) {
    if (v[2] == 0) {
      if (*f[cols[k]]) return BAD(cols[k], "empty (steps_run is 0)");
      v[k] = -1;
    } else if (!csv_parse_i64(f[cols[k]], 0, &v[k]) || v[k] < 1) {
      return BAD(cols[k], "an integer >= 1");
    }
  }
  if (v[2] == 0 && v[3] != 0) return BAD(FP8_EXPERTS_COL_TOKENS, "0 (steps_run is 0)");
  if (v[2] > 0) {
    if (v[5] < v[4]) return BAD(FP8_EXPERTS_COL_TOKENS_MAX, "at least tokens_min");
    /* steps_run * min <= tokens <= steps_run * max, without the products' overflow */
    if (v[3] / v[2] < v[4] || v[3] / v[2] + (v[3] % v[2] != 0) > v[5])
      return BAD(FP8_EXPERTS_COL_TOKENS,
                 "a total between steps_run * tokens_min and steps_run * tokens_max");
  }
#undef BAD
  *row = (fp8_expert_row){gm, f[FP8_EXPERTS_COL_GROUP], expert, v[1], v[2], v[3], v[4], v[5],
                          line};
  return FP8_OK;
}

void fp8_experts_csv_free(fp8_experts_table *t) {
  free(t->path);
  free(t->rows);
  free(t->priv_);
  memset(t, 0, sizeof *t);
}

int fp8_experts_csv_load(const char *path, fp8_experts_table *t, char *err, size_t errlen) {
  memset(t, 0, sizeof *t);
  char *text = NULL;
  int rc = csv_load_table(path, &fp8_schema_experts, sizeof *t->rows, parse_expert_fields, &text,
                          &t->rows, &t->nrows, err, errlen);
  for (size_t i = 1; rc == FP8_OK && i < t->nrows; i++)
    if (strcmp(t->rows[i - 1].gemm, t->rows[i].gemm) >= 0) {
      char a[FP8_ESC_LEN], b[FP8_ESC_LEN];
      rc = fp8_errorf(FP8_EFORMAT, err, errlen,
                      "%s:%lld: gemm %s after %s: the rows are in name order, each GEMM once",
                      path, (long long)t->rows[i].line, fp8_esc(t->rows[i].gemm, a, sizeof a),
                      fp8_esc(t->rows[i - 1].gemm, b, sizeof b));
    }
  if (rc == FP8_OK && !(t->path = strdup(path)))
    rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  t->priv_ = text;
  if (rc) fp8_experts_csv_free(t);
  return rc;
}
