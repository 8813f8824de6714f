// quant_pass.cuh: the device side of quant.cu's fused pass, the per-element and per-warp work
// its kernel is made of: the launch parameters (QParams) and the decode table in constant
// memory; config_pass (one configuration over one thread's 16 elements: codes, counts, error
// sum, xhat^2 sum); the block's shared memory (BlockShared) and a chunk's flags (Chunk);
// block_setup, classify (the configuration-independent work), config_step (config_pass plus
// the warp's reductions) and block_flush (the block's totals into global memory). quant.cu's
// header comment says what is computed and why each sum is exact enough. Device code only,
// included by quant.cu (inside nothing: its own anonymous namespace), like quant_load.cuh.
#ifndef FP8LAB_KERNELS_QUANT_PASS_CUH
#define FP8LAB_KERNELS_QUANT_PASS_CUH

#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "fp8k_device.cuh" /* fp8k_encode2 */
#include "fp8k_internal.cuh"
#include "quant_load.cuh" /* kChunk */

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr unsigned kFull = 0xFFFFFFFFu;

__constant__ float c_decode[2][256]; // fp8_decode_table(E4M3), fp8_decode_table(E5M2)

struct QParams {
  float scale[FP8K_MAX_CONFIGS];
  float sinv[FP8K_MAX_CONFIGS];
  int fmt[FP8K_MAX_CONFIGS];
  const float *dev_scales; // when not null, scales come from the device (current scaling)
  int nconf;
  int force_f64;
};

// 4 bits (of bit j, 4g <= j < 4g+4) spread to the high bit of 4 bytes: 0x80 per selected byte.
__device__ __forceinline__ unsigned spread4(unsigned bits) {
  return ((bits & 0xFu) * 0x00204081u & 0x01010101u) * 0x80u;
}

__device__ __forceinline__ float pairwise16(const float (&t)[kChunk]) {
  float a[8], b[4];
#pragma unroll
  for (int j = 0; j < 8; j++) a[j] = __fadd_rn(t[2 * j], t[2 * j + 1]);
#pragma unroll
  for (int j = 0; j < 4; j++) b[j] = __fadd_rn(a[2 * j], a[2 * j + 1]);
  return __fadd_rn(__fadd_rn(b[0], b[1]), __fadd_rn(b[2], b[3]));
}

// decode(code) of element j (code j in byte j%4 of word j/4) from the shared-memory table.
__device__ __forceinline__ float decoded(const float *__restrict__ tab, const unsigned (&w)[4],
                                         int j) {
  return tab[(w[j >> 2] >> (8 * (j & 3))) & 0xFFu];
}

