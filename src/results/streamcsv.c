/* streamcsv.c: reads a run's stream.csv (fp8_stream_load, tables.h): every step of the replay
 * for every tensor under every delayed configuration, with the scale that step used. The
 * runner writes, at each step, the same series in the same order (tensor names by strcmp, then
 * the configurations in experiment order), so the first step's rows define the series and
 * every later step must repeat them: row k of a step belongs to series k. A step of several
 * micro-batches repeats them once per micro-batch: the unit is (step, micro). A file of the
 * 13 columns before issue 17 (no micro, te_scale) is read as micro 0 without TE's scale.
 * The file is read a line at a time: the memory is the series' columns (30 bytes a row), not
 * the file's text (about 100 bytes a row) as well. */
#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "tables.h"
#include "outfile.h"
#include "stream_internal.h"
#include "results.h"
#include "stepscsv_internal.h"
#include "trace.h" /* fp8_tensor_name_check */
#include "util.h"  /* fp8_strset */


/* The index of the series by tensor (after a successful parse). */
static int index_series(fp8_stream_table *t) {
  stream_priv *pv = t->priv_;
  size_t n = t->nseries;
  pv->head = malloc((n + 1) * sizeof *pv->head);
  pv->next = malloc((n + 1) * sizeof *pv->next);
  if (!pv->head || !pv->next) return 0;
  size_t *tail = malloc((n + 1) * sizeof *tail); /* [id]: the last series of the tensor so far */
  if (!tail) return 0;
  for (size_t i = 0; i < n; i++) {
    int added;
    const char *nm = t->series[i].tensor;
    size_t id = fp8_strset_put(&pv->byname, nm, strlen(nm), &added);
    if (id == SIZE_MAX) {
      free(tail);
      return 0;
    }
    pv->next[i] = SIZE_MAX;
    if (added) pv->head[id] = i;
    else pv->next[tail[id]] = i;
    tail[id] = i;
  }
  free(tail);
  return 1;
}

static int fail(const char *path, int64_t line, char *err, size_t errlen, const char *what) {
  return fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%lld: %s", path, (long long)line, what);
}

static int split_fields(char *line, char **f, int max) {
  int n = 0;
  f[n++] = line;
  for (char *p = line; *p; p++)
    if (*p == ',') {
      *p = 0;
      if (n >= max) return max + 1;
      f[n++] = p + 1;
    }
  return n;
}

static int grow_series(fp8_stream_series *s, size_t *cap) {
  if (s->n < *cap) return 1;
  size_t nc = *cap ? 2 * *cap : 64;
  int64_t *st = realloc(s->step, nc * sizeof *st);
  if (st) s->step = st;
  float *a = realloc(s->amax, nc * sizeof *a);
  if (a) s->amax = a;
  float *sc = realloc(s->scale, nc * sizeof *sc);
  if (sc) s->scale = sc;
  unsigned char *sn = realloc(s->snapshot, nc), *w = sn ? realloc(s->warmup, nc) : NULL;
  if (sn) s->snapshot = sn;
  if (w) s->warmup = w;
  int64_t *mi = realloc(s->micro, nc * sizeof *mi);
  if (mi) s->micro = mi;
  float *te = realloc(s->te_scale, nc * sizeof *te);
  if (te) s->te_scale = te;
  if (!st || !a || !sc || !sn || !w || !mi || !te) return 0;
  *cap = nc;
  return 1;
}

/* The key columns of a row against series s (1: the same), compared as the runner writes
 * them: the text, not what atoi makes of it ("1x" is not history 1); num: s's history_len and
 * margin in that text. */
static int same_key(const fp8_stream_series *s, const char (*num)[16], char **f) {
  const char *h = num[0], *m = num[1];
  return strcmp(s->tensor, f[FP8_STREAM_COL_TENSOR]) == 0 &&
         strcmp(fp8_role_name(s->role), f[FP8_STREAM_COL_ROLE]) == 0 /* "" for no role */ &&
         strcmp(s->key.recipe, f[FP8_STREAM_COL_RECIPE]) == 0 &&
         strcmp(fp8_format_name(s->key.format), f[FP8_STREAM_COL_FORMAT]) == 0 &&
         strcmp(h, f[FP8_STREAM_COL_HISTORY_LEN]) == 0 && strcmp(m, f[FP8_STREAM_COL_MARGIN]) == 0 &&
         strcmp(fp8_amax_compute_name(s->key.amax_compute), f[FP8_STREAM_COL_AMAX_COMPUTE]) == 0;
}

