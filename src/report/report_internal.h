/* report_internal.h: the state of one `fp8lab report` and the steps that fill it (not public).
 * report.c runs them in order: the load step (report_load.c: every input read and checked by
 * the readers of src/results, then the statistics and the choice of the story, report_select.c:
 * configurations, the reference one, the worst event), the plots (report_plots.c) and the
 * document text (report_text.c), which only read what the load step put in rep_t.
 *
 * A "configuration" here is (recipe label, kind, history_len, margin, amax_compute): with
 * format = hybrid one configuration spans E4M3 and E5M2 tensors, and the aggregates over
 * tensors (heatmaps, bars) add them up. A mixed recipe (sections that share a label, issue
 * 14: one group per tensor, not all with the same kind and parameters) is one configuration,
 * its recipe label (cfg_t.mixed): never the reference, the current one or a timeline. */
#ifndef FP8LAB_REPORT_REPORT_INTERNAL_H
#define FP8LAB_REPORT_REPORT_INTERNAL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "analysis.h"
#include "config_key.h"
#include "doc.h"
#include "report.h"   /* fp8_report_options */
#include "run_json.h" /* fp8_run_record, fp8_left_reason, fp8_left_keys */
#include "outfile.h"  /* fp8_outfile */
#include "tables.h"   /* fp8_hist_table, fp8_gemm_table */

#define MAX_SHOWN 4
#define MAX_PLOTS 64
#define MAX_TIMELINES 64 /* amax timelines at most */
#define MAX_PLOT_PROCS 8

typedef struct {
  fp8_config_key key; /* its format unused: a configuration spans the formats of its section */
  int mixed;         /* a mixed recipe: its groups' kind and parameters differ per tensor */
  char label[160];
  /* provably identical configurations (same scales at every step): most_recent ignores
   * history_len, and history 1 with max is most_recent. same_as: the first of its class
   * (itself when distinct); dlabel: the class's label as the tables show it */
  size_t same_as;
  char dlabel[200];
  /* aggregates over all tensors */
  int64_t overflow, finite, clipped; /* non-warm-up snapshot rows */
  double snr_median; /* median over tensors of their median SNR */
  /* gemm.csv: rel_error per GEMM (fprop, dgrad, wgrad) over layers and steps */
  double *gemm[3];
  size_t ngemm[3], capgemm[3];
  double gemm_median[3];
  /* the medians of the rows' interval ends (sampled; NaN: exact rows), for ties (issue 42) */
  double gemm_lo_median[3], gemm_hi_median[3];
} cfg_t;

typedef struct {
  char file[320];  /* under plots/ */
  char alt[256];
  char caption[1024];
} plot_t;

/* The charts a report drew and who draws which (rep_draw_plots): chart number i is drawn here
 * when mine[i % nprocs]; rank 0 is the calling process, which forks the others (pid, fd: their
 * pids and the read ends of their status pipes; status_fd: a child's write end). The only
 * state the drawing changes: the loaded run is const to it. */
typedef struct {
  plot_t plots[MAX_PLOTS];
  size_t nplots;
  int nprocs, rank, status_fd;
  unsigned char mine[MAX_PLOT_PROCS];
  size_t chart_i;
  int pid[MAX_PLOT_PROCS], fd[MAX_PLOT_PROCS];
  char pngtext_version[64];
} rep_charts;

