/* gemm_lt.c: FP8 GEMMs of a linear layer with cuBLASLt (gemm_lt.h has the layout mapping; the
 * reference GEMMs and errors are gemm_lt_ref.c).
 *
 * One context = one device, one stream, one cuBLASLt handle, one 32 MiB workspace, scratch
 * buffers for padded / transposed operands and outputs (grown on demand, never shrunk), and a
 * small cache of "plans": the matmul descriptor, the three matrix layouts and the algorithm
 * cublasLtMatmulAlgoGetHeuristic chose for one (types, transposes, m, n, k, options). The
 * operands' scale pointers and the amax pointer are set on the cached descriptor per call.
 */
#include "gemm_lt.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8_check.h"
#include "device.h"
#include "gemm_lt_kernels.h"

#include "gemm_lt_internal.h"

fp8_gemm_lt_options fp8_gemm_lt_options_default(void) {
  fp8_gemm_lt_options o;
  memset(&o, 0, sizeof o);
  o.fast_accum[FP8_GEMM_FPROP] = true;
  o.fast_accum[FP8_GEMM_DGRAD] = false;
  o.fast_accum[FP8_GEMM_WGRAD] = false;
  o.amax_from_cublaslt = true;
  return o;
}

/* Grows a scratch buffer to at least `bytes` (its old contents are not kept). cudaFree waits
 * for the device, so work still reading the old buffer has finished. */
int lt_scratch_reserve(scratch *s, size_t bytes, char *err, size_t errlen) {
  int rc = FP8_OK;
  if (bytes <= s->cap) return FP8_OK;
  if (s->p) cudaFree(s->p);
  s->p = NULL;
  s->cap = 0;
  cudaError_t e = cudaMalloc(&s->p, bytes);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    s->p = NULL;
    FP8G_REQUIRE(0, e == cudaErrorMemoryAllocation ? FP8_ENOMEM : FP8_EDEVICE,
                 "cudaMalloc of %zu bytes of scratch failed: %s", bytes, cudaGetErrorString(e));
  }
  s->cap = bytes;
done:
  return rc;
}

void lt_plan_release(plan *p) {
  if (p->op) cublasLtMatmulDescDestroy(p->op);
  if (p->a) cublasLtMatrixLayoutDestroy(p->a);
  if (p->b) cublasLtMatrixLayoutDestroy(p->b);
  if (p->d) cublasLtMatrixLayoutDestroy(p->d);
  memset(p, 0, sizeof *p);
}

void fp8_gemm_lt_free(fp8_gemm_lt *ctx) {
  if (!ctx) return;
  cudaSetDevice(ctx->device);
  if (ctx->stream) cudaStreamSynchronize(ctx->stream);
  if (ctx->own_stream) cudaStreamSynchronize(ctx->own_stream);
  for (int i = 0; i < PLAN_CACHE; i++) lt_plan_release(&ctx->plans[i]);
  if (ctx->lt) cublasLtDestroy(ctx->lt);
  cudaFree(ctx->workspace);
  cudaFree(ctx->sa.p);
  cudaFree(ctx->sb.p);
  cudaFree(ctx->sd.p);
  cudaFree(ctx->sums.p);
  cudaFree(ctx->y_fp8.p);
  cudaFree(ctx->d_amax);
  for (int g = 0; g < FP8_GEMM_COUNT; g++) cudaFree(ctx->y_ref[g]);
  if (ctx->host_sums) cudaFreeHost(ctx->host_sums);
  if (ctx->own_stream) cudaStreamDestroy(ctx->own_stream);
  free(ctx);
}

