/* mock_cuda.h: what tests/gpu/mock_cuda.c (the host-memory CUDA runtime) offers the kernel
 * emulator (tests/gpu/emu/cuda_emu.cc) besides the CUDA API itself. */
#ifndef FP8LAB_TESTS_GPU_MOCK_CUDA_H
#define FP8LAB_TESTS_GPU_MOCK_CUDA_H

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Records a launch error for the next cudaGetLastError / cudaPeekAtLastError. */
void mock_cuda_set_last_error(cudaError_t e);
/** 1 when p lies inside a live cudaMalloc allocation. */
int mock_cuda_is_device_ptr(const void *p);
/** 1 for the default stream handles and streams created and not yet destroyed. */
int mock_cuda_stream_valid(cudaStream_t s);

/** SMs the mock device reports (cudaDeviceGetAttribute, cudaGetDeviceProperties): small, so
 *  that grid-stride loops sized from it wrap several times on test-sized tensors. */
#define MOCK_CUDA_SM_COUNT 3
/** Blocks per SM cudaOccupancyMaxActiveBlocksPerMultiprocessor reports. */
#define MOCK_CUDA_BLOCKS_PER_SM 2

#ifdef __cplusplus
}
#endif

#endif
