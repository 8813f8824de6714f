/* timeline_test.h: what the two files of test_gpu_timeline_kernels share (the test program of
 * the timeline kernels, kernels/timeline.cu: test_gpu_timeline_kernels.c has the cast_transpose
 * tests and main, timeline_state_tests.c the amax, scale, gather, delayed-update, fill and
 * argument tests): the stream, the random numbers, dtype conversions done on the host, device
 * copies on the stream and the generator of test data. Header-only (static inline). */
#ifndef FP8LAB_TESTS_GPU_TIMELINE_TEST_H
#define FP8LAB_TESTS_GPU_TIMELINE_TEST_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <cuda_runtime.h>

#include "fp8.h"
#include "fp8k.h"
#include "gpu_harness.h"

extern cudaStream_t g_stream; /* created with cudaStreamNonBlocking; every launch goes on it */
extern char g_err[512];
#define GUARD 64 /* bytes checked untouched around each output */

static uint64_t rng_state = 0x243F6A8885A308D3ull;
static inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static inline uint64_t rnd(void) { return mix64(rng_state += 0x9E3779B97F4A7C15ull); }
static inline double rnd01(void) { return (double)(rnd() >> 11) / 9007199254740992.0; }
static inline uint32_t f2u(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static inline float u2f(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* Float32 to BF16 / F16 bits, round to nearest even (what __float2bfloat16_rn and
 * __float2half_rn do for the values used here; NaN becomes a quiet NaN). */
static inline uint32_t to_bf16(float f) {
  uint32_t u = f2u(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (u >> 16) | 0x40u;
  return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
}
static inline uint32_t to_f16(float f) {
  uint32_t u = f2u(f), sign = (u >> 16) & 0x8000u, a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return sign | 0x7E00u;
  if (a >= 0x477FF000u) return sign | 0x7C00u;            /* >= 65520: inf */
  if (a < 0x38800000u)                                     /* below 2^-14: m 2^-24 */
    return sign | (uint32_t)nearbyintf(fabsf(f) * 0x1p24f); /* 1024 is the smallest normal */
  return sign | ((a + 0xFFFu + ((a >> 13) & 1u) - (112u << 23)) >> 13);
}
static inline uint32_t to_dtype(float f, fp8_dtype d) {
  return d == FP8_DTYPE_F32 ? f2u(f) : d == FP8_DTYPE_BF16 ? to_bf16(f) : to_f16(f);
}
static inline float widen(uint32_t bits, fp8_dtype d) {
  uint16_t h = (uint16_t)bits;
  return d == FP8_DTYPE_F32 ? u2f(bits) : d == FP8_DTYPE_BF16 ? fp8_bf16_to_f32(h)
                                                             : fp8_f16_to_f32(h);
}
static inline void put_bits(unsigned char *p, fp8_dtype d, int64_t i, uint32_t bits) {
  size_t es = fp8_dtype_size(d);
  for (size_t b = 0; b < es; b++) p[(size_t)i * es + b] = (unsigned char)(bits >> (8 * b));
}

/* cudaMalloc'ed, or NULL; copies on g_stream, synchronized (the stream does not wait for the
 * legacy default stream, so every copy goes on it). */
static inline void *dalloc(size_t n) {
  void *p = NULL;
  return cudaMalloc(&p, n ? n : 1) == cudaSuccess ? p : NULL;
}
static inline int h2d(void *d, const void *h, size_t n) {
  return cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, g_stream) == cudaSuccess &&
         cudaStreamSynchronize(g_stream) == cudaSuccess;
}
static inline int d2h(void *h, const void *d, size_t n) {
  return cudaMemcpyAsync(h, d, n, cudaMemcpyDeviceToHost, g_stream) == cudaSuccess &&
         cudaStreamSynchronize(g_stream) == cudaSuccess;
}
static inline int dset(void *d, int v, size_t n) {
  return cudaMemsetAsync(d, v, n, g_stream) == cudaSuccess &&
         cudaStreamSynchronize(g_stream) == cudaSuccess;
}

/* First index where two byte arrays differ, or -1. */
static inline int64_t first_diff(const uint8_t *a, const uint8_t *b, int64_t n, int64_t *count) {
  int64_t first = -1;
  *count = 0;
  for (int64_t i = 0; i < n; i++)
    if (a[i] != b[i]) {
      if (first < 0) first = i;
      ++*count;
    }
  return first;
}
/* Bytes [0, n) all equal to v? */
static inline int all_bytes(const uint8_t *p, size_t n, uint8_t v) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != v) return 0;
  return 1;
}

static int64_t g_ties; /* ties generated (the test checks that there are some) */

/* One element for scale s: log-uniform |x s| over 2^-22 .. 2^17 (FP8 underflow, subnormals,
 * normals, overflow), FP8 ties after scaling (x s exactly the midpoint of two adjacent codes of
 * either format), values beyond max, special values and random bit patterns. */
static inline uint32_t gen_bits(fp8_dtype d, float s) {
  const double u = rnd01();
  const uint32_t sign = (uint32_t)(rnd() & 1);
  float x;
  if (u < 0.06) {
    const uint32_t exp = d == FP8_DTYPE_F32 ? 0x7F800000u : d == FP8_DTYPE_BF16 ? 0x7F80u : 0x7C00u;
    const uint32_t top = d == FP8_DTYPE_F32 ? 0x80000000u : 0x8000u;
    const uint32_t mant = d == FP8_DTYPE_F32 ? 0x7FFFFFu : d == FP8_DTYPE_BF16 ? 0x7Fu : 0x3FFu;
    switch (rnd() % 6) {
    case 0: return (sign ? top : 0) | exp | (((uint32_t)rnd() & mant) | 1u); /* NaN */
    case 1: return (sign ? top : 0) | exp;                                     /* inf */
    case 2: return sign ? top : 0;                                             /* +-0 */
    case 3: return (sign ? top : 0) | (((uint32_t)rnd() & mant) | 1u);       /* subnormal */
    case 4: return (sign ? top : 0) | (exp - (mant + 1)) | mant;              /* max finite */
    default: return (uint32_t)rnd() & (d == FP8_DTYPE_F32 ? 0xFFFFFFFFu : 0xFFFFu);
    }
  }
  if (u < 0.2) { /* a tie after scaling, when dtype holds such an x */
    const fp8_format f = (fp8_format)(rnd() & 1);
    const float *tab = fp8_decode_table(f);
    const int c = (int)(rnd() % (f == FP8_E4M3 ? 0x7D : 0x7A));
    const float mid = (tab[c] + tab[c + 1]) * 0.5f, q = mid / s;
    const float cand[3] = {q, nextafterf(q, 0.0f), nextafterf(q, INFINITY)};
    for (int k = 0; k < 3; k++) {
      const uint32_t b = to_dtype(cand[k], d);
      if (widen(b, d) * s == mid) {
        g_ties++;
        return b | (sign ? (d == FP8_DTYPE_F32 ? 0x80000000u : 0x8000u) : 0u);
      }
    }
  }
  if (u < 0.3) x = (float)(448.0 + 1e5 * rnd01()) / s; /* beyond E4M3's max, some E5M2's */
  else x = (float)ldexp(1.0 + rnd01(), -22 + (int)(rnd() % 39)) / s;
  return to_dtype(sign ? -x : x, d);
}

/* Runs the tests of timeline_state_tests.c and adds their check counts to *passed, *failed (the
 * caller's gh_passed, gh_failed: the harness counts per file). */
void timeline_state_tests(int *passed, int *failed);

#endif
