/* run_json.h: run.json, the record of what a run did (what ran, on which engine, with what
 * inputs, which files it wrote): its keys, its writer and its reader, all in this folder.
 *
 * The runner fills a description (fp8_run_json_desc: the experiment, the trace, the counts,
 * the engine, the files written) and fp8_run_json_write (run_json.c) builds the document from
 * it; the report reads it back once through fp8_run_json_read (run_json_read.c: every key it
 * uses checked, the outputs list with them) and puts its own files into that list through
 * fp8_run_json_set_report_outputs (run_json.c), which writes the document again. A key is
 * spelled here only: FP8_RUNJSON_<OBJECT>_<KEY> (te_log's are te_log.h's FP8_TE_LOG_*, the
 * keys of te_log.json that trace.te_log carries on).
 */
#ifndef FP8LAB_RESULTS_RUN_JSON_H
#define FP8LAB_RESULTS_RUN_JSON_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "config_key.h" /* fp8_config_key */
#include "experiment.h" /* fp8_experiment */
#include "outputs.h"    /* fp8_outputs */
#include "sha256.h"     /* FP8_SHA256_HEX */
#include "timeline.h"   /* fp8_tl_shape */
#include "trace.h"      /* fp8_trace */

#define FP8_RUNJSON_FILE "run.json"

/* top level */
#define FP8_RUNJSON_VERSION "fp8lab_version"
#define FP8_RUNJSON_GIT_REVISION "git_revision"
#define FP8_RUNJSON_STARTED_UTC "started_utc"
#define FP8_RUNJSON_EXPERIMENT "experiment"
#define FP8_RUNJSON_TRACE "trace"
#define FP8_RUNJSON_INPUTS "inputs"
#define FP8_RUNJSON_OUTPUTS "outputs"
#define FP8_RUNJSON_STEPS_REPLAYED "steps_replayed"
#define FP8_RUNJSON_TENSORS "tensors"
#define FP8_RUNJSON_CONFIGURATIONS "configurations"
#define FP8_RUNJSON_DISTINCT_CONFIGURATIONS "distinct_configurations"
#define FP8_RUNJSON_ROWS "rows"
#define FP8_RUNJSON_GEMM_ROWS "gemm_rows"
#define FP8_RUNJSON_STREAM_ROWS "stream_rows"  /* issue 27: 0 without delayed configurations */
#define FP8_RUNJSON_THREADS "threads"
#define FP8_RUNJSON_PROCESSES "processes"
#define FP8_RUNJSON_PROCESS_BYTES "process_snapshot_bytes"
#define FP8_RUNJSON_AMAX_EXCHANGE "amax_exchange"
#define FP8_RUNJSON_ENGINE "engine"
#define FP8_RUNJSON_ENGINE_DETAILS "engine_details"
#define FP8_RUNJSON_AMAX_CSV_MISMATCHES "amax_csv_mismatches"
#define FP8_RUNJSON_WALL_TIME_S "wall_time_s"
#define FP8_RUNJSON_MODEL_SHAPE "model_shape"
/* issue 41: the experiment's sections and [analysis] keys a run without snapshot rows (a trace
 * of amaxes alone) could not serve (fp8_unserved); [] when none; absent before it */
#define FP8_RUNJSON_UNSERVED "unserved"

/* experiment */
#define FP8_RUNJSON_EX_FILE "file"
#define FP8_RUNJSON_EX_NAME "name"
#define FP8_RUNJSON_EX_TEXT "text"
#define FP8_RUNJSON_EX_CONFIGURATIONS "configurations"
#define FP8_RUNJSON_EX_OVERFLOW_BUDGET "overflow_budget"
#define FP8_RUNJSON_EX_STEP_BUDGET "step_budget"
#define FP8_RUNJSON_EX_FLUSH_BUDGET "flush_budget"
#define FP8_RUNJSON_EX_ROUTERS "routers"
#define FP8_RUNJSON_EX_FP4_GEMM_RATIO "fp4_gemm_ratio"
#define FP8_RUNJSON_EX_FP4_REFERENCE "fp4_reference" /* issue 42: {recipe, kind, history_len,
                                   margin, amax_compute}, gemm.csv's spelling (strings) */
