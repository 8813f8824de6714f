/* test_synth.c: the synthetic trace generator (src/trace/synth.c) read back through the trace
 * reader: layout, amax.csv agreeing bit for bit with the snapshots, determinism, and the
 * behaviours each preset promises (outlier channels, spikes, small gradients, underflow). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "synth.h"
#include "testutil.h"
#include "trace.h"
#include "util.h"

#define NTENSORS 64 /* 4 layers x 4 modules x 4 roles */

/* A trace generated once per preset and shared by the tests that only read it. */
typedef struct {
  char *dir;
  int64_t steps;
  fp8_trace tr;
  float *amax; /* [steps][namax_names], -1 where amax.csv has no row */
} gen_trace;

static void gen(gen_trace *g, const char *preset, int64_t steps, uint64_t seed) {
  char err[FP8_ERRLEN];
  memset(g, 0, sizeof *g);
  g->dir = tu_mkdtemp();
  ck_assert_ptr_nonnull(g->dir);
  g->steps = steps;
  int rc = fp8_synth_write(preset, g->dir, steps, seed, err, sizeof err);
  ck_assert_msg(rc == FP8_OK, "synth %s: %s", preset, err);
  rc = fp8_trace_open(g->dir, &g->tr, err, sizeof err);
  ck_assert_msg(rc == FP8_OK, "trace open: %s", err);
  size_t nn = g->tr.namax_names;
  g->amax = malloc((size_t)steps * nn * sizeof *g->amax);
  ck_assert_ptr_nonnull(g->amax);
  for (size_t i = 0; i < (size_t)steps * nn; i++) g->amax[i] = -1.0f;
  for (size_t i = 0; i < g->tr.namax; i++) {
    const fp8_amax_row *r = &g->tr.amax[i];
    ck_assert_int_ge(r->step, 0);
    ck_assert_int_lt(r->step, steps);
    ck_assert_int_ge(r->tensor, 0);
    ck_assert_uint_lt((size_t)r->tensor, nn);
    float *slot = &g->amax[(size_t)r->step * nn + (size_t)r->tensor];
    ck_assert_msg(*slot == -1.0f, "duplicate amax row step %lld tensor %s", (long long)r->step,
                  g->tr.amax_names[r->tensor]);
    *slot = r->amax;
  }
}

static void gen_free(gen_trace *g) {
  fp8_trace_close(&g->tr);
  tu_rmtree(g->dir);
  free(g->dir);
  free(g->amax);
}

static float amax_at(const gen_trace *g, int64_t step, size_t tensor) {
  return g->amax[(size_t)step * g->tr.namax_names + tensor];
}

static int name_index(const gen_trace *g, const char *name) {
  for (size_t i = 0; i < g->tr.namax_names; i++)
    if (strcmp(g->tr.amax_names[i], name) == 0) return (int)i;
  return -1;
}

static int skipped(const char *name, int64_t step) {
  return strncmp(name, "layers.3.proj.", 14) == 0 && (step + 1) % 7 == 0;
}

static gen_trace g_llm;

static void setup_llm(void) { gen(&g_llm, "llm", 30, 1); }
static void teardown_llm(void) { gen_free(&g_llm); }

/* ------------------------------------------------------------------ layout */

START_TEST(test_interval) {
  ck_assert_int_eq(fp8_synth_snapshot_interval(1), 1);
  ck_assert_int_eq(fp8_synth_snapshot_interval(29), 1);
  ck_assert_int_eq(fp8_synth_snapshot_interval(30), 2);
  ck_assert_int_eq(fp8_synth_snapshot_interval(200), 10);
  ck_assert_int_eq(fp8_synth_snapshot_interval(1000), 50);
  const char *const *p = fp8_synth_presets();
  ck_assert_str_eq(p[0], "llm");
  ck_assert_str_eq(p[1], "spiky");
  ck_assert_str_eq(p[2], "underflow");
  ck_assert_str_eq(p[3], "moe");
  ck_assert_ptr_null(p[4]);
}
END_TEST

