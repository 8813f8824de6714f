/* run_mpi.c: see run_mpi.h. Open MPI's calls when built with FP8LAB_MPI, one process else. */
#include "run_mpi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8.h" /* FP8_OK, FP8_ENOMEM */

/* ------------------------------------------------------------------ the assignment */

typedef struct {
  uint64_t bytes;
  size_t rank;
} rank_size;

static int cmp_size(const void *a, const void *b) {
  const rank_size *x = a, *y = b;
  if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
  return x->rank < y->rank ? -1 : x->rank > y->rank;
}

void fp8_mpi_assign(const uint64_t *bytes, size_t nranks, int np, int *owner) {
  rank_size *s = malloc((nranks + 1) * sizeof *s);
  uint64_t *load = calloc((size_t)np + 1, sizeof *load);
  if (!s || !load) { /* round robin needs no memory */
    for (size_t k = 0; k < nranks; k++) owner[k] = (int)(k % (size_t)np);
    free(s);
    free(load);
    return;
  }
  for (size_t k = 0; k < nranks; k++) s[k] = (rank_size){bytes[k], k};
  qsort(s, nranks, sizeof *s, cmp_size);
  for (size_t k = 0; k < nranks; k++) {
    int best = 0;
    for (int p = 1; p < np; p++)
      if (load[p] < load[best]) best = p;
    owner[s[k].rank] = best;
    load[best] += s[k].bytes;
  }
  free(s);
  free(load);
}

#ifdef FP8LAB_MPI
#include <mpi.h>

static int g_on, g_rank, g_size = 1;

/* A launcher's environment: Open MPI's mpirun, PMIx (srun, prrte), Hydra (MPICH). */
static int launched(void) {
  static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE",
                                     "SLURM_STEP_NUM_TASKS"};
  for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
    if (getenv(vars[i])) return 1;
  return 0;
}

void fp8_mpi_init(int *argc, char ***argv) {
  if (!launched()) return;
  int ok = 0;
  MPI_Initialized(&ok);
  if (!ok && MPI_Init(argc, argv) != MPI_SUCCESS) return;
  g_on = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
}

void fp8_mpi_finalize(void) {
  if (g_on) MPI_Finalize();
  g_on = 0;
}

int fp8_mpi_on(void) { return g_on; }
int fp8_mpi_rank(void) { return g_rank; }
int fp8_mpi_size(void) { return g_size; }

int fp8_mpi_agree(int rc, char *err, size_t errlen) {
  if (g_size <= 1) return rc;
  int mine = rc != FP8_OK ? g_rank : g_size, first = g_size;
  MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (first == g_size) return FP8_OK;
  /* the first failing process's status and message, to every process */
  char msg[1024];
  int code = rc;
  if (g_rank == first) snprintf(msg, sizeof msg, "%s", err ? err : "");
  MPI_Bcast(&code, 1, MPI_INT, first, MPI_COMM_WORLD);
  MPI_Bcast(msg, (int)sizeof msg, MPI_CHAR, first, MPI_COMM_WORLD);
  if (err && errlen) snprintf(err, errlen, "%s", msg);
  return code;
}

void fp8_mpi_bcast(void *buf, size_t n, int root) {
  if (g_size > 1 && n) MPI_Bcast(buf, (int)n, MPI_BYTE, root, MPI_COMM_WORLD);
}

void fp8_mpi_max_f32(float *v, size_t n) {
  if (g_size > 1 && n) MPI_Allreduce(MPI_IN_PLACE, v, (int)n, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD);
}


void fp8_mpi_sum_i64(int64_t *v, size_t n) {
  if (g_size > 1 && n) MPI_Allreduce(MPI_IN_PLACE, v, (int)n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
}

/* Messages beyond INT_MAX bytes would need chunks; a part's rows are far below that. The length
 * goes first, as 8 bytes. */
void fp8_mpi_send(int dst, int tag, const void *buf, size_t n) {
  uint64_t len = n;
  MPI_Send(&len, 1, MPI_UINT64_T, dst, tag, MPI_COMM_WORLD);
  if (n) MPI_Send(buf, (int)n, MPI_BYTE, dst, tag, MPI_COMM_WORLD);
}

int fp8_mpi_recv(int src, int tag, void **buf, size_t *n) {
  uint64_t len = 0;
  MPI_Recv(&len, 1, MPI_UINT64_T, src, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  *buf = malloc(len + 1);
  *n = len;
  if (!*buf) { /* drain the message all the same, so that the protocol stays in step */
    char c[4096];
    for (uint64_t got = 0; got < len;) {
      int k = len - got < sizeof c ? (int)(len - got) : (int)sizeof c;
      MPI_Recv(c, k, MPI_BYTE, src, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      got += (uint64_t)k;
    }
    return FP8_ENOMEM;
  }
  if (len) MPI_Recv(*buf, (int)len, MPI_BYTE, src, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  return FP8_OK;
}

#else /* one process */

void fp8_mpi_init(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
}
void fp8_mpi_finalize(void) {}
int fp8_mpi_on(void) { return 0; }
int fp8_mpi_rank(void) { return 0; }
int fp8_mpi_size(void) { return 1; }
int fp8_mpi_agree(int rc, char *err, size_t errlen) {
  (void)err;
  (void)errlen;
  return rc;
}
void fp8_mpi_max_f32(float *v, size_t n) {
  (void)v;
  (void)n;
}
void fp8_mpi_bcast(void *buf, size_t n, int root) {
  (void)buf;
  (void)n;
  (void)root;
}
void fp8_mpi_sum_i64(int64_t *v, size_t n) {
  (void)v;
  (void)n;
}
void fp8_mpi_send(int dst, int tag, const void *buf, size_t n) {
  (void)dst;
  (void)tag;
  (void)buf;
  (void)n;
}
int fp8_mpi_recv(int src, int tag, void **buf, size_t *n) {
  (void)src;
  (void)tag;
  *buf = NULL;
  *n = 0;
  return FP8_OK;
}

#endif
