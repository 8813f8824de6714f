/* comm_nccl.c: see comm_nccl.h. */
#include "comm_nccl.h"

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8_check.h"
#include "device.h"

/* The description FP8G_NCCL prints: NCCL's last error message, which says more than the
 * status string ("unhandled cuda error" -> which CUDA call and why). */
static const char *fp8g_nccl_detail(ncclResult_t r) {
  const char *s = ncclGetLastError(NULL);
  return (s && *s) ? s : ncclGetErrorString(r);
}

struct fp8_comm {
  int nranks, nlocal;
  ncclComm_t *comms;     /* [nlocal] */
  int *devices;          /* [nlocal] */
  cudaStream_t *streams; /* [nlocal] */
};

void fp8_comm_free(fp8_comm *c) {
  if (!c) return;
  for (int i = 0; i < c->nlocal; i++) {
    if (c->devices) cudaSetDevice(c->devices[i]);
    if (c->comms && c->comms[i]) ncclCommDestroy(c->comms[i]);
    if (c->streams && c->streams[i]) cudaStreamDestroy(c->streams[i]);
  }
  free(c->comms);
  free(c->devices);
  free(c->streams);
  free(c);
}

static fp8_comm *comm_alloc(int nlocal) {
  fp8_comm *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->nlocal = nlocal;
  c->comms = calloc((size_t)nlocal, sizeof *c->comms);
  c->devices = calloc((size_t)nlocal, sizeof *c->devices);
  c->streams = calloc((size_t)nlocal, sizeof *c->streams);
  if (!c->comms || !c->devices || !c->streams) {
    fp8_comm_free(c);
    return NULL;
  }
  return c;
}

int fp8_comm_init_local(fp8_comm **out, int ndev, const int *devices, char *err, size_t errlen) {
  int rc = FP8_OK;
  fp8_comm *c = NULL;
  FP8G_REQUIRE(out, FP8_EINVAL, "fp8_comm_init_local: out is NULL");
  *out = NULL;
  FP8G_REQUIRE(ndev >= 1, FP8_EINVAL, "fp8_comm_init_local: %d devices (need >= 1)", ndev);
  fp8_gpu_info info;
  rc = fp8_gpu_probe(0, &info, err, errlen);
  if (rc) goto done;
  c = comm_alloc(ndev);
  FP8G_REQUIRE(c, FP8_ENOMEM, "out of memory");
  c->nranks = ndev;
  for (int i = 0; i < ndev; i++) {
    c->devices[i] = devices ? devices[i] : i;
    FP8G_REQUIRE(c->devices[i] >= 0 && c->devices[i] < info.count, FP8_EDEVICE,
                 "fp8_comm_init_local: device %d requested, %d visible", c->devices[i],
                 info.count);
  }
  FP8G_NCCL(ncclCommInitAll(c->comms, ndev, c->devices));
  for (int i = 0; i < ndev; i++) {
    FP8G_CUDA(cudaSetDevice(c->devices[i]));
    FP8G_CUDA(cudaStreamCreate(&c->streams[i]));
  }
  *out = c;
  c = NULL;
done:
  fp8_comm_free(c);
  return rc;
}

int fp8_comm_unique_id(fp8_comm_id *id, char *err, size_t errlen) {
  int rc = FP8_OK;
  ncclUniqueId u;
  FP8G_REQUIRE(id, FP8_EINVAL, "fp8_comm_unique_id: id is NULL");
  _Static_assert(sizeof u == sizeof id->bytes, "NCCL_UNIQUE_ID_BYTES changed");
  FP8G_NCCL(ncclGetUniqueId(&u));
  memcpy(id->bytes, &u, sizeof u);
done:
  return rc;
}

int fp8_comm_init_rank(fp8_comm **out, const fp8_comm_id *id, int nranks, int rank, int device,
                       char *err, size_t errlen) {
  int rc = FP8_OK;
  fp8_comm *c = NULL;
  ncclUniqueId u;
  FP8G_REQUIRE(out && id, FP8_EINVAL, "fp8_comm_init_rank: NULL argument");
  *out = NULL;
  FP8G_REQUIRE(nranks >= 1 && rank >= 0 && rank < nranks, FP8_EINVAL,
               "fp8_comm_init_rank: rank %d of %d", rank, nranks);
  rc = fp8_gpu_probe(device, NULL, err, errlen);
  if (rc) goto done;
  c = comm_alloc(1);
  FP8G_REQUIRE(c, FP8_ENOMEM, "out of memory");
  c->nranks = nranks;
  c->devices[0] = device;
  memcpy(&u, id->bytes, sizeof u);
  FP8G_CUDA(cudaSetDevice(device));
  FP8G_NCCL(ncclCommInitRank(&c->comms[0], nranks, u, rank));
  FP8G_CUDA(cudaStreamCreate(&c->streams[0]));
  *out = c;
  c = NULL;
done:
  fp8_comm_free(c);
  return rc;
}

int fp8_comm_nranks(const fp8_comm *c) { return c ? c->nranks : 0; }
int fp8_comm_nlocal(const fp8_comm *c) { return c ? c->nlocal : 0; }

int fp8_comm_allreduce_max(fp8_comm *c, float *const *bufs, size_t count, char *err,
                           size_t errlen) {
  int rc = FP8_OK;
  int in_group = 0;
  FP8G_REQUIRE(c && bufs, FP8_EINVAL, "fp8_comm_allreduce_max: NULL argument");
  for (int i = 0; i < c->nlocal; i++)
    FP8G_REQUIRE(bufs[i] || count == 0, FP8_EINVAL, "fp8_comm_allreduce_max: buffer %d is NULL", i);
  if (count == 0) goto done;
  /* Several local members: one group call, or the first would wait for the others forever. */
  if (c->nlocal > 1) {
    FP8G_NCCL(ncclGroupStart());
    in_group = 1;
  }
  for (int i = 0; i < c->nlocal; i++) {
    FP8G_CUDA(cudaSetDevice(c->devices[i]));
    FP8G_NCCL(ncclAllReduce(bufs[i], bufs[i], count, ncclFloat, ncclMax, c->comms[i],
                            c->streams[i]));
  }
  if (in_group) {
    in_group = 0;
    FP8G_NCCL(ncclGroupEnd());
  }
  for (int i = 0; i < c->nlocal; i++) {
    FP8G_CUDA(cudaSetDevice(c->devices[i]));
    FP8G_CUDA(cudaStreamSynchronize(c->streams[i]));
    ncclResult_t asynchronous_error = ncclSuccess;
    FP8G_NCCL(ncclCommGetAsyncError(c->comms[i], &asynchronous_error));
    FP8G_NCCL(asynchronous_error);
  }
done:
  if (in_group) ncclGroupEnd();
  return rc;
}

const char *fp8_comm_nccl_version(void) {
  static char buf[32];
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "unknown";
  /* NCCL_VERSION(X,Y,Z) = X*10000 + Y*100 + Z since 2.9 */
  snprintf(buf, sizeof buf, "%d.%d.%d", v / 10000, (v / 100) % 100, v % 100);
  return buf;
}
