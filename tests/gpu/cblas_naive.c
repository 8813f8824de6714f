/* cblas_naive.c: plain-loop cblas_sgemm / cblas_dgemm (row-major only) behind the shim header,
 * so that src/engine/gemm.c, the CPU oracle of the GPU GEMM tests, builds with FP8LAB_GPU_ONLY=ON
 * (no GSL, no OpenBLAS on the device machine). FP32 GEMMs accumulate in float, k ascending, as
 * a BLAS sgemm does up to summation order; the order differs from OpenBLAS's blocked one, which
 * moves results by rounding only (~sqrt(K) ulps), far below the tests' tolerances. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gsl/gsl_cblas.h"

/* op(X) as a dense [rows, cols] copy. */
#define GEMM_BODY(T)                                                                          \
  if (Order != CblasRowMajor) {                                                               \
    fprintf(stderr, "cblas_naive: only CblasRowMajor is implemented\n");                      \
    abort();                                                                                  \
  }                                                                                           \
  T *a = malloc((size_t)M * (size_t)K * sizeof *a), *b = malloc((size_t)K * (size_t)N * sizeof *b); \
  T *row = malloc((size_t)N * sizeof *row);                                                   \
  if ((M && K && !a) || (K && N && !b) || (N && !row)) {                                     \
    fprintf(stderr, "cblas_naive: out of memory\n");                                          \
    abort();                                                                                  \
  }                                                                                           \
  for (int i = 0; i < M; i++)                                                                 \
    for (int k = 0; k < K; k++)                                                               \
      a[(size_t)i * K + k] = TransA == CblasNoTrans ? A[(size_t)i * lda + k] : A[(size_t)k * lda + i]; \
  for (int k = 0; k < K; k++)                                                                 \
    for (int j = 0; j < N; j++)                                                               \
      b[(size_t)k * N + j] = TransB == CblasNoTrans ? B[(size_t)k * ldb + j] : B[(size_t)j * ldb + k]; \
  for (int i = 0; i < M; i++) {                                                               \
    memset(row, 0, (size_t)N * sizeof *row);                                                  \
    for (int k = 0; k < K; k++) {                                                             \
      const T aik = a[(size_t)i * K + k];                                                     \
      const T *bk = b + (size_t)k * N;                                                        \
      for (int j = 0; j < N; j++) row[j] += aik * bk[j];                                      \
    }                                                                                         \
    T *c = C + (size_t)i * ldc;                                                               \
    for (int j = 0; j < N; j++) c[j] = alpha * row[j] + (beta == 0 ? (T)0 : beta * c[j]);     \
  }                                                                                           \
  free(a);                                                                                    \
  free(b);                                                                                    \
  free(row);

void cblas_sgemm(const enum CBLAS_ORDER Order, const enum CBLAS_TRANSPOSE TransA,
                 const enum CBLAS_TRANSPOSE TransB, const int M, const int N, const int K,
                 const float alpha, const float *A, const int lda, const float *B, const int ldb,
                 const float beta, float *C, const int ldc) {
  GEMM_BODY(float)
}

void cblas_dgemm(const enum CBLAS_ORDER Order, const enum CBLAS_TRANSPOSE TransA,
                 const enum CBLAS_TRANSPOSE TransB, const int M, const int N, const int K,
                 const double alpha, const double *A, const int lda, const double *B,
                 const int ldb, const double beta, double *C, const int ldc) {
  GEMM_BODY(double)
}
