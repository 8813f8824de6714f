/* runner_internal.h: what the runner's files share: runner.c (the run and its step loop),
 * run_plan.c (the tensors, configurations and steps of a replay, and the engine plans),
 * run_part.c and run_gemm.c (a step's part: its rows, its layers' GEMMs), run_step.c (a step's
 * amaxes and micro-batch updates), run_warm.c (warm_history's steps), run_unserved.c (what
 * a run without snapshot rows cannot serve of its experiment), run_stream.c (the
 * stream's layout and records), run_experts.c (experts.csv's rows), run_writer.c (the row writer thread), run_resume.c (the checkpoint), run_claim.c (the output folder) and
 * run_progress.c (the progress bar). The runner holds no recipe math and no recipe state: it
 * feeds its one engine (engine.h: a composite, which sends what its primary declines to the
 * CPU engine) and hands the results to src/results' writers (results.h, run_json.h). */
#ifndef FP8LAB_RUN_RUNNER_INTERNAL_H
#define FP8LAB_RUN_RUNNER_INTERNAL_H

#include <stdio.h>
#include <sys/types.h>

#include "engine.h"
#include "experiment.h"
#include "fp8.h"
#include "outfile.h"
#include "outputs.h"
#include "recipe.h"
#include "results.h"
#include "run_folder.h" /* fp8_run_folder */
#include "run_json.h"   /* fp8_run_inputs */
#include "runner.h"
#include "tables.h" /* fp8_expert_row */
#include "trace.h"

