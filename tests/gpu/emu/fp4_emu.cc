// fp4_emu.cc: kernels/fp4.cu compiled by the host C++ compiler and run through the CUDA
// execution emulator (cuda_emu.h); part of fp8lab_kernels_emu (label cpu tests).
#include "cuda_emu.h"

#include "fp4.cu"
