/* engine_gpu.h: the parts of the GPU module that its descriptor (gpu_module.c; the one exported
 * symbol, src/engine/gpu_module.h) points to: the engine's factory and device probe
 * (engine_gpu.c) and the MPI replay's amax exchange over NCCL (engine_gpu_comm.c). Hidden in the
 * module: fp8lab reaches them only through the descriptor. The GPU tests, which compile these
 * sources, call them directly (tests/engine/test_engine_conformance.c). */
#ifndef FP8LAB_GPU_ENGINE_GPU_H
#define FP8LAB_GPU_ENGINE_GPU_H

#include <stddef.h>

#include "amax_exchange.h"
#include "engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The GPU engine for a plan (fp8_engine_factory), on the node-local rank's device; FP8_EDEVICE
 *  without a device. */
int fp8_engine_gpu_create(const fp8_engine_plan *plan, fp8_engine **out, char *err,
                          size_t errlen);
/** How many CUDA devices the module's runtime sees (0: none, why says so). */
int fp8_engine_gpu_devices(char *why, size_t whylen);
/** The amax exchange between processes' GPUs: NCCL on a communicator bootstrapped over the
 *  caller's MPI (engine_gpu_comm.c). */
extern const fp8_amax_exchange fp8_gpu_amax_exchange;

#ifdef __cplusplus
}
#endif

#endif /* FP8LAB_GPU_ENGINE_GPU_H */
