/* synth_moe.c: the "moe" synthetic trace (fp8lab synth moe, issue 40): a small Mixture-of-Experts
 * stack with top-k routing, written in the layout of a capture (step_<N>.safetensors snapshots,
 * amax.csv, tokens.csv), so that the demo and the tests can show what experts do to FP8 scaling
 * without a download. synth.c checks the folder and calls fp8_synth_moe_write.
 *
 * Model. 4 layers (`model.layers.<l>.`), 128 tokens a step, hidden size 128. Each layer has the
 * dense attention projections `self_attn.qkv_proj` (128->384) and `self_attn.o_proj`
 * (128->128), the router `mlp.gate` (128->8) and 8 experts, each with the fused GEMMs of
 * transformers 5 `mlp.experts.<e>.gate_up_proj` (128->256) and `mlp.experts.<e>.down_proj`
 * (128->128). Roles input, weight and grad_output: 4 x (2 + 1 + 16) x 3 = 228 tensors.
 * Activations and gradients BF16, weights F32; amaxes taken on the values as stored.
 *
 * Routing: each token picks its top 2 experts of logits b_e + Gumbel noise (sampling 2 experts
 * without replacement with probabilities proportional to exp(b_e)). The popularities b_e
 * (fixed per layer, with a slow random walk of 0.02 a step) make the load imbalanced (about
 * 4x between the most and least popular of the ordinary experts) and one expert per layer
 * cold (b = -3.5: about one token a step, none at about a third of the steps). An expert's input
 * rows are its tokens' rows in token order; tokens.csv holds their number per step and expert
 * GEMM. An expert with no token at a step did not run there: its input and grad_output amax 0
 * and absent from the snapshot, while its weight is recorded every step (TE quantizes every
 * expert's weight every step).
 *
 * Values. The hidden state (qkv_proj, gate and gate_up_proj inputs): N(0, 1) times a per-token
 * scale (log-normal, sigma 0.5: heavy enough that the max over a few tokens varies much more
 * than over many) plus 3 fixed outlier channels (10-40x). o_proj.input: N(0, 0.5^2) times the
 * token scale. down_proj.input: N(0, 1) times the token scale times the expert's scale (0.5-2,
 * log-uniform); in two outlier experts (layer 1 expert 5, layer 3 expert 2) one of its tokens
 * gets a channel of 30-60x at about 5% of the steps it runs. grad_output: Student-t(4) times a
 * per-token scale (sigma 0.4) times 1e-5 (the router's 1e-3). Weights: N(0, 0.02^2) plus the
 * rank-1 random walk of the "llm" preset (synth_model.c).
 *
 * Randomness: MT19937 seeded as the other presets (GSL); deterministic for a seed. About 5 ms a
 * step.
 */
#include "synth_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gsl/gsl_randist.h>

#include "outfile.h" /* fp8_write_errno_status */
#include "synth.h"
#include "trace.h"
#include "util.h"

#define MOE_LAYERS 4
#define MOE_EXPERTS 8
#define MOE_TOPK 2
#define MOE_TOKENS 128
#define MOE_HIDDEN 128
#define MOE_FFN2 256 /* gate_up_proj's output: 2 x the expert's FFN size */
#define MOE_HID_OUTLIERS 3
#define MOE_COLD_LOGIT (-3.5)

/* GEMMs of one layer: qkv, o, gate, then (gate_up, down) per expert */
#define MOE_GEMMS_PER_LAYER (3 + 2 * MOE_EXPERTS)
#define MOE_GEMMS (MOE_LAYERS * MOE_GEMMS_PER_LAYER)
#define MOE_ROLES 3
#define MOE_NTENSORS (MOE_GEMMS * MOE_ROLES)

enum { G_QKV, G_O, G_GATE, G_EXPERT0 };
enum { R_INPUT, R_WEIGHT, R_GRAD };
static const char *const k_roles[MOE_ROLES] = {"input", "weight", "grad_output"};

typedef struct {
  char name[80];
  int64_t rows, cols, cap_rows; /* this step's rows; cap_rows: the buffer's */
  fp8_dtype dtype;
  float *val;
  uint16_t *packed;
  float amax;
  int present;
  int gemm; /* its GEMM's index */
} moe_tensor;