int fp8_gemm_lt_create(fp8_gemm_lt **out, int device, char *err, size_t errlen) {
  int rc = FP8_OK;
  fp8_gemm_lt *ctx = NULL;
  FP8G_REQUIRE(out, FP8_EINVAL, "fp8_gemm_lt_create: out is NULL");
  *out = NULL;
  rc = fp8_gpu_require_fp8(device, NULL, err, errlen);
  if (rc) goto done;
  ctx = calloc(1, sizeof *ctx);
  FP8G_REQUIRE(ctx, FP8_ENOMEM, "out of memory");
  ctx->device = device;
  ctx->opt = fp8_gemm_lt_options_default();
  FP8G_CUDA(cudaSetDevice(device));
  FP8G_CUDA(cudaStreamCreate(&ctx->own_stream));
  ctx->stream = ctx->own_stream;
  FP8G_CUBLAS(cublasLtCreate(&ctx->lt));
  FP8G_CUDA(cudaMalloc(&ctx->workspace, WORKSPACE_BYTES));
  FP8G_CUDA(cudaMalloc((void **)&ctx->d_amax, FP8_GEMM_COUNT * sizeof(float)));
  FP8G_CUDA(cudaMallocHost((void **)&ctx->host_sums, 3 * FP8G_ERR_MAX_BLOCKS * sizeof(double)));
  *out = ctx;
  ctx = NULL;
done:
  fp8_gemm_lt_free(ctx);
  return rc;
}

void *fp8_gemm_lt_stream(fp8_gemm_lt *ctx) { return ctx ? (void *)ctx->stream : NULL; }
void fp8_gemm_lt_set_stream(fp8_gemm_lt *ctx, void *stream) {
  if (ctx) ctx->stream = stream ? (cudaStream_t)stream : ctx->own_stream;
}

int fp8_gemm_lt_sync(fp8_gemm_lt *ctx, char *err, size_t errlen) {
  int rc = FP8_OK;
  FP8G_REQUIRE(ctx, FP8_EINVAL, "fp8_gemm_lt_sync: no context");
  FP8G_CUDA(cudaStreamSynchronize(ctx->stream));
done:
  return rc;
}

void fp8_gemm_lt_set_options(fp8_gemm_lt *ctx, const fp8_gemm_lt_options *opt) {
  if (ctx && opt) ctx->opt = *opt;
}
fp8_gemm_lt_options fp8_gemm_lt_get_options(const fp8_gemm_lt *ctx) {
  return ctx ? ctx->opt : fp8_gemm_lt_options_default();
}
fp8_gemm_lt_info fp8_gemm_lt_last_info(const fp8_gemm_lt *ctx) {
  fp8_gemm_lt_info i;
  memset(&i, 0, sizeof i);
  return ctx ? ctx->last : i;
}

void fp8_gemm_lt_shape(fp8_gemm_kind g, int64_t tokens, int64_t in, int64_t out, int64_t *rows,
                       int64_t *cols, int64_t *k) {
  int64_t r, c, kk;
  if (g == FP8_GEMM_FPROP) r = tokens, c = out, kk = in;
  else if (g == FP8_GEMM_DGRAD) r = tokens, c = in, kk = out;
  else r = out, c = in, kk = tokens;
  if (rows) *rows = r;
  if (cols) *cols = c;
  if (k) *k = kk;
}

/* Finds or builds the plan for key. The scale and amax pointers are set before the heuristic
 * (cuBLASLt may choose differently with an amax epilogue); `amax` is a real device pointer. */
