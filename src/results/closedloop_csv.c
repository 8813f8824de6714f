/* closedloop_csv.c: the files `fp8lab closedloop` writes (closedloop.h; docs/reference.md
 * "fp8lab closedloop" lists the columns, docs/semantics.md "Open loop against closed loop"
 * defines them): their columns and their writers. Numbers as every fp8lab CSV writes them
 * ("%.9g", inf/-inf), a NaN (no value) as an empty field. fp8lab does not read them back (as
 * analysis.csv: a notebook or a spreadsheet does). */
#include <math.h>
#include <stdio.h>

#include "closedloop.h"
#include "csv_internal.h"

static const char *const LOSS_COLS[] = {"label",      "seed",         "final_loss",
                                        "gap",        "eval_loss_hp", "eval_loss_fp8"};
static const char *const RATES_COLS[] = {"label",          "source",
                                         "seed",           "clipped_rate",
                                         "underflow_rate", "overflow_step_share",
                                         "rows",           "stream_rows"};
static const char *const DRIFT_COLS[] = {"label", "step", "tensors", "median_drift",
                                         "p90_drift"};
static const char *const EVENTS_COLS[] = {"label", "period",    "open_events", "closed_events",
                                          "both",  "precision", "recall"};
static const char *const SPEARMAN_COLS[] = {"rate", "labels", "rho"};
static const char *const SELFCHECK_COLS[] = {"label", "seed", "te_rows", "differ"};

const fp8_schema fp8_schema_closedloop_loss = {"closedloop_loss.csv", LOSS_COLS,
                                               FP8_CL_LOSS_COL_COUNT,
                                               {FP8_CL_LOSS_COL_COUNT, 0}};
const fp8_schema fp8_schema_closedloop_rates = {"closedloop_rates.csv", RATES_COLS,
                                                FP8_CL_RATES_COL_COUNT,
                                                {FP8_CL_RATES_COL_COUNT, 0}};
const fp8_schema fp8_schema_closedloop_drift = {"closedloop_drift.csv", DRIFT_COLS,
                                                FP8_CL_DRIFT_COL_COUNT,
                                                {FP8_CL_DRIFT_COL_COUNT, 0}};
const fp8_schema fp8_schema_closedloop_events = {"closedloop_events.csv", EVENTS_COLS,
                                                 FP8_CL_EVENTS_COL_COUNT,
                                                 {FP8_CL_EVENTS_COL_COUNT, 0}};
const fp8_schema fp8_schema_closedloop_spearman = {"closedloop_spearman.csv", SPEARMAN_COLS,
                                                   FP8_CL_SPEARMAN_COL_COUNT,
                                                   {FP8_CL_SPEARMAN_COL_COUNT, 0}};
const fp8_schema fp8_schema_closedloop_selfcheck = {"closedloop_selfcheck.csv", SELFCHECK_COLS,
                                                    FP8_CL_SELFCHECK_COL_COUNT,
                                                    {FP8_CL_SELFCHECK_COL_COUNT, 0}};

/* a field: a string, an integer or a number (NaN: empty), then a comma or the newline */
static void put_str(csv_line *l, const char *s, int last) {
  csv_line_str(l, s);
  csv_line_chr(l, last ? '\n' : ',');
}
static void put_i64(csv_line *l, int64_t v, int last) {
  csv_line_i64(l, v);
  csv_line_chr(l, last ? '\n' : ',');
}
static void put_num(csv_line *l, double v, int last) {
  if (!isnan(v)) csv_line_num(l, v);
  csv_line_chr(l, last ? '\n' : ',');
}

/* Opens the file of schema s in dir, lets put write row i of n for each i, commits. */
static int write_file(const char *dir, const fp8_schema *s, size_t n,
                      void (*put)(csv_line *l, const fp8_cl_tables *t, size_t i),
                      const fp8_cl_tables *t, char *err, size_t errlen) {
  fp8_outfile of;
  int rc = fp8_schema_open(&of, dir, s, err, errlen);
  if (rc) return rc;
  for (size_t i = 0; i < n; i++) {
    csv_line l;
    csv_line_init(&l, of.fp);
    put(&l, t, i);
    csv_line_flush(&l);
  }
  return fp8_outfile_commit(&of, err, errlen);
}

static void put_loss(csv_line *l, const fp8_cl_tables *t, size_t i) {
  const fp8_cl_loss_row *r = &t->loss[i];
  put_str(l, r->label, 0);
  put_i64(l, r->seed, 0);
  put_num(l, r->final_loss, 0);
  put_num(l, r->gap, 0);
  put_num(l, r->eval_loss_hp, 0);
  put_num(l, r->eval_loss_fp8, 1);
}
static void put_rates(csv_line *l, const fp8_cl_tables *t, size_t i) {
  const fp8_cl_rates_row *r = &t->rates[i];
  put_str(l, r->label, 0);
  put_str(l, r->source, 0);
  put_i64(l, r->seed, 0);
  put_num(l, r->clipped_rate, 0);
  put_num(l, r->underflow_rate, 0);
  put_num(l, r->overflow_step_share, 0);
  put_i64(l, r->rows, 0);
  put_i64(l, r->stream_rows, 1);
}
static void put_drift(csv_line *l, const fp8_cl_tables *t, size_t i) {
  const fp8_cl_drift_row *r = &t->drift[i];
  put_str(l, r->label, 0);
  put_i64(l, r->step, 0);
  put_i64(l, r->tensors, 0);
  put_num(l, r->median_drift, 0);
  put_num(l, r->p90_drift, 1);
}
static void put_events(csv_line *l, const fp8_cl_tables *t, size_t i) {
  const fp8_cl_events_row *r = &t->events[i];
  put_str(l, r->label, 0);
  put_str(l, r->period, 0);
  put_i64(l, r->open_events, 0);
  put_i64(l, r->closed_events, 0);
  put_i64(l, r->both, 0);
  put_num(l, r->precision, 0);
  put_num(l, r->recall, 1);
}
static void put_spearman(csv_line *l, const fp8_cl_tables *t, size_t i) {
  const fp8_cl_spearman_row *r = &t->spearman[i];
  put_str(l, r->rate, 0);
  put_i64(l, r->labels, 0);
  put_num(l, r->rho, 1);
}
static void put_selfcheck(csv_line *l, const fp8_cl_tables *t, size_t i) {
  const fp8_cl_selfcheck_row *r = &t->selfcheck[i];
  put_str(l, r->label, 0);
  put_i64(l, r->seed, 0);
  put_i64(l, r->te_rows, 0);
  put_i64(l, r->differ, 1);
}

int fp8_closedloop_csv_write(const char *dir, const fp8_cl_tables *t, char *err, size_t errlen) {
  int rc = write_file(dir, &fp8_schema_closedloop_loss, t->nloss, put_loss, t, err, errlen);
  if (!rc)
    rc = write_file(dir, &fp8_schema_closedloop_rates, t->nrates, put_rates, t, err, errlen);
  if (!rc)
    rc = write_file(dir, &fp8_schema_closedloop_drift, t->ndrift, put_drift, t, err, errlen);
  if (!rc)
    rc = write_file(dir, &fp8_schema_closedloop_events, t->nevents, put_events, t, err, errlen);
  if (!rc)
    rc = write_file(dir, &fp8_schema_closedloop_spearman, t->nspearman, put_spearman, t, err,
                    errlen);
  if (!rc)
    rc = write_file(dir, &fp8_schema_closedloop_selfcheck, t->nselfcheck, put_selfcheck, t, err,
                    errlen);
  return rc;
}
