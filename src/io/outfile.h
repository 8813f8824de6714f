/* outfile.h: output files that are never half-written (a temporary name in the same directory,
 * renamed into place on commit), the output-directory helpers, the one whole-file reader, and
 * the one opening of an input file (regular files only). */
#ifndef FP8LAB_IO_OUTFILE_H
#define FP8LAB_IO_OUTFILE_H

#include <stddef.h>
#include <stdio.h>

typedef struct {
  FILE *fp;
  char *tmp;   /**< <dir>/.<name>.tmp.<pid> */
  char *final; /**< <dir>/<name> */
} fp8_outfile;

/** The status of a file operation on an output that failed with errno e: FP8_EWRITE (a runtime
 *  failure, exit 1) when the disk is full or failing (ENOSPC, EDQUOT, EIO, EFBIG), else FP8_EIO
 *  (the output location: no such directory, no permission, a directory in the way). */
int fp8_write_errno_status(int e);
/** Opens <dir>/.<name>.tmp.<pid> for writing (on failure FP8_EIO naming the path, FP8_EWRITE
 *  when the disk is full or failing). */
int fp8_outfile_open(fp8_outfile *of, const char *dir, const char *name, char *err, size_t errlen);
/** Flushes, closes and renames into place; on any failure removes the temporary file and
 *  returns FP8_EWRITE ("<dir>/<name>: write failed: <reason>"; FP8_EIO for a rename that fails
 *  for the directory's sake, fp8_write_errno_status). */
int fp8_outfile_commit(fp8_outfile *of, char *err, size_t errlen);
/** fp8_outfile_commit, but an earlier file of the final name is removed before the rename
 *  instead of replaced by it: for the files of a folder marked unfinished while they go into
 *  place (a run's commit: an interrupted one is resumed and finishes the renames). Renaming
 *  over a file makes ext4 (auto_da_alloc) allocate and start writing the new file's blocks
 *  in the rename: 40 ms for a sweep's 26 MB of rows on this machine, a quarter of the run
 *  (docs/design.md). */
int fp8_outfile_commit_over(fp8_outfile *of, char *err, size_t errlen);
/** <dir>/<name> holding text and a newline, written as an outfile (open, then commit): a JSON
 *  document of fp8lab's (run.json, te_log.json). FP8_OK or the open's or commit's status. */
int fp8_outfile_write_text(const char *dir, const char *name, const char *text, char *err,
                           size_t errlen);
/** Closes and removes the temporary file if the outfile is still open (safe to call twice). */
void fp8_outfile_abort(fp8_outfile *of);
/** An outfile whose temporary is a path of the caller's (a partial file of a checkpoint, which
 *  outlives the process): keep < 0 creates tmp empty; keep >= 0 opens the existing tmp, cuts
 *  it to its first keep bytes and appends from there (FP8_EINVAL when it is missing or
 *  shorter). fp8_outfile_commit renames it to final. */
int fp8_outfile_open_path(fp8_outfile *of, const char *tmp, const char *final, long long keep,
                          char *err, size_t errlen);
/** Closes the outfile and keeps its temporary (a checkpoint's partial file; safe twice). */
void fp8_outfile_close_keep(fp8_outfile *of);

/** Writes a number the way every fp8lab CSV does: "%.9g" (round-trips float32), infinities as
 *  inf / -inf, NaN as nan (glibc would print -nan for some). */
void fp8_csv_put_num(FILE *fp, double v);
/** fp8_csv_put_num's text in out (NUL-terminated), its length returned: byte for byte
 *  printf's "%.9g", for nearly all values without printf (tests/results/test_csv_rows.c compares them). */
#define FP8_NUM_TEXT_MAX 32
int fp8_num_text(double v, char out[FP8_NUM_TEXT_MAX]);

/** Reads the rest of a stream into a new buffer (*buf, NUL-terminated, *len bytes without the
 *  NUL; the caller frees it): FP8_OK, FP8_ENOMEM, or FP8_EIO when the stream reports a read
 *  error (errno as fread left it). The one whole-file reader of fp8lab. */
int fp8_read_stream(FILE *f, char **buf, size_t *len);

/** Opens path for reading only when it is a regular file: every file fp8lab reads as an input
 *  of a trace (TE's logs, amax.csv, tokens.csv, snapshots, te_log.json, te_overflows.csv). The
 *  open is O_NONBLOCK (a FIFO's open would wait for a writer: the command would hang), then
 *  fstat, then O_NONBLOCK cleared. The descriptor (O_CLOEXEC), or -1 with err
 *  "<path>: cannot open: <reason>" (errno as open left it: ENOENT for a missing file) or
 *  "<path>: not a regular file" (a FIFO, device, socket or directory; errno EINVAL). */
int fp8_open_regular(const char *path, char *err, size_t errlen);
/** fp8_open_regular as a stdio stream for reading (NULL, err and errno as it says). */
FILE *fp8_fopen_regular(const char *path, char *err, size_t errlen);

/** mkdir -p (FP8_EIO with the path and reason when it fails or a component is a file). */
int fp8_mkdir_p(const char *dir, char *err, size_t errlen);
/** The outermost directory on dir's path that does not exist yet: what fp8_mkdir_p(dir) would
 *  create first (a new string), or NULL when dir exists (or out of memory). */
char *fp8_first_missing_dir(const char *dir);
/** Undoes fp8_mkdir_p(dir) for a run that wrote nothing: removes dir and its parents up to and
 *  including top (from fp8_first_missing_dir), each only while it is empty (rmdir). */
void fp8_rmdir_up(const char *dir, const char *top);
/** Removes a file or a directory tree (like rm -rf); missing paths are fine. */
void fp8_rmtree(const char *path);
/** 1 when dir exists and holds anything besides . and .. ; 0 otherwise. */
int fp8_dir_nonempty(const char *dir);

#endif
