/* gemm_lt_ref.c: the reference GEMMs of gemm_lt.h (FP32 / BF16 operands in any layout,
 * cuBLASLt's transpose flags, true FP32 arithmetic), the relative error against them, and the
 * layer-level pair (fp8_gemm_lt_ref_layer, fp8_gemm_lt_layer_errors). The context, plans and
 * scratch are gemm_lt.c's (gemm_lt_internal.h). */
#include "gemm_lt.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8_check.h"
#include "gemm_lt_internal.h"
#include "gemm_lt_kernels.h"

int fp8_gemm_lt_ref(fp8_gemm_lt *ctx, fp8_gemm_kind g, fp8_lt_dtype xtype, const void *input,
                    const void *weight, const void *grad_output, int64_t tokens, int64_t in,
                    int64_t out, float *y, char *err, size_t errlen) {
  int rc = FP8_OK;
  FP8G_REQUIRE(ctx, FP8_EINVAL, "fp8_gemm_lt_ref: no context");
  FP8G_REQUIRE(g >= FP8_GEMM_FPROP && g <= FP8_GEMM_WGRAD, FP8_EINVAL,
               "fp8_gemm_lt_ref: unknown GEMM %d", (int)g);
  FP8G_REQUIRE(xtype == FP8_LT_F32 || xtype == FP8_LT_BF16, FP8_EINVAL,
               "fp8_gemm_lt_ref: unknown input type %d", (int)xtype);
  FP8G_REQUIRE(tokens >= 0 && in >= 0 && out >= 0, FP8_EINVAL,
               "fp8_gemm_lt_ref: negative shape tokens=%lld in=%lld out=%lld", (long long)tokens,
               (long long)in, (long long)out);
  FP8G_CUDA(cudaSetDevice(ctx->device));
  int64_t M, N, K;
  fp8_gemm_lt_shape(g, tokens, in, out, &M, &N, &K);
  FP8G_REQUIRE(y, FP8_EINVAL, "fp8_gemm_lt_ref: output pointer is NULL");
  if (M == 0 || N == 0) goto done;
  if (K == 0) {
    FP8G_CUDA(cudaMemsetAsync(y, 0, (size_t)M * (size_t)N * sizeof(float), ctx->stream));
    goto done;
  }
  /* Column-major D (N x M, ldd = N) = Y row-major. With row-major X [T,in], W [out,in],
   * dY [T,out] read column-major as X^T (in x T), W^T (in x out), dY^T (out x T):
   *   fprop  D = W (out x in)      ·  X^T (in x T):    A = W  op T, lda = in;  B = X  op N, ldb = in
   *   dgrad  D = W^T (in x out)    ·  dY^T (out x T):  A = W  op N, lda = in;  B = dY op N, ldb = out
   *   wgrad  D = X^T (in x T)      ·  dY (T x out):    A = X  op N, lda = in;  B = dY op T, ldb = out */
  const void *A, *B;
  int ta, tb;
  int64_t lda, ldb;
  if (g == FP8_GEMM_FPROP) A = weight, ta = CUBLAS_OP_T, lda = in, B = input, tb = CUBLAS_OP_N, ldb = in;
  else if (g == FP8_GEMM_DGRAD) A = weight, ta = CUBLAS_OP_N, lda = in, B = grad_output, tb = CUBLAS_OP_N, ldb = out;
  else A = input, ta = CUBLAS_OP_N, lda = in, B = grad_output, tb = CUBLAS_OP_T, ldb = out;
  FP8G_REQUIRE(A && B, FP8_EINVAL, "fp8_gemm_lt_ref: an operand of the %s GEMM is NULL",
               g == FP8_GEMM_FPROP ? "fprop" : g == FP8_GEMM_DGRAD ? "dgrad" : "wgrad");
  plan_key key;
  memset(&key, 0, sizeof key);
  key.a_type = key.b_type = lt_type(xtype);
  key.d_type = CUDA_R_32F;
  key.transa = ta, key.transb = tb;
  key.m = N, key.n = M, key.k = K;
  key.lda = lda, key.ldb = ldb, key.ldd = N;
  plan *pl = NULL;
  rc = lt_get_plan(ctx, &key, NULL, NULL, NULL, &pl, err, errlen);
  if (rc) goto done;
  rc = lt_run_plan(ctx, pl, A, B, y, err, errlen);
done:
  return rc;
}

int fp8_gemm_lt_rel_error(fp8_gemm_lt *ctx, const void *y, fp8_lt_dtype ytype, const float *y_ref,
                          int64_t n, double *rel_error, char *err, size_t errlen) {
  int rc = FP8_OK;
  FP8G_REQUIRE(ctx && rel_error, FP8_EINVAL, "fp8_gemm_lt_rel_error: no context or result");
  FP8G_REQUIRE(n >= 0, FP8_EINVAL, "fp8_gemm_lt_rel_error: negative n");
  FP8G_REQUIRE(n == 0 || (y && y_ref), FP8_EINVAL, "fp8_gemm_lt_rel_error: NULL matrix");
  FP8G_CUDA(cudaSetDevice(ctx->device));
  const int nb = fp8g_err_blocks(n);
  rc = lt_scratch_reserve(&ctx->sums, (size_t)nb * 3 * sizeof(double), err, errlen);
  if (rc) goto done;
  FP8G_CUDA(fp8g_err_sums(y, ytype == FP8_LT_BF16, y_ref, n, (double *)ctx->sums.p, nb,
                          ctx->stream));
  FP8G_CUDA(cudaMemcpyAsync(ctx->host_sums, ctx->sums.p, (size_t)nb * 3 * sizeof(double),
                            cudaMemcpyDeviceToHost, ctx->stream));
  FP8G_CUDA(cudaStreamSynchronize(ctx->stream));
  double d2 = 0, r2 = 0, y2 = 0;
  for (int b = 0; b < nb; b++) {
    d2 += ctx->host_sums[3 * b];
    r2 += ctx->host_sums[3 * b + 1];
    y2 += ctx->host_sums[3 * b + 2];
  }
  if (r2 == 0.0) *rel_error = y2 == 0.0 ? 0.0 : (isnan(y2) ? NAN : INFINITY);
  else *rel_error = sqrt(d2) / sqrt(r2);
done:
  return rc;
}

