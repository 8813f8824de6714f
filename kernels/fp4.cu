// fp4.cu: NVFP4 and MXFP4 quantization statistics on the device (issue 29), emulated: Hopper
// has no FP4 conversion, so E2M1 is computed in float32 as src/sim/fp4.c does (its midpoint
// comparisons, its ties to even, saturation at 6, NaN to +6), and so are the E4M3 block scale
// (the hardware cvt.rn.satfinite.e4m3, which gpu_cast_exhaustive proves equal to fp8_encode),
// Four Over Six, and stochastic rounding's seeded draw (splitmix64's low byte) and exact
// expectation.
//
// One thread per block of the row-wise cast: a 1x16 run (NVFP4), a 16x16 block (NVFP4 2-D
// weights) or a 1x32 run (MXFP4), its elements in the order fp4.c takes them, every float
// operation the one fp4.c does (__fmul_rn / __fdiv_rn / __fadd_rn, built with -fmad=false). The
// counts are exact; the double sums are added with atomics, so their order differs from the
// CPU's (within 1e-6 relative, as quant.cu's). Each block writes its amax and element
// multiplier to device memory; the host computes the block statistics from them in block order,
// as src/sim/block_fp4.c does, so those are bit-identical.
//
// Test: the engine conformance test (tests/engine/test_engine_conformance.c: the GPU engine's FP4
// rows against the CPU engine's), on a device and on the CPU through the CUDA emulator.
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "fp8k_internal.cuh"
#include "fp8k_launch.cuh"
#include "quant_load.cuh" /* widen_scalar */

