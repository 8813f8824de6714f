/* engine_gpu.c: the GPU engine (engine.h) on the kernels of kernels/, built into the module
 * fp8lab-gpu.so that `fp8lab run --device auto|gpu` loads at run time (src/engine/engine_load.c,
 * through the module's descriptor: gpu_module.c), so that a CPU run never loads CUDA.
 *
 * State on the device: one slot per (tensor, delayed configuration): the amax history ring
 * (rings of each slot's own length, packed), its head, the scale and scaled_max. quantize_stats
 * uploads the tensor once, takes amax and histogram in one pass, runs the fused quantize +
 * statistics pass for all delayed configurations with the scales read from device memory, and
 * current scaling with its own kernels (amax pass, scale kernel, fused pass: two reads, as TE's
 * current scaling). end_phase is TE's end of a forward or backward pass: the phase's amaxes are
 * reduced over the reduction slots on the host (the replay's ranks are in this process), handed
 * to plan->comm on the device (NCCL all-reduce MAX between processes), and one launch of the
 * fused update kernel (kernels/delayed.cu) updates every slot of the phase (TE's unfused rule for
 * the configurations with unfused_update: FP8K_DELAYED_UNFUSED in the slot's amax_compute). Block recipes are
 * declined (the composite engine, engine_composite.c, runs them on the CPU engine); so are GEMMs
 * cuBLASLt has no kernel for (engine_gpu_gemm.c). Every op is synchronous: sync has nothing left to wait for.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8_check.h"
#include "device.h"
#include "engine_gpu.h"
#include "engine_gpu_internal.h"
#include "util.h"

static int gpu_supports(const fp8_engine *e, fp8_engine_op op, size_t c) {
  const gpu_priv *p = e->priv;
  const fp8_config *cf = &p->plan.configs[c];
  if (!fp8_plan_active(&p->plan, c)) return 0;
  /* the FP4 kinds' row-wise casts are emulated here (kernels/fp4.cu); their GEMMs (blocks along
   * each GEMM's reduction dimension, the Hadamard transform) run on the composite's CPU engine */
  if (fp8_recipe_kind_is_fp4(cf->kind)) return op == FP8_OP_QUANTIZE_STATS;
  /* the FP8 block kinds and bf16 (nothing to cast) run on the composite's CPU engine */
  if (!fp8_recipe_kind_has_scale(cf->kind)) return 0;
  if (op == FP8_OP_QUANTIZE_STATS) return 1;
  /* the sampled GEMM error is a few small GEMMs per layer: the composite's CPU engine runs it
   * from this engine's scales (gemm.h) */
  if (!p->lt || p->plan.gemm_sample > 0) return 0;
  /* [analysis] tensor_core: the GEMM errors as the model computes them, with their exact and
   * other-accumulation columns (engine.h): the CPU engine's; cuBLASLt is the device's own */
  if (p->plan.tensor_core != 0) return 0;
  /* cuBLASLt needs a kernel for the operand formats of all three GEMMs (roles resolve the
   * configuration's format the same way for every layer) */
  static const fp8_role roles[3] = {FP8_ROLE_INPUT, FP8_ROLE_WEIGHT, FP8_ROLE_GRAD_OUTPUT};
  fp8_format f[3];
  for (int i = 0; i < 3; i++)
    if (fp8_format_resolve(cf->format, roles[i], &f[i]) != FP8_OK) return 0;
  for (int g = 0; g < FP8_GEMM_COUNT; g++)
    if (!fp8_gemm_lt_has_formats(f[fp8_gemm_operand_tensor((fp8_gemm_kind)g, 0)],
                                 f[fp8_gemm_operand_tensor((fp8_gemm_kind)g, 1)]))
      return 0;
  return 1;
}

static int gpu_begin_step(fp8_engine *e, int64_t step, char *err, size_t errlen) {
  (void)step;
  (void)err;
  (void)errlen;
  gpu_priv *p = e->priv;
  memset(p->view, 0, p->plan.ntensors * sizeof *p->view);
  p->resident = -1;
  return FP8_OK;
}

