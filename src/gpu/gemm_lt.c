/* gemm_lt.c: FP8 GEMMs of a linear layer with cuBLASLt (gemm_lt.h has the layout mapping).
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

#define WORKSPACE_BYTES ((size_t)32 << 20) /* 32 MiB: TE's and PyTorch's choice on Hopper */
#define PLAN_CACHE 16
#define ALIGN 16 /* cuBLASLt FP8: lda, ldb multiples of 16 elements; pointers 16-byte aligned */

/* ---------------------------------------------------------------- plans */

typedef struct {
  int fp8; /* 1: FP8 plan (scales, fast accum), 0: reference */
  int a_type, b_type, d_type; /* cudaDataType_t */
  int transa, transb;         /* cublasOperation_t */
  int fast_accum, amax;
  int64_t m, n, k, lda, ldb, ldd;
} plan_key;

typedef struct {
  plan_key key;
  int valid;
  uint64_t last_use;
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t a, b, d;
  cublasLtMatmulAlgo_t algo;
  size_t workspace;
} plan;

/* ---------------------------------------------------------------- the context */

typedef struct {
  void *p;
  size_t cap;
} scratch;

struct fp8_gemm_lt {
  int device;
  cudaStream_t stream;
  cublasLtHandle_t lt;
  void *workspace;
  scratch sa, sb, sd;     /* padded / transposed A and B operands, padded D */
  scratch sums;           /* err sums: 3 doubles per block */
  double *host_sums;      /* pinned host copy of sums */
  float *d_amax;          /* device floats [FP8_GEMM_COUNT] for layer_errors */
  scratch y_fp8;          /* layer_errors' FP8 output */
  float *y_ref[FP8_GEMM_COUNT];
  size_t y_ref_cap[FP8_GEMM_COUNT];
  bool ref_have[FP8_GEMM_COUNT];
  int64_t ref_tokens, ref_in, ref_out;
  plan plans[PLAN_CACHE];
  uint64_t clock;
  bool amax_unsupported[2]; /* per output type: cuBLASLt refused AMAX_D_POINTER once */
  fp8_gemm_lt_options opt;
  fp8_gemm_lt_info last;
};

fp8_gemm_lt_options fp8_gemm_lt_options_default(void) {
  fp8_gemm_lt_options o;
  memset(&o, 0, sizeof o);
  o.fast_accum[FP8_GEMM_FPROP] = true;
  o.fast_accum[FP8_GEMM_DGRAD] = false;
  o.fast_accum[FP8_GEMM_WGRAD] = false;
  o.amax_from_cublaslt = true;
  return o;
}

static int64_t round_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

static cudaDataType_t fp8_type(fp8_format f) {
  return f == FP8_E5M2 ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3;
}
static cudaDataType_t lt_type(fp8_lt_dtype t) { return t == FP8_LT_BF16 ? CUDA_R_16BF : CUDA_R_32F; }
static size_t lt_size(fp8_lt_dtype t) { return t == FP8_LT_BF16 ? 2 : 4; }

/* Grows a scratch buffer to at least `bytes` (its old contents are not kept). cudaFree waits
 * for the device, so work still reading the old buffer has finished. */