#define FP8_RUNJSON_EX_WARMUP_STEPS "warmup_steps"
#define FP8_RUNJSON_EX_GEMM "gemm"
#define FP8_RUNJSON_EX_GEMM_MAX_TOKENS "gemm_max_tokens"
#define FP8_RUNJSON_EX_GEMM_ERROR "gemm_error"   /* its values below; absent: exact */
#define FP8_RUNJSON_GEMM_SAMPLED "sampled"
#define FP8_RUNJSON_GEMM_EXACT "exact"
#define FP8_RUNJSON_EX_GEMM_SAMPLE "gemm_sample"
#define FP8_RUNJSON_EX_GEMM_SEED "gemm_seed"
#define FP8_RUNJSON_EX_TENSOR_CORE "tensor_core"
#define FP8_RUNJSON_EX_ACCUMULATION "accumulation"
#define FP8_RUNJSON_EX_COST_TOKENS "cost_tokens"

/* experiment.configurations[] */
#define FP8_RUNJSON_CFG_RECIPE "recipe"
#define FP8_RUNJSON_CFG_KIND "kind"
#define FP8_RUNJSON_CFG_FORMAT "format"
#define FP8_RUNJSON_CFG_MARGIN "margin"
#define FP8_RUNJSON_CFG_HISTORY_LEN "history_len"
#define FP8_RUNJSON_CFG_AMAX_COMPUTE "amax_compute"
#define FP8_RUNJSON_CFG_UNFUSED_UPDATE "unfused_update" /* delayed, only when true */
#define FP8_RUNJSON_CFG_AMAX_EPSILON "amax_epsilon"
#define FP8_RUNJSON_CFG_POW2 "pow2"
#define FP8_RUNJSON_CFG_SECTION "section"
#define FP8_RUNJSON_CFG_TENSORS "tensors"
/* the section's keys that give the configuration again ("key = value" lines; fp8lab >= issue 29) */
#define FP8_RUNJSON_CFG_SETTINGS "settings"

/* trace */
#define FP8_RUNJSON_TR_PATH "path"
#define FP8_RUNJSON_TR_ABS_PATH "abs_path"
#define FP8_RUNJSON_TR_STEPS "steps"
#define FP8_RUNJSON_TR_TENSORS "tensors"
#define FP8_RUNJSON_TR_SNAPSHOT_STEPS "snapshot_steps"
#define FP8_RUNJSON_TR_AMAX_ROWS "amax_rows"
#define FP8_RUNJSON_TR_SYNTH_PRESET "synth_preset"
#define FP8_RUNJSON_TR_SYNTH_STEPS "synth_steps"
#define FP8_RUNJSON_TR_SYNTH_SEED "synth_seed"
#define FP8_RUNJSON_TR_RANKS "ranks"
#define FP8_RUNJSON_TR_REDUCE_AMAX "reduce_amax"
#define FP8_RUNJSON_TR_REDUCE_GROUP "reduce_group"
#define FP8_RUNJSON_TR_REDUCE_STRIDE "reduce_stride"
/* [trace] warm_history (always written; absent in a run.json before it: false, those runs were
 * cold), and with a steps key the trace's steps it leaves out before its first selected step
 * and between its first and last (the stride's) */
#define FP8_RUNJSON_TR_WARM_HISTORY "warm_history"
#define FP8_RUNJSON_TR_STEPS_BEFORE "steps_before"
#define FP8_RUNJSON_TR_STEPS_SKIPPED "steps_skipped"
#define FP8_RUNJSON_TR_TE_LOG "te_log" /* {FP8_TE_LOG_INTERVAL, _ZERO_VALUES, _COARSE_VALUES,
                                          _TENSOR_INTERVALS (schema-2 te_log.json only)} */

