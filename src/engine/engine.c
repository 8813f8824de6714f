/* engine.c: engine.h's calls, each through the engine's op table (engine_impl.h). */
#include "engine_impl.h"

int fp8_engine_supports(const fp8_engine *e, fp8_engine_op op, size_t c) {
  return e->ops->supports(e, op, c);
}

int fp8_engine_begin_step(fp8_engine *e, int64_t step, char *err, size_t errlen) {
  return e->ops->begin_step(e, step, err, errlen);
}

int fp8_engine_load(fp8_engine *e, size_t t, const fp8_tensor_view *v, char *err, size_t errlen) {
  return e->ops->load(e, t, v, err, errlen);
}

int fp8_engine_quantize_stats(fp8_engine *e, size_t t, fp8_tensor_result *out, char *err,
                              size_t errlen) {
  return e->ops->quantize_stats(e, t, out, err, errlen);
}

int fp8_engine_cast(fp8_engine *e, size_t t, size_t c, uint8_t *codes, char *err, size_t errlen) {
  return e->ops->cast(e, t, c, codes, err, errlen);
}

int fp8_engine_gemm(fp8_engine *e, const fp8_engine_layer *l, const fp8_gemm_request *req,
                    size_t nreq, char *err, size_t errlen) {
  return e->ops->gemm(e, l, req, nreq, err, errlen);
}

int fp8_engine_sync(fp8_engine *e, char *err, size_t errlen) { return e->ops->sync(e, err, errlen); }

int fp8_engine_end_phase(fp8_engine *e, unsigned phases, const float *amax, char *err,
                         size_t errlen) {
  return e->ops->end_phase(e, phases, amax, err, errlen);
}

int fp8_engine_state(fp8_engine *e, size_t t, float *scale, char *err, size_t errlen) {
  return e->ops->state(e, t, scale, err, errlen);
}

const char *fp8_engine_name(const fp8_engine *e) { return e->name; }

void fp8_engine_free(fp8_engine *e) {
  if (e) e->ops->free(e);
}
