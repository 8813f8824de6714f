/* gpu_module.h: the one seam between fp8lab and its GPU module (fp8lab-gpu.so), as ggml's
 * `ggml_backend_reg` is between ggml and a backend library.
 *
 * The module exports exactly one symbol, FP8_GPU_MODULE_SYMBOL, a function that returns a
 * pointer to a constant, versioned descriptor: everything fp8lab may call in the module (the
 * device probe, the engine's factory, the amax exchange of an MPI replay, the timeline's
 * measuring run) is a typed member of it. src/engine/engine_load.c alone opens the module, looks
 * the symbol up and checks the descriptor; the runner receives an
 * engine factory and an amax exchange from the engine selection (engine_load.h), the timeline
 * its entry point from the descriptor, and nobody casts a looked-up name to a function type.
 *
 * Versioning: api_version and size are the first two members and never move. A module whose
 * api_version is not FP8_GPU_MODULE_API_VERSION, whose descriptor's size is not this header's
 * sizeof(fp8_gpu_module) (a module built against another layout, a member added or removed),
 * or whose engine_abi is not FP8_ENGINE_ABI (engine.h, engine_impl.h: the op table) is refused
 * in one line before any other member is read. Bump FP8_GPU_MODULE_API_VERSION when a member
 * changes type or meaning; adding one changes the size, which is refused as well.
 */
#ifndef FP8LAB_ENGINE_GPU_MODULE_H
#define FP8LAB_ENGINE_GPU_MODULE_H

#include <stddef.h>

#include "amax_exchange.h"
#include "engine.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FP8_GPU_MODULE_API_VERSION 1
/** The one exported symbol: `const fp8_gpu_module *fp8lab_gpu_module(void)`. */
#define FP8_GPU_MODULE_SYMBOL "fp8lab_gpu_module"

/* the timeline's measuring run (src/timeline/timeline.h: fp8_tl_gpu_args, fp8_tl_measurement);
 * declared here by tag only, so that the engine layer needs nothing of the timeline's */
struct fp8_tl_gpu_args;
struct fp8_tl_measurement;

/** What the module offers. Members other than the first three may be NULL (not offered). */
typedef struct fp8_gpu_module {
  int api_version;               /**< FP8_GPU_MODULE_API_VERSION the module was built with */
  size_t size;                   /**< sizeof(fp8_gpu_module) the module was built with */
  int engine_abi;                /**< FP8_ENGINE_ABI the module's engine was built with */
  /** How many CUDA devices the module's runtime sees (0: none, why says so). */
  int (*devices)(char *why, size_t whylen);
  /** The GPU engine's factory (engine.h). */
  fp8_engine_factory engine_create;
  /** The amax exchange over NCCL (NULL: the module has none; the caller uses MPI). */
  const fp8_amax_exchange *amax_exchange;
  /** fp8lab timeline's measuring run on device 0 (timeline.h's fp8_tl_gpu_fn). */
  int (*timeline_run)(const struct fp8_tl_gpu_args *a, struct fp8_tl_measurement *out,
                      char *err, size_t errlen);
} fp8_gpu_module;

/** The type of the exported symbol. */
typedef const fp8_gpu_module *(*fp8_gpu_module_fn)(void);


#ifdef __cplusplus
}
#endif

#endif /* FP8LAB_ENGINE_GPU_MODULE_H */
