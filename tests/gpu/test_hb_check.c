/* test_hb_check.c: the mock runtime's stream-ordering log (mock_cuda.h) and the happens-before
 * checker over it (hb_check.h), on hand-made cases whose answer CUDA's documentation fixes:
 *  - the log: off by default, cleared by log_start, silent after log_stop; one entry per
 *    ordering call with its stream, event, name and the stream's creation flags; the legacy
 *    stream under one name; refused calls not logged; the synchronous copies as CUDA's "API
 *    synchronization behavior" describes them; cublasLtMatmul and ncclAllReduce on their stream;
 *  - the relation: same-stream order; no order between streams without events; record + wait
 *    one way only; a wait issued before the record; a re-recorded event (the latest record
 *    before the wait counts); chains through a third stream; cudaStreamSynchronize,
 *    cudaEventSynchronize and cudaDeviceSynchronize; the legacy stream against blocking and
 *    non-blocking streams; the synchronous copies are no device-wide synchronisation;
 *  - hb_record_of with 0, 1 and 2 records.
 * Work is cudaMemsetAsync on a small device buffer (the emulator's kernel launches are logged
 * the same way: test_cuda_emu checks that). Label cpu (tests/gpu/gpu_harness.h).
 */
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_harness.h"
#include "hb_check.h"
#include "mock_cuda.h"
#ifdef FP8LAB_HAVE_NCCL
#include <nccl.h>
#endif

static char *dbuf; /* device memory the WORK entries write */

static size_t log_len(void) {
  size_t n;
  mock_cuda_log(&n);
  return n;
}
/* One piece of work on s; returns its log entry. */
static size_t work(cudaStream_t s) {
  if (cudaMemsetAsync(dbuf, 0, 16, s) != cudaSuccess) abort();
  return log_len() - 1;
}
static size_t record(cudaEvent_t e, cudaStream_t s) {
  if (cudaEventRecord(e, s) != cudaSuccess) abort();
  return log_len() - 1;
}
static void wait_event(cudaStream_t s, cudaEvent_t e) {
  if (cudaStreamWaitEvent(s, e, 0) != cudaSuccess) abort();
}
static cudaStream_t new_stream(unsigned flags) {
  cudaStream_t s;
  if (cudaStreamCreateWithFlags(&s, flags) != cudaSuccess) abort();
  return s;
}
static cudaEvent_t new_event(void) {
  cudaEvent_t e;
  if (cudaEventCreate(&e) != cudaSuccess) abort();
  return e;
}
/* The relation over the log so far (hb_build returns NULL only when memory runs out). */
static hb_graph *graph(void) {
  size_t n;
  const mock_cuda_op *ops = mock_cuda_log(&n);
  hb_graph *g = hb_build(ops, n);
  if (!g) {
    fprintf(stderr, "hb_build: out of memory\n");
    abort();
  }
  return g;
}

#define EXPECT_HB(g, a, b, want)                                                          \
  GH_CHECK(hb_before(g, a, b) == (want), "hb_before(%s, %s) = %d, expected %d", #a, #b, \
           hb_before(g, a, b), want)

/* ------------------------------------------------------------------ the log */

/* The end of a case: its graph freed, the log stopped, its streams and events destroyed. */
static void end_case(hb_graph *g, const cudaStream_t *s, size_t ns, const cudaEvent_t *e,
                     size_t ne) {
  hb_free(g);
  mock_cuda_log_stop();
  for (size_t i = 0; i < ne; i++) cudaEventDestroy(e[i]);
  for (size_t i = 0; i < ns; i++) cudaStreamDestroy(s[i]);
}

