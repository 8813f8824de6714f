/* trace.h: reading captured traces (safetensors or npy snapshots plus an optional amax.csv).
 *
 * A trace directory holds `step_<N>.safetensors` files, or `step_<N>/` folders of
 * `<tensor>.npy` files, and optionally `amax.csv` (`step,tensor,amax`). Data is mapped, never
 * copied: memory stays bounded by one step's tensors however long the trace is.
 *
 * A multi-rank trace (what the capture tool writes under torch.distributed) is a folder of
 * `rank_0/` .. `rank_<R-1>/` sub-folders, each a single-rank trace as above. It reads as one
 * trace whose tensors are named `rank_<r>/<tensor name>`: the snapshot steps are the union of
 * the ranks' steps, amax.csv rows are those of all ranks (renamed), and a step loads the
 * tensors of every rank that has a snapshot then. fp8_trace_load_step_rank loads one rank at a
 * time, so that a replay maps no more than one rank's step at once.
 * Errors are returned as fp8_status codes with a one-line message in `err` naming the file and
 * the tensor, line or byte offset.
 */
#ifndef FP8LAB_TRACE_TRACE_H
#define FP8LAB_TRACE_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "fp8.h"

/* fp8_tensor_view, a tensor of a step: fp8.h (the engines take views, not traces). */

/** The tensors of one snapshot step, sorted by name. Owns its mappings. */
typedef struct fp8_step fp8_step;
struct fp8_step {
  int64_t step;
  size_t ntensors;
  fp8_tensor_view *tensors;
  void *priv; /* mappings */
};

/** One row of amax.csv (docs/semantics.md, "Micro-batches and TE's scale (issue 17)"). */
typedef struct {
  int64_t step;
  int32_t micro;  /**< the micro-batch within the step (0 without the `micro` column;
                       0..2^31-1) */
  int32_t tensor; /**< index into fp8_trace.amax_names */
  float amax;
  float te_scale; /**< the scale TE cast with at (step, micro); 0: not given (a given one is
                       positive and finite) */
} fp8_amax_row;   /* 24 bytes: a 70B model's 16.8 M rows in 403 MB (issue 27) */

/** One row of tokens.csv (`step,gemm,tokens`; docs/reference.md, "tokens.csv"): the token rows
 *  routed to an expert GEMM at a step, summed over its micro-batches (0: it did not run). */
typedef struct {
  int64_t step;
  int64_t tokens;  /**< >= 0 */
  int32_t gemm;    /**< index into fp8_tokens_table.gemms */
  uint32_t line;   /**< its line in tokens.csv (header = 1); 0 in a merged table */
} fp8_tokens_row;  /* 24 bytes */

/** A trace folder's tokens.csv in memory (or several ranks' merged: fp8_trace_tokens_merge). */
typedef struct {
  size_t nrows;
  fp8_tokens_row *rows; /**< sorted by step, then gemm; each (step, gemm) once */
  size_t ngemms;
  char **gemms;         /**< the distinct GEMM names, sorted (strcmp); each an expert GEMM
                             (fp8_expert_of) with a tensor `<gemm>.<role>` in the trace */
} fp8_tokens_table;

/** Most ranks a multi-rank trace may have (rank_0/ .. rank_<FP8_RANK_LIMIT-1>/). */
#define FP8_RANK_LIMIT 65536

/** An opened trace: its snapshot steps (ascending) and its amax stream (sorted by step, then
 *  micro-batch, then tensor index; may be empty). For a multi-rank trace every field but step_paths describes
 *  all ranks together, with tensor names `rank_<r>/<name>`. */
typedef struct fp8_trace fp8_trace;
struct fp8_trace {
  char *dir;
  int is_npy;            /**< 1 when the snapshots are step_<N>/ folders of .npy files (multi-rank:
                              of every rank) */
  size_t nsteps;
  int64_t *steps;        /**< snapshot steps, ascending, unique (multi-rank: of any rank) */
  char **step_paths;     /**< file (safetensors) or folder (npy) of each snapshot step; NULL for
                              a multi-rank trace (see ranks[r].step_paths) */
  size_t namax;
  fp8_amax_row *amax;    /**< amax.csv rows (multi-rank: of every rank) */
  size_t namax_names;
  char **amax_names;     /**< distinct tensor names of amax.csv, sorted (strcmp) */
  size_t nranks;         /**< 0: a single-rank trace; R >= 1: dir holds rank_0/ .. rank_<R-1>/ */
  fp8_trace *ranks;      /**< the R single-rank traces, ranks[r] from dir/rank_<r> */
  int has_te_log;        /**< dir/te_log.json (fp8lab import-te, python -m fp8lab.te_tb) was read: */
  int64_t te_interval;   /**<   its logging interval (0: one iteration logged), */
  int64_t te_zero, te_coarse; /**< its values left out as 0.0000, and kept with < 3 digits */
  size_t nte_tensors;    /**< te_log.json schema 2: its tensors with their own cur_amax
                              interval (0: a te_log.json before it, every tensor logged at
                              te_interval): */
  char **te_tensor_names;      /**<   each tensor's name (te_log.json's order: by name; no
                                    rank_<r>/ prefix), */
  int64_t *te_tensor_intervals; /**<  and its interval (0: one iteration logged) */
  int te_intervals_differ; /**< te_log.json's intervals_differ (0 before schema 2) */
  int has_tokens;        /**< dir/tokens.csv was read into tokens (multi-rank: 0 here, see
                              fp8_trace_tokens; a rank_<r>/ folder holds its own) */
  fp8_tokens_table tokens;
};

