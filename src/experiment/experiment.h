/* experiment.h: experiment files (INI, parsed with libinih) and their expansion into the
 * configurations a run sweeps.
 *
 *   [trace]   path (dir, multi-rank dir of rank_<r>/ traces, or synth:<preset>), steps (a-b
 *             or a-b:stride), tensors (comma globs), synth_steps, synth_seed (for synth: paths),
 *             reduce_amax (true|false), reduce_group (ranks per group; multi-rank traces),
 *             reduce_stride; reduce_group and reduce_stride need reduce_amax = true (without
 *             it no amax is reduced: an error at their line, as a key of another kind is),
 *             warm_history (true|false, default true: the trace's steps that the steps
 *             selection leaves out before its last step feed delayed scaling's history)
 *   [recipe.<name>]  kind = delayed | current, format, and the kind's keys; every value may
 *             be a comma list (a sweep axis); a configuration is one point of the product.
 *             tensors (comma globs, [trace] tensors' rules): the section's configurations
 *             apply to (have rows for) the matching tensors only; label: the recipe label its
 *             rows carry (default <name>). Sections with one label form one recipe: each of
 *             them one configuration, each tensor taking the first (file order) that matches.
 *   [analysis] overflow_budget (fraction of elements, default 1e-5), gemm (true|false),
 *             gemm_error (sampled | exact, default sampled), gemm_sample (output rows and
 *             columns per GEMM, default 64), gemm_seed (default 0),
 *             gemm_max_tokens (exact mode; default 1024, 0 = all), tensor_core (exact |
 *             h100 | h200 | b200, default exact: the GEMMs' accumulation, tensorcore.h), step_budget (fraction of stream steps,
 *             default 0.01), warmup_steps (default: each tensor's own warm-up),
 *             flush_budget (fraction of a tensor's finite values flushed to zero that a
 *             configuration may reach and still fit it; default off). A budget's value is a
 *             decimal in 0..1; one below the smallest normal double (1e-320) is taken as
 *             strtod's nearest double, subnormal or 0, not refused as out of range.
 *   [output]  dir, stream (auto | csv | npy: the stream's format; auto: npy above
 *             FP8_STREAM_NPY_ROWS rows)
 * Errors: FP8_EINVAL with "file:line: message" in err.
 */
#ifndef FP8LAB_EXPERIMENT_EXPERIMENT_H
#define FP8LAB_EXPERIMENT_EXPERIMENT_H

#include <stddef.h>
#include <stdint.h>

#include "recipe.h" /* fp8_recipe_kind, fp8_config */

/** [output] stream: the stream's format (docs/design.md "The stream at scale"). auto: stream.csv
 *  up to FP8_STREAM_NPY_ROWS rows (about 0.6 GB of CSV), stream.npy + stream.json above. */
enum { FP8_STREAM_AUTO, FP8_STREAM_CSV, FP8_STREAM_NPY };
#define FP8_STREAM_NPY_ROWS 5000000

/** Most configurations one experiment file may expand to (all recipe sections together). */
#define FP8_EXPERIMENT_MAX_CONFIGS 4096

/** The [analysis] keys: fp8_experiment.analysis_line[k] is the line of key k in the file, 0
 *  when the file does not give it (its default); fp8_experiment_analysis_keys[k] spells it.
 *  A run says which of them a trace of amaxes alone cannot serve (docs/semantics.md, "What a
 *  trace of amaxes alone cannot serve"), at their lines. */
typedef enum {
  FP8_EXP_AKEY_OVERFLOW_BUDGET,
  FP8_EXP_AKEY_STEP_BUDGET,
  FP8_EXP_AKEY_FLUSH_BUDGET,
  FP8_EXP_AKEY_ROUTERS,
  FP8_EXP_AKEY_FP4_GEMM_RATIO,
  FP8_EXP_AKEY_WARMUP_STEPS,
  FP8_EXP_AKEY_GEMM,
  FP8_EXP_AKEY_GEMM_ERROR,
  FP8_EXP_AKEY_GEMM_SAMPLE,
  FP8_EXP_AKEY_GEMM_SEED,
  FP8_EXP_AKEY_GEMM_MAX_TOKENS,
  FP8_EXP_AKEY_COST_TOKENS,
  FP8_EXP_AKEY_TENSOR_CORE,
  FP8_EXP_AKEY_COUNT
} fp8_exp_analysis_key;
extern const char *const fp8_experiment_analysis_keys[FP8_EXP_AKEY_COUNT];