static void test_log_off_by_default(void) {
  cudaStream_t s = new_stream(0);
  cudaEvent_t e = new_event();
  work(s);
  cudaEventRecord(e, s);
  cudaStreamWaitEvent(0, e, 0);
  cudaStreamSynchronize(s);
  cudaDeviceSynchronize();
  size_t n = 99;
  const mock_cuda_op *ops = mock_cuda_log(&n);
  GH_CHECK(n == 0 && ops == NULL, "before mock_cuda_log_start: %zu entries, expected none", n);
  mock_cuda_log_start();
  work(s);
  GH_CHECK(log_len() == 1, "one call logged: %zu entries", log_len());
  mock_cuda_log_start();
  GH_CHECK(log_len() == 0, "after a second start: %zu entries, expected none", log_len());
  work(s);
  work(s);
  mock_cuda_log_stop();
  work(s);
  cudaDeviceSynchronize();
  GH_CHECK(log_len() == 2, "after stop: %zu entries, expected the 2 logged before it",
           log_len());
  cudaEventDestroy(e);
  cudaStreamDestroy(s);
}

/* Entry i is (kind, stream, event, what, flags). */
static void expect_entry(size_t i, mock_op_kind kind, const void *stream, const void *event,
                         const char *what, unsigned flags) {
  size_t n;
  const mock_cuda_op *ops = mock_cuda_log(&n);
  if (i >= n) {
    GH_CHECK(0, "entry %zu (%s) missing: the log has %zu entries", i, what, n);
    return;
  }
  const mock_cuda_op *o = &ops[i];
  GH_CHECK(o->kind == kind && o->stream == stream && o->event == event && o->flags == flags &&
               strcmp(o->what, what) == 0,
           "entry %zu: kind %d stream %p event %p what %s flags %u; expected %d %p %p %s %u", i,
           (int)o->kind, o->stream, o->event, o->what, o->flags, (int)kind, stream, event, what,
           flags);
}

