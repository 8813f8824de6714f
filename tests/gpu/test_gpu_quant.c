/* test_gpu_quant.c: the GPU engine's kernels (kernels/quant.cu, delayed.cu) against the CPU
 * simulator, "same operation, two implementations":
 *  - fused quantize + statistics (fp8k_quant_stats) vs fp8_quantize_f32 / fp8_amax_f32 /
 *    fp8_log2_histogram on random tensors (F32, BF16, F16; 0, 1, 7, 4097 and 2^20+3 elements;
 *    host buffers at odd addresses), special values (NaN, +-inf, +-0, subnormals, FLT_MAX, FP8
 *    ties after scaling, values at the saturation boundary), wide exponent spans (the float
 *    error-term path's fallbacks), 70 configurations (two launches), both error-sum modes:
 *    codes of configuration 0, amax, every count (clipped included) and the histogram
 *    identical; the three sums (sum_sq_err, sum_sq, sum_sq_hat) within 1e-6 relative
 *    (summation order differs; both NaN or the same infinity also agree);
 *  - current scaling on the device vs fp8_current_scale (scales bit for bit) and the stats;
 *  - clipped against overflow at the rounding midpoint above max (E4M3 |x s| = 464 overflows
 *    without clipping, the next float clips; E5M2 61440 clips, the float below does not), on
 *    host scales, device scales (fp8k_quant_stats_dscales, the GPU engine's delayed path) and
 *    current scaling, against counts taken literally from RECIPES.md's definitions;
 *  - the delayed-scaling update for many slots vs fp8_delayed_update / fp8_delayed_history
 *    after every step (random amax streams with zeros, inf, NaN, tiny values; L in
 *    {1, 2, 3, 16, 1024}; both amax_compute; both formats; margins; fused and unfused updates).
 * Label gpu; without a device: "skipped: no CUDA device (...)" and exit 77. A failure names the
 * first mismatch (indices and values). The same file built against the CUDA execution emulator
 * (tests/gpu/emu, FP8K_TEST_QUICK) is test_gpu_quant_emu, label cpu: the kernels' logic on every
 * machine. Check, where used, runs in no-fork mode: a CUDA context
 * does not survive fork(). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h> /* device scales (test_clip_boundary); the mock runtime under emu */

#include "fp8.h"
#include "fp8k.h"
#include "gpu_harness.h"
#ifdef FP8LAB_WITH_CHECK
#include <check.h>

#include "testutil.h"
#endif

/* Assertions: gpu_harness.h's GH_REQUIRE (report, count, leave the current function), in both
 * builds. With libcheck (the normal build) every test function also runs as a Check test that
 * fails when it recorded a failure; without it (FP8LAB_GPU_ONLY, the device machine has no
 * libcheck) the harness runs them. */
