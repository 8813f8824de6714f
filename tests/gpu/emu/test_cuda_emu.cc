// test_cuda_emu.cc: the CUDA execution emulator (cuda_emu.h) against CUDA's documented
// semantics, so that test_gpu_quant_emu's verdicts on the real kernels can be trusted:
//  - built-ins of 3-D grids and blocks, every thread exactly once;
//  - shuffles (idx, up, down, xor; widths 32, 8, 4; int, float, double) against the formulas of
//    the CUDA C++ Programming Guide; reductions (signed and unsigned), ballot, any/all, on full
//    and partial masks; collectives inside `if (warp == 0)` and partial warps; quant.cu's
//    patterns: two sums in one butterfly (one per half-warp), a reduction only in the warps
//    whose previous reduction says so;
//  - __syncthreads with exited threads, atomics returning the old value, launch errors;
//  - kernel bugs end the program with a message (each in a forked child): a lane of the mask has
//    exited, lanes disagree on the mask, a divergent barrier, a deadlock, a caller outside its
//    mask, a host pointer as a kernel argument;
//  - a kernel with a missing barrier gives the round-robin result with seed 0 and another one
//    under some shuffled seed;
//  - the mock runtime (mock_cuda.c) refuses copies past an allocation, swapped directions, host
//    pointers as device memory, bad frees and dead streams;
//  - a launch is logged as work on its stream (the stream-ordering log, mock_cuda.h).
// Label cpu (tests/gpu/gpu_harness.h).
#include "cuda_emu.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "fp8k_launch.cuh"
#include "gpu_harness.h"
#include "mock_cuda.h"

namespace {

template <class T>
T *dev_alloc(size_t n) {
  void *p = nullptr;
  if (cudaMalloc(&p, n * sizeof(T)) != cudaSuccess) abort();
  cudaMemset(p, 0, n * sizeof(T));
  return static_cast<T *>(p);
}
template <class T>
std::vector<T> to_host(const T *d, size_t n) {
  std::vector<T> h(n);
  cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost);
  return h;
}

// ------------------------------------------------------------------ kernels

__global__ void ids_kernel(unsigned *count, unsigned *seen_dims) {
  const unsigned tpb = blockDim.x * blockDim.y * blockDim.z;
  const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  atomicAdd(&count[b * tpb + t], 1u);
  if (b == 0 && t == 0) {
    seen_dims[0] = blockDim.x, seen_dims[1] = blockDim.y, seen_dims[2] = blockDim.z;
    seen_dims[3] = gridDim.x, seen_dims[4] = gridDim.y, seen_dims[5] = gridDim.z;
  }
}

// out[k][tid]: 12 shuffle results per thread.
__global__ void shfl_kernel(int *out, double *dout, float *fout) {
  const int lane = threadIdx.x & 31, n = blockDim.x;
  const int v = 1000 * (int)(threadIdx.x >> 5) + 10 * lane + 1;
  int k = 0;
  out[n * k++ + threadIdx.x] = __shfl_sync(0xFFFFFFFFu, v, (lane * 7 + 3) & 31);
  out[n * k++ + threadIdx.x] = __shfl_sync(0xFFFFFFFFu, v, lane + 5, 8);
  out[n * k++ + threadIdx.x] = __shfl_up_sync(0xFFFFFFFFu, v, 3);
  out[n * k++ + threadIdx.x] = __shfl_up_sync(0xFFFFFFFFu, v, 3, 8);
  out[n * k++ + threadIdx.x] = __shfl_down_sync(0xFFFFFFFFu, v, 5);
  out[n * k++ + threadIdx.x] = __shfl_down_sync(0xFFFFFFFFu, v, 1, 4);
  out[n * k++ + threadIdx.x] = __shfl_xor_sync(0xFFFFFFFFu, v, 13);
  out[n * k++ + threadIdx.x] = __shfl_xor_sync(0xFFFFFFFFu, v, 2, 4);
  out[n * k++ + threadIdx.x] = __shfl_xor_sync(0xFFFFFFFFu, v, 8, 4); // a later group: own value
  out[n * k++ + threadIdx.x] = (int)__shfl_down_sync(0xFFFFFFFFu, (unsigned)v, 16);
  // 64-bit and float payloads keep every bit
  dout[threadIdx.x] = __shfl_xor_sync(0xFFFFFFFFu, 1.0 + v * 0x1p-40, 1);
  fout[threadIdx.x] = __shfl_sync(0xFFFFFFFFu, -0.5f * (float)v, 31 - lane);
}

