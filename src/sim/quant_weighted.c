/* quant_weighted.c: the statistics of quantizing a weighted multiset (w[i] copies of x[i]: a
 * value histogram, valhist.h), eight values at a time in GCC's generic vectors.
 *
 * Two forms. The general one (fp8_quantize_weighted_f32, and its _err_ half without sum_sq)
 * takes any values: scale, encode (encode_inline.h's arithmetic, lane-wise), decode
 * arithmetically (the value rebuilt from the code's exponent and mantissa fields, bit-identical
 * to fp8_decode_table for finite codes), classify and count with the weights, and sum the
 * weighted squared errors in double. The sorted one (fp8_sorted_weighted_err_f32), what a
 * histogram runs, takes ascending finite magnitudes and computes the error sum alone: the FP8
 * value straight from the rounded float bits (grid8), no code; valhist.c finds its counts by
 * binary search. On the same finite values both give the same error sum, bit for bit. A third,
 * fp8_quantize_stats_f32, is the unweighted per-element statistics of an F32 tensor with the
 * sorted form's grid rounding, in quant.c's order (fp8_quantize_f32's results, bit for bit).
 *
 * Counts are exact (32-bit lanes: the weights of a multiset sum below 2^32). The double sums'
 * order, this path's own (valhist.h): value i goes to lane i mod 16 of four 4-wide vectors,
 * the lanes are added as ((v0 + v1) + (v2 + v3)) then ((l0 + l1) + (l2 + l3)), and the last
 * m mod 16 values are summed in order and added last. Compiled for generic x86-64, AVX2 and
 * AVX-512 (quant.c's dispatch picks the same variant); the lanes are the same in every
 * variant, so the results are bit-identical (tests/sim/test_quantize.c). */
#include <float.h>
#include <math.h>
#include <string.h>

#include "encode_inline.h"
#include "fp8.h"
#include "valhist.h"

/* 32-byte vectors passed between always-inline helpers of the generic (SSE2) variant: GCC warns
 * that such a call would pass them differently without AVX; every call here is inlined. */
#pragma GCC diagnostic ignored "-Wpsabi"

typedef float v8f __attribute__((vector_size(32)));
typedef uint32_t v8u __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));
typedef uint32_t v4u __attribute__((vector_size(16)));
typedef double v4d __attribute__((vector_size(32)));
typedef double v8d __attribute__((vector_size(64)));

#define WQ_INLINE static inline __attribute__((always_inline))

/* The per-format constants of encode_inline.h's ENCODE_E4M3 / ENCODE_E5M2, and of the decode. */
typedef struct {
  uint32_t mant_shift, rebias, min_normal, sat_from, magic_bits, max_code;
  float magic;
  uint32_t emask, dec_shift, dec_mbits, dec_bias_add; /* decode: e = c >> dec_shift, ... */
  float dec_sub;                                      /* the subnormal step 2^-9 / 2^-16 */
  uint32_t maxbits;
} wq_fmt;

static wq_fmt fmt_consts(fp8_format f) {
  float mx = fp8_format_max(f);
  uint32_t maxbits;
  memcpy(&maxbits, &mx, sizeof maxbits);
  if (f == FP8_E5M2)
    return (wq_fmt){21, 112u << 2, 0x38800000u, 0x47700000u, 0x43000000u, 0x7B, 128.0f,
                    0x7C, 2, 3, 112, 0x1p-16f, maxbits};
  return (wq_fmt){20, 120u << 3, 0x3C800000u, 0x43E80001u, 0x46800000u, 0x7E, 16384.0f,
                  0x78, 3, 7, 120, 0x1p-9f, maxbits};
}

WQ_INLINE v8u as_u(v8f x) {
  v8u u;
  memcpy(&u, &x, sizeof u);
  return u;
}

WQ_INLINE v8f as_f(v8u u) {
  v8f x;
  memcpy(&x, &u, sizeof x);
  return x;
}

WQ_INLINE v4u as_u4(v4f x) {
  v4u u;
  memcpy(&u, &x, sizeof u);
  return u;
}

WQ_INLINE v4f as_f4(v4u u) {
  v4f x;
  memcpy(&x, &u, sizeof x);
  return x;
}

