/* block.c: block-scaled recipes (MXFP8, DeepSeek-V3 block FP8, per-row), see block.h.
 *
 * Each block's elements are quantized by fp8_quantize_f32() (the vectorized hot loop of
 * quant.c) with the block's own scale. Blocks along the stored rows are contiguous runs and are
 * passed as they are; blocks along the columns are gathered, a panel of at most
 * block_len x PANEL_COLS elements at a time, into a scratch buffer where each column is one
 * contiguous run, and the dequantized values are scattered back.
 */
#include "block.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---------------------------------------------------------------- E8M0 */

const char *fp8_mx_rounding_name(fp8_mx_rounding r) {
  return r == FP8_MX_ROUND_FLOOR ? "floor" : "ceil";
}

int fp8_mx_rounding_parse(const char *s, fp8_mx_rounding *out) {
  if (!s) return FP8_EINVAL;
  if (strcasecmp(s, "ceil") == 0) *out = FP8_MX_ROUND_CEIL;
  else if (strcasecmp(s, "floor") == 0) *out = FP8_MX_ROUND_FLOOR;
  else return FP8_EINVAL;
  return FP8_OK;
}


uint8_t fp8_mx_scale_exponent(float block_amax, fp8_format f, fp8_mx_rounding r) {
  float b = fabsf(block_amax);
  if (isnan(b)) return 0xFF;
  if (r == FP8_MX_ROUND_CEIL) {
    float max_rcp = 1.0f / fp8_format_max(f); /* RN32(1/fp8_max), as TE's max_reciprocal() */
    return fp8_e8m0_ceil(b * max_rcp);        /* inf stays inf -> 0xFE, 0 -> 0 */
  }
  if (isinf(b)) return 0xFE;
  if (b == 0.0f) return 0;
  return fp8_e8m0_floor(b, f == FP8_E5M2 ? 15 : 8);
}



/* ---------------------------------------------------------------- names and parameters */

const char *fp8_block_kind_name(fp8_block_kind k) {
  switch (k) {
  case FP8_BLOCK_KIND_MXFP8: return "mxfp8";
  case FP8_BLOCK_KIND_BLOCK: return "block";
  case FP8_BLOCK_KIND_ROWWISE: return "rowwise";
  case FP8_BLOCK_KIND_NVFP4: return "nvfp4";
  case FP8_BLOCK_KIND_MXFP4: return "mxfp4";
  }
  return "?";
}

int fp8_block_kind_parse(const char *s, fp8_block_kind *out) {
  if (!s) return FP8_EINVAL;
  if (strcasecmp(s, "mxfp8") == 0) *out = FP8_BLOCK_KIND_MXFP8;
  else if (strcasecmp(s, "block") == 0) *out = FP8_BLOCK_KIND_BLOCK;
  else if (strcasecmp(s, "rowwise") == 0) *out = FP8_BLOCK_KIND_ROWWISE;
  else if (strcasecmp(s, "nvfp4") == 0) *out = FP8_BLOCK_KIND_NVFP4;
  else if (strcasecmp(s, "mxfp4") == 0) *out = FP8_BLOCK_KIND_MXFP4;
  else return FP8_EINVAL;
  return FP8_OK;
}

const char *fp8_block_shape_name(fp8_block_shape s) {
  switch (s) {
  case FP8_BLOCK_SHAPE_1X128: return "1x128";
  case FP8_BLOCK_SHAPE_128X128: return "128x128";
  case FP8_BLOCK_SHAPE_AUTO: return "auto";
  }
  return "?";
}

int fp8_block_shape_parse(const char *s, fp8_block_shape *out) {
  if (!s) return FP8_EINVAL;
  if (strcasecmp(s, "1x128") == 0) *out = FP8_BLOCK_SHAPE_1X128;
  else if (strcasecmp(s, "128x128") == 0) *out = FP8_BLOCK_SHAPE_128X128;
  else if (strcasecmp(s, "auto") == 0) *out = FP8_BLOCK_SHAPE_AUTO;
  else return FP8_EINVAL;
  return FP8_OK;
}

bool fp8_block_shape_is_square(fp8_block_shape s, fp8_role r) {
  return s == FP8_BLOCK_SHAPE_128X128 || (s == FP8_BLOCK_SHAPE_AUTO && r == FP8_ROLE_WEIGHT);
}

fp8_block_params fp8_block_params_mxfp8(fp8_format f, fp8_mx_rounding r) {
  fp8_block_params p = {.kind = FP8_BLOCK_KIND_MXFP8, .format = f, .block_len = FP8_MX_BLOCK,
                        .square = false, .rounding = r, .pow2 = true, .margin = 0,
                        .amax_epsilon = 0.0f};
  return p;
}