constexpr int kShflCases = 10;

// Expected value of case k for thread t (CUDA C++ Programming Guide, warp shuffle functions).
int shfl_expected(int k, int t) {
  const int lane = t & 31, warp = t >> 5;
  auto val = [&](int l) { return 1000 * warp + 10 * l + 1; };
  auto idx = [&](int src, int w) { return val((lane & ~(w - 1)) + (src & (w - 1))); };
  auto up = [&](int d, int w) { return (lane & (w - 1)) >= d ? val(lane - d) : val(lane); };
  auto down = [&](int d, int w) { return (lane & (w - 1)) + d < w ? val(lane + d) : val(lane); };
  auto bfly = [&](int m, int w) {
    const int src = lane ^ m;
    return src < (lane & ~(w - 1)) + w ? val(src) : val(lane); // later groups: own value
  };
  switch (k) {
  case 0: return idx((lane * 7 + 3) & 31, 32);
  case 1: return idx(lane + 5, 8);
  case 2: return up(3, 32);
  case 3: return up(3, 8);
  case 4: return down(5, 32);
  case 5: return down(1, 4);
  case 6: return bfly(13, 32);
  case 7: return bfly(2, 4);
  case 8: return bfly(8, 4);
  default: return down(16, 32);
  }
}

// Reductions and votes; the upper half-warp of warp 1 also runs them on its own mask.
__global__ void reduce_kernel(unsigned *out) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const unsigned u = (unsigned)(lane * lane * 2654435761u) >> 7;
  const int s = (lane % 3 == 0 ? -1 : 1) * (lane * 37 + warp);
  unsigned *o = out + 16 * threadIdx.x;
  o[0] = __reduce_add_sync(0xFFFFFFFFu, u);
  o[1] = __reduce_max_sync(0xFFFFFFFFu, u);
  o[2] = __reduce_min_sync(0xFFFFFFFFu, u);
  o[3] = (unsigned)__reduce_add_sync(0xFFFFFFFFu, s);
  o[4] = (unsigned)__reduce_max_sync(0xFFFFFFFFu, s);
  o[5] = (unsigned)__reduce_min_sync(0xFFFFFFFFu, s);
  o[6] = __reduce_and_sync(0xFFFFFFFFu, u | 0x80000001u);
  o[7] = __reduce_or_sync(0xFFFFFFFFu, 1u << lane);
  o[8] = __reduce_xor_sync(0xFFFFFFFFu, u);
  o[9] = __ballot_sync(0xFFFFFFFFu, lane % 5 == 1);
  o[10] = (unsigned)__any_sync(0xFFFFFFFFu, lane == 17);
  o[11] = (unsigned)__all_sync(0xFFFFFFFFu, lane < 31);
  if (warp == 1 && lane >= 16) { // a partial mask: only these 16 lanes
    o[12] = __reduce_add_sync(0xFFFF0000u, u);
    o[13] = __ballot_sync(0xFFFF0000u, lane & 1);
    __syncwarp(0xFFFF0000u);
  }
}

// kernels/quant.cu's warp patterns: two double sums in one butterfly (after the exchange at 16,
// lanes 0-15 carry a, lanes 16-31 carry b: lane 0 ends with sum a, lane 16 with sum b), and a
// second reduction only in a warp whose first one is non-zero (the same value in every lane, so
// the branch is warp-uniform).
__global__ void split_kernel(const double *a, const double *b, const unsigned *flag, double *sums,
                             unsigned *second) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  double keep = (lane & 16) ? b[threadIdx.x] : a[threadIdx.x];
  double give = (lane & 16) ? a[threadIdx.x] : b[threadIdx.x];
  keep += __shfl_xor_sync(0xFFFFFFFFu, give, 16);
  for (int o = 8; o >= 1; o >>= 1) keep += __shfl_xor_sync(0xFFFFFFFFu, keep, o);
  if (lane == 0) sums[2 * warp] = keep;
  else if (lane == 16) sums[2 * warp + 1] = keep;
  unsigned tot = __reduce_add_sync(0xFFFFFFFFu, flag[threadIdx.x]);
  unsigned r = tot ? __reduce_add_sync(0xFFFFFFFFu, threadIdx.x) : 0u;
  if (lane == 0) second[warp] = r;
}

