/* trace.c: opening a trace directory (listing its step_<N> snapshots, reading amax.csv) and
 * loading one snapshot step at a time; also the mapping helpers shared with safetensors.c and
 * npy.c. Only the loaded step is mapped, so memory stays bounded by one step.
 */
#include "trace_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int fp8_trace_err(int status, char *err, size_t errlen, const char *fmt, ...) {
  if (err && errlen > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return status;
}

/* ------------------------------------------------------------------ mappings */

int fp8_map_file(const char *path, fp8_map *m, char *err, size_t errlen) {
  int rc = FP8_OK;
  int fd = -1;
  struct stat st;
  m->addr = NULL;
  m->len = 0;
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    rc = fp8_trace_err(FP8_EIO, err, errlen, "%s: cannot open: %s", path, strerror(errno));
    goto done;
  }
  if (fstat(fd, &st) != 0) {
    rc = fp8_trace_err(FP8_EIO, err, errlen, "%s: cannot stat: %s", path, strerror(errno));
    goto done;
  }
  if (!S_ISREG(st.st_mode)) {
    rc = fp8_trace_err(FP8_EIO, err, errlen, "%s: not a regular file", path);
    goto done;
  }
  if (st.st_size > 0) {
    if ((unsigned long long)st.st_size > (unsigned long long)SIZE_MAX) {
      rc = fp8_trace_err(FP8_EIO, err, errlen, "%s: file too large to map", path);
      goto done;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      rc = fp8_trace_err(FP8_EIO, err, errlen, "%s: cannot mmap %lld bytes: %s", path,
                         (long long)st.st_size, strerror(errno));
      goto done;
    }
    m->addr = p;
    m->len = (size_t)st.st_size;
  }
done:
  if (fd >= 0) close(fd);
  return rc;
}

void fp8_map_release(fp8_map *m) {
  if (m->addr) munmap(m->addr, m->len);
  m->addr = NULL;
  m->len = 0;
}

int fp8_step_add_map(fp8_step *s, const fp8_map *m) {
  fp8_step_priv *pv = s->priv;
  if (!pv) {
    pv = calloc(1, sizeof *pv);
    if (!pv) return FP8_ENOMEM;
    s->priv = pv;
  }
  if (pv->nmaps == pv->cap) {
    size_t cap = pv->cap ? 2 * pv->cap : 4;
    fp8_map *nm = realloc(pv->maps, cap * sizeof *nm);
    if (!nm) return FP8_ENOMEM;
    pv->maps = nm;
    pv->cap = cap;
  }
  pv->maps[pv->nmaps++] = *m;
  return FP8_OK;
}

static int cmp_view(const void *a, const void *b) {
  return strcmp(((const fp8_tensor_view *)a)->name, ((const fp8_tensor_view *)b)->name);
}

long fp8_step_sort(fp8_step *s) {
  if (s->ntensors > 1) qsort(s->tensors, s->ntensors, sizeof *s->tensors, cmp_view);
  for (size_t i = 1; i < s->ntensors; i++)
    if (strcmp(s->tensors[i - 1].name, s->tensors[i].name) == 0) return (long)(i - 1);
  return -1;
}

void fp8_step_free(fp8_step *s) {
  if (!s) return;
  for (size_t i = 0; i < s->ntensors; i++) free(s->tensors[i].name);
  free(s->tensors);
  fp8_step_priv *pv = s->priv;
  if (pv) {
    for (size_t i = 0; i < pv->nmaps; i++) fp8_map_release(&pv->maps[i]);
    free(pv->maps);
    free(pv);
  }
  memset(s, 0, sizeof *s);
}

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

