/* runner.c: trace replay through an experiment's configurations (see runner.h).
 *
 * Order of work and of the rows of steps.csv: steps ascending, then tensor names (strcmp),
 * then configurations in experiment order. Tensors of one step are spread over worker threads;
 * each worker widens a tensor to float32 once, takes its amax, and evaluates all
 * configurations chunk by chunk while the chunk is in L1.
 *
 * A multi-rank trace is one replay whose tensors are `rank_<r>/<name>`. A step is worked
 * through one rank at a time (only that rank's snapshot is mapped), ranks in the strcmp order
 * of their prefix, which keeps the rows in tensor-name order. The delayed update waits until
 * every rank of the step is done (all amaxes of the step are then known): with
 * [trace] reduce_amax each tensor is updated with the max of its amax over the ranks of its
 * reduction group, the host-side form of TE's all-reduce MAX.
 */
#include "runner.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "block.h"
#include "gemm.h"
#include "outfile.h"
#include "synth.h"

#ifndef FP8LAB_GIT_REV
#define FP8LAB_GIT_REV "unknown"
#endif

#define CHUNK 4096

#define HIST_MIN FP8_LOG2_HIST_MIN
#define HIST_BINS FP8_LOG2_HIST_BINS

/* Totals of one (tensor, configuration) over the snapshot steps, for summary.csv. */
typedef struct {
  int64_t steps, steps_with_overflow;
  fp8_stats st;
  double snr_min;
  float amax_max;
} acc_t;

typedef struct {
  char *name;
  const char *local;      /* the name within its rank (multi-rank traces), else name */
  size_t rank;            /* its rank (0 for a single-rank trace) */
  size_t red;             /* its amax-reduction slot (reduce_amax) */
  fp8_role role;
  fp8_format *fmt;        /* per configuration */
  fp8_delayed_state *dl;  /* per configuration (allocated for delayed ones) */
  acc_t *acc;             /* per configuration */
  /* per step */
  const fp8_tensor_view *view;
  float amax;
  int csv_has;
  float csv_amax;
  fp8_stats *st;          /* per configuration, this step */
  float *scale;           /* per configuration, this step (NaN for block kinds) */
  fp8_block_stats *bst;   /* per configuration, this step (block kinds) */
  int oom;                /* this step's evaluation ran out of memory */
  int64_t hist[HIST_BINS]; /* this step's log2|x| histogram */
} tensor_t;

typedef struct {
  const fp8_experiment *ex;
  fp8_engine *engine;     /* NULL: everything on the CPU */
  int multirank;          /* the trace is a folder of rank_<r>/ traces */
  size_t ntensors;
  tensor_t *t;
  size_t nred;            /* reduce_amax: slots, one per (name within the rank, group) */
  float *red;             /* the max amax of each slot at the current step */
  /* the present tensors of the current step, worked through by the threads */
  size_t *work;
  size_t nwork;
  size_t next;
  pthread_mutex_t lock;
} run_t;

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

static ssize_t find_tensor(const run_t *r, const char *name) {
  size_t lo = 0, hi = r->ntensors;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    int c = strcmp(r->t[mid].name, name);
    if (c == 0) return (ssize_t)mid;
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  return -1;
}

/* [trace] tensors applied to a tensor name of the trace (in a multi-rank trace, globs without
 * '/' are matched against the name within the rank: experiment.h). */
static int tensor_selected(const fp8_experiment *ex, const fp8_trace *tr, const char *name) {
  if (tr->nranks) {
    const char *local = fp8_trace_split_rank(name, NULL);
    if (local) return fp8_experiment_rank_tensor_selected(ex, name, local);
  }
  return fp8_experiment_tensor_selected(ex, name);
}

/* ------------------------------------------------------------------ CSV formatting */


static void put_config_cols(FILE *fp, const fp8_config *c, fp8_format f) {
  fprintf(fp, "%s,%s,%s,", c->label, fp8_recipe_kind_name(c->kind), fp8_format_name(f));
  if (c->kind == FP8_KIND_DELAYED)
    fprintf(fp, "%d,%d,%s,", (int)c->history_len, (int)c->margin,
            fp8_amax_compute_name(c->amax_compute));
  else
    fputs(",,,", fp);
}

static const char STEPS_HEADER[] =
    "tensor,role,step,recipe,kind,format,history_len,margin,amax_compute,amax,scale,n,nonfinite,"
    "zeros,overflow,underflow,subnormal,mse,snr_db,nblocks,blocks_with_overflow,log2_scale_min,"
    "log2_scale_max,log2_scale_std\n";

static const char GEMM_HEADER[] =
    "layer,gemm,step,recipe,kind,history_len,margin,amax_compute,rel_error\n";

static const char SUMMARY_HEADER[] =
    "tensor,role,recipe,kind,format,history_len,margin,amax_compute,steps,n,nonfinite,zeros,"
    "overflow,underflow,subnormal,overflow_rate,underflow_rate,subnormal_rate,"
    "steps_with_overflow,mse,snr_db,snr_db_min,amax_max\n";

/* ------------------------------------------------------------------ per-tensor work */

/* The block recipe of configuration cf for a tensor of role r and format f. */
static fp8_block_params block_params(const fp8_config *cf, fp8_role r, fp8_format f) {
  switch (cf->kind) {
  case FP8_KIND_MXFP8: return fp8_block_params_mxfp8(f, (fp8_mx_rounding)cf->mx_rounding);
  case FP8_KIND_BLOCK:
    return fp8_block_params_tile(f, fp8_block_shape_is_square((fp8_block_shape)cf->block_shape, r), cf->pow2 != 0);
  default: return fp8_block_params_rowwise(f, cf->pow2 != 0);
  }
}

/* Widens the tensor once, takes its amax, then runs every configuration over L1-sized chunks. */
/* The scale configuration c uses for tensor t at this step (per-tensor kinds; t->amax set). */
static float config_scale(const run_t *r, const tensor_t *t, size_t c) {
  const fp8_config *cf = &r->ex->configs[c];
  if (cf->kind == FP8_KIND_DELAYED) return t->dl[c].scale;
  fp8_current_params p = {.amax_epsilon = cf->amax_epsilon, .pow2 = cf->pow2 != 0,
                          .margin = cf->margin, .format = t->fmt[c]};
  return fp8_current_scale(&p, t->amax);
}

/* Block kinds on the widened tensor x, blocks along its last dimension (both engines: block
 * recipes always run on the CPU). Returns FP8_ENOMEM or FP8_OK. */