static void test_log_entries(void) {
  mock_cuda_log_start();
  cudaStream_t nb = new_stream(cudaStreamNonBlocking), bl = new_stream(0);
  cudaEvent_t e = new_event();
  expect_entry(0, MOCK_OP_STREAM_CREATE, nb, NULL, "cudaStreamCreateWithFlags", 1);
  expect_entry(1, MOCK_OP_STREAM_CREATE, bl, NULL, "cudaStreamCreateWithFlags", 0);
  work(nb);
  expect_entry(2, MOCK_OP_WORK, nb, NULL, "cudaMemsetAsync", cudaStreamNonBlocking);
  cudaEventRecord(e, nb);
  expect_entry(3, MOCK_OP_RECORD, nb, e, "cudaEventRecord", cudaStreamNonBlocking);
  cudaStreamWaitEvent(bl, e, 0);
  expect_entry(4, MOCK_OP_WAIT, bl, e, "cudaStreamWaitEvent", 0);
  cudaStreamSynchronize(nb);
  expect_entry(5, MOCK_OP_STREAM_SYNC, nb, NULL, "cudaStreamSynchronize", 1);
  cudaEventSynchronize(e);
  expect_entry(6, MOCK_OP_EVENT_SYNC, NULL, e, "cudaEventSynchronize", 0);
  cudaDeviceSynchronize();
  expect_entry(7, MOCK_OP_DEVICE_SYNC, NULL, NULL, "cudaDeviceSynchronize", 0);
  work(cudaStreamLegacy);
  expect_entry(8, MOCK_OP_WORK, NULL, NULL, "cudaMemsetAsync", 0); /* the legacy stream is 0 */
  work(cudaStreamPerThread);
  expect_entry(9, MOCK_OP_WORK, cudaStreamPerThread, NULL, "cudaMemsetAsync", 0);
  char host[64] = {0};
  size_t n0 = log_len();
  printf("(the mock_cuda line on stderr is expected: a refused call)\n");
  fflush(stdout);
  GH_CHECK(cudaMemsetAsync(host, 0, 8, nb) == cudaErrorInvalidValue, "memset of host memory");
  GH_CHECK(log_len() == n0, "a refused call was logged (%zu entries, expected %zu)", log_len(),
           n0);
  /* the synchronous copies: legacy-stream work; the host waits before a pageable
   * host-to-device copy, after device-to-host and pinned host-to-device, never for
   * device-to-device; cudaMemset of device memory does not block the host */
  char *pinned = NULL;
  GH_CHECK(cudaMallocHost((void **)&pinned, 64) == cudaSuccess, "cudaMallocHost");
  cudaMemcpy(dbuf, host, 8, cudaMemcpyHostToDevice);
  expect_entry(n0, MOCK_OP_STREAM_SYNC, NULL, NULL, "cudaMemcpy", 0);
  expect_entry(n0 + 1, MOCK_OP_WORK, NULL, NULL, "cudaMemcpy", 0);
  cudaMemcpy(dbuf, pinned, 8, cudaMemcpyHostToDevice);
  expect_entry(n0 + 2, MOCK_OP_WORK, NULL, NULL, "cudaMemcpy", 0);
  expect_entry(n0 + 3, MOCK_OP_STREAM_SYNC, NULL, NULL, "cudaMemcpy", 0);
  cudaMemcpy(host, dbuf, 8, cudaMemcpyDefault);
  expect_entry(n0 + 4, MOCK_OP_WORK, NULL, NULL, "cudaMemcpy", 0);
  expect_entry(n0 + 5, MOCK_OP_STREAM_SYNC, NULL, NULL, "cudaMemcpy", 0);
  cudaMemcpy(dbuf + 32, dbuf, 8, cudaMemcpyDeviceToDevice);
  expect_entry(n0 + 6, MOCK_OP_WORK, NULL, NULL, "cudaMemcpy", 0);
  cudaMemset(dbuf, 0, 8);
  expect_entry(n0 + 7, MOCK_OP_WORK, NULL, NULL, "cudaMemset", 0);
  cudaMemcpyAsync(dbuf, host, 8, cudaMemcpyHostToDevice, bl);
  expect_entry(n0 + 8, MOCK_OP_WORK, bl, NULL, "cudaMemcpyAsync", 0);
  cudaMemcpy2DAsync(dbuf, 16, host, 8, 8, 2, cudaMemcpyHostToDevice, nb);
  expect_entry(n0 + 9, MOCK_OP_WORK, nb, NULL, "cudaMemcpy2DAsync", 1);
  GH_CHECK(log_len() == n0 + 10, "%zu entries, expected %zu", log_len(), n0 + 10);
  mock_cuda_log_stop();
  cudaFreeHost(pinned);
  cudaStreamDestroy(bl);
  cudaStreamDestroy(nb);
  cudaEventDestroy(e);
}

/* A handle names one object throughout a log: streams and events destroyed while logging keep
 * their addresses from new ones (enough of them that the allocator would reuse a freed block). */
static void test_handles_not_reused(void) {
  enum { N = 40 };
  const void *seen[2 * N];
  int dup = 0;
  mock_cuda_log_start();
  for (int i = 0; i < N; i++) {
    cudaStream_t s = new_stream(0);
    cudaEvent_t e = new_event();
    seen[2 * i] = s, seen[2 * i + 1] = e;
    for (int j = 0; j < 2 * i; j++) dup += seen[j] == (const void *)s || seen[j] == (const void *)e;
    cudaStreamDestroy(s);
    cudaEventDestroy(e);
  }
  mock_cuda_log_stop();
  GH_CHECK(dup == 0, "%d new streams or events got the address of one destroyed while logging",
           dup);
}

