/* report_internal.h: the state of one `fp8lab report` and the steps that fill it (not public).
 * report.c runs them in order: the readers of the run's other result files (report_read.c),
 * the choice of the story (report_select.c: configurations, the reference one, the worst
 * event), the plots (report_plots.c) and the document text (report_text.c).
 *
 * A "configuration" here is (recipe label, kind, history_len, margin, amax_compute): with
 * format = hybrid one configuration spans E4M3 and E5M2 tensors, and the aggregates over
 * tensors (heatmaps, bars) add them up. A mixed recipe (sections that share a label, issue
 * 14: one group per tensor, not all with the same kind and parameters) is one configuration,
 * its recipe label (cfg_t.mixed): never the reference, the current one or a timeline. */
#ifndef FP8LAB_REPORT_REPORT_INTERNAL_H
#define FP8LAB_REPORT_REPORT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "analysis.h"
#include "doc.h"
#include "runner.h" /* fp8_left_reason, fp8_left_keys */
#include "timeline.h"

#define MAX_SHOWN 4
#define MAX_PLOTS 64
#define MAX_PLOT_PROCS 8

typedef struct {
  const char *recipe;
  fp8_recipe_kind kind;
  int32_t h, m;
  fp8_amax_compute ac;
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
} cfg_t;

typedef struct {
  char file[320];  /* under plots/ */
  char alt[256];
  char caption[1024];
} plot_t;

typedef struct {
  const char *outdir;
  char name[256];
  char trace[1024];
  double budget;        /* the value budget ([analysis] overflow_budget) */
  fp8_budgets budgets;  /* both budgets, as the recommendations apply them */
  int64_t warmup_override; /* [analysis] warmup_steps from run.json, -1: each tensor's own */
  /* run.json's tensors without rows, per fp8_left_reason (runner.h; [0] unused): names owned
   * here (rep_free_run_json); none from a run.json written before the lists */
  char **left[FP8_LEFT_COUNT];
  size_t nleft[FP8_LEFT_COUNT];
  /* run.json's model_shape: the traced model's Linears for the cost table (have_tl 0: none,
   * or a run.json written before it) */
  fp8_tl_shape tl;
  int have_tl;
  fp8_steps_table tab;
  fp8_stream_table stream; /* stream.csv (have_stream 0: the run has none) */
  int wrote_advice;     /* advice.ini written (rep_write_advice) */
  int have_stream;
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
  plot_t plots[MAX_PLOTS];
  size_t nplots;
  /* who draws which chart (rep_draw_plots): chart number i is drawn here when mine[i % nprocs];
   * rank 0 is the calling process, which forks the others (pid, fd: their pids and the read
   * ends of their status pipes; status_fd: a child's write end) */
  int nprocs, rank, status_fd;
  unsigned char mine[MAX_PLOT_PROCS];
  size_t chart_i;
  int pid[MAX_PLOT_PROCS], fd[MAX_PLOT_PROCS];
  /* the event the report centres on: the worst overflow under the reference configuration */
  ptrdiff_t spike_group;
  int64_t spike_step;
  size_t spike_row;
  char pngtext_version[64];
} rep_t;

/* A group of the reference configuration whose largest element overflowed at some step (of
 * the stream when the run has one, else of the snapshot rows). */
typedef struct {
  size_t g;
  int64_t ovf_steps, clip_steps; /* steps whose largest element overflowed / clipped */
  int64_t clipped;               /* clipped values at the snapshot steps */
  double overshoot;              /* the largest overshoot (binades) */
} ov_t;

/* ------------------------------------------------------------------ report_read.c */

/* The experiment's name, the trace's description, the overflow and step budgets and the
 * warm-up override and the tensors left out (optional lists of tensor names) from
 * <outdir>/run.json, every one checked: FP8_EIO when it cannot be
 * opened, FP8_EFORMAT ("run.json:<line>: not JSON", or the key that is wrong). */
int rep_read_run_json(rep_t *r, double *budget_out, double *step_budget_out, char *err,
                      size_t errlen);
/* Frees what rep_read_run_json allocated (the lists of tensors left out). */
void rep_free_run_json(rep_t *r);
/* Reads <outdir>/histograms.csv through once and checks every line (header, 4 fields, a
 * tensor name, a step >= 0, a log2 bin in range, a count >= 0; blank lines only at the end),
 * so that the plots, which read it later without messages, never meet a bad line. FP8_EIO
 * when it cannot be opened, FP8_EFORMAT "histograms.csv:<line>: <what>". */
int rep_check_histograms(const rep_t *r, char *err, size_t errlen);
/* The log2 histogram of (tensor, step) from histograms.csv: counts[0..*nbins) for the bins
 * from *lo_bin on. FP8_EIO when the file cannot be opened, FP8_EFORMAT when its header is not
 * histograms.csv's or it has no such rows (the caller then draws no histogram). */
int rep_load_histogram(const rep_t *r, const char *tensor, int64_t step, double *counts,
                       int *lo_bin, int *nbins);
/* Reads gemm.csv (absent: *have = 0, no GEMM section) into the configurations' rel_error
 * lists and their medians. */
