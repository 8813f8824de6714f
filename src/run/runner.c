/* runner.c: trace replay through an experiment's configurations (see runner.h): the output
 * directory, the trace, then the step loop that feeds the engines and writes their rows.
 *
 * Order of work and of the rows of steps.csv: steps ascending, then tensor names (strcmp),
 * then configurations in experiment order. A multi-rank trace is one replay whose tensors are
 * `rank_<r>/<name>`; a step is worked through one rank at a time (only that rank's snapshot is
 * mapped), ranks in the strcmp order of their prefix, which keeps the rows in tensor-name
 * order. The step's two end_phase calls come after every rank of the step, when all of its
 * amaxes are known (reduce_amax reduces over the ranks of each group there); a step of several
 * micro-batches (amax.csv's micro column) has the two calls once per micro-batch.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "run_folder.h"
#include "run_mpi.h"
#include "runner_internal.h"
#include "util.h"

/* A write of the step loop's outputs that failed (a full disk) fails the run now, naming the
 * file, rather than at the commit after the last step. */
static int check_writes(run_t *r, char *err, size_t errlen) {
  /* (the row writer thread's files are its own while it runs: it keeps their errors) */
  FILE *fps[4] = {r->steps_fp, r->hist_fp, r->gemm_fp, r->stream_fp};
  if (run_writer_error(r, err, errlen) != FP8_OK) return FP8_EWRITE;
  const char *names[4] = {fp8_schema_steps.file, fp8_schema_histograms.file, fp8_schema_gemm.file,
                          r->stream_npy ? FP8_STREAM_NPY_FILE : fp8_schema_stream.file};
  for (int i = 0; i < 4; i++) {
    if (!fps[i] || run_writer_owns(r, fps[i]) || !ferror(fps[i])) continue;
    /* the failed write's errno is long gone (the engines ran since): a flush of what is still
     * buffered fails the same way and says why */
    errno = 0;
    fflush(fps[i]);
    return fp8_errorf(FP8_EWRITE, err, errlen, "%s/%s: write failed: %s",
                      r->opt->out_dir ? r->opt->out_dir : r->ex->out_dir, names[i],
                      strerror(errno ? errno : EIO));
  }
  return FP8_OK;
}

/* The steps: for each, the amax.csv rows, the snapshot rank by rank (cast with the scales of
 * the step's first micro-batch), then the micro-batches' phases. */
static int run_steps(run_t *r, const fp8_trace *tr, const int64_t *steps, size_t nsteps,
                     const int32_t *amax_map, const size_t *rank_order, char *err, size_t errlen) {
  const size_t nparts = tr->nranks ? tr->nranks : 1;
  size_t snap = 0, arow = 0;
  double t0 = run_now_s(), last_draw = 0;
  int draw = r->opt->progress && !r->opt->quiet, rc = FP8_OK;
  /* FP8LAB_TEST_STEP_DELAY_MS: a pause after each step, for the kill test (docs/reference.md) */
  const char *delay = getenv("FP8LAB_TEST_STEP_DELAY_MS");
  long delay_ms = delay ? strtol(delay, NULL, 10) : 0;
  for (size_t si = r->steps_done; si < nsteps; si++) {
    int64_t step = steps[si];
    r->step_index = si;
    /* warm_history: the steps the selection leaves out before this one, fed without rows */
    rc = run_warm_feed(r, tr, si, amax_map, err, errlen);
    if (r->split) rc = fp8_mpi_agree(rc, err, errlen);
    if (rc) return rc;
    if ((rc = fp8_engine_begin_step(r->engine, step, err, errlen)) != FP8_OK) return rc;
    size_t a_end = 0;
    run_step_rows(tr, step, &arow, &a_end);
    r->multi_micro = r->nmicro[si] > 1;
    run_take_csv_rows(r, tr, arow, a_end, amax_map);
    while (snap < tr->nsteps && tr->steps[snap] < step) snap++;
    int have_snap = snap < tr->nsteps && tr->steps[snap] == step;
    if (r->split) { /* MPI: each process its ranks, process 0 the rows (run_split.c) */
      int prc = FP8_OK;
      for (size_t part = 0; have_snap && part < nparts; part++)
        run_split_part(r, tr, snap, rank_order[part], step, &prc, err, errlen);
      if ((rc = run_split_sync(r, have_snap, prc, err, errlen)) != FP8_OK) return rc;
    } else {
      for (size_t part = 0; have_snap && part < nparts; part++)
        if ((rc = run_part(r, tr, snap, rank_order[part], step, err, errlen)) != FP8_OK) return rc;
    }
    rc = run_micro_batches(r, tr, step, arow, a_end, amax_map, 1, err, errlen);
    arow = a_end;
    if (!rc) rc = check_writes(r, err, errlen);
    r->steps_done = si + 1;
    if (r->split) rc = fp8_mpi_agree(rc, err, errlen); /* a checkpoint is collective */
    if (!rc) rc = run_ckpt_step(r, err, errlen);
    if (r->split) rc = fp8_mpi_agree(rc, err, errlen); /* every process stops, or none */
    if (rc) return rc;
    if (draw) run_progress(si + 1, nsteps, t0, &last_draw, si + 1 == nsteps);
    if (delay_ms > 0) nanosleep(&(struct timespec){delay_ms / 1000, delay_ms % 1000 * 1000000L}, NULL);
  }
  return FP8_OK;
}

