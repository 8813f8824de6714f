/* run_folder.h: what fp8lab keeps in a run folder besides its results, so that a killed run can be
 * told apart from a finished one, cleaned up after, and resumed (docs/design.md, "Crash
 * consistency and resume"):
 *
 *   .fp8lab-run-in-progress   the marker: written (temporary + rename) when a run starts
 *                             writing the folder, removed once its report is complete; while
 *                             it is there the folder may mix two runs, and `fp8lab report`
 *                             refuses it
 *   .fp8lab-checkpoint/       the run's partial rows and its checkpoint (run_resume.c)
 *   synth_trace/              the trace a `path = synth:` experiment generated
 *   .<name>.tmp.<pid>         a file being written (outfile.h), in the folder, plots/ and
 *                             notebooks_export/; .synth_trace.tmp.<pid>/ and
 *                             .synth_trace.old.<pid>/ while a synth trace is swapped in
 *
 * The folder itself is locked (flock on its descriptor) by the process writing it, so a run
 * knows whether the temporaries it finds belong to a process that is gone. */
#ifndef FP8LAB_RUN_RUN_FOLDER_H
#define FP8LAB_RUN_RUN_FOLDER_H

#include <stddef.h>

#include "outputs.h"

#define FP8_RUN_MARKER ".fp8lab-run-in-progress"
#define FP8_RUN_CHECKPOINT_DIR ".fp8lab-checkpoint"
#define FP8_SYNTH_TRACE_DIR "synth_trace"

/** The marker's content. */
typedef struct {
  long pid;              /**< the process that wrote it */
  char phase[16];        /**< "replay" (rows being written) or "report" (results in place, the
                              report not yet complete) */
  char experiment[4096]; /**< the experiment file of the run, as given */
} fp8_run_marker;

/** Locks dir for this process (flock on the folder, released when the process ends: a killed
 *  run leaves no stale lock). *fd is the descriptor to keep (-1 where the file system has no
 *  locks: then only the pids of the temporaries tell). Another process holding it: FP8_EINVAL,
 *  "<dir>: another fp8lab process (pid N) is writing it". A folder that cannot be opened:
 *  FP8_EIO. */
int fp8_rundir_lock(const char *dir, int *fd, char *err, size_t errlen);
/** Releases the lock (fd < 0: nothing). */
void fp8_rundir_unlock(int fd);

/** Reads <dir>/.fp8lab-run-in-progress: 1 when there is one (m filled as far as it could be
 *  read), 0 when there is none. */
int fp8_rundir_marker_read(const char *dir, fp8_run_marker *m);
/** Writes the marker of this process (temporary + rename). */
int fp8_rundir_marker_write(const char *dir, const char *phase, const char *experiment, char *err,
                            size_t errlen);
void fp8_rundir_marker_remove(const char *dir);
/** The one-line message for a folder with a marker: "<dir>: an fp8lab run of <experiment> was
 *  interrupted here (during its replay|report): its files may mix two runs; continue it with
 *  `fp8lab run <experiment> --resume` or start over with --force". */
int fp8_rundir_interrupted_error(const char *dir, const fp8_run_marker *m, char *err,
                                 size_t errlen);

/** A run folder held for writing, from its opening to fp8_run_folder_close: its lock, and
 *  whether a run's in-progress marker and checkpoint wait there for the report. This layer
 *  owns the hold: `fp8lab run` gets it from fp8_run_experiment (fp8_run_summary.folder: the
 *  replay's lock, handed on for the report that follows), `fp8lab report` from
 *  fp8_run_folder_open_report; the report itself takes and releases nothing. */
typedef struct {
  char dir[4096];
  int lock_fd;           /**< the folder's lock (-1: none held) */
  int run_pending;       /**< a run's marker and checkpoint wait for the report */
} fp8_run_folder;

/** `fp8lab report DIR` (not inside a run): refuses a folder with a marker (the message
 *  above, FP8_EINVAL) or locked by a run, else locks it and removes the temporaries of dead
 *  processes. A folder that is missing or cannot be opened holds no lock (the report's reads
 *  say what is wrong). */
int fp8_run_folder_open_report(const char *dir, fp8_run_folder *f, char *err, size_t errlen);
/** Ends the hold: complete (the run's files and its report are written) removes a pending
 *  run's checkpoint and then its marker; otherwise they stay (a resume writes the report
 *  again). The lock is released either way. Safe twice. */
void fp8_run_folder_close(fp8_run_folder *f, int complete);

/** Removes fp8lab's own temporaries of processes that are gone from dir, dir/plots,
 *  dir/notebooks_export and dir/.fp8lab-checkpoint: exactly the names `.<name>.tmp.<pid>` of
 *  a file fp8lab writes there (fp8_output_name_ok, the marker, the checkpoint), and the synth
 *  trace's `.synth_trace.tmp.<pid>/`, `.synth_trace.old.<pid>/` (also the `.trace.tmp.<pid>/`,
 *  `.trace.old.<pid>/` of earlier fp8lab versions). A pid that is a live process other than
 *  this one is left alone. Returns how many it removed. */
size_t fp8_rundir_remove_debris(const char *dir);

/** 0 when the synth trace folder path is missing or holds only what `fp8lab synth` writes
 *  (step_<N>.safetensors, amax.csv, amax.csv.tmp.<pid>): fp8lab's, and it may replace it.
 *  Otherwise FP8_EINVAL, "<path>: holds <name>, which fp8lab did not write: ...". */
int fp8_rundir_synth_owned(const char *path, char *err, size_t errlen);

/** 1 when dir holds anything but fp8lab's checkpoint folder (the "not empty" of a run without
 *  --force, once the temporaries of dead processes are gone). */
int fp8_rundir_nonempty(const char *dir);
/** 1 when dir holds anything but the marker, the checkpoint folder and (owned) synth_trace/:
 *  results of some run. */
int fp8_rundir_has_results(const char *dir);
/** Removes what an interrupted run left that is fp8lab's own and no result: the marker, the
 *  checkpoint folder and, with synth, an owned synth_trace/. */
void fp8_rundir_remove_interrupted(const char *dir, int synth);

/** The files a report that was killed may have written and listed nowhere (run.json lists a
 *  report's files only at its end), for the --force run that replaces it: the plots/ PNGs
 *  whose tEXt chunks say fp8lab drew them, advice.ini with the report's header, and the
 *  notebook of run.json's experiment. Added to o (FP8_OK or FP8_ENOMEM). */
int fp8_rundir_add_report_leftovers(const char *dir, fp8_outputs *o);

#endif