// The gemm_lt amax pattern: every warp reduces, then only warp 0 reduces the warp results;
// threads >= active exit at once (a partial last warp when active % 32 != 0 is not allowed
// with a full mask, so `active` is a multiple of 32).
__global__ void warp0_kernel(const float *x, int active, float *out) {
  if ((int)threadIdx.x >= active) return;
  float m = x[threadIdx.x];
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
  __shared__ float wmax[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) wmax[warp] = m;
  __syncthreads(); // threads that left count as arrived (sm_70+)
  if (warp == 0) {
    m = lane < active / 32 ? wmax[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
    if (lane == 0) *out = m;
  }
}

// Atomics return the old value: every thread gets a distinct ticket.
__global__ void ticket_kernel(unsigned *tickets, unsigned long long *sum, double *dsum) {
  __shared__ unsigned next;
  if (threadIdx.x == 0) next = 0;
  __syncthreads();
  const unsigned t = atomicAdd(&next, 1u);
  tickets[blockIdx.x * blockDim.x + threadIdx.x] = t;
  atomicAdd(sum, (unsigned long long)t);
  atomicAdd(dsum, 0.5);
  atomicMax(reinterpret_cast<unsigned *>(sum) + 1, t); // high word of *sum: stays 0 + max
}

// Missing barrier: thread 0 publishes a flag the others read without waiting.
__global__ void race_kernel(int *out) {
  __shared__ int flag;
  if (threadIdx.x == 0) flag = 0;
  __syncthreads();
  if (threadIdx.x == 0) flag = 1;
  out[threadIdx.x] = flag; // should be after a __syncthreads()
}

// Bugs the emulator must refuse (each run in a child process).
__global__ void bug_exited_lane(int *out) {
  if ((threadIdx.x & 31) >= 16) return;
  out[threadIdx.x] = __shfl_xor_sync(0xFFFFFFFFu, (int)threadIdx.x, 1);
}
__global__ void bug_mask_disagree(int *out) {
  const unsigned mask = (threadIdx.x & 31) < 16 ? 0xFFFFFFFFu : 0xFFFF0000u;
  out[threadIdx.x] = __shfl_xor_sync(mask, (int)threadIdx.x, 1);
}
__global__ void bug_divergent_barrier(int *out) {
  if (threadIdx.x < 32) {
    __syncthreads();
    out[threadIdx.x] = 1;
  } else {
    __syncthreads();
    out[threadIdx.x] = 2;
  }
}
__global__ void bug_deadlock(int *out) {
  if (threadIdx.x == 0) __syncthreads();
  else out[threadIdx.x] = __shfl_xor_sync(0xFFFFFFFFu, (int)threadIdx.x, 1);
}
__global__ void bug_not_in_mask(int *out) {
  out[threadIdx.x] = __shfl_sync(0x1u, (int)threadIdx.x, 0);
}

// ------------------------------------------------------------------ tests

void test_ids() {
  const dim3 grid(3, 2, 2), block(5, 4, 3);
  const size_t n = 12 * 60;
  unsigned *count = dev_alloc<unsigned>(n), *dims = dev_alloc<unsigned>(6);
  FP8K_LAUNCH(grid, block, 0, 0, ids_kernel)(count, dims);
  GH_CHECK(cudaGetLastError() == cudaSuccess, "launch failed");
  auto c = to_host(count, n);
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) bad += c[i] != 1;
  GH_CHECK(bad == 0, "%zu of %zu threads did not run exactly once", bad, n);
  auto d = to_host(dims, 6);
  GH_CHECK(d[0] == 5 && d[1] == 4 && d[2] == 3 && d[3] == 3 && d[4] == 2 && d[5] == 2,
           "blockDim (%u,%u,%u) gridDim (%u,%u,%u), expected (5,4,3) (3,2,2)", d[0], d[1], d[2],
           d[3], d[4], d[5]);
  cudaFree(count);
  cudaFree(dims);
}

