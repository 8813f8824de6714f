/* trace_util.c: the helpers that the trace files (trace.c, trace_dir.c, trace_ranks.c) and the
 * readers (safetensors.c, npy.c, amaxcsv.c) share: read-only file mappings, the bookkeeping of
 * a loaded step, path joining, and freeing a trace. A leaf: it calls nothing of the trace files
 * or of the readers, so the readers never call back into the trace files. */
#include "trace_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "outfile.h" /* fp8_open_regular */
#include "util.h"

/* ------------------------------------------------------------------ paths and traces */

char *fp8_path_join(const char *dir, const char *name) {
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
  fp8_tokens_free(&tr->tokens);
  if (tr->te_tensor_names)
    for (size_t i = 0; i < tr->nte_tensors; i++) free(tr->te_tensor_names[i]);
  free(tr->te_tensor_names);
  free(tr->te_tensor_intervals);
  memset(tr, 0, sizeof *tr);
}

void fp8_tokens_free(fp8_tokens_table *t) {
  if (!t) return;
  free(t->rows);
  if (t->gemms)
    for (size_t i = 0; i < t->ngemms; i++) free(t->gemms[i]);
  free(t->gemms);
  memset(t, 0, sizeof *t);
}

/* ------------------------------------------------------------------ mappings */

