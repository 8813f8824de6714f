/* gemm_block.c: the sampled GEMM error's small products (gemm.h, fp8_gemm_block_f32 / _f64):
 * a block Y = A B^T of p x q entries over a long reduction k (64 x 64 x 2048-8192 at the
 * defaults), once per configuration, layer, step and GEMM.
 *
 * Why not CBLAS: OpenBLAS reaches 12 GFLOP/s at these shapes on one core of the 2-core
 * development machine (44 at 2048^3: its blocking is made for large outputs); this kernel 38.
 * Here each entry is one chain of fused multiply-adds in the order of the
 * reduction index, y = fma(a_k, b_k, y) from k = 0, the same order whatever the block's size or
 * the instruction set: the plain build (fmaf / fma from libm, exact by C11) and the AVX2 + FMA
 * build give the same bits, and an entry does not depend on which other rows or columns were
 * drawn. The AVX2 kernel computes tiles of 6 rows x 16 float (8 double) columns, 12
 * accumulators, the columns of B packed per 256 reduction steps (16 KiB: L1), each tile's
 * chains carried from one panel to the next in a buffer. */
#include "gemm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define FP8_BLOCK_AVX2 1
#endif

#define MR 6     /* rows per tile */
#define NR32 16  /* columns per tile: two 8-float vectors, */
#define NR64 8   /* or two 4-double vectors (12 accumulators either way, of 16 registers) */
#define KC 256   /* reduction steps per packed panel */

/* The portable chains: the definition. */
void fp8_gemm_block_f32_plain(int64_t p, int64_t q, int64_t k, const float *a, const float *b,
                            float *y) {
  for (int64_t i = 0; i < p; i++)
    for (int64_t j = 0; j < q; j++) {
      float acc = 0.0f;
      const float *ai = a + i * k, *bj = b + j * k;
      for (int64_t t = 0; t < k; t++) acc = fmaf(ai[t], bj[t], acc);
      y[i * q + j] = acc;
    }
}

void fp8_gemm_block_f64_plain(int64_t p, int64_t q, int64_t k, const double *a, const double *b,
                            double *y) {
  for (int64_t i = 0; i < p; i++)
    for (int64_t j = 0; j < q; j++) {
      double acc = 0.0;
      const double *ai = a + i * k, *bj = b + j * k;
      for (int64_t t = 0; t < k; t++) acc = fma(ai[t], bj[t], acc);
      y[i * q + j] = acc;
    }
}

#ifdef FP8_BLOCK_AVX2
/* One tile: rows a[0..MR) (pointers at the block's first reduction step), the packed columns
 * bp [kc][NR], the tile's chains read from and written back to c [MR][NR]. */
