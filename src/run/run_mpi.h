/* run_mpi.h: the processes of an MPI replay (`mpirun -np N fp8lab run EXP.ini`, issue 26).
 *
 * One process (MPI rank 0, the root) owns the output folder and writes every file; the others
 * replay their share of the tensors (a multi-rank trace's ranks, a single-rank trace's layers)
 * and send the root their rows (run_split.c). Every process holds the same delayed-scaling state: after a step's snapshot, one all-reduce (MAX) of the
 * tensors' amaxes (each process fills those of the tensors it holds, 0 elsewhere) gives all of
 * them every amax, and each runs the same updates. Built without MPI, or not started by a
 * launcher, fp8lab is one process and these calls are no-ops (size 1, rank 0).
 */
#ifndef FP8LAB_RUN_MPI_H
#define FP8LAB_RUN_MPI_H

#include <stddef.h>
#include <stdint.h>

/** Starts MPI when fp8lab was built with it and a launcher started this process (mpirun,
 *  srun: their environment variables); else nothing. Call once, first thing in main. */
void fp8_mpi_init(int *argc, char ***argv);
/** Ends MPI (when started). */
void fp8_mpi_finalize(void);
/** 1 when MPI was started (a launcher started this process, even as the only one). */
int fp8_mpi_on(void);
/** This process's rank (0 without MPI) and the process count (1 without MPI). */
int fp8_mpi_rank(void);
int fp8_mpi_size(void);

/** Collective: every process's rc, and the first failing process's (lowest rank with rc !=
 *  FP8_OK) status and message copied into every process's err. Returns that status (FP8_OK
 *  when none failed). One process: returns rc. */
int fp8_mpi_agree(int rc, char *err, size_t errlen);
/** Collective element-wise maximum / sum, in place. */
void fp8_mpi_max_f32(float *v, size_t n);
void fp8_mpi_sum_i64(int64_t *v, size_t n);
/** Collective: n bytes of process root's buf to every process's buf. */
void fp8_mpi_bcast(void *buf, size_t n, int root);
/** Point to point: n bytes to process dst under tag; receiving allocates *buf (free it) and
 *  sets *n. FP8_OK, or FP8_ENOMEM when the receive buffer cannot be allocated. */
void fp8_mpi_send(int dst, int tag, const void *buf, size_t n);
int fp8_mpi_recv(int src, int tag, void **buf, size_t *n);

/** The process of each of nranks units of work, ranks or layers (owner[k]), balanced by bytes:
 *  the largest unit first (ties: the lower index), each to the process with the fewest bytes
 *  so far (ties: the lower process); a pure function, the same on every process given the same
 *  sizes. np >= 1. */
void fp8_mpi_assign(const uint64_t *bytes, size_t nranks, int np, int *owner);

#endif
