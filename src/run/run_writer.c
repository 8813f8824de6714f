/* run_writer.c: the one path of steps.csv's rows and the stream's records to their writers
 * (runner_internal.h): the row writer thread beside the step loop, or the loop itself.
 *
 * A sweep's rows grow with its configurations: a 24-configuration stream.csv has 24 rows for
 * each row of one, and steps.csv 24 rows per tensor and snapshot. Their text cost a
 * single-threaded replay as much as all of the sweep's quantization (issue 27: K=24 took
 * 2.2-2.5x K=1 with the stream, 1.3x without it). So the step loop only gathers what the rows
 * need into jobs, in order (a (step, micro-batch)'s stream record, results.h
 * fp8_stream_record: the scales the engines hold, the amaxes, TE's scales, the snapshot and
 * warm-up flags; a part's steps.csv rows with their statistics), and this thread hands them to
 * the writers (fp8_stream_writer_put, fp8_steps_csv_put_row) while the next steps replay. The
 * same calls write them on the loop's thread when there is no thread: the bytes are the same
 * either way (one thread writes each file).
 *
 * The loop waits only while the jobs in flight hold more than JOB_BYTES (steps between
 * snapshots are cheap for the loop and not for the writer: the jobs carry their rows over the
 * next snapshot's work). Whatever touches the files from the loop's side (a checkpoint's flush
 * and offsets, the commit, the close) drains the jobs first (run_writer_drain): the thread then
 * sleeps and holds nothing of them. A failed write is kept (the file, the first errno) and
 * fails the run at the next step's check or drain. Without the thread (it could not start, or
 * MPI, where steps.csv is assembled from the processes' parts) the loop writes the rows itself;
 * so it does when a job cannot be allocated, after the jobs before it are written.
 */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* pthread_setname_np: the thread shows as fp8lab-rows in top and perf */
#endif
#include <errno.h>
#include <pthread.h>
#include <stddef.h> /* offsetof */
#include <stdlib.h>
#include <string.h>

#include "runner_internal.h"
#include "util.h"

#define JOB_BYTES ((size_t)32 << 20) /* jobs in flight, at most (one job may be larger) */

/* one steps.csv row, its statistics held by value */
typedef struct {
  fp8_steps_row row;
  fp8_stats st;
  fp8_block_stats bl;
} job_row;

typedef struct job {
  struct job *next;
  size_t bytes;
  int steps;                  /* 1: steps.csv rows; 0: a stream record */
  fp8_stream_record rec;      /* a stream record */
  /* steps.csv rows */
  size_t nrows, cap;
  job_row *rows;
} job;

struct run_writer {
  pthread_t tid;
  pthread_mutex_t lock;
  pthread_cond_t filled, freed; /* a job to write; a job written */
  job *head, *tail;             /* the jobs, in order */
  job *spare;                   /* stream records written, for reuse */
  size_t bytes;                 /* held by the queued jobs and the one being written */
  int stop, werr;               /* asked to end; the first failed errno */
  const char *wfile;            /* the file of that failure */
  /* read-only while the thread runs */
  fp8_stream_writer *stream;    /* the stream's writer when the thread writes it (else NULL) */
  FILE *stream_fp, *steps_fp;   /* the files the thread writes (NULL: the loop writes it) */
  size_t ntensors, nconfigs;    /* the stream's layout: a record's T and C */
};

static void free_job(job *j) {
  if (!j) return;
  fp8_stream_record_free(&j->rec);
  free(j->rows);
  free(j);
}

/* The rows of one job (the thread's side, the lock not held); 0 or the failed errno. */
static int write_job(const run_writer *w, const job *j) {
  errno = 0;
  if (j->steps) {
    for (size_t k = 0; k < j->nrows; k++) fp8_steps_csv_put_row(w->steps_fp, &j->rows[k].row);
    return ferror(w->steps_fp) ? (errno ? errno : EIO) : 0;
  }
  fp8_stream_writer_put(w->stream, &j->rec);
  return ferror(w->stream_fp) ? (errno ? errno : EIO) : 0;
}

