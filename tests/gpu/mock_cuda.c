/* mock_cuda.c: a host-memory stand-in for the parts of the CUDA runtime, cuBLASLt and NCCL that
 * kernels/ and src/gpu use, so that the GPU tests' own code paths run on machines without a GPU
 * (label cpu: test_gpu_gemm_mock, test_gpu_comm_mock, test_gpu_quant_emu). The kernels
 * themselves (the .cu files of kernels/ and src/gpu/gemm_lt_kernels.cu) run unmodified on the
 * host through the CUDA execution emulator tests/gpu/emu/cuda_emu.h, which uses this runtime.
 *
 * What it checks by construction: "device memory" is host memory allocated with the exact size
 * (so ASan builds catch out-of-bounds reads and writes of the padding, transposes and kernels),
 * and every allocation is registered: copies and memsets must stay inside one allocation on the
 * device side and name the right direction (a host pointer passed as device memory, or the
 * reverse, fails with cudaErrorInvalidValue and a line on stderr), kernel pointer arguments must
 * be device memory (cuda_emu.cc), cudaFree takes only what cudaMalloc returned, streams must be
 * live. cublasLtMatmul implements cuBLASLt's column-major semantics from the matrix layouts and
 * transpose attributes, in double, with the A/B scale pointers applied and the output rounded to
 * FP32 or BF16; and it enforces the FP8 rules of sm_89/sm_90 (TN only, lda/ldb/m/n/k multiples
 * of 16, 16-byte aligned pointers, no E5M2 x E5M2), so a layout mistake in gemm_lt.c fails here
 * instead of on the GPU. AMAX_D_POINTER is accepted for FP32 outputs and refused for BF16 ones,
 * so both the cuBLASLt amax and the fallback kernel are exercised. What it cannot check: real
 * cuBLASLt's accuracy (the mock is exact), its actual support matrix, and timing. Those need the
 * GPU (scripts/device-check.sh). Stream ordering cannot be observed by running (everything here
 * is synchronous: work runs when it is issued), but it is logged and checked: between
 * mock_cuda_log_start() and mock_cuda_log_stop() every launch, async copy, memset, GEMM,
 * all-reduce, event record and wait, stream creation and host synchronisation is logged
 * (mock_cuda.h), and tests/gpu/hb_check.h computes CUDA's happens-before relation over the log,
 * so a test can ask whether one operation is guaranteed to finish before another starts.
 * Streams, events and the log are in mock_cuda_stream.c.
 */
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8.h"
#include "mock_cuda.h"
#ifdef FP8LAB_HAVE_NCCL
#include <nccl.h>
#endif

/* ---------------------------------------------------------------- runtime: errors, device */

