/* valhist.c: exact value histograms of 16-bit tensors and weighted statistics (valhist.h). */
#include "valhist.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NPAT 65536

static inline uint32_t f2u(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

int fp8_valhist_build(fp8_valhist *h, fp8_dtype d, const void *data, size_t n) {
  if (d != FP8_DTYPE_BF16 && d != FP8_DTYPE_F16) return FP8_EINVAL;
  if (n >= (size_t)UINT32_MAX) return FP8_EINVAL;
  if (!h->count) {
    h->count = calloc(NPAT, sizeof *h->count);
    h->seen = calloc(NPAT / 64, sizeof *h->seen);
    h->v = malloc(NPAT * sizeof *h->v);
    h->w = malloc(NPAT * sizeof *h->w);
    if (!h->count || !h->seen || !h->v || !h->w) {
      fp8_valhist_free(h);
      return FP8_ENOMEM;
    }
  }
  /* count, marking each pattern's bit the first time it is seen; then the marked patterns in
   * ascending order (a fixed order) from the 1,024 words of the bitmap: one pass over the data
   * plus the occupied patterns, not the 65,536 bins */
  const unsigned char *p = data;
  uint32_t *count = h->count;
  uint64_t *seen = h->seen;
  for (size_t i = 0; i < n; i++) {
    unsigned b = p[2 * i] | ((unsigned)p[2 * i + 1] << 8);
    seen[b >> 6] |= (uint64_t)1 << (b & 63);
    count[b]++;
  }
  size_t m = 0;
  for (unsigned wi = 0; wi < NPAT / 64; wi++) {
    uint64_t bits = seen[wi];
    seen[wi] = 0; /* the scratch is zero again for the next tensor */
    while (bits) {
      unsigned b = wi * 64 + (unsigned)__builtin_ctzll(bits);
      bits &= bits - 1;
      h->v[m] = d == FP8_DTYPE_BF16 ? fp8_bf16_to_f32((uint16_t)b) : fp8_f16_to_f32((uint16_t)b);
      h->w[m++] = count[b];
      count[b] = 0;
    }
  }
  h->m = m;
  h->n = (int64_t)n;
  return FP8_OK;
}

void fp8_valhist_free(fp8_valhist *h) {
  free(h->count);
  free(h->v);
  free(h->w);
  free(h->seen);
  memset(h, 0, sizeof *h);
}

float fp8_valhist_amax(const fp8_valhist *h) { return fp8_amax_f32(h->v, h->m); }

void fp8_valhist_log2_histogram(const fp8_valhist *h, int64_t *hist) {
  for (size_t i = 0; i < h->m; i++) { /* fp8_log2_histogram's own rule, weighted */
    int k = fp8_log2_bin_index(h->v[i]);
    if (k >= 0) hist[k] += h->w[i];
  }
}

void fp8_valhist_quantize(const fp8_valhist *h, float s, fp8_format f, fp8_stats *st) {
  fp8_quantize_weighted_f32(h->v, h->w, h->m, s, f, st);
}
