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
 * Where the replay takes the group max: `fp8lab run` with `[trace] reduce_amax = true` keeps,
 * per tensor and configuration, one delayed-scaling state per rank, and the engine's end_phase
 * reduces each phase's amaxes over the reduction slots of the plan (engine.h: the CPU engine
 * and the GPU engine on the host, for the ranks one process replays) before its fused update,
 * so that all ranks of a group end the step with the same scale. Spread over processes (MPI:
 * src/run/run_split.c, docs/distributed.md), the processes' amaxes are exchanged first: through
 * the GPU module's amax exchange (engine_gpu_comm.c: NCCL opened at run time, reached through
 * the module's descriptor, src/engine/gpu_module.h) when the GPU engine runs, else
 * MPI_Allreduce. Max is exact in any order, so every path gives the same scales.
 *
 * This library (fp8lab_comm, linked against libnccl) is the engine's communicator in the
 * conformance test (fp8_engine_comm: a world of one, tests/engine/test_engine_conformance.c) and
 * the subject of test_gpu_comm; the module itself never links libnccl, so that it loads where
 * NCCL is missing.
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