bool fp8_block_kind_is_fp4(fp8_block_kind k) {
  return k == FP8_BLOCK_KIND_NVFP4 || k == FP8_BLOCK_KIND_MXFP4;
}

fp8_block_params fp8_block_params_nvfp4(bool square, int rule, float e4m3_max) {
  fp8_block_params p = {.kind = FP8_BLOCK_KIND_NVFP4, .format = FP8_E4M3, .block_len = 16,
                        .square = square, .rounding = FP8_MX_ROUND_CEIL, .fp4_rule = rule,
                        .e4m3_max = e4m3_max};
  return p;
}

fp8_block_params fp8_block_params_mxfp4(fp8_mx_rounding r) {
  fp8_block_params p = {.kind = FP8_BLOCK_KIND_MXFP4, .format = FP8_E4M3, .block_len = 32,
                        .rounding = r};
  return p;
}

fp8_block_params fp8_block_params_tile(fp8_format f, bool square, bool pow2, fp8_dtype d) {
  fp8_block_params p = {.kind = FP8_BLOCK_KIND_BLOCK, .format = f, .block_len = FP8_BLOCK_TILE,
                        .square = square, .rounding = FP8_MX_ROUND_CEIL, .pow2 = pow2,
                        .margin = 0, .amax_epsilon = 0.0f, .inf_scale = fp8_dtype_max(d)};
  return p;
}

fp8_block_params fp8_block_params_rowwise(fp8_format f, bool pow2) {
  fp8_block_params p = {.kind = FP8_BLOCK_KIND_ROWWISE, .format = f, .block_len = 0,
                        .square = false, .rounding = FP8_MX_ROUND_CEIL, .pow2 = pow2,
                        .margin = 0, .amax_epsilon = 0.0f};
  return p;
}

int fp8_block_params_check(const fp8_block_params *p) {
  if (!p) return FP8_EINVAL;
  if (p->format != FP8_E4M3 && p->format != FP8_E5M2) return FP8_EINVAL;
  if (p->margin < -FP8_MARGIN_LIMIT || p->margin > FP8_MARGIN_LIMIT) return FP8_EINVAL;
  if (!(p->amax_epsilon >= 0.0f) || isinf(p->amax_epsilon)) return FP8_EINVAL;
  if (!(p->inf_scale >= 0.0f) || isinf(p->inf_scale)) return FP8_EINVAL;
  switch (p->kind) {
  case FP8_BLOCK_KIND_MXFP8:
    if (p->rounding != FP8_MX_ROUND_CEIL && p->rounding != FP8_MX_ROUND_FLOOR) return FP8_EINVAL;
    if (p->margin != 0 || p->amax_epsilon != 0.0f) return FP8_EINVAL;
    return p->block_len >= 1 && !p->square ? FP8_OK : FP8_EINVAL;
  case FP8_BLOCK_KIND_BLOCK:
    return p->block_len >= 1 ? FP8_OK : FP8_EINVAL;
  case FP8_BLOCK_KIND_ROWWISE:
    return p->block_len == 0 && !p->square ? FP8_OK : FP8_EINVAL;
  case FP8_BLOCK_KIND_NVFP4:
    if (p->fp4_rule < 0 || p->fp4_rule > 2) return FP8_EINVAL; /* fp8_nvfp4_scale_rule */
    if (!(p->e4m3_max == 0.0f || p->e4m3_max == 256.0f || p->e4m3_max == 448.0f))
      return FP8_EINVAL;
    return p->block_len == 16 && p->margin == 0 && p->amax_epsilon == 0.0f ? FP8_OK : FP8_EINVAL;
  case FP8_BLOCK_KIND_MXFP4:
    if (p->rounding != FP8_MX_ROUND_CEIL && p->rounding != FP8_MX_ROUND_FLOOR) return FP8_EINVAL;
    return p->block_len == 32 && !p->square && !p->stochastic && !p->rht && p->margin == 0 &&
                   p->amax_epsilon == 0.0f
               ? FP8_OK
               : FP8_EINVAL;
  }
  return FP8_EINVAL;
}

