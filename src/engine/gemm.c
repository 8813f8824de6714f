/* gemm.c: GEMM-level error of a recipe configuration (see gemm.h).
 *
 * The reference GEMMs run once per layer and step in double (cblas_dgemm on the widened
 * original operands) and are kept; each configuration runs its three FP32 GEMMs (cblas_sgemm)
 * on its dequantized operands and compares in double. CBLAS is declared by GSL's header and
 * provided by OpenBLAS (linked ahead of gslcblas).
 */
#include "gemm.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cblas.h>

#include "fp8.h"

/* Weak: another CBLAS (gslcblas) links without them. */
extern void openblas_set_num_threads(int n) __attribute__((weak));
extern int blas_thread_shutdown_(void) __attribute__((weak));

void fp8_gemm_blas_single_thread(void) {
  if (openblas_set_num_threads) openblas_set_num_threads(1);
  if (blas_thread_shutdown_) blas_thread_shutdown_();
}

const char *fp8_gemm_name(fp8_gemm_kind g) {
  switch (g) {
  case FP8_GEMM_FPROP: return "fprop";
  case FP8_GEMM_DGRAD: return "dgrad";
  case FP8_GEMM_WGRAD: return "wgrad";
  }
  return "?";
}

const char *fp8_gemm_operand_role(fp8_gemm_kind g, int operand) {
  static const char *const names[3] = {"input", "weight", "grad_output"};
  return names[fp8_gemm_operand_tensor(g, operand)];
}

bool fp8_gemm_operand_colwise(fp8_gemm_kind g, int operand) {
  return g == FP8_GEMM_WGRAD || (g == FP8_GEMM_DGRAD && operand == 1);
}

/* Does operand k of GEMM g have the token dimension (then it is sampled)? */
static bool has_tokens(fp8_gemm_kind g, int operand) {
  return g == FP8_GEMM_WGRAD || operand == 0;
}

/* Output shape [m, n] and reduction length k of GEMM g. */
static void gemm_dims(const fp8_gemm_ref *r, fp8_gemm_kind g, int64_t *m, int64_t *n,
                      int64_t *k) {
  switch (g) {
  case FP8_GEMM_FPROP: *m = r->ntok; *n = r->out; *k = r->in; break;
  case FP8_GEMM_DGRAD: *m = r->ntok; *n = r->in; *k = r->out; break;
  default: *m = r->out; *n = r->in; *k = r->ntok; break; /* FP8_GEMM_WGRAD */
  }
}

/* Column count of operand k of GEMM g as stored (its row length). */
static int64_t operand_cols(const fp8_gemm_ref *r, fp8_gemm_kind g, int operand) {
  if (g == FP8_GEMM_FPROP) return r->in;
  if (g == FP8_GEMM_DGRAD) return operand == 0 ? r->out : r->in;
  return operand == 0 ? r->out : r->in;
}

/* The sampled token rows of a [tokens, cols] float matrix, widened (to double) or not. */
static double *rows_to_double(const fp8_gemm_ref *r, const float *x, int64_t nrows,
                              int64_t cols, bool sampled) {
  double *d = malloc((size_t)(nrows * cols > 0 ? nrows * cols : 1) * sizeof *d);
  if (!d) return NULL;
  for (int64_t i = 0; i < nrows; i++) {
    const float *src = x + (sampled && r->tok ? r->tok[i] : i) * cols;
    for (int64_t j = 0; j < cols; j++) d[i * cols + j] = (double)src[j];
  }
  return d;
}

void fp8_gemm_ref_free(fp8_gemm_ref *ref) {
  if (!ref) return;
  free(ref->tok);
  free(ref->scratch);
  for (int g = 0; g < FP8_GEMM_COUNT; g++) free(ref->y[g]);
  memset(ref, 0, sizeof *ref);
  for (int g = 0; g < FP8_GEMM_COUNT; g++) ref->norm[g] = NAN;
}

