/* run_resume.c: the checkpoint of a run, so that `fp8lab run --resume` continues a killed run
 * from its last checkpointed step with outputs byte-identical to an uninterrupted run
 * (docs/design.md, "Crash consistency and resume").
 *
 * <out>/.fp8lab-checkpoint/ holds, while the run writes it:
 *   steps.csv, histograms.csv, gemm.csv, stream.csv   the rows so far (the commit renames them
 *                                                     into the run folder)
 *   amax.bin    per micro-batch of each completed step (one for a step without micro rows),
 *               the ntensors float32 amaxes its end_phase calls were fed, after those of the
 *               warm steps before it (warm_history: run_warm.c)
 *   state       the checkpoint (written to .state.tmp.<pid>, then renamed): the bytes of each
 *               partial file and of amax.bin that belong to it, the counters and summary
 *               totals, the earlier run's outputs, the fingerprints, and every delayed scale
 *
 * The recipe state is not copied out of the engines: it is a function of the amaxes fed to
 * end_phase, so a resume feeds the same amaxes to fresh engines (no data loaded: a few float
 * operations per tensor and configuration and step) and checks that their scales are the
 * recorded ones bit for bit. That works for every engine behind engine.h (the GPU's state is
 * in device memory, behind the module's ABI) and is exact by construction.
 *
 * A checkpoint is taken between steps only, when no engine work is in flight (end_phase
 * synchronises) and every row of the steps before is in the partial files; the CPU engine's
 * threads never write rows, so its thread count does not change a byte.
 *
 * The file is for the binary that wrote it: native byte order and struct layout, the fp8lab
 * version and sizeof(fp8_summary_acc) recorded and checked, an FNV-1a checksum at the end. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run_folder.h"
#include "run_bytes.h"
#include "run_mpi.h"
#include "runner_internal.h"
#include "te_log.h" /* FP8_TE_LOG_FILE, FP8_TE_OVERFLOWS_FILE: fingerprinted */
#include "util.h"

#define CKPT_MAGIC "FP8CKPT\x01"
#define CKPT_VERSION 1u

static const char *part_file(const run_t *r, int k) {
  const fp8_schema *s[4] = {&fp8_schema_steps, &fp8_schema_histograms, &fp8_schema_gemm,
                            &fp8_schema_stream};
  return k == 3 && r->stream_npy ? FP8_STREAM_NPY_FILE : s[k]->file;
}

static void ckpt_path(const run_t *r, const char *name, char *buf, size_t len) {
  snprintf(buf, len, "%s/%s%s%s", r->out, FP8_RUN_CHECKPOINT_DIR, *name ? "/" : "", name);
}

/* ------------------------------------------------------------------ FNV-1a and a byte buffer */

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
  return h;
}
#define FNV_START 0xcbf29ce484222325ULL

/* ------------------------------------------------------------------ the partial files */

