/* te_log_internal.h: what the two halves of `fp8lab import-te` share (not public; te_log.h is):
 * te_log.c reads the statistics logs into a te_import (files, lines, the cur_amax rows, the
 * scale_inv values, the tensors, the other statistics' counts) and checks it; te_log_write.c
 * writes the trace from it (amax.csv per rank, te_overflows.csv, te_log.json). */
#ifndef FP8LAB_TRACE_TE_LOG_INTERNAL_H
#define FP8LAB_TRACE_TE_LOG_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "te_log.h"
#include "util.h" /* fp8_strset */

/* TE's tensor names (the DebugQuantizer labels) and fp8lab's role for each (NULL: none). */
static const char *const TE_TENSORS[] = {"activation", "weight", "output", "gradient", "dgrad",
                                         "wgrad"};
static const char *const TE_ROLES[] = {"input", "weight", "output", "grad_output", "grad_input",
                                       NULL};
#define TE_NTENSORS (sizeof TE_TENSORS / sizeof *TE_TENSORS)

/* One log file: its rank and path. */
typedef struct {
  long rank;
  char *path;
} te_file;

/* A cur_amax value kept for amax.csv. */
typedef struct {
  int64_t iter;
  uint32_t tensor, rank;
  uint32_t ord; /* the tensor's position by name (set before the writing sort) */
  size_t line;
  float v;
  float te_scale; /* 1 / TE's logged scale_inv of the tensor at that iteration; 0: none */
} te_row;

/* A logged scale_inv_min or scale_inv_max (kind 0, 1) of a tensor at an iteration; also
 * (te_import.ovf, kind 2) a logged overflows% of the delayed recipe. */
typedef struct {
  int64_t iter;
  uint32_t tensor, rank;
  int kind;
  float v;
} te_sinv;

/* Per tensor (<layer>.<role>): what te_log.json says of it. */
typedef struct {
  char *name, *layer;
  size_t te_tensor; /* index into TE_TENSORS */
  size_t logged, zero, coarse;
} te_tensor;

typedef struct {
  te_file *files;
  size_t nfiles;
  te_row *rows;
  size_t nrows, caprows;
  te_sinv *sinv;
  size_t nsinv, capsinv;
  size_t scale_rows, scale_lost; /* amax rows given TE's scale; scale_inv not usable */
  te_sinv *ovf; /* overflows% (unprefixed or fp8_delayed_scaling_): te_overflows.csv */
  size_t novf, capovf;
  fp8_strset tset; /* tensor names -> index into tens */
  te_tensor *tens;
  size_t ntens, captens;
  fp8_strset sset; /* other statistics' names -> index into scount */
  char **sname;
  size_t *scount;
  size_t nstat, capstat;
  size_t left_wgrad;
  uint32_t *noamax; /* the ranks whose log gave no amax row (te_log.json's ranks_without_amax) */
  size_t nnoamax;
  size_t capwarn; /* of sum.warnings */
  fp8_te_import_summary sum;
} te_import;

/* Writes the trace of a read and checked import into tracedir (te_log.h's fp8_te_import: new,
 * or with force an earlier import's files replaced): each rank's amax.csv (rows by step, then
 * tensor name; 0.0000 rows left out; te_scale where TE gave one), then te_log.json. Sorts
 * im->rows. FP8_OK, or FP8_EFORMAT / FP8_EIO / FP8_EWRITE / FP8_ENOMEM with err. */
int te_write_trace(te_import *im, const char *logdir, const char *tracedir, int force, char *err,
                   size_t errlen);

#endif /* FP8LAB_TRACE_TE_LOG_INTERNAL_H */
