/* run_segs.h: where a part's rows end, for the MPI replay's merge (run_split.c). A process
 * that shares a part (a single-rank trace's layers spread over the processes) writes its rows
 * into memory files and notes, after each tensor's steps.csv and histograms.csv rows and after
 * each layer's gemm.csv rows, where they end; process 0 merges the processes' rows by tensor
 * and by layer name. The hooks are no-ops when r->segs is NULL (every other replay). Static
 * inline: run_part.c and run_gemm.c call them without a call into run_split.c. */
#ifndef FP8LAB_RUN_SEGS_H
#define FP8LAB_RUN_SEGS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner_internal.h"

typedef struct {
  uint64_t key, end[2]; /* the tensor; where its steps.csv and histograms.csv rows end */
} run_tseg;
typedef struct {
  char *name;           /* the layer */
  uint64_t end;         /* where its gemm.csv rows end */
} run_lseg;
struct run_segs {
  FILE *fp[3];          /* the memory files: steps, histograms, gemm */
  run_tseg *t;
  size_t nt, tcap;
  run_lseg *l;
  size_t nl, lcap;
  int oom;              /* a note could not be kept: the part fails (out of memory) */
};

static inline void *run_segs_grow(void *p, size_t *cap, size_t need, size_t size, int *oom) {
  if (need <= *cap) return p;
  size_t c = *cap ? *cap * 2 : 64;
  while (c < need) c *= 2;
  void *q = realloc(p, c * size);
  if (!q) {
    *oom = 1;
    return p;
  }
  *cap = c;
  return q;
}

/* Tensor i's steps.csv and histograms.csv rows are written. */
static inline void run_segs_tensor(run_t *r, size_t i) {
  struct run_segs *g = r->segs;
  if (!g || g->oom) return;
  g->t = run_segs_grow(g->t, &g->tcap, g->nt + 1, sizeof *g->t, &g->oom);
  if (g->oom) return;
  g->t[g->nt++] = (run_tseg){i, {(uint64_t)ftello(g->fp[0]), (uint64_t)ftello(g->fp[1])}};
}

/* Layer `name`'s gemm.csv rows are written. */
static inline void run_segs_layer(run_t *r, const char *name) {
  struct run_segs *g = r->segs;
  if (!g || g->oom) return;
  g->l = run_segs_grow(g->l, &g->lcap, g->nl + 1, sizeof *g->l, &g->oom);
  char *nm = g->oom ? NULL : strdup(name);
  if (!nm) {
    g->oom = 1;
    return;
  }
  g->l[g->nl++] = (run_lseg){nm, (uint64_t)ftello(g->fp[2])};
}

static inline void run_segs_free(struct run_segs *g) {
  for (size_t i = 0; i < g->nl; i++) free(g->l[i].name);
  free(g->t);
  free(g->l);
}

#endif