typedef struct {
  const char *outdir;
  /* ---- loaded (rep_load): the inputs and what is computed from them, read-only afterwards */
  /* run.json: the experiment's name and budgets, [analysis] warmup_steps (-1: each tensor's
   * own), the tensors left out, model_shape (the cost table), the trace */
  fp8_run_record run;
  char trace[1024];     /* the trace as the header names it */
  double budget;        /* the value budget ([analysis] overflow_budget) */
  fp8_budgets budgets;  /* both budgets, as the recommendations apply them */
  fp8_steps_table tab;
  fp8_stream_table stream; /* stream.csv (have_stream 0: the run has none) */
  fp8_hist_table hist;  /* histograms.csv */
  int have_gemm;        /* gemm.csv gave the configurations GEMM errors */
  double gemm_halfwidth;/* sampled GEMM errors: the median of their intervals' half-width
                           relative to the estimate; NaN: exact errors */
  int have_stream;
  int stream_only; /* no snapshot rows: groups made from the stream's series (issue 28) */
  struct rep_te *te; /* the TE section's totals per configuration (report_te.c; NULL: none) */
  size_t nte;
  size_t te_overflow_rows;   /* its rows */
  fp8_analysis an;
  fp8_recommendations rec;
  int have_tab, have_an, have_rec;
  cfg_t *cfgs;
  size_t ncfg;
  size_t ndistinct;     /* classes of provably identical configurations */
  size_t *gcfg;         /* per group: its configuration */
  ptrdiff_t ref;        /* the reference delayed configuration (TE-like), -1 if none */
  ptrdiff_t cur;        /* the first current-scaling configuration, -1 if none */
  size_t shown[MAX_SHOWN];
  size_t nshown;        /* delayed configurations drawn on timelines */
  const fp8_stream_series **series; /* per group: its stream.csv series, or NULL (no stream,
                                       or not a delayed group) */
  struct ov_s *ov;      /* the groups of the reference configuration whose largest element
                           overflowed at some step, worst first (nov of them) */
  size_t nov;
  /* the event the report centres on: the worst overflow under the reference configuration */
  ptrdiff_t spike_group;
  int64_t spike_step;
  size_t spike_row;
  /* ---- written while the report is put out */
  int wrote_advice;     /* advice.ini written (rep_write_advice) */
  int wrote_te_code;    /* te_recipe.py written (rep_write_te_code) */
  int wrote_frameworks; /* bit 1: megatron_args.txt, 2: megatron_precision.yaml, 4:
                           torchao_config.py (rep_write_frameworks) */
  int wrote_fp4_advice; /* advice_fp4.ini written (rep_write_fp4_advice) */
  int wrote_plan;       /* bit 1: bf16_plan.csv, 2: bf16_plan.ini (rep_write_bf16_plan), 512
                           and 1024: with the FP8 and the FP4 plan's labels; 4, 8:
                           megatron_bf16_plan_fp8.txt, .yaml; 16, 32: megatron_bf16_plan_fp4.txt,
                           .yaml; 64: torchao_bf16_plan.py, 128: te_bf16_plan.py
                           (rep_write_bf16_plan_frameworks) */
  struct rep_fp4 *fp4;  /* the FP4 section's per-layer GEMM errors (report_fp4.c; NULL: none) */
  struct rep_plan *plans; /* the BF16 demotion plans, [REP_NPLANS] (report_bf16_plan.c; NULL:
                             none) */
  struct rep_gemm_mix *gmix; /* mixed recipes' GEMMs TE has no kernel for (report_gemm_mix.c) */
  struct rep_tc *tc;         /* tensor_core: what accumulation costs (report_tensor_core.c) */
  size_t ngmix;
  /* Mixture-of-Experts (report_moe.c): the router tensors, and per group 1 when it is left out
   * of the advice (a router under [analysis] routers = bf16; NULL: none; r->an.left_out) */
  size_t nrouter_tensors;
  unsigned char *router_group;
  fp8_experts_table experts_csv; /* experts.csv (have_experts 0: the trace had no tokens.csv) */
  int have_experts;
  struct rep_expert_s *experts; /* the reference's expert tensors (rep_moe_load) */
  size_t nexperts;
  rep_charts charts;    /* the charts drawn (rep_draw_plots), which the text lists */
} rep_t;

/* A group of the reference configuration whose largest element overflowed at some step (of
 * the stream when the run has one, else of the snapshot rows). */
typedef struct ov_s {
  size_t g;
  int64_t ovf_steps, clip_steps; /* steps whose largest element overflowed / clipped */
  int64_t clipped;               /* clipped values at the snapshot steps */
  double overshoot;              /* the largest overshoot (binades) */
} ov_t;

/* ------------------------------------------------------------------ report_load.c */

/* The load step: run.json, steps.csv, histograms.csv, stream.csv and gemm.csv read and checked
 * (the readers of src/results: FP8_EIO, FP8_EFORMAT "<file>:<line>: <what>"), the budgets (opt's,
 * else run.json's, else the defaults), the statistics and recommendations, the configurations
 * and the story (report_select.c) and the GEMM errors per configuration. Free with rep_free
 * whatever it returns. */
int rep_load(rep_t *r, const fp8_report_options *opt, char *err, size_t errlen);
/* gemm.csv's rows (t, read from path) into the configurations' rel_error lists, sorted, and
 * their medians; *have = 1 when a row was added. FP8_EFORMAT "<path>:<line>: recipe <label>
 * (<kind>) is not a configuration of steps.csv" for a row of no configuration. */
