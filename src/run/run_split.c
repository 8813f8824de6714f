/* run_split.c: the MPI replay (issue 26; run_mpi.h). The tensors go to the processes in units
 * balanced by their snapshot bytes (fp8_mpi_assign, decided by process 0): a multi-rank
 * trace's ranks, or a single-rank trace's layers (a layer's input, weight and grad_output in
 * one unit, for gemm.csv). Process 0 owns the output folder and writes every file.
 *
 * A step: for each part (rank) in part order, the processes that own some of its tensors
 * replay them. A process other than 0 writes its rows (steps.csv, histograms.csv, gemm.csv)
 * into memory, noting where each tensor's and layer's rows end, and sends them to process 0,
 * which merges every owner's rows into the one-process order (tensors ascending, layers by
 * name); a part process 0 alone owns goes straight into its files. Then one all-reduce (MAX)
 * over the tensors' amaxes and snapshot flags, each process having zeroed those of the tensors
 * it does not own, gives every process every tensor's amax: all run the same updates and hold
 * the same states, and process 0 writes stream.csv. The all-reduce is MPI's, or NCCL's between
 * the GPUs when the GPU engine runs (run_split_comm). A failure on one process is carried
 * through the protocol (its messages say so) and agreed on after the step: every process
 * returns the first failing process's status and message. At a checkpoint and at the end the
 * others' row counts and summary totals go to process 0; a resume hands them back. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "amax_exchange.h"
#include "run_bytes.h"
#include "run_mpi.h"
#include "run_segs.h"
#include "runner_internal.h"
#include "util.h"

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

/* A single-rank trace's unit of work: a layer (`<layer>.input`, `.weight` and `.grad_output`
 * stay together, for gemm.csv), or a tensor of another name on its own. Its key is the layer's
 * name, or the tensor's: the length of the name's prefix that keys it. */
static size_t unit_len(const char *name) {
  static const char *const roles[3] = {".input", ".weight", ".grad_output"};
  size_t n = strlen(name);
  for (int k = 0; k < 3; k++) {
    size_t m = strlen(roles[k]);
    if (n > m && strcmp(name + n - m, roles[k]) == 0) return n - m;
  }
  return n;
}

typedef struct {
  const char *name;
  size_t len, tensor;
} unit_key;

static int cmp_unit(const void *a, const void *b) {
  const unit_key *x = a, *y = b;
  size_t n = x->len < y->len ? x->len : y->len;
  int c = memcmp(x->name, y->name, n);
  if (c) return c;
  if (x->len != y->len) return x->len < y->len ? -1 : 1;
  return x->tensor < y->tensor ? -1 : x->tensor > y->tensor;
}

/* Process 0: the bytes of each unit (a rank, or a single-rank trace's layer) and the tensors'
 * units; FP8_OK or the first failure (a snapshot that cannot be read: the one-process run would
 * name it too). */