int run_ckpt_open(run_t *r, const run_ckpt_info *resume, char *err, size_t errlen) {
  char tmp[4096 + 128], fin[4096 + 64];
  int rc = FP8_OK;
  if (!resume) {
    ckpt_path(r, "", tmp, sizeof tmp);
    if ((rc = fp8_mkdir_p(tmp, err, errlen)) != FP8_OK) return rc;
  }
  const fp8_schema *schema[4] = {&fp8_schema_steps, &fp8_schema_histograms, &fp8_schema_gemm,
                                 &fp8_schema_stream};
  int want[4] = {1, 1, r->ex->gemm, r->has_stream};
  for (int k = 0; k < 4 && !rc; k++) {
    if (!want[k]) continue;
    ckpt_path(r, part_file(r, k), tmp, sizeof tmp);
    snprintf(fin, sizeof fin, "%s/%s", r->out, part_file(r, k));
    long long keep = resume ? resume->len[k] : -1;
    struct stat sb;
    if (resume && keep < 0) continue; /* the interrupted run had none */
    /* a commit drops a gemm.csv without rows instead of renaming it */
    if (resume && resume->phase == RUN_CKPT_COMMIT && k == 2 && r->gemm_rows == 0) continue;
    if (resume && resume->phase == RUN_CKPT_COMMIT && lstat(tmp, &sb) != 0) {
      /* renamed into place before the kill: it must be the whole file */
      if (stat(fin, &sb) != 0 || sb.st_size != keep)
        rc = fp8_errorf(FP8_EINVAL, err, errlen, "%s: not the file the interrupted run "
                        "committed (%lld bytes expected): start over with --force", fin, keep);
      continue;
    }
    rc = fp8_outfile_open_path(&r->part[k], tmp, fin, keep, err, errlen);
    if (!rc && !resume && k == 3 && r->stream_npy) { /* stream.npy: its .npy header */
      char h[FP8_STREAM_NPY_HEADER_MAX];
      const fp8_stream_layout *lay = &r->stream_lay;
      int n = fp8_stream_npy_header(lay->nrec, lay->ntensors, lay->nconfigs, h, sizeof h);
      if (n < 0) rc = fp8_errorf(FP8_EINVAL, err, errlen, "stream.npy: header too long");
      else fwrite(h, 1, (size_t)n, r->part[k].fp);
    } else if (!rc && !resume) /* gemm.csv: the interval columns with the sampled mode only,
                                  the ratio columns with an FP4 configuration (issue 42) */
      fp8_schema_put_header_n(r->part[k].fp, schema[k],
                              k == 2 ? fp8_gemm_csv_ncols(r->ex->gemm_sampled, r->fp4_ref >= 0,
                                                          r->ex->tensor_core != FP8_TC_EXACT)
                                     : schema[k]->ncols);
  }
  if (rc || (resume && resume->phase != RUN_CKPT_REPLAY)) return rc;
  ckpt_path(r, "amax.bin", tmp, sizeof tmp);
  fp8_outfile amax;
  size_t micros = 0; /* the end_phase pairs of the steps done: the trace says how many */
  for (size_t si = 0; resume && si < r->steps_done; si++) micros += r->warm_micro[si] + r->nmicro[si];
  long long keep = resume ? (long long)(micros * r->ntensors * sizeof(float)) : -1;
  if ((rc = fp8_outfile_open_path(&amax, tmp, tmp, keep, err, errlen)) != FP8_OK) return rc;
  r->amax_fp = amax.fp; /* kept open by the run; the paths are not needed again */
  amax.fp = NULL;
  fp8_outfile_close_keep(&amax);
  return FP8_OK;
}

void run_ckpt_close(run_t *r) {
  run_writer_stop(r); /* first: the thread writes to part[0] and part[3] */
  if (r->amax_fp) fclose(r->amax_fp);
  r->amax_fp = NULL;
  for (int k = 0; r->part && k < 4; k++) fp8_outfile_close_keep(&r->part[k]);
}

int run_ckpt_micro(run_t *r, char *err, size_t errlen) {
  /* MPI: process 0 holds the files (every process knows every amax after the step's sync) */
  if (r->me != 0) return FP8_OK;
  if (fwrite(r->amax, sizeof *r->amax, r->ntensors, r->amax_fp) != r->ntensors)
    return fp8_errorf(FP8_EWRITE, err, errlen, "%s/%s/amax.bin: write failed: %s", r->out,
                      FP8_RUN_CHECKPOINT_DIR, strerror(errno ? errno : EIO));
  return FP8_OK;
}

int run_ckpt_step(run_t *r, char *err, size_t errlen) {
  /* at most every ckpt_every seconds, and never more than a tenth of the time: a checkpoint's
   * cost grows with tensors x configurations (the summary totals and the scales) */
  double now = run_now_s(), every = r->ckpt_every;
  if (every < 10.0 * r->ckpt_cost) every = 10.0 * r->ckpt_cost;
  /* (after the last step the commit's checkpoint follows at once) */
  int due = r->steps_done < r->nsteps && now - r->ckpt_last >= every;
  if (!r->split) return due ? run_ckpt_write(r, RUN_CKPT_REPLAY, err, errlen) : FP8_OK;
  /* MPI: process 0's clock decides; the others' counts and totals come to it first */
  int32_t d = due;
  fp8_mpi_bcast(&d, sizeof d, 0);
  if (!d) return FP8_OK;
  int rc = run_split_collect(r, err, errlen);
  if (!rc && r->me == 0) rc = run_ckpt_write(r, RUN_CKPT_REPLAY, err, errlen);
  return rc;
}

/* ------------------------------------------------------------------ writing a checkpoint */