/* encode_bits of encode_inline.h, lane-wise (a vector comparison gives -1 / 0 lanes). */
WQ_INLINE v8u encode8(v8u u, const wq_fmt *k) {
  v8u sign = (u >> 24) & 0x80u;
  v8u a = u & 0x7FFFFFFFu;
  v8u lsb = (a >> k->mant_shift) & 1u;
  v8u rounded = a + (((1u << (k->mant_shift - 1)) - 1u) + lsb);
  v8u normal = (rounded >> k->mant_shift) - k->rebias;
  v8u sub = as_u(as_f(a) + k->magic) - k->magic_bits;
  v8u is_sub = (v8u)(a < k->min_normal);
  v8u code = (sub & is_sub) | (normal & ~is_sub);
  v8u sat = (v8u)(a >= k->sat_from);
  code = (k->max_code & sat) | (code & ~sat);
  code |= sign;
  v8u nan = (v8u)(a > 0x7F800000u);
  return (0x7Fu & nan) | (code & ~nan);
}

/* The value of finite codes (fp8_decode_table's, bit for bit): exponent field e and mantissa m;
 * normal: 2^(e - bias) (1 + m 2^-mbits) as float bits, subnormal: m times the smallest step. */
WQ_INLINE v8f decode8(v8u code, const wq_fmt *k) {
  v8u c7 = code & 0x7Fu;
  v8u e = c7 >> k->dec_shift, m = c7 & k->dec_mbits;
  v8u normal = ((e + k->dec_bias_add) << 23) | (m << (23 - k->dec_shift));
  v8f subf = __builtin_convertvector((v8i)m, v8f) * k->dec_sub;
  v8u is_sub = (v8u)(e == 0u);
  v8u bits = (as_u(subf) & is_sub) | (normal & ~is_sub);
  return as_f(bits | ((code & 0x80u) << 24));
}

/* The FP8 value of the code encode8 gives, for non-negative y (bits a, finite or inf), as a
 * float, without the code: the normal branch's rounded bits with the dropped mantissa bits
 * cleared are the float of 2^e (1 + m 2^-mbits); the subnormal branch's magic addition, undone,
 * is the multiple of the smallest step; saturation gives the format's max. Bit for bit
 * fp8_decode_table[encode(y)] (tests/sim/test_quantize.c: the sorted form against the general one). */
WQ_INLINE v8f grid8(v8u a, const wq_fmt *k) {
  v8u lsb = (a >> k->mant_shift) & 1u;
  v8u rounded = a + (((1u << (k->mant_shift - 1)) - 1u) + lsb);
  v8u normal = rounded & ~((1u << k->mant_shift) - 1u);
  v8u sub = as_u((as_f(a) + k->magic) - k->magic);
  v8u is_sub = (v8u)(a < k->min_normal);
  v8u g = (sub & is_sub) | (normal & ~is_sub);
  v8u sat = (v8u)(a >= k->sat_from);
  return as_f((k->maxbits & sat) | (g & ~sat));
}

WQ_INLINE float grid1(uint32_t a, const wq_fmt *k) {
  uint32_t lsb = (a >> k->mant_shift) & 1u;
  uint32_t rounded = a + (((1u << (k->mant_shift - 1)) - 1u) + lsb);
  uint32_t g = a < k->min_normal ? enc_f2u((enc_u2f(a) + k->magic) - k->magic)
                                 : rounded & ~((1u << k->mant_shift) - 1u);
  return enc_u2f(a >= k->sat_from ? k->maxbits : g);
}

/* One value, the scalar form of the same arithmetic (the tail). */
WQ_INLINE void one(float x, uint32_t w, float s, float sinv, fp8_format f, const wq_fmt *k,
                   int64_t cnt[7], double *e, double *sq, double *hq) {
  float y = x * s;
  uint8_t code = f == FP8_E5M2 ? ENCODE_E5M2(enc_f2u(y)) : ENCODE_E4M3(enc_f2u(y));
  uint32_t ax = enc_f2u(x) & 0x7FFFFFFFu, ay = enc_f2u(y) & 0x7FFFFFFFu;
  int finite = ax < 0x7F800000u, czero = (code & 0x7F) == 0;
  int csub = (code & k->emask) == 0 && !czero;
  cnt[0] += w;
  cnt[1] += finite ? 0 : w;
  cnt[2] += ax == 0 ? w : 0;
  cnt[3] += finite && ay > k->maxbits ? w : 0;
  cnt[4] += finite && ax != 0 && czero ? w : 0;
  cnt[5] += finite && csub ? w : 0;
  cnt[6] += finite && ay >= k->sat_from ? w : 0;
  if (!finite) return;
  float xh = fp8_decode_table(f)[code] * sinv;
  double xd = (double)x, hd = (double)xh, d = xd - hd, c = (double)w;
  *e += c * (d * d);
  *sq += c * (xd * xd);
  *hq += c * (hd * hd);
}