static int unit_bytes(run_t *r, const fp8_trace *tr, uint64_t **bytes_out, size_t **unit_out,
                      size_t *nunits, char *err, size_t errlen) {
  size_t n = r->ntensors;
  uint64_t *bytes = calloc((tr->nranks ? tr->nranks : n) + 1, sizeof *bytes);
  size_t *unit = malloc((n + 1) * sizeof *unit);
  unit_key *k = tr->nranks ? NULL : malloc((n + 1) * sizeof *k);
  int rc = FP8_OK;
  if (!bytes || !unit || (!tr->nranks && !k)) {
    rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
    goto done;
  }
  if (tr->nranks) { /* a rank is a unit: its snapshot files' sizes */
    for (size_t i = 0; i < n; i++) unit[i] = r->t[i].rank;
    for (size_t q = 0; q < tr->nranks; q++)
      for (size_t i = 0; i < tr->ranks[q].nsteps; i++)
        bytes[q] += snapshot_bytes(tr->ranks[q].step_paths[i]);
    *nunits = tr->nranks;
    goto done;
  }
  for (size_t i = 0; i < n; i++) k[i] = (unit_key){r->t[i].name, unit_len(r->t[i].name), i};
  qsort(k, n, sizeof *k, cmp_unit);
  size_t nu = 0;
  for (size_t i = 0; i < n; i++) {
    if (i > 0 && (k[i].len != k[i - 1].len || memcmp(k[i].name, k[i - 1].name, k[i].len) != 0))
      nu++;
    unit[k[i].tensor] = nu;
  }
  *nunits = n ? nu + 1 : 0;
  /* the tensors' bytes from the snapshots' headers (mapped, their data not read) */
  for (size_t si = 0; si < tr->nsteps && !rc; si++) {
    fp8_step s;
    if ((rc = fp8_trace_load_step(tr, si, &s, err, errlen)) != FP8_OK) break;
    for (size_t j = 0; j < s.ntensors; j++) {
      ssize_t idx = run_find_tensor(r, s.tensors[j].name);
      if (idx >= 0)
        bytes[unit[idx]] += (uint64_t)s.tensors[j].numel * fp8_dtype_size(s.tensors[j].dtype);
    }
    fp8_step_free(&s);
  }
done:
  free(k);
  if (rc) {
    free(bytes);
    free(unit);
    return rc;
  }
  *bytes_out = bytes;
  *unit_out = unit;
  return FP8_OK;
}

int run_split_assign(run_t *r, const fp8_trace *tr, char *err, size_t errlen) {
  /* process 0 sizes the units and decides; the others take its answer (a file system may show
   * another process a size a moment late: the assignment must be one) */
  uint64_t *bytes = NULL;
  size_t *unit = NULL, nunits = 0;
  int *uowner = NULL;
  r->owner = malloc((r->ntensors + 1) * sizeof *r->owner);
  r->exch = malloc((2 * r->ntensors + 1) * sizeof *r->exch); /* run_split_sync's */
  int rc = r->owner && r->exch ? FP8_OK : fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  if (!rc && r->me == 0) rc = unit_bytes(r, tr, &bytes, &unit, &nunits, err, errlen);
  if (!rc && r->me == 0 && !(uowner = malloc((nunits + 1) * sizeof *uowner)))
    rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  if (!rc && r->me == 0 && !(r->proc_bytes = calloc((size_t)r->np, sizeof *r->proc_bytes)))
    rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  if (!rc && r->me == 0) {
    fp8_mpi_assign(bytes, nunits, r->np, uowner);
    for (size_t i = 0; i < r->ntensors; i++) r->owner[i] = uowner[unit[i]];
    for (size_t u = 0; u < nunits; u++) r->proc_bytes[uowner[u]] += bytes[u];
  }
  if (!rc && tr->nranks && !(r->rank_owner = malloc((tr->nranks + 1) * sizeof *r->rank_owner)))
    rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  if (!rc && tr->nranks && r->me == 0) memcpy(r->rank_owner, uowner, tr->nranks * sizeof *uowner);
  free(bytes);
  free(unit);
  free(uowner);
  if ((rc = fp8_mpi_agree(rc, err, errlen)) != FP8_OK) return rc;
  fp8_mpi_bcast(r->owner, r->ntensors * sizeof *r->owner, 0);
  if (tr->nranks) fp8_mpi_bcast(r->rank_owner, tr->nranks * sizeof *r->rank_owner, 0);
  return FP8_OK;
}

/* ------------------------------------------------------------------ a part's rows */

/* This process's tensors of the part, replayed into memory files: the message for process 0
 * (code; the tensors' and layers' ends; the three texts), or the failure (code, message). */