int rep_add_gemm(rep_t *r, const fp8_gemm_table *t, const char *path, int *have, char *err,
                 size_t errlen);
/* Frees everything rep_load allocated. */
void rep_free(rep_t *r);

/* ------------------------------------------------------------------ report_select.c */

/* The configurations (experiment order) with their aggregates, the reference and current
 * configurations, the ones shown on timelines, each group's stream series and the overflowing
 * groups (r->series, r->ov). FP8_OK or FP8_ENOMEM (no message). */
int rep_build_configs(rep_t *r);
/* The tensors of the amax timelines (at most MAX_TIMELINES) into out, in drawing order: the
 * spike tensor first (rep_find_spike), the worst event's (the largest overshoot of a clipped
 * cast, report_worst.c) when another event, then the worst overflowing ones (r->ov), each for a
 * distinct event (a tensor whose largest overshoot falls on the step of one already taken, the
 * same spike seen through the next layer, is skipped), max_timelines in all. Their count. */
size_t rep_timeline_tensors(const rep_t *r, int max_timelines, const char **out);
/* A stream.npy's scales of the series read entry by entry read into the table
 * (fp8_stream_keep): the reference configuration's, and the shown configurations' of the
 * timelines' tensors (rep_timeline_tensors: after rep_find_spike); the others stay in the
 * file. FP8_OK, FP8_EIO, FP8_ENOMEM (with a message). */
int rep_keep_series(rep_t *r, int max_timelines, char *err, size_t errlen);
/* The amax timelines drawn (fp8_report_options.max_timelines; 6 when not given). */
static inline int rep_max_timelines(const fp8_report_options *opt) {
  return opt && opt->max_timelines > 0 ? opt->max_timelines : 6;
}
/* 1 when configuration c is the one of key (a mixed recipe: by its label alone; else every
 * field but the format). */
int rep_cfg_matches(const cfg_t *c, const fp8_config_key *key);
/* The group of tensor `tensor` under configuration c, or -1. */
ptrdiff_t rep_group_of(const rep_t *r, const char *tensor, size_t c);
/* The row of group g at step s, or NULL (also for g < 0). */
const fp8_step_row *rep_row_at(const rep_t *r, ptrdiff_t g, int64_t step);
/* The worst event under the reference configuration: the row with the most overflow (the most
 * underflow when none overflowed). */
void rep_find_spike(rep_t *r);
/* The sentence on the history a [trace] steps selection was replayed with (run.json's
 * trace.warm_history, steps_before, steps_skipped; docs/semantics.md "Trace replay"), into buf;
 * "" when the selection leaves out no earlier step of the trace, or the run has no delayed
 * configuration (no history). */
void rep_history_sentence(const rep_t *r, char *buf, size_t len);

/* ------------------------------------------------------------------ report_plots.c */

/* Draws every plot under <outdir>/plots (which exists): up to max_timelines amax timelines
 * (the spike tensor's, then the worst overflowing ones), the dynamic range at the spike, the
 * SNR over steps, the heatmaps, the per-configuration bars and, with gemm.csv, the GEMM
 * errors. Each drawn plot is listed in drawn->plots. procs processes draw them (PLplot has one
 * current stream per process, so a second core needs a second process): procs - 1 forked
 * children draw every procs-th chart each (chart i by process i % procs) and this process the
 * rest; every process computes the same charts and list (only the drawing is shared), and this
 * one collects the children's status. It forks only while this process runs one thread (no
 * text drawn yet: pango's threads would not survive a fork), else draws every chart itself.
 * procs 1: no fork; <= 0: the online CPUs, at most 4. The files are the same whatever procs. */
int rep_draw_plots(const rep_t *r, rep_charts *drawn, int max_timelines, int procs, char *err,
                   size_t errlen);

/* ------------------------------------------------------------------ report_findings.c */

/* The Findings section: the reference configuration over every step of the stream, the
 * warm-up, current scaling's rounding case, the worst event, the tensors and roles hit, the
 * distribution of overshoot, the scale lag. Every number it quotes is recomputed from the CSV
 * files by tests/report/test_findings.py. */