namespace {

struct Fp4Acc {
  unsigned long long nonfinite, zeros, overflow, underflow, subnormal, clipped;
  double sse, ssq, ssh, uexp, sexp;
};

struct Fp4Args {
  int64_t rows, cols;
  int mx;          // 1: MXFP4, 0: NVFP4
  int square;      // NVFP4 16x16 blocks
  int rule;        // fp8_nvfp4_scale_rule
  int floor;       // MXFP4 scale rounding
  int sr;          // stochastic rounding
  unsigned long long seed;
  float amax_g, e4m3_max;
};

__constant__ float kE2M1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

__device__ __forceinline__ unsigned e2m1_enc(float y) {
  if (y != y) return 7u;
  float a = fabsf(y);
  unsigned m = (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) +
               (a >= 3.5f) + (a > 5.0f);
  return (__float_as_uint(y) >> 31) << 3 | m;
}

__device__ __forceinline__ float e2m1_dec(unsigned c) {
  float v = kE2M1[c & 7u];
  return (c & 8u) ? -v : v;
}

// E4M3 code to float (exact): subnormals m * 2^-9, normals (8 + m) * 2^(e-10).
__device__ __forceinline__ float e4m3_dec(unsigned c) {
  unsigned e = (c >> 3) & 15u, m = c & 7u;
  float v = e ? __uint_as_float(((e + 120u) << 23) | (m << 20)) : __fmul_rn((float)m, 0.001953125f);
  return (c & 0x80u) ? -v : v;
}

__device__ __forceinline__ unsigned e4m3_enc(float v) {
  return (unsigned)__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
}

__device__ __forceinline__ unsigned sr_byte(unsigned long long seed, unsigned long long i) {
  unsigned long long z = seed + i * 0x9E3779B97F4A7C15ull + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return (unsigned)((z ^ (z >> 31)) & 0xFFu);
}

// E8M0 exponents as src/sim/e8m0.c / fp4.c fp8_mxfp4_scale_exponent.
__device__ __forceinline__ unsigned e8m0_ceil(float v) {
  unsigned a = __float_as_uint(v) & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return 0xFFu;
  if (a == 0x7F800000u) return 0xFEu;
  unsigned e = a >> 23, m = a & 0x7FFFFFu;
  if (e == 0) return m > 0x400000u ? 1u : 0u;
  if (m != 0 && e < 0xFEu) e++;
  return e;
}

__device__ __forceinline__ unsigned mx_exponent(float amax, int floor_rule) {
  float b = fabsf(amax);
  if (b != b) return 0xFFu;
  if (!floor_rule) return e8m0_ceil(__fmul_rn(b, __fdiv_rn(1.0f, 6.0f)));
  if (isinf(b)) return 0xFEu;
  if (b == 0.0f) return 0u;
  int k;
  (void)frexpf(b, &k);
  int e = (k - 1) - 2 + 127;
  return (unsigned)(e < 0 ? 0 : e > 254 ? 254 : e);
}

template <int DT>
__device__ __forceinline__ float at(const unsigned char *p, const Fp4Args &A, int64_t r, int64_t c) {
  return widen_scalar<DT>(p, r * A.cols + c);
}

// Four Over Six: one candidate's error over rows [r0, r1) and columns [c0, c1) (fp4.c cand_error).
template <int DT>
__device__ float cand_error(const unsigned char *p, const Fp4Args &A, int64_t r0, int64_t r1,
                            int64_t c0, int64_t c1, unsigned sc, float s_dec, float range, int mse) {
  float s = e4m3_dec(sc);
  float e = fminf(__fdiv_rn(1.0f, __fmul_rn(s, s_dec)), FLT_MAX);
  float row[16];
  for (int i = 0; i < 16; i++) row[i] = 0.0f;
  for (int64_t r = r0; r < r1; r++) {
    float acc = 0.0f;
    for (int64_t c = c0; c < c1; c++) {
      float xv = at<DT>(p, A, r, c);
      float q = e2m1_dec(e2m1_enc(__fmul_rn(xv, e)));
      float d = __fadd_rn(__fdiv_rn(__fmul_rn(__fmul_rn(q, s), A.amax_g), range), -xv);
      acc = __fadd_rn(acc, mse ? __fmul_rn(d, d) : fabsf(d));
    }
    row[r - r0] = acc;
  }
  for (int off = 8; off >= 1; off /= 2)
    for (int i = 0; i < off; i++) row[i] = __fadd_rn(row[i], row[i + off]);
  return row[0];
}

template <int DT>
__global__ void fp4_kernel(const void *__restrict__ data, const Fp4Args A, int64_t nunits,
                           int64_t nrun, Fp4Acc *acc, float *bamax, float *bmult) {
  const int64_t u = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (u >= nunits) return;
  const unsigned char *p = reinterpret_cast<const unsigned char *>(data);
  const int64_t B = A.mx ? 32 : 16, bh = A.square ? 16 : 1;
  const int64_t r0 = (u / nrun) * bh, c0 = (u % nrun) * B;
  const int64_t r1 = r0 + bh < A.rows ? r0 + bh : A.rows, c1 = c0 + B < A.cols ? c0 + B : A.cols;
  float amax = 0.0f;
  for (int64_t r = r0; r < r1; r++)
    for (int64_t c = c0; c < c1; c++) {
      float v = fabsf(at<DT>(p, A, r, c));
      amax = v > amax ? v : amax;
    }
  // the element multiplier and the dequantization factor (fp4.c)
  float mult, dq;
  if (A.mx) {
    unsigned e = mx_exponent(amax, A.floor);
    mult = ldexpf(1.0f, 127 - (int)e);
    dq = __fdiv_rn(1.0f, mult);
  } else {
    const float e4 = A.e4m3_max > 0.0f ? A.e4m3_max : 448.0f;
    float s_enc = fminf(__fdiv_rn(__fmul_rn(e4, 6.0f), A.amax_g), FLT_MAX);
    if (A.amax_g == 0.0f || s_enc == 0.0f) s_enc = 1.0f;
    const float s_dec = __fdiv_rn(1.0f, s_enc);
    unsigned sc;
    if (A.rule == 0) {
      sc = e4m3_enc(fminf(__fmul_rn(amax, __fmul_rn(s_enc, __fdiv_rn(1.0f, 6.0f))), FLT_MAX));
    } else {
      float base = __fmul_rn(__fdiv_rn(amax, 6.0f), s_enc);
      unsigned s6 = e4m3_enc(fminf(base, 448.0f)), s4 = e4m3_enc(fminf(__fmul_rn(base, 1.5f), 448.0f));
      float range = __fmul_rn(6.0f, e4);
      float er6 = cand_error<DT>(p, A, r0, r1, c0, c1, s6, s_dec, range, A.rule == 2);
      float er4 = cand_error<DT>(p, A, r0, r1, c0, c1, s4, s_dec, range, A.rule == 2);
      sc = er4 < er6 ? s4 : s6;
    }
    float s = e4m3_dec(sc);
    mult = fminf(__fdiv_rn(1.0f, __fmul_rn(s, s_dec)), FLT_MAX);
    dq = __fmul_rn(__fmul_rn(s, A.amax_g), __fdiv_rn(1.0f, __fmul_rn(6.0f, e4)));
  }
  bamax[u] = amax;
  bmult[u] = mult;
  unsigned long long nonfinite = 0, zeros = 0, ovf = 0, und = 0, sub = 0, clip = 0;
  double sse = 0.0, ssq = 0.0, ssh = 0.0, uexp = 0.0, sexp = 0.0;
  for (int64_t r = r0; r < r1; r++)
    for (int64_t c = c0; c < c1; c++) {
      float x = at<DT>(p, A, r, c);
      float y = __fmul_rn(x, mult);
      float ay = fabsf(y);
      unsigned code, k = 0;
      double pu = 0.0;
      if (A.sr && ay < 6.0f) {
        unsigned i = (ay >= 0.5f) + (ay >= 1.0f) + (ay >= 1.5f) + (ay >= 2.0f) + (ay >= 3.0f) + (ay >= 4.0f);
        double f = ((double)ay - kE2M1[i]) / ((double)kE2M1[i + 1] - kE2M1[i]);
        double uu = floor(256.0 * f);
        k = i;
        pu = uu / 256.0;
        unsigned byte = sr_byte(A.seed, (unsigned long long)(r * A.cols + c));
        code = (__float_as_uint(y) >> 31) << 3 | (i + (uu > (double)byte));
      } else {
        code = e2m1_enc(y);
      }
      float h = __fmul_rn(e2m1_dec(code), dq);
      if (!isfinite(x)) {
        nonfinite++;
        continue;
      }
      zeros += x == 0.0f;
      ovf += ay > 6.0f;
      clip += ay >= 7.0f;
      und += x != 0.0f && (code & 7u) == 0;
      sub += (code & 7u) == 1;
      double d = (double)x - (double)h;
      sse += d * d;
      ssq += (double)x * (double)x;
      ssh += (double)h * (double)h;
      if (!A.sr) continue;
      if (!(ay < 6.0f)) {
        sexp += d * d;
        continue;
      }
      unsigned sg = code & 8u;
      float lo = __fmul_rn(e2m1_dec(sg | k), dq), hi = __fmul_rn(e2m1_dec(sg | (k + 1)), dq);
      double dl = (double)x - (double)lo, dh = (double)x - (double)hi;
      sexp += pu * dh * dh + (1.0 - pu) * dl * dl;
      if (x != 0.0f && k == 0) uexp += 1.0 - pu;
    }
  atomicAdd(&acc->nonfinite, nonfinite);
  atomicAdd(&acc->zeros, zeros);
  atomicAdd(&acc->overflow, ovf);
  atomicAdd(&acc->underflow, und);
  atomicAdd(&acc->subnormal, sub);
  atomicAdd(&acc->clipped, clip);
  atomicAdd(&acc->sse, sse);
  atomicAdd(&acc->ssq, ssq);
  atomicAdd(&acc->ssh, ssh);
  atomicAdd(&acc->uexp, uexp);
  atomicAdd(&acc->sexp, sexp);
}

} // namespace