/** Opens a trace directory: lists the snapshot steps and reads amax.csv (if any) completely,
 *  and te_log.json when there (interval, zero_values, coarse_values: non-negative integers, or
 *  an error naming the file and key; schema 2's per-tensor intervals when every entry of its
 *  tensors has one, none when no entry has: a te_log.json of before them);
 *  for a folder of rank_<r>/ sub-folders, opens every rank. A directory with neither
 *  snapshots, amax.csv nor rank folders is an error, and so are rank folders that are not
 *  rank_0 .. rank_<R-1> without gaps, and a directory holding both rank folders and a
 *  single-rank trace (snapshots or amax.csv). */
int fp8_trace_open(const char *dir, fp8_trace *tr, char *err, size_t errlen);
void fp8_trace_close(fp8_trace *tr);

/** The tokens.csv of rank r (a multi-rank trace: r < nranks; a single-rank trace: r = 0),
 *  NULL when that folder has none. Read and checked at fp8_trace_open (tokenscsv.c): a bad
 *  file fails the open with "<path>:<line>: <what>" (FP8_EFORMAT). */
const fp8_tokens_table *fp8_trace_tokens(const fp8_trace *tr, size_t r);
/** 1 when any folder of the trace (any rank) has a tokens.csv. */
int fp8_trace_has_tokens(const fp8_trace *tr);
/** The ranks' tokens.csv tables as one, by GEMM name within the rank: the tokens of a GEMM
 *  that several ranks hold (data-parallel replicas) summed per step. keep (NULL: all) chooses
 *  which (rank, gemm) pairs take part (r = 0 for a single-rank trace). out is the caller's
 *  to free (fp8_tokens_free); its rows have line 0. FP8_OK, FP8_ENOMEM, or FP8_EFORMAT when a
 *  sum overflows int64 ("<dir>: ..."). */
int fp8_trace_tokens_merge(const fp8_trace *tr, int (*keep)(size_t r, const char *gemm, void *ctx),
                           void *ctx, fp8_tokens_table *out, char *err, size_t errlen);
void fp8_tokens_free(fp8_tokens_table *t);

/** Maps snapshot i (0 <= i < nsteps) and validates every header against the file size.
 *  For a multi-rank trace: the tensors of every rank with a snapshot at step steps[i]. */
int fp8_trace_load_step(const fp8_trace *tr, size_t i, fp8_step *out, char *err, size_t errlen);
/** The part of snapshot i that rank r holds. Multi-rank trace (r < nranks): rank r's tensors
 *  at step steps[i], named `rank_<r>/<name>` and sorted by name; no tensor (ntensors 0, FP8_OK)
 *  when rank r has no snapshot at that step. Single-rank trace: r must be 0, and this is
 *  fp8_trace_load_step. */
int fp8_trace_load_step_rank(const fp8_trace *tr, size_t i, size_t r, fp8_step *out, char *err,
                             size_t errlen);
void fp8_step_free(fp8_step *s);

/** For a tensor name of a multi-rank trace (`rank_<r>/<name>`, r written as the trace writes
 *  it): stores r in *rank and returns the name within the rank (a pointer into name); NULL
 *  when name has no such prefix. */
const char *fp8_trace_split_rank(const char *name, size_t *rank);

/** What a directory entry of a single-rank trace is by its name: 1 for step_<N>.safetensors (a
 *  snapshot when it is a regular file), 2 for step_<N> (a snapshot when it is a folder of .npy
 *  files), 0 for any other name (amax.csv included). */
int fp8_trace_snapshot_name(const char *name);

/** Reads one safetensors file (used by fp8_trace_load_step; exposed for tests and tools).
 *  Sets out->step to -1 (fp8_trace_load_step sets the step number). */
int fp8_safetensors_open(const char *path, fp8_step *out, char *err, size_t errlen);

/** Reads one npy snapshot folder: every `<tensor>.npy` file in it (other files, hidden files
 *  and sub-folders are ignored); each file is mapped and validated. Sets out->step to -1
 *  (fp8_trace_load_step sets the step number). */
