/* steps_csv_groups.c: the bookkeeping half of the steps.csv reader (fp8_steps_csv_load, tables.h;
 * the parser is steps_csv.c): the interned tensor and recipe names, the map from configuration key
 * (tensor, recipe, format, history_len, margin, amax_compute) to group, and the groups built from
 * it once every row is parsed (tensor name order, each group by step, duplicate steps refused).
 * Also the table's accessors and fp8_steps_csv_free. */
#include "steps_csv_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ messages */

int steps_fail_at(steps_ctx *c, int64_t line, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (c->err && c->errlen) snprintf(c->err, c->errlen, "%s:%lld: %s", c->name, (long long)line, msg);
  return FP8_EFORMAT;
}

/* ------------------------------------------------------------------ interned strings */

static uint64_t hash_bytes(const char *s, size_t n, uint64_t h) {
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
  return h;
}

static uint64_t hash_u64(uint64_t h, uint64_t v) {
  for (int i = 0; i < 8; i++) h = (h ^ ((v >> (8 * i)) & 0xFF)) * 1099511628211ULL;
  return h;
}

void steps_itab_free(steps_itab *t) {
  for (size_t i = 0; i < t->cap; i++) free(t->slots[i].s);
  free(t->slots);
  memset(t, 0, sizeof *t);
}

static int itab_grow(steps_itab *t) {
  size_t cap = t->cap ? 2 * t->cap : 64;
  steps_istr *s = calloc(cap, sizeof *s);
  if (!s) return FP8_ENOMEM;
  for (size_t i = 0; i < t->cap; i++) {
    if (!t->slots[i].s) continue;
    size_t j = t->slots[i].h & (cap - 1);
    while (s[j].s) j = (j + 1) & (cap - 1);
    s[j] = t->slots[i];
  }
  free(t->slots);
  t->slots = s;
  t->cap = cap;
  return FP8_OK;
}

steps_istr *steps_itab_get(steps_itab *t, const char *s, int attr, int64_t line, int *created) {
  *created = 0;
  if (2 * (t->n + 1) > t->cap && itab_grow(t)) return NULL;
  size_t len = strlen(s);
  uint64_t h = hash_bytes(s, len, 1469598103934665603ULL);
  size_t j = h & (t->cap - 1);
  while (t->slots[j].s) {
    if (t->slots[j].h == h && strcmp(t->slots[j].s, s) == 0) return &t->slots[j];
    j = (j + 1) & (t->cap - 1);
  }
  char *copy = malloc(len + 1);
  if (!copy) return NULL;
  memcpy(copy, s, len + 1);
  t->slots[j] = (steps_istr){copy, h, attr, line};
  t->n++;
  *created = 1;
  return &t->slots[j];
}

/* ------------------------------------------------------------------ group map */

/* The hash of a (tensor, key) with interned names (by pointer), its kind aside. */
static uint64_t key_hash(const char *tensor, const fp8_config_key *k) {
  uint64_t h = 1469598103934665603ULL;
  h = hash_u64(h, (uint64_t)(uintptr_t)tensor);
  h = hash_u64(h, (uint64_t)(uintptr_t)k->recipe);
  h = hash_u64(h, (uint64_t)k->format);
  h = hash_u64(h, (uint64_t)(uint32_t)k->history_len);
  h = hash_u64(h, (uint64_t)(uint32_t)k->margin);
  return hash_u64(h, (uint64_t)k->amax_compute);
}

/* A group's key against a row's: the same tensor (interned: by pointer) and configuration, its
 * kind aside (a recipe label's kind is checked per tensor, steps_build_groups). */
static int key_eq(const fp8_steps_group *g, const char *tensor, const fp8_config_key *k) {
  return g->tensor == tensor && fp8_config_key_equal(&g->key, k, FP8_KEY_IGNORE_KIND);
}

static int gmap_rehash(steps_gmap *gm, size_t nslots) {
  size_t *s = calloc(nslots, sizeof *s);
  if (!s) return FP8_ENOMEM;
  for (size_t i = 0; i < gm->n; i++) {
    const fp8_steps_group *g = &gm->g[i];
    size_t j = key_hash(g->tensor, &g->key) & (nslots - 1);
    while (s[j]) j = (j + 1) & (nslots - 1);
    s[j] = i + 1;
  }
  free(gm->slots);
  gm->slots = s;
  gm->nslots = nslots;
  return FP8_OK;
}