/* A new series from a row of the first step (its tensor and recipe copied in: the line goes):
 * 1, 0 for bad columns, -1 out of memory. */
static int new_series(fp8_stream_series *s, char **f) {
  memset(s, 0, sizeof *s);
  s->key.kind = FP8_KIND_DELAYED; /* stream.csv holds the delayed configurations only */
  if (!(s->tensor = strdup(f[FP8_STREAM_COL_TENSOR])) ||
      !(s->key.recipe = strdup(f[FP8_STREAM_COL_RECIPE])))
    return -1;
  char why[FP8_ESC_LEN + 64];
  if (fp8_tensor_name_check(s->tensor, strlen(s->tensor), FP8_NAME_MAX + FP8_RANK_PREFIX_MAX,
                            why, sizeof why) != 0)
    return 0;
  s->role = FP8_ROLE_UNKNOWN;
  int role_ok = !*f[FP8_STREAM_COL_ROLE]; /* empty: a tensor without a role */
  for (int k = 0; k < FP8_ROLE_UNKNOWN; k++)
    if (strcmp(f[FP8_STREAM_COL_ROLE], fp8_role_name((fp8_role)k)) == 0) s->role = (fp8_role)k, role_ok = 1;
  if (!role_ok || !*s->key.recipe) return 0;
  if (strcmp(f[FP8_STREAM_COL_FORMAT], "e4m3") == 0) s->key.format = FP8_E4M3;
  else if (strcmp(f[FP8_STREAM_COL_FORMAT], "e5m2") == 0) s->key.format = FP8_E5M2;
  else return 0;
  int64_t h, m;
  if (!steps_parse_i64(f[FP8_STREAM_COL_HISTORY_LEN], 0, &h) || h < 1 || h > FP8_HISTORY_LIMIT)
    return 0;
  if (!steps_parse_i64(f[FP8_STREAM_COL_MARGIN], 1, &m) || m < -FP8_MARGIN_LIMIT ||
      m > FP8_MARGIN_LIMIT)
    return 0;
  s->key.history_len = (int32_t)h;
  s->key.margin = (int32_t)m;
  const char *ac = f[FP8_STREAM_COL_AMAX_COMPUTE];
  if (strcmp(ac, "max") == 0) s->key.amax_compute = FP8_AMAX_MAX;
  else if (strcmp(ac, "most_recent") == 0) s->key.amax_compute = FP8_AMAX_MOST_RECENT;
  else return 0;
  return 1;
}

/* One data row into series s (ncols: the file's columns); a message for err, or NULL. */
static const char *add_row(fp8_stream_series *s, size_t *cap, char **f, int ncols, int64_t step,
                           int64_t micro) {
  double a, sc, te = 0;
  if (!steps_parse_f64(f[FP8_STREAM_COL_AMAX], &a) || !(a >= 0)) return "amax: expected a number >= 0";
  if (!steps_parse_f64(f[FP8_STREAM_COL_SCALE], &sc) || !(sc > 0)) return "scale: expected a number > 0";
  const char *sn = f[FP8_STREAM_COL_SNAPSHOT], *w = f[FP8_STREAM_COL_WARMUP];
  if ((strcmp(sn, "0") && strcmp(sn, "1")) || (strcmp(w, "0") && strcmp(w, "1")))
    return "snapshot, warmup: expected 0 or 1";
  if (ncols > FP8_STREAM_COL_TE_SCALE && *f[FP8_STREAM_COL_TE_SCALE] &&
      (!steps_parse_f64(f[FP8_STREAM_COL_TE_SCALE], &te) || !(te > 0) || isinf(te)))
    return "te_scale: expected empty or a finite number > 0";
  if (!grow_series(s, cap)) return NULL;
  s->step[s->n] = step;
  s->amax[s->n] = (float)a; /* "%.9g" of a float32 reads back exactly */
  s->scale[s->n] = (float)sc;
  s->snapshot[s->n] = sn[0] == '1';
  s->warmup[s->n] = w[0] == '1';
  s->micro[s->n] = micro;
  s->te_scale[s->n] = (float)te;
  s->n++;
  return "";
}