/* ------------------------------------------------------------------ the run */

/* No tensor to replay: the [trace] tensors selection matches none (at its line), or the trace
 * has none at all. */
static int no_tensor_error(const fp8_experiment *ex, const char *trace_dir, char *err,
                           size_t errlen) {
  if (!ex->ntensor_globs)
    return fp8_errorf(FP8_EINVAL, err, errlen, "%s: the trace %s holds no tensor", ex->file,
                      trace_dir);
  char sel[1024];
  size_t o = 0;
  for (size_t i = 0; i < ex->ntensor_globs && o < sizeof sel; i++)
    o += (size_t)snprintf(sel + o, sizeof sel - o, "%s%s", i ? ", " : "", ex->tensor_globs[i]);
  return fp8_errorf(FP8_EINVAL, err, errlen,
                    "%s:%d: tensors = %s selects none of the tensors of the trace %s", ex->file,
                    ex->tensors_line, sel, trace_dir);
}

/* Everything between the open trace and the step loop: tensors, reduction, engines, steps. */
static int plan_run(run_t *r, const fp8_trace *tr, const char *trace_dir, int64_t **steps,
                    size_t *nsteps, int32_t **amax_map, char *err, size_t errlen) {
  const fp8_experiment *ex = r->ex;
  char **names = NULL;
  size_t nnames = 0;
  int rc = fp8_experiment_check_ranks(ex, tr->nranks, trace_dir, err, errlen);
  if (!rc) rc = fp8_experiment_check_steps(ex, tr->steps, tr->nsteps, trace_dir, err, errlen);
  if (!rc) rc = run_collect_names(ex, tr, &names, &nnames, err, errlen);
  if (!rc && nnames == 0) rc = no_tensor_error(ex, trace_dir, err, errlen);
  if (!rc) rc = run_tensors_init(r, names, nnames, err, errlen);
  if (!rc && tr->nranks && ex->reduce_amax)
    rc = run_reduction_init(r, tr->nranks, err, errlen);
  if (!rc && run_union_steps(ex, tr, steps, nsteps) != FP8_OK)
    rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  if (!rc && !(*amax_map = malloc((tr->namax_names + 1) * sizeof **amax_map)))
    rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  for (size_t k = 0; !rc && k < tr->namax_names; k++)
    (*amax_map)[k] = run_tensor_selected(ex, tr, tr->amax_names[k])
                         ? (int32_t)run_find_tensor(r, tr->amax_names[k]) : -1;
  if (!rc && (run_count_micro(r, tr, *steps, *nsteps) != FP8_OK ||
              run_warm_plan(r, tr, *steps, *nsteps) != FP8_OK))
    rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  if (!rc) rc = run_engines_init(r, err, errlen);
  /* experts.csv: from the trace alone, process 0's to write */
  if (!rc && r->me == 0) rc = run_experts_plan(r, tr, *steps, *nsteps, err, errlen);
  for (size_t k = 0; names && k < nnames; k++) free(names[k]);
  free(names);
  return rc;
}