/* inputs[] */
#define FP8_RUNJSON_IN_PATH "path"
#define FP8_RUNJSON_IN_BYTES "bytes"
#define FP8_RUNJSON_IN_SHA256 "sha256" /* lowercase hex (issue 41; absent in older run.json) */

/* unserved[]: {section, key (an [analysis] key) or label and kind and configurations (a
 * [recipe.*] section), line, why} */
#define FP8_RUNJSON_UN_SECTION "section"
#define FP8_RUNJSON_UN_KEY "key"
#define FP8_RUNJSON_UN_LABEL "label"
#define FP8_RUNJSON_UN_KIND "kind"
#define FP8_RUNJSON_UN_CONFIGURATIONS "configurations"
#define FP8_RUNJSON_UN_LINE "line"
#define FP8_RUNJSON_UN_WHY "why"

/* engine_details and engine_details.self_check */
#define FP8_RUNJSON_ENG_NAME "name"
#define FP8_RUNJSON_ENG_DEVICE "device"
#define FP8_RUNJSON_ENG_MODULE "module"
#define FP8_RUNJSON_ENG_SELF_CHECK "self_check"
#define FP8_RUNJSON_ENG_CPU_QUANTIZE "cpu_quantize_configurations"
#define FP8_RUNJSON_ENG_CPU_GEMM "cpu_gemm_configurations"
#define FP8_RUNJSON_SC_RAN "ran"
#define FP8_RUNJSON_SC_PASSED "passed"
#define FP8_RUNJSON_SC_VALUES "values_compared"
#define FP8_RUNJSON_SC_NOTE "note"

/* the lists of the tensors without rows (fp8_left_keys) */
#define FP8_RUNJSON_LEFT_NEVER_RAN "tensors_never_ran"
#define FP8_RUNJSON_LEFT_NO_SNAPSHOT "tensors_without_snapshot"
#define FP8_RUNJSON_LEFT_NO_RECIPE "tensors_without_recipe"

/* model_shape and model_shape.linears[] */
#define FP8_RUNJSON_MS_LAYERS "layers"
#define FP8_RUNJSON_MS_WORLD "world"
#define FP8_RUNJSON_MS_LINEARS "linears"
#define FP8_RUNJSON_LIN_NAME "name"
#define FP8_RUNJSON_LIN_TOKENS "tokens"
#define FP8_RUNJSON_LIN_IN "in"
#define FP8_RUNJSON_LIN_OUT "out"
#define FP8_RUNJSON_LIN_DTYPES "dtypes"

/** Why a tensor of the replay has no row in steps.csv or summary.csv (docs/semantics.md,
 *  "Tensors that never ran"). */
typedef enum {
  FP8_LEFT_KEPT = 0,     /**< it has rows */
  FP8_LEFT_NEVER_RAN,    /**< no snapshot at a selected step, amax 0 at every step of the replay */
  FP8_LEFT_NO_SNAPSHOT,  /**< a non-zero amax in amax.csv, but no snapshot at a selected step */
  FP8_LEFT_NO_RECIPE,    /**< no configuration applies to it (the sections' tensors keys) */
  FP8_LEFT_COUNT
} fp8_left_reason;
/** run.json's key for the list of each reason's tensors ([FP8_LEFT_KEPT] is NULL):
 *  FP8_RUNJSON_LEFT_*. */
extern const char *const fp8_left_keys[FP8_LEFT_COUNT];

/** A section or [analysis] key of the experiment that a run without snapshot rows (a trace of
 *  amaxes alone: amax.csv without snapshots, TransformerEngine's logs) could not serve: it
 *  needs the tensors' values or shapes (docs/semantics.md, "What a trace of amaxes alone
 *  cannot serve"). run.json's unserved[] entries; fp8lab run names each on stderr, the report
 *  in its first paragraph. */