static int parse(fp8_stream_table *t, FILE *fp, char *err, size_t errlen) {
  stream_priv *pv = t->priv_;
  int64_t line = 0, step = -1, micro = -1, empty = 0; /* empty: a blank line, fine only last */
  size_t k = 0, cap = 0; /* k: index of the row within its (step, micro) */
  int first = 1, ncols = 0, rc = FP8_OK;
  char *ln = NULL;
  size_t lncap = 0;
  for (ssize_t got; rc == FP8_OK && (got = getline(&ln, &lncap, fp)) >= 0;) {
    size_t l = strlen(ln); /* (a NUL byte ends the line's text, as it always has) */
    if (l && ln[l - 1] == '\n') ln[--l] = 0;
    if (l && ln[l - 1] == '\r') ln[--l] = 0;
    line++;
    if (line == 1) {
      if ((ncols = fp8_schema_match_header(&fp8_schema_stream, ln)) == 0)
        rc = fail(t->path, 1, err, errlen, "not a stream.csv header");
      continue;
    }
    char what[32];
    snprintf(what, sizeof what, "expected %d fields", ncols);
    if (empty) { /* a blank line with more after it */
      rc = fail(t->path, empty, err, errlen, what);
      break;
    }
    if (!l) {
      empty = line;
      continue;
    }
    char *f[FP8_STREAM_COL_COUNT + 1];
    if (split_fields(ln, f, ncols) != ncols) {
      rc = fail(t->path, line, err, errlen, what);
      break;
    }
    int64_t st, mi = 0;
    if (!steps_parse_i64(f[FP8_STREAM_COL_STEP], 0, &st)) {
      rc = fail(t->path, line, err, errlen, "step: expected an integer >= 0");
      break;
    }
    if (ncols > FP8_STREAM_COL_MICRO && !steps_parse_i64(f[FP8_STREAM_COL_MICRO], 0, &mi)) {
      rc = fail(t->path, line, err, errlen, "micro: expected an integer >= 0");
      break;
    }
    if (st != step || mi != micro) { /* a new step or micro-batch */
      if (step >= 0 && (st < step || (st == step && mi < micro))) {
        rc = fail(t->path, line, err, errlen, "steps (and a step's micro-batches) must ascend");
        break;
      }
      if (step >= 0 && k != t->nseries) {
        rc = fail(t->path, line, err, errlen, "the previous step has a different set of rows");
        break;
      }
      if (step >= 0) first = 0;
      if (st != step) t->nsteps++;
      t->nmicro++;
      step = st;
      micro = mi;
      k = 0;
    }
    if (first) {
      if (t->nseries == cap) {
        size_t nc = cap ? 2 * cap : 16;
        fp8_stream_series *ns = realloc(t->series, nc * sizeof *ns);
        size_t *ncap = realloc(pv->cap, nc * sizeof *ncap);
        char(*nnum)[2][16] = realloc(pv->num, nc * sizeof *nnum);
        if (ns) t->series = ns;
        if (ncap) pv->cap = ncap;
        if (nnum) pv->num = nnum;
        if (!ns || !ncap || !nnum) {
          rc = fp8_errorf(FP8_ENOMEM, err, errlen, "%s: out of memory", t->path);
          break;
        }
        cap = nc;
      }
      int ok = new_series(&t->series[t->nseries], f);
      pv->cap[t->nseries] = 0;
      snprintf(pv->num[t->nseries][0], 16, "%d", (int)t->series[t->nseries].key.history_len);
      snprintf(pv->num[t->nseries][1], 16, "%d", (int)t->series[t->nseries].key.margin);
      t->nseries++; /* counted either way: its strings are freed with the table */
      if (ok <= 0) {
        rc = ok < 0 ? fp8_errorf(FP8_ENOMEM, err, errlen, "%s: out of memory", t->path)
                    : fail(t->path, line, err, errlen, "bad configuration columns");
        break;
      }
    } else if (k >= t->nseries || !same_key(&t->series[k], (const char(*)[16])pv->num[k], f)) {
      rc = fail(t->path, line, err, errlen, "this step's rows differ from the first step's");
      break;
    }
    const char *m = add_row(&t->series[k], &pv->cap[k], f, ncols, step, micro);
    if (!m) rc = fp8_errorf(FP8_ENOMEM, err, errlen, "%s: out of memory", t->path);
    else if (*m) rc = fail(t->path, line, err, errlen, m);
    k++;
  }
  int read_failed = ferror(fp);
  free(ln);
  if (rc) return rc;
  if (read_failed) return fp8_errorf(FP8_EIO, err, errlen, "%s: cannot read", t->path);
  if (line == 0) return fail(t->path, 1, err, errlen, "empty file");
  if (step >= 0 && k != t->nseries)
    return fail(t->path, line, err, errlen, "the last step has a different set of rows");
  return FP8_OK;
}

