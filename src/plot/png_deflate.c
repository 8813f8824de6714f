/* png_deflate.c: see png_deflate.h. The filtered rows ("0, row bytes" each) are one byte stream,
 * walked through a band of rows copied from the image: the 32 KiB deflate may refer back to,
 * plus rows ahead. At each position the longest of three candidate matches wins: 3 bytes back
 * (the pixel to the left), one filtered row back (the pixel above) and, where neither gives
 * MIN_MATCH bytes, the last such position whose next 4 bytes hashed alike (glyphs and markers
 * drawn again). Literals and matches are collected into blocks of up to BLOCK_SYMS symbols, each
 * written with dynamic Huffman codes (BTYPE 2) built from its own counts. */
#include "png_deflate.h"

#include <stdlib.h>
#include <string.h>

#include "fp8.h"

#define WINDOW 32768u     /* deflate's largest distance */
#define MAX_MATCH 258u
#define MIN_MATCH 3u      /* deflate's shortest */
#define BLOCK_SYMS 16384u /* symbols per block: each block adapts its codes to its part */
#define HASH_BITS 15
#define AHEAD_ROWS 32     /* rows the band holds beyond the window */
#define ADLER_BASE 65521u
#define ADLER_NMAX 5536u  /* bytes between reductions: the largest multiple of 32 <= 5552 */

static const uint16_t len_base[29] = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                                      31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
static const uint8_t len_extra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                      2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
static const uint16_t dist_base[30] = {1,   2,   3,   4,    5,    7,    9,    13,    17,    25,
                                       33,  49,  65,  97,   129,  193,  257,  385,   513,   769,
                                       1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
static const uint8_t dist_extra[30] = {0, 0, 0, 0, 1, 1, 2, 2,  3,  3,  4,  4,  5,  5,  6,
                                       6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};
static const uint8_t clen_order[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};

/* ------------------------------------------------------------------ checksum */

/* 32, 31, ..., 1: a block's bytes' weights in b; int16 x int16 summed into int32 is the dot
 * product compilers vectorize (pmaddwd) */
static const int16_t adler_w[32] = {32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17,
                                    16, 15, 14, 13, 12, 11, 10, 9,  8,  7,  6,  5,  4,  3,  2,  1};

/* The loop, compiled once for the baseline ISA and once for AVX2 (vpmaddwd over 16 lanes;
 * the same integer sums, so the same checksum) */
static inline __attribute__((always_inline)) uint32_t adler_body(uint32_t adler, const uint8_t *p,
                                                                 size_t n) {
  uint32_t a = adler & 0xFFFFu, b = adler >> 16;
  while (n >= 32) {
    size_t k = n < ADLER_NMAX ? n & ~(size_t)31 : ADLER_NMAX;
    n -= k;
    /* 32 bytes at a time: a gains their sum, b 32 a plus their weighted sum, as bytewise;
     * within ADLER_NMAX bytes neither passes 2^32 (zlib's NMAX bound) */
    for (; k; k -= 32, p += 32) {
      int32_t s = 0, t = 0;
      for (int i = 0; i < 32; i++) {
        int16_t v = p[i];
        s += v;
        t += adler_w[i] * v;
      }
      b += 32u * a + (uint32_t)t;
      a += (uint32_t)s;
    }
    a %= ADLER_BASE;
    b %= ADLER_BASE;
  }
  while (n--) {
    a += *p++;
    b += a;
  }
  return (b % ADLER_BASE) << 16 | (a % ADLER_BASE);
}

static uint32_t adler_generic(uint32_t adler, const uint8_t *p, size_t n) {
  return adler_body(adler, p, n);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) static uint32_t adler_avx2(uint32_t adler, const uint8_t *p, size_t n) {
  return adler_body(adler, p, n);
}
#endif

uint32_t fp8_png_adler32_isa(uint32_t adler, const uint8_t *p, size_t n, int isa) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (isa == 1 || (isa < 0 && __builtin_cpu_supports("avx2"))) return adler_avx2(adler, p, n);
#endif
  (void)isa;
  return adler_generic(adler, p, n);
}