void rep_add_findings(const rep_t *r, fp8_doc *d);
/* report_worst.c: the worst event (docs/semantics.md): the cast whose clipped largest element
 * overshot the most over every step (micro-batch) of the replay, with what its snapshot
 * measured if it has one; then the snapshot step that lost the most when it is another event
 * (the spike), the tensors clipped at its step and the staleness after it. 1 when there was a
 * clipped cast. */
int rep_add_worst(const rep_t *r, fp8_doc *d);
/* report_te.c: "Held against TransformerEngine": the replayed delayed scales against TE's own
 * (stream.csv's te_scale), per delayed configuration; nothing without any te_scale */
/* The TE section's totals, once (a stream.npy's scales are read back from the file for them;
 * the report and the notebook both show them): r->te, r->nte. */
int rep_te_totals(rep_t *r, char *err, size_t errlen);
void rep_add_te_check(const rep_t *r, fp8_doc *d);
/* A trace from TE's debug log (run.json trace.te_log): how its tensors were logged, for "The
 * amaxes come from ..., logged <logged>: <spans>." ("every 5 iterations", or each group of
 * tensors with its interval and roles where the tensors' intervals differ), and what the
 * replay's steps and history are then (history_len L spans L x k iterations per interval k). */
void rep_te_interval_words(const rep_t *r, char *logged, size_t nl, char *spans, size_t ns);
/* report_cost.c: "Cost per step (model)": the timeline model (timeline.h) on run.json's
 * model_shape, every mode on an H200; nothing without a model_shape. */
void rep_add_cost(const rep_t *r, fp8_doc *d);

/* ------------------------------------------------------------------ report_moe.c */

/* The Mixture-of-Experts routers among the tensors (fp8_router_of): counted, and under
 * [analysis] routers = bf16 (the default) left out of the recommendations' role and model
 * scopes (r->router_group, r->an.left_out). Before the recommendations. FP8_OK, FP8_ENOMEM. */
int rep_moe_routers(rep_t *r);
/* An expert tensor of the reference configuration (rep_moe_experts). */
#define REP_EXPERT_GROUP_CAP 256
typedef struct rep_expert_s {
  size_t g;            /* its group under the reference configuration */
  int32_t expert;
  char group[REP_EXPERT_GROUP_CAP]; /* its expert group: the name, the index as '*' */
  int64_t total, ran;  /* stream steps (or snapshot rows); with amax > 0 */
  int64_t ran_nw, clip;  /* non-warm-up steps it ran; of those, the clipped */
  int64_t gap_steps, gap_clip; /* non-warm-up steps it ran right after a step it did not */
  double tokens;       /* experts.csv: its GEMM's tokens per step it ran; NaN: no row, or none */
  double overshoot;    /* the largest (non-warm-up), -inf if none */
} rep_expert;
/* The expert tensors of the reference configuration, by group then expert, into r->experts
 * (r->nexperts; none: 0), once, after the reference's scales are kept (rep_keep_series): the
 * section, the contents and the charts read them. FP8_OK, FP8_ENOMEM. */
int rep_moe_load(rep_t *r);
/* The Mixture-of-Experts section (nothing without an expert tensor under the reference). */
void rep_add_moe(const rep_t *r, fp8_doc *d);

/* ------------------------------------------------------------------ report_outputs.c */

/* Puts the files this report wrote (the analysis CSVs, r->plots, report.md, the notebook
 * notebooks_export/<nbname>) into <outdir>/run.json's outputs in place of an earlier report's,
 * and removes the earlier report's files it did not write again; the runner's entries stay.
 * Without a readable run.json: nothing (FP8_OK). */
int rep_record_outputs(const rep_t *r, const char *nbname, char *err, size_t errlen);

/* ------------------------------------------------------------------ report_answer.c */

/* The first section: the one TE recipe line (the model-scope recommendation), the tensors it
 * does not fit and what to do for them, its sensitivity to the budgets, what was not tried. */
void rep_add_answer(const rep_t *r, fp8_doc *d);
/* <outdir>/advice.ini: the answer as one experiment (the whole-model setting, current scaling
 * or the fitting margin for the tensors it does not fit, as one recipe label; the whole-model
 * setting alone beside it), to replay and confirm the advice. Nothing when there is no answer
 * or it fits every tensor. FP8_OK, or the write's status with a message. */