#define T_REQUIRE(cond, ...) GH_REQUIRE(cond, __VA_ARGS__)
#define T_ASSERT(cond) GH_REQUIRE(cond, "%s", #cond)
#define T_EQ(a, b)                                                                          \
  GH_REQUIRE((a) == (b), "%s = %lld, expected %s = %lld", #a, (long long)(a), #b, (long long)(b))

/* Tolerance of the three double sums (RECIPES.md statistics): relative, because the GPU sums in
 * another order (and, by default, forms each term in float32 with a bounded 4.2e-7 error, see
 * kernels/quant.cu). Counts, codes, amax, histogram and scales are compared exactly. */
#define SUM_RTOL 1e-6

static fp8k_ctx *g_ctx;
static char g_err[512];

/* ------------------------------------------------------------------ helpers */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static double rnd01(void) { return (double)(rnd() >> 11) / 9007199254740992.0; }

static uint32_t f2u(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

/* A float that is exactly representable in dtype, converted to its raw bits; returns 0 when it
 * is not (the caller then skips the value). */
static int f32_to_dtype_bits(float f, fp8_dtype d, uint32_t *bits) {
  uint32_t u = f2u(f);
  if (d == FP8_DTYPE_F32) {
    *bits = u;
    return 1;
  }
  if (d == FP8_DTYPE_BF16) {
    if (u & 0xFFFFu) return 0;
    *bits = u >> 16;
    return 1;
  }
  /* F16: zero, inf, NaN, normal or subnormal values with enough trailing zero bits */
  uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7FFFFFFFu;
  if (a == 0) { *bits = sign; return 1; }
  if (a == 0x7F800000u) { *bits = sign | 0x7C00u; return 1; }
  if (a > 0x7F800000u) { *bits = sign | 0x7E00u; return 1; }
  int e = (int)(a >> 23) - 127;
  if (e >= -14 && e <= 15) {
    if (a & 0x1FFFu) return 0;
    *bits = sign | (uint32_t)((e + 15) << 10) | ((a >> 13) & 0x3FFu);
    return 1;
  }
  if (e >= -24 && e < -14) { /* subnormal f16: m * 2^-24 */
    double m = ldexp((double)fabsf(f), 24);
    if (m != floor(m)) return 0;
    *bits = sign | (uint32_t)m;
    return 1;
  }
  return 0;
}

/* A tensor: raw little-endian bytes as in a trace, and the float32 the sim sees. */
typedef struct {
  fp8_dtype dtype;
  int64_t n;
  unsigned char *raw; /* allocation */
  unsigned char *bytes; /* raw + offset: possibly unaligned */
  float *x;
} tensor;

static void tensor_alloc(tensor *t, fp8_dtype d, int64_t n, int offset) {
  t->dtype = d;
  t->n = n;
  size_t es = fp8_dtype_size(d);
  t->raw = malloc((size_t)n * es + 16);
  t->bytes = t->raw + offset;
  t->x = malloc(((size_t)n + 1) * sizeof(float));
  T_ASSERT(t->raw && t->x);
}

static void tensor_set_bits(tensor *t, int64_t i, uint32_t bits) {
  size_t es = fp8_dtype_size(t->dtype);
  for (size_t b = 0; b < es; b++) t->bytes[(size_t)i * es + b] = (unsigned char)(bits >> (8 * b));
}

static void tensor_finish(tensor *t) { fp8_dtype_to_f32(t->dtype, t->bytes, (size_t)t->n, t->x); }

static void tensor_free(tensor *t) {
  free(t->raw);
  free(t->x);
}

/* Random bits of a dtype with the (unbiased) exponent drawn from [emin, emax], random sign and
 * mantissa; a fraction of special values. */
static uint32_t random_bits(fp8_dtype d, int emin, int emax, double special) {
  int mbits = d == FP8_DTYPE_F32 ? 23 : d == FP8_DTYPE_BF16 ? 7 : 10;
  int ebits = d == FP8_DTYPE_F16 ? 5 : 8, bias = (1 << (ebits - 1)) - 1;
  int width = 1 + ebits + mbits;
  uint32_t sign = (uint32_t)(rnd() & 1) << (width - 1);
  uint32_t emask = (1u << ebits) - 1, mant = (uint32_t)rnd() & ((1u << mbits) - 1);
  if (rnd01() < special) {
    switch (rnd() % 6) {
    case 0: return sign | (emask << mbits) | (mant | 1u); /* NaN, random payload */
    case 1: return sign | (emask << mbits);              /* inf */
    case 2: return sign;                                 /* +-0 */
    case 3: return sign | (mant ? mant : 1u);            /* subnormal */
    case 4: return sign | ((emask - 1) << mbits) | ((1u << mbits) - 1); /* max finite */
    default: return (uint32_t)rnd() & ((width == 32) ? 0xFFFFFFFFu : 0xFFFFu); /* any */
    }
  }
  int e = emin + (int)(rnd() % (uint64_t)(emax - emin + 1));
  int be = e + bias;
  if (be < 1) be = 1;
  if (be > (int)emask - 1) be = (int)emask - 1;
  return sign | ((uint32_t)be << mbits) | mant;
}

static int sums_close(double a, double b) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
  if (a == b) return 1;
  if (isinf(a) || isinf(b)) return 0;
  return fabs(a - b) <= SUM_RTOL * fmax(fabs(a), fabs(b));
}

/* The CPU oracle for one tensor and a set of configurations. */
typedef struct {
  fp8_stats st[256];
  float amax;
  int64_t hist[FP8_LOG2_HIST_BINS];
  uint8_t *codes;
} oracle;

static void cpu_oracle(const tensor *t, const float *scales, const int *formats, int nc,
                       oracle *o) {
  o->codes = malloc((size_t)t->n + 1);
  T_ASSERT(o->codes != NULL);
  for (int c = 0; c < nc; c++) {
    fp8_stats_init(&o->st[c]);
    fp8_quantize_f32(t->x, (size_t)t->n, scales[c], (fp8_format)formats[c],
                     c == 0 ? o->codes : NULL, NULL, &o->st[c]);
  }
  o->amax = fp8_amax_f32(t->x, (size_t)t->n);
  memset(o->hist, 0, sizeof o->hist);
  fp8_log2_histogram(t->x, (size_t)t->n, o->hist);
}

/* Compares everything; `what` names the case in messages. */
static void compare(const char *what, const tensor *t, const float *scales, const int *formats,
                    int nc, const oracle *o, const fp8k_stats *g, float gamax,
                    const int64_t *ghist, const uint8_t *gcodes) {
  if (gcodes && t->n > 0 && nc > 0) {
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < t->n; i++)
      if (gcodes[i] != o->codes[i]) {
        if (first < 0) first = i;
        bad++;
      }
    if (first >= 0) {
      float x = t->x[first], y = x * scales[0];
      T_REQUIRE(0, "%s: %lld of %lld codes differ (config 0: %s, scale %.9g); first at element "
                   "%lld: x = %.9g (bits 0x%08x), y = x*s = %.9g (bits 0x%08x): cpu 0x%02x, gpu 0x%02x",
                   what, (long long)bad, (long long)t->n, fp8_format_name((fp8_format)formats[0]),
                   (double)scales[0], (long long)first, (double)x, f2u(x), (double)y, f2u(y),
                   o->codes[first], gcodes[first]);
    }
  }
  if (!isnan(gamax))
    T_REQUIRE(f2u(gamax) == f2u(o->amax), "%s: amax cpu %.9g (0x%08x), gpu %.9g (0x%08x)",
                  what, (double)o->amax, f2u(o->amax), (double)gamax, f2u(gamax));
  if (ghist)
    for (int b = 0; b < FP8_LOG2_HIST_BINS; b++)
      T_REQUIRE(ghist[b] == o->hist[b],
                    "%s: log2 histogram bin %d (2^%d <= |x| < 2^%d): cpu %lld, gpu %lld", what, b,
                    b + FP8_LOG2_HIST_MIN, b + FP8_LOG2_HIST_MIN + 1, (long long)o->hist[b],
                    (long long)ghist[b]);
  for (int c = 0; c < nc; c++) {
    const fp8_stats *a = &o->st[c];
    const fp8k_stats *b = &g[c];
#define CMP_COUNT(field)                                                                      \
  T_REQUIRE(a->field == b->field,                                                        \
                "%s: config %d (%s, scale %.9g, n %lld): " #field " cpu %lld, gpu %lld", what, c, \
                fp8_format_name((fp8_format)formats[c]), (double)scales[c], (long long)t->n,      \
                (long long)a->field, (long long)b->field)
    CMP_COUNT(n);
    CMP_COUNT(nonfinite);
    CMP_COUNT(zeros);
    CMP_COUNT(overflow);
    CMP_COUNT(underflow);
    CMP_COUNT(subnormal);
    CMP_COUNT(clipped);
#undef CMP_COUNT
    T_REQUIRE(sums_close(a->sum_sq_err, b->sum_sq_err),
                  "%s: config %d (%s, scale %.9g): sum_sq_err cpu %.17g, gpu %.17g (rel %.3g)",
                  what, c, fp8_format_name((fp8_format)formats[c]), (double)scales[c],
                  a->sum_sq_err, b->sum_sq_err,
                  fabs(a->sum_sq_err - b->sum_sq_err) / fmax(fabs(a->sum_sq_err), 1e-300));
    T_REQUIRE(sums_close(a->sum_sq, b->sum_sq),
                  "%s: config %d: sum_sq cpu %.17g, gpu %.17g (rel %.3g)", what, c, a->sum_sq,
                  b->sum_sq, fabs(a->sum_sq - b->sum_sq) / fmax(fabs(a->sum_sq), 1e-300));
    T_REQUIRE(sums_close(a->sum_sq_hat, b->sum_sq_hat),
                  "%s: config %d (%s, scale %.9g): sum_sq_hat cpu %.17g, gpu %.17g (rel %.3g)",
                  what, c, fp8_format_name((fp8_format)formats[c]), (double)scales[c],
                  a->sum_sq_hat, b->sum_sq_hat,
                  fabs(a->sum_sq_hat - b->sum_sq_hat) / fmax(fabs(a->sum_sq_hat), 1e-300));
  }
}