float fp8_block_scale(const fp8_block_params *p, float amax) {
  if (fp8_block_kind_is_fp4(p->kind)) return NAN;
  if (p->kind == FP8_BLOCK_KIND_MXFP8)
    return fp8_e8m0_scale(fp8_mx_scale_exponent(amax, p->format, p->rounding));
  fp8_current_params cp = {.amax_epsilon = p->amax_epsilon, .pow2 = p->pow2,
                           .margin = p->margin, .format = p->format};
  float inf = p->kind == FP8_BLOCK_KIND_BLOCK && p->inf_scale > 0.0f ? p->inf_scale : FLT_MAX;
  return fp8_current_scale_inf(&cp, amax, inf);
}

/* ---------------------------------------------------------------- shapes */

int fp8_block_view_2d(const int64_t *shape, int ndim, int64_t *rows, int64_t *cols) {
  if (ndim < 0 || (ndim > 0 && !shape)) return FP8_EINVAL;
  int64_t r = 1, c = ndim == 0 ? 1 : shape[ndim - 1];
  if (c < 0) return FP8_EINVAL;
  for (int i = 0; i + 1 < ndim; i++) {
    if (shape[i] < 0) return FP8_EINVAL;
    if (shape[i] != 0 && r > INT64_MAX / shape[i]) return FP8_ERANGE;
    r *= shape[i];
  }
  if (c != 0 && r > INT64_MAX / c) return FP8_ERANGE;
  *rows = r;
  *cols = c;
  return FP8_OK;
}

static int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0); }

/* Block length along a dimension of length n: rowwise spans the whole dimension (at least 1,
 * so that an empty dimension has 0 blocks). */
static int64_t eff_len(const fp8_block_params *p, int64_t n) {
  return p->kind == FP8_BLOCK_KIND_ROWWISE ? (n > 0 ? n : 1) : p->block_len;
}

int fp8_block_grid(const fp8_block_params *p, fp8_block_dir dir, int64_t rows, int64_t cols,
                   int64_t *grid_rows, int64_t *grid_cols) {
  int rc = fp8_block_params_check(p);
  if (rc) return rc;
  if (rows < 0 || cols < 0) return FP8_EINVAL;
  int64_t gr, gc;
  if (p->square) {
    gr = ceil_div(rows, p->block_len);
    gc = ceil_div(cols, p->block_len);
  } else if (dir == FP8_BLOCK_DIR_COL) {
    gr = ceil_div(rows, eff_len(p, rows));
    gc = cols;
  } else {
    gr = rows;
    gc = ceil_div(cols, eff_len(p, cols));
  }
  if (grid_rows) *grid_rows = gr;
  if (grid_cols) *grid_cols = gc;
  return FP8_OK;
}

/* ---------------------------------------------------------------- quantize */

/* Running block statistics (Welford's update for the std: one pass, fixed order). */
typedef struct {
  int64_t nblocks, overflowed, scaled;
  double min, max, mean, m2;
  double peak; /* max over the blocks of amax * scale, in double */
} block_acc;

static void acc_add(block_acc *a, float amax, float scale, bool overflowed) {
  a->nblocks++;
  a->overflowed += overflowed;
  double peak = (double)amax * (double)scale;
  if (peak > a->peak) a->peak = peak;
  if (!(amax > 0.0f) || isinf(amax)) return; /* all-zero / all-NaN block, or one holding inf */
  double v = log2((double)scale);
  a->scaled++;
  if (a->scaled == 1 || v < a->min) a->min = v;
  if (a->scaled == 1 || v > a->max) a->max = v;
  double d = v - a->mean;
  a->mean += d / (double)a->scaled;
  a->m2 += d * (v - a->mean);
}

/* Quantizes a matrix [rows, cols] (leading dimension ld) whose blocks are bh x bl tiles of the
 * stored layout (bh = 1: runs along the rows). Block (i, j) writes its scale to
 * scales[i * sld + j]; xhat (leading dimension ldh) is optional. */
static void quantize_tiles(const float *x, int64_t rows, int64_t cols, int64_t ld, int64_t bh,
                           int64_t bl, const fp8_block_params *p, float *xhat, int64_t ldh,
                           float *scales, int64_t sld, fp8_stats *st, block_acc *acc) {
  for (int64_t r0 = 0, bi = 0; r0 < rows; r0 += bh, bi++) {
    int64_t h = rows - r0 < bh ? rows - r0 : bh;
    for (int64_t c0 = 0, bj = 0; c0 < cols; c0 += bl, bj++) {
      size_t w = (size_t)(cols - c0 < bl ? cols - c0 : bl);
      float amax = 0.0f;
      for (int64_t r = r0; r < r0 + h; r++) amax = fmaxf(amax, fp8_amax_f32(x + r * ld + c0, w));
      float s = fp8_block_scale(p, amax);
      int64_t ovf = st->overflow;
      for (int64_t r = r0; r < r0 + h; r++)
        fp8_quantize_f32(x + r * ld + c0, w, s, p->format, NULL, xhat ? xhat + r * ldh + c0 : NULL,
                         st);
      if (scales) scales[bi * sld + bj] = s;
      acc_add(acc, amax, s, st->overflow > ovf);
    }
  }
}

