/* stream.npy + stream.json: the compact stream (issue 27; docs/design.md "The stream at scale";
 * results.h): stream.npy, one NumPy record per replay (step, micro-batch) holding every stream
 * tensor's amax, TE scale, snapshot and warm-up flags and the scale of every delayed
 * configuration, and stream.json, the names: which tensor and configuration each position is,
 * and each pair's format. The rows of stream.csv are the (record, tensor, configuration)
 * positions whose configuration applies to the tensor, in that order. Here their back end of
 * the stream writer, and their reader into the stream table (stream.c, fp8_stream_load).
 *
 * A 70B-shaped run is 10^4 records of 1,680 tensors x 24 configurations: 4 x 10^8 rows, 30
 * bytes each if every series held its columns (12 GB). What a tensor's configurations share
 * (step, micro, amax, te_scale, snapshot, warmup: 10 bytes a tensor and record) is held once;
 * the scales, 4 bytes a row and most of the file, are checked on the way and read again when
 * asked for (fp8_stream_visit, fp8_stream_keep): by blocks of tensors (a contiguous range of
 * each record), a block's series at a time, in bounded memory (VISIT_BYTES). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "results.h"
#include "stream_internal.h"
#include "util.h"

/* stream.json's keys (its writer and its reader below) */
#define SJ_VERSION "fp8lab_stream"
#define SJ_RECORDS "records"
#define SJ_TENSORS "tensors"
#define SJ_CONFIGS "configs"
#define SJ_NAME "name"
#define SJ_ROLE "role"
#define SJ_FORMATS "formats"
#define SJ_RECIPE "recipe"
#define SJ_HISTORY_LEN "history_len"
#define SJ_MARGIN "margin"
#define SJ_AMAX_COMPUTE "amax_compute"

/* ------------------------------------------------------------------ the writer */

int fp8_stream_npy_header(size_t nrec, size_t ntensors, size_t nconfigs, char *buf, size_t len) {
  char dict[512];
  int n = snprintf(dict, sizeof dict,
                   "{'descr': [('step', '<i8'), ('micro', '<i8'), ('amax', '<f4', (%zu,)), "
                   "('te_scale', '<f4', (%zu,)), ('snapshot', '|u1', (%zu,)), "
                   "('warmup', '|u1', (%zu,)), ('scale', '<f4', (%zu, %zu))], "
                   "'fortran_order': False, 'shape': (%zu,), }",
                   ntensors, ntensors, ntensors, ntensors, ntensors, nconfigs, nrec);
  if (n < 0 || (size_t)n >= sizeof dict) return -1;
  /* magic, version 1.0, the header's length (little endian), the dict padded with spaces and
   * a newline so that the data starts at a multiple of 64 bytes */
  size_t total = 10 + (size_t)n + 1;
  total = (total + 63) / 64 * 64;
  if (total > len || total - 10 > 65535) return -1;
  memcpy(buf, "\x93NUMPY\x01\x00", 8);
  buf[8] = (char)((total - 10) & 0xff);
  buf[9] = (char)((total - 10) >> 8);
  memcpy(buf + 10, dict, (size_t)n);
  memset(buf + 10 + n, ' ', total - 10 - (size_t)n - 1);
  buf[total - 1] = '\n';
  return (int)total;
}

size_t fp8_stream_npy_record_size(size_t ntensors, size_t nconfigs) {
  return 16 + ntensors * (4 + 4 + 1 + 1) + 4 * ntensors * nconfigs;
}

void fp8_stream_npy_put_record(FILE *fp, const fp8_stream_record *rec, size_t ntensors,
                               size_t nconfigs) {
  /* little-endian host (x86-64, aarch64): the arrays are written as they are in memory */
  fwrite(&rec->step, sizeof rec->step, 1, fp);
  fwrite(&rec->micro, sizeof rec->micro, 1, fp);
  fwrite(rec->amax, sizeof *rec->amax, ntensors, fp);
  fwrite(rec->te_scale, sizeof *rec->te_scale, ntensors, fp);
  fwrite(rec->snapshot, 1, ntensors, fp);
  fwrite(rec->warmup, 1, ntensors, fp);
  fwrite(rec->scale, sizeof *rec->scale, ntensors * nconfigs, fp);
}