/* Every delayed scale the engines hold now: [ntensors * nconfigs], 0 where none. */
static float *engine_scales(run_t *r, char *err, size_t errlen) {
  size_t nc = r->nconfigs;
  float *sc = calloc(r->ntensors * nc + 1, sizeof *sc);
  if (!sc) {
    fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
    return NULL;
  }
  for (size_t t = 0; t < r->ntensors; t++) {
    int rc = fp8_engine_state(r->engine, t, sc + t * nc, err, errlen);
    if (rc) {
      free(sc);
      return NULL;
    }
  }
  return sc;
}

int run_ckpt_write(run_t *r, run_ckpt_phase phase, char *err, size_t errlen) {
  double t = run_now_s();
  int64_t len[4] = {-1, -1, -1, -1};
  int rc0 = run_writer_drain(r, err, errlen); /* the rows whole up to this step */
  if (rc0) return rc0;
  for (int k = 0; k < 4; k++) {
    FILE *fp = r->part[k].fp;
    if (!fp) continue;
    if (fflush(fp) != 0 || ferror(fp))
      return fp8_errorf(FP8_EWRITE, err, errlen, "%s/%s: write failed: %s", r->out, part_file(r, k),
                        strerror(errno ? errno : EIO));
    len[k] = (int64_t)ftello(fp);
  }
  if (r->amax_fp && fflush(r->amax_fp) != 0)
    return fp8_errorf(FP8_EWRITE, err, errlen, "%s/%s/amax.bin: write failed: %s", r->out,
                      FP8_RUN_CHECKPOINT_DIR, strerror(errno ? errno : EIO));
  float *sc = phase == RUN_CKPT_REPLAY ? engine_scales(r, err, errlen) : calloc(1, 1);
  if (!sc) return FP8_ENOMEM;
  size_t nsc = phase == RUN_CKPT_REPLAY ? r->ntensors * r->nconfigs : 0;
  buf_t w = {0};
  char version[32] = FP8LAB_VERSION, started[64], engine[64];
  put(&w, CKPT_MAGIC, 8);
  put_u64(&w, CKPT_VERSION);
  put_u64(&w, sizeof(fp8_summary_acc));
  put(&w, version, sizeof version);
  put_u64(&w, (uint64_t)phase);
  put_u64(&w, r->fp_exp);
  put_u64(&w, r->fp_trace);
  memset(engine, 0, sizeof engine);
  snprintf(engine, sizeof engine, "%s", r->fp_engine);
  put(&w, engine, sizeof engine);
  uint64_t dims[4] = {r->nsteps, r->ntensors, r->nconfigs, r->steps_done};
  put(&w, dims, sizeof dims);
  /* (MPI: with the other processes' counts as of run_split_collect) */
  long long counts[4] = {r->rows + r->peer_counts[0], r->gemm_rows + r->peer_counts[1],
                         r->stream_rows, r->mismatches + r->peer_counts[2]};
  put(&w, counts, sizeof counts);
  put(&w, len, sizeof len);
  double wall = r->wall_base + (t - r->t0);
  put(&w, &wall, sizeof wall);
  memset(started, 0, sizeof started);
  snprintf(started, sizeof started, "%s", r->started);
  put(&w, started, sizeof started);
  put_u64(&w, r->earlier.n);
  for (size_t i = 0; i < r->earlier.n; i++) {
    put_u64(&w, strlen(r->earlier.names[i]));
    put(&w, r->earlier.names[i], strlen(r->earlier.names[i]));
  }
  put_u64(&w, nsc);
  put(&w, sc, nsc * sizeof *sc);
  for (size_t i = 0; i < r->ntensors; i++) put(&w, r->t[i].acc, r->nconfigs * sizeof *r->t[i].acc);
  put_u64(&w, fnv(FNV_START, w.b, w.n));
  free(sc);
  if (w.oom) {
    free(w.b);
    return fp8_errorf(FP8_ENOMEM, err, errlen, "checkpoint: out of memory");
  }
  char dir[4096 + 64];
  ckpt_path(r, "", dir, sizeof dir);
  fp8_outfile of;
  int rc = fp8_outfile_open(&of, dir, "state", err, errlen);
  if (!rc) {
    fwrite(w.b, 1, w.n, of.fp);
    rc = fp8_outfile_commit(&of, err, errlen);
  }
  free(w.b);
  r->ckpt_last = run_now_s();
  r->ckpt_cost = r->ckpt_last - t;
  return rc;
}

