// timeline.cu: what a TransformerEngine training step runs per tensor, as stream-explicit
// kernels for `fp8lab timeline` (fp8k.h, "timeline kernels"): every launcher is asynchronous on
// the caller's stream, takes device pointers, and neither synchronizes, allocates nor selects a
// device.
//  - fp8k_tl_cast_transpose: TE's cast_transpose. x [rows, cols] (F32/BF16/F16) gives
//    codes[r*cols + c] = encode(RN32(x * s)) with s = *scale (device), optionally the transposed
//    copy codes_t[c*rows + r] (what TE writes on Hopper for the wgrad/dgrad GEMMs), RN32(1/s),
//    and the amax of x as a by-product (atomic max into *amax, which the caller resets);
//  - fp8k_tl_amax: TE's compute_amax of current scaling (reset the amax, one pass);
//  - fp8k_tl_current_scale: the scale from that device amax (fp8_current_scale), one thread;
//  - fp8k_tl_amax_gather: delayed scaling's amax bookkeeping, read and reset, one launch;
//  - fp8k_tl_fill: deterministic benchmark tensors.
// fp8k_delayed_update_indexed_async (the delayed update on an explicit stream) is in delayed.cu.
//
// Exactness (RECIPES.md, bit for bit with src/sim): every element is widened exactly
// (quant_load.cuh), y = __fmul_rn(x, s) (one float rounding; the target is built with
// -fmad=false, nothing is contracted), code = cvt.rn.satfinite (fp8k_encode2, fp8k_device.cuh,
// the conversion quant.cu uses; gpu_cast_exhaustive proves it equals fp8_encode on all 2^32
// floats); the transpose only moves bytes. amax is a max over the float bits of |x| with NaN
// mapped to 0 (non-negative floats order as their bits; a max does not depend on the order the
// blocks' atomics land in), fp8_amax_f32's value. scale_inv = __fdiv_rn(1, s), the host's IEEE
// division 1.0f / s. The scale is fp8k_device.cuh's one copy of fp8_current_scale. fill: a
// splitmix64 hash of (seed, i) gives an integer k in [-2^23, 2^23); v = k * 2^-23 is exact, so
// x = RN_dtype(RN32(v * scale)) is reproducible on the host (the test does).
//
// Performance (cast_transpose; TE's reaches a large share of HBM bandwidth): 64 x 64 tiles, 256
// threads, grid = SMs x resident blocks, grid-stride over the tiles (tile column fastest, so
// consecutive blocks read consecutive memory). A full tile is read with 16-byte streaming loads
// (2 per thread for BF16/F16, 4 for F32), software-pipelined: a block issues the loads of its
// next tile before it encodes the current one, so that they stay in flight through the encode,
// the transposed store and both barriers (ptxas -v, sm_90 and sm_89: 64 registers for BF16 and
// F32, 48 for F16, no spills; capping them for 5 or 6 blocks per SM spills). Each thread
// encodes its 8 (4) elements and stores them as one 8-byte (4-byte) row store; the codes also go
// to a static shared tile of 64 rows x 16 words whose word w of row r sits at w ^ 2((r/16) & 3),
// so that the transposed reads (4 lanes per output row, 16 rows each, 8 output rows per warp)
// hit 8 distinct banks; each thread then stores 16 transposed codes with one 16-byte store, 4
// threads covering 64 contiguous bytes of codes_t. amax: a per-thread max, __reduce_max_sync, one
// atomicMax per block at the end. The vector path needs x 16-byte aligned, cols a multiple of 8
// (4 for F32) and codes 8- (4-) byte aligned; the transposed 16-byte stores need rows a multiple
// of 16 and codes_t 16-byte aligned. Partial edge tiles and tensors that miss those take a
// per-element path through the same shared tile (coalesced along rows, then along columns).
// fp8k_tl_amax: grid-stride over 16-element chunks with 16-byte loads after a scalar head that
// brings x to 16-byte alignment, one atomic per block.
//
// Test: tests/gpu/test_gpu_timeline_kernels.c against the simulator (label gpu; on the CPU
// through the CUDA emulator as test_gpu_timeline_kernels_emu, with a shuffled variant). Build:
// part of fp8lab_kernels. Benchmark: bench/bench_gpu.cu (cast_transpose of a BF16
// [16384, 8192] tensor and the amax kernel, GB/s against the device copy in the same run).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "fp8k_device.cuh" /* fp8k_encode2, fp8k_current_scale, fp8k_abs_bits */
#include "fp8k_internal.cuh"
#include "fp8k_launch.cuh"
#include "quant_load.cuh" /* widen_scalar, widen_vec, load_chunk, kChunk */

