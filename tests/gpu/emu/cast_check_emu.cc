// cast_check_emu.cc: kernels/cast_check.cu compiled by the host C++ compiler and run through the
// CUDA execution emulator (cuda_emu.h); part of fp8lab_kernels_emu (label cpu tests).
#include "cuda_emu.h"

#include "cast_check.cu"