/* One tensor of the replay (all ranks: `rank_<r>/<name>` in a multi-rank trace). */
typedef struct {
  char *name;
  const char *local;          /* the name within its rank (multi-rank traces), else name */
  size_t rank;                /* its rank (0 for a single-rank trace) */
  fp8_summary_acc *acc;       /* [nconfigs]: totals for summary.csv */
  fp8_tensor_result res;      /* this step's results (stats, scale, block: [nconfigs]) */
  const fp8_tensor_view *view;/* this step's snapshot data (NULL: none in this part) */
  int csv_has;                /* amax.csv has a row for this step */
  int snap;                   /* this step's snapshot has the tensor */
  float csv_amax;             /* amax.csv's amax at this step (several micro-batches: the max) */
  float te_scale;             /* TE's scale at the current micro-batch (0: not given) */
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
  fp8_engine_plan plan;
  fp8_engine *engine;         /* the composite: the primary, and the CPU engine for the rest */
  float *amax;                /* [ntensors]: this step's (micro-batch's) amaxes, for end_phase */
  int multi_micro;            /* the current step has several micro-batches: the snapshot's
                                 amax does not replace theirs */
  size_t *nmicro;             /* [nsteps]: micro-batches (end_phase pairs) of each replay step */
  /* [trace] warm_history (run_warm.c): the trace's steps that the steps selection leaves out
   * before its last selected step; with warm_history they feed the histories, without rows */
  int64_t *warm;              /* [nwarm] ascending (none: warm_history = false, or no steps key) */
  size_t nwarm;
  size_t *warm_at;            /* [nsteps + 1]: warm[warm_at[si] .. warm_at[si + 1]) precede step si */
  size_t *warm_micro;         /* [nsteps]: their end_phase pairs (in the checkpoint's amax log) */
  size_t warm_arow, warm_snap;/* cursors into amax.csv's rows and the snapshot steps */
  int64_t steps_before, steps_skipped; /* steps left out before the first selected step, and
                                 between the first and the last (stride): run.json's */
  unsigned char *warm_done;   /* [ntensors]: a finite non-zero amax has entered its history */
  float *fed;                 /* [nred]: scratch, the slots' maxima of a step (reduce_amax) */
  float *scales;              /* [nconfigs]: scratch, the delayed scales of one tensor */
  size_t step_index;          /* index of the current step in the replay's steps */
  unsigned char *left;        /* [ntensors]: why the tensor has no steps.csv row (fp8_left_reason) */
  fp8_unserved *unserved;     /* what a run without snapshot rows could not serve (run_unserved.c) */
  size_t nunserved;
  int unserved_done;          /* run_unserved has run */
  size_t *work;               /* the tensors of the current part */
  size_t nwork;
  /* outputs */
  FILE *steps_fp, *hist_fp, *gemm_fp, *stream_fp;
  long long rows, gemm_rows, mismatches, stream_rows;
  double *rel;                /* [layers * 3 * nconfigs] of one part ([layers * 7 * nconfigs]
                                 with the FP4 ratio, sampled: engine.h) */
  ptrdiff_t fp4_ref;          /* the FP4 verdict's FP8 reference (fp8_experiment_fp4_reference);
                                 -1: no ratio columns in gemm.csv */
  int64_t *ratio_ref;         /* [nconfigs]: fp4_ref for the FP4 kinds, else -1 (the plan's) */
  size_t rel_cap;
  /* crash consistency and resume (run_folder.h, run_resume.c) */
  const char *out;            /* the output directory */
  int has_stream;             /* the stream is written (the experiment has delayed configs) */
  /* the stream (results.h): stream.csv, or the compact stream (stream.npy + stream.json,
   * chosen by [output] stream); its layout (stream_plan: T tensors, C configurations) */
  int stream_npy;
  size_t *stream_tensor, *stream_config; /* [T], [C]: their plan indices */
  const char **stream_names;  /* [T] */
  fp8_role *stream_roles;     /* [T] */
  const fp8_config **stream_cfgs; /* [C] */
  unsigned char *stream_applies; /* [T * C] */
  fp8_format *stream_formats; /* [T * C] */
  fp8_stream_layout stream_lay; /* the arrays above, nrec the replay's (step, micro) pairs */
  size_t stream_per_rec;      /* rows of a record */
  fp8_stream_record stream_rec; /* the loop's record (the writer thread's jobs hold their own) */
  fp8_stream_writer *stream_w; /* the stream's writer (NULL: none, or not this process's) */
  struct run_writer *sw;      /* the row writer thread (run_writer.c), NULL: none */
  fp8_outfile *part;          /* [4]: steps, histograms, gemm, stream rows: partial files in
                                 the checkpoint folder until the commit renames them */
  FILE *amax_fp;              /* the checkpoint's amax log: ntensors floats per step done */
  size_t steps_done;          /* steps of the replay completed (rows written, state updated) */
  size_t nsteps;
  fp8_outputs earlier;        /* the earlier run's files (--force): taken when the run starts */
  char started[64];           /* run.json's started_utc: the first process's start */
  double t0, wall_base;       /* this process's start; wall seconds of the processes before */
  double ckpt_every, ckpt_last, ckpt_cost; /* seconds: interval, last one, its cost */
  uint64_t fp_exp, fp_trace;  /* fingerprints of the experiment and of the trace's files */
  char fp_engine[64];         /* the engine, without its thread count */
  /* MPI (run_split.c): np processes, this one `me`; split (np > 1): a multi-rank trace's
   * ranks, or a single-rank trace's layers, are spread over them (balanced by bytes), process
   * 0 writing every file */
  int np, me, split;
  int *owner;                 /* [ntensors] under the split: the process that replays each */
  int *rank_owner;            /* [ranks] of a multi-rank trace under the split: each rank's */
  uint64_t *proc_bytes;       /* [np] on process 0: the snapshot bytes each process replays */
  float *exch;                /* [2 * ntensors]: a step's amaxes and snapshot flags, exchanged */
  const fp8_amax_exchange *xchg; /* the GPU amax exchange in use (NULL: MPI_Allreduce) */
  void *comm;                 /* its communicator */
  char exchange[192];         /* how the amaxes are exchanged, for run.json */
  struct run_segs *segs;      /* a part several processes share: where each tensor's and
                                 layer's rows end in the part's memory files (run_split.c) */
  long long peer_counts[3];   /* process 0: rows, gemm_rows, mismatches of the other processes
                                 at the last checkpoint (a checkpoint records the sums) */
  /* experts.csv (run_experts.c): process 0's, when the trace has a tokens.csv */
  int has_experts;
  size_t nexperts;
  fp8_expert_row *experts;    /* [nexperts]: gemm from experts_tokens, group owned */
  fp8_tokens_table experts_tokens; /* the ranks' tokens.csv merged, the kept GEMMs */
  struct run_hash *hash;      /* the inputs' SHA-256 on threads beside the replay (run_hash.c;
                                 process 0's), NULL: not started */
} run_t;

/* run_step.c: the step's amax.csv rows [b, e) before its snapshot (which tensors have one, their
 * amax; with one micro-batch the amaxes the update takes). */
void run_take_csv_rows(run_t *r, const fp8_trace *tr, size_t b, size_t e,
                       const int32_t *amax_map);
/* The step's micro-batches (rows [b, e), sorted by micro): for each, its stream record with the
 * scales in force (record: 0 for a warm step, which writes nothing), then TE's two reductions
 * and updates with its amaxes (every rank's is known by now), and its amaxes into the
 * checkpoint's log. */
