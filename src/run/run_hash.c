/* run_hash.c: the SHA-256 of every input of the run (run.json's inputs[].sha256, issue 41),
 * computed on threads beside the replay: started when the replay starts, joined before the
 * commit. Hashing is one more read of every input (about 1.5 GB/s a core with the CPU's SHA
 * instructions, OpenSSL's libcrypto); on threads of its own it costs the run the time by which
 * it outlasts the replay (bench/README.md, "The inputs' SHA-256"). Process 0's alone under MPI
 * (it writes run.json, and it hashes every rank's files). */
#define _GNU_SOURCE /* pthread_setname_np: the threads show as fp8lab-sha256 in top and perf */
#include "runner_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sha256.h"
#include "util.h"

#define HASH_THREADS_MAX 4

struct run_hash {
  fp8_run_inputs in;
  pthread_t tid[HASH_THREADS_MAX];
  int nthreads;
  atomic_size_t next; /* the next input to hash */
  atomic_int stop;    /* the run failed (or a hash did): the others end at their next read */
  pthread_mutex_t lock;
  size_t failed;      /* the first failing input (in list order), in->n: none */
  int rc;
  char err[FP8_ERRLEN];
};

static void *hasher(void *arg) {
  struct run_hash *h = arg;
  pthread_setname_np(pthread_self(), "fp8lab-sha256");
  for (;;) {
    size_t i = atomic_fetch_add(&h->next, 1);
    if (i >= h->in.n || atomic_load(&h->stop)) break;
    char err[FP8_ERRLEN];
    int rc = fp8_sha256_file(h->in.path[i], &h->stop, &h->in.id[i], h->in.sha256[i], err,
                             sizeof err);
    if (rc == FP8_OK) continue;
    h->in.sha256[i][0] = '\0';
    pthread_mutex_lock(&h->lock);
    if (i < h->failed && !atomic_load(&h->stop)) { /* not a "stopped" of another's failure */
      h->failed = i;
      h->rc = rc;
      snprintf(h->err, sizeof h->err, "%s", err);
    }
    pthread_mutex_unlock(&h->lock);
    atomic_store(&h->stop, 1);
  }
  return NULL;
}

void run_hash_start(run_t *r, const fp8_trace *tr, const char *trace_dir) {
  struct run_hash *h = calloc(1, sizeof *h);
  if (!h) return; /* run_hash_finish lists and hashes them */
  r->hash = h;
  if (fp8_run_inputs_list(r->ex, tr, trace_dir, &h->in) != FP8_OK ||
      pthread_mutex_init(&h->lock, NULL) != 0) {
    fp8_run_inputs_free(&h->in);
    free(h);
    r->hash = NULL;
    return;
  }
  h->failed = h->in.n;
  /* the cores the replay leaves free, at least one thread (it then shares a core) */
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  long free_cores = cpus - (r->opt->threads > 0 ? r->opt->threads : 1);
  int want = r->split || free_cores < 1 ? 1 : free_cores > HASH_THREADS_MAX ? HASH_THREADS_MAX
                                                                             : (int)free_cores;
  if ((size_t)want > h->in.n) want = (int)h->in.n;
  while (h->nthreads < want && pthread_create(&h->tid[h->nthreads], NULL, hasher, h) == 0)
    h->nthreads++;
}

/* Joins the threads (after stop when the run failed). */
static void join_all(struct run_hash *h) {
  for (int k = 0; k < h->nthreads; k++) pthread_join(h->tid[k], NULL);
  h->nthreads = 0;
}

int run_hash_finish(run_t *r, const fp8_run_inputs **out, const fp8_trace *tr,
                    const char *trace_dir, char *err, size_t errlen) {
  struct run_hash *h = r->hash;
  *out = NULL;
  if (!h) { /* not started (out of memory then): listed and hashed now */
    run_hash_start(r, tr, trace_dir);
    if (!(h = r->hash)) return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  }
  join_all(h);
  if (h->failed < h->in.n) return fp8_errorf(h->rc, err, errlen, "%s", h->err);
  /* what no thread took (none could start): hashed here */
  int rc = fp8_run_inputs_hash(&h->in, err, errlen);
  if (rc == FP8_OK) *out = &h->in;
  return rc;
}

void run_hash_free(run_t *r) {
  struct run_hash *h = r->hash;
  if (!h) return;
  atomic_store(&h->stop, 1);
  join_all(h);
  pthread_mutex_destroy(&h->lock);
  fp8_run_inputs_free(&h->in);
  free(h);
  r->hash = NULL;
}
