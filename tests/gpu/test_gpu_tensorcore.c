/* test_gpu_tensorcore.c: cuBLASLt's FP8 GEMM (src/gpu/gemm_lt.h) against the tensor-core model
 * of src/sim/tensorcore.h (issue 46; docs/tensor_cores.md "The GPU engine against the model").
 * Label gpu; the same file on the CUDA emulator is test_gpu_tensorcore_mock (label cpu).
 *
 * On a device: the model is chosen from the compute capability (9.x: FP8_TC_H100, H100/H200;
 * 10.x: FP8_TC_B200; anything else: skipped, naming the capability). For K in {32, 64, 128,
 * 4096} and fast accumulation on and off: random E4M3 codes (splitmix64, fixed seed; one in
 * eight a zero of either sign, otherwise sign, exponent field 0..15 and mantissa uniform, so the
 * products' exponents span the whole E4M3 range and alignment truncation matters), M = N = 64
 * (multiples of 16: no padding, no copies), scale_inv = 1 for both operands, FP32 output, run as
 * fp8_gemm_lt_fp8_tn (y = A B^T, A [M, K], B [N, K]); the same entries on the CPU with
 * fp8_tc_block(model, E4M3, E4M3, M, N, K, a, b, promote = fast ? 0 : FP8_TC_PROMOTE, 1, y) and
 * exactly (a double sum, which is exact here: every E4M3 product is a multiple of 2^-18 below
 * 2^18 and |sum| < 2^30, 48 bits; rounded once to float32). One line per (K, fast), starting
 * "tensorcore:": entries bit-equal out of M*N and the largest relative difference, for the
 * model and for exact accumulation.
 * Asserted: at K = 32 (one MMA from c = 0, the inner-product level that the model reproduces
 * bit for bit on the hardware samples of model_validation) every entry equals the model. At
 * larger K only reported: cuBLASLt's K order, split-K and promotion interval are not published,
 * and the GEMM level (32-term MMAs in k order, chained or promoted every 128 terms) can match
 * only as far as they agree with fp8lab's assumption.
 *
 * On the emulator (FP8LAB_TC_EMU): the mock cuBLASLt (tests/gpu/mock_cuda.c) computes in double,
 * a reference implementation, not tensor-core hardware. The same plumbing runs (operands,
 * options, fp8_gemm_lt_fp8_tn, download, the model on the CPU) and its output must equal the
 * exact sum rounded once bit for bit (which checks the orientation y = A B^T and the fast-accum
 * option reaching the plan); lines start "emulator:". Then, with nothing failed, the hardware
 * comparison is reported as "skipped: no CUDA device (...)", exit 77.
 */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "fp8.h"
#include "gemm.h"
#include "gemm_lt.h"
#include "gpu_harness.h"
#include "tensorcore.h"

enum { TM = 64, TN = 64 };
static const int64_t KS[] = {32, 64, 128, 4096};
#define NK ((int)(sizeof KS / sizeof KS[0]))

static fp8_gemm_lt *ctx;
static char err[1024];
static fp8_tc_model model = FP8_TC_H100;
static int cc_major, cc_minor;

#ifdef FP8LAB_TC_EMU
#define TAG "emulator:"
#else
#define TAG "tensorcore:"
#endif

/* ---------------------------------------------------------------- data */

