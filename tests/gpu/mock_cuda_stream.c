/* mock_cuda_stream.c: the streams, events and synchronisation calls of the host-memory CUDA
 * runtime (tests/gpu/mock_cuda.c has the rest), and the stream-ordering log (mock_cuda.h).
 *
 * In the mock every call runs when it is issued, so nothing here waits: a stream is a checked
 * handle that remembers its creation flags, an event holds the host time it was recorded at
 * (cudaEventElapsedTime). What CUDA would order is not observable by running; while logging is
 * on, every call that takes part in stream ordering appends a mock_cuda_op (this file's calls,
 * mock_cuda.c's copies, memsets and cublasLtMatmul, the emulator's launches, mock_nccl.c's
 * all-reduce), and tests/gpu/hb_check.c computes CUDA's happens-before relation over the log.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "mock_cuda.h"

/* ---------------------------------------------------------------- the log */

static int log_on;
static mock_cuda_op *log_ops;
static size_t log_n, log_cap;

/* Streams and events destroyed while logging: kept until the next start or stop, so that the
 * allocator cannot hand the same address to a new stream or event within one log. */
typedef struct mock_stream mock_stream;
typedef struct mock_event mock_event;
static mock_stream *dead_streams;
static mock_event *dead_events;
static void free_dead(void);

void mock_cuda_log_start(void) {
  free_dead();
  log_n = 0;
  log_on = 1;
}
void mock_cuda_log_stop(void) {
  log_on = 0;
  free_dead();
}
int mock_cuda_logging(void) { return log_on; }
const mock_cuda_op *mock_cuda_log(size_t *n) {
  *n = log_n;
  return log_n ? log_ops : NULL;
}

static unsigned stream_flags(cudaStream_t s);

void mock_cuda_log_op(mock_op_kind kind, cudaStream_t stream, cudaEvent_t event,
                      const char *what) {
  if (!log_on) return;
  if (log_n == log_cap) {
    const size_t cap = log_cap ? 2 * log_cap : 256;
    mock_cuda_op *p = realloc(log_ops, cap * sizeof *p);
    if (!p) {
      fprintf(stderr, "mock_cuda: the stream-ordering log cannot grow past %zu entries\n", log_n);
      abort();
    }
    log_ops = p, log_cap = cap;
  }
  const int has_stream = kind != MOCK_OP_EVENT_SYNC && kind != MOCK_OP_DEVICE_SYNC;
  if (stream == cudaStreamLegacy) stream = 0; /* one name for the legacy stream */
  log_ops[log_n++] = (mock_cuda_op){kind, has_stream ? (const void *)stream : NULL,
                                    (const void *)event, what,
                                    has_stream ? stream_flags(stream) : 0u};
}

/* ---------------------------------------------------------------- streams */

struct mock_stream {
  unsigned magic;
  unsigned flags; /* cudaStreamNonBlocking or 0 */
  struct mock_stream *next;
};
#define STREAM_MAGIC 0x57AEA3u
static mock_stream *streams;

int mock_cuda_stream_valid(cudaStream_t s) {
  if (s == 0 || s == cudaStreamLegacy || s == cudaStreamPerThread) return 1;
  for (mock_stream *m = streams; m; m = m->next)
    if ((cudaStream_t)m == s) return 1;
  return 0;
}
/* The legacy and per-thread default streams are blocking (flags 0). */
static unsigned stream_flags(cudaStream_t s) {
  for (mock_stream *m = streams; m; m = m->next)
    if ((cudaStream_t)m == s) return m->flags;
  return 0;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags) {
  if (flags & ~(unsigned)cudaStreamNonBlocking) {
    fprintf(stderr, "mock_cuda: cudaStreamCreateWithFlags: flags 0x%x, expected 0 or "
                    "cudaStreamNonBlocking\n", flags);
    return cudaErrorInvalidValue;
  }
  mock_stream *m = calloc(1, sizeof *m);
  if (!m) return cudaErrorMemoryAllocation;
  m->magic = STREAM_MAGIC;
  m->flags = flags;
  m->next = streams;
  streams = m;
  *s = (cudaStream_t)m;
  mock_cuda_log_op(MOCK_OP_STREAM_CREATE, *s, NULL, "cudaStreamCreateWithFlags");
  return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t *s) { return cudaStreamCreateWithFlags(s, 0); }
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  for (mock_stream **p = &streams; *p; p = &(*p)->next)
    if ((cudaStream_t)*p == s) {
      mock_stream *m = *p;
      *p = m->next;
      m->magic = 0;
      if (log_on) m->next = dead_streams, dead_streams = m;
      else free(m);
      return cudaSuccess;
    }
  fprintf(stderr, "mock_cuda: cudaStreamDestroy: %p is not a live stream\n", (void *)s);
  return cudaErrorInvalidResourceHandle;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  if (!mock_cuda_stream_valid(s)) {
    fprintf(stderr, "mock_cuda: cudaStreamSynchronize: %p is not a live stream\n", (void *)s);
    return cudaErrorInvalidResourceHandle;
  }
  mock_cuda_log_op(MOCK_OP_STREAM_SYNC, s, NULL, "cudaStreamSynchronize");
  return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize(void) {
  mock_cuda_log_op(MOCK_OP_DEVICE_SYNC, 0, NULL, "cudaDeviceSynchronize");
  return cudaSuccess;
}

/* ---------------------------------------------------------------- events */

/* An event holds the host time it was recorded at. */
struct mock_event {
  struct timespec t;
  struct mock_event *dead_next;
};

cudaError_t cudaEventCreate(cudaEvent_t *e) {
  *e = (cudaEvent_t)calloc(1, sizeof(mock_event));
  return *e ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags) {
  (void)flags;
  return cudaEventCreate(e);
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  mock_event *m = (mock_event *)e;
  if (m && log_on) m->dead_next = dead_events, dead_events = m;
  else free(m);
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  if (!mock_cuda_stream_valid(s)) return cudaErrorInvalidResourceHandle;
  timespec_get(&((mock_event *)e)->t, TIME_UTC);
  mock_cuda_log_op(MOCK_OP_RECORD, s, e, "cudaEventRecord");
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  mock_cuda_log_op(MOCK_OP_EVENT_SYNC, 0, e, "cudaEventSynchronize");
  return cudaSuccess;
}
/* Always complete: work runs when issued. Not logged: a query that happens to succeed is no
 * wait the program can rely on (leaving it out can only make the checker claim less order). */
cudaError_t cudaEventQuery(cudaEvent_t e) {
  (void)e;
  return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags) {
  (void)flags;
  if (!mock_cuda_stream_valid(s)) return cudaErrorInvalidResourceHandle;
  mock_cuda_log_op(MOCK_OP_WAIT, s, e, "cudaStreamWaitEvent");
  return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
  const struct timespec *a = &((const mock_event *)start)->t, *b = &((const mock_event *)end)->t;
  *ms = (float)((double)(b->tv_sec - a->tv_sec) * 1e3 + (double)(b->tv_nsec - a->tv_nsec) * 1e-6);
  return cudaSuccess;
}

static void free_dead(void) {
  while (dead_streams) {
    mock_stream *m = dead_streams;
    dead_streams = m->next;
    free(m);
  }
  while (dead_events) {
    mock_event *m = dead_events;
    dead_events = m->dead_next;
    free(m);
  }
}