int lt_get_plan(fp8_gemm_lt *ctx, const plan_key *key, const float *a_scale,
                    const float *b_scale, float *amax, plan **out, char *err, size_t errlen) {
  int rc = FP8_OK;
  cublasLtMatmulPreference_t pref = NULL;
  plan *p = NULL;
  ctx->clock++;
  for (int i = 0; i < PLAN_CACHE; i++)
    if (ctx->plans[i].valid && memcmp(&ctx->plans[i].key, key, sizeof *key) == 0) {
      p = &ctx->plans[i];
      break;
    }
  if (!p) {
    /* Reuse the least recently used slot. */
    p = &ctx->plans[0];
    for (int i = 1; i < PLAN_CACHE; i++)
      if (!ctx->plans[i].valid || ctx->plans[i].last_use < p->last_use) {
        p = &ctx->plans[i];
        if (!p->valid) break;
      }
    lt_plan_release(p);
    p->key = *key;
    cublasOperation_t ta = (cublasOperation_t)key->transa, tb = (cublasOperation_t)key->transb;
    FP8G_CUBLAS(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    FP8G_CUBLAS(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    FP8G_CUBLAS(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    if (key->fp8) {
      int8_t fast = (int8_t)key->fast_accum;
      FP8G_CUBLAS(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast,
                                                 sizeof fast));
    }
    /* Stored shapes, column-major: op(A) is m x k, so A is k x m when transposed. */
    uint64_t a_rows = ta == CUBLAS_OP_T ? key->k : key->m, a_cols = ta == CUBLAS_OP_T ? key->m : key->k;
    uint64_t b_rows = tb == CUBLAS_OP_T ? key->n : key->k, b_cols = tb == CUBLAS_OP_T ? key->k : key->n;
    FP8G_CUBLAS(cublasLtMatrixLayoutCreate(&p->a, (cudaDataType_t)key->a_type, a_rows, a_cols, key->lda));
    FP8G_CUBLAS(cublasLtMatrixLayoutCreate(&p->b, (cudaDataType_t)key->b_type, b_rows, b_cols, key->ldb));
    FP8G_CUBLAS(cublasLtMatrixLayoutCreate(&p->d, (cudaDataType_t)key->d_type, key->m, key->n, key->ldd));
  }
  if (key->fp8) {
    FP8G_CUBLAS(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                                               &a_scale, sizeof a_scale));
    FP8G_CUBLAS(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                                               &b_scale, sizeof b_scale));
    void *amax_ptr = key->amax ? (void *)amax : NULL;
    FP8G_CUBLAS(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_AMAX_D_POINTER,
                                               &amax_ptr, sizeof amax_ptr));
  }
  if (!p->valid) {
    size_t ws = WORKSPACE_BYTES;
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    memset(&res, 0, sizeof res);
    FP8G_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
    FP8G_CUBLAS(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(ctx->lt, p->op, p->a, p->b, p->d, p->d,
                                                      pref, 1, &res, &found);
    if (s == CUBLAS_STATUS_SUCCESS && found > 0 && res.state != CUBLAS_STATUS_SUCCESS) s = res.state;
    if (s != CUBLAS_STATUS_SUCCESS || found == 0) {
      /* Not a device failure as such: no kernel for this combination. The caller may retry
       * without the amax; the message says what was asked for. */
      rc = FP8_EDEVICE;
      if (err && errlen)
        snprintf(err, errlen,
                 "cublasLtMatmulAlgoGetHeuristic found no algorithm (%s: %s) for %s GEMM "
                 "A type %d x B type %d -> D type %d, trans %c%c, m=%lld n=%lld k=%lld, "
                 "lda=%lld ldb=%lld ldd=%lld, fast_accum=%d, amax=%d",
                 s == CUBLAS_STATUS_SUCCESS ? "CUBLAS_STATUS_SUCCESS" : cublasLtGetStatusName(s),
                 s == CUBLAS_STATUS_SUCCESS ? "0 results" : cublasLtGetStatusString(s),
                 key->fp8 ? "FP8" : "reference", key->a_type, key->b_type, key->d_type,
                 key->transa == CUBLAS_OP_T ? 'T' : 'N', key->transb == CUBLAS_OP_T ? 'T' : 'N',
                 (long long)key->m, (long long)key->n, (long long)key->k, (long long)key->lda,
                 (long long)key->ldb, (long long)key->ldd, key->fast_accum, key->amax);
      lt_plan_release(p);
      p = NULL;
      goto done;
    }
    p->algo = res.algo;
    p->workspace = res.workspaceSize;
    p->valid = 1;
  }
  p->last_use = ctx->clock;
  *out = p;
done:
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  if (rc && p) lt_plan_release(p);
  return rc;
}

int lt_run_plan(fp8_gemm_lt *ctx, plan *p, const void *a, const void *b, void *d, char *err,
                    size_t errlen) {
  int rc = FP8_OK;
  const float alpha = 1.0f, beta = 0.0f;
  /* C = D with beta 0: cuBLASLt reads nothing from C. */
  FP8G_CUBLAS(cublasLtMatmul(ctx->lt, p->op, &alpha, a, p->a, b, p->b, &beta, d, p->d, d, p->d,
                             &p->algo, ctx->workspace, WORKSPACE_BYTES, ctx->stream));
done:
  return rc;
}

/* One operand as cuBLASLt needs it: dense [rows_p, kp] K-contiguous, 16-byte aligned. `src` is
 * stored [srows, scols]; `transpose` means the operand is src^T. Copies into `s` when the
 * layout, the padding or the alignment requires it; *used is the pointer to give cuBLASLt. */