/* Runs the GPU on tensor t with all outputs requested (and again with none), in both sum
 * modes, and compares with the oracle. */
static void check_tensor(const char *what, const tensor *t, const float *scales,
                         const int *formats, int nc) {
  oracle *o = malloc(sizeof *o);
  fp8k_stats *g = calloc((size_t)nc + 1, sizeof *g);
  uint8_t *codes = malloc((size_t)t->n + 1);
  int64_t hist[FP8_LOG2_HIST_BINS];
  T_ASSERT(o && g && codes);
  cpu_oracle(t, scales, formats, nc, o);
  int rc = fp8k_upload(g_ctx, t->bytes, t->n, t->dtype, g_err, sizeof g_err);
  T_REQUIRE(rc == 0, "%s: fp8k_upload: %s", what, g_err);
  for (int mode = 0; mode < 2; mode++) {
    char label[256];
    snprintf(label, sizeof label, "%s [%s sums]", what, mode ? "f64" : "float-term");
    fp8k_ctx_set_f64_sums(g_ctx, mode);
    float amax = NAN;
    memset(codes, 0xEE, (size_t)t->n + 1);
    memset(hist, 0xEE, sizeof hist);
    rc = fp8k_quant_stats(g_ctx, scales, formats, nc, g, &amax, hist, codes, g_err, sizeof g_err);
    T_REQUIRE(rc == 0, "%s: fp8k_quant_stats: %s", label, g_err);
    T_REQUIRE(!isnan(amax), "%s: amax not written", label);
    compare(label, t, scales, formats, nc, o, g, amax, hist, codes);
    /* no optional outputs: the kernel without histogram and codes */
    memset(g, 0, ((size_t)nc + 1) * sizeof *g);
    rc = fp8k_quant_stats(g_ctx, scales, formats, nc, g, NULL, NULL, NULL, g_err, sizeof g_err);
    T_REQUIRE(rc == 0, "%s (no optional outputs): %s", label, g_err);
    strncat(label, " (no optional outputs)", sizeof label - strlen(label) - 1);
    compare(label, t, scales, formats, nc, o, g, NAN, NULL, NULL);
  }
  fp8k_ctx_set_f64_sums(g_ctx, 0);
  if (t->n > 0) {
    float a = -1.0f;
    rc = fp8k_amax(g_ctx, &a, g_err, sizeof g_err);
    T_REQUIRE(rc == 0, "%s: fp8k_amax: %s", what, g_err);
    T_REQUIRE(f2u(a) == f2u(o->amax), "%s: fp8k_amax cpu %.9g, gpu %.9g", what,
                  (double)o->amax, (double)a);
  }
  free(o->codes);
  free(o);
  free(g);
  free(codes);
}

/* A set of configurations covering both formats, amax-derived scales, powers of two, odd
 * scales, extreme scales (huge, tiny normal, subnormal: 1/s = inf, zero: 1/s = inf), and 2^120 /
 * 2^-120, normal scales with normal 1/s whose decode * sinv can be subnormal / infinite (the
 * double path of the xhat^2 sum while the error sums keep the float one). */
static int make_configs(float amax, float *scales, int *formats) {
  float fin = isfinite(amax) && amax > 0 ? amax : 1.0f;
  const float list[] = {1.0f, 1.0f, 448.0f / fin, 57344.0f / fin, 0.125f, 32.0f, 3.7f,
                        0.013f, 1e-30f, 1e30f, FLT_MAX, 1e-40f, 0.0f, 224.0f / fin,
                        0.5f * (448.0f / fin), 6.1e-5f, 0x1p120f, 0x1p120f, 0x1p-120f,
                        0x1p-120f};
  int n = (int)(sizeof list / sizeof list[0]);
  for (int c = 0; c < n; c++) {
    scales[c] = list[c];
    formats[c] = c % 2 ? FP8_E5M2 : FP8_E4M3;
  }
  formats[2] = FP8_E4M3;
  formats[3] = FP8_E5M2;
  return n;
}

/* ------------------------------------------------------------------ fused pass tests */

/* The largest random tensor: 2^20+3 elements. The emulated build (test_gpu_quant_emu: the same
 * kernels on CPU fibers, tests/gpu/emu) is compiled with FP8K_TEST_QUICK, which makes it 2^16+3,
 * still several sweeps of the emulated grid-stride loop (6 blocks of 256 threads x 16 elements)
 * with a partial last chunk; FP8K_TEST_FULL=1 in the environment restores 2^20+3 there. Nothing
 * else changes size. */