namespace {

constexpr int kTile = 64;                // tile edge, elements
constexpr int kThreads = 256;            // every kernel of this file
constexpr int kWarps = kThreads / 32;
constexpr int kTileWords = kTile / 4;    // 32-bit words of codes per tile row in shared memory
constexpr unsigned kFull = 0xFFFFFFFFu;
static_assert(kThreads == 4 * kTile, "the transposed store gives each thread 16 of 64 rows");

// The block's max of `am` (float bits) into *amax with one atomicMax (non-negative float bits
// order as the floats). Every thread of the block calls it, once.
__device__ __forceinline__ void block_amax(unsigned am, float *__restrict__ amax) {
  __shared__ unsigned s_warp[kWarps];
  am = __reduce_max_sync(kFull, am);
  if ((threadIdx.x & 31) == 0) s_warp[threadIdx.x >> 5] = am;
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned m = 0;
    for (int w = 0; w < kWarps; w++) m = s_warp[w] > m ? s_warp[w] : m;
    if (m) atomicMax(reinterpret_cast<unsigned *>(amax), m);
  }
}

// Word of the shared tile holding codes (r, 4 cw .. 4 cw + 3): see the header comment.
__device__ __forceinline__ int swz_word(int r, int cw) {
  return r * kTileWords + (cw ^ (((r >> 4) & 3) << 1));
}

// The vector path: a full tile is kTile rows of kPerRow 16-byte loads, kPerThread per thread
// (unit u = threadIdx.x + p * kThreads: row u / kPerRow, columns kVec (u % kPerRow) + 0 .. kVec-1).
template <int DT>
struct VecTile {
  static constexpr int kVec = vec_elems<DT>();                  // elements per 16-byte load
  static constexpr int kPerRow = kTile / kVec;                  // loads per tile row
  static constexpr int kPerThread = kTile * kPerRow / kThreads; // 2 (BF16, F16) or 4 (F32)
  static constexpr int kEs = DT == FP8_DTYPE_F32 ? 4 : 2;
};

// Issues a full tile's loads (streaming: the data is read once).
template <int DT>
__device__ __forceinline__ void tile_load(const unsigned char *__restrict__ xb, int64_t cols,
                                          int64_t row0, int64_t col0,
                                          uint4 (&v)[VecTile<DT>::kPerThread]) {
  using V = VecTile<DT>;
#pragma unroll
  for (int p = 0; p < V::kPerThread; p++) {
    const int u = (int)threadIdx.x + p * kThreads, r = u / V::kPerRow;
    const int c0 = (u % V::kPerRow) * V::kVec;
    v[p] = __ldcs(reinterpret_cast<const uint4 *>(xb + ((row0 + r) * cols + col0 + c0) * V::kEs));
  }
}

// Encodes a loaded full tile: codes row-major into `codes` (one 8-byte or 4-byte store per
// load), and into the shared tile `st` when not null. Returns the max of its |x| bits.
template <int DT, int FMT>
__device__ __forceinline__ unsigned tile_encode(const uint4 (&v)[VecTile<DT>::kPerThread],
                                                int64_t cols, int64_t row0, int64_t col0,
                                                float s, uint8_t *__restrict__ codes,
                                                uint32_t *st) {
  using V = VecTile<DT>;
  unsigned am = 0;
#pragma unroll
  for (int p = 0; p < V::kPerThread; p++) {
    const int u = (int)threadIdx.x + p * kThreads, r = u / V::kPerRow;
    const int c0 = (u % V::kPerRow) * V::kVec;
    float x[V::kVec];
    unsigned w[V::kVec / 4];
    widen_vec<DT>(v[p], x);
#pragma unroll
    for (int k = 0; k < V::kVec / 2; k++) {
      const unsigned c2 = fp8k_encode2<FMT>(__fmul_rn(x[2 * k], s), __fmul_rn(x[2 * k + 1], s));
      if (k & 1) w[k >> 1] |= c2 << 16;
      else w[k >> 1] = c2;
      const unsigned a0 = fp8k_abs_bits(x[2 * k]), a1 = fp8k_abs_bits(x[2 * k + 1]);
      am = a0 > am ? a0 : am;
      am = a1 > am ? a1 : am;
    }
    uint8_t *out = codes + (row0 + r) * cols + col0 + c0;
    if constexpr (V::kVec == 8) {
      *reinterpret_cast<uint2 *>(out) = make_uint2(w[0], w[1]);
      if (st) *reinterpret_cast<uint2 *>(st + swz_word(r, c0 >> 2)) = make_uint2(w[0], w[1]);
    } else {
      *reinterpret_cast<uint32_t *>(out) = w[0];
      if (st) st[swz_word(r, c0 >> 2)] = w[0];
    }
  }
  return am;
}