static void *writer(void *arg) {
  run_writer *w = arg;
#ifdef __linux__
  pthread_setname_np(pthread_self(), "fp8lab-rows");
#endif
  pthread_mutex_lock(&w->lock);
  for (;;) {
    while (!w->head && !w->stop) pthread_cond_wait(&w->filled, &w->lock);
    job *j = w->head;
    if (!j) break; /* stop, and nothing left */
    pthread_mutex_unlock(&w->lock);
    int e = write_job(w, j);
    pthread_mutex_lock(&w->lock);
    if (e && !w->werr) {
      w->werr = e;
      w->wfile = j->steps ? fp8_schema_steps.file : fp8_schema_stream.file;
    }
    w->head = j->next;
    if (!w->head) w->tail = NULL;
    w->bytes -= j->bytes;
    if (j->steps) {
      free_job(j);
    } else {
      j->next = w->spare;
      w->spare = j;
    }
    pthread_cond_broadcast(&w->freed);
  }
  pthread_mutex_unlock(&w->lock);
  return NULL;
}

void run_writer_start(run_t *r) {
  /* MPI: steps.csv is assembled from the processes' parts (run_split.c), the loop writes */
  if (r->sw || r->split) return;
  /* stream.npy: a record is one fwrite, the loop writes it */
  fp8_stream_writer *stream = r->stream_w && !r->stream_npy ? r->stream_w : NULL;
  if (!stream && !r->steps_fp) return;
  run_writer *w = calloc(1, sizeof *w);
  if (!w) return;
  w->stream = stream;
  w->stream_fp = stream ? r->stream_fp : NULL;
  w->steps_fp = r->steps_fp;
  w->ntensors = r->stream_lay.ntensors;
  w->nconfigs = r->stream_lay.nconfigs;
  int ok = pthread_mutex_init(&w->lock, NULL) == 0;
  int ok1 = ok && pthread_cond_init(&w->filled, NULL) == 0;
  int ok2 = ok1 && pthread_cond_init(&w->freed, NULL) == 0;
  if (ok2 && pthread_create(&w->tid, NULL, writer, w) == 0) {
    r->sw = w;
    return;
  }
  if (ok2) pthread_cond_destroy(&w->freed);
  if (ok1) pthread_cond_destroy(&w->filled);
  if (ok) pthread_mutex_destroy(&w->lock);
  free(w);
}

int run_writer_owns(const run_t *r, const FILE *fp) {
  return r->sw && fp && (fp == r->sw->stream_fp || fp == r->sw->steps_fp);
}

static int write_failed(const run_t *r, const char *file, int e, char *err, size_t errlen) {
  return fp8_errorf(FP8_EWRITE, err, errlen, "%s/%s: write failed: %s", r->out, file, strerror(e));
}

int run_writer_error(run_t *r, char *err, size_t errlen) {
  run_writer *w = r->sw;
  if (!w) return FP8_OK;
  pthread_mutex_lock(&w->lock);
  int e = w->werr;
  const char *f = w->wfile;
  pthread_mutex_unlock(&w->lock);
  return e ? write_failed(r, f, e, err, errlen) : FP8_OK;
}

/* Waits until the jobs in flight leave room for `bytes` more (or none is left), then queues j
 * (NULL: only the wait). The failed errno (and its file), or 0. */
static int queue_job(run_writer *w, job *j, size_t bytes, const char **file) {
  pthread_mutex_lock(&w->lock);
  while (w->head && w->bytes + bytes > JOB_BYTES && !w->werr)
    pthread_cond_wait(&w->freed, &w->lock);
  int e = w->werr;
  *file = w->wfile;
  if (j && !e) {
    j->next = NULL;
    j->bytes = bytes;
    if (w->tail) w->tail->next = j;
    else w->head = j;
    w->tail = j;
    w->bytes += bytes;
    pthread_cond_signal(&w->filled);
  }
  pthread_mutex_unlock(&w->lock);
  return e;
}

/* A stream record's job: a written one, or a new one (NULL: out of memory). */
static job *stream_job(run_writer *w) {
  pthread_mutex_lock(&w->lock);
  job *j = w->spare;
  if (j) w->spare = j->next;
  pthread_mutex_unlock(&w->lock);
  if (j) return j;
  if (!(j = calloc(1, sizeof *j))) return NULL;
  if (fp8_stream_record_init(&j->rec, w->ntensors, w->nconfigs) != FP8_OK) {
    free(j);
    return NULL;
  }
  return j;
}