START_TEST(test_layout) {
  const fp8_trace *tr = &g_llm.tr;
  int64_t every = fp8_synth_snapshot_interval(30);
  ck_assert_int_eq(every, 2);
  ck_assert_int_eq(tr->is_npy, 0);
  ck_assert_uint_eq(tr->nsteps, 15);
  for (size_t i = 0; i < tr->nsteps; i++) ck_assert_int_eq(tr->steps[i], (int64_t)i * every);
  /* Every step, every tensor: zeros included. */
  ck_assert_uint_eq(tr->namax_names, NTENSORS);
  ck_assert_uint_eq(tr->namax, 30 * NTENSORS);
  for (int64_t s = 0; s < 30; s++)
    for (size_t k = 0; k < NTENSORS; k++) {
      float a = amax_at(&g_llm, s, k);
      const char *name = tr->amax_names[k];
      if (skipped(name, s))
        ck_assert_msg(a == 0.0f, "%s at step %lld: amax %g, expected 0 (skipped)", name,
                      (long long)s, a);
      else
        ck_assert_msg(a > 0.0f && isfinite(a), "%s at step %lld: amax %g", name, (long long)s,
                      a);
    }
  for (size_t k = 0; k < NTENSORS; k++) {
    fp8_role r = fp8_role_of_tensor(tr->amax_names[k]);
    ck_assert_msg(r != FP8_ROLE_UNKNOWN && r != FP8_ROLE_GRAD_INPUT, "%s", tr->amax_names[k]);
  }
  ck_assert_int_ge(name_index(&g_llm, "layers.0.qkv.input"), 0);
  ck_assert_int_ge(name_index(&g_llm, "layers.3.fc2.grad_output"), 0);
}
END_TEST

/* Every snapshot tensor: dtype and shape as documented, and amax.csv's value equals the
 * amax of the stored data bit for bit. Skipped modules are absent. */
START_TEST(test_snapshots_match_amax) {
  const fp8_trace *tr = &g_llm.tr;
  char err[FP8_ERRLEN];
  size_t nskip = 0;
  for (size_t i = 0; i < tr->nsteps; i++) {
    fp8_step st;
    int rc = fp8_trace_load_step(tr, i, &st, err, sizeof err);
    ck_assert_msg(rc == FP8_OK, "%s", err);
    int64_t s = tr->steps[i];
    size_t expect = NTENSORS;
    for (size_t k = 0; k < NTENSORS; k++)
      if (skipped(tr->amax_names[k], s)) expect--;
    nskip += expect != NTENSORS;
    ck_assert_uint_eq(st.ntensors, expect);
    for (size_t j = 0; j < st.ntensors; j++) {
      const fp8_tensor_view *v = &st.tensors[j];
      ck_assert_msg(!skipped(v->name, s), "%s present at skipped step %lld", v->name,
                    (long long)s);
      fp8_role role = fp8_role_of_tensor(v->name);
      ck_assert_int_eq(v->dtype, role == FP8_ROLE_WEIGHT ? FP8_DTYPE_F32 : FP8_DTYPE_BF16);
      ck_assert_int_eq(v->ndim, 2);
      if (role != FP8_ROLE_WEIGHT) ck_assert_int_eq(v->shape[0], 64);
      ck_assert_int_eq(v->numel, v->shape[0] * v->shape[1]);
      float *x = malloc((size_t)v->numel * sizeof *x);
      ck_assert_ptr_nonnull(x);
      fp8_dtype_to_f32(v->dtype, v->data, (size_t)v->numel, x);
      float a = fp8_amax_f32(x, (size_t)v->numel);
      free(x);
      int idx = name_index(&g_llm, v->name);
      ck_assert_int_ge(idx, 0);
      float b = amax_at(&g_llm, s, (size_t)idx);
      ck_assert_msg(memcmp(&a, &b, sizeof a) == 0, "%s step %lld: data amax %.9g, csv %.9g",
                    v->name, (long long)s, a, b);
    }
    fp8_step_free(&st);
  }
  ck_assert_uint_eq(nskip, 2); /* steps 6 and 20 are snapshots where layers.3.proj skips */
  /* Shapes of one module of each kind. */
  fp8_step st;
  ck_assert_int_eq(fp8_trace_load_step(tr, 0, &st, err, sizeof err), FP8_OK);
  struct { const char *name; int64_t r, c; } want[] = {
      {"layers.0.qkv.weight", 384, 128},  {"layers.0.qkv.output", 64, 384},
      {"layers.1.proj.input", 64, 128},   {"layers.2.fc1.weight", 512, 128},
      {"layers.2.fc1.grad_output", 64, 512}, {"layers.3.fc2.input", 64, 512},
      {"layers.3.fc2.weight", 128, 512},
  };
  for (size_t w = 0; w < sizeof want / sizeof want[0]; w++) {
    int found = 0;
    for (size_t j = 0; j < st.ntensors; j++)
      if (strcmp(st.tensors[j].name, want[w].name) == 0) {
        found = 1;
        ck_assert_int_eq(st.tensors[j].shape[0], want[w].r);
        ck_assert_int_eq(st.tensors[j].shape[1], want[w].c);
      }
    ck_assert_msg(found, "%s missing", want[w].name);
  }
  fp8_step_free(&st);
}
END_TEST