/* C[m, n] = op(A) · op(B) for the three GEMM shapes (row-major), double or float. The BLAS is
 * not called with an empty dimension (lda >= 1 rules); k = 0 gives zeros. */
static void dgemm_kind(fp8_gemm_kind g, int m, int n, int k, const double *a, const double *b,
                       double *c) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    memset(c, 0, (size_t)m * (size_t)n * sizeof *c);
    return;
  }
  if (g == FP8_GEMM_FPROP) /* X[m,k] · W[n,k]^T */
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0, a, k, b, k, 0.0, c, n);
  else if (g == FP8_GEMM_DGRAD) /* dY[m,k] · W[k,n] */
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0, a, k, b, n, 0.0, c, n);
  else /* dY[k,m]^T · X[k,n] */
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, m, n, k, 1.0, a, m, b, n, 0.0, c, n);
}

static void sgemm_kind(fp8_gemm_kind g, int m, int n, int k, const float *a, const float *b,
                       float *c) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    memset(c, 0, (size_t)m * (size_t)n * sizeof *c);
    return;
  }
  if (g == FP8_GEMM_FPROP)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, a, k, b, k, 0.0f, c, n);
  else if (g == FP8_GEMM_DGRAD)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
  else
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, m, n, k, 1.0f, a, m, b, n, 0.0f, c, n);
}

int fp8_gemm_ref_init(fp8_gemm_ref *ref, const float *input, const float *weight,
                      const float *grad_output, int64_t tokens, int64_t in, int64_t out,
                      int64_t max_tokens) {
  if (!ref) return FP8_EINVAL;
  memset(ref, 0, sizeof *ref);
  for (int g = 0; g < FP8_GEMM_COUNT; g++) ref->norm[g] = NAN;
  if (tokens < 0 || in < 0 || out < 0 || max_tokens < 0) return FP8_EINVAL;
  if (tokens > INT_MAX || in > INT_MAX || out > INT_MAX) return FP8_ERANGE;
  /* every matrix (operand or output) must be addressable */
  if ((in && tokens > INT64_MAX / in) || (out && tokens > INT64_MAX / out) ||
      (in && out > INT64_MAX / in))
    return FP8_ERANGE;
  ref->tokens = tokens;
  ref->in = in;
  ref->out = out;
  ref->ntok = fp8_gemm_ntok(tokens, max_tokens);
  int rc = FP8_ENOMEM;
  double *xd = NULL, *wd = NULL, *dyd = NULL;
  if (ref->ntok < tokens) {
    ref->tok = malloc((size_t)ref->ntok * sizeof *ref->tok);
    if (!ref->tok) goto done;
    for (int64_t i = 0; i < ref->ntok; i++) ref->tok[i] = fp8_gemm_token(i, tokens, ref->ntok);
  }
  ref->have[FP8_GEMM_FPROP] = input && weight;
  ref->have[FP8_GEMM_DGRAD] = grad_output && weight;
  ref->have[FP8_GEMM_WGRAD] = grad_output && input;
  if (input && !(xd = rows_to_double(ref, input, ref->ntok, in, true))) goto done;
  if (weight && !(wd = rows_to_double(ref, weight, out, in, false))) goto done;
  if (grad_output && !(dyd = rows_to_double(ref, grad_output, ref->ntok, out, true))) goto done;
  for (int g = 0; g < FP8_GEMM_COUNT; g++) {
    if (!ref->have[g]) continue;
    int64_t m, n, k;
    gemm_dims(ref, (fp8_gemm_kind)g, &m, &n, &k);
    const double *a = g == FP8_GEMM_FPROP ? xd : dyd;
    const double *b = g == FP8_GEMM_WGRAD ? xd : wd;
    ref->y[g] = malloc((size_t)(m * n > 0 ? m * n : 1) * sizeof(double));
    if (!ref->y[g]) goto done;
    dgemm_kind((fp8_gemm_kind)g, (int)m, (int)n, (int)k, a, b, ref->y[g]);
    double s = 0.0;
    for (int64_t i = 0; i < m * n; i++) s += ref->y[g][i] * ref->y[g][i];
    ref->norm[g] = sqrt(s);
  }
  /* fp8_gemm_error's scratch: the largest output plus both sampled operands of any GEMM */
  size_t most = 0;
  for (int g = 0; g < FP8_GEMM_COUNT; g++) {
    if (!ref->have[g]) continue;
    int64_t m, n, k;
    gemm_dims(ref, (fp8_gemm_kind)g, &m, &n, &k);
    size_t need = (size_t)(m * n);
    if (ref->tok)
      for (int o = 0; o < 2; o++)
        if (has_tokens((fp8_gemm_kind)g, o)) need += (size_t)(ref->ntok * operand_cols(ref, (fp8_gemm_kind)g, o));
    most = need > most ? need : most;
  }
  if (!(ref->scratch = malloc((most + 1) * sizeof *ref->scratch))) goto done;
  rc = FP8_OK;
done:
  free(xd);
  free(wd);
  free(dyd);
  if (rc) fp8_gemm_ref_free(ref);
  return rc;
}

