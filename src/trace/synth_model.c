/* synth_model.c: the data model and the presets of the synthetic traces (synth.h): the state
 * of a small transformer-like stack and its generation one step at a time, with the behaviours
 * that make FP8 scaling recipes differ. synth.c writes what this file generates
 * (synth_internal.h); this file writes no files.
 *
 * Model. 4 layers, each with the modules qkv (128->384), proj (128->128), fc1 (128->512) and
 * fc2 (512->128), 64 tokens per step. Every module has four tensors, named
 * `layers.<i>.<module>.<role>`: input [64, in], weight [out, in], output [64, out] and
 * grad_output [64, out]: 64 tensors, about 1.6M elements per step (0.79M of them weights).
 * Activations and gradients are stored as BF16 (round to nearest even), weights as F32.
 * Every step is generated in full; each tensor's amax is taken on the values exactly as they
 * are stored (after BF16 rounding), so amax.csv agrees bit for bit with the snapshots.
 *
 * Layout: see synth.c.
 *
 * Data model shared by all presets (p = step / (steps - 1), the training progress in [0, 1]):
 * - qkv.input and fc1.input (the normalised residual stream): N(0, 1) times a per-token scale
 *   (log-normal, sigma 0.2), plus 4 fixed outlier channels (the same columns in every layer
 *   and step, as in real LLMs) of magnitude 10-100x (log-uniform per channel, fixed sign),
 *   growing by 50% over the run and by 15% per layer of depth.
 * - proj.input (attention context): N(0, 0.5^2) times the per-token scale.
 * - outputs: input x weight^T modelled statistically: row t is N(0, (||input_t|| rms(W))^2),
 *   the distribution of a dot product with a random weight row, so outliers and spikes in an
 *   input carry over to the output. fc1.output has 3 fixed "massive activation" channels with a
 *   positive mean of 6-15 row sigmas.
 * - fc2.input = GELU(fc1.output) (exact erf GELU on the stored BF16 values): fc1.output's
 *   outliers and spikes reach fc2.input and fc2.output.
 * - weights: GPT-2 style init N(0, 0.02^2) (proj and fc2: 0.02 / sqrt(2 * layers)), then a slow
 *   random walk: a rank-1 update eta * u v^T per step (u, v standard normal, eta = 1% of the
 *   init std), about 14% of the init std after 200 steps. Low rank because real updates are
 *   sums of a few outer products; it also costs no random draw per element.
 * - grad_output: Student-t with 4 degrees of freedom (heavy tails: amax about 20x the rms)
 *   times a per-token scale (log-normal, sigma 0.4) times 1e-5 * module factor (0.5-1),
 *   shrinking 10x over the run: amax 1e-4..1e-3 at the start and 10x less at the end, bulk
 *   values 1e-5..1e-7 and below, so E5M2 underflow appears (at scale 1, the scale delayed
 *   scaling starts with, E5M2 flushes everything below 2^-17 = 7.6e-6). 4 rather than 2-3
 *   degrees of freedom: with fatter tails the gradient amax alone jumps 10x from one step
 *   to the next now and then, which would blur the spike events the presets place.
 * - a module that does not run: layers.3.proj is skipped at every 7th step (steps 6, 13, 20,
 *   ...): amax 0 in amax.csv, absent from the snapshot (TE keeps such a module's scale).
 *
 * Presets:
 * - "llm": the shared model plus one activation spike: at the snapshot step nearest to
 *   0.6 * (steps - 1) (step 120 of 200) one
 *   layer's fc1.output (and through GELU its fc2.input and fc2.output) jumps 20-50x on 1-4
 *   tokens, for 1-3 consecutive steps. Delayed scaling uses a scale from before the spike and
 *   overflows there; current scaling does not.
 * - "spiky": "llm" plus frequent spikes: every 10-20 steps (about 15) one random activation
 *   or gradient tensor (input, output or grad_output of a module that ran) is multiplied by a
 *   log-uniform 10-1000x on 1-4 tokens for one step.
 * - "underflow": the shared model (no spike) but grad_output values are sign * log-normal
 *   with median 3e-7 (shrinking 10x over the run) and sigma 3.5, truncated at +-3.5 sigma:
 *   10.6 decades, amax about 0.05 at the start; proj.input / fc2.input are sign * log-normal
 *   with medians 1e-4 / 1e-3 and sigma 2.5 (7.6 decades). The truncation keeps the amax
 *   steady (an untruncated log-normal's amax jumps 5-40x between steps). Wider than any FP8
 *   format: even under current scaling about 40% of the gradients flush to zero in E4M3 and
 *   about 0.1% in E5M2.
 *
 * Randomness: GSL's MT19937 seeded with `seed` (bits above 32 folded in: MT19937 takes 32-bit
 * seeds; as in GSL, 0 means 4357) drives the data; a second MT19937 seeded from it drives the
 * events (spikes), so the event schedule does not reshuffle the data. Speed matters (about
 * 700k draws a step): normal draws use GSL's ziggurat (3x faster than gsl_ran_gaussian, same
 * distribution); Student-t uses Bailey's polar method on gsl_rng_uniform (exact; 3-4x faster
 * than gsl_ran_tdist's rejection loop); log-normal is exp(mu + sigma Z), what
 * gsl_ran_lognormal computes, with the faster normal draw. About 25 ms a step, single
 * threaded: steps = 200 take 4-6 s (random draws are about half of it, erff a tenth).
 */
