// fp8k_launch.cuh: the one kernel-launch macro of fp8lab's CUDA sources (kernels/*.cu through
// fp8k_internal.cuh, and src/gpu/gemm_lt_kernels.cu), so that the same sources also build with
// a host C++ compiler against the CUDA execution emulator of the CPU tests
// (tests/gpu/emu/cuda_emu.h, which must be included first there):
//
//   FP8K_LAUNCH(grid, block, smem, stream, kernel)(args...);
//
// is kernel<<<grid, block, smem, stream>>>(args...) under nvcc. `kernel` may be a template-id
// with commas (quant_stats_kernel<DT, HIST>). Check the launch with cudaGetLastError() after it,
// as after any launch.
#ifndef FP8LAB_KERNELS_FP8K_LAUNCH_CUH
#define FP8LAB_KERNELS_FP8K_LAUNCH_CUH

#ifdef __CUDACC__
#define FP8K_LAUNCH(grid, block, smem, stream, ...) __VA_ARGS__<<<grid, block, smem, stream>>>
#else
#define FP8K_LAUNCH(grid, block, smem, stream, ...)                                           \
  FP8K_EMU_LAUNCH(grid, block, smem, stream, __VA_ARGS__)
#endif

#endif
