// gemm_lt_kernels_emu.cc: src/gpu/gemm_lt_kernels.cu compiled by the host C++ compiler and run
// through the CUDA execution emulator (cuda_emu.h); part of fp8lab_gpu_mock (test_gpu_*_mock).
#include "cuda_emu.h"

#include "gemm_lt_kernels.cu"