static int eval_block_configs(const run_t *r, tensor_t *t, const float *x) {
  int64_t rows, cols;
  fp8_block_view_2d(t->view->shape, t->view->ndim, &rows, &cols);
  for (size_t c = 0; c < r->ex->nconfigs; c++) {
    const fp8_config *cf = &r->ex->configs[c];
    if (!fp8_recipe_kind_is_block(cf->kind)) continue;
    t->scale[c] = NAN;
    fp8_block_params bp = block_params(cf, t->role, t->fmt[c]);
    if (fp8_block_quantize_f32(x, rows, cols, &bp, FP8_BLOCK_DIR_ROW, NULL, NULL, &t->st[c], &t->bst[c]) ==
        FP8_ENOMEM)
      return FP8_ENOMEM;
  }
  return FP8_OK;
}

static void eval_tensor(run_t *r, tensor_t *t, float **buf, size_t *cap) {
  const fp8_tensor_view *v = t->view;
  size_t n = (size_t)v->numel;
  size_t nc = r->ex->nconfigs;
  if (n > *cap) {
    free(*buf);
    *buf = malloc((n ? n : 1) * sizeof **buf);
    *cap = *buf ? n : 0;
  }
  float *x = *buf;
  t->oom = 0;
  if (!x && n) { /* out of memory: the caller reports it */
    t->oom = 1;
    return;
  }
  fp8_dtype_to_f32(v->dtype, v->data, n, x);
  t->amax = fp8_amax_f32(x, n);
  memset(t->hist, 0, sizeof t->hist);
  fp8_log2_histogram(x, n, t->hist);
  for (size_t c = 0; c < nc; c++) {
    fp8_stats_init(&t->st[c]);
    if (!fp8_recipe_kind_is_block(r->ex->configs[c].kind)) t->scale[c] = config_scale(r, t, c);
  }
  if (eval_block_configs(r, t, x) != FP8_OK) t->oom = 1;
  for (size_t off = 0; off < n; off += CHUNK) {
    size_t m = n - off < CHUNK ? n - off : CHUNK;
    for (size_t c = 0; c < nc; c++)
      if (!fp8_recipe_kind_is_block(r->ex->configs[c].kind))
        fp8_quantize_f32(x + off, m, t->scale[c], t->fmt[c], NULL, NULL, &t->st[c]);
  }
}

/* The same work with an engine (the GPU): the engine loads the tensor once and evaluates the
 * per-tensor configurations; block configurations run on the CPU from a widened copy. */
static int eval_tensor_engine(run_t *r, fp8_engine *e, tensor_t *t, float **buf, size_t *cap, char *err,
                              size_t errlen) {
  const fp8_tensor_view *v = t->view;
  size_t nc = r->ex->nconfigs, np = 0;
  int rc = e->load(e, v, &t->amax, t->hist, err, errlen);
  if (rc) return rc;
  float *scales = malloc((nc + 1) * sizeof *scales);
  fp8_format *fmts = malloc((nc + 1) * sizeof *fmts);
  fp8_stats *st = malloc((nc + 1) * sizeof *st);
  size_t *idx = malloc((nc + 1) * sizeof *idx);
  int need_host = 0;
  if (!scales || !fmts || !st || !idx) {
    rc = fp8_errorf(FP8_ENOMEM, err, errlen, "tensor %s: out of memory", t->name);
    goto done;
  }
  for (size_t c = 0; c < nc; c++) {
    fp8_stats_init(&t->st[c]);
    if (fp8_recipe_kind_is_block(r->ex->configs[c].kind)) {
      need_host = 1;
      continue;
    }
    t->scale[c] = config_scale(r, t, c);
    scales[np] = t->scale[c];
    fmts[np] = t->fmt[c];
    idx[np++] = c;
  }
  if (np) {
    rc = e->stats(e, scales, fmts, np, st, err, errlen);
    if (rc) goto done;
    for (size_t i = 0; i < np; i++) t->st[idx[i]] = st[i];
  }
  if (need_host) {
    size_t n = (size_t)v->numel;
    if (n > *cap) {
      free(*buf);
      *buf = malloc((n ? n : 1) * sizeof **buf);
      *cap = *buf ? n : 0;
    }
    if (!*buf && n) {
      rc = fp8_errorf(FP8_ENOMEM, err, errlen, "tensor %s: out of memory", t->name);
      goto done;
    }
    fp8_dtype_to_f32(v->dtype, v->data, n, *buf);
    if (eval_block_configs(r, t, *buf) != FP8_OK)
      rc = fp8_errorf(FP8_ENOMEM, err, errlen, "tensor %s: out of memory", t->name);
  }
done:
  free(scales);
  free(fmts);
  free(st);
  free(idx);
  return rc;
}

static void *worker(void *arg) {
  run_t *r = arg;
  float *buf = NULL;
  size_t cap = 0;
  for (;;) {
    pthread_mutex_lock(&r->lock);
    size_t k = r->next < r->nwork ? r->next++ : (size_t)-1;
    pthread_mutex_unlock(&r->lock);
    if (k == (size_t)-1) break;
    eval_tensor(r, &r->t[r->work[k]], &buf, &cap);
  }
  free(buf);
  return NULL;
}

static void run_workers(run_t *r, int threads) {
  r->next = 0;
  if (threads <= 1 || r->nwork <= 1) {
    worker(r);
    return;
  }
  int nt = (size_t)threads < r->nwork ? threads : (int)r->nwork;
  pthread_t tid[64];
  if (nt > 64) nt = 64;
  int started = 0;
  for (int i = 0; i < nt; i++)
    if (pthread_create(&tid[i], NULL, worker, r) == 0) started++;
  if (started == 0) worker(r);
  for (int i = 0; i < started; i++) pthread_join(tid[i], NULL);
}


/* ------------------------------------------------------------------ GEMM error */

