/* gemm_lt_internal.h: what gemm_lt.c (the context, plans, FP8 GEMMs) shares with
 * gemm_lt_ref.c (the reference GEMMs and errors): the context's layout, the plan cache and the
 * scratch buffers. */
#ifndef FP8LAB_GPU_GEMM_LT_INTERNAL_H
#define FP8LAB_GPU_GEMM_LT_INTERNAL_H

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gemm_lt.h"

#define WORKSPACE_BYTES ((size_t)32 << 20) /* 32 MiB: TE's and PyTorch's choice on Hopper */
#define PLAN_CACHE 64 /* fp8lab timeline: 3 GEMMs x every distinct Linear shape of a model */
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
  cudaStream_t stream;    /* where calls run: own_stream, or the caller's (set_stream) */
  cudaStream_t own_stream;
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

static inline int64_t round_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

static inline cudaDataType_t fp8_type(fp8_format f) {
  return f == FP8_E5M2 ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3;
}
static inline cudaDataType_t lt_type(fp8_lt_dtype t) { return t == FP8_LT_BF16 ? CUDA_R_16BF : CUDA_R_32F; }
static inline size_t lt_size(fp8_lt_dtype t) { return t == FP8_LT_BF16 ? 2 : 4; }

/* Grows a scratch buffer to at least `bytes` (its old contents are not kept). */
int lt_scratch_reserve(scratch *s, size_t bytes, char *err, size_t errlen);
/* Frees a plan's descriptors and zeroes it. */
void lt_plan_release(plan *p);
/* Finds or builds the plan for key (scale and amax pointers set on its descriptor). */
int lt_get_plan(fp8_gemm_lt *ctx, const plan_key *key, const float *a_scale, const float *b_scale,
                float *amax, plan **out, char *err, size_t errlen);
/* One cublasLtMatmul with the plan on the context's stream. */
int lt_run_plan(fp8_gemm_lt *ctx, plan *p, const void *a, const void *b, void *d, char *err,
                size_t errlen);

#endif /* FP8LAB_GPU_GEMM_LT_INTERNAL_H */