/* summary.csv: the totals of every tensor and configuration (results.h). */
static int write_summary(const run_t *r, char *err, size_t errlen) {
  const fp8_summary_acc **acc = malloc((r->ntensors + 1) * sizeof *acc);
  if (!acc) return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  for (size_t i = 0; i < r->ntensors; i++) acc[i] = r->t[i].acc;
  fp8_summary_table st = {r->ntensors, r->nconfigs, r->names, r->roles, r->ex->configs,
                          r->formats, acc};
  int rc = fp8_summary_csv_write(r->out, &st, err, errlen);
  free(acc);
  return rc;
}

/* summary.csv and the renames of the partial files: steps.csv last, so a complete steps.csv
 * always comes with its summary; no gemm.csv without a layer triplet. A partial file a resumed
 * commit finds in place already (part[k].fp NULL) was renamed before the kill. *wrote is set
 * once a file is in place. */
static int commit_outputs(run_t *r, int *wrote, char *err, size_t errlen) {
  fp8_outfile *of = r->part;
  int rc = write_summary(r, err, errlen);
  if (rc) return rc;
  *wrote = 1;
  if ((rc = run_experts_write(r, err, errlen)) != FP8_OK) return rc;
  /* (the folder is marked unfinished until fp8_run_folder_close: a file taken away just
   * before its rename is put back by the resume's commit) */
  if (of[1].fp && (rc = fp8_outfile_commit_over(&of[1], err, errlen)) != FP8_OK) return rc;
  if (r->gemm_rows > 0 && of[2].fp && (rc = fp8_outfile_commit_over(&of[2], err, errlen)) != FP8_OK)
    return rc;
  fp8_outfile_abort(&of[2]); /* no layer triplet: no gemm.csv (a no-op once committed) */
  if (r->stream_npy && (rc = run_stream_index(r, err, errlen)) != FP8_OK) return rc;
  if (of[3].fp && (rc = fp8_outfile_commit_over(&of[3], err, errlen)) != FP8_OK) return rc;
  return of[0].fp ? fp8_outfile_commit_over(&of[0], err, errlen) : FP8_OK;
}

/* The files of an earlier run in out (--force): those its run.json lists and fp8lab's fixed
 * names, which a run.json of an older fp8lab did not list; the report's among them. */
static int earlier_outputs(const char *out, fp8_outputs *o) {
  const char *const fixed[] = {fp8_schema_steps.file, fp8_schema_summary.file,
                               fp8_schema_histograms.file, fp8_schema_gemm.file,
                               fp8_schema_stream.file, FP8_STREAM_NPY_FILE, FP8_STREAM_JSON_FILE,
                               FP8_RUNJSON_FILE, "analysis.csv", "recommendations.csv",
                               "report.md"};
  int rc = fp8_run_json_read_outputs(out, o);
  for (size_t i = 0; i < sizeof fixed / sizeof *fixed && !rc; i++) rc = fp8_outputs_add(o, fixed[i]);
  return rc;
}

/* The files this run writes, for run.json's outputs (the report adds its own). */
static int run_outputs(const run_t *r, fp8_outputs *o) {
  int rc = fp8_outputs_add(o, fp8_schema_steps.file);
  if (!rc && r->has_stream && r->stream_npy) rc = fp8_outputs_add(o, FP8_STREAM_NPY_FILE);
  if (!rc && r->has_stream && r->stream_npy) rc = fp8_outputs_add(o, FP8_STREAM_JSON_FILE);
  if (!rc && r->has_stream && !r->stream_npy)
    rc = fp8_outputs_add(o, fp8_schema_stream.file); /* delayed configs */
  if (!rc) rc = fp8_outputs_add(o, fp8_schema_summary.file);
  if (!rc) rc = fp8_outputs_add(o, fp8_schema_histograms.file);
  if (!rc && r->gemm_rows > 0) rc = fp8_outputs_add(o, fp8_schema_gemm.file);
  if (!rc && r->has_experts) rc = fp8_outputs_add(o, fp8_schema_experts.file);
  if (!rc) rc = fp8_outputs_add(o, FP8_RUNJSON_FILE);
  return rc;
}