static int prepare_operand(fp8_gemm_lt *ctx, const uint8_t *src, int64_t srows, int64_t scols,
                           int transpose, int64_t rows_p, int64_t kp, scratch *s,
                           const uint8_t **used, int *copies, char *err, size_t errlen) {
  int rc = FP8_OK;
  const int64_t rows = transpose ? scols : srows, k = transpose ? srows : scols;
  if (!transpose && rows == rows_p && k == kp && ((uintptr_t)src % ALIGN) == 0) {
    *used = src;
    goto done;
  }
  rc = lt_scratch_reserve(s, (size_t)rows_p * (size_t)kp, err, errlen);
  if (rc) goto done;
  FP8G_CUDA(fp8g_copy_pad_u8(src, srows, scols, scols, transpose, (uint8_t *)s->p, rows_p, kp,
                             ctx->stream));
  *used = (const uint8_t *)s->p;
  (*copies)++;
done:
  return rc;
}

static const char *const GEMM_NAMES[FP8_GEMM_COUNT] = {"fprop", "dgrad", "wgrad"};

/* What every FP8 GEMM checks and does first: the output amax zeroed, the empty cases (M or N
 * 0: nothing; K = 0: zeros). *work = 0 when nothing is left to do. */
static int gemm_begin(fp8_gemm_lt *ctx, fp8_gemm_kind g, int64_t M, int64_t N, int64_t K,
                      fp8_lt_dtype ytype, void *y, float *amax, int *work, char *err,
                      size_t errlen) {
  int rc = FP8_OK;
  *work = 0;
  FP8G_REQUIRE(ytype == FP8_LT_F32 || ytype == FP8_LT_BF16, FP8_EINVAL,
               "fp8_gemm_lt_fp8: unknown output type %d", (int)ytype);
  FP8G_REQUIRE(y, FP8_EINVAL, "%s: output pointer is NULL", GEMM_NAMES[g]);
  FP8G_REQUIRE(M <= ((int64_t)1 << 31) && N <= ((int64_t)1 << 31) && K <= ((int64_t)1 << 31),
               FP8_ERANGE, "%s: dimension beyond 2^31 (M=%lld N=%lld K=%lld)", GEMM_NAMES[g],
               (long long)M, (long long)N, (long long)K);
  FP8G_CUDA(cudaSetDevice(ctx->device));
  memset(&ctx->last, 0, sizeof ctx->last);
  if (amax) FP8G_CUDA(cudaMemsetAsync(amax, 0, sizeof *amax, ctx->stream));
  if (M == 0 || N == 0) goto done;
  if (K == 0) { /* empty sum: zeros (cuBLASLt is not asked for k = 0) */
    FP8G_CUDA(cudaMemsetAsync(y, 0, (size_t)M * (size_t)N * lt_size(ytype), ctx->stream));
    goto done;
  }
  *work = 1;
done:
  return rc;
}

/* The FP8 GEMM Y[M, N] = P[M, K] Q[N, K]^T in cuBLASLt's TN form on prepared operands (A = Q
 * [Np, Kp], B = P [Mp, Kp], both K-contiguous, aligned, padded): the plan, the launch, the
 * output copied out of the padded scratch, the amax. */