void test_shuffles() {
  const int n = 64;
  int *out = dev_alloc<int>(kShflCases * n);
  double *dout = dev_alloc<double>(n);
  float *fout = dev_alloc<float>(n);
  FP8K_LAUNCH(2, n, 0, 0, shfl_kernel)(out, dout, fout);
  auto o = to_host(out, kShflCases * n);
  auto dd = to_host(dout, n);
  auto ff = to_host(fout, n);
  for (int k = 0; k < kShflCases; k++)
    for (int t = 0; t < n; t++)
      GH_CHECK(o[k * n + t] == shfl_expected(k, t), "shuffle case %d thread %d: %d, expected %d",
               k, t, o[k * n + t], shfl_expected(k, t));
  for (int t = 0; t < n; t++) {
    const int src = t ^ 1, vs = 1000 * (src >> 5) + 10 * (src & 31) + 1;
    GH_CHECK(dd[t] == 1.0 + vs * 0x1p-40, "double shuffle thread %d: %.17g", t, dd[t]);
    const int sf = (t & ~31) + (31 - (t & 31)), vf = 1000 * (sf >> 5) + 10 * (sf & 31) + 1;
    GH_CHECK(ff[t] == -0.5f * (float)vf, "float shuffle thread %d: %g", t, (double)ff[t]);
  }
  cudaFree(out);
  cudaFree(dout);
  cudaFree(fout);
}

void test_reductions() {
  const int n = 64;
  unsigned *out = dev_alloc<unsigned>(16 * n);
  FP8K_LAUNCH(1, n, 0, 0, reduce_kernel)(out);
  auto o = to_host(out, 16 * n);
  for (int t = 0; t < n; t++) {
    const int warp = t >> 5;
    unsigned add = 0, mx = 0, mn = ~0u, an = ~0u, xr = 0, ballot = 0, add_hi = 0, ballot_hi = 0;
    int sadd = 0, smax = INT32_MIN, smin = INT32_MAX;
    for (int l = 0; l < 32; l++) {
      const unsigned u = (unsigned)(l * l * 2654435761u) >> 7;
      const int s = (l % 3 == 0 ? -1 : 1) * (l * 37 + warp);
      add += u, mx = u > mx ? u : mx, mn = u < mn ? u : mn, an &= u | 0x80000001u, xr ^= u;
      sadd += s, smax = s > smax ? s : smax, smin = s < smin ? s : smin;
      if (l % 5 == 1) ballot |= 1u << l;
      if (l >= 16) add_hi += u, ballot_hi |= (unsigned)(l & 1) << l;
    }
    const unsigned *r = &o[16 * t];
    const unsigned want[12] = {add, mx, mn, (unsigned)sadd, (unsigned)smax, (unsigned)smin,
                               an, 0xFFFFFFFFu, xr, ballot, 1u, 0u};
    for (int k = 0; k < 12; k++)
      GH_CHECK(r[k] == want[k], "reduction %d thread %d: 0x%08x, expected 0x%08x", k, t, r[k],
               want[k]);
    if (warp == 1 && (t & 31) >= 16) {
      GH_CHECK(r[12] == add_hi, "partial-mask add thread %d: %u, expected %u", t, r[12], add_hi);
      GH_CHECK(r[13] == ballot_hi, "partial-mask ballot thread %d: 0x%08x, expected 0x%08x", t,
               r[13], ballot_hi);
    }
  }
  cudaFree(out);
}

