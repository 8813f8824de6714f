/* engine_gpu_comm.c: the GPU module's amax exchange for an MPI replay (issue 26; src/run/
 * run_split.c): NCCL between the processes' GPUs, on a communicator bootstrapped over MPI, the
 * standard pattern. Process 0 makes NCCL's unique id (make_id), the runner
 * broadcasts its 128 bytes with MPI, and every process joins the world with it, on its own
 * GPU (fp8_gpu_local_device, the engine's). An exchange takes host floats (the runner's
 * amaxes and snapshot flags), copies them to the device, all-reduces them with MAX (in place,
 * on this communicator's stream) and copies them back: TE's amax all-reduce. NCCL is opened
 * at run time (timeline_nccl.c), so the module loads where NCCL is missing; the emulator
 * build links the mock NCCL (a world of one). The runner reaches them through the module's
 * descriptor (fp8_gpu_amax_exchange, gpu_module.c), handed to it by the engine selection. */
#include <cuda_runtime_api.h>
#include <stdlib.h>

#include "device.h"
#include "engine_gpu.h"
#include "fp8.h"
#include "timeline_nccl.h"
#include "util.h"

typedef struct {
  tl_nccl *n;
  float *d;            /* the device buffer */
  size_t cap;          /* its floats */
  cudaStream_t stream;
} gpu_comm;

static int comm_make_id(void *id, char *why, size_t whylen) {
  return tl_nccl_unique_id(NULL, id, why, whylen);
}

static void comm_close(void *c) {
  gpu_comm *g = c;
  if (!g) return;
  tl_nccl_close(g->n);
  if (g->d) cudaFree(g->d);
  if (g->stream) cudaStreamDestroy(g->stream);
  free(g);
}

static void *comm_open(const void *id, int nranks, int rank, char *why, size_t whylen) {
  gpu_comm *g = calloc(1, sizeof *g);
  if (!g) {
    fp8_errorf(FP8_ENOMEM, why, whylen, "out of memory");
    return NULL;
  }
  int dev = fp8_gpu_local_device();
  g->n = tl_nccl_open_rank(NULL, id, nranks, rank, dev, why, whylen);
  cudaError_t e = g->n ? cudaStreamCreate(&g->stream) : cudaSuccess;
  if (!g->n || e != cudaSuccess) {
    if (e != cudaSuccess) fp8_errorf(FP8_EDEVICE, why, whylen, "cudaStreamCreate: %s", cudaGetErrorString(e));
    g->stream = NULL;
    comm_close(g);
    return NULL;
  }
  return g;
}

static const char *comm_name(void *c) {
  return tl_nccl_describe(c ? ((gpu_comm *)c)->n : NULL);
}

static int comm_max(void *c, float *host, size_t n, char *err, size_t errlen) {
  gpu_comm *g = c;
  cudaError_t e = cudaSuccess;
  if (n == 0) return FP8_OK;
  if (n > g->cap) {
    if (g->d) cudaFree(g->d);
    g->d = NULL;
    g->cap = 0;
    if ((e = cudaMalloc((void **)&g->d, n * sizeof *g->d)) != cudaSuccess)
      return fp8_errorf(FP8_EDEVICE, err, errlen, "amax exchange: cudaMalloc of %zu floats: %s",
                        n, cudaGetErrorString(e));
    g->cap = n;
  }
  e = cudaMemcpyAsync(g->d, host, n * sizeof *host, cudaMemcpyHostToDevice, g->stream);
  if (e != cudaSuccess)
    return fp8_errorf(FP8_EDEVICE, err, errlen, "amax exchange: %s", cudaGetErrorString(e));
  int rc = tl_nccl_allreduce_max(g->n, g->d, n, g->stream, err, errlen);
  if (rc) return rc;
  e = cudaMemcpyAsync(host, g->d, n * sizeof *host, cudaMemcpyDeviceToHost, g->stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(g->stream);
  if (e != cudaSuccess)
    return fp8_errorf(FP8_EDEVICE, err, errlen, "amax exchange: %s", cudaGetErrorString(e));
  return FP8_OK;
}

const fp8_amax_exchange fp8_gpu_amax_exchange = {
    .make_id = comm_make_id,
    .open = comm_open,
    .name = comm_name,
    .max = comm_max,
    .close = comm_close,
};
