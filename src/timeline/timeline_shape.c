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

/* The view named <prefix>.<role> among v[0..n) (sorted by name: bsearch would do; n is small
 * next to the step's data), or NULL. */
static const fp8_tensor_view *find_view(const fp8_tensor_view *v, size_t n, const char *prefix,
                                        size_t plen, const char *role) {
  for (size_t i = 0; i < n; i++)
    if (strncmp(v[i].name, prefix, plen) == 0 && v[i].name[plen] == '.' &&
        strcmp(v[i].name + plen + 1, role) == 0)
      return &v[i];
  return NULL;
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

/* The distinct layer prefixes; Linears outside every layer (lm_head) are not a layer (issue 25:
 * a 4-layer model with its LM head counted 5). 1 when no Linear is in a numbered layer. */
int64_t fp8_tl_count_layers(const fp8_tl_shape *s) {
  int64_t n = 0;
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
  if (!s->linears) return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  for (size_t i = 0; i < n; i++) {
    size_t len = strlen(v[i].name);
    if (len <= 7 || strcmp(v[i].name + len - 7, ".weight") != 0) continue;
    const size_t plen = len - 7;
    int64_t out = 0, in = 0, r = 0, c = 0;
    if (v[i].ndim != 2 || fp8_block_view_2d(v[i].shape, v[i].ndim, &out, &in) != 0) continue;
    const fp8_tensor_view *x = find_view(v, n, v[i].name, plen, "input");
    const fp8_tensor_view *dy = find_view(v, n, v[i].name, plen, "grad_output");
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
      fp8_tl_shape_free(s);
      return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
    }
    s->linears[s->nlinears++] = l;
  }
  qsort(s->linears, s->nlinears, sizeof *s->linears, cmp_linear);
  s->layers = fp8_tl_count_layers(s);
  return FP8_OK;
}