void test_split_butterfly() {
  const int n = 128, nw = n / 32;
  std::vector<double> ha(n), hb(n);
  std::vector<unsigned> hf(n, 0u);
  for (int i = 0; i < n; i++) ha[i] = i + 1, hb[i] = 1000.0 * (i * 7 % 13) + 0.5;
  hf[37] = 1, hf[100] = 3; // warps 1 and 3 take the second reduction, 0 and 2 do not
  double *a = dev_alloc<double>(n), *b = dev_alloc<double>(n), *sums = dev_alloc<double>(2 * nw);
  unsigned *flag = dev_alloc<unsigned>(n), *second = dev_alloc<unsigned>(nw);
  cudaMemcpy(a, ha.data(), n * sizeof(double), cudaMemcpyHostToDevice);
  cudaMemcpy(b, hb.data(), n * sizeof(double), cudaMemcpyHostToDevice);
  cudaMemcpy(flag, hf.data(), n * sizeof(unsigned), cudaMemcpyHostToDevice);
  FP8K_LAUNCH(1, n, 0, 0, split_kernel)(a, b, flag, sums, second);
  auto s = to_host(sums, 2 * nw);
  auto r = to_host(second, nw);
  for (int w = 0; w < nw; w++) {
    double wa = 0, wb = 0; // integers and halves: exact in any order
    unsigned wt = 0, wf = 0;
    for (int i = 32 * w; i < 32 * w + 32; i++) wa += ha[i], wb += hb[i], wt += i, wf += hf[i];
    GH_CHECK(s[2 * w] == wa && s[2 * w + 1] == wb,
             "warp %d: butterfly sums %g, %g, expected %g, %g", w, s[2 * w], s[2 * w + 1], wa, wb);
    GH_CHECK(r[w] == (wf ? wt : 0u), "warp %d: second reduction %u, expected %u", w, r[w],
             wf ? wt : 0u);
  }
  cudaFree(a);
  cudaFree(b);
  cudaFree(sums);
  cudaFree(flag);
  cudaFree(second);
}

void test_warp0_and_exits() {
  const int n = 256;
  std::vector<float> h(n);
  for (int i = 0; i < n; i++) h[i] = (float)((i * 97) % 251);
  float *x = dev_alloc<float>(n), *out = dev_alloc<float>(1);
  cudaMemcpy(x, h.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  for (int active : {256, 160, 32}) {
    float want = 0.0f;
    for (int i = 0; i < active; i++) want = h[i] > want ? h[i] : want;
    FP8K_LAUNCH(1, n, 0, 0, warp0_kernel)(x, active, out);
    GH_CHECK(to_host(out, 1)[0] == want, "warp-0 max with %d active threads: %g, expected %g",
             active, (double)to_host(out, 1)[0], (double)want);
  }
  cudaFree(x);
  cudaFree(out);
}

void test_atomics_and_errors() {
  const int nb = 3, nt = 96;
  unsigned *tickets = dev_alloc<unsigned>(nb * nt);
  unsigned long long *sum = dev_alloc<unsigned long long>(1);
  double *dsum = dev_alloc<double>(1);
  FP8K_LAUNCH(nb, nt, 0, 0, ticket_kernel)(tickets, sum, dsum);
  auto t = to_host(tickets, nb * nt);
  for (int b = 0; b < nb; b++) {
    std::vector<int> seen(nt, 0);
    for (int i = 0; i < nt; i++)
      if (t[b * nt + i] < (unsigned)nt) seen[t[b * nt + i]]++;
    int bad = 0;
    for (int i = 0; i < nt; i++) bad += seen[i] != 1;
    GH_CHECK(bad == 0, "block %d: %d tickets not handed out exactly once", b, bad);
  }
  const unsigned long long s = to_host(sum, 1)[0];
  GH_CHECK((s & 0xFFFFFFFFull) == (unsigned long long)nb * nt * (nt - 1) / 2 &&
               (s >> 32) == (unsigned)nt - 1,
           "ticket sum 0x%016llx", s);
  GH_CHECK(to_host(dsum, 1)[0] == 0.5 * nb * nt, "double atomicAdd: %g", to_host(dsum, 1)[0]);
  // a bad configuration is reported by cudaGetLastError (once) and runs nothing
  FP8K_LAUNCH(1, 2048, 0, 0, ticket_kernel)(tickets, sum, dsum);
  GH_CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration, "block of 2048 threads accepted");
  GH_CHECK(cudaGetLastError() == cudaSuccess, "launch error not cleared");
  FP8K_LAUNCH(dim3(1, 70000), 32, 0, 0, ticket_kernel)(tickets, sum, dsum);
  GH_CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration, "gridDim.y 70000 accepted");
  GH_CHECK(to_host(sum, 1)[0] == s, "a refused launch ran");
  cudaFree(tickets);
  cudaFree(sum);
  cudaFree(dsum);
}