typedef struct {
  char section[80];          /**< "recipe.<name>" or "analysis" (the header without brackets) */
  char key[32];              /**< the [analysis] key; "" for a [recipe.*] section */
  char label[64];            /**< a [recipe.*] section's recipe label; "" for a key */
  char kind[16];             /**< a [recipe.*] section's kind; "" for a key */
  long long configurations;  /**< a [recipe.*] section's configurations; 0 for a key */
  int line;                  /**< the section header's line, or the key's */
  char why[400];             /**< what it needs that the trace does not have, and what is missing */
} fp8_unserved;
/** The files a run reads, as run.json's inputs[] lists them (fp8_run_inputs_list), and the
 *  SHA-256 of each once someone has hashed it. */
typedef struct {
  size_t n;
  char **path;                    /**< as the run names them (under the trace folder's path) */
  char (*sha256)[FP8_SHA256_HEX]; /**< [n]: lowercase hex; "" while not hashed */
  fp8_file_id *id;                /**< [n]: each file as the listing found it (the hash must
                                       be of that file: fp8_sha256_file's want) */
} fp8_run_inputs;

/** The inputs of a run over trace tr (opened from trace_dir) with experiment ex, in order: the
 *  experiment file; the snapshots, amax.csv and tokens.csv (a multi-rank trace's rank by rank);
 *  then the trace folder's te_log.json and te_overflows.csv where they exist (issue 41: the
 *  report reads te_overflows.csv, and must read what the run used). in is zeroed first; every
 *  sha256 "". FP8_OK or FP8_ENOMEM; free with fp8_run_inputs_free either way. */
int fp8_run_inputs_list(const fp8_experiment *ex, const fp8_trace *tr, const char *trace_dir,
                        fp8_run_inputs *in);
/** Hashes every input of in whose sha256 is still "" (fp8_sha256_file): FP8_OK, or the first
 *  failure's status with its message ("<path>: cannot read: ...") in err. */
int fp8_run_inputs_hash(fp8_run_inputs *in, char *err, size_t errlen);
void fp8_run_inputs_free(fp8_run_inputs *in);

/** What run.json records of a run: the runner fills it at the end of the replay. */
typedef struct {
  const fp8_experiment *ex;
  const fp8_trace *trace;
  const char *trace_dir;       /**< the trace folder the run opened (a synth trace's too) */
  const char *started_utc;     /**< "YYYY-mm-ddTHH:MM:SSZ": the first process's start */
  int threads;
  long long steps, tensors, configs, rows, gemm_rows, stream_rows, mismatches;
  double wall_s;
  const fp8_outputs *outputs;  /**< the runner's files (the report adds its own later) */
  /** [trace] steps: the trace's steps it leaves out before its first selected step, and
   *  between its first and last selected steps (fed to the history with warm_history) */
  long long steps_before, steps_skipped;
  /** the replay's tensors and why each has no rows (fp8_left_reason; NULL: all have) */
  size_t ntensors;
  const char *const *tensor_names;
  const unsigned char *left;
  /** MPI: the processes (> 1: processes and their snapshot bytes listed) and how the amaxes
   *  were exchanged (NULL: no split, no key) */
  int processes;
  const uint64_t *process_bytes;
  const char *amax_exchange;
  /** the engine: its name, the --device asked for, the GPU module, its self-check, and the
   *  configurations ([configs]) whose casts or GEMMs the CPU engine ran instead */
  const char *engine, *device, *module;
  int self_check_ran, self_check_passed;
  long long self_check_values;
  const char *self_check_note; /**< NULL or "": none */
  const unsigned char *cpu_quantize, *cpu_gemm;
  /** the sections and keys the run could not serve (none: every one was; written as []) */
  size_t nunserved;
  const fp8_unserved *unserved;
  /** the inputs, hashed (the runner hashes them beside the replay); NULL: the writer lists
   *  and hashes them itself */
  const fp8_run_inputs *inputs;
} fp8_run_json_desc;

/** Writes <dir>/run.json from d (2-space indent, keys in insertion order, a final newline),
 *  atomically (outfile.h); inputs[] is d->inputs, each with its bytes and sha256 (an input
 *  that cannot be hashed is an error). model_shape is computed from the trace's first snapshot (rank 0's).
 *  FP8_OK or a status with "run.json: ..." in err. */
