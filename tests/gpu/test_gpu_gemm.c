/* test_gpu_gemm.c: cuBLASLt's FP8 GEMMs (src/gpu/gemm_lt.h) against the CPU, label gpu.
 *
 * "Same operation, two implementations": the operands are quantized on the CPU by the simulator
 * (fp8_quantize_f32, per-tensor current scale, codes and dequantized values out), the codes and
 * scale_invs go to the device, and
 *   - every FP8 GEMM (fprop, dgrad, wgrad; FP32 and BF16 outputs) is compared with a double GEMM
 *     of the same dequantized operands, as a relative Frobenius difference and per element
 *     against an accumulation bound (|y - y_cpu| <= tol * sum_k |a_k b_k|), with a guard zone
 *     behind the output that must stay untouched;
 *   - the output amax (CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, or the fallback kernel) equals
 *     max |Y| of the output as written;
 *   - the device reference GEMM (FP32 and BF16 inputs) matches the CPU double GEMM, and the
 *     device rel_error matches src/engine/gemm.h's fp8_gemm_error (the CPU oracle of gemm.csv);
 *   - shapes with no dimension a multiple of 16 (padded on the device), one token, K = 0, the
 *     operand copies the layout mapping implies, errors (E5M2 x E5M2, missing operands), sign
 *     symmetry and the plan cache.
 * Without a device: "skipped: no CUDA device (reason)", exit 77. Tolerances: the table below.
 */
#include <cuda_runtime_api.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "fp8.h"
#include "gemm.h"
#include "gemm_lt.h"
#include "gpu_harness.h"

/* ---------------------------------------------------------------- tolerances
 * Against the double GEMM of the same dequantized operands (per GEMM: fprop, dgrad, wgrad):
 *  - fprop runs with FAST_ACCUM (TE's choice): Hopper's FP8 tensor cores then keep the whole
 *    K-sum in their internal accumulator, which retains ~14 significant bits (DeepSeek-V3
 *    report, sec. 3.3.2: up to ~2% relative error at K = 4096). The error grows with K; for the
 *    K <= 1024 used here 1e-2 (Frobenius) and 3e-2 of sum|a b| per element are the loosened
 *    limits. With fast accumulation off, fprop gets the dgrad/wgrad limits (test_rel_error).
 *  - dgrad / wgrad (no fast accumulation): cuBLASLt promotes the tensor-core partial sums to
 *    FP32 registers at short intervals, so only one interval's reduced-precision error remains:
 *    1e-3 Frobenius (expected ~1e-5 and below) and 4e-3 of sum|a b| per element.
 *  - BF16 outputs add their own rounding, at most 2^-9 relative per element: + 2^-8.
 * rel_error against gemm.h's fp8_gemm_error (FP8 error of ~3e-2 (E4M3) to ~6e-2 (E5M2) of ||Y||):
 *  1e-3 relative without fast accumulation; 2e-2 for fprop with it, whose accumulation error
 *  (up to ~1e-2 of ||Y||, in quadrature) moves rel_error by up to a few percent of itself.
 * The reference GEMMs (FP32 arithmetic, K <= 1024) against double: 1e-5 Frobenius. */
static const double TOL_FROB[FP8_GEMM_COUNT] = {1e-2, 1e-3, 1e-3};
static const double TOL_ELEM[FP8_GEMM_COUNT] = {3e-2, 4e-3, 4e-3};
static const double TOL_FROB_SLOW = 1e-3, TOL_ELEM_SLOW = 4e-3; /* fprop, FAST_ACCUM off */
static const double TOL_BF16_OUT = 1.0 / 256;
static const double TOL_REL_FAST = 2e-2, TOL_REL_SLOW = 1e-3;
static const double TOL_REF = 1e-5;

static const char *GN[FP8_GEMM_COUNT] = {"fprop", "dgrad", "wgrad"};

/* ---------------------------------------------------------------- data */

static uint64_t rng_state;
static double rng_uniform(void) { /* xorshift64*, (0, 1) */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return ((double)((rng_state * 2685821657736338717ull) >> 11) + 0.5) / 9007199254740992.0;
}
static double rng_normal(void) {
  return sqrt(-2.0 * log(rng_uniform())) * cos(6.283185307179586 * rng_uniform());
}