typedef struct {
  char name[72];
  int layer, kind, expert; /* kind: G_QKV, G_O, G_GATE, or G_EXPERT0 + 0 (gate_up) / 1 (down) */
  int in, out;
  float w_std;
  moe_tensor t[MOE_ROLES];
  int64_t tokens; /* this step's rows */
} moe_gemm;

typedef struct {
  gsl_rng *rng;
  moe_gemm g[MOE_GEMMS];
  moe_tensor *order[MOE_NTENSORS]; /* by name */
  int hid_col[MOE_HID_OUTLIERS];
  float hid_mag[MOE_HID_OUTLIERS];
  fp8_tensor_out out[MOE_NTENSORS]; /* a snapshot's tensors */
  double logit[MOE_LAYERS][MOE_EXPERTS];
  int cold[MOE_LAYERS];
  float escale[MOE_LAYERS][MOE_EXPERTS];
  float tok[MOE_TOKENS], tokg[MOE_TOKENS];
  float hidden[MOE_TOKENS * MOE_HIDDEN];
  int route[MOE_TOKENS][MOE_TOPK];
  float u[MOE_FFN2 + MOE_HIDDEN * 3], v[MOE_FFN2 + MOE_HIDDEN * 3];
} moe_state;

static int gidx(int layer, int kind) { return layer * MOE_GEMMS_PER_LAYER + kind; }

static double normal(gsl_rng *r) { return gsl_ran_gaussian_ziggurat(r, 1.0); }

static int cmp_tensor(const void *a, const void *b) {
  return strcmp((*(const moe_tensor *const *)a)->name, (*(const moe_tensor *const *)b)->name);
}

static int tensor_init(moe_tensor *t, const char *gemm, int role, int64_t rows, int64_t cols) {
  snprintf(t->name, sizeof t->name, "%s.%s", gemm, k_roles[role]);
  t->cap_rows = t->rows = rows;
  t->cols = cols;
  t->dtype = role == R_WEIGHT ? FP8_DTYPE_F32 : FP8_DTYPE_BF16;
  size_t n = (size_t)(rows * cols);
  t->val = malloc(n * sizeof *t->val);
  if (!t->val) return FP8_ENOMEM;
  if (t->dtype == FP8_DTYPE_BF16 && !(t->packed = malloc(n * sizeof *t->packed))) return FP8_ENOMEM;
  return FP8_OK;
}

static void moe_free(moe_state *st) {
  for (int i = 0; i < MOE_GEMMS; i++)
    for (int r = 0; r < MOE_ROLES; r++) {
      free(st->g[i].t[r].val);
      free(st->g[i].t[r].packed);
    }
  if (st->rng) gsl_rng_free(st->rng);
}

