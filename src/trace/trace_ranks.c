/* trace_ranks.c: multi-rank traces (trace.h), a folder of rank_0/ .. rank_<R-1>/ single-rank
 * traces. Each rank is opened with trace_dir.c and kept in tr->ranks, so that a step can be
 * loaded one rank at a time; the fp8_trace it gives is the union of the ranks under names
 * `rank_<r>/<name>`. It calls trace_dir.c and trace_util.c only (trace_internal.h).
 */
#include "trace_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static int cmp_size(const void *a, const void *b) {
  size_t x = *(const size_t *)a, y = *(const size_t *)b;
  return x < y ? -1 : x > y;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* One amax.csv name of one rank, renamed. */
typedef struct {
  char *name; /* rank_<r>/<name> */
  size_t rank;
  size_t local; /* index into ranks[rank].amax_names */
} rank_amax_name;

static int cmp_rank_amax_name(const void *a, const void *b) {
  return strcmp(((const rank_amax_name *)a)->name, ((const rank_amax_name *)b)->name);
}

static int cmp_amax_row(const void *a, const void *b) {
  const fp8_amax_row *x = a, *y = b;
  if (x->step != y->step) return x->step < y->step ? -1 : 1;
  if (x->micro != y->micro) return x->micro < y->micro ? -1 : 1;
  return x->tensor < y->tensor ? -1 : x->tensor > y->tensor;
}

/* "rank_<r>/<name>" (malloc'ed; NULL when out of memory). */
static char *rank_name(size_t r, const char *name) {
  size_t n = strlen(name) + 32;
  char *p = malloc(n);
  if (p) snprintf(p, n, "rank_%zu/%s", r, name);
  return p;
}

const char *fp8_trace_split_rank(const char *name, size_t *rank) {
  if (!name || strncmp(name, "rank_", 5) != 0) return NULL;
  const char *slash = strchr(name + 5, '/');
  if (!slash || slash == name + 5 || (size_t)(slash - name) > 5 + 5) return NULL;
  size_t v = 0;
  for (const char *p = name + 5; p < slash; p++) {
    if (*p < '0' || *p > '9') return NULL;
    v = v * 10 + (size_t)(*p - '0');
  }
  if (name[5] == '0' && slash > name + 6) return NULL; /* leading zero: not ours */
  if (v >= FP8_RANK_LIMIT) return NULL;
  if (rank) *rank = v;
  return slash + 1;
}

/* ------------------------------------------------------------------ opening */

/* Opens every rank (dir/rank_<r>, as single-rank traces) into tr->ranks. */
static int open_each(const char *dir, fp8_trace *tr, size_t nranks, char *err, size_t errlen) {
  int rc = FP8_OK;
  char *sub = NULL;
  int all_npy = 1, any_snap = 0;
  for (size_t r = 0; r < nranks; r++) {
    char leaf[32];
    snprintf(leaf, sizeof leaf, "rank_%zu", r);
    free(sub);
    sub = fp8_path_join(dir, leaf);
    if (!sub) {
      rc = FP8_ENOMEM;
      goto done;
    }
    rc = fp8_trace_dir_open(sub, &tr->ranks[r], 0, NULL, NULL, err, errlen);
    if (rc) goto done;
    const fp8_trace *rk = &tr->ranks[r];
    if (rk->nsteps) {
      any_snap = 1;
      all_npy &= rk->is_npy;
    }
  }
  tr->is_npy = any_snap && all_npy;
done:
  free(sub);
  return rc;
}

/* Snapshot steps: the union of the ranks' steps. */
static int union_steps(fp8_trace *tr) {
  size_t total_steps = 0;
  for (size_t r = 0; r < tr->nranks; r++) total_steps += tr->ranks[r].nsteps;
  tr->steps = malloc((total_steps + 1) * sizeof *tr->steps);
  if (!tr->steps) return FP8_ENOMEM;
  for (size_t r = 0; r < tr->nranks; r++) {
    if (!tr->ranks[r].nsteps) continue; /* an amax.csv-only rank */
    memcpy(tr->steps + tr->nsteps, tr->ranks[r].steps, tr->ranks[r].nsteps * sizeof *tr->steps);
    tr->nsteps += tr->ranks[r].nsteps;
  }
  qsort(tr->steps, tr->nsteps, sizeof *tr->steps, cmp_i64);
  size_t w = 0;
  for (size_t i = 0; i < tr->nsteps; i++)
    if (w == 0 || tr->steps[w - 1] != tr->steps[i]) tr->steps[w++] = tr->steps[i];
  tr->nsteps = w;
  return FP8_OK;
}