// One configuration over one thread's chunk: codes into w[4] (4 codes per word, element j in
// byte j%4 of word j/4), counts packed as overflow | underflow << 10 | subnormal << 20 added to
// `packed`, the clipped count added to `clip`, the chunk's error sum added to `sse` and its
// xhat^2 sum to `ssh` (in units of sinv^2 when hfast: see the header comment).
template <int FMT>
__device__ __forceinline__ void config_pass(const float (&x)[kChunk], unsigned fin,
                                            const unsigned (&finb)[4], const unsigned (&nzb)[4],
                                            float s, float si, const float *__restrict__ tab,
                                            bool fast, bool hfast, float p2k, double p2m2k,
                                            unsigned &packed, unsigned &clip, double &sse,
                                            double &ssh, unsigned (&w)[4]) {
  constexpr unsigned kMaxBits = FMT ? 0x47600000u : 0x43E00000u; // 57344.0f : 448.0f
  // fp8_clip_bits: above 464.0f (E4M3) / from 61440.0f on (E5M2) RN would leave the format,
  // the conversion saturates instead (RECIPES.md "clipped"); always above kMaxBits
  constexpr unsigned kClipBits = FMT ? 0x476FFFFFu : 0x43E80000u;
  constexpr unsigned kExp4 = FMT ? 0x7C7C7C7Cu : 0x78787878u;     // exponent field, 4 bytes
  unsigned ov = 0, cl = 0;
#pragma unroll
  for (int k = 0; k < kChunk / 2; k++) {
    float y0 = __fmul_rn(x[2 * k], s), y1 = __fmul_rn(x[2 * k + 1], s);
    unsigned c2 = fp8k_encode2<FMT>(y0, y1);
    unsigned a0 = __float_as_uint(y0) & 0x7FFFFFFFu, a1 = __float_as_uint(y1) & 0x7FFFFFFFu;
    ov |= (unsigned)(a0 > kMaxBits) << (2 * k) | (unsigned)(a1 > kMaxBits) << (2 * k + 1);
    cl |= (unsigned)(a0 > kClipBits) << (2 * k) | (unsigned)(a1 > kClipBits) << (2 * k + 1);
    if (k & 1) w[k >> 1] |= c2 << 16;
    else w[k >> 1] = c2;
  }
  unsigned uf = 0, sub = 0;
#pragma unroll
  for (int g = 0; g < 4; g++) {
    // high bit of each byte: code magnitude non-zero / exponent field non-zero (no carries
    // between bytes: every byte is <= 0x7F before adding 0x7F)
    unsigned nzc = ((w[g] & 0x7F7F7F7Fu) + 0x7F7F7F7Fu) & 0x80808080u;
    unsigned nze = ((w[g] & kExp4) + 0x7F7F7F7Fu) & 0x80808080u;
    uf += __popc(~nzc & nzb[g]);        // finite x != 0 with code +-0
    sub += __popc(nzc & ~nze & finb[g]); // finite x, non-zero code with exponent field 0
  }
  packed += (unsigned)__popc(ov & fin) | (uf << 10) | (sub << 20);
  clip += (unsigned)__popc(cl & fin);

  // The xhat^2 sum first: it needs only the codes, and the error sum's terms are then the last
  // thing live (this order leaves no register spilled at the 80-register cap, sm_90).
  if (hfast) { // decode(code)^2 is exact in float32 (at most 8 significant bits, >= 2^-32)
    float h[kChunk];
#pragma unroll
    for (int j = 0; j < kChunk; j++) {
      float v = decoded(tab, w, j);
      h[j] = (fin >> j) & 1u ? __fmul_rn(v, v) : 0.0f;
    }
    ssh = __dadd_rn(ssh, (double)pairwise16(h));
  } else { // quant.c's arithmetic: xhat = RN32(decode * sinv), squared in double
#pragma unroll
    for (int j = 0; j < kChunk; j++)
      if ((fin >> j) & 1u) {
        double xh = (double)__fmul_rn(decoded(tab, w, j), si);
        ssh = __dadd_rn(ssh, __dmul_rn(xh, xh));
      }
  }
  if (fast) {
    float t[kChunk];
#pragma unroll
    for (int j = 0; j < kChunk; j++) {
      float xh = __fmul_rn(decoded(tab, w, j), si);
      float d = __fmul_rn(__fsub_rn(x[j], xh), p2k);
      t[j] = (fin >> j) & 1u ? __fmul_rn(d, d) : 0.0f;
    }
    sse = __dadd_rn(sse, __dmul_rn((double)pairwise16(t), p2m2k));
  } else {
#pragma unroll
    for (int j = 0; j < kChunk; j++) {
      float xh = __fmul_rn(decoded(tab, w, j), si);
      if ((fin >> j) & 1u) {
        double d = __dsub_rn((double)x[j], (double)xh);
        sse = __dadd_rn(sse, __dmul_rn(d, d));
      }
    }
  }
}

// What a block keeps in shared memory besides the histogram: the decode tables, the
// configurations of the launch and per-warp accumulators (one writer each: lane 0 of the warp,
// lane 16 for ssh; summed over the warps at the end of the block).
struct BlockShared {
  float tab[2][256];
  float scale[FP8K_MAX_CONFIGS], sinv[FP8K_MAX_CONFIGS];
  int fmt[FP8K_MAX_CONFIGS], fast[FP8K_MAX_CONFIGS], hfast[FP8K_MAX_CONFIGS];
  unsigned cnt[kWarps][FP8K_MAX_CONFIGS][4]; // overflow, underflow, subnormal, clipped
  double sse[kWarps][FP8K_MAX_CONFIGS];      // sum (x - xhat)^2
  double ssh[kWarps][FP8K_MAX_CONFIGS];      // sum xhat^2 (hfast: sum decode^2, times sinv^2 later)
  double sumsq[kWarps];
  unsigned amax, nonfinite, zeros;
};

