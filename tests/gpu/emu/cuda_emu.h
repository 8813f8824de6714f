// cuda_emu.h: a host emulator of the CUDA execution model, so that the unmodified kernel bodies
// of kernels/*.cu and src/gpu/gemm_lt_kernels.cu compile with g++ (-x c++, C++17) and run on
// machines without a GPU (CI). Include it before the .cu file (tests/gpu/emu/*_emu.cc do).
//
// Model (cuda_emu.cc has the details):
//  - a launch (FP8K_LAUNCH in kernels/fp8k_launch.cuh) runs the grid's blocks one after another
//    (in a shuffled order when FP8K_EMU_SEED is set); the threads of a block are cooperative
//    fibers with their own stacks. threadIdx, blockIdx, blockDim, gridDim are per fiber.
//  - a fiber runs until it waits: at __syncthreads() (a block barrier; threads that have exited
//    count as arrived, as on sm_70+; all waiting threads must be at the same __syncthreads call),
//    or in a warp collective (__shfl*_sync, __reduce_*_sync, __ballot_sync, __any/__all_sync,
//    __syncwarp), which is a rendezvous of the lanes named in the mask only. A lane named in a
//    mask that has exited or does not exist, lanes that disagree on the mask or the operation,
//    a calling lane missing from its own mask and a deadlock (nothing can run) end the program
//    with a message naming the kernel, block, warp and lanes. A shuffle that reads a lane outside
//    the mask returns a poison value (a NaN for float/double) and counts a warning.
//  - scheduling order: FP8K_EMU_SEED unset or 0: round robin (thread 0, 1, ... each runs until
//    it waits). Any other value: the ready threads are resumed in a random order after every
//    wait, the thread that completes a barrier or a collective yields too, atomics yield at
//    random, and blocks run in a random order, so that a result that depends on unsynchronised
//    ordering can show it.
//  - __shared__ is `static` (blocks run one after another, so a static local is the block's
//    shared memory; nothing is reset between blocks, as on hardware), __constant__ a plain
//    global (cudaMemcpyToSymbol copies to its host address), __device__/__global__/__host__
//    nothing. Device memory is host memory (tests/gpu/mock_cuda.c's runtime, which also checks
//    that kernel pointer arguments and copies point into device allocations).
//  - arithmetic intrinsics are the plain IEEE operations: compile with -ffp-contract=off
//    -fno-fast-math (as nvcc -fmad=false); cuda_fp8.h / cuda_fp16.h / cuda_bf16.h provide the
//    conversions through their host paths.
// Not modelled: dynamic (extern) shared memory (`extern __shared__` does not compile), the memory
// model (a fiber's stores are seen at once by all others), uninitialised shared memory (it keeps
// the previous block's values), __launch_bounds__ limits, timing, warp-synchronous code without
// the *_sync intrinsics, streams (work runs when issued; each launch is logged as work on its
// stream, see mock_cuda.h, and tests/gpu/hb_check.h checks the order CUDA would guarantee).
// Single host thread: the scheduler and mock_cuda.c's registries are not locked.
#ifndef FP8LAB_TESTS_GPU_EMU_CUDA_EMU_H
#define FP8LAB_TESTS_GPU_EMU_CUDA_EMU_H

#ifdef __CUDACC__
#error "cuda_emu.h is for a host C++ compiler (g++ -x c++), not for nvcc"
#endif

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

