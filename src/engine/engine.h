/* engine.h: the caller's interface to whatever does a replay's recipe work (as ggml-backend.h;
 * the implementer's side, the op table, is engine_impl.h): the CPU engine (src/cpu/engine_cpu.c,
 * the simulator, threaded), the GPU engine (src/gpu/engine_gpu.c, a module loaded at run time:
 * engine_load.c), two peers, and the composite (engine_composite.c: ggml's scheduler in small),
 * which runs each (op, configuration) on a primary engine where it supports it and on a CPU
 * engine of its own for the rest (fallback per op, not per engine). The runner holds one
 * engine, a composite, and drives a step through the calls below; it never asks which engine
 * runs what.
 *
 * An engine is made for one run (fp8_engine_plan: every tensor x configuration of the replay)
 * and owns the recipe state of every (tensor, configuration) it is active for, for the whole run:
 * delayed scaling's amax history and scale. Nobody else updates it. A step is TransformerEngine's:
 *
 *   begin_step(step)
 *   for each tensor of the step:  load(t, view); quantize_stats(t, &result[t])
 *   sync()                           results[] are valid from here on
 *   for each layer of the step:   gemm(layer, requests)       (scales: the results of the casts)
 *   sync()
 *   end_phase(FP8_FWD, amax)         forward roles: amax reduction, then one fused update
 *   end_phase(FP8_BWD, amax)         backward roles: the same (TE: end of the backward pass)
 *
 * A step of several micro-batches (gradient accumulation: amax.csv's `micro` column) has one
 * end_phase(FWD), end_phase(BWD) pair per micro-batch, each with that micro-batch's amaxes, after
 * the step's casts: TE updates its history at every autocast exit, not once per optimizer step.
 *
 * Calls may run asynchronously, as on a CUDA stream: outputs are written by the time sync()
 * returns, and the tensor data a view points to must stay valid (mapped) until then. end_phase
 * and state() see every earlier call completed. One thread drives an engine; the CPU engine
 * spreads the queued work over its own worker threads inside sync().
 *
 * Exactness (the conformance test, tests/engine/test_engine_conformance.c, holds every engine to it):
 * codes, counts, amax, histogram and scales bit-identical to the simulator (src/sim) on the same
 * inputs; the three double sums of fp8_stats (sum_sq_err, sum_sq, sum_sq_hat) within 1e-6
 * relative (a GPU adds them in another order);
 * GEMM errors within gemm.h's tolerances (src/gpu/README.md).
 */
#ifndef FP8LAB_ENGINE_ENGINE_H
#define FP8LAB_ENGINE_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "block.h"
#include "fp8.h"
#include "gemm.h" /* fp8_gemm_operand_tensor: the ratio rule below */
#include "recipe.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Bumped whenever this header or engine_impl.h (the op table, struct fp8_engine) changes in a
 *  way a separately built module would notice; the module's descriptor carries it
 *  (gpu_module.h: engine_abi), beside the descriptor's own version. */
#define FP8_ENGINE_ABI 6 /* 6: the plan's tensor_core (issue 46); 5: GEMM requests, a
                          * configuration per operand (issue 45) */

/** The ops an engine may decline for a configuration (supports()). */
typedef enum {
  FP8_OP_QUANTIZE_STATS, /**< quantize_stats (and cast) of the configuration, and its state */
  FP8_OP_GEMM,           /**< the layer GEMMs of the configuration (its plain requests;
                              only a CPU engine need take mixed ones: fp8_gemm_request) */
} fp8_engine_op;

/* fp8_phase (FP8_FWD, FP8_BWD), the two halves of a step: fp8.h. */

/** The amax all-reduce across processes (NCCL between GPUs, MPI between hosts): replaces each
 *  of count floats of buf (engine memory: device memory for the GPU engine, host memory for the
 *  CPU engine) by its max over the group, in place, synchronously. NULL in a plan: one process. */
typedef struct {
  int (*allreduce_max)(void *ctx, float *buf, size_t count, char *err, size_t errlen);
  void *ctx;
  const char *name; /**< "nccl (world 1)" */
} fp8_engine_comm;