/* ------------------------------------------------------------------ llm behaviours */

/* The largest ratio amax[s] / amax[s-1] over activations and gradients. */
static double max_jump(const gen_trace *g, char *which, size_t wlen) {
  double best = 0.0;
  for (size_t k = 0; k < g->tr.namax_names; k++) {
    if (fp8_role_of_tensor(g->tr.amax_names[k]) == FP8_ROLE_WEIGHT) continue;
    for (int64_t s = 1; s < g->steps; s++) {
      float a0 = amax_at(g, s - 1, k), a1 = amax_at(g, s, k);
      if (a0 > 0.0f && a1 > 0.0f && a1 / a0 > best) {
        best = a1 / a0;
        snprintf(which, wlen, "%s at step %lld", g->tr.amax_names[k], (long long)s);
      }
    }
  }
  return best;
}

START_TEST(test_llm_spike_and_small_grads) {
  char which[128] = "";
  double jump = max_jump(&g_llm, which, sizeof which);
  ck_assert_msg(jump > 10.0, "largest amax jump %.3g (%s), expected > 10", jump, which);
  /* The scheduled spike sits at round(0.6 * 29) = 17, on an fc1.output. */
  ck_assert_msg(strstr(which, "fc1.output") || strstr(which, "fc2."), "%s", which);
  int small = 0;
  for (size_t k = 0; k < NTENSORS; k++) {
    if (fp8_role_of_tensor(g_llm.tr.amax_names[k]) != FP8_ROLE_GRAD_OUTPUT) continue;
    for (int64_t s = 0; s < 30; s++) {
      float a = amax_at(&g_llm, s, k);
      ck_assert_msg(a < 0.1f, "%s step %lld: gradient amax %g", g_llm.tr.amax_names[k],
                    (long long)s, a);
      small += a > 0.0f && a < 1e-2f;
    }
  }
  ck_assert_int_gt(small, 0);
  /* Weights drift slowly: amax changes by less than 5% from step to step. */
  for (size_t k = 0; k < NTENSORS; k++) {
    if (fp8_role_of_tensor(g_llm.tr.amax_names[k]) != FP8_ROLE_WEIGHT) continue;
    for (int64_t s = 1; s < 30; s++) {
      float a0 = amax_at(&g_llm, s - 1, k), a1 = amax_at(&g_llm, s, k);
      if (a0 > 0.0f && a1 > 0.0f)
        ck_assert_msg(fabsf(a1 / a0 - 1.0f) < 0.05f, "%s step %lld: %g -> %g",
                      g_llm.tr.amax_names[k], (long long)s, a0, a1);
    }
  }
}
END_TEST

/* Outlier channels: in qkv.input the largest column is >= 10x the median column, and it is
 * the same column in the first and last snapshot. */
static int outlier_column(const fp8_trace *tr, size_t snap, double *ratio) {
  char err[FP8_ERRLEN];
  fp8_step st;
  ck_assert_int_eq(fp8_trace_load_step(tr, snap, &st, err, sizeof err), FP8_OK);
  const fp8_tensor_view *v = NULL;
  for (size_t j = 0; j < st.ntensors; j++)
    if (strcmp(st.tensors[j].name, "layers.0.qkv.input") == 0) v = &st.tensors[j];
  ck_assert_ptr_nonnull(v);
  int64_t rows = v->shape[0], cols = v->shape[1];
  float *x = malloc((size_t)v->numel * sizeof *x), *colmax = calloc((size_t)cols, sizeof *colmax);
  fp8_dtype_to_f32(v->dtype, v->data, (size_t)v->numel, x);
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) colmax[c] = fmaxf(colmax[c], fabsf(x[r * cols + c]));
  int best = 0;
  for (int64_t c = 1; c < cols; c++)
    if (colmax[c] > colmax[best]) best = (int)c;
  float top = colmax[best];
  /* median by partial selection: sort a copy */
  for (int64_t i = 1; i < cols; i++)
    for (int64_t j = i; j > 0 && colmax[j - 1] > colmax[j]; j--) {
      float t = colmax[j];
      colmax[j] = colmax[j - 1];
      colmax[j - 1] = t;
    }
  *ratio = top / colmax[cols / 2];
  free(x);
  free(colmax);
  fp8_step_free(&st);
  return best;
}