// Runs fn in a child; expects an abort with `msg` in its stderr.
template <class F>
void expect_abort(const char *what, const char *msg, F fn) {
  int fds[2];
  if (pipe(fds) != 0) abort();
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 2);
    close(fds[0]);
    fn();
    _exit(0);
  }
  close(fds[1]);
  std::string err;
  char buf[512];
  ssize_t r;
  while ((r = read(fds[0], buf, sizeof buf)) > 0) err.append(buf, (size_t)r);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  const bool aborted = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
  GH_CHECK(aborted && err.find(msg) != std::string::npos,
           "%s: expected an abort with \"%s\"; got %s, stderr: %s", what, msg,
           aborted ? "an abort" : "no abort", err.c_str());
}

void test_bugs_abort() {
  int *out = dev_alloc<int>(64);
  expect_abort("exited lane in the mask", "has left the kernel",
               [&] { FP8K_LAUNCH(1, 32, 0, 0, bug_exited_lane)(out); });
  expect_abort("lanes disagree on the mask", "lanes disagree",
               [&] { FP8K_LAUNCH(1, 32, 0, 0, bug_mask_disagree)(out); });
  expect_abort("divergent barrier", "different __syncthreads",
               [&] { FP8K_LAUNCH(1, 64, 0, 0, bug_divergent_barrier)(out); });
  expect_abort("deadlock", "deadlock", [&] { FP8K_LAUNCH(1, 32, 0, 0, bug_deadlock)(out); });
  expect_abort("caller outside its mask", "is not in the mask",
               [&] { FP8K_LAUNCH(1, 32, 0, 0, bug_not_in_mask)(out); });
  int host[64];
  expect_abort("host pointer argument", "does not point into device memory",
               [&] { FP8K_LAUNCH(1, 64, 0, 0, race_kernel)(host); });
  cudaFree(out);
}

void test_shuffled_schedule() {
  int *out = dev_alloc<int>(64);
  auto run = [&](uint64_t seed) {
    fp8emu::set_seed(seed);
    FP8K_LAUNCH(1, 64, 0, 0, race_kernel)(out);
    int ones = 0;
    for (int v : to_host(out, 64)) ones += v;
    return ones;
  };
  // Round robin: the last thread to reach the barrier (63) goes on first and reads 0, then
  // threads 0, 1, ... run in order: thread 0 writes the flag before the others read it.
  const int rr = run(0);
  GH_CHECK(rr == 63, "round robin: %d threads saw the flag, expected all but thread 63", rr);
  int differ = 0;
  for (uint64_t seed = 1; seed <= 8; seed++) differ += run(seed) != rr;
  GH_CHECK(differ > 0, "no shuffled seed of 8 changed the result of a racy kernel");
  fp8emu::set_seed(0);
  cudaFree(out);
}