static cudaError_t last_error = cudaSuccess;
void mock_cuda_set_last_error(cudaError_t e) {
  if (last_error == cudaSuccess) last_error = e;
}
/* A misuse of the API: a line on stderr (the caller's message only names the call). */
static cudaError_t misuse(cudaError_t e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static cudaError_t misuse(cudaError_t e, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "mock_cuda: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  return e;
}

cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : cudaErrorInvalidDevice; }
cudaError_t cudaGetDevice(int *device) {
  *device = 0;
  return cudaSuccess;
}
cudaError_t cudaGetDeviceCount(int *count) {
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int device) {
  if (device != 0) return cudaErrorInvalidDevice;
  memset(p, 0, sizeof *p);
  snprintf(p->name, sizeof p->name, "mock device (host memory, tests/gpu/mock_cuda.c)");
  p->major = 9, p->minor = 0, p->multiProcessorCount = MOCK_CUDA_SM_COUNT;
  p->totalGlobalMem = (size_t)1 << 34;
  p->warpSize = 32, p->maxThreadsPerBlock = 1024, p->sharedMemPerBlock = 48 * 1024;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device) {
  if (device != 0) return cudaErrorInvalidDevice;
  switch (attr) {
  case cudaDevAttrMultiProcessorCount: *value = MOCK_CUDA_SM_COUNT; break;
  case cudaDevAttrMaxThreadsPerBlock: *value = 1024; break;
  case cudaDevAttrWarpSize: *value = 32; break;
  case cudaDevAttrComputeCapabilityMajor: *value = 9; break;
  case cudaDevAttrComputeCapabilityMinor: *value = 0; break;
  case cudaDevAttrMaxSharedMemoryPerBlock: *value = 48 * 1024; break;
  default:
    return misuse(cudaErrorInvalidValue, "cudaDeviceGetAttribute: attribute %d not mocked",
                  (int)attr);
  }
  return cudaSuccess;
}
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *n, const void *func, int block,
                                                          size_t smem) {
  if (!func || block < 1 || block > 1024 || smem > 48 * 1024) return cudaErrorInvalidValue;
  *n = MOCK_CUDA_BLOCKS_PER_SM;
  return cudaSuccess;
}
/* the C++ template form (cuda_runtime.h) calls this one */
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *n, const void *func,
                                                                   int block, size_t smem,
                                                                   unsigned flags) {
  (void)flags;
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(n, func, block, smem);
}
cudaError_t cudaDriverGetVersion(int *v) {
  *v = 13000;
  return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int *v) {
  *v = 13000;
  return cudaSuccess;
}
cudaError_t cudaGetLastError(void) {
  cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError(void) { return last_error; }
const char *cudaGetErrorName(cudaError_t e) {
  switch (e) {
  case cudaSuccess: return "cudaSuccess";
  case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
  case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
  case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
  case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
  case cudaErrorInvalidPitchValue: return "cudaErrorInvalidPitchValue";
  case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
  default: return "cudaErrorMock";
  }
}
const char *cudaGetErrorString(cudaError_t e) {
  switch (e) {
  case cudaSuccess: return "no error";
  case cudaErrorInvalidValue: return "invalid argument (mock)";
  case cudaErrorMemoryAllocation: return "out of memory (mock)";
  case cudaErrorInvalidConfiguration: return "invalid configuration argument (mock)";
  case cudaErrorInvalidDevice: return "invalid device ordinal (mock)";
  case cudaErrorInvalidPitchValue: return "invalid pitch argument (mock)";
  case cudaErrorInvalidResourceHandle: return "invalid resource handle (mock)";
  default: return "mock error";
  }
}

/* Streams, events, cudaStreamSynchronize, cudaDeviceSynchronize and the stream-ordering log:
 * mock_cuda_stream.c. */

/* ---------------------------------------------------------------- runtime: memory */

/* Live allocations: device (cudaMalloc) and pinned host (cudaMallocHost). */
typedef struct {
  char *p;
  size_t n;
  int device;
} mock_alloc;
static mock_alloc *allocs;
static size_t nallocs, allocs_cap;

static const mock_alloc *find_alloc(const void *p) {
  for (size_t i = 0; i < nallocs; i++) {
    const char *q = (const char *)p, *a = allocs[i].p;
    if (q >= a && q < a + (allocs[i].n ? allocs[i].n : 1)) return &allocs[i];
  }
  return NULL;
}
int mock_cuda_is_device_ptr(const void *p) {
  const mock_alloc *a = find_alloc(p);
  return a && a->device;
}

static cudaError_t mock_alloc_new(void **p, size_t n, int device) {
  if (nallocs == allocs_cap) {
    size_t cap = allocs_cap ? 2 * allocs_cap : 64;
    mock_alloc *a = realloc(allocs, cap * sizeof *a);
    if (!a) return cudaErrorMemoryAllocation;
    allocs = a, allocs_cap = cap;
  }
  /* 256-byte aligned like cudaMalloc, and exactly n bytes (n = 0: a 1-byte block) so that ASan
   * sees every byte past the end. */
  void *q = NULL;
  if (posix_memalign(&q, 256, n ? n : 1) != 0) return cudaErrorMemoryAllocation;
  allocs[nallocs++] = (mock_alloc){(char *)q, n, device};
  *p = q;
  return cudaSuccess;
}
static cudaError_t mock_alloc_free(void *p, int device, const char *call) {
  if (!p) return cudaSuccess;
  for (size_t i = 0; i < nallocs; i++)
    if (allocs[i].p == p && allocs[i].device == device) {
      free(p);
      allocs[i] = allocs[--nallocs];
      return cudaSuccess;
    }
  return misuse(cudaErrorInvalidValue, "%s(%p): not a pointer %s returned", call, p,
                device ? "cudaMalloc" : "cudaMallocHost");
}

cudaError_t cudaMalloc(void **p, size_t n) { return mock_alloc_new(p, n, 1); }
cudaError_t cudaFree(void *p) { return mock_alloc_free(p, 1, "cudaFree"); }
cudaError_t cudaMallocHost(void **p, size_t n) { return mock_alloc_new(p, n, 0); }
cudaError_t cudaHostAlloc(void **p, size_t n, unsigned flags) { /* C++ cudaMallocHost<T> */
  (void)flags;
  return mock_alloc_new(p, n, 0);
}
cudaError_t cudaFreeHost(void *p) { return mock_alloc_free(p, 0, "cudaFreeHost"); }

/* [p, p+n) on the device side: inside one device allocation. */
static int device_range_ok(const void *p, size_t n, const char *call, const char *what) {
  if (n == 0) return 1;
  const mock_alloc *a = find_alloc(p);
  if (!a || !a->device) {
    misuse(cudaErrorInvalidValue, "%s: %s %p is not device memory", call, what, p);
    return 0;
  }
  if ((size_t)((const char *)p - a->p) + n > a->n) {
    misuse(cudaErrorInvalidValue,
           "%s: %s [%p, +%zu) runs past the end of its allocation of %zu bytes at %p", call,
           what, p, n, a->n, (void *)a->p);
    return 0;
  }
  return 1;
}
/* [p, p+n) on the host side: not device memory. */
static int host_range_ok(const void *p, size_t n, const char *call, const char *what) {
  if (n == 0 || !mock_cuda_is_device_ptr(p)) return 1;
  misuse(cudaErrorInvalidValue, "%s: %s %p is device memory, the copy kind says host", call,
         what, p);
  return 0;
}
static int copy_ok(void *d, const void *s, size_t n, enum cudaMemcpyKind k, const char *call) {
  switch (k) {
  case cudaMemcpyHostToDevice:
    return device_range_ok(d, n, call, "dst") && host_range_ok(s, n, call, "src");
  case cudaMemcpyDeviceToHost:
    return host_range_ok(d, n, call, "dst") && device_range_ok(s, n, call, "src");
  case cudaMemcpyDeviceToDevice:
    return device_range_ok(d, n, call, "dst") && device_range_ok(s, n, call, "src");
  case cudaMemcpyHostToHost:
    return host_range_ok(d, n, call, "dst") && host_range_ok(s, n, call, "src");
  default: return 1; /* cudaMemcpyDefault */
  }
}

static int is_pinned(const void *p) {
  const mock_alloc *a = find_alloc(p);
  return a && !a->device;
}
/* Which sides of a copy are device memory (cudaMemcpyDefault: as the pointers say). */
static int dst_is_device(const void *d, enum cudaMemcpyKind k) {
  return k == cudaMemcpyHostToDevice || k == cudaMemcpyDeviceToDevice ||
         (k == cudaMemcpyDefault && mock_cuda_is_device_ptr(d));
}
static int src_is_device(const void *s, enum cudaMemcpyKind k) {
  return k == cudaMemcpyDeviceToHost || k == cudaMemcpyDeviceToDevice ||
         (k == cudaMemcpyDefault && mock_cuda_is_device_ptr(s));
}
/* The stream-ordering log of a synchronous copy, after CUDA's "API synchronization behavior":
 * the copy is work on the legacy stream; the host waits for that stream before a pageable
 * host-to-device copy starts (on return the copy may still be in flight), after a
 * device-to-host, a pinned host-to-device or a host-to-host one, and not at all for a
 * device-to-device one. Not a device-wide synchronisation: non-blocking streams run on. */
static void log_sync_copy(int dst_dev, int src_dev, const void *src, const char *call) {
  const int pageable_h2d = dst_dev && !src_dev && !is_pinned(src);
  if (pageable_h2d) mock_cuda_log_op(MOCK_OP_STREAM_SYNC, 0, NULL, call);
  mock_cuda_log_op(MOCK_OP_WORK, 0, NULL, call);
  if (!pageable_h2d && !(dst_dev && src_dev)) mock_cuda_log_op(MOCK_OP_STREAM_SYNC, 0, NULL, call);
}

static cudaError_t memset_device(void *p, int v, size_t n, const char *call) {
  if (!device_range_ok(p, n, call, "dst")) return cudaErrorInvalidValue;
  if (n) memset(p, v, n);
  return cudaSuccess;
}
/* cudaMemset of device memory does not block the host: work on the legacy stream. */
cudaError_t cudaMemset(void *p, int v, size_t n) {
  cudaError_t e = memset_device(p, v, n, "cudaMemset");
  if (e == cudaSuccess) mock_cuda_log_op(MOCK_OP_WORK, 0, NULL, "cudaMemset");
  return e;
}
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s) {
  if (!mock_cuda_stream_valid(s)) return cudaErrorInvalidResourceHandle;
  cudaError_t e = memset_device(p, v, n, "cudaMemsetAsync");
  if (e == cudaSuccess) mock_cuda_log_op(MOCK_OP_WORK, s, NULL, "cudaMemsetAsync");
  return e;
}
static cudaError_t copy_1d(void *d, const void *s, size_t n, enum cudaMemcpyKind k,
                           const char *call) {
  if (!copy_ok(d, s, n, k, call)) return cudaErrorInvalidValue;
  if (n) memmove(d, s, n);
  return cudaSuccess;
}
cudaError_t cudaMemcpy(void *d, const void *s, size_t n, enum cudaMemcpyKind k) {
  cudaError_t e = copy_1d(d, s, n, k, "cudaMemcpy");
  if (e == cudaSuccess && mock_cuda_logging())
    log_sync_copy(dst_is_device(d, k), src_is_device(s, k), s, "cudaMemcpy");
  return e;
}
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, enum cudaMemcpyKind k,
                            cudaStream_t st) {
  if (!mock_cuda_stream_valid(st)) return cudaErrorInvalidResourceHandle;
  cudaError_t e = copy_1d(d, s, n, k, "cudaMemcpyAsync");
  if (e == cudaSuccess) mock_cuda_log_op(MOCK_OP_WORK, st, NULL, "cudaMemcpyAsync");
  return e;
}
cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t height, enum cudaMemcpyKind k, cudaStream_t st) {
  if (!mock_cuda_stream_valid(st)) return cudaErrorInvalidResourceHandle;
  if (width > dpitch || width > spitch) return cudaErrorInvalidPitchValue;
  if (height == 0 || width == 0) {
    mock_cuda_log_op(MOCK_OP_WORK, st, NULL, "cudaMemcpy2DAsync");
    return cudaSuccess;
  }
  /* the spans the copy touches: (height - 1) pitches plus one row */
  if (!copy_ok(dst, src, 0, k, "cudaMemcpy2DAsync") ||
      ((k == cudaMemcpyHostToDevice || k == cudaMemcpyDeviceToDevice) &&
       !device_range_ok(dst, (height - 1) * dpitch + width, "cudaMemcpy2DAsync", "dst")) ||
      ((k == cudaMemcpyDeviceToHost || k == cudaMemcpyDeviceToDevice) &&
       !device_range_ok(src, (height - 1) * spitch + width, "cudaMemcpy2DAsync", "src")))
    return cudaErrorInvalidValue;
  for (size_t r = 0; r < height; r++)
    memmove((char *)dst + r * dpitch, (const char *)src + r * spitch, width);
  mock_cuda_log_op(MOCK_OP_WORK, st, NULL, "cudaMemcpy2DAsync");
  return cudaSuccess;
}
/* __constant__ / __device__ variables are host globals under the emulator (cuda_emu.h); the
 * symbol side counts as device memory, the copies are synchronous like cudaMemcpy. */
