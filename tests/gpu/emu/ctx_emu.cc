// ctx_emu.cc: kernels/ctx.cu compiled by the host C++ compiler over the CUDA emulator and the
// mock runtime (cuda_emu.h); part of fp8lab_kernels_emu (label cpu tests).
#include "cuda_emu.h"

#include "ctx.cu"
