/* stepscsv.c: reads a run's steps.csv into memory (fp8_steps_load, analysis.h), validating
 * every field against the README's schema, and groups its rows by configuration key
 * (tensor, recipe, format, history_len, margin, amax_compute), each group in step order.
 * A bad line is reported as "<path>:<line>: <what>" with FP8_EFORMAT; nothing here exits. */
#include "analysis.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ interned strings */

typedef struct {
  char *s;
  uint64_t h;
  int attr;     /* tensors: role; recipes: kind */
  int64_t line; /* first line it was seen on */
} istr;

typedef struct {
  istr *slots;
  size_t cap, n;
} itab;

static uint64_t hash_bytes(const char *s, size_t n, uint64_t h) {
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
  return h;
}

static uint64_t hash_u64(uint64_t h, uint64_t v) {
  for (int i = 0; i < 8; i++) h = (h ^ ((v >> (8 * i)) & 0xFF)) * 1099511628211ULL;
  return h;
}

static void itab_free(itab *t) {
  for (size_t i = 0; i < t->cap; i++) free(t->slots[i].s);
  free(t->slots);
  memset(t, 0, sizeof *t);
}

static int itab_grow(itab *t) {
  size_t cap = t->cap ? 2 * t->cap : 64;
  istr *s = calloc(cap, sizeof *s);
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

/* The entry for s (created with attr and line when new); NULL when out of memory. */
static istr *itab_get(itab *t, const char *s, int attr, int64_t line, int *created) {
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
  t->slots[j] = (istr){copy, h, attr, line};
  t->n++;
  *created = 1;
  return &t->slots[j];
}

typedef struct {
  itab tensors, recipes;
  size_t *row_index; /* storage of every group's rows[] */
} table_priv;

/* ------------------------------------------------------------------ parser state */

typedef struct {
  const char *name;
  char *err;
  size_t errlen;
  int64_t line;
  char shown[80];
  int ncols; /* of the header: FP8_STEPS_NCOLS or FP8_STEPS_NCOLS_V1 */
} ctx_t;

static int fail_at(ctx_t *c, int64_t line, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (c->err && c->errlen) snprintf(c->err, c->errlen, "%s:%lld: %s", c->name, (long long)line, msg);
  return FP8_EFORMAT;
}

/* A field as it may be shown in a one-line message: at most 40 characters, non-printable
 * bytes as '?'. */
static const char *show(ctx_t *c, const char *s) {
  size_t n = 0;
  for (; s[n] && n < 40; n++) c->shown[n] = isprint((unsigned char)s[n]) ? s[n] : '?';
  if (s[n]) {
    memcpy(c->shown + n, "...", 3);
    n += 3;
  }
  c->shown[n] = 0;
  return c->shown;
}

static int parse_i64(const char *s, int allow_neg, int64_t *out) {
  const char *p = s;
  if (*p == '-' && allow_neg) p++;
  if (!*p) return 0;
  for (const char *q = p; *q; q++)
    if (*q < '0' || *q > '9') return 0;
  errno = 0;
  char *end;
  long long v = strtoll(s, &end, 10);
  if (errno || *end) return 0;
  *out = (int64_t)v;
  return 1;
}

/* A decimal float as printf("%.9g") writes it, or inf, -inf, nan. No hex, no spaces. */
static int parse_f64(const char *s, double *out) {
  if (strcmp(s, "inf") == 0) return *out = INFINITY, 1;
  if (strcmp(s, "-inf") == 0) return *out = -INFINITY, 1;
  if (strcmp(s, "nan") == 0) return *out = NAN, 1;
  int digit = 0;
  for (const char *q = s; *q; q++) {
    if (*q >= '0' && *q <= '9') digit = 1;
    else if (!strchr(".eE+-", *q)) return 0;
  }
  if (!digit) return 0;
  errno = 0;
  char *end;
  double v = strtod(s, &end);
  if (*end || (errno == ERANGE && isinf(v))) return 0;
  *out = v;
  return 1;
}

static const char *const COLS[FP8_STEPS_NCOLS] = {
    "tensor", "role", "step", "recipe", "kind", "format", "history_len", "margin",
    "amax_compute", "amax", "scale", "n", "nonfinite", "zeros", "overflow", "underflow",
    "subnormal", "mse", "snr_db", "nblocks", "blocks_with_overflow", "log2_scale_min",
    "log2_scale_max", "log2_scale_std"};

enum { C_TENSOR, C_ROLE, C_STEP, C_RECIPE, C_KIND, C_FORMAT, C_HIST, C_MARGIN, C_AMAXC, C_AMAX,
       C_SCALE, C_N, C_NONFINITE, C_ZEROS, C_OVERFLOW, C_UNDERFLOW, C_SUBNORMAL, C_MSE, C_SNR,
       C_NBLOCKS, C_BLOCKS_OVERFLOW, C_L2MIN, C_L2MAX, C_L2STD };

/* Splits line (modified in place) at commas; returns the number of fields (up to max + 1). */
static int split(char *line, char **f, int max) {
  int n = 0;
  f[n++] = line;
  for (char *p = line; *p; p++)
    if (*p == ',') {
      *p = 0;
      if (n > max) return n + 1;
      f[n++] = p + 1;
    }
  return n;
}

static int check_header(ctx_t *c, char *line) {
  char *f[FP8_STEPS_NCOLS + 2];
  if (strcmp(line, FP8_STEPS_HEADER) == 0) {
    c->ncols = FP8_STEPS_NCOLS;
    return FP8_OK;
  }
  if (strcmp(line, FP8_STEPS_HEADER_V1) == 0) { /* fp8lab 0.1 runs before the block columns */
    c->ncols = FP8_STEPS_NCOLS_V1;
    return FP8_OK;
  }
  int n = split(line, f, FP8_STEPS_NCOLS);
  for (int i = 0; i < n && i < FP8_STEPS_NCOLS; i++)
    if (strcmp(f[i], COLS[i]) != 0)
      return fail_at(c, 1, "not a steps.csv header: column %d is '%s', expected '%s'", i + 1,
                     show(c, f[i]), COLS[i]);
  return fail_at(c, 1, "not a steps.csv header: %s%d columns, expected %d",
                 n > FP8_STEPS_NCOLS ? "more than " : "", n > FP8_STEPS_NCOLS ? FP8_STEPS_NCOLS : n,
                 FP8_STEPS_NCOLS);
}

static int is_label_char(char ch) {
  return isalnum((unsigned char)ch) || ch == '_' || ch == '.' || ch == '-';
}

/* ------------------------------------------------------------------ group map */

typedef struct {
  fp8_steps_group *g; /* key + counts, in order of first appearance */
  int64_t *first_line;
  size_t n, cap;
  size_t *slots; /* open addressing: group index + 1, 0 = empty */
  size_t nslots;
} gmap;

static uint64_t key_hash(const char *tensor, const char *recipe, fp8_format f, int32_t hl,
                         int32_t m, fp8_amax_compute ac) {
  uint64_t h = 1469598103934665603ULL;
  h = hash_u64(h, (uint64_t)(uintptr_t)tensor);
  h = hash_u64(h, (uint64_t)(uintptr_t)recipe);
  h = hash_u64(h, (uint64_t)f);
  h = hash_u64(h, (uint64_t)(uint32_t)hl);
  h = hash_u64(h, (uint64_t)(uint32_t)m);
  return hash_u64(h, (uint64_t)ac);
}

static int key_eq(const fp8_steps_group *g, const char *tensor, const char *recipe, fp8_format f,
                  int32_t hl, int32_t m, fp8_amax_compute ac) {
  return g->tensor == tensor && g->recipe == recipe && g->format == f && g->history_len == hl &&
         g->margin == m && g->amax_compute == ac;
}

static int gmap_rehash(gmap *gm, size_t nslots) {
  size_t *s = calloc(nslots, sizeof *s);
  if (!s) return FP8_ENOMEM;
  for (size_t i = 0; i < gm->n; i++) {
    const fp8_steps_group *g = &gm->g[i];
    size_t j = key_hash(g->tensor, g->recipe, g->format, g->history_len, g->margin,
                        g->amax_compute) & (nslots - 1);
    while (s[j]) j = (j + 1) & (nslots - 1);
    s[j] = i + 1;
  }
  free(gm->slots);
  gm->slots = s;
  gm->nslots = nslots;
  return FP8_OK;
}

/* The index of the row's group, created on first sight; (size_t)-1 when out of memory. */
static size_t gmap_get(gmap *gm, const fp8_step_row *r) {
  if (2 * (gm->n + 1) > gm->nslots && gmap_rehash(gm, gm->nslots ? 2 * gm->nslots : 256))
    return (size_t)-1;
  size_t j = key_hash(r->tensor, r->recipe, r->format, r->history_len, r->margin,
                      r->amax_compute) & (gm->nslots - 1);
  while (gm->slots[j]) {
    size_t i = gm->slots[j] - 1;
    if (key_eq(&gm->g[i], r->tensor, r->recipe, r->format, r->history_len, r->margin,
               r->amax_compute))
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
  g->recipe = r->recipe;
  g->kind = r->kind;
  g->format = r->format;
  g->history_len = r->history_len;
  g->margin = r->margin;
  g->amax_compute = r->amax_compute;
  gm->first_line[gm->n] = r->line;
  gm->slots[j] = gm->n + 1;
  return gm->n++;
}

static void gmap_free(gmap *gm) {
  free(gm->g);
  free(gm->first_line);
  free(gm->slots);
  memset(gm, 0, sizeof *gm);
}

/* ------------------------------------------------------------------ one data line */

static int parse_row(ctx_t *c, char *line, fp8_step_row *r, table_priv *pv) {
  char *f[FP8_STEPS_NCOLS + 2];
  int nf = split(line, f, c->ncols);
  if (nf != c->ncols)
    return fail_at(c, c->line, "expected %d fields, found %s%d", c->ncols,
                   nf > c->ncols ? "more than " : "", nf > c->ncols ? c->ncols : nf);
  memset(r, 0, sizeof *r);
  r->line = c->line;
#define BAD(col, what) \
  fail_at(c, c->line, "column %s: expected %s, found '%s'", COLS[col], what, show(c, f[col]))

  /* tensor, role */
  if (!*f[C_TENSOR]) return BAD(C_TENSOR, "a tensor name");
  r->role = FP8_ROLE_UNKNOWN;
  if (*f[C_ROLE]) {
    int found = 0;
    for (int k = FP8_ROLE_INPUT; k < FP8_ROLE_UNKNOWN; k++)
      if (strcmp(f[C_ROLE], fp8_role_name((fp8_role)k)) == 0) {
        r->role = (fp8_role)k;
        found = 1;
      }
    if (!found) return BAD(C_ROLE, "input, weight, output, grad_output, grad_input or empty");
  }
  int created;
  istr *t = itab_get(&pv->tensors, f[C_TENSOR], (int)r->role, c->line, &created);
  if (!t) return FP8_ENOMEM;
  if (!created && t->attr != (int)r->role)
    return fail_at(c, c->line, "tensor %s has role '%s' here but '%s' at line %lld",
                   show(c, f[C_TENSOR]), fp8_role_name(r->role), fp8_role_name((fp8_role)t->attr),
                   (long long)t->line);
  r->tensor = t->s;

  /* step */
  if (!parse_i64(f[C_STEP], 0, &r->step)) return BAD(C_STEP, "a step number >= 0");

  /* recipe, kind */
  if (!*f[C_RECIPE] || strlen(f[C_RECIPE]) > 63) return BAD(C_RECIPE, "a recipe label");
  for (const char *p = f[C_RECIPE]; *p; p++)
    if (!is_label_char(*p)) return BAD(C_RECIPE, "a recipe label (A-Z a-z 0-9 _ . -)");
  if (strcmp(f[C_KIND], "delayed") == 0) r->kind = FP8_KIND_DELAYED;
  else if (strcmp(f[C_KIND], "current") == 0) r->kind = FP8_KIND_CURRENT;
  else if (strcmp(f[C_KIND], "mxfp8") == 0) r->kind = FP8_KIND_MXFP8;
  else if (strcmp(f[C_KIND], "block") == 0) r->kind = FP8_KIND_BLOCK;
  else if (strcmp(f[C_KIND], "rowwise") == 0) r->kind = FP8_KIND_ROWWISE;
  else return BAD(C_KIND, "delayed, current, mxfp8, block or rowwise");
  istr *rc = itab_get(&pv->recipes, f[C_RECIPE], (int)r->kind, c->line, &created);
  if (!rc) return FP8_ENOMEM;
  if (!created && rc->attr != (int)r->kind)
    return fail_at(c, c->line, "recipe %s is %s here but %s at line %lld", rc->s,
                   fp8_recipe_kind_name(r->kind), fp8_recipe_kind_name((fp8_recipe_kind)rc->attr),
                   (long long)rc->line);
  r->recipe = rc->s;

  /* format */
  if (strcmp(f[C_FORMAT], "e4m3") == 0) r->format = FP8_E4M3;
  else if (strcmp(f[C_FORMAT], "e5m2") == 0) r->format = FP8_E5M2;
  else return BAD(C_FORMAT, "e4m3 or e5m2");

  /* delayed parameters */
  r->amax_compute = FP8_AMAX_MAX;
  if (r->kind == FP8_KIND_DELAYED) {
    int64_t v;
    if (!parse_i64(f[C_HIST], 0, &v) || v < 1 || v > FP8_HISTORY_LIMIT)
      return BAD(C_HIST, "an integer in 1..1048576 for delayed scaling");
    r->history_len = (int32_t)v;
    if (!parse_i64(f[C_MARGIN], 1, &v) || v < -FP8_MARGIN_LIMIT || v > FP8_MARGIN_LIMIT)
      return BAD(C_MARGIN, "an integer in -64..64 for delayed scaling");
    r->margin = (int32_t)v;
    if (strcmp(f[C_AMAXC], "max") == 0) r->amax_compute = FP8_AMAX_MAX;
    else if (strcmp(f[C_AMAXC], "most_recent") == 0) r->amax_compute = FP8_AMAX_MOST_RECENT;
    else return BAD(C_AMAXC, "max or most_recent for delayed scaling");
  } else {
    for (int col = C_HIST; col <= C_AMAXC; col++)
      if (*f[col]) return BAD(col, "an empty field for non-delayed kinds");
  }

  /* amax, scale */
  if (!parse_f64(f[C_AMAX], &r->amax) || !(r->amax >= 0))
    return BAD(C_AMAX, "a number >= 0 or inf");
  int blk = fp8_recipe_kind_is_block(r->kind);
  if (blk) {
    if (*f[C_SCALE]) return BAD(C_SCALE, "an empty field for block kinds (their scales are per block)");
    r->scale = NAN;
  } else if (!parse_f64(f[C_SCALE], &r->scale) || !(r->scale > 0) || isinf(r->scale)) {
    return BAD(C_SCALE, "a finite number > 0");
  }

  /* counts */
  int64_t *cnt[6] = {&r->n, &r->nonfinite, &r->zeros, &r->overflow, &r->underflow, &r->subnormal};
  for (int k = 0; k < 6; k++)
    if (!parse_i64(f[C_N + k], 0, cnt[k])) return BAD(C_N + k, "a count (integer >= 0)");
  for (int k = 1; k < 6; k++)
    if (*cnt[k] > r->n)
      return fail_at(c, c->line, "column %s: %lld exceeds n = %lld", COLS[C_N + k],
                     (long long)*cnt[k], (long long)r->n);
  int64_t finite = r->n - r->nonfinite;
  for (int k = 2; k < 6; k++)
    if (*cnt[k] > finite)
      return fail_at(c, c->line, "column %s: %lld exceeds the %lld finite elements",
                     COLS[C_N + k], (long long)*cnt[k], (long long)finite);

  /* mse, snr_db */
  /* an MXFP8 block near FLT_MAX can dequantize to inf: mse inf, snr -inf (docs/semantics.md) */
  if (!parse_f64(f[C_MSE], &r->mse) || r->mse < 0 || (isinf(r->mse) && !blk))
    return BAD(C_MSE, "a finite number >= 0 or nan");
  if (isnan(r->mse) != (finite == 0))
    return fail_at(c, c->line, "column mse: '%s' but the row has %lld finite elements (nan "
                   "exactly when there is none)", show(c, f[C_MSE]), (long long)finite);
  if (!parse_f64(f[C_SNR], &r->snr_db) || isnan(r->snr_db) || (r->snr_db == -INFINITY && !blk))
    return BAD(C_SNR, "a number or inf");

  /* block statistics (empty for per-tensor kinds) */
  r->nblocks = r->blocks_with_overflow = -1;
  r->log2_scale_min = r->log2_scale_max = r->log2_scale_std = NAN;
  if (c->ncols > C_NBLOCKS) {
    if (!blk) {
      for (int col = C_NBLOCKS; col <= C_L2STD; col++)
        if (*f[col]) return BAD(col, "an empty field for per-tensor kinds");
    } else {
      if (!parse_i64(f[C_NBLOCKS], 0, &r->nblocks)) return BAD(C_NBLOCKS, "a count (integer >= 0)");
      if (!parse_i64(f[C_BLOCKS_OVERFLOW], 0, &r->blocks_with_overflow) || r->blocks_with_overflow > r->nblocks)
        return BAD(C_BLOCKS_OVERFLOW, "a count <= nblocks");
      double *l2[3] = {&r->log2_scale_min, &r->log2_scale_max, &r->log2_scale_std};
      for (int k = 0; k < 3; k++)
        if (!parse_f64(f[C_L2MIN + k], l2[k])) return BAD(C_L2MIN + k, "a number or nan");
    }
  } else if (blk) {
    return BAD(C_KIND, "a per-tensor kind in a steps.csv without block columns");
  }
#undef BAD
  return FP8_OK;
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
  if (g->kind == FP8_KIND_DELAYED)
    snprintf(buf, len, "%s %s history_len %d margin %d %s", g->recipe, fp8_format_name(g->format),
             (int)g->history_len, (int)g->margin, fp8_amax_compute_name(g->amax_compute));
  else snprintf(buf, len, "%s %s", g->recipe, fp8_format_name(g->format));
  return buf;
}

/* Builds the groups from the parsed rows (t->rows, t->nrows). */
static int build_groups(ctx_t *c, fp8_steps_table *t, table_priv *pv, gmap *gm,
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
    char cfg[160];
    const fp8_step_row *a = &t->rows[dup_a], *b = &t->rows[dup_b];
    rc = fail_at(c, b->line, "duplicate row: step %lld of tensor %s, configuration %s, already "
                 "at line %lld", (long long)b->step, b->tensor,
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

/* ------------------------------------------------------------------ public */

void fp8_steps_free(fp8_steps_table *t) {
  if (!t) return;
  table_priv *pv = t->priv_;
  if (pv) {
    itab_free(&pv->tensors);
    itab_free(&pv->recipes);
    free(pv->row_index);
    free(pv);
  }
  free(t->path);
  free(t->rows);
  free(t->groups);
  free(t->tensors);
  memset(t, 0, sizeof *t);
}

int fp8_steps_parse(const char *name, const char *text, size_t len, fp8_steps_table *t,
                    char *err, size_t errlen) {
  memset(t, 0, sizeof *t);
  if (err && errlen) err[0] = 0;
  ctx_t c = {.name = name ? name : "steps.csv", .err = err, .errlen = errlen};
  int rc = FP8_OK;
  char *line = NULL;
  size_t linecap = 0, cap = 0;
  size_t *row_group = NULL;
  gmap gm = {0};
  table_priv *pv = calloc(1, sizeof *pv);
  t->path = strdup(c.name);
  if (!pv || !t->path || (!text && len)) {
    free(pv);
    rc = text || !len ? FP8_ENOMEM : FP8_EINVAL;
    if (rc == FP8_ENOMEM) snprintf(err, errlen, "%s: out of memory", c.name);
    else snprintf(err, errlen, "%s: no text", c.name);
    goto done;
  }
  t->priv_ = pv;
  if (len == 0) {
    rc = fail_at(&c, 1, "empty file (expected the steps.csv header)");
    goto done;
  }
  size_t pos = 0;
  while (pos < len) {
    const char *p = text + pos;
    const char *nl = memchr(p, '\n', len - pos);
    size_t n = nl ? (size_t)(nl - p) : len - pos;
    pos += n + (nl != NULL);
    c.line++;
    if (n && p[n - 1] == '\r') n--;
    if (memchr(p, 0, n)) {
      rc = fail_at(&c, c.line, "NUL byte in the line");
      goto done;
    }
    if (n + 1 > linecap) {
      size_t nc = (n + 1) * 2;
      char *l = realloc(line, nc);
      if (!l) {
        rc = FP8_ENOMEM;
        goto done;
      }
      line = l;
      linecap = nc;
    }
    memcpy(line, p, n);
    line[n] = 0;
    if (c.line == 1) {
      rc = check_header(&c, line);
      if (rc) goto done;
      continue;
    }
    if (n == 0) {
      rc = fail_at(&c, c.line, "empty line");
      goto done;
    }
    if (t->nrows == cap) {
      size_t ncap = cap ? 2 * cap : 1024;
      fp8_step_row *r = realloc(t->rows, ncap * sizeof *r);
      if (!r) {
        rc = FP8_ENOMEM;
        goto done;
      }
      t->rows = r;
      size_t *rg = realloc(row_group, ncap * sizeof *rg);
      if (!rg) {
        rc = FP8_ENOMEM;
        goto done;
      }
      row_group = rg;
      cap = ncap;
    }
    fp8_step_row *r = &t->rows[t->nrows];
    rc = parse_row(&c, line, r, pv);
    if (rc) goto done;
    size_t g = gmap_get(&gm, r);
    if (g == (size_t)-1) {
      rc = FP8_ENOMEM;
      goto done;
    }
    row_group[t->nrows++] = g;
  }
  rc = build_groups(&c, t, pv, &gm, row_group);
done:
  if (rc == FP8_ENOMEM && err && errlen) snprintf(err, errlen, "%s: out of memory", c.name);
  free(line);
  free(row_group);
  gmap_free(&gm);
  if (rc) fp8_steps_free(t);
  return rc;
}

int fp8_steps_load(const char *path, fp8_steps_table *t, char *err, size_t errlen) {
  memset(t, 0, sizeof *t);
  FILE *fp = fopen(path, "rb");
  if (!fp) {
    snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    return FP8_EIO;
  }
  size_t cap = 1 << 16, n = 0, r;
  char *buf = malloc(cap);
  int rc = FP8_OK;
  while (buf && (r = fread(buf + n, 1, cap - n, fp)) > 0) {
    n += r;
    if (n == cap) {
      char *b = realloc(buf, cap * 2);
      if (!b) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = b;
      cap *= 2;
    }
  }
  if (!buf) {
    snprintf(err, errlen, "%s: out of memory", path);
    rc = FP8_ENOMEM;
  } else if (ferror(fp)) {
    snprintf(err, errlen, "%s: read failed: %s", path, strerror(errno));
    rc = FP8_EIO;
  }
  fclose(fp);
  if (rc == FP8_OK) rc = fp8_steps_parse(path, buf, n, t, err, errlen);
  free(buf);
  return rc;
}

const fp8_step_row *fp8_steps_group_row(const fp8_steps_table *t, const fp8_steps_group *g,
                                        size_t i) {
  return &t->rows[g->rows[i]];
}

ptrdiff_t fp8_steps_find_group(const fp8_steps_table *t, const char *tensor, const char *recipe,
                               fp8_format format, int32_t history_len, int32_t margin,
                               fp8_amax_compute amax_compute) {
  if (!t || !tensor || !recipe) return -1;
  for (size_t i = 0; i < t->ngroups; i++) {
    const fp8_steps_group *g = &t->groups[i];
    if (strcmp(g->tensor, tensor) == 0 && strcmp(g->recipe, recipe) == 0 && g->format == format &&
        g->history_len == history_len && g->margin == margin && g->amax_compute == amax_compute)
      return (ptrdiff_t)i;
  }
  return -1;
}
