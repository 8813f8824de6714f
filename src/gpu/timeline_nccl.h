/* timeline_nccl.h: the all-reduce MAX of fp8lab timeline, on a stream, without linking NCCL:
 * libnccl.so.2 is opened at run time (the GPU module must load where NCCL is missing, e.g. on a
 * machine whose NCCL is only in a Python wheel), a world of one on device 0 (ncclCommInitAll),
 * as a single GPU gives. Where NCCL cannot be opened, the all-reduces are left out and the
 * reason says why. The emulator build links the mock NCCL instead (FP8LAB_TL_NCCL_LINKED). */
#ifndef FP8LAB_GPU_TIMELINE_NCCL_H
#define FP8LAB_GPU_TIMELINE_NCCL_H

#include <stddef.h>

typedef struct tl_nccl tl_nccl;

/** Opens NCCL (path, else $FP8LAB_NCCL_LIB, else libnccl.so.2 where the loader and the CUDA
 *  toolkit's folders find it) and makes the world of one. NULL with the reason in why. */
tl_nccl *tl_nccl_open(const char *path, char *why, size_t whylen);
/** One process's member of a world of `nranks` processes (one GPU each, `device` this one's):
 *  tl_nccl_unique_id on process 0 gives the id (128 bytes), which the caller hands to every
 *  process (an MPI broadcast); then each calls tl_nccl_open_rank with it, its rank and the
 *  world's size (ncclCommInitRank: it blocks until all have). NULL/nonzero with the reason. */
int tl_nccl_unique_id(const char *path, void *id, char *why, size_t whylen);
tl_nccl *tl_nccl_open_rank(const char *path, const void *id, int nranks, int rank, int device,
                           char *why, size_t whylen);
/** "NCCL 2.28.9, world 1". */
const char *tl_nccl_describe(const tl_nccl *n);
/** In place: buf[0..count) (device floats) all-reduced with MAX on `stream` (asynchronous). */
int tl_nccl_allreduce_max(tl_nccl *n, float *buf, size_t count, void *stream, char *err,
                          size_t errlen);
void tl_nccl_close(tl_nccl *n);

#endif /* FP8LAB_GPU_TIMELINE_NCCL_H */
