/* trace_internal.h: what the trace reader's files share. trace.c (the public entry points)
 * dispatches to trace_dir.c (one single-rank trace directory) and trace_ranks.c (a folder of
 * rank_<r>/ traces, opened with trace_dir.c); trace_dir.c calls the readers (safetensors.c,
 * npy.c, amaxcsv.c, tokenscsv.c); every one of them uses the leaf trace_util.c (mappings, the private part
 * of fp8_step, path joining). Calls only go down that list: no two files call each other.
 * Not installed, not for use outside src/trace/trace*.c and the readers.
 */
#ifndef FP8LAB_TRACE_TRACE_INTERNAL_H
#define FP8LAB_TRACE_TRACE_INTERNAL_H

#include <stddef.h>

#include "trace.h"

/** A read-only mapping of a whole file. addr is NULL for an empty file. */
typedef struct {
  void *addr;
  size_t len;
} fp8_map;

/** Maps a regular file read-only (FP8_EIO naming path on failure). */
int fp8_map_file(const char *path, fp8_map *m, char *err, size_t errlen);
/** Unmaps (no-op for an empty mapping) and clears m. */
void fp8_map_release(fp8_map *m);

/** What fp8_step.priv points to: the mappings the step's views point into. */
typedef struct {
  size_t nmaps, cap;
  fp8_map *maps;
} fp8_step_priv;

/** dir and name joined with one '/' (trailing slashes of dir dropped); malloc'ed, NULL when
 *  out of memory. */
char *fp8_path_join(const char *dir, const char *name);

/** Appends a mapping to the step (allocating priv on first use); on FP8_ENOMEM the mapping is
 *  NOT taken over and remains the caller's to release. */
int fp8_step_add_map(fp8_step *s, const fp8_map *m);
/** Sorts the step's tensors by name (strcmp). Returns the index of the first of two equal
 *  names, or -1 when all names are distinct. */
long fp8_step_sort(fp8_step *s);

/* ------------------------------------------------------------------ tokenscsv.c */

/** Sets found[g] for every GEMM g of t that one of names[0..n) (sorted, strcmp) is a tensor of:
 *  `<gemm>.<role>`, role one of fp8_role_of_tensor's. found[g] already set stays set. */
void fp8_tokens_find_tensors(const fp8_tokens_table *t, const char *const *names, size_t n,
                             unsigned char *found);

/* ------------------------------------------------------------------ trace_dir.c */

/** Opens dir as a single-rank trace into tr (zeroed first): its step_<N> snapshots and
 *  amax.csv. With allow_ranks (ranks and nranks then non-NULL), a directory of rank_<r>/
 *  folders is accepted instead: FP8_OK with *nranks > 0, *ranks the rank numbers found (in
 *  directory order, malloc'ed, the caller's to free) and only tr->dir set; the caller opens
 *  the ranks (trace_ranks.c). On error tr is closed and err says why. */
int fp8_trace_dir_open(const char *dir, fp8_trace *tr, int allow_ranks, size_t **ranks,
                       size_t *nranks, char *err, size_t errlen);
/** Loads snapshot i (< tr->nsteps) of a single-rank trace (npy or safetensors). */
int fp8_trace_dir_load_step(const fp8_trace *tr, size_t i, fp8_step *out, char *err,
                            size_t errlen);

/* ------------------------------------------------------------------ trace_ranks.c */

/** Opens rank_0 .. rank_<R-1> of dir into tr (whose dir is set; ranks: the nranks rank
 *  numbers found, in any order, sorted here) and builds the union view (trace.h). On error
 *  the caller closes tr, ranks included. */
int fp8_trace_ranks_open(const char *dir, fp8_trace *tr, size_t *ranks, size_t nranks,
                         char *err, size_t errlen);
/** Rank r's part of snapshot i of a multi-rank trace (fp8_trace_load_step_rank). */
int fp8_trace_ranks_load_part(const fp8_trace *tr, size_t i, size_t r, fp8_step *out,
                              char *err, size_t errlen);
/** Every rank's part of snapshot i (< tr->nsteps) in one step; out is zeroed. */
int fp8_trace_ranks_load_step(const fp8_trace *tr, size_t i, fp8_step *out, char *err,
                              size_t errlen);

#endif /* FP8LAB_TRACE_TRACE_INTERNAL_H */