// One thread's 16 elements and what every configuration needs of them.
struct Chunk {
  float x[kChunk];
  unsigned valid;         // bit j: element j exists
  unsigned fin, nz;       // bit j: finite; finite and non-zero
  unsigned finb[4], nzb[4]; // the same as 0x80 in byte j%4 of word j/4 (config_pass)
  bool ok;                // the float-term error sums apply (exponent range, header comment)
  float p2k;              // 2^K, the exact rescaling of the float terms
  double p2m2k;           // 2^-2K, back to the true scale
};

// Block start: tables and configurations into shared memory, accumulators zeroed.
template <bool HIST>
__device__ __forceinline__ void block_setup(BlockShared &S, unsigned *s_hist, const QParams &P,
                                            int tid) {
  const int nc = P.nconf;
  for (int i = tid; i < 512; i += kThreads) S.tab[i >> 8][i & 255] = c_decode[i >> 8][i & 255];
  if (tid < nc) {
    float s = P.dev_scales ? P.dev_scales[tid] : P.scale[tid];
    float si = P.dev_scales ? __fdiv_rn(1.0f, s) : P.sinv[tid];
    unsigned es = (__float_as_uint(s) >> 23) & 0xFFu, ei = (__float_as_uint(si) >> 23) & 0xFFu;
    S.scale[tid] = s;
    S.sinv[tid] = si;
    S.fmt[tid] = P.fmt[tid];
    S.fast[tid] = !P.force_f64 && es != 0 && es != 0xFF && ei != 0 && ei != 0xFF;
    // xhat^2 as decode^2 * sinv^2 needs RN32(decode * sinv) normal and finite for every non-zero
    // code, from the smallest subnormal (2^-9, 2^-16) to max: then it is within 2^-23 of it
    const bool e5 = P.fmt[tid] == FP8_E5M2;
    unsigned lo = __float_as_uint(__fmul_rn(e5 ? 0x1p-16f : 0x1p-9f, si)) & 0x7F800000u;
    unsigned hi = __float_as_uint(__fmul_rn(e5 ? 57344.0f : 448.0f, si)) & 0x7F800000u;
    S.hfast[tid] = !P.force_f64 && lo != 0 && hi != 0x7F800000u;
  }
  for (int i = tid; i < kWarps * FP8K_MAX_CONFIGS; i += kThreads) {
    int w = i / FP8K_MAX_CONFIGS, c = i % FP8K_MAX_CONFIGS;
    S.cnt[w][c][0] = S.cnt[w][c][1] = S.cnt[w][c][2] = S.cnt[w][c][3] = 0;
    S.sse[w][c] = S.ssh[w][c] = 0.0;
  }
  if (HIST)
    for (int i = tid; i < FP8_LOG2_HIST_BINS; i += kThreads) s_hist[i] = 0;
  if (tid == 0) S.amax = S.nonfinite = S.zeros = 0;
  __syncthreads();
}