/* The ranks' amax rows, re-indexed into tr (whose names are names[0..nnames), sorted): rows
 * sorted by step, then micro-batch, then tensor (micro and te_scale travel with each row). The
 * ranks' own rows and names are emptied: amax.csv is kept once in memory. */
static int move_amax_rows(fp8_trace *tr, rank_amax_name *names, size_t nnames,
                          size_t **local_to_global, size_t total_rows) {
  tr->amax = malloc(total_rows * sizeof *tr->amax);
  tr->amax_names = calloc(nnames + 1, sizeof *tr->amax_names);
  if (!tr->amax || !tr->amax_names) return FP8_ENOMEM;
  for (size_t g = 0; g < nnames; g++) {
    local_to_global[names[g].rank][names[g].local] = g;
    tr->amax_names[g] = names[g].name;
    names[g].name = NULL;
  }
  tr->namax_names = nnames;
  for (size_t r = 0; r < tr->nranks; r++) {
    fp8_trace *rk = &tr->ranks[r];
    for (size_t i = 0; i < rk->namax; i++) {
      fp8_amax_row row = rk->amax[i];
      row.tensor = (int32_t)local_to_global[r][row.tensor];
      tr->amax[tr->namax++] = row;
    }
    free(rk->amax);
    rk->amax = NULL;
    rk->namax = 0;
    for (size_t k = 0; k < rk->namax_names; k++) free(rk->amax_names[k]);
    free(rk->amax_names);
    rk->amax_names = NULL;
    rk->namax_names = 0;
  }
  qsort(tr->amax, tr->namax, sizeof *tr->amax, cmp_amax_row);
  return FP8_OK;
}

/* amax.csv: the ranks' names renamed `rank_<r>/<name>` and sorted, their rows moved into tr. */
static int union_amax(const char *dir, fp8_trace *tr, char *err, size_t errlen) {
  int rc = FP8_OK;
  size_t nranks = tr->nranks, total_rows = 0, total_names = 0, nnames = 0;
  rank_amax_name *names = NULL;
  size_t **local_to_global = NULL;
  for (size_t r = 0; r < nranks; r++) {
    total_rows += tr->ranks[r].namax;
    total_names += tr->ranks[r].namax_names;
  }
  if (total_names > (size_t)INT32_MAX)
    return fp8_errorf(FP8_EFORMAT, err, errlen,
                      "%s: too many distinct tensor names in the ranks' amax.csv files", dir);
  names = calloc(total_names + 1, sizeof *names);
  local_to_global = calloc(nranks, sizeof *local_to_global);
  if (!names || !local_to_global) {
    rc = FP8_ENOMEM;
    goto done;
  }
  for (size_t r = 0; r < nranks; r++) {
    const fp8_trace *rk = &tr->ranks[r];
    local_to_global[r] = malloc((rk->namax_names + 1) * sizeof **local_to_global);
    if (!local_to_global[r]) {
      rc = FP8_ENOMEM;
      goto done;
    }
    for (size_t k = 0; k < rk->namax_names; k++) {
      names[nnames].name = rank_name(r, rk->amax_names[k]);
      if (!names[nnames].name) {
        rc = FP8_ENOMEM;
        goto done;
      }
      names[nnames].rank = r;
      names[nnames++].local = k;
    }
  }
  qsort(names, nnames, sizeof *names, cmp_rank_amax_name);
  if (total_rows > 0) rc = move_amax_rows(tr, names, nnames, local_to_global, total_rows);
done:
  if (names)
    for (size_t g = 0; g < nnames; g++) free(names[g].name);
  free(names);
  if (local_to_global)
    for (size_t r = 0; r < nranks; r++) free(local_to_global[r]);
  free(local_to_global);
  return rc;
}