/** What an engine replays, fixed for the run. Arrays are borrowed and must outlive the engine. */
typedef struct {
  size_t ntensors;
  const char *const *names;    /**< [ntensors], for messages */
  const fp8_role *roles;       /**< [ntensors] (FP8_ROLE_UNKNOWN allowed) */
  size_t nconfigs;
  const fp8_config *configs;   /**< [nconfigs] */
  const fp8_format *formats;   /**< [ntensors * nconfigs]: tensor t's format under config c at
                                    t * nconfigs + c (the config's format resolved by role) */
  const unsigned char *active; /**< [nconfigs]: configurations this engine quantizes and keeps
                                    state for (NULL: all); the others are left alone */
  const size_t *red_slot;      /**< [ntensors]: amax-reduction slot of each tensor, < nred
                                    (NULL: slot t for tensor t); tensors sharing a slot are
                                    updated with the max of their amaxes (reduce_amax) */
  size_t nred;
  const fp8_engine_comm *comm; /**< NULL: no reduction across processes */
  int histograms;              /**< compute each tensor's log2|x| histogram */
  int64_t gemm_max_tokens;     /**< gemm.h's token sampling (0 = all tokens; exact mode) */
  int64_t gemm_sample;         /**< > 0: gemm_error = sampled, this many output rows and
                                    columns per GEMM (gemm.h's sampled GEMM error); 0: exact */
  uint64_t gemm_seed;          /**< the sampled mode's seed (fp8_gemm_sample_seed) */
  int tensor_core;             /**< an fp8_tc_model: FP8_TC_EXACT (0) the FP32 GEMM; else the
                                    per-tensor configurations' GEMMs accumulate as that tensor
                                    core (gemm.h fp8_gemm_error_tc; fp8_engine_gemm's v 7, 8) */
  const int64_t *ratio_ref;    /**< [nconfigs] or NULL: sampled mode, the configuration whose
                                    GEMM errors configuration c's are divided by (the FP4
                                    verdict's paired ratio, gemm.h fp8_gemm_sample_ratio;
                                    -1: none; fp8_engine_gemm says which GEMMs take it).
                                    Only block kinds take a ratio. */
  double ratio_threshold;      /**< a sampled ratio whose interval straddles it (lo <= it <
                                    hi) is computed again on the whole output (exact), for
                                    both configurations ([analysis] fp4_gemm_ratio) */
  int gemm_mixed;              /**< the caller may ask for mixed GEMM requests (operands of
                                    several configurations: fp8_gemm_request); a composite
                                    then keeps a CPU engine for them */
  int threads;                 /**< worker threads for engines that use host threads (>= 1) */
} fp8_engine_plan;

/** What quantize_stats writes for one tensor at one step. The caller owns the arrays. */
typedef struct {
  float amax;                        /**< max |x| (fp8_amax_f32) */
  int64_t hist[FP8_LOG2_HIST_BINS];  /**< log2|x| histogram (plan->histograms only) */
  fp8_stats *stats;                  /**< [nconfigs]; active configurations written */
  float *scale;                      /**< [nconfigs]; the scale each active per-tensor
                                          configuration used (NaN for block kinds) */
  fp8_block_stats *block;            /**< [nconfigs]; active block configurations written */
} fp8_tensor_result;

/** One linear layer at one step: its three tensors (plan indices) and their shapes as GEMM
 *  operands (gemm.h: input [tokens, in], weight [out, in], grad_output [tokens, out]). */
typedef struct {
  const char *name;
  size_t tensor[3];            /**< input, weight, grad_output */
  int64_t tokens, in, out;
  const float *scale[3];       /**< [nconfigs] each: the scales the three casts used at this
                                    step (fp8_tensor_result.scale), as TE's GEMM takes each
                                    operand's scale_inv from its cast */
} fp8_engine_layer;

/** One GEMM-error request of a layer (fp8_engine_gemm): config[i] is the configuration whose
 *  cast of the layer's tensor i (0 input, 1 weight, 2 grad_output: fp8_gemm_operand_tensor's
 *  order) the three GEMMs take as that operand: its kind's quantization in the orientation
 *  each GEMM needs (gemm.h) and, for a per-tensor kind, its scale at this step
 *  (fp8_engine_layer.scale[i][config[i]]). A configuration's own errors are {c, c, c} (a
 *  plain request); a recipe label whose sections split the layer's tensors asks for its
 *  sections' configurations (a mixed request; docs/semantics.md, "GEMMs of a mixed recipe").
 *  rel: where the results go, rel[v * FP8_GEMM_COUNT + g] (fp8_engine_gemm's v). */
typedef struct {
  size_t config[3];
  double *rel;
} fp8_gemm_request;

