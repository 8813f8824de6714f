/* comm_nccl.h: the amax all-reduce (MAX over the ranks of a reduction group) with NCCL, as
 * TransformerEngine does it for `reduce_amax` (RECIPES.md "Amax reduction across ranks"): every
 * rank packs the amaxes of all its tensors into one contiguous device float buffer, in the same
 * order on every rank, and one in-place ncclAllReduce(ncclFloat, ncclMax) replaces each entry by
 * its maximum over the group. One communicator per reduction group.
 *
 * Two ways to make a group:
 *   - fp8_comm_init_local: one process drives `ndev` local GPUs (ncclCommInitAll); ndev = 1 is
 *     the world of one a single-GPU machine runs (the all-reduce then leaves the buffer as is).
 *   - fp8_comm_unique_id + fp8_comm_init_rank: one process per rank; rank 0 makes the id and
 *     hands its bytes to the others out of band (a file, MPI, a socket), then every rank calls
 *     fp8_comm_init_rank with the same id, nranks and its own rank (ncclCommInitRank).
 *
 * `fp8lab run` with `[trace] reduce_amax = true` replays all R ranks in ONE process (and on one
 * GPU, or the CPU) and takes each group's max on the host (src/run/runner.c): exact, and no
 * NCCL is involved. This module is the multi-GPU form of the same MAX, for a replay that puts
 * the ranks on several devices, which fp8lab does not do yet: a trace of R ranks has folders rank_0/ .. rank_<R-1>/, each a complete trace of
 * the same tensor names. A replay with reduce_amax keeps, per tensor and configuration, one
 * delayed-scaling state per rank; at each step every rank computes its tensors' amaxes (the
 * engine's load), writes them in sorted tensor-name order into its device buffer, calls
 * fp8_comm_allreduce_max, and runs the delayed update of each tensor with the reduced amax, so
 * all ranks of the group end the step with the same scale. One process replaying all R ranks on
 * R local GPUs uses fp8_comm_init_local(R) and passes the R buffers at once; R processes (one
 * per GPU, possibly on several hosts) use init_rank. Replaying R ranks on ONE GPU needs no
 * NCCL at all: the max over the ranks' amaxes is a host (or single-device) max; NCCL matters
 * when the ranks' data live on different devices, and its result must equal that max exactly
 * (max is exact in any order). Groups (TE's amax_reduction_group, e.g. the tensor-parallel
 * group) are separate communicators.
 *
 * Device pointers throughout; every call is synchronous from the caller's view (it returns once
 * the reduction has completed), as TE >= 1.6's amax reduction is.
 */
#ifndef FP8LAB_GPU_COMM_NCCL_H
#define FP8LAB_GPU_COMM_NCCL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** NCCL's unique id as plain bytes (NCCL_UNIQUE_ID_BYTES = 128), so callers need no nccl.h. */
typedef struct {
  char bytes[128];
} fp8_comm_id;

typedef struct fp8_comm fp8_comm;

/** A group of `ndev` GPUs of this process: devices[i] (NULL: 0 .. ndev-1) is local rank i.
 *  FP8_EDEVICE with the reason (no device, NCCL error). *out is NULL on error. */
int fp8_comm_init_local(fp8_comm **out, int ndev, const int *devices, char *err, size_t errlen);

/** Makes the id rank 0 shares with the other ranks of a group. */
int fp8_comm_unique_id(fp8_comm_id *id, char *err, size_t errlen);

/** This process's member of a group of `nranks` ranks, as rank `rank` on CUDA device `device`.
 *  Blocks until all nranks ranks have called it with the same id. */
int fp8_comm_init_rank(fp8_comm **out, const fp8_comm_id *id, int nranks, int rank, int device,
                       char *err, size_t errlen);

/** Ranks in the group (all processes), and the local members this handle drives. */
int fp8_comm_nranks(const fp8_comm *c);
int fp8_comm_nlocal(const fp8_comm *c);

/** In place: bufs[i] (device floats on the i-th local member's device, `count` of them, same
 *  count and order on every rank) becomes the elementwise max over all ranks. NaN entries: NCCL's
 *  max is not specified for NaN; RECIPES.md amaxes are never NaN (NaN elements are ignored).
 *  Returns after the reduction completed on every local member. */
int fp8_comm_allreduce_max(fp8_comm *c, float *const *bufs, size_t count, char *err,
                           size_t errlen);

/** NCCL's version as "2.28.9". */
const char *fp8_comm_nccl_version(void);

void fp8_comm_free(fp8_comm *c);

#ifdef __cplusplus
}
#endif

#endif