// Configuration-independent work on one chunk: flags, amax, counts, histogram, exponent range,
// the rescaling of the float terms and sum x^2.
template <bool HIST>
__device__ __forceinline__ void classify(Chunk &ch, bool force_f64, unsigned *s_hist,
                                         unsigned &amax, unsigned &nonfinite, unsigned &zeros,
                                         double &sumsq) {
  unsigned fin = 0, nz = 0;
  int emax = 0, emin = 255;
#pragma unroll
  for (int j = 0; j < kChunk; j++) {
    unsigned a = __float_as_uint(ch.x[j]) & 0x7FFFFFFFu;
    bool v = (ch.valid >> j) & 1u;
    bool f = v && a < 0x7F800000u;
    fin |= (unsigned)f << j;
    nonfinite += v && !f;
    zeros += v && a == 0;
    unsigned am = a > 0x7F800000u ? 0u : a; // NaN never wins; inf does
    amax = v && am > amax ? am : amax;
    if (f && a != 0) {
      nz |= 1u << j;
      int e = (int)(a >> 23);
      emax = e > emax ? e : emax;
      emin = e < emin ? e : emin;
      if (HIST) {
        // bin index b - FP8_LOG2_HIST_MIN: normal e - 127 + 149; subnormal: leading bit - 149 + 149
        int bin = e ? e + 22 : 31 - __clz((int)a);
        atomicAdd(&s_hist[bin], 1u);
      }
    }
  }
  ch.fin = fin;
  ch.nz = nz;
  // Exact power-of-two rescaling of the float32 error terms (see the header comment).
  ch.ok = nz == 0 || (emin >= 1 && emax - emin <= 80 && emax >= 56);
  const int K = ch.ok && nz ? 182 - emax : 0; // |x| 2^K < 2^56; K in [-72, 126]
  ch.p2k = __uint_as_float((unsigned)(127 + K) << 23);
  ch.p2m2k = __hiloint2double((1023 - 2 * K) << 20, 0);
#pragma unroll
  for (int g = 0; g < 4; g++) {
    ch.finb[g] = spread4(fin >> (4 * g));
    ch.nzb[g] = spread4(nz >> (4 * g));
  }
  if (ch.ok && !force_f64) {
    float t[kChunk];
#pragma unroll
    for (int j = 0; j < kChunk; j++) {
      float xs = __fmul_rn(ch.x[j], ch.p2k);
      t[j] = (fin >> j) & 1u ? __fmul_rn(xs, xs) : 0.0f;
    }
    sumsq = __dadd_rn(sumsq, __dmul_rn((double)pairwise16(t), ch.p2m2k));
  } else {
#pragma unroll
    for (int j = 0; j < kChunk; j++)
      if ((fin >> j) & 1u) {
        double xd = (double)ch.x[j];
        sumsq = __dadd_rn(sumsq, __dmul_rn(xd, xd));
      }
  }
}

// Configuration c over the warp's 32 chunks: the pass, configuration 0's codes, and the warp's
// counts and two sums into its shared accumulators. Every lane of the warp calls it.
__device__ __forceinline__ void config_step(BlockShared &S, const Chunk &ch, int c, int64_t chunk,
                                            int64_t nchunks, uint8_t *__restrict__ codes,
                                            int lane, int warp) {
  unsigned w[4];
  unsigned packed = 0, clip = 0;
  double sse = 0.0, ssh = 0.0;
  const bool fast = S.fast[c] && ch.ok, hfast = S.hfast[c];
  if (S.fmt[c] == FP8_E5M2)
    config_pass<1>(ch.x, ch.fin, ch.finb, ch.nzb, S.scale[c], S.sinv[c], S.tab[1], fast, hfast,
                   ch.p2k, ch.p2m2k, packed, clip, sse, ssh, w);
  else
    config_pass<0>(ch.x, ch.fin, ch.finb, ch.nzb, S.scale[c], S.sinv[c], S.tab[0], fast, hfast,
                   ch.p2k, ch.p2m2k, packed, clip, sse, ssh, w);
  if (codes && c == 0 && chunk < nchunks) {
    if (ch.valid == 0xFFFFu) {
      reinterpret_cast<uint4 *>(codes)[chunk] = make_uint4(w[0], w[1], w[2], w[3]);
    } else {
#pragma unroll
      for (int j = 0; j < kChunk; j++)
        if ((ch.valid >> j) & 1u) codes[chunk * kChunk + j] = (uint8_t)(w[j >> 2] >> (8 * (j & 3)));
    }
  }
  // at most 16 per lane and 512 per warp: 10 bits per field
  unsigned tot = __reduce_add_sync(kFull, packed);
  // clipped elements are overflowed ones, so a warp without overflow has none: the second
  // reduction only runs after an overflow (tot is the same in every lane: no divergence)
  unsigned ctot = (tot & 0x3FFu) ? __reduce_add_sync(kFull, clip) : 0u;
  // both sums in one butterfly: the first exchange leaves pairs of sse in lanes 0-15 and pairs
  // of ssh in lanes 16-31, the other four sum within each half (lane 0: sse, lane 16: ssh)
  double keep = (lane & 16) ? ssh : sse, give = (lane & 16) ? sse : ssh;
  keep = __dadd_rn(keep, __shfl_xor_sync(kFull, give, 16));
#pragma unroll
  for (int o = 8; o >= 1; o >>= 1) keep = __dadd_rn(keep, __shfl_xor_sync(kFull, keep, o));
  if (lane == 0) {
    S.cnt[warp][c][0] += tot & 0x3FFu;
    S.cnt[warp][c][1] += (tot >> 10) & 0x3FFu;
    S.cnt[warp][c][2] += tot >> 20;
    S.cnt[warp][c][3] += ctot;
    S.sse[warp][c] = __dadd_rn(S.sse[warp][c], keep);
  } else if (lane == 16) {
    S.ssh[warp][c] = __dadd_rn(S.ssh[warp][c], keep);
  }
}

