// cuda_emu.cc: the fiber scheduler behind cuda_emu.h (the host CUDA execution emulator).
//
// A block's threads are fibers (one stack each, with a guard page, created once and kept in a
// pool; a switch is a few instructions and no system call, see ctx_switch). The
// scheduler (on the caller's stack) resumes READY fibers in passes, in thread order or, with
// FP8K_EMU_SEED != 0, in a random order per pass; a fiber runs until it waits at a barrier or
// in a warp collective, or leaves the kernel. The last thread to arrive completes the barrier or
// the collective (computing every lane's result) and carries on. Every inconsistency that would
// be undefined behaviour or a hang on the GPU ends the program with a message (fatal()).
// AddressSanitizer: the switches are annotated with __sanitizer_{start,finish}_switch_fiber.
#undef _FORTIFY_SOURCE // __longjmp_chk refuses jumps between stacks
#include "cuda_emu.h"

#include <setjmp.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "mock_cuda.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define FP8EMU_ASAN 1
#else
#define FP8EMU_ASAN 0
#endif

namespace fp8emu {

uint3 g_threadIdx, g_blockIdx;
dim3 g_blockDim, g_gridDim;

namespace {

enum State { READY, AT_BARRIER, AT_WARP, DONE };

const char *const kOpName[OP_COUNT] = {
    "__shfl_sync", "__shfl_up_sync", "__shfl_down_sync", "__shfl_xor_sync",
    "__reduce_add_sync(unsigned)", "__reduce_min_sync(unsigned)", "__reduce_max_sync(unsigned)",
    "__reduce_add_sync(int)", "__reduce_min_sync(int)", "__reduce_max_sync(int)",
    "__reduce_and_sync", "__reduce_or_sync", "__reduce_xor_sync", "__ballot_sync",
    "__syncwarp"};

// Poison returned by a shuffle whose source lane is not in the mask: a quiet NaN as float (low
// half) and as double.
constexpr uint64_t kPoison = 0x7FF8DEAD7FC0DEADull;

#if FP8EMU_ASAN
constexpr size_t kStackSize = 1u << 20; // ASan's redzones make frames much larger
#else
constexpr size_t kStackSize = 256u << 10;
#endif

// AddressSanitizer is told about every switch of stacks (a no-op otherwise).
inline void asan_start(void **fake, const void *bottom, size_t size) {
#if FP8EMU_ASAN
  __sanitizer_start_switch_fiber(fake, bottom, size);
#else
  (void)fake, (void)bottom, (void)size;
#endif
}
inline void asan_finish(void *fake, const void **bottom_old, size_t *size_old) {
#if FP8EMU_ASAN
  __sanitizer_finish_switch_fiber(fake, bottom_old, size_old);
#else
  (void)fake, (void)bottom_old, (void)size_old;
#endif
}

// ------------------------------------------------------------------ context switches
//
// Ctx holds a suspended context. ctx_switch(from, to) saves the running one in `from` and
// resumes `to`; the first switch to a context made by ctx_init runs entry() on its stack.
// x86-64: a 14-instruction stack switch (callee-saved registers, MXCSR and the x87 control word
// pushed on the old stack): no system call, and no longjmp for AddressSanitizer to intercept
// (its longjmp interceptor probes sigaltstack and unpoisons the stack on every call, which made
// ASan runs several times slower). Elsewhere, or with FP8EMU_PORTABLE_SWITCH: _setjmp/_longjmp,
// with makecontext + swapcontext once per fiber to enter its stack.

#if defined(__x86_64__) && !defined(FP8EMU_PORTABLE_SWITCH)
#define FP8EMU_ASM_SWITCH 1
extern "C" void fp8emu_switch_stack(void **save_sp, void *new_sp);
asm(".text\n"
    ".p2align 4\n"
    ".globl fp8emu_switch_stack\n"
    ".hidden fp8emu_switch_stack\n"
    ".type fp8emu_switch_stack, @function\n"
    "fp8emu_switch_stack:\n"
    "  pushq %rbp\n"
    "  pushq %rbx\n"
    "  pushq %r12\n"
    "  pushq %r13\n"
    "  pushq %r14\n"
    "  pushq %r15\n"
    "  subq $16, %rsp\n"
    "  stmxcsr 8(%rsp)\n"
    "  fnstcw (%rsp)\n"
    "  movq %rsp, (%rdi)\n"
    "  movq %rsi, %rsp\n"
    "  ldmxcsr 8(%rsp)\n"
    "  fldcw (%rsp)\n"
    "  addq $16, %rsp\n"
    "  popq %r15\n"
    "  popq %r14\n"
    "  popq %r13\n"
    "  popq %r12\n"
    "  popq %rbx\n"
    "  popq %rbp\n"
    "  ret\n"
    ".size fp8emu_switch_stack, .-fp8emu_switch_stack\n");

struct Ctx {
  void *sp;
};

inline void ctx_switch(Ctx *from, Ctx *to) { fp8emu_switch_stack(&from->sp, to->sp); }

void ctx_init(Ctx *c, char *stack, size_t size, void (*entry)()) {
  // What fp8emu_switch_stack pops, from the new sp upward: x87 control word and MXCSR (the
  // current ones), r15 r14 r13 r12 rbx rbp (zero), the return address entry, and a zero
  // "return address" for entry's frame (the ABI's rsp % 16 == 8 at a function's entry).
  const uintptr_t end = (reinterpret_cast<uintptr_t>(stack) + size) & ~uintptr_t(15);
  uint64_t *top = reinterpret_cast<uint64_t *>(end);
  uint64_t *sp = top - 10;
  unsigned mxcsr;
  unsigned short fcw;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fcw));
  sp[0] = fcw;
  sp[1] = mxcsr;
  for (int i = 2; i < 8; i++) sp[i] = 0;
  sp[8] = reinterpret_cast<uint64_t>(entry);
  sp[9] = 0;
  c->sp = sp;
}
#else
#define FP8EMU_ASM_SWITCH 0
struct Ctx {
  jmp_buf jb;
};

