/* timeline.h: what delayed scaling's bookkeeping costs in a training step, and whether it
 * overlaps (`fp8lab timeline`, docs/overlap.md). Pure C: the plan of one step's ops per mode,
 * the model that estimates their times from device parameters, and the types the GPU module
 * (src/gpu/timeline_gpu.c) fills when it runs the same plan on a device. No files, no CUDA:
 * the GPU module and its tests link this library (fp8lab_timeline) as it is; what the command
 * reads from files (a trace's shape, a device file) is src/cli/timeline_inputs.h.
 *
 * A step is TransformerEngine's (TE >= 1.6, Hopper): for every Linear in forward order, the
 * fused cast (+ transpose, amax as a by-product) of its input and weight, then the FP8 fprop
 * GEMM; at the exit of the forward autocast, the bookkeeping of the forward tensors (gather of
 * their amaxes, all-reduce MAX, one fused history + scale update); then for every Linear in
 * reverse order the cast of grad_output, the dgrad and wgrad GEMMs; at the end of the backward,
 * the bookkeeping of the backward tensors. The modes differ only in where the bookkeeping goes:
 *
 *   delayed-inline   bookkeeping on the compute stream, where TE >= 1.6 puts it
 *   delayed-overlap  bookkeeping on a side stream, started by an event after the phase's last
 *                    op; the compute stream waits for its update (op `wait`) only before the
 *                    first cast of the next step's same phase, the first op that reads the new
 *                    scales (what TE <= 1.5's asynchronous reduction bought)
 *   delayed-none     no bookkeeping: the floor, from which the others' cost is measured
 *   current          no history: before each cast, an amax pass over the tensor (memset +
 *                    kernel), the 4-byte all-reduce for sequence-parallel activations and
 *                    gradients, a scale kernel, then the cast (TE 2.2+ Float8CurrentScaling)
 *
 * Plans are the one description of the schedule: the model simulates it, the GPU module issues
 * it (cudaStreamWaitEvent for every dependency, CUDA events around every op), and the tests
 * check both against the data dependencies of the step.
 */
#ifndef FP8LAB_TIMELINE_TIMELINE_H
#define FP8LAB_TIMELINE_TIMELINE_H

#include <stddef.h>
#include <stdint.h>

#include "fp8.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  FP8_TL_DELAYED_INLINE,
  FP8_TL_DELAYED_OVERLAP,
  FP8_TL_DELAYED_NONE,
  FP8_TL_CURRENT,
  FP8_TL_NMODES
} fp8_tl_mode;

/** "delayed-inline", ...; NULL outside the enum. */
const char *fp8_tl_mode_name(fp8_tl_mode m);
/** FP8_OK and *m, or FP8_EINVAL for an unknown name. */
int fp8_tl_mode_parse(const char *name, fp8_tl_mode *m);

typedef enum { FP8_TL_COMPUTE, FP8_TL_SIDE, FP8_TL_NSTREAMS } fp8_tl_stream;
const char *fp8_tl_stream_name(fp8_tl_stream s); /* "compute", "side" */

typedef enum {
  FP8_TL_CAST,      /**< fused cast: FP8 codes row-wise and transposed (Hopper's two copies);
                         the atomic amax into the tensor's slot in the delayed modes */
  FP8_TL_AMAX,      /**< current: zero the tensor's amax, then an amax pass (two launches) */
  FP8_TL_SCALE,     /**< current: the scale from that amax (one thread) */
  FP8_TL_FPROP,     /**< Y = X W^T, FP8 x FP8 -> BF16 */
  FP8_TL_DGRAD,     /**< dX = dY W */
  FP8_TL_WGRAD,     /**< dW = dY^T X */
  FP8_TL_GATHER,    /**< delayed: the phase's amaxes into one buffer, sources zeroed (TE's
                         torch.cat) */
  FP8_TL_ALLREDUCE, /**< all-reduce MAX: the phase's amax buffer (delayed) or one tensor's
                         amax (current, sequence parallel) */
  FP8_TL_UPDATE,    /**< delayed: one fused history + scale update of the phase's tensors */
  FP8_TL_WAIT,      /**< delayed-overlap: the compute stream waits for the side stream's
                         update (its time is the stall) */
  FP8_TL_NKINDS
} fp8_tl_kind;
const char *fp8_tl_kind_name(fp8_tl_kind k); /* "cast", "amax", ... as in timeline.csv */