/* ------------------------------------------------------------------ fingerprints */

static uint64_t file_identity(uint64_t h, const char *path) {
  struct stat sb;
  h = fnv(h, path, strlen(path) + 1);
  if (stat(path, &sb) != 0) return fnv(h, "missing", 7);
  int64_t id[3] = {(int64_t)sb.st_size, (int64_t)sb.st_mtim.tv_sec, (int64_t)sb.st_mtim.tv_nsec};
  return fnv(h, id, sizeof id);
}

int run_ckpt_fingerprint(run_t *r, const fp8_trace *tr, const char *trace_dir, char *err,
                         size_t errlen) {
  char real[PATH_MAX], p[4096 + 48];
  /* the experiment: its path and its text (run.json records both) */
  uint64_t h = FNV_START;
  const char *file = realpath(r->ex->file, real) ? real : r->ex->file;
  h = fnv(h, file, strlen(file) + 1);
  FILE *fp = fopen(r->ex->file, "rb");
  char *text = NULL;
  size_t n = 0;
  if (!fp || fp8_read_stream(fp, &text, &n) != FP8_OK) {
    if (fp) fclose(fp);
    return fp8_errorf(FP8_EIO, err, errlen, "%s: cannot read: %s", r->ex->file, strerror(errno));
  }
  fclose(fp);
  r->fp_exp = fnv(h, text, n);
  free(text);
  /* the trace: every file run.json lists as an input, by path, size and modification time */
  const char *tdir = realpath(trace_dir, real) ? real : trace_dir;
  h = fnv(FNV_START, tdir, strlen(tdir) + 1);
  for (size_t i = 0; i < tr->nsteps && !tr->nranks; i++) h = file_identity(h, tr->step_paths[i]);
  if (!tr->nranks) {
    snprintf(p, sizeof p, "%s/amax.csv", trace_dir);
    h = file_identity(h, p);
    snprintf(p, sizeof p, "%s/tokens.csv", trace_dir); /* experts.csv's input */
    h = file_identity(h, p);
  }
  for (size_t rk = 0; rk < tr->nranks; rk++) {
    const fp8_trace *t = &tr->ranks[rk];
    for (size_t i = 0; i < t->nsteps; i++) h = file_identity(h, t->step_paths[i]);
    snprintf(p, sizeof p, "%s/amax.csv", t->dir);
    h = file_identity(h, p);
    snprintf(p, sizeof p, "%s/tokens.csv", t->dir);
    h = file_identity(h, p);
  }
  /* a TransformerEngine import's te_log.json and te_overflows.csv, where the trace has them
   * (run.json lists them; absent, the fingerprint is as it was before issue 41) */
  static const char *const te_files[2] = {FP8_TE_LOG_FILE, FP8_TE_OVERFLOWS_FILE};
  for (int k = 0; k < 2; k++) {
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", trace_dir, te_files[k]);
    if (stat(p, &sb) == 0) h = file_identity(h, p);
  }
  r->fp_trace = h;
  /* the engine without its thread count ("cpu (4 threads)"): the threads change no byte */
  const char *name = fp8_engine_name(r->engine);
  size_t en = strlen(name);
  if (en >= sizeof r->fp_engine) en = sizeof r->fp_engine - 1;
  memcpy(r->fp_engine, name, en);
  r->fp_engine[en] = '\0';
  char *paren = strstr(r->fp_engine, " (");
  if (strncmp(r->fp_engine, "cpu", 3) == 0 && paren) *paren = '\0';
  return FP8_OK;
}

/* ------------------------------------------------------------------ resume */

/* Feeds the engines the amaxes of the steps done, as the interrupted run's end_phase calls did,
 * then compares their scales with the checkpoint's. */
