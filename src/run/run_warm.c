/* run_warm.c: [trace] warm_history (docs/semantics.md "Trace replay"). A steps selection
 * (`steps = 10-299`, `steps = 10-299:5`) replays only its steps, but in training every step
 * before them fed delayed scaling's amax history. With warm_history (the default) the steps of
 * the trace that the selection leaves out before its last selected step, before its range or
 * skipped by its stride, are fed to the engine's end_phase calls exactly as a replay of every
 * step feeds them (the same amax source, reduction and micro-batches), and write nothing: no
 * steps.csv, stream, histogram or GEMM row, no statistic, not counted as a step. So the
 * selected steps' rows are those of the full replay, restricted.
 *
 * A warm step's amax, as the full replay takes it: a step of one micro-batch with a snapshot
 * takes the snapshot's amax of each selected tensor (fp8_amax_dtype: one read of the data, no
 * cast), except a snapshot of a subset of the rows, whose amax.csv row has the whole's; any
 * other tensor its amax.csv row, else 0 (it did not run). A step of several micro-batches
 * feeds each micro-batch its amax.csv rows, its snapshot unread. Steps after the last selected
 * step are never read. */
#include <stdlib.h>

#include "runner_internal.h"

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* The distinct micro values of rows [b, e) (sorted by micro within the step), at least 1. */
static size_t micro_count(const fp8_trace *tr, size_t b, size_t e) {
  size_t n = 0;
  for (size_t k = b; k < e; k++) n += k == b || tr->amax[k].micro != tr->amax[k - 1].micro;
  return n ? n : 1;
}

int run_warm_plan(run_t *r, const fp8_trace *tr, const int64_t *steps, size_t nsteps) {
  const fp8_experiment *ex = r->ex;
  r->nwarm = 0;
  r->steps_before = r->steps_skipped = 0;
  r->warm_at = calloc(nsteps + 1, sizeof *r->warm_at);
  r->warm_micro = calloc(nsteps + 1, sizeof *r->warm_micro);
  if (!r->warm_at || !r->warm_micro) return FP8_ENOMEM;
  if (!ex->has_steps || nsteps == 0) return FP8_OK;
  const int64_t last = steps[nsteps - 1];
  size_t na = 0;
  for (size_t i = 0; i < tr->namax; i++) na += i == 0 || tr->amax[i].step != tr->amax[i - 1].step;
  int64_t *w = malloc((tr->nsteps + na + 1) * sizeof *w);
  if (!w) return FP8_ENOMEM;
  size_t n = 0;
  for (size_t i = 0; i < tr->nsteps; i++)
    if (tr->steps[i] < last && !fp8_experiment_step_selected(ex, tr->steps[i])) w[n++] = tr->steps[i];
  for (size_t i = 0; i < tr->namax; i++)
    if ((i == 0 || tr->amax[i].step != tr->amax[i - 1].step) && tr->amax[i].step < last &&
        !fp8_experiment_step_selected(ex, tr->amax[i].step))
      w[n++] = tr->amax[i].step;
  qsort(w, n, sizeof *w, cmp_i64);
  size_t u = 0;
  for (size_t i = 0; i < n; i++)
    if (u == 0 || w[u - 1] != w[i]) w[u++] = w[i];
  for (size_t i = 0; i < u; i++) {
    if (w[i] < steps[0]) r->steps_before++;
    else r->steps_skipped++;
  }
  if (!ex->warm_history) { /* a cold history: those steps do not exist for the replay */
    free(w);
    return FP8_OK;
  }
  r->warm = w;
  r->nwarm = u;
  /* each selected step's warm steps (those after the one before it), and their micro-batches */
  size_t k = 0, b = 0, e = 0;
  for (size_t si = 0; si < nsteps; si++) {
    r->warm_at[si] = k;
    for (; k < u && w[k] < steps[si]; k++) {
      run_step_rows(tr, w[k], &b, &e);
      r->warm_micro[si] += micro_count(tr, b, e);
      b = e;
    }
  }
  r->warm_at[nsteps] = k;
  return FP8_OK;
}

/* One rank's snapshot of a warm step: the amaxes of its selected tensors (this process's, under
 * MPI), as the full replay's cast would give them. */
static int warm_part(run_t *r, const fp8_trace *tr, size_t snap, size_t rank, char *err,
                     size_t errlen) {
  if (r->split && r->multirank && r->rank_owner[rank] != r->me) return FP8_OK; /* another's */
  fp8_step s;
  int rc = fp8_trace_load_step_rank(tr, snap, rank, &s, err, errlen);
  if (rc) return rc;
  for (size_t k = 0; k < s.ntensors; k++) {
    const fp8_tensor_view *v = &s.tensors[k];
    ssize_t idx = run_find_tensor(r, v->name);
    if (idx < 0) continue; /* not selected */
    if (r->split && r->owner[idx] != r->me) continue;
    run_tensor *t = &r->t[idx];
    t->snap = 1;
    if (v->full_rows > 0 && t->csv_has) continue; /* a subset of the rows: amax.csv has the whole's */
    r->amax[idx] = fp8_amax_dtype(v->dtype, v->data, (size_t)v->numel);
  }
  fp8_step_free(&s);
  return FP8_OK;
}

int run_warm_feed(run_t *r, const fp8_trace *tr, size_t si, const int32_t *amax_map, char *err,
                  size_t errlen) {
  if (!r->nwarm) return FP8_OK;
  const size_t nparts = tr->nranks ? tr->nranks : 1;
  int rc = FP8_OK;
  for (size_t k = r->warm_at[si]; k < r->warm_at[si + 1] && !rc; k++) {
    const int64_t step = r->warm[k];
    size_t b = r->warm_arow, e = 0;
    run_step_rows(tr, step, &b, &e);
    r->warm_arow = e;
    r->multi_micro = micro_count(tr, b, e) > 1;
    run_take_csv_rows(r, tr, b, e, amax_map);
    while (r->warm_snap < tr->nsteps && tr->steps[r->warm_snap] < step) r->warm_snap++;
    /* several micro-batches: their amax.csv rows feed the updates, the snapshot's amax none */
    int have_snap = !r->multi_micro && r->warm_snap < tr->nsteps && tr->steps[r->warm_snap] == step;
    int prc = FP8_OK;
    for (size_t part = 0; have_snap && part < nparts && !prc; part++)
      prc = warm_part(r, tr, r->warm_snap, part, err, errlen);
    /* MPI: each tensor's amax from its owner, as after a step's parts */
    rc = r->split ? run_split_sync(r, have_snap, prc, err, errlen) : prc;
    if (!rc) rc = fp8_engine_begin_step(r->engine, step, err, errlen);
    if (!rc) rc = run_micro_batches(r, tr, step, b, e, amax_map, 0, err, errlen);
  }
  return rc;
}