/* The rows' files: new ones in the checkpoint folder with the first checkpoint, or those of
 * the interrupted run cut back to its checkpoint (resume). */
static int open_outputs(run_t *r, run_undo *u, const run_ckpt_info *resume, char *err,
                        size_t errlen) {
  int rc = run_stream_plan(r, err, errlen);
  if (!rc) rc = run_dir_claim(r->ex, r->opt, r->out, u, err, errlen);
  /* after a kill in a report, its files are listed nowhere: they are fp8lab's all the same */
  if (!rc && !resume &&
      (earlier_outputs(r->out, &r->earlier) != FP8_OK ||
       (u->interrupted && fp8_rundir_add_report_leftovers(r->out, &r->earlier) != FP8_OK)))
    rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  if (!rc) rc = run_ckpt_open(r, resume, err, errlen);
  if (!rc && !resume) rc = run_ckpt_write(r, RUN_CKPT_REPLAY, err, errlen);
  r->steps_fp = r->part[0].fp;
  r->hist_fp = r->part[1].fp;
  r->gemm_fp = r->part[2].fp;
  r->stream_fp = r->part[3].fp;
  if (!rc && r->stream_fp &&
      !(r->stream_w = fp8_stream_writer_new(r->stream_fp, r->stream_npy, &r->stream_lay)))
    rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  if (!rc) run_writer_start(r);
  return rc;
}

/* What the run did, for run.json and the caller's message. */
static void fill_summary(const run_t *r, fp8_run_summary *sum) {
  sum->rows = r->rows;
  sum->steps = (long long)r->nsteps;
  sum->tensors = (long long)r->ntensors;
  sum->configs = (long long)r->ex->nconfigs;
  sum->gemm_rows = r->gemm_rows;
  sum->stream_rows = r->has_stream ? r->stream_rows : 0;
  sum->mismatches = r->mismatches; /* the caller warns: library code does not print */
  for (int k = 0; k < FP8_LEFT_COUNT; k++) sum->left_out[k] = 0;
  for (size_t i = 0; r->left && i < r->ntensors; i++) sum->left_out[r->left[i]]++;
  run_left_out_text(r, sum->left_note, sizeof sum->left_note);
  sum->wall_s = r->wall_base + (run_now_s() - r->t0);
  sum->split_note[0] = '\0';
  if (r->split) { /* MPI: the processes' shares, and the amax exchange (MPI, or NCCL) */
    uint64_t lo = 0, hi = 0;
    for (int p = 0; r->proc_bytes && p < r->np; p++) {
      if (p == 0 || r->proc_bytes[p] < lo) lo = r->proc_bytes[p];
      if (p == 0 || r->proc_bytes[p] > hi) hi = r->proc_bytes[p];
    }
    snprintf(sum->split_note, sizeof sum->split_note, "MPI: %d process%s (the trace's %s, "
             "balanced by their bytes), %.3g to %.3g MB of snapshot data each; amaxes "
             "exchanged by %s", r->np, r->np > 1 ? "es" : "", r->multirank ? "ranks" : "layers",
             (double)lo / 1e6, (double)hi / 1e6, r->exchange);
  }
}

