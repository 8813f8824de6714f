/* run_claim.c: the output directory of a run (run_folder.h says what fp8lab keeps there): what a run
 * finds there and may do with it, the folder's lock and in-progress marker, the synth trace
 * generated into it, and what a run that fails has to put back. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run_folder.h"
#include "runner_internal.h"
#include "synth.h"
#include "util.h"

/* Creates the output directory (once: a synth: trace needs it early), noting what it created. */
static int make_out_dir(const char *out, run_undo *u, char *err, size_t errlen) {
  if (!u->created) u->created = fp8_first_missing_dir(out);
  return fp8_mkdir_p(out, err, errlen);
}

/* A fresh run: the folder may hold fp8lab's temporaries of dead processes (removed), an
 * interrupted run (its marker: refused without --force when results of any run are there,
 * else its leftovers go), and without --force nothing else. */
static int enter_fresh(const fp8_run_options *opt, const char *out, run_undo *u, char *err,
                       size_t errlen) {
  struct stat sb;
  if (stat(out, &sb) != 0) return FP8_OK; /* created later, and locked then */
  int rc = fp8_rundir_lock(out, &u->folder.lock_fd, err, errlen);
  if (rc) return rc;
  u->locked = 1;
  fp8_rundir_remove_debris(out);
  fp8_run_marker m;
  if (fp8_rundir_marker_read(out, &m)) {
    int results = fp8_rundir_has_results(out);
    if (results && !opt->force) return fp8_rundir_interrupted_error(out, &m, err, errlen);
    /* its checkpoint and marker are fp8lab's own; its synth trace too when no result of any
     * run is there (with results it may be the earlier run's: --force replaces it) */
    fp8_rundir_remove_interrupted(out, !results);
    u->interrupted = 1;
  }
  /* (a checkpoint folder without a marker is no run's: a fresh one is written over it) */
  if (!opt->force && fp8_rundir_nonempty(out))
    return fp8_errorf(FP8_EINVAL, err, errlen,
                      "%s: output directory is not empty (use --force to overwrite its results)",
                      out);
  return FP8_OK;
}

int run_dir_enter(const fp8_run_options *opt, const char *out, run_undo *u, char *err,
                  size_t errlen) {
  u->folder.lock_fd = -1;
  if (!opt->resume) return enter_fresh(opt, out, u, err, errlen);
  fp8_run_marker m;
  struct stat sb;
  if (stat(out, &sb) != 0 || !fp8_rundir_marker_read(out, &m))
    return fp8_errorf(FP8_EINVAL, err, errlen, "%s: no interrupted fp8lab run to resume here (no "
                      "%s)", out, FP8_RUN_MARKER);
  int rc = fp8_rundir_lock(out, &u->folder.lock_fd, err, errlen);
  if (rc) return rc;
  u->locked = 1;
  fp8_rundir_remove_debris(out);
  return FP8_OK;
}

int run_dir_claim(const fp8_experiment *ex, const fp8_run_options *opt, const char *out,
                  run_undo *u, char *err, size_t errlen) {
  if (u->claimed) return FP8_OK;
  int rc = opt->resume ? FP8_OK : make_out_dir(out, u, err, errlen);
  if (!rc && !u->locked) {
    rc = fp8_rundir_lock(out, &u->folder.lock_fd, err, errlen);
    u->locked = rc == FP8_OK;
  }
  if (!rc) rc = fp8_rundir_marker_write(out, "replay", ex->file, err, errlen);
  u->claimed = rc == FP8_OK;
  return rc;
}

void run_dir_undo(run_undo *u, const char *out, const char *trace_dir, int resume) {
  if (resume) return; /* the interrupted run stays as it was, resumable */
  if (u->trace_new) {
    fp8_rmtree(trace_dir);
    if (*u->trace_old) rename(u->trace_old, trace_dir);
    u->trace_old[0] = '\0';
  }
  if (u->claimed) {
    char ck[4096 + 64];
    snprintf(ck, sizeof ck, "%s/%s", out, FP8_RUN_CHECKPOINT_DIR);
    fp8_rmtree(ck);
    fp8_rundir_marker_remove(out);
  }
  if (u->created) fp8_rmdir_up(out, u->created);
}

/* The trace directory: the experiment's, or for synth: paths a trace generated into
 * <out>/synth_trace (next to its final place and swapped in, so that a re-run with --force
 * never mixes snapshots of two generations; the old trace waits in u->trace_old until the run
 * commits). Only a synth_trace/ that holds nothing but a synth trace's files is replaced: a
 * folder of the user's is never removed. A resume takes the trace the interrupted run made. */
int run_dir_prepare_trace(const fp8_experiment *ex, const fp8_run_options *opt, const char *out,
                          run_undo *u, char *trace_dir, size_t len, char *err, size_t errlen) {
  if (!ex->trace_is_synth) {
    snprintf(trace_dir, len, "%s", ex->trace_path);
    return FP8_OK;
  }
  int rc = fp8_experiment_check_ranks(ex, 0, ex->trace_path, err, errlen); /* one rank */
  if (rc) return rc;
  snprintf(trace_dir, len, "%s/%s", out, FP8_SYNTH_TRACE_DIR);
  if (opt->resume) return FP8_OK; /* its fingerprint tells whether it is the one */
  if ((rc = fp8_rundir_synth_owned(trace_dir, err, errlen)) != FP8_OK) return rc;
  if ((rc = run_dir_claim(ex, opt, out, u, err, errlen)) != FP8_OK) return rc;
  char tmp_dir[4096 + 32];
  snprintf(tmp_dir, sizeof tmp_dir, "%s/.%s.tmp.%ld", out, FP8_SYNTH_TRACE_DIR, (long)getpid());
  fp8_rmtree(tmp_dir);
  if (opt->progress && !opt->quiet)
    fprintf(stderr, "generating synthetic trace %s (%lld steps) into %s ...\n", ex->synth_preset,
            (long long)ex->synth_steps, trace_dir);
  rc = fp8_synth_write(ex->synth_preset, tmp_dir, ex->synth_steps, ex->synth_seed, err, errlen);
  if (rc) {
    char tmp[FP8_ERRLEN];
    snprintf(tmp, sizeof tmp, "%s", err);
    fp8_rmtree(tmp_dir);
    return fp8_errorf(rc, err, errlen, "%s: [trace] path = synth:%s: %s", ex->file, ex->synth_preset, tmp);
  }
  struct stat sb;
  snprintf(u->trace_old, sizeof u->trace_old, "%s/.%s.old.%ld", out, FP8_SYNTH_TRACE_DIR,
           (long)getpid());
  fp8_rmtree(u->trace_old);
  if (lstat(trace_dir, &sb) != 0 || rename(trace_dir, u->trace_old) != 0) {
    fp8_rmtree(trace_dir); /* nothing to keep, or it cannot be kept (fp8lab's: checked above) */
    u->trace_old[0] = '\0';
  }
  if (rename(tmp_dir, trace_dir) != 0) {
    rc = fp8_errorf(fp8_write_errno_status(errno), err, errlen, "%s: cannot rename %s into place: %s",
                    trace_dir, tmp_dir, strerror(errno));
    fp8_rmtree(tmp_dir);
    if (*u->trace_old) rename(u->trace_old, trace_dir);
    u->trace_old[0] = '\0';
    return rc;
  }
  u->trace_new = 1;
  return FP8_OK;
}