static int moe_init(moe_state *st, uint64_t seed) {
  memset(st, 0, sizeof *st);
  if (!(st->rng = gsl_rng_alloc(gsl_rng_mt19937))) return FP8_ENOMEM;
  gsl_rng_set(st->rng, (unsigned long)((seed ^ (seed >> 32)) & 0xFFFFFFFFu));
  for (int l = 0; l < MOE_LAYERS; l++)
    for (int k = 0; k < MOE_GEMMS_PER_LAYER; k++) {
      moe_gemm *g = &st->g[gidx(l, k)];
      g->layer = l;
      g->expert = k >= G_EXPERT0 ? (k - G_EXPERT0) / 2 : -1;
      g->kind = k >= G_EXPERT0 ? G_EXPERT0 + (k - G_EXPERT0) % 2 : k;
      g->in = MOE_HIDDEN;
      g->out = g->kind == G_QKV ? 3 * MOE_HIDDEN : g->kind == G_GATE ? MOE_EXPERTS
               : g->kind == G_EXPERT0 ? MOE_FFN2 : MOE_HIDDEN;
      g->w_std = g->kind == G_O || g->kind == G_EXPERT0 + 1 ? 0.02f / sqrtf(2.0f * MOE_LAYERS) : 0.02f;
      if (g->kind == G_QKV) snprintf(g->name, sizeof g->name, "model.layers.%d.self_attn.qkv_proj", l);
      else if (g->kind == G_O) snprintf(g->name, sizeof g->name, "model.layers.%d.self_attn.o_proj", l);
      else if (g->kind == G_GATE) snprintf(g->name, sizeof g->name, "model.layers.%d.mlp.gate", l);
      else
        snprintf(g->name, sizeof g->name, "model.layers.%d.mlp.experts.%d.%s", l, g->expert,
                 g->kind == G_EXPERT0 ? "gate_up_proj" : "down_proj");
      if (tensor_init(&g->t[R_INPUT], g->name, R_INPUT, MOE_TOKENS, g->in) ||
          tensor_init(&g->t[R_WEIGHT], g->name, R_WEIGHT, g->out, g->in) ||
          tensor_init(&g->t[R_GRAD], g->name, R_GRAD, MOE_TOKENS, g->out))
        return FP8_ENOMEM;
      moe_tensor *w = &g->t[R_WEIGHT];
      for (int64_t i = 0; i < w->rows * w->cols; i++) w->val[i] = (float)(g->w_std * normal(st->rng));
    }
  size_t n = 0;
  for (int i = 0; i < MOE_GEMMS; i++)
    for (int r = 0; r < MOE_ROLES; r++) {
      st->g[i].t[r].gemm = i;
      st->order[n++] = &st->g[i].t[r];
    }
  qsort(st->order, n, sizeof st->order[0], cmp_tensor);
  for (int k = 0; k < MOE_HID_OUTLIERS; k++) {
    st->hid_col[k] = (int)(k * 41 + gsl_rng_uniform_int(st->rng, 40)); /* distinct: 0-39, 41-80, 82-121 */
    st->hid_mag[k] = (float)((gsl_rng_uniform(st->rng) < 0.5 ? -1 : 1) *
                             10.0 * pow(4.0, gsl_rng_uniform(st->rng)));
  }
  for (int l = 0; l < MOE_LAYERS; l++) {
    int cold = st->cold[l] = (int)gsl_rng_uniform_int(st->rng, MOE_EXPERTS);
    for (int e = 0; e < MOE_EXPERTS; e++) {
      st->logit[l][e] = e == cold ? MOE_COLD_LOGIT : 1.4 * gsl_rng_uniform(st->rng) - 0.7;
      st->escale[l][e] = (float)pow(4.0, gsl_rng_uniform(st->rng) - 0.5);
    }
  }
  return FP8_OK;
}

/* Rank-1 random walk of a weight (as synth_model.c's walk_weight). */
static void walk(moe_state *st, moe_gemm *g) {
  moe_tensor *w = &g->t[R_WEIGHT];
  double eta = 0.01 * g->w_std;
  for (int64_t r = 0; r < w->rows; r++) st->u[r] = (float)(eta * normal(st->rng));
  for (int64_t c = 0; c < w->cols; c++) st->v[c] = (float)normal(st->rng);
  for (int64_t r = 0; r < w->rows; r++)
    for (int64_t c = 0; c < w->cols; c++) w->val[r * w->cols + c] += st->u[r] * st->v[c];
}

static void finish(moe_tensor *t, int64_t rows) {
  t->rows = rows;
  size_t n = (size_t)(rows * t->cols);
  if (t->dtype == FP8_DTYPE_BF16) fp8_synth_round_bf16(t->val, n);
  t->amax = n ? fp8_amax_f32(t->val, n) : 0.0f;
  t->present = rows > 0;
}

static void grad(moe_state *st, moe_tensor *t, const int *tokens, int64_t rows, double base) {
  for (int64_t i = 0; i < rows; i++) {
    float s = (float)(base * st->tokg[tokens[i]]);
    for (int64_t c = 0; c < t->cols; c++) t->val[i * t->cols + c] = s * fp8_synth_student_t4(st->rng);
  }
  finish(t, rows);
}