int rep_write_advice(rep_t *r, char *err, size_t errlen);
/* What to do for misfit tensor `name` of the model setting x: a margin (>= 0) on x's line,
 * REP_REMEDY_CURRENT (current scaling for its module) or REP_REMEDY_BF16 (its module kept in
 * BF16: current scaling misses the flush budget and the sweep has a bf16 configuration). */
#define REP_REMEDY_CURRENT (-1)
#define REP_REMEDY_BF16 (-2)
int32_t rep_remedy(const rep_t *r, const fp8_recommendation *x, const char *name);
/* The length of tensor's module name: the name without its last ".<role>" part. */
size_t rep_module_len(const char *tensor);
/* The model-scope recommendation (NULL when there is none) and TE's Format of its setting
 * ("HYBRID", "E4M3" or "E5M2"). */
const fp8_recommendation *rep_model_rec(const rep_t *r);
const char *rep_te_format(const rep_t *r, const fp8_recommendation *x);
/* fp8lab's format name of x's setting ("hybrid", "e4m3", "e5m2"), as advice.ini writes it. */
const char *rep_setting_format(const rep_t *r, const fp8_recommendation *x);
/* te_recipe.py (report_te_code.c): the advice.ini decision as TransformerEngine code, per
 * module; written exactly when advice.ini is (r->wrote_te_code). */
int rep_write_te_code(rep_t *r, char *err, size_t errlen);
/* te_recipe.py's COVERED (the trace's modules; -1: out of memory) and its code after the
 * constants (te_recipe_apply.py: apply(), model_region(), the name resolver), which expect
 * MODEL_RECIPE, MODULES and TENSORS before them: for te_bf16_plan.py too. */
int rep_put_te_covered(FILE *fp, const rep_t *r);
/* A tensor name as an experiment's `tensors` glob that matches it alone (report_advice_forms.c;
 * advice.ini, bf16_plan.ini): fnmatch's * ? [ and a comment's # bracketed, ';' as '?'. */
void rep_put_tensor_glob(FILE *fp, const char *s);
void rep_put_te_footer(FILE *fp);

/* The modules a framework applies a recipe to (report_advice_forms.c), for te_recipe.py and the
 * framework files (report_frameworks.c): per module of x's misfits (and of the routers kept in
 * BF16) the strongest of its tensors' fixes (rep_remedy: BF16, current scaling, the largest
 * margin). A module is its GEMM's name without the role, an expert GEMM's its GroupedLinear or
 * experts module (rep_te_module_len), without a multi-rank trace's rank_<r>/ (rep_strip_rank).
 * calloc'ed, *n entries; NULL: out of memory. */
typedef struct {
  const char *name; /* into a misfit's tensor name, without its rank_<r>/ prefix */
  size_t len;
  int32_t rem;      /* rep_remedy's, the strongest over the module's advised tensors */
  int router;       /* a Mixture-of-Experts router kept in BF16 ([analysis] routers = bf16) */
} rep_te_mod;
rep_te_mod *rep_te_modules(const rep_t *r, const fp8_recommendation *x, size_t *n);
/* 1 when fix a (rep_remedy's) is stronger than b: BF16, then current scaling, then the larger
 * margin (each fits the tensors a weaker one fits). */
int rep_fix_stronger(int32_t a, int32_t b);
/* The advice as a form of te_recipe.py applies it (report_advice_forms.c), per tensor of the run
 * in its order: per_tensor_form 1, CustomRecipe's factory (TE 2.16 and later); 0, a recipe per
 * module. set: a margin (delayed scaling on the model setting's line), REP_REMEDY_CURRENT,
 * REP_REMEDY_BF16, or REP_SET_UNNAMED (current scaling in E4M3: the factory's slots without a
 * name, output and grad_input). malloc'ed, *n entries; NULL: out of memory. */
#define REP_SET_UNNAMED (-3)
typedef struct {
  const char *tensor; /* the trace's name (a run's stats own it) */
  int32_t set;
} rep_tset;
rep_tset *rep_advice_sets(const rep_t *r, const fp8_recommendation *x, int per_tensor_form,
                          size_t *n);
size_t rep_te_module_len(const char *t);
/* s[0..n) as a double-quoted Python (or YAML) string: backslash and quote escaped. */
void rep_put_pystr(FILE *fp, const char *s, size_t n);
const char *rep_strip_rank(const char *t);

