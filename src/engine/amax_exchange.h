/* amax_exchange.h: the amax exchange of an MPI replay between the processes' GPUs, as the runner
 * (src/run/run_split.c) sees it: a table of functions and an opaque communicator. The GPU module
 * provides one (its descriptor's amax_exchange, gpu_module.h: NCCL); the engine selection hands
 * it to the runner (engine_load.h), which knows an exchange, not a module. Without one the runner
 * exchanges over MPI_Allreduce. */
#ifndef FP8LAB_ENGINE_AMAX_EXCHANGE_H
#define FP8LAB_ENGINE_AMAX_EXCHANGE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Bytes of an amax exchange's communicator id (NCCL's ncclUniqueId), broadcast by the caller. */
#define FP8_AMAX_EXCHANGE_ID_BYTES 128

/** An MPI replay's amax exchange between the processes' GPUs (src/run/run_split.c): the
 *  all-reduce (MAX) of TransformerEngine's amax reduction, bootstrapped over the caller's MPI.
 *  Process 0 makes the id, the caller broadcasts its FP8_AMAX_EXCHANGE_ID_BYTES bytes, every
 *  process opens the exchange with it; max() reduces host floats in place. Each int-returning
 *  member gives FP8_OK or a status with a one-line message in the buffer. */
typedef struct fp8_amax_exchange {
  int (*make_id)(void *id, char *why, size_t whylen);
  /** NULL with the reason in why. */
  void *(*open)(const void *id, int nranks, int rank, char *why, size_t whylen);
  /** "NCCL 2.28.9 (ring), world 4" (for run.json and the run's last line). */
  const char *(*name)(void *comm);
  int (*max)(void *comm, float *host, size_t n, char *err, size_t errlen);
  void (*close)(void *comm);
} fp8_amax_exchange;

#ifdef __cplusplus
}
#endif

#endif /* FP8LAB_ENGINE_AMAX_EXCHANGE_H */