WQ_INLINE void wq_body(const float *x, const uint32_t *w, size_t n, float s, fp8_format f,
                       fp8_stats *st, const int with_sq) {
  const wq_fmt k = fmt_consts(f);
  const float sinv = 1.0f / s; /* RN32(1/s), as fp8_quantize_f32 */
  v8u cnt = {0}, nonfin = {0}, zeros = {0}, over = {0}, under = {0}, subn = {0}, clip = {0};
  v4d e4[4] = {{0}}, s4[4] = {{0}}, h4[4] = {{0}};
  size_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int h = 0; h < 2; h++) { /* two blocks of eight: lanes 0-7 and 8-15 of the sixteen */
      v8f xv;
      v8u wv;
      memcpy(&xv, x + i + 8 * h, sizeof xv);
      memcpy(&wv, w + i + 8 * h, sizeof wv);
      v8f y = xv * s;
      v8u code = encode8(as_u(y), &k);
      v8u ax = as_u(xv) & 0x7FFFFFFFu, ay = as_u(y) & 0x7FFFFFFFu;
      v8u finite = (v8u)(ax < 0x7F800000u);
      v8u czero = (v8u)((code & 0x7Fu) == 0u);
      v8u csub = (v8u)((code & k.emask) == 0u) & ~czero;
      cnt += wv;
      nonfin += wv & ~finite;
      zeros += wv & (v8u)(ax == 0u);
      over += wv & finite & (v8u)(ay > k.maxbits);
      under += wv & finite & (v8u)(ax != 0u) & czero;
      subn += wv & finite & csub;
      clip += wv & finite & (v8u)(ay >= k.sat_from);
      v8f xh = decode8(code, &k) * sinv;
      v8f xm = as_f(as_u(xv) & finite), hm = as_f(as_u(xh) & finite);
      for (int q = 0; q < 2; q++) { /* the two halves: 4-wide doubles */
        v4f xf = {xm[4 * q], xm[4 * q + 1], xm[4 * q + 2], xm[4 * q + 3]};
        v4f hf = {hm[4 * q], hm[4 * q + 1], hm[4 * q + 2], hm[4 * q + 3]};
        v4u wu = {wv[4 * q], wv[4 * q + 1], wv[4 * q + 2], wv[4 * q + 3]};
        v4d xd = __builtin_convertvector(xf, v4d), hd = __builtin_convertvector(hf, v4d);
        v4d d = xd - hd, c = __builtin_convertvector(wu, v4d);
        e4[2 * h + q] += c * (d * d);
        h4[2 * h + q] += c * (hd * hd);
        if (with_sq) s4[2 * h + q] += c * (xd * xd);
      }
    }
  int64_t tail[7] = {0, 0, 0, 0, 0, 0, 0};
  double et = 0.0, sqt = 0.0, hqt = 0.0;
  for (; i < n; i++) one(x[i], w[i], s, sinv, f, &k, tail, &et, &sqt, &hqt);
  (void)with_sq;
  int64_t c6[7] = {0, 0, 0, 0, 0, 0, 0};
  for (int l = 0; l < 8; l++) {
    c6[0] += cnt[l];
    c6[1] += nonfin[l];
    c6[2] += zeros[l];
    c6[3] += over[l];
    c6[4] += under[l];
    c6[5] += subn[l];
    c6[6] += clip[l];
  }
  v4d ev = (e4[0] + e4[1]) + (e4[2] + e4[3]), sv = (s4[0] + s4[1]) + (s4[2] + s4[3]);
  v4d hv = (h4[0] + h4[1]) + (h4[2] + h4[3]);
  st->n += c6[0] + tail[0];
  st->nonfinite += c6[1] + tail[1];
  st->zeros += c6[2] + tail[2];
  st->overflow += c6[3] + tail[3];
  st->underflow += c6[4] + tail[4];
  st->subnormal += c6[5] + tail[5];
  st->clipped += c6[6] + tail[6];
  st->sum_sq_err += ((ev[0] + ev[1]) + (ev[2] + ev[3])) + et;
  st->sum_sq_hat += ((hv[0] + hv[1]) + (hv[2] + hv[3])) + hqt;
  if (with_sq) st->sum_sq += ((sv[0] + sv[1]) + (sv[2] + sv[3])) + sqt;
}