/* run.json (results' run_json.h): what the run did, from the runner's state. */
static int write_run_json(const run_t *r, const fp8_trace *tr, const char *trace_dir,
                          const fp8_run_summary *sum, const fp8_outputs *outputs,
                          const fp8_run_inputs *inputs, char *err, size_t errlen) {
  const fp8_engine_choice *ch = r->opt->choice;
  unsigned char *fb = calloc(2 * r->nconfigs + 1, 1); /* the composite's CPU fallbacks */
  if (!fb) return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  for (size_t c = 0; c < r->nconfigs; c++) {
    fb[c] = (unsigned char)fp8_engine_falls_back(r->engine, FP8_OP_QUANTIZE_STATS, c);
    fb[r->nconfigs + c] = (unsigned char)fp8_engine_falls_back(r->engine, FP8_OP_GEMM, c);
  }
  fp8_run_json_desc d = {
      .ex = r->ex, .trace = tr, .trace_dir = trace_dir, .started_utc = r->started,
      .threads = r->opt->threads > 0 ? r->opt->threads : 1, .steps = sum->steps,
      .tensors = sum->tensors, .configs = sum->configs, .rows = sum->rows,
      .gemm_rows = sum->gemm_rows, .stream_rows = sum->stream_rows,
      .mismatches = r->mismatches, .wall_s = sum->wall_s, .outputs = outputs,
      .steps_before = r->steps_before, .steps_skipped = r->steps_skipped,
      .ntensors = r->ntensors, .tensor_names = r->names, .left = r->left,
      .processes = r->np, .process_bytes = r->proc_bytes,
      .amax_exchange = r->split ? r->exchange : NULL, .engine = fp8_engine_name(r->engine),
      .device = ch && ch->device ? ch->device : "cpu", .module = ch ? ch->module : NULL,
      .self_check_ran = ch && ch->self_check_ran, .self_check_passed = ch && ch->self_check_passed,
      .self_check_values = ch ? ch->self_check_values : 0,
      .self_check_note = ch ? ch->self_check_note : NULL, .cpu_quantize = fb,
      .cpu_gemm = fb + r->nconfigs, .nunserved = r->nunserved, .unserved = r->unserved,
      .inputs = inputs};
  int rc = fp8_run_json_write(r->out, &d, err, errlen);
  free(fb);
  return rc;
}

/* The folder as the run holds it (its lock, its marker and checkpoint): handed on in the
 * summary for the report that follows (report_follows), or complete now. */
static void hold_folder(run_undo *u, fp8_run_folder *f) {
  *f = u->folder;
  f->run_pending = 1;
  u->folder.lock_fd = -1; /* f's now */
}

static void finish_folder(run_undo *u) {
  fp8_run_folder f;
  hold_folder(u, &f);
  fp8_run_folder_close(&f, 1);
}

/* The end of the replay: the commit (recorded first, so that a kill in the middle of it is
 * resumed by doing the rest), run.json, the earlier run's files that this one did not write
 * again; then the folder is complete, or waits for its report (report_follows). */
static int finish_run(run_t *r, const fp8_trace *tr, const char *trace_dir, fp8_run_summary *sum,
                      run_undo *u, int *wrote, char *err, size_t errlen) {
  fp8_outputs outputs = {0};
  const fp8_run_inputs *inputs = NULL;
  /* the inputs' hashes first: an input that cannot be read again fails the run before its
   * results go into place */
  int rc = run_hash_finish(r, &inputs, tr, trace_dir, err, errlen);
  if (!rc) rc = run_left_out(r, tr, err, errlen); /* for run.json and the summary line */
  if (!rc && run_unserved(r) != FP8_OK) rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  if (rc) return rc;
  fill_summary(r, sum);
  rc = run_ckpt_write(r, RUN_CKPT_COMMIT, err, errlen);
  if (!rc) rc = commit_outputs(r, wrote, err, errlen);
  if (!rc && run_outputs(r, &outputs) != FP8_OK)
    rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  sum->wall_s = r->wall_base + (run_now_s() - r->t0);
  if (!rc) rc = write_run_json(r, tr, trace_dir, sum, &outputs, inputs, err, errlen);
  /* what an earlier run (--force) wrote and this one did not: its plots, its notebook, its
   * report; the report of this run follows */
  if (!rc) fp8_outputs_remove_stale(r->out, &r->earlier, &outputs);
  fp8_outputs_free(&outputs);
  if (rc) return rc;
  if (!r->opt->report_follows) {
    finish_folder(u);
    return FP8_OK;
  }
  rc = run_ckpt_write(r, RUN_CKPT_COMMITTED, err, errlen);
  if (!rc) rc = fp8_rundir_marker_write(r->out, "report", r->ex->file, err, errlen);
  return rc;
}