START_TEST(test_llm_outlier_channels) {
  double r0, r1;
  int c0 = outlier_column(&g_llm.tr, 0, &r0);
  int c1 = outlier_column(&g_llm.tr, g_llm.tr.nsteps - 1, &r1);
  ck_assert_msg(r0 >= 10.0 && r1 >= 10.0, "outlier ratios %g %g", r0, r1);
  ck_assert_int_eq(c0, c1);
}
END_TEST

/* ------------------------------------------------------------------ other presets */

START_TEST(test_spiky) {
  gen_trace g;
  gen(&g, "spiky", 50, 3);
  int jumps = 0;
  for (size_t k = 0; k < NTENSORS; k++) {
    if (fp8_role_of_tensor(g.tr.amax_names[k]) == FP8_ROLE_WEIGHT) continue;
    for (int64_t s = 1; s < 50; s++) {
      float a0 = amax_at(&g, s - 1, k), a1 = amax_at(&g, s, k);
      jumps += a0 > 0.0f && a1 / a0 > 5.0f;
    }
  }
  /* The scheduled spike plus about 3 frequent ones in 50 steps (every 10-20 steps). */
  ck_assert_msg(jumps >= 3, "%d amax jumps > 5x in 50 steps", jumps);
  gen_free(&g);
}
END_TEST

/* Under current scaling (amax -> fp8 max), a good share of the gradients still flush to zero
 * in E4M3 and some in E5M2: the dynamic range is wider than the formats'. */
START_TEST(test_underflow) {
  gen_trace g;
  gen(&g, "underflow", 6, 5);
  char err[FP8_ERRLEN];
  fp8_step st;
  ck_assert_int_eq(fp8_trace_load_step(&g.tr, 0, &st, err, sizeof err), FP8_OK);
  fp8_stats s4, s5;
  fp8_stats_init(&s4);
  fp8_stats_init(&s5);
  for (size_t j = 0; j < st.ntensors; j++) {
    const fp8_tensor_view *v = &st.tensors[j];
    if (fp8_role_of_tensor(v->name) != FP8_ROLE_GRAD_OUTPUT) continue;
    float *x = malloc((size_t)v->numel * sizeof *x);
    fp8_dtype_to_f32(v->dtype, v->data, (size_t)v->numel, x);
    float a = fp8_amax_f32(x, (size_t)v->numel);
    ck_assert_float_lt(a, 10.0f);
    fp8_quantize_f32(x, (size_t)v->numel, FP8_E4M3_MAX / a, FP8_E4M3, NULL, NULL, &s4);
    fp8_quantize_f32(x, (size_t)v->numel, FP8_E5M2_MAX / a, FP8_E5M2, NULL, NULL, &s5);
    free(x);
  }
  fp8_step_free(&st);
  ck_assert_int_gt(s4.n, 0);
  double f4 = (double)s4.underflow / (double)s4.n, f5 = (double)s5.underflow / (double)s5.n;
  ck_assert_msg(f4 > 0.1, "E4M3 underflow fraction %g", f4);
  ck_assert_msg(f5 > 0.0, "E5M2 underflow fraction %g", f5);
  gen_free(&g);
}
END_TEST

/* ------------------------------------------------------------------ determinism */

static int files_equal(const char *a, const char *b) {
  size_t la, lb;
  char *x = tu_read_file(a, &la), *y = tu_read_file(b, &lb);
  int eq = x && y && la == lb && memcmp(x, y, la) == 0;
  free(x);
  free(y);
  return eq;
}