static int64_t largest_size(void) {
#ifdef FP8K_TEST_QUICK
  const char *full = getenv("FP8K_TEST_FULL");
  if (!full || !*full || strcmp(full, "0") == 0) return (1 << 16) + 3;
#endif
  return (1 << 20) + 3;
}

static void t_random_tensors(fp8_dtype d) {
  const int64_t SIZES[] = {0, 1, 7, 4097, largest_size()};
  for (size_t si = 0; si < sizeof SIZES / sizeof SIZES[0]; si++)
    for (int off = 0; off < 4; off += 3) { /* host buffer at an odd address too */
      int64_t n = SIZES[si];
      tensor t;
      tensor_alloc(&t, d, n, off);
      int lo = d == FP8_DTYPE_F16 ? -14 : -30, hi = d == FP8_DTYPE_F16 ? 15 : 20;
      for (int64_t i = 0; i < n; i++) tensor_set_bits(&t, i, random_bits(d, lo, hi, 0.01));
      tensor_finish(&t);
      float scales[64];
      int formats[64];
      int nc = make_configs(fp8_amax_f32(t.x, (size_t)n), scales, formats);
      /* make configuration 0 the realistic one: E4M3 with the tensor's own scale */
      scales[0] = scales[2];
      char what[128];
      snprintf(what, sizeof what, "random %s n=%lld offset=%d", fp8_dtype_name(d), (long long)n,
               off);
      check_tensor(what, &t, scales, formats, nc);
      /* and configuration 0 as E5M2 */
      formats[0] = FP8_E5M2;
      scales[0] = scales[3];
      if (n == 4097) check_tensor(what, &t, scales, formats, nc);
      tensor_free(&t);
    }
}

/* Values at FP8 ties after scaling, the saturation boundary, and every special value. */
static void t_special_values(fp8_dtype d) {
  enum { N = 20000 };
  tensor t;
  tensor_alloc(&t, d, N, 1);
  int64_t k = 0;
  /* scale 2^-3 for config 0 (E4M3) and 2^-3 for config 1 (E5M2): x = midpoint * 8 */
  for (int f = 0; f < 2 && k < N; f++) {
    const float *tab = fp8_decode_table((fp8_format)f);
    for (int c = 0; c < 0x7E && k < N - 4; c++) {
      float a = tab[c], b = tab[c + 1];
      if (!isfinite(a) || !isfinite(b)) continue;
      float mid = (a + b) * 0.5f * 8.0f;
      uint32_t bits;
      if (f32_to_dtype_bits(mid, d, &bits)) tensor_set_bits(&t, k++, bits);
      if (f32_to_dtype_bits(-mid, d, &bits)) tensor_set_bits(&t, k++, bits);
      /* one float ulp either side of the tie (F32 only; others are skipped) */
      if (f32_to_dtype_bits(nextafterf(mid, INFINITY), d, &bits)) tensor_set_bits(&t, k++, bits);
      if (f32_to_dtype_bits(nextafterf(mid, 0.0f), d, &bits)) tensor_set_bits(&t, k++, bits);
    }
  }
  const float specials[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, FLT_MAX, -FLT_MAX,
                            FLT_MIN, 1e-45f, -1e-45f, 1e-40f, 448.0f * 8, 464.0f * 8,
                            480.0f * 8, 57344.0f * 8, 61440.0f * 8, 65536.0f * 8, 5.9604645e-08f,
                            6.1035156e-05f, 65504.0f, 1.0f, -1.0f, 0.0009765625f, 0.00048828125f,
                            1.5258789e-05f, 7.6293945e-06f};
  for (int rep = 0; rep < 4; rep++)
    for (size_t i = 0; i < sizeof specials / sizeof specials[0] && k < N; i++) {
      uint32_t bits;
      float v = specials[i] * (rep == 0 ? 1.0f : rep == 1 ? 0.5f : rep == 2 ? 1.0000001f : 3.0f);
      if (isnan(specials[i])) v = specials[i];
      if (f32_to_dtype_bits(v, d, &bits)) tensor_set_bits(&t, k++, bits);
    }
  /* fill the rest with random bit patterns (every class of value) */
  for (; k < N; k++) tensor_set_bits(&t, k, random_bits(d, -20, 20, 0.5));
  /* shuffle so that specials land in every lane and chunk position */
  for (int64_t i = N - 1; i > 0; i--) {
    int64_t j = (int64_t)(rnd() % (uint64_t)(i + 1));
    size_t es = fp8_dtype_size(d);
    unsigned char tmp[4];
    memcpy(tmp, t.bytes + i * es, es);
    memcpy(t.bytes + i * es, t.bytes + j * es, es);
    memcpy(t.bytes + j * es, tmp, es);
  }
  tensor_finish(&t);
  float scales[64];
  int formats[64];
  int nc = make_configs(fp8_amax_f32(t.x, N), scales, formats);
  scales[0] = 0.125f;
  scales[1] = 0.125f;
  char what[128];
  snprintf(what, sizeof what, "special values %s", fp8_dtype_name(d));
  check_tensor(what, &t, scales, formats, nc);
  formats[0] = FP8_E5M2;
  check_tensor(what, &t, scales, formats, nc);
  tensor_free(&t);
}

/* Exponent spans that exercise the float-term path's rescaling and its double fallbacks:
 * tiny-only, huge-only, tiny and huge in the same 16-element chunk, float subnormals. */
static void test_wide_range(void) {
  const int ranges[][2] = {{-126, 127}, {-100, -80}, {-75, -60}, {100, 127}, {50, 70},
                           {-40, 40}, {-126, -120}};
  for (size_t r = 0; r < sizeof ranges / sizeof ranges[0]; r++) {
    enum { N = 65536 + 5 };
    tensor t;
    tensor_alloc(&t, FP8_DTYPE_F32, N, 0);
    for (int64_t i = 0; i < N; i++)
      tensor_set_bits(&t, i, random_bits(FP8_DTYPE_F32, ranges[r][0], ranges[r][1],
                                         r == 0 ? 0.05 : 0.0));
    tensor_finish(&t);
    float scales[64];
    int formats[64];
    int nc = make_configs(fp8_amax_f32(t.x, N), scales, formats);
    char what[128];
    snprintf(what, sizeof what, "F32 exponents [%d, %d]", ranges[r][0], ranges[r][1]);
    check_tensor(what, &t, scales, formats, nc);
    tensor_free(&t);
  }
}

