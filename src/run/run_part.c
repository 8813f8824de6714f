/* run_part.c: one part of a step: one rank's snapshot (a single-rank trace is one part) cast
 * by the engine, its steps.csv and histograms.csv rows, its layers' GEMM errors, written to the
 * files in use (runner.c's, or run_split.c's memory files under MPI, where a process replays
 * only the part's tensors it owns). */
#include "run_segs.h"
#include "runner_internal.h"

/* Loads the part's tensors into the engine and queues their casts; then waits for them. */
static int quantize_part(run_t *r, char *err, size_t errlen) {
  int rc = FP8_OK;
  for (size_t w = 0; w < r->nwork && rc == FP8_OK; w++) {
    size_t i = r->work[w];
    run_tensor *t = &r->t[i];
    rc = fp8_engine_load(r->engine, i, t->view, err, errlen);
    if (!rc) rc = fp8_engine_quantize_stats(r->engine, i, &t->res, err, errlen);
  }
  if (!rc) rc = fp8_engine_sync(r->engine, err, errlen);
  return rc;
}

/* steps.csv and histograms.csv rows of the part's tensors, in tensor order (work[] is ascending
 * because both lists are sorted); the summary totals. */
static void write_part_rows(run_t *r, int64_t step) {
  /* the rows to the row writer thread when there is one, else written as they come */
  run_writer_rows *job = run_writer_steps_begin(r, r->nwork * r->nconfigs);
  for (size_t w = 0; w < r->nwork; w++) {
    size_t i = r->work[w];
    run_tensor *t = &r->t[i];
    float amax = t->res.amax;
    /* the snapshot's data wins over amax.csv, but not over several micro-batches' amaxes: it
     * holds all of them concatenated, while each micro-batch's update sees its own; nor when
     * it holds a subset of the rows (the capture's rows: amax.csv has the whole's amax) */
    int subset = t->view->full_rows > 0 && t->csv_has;
    if (!r->multi_micro && !subset) r->amax[i] = amax;
    if (t->csv_has && t->csv_amax != amax && !subset) r->mismatches++;
    fp8_histograms_csv_put_rows(r->hist_fp, t->name, step, t->res.hist);
    int warm = run_is_warmup(r, i);
    t->snap = 1;
    for (size_t c = 0; c < r->nconfigs; c++) {
      if (!r->covers[i * r->nconfigs + c]) continue; /* its section's tensors leave it out */
      fp8_steps_row row = {.tensor = t->name, .role = r->roles[i], .step = step,
                           .config = &r->ex->configs[c], .format = r->formats[i * r->nconfigs + c],
                           .amax = amax, .scale = t->res.scale[c], .stats = &t->res.stats[c],
                           .block = &t->res.block[c], .warmup = warm};
      run_writer_steps_row(r, job, &row);
      fp8_summary_acc_add(&t->acc[c], &row);
      r->rows++;
    }
    run_segs_tensor(r, i);
  }
  run_writer_steps_end(r, job);
}

/* One rank's snapshot of the step (a single-rank trace is one part). */
int run_part(run_t *r, const fp8_trace *tr, size_t snap, size_t rank, int64_t step,
                    char *err, size_t errlen) {
  fp8_step s;
  int rc = fp8_trace_load_step_rank(tr, snap, rank, &s, err, errlen);
  if (rc) return rc;
  r->nwork = 0;
  for (size_t k = 0; k < s.ntensors; k++) {
    ssize_t idx = run_find_tensor(r, s.tensors[k].name);
    if (idx < 0) continue; /* not selected */
    if (r->split && r->owner[idx] != r->me) continue; /* another process's (MPI) */
    r->t[idx].view = &s.tensors[k];
    r->work[r->nwork++] = (size_t)idx;
  }
  rc = quantize_part(r, err, errlen);
  if (!rc) write_part_rows(r, step);
  if (!rc && r->ex->gemm) rc = run_gemm_part(r, &s, step, err, errlen);
  for (size_t w = 0; w < r->nwork; w++) r->t[r->work[w]].view = NULL; /* unmapped with s */
  fp8_step_free(&s);
  return rc;
}