static uint16_t f32_to_bf16(float f) { /* round to nearest even */
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
static float bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* One layer: originals, simulator quantization, device copies. */
typedef struct {
  int64_t T, in, out;
  float *x, *w, *dy;       /* host originals: input [T,in], weight [out,in], grad_output [T,out] */
  float *xq, *wq, *dyq;    /* host dequantized */
  uint8_t *cx, *cw, *cdy;  /* host codes */
  float scale[3];          /* input, weight, grad_output */
  fp8_format fmt[3];
  uint8_t *d_cx, *d_cw, *d_cdy;
  float *d_sinv;           /* device [3]: scale_inv of input, weight, grad_output */
  float *d_x, *d_w, *d_dy; /* device originals (FP32) */
  fp8_lt_layer layer;
} fixture;

static void *dev_upload(const void *h, size_t bytes) {
  void *d = NULL;
  if (cudaMalloc(&d, bytes ? bytes : 1) != cudaSuccess) return NULL;
  if (bytes && cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
    cudaFree(d);
    return NULL;
  }
  return d;
}

static void quantize(const float *x, size_t n, fp8_format f, float *scale, uint8_t *codes,
                     float *xq) {
  fp8_current_params p = {.amax_epsilon = 0.0f, .pow2 = false, .margin = 0, .format = f};
  *scale = fp8_current_scale(&p, fp8_amax_f32(x, n));
  fp8_quantize_f32(x, n, *scale, f, codes, xq, NULL);
}

static void fixture_free(fixture *fx) {
  free(fx->x), free(fx->w), free(fx->dy);
  free(fx->xq), free(fx->wq), free(fx->dyq);
  free(fx->cx), free(fx->cw), free(fx->cdy);
  cudaFree(fx->d_cx), cudaFree(fx->d_cw), cudaFree(fx->d_cdy), cudaFree(fx->d_sinv);
  cudaFree(fx->d_x), cudaFree(fx->d_w), cudaFree(fx->d_dy);
  memset(fx, 0, sizeof *fx);
}

/* Input with outlier channels (every 17th column 30x), small weights, heavy-tailed gradients of
 * 1e-4 (the scales then differ by orders of magnitude, as in training). hybrid formats unless
 * given. Returns 0 on success. */
static int fixture_init(fixture *fx, int64_t T, int64_t in, int64_t out, fp8_format fin,
                        fp8_format fw, fp8_format fdy, uint64_t seed) {
  memset(fx, 0, sizeof *fx);
  rng_state = seed * 0x9E3779B97F4A7C15ull + 1;
  fx->T = T, fx->in = in, fx->out = out;
  fx->fmt[0] = fin, fx->fmt[1] = fw, fx->fmt[2] = fdy;
  size_t nx = (size_t)(T * in), nw = (size_t)(out * in), ndy = (size_t)(T * out);
  fx->x = malloc(nx * 4 + 4), fx->w = malloc(nw * 4 + 4), fx->dy = malloc(ndy * 4 + 4);
  fx->xq = malloc(nx * 4 + 4), fx->wq = malloc(nw * 4 + 4), fx->dyq = malloc(ndy * 4 + 4);
  fx->cx = malloc(nx + 1), fx->cw = malloc(nw + 1), fx->cdy = malloc(ndy + 1);
  if (!fx->x || !fx->w || !fx->dy || !fx->xq || !fx->wq || !fx->dyq || !fx->cx || !fx->cw || !fx->cdy)
    return -1;
  for (int64_t t = 0; t < T; t++)
    for (int64_t i = 0; i < in; i++)
      fx->x[t * in + i] = (float)(rng_normal() * (i % 17 == 3 ? 30.0 : 1.0));
  for (size_t i = 0; i < nw; i++) fx->w[i] = (float)(0.05 * rng_normal());
  for (size_t i = 0; i < ndy; i++)
    fx->dy[i] = (float)(1e-4 * rng_normal() * (rng_uniform() < 0.01 ? 10.0 : 1.0));
  quantize(fx->x, nx, fin, &fx->scale[0], fx->cx, fx->xq);
  quantize(fx->w, nw, fw, &fx->scale[1], fx->cw, fx->wq);
  quantize(fx->dy, ndy, fdy, &fx->scale[2], fx->cdy, fx->dyq);
  float sinv[3];
  for (int i = 0; i < 3; i++) sinv[i] = 1.0f / fx->scale[i]; /* RN32(1/s), as the simulator */
  fx->d_cx = dev_upload(fx->cx, nx), fx->d_cw = dev_upload(fx->cw, nw);
  fx->d_cdy = dev_upload(fx->cdy, ndy), fx->d_sinv = dev_upload(sinv, sizeof sinv);
  fx->d_x = dev_upload(fx->x, nx * 4), fx->d_w = dev_upload(fx->w, nw * 4);
  fx->d_dy = dev_upload(fx->dy, ndy * 4);
  if (!fx->d_cx || !fx->d_cw || !fx->d_cdy || !fx->d_sinv || !fx->d_x || !fx->d_w || !fx->d_dy)
    return -2;
  fx->layer = (fp8_lt_layer){
      .tokens = T, .in = in, .out = out,
      .input = {.codes = fx->d_cx, .scale_inv = fx->d_sinv + 0, .format = fin},
      .weight = {.codes = fx->d_cw, .scale_inv = fx->d_sinv + 1, .format = fw},
      .grad_output = {.codes = fx->d_cdy, .scale_inv = fx->d_sinv + 2, .format = fdy}};
  return 0;
}

/* The operands of GEMM g in gemm.h's order (a, b), host dequantized or original. */
static const float *op_a(const fixture *fx, fp8_gemm_kind g, int deq) {
  return g == FP8_GEMM_FPROP ? (deq ? fx->xq : fx->x) : (deq ? fx->dyq : fx->dy);
}
static const float *op_b(const fixture *fx, fp8_gemm_kind g, int deq) {
  return g == FP8_GEMM_WGRAD ? (deq ? fx->xq : fx->x) : (deq ? fx->wq : fx->w);
}

/* CPU double GEMM g of a, b in their stored layouts (gemm.h): y [rows, cols] and, when s is not
 * NULL, s = sum_k |a b| per element (the scale of the accumulation error). */
static void cpu_gemm(fp8_gemm_kind g, const float *a, const float *b, int64_t T, int64_t in,
                     int64_t out, double *y, double *s) {
  int64_t M, N, K;
  fp8_gemm_lt_shape(g, T, in, out, &M, &N, &K);
  double *p = malloc((size_t)(M * K + 1) * sizeof *p), *q = malloc((size_t)(K * N + 1) * sizeof *q);
  /* P [M, K], Q [K, N] with Y = P Q. */
  for (int64_t m = 0; m < M; m++)
    for (int64_t k = 0; k < K; k++)
      p[m * K + k] = g == FP8_GEMM_WGRAD ? a[k * out + m] : a[m * K + k];
  for (int64_t k = 0; k < K; k++)
    for (int64_t n = 0; n < N; n++)
      q[k * N + n] = g == FP8_GEMM_FPROP ? b[n * in + k] : b[k * N + n];
  for (int64_t i = 0; i < M * N; i++) {
    y[i] = 0;
    if (s) s[i] = 0;
  }
  for (int64_t m = 0; m < M; m++)
    for (int64_t k = 0; k < K; k++) {
      const double pk = p[m * K + k];
      const double *qk = q + k * N;
      double *ym = y + m * N;
      for (int64_t n = 0; n < N; n++) ym[n] += pk * qk[n];
      if (s) {
        double *sm = s + m * N;
        for (int64_t n = 0; n < N; n++) sm[n] += fabs(pk * qk[n]);
      }
    }
  free(p);
  free(q);
}

/* ---------------------------------------------------------------- comparing */

#define GUARD 256 /* bytes behind each device output that must stay 0xAB */

typedef struct {
  double frob;      /* ||y - y_cpu|| / ||y_cpu|| */
  double worst;     /* max over elements of |y - y_cpu| / bound */
  int64_t worst_i;
  double amax_host; /* max |y| of y as downloaded */
  int guard_ok;
} comparison;

static float y_at(const void *y, fp8_lt_dtype t, int64_t i) {
  return t == FP8_LT_BF16 ? bf16_to_f32(((const uint16_t *)y)[i]) : ((const float *)y)[i];
}

static comparison compare(const void *y, fp8_lt_dtype t, const double *ycpu, const double *s,
                          int64_t n, double tol_elem, const uint8_t *guard) {
  comparison c = {0, 0, -1, 0, 1};
  double d2 = 0, r2 = 0;
  for (int64_t i = 0; i < n; i++) {
    const double v = y_at(y, t, i), d = v - ycpu[i];
    d2 += d * d;
    r2 += ycpu[i] * ycpu[i];
    const double bound = tol_elem * s[i] + (t == FP8_LT_BF16 ? TOL_BF16_OUT * fabs(ycpu[i]) : 0);
    const double ratio = bound > 0 ? fabs(d) / bound : (d == 0 ? 0 : INFINITY);
    if (!(ratio <= c.worst)) c.worst = ratio, c.worst_i = i; /* NaN counts as worst */
    if (fabs(v) > c.amax_host) c.amax_host = fabs(v);
  }
  c.frob = r2 > 0 ? sqrt(d2 / r2) : (d2 > 0 ? INFINITY : 0);
  for (int i = 0; i < GUARD; i++)
    if (guard[i] != 0xAB) c.guard_ok = 0;
  return c;
}

/* Device output buffer with a guard zone; y host copy + guard bytes after fetch. */
typedef struct {
  void *d;
  void *h;
  size_t bytes;
  uint8_t guard[GUARD];
} outbuf;

static int outbuf_init(outbuf *o, size_t bytes) {
  memset(o, 0, sizeof *o);
  o->bytes = bytes;
  if (cudaMalloc(&o->d, bytes + GUARD) != cudaSuccess) return -1;
  if (cudaMemset(o->d, 0xAB, bytes + GUARD) != cudaSuccess) return -1;
  o->h = malloc(bytes + 1);
  return o->h ? 0 : -1;
}
static int outbuf_fetch(outbuf *o) {
  if (cudaMemcpy(o->h, o->d, o->bytes, cudaMemcpyDeviceToHost) != cudaSuccess) return -1;
  if (cudaMemcpy(o->guard, (uint8_t *)o->d + o->bytes, GUARD, cudaMemcpyDeviceToHost) != cudaSuccess)
    return -1;
  return 0;
}
static void outbuf_free(outbuf *o) {
  cudaFree(o->d);
  free(o->h);
  memset(o, 0, sizeof *o);
}

/* ---------------------------------------------------------------- shared state */

static fp8_gemm_lt *ctx;
static char err[1024];

typedef struct {
  int64_t T, in, out;
  const char *what;
} shape;

static const shape SHAPES[] = {
    {64, 128, 96, "all multiples of 16"},
    {100, 200, 72, "tokens, in not multiples of 16"},
    {37, 50, 23, "no dimension a multiple of 16"},
    {1, 16, 16, "one token"},
    {130, 1000, 17, "out = 17"},
    {256, 1024, 512, "K up to 1024"},
};
#define NSHAPES (sizeof SHAPES / sizeof SHAPES[0])

static int needs_copy(int64_t rows, int64_t k, int transposed) {
  return transposed || rows % 16 || k % 16;
}

/* The FP8 GEMM g of fx with output type t, checked against the CPU. tol_frob / tol_elem for
 * FP32 output (BF16 adds TOL_BF16_OUT). */
static void check_gemm(const fixture *fx, fp8_gemm_kind g, fp8_lt_dtype t, double tol_frob,
                       double tol_elem, const char *label) {
  int64_t M, N, K;
  fp8_gemm_lt_shape(g, fx->T, fx->in, fx->out, &M, &N, &K);
  const size_t es = t == FP8_LT_BF16 ? 2 : 4, n = (size_t)(M * N);
  double *ycpu = malloc((n + 1) * sizeof *ycpu), *s = malloc((n + 1) * sizeof *s);
  outbuf o;
  float *d_amax = NULL, amax = -1.0f;
  GH_REQUIRE(ycpu && s && outbuf_init(&o, n * es) == 0 &&
                 cudaMalloc((void **)&d_amax, sizeof(float)) == cudaSuccess,
             "allocation failed");
  cpu_gemm(g, op_a(fx, g, 1), op_b(fx, g, 1), fx->T, fx->in, fx->out, ycpu, s);
  int rc = fp8_gemm_lt_fp8(ctx, g, &fx->layer, t, o.d, d_amax, err, sizeof err);
  GH_CHECK(rc == FP8_OK, "%s %s [T=%lld in=%lld out=%lld] %s out: rc %d: %s", label, GN[g],
           (long long)fx->T, (long long)fx->in, (long long)fx->out, t == FP8_LT_BF16 ? "bf16" : "f32",
           rc, err);
  if (rc == FP8_OK) {
    fp8_gemm_lt_info info = fp8_gemm_lt_last_info(ctx);
    GH_CHECK(fp8_gemm_lt_sync(ctx, err, sizeof err) == FP8_OK && outbuf_fetch(&o) == 0 &&
                 cudaMemcpy(&amax, d_amax, 4, cudaMemcpyDeviceToHost) == cudaSuccess,
             "%s %s: after the GEMM: %s", label, GN[g], err);
    const double tf = tol_frob + (t == FP8_LT_BF16 ? TOL_BF16_OUT : 0);
    comparison c = compare(o.h, t, ycpu, s, (int64_t)n, tol_elem, o.guard);
    printf("  %-5s %s %-5s T=%-4lld in=%-5lld out=%-4lld frob %.3e (tol %.1e) worst elem %.3f of "
           "bound, amax %s, copies %d%s, workspace %zu\n",
           label, GN[g], t == FP8_LT_BF16 ? "bf16" : "f32", (long long)fx->T, (long long)fx->in,
           (long long)fx->out, c.frob, tf, c.worst, info.amax_cublaslt ? "cuBLASLt" : "kernel",
           info.copies, info.padded ? ", padded" : "", info.workspace);
    GH_CHECK(c.frob <= tf, "%s %s %s out [T=%lld in=%lld out=%lld]: ||Y - Y_cpu|| / ||Y_cpu|| = "
             "%.3e, expected <= %.1e (Y_cpu: double GEMM of the same dequantized operands)",
             label, GN[g], t == FP8_LT_BF16 ? "bf16" : "f32", (long long)fx->T, (long long)fx->in,
             (long long)fx->out, c.frob, tf);
    if (c.worst_i >= 0)
      GH_CHECK(c.worst <= 1.0, "%s %s %s out: element [%lld, %lld] = %.9g, CPU %.9g, "
               "|diff| is %.3f x its bound (%.1e x sum|ab| = %.3g%s)", label, GN[g],
               t == FP8_LT_BF16 ? "bf16" : "f32", (long long)(c.worst_i / N),
               (long long)(c.worst_i % N), y_at(o.h, t, c.worst_i), ycpu[c.worst_i], c.worst,
               tol_elem, s[c.worst_i], t == FP8_LT_BF16 ? " + bf16 rounding" : "");
    GH_CHECK(c.guard_ok, "%s %s: bytes behind the [%lld, %lld] output were overwritten (padded "
             "output copied with the wrong pitch?)", label, GN[g], (long long)M, (long long)N);
    /* amax: exact for FP32 output and for the kernel; a cuBLASLt amax of a BF16 output may be
     * taken before the output's rounding. */
    const double amax_tol = (t == FP8_LT_BF16 && info.amax_cublaslt) ? TOL_BF16_OUT * c.amax_host : 0;
    GH_CHECK(fabs((double)amax - c.amax_host) <= amax_tol,
             "%s %s %s out: amax %.9g (from %s), max|Y| of the output %.9g (tolerance %.3g)",
             label, GN[g], t == FP8_LT_BF16 ? "bf16" : "f32", (double)amax,
             info.amax_cublaslt ? "CUBLASLT_MATMUL_DESC_AMAX_D_POINTER" : "the amax kernel",
             c.amax_host, amax_tol);
    /* The layout mapping of gemm_lt.h: which operands had to be copied. */
    int expect = 0;
    if (K > 0) {
      if (g == FP8_GEMM_FPROP) expect = needs_copy(N, K, 0) + needs_copy(M, K, 0);
      else if (g == FP8_GEMM_DGRAD) expect = 1 + needs_copy(M, K, 0);
      else expect = 2;
    }
    GH_CHECK(info.copies == expect, "%s %s: %d operand copies, the layout mapping needs %d",
             label, GN[g], info.copies, expect);
  }
  outbuf_free(&o);
  cudaFree(d_amax);
  free(ycpu);
  free(s);
}

/* ---------------------------------------------------------------- tests */

static void test_fp8_gemms_vs_cpu(void) {
  for (size_t i = 0; i < NSHAPES; i++) {
    fixture fx;
    int r = fixture_init(&fx, SHAPES[i].T, SHAPES[i].in, SHAPES[i].out, FP8_E4M3, FP8_E4M3,
                         FP8_E5M2, 100 + i);
    GH_CHECK(r == 0, "fixture %s: setup failed (%d)", SHAPES[i].what, r);
    if (r == 0) {
      printf(" shape %s: scales input %.6g weight %.6g grad_output %.6g\n", SHAPES[i].what,
             fx.scale[0], fx.scale[1], fx.scale[2]);
      for (int g = 0; g < FP8_GEMM_COUNT; g++)
        for (int t = 0; t < 2; t++)
          check_gemm(&fx, (fp8_gemm_kind)g, (fp8_lt_dtype)t, TOL_FROB[g], TOL_ELEM[g], "fp8");
    }
    fixture_free(&fx);
  }
}

/* Formats other than hybrid: e4m3 everywhere (E4M3 x E4M3 in the backward GEMMs too), and
 * E4M3 grad with E5M2 weight (cuBLASLt's E5M2 x E4M3 with the E5M2 on the A side). */
static void test_other_formats(void) {
  fixture fx;
  GH_REQUIRE(fixture_init(&fx, 48, 80, 64, FP8_E4M3, FP8_E4M3, FP8_E4M3, 7) == 0, "setup");
  for (int g = 0; g < FP8_GEMM_COUNT; g++)
    check_gemm(&fx, (fp8_gemm_kind)g, FP8_LT_F32, TOL_FROB[g], TOL_ELEM[g], "e4m3");
  fixture_free(&fx);
  GH_REQUIRE(fixture_init(&fx, 48, 80, 64, FP8_E5M2, FP8_E5M2, FP8_E4M3, 8) == 0, "setup");
  /* fprop is E5M2 x E5M2 here: not available (below); dgrad E4M3 x E5M2; wgrad E4M3 x E5M2. */
  for (int g = 1; g < FP8_GEMM_COUNT; g++)
    check_gemm(&fx, (fp8_gemm_kind)g, FP8_LT_F32, TOL_FROB[g], TOL_ELEM[g], "mixed");
  fixture_free(&fx);
}

static void test_fprop_without_fast_accum(void) {
  fp8_gemm_lt_options o = fp8_gemm_lt_options_default(), slow = o;
  slow.fast_accum[FP8_GEMM_FPROP] = false;
  fp8_gemm_lt_set_options(ctx, &slow);
  for (size_t i = 0; i < NSHAPES; i += 2) {
    fixture fx;
    if (fixture_init(&fx, SHAPES[i].T, SHAPES[i].in, SHAPES[i].out, FP8_E4M3, FP8_E4M3, FP8_E5M2,
                     200 + i) == 0)
      check_gemm(&fx, FP8_GEMM_FPROP, FP8_LT_F32, TOL_FROB_SLOW, TOL_ELEM_SLOW, "slow");
    else
      GH_CHECK(0, "setup failed");
    fixture_free(&fx);
  }
  fp8_gemm_lt_set_options(ctx, &o);
}

/* With cuBLASLt's amax switched off the kernel must give the same amax. */
static void test_amax_kernel_path(void) {
  fp8_gemm_lt_options o = fp8_gemm_lt_options_default(), k = o;
  k.amax_from_cublaslt = false;
  fp8_gemm_lt_set_options(ctx, &k);
  fixture fx;
  if (fixture_init(&fx, 100, 200, 72, FP8_E4M3, FP8_E4M3, FP8_E5M2, 300) == 0)
    for (int g = 0; g < FP8_GEMM_COUNT; g++)
      for (int t = 0; t < 2; t++)
        check_gemm(&fx, (fp8_gemm_kind)g, (fp8_lt_dtype)t, TOL_FROB[g], TOL_ELEM[g], "kamax");
  else
    GH_CHECK(0, "setup failed");
  fixture_free(&fx);
  fp8_gemm_lt_set_options(ctx, &o);
}

/* Device rel_error and reference GEMMs against src/engine/gemm.h (the CPU code behind gemm.csv). */
static void rel_error_case(const fixture *fx, bool fast_fprop) {
  fp8_gemm_lt_options o = fp8_gemm_lt_options_default(), mine = o;
  mine.fast_accum[FP8_GEMM_FPROP] = fast_fprop;
  fp8_gemm_lt_set_options(ctx, &mine);
  fp8_gemm_ref ref;
  int rc = fp8_gemm_ref_init(&ref, fx->x, fx->w, fx->dy, fx->T, fx->in, fx->out, 0);
  GH_CHECK(rc == FP8_OK, "fp8_gemm_ref_init: %s", fp8_strerror(rc));
  double gpu_rel[FP8_GEMM_COUNT] = {NAN, NAN, NAN};
  for (int g = 0; g < FP8_GEMM_COUNT && rc == FP8_OK; g++) {
    int64_t M, N;
    fp8_gemm_lt_shape((fp8_gemm_kind)g, fx->T, fx->in, fx->out, &M, &N, NULL);
    const size_t n = (size_t)(M * N);
    float *d_ref = NULL, *d_y = NULL, *h_ref = malloc(n * 4 + 4);
    if (cudaMalloc((void **)&d_ref, n * 4 + 4) != cudaSuccess ||
        cudaMalloc((void **)&d_y, n * 4 + 4) != cudaSuccess || !h_ref) {
      GH_CHECK(0, "allocation failed");
      goto next;
    }
    /* the device reference against gemm.h's double reference */
    int r = fp8_gemm_lt_ref(ctx, (fp8_gemm_kind)g, FP8_LT_F32, fx->d_x, fx->d_w, fx->d_dy, fx->T,
                            fx->in, fx->out, d_ref, err, sizeof err);
    GH_CHECK(r == FP8_OK, "%s reference: %s", GN[g], err);
    if (r) goto next;
    GH_CHECK(fp8_gemm_lt_sync(ctx, err, sizeof err) == 0 &&
                 cudaMemcpy(h_ref, d_ref, n * 4, cudaMemcpyDeviceToHost) == cudaSuccess,
             "%s reference: %s", GN[g], err);
    double d2 = 0, r2 = 0;
    for (size_t i = 0; i < n; i++) {
      double d = h_ref[i] - ref.y[g][i];
      d2 += d * d;
      r2 += ref.y[g][i] * ref.y[g][i];
    }
    GH_CHECK(sqrt(d2) <= TOL_REF * sqrt(r2), "%s FP32 reference GEMM vs gemm.h's double one: "
             "relative difference %.3e, expected <= %.0e (layout of fp8_gemm_lt_ref?)", GN[g],
             r2 > 0 ? sqrt(d2 / r2) : sqrt(d2), TOL_REF);
    /* rel_error: device vs gemm.h */
    r = fp8_gemm_lt_fp8(ctx, (fp8_gemm_kind)g, &fx->layer, FP8_LT_F32, d_y, NULL, err, sizeof err);
    if (r == FP8_OK)
      r = fp8_gemm_lt_rel_error(ctx, d_y, FP8_LT_F32, d_ref, (int64_t)n, &gpu_rel[g], err,
                                sizeof err);
    GH_CHECK(r == FP8_OK, "%s: %s", GN[g], err);
    if (r) goto next;
    double cpu_rel = NAN;
    r = fp8_gemm_error(&ref, (fp8_gemm_kind)g, op_a(fx, (fp8_gemm_kind)g, 1),
                       op_b(fx, (fp8_gemm_kind)g, 1), &cpu_rel);
    GH_CHECK(r == FP8_OK, "fp8_gemm_error: %s", fp8_strerror(r));
    const bool fast = mine.fast_accum[g];
    const double tol = fast ? TOL_REL_FAST : TOL_REL_SLOW;
    printf("  rel_error %s T=%lld in=%lld out=%lld %s: gpu %.6e cpu (gemm.h) %.6e, diff %.2e of "
           "cpu (tol %.0e)\n", GN[g], (long long)fx->T, (long long)fx->in, (long long)fx->out,
           fast ? "fast accum" : "", gpu_rel[g], cpu_rel, fabs(gpu_rel[g] - cpu_rel) / cpu_rel,
           tol);
    GH_CHECK(fabs(gpu_rel[g] - cpu_rel) <= tol * cpu_rel,
             "%s rel_error: device %.9g, gemm.h's fp8_gemm_error %.9g: relative difference "
             "%.3e, expected <= %.0e%s", GN[g], gpu_rel[g], cpu_rel,
             fabs(gpu_rel[g] - cpu_rel) / cpu_rel, tol, fast ? " (fast accumulation)" : "");
  next:
    cudaFree(d_ref);
    cudaFree(d_y);
    free(h_ref);
  }
  /* the layer-level API gives the same numbers */
  if (rc == FP8_OK) {
    double lr[FP8_GEMM_COUNT];
    float la[FP8_GEMM_COUNT];
    int r = fp8_gemm_lt_ref_layer(ctx, FP8_LT_F32, fx->d_x, fx->d_w, fx->d_dy, fx->T, fx->in,
                                  fx->out, err, sizeof err);
    if (r == FP8_OK) r = fp8_gemm_lt_layer_errors(ctx, &fx->layer, FP8_LT_F32, lr, la, err, sizeof err);
    GH_CHECK(r == FP8_OK, "layer API: %s", err);
    for (int g = 0; g < FP8_GEMM_COUNT && r == FP8_OK; g++) {
      GH_CHECK(fabs(lr[g] - gpu_rel[g]) <= 1e-12 * gpu_rel[g],
               "%s: fp8_gemm_lt_layer_errors gives %.17g, the per-GEMM calls %.17g", GN[g], lr[g],
               gpu_rel[g]);
      GH_CHECK(la[g] > 0 && isfinite(la[g]), "%s: layer amax %g", GN[g], (double)la[g]);
    }
  }
  fp8_gemm_ref_free(&ref);
  fp8_gemm_lt_set_options(ctx, &o);
}

static void test_rel_error_vs_gemm_h(void) {
  for (size_t i = 0; i < NSHAPES; i++) {
    fixture fx;
    if (fixture_init(&fx, SHAPES[i].T, SHAPES[i].in, SHAPES[i].out, FP8_E4M3, FP8_E4M3, FP8_E5M2,
                     400 + i) == 0) {
      rel_error_case(&fx, false);
      rel_error_case(&fx, true);
    } else {
      GH_CHECK(0, "setup failed");
    }
    fixture_free(&fx);
  }
}

/* The reference GEMM on BF16 inputs against a double GEMM of the BF16-rounded values. */
static void test_ref_bf16(void) {
  const int64_t T = 70, in = 96, out = 40;
  fixture fx;
  GH_REQUIRE(fixture_init(&fx, T, in, out, FP8_E4M3, FP8_E4M3, FP8_E5M2, 500) == 0, "setup");
  float *src[3] = {fx.x, fx.w, fx.dy};
  size_t cnt[3] = {(size_t)(T * in), (size_t)(out * in), (size_t)(T * out)};
  float *rounded[3];
  void *dev[3];
  for (int j = 0; j < 3; j++) {
    uint16_t *h = malloc(cnt[j] * 2);
    rounded[j] = malloc(cnt[j] * 4);
    for (size_t i = 0; i < cnt[j]; i++) {
      h[i] = f32_to_bf16(src[j][i]);
      rounded[j][i] = bf16_to_f32(h[i]);
    }
    dev[j] = dev_upload(h, cnt[j] * 2);
    free(h);
  }
  for (int g = 0; g < FP8_GEMM_COUNT; g++) {
    int64_t M, N;
    fp8_gemm_lt_shape((fp8_gemm_kind)g, T, in, out, &M, &N, NULL);
    const size_t n = (size_t)(M * N);
    float *d_y = NULL, *h_y = malloc(n * 4);
    double *ycpu = malloc(n * sizeof *ycpu);
    cudaMalloc((void **)&d_y, n * 4);
    int r = fp8_gemm_lt_ref(ctx, (fp8_gemm_kind)g, FP8_LT_BF16, dev[0], dev[1], dev[2], T, in, out,
                            d_y, err, sizeof err);
    GH_CHECK(r == FP8_OK, "%s bf16 reference: %s", GN[g], err);
    if (r == FP8_OK && cudaMemcpy(h_y, d_y, n * 4, cudaMemcpyDeviceToHost) == cudaSuccess) {
      const float *a = g == FP8_GEMM_FPROP ? rounded[0] : rounded[2];
      const float *b = g == FP8_GEMM_WGRAD ? rounded[0] : rounded[1];
      cpu_gemm((fp8_gemm_kind)g, a, b, T, in, out, ycpu, NULL);
      double d2 = 0, r2 = 0;
      for (size_t i = 0; i < n; i++) {
        d2 += (h_y[i] - ycpu[i]) * (h_y[i] - ycpu[i]);
        r2 += ycpu[i] * ycpu[i];
      }
      GH_CHECK(sqrt(d2) <= TOL_REF * sqrt(r2), "%s BF16-input reference: relative difference "
               "%.3e from the double GEMM, expected <= %.0e", GN[g], sqrt(d2 / r2), TOL_REF);
    }
    cudaFree(d_y);
    free(h_y);
    free(ycpu);
  }
  for (int j = 0; j < 3; j++) {
    cudaFree(dev[j]);
    free(rounded[j]);
  }
  fixture_free(&fx);
}

/* Negating the weight's codes (sign bit) negates fprop's output exactly; the amax stays. */
static void test_sign_symmetry(void) {
  const int64_t T = 64, in = 128, out = 48;
  fixture fx;
  GH_REQUIRE(fixture_init(&fx, T, in, out, FP8_E4M3, FP8_E4M3, FP8_E5M2, 600) == 0, "setup");
  uint8_t *neg = malloc((size_t)(out * in));
  for (int64_t i = 0; i < out * in; i++) neg[i] = fx.cw[i] ^ 0x80;
  uint8_t *d_neg = dev_upload(neg, (size_t)(out * in));
  fp8_lt_layer l2 = fx.layer;
  l2.weight.codes = d_neg;
  const size_t n = (size_t)(T * out);
  float *d_y = NULL, *d_y2 = NULL, *d_am = NULL;
  float *h = malloc(n * 4), *h2 = malloc(n * 4), am[2] = {0, 0};
  cudaMalloc((void **)&d_y, n * 4), cudaMalloc((void **)&d_y2, n * 4);
  cudaMalloc((void **)&d_am, 8);
  int r = fp8_gemm_lt_fp8(ctx, FP8_GEMM_FPROP, &fx.layer, FP8_LT_F32, d_y, d_am, err, sizeof err);
  if (!r) r = fp8_gemm_lt_fp8(ctx, FP8_GEMM_FPROP, &l2, FP8_LT_F32, d_y2, d_am + 1, err, sizeof err);
  if (!r) r = fp8_gemm_lt_sync(ctx, err, sizeof err);
  GH_CHECK(r == FP8_OK, "fprop: %s", err);
  if (!r) {
    cudaMemcpy(h, d_y, n * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(h2, d_y2, n * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(am, d_am, 8, cudaMemcpyDeviceToHost);
    int64_t bad = -1;
    for (size_t i = 0; i < n && bad < 0; i++)
      if (h2[i] != -h[i]) bad = (int64_t)i;
    GH_CHECK(bad < 0, "fprop with negated weight codes: element %lld is %.9g, expected -(%.9g)",
             (long long)bad, bad >= 0 ? h2[bad] : 0.0, bad >= 0 ? h[bad] : 0.0);
    GH_CHECK(am[0] == am[1] && am[0] > 0, "amax %.9g with W, %.9g with -W", am[0], am[1]);
  }
  cudaFree(d_y), cudaFree(d_y2), cudaFree(d_am), cudaFree(d_neg);
  free(h), free(h2), free(neg);
  fixture_free(&fx);
}

static void test_errors_and_empty(void) {
  fixture fx;
  GH_REQUIRE(fixture_init(&fx, 32, 32, 32, FP8_E5M2, FP8_E5M2, FP8_E5M2, 700) == 0, "setup");
  float *d_y = NULL, *d_am = NULL, am = -1;
  cudaMalloc((void **)&d_y, 32 * 32 * 4);
  cudaMalloc((void **)&d_am, 4);
  for (int g = 0; g < FP8_GEMM_COUNT; g++) {
    err[0] = 0;
    int r = fp8_gemm_lt_fp8(ctx, (fp8_gemm_kind)g, &fx.layer, FP8_LT_F32, d_y, NULL, err, sizeof err);
    GH_CHECK(r == FP8_ERANGE && strstr(err, "E5M2 x E5M2"),
             "%s with both operands e5m2: rc %d (expected FP8_ERANGE), message \"%s\"", GN[g], r, err);
  }
  fp8_lt_layer l = fx.layer;
  l.input.format = l.weight.format = FP8_E4M3;
  l.tokens = -1;
  GH_CHECK(fp8_gemm_lt_fp8(ctx, FP8_GEMM_FPROP, &l, FP8_LT_F32, d_y, NULL, err, sizeof err) ==
               FP8_EINVAL, "negative tokens accepted");
  l.tokens = 32;
  l.weight.codes = NULL;
  err[0] = 0;
  GH_CHECK(fp8_gemm_lt_fp8(ctx, FP8_GEMM_DGRAD, &l, FP8_LT_F32, d_y, NULL, err, sizeof err) ==
               FP8_EINVAL && strstr(err, "weight"), "dgrad without weight: \"%s\"", err);
  l.weight = fx.layer.weight;
  l.weight.format = FP8_E4M3;
  l.input.scale_inv = NULL;
  GH_CHECK(fp8_gemm_lt_fp8(ctx, FP8_GEMM_FPROP, &l, FP8_LT_F32, d_y, NULL, err, sizeof err) ==
               FP8_EINVAL, "NULL scale_inv accepted");
  l.input.scale_inv = fx.layer.input.scale_inv;
  GH_CHECK(fp8_gemm_lt_fp8(ctx, FP8_GEMM_FPROP, &l, FP8_LT_F32, NULL, NULL, err, sizeof err) ==
               FP8_EINVAL, "NULL output accepted");
  /* K = 0 (wgrad over no tokens): zeros and amax 0; M = 0 (fprop of no tokens): nothing. */
  l.tokens = 0;
  l.grad_output.format = FP8_E5M2;
  cudaMemset(d_y, 0x7F, 32 * 32 * 4);
  cudaMemset(d_am, 0x7F, 4);
  int r = fp8_gemm_lt_fp8(ctx, FP8_GEMM_WGRAD, &l, FP8_LT_F32, d_y, d_am, err, sizeof err);
  if (!r) r = fp8_gemm_lt_sync(ctx, err, sizeof err);
  GH_CHECK(r == FP8_OK, "wgrad with 0 tokens: %s", err);
  float h[32 * 32];
  cudaMemcpy(h, d_y, sizeof h, cudaMemcpyDeviceToHost);
  cudaMemcpy(&am, d_am, 4, cudaMemcpyDeviceToHost);
  int nz = 0;
  for (int i = 0; i < 32 * 32; i++) nz += h[i] != 0.0f;
  GH_CHECK(nz == 0 && am == 0.0f, "wgrad with K = 0: %d non-zero outputs, amax %g", nz, am);
  r = fp8_gemm_lt_fp8(ctx, FP8_GEMM_FPROP, &l, FP8_LT_F32, d_y, d_am, err, sizeof err);
  GH_CHECK(r == FP8_OK, "fprop with 0 tokens: %s", err);
  cudaFree(d_y), cudaFree(d_am);
  fixture_free(&fx);
}

/* More shapes than the plan cache holds, then the first again: same bits. */
static void test_plan_cache(void) {
  fixture fx;
  GH_REQUIRE(fixture_init(&fx, 96, 160, 80, FP8_E4M3, FP8_E4M3, FP8_E5M2, 800) == 0, "setup");
  const size_t n = 96 * 80;
  float *d_y = NULL, *h1 = malloc(n * 4), *h2 = malloc(n * 4);
  cudaMalloc((void **)&d_y, n * 4);
  int r = fp8_gemm_lt_fp8(ctx, FP8_GEMM_FPROP, &fx.layer, FP8_LT_F32, d_y, NULL, err, sizeof err);
  if (!r) r = fp8_gemm_lt_sync(ctx, err, sizeof err);
  GH_CHECK(r == FP8_OK, "first run: %s", err);
  cudaMemcpy(h1, d_y, n * 4, cudaMemcpyDeviceToHost);
  for (int j = 1; j <= 70 && r == FP8_OK; j++) { /* smaller layers: same buffers, new plans
                                                    (70: more than the cache's 64) */
    fp8_lt_layer l = fx.layer;
    l.tokens = 96 - j % 10;
    l.out = 80 - j / 10;
    for (int g = 0; g < FP8_GEMM_COUNT && r == FP8_OK; g++) {
      /* the sub-layer reads a prefix of the buffers: valid memory, other numbers */
      if (g != FP8_GEMM_FPROP) continue;
      r = fp8_gemm_lt_fp8(ctx, (fp8_gemm_kind)g, &l, FP8_LT_F32, d_y, NULL, err, sizeof err);
    }
  }
  GH_CHECK(r == FP8_OK, "other shapes: %s", err);
  r = fp8_gemm_lt_fp8(ctx, FP8_GEMM_FPROP, &fx.layer, FP8_LT_F32, d_y, NULL, err, sizeof err);
  if (!r) r = fp8_gemm_lt_sync(ctx, err, sizeof err);
  GH_CHECK(r == FP8_OK, "repeat: %s", err);
  cudaMemcpy(h2, d_y, n * 4, cudaMemcpyDeviceToHost);
  GH_CHECK(memcmp(h1, h2, n * 4) == 0, "fprop after 70 other plans differs from the first run");
  cudaFree(d_y);
  free(h1), free(h2);
  fixture_free(&fx);
}

/* fp8_gemm_lt_fp8_tn on operands already in cuBLASLt's TN layout (W^T for dgrad, dY^T and X^T
 * for wgrad, transposed here on the host as TE's cast_transpose writes them), on a stream of
 * the caller's: the same bits as fp8_gemm_lt_fp8 on the layer, which transposes on the device;
 * a shape that is not a multiple of 16 (padded) and an aligned one. */
static void transpose_u8(const uint8_t *a, int64_t r, int64_t c, uint8_t *t) {
  for (int64_t i = 0; i < r; i++)
    for (int64_t j = 0; j < c; j++) t[j * r + i] = a[i * c + j];
}

static void test_fp8_tn(void) {
  static const int64_t shapes[2][3] = {{48, 32, 64}, {37, 50, 21}};
  cudaStream_t st = NULL;
  GH_REQUIRE(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) == cudaSuccess, "stream");
  fp8_gemm_lt_set_stream(ctx, st);
  for (int sh = 0; sh < 2; sh++) {
    const int64_t T = shapes[sh][0], I = shapes[sh][1], O = shapes[sh][2];
    fixture fx;
    GH_REQUIRE(fixture_init(&fx, T, I, O, FP8_E4M3, FP8_E4M3, FP8_E5M2, 900 + sh) == 0, "setup");
    uint8_t *wt = malloc((size_t)(O * I)), *dyt = malloc((size_t)(T * O)), *xt = malloc((size_t)(T * I));
    transpose_u8(fx.cw, O, I, wt), transpose_u8(fx.cdy, T, O, dyt), transpose_u8(fx.cx, T, I, xt);
    uint8_t *d_wt = dev_upload(wt, (size_t)(O * I)), *d_dyt = dev_upload(dyt, (size_t)(T * O));
    uint8_t *d_xt = dev_upload(xt, (size_t)(T * I));
    const fp8_lt_operand X = fx.layer.input, W = fx.layer.weight, DY = fx.layer.grad_output;
    const fp8_lt_operand Wt = {d_wt, W.scale_inv, W.format}, DYt = {d_dyt, DY.scale_inv, DY.format};
    const fp8_lt_operand Xt = {d_xt, X.scale_inv, X.format};
    const fp8_lt_operand *P[3] = {&X, &DY, &DYt}, *Q[3] = {&W, &Wt, &Xt};
    for (int g = 0; g < FP8_GEMM_COUNT; g++) {
      int64_t M, N, K;
      fp8_gemm_lt_shape((fp8_gemm_kind)g, T, I, O, &M, &N, &K);
      const size_t n = (size_t)(M * N);
      float *d_a = NULL, *d_b = NULL, *ha = malloc(n * 4 + 4), *hb = malloc(n * 4 + 4);
      cudaMalloc((void **)&d_a, n * 4 + 4), cudaMalloc((void **)&d_b, n * 4 + 4);
      int r = fp8_gemm_lt_fp8(ctx, (fp8_gemm_kind)g, &fx.layer, FP8_LT_F32, d_a, NULL, err,
                              sizeof err);
      if (!r) r = fp8_gemm_lt_fp8_tn(ctx, (fp8_gemm_kind)g, P[g], Q[g], M, N, K, FP8_LT_F32, d_b,
                                     NULL, err, sizeof err);
      if (!r) r = fp8_gemm_lt_sync(ctx, err, sizeof err);
      GH_CHECK(r == FP8_OK, "shape %d GEMM %d: %s", sh, g, err);
      cudaMemcpy(ha, d_a, n * 4, cudaMemcpyDeviceToHost);
      cudaMemcpy(hb, d_b, n * 4, cudaMemcpyDeviceToHost);
      GH_CHECK(r || memcmp(ha, hb, n * 4) == 0, "shape %d GEMM %d: the TN call differs", sh, g);
      GH_CHECK(r || fp8_gemm_lt_last_info(ctx).copies == ((M % 16 || N % 16 || K % 16) ? 2 : 0),
               "shape %d GEMM %d: %d copies", sh, g, fp8_gemm_lt_last_info(ctx).copies);
      cudaFree(d_a), cudaFree(d_b), free(ha), free(hb);
    }
    cudaFree(d_wt), cudaFree(d_dyt), cudaFree(d_xt), free(wt), free(dyt), free(xt);
    fixture_free(&fx);
  }
  fp8_gemm_lt_set_stream(ctx, NULL);
  cudaStreamDestroy(st);
}

int main(void) {
  gh_skip_without_device();
  int rc = fp8_gemm_lt_create(&ctx, 0, err, sizeof err);
  if (rc == FP8_EDEVICE && strstr(err, "compute capability")) gh_skip(err); /* pre-Ada GPU */
  GH_CHECK(rc == FP8_OK, "fp8_gemm_lt_create: %s", err);
  if (rc) return gh_summary();
  GH_RUN(test_fp8_gemms_vs_cpu);
  GH_RUN(test_other_formats);
  GH_RUN(test_fprop_without_fast_accum);
  GH_RUN(test_amax_kernel_path);
  GH_RUN(test_rel_error_vs_gemm_h);
  GH_RUN(test_ref_bf16);
  GH_RUN(test_sign_symmetry);
  GH_RUN(test_errors_and_empty);
  GH_RUN(test_plan_cache);
  GH_RUN(test_fp8_tn);
  fp8_gemm_lt_free(ctx);
  return gh_summary();
}