/* More configurations than one launch holds (64): the launch loop. */
static void test_many_configs(void) {
  enum { N = 100003, NC = 150 };
  tensor t;
  tensor_alloc(&t, FP8_DTYPE_BF16, N, 1);
  for (int64_t i = 0; i < N; i++) tensor_set_bits(&t, i, random_bits(FP8_DTYPE_BF16, -12, 6, 0.001));
  tensor_finish(&t);
  float amax = fp8_amax_f32(t.x, N);
  float scales[NC];
  int formats[NC];
  for (int c = 0; c < NC; c++) {
    formats[c] = c % 3 == 2 ? FP8_E5M2 : FP8_E4M3;
    scales[c] = fp8_format_max((fp8_format)formats[c]) / amax * ldexpf(1.0f, c % 11 - 5) *
                (1.0f + 0.01f * (float)(c % 7));
  }
  check_tensor("BF16 with 150 configurations", &t, scales, formats, NC);
  tensor_free(&t);
}

/* ------------------------------------------------------------------ clipped vs overflow */

/* overflow and clipped of n floats at scale s, taken literally from RECIPES.md (y = RN32(x*s),
 * finite x only; overflow |y| > max, clipped E4M3 |y| > 464, E5M2 |y| >= 61440), independent of
 * fp8_clip_bits and of the kernels' bit tests. */
static void literal_counts(const float *x, int64_t n, float s, fp8_format f, int64_t *ov,
                           int64_t *cl) {
  *ov = *cl = 0;
  for (int64_t i = 0; i < n; i++) {
    if (!isfinite(x[i])) continue;
    volatile float y = x[i] * s; /* one float32 rounding */
    float a = fabsf(y);
    *ov += a > fp8_format_max(f);
    *cl += f == FP8_E4M3 ? a > 464.0f : a >= 61440.0f;
  }
}

/* Both sides of the midpoint above max for format f: at scale 1/4 the values max/s and its
 * next float (overflow only: y = 448 + 1 ulp), the midpoint / s (E4M3: 464, overflow only; E5M2:
 * 61440, clipped) and its neighbours, 2 max / s (clipped; the amax, so that current scaling
 * with margin -1 picks s = 1/4 itself); and around the midpoint / 0.3 (a scale whose products
 * round); a NaN (not counted; no inf, which would make the current amax inf); the rest small.
 * Host scales (check_tensor: every output, both sum modes), device scales
 * (fp8k_quant_stats_dscales, what the GPU engine runs for delayed scaling) and current scaling
 * each give the literal counts, with clipped > 0 and overflow > clipped in every configuration. */
static void t_clip_boundary(fp8_format f) {
  enum { N = 4099, NC = 2 };
  const float s = 0.25f, odd = 0.3f, mx = fp8_format_max(f);
  const float mid = f == FP8_E4M3 ? 464.0f : 61440.0f;
  const float edge[] = {mx / s, nextafterf(mx / s, INFINITY), mid / s, nextafterf(mid / s, 0.0f),
                        nextafterf(mid / s, INFINITY), 2.0f * mx / s, mid / odd,
                        nextafterf(mid / odd, 0.0f), nextafterf(nextafterf(mid / odd, 0.0f), 0.0f),
                        nextafterf(mid / odd, INFINITY),
                        nextafterf(nextafterf(mid / odd, INFINITY), INFINITY), NAN};
  const int nedge = (int)(sizeof edge / sizeof edge[0]);
  tensor t;
  tensor_alloc(&t, FP8_DTYPE_F32, N, 1);
  for (int64_t i = 0; i < N; i++) {
    float v = i % 5 == 2 ? edge[(i / 5) % nedge] : (float)((2.0 * rnd01() - 1.0) * mx);
    tensor_set_bits(&t, i, f2u(i % 2 ? -v : v));
  }
  tensor_finish(&t);
  const float scales[NC] = {s, odd};
  const int formats[NC] = {f, f};
  int64_t ov[NC], cl[NC];
  char what[128];
  for (int c = 0; c < NC; c++) {
    literal_counts(t.x, N, scales[c], f, &ov[c], &cl[c]);
    T_REQUIRE(cl[c] > 0 && ov[c] > cl[c], "%s scale %g: the case needs 0 < clipped < overflow, "
              "has clipped %lld, overflow %lld", fp8_format_name(f), (double)scales[c],
              (long long)cl[c], (long long)ov[c]);
  }
  snprintf(what, sizeof what, "clip boundary %s, host scales", fp8_format_name(f));
  check_tensor(what, &t, scales, formats, NC);

  oracle *o = malloc(sizeof *o);
  uint8_t *codes = malloc(N);
  float *d_scales = NULL;
  fp8k_stats g[NC];
  T_ASSERT(o && codes);
  cpu_oracle(&t, scales, formats, NC, o);
  T_REQUIRE(cudaMalloc((void **)&d_scales, sizeof scales) == cudaSuccess &&
                cudaMemcpy(d_scales, scales, sizeof scales, cudaMemcpyHostToDevice) == cudaSuccess,
            "device scales: cudaMalloc / cudaMemcpy failed");
  T_EQ(fp8k_upload(g_ctx, t.bytes, t.n, t.dtype, g_err, sizeof g_err), 0);
  int rc = fp8k_quant_stats_dscales(g_ctx, d_scales, formats, NC, g, codes, g_err, sizeof g_err);
  T_REQUIRE(rc == 0, "fp8k_quant_stats_dscales: %s", g_err);
  snprintf(what, sizeof what, "clip boundary %s, device scales", fp8_format_name(f));
  compare(what, &t, scales, formats, NC, o, g, NAN, NULL, codes);
  for (int c = 0; c < NC; c++) {
    T_EQ(g[c].overflow, ov[c]);
    T_EQ(g[c].clipped, cl[c]);
  }

  /* current scaling, margin -1: scaled_max = 2 max, amax = 2 max / s, so the scale is s */
  fp8k_current_params P = {.amax_epsilon = 0.0f, .pow2 = 0, .margin = -1, .format = (int32_t)f};
  float gscale = 0.0f;
  rc = fp8k_current_quant_stats(g_ctx, &P, 1, g, &gscale, NULL, codes, g_err, sizeof g_err);
  T_REQUIRE(rc == 0, "fp8k_current_quant_stats: %s", g_err);
  T_REQUIRE(gscale == s, "current scaling, margin -1: scale %.9g, expected %.9g", (double)gscale,
            (double)s);
  snprintf(what, sizeof what, "clip boundary %s, current scaling", fp8_format_name(f));
  compare(what, &t, scales, formats, 1, o, g, NAN, NULL, codes);
  T_EQ(g[0].overflow, ov[0]);
  T_EQ(g[0].clipped, cl[0]);
  cudaFree(d_scales);
  free(o->codes);
  free(o);
  free(codes);
  tensor_free(&t);
}

