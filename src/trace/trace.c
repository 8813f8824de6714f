/* trace.c: the public entry points of the trace reader (trace.h). A trace is either one
 * single-rank directory (trace_dir.c: listing its step_<N> snapshots, reading amax.csv) or a
 * folder of rank_<r>/ single-rank traces (trace_ranks.c); this file tells the two apart and
 * dispatches. Only the loaded step is mapped, so memory stays bounded by one step. The helpers
 * every trace file and reader shares are in the leaf trace_util.c (trace_internal.h).
 */
#include "trace_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "outfile.h" /* fp8_fopen_regular */
#include "te_log.h" /* te_log.json and its keys */
#include "util.h"

/* te_log.json's tensors (schema 2): each entry's name and own interval into tr, when every
 * entry has an interval; none of them when no entry has one (a te_log.json written before the
 * per-tensor intervals: every tensor has the top-level interval). */
static int read_te_intervals(json_t *o, const char *path, fp8_trace *tr, char *err,
                             size_t errlen) {
  json_t *ts = json_object_get(o, FP8_TE_LOG_TENSORS), *e;
  json_t *d = json_object_get(o, FP8_TE_LOG_INTERVALS_DIFFER);
  if (d && !json_is_boolean(d))
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: %s: expected true or false", path,
                      FP8_TE_LOG_INTERVALS_DIFFER);
  tr->te_intervals_differ = json_is_true(d);
  if (!json_is_array(ts)) return FP8_OK; /* counts only: nothing per tensor to read */
  size_t n = json_array_size(ts), with = 0, k;
  json_array_foreach(ts, k, e) with += json_object_get(e, FP8_TE_LOG_INTERVAL) != NULL;
  if (with == 0) return FP8_OK;
  if (!(tr->te_tensor_names = calloc(n, sizeof *tr->te_tensor_names)) ||
      !(tr->te_tensor_intervals = calloc(n, sizeof *tr->te_tensor_intervals)))
    return fp8_errorf(FP8_ENOMEM, err, errlen, "%s: out of memory", path);
  json_array_foreach(ts, k, e) {
    json_t *name = json_object_get(e, FP8_TE_LOG_TENSOR), *iv = json_object_get(e,
                                                                               FP8_TE_LOG_INTERVAL);
    if (!json_is_string(name) || !json_is_integer(iv) || json_integer_value(iv) < 0)
      return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: %s[%zu]: expected a %s (a string) and "
                        "an %s (an integer >= 0) in every entry, as in the others", path,
                        FP8_TE_LOG_TENSORS, k, FP8_TE_LOG_TENSOR, FP8_TE_LOG_INTERVAL);
    if (!(tr->te_tensor_names[k] = strdup(json_string_value(name))))
      return fp8_errorf(FP8_ENOMEM, err, errlen, "%s: out of memory", path);
    tr->te_tensor_intervals[k] = (int64_t)json_integer_value(iv);
    tr->nte_tensors = k + 1;
  }
  return FP8_OK;
}

/* te_log.json (te_log.h), when the trace has one: what the report says of an imported
 * TransformerEngine log (the interval, each tensor's own, the values its four decimals
 * lost). */
static int read_te_log(const char *dir, fp8_trace *tr, char *err, size_t errlen) {
  size_t n = strlen(dir) + 16;
  char *path = malloc(n);
  if (!path) return FP8_ENOMEM;
  snprintf(path, n, "%s/%s", dir, FP8_TE_LOG_FILE);
  int rc = FP8_OK;
  if (access(path, F_OK) == 0) {
    json_error_t je;
    FILE *fp = fp8_fopen_regular(path, err, errlen); /* a FIFO: "not a regular file" */
    if (!fp) {
      free(path);
      return FP8_EIO;
    }
    json_t *o = json_loadf(fp, 0, &je);
    fclose(fp);
    const char *keys[3] = {FP8_TE_LOG_INTERVAL, FP8_TE_LOG_ZERO_VALUES, FP8_TE_LOG_COARSE_VALUES};
    int64_t *dst[3] = {&tr->te_interval, &tr->te_zero, &tr->te_coarse};
    if (!json_is_object(o)) {
      char shown[FP8_ESC_LEN];
      rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s: %s", path,
                      o ? "expected a JSON object" : fp8_esc(je.text, shown, sizeof shown));
    }
    for (int k = 0; k < 3 && rc == FP8_OK; k++) {
      json_t *v = json_object_get(o, keys[k]);
      if (!json_is_integer(v) || json_integer_value(v) < 0)
        rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s: %s: expected an integer >= 0", path,
                        keys[k]);
      else *dst[k] = (int64_t)json_integer_value(v);
    }
    if (rc == FP8_OK) rc = read_te_intervals(o, path, tr, err, errlen);
    tr->has_te_log = rc == FP8_OK;
    json_decref(o);
  }
  free(path);
  return rc;
}

int fp8_trace_open(const char *dir, fp8_trace *tr, char *err, size_t errlen) {
  size_t *ranks = NULL, nranks = 0;
  int rc = fp8_trace_dir_open(dir, tr, 1, &ranks, &nranks, err, errlen);
  if (rc == FP8_OK && nranks) {
    /* a folder of ranks: the listing found them and nothing else; open them */
    rc = fp8_trace_ranks_open(dir, tr, ranks, nranks, err, errlen);
    if (rc == FP8_ENOMEM && err && errlen && !err[0])
      fp8_errorf(rc, err, errlen, "%s: out of memory", dir);
    if (rc != FP8_OK) fp8_trace_close(tr);
  }
  free(ranks);
  if (rc == FP8_OK && (rc = read_te_log(dir, tr, err, errlen)) != FP8_OK) fp8_trace_close(tr);
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
