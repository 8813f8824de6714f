/* stream.csv: one row per (replay step, micro-batch, tensor, delayed configuration) (results.h
 * fp8_schema_stream): its columns, its back end of the stream writer (a record's rows, made
 * fast: what the rows of a tensor share formatted once) and its reader into the stream table
 * (stream.c, fp8_stream_load).
 *
 * The runner writes, at each step, the same series in the same order (tensor names by strcmp,
 * then the configurations in experiment order), so the reader takes the first step's rows as
 * the series and every later step must repeat them: row k of a step belongs to series k. A
 * step of several micro-batches repeats them once per micro-batch: the unit is (step, micro).
 * A file of the 13 columns before issue 17 (no micro, te_scale) is read as micro 0 without
 * TE's scale. The file is read a line at a time: the memory is the series' columns (30 bytes a
 * row), not the file's text (about 100 bytes a row) as well. */
#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csv_internal.h" /* the row builder, csv_split, csv_parse_i64, csv_parse_f64 */
#include "outfile.h"
#include "results.h"
#include "stream_internal.h"
#include "tables.h"
#include "trace.h" /* fp8_tensor_name_check */

/* ------------------------------------------------------------------ the columns */

static const char *const STREAM_COLS[FP8_STREAM_COL_COUNT] = {
    "tensor", "role", "step", "recipe", "format", "history_len", "margin", "amax_compute",
    "snapshot", "amax", "scale", "overshoot", "warmup", "micro", "te_scale"};

/* stream.csv had 13 columns before issue 17 appended micro and te_scale */
const fp8_schema fp8_schema_stream = {"stream.csv", STREAM_COLS, FP8_STREAM_COL_COUNT,
                                      {FP8_STREAM_COL_MICRO, FP8_STREAM_COL_COUNT, 0, 0}};

/* ------------------------------------------------------------------ the writer */

/* A block of rows, written when full and at the end. */
typedef struct {
  FILE *fp;
  size_t n;
  char buf[32768];
} block_t;

/* n bytes from s to d in 16-byte pieces: reads and writes up to 15 bytes past n, which the
 * callers' arrays have room for (a row's few short pieces: memcpy of a variable length was a
 * call or a `rep movs` each, a quarter of the stream's text) */
static inline void copy16(char *d, const char *s, size_t n) {
  for (size_t i = 0; i < n; i += 16) memcpy(d + i, s + i, 16);
}

/* A configuration's columns of a stream row, "recipe,format,history_len,margin,amax_compute":
 * the same for every tensor and step of a run, so made once per (configuration, format) into
 * the run's fp8_stream_csv_texts for its first CFG_CACHE configurations (one past them, or
 * without a table, is made into the caller's spare each time). */
enum { CFG_CACHE = 128 };
typedef struct {
  uint8_t ready, n;
  char s[126 + 16]; /* a label is under 64 bytes, the rest under 48; room for copy16 */
} cfg_text;

struct fp8_stream_csv_texts {
  cfg_text t[CFG_CACHE * 2]; /* [c * 2 + format] */
};

fp8_stream_csv_texts *fp8_stream_csv_texts_new(void) {
  return calloc(1, sizeof(fp8_stream_csv_texts));
}
void fp8_stream_csv_texts_free(fp8_stream_csv_texts *t) { free(t); }

static const cfg_text *config_text(fp8_stream_csv_texts *texts, const fp8_config *cf, size_t c,
                                   fp8_format f, cfg_text *spare) {
  cfg_text *ct = texts && c < CFG_CACHE && (unsigned)f < 2 ? &texts->t[c * 2 + (size_t)f] : spare;
  if (ct != spare && ct->ready) return ct;
  csv_line l;
  csv_line_init(&l, NULL);
  csv_line_str(&l, cf->label);
  csv_line_chr(&l, ',');
  csv_line_str(&l, fp8_format_name(f));
  csv_line_chr(&l, ',');
  csv_line_i64(&l, cf->history_len);
  csv_line_chr(&l, ',');
  csv_line_i64(&l, cf->margin);
  csv_line_chr(&l, ',');
  csv_line_str(&l, fp8_amax_compute_name(cf->amax_compute));
  memcpy(ct->s, l.buf, l.n);
  ct->n = (uint8_t)l.n;
  ct->ready = 1;
  return ct;
}

