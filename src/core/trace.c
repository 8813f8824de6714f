/* trace.c: opening a trace directory (listing its step_<N> snapshots, reading amax.csv) and
 * loading one snapshot step at a time (the helpers it shares with the readers are in the leaf
 * file trace_util.c). Only the loaded step is mapped, so memory stays bounded by one step.
 *
 * A multi-rank trace (a folder of rank_<r>/ single-rank traces) is opened rank by rank; the
 * fp8_trace it gives is the union of the ranks under names `rank_<r>/<name>` (trace.h), with
 * the ranks kept in tr->ranks so that a step can be loaded one rank at a time.
 */
#include "trace_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------ trace directory */

/* One snapshot found while listing the directory. */
typedef struct {
  int64_t step;
  char *name; /* directory entry name */
  int is_npy;
} snap;

static int cmp_snap(const void *a, const void *b) {
  const snap *x = a, *y = b;
  return x->step < y->step ? -1 : x->step > y->step;
}

/* Parses "step_<digits>" followed by `suffix` exactly; returns 1 and the step on a match, 0 if
 * the name does not match, -1 if the digits overflow int64. */
static int parse_step_name(const char *name, const char *suffix, int64_t *step) {
  if (strncmp(name, "step_", 5) != 0) return 0;
  const char *p = name + 5;
  if (*p < '0' || *p > '9') return 0;
  int64_t v = 0;
  int overflow = 0;
  for (; *p >= '0' && *p <= '9'; p++) {
    int d = *p - '0';
    if (v > (INT64_MAX - d) / 10) overflow = 1;
    else v = v * 10 + d;
  }
  if (strcmp(p, suffix) != 0) return 0;
  if (overflow) return -1;
  *step = v;
  return 1;
}

/* Joins dir and name with one '/' (malloc'ed; NULL when out of memory). */
static char *path_join(const char *dir, const char *name) {
  size_t dl = strlen(dir), nl = strlen(name);
  while (dl > 1 && dir[dl - 1] == '/') dl--;
  char *p = malloc(dl + 1 + nl + 1);
  if (!p) return NULL;
  memcpy(p, dir, dl);
  p[dl] = '/';
  memcpy(p + dl + 1, name, nl + 1);
  return p;
}

/* Parses "rank_<digits>" exactly: 1 and the rank on a match, 0 if the name does not match, -1
 * for a leading zero (rank_01: two spellings of one rank would be ambiguous), -2 when the rank
 * is FP8_RANK_LIMIT or more. */