inline void ctx_switch(Ctx *from, Ctx *to) {
  if (!_setjmp(from->jb)) _longjmp(to->jb, 1);
}

Ctx *g_boot_ctx;
void (*g_boot_entry)();
jmp_buf g_boot_jb;

void boot_trampoline() {
  Ctx *c = g_boot_ctx;
  void (*entry)() = g_boot_entry;
  const void *caller_bottom = nullptr;
  size_t caller_size = 0;
  void *fake = nullptr;
  asan_finish(nullptr, &caller_bottom, &caller_size);
  if (!_setjmp(c->jb)) { // back to ctx_init: the context is ready
    asan_start(&fake, caller_bottom, caller_size);
    _longjmp(g_boot_jb, 1);
  }
  entry(); // the first ctx_switch to c
}

void ctx_init(Ctx *c, char *stack, size_t size, void (*entry)()) {
  ucontext_t uc, back;
  getcontext(&uc);
  uc.uc_stack.ss_sp = stack;
  uc.uc_stack.ss_size = size;
  uc.uc_link = nullptr;
  makecontext(&uc, boot_trampoline, 0);
  g_boot_ctx = c;
  g_boot_entry = entry;
  if (!_setjmp(g_boot_jb)) swapcontext(&back, &uc); // `back` is never resumed
}
#endif

struct Fiber {
  Ctx ctx;
  char *stack; // usable part (above the guard page)
  void *asan_fake;
  int index; // linear thread index in the block
  uint3 tid;
  State state;
  // the warp collective this lane waits in
  int op;
  unsigned mask;
  uint64_t value, result;
  int arg, width;
  const char *file;
  int line;
};

struct Scheduler {
  std::vector<Fiber *> pool;
  Ctx main_ctx;
  void *main_fake = nullptr;
  const void *main_bottom = nullptr;
  size_t main_size = 0;
  Fiber *cur = nullptr;
  bool running = false;
  // launch
  const char *kernel = "";
  void (*thunk)(void *) = nullptr;
  void *ctx = nullptr;
  int nthreads = 0;
  // block
  int ndone = 0, bar_arrived = 0;
  const char *bar_file = nullptr;
  int bar_line = 0;
  std::vector<int> order;
  // schedule
  bool seeded = false;
  uint64_t seed = 0, rng = 0;
  uint64_t poison_reads = 0;
};
// Never destroyed: fibers may still be referenced while static destructors run (and LeakSanitizer
// then still sees the pool through this global).
Scheduler &S = *new Scheduler();