/** One [recipe.<name>] section: its label, its tensor subset and its configurations. */
typedef struct {
  char name[64];       /**< the text after "recipe." in the header */
  char label[64];      /**< the recipe label of its rows: the label key, else name */
  int line;            /**< line of the header */
  int label_line;      /**< line of the label key, 0 when not given */
  int list_line;       /**< line of its first key with more than one value, 0 when none */
  size_t nglobs;
  char **globs;        /**< the tensors key: empty = every tensor of the replay */
  int tensors_line;    /**< line of the tensors key, 0 when not given */
  size_t first_config, nconfigs; /**< its configurations: configs[first_config ..] */
  size_t label_first;  /**< index of the first section with the same label (itself if none) */
  size_t label_count;  /**< sections with this label (> 1: a shared label) */
} fp8_recipe_section;

typedef struct {
  char *file;          /**< the experiment file as given */
  char *base_dir;      /**< its directory: relative paths are relative to it */
  char *name;          /**< file name without directory and .ini */
  char *trace_path;    /**< resolved path, or "synth:<preset>" as written */
  int trace_is_synth;
  char *synth_preset;  /**< for synth: paths */
  int64_t synth_steps; /**< default 200 */
  uint64_t synth_seed; /**< default 1 */
  int has_steps;       /**< steps key given */
  int64_t step_first, step_last, step_stride;
  int steps_line;      /**< line of the steps key, 0 when not given */
  size_t ntensor_globs;
  char **tensor_globs; /**< empty = all tensors */
  int tensors_line;    /**< line of the tensors key, 0 when not given */
  int reduce_amax;     /**< [trace] reduce_amax (default 0): delayed scaling's amax is the max
                            over the ranks of a group (multi-rank traces) */
  int64_t reduce_group;/**< [trace] reduce_group: ranks per group; 0 (default) = all ranks */
  /** [trace] reduce_stride: the distance between a group's ranks (default 1: contiguous
   *  groups [0..G-1], [G..2G-1], ...). With S, a group is ranks r, r+S, ..., r+(G-1)S: the
   *  data-parallel groups of a TP x DP layout whose TP ranks are adjacent (S = TP size). */
  int64_t reduce_stride;
  int reduce_amax_line;  /**< line of the reduce_amax key, 0 when not given */
  int reduce_group_line; /**< line of the reduce_group key, 0 when not given */
  int reduce_stride_line; /**< line of the reduce_stride key, 0 when not given */
  /** [trace] warm_history (default 1): with a steps selection, every step of the trace before
   *  the last selected one that the selection leaves out (before its range, or skipped by its
   *  stride) feeds delayed scaling's amax histories as in training, without rows; 0: those
   *  steps do not exist for the replay (a cold history; docs/semantics.md "Trace replay") */
  int warm_history;
  int warm_history_line; /**< line of the warm_history key, 0 when not given */
  char *out_dir;       /**< resolved; NULL when not given */
  int stream_format;   /**< [output] stream: FP8_STREAM_AUTO (default), _CSV or _NPY */
  double overflow_budget; /**< [analysis] overflow_budget (default 1e-5) */
  int gemm;               /**< [analysis] gemm (default 1): write gemm.csv for layer triplets */
  int64_t gemm_max_tokens;/**< [analysis] gemm_max_tokens (default 1024; 0: all tokens) */
  int gemm_sampled;       /**< [analysis] gemm_error: 1 sampled (default), 0 exact */
  int64_t gemm_sample;    /**< [analysis] gemm_sample (default 64): sampled output rows and
                               columns per GEMM (gemm.h) */
  uint64_t gemm_seed;     /**< [analysis] gemm_seed (default 0) */
  /** [analysis] tensor_core (exact | h100 | h200 | b200; default exact): how the per-tensor
   *  configurations' FP8 GEMMs accumulate their products (src/sim/tensorcore.h, an
   *  fp8_tc_model: fprop with fast accumulation, dgrad and wgrad promoted every 128 terms) */
  int tensor_core;
  /** [analysis] cost_tokens: the tokens per step the report's cost section models (the
   *  production run's batch x sequence); 0 (default): the captured batch's */
  int64_t cost_tokens;
  double step_budget;     /**< [analysis] step_budget (default 0.01): stream steps that may clip */
  double flush_budget;    /**< [analysis] flush_budget, in 0..1; NaN (the default): off */
  /** [analysis] routers: 0 (bf16, the default): Mixture-of-Experts routers are left out of the
   *  FP8 advice (kept in BF16); 1 (fp8): advised as any tensor (docs/semantics.md) */
  int routers_fp8;
  /** [analysis] fp4_gemm_ratio (default 4): a layer holds under an FP4 configuration when each
   *  of its GEMM errors is at most this many times the FP8 reference's (the report's FP4
   *  section; docs/semantics.md) */
  double fp4_gemm_ratio;
  int64_t warmup_steps;   /**< [analysis] warmup_steps: the first N replay steps are warm-up for
                               every tensor; -1 (default): each tensor's own (docs/semantics.md) */
  int analysis_line[FP8_EXP_AKEY_COUNT]; /**< line of each [analysis] key, 0: not given */
  size_t nconfigs;
  fp8_config *configs; /**< sections in file order, product in key order (last key fastest) */
  int *format_lines;   /**< [nconfigs]: line of the format key of the configuration's section,
                            or of its [recipe.*] header when format is not given (hybrid): for
                            errors found in the trace, such as a tensor hybrid cannot resolve */
  size_t nsections;
  fp8_recipe_section *sections; /**< the [recipe.*] sections, file order */
  size_t *config_section;       /**< [nconfigs]: the section of each configuration */
} fp8_experiment;

