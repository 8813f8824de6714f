/* valhist.c: exact value histograms of 16-bit tensors and weighted statistics (valhist.h). */
#include "valhist.h"

#include "encode_inline.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NPAT 32768 /* magnitudes: the 16-bit patterns with the sign bit cleared */
/* the distance between the eight parts of the counts (below): 64 bytes more than a part, so
 * that a magnitude's eight counters sit in eight different cache sets and 4 KiB apart by no
 * multiple (at exactly 128 KiB apart, runs of equal magnitudes made the eight increments of a
 * group collide in one L1 set and alias each other's stores: 0.75 G elements/s in bench_quant
 * against 1.14 G padded, on an AMD EPYC) */
#define PSTRIDE (NPAT + 16)

static inline uint32_t f2u(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

int fp8_valhist_build(fp8_valhist *h, fp8_dtype d, const void *data, size_t n) {
  if (d != FP8_DTYPE_BF16 && d != FP8_DTYPE_F16) return FP8_EINVAL;
  if (n >= (size_t)UINT32_MAX) return FP8_EINVAL;
  if (!h->count) {
    h->count = calloc(7 * PSTRIDE + NPAT, sizeof *h->count); /* eight parts: see below */
    h->seen = calloc(NPAT / 64, sizeof *h->seen);
    h->v = malloc(NPAT * sizeof *h->v);
    h->w = malloc(NPAT * sizeof *h->w);
    h->cum = malloc((NPAT + 1) * sizeof *h->cum);
    h->wd = malloc(NPAT * sizeof *h->wd);
    if (!h->count || !h->seen || !h->v || !h->w || !h->cum || !h->wd) {
      fp8_valhist_free(h);
      return FP8_ENOMEM;
    }
  }
  /* count each magnitude, marking its bit the first time it is seen; then the marked ones in
   * ascending order (a fixed order) from the 512 words of the bitmap: one pass over the data
   * plus the occupied magnitudes, not the 32,768 bins */
  const unsigned char *p = data;
  uint32_t *count = h->count;
  uint64_t *seen = h->seen;
  if (n >= 4 * (size_t)NPAT) {
    /* a large tensor: no bitmap in the loop, and the elements counted into eight parts of the
     * counts by their position mod 8 (a run of equal magnitudes, common in activations, does
     * not wait on its own increment: with two parts K=1 on the big trace spent 97% here on an
     * AMD EPYC, 10.5 s, with eight 3.7 s; bench/README.md); the occupied magnitudes from one
     * scan of the 32,768 bins, the same ones in the same order */
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t q, r;
      memcpy(&q, p + 2 * i, 8);
      memcpy(&r, p + 2 * i + 8, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
      q = __builtin_bswap64(q); /* the data is little-endian: element k in bits 16k.. */
      r = __builtin_bswap64(r);
#endif
      count[q & 0x7FFFu]++;
      count[PSTRIDE + ((q >> 16) & 0x7FFFu)]++;
      count[2 * PSTRIDE + ((q >> 32) & 0x7FFFu)]++;
      count[3 * PSTRIDE + ((q >> 48) & 0x7FFFu)]++;
      count[4 * PSTRIDE + (r & 0x7FFFu)]++;
      count[5 * PSTRIDE + ((r >> 16) & 0x7FFFu)]++;
      count[6 * PSTRIDE + ((r >> 32) & 0x7FFFu)]++;
      count[7 * PSTRIDE + ((r >> 48) & 0x7FFFu)]++;
    }
    for (; i < n; i++) count[(p[2 * i] | ((unsigned)p[2 * i + 1] << 8)) & 0x7FFFu]++;
    for (unsigned b = 0; b < NPAT; b++) {
      for (int k = 1; k < 8; k++) {
        count[b] += count[k * PSTRIDE + b];
        count[k * PSTRIDE + b] = 0;
      }
      if (count[b]) seen[b >> 6] |= (uint64_t)1 << (b & 63);
    }
  } else {
    for (size_t i = 0; i < n; i++) {
      unsigned b = (p[2 * i] | ((unsigned)p[2 * i + 1] << 8)) & 0x7FFFu;
      seen[b >> 6] |= (uint64_t)1 << (b & 63);
      count[b]++;
    }
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
  /* ascending patterns with the sign cleared are ascending magnitudes, inf and NaN last */
  size_t nfin = m;
  while (nfin > 0 && !((f2u(h->v[nfin - 1]) & 0x7FFFFFFFu) < 0x7F800000u)) nfin--;
  h->nfin = nfin;
  uint64_t acc = 0;
  for (size_t i = 0; i < m; i++) {
    h->cum[i] = acc;
    acc += h->w[i];
    h->wd[i] = (double)h->w[i];
  }
  h->cum[m] = acc;
  h->sum_sq = fp8_weighted_sum_sq(h->v, h->w, nfin);
  return FP8_OK;
}

void fp8_valhist_free(fp8_valhist *h) {
  free(h->count);
  free(h->v);
  free(h->w);
  free(h->seen);
  free(h->cum);
  free(h->wd);
  memset(h, 0, sizeof *h);
}

float fp8_valhist_amax(const fp8_valhist *h) { return fp8_amax_f32(h->v, h->m); }

void fp8_valhist_log2_histogram(const fp8_valhist *h, int64_t *hist) {
  for (size_t i = 0; i < h->m; i++) { /* fp8_log2_histogram's own rule, weighted */
    int k = fp8_log2_bin_index(h->v[i]);
    if (k >= 0) hist[k] += h->w[i];
  }
}

/* The first i in [lo, hi) whose value's code (scale s, format f) passes test t, else hi:
 * codes are monotone in the magnitude (valhist.h), so each test below is false then true. */
enum { T_CODE_NONZERO, T_CODE_NORMAL, T_OVERFLOW, T_CLIPPED };

static size_t first_index(const fp8_valhist *h, size_t lo, size_t hi, float s, fp8_format f,
                          int t) {
  uint32_t maxbits = f2u(fp8_format_max(f)), clipbits = fp8_clip_bits(f);
  uint8_t emask = f == FP8_E4M3 ? 0x78 : 0x7C;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    uint32_t u = f2u(h->v[mid] * s);
    int pass;
    if (t == T_OVERFLOW) {
      pass = u > maxbits;
    } else if (t == T_CLIPPED) {
      pass = u > clipbits;
    } else {
      uint8_t c = f == FP8_E5M2 ? ENCODE_E5M2(u) : ENCODE_E4M3(u);
      pass = t == T_CODE_NONZERO ? (c & 0x7F) != 0 : (c & emask) != 0;
    }
    if (pass) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

void fp8_valhist_quantize(const fp8_valhist *h, float s, fp8_format f, fp8_stats *st) {
  if (!(s > 0.0f && s <= FLT_MAX)) { /* not a scale the sorted form assumes: the general loop */
    fp8_quantize_weighted_f32(h->v, h->w, h->m, s, f, st);
    return;
  }
  /* the counts from the sorted magnitudes: zeros first, then the nonzero values whose code is
   * 0 (underflow), those with a subnormal code, the normal ones; overflow (|x s| above the
   * format's max) at the top of the finite part; the non-finite after it */
  const size_t m = h->m, nf = h->nfin, nz = nf > 0 && h->v[0] == 0.0f ? 1 : 0;
  size_t i_sub = first_index(h, nz, nf, s, f, T_CODE_NONZERO);
  size_t i_norm = first_index(h, i_sub, nf, s, f, T_CODE_NORMAL);
  size_t i_over = first_index(h, nz, nf, s, f, T_OVERFLOW);
  size_t i_clip = first_index(h, i_over, nf, s, f, T_CLIPPED); /* clipped values overflow */
  st->n += (int64_t)h->cum[m];
  st->nonfinite += (int64_t)(h->cum[m] - h->cum[nf]);
  st->zeros += (int64_t)(h->cum[nz] - h->cum[0]);
  st->underflow += (int64_t)(h->cum[i_sub] - h->cum[nz]);
  st->subnormal += (int64_t)(h->cum[i_norm] - h->cum[i_sub]);
  st->overflow += (int64_t)(h->cum[nf] - h->cum[i_over]);
  st->clipped += (int64_t)(h->cum[nf] - h->cum[i_clip]);
  double hat_sq = 0.0;
  st->sum_sq_err += fp8_sorted_weighted_err_f32(h->v, h->wd, nf, s, f, &hat_sq);
  st->sum_sq += h->sum_sq;
  st->sum_sq_hat += hat_sq;
}
