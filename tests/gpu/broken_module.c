/* broken_module.c: a stand-in GPU module that is wrong by one count, for the tests of
 * `--device auto|gpu` (tests/gpu/test_engine_emu.py): it exports a descriptor as fp8lab-gpu.so
 * does (src/engine/gpu_module.h) whose engine is the CPU engine (compiled into it), with every
 * result of the first configuration of the first tensor quantized at a step one overflow too
 * many. Its self-check must fail: auto then warns and runs on the CPU, gpu exits 1. Not part of
 * fp8lab. */
#include <stdio.h>
#include <string.h>

#include "engine_cpu.h"
#include "engine_impl.h"
#include "gpu_module.h"

#define EXPORT __attribute__((visibility("default")))

static fp8_engine_ops g_ops;
static const fp8_engine_ops *g_real;
static fp8_tensor_result *g_first; /* the first result queued since the last sync */

static int broken_quantize(fp8_engine *e, size_t t, fp8_tensor_result *out, char *err,
                           size_t errlen) {
  if (!g_first) g_first = out;
  return g_real->quantize_stats(e, t, out, err, errlen);
}

static int broken_sync(fp8_engine *e, char *err, size_t errlen) {
  int rc = g_real->sync(e, err, errlen);
  if (rc == FP8_OK && g_first) g_first->stats[0].overflow++;
  g_first = NULL;
  return rc;
}

static int broken_devices(char *why, size_t whylen) {
  (void)why;
  (void)whylen;
  return 1;
}

static int broken_create(const fp8_engine_plan *plan, fp8_engine **out, char *err,
                         size_t errlen) {
  int rc = fp8_engine_cpu_create(plan, out, err, errlen);
  if (rc) return rc;
  g_real = (*out)->ops;
  g_ops = *g_real;
  g_ops.quantize_stats = broken_quantize;
  g_ops.sync = broken_sync;
  (*out)->ops = &g_ops;
  snprintf((*out)->name, sizeof (*out)->name, "gpu: broken stand-in");
  return FP8_OK;
}

/* the module's one exported symbol (gpu_module.h): a valid descriptor with the broken engine,
 * no amax exchange and no timeline */
EXPORT const fp8_gpu_module *fp8lab_gpu_module(void);
EXPORT const fp8_gpu_module *fp8lab_gpu_module(void) {
  static const fp8_gpu_module m = {.api_version = FP8_GPU_MODULE_API_VERSION,
                                   .size = sizeof(fp8_gpu_module),
                                   .engine_abi = FP8_ENGINE_ABI,
                                   .devices = broken_devices,
                                   .engine_create = broken_create};
  return &m;
}