/* ------------------------------------------------------------------ stream.npy */

/* stream.json (next to stream.npy) into the table's series: every (tensor, configuration) whose
 * format is not null, tensor by tensor, configurations in order; *T and *C the record's
 * dimensions; map[s] the position t * C + c of series s. */
static int npy_index(fp8_stream_table *t, const char *jpath, char *err, size_t errlen) {
  stream_priv *pv = t->priv_;
  size_t *T = &pv->T, *C = &pv->C, *nrec = &pv->nrec, **map = &pv->map;
  json_error_t je;
  json_t *root = json_load_file(jpath, JSON_REJECT_DUPLICATES, &je);
  char shown[FP8_ESC_LEN]; /* names and jansson's text, escaped for the one-line message */
  if (!root)
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%d: not JSON: %s (fp8lab writes it with "
                      "stream.npy)", jpath, je.line, fp8_esc(je.text, shown, sizeof shown));
  json_t *tens = json_object_get(root, "tensors"), *cfgs = json_object_get(root, "configs");
  json_t *rec = json_object_get(root, "records");
  int rc = FP8_OK;
  if (!json_is_array(tens) || !json_is_array(cfgs) || !json_is_integer(rec) ||
      json_integer_value(rec) < 0) {
    rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s: expected records, tensors and configs", jpath);
    goto done;
  }
  *T = json_array_size(tens);
  *C = json_array_size(cfgs);
  *nrec = (size_t)json_integer_value(rec);
  size_t most = *T * *C + 1;
  t->series = calloc(most, sizeof *t->series);
  pv->cap = calloc(most, sizeof *pv->cap);
  pv->num = calloc(most, sizeof *pv->num);
  *map = malloc(most * sizeof **map);
  if (!t->series || !pv->cap || !pv->num || !*map) {
    rc = fp8_errorf(FP8_ENOMEM, err, errlen, "%s: out of memory", jpath);
    goto done;
  }
  for (size_t i = 0; i < *T && !rc; i++) {
    json_t *o = json_array_get(tens, i), *fm = json_object_get(o, "formats");
    const char *name = json_string_value(json_object_get(o, "name"));
    const char *role = json_string_value(json_object_get(o, "role"));
    if (!name || !role || !json_is_array(fm) || json_array_size(fm) != *C) {
      rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s: tensors[%zu]: expected name, role and %zu "
                      "formats", jpath, i, *C);
      break;
    }
    for (size_t c = 0; c < *C && !rc; c++) {
      json_t *f = json_array_get(fm, c), *cf = json_array_get(cfgs, c);
      if (json_is_null(f)) continue;
      const char *fs = json_string_value(f);
      const char *recipe = json_string_value(json_object_get(cf, "recipe"));
      const char *ac = json_string_value(json_object_get(cf, "amax_compute"));
      json_t *h = json_object_get(cf, "history_len"), *m = json_object_get(cf, "margin");
      /* a row of stream.csv in text, checked by the CSV reader's rules */
      char hb[24], mb[24], fsb[16], acb[16];
      char *f8[FP8_STREAM_COL_COUNT] = {0};
      snprintf(hb, sizeof hb, "%lld", json_is_integer(h) ? (long long)json_integer_value(h) : 0LL);
      snprintf(mb, sizeof mb, "%lld", json_is_integer(m) ? (long long)json_integer_value(m) : 0LL);
      snprintf(fsb, sizeof fsb, "%s", fs ? fs : "");
      snprintf(acb, sizeof acb, "%s", ac ? ac : "");
      f8[FP8_STREAM_COL_TENSOR] = (char *)name;
      f8[FP8_STREAM_COL_ROLE] = (char *)role;
      f8[FP8_STREAM_COL_RECIPE] = (char *)(recipe ? recipe : "");
      f8[FP8_STREAM_COL_FORMAT] = fsb;
      f8[FP8_STREAM_COL_HISTORY_LEN] = hb;
      f8[FP8_STREAM_COL_MARGIN] = mb;
      f8[FP8_STREAM_COL_AMAX_COMPUTE] = acb;
      size_t s = t->nseries;
      int ok = (fs && recipe && ac && json_is_integer(h) && json_is_integer(m))
                   ? new_series(&t->series[s], f8) : 0;
      t->nseries++;
      if (ok <= 0) {
        rc = ok < 0 ? fp8_errorf(FP8_ENOMEM, err, errlen, "%s: out of memory", jpath)
                    : fp8_errorf(FP8_EFORMAT, err, errlen, "%s: tensors[%zu] (%s) under "
                                 "configs[%zu]: bad configuration", jpath, i,
                                 fp8_esc(name, shown, sizeof shown), c);
        break;
      }
      (*map)[s] = i * *C + c;
    }
  }