namespace fp8emu {

// The built-in variables of the running fiber (set by the scheduler before it resumes one).
extern uint3 g_threadIdx, g_blockIdx;
extern dim3 g_blockDim, g_gridDim;

// Warp collective operations (the `op` of warp_collective).
enum CollOp {
  OP_SHFL_IDX, OP_SHFL_UP, OP_SHFL_DOWN, OP_SHFL_XOR,
  OP_REDUCE_ADD_U, OP_REDUCE_MIN_U, OP_REDUCE_MAX_U,
  OP_REDUCE_ADD_I, OP_REDUCE_MIN_I, OP_REDUCE_MAX_I,
  OP_REDUCE_AND, OP_REDUCE_OR, OP_REDUCE_XOR,
  OP_BALLOT, OP_SYNCWARP,
  OP_COUNT
};

// One lane's part of a warp collective: waits until every lane of `mask` has called the same
// operation with the same mask, returns this lane's result (64 bits; 32-bit types use the low
// half). `arg` and `width` are the shuffles' lane/delta/lane mask and segment width.
uint64_t warp_collective(int op, unsigned mask, uint64_t value, int arg, int width,
                         const char *file, int line);
// Block barrier.
void syncthreads(const char *file, int line);
// A point where a shuffled schedule may switch threads (atomics).
void preempt_point();
// Reports a kernel bug (kernel, block, thread and the message) and aborts.
[[noreturn]] void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// The schedule's seed (0: round robin). Read from FP8K_EMU_SEED at the first launch unless set
// here first; tests of the emulator use it.
void set_seed(uint64_t seed);

// Runs a grid: `thunk(ctx)` once per thread, with the built-ins set. Validates the launch
// configuration first (a bad one is recorded for cudaGetLastError, as on the GPU).
void run_grid(dim3 grid, dim3 block, size_t smem, cudaStream_t stream, void (*thunk)(void *),
              void *ctx, const char *kernel);
// The launch's pointer arguments must point into device allocations (or be null).
void check_pointer_arg(const void *p, int index, const char *kernel);

template <class T>
inline void check_arg(const T &a, int index, const char *kernel) {
  if constexpr (std::is_pointer_v<T>) check_pointer_arg((const void *)a, index, kernel);
  else (void)a, (void)index, (void)kernel;
}

// FP8K_LAUNCH(grid, block, smem, stream, kernel)(args...): the arguments are converted to the
// kernel's parameter types and copied once, as a CUDA launch does; every thread gets its own
// by-value copies when it calls the kernel.
template <class... P>
struct Launcher {
  void (*kernel)(P...);
  dim3 grid, block;
  size_t smem;
  cudaStream_t stream;
  const char *name;

  template <class... A>
  void operator()(A &&...args) const {
    static_assert(sizeof...(A) == sizeof...(P), "wrong number of kernel arguments");
    using Args = std::tuple<std::decay_t<P>...>;
    struct Ctx {
      void (*kernel)(P...);
      Args args;
    } ctx{kernel, Args(std::forward<A>(args)...)};
    std::apply([&](const auto &...a) {
      int i = 0;
      (check_arg(a, i++, name), ...);
    }, ctx.args);
    run_grid(grid, block, smem, stream,
             [](void *c) {
               Ctx *x = static_cast<Ctx *>(c);
               std::apply(x->kernel, x->args);
             },
             &ctx, name);
  }
};

template <class... P>
Launcher<P...> make_launcher(dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                             const char *name, void (*kernel)(P...)) {
  return Launcher<P...>{kernel, grid, block, smem, stream, name};
}

template <class T>
inline uint64_t to_bits(T v) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "shuffle of a type > 8 bytes");
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof v);
  return b;
}
template <class T>
inline T from_bits(uint64_t b) {
  T v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}

} // namespace fp8emu