size_t steps_gmap_get(steps_gmap *gm, const fp8_step_row *r) {
  if (2 * (gm->n + 1) > gm->nslots && gmap_rehash(gm, gm->nslots ? 2 * gm->nslots : 256))
    return (size_t)-1;
  fp8_config_key rk = fp8_step_row_key(r);
  size_t j = key_hash(r->tensor, &rk) & (gm->nslots - 1);
  while (gm->slots[j]) {
    size_t i = gm->slots[j] - 1;
    if (key_eq(&gm->g[i], r->tensor, &rk))
      return i;
    j = (j + 1) & (gm->nslots - 1);
  }
  if (gm->n == gm->cap) {
    size_t cap = gm->cap ? 2 * gm->cap : 64;
    fp8_steps_group *g = realloc(gm->g, cap * sizeof *g);
    if (!g) return (size_t)-1;
    gm->g = g;
    int64_t *fl = realloc(gm->first_line, cap * sizeof *fl);
    if (!fl) return (size_t)-1;
    gm->first_line = fl;
    gm->cap = cap;
  }
  fp8_steps_group *g = &gm->g[gm->n];
  memset(g, 0, sizeof *g);
  g->tensor = r->tensor;
  g->role = r->role;
  g->key = fp8_step_row_key(r);
  gm->first_line[gm->n] = r->line;
  gm->slots[j] = gm->n + 1;
  return gm->n++;
}

void steps_gmap_free(steps_gmap *gm) {
  free(gm->g);
  free(gm->first_line);
  free(gm->slots);
  memset(gm, 0, sizeof *gm);
}

/* ------------------------------------------------------------------ grouping */

typedef struct {
  int64_t step;
  size_t idx; /* row index: file order, so ties keep the file order */
} step_idx;