/* The squared-signal sum alone, in the same lanes and order as wq_body's (a scale does not
 * change it: a value histogram computes it once, valhist.c). */
double fp8_weighted_sum_sq(const float *x, const uint32_t *w, size_t n) {
  v4d s4[4] = {{0}};
  size_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int q = 0; q < 4; q++) {
      v4f xf;
      v4u wu;
      memcpy(&xf, x + i + 4 * q, sizeof xf);
      memcpy(&wu, w + i + 4 * q, sizeof wu);
      v4u fin = (v4u)((as_u4(xf) & 0x7FFFFFFFu) < 0x7F800000u);
      xf = as_f4(as_u4(xf) & fin);
      v4d xd = __builtin_convertvector(xf, v4d), c = __builtin_convertvector(wu, v4d);
      s4[q] += c * (xd * xd);
    }
  double t = 0.0;
  for (; i < n; i++) {
    int fin = (enc_f2u(x[i]) & 0x7FFFFFFFu) < 0x7F800000u;
    double xd = fin ? (double)x[i] : 0.0, c = (double)w[i];
    t += c * (xd * xd);
  }
  v4d sv = (s4[0] + s4[1]) + (s4[2] + s4[3]);
  return ((sv[0] + sv[1]) + (sv[2] + sv[3])) + t;
}

/* The error sum of a sorted histogram's finite part (fp8_sorted_weighted_err_f32): x >= 0
 * finite, weights already in double; the lanes and order of wq_body's error sum. */
WQ_INLINE double ws_body(const float *x, const double *c, size_t n, float s, fp8_format f,
                         double *hat_sq) {
  const wq_fmt k = fmt_consts(f);
  const float sinv = 1.0f / s;
  v4d e4[4] = {{0}}, h4[4] = {{0}};
  size_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int h = 0; h < 2; h++) {
      v8f xv;
      memcpy(&xv, x + i + 8 * h, sizeof xv);
      v8f xh = grid8(as_u(xv * s), &k) * sinv;
      /* both halves converted at once (8 lanes of double: two vectors under AVX2), then lane
       * by lane the same products and sums as four at a time */
      v8d h8 = __builtin_convertvector(xh, v8d), cw;
      v8d d8 = __builtin_convertvector(xv, v8d) - h8;
      memcpy(&cw, c + i + 8 * h, sizeof cw);
      v8d t = cw * (d8 * d8), u = cw * (h8 * h8);
      e4[2 * h] += __builtin_shufflevector(t, t, 0, 1, 2, 3);
      e4[2 * h + 1] += __builtin_shufflevector(t, t, 4, 5, 6, 7);
      h4[2 * h] += __builtin_shufflevector(u, u, 0, 1, 2, 3);
      h4[2 * h + 1] += __builtin_shufflevector(u, u, 4, 5, 6, 7);
    }
  double et = 0.0, ht = 0.0;
  for (; i < n; i++) {
    float xh = grid1(enc_f2u(x[i] * s), &k) * sinv;
    double hd = (double)xh, d = (double)x[i] - hd;
    et += c[i] * (d * d);
    ht += c[i] * (hd * hd);
  }
  v4d ev = (e4[0] + e4[1]) + (e4[2] + e4[3]), hv = (h4[0] + h4[1]) + (h4[2] + h4[3]);
  *hat_sq = ((hv[0] + hv[1]) + (hv[2] + hv[3])) + ht;
  return ((ev[0] + ev[1]) + (ev[2] + ev[3])) + et;
}

/* fp8_quantize_f32's statistics, fused (fp8_quantize_stats_f32): quant.c's order exactly. Per
 * chunk of QCHUNK values from x: value i of the chunk into lane i mod 4 of e / sq (eight at a
 * time, the first four then the last four), the chunk's last n mod 4 values into lane 0 in
 * order, the chunk's sum ((l0 + l1) + (l2 + l3)) added to a running total that starts at 0 and
 * is added to st at the end. The FP8 value is grid8's (bit for bit the decoded code), with the
 * sign of y; zero and subnormal codes are g == 0 and 0 < g < the format's smallest normal. */
#define QCHUNK 1024