/** The operands of a Linear, in this order everywhere (tensor index 3 * linear + operand). */
typedef enum { FP8_TL_INPUT, FP8_TL_WEIGHT, FP8_TL_GRAD_OUTPUT, FP8_TL_NOPERANDS } fp8_tl_operand;
const char *fp8_tl_operand_name(fp8_tl_operand o); /* "input", "weight", "grad_output" */

/** One Linear: X [tokens, in], W [out, in], dY [tokens, out] (gemm.h's layouts). */
typedef struct {
  char *name;                       /**< "layers.0.qkv" (owned by the shape) */
  int64_t tokens, in, out;
  fp8_dtype dtype[FP8_TL_NOPERANDS]; /**< each operand's dtype before the cast */
} fp8_tl_linear;

/** A model's Linears and the distributed setting the bookkeeping runs in. */
typedef struct {
  size_t nlinears;
  fp8_tl_linear *linears;  /**< forward order (from flags); from a trace, natural name order
                                (the trace does not record the order modules ran in) */
  int64_t layers;          /**< transformer layers (for per-layer figures; >= 1) */
  int64_t world;           /**< ranks of the amax reduction group (>= 1); the GPU run is one */
  int sequence_parallel;   /**< current: all-reduce the amax of inputs and gradients */
  int32_t history_len;     /**< delayed scaling's amax history length L (TE's default 1024) */
  char source[512];        /**< where the shape came from, for the outputs */
} fp8_tl_shape;

static inline size_t fp8_tl_tensor(size_t linear, fp8_tl_operand o) {
  return 3 * linear + (size_t)o;
}
/** The format of an operand under TE's HYBRID recipe: E4M3 forward, E5M2 for grad_output. */
static inline fp8_format fp8_tl_format(fp8_tl_operand o) {
  return o == FP8_TL_GRAD_OUTPUT ? FP8_E5M2 : FP8_E4M3;
}
/** The GPU run's data: each operand filled with values uniform in [-a, a) (fp8k_tl_fill), a
 *  = 4 for inputs, 0.05 for weights, 1e-4 for gradients; every mode starts from the scale
 *  they settle to, RN32(scaled_max / a), so that delayed-none casts the codes the other modes
 *  cast (the GEMMs' power, and so the clocks, depend on the operands' bits). */
static inline float fp8_tl_fill_amplitude(fp8_tl_operand o) {
  return o == FP8_TL_INPUT ? 4.0f : o == FP8_TL_WEIGHT ? 0.05f : 1e-4f;
}
/** Frees the names and the array (the struct itself is the caller's). */
void fp8_tl_shape_free(fp8_tl_shape *s);
/** TE's transformer layer from flags: `layers` x {qkv (H -> 3H), proj (H -> H), fc1 (H -> F),
 *  fc2 (F -> H)}, every operand BF16, names layers.<i>.<qkv|proj|fc1|fc2>. FP8_EINVAL for
 *  sizes < 1 or too large (a tensor beyond 2^40 elements). */
int fp8_tl_shape_flags(int64_t layers, int64_t hidden, int64_t ffn, int64_t tokens,
                       fp8_tl_shape *s, char *err, size_t errlen);
/** The Linears of one step's tensors (timeline_shape.c): every `<L>.weight`, 2-D view
 *  [out, in], with `<L>.input` [tokens, in] or else `<L>.grad_output` [tokens, out] giving the
 *  tokens; in natural name order (numbers by value: layers.2 before layers.10). layers: the
 *  distinct prefixes up to the first all-digit name component, Linears without one (lm_head)
 *  left out (1 when no name has one); world
 *  1, history_len 1024; s->nlinears may be 0. Used by `fp8lab timeline TRACE` and by the run
 *  (run.json's model_shape). */
int fp8_tl_shape_views(const fp8_tensor_view *v, size_t n, fp8_tl_shape *s, char *err,
                       size_t errlen);
/** The length of a Linear's layer prefix: its name up to the end of the first all-digit
 *  component ("layers.3" of "layers.3.mlp.fc1"); 0 for a Linear outside the numbered layers
 *  (lm_head), which `layers` does not count. */
size_t fp8_tl_layer_prefix(const char *name);
/** The transformer layers of a shape: the distinct layer prefixes of its Linears' names
 *  (fp8_tl_layer_prefix), 1 when none has one. */
int64_t fp8_tl_count_layers(const fp8_tl_shape *s);
/** The Linears outside the numbered layers (an LM head); 0 when no Linear is in one (then the
 *  whole model counts as one layer). */
size_t fp8_tl_outside_layers(const fp8_tl_shape *s);

#define FP8_TL_MAX_DEPS 2

/** A dependency on another stream's op: op index `op` of this step, or of the previous step
 *  (prev = 1; none at the first step). */