static int replay_to_message(run_t *r, const fp8_trace *tr, size_t snap, size_t rank,
                             int64_t step, int prc, buf_t *b, char *err, size_t errlen) {
  char *txt[3] = {NULL, NULL, NULL};
  size_t len[3] = {0, 0, 0};
  struct run_segs g = {{NULL, NULL, NULL}, NULL, 0, 0, NULL, 0, 0, 0};
  int rc = prc;
  for (int k = 0; k < 3; k++) g.fp[k] = open_memstream(&txt[k], &len[k]);
  if (!g.fp[0] || !g.fp[1] || !g.fp[2])
    rc = rc ? rc : fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  if (rc == FP8_OK) { /* process 0's own files wait meanwhile */
    FILE *keep[3] = {r->steps_fp, r->hist_fp, r->gemm_fp};
    r->steps_fp = g.fp[0];
    r->hist_fp = g.fp[1];
    r->gemm_fp = g.fp[2];
    r->segs = &g;
    rc = run_part(r, tr, snap, rank, step, err, errlen);
    r->segs = NULL;
    r->steps_fp = keep[0];
    r->hist_fp = keep[1];
    r->gemm_fp = keep[2];
  }
  for (int k = 0; k < 3; k++)
    if (g.fp[k] && fclose(g.fp[k]) != 0 && rc == FP8_OK)
      rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  if (rc == FP8_OK && g.oom) rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  int32_t code = rc;
  put(b, &code, sizeof code);
  if (rc != FP8_OK) {
    size_t n = strlen(err);
    put_u64(b, n);
    put(b, err, n);
  } else {
    put_u64(b, g.nt);
    put(b, g.t, g.nt * sizeof *g.t);
    put_u64(b, g.nl);
    for (size_t i = 0; i < g.nl; i++) {
      put_u64(b, strlen(g.l[i].name));
      put(b, g.l[i].name, strlen(g.l[i].name));
      put_u64(b, g.l[i].end);
    }
    for (int k = 0; k < 3; k++) {
      put_u64(b, len[k]);
      put(b, txt[k], len[k]);
    }
  }
  for (int k = 0; k < 3; k++) free(txt[k]);
  run_segs_free(&g);
  return rc;
}

/* One process's message of a part, read: its segments and texts (views into the message). */
typedef struct {
  void *msg;
  uint64_t nt, nl;
  const run_tseg *t;
  const char **lname;
  size_t *llen;
  uint64_t *lendv;      /* the layers' ends */
  const char *txt[3];
  uint64_t len[3];
  size_t at[3];         /* written so far */
  size_t ti, li;        /* merge cursors */
} part_msg;

static void part_msg_free(part_msg *m) {
  free(m->msg);
  free(m->lname);
  free(m->llen);
  free(m->lendv);
  free((void *)m->t);
}

/* Parses a message (taking msg); FP8_OK, the sender's failure (its message in err), or a
 * malformed one. */
static int part_msg_parse(part_msg *m, void *msg, size_t n, int from, char *err, size_t errlen) {
  m->msg = msg;
  rd_t in = {msg, n, 0, 0};
  int32_t code = FP8_EIO;
  get(&in, &code, sizeof code);
  if (code != FP8_OK) {
    uint64_t k = get_u64(&in);
    const char *t = get_view(&in, (size_t)k);
    if (t) snprintf(err, errlen, "%.*s", (int)k, t);
    else snprintf(err, errlen, "process %d: out of memory", from);
    return code;
  }
  m->nt = get_u64(&in);
  const void *tv = m->nt <= n / sizeof(run_tseg) ? get_view(&in, (size_t)m->nt * sizeof(run_tseg)) : NULL;
  run_tseg *t = malloc((size_t)(tv ? m->nt : 0) * sizeof *t + 1);
  if (tv && t) memcpy(t, tv, (size_t)m->nt * sizeof *t);
  m->t = t;
  m->nl = tv ? get_u64(&in) : 0;
  int bad = !tv || !t || m->nl > n;
  if (!bad) {
    m->lname = malloc((size_t)m->nl * sizeof *m->lname + 1);
    m->llen = malloc((size_t)m->nl * sizeof *m->llen + 1);
    m->lendv = malloc((size_t)m->nl * sizeof *m->lendv + 1);
    if (!m->lname || !m->llen || !m->lendv) return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  }
  for (uint64_t i = 0; !bad && i < m->nl; i++) {
    m->llen[i] = (size_t)get_u64(&in);
    m->lname[i] = get_view(&in, m->llen[i]);
    m->lendv[i] = get_u64(&in);
    bad = in.bad;
  }
  for (int k = 0; k < 3 && !bad; k++) {
    m->len[k] = get_u64(&in);
    m->txt[k] = get_view(&in, (size_t)m->len[k]);
    bad = in.bad;
  }
  /* the ends must rise within the texts */
  for (uint64_t i = 0; !bad && i < m->nt; i++)
    for (int k = 0; k < 2; k++)
      bad |= m->t[i].end[k] > m->len[k] || (i && m->t[i].end[k] < m->t[i - 1].end[k]);
  for (uint64_t i = 0; !bad && i < m->nl; i++)
    bad |= m->lendv[i] > m->len[2] || (i && m->lendv[i] < m->lendv[i - 1]);
  if (bad) return fp8_errorf(FP8_EIO, err, errlen, "process %d: a malformed message", from);
  return FP8_OK;
}

