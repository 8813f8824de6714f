/* timeline_nccl.c: NCCL opened at run time for fp8lab timeline (timeline_nccl.h). nccl.h gives
 * the types and constants; only five functions are used, through dlsym. */
#include "timeline_nccl.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8.h"
#include "util.h"

#ifdef FP8LAB_TL_NO_NCCL
/* built without nccl.h: no all-reduce */
struct tl_nccl {
  int unused;
};
tl_nccl *tl_nccl_open(const char *path, char *why, size_t whylen) {
  (void)path;
  fp8_errorf(FP8_EDEVICE, why, whylen, "this GPU module was built without NCCL's header");
  return NULL;
}
const char *tl_nccl_describe(const tl_nccl *n) {
  (void)n;
  return "no NCCL";
}
int tl_nccl_allreduce_max(tl_nccl *n, float *buf, size_t count, void *stream, char *err,
                          size_t errlen) {
  (void)n, (void)buf, (void)count, (void)stream;
  return fp8_errorf(FP8_EDEVICE, err, errlen, "no NCCL");
}
void tl_nccl_close(tl_nccl *n) { (void)n; }
int tl_nccl_unique_id(const char *path, void *id, char *why, size_t whylen) {
  (void)path, (void)id;
  return fp8_errorf(FP8_EDEVICE, why, whylen, "this GPU module was built without NCCL's header");
}
tl_nccl *tl_nccl_open_rank(const char *path, const void *id, int nranks, int rank, int device,
                           char *why, size_t whylen) {
  (void)path, (void)id, (void)nranks, (void)rank, (void)device;
  fp8_errorf(FP8_EDEVICE, why, whylen, "this GPU module was built without NCCL's header");
  return NULL;
}
#else
#include <nccl.h>

typedef ncclResult_t (*init_all_fn)(ncclComm_t *, int, const int *);
typedef ncclResult_t (*allreduce_fn)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
                                     ncclComm_t, cudaStream_t);
typedef ncclResult_t (*destroy_fn)(ncclComm_t);
typedef const char *(*errstr_fn)(ncclResult_t);
typedef ncclResult_t (*version_fn)(int *);
typedef ncclResult_t (*unique_id_fn)(ncclUniqueId *);
typedef ncclResult_t (*init_rank_fn)(ncclComm_t *, int, ncclUniqueId, int);

struct tl_nccl {
  void *lib;
  ncclComm_t comm;
  init_all_fn init_all;
  allreduce_fn allreduce;
  destroy_fn destroy;
  errstr_fn errstr;
  version_fn version;
  unique_id_fn unique_id;
  init_rank_fn init_rank;
  char desc[128];
};

#ifdef FP8LAB_TL_NCCL_LINKED
/* the emulator build: the mock NCCL of tests/gpu/mock_nccl.c, linked in */
static int resolve(tl_nccl *n, const char *path, char *why, size_t whylen) {
  (void)path, (void)why, (void)whylen;
  n->init_all = ncclCommInitAll;
  n->allreduce = ncclAllReduce;
  n->destroy = ncclCommDestroy;
  n->errstr = ncclGetErrorString;
  n->version = NULL;
  n->unique_id = ncclGetUniqueId;
  n->init_rank = ncclCommInitRank;
  return 0;
}
#else
static int resolve(tl_nccl *n, const char *path, char *why, size_t whylen) {
  const char *env = getenv("FP8LAB_NCCL_LIB");
  const char *tries[] = {path, env && *env ? env : NULL, "libnccl.so.2",
                         "/usr/local/cuda/lib/libnccl.so.2", "/usr/local/cuda/lib64/libnccl.so.2",
                         "/usr/local/cuda/targets/x86_64-linux/lib/libnccl.so.2"};
  char first[256] = "";
  for (size_t i = 0; i < sizeof tries / sizeof *tries && !n->lib; i++) {
    if (!tries[i]) continue;
    n->lib = dlopen(tries[i], RTLD_NOW | RTLD_LOCAL);
    if (!n->lib && !first[0]) snprintf(first, sizeof first, "%s", dlerror());
  }
  if (!n->lib)
    return fp8_errorf(FP8_EDEVICE, why, whylen, "NCCL not found (%s; FP8LAB_NCCL_LIB names it)",
                      first);
  n->init_all = (init_all_fn)dlsym(n->lib, "ncclCommInitAll");
  n->allreduce = (allreduce_fn)dlsym(n->lib, "ncclAllReduce");
  n->destroy = (destroy_fn)dlsym(n->lib, "ncclCommDestroy");
  n->errstr = (errstr_fn)dlsym(n->lib, "ncclGetErrorString");
  n->version = (version_fn)dlsym(n->lib, "ncclGetVersion");
  n->unique_id = (unique_id_fn)dlsym(n->lib, "ncclGetUniqueId");
  n->init_rank = (init_rank_fn)dlsym(n->lib, "ncclCommInitRank");
  if (!n->unique_id || !n->init_rank)
    return fp8_errorf(FP8_EDEVICE, why, whylen, "the NCCL library lacks ncclGetUniqueId or "
                      "ncclCommInitRank");
  if (!n->init_all || !n->allreduce || !n->destroy || !n->errstr)
    return fp8_errorf(FP8_EDEVICE, why, whylen, "the NCCL library lacks ncclCommInitAll, "
                      "ncclAllReduce, ncclCommDestroy or ncclGetErrorString");
  return 0;
}
#endif

