/* mock_cuda.h: what tests/gpu/mock_cuda.c and mock_cuda_stream.c (the host-memory CUDA
 * runtime) offer the kernel emulator (tests/gpu/emu/cuda_emu.cc), mock_nccl.c and the tests
 * besides the CUDA API itself: pointer and stream checks, and the stream-ordering log that
 * tests/gpu/hb_check.h reads. */
#ifndef FP8LAB_TESTS_GPU_MOCK_CUDA_H
#define FP8LAB_TESTS_GPU_MOCK_CUDA_H

#include <cuda_runtime_api.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Records a launch error for the next cudaGetLastError / cudaPeekAtLastError. */
void mock_cuda_set_last_error(cudaError_t e);
/** 1 when p lies inside a live cudaMalloc allocation. */
int mock_cuda_is_device_ptr(const void *p);
/** 1 for the default stream handles and streams created and not yet destroyed. */
int mock_cuda_stream_valid(cudaStream_t s);

/* ------------------------------------------------------------ the stream-ordering log
 * Everything in the mock runs when it is issued, so the order CUDA would guarantee cannot be
 * observed by running. Instead, between mock_cuda_log_start() and mock_cuda_log_stop(), every
 * call that takes part in stream ordering appends an entry here, and tests/gpu/hb_check.h
 * computes CUDA's happens-before relation over the entries. Off by default: then nothing is
 * stored and a call costs one test of a flag. Single host thread, like the rest of the mock. */

/** What an entry of the log is. */
typedef enum {
  /** Work on `stream`: a kernel launch (`what` = the kernel as written at the launch),
   *  cudaMemsetAsync, cudaMemcpyAsync, cudaMemcpy2DAsync, cublasLtMatmul, ncclAllReduce, and
   *  the legacy-stream part of the synchronous cudaMemcpy, cudaMemset, cudaMemcpy{To,From}Symbol
   *  (`what` = the call's name). */
  MOCK_OP_WORK,
  /** cudaEventRecord(event, stream). */
  MOCK_OP_RECORD,
  /** cudaStreamWaitEvent(stream, event). */
  MOCK_OP_WAIT,
  /** The host waits for `stream`: cudaStreamSynchronize, and the synchronous copies where
   *  CUDA's "API synchronization behavior" says the host waits for the legacy stream (0):
   *  after a device-to-host, pinned host-to-device or host-to-host cudaMemcpy, and before (not
   *  after) a pageable host-to-device one. Device-to-device copies and cudaMemset of device
   *  memory do not block the host: they log WORK on stream 0 only. */
  MOCK_OP_STREAM_SYNC,
  /** cudaEventSynchronize(event). */
  MOCK_OP_EVENT_SYNC,
  /** cudaDeviceSynchronize. */
  MOCK_OP_DEVICE_SYNC,
  /** cudaStreamCreate / cudaStreamCreateWithFlags; `flags` as below. */
  MOCK_OP_STREAM_CREATE
} mock_op_kind;

/** One logged call. `stream`: the stream handle (the legacy stream is 0, whether the caller
 *  passed 0 or cudaStreamLegacy; cudaStreamPerThread is its own stream; NULL for EVENT_SYNC and
 *  DEVICE_SYNC, where it means nothing). `event`: RECORD, WAIT and EVENT_SYNC, else NULL.
 *  `what`: the call (or kernel) name, a string that lives as long as the program. `flags`: the
 *  creation flags of `stream` (cudaStreamNonBlocking or 0; 0 for the legacy and per-thread
 *  streams), on every entry that has a stream, so that the checker knows which streams are
 *  blocking even when they were created before logging started. While logging is on, destroyed
 *  streams and events keep their memory (freed at the next start or stop), so that one handle
 *  names one object throughout a log. */
typedef struct {
  mock_op_kind kind;
  const void *stream;
  const void *event;
  const char *what;
  unsigned flags;
} mock_cuda_op;

/** Clears the log and starts logging. */
void mock_cuda_log_start(void);
/** Stops logging; the entries stay readable until the next start. */
void mock_cuda_log_stop(void);
/** 1 while logging is on (callers that must look something up to log can skip it). */
int mock_cuda_logging(void);
/** The entries logged since the last start (*n of them); valid until the next logged call or
 *  start. NULL with *n = 0 when there are none. */
const mock_cuda_op *mock_cuda_log(size_t *n);
/** Appends an entry while logging is on (nothing otherwise); fills in `flags` from the stream.
 *  For the other parts of the mock: the emulator's launcher, mock_nccl.c. `stream` must be
 *  valid (call it after the call's own checks: a refused call enqueues nothing). Aborts when
 *  the log cannot grow (a silently shortened log would give wrong orderings). */
void mock_cuda_log_op(mock_op_kind kind, cudaStream_t stream, cudaEvent_t event,
                      const char *what);

/** SMs the mock device reports (cudaDeviceGetAttribute, cudaGetDeviceProperties): small, so
 *  that grid-stride loops sized from it wrap several times on test-sized tensors. */
#define MOCK_CUDA_SM_COUNT 3
/** Blocks per SM cudaOccupancyMaxActiveBlocksPerMultiprocessor reports. */
#define MOCK_CUDA_BLOCKS_PER_SM 2

#ifdef __cplusplus
}
#endif

#endif