__attribute__((target("avx2,fma"))) static void
tile_f32(const float *const a[MR], const float *bp, int64_t kc, float *c) {
  enum { NR = NR32 };
  __m256 acc[MR][2];
  for (int r = 0; r < MR; r++) {
    acc[r][0] = _mm256_loadu_ps(c + r * NR);
    acc[r][1] = _mm256_loadu_ps(c + r * NR + 8);
  }
  for (int64_t t = 0; t < kc; t++) {
    __m256 b0 = _mm256_loadu_ps(bp + t * NR), b1 = _mm256_loadu_ps(bp + t * NR + 8);
    for (int r = 0; r < MR; r++) {
      __m256 x = _mm256_broadcast_ss(a[r] + t);
      acc[r][0] = _mm256_fmadd_ps(x, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(x, b1, acc[r][1]);
    }
  }
  for (int r = 0; r < MR; r++) {
    _mm256_storeu_ps(c + r * NR, acc[r][0]);
    _mm256_storeu_ps(c + r * NR + 8, acc[r][1]);
  }
}

__attribute__((target("avx2,fma"))) static void
tile_f64(const double *const a[MR], const double *bp, int64_t kc, double *c) {
  enum { NR = NR64 };
  __m256d acc[MR][2];
  for (int r = 0; r < MR; r++) {
    acc[r][0] = _mm256_loadu_pd(c + r * NR);
    acc[r][1] = _mm256_loadu_pd(c + r * NR + 4);
  }
  for (int64_t t = 0; t < kc; t++) {
    __m256d b0 = _mm256_loadu_pd(bp + t * NR), b1 = _mm256_loadu_pd(bp + t * NR + 4);
    for (int r = 0; r < MR; r++) {
      __m256d x = _mm256_broadcast_sd(a[r] + t);
      acc[r][0] = _mm256_fmadd_pd(x, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_pd(x, b1, acc[r][1]);
    }
  }
  for (int r = 0; r < MR; r++) {
    _mm256_storeu_pd(c + r * NR, acc[r][0]);
    _mm256_storeu_pd(c + r * NR + 4, acc[r][1]);
  }
}

/* The tiled loop, once per element type: per KC reduction steps, B packed NR columns at a
 * time, step-major (zero beyond q), A read in place (missing rows read a zero row; packing A
 * measured slower), each tile's chains carried in a [MR][NR] buffer from one KC block to the
 * next and copied out at the end. Returns 0, or -1 out of memory. */
#define BLOCK_TILED(NAME, T, TILE, NR)                                                          \
  static int NAME(int64_t p, int64_t q, int64_t k, const T *a, const T *b, T *y) {              \
    int64_t tiles_i = (p + MR - 1) / MR, tiles_j = (q + NR - 1) / NR;                           \
    T *bp = malloc((size_t)(KC * NR) * sizeof *bp);                                             \
    T *zero = calloc((size_t)KC, sizeof *zero);                                                 \
    T *acc = calloc((size_t)(tiles_i * tiles_j * MR * NR), sizeof *acc);                        \
    if (!bp || !zero || !acc) {                                                                 \
      free(bp);                                                                                 \
      free(zero);                                                                               \
      free(acc);                                                                                \
      return -1;                                                                                \
    }                                                                                           \
    for (int64_t t0 = 0; t0 < k; t0 += KC) {                                                    \
      int64_t kc = k - t0 < KC ? k - t0 : KC;                                                   \
      for (int64_t tj = 0; tj < tiles_j; tj++) {                                                \
        for (int jj = 0; jj < NR; jj++) { /* row by row: B's rows are 4 KiB multiples apart */ \
          int64_t j = tj * NR + jj;                                                             \
          for (int64_t t = 0; t < kc; t++) bp[t * NR + jj] = j < q ? b[j * k + t0 + t] : (T)0;  \
        }                                                                                       \
        for (int64_t ti = 0; ti < tiles_i; ti++) {                                              \
          const T *rows[MR];                                                                    \
          for (int r = 0; r < MR; r++) {                                                        \
            int64_t i = ti * MR + r;                                                            \
            rows[r] = i < p ? a + i * k + t0 : zero;                                            \
          }                                                                                     \
          TILE(rows, bp, kc, acc + (ti * tiles_j + tj) * MR * NR);                              \
        }                                                                                       \
      }                                                                                         \
    }                                                                                           \
    for (int64_t i = 0; i < p; i++)                                                             \
      for (int64_t j = 0; j < q; j++)                                                           \
        y[i * q + j] = acc[((i / MR) * tiles_j + j / NR) * MR * NR + (i % MR) * NR + j % NR];  \
    free(bp);                                                                                   \
    free(zero);                                                                                 \
    free(acc);                                                                                  \
    return 0;                                                                                   \
  }
BLOCK_TILED(block_f32_avx2, float, tile_f32, NR32)
BLOCK_TILED(block_f64_avx2, double, tile_f64, NR64)
#undef BLOCK_TILED

/* asked every call (a read of libgcc's CPU model): a cached static written by concurrent
 * workers would be a data race */
static int have_avx2_fma(void) {
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#endif

void fp8_gemm_block_f32(int64_t p, int64_t q, int64_t k, const float *a, const float *b,
                        float *y) {
  if (p <= 0 || q <= 0) return;
#ifdef FP8_BLOCK_AVX2
  if (have_avx2_fma() && block_f32_avx2(p, q, k, a, b, y) == 0) return;
#endif
  fp8_gemm_block_f32_plain(p, q, k, a, b, y);
}

void fp8_gemm_block_f64(int64_t p, int64_t q, int64_t k, const double *a, const double *b,
                        double *y) {
  if (p <= 0 || q <= 0) return;
#ifdef FP8_BLOCK_AVX2
  if (have_avx2_fma() && block_f64_avx2(p, q, k, a, b, y) == 0) return;
#endif
  fp8_gemm_block_f64_plain(p, q, k, a, b, y);
}