void fp8_trace_close(fp8_trace *tr) {
  if (!tr) return;
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

int fp8_trace_open(const char *dir, fp8_trace *tr, char *err, size_t errlen) {
  int rc = FP8_OK;
  DIR *d = NULL;
  snap *snaps = NULL;
  size_t nsnaps = 0, cap = 0;
  char *path = NULL, *csv = NULL;
  memset(tr, 0, sizeof *tr);
  if (err && errlen) err[0] = '\0';
  if (!dir || !*dir) {
    rc = fp8_trace_err(FP8_EINVAL, err, errlen, "trace directory name is empty");
    goto done;
  }
  tr->dir = strdup(dir);
  if (!tr->dir) {
    rc = FP8_ENOMEM;
    goto done;
  }
  d = opendir(dir);
  if (!d) {
    rc = fp8_trace_err(FP8_EIO, err, errlen, "%s: cannot open trace directory: %s", dir,
                       strerror(errno));
    goto done;
  }
  for (;;) {
    errno = 0;
    struct dirent *e = readdir(d);
    if (!e) {
      if (errno) {
        rc = fp8_trace_err(FP8_EIO, err, errlen, "%s: cannot read directory: %s", dir,
                           strerror(errno));
        goto done;
      }
      break;
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
      rc = fp8_trace_err(FP8_EFORMAT, err, errlen, "%s: %s: step number too large", dir,
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
      rc = fp8_trace_err(FP8_EIO, err, errlen, "%s: cannot stat: %s", path, strerror(errno));
      goto done;
    }
    if (is_npy && !S_ISDIR(st.st_mode)) continue; /* a file called step_7: not ours */
    if (!is_npy && !S_ISREG(st.st_mode)) {
      rc = fp8_trace_err(FP8_EFORMAT, err, errlen, "%s: not a regular file", path);
      goto done;
    }
    if (nsnaps == cap) {
      size_t nc = cap ? 2 * cap : 16;
      snap *ns = realloc(snaps, nc * sizeof *ns);
      if (!ns) {
        rc = FP8_ENOMEM;
        goto done;
      }
      snaps = ns;
      cap = nc;
    }
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
  for (size_t i = 0; i < nsnaps; i++) {
    if (snaps[i].is_npy != snaps[0].is_npy) {
      const snap *st = snaps[i].is_npy ? &snaps[0] : &snaps[i];
      const snap *np = snaps[i].is_npy ? &snaps[i] : &snaps[0];
      rc = fp8_trace_err(FP8_EFORMAT, err, errlen,
                         "%s: mixes safetensors files (%s) and npy folders (%s/); a trace is "
                         "one or the other",
                         dir, st->name, np->name);
      goto done;
    }
    if (i > 0 && snaps[i].step == snaps[i - 1].step) {
      const char *a = snaps[i - 1].name, *b = snaps[i].name;
      if (strcmp(a, b) > 0) { const char *t = a; a = b; b = t; }
      rc = fp8_trace_err(FP8_EFORMAT, err, errlen, "%s: step %lld given twice: %s and %s", dir,
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
    rc = fp8_trace_err(FP8_EIO, err, errlen, "%s: cannot stat: %s", csv, strerror(errno));
    goto done;
  }
  if (have_csv) {
    rc = fp8_amax_csv_read(csv, tr, err, errlen);
    if (rc != FP8_OK) goto done;
  }
  if (nsnaps == 0 && !have_csv) {
    rc = fp8_trace_err(FP8_EFORMAT, err, errlen,
                       "%s: not a trace: no step_<N>.safetensors files, step_<N>/ folders or "
                       "amax.csv",
                       dir);
    goto done;
  }
done:
  if (rc == FP8_ENOMEM && err && errlen && !err[0])
    fp8_trace_err(rc, err, errlen, "%s: out of memory", dir ? dir : "");
  if (d) closedir(d);
  for (size_t i = 0; i < nsnaps; i++) free(snaps[i].name);
  free(snaps);
  free(path);
  free(csv);
  if (rc != FP8_OK) fp8_trace_close(tr);
  return rc;
}

int fp8_trace_load_step(const fp8_trace *tr, size_t i, fp8_step *out, char *err,
                        size_t errlen) {
  int rc;
  memset(out, 0, sizeof *out);
  if (i >= tr->nsteps)
    return fp8_trace_err(FP8_EINVAL, err, errlen, "%s: step index %zu out of range (%zu steps)",
                         tr->dir, i, tr->nsteps);
  if (tr->is_npy)
    rc = fp8_npy_open_step(tr->step_paths[i], out, err, errlen);
  else
    rc = fp8_safetensors_open(tr->step_paths[i], out, err, errlen);
  if (rc == FP8_OK) out->step = tr->steps[i];
  return rc;
}
