/* mock_nccl.c: a one-rank NCCL for the mock build of src/gpu (test_gpu_comm_mock, label cpu):
 * communicators of one rank on device 0, and the max all-reduce over one rank (a copy). Device
 * memory is host memory (tests/gpu/mock_cuda.c); buffers must be device allocations. */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdio.h>
#include <string.h>

#include "mock_cuda.h"

static int comm_token;
ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  memset(id, 7, sizeof *id);
  return ncclSuccess;
}
ncclResult_t ncclCommInitRank(ncclComm_t *c, int nranks, ncclUniqueId id, int rank) {
  (void)id;
  if (nranks != 1 || rank != 0) return ncclInvalidUsage; /* one process: a world of 1 only */
  *c = (ncclComm_t)&comm_token;
  return ncclSuccess;
}
ncclResult_t ncclCommInitAll(ncclComm_t *c, int ndev, const int *devlist) {
  if (ndev != 1 || (devlist && devlist[0] != 0)) return ncclInvalidArgument;
  *c = (ncclComm_t)&comm_token;
  return ncclSuccess;
}
ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t t,
                           ncclRedOp_t op, ncclComm_t c, cudaStream_t s) {
  (void)c;
  if (t != ncclFloat || op != ncclMax) return ncclInvalidArgument;
  if (!mock_cuda_stream_valid(s)) return ncclInvalidArgument;
  if (count && (!mock_cuda_is_device_ptr(send) || !mock_cuda_is_device_ptr(recv) ||
                !mock_cuda_is_device_ptr((const float *)send + count - 1) ||
                !mock_cuda_is_device_ptr((const float *)recv + count - 1))) {
    fprintf(stderr, "mock ncclAllReduce: send %p / recv %p (%zu floats) not device memory\n",
            send, recv, count);
    return ncclInvalidArgument;
  }
  memmove(recv, send, count * sizeof(float)); /* the max over one rank */
  mock_cuda_log_op(MOCK_OP_WORK, s, NULL, "ncclAllReduce"); /* stream-ordering log */
  return ncclSuccess;
}
ncclResult_t ncclGroupStart(void) { return ncclSuccess; }
ncclResult_t ncclGroupEnd(void) { return ncclSuccess; }
ncclResult_t ncclCommDestroy(ncclComm_t c) {
  (void)c;
  return ncclSuccess;
}
ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *e) {
  (void)c;
  *e = ncclSuccess;
  return ncclSuccess;
}
const char *ncclGetErrorString(ncclResult_t r) {
  return r == ncclSuccess ? "no error" : "mock NCCL error";
}
const char *ncclGetLastError(ncclComm_t c) {
  (void)c;
  return "";
}
ncclResult_t ncclGetVersion(int *v) {
  *v = NCCL_VERSION_CODE;
  return ncclSuccess;
}