static void gen_step(moe_state *st) {
  for (int k = 0; k < MOE_TOKENS; k++) {
    st->tok[k] = (float)exp(0.5 * normal(st->rng));
    st->tokg[k] = (float)exp(0.4 * normal(st->rng));
  }
  int all[MOE_TOKENS], ids[MOE_TOKENS];
  for (int k = 0; k < MOE_TOKENS; k++) all[k] = k;
  for (int l = 0; l < MOE_LAYERS; l++) {
    for (int t = 0; t < MOE_TOKENS; t++) {
      float *row = st->hidden + t * MOE_HIDDEN;
      for (int c = 0; c < MOE_HIDDEN; c++) row[c] = (float)(st->tok[t] * normal(st->rng));
      for (int k = 0; k < MOE_HID_OUTLIERS; k++)
        row[st->hid_col[k]] = (float)(st->hid_mag[k] * (1.0 + 0.1 * l) * st->tok[t] *
                                      (1.0 + 0.2 * normal(st->rng)));
    }
    /* routing: top-2 of logit + Gumbel noise; the popularities walk slowly (not the cold one) */
    for (int e = 0; e < MOE_EXPERTS; e++)
      if (e != st->cold[l]) st->logit[l][e] += 0.02 * normal(st->rng);
    for (int t = 0; t < MOE_TOKENS; t++) {
      double best[MOE_TOPK];
      for (int k = 0; k < MOE_TOPK; k++) {
        best[k] = -INFINITY;
        st->route[t][k] = -1;
      }
      for (int e = 0; e < MOE_EXPERTS; e++) {
        double v = st->logit[l][e] - log(-log(gsl_rng_uniform_pos(st->rng)));
        for (int k = 0; k < MOE_TOPK; k++)
          if (v > best[k]) {
            for (int j = MOE_TOPK - 1; j > k; j--) {
              best[j] = best[j - 1];
              st->route[t][j] = st->route[t][j - 1];
            }
            best[k] = v;
            st->route[t][k] = e;
            break;
          }
      }
    }
    /* attention and router: every token */
    for (int k = G_QKV; k <= G_GATE; k++) {
      moe_gemm *g = &st->g[gidx(l, k)];
      walk(st, g);
      moe_tensor *x = &g->t[R_INPUT];
      for (int t = 0; t < MOE_TOKENS; t++)
        for (int c = 0; c < MOE_HIDDEN; c++)
          x->val[t * MOE_HIDDEN + c] = k == G_O ? (float)(0.5 * st->tok[t] * normal(st->rng))
                                                : st->hidden[t * MOE_HIDDEN + c];
      finish(x, MOE_TOKENS);
      finish(&g->t[R_WEIGHT], g->t[R_WEIGHT].rows);
      grad(st, &g->t[R_GRAD], all, MOE_TOKENS, k == G_GATE ? 1e-3 : 1e-5);
      g->tokens = MOE_TOKENS;
    }
    /* experts: their tokens' rows, in token order */
    for (int e = 0; e < MOE_EXPERTS; e++) {
      int64_t n = 0;
      for (int t = 0; t < MOE_TOKENS; t++)
        for (int k = 0; k < MOE_TOPK; k++)
          if (st->route[t][k] == e) ids[n++] = t;
      moe_gemm *gu = &st->g[gidx(l, G_EXPERT0 + 2 * e)], *dn = &st->g[gidx(l, G_EXPERT0 + 2 * e + 1)];
      walk(st, gu);
      walk(st, dn);
      for (int64_t i = 0; i < n; i++)
        memcpy(gu->t[R_INPUT].val + i * MOE_HIDDEN, st->hidden + ids[i] * MOE_HIDDEN,
               MOE_HIDDEN * sizeof(float));
      finish(&gu->t[R_INPUT], n);
      float es = st->escale[l][e];
      for (int64_t i = 0; i < n; i++)
        for (int c = 0; c < MOE_HIDDEN; c++)
          dn->t[R_INPUT].val[i * MOE_HIDDEN + c] =
              (float)(es * st->tok[ids[i]] * normal(st->rng));
      int outlier_expert = (l == 1 && e == 5) || (l == 3 && e == 2);
      if (outlier_expert && n > 0 && gsl_rng_uniform(st->rng) < 0.05) {
        int64_t i = (int64_t)gsl_rng_uniform_int(st->rng, (unsigned long)n);
        int c = (int)gsl_rng_uniform_int(st->rng, MOE_HIDDEN);
        dn->t[R_INPUT].val[i * MOE_HIDDEN + c] *= (float)(30.0 + 30.0 * gsl_rng_uniform(st->rng));
      }
      finish(&dn->t[R_INPUT], n);
      finish(&gu->t[R_WEIGHT], gu->t[R_WEIGHT].rows);
      finish(&dn->t[R_WEIGHT], dn->t[R_WEIGHT].rows);
      grad(st, &gu->t[R_GRAD], ids, n, 1e-5);
      grad(st, &dn->t[R_GRAD], ids, n, 1e-5);
      gu->tokens = dn->tokens = n;
    }
  }
}