typedef struct {
  int32_t op;
  int32_t prev;
} fp8_tl_dep;

/** One op of a step. bytes, flops and launches are what it does (the model's inputs). */
typedef struct {
  fp8_tl_kind kind;
  fp8_tl_stream stream;
  int32_t phase;    /**< FP8_FWD (1) or FP8_BWD (2) of engine.h: which pass it belongs to */
  int32_t linear;   /**< its Linear, or -1 (gather, all-reduce and update of a phase, wait) */
  int32_t operand;  /**< cast, amax, scale, current's all-reduce: fp8_tl_operand; else -1 */
  int32_t ndeps;
  fp8_tl_dep dep[FP8_TL_MAX_DEPS]; /**< waited for (events) before the op starts */
  double bytes;     /**< device memory read + written */
  double flops;     /**< GEMMs: 2 M N K */
  int32_t launches; /**< kernels and memsets it launches */
  int64_t count;    /**< gather, update: tensors; all-reduce: floats */
} fp8_tl_op;

/** One step of one mode. The tensors of phase p (0 forward: inputs and weights; 1 backward:
 *  grad_outputs) in the order of their amaxes in the gather buffer. */
typedef struct {
  fp8_tl_mode mode;
  size_t nops;
  fp8_tl_op *ops;
  size_t nphase[2];
  int32_t *phase_tensors[2];
} fp8_tl_plan;

/** Builds the plan of shape s under mode m (FP8_ENOMEM, FP8_EINVAL for an empty shape). */
int fp8_tl_plan_build(const fp8_tl_shape *s, fp8_tl_mode m, fp8_tl_plan *out, char *err,
                      size_t errlen);
void fp8_tl_plan_free(fp8_tl_plan *p);
/** 1 for the ops the mode adds over delayed-none: gather, all-reduce, update and wait in the
 *  delayed modes; amax, scale and all-reduce in current. */
int fp8_tl_is_bookkeeping(fp8_tl_mode m, fp8_tl_kind k);

/* ------------------------------------------------------------------ the model */

/** What the model knows of a device (docs/overlap.md gives the sources of the defaults). */
typedef struct {
  char name[64];
  double hbm_gbps;         /**< memory bandwidth a streaming kernel reaches, bytes read +
                                written per second / 1e9 */
  double fp8_tflops;       /**< dense FP8 GEMM rate cuBLASLt reaches on large GEMMs */
  double kernel_us;        /**< the shortest kernel on a stream, launch gap included */
  double allreduce_us;     /**< a few-byte all-reduce between 2 ranks (a plan has none at
                                world 1: TE skips the call) */
  double allreduce_hop_us; /**< added per doubling of the world (log2 W steps) */
  double allreduce_gbps;   /**< bus bandwidth of the size term, GB/s */
} fp8_tl_device;

/** Built-in devices: "h100" (H100 SXM) and "h200" (H200 SXM). FP8_EINVAL for another name. */
int fp8_tl_device_builtin(const char *name, fp8_tl_device *d);

/** Where an op ran (measured) or would run (model), microseconds from its step's begin. */
typedef struct {
  double start_us, end_us;
} fp8_tl_span;

/** One mode's step: the model's, or one measured step's. */
typedef struct {
  double step_us;         /**< compute stream: step begin to the end of its last op */
  double exposed_us;      /**< bookkeeping on the critical path: the durations of the
                               bookkeeping ops on the compute stream plus the waits */
  double update_us[2];    /**< the update op per phase (0 when none) */
  double allreduce_us;    /**< the all-reduces of the step, summed */
  double gemm_us, cast_us;/**< GEMMs and casts, summed */
  double bytes;           /**< device memory traffic of the step */
  double flops;
  int64_t launches;       /**< kernel launches (memsets included) */
  int64_t allreduces;     /**< all-reduce calls */
  double allreduce_bytes; /**< their payload, summed */
} fp8_tl_totals;

/** The model's duration of one op (microseconds): memory-bound ops max(launches * kernel_us,
 *  bytes / bandwidth); GEMMs max(kernel_us, flops / rate, bytes / bandwidth); all-reduces at
 *  world 1 kernel_us (plans hold none there), else allreduce_us + hop_us * ceil(log2 W) + 2 (W-1)/W * bytes /
 *  allreduce bandwidth; waits 0. */
double fp8_tl_model_op_us(const fp8_tl_op *op, int64_t world, const fp8_tl_device *d);
/** The update kernel alone for n tensors at history L (fp8lab's ring kernel: reads the n * L
 *  history floats, writes n scales): max(kernel_us, (4 n L + 16 n) / bandwidth). */