uint32_t fp8_png_adler32(uint32_t adler, const uint8_t *p, size_t n) {
  return fp8_png_adler32_isa(adler, p, n, -1);
}

/* ------------------------------------------------------------------ bits */

typedef struct {
  uint8_t *buf;
  size_t n, cap;
  uint64_t acc; /* pending bits, first bit lowest */
  int nacc;     /* < 32 between calls */
} bitw;

static int bw_reserve(bitw *w, size_t more) {
  if (w->n + more <= w->cap) return FP8_OK;
  size_t cap = w->cap ? w->cap : 65536;
  while (cap < w->n + more) cap *= 2;
  uint8_t *b = realloc(w->buf, cap);
  if (!b) return FP8_ENOMEM;
  w->buf = b;
  w->cap = cap;
  return FP8_OK;
}

/* Appends the n (<= 16) low bits of v; room for 4 more bytes must be reserved. */
static inline void bw_put(bitw *w, uint32_t v, int n) {
  w->acc |= (uint64_t)v << w->nacc;
  w->nacc += n;
  if (w->nacc >= 32) {
    for (int i = 0; i < 4; i++) w->buf[w->n++] = (uint8_t)(w->acc >> (8 * i));
    w->acc >>= 32;
    w->nacc -= 32;
  }
}

static void bw_align(bitw *w) {
  for (; w->nacc > 0; w->nacc -= 8, w->acc >>= 8) w->buf[w->n++] = (uint8_t)w->acc;
  w->nacc = 0;
  w->acc = 0;
}

/* ------------------------------------------------------------------ Huffman codes */

typedef struct {
  uint32_t f;
  uint16_t s;
} leaf;

static int leaf_cmp(const void *a, const void *b) {
  const leaf *x = a, *y = b;
  if (x->f != y->f) return x->f < y->f ? -1 : 1;
  return (int)x->s - (int)y->s;
}

/* Code lengths (<= maxbits) of a Huffman code for the counts freq[0..n), n <= 286: at least two
 * symbols get a code, so that every code is complete; count 0 means no code. Too deep a tree
 * flattens the counts (halved, kept > 0) and is built again. */
static void huff_lengths(const uint32_t *freq_in, int n, int maxbits, uint8_t *len) {
  uint32_t freq[286], w[2 * 286];
  leaf lv[286];
  int parent[2 * 286], depth[2 * 286];
  memcpy(freq, freq_in, (size_t)n * sizeof *freq);
  int used = 0;
  for (int i = 0; i < n; i++) used += freq[i] > 0;
  for (int i = 0; i < n && used < 2; i++)
    if (!freq[i]) freq[i] = 1, used++;
  for (;;) {
    int m = 0;
    for (int i = 0; i < n; i++) {
      len[i] = 0;
      if (freq[i]) lv[m++] = (leaf){freq[i], (uint16_t)i};
    }
    qsort(lv, (size_t)m, sizeof *lv, leaf_cmp);
    for (int i = 0; i < m; i++) w[i] = lv[i].f;
    /* two queues: the sorted leaves and the internal nodes, made in non-decreasing order */
    int li = 0, ii = m, next = m;
    for (int k = 0; k < m - 1; k++, next++) {
      int pick[2];
      for (int t = 0; t < 2; t++) pick[t] = li < m && (ii >= next || w[li] <= w[ii]) ? li++ : ii++;
      w[next] = w[pick[0]] + w[pick[1]];
      parent[pick[0]] = parent[pick[1]] = next;
    }
    int maxd = 0;
    depth[next - 1] = 0;
    for (int i = next - 2; i >= 0; i--) depth[i] = depth[parent[i]] + 1;
    for (int i = 0; i < m; i++) {
      len[lv[i].s] = (uint8_t)depth[i];
      if (depth[i] > maxd) maxd = depth[i];
    }
    if (maxd <= maxbits) return;
    for (int i = 0; i < n; i++)
      if (freq[i]) freq[i] = (freq[i] >> 1) + 1;
  }
}

