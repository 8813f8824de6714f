/* run_stream.c: the runner's side of the stream (results.h: stream.csv, or stream.npy with
 * stream.json): its layout (the tensors with a delayed configuration, the delayed
 * configurations, which applies to which in what format) and format, and each (step,
 * micro-batch)'s record, gathered once from the engines' states and handed to the stream's one
 * writer through the row writer (run_writer.c: on its thread, or now). */
#include <math.h>
#include <stdlib.h>

#include "runner_internal.h"
#include "util.h"

/* The stream's layout (results.h: its tensors, those with a delayed configuration; its
 * configurations, the delayed ones; which applies to which in what format), a record's buffer,
 * and its format ([output] stream; auto: stream.npy above FP8_STREAM_NPY_ROWS rows). */
int run_stream_plan(run_t *r, char *err, size_t errlen) {
  if (!r->has_stream) return FP8_OK;
  const size_t nc = r->nconfigs;
  size_t nrec = 0, T = 0, C = 0;
  for (size_t si = 0; si < r->nsteps; si++) nrec += r->nmicro[si];
  for (size_t c = 0; c < nc; c++) C += r->ex->configs[c].kind == FP8_KIND_DELAYED;
  r->stream_tensor = malloc((r->ntensors + 1) * sizeof *r->stream_tensor);
  r->stream_config = malloc((C + 1) * sizeof *r->stream_config);
  if (!r->stream_tensor || !r->stream_config)
    return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  for (size_t c = 0, j = 0; c < nc; c++)
    if (r->ex->configs[c].kind == FP8_KIND_DELAYED) r->stream_config[j++] = c;
  for (size_t i = 0; i < r->ntensors; i++) {
    int any = 0;
    for (size_t j = 0; j < C; j++) any |= r->covers[i * nc + r->stream_config[j]];
    if (any) r->stream_tensor[T++] = i;
  }
  r->stream_names = malloc((T + 1) * sizeof *r->stream_names);
  r->stream_roles = malloc((T + 1) * sizeof *r->stream_roles);
  r->stream_cfgs = malloc((C + 1) * sizeof *r->stream_cfgs);
  r->stream_applies = malloc(T * C + 1);
  r->stream_formats = malloc((T * C + 1) * sizeof *r->stream_formats);
  if (!r->stream_names || !r->stream_roles || !r->stream_cfgs || !r->stream_applies ||
      !r->stream_formats || fp8_stream_record_init(&r->stream_rec, T, C) != FP8_OK)
    return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  for (size_t k = 0; k < T; k++) {
    size_t i = r->stream_tensor[k];
    r->stream_names[k] = r->t[i].name;
    r->stream_roles[k] = r->roles[i];
    for (size_t j = 0; j < C; j++) {
      r->stream_applies[k * C + j] = r->covers[i * nc + r->stream_config[j]];
      r->stream_formats[k * C + j] = r->formats[i * nc + r->stream_config[j]];
    }
  }
  for (size_t j = 0; j < C; j++) r->stream_cfgs[j] = &r->ex->configs[r->stream_config[j]];
  r->stream_lay = (fp8_stream_layout){nrec, T, C, r->stream_names, r->stream_roles,
                                      r->stream_cfgs, r->stream_applies, r->stream_formats};
  r->stream_per_rec = fp8_stream_layout_rows(&r->stream_lay);
  int fmt = r->ex->stream_format;
  r->stream_npy = fmt == FP8_STREAM_NPY ||
                  (fmt == FP8_STREAM_AUTO &&
                   (double)nrec * (double)r->stream_per_rec > FP8_STREAM_NPY_ROWS);
  return FP8_OK;
}

/* The stream's record of the step's micro-batch (results.h, fp8_stream_record): every stream
 * tensor under every delayed configuration that applies to it, with the scale it used (the
 * engines' states before this micro-batch's updates), the tensor's own amax (its snapshot's
 * when it has one and the step one micro-batch, as the update uses; else amax.csv's; else 0),
 * TE's scale from amax.csv and the snapshot and warm-up flags. */
static int gather_stream_record(run_t *r, int64_t step, int64_t micro, fp8_stream_record *rec,
                                char *err, size_t errlen) {
  const fp8_stream_layout *lay = &r->stream_lay;
  const size_t C = lay->nconfigs;
  rec->step = step;
  rec->micro = micro;
  for (size_t k = 0; k < lay->ntensors; k++) {
    size_t i = r->stream_tensor[k];
    int rc = fp8_engine_state(r->engine, i, r->scales, err, errlen);
    if (rc) return rc;
    rec->amax[k] = r->amax[i];
    rec->te_scale[k] = r->t[i].te_scale > 0 ? r->t[i].te_scale : NAN;
    rec->snapshot[k] = (unsigned char)r->t[i].snap;
    rec->warmup[k] = (unsigned char)run_is_warmup(r, i);
    for (size_t j = 0; j < C; j++)
      rec->scale[k * C + j] = lay->applies[k * C + j] ? r->scales[r->stream_config[j]] : NAN;
  }
  r->stream_rows += (long long)r->stream_per_rec;
  return FP8_OK;
}

/* The record gathered once, into the row writer thread's next job or the loop's own record,
 * and handed to the stream's one writer (there, or here now: run_writer.c). */
int run_stream_record(run_t *r, int64_t step, int64_t micro, char *err, size_t errlen) {
  if (!r->stream_w) return FP8_OK; /* no stream, or not this process's (MPI) */
  fp8_stream_record *rec = run_writer_stream_begin(r);
  if (!rec) return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  int rc = gather_stream_record(r, step, micro, rec, err, errlen);
  if (rc) {
    run_writer_stream_drop(r, rec);
    return rc;
  }
  return run_writer_stream_end(r, rec, err, errlen);
}

/* stream.json: the names of stream.npy's tensors and configurations (results.h). */
int run_stream_index(const run_t *r, char *err, size_t errlen) {
  char *text = fp8_stream_json_text(&r->stream_lay);
  if (!text) return fp8_errorf(FP8_ENOMEM, err, errlen, "%s: out of memory", FP8_STREAM_JSON_FILE);
  int rc = fp8_outfile_write_text(r->out, FP8_STREAM_JSON_FILE, text, err, errlen);
  free(text);
  return rc;
}