done:
  json_decref(root);
  return rc;
}

int fp8_stream_load(const char *path, fp8_stream_table *t, char *err, size_t errlen) {
  memset(t, 0, sizeof *t);
  FILE *fp = fopen(path, "rb");
  if (!fp) return fp8_errorf(FP8_EIO, err, errlen, "%s: cannot open", path);
  setvbuf(fp, NULL, _IOFBF, 1 << 16);
  stream_priv *pv = calloc(1, sizeof *pv);
  t->path = strdup(path);
  if (!pv || !t->path) {
    fclose(fp);
    free(pv);
    free(t->path);
    t->path = NULL;
    return fp8_errorf(FP8_ENOMEM, err, errlen, "%s: out of memory", path);
  }
  t->priv_ = pv;
  size_t L = strlen(path);
  int rc;
  if (L > 4 && strcmp(path + L - 4, ".npy") == 0) { /* the compact stream (streamread.c) */
    char jpath[4200];
    snprintf(jpath, sizeof jpath, "%.*s.json", (int)(L - 4), path);
    pv->npy = 1;
    rc = npy_index(t, jpath, err, errlen);
    if (!rc) rc = stream_npy_records(t, fp, err, errlen);
  } else {
    rc = parse(t, fp, err, errlen);
  }
  fclose(fp);
  if (!rc && !index_series(t)) rc = fp8_errorf(FP8_ENOMEM, err, errlen, "%s: out of memory", path);
  if (rc) fp8_stream_free(t);
  return rc;
}

void fp8_stream_free(fp8_stream_table *t) {
  if (!t) return;
  stream_priv *pv = t->priv_;
  for (size_t i = 0; i < t->nseries; i++) {
    fp8_stream_series *s = &t->series[i];
    free(s->scale);
    free((char *)s->tensor);
    free((char *)s->key.recipe);
    if (pv && pv->npy) continue; /* the other columns are the table's (stream_internal.h) */
    free(s->step);
    free(s->amax);
    free(s->snapshot);
    free(s->warmup);
    free(s->micro);
    free(s->te_scale);
  }
  free(t->series);
  if (pv) {
    free(pv->map);
    free(pv->step);
    free(pv->micro);
    free(pv->amax);
    free(pv->te);
    free(pv->snap);
    free(pv->warm);
    free(pv->cap);
    free(pv->num);
    fp8_strset_free(&pv->byname);
    free(pv->head);
    free(pv->next);
    free(pv);
  }
  free(t->path);
  memset(t, 0, sizeof *t);
}

const fp8_stream_series *fp8_stream_find(const fp8_stream_table *t, const char *tensor,
                                         const fp8_config_key *key) {
  const stream_priv *pv = t ? t->priv_ : NULL;
  if (!pv || !pv->head) return NULL;
  size_t id = fp8_strset_get(&pv->byname, tensor, strlen(tensor));
  for (size_t i = id == SIZE_MAX ? SIZE_MAX : pv->head[id]; i != SIZE_MAX; i = pv->next[i])
    if (fp8_config_key_equal(&t->series[i].key, key, FP8_KEY_IGNORE_KIND)) return &t->series[i];
  return NULL;
}

int fp8_stream_overflowed(float amax, float scale, fp8_format f) {
  volatile float y = amax * scale; /* RN32, never a wider intermediate */
  return fabsf(y) > fp8_format_max(f);
}

int fp8_stream_clipped(float amax, float scale, fp8_format f) {
  volatile float y = amax * scale;
  float ay = fabsf(y);
  uint32_t u;
  memcpy(&u, &ay, sizeof u);
  return u > fp8_clip_bits(f);
}