/* cublasLtMatmul (a 1 x 1 x 1 FP32 product) and ncclAllReduce are work on their stream. */
static void test_log_gemm_allreduce(void) {
  cudaStream_t s = new_stream(cudaStreamNonBlocking);
  cublasLtHandle_t h;
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t l;
  cublasLtCreate(&h);
  cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, 1, 1, 1);
  float *m = NULL, alpha = 1.0f, beta = 0.0f;
  void *ws = NULL;
  cudaMalloc((void **)&m, 3 * sizeof *m);
  cudaMalloc(&ws, 4096);
  mock_cuda_log_start();
  GH_CHECK(cublasLtMatmul(h, op, &alpha, m, l, m + 1, l, &beta, m + 2, l, m + 2, l, NULL, ws,
                          4096, s) == CUBLAS_STATUS_SUCCESS,
           "cublasLtMatmul failed");
  expect_entry(0, MOCK_OP_WORK, s, NULL, "cublasLtMatmul", cudaStreamNonBlocking);
#ifdef FP8LAB_HAVE_NCCL
  ncclComm_t c;
  GH_CHECK(ncclCommInitAll(&c, 1, NULL) == ncclSuccess, "ncclCommInitAll");
  GH_CHECK(ncclAllReduce(m, m, 2, ncclFloat, ncclMax, c, s) == ncclSuccess, "ncclAllReduce");
  expect_entry(1, MOCK_OP_WORK, s, NULL, "ncclAllReduce", cudaStreamNonBlocking);
  ncclCommDestroy(c);
#else
  printf("(NCCL not found: the ncclAllReduce entry is not checked)\n");
#endif
  mock_cuda_log_stop();
  cudaFree(ws);
  cudaFree(m);
  cublasLtMatrixLayoutDestroy(l);
  cublasLtMatmulDescDestroy(op);
  cublasLtDestroy(h);
  cudaStreamDestroy(s);
}

/* ------------------------------------------------------------------ the relation */

static void test_streams_and_events(void) {
  mock_cuda_log_start();
  cudaStream_t s1 = new_stream(cudaStreamNonBlocking), s2 = new_stream(cudaStreamNonBlocking);
  cudaEvent_t e = new_event();
  /* same stream: issue order; two streams without events: no order either way */
  const size_t a = work(s1), a2 = work(s1), b = work(s2);
  /* record + wait: what precedes the record, before what follows the wait; one way only */
  const size_t r = record(e, s1);
  const size_t a3 = work(s1); /* after the record: not captured */
  wait_event(s2, e);
  const size_t c = work(s2);
  hb_graph *g = graph();
  EXPECT_HB(g, a, a2, 1);
  EXPECT_HB(g, a2, a, 0);
  EXPECT_HB(g, a, a, 0);
  EXPECT_HB(g, a, b, 0);
  EXPECT_HB(g, b, a, 0);
  EXPECT_HB(g, a2, c, 1);
  EXPECT_HB(g, r, c, 1);
  EXPECT_HB(g, c, a2, 0);
  EXPECT_HB(g, a3, c, 0);
  EXPECT_HB(g, c, a3, 0);
  EXPECT_HB(g, b, c, 1);  /* same stream */
  EXPECT_HB(g, a, r, 1);  /* a record is a node of its stream */
  EXPECT_HB(g, r, a3, 1);
  GH_CHECK(!hb_before(g, a, 10000) && !hb_before(g, 0, a) && !hb_before(g, a, 1),
           "entries that are not WORK/RECORD nodes (or out of range) are never ordered");
  end_case(g, (cudaStream_t[]){s1, s2}, 2, (cudaEvent_t[]){e}, 1);
}

/* A wait sees the most recent record issued before it, or none: never a later record. */
static void test_wait_before_record(void) {
  mock_cuda_log_start();
  cudaStream_t s1 = new_stream(cudaStreamNonBlocking), s2 = new_stream(cudaStreamNonBlocking);
  cudaEvent_t never_before = new_event(), earlier = new_event();
  /* the event is recorded only after the wait: the wait is a no-op */
  const size_t a = work(s1);
  wait_event(s2, never_before);
  const size_t b = work(s2);
  record(never_before, s1);
  /* an earlier record exists: the wait uses it, not the record issued after the wait */
  const size_t x = work(s1);
  record(earlier, s1);
  const size_t y = work(s1);
  wait_event(s2, earlier);
  const size_t c = work(s2);
  record(earlier, s1);
  const size_t d = work(s2);
  hb_graph *g = graph();
  EXPECT_HB(g, a, b, 0);
  EXPECT_HB(g, x, c, 1);
  EXPECT_HB(g, y, c, 0);
  EXPECT_HB(g, y, d, 0);
  end_case(g, (cudaStream_t[]){s1, s2}, 2, (cudaEvent_t[]){never_before, earlier}, 2);
}