int fp8_map_file(const char *path, fp8_map *m, char *err, size_t errlen) {
  int rc = FP8_OK;
  int fd = -1;
  struct stat st;
  m->addr = NULL;
  m->len = 0;
  fd = fp8_open_regular(path, err, errlen); /* a FIFO: "not a regular file", never a wait */
  if (fd < 0) {
    rc = FP8_EIO;
    goto done;
  }
  if (fstat(fd, &st) != 0) {
    rc = fp8_errorf(FP8_EIO, err, errlen, "%s: cannot stat: %s", path, strerror(errno));
    goto done;
  }
  if (st.st_size > 0) {
    if ((unsigned long long)st.st_size > (unsigned long long)SIZE_MAX) {
      rc = fp8_errorf(FP8_EIO, err, errlen, "%s: file too large to map", path);
      goto done;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      rc = fp8_errorf(FP8_EIO, err, errlen, "%s: cannot mmap %lld bytes: %s", path,
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
  fp8_map *nm = fp8_grow(pv->maps, pv->nmaps, &pv->cap, sizeof *nm, 4);
  if (!nm) return FP8_ENOMEM;
  pv->maps = nm;
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

/* ------------------------------------------------------------------ tensor names */

int fp8_tensor_name_check(const char *name, size_t len, size_t max, char *why, size_t whylen) {
  char shown[16];
  if (len == 0) return fp8_errorf(-1, why, whylen, "name is empty");
  if (len > max) return fp8_errorf(-1, why, whylen, "name is %zu bytes long, at most %zu", len, max);
  const unsigned char *p = (const unsigned char *)name;
  for (size_t i = 0; i < len;) {
    unsigned cp;
    size_t n = fp8_utf8_decode(p + i, len - i, &cp);
    if (!n) return fp8_errorf(-1, why, whylen, "name is not valid UTF-8 at byte %zu", i);
    if (fp8_is_control(cp))
      return fp8_errorf(-1, why, whylen, "name holds the control character %s at byte %zu",
                        fp8_escape(name + i, n, shown, sizeof shown), i);
    i += n;
  }
  if (name[0] == '/') return fp8_errorf(-1, why, whylen, "name starts with '/'");
  /* a ".." segment: ".." between the start or a '/' and the end or a '/' */
  for (size_t i = 0; i + 1 < len; i++)
    if (name[i] == '.' && name[i + 1] == '.' && (i == 0 || name[i - 1] == '/') &&
        (i + 2 == len || name[i + 2] == '/'))
      return fp8_errorf(-1, why, whylen, "name has a '..' path segment");
  return 0;
}

void fp8_tensor_file_stem(const char *name, char *out, size_t n) {
  size_t k = 0;
  for (; *name && k + 1 < n; name++) {
    char ch = *name;
    int keep = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
               ch == '-' || ch == '.';
    out[k++] = keep ? ch : '_';
  }
  if (n) out[k] = '\0';
}

/* One name and its stem, for sorting by stem. */
typedef struct {
  const char *name;
  char stem[FP8_NAME_MAX + FP8_RANK_PREFIX_MAX + 2];
} stem_entry;

static int cmp_stem(const void *a, const void *b) {
  const stem_entry *x = a, *y = b;
  int c = strcmp(x->stem, y->stem);
  return c ? c : strcmp(x->name, y->name);
}

int fp8_tensor_files_distinct(const char *const *names, size_t n, const char *where, char *err,
                              size_t errlen) {
  if (n < 2) return FP8_OK;
  stem_entry *e = malloc(n * sizeof *e);
  if (!e) return fp8_errorf(FP8_ENOMEM, err, errlen, "%s: out of memory", where);
  for (size_t i = 0; i < n; i++) {
    e[i].name = names[i];
    fp8_tensor_file_stem(names[i], e[i].stem, sizeof e[i].stem);
  }
  qsort(e, n, sizeof *e, cmp_stem);
  int rc = FP8_OK;
  /* the first pair in strcmp order of the first name: scan all, keep the smallest */
  const stem_entry *a = NULL, *b = NULL;
  for (size_t i = 1; i < n; i++)
    if (strcmp(e[i - 1].stem, e[i].stem) == 0 && strcmp(e[i - 1].name, e[i].name) != 0 &&
        (!a || strcmp(e[i - 1].name, a->name) < 0))
      a = &e[i - 1], b = &e[i];
  if (a) {
    char sa[FP8_ESC_LEN], sb[FP8_ESC_LEN], ss[FP8_ESC_LEN];
    rc = fp8_errorf(FP8_EFORMAT, err, errlen,
                    "%s: tensors %s and %s would both be drawn as plots/amax_%s.png; rename one",
                    where, fp8_esc(a->name, sa, sizeof sa), fp8_esc(b->name, sb, sizeof sb),
                    fp8_esc(a->stem, ss, sizeof ss));
  }
  free(e);
  return rc;
}

/* ------------------------------------------------------------------ Mixture-of-Experts names */

/* 1 when the dotted component of name at [b, e) is s. */
static int comp_is(const char *name, size_t b, size_t e, const char *s) {
  size_t n = strlen(s);
  return e - b == n && memcmp(name + b, s, n) == 0;
}

static int comp_digits(const char *name, size_t b, size_t e) {
  if (e == b || e - b > 9) return 0;
  for (size_t i = b; i < e; i++)
    if (name[i] < '0' || name[i] > '9') return 0;
  return 1;
}

int fp8_expert_of(const char *name, int32_t *expert, char *group, size_t groupcap) {
  size_t len = strlen(name), found_b = 0, found_e = 0;
  int found = 0;
  size_t pb = 0, pe = 0; /* the previous component */
  int have_prev = 0;
  for (size_t b = 0; b <= len;) {
    size_t e = b;
    while (e < len && name[e] != '.') e++;
    if (have_prev && comp_is(name, pb, pe, "experts") && comp_digits(name, b, e)) {
      found = 1;
      found_b = b;
      found_e = e;
    }
    pb = b;
    pe = e;
    have_prev = 1;
    b = e + 1;
  }
  if (!found) return 0;
  if (expert) {
    int32_t v = 0;
    for (size_t i = found_b; i < found_e; i++) v = v * 10 + (name[i] - '0');
    *expert = v;
  }
  if (group && groupcap) {
    snprintf(group, groupcap, "%.*s*%s", (int)found_b, name, name + found_e);
  }
  return 1;
}

int fp8_router_of(const char *gemm, const char *const *names, size_t n) {
  const char *dot = strrchr(gemm, '.');
  const char *last = dot ? dot + 1 : gemm;
  if (strcmp(last, "gate") != 0 && strcmp(last, "router") != 0) return 0;
  size_t plen = dot ? (size_t)(dot - gemm) + 1 : 0; /* "<parent>." */
  for (size_t i = 0; i < n; i++) {
    const char *s = names[i];
    if (strncmp(s, gemm, plen) != 0 || strncmp(s + plen, "experts.", 8) != 0) continue;
    const char *d = s + plen + 8;
    size_t k = 0;
    while (d[k] >= '0' && d[k] <= '9') k++;
    if (k > 0 && (d[k] == '.' || d[k] == '\0')) return 1;
  }
  return 0;
}