/* The canonical codes of RFC 1951 3.2.2 for the lengths, bit-reversed (deflate sends a
 * Huffman code's first bit first, into the low bits). */
static void huff_codes(const uint8_t *len, int n, uint16_t *code) {
  int count[16] = {0}, next[16] = {0};
  for (int i = 0; i < n; i++) count[len[i]]++;
  count[0] = 0;
  for (int b = 1, c = 0; b < 16; b++) next[b] = c = (c + count[b - 1]) << 1;
  for (int i = 0; i < n; i++) {
    uint32_t v = len[i] ? (uint32_t)next[len[i]]++ : 0, r = 0;
    for (int b = 0; b < len[i]; b++, v >>= 1) r = (r << 1) | (v & 1);
    code[i] = (uint16_t)r;
  }
}

/* ------------------------------------------------------------------ blocks */

typedef struct {
  uint16_t sym[BLOCK_SYMS];  /* < 256: a literal byte; else 256 + match length */
  uint16_t dist[BLOCK_SYMS]; /* of a match */
  size_t n;
  uint8_t lsym[MAX_MATCH + 1]; /* match length -> index into len_base */
  uint8_t dsym[512];           /* distance - 1 -> code (zlib's folding: above 256, by 128) */
} block_t;

static void block_tables(block_t *b) {
  for (unsigned l = 3, i = 0; l <= MAX_MATCH; l++) {
    while (i < 28 && len_base[i + 1] <= l) i++;
    b->lsym[l] = (uint8_t)i;
  }
  for (unsigned c = 0; c < 30; c++)
    for (unsigned d = dist_base[c]; d < dist_base[c] + (1u << dist_extra[c]); d++)
      b->dsym[d - 1 < 256 ? d - 1 : 256 + ((d - 1) >> 7)] = (uint8_t)c;
}

static inline unsigned dist_code(const block_t *b, unsigned d) {
  return b->dsym[d - 1 < 256 ? d - 1 : 256 + ((d - 1) >> 7)];
}

/* The block header after BFINAL and BTYPE: HLIT, HDIST, HCLEN, the code-length code and the
 * run-length coded lengths of both codes (RFC 1951 3.2.7). */
static void write_lengths(bitw *w, const uint8_t *ll, const uint8_t *dl) {
  int hlit = 286, hdist = 30;
  while (hlit > 257 && !ll[hlit - 1]) hlit--;
  while (hdist > 1 && !dl[hdist - 1]) hdist--;
  uint8_t all[316], rs[316], rx[316];
  memcpy(all, ll, (size_t)hlit);
  memcpy(all + hlit, dl, (size_t)hdist);
  int na = hlit + hdist, nr = 0;
  uint32_t cf[19] = {0};
  for (int i = 0; i < na;) {
    int l = all[i], run = 1;
    while (i + run < na && all[i + run] == l) run++;
    if (l == 0 && run >= 3) { /* 17: 3-10 zeros, 18: 11-138 */
      int r = run > 138 ? 138 : run;
      rs[nr] = r >= 11 ? 18 : 17;
      rx[nr] = (uint8_t)(r >= 11 ? r - 11 : r - 3);
      cf[rs[nr]]++;
      nr++;
      i += r;
      continue;
    }
    rs[nr] = (uint8_t)l;
    rx[nr++] = 0;
    cf[l]++;
    i++;
    run--;
    while (l != 0 && run >= 3) { /* 16: the previous length 3-6 more times */
      int r = run < 6 ? run : 6;
      rs[nr] = 16;
      rx[nr++] = (uint8_t)(r - 3);
      cf[16]++;
      i += r;
      run -= r;
    }
  }
  uint8_t cl[19];
  uint16_t cc[19];
  huff_lengths(cf, 19, 7, cl);
  huff_codes(cl, 19, cc);
  int hclen = 19;
  while (hclen > 4 && !cl[clen_order[hclen - 1]]) hclen--;
  bw_put(w, (uint32_t)(hlit - 257), 5);
  bw_put(w, (uint32_t)(hdist - 1), 5);
  bw_put(w, (uint32_t)(hclen - 4), 4);
  for (int i = 0; i < hclen; i++) bw_put(w, cl[clen_order[i]], 3);
  static const int rx_bits[19] = {[16] = 2, [17] = 3, [18] = 7};
  for (int i = 0; i < nr; i++) {
    bw_put(w, cc[rs[i]], cl[rs[i]]);
    if (rx_bits[rs[i]]) bw_put(w, rx[i], rx_bits[rs[i]]);
  }
}