static uint64_t splitmix64(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* An E4M3 code: 1 in 8 a zero (+0 or -0); otherwise a random sign, exponent field 0..15 (0:
 * subnormals) and 3-bit mantissa, the NaN codes (S.1111.111) drawn again. */
static uint8_t random_e4m3(uint64_t *s) {
  for (;;) {
    uint64_t r = splitmix64(s);
    uint8_t sign = (uint8_t)((r >> 8) & 0x80);
    if ((r & 7) == 0) return sign;
    uint8_t c = (uint8_t)(sign | ((r >> 16) & 0x7F));
    if ((c & 0x7F) == 0x7F) continue;
    return c;
  }
}

static uint32_t bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

/* Entries of y equal to ref bit for bit, and the largest |y - ref| / |ref| (0 where the bits
 * agree; +inf where ref is zero and y is not). */
static int64_t compare(const float *y, const float *ref, int64_t n, double *max_rel) {
  int64_t eq = 0;
  double mr = 0;
  for (int64_t i = 0; i < n; i++) {
    if (bits(y[i]) == bits(ref[i])) {
      eq++;
      continue;
    }
    double d = fabs((double)y[i] - (double)ref[i]);
    double r = ref[i] != 0.0f ? d / fabs((double)ref[i]) : (d > 0 ? INFINITY : 0.0);
    if (!(r <= mr)) mr = r; /* NaN wins too */
  }
  *max_rel = mr;
  return eq;
}

static void *dev_upload(const void *h, size_t bytes) {
  void *d = NULL;
  if (cudaMalloc(&d, bytes ? bytes : 1) != cudaSuccess) return NULL;
  if (bytes && cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
    cudaFree(d);
    return NULL;
  }
  return d;
}

/* ---------------------------------------------------------------- one (K, fast) case */

static void run_case(int64_t K, bool fast, uint64_t seed) {
  const int64_t nA = TM * K, nB = TN * K, nY = TM * TN;
  uint8_t *ca = malloc((size_t)nA), *cb = malloc((size_t)nB);
  float *va = malloc((size_t)nA * 4), *vb = malloc((size_t)nB * 4);
  float *y = malloc((size_t)nY * 4), *ym = malloc((size_t)nY * 4), *ye = malloc((size_t)nY * 4);
  uint8_t *d_a = NULL, *d_b = NULL;
  float *d_s = NULL, *d_y = NULL;
  const float ones[2] = {1.0f, 1.0f};
  GH_CHECK(ca && cb && va && vb && y && ym && ye, "host memory");
  if (!(ca && cb && va && vb && y && ym && ye)) goto done;

  uint64_t s = seed;
  const float *dec = fp8_decode_table(FP8_E4M3);
  for (int64_t i = 0; i < nA; i++) va[i] = dec[ca[i] = random_e4m3(&s)];
  for (int64_t i = 0; i < nB; i++) vb[i] = dec[cb[i] = random_e4m3(&s)];

  d_a = dev_upload(ca, (size_t)nA), d_b = dev_upload(cb, (size_t)nB);
  d_s = dev_upload(ones, sizeof ones);
  GH_CHECK(d_a && d_b && d_s && cudaMalloc((void **)&d_y, (size_t)nY * 4) == cudaSuccess,
           "device memory / upload for K = %lld", (long long)K);
  if (!(d_a && d_b && d_s && d_y)) goto done;

  fp8_gemm_lt_options opt = fp8_gemm_lt_options_default();
  opt.fast_accum[FP8_GEMM_FPROP] = fast;
  fp8_gemm_lt_set_options(ctx, &opt);
  fp8_lt_operand P = {.codes = d_a, .scale_inv = d_s, .format = FP8_E4M3};
  fp8_lt_operand Q = {.codes = d_b, .scale_inv = d_s + 1, .format = FP8_E4M3};
  int rc = fp8_gemm_lt_fp8_tn(ctx, FP8_GEMM_FPROP, &P, &Q, TM, TN, K, FP8_LT_F32, d_y, NULL, err,
                              sizeof err);
  if (rc == FP8_OK) rc = fp8_gemm_lt_sync(ctx, err, sizeof err);
  GH_CHECK(rc == FP8_OK, "K = %lld fast = %d: fp8_gemm_lt_fp8_tn: %s", (long long)K, fast, err);
  if (rc != FP8_OK) goto done;
  GH_CHECK(cudaMemcpy(y, d_y, (size_t)nY * 4, cudaMemcpyDeviceToHost) == cudaSuccess,
           "download of y");
  fp8_gemm_lt_info info = fp8_gemm_lt_last_info(ctx);
  GH_CHECK(info.fast_accum == fast && !info.padded && info.copies == 0,
           "K = %lld: info fast_accum %d (expected %d), padded %d, copies %d (expected 0, 0)",
           (long long)K, info.fast_accum, fast, info.padded, info.copies);

  fp8_tc_block(model, FP8_E4M3, FP8_E4M3, TM, TN, K, va, vb, fast ? 0 : FP8_TC_PROMOTE, 1.0f,
               ym);
  for (int64_t i = 0; i < TM; i++)
    for (int64_t j = 0; j < TN; j++) {
      double acc = 0; /* exact: see the top of the file */
      for (int64_t t = 0; t < K; t++) acc += (double)va[i * K + t] * (double)vb[j * K + t];
      ye[i * TN + j] = (float)acc;
    }

  double rel_m, rel_e;
  int64_t eq_m = compare(y, ym, nY, &rel_m), eq_e = compare(y, ye, nY, &rel_e);
  const char *closer = eq_m > eq_e ? "model" : eq_e > eq_m ? "exact" : "neither";
#ifdef FP8LAB_TC_EMU
  printf(TAG " K=%-4lld fast=%-3s mock cuBLASLt (double, a reference) vs exact %lld/%d"
             " bit-equal (max rel diff %.3g); vs model %s %lld/%d (max rel diff %.3g)\n",
         (long long)K, fast ? "on" : "off", (long long)eq_e, (int)nY, rel_e,
         fp8_tc_model_name(model), (long long)eq_m, (int)nY, rel_m);
  GH_CHECK(eq_e == nY, "K = %lld fast = %d: the mock's GEMM differs from the exact sum rounded"
                       " once in %lld of %d entries (max rel %.3g): the plumbing (orientation,"
                       " operands) is wrong",
           (long long)K, fast, (long long)(nY - eq_e), (int)nY, rel_e);
#else
  printf(TAG " %s K=%-4lld fast=%-3s model %lld/%d bit-equal (max rel diff %.3g), exact"
             " %lld/%d bit-equal (max rel diff %.3g); closer: %s%s\n",
         fp8_tc_model_name(model), (long long)K, fast ? "on" : "off", (long long)eq_m, (int)nY,
         rel_m, (long long)eq_e, (int)nY, rel_e, closer,
         K == FP8_TC_MMA_K ? " [asserted: one MMA]" : " [reported only]");
  if (K == FP8_TC_MMA_K) {
    /* the first differing entry, for the reader */
    for (int64_t i = 0; i < nY; i++)
      if (bits(y[i]) != bits(ym[i])) {
        GH_CHECK(0, "K = 32 fast = %d: %lld of %d entries differ from the %s model; first"
                    " y[%lld][%lld] = %a (0x%08x), model %a (0x%08x), exact %a",
                 fast, (long long)(nY - eq_m), (int)nY, fp8_tc_model_name(model),
                 (long long)(i / TN), (long long)(i % TN), y[i], bits(y[i]), ym[i], bits(ym[i]),
                 ye[i]);
        break;
      }
    GH_CHECK(eq_m == nY, "K = 32: %lld entries differ", (long long)(nY - eq_m));
  }
#endif
  fflush(stdout);
  (void)closer;

done:
  cudaFree(d_a), cudaFree(d_b), cudaFree(d_s), cudaFree(d_y);
  free(ca), free(cb), free(va), free(vb), free(y), free(ym), free(ye);
}

static void test_gemm_vs_model(void) {
#ifdef FP8LAB_TC_EMU
  printf(TAG " the mock cuBLASLt (exact, in double), E4M3 x E4M3 -> FP32, M = N = %d, scale_inv"
             " 1; the %s model computed alongside (sm_%d%d), nothing compared with hardware\n",
         TM, fp8_tc_model_name(model), cc_major, cc_minor);
#else
  printf(TAG " cuBLASLt E4M3 x E4M3 -> FP32, M = N = %d, scale_inv 1, model %s (sm_%d%d);"
             " K = 32 is one MMA from c = 0 (asserted bit for bit); K > 32 reported only:"
             " cuBLASLt's K order, split-K and promotion interval are not published, fp8lab"
             " assumes 32-term MMAs in k order, chained (fast) or promoted every %d terms\n",
         TM, fp8_tc_model_name(model), cc_major, cc_minor, FP8_TC_PROMOTE);
#endif
  for (int k = 0; k < NK; k++)
    for (int f = 1; f >= 0; f--)
      run_case(KS[k], f == 1, UINT64_C(0x7e45c0de00) + (uint64_t)k * 2u + (uint64_t)f);
  fp8_gemm_lt_options def = fp8_gemm_lt_options_default();
  fp8_gemm_lt_set_options(ctx, &def);
}

int main(void) {
  char why[512] = "";
  fp8_gpu_info info;
  if (fp8_gpu_probe(0, &info, why, sizeof why) != 0) gh_skip(why);
  printf("device 0: %s, sm_%d%d\n", info.name, info.cc_major, info.cc_minor);
  cc_major = info.cc_major, cc_minor = info.cc_minor;
#ifndef FP8LAB_TC_EMU
  if (cc_major == 9) model = FP8_TC_H100;
  else if (cc_major == 10) model = FP8_TC_B200;
  else {
    snprintf(why, sizeof why,
             "compute capability %d.%d (%s) has no tensor-core model: 9.x is h100, 10.x b200",
             cc_major, cc_minor, info.name);
    gh_skip(why);
  }
#endif
  int rc = fp8_gemm_lt_create(&ctx, 0, err, sizeof err);
  if (rc == FP8_EDEVICE && strstr(err, "compute capability")) gh_skip(err); /* pre-Ada GPU */
  GH_CHECK(rc == FP8_OK, "fp8_gemm_lt_create: %s", err);
  if (rc) return gh_summary();
  GH_RUN(test_gemm_vs_model);
  fp8_gemm_lt_free(ctx);
#ifdef FP8LAB_TC_EMU
  if (gh_failed) return gh_summary();
  printf("plumbing: %d checks passed\n", gh_passed);
  gh_skip("CUDA emulator: its cuBLASLt is an exact reference, not tensor-core hardware; the"
          " comparison with the model needs a GPU (scripts/device-check.sh)");
#endif
  return gh_summary();
}
