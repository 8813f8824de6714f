/* gsl_cblas.h (shim): the two CBLAS calls src/engine/gemm.c makes, for FP8LAB_GPU_ONLY builds on
 * machines without GSL's headers (the device machine). Same declarations as GSL's header; the
 * implementation is tests/gpu/cblas_naive.c. Only on the include path of the GPU tests' oracle
 * library in GPU_ONLY builds; normal builds use GSL's header and OpenBLAS. */
#ifndef FP8LAB_CBLAS_SHIM_H
#define FP8LAB_CBLAS_SHIM_H

enum CBLAS_ORDER { CblasRowMajor = 101, CblasColMajor = 102 };
enum CBLAS_TRANSPOSE { CblasNoTrans = 111, CblasTrans = 112, CblasConjTrans = 113 };

void cblas_sgemm(const enum CBLAS_ORDER Order, const enum CBLAS_TRANSPOSE TransA,
                 const enum CBLAS_TRANSPOSE TransB, const int M, const int N, const int K,
                 const float alpha, const float *A, const int lda, const float *B, const int ldb,
                 const float beta, float *C, const int ldc);
void cblas_dgemm(const enum CBLAS_ORDER Order, const enum CBLAS_TRANSPOSE TransA,
                 const enum CBLAS_TRANSPOSE TransB, const int M, const int N, const int K,
                 const double alpha, const double *A, const int lda, const double *B,
                 const int ldb, const double beta, double *C, const int ldc);

#endif