static int gpu_load(fp8_engine *e, size_t t, const fp8_tensor_view *v, char *err, size_t errlen) {
  gpu_priv *p = e->priv;
  if (t >= p->plan.ntensors) return fp8_errorf(FP8_EINVAL, err, errlen, "load: tensor %zu", t);
  p->view[t] = v;
  if (p->resident == (ptrdiff_t)t) p->resident = -1;
  return FP8_OK;
}

/* Tensor t's data on the device (one upload per tensor and step). */
static int make_resident(gpu_priv *p, size_t t, char *err, size_t errlen) {
  if (p->resident == (ptrdiff_t)t) return FP8_OK;
  const fp8_tensor_view *v = p->view[t];
  if (!v) return fp8_errorf(FP8_EINVAL, err, errlen, "tensor %zu is not loaded", t);
  int rc = fp8k_upload(p->ctx, v->data, v->numel, (int)v->dtype, err, errlen);
  if (rc == FP8_OK) p->resident = (ptrdiff_t)t;
  return rc;
}

static void to_stats(const fp8k_stats *k, fp8_stats *s) {
  *s = (fp8_stats){.n = k->n, .nonfinite = k->nonfinite, .zeros = k->zeros, .overflow = k->overflow,
                   .underflow = k->underflow, .subnormal = k->subnormal,
                   .sum_sq_err = k->sum_sq_err, .sum_sq = k->sum_sq, .clipped = k->clipped,
                   .sum_sq_hat = k->sum_sq_hat};
}

/* An FP4 configuration's row-wise cast of the resident tensor t (its amax already known): the
 * statistics from the kernel, the block statistics from its per-block arrays by the
 * simulator's own function (fp8_block_fp4_stats), as src/sim/block_fp4.c computes them. */
static int fp4_stats(gpu_priv *p, size_t t, size_t c, float amax, fp8_tensor_result *out,
                     char *err, size_t errlen) {
  const fp8_tensor_view *v = p->view[t];
  fp8_block_params bp = fp8_config_block_params(&p->plan.configs[c], p->plan.roles[t],
                                                fp8_plan_format(&p->plan, t, c), v->dtype);
  int64_t rows, cols;
  int rc = fp8_block_view_2d(v->shape, v->ndim, &rows, &cols);
  if (rc) return fp8_errorf(rc, err, errlen, "shape of %s", v->name);
  fp8k_fp4_params kp = {.mx = bp.kind == FP8_BLOCK_KIND_MXFP4, .square = bp.square,
                        .rule = bp.fp4_rule, .e4m3_max = bp.e4m3_max,
                        .floor_rule = bp.rounding == FP8_MX_ROUND_FLOOR,
                        .stochastic = bp.stochastic, .sr_seed = bp.sr_seed};
  fp8k_stats st;
  fp8k_fp4_blocks b;
  memset(&b, 0, sizeof b);
  rc = fp8k_fp4_quant_stats(p->ctx, rows, cols, &kp, amax, &st, &b, err, errlen);
  if (!rc) {
    to_stats(&st, &out->stats[c]);
    out->scale[c] = NAN;
    fp8_block_fp4_stats(b.amax, b.mult, b.nunits, &out->block[c]);
    out->block[c].underflow_expected = b.underflow_expected;
    out->block[c].sum_sq_err_expected = b.sum_sq_err_expected;
  }
  fp8k_fp4_blocks_free(&b);
  return rc;
}