static void test_clip_boundary(void) {
  t_clip_boundary(FP8_E4M3);
  t_clip_boundary(FP8_E5M2);
}

static void test_nconfigs_zero_and_empty(void) {
  tensor t;
  tensor_alloc(&t, FP8_DTYPE_F16, 1000, 0);
  for (int64_t i = 0; i < 1000; i++) tensor_set_bits(&t, i, random_bits(FP8_DTYPE_F16, -14, 15, 0.1));
  tensor_finish(&t);
  T_EQ(fp8k_upload(g_ctx, t.bytes, t.n, t.dtype, g_err, sizeof g_err), 0);
  float amax = -1.0f;
  int64_t hist[FP8_LOG2_HIST_BINS], ref[FP8_LOG2_HIST_BINS] = {0};
  int rc = fp8k_quant_stats(g_ctx, NULL, NULL, 0, NULL, &amax, hist, NULL, g_err, sizeof g_err);
  T_REQUIRE(rc == 0, "nconfigs 0: %s", g_err);
  T_EQ(f2u(amax), f2u(fp8_amax_f32(t.x, 1000)));
  fp8_log2_histogram(t.x, 1000, ref);
  for (int b = 0; b < FP8_LOG2_HIST_BINS; b++) T_EQ(hist[b], ref[b]);
  /* empty tensor: zeros everywhere, amax 0 */
  T_EQ(fp8k_upload(g_ctx, NULL, 0, FP8_DTYPE_F32, g_err, sizeof g_err), 0);
  float s = 1.0f;
  int f = FP8_E4M3;
  fp8k_stats st;
  memset(&st, 0x55, sizeof st);
  rc = fp8k_quant_stats(g_ctx, &s, &f, 1, &st, &amax, hist, NULL, g_err, sizeof g_err);
  T_REQUIRE(rc == 0, "empty: %s", g_err);
  T_ASSERT(st.n == 0 && st.nonfinite == 0 && st.zeros == 0 && st.overflow == 0 &&
            st.underflow == 0 && st.subnormal == 0 && st.sum_sq_err == 0.0 && st.sum_sq == 0.0 &&
            st.clipped == 0 && st.sum_sq_hat == 0.0);
  T_ASSERT(amax == 0.0f);
  for (int b = 0; b < FP8_LOG2_HIST_BINS; b++) T_EQ(hist[b], 0);
  T_EQ(fp8k_amax(g_ctx, &amax, g_err, sizeof g_err), 0);
  T_ASSERT(amax == 0.0f);
  tensor_free(&t);
}

static void test_bad_arguments(void) {
  float s = 1.0f;
  int f = 7;
  fp8k_stats st;
  T_EQ(fp8k_upload(g_ctx, &s, 1, 9, g_err, sizeof g_err), FP8_EINVAL);
  T_REQUIRE(strstr(g_err, "dtype 9") != NULL, "message: %s", g_err);
  T_EQ(fp8k_upload(g_ctx, &s, 1, FP8_DTYPE_F32, g_err, sizeof g_err), 0);
  T_EQ(fp8k_quant_stats(g_ctx, &s, &f, 1, &st, NULL, NULL, NULL, g_err, sizeof g_err),
                   FP8_EINVAL);
  T_REQUIRE(strstr(g_err, "formats[0] = 7") != NULL, "message: %s", g_err);
  float ring[2] = {0, 0}, scale = 1.0f, last = 1.0f, smax = 448.0f;
  int32_t head = 0, len = 3, comp = 0;
  T_EQ(fp8k_delayed_update_host(g_ctx, 1, 2, ring, &head, &scale, &last, &len, &comp,
                                            &smax, NULL, g_err, sizeof g_err),
                   FP8_EINVAL);
  T_REQUIRE(strstr(g_err, "history_len 3") != NULL, "message: %s", g_err);
}

/* ------------------------------------------------------------------ current scaling */

