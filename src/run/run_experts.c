/* run_experts.c: experts.csv's rows (results' tables.h, docs/outputs.md), worked out before
 * the first step from the trace alone: the ranks' tokens.csv tables merged by GEMM name (a
 * GEMM that several ranks hold, data-parallel replicas: its tokens summed per step), the GEMMs
 * the experiment's `[trace] tensors` selection keeps (one of its tensors replayed), over the
 * replay's steps (the `steps` selection's). Nothing in them depends on the replay, so a resumed
 * run and an MPI run (process 0 alone computes and writes them) give the same bytes as one
 * process run through. Written at the commit (runner.c), listed in run.json's outputs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner_internal.h"
#include "tables.h" /* fp8_expert_row, fp8_experts_csv_write */
#include "util.h"   /* fp8_errorf */

/* The experiment keeps rank r's expert GEMM when one of its tensors `<gemm>.<role>` (a
 * multi-rank trace: `rank_<r>/<gemm>.<role>`) is among the replay's tensors. */
static int keep_gemm(size_t rank, const char *gemm, void *ctx) {
  const run_t *r = ctx;
  char name[FP8_NAME_MAX + FP8_RANK_PREFIX_MAX + 64];
  for (int role = FP8_ROLE_INPUT; role < FP8_ROLE_UNKNOWN; role++) {
    int n = r->multirank ? snprintf(name, sizeof name, "rank_%zu/%s.%s", rank, gemm,
                                    fp8_role_name((fp8_role)role))
                         : snprintf(name, sizeof name, "%s.%s", gemm, fp8_role_name((fp8_role)role));
    if (n > 0 && (size_t)n < sizeof name && run_find_tensor(r, name) >= 0) return 1;
  }
  return 0;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

int run_experts_plan(run_t *r, const fp8_trace *tr, const int64_t *steps, size_t nsteps,
                     char *err, size_t errlen) {
  if (!fp8_trace_has_tokens(tr)) return FP8_OK;
  fp8_tokens_table *m = &r->experts_tokens;
  int rc = fp8_trace_tokens_merge(tr, keep_gemm, r, m, err, errlen);
  if (rc) return rc;
  r->has_experts = 1;
  r->nexperts = m->ngemms;
  r->experts = calloc(m->ngemms + 1, sizeof *r->experts);
  if (!r->experts) return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  for (size_t g = 0; g < m->ngemms; g++) {
    fp8_expert_row *x = &r->experts[g];
    char group[FP8_NAME_MAX + 1];
    fp8_expert_of(m->gemms[g], &x->expert, group, sizeof group);
    x->gemm = m->gemms[g];
    if (!(x->group = strdup(group))) return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
    x->tokens_min = x->tokens_max = -1;
  }
  for (size_t i = 0; i < m->nrows; i++) {
    const fp8_tokens_row *t = &m->rows[i];
    if (!bsearch(&t->step, steps, nsteps, sizeof *steps, cmp_i64)) continue; /* not replayed */
    fp8_expert_row *x = &r->experts[t->gemm];
    x->steps++;
    if (t->tokens == 0) continue; /* it did not run at that step */
    if (x->tokens > INT64_MAX - t->tokens)
      return fp8_errorf(FP8_EFORMAT, err, errlen,
                        "%s: the tokens of gemm %s over the replay's steps overflow a 64-bit "
                        "integer",
                        tr->dir, x->gemm);
    x->steps_run++;
    x->tokens += t->tokens;
    if (x->tokens_min < 0 || t->tokens < x->tokens_min) x->tokens_min = t->tokens;
    if (t->tokens > x->tokens_max) x->tokens_max = t->tokens;
  }
  return FP8_OK;
}

int run_experts_write(const run_t *r, char *err, size_t errlen) {
  if (!r->has_experts) return FP8_OK;
  return fp8_experts_csv_write(r->out, r->experts, r->nexperts, err, errlen);
}

void run_experts_free(run_t *r) {
  for (size_t g = 0; r->experts && g < r->nexperts; g++) free((char *)r->experts[g].group);
  free(r->experts);
  r->experts = NULL;
  r->nexperts = 0;
  fp8_tokens_free(&r->experts_tokens);
}