int fp8_run_json_write(const char *dir, const fp8_run_json_desc *d, char *err, size_t errlen);

/** What the report takes from run.json, each key checked (fp8_run_json_read). */
typedef struct {
  char name[256];          /**< experiment.name: a file name (no '/', not . or ..) */
  double overflow_budget;  /**< experiment.overflow_budget, in 0..1 */
  double step_budget;      /**< experiment.step_budget, in 0..1 */
  double flush_budget;     /**< experiment.flush_budget, in 0..1; NaN when absent (off) */
  int routers_fp8;         /**< experiment.routers: 1 "fp8", 0 "bf16" or absent (the default) */
  double fp4_gemm_ratio;   /**< experiment.fp4_gemm_ratio, >= 1; 4 when absent */
  /** experiment.fp4_reference: the FP8 configuration gemm.csv's ratio columns divide by
   *  (issue 42); has_fp4_reference 0 when absent (a run without FP4, or before the key) */
  int has_fp4_reference;
  fp8_config_key fp4_reference; /**< its recipe points to fp4_reference_recipe */
  char fp4_reference_recipe[64];
  int64_t warmup_steps;    /**< experiment.warmup_steps; -1: absent (each tensor's own) */
  /** the tensors without rows per fp8_left_reason ([0] unused; none from a run.json written
   *  before the lists) */
  char **left[FP8_LEFT_COUNT];
  size_t nleft[FP8_LEFT_COUNT];
  fp8_tl_shape model_shape; /**< history_len 1024 */
  int has_model_shape;      /**< 0: none (no Linear layers, or a run.json written before it) */
  char *trace_path;         /**< trace.path: as the experiment resolved it (relative to the
                                 folder the run was started in, when the file's path was) */
  char *trace_abs_path;     /**< trace.abs_path: the trace folder's absolute path at run time
                                 (NULL: synth, or a run.json written before it) */
  char *trace_steps;        /**< trace.steps: [trace] steps as a-b:stride (NULL: every step) */
  char **trace_tensors;     /**< trace.tensors: [trace] tensors' globs (none: every tensor) */
  size_t ntrace_tensors;
  int reduce_amax;          /**< trace.reduce_amax (multi-rank traces only; 0 otherwise) */
  int64_t reduce_group;     /**< trace.reduce_group, with reduce_amax */
  int64_t reduce_stride;    /**< trace.reduce_stride (strided groups); 0: absent (contiguous) */
  int warm_history;         /**< trace.warm_history; 0 when absent (a run before it was cold) */
  int64_t steps_before, steps_skipped; /**< trace.steps_before / steps_skipped; -1: absent */
  int has_te_log;           /**< trace.te_log: the trace came from TransformerEngine's debug
                                 logs (fp8lab import-te; issue 28); then: */
  int64_t te_interval, te_zero, te_coarse; /**< its interval, zero_values, coarse_values */
  size_t nte_tensors;       /**< trace.te_log.tensor_intervals (0: absent, a run.json or a
                                 te_log.json before them: every tensor has te_interval) */
  char **te_tensor_names;   /**<   the tensors' names (no rank_<r>/ prefix), sorted (strcmp), */
  int64_t *te_tensor_intervals; /**< and each one's cur_amax interval (0: one iteration) */
  int gemm;                 /**< experiment.gemm (0/1); -1: absent (a run.json before it) */
  int64_t gemm_max_tokens;  /**< experiment.gemm_max_tokens; -1: absent */
  int gemm_sampled;         /**< experiment.gemm_error: 1 sampled, 0 exact (also when absent:
                                 a run.json before it computed exact errors) */
  int64_t gemm_sample;      /**< experiment.gemm_sample (sampled); 0: absent */
  int64_t gemm_seed;        /**< experiment.gemm_seed (sampled) */
  int tensor_core;          /**< experiment.tensor_core (an fp8_tc_model; absent, as in a
                                 run.json of before issue 46: exact) */
  int64_t cost_tokens;      /**< experiment.cost_tokens ([analysis]); 0: absent */
  /** unserved: the sections and keys the run could not serve (none also from a run.json
   *  written before the key), each string checked to fit and be one line */
  size_t nunserved;
  fp8_unserved *unserved;
  char *synth_preset;       /**< trace.synth_preset; NULL for a trace folder */
  int64_t synth_steps, synth_seed; /**< with synth_preset */
  /** experiment.configurations that carry their settings (a run.json written before them:
   *  none): recipe label, kind name and the "key = value" lines, each line checked
   *  ([a-z0-9_]+ = [A-Za-z0-9_.+-]+) so that an advice file can write them back */
  size_t nsettings;
  struct fp8_run_settings {
    char recipe[64], kind[16];
    char *lines;
  } *settings;
  /** inputs[]: the files the run read, each path as run.json has it, its bytes (-1: absent)
   *  and its sha256 ("": absent); inputs_hashed: some entry has a sha256 (a run.json written
   *  before issue 41 has none, and lists no file of the trace folder's TE import) */
  size_t ninputs;
  struct fp8_run_input {
    char *path;
    int64_t bytes;
    char sha256[FP8_SHA256_HEX];
  } *inputs;
  int inputs_hashed;
  /** outputs: the files the run (and an earlier report) wrote, those that pass
   *  fp8_output_name_ok (others are passed over, never removed) */
  fp8_outputs outputs;
  void *doc_;               /**< the document as read, for fp8_run_json_set_report_outputs */
} fp8_run_record;