static int write_snapshot(moe_state *st, const char *dir, int64_t step, int64_t steps,
                          uint64_t seed, char *err, size_t errlen) {
  size_t n = 0;
  for (int k = 0; k < MOE_NTENSORS; k++) {
    moe_tensor *t = st->order[k];
    if (t->present)
      fp8_synth_tensor_out(&st->out[n++], t->name, t->dtype, t->rows, t->cols, t->val, t->packed);
  }
  return fp8_synth_snapshot_write(dir, step, steps, "moe", seed, st->out, n, err, errlen);
}

/* Opens dir/<name>.tmp.<pid> for writing into *f and the two paths. */
static int open_tmp(const char *dir, const char *name, FILE **f, char *path, char *tmp,
                    size_t cap, char *err, size_t errlen) {
  if (snprintf(path, cap, "%s/%s", dir, name) >= (int)cap ||
      snprintf(tmp, cap, "%s/%s.tmp.%ld", dir, name, (long)getpid()) >= (int)cap)
    return fp8_errorf(FP8_EINVAL, err, errlen, "%s: directory path too long", dir);
  if (!(*f = fopen(tmp, "w")))
    return fp8_errorf(fp8_write_errno_status(errno), err, errlen, "%s: cannot create: %s", tmp,
                      strerror(errno));
  return FP8_OK;
}

int fp8_synth_moe_write(const char *dir, int64_t steps, uint64_t seed, char *err, size_t errlen) {
  moe_state *st = malloc(sizeof *st);
  FILE *amax = NULL, *tok = NULL;
  char apath[4200], atmp[4200], tpath[4200], ttmp[4200];
  atmp[0] = ttmp[0] = '\0';
  int rc = st ? moe_init(st, seed) : FP8_ENOMEM;
  if (rc != FP8_OK) {
    fp8_errorf(rc, err, errlen, "synth: out of memory");
    goto done;
  }
  if ((rc = open_tmp(dir, "amax.csv", &amax, apath, atmp, sizeof apath, err, errlen)) != FP8_OK ||
      (rc = open_tmp(dir, "tokens.csv", &tok, tpath, ttmp, sizeof tpath, err, errlen)) != FP8_OK)
    goto done;
  if (fputs("step,tensor,amax\n", amax) == EOF || fputs("step,gemm,tokens\n", tok) == EOF)
    goto write_error;
  int64_t every = fp8_synth_snapshot_interval(steps);
  for (int64_t s = 0; s < steps; s++) {
    gen_step(st);
    for (int k = 0; k < MOE_NTENSORS; k++)
      if (fprintf(amax, "%lld,%s,%.9g\n", (long long)s, st->order[k]->name,
                  (double)st->order[k]->amax) < 0)
        goto write_error;
    /* tokens.csv: the expert GEMMs in name order (the tensors' order, one role) */
    for (int k = 0; k < MOE_NTENSORS; k++) {
      const moe_tensor *t = st->order[k];
      size_t nl = strlen(t->name);
      if (nl < 7 || strcmp(t->name + nl - 7, ".weight") != 0 || !fp8_expert_of(t->name, NULL, NULL, 0))
        continue;
      const moe_gemm *g = &st->g[t->gemm];
      if (fprintf(tok, "%lld,%s,%lld\n", (long long)s, g->name, (long long)g->tokens) < 0)
        goto write_error;
    }
    if (s % every == 0 && (rc = write_snapshot(st, dir, s, steps, seed, err, errlen)) != FP8_OK)
      goto done;
  }
  int c1 = fclose(amax), c2 = fclose(tok);
  amax = tok = NULL;
  if (c1 != 0 || c2 != 0) goto write_error;
  if (rename(ttmp, tpath) != 0 || rename(atmp, apath) != 0) {
    rc = fp8_errorf(fp8_write_errno_status(errno), err, errlen, "%s: cannot rename: %s", dir,
                    strerror(errno));
    goto done;
  }
  ttmp[0] = atmp[0] = '\0';
  goto done;
write_error:
  rc = fp8_errorf(FP8_EWRITE, err, errlen, "%s: write failed: %s", dir, strerror(errno));
done:
  if (amax) fclose(amax);
  if (tok) fclose(tok);
  if (rc != FP8_OK) {
    if (atmp[0]) unlink(atmp);
    if (ttmp[0]) unlink(ttmp);
  }
  if (st) {
    moe_free(st);
    free(st);
  }
  return rc;
}