static int gemm_tn(fp8_gemm_lt *ctx, fp8_gemm_kind g, const fp8_lt_operand *P,
                   const fp8_lt_operand *Q, const uint8_t *A, const uint8_t *B, int64_t M,
                   int64_t N, int64_t K, fp8_lt_dtype ytype, void *y, float *amax, int copies,
                   char *err, size_t errlen) {
  int rc = FP8_OK;
  const size_t es = lt_size(ytype);
  const int64_t Mp = round_up(M, ALIGN), Np = round_up(N, ALIGN), Kp = round_up(K, ALIGN);
  const bool padded = Mp != M || Np != N || ((uintptr_t)y % ALIGN) != 0;
  void *D = y;
  if (padded) {
    rc = lt_scratch_reserve(&ctx->sd, (size_t)Mp * (size_t)Np * es, err, errlen);
    if (rc) goto done;
    D = ctx->sd.p;
  }
  plan_key key;
  memset(&key, 0, sizeof key); /* padding bytes too: the key is compared with memcmp */
  key.fp8 = 1;
  key.a_type = fp8_type(Q->format);
  key.b_type = fp8_type(P->format);
  key.d_type = lt_type(ytype);
  key.transa = CUBLAS_OP_T;
  key.transb = CUBLAS_OP_N;
  key.fast_accum = ctx->opt.fast_accum[g];
  key.amax = amax && ctx->opt.amax_from_cublaslt && !ctx->amax_unsupported[ytype];
  key.m = Np, key.n = Mp, key.k = Kp;
  key.lda = Kp, key.ldb = Kp, key.ldd = Np;
  plan *pl = NULL;
  rc = lt_get_plan(ctx, &key, Q->scale_inv, P->scale_inv, amax, &pl, err, errlen);
  if (rc == FP8_OK) {
    rc = lt_run_plan(ctx, pl, A, B, D, err, errlen);
    if (rc && key.amax) lt_plan_release(pl); /* a plan that failed is not kept */
  }
  if (rc && key.amax) {
    /* cuBLASLt refused the amax epilogue for this output type (AMAX_D_POINTER is documented
     * for some type combinations only): remember, and compute the amax with the kernel. */
    ctx->amax_unsupported[ytype] = true;
    key.amax = 0;
    rc = lt_get_plan(ctx, &key, Q->scale_inv, P->scale_inv, NULL, &pl, err, errlen);
    if (rc == FP8_OK) rc = lt_run_plan(ctx, pl, A, B, D, err, errlen);
  }
  if (rc) {
    /* Say which GEMM, in front of the cuBLASLt message. */
    if (err && errlen) {
      char tmp[512];
      snprintf(tmp, sizeof tmp, "%s", err);
      snprintf(err, errlen, "%s (%s x %s, M=%lld N=%lld K=%lld): %s", GEMM_NAMES[g],
               fp8_format_name(P->format), fp8_format_name(Q->format), (long long)M, (long long)N,
               (long long)K, tmp);
    }
    goto done;
  }
  if (padded)
    FP8G_CUDA(cudaMemcpy2DAsync(y, (size_t)N * es, D, (size_t)Np * es, (size_t)N * es, (size_t)M,
                                cudaMemcpyDeviceToDevice, ctx->stream));
  if (amax && !key.amax) FP8G_CUDA(fp8g_amax(y, ytype == FP8_LT_BF16, M * N, amax, ctx->stream));
  ctx->last.m = Np, ctx->last.n = Mp, ctx->last.k = Kp;
  ctx->last.padded = padded;
  ctx->last.copies = copies;
  ctx->last.amax_cublaslt = key.amax;
  ctx->last.fast_accum = key.fast_accum;
  ctx->last.workspace = pl->workspace;
done:
  return rc;
}

/* The operands' checks both entry points share. */
static int check_operands(fp8_gemm_kind g, const fp8_lt_operand *P, const fp8_lt_operand *Q,
                          char *err, size_t errlen) {
  int rc = FP8_OK;
  FP8G_REQUIRE(P->codes && Q->codes, FP8_EINVAL, "%s: operand %s missing", GEMM_NAMES[g],
               !P->codes ? (g == FP8_GEMM_FPROP ? "input" : "grad_output")
                         : (g == FP8_GEMM_WGRAD ? "input" : "weight"));
  FP8G_REQUIRE(P->scale_inv && Q->scale_inv, FP8_EINVAL,
               "%s: an operand has no scale_inv pointer", GEMM_NAMES[g]);
  FP8G_REQUIRE(fp8_gemm_lt_has_formats(P->format, Q->format), FP8_ERANGE,
               "%s: cuBLASLt has no E5M2 x E5M2 FP8 GEMM (both operands e5m2): compute it on "
               "the CPU", GEMM_NAMES[g]);
done:
  return rc;
}