/* A fresh run's start time, or (resume) the interrupted run's and its checkpoint. */
static int start_run(run_t *r, const fp8_trace *tr, const char *trace_dir, const int64_t *steps,
                     run_ckpt_info *info, char *err, size_t errlen) {
  int rc = run_ckpt_fingerprint(r, tr, trace_dir, err, errlen);
  if (r->split) rc = fp8_mpi_agree(rc, err, errlen); /* the restore is collective */
  if (rc || !r->opt->resume) {
    time_t wall = time(NULL);
    struct tm tmv;
    gmtime_r(&wall, &tmv);
    strftime(r->started, sizeof r->started, "%Y-%m-%dT%H:%M:%SZ", &tmv);
    return rc;
  }
  return run_ckpt_restore(r, steps, r->ex->file, info, err, errlen);
}

int fp8_run_experiment(const fp8_experiment *ex, const fp8_run_options *opt, fp8_run_summary *sum,
                       char *err, size_t errlen) {
  fp8_outfile part[4] = {{0}, {0}, {0}, {0}};
  run_t r = {.ex = ex, .opt = opt, .part = part, .t0 = run_now_s(), .np = fp8_mpi_size(),
             .me = fp8_mpi_rank()};
  fp8_trace tr;
  int trace_open = 0, rc = FP8_OK;
  int64_t *steps = NULL;
  size_t nsteps = 0, *rank_order = NULL;
  int32_t *amax_map = NULL;
  run_undo undo = {.folder.lock_fd = -1};
  run_ckpt_info info = {0};
  int wrote = 0;
  char trace_dir[4096] = "";
  memset(&tr, 0, sizeof tr);
  memset(sum, 0, sizeof *sum);
  sum->folder.lock_fd = -1;
  sum->resumed_at = -1;

  const char *out = opt->out_dir ? opt->out_dir : ex->out_dir;
  if (!out) {
    rc = fp8_errorf(FP8_EINVAL, err, errlen, "%s: no output directory: give [output] dir or --out DIR",
                    ex->file);
    goto done;
  }
  r.out = out;
  snprintf(undo.folder.dir, sizeof undo.folder.dir, "%s", out);
  r.ckpt_every = opt->checkpoint_s > 0 ? opt->checkpoint_s : 0;
  snprintf(sum->out_dir, sizeof sum->out_dir, "%s", out);
  /* the output folder and the trace: process 0's (the others open the trace it names) */
  if (r.me == 0) {
    rc = run_dir_enter(opt, out, &undo, err, errlen);
    /* every check of the trace comes before the output directory is made (but a synth: trace
     * is generated into it: run_dir_undo takes it away again) */
    if (!rc) rc = run_dir_prepare_trace(ex, opt, out, &undo, trace_dir, sizeof trace_dir, err, errlen);
    if (!rc) trace_open = (rc = fp8_trace_open(trace_dir, &tr, err, errlen)) == FP8_OK;
  }
  if (r.np > 1 && (rc = fp8_mpi_agree(rc, err, errlen)) == FP8_OK) {
    fp8_mpi_bcast(trace_dir, sizeof trace_dir, 0);
    if (r.me != 0) trace_open = (rc = fp8_trace_open(trace_dir, &tr, err, errlen)) == FP8_OK;
    rc = fp8_mpi_agree(rc, err, errlen);
  }
  if (rc) goto done;
  r.multirank = tr.nranks > 0;
  /* MPI: a multi-rank trace's ranks, or a single-rank trace's layers, are spread over the
   * processes; with the GPU engine under a launcher, even one process exchanges its amaxes
   * (through NCCL: a world of one) */
  r.split = r.np > 1 || (fp8_mpi_on() && opt->exchange);
  size_t nparts = tr.nranks ? tr.nranks : 1;
  /* from here on, under MPI, a failure goes to the next agreement (no process may leave the
   * others waiting in a collective) */
  if (!(rank_order = malloc(nparts * sizeof *rank_order)))
    rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  else run_rank_order(rank_order, nparts);
  if (!rc) rc = plan_run(&r, &tr, trace_dir, &steps, &nsteps, &amax_map, err, errlen);
  if (r.split) rc = fp8_mpi_agree(rc, err, errlen);
  if (!rc && r.split) rc = run_split_assign(&r, &tr, err, errlen);
  if (!rc && r.split) run_split_comm(&r);
  r.nsteps = nsteps;
  for (size_t c = 0; c < ex->nconfigs; c++) r.has_stream |= ex->configs[c].kind == FP8_KIND_DELAYED;
  /* a trace without snapshots is reported from its delayed configurations' stream: without
   * one the report would refuse the run after it was written (docs/semantics.md) */
  if (!rc && opt->report_follows && !r.has_stream && tr.nsteps == 0)
    rc = fp8_errorf(FP8_EINVAL, err, errlen,
                    "%s: the trace has no snapshots and the experiment no delayed recipe: nothing "
                    "to report (a trace of amaxes alone is reported from the stream of its "
                    "delayed configurations: add a [recipe.*] of kind delayed, or run with "
                    "--no-report)",
                    ex->file);
  if (!rc) rc = start_run(&r, &tr, trace_dir, steps, &info, err, errlen);
  if (r.split) rc = fp8_mpi_agree(rc, err, errlen);
  if (rc) goto done;
  if (opt->resume) sum->resumed_at = (long long)r.steps_done;
  snprintf(sum->engine, sizeof sum->engine, "%s", fp8_engine_name(r.engine));
  if (!opt->resume || info.phase != RUN_CKPT_COMMITTED) {
    if (r.me == 0) rc = open_outputs(&r, &undo, opt->resume ? &info : NULL, err, errlen);
    if (r.split) rc = fp8_mpi_agree(rc, err, errlen);
    if (!rc && r.me == 0) run_hash_start(&r, &tr, trace_dir); /* beside the replay */
    if (!rc) rc = run_steps(&r, &tr, steps, nsteps, amax_map, rank_order, err, errlen);
    if (!rc && r.split) rc = run_split_gather(&r, err, errlen);
    if (!rc && r.me == 0) rc = finish_run(&r, &tr, trace_dir, sum, &undo, &wrote, err, errlen);
    if (rc) goto done;
  } else if (!opt->report_follows) { /* resumed after the commit: only the report was left */
    finish_folder(&undo);
  }
  /* resumed after the commit: run.json lists them already, the summary line names them again
   * (out of memory here costs only that note: the results are in place) */
  if (!r.left) (void)run_left_out(&r, &tr, err, errlen);
  if (!r.unserved_done) (void)run_unserved(&r);
  fill_summary(&r, sum);
  sum->unserved = r.unserved; /* the caller's now */
  sum->nunserved = r.nunserved;
  r.unserved = NULL;
  if (opt->report_follows) /* the report follows: held until the caller's fp8_run_folder_close */
    hold_folder(&undo, &sum->folder);

done:
  /* MPI: every process ends with process 0's status, or the first failing one's */
  if (r.np > 1) rc = fp8_mpi_agree(rc, err, errlen);
  run_split_comm_close(&r);
  run_hash_free(&r);
  run_ckpt_close(&r); /* the partial files stay: run_dir_undo removes them with the checkpoint
                        when nothing is in place, else they are what a resume continues */
  run_experts_free(&r);
  run_free(&r);
  free(rank_order);
  free(steps);
  free(amax_map);
  if (trace_open) fp8_trace_close(&tr);
  /* a run that put no result in place leaves the directory as it found it; once one is in
   * place the generated trace belongs with it, and the one it replaced goes */
  if (rc && !wrote && r.me == 0) run_dir_undo(&undo, out, trace_dir, opt->resume);
  if (*undo.trace_old) fp8_rmtree(undo.trace_old);
  free(undo.created);
  fp8_rundir_unlock(undo.folder.lock_fd);
  return rc;
}