/** 1 when all three operands of q come from one configuration. */
static inline int fp8_gemm_request_plain(const fp8_gemm_request *q) {
  return q->config[0] == q->config[1] && q->config[1] == q->config[2];
}

/** The configuration GEMM g of request q is divided by for the FP4 ratio (fp8_engine_gemm's
 *  rule): ratio_ref (per configuration, -1: none; NULL: no ratios) of its first operand's
 *  configuration, else of its second's; -1: none. The engines and the runner share it. */
static inline int64_t fp8_gemm_request_ratio_ref(const int64_t *ratio_ref,
                                                 const fp8_gemm_request *q, int g) {
  if (!ratio_ref) return -1;
  int64_t a = ratio_ref[q->config[fp8_gemm_operand_tensor((fp8_gemm_kind)g, 0)]];
  return a >= 0 ? a : ratio_ref[q->config[fp8_gemm_operand_tensor((fp8_gemm_kind)g, 1)]];
}

/** The index of the plain request of configuration c among req[0..n) (-1: none): the one a
 *  ratio's reference comes from in the same call. */
static inline ptrdiff_t fp8_gemm_request_find_plain(const fp8_gemm_request *req, size_t n,
                                                    int64_t c) {
  for (size_t k = 0; c >= 0 && k < n; k++)
    if (fp8_gemm_request_plain(&req[k]) && req[k].config[0] == (size_t)c) return (ptrdiff_t)k;
  return -1;
}

/** An engine: opaque to callers (its op table is engine_impl.h's). */
typedef struct fp8_engine fp8_engine;

/* ---------------------------------------------------------------- the calls
 * Each dispatches to the engine's op (engine_impl.h). Every int-returning call gives FP8_OK or
 * a status with a one-line message in err. */

/** 1 when the engine runs op for configuration c itself, 0 when it declines it (a composite
 *  runs every op of every active configuration, on one of its two engines). */
int fp8_engine_supports(const fp8_engine *e, fp8_engine_op op, size_t c);
int fp8_engine_begin_step(fp8_engine *e, int64_t step, char *err, size_t errlen);
/** Takes tensor t of this step (one read; the view stays valid until sync). */
int fp8_engine_load(fp8_engine *e, size_t t, const fp8_tensor_view *v, char *err, size_t errlen);
/** amax (and histogram) of loaded tensor t, and every active configuration's statistics with
 *  the scale the engine's state gives (delayed) or the tensor's own amax (current), or the
 *  block recipe's per-block scales. */
int fp8_engine_quantize_stats(fp8_engine *e, size_t t, fp8_tensor_result *out, char *err,
                              size_t errlen);
/** The FP8 codes of loaded tensor t under per-tensor configuration c (active), with the
 *  scale quantize_stats uses: codes[numel]. For checks (the self-check, conformance). */
int fp8_engine_cast(fp8_engine *e, size_t t, size_t c, uint8_t *codes, char *err, size_t errlen);
/** rel_error of the layer's fprop, dgrad and wgrad for each of its nreq requests (gemm.h's
 *  definition), into req[q].rel[v * FP8_GEMM_COUNT + g]: v = 0 the error. With
 *  plan->gemm_sample > 0 the errors are sampled estimates and the engine also writes their 95%
 *  interval, v = 1 lo and v = 2 hi: rel holds 3 * FP8_GEMM_COUNT entries. With
 *  plan->ratio_ref too, 7 * FP8_GEMM_COUNT: GEMM g of request q takes a paired ratio when one
 *  of its two operands' configurations c has ratio_ref[c] = R >= 0 (the first operand's when
 *  both do), against the plain request {R, R, R} of the same call: v = 3 the ratio
 *  rel_error_q / rel_error_R, 4 and 5 its interval's ends, 6: 1 when it was computed on the
 *  whole output (exact, both: its interval straddled plan->ratio_threshold), 0 when sampled;
 *  all four NaN when the call has no such request or the GEMM takes no ratio. With
 *  plan->tensor_core != FP8_TC_EXACT, 9 * FP8_GEMM_COUNT (v 3..6 as above, NaN without
 *  ratio_ref): v = 0..2 are the errors with the tensor-core model where both operands are cast
 *  by per-tensor configurations (FP8 values and one scale each; gemm.h
 *  fp8_gemm_tc_promote's accumulation), else the FP32 GEMM's; v = 7 the same GEMM's error with
 *  the FP32 GEMM (exact accumulation), v = 8 fprop's error with the model's other
 *  accumulation form (promoted), NaN for dgrad and wgrad and where the model does not apply.
 *  The request
 *  array is read during the call; the rel arrays are written by sync. The three tensors must
 *  have been loaded at this step (at the step given to begin_step, which seeds the sample). */
