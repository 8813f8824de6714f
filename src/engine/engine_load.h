/* engine_load.h: choosing the engine of a run (`fp8lab run --device auto|cpu|gpu`).
 *
 * The GPU engine is a module, fp8lab-gpu.so next to the fp8lab binary (FP8LAB_GPU_MODULE names
 * another one), loaded with dlopen only when a GPU is asked for and the NVIDIA driver reports
 * a device, so that a CPU run never maps CUDA, cuBLASLt or the module. Before a run may use it,
 * the module's engine passes the self-check (engine_check.h, small): codes, counts, amax,
 * scales and the fused update bit for bit against the simulator, and one GEMM.
 *
 *   cpu   the CPU engine.
 *   auto  the GPU engine when a device is there and the self-check passes; the CPU otherwise:
 *         quietly when there is no driver or device or this build has no module, with one
 *         warning line when a device is there (or FP8LAB_GPU_MODULE names a module) but the
 *         module does not load (a missing libcublasLt, a runtime newer than the driver), the
 *         engine fails to start, or it fails the self-check.
 *   gpu   the GPU engine, or FP8_EDEVICE (exit 1) with the reason: no module, no device, the
 *         engine's error, or the self-check's first mismatch.
 */
#ifndef FP8LAB_ENGINE_ENGINE_LOAD_H
#define FP8LAB_ENGINE_ENGINE_LOAD_H

#include <stddef.h>

#include "engine.h"
#include "engine_check.h"
#include "engine_choice.h"
#include "gpu_module.h"

#define FP8_GPU_MODULE_NAME "fp8lab-gpu.so"

typedef struct {
  fp8_engine_factory factory;  /**< NULL: the CPU engine */
  /** The amax exchange between the processes' GPUs of an MPI replay, when the GPU engine runs
   *  and its module has one; NULL: the caller exchanges over MPI (src/run/run_split.c). */
  const fp8_amax_exchange *exchange;
  fp8_engine_choice choice;    /**< for run.json (strings point into this struct) */
  fp8_check_report check;      /**< the self-check, when it ran */
  char module[4096];
  char note[600];
  void *handle;                /**< the dlopen'ed module (only engine_load.c reads it) */
  const fp8_gpu_module *desc;  /**< its descriptor, validated (gpu_module.h) */
} fp8_engine_selection;

/** Chooses the engine for `device` ("auto", "cpu", "gpu"). FP8_OK with *sel filled (and, for
 *  auto falling back with a reason worth a warning, that line in warn), or FP8_EDEVICE with
 *  the reason in err (device "gpu" only). threads: the self-check's plan. */
int fp8_engine_select(const char *device, int threads, fp8_engine_selection *sel, char *warn,
                      size_t warnlen, char *err, size_t errlen);
/** The GPU module alone (no engine, no self-check), for other entry points than the engine's
 *  (fp8lab timeline): the driver probe and the module as fp8_engine_select finds them, its
 *  descriptor validated; the module stays loaded for the process. FP8_EDEVICE with the reason;
 *  *quiet = 1 when there is no device or no module at all. */
int fp8_gpu_module_open(const fp8_gpu_module **module, int *quiet, char *err, size_t errlen);
/** Where this fp8lab's GPU module is: fp8lab-gpu.so in the running binary's folder (a build
 *  tree), else in lib/fp8lab/ beside an installed bin/ (FP8LAB_MODULE_RELDIR). 1 with its path
 *  in out, 0 when neither exists (out: the installed place looked at), -1 when the binary's
 *  path is unknown or too long. FP8LAB_GPU_MODULE, which overrides it for a run, is not read. */
int fp8_gpu_module_find(char *out, size_t len);
/** Unloads the module (after every engine it made is freed). */
void fp8_engine_selection_close(fp8_engine_selection *sel);

#endif /* FP8LAB_ENGINE_ENGINE_LOAD_H */