static int gpu_quantize_stats(fp8_engine *e, size_t t, fp8_tensor_result *out, char *err,
                              size_t errlen) {
  gpu_priv *p = e->priv;
  if (t >= p->plan.ntensors) return fp8_errorf(FP8_EINVAL, err, errlen, "quantize_stats: tensor %zu", t);
  const size_t nmax = p->ndl > p->ncur ? p->ndl : p->ncur;
  fp8k_stats *st = malloc((nmax + 1) * sizeof *st);
  float *sc = malloc((nmax + 1) * sizeof *sc);
  int rc = st && sc ? make_resident(p, t, err, errlen) : fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  if (rc) goto done;
  if (p->plan.histograms) rc = fp8k_quant_stats(p->ctx, NULL, NULL, 0, NULL, &out->amax, out->hist, NULL, err, errlen);
  else rc = fp8k_amax(p->ctx, &out->amax, err, errlen);
  if (!rc && p->ndl)
    rc = fp8k_quant_stats_dscales(p->ctx, p->d_scale + t * p->ndl, p->dl_fmt + t * p->ndl,
                                  (int)p->ndl, st, NULL, err, errlen);
  for (size_t j = 0; j < p->ndl && !rc; j++) {
    to_stats(&st[j], &out->stats[p->dl_cfg[j]]);
    out->scale[p->dl_cfg[j]] = p->h_scale[t * p->ndl + j];
  }
  for (size_t g = 0; g < p->ncur && !rc; g += 64) {
    size_t m = p->ncur - g < 64 ? p->ncur - g : 64;
    rc = fp8k_current_quant_stats(p->ctx, p->cur_par + t * p->ncur + g, (int)m, st, sc, NULL, NULL,
                                  err, errlen);
    for (size_t j = 0; j < m && !rc; j++) {
      to_stats(&st[j], &out->stats[p->cur_cfg[g + j]]);
      out->scale[p->cur_cfg[g + j]] = sc[j];
    }
  }
  for (size_t c = 0; c < p->plan.nconfigs && !rc; c++)
    if (fp8_plan_active(&p->plan, c) && fp8_recipe_kind_is_fp4(p->plan.configs[c].kind))
      rc = fp4_stats(p, t, c, out->amax, out, err, errlen);
done:
  if (rc && p->view[t]) {
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s", err ? err : "");
    fp8_errorf(rc, err, errlen, "tensor %s on %s: %s", p->view[t]->name, e->name, tmp);
  }
  free(st);
  free(sc);
  return rc;
}

static int gpu_cast(fp8_engine *e, size_t t, size_t c, uint8_t *codes, char *err, size_t errlen) {
  gpu_priv *p = e->priv;
  if (t >= p->plan.ntensors) return fp8_errorf(FP8_EINVAL, err, errlen, "cast: tensor %zu", t);
  int rc = make_resident(p, t, err, errlen);
  if (rc) return rc;
  fp8k_stats st;
  for (size_t j = 0; j < p->ndl; j++)
    if (p->dl_cfg[j] == c)
      return fp8k_quant_stats_dscales(p->ctx, p->d_scale + t * p->ndl + j, p->dl_fmt + t * p->ndl + j,
                                      1, &st, codes, err, errlen);
  for (size_t j = 0; j < p->ncur; j++)
    if (p->cur_cfg[j] == c)
      return fp8k_current_quant_stats(p->ctx, p->cur_par + t * p->ncur + j, 1, &st, NULL, NULL,
                                      codes, err, errlen);
  return fp8_errorf(FP8_EINVAL, err, errlen, "cast: configuration %zu is not a per-tensor one", c);
}

static int gpu_sync(fp8_engine *e, char *err, size_t errlen) {
  (void)e;
  (void)err;
  (void)errlen;
  return FP8_OK; /* every op has completed when it returns */
}