int fp8_gemm_lt_fp8(fp8_gemm_lt *ctx, fp8_gemm_kind g, const fp8_lt_layer *l, fp8_lt_dtype ytype,
                    void *y, float *amax, char *err, size_t errlen) {
  int rc = FP8_OK, work = 0;
  FP8G_REQUIRE(ctx && l, FP8_EINVAL, "fp8_gemm_lt_fp8: no context or layer");
  FP8G_REQUIRE(g >= FP8_GEMM_FPROP && g <= FP8_GEMM_WGRAD, FP8_EINVAL,
               "fp8_gemm_lt_fp8: unknown GEMM %d", (int)g);
  FP8G_REQUIRE(l->tokens >= 0 && l->in >= 0 && l->out >= 0, FP8_EINVAL,
               "%s: negative shape tokens=%lld in=%lld out=%lld", GEMM_NAMES[g],
               (long long)l->tokens, (long long)l->in, (long long)l->out);

  /* P (left, cuBLASLt's B) and Q (right, cuBLASLt's A) as gemm_lt.h's table says. */
  const fp8_lt_operand *P, *Q;
  int p_tr, q_tr;
  int64_t p_srows, p_scols, q_srows, q_scols;
  if (g == FP8_GEMM_FPROP) {
    P = &l->input, p_tr = 0, p_srows = l->tokens, p_scols = l->in;
    Q = &l->weight, q_tr = 0, q_srows = l->out, q_scols = l->in;
  } else if (g == FP8_GEMM_DGRAD) {
    P = &l->grad_output, p_tr = 0, p_srows = l->tokens, p_scols = l->out;
    Q = &l->weight, q_tr = 1, q_srows = l->out, q_scols = l->in;
  } else {
    P = &l->grad_output, p_tr = 1, p_srows = l->tokens, p_scols = l->out;
    Q = &l->input, q_tr = 1, q_srows = l->tokens, q_scols = l->in;
  }
  rc = check_operands(g, P, Q, err, errlen);
  if (rc) goto done;
  int64_t M, N, K;
  fp8_gemm_lt_shape(g, l->tokens, l->in, l->out, &M, &N, &K);
  rc = gemm_begin(ctx, g, M, N, K, ytype, y, amax, &work, err, errlen);
  if (rc || !work) goto done;
  const int64_t Mp = round_up(M, ALIGN), Np = round_up(N, ALIGN), Kp = round_up(K, ALIGN);
  int copies = 0;
  const uint8_t *A = NULL, *B = NULL;
  rc = prepare_operand(ctx, Q->codes, q_srows, q_scols, q_tr, Np, Kp, &ctx->sa, &A, &copies, err,
                       errlen);
  if (rc) goto done;
  rc = prepare_operand(ctx, P->codes, p_srows, p_scols, p_tr, Mp, Kp, &ctx->sb, &B, &copies, err,
                       errlen);
  if (rc) goto done;
  rc = gemm_tn(ctx, g, P, Q, A, B, M, N, K, ytype, y, amax, copies, err, errlen);
done:
  return rc;
}

int fp8_gemm_lt_fp8_tn(fp8_gemm_lt *ctx, fp8_gemm_kind g, const fp8_lt_operand *P,
                       const fp8_lt_operand *Q, int64_t M, int64_t N, int64_t K,
                       fp8_lt_dtype ytype, void *y, float *amax, char *err, size_t errlen) {
  int rc = FP8_OK, work = 0;
  FP8G_REQUIRE(ctx && P && Q, FP8_EINVAL, "fp8_gemm_lt_fp8_tn: no context or operand");
  FP8G_REQUIRE(g >= FP8_GEMM_FPROP && g <= FP8_GEMM_WGRAD, FP8_EINVAL,
               "fp8_gemm_lt_fp8_tn: unknown GEMM %d", (int)g);
  FP8G_REQUIRE(M >= 0 && N >= 0 && K >= 0, FP8_EINVAL, "%s: negative shape M=%lld N=%lld K=%lld",
               GEMM_NAMES[g], (long long)M, (long long)N, (long long)K);
  rc = check_operands(g, P, Q, err, errlen);
  if (rc) goto done;
  rc = gemm_begin(ctx, g, M, N, K, ytype, y, amax, &work, err, errlen);
  if (rc || !work) goto done;
  const int64_t Mp = round_up(M, ALIGN), Np = round_up(N, ALIGN), Kp = round_up(K, ALIGN);
  int copies = 0;
  const uint8_t *A = NULL, *B = NULL;
  rc = prepare_operand(ctx, Q->codes, N, K, 0, Np, Kp, &ctx->sa, &A, &copies, err, errlen);
  if (rc) goto done;
  rc = prepare_operand(ctx, P->codes, M, K, 0, Mp, Kp, &ctx->sb, &B, &copies, err, errlen);
  if (rc) goto done;
  rc = gemm_tn(ctx, g, P, Q, A, B, M, N, K, ytype, y, amax, copies, err, errlen);
done:
  return rc;
}
