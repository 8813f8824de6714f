/* engine_cpu.h: the CPU engine's factory (src/cpu, fp8lab_cpu), as ggml-cpu.h is ggml-cpu's.
 * The engine itself is seen through engine.h like every engine; its peer is the GPU engine
 * (src/gpu/engine_gpu.c, the module fp8lab-gpu.so). */
#ifndef FP8LAB_CPU_ENGINE_CPU_H
#define FP8LAB_CPU_ENGINE_CPU_H

#include <stddef.h>

#include "engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The CPU engine (engine_cpu.c): the simulator (src/sim) and the GEMM-error reference
 *  (gemm.h) behind a queue and plan->threads worker threads; every op of every configuration.
 *  An fp8_engine_factory: the runner hands it to fp8_engine_composite_create as the engine
 *  that runs what the primary declines (and as the primary of a CPU run). */
int fp8_engine_cpu_create(const fp8_engine_plan *plan, fp8_engine **out, char *err,
                          size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* FP8LAB_CPU_ENGINE_CPU_H */
