/* planted_module.c: the emulated GPU module (fp8lab-gpu-emu.so, the one CPU CI runs the whole
 * program on) behind a copy of its descriptor with one member planted wrong, for the test of the
 * descriptor's checks (tests/gpu/test_gpu_module_seam.py). Built once per plant, named by
 * FP8LAB_PLANT_<plant>: none (the control: must run as the emulated module does), version (the
 * API version), size (the descriptor's size), abi (the engine ABI). FP8LAB_EMU_MODULE is the
 * emulated module's path. Not part of fp8lab. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "gpu_module.h"

#define EXPORT __attribute__((visibility("default")))

EXPORT const fp8_gpu_module *fp8lab_gpu_module(void);

EXPORT const fp8_gpu_module *fp8lab_gpu_module(void) {
  static fp8_gpu_module m;
  static int made;
  if (made) return &m;
  void *h = dlopen(FP8LAB_EMU_MODULE, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  void *sym = h ? dlsym(h, FP8_GPU_MODULE_SYMBOL) : NULL;
  fp8_gpu_module_fn get = NULL;
  if (!sym) {
    fprintf(stderr, "planted_module: %s: %s\n", FP8LAB_EMU_MODULE, dlerror());
    return NULL;
  }
  memcpy(&get, &sym, sizeof get);
  m = *get();
#if defined(FP8LAB_PLANT_version)
  m.api_version = FP8_GPU_MODULE_API_VERSION + 1;
#elif defined(FP8LAB_PLANT_size)
  m.size = sizeof m - sizeof(void *); /* as if built without the last member */
#elif defined(FP8LAB_PLANT_abi)
  m.engine_abi = FP8_ENGINE_ABI - 1;
#endif
  made = 1;
  return &m;
}
