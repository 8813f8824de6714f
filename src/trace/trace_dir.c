/* trace_dir.c: one single-rank trace directory (trace.h): listing its step_<N>.safetensors
 * files or step_<N>/ npy folders, reading its amax.csv and tokens.csv (whose GEMMs must have
 * tensors in the trace), and loading one of its snapshots with the readers (safetensors.c,
 * npy.c, amaxcsv.c, tokenscsv.c). For trace.c it also notices rank_<r>/
 * folders and hands their numbers back instead of opening them, so that the multi-rank side
 * (trace_ranks.c) calls this file and never the other way round (trace_internal.h).
 */
#include "trace_internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util.h"

/* One snapshot found while listing the directory. */
typedef struct {
  int64_t step;
  char *name; /* directory entry name */
  int is_npy;
} snap;

/* What listing a directory found: snapshots and (with allow_ranks) rank folders. */
typedef struct {
  snap *snaps;
  size_t nsnaps, cap;
  size_t *ranks;
  size_t nranks, capranks;
  char *path; /* scratch: the entry being looked at */
} listing;

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

int fp8_trace_snapshot_name(const char *name) {
  int64_t step;
  if (parse_step_name(name, ".safetensors", &step) != 0) return 1;
  return parse_step_name(name, "", &step) != 0 ? 2 : 0;
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

/* ------------------------------------------------------------------ listing */

/* An entry named rank_*: recorded when it is a rank folder (files and other rank_* names are
 * not ours). */
static int list_rank(const char *dir, const char *name, listing *ls, char *err, size_t errlen) {
  size_t rk = 0;
  int mr = parse_rank_name(name, &rk);
  if (mr == 0) return FP8_OK;
  free(ls->path);
  ls->path = fp8_path_join(dir, name);
  if (!ls->path) return FP8_ENOMEM;
  struct stat rst;
  if (stat(ls->path, &rst) != 0)
    return fp8_errorf(FP8_EIO, err, errlen, "%s: cannot stat: %s", ls->path, strerror(errno));
  if (!S_ISDIR(rst.st_mode)) return FP8_OK; /* a file called rank_3: not ours */
  if (mr == -1)
    return fp8_errorf(FP8_EFORMAT, err, errlen,
                      "%s: %s/: a rank folder is named rank_<r> with r written without "
                      "leading zeros",
                      dir, name);
  if (mr < 0)
    return fp8_errorf(FP8_EFORMAT, err, errlen,
                      "%s: %s/: rank number too large (rank folders go up to rank_%d/)", dir,
                      name, FP8_RANK_LIMIT - 1);
  size_t *nr = fp8_grow(ls->ranks, ls->nranks, &ls->capranks, sizeof *ls->ranks, 16);
  if (!nr) return FP8_ENOMEM;
  ls->ranks = nr;
  ls->ranks[ls->nranks++] = rk;
  return FP8_OK;
}

/* Any other entry: recorded when it is a step_<N>.safetensors file or a step_<N>/ folder. */
static int list_step(const char *dir, const char *name, listing *ls, char *err, size_t errlen) {
  int64_t step = 0;
  int is_npy;
  int m = parse_step_name(name, ".safetensors", &step);
  if (m != 0) {
    is_npy = 0;
  } else {
    m = parse_step_name(name, "", &step);
    is_npy = 1;
  }
  if (m == 0) return FP8_OK;
  if (m < 0)
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: %s: step number too large", dir, name);
  free(ls->path);
  ls->path = fp8_path_join(dir, name);
  if (!ls->path) return FP8_ENOMEM;
  struct stat st;
  if (stat(ls->path, &st) != 0)
    return fp8_errorf(FP8_EIO, err, errlen, "%s: cannot stat: %s", ls->path, strerror(errno));
  if (is_npy && !S_ISDIR(st.st_mode)) return FP8_OK; /* a file called step_7: not ours */
  if (!is_npy && !S_ISREG(st.st_mode))
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: not a regular file", ls->path);
  snap *ns = fp8_grow(ls->snaps, ls->nsnaps, &ls->cap, sizeof *ls->snaps, 16);
  if (!ns) return FP8_ENOMEM;
  ls->snaps = ns;
  ls->snaps[ls->nsnaps].step = step;
  ls->snaps[ls->nsnaps].is_npy = is_npy;
  ls->snaps[ls->nsnaps].name = strdup(name);
  if (!ls->snaps[ls->nsnaps].name) return FP8_ENOMEM;
  ls->nsnaps++;
  return FP8_OK;
}

/* Reads the whole directory into ls (snapshots sorted by step). */
static int list_dir(const char *dir, int allow_ranks, listing *ls, char *err, size_t errlen) {
  int rc = FP8_OK;
  DIR *d = opendir(dir);
  if (!d)
    return fp8_errorf(FP8_EIO, err, errlen, "%s: cannot open trace directory: %s", dir,
                      strerror(errno));
  for (;;) {
    errno = 0;
    struct dirent *e = readdir(d);
    if (!e) {
      if (errno)
        rc = fp8_errorf(FP8_EIO, err, errlen, "%s: cannot read directory: %s", dir,
                        strerror(errno));
      break;
    }
    if (allow_ranks && strncmp(e->d_name, "rank_", 5) == 0)
      rc = list_rank(dir, e->d_name, ls, err, errlen);
    else
      rc = list_step(dir, e->d_name, ls, err, errlen);
    if (rc != FP8_OK) break;
  }
  closedir(d);
  if (rc == FP8_OK && ls->nsnaps > 1) qsort(ls->snaps, ls->nsnaps, sizeof *ls->snaps, cmp_snap);
  return rc;
}

/* A folder of ranks: nothing of a single-rank trace may sit beside them. */
static int check_only_ranks(const char *dir, const listing *ls, char *err, size_t errlen) {
  const char *direct = ls->nsnaps ? ls->snaps[0].name : NULL;
  static const char *const side[2] = {"amax.csv", "tokens.csv"}; /* a rank's own files */
  for (int k = 0; k < 2 && !direct; k++) {
    struct stat ast;
    char *csv = fp8_path_join(dir, side[k]);
    if (!csv) return FP8_ENOMEM;
    if (stat(csv, &ast) == 0) direct = side[k];
    free(csv);
  }
  if (!direct) return FP8_OK;
  size_t lo = ls->ranks[0];
  for (size_t k = 1; k < ls->nranks; k++)
    if (ls->ranks[k] < lo) lo = ls->ranks[k];
  return fp8_errorf(FP8_EFORMAT, err, errlen,
                    "%s: holds both a single-rank trace (%s%s) and rank folders (rank_%zu/); "
                    "a trace is one or the other",
                    dir, direct, ls->nsnaps && ls->snaps[0].is_npy ? "/" : "", lo);
}

/* The snapshots are all of one kind, with distinct steps; into tr->steps and step_paths. */
static int take_snaps(const char *dir, const listing *ls, fp8_trace *tr, char *err,
                      size_t errlen) {
  const snap *snaps = ls->snaps;
  size_t nsnaps = ls->nsnaps;
  for (size_t i = 0; i < nsnaps; i++) {
    if (snaps[i].is_npy != snaps[0].is_npy) {
      const snap *st = snaps[i].is_npy ? &snaps[0] : &snaps[i];
      const snap *np = snaps[i].is_npy ? &snaps[i] : &snaps[0];
      return fp8_errorf(FP8_EFORMAT, err, errlen,
                        "%s: mixes safetensors files (%s) and npy folders (%s/); a trace is "
                        "one or the other",
                        dir, st->name, np->name);
    }
    if (i > 0 && snaps[i].step == snaps[i - 1].step) {
      const char *a = snaps[i - 1].name, *b = snaps[i].name;
      if (strcmp(a, b) > 0) { const char *t = a; a = b; b = t; }
      return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: step %lld given twice: %s and %s", dir,
                        (long long)snaps[i].step, a, b);
    }
  }
  if (nsnaps == 0) return FP8_OK;
  tr->is_npy = snaps[0].is_npy;
  tr->steps = calloc(nsnaps, sizeof *tr->steps);
  tr->step_paths = calloc(nsnaps, sizeof *tr->step_paths);
  if (!tr->steps || !tr->step_paths) return FP8_ENOMEM;
  for (size_t i = 0; i < nsnaps; i++) {
    tr->steps[i] = snaps[i].step;
    tr->step_paths[i] = fp8_path_join(dir, snaps[i].name);
    tr->nsteps = i + 1; /* so that close frees what is there */
    if (!tr->step_paths[i]) return FP8_ENOMEM;
  }
  return FP8_OK;
}

