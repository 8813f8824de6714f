/* engine_gpu.c: the GPU engine (engine.h) on the fused kernels of kernels/quant.cu.
 *
 * load uploads the tensor's raw bytes once and runs one pass for its amax and log2 histogram
 * (with a placeholder configuration whose statistics are dropped); stats runs the fused
 * quantize + statistics kernel for all the per-tensor configurations in one more pass over the
 * device copy. Two passes, because current scaling needs the amax before its scale; the
 * simulator gives the oracle values (tests/gpu). Block recipes stay on the CPU (runner.c).
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "fp8k.h"
#include "outfile.h"

typedef struct {
  fp8k_ctx *ctx;
  char name[300];
} gpu_priv;

static int gpu_load(fp8_engine *e, const fp8_tensor_view *v, float *amax, int64_t *hist, char *err,
                    size_t errlen) {
  gpu_priv *p = e->priv;
  int rc = fp8k_upload(p->ctx, v->data, v->numel, (int)v->dtype, err, errlen);
  if (rc) return rc;
  float one = 1.0f;
  int e4m3 = FP8_E4M3;
  fp8k_stats dummy;
  memset(hist, 0, FP8_LOG2_HIST_BINS * sizeof *hist);
  return fp8k_quant_stats(p->ctx, &one, &e4m3, 1, &dummy, amax, hist, NULL, err, errlen);
}

static int gpu_stats(fp8_engine *e, const float *scales, const fp8_format *formats, size_t n,
                     fp8_stats *out, char *err, size_t errlen) {
  gpu_priv *p = e->priv;
  int *fmts = calloc(n + 1, sizeof *fmts);
  fp8k_stats *st = malloc((n + 1) * sizeof *st);
  int rc = FP8_OK;
  if (!fmts || !st) {
    rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
    goto done;
  }
  for (size_t i = 0; i < n; i++) fmts[i] = (int)formats[i];
  rc = fp8k_quant_stats(p->ctx, scales, fmts, (int)n, st, NULL, NULL, NULL, err, errlen);
  if (rc) goto done;
  for (size_t i = 0; i < n; i++) {
    out[i] = (fp8_stats){.n = st[i].n, .nonfinite = st[i].nonfinite, .zeros = st[i].zeros,
                         .overflow = st[i].overflow, .underflow = st[i].underflow,
                         .subnormal = st[i].subnormal, .sum_sq_err = st[i].sum_sq_err,
                         .sum_sq = st[i].sum_sq};
  }
done:
  free(fmts);
  free(st);
  return rc;
}

static void gpu_free(fp8_engine *e) {
  if (!e) return;
  gpu_priv *p = e->priv;
  if (p && p->ctx) fp8k_ctx_destroy(p->ctx);
  free(p);
  free(e);
}

int fp8_engine_gpu_create(fp8_engine **out, char *err, size_t errlen) {
  char why[256] = "";
  if (fp8k_device_count(why, sizeof why) == 0)
    return fp8_errorf(FP8_EDEVICE, err, errlen, "no usable CUDA device (%s)", why);
  fp8_engine *e = calloc(1, sizeof *e);
  gpu_priv *p = calloc(1, sizeof *p);
  if (!e || !p) {
    free(e);
    free(p);
    return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  }
  int rc = fp8k_ctx_create(&p->ctx, 0, err, errlen);
  if (rc) {
    free(e);
    free(p);
    return rc;
  }
  struct cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
    snprintf(p->name, sizeof p->name, "gpu: %s", prop.name);
  else
    snprintf(p->name, sizeof p->name, "gpu");
  e->name = p->name;
  e->load = gpu_load;
  e->stats = gpu_stats;
  e->free = gpu_free;
  e->priv = p;
  *out = e;
  return FP8_OK;
}
