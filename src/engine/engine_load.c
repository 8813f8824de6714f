/* engine_load.c: the engine of a run: the CPU engine, or the GPU module after its self-check
 * (see engine_load.h). The only file that opens the GPU module and looks a name up in it: the
 * one descriptor of gpu_module.h, checked before any of its members is used. */
#include "engine_load.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

typedef int (*cu_init_fn)(unsigned flags);
typedef int (*cu_count_fn)(int *count);

/* The NVIDIA driver's device count, asked without loading the CUDA runtime, cuBLASLt or the
 * module (libcuda.so.1 is the driver's own library; CI machines have none). */
static int driver_devices(char *why, size_t whylen) {
  /* RTLD_NODELETE: an initialised driver library is never unloaded (unloading it is a known
   * source of crashes); the CUDA runtime of the module finds it loaded */
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!h) {
    fp8_errorf(0, why, whylen, "no NVIDIA driver: %s", dlerror());
    return 0;
  }
  cu_init_fn cu_init = (cu_init_fn)dlsym(h, "cuInit");
  cu_count_fn cu_count = (cu_count_fn)dlsym(h, "cuDeviceGetCount");
  int n = 0, r = cu_init && cu_count ? cu_init(0) : -1;
  if (r == 0) r = cu_count(&n);
  if (r != 0) fp8_errorf(0, why, whylen, "the NVIDIA driver reports no usable device (CUresult %d)", r);
  else if (n == 0) fp8_errorf(0, why, whylen, "the NVIDIA driver reports no device");
  dlclose(h);
  return r == 0 ? n : 0;
}

#ifndef FP8LAB_MODULE_RELDIR
#define FP8LAB_MODULE_RELDIR "../lib/fp8lab"
#endif

/* The GPU module of the running binary: fp8lab-gpu.so in the binary's folder (a build tree),
 * else in FP8LAB_MODULE_RELDIR relative to it (an installed fp8lab: bin/ and lib/fp8lab/). */
int fp8_gpu_module_find(char *out, size_t len) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return -1;
  exe[n] = 0;
  char *slash = strrchr(exe, '/');
  if (slash) *slash = 0;
  if ((size_t)snprintf(out, len, "%s/%s", exe, FP8_GPU_MODULE_NAME) >= len) return -1;
  if (access(out, R_OK) == 0) return 1;
  if ((size_t)snprintf(out, len, "%s/%s/%s", exe, FP8LAB_MODULE_RELDIR, FP8_GPU_MODULE_NAME) >= len)
    return -1;
  return access(out, R_OK) == 0;
}

/* A module's descriptor checked (path names the module in the message): FP8_OK, or FP8_EDEVICE
 * with one line ("<path>: GPU module API version 2, this fp8lab reads version 1 (...)") when m
 * is NULL, its api_version, size or engine_abi is not this build's, or it has no engine. No
 * member past api_version and size is read before they are checked. */
static int validate(const fp8_gpu_module *m, const char *path, char *err, size_t errlen) {
  if (!m)
    return fp8_errorf(FP8_EDEVICE, err, errlen, "%s: the GPU module gives no descriptor", path);
  /* api_version and size first: nothing past them is read from a module of another layout */
  if (m->api_version != FP8_GPU_MODULE_API_VERSION)
    return fp8_errorf(FP8_EDEVICE, err, errlen, "%s: GPU module API version %d, this fp8lab reads "
                      "version %d (rebuild the module with this fp8lab)", path, m->api_version,
                      FP8_GPU_MODULE_API_VERSION);
  if (m->size != sizeof *m)
    return fp8_errorf(FP8_EDEVICE, err, errlen, "%s: GPU module descriptor of %zu bytes, this "
                      "fp8lab's has %zu (rebuild the module with this fp8lab)", path, m->size,
                      sizeof *m);
  if (m->engine_abi != FP8_ENGINE_ABI)
    return fp8_errorf(FP8_EDEVICE, err, errlen, "%s: GPU module built for engine ABI %d, this "
                      "fp8lab has %d (rebuild the module with this fp8lab)", path, m->engine_abi,
                      FP8_ENGINE_ABI);
  if (!m->engine_create)
    return fp8_errorf(FP8_EDEVICE, err, errlen, "%s: the GPU module has no engine", path);
  return FP8_OK;
}

/* Loads the module and checks its descriptor; FP8_EDEVICE with the reason. The one place that
 * looks a name up in the module. */