int fp8_engine_gemm(fp8_engine *e, const fp8_engine_layer *l, const fp8_gemm_request *req,
                    size_t nreq, char *err, size_t errlen);
/** Waits for every queued op; outputs are valid after it. */
int fp8_engine_sync(fp8_engine *e, char *err, size_t errlen);
/** End of a phase: amax[t] is tensor t's amax of this step (0: it did not run; the state is
 *  kept). Reduces over the reduction slots (and plan->comm), then updates the delayed state of
 *  every active (tensor, configuration) whose role belongs to a phase in `phases`. */
int fp8_engine_end_phase(fp8_engine *e, unsigned phases, const float *amax, char *err,
                         size_t errlen);
/** The scale each active delayed configuration of tensor t will use at the next step
 *  (scale[c]; other entries untouched). */
int fp8_engine_state(fp8_engine *e, size_t t, float *scale, char *err, size_t errlen);
/** "cpu", "gpu: NVIDIA H200"; a composite has its primary's name. */
const char *fp8_engine_name(const fp8_engine *e);
/** Frees the engine (NULL: nothing). */
void fp8_engine_free(fp8_engine *e);

/** Makes an engine for a plan, or FP8_EDEVICE with the reason (no device, driver too old). */
typedef int (*fp8_engine_factory)(const fp8_engine_plan *plan, fp8_engine **out, char *err,
                                  size_t errlen);

/* The CPU engine's factory, fp8_engine_cpu_create, is src/cpu/engine_cpu.h's (a higher layer
 * than this one: it implements this header). */

/* The GPU engine's factory is a member of the GPU module's descriptor (gpu_module.h), which
 * engine_load.c alone opens; the engine selection hands it out. */

/** The composite (engine_composite.c): the engine `primary` makes (NULL: the one `cpu` makes)
 *  for the plan, and the engine `cpu` makes (fp8_engine_cpu_create, src/cpu/engine_cpu.h: it
 *  must run every op of every configuration) for what the primary declines: the
 *  quantize_stats, cast and state of the active configurations whose FP8_OP_QUANTIZE_STATS it
 *  declines (without histograms: amax and histogram are always the primary's), and the GEMM
 *  requests of every active configuration the primary does not both quantize and multiply,
 *  and every mixed request (with the scales the layer carries, the primary's casts'). No CPU
 *  engine when the primary declines nothing and plan->gemm_mixed is 0. Each call goes to the engine that runs it, both engines writing the caller's one
 *  result; the composite's name is the primary's. The CPU engine is the caller's factory, as
 *  ggml's scheduler is given its CPU backend, so that this layer does not link it. */
int fp8_engine_composite_create(fp8_engine_factory primary, fp8_engine_factory cpu,
                                const fp8_engine_plan *plan, fp8_engine **out, char *err,
                                size_t errlen);
/** 1 when composite e runs op for configuration c on its CPU engine instead of its primary
 *  (run.json's cpu_quantize_configurations and cpu_gemm_configurations); 0 for any other
 *  engine. */
int fp8_engine_falls_back(const fp8_engine *e, fp8_engine_op op, size_t c);

/** Helpers for engines and the runner. */
static inline fp8_format fp8_plan_format(const fp8_engine_plan *p, size_t t, size_t c) {
  return p->formats[t * p->nconfigs + c];
}
static inline int fp8_plan_active(const fp8_engine_plan *p, size_t c) {
  return !p->active || p->active[c];
}
static inline size_t fp8_plan_red_slot(const fp8_engine_plan *p, size_t t) {
  return p->red_slot ? p->red_slot[t] : t;
}
static inline size_t fp8_plan_nred(const fp8_engine_plan *p) {
  return p->red_slot ? p->nred : p->ntensors;
}
/** True when tensor t is updated by an end_phase of `phases`. */
static inline int fp8_plan_in_phase(const fp8_engine_plan *p, size_t t, unsigned phases) {
  return (phases & (fp8_role_is_backward(p->roles[t]) ? FP8_BWD : FP8_FWD)) != 0;
}

#ifdef __cplusplus
}
#endif

#endif /* FP8LAB_ENGINE_ENGINE_H */