WQ_INLINE void fs_one(float x, float s, float sinv, const wq_fmt *k, uint32_t c[6], double *e,
                      double *sq, double *hq) {
  float y = x * s;
  uint32_t ax = enc_f2u(x) & 0x7FFFFFFFu, ay = enc_f2u(y) & 0x7FFFFFFFu;
  int finite = ax < 0x7F800000u;
  uint32_t g = enc_f2u(grid1(ay, k));
  c[0] += !finite;
  c[1] += ax == 0;
  c[2] += finite && ay > k->maxbits;
  c[3] += finite && ax != 0 && g == 0;
  c[4] += finite && g != 0 && g < k->min_normal;
  c[5] += finite && ay >= k->sat_from;
  if (!finite) return;
  float xh = enc_u2f(g | (enc_f2u(y) & 0x80000000u)) * sinv;
  double xd = (double)x, hd = (double)xh, d = xd - hd;
  *e += d * d;
  *sq += xd * xd;
  *hq += hd * hd;
}

WQ_INLINE void fs_body(const float *x, size_t n, float s, fp8_format f, fp8_stats *st) {
  const wq_fmt k = fmt_consts(f);
  const float sinv = 1.0f / s; /* RN32(1/s), as fp8_quantize_f32 */
  double te = 0.0, tsq = 0.0, thq = 0.0;
  int64_t c64[6] = {0, 0, 0, 0, 0, 0};
  for (size_t off = 0; off < n; off += QCHUNK) {
    const size_t m = n - off < QCHUNK ? n - off : QCHUNK;
    const float *xc = x + off;
    v8u nonfin = {0}, zeros = {0}, over = {0}, under = {0}, subn = {0}, clip = {0};
    v4d e = {0, 0, 0, 0}, sq = {0, 0, 0, 0}, hq = {0, 0, 0, 0};
    size_t i = 0;
    for (; i + 8 <= m; i += 8) {
      v8f xv;
      memcpy(&xv, xc + i, sizeof xv);
      v8f y = xv * s;
      v8u ax = as_u(xv) & 0x7FFFFFFFu, ay = as_u(y) & 0x7FFFFFFFu;
      v8u finite = (v8u)(ax < 0x7F800000u);
      v8u g = as_u(grid8(ay, &k));
      v8u gz = (v8u)(g == 0u);
      nonfin -= ~finite;
      zeros -= (v8u)(ax == 0u);
      over -= finite & (v8u)(ay > k.maxbits);
      under -= finite & (v8u)(ax != 0u) & gz;
      subn -= finite & ~gz & (v8u)(g < k.min_normal);
      clip -= finite & (v8u)(ay >= k.sat_from);
      v8f xh = as_f(g | (as_u(y) & 0x80000000u)) * sinv;
      v8f xm = as_f(as_u(xv) & finite), hm = as_f(as_u(xh) & finite);
      v8d x8 = __builtin_convertvector(xm, v8d), h8 = __builtin_convertvector(hm, v8d);
      v8d d8 = x8 - h8;
      v8d dd = d8 * d8, xx = x8 * x8, hh = h8 * h8;
      e += __builtin_shufflevector(dd, dd, 0, 1, 2, 3);
      e += __builtin_shufflevector(dd, dd, 4, 5, 6, 7);
      sq += __builtin_shufflevector(xx, xx, 0, 1, 2, 3);
      sq += __builtin_shufflevector(xx, xx, 4, 5, 6, 7);
      hq += __builtin_shufflevector(hh, hh, 0, 1, 2, 3);
      hq += __builtin_shufflevector(hh, hh, 4, 5, 6, 7);
    }
    uint32_t c[6] = {0, 0, 0, 0, 0, 0};
    if (i + 4 <= m) { /* a last block of four: lane by lane, the same operations */
      for (int l = 0; l < 4; l++) {
        double el = e[l], sl = sq[l], hl = hq[l];
        fs_one(xc[i + l], s, sinv, &k, c, &el, &sl, &hl);
        e[l] = el;
        sq[l] = sl;
        hq[l] = hl;
      }
      i += 4;
    }
    double e0 = e[0], s0 = sq[0], h0 = hq[0];
    for (; i < m; i++) fs_one(xc[i], s, sinv, &k, c, &e0, &s0, &h0);
    e[0] = e0;
    sq[0] = s0;
    hq[0] = h0;
    for (int l = 0; l < 8; l++) {
      c[0] += nonfin[l];
      c[1] += zeros[l];
      c[2] += over[l];
      c[3] += under[l];
      c[4] += subn[l];
      c[5] += clip[l];
    }
    for (int j = 0; j < 6; j++) c64[j] += c[j];
    te += (e[0] + e[1]) + (e[2] + e[3]);
    tsq += (sq[0] + sq[1]) + (sq[2] + sq[3]);
    thq += (hq[0] + hq[1]) + (hq[2] + hq[3]);
  }
  st->n += (int64_t)n;
  st->nonfinite += c64[0];
  st->zeros += c64[1];
  st->overflow += c64[2];
  st->underflow += c64[3];
  st->subnormal += c64[4];
  st->clipped += c64[5];
  st->sum_sq_err += te;
  st->sum_sq += tsq;
  st->sum_sq_hat += thq;
}

