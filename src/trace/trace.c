/* trace.c: the public entry points of the trace reader (trace.h). A trace is either one
 * single-rank directory (trace_dir.c: listing its step_<N> snapshots, reading amax.csv) or a
 * folder of rank_<r>/ single-rank traces (trace_ranks.c); this file tells the two apart and
 * dispatches. Only the loaded step is mapped, so memory stays bounded by one step. The helpers
 * every trace file and reader shares are in the leaf trace_util.c (trace_internal.h).
 */
#include "trace_internal.h"

#include <stdlib.h>
#include <string.h>

int fp8_trace_open(const char *dir, fp8_trace *tr, char *err, size_t errlen) {
  size_t *ranks = NULL, nranks = 0;
  int rc = fp8_trace_dir_open(dir, tr, 1, &ranks, &nranks, err, errlen);
  if (rc != FP8_OK || nranks == 0) return rc;
  /* a folder of ranks: the listing found them and nothing else; open them */
  rc = fp8_trace_ranks_open(dir, tr, ranks, nranks, err, errlen);
  if (rc == FP8_ENOMEM && err && errlen && !err[0])
    fp8_errorf(rc, err, errlen, "%s: out of memory", dir);
  if (rc != FP8_OK) fp8_trace_close(tr);
  free(ranks);
  return rc;
}

int fp8_trace_load_step(const fp8_trace *tr, size_t i, fp8_step *out, char *err,
                        size_t errlen) {
  memset(out, 0, sizeof *out);
  if (i >= tr->nsteps)
    return fp8_errorf(FP8_EINVAL, err, errlen, "%s: step index %zu out of range (%zu steps)",
                      tr->dir, i, tr->nsteps);
  if (tr->nranks) return fp8_trace_ranks_load_step(tr, i, out, err, errlen);
  return fp8_trace_dir_load_step(tr, i, out, err, errlen);
}

int fp8_trace_load_step_rank(const fp8_trace *tr, size_t i, size_t r, fp8_step *out, char *err,
                             size_t errlen) {
  if (tr->nranks == 0) {
    if (r != 0) {
      memset(out, 0, sizeof *out);
      return fp8_errorf(FP8_EINVAL, err, errlen, "%s: rank %zu of a single-rank trace",
                        tr->dir, r);
    }
    return fp8_trace_load_step(tr, i, out, err, errlen);
  }
  return fp8_trace_ranks_load_part(tr, i, r, out, err, errlen);
}