static int cmp_step_idx(const void *a, const void *b) {
  const step_idx *x = a, *y = b;
  if (x->step != y->step) return x->step < y->step ? -1 : 1;
  return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Sorts a group's row indices (file order on entry) by step; the usual file is already in
 * step order and is left alone. */
static int sort_by_step(const fp8_step_row *rows, size_t *idx, size_t n) {
  size_t k = 1;
  while (k < n && rows[idx[k - 1]].step <= rows[idx[k]].step) k++;
  if (k >= n) return FP8_OK;
  step_idx *tmp = malloc(n * sizeof *tmp);
  if (!tmp) return FP8_ENOMEM;
  for (size_t i = 0; i < n; i++) tmp[i] = (step_idx){rows[idx[i]].step, idx[i]};
  qsort(tmp, n, sizeof *tmp, cmp_step_idx);
  for (size_t i = 0; i < n; i++) idx[i] = tmp[i].idx;
  free(tmp);
  return FP8_OK;
}

typedef struct {
  const fp8_steps_group *g;
  int64_t first_line;
  size_t old;
} gorder;

static int cmp_gorder(const void *a, const void *b) {
  const gorder *x = a, *y = b;
  int c = strcmp(x->g->tensor, y->g->tensor);
  if (c) return c;
  return x->first_line < y->first_line ? -1 : x->first_line > y->first_line;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static const char *config_text(const fp8_steps_group *g, char *buf, size_t len) {
  return fp8_config_key_label(&g->key, FP8_KEY_LABEL_TEXT, buf, len);
}

int steps_build_groups(steps_ctx *c, fp8_steps_table *t, steps_priv *pv, steps_gmap *gm,
                       const size_t *row_group) {
  size_t ng = gm->n;
  int rc = FP8_OK;
  gorder *ord = NULL;
  size_t *newidx = NULL, *fill = NULL;
  fp8_steps_group *groups = NULL;
  pv->row_index = malloc((t->nrows ? t->nrows : 1) * sizeof *pv->row_index);
  ord = malloc((ng ? ng : 1) * sizeof *ord);
  newidx = malloc((ng ? ng : 1) * sizeof *newidx);
  fill = calloc(ng ? ng : 1, sizeof *fill);
  groups = calloc(ng ? ng : 1, sizeof *groups);
  if (!pv->row_index || !ord || !newidx || !fill || !groups) {
    rc = FP8_ENOMEM;
    goto done;
  }
  /* group order: tensor name, then first appearance */
  for (size_t i = 0; i < ng; i++) ord[i] = (gorder){&gm->g[i], gm->first_line[i], i};
  qsort(ord, ng, sizeof *ord, cmp_gorder);
  for (size_t i = 0; i < ng; i++) {
    newidx[ord[i].old] = i;
    groups[i] = *ord[i].g;
    groups[i].nrows = 0;
  }
  for (size_t r = 0; r < t->nrows; r++) {
    t->rows[r].group = newidx[row_group[r]];
    groups[t->rows[r].group].nrows++;
  }
  size_t off = 0;
  for (size_t i = 0; i < ng; i++) {
    groups[i].rows = pv->row_index + off;
    off += groups[i].nrows;
  }
  for (size_t r = 0; r < t->nrows; r++) {
    size_t g = t->rows[r].group;
    groups[g].rows[fill[g]++] = r;
  }
  /* each group by step; a step twice in one group is an error at its later line */
  int64_t dup_line = -1;
  size_t dup_a = 0, dup_b = 0;
  for (size_t i = 0; i < ng; i++) {
    rc = sort_by_step(t->rows, groups[i].rows, groups[i].nrows);
    if (rc) goto done;
    for (size_t k = 1; k < groups[i].nrows; k++) {
      const fp8_step_row *a = &t->rows[groups[i].rows[k - 1]], *b = &t->rows[groups[i].rows[k]];
      if (a->step == b->step && (dup_line < 0 || b->line < dup_line)) {
        dup_line = b->line;
        dup_a = groups[i].rows[k - 1];
        dup_b = groups[i].rows[k];
      }
    }
  }
  if (dup_line >= 0) {
    char cfg[160], shown[FP8_ESC_LEN];
    const fp8_step_row *a = &t->rows[dup_a], *b = &t->rows[dup_b];
    rc = steps_fail_at(c, b->line, "duplicate row: step %lld of tensor %s, configuration %s, "
                       "already at line %lld", (long long)b->step,
                       fp8_esc(b->tensor, shown, sizeof shown),
                       config_text(&groups[b->group], cfg, sizeof cfg), (long long)a->line);
    goto done;
  }
  /* distinct tensors */
  t->tensors = malloc((pv->tensors.n ? pv->tensors.n : 1) * sizeof *t->tensors);
  if (!t->tensors) {
    rc = FP8_ENOMEM;
    goto done;
  }
  for (size_t i = 0; i < pv->tensors.cap; i++)
    if (pv->tensors.slots[i].s) t->tensors[t->ntensors++] = pv->tensors.slots[i].s;
  qsort(t->tensors, t->ntensors, sizeof *t->tensors, cmp_str);
  t->groups = groups;
  t->ngroups = ng;
  groups = NULL;
done:
  free(ord);
  free(newidx);
  free(fill);
  free(groups);
  return rc;
}

/* ------------------------------------------------------------------ the table */

void fp8_steps_csv_free(fp8_steps_table *t) {
  if (!t) return;
  steps_priv *pv = t->priv_;
  if (pv) {
    steps_itab_free(&pv->tensors);
    steps_itab_free(&pv->recipes);
    steps_itab_free(&pv->pairs);
    free(pv->row_index);
    free(pv);
  }
  free(t->path);
  free(t->rows);
  free(t->groups);
  free(t->tensors);
  memset(t, 0, sizeof *t);
}

const fp8_step_row *fp8_steps_csv_group_row(const fp8_steps_table *t, const fp8_steps_group *g,
                                            size_t i) {
  return &t->rows[g->rows[i]];
}

ptrdiff_t fp8_steps_csv_find_group(const fp8_steps_table *t, const char *tensor,
                                   const fp8_config_key *key) {
  if (!t || !tensor || !key || !key->recipe) return -1;
  for (size_t i = 0; i < t->ngroups; i++) {
    const fp8_steps_group *g = &t->groups[i];
    if (strcmp(g->tensor, tensor) == 0 && fp8_config_key_equal(&g->key, key, FP8_KEY_IGNORE_KIND))
      return (ptrdiff_t)i;
  }
  return -1;
}

/* the groups of fp8_steps_csv_from_stream: tensor name, then the stream's order */
static int cmp_group_tensor(const void *a, const void *b) {
  const fp8_steps_group *x = a, *y = b;
  int c = strcmp(x->tensor, y->tensor);
  if (c) return c;
  return (x->nrows > y->nrows) - (x->nrows < y->nrows); /* nrows holds the series index here */
}

int fp8_steps_csv_from_stream(const fp8_stream_table *st, fp8_steps_table *t) {
  memset(t, 0, sizeof *t);
  size_t n = st->nseries;
  t->groups = calloc(n + 1, sizeof *t->groups);
  t->tensors = calloc(n + 1, sizeof *t->tensors);
  t->path = strdup(st->path ? st->path : "");
  if (!t->groups || !t->tensors || !t->path) {
    fp8_steps_csv_free(t);
    return FP8_ENOMEM;
  }
  for (size_t k = 0; k < n; k++) {
    const fp8_stream_series *s = &st->series[k];
    t->groups[k] = (fp8_steps_group){s->tensor, s->role, s->key, k, NULL};
  }
  qsort(t->groups, n, sizeof *t->groups, cmp_group_tensor);
  for (size_t k = 0; k < n; k++) {
    t->groups[k].nrows = 0;
    if (!t->ntensors || strcmp(t->tensors[t->ntensors - 1], t->groups[k].tensor) != 0)
      t->tensors[t->ntensors++] = t->groups[k].tensor;
    /* one pointer per tensor, as the loader interns them (groups of a tensor compare by it) */
    t->groups[k].tensor = t->tensors[t->ntensors - 1];
  }
  t->ngroups = n;
  t->has_clipped = 1;
  return FP8_OK;
}
