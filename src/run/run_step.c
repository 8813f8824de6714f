/* run_step.c: a replay step's amaxes and its micro-batches' updates, shared by the step loop
 * (runner.c) and the warm steps (run_warm.c): the step's amax.csv rows, then per micro-batch its
 * stream record (a replayed step's only), TE's two reductions and updates, and its amaxes into
 * the checkpoint's amax log. */
#include <math.h>

#include "runner_internal.h"

/* The step's amax.csv rows [b, e) before its snapshot: which tensors have one, and their
 * amax (several micro-batches: the max over them, which the snapshot's is compared with). With
 * one micro-batch its amaxes and TE's scales are those the update and stream.csv take. */
void run_take_csv_rows(run_t *r, const fp8_trace *tr, size_t b, size_t e,
                       const int32_t *amax_map) {
  for (size_t i = 0; i < r->ntensors; i++) {
    r->amax[i] = 0.0f; /* the module did not run: the state is kept */
    r->t[i].csv_has = 0;
    r->t[i].snap = 0;
    r->t[i].te_scale = 0.0f;
  }
  for (size_t k = b; k < e; k++) {
    int32_t idx = amax_map[tr->amax[k].tensor];
    if (idx < 0) continue;
    run_tensor *t = &r->t[idx];
    float a = tr->amax[k].amax;
    t->csv_amax = t->csv_has ? fmaxf(t->csv_amax, a) : a;
    t->csv_has = 1;
    if (!r->multi_micro) {
      r->amax[idx] = a;
      t->te_scale = tr->amax[k].te_scale;
    }
  }
}

/* One micro-batch's amaxes and TE's scales: rows [b, e) of tr->amax (one micro value). */
static void take_micro_rows(run_t *r, const fp8_trace *tr, size_t b, size_t e,
                            const int32_t *amax_map) {
  for (size_t i = 0; i < r->ntensors; i++) {
    r->amax[i] = 0.0f; /* not run in this micro-batch: the state is kept */
    r->t[i].te_scale = 0.0f;
  }
  for (size_t k = b; k < e; k++) {
    int32_t idx = amax_map[tr->amax[k].tensor];
    if (idx < 0) continue;
    r->amax[idx] = tr->amax[k].amax;
    r->t[idx].te_scale = tr->amax[k].te_scale;
  }
}

int run_micro_batches(run_t *r, const fp8_trace *tr, int64_t step, size_t b, size_t e,
                      const int32_t *amax_map, int record, char *err, size_t errlen) {
  size_t k = b;
  int rc = FP8_OK;
  do {
    int64_t micro = k < e ? tr->amax[k].micro : 0;
    size_t ke = k;
    while (ke < e && tr->amax[ke].micro == micro) ke++;
    if (r->multi_micro) take_micro_rows(r, tr, k, ke, amax_map);
    k = ke;
    if (record && (rc = run_stream_record(r, step, micro, err, errlen)) != FP8_OK) return rc;
    rc = fp8_engine_end_phase(r->engine, FP8_FWD, r->amax, err, errlen);
    if (!rc) rc = fp8_engine_end_phase(r->engine, FP8_BWD, r->amax, err, errlen);
    if (rc) return rc;
    run_note_warm(r);
    if ((rc = run_ckpt_micro(r, err, errlen)) != FP8_OK) return rc;
  } while (k < e);
  return FP8_OK;
}