/* Writes the collected symbols as one block with its own codes and empties it. */
static int write_block(bitw *w, block_t *b, int final) {
  uint32_t lf[286] = {0}, df[30] = {0};
  for (size_t i = 0; i < b->n; i++) {
    if (b->sym[i] < 256) {
      lf[b->sym[i]]++;
      continue;
    }
    lf[257 + b->lsym[b->sym[i] - 256]]++;
    df[dist_code(b, b->dist[i])]++;
  }
  lf[256] = 1; /* end of block */
  uint8_t ll[286], dl[30];
  uint16_t lc[286], dc[30];
  huff_lengths(lf, 286, 15, ll);
  huff_lengths(df, 30, 15, dl);
  huff_codes(ll, 286, lc);
  huff_codes(dl, 30, dc);
  /* a match is at most 15 + 5 + 15 + 13 bits; the header under 1 KiB */
  if (bw_reserve(w, b->n * 6 + 1024) != FP8_OK) return FP8_ENOMEM;
  bw_put(w, final ? 1u : 0u, 1);
  bw_put(w, 2, 2);
  write_lengths(w, ll, dl);
  for (size_t i = 0; i < b->n; i++) {
    unsigned s = b->sym[i];
    if (s < 256) {
      bw_put(w, lc[s], ll[s]);
      continue;
    }
    unsigned len = s - 256, li = b->lsym[len], d = b->dist[i], di = dist_code(b, d);
    bw_put(w, lc[257 + li], ll[257 + li]);
    if (len_extra[li]) bw_put(w, len - len_base[li], len_extra[li]);
    bw_put(w, dc[di], dl[di]);
    if (dist_extra[di]) bw_put(w, d - dist_base[di], dist_extra[di]);
  }
  bw_put(w, lc[256], ll[256]);
  b->n = 0;
  return FP8_OK;
}

/* ------------------------------------------------------------------ matching */

/* Stream positions [base, end) of the filtered rows are in buf. */
typedef struct {
  const uint8_t *rgb;
  size_t rowlen, stride, height, next_row;
  uint8_t *buf;
  size_t cap, keep; /* bytes of buf; kept before end when the band moves on */
  size_t base, end;
  uint32_t adler;   /* of the rows copied in so far */
} band;

/* Copies the next filtered row in, first dropping what no match can reach any more. */
static void band_fill(band *b) {
  if (b->end - b->base + b->stride > b->cap) {
    size_t drop = b->end - b->keep - b->base;
    memmove(b->buf, b->buf + drop, b->end - b->base - drop);
    b->base += drop;
  }
  uint8_t *row = b->buf + (b->end - b->base);
  row[0] = 0; /* filter type None */
  memcpy(row + 1, b->rgb + b->next_row * b->rowlen, b->rowlen);
  b->adler = fp8_png_adler32(b->adler, row, b->stride);
  b->end += b->stride;
  b->next_row++;
}

/* Length of the common prefix of a and b, at most max. */
static inline size_t match_len(const uint8_t *a, const uint8_t *b, size_t max) {
  size_t n = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  for (; n + 8 <= max; n += 8) {
    uint64_t x, y;
    memcpy(&x, a + n, 8);
    memcpy(&y, b + n, 8);
    if (x != y) return n + (size_t)(__builtin_ctzll(x ^ y) >> 3);
  }
#endif
  while (n < max && a[n] == b[n]) n++;
  return n;
}

