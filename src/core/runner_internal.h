/* runner_internal.h: what the runner's files share: runner.c (the run and its step loop),
 * run_plan.c (the tensors, configurations and steps of a replay, and the engine plans),
 * run_gemm.c (the layers of a step and their GEMMs, dispatched per configuration to the engine
 * that supports them) and run_json.c (run.json, summary.csv, the progress bar).
 * The runner holds no recipe math and no recipe state: it feeds the engines (engine.h) and hands
 * their results to the row writers (results.h). */
#ifndef FP8LAB_CORE_RUNNER_INTERNAL_H
#define FP8LAB_CORE_RUNNER_INTERNAL_H

#include <stdio.h>
#include <sys/types.h>

#include "engine.h"
#include "outfile.h"
#include "outputs.h"
#include "results.h"
#include "runner.h"

/* One tensor of the replay (all ranks: `rank_<r>/<name>` in a multi-rank trace). */
typedef struct {
  char *name;
  const char *local;          /* the name within its rank (multi-rank traces), else name */
  size_t rank;                /* its rank (0 for a single-rank trace) */
  fp8_summary_acc *acc;       /* [nconfigs]: totals for summary.csv */
  fp8_tensor_result res;      /* this step's results (stats, scale, block: [nconfigs]) */
  fp8_tensor_result res_cpu;  /* the CPU fallback's: the same arrays, its own amax */
  const fp8_tensor_view *view;/* this step's snapshot data (NULL: none in this part) */
  int csv_has;                /* amax.csv has a row for this step */
  int snap;                   /* this step's snapshot has the tensor */
  float csv_amax;
} run_tensor;

typedef struct {
  const fp8_experiment *ex;
  const fp8_run_options *opt;
  int multirank;
  size_t ntensors, nconfigs;
  run_tensor *t;              /* strcmp order of names */
  /* the engine plan's arrays */
  const char **names;         /* [ntensors] */
  fp8_role *roles;            /* [ntensors] */
  fp8_format *formats;        /* [ntensors * nconfigs] */
  unsigned char *covers;      /* [ntensors * nconfigs]: the configuration applies to the tensor
                                 (its section's tensors; the first section of a shared label):
                                 rows exist only there */
  size_t *red_slot;           /* [ntensors] with reduce_amax, else NULL */
  size_t nred;
  unsigned char *cpu_active;  /* [nconfigs]: quantized by the CPU fallback */
  unsigned char *want_gemm[2];/* [nconfigs]: GEMMs run by the primary [0] / the fallback [1] */
  fp8_engine_plan plan, cpu_plan;
  fp8_engine *engine;         /* the primary engine */
  fp8_engine *cpu;            /* the CPU fallback (NULL: the primary runs everything) */
  float *amax;                /* [ntensors]: this step's amaxes, for end_phase */
  unsigned char *warm_done;   /* [ntensors]: a finite non-zero amax has entered its history */
  float *fed;                 /* [nred]: scratch, the slots' maxima of a step (reduce_amax) */
  float *scales;              /* [nconfigs]: scratch, the delayed scales of one tensor */
  size_t ndelayed;            /* delayed configurations: stream.csv has rows when > 0 */
  size_t step_index;          /* index of the current step in the replay's steps */
  size_t *work;               /* the tensors of the current part */
  size_t nwork;
  /* outputs */
  FILE *steps_fp, *hist_fp, *gemm_fp, *stream_fp;
  long long rows, gemm_rows, mismatches, stream_rows;
  double *rel;                /* [layers * 3 * nconfigs] of one part */
  size_t rel_cap;
} run_t;

/* run_plan.c */
ssize_t run_find_tensor(const run_t *r, const char *name);
int run_tensor_selected(const fp8_experiment *ex, const fp8_trace *tr, const char *name);
int run_collect_names(const fp8_experiment *ex, const fp8_trace *tr, char ***names_out,
                      size_t *n_out, char *err, size_t errlen);
int run_tensors_init(run_t *r, char **names, size_t n, char *err, size_t errlen);
int run_reduction_init(run_t *r, size_t group_size, char *err, size_t errlen);
int run_engines_init(run_t *r, char *err, size_t errlen);
void run_free(run_t *r);
/* 1 when the current step is a warm-up step of tensor i (docs/semantics.md "Warm-up") */
int run_is_warmup(const run_t *r, size_t i);
int run_union_steps(const fp8_experiment *ex, const fp8_trace *tr, int64_t **out, size_t *nout);
void run_rank_order(size_t *order, size_t n);

/* run_gemm.c: gemm.csv rows of one part of a snapshot step */
int run_gemm_part(run_t *r, const fp8_step *s, int64_t step, char *err, size_t errlen);

/* run_json.c */
void run_write_summary(FILE *fp, const run_t *r);
/* run.json, its "outputs" the files the run wrote (the report adds its own later) */
int run_write_json(const char *dir, const run_t *r, const fp8_trace *tr, const char *trace_dir,
                   const fp8_run_summary *sum, const char *started, int threads,
                   const fp8_outputs *outputs, char *err, size_t errlen);
double run_now_s(void);
void run_progress(size_t done, size_t total, double t0, double *last, int final);

#endif /* FP8LAB_CORE_RUNNER_INTERNAL_H */