/* megatron_args.txt, megatron_precision.yaml (with per-module fixes) and torchao_config.py
 * (report_frameworks.c): the model answer as Megatron-LM arguments and torchao code, written
 * when the answer is a configuration of the run; r->wrote_frameworks. */
int rep_write_frameworks(rep_t *r, char *err, size_t errlen);

/* The budgets' resolution (docs/semantics.md): a sentence per budget below 1/N, N the most
 * casts (values) a tensor's rate counts, saying that it allows none at all and what 1/N is;
 * "" when both resolve. */
void rep_budget_resolution(const rep_t *r, char *buf, size_t n);

/* The [trace] and [analysis] sections of an advice file: this run's. */
void rep_put_trace(FILE *fp, const rep_t *r);
void rep_put_analysis(FILE *fp, const rep_t *r);

/* ------------------------------------------------------------------ report_fp4.c */

/* The FP4 section (issue 29), for a run with an FP4 configuration: gemm.csv's per-layer
 * medians, the criterion's FP8 reference, the advised NVFP4 configuration and the fallback
 * (rep_fp4_prepare, from rep_load; nothing without an FP4 configuration or GEMM rows); the
 * section (rep_add_fp4); advice_fp4.ini (rep_write_fp4_advice: nothing without an advised
 * NVFP4 configuration, a fallback, or run.json's settings). */
int rep_fp4_prepare(rep_t *r, const fp8_gemm_table *t, char *err, size_t errlen);
void rep_fp4_free(rep_t *r);
void rep_add_fp4(const rep_t *r, fp8_doc *d);
/* 1 when configurations a and b's GEMM errors (the mean of the three medians) are tied within
 * their intervals: [mean of the median rel_error_lo, mean of the median rel_error_hi] overlap;
 * rows without intervals (exact): equal means (issue 42). */
int rep_gemm_tied(const cfg_t *a, const cfg_t *b);
/* The FP4 section's statement on clipping for the recipes_overflow chart's caption: NVFP4's
 * scale-rounding overflow (empty without an NVFP4 configuration). */
void rep_fp4_overflow_caption(const rep_t *r, char *buf, size_t len);
int rep_write_fp4_advice(rep_t *r, char *err, size_t errlen);

/* ------------------------------------------------------------------ report_bf16_plan.c */

/* The BF16 demotion plans (issue 45; docs/semantics.md "Which layers to keep in BF16"): for the
 * FP8 answer and for the advised FP4 configuration, the layers to keep out of FP8 (FP4), one
 * at a time, costliest first, until the rest meets the budgets (holds). A layer is a module as
 * TransformerEngine applies a recipe to it: rep_te_module_len of a tensor name without its
 * rank_<r>/ prefix (the experts of a GroupedLinear are one layer).
 * - REP_PLAN_FP8, under the model setting (the answer's DelayedScaling, no per-tensor fix): the
 *   layers holding its misfits, ordered by the clipped steps of the layer's tensors under the
 *   setting (stream_clipped_steps, else steps_with_clipped; warm-up left out), then their
 *   clipped values, then the layer's GEMM-error ratio against the FP8 reference (ratio), all
 *   descending; then the name. What is left after step k: the misfits outside the first k
 *   layers (each tensor's fit is its own: no other tensor's rows change when a layer leaves
 *   FP8, amax reduction included).
 * - REP_PLAN_FP4, under the advised NVFP4 configuration (rep_fp4's advised): the layers that do
 *   not hold (fail, or too close to call), by ratio descending (the largest lower-median
 *   ratio of their GEMMs, the FP4 verdict's), then the name. Left after step k: the others.
 * The TE form of a plan (a recipe per module, the first k modules None) can be built from
 * steps[].name/len in order and cfg (REP_PLAN_FP8: x, the DelayedScaling; REP_PLAN_FP4: the
 * configuration's settings, rep_settings_of). */
enum { REP_PLAN_FP8, REP_PLAN_FP4, REP_NPLANS };