static int load_module(fp8_engine_selection *sel, char *err, size_t errlen) {
  /* RTLD_NODELETE: the module stays mapped after dlclose. The static CUDA runtime inside it
   * registers exit-time handlers, and its (and the emulator's) process-wide state must stay
   * reachable to the end, or LeakSanitizer reports it. */
  sel->handle = dlopen(sel->module, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!sel->handle)
    return fp8_errorf(FP8_EDEVICE, err, errlen, "cannot load the GPU module: %s", dlerror());
  /* a function pointer from dlsym's object pointer: POSIX guarantees the conversion; memcpy
   * keeps ISO C's pedantic warning quiet */
  void *sym = dlsym(sel->handle, FP8_GPU_MODULE_SYMBOL);
  fp8_gpu_module_fn get = NULL;
  if (!sym)
    return fp8_errorf(FP8_EDEVICE, err, errlen, "%s is not an fp8lab GPU module (no %s)",
                      sel->module, FP8_GPU_MODULE_SYMBOL);
  memcpy(&get, &sym, sizeof get);
  const fp8_gpu_module *m = get();
  int rc = validate(m, sel->module, err, errlen);
  if (rc) return rc;
  sel->desc = m;
  return FP8_OK;
}

/* The GPU module loaded, with a usable device: FP8_OK, FP8_EDEVICE with the reason (quiet:
 * there is no device at all, which auto does not warn about). */
static int open_module(fp8_engine_selection *sel, int *quiet, char *err, size_t errlen) {
  char why[512] = "";
  const char *env = getenv("FP8LAB_GPU_MODULE");
  *quiet = 1;
  if (env && *env) {
    snprintf(sel->module, sizeof sel->module, "%s", env);
  } else {
    if (driver_devices(why, sizeof why) == 0)
      return fp8_errorf(FP8_EDEVICE, err, errlen, "no usable CUDA device (%s)", why);
    if (fp8_gpu_module_find(sel->module, sizeof sel->module) != 1)
      return fp8_errorf(FP8_EDEVICE, err, errlen,
                        "this fp8lab has no GPU engine (%s is missing: CUDA was not found when it "
                        "was built)", sel->module);
  }
  /* a driver with a device, or a module named by hand: from here on a failure is worth the
   * warning of --device auto (a module that cannot load, a runtime newer than the driver) */
  *quiet = 0;
  sel->choice.module = sel->module;
  int rc = load_module(sel, err, errlen);
  if (rc) return rc;
  if (sel->desc->devices && sel->desc->devices(why, sizeof why) == 0)
    return fp8_errorf(FP8_EDEVICE, err, errlen, "no usable CUDA device (%s)", why);
  return FP8_OK;
}

int fp8_gpu_module_open(const fp8_gpu_module **module, int *quiet, char *err, size_t errlen) {
  fp8_engine_selection sel;
  memset(&sel, 0, sizeof sel);
  *module = NULL;
  int rc = open_module(&sel, quiet, err, errlen);
  if (rc == FP8_OK) *module = sel.desc; /* the handle stays open: loaded for the process */
  else if (sel.handle) dlclose(sel.handle);
  return rc;
}

/* The GPU engine, loaded and checked: FP8_OK, FP8_EDEVICE with the reason (quiet: there is no
 * device at all, which auto does not warn about). */
static int try_gpu(fp8_engine_selection *sel, int threads, int *quiet, char *err, size_t errlen) {
  int rc = open_module(sel, quiet, err, errlen);
  if (rc) return rc;
  sel->factory = sel->desc->engine_create;
  fp8_check_options o = {.full = 0, .threads = threads};
  char cerr[512] = "";
  sel->choice.self_check_ran = 1;
  rc = fp8_engine_check(sel->factory, &o, &sel->check, cerr, sizeof cerr);
  sel->choice.self_check_values = sel->check.values;
  if (rc) return fp8_errorf(FP8_EDEVICE, err, errlen, "the GPU engine failed its self-check: %s", cerr);
  if (sel->check.mismatches)
    return fp8_errorf(FP8_EDEVICE, err, errlen,
                      "the GPU engine failed its self-check (%lld of %lld values differ from the "
                      "simulator; first: %s)", sel->check.mismatches, sel->check.values, sel->check.first);
  sel->choice.self_check_passed = 1;
  return FP8_OK;
}

int fp8_engine_select(const char *device, int threads, fp8_engine_selection *sel, char *warn,
                      size_t warnlen, char *err, size_t errlen) {
  memset(sel, 0, sizeof *sel);
  sel->choice.device = device;
  sel->choice.self_check_note = sel->note;
  if (warn && warnlen) warn[0] = 0;
  if (strcmp(device, "cpu") == 0) return FP8_OK;
  int quiet = 1;
  char why[600] = "";
  int rc = try_gpu(sel, threads, &quiet, why, sizeof why);
  if (rc == FP8_OK) {
    sel->exchange = sel->desc->amax_exchange;
    return FP8_OK;
  }
  snprintf(sel->note, sizeof sel->note, "%s", why);
  sel->factory = NULL; /* the CPU engine */
  if (strcmp(device, "gpu") == 0) return fp8_errorf(rc, err, errlen, "--device gpu: %s", why);
  if (!quiet) fp8_errorf(0, warn, warnlen, "warning: %s; running on the CPU", why);
  return FP8_OK;
}

void fp8_engine_selection_close(fp8_engine_selection *sel) {
  if (sel->handle) dlclose(sel->handle);
  sel->handle = NULL;
  sel->desc = NULL;
  sel->factory = NULL;
  sel->exchange = NULL;
}
