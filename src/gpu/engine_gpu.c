/* engine_gpu.c: the GPU engine (engine.h) on the fused kernels of kernels/quant.cu.
 *
 * load uploads the tensor's raw bytes once and runs one pass for its amax and log2 histogram
 * (no configuration); stats runs the fused
 * quantize + statistics kernel for all the per-tensor configurations in one more pass over the
 * device copy. Two passes, because current scaling needs the amax before its scale; the
 * simulator gives the oracle values (tests/gpu). Block recipes stay on the CPU (runner.c).
 *
 * gemm runs a layer's three GEMMs in FP8 with cuBLASLt (src/gpu/gemm_lt.h: TE's formats per
 * operand, fast accumulation in fprop only, FP32 output) against cuBLASLt's FP32 GEMM of the
 * unquantized operands. The codes come from the simulator's encoder on the host (bit-identical
 * to the device cast, tests/gpu) and are uploaded with their scale_inv = RN32(1/scale). Per-tensor
 * recipes only; E5M2 x E5M2 GEMMs (no cuBLASLt kernel) are left to the CPU (done = false).
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "engine.h"
#include "fp8k.h"
#include "gemm_lt.h"
#include "outfile.h"

/* A device buffer that only grows. */
typedef struct {
  void *p;
  size_t cap;
} dbuf;

typedef struct {
  fp8k_ctx *ctx;
  char name[300];
  fp8_gemm_lt *lt;   /* created on the first gemm call */
  int lt_failed;     /* no FP8 GEMMs on this device: every GEMM goes to the CPU */
  dbuf d_op[3];      /* unquantized input, weight, grad_output (float32, sampled tokens) */
  dbuf d_codes[3];   /* their codes under the current configuration */
  dbuf d_sinv;       /* 3 scale_inv floats */
  uint8_t *h_codes;  /* host staging for the codes */
  size_t h_cap;
} gpu_priv;

static int dbuf_reserve(dbuf *b, size_t bytes, char *err, size_t errlen) {
  int rc = FP8_OK;
  if (bytes <= b->cap) return FP8_OK;
  cudaFree(b->p);
  b->p = NULL;
  b->cap = 0;
  FP8G_CUDA(cudaMalloc(&b->p, bytes));
  b->cap = bytes;
done:
  return rc;
}