int fp8_trace_ranks_open(const char *dir, fp8_trace *tr, size_t *ranks, size_t nranks,
                         char *err, size_t errlen) {
  qsort(ranks, nranks, sizeof *ranks, cmp_size);
  for (size_t k = 0; k < nranks; k++)
    if (ranks[k] != k)
      return fp8_errorf(FP8_EFORMAT, err, errlen,
                        "%s: rank_%zu/ is missing (found %zu rank folders, up to rank_%zu/; "
                        "expected rank_0/ .. rank_<R-1>/ without gaps)",
                        dir, k, nranks, ranks[nranks - 1]);
  tr->ranks = calloc(nranks, sizeof *tr->ranks);
  if (!tr->ranks) return FP8_ENOMEM;
  tr->nranks = nranks;
  int rc = open_each(dir, tr, nranks, err, errlen);
  if (rc == FP8_OK) rc = union_steps(tr);
  if (rc == FP8_OK) rc = union_amax(dir, tr, err, errlen);
  return rc; /* on error the caller closes tr, ranks included */
}

/* ------------------------------------------------------------------ loading */

int fp8_trace_ranks_load_part(const fp8_trace *tr, size_t i, size_t r, fp8_step *out,
                              char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  if (i >= tr->nsteps)
    return fp8_errorf(FP8_EINVAL, err, errlen, "%s: step index %zu out of range (%zu steps)",
                      tr->dir, i, tr->nsteps);
  if (r >= tr->nranks)
    return fp8_errorf(FP8_EINVAL, err, errlen, "%s: rank %zu out of range (%zu ranks)",
                      tr->dir, r, tr->nranks);
  const fp8_trace *rk = &tr->ranks[r];
  const int64_t *hit = rk->nsteps ? bsearch(&tr->steps[i], rk->steps, rk->nsteps,
                                            sizeof *rk->steps, cmp_i64)
                                  : NULL;
  if (!hit) { /* this rank has no snapshot at that step */
    out->step = tr->steps[i];
    return FP8_OK;
  }
  int rc = fp8_trace_dir_load_step(rk, (size_t)(hit - rk->steps), out, err, errlen);
  if (rc) return rc;
  for (size_t k = 0; k < out->ntensors; k++) {
    char *nm = rank_name(r, out->tensors[k].name);
    if (!nm) {
      fp8_step_free(out);
      return fp8_errorf(FP8_ENOMEM, err, errlen, "%s: out of memory", rk->dir);
    }
    free(out->tensors[k].name);
    out->tensors[k].name = nm; /* one prefix for all: the order by name is kept */
  }
  return FP8_OK;
}

/* Appends rank part `part` (names and mappings) to out; part is left empty and freed. */
static int step_take(fp8_step *out, fp8_step *part) {
  int rc = FP8_OK;
  if (part->ntensors) {
    /* one block append per rank, sized exactly (fp8_grow grows by one element; fp8_step
     * keeps no capacity for its tensors) */
    fp8_tensor_view *nt = realloc(out->tensors, (out->ntensors + part->ntensors) * sizeof *nt);
    if (!nt) {
      fp8_step_free(part);
      return FP8_ENOMEM;
    }
    out->tensors = nt;
    memcpy(out->tensors + out->ntensors, part->tensors, part->ntensors * sizeof *nt);
    out->ntensors += part->ntensors;
    part->ntensors = 0; /* the names now belong to out */
  }
  fp8_step_priv *pv = part->priv;
  size_t moved = 0;
  if (pv) {
    for (; moved < pv->nmaps; moved++)
      if (fp8_step_add_map(out, &pv->maps[moved]) != FP8_OK) {
        rc = FP8_ENOMEM;
        break;
      }
    /* what could not be moved is released with part; what was moved is out's now */
    memmove(pv->maps, pv->maps + moved, (pv->nmaps - moved) * sizeof *pv->maps);
    pv->nmaps -= moved;
  }
  fp8_step_free(part);
  return rc;
}

int fp8_trace_ranks_load_step(const fp8_trace *tr, size_t i, fp8_step *out, char *err,
                              size_t errlen) {
  for (size_t r = 0; r < tr->nranks; r++) { /* every rank's part, renamed, in one step */
    fp8_step part;
    int rc = fp8_trace_ranks_load_part(tr, i, r, &part, err, errlen);
    if (rc == FP8_OK && step_take(out, &part) != FP8_OK)
      rc = fp8_errorf(FP8_ENOMEM, err, errlen, "%s: out of memory", tr->dir);
    if (rc) {
      fp8_step_free(out);
      return rc;
    }
  }
  out->step = tr->steps[i];
  fp8_step_sort(out); /* names are distinct: each carries its rank */
  return FP8_OK;
}
