/* run_split.c: the MPI replay (issue 26; run_mpi.h). A multi-rank trace's ranks go to the
 * processes balanced by their snapshot bytes (fp8_mpi_assign, decided by process 0); process 0
 * owns the output folder and writes every file.
 *
 * A step: each process replays the parts (ranks) it owns, in part order; a process other than
 * 0 writes their steps.csv, histograms.csv and gemm.csv rows into memory and sends them to
 * process 0, which writes every part's rows in part order, its own directly: the files are
 * byte for byte those of one process. Then one all-reduce (MAX) over the tensors' amaxes and
 * snapshot flags, each process having zeroed those of the ranks it does not own, gives every
 * process every tensor's amax: all run the same updates and hold the same states, and process
 * 0 writes stream.csv. A failure on one process is carried through the protocol (its parts'
 * messages say so) and agreed on after the step: every process returns the first failing
 * process's status and message. At the end the row counts are summed and the summary totals
 * of the tensors each process owns go to process 0. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "run_bytes.h"
#include "run_mpi.h"
#include "runner_internal.h"

enum { TAG_PART = 1, TAG_ACC = 2 };

/* The bytes of a snapshot: a safetensors file's size, or the sum of an npy folder's files. */
static uint64_t snapshot_bytes(const char *path) {
  struct stat sb;
  if (stat(path, &sb) != 0) return 0;
  if (!S_ISDIR(sb.st_mode)) return (uint64_t)sb.st_size;
  uint64_t n = 0;
  DIR *d = opendir(path);
  if (!d) return 0;
  for (struct dirent *e; (e = readdir(d));) {
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", path, e->d_name);
    if (e->d_name[0] != '.' && stat(p, &sb) == 0 && S_ISREG(sb.st_mode)) n += (uint64_t)sb.st_size;
  }
  closedir(d);
  return n;
}

int run_split_assign(run_t *r, const fp8_trace *tr, char *err, size_t errlen) {
  /* process 0 sizes the ranks and decides; the others take its answer (a file system may show
   * another process a size a moment late: the assignment must be one) */
  uint64_t *bytes = r->me == 0 ? calloc(tr->nranks + 1, sizeof *bytes) : NULL;
  r->owner = malloc((tr->nranks + 1) * sizeof *r->owner);
  int rc = !r->owner || (r->me == 0 && !bytes) ? fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory")
                                               : FP8_OK;
  if ((rc = fp8_mpi_agree(rc, err, errlen)) != FP8_OK) {
    free(bytes);
    return rc;
  }
  if (r->me == 0) {
    for (size_t k = 0; k < tr->nranks; k++)
      for (size_t i = 0; i < tr->ranks[k].nsteps; i++)
        bytes[k] += snapshot_bytes(tr->ranks[k].step_paths[i]);
    fp8_mpi_assign(bytes, tr->nranks, r->np, r->owner);
  }
  fp8_mpi_bcast(r->owner, tr->nranks * sizeof *r->owner, 0);
  free(bytes);
  return FP8_OK;
}