// Block end: block totals, then one global atomic per accumulator. Every thread calls it.
template <bool HIST>
__device__ __forceinline__ void block_flush(BlockShared &S, const unsigned *s_hist, int nc,
                                            unsigned amax, unsigned nonfinite, unsigned zeros,
                                            double sumsq, fp8k_acc *__restrict__ acc) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  amax = __reduce_max_sync(kFull, amax);
  nonfinite = __reduce_add_sync(kFull, nonfinite);
  zeros = __reduce_add_sync(kFull, zeros);
#pragma unroll
  for (int o = 16; o >= 1; o >>= 1) sumsq = __dadd_rn(sumsq, __shfl_xor_sync(kFull, sumsq, o));
  if (lane == 0) {
    atomicMax(&S.amax, amax);
    atomicAdd(&S.nonfinite, nonfinite);
    atomicAdd(&S.zeros, zeros);
    S.sumsq[warp] = sumsq;
  }
  __syncthreads();
  if (tid < nc) {
    unsigned long long c0 = 0, c1 = 0, c2 = 0, c3 = 0;
    double e = 0.0, h = 0.0;
    for (int w = 0; w < kWarps; w++) {
      c0 += S.cnt[w][tid][0];
      c1 += S.cnt[w][tid][1];
      c2 += S.cnt[w][tid][2];
      c3 += S.cnt[w][tid][3];
      e = __dadd_rn(e, S.sse[w][tid]);
      h = __dadd_rn(h, S.ssh[w][tid]);
    }
    if (S.hfast[tid]) { // sum decode^2 -> sum xhat^2: sinv^2 is exact in double
      double si = (double)S.sinv[tid];
      h = __dmul_rn(h, __dmul_rn(si, si));
    }
    if (c0) atomicAdd(&acc->cnt[tid][0], c0);
    if (c1) atomicAdd(&acc->cnt[tid][1], c1);
    if (c2) atomicAdd(&acc->cnt[tid][2], c2);
    if (c3) atomicAdd(&acc->cnt[tid][3], c3);
    atomicAdd(&acc->sse[tid], e); // always: a NaN or inf sum must reach the total
    atomicAdd(&acc->ssh[tid], h);
  }
  if (tid == kThreads - 1) {
    double t = 0.0;
    for (int w = 0; w < kWarps; w++) t = __dadd_rn(t, S.sumsq[w]);
    atomicMax(&acc->amax_bits, S.amax);
    atomicAdd(&acc->nonfinite, (unsigned long long)S.nonfinite);
    atomicAdd(&acc->zeros, (unsigned long long)S.zeros);
    atomicAdd(&acc->sum_sq, t);
  }
  if (HIST)
    for (int i = tid; i < FP8_LOG2_HIST_BINS; i += kThreads)
      if (s_hist[i]) atomicAdd(&acc->hist[i], (unsigned long long)s_hist[i]);
}

} // namespace

#endif
