/* device.h: is there a CUDA device fp8lab can use, and what is it? Every entry point of src/gpu
 * and every GPU test starts here, so that "no device", "no driver" and "driver older than the
 * runtime" become one clear sentence (FP8_EDEVICE), never a crash or a cryptic status. */
#ifndef FP8LAB_GPU_DEVICE_H
#define FP8LAB_GPU_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** What fp8_gpu_probe found. */
typedef struct {
  int device;             /**< the ordinal probed */
  int count;              /**< visible CUDA devices */
  char name[256];         /**< e.g. "NVIDIA H200" */
  int cc_major, cc_minor; /**< compute capability (9.0 for H100/H200) */
  int sm_count;           /**< multiprocessors */
  int64_t total_mem;      /**< bytes of device memory */
  int driver_version;     /**< cudaDriverGetVersion: 13000 = 13.0; 0 = no driver */
  int runtime_version;    /**< cudaRuntimeGetVersion of the runtime linked in */
  int fp8_gemm;           /**< 1 when cuBLASLt FP8 GEMMs can run (compute capability >= 8.9) */
} fp8_gpu_info;

/** Probes device `device`. Returns FP8_OK and fills *info, or FP8_EDEVICE with a sentence in
 *  err naming the reason: no NVIDIA driver, driver older than the runtime (both versions
 *  given), no device, ordinal out of range, or the CUDA error. info may be NULL. */
int fp8_gpu_probe(int device, fp8_gpu_info *info, char *err, size_t errlen);

/** Like fp8_gpu_probe, and also FP8_EDEVICE when the device has no FP8 tensor cores
 *  (compute capability below 8.9): "FP8 GEMMs need sm_89 or newer; device 0 (...) is sm_80". */
int fp8_gpu_require_fp8(int device, fp8_gpu_info *info, char *err, size_t errlen);

/** The device of this process: its node-local rank under a launcher (OMPI_COMM_WORLD_LOCAL_RANK,
 *  MPI_LOCALRANKID, SLURM_LOCALID or LOCAL_RANK, the first set) modulo the visible devices; 0
 *  without a launcher or a device. One GPU per process, as MPI jobs place them. */
int fp8_gpu_local_device(void);

#ifdef __cplusplus
}
#endif

#endif
