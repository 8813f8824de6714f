/* fp8k.h: C-callable launchers of fp8lab's CUDA kernels (C++ stays inside the .cu files).
 * All functions return 0 on success or FP8_EDEVICE with a message in err naming the CUDA call,
 * file and line. */
#ifndef FP8LAB_KERNELS_FP8K_H
#define FP8LAB_KERNELS_FP8K_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Number of usable CUDA devices (0 when there is none or the driver is missing); a reason is
 *  written to why when there is none. */
int fp8k_device_count(char *why, size_t whylen);

/** Encodes every float32 bit pattern in [first, first + count) on the device with the hardware
 *  conversion (cvt.rn.satfinite on sm_89+), writing `count` codes to the host array codes.
 *  e5m2 selects the format. */
int fp8k_encode_range(uint64_t first, uint64_t count, int e5m2, uint8_t *codes, char *err,
                      size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