static int gpu_end_phase(fp8_engine *e, unsigned phases, const float *amax, char *err,
                         size_t errlen) {
  gpu_priv *p = e->priv;
  const fp8_engine_plan *pl = &p->plan;
  const size_t nred = fp8_plan_nred(pl);
  int rc = FP8_OK;
  phases &= FP8_FWD | FP8_BWD;
  if (!phases) return FP8_OK;
  /* the all-reduce runs even without delayed slots here: every process of a group must call it */
  /* the reduction over the slots (this process's ranks): as the CPU engine, a tensor's own
   * amax when there is nothing to reduce */
  for (size_t k = 0; k < nred; k++) p->h_red[k] = 0.0f;
  for (size_t t = 0; t < pl->ntensors; t++) {
    if (!fp8_plan_in_phase(pl, t, phases)) continue;
    size_t k = fp8_plan_red_slot(pl, t);
    if (!pl->red_slot && !pl->comm) p->h_red[k] = amax[t];
    else if (amax[t] > p->h_red[k]) p->h_red[k] = amax[t];
  }
  cudaStream_t st = (cudaStream_t)fp8k_ctx_stream(p->ctx);
  FP8G_CUDA(cudaMemcpyAsync(p->d_red, p->h_red, nred * sizeof *p->h_red, cudaMemcpyHostToDevice, st));
  FP8G_CUDA(cudaStreamSynchronize(st));
  if (pl->comm && (rc = pl->comm->allreduce_max(pl->comm->ctx, p->d_red, nred, err, errlen)))
    goto done;
  rc = fp8k_delayed_update_indexed(p->ctx, p->nslots, p->d_ring, p->d_ring_off, p->d_head,
                                   p->d_scale, p->d_red, p->d_index[phases], p->d_hlen,
                                   p->d_acomp, p->d_smax, NULL, err, errlen);
  if (rc) goto done;
  FP8G_CUDA(cudaMemcpyAsync(p->h_scale, p->d_scale, (size_t)p->nslots * sizeof *p->h_scale,
                            cudaMemcpyDeviceToHost, st));
  FP8G_CUDA(cudaStreamSynchronize(st));
done:
  return rc;
}

static int gpu_state(fp8_engine *e, size_t t, float *scale, char *err, size_t errlen) {
  gpu_priv *p = e->priv;
  if (t >= p->plan.ntensors) return fp8_errorf(FP8_EINVAL, err, errlen, "state: tensor %zu", t);
  for (size_t j = 0; j < p->ndl; j++) scale[p->dl_cfg[j]] = p->h_scale[t * p->ndl + j];
  return FP8_OK;
}

static void gpu_free(fp8_engine *e) {
  if (!e) return;
  gpu_priv *p = e->priv;
  if (p) {
    gpu_gemm_free(p);
    if (p->ctx) fp8k_ctx_destroy(p->ctx);
    void *d[] = {p->d_ring, p->d_ring_off, p->d_head, p->d_hlen, p->d_acomp, p->d_scale,
                 p->d_smax, p->d_index[1], p->d_index[2], p->d_index[3], p->d_red};
    for (size_t i = 0; i < sizeof d / sizeof *d; i++) cudaFree(d[i]);
    free(p->view);
    free(p->dl_cfg);
    free(p->dl_fmt);
    free(p->cur_cfg);
    free(p->cur_par);
    free(p->h_red);
    free(p->h_scale);
  }
  free(p);
  free(e);
}

static const fp8_engine_ops GPU_OPS = {
    .supports = gpu_supports, .begin_step = gpu_begin_step, .load = gpu_load,
    .quantize_stats = gpu_quantize_stats, .cast = gpu_cast, .gemm = gpu_gemm, .sync = gpu_sync,
    .end_phase = gpu_end_phase, .state = gpu_state, .free = gpu_free};

/* ------------------------------------------------------------------ creation */