/* An event re-recorded on another stream: the wait takes the latest record before it only. */
static void test_rerecorded_event(void) {
  mock_cuda_log_start();
  cudaStream_t s1 = new_stream(cudaStreamNonBlocking), s2 = new_stream(cudaStreamNonBlocking),
               s3 = new_stream(cudaStreamNonBlocking);
  cudaEvent_t e = new_event();
  const size_t a = work(s1);
  record(e, s1);
  const size_t c = work(s3);
  record(e, s3);
  wait_event(s2, e);
  const size_t b = work(s2);
  /* again on the first stream, later work there: now that record counts */
  const size_t a2 = work(s1);
  record(e, s1);
  wait_event(s2, e);
  const size_t b2 = work(s2);
  hb_graph *g = graph();
  EXPECT_HB(g, c, b, 1);
  EXPECT_HB(g, a, b, 0);
  EXPECT_HB(g, a2, b2, 1);
  EXPECT_HB(g, a, b2, 1);
  end_case(g, (cudaStream_t[]){s1, s2, s3}, 3, (cudaEvent_t[]){e}, 1);
}

/* s1 -> s2 -> s3 through two events: transitive; nothing comes back. */
static void test_chain(void) {
  mock_cuda_log_start();
  cudaStream_t s1 = new_stream(cudaStreamNonBlocking), s2 = new_stream(cudaStreamNonBlocking),
               s3 = new_stream(cudaStreamNonBlocking);
  cudaEvent_t e1 = new_event(), e2 = new_event();
  const size_t a = work(s1);
  record(e1, s1);
  wait_event(s2, e1);
  const size_t b = work(s2);
  record(e2, s2);
  wait_event(s3, e2);
  const size_t c = work(s3);
  const size_t a2 = work(s1);
  hb_graph *g = graph();
  EXPECT_HB(g, a, c, 1);
  EXPECT_HB(g, b, c, 1);
  EXPECT_HB(g, c, a, 0);
  EXPECT_HB(g, a2, c, 0);
  EXPECT_HB(g, c, a2, 0);
  end_case(g, (cudaStream_t[]){s1, s2, s3}, 3, (cudaEvent_t[]){e1, e2}, 2);
}

/* Host synchronisation: what the host waited for happens before everything issued later. */
static void test_host_syncs(void) {
  mock_cuda_log_start();
  cudaStream_t s1 = new_stream(cudaStreamNonBlocking), s2 = new_stream(cudaStreamNonBlocking),
               s3 = new_stream(cudaStreamNonBlocking);
  cudaEvent_t e = new_event();
  /* cudaStreamSynchronize(s1): s1's work, not s3's */
  const size_t a = work(s1), u = work(s3);
  cudaStreamSynchronize(s1);
  const size_t b = work(s2);
  /* cudaEventSynchronize: the work its record captured, not what follows the record */
  const size_t c = work(s3);
  record(e, s3);
  const size_t c2 = work(s3);
  cudaEventSynchronize(e);
  const size_t d = work(s2), d1 = work(s1);
  /* cudaDeviceSynchronize: every stream */
  const size_t f = work(s1);
  cudaDeviceSynchronize();
  const size_t h = work(s2);
  hb_graph *g = graph();
  EXPECT_HB(g, a, b, 1);
  EXPECT_HB(g, u, b, 0);
  EXPECT_HB(g, c, d, 1);
  EXPECT_HB(g, c, d1, 1);
  EXPECT_HB(g, c2, d, 0);
  EXPECT_HB(g, d, h, 1);
  EXPECT_HB(g, c2, h, 1);
  EXPECT_HB(g, f, h, 1);
  EXPECT_HB(g, h, f, 0);
  end_case(g, (cudaStream_t[]){s1, s2, s3}, 3, (cudaEvent_t[]){e}, 1);
}