/* dir/amax.csv, when there is one, into tr; a directory with neither snapshots nor amax.csv
 * is not a trace. */
static int take_amax(const char *dir, int allow_ranks, fp8_trace *tr, char *err,
                     size_t errlen) {
  int rc = FP8_OK;
  char *csv = fp8_path_join(dir, "amax.csv");
  if (!csv) return FP8_ENOMEM;
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
  if (tr->nsteps == 0 && !have_csv)
    rc = fp8_errorf(FP8_EFORMAT, err, errlen,
                    allow_ranks ? "%s: not a trace: no step_<N>.safetensors files, step_<N>/ "
                                  "folders, amax.csv or rank_<r>/ folders"
                                : "%s: not a trace: no step_<N>.safetensors files, step_<N>/ "
                                  "folders or amax.csv",
                    dir);
done:
  free(csv);
  return rc;
}

/* Every GEMM of tr->tokens has a tensor `<gemm>.<role>` in amax.csv or a snapshot (the
 * snapshots are read, one at a time, only while some GEMM is not found): else the error names
 * the first line of the first such GEMM. */
static int check_token_gemms(const char *csv, fp8_trace *tr, char *err, size_t errlen) {
  const fp8_tokens_table *t = &tr->tokens;
  unsigned char *found = calloc(t->ngemms + 1, 1);
  if (!found) return FP8_ENOMEM;
  fp8_tokens_find_tensors(t, (const char *const *)tr->amax_names, tr->namax_names, found);
  size_t left = 0;
  for (size_t g = 0; g < t->ngemms; g++) left += !found[g];
  int rc = FP8_OK;
  const char **names = NULL;
  for (size_t i = 0; left && i < tr->nsteps && rc == FP8_OK; i++) {
    fp8_step s;
    if ((rc = fp8_trace_dir_load_step(tr, i, &s, err, errlen)) != FP8_OK) break;
    const char **nn = realloc(names, (s.ntensors + 1) * sizeof *names);
    if (!nn) rc = FP8_ENOMEM;
    else names = nn;
    for (size_t k = 0; !rc && k < s.ntensors; k++) names[k] = s.tensors[k].name;
    if (!rc) fp8_tokens_find_tensors(t, names, s.ntensors, found); /* sorted by name */
    fp8_step_free(&s);
    left = 0;
    for (size_t g = 0; g < t->ngemms; g++) left += !found[g];
  }
  free(names);
  if (rc == FP8_OK && left) {
    uint32_t line = UINT32_MAX; /* the GEMM first named in the file */
    int32_t gm = -1;
    for (size_t i = 0; i < t->nrows; i++)
      if (!found[t->rows[i].gemm] && t->rows[i].line < line) {
        line = t->rows[i].line;
        gm = t->rows[i].gemm;
      }
    char shown[FP8_ESC_LEN];
    fp8_esc(t->gemms[gm], shown, sizeof shown);
    rc = fp8_errorf(FP8_EFORMAT, err, errlen,
                    "%s:%u: gemm %s has no tensor in the trace (no %s.<role> in amax.csv or the "
                    "snapshots)",
                    csv, line, shown, shown);
  }
  free(found);
  return rc;
}