/* Writes a message's text k up to `end` to fp. */
static void emit(part_msg *m, int k, uint64_t end, FILE *fp) {
  if (fp && end > m->at[k]) fwrite(m->txt[k] + m->at[k], 1, (size_t)(end - m->at[k]), fp);
  if (end > m->at[k]) m->at[k] = (size_t)end;
}

static int layer_cmp(const part_msg *a, const part_msg *b) {
  size_t la = a->llen[a->li], lb = b->llen[b->li];
  int c = memcmp(a->lname[a->li], b->lname[b->li], la < lb ? la : lb);
  return c ? c : (la > lb) - (la < lb);
}

/* Process 0: the rows of every process's message of the part, in the one-process order:
 * steps.csv and histograms.csv rows by tensor, gemm.csv rows by layer name. */
static void merge_messages(run_t *r, part_msg *m, int nm) {
  FILE *dst[3] = {r->steps_fp, r->hist_fp, r->gemm_fp};
  for (;;) { /* the smallest next tensor among the messages */
    int best = -1;
    for (int p = 0; p < nm; p++)
      if (m[p].ti < m[p].nt && (best < 0 || m[p].t[m[p].ti].key < m[best].t[m[best].ti].key))
        best = p;
    if (best < 0) break;
    part_msg *b = &m[best];
    for (int k = 0; k < 2; k++) emit(b, k, b->t[b->ti].end[k], dst[k]);
    b->ti++;
  }
  for (;;) { /* the smallest next layer name */
    int best = -1;
    for (int p = 0; p < nm; p++)
      if (m[p].li < m[p].nl && (best < 0 || layer_cmp(&m[p], &m[best]) < 0)) best = p;
    if (best < 0) break;
    emit(&m[best], 2, m[best].lendv[m[best].li], dst[2]);
    m[best].li++;
  }
}

/* 1 when process p owns some of the part's tensors: a rank's owner (multi-rank traces), or
 * every process (a single-rank trace's part is its layers, spread over all). */
static int part_owner(const run_t *r, size_t rank, int p) {
  return !r->multirank || r->rank_owner[rank] == p;
}