#include "synth_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>

/* ------------------------------------------------------------------ model dimensions */

#define SYN_SKIP_PERIOD 7   /* layers.3.proj does not run at steps with (step+1) % 7 == 0 */
#define SYN_LOG_TRUNC 3.5   /* log-normal draws are truncated at +-3.5 sigma */

enum { MOD_QKV, MOD_PROJ, MOD_FC1, MOD_FC2 };
enum { ROLE_INPUT, ROLE_WEIGHT, ROLE_OUTPUT, ROLE_GRAD };

typedef struct {
  const char *name;
  int in, out;
  float grad_factor; /* relative gradient scale of the module */
} syn_module;

static const syn_module k_modules[SYN_MODULES] = {
    {"qkv", 128, 384, 0.5f},
    {"proj", 128, 128, 1.0f},
    {"fc1", 128, 512, 0.7f},
    {"fc2", 512, 128, 1.0f},
};

static const char *const k_roles[SYN_ROLES] = {"input", "weight", "output", "grad_output"};

static const char *const k_presets[] = {"llm", "spiky", "underflow", "moe", NULL};

const char *const *fp8_synth_presets(void) { return k_presets; }

int64_t fp8_synth_snapshot_interval(int64_t steps) {
  int64_t k = (steps + 10) / 20; /* round(steps / 20), halves up */
  return k < 1 ? 1 : k;
}

static int tidx(int layer, int module, int role) {
  return (layer * SYN_MODULES + module) * SYN_ROLES + role;
}

/* ------------------------------------------------------------------ numerics */

/* Rounds n floats in place to the values their BF16 encoding decodes to (the exact widening
 * fp8_bf16_to_f32 does, inlined: this runs over every element of every step). */
void fp8_synth_round_bf16(float *x, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint32_t b = (uint32_t)fp8_synth_f32_to_bf16(x[i]) << 16;
    memcpy(&x[i], &b, sizeof b);
  }
}

static double normal(gsl_rng *r) { return gsl_ran_gaussian_ziggurat(r, 1.0); }

/* Student-t with 4 degrees of freedom by Bailey's polar method (Math. Comp. 62, 1994):
 * (u, v) uniform in the unit disc, w = u^2 + v^2, T = u sqrt(nu (w^(-2/nu) - 1) / w); for
 * nu = 4 only square roots. Exact, and 3-4x faster than gsl_ran_tdist. */