static tl_nccl *nccl_load(const char *path, char *why, size_t whylen) {
  tl_nccl *n = calloc(1, sizeof *n);
  if (!n) {
    fp8_errorf(FP8_ENOMEM, why, whylen, "out of memory");
    return NULL;
  }
  if (resolve(n, path, why, whylen)) {
    tl_nccl_close(n);
    return NULL;
  }
  return n;
}

static void describe(tl_nccl *n, int world) {
  int v = 0;
  if (n->version && n->version(&v) == ncclSuccess && v > 0)
    snprintf(n->desc, sizeof n->desc, "NCCL %d.%d.%d, world %d", v / 10000, v / 100 % 100,
             v % 100, world);
  else
    snprintf(n->desc, sizeof n->desc, "NCCL, world %d", world);
}

tl_nccl *tl_nccl_open(const char *path, char *why, size_t whylen) {
  tl_nccl *n = nccl_load(path, why, whylen);
  if (!n) return NULL;
  const int dev = 0;
  ncclResult_t r = n->init_all(&n->comm, 1, &dev);
  if (r != ncclSuccess) {
    fp8_errorf(FP8_EDEVICE, why, whylen, "ncclCommInitAll failed: %s", n->errstr(r));
    n->comm = NULL;
    tl_nccl_close(n);
    return NULL;
  }
  describe(n, 1);
  return n;
}

int tl_nccl_unique_id(const char *path, void *id, char *why, size_t whylen) {
  _Static_assert(sizeof(ncclUniqueId) == 128, "NCCL's unique id is 128 bytes");
  tl_nccl *n = nccl_load(path, why, whylen);
  if (!n) return FP8_EDEVICE;
  ncclUniqueId u;
  ncclResult_t r = n->unique_id(&u);
  if (r == ncclSuccess) memcpy(id, &u, sizeof u);
  else fp8_errorf(FP8_EDEVICE, why, whylen, "ncclGetUniqueId failed: %s", n->errstr(r));
  tl_nccl_close(n);
  return r == ncclSuccess ? FP8_OK : FP8_EDEVICE;
}

tl_nccl *tl_nccl_open_rank(const char *path, const void *id, int nranks, int rank, int device,
                           char *why, size_t whylen) {
  tl_nccl *n = nccl_load(path, why, whylen);
  if (!n) return NULL;
  ncclUniqueId u;
  memcpy(&u, id, sizeof u);
  cudaError_t ce = cudaSetDevice(device);
  ncclResult_t r = ce == cudaSuccess ? n->init_rank(&n->comm, nranks, u, rank) : ncclUnhandledCudaError;
  if (r != ncclSuccess) {
    fp8_errorf(FP8_EDEVICE, why, whylen, "ncclCommInitRank (rank %d of %d, device %d) failed: %s",
               rank, nranks, device, ce != cudaSuccess ? cudaGetErrorString(ce) : n->errstr(r));
    n->comm = NULL;
    tl_nccl_close(n);
    return NULL;
  }
  describe(n, nranks);
  return n;
}

const char *tl_nccl_describe(const tl_nccl *n) { return n ? n->desc : "no NCCL"; }

int tl_nccl_allreduce_max(tl_nccl *n, float *buf, size_t count, void *stream, char *err,
                          size_t errlen) {
  ncclResult_t r = n->allreduce(buf, buf, count, ncclFloat32, ncclMax, n->comm,
                                (cudaStream_t)stream);
  if (r != ncclSuccess)
    return fp8_errorf(FP8_EDEVICE, err, errlen, "ncclAllReduce of %zu floats failed: %s", count,
                      n->errstr(r));
  return FP8_OK;
}

void tl_nccl_close(tl_nccl *n) {
  if (!n) return;
  if (n->comm) n->destroy(n->comm);
#ifndef FP8LAB_TL_NCCL_LINKED
  /* not dlclose'd: NCCL keeps threads and handlers for the process */
#endif
  free(n);
}
#endif /* FP8LAB_TL_NO_NCCL */