cudaError_t cudaMemcpyToSymbol(const void *symbol, const void *src, size_t count, size_t offset,
                               enum cudaMemcpyKind k) {
  if (k != cudaMemcpyHostToDevice && k != cudaMemcpyDeviceToDevice && k != cudaMemcpyDefault)
    return cudaErrorInvalidMemcpyDirection;
  memcpy((char *)symbol + offset, src, count);
  if (mock_cuda_logging()) log_sync_copy(1, src_is_device(src, k), src, "cudaMemcpyToSymbol");
  return cudaSuccess;
}
cudaError_t cudaMemcpyFromSymbol(void *dst, const void *symbol, size_t count, size_t offset,
                                 enum cudaMemcpyKind k) {
  if (k != cudaMemcpyDeviceToHost && k != cudaMemcpyDeviceToDevice && k != cudaMemcpyDefault)
    return cudaErrorInvalidMemcpyDirection;
  memcpy(dst, (const char *)symbol + offset, count);
  if (mock_cuda_logging()) log_sync_copy(dst_is_device(dst, k), 1, symbol, "cudaMemcpyFromSymbol");
  return cudaSuccess;
}

/* ---------------------------------------------------------------- BF16 helpers (cuBLASLt) */

static float bf16_value(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static uint16_t bf16_round(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

/* ---------------------------------------------------------------- cuBLASLt */

typedef struct {
  int transa, transb, fast;
  const float *ascale, *bscale;
  void *amax;
} mdesc;
typedef struct {
  cudaDataType type;
  uint64_t rows, cols;
  int64_t ld;
} mlayout;

static int handle_token;
cublasStatus_t cublasLtCreate(cublasLtHandle_t *h) {
  *h = (cublasLtHandle_t)&handle_token;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) {
  (void)h;
  return CUBLAS_STATUS_SUCCESS;
}
const char *cublasLtGetStatusName(cublasStatus_t s) {
  return s == CUBLAS_STATUS_SUCCESS ? "CUBLAS_STATUS_SUCCESS"
         : s == CUBLAS_STATUS_NOT_SUPPORTED ? "CUBLAS_STATUS_NOT_SUPPORTED"
                                            : "CUBLAS_STATUS_INVALID_VALUE";
}
const char *cublasLtGetStatusString(cublasStatus_t s) {
  (void)s;
  return "mock cuBLASLt";
}
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t c,
                                        cudaDataType_t scale) {
  if (c != CUBLAS_COMPUTE_32F || scale != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  mdesc *m = calloc(1, sizeof *m);
  m->transa = m->transb = CUBLAS_OP_N;
  *d = (cublasLtMatmulDesc_t)m;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
  free(d);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d,
                                              cublasLtMatmulDescAttributes_t attr,
                                              const void *buf, size_t size) {
  mdesc *m = (mdesc *)d;
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA:
      if (size != sizeof(int32_t)) return CUBLAS_STATUS_INVALID_VALUE;
      memcpy(&m->transa, buf, 4);
      break;
    case CUBLASLT_MATMUL_DESC_TRANSB:
      if (size != sizeof(int32_t)) return CUBLAS_STATUS_INVALID_VALUE;
      memcpy(&m->transb, buf, 4);
      break;
    case CUBLASLT_MATMUL_DESC_FAST_ACCUM: {
      if (size != sizeof(int8_t)) return CUBLAS_STATUS_INVALID_VALUE;
      m->fast = *(const int8_t *)buf;
      break;
    }
    case CUBLASLT_MATMUL_DESC_A_SCALE_POINTER:
    case CUBLASLT_MATMUL_DESC_B_SCALE_POINTER:
    case CUBLASLT_MATMUL_DESC_AMAX_D_POINTER: {
      if (size != sizeof(void *)) return CUBLAS_STATUS_INVALID_VALUE;
      void *p;
      memcpy(&p, buf, sizeof p);
      if (attr == CUBLASLT_MATMUL_DESC_A_SCALE_POINTER) m->ascale = p;
      else if (attr == CUBLASLT_MATMUL_DESC_B_SCALE_POINTER) m->bscale = p;
      else m->amax = p;
      break;
    }
    default:
      return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld) {
  if (ld < (int64_t)rows || ld < 1) return CUBLAS_STATUS_INVALID_VALUE; /* column-major ld >= rows */
  mlayout *m = calloc(1, sizeof *m);
  *m = (mlayout){type, rows, cols, ld};
  *l = (cublasLtMatrixLayout_t)m;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
  free(l);
  return CUBLAS_STATUS_SUCCESS;
}
static int pref_token;
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) {
  *p = (cublasLtMatmulPreference_t)&pref_token;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
  (void)p;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                    cublasLtMatmulPreferenceAttributes_t a,
                                                    const void *buf, size_t size) {
  (void)p, (void)buf;
  return a == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES && size == sizeof(uint64_t)
             ? CUBLAS_STATUS_SUCCESS
             : CUBLAS_STATUS_INVALID_VALUE;
}

static int is_fp8(cudaDataType t) { return t == CUDA_R_8F_E4M3 || t == CUDA_R_8F_E5M2; }

/* The problem is valid (shapes agree with the transposes) and, for FP8, follows sm_90's rules.
 * Returns a status and a reason for stderr. */
static cublasStatus_t validate(const mdesc *d, const mlayout *a, const mlayout *b,
                               const mlayout *c, const mlayout *dd, uint64_t *m, uint64_t *n,
                               uint64_t *k, const char **why) {
  *m = dd->rows, *n = dd->cols;
  const uint64_t am = d->transa == CUBLAS_OP_T ? a->cols : a->rows;
  *k = d->transa == CUBLAS_OP_T ? a->rows : a->cols;
  const uint64_t bk = d->transb == CUBLAS_OP_T ? b->cols : b->rows;
  const uint64_t bn = d->transb == CUBLAS_OP_T ? b->rows : b->cols;
  *why = "";
  if (am != *m || bn != *n || bk != *k) return *why = "op(A) m x k, op(B) k x n, D m x n disagree", CUBLAS_STATUS_INVALID_VALUE;
  if (c->rows != dd->rows || c->cols != dd->cols || c->type != dd->type)
    return *why = "C and D differ", CUBLAS_STATUS_INVALID_VALUE;
  if (is_fp8(a->type) != is_fp8(b->type)) return *why = "FP8 with non-FP8", CUBLAS_STATUS_NOT_SUPPORTED;
  if (is_fp8(a->type)) {
    if (d->transa != CUBLAS_OP_T || d->transb != CUBLAS_OP_N)
      return *why = "FP8 needs TN", CUBLAS_STATUS_NOT_SUPPORTED;
    if (a->type == CUDA_R_8F_E5M2 && b->type == CUDA_R_8F_E5M2)
      return *why = "no E5M2 x E5M2", CUBLAS_STATUS_NOT_SUPPORTED;
    if (a->ld % 16 || b->ld % 16 || *m % 16 || *n % 16 || *k % 16)
      return *why = "FP8: lda, ldb, m, n, k must be multiples of 16 (mock rule)", CUBLAS_STATUS_NOT_SUPPORTED;
    if (dd->type != CUDA_R_32F && dd->type != CUDA_R_16BF)
      return *why = "FP8 output type", CUBLAS_STATUS_NOT_SUPPORTED;
    if (d->amax && dd->type != CUDA_R_32F) /* exercises gemm_lt.c's fallback */
      return *why = "mock: no AMAX_D for BF16 output", CUBLAS_STATUS_NOT_SUPPORTED;
  } else if (d->ascale || d->bscale || d->amax || d->fast) {
    return *why = "scales / amax / fast accum on a non-FP8 GEMM", CUBLAS_STATUS_NOT_SUPPORTED;
  }
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t op,
                                              cublasLtMatrixLayout_t A, cublasLtMatrixLayout_t B,
                                              cublasLtMatrixLayout_t C, cublasLtMatrixLayout_t D,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t res[], int *count) {
  (void)h, (void)pref;
  uint64_t m, n, k;
  const char *why;
  *count = 0;
  if (requested < 1) return CUBLAS_STATUS_INVALID_VALUE;
  cublasStatus_t s = validate((const mdesc *)op, (const mlayout *)A, (const mlayout *)B,
                              (const mlayout *)C, (const mlayout *)D, &m, &n, &k, &why);
  if (s) return s;
  memset(&res[0], 0, sizeof res[0]);
  res[0].state = CUBLAS_STATUS_SUCCESS;
  res[0].workspaceSize = 4096;
  *count = 1;
  return CUBLAS_STATUS_SUCCESS;
}

static double element(const void *p, cudaDataType t, int64_t i) {
  switch (t) {
    case CUDA_R_8F_E4M3: return fp8_decode(((const uint8_t *)p)[i], FP8_E4M3);
    case CUDA_R_8F_E5M2: return fp8_decode(((const uint8_t *)p)[i], FP8_E5M2);
    case CUDA_R_16BF: return bf16_value(((const uint16_t *)p)[i]);
    default: return ((const float *)p)[i];
  }
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t op, const void *alpha,
                              const void *A, cublasLtMatrixLayout_t Ad, const void *B,
                              cublasLtMatrixLayout_t Bd, const void *beta, const void *C,
                              cublasLtMatrixLayout_t Cd, void *D, cublasLtMatrixLayout_t Dd,
                              const cublasLtMatmulAlgo_t *algo, void *ws, size_t wss,
                              cudaStream_t stream) {
  (void)h, (void)algo;
  const mdesc *d = (const mdesc *)op;
  const mlayout *a = (const mlayout *)Ad, *b = (const mlayout *)Bd, *dd = (const mlayout *)Dd;
  uint64_t m, n, k;
  const char *why;
  cublasStatus_t s = validate(d, a, b, (const mlayout *)Cd, dd, &m, &n, &k, &why);
  if (s) {
    fprintf(stderr, "mock cublasLtMatmul: %s\n", why);
    return s;
  }
  if (wss < 4096 || *(const float *)beta != 0.0f || C != D) return CUBLAS_STATUS_INVALID_VALUE;
  /* operands, scales, amax and workspace live on the device (alpha and beta on the host) */
  const void *dev[] = {A, B, D, ws, d->ascale, d->bscale, d->amax};
  const char *dev_name[] = {"A", "B", "D", "workspace", "A scale", "B scale", "amax D"};
  for (int i = 0; i < 7; i++)
    if (dev[i] && !mock_cuda_is_device_ptr(dev[i])) {
      fprintf(stderr, "mock cublasLtMatmul: %s %p is not device memory\n", dev_name[i], dev[i]);
      return CUBLAS_STATUS_INVALID_VALUE;
    }
  if (is_fp8(a->type) && (((uintptr_t)A | (uintptr_t)B | (uintptr_t)D) % 16))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (!mock_cuda_stream_valid(stream)) {
    fprintf(stderr, "mock cublasLtMatmul: stream %p is not a live stream\n", (void *)stream);
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  const double scale = *(const float *)alpha * (d->ascale ? *d->ascale : 1.0) *
                       (d->bscale ? *d->bscale : 1.0);
  /* op(A) as [m][k], op(B) as [k][n] doubles (column-major reads), then D column-major. */
  double *oa = malloc((m * k + 1) * sizeof *oa), *ob = malloc((k * n + 1) * sizeof *ob);
  for (uint64_t i = 0; i < m; i++)
    for (uint64_t kk = 0; kk < k; kk++)
      oa[i * k + kk] = element(A, a->type, d->transa == CUBLAS_OP_T ? (int64_t)(kk + i * a->ld)
                                                                     : (int64_t)(i + kk * a->ld));
  for (uint64_t kk = 0; kk < k; kk++)
    for (uint64_t j = 0; j < n; j++)
      ob[kk * n + j] = element(B, b->type, d->transb == CUBLAS_OP_T ? (int64_t)(j + kk * b->ld)
                                                                     : (int64_t)(kk + j * b->ld));
  float amax = 0.0f;
  for (uint64_t i = 0; i < m; i++)
    for (uint64_t j = 0; j < n; j++) {
      double acc = 0;
      for (uint64_t kk = 0; kk < k; kk++) acc += oa[i * k + kk] * ob[kk * n + j];
      const float v = (float)(acc * scale);
      const int64_t at = (int64_t)(i + j * dd->ld);
      if (dd->type == CUDA_R_16BF) {
        ((uint16_t *)D)[at] = bf16_round(v);
        amax = fmaxf(amax, fabsf(bf16_value(bf16_round(v))));
      } else {
        ((float *)D)[at] = v;
        amax = fmaxf(amax, fabsf(v));
      }
    }
  if (d->amax) *(float *)d->amax = amax;
  free(oa);
  free(ob);
  mock_cuda_log_op(MOCK_OP_WORK, stream, NULL, "cublasLtMatmul");
  return CUBLAS_STATUS_SUCCESS;
}