typedef struct {
  const char *name;   /* the layer: name[0..len), a module name without a rank prefix */
  size_t len;
  int64_t clipped_steps, clipped_values; /* its tensors' under the plan's configuration */
  double ratio;       /* its largest lower-median GEMM-error ratio against the FP8 reference
                         (NaN: no GEMM rows) */
  int fails;          /* REP_PLAN_FP4: 1 fails, 0 too close to call; REP_PLAN_FP8: 1 */
  double flops;       /* its GEMM FLOPs per step (run.json's model_shape: 3 GEMMs of
                         2 tokens in out per Linear; 0: none of its Linears there; NaN: no
                         model_shape) */
  double share;       /* the first k layers' FLOPs over the model's (NaN: no model_shape) */
  size_t left;        /* misfits (FP8) or layers not holding (FP4) left after this step */
  int mg_start, mg_end; /* the first k layers as Megatron-LM's first/last transformer layers
                           (whole blocks at the ends): the counts; -1: not so expressible */
} rep_plan_step;

typedef struct rep_plan {
  int have;           /* the plan exists (its configuration is one of the run) */
  size_t cfg;         /* the configuration it is under (r->cfgs) */
  ptrdiff_t ref;      /* the FP8 reference of the ratio (r->cfgs; -1: none) */
  const fp8_recommendation *x; /* REP_PLAN_FP8: the model-scope recommendation */
  size_t nsteps;      /* steps 1..nsteps: steps[k - 1] is the layer step k keeps in BF16 */
  rep_plan_step *steps;
  size_t nmiss;       /* what misses before step 1: the misfit tensors (FP8, analysis order)
                         or the layers not holding (FP4, plan order) */
  char **miss;
  size_t *miss_step;  /* per entry, the step that keeps it in BF16 (1..nsteps) */
  size_t nnone;       /* REP_PLAN_FP4: layers without a ratio (no verdict; left out) */
  double total_flops; /* the model's GEMM FLOPs per step (NaN: no model_shape) */
  size_t stride;      /* bf16_plan.ini replays the prefixes k = 0, stride, 2 stride, ..., nsteps */
} rep_plan;

/* Both plans (r->plans), from rep_load after rep_fp4_prepare: gemm.csv's rows give the FP8
 * plan's ratios. FP8_OK or FP8_ENOMEM (with a message). */
int rep_bf16_plan_prepare(rep_t *r, const fp8_gemm_table *t, char *err, size_t errlen);
void rep_bf16_plan_free(rep_t *r);
/* Plan `which` (REP_PLAN_*), or NULL when the run has none. */
const rep_plan *rep_bf16_plan(const rep_t *r, int which);
/* 1 when step k (0..nsteps) of plan p is replayed by bf16_plan.ini (its label <fp8|fp4>_plan_<k>). */
int rep_bf16_plan_replayed(const rep_plan *p, size_t k);
/* bf16_plan.csv and bf16_plan.ini (r->wrote_plan); nothing without a plan. */
int rep_write_bf16_plan(rep_t *r, char *err, size_t errlen);
/* The section "Keeping layers in BF16" (report_bf16_plan_text.c; nothing without a plan). */
void rep_add_bf16_plan(const rep_t *r, fp8_doc *d);
/* The plans in Megatron-LM's and torchao's forms (report_frameworks_plan.c): r->wrote_plan. */
int rep_write_bf16_plan_frameworks(rep_t *r, char *err, size_t errlen);
/* The plans' files, in outputs.h's fp8_plan_outputs order (wrote_plan's bit 1 << i). */
enum { REP_PF_CSV, REP_PF_INI, REP_PF_MEGATRON_FP8, REP_PF_MEGATRON_FP8_YAML, REP_PF_MEGATRON_FP4,
       REP_PF_MEGATRON_FP4_YAML, REP_PF_TORCHAO, REP_PF_TE };
/* Opens plan file i (REP_PF_*) and writes its first bytes, fp8_plan_outputs[i].sig (what marks
 * an interrupted report's file as fp8lab's); its writer goes on from there. The commit sets
 * its bit in r->wrote_plan. */
int rep_plan_file_open(rep_t *r, int i, fp8_outfile *of, char *err, size_t errlen);
int rep_plan_file_commit(rep_t *r, int i, fp8_outfile *of, char *err, size_t errlen);
/* The "key = value" lines run.json recorded for configuration c (the section's, and for a
 * delayed configuration the lines of its history_len, margin and amax_compute), or NULL (a
 * run.json written before them). */
const char *rep_settings_of(const rep_t *r, size_t c);
/* A module name as an fnmatch glob that matches it alone (* ? [ as [*] [?] [[]), in double
 * quotes for a YAML file. */