extern "C" int fp8k_fp4_quant_stats(fp8k_ctx *ctx, int64_t rows, int64_t cols,
                                    const fp8k_fp4_params *prm, float amax_g, fp8k_stats *out,
                                    fp8k_fp4_blocks *blk, char *err, size_t errlen) {
  int rc = 0;
  Fp4Acc h, *d_acc = nullptr;
  float *d_amax = nullptr, *d_mult = nullptr;
  FP8G_REQUIRE_EINVAL(ctx != nullptr && prm != nullptr && out != nullptr && blk != nullptr,
                      "fp8k_fp4_quant_stats: NULL argument");
  FP8G_REQUIRE_EINVAL(rows >= 0 && cols >= 0 && rows * cols == ctx->numel,
                      "fp8k_fp4_quant_stats: %lld x %lld is not the uploaded tensor's %lld elements",
                      (long long)rows, (long long)cols, (long long)ctx->numel);
  FP8G_REQUIRE_EINVAL(!(prm->mx && (prm->square || prm->stochastic)),
                      "fp8k_fp4_quant_stats: MXFP4 has 1x32 blocks and no stochastic rounding");
  {
    Fp4Args A = {rows, cols, prm->mx, prm->square, prm->rule, prm->floor_rule, prm->stochastic,
                 (unsigned long long)prm->sr_seed, amax_g, prm->e4m3_max};
    const int64_t B = A.mx ? 32 : 16, nrun = cols > 0 ? (cols + B - 1) / B : 0;
    const int64_t nbr = A.square ? (rows + 15) / 16 : rows, nunits = nbr * nrun;
    memset(&h, 0, sizeof h);
    memset(blk, 0, sizeof *blk);
    blk->nunits = nunits;
    blk->nrun = nrun;
    if (nunits > 0) {
      blk->amax = (float *)malloc((size_t)nunits * sizeof(float));
      blk->mult = (float *)malloc((size_t)nunits * sizeof(float));
      FP8G_REQUIRE(blk->amax && blk->mult, FP8_ENOMEM, "fp8k_fp4_quant_stats: out of memory");
      FP8G_CUDA(cudaMalloc(&d_acc, sizeof(Fp4Acc)));
      FP8G_CUDA(cudaMalloc(&d_amax, (size_t)nunits * sizeof(float)));
      FP8G_CUDA(cudaMalloc(&d_mult, (size_t)nunits * sizeof(float)));
      FP8G_CUDA(cudaMemsetAsync(d_acc, 0, sizeof(Fp4Acc), ctx->stream));
      const int threads = 128;
      const unsigned grid = (unsigned)((nunits + threads - 1) / threads);
      if (ctx->dtype == FP8_DTYPE_F32)
        FP8K_LAUNCH(grid, threads, 0, ctx->stream, fp4_kernel<FP8_DTYPE_F32>)(ctx->d_data, A, nunits, nrun, d_acc, d_amax, d_mult);
      else if (ctx->dtype == FP8_DTYPE_BF16)
        FP8K_LAUNCH(grid, threads, 0, ctx->stream, fp4_kernel<FP8_DTYPE_BF16>)(ctx->d_data, A, nunits, nrun, d_acc, d_amax, d_mult);
      else
        FP8K_LAUNCH(grid, threads, 0, ctx->stream, fp4_kernel<FP8_DTYPE_F16>)(ctx->d_data, A, nunits, nrun, d_acc, d_amax, d_mult);
      FP8G_CUDA(cudaGetLastError());
      FP8G_CUDA(cudaMemcpyAsync(&h, d_acc, sizeof h, cudaMemcpyDeviceToHost, ctx->stream));
      FP8G_CUDA(cudaMemcpyAsync(blk->amax, d_amax, (size_t)nunits * sizeof(float), cudaMemcpyDeviceToHost, ctx->stream));
      FP8G_CUDA(cudaMemcpyAsync(blk->mult, d_mult, (size_t)nunits * sizeof(float), cudaMemcpyDeviceToHost, ctx->stream));
      FP8G_CUDA(cudaStreamSynchronize(ctx->stream));
    }
    memset(out, 0, sizeof *out);
    out->n = ctx->numel;
    out->nonfinite = (int64_t)h.nonfinite;
    out->zeros = (int64_t)h.zeros;
    out->overflow = (int64_t)h.overflow;
    out->underflow = (int64_t)h.underflow;
    out->subnormal = (int64_t)h.subnormal;
    out->clipped = (int64_t)h.clipped;
    out->sum_sq_err = h.sse;
    out->sum_sq = h.ssq;
    out->sum_sq_hat = h.ssh;
    blk->underflow_expected = prm->stochastic ? h.uexp : NAN;
    blk->sum_sq_err_expected = prm->stochastic ? h.sexp : NAN;
  }
done:
  if (d_acc) cudaFree(d_acc);
  if (d_amax) cudaFree(d_amax);
  if (d_mult) cudaFree(d_mult);
  return rc;
}
