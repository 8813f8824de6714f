/* engine_check_data.c: the replay engine_check.c runs (see engine_check.h for what it covers):
 * its tensors, configurations and the deterministic data of every step. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine_check_internal.h"

/* xorshift64*: a fixed, portable stream per (tensor, step) */
static uint64_t next_u64(uint64_t *s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 2685821657736338717ULL;
}

static float f32_of_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static uint16_t bf16_bits(float f) { /* truncation: exact for every value used with it */
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return (uint16_t)(u >> 16);
}

static uint16_t f16_bits_of_int(int v) { /* |v| <= 2048: exact */
  if (v == 0) return 0;
  uint16_t sign = v < 0 ? 0x8000 : 0;
  int a = v < 0 ? -v : v, e = 0;
  while ((a >> e) > 1) e++;
  uint16_t mant = (uint16_t)(((unsigned)a << (10 - e)) & 0x3FF);
  return (uint16_t)(sign | (uint16_t)((e + 15) << 10) | mant);
}

/* ---------------------------------------------------------------- tensors */

/* Values of a "ties" tensor of format f: every finite FP8 value and every midpoint between
 * neighbours (exact in BF16), both signs, the format's max as amax, then the specials. */
static float ties_value(fp8_format f, int64_t i, int with_specials) {
  static const float specials[] = {0.0f, -0.0f, 1e-40f, -3e-42f, FLT_TRUE_MIN, 0x1p-11f,
                                   0x1p-10f, 0x3p-11f, 0x1p-17f, 0x1p-18f, 0x3p-18f};
  const int nspec = (int)(sizeof specials / sizeof *specials);
  const float *tab = fp8_decode_table(f);
  int top = f == FP8_E4M3 ? 0x7E : 0x7B; /* the largest finite code */
  if (i == 0) return fp8_format_max(f);
  if (with_specials && i == 1) return NAN;
  if (with_specials && i < 2 + nspec) return specials[i - 2];
  int64_t k = i % (2 * top), sign = (i / (2 * top)) % 2;
  float v = k < top ? tab[k + 1] : 0.5f * (tab[k - top] + tab[k - top + 1]);
  return sign ? -v : v;
}

/* Integers in [-a, a], a itself first (the tensor's amax): GEMM operands that are exact at
 * power-of-two scales. */
static int gemm_value(uint64_t *rng, int64_t i, int a) {
  if (i == 0) return a;
  return (int)(next_u64(rng) % (uint64_t)(2 * a + 1)) - a;
}

static void fill_f32(const chk_fixture *f, size_t t, int s, uint64_t *rng, float *x) {
  const int64_t n = f->numel[t];
  static const int grow[6] = {0, 1, 2, -1, 0, 3};
  if (t == 0) { /* a.output: E4M3 ties at scale 2^-grow */
    for (int64_t i = 0; i < n; i++) x[i] = ldexpf(ties_value(FP8_E4M3, i, 1), grow[s % 6]);
  } else if (t == CHK_LAYER_G) { /* l0.grad_output */
    for (int64_t i = 0; i < n; i++) x[i] = (float)gemm_value(rng, i, 14);
  } else { /* r0.weight, r1.weight: wide random floats, amax moving per step and per tensor */
    int shift = (int)(t == 6 ? s % 3 : (s * 2) % 5) - 2;
    for (int64_t i = 0; i < n; i++) {
      uint64_t r = next_u64(rng);
      uint32_t e = 96 + (uint32_t)(r % 40) + (uint32_t)(shift + 2);
      uint32_t bits = (uint32_t)((r >> 8) & 0x807FFFFFu) | (e << 23);
      x[i] = f32_of_bits(bits);
    }
  }
}