START_TEST(test_determinism) {
  char *d1 = tu_mkdtemp(), *d2 = tu_mkdtemp(), *d3 = tu_mkdtemp();
  char err[FP8_ERRLEN], pa[1024], pb[1024];
  ck_assert_int_eq(fp8_synth_write("spiky", d1, 8, 42, err, sizeof err), FP8_OK);
  ck_assert_int_eq(fp8_synth_write("spiky", d2, 8, 42, err, sizeof err), FP8_OK);
  ck_assert_int_eq(fp8_synth_write("spiky", d3, 8, 43, err, sizeof err), FP8_OK);
  snprintf(pa, sizeof pa, "%s/amax.csv", d1);
  snprintf(pb, sizeof pb, "%s/amax.csv", d2);
  ck_assert(files_equal(pa, pb));
  for (int s = 0; s < 8; s++) {
    snprintf(pa, sizeof pa, "%s/step_%d.safetensors", d1, s);
    snprintf(pb, sizeof pb, "%s/step_%d.safetensors", d2, s);
    ck_assert_msg(files_equal(pa, pb), "step %d differs between runs", s);
  }
  snprintf(pb, sizeof pb, "%s/amax.csv", d3);
  ck_assert(!files_equal(pa, pb));
  snprintf(pa, sizeof pa, "%s/amax.csv", d1);
  ck_assert(!files_equal(pa, pb));
  /* No temporary files left behind. */
  fp8_trace tr;
  ck_assert_int_eq(fp8_trace_open(d1, &tr, err, sizeof err), FP8_OK);
  ck_assert_uint_eq(tr.nsteps, 8);
  fp8_trace_close(&tr);
  char *out = NULL;
  snprintf(pa, sizeof pa, "ls -A '%s' | grep -c tmp", d1);
  tu_run(pa, &out);
  ck_assert_msg(out && atoi(out) == 0, "temporary files left: %s", out ? out : "");
  free(out);
  tu_rmtree(d1);
  tu_rmtree(d2);
  tu_rmtree(d3);
  free(d1);
  free(d2);
  free(d3);
}
END_TEST

/* ------------------------------------------------------------------ errors and directories */

START_TEST(test_errors) {
  char err[FP8_ERRLEN], path[1024];
  char *d = tu_mkdtemp();
  ck_assert_int_eq(fp8_synth_write("x", d, 10, 1, err, sizeof err), FP8_EINVAL);
  ck_assert_str_eq(err, "unknown synth preset 'x' (llm, spiky, underflow, moe)");
  ck_assert_int_eq(fp8_synth_write("llm", d, 0, 1, err, sizeof err), FP8_EINVAL);
  ck_assert_int_eq(fp8_synth_write("llm", d, -5, 1, err, sizeof err), FP8_EINVAL);
  ck_assert_int_eq(fp8_synth_write("llm", d, 1000001, 1, err, sizeof err), FP8_EINVAL);
  ck_assert_int_eq(fp8_synth_write(NULL, d, 10, 1, err, sizeof err), FP8_EINVAL);
  ck_assert_int_eq(fp8_synth_write("llm", "", 10, 1, err, sizeof err), FP8_EINVAL);
  /* Nothing was written by the failed calls. */
  char *out = NULL;
  snprintf(path, sizeof path, "ls -A '%s' | wc -l", d);
  tu_run(path, &out);
  ck_assert_int_eq(atoi(out), 0);
  free(out);
  /* A directory below a regular file cannot be created: FP8_EIO naming the path. */
  snprintf(path, sizeof path, "%s/file", d);
  ck_assert_int_eq(tu_write_file(path, "x", 1), 0);
  snprintf(path, sizeof path, "%s/file/sub", d);
  ck_assert_int_eq(fp8_synth_write("llm", path, 2, 1, err, sizeof err), FP8_EIO);
  ck_assert_msg(strstr(err, "/file") != NULL, "%s", err);
  /* NULL err buffer is allowed. */
  ck_assert_int_eq(fp8_synth_write("nope", d, 2, 1, NULL, 0), FP8_EINVAL);
  tu_rmtree(d);
  free(d);
}
END_TEST

