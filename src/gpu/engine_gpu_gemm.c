/* engine_gpu_gemm.c: the GPU engine's gemm op: a layer's three GEMMs in FP8 with cuBLASLt
 * (src/gpu/gemm_lt.h: TE's formats per operand, fast accumulation in fprop only, FP32 output)
 * against cuBLASLt's FP32 GEMM of the unquantized operands, for every wanted configuration, with
 * the scales the casts used (fp8_engine_layer.scale). The operands are widened and sampled on
 * the host (gemm.h's token sampling), the codes come from the simulator's encoder
 * (bit-identical to the device cast: tests/gpu) and are uploaded with scale_inv = RN32(1/s).
 * Only plain requests of configurations that supports() accepts arrive here (per-tensor kinds
 * whose three GEMMs cuBLASLt has kernels for); a mixed request (operands of several
 * configurations) is the composite's CPU engine's, and refused here. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8_check.h"
#include "engine_gpu_internal.h"
#include "util.h"

static int gpu_dbuf_reserve(gpu_dbuf *b, size_t bytes, char *err, size_t errlen) {
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

static int reserve_host(float **b, size_t *cap, size_t n) {
  if (n <= *cap && *b) return 0;
  free(*b);
  *b = malloc((n ? n : 1) * sizeof **b);
  *cap = *b ? n : 0;
  return *b ? 0 : -1;
}

/* The layer's operands widened to float32 on the host, the token rows sampled (gemm.h). */
static int widen_operands(gpu_priv *p, const fp8_engine_layer *l, int64_t ntok, size_t count[3],
                          char *err, size_t errlen) {
  const int64_t cols[3] = {l->in, l->in, l->out};
  for (int i = 0; i < 3; i++) {
    const fp8_tensor_view *v = p->view[l->tensor[i]];
    if (!v) return fp8_errorf(FP8_EINVAL, err, errlen, "layer %s: operand %d is not loaded", l->name, i);
    size_t full = (size_t)v->numel;
    if (reserve_host(&p->h_op[i], &p->h_opcap[i], full))
      return fp8_errorf(FP8_ENOMEM, err, errlen, "layer %s: out of memory", l->name);
    fp8_dtype_to_f32(v->dtype, v->data, full, p->h_op[i]);
    if (i != 1 && ntok < l->tokens) /* in place: row k moves to row i <= k */
      for (int64_t r = 0; r < ntok; r++)
        memmove(p->h_op[i] + r * cols[i], p->h_op[i] + fp8_gemm_token(r, l->tokens, ntok) * cols[i],
                (size_t)cols[i] * sizeof(float));
    count[i] = (size_t)((i == 1 ? l->out : ntok) * cols[i]);
  }
  return FP8_OK;
}

int gpu_gemm(fp8_engine *e, const fp8_engine_layer *l, const fp8_gemm_request *req, size_t nreq,
             char *err, size_t errlen) {
  gpu_priv *p = e->priv;
  int rc = FP8_OK;
  if (!p->lt) return fp8_errorf(FP8_EINVAL, err, errlen, "layer %s: no FP8 GEMMs on %s", l->name, e->name);
  for (size_t k = 0; k < nreq; k++)
    if (!fp8_gemm_request_plain(&req[k]) || req[k].config[0] >= p->plan.nconfigs)
      return fp8_errorf(FP8_EINVAL, err, errlen, "layer %s: GEMM request %zu: %s on %s", l->name, k,
                        fp8_gemm_request_plain(&req[k]) ? "no such configuration"
                                                        : "operands of several configurations",
                        e->name);
  const int64_t ntok = fp8_gemm_ntok(l->tokens, p->plan.gemm_max_tokens);
  size_t count[3], most = 0;
  if ((rc = widen_operands(p, l, ntok, count, err, errlen)) != FP8_OK) return rc;
  for (int i = 0; i < 3; i++) most = count[i] > most ? count[i] : most;
  if (most + 1 > p->h_cap) {
    uint8_t *h = realloc(p->h_codes, most + 1);
    if (!h) return fp8_errorf(FP8_ENOMEM, err, errlen, "layer %s: out of memory", l->name);
    p->h_codes = h;
    p->h_cap = most + 1;
  }
  cudaStream_t st = (cudaStream_t)fp8_gemm_lt_stream(p->lt);
  for (int i = 0; i < 3; i++) {
    rc = gpu_dbuf_reserve(&p->d_op[i], count[i] * sizeof(float) + 16, err, errlen);
    if (!rc) rc = gpu_dbuf_reserve(&p->d_codes[i], count[i] + 16, err, errlen);
    if (rc) goto done;
    FP8G_CUDA(cudaMemcpyAsync(p->d_op[i].p, p->h_op[i], count[i] * sizeof(float),
                              cudaMemcpyHostToDevice, st));
  }
  if ((rc = gpu_dbuf_reserve(&p->d_sinv, 3 * sizeof(float), err, errlen)) != FP8_OK) goto done;
  rc = fp8_gemm_lt_ref_layer(p->lt, FP8_LT_F32, p->d_op[0].p, p->d_op[1].p, p->d_op[2].p, ntok,
                             l->in, l->out, err, errlen);
  if (rc) goto done;
  for (size_t k = 0; k < nreq; k++) {
    const size_t c = req[k].config[0];
    float sinv[3];
    fp8_lt_layer ll = {.tokens = ntok, .in = l->in, .out = l->out};
    fp8_lt_operand *lo[3] = {&ll.input, &ll.weight, &ll.grad_output};
    for (int i = 0; i < 3; i++) {
      float s = l->scale[i][c];
      fp8_format f = fp8_plan_format(&p->plan, l->tensor[i], c);
      sinv[i] = 1.0f / s; /* RN32(1/s), as fp8_quantize_f32's scale_inv */
      /* one staging buffer: wait for the previous upload before overwriting it */
      FP8G_CUDA(cudaStreamSynchronize(st));
      fp8_quantize_f32(p->h_op[i], count[i], s, f, p->h_codes, NULL, NULL);
      FP8G_CUDA(cudaMemcpyAsync(p->d_codes[i].p, p->h_codes, count[i], cudaMemcpyHostToDevice, st));
      *lo[i] = (fp8_lt_operand){.codes = p->d_codes[i].p,
                                .scale_inv = (const float *)p->d_sinv.p + i, .format = f};
    }
    FP8G_CUDA(cudaMemcpyAsync(p->d_sinv.p, sinv, sizeof sinv, cudaMemcpyHostToDevice, st));
    double r[FP8_GEMM_COUNT];
    rc = fp8_gemm_lt_layer_errors(p->lt, &ll, FP8_LT_F32, r, NULL, err, errlen);
    if (rc) goto done;
    for (int g = 0; g < FP8_GEMM_COUNT; g++) req[k].rel[g] = r[g];
  }
done:
  if (rc) {
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s", err ? err : "");
    fp8_errorf(rc, err, errlen, "layer %s: GEMM on %s: %s", l->name, e->name, tmp);
  }
  return rc;
}

void gpu_gemm_free(gpu_priv *p) {
  fp8_gemm_lt_free(p->lt);
  for (int i = 0; i < 3; i++) {
    cudaFree(p->d_op[i].p);
    cudaFree(p->d_codes[i].p);
    free(p->h_op[i]);
  }
  cudaFree(p->d_sinv.p);
  free(p->h_codes);
}