int run_micro_batches(run_t *r, const fp8_trace *tr, int64_t step, size_t b, size_t e,
                      const int32_t *amax_map, int record, char *err, size_t errlen);

/* run_warm.c: [trace] warm_history (docs/semantics.md "Trace replay"). plan: the steps of the
 * trace (snapshot and amax.csv steps) that the selection leaves out before its last selected
 * step, r->steps_before and r->steps_skipped (counted whatever warm_history), and with
 * warm_history those steps as r->warm, r->warm_at and r->warm_micro; FP8_OK or FP8_ENOMEM.
 * feed: before replay step si, its warm steps: each step's amaxes taken as the replay takes
 * them (a snapshot's, of the selected tensors only, without a cast, where the step has one
 * micro-batch; amax.csv's otherwise), reduced, and fed to end_phase per micro-batch, with no
 * row, stream record or statistic. Collective under MPI (each process the amaxes of its own
 * tensors, exchanged as a step's are). */
int run_warm_plan(run_t *r, const fp8_trace *tr, const int64_t *steps, size_t nsteps);
int run_warm_feed(run_t *r, const fp8_trace *tr, size_t si, const int32_t *amax_map, char *err,
                  size_t errlen);

/* run_unserved.c: r->unserved, the experiment's sections and [analysis] keys that the run
 * could not serve because it has no snapshot rows (r->rows == 0: a trace of amaxes alone);
 * none when it has rows. FP8_OK or FP8_ENOMEM. */
int run_unserved(run_t *r);

/* run_part.c: one rank's snapshot of the step: cast, its rows written to the files in use */
int run_part(run_t *r, const fp8_trace *tr, size_t snap, size_t rank, int64_t step, char *err,
             size_t errlen);

/* run_split.c: the MPI replay's parts of a step and its end (run_mpi.h) */
/* The split's assignment of the tensors to processes (r->owner): a multi-rank trace's ranks,
 * or a single-rank trace's layers (a layer's input, weight and grad_output together), their
 * snapshot bytes balanced. After the tensors are known (run_tensors_init). */
int run_split_assign(run_t *r, const fp8_trace *tr, char *err, size_t errlen);
/* One part (rank) of a step under the split: the processes that own some of its tensors
 * replay them; process 0 writes the part's rows in one process's order (its own directly when
 * it alone owns the part; else every owner's merged by tensor and by layer). *prc: the first
 * failure so far on this process (the protocol goes on after one, so that no process waits
 * for ever). */
void run_split_part(run_t *r, const fp8_trace *tr, size_t snap, size_t rank, int64_t step,
                    int *prc, char *err, size_t errlen);
/* After a step's parts: every process's failure agreed on, then the amaxes and snapshot flags
 * of every tensor (each from its owner) on every process. */
int run_split_sync(run_t *r, int have_snap, int prc, char *err, size_t errlen);
/* The amax exchange: NCCL between the processes' GPUs when the GPU engine runs (its
 * communicator bootstrapped over MPI: process 0's unique id broadcast), else MPI_Allreduce;
 * NCCL failing anywhere (no library, no device) leaves every process on MPI, the reason in
 * r->exchange. Collective. */
void run_split_comm(run_t *r);
void run_split_comm_close(run_t *r);
/* At a checkpoint: the other processes' row counts and summary totals to process 0. */
int run_split_collect(run_t *r, char *err, size_t errlen);
/* The end: the row counts summed, and the summary totals of every tensor on process 0. */
int run_split_gather(run_t *r, char *err, size_t errlen);
/* A resume: process 0's checkpoint totals of each process's tensors to that process. */
int run_split_scatter(run_t *r, char *err, size_t errlen);

/* run_plan.c */
ssize_t run_find_tensor(const run_t *r, const char *name);
int run_tensor_selected(const fp8_experiment *ex, const fp8_trace *tr, const char *name);
int run_collect_names(const fp8_experiment *ex, const fp8_trace *tr, char ***names_out,
                      size_t *n_out, char *err, size_t errlen);
int run_tensors_init(run_t *r, char **names, size_t n, char *err, size_t errlen);
int run_reduction_init(run_t *r, size_t nranks, char *err, size_t errlen);
int run_engines_init(run_t *r, char *err, size_t errlen);
void run_free(run_t *r);
/* 1 when the current step is a warm-up step of tensor i (docs/semantics.md "Warm-up") */
int run_is_warmup(const run_t *r, size_t i);
/* after a step's updates: which tensors' histories now hold a finite non-zero amax */
void run_note_warm(run_t *r);
int run_union_steps(const fp8_experiment *ex, const fp8_trace *tr, int64_t **out, size_t *nout);
/* The micro-batches of every replay step (r->nmicro): the distinct micro values of its
 * amax.csv rows (all of them, selected tensors or not), at least 1. */