void run_split_part(run_t *r, const fp8_trace *tr, size_t snap, size_t rank, int64_t step,
                    int *prc, char *err, size_t errlen) {
  /* process 0 alone owns the part (a rank of a multi-rank trace): straight into the files */
  if (r->me == 0 && r->multirank && part_owner(r, rank, 0)) {
    if (*prc == FP8_OK) *prc = run_part(r, tr, snap, rank, step, err, errlen);
    return;
  }
  if (r->me != 0) {
    if (!part_owner(r, rank, r->me)) return;
    buf_t b = {0};
    int rc = replay_to_message(r, tr, snap, rank, step, *prc, &b, err, errlen);
    if (b.oom) { /* the status alone (process 0 names the process): the protocol must go on */
      int32_t code = FP8_ENOMEM;
      rc = rc ? rc : FP8_ENOMEM;
      fp8_mpi_send(0, TAG_PART, &code, sizeof code);
    } else {
      fp8_mpi_send(0, TAG_PART, b.b, b.n);
    }
    free(b.b);
    if (*prc == FP8_OK && rc != FP8_OK) *prc = rc;
    return;
  }
  /* process 0: the part's owners' messages (its own among them when it owns some), merged */
  part_msg *m = calloc((size_t)r->np, sizeof *m);
  if (!m && *prc == FP8_OK) *prc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  int nm = 0;
  char perr[FP8_ERRLEN];
  for (int p = 0; p < r->np; p++) {
    if (!part_owner(r, rank, p)) continue;
    part_msg scratch, *mp = m ? &m[nm++] : &scratch;
    memset(mp, 0, sizeof *mp);
    void *msg = NULL;
    size_t n = 0;
    int rc = FP8_OK;
    snprintf(perr, sizeof perr, "%s", err);
    if (p == 0) { /* its own rows, read back as the others' are: one merge */
      buf_t b = {0};
      replay_to_message(r, tr, snap, rank, step, *prc, &b, perr, sizeof perr);
      if (b.oom) {
        free(b.b);
        rc = fp8_errorf(FP8_ENOMEM, perr, sizeof perr, "out of memory");
      } else {
        msg = b.b;
        n = b.n;
      }
    } else if (fp8_mpi_recv(p, TAG_PART, &msg, &n) != FP8_OK) {
      rc = fp8_errorf(FP8_ENOMEM, perr, sizeof perr, "out of memory");
    }
    if (!rc) rc = part_msg_parse(mp, msg, n, p, perr, sizeof perr);
    if (rc && *prc == FP8_OK) {
      *prc = rc;
      snprintf(err, errlen, "%s", perr);
    }
    if (mp == &scratch) part_msg_free(mp);
  }
  if (*prc == FP8_OK) merge_messages(r, m, nm);
  for (int i = 0; m && i < nm; i++) part_msg_free(&m[i]);
  free(m);
}

void run_split_comm(run_t *r) {
  const fp8_amax_exchange *x = r->opt->exchange;
  r->xchg = NULL;
  r->comm = NULL;
  snprintf(r->exchange, sizeof r->exchange, "MPI_Allreduce");
  if (!x) return; /* the CPU engine, or a module without an exchange: MPI */
  char why[FP8_ERRLEN] = "", id[FP8_AMAX_EXCHANGE_ID_BYTES];
  memset(id, 0, sizeof id);
  int rc = x->make_id && x->open && x->name && x->max && x->close
               ? FP8_OK
               : fp8_errorf(FP8_EDEVICE, why, sizeof why, "the GPU module's amax exchange is incomplete");
  if (!rc && r->me == 0) rc = x->make_id(id, why, sizeof why);
  if ((rc = fp8_mpi_agree(rc, why, sizeof why)) == FP8_OK) {
    fp8_mpi_bcast(id, sizeof id, 0);
    r->comm = x->open(id, r->np, r->me, why, sizeof why);
    r->xchg = x;
    rc = fp8_mpi_agree(r->comm ? FP8_OK : FP8_EDEVICE, why, sizeof why);
  }
  if (rc) { /* anywhere: every process on MPI */
    run_split_comm_close(r);
    snprintf(r->exchange, sizeof r->exchange, "MPI_Allreduce (NCCL: %.150s)", why);
    return;
  }
  snprintf(r->exchange, sizeof r->exchange, "%s", x->name(r->comm));
}

void run_split_comm_close(run_t *r) {
  if (r->comm && r->xchg) r->xchg->close(r->comm);
  r->comm = NULL;
  r->xchg = NULL;
}

