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
  /* its cur_amax iterations over every rank (check_rows): any logged, their gcd, first, last */
  int has_iter;
  int64_t igcd, first, last;
  size_t stat_lo, stat_hi; /* its statistics: im->pstat[stat_lo .. stat_hi) (te_stats_resolve) */
} te_tensor;

/* One statistic of one TE tensor as logged, keyed by TE's whole name <layer>_<tensor>_<stat>
 * (over every rank): the iterations' gcd, first and last, for te_log.json's per-tensor
 * "statistics" (each statistic has its own freq in TE's config). */
typedef struct {
  char *key;             /* the whole name, owned (pset's key) */
  size_t layer_len, te_tensor, stat_off; /* <layer> = key[0..layer_len), stat at key+stat_off */
  int64_t gcd, first, last;
  uint32_t tensor;       /* index into tens; UINT32_MAX: no such tensor (te_stats_resolve) */
} te_stat;

/* The greatest common divisor (te_gcd(0, b) = b). */
static inline int64_t te_gcd(int64_t a, int64_t b) {
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* The interval of iterations whose gcd is g, first f, last l: 0 for one iteration (TE logs
 * iteration i when i % freq == 0, counting from 0: the gcd of the logged iterations is freq
 * or a multiple of it). */
static inline int64_t te_interval_of(int64_t g, int64_t f, int64_t l) { return f == l ? 0 : g; }

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
  fp8_strset pset; /* TE's whole names of role tensors' statistics -> index into pstat */
  te_stat *pstat;  /* sorted by (tensor, statistic name) by te_stats_resolve */
  size_t npstat, cappstat;
  int intervals_differ; /* the tensors' own intervals are not all equal */
  uint32_t *noamax; /* the ranks whose log gave no amax row (te_log.json's ranks_without_amax) */
  size_t nnoamax;
  size_t capwarn; /* of sum.warnings */
  fp8_te_import_summary sum;
} te_import;

/* te_log_stats.c: the trace's name of TE's tensor t of layer[0..ll) (a GroupedLinear's
 * `<name>.gemm_<i>` as `<name>.experts.<i>`) into name (size n): its length, or -1 when it does
 * not fit. */
int te_trace_name(const char *layer, size_t ll, size_t t, char *name, size_t n);

/* te_log_stats.c: what an import learns beside the rows. te_note_stat notes iteration iter of
 * the statistic logged as name[0..len) = <layer>_<tensor>_<stat> (stat at stat_off) of a tensor
 * with a role; te_stats_resolve, once the lines are read, gives each its tensor and each
 * tensor its range of statistics; te_note_ranks lists the ranks without an amax row (lines[r]:
 * rank r's statistics lines, cut[r] its dropped cut-off lines) and counts the tensors written;
 * te_add_warning adds a line for the summary's stderr. FP8_OK or FP8_ENOMEM. */
int te_note_stat(te_import *im, const char *name, size_t len, size_t ll, size_t t,
                 size_t stat_off, int64_t iter);
void te_stats_resolve(te_import *im);
int te_note_ranks(te_import *im, const size_t *lines, const size_t *cut);
int te_add_warning(te_import *im, const char *fmt, ...) FP8_PRINTF(2, 3);

/* Writes the trace of a read and checked import as tracedir (te_log.h's fp8_te_import: new,
 * or with force replacing an earlier import's folder, te_dir_*): each rank's amax.csv (rows by
 * step, then tensor name; 0.0000 rows left out; te_scale where TE gave one), te_overflows.csv,
 * then te_log.json listing them ("written"), all in a temporary folder moved in at the end.
 * Sorts im->rows. FP8_OK, or FP8_EFORMAT / FP8_EINVAL (a folder refused) / FP8_EIO /
 * FP8_EWRITE / FP8_ENOMEM with err; on failure tracedir is as it was. */
int te_write_trace(te_import *im, const char *logdir, const char *tracedir, int force, char *err,
                   size_t errlen);

/* The trace folder of an import (te_log_dir.c): the target checked, a fresh folder beside it
 * to write into, then moved in. */
typedef struct {
  const char *shown; /* the target as given (messages) */
  char *target;      /* without trailing slashes; ".", ".." resolved (realpath) */
  char *parent;      /* the folder holding it */
  char *tmp;         /* <parent>/.<base>.fp8lab-import.<pid>: the import is written here */
  char *old;         /* <parent>/.<base>.fp8lab-old.<pid>: the swap's fallback */
  char *made_top;    /* the outermost parent this import created, or NULL */
  unsigned mode;     /* the replaced folder's permission bits (0: a new folder) */
  int swap;          /* the target holds an earlier import (--force): swapped, then removed */
  int made_tmp;      /* tmp exists and is this import's to remove */
} te_dir;

/* Checks tracedir and makes d->tmp. tracedir absent: its parents created (mkdir -p); an empty
 * folder: replaced; a non-empty one: only with force and only when it is an earlier import's
 * (te_log.json's "written", or for an older import the files it implies; any other entry,
 * link, FIFO or folder refused, FP8_EFORMAT naming it); a file or a symbolic link: FP8_EINVAL.
 * First removes the folders a killed import left beside tracedir (pid gone). */
int te_dir_open(te_dir *d, const char *tracedir, int force, char *err, size_t errlen);
/* Moves d->tmp in as the target: rename(), or over an earlier import an atomic swap
 * (renameat2 RENAME_EXCHANGE; where unsupported, the old one renamed aside first), the old
 * import then removed. On failure the target is as it was. */
int te_dir_commit(te_dir *d, char *err, size_t errlen);
/* Removes d->tmp when it was not moved in, and any parent created for the target while it is
 * empty; frees d (safe after te_dir_open failed). */
void te_dir_close(te_dir *d);

#endif /* FP8LAB_TRACE_TE_LOG_INTERNAL_H */
