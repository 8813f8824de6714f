/* device.c: see device.h. */
#include "device.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8_check.h"

/* ", CUDA_VISIBLE_DEVICES=<value>" when that variable is set (a common reason for no device). */
static const char *visible_devices_note(char *buf, size_t len) {
  const char *v = getenv("CUDA_VISIBLE_DEVICES");
  if (!v) return "";
  snprintf(buf, len, ", CUDA_VISIBLE_DEVICES=\"%s\"", v);
  return buf;
}

static void version_text(int v, char *buf, size_t len) {
  snprintf(buf, len, "%d.%d", v / 1000, (v % 1000) / 10);
}

int fp8_gpu_probe(int device, fp8_gpu_info *info, char *err, size_t errlen) {
  int rc = FP8_OK;
  fp8_gpu_info local;
  fp8_gpu_info *in = info ? info : &local;
  memset(in, 0, sizeof *in);
  in->device = device;
  cudaRuntimeGetVersion(&in->runtime_version);
  /* cudaDriverGetVersion reports 0 (and succeeds) when libcuda.so cannot be loaded. */
  if (cudaDriverGetVersion(&in->driver_version) != cudaSuccess) in->driver_version = 0;
  char rt[32], drv[32], vis[160];
  version_text(in->runtime_version, rt, sizeof rt);
  version_text(in->driver_version, drv, sizeof drv);
  if (in->driver_version == 0) {
    FP8G_REQUIRE(0, FP8_EDEVICE, "no NVIDIA driver (libcuda.so not found; built for CUDA %s)", rt);
  }
  cudaError_t e = cudaGetDeviceCount(&in->count);
  if (e != cudaSuccess) {
    (void)cudaGetLastError(); /* clear the sticky-free error so later calls start clean */
    if (e == cudaErrorInsufficientDriver)
      FP8G_REQUIRE(0, FP8_EDEVICE,
                   "the NVIDIA driver supports CUDA %s but fp8lab was built with CUDA %s: "
                   "update the driver (or build with an older toolkit)", drv, rt);
    if (e == cudaErrorNoDevice)
      FP8G_REQUIRE(0, FP8_EDEVICE, "no CUDA device (driver %s present, no GPU visible%s)", drv,
                   visible_devices_note(vis, sizeof vis));
    FP8G_REQUIRE(0, FP8_EDEVICE, "cudaGetDeviceCount failed: %s: %s (driver %s, runtime %s)",
                 cudaGetErrorName(e), cudaGetErrorString(e), drv, rt);
  }
  FP8G_REQUIRE(in->count > 0, FP8_EDEVICE, "no CUDA device (driver %s, runtime %s)", drv, rt);
  FP8G_REQUIRE(device >= 0 && device < in->count, FP8_EDEVICE,
               "CUDA device %d requested, %d visible", device, in->count);
  struct cudaDeviceProp p;
  FP8G_CUDA(cudaGetDeviceProperties(&p, device));
  snprintf(in->name, sizeof in->name, "%s", p.name);
  in->cc_major = p.major;
  in->cc_minor = p.minor;
  in->sm_count = p.multiProcessorCount;
  in->total_mem = (int64_t)p.totalGlobalMem;
  in->fp8_gemm = p.major * 10 + p.minor >= 89;
done:
  return rc;
}

int fp8_gpu_require_fp8(int device, fp8_gpu_info *info, char *err, size_t errlen) {
  fp8_gpu_info local;
  fp8_gpu_info *in = info ? info : &local;
  int rc = fp8_gpu_probe(device, in, err, errlen);
  if (rc) return rc;
  FP8G_REQUIRE(in->fp8_gemm, FP8_EDEVICE,
               "FP8 GEMMs need compute capability 8.9 or newer (Ada, Hopper); device %d (%s) is "
               "sm_%d%d", device, in->name, in->cc_major, in->cc_minor);
done:
  return rc;
}

int fp8_gpu_local_device(void) {
  /* the launchers' node-local rank: Open MPI, MPICH's Hydra, Slurm's srun, torchrun */
  static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                     "SLURM_LOCALID", "LOCAL_RANK"};
  long local = 0;
  for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
    const char *v = getenv(vars[i]);
    char *end;
    if (!v || !*v) continue;
    long x = strtol(v, &end, 10);
    if (*end == '\0' && x >= 0) {
      local = x;
      break;
    }
  }
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n <= 0) {
    (void)cudaGetLastError();
    return 0;
  }
  return (int)(local % n);
}
