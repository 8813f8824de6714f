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

#include <stddef.h>
#include <stdint.h>

#include "fp8.h"
#include "trace.h"

typedef struct fp8_engine fp8_engine;
struct fp8_engine {
  const char *name; /**< "gpu: <device name>" */
  /** Loads one tensor; *amax and hist[FP8_LOG2_HIST_BINS] (overwritten) of its elements. */
  int (*load)(fp8_engine *e, const fp8_tensor_view *v, float *amax, int64_t *hist, char *err,
              size_t errlen);
  /** Statistics of the loaded tensor for n configurations (out[i] overwritten). */
  int (*stats)(fp8_engine *e, const float *scales, const fp8_format *formats, size_t n,
               fp8_stats *out, char *err, size_t errlen);
  void (*free)(fp8_engine *e);
  void *priv;
};

/** Creates an engine, or returns FP8_EDEVICE with the reason (no device, driver too old). */
typedef int (*fp8_engine_factory)(fp8_engine **out, char *err, size_t errlen);

/** The GPU engine (src/gpu/engine_gpu.c; only in builds with CUDA, FP8LAB_HAVE_GPU). */
int fp8_engine_gpu_create(fp8_engine **out, char *err, size_t errlen);

#endif