char *fp8_stream_json_text(const fp8_stream_layout *ix) {
  json_t *root = json_object(), *tens = json_array(), *cfgs = json_array();
  if (!root || !tens || !cfgs) goto fail;
  json_object_set_new(root, SJ_VERSION, json_integer(1));
  json_object_set_new(root, SJ_RECORDS, json_integer((json_int_t)ix->nrec));
  for (size_t t = 0; t < ix->ntensors; t++) {
    json_t *o = json_object(), *fm = json_array();
    if (!o || !fm) {
      json_decref(o);
      json_decref(fm);
      goto fail;
    }
    json_object_set_new(o, SJ_NAME, json_string(ix->names[t]));
    json_object_set_new(o, SJ_ROLE, json_string(fp8_role_name(ix->roles[t])));
    for (size_t c = 0; c < ix->nconfigs; c++) /* null: the configuration does not apply */
      json_array_append_new(fm, ix->applies[t * ix->nconfigs + c]
                                    ? json_string(fp8_format_name(ix->formats[t * ix->nconfigs + c]))
                                    : json_null());
    json_object_set_new(o, SJ_FORMATS, fm);
    json_array_append_new(tens, o);
  }
  for (size_t c = 0; c < ix->nconfigs; c++) {
    const fp8_config *cf = ix->configs[c];
    json_array_append_new(cfgs, json_pack("{s:s, s:i, s:i, s:s}", SJ_RECIPE, cf->label,
                                          SJ_HISTORY_LEN, (int)cf->history_len, SJ_MARGIN,
                                          (int)cf->margin, SJ_AMAX_COMPUTE,
                                          fp8_amax_compute_name(cf->amax_compute)));
  }
  json_object_set_new(root, SJ_TENSORS, tens);
  json_object_set_new(root, SJ_CONFIGS, cfgs);
  char *text = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref(root);
  return text;
fail:
  json_decref(root);
  json_decref(tens);
  json_decref(cfgs);
  return NULL;
}

/* ------------------------------------------------------------------ the reader */

/* stream.json (next to stream.npy) into the table's series: every (tensor, configuration) whose
 * format is not null, tensor by tensor, configurations in order; *T and *C the record's
 * dimensions; map[s] the position t * C + c of series s. */