int rep_load_gemm(rep_t *r, int *have, char *err, size_t errlen);

/* ------------------------------------------------------------------ report_select.c */

/* The configurations (experiment order) with their aggregates, the reference and current
 * configurations and the ones shown on timelines. FP8_OK or FP8_ENOMEM (no message). */
int rep_build_configs(rep_t *r);
/* Group g's stream.csv series (its tensor under its delayed configuration), or NULL (no
 * stream, or not a delayed group). */
const fp8_stream_series *rep_series_of(const rep_t *r, size_t g);
/* The group of tensor `tensor` under configuration c, or -1. */
ptrdiff_t rep_group_of(const rep_t *r, const char *tensor, size_t c);
/* The row of group g at step s, or NULL (also for g < 0). */
const fp8_step_row *rep_row_at(const rep_t *r, ptrdiff_t g, int64_t step);
/* Groups of the reference configuration whose largest element overflowed at some step, worst
 * first (clipped steps, overflowed steps, overshoot), into out (room for every group); returns
 * their number. */
size_t rep_overflowing(const rep_t *r, ov_t *out);
/* The worst event under the reference configuration: the row with the most overflow (the most
 * underflow when none overflowed). */
void rep_find_spike(rep_t *r);

/* ------------------------------------------------------------------ report_plots.c */

/* Draws every plot under <outdir>/plots (which exists): up to max_timelines amax timelines
 * (the spike tensor's, then the worst overflowing ones), the dynamic range at the spike, the
 * SNR over steps, the heatmaps, the per-configuration bars and, with gemm.csv, the GEMM
 * errors. Each drawn plot is listed in r->plots. procs processes draw them (PLplot has one
 * current stream per process, so a second core needs a second process): procs - 1 forked
 * children draw every procs-th chart each (chart i by process i % procs) and this process the
 * rest; every process computes the same charts and list (only the drawing is shared), and this
 * one collects the children's status. It forks only while this process runs one thread (no
 * text drawn yet: pango's threads would not survive a fork), else draws every chart itself.
 * procs 1: no fork; <= 0: the online CPUs, at most 4. The files are the same whatever procs. */
int rep_draw_plots(rep_t *r, int max_timelines, int have_gemm, int procs, char *err, size_t errlen);

/* ------------------------------------------------------------------ report_findings.c */

/* The Findings section: the reference configuration over every step of the stream, the
 * warm-up, current scaling's rounding case, the worst event, the tensors and roles hit, the
 * distribution of overshoot, the scale lag. Every number it quotes is recomputed from the CSV
 * files by tests/python/test_findings.py. */
void rep_add_findings(rep_t *r, fp8_doc *d);
/* report_te.c: "Held against TransformerEngine": the replayed delayed scales against TE's own
 * (stream.csv's te_scale), per delayed configuration; nothing without any te_scale */
void rep_add_te_check(rep_t *r, fp8_doc *d);
/* report_cost.c: "Cost per step (model)": the timeline model (timeline.h) on run.json's
 * model_shape, every mode on an H200; nothing without a model_shape. */
void rep_add_cost(const rep_t *r, fp8_doc *d);

/* ------------------------------------------------------------------ report_outputs.c */

/* Puts the files this report wrote (the analysis CSVs, r->plots, report.md, the notebook
 * notebooks_export/<nbname>) into <outdir>/run.json's outputs in place of an earlier report's,
 * and removes the earlier report's files it did not write again; the runner's entries stay.
 * Without a readable run.json: nothing (FP8_OK). */
int rep_record_outputs(const rep_t *r, const char *nbname, char *err, size_t errlen);

/* ------------------------------------------------------------------ report_answer.c */

/* The first section: the one TE recipe line (the model-scope recommendation), the tensors it
 * does not fit and what to do for them, its sensitivity to the budgets, what was not tried. */
void rep_add_answer(rep_t *r, fp8_doc *d);
/* <outdir>/advice.ini: the answer as one experiment (the whole-model setting, current scaling
 * or the fitting margin for the tensors it does not fit, as one recipe label; the whole-model
 * setting alone beside it), to replay and confirm the advice. Nothing when there is no answer
 * or it fits every tensor. FP8_OK, or the write's status with a message. */
int rep_write_advice(rep_t *r, char *err, size_t errlen);

/* ------------------------------------------------------------------ report_text.c */

/* A rate as the tables show it: n/a, 0 or 3 significant digits; an SNR in dB: n/a, "exact" at
 * the cap, else one decimal. */
const char *rep_fmt_rate(double v, char *buf, size_t n);
const char *rep_fmt_db(double v, char *buf, size_t n);

/* The document; images are referenced as <img_prefix><file>, CSVs as <csv_prefix><file>.
 * NULL when out of memory. */
fp8_doc *rep_build_doc(rep_t *r, const char *img_prefix, const char *csv_prefix);
/* report_notebook.c: the notebook's "Explore the data" cells (notebook only), appended to d;
 * csv_prefix is the run folder as seen from the notebook's folder. */
void rep_add_notebook(rep_t *r, fp8_doc *d, const char *csv_prefix);

#endif