static int replay_amax(run_t *r, const int64_t *steps, const float *want, char *err,
                       size_t errlen) {
  char path[4096 + 64];
  ckpt_path(r, "amax.bin", path, sizeof path);
  FILE *fp = r->me == 0 ? fopen(path, "rb") : NULL;
  int rc = r->me != 0 || fp ? FP8_OK
                            : fp8_errorf(FP8_EINVAL, err, errlen, "%s: missing: the checkpoint "
                                         "cannot be resumed (start over with --force)", path);
  if (r->split && (rc = fp8_mpi_agree(rc, err, errlen)) != FP8_OK) return rc;
  if (rc) return rc;
  for (size_t si = 0; si < r->steps_done && !rc; si++) {
    rc = fp8_engine_begin_step(r->engine, steps[si], err, errlen);
    /* one pair per micro-batch: the warm steps' before the step's own (run_warm.c) */
    for (size_t m = 0; m < r->warm_micro[si] + r->nmicro[si] && !rc; m++) {
      /* MPI: process 0 reads, every process replays (their states must be the same) */
      int32_t got = r->me != 0 || fread(r->amax, sizeof *r->amax, r->ntensors, fp) == r->ntensors;
      if (r->split) {
        fp8_mpi_bcast(&got, sizeof got, 0);
        if (got) fp8_mpi_bcast(r->amax, r->ntensors * sizeof *r->amax, 0);
      }
      if (!got) {
        rc = fp8_errorf(FP8_EINVAL, err, errlen, "%s: shorter than the checkpoint records: it "
                        "cannot be resumed (start over with --force)", path);
        break;
      }
      rc = fp8_engine_end_phase(r->engine, FP8_FWD, r->amax, err, errlen);
      if (!rc) rc = fp8_engine_end_phase(r->engine, FP8_BWD, r->amax, err, errlen);
      if (!rc) run_note_warm(r);
      if (r->split) rc = fp8_mpi_agree(rc, err, errlen); /* all go on, or none */
    }
  }
  if (fp) fclose(fp);
  if (rc || r->me != 0) return rc;
  float *got = engine_scales(r, err, errlen);
  if (!got) return FP8_ENOMEM;
  for (size_t i = 0; i < r->ntensors * r->nconfigs && !rc; i++)
    if (memcmp(&got[i], &want[i], sizeof *got) != 0)
      rc = fp8_errorf(FP8_EINVAL, err, errlen, "%s/%s: the replayed state of tensor %s under "
                      "configuration %zu is not the one recorded: start over with --force",
                      r->out, FP8_RUN_CHECKPOINT_DIR, r->t[i / r->nconfigs].name,
                      i % r->nconfigs);
  free(got);
  return rc;
}

/* Parses the checkpoint into r (or the first reason it is not one of this replay). */
static int parse_ckpt(run_t *r, rd_t *in, const char *exp_given, run_ckpt_info *info,
                      float **scales, const char *path, char *err, size_t errlen) {
  char magic[8], version[32], engine[64];
  get(in, magic, 8);
  uint64_t ver = get_u64(in), accsz = get_u64(in);
  get(in, version, sizeof version);
  version[sizeof version - 1] = '\0';
  if (in->bad || memcmp(magic, CKPT_MAGIC, 8) != 0 || ver != CKPT_VERSION ||
      accsz != sizeof(fp8_summary_acc) || strcmp(version, FP8LAB_VERSION) != 0)
    return fp8_errorf(FP8_EINVAL, err, errlen, "%s: not a checkpoint of this fp8lab (%s): start "
                      "over with --force", path, FP8LAB_VERSION);
  info->phase = (run_ckpt_phase)get_u64(in);
  uint64_t fexp = get_u64(in), ftrace = get_u64(in);
  get(in, engine, sizeof engine);
  engine[sizeof engine - 1] = '\0';
  uint64_t dims[4];
  get(in, dims, sizeof dims);
  if (fexp != r->fp_exp)
    return fp8_errorf(FP8_EINVAL, err, errlen, "%s: not the experiment of the interrupted run in "
                      "%s (its path or text differs): resume with the same experiment file, or "
                      "start over with --force", exp_given, r->out);
  if (ftrace != r->fp_trace)
    return fp8_errorf(FP8_EINVAL, err, errlen, "%s: the trace changed since the interrupted run "
                      "started (a file added, removed or rewritten): resume needs the same "
                      "trace; start over with --force", r->out);
  if (strcmp(engine, r->fp_engine) != 0)
    return fp8_errorf(FP8_EINVAL, err, errlen, "%s: the interrupted run used the engine '%s', "
                      "this one '%s': resume on the same (--device), or start over with --force",
                      r->out, engine, r->fp_engine);
  if (dims[0] != r->nsteps || dims[1] != r->ntensors || dims[2] != r->nconfigs ||
      dims[3] > dims[0] || info->phase < RUN_CKPT_REPLAY || info->phase > RUN_CKPT_COMMITTED)
    return fp8_errorf(FP8_EINVAL, err, errlen, "%s: does not fit this replay (%llu steps, %llu "
                      "tensors, %llu configurations recorded): start over with --force", path,
                      (unsigned long long)dims[0], (unsigned long long)dims[1],
                      (unsigned long long)dims[2]);
  r->steps_done = (size_t)dims[3];
  long long counts[4];
  get(in, counts, sizeof counts);
  r->rows = counts[0];
  r->gemm_rows = counts[1];
  r->stream_rows = counts[2];
  r->mismatches = counts[3];
  get(in, info->len, sizeof info->len);
  get(in, &r->wall_base, sizeof r->wall_base);
  get(in, r->started, sizeof r->started);
  r->started[sizeof r->started - 1] = '\0';
  uint64_t nearlier = get_u64(in);
  for (uint64_t i = 0; i < nearlier && !in->bad; i++) {
    uint64_t k = get_u64(in);
    char name[600];
    if (k >= sizeof name) in->bad = 1;
    get(in, name, in->bad ? 0 : k);
    name[in->bad ? 0 : k] = '\0';
    if (!in->bad && fp8_outputs_add(&r->earlier, name) != FP8_OK)
      return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  }
  uint64_t nsc = get_u64(in);
  if (in->bad || nsc != (info->phase == RUN_CKPT_REPLAY ? r->ntensors * r->nconfigs : 0) ||
      in->n - in->at < nsc * sizeof(float))
    in->bad = 1;
  else if (!(*scales = malloc(nsc * sizeof(float) + 1)))
    return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  get(in, *scales, in->bad ? 0 : nsc * sizeof(float));
  for (size_t i = 0; i < r->ntensors; i++)
    get(in, r->t[i].acc, r->nconfigs * sizeof *r->t[i].acc);
  if (in->bad || in->at != in->n)
    return fp8_errorf(FP8_EINVAL, err, errlen, "%s: truncated or damaged: start over with --force",
                      path);
  return FP8_OK;
}