// The launch macro behind FP8K_LAUNCH (kernels/fp8k_launch.cuh).
#define FP8K_EMU_LAUNCH(grid, block, smem, stream, ...)                                       \
  ::fp8emu::make_launcher(grid, block, smem, stream, #__VA_ARGS__, __VA_ARGS__)

// ------------------------------------------------------------------ execution-space keywords
// cuda_runtime.h defines __device__, __global__, __host__, __shared__, __constant__ as nothing
// for a host compiler; shared memory must be one object per block instead of one per thread.
#undef __shared__
#define __shared__ static
#ifndef __launch_bounds__
#define __launch_bounds__(...)
#endif

// ------------------------------------------------------------------ built-in variables
#define threadIdx (static_cast<const uint3 &>(::fp8emu::g_threadIdx))
#define blockIdx (static_cast<const uint3 &>(::fp8emu::g_blockIdx))
#define blockDim (static_cast<const dim3 &>(::fp8emu::g_blockDim))
#define gridDim (static_cast<const dim3 &>(::fp8emu::g_gridDim))
#ifndef warpSize
#define warpSize 32
#endif

// ------------------------------------------------------------------ synchronisation
inline void __syncthreads(const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
  ::fp8emu::syncthreads(file, line);
}
inline void __syncwarp(unsigned mask = 0xFFFFFFFFu, const char *file = __builtin_FILE(),
                       int line = __builtin_LINE()) {
  ::fp8emu::warp_collective(::fp8emu::OP_SYNCWARP, mask, 0, 0, 32, file, line);
}

// ------------------------------------------------------------------ warp shuffles and votes
#define FP8EMU_SHFL(name, op)                                                                 \
  template <class T>                                                                          \
  inline T name(unsigned mask, T var, int arg, int width = 32,                                \
                const char *file = __builtin_FILE(), int line = __builtin_LINE()) {           \
    return ::fp8emu::from_bits<T>(::fp8emu::warp_collective(                                  \
        op, mask, ::fp8emu::to_bits(var), arg, width, file, line));                           \
  }
FP8EMU_SHFL(__shfl_sync, ::fp8emu::OP_SHFL_IDX)
FP8EMU_SHFL(__shfl_up_sync, ::fp8emu::OP_SHFL_UP)
FP8EMU_SHFL(__shfl_down_sync, ::fp8emu::OP_SHFL_DOWN)
FP8EMU_SHFL(__shfl_xor_sync, ::fp8emu::OP_SHFL_XOR)
#undef FP8EMU_SHFL

#define FP8EMU_REDUCE(name, type, op)                                                         \
  inline type name(unsigned mask, type value, const char *file = __builtin_FILE(),            \
                   int line = __builtin_LINE()) {                                             \
    return (type)::fp8emu::warp_collective(op, mask, (uint64_t)(uint32_t)value, 0, 32, file,  \
                                           line);                                             \
  }
FP8EMU_REDUCE(__reduce_add_sync, unsigned, ::fp8emu::OP_REDUCE_ADD_U)
FP8EMU_REDUCE(__reduce_min_sync, unsigned, ::fp8emu::OP_REDUCE_MIN_U)
FP8EMU_REDUCE(__reduce_max_sync, unsigned, ::fp8emu::OP_REDUCE_MAX_U)
FP8EMU_REDUCE(__reduce_add_sync, int, ::fp8emu::OP_REDUCE_ADD_I)
FP8EMU_REDUCE(__reduce_min_sync, int, ::fp8emu::OP_REDUCE_MIN_I)
FP8EMU_REDUCE(__reduce_max_sync, int, ::fp8emu::OP_REDUCE_MAX_I)
FP8EMU_REDUCE(__reduce_and_sync, unsigned, ::fp8emu::OP_REDUCE_AND)
FP8EMU_REDUCE(__reduce_or_sync, unsigned, ::fp8emu::OP_REDUCE_OR)
FP8EMU_REDUCE(__reduce_xor_sync, unsigned, ::fp8emu::OP_REDUCE_XOR)
#undef FP8EMU_REDUCE

inline unsigned __ballot_sync(unsigned mask, int pred, const char *file = __builtin_FILE(),
                              int line = __builtin_LINE()) {
  return (unsigned)::fp8emu::warp_collective(::fp8emu::OP_BALLOT, mask, pred != 0, 0, 32, file,
                                             line);
}
inline int __any_sync(unsigned mask, int pred, const char *file = __builtin_FILE(),
                      int line = __builtin_LINE()) {
  return __ballot_sync(mask, pred, file, line) != 0;
}
inline int __all_sync(unsigned mask, int pred, const char *file = __builtin_FILE(),
                      int line = __builtin_LINE()) {
  return __ballot_sync(mask, pred, file, line) == mask;
}

// ------------------------------------------------------------------ arithmetic intrinsics
// Round-to-nearest IEEE operations: exactly the C++ operators on float/double when nothing is
// contracted (-ffp-contract=off) and SSE arithmetic is used (x86-64).
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __frcp_rn(float a) { return 1.0f / a; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline double __fma_rn(double a, double b, double c) { return std::fma(a, b, c); }

// ------------------------------------------------------------------ bit intrinsics
inline unsigned __float_as_uint(float f) {
  return ::fp8emu::from_bits<unsigned>(::fp8emu::to_bits(f));
}
inline int __float_as_int(float f) { return ::fp8emu::from_bits<int>(::fp8emu::to_bits(f)); }
inline float __uint_as_float(unsigned u) { return ::fp8emu::from_bits<float>(u); }
inline float __int_as_float(int i) { return ::fp8emu::from_bits<float>((uint32_t)i); }
inline long long __double_as_longlong(double d) {
  return ::fp8emu::from_bits<long long>(::fp8emu::to_bits(d));
}
inline double __longlong_as_double(long long v) { return ::fp8emu::from_bits<double>((uint64_t)v); }
inline double __hiloint2double(int hi, int lo) {
  return ::fp8emu::from_bits<double>((uint64_t)(uint32_t)hi << 32 | (uint32_t)lo);
}
inline int __double2hiint(double d) { return (int)(::fp8emu::to_bits(d) >> 32); }
inline int __double2loint(double d) { return (int)(uint32_t)::fp8emu::to_bits(d); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline unsigned __brev(unsigned x) {
  x = (x >> 1 & 0x55555555u) | (x & 0x55555555u) << 1;
  x = (x >> 2 & 0x33333333u) | (x & 0x33333333u) << 2;
  x = (x >> 4 & 0x0F0F0F0Fu) | (x & 0x0F0F0F0Fu) << 4;
  x = (x >> 8 & 0x00FF00FFu) | (x & 0x00FF00FFu) << 8;
  return x >> 16 | x << 16;
}

// Cache-hinted loads: plain loads.
template <class T>
inline T __ldg(const T *p) { return *p; }
template <class T>
inline T __ldcs(const T *p) { return *p; }
template <class T>
inline T __ldcg(const T *p) { return *p; }
template <class T>
inline T __ldlu(const T *p) { return *p; }
template <class T>
inline void __stcs(T *p, T v) { *p = v; }

// ------------------------------------------------------------------ atomics (return the old value)
#define FP8EMU_ATOMIC2(name, type, expr)                                                      \
  inline type name(type *p, type v) {                                                         \
    ::fp8emu::preempt_point();                                                                \
    type old = *p;                                                                            \
    *p = (expr);                                                                              \
    return old;                                                                               \
  }
FP8EMU_ATOMIC2(atomicAdd, int, old + v)
FP8EMU_ATOMIC2(atomicAdd, unsigned, old + v)
FP8EMU_ATOMIC2(atomicAdd, unsigned long long, old + v)
FP8EMU_ATOMIC2(atomicAdd, float, old + v)
FP8EMU_ATOMIC2(atomicAdd, double, old + v)
FP8EMU_ATOMIC2(atomicSub, int, old - v)
FP8EMU_ATOMIC2(atomicSub, unsigned, old - v)
FP8EMU_ATOMIC2(atomicMax, int, old > v ? old : v)
FP8EMU_ATOMIC2(atomicMax, unsigned, old > v ? old : v)
FP8EMU_ATOMIC2(atomicMax, long long, old > v ? old : v)
FP8EMU_ATOMIC2(atomicMax, unsigned long long, old > v ? old : v)
FP8EMU_ATOMIC2(atomicMin, int, old < v ? old : v)
FP8EMU_ATOMIC2(atomicMin, unsigned, old < v ? old : v)
FP8EMU_ATOMIC2(atomicMin, long long, old < v ? old : v)
FP8EMU_ATOMIC2(atomicMin, unsigned long long, old < v ? old : v)
FP8EMU_ATOMIC2(atomicAnd, unsigned, old & v)
FP8EMU_ATOMIC2(atomicOr, unsigned, old | v)
FP8EMU_ATOMIC2(atomicXor, unsigned, old ^ v)
FP8EMU_ATOMIC2(atomicExch, unsigned, v)
FP8EMU_ATOMIC2(atomicExch, int, v)
FP8EMU_ATOMIC2(atomicExch, float, v)
#undef FP8EMU_ATOMIC2
inline unsigned atomicCAS(unsigned *p, unsigned cmp, unsigned v) {
  ::fp8emu::preempt_point();
  unsigned old = *p;
  if (old == cmp) *p = v;
  return old;
}
inline unsigned long long atomicCAS(unsigned long long *p, unsigned long long cmp,
                                    unsigned long long v) {
  ::fp8emu::preempt_point();
  unsigned long long old = *p;
  if (old == cmp) *p = v;
  return old;
}

// Device-side math that CUDA provides as plain names (isinf, isnan, isfinite, fmaxf, fabsf, ...)
// comes from <cmath>.
using std::isfinite;
using std::isinf;
using std::isnan;

#endif