/* The longest candidate match at stream position p (see the top of the file); 0 if none. */
static size_t best_match(const band *b, uint32_t *head, size_t p, size_t *dist) {
  const uint8_t *cur = b->buf + (p - b->base);
  size_t max = b->end - p < MAX_MATCH ? b->end - p : MAX_MATCH, best = 0;
  if (p >= 3) best = match_len(cur, cur - 3, max), *dist = 3;
  if (best < max && b->stride <= WINDOW && p >= b->stride) {
    size_t l = match_len(cur, cur - b->stride, max);
    if (l > best) best = l, *dist = b->stride;
  }
  if (best < MIN_MATCH && head && max >= 4) {
    uint32_t v;
    memcpy(&v, cur, 4);
    uint32_t h = (v * 2654435761u) >> (32 - HASH_BITS), c = head[h];
    head[h] = (uint32_t)(p + 1);
    if (c && p - (c - 1) <= WINDOW && c - 1 >= b->base) {
      size_t l = match_len(cur, b->buf + (c - 1 - b->base), max);
      if (l > best) best = l, *dist = p - (c - 1);
    }
  }
  return best;
}

static int encode_stream(band *b, block_t *blk, uint32_t *head, bitw *w) {
  size_t total = b->stride * b->height;
  for (size_t p = 0; p < total;) {
    while (b->end - p < MAX_MATCH && b->next_row < b->height) band_fill(b);
    size_t dist = 0, len = best_match(b, head, p, &dist);
    if (len >= MIN_MATCH) {
      blk->sym[blk->n] = (uint16_t)(256 + len);
      blk->dist[blk->n++] = (uint16_t)dist;
      p += len;
    } else {
      blk->sym[blk->n++] = b->buf[p - b->base];
      p++;
    }
    if (blk->n == BLOCK_SYMS && write_block(w, blk, 0) != FP8_OK) return FP8_ENOMEM;
  }
  return write_block(w, blk, 1);
}

int fp8_png_deflate(const uint8_t *rgb, int width, int height, uint8_t **out, size_t *outlen) {
  *out = NULL;
  *outlen = 0;
  if (!rgb || width <= 0 || height <= 0) return FP8_EINVAL;
  band b = {.rgb = rgb, .rowlen = (size_t)width * 3, .height = (size_t)height, .adler = 1};
  b.stride = b.rowlen + 1;
  b.keep = WINDOW + MAX_MATCH;
  b.cap = b.keep + (AHEAD_ROWS + 1) * b.stride;
  bitw w = {0};
  block_t *blk = malloc(sizeof *blk);
  b.buf = malloc(b.cap);
  /* positions are kept as uint32 + 1: no hashed candidate for larger images */
  uint32_t *head = b.stride * b.height < UINT32_MAX ? calloc(1u << HASH_BITS, sizeof *head) : NULL;
  int rc = FP8_ENOMEM;
  if (!blk || !b.buf || (!head && b.stride * b.height < UINT32_MAX) || bw_reserve(&w, 2)) goto done;
  blk->n = 0;
  block_tables(blk);
  w.buf[w.n++] = 0x78; /* deflate, 32 KiB window */
  w.buf[w.n++] = 0x01; /* no dictionary, check bits */
  if (encode_stream(&b, blk, head, &w) != FP8_OK || bw_reserve(&w, 8) != FP8_OK) goto done;
  bw_align(&w);
  for (int i = 3; i >= 0; i--) w.buf[w.n++] = (uint8_t)(b.adler >> (8 * i));
  *out = w.buf;
  *outlen = w.n;
  w.buf = NULL;
  rc = FP8_OK;
done:
  free(w.buf);
  free(blk);
  free(b.buf);
  free(head);
  return rc;
}
