/* fp8_check.h: the one check macro family for every CUDA runtime, cuBLASLt and NCCL call of
 * fp8lab, in kernels/ (the launchers) and src/gpu alike (ggml's CUDA_CHECK_GEN): on failure it
 * writes
 *     "<call text> failed at <file>:<line>: <library> <status name>: <description>"
 * into the function's err buffer, sets rc = FP8_EDEVICE and jumps to the function's cleanup
 * label `done` (SQLite's one-label pattern). A function using it must have in scope:
 *     int rc;            the status it returns
 *     char *err;         the caller's message buffer (may be NULL)
 *     size_t errlen;     its size
 *     done:              the cleanup label, which returns rc
 * The wrappers only name functions of the headers they need: include cuda_runtime_api.h,
 * cublasLt.h or nccl.h before using FP8G_CUDA, FP8G_CUBLAS or FP8G_NCCL. Plain C11 (the status
 * is converted back to its enum type, so the macro also compiles as C++ inside .cu files).
 */
#ifndef FP8LAB_FP8_CHECK_H
#define FP8LAB_FP8_CHECK_H

#include <stdio.h>

#include "fp8.h"

/** Formats the failure message and returns FP8_EDEVICE. */
static inline int fp8g_fail(char *err, size_t errlen, const char *call, const char *file, int line,
                            const char *lib, int status, const char *name, const char *desc) {
  if (err && errlen)
    snprintf(err, errlen, "%s failed at %s:%d: %s %s (%d): %s", call, file, line, lib,
             name ? name : "?", status, desc ? desc : "?");
  return FP8_EDEVICE;
}

/** The generic check: `call` returns a status of enum type `type` whose success value is `ok`;
 *  namefn / descfn map a status to its name and description. */
#define FP8G_CHECK_GEN(call, type, ok, namefn, descfn, lib)                                    \
  do {                                                                                         \
    type fp8g_s_ = (call);                                                                     \
    if (fp8g_s_ != (ok)) {                                                                     \
      rc = fp8g_fail(err, errlen, #call, __FILE__, __LINE__, lib, (int)fp8g_s_,               \
                     namefn(fp8g_s_), descfn(fp8g_s_));                                        \
      goto done;                                                                               \
    }                                                                                          \
  } while (0)

/** CUDA runtime calls (cudaError_t). */
#define FP8G_CUDA(call) \
  FP8G_CHECK_GEN(call, cudaError_t, cudaSuccess, cudaGetErrorName, cudaGetErrorString, "CUDA")
/** cuBLAS / cuBLASLt calls (cublasStatus_t). */
#define FP8G_CUBLAS(call)                                                                       \
  FP8G_CHECK_GEN(call, cublasStatus_t, CUBLAS_STATUS_SUCCESS, cublasLtGetStatusName,          \
                 cublasLtGetStatusString, "cuBLASLt")
/** NCCL calls (ncclResult_t). The description is NCCL's last error message when it has one
 *  (ncclGetLastError: the detail behind "unhandled system error" and the like). */
#define FP8G_NCCL(call) \
  FP8G_CHECK_GEN(call, ncclResult_t, ncclSuccess, ncclGetErrorString, fp8g_nccl_detail, "NCCL")

/** Kernel launches (llm.c): the launch error right after <<<...>>> (a launcher returns it). */
#define FP8G_LAUNCHED() FP8G_CUDA(cudaGetLastError())

/** Argument errors in the same shape (no library status): rc = code, message, goto done. */
#define FP8G_REQUIRE(cond, code, ...)                   \
  do {                                                  \
    if (!(cond)) {                                      \
      if (err && errlen) snprintf(err, errlen, __VA_ARGS__); \
      rc = (code);                                      \
      goto done;                                        \
    }                                                   \
  } while (0)

#endif /* FP8LAB_FP8_CHECK_H */