static void fill_16(const chk_fixture *f, size_t t, int s, uint64_t *rng, uint16_t *h) {
  const int64_t n = f->numel[t];
  static const int grow[6] = {0, 1, 0, -2, 1, 0};
  if (t == 1) { /* b.grad_output (BF16): E5M2 ties, an inf at step 2 */
    for (int64_t i = 0; i < n; i++) h[i] = bf16_bits(ldexpf(ties_value(FP8_E5M2, i, 1), grow[s % 6]));
    if (s == 2 && n > 2) h[2] = 0x7F80;
  } else if (t == 2) { /* c.input (F16): random patterns; x4 at step 2 (saturates delayed) */
    for (int64_t i = 0; i < n; i++) {
      uint64_t r = next_u64(rng);
      unsigned e = (unsigned)(r % 27) + (s == 2 ? 2u : 0u);
      h[i] = (uint16_t)((r >> 16 & 0x83FF) | (e << 10));
      if (r % 997 == 0) h[i] = 0x7E00; /* NaN */
    }
  } else if (t == CHK_LAYER_X) { /* l0.input (BF16): integers, amax 28 */
    for (int64_t i = 0; i < n; i++) h[i] = bf16_bits((float)gemm_value(rng, i, 28));
  } else { /* l0.weight (F16): integers, amax 14 */
    for (int64_t i = 0; i < n; i++) h[i] = f16_bits_of_int(gemm_value(rng, i, 14));
  }
}

int chk_fixture_data(const chk_fixture *f, size_t t, int s, void **out) {
  *out = NULL;
  if (t == 2 && s == 1) return FP8_OK; /* c.input does not run at step 1 */
  size_t n = (size_t)f->numel[t];
  void *buf = malloc(n * fp8_dtype_size(f->dtype[t]) + 1);
  if (!buf) return FP8_ENOMEM;
  uint64_t rng = 0x9E3779B97F4A7C15ULL ^ ((uint64_t)t << 32) ^ (uint64_t)(s + 1);
  if (f->dtype[t] == FP8_DTYPE_F32) fill_f32(f, t, s, &rng, buf);
  else fill_16(f, t, s, &rng, buf);
  *out = buf;
  return FP8_OK;
}

/* ---------------------------------------------------------------- configurations */

static fp8_config delayed(fp8_format_sel sel, int32_t L, int32_t m, fp8_amax_compute a) {
  fp8_config c = {.kind = FP8_KIND_DELAYED, .format = sel, .history_len = L, .margin = m,
                  .amax_compute = a};
  strcpy(c.label, "delayed");
  return c;
}

static fp8_config current(fp8_format_sel sel, float eps, int pow2, int32_t m) {
  fp8_config c = {.kind = FP8_KIND_CURRENT, .format = sel, .amax_epsilon = eps, .pow2 = pow2,
                  .margin = m};
  strcpy(c.label, "current");
  return c;
}

static fp8_config block_kind(fp8_recipe_kind k, int variant) {
  fp8_config c = {.kind = k, .format = FP8_SEL_HYBRID, .pow2 = 1,
                  .mx_rounding = variant ? FP8_MX_ROUND_FLOOR : FP8_MX_ROUND_CEIL,
                  .block_shape = variant ? FP8_BLOCK_SHAPE_1X128 : FP8_BLOCK_SHAPE_AUTO};
  strcpy(c.label, fp8_recipe_kind_name(k));
  return c;
}

/* NVFP4 (issue 29): TE's defaults with Four Over Six (variant 0: 16x16 weights, the Hadamard
 * transform, stochastic rounding of the gradients), or 1x16 blocks, nearest, no transform. */
static fp8_config nvfp4(int variant) {
  fp8_config c = {.kind = FP8_KIND_NVFP4, .format = FP8_SEL_E4M3,
                  .nvfp4_block = variant ? FP8_NVFP4_BLOCK_1X16 : FP8_NVFP4_BLOCK_AUTO,
                  .rht = !variant, .fp4_rounding = variant ? FP8_FP4_ROUND_NEAREST : FP8_FP4_ROUND_AUTO,
                  .fp4_rule = variant ? 0 : 2, .e4m3_max = variant ? 448.0f : 256.0f, .sr_seed = 5};
  strcpy(c.label, variant ? "nvfp4_1x16" : "nvfp4");
  return c;
}

