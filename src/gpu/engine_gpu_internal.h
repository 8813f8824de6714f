/* engine_gpu_internal.h: what the two files of the GPU engine share: engine_gpu.c (the
 * lifecycle, the casts and statistics on the fused kernels, the delayed state on the device and
 * its fused update) and engine_gpu_gemm.c (a layer's FP8 GEMMs with cuBLASLt). */
#ifndef FP8LAB_GPU_ENGINE_GPU_INTERNAL_H
#define FP8LAB_GPU_ENGINE_GPU_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "engine_impl.h"
#include "fp8k.h"
#include "gemm_lt.h"

/* A device buffer that only grows. */
typedef struct {
  void *p;
  size_t cap;
} gpu_dbuf;

typedef struct {
  fp8_engine_plan plan;
  fp8k_ctx *ctx;
  const fp8_tensor_view **view;  /* [ntensors]: loaded at this step */
  ptrdiff_t resident;            /* the tensor whose data is on the device (-1: none) */
  /* delayed scaling: one slot per (tensor, delayed configuration), slot t * ndl + j */
  size_t ndl, *dl_cfg;           /* the delayed configurations, in plan order */
  int *dl_fmt;                   /* [ntensors * ndl] formats, for the fused pass */
  int32_t nslots;
  float *d_ring;                 /* rings packed back to back (the slot's history_len each) */
  int64_t *d_ring_off;
  int32_t *d_head, *d_hlen, *d_acomp;
  float *d_scale, *d_smax;       /* the scales (the state) and scaled_max of each slot */
  int32_t *d_index[4];           /* by phase mask (1 FWD, 2 BWD, 3 both): slot -> amax slot */
  float *d_red, *h_red;          /* [nred] the amaxes of a phase after the reduction */
  float *h_scale;                /* host mirror of d_scale, refreshed after each end_phase */
  /* current scaling */
  size_t ncur, *cur_cfg;
  fp8k_current_params *cur_par;  /* [ntensors * ncur] */
  /* GEMMs */
  fp8_gemm_lt *lt;               /* NULL: no FP8 GEMMs on this device (supports() says so) */
  gpu_dbuf d_op[3], d_codes[3], d_sinv;
  uint8_t *h_codes;
  size_t h_cap;
  float *h_op[3];                /* widened (and sampled) operands on the host */
  size_t h_opcap[3];
  char name[256];
} gpu_priv;

/* engine_gpu_gemm.c */
int gpu_gemm(fp8_engine *e, const fp8_engine_layer *l, const fp8_gemm_request *req, size_t nreq,
             char *err, size_t errlen);
void gpu_gemm_free(gpu_priv *p);

#endif /* FP8LAB_GPU_ENGINE_GPU_INTERNAL_H */