int fp8_gemm_lt_ref_layer(fp8_gemm_lt *ctx, fp8_lt_dtype xtype, const void *input,
                          const void *weight, const void *grad_output, int64_t tokens, int64_t in,
                          int64_t out, char *err, size_t errlen) {
  int rc = FP8_OK;
  FP8G_REQUIRE(ctx, FP8_EINVAL, "fp8_gemm_lt_ref_layer: no context");
  FP8G_REQUIRE(tokens >= 0 && in >= 0 && out >= 0, FP8_EINVAL,
               "fp8_gemm_lt_ref_layer: negative shape");
  FP8G_CUDA(cudaSetDevice(ctx->device));
  const void *ops[FP8_GEMM_COUNT][2] = {
      {input, weight}, {grad_output, weight}, {grad_output, input}};
  for (int g = 0; g < FP8_GEMM_COUNT; g++) ctx->ref_have[g] = false;
  ctx->ref_tokens = tokens, ctx->ref_in = in, ctx->ref_out = out;
  for (int g = 0; g < FP8_GEMM_COUNT; g++) {
    if (!ops[g][0] || !ops[g][1]) continue;
    int64_t rows, cols;
    fp8_gemm_lt_shape((fp8_gemm_kind)g, tokens, in, out, &rows, &cols, NULL);
    size_t bytes = (size_t)rows * (size_t)cols * sizeof(float);
    if (bytes > ctx->y_ref_cap[g]) {
      cudaFree(ctx->y_ref[g]);
      ctx->y_ref[g] = NULL;
      ctx->y_ref_cap[g] = 0;
      FP8G_CUDA(cudaMalloc((void **)&ctx->y_ref[g], bytes));
      ctx->y_ref_cap[g] = bytes;
    }
    rc = fp8_gemm_lt_ref(ctx, (fp8_gemm_kind)g, xtype, input, weight, grad_output, tokens, in,
                         out, ctx->y_ref[g], err, errlen);
    if (rc) goto done;
    ctx->ref_have[g] = true;
  }
done:
  return rc;
}

int fp8_gemm_lt_layer_errors(fp8_gemm_lt *ctx, const fp8_lt_layer *l, fp8_lt_dtype ytype,
                             double rel_error[FP8_GEMM_COUNT], float amax[FP8_GEMM_COUNT],
                             char *err, size_t errlen) {
  int rc = FP8_OK, first = FP8_OK;
  for (int g = 0; g < FP8_GEMM_COUNT; g++) {
    if (rel_error) rel_error[g] = NAN;
    if (amax) amax[g] = NAN;
  }
  FP8G_REQUIRE(ctx && l && rel_error, FP8_EINVAL, "fp8_gemm_lt_layer_errors: NULL argument");
  FP8G_REQUIRE(l->tokens == ctx->ref_tokens && l->in == ctx->ref_in && l->out == ctx->ref_out,
               FP8_EINVAL,
               "fp8_gemm_lt_layer_errors: layer [tokens %lld, in %lld, out %lld] does not match "
               "the reference's [%lld, %lld, %lld]", (long long)l->tokens, (long long)l->in,
               (long long)l->out, (long long)ctx->ref_tokens, (long long)ctx->ref_in,
               (long long)ctx->ref_out);
  FP8G_CUDA(cudaSetDevice(ctx->device));
  bool ran[FP8_GEMM_COUNT] = {false, false, false};
  for (int g = 0; g < FP8_GEMM_COUNT; g++) {
    const fp8_lt_operand *a = g == FP8_GEMM_FPROP ? &l->input : &l->grad_output;
    const fp8_lt_operand *b = g == FP8_GEMM_WGRAD ? &l->input : &l->weight;
    if (!ctx->ref_have[g] || !a->codes || !b->codes) continue;
    int64_t rows, cols;
    fp8_gemm_lt_shape((fp8_gemm_kind)g, l->tokens, l->in, l->out, &rows, &cols, NULL);
    int r = lt_scratch_reserve(&ctx->y_fp8, (size_t)rows * (size_t)cols * lt_size(ytype), err, errlen);
    if (!r) r = fp8_gemm_lt_fp8(ctx, (fp8_gemm_kind)g, l, ytype, ctx->y_fp8.p, ctx->d_amax + g,
                                err, errlen);
    if (!r) r = fp8_gemm_lt_rel_error(ctx, ctx->y_fp8.p, ytype, ctx->y_ref[g], rows * cols,
                                      &rel_error[g], err, errlen);
    if (r == FP8_ERANGE) { /* E5M2 x E5M2: the caller does this one on the CPU */
      if (!first) first = r;
      continue;
    }
    if (r) {
      rc = r;
      goto done;
    }
    ran[g] = true;
  }
  if (amax) {
    float h[FP8_GEMM_COUNT];
    FP8G_CUDA(cudaMemcpyAsync(h, ctx->d_amax, sizeof h, cudaMemcpyDeviceToHost, ctx->stream));
    FP8G_CUDA(cudaStreamSynchronize(ctx->stream));
    for (int g = 0; g < FP8_GEMM_COUNT; g++)
      if (ran[g]) amax[g] = h[g];
  }
  rc = first;
done:
  return rc;
}