/* The legacy default stream synchronises with blocking streams (both ways), not with
 * non-blocking ones; two blocking streams are ordered only through it. */
static void test_legacy_stream(void) {
  /* created before logging starts: the entries' flags say it is non-blocking */
  cudaStream_t early = new_stream(cudaStreamNonBlocking);
  mock_cuda_log_start();
  cudaStream_t b1 = new_stream(0), b2 = new_stream(0), nb = new_stream(cudaStreamNonBlocking);
  const size_t e0 = work(early), l0 = work(0), e1 = work(early);
  const size_t x = work(b1), y = work(b2);
  const size_t n1 = work(nb);
  const size_t l1 = work(0);
  const size_t x2 = work(b1), n2 = work(nb);
  const size_t y2 = work(b2);
  const size_t p = work(cudaStreamPerThread); /* a blocking stream too */
  const size_t l2 = work(cudaStreamLegacy);   /* the same legacy stream */
  const size_t n3 = work(nb);
  hb_graph *g = graph();
  EXPECT_HB(g, x, y, 0);
  EXPECT_HB(g, x, l1, 1);
  EXPECT_HB(g, y, l1, 1);
  EXPECT_HB(g, l1, x2, 1);
  EXPECT_HB(g, x, y2, 1); /* b1 -> legacy -> b2 */
  EXPECT_HB(g, n1, l1, 0);
  EXPECT_HB(g, l1, n2, 0);
  EXPECT_HB(g, l1, p, 1);
  EXPECT_HB(g, p, l2, 1);
  EXPECT_HB(g, x2, l2, 1);
  EXPECT_HB(g, l1, l2, 1);
  EXPECT_HB(g, n2, l2, 0);
  EXPECT_HB(g, l2, n3, 0);
  EXPECT_HB(g, e0, l0, 0);
  EXPECT_HB(g, l0, e1, 0);
  end_case(g, (cudaStream_t[]){early, b1, b2, nb}, 4, NULL, 0);
}

/* The synchronous copies and cudaMemset are legacy-stream work, not device-wide syncs:
 * non-blocking streams run on (kernels/ctx.cu's stream is one). */
static void test_sync_copies(void) {
  char host[16] = {0};
  mock_cuda_log_start();
  cudaStream_t bl = new_stream(0), nb = new_stream(cudaStreamNonBlocking),
               nb2 = new_stream(cudaStreamNonBlocking);
  const size_t a = work(nb);
  cudaMemset(dbuf, 0, 8);
  const size_t m = log_len() - 1;
  const size_t b = work(nb2);
  const size_t w = work(bl);
  cudaMemcpy(host, dbuf, 8, cudaMemcpyDeviceToHost); /* the host waits for the copy */
  const size_t d2h = log_len() - 2;
  const size_t c = work(nb2);
  /* pageable host-to-device: the host waits for the legacy stream before the copy, which may
   * still be in flight when cudaMemcpy returns */
  const size_t w2 = work(bl);
  cudaMemset(dbuf, 0, 8);
  const size_t l = log_len() - 1;
  cudaMemcpy(dbuf, host, 8, cudaMemcpyHostToDevice);
  const size_t h2d = log_len() - 1;
  const size_t d = work(nb2);
  hb_graph *g = graph();
  EXPECT_HB(g, a, m, 0);
  EXPECT_HB(g, m, b, 0);
  EXPECT_HB(g, a, b, 0);
  EXPECT_HB(g, w, d2h, 1);
  EXPECT_HB(g, d2h, c, 1);
  EXPECT_HB(g, w, c, 1);
  EXPECT_HB(g, a, c, 0);
  EXPECT_HB(g, w2, d, 1);
  EXPECT_HB(g, l, d, 1);
  EXPECT_HB(g, h2d, d, 0);
  end_case(g, (cudaStream_t[]){bl, nb, nb2}, 3, NULL, 0);
}