#define WQ_VARIANTS(name, attr)                                                               \
  attr static void name(const float *x, const uint32_t *w, size_t n, float s, fp8_format f,     \
                        fp8_stats *st) {                                                        \
    wq_body(x, w, n, s, f, st, 1);                                                              \
  }                                                                                             \
  attr static void name##_nosq(const float *x, const uint32_t *w, size_t n, float s,            \
                               fp8_format f, fp8_stats *st) {                                   \
    wq_body(x, w, n, s, f, st, 0);                                                              \
  }                                                                                             \
  attr static double name##_sorted(const float *x, const double *c, size_t n, float s,          \
                                   fp8_format f, double *hat_sq) {                              \
    return ws_body(x, c, n, s, f, hat_sq);                                                      \
  }                                                                                             \
  attr static void name##_fused(const float *x, size_t n, float s, fp8_format f, fp8_stats *st) { \
    fs_body(x, n, s, f, st);                                                                    \
  }

WQ_VARIANTS(wq_generic, )
#if defined(__x86_64__) && defined(__GNUC__)
WQ_VARIANTS(wq_avx2, __attribute__((target("avx2"))))
WQ_VARIANTS(wq_avx512, __attribute__((target("avx512f,avx512bw,avx512vl"))))
#endif

typedef void (*wq_fn)(const float *, const uint32_t *, size_t, float, fp8_format, fp8_stats *);
typedef double (*ws_fn)(const float *, const double *, size_t, float, fp8_format, double *);

/* quant.c's choice of instruction set (fp8_isa_current), for both entry points */
static wq_fn pick(int with_sq) {
  (void)fp8_decode_table(FP8_E4M3); /* the tables are built before any loop reads them */
  (void)fp8_decode_table(FP8_E5M2);
#if defined(__x86_64__) && defined(__GNUC__)
  switch (fp8_isa_current()) {
  case FP8_ISA_AVX512: return with_sq ? wq_avx512 : wq_avx512_nosq;
  case FP8_ISA_AVX2: return with_sq ? wq_avx2 : wq_avx2_nosq;
  default: break;
  }
#endif
  return with_sq ? wq_generic : wq_generic_nosq;
}

double fp8_sorted_weighted_err_f32(const float *x, const double *c, size_t n, float s,
                                   fp8_format f, double *hat_sq) {
  ws_fn fn = wq_generic_sorted;
#if defined(__x86_64__) && defined(__GNUC__)
  switch (fp8_isa_current()) {
  case FP8_ISA_AVX512: fn = wq_avx512_sorted; break;
  case FP8_ISA_AVX2: fn = wq_avx2_sorted; break;
  default: break;
  }
#endif
  return fn(x, c, n, s, f, hat_sq);
}

void fp8_quantize_stats_f32(const float *x, size_t n, float s, fp8_format f, fp8_stats *st) {
  if (!(s > 0.0f && s <= FLT_MAX)) { /* inf, NaN, <= 0: the codes decide (NaN codes and all) */
    fp8_quantize_f32(x, n, s, f, NULL, NULL, st);
    return;
  }
  void (*fn)(const float *, size_t, float, fp8_format, fp8_stats *) = wq_generic_fused;
#if defined(__x86_64__) && defined(__GNUC__)
  switch (fp8_isa_current()) {
  case FP8_ISA_AVX512: fn = wq_avx512_fused; break;
  case FP8_ISA_AVX2: fn = wq_avx2_fused; break;
  default: break;
  }
#endif
  fn(x, n, s, f, st);
}

void fp8_quantize_weighted_f32(const float *x, const uint32_t *w, size_t n, float s,
                               fp8_format f, fp8_stats *st) {
  pick(1)(x, w, n, s, f, st);
}

void fp8_quantize_weighted_err_f32(const float *x, const uint32_t *w, size_t n, float s,
                                   fp8_format f, fp8_stats *st) {
  pick(0)(x, w, n, s, f, st);
}