int run_count_micro(run_t *r, const fp8_trace *tr, const int64_t *steps, size_t nsteps);
/* The amax.csv rows of a step: [*b, *e) of tr->amax, from *b on (rows sorted by step). */
void run_step_rows(const fp8_trace *tr, int64_t step, size_t *b, size_t *e);
void run_rank_order(size_t *order, size_t n);

#define RUN_LEFT_NAMED 3    /* names per reason in the summary line */
/* r->left from the trace's amax.csv and the summary totals, after the last step. */
int run_left_out(run_t *r, const fp8_trace *tr, char *err, size_t errlen);
/* The summary line's note on them ("8 never ran: a, b, c and 5 more; left out of statistics"),
 * "" when none. */
void run_left_out_text(const run_t *r, char *buf, size_t len);

/* run_hash.c: the SHA-256 of every input (run.json's inputs[]), beside the replay. start: the
 * inputs listed (fp8_run_inputs_list) and hashed on threads of their own (the cores the replay
 * leaves free, at least one; nothing started when out of memory). finish: joins them, and
 * hashes what they did not (or, not started, everything) on this thread; *out the hashed list,
 * valid until free; FP8_OK or the first failing input's status and message. free: stops the
 * threads at their next read, joins and frees (safe without a start, and twice). */
void run_hash_start(run_t *r, const fp8_trace *tr, const char *trace_dir);
int run_hash_finish(run_t *r, const fp8_run_inputs **out, const fp8_trace *tr,
                    const char *trace_dir, char *err, size_t errlen);
void run_hash_free(run_t *r);

/* run_writer.c: the one path of steps.csv's rows and of the stream's records to their
 * writers (fp8_steps_csv_put_row, fp8_stream_writer_put): on the row writer thread, from jobs
 * the step loop queues in order, or at once on the loop's thread where there is no thread (MPI,
 * where process 0 assembles steps.csv from the processes' parts; the thread could not start;
 * stream.npy, whose record is one fwrite). start: after the files are open. owns: fp is one of
 * the thread's files (the loop leaves it alone). stream_begin: the record to gather a
 * (step, micro-batch) into (a job's, or the loop's own; NULL: out of memory), _end hands it
 * to the writer (queued, or written now), _drop after a failed gather. steps_begin: a batch of
 * at most maxrows steps.csv rows (NULL: each row is written as it comes), _row hands one over
 * (copied into the batch, its statistics too, or written now), _end queues the batch. drain:
 * waits until every job is written (before anything else touches the files). error: a failed
 * write, without waiting. stop: drains and ends the thread. */
typedef struct run_writer run_writer;
typedef struct run_writer_rows run_writer_rows;
void run_writer_start(run_t *r);
int run_writer_owns(const run_t *r, const FILE *fp);
fp8_stream_record *run_writer_stream_begin(run_t *r);
int run_writer_stream_end(run_t *r, fp8_stream_record *rec, char *err, size_t errlen);
void run_writer_stream_drop(run_t *r, fp8_stream_record *rec);
run_writer_rows *run_writer_steps_begin(run_t *r, size_t maxrows);
void run_writer_steps_row(run_t *r, run_writer_rows *b, const fp8_steps_row *row);
void run_writer_steps_end(run_t *r, run_writer_rows *b);
int run_writer_drain(run_t *r, char *err, size_t errlen);
int run_writer_error(run_t *r, char *err, size_t errlen);
void run_writer_stop(run_t *r);

/* run_stream.c: the stream. plan: its layout, format and record buffer (when the outputs are
 * opened). record: the step's micro-batch's record, gathered and handed to the writer (before
 * its end_phase pair: the scales it used). index: stream.json (stream.npy's names). */
int run_stream_plan(run_t *r, char *err, size_t errlen);
int run_stream_record(run_t *r, int64_t step, int64_t micro, char *err, size_t errlen);
int run_stream_index(const run_t *r, char *err, size_t errlen);

/* run_experts.c: experts.csv. plan: its rows from the trace's tokens.csv tables, the replay's
 * tensors (r->t: the GEMMs kept) and steps (nothing when the trace has no tokens.csv). write:
 * the file, at the commit (nothing without the rows). free: the rows. */