START_TEST(test_nested_dir_one_step) {
  char *d = tu_mkdtemp();
  char err[FP8_ERRLEN], path[1024];
  snprintf(path, sizeof path, "%s/a/b/trace/", d);
  ck_assert_msg(fp8_synth_write("underflow", path, 1, 9, err, sizeof err) == FP8_OK, "%s", err);
  fp8_trace tr;
  ck_assert_msg(fp8_trace_open(path, &tr, err, sizeof err) == FP8_OK, "%s", err);
  ck_assert_uint_eq(tr.nsteps, 1);
  ck_assert_int_eq(tr.steps[0], 0);
  ck_assert_uint_eq(tr.namax, NTENSORS);
  fp8_trace_close(&tr);
  /* Writing again into a directory that holds a trace is refused (the two would mix: the old
   * snapshots at steps the new trace does not have would stay), naming the folder. */
  ck_assert_int_eq(fp8_synth_write("underflow", path, 1, 9, err, sizeof err), FP8_EINVAL);
  char want[1200];
  snprintf(want, sizeof want, "%s: already holds a trace (1 snapshot and amax.csv): a new one "
           "would mix with it (use --force to replace its files)", path);
  ck_assert_str_eq(err, want);
  tu_rmtree(d);
  free(d);
}
END_TEST

/* fp8_synth_remove_trace removes a trace's own files (step_<N>.safetensors, step_<N>/ npy
 * folders, amax.csv) and nothing else; then a new trace can be written there. */
START_TEST(test_remove_trace) {
  char *d = tu_mkdtemp();
  char err[FP8_ERRLEN], p[1024];
  ck_assert_msg(fp8_synth_write("llm", d, 40, 1, err, sizeof err) == FP8_OK, "%s", err);
  snprintf(p, sizeof p, "%s/step_5", d);
  ck_assert_int_eq(mkdir(p, 0777), 0);
  snprintf(p, sizeof p, "%s/step_5/a.input.npy", d);
  ck_assert_int_eq(tu_write_file(p, "x", 1), 0);
  const char *keep[] = {"notes.txt", "step_7", "step_x.safetensors", "amax.csv.bak", "rank_0.txt"};
  for (size_t i = 0; i < sizeof keep / sizeof *keep; i++) {
    snprintf(p, sizeof p, "%s/%s", d, keep[i]);
    ck_assert_int_eq(tu_write_file(p, "k", 1), 0);
  }
  ck_assert_int_eq(fp8_synth_write("llm", d, 10, 1, err, sizeof err), FP8_EINVAL);
  ck_assert_ptr_nonnull(strstr(err, "already holds a trace (21 snapshots and amax.csv)"));
  ck_assert_int_eq(fp8_synth_remove_trace(d, err, sizeof err), FP8_OK);
  char *out = NULL;
  snprintf(p, sizeof p, "ls -A '%s' | LC_ALL=C sort | tr '\\n' ' '", d);
  ck_assert_int_eq(tu_run(p, &out), 0);
  ck_assert_str_eq(out, "amax.csv.bak notes.txt rank_0.txt step_7 step_x.safetensors ");
  free(out);
  ck_assert_msg(fp8_synth_write("llm", d, 10, 1, err, sizeof err) == FP8_OK, "%s", err);
  fp8_trace tr;
  ck_assert_msg(fp8_trace_open(d, &tr, err, sizeof err) == FP8_OK, "%s", err);
  ck_assert_uint_eq(tr.nsteps, 10);
  ck_assert_int_eq(tr.steps[9], 9);
  fp8_trace_close(&tr);
  /* a directory without a trace: nothing to remove; a missing one is fine too */
  ck_assert_int_eq(fp8_synth_remove_trace(d, err, sizeof err), FP8_OK);
  snprintf(p, sizeof p, "%s/missing", d);
  ck_assert_int_eq(fp8_synth_remove_trace(p, err, sizeof err), FP8_OK);
  tu_rmtree(d);
  free(d);
}
END_TEST

int main(void) {
  Suite *s = suite_create("synth");
  TCase *tc = tcase_create("basic");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_interval);
  tcase_add_test(tc, test_errors);
  tcase_add_test(tc, test_nested_dir_one_step);
  tcase_add_test(tc, test_remove_trace);
  tcase_add_test(tc, test_determinism);
  tcase_add_test(tc, test_spiky);
  tcase_add_test(tc, test_underflow);
  suite_add_tcase(s, tc);
  TCase *tl = tcase_create("llm");
  tcase_set_timeout(tl, 120);
  /* Unchecked fixture: the trace is generated once, before the tests fork off. */
  tcase_add_unchecked_fixture(tl, setup_llm, teardown_llm);
  tcase_add_test(tl, test_layout);
  tcase_add_test(tl, test_snapshots_match_amax);
  tcase_add_test(tl, test_llm_spike_and_small_grads);
  tcase_add_test(tl, test_llm_outlier_channels);
  suite_add_tcase(s, tl);
  return tu_run_suite(s);
}