/* A log written by hand: a STREAM_CREATE starts a new stream even under a handle seen before;
 * a stream first seen in a WORK entry takes its flags from there; cudaStreamLegacy is 0. */
static void test_hand_made_log(void) {
  int h1, h2; /* stand-ins for stream handles */
  const unsigned nbf = cudaStreamNonBlocking;
  const mock_cuda_op ops[] = {
      {MOCK_OP_STREAM_CREATE, &h1, NULL, "create", nbf},
      {MOCK_OP_WORK, &h1, NULL, "a", nbf},
      {MOCK_OP_STREAM_CREATE, &h1, NULL, "create at the same address", nbf},
      {MOCK_OP_WORK, &h1, NULL, "b", nbf},
      {MOCK_OP_WORK, &h2, NULL, "c", 0},
      {MOCK_OP_WORK, (const void *)cudaStreamLegacy, NULL, "l", 0},
      {MOCK_OP_WORK, NULL, NULL, "l2", 0},
  };
  hb_graph *g = hb_build(ops, sizeof ops / sizeof ops[0]);
  GH_REQUIRE(g != NULL, "hb_build: out of memory");
  EXPECT_HB(g, 1, 3, 0); /* two streams that shared a handle */
  EXPECT_HB(g, 4, 5, 1); /* blocking c, then the legacy stream */
  EXPECT_HB(g, 3, 5, 0);
  EXPECT_HB(g, 5, 6, 1); /* cudaStreamLegacy and 0: one stream */
  hb_free(g);
}

static void test_record_of(void) {
  mock_cuda_log_start();
  cudaStream_t s = new_stream(cudaStreamNonBlocking);
  cudaEvent_t none = new_event(), once = new_event(), twice = new_event();
  wait_event(s, none); /* seen, never recorded */
  work(s);
  const size_t r = record(once, s);
  record(twice, s);
  work(s);
  record(twice, 0);
  hb_graph *g = graph();
  GH_CHECK(hb_record_of(g, none) == -1, "never recorded: %td", hb_record_of(g, none));
  GH_CHECK(hb_record_of(g, once) == (ptrdiff_t)r, "recorded once at %zu: %td", r,
           hb_record_of(g, once));
  GH_CHECK(hb_record_of(g, twice) == -2, "recorded twice: %td", hb_record_of(g, twice));
  GH_CHECK(hb_record_of(g, &r) == -1, "not an event of the log: %td", hb_record_of(g, &r));
  hb_free(g);
  hb_graph *empty = hb_build(NULL, 0);
  GH_CHECK(empty && hb_record_of(empty, once) == -1 && !hb_before(empty, 0, 0), "empty log");
  hb_free(empty);
  mock_cuda_log_stop();
  cudaEventDestroy(none);
  cudaEventDestroy(once);
  cudaEventDestroy(twice);
  cudaStreamDestroy(s);
}

int main(void) {
  if (cudaMalloc((void **)&dbuf, 256) != cudaSuccess) return 1;
  GH_RUN(test_log_off_by_default); /* first: nothing has started the log yet */
  GH_RUN(test_log_entries);
  GH_RUN(test_handles_not_reused);
  GH_RUN(test_log_gemm_allreduce);
  GH_RUN(test_streams_and_events);
  GH_RUN(test_wait_before_record);
  GH_RUN(test_rerecorded_event);
  GH_RUN(test_chain);
  GH_RUN(test_host_syncs);
  GH_RUN(test_legacy_stream);
  GH_RUN(test_sync_copies);
  GH_RUN(test_hand_made_log);
  GH_RUN(test_record_of);
  cudaFree(dbuf);
  return gh_summary();
}