/* dir/tokens.csv, when there is one, into tr (after the snapshots and amax.csv it is checked
 * against). */
static int take_tokens(const char *dir, fp8_trace *tr, char *err, size_t errlen) {
  char *csv = fp8_path_join(dir, "tokens.csv");
  if (!csv) return FP8_ENOMEM;
  struct stat cst;
  int rc = FP8_OK;
  if (stat(csv, &cst) != 0) {
    if (errno != ENOENT)
      rc = fp8_errorf(FP8_EIO, err, errlen, "%s: cannot stat: %s", csv, strerror(errno));
  } else if ((rc = fp8_tokens_csv_read(csv, &tr->tokens, err, errlen)) == FP8_OK) {
    tr->has_tokens = 1;
    rc = check_token_gemms(csv, tr, err, errlen);
  }
  free(csv);
  return rc;
}

/* ------------------------------------------------------------------ public to trace*.c */

int fp8_trace_dir_open(const char *dir, fp8_trace *tr, int allow_ranks, size_t **ranks,
                       size_t *nranks, char *err, size_t errlen) {
  int rc = FP8_OK;
  listing ls;
  memset(&ls, 0, sizeof ls);
  memset(tr, 0, sizeof *tr);
  if (nranks) *nranks = 0;
  if (ranks) *ranks = NULL;
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
  rc = list_dir(dir, allow_ranks, &ls, err, errlen);
  if (rc != FP8_OK) goto done;
  if (ls.nranks > 0) {
    rc = check_only_ranks(dir, &ls, err, errlen);
    if (rc != FP8_OK) goto done;
    *ranks = ls.ranks; /* the caller opens them */
    *nranks = ls.nranks;
    ls.ranks = NULL;
    goto done;
  }
  rc = take_snaps(dir, &ls, tr, err, errlen);
  if (rc != FP8_OK) goto done;
  rc = take_amax(dir, allow_ranks, tr, err, errlen);
  if (rc == FP8_OK) rc = take_tokens(dir, tr, err, errlen);
done:
  if (rc == FP8_ENOMEM && err && errlen && !err[0])
    fp8_errorf(rc, err, errlen, "%s: out of memory", dir ? dir : "");
  for (size_t i = 0; i < ls.nsnaps; i++) free(ls.snaps[i].name);
  free(ls.snaps);
  free(ls.ranks);
  free(ls.path);
  if (rc != FP8_OK) fp8_trace_close(tr);
  return rc;
}

int fp8_trace_dir_load_step(const fp8_trace *tr, size_t i, fp8_step *out, char *err,
                            size_t errlen) {
  int rc;
  if (tr->is_npy)
    rc = fp8_npy_open_step(tr->step_paths[i], out, err, errlen);
  else
    rc = fp8_safetensors_open(tr->step_paths[i], out, err, errlen);
  if (rc == FP8_OK) out->step = tr->steps[i];
  return rc;
}