/* The configurations by kind, and the per-tensor parameters the kernels take. */
static int split_configs(gpu_priv *p, char *err, size_t errlen) {
  const fp8_engine_plan *pl = &p->plan;
  const size_t nt = pl->ntensors, nc = pl->nconfigs;
  p->dl_cfg = calloc(nc + 1, sizeof *p->dl_cfg);
  p->cur_cfg = calloc(nc + 1, sizeof *p->cur_cfg);
  if (!p->dl_cfg || !p->cur_cfg) return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  for (size_t c = 0; c < nc; c++) {
    if (!fp8_plan_active(pl, c)) continue;
    if (pl->configs[c].kind == FP8_KIND_DELAYED) p->dl_cfg[p->ndl++] = c;
    else if (pl->configs[c].kind == FP8_KIND_CURRENT) p->cur_cfg[p->ncur++] = c;
  }
  if (nt * p->ndl > (size_t)INT32_MAX)
    return fp8_errorf(FP8_ERANGE, err, errlen, "%zu tensors x %zu delayed configurations: too many slots", nt, p->ndl);
  p->nslots = (int32_t)(nt * p->ndl);
  p->dl_fmt = calloc(nt * p->ndl + 1, sizeof *p->dl_fmt);
  p->cur_par = calloc(nt * p->ncur + 1, sizeof *p->cur_par);
  if (!p->dl_fmt || !p->cur_par) return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  for (size_t t = 0; t < nt; t++) {
    for (size_t j = 0; j < p->ndl; j++) p->dl_fmt[t * p->ndl + j] = (int)fp8_plan_format(pl, t, p->dl_cfg[j]);
    for (size_t j = 0; j < p->ncur; j++) {
      const fp8_config *cf = &pl->configs[p->cur_cfg[j]];
      p->cur_par[t * p->ncur + j] = (fp8k_current_params){
          .amax_epsilon = cf->amax_epsilon, .pow2 = cf->pow2 != 0, .margin = cf->margin,
          .format = (int32_t)fp8_plan_format(pl, t, p->cur_cfg[j])};
    }
  }
  return FP8_OK;
}

/* The delayed state on the device: scale 1, empty histories (fp8_delayed_init's start). */
static int init_state(gpu_priv *p, char *err, size_t errlen) {
  const fp8_engine_plan *pl = &p->plan;
  const size_t ns = (size_t)p->nslots, nred = fp8_plan_nred(pl);
  int rc = FP8_OK;
  int64_t *off = calloc(ns + 1, sizeof *off);
  int32_t *hlen = calloc(ns + 1, sizeof *hlen), *acomp = calloc(ns + 1, sizeof *acomp);
  int32_t *idx = calloc(ns + 1, sizeof *idx);
  float *smax = calloc(ns + 1, sizeof *smax);
  p->h_scale = calloc(ns + 1, sizeof *p->h_scale);
  p->h_red = calloc(nred + 1, sizeof *p->h_red);
  if (!off || !hlen || !acomp || !idx || !smax || !p->h_scale || !p->h_red) {
    rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
    goto done;
  }
  int64_t total = 0;
  for (size_t s = 0; s < ns; s++) {
    const fp8_config *cf = &pl->configs[p->dl_cfg[s % p->ndl]];
    off[s] = total;
    total += cf->history_len;
    hlen[s] = cf->history_len;
    acomp[s] = FP8K_DELAYED_COMP(cf->amax_compute, cf->unfused_update, cf->margin);
    smax[s] = fp8_scaled_max((fp8_format)p->dl_fmt[s], cf->margin);
    p->h_scale[s] = 1.0f;
  }
  FP8G_CUDA(cudaMalloc((void **)&p->d_ring, (size_t)(total + 1) * sizeof(float)));
  FP8G_CUDA(cudaMemset(p->d_ring, 0, (size_t)(total + 1) * sizeof(float)));
  FP8G_CUDA(cudaMalloc((void **)&p->d_ring_off, (ns + 1) * sizeof *off));
  FP8G_CUDA(cudaMemcpy(p->d_ring_off, off, ns * sizeof *off, cudaMemcpyHostToDevice));
  FP8G_CUDA(cudaMalloc((void **)&p->d_head, (ns + 1) * sizeof(int32_t)));
  FP8G_CUDA(cudaMemset(p->d_head, 0, (ns + 1) * sizeof(int32_t)));
  FP8G_CUDA(cudaMalloc((void **)&p->d_hlen, (ns + 1) * sizeof *hlen));
  FP8G_CUDA(cudaMemcpy(p->d_hlen, hlen, ns * sizeof *hlen, cudaMemcpyHostToDevice));
  FP8G_CUDA(cudaMalloc((void **)&p->d_acomp, (ns + 1) * sizeof *acomp));
  FP8G_CUDA(cudaMemcpy(p->d_acomp, acomp, ns * sizeof *acomp, cudaMemcpyHostToDevice));
  FP8G_CUDA(cudaMalloc((void **)&p->d_smax, (ns + 1) * sizeof *smax));
  FP8G_CUDA(cudaMemcpy(p->d_smax, smax, ns * sizeof *smax, cudaMemcpyHostToDevice));
  FP8G_CUDA(cudaMalloc((void **)&p->d_scale, (ns + 1) * sizeof(float)));
  FP8G_CUDA(cudaMemcpy(p->d_scale, p->h_scale, ns * sizeof(float), cudaMemcpyHostToDevice));
  FP8G_CUDA(cudaMalloc((void **)&p->d_red, (nred + 1) * sizeof(float)));
  for (unsigned ph = 1; ph <= 3; ph++) { /* slot -> its amax slot, -1 outside the phase */
    for (size_t s = 0; s < ns; s++) {
      size_t t = s / p->ndl;
      idx[s] = fp8_plan_in_phase(pl, t, ph) ? (int32_t)fp8_plan_red_slot(pl, t) : -1;
    }
    FP8G_CUDA(cudaMalloc((void **)&p->d_index[ph], (ns + 1) * sizeof *idx));
    FP8G_CUDA(cudaMemcpy(p->d_index[ph], idx, ns * sizeof *idx, cudaMemcpyHostToDevice));
  }
  FP8G_CUDA(cudaDeviceSynchronize()); /* before the context's stream reads any of it */
done:
  free(off);
  free(hlen);
  free(acomp);
  free(idx);
  free(smax);
  return rc;
}