double fp8_tl_model_update_us(const fp8_tl_device *d, int64_t n, int32_t L);

/** Simulates two steps of plan p on device d (streams in order, dependencies as events) and
 *  gives the second one: span[p->nops] (caller's array, may be NULL) and the totals. */
int fp8_tl_model_run(const fp8_tl_plan *p, const fp8_tl_shape *s, const fp8_tl_device *d,
                     fp8_tl_span *span, fp8_tl_totals *out, char *err, size_t errlen);

/** The totals of one step from its spans (measured or modelled). */
void fp8_tl_totals_of(const fp8_tl_plan *p, const fp8_tl_span *span, fp8_tl_totals *out);

/* ------------------------------------------------------------------ the GPU run */

/** One op as it ran: plan (index in fp8_tl_gpu_args.plans), iter (that plan's steps in the
 *  order they ran: a step's `prev` dependencies are on iter - 1), step (the measured step's
 *  number, or -1 for warm-up and lead-in steps), op index in that plan, times from the step's
 *  begin event. ev: the op's two CUDA events (opaque; the emulator's scheduling test matches
 *  them against the CUDA call log). */
typedef struct {
  int32_t plan, iter, step, op;
  double start_us, end_us;
  const void *ev[2];
} fp8_tl_record;

/** What the GPU module is asked to run (tagged: src/engine/gpu_module.h names it). */
typedef struct fp8_tl_gpu_args {
  const fp8_tl_shape *shape;
  const fp8_tl_plan *plans;  /**< the modes to run, interleaved step by step */
  size_t nplans;
  int32_t warmup, steps;     /**< per mode: warm-up steps, then `steps` rounds in which every
                                  mode runs a lead-in step and a measured step (modes
                                  interleaved, each mode's two steps back to back, so that a
                                  side stream's work overlaps the next step as in training) */
  int32_t bench_tensors;     /**< the update kernel alone: this many tensors ... */
  int32_t bench_history;     /**< ... at this history length (0 tensors: skipped) */
  int32_t bench_reps;
  const char *nccl_library;  /**< libnccl.so path (NULL: FP8LAB_NCCL_LIB, then the usual) */
  int skip_join;             /**< tests only: issue no dependency waits (a broken schedule) */
} fp8_tl_gpu_args;

/** What it measured; the module allocates the arrays, fp8_tl_measurement_free frees them
 *  (tagged: src/engine/gpu_module.h names it). */
typedef struct fp8_tl_measurement {
  char device[256];          /**< "NVIDIA H200 (sm_90), driver 13.0, runtime 13.0" */
  char nccl[256];            /**< "NCCL 2.28.9, world 1", or why there is no all-reduce */
  int allreduce;             /**< 1: the all-reduces ran (else the ops are empty) */
  size_t nrec;
  fp8_tl_record *rec;        /**< every op of every step of every plan, in issue order */
  double *update_bench_us;   /**< [bench_reps] the update kernel alone */
  size_t nbench;
  double copy_gbps;          /**< device-to-device copy, bytes read + written (the ceiling) */
  size_t ntensors;           /**< 3 per Linear */
  float *scale_state;        /**< [nplans * ntensors] each plan's scales after its last step */
  float *amax_state;         /**< [nplans * ntensors] the amaxes they came from: delayed, the
                                  last gathered (and all-reduced) ones; current and
                                  delayed-none, the tensors' amax slots */
} fp8_tl_measurement;

void fp8_tl_measurement_free(fp8_tl_measurement *m);

/** The spans of measured step `step` (0-based) of plan k: span[p->nops] from m's records;
 *  FP8_EINVAL when that step is not complete in m. */
int fp8_tl_measured_spans(const fp8_tl_measurement *m, size_t k, int32_t step,
                          const fp8_tl_plan *p, fp8_tl_span *span);

/** The GPU module's measuring run (src/gpu/timeline_gpu_run.c): runs a's plans on CUDA device
 *  0. Reached through the module's descriptor (src/engine/gpu_module.h, timeline_run: the
 *  command line loads it with fp8_tl_gpu_load); the GPU tests, which compile the module's
 *  sources, call it directly. */
int fp8_timeline_gpu_run(const fp8_tl_gpu_args *a, fp8_tl_measurement *out, char *err,
                         size_t errlen);
typedef int (*fp8_tl_gpu_fn)(const fp8_tl_gpu_args *a, fp8_tl_measurement *out, char *err,
                             size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* FP8LAB_TIMELINE_TIMELINE_H */
