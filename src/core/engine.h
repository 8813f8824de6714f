/* engine.h: the per-element work of a replay behind one small interface, so that the runner
 * does not know whether the CPU simulator or the GPU does it (ggml's backend table, in small).
 *
 * For one tensor of one step: `load` reads the tensor once (widening BF16/F16 to float32) and
 * returns its amax and log2|x| histogram; `stats` then quantizes the loaded tensor with each of
 * n (scale, format) pairs and returns the RECIPES.md statistics of each. The CPU engine is the
 * simulator itself (the runner's own code); the GPU engine (src/gpu/engine_gpu.c) runs the
 * fused kernels of kernels/quant.cu and must give identical counts, amax and scales and sums
 * within 1e-6 relative. Block recipes always run on the CPU.
 */
#ifndef FP8LAB_CORE_ENGINE_H
#define FP8LAB_CORE_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fp8.h"
#include "trace.h"

/** One layer at one step for the GEMM errors of gemm.h, with n per-tensor configurations.
 *  Operands as stored in the trace, widened to float32, host memory, row-major: x = input
 *  [tokens, in], w = weight [out, in], g = grad_output [tokens, out]. max_tokens: gemm.h's token
 *  sampling (0 = all). scale[i][c] / format[i][c]: operand i's (0 input, 1 weight, 2
 *  grad_output) scale and format under configuration c. */
typedef struct {
  const float *x, *w, *g;
  int64_t tokens, in, out, max_tokens;
  size_t n;
  const float *scale[3];
  const fp8_format *format[3];
} fp8_engine_gemm_job;

typedef struct fp8_engine fp8_engine;
struct fp8_engine {
  const char *name; /**< "gpu: <device name>" */
  /** Loads one tensor; *amax and hist[FP8_LOG2_HIST_BINS] (overwritten) of its elements. */
  int (*load)(fp8_engine *e, const fp8_tensor_view *v, float *amax, int64_t *hist, char *err,
              size_t errlen);
  /** Statistics of the loaded tensor for n configurations (out[i] overwritten). */
  int (*stats)(fp8_engine *e, const float *scales, const fp8_format *formats, size_t n,
               fp8_stats *out, char *err, size_t errlen);
  /** Optional (NULL: every GEMM error is computed on the CPU, gemm.h). The real FP8 GEMMs of
   *  one layer: rel[k * n + c] = rel_error of GEMM k (fp8_gemm_kind) under configuration c, and
   *  done[k * n + c] false where the engine cannot run that GEMM (the runner computes those on
   *  the CPU). The reference is the engine's own unquantized GEMM. */
  int (*gemm)(fp8_engine *e, const fp8_engine_gemm_job *job, double *rel, bool *done, char *err,
              size_t errlen);
  void (*free)(fp8_engine *e);
  void *priv;
};

/** Creates an engine, or returns FP8_EDEVICE with the reason (no device, driver too old). */
typedef int (*fp8_engine_factory)(fp8_engine **out, char *err, size_t errlen);

/** The GPU engine (src/gpu/engine_gpu.c; only in builds with CUDA, FP8LAB_HAVE_GPU). */
int fp8_engine_gpu_create(fp8_engine **out, char *err, size_t errlen);

#endif