int fp8_engine_gpu_create(const fp8_engine_plan *plan, fp8_engine **out, char *err,
                                     size_t errlen) {
  *out = NULL;
  char why[256] = "";
  if (fp8k_device_count(why, sizeof why) == 0)
    return fp8_errorf(FP8_EDEVICE, err, errlen, "no usable CUDA device (%s)", why);
  fp8_engine *e = calloc(1, sizeof *e);
  gpu_priv *p = calloc(1, sizeof *p);
  if (!e || !p) {
    free(e);
    free(p);
    return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  }
  e->ops = &GPU_OPS;
  e->priv = p;
  p->plan = *plan;
  p->resident = -1;
  /* one GPU per process: under a launcher, the node-local rank's */
  const int dev = fp8_gpu_local_device();
  int rc = fp8k_ctx_create(&p->ctx, dev, err, errlen);
  if (!rc && !(p->view = calloc(plan->ntensors + 1, sizeof *p->view)))
    rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  if (!rc) rc = split_configs(p, err, errlen);
  if (!rc) rc = init_state(p, err, errlen); /* also with no delayed slot: the reduction buffers */
  if (rc) {
    gpu_free(e);
    return rc;
  }
  fp8_gpu_info info;
  char lt_why[512] = "";
  if (fp8_gpu_probe(dev, &info, NULL, 0) == FP8_OK) snprintf(e->name, sizeof e->name, "gpu: %.240s", info.name);
  else snprintf(e->name, sizeof e->name, "gpu");
  /* cuBLASLt's FP8 GEMMs (sm_89+); without them every GEMM goes to the CPU engine */
  if (fp8_gpu_require_fp8(dev, NULL, lt_why, sizeof lt_why) != FP8_OK ||
      fp8_gemm_lt_create(&p->lt, dev, lt_why, sizeof lt_why) != FP8_OK) {
    p->lt = NULL;
    (void)cudaGetLastError(); /* the runtime keeps a failed call's error: not the kernels' */
    fprintf(stderr, "fp8lab: FP8 GEMMs on the CPU: %s\n", lt_why);
  }
  *out = e;
  return FP8_OK;
}

/* The module's probe: how many devices, or why none (engine_load.c asks before the
 * self-check, so that "no device" is told apart from a failing engine). */
int fp8_engine_gpu_devices(char *why, size_t whylen) {
  return fp8k_device_count(why, whylen);
}
