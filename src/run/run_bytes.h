/* run_bytes.h: a growing byte buffer to write and a bounded reader, for the runner's binary
 * records: the checkpoint (run_resume.c) and the MPI replay's messages (run_split.c). Static
 * inline: each file that includes it has its own copy, and no call crosses files. */
#ifndef FP8LAB_RUN_BYTES_H
#define FP8LAB_RUN_BYTES_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Writing: put() appends; a failed growth sets oom and makes every later put() a no-op. */
typedef struct {
  unsigned char *b;
  size_t n, cap;
  int oom;
} buf_t;

static inline void put(buf_t *w, const void *p, size_t n) {
  if (w->oom || n == 0) return;
  if (w->n + n > w->cap) {
    size_t cap = w->cap ? w->cap : 4096;
    while (cap < w->n + n) cap *= 2;
    unsigned char *nb = realloc(w->b, cap);
    if (!nb) {
      w->oom = 1;
      return;
    }
    w->b = nb;
    w->cap = cap;
  }
  memcpy(w->b + w->n, p, n);
  w->n += n;
}
static inline void put_u64(buf_t *w, uint64_t v) { put(w, &v, sizeof v); }

/* Reading: past the end sets bad (and reads zeros, or a NULL view) from then on. */
typedef struct {
  const unsigned char *b;
  size_t n, at;
  int bad;
} rd_t;

/* n bytes in place, or NULL when fewer are left */
static inline const void *get_view(rd_t *r, size_t n) {
  if (r->bad || r->n - r->at < n) {
    r->bad = 1;
    return NULL;
  }
  const void *p = r->b + r->at;
  r->at += n;
  return p;
}
static inline void get(rd_t *r, void *p, size_t n) {
  const void *q = get_view(r, n);
  if (q) memcpy(p, q, n);
  else memset(p, 0, n);
}
static inline uint64_t get_u64(rd_t *r) {
  uint64_t v;
  get(r, &v, sizeof v);
  return v;
}

#endif