float fp8_synth_student_t4(gsl_rng *r) {
  double u, v, w;
  do {
    u = 2.0 * gsl_rng_uniform(r) - 1.0;
    v = 2.0 * gsl_rng_uniform(r) - 1.0;
    w = u * u + v * v;
  } while (w >= 1.0 || w == 0.0);
  /* the transform in float: the result is stored as BF16, and float sqrt/div are 2x faster */
  float wf = (float)w, rs = 1.0f / sqrtf(wf);
  return (float)u * sqrtf(4.0f * (rs - 1.0f) * rs * rs);
}

/* Log-normal exp(mu + sigma z) with z truncated to |z| <= SYN_LOG_TRUNC (by redrawing), so
 * that a tensor's amax sits near exp(mu + 3.5 sigma) instead of jumping from step to step
 * with the extreme tail. */
static double lognormal_trunc(gsl_rng *r, double mu, double sigma) {
  double z;
  do z = normal(r);
  while (fabs(z) > SYN_LOG_TRUNC);
  return exp(mu + sigma * z);
}

static double random_sign(gsl_rng *r) { return gsl_rng_uniform(r) < 0.5 ? -1.0 : 1.0; }

/* Uniform integer in [0, n). */
static int uniform_int(gsl_rng *r, int n) { return (int)gsl_rng_uniform_int(r, (unsigned long)n); }

static float gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678f)); }

/* ------------------------------------------------------------------ setup */

static int cmp_tensor_name(const void *a, const void *b) {
  const syn_tensor *x = *(const syn_tensor *const *)a, *y = *(const syn_tensor *const *)b;
  return strcmp(x->name, y->name);
}