int fp8_npy_open_step(const char *dir, fp8_step *out, char *err, size_t errlen);

/** Reads a tokens.csv file (header `step,gemm,tokens`) into t (zeroed first): every row
 *  checked (a step and tokens non-negative integers, the GEMM name by the name rules and an
 *  expert GEMM by fp8_expert_of, each (step, gemm) once); that the GEMMs are the trace's is
 *  fp8_trace_open's check. FP8_EIO (cannot open), FP8_EFORMAT ("<path>:<line>: <what>"),
 *  FP8_ENOMEM; on error t is empty. */
int fp8_tokens_csv_read(const char *path, fp8_tokens_table *t, char *err, size_t errlen);

/** Reads an amax.csv file completely into tr's amax, namax, amax_names and namax_names (which
 *  must be empty). On error they are left empty and err names the file and line. */
int fp8_amax_csv_read(const char *path, fp8_trace *tr, char *err, size_t errlen);

/* ------------------------------------------------------------------ tensor names */

/** Longest tensor name a trace file may hold, in bytes. With the `rank_<r>/` prefix of a
 *  multi-rank trace (at most FP8_RANK_PREFIX_MAX bytes more) the plot file
 *  `amax_<name>.png` stays within the 255 bytes a file name may have. */
#define FP8_NAME_MAX 200
#define FP8_RANK_PREFIX_MAX 11 /* "rank_65535/" */

/** Checks len bytes of name against the name rules (docs/semantics.md, "Strict inputs"):
 *  non-empty, at most max bytes, well-formed UTF-8 without control characters (NUL, C0, DEL,
 *  C1), no leading '/', no ".." path segment ('/' inside a name, as in rank_0/..., is legal).
 *  Returns 0 when it passes; else -1 with what is wrong in why ("name is empty", "name holds
 *  the control character \n at byte 3"). Every trace reader calls it on every name. */
int fp8_tensor_name_check(const char *name, size_t len, size_t max, char *why, size_t whylen);

/** Mixture-of-Experts names (docs/semantics.md, "Mixture-of-Experts"): 1 when `name` (a GEMM or
 *  a tensor name) has a dotted component `experts` followed by a component of decimal digits
 *  (the last such pair: `model.layers.0.mlp.experts.3.gate_up_proj.input`,
 *  `layers.0.mlp.linear_fc1.experts.3.input`), else 0. Then *expert (when not NULL) is that
 *  number (at most 9 digits) and group (when not NULL: groupcap bytes, cut to fit) the name
 *  with the digits replaced by `*` (`model.layers.0.mlp.experts.*.gate_up_proj.input`): the
 *  expert group, one TE GroupedLinear, which takes one recipe. */
int fp8_expert_of(const char *name, int32_t *expert, char *group, size_t groupcap);
/** 1 when the GEMM name `gemm` is a Mixture-of-Experts router: its last dotted component is
 *  `gate` or `router` and one of names[0..n) (GEMM or tensor names) is an expert of the same
 *  parent (`<parent>.experts.<i>...`; `model.layers.0.mlp.gate` beside
 *  `model.layers.0.mlp.experts.3.down_proj.input`). */
int fp8_router_of(const char *gemm, const char *const *names, size_t n);
/** The file-name form of a tensor name (the `<stem>` of plots/amax_<stem>.png): A-Z a-z 0-9
 *  '-' '.' kept, every other byte '_'. out holds at least FP8_NAME_MAX + FP8_RANK_PREFIX_MAX
 *  + 1 bytes for a name that passed the rules. */
void fp8_tensor_file_stem(const char *name, char *out, size_t n);

/** Distinct tensors must get distinct plot files: FP8_OK when no two of names[0..n) have the
 *  same file stem, else FP8_EFORMAT with "<where>: tensors A and B would both be drawn as
 *  plots/amax_<stem>.png; rename one" (the first such pair in strcmp order). */
int fp8_tensor_files_distinct(const char *const *names, size_t n, const char *where, char *err,
                              size_t errlen);

/** A tensor to write: host data in the given dtype. */
typedef struct {
  const char *name;
  fp8_dtype dtype;
  int ndim;
  int64_t shape[FP8_MAX_DIMS];
  const void *data;
} fp8_tensor_out;

/** Writes a safetensors file (JSON header via jansson, 8-byte aligned data), to a temporary
 *  name renamed into place. `metadata` may be NULL (string pairs: k0, v0, k1, v1, ..., NULL). */
int fp8_safetensors_write(const char *path, const fp8_tensor_out *tensors, size_t n,
                          const char *const *metadata, char *err, size_t errlen);

#endif /* FP8LAB_TRACE_TRACE_H */