static int restore_file(run_t *r, const char *exp_given, run_ckpt_info *info, float **scales,
                        char *err, size_t errlen) {
  char path[4096 + 64];
  ckpt_path(r, "state", path, sizeof path);
  FILE *fp = fopen(path, "rb");
  if (!fp)
    return fp8_errorf(FP8_EINVAL, err, errlen, "%s: the interrupted run left no checkpoint "
                      "(it was killed before its first): start over with --force", r->out);
  char *b = NULL;
  size_t n = 0;
  int rc = fp8_read_stream(fp, &b, &n);
  fclose(fp);
  if (rc) return fp8_errorf(rc, err, errlen, "%s: cannot read: %s", path, strerror(errno));
  /* the checksum first: a damaged file is refused before any of it is believed */
  uint64_t sum = 0;
  if (n >= 8) memcpy(&sum, b + n - 8, 8);
  if (n < 8 || fnv(FNV_START, b, n - 8) != sum) {
    rc = fp8_errorf(FP8_EINVAL, err, errlen, "%s: truncated or damaged (checksum): start over "
                    "with --force", path);
  } else {
    rd_t in = {.b = (const unsigned char *)b, .n = n - 8};
    rc = parse_ckpt(r, &in, exp_given, info, scales, path, err, errlen);
  }
  free(b);
  return rc;
}

int run_ckpt_restore(run_t *r, const int64_t *steps, const char *exp_given,
                     run_ckpt_info *info, char *err, size_t errlen) {
  float *scales = NULL;
  /* MPI: the checkpoint is process 0's (the others need not see the folder); it tells the
   * others where the replay stands and hands each its tensors' totals */
  int rc = r->me == 0 ? restore_file(r, exp_given, info, &scales, err, errlen) : FP8_OK;
  if (r->split) {
    if ((rc = fp8_mpi_agree(rc, err, errlen)) != FP8_OK) {
      free(scales);
      return rc;
    }
    uint64_t at[2] = {r->steps_done, (uint64_t)info->phase};
    fp8_mpi_bcast(at, sizeof at, 0);
    r->steps_done = (size_t)at[0];
    info->phase = (run_ckpt_phase)at[1];
    rc = run_split_scatter(r, err, errlen);
  }
  if (!rc && info->phase == RUN_CKPT_REPLAY) rc = replay_amax(r, steps, scales, err, errlen);
  free(scales);
  return rc;
}