static int scratch_reserve(scratch *s, size_t bytes, char *err, size_t errlen) {
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

static void plan_release(plan *p) {
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
  for (int i = 0; i < PLAN_CACHE; i++) plan_release(&ctx->plans[i]);
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
  if (ctx->stream) cudaStreamDestroy(ctx->stream);
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
  FP8G_CUDA(cudaStreamCreate(&ctx->stream));
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
static int get_plan(fp8_gemm_lt *ctx, const plan_key *key, const float *a_scale,
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
    plan_release(p);
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
      plan_release(p);
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
  if (rc && p) plan_release(p);
  return rc;
}

static int run_plan(fp8_gemm_lt *ctx, plan *p, const void *a, const void *b, void *d, char *err,
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
  rc = scratch_reserve(s, (size_t)rows_p * (size_t)kp, err, errlen);
  if (rc) goto done;
  FP8G_CUDA(fp8g_copy_pad_u8(src, srows, scols, scols, transpose, (uint8_t *)s->p, rows_p, kp,
                             ctx->stream));
  *used = (const uint8_t *)s->p;
  (*copies)++;
done:
  return rc;
}

static const char *format_name(fp8_format f) { return f == FP8_E5M2 ? "e5m2" : "e4m3"; }

int fp8_gemm_lt_fp8(fp8_gemm_lt *ctx, fp8_gemm_kind g, const fp8_lt_layer *l, fp8_lt_dtype ytype,
                    void *y, float *amax, char *err, size_t errlen) {
  int rc = FP8_OK;
  static const char *names[FP8_GEMM_COUNT] = {"fprop", "dgrad", "wgrad"};
  FP8G_REQUIRE(ctx && l, FP8_EINVAL, "fp8_gemm_lt_fp8: no context or layer");
  FP8G_REQUIRE(g >= FP8_GEMM_FPROP && g <= FP8_GEMM_WGRAD, FP8_EINVAL,
               "fp8_gemm_lt_fp8: unknown GEMM %d", (int)g);
  FP8G_REQUIRE(ytype == FP8_LT_F32 || ytype == FP8_LT_BF16, FP8_EINVAL,
               "fp8_gemm_lt_fp8: unknown output type %d", (int)ytype);
  FP8G_REQUIRE(l->tokens >= 0 && l->in >= 0 && l->out >= 0, FP8_EINVAL,
               "%s: negative shape tokens=%lld in=%lld out=%lld", names[g], (long long)l->tokens,
               (long long)l->in, (long long)l->out);
  FP8G_CUDA(cudaSetDevice(ctx->device));

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
  FP8G_REQUIRE(P->codes && Q->codes, FP8_EINVAL, "%s: operand %s missing", names[g],
               !P->codes ? (g == FP8_GEMM_FPROP ? "input" : "grad_output")
                         : (g == FP8_GEMM_WGRAD ? "input" : "weight"));
  FP8G_REQUIRE(P->scale_inv && Q->scale_inv, FP8_EINVAL, "%s: an operand has no scale_inv pointer",
               names[g]);
  FP8G_REQUIRE(y, FP8_EINVAL, "%s: output pointer is NULL", names[g]);
  FP8G_REQUIRE(fp8_gemm_lt_has_formats(P->format, Q->format), FP8_ERANGE,
               "%s: cuBLASLt has no E5M2 x E5M2 FP8 GEMM (both operands e5m2): compute it on "
               "the CPU", names[g]);

  int64_t M, N, K;
  fp8_gemm_lt_shape(g, l->tokens, l->in, l->out, &M, &N, &K);
  FP8G_REQUIRE(M <= ((int64_t)1 << 31) && N <= ((int64_t)1 << 31) && K <= ((int64_t)1 << 31),
               FP8_ERANGE, "%s: dimension beyond 2^31 (M=%lld N=%lld K=%lld)", names[g],
               (long long)M, (long long)N, (long long)K);
  const size_t es = lt_size(ytype);
  memset(&ctx->last, 0, sizeof ctx->last);
  if (amax) FP8G_CUDA(cudaMemsetAsync(amax, 0, sizeof *amax, ctx->stream));
  if (M == 0 || N == 0) goto done;
  if (K == 0) { /* empty sum: zeros (cuBLASLt is not asked for k = 0) */
    FP8G_CUDA(cudaMemsetAsync(y, 0, (size_t)M * (size_t)N * es, ctx->stream));
    goto done;
  }
  const int64_t Mp = round_up(M, ALIGN), Np = round_up(N, ALIGN), Kp = round_up(K, ALIGN);
  int copies = 0;
  const uint8_t *A = NULL, *B = NULL;
  rc = prepare_operand(ctx, Q->codes, q_srows, q_scols, q_tr, Np, Kp, &ctx->sa, &A, &copies, err,
                       errlen);
  if (rc) goto done;
  rc = prepare_operand(ctx, P->codes, p_srows, p_scols, p_tr, Mp, Kp, &ctx->sb, &B, &copies, err,
                       errlen);
  if (rc) goto done;
  const bool padded = Mp != M || Np != N || ((uintptr_t)y % ALIGN) != 0;
  void *D = y;
  if (padded) {
    rc = scratch_reserve(&ctx->sd, (size_t)Mp * (size_t)Np * es, err, errlen);
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
  rc = get_plan(ctx, &key, Q->scale_inv, P->scale_inv, amax, &pl, err, errlen);
  if (rc == FP8_OK) {
    rc = run_plan(ctx, pl, A, B, D, err, errlen);
    if (rc && key.amax) plan_release(pl); /* a plan that failed is not kept */
  }
  if (rc && key.amax) {
    /* cuBLASLt refused the amax epilogue for this output type (AMAX_D_POINTER is documented
     * for some type combinations only): remember, and compute the amax with the kernel. */
    ctx->amax_unsupported[ytype] = true;
    key.amax = 0;
    rc = get_plan(ctx, &key, Q->scale_inv, P->scale_inv, NULL, &pl, err, errlen);
    if (rc == FP8_OK) rc = run_plan(ctx, pl, A, B, D, err, errlen);
  }
  if (rc) {
    /* Say which GEMM, in front of the cuBLASLt message. */
    if (err && errlen) {
      char tmp[512];
      snprintf(tmp, sizeof tmp, "%s", err);
      snprintf(err, errlen, "%s (%s x %s, M=%lld N=%lld K=%lld): %s", names[g],
               format_name(P->format), format_name(Q->format), (long long)M, (long long)N,
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
  rc = get_plan(ctx, &key, NULL, NULL, NULL, &pl, err, errlen);
  if (rc) goto done;
  rc = run_plan(ctx, pl, A, B, y, err, errlen);
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
  rc = scratch_reserve(&ctx->sums, (size_t)nb * 3 * sizeof(double), err, errlen);
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
    int r = scratch_reserve(&ctx->y_fp8, (size_t)rows * (size_t)cols * lt_size(ytype), err, errlen);
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
