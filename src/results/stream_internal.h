/* stream_internal.h: what streamcsv.c (stream.csv, stream.json, the table) and streamread.c
 * (stream.npy's records, fp8_stream_visit, fp8_stream_keep) share. Private to src/results. */
#ifndef FP8_STREAM_INTERNAL_H
#define FP8_STREAM_INTERNAL_H

#include <stdint.h>
#include <stdio.h>

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

/* stream.npy's records (after stream.json made the series): checked as stream.csv's rows are,
 * the shared columns kept, the scales checked and left in the file. */
int stream_npy_records(fp8_stream_table *t, FILE *fp, char *err, size_t errlen);

#endif