static int parse_rank_name(const char *name, size_t *rank) {
  if (strncmp(name, "rank_", 5) != 0) return 0;
  const char *p = name + 5;
  if (*p < '0' || *p > '9') return 0;
  size_t v = 0;
  int big = 0;
  const char *q = p;
  for (; *q >= '0' && *q <= '9'; q++) {
    if (v >= FP8_RANK_LIMIT) big = 1;
    else v = v * 10 + (size_t)(*q - '0');
  }
  if (*q) return 0;
  if (p[0] == '0' && p[1]) return -1;
  if (big || v >= FP8_RANK_LIMIT) return -2;
  *rank = v;
  return 1;
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

void fp8_trace_close(fp8_trace *tr) {
  if (!tr) return;
  if (tr->ranks)
    for (size_t r = 0; r < tr->nranks; r++) fp8_trace_close(&tr->ranks[r]);
  free(tr->ranks);
  free(tr->dir);
  free(tr->steps);
  if (tr->step_paths)
    for (size_t i = 0; i < tr->nsteps; i++) free(tr->step_paths[i]);
  free(tr->step_paths);
  free(tr->amax);
  if (tr->amax_names)
    for (size_t i = 0; i < tr->namax_names; i++) free(tr->amax_names[i]);
  free(tr->amax_names);
  memset(tr, 0, sizeof *tr);
}

static int open_ranks(const char *dir, fp8_trace *tr, size_t *ranks, size_t nranks, char *err,
                      size_t errlen);

/* Opens dir as a trace; with allow_ranks, a folder of rank_<r>/ sub-folders is a multi-rank
 * trace (the ranks themselves are opened without: their rank_* entries are not looked at). */
static int open_dir(const char *dir, fp8_trace *tr, int allow_ranks, char *err, size_t errlen) {
  int rc = FP8_OK;
  DIR *d = NULL;
  snap *snaps = NULL;
  size_t nsnaps = 0, cap = 0;
  size_t *ranks = NULL, nranks = 0, capranks = 0;
  char *path = NULL, *csv = NULL;
  memset(tr, 0, sizeof *tr);
  if (err && errlen) err[0] = '\0';
  if (!dir || !*dir) {
    rc = fp8_errorf(FP8_EINVAL, err, errlen, "trace directory name is empty");
    goto done;
  }
  tr->dir = strdup(dir);
  if (!tr->dir) {
    rc = FP8_ENOMEM;
    goto done;
  }
  d = opendir(dir);
  if (!d) {
    rc = fp8_errorf(FP8_EIO, err, errlen, "%s: cannot open trace directory: %s", dir,
                       strerror(errno));
    goto done;
  }
  for (;;) {
    errno = 0;
    struct dirent *e = readdir(d);
    if (!e) {
      if (errno) {
        rc = fp8_errorf(FP8_EIO, err, errlen, "%s: cannot read directory: %s", dir,
                           strerror(errno));
        goto done;
      }
      break;
    }
    if (allow_ranks && strncmp(e->d_name, "rank_", 5) == 0) {
      size_t rk = 0;
      int mr = parse_rank_name(e->d_name, &rk);
      if (mr == 0) continue;
      free(path);
      path = path_join(dir, e->d_name);
      if (!path) {
        rc = FP8_ENOMEM;
        goto done;
      }
      struct stat rst;
      if (stat(path, &rst) != 0) {
        rc = fp8_errorf(FP8_EIO, err, errlen, "%s: cannot stat: %s", path, strerror(errno));
        goto done;
      }
      if (!S_ISDIR(rst.st_mode)) continue; /* a file called rank_3: not ours */
      if (mr == -1) {
        rc = fp8_errorf(FP8_EFORMAT, err, errlen,
                           "%s: %s/: a rank folder is named rank_<r> with r written without "
                           "leading zeros",
                           dir, e->d_name);
        goto done;
      }
      if (mr < 0) {
        rc = fp8_errorf(FP8_EFORMAT, err, errlen,
                           "%s: %s/: rank number too large (rank folders go up to rank_%d/)", dir,
                           e->d_name, FP8_RANK_LIMIT - 1);
        goto done;
      }
      size_t *nr = fp8_grow(ranks, nranks, &capranks, sizeof *ranks, 16);
      if (!nr) {
        rc = FP8_ENOMEM;
        goto done;
      }
      ranks = nr;
      ranks[nranks++] = rk;
      continue;
    }
    int64_t step = 0;
    int is_npy;
    int m = parse_step_name(e->d_name, ".safetensors", &step);
    if (m != 0) {
      is_npy = 0;
    } else {
      m = parse_step_name(e->d_name, "", &step);
      is_npy = 1;
    }
    if (m == 0) continue;
    if (m < 0) {
      rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s: %s: step number too large", dir,
                         e->d_name);
      goto done;
    }
    free(path);
    path = path_join(dir, e->d_name);
    if (!path) {
      rc = FP8_ENOMEM;
      goto done;
    }
    struct stat st;
    if (stat(path, &st) != 0) {
      rc = fp8_errorf(FP8_EIO, err, errlen, "%s: cannot stat: %s", path, strerror(errno));
      goto done;
    }
    if (is_npy && !S_ISDIR(st.st_mode)) continue; /* a file called step_7: not ours */
    if (!is_npy && !S_ISREG(st.st_mode)) {
      rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s: not a regular file", path);
      goto done;
    }
    snap *ns = fp8_grow(snaps, nsnaps, &cap, sizeof *snaps, 16);
    if (!ns) {
      rc = FP8_ENOMEM;
      goto done;
    }
    snaps = ns;
    snaps[nsnaps].step = step;
    snaps[nsnaps].is_npy = is_npy;
    snaps[nsnaps].name = strdup(e->d_name);
    if (!snaps[nsnaps].name) {
      rc = FP8_ENOMEM;
      goto done;
    }
    nsnaps++;
  }
  if (nsnaps > 1) qsort(snaps, nsnaps, sizeof *snaps, cmp_snap);
  if (nranks > 0) {
    /* a folder of ranks: nothing of a single-rank trace may sit beside them */
    const char *direct = nsnaps ? snaps[0].name : NULL;
    struct stat ast;
    free(csv);
    csv = path_join(dir, "amax.csv");
    if (!csv) {
      rc = FP8_ENOMEM;
      goto done;
    }
    if (!direct && stat(csv, &ast) == 0) direct = "amax.csv";
    if (direct) {
      size_t lo = ranks[0];
      for (size_t k = 1; k < nranks; k++)
        if (ranks[k] < lo) lo = ranks[k];
      rc = fp8_errorf(FP8_EFORMAT, err, errlen,
                         "%s: holds both a single-rank trace (%s%s) and rank folders (rank_%zu/); "
                         "a trace is one or the other",
                         dir, direct, nsnaps && snaps[0].is_npy ? "/" : "", lo);
      goto done;
    }
    rc = open_ranks(dir, tr, ranks, nranks, err, errlen);
    goto done;
  }
  for (size_t i = 0; i < nsnaps; i++) {
    if (snaps[i].is_npy != snaps[0].is_npy) {
      const snap *st = snaps[i].is_npy ? &snaps[0] : &snaps[i];
      const snap *np = snaps[i].is_npy ? &snaps[i] : &snaps[0];
      rc = fp8_errorf(FP8_EFORMAT, err, errlen,
                         "%s: mixes safetensors files (%s) and npy folders (%s/); a trace is "
                         "one or the other",
                         dir, st->name, np->name);
      goto done;
    }
    if (i > 0 && snaps[i].step == snaps[i - 1].step) {
      const char *a = snaps[i - 1].name, *b = snaps[i].name;
      if (strcmp(a, b) > 0) { const char *t = a; a = b; b = t; }
      rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s: step %lld given twice: %s and %s", dir,
                         (long long)snaps[i].step, a, b);
      goto done;
    }
  }
  if (nsnaps > 0) {
    tr->is_npy = snaps[0].is_npy;
    tr->steps = calloc(nsnaps, sizeof *tr->steps);
    tr->step_paths = calloc(nsnaps, sizeof *tr->step_paths);
    if (!tr->steps || !tr->step_paths) {
      rc = FP8_ENOMEM;
      goto done;
    }
    for (size_t i = 0; i < nsnaps; i++) {
      tr->steps[i] = snaps[i].step;
      tr->step_paths[i] = path_join(dir, snaps[i].name);
      tr->nsteps = i + 1; /* so that close frees what is there */
      if (!tr->step_paths[i]) {
        rc = FP8_ENOMEM;
        goto done;
      }
    }
  }
  csv = path_join(dir, "amax.csv");
  if (!csv) {
    rc = FP8_ENOMEM;
    goto done;
  }
  struct stat cst;
  int have_csv = stat(csv, &cst) == 0;
  if (!have_csv && errno != ENOENT) {
    rc = fp8_errorf(FP8_EIO, err, errlen, "%s: cannot stat: %s", csv, strerror(errno));
    goto done;
  }
  if (have_csv) {
    rc = fp8_amax_csv_read(csv, tr, err, errlen);
    if (rc != FP8_OK) goto done;
  }
  if (nsnaps == 0 && !have_csv) {
    rc = fp8_errorf(FP8_EFORMAT, err, errlen,
                       allow_ranks ? "%s: not a trace: no step_<N>.safetensors files, step_<N>/ "
                                     "folders, amax.csv or rank_<r>/ folders"
                                   : "%s: not a trace: no step_<N>.safetensors files, step_<N>/ "
                                     "folders or amax.csv",
                       dir);
    goto done;
  }