// Any tile, one element at a time (edges, and tensors the vector path cannot take).
template <int DT, int FMT>
__device__ __forceinline__ unsigned tile_scalar(const unsigned char *__restrict__ xb,
                                                int64_t rows, int64_t cols, int64_t row0,
                                                int64_t col0, float s,
                                                uint8_t *__restrict__ codes, uint32_t *st) {
  uint8_t *sb = reinterpret_cast<uint8_t *>(st);
  const int64_t nr = rows - row0 < kTile ? rows - row0 : kTile;
  const int64_t nc = cols - col0 < kTile ? cols - col0 : kTile;
  unsigned am = 0;
  for (int e = (int)threadIdx.x; e < kTile * kTile; e += kThreads) {
    const int r = e / kTile, c = e % kTile;
    if (r < nr && c < nc) {
      const int64_t i = (row0 + r) * cols + col0 + c;
      const float x = widen_scalar<DT>(xb, i);
      const uint8_t code = (uint8_t)fp8k_encode2<FMT>(__fmul_rn(x, s), 0.0f);
      codes[i] = code;
      if (sb) sb[4 * swz_word(r, c >> 2) + (c & 3)] = code;
      const unsigned a = fp8k_abs_bits(x);
      am = a > am ? a : am;
    }
  }
  return am;
}

// The shared tile, transposed, into codes_t. vec_t (rows % 16 == 0, codes_t 16-byte aligned):
// thread t writes output row col0 + t/4, elements row0 + 16 (t%4) .. +15, with one 16-byte
// store (a 16-row segment is then whole or outside the tensor); else one byte per element.
__device__ __forceinline__ void tile_store_t(const uint32_t *st, int64_t rows, int64_t cols,
                                             int64_t row0, int64_t col0,
                                             uint8_t *__restrict__ codes_t, bool vec_t) {
  const uint8_t *sb = reinterpret_cast<const uint8_t *>(st);
  const int64_t nr = rows - row0 < kTile ? rows - row0 : kTile;
  const int64_t nc = cols - col0 < kTile ? cols - col0 : kTile;
  if (vec_t) {
    const int c = (int)threadIdx.x >> 2, seg = (int)threadIdx.x & 3;
    if (c < nc && 16 * seg < nr) {
      unsigned w[4];
#pragma unroll
      for (int q = 0; q < 4; q++) {
        w[q] = 0;
#pragma unroll
        for (int b = 0; b < 4; b++) {
          const int r = 16 * seg + 4 * q + b;
          w[q] |= (unsigned)sb[4 * swz_word(r, c >> 2) + (c & 3)] << (8 * b);
        }
      }
      *reinterpret_cast<uint4 *>(codes_t + (col0 + c) * rows + row0 + 16 * seg) =
          make_uint4(w[0], w[1], w[2], w[3]);
    }
  } else {
    for (int e = (int)threadIdx.x; e < kTile * kTile; e += kThreads) {
      const int c = e / kTile, r = e % kTile;
      if (r < nr && c < nc)
        codes_t[(col0 + c) * rows + row0 + r] = sb[4 * swz_word(r, c >> 2) + (c & 3)];
    }
  }
}