static void put_row(FILE *fp, const fp8_stream_row *r) {
  csv_line l;
  cfg_text spare;
  const cfg_text *ct = config_text(NULL, r->config, 0, r->format, &spare);
  csv_line_init(&l, fp);
  csv_put_row_key(&l, r->tensor, r->role, r->step);
  csv_line_put(&l, ct->s, ct->n);
  csv_line_str(&l, r->snapshot ? ",1," : ",0,");
  csv_line_num(&l, r->amax);
  csv_line_chr(&l, ',');
  csv_line_num(&l, r->scale);
  csv_line_chr(&l, ',');
  csv_line_num(&l, fp8_overshoot(r->amax, r->scale, r->format));
  csv_line_str(&l, r->warmup ? ",1," : ",0,");
  csv_line_i64(&l, r->micro);
  csv_line_chr(&l, ',');
  if (r->te_scale > 0.0f) csv_line_num(&l, r->te_scale);
  csv_line_chr(&l, '\n');
  csv_line_flush(&l);
}

void fp8_stream_csv_put_rows(FILE *fp, const fp8_stream_row *base,
                             const fp8_config *const *configs, const fp8_format *formats,
                             const float *scales, const unsigned char *want, size_t nconfigs,
                             fp8_stream_csv_texts *texts) {
  /* the key "tensor,role,step," and the parts around the scale: ",snap,amax," before it and
   * ",warmup,micro,te_scale\n" after the overshoot; a name too long for the key's room goes
   * row by row */
  csv_line key, mid, tail;
  csv_line_init(&key, NULL);
  size_t tl = strlen(base->tensor);
  if (tl + 64 > sizeof key.buf) {
    for (size_t c = 0; c < nconfigs; c++) {
      if (!want[c]) continue;
      fp8_stream_row r = *base;
      r.config = configs[c];
      r.format = formats[c];
      r.scale = scales[c];
      put_row(fp, &r);
    }
    return;
  }
  csv_put_row_key(&key, base->tensor, base->role, base->step);
  csv_line_init(&mid, NULL);
  csv_line_str(&mid, base->snapshot ? ",1," : ",0,");
  csv_line_num(&mid, base->amax);
  csv_line_chr(&mid, ',');
  csv_line_init(&tail, NULL);
  csv_line_str(&tail, base->warmup ? ",1," : ",0,");
  csv_line_i64(&tail, base->micro);
  csv_line_chr(&tail, ',');
  if (base->te_scale > 0.0f) csv_line_num(&tail, base->te_scale);
  csv_line_chr(&tail, '\n');
  /* the distinct (scale, format) pairs of this call: their texts and overshoots */
  enum { NSEEN = 16 };
  struct {
    uint32_t bits;
    fp8_format f;
    uint8_t sl, ol;
    char s[FP8_NUM_TEXT_MAX], o[FP8_NUM_TEXT_MAX];
  } seen[NSEEN];
  size_t nseen = 0, next = 0;
  block_t blk, *b = &blk; /* the rows of the call, written at once (32 KiB at a time) */
  b->fp = fp;
  b->n = 0;
  for (size_t c = 0; c < nconfigs; c++) {
    if (!want[c]) continue;
    uint32_t bits;
    memcpy(&bits, &scales[c], sizeof bits);
    size_t k = 0;
    while (k < nseen && !(seen[k].bits == bits && seen[k].f == formats[c])) k++;
    if (k == nseen) { /* a new one (the table full: the oldest goes) */
      k = nseen < NSEEN ? nseen++ : next++ % NSEEN;
      seen[k].bits = bits;
      seen[k].f = formats[c];
      seen[k].sl = (uint8_t)csv_num_into(scales[c], seen[k].s);
      /* (an overshoot is new at each step: not through the memo) */
      seen[k].ol = (uint8_t)fp8_num_text(fp8_overshoot(base->amax, scales[c], formats[c]), seen[k].o);
    }
    cfg_text spare;
    const cfg_text *ct = config_text(texts, configs[c], c, formats[c], &spare);
    /* the row's pieces straight into the block (a row is under its 1 KiB: the key's room was
     * checked above, a label is under 64 bytes) */
    size_t len = key.n + ct->n + mid.n + seen[k].sl + 1 + seen[k].ol + tail.n;
    if (b->n + len + 16 > sizeof b->buf) {
      fwrite(b->buf, 1, b->n, fp);
      b->n = 0;
    }
    char *o = b->buf + b->n;
    copy16(o, key.buf, key.n);
    o += key.n;
    copy16(o, ct->s, ct->n);
    o += ct->n;
    copy16(o, mid.buf, mid.n);
    o += mid.n;
    copy16(o, seen[k].s, seen[k].sl);
    o += seen[k].sl;
    *o++ = ',';
    copy16(o, seen[k].o, seen[k].ol);
    o += seen[k].ol;
    copy16(o, tail.buf, tail.n);
    b->n += len;
  }
  if (b->n) fwrite(b->buf, 1, b->n, fp);
}