void run_split_part(run_t *r, const fp8_trace *tr, size_t snap, size_t rank, int64_t step,
                    int *prc, char *err, size_t errlen) {
  const int owner = run_owner(r, rank);
  if (owner == r->me && r->me == 0) { /* process 0's own part: straight into the files */
    if (*prc == FP8_OK) *prc = run_part(r, tr, snap, rank, step, err, errlen);
    return;
  }
  if (owner == r->me) { /* replayed here, its rows to process 0 */
    char *txt[3];
    size_t len[3];
    FILE *fp[3];
    for (int k = 0; k < 3; k++) {
      txt[k] = NULL;
      len[k] = 0;
      fp[k] = open_memstream(&txt[k], &len[k]);
    }
    int rc = *prc;
    if (!fp[0] || !fp[1] || !fp[2]) rc = rc ? rc : fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
    if (rc == FP8_OK) {
      r->steps_fp = fp[0];
      r->hist_fp = fp[1];
      r->gemm_fp = fp[2];
      rc = run_part(r, tr, snap, rank, step, err, errlen);
      r->steps_fp = r->hist_fp = r->gemm_fp = NULL;
    }
    for (int k = 0; k < 3; k++)
      if (fp[k] && fclose(fp[k]) != 0 && rc == FP8_OK)
        rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
    buf_t b = {0};
    int32_t code = rc;
    put(&b, &code, sizeof code);
    if (rc != FP8_OK) {
      size_t n = strlen(err);
      put_u64(&b, n);
      put(&b, err, n);
    } else {
      for (int k = 0; k < 3; k++) {
        put_u64(&b, len[k]);
        put(&b, txt[k], len[k]);
      }
    }
    for (int k = 0; k < 3; k++) free(txt[k]);
    if (b.oom) { /* the status alone (process 0 names the process): the protocol must go on */
      rc = code = FP8_ENOMEM;
      fp8_mpi_send(0, TAG_PART, &code, sizeof code);
    } else {
      fp8_mpi_send(0, TAG_PART, b.b, b.n);
    }
    free(b.b);
    if (*prc == FP8_OK && rc != FP8_OK) *prc = rc;
    return;
  }
  if (r->me != 0) return; /* neither its owner nor the writer */
  /* process 0: another process's part, written at its turn */
  void *msg;
  size_t len;
  if (fp8_mpi_recv(owner, TAG_PART, &msg, &len) != FP8_OK) {
    if (*prc == FP8_OK) *prc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
    return;
  }
  rd_t in = {msg, len, 0, 0};
  int32_t code = FP8_EIO;
  get(&in, &code, sizeof code);
  if (code != FP8_OK) {
    uint64_t n = get_u64(&in);
    const char *m = get_view(&in, (size_t)n);
    if (*prc == FP8_OK) {
      *prc = code;
      if (m) snprintf(err, errlen, "%.*s", (int)n, m);
      else snprintf(err, errlen, "process %d: out of memory", owner);
    }
  } else if (*prc == FP8_OK) {
    FILE *dst[3] = {r->steps_fp, r->hist_fp, r->gemm_fp};
    for (int k = 0; k < 3; k++) {
      uint64_t n = get_u64(&in);
      const char *t = get_view(&in, (size_t)n);
      if (!t) {
        *prc = fp8_errorf(FP8_EIO, err, errlen, "process %d: a malformed message", owner);
        break;
      }
      if (n && dst[k]) fwrite(t, 1, (size_t)n, dst[k]); /* a failed write: check_writes */
    }
  }
  free(msg);
}

int run_split_sync(run_t *r, int have_snap, int prc, char *err, size_t errlen) {
  int rc = fp8_mpi_agree(prc, err, errlen);
  if (rc || !have_snap) return rc;
  unsigned char *snapf = malloc(r->ntensors + 1);
  int oom = !snapf;
  /* every process must take part in the all-reduces: an allocation failure is agreed on
   * first */
  if ((rc = fp8_mpi_agree(oom ? fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory") : FP8_OK,
                          err, errlen)) != FP8_OK) {
    free(snapf);
    return rc;
  }
  for (size_t i = 0; i < r->ntensors; i++) {
    int mine = run_owner(r, r->t[i].rank) == r->me;
    snapf[i] = mine ? (unsigned char)r->t[i].snap : 0;
    if (!mine && !r->multi_micro) r->amax[i] = 0.0f; /* several micro-batches: amax.csv's, known
                                                       to every process */
  }
  if (!r->multi_micro) fp8_mpi_max_f32(r->amax, r->ntensors);
  fp8_mpi_max_u8(snapf, r->ntensors);
  for (size_t i = 0; i < r->ntensors; i++) r->t[i].snap = snapf[i];
  free(snapf);
  return FP8_OK;
}

int run_split_gather(run_t *r, char *err, size_t errlen) {
  int64_t counts[3] = {r->rows, r->gemm_rows, r->mismatches};
  fp8_mpi_sum_i64(counts, 3);
  r->rows = counts[0];
  r->gemm_rows = counts[1];
  r->mismatches = counts[2];
  const size_t nc = r->nconfigs, one = nc * sizeof(fp8_summary_acc);
  int rc = FP8_OK;
  if (r->me != 0) { /* the totals of the tensors this process owns, in tensor order */
    buf_t b = {0};
    for (size_t i = 0; i < r->ntensors; i++)
      if (run_owner(r, r->t[i].rank) == r->me) put(&b, r->t[i].acc, one);
    if (b.oom) rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
    fp8_mpi_send(0, TAG_ACC, b.oom ? NULL : b.b, b.oom ? 0 : b.n);
    free(b.b);
    return fp8_mpi_agree(rc, err, errlen);
  }
  for (int p = 1; p < r->np; p++) {
    void *msg;
    size_t len;
    if (fp8_mpi_recv(p, TAG_ACC, &msg, &len) != FP8_OK) {
      if (!rc) rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
      continue;
    }
    rd_t in = {msg, len, 0, 0};
    for (size_t i = 0; i < r->ntensors && !rc; i++) {
      if (run_owner(r, r->t[i].rank) != p) continue;
      const void *q = get_view(&in, one);
      if (!q) rc = fp8_errorf(FP8_EIO, err, errlen, "process %d: its summary totals are short", p);
      else memcpy(r->t[i].acc, q, one);
    }
    free(msg);
  }
  return fp8_mpi_agree(rc, err, errlen);
}