// cast_transpose: tiles t = blockIdx.x, + gridDim.x, ... of ntiles (tiles_c per tile row).
// VEC: the tensor meets the vector path's alignment, and full tiles take it, software-pipelined:
// the loads of the block's next tile are issued before the current one is encoded and
// transposed, so that they are in flight through that work and its barriers. Invariant at the
// top of the loop: when tile t is full, nxt holds its data.
template <int DT, int FMT, bool VEC>
__global__ void __launch_bounds__(kThreads)
    cast_transpose_kernel(const void *__restrict__ x, int64_t rows, int64_t cols,
                          const float *__restrict__ scale, uint8_t *__restrict__ codes,
                          uint8_t *__restrict__ codes_t, float *__restrict__ scale_inv,
                          float *__restrict__ amax, int64_t tiles_c, int64_t ntiles, int vec_t) {
  __shared__ __align__(16) uint32_t s_tile[kTile * kTileWords];
  const float s = __ldg(scale);
  if (scale_inv && blockIdx.x == 0 && threadIdx.x == 0) *scale_inv = __fdiv_rn(1.0f, s);
  const unsigned char *xb = static_cast<const unsigned char *>(x);
  uint32_t *st = codes_t ? s_tile : nullptr;
  // tile t's origin; full: inside the tensor in both dimensions
  auto origin = [&](int64_t t, int64_t &row0, int64_t &col0) {
    row0 = t / tiles_c * kTile;
    col0 = t % tiles_c * kTile;
    return row0 + kTile <= rows && col0 + kTile <= cols;
  };
  uint4 nxt[VecTile<DT>::kPerThread] = {}; // copied, unused, in iterations on edge tiles
  int64_t row0, col0;
  if (VEC && blockIdx.x < ntiles && origin(blockIdx.x, row0, col0))
    tile_load<DT>(xb, cols, row0, col0, nxt);
  unsigned am = 0;
  for (int64_t t = blockIdx.x; t < ntiles; t += gridDim.x) {
    const bool full = origin(t, row0, col0);
    uint4 cur[VecTile<DT>::kPerThread];
#pragma unroll
    for (int p = 0; p < VecTile<DT>::kPerThread; p++) cur[p] = nxt[p];
    int64_t nrow0, ncol0;
    if (VEC && t + gridDim.x < ntiles && origin(t + gridDim.x, nrow0, ncol0))
      tile_load<DT>(xb, cols, nrow0, ncol0, nxt);
    const unsigned a = VEC && full ? tile_encode<DT, FMT>(cur, cols, row0, col0, s, codes, st)
                                   : tile_scalar<DT, FMT>(xb, rows, cols, row0, col0, s, codes, st);
    am = a > am ? a : am;
    if (codes_t) { // uniform over the block
      __syncthreads();
      tile_store_t(s_tile, rows, cols, row0, col0, codes_t, vec_t != 0);
      __syncthreads(); // before the next tile overwrites the shared tile
    }
  }
  if (amax) block_amax(am, amax);
}

// amax of n elements: [0, head) one per thread of block 0 (x + head is 16-byte aligned), the
// rest in 16-element chunks, grid-stride.
template <int DT>
__global__ void __launch_bounds__(kThreads)
    amax_kernel(const void *__restrict__ x, int64_t head, int64_t n, float *__restrict__ amax) {
  constexpr int kEs = DT == FP8_DTYPE_F32 ? 4 : 2;
  const unsigned char *xb = static_cast<const unsigned char *>(x);
  unsigned am = 0;
  if (blockIdx.x == 0 && threadIdx.x < head) am = fp8k_abs_bits(widen_scalar<DT>(xb, threadIdx.x));
  const void *body = xb + head * kEs;
  const int64_t nb = n - head, nchunks = (nb + kChunk - 1) / kChunk;
  for (int64_t ch = (int64_t)blockIdx.x * kThreads + threadIdx.x; ch < nchunks;
       ch += (int64_t)gridDim.x * kThreads) {
    float v[kChunk];
    load_chunk<DT>(body, ch, nb, v); // elements past the end read as 0
#pragma unroll
    for (int j = 0; j < kChunk; j++) {
      const unsigned a = fp8k_abs_bits(v[j]);
      am = a > am ? a : am;
    }
  }
  block_amax(am, amax);
}