static void test_current_scaling(void) {
  /* tensors whose amax hits every branch of fp8_current_scale */
  const float amaxes[] = {1.0f, 3.3f, 0.0f, NAN, INFINITY, 1e-45f, 1e-40f, 1e-3f, 5e-4f,
                          3e38f, FLT_MAX, 448.0f, 1e-20f, 2.5e-3f};
  fp8k_current_params P[16];
  int np = 0;
  const float eps[] = {0.0f, 1e-3f};
  for (int e = 0; e < 2; e++)
    for (int pow2 = 0; pow2 < 2; pow2++)
      for (int fmt = 0; fmt < 2; fmt++) {
        P[np].amax_epsilon = eps[e];
        P[np].pow2 = pow2;
        P[np].margin = (np % 3) - 1; /* -1, 0, 1 */
        P[np].format = fmt;
        np++;
      }
  for (size_t a = 0; a < sizeof amaxes / sizeof amaxes[0]; a++)
    for (int d = 0; d < 3; d++) {
      enum { N = 30011 };
      tensor t;
      tensor_alloc(&t, (fp8_dtype)d, N, 3);
      for (int64_t i = 0; i < N; i++) {
        /* values below the amax, one element at the amax (NaN/0: every element is that) */
        float v;
        if (isnan(amaxes[a]) || amaxes[a] == 0.0f) v = amaxes[a];
        else v = (float)(amaxes[a] * rnd01() * 0.999) * (rnd() & 1 ? 1.0f : -1.0f);
        if (i == N / 2) v = -amaxes[a];
        uint32_t bits;
        if (!f32_to_dtype_bits(v, (fp8_dtype)d, &bits)) {
          /* round to the dtype by truncation of the float bits (exact for BF16; F16 by its range) */
          if (d == FP8_DTYPE_BF16) bits = f2u(v) >> 16;
          else if (!f32_to_dtype_bits(0.5f, (fp8_dtype)d, &bits)) bits = 0;
        }
        tensor_set_bits(&t, i, bits);
      }
      tensor_finish(&t);
      float cpu_amax = fp8_amax_f32(t.x, N);
      T_EQ(fp8k_upload(g_ctx, t.bytes, t.n, t.dtype, g_err, sizeof g_err), 0);
      fp8k_stats g[16];
      float gscales[16], gamax = -1.0f;
      uint8_t *codes = malloc(N);
      int rc = fp8k_current_quant_stats(g_ctx, P, np, g, gscales, &gamax, codes, g_err,
                                        sizeof g_err);
      T_REQUIRE(rc == 0, "fp8k_current_quant_stats: %s", g_err);
      T_REQUIRE(f2u(gamax) == f2u(cpu_amax), "current: amax cpu %.9g gpu %.9g",
                    (double)cpu_amax, (double)gamax);
      float scales[16];
      int formats[16];
      for (int c = 0; c < np; c++) {
        fp8_current_params p = {P[c].amax_epsilon, P[c].pow2 != 0, P[c].margin,
                                (fp8_format)P[c].format};
        scales[c] = fp8_current_scale(&p, cpu_amax);
        formats[c] = P[c].format;
        T_REQUIRE(f2u(scales[c]) == f2u(gscales[c]),
                      "current scale, %s amax %.9g, eps %g pow2 %d margin %d %s: cpu %.9g "
                      "(0x%08x), gpu %.9g (0x%08x)",
                      fp8_dtype_name((fp8_dtype)d), (double)cpu_amax, (double)p.amax_epsilon,
                      (int)p.pow2, (int)p.margin, fp8_format_name(p.format), (double)scales[c],
                      f2u(scales[c]), (double)gscales[c], f2u(gscales[c]));
      }
      oracle *o = malloc(sizeof *o);
      cpu_oracle(&t, scales, formats, np, o);
      char what[128];
      snprintf(what, sizeof what, "current scaling %s amax %.9g", fp8_dtype_name((fp8_dtype)d),
               (double)cpu_amax);
      compare(what, &t, scales, formats, np, o, g, gamax, NULL, codes);
      free(o->codes);
      free(o);
      free(codes);
      tensor_free(&t);
    }
}

/* ------------------------------------------------------------------ delayed scaling */

static float random_amax(void) {
  double u = rnd01();
  if (u < 0.12) return 0.0f;
  if (u < 0.14) return INFINITY;
  if (u < 0.16) return NAN;
  if (u < 0.18) return 1e-45f * (float)(1 + rnd() % 100); /* subnormal: scale may become inf */
  if (u < 0.20) return FLT_MAX * (float)rnd01();
  if (u < 0.22) return 1e-38f;
  return (float)exp(-30.0 + 60.0 * rnd01());
}

