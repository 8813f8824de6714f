/* gpu_module.c: the GPU module's one exported symbol, fp8lab_gpu_module (src/engine/gpu_module.h):
 * a constant descriptor with the module's API version, the descriptor's size, the engine ABI, and
 * typed pointers to the device probe, the engine's factory, the amax exchange and the timeline's
 * measuring run. The module is linked with hidden visibility (src/gpu/CMakeLists.txt), so this
 * is the only name src/engine/engine_load.c can look up in it. */
#include "gpu_module.h"

#include "engine_gpu.h"
#include "timeline.h"

#define GPU_EXPORT __attribute__((visibility("default")))

GPU_EXPORT const fp8_gpu_module *fp8lab_gpu_module(void);

GPU_EXPORT const fp8_gpu_module *fp8lab_gpu_module(void) {
  static const fp8_gpu_module module = {
      .api_version = FP8_GPU_MODULE_API_VERSION,
      .size = sizeof(fp8_gpu_module),
      .engine_abi = FP8_ENGINE_ABI,
      .devices = fp8_engine_gpu_devices,
      .engine_create = fp8_engine_gpu_create,
      .amax_exchange = &fp8_gpu_amax_exchange,
      .timeline_run = fp8_timeline_gpu_run,
  };
  return &module;
}