__device__ __forceinline__ uint64_t mix64(uint64_t z) { // splitmix64's finalizer
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

template <int DT>
__global__ void __launch_bounds__(kThreads)
    fill_kernel(void *__restrict__ x, int64_t n, uint64_t seed, float scale) {
  const uint64_t base = mix64(seed + 0x9E3779B97F4A7C15ull);
  for (int64_t i = (int64_t)blockIdx.x * kThreads + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * kThreads) {
    const uint64_t z = mix64(base + (uint64_t)(i + 1) * 0x9E3779B97F4A7C15ull);
    const float v = __fmul_rn((float)((int32_t)(z >> 40) - (1 << 23)), 0x1p-23f); // exact
    const float y = __fmul_rn(v, scale);
    if (DT == FP8_DTYPE_F32)
      static_cast<float *>(x)[i] = y;
    else if (DT == FP8_DTYPE_BF16)
      static_cast<unsigned short *>(x)[i] = __bfloat16_as_ushort(__float2bfloat16_rn(y));
    else
      static_cast<unsigned short *>(x)[i] = __half_as_ushort(__float2half_rn(y));
  }
}

__global__ void __launch_bounds__(kThreads)
    gather_kernel(float *__restrict__ amax, const int32_t *__restrict__ index, int32_t n,
                  float *__restrict__ dst) {
  const int64_t i = (int64_t)blockIdx.x * kThreads + threadIdx.x;
  if (i >= n) return;
  const int32_t k = index[i];
  dst[i] = amax[k];
  amax[k] = 0.0f;
}

__global__ void tl_scale_kernel(const float *__restrict__ amax, float eps, float scaled_max,
                                int pow2, float *__restrict__ scale) {
  *scale = fp8k_current_scale(*amax, eps, scaled_max, pow2 != 0);
}

// Blocks for a grid-stride kernel: as many as are resident on the current device at once
// (SMs x occupancy), at most `work`, at least 1.
template <typename K>
cudaError_t tl_grid(K kernel, int64_t work, int *grid) {
  int dev = 0, nsm = 0, per_sm = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev);
  if (e == cudaSuccess)
    e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, 0);
  if (e != cudaSuccess) return e;
  int64_t g = (int64_t)nsm * (per_sm < 1 ? 1 : per_sm);
  if (g > work) g = work;
  *grid = g < 1 ? 1 : (int)g;
  return cudaSuccess;
}

// What fp8k_tl_cast_transpose hands to the launch of one instantiation.
struct CtArgs {
  cudaStream_t stream;
  const void *x;
  int64_t rows, cols;
  const float *scale;
  uint8_t *codes, *codes_t;
  float *scale_inv, *amax;
  bool vec_t;
};

template <int DT, int FMT, bool VEC>
cudaError_t launch_ct(const CtArgs &a) {
  const int64_t tiles_c = (a.cols + kTile - 1) / kTile;
  const int64_t ntiles = (a.rows + kTile - 1) / kTile * tiles_c;
  int grid = 1;
  cudaError_t e = tl_grid(cast_transpose_kernel<DT, FMT, VEC>, ntiles, &grid);
  if (e != cudaSuccess) return e;
  FP8K_LAUNCH(grid, kThreads, 0, a.stream, cast_transpose_kernel<DT, FMT, VEC>)(
      a.x, a.rows, a.cols, a.scale, a.codes, a.codes_t, a.scale_inv, a.amax, tiles_c, ntiles,
      a.vec_t ? 1 : 0);
  return cudaGetLastError();
}

template <int DT>
cudaError_t launch_ct_dt(const CtArgs &a, int format, bool vec) {
  if (format == FP8_E5M2) return vec ? launch_ct<DT, 1, true>(a) : launch_ct<DT, 1, false>(a);
  return vec ? launch_ct<DT, 0, true>(a) : launch_ct<DT, 0, false>(a);
}

template <int DT>
cudaError_t launch_amax(cudaStream_t stream, const void *x, int64_t head, int64_t n,
                        float *amax) {
  const int64_t chunks = (n - head + kChunk - 1) / kChunk;
  int grid = 1;
  cudaError_t e = tl_grid(amax_kernel<DT>, (chunks + kThreads - 1) / kThreads, &grid);
  if (e != cudaSuccess) return e;
  FP8K_LAUNCH(grid, kThreads, 0, stream, amax_kernel<DT>)(x, head, n, amax);
  return cudaGetLastError();
}

template <int DT>
cudaError_t launch_fill(cudaStream_t stream, void *x, int64_t n, uint64_t seed, float scale) {
  int grid = 1;
  cudaError_t e = tl_grid(fill_kernel<DT>, (n + kThreads - 1) / kThreads, &grid);
  if (e != cudaSuccess) return e;
  FP8K_LAUNCH(grid, kThreads, 0, stream, fill_kernel<DT>)(x, n, seed, scale);
  return cudaGetLastError();
}