static void test_delayed_update(void) {
  const int32_t Ls[] = {1, 2, 3, 16, 1024};
  enum { PER = 12, STEPS = 2600 }; /* > 2 * 1024: the longest ring wraps twice */
  const int32_t nslots = (int32_t)(sizeof Ls / sizeof Ls[0]) * PER, L = 1024;
  fp8_delayed_state *cpu = calloc((size_t)nslots, sizeof *cpu);
  float *ring = calloc((size_t)nslots * L, sizeof *ring), *scale = malloc(nslots * sizeof(float));
  float *last = malloc(nslots * sizeof(float)), *smax = malloc(nslots * sizeof(float));
  float *used = malloc(nslots * sizeof(float)), *h_cpu = malloc(L * sizeof(float)),
        *h_gpu = malloc(L * sizeof(float));
  int32_t *head = calloc((size_t)nslots, sizeof *head), *len = malloc(nslots * sizeof(int32_t)),
          *comp = malloc(nslots * sizeof(int32_t));
  T_ASSERT(cpu && ring && scale && last && smax && used && h_cpu && h_gpu && head && len && comp);
  for (int32_t s = 0; s < nslots; s++) {
    fp8_delayed_params p;
    p.history_len = Ls[s / PER];
    p.unfused_update = s % 3 == 1; /* TE's unfused rule: zeros rolled in, NaN propagates */
    /* unfused slots reach margin 10 too, where RN32(RN32(448 / 1e-38) / 2^10) = FLT_MAX and the
     * fused 0.4375 / 1e-38 is finite (_default_sf_compute's two roundings) */
    p.margin = p.unfused_update ? 3 * (int32_t)(s % 5) - 2 : (int32_t)(s % 5) - 2;
    p.amax_compute = s % 2 ? FP8_AMAX_MOST_RECENT : FP8_AMAX_MAX;
    p.format = (s / 2) % 2 ? FP8_E5M2 : FP8_E4M3;
    T_EQ(fp8_delayed_init(&cpu[s], &p), FP8_OK);
    scale[s] = 1.0f;
    len[s] = p.history_len;
    comp[s] = FP8K_DELAYED_COMP(p.amax_compute, p.unfused_update, p.margin);
    smax[s] = fp8_scaled_max(p.format, p.margin);
  }
  for (int step = 0; step < STEPS; step++) {
    for (int32_t s = 0; s < nslots; s++) {
      /* some slots get long runs of zeros (modules that did not run) */
      last[s] = (s % 7 == 3 && (step / 50) % 2) ? 0.0f : random_amax();
    }
    int rc = fp8k_delayed_update_host(g_ctx, nslots, L, ring, head, scale, last, len, comp, smax,
                                      used, g_err, sizeof g_err);
    T_REQUIRE(rc == 0, "fp8k_delayed_update_host at step %d: %s", step, g_err);
    for (int32_t s = 0; s < nslots; s++) {
      float a = fp8_delayed_update(&cpu[s], last[s]);
      T_REQUIRE(f2u(cpu[s].scale) == f2u(scale[s]),
                    "delayed step %d slot %d (L %d, %s%s, margin %d, %s): last amax %.9g: scale "
                    "cpu %.9g (0x%08x), gpu %.9g (0x%08x)",
                    step, (int)s, (int)len[s], fp8_amax_compute_name(cpu[s].p.amax_compute),
                    cpu[s].p.unfused_update ? " unfused" : "",
                    (int)cpu[s].p.margin, fp8_format_name(cpu[s].p.format), (double)last[s],
                    (double)cpu[s].scale, f2u(cpu[s].scale), (double)scale[s], f2u(scale[s]));
      T_REQUIRE(f2u(a) == f2u(used[s]) || (isnan(a) && isnan(used[s])),
                    "delayed step %d slot %d: amax used cpu %.9g, gpu %.9g", step, (int)s,
                    (double)a, (double)used[s]);
      T_REQUIRE(cpu[s].head == head[s], "delayed step %d slot %d: head cpu %d, gpu %d", step,
                    (int)s, (int)cpu[s].head, (int)head[s]);
      /* TE's layout of the history, from each side's ring */
      fp8_delayed_state view = cpu[s];
      view.ring = ring + (size_t)s * L;
      view.head = head[s];
      fp8_delayed_history(&cpu[s], h_cpu);
      fp8_delayed_history(&view, h_gpu);
      for (int32_t i = 0; i < len[s]; i++)
        T_REQUIRE(f2u(h_cpu[i]) == f2u(h_gpu[i]) || (isnan(h_cpu[i]) && isnan(h_gpu[i])),
                      "delayed step %d slot %d (L %d): history[%d] cpu %.9g, gpu %.9g", step,
                      (int)s, (int)len[s], (int)i, (double)h_cpu[i], (double)h_gpu[i]);
    }
  }
  for (int32_t s = 0; s < nslots; s++) fp8_delayed_free(&cpu[s]);
  free(cpu); free(ring); free(scale); free(last); free(smax); free(used); free(h_cpu);
  free(h_gpu); free(head); free(len); free(comp);
}

static void test_random_f32(void) { t_random_tensors(FP8_DTYPE_F32); }
static void test_random_bf16(void) { t_random_tensors(FP8_DTYPE_BF16); }
static void test_random_f16(void) { t_random_tensors(FP8_DTYPE_F16); }
static void test_special_f32(void) { t_special_values(FP8_DTYPE_F32); }
static void test_special_bf16(void) { t_special_values(FP8_DTYPE_BF16); }
static void test_special_f16(void) { t_special_values(FP8_DTYPE_F16); }

#define TESTS(X)                                                                            \
  X(test_random_f32) X(test_random_bf16) X(test_random_f16) X(test_special_f32)             \
  X(test_special_bf16) X(test_special_f16) X(test_wide_range) X(test_many_configs)          \
  X(test_nconfigs_zero_and_empty) X(test_bad_arguments) X(test_current_scaling)             \
  X(test_clip_boundary) X(test_delayed_update)

#ifdef FP8LAB_WITH_CHECK
#define CHECK_WRAP(fn)                                                                      \
  START_TEST(ck_##fn) {                                                                     \
    gh_current = #fn;                                                                       \
    gh_test_failed = 0;                                                                     \
    fn();                                                                                   \
    ck_assert_msg(gh_test_failed == 0, "%s: %d failed checks (FAIL lines on stderr)", #fn,  \
                  gh_test_failed);                                                          \
  }                                                                                         \
  END_TEST
TESTS(CHECK_WRAP)
#define CHECK_ADD(fn) tcase_add_test(tc, ck_##fn);
#else
#define HARNESS_RUN(fn) GH_RUN(fn);
#endif

int main(void) {
  char why[256] = "";
  if (fp8k_device_count(why, sizeof why) == 0) gh_skip(why); /* prints "skipped: ...", exit 77 */
  if (fp8k_ctx_create(&g_ctx, 0, g_err, sizeof g_err) != 0) {
    fprintf(stderr, "fp8k_ctx_create: %s\n", g_err);
    return 1;
  }
  int rc;
#ifdef FP8LAB_WITH_CHECK
  setenv("CK_FORK", "no", 1); /* the CUDA context lives in this process */
  Suite *s = suite_create("gpu_quant");
  TCase *tc = tcase_create("gpu_quant");
  tcase_set_timeout(tc, 900);
  TESTS(CHECK_ADD)
  suite_add_tcase(s, tc);
  rc = tu_run_suite(s);
#else
  TESTS(HARNESS_RUN)
  rc = gh_summary();
#endif
  fp8k_ctx_destroy(g_ctx);
  return rc;
}