int stream_json_read(fp8_stream_table *t, const char *jpath, char *err, size_t errlen) {
  stream_priv *pv = t->priv_;
  size_t *T = &pv->T, *C = &pv->C, *nrec = &pv->nrec, **map = &pv->map;
  json_error_t je;
  json_t *root = json_load_file(jpath, JSON_REJECT_DUPLICATES, &je);
  char shown[FP8_ESC_LEN]; /* names and jansson's text, escaped for the one-line message */
  if (!root)
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%d: not JSON: %s (fp8lab writes it with "
                      "stream.npy)", jpath, je.line, fp8_esc(je.text, shown, sizeof shown));
  json_t *tens = json_object_get(root, SJ_TENSORS), *cfgs = json_object_get(root, SJ_CONFIGS);
  json_t *rec = json_object_get(root, SJ_RECORDS);
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
    json_t *o = json_array_get(tens, i), *fm = json_object_get(o, SJ_FORMATS);
    const char *name = json_string_value(json_object_get(o, SJ_NAME));
    const char *role = json_string_value(json_object_get(o, SJ_ROLE));
    if (!name || !role || !json_is_array(fm) || json_array_size(fm) != *C) {
      rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s: tensors[%zu]: expected name, role and %zu "
                      SJ_FORMATS, jpath, i, *C);
      break;
    }
    for (size_t c = 0; c < *C && !rc; c++) {
      json_t *f = json_array_get(fm, c), *cf = json_array_get(cfgs, c);
      if (json_is_null(f)) continue;
      const char *fs = json_string_value(f);
      const char *recipe = json_string_value(json_object_get(cf, SJ_RECIPE));
      const char *ac = json_string_value(json_object_get(cf, SJ_AMAX_COMPUTE));
      json_t *h = json_object_get(cf, SJ_HISTORY_LEN), *m = json_object_get(cf, SJ_MARGIN);
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
                   ? stream_new_series(&t->series[s], f8) : 0;
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

/* the scales of one block of tensors, transposed into series: at most this many bytes */
#define VISIT_BYTES ((size_t)64 << 20)
/* records read before they are transposed */
#define VISIT_RECS 64

int stream_npy_records(fp8_stream_table *t, FILE *fp, char *err, size_t errlen) {
  stream_priv *pv = t->priv_;
  const size_t T = pv->T, C = pv->C, nrec = pv->nrec;
  char want[FP8_STREAM_NPY_HEADER_MAX], got[FP8_STREAM_NPY_HEADER_MAX];
  int hn = fp8_stream_npy_header(nrec, T, C, want, sizeof want);
  if (hn < 0 || fread(got, 1, (size_t)hn, fp) != (size_t)hn || memcmp(got, want, (size_t)hn))
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: not the .npy header stream.json describes "
                      "(%zu records of %zu tensors x %zu configurations)", t->path, nrec, T, C);
  const size_t rs = fp8_stream_npy_record_size(T, C);
  pv->hn = (size_t)hn;
  pv->rs = rs;
  /* the file's size before any allocation: a record count the file cannot hold is bad input
   * (exit 2), not an out-of-memory; a file cut short is named at its first missing record */
  struct stat sb;
  if (fstat(fileno(fp), &sb) == 0 && S_ISREG(sb.st_mode)) {
    unsigned long long have = (unsigned long long)sb.st_size;
    if (nrec > have / (rs ? rs : 1) + 1)
      return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: %llu bytes, too short for the %zu "
                        "records stream.json describes", t->path, have, nrec);
    if (have > (unsigned long long)hn + (unsigned long long)nrec * rs)
      return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: bytes after the %zu records stream.json "
                        "describes", t->path, nrec);
  }
  const size_t tn = T * nrec + 1;
  unsigned char *buf = malloc(rs), *used = calloc(T + 1, 1);
  pv->step = malloc((nrec + 1) * sizeof *pv->step);
  pv->micro = malloc((nrec + 1) * sizeof *pv->micro);
  pv->amax = malloc(tn * sizeof *pv->amax);
  /* TE's scale, the snapshot and warm-up flags: zero almost everywhere (no te_scale at all
   * in most traces): zeroed pages that only their non-zero entries touch (an untouched page
   * reads as zero and takes no memory: 6 bytes a tensor and record, 0.5 GB of a MoE stream) */
  pv->te = calloc(tn, sizeof *pv->te);
  pv->snap = calloc(tn, 1);
  pv->warm = calloc(tn, 1);
  int rc = FP8_OK;
  if (!buf || !used || !pv->step || !pv->micro || !pv->amax || !pv->te || !pv->snap || !pv->warm) {
    rc = fp8_errorf(FP8_ENOMEM, err, errlen, "%s: out of memory", t->path);
    goto done;
  }
  for (size_t s = 0; s < t->nseries; s++) used[pv->map[s] / C] = 1;
  int64_t pstep = -1, pmicro = -1;
  for (size_t r = 0; r < nrec; r++) {
    long long off = (long long)hn + (long long)(r * rs);
    if (fread(buf, 1, rs, fp) != rs) {
      rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s: record %zu (byte %lld): the file ends "
                      "(%zu records expected)", t->path, r, off, nrec);
      goto done;
    }
    int64_t step, micro;
    memcpy(&step, buf, 8);
    memcpy(&micro, buf + 8, 8);
    const unsigned char *am = buf + 16, *te = am + 4 * T, *sn = te + 4 * T, *wu = sn + T,
                        *sc = wu + T;
    const char *bad = NULL;
    if (step < 0 || micro < 0) bad = "step and micro must be >= 0";
    else if (pstep >= 0 && (step < pstep || (step == pstep && micro <= pmicro)))
      bad = "steps (and a step's micro-batches) must ascend";
    /* each series' checks in series order, as stream.csv's rows are checked: a tensor's own
     * columns with its first series (its other series share them), every series' scale */
    size_t prev = SIZE_MAX;
    for (size_t s = 0; !bad && s < t->nseries; s++) {
      size_t ti = pv->map[s] / C;
      float v;
      memcpy(&v, sc + 4 * pv->map[s], 4);
      if (ti == prev) {
        if (!(v > 0) || isinf(v)) bad = "scale: expected a finite number > 0";
        continue;
      }
      prev = ti;
      float a, e;
      memcpy(&a, am + 4 * ti, 4);
      memcpy(&e, te + 4 * ti, 4);
      if (!(a >= 0)) bad = "amax: expected a number >= 0"; /* inf: as stream.csv's */
      else if (!(v > 0) || isinf(v)) bad = "scale: expected a finite number > 0";
      else if (sn[ti] > 1 || wu[ti] > 1) bad = "snapshot, warmup: expected 0 or 1";
      else if (!isnan(e) && (!(e > 0) || isinf(e)))
        bad = "te_scale: expected NaN (none) or a finite number > 0";
    }
    if (bad) {
      rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s: record %zu (byte %lld): %s", t->path, r, off,
                      bad);
      goto done;
    }
    pv->step[r] = step;
    pv->micro[r] = micro;
    for (size_t ti = 0; ti < T; ti++) {
      if (!used[ti]) continue;
      float a, e;
      memcpy(&a, am + 4 * ti, 4);
      memcpy(&e, te + 4 * ti, 4);
      pv->amax[ti * nrec + r] = a;
      if (!isnan(e)) pv->te[ti * nrec + r] = e; /* NaN: none, 0 */
      if (sn[ti]) pv->snap[ti * nrec + r] = sn[ti];
      if (wu[ti]) pv->warm[ti * nrec + r] = wu[ti];
    }
    if (step != pstep) t->nsteps++;
    t->nmicro++;
    pstep = step;
    pmicro = micro;
  }
  if (fgetc(fp) != EOF)
    rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s: bytes after the %zu records stream.json "
                    "describes", t->path, nrec);
  for (size_t s = 0; !rc && s < t->nseries; s++) {
    fp8_stream_series *x = &t->series[s];
    size_t o = pv->map[s] / C * nrec;
    x->n = nrec;
    x->step = pv->step;
    x->micro = pv->micro;
    x->amax = pv->amax + o;
    x->te_scale = pv->te + o;
    x->snapshot = pv->snap + o;
    x->warmup = pv->warm + o;
    x->scale = NULL; /* in the file: fp8_stream_visit, fp8_stream_keep */
  }