/* rel_error of an output y [m * n] against the reference (fp8_gemm_error, fp8_gemm_error_tc):
 * ||y - y_ref||_F / ||y_ref||_F; 0 / 0 is 0, x / 0 inf (NaN stays NaN). */
static double rel_of(const fp8_gemm_ref *ref, fp8_gemm_kind g, const float *y, int64_t mn) {
  double e = 0.0;
  const double *yr = ref->y[g];
  for (int64_t i = 0; i < mn; i++) {
    double d = (double)y[i] - yr[i];
    e += d * d;
  }
  double num = sqrt(e);
  if (ref->norm[g] == 0.0) return num == 0.0 ? 0.0 : (isnan(num) ? NAN : INFINITY);
  return num / ref->norm[g];
}

int fp8_gemm_error(const fp8_gemm_ref *ref, fp8_gemm_kind g, const float *a, const float *b,
                   double *rel_error) {
  if (!ref || !rel_error || (int)g < 0 || g >= FP8_GEMM_COUNT) return FP8_EINVAL;
  *rel_error = NAN;
  if (!ref->have[g]) return FP8_OK;
  if (!a || !b) return FP8_EINVAL;
  int64_t m, n, k;
  gemm_dims(ref, g, &m, &n, &k);
  float *y = ref->scratch, *next = ref->scratch + m * n; /* the output, then sampled operands */
  const float *use[2] = {a, b};
  for (int o = 0; o < 2; o++) {
    if (!ref->tok || !has_tokens(g, o)) continue;
    int64_t cols = operand_cols(ref, g, o);
    float *op = next;
    next += ref->ntok * cols;
    for (int64_t i = 0; i < ref->ntok; i++)
      memcpy(op + i * cols, use[o] + ref->tok[i] * cols, (size_t)cols * sizeof(float));
    use[o] = op;
  }
  sgemm_kind(g, (int)m, (int)n, (int)k, use[0], use[1], y);
  *rel_error = rel_of(ref, g, y, m * n);
  return FP8_OK;
}

/* The reduction-major copy [n, k] of operand o of GEMM g (its sampled tokens): fprop's two and
 * dgrad's grad_output are their stored rows; dgrad's weight and both wgrad operands are
 * transposed. */
static float *reduction_major(const fp8_gemm_ref *ref, fp8_gemm_kind g, int o, const float *x,
                              int64_t *rows) {
  const int64_t cols = operand_cols(ref, g, o);
  const int64_t nrow = has_tokens(g, o) ? ref->ntok : ref->out; /* stored rows used */
  const bool tr = g == FP8_GEMM_WGRAD || (g == FP8_GEMM_DGRAD && o == 1);
  float *d = malloc((size_t)(nrow * cols > 0 ? nrow * cols : 1) * sizeof *d);
  if (!d) return NULL;
  for (int64_t i = 0; i < nrow; i++) {
    const float *src = x + (has_tokens(g, o) && ref->tok ? ref->tok[i] : i) * cols;
    if (tr)
      for (int64_t j = 0; j < cols; j++) d[j * nrow + i] = src[j];
    else
      memcpy(d + i * cols, src, (size_t)cols * sizeof *d);
  }
  *rows = tr ? cols : nrow;
  return d;
}