/* Column slabs gathered per panel: at most this many columns, and about 2^20 floats. */
#define PANEL_COLS 64
#define PANEL_FLOATS (1 << 20)

int fp8_block_quantize_f32(const float *x, int64_t rows, int64_t cols, const fp8_block_params *p,
                           fp8_block_dir dir, float *xhat, float *scales, fp8_stats *st,
                           fp8_block_stats *bst) {
  int64_t gr, gc;
  int rc = fp8_block_grid(p, dir, rows, cols, &gr, &gc);
  if (rc) return rc;
  if (!x && rows > 0 && cols > 0) return FP8_EINVAL;
  if (dir != FP8_BLOCK_DIR_ROW && dir != FP8_BLOCK_DIR_COL) return FP8_EINVAL;
  if (fp8_block_kind_is_fp4(p->kind))
    return fp8_block_fp4_quantize(x, rows, cols, p, dir, xhat, scales, st, bst);
  fp8_stats local;
  fp8_stats_init(&local);
  block_acc acc = {0, 0, 0, 0.0, 0.0, 0.0, 0.0, 0.0};

  if (rows > 0 && cols > 0) {
    if (p->square) {
      quantize_tiles(x, rows, cols, cols, p->block_len, p->block_len, p, xhat, cols, scales, gc,
                     &local, &acc);
    } else if (dir == FP8_BLOCK_DIR_ROW) {
      quantize_tiles(x, rows, cols, cols, 1, eff_len(p, cols), p, xhat, cols, scales, gc, &local,
                     &acc);
    } else {
      /* Column-wise: panels of K rows (one block per column), slabs of cb columns; the slab is
       * transposed into t[cb][k] so that each block is a contiguous run. */
      int64_t K = eff_len(p, rows);
      int64_t kmax = K < rows ? K : rows;
      int64_t cb = PANEL_FLOATS / kmax;
      cb = cb < 1 ? 1 : cb > PANEL_COLS ? PANEL_COLS : cb;
      if (cb > cols) cb = cols;
      size_t nt = (size_t)(cb * kmax);
      float *t = malloc(nt * sizeof *t);
      float *th = xhat ? malloc(nt * sizeof *th) : NULL;
      if (!t || (xhat && !th)) {
        free(t);
        free(th);
        return FP8_ENOMEM;
      }
      for (int64_t r0 = 0, bi = 0; r0 < rows; r0 += K, bi++) {
        int64_t k = rows - r0 < K ? rows - r0 : K;
        for (int64_t c0 = 0; c0 < cols; c0 += cb) {
          int64_t w = cols - c0 < cb ? cols - c0 : cb;
          for (int64_t i = 0; i < k; i++) {
            const float *src = x + (r0 + i) * cols + c0;
            for (int64_t j = 0; j < w; j++) t[j * k + i] = src[j];
          }
          /* t is [w, k]: one block per row of t; its scales are scales[bi][c0 .. c0+w-1] */
          quantize_tiles(t, w, k, k, 1, k, p, th, k, scales ? scales + bi * gc + c0 : NULL, 1,
                         &local, &acc);
          if (th)
            for (int64_t i = 0; i < k; i++) {
              float *dst = xhat + (r0 + i) * cols + c0;
              for (int64_t j = 0; j < w; j++) dst[j] = th[j * k + i];
            }
        }
      }
      free(t);
      free(th);
    }
  }

  if (st) fp8_stats_merge(st, &local);
  if (bst) {
    bst->nblocks = acc.nblocks;
    bst->blocks_with_overflow = acc.overflowed;
    bst->nblocks_scaled = acc.scaled;
    bst->log2_scale_min = acc.scaled ? acc.min : NAN;
    bst->log2_scale_max = acc.scaled ? acc.max : NAN;
    bst->log2_scale_std = acc.scaled ? sqrt(acc.m2 / (double)acc.scaled) : NAN;
    bst->overshoot = acc.peak > 0.0 ? log2(acc.peak / (double)fp8_format_max(p->format))
                                    : -INFINITY;
    bst->underflow_expected = bst->sum_sq_err_expected = NAN;
  }
  return FP8_OK;
}
