/* streamread.c: stream.npy's records into a stream table (tables.h, issue 27), and the reading
 * of the scales that stay in the file (fp8_stream_visit, fp8_stream_keep).
 *
 * A 70B-shaped run is 10^4 records of 1,680 tensors x 24 configurations: 4 x 10^8 rows, 30
 * bytes each if every series held its columns (12 GB). What a tensor's configurations share
 * (step, micro, amax, te_scale, snapshot, warmup: 10 bytes a tensor and record) is held once;
 * the scales, 4 bytes a row and most of the file, are checked on the way and read again when
 * asked for: by blocks of tensors (a contiguous range of each record), a block's series at a
 * time, in bounded memory (VISIT_BYTES). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "results.h"
#include "stream_internal.h"

/* the scales of one block of tensors, transposed into series: at most this many bytes */
#define VISIT_BYTES ((size_t)64 << 20)
/* records read before they are transposed */
#define VISIT_RECS 64

int stream_npy_records(fp8_stream_table *t, FILE *fp, char *err, size_t errlen) {
  stream_priv *pv = t->priv_;
  const size_t T = pv->T, C = pv->C, nrec = pv->nrec;
  char want[FP8_STREAMNPY_HEADER_MAX], got[FP8_STREAMNPY_HEADER_MAX];
  int hn = fp8_streamnpy_header(nrec, T, C, want, sizeof want);
  if (hn < 0 || fread(got, 1, (size_t)hn, fp) != (size_t)hn || memcmp(got, want, (size_t)hn))
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: not the .npy header stream.json describes "
                      "(%zu records of %zu tensors x %zu configurations)", t->path, nrec, T, C);
  const size_t rs = fp8_streamnpy_record_size(T, C);
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
  pv->te = malloc(tn * sizeof *pv->te);
  pv->snap = malloc(tn);
  pv->warm = malloc(tn);
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
      pv->te[ti * nrec + r] = isnan(e) ? 0.0f : e;
      pv->snap[ti * nrec + r] = sn[ti];
      pv->warm[ti * nrec + r] = wu[ti];
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
    blk = malloc((w * nrec + 1) * sizeof *blk);
    reg = malloc((VISIT_RECS * w + 1) * sizeof *reg);
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
