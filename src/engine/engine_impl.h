/* engine_impl.h: the implementer's side of engine.h (as ggml-backend-impl.h is to
 * ggml-backend.h): the op table and the engine object. Included only by engines: the CPU engine
 * (src/cpu/engine_cpu*.c), the composite (engine_composite.c), the dispatch of engine.h's calls
 * (engine.c), the GPU module (src/gpu/engine_gpu*.c) and the tests' stand-in engines. Callers
 * (the runner, the self-check) see an opaque fp8_engine and call engine.h's functions.
 *
 * The GPU module is built apart and loaded at run time: the op table and struct fp8_engine are
 * part of what FP8_ENGINE_ABI versions (bump it when their layout changes).
 */
#ifndef FP8LAB_ENGINE_ENGINE_IMPL_H
#define FP8LAB_ENGINE_ENGINE_IMPL_H

#include "engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The op table (ggml's backend interface, in small). Each op is the engine's side of the
 *  engine.h call of the same name (fp8_engine_<op>), with its contract; every int-returning op
 *  gives FP8_OK or a status with a one-line message in err. */
typedef struct {
  /** 1 when the engine runs op for configuration c, 0 when it declines it. */
  int (*supports)(const fp8_engine *e, fp8_engine_op op, size_t c);
  int (*begin_step)(fp8_engine *e, int64_t step, char *err, size_t errlen);
  int (*load)(fp8_engine *e, size_t t, const fp8_tensor_view *v, char *err, size_t errlen);
  int (*quantize_stats)(fp8_engine *e, size_t t, fp8_tensor_result *out, char *err,
                        size_t errlen);
  int (*cast)(fp8_engine *e, size_t t, size_t c, uint8_t *codes, char *err, size_t errlen);
  int (*gemm)(fp8_engine *e, const fp8_engine_layer *l, const fp8_gemm_request *req,
              size_t nreq, char *err, size_t errlen);
  int (*sync)(fp8_engine *e, char *err, size_t errlen);
  int (*end_phase)(fp8_engine *e, unsigned phases, const float *amax, char *err, size_t errlen);
  int (*state)(fp8_engine *e, size_t t, float *scale, char *err, size_t errlen);
  void (*free)(fp8_engine *e);
} fp8_engine_ops;

struct fp8_engine {
  const fp8_engine_ops *ops;
  char name[256]; /**< "cpu", "gpu: NVIDIA H200" (fp8_engine_name) */
  void *priv;
};

#ifdef __cplusplus
}
#endif

#endif /* FP8LAB_ENGINE_ENGINE_IMPL_H */