bool dtype_ok(int d) { return d == FP8_DTYPE_F32 || d == FP8_DTYPE_BF16 || d == FP8_DTYPE_F16; }

} // namespace

#define TL_DTYPE_MSG "dtype %d, expected 0 (F32), 1 (BF16) or 2 (F16)"

extern "C" int fp8k_tl_fill(void *stream, void *x, int dtype, int64_t n, uint64_t seed,
                            float scale, char *err, size_t errlen) {
  int rc = 0;
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  FP8G_REQUIRE_EINVAL(dtype_ok(dtype), "fp8k_tl_fill: " TL_DTYPE_MSG, dtype);
  FP8G_REQUIRE_EINVAL(n >= 0, "fp8k_tl_fill: n %lld < 0", (long long)n);
  FP8G_REQUIRE_EINVAL(n == 0 || x != nullptr, "fp8k_tl_fill: x is NULL for %lld elements",
                      (long long)n);
  FP8G_REQUIRE_EINVAL((uintptr_t)x % fp8_dtype_size((fp8_dtype)dtype) == 0,
                      "fp8k_tl_fill: x %p is not aligned to its %zu-byte elements", x,
                      fp8_dtype_size((fp8_dtype)dtype));
  if (n == 0) goto done;
  switch (dtype) {
  case FP8_DTYPE_F32: FP8G_CUDA(launch_fill<FP8_DTYPE_F32>(st, x, n, seed, scale)); break;
  case FP8_DTYPE_BF16: FP8G_CUDA(launch_fill<FP8_DTYPE_BF16>(st, x, n, seed, scale)); break;
  default: FP8G_CUDA(launch_fill<FP8_DTYPE_F16>(st, x, n, seed, scale)); break;
  }
done:
  return rc;
}

extern "C" int fp8k_tl_cast_transpose(void *stream, const void *x, int dtype, int64_t rows,
                                      int64_t cols, const float *scale, int format,
                                      uint8_t *codes, uint8_t *codes_t, float *scale_inv,
                                      float *amax, char *err, size_t errlen) {
  int rc = 0;
  CtArgs a;
  size_t es = 0;
  int64_t vec_elems_ = 0;
  bool empty = false, vec = false;
  FP8G_REQUIRE_EINVAL(dtype_ok(dtype), "fp8k_tl_cast_transpose: " TL_DTYPE_MSG, dtype);
  FP8G_REQUIRE_EINVAL(format == FP8_E4M3 || format == FP8_E5M2,
                      "fp8k_tl_cast_transpose: format %d, expected 0 (E4M3) or 1 (E5M2)",
                      format);
  FP8G_REQUIRE_EINVAL(rows >= 0 && cols >= 0 && rows <= (1ll << 40) &&
                          (cols == 0 || rows <= (1ll << 40) / cols),
                      "fp8k_tl_cast_transpose: shape [%lld, %lld] (expected rows, cols >= 0 "
                      "and rows * cols <= 2^40)", (long long)rows, (long long)cols);
  FP8G_REQUIRE_EINVAL(scale != nullptr, "fp8k_tl_cast_transpose: scale is NULL");
  empty = rows == 0 || cols == 0;
  FP8G_REQUIRE_EINVAL(empty || (x != nullptr && codes != nullptr),
                      "fp8k_tl_cast_transpose: x and codes must not be NULL for a [%lld, %lld] "
                      "tensor", (long long)rows, (long long)cols);
  es = fp8_dtype_size((fp8_dtype)dtype);
  FP8G_REQUIRE_EINVAL((uintptr_t)x % es == 0,
                      "fp8k_tl_cast_transpose: x %p is not aligned to its %zu-byte elements", x,
                      es);
  if (empty && scale_inv == nullptr) goto done; // nothing to write
  vec_elems_ = (int64_t)(16 / es);
  a = CtArgs{static_cast<cudaStream_t>(stream), x, rows, cols, scale, codes, codes_t,
             scale_inv, amax, false};
  vec = (uintptr_t)x % 16 == 0 && cols % vec_elems_ == 0 && (uintptr_t)codes % vec_elems_ == 0;
  a.vec_t = codes_t != nullptr && rows % 16 == 0 && (uintptr_t)codes_t % 16 == 0;
  switch (dtype) {
  case FP8_DTYPE_F32: FP8G_CUDA(launch_ct_dt<FP8_DTYPE_F32>(a, format, vec)); break;
  case FP8_DTYPE_BF16: FP8G_CUDA(launch_ct_dt<FP8_DTYPE_BF16>(a, format, vec)); break;
  default: FP8G_CUDA(launch_ct_dt<FP8_DTYPE_F16>(a, format, vec)); break;
  }
done:
  return rc;
}