done:
  free(buf);
  free(used);
  return rc;
}

/* VISIT_BYTES; a test sets FP8LAB_TEST_VISIT_BYTES to make blocks of one tensor */
static size_t visit_bytes(void) {
  const char *e = getenv("FP8LAB_TEST_VISIT_BYTES");
  return e && *e ? (size_t)strtoull(e, NULL, 10) : VISIT_BYTES;
}

int fp8_stream_visit(const fp8_stream_table *t, const unsigned char *want,
                     int (*fn)(const fp8_stream_series *s, size_t k, void *ctx), void *ctx,
                     char *err, size_t errlen) {
  const stream_priv *pv = t ? t->priv_ : NULL;
  int fd = -1, rc = FP8_OK;
  float *blk = NULL, *reg = NULL;
  size_t k = 0;
  while (rc == FP8_OK && t && k < t->nseries) {
    if ((want && !want[k]) || t->series[k].scale) {
      if (!want || want[k]) rc = fn(&t->series[k], k, ctx);
      k++;
      continue;
    }
    /* stream.npy, the scales in the file: the block of tensors from series k's on */
    const size_t T = pv->T, C = pv->C, nrec = pv->nrec;
    size_t per = visit_bytes() / (4 * C * (nrec ? nrec : 1));
    size_t t0 = pv->map[k] / C, t1 = t0 + (per ? per : 1);
    if (t1 > T) t1 = T;
    size_t w = (t1 - t0) * C; /* floats of a record's block */
    if (fd < 0 && (fd = open(t->path, O_RDONLY)) < 0) {
      rc = fp8_errorf(FP8_EIO, err, errlen, "%s: cannot open: %s", t->path, strerror(errno));
      break;
    }
    free(blk);
    free(reg);
    /* the transposing buffer holds VISIT_RECS records' blocks, or every record when there
     * are fewer (a short run of many tensors: its block is wide, VISIT_BYTES / 4 nrec C
     * tensors, and 64 of its records would be 64 / nrec times the block itself) */
    blk = malloc((w * nrec + 1) * sizeof *blk);
    reg = malloc(((nrec < VISIT_RECS ? nrec : VISIT_RECS) * w + 1) * sizeof *reg);
    if (!blk || !reg) {
      rc = fp8_errorf(FP8_ENOMEM, err, errlen, "%s: out of memory", t->path);
      break;
    }
    /* VISIT_RECS records' blocks at a time, transposed into the series (runs of VISIT_RECS
     * floats: written a column at a time, the series 40 KB apart, each float was a miss) */
    for (size_t r0 = 0; r0 < nrec && rc == FP8_OK; r0 += VISIT_RECS) {
      size_t nr = nrec - r0 < VISIT_RECS ? nrec - r0 : VISIT_RECS;
      for (size_t q = 0; q < nr; q++) {
        size_t r = r0 + q;
        off_t off = (off_t)(pv->hn + r * pv->rs + 16 + 10 * T + 4 * C * t0);
        if (pread(fd, reg + q * w, 4 * w, off) != (ssize_t)(4 * w)) {
          rc = fp8_errorf(FP8_EIO, err, errlen, "%s: record %zu: cannot read (the file changed "
                          "since it was loaded?)", t->path, r);
          break;
        }
      }
      for (size_t j = 0; rc == FP8_OK && j < w; j++) {
        float *dst = blk + j * nrec + r0;
        for (size_t q = 0; q < nr; q++) dst[q] = reg[q * w + j];
      }
    }
    for (; rc == FP8_OK && k < t->nseries && pv->map[k] / C < t1; k++) {
      if (want && !want[k]) continue;
      if (t->series[k].scale) {
        rc = fn(&t->series[k], k, ctx);
        continue;
      }
      fp8_stream_series s = t->series[k];
      s.scale = blk + (pv->map[k] - t0 * C) * nrec;
      rc = fn(&s, k, ctx);
    }
  }
  if (fd >= 0) close(fd);
  free(blk);
  free(reg);
  return rc;
}

typedef struct {
  fp8_stream_table *t;
  char *err;
  size_t errlen;
} keep_ctx;

static int keep_one(const fp8_stream_series *s, size_t k, void *ctx) {
  keep_ctx *kc = ctx;
  fp8_stream_series *x = &kc->t->series[k];
  if (x->scale) return FP8_OK;
  float *v = malloc((s->n + 1) * sizeof *v);
  if (!v) return fp8_errorf(FP8_ENOMEM, kc->err, kc->errlen, "%s: out of memory", kc->t->path);
  memcpy(v, s->scale, s->n * sizeof *v);
  x->scale = v;
  return FP8_OK;
}

int fp8_stream_keep(fp8_stream_table *t, const unsigned char *want, char *err, size_t errlen) {
  keep_ctx kc = {t, err, errlen};
  return fp8_stream_visit(t, want, keep_one, &kc, err, errlen);
}
