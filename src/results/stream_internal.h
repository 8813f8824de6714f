/* stream_internal.h: what the stream's files share (private to src/results): stream.c (the
 * writer, the table, fp8_stream_load), stream_csv.c (stream.csv) and stream_npy.c (stream.npy
 * with stream.json, fp8_stream_visit, fp8_stream_keep): the table's private part, the readers,
 * and the writer's two back ends (stream.csv's rows, stream.npy's record), which only the
 * writer calls (and tests/results/test_csv_rows.c, stream.csv's rows against fprintf). */
#ifndef FP8LAB_RESULTS_STREAM_INTERNAL_H
#define FP8LAB_RESULTS_STREAM_INTERNAL_H

#include <stdint.h>
#include <stdio.h>

#include "results.h"
#include "tables.h"
#include "util.h" /* fp8_strset */

typedef struct {
  size_t *cap;      /* [nseries]: capacity of each series' arrays (stream.csv) */
  char (*num)[2][16]; /* [nseries]: history_len and margin as the runner writes them ("%d") */
  /* the series of each tensor, for fp8_stream_find: the set of the names (an id each), the
   * first series of each id, and each series' next of the same tensor (SIZE_MAX: the last) */
  fp8_strset byname;
  size_t *head, *next;
  /* stream.npy (issue 27): the columns every configuration of a tensor shares are held once,
   * tensor-major; the scales (4 bytes a row, most of the file) stay in the file until
   * fp8_stream_visit or fp8_stream_keep read them. The series' step, micro, amax, te_scale,
   * snapshot and warmup point into these arrays. */
  int npy;
  size_t T, C, nrec, hn, rs; /* tensors, configurations, records, header and record bytes */
  size_t *map;               /* [nseries]: the series' position tensor * C + configuration */
  int64_t *step, *micro;     /* [nrec] */
  float *amax, *te;          /* [T * nrec] */
  unsigned char *snap, *warm; /* [T * nrec] */
} stream_priv;

/* A new series from the key columns of a stream.csv row (f, by FP8_STREAM_COL_*; stream.json's
 * entries are checked as such a row): its tensor and recipe copied in. 1, 0 for bad columns,
 * -1 out of memory. (stream_csv.c) */
int stream_new_series(fp8_stream_series *s, char **f);

/* stream.csv into the table (the series, their rows): stream_csv.c */
int stream_csv_parse(fp8_stream_table *t, FILE *fp, char *err, size_t errlen);

/* ------------------------------------------------------------------ the writers' back ends */

/* One stream.csv row (stream_csv.c; tests/results/test_csv_rows.c checks them against
 * fprintf). */
typedef struct {
  const char *tensor;
  fp8_role role;
  int64_t step;
  const fp8_config *config;    /* a delayed configuration */
  fp8_format format;
  int snapshot;                /* 1: the step has this tensor's snapshot (a steps.csv row) */
  float amax;                  /* the tensor's own amax at the step (snapshot, amax.csv, or 0) */
  float scale;                 /* the scale the step (micro-batch) used */
  int warmup;
  int64_t micro;               /* the micro-batch (0 without micro rows) */
  float te_scale;              /* TE's scale from amax.csv; 0: not given (empty column) */
} fp8_stream_row;

/* A run's table of the stream rows' configuration columns (recipe, format, history_len,
 * margin, amax_compute), made on first use: one per run and writing thread, for one
 * configurations array that does not change meanwhile. new: NULL when out of memory (the
 * columns are then made for each row). */
typedef struct fp8_stream_csv_texts fp8_stream_csv_texts;
fp8_stream_csv_texts *fp8_stream_csv_texts_new(void);
void fp8_stream_csv_texts_free(fp8_stream_csv_texts *t);
/* The stream.csv rows of one tensor at one (step, micro-batch), in configuration order: one
 * for each c < nconfigs with want[c], configuration *configs[c] in format formats[c] with
 * scale scales[c] (base's config, format and scale are not read). Fast: what they share (the
 * key, the amax, the tail) and each distinct scale's text and overshoot are formatted once,
 * each configuration's columns once per run (texts, which may be NULL), and the rows are
 * written at once. */
void fp8_stream_csv_put_rows(FILE *fp, const fp8_stream_row *base,
                             const fp8_config *const *configs, const fp8_format *formats,
                             const float *scales, const unsigned char *want, size_t nconfigs,
                             fp8_stream_csv_texts *texts);
/* One record's rows of stream.csv: each tensor's rows of the configurations that apply to it
 * (the writer's csv back end). stream_csv.c */
void stream_csv_put_record(FILE *fp, const fp8_stream_layout *lay, const fp8_stream_record *rec,
                           fp8_stream_csv_texts *texts);
/* One record, as stream.npy holds it (the writer's npy back end). stream_npy.c */
void fp8_stream_npy_put_record(FILE *fp, const fp8_stream_record *rec, size_t ntensors,
                               size_t nconfigs);

/* stream.json (next to stream.npy) into the table's series (stream_npy.c) */
int stream_json_read(fp8_stream_table *t, const char *jpath, char *err, size_t errlen);
/* stream.npy's records (after stream.json made the series): checked as stream.csv's rows are,
 * the shared columns kept, the scales checked and left in the file. */
int stream_npy_records(fp8_stream_table *t, FILE *fp, char *err, size_t errlen);

#endif