int run_experts_plan(run_t *r, const fp8_trace *tr, const int64_t *steps, size_t nsteps,
                     char *err, size_t errlen);
int run_experts_write(const run_t *r, char *err, size_t errlen);
void run_experts_free(run_t *r);

/* run_gemm.c: gemm.csv rows of one part of a snapshot step */
int run_gemm_part(run_t *r, const fp8_step *s, int64_t step, char *err, size_t errlen);

/* run_progress.c: the clock of the run, and the progress bar the step loop draws on a
 * terminal (stderr, at most every 0.1 s; final: the last one, with its newline). */
double run_now_s(void);
void run_progress(size_t done, size_t total, double t0, double *last, int final);

/* run_claim.c: the output directory. What a run that fails before writing its first result has
 * to undo, so that an error leaves the output directory as it found it: the directories it
 * created, its marker and checkpoint, and for a synth: trace the generated trace with the one
 * it replaced (--force), moved aside until the run commits. */
typedef struct {
  char *created;          /* the outermost directory this run created (NULL: none) */
  int trace_new;          /* a generated trace was swapped into <out>/synth_trace */
  char trace_old[4096 + 32]; /* where the trace it replaced waits ("": there was none) */
  fp8_run_folder folder;  /* out and its lock (lock_fd -1: none), handed on as it is once the
                             run holds the folder (runner.c, hold_folder) */
  int locked;             /* the lock was taken (or the file system has none) */
  int claimed;            /* this run wrote the in-progress marker */
  int interrupted;        /* the folder held an interrupted run (its marker) */
} run_undo;
/* The folder as the run finds it: refused, cleaned of fp8lab's debris, locked (run_folder.h). */
int run_dir_enter(const fp8_run_options *opt, const char *out, run_undo *u, char *err,
                  size_t errlen);
/* Once the run is to write the folder: created, locked, marked in progress. */
int run_dir_claim(const fp8_experiment *ex, const fp8_run_options *opt, const char *out,
                  run_undo *u, char *err, size_t errlen);
int run_dir_prepare_trace(const fp8_experiment *ex, const fp8_run_options *opt, const char *out,
                          run_undo *u, char *trace_dir, size_t len, char *err, size_t errlen);
/* Puts the folder back as it was (a fresh run that failed before any result was in place). */
void run_dir_undo(run_undo *u, const char *out, const char *trace_dir, int resume);

/* run_resume.c: the checkpoint (docs/design.md, "Crash consistency and resume") */
typedef enum { RUN_CKPT_REPLAY = 1, RUN_CKPT_COMMIT = 2, RUN_CKPT_COMMITTED = 3 } run_ckpt_phase;
/* what a checkpoint holds besides the state it restores into run_t */
typedef struct {
  run_ckpt_phase phase;
  int64_t len[4];             /* bytes of each partial file (-1: not written) */
} run_ckpt_info;
/* The partial files and the amax log in <out>/.fp8lab-checkpoint/: new ones with their
 * headers, or (resume) the checkpoint's, cut back to the lengths it recorded. */
int run_ckpt_open(run_t *r, const run_ckpt_info *resume, char *err, size_t errlen);
/* After each micro-batch's end_phase pair: its amaxes into the amax log. */
int run_ckpt_micro(run_t *r, char *err, size_t errlen);
/* After step r->steps_done: a checkpoint when the interval has passed. */
int run_ckpt_step(run_t *r, char *err, size_t errlen);
/* A checkpoint now (temporary + rename of <out>/.fp8lab-checkpoint/state). */
int run_ckpt_write(run_t *r, run_ckpt_phase phase, char *err, size_t errlen);
/* The fingerprints of the experiment, the trace's files and the engine (r->fp_*). */
int run_ckpt_fingerprint(run_t *r, const fp8_trace *tr, const char *trace_dir, char *err,
                         size_t errlen);
/* Reads the checkpoint of r->out into r (counters, totals, the earlier outputs, the start),
 * after checking it is one of this replay (r's tensors, configurations, steps and
 * fingerprints); then replays the amax log through the engines and checks their scales. */
int run_ckpt_restore(run_t *r, const int64_t *steps, const char *exp_given,
                     run_ckpt_info *info, char *err, size_t errlen);
/* Closes the amax log (and the partials, keeping their files). */
void run_ckpt_close(run_t *r);

#endif /* FP8LAB_RUN_RUNNER_INTERNAL_H */