int run_split_sync(run_t *r, int have_snap, int prc, char *err, size_t errlen) {
  int rc = fp8_mpi_agree(prc, err, errlen);
  if (rc || !have_snap) return rc;
  const size_t n = r->ntensors;
  float *x = r->exch; /* (allocated with the assignment: no failure mid-protocol) */
  /* [amaxes, snapshot flags]: each process's own tensors, 0 elsewhere (neutral for MAX) */
  for (size_t i = 0; i < n; i++) {
    int mine = r->owner[i] == r->me;
    /* several micro-batches: amax.csv's, the same on every process */
    x[i] = mine || r->multi_micro ? r->amax[i] : 0.0f;
    x[n + i] = mine && r->t[i].snap ? 1.0f : 0.0f;
  }
  if (r->comm) rc = r->xchg->max(r->comm, x, 2 * n, err, errlen);
  else fp8_mpi_max_f32(x, 2 * n);
  rc = fp8_mpi_agree(rc, err, errlen);
  for (size_t i = 0; i < n && !rc; i++) {
    r->amax[i] = x[i];
    r->t[i].snap = x[n + i] != 0.0f;
  }
  return rc;
}

/* The summary totals of the tensors the other processes own, to process 0 (each sends its
 * own, in tensor order); a collective: FP8_OK everywhere, or the first failure. */
static int send_totals(run_t *r, char *err, size_t errlen) {
  const size_t one = r->nconfigs * sizeof(fp8_summary_acc);
  int rc = FP8_OK;
  if (r->me != 0) {
    buf_t b = {0};
    for (size_t i = 0; i < r->ntensors; i++)
      if (r->owner[i] == r->me) put(&b, r->t[i].acc, one);
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
      if (r->owner[i] != p) continue;
      const void *q = get_view(&in, one);
      if (!q) rc = fp8_errorf(FP8_EIO, err, errlen, "process %d: its summary totals are short", p);
      else memcpy(r->t[i].acc, q, one);
    }
    free(msg);
  }
  return fp8_mpi_agree(rc, err, errlen);
}

int run_split_collect(run_t *r, char *err, size_t errlen) {
  /* the others' counts (process 0's own left out of the sum) */
  int64_t c[3] = {r->rows, r->gemm_rows, r->mismatches};
  if (r->me == 0) c[0] = c[1] = c[2] = 0;
  fp8_mpi_sum_i64(c, 3);
  for (int k = 0; k < 3; k++) r->peer_counts[k] = r->me == 0 ? c[k] : 0;
  return send_totals(r, err, errlen);
}

int run_split_gather(run_t *r, char *err, size_t errlen) {
  int64_t counts[3] = {r->rows, r->gemm_rows, r->mismatches};
  fp8_mpi_sum_i64(counts, 3);
  r->rows = counts[0];
  r->gemm_rows = counts[1];
  r->mismatches = counts[2];
  memset(r->peer_counts, 0, sizeof r->peer_counts); /* in the sums now */
  return send_totals(r, err, errlen);
}

int run_split_scatter(run_t *r, char *err, size_t errlen) {
  /* the checkpoint's counts are all process 0's: the others count from 0 */
  const size_t one = r->nconfigs * sizeof(fp8_summary_acc);
  int rc = FP8_OK;
  if (r->me != 0) {
    r->rows = r->gemm_rows = r->mismatches = r->stream_rows = 0;
    void *msg;
    size_t len;
    if (fp8_mpi_recv(0, TAG_ACC, &msg, &len) != FP8_OK)
      return fp8_mpi_agree(fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory"), err, errlen);
    rd_t in = {msg, len, 0, 0};
    for (size_t i = 0; i < r->ntensors && !rc; i++) {
      if (r->owner[i] != r->me) continue;
      const void *q = get_view(&in, one);
      if (!q) rc = fp8_errorf(FP8_EIO, err, errlen, "process 0: the summary totals are short");
      else memcpy(r->t[i].acc, q, one);
    }
    free(msg);
    return fp8_mpi_agree(rc, err, errlen);
  }
  for (int p = 1; p < r->np; p++) {
    buf_t b = {0};
    for (size_t i = 0; i < r->ntensors; i++)
      if (r->owner[i] == p) put(&b, r->t[i].acc, one);
    if (b.oom && !rc) rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
    fp8_mpi_send(p, TAG_ACC, b.oom ? NULL : b.b, b.oom ? 0 : b.n);
    free(b.b);
  }
  return fp8_mpi_agree(rc, err, errlen);
}