done:
  if (rc == FP8_ENOMEM && err && errlen && !err[0])
    fp8_errorf(rc, err, errlen, "%s: out of memory", dir ? dir : "");
  if (d) closedir(d);
  for (size_t i = 0; i < nsnaps; i++) free(snaps[i].name);
  free(snaps);
  free(ranks);
  free(path);
  free(csv);
  if (rc != FP8_OK) fp8_trace_close(tr);
  return rc;
}

int fp8_trace_open(const char *dir, fp8_trace *tr, char *err, size_t errlen) {
  return open_dir(dir, tr, 1, err, errlen);
}

/* ------------------------------------------------------------------ multi-rank traces */

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
  return x->tensor < y->tensor ? -1 : x->tensor > y->tensor;
}

/* Opens rank_0 .. rank_<R-1> of dir (ranks: the rank numbers found, in any order) into tr,
 * whose dir is set, and builds the union view: steps of every rank, amax.csv rows of every rank
 * under `rank_<r>/` names. The ranks' own amax rows move into the union (theirs are emptied):
 * amax.csv is kept once in memory. */
static int open_ranks(const char *dir, fp8_trace *tr, size_t *ranks, size_t nranks, char *err,
                      size_t errlen) {
  int rc = FP8_OK;
  char *sub = NULL;
  rank_amax_name *names = NULL;
  size_t nnames = 0, **local_to_global = NULL;
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
  size_t total_steps = 0, total_rows = 0, total_names = 0;
  int all_npy = 1, any_snap = 0;
  for (size_t r = 0; r < nranks; r++) {
    char leaf[32];
    snprintf(leaf, sizeof leaf, "rank_%zu", r);
    free(sub);
    sub = path_join(dir, leaf);
    if (!sub) {
      rc = FP8_ENOMEM;
      goto done;
    }
    rc = open_dir(sub, &tr->ranks[r], 0, err, errlen);
    if (rc) goto done;
    const fp8_trace *rk = &tr->ranks[r];
    total_steps += rk->nsteps;
    total_rows += rk->namax;
    total_names += rk->namax_names;
    if (rk->nsteps) {
      any_snap = 1;
      all_npy &= rk->is_npy;
    }
  }
  tr->is_npy = any_snap && all_npy;

  /* snapshot steps: the union */
  tr->steps = malloc((total_steps + 1) * sizeof *tr->steps);
  if (!tr->steps) {
    rc = FP8_ENOMEM;
    goto done;
  }
  for (size_t r = 0; r < nranks; r++) {
    if (!tr->ranks[r].nsteps) continue; /* an amax.csv-only rank */
    memcpy(tr->steps + tr->nsteps, tr->ranks[r].steps, tr->ranks[r].nsteps * sizeof *tr->steps);
    tr->nsteps += tr->ranks[r].nsteps;
  }
  qsort(tr->steps, tr->nsteps, sizeof *tr->steps, cmp_i64);
  size_t w = 0;
  for (size_t i = 0; i < tr->nsteps; i++)
    if (w == 0 || tr->steps[w - 1] != tr->steps[i]) tr->steps[w++] = tr->steps[i];
  tr->nsteps = w;

  /* amax.csv: names renamed and sorted, rows re-indexed and sorted by step, then tensor */
  if (total_names > (size_t)INT32_MAX) {
    rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s: too many distinct tensor names in the ranks' "
                       "amax.csv files", dir);
    goto done;
  }
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
  if (total_rows > 0) {
    tr->amax = malloc(total_rows * sizeof *tr->amax);
    tr->amax_names = calloc(nnames + 1, sizeof *tr->amax_names);
    if (!tr->amax || !tr->amax_names) {
      rc = FP8_ENOMEM;
      goto done;
    }
    for (size_t g = 0; g < nnames; g++) {
      local_to_global[names[g].rank][names[g].local] = g;
      tr->amax_names[g] = names[g].name;
      names[g].name = NULL;
    }
    tr->namax_names = nnames;
    for (size_t r = 0; r < nranks; r++) {
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
  }
done:
  free(sub);
  if (names)
    for (size_t g = 0; g < nnames; g++) free(names[g].name);
  free(names);
  if (local_to_global)
    for (size_t r = 0; r < nranks; r++) free(local_to_global[r]);
  free(local_to_global);
  return rc; /* on error the caller closes tr, ranks included */
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
  int rc = fp8_trace_load_step(rk, (size_t)(hit - rk->steps), out, err, errlen);
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

int fp8_trace_load_step(const fp8_trace *tr, size_t i, fp8_step *out, char *err,
                        size_t errlen) {
  int rc;
  memset(out, 0, sizeof *out);
  if (i >= tr->nsteps)
    return fp8_errorf(FP8_EINVAL, err, errlen, "%s: step index %zu out of range (%zu steps)",
                         tr->dir, i, tr->nsteps);
  if (tr->nranks) { /* every rank's part, renamed, in one step */
    for (size_t r = 0; r < tr->nranks; r++) {
      fp8_step part;
      rc = fp8_trace_load_step_rank(tr, i, r, &part, err, errlen);
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
  if (tr->is_npy)
    rc = fp8_npy_open_step(tr->step_paths[i], out, err, errlen);
  else
    rc = fp8_safetensors_open(tr->step_paths[i], out, err, errlen);
  if (rc == FP8_OK) out->step = tr->steps[i];
  return rc;
}