/** Reads <dir>/run.json into rec (zeroed first), every key it holds checked: FP8_OK; FP8_EIO
 *  when it cannot be opened ("<path>: cannot open: ..."); FP8_EFORMAT ("<path>:<line>: not
 *  JSON: ...", or "<path>: <key>: <what was expected>"); FP8_ENOMEM. On failure rec holds what
 *  was read so far: free it with fp8_run_json_free either way. */
int fp8_run_json_read(const char *dir, fp8_run_record *rec, char *err, size_t errlen);
/** The interval at which TE logged the cur_amax of tensor (a trace name, `rank_<r>/` before it
 *  in a multi-rank trace) of a run whose trace came from TE's debug logs: its own from
 *  trace.te_log.tensor_intervals, else (absent, or a tensor not listed) te_interval. 0: one
 *  iteration logged. */
int64_t fp8_run_te_tensor_interval(const fp8_run_record *rec, const char *tensor);
/** The entry of rec's inputs[] whose path is path (byte for byte), or NULL. */
const struct fp8_run_input *fp8_run_json_input(const fp8_run_record *rec, const char *path);
/** Frees what fp8_run_json_read allocated (safe on a zeroed record, and twice). */
void fp8_run_json_free(fp8_run_record *rec);
/** The outputs listed in <dir>/run.json, leniently (an earlier run's, which --force replaces:
 *  a missing or unreadable run.json, or one without the key, adds nothing): appended to o,
 *  those that pass fp8_output_name_ok. FP8_OK or FP8_ENOMEM. */
int fp8_run_json_read_outputs(const char *dir, fp8_outputs *o);
/** experiment.name of <dir>/run.json, leniently (a report that was killed: its notebook's name,
 *  for the run with --force that replaces it): 1 with the name in name (a string that fits),
 *  0 when there is none. */
int fp8_run_json_read_name(const char *dir, char *name, size_t len);
/** Puts mine (the files a report wrote) into the outputs list of the run.json rec was read
 *  from, in place of an earlier report's entries (fp8_output_of_report), keeping the runner's in
 *  their order; writes <dir>/run.json again (the rest of the document as it was read) and
 *  removes the earlier report's files that mine does not hold. FP8_OK or a status with a
 *  message in err. */
int fp8_run_json_set_report_outputs(const fp8_run_record *rec, const char *dir,
                                    const fp8_outputs *mine, char *err, size_t errlen);

#endif