uint64_t next_random() {
  uint64_t z = (S.rng += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

bool shuffled() {
  if (!S.seeded) {
    const char *e = getenv("FP8K_EMU_SEED");
    S.seed = e ? strtoull(e, nullptr, 0) : 0;
    S.rng = S.seed;
    S.seeded = true;
    if (S.seed)
      fprintf(stderr, "cuda_emu: shuffled schedule, FP8K_EMU_SEED=%" PRIu64 "\n", S.seed);
  }
  return S.seed != 0;
}

// ------------------------------------------------------------------ fibers

// Scheduler -> fiber f; returns when f waits or leaves the kernel.
void resume(Fiber *f) {
  S.cur = f;
  g_threadIdx = f->tid;
  asan_start(&S.main_fake, f->stack, kStackSize);
  ctx_switch(&S.main_ctx, &f->ctx);
  asan_finish(S.main_fake, nullptr, nullptr);
  S.cur = nullptr;
}

// Fiber -> scheduler; returns when the scheduler resumes this fiber.
void yield() {
  Fiber *f = S.cur;
  asan_start(&f->asan_fake, S.main_bottom, S.main_size);
  ctx_switch(&f->ctx, &S.main_ctx);
  asan_finish(f->asan_fake, &S.main_bottom, &S.main_size);
}

void thread_exit(Fiber *f);

// A fiber's life: entered by the first resume (S.cur is the fiber), then one kernel body per
// block, forever.
[[noreturn]] void fiber_entry() {
  Fiber *f = S.cur;
  asan_finish(nullptr, &S.main_bottom, &S.main_size);
  for (;;) {
    S.thunk(S.ctx);
    thread_exit(f);
    yield(); // resumed again for the next block
  }
}

Fiber *make_fiber() {
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  char *mem = static_cast<char *>(mmap(nullptr, kStackSize + page, PROT_READ | PROT_WRITE,
                                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
  if (mem == MAP_FAILED) {
    fprintf(stderr, "cuda_emu: cannot map a fiber stack\n");
    abort();
  }
  mprotect(mem, page, PROT_NONE); // guard page: a stack overflow faults instead of corrupting
  Fiber *f = new Fiber();
  f->stack = mem + page;
#if FP8EMU_ASM_SWITCH
  ctx_init(&f->ctx, f->stack, kStackSize, fiber_entry);
#else
  void *fake = nullptr;
  asan_start(&fake, f->stack, kStackSize);
  ctx_init(&f->ctx, f->stack, kStackSize, fiber_entry);
  asan_finish(fake, nullptr, nullptr);
#endif
  return f;
}

// ------------------------------------------------------------------ diagnostics

[[noreturn]] void vfatal(const char *fmt, va_list ap) {
  fflush(stdout);
  fprintf(stderr, "cuda_emu: kernel bug: ");
  if (S.running) {
    fprintf(stderr, "%s, block (%u,%u,%u) of (%u,%u,%u)", S.kernel, g_blockIdx.x, g_blockIdx.y,
            g_blockIdx.z, g_gridDim.x, g_gridDim.y, g_gridDim.z);
    if (S.cur)
      fprintf(stderr, ", thread (%u,%u,%u) = warp %d lane %d", S.cur->tid.x, S.cur->tid.y,
              S.cur->tid.z, S.cur->index >> 5, S.cur->index & 31);
    fprintf(stderr, ": ");
  }
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  fflush(stderr);
  abort();
}

// FP8K_EMU_LOG=1: a summary of the launches at exit (what the tests covered).
struct LaunchStats {
  uint64_t launches = 0, blocks = 0, min_grid = UINT64_MAX, max_grid = 0;
  unsigned max_threads = 0;
};
std::map<std::string, LaunchStats> *g_stats;

void print_stats() {
  fprintf(stderr, "cuda_emu: launches (kernel: count, blocks per grid min..max, total blocks, "
                  "threads per block)\n");
  for (const auto &kv : *g_stats)
    fprintf(stderr, "  %s: %" PRIu64 ", %" PRIu64 "..%" PRIu64 ", %" PRIu64 ", %u\n",
            kv.first.c_str(), kv.second.launches, kv.second.min_grid, kv.second.max_grid,
            kv.second.blocks, kv.second.max_threads);
}

void record_launch(const char *kernel, uint64_t nblocks, unsigned nthreads) {
  static const bool on = getenv("FP8K_EMU_LOG") && *getenv("FP8K_EMU_LOG") != '0';
  if (!on) return;
  if (!g_stats) {
    g_stats = new std::map<std::string, LaunchStats>();
    atexit(print_stats);
  }
  LaunchStats &st = (*g_stats)[kernel];
  st.launches++;
  st.blocks += nblocks;
  st.min_grid = nblocks < st.min_grid ? nblocks : st.min_grid;
  st.max_grid = nblocks > st.max_grid ? nblocks : st.max_grid;
  st.max_threads = nthreads > st.max_threads ? nthreads : st.max_threads;
}

void describe_waiters(char *buf, size_t len) {
  size_t k = 0;
  buf[0] = 0;
  if (S.bar_arrived)
    k += (size_t)snprintf(buf + k, len - k, " %d thread(s) at __syncthreads (%s:%d);",
                          S.bar_arrived, S.bar_file, S.bar_line);
  for (int w = 0; w * 32 < S.nthreads && k < len; w++) {
    unsigned waiting = 0;
    const Fiber *any = nullptr;
    for (int l = 0; l < 32 && w * 32 + l < S.nthreads; l++) {
      const Fiber *f = S.pool[w * 32 + l];
      if (f->state == AT_WARP) waiting |= 1u << l, any = f;
    }
    if (waiting && k < len)
      k += (size_t)snprintf(buf + k, len - k,
                            " warp %d: lanes 0x%08x in %s (mask 0x%08x, %s:%d);", w, waiting,
                            kOpName[any->op], any->mask, any->file, any->line);
  }
}

// ------------------------------------------------------------------ barrier

void release_barrier() {
  for (int i = 0; i < S.nthreads; i++)
    if (S.pool[i]->state == AT_BARRIER) S.pool[i]->state = READY;
  S.bar_arrived = 0;
  S.bar_file = nullptr;
}

// ------------------------------------------------------------------ warp collectives

int lanes_in_warp(int w) { return S.nthreads - w * 32 < 32 ? S.nthreads - w * 32 : 32; }

uint64_t lane_result(const Fiber *const *lanes, unsigned mask, int l) {
  const Fiber *f = lanes[l];
  const int op = f->op;
  if (op <= OP_SHFL_XOR) {
    const int w = f->width, seg = l & ~(w - 1), pos = l & (w - 1);
    int src;
    bool valid = true;
    switch (op) {
    case OP_SHFL_IDX: src = seg + (f->arg & (w - 1)); break;
    case OP_SHFL_UP: src = l - f->arg, valid = pos >= f->arg; break;
    case OP_SHFL_DOWN: src = l + f->arg, valid = pos + f->arg < w; break;
    default: src = l ^ f->arg, valid = src <= seg + w - 1; break; // PTX shfl.bfly: j <= maxLane
    }
    if (!valid || src < 0 || src > 31) return f->value; // outside the segment: own value
    if (!(mask >> src & 1u)) {
      S.poison_reads++;
      return kPoison;
    }
    return lanes[src]->value;
  }
  uint64_t r = 0;
  bool first = true;
  for (int s = 0; s < 32; s++) {
    if (!(mask >> s & 1u)) continue;
    const uint32_t u = (uint32_t)lanes[s]->value;
    const int32_t i = (int32_t)u, ri = (int32_t)(uint32_t)r;
    switch (op) {
    case OP_REDUCE_ADD_U:
    case OP_REDUCE_ADD_I: r = (uint32_t)((uint32_t)r + u); break;
    case OP_REDUCE_MIN_U: r = first || u < (uint32_t)r ? u : r; break;
    case OP_REDUCE_MAX_U: r = first || u > (uint32_t)r ? u : r; break;
    case OP_REDUCE_MIN_I: r = first || i < ri ? u : r; break;
    case OP_REDUCE_MAX_I: r = first || i > ri ? u : r; break;
    case OP_REDUCE_AND: r = first ? u : (uint32_t)r & u; break;
    case OP_REDUCE_OR: r = (uint32_t)r | u; break;
    case OP_REDUCE_XOR: r = (uint32_t)r ^ u; break;
    case OP_BALLOT: r |= (uint64_t)(u != 0) << s; break;
    default: break; // OP_SYNCWARP
    }
    first = false;
  }
  return r;
}

void thread_exit(Fiber *f) {
  const int w = f->index >> 5, lane = f->index & 31;
  for (int l = 0; l < lanes_in_warp(w); l++) {
    const Fiber *g = S.pool[w * 32 + l];
    if (g->state == AT_WARP && (g->mask >> lane & 1u))
      fatal("lane %d of the mask 0x%08x has left the kernel while lane %d waits in %s (%s:%d)",
            lane, g->mask, l, kOpName[g->op], g->file, g->line);
  }
  f->state = DONE;
  S.ndone++;
  if (S.bar_arrived && S.bar_arrived + S.ndone == S.nthreads) release_barrier();
}

void run_block() {
  const int n = S.nthreads;
  for (int i = 0; i < n; i++) S.pool[i]->state = READY;
  S.ndone = 0;
  S.bar_arrived = 0;
  S.bar_file = nullptr;
  const bool shuf = shuffled();
  while (S.ndone < n) {
    if (shuf)
      for (int i = n - 1; i > 0; i--)
        std::swap(S.order[i], S.order[next_random() % (uint64_t)(i + 1)]);
    bool ran = false;
    for (int k = 0; k < n; k++) {
      Fiber *f = S.pool[S.order[k]];
      if (f->state == READY) {
        resume(f);
        ran = true;
      }
    }
    if (!ran) {
      char why[2048];
      describe_waiters(why, sizeof why);
      fatal("deadlock: no thread can run;%s", why);
    }
  }
}

} // namespace

// ------------------------------------------------------------------ interface of cuda_emu.h

void fatal(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfatal(fmt, ap);
}

void syncthreads(const char *file, int line) {
  Fiber *f = S.cur;
  if (!f) fatal("__syncthreads() outside a kernel (%s:%d)", file, line);
  if (S.bar_arrived == 0) {
    S.bar_file = file;
    S.bar_line = line;
  } else if (S.bar_line != line || strcmp(S.bar_file, file) != 0) {
    fatal("threads wait at different __syncthreads(): %s:%d and %s:%d (a barrier in divergent "
          "code)", S.bar_file, S.bar_line, file, line);
  }
  S.bar_arrived++;
  if (S.bar_arrived + S.ndone == S.nthreads) {
    release_barrier();
    if (shuffled()) {
      f->state = READY;
      yield();
    }
    return;
  }
  f->state = AT_BARRIER;
  yield();
}

uint64_t warp_collective(int op, unsigned mask, uint64_t value, int arg, int width,
                         const char *file, int line) {
  Fiber *f = S.cur;
  if (!f) fatal("%s outside a kernel (%s:%d)", kOpName[op], file, line);
  const int w = f->index >> 5, lane = f->index & 31, nl = lanes_in_warp(w);
  if (!(mask >> lane & 1u))
    fatal("%s at %s:%d: the calling lane %d is not in the mask 0x%08x", kOpName[op], file, line,
          lane, mask);
  if (op <= OP_SHFL_XOR && (width < 1 || width > 32 || (width & (width - 1))))
    fatal("%s at %s:%d: width %d is not a power of two in [1, 32]", kOpName[op], file, line,
          width);
  Fiber *lanes[32] = {};
  for (int l = 0; l < nl; l++) lanes[l] = S.pool[w * 32 + l];
  if (nl < 32 && (mask >> nl))
    fatal("%s at %s:%d: mask 0x%08x names lanes that do not exist (warp %d has %d threads)",
          kOpName[op], file, line, mask, w, nl);
  int arrived = 1;
  for (int l = 0; l < nl; l++) {
    const Fiber *g = lanes[l];
    if (l == lane) continue;
    if ((mask >> l & 1u) && g->state == DONE)
      fatal("%s at %s:%d: lane %d of the mask 0x%08x has left the kernel", kOpName[op], file,
            line, l, mask);
    if (g->state != AT_WARP) continue;
    const bool overlap = (g->mask >> lane & 1u) || (mask >> l & 1u);
    if (overlap && (g->mask != mask || g->op != op))
      fatal("lanes disagree: lane %d calls %s with mask 0x%08x (%s:%d) while lane %d waits in %s "
            "with mask 0x%08x (%s:%d)", lane, kOpName[op], mask, file, line, l, kOpName[g->op],
            g->mask, g->file, g->line);
    if (overlap) arrived++;
  }
  f->op = op;
  f->mask = mask;
  f->value = value;
  f->arg = arg;
  f->width = width;
  f->file = file;
  f->line = line;
  if (arrived < __builtin_popcount(mask)) {
    f->state = AT_WARP;
    yield();
    return f->result;
  }
  // Last to arrive: every lane's result, then the waiting lanes may run again.
  uint64_t res[32];
  for (int l = 0; l < nl; l++)
    if (mask >> l & 1u) res[l] = lane_result(lanes, mask, l);
  for (int l = 0; l < nl; l++)
    if (mask >> l & 1u) {
      lanes[l]->result = res[l];
      lanes[l]->state = READY;
    }
  if (shuffled()) yield(); // state READY: the others may go first
  return f->result;
}

void set_seed(uint64_t seed) {
  S.seed = S.rng = seed;
  S.seeded = true;
}

void preempt_point() {
  if (!S.cur || !shuffled()) return;
  if ((next_random() & 7) == 0) yield(); // state stays READY
}

void check_pointer_arg(const void *p, int index, const char *kernel) {
  if (p && !mock_cuda_is_device_ptr(p)) {
    fprintf(stderr,
            "cuda_emu: launch of %s: argument %d (%p) does not point into device memory "
            "(cudaMalloc); a kernel cannot read host memory\n",
            kernel, index, p);
    abort();
  }
}

void run_grid(dim3 grid, dim3 block, size_t smem, cudaStream_t stream, void (*thunk)(void *),
              void *ctx, const char *kernel) {
  if (S.running) {
    fprintf(stderr, "cuda_emu: %s launched from inside %s (dynamic parallelism is not emulated)\n",
            kernel, S.kernel);
    abort();
  }
  const uint64_t nthreads = (uint64_t)block.x * block.y * block.z;
  if (grid.x < 1 || grid.y < 1 || grid.z < 1 || grid.x > 0x7FFFFFFFu || grid.y > 65535 ||
      grid.z > 65535 || block.x < 1 || block.y < 1 || block.z < 1 || block.x > 1024 ||
      block.y > 1024 || block.z > 64 || nthreads > 1024 || smem > 48 * 1024) {
    mock_cuda_set_last_error(cudaErrorInvalidConfiguration);
    return;
  }
  if (!mock_cuda_stream_valid(stream)) {
    mock_cuda_set_last_error(cudaErrorInvalidResourceHandle);
    return;
  }
  // work on its stream in the stream-ordering log (mock_cuda.h, read by tests/gpu/hb_check.h)
  mock_cuda_log_op(MOCK_OP_WORK, stream, nullptr, kernel && *kernel ? kernel : "kernel");
  const bool shuf = shuffled();
  while (S.pool.size() < nthreads) S.pool.push_back(make_fiber());
  S.nthreads = (int)nthreads;
  S.order.resize(nthreads);
  std::iota(S.order.begin(), S.order.end(), 0);
  for (int i = 0; i < S.nthreads; i++) {
    Fiber *f = S.pool[i];
    f->index = i;
    f->tid = make_uint3(i % block.x, i / block.x % block.y, i / (block.x * block.y));
  }
  S.kernel = kernel;
  S.thunk = thunk;
  S.ctx = ctx;
  S.poison_reads = 0;
  S.running = true;
  g_gridDim = grid;
  g_blockDim = block;
  const uint64_t nblocks = (uint64_t)grid.x * grid.y * grid.z;
  record_launch(kernel, nblocks, (unsigned)nthreads);
  // Shuffled: blocks in the order a*i + c (mod nblocks), a coprime to nblocks.
  uint64_t a = 1, c = 0;
  if (shuf && nblocks > 1) {
    do a = 1 + next_random() % (nblocks - 1);
    while (std::gcd(a, nblocks) != 1);
    c = next_random() % nblocks;
  }
  for (uint64_t i = 0; i < nblocks; i++) {
    const uint64_t b = (uint64_t)(((unsigned __int128)a * i + c) % nblocks);
    g_blockIdx = make_uint3((unsigned)(b % grid.x), (unsigned)(b / grid.x % grid.y),
                            (unsigned)(b / ((uint64_t)grid.x * grid.y)));
    run_block();
  }
  S.running = false;
  if (S.poison_reads)
    fprintf(stderr,
            "cuda_emu: warning: %s: %" PRIu64 " shuffle(s) read a lane outside the mask "
            "(undefined value on the GPU; NaN-poisoned here)\n",
            kernel, S.poison_reads);
}

} // namespace fp8emu
