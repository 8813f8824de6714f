/* timeline_gpu_internal.h: what the two files of the GPU timeline share: timeline_gpu.c (the
 * buffers, each op's work) and timeline_gpu_run.c (streams, events, the schedule of steps and
 * the measurement). */
#ifndef FP8LAB_GPU_TIMELINE_GPU_INTERNAL_H
#define FP8LAB_GPU_TIMELINE_GPU_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "gemm_lt.h"
#include "timeline.h"
#include "timeline_nccl.h"

/* One plan's state on the device (timeline_gpu.c's alloc_mode). */
typedef struct {
  const fp8_tl_plan *plan;
  float *amax, *scale, *sinv, *smax;  /* [nt] per tensor */
  float *ring;                        /* [nt * L] history rings */
  int64_t *ring_off;
  int32_t *head, *hlen, *acomp;
  int32_t *gidx[2], *uidx[2];         /* per phase: gather indices, update amax index */
  float *red[2];                      /* per phase: the gathered amaxes */
  void **ev;                          /* [iters * nops * 2] every op's start and end events */
  void **begin;                       /* [iters] each step's begin event */
  int32_t iters;                      /* steps run so far */
} tl_mode;

typedef struct {
  const fp8_tl_gpu_args *a;
  size_t nt;                          /* tensors: 3 per Linear */
  void *st[FP8_TL_NSTREAMS];          /* cudaStream_t: compute, side */
  void *x[3][3];                      /* [operand][dtype] source tensors */
  size_t xcap[3][3];
  uint8_t *q[3], *qt[3];              /* [operand] FP8 codes, row-wise and transposed */
  void *y;                            /* GEMM output (BF16) */
  fp8_gemm_lt *lt;
  tl_nccl *nccl;
  tl_mode *m;                         /* [nplans] */
} tl_run;

/* timeline_gpu.c */
/* cudaMalloc of bytes (4 when 0), then the host array h copied in (synchronous). */
int tl_dmalloc_copy(void **d, const void *h, size_t bytes, char *err, size_t errlen);
int tl_alloc_data(tl_run *r, char *err, size_t errlen);
int tl_alloc_mode(tl_run *r, tl_mode *m, const fp8_tl_plan *p, char *err, size_t errlen);
void tl_free_mode(tl_mode *m);
int tl_run_work(tl_run *r, tl_mode *m, size_t i, char *err, size_t errlen);

#endif /* FP8LAB_GPU_TIMELINE_GPU_INTERNAL_H */