int fp8_synth_state_init(syn_state *st, syn_preset preset, int64_t steps, uint64_t seed) {
  memset(st, 0, sizeof *st);
  st->preset = preset;
  st->steps = steps;
  st->rng = gsl_rng_alloc(gsl_rng_mt19937);
  st->ev = gsl_rng_alloc(gsl_rng_mt19937);
  if (!st->rng || !st->ev) return FP8_ENOMEM;
  unsigned long s = (unsigned long)((seed ^ (seed >> 32)) & 0xFFFFFFFFu);
  gsl_rng_set(st->rng, s);
  gsl_rng_set(st->ev, gsl_rng_get(st->rng) ^ 0x5EEDu);

  for (int l = 0; l < SYN_LAYERS; l++)
    for (int m = 0; m < SYN_MODULES; m++)
      for (int r = 0; r < SYN_ROLES; r++) {
        syn_tensor *t = &st->t[tidx(l, m, r)];
        snprintf(t->name, sizeof t->name, "layers.%d.%s.%s", l, k_modules[m].name, k_roles[r]);
        t->layer = l;
        t->module = m;
        t->role = r;
        int in = k_modules[m].in, out = k_modules[m].out;
        t->rows = r == ROLE_WEIGHT ? out : SYN_TOKENS;
        t->cols = r == ROLE_WEIGHT ? in : r == ROLE_INPUT ? in : out;
        t->dtype = r == ROLE_WEIGHT ? FP8_DTYPE_F32 : FP8_DTYPE_BF16;
        size_t n = (size_t)(t->rows * t->cols);
        t->val = malloc(n * sizeof *t->val);
        if (!t->val) return FP8_ENOMEM;
        if (t->dtype == FP8_DTYPE_BF16) {
          t->packed = malloc(n * sizeof *t->packed);
          if (!t->packed) return FP8_ENOMEM;
        }
      }
  for (int i = 0; i < SYN_NTENSORS; i++) st->order[i] = &st->t[i];
  qsort(st->order, SYN_NTENSORS, sizeof st->order[0], cmp_tensor_name);

  /* Fixed outlier channels: distinct columns, log-uniform magnitudes, fixed signs. */
  for (int k = 0; k < SYN_HID_OUTLIERS; k++) {
    int c, dup;
    do {
      c = uniform_int(st->rng, 128);
      dup = 0;
      for (int j = 0; j < k; j++) dup |= st->hid_col[j] == c;
    } while (dup);
    st->hid_col[k] = c;
    st->hid_mag[k] = (float)(random_sign(st->rng) * pow(10.0, 1.0 + gsl_rng_uniform(st->rng)));
  }
  for (int k = 0; k < SYN_FFN_OUTLIERS; k++) {
    int c, dup;
    do {
      c = uniform_int(st->rng, 512);
      dup = 0;
      for (int j = 0; j < k; j++) dup |= st->ffn_col[j] == c;
    } while (dup);
    st->ffn_col[k] = c;
    st->ffn_mean[k] = (float)(6.0 + 9.0 * gsl_rng_uniform(st->rng));
  }

  /* Weights: GPT-2 init, residual projections scaled by 1/sqrt(2 * layers). */
  for (int m = 0; m < SYN_MODULES; m++)
    st->w_std[m] = (m == MOD_PROJ || m == MOD_FC2) ? 0.02f / sqrtf(2.0f * SYN_LAYERS) : 0.02f;
  for (int l = 0; l < SYN_LAYERS; l++)
    for (int m = 0; m < SYN_MODULES; m++) {
      syn_tensor *w = &st->t[tidx(l, m, ROLE_WEIGHT)];
      size_t n = (size_t)(w->rows * w->cols);
      for (size_t i = 0; i < n; i++) w->val[i] = (float)(st->w_std[m] * normal(st->rng));
    }

  /* Events. */
  st->spike_step = -1;
  if (preset == PRESET_LLM || preset == PRESET_SPIKY) {
    /* at 60% of the run, moved to the nearest snapshot step so that the snapshot shows what
     * a stale delayed scale does to the spike (amax.csv alone only feeds the history) */
    int64_t every = fp8_synth_snapshot_interval(steps);
    st->spike_step = every * (int64_t)llround(0.6 * (double)(steps - 1) / (double)every);
    st->spike_len = 1 + uniform_int(st->ev, 3);
    st->spike_layer = uniform_int(st->ev, SYN_LAYERS);
  }
  st->next_spike = preset == PRESET_SPIKY ? 5 + uniform_int(st->ev, 11) : -1;
  return FP8_OK;
}

void fp8_synth_state_free(syn_state *st) {
  for (int i = 0; i < SYN_NTENSORS; i++) {
    free(st->t[i].val);
    free(st->t[i].packed);
  }
  if (st->rng) gsl_rng_free(st->rng);
  if (st->ev) gsl_rng_free(st->ev);
}

/* ------------------------------------------------------------------ one step */

static int module_runs(int layer, int module, int64_t step) {
  return !(layer == 3 && module == MOD_PROJ && (step + 1) % SYN_SKIP_PERIOD == 0);
}

static void plan_spike(syn_state *st, syn_tensor *t, double factor) {
  t->spike_factor = (float)factor;
  t->spike_nrows = 1 + uniform_int(st->ev, SYN_SPIKE_MAX_ROWS);
  for (int k = 0; k < t->spike_nrows; k++) t->spike_rows[k] = uniform_int(st->ev, SYN_TOKENS);
}