/* the thread writes the stream */
static int writes_stream(const run_t *r) { return r->sw && r->sw->stream; }

/* the job of a record run_writer_stream_begin gave out */
static job *job_of(fp8_stream_record *rec) { return (job *)((char *)rec - offsetof(job, rec)); }

fp8_stream_record *run_writer_stream_begin(run_t *r) {
  if (!writes_stream(r)) return &r->stream_rec;
  job *j = stream_job(r->sw);
  return j ? &j->rec : NULL;
}

void run_writer_stream_drop(run_t *r, fp8_stream_record *rec) {
  if (writes_stream(r)) free_job(job_of(rec));
}

int run_writer_stream_end(run_t *r, fp8_stream_record *rec, char *err, size_t errlen) {
  if (!writes_stream(r)) { /* the loop's thread writes it, now */
    fp8_stream_writer_put(r->stream_w, rec);
    return FP8_OK;
  }
  run_writer *w = r->sw;
  job *j = job_of(rec);
  const char *file;
  size_t bytes = fp8_stream_npy_record_size(w->ntensors, w->nconfigs); /* what the job holds */
  j->steps = 0;
  int e = queue_job(w, j, bytes, &file);
  if (e) {
    free_job(j);
    return write_failed(r, file, e, err, errlen);
  }
  return FP8_OK;
}

run_writer_rows *run_writer_steps_begin(run_t *r, size_t maxrows) {
  run_writer *w = r->sw;
  if (!w || !w->steps_fp || !maxrows) return NULL;
  job *j = calloc(1, sizeof *j);
  if (j && !(j->rows = malloc(maxrows * sizeof *j->rows))) {
    free(j);
    j = NULL;
  }
  if (!j) { /* the loop writes these rows itself, after those queued */
    char err[8];
    (void)run_writer_drain(r, err, sizeof err);
    return NULL;
  }
  j->steps = 1;
  j->cap = maxrows;
  return (run_writer_rows *)j;
}

void run_writer_steps_row(run_t *r, run_writer_rows *b, const fp8_steps_row *row) {
  if (!b) { /* no thread (or no batch): the row now */
    fp8_steps_csv_put_row(r->steps_fp, row);
    return;
  }
  job *j = (job *)b;
  if (j->nrows == j->cap) return; /* (the caller's maxrows bounds its rows) */
  job_row *k = &j->rows[j->nrows++];
  k->row = *row;
  k->st = *row->stats;
  k->bl = *row->block;
  k->row.stats = &k->st;
  k->row.block = &k->bl;
}

void run_writer_steps_end(run_t *r, run_writer_rows *b) {
  job *j = (job *)b;
  if (!j) return;
  const char *file;
  /* (a failed write is reported by the step's check: these rows would go nowhere) */
  if (queue_job(r->sw, j, sizeof *j + j->nrows * sizeof *j->rows, &file)) free_job(j);
}

int run_writer_drain(run_t *r, char *err, size_t errlen) {
  run_writer *w = r->sw;
  if (!w) return FP8_OK;
  pthread_mutex_lock(&w->lock);
  while (w->head) pthread_cond_wait(&w->freed, &w->lock);
  int e = w->werr;
  const char *f = w->wfile;
  pthread_mutex_unlock(&w->lock);
  return e ? write_failed(r, f, e, err, errlen) : FP8_OK;
}

void run_writer_stop(run_t *r) {
  run_writer *w = r->sw;
  if (!w) return;
  pthread_mutex_lock(&w->lock);
  w->stop = 1;
  pthread_cond_signal(&w->filled);
  pthread_mutex_unlock(&w->lock);
  pthread_join(w->tid, NULL); /* (what was queued is written first) */
  pthread_cond_destroy(&w->freed);
  pthread_cond_destroy(&w->filled);
  pthread_mutex_destroy(&w->lock);
  while (w->spare) {
    job *j = w->spare;
    w->spare = j->next;
    free_job(j);
  }
  free(w);
  r->sw = NULL;
}