// The mock runtime (tests/gpu/mock_cuda.c) refuses what the CUDA runtime would (or what would
// silently work only because device memory is host memory here).
void test_mock_runtime() {
  printf("(the mock_cuda lines on stderr below are expected: refused calls)\n");
  fflush(stdout);
  char host[64] = {0};
  char *d = nullptr;
  GH_CHECK(cudaMalloc(reinterpret_cast<void **>(&d), 48) == cudaSuccess, "cudaMalloc");
  GH_CHECK(((uintptr_t)d & 255) == 0, "cudaMalloc pointer %p not 256-byte aligned", (void *)d);
  GH_CHECK(cudaMemcpy(d, host, 48, cudaMemcpyHostToDevice) == cudaSuccess, "a valid copy failed");
  GH_CHECK(cudaMemcpy(d + 16, host, 32, cudaMemcpyHostToDevice) == cudaSuccess,
           "a copy ending at the allocation's end failed");
  GH_CHECK(cudaMemcpy(d + 16, host, 33, cudaMemcpyHostToDevice) == cudaErrorInvalidValue,
           "a copy past the end of the allocation was accepted");
  GH_CHECK(cudaMemcpy(host, d, 8, cudaMemcpyHostToDevice) == cudaErrorInvalidValue,
           "host memory accepted as the device side of HostToDevice");
  GH_CHECK(cudaMemcpy(d, host, 8, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue,
           "DeviceToHost with the directions swapped was accepted");
  GH_CHECK(cudaMemset(host, 0, 8) == cudaErrorInvalidValue, "cudaMemset of host memory accepted");
  GH_CHECK(cudaFree(host) == cudaErrorInvalidValue, "cudaFree of a host pointer accepted");
  GH_CHECK(cudaFree(d + 1) == cudaErrorInvalidValue, "cudaFree of an interior pointer accepted");
  cudaStream_t st;
  GH_CHECK(cudaStreamCreate(&st) == cudaSuccess && mock_cuda_stream_valid(st), "stream");
  GH_CHECK(cudaStreamDestroy(st) == cudaSuccess, "cudaStreamDestroy");
  GH_CHECK(cudaMemsetAsync(d, 0, 8, st) == cudaErrorInvalidResourceHandle,
           "a destroyed stream was accepted");
  int sms = 0;
  GH_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) == cudaSuccess &&
               sms == MOCK_CUDA_SM_COUNT,
           "SM count %d", sms);
  GH_CHECK(cudaFree(d) == cudaSuccess && !mock_cuda_is_device_ptr(d), "cudaFree");
  GH_CHECK(cudaGetLastError() == cudaSuccess, "a runtime call left a launch error behind");
}

// A launch is logged as work on its stream, named as written at the launch (the stream-ordering
// log of mock_cuda.h, which tests/gpu/hb_check.h reads; test_hb_check covers the rest); a
// refused launch enqueues nothing and is not logged.
void test_launch_logged() {
  unsigned *count = dev_alloc<unsigned>(64), *dims = dev_alloc<unsigned>(6);
  cudaStream_t s;
  GH_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "stream");
  mock_cuda_log_start();
  FP8K_LAUNCH(2, 32, 0, s, ids_kernel)(count, dims);
  FP8K_LAUNCH(1, 2048, 0, s, ids_kernel)(count, dims);
  mock_cuda_log_stop();
  GH_CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration, "the bad launch was accepted");
  size_t n = 0;
  const mock_cuda_op *ops = mock_cuda_log(&n);
  GH_CHECK(n == 1, "%zu entries, expected 1 (the launch that ran)", n);
  if (n == 1)
    GH_CHECK(ops[0].kind == MOCK_OP_WORK && ops[0].stream == (const void *)s &&
                 ops[0].flags == cudaStreamNonBlocking && std::string(ops[0].what) == "ids_kernel",
             "launch entry: kind %d stream %p (expected %p) flags %u what %s", (int)ops[0].kind,
             ops[0].stream, (void *)s, ops[0].flags, ops[0].what);
  cudaStreamDestroy(s);
  cudaFree(count);
  cudaFree(dims);
}

} // namespace

int main() {
  fp8emu::set_seed(0);
  GH_RUN(test_ids);
  GH_RUN(test_shuffles);
  GH_RUN(test_reductions);
  GH_RUN(test_split_butterfly);
  GH_RUN(test_warp0_and_exits);
  GH_RUN(test_atomics_and_errors);
  GH_RUN(test_bugs_abort);
  GH_RUN(test_shuffled_schedule);
  GH_RUN(test_mock_runtime);
  GH_RUN(test_launch_logged);
  // the collectives and barriers again under a shuffled schedule: same results
  fp8emu::set_seed(12345);
  GH_RUN(test_shuffles);
  GH_RUN(test_reductions);
  GH_RUN(test_split_butterfly);
  GH_RUN(test_warp0_and_exits);
  GH_RUN(test_atomics_and_errors);
  return gh_summary();
}