/* Decides this step's spikes (event generator only). */
static void plan_events(syn_state *st, int64_t step) {
  for (int i = 0; i < SYN_NTENSORS; i++) {
    st->t[i].spike_factor = 1.0f;
    st->t[i].spike_nrows = 0;
  }
  if (st->spike_step >= 0 && step >= st->spike_step && step < st->spike_step + st->spike_len)
    plan_spike(st, &st->t[tidx(st->spike_layer, MOD_FC1, ROLE_OUTPUT)],
               20.0 + 30.0 * gsl_rng_uniform(st->ev));
  if (st->next_spike >= 0 && step == st->next_spike) {
    /* A random activation or gradient tensor of a module that runs. */
    int layer, module, role;
    do {
      layer = uniform_int(st->ev, SYN_LAYERS);
      module = uniform_int(st->ev, SYN_MODULES);
    } while (!module_runs(layer, module, step));
    static const int roles[3] = {ROLE_INPUT, ROLE_OUTPUT, ROLE_GRAD};
    role = roles[uniform_int(st->ev, 3)];
    double factor = pow(10.0, 1.0 + 2.0 * gsl_rng_uniform(st->ev));
    plan_spike(st, &st->t[tidx(layer, module, role)], factor);
    st->next_spike = step + 10 + uniform_int(st->ev, 11);
  }
}

static void apply_spike(syn_tensor *t) {
  for (int k = 0; k < t->spike_nrows; k++) {
    float *row = t->val + (size_t)t->spike_rows[k] * (size_t)t->cols;
    /* A row drawn twice is multiplied once. */
    int seen = 0;
    for (int j = 0; j < k; j++) seen |= t->spike_rows[j] == t->spike_rows[k];
    if (seen) continue;
    for (int64_t c = 0; c < t->cols; c++) row[c] *= t->spike_factor;
  }
}

/* Spike, round to the stored dtype, take the amax of the stored values. */
static void finish_tensor(syn_tensor *t) {
  size_t n = (size_t)(t->rows * t->cols);
  apply_spike(t);
  if (t->dtype == FP8_DTYPE_BF16) fp8_synth_round_bf16(t->val, n);
  t->amax = fp8_amax_f32(t->val, n);
  t->present = 1;
}

/* The normalised residual stream seen by qkv and fc1: bulk N(0,1) per token scale plus the
 * fixed outlier channels. */
static void gen_hidden(syn_state *st, syn_tensor *t, double progress) {
  double grow = (1.0 + 0.5 * progress) * (1.0 + 0.15 * t->layer);
  for (int64_t r = 0; r < t->rows; r++) {
    float *row = t->val + r * t->cols;
    for (int64_t c = 0; c < t->cols; c++) row[c] = (float)(st->tok[r] * normal(st->rng));
    for (int k = 0; k < SYN_HID_OUTLIERS; k++)
      row[st->hid_col[k]] =
          (float)(st->hid_mag[k] * grow * st->tok[r] * (1.0 + 0.2 * normal(st->rng)));
  }
}

/* Sign times truncated log-normal magnitudes (underflow preset). */
static void gen_lognormal(syn_state *st, syn_tensor *t, double mu, double sigma) {
  size_t n = (size_t)(t->rows * t->cols);
  for (size_t i = 0; i < n; i++)
    t->val[i] = (float)(random_sign(st->rng) * lognormal_trunc(st->rng, mu, sigma));
}

/* Weight random walk (rank-1 update); runs whether or not the module runs. Returns the
 * weight's rms after the update. */
static double walk_weight(syn_state *st, syn_tensor *w) {
  double eta = 0.01 * st->w_std[w->module];
  double ss = 0.0;
  for (int64_t r = 0; r < w->rows; r++) st->u[r] = (float)(eta * normal(st->rng));
  for (int64_t c = 0; c < w->cols; c++) st->v[c] = (float)normal(st->rng);
  for (int64_t r = 0; r < w->rows; r++) {
    float *row = w->val + r * w->cols;
    float ur = st->u[r];
    for (int64_t c = 0; c < w->cols; c++) row[c] += ur * st->v[c];
    /* 8 partial sums (cols is a multiple of 8): vectorizable without reassociation */
    float part[8] = {0};
    for (int64_t c = 0; c < w->cols; c += 8)
      for (int k = 0; k < 8; k++) part[k] += row[c + k] * row[c + k];
    for (int k = 0; k < 8; k++) ss += part[k];
  }
  return sqrt(ss / (double)(w->rows * w->cols));
}