static size_t make_configs(fp8_config *c, int size) {
  size_t n = 0;
  if (size == 0) {
    c[n++] = delayed(FP8_SEL_HYBRID, 1, 0, FP8_AMAX_MAX);
    c[n++] = delayed(FP8_SEL_HYBRID, 16, 1, FP8_AMAX_MAX);
    c[n++] = delayed(FP8_SEL_E5M2, 2, 0, FP8_AMAX_MOST_RECENT);
    c[n++] = delayed(FP8_SEL_E4M3, 16, -1, FP8_AMAX_MAX);
  } else { /* more than one launch of 64 configurations, delayed ones alone too */
    static const int32_t L[5] = {1, 2, 3, 16, 1024}, M[4] = {0, 1, 2, -1};
    for (int f = 0; f < 3; f++)
      for (int l = 0; l < 5; l++)
        for (int m = 0; m < 4; m++)
          for (int a = 0; a < 2; a++)
            if (f == 0 || l % 2 == 0)
              c[n++] = delayed((fp8_format_sel)(f == 0 ? FP8_SEL_HYBRID : f == 1 ? FP8_SEL_E4M3 : FP8_SEL_E5M2),
                               L[l], M[m], (fp8_amax_compute)a);
  }
  c[n++] = current(FP8_SEL_HYBRID, 0.0f, 0, 0);
  c[n++] = current(FP8_SEL_HYBRID, 0.0f, 1, 1);
  c[n++] = current(FP8_SEL_E4M3, 1e-3f, 0, 0);
  if (size) c[n++] = current(FP8_SEL_E5M2, 0.0f, 1, -1);
  c[n++] = block_kind(FP8_KIND_MXFP8, 0);
  c[n++] = block_kind(FP8_KIND_BLOCK, 0);
  c[n++] = block_kind(FP8_KIND_ROWWISE, 0);
  c[n++] = nvfp4(0);
  c[n++] = block_kind(FP8_KIND_MXFP4, 0);
  if (size) {
    c[n++] = block_kind(FP8_KIND_MXFP8, 1);
    c[n++] = block_kind(FP8_KIND_BLOCK, 1);
    c[n++] = nvfp4(1);
    c[n++] = block_kind(FP8_KIND_MXFP4, 1);
  }
  return n;
}

/* ---------------------------------------------------------------- the fixture */

int chk_fixture_init(chk_fixture *f, int size) {
  memset(f, 0, sizeof *f);
  static const char *const names[CHK_TENSORS] = {"a.output", "b.grad_output", "c.input",
                                                 "l0.grad_output", "l0.input", "l0.weight",
                                                 "r0.weight", "r1.weight"};
  static const fp8_dtype dt[CHK_TENSORS] = {FP8_DTYPE_F32,  FP8_DTYPE_BF16, FP8_DTYPE_F16,
                                            FP8_DTYPE_F32,  FP8_DTYPE_BF16, FP8_DTYPE_F16,
                                            FP8_DTYPE_F32,  FP8_DTYPE_F32};
  const int64_t m = size ? 24 : 1; /* the long dimension grows with the size */
  /* a.output: 12289 = 3 * 4096 + 1 elements in the full suite (a last chunk of one element
   * for chunked CPU loops) */
  const int64_t shape[CHK_TENSORS][2] = {{1, size ? 3 * 4096 + 1 : 601}, {24 * m, 30}, {7, 101 * m},
                                         {32 * m, 16},      {32 * m, 16}, {16, 16},
                                         {10, 33 * m},      {10, 33 * m}};
  f->nsteps = size ? 6 : 3;
  f->ntensors = CHK_TENSORS;
  for (size_t t = 0; t < CHK_TENSORS; t++) {
    f->names[t] = names[t];
    f->roles[t] = fp8_role_of_tensor(names[t]);
    f->dtype[t] = dt[t];
    f->ndim[t] = t == 0 ? 1 : 2;
    f->shape[t][0] = t == 0 ? shape[t][1] : shape[t][0];
    f->shape[t][1] = shape[t][1];
    f->numel[t] = shape[t][0] * shape[t][1];
    f->red_slot[t] = t == 7 ? 6 : t; /* r0.weight and r1.weight reduce together */
  }
  f->nred = CHK_TENSORS;
  f->gemm_max_tokens = size ? 200 : 0; /* the conformance suite samples tokens */
  f->configs = calloc(128, sizeof *f->configs);
  if (!f->configs) return FP8_ENOMEM;
  f->nconfigs = make_configs(f->configs, size);
  f->formats = calloc(f->ntensors * f->nconfigs, sizeof *f->formats);
  if (!f->formats) return FP8_ENOMEM;
  for (size_t t = 0; t < f->ntensors; t++)
    for (size_t c = 0; c < f->nconfigs; c++)
      fp8_format_resolve(f->configs[c].format, f->roles[t], &f->formats[t * f->nconfigs + c]);
  return FP8_OK;
}

void chk_fixture_free(chk_fixture *f) {
  free(f->configs);
  free(f->formats);
  memset(f, 0, sizeof *f);
}