void stream_csv_put_record(FILE *fp, const fp8_stream_layout *lay, const fp8_stream_record *rec,
                           fp8_stream_csv_texts *texts) {
  const size_t C = lay->nconfigs;
  for (size_t k = 0; k < lay->ntensors; k++) {
    fp8_stream_row base = {.tensor = lay->names[k], .role = lay->roles[k], .step = rec->step,
                           .snapshot = rec->snapshot[k], .amax = rec->amax[k],
                           .warmup = rec->warmup[k], .micro = rec->micro,
                           .te_scale = rec->te_scale[k]}; /* (NaN: none, as 0 is) */
    fp8_stream_csv_put_rows(fp, &base, lay->configs, lay->formats + k * C, rec->scale + k * C,
                            lay->applies + k * C, C, texts);
  }
}

/* ------------------------------------------------------------------ the reader */

static int fail(const char *path, int64_t line, char *err, size_t errlen, const char *what) {
  return fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%lld: %s", path, (long long)line, what);
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
int stream_new_series(fp8_stream_series *s, char **f) {
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
  const char *fm = f[FP8_STREAM_COL_FORMAT];
  if (strcmp(fm, fp8_format_name(FP8_E4M3)) == 0) s->key.format = FP8_E4M3;
  else if (strcmp(fm, fp8_format_name(FP8_E5M2)) == 0) s->key.format = FP8_E5M2;
  else return 0;
  int64_t h, m;
  if (!csv_parse_i64(f[FP8_STREAM_COL_HISTORY_LEN], 0, &h) || h < 1 || h > FP8_HISTORY_LIMIT)
    return 0;
  if (!csv_parse_i64(f[FP8_STREAM_COL_MARGIN], 1, &m) || m < -FP8_MARGIN_LIMIT ||
      m > FP8_MARGIN_LIMIT)
    return 0;
  s->key.history_len = (int32_t)h;
  s->key.margin = (int32_t)m;
  const char *ac = f[FP8_STREAM_COL_AMAX_COMPUTE];
  if (strcmp(ac, fp8_amax_compute_name(FP8_AMAX_MAX)) == 0) s->key.amax_compute = FP8_AMAX_MAX;
  else if (strcmp(ac, fp8_amax_compute_name(FP8_AMAX_MOST_RECENT)) == 0)
    s->key.amax_compute = FP8_AMAX_MOST_RECENT;
  else return 0;
  return 1;
}

/* One data row into series s (ncols: the file's columns); a message for err, or NULL. */
static const char *add_row(fp8_stream_series *s, size_t *cap, char **f, int ncols, int64_t step,
                           int64_t micro) {
  double a, sc, te = 0;
  if (!csv_parse_f64(f[FP8_STREAM_COL_AMAX], &a) || !(a >= 0)) return "amax: expected a number >= 0";
  if (!csv_parse_f64(f[FP8_STREAM_COL_SCALE], &sc) || !(sc > 0)) return "scale: expected a number > 0";
  const char *sn = f[FP8_STREAM_COL_SNAPSHOT], *w = f[FP8_STREAM_COL_WARMUP];
  if ((strcmp(sn, "0") && strcmp(sn, "1")) || (strcmp(w, "0") && strcmp(w, "1")))
    return "snapshot, warmup: expected 0 or 1";
  if (ncols > FP8_STREAM_COL_TE_SCALE && *f[FP8_STREAM_COL_TE_SCALE] &&
      (!csv_parse_f64(f[FP8_STREAM_COL_TE_SCALE], &te) || !(te > 0) || isinf(te)))
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

int stream_csv_parse(fp8_stream_table *t, FILE *fp, char *err, size_t errlen) {
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
    if (csv_split(ln, f, ncols) != ncols) {
      rc = fail(t->path, line, err, errlen, what);
      break;
    }
    int64_t st, mi = 0;
    if (!csv_parse_i64(f[FP8_STREAM_COL_STEP], 0, &st)) {
      rc = fail(t->path, line, err, errlen, "step: expected an integer >= 0");
      break;
    }
    if (ncols > FP8_STREAM_COL_MICRO && !csv_parse_i64(f[FP8_STREAM_COL_MICRO], 0, &mi)) {
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
      int ok = stream_new_series(&t->series[t->nseries], f);
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