/** Parses and validates an experiment file; expands the sweep. */
int fp8_experiment_load(const char *path, fp8_experiment *ex, char *err, size_t errlen);
void fp8_experiment_free(fp8_experiment *ex);
/** The keys of a [recipe.*] section that give configuration cf again, one "key = value" line
 *  each (kind first; no tensors or label), into buf (len >= 256 holds every kind). run.json
 *  records them and the report's advice files write them back. */
void fp8_config_settings(const fp8_config *cf, char *buf, size_t len);

/** The FP8 configuration the FP4 verdict divides by (docs/semantics.md, "Which layers hold"):
 *  -1 without an FP4 configuration; else the first current-scaling configuration, else the
 *  reference delayed one (TE's default 1024, 0, max when swept; else max over most_recent, the
 *  smallest |margin|, the longest history; first in file order on ties), of the FP8 kinds
 *  (not FP4, not bf16), leaving out sections that share their label (mixed recipes); -1 when
 *  there is none. run.json names it (experiment.fp4_reference). */
ptrdiff_t fp8_experiment_fp4_reference(const fp8_experiment *ex);

/** True when step is selected by the [trace] steps key (always true without it). */
int fp8_experiment_step_selected(const fp8_experiment *ex, int64_t step);
/** True when a tensor name matches one of the globs (always true without globs). */
int fp8_experiment_tensor_selected(const fp8_experiment *ex, const char *name);
/** The same for a tensor of a multi-rank trace, named full = `rank_<r>/<local>`: a glob that
 *  contains '/' is matched against full, any other against local (the name within the rank), so
 *  that `*.fc1.*` means the same as for a single rank and `rank_0/<glob>` picks one rank. */
int fp8_experiment_rank_tensor_selected(const fp8_experiment *ex, const char *full,
                                        const char *local);

/** True when section s's tensors key matches a tensor of the replay (always without the key);
 *  full is its name, local the name within its rank (local = full for a single-rank trace):
 *  the rules of fp8_experiment_rank_tensor_selected. */
int fp8_experiment_section_matches(const fp8_recipe_section *s, const char *full,
                                   const char *local);

/** Checks the [trace] reduce_amax / reduce_group keys against the trace they are run on, once
 *  it is open: nranks is 0 for a single-rank trace (a direct trace or synth:), else the number
 *  of rank_<r>/ folders. reduce_amax = true and reduce_group need a multi-rank trace, and
 *  reduce_group must divide nranks. Returns FP8_OK or FP8_EINVAL with "file:line: message"
 *  in err (the first offending key in the file); trace names the trace in the message. */
int fp8_experiment_check_ranks(const fp8_experiment *ex, size_t nranks, const char *trace,
                               char *err, size_t errlen);
/** Checks the [trace] steps selection against the trace's snapshot steps (steps[0..n),
 *  ascending): a selection that holds none of them would give outputs without a row, so it is
 *  FP8_EINVAL with "file:line: message" in err (trace names the trace in the message). Without
 *  a steps key: FP8_OK. */
int fp8_experiment_check_steps(const fp8_experiment *ex, const int64_t *steps, size_t n,
                               const char *trace, char *err, size_t errlen);
/** Ranks per amax-reduction group for a trace of nranks ranks (>= 1): reduce_group, or all. */
size_t fp8_experiment_reduce_group(const fp8_experiment *ex, size_t nranks);
/** The amax-reduction group of rank r (0-based, groups numbered by their lowest rank's order):
 *  with G ranks per group and stride S, r / (G S) * S + r % S; contiguous groups (S = 1):
 *  r / G. */
size_t fp8_experiment_group_of(const fp8_experiment *ex, size_t nranks, size_t r);

#endif /* FP8LAB_EXPERIMENT_EXPERIMENT_H */
