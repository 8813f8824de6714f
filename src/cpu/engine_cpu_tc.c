/* engine_cpu_tc.c: the CPU engine's GEMM errors under a tensor-core model
 * (plan->tensor_core; engine.h fp8_engine_gemm's v 7 and 8; gemm.h fp8_gemm_error_tc). A GEMM
 * both of whose operands are cast by per-tensor configurations (fmt >= 0) is computed with the
 * model from the operands' FP8 values and the product of their scale_inv's; its FP32 GEMM's
 * error (exact accumulation) is kept beside it, and for fprop the model's other accumulation
 * form (promoted: DeepSeek-V3's comparison; gemm.h). engine_cpu_gemm.c calls these. */
#include <math.h>

#include "engine_cpu_internal.h"
#include "gemm.h"

/* A request with a block-kind operand under tensor_core: its GEMMs stay the FP32 GEMM's (the
 * block-scaled forms are outside the models), so v 7 is v 0 and v 8 NaN. */
void cpu_tc_block_request(const fp8_engine_plan *pl, const fp8_gemm_request *q) {
  if (pl->tensor_core == FP8_TC_EXACT) return;
  for (int g = 0; g < FP8_GEMM_COUNT; g++) {
    q->rel[7 * FP8_GEMM_COUNT + g] = q->rel[g];
    q->rel[8 * FP8_GEMM_COUNT + g] = NAN;
  }
}

/* The FP8 values of x cast with scale s to format f (the floats the codes decode to) into v;
 * codes is scratch of n bytes. */
static void cast_values(const float *x, size_t n, float s, fp8_format f, uint8_t *codes, float *v) {
  fp8_quantize_f32(x, n, s, f, codes, NULL, NULL);
  const float *t = fp8_decode_table(f);
  for (size_t i = 0; i < n; i++) v[i] = t[codes[i]];
}

/* RN32(RN32(1/s_a) RN32(1/s_b)): the scale_inv product a GEMM's output is multiplied by. */
float cpu_tc_sab(float sa, float sb) {
  return (1.0f / sa) * (1.0f / sb);
}

/* The two operands' FP8 values in w->tcv[0] (na elements) and w->tcv[1] (nb). */
int cpu_tc_values(cpu_scratch *w, const float *a, size_t na, float sa, int fa, const float *b,
                  size_t nb, float sb, int fb) {
  size_t most = na > nb ? na : nb;
  if (cpu_reserve(&w->tcv[0], &w->tcvcap[0], na + 1) || cpu_reserve(&w->tcv[1], &w->tcvcap[1], nb + 1) ||
      cpu_reserve(&w->tcv[2], &w->tcvcap[2], most / sizeof(float) + 1))
    return FP8_ENOMEM;
  uint8_t *codes = (uint8_t *)w->tcv[2];
  cast_values(a, na, sa, (fp8_format)fa, codes, w->tcv[0]);
  cast_values(b, nb, sb, (fp8_format)fb, codes, w->tcv[1]);
  return FP8_OK;
}

/* The exact mode's errors of a per-tensor triple with the tensor-core model (q: its dequantized
 * operands, whose FP32 errors e[0] already holds; x: the operands as given): e[3] the FP32
 * errors, e[0] the model's, e[4] its other form (NaN where the model does not apply). */
int cpu_tc_exact_errors(const cpu_priv *p, cpu_scratch *w, const fp8_gemm_ref *ref,
                        float *const x[3], const size_t count[3], const float scale[3],
                        const int fmt[3], double e[CPU_TC_NV][FP8_GEMM_COUNT]) {
  const fp8_tc_model m = (fp8_tc_model)p->plan.tensor_core;
  for (int g = 0; g < FP8_GEMM_COUNT; g++) {
    e[3][g] = e[0][g];
    e[4][g] = NAN;
    int ta = fp8_gemm_operand_tensor((fp8_gemm_kind)g, 0);
    int tb = fp8_gemm_operand_tensor((fp8_gemm_kind)g, 1);
    if (m == FP8_TC_EXACT || fmt[ta] < 0 || fmt[tb] < 0 || !ref->have[g]) continue;
    int rc = cpu_tc_values(w, x[ta], count[ta], scale[ta], fmt[ta], x[tb], count[tb], scale[tb],
                       fmt[tb]);
    if (rc) return rc;
    const float sab = cpu_tc_sab(scale[ta], scale[tb]);
    for (int alt = 0; alt < (g == FP8_GEMM_FPROP ? 2 : 1) && rc == FP8_OK; alt++)
      rc = fp8_gemm_error_tc(ref, (fp8_gemm_kind)g, w->tcv[0], w->tcv[1], (fp8_format)fmt[ta],
                             (fp8_format)fmt[tb], sab, m,
                             fp8_gemm_tc_promote((fp8_gemm_kind)g, alt), alt ? &e[4][g] : &e[0][g]);
    if (rc) return rc;
  }
  return FP8_OK;
}