extern "C" int fp8k_tl_amax(void *stream, const void *x, int dtype, int64_t n, float *amax,
                            char *err, size_t errlen) {
  int rc = 0;
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  size_t es = 0;
  int64_t head = 0;
  FP8G_REQUIRE_EINVAL(dtype_ok(dtype), "fp8k_tl_amax: " TL_DTYPE_MSG, dtype);
  FP8G_REQUIRE_EINVAL(n >= 0, "fp8k_tl_amax: n %lld < 0", (long long)n);
  FP8G_REQUIRE_EINVAL(amax != nullptr, "fp8k_tl_amax: amax is NULL");
  FP8G_REQUIRE_EINVAL(n == 0 || x != nullptr, "fp8k_tl_amax: x is NULL for %lld elements",
                      (long long)n);
  es = fp8_dtype_size((fp8_dtype)dtype);
  FP8G_REQUIRE_EINVAL((uintptr_t)x % es == 0,
                      "fp8k_tl_amax: x %p is not aligned to its %zu-byte elements", x, es);
  FP8G_CUDA(cudaMemsetAsync(amax, 0, sizeof(float), st));
  if (n == 0) goto done;
  head = (int64_t)((16 - (uintptr_t)x % 16) % 16 / es); // elements before a 16-byte boundary
  if (head > n) head = n;
  switch (dtype) {
  case FP8_DTYPE_F32: FP8G_CUDA(launch_amax<FP8_DTYPE_F32>(st, x, head, n, amax)); break;
  case FP8_DTYPE_BF16: FP8G_CUDA(launch_amax<FP8_DTYPE_BF16>(st, x, head, n, amax)); break;
  default: FP8G_CUDA(launch_amax<FP8_DTYPE_F16>(st, x, head, n, amax)); break;
  }
done:
  return rc;
}

extern "C" int fp8k_tl_current_scale(void *stream, const float *amax,
                                     const fp8k_current_params *p, float *scale, char *err,
                                     size_t errlen) {
  int rc = 0;
  fp8_current_params cp;
  FP8G_REQUIRE_EINVAL(amax != nullptr && p != nullptr && scale != nullptr,
                      "fp8k_tl_current_scale: NULL argument");
  cp = fp8_current_params{p->amax_epsilon, p->pow2 != 0, p->margin, (fp8_format)p->format};
  FP8G_REQUIRE_EINVAL(fp8_current_params_check(&cp) == FP8_OK,
                      "fp8k_tl_current_scale: amax_epsilon %g, margin %d, format %d out of range",
                      (double)p->amax_epsilon, (int)p->margin, (int)p->format);
  FP8K_LAUNCH(1, 1, 0, static_cast<cudaStream_t>(stream), tl_scale_kernel)(
      amax, cp.amax_epsilon, fp8_scaled_max(cp.format, cp.margin), cp.pow2 ? 1 : 0, scale);
  FP8G_CUDA(cudaGetLastError());
done:
  return rc;
}

extern "C" int fp8k_tl_amax_gather(void *stream, float *amax, const int32_t *index, int32_t n,
                                   float *dst, char *err, size_t errlen) {
  int rc = 0;
  FP8G_REQUIRE_EINVAL(n >= 0, "fp8k_tl_amax_gather: n %d < 0", (int)n);
  if (n == 0) goto done;
  FP8G_REQUIRE_EINVAL(amax != nullptr && index != nullptr && dst != nullptr,
                      "fp8k_tl_amax_gather: NULL array for n = %d", (int)n);
  FP8K_LAUNCH((unsigned)(((int64_t)n + kThreads - 1) / kThreads), kThreads, 0,
              static_cast<cudaStream_t>(stream), gather_kernel)(amax, index, n, dst);
  FP8G_CUDA(cudaGetLastError());
done:
  return rc;
}