void rep_put_glob(FILE *fp, const char *s, size_t n);
/* report_frameworks.c's pieces the plans' Megatron-LM files share: the format flag's value of
 * setting x ("e4m3" or "hybrid"); the lines of the whole-model recipe (the names' source, then
 * --fp8-format, --fp8-recipe and, for delayed scaling, its three parameters); one enabled glob
 * matcher of a per-module file (megatron_precision.yaml's form) giving module[0..len) the
 * configuration `config`. */
const char *rep_megatron_format(const rep_t *r, const fp8_recommendation *x);
void rep_put_megatron_recipe(FILE *fp, const rep_t *r, const fp8_recommendation *x);
void rep_put_yaml_matcher(FILE *fp, const char *key, const char *config, const char *module,
                          size_t len);
/* The rest of a per-module file's first comment line (after "<what>, as Megatron-LM's
 * per-module precision file"): its source, the matching rule (the global recipe in `args`),
 * the module paths' caveat, then "configs:" and its "bf16" configuration. */
void rep_put_megatron_yaml_head(FILE *fp, const char *args);
/* ------------------------------------------------------------------ report_gemm_mix.c */

/* The GEMMs of the mixed recipes whose two operands' sections TransformerEngine has no GEMM
 * for (issue 45): found from gemm.csv's rows (rep_gemm_mix_load, from rep_load: FP8_OK or
 * FP8_ENOMEM), one paragraph per recipe in the GEMM error section (rep_gemm_mix_text). */
int rep_gemm_mix_load(rep_t *r, const fp8_gemm_table *t);
void rep_gemm_mix_text(const rep_t *r, fp8_doc *d);
void rep_gemm_mix_free(rep_t *r);

/* ------------------------------------------------------------------ report_tensor_core.c */

/* The GEMM error section's accumulation (issue 46): rep_tc_load (from rep_load, after
 * rep_add_gemm: FP8_OK or FP8_ENOMEM) collects gemm.csv's tensor-core columns when the run
 * set [analysis] tensor_core; rep_tc_intro names the accumulation (every report with GEMM
 * errors), rep_tc_text shows its cost. */
int rep_tc_load(rep_t *r, const fp8_gemm_table *t);
void rep_tc_intro(const rep_t *r, fp8_doc *d);
void rep_tc_text(const rep_t *r, fp8_doc *d);
void rep_tc_free(rep_t *r);

/* ------------------------------------------------------------------ report_text.c */

/* A rate as the tables show it: n/a, 0 or 3 significant digits; an SNR in dB: n/a, "exact" at
 * the cap, else one decimal. Inline here: report_text.c and report_findings.c both print them,
 * and the text calls the findings. */
static inline const char *rep_fmt_rate(double v, char *buf, size_t n) {
  if (isnan(v)) snprintf(buf, n, "n/a");
  else if (v == 0) snprintf(buf, n, "0");
  else snprintf(buf, n, "%.3g", v);
  return buf;
}
static inline const char *rep_fmt_db(double v, char *buf, size_t n) {
  if (isnan(v)) snprintf(buf, n, "n/a");
  else if (v >= FP8_ANALYSIS_SNR_CAP_DB) snprintf(buf, n, "exact");
  else snprintf(buf, n, "%.1f", v);
  return buf;
}

/* Micro-batches (issue 25 point 3): under gradient accumulation a step of stream.csv has several
 * micro-batches, each a cast and an update of TE's delayed history; the stream's counts (steps
 * that overflowed or clipped, the step budget's fraction, amax_history_len) are then over
 * micro-batches, and the text says so. rep_unit: "step(s)" or "micro-batch(es)". */
static inline int rep_micro(const rep_t *r) {
  return r->have_stream && r->stream.nmicro > r->stream.nsteps;
}
static inline const char *rep_unit(const rep_t *r, int plural) {
  return rep_micro(r) ? (plural ? "micro-batches" : "micro-batch") : (plural ? "steps" : "step");
}

/* The document; images are referenced as <img_prefix><file>, CSVs as <csv_prefix><file>.
 * NULL when out of memory. */
fp8_doc *rep_build_doc(const rep_t *r, const char *img_prefix, const char *csv_prefix);
/* report_notebook.c: the notebook's "Explore the data" cells (notebook only), appended to d;
 * csv_prefix is the run folder as seen from the notebook's folder. */
void rep_add_notebook(const rep_t *r, fp8_doc *d, const char *csv_prefix);

#endif