/* output = input x weight^T, statistically: row r ~ N(0, (||input_r|| * rms_w)^2). */
static void gen_output(syn_state *st, const syn_tensor *x, double rms_w, syn_tensor *y) {
  for (int64_t r = 0; r < y->rows; r++) {
    const float *xr = x->val + r * x->cols;
    double n2 = 0.0;
    for (int64_t c = 0; c < x->cols; c++) n2 += (double)xr[c] * xr[c];
    double sigma = sqrt(n2) * rms_w;
    float *row = y->val + r * y->cols;
    for (int64_t c = 0; c < y->cols; c++) row[c] = (float)(sigma * normal(st->rng));
    if (y->module == MOD_FC1)
      for (int k = 0; k < SYN_FFN_OUTLIERS; k++)
        row[st->ffn_col[k]] = (float)(sigma * (st->ffn_mean[k] + normal(st->rng)));
  }
}

static void gen_grad(syn_state *st, syn_tensor *g, double progress) {
  if (st->preset == PRESET_UNDERFLOW) {
    gen_lognormal(st, g, log(3e-7) - progress * log(10.0), 3.5);
    return;
  }
  double base = 1e-5 * k_modules[g->module].grad_factor * pow(10.0, -progress);
  for (int64_t r = 0; r < g->rows; r++) {
    float s = (float)(base * st->tokg[r]);
    float *row = g->val + r * g->cols;
    for (int64_t c = 0; c < g->cols; c++) row[c] = s * fp8_synth_student_t4(st->rng);
  }
}

void fp8_synth_gen_step(syn_state *st, int64_t step) {
  double progress = st->steps > 1 ? (double)step / (double)(st->steps - 1) : 0.0;
  plan_events(st, step);
  for (int k = 0; k < SYN_TOKENS; k++) {
    st->tok[k] = (float)exp(0.2 * normal(st->rng));
    st->tokg[k] = (float)exp(0.4 * normal(st->rng));
  }
  for (int l = 0; l < SYN_LAYERS; l++)
    for (int m = 0; m < SYN_MODULES; m++) {
      syn_tensor *x = &st->t[tidx(l, m, ROLE_INPUT)];
      syn_tensor *w = &st->t[tidx(l, m, ROLE_WEIGHT)];
      syn_tensor *y = &st->t[tidx(l, m, ROLE_OUTPUT)];
      syn_tensor *g = &st->t[tidx(l, m, ROLE_GRAD)];
      double rms_w = walk_weight(st, w);
      if (!module_runs(l, m, step)) {
        x->present = w->present = y->present = g->present = 0;
        x->amax = w->amax = y->amax = g->amax = 0.0f;
        continue;
      }
      switch (m) {
      case MOD_QKV:
      case MOD_FC1:
        gen_hidden(st, x, progress);
        break;
      case MOD_PROJ:
        if (st->preset == PRESET_UNDERFLOW) {
          gen_lognormal(st, x, log(1e-4), 2.5);
        } else {
          for (int64_t r = 0; r < x->rows; r++)
            for (int64_t c = 0; c < x->cols; c++)
              x->val[r * x->cols + c] = (float)(0.5 * st->tok[r] * normal(st->rng));
        }
        break;
      case MOD_FC2: {
        if (st->preset == PRESET_UNDERFLOW) {
          gen_lognormal(st, x, log(1e-3), 2.5);
        } else {
          /* fc1 always runs, and runs before fc2 in this loop. */
          const syn_tensor *h = &st->t[tidx(l, MOD_FC1, ROLE_OUTPUT)];
          size_t n = (size_t)(x->rows * x->cols);
          for (size_t i = 0; i < n; i++) x->val[i] = gelu(h->val[i]);
        }
        break;
      }
      }
      finish_tensor(x);
      finish_tensor(w);
      gen_output(st, x, rms_w, y);
      finish_tensor(y);
      gen_grad(st, g, progress);
      finish_tensor(g);
    }
}