static int gpu_load(fp8_engine *e, const fp8_tensor_view *v, float *amax, int64_t *hist, char *err,
                    size_t errlen) {
  gpu_priv *p = e->priv;
  int rc = fp8k_upload(p->ctx, v->data, v->numel, (int)v->dtype, err, errlen);
  if (rc) return rc;
  memset(hist, 0, FP8_LOG2_HIST_BINS * sizeof *hist);
  // No configuration: the pass computes only the amax and the log2 histogram.
  return fp8k_quant_stats(p->ctx, NULL, NULL, 0, NULL, amax, hist, NULL, err, errlen);
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

/* The sampled token rows of a [tokens, cols] matrix (gemm.h's token sampling). */
static void sample_rows(const float *x, int64_t tokens, int64_t cols, int64_t ntok, float *dst) {
  for (int64_t i = 0; i < ntok; i++)
    memcpy(dst + i * cols, x + fp8_gemm_token(i, tokens, ntok) * cols, (size_t)cols * sizeof *dst);
}

static int gpu_gemm(fp8_engine *e, const fp8_engine_gemm_job *job, double *rel, bool *done,
                    char *err, size_t errlen) {
  gpu_priv *p = e->priv;
  int rc = FP8_OK;
  float *tmp = NULL;
  const size_t n = job->n;
  for (size_t i = 0; i < FP8_GEMM_COUNT * n; i++) {
    rel[i] = NAN;
    done[i] = false;
  }
  if (!p->lt && !p->lt_failed) {
    char why[512];
    if (fp8_gemm_lt_create(&p->lt, 0, why, sizeof why) != FP8_OK) {
      fprintf(stderr, "fp8lab: FP8 GEMMs on the CPU: %s\n", why);
      p->lt_failed = 1;
    }
  }
  if (!p->lt) return FP8_OK;
  const int64_t T = job->tokens, in = job->in, out = job->out;
  const int64_t ntok = fp8_gemm_ntok(T, job->max_tokens);
  const int64_t rows[3] = {ntok, out, ntok}, cols[3] = {in, in, out};
  size_t count[3], most = 0;
  for (int i = 0; i < 3; i++) {
    count[i] = (size_t)(rows[i] * cols[i]);
    if (count[i] > most) most = count[i];
  }
  const float *op[3] = {job->x, job->w, job->g};
  if (ntok < T) {
    tmp = malloc((count[0] + count[2] + 1) * sizeof *tmp);
    if (!tmp) return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
    sample_rows(job->x, T, in, ntok, tmp);
    sample_rows(job->g, T, out, ntok, tmp + count[0]);
    op[0] = tmp;
    op[2] = tmp + count[0];
  }
  if (most + 1 > p->h_cap) {
    uint8_t *h = realloc(p->h_codes, most + 1);
    if (!h) {
      rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
      goto done;
    }
    p->h_codes = h;
    p->h_cap = most + 1;
  }
  cudaStream_t st = (cudaStream_t)fp8_gemm_lt_stream(p->lt);
  for (int i = 0; i < 3; i++) {
    rc = dbuf_reserve(&p->d_op[i], count[i] * sizeof(float) + 16, err, errlen);
    if (!rc) rc = dbuf_reserve(&p->d_codes[i], count[i] + 16, err, errlen);
    if (rc) goto done;
    FP8G_CUDA(cudaMemcpyAsync(p->d_op[i].p, op[i], count[i] * sizeof(float),
                              cudaMemcpyHostToDevice, st));
  }
  rc = dbuf_reserve(&p->d_sinv, 3 * sizeof(float), err, errlen);
  if (rc) goto done;
  rc = fp8_gemm_lt_ref_layer(p->lt, FP8_LT_F32, p->d_op[0].p, p->d_op[1].p, p->d_op[2].p, ntok,
                             in, out, err, errlen);
  if (rc) goto done;
  for (size_t c = 0; c < n; c++) {
    float sinv[3];
    fp8_lt_layer l = {.tokens = ntok, .in = in, .out = out};
    fp8_lt_operand *lo[3] = {&l.input, &l.weight, &l.grad_output};
    for (int i = 0; i < 3; i++) {
      float s = job->scale[i][c];
      sinv[i] = 1.0f / s; /* RN32(1/s), as fp8_quantize_f32's scale_inv */
      /* one staging buffer: wait for the previous upload before overwriting it */
      FP8G_CUDA(cudaStreamSynchronize(st));
      fp8_quantize_f32(op[i], count[i], s, job->format[i][c], p->h_codes, NULL, NULL);
      FP8G_CUDA(cudaMemcpyAsync(p->d_codes[i].p, p->h_codes, count[i], cudaMemcpyHostToDevice,
                                st));
      *lo[i] = (fp8_lt_operand){.codes = p->d_codes[i].p,
                                .scale_inv = (const float *)p->d_sinv.p + i,
                                .format = job->format[i][c]};
    }
    FP8G_CUDA(cudaMemcpyAsync(p->d_sinv.p, sinv, sizeof sinv, cudaMemcpyHostToDevice, st));
    double r[FP8_GEMM_COUNT];
    int lrc = fp8_gemm_lt_layer_errors(p->lt, &l, FP8_LT_F32, r, NULL, err, errlen);
    if (lrc && lrc != FP8_ERANGE) {
      rc = lrc;
      goto done;
    }
    for (int k = 0; k < FP8_GEMM_COUNT; k++) {
      /* FP8_ERANGE: some GEMM cuBLASLt cannot run (E5M2 x E5M2) was skipped, its error NaN */
      if (lrc == FP8_ERANGE && isnan(r[k])) continue;
      rel[(size_t)k * n + c] = r[k];
      done[(size_t)k * n + c] = true;
    }
  }
done:
  free(tmp);
  return rc;
}

static void gpu_free(fp8_engine *e) {
  if (!e) return;
  gpu_priv *p = e->priv;
  if (p) {
    if (p->ctx) fp8k_ctx_destroy(p->ctx);
    fp8_gemm_lt_free(p->lt);
    for (int i = 0; i < 3; i++) {
      cudaFree(p->d_op[i].p);
      cudaFree(p->d_codes[i].p);
    }
    cudaFree(p->d_sinv.p);
    free(p->h_codes);
  }
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
  e->gemm = gpu_gemm;
  e->free = gpu_free;
  e->priv = p;
  *out = e;
  return FP8_OK;
}
