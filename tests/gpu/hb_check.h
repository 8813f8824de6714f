/* hb_check.h: CUDA's happens-before relation over the mock runtime's stream-ordering log
 * (mock_cuda.h: mock_cuda_log_start, mock_cuda_log), for tests that check how work is
 * scheduled across streams without a GPU: "in mode X, the cast that needs the new scales does
 * not start before the update's event". The mock runs everything when it is issued, so the
 * answer comes from the log, not from running: hb_before(g, a, b) is 1 exactly when every
 * schedule CUDA allows finishes entry a before entry b starts.
 *
 * The model (vector clocks; hb_check.c has the details). The nodes are the WORK and RECORD
 * entries; a node's clock says, per stream, how many of that stream's nodes are guaranteed to
 * be complete when it starts.
 *  - One stream runs its nodes in issue order, each after the previous one completed.
 *  - A RECORD of event e on stream s captures everything before it on s (and what that waited
 *    for); cudaStreamWaitEvent(s2, e) makes everything issued to s2 afterwards wait for what the
 *    MOST RECENT record of e issued before the wait captured. A wait on an event not recorded
 *    (in the log) before it is a no-op, as in CUDA.
 *  - Host synchronisation: cudaStreamSynchronize(s), cudaEventSynchronize(e) (its latest
 *    record), cudaDeviceSynchronize (every stream), and the synchronous copies' STREAM_SYNC
 *    entries on stream 0 make what they waited for happen before everything issued afterwards,
 *    on any stream. Synchronising the legacy stream waits for its own work and what that work
 *    waited for, not for blocking streams' work issued after its last action.
 *  - The legacy default stream (handle 0 or cudaStreamLegacy): an action on it (work, record,
 *    wait) first waits for all work issued so far to every BLOCKING stream (created without
 *    cudaStreamNonBlocking; cudaStreamPerThread is one), and an action on a blocking stream
 *    waits for all work issued so far to the legacy stream. Non-blocking streams take no part.
 *    Whether a stream is blocking comes from the entries' `flags` (its creation flags).
 *  - Nothing else orders work: a stream created by STREAM_CREATE is a new stream even if its
 *    handle was seen before; calls the mock does not log (cudaEventQuery, cudaFree, ...) add no
 *    order, so the checker can only under-claim order for them, never over-claim.
 * Not modelled: CUDA graphs and stream capture, cudaStreamAddCallback / cudaLaunchHostFunc,
 * several devices, several host threads (the log has one host order), per-thread default stream
 * compilation (--default-stream per-thread: handle 0 would then be a per-thread stream).
 */
#ifndef FP8LAB_TESTS_GPU_HB_CHECK_H
#define FP8LAB_TESTS_GPU_HB_CHECK_H

#include <stddef.h>

#include "mock_cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hb_graph hb_graph;

/** Computes the relation over the n entries of `ops` (the log, as mock_cuda_log returns it; the
 *  graph keeps no pointer into it). Returns NULL when memory runs out (or n >= 2^32 - 1).
 *  Memory: one clock of (number of streams) 32-bit counters per WORK / RECORD entry. */
hb_graph *hb_build(const mock_cuda_op *ops, size_t n);
/** Frees a graph (NULL is allowed). */
void hb_free(hb_graph *g);
/** 1 when log entry a (WORK or RECORD) is guaranteed to complete before log entry b (WORK or
 *  RECORD) starts, 0 otherwise (also when a == b, an index is out of range, or either entry is
 *  not a node). A RECORD "completes" when everything it captured has completed, and "starts"
 *  when it is reached on its stream. */
int hb_before(const hb_graph *g, size_t a, size_t b);
/** The index of the log entry that records `event` (its only record), so that tests can turn
 *  per-operation timing events into nodes; -1 if it is never recorded in the log, -2 if it is
 *  recorded more than once. */
ptrdiff_t hb_record_of(const hb_graph *g, const void *event);

#ifdef __cplusplus
}
#endif

#endif
