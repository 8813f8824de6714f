// fp8k_internal.cuh: what the .cu files of fp8lab_kernels share and the C API does not show:
// the check macros (fp8_check.h), the launch macro FP8K_LAUNCH (fp8k_launch.cuh), the context structure
// and buffer growth. C++/CUDA only; the runner sees fp8k.h. bench/bench_gpu.cu includes it to
// time the kernels without the copies back.
#ifndef FP8LAB_KERNELS_FP8K_INTERNAL_CUH
#define FP8LAB_KERNELS_FP8K_INTERNAL_CUH

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

#include "fp8.h"
#include "fp8_check.h"
#include "fp8k.h"

// Every CUDA call (and every launch, through cudaGetLastError) goes through fp8_check.h's
// FP8G_CUDA, the same macro src/gpu uses: on failure "<call> failed at file:line: CUDA <name>
// (<code>): <description>" in err, rc = FP8_EDEVICE, goto done. Functions using it declare
// `int rc = 0;` and take `char *err, size_t errlen`. Argument errors: FP8G_REQUIRE with
// FP8_EINVAL (the shorthand below).
#define FP8G_REQUIRE_EINVAL(cond, ...) FP8G_REQUIRE(cond, FP8_EINVAL, __VA_ARGS__)

/* Configurations per launch of the fused kernel (more are done in further launches). */
#define FP8K_MAX_CONFIGS 64

/* What one fused launch accumulates (device memory, zeroed before the launch). */
struct fp8k_acc {
  unsigned long long cnt[FP8K_MAX_CONFIGS][4]; /* overflow, underflow, subnormal, clipped */
  double sse[FP8K_MAX_CONFIGS];                /* sum of (x - xhat)^2 over finite x */
  double ssh[FP8K_MAX_CONFIGS];                /* sum of xhat^2 over finite x */
  unsigned long long nonfinite, zeros;
  double sum_sq;
  unsigned int amax_bits; /* float bits of amax (non-negative, NaN excluded) */
  unsigned int pad;
  unsigned long long hist[FP8_LOG2_HIST_BINS];
};

struct fp8k_ctx {
  int device;
  int nsm;
  cudaStream_t stream;
  void *d_data; /* the uploaded tensor (cudaMalloc: 256-byte aligned) */
  size_t data_cap;
  int64_t numel;
  int dtype;
  uint8_t *d_codes; /* FP8 codes of config 0 */
  size_t codes_cap;
  fp8k_acc *d_acc, *h_acc; /* device accumulators and their pinned host copy */
  float *d_scales;         /* current scaling: scales computed on the device */
  float *h_scales;         /* pinned */
  void *d_delayed;         /* delayed-update buffers of fp8k_delayed_update_host */
  size_t delayed_cap;
  int f64_sums;
};

/* Grows a device buffer to at least `need` bytes (contents not kept). */
static inline cudaError_t fp8k_grow(void **p, size_t *cap, size_t need) {
  if (need <= *cap) return cudaSuccess;
  if (*p) cudaFree(*p);
  *p = nullptr;
  *cap = 0;
  cudaError_t e = cudaMalloc(p, need);
  if (e == cudaSuccess) *cap = need;
  return e;
}

/* Launches the fused pass (configs [0, nconfigs) of one group, nconfigs <= FP8K_MAX_CONFIGS)
 * into ctx->d_acc without copying anything back: scales from the host array `scales`, or, when
 * it is NULL, from the device array d_scales (sinv is then computed on the device as RN(1/s),
 * the same IEEE division the host does). `misc` asks for amax, histogram and the
 * config-independent counts; `codes` for config 0's codes in ctx->d_codes. Used by
 * fp8k_quant_stats and by the benchmark. */
int fp8k_launch_quant(fp8k_ctx *ctx, const float *scales, const float *d_scales,
                      const int *formats, int nconfigs, int hist, int codes, char *err,
                      size_t errlen);
/* Launches the amax-only pass into ctx->d_acc->amax_bits (zeroed first). */
int fp8k_launch_amax(fp8k_ctx *ctx, char *err, size_t errlen);
/* Copies fp8_decode_table's two tables into quant.cu's constant memory (fp8k_ctx_create). */
cudaError_t fp8k_copy_decode_tables(void);
/* The statistics of configs [0, m) of one launch group from the accumulators copied back
 * (quant.cu; also current.cu). */
void fp8k_fill_stats(const fp8k_ctx *ctx, const fp8k_acc *a, int m, fp8k_stats *out);

#endif
