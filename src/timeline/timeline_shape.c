/* timeline_shape.c: a model's Linears from the tensors of one step (fp8_tl_shape_views,
 * timeline.h): every `<L>.weight` [out, in] with `<L>.input` or `<L>.grad_output` giving the
 * tokens, in natural name order. Where the views come from (a trace, a run) is the caller's. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "block.h" /* fp8_block_view_2d */
#include "timeline.h"
#include "util.h"

static int cmp_linear(const void *x, const void *y) {
  return fp8_natural_cmp(((const fp8_tl_linear *)x)->name, ((const fp8_tl_linear *)y)->name);
}

/* <prefix>.<role> (key) against a name, as strcmp would compare the joined string. */
typedef struct {
  const char *prefix, *role;
  size_t plen;
} view_key;

static int cmp_key_name(const void *k, const void *e) {
  const view_key *key = k;
  const unsigned char *n = (const unsigned char *)(*(const fp8_tensor_view *const *)e)->name;
  const unsigned char *p = (const unsigned char *)key->prefix;
  for (size_t i = 0; i < key->plen; i++, n++)
    if (p[i] != *n) return p[i] < *n ? -1 : 1;
  if (*n != '.') return '.' < *n ? -1 : 1;
  return strcmp(key->role, (const char *)n + 1);
}

static int cmp_view_name(const void *x, const void *y) {
  return strcmp((*(const fp8_tensor_view *const *)x)->name,
                (*(const fp8_tensor_view *const *)y)->name);
}

/* The view named <prefix>.<role> among the views sorted by name (byname[0..n), strcmp order;
 * names are unique in a step), or NULL: a binary search, as a MoE step has ~10^5 views. */
static const fp8_tensor_view *find_view(const fp8_tensor_view *const *byname, size_t n,
                                        const char *prefix, size_t plen, const char *role) {
  view_key key = {prefix, role, plen};
  const fp8_tensor_view *const *f = bsearch(&key, byname, n, sizeof *byname, cmp_key_name);
  return f ? *f : NULL;
}

/* The layer a Linear belongs to: its name up to the end of the first all-digit component
 * ("layers.3" of "layers.3.mlp.fc1"), or "" when there is none (lm_head, an embedding). */
size_t fp8_tl_layer_prefix(const char *name) {
  const char *p = name;
  while (*p) {
    const char *e = strchr(p, '.');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    size_t k = 0;
    while (k < len && isdigit((unsigned char)p[k])) k++;
    if (len > 0 && k == len) return (size_t)(p + len - name);
    if (!e) break;
    p = e + 1;
  }
  return 0;
}

/* A layer prefix: the first len bytes of a name. */
typedef struct {
  const char *p;
  size_t len;
} layer_key;

static int cmp_layer_key(const void *x, const void *y) {
  const layer_key *a = x, *b = y;
  int c = memcmp(a->p, b->p, a->len < b->len ? a->len : b->len);
  return c ? c : (a->len > b->len) - (a->len < b->len);
}

/* The distinct layer prefixes; Linears outside every layer (lm_head) are not a layer (issue 25:
 * a 4-layer model with its LM head counted 5). 1 when no Linear is in a numbered layer. The
 * prefixes are sorted and the distinct ones counted (a MoE model has ~10^5 Linears); only
 * where there is no memory for that, every pair is compared. */
int64_t fp8_tl_count_layers(const fp8_tl_shape *s) {
  int64_t n = 0;
  layer_key *k = malloc((s->nlinears ? s->nlinears : 1) * sizeof *k);
  if (k) {
    size_t m = 0;
    for (size_t i = 0; i < s->nlinears; i++) {
      size_t la = fp8_tl_layer_prefix(s->linears[i].name);
      if (la) k[m++] = (layer_key){s->linears[i].name, la};
    }
    qsort(k, m, sizeof *k, cmp_layer_key);
    for (size_t i = 0; i < m; i++) n += i == 0 || cmp_layer_key(&k[i - 1], &k[i]) != 0;
    free(k);
    return n ? n : 1;
  }
  for (size_t i = 0; i < s->nlinears; i++) {
    const char *a = s->linears[i].name;
    size_t la = fp8_tl_layer_prefix(a), j = 0;
    if (la == 0) continue;
    for (; j < i; j++) {
      const char *b = s->linears[j].name;
      if (fp8_tl_layer_prefix(b) == la && strncmp(a, b, la) == 0) break;
    }
    n += j == i;
  }
  return n ? n : 1;
}

size_t fp8_tl_outside_layers(const fp8_tl_shape *s) {
  size_t in = 0, out = 0;
  for (size_t i = 0; i < s->nlinears; i++) {
    if (fp8_tl_layer_prefix(s->linears[i].name)) in++;
    else out++;
  }
  return in ? out : 0; /* no numbered layer at all: the whole model is the one layer */
}

int fp8_tl_shape_views(const fp8_tensor_view *v, size_t n, fp8_tl_shape *s, char *err,
                       size_t errlen) {
  memset(s, 0, sizeof *s);
  s->world = 1;
  s->history_len = 1024;
  s->linears = calloc(n ? n : 1, sizeof *s->linears);
  const fp8_tensor_view **byname = malloc((n ? n : 1) * sizeof *byname);
  if (!s->linears || !byname) {
    free(byname);
    fp8_tl_shape_free(s);
    return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  }
  for (size_t i = 0; i < n; i++) byname[i] = &v[i];
  qsort(byname, n, sizeof *byname, cmp_view_name);
  for (size_t i = 0; i < n; i++) {
    size_t len = strlen(v[i].name);
    if (len <= 7 || strcmp(v[i].name + len - 7, ".weight") != 0) continue;
    const size_t plen = len - 7;
    int64_t out = 0, in = 0, r = 0, c = 0;
    if (v[i].ndim != 2 || fp8_block_view_2d(v[i].shape, v[i].ndim, &out, &in) != 0) continue;
    const fp8_tensor_view *x = find_view(byname, n, v[i].name, plen, "input");
    const fp8_tensor_view *dy = find_view(byname, n, v[i].name, plen, "grad_output");
    fp8_tl_linear l = {.out = out, .in = in};
    if (x && x->ndim >= 2 && fp8_block_view_2d(x->shape, x->ndim, &r, &c) == 0 && c == in)
      l.tokens = r;
    else if (dy && dy->ndim >= 2 && fp8_block_view_2d(dy->shape, dy->ndim, &r, &c) == 0 &&
             c == out)
      l.tokens = r;
    else
      x = dy = NULL;
    /* a snapshot of a subset of the tokens (the capture's rows): the model's are the whole's */
    const fp8_tensor_view *tv = x ? x : dy;
    if (tv && tv->full_rows > l.tokens) l.tokens = tv->full_rows;
    if (l.tokens < 1 || in < 1 || out < 1) continue;
    l.dtype[FP8_TL_WEIGHT] = v[i].dtype;
    l.dtype[FP8_TL_INPUT] = x ? x->dtype : dy->dtype;
    l.dtype[FP8_TL_GRAD_OUTPUT] = dy ? dy->dtype : x->dtype;
    if (!(l.name = strndup(v[i].name, plen))) {
      free(byname);
      fp8_tl_shape_free(s);
      return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
    }
    s->linears[s->nlinears++] = l;
  }
  free(byname);
  qsort(s->linears, s->nlinears, sizeof *s->linears, cmp_linear);
  s->layers = fp8_tl_count_layers(s);
  return FP8_OK;
}