static int cmp_cstr(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* OpenBLAS's own threads would compete with the runner's workers for the same cores, and the
 * GEMMs here are small: one BLAS thread. Weak, so that another CBLAS still links. */
extern void openblas_set_num_threads(int n) __attribute__((weak));

/* The tensor `<layer>.<role>` present (and selected) at this step, or NULL. */
static tensor_t *layer_tensor(run_t *r, const char *layer, const char *role) {
  char name[1024];
  if ((size_t)snprintf(name, sizeof name, "%s.%s", layer, role) >= sizeof name) return NULL;
  ssize_t idx = find_tensor(r, name);
  return idx >= 0 && r->t[idx].view ? &r->t[idx] : NULL;
}

static float *widen(const fp8_tensor_view *v) {
  float *x = malloc(((size_t)v->numel + 1) * sizeof *x);
  if (x) fp8_dtype_to_f32(v->dtype, v->data, (size_t)v->numel, x);
  return x;
}

/* gemm.csv rows of one snapshot step: for every layer with input, weight and grad_output of
 * matching shapes, the relative error of fprop, dgrad and wgrad under every configuration. */
static int gemm_step(run_t *r, const fp8_step *s, int64_t step, FILE *gp, long long *nrows, char *err,
                     size_t errlen) {
  const fp8_experiment *ex = r->ex;
  size_t nc = ex->nconfigs, nl = 0;
  int rc = FP8_OK;
  char **layers = calloc(s->ntensors + 1, sizeof *layers);
  double *rel = calloc(nc * FP8_GEMM_COUNT + 1, sizeof *rel);
  /* the engine's GEMMs (per-tensor configurations): results, which it ran, its inputs */
  double *erel = calloc(nc * FP8_GEMM_COUNT + 1, sizeof *erel);
  bool *got = calloc(nc * FP8_GEMM_COUNT + 1, sizeof *got), *edone = calloc(nc * FP8_GEMM_COUNT + 1, sizeof *edone);
  size_t *eidx = calloc(nc + 1, sizeof *eidx);
  float *escale = calloc(3 * nc + 1, sizeof *escale);
  fp8_format *efmt = calloc(3 * nc + 1, sizeof *efmt);
  float *buf[9] = {0};
  fp8_gemm_ref ref;
  memset(&ref, 0, sizeof ref);
  if (!layers || !rel || !erel || !got || !edone || !eidx || !escale || !efmt) {
    rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
    goto done;
  }
  if (openblas_set_num_threads) openblas_set_num_threads(1);
  for (size_t k = 0; k < s->ntensors; k++) {
    const char *nm = s->tensors[k].name;
    size_t L = strlen(nm);
    if (L > 6 && strcmp(nm + L - 6, ".input") == 0) {
      layers[nl] = strndup(nm, L - 6);
      if (!layers[nl]) { rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory"); goto done; }
      nl++;
    }
  }
  qsort(layers, nl, sizeof *layers, cmp_cstr);
  for (size_t li = 0; li < nl; li++) {
    tensor_t *tx = layer_tensor(r, layers[li], "input"), *tw = layer_tensor(r, layers[li], "weight"),
             *tg = layer_tensor(r, layers[li], "grad_output");
    if (!tx || !tw || !tg) continue;
    int64_t T, in, out, in2, T2, out2;
    fp8_block_view_2d(tx->view->shape, tx->view->ndim, &T, &in);
    fp8_block_view_2d(tw->view->shape, tw->view->ndim, &out, &in2);
    fp8_block_view_2d(tg->view->shape, tg->view->ndim, &T2, &out2);
    if (T != T2 || in != in2 || out != out2 || T == 0 || in == 0 || out == 0) continue;
    size_t nx = (size_t)(T * in), nw = (size_t)(out * in), ng = (size_t)(T * out);
    /* buf: X, W, G originals; then dequantized X, W, G row-wise; X, W, G column-wise */
    buf[0] = widen(tx->view);
    buf[1] = widen(tw->view);
    buf[2] = widen(tg->view);
    size_t sizes[3] = {nx, nw, ng};
    for (int i = 0; i < 6; i++) buf[3 + i] = malloc((sizes[i % 3] + 1) * sizeof(float));
    for (int i = 0; i < 9; i++)
      if (!buf[i]) { rc = fp8_errorf(FP8_ENOMEM, err, errlen, "layer %s: out of memory", layers[li]); goto done; }
    tensor_t *ts[3] = {tx, tw, tg};
    int64_t rows[3] = {T, out, T}, cols[3] = {in, in, out};
    memset(got, 0, nc * FP8_GEMM_COUNT * sizeof *got);
    if (r->engine && r->engine->gemm) {
      /* the engine's own FP8 GEMMs for the per-tensor configurations (block recipes, and any
       * GEMM it declines, stay on the CPU below) */
      size_t np = 0;
      for (size_t c = 0; c < nc; c++)
        if (!fp8_recipe_kind_is_block(ex->configs[c].kind)) eidx[np++] = c;
      if (np) {
        fp8_engine_gemm_job job = {.x = buf[0], .w = buf[1], .g = buf[2], .tokens = T, .in = in,
                                   .out = out, .max_tokens = ex->gemm_max_tokens, .n = np};
        for (int i = 0; i < 3; i++) {
          for (size_t j = 0; j < np; j++) {
            escale[i * np + j] = ts[i]->scale[eidx[j]];
            efmt[i * np + j] = ts[i]->fmt[eidx[j]];
          }
          job.scale[i] = escale + i * np;
          job.format[i] = efmt + i * np;
        }
        char why[512] = "";
        rc = r->engine->gemm(r->engine, &job, erel, edone, why, sizeof why);
        if (rc) { fp8_errorf(rc, err, errlen, "layer %s: GEMM on %s: %s", layers[li], r->engine->name, why); goto done; }
        for (int g = 0; g < FP8_GEMM_COUNT; g++)
          for (size_t j = 0; j < np; j++)
            if (edone[(size_t)g * np + j]) {
              rel[(size_t)g * nc + eidx[j]] = erel[(size_t)g * np + j];
              got[(size_t)g * nc + eidx[j]] = true;
            }
      }
    }
    bool need_cpu = false;
    for (size_t i = 0; i < nc * FP8_GEMM_COUNT; i++) need_cpu |= !got[i];
    if (need_cpu) {
      rc = fp8_gemm_ref_init(&ref, buf[0], buf[1], buf[2], T, in, out, ex->gemm_max_tokens);
      if (rc) { fp8_errorf(rc, err, errlen, "layer %s: GEMM reference: %s", layers[li], fp8_strerror(rc)); goto done; }
    }
    for (size_t c = 0; c < nc && need_cpu; c++) {
      const fp8_config *cf = &ex->configs[c];
      bool want[FP8_GEMM_COUNT];
      for (int g = 0; g < FP8_GEMM_COUNT; g++) want[g] = !got[(size_t)g * nc + c];
      if (!want[0] && !want[1] && !want[2]) continue;
      double e[FP8_GEMM_COUNT];
      if (!fp8_recipe_kind_is_block(cf->kind)) {
        /* one per-tensor scale: the same dequantized operand in every GEMM */
        const float *x[3] = {buf[0], buf[1], buf[2]};
        float *q[3] = {buf[3], buf[4], buf[5]};
        float sc[3] = {tx->scale[c], tw->scale[c], tg->scale[c]};
        fp8_format fm[3] = {tx->fmt[c], tw->fmt[c], tg->fmt[c]};
        rc = fp8_gemm_errors_per_tensor(&ref, x, sc, fm, q, want, e);
      } else {
        for (int i = 0; i < 3; i++) {
          fp8_block_params bp = block_params(cf, ts[i]->role, ts[i]->fmt[c]);
          fp8_stats st;
          fp8_block_stats bs;
          fp8_stats_init(&st);
          int r1 = fp8_block_quantize_f32(buf[i], rows[i], cols[i], &bp, FP8_BLOCK_DIR_ROW, buf[3 + i], NULL, &st, &bs);
          int r2 = fp8_block_quantize_f32(buf[i], rows[i], cols[i], &bp, FP8_BLOCK_DIR_COL, buf[6 + i], NULL, &st, &bs);
          if (r1 || r2) { rc = fp8_errorf(r1 ? r1 : r2, err, errlen, "layer %s: out of memory", layers[li]); goto done; }
        }
        /* TE's layouts: fprop row-wise X and W; dgrad row-wise dY, column-wise W; wgrad
         * column-wise dY and X (blocks along each GEMM's reduction dimension) */
        fp8_gemm_operands ops = {buf[3], buf[4], buf[5], buf[7], buf[8], buf[6]};
        rc = fp8_gemm_errors(&ref, &ops, e);
      }
      if (rc) { fp8_errorf(rc, err, errlen, "layer %s: GEMM: %s", layers[li], fp8_strerror(rc)); goto done; }
      for (int g = 0; g < FP8_GEMM_COUNT; g++)
        if (!got[(size_t)g * nc + c]) rel[(size_t)g * nc + c] = e[g];
    }
    for (int g = 0; g < FP8_GEMM_COUNT; g++)
      for (size_t c = 0; c < nc; c++) {
        const fp8_config *cf = &ex->configs[c];
        fprintf(gp, "%s,%s,%lld,%s,%s,", layers[li], fp8_gemm_name((fp8_gemm_kind)g), (long long)step, cf->label,
                fp8_recipe_kind_name(cf->kind));
        if (cf->kind == FP8_KIND_DELAYED)
          fprintf(gp, "%d,%d,%s,", (int)cf->history_len, (int)cf->margin, fp8_amax_compute_name(cf->amax_compute));
        else
          fputs(",,,", gp);
        fp8_csv_put_num(gp, rel[(size_t)g * nc + c]);
        fputc('\n', gp);
        (*nrows)++;
      }
    fp8_gemm_ref_free(&ref);
    memset(&ref, 0, sizeof ref);
    for (int i = 0; i < 9; i++) {
      free(buf[i]);
      buf[i] = NULL;
    }
  }
done:
  fp8_gemm_ref_free(&ref);
  for (int i = 0; i < 9; i++) free(buf[i]);
  for (size_t i = 0; i < nl; i++) free(layers[i]);
  free(layers);
  free(rel);
  free(erel);
  free(got);
  free(edone);
  free(eidx);
  free(escale);
  free(efmt);
  return rc;
}

/* ------------------------------------------------------------------ progress */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void progress(size_t done, size_t total, double t0, double *last, int final) {
  double t = now_s();
  if (!final && t - *last < 0.1) return;
  *last = t;
  double el = t - t0, rate = el > 0 ? (double)done / el : 0;
  double eta = rate > 0 ? (double)(total - done) / rate : 0;
  int width = 30, fill = total ? (int)((double)width * (double)done / (double)total) : width;
  fprintf(stderr, "\r[%.*s%*s] %zu/%zu steps  %.1f steps/s  ETA %.0fs ", fill,
          "##############################", width - fill, "", done, total, rate, eta);
  if (final) fputc('\n', stderr);
  fflush(stderr);
}

/* ------------------------------------------------------------------ run.json */

static json_t *configs_json(const fp8_experiment *ex) {
  json_t *arr = json_array();
  for (size_t c = 0; c < ex->nconfigs; c++) {
    const fp8_config *cf = &ex->configs[c];
    const char *fmt = cf->format == FP8_SEL_HYBRID ? "hybrid"
                    : cf->format == FP8_SEL_E4M3 ? "e4m3" : "e5m2";
    json_t *o = json_pack("{s:s, s:s, s:s, s:i}", "recipe", cf->label, "kind",
                          fp8_recipe_kind_name(cf->kind), "format", fmt, "margin", (int)cf->margin);
    if (cf->kind == FP8_KIND_DELAYED) {
      json_object_set_new(o, "history_len", json_integer(cf->history_len));
      json_object_set_new(o, "amax_compute", json_string(fp8_amax_compute_name(cf->amax_compute)));
    } else {
      json_object_set_new(o, "amax_epsilon", json_real(cf->amax_epsilon));
      json_object_set_new(o, "pow2", json_boolean(cf->pow2));
    }
    json_array_append_new(arr, o);
  }
  return arr;
}

static json_t *file_json(const char *path) {
  struct stat sb;
  json_t *o = json_pack("{s:s}", "path", path);
  if (stat(path, &sb) == 0) json_object_set_new(o, "bytes", json_integer((json_int_t)sb.st_size));
  return o;
}

static int write_run_json(const char *dir, const fp8_experiment *ex, const fp8_trace *tr,
                          const char *trace_dir, const fp8_run_summary *sum, long long mismatches,
                          const char *started, int threads, const char *engine_name, char *err,
                          size_t errlen) {
  json_t *root = json_object();
  json_object_set_new(root, "fp8lab_version", json_string(FP8LAB_VERSION));
  json_object_set_new(root, "git_revision", json_string(FP8LAB_GIT_REV));
  json_object_set_new(root, "started_utc", json_string(started));
  size_t len = 0;
  char *text = NULL;
  FILE *fp = fopen(ex->file, "rb");
  if (fp) {
    text = malloc(1 << 20);
    if (text) {
      len = fread(text, 1, (1 << 20) - 1, fp);
      text[len] = 0;
    }
    fclose(fp);
  }
  json_t *exo = json_pack("{s:s, s:s}", "file", ex->file, "name", ex->name);
  if (text) json_object_set_new(exo, "text", json_stringn_nocheck(text, len));
  free(text);
  json_object_set_new(exo, "configurations", configs_json(ex));
  json_object_set_new(exo, "overflow_budget", json_real(ex->overflow_budget));
  json_object_set_new(root, "experiment", exo);

  json_t *tro = json_pack("{s:s, s:I, s:I}", "path", trace_dir, "snapshot_steps",
                          (json_int_t)tr->nsteps, "amax_rows", (json_int_t)tr->namax);
  if (ex->trace_is_synth) {
    json_object_set_new(tro, "synth_preset", json_string(ex->synth_preset));
    json_object_set_new(tro, "synth_steps", json_integer(ex->synth_steps));
    json_object_set_new(tro, "synth_seed", json_integer((json_int_t)ex->synth_seed));
  }
  if (tr->nranks) { /* only for multi-rank traces: a single-rank run.json is as it was */
    json_object_set_new(tro, "ranks", json_integer((json_int_t)tr->nranks));
    json_object_set_new(tro, "reduce_amax", json_boolean(ex->reduce_amax));
    json_object_set_new(tro, "reduce_group",
                        json_integer((json_int_t)fp8_experiment_reduce_group(ex, tr->nranks)));
  }
  json_object_set_new(root, "trace", tro);

  json_t *inputs = json_array();
  json_array_append_new(inputs, file_json(ex->file));
  for (size_t i = 0; i < tr->nsteps && !tr->nranks; i++)
    json_array_append_new(inputs, file_json(tr->step_paths[i]));
  if (tr->namax && !tr->nranks) {
    char p[4096 + 16];
    snprintf(p, sizeof p, "%s/amax.csv", trace_dir);
    json_array_append_new(inputs, file_json(p));
  }
  for (size_t rk = 0; rk < tr->nranks; rk++) { /* rank by rank: snapshots, then amax.csv */
    const fp8_trace *t = &tr->ranks[rk];
    for (size_t i = 0; i < t->nsteps; i++) json_array_append_new(inputs, file_json(t->step_paths[i]));
    char p[4096 + 48];
    struct stat sb;
    snprintf(p, sizeof p, "%s/amax.csv", t->dir);
    if (stat(p, &sb) == 0) json_array_append_new(inputs, file_json(p));
  }
  json_object_set_new(root, "inputs", inputs);
  json_object_set_new(root, "outputs", json_pack("[s, s, s, s]", "steps.csv", "summary.csv", "histograms.csv", "run.json"));
  json_object_set_new(root, "steps_replayed", json_integer(sum->steps));
  json_object_set_new(root, "tensors", json_integer(sum->tensors));
  json_object_set_new(root, "configurations", json_integer(sum->configs));
  json_object_set_new(root, "rows", json_integer(sum->rows));
  json_object_set_new(root, "gemm_rows", json_integer(sum->gemm_rows));
  json_object_set_new(root, "threads", json_integer(threads));
  json_object_set_new(root, "engine", json_string(engine_name));
  json_object_set_new(root, "amax_csv_mismatches", json_integer(mismatches));
  json_object_set_new(root, "wall_time_s", json_real(sum->wall_s));

  char *dump = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  json_decref(root);
  if (!dump) return fp8_errorf(FP8_ENOMEM, err, errlen, "run.json: out of memory");
  fp8_outfile of;
  int rc = fp8_outfile_open(&of, dir, "run.json", err, errlen);
  if (rc == FP8_OK) {
    fputs(dump, of.fp);
    fputc('\n', of.fp);
    rc = fp8_outfile_commit(&of, err, errlen);
  }
  free(dump);
  return rc;
}

/* ------------------------------------------------------------------ the run */

static void tensors_free(run_t *r) {
  for (size_t i = 0; i < r->ntensors; i++) {
    tensor_t *t = &r->t[i];
    if (t->dl)
      for (size_t c = 0; c < r->ex->nconfigs; c++) fp8_delayed_free(&t->dl[c]);
    free(t->name);
    free(t->fmt);
    free(t->dl);
    free(t->acc);
    free(t->st);
    free(t->scale);
    free(t->bst);
  }
  free(r->t);
  r->t = NULL;
  r->ntensors = 0;
}

/* Collects the selected tensor names of all snapshots (validating every header on the way) and
 * of amax.csv, sorted and unique. */
static int collect_names(const fp8_experiment *ex, const fp8_trace *tr, char ***names_out,
                         size_t *n_out, char *err, size_t errlen) {
  size_t n = 0, cap = 64;
  char **names = malloc(cap * sizeof *names);
  int rc = FP8_OK;
  size_t nparts = tr->nranks ? tr->nranks : 1;
  if (!names) return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  for (size_t i = 0; i < tr->nsteps && rc == FP8_OK; i++) {
    if (!fp8_experiment_step_selected(ex, tr->steps[i])) continue;
    for (size_t part = 0; part < nparts && rc == FP8_OK; part++) { /* one rank at a time */
      fp8_step s;
      rc = fp8_trace_load_step_rank(tr, i, part, &s, err, errlen);
      if (rc) break;
      for (size_t k = 0; k < s.ntensors; k++) {
        if (!tensor_selected(ex, tr, s.tensors[k].name)) continue;
        if (n == cap) {
          char **nn = realloc(names, (cap *= 2) * sizeof *names);
          if (!nn) { rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory"); break; }
          names = nn;
        }
        if (!(names[n] = strdup(s.tensors[k].name))) {
          rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
          break;
        }
        n++;
      }
      fp8_step_free(&s);
      if (rc) break;
      /* dedupe as we go so memory stays proportional to distinct names */
      qsort(names, n, sizeof *names, cmp_str);
      size_t w = 0;
      for (size_t k = 0; k < n; k++) {
        if (w && strcmp(names[w - 1], names[k]) == 0) { free(names[k]); continue; }
        names[w++] = names[k];
      }
      n = w;
    }
  }
  for (size_t k = 0; k < tr->namax_names && rc == FP8_OK; k++) {
    if (!tensor_selected(ex, tr, tr->amax_names[k])) continue;
    if (n == cap) {
      char **nn = realloc(names, (cap *= 2) * sizeof *names);
      if (!nn) { rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory"); break; }
      names = nn;
    }
    if (!(names[n] = strdup(tr->amax_names[k]))) {
      rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
      break;
    }
    n++;
  }
  if (rc) {
    for (size_t k = 0; k < n; k++) free(names[k]);
    free(names);
    return rc;
  }
  qsort(names, n, sizeof *names, cmp_str);
  size_t w = 0;
  for (size_t k = 0; k < n; k++) {
    if (w && strcmp(names[w - 1], names[k]) == 0) { free(names[k]); continue; }
    names[w++] = names[k];
  }
  *names_out = names;
  *n_out = w;
  return FP8_OK;
}

static int tensors_init(run_t *r, char **names, size_t n, char *err, size_t errlen) {
  const fp8_experiment *ex = r->ex;
  size_t nc = ex->nconfigs;
  r->t = calloc(n ? n : 1, sizeof *r->t);
  if (!r->t) return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  r->ntensors = n;
  for (size_t i = 0; i < n; i++) {
    tensor_t *t = &r->t[i];
    t->name = names[i];
    names[i] = NULL;
    t->local = r->multirank ? fp8_trace_split_rank(t->name, &t->rank) : NULL;
    if (!t->local) {
      t->local = t->name;
      t->rank = 0;
    }
    t->red = i;
    t->role = fp8_role_of_tensor(t->local); /* the role comes from the name within the rank */
    t->fmt = calloc(nc, sizeof *t->fmt);
    t->dl = calloc(nc, sizeof *t->dl);
    t->acc = calloc(nc, sizeof *t->acc);
    t->st = calloc(nc, sizeof *t->st);
    t->scale = calloc(nc, sizeof *t->scale);
    t->bst = calloc(nc, sizeof *t->bst);
    if (!t->fmt || !t->dl || !t->acc || !t->st || !t->scale || !t->bst)
      return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
    for (size_t c = 0; c < nc; c++) {
      const fp8_config *cf = &ex->configs[c];
      if (fp8_format_resolve(cf->format, t->role, &t->fmt[c]) != FP8_OK) {
        const char *dot = strrchr(t->name, '.');
        return fp8_errorf(FP8_EINVAL, err, errlen,
                    "%s: tensor %s: role '%s' is not one of input, weight, output, grad_output, "
                    "grad_input; [recipe.%s] uses format = hybrid, which needs a role (set format "
                    "= e4m3 or e5m2, or leave the tensor out with [trace] tensors)",
                    ex->file, t->name, dot ? dot + 1 : t->name, cf->label);
      }
      if (cf->kind == FP8_KIND_DELAYED) {
        fp8_delayed_params p = {.history_len = cf->history_len, .margin = cf->margin,
                                .amax_compute = cf->amax_compute, .format = t->fmt[c]};
        int rc = fp8_delayed_init(&t->dl[c], &p);
        if (rc) return fp8_errorf(rc, err, errlen, "tensor %s: [recipe.%s]: %s", t->name, cf->label,
                            fp8_strerror(rc));
      }
      t->acc[c].snr_min = INFINITY;
    }
  }
  return FP8_OK;
}

/* reduce_amax: one slot per (name within the rank, reduction group); tensor i feeds and reads
 * slot t[i].red. Slots are numbered in (name, group) order. */
typedef struct {
  const char *local;
  size_t group, idx;
} red_key;

static int cmp_red_key(const void *a, const void *b) {
  const red_key *x = a, *y = b;
  int c = strcmp(x->local, y->local);
  if (c) return c;
  if (x->group != y->group) return x->group < y->group ? -1 : 1;
  return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int reduction_init(run_t *r, size_t group_size, char *err, size_t errlen) {
  red_key *k = malloc((r->ntensors + 1) * sizeof *k);
  r->red = malloc((r->ntensors + 1) * sizeof *r->red);
  if (!k || !r->red) {
    free(k);
    return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  }
  for (size_t i = 0; i < r->ntensors; i++)
    k[i] = (red_key){r->t[i].local, r->t[i].rank / group_size, i};
  qsort(k, r->ntensors, sizeof *k, cmp_red_key);
  r->nred = 0;
  for (size_t i = 0; i < r->ntensors; i++) {
    if (i == 0 || k[i].group != k[i - 1].group || strcmp(k[i].local, k[i - 1].local) != 0)
      r->nred++;
    r->t[k[i].idx].red = r->nred - 1;
  }
  free(k);
  return FP8_OK;
}

/* The delayed-scaling update at the end of a step, with each tensor's amax of this step (0: the
 * module did not run, the state is kept), or with reduce_amax the max over its group's ranks
 * (ranks without that tensor at this step contribute nothing; amaxes are never NaN here). */
static void delayed_update_all(run_t *r) {
  const fp8_experiment *ex = r->ex;
  if (r->red) {
    for (size_t k = 0; k < r->nred; k++) r->red[k] = 0.0f;
    for (size_t i = 0; i < r->ntensors; i++)
      if (r->t[i].amax > r->red[r->t[i].red]) r->red[r->t[i].red] = r->t[i].amax;
  }
  for (size_t i = 0; i < r->ntensors; i++) {
    float a = r->red ? r->red[r->t[i].red] : r->t[i].amax;
    for (size_t c = 0; c < ex->nconfigs; c++)
      if (ex->configs[c].kind == FP8_KIND_DELAYED) fp8_delayed_update(&r->t[i].dl[c], a);
  }
}

/* The ranks in the strcmp order of their `rank_<r>/` prefixes (rank_1 < rank_10 < rank_2), the
 * order in which a step's rows come out sorted by tensor name. */
static int cmp_rank_prefix(const void *a, const void *b) {
  char x[32], y[32];
  snprintf(x, sizeof x, "rank_%zu/", *(const size_t *)a);
  snprintf(y, sizeof y, "rank_%zu/", *(const size_t *)b);
  return strcmp(x, y);
}

/* The steps of the replay: selected snapshot steps and amax.csv steps, sorted and unique. */
static int union_steps(const fp8_experiment *ex, const fp8_trace *tr, int64_t **out, size_t *nout) {
  int64_t *s = malloc((tr->nsteps + tr->namax + 1) * sizeof *s);
  if (!s) return FP8_ENOMEM;
  size_t n = 0;
  for (size_t i = 0; i < tr->nsteps; i++)
    if (fp8_experiment_step_selected(ex, tr->steps[i])) s[n++] = tr->steps[i];
  for (size_t i = 0; i < tr->namax; i++)
    if (fp8_experiment_step_selected(ex, tr->amax[i].step)) s[n++] = tr->amax[i].step;
  qsort(s, n, sizeof *s, cmp_i64);
  size_t w = 0;
  for (size_t i = 0; i < n; i++)
    if (w == 0 || s[w - 1] != s[i]) s[w++] = s[i];
  *out = s;
  *nout = w;
  return FP8_OK;
}

static void write_summary(FILE *fp, const run_t *r) {
  fputs(SUMMARY_HEADER, fp);
  for (size_t i = 0; i < r->ntensors; i++) {
    const tensor_t *t = &r->t[i];
    for (size_t c = 0; c < r->ex->nconfigs; c++) {
      const acc_t *a = &t->acc[c];
      if (a->steps == 0) continue;
      const fp8_stats *st = &a->st;
      double finite = (double)(st->n - st->nonfinite);
      fprintf(fp, "%s,%s,", t->name, fp8_role_name(t->role));
      put_config_cols(fp, &r->ex->configs[c], t->fmt[c]);
      fprintf(fp, "%lld,%lld,%lld,%lld,%lld,%lld,%lld,", (long long)a->steps, (long long)st->n,
              (long long)st->nonfinite, (long long)st->zeros, (long long)st->overflow,
              (long long)st->underflow, (long long)st->subnormal);
      fp8_csv_put_num(fp, finite > 0 ? (double)st->overflow / finite : NAN);
      fputc(',', fp);
      fp8_csv_put_num(fp, finite > 0 ? (double)st->underflow / finite : NAN);
      fputc(',', fp);
      fp8_csv_put_num(fp, finite > 0 ? (double)st->subnormal / finite : NAN);
      fprintf(fp, ",%lld,", (long long)a->steps_with_overflow);
      fp8_csv_put_num(fp, fp8_stats_mse(st));
      fputc(',', fp);
      fp8_csv_put_num(fp, fp8_stats_snr_db(st));
      fputc(',', fp);
      fp8_csv_put_num(fp, a->snr_min);
      fputc(',', fp);
      fp8_csv_put_num(fp, a->amax_max);
      fputc('\n', fp);
    }
  }
}

int fp8_run_experiment(const fp8_experiment *ex, const fp8_run_options *opt, fp8_run_summary *sum,
                       char *err, size_t errlen) {
  double t0 = now_s();
  int rc = FP8_OK;
  run_t r = {.ex = ex, .engine = opt->engine};
  fp8_trace tr;
  memset(&tr, 0, sizeof tr);
  int trace_open = 0;
  char **names = NULL;
  size_t nnames = 0;
  int64_t *steps = NULL;
  size_t nsteps = 0;
  int32_t *amax_map = NULL;
  size_t *rank_order = NULL, nparts = 1;
  fp8_outfile steps_out = {0}, hist_out = {0}, gemm_out = {0};
  long long gemm_rows = 0;
  char trace_dir[4096];
  char started[64];
  long long mismatches = 0;
  int threads = opt->threads > 0 ? opt->threads : 1;
  pthread_mutex_init(&r.lock, NULL);
  memset(sum, 0, sizeof *sum);

  time_t wall = time(NULL);
  struct tm tmv;
  gmtime_r(&wall, &tmv);
  strftime(started, sizeof started, "%Y-%m-%dT%H:%M:%SZ", &tmv);

  const char *out = opt->out_dir ? opt->out_dir : ex->out_dir;
  if (!out) {
    rc = fp8_errorf(FP8_EINVAL, err, errlen, "%s: no output directory: give [output] dir or --out DIR",
              ex->file);
    goto done;
  }
  snprintf(sum->out_dir, sizeof sum->out_dir, "%s", out);

  /* The output directory: refuse to overwrite results unless --force; create it; make sure
   * it is writable before any work is done. */
  if (!opt->force && fp8_dir_nonempty(out)) {
    rc = fp8_errorf(FP8_EINVAL, err, errlen,
              "%s: output directory is not empty (use --force to overwrite its results)", out);
    goto done;
  }
  rc = fp8_mkdir_p(out, err, errlen);
  if (rc) goto done;
  rc = fp8_outfile_open(&steps_out, out, "steps.csv", err, errlen);
  if (rc) goto done;
  rc = fp8_outfile_open(&hist_out, out, "histograms.csv", err, errlen);
  if (rc) goto done;
  if (ex->gemm) {
    rc = fp8_outfile_open(&gemm_out, out, "gemm.csv", err, errlen);
    if (rc) goto done;
    fputs(GEMM_HEADER, gemm_out.fp);
  }

  /* The trace: generated into the output directory for synth: paths. */
  if (ex->trace_is_synth) {
    rc = fp8_experiment_check_ranks(ex, 0, ex->trace_path, err, errlen); /* one rank */
    if (rc) goto done;
    /* generated next to its final place and swapped in, so that a re-run with --force never
     * mixes snapshots of two generations */
    char tmp_dir[4096 + 32];
    snprintf(trace_dir, sizeof trace_dir, "%s/trace", out);
    snprintf(tmp_dir, sizeof tmp_dir, "%s/.trace.tmp.%ld", out, (long)getpid());
    fp8_rmtree(tmp_dir);
    if (opt->progress && !opt->quiet)
      fprintf(stderr, "generating synthetic trace %s (%lld steps) into %s ...\n", ex->synth_preset,
              (long long)ex->synth_steps, trace_dir);
    rc = fp8_synth_write(ex->synth_preset, tmp_dir, ex->synth_steps, ex->synth_seed, err, errlen);
    if (rc) {
      char tmp[FP8_ERRLEN];
      snprintf(tmp, sizeof tmp, "%s", err);
      fp8_rmtree(tmp_dir);
      rc = fp8_errorf(rc, err, errlen, "%s: [trace] path = synth:%s: %s", ex->file, ex->synth_preset, tmp);
      goto done;
    }
    fp8_rmtree(trace_dir);
    if (rename(tmp_dir, trace_dir) != 0) {
      rc = fp8_errorf(FP8_EIO, err, errlen, "%s: cannot rename %s into place: %s", trace_dir, tmp_dir,
                strerror(errno));
      fp8_rmtree(tmp_dir);
      goto done;
    }
  } else {
    snprintf(trace_dir, sizeof trace_dir, "%s", ex->trace_path);
  }
  rc = fp8_trace_open(trace_dir, &tr, err, errlen);
  if (rc) goto done;
  trace_open = 1;
  rc = fp8_experiment_check_ranks(ex, tr.nranks, trace_dir, err, errlen);
  if (rc) goto done;
  r.multirank = tr.nranks > 0;
  nparts = tr.nranks ? tr.nranks : 1;
  rank_order = malloc(nparts * sizeof *rank_order);
  if (!rank_order) {
    rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
    goto done;
  }
  for (size_t k = 0; k < nparts; k++) rank_order[k] = k;
  qsort(rank_order, nparts, sizeof *rank_order, cmp_rank_prefix);

  rc = collect_names(ex, &tr, &names, &nnames, err, errlen);
  if (rc) goto done;
  if (nnames == 0) {
    rc = fp8_errorf(FP8_EINVAL, err, errlen, "%s: no tensor of the trace %s is selected by [trace] tensors",
              ex->file, trace_dir);
    goto done;
  }
  rc = tensors_init(&r, names, nnames, err, errlen);
  if (rc) goto done;
  if (tr.nranks && ex->reduce_amax) {
    rc = reduction_init(&r, fp8_experiment_reduce_group(ex, tr.nranks), err, errlen);
    if (rc) goto done;
  }
  if (union_steps(ex, &tr, &steps, &nsteps) != FP8_OK) {
    rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
    goto done;
  }
  amax_map = malloc((tr.namax_names + 1) * sizeof *amax_map);
  r.work = malloc(r.ntensors * sizeof *r.work);
  if (!amax_map || !r.work) {
    rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
    goto done;
  }
  for (size_t k = 0; k < tr.namax_names; k++)
    amax_map[k] = tensor_selected(ex, &tr, tr.amax_names[k])
                      ? (int32_t)find_tensor(&r, tr.amax_names[k]) : -1;
  (void)fp8_decode_table(FP8_E4M3); /* build the tables before threads share them */

  FILE *fp = steps_out.fp, *hp = hist_out.fp;
  fputs(STEPS_HEADER, fp);
  fputs("tensor,step,log2_bin,count\n", hp);
  size_t snap = 0, arow = 0;
  double last_draw = 0;
  int draw = opt->progress && !opt->quiet;
  for (size_t si = 0; si < nsteps; si++) {
    int64_t step = steps[si];
    for (size_t i = 0; i < r.ntensors; i++) {
      r.t[i].view = NULL;
      r.t[i].amax = 0.0f;
      r.t[i].csv_has = 0;
    }
    /* amax.csv rows of this step (sorted by step) */
    while (arow < tr.namax && tr.amax[arow].step < step) arow++;
    for (; arow < tr.namax && tr.amax[arow].step == step; arow++) {
      int32_t idx = amax_map[tr.amax[arow].tensor];
      if (idx < 0) continue;
      r.t[idx].amax = tr.amax[arow].amax;
      r.t[idx].csv_has = 1;
      r.t[idx].csv_amax = tr.amax[arow].amax;
    }
    /* the snapshot of this step, if any: one rank's part at a time (a single-rank trace is
     * one part) */
    while (snap < tr.nsteps && tr.steps[snap] < step) snap++;
    fp8_step s;
    int have_snap = snap < tr.nsteps && tr.steps[snap] == step;
    for (size_t part = 0; have_snap && part < nparts; part++) {
      rc = fp8_trace_load_step_rank(&tr, snap, rank_order[part], &s, err, errlen);
      if (rc) goto done;
      r.nwork = 0;
      for (size_t k = 0; k < s.ntensors; k++) {
        ssize_t idx = find_tensor(&r, s.tensors[k].name);
        if (idx < 0) continue; /* not selected */
        r.t[idx].view = &s.tensors[k];
        r.work[r.nwork++] = (size_t)idx;
      }
      if (opt->engine) {
        float *ebuf = NULL;
        size_t ecap = 0;
        for (size_t w = 0; w < r.nwork && rc == FP8_OK; w++)
          rc = eval_tensor_engine(&r, opt->engine, &r.t[r.work[w]], &ebuf, &ecap, err, errlen);
        free(ebuf);
        if (rc) {
          fp8_step_free(&s);
          goto done;
        }
      } else {
        run_workers(&r, threads);
      }
      /* rows, in tensor order (work[] is ascending because both lists are sorted) */
      for (size_t w = 0; w < r.nwork; w++) {
        tensor_t *t = &r.t[r.work[w]];
        if (t->csv_has && t->csv_amax != t->amax) mismatches++;
        for (int b = 0; b < HIST_BINS; b++)
          if (t->hist[b])
            fprintf(hp, "%s,%lld,%d,%lld\n", t->name, (long long)step, b + HIST_MIN, (long long)t->hist[b]);
        if (t->oom) {
          fp8_step_free(&s);
          rc = fp8_errorf(FP8_ENOMEM, err, errlen, "tensor %s: out of memory", t->name);
          goto done;
        }
        for (size_t c = 0; c < ex->nconfigs; c++) {
          const fp8_stats *st = &t->st[c];
          int blk = fp8_recipe_kind_is_block(ex->configs[c].kind);
          fprintf(fp, "%s,%s,%lld,", t->name, fp8_role_name(t->role), (long long)step);
          put_config_cols(fp, &ex->configs[c], t->fmt[c]);
          fp8_csv_put_num(fp, t->amax);
          fputc(',', fp);
          if (!blk) fp8_csv_put_num(fp, t->scale[c]);
          fprintf(fp, ",%lld,%lld,%lld,%lld,%lld,%lld,", (long long)st->n, (long long)st->nonfinite,
                  (long long)st->zeros, (long long)st->overflow, (long long)st->underflow,
                  (long long)st->subnormal);
          double snr = fp8_stats_snr_db(st);
          fp8_csv_put_num(fp, fp8_stats_mse(st));
          fputc(',', fp);
          fp8_csv_put_num(fp, snr);
          if (blk) {
            const fp8_block_stats *b = &t->bst[c];
            fprintf(fp, ",%lld,%lld,", (long long)b->nblocks, (long long)b->blocks_with_overflow);
            fp8_csv_put_num(fp, b->log2_scale_min);
            fputc(',', fp);
            fp8_csv_put_num(fp, b->log2_scale_max);
            fputc(',', fp);
            fp8_csv_put_num(fp, b->log2_scale_std);
            fputc('\n', fp);
          } else {
            fputs(",,,,,\n", fp);
          }
          acc_t *a = &t->acc[c];
          a->steps++;
          a->steps_with_overflow += st->overflow > 0;
          fp8_stats_merge(&a->st, st);
          if (snr < a->snr_min) a->snr_min = snr;
          if (t->amax > a->amax_max) a->amax_max = t->amax;
          sum->rows++;
        }
      }
      if (ex->gemm) {
        rc = gemm_step(&r, &s, step, gemm_out.fp, &gemm_rows, err, errlen);
        if (rc) {
          fp8_step_free(&s);
          goto done;
        }
      }
      for (size_t w = 0; w < r.nwork; w++) r.t[r.work[w]].view = NULL; /* unmapped with s */
      fp8_step_free(&s);
    }
    /* every rank's amax of this step is known now: the delayed-scaling update (zero: the
     * module did not run; reduce_amax: the group's max) */
    delayed_update_all(&r);
    if (ferror(fp) || ferror(hp)) {
      rc = fp8_errorf(FP8_EIO, err, errlen, "%s/steps.csv: write failed: %s", out, strerror(errno));
      goto done;
    }
    if (draw) progress(si + 1, nsteps, t0, &last_draw, si + 1 == nsteps);
  }

  sum->steps = (long long)nsteps;
  sum->tensors = (long long)r.ntensors;
  sum->configs = (long long)ex->nconfigs;
  sum->gemm_rows = gemm_rows;

  /* summary.csv and run.json, then the renames: steps.csv last, so a complete steps.csv always
   * comes with its summary */
  {
    fp8_outfile so;
    rc = fp8_outfile_open(&so, out, "summary.csv", err, errlen);
    if (rc) goto done;
    write_summary(so.fp, &r);
    rc = fp8_outfile_commit(&so, err, errlen);
    if (rc) goto done;
  }
  rc = fp8_outfile_commit(&hist_out, err, errlen);
  if (rc) goto done;
  if (gemm_rows > 0) {
    rc = fp8_outfile_commit(&gemm_out, err, errlen);
    if (rc) goto done;
  } else {
    fp8_outfile_abort(&gemm_out); /* no layer triplet: no gemm.csv */
    char stale[4200];
    snprintf(stale, sizeof stale, "%s/gemm.csv", out);
    unlink(stale); /* a gemm.csv of an earlier run (--force) would describe another run */
  }
  rc = fp8_outfile_commit(&steps_out, err, errlen);
  if (rc) goto done;
  sum->wall_s = now_s() - t0;
  rc = write_run_json(out, ex, &tr, trace_dir, sum, mismatches, started, threads,
                      opt->engine ? opt->engine->name : "cpu", err, errlen);
  if (rc) goto done;
  if (mismatches)
    fprintf(stderr, "warning: %lld snapshot amaxes differ from amax.csv (the snapshot data was used)\n",
            mismatches);

done:
  fp8_outfile_abort(&steps_out);
  fp8_outfile_abort(&hist_out);
  fp8_outfile_abort(&gemm_out);
  if (names) {
    for (size_t k = 0; k < nnames; k++) free(names[k]);
    free(names);
  }
  tensors_free(&r);
  free(r.red);
  free(r.work);
  free(rank_order);
  free(steps);
  free(amax_map);
  if (trace_open) fp8_trace_close(&tr);
  pthread_mutex_destroy(&r.lock);
  return rc;
}
