/* stream.c: the stream (results.h, tables.h): every replay (step, micro-batch) of the tensors
 * that have a delayed configuration, as stream.csv (stream_csv.c) or as stream.npy with its
 * stream.json (stream_npy.c). Here what the two forms share: the writer the runner hands each
 * (step, micro-batch)'s record to (fp8_stream_writer, whose back end is the file's), and the
 * table the report reads either file into (fp8_stream_load: the same series, the same checks),
 * with its lookups. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "results.h"
#include "stream_internal.h"
#include "tables.h"
#include "util.h"  /* fp8_strset */

/* ------------------------------------------------------------------ the record and its writer */

int fp8_stream_record_init(fp8_stream_record *r, size_t ntensors, size_t nconfigs) {
  memset(r, 0, sizeof *r);
  r->amax = malloc((ntensors + 1) * sizeof *r->amax);
  r->te_scale = malloc((ntensors + 1) * sizeof *r->te_scale);
  r->snapshot = malloc(ntensors + 1);
  r->warmup = malloc(ntensors + 1);
  r->scale = malloc((ntensors * nconfigs + 1) * sizeof *r->scale);
  if (r->amax && r->te_scale && r->snapshot && r->warmup && r->scale) return FP8_OK;
  fp8_stream_record_free(r);
  return FP8_ENOMEM;
}

void fp8_stream_record_free(fp8_stream_record *r) {
  free(r->amax);
  free(r->te_scale);
  free(r->snapshot);
  free(r->warmup);
  free(r->scale);
  memset(r, 0, sizeof *r);
}

size_t fp8_stream_layout_rows(const fp8_stream_layout *lay) {
  size_t n = 0;
  for (size_t k = 0; k < lay->ntensors * lay->nconfigs; k++) n += lay->applies[k] != 0;
  return n;
}

struct fp8_stream_writer {
  FILE *fp;
  int npy;                       /* stream.npy; else stream.csv */
  fp8_stream_layout lay;         /* the caller's arrays */
  fp8_stream_csv_texts *texts;   /* their columns, made once (NULL: made per row) */
};

fp8_stream_writer *fp8_stream_writer_new(FILE *fp, int npy, const fp8_stream_layout *lay) {
  fp8_stream_writer *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  w->fp = fp;
  w->npy = npy;
  w->lay = *lay;
  if (!npy) w->texts = fp8_stream_csv_texts_new(); /* (NULL: the columns are made for each row) */
  return w;
}

void fp8_stream_writer_put(fp8_stream_writer *w, const fp8_stream_record *rec) {
  if (w->npy) fp8_stream_npy_put_record(w->fp, rec, w->lay.ntensors, w->lay.nconfigs);
  else stream_csv_put_record(w->fp, &w->lay, rec, w->texts);
}

void fp8_stream_writer_free(fp8_stream_writer *w) {
  if (!w) return;
  fp8_stream_csv_texts_free(w->texts);
  free(w);
}

/* ------------------------------------------------------------------ the table */

/* The index of the series by tensor (after a successful parse). */
static int index_series(fp8_stream_table *t) {
  stream_priv *pv = t->priv_;
  size_t n = t->nseries;
  pv->head = malloc((n + 1) * sizeof *pv->head);
  pv->next = malloc((n + 1) * sizeof *pv->next);
  if (!pv->head || !pv->next) return 0;
  size_t *tail = malloc((n + 1) * sizeof *tail); /* [id]: the last series of the tensor so far */
  if (!tail) return 0;
  for (size_t i = 0; i < n; i++) {
    int added;
    const char *nm = t->series[i].tensor;
    size_t id = fp8_strset_put(&pv->byname, nm, strlen(nm), &added);
    if (id == SIZE_MAX) {
      free(tail);
      return 0;
    }
    pv->next[i] = SIZE_MAX;
    if (added) pv->head[id] = i;
    else pv->next[tail[id]] = i;
    tail[id] = i;
  }
  free(tail);
  return 1;
}

int fp8_stream_load(const char *path, fp8_stream_table *t, char *err, size_t errlen) {
  memset(t, 0, sizeof *t);
  FILE *fp = fopen(path, "rb");
  if (!fp) return fp8_errorf(FP8_EIO, err, errlen, "%s: cannot open", path);
  setvbuf(fp, NULL, _IOFBF, 1 << 16);
  stream_priv *pv = calloc(1, sizeof *pv);
  t->path = strdup(path);
  if (!pv || !t->path) {
    fclose(fp);
    free(pv);
    free(t->path);
    t->path = NULL;
    return fp8_errorf(FP8_ENOMEM, err, errlen, "%s: out of memory", path);
  }
  t->priv_ = pv;
  size_t L = strlen(path);
  int rc;
  if (L > 4 && strcmp(path + L - 4, ".npy") == 0) { /* the compact stream (stream_npy.c) */
    char jpath[4200];
    snprintf(jpath, sizeof jpath, "%.*s.json", (int)(L - 4), path);
    pv->npy = 1;
    rc = stream_json_read(t, jpath, err, errlen);
    if (!rc) rc = stream_npy_records(t, fp, err, errlen);
  } else {
    rc = stream_csv_parse(t, fp, err, errlen);
  }
  fclose(fp);
  if (!rc && !index_series(t)) rc = fp8_errorf(FP8_ENOMEM, err, errlen, "%s: out of memory", path);
  if (rc) fp8_stream_free(t);
  return rc;
}

void fp8_stream_free(fp8_stream_table *t) {
  if (!t) return;
  stream_priv *pv = t->priv_;
  for (size_t i = 0; i < t->nseries; i++) {
    fp8_stream_series *s = &t->series[i];
    free(s->scale);
    free((char *)s->tensor);
    free((char *)s->key.recipe);
    if (pv && pv->npy) continue; /* the other columns are the table's (stream_internal.h) */
    free(s->step);
    free(s->amax);
    free(s->snapshot);
    free(s->warmup);
    free(s->micro);
    free(s->te_scale);
  }
  free(t->series);
  if (pv) {
    free(pv->map);
    free(pv->step);
    free(pv->micro);
    free(pv->amax);
    free(pv->te);
    free(pv->snap);
    free(pv->warm);
    free(pv->cap);
    free(pv->num);
    fp8_strset_free(&pv->byname);
    free(pv->head);
    free(pv->next);
    free(pv);
  }
  free(t->path);
  memset(t, 0, sizeof *t);
}

const fp8_stream_series *fp8_stream_find(const fp8_stream_table *t, const char *tensor,
                                         const fp8_config_key *key) {
  const stream_priv *pv = t ? t->priv_ : NULL;
  if (!pv || !pv->head) return NULL;
  size_t id = fp8_strset_get(&pv->byname, tensor, strlen(tensor));
  for (size_t i = id == SIZE_MAX ? SIZE_MAX : pv->head[id]; i != SIZE_MAX; i = pv->next[i])
    if (fp8_config_key_equal(&t->series[i].key, key, FP8_KEY_IGNORE_KIND)) return &t->series[i];
  return NULL;
}

int fp8_stream_overflowed(float amax, float scale, fp8_format f) {
  volatile float y = amax * scale; /* RN32, never a wider intermediate */
  return fabsf(y) > fp8_format_max(f);
}

int fp8_stream_clipped(float amax, float scale, fp8_format f) {
  volatile float y = amax * scale;
  float ay = fabsf(y);
  uint32_t u;
  memcpy(&u, &ay, sizeof u);
  return u > fp8_clip_bits(f);
}
