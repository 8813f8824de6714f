/* engine_cpu_internal.h: what the files of the CPU engine share: engine_cpu.c (lifecycle,
 * recipe state, queue, threads, end_phase), engine_cpu_work.c (a tensor's quantize +
 * statistics on one worker, and the small helpers) and engine_cpu_gemm.c (a layer's GEMM
 * errors on one worker). */
#ifndef FP8LAB_CPU_ENGINE_CPU_INTERNAL_H
#define FP8LAB_CPU_ENGINE_CPU_INTERNAL_H

#include "engine.h"
#include "fp8.h"
#include "gemm.h"
#include "valhist.h"

/* A per-tensor configuration's (scale bits, format), for finding the distinct ones. */
typedef struct pair_key {
  uint32_t bits;
  int fmt;
  size_t c;
} pair_key;

/* One worker's scratch, kept across syncs (grown on demand, freed with the engine). */
typedef struct {
  float *x;         /* a widened tensor */
  size_t xcap;
  float *g[9];      /* a layer: X, W, G widened; row-wise dequantized; column-wise */
  size_t gcap[9];
  fp8_valhist vh;   /* a BF16/F16 tensor's value histogram */
  pair_key *keys;   /* [nconfigs]: the distinct (scale, format) pairs of a tensor */
  size_t *uniq, *map;    /* [nconfigs] */
  fp8_stats *ust;        /* [nconfigs] */
  fp8_gemm_sample smp[3];/* the sampled GEMM error's fprop, dgrad, wgrad samples (reused) */
  double *norm;          /* their sizes: a layer's rows' and columns' squared norms */
  size_t normcap;
  float *yr[3];          /* the FP4 ratio's reference configuration's sampled blocks */
  size_t yrcap[3];
  float *tcv[3];         /* tensor_core: a GEMM's two operands as FP8 values, their codes */
  size_t tcvcap[3];
} cpu_scratch;

/* A queued quantize_stats or gemm. */
typedef struct {
  int is_gemm;
  size_t t;                       /* quantize: the tensor */
  fp8_tensor_result *out;         /* quantize: where the results go */
  fp8_engine_layer layer;         /* gemm */
  fp8_gemm_request *req;          /* gemm: the requests (a copy owned by the queue), each
                                     with its rel (engine.h fp8_engine_gemm) */
  size_t nreq;
  int rc;                         /* FP8_OK or the failure of this op */
  char err[640];
} cpu_task;

typedef struct {
  fp8_engine_plan plan;           /* arrays borrowed from the caller */
  const fp8_tensor_view **view;   /* [ntensors]: loaded at this step (NULL: not loaded) */
  fp8_delayed_state *dl;          /* [ntensors * nconfigs]: active delayed configurations */
  float *red;                     /* [nred]: the reduced amaxes of the last end_phase */
  cpu_task *tasks;
  size_t ntasks, cap;
  size_t next;                    /* the next task a worker takes */
  int threads;
  cpu_scratch *scratch;           /* [threads] */
  int64_t step;                   /* of begin_step: seeds the sampled GEMM error */
} cpu_priv;

/* The scale active per-tensor configuration c of tensor t uses at this step: the delayed state,
 * or current scaling of the tensor's own amax. */
float cpu_config_scale(const cpu_priv *p, size_t t, size_t c, float amax);

/* The work of one task on a worker's scratch (sets task->rc and task->err): a tensor's
 * quantize_stats (engine_cpu_work.c), a layer's GEMM errors (engine_cpu_gemm.c). */
void cpu_quantize_task(cpu_priv *p, cpu_scratch *w, cpu_task *task);
void cpu_gemm_task(cpu_priv *p, cpu_scratch *w, cpu_task *task);
/* A task's failure: "<what>: out of memory" with status rc. */
void cpu_task_fail(cpu_task *task, int rc, const char *what);

/* Grows a float buffer to hold n elements (contents not kept); 0, or -1 when out of memory. */
int cpu_reserve(float **buf, size_t *cap, size_t n);

/* Tensor-core accumulation (engine_cpu_tc.c; plan->tensor_core, engine.h's v 7 and 8).
 * A per-tensor triple's errors: estimate, lo, hi, exact accumulation, the other form. */
#define CPU_TC_NV 5
/* A request with a block-kind operand: its GEMMs stay FP32 (v 7 = v 0, v 8 NaN). */
void cpu_tc_block_request(const fp8_engine_plan *pl, const fp8_gemm_request *q);
/* RN32(RN32(1/s_a) RN32(1/s_b)): the scale_inv product a GEMM's output is multiplied by. */
float cpu_tc_sab(float sa, float sb);
/* The two operands cast (scale, format) as FP8 values into w->tcv[0] (na) and w->tcv[1] (nb). */
int cpu_tc_values(cpu_scratch *w, const float *a, size_t na, float sa, int fa, const float *b,
                  size_t nb, float sb, int fb);
/* The exact mode's errors of a per-tensor triple under the model: e[3] the FP32 errors e[0]
 * held, e[0] the model's, e[4] its other form (NaN where the model does not apply). */
int cpu_tc_exact_errors(const cpu_priv *p, cpu_scratch *w, const fp8_gemm_ref *ref,
                        float *const x[3], const size_t count[3], const float scale[3],
                        const int fmt[3], double e[CPU_TC_NV][FP8_GEMM_COUNT]);

#endif /* FP8LAB_CPU_ENGINE_CPU_INTERNAL_H */