int fp8_gemm_error_tc(const fp8_gemm_ref *ref, fp8_gemm_kind g, const float *va, const float *vb,
                      fp8_format fa, fp8_format fb, float sab, fp8_tc_model m, int64_t promote,
                      double *rel_error) {
  if (!ref || !rel_error || (int)g < 0 || g >= FP8_GEMM_COUNT) return FP8_EINVAL;
  *rel_error = NAN;
  if (!ref->have[g]) return FP8_OK;
  if (!va || !vb) return FP8_EINVAL;
  int64_t mo, no, k, ra = 0, rb = 0;
  gemm_dims(ref, g, &mo, &no, &k);
  float *a = reduction_major(ref, g, 0, va, &ra), *b = reduction_major(ref, g, 1, vb, &rb);
  int rc = FP8_ENOMEM;
  if (a && b) {
    fp8_tc_block(m, fa, fb, mo, no, k, a, b, promote, sab, ref->scratch);
    *rel_error = rel_of(ref, g, ref->scratch, mo * no);
    rc = FP8_OK;
  }
  free(a);
  free(b);
  return rc;
}

int fp8_gemm_errors(const fp8_gemm_ref *ref, const fp8_gemm_operands *ops,
                    double rel_error[FP8_GEMM_COUNT]) {
  if (!ref || !ops || !rel_error) return FP8_EINVAL;
  const float *a[FP8_GEMM_COUNT] = {ops->fprop_input, ops->dgrad_grad_output,
                                    ops->wgrad_grad_output};
  const float *b[FP8_GEMM_COUNT] = {ops->fprop_weight, ops->dgrad_weight, ops->wgrad_input};
  int first = FP8_OK;
  for (int g = 0; g < FP8_GEMM_COUNT; g++) {
    int rc = fp8_gemm_error(ref, (fp8_gemm_kind)g, a[g], b[g], &rel_error[g]);
    if (rc && !first) first = rc;
  }
  return first;
}

int fp8_gemm_errors_per_tensor(const fp8_gemm_ref *ref, const float *const x[3],
                               const float scale[3], const fp8_format format[3], float *const q[3],
                               const bool want[FP8_GEMM_COUNT],
                               double rel_error[FP8_GEMM_COUNT]) {
  if (!ref || !x || !scale || !format || !q || !rel_error) return FP8_EINVAL;
  const size_t count[3] = {(size_t)(ref->tokens * ref->in), (size_t)(ref->out * ref->in),
                           (size_t)(ref->tokens * ref->out)};
  bool quantized[3] = {false, false, false};
  int first = FP8_OK;
  for (int g = 0; g < FP8_GEMM_COUNT; g++) {
    if (want && !want[g]) continue;
    int t[2] = {fp8_gemm_operand_tensor((fp8_gemm_kind)g, 0),
                fp8_gemm_operand_tensor((fp8_gemm_kind)g, 1)};
    for (int k = 0; k < 2; k++)
      if (!quantized[t[k]] && x[t[k]]) {
        fp8_quantize_f32(x[t[k]], count[t[k]], scale[t[k]], format[t[k]], NULL, q[t[k]], NULL);
        quantized[t[k]] = true;
      }
    int rc = fp8_gemm_error(ref, (fp8_gemm_kind)g, x[t[0]] ? q[t[0]] : NULL,
                            x[t[1]] ? q[t[1]] : NULL, &rel_error[g]);
    if (rc && !first) first = rc;
  }
  return first;
}
