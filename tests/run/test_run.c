/* test_run.c: `fp8lab run`, `synth` and `inspect` end to end through the real binary: rows of
 * steps.csv worked out by hand on a tiny trace, the CSV schemas, run.json, and every bad-input
 * path (exit 2, one line naming the file, nothing written). Multi-rank traces: delayed scales
 * of two ranks worked out by hand with and without [trace] reduce_amax, their errors, and a
 * two-rank replay through the report. */
#include <check.h>
#include <jansson.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "engine_impl.h"
#include "outfile.h"
#include "results.h"
#include "experiment.h"
#include "runner.h"
#include "run_mpi.h"
#include "trace.h"

static char *g_dir;

static void setup(void) { g_dir = tu_mkdtemp(); }
static void teardown(void) {
  tu_rmtree(g_dir);
  free(g_dir);
}

static char *path_in(const char *rel) {
  char *p = malloc(strlen(g_dir) + strlen(rel) + 2);
  sprintf(p, "%s/%s", g_dir, rel);
  return p;
}

static void write_text(const char *rel, const char *text) {
  char *p = path_in(rel);
  ck_assert_int_eq(tu_write_file(p, text, strlen(text)), 0);
  free(p);
}

#define run_cli(out, ...) tu_cli(g_dir, (out), __VA_ARGS__)

/* A trace: snapshots at steps 0 and 2 of tensor m.input (F32) and m.grad_output (BF16),
 * amax.csv with m.input = 8 at step 1 (between the snapshots). */
static void write_tiny_trace(void) {
  char *tdir = path_in("trace");
  mkdir(tdir, 0777);
  float in0[4] = {1.0f, 2.0f, -4.0f, 0.5f};
  float in2[4] = {100.0f, -3.0f, 0.0f, 0x1p-12f};
  uint16_t g0[2] = {0x3F80, 0xC000}; /* bf16 1.0, -2.0 */
  uint16_t g2[2] = {0x3F00, 0x0000}; /* 0.5, 0 */
  char err[FP8_ERRLEN];
  fp8_tensor_out t0[2] = {{"m.input", FP8_DTYPE_F32, 1, {4}, in0}, {"m.grad_output", FP8_DTYPE_BF16, 1, {2}, g0}};
  fp8_tensor_out t2[2] = {{"m.input", FP8_DTYPE_F32, 1, {4}, in2}, {"m.grad_output", FP8_DTYPE_BF16, 1, {2}, g2}};
  char *p0 = path_in("trace/step_0.safetensors"), *p2 = path_in("trace/step_2.safetensors");
  ck_assert_int_eq(fp8_safetensors_write(p0, t0, 2, NULL, err, sizeof err), FP8_OK);
  ck_assert_int_eq(fp8_safetensors_write(p2, t2, 2, NULL, err, sizeof err), FP8_OK);
  write_text("trace/amax.csv", "step,tensor,amax\n1,m.input,8\n1,m.grad_output,0\n");
  free(p0);
  free(p2);
  free(tdir);
}

static const char TINY_INI[] =
    "[trace]\npath = trace\n"
    "[recipe.d]\nkind = delayed\nhistory_len = 1, 2\n"
    "[recipe.c]\nkind = current\n"
    "[output]\ndir = out\n";

/* Returns the line of steps.csv whose first fields match prefix (malloc'ed), or NULL. */
static char *find_row(const char *csv, const char *prefix) {
  const char *p = csv;
  while (p && *p) {
    const char *nl = strchr(p, '\n');
    size_t len = nl ? (size_t)(nl - p) : strlen(p);
    if (strncmp(p, prefix, strlen(prefix)) == 0) {
      char *r = malloc(len + 1);
      memcpy(r, p, len);
      r[len] = 0;
      return r;
    }
    p = nl ? nl + 1 : NULL;
  }
  return NULL;
}

/* The four columns issue 13 appended to a steps.csv row (clipped, overshoot, cos_sim, warmup),
 * checked against independent values: the counts and the flag exactly, the two numbers to 1e-9
 * (they are printed with 9 digits). Returns the row cut after snr_db's block columns, so that
 * the caller compares the rest of it as before. */
static char *cut_tail(char *row, long long clipped, double overshoot, double cos, int warmup) {
  ck_assert_ptr_nonnull(row);
  /* issue 29's two columns (stochastic rounding's expectation): empty outside the FP4 kinds */
  size_t len = strlen(row);
  ck_assert_msg(len >= 2 && strcmp(row + len - 2, ",,") == 0, "not empty: %s", row);
  row[len - 2] = 0;
  char *p[4];
  for (int k = 3; k >= 0; k--) {
    p[k] = strrchr(row, ',');
    ck_assert_ptr_nonnull(p[k]);
    *p[k] = 0;
  }
  ck_assert_msg(atoll(p[0] + 1) == clipped, "clipped %s, want %lld", p[0] + 1, clipped);
  double ov = strtod(p[1] + 1, NULL), cs = strtod(p[2] + 1, NULL);
  if (isinf(overshoot)) ck_assert_msg(ov == overshoot, "overshoot %s", p[1] + 1);
  else ck_assert_msg(fabs(ov - overshoot) <= 1e-9 * fmax(1.0, fabs(overshoot)), "overshoot %s, want %.12g", p[1] + 1, overshoot);
  ck_assert_msg(fabs(cs - cos) <= 1e-9, "cos_sim %s, want %.12g", p[2] + 1, cos);
  ck_assert_msg(atoi(p[3] + 1) == warmup, "warmup %s, want %d", p[3] + 1, warmup);
  return row;
}

/* sum x xhat / sqrt(sum x^2 sum xhat^2), straight from the values */
static double cos_of(const float *x, const float *xh, int n) {
  double xy = 0, xx = 0, hh = 0;
  for (int i = 0; i < n; i++) {
    xy += (double)x[i] * xh[i];
    xx += (double)x[i] * x[i];
    hh += (double)xh[i] * xh[i];
  }
  return xy / sqrt(xx * hh);
}

static int count_lines(const char *s) {
  int n = 0;
  for (; *s; s++) n += *s == '\n';
  return n;
}

/* Runs `fp8lab <cmd>` (exit 0 required) and returns the output file rel (malloc'ed). */
static char *run_read(const char *cmd, const char *rel) {
  char *out;
  int rc = run_cli(&out, "%s", cmd);
  ck_assert_msg(rc == 0, "%s: rc %d: %s", cmd, rc, out);
  free(out);
  char *p = path_in(rel);
  char *text = tu_read_file(p, NULL);
  free(p);
  ck_assert_msg(text != NULL, "%s: no %s", cmd, rel);
  return text;
}

START_TEST(test_tiny_rows_by_hand) {
  write_tiny_trace();
  write_text("exp.ini", TINY_INI);
  char *csv = run_read("run exp.ini --quiet", "out/steps.csv");
  /* header, then 2 snapshot steps x 2 tensors x 3 configurations */
  ck_assert_int_eq(count_lines(csv), 1 + 2 * 2 * 3);
  static const char header[] =
      "tensor,role,step,recipe,kind,format,history_len,margin,amax_compute,amax,scale,n,"
      "nonfinite,zeros,overflow,underflow,subnormal,mse,snr_db,nblocks,blocks_with_overflow,"
      "log2_scale_min,log2_scale_max,log2_scale_std,clipped,overshoot,cos_sim,warmup,"
      "underflow_expected,mse_expected\n";
  ck_assert(strncmp(csv, header, strlen(header)) == 0);
  /* step 0: every delayed configuration uses scale 1; x*1 fits E4M3 exactly: no error (cosine
   * 1); amax 4 at scale 1 is log2(4/448) binades below the max; step 0 is the warm-up */
  char *r = find_row(csv, "m.input,input,0,d,delayed,e4m3,1,0,max,");
  ck_assert_ptr_nonnull(r);
  cut_tail(r, 0, log2(4.0 / 448.0), 1.0, 1);
  ck_assert_str_eq(r, "m.input,input,0,d,delayed,e4m3,1,0,max,4,1,4,0,0,0,0,0,0,inf,,,,,");
  free(r);
  /* current scaling at step 0: 448/4 = 112; 0.5*112 = 56 exact, all exact again; amax*scale is
   * the max exactly: overshoot 0. The warm-up is a property of the tensor's step: 1 here too. */
  r = find_row(csv, "m.input,input,0,c,current,e4m3,,,,");
  cut_tail(r, 0, 0.0, 1.0, 1);
  ck_assert_str_eq(r, "m.input,input,0,c,current,e4m3,,,,4,112,4,0,0,0,0,0,0,inf,,,,,");
  free(r);
  /* step 2: history {4 (step 0), 8 (step 1, amax.csv)}: L=1 -> 448/8 = 56, L=2 -> 56 too;
   * 100*56 = 5600 overflows; 2^-12*56 = 0.013671875 = 7*2^-9: subnormal code 7, exact;
   * -3*56 = -168 is a tie between 160 and 176: even mantissa, 160; 0 is a zero */
  r = find_row(csv, "m.input,input,2,d,delayed,e4m3,1,0,max,");
  ck_assert_ptr_nonnull(r);
  /* dequantized with scale_inv = RN32(1/56), which is not exact: xhat = RN32(code value * sinv) */
  float sinv = 1.0f / 56.0f;
  float xin[4] = {100.0f, -3.0f, 0.0f, 0x1p-12f}, qv[4] = {448.0f, -160.0f, 0.0f, 7 * 0x1p-9f};
  double e2 = 0, x2 = 0;
  float xhs[4];
  for (int i = 0; i < 4; i++) {
    float xh = xhs[i] = qv[i] * sinv;
    double d = (double)xin[i] - (double)xh;
    e2 += d * d;
    x2 += (double)xin[i] * (double)xin[i];
  }
  /* 100 * 56 = 5600 is far past 464: clipped, 12.5 times the max (log2 12.5 binades); the
   * history holds step 0's amax: no longer warm-up */
  double cos2 = cos_of(xin, xhs, 4), ov2 = log2(100.0 * 56.0 / 448.0);
  char expect[256];
  snprintf(expect, sizeof expect, "m.input,input,2,d,delayed,e4m3,1,0,max,100,56,4,0,1,1,0,1,%.9g,%.9g,,,,,",
           e2 / 4.0, 10.0 * log10(x2 / e2));
  cut_tail(r, 1, ov2, cos2, 0);
  ck_assert_str_eq(r, expect);
  free(r);
  r = find_row(csv, "m.input,input,2,d,delayed,e4m3,2,0,max,");
  cut_tail(r, 1, ov2, cos2, 0);
  snprintf(expect, sizeof expect, "m.input,input,2,d,delayed,e4m3,2,0,max,100,56,4,0,1,1,0,1,%.9g,%.9g,,,,,",
           e2 / 4.0, 10.0 * log10(x2 / e2));
  ck_assert_str_eq(r, expect);
  free(r);
  /* current at step 2: 448/100 = 4.48 (float) */
  r = find_row(csv, "m.input,input,2,c,current,e4m3,,,,100,");
  ck_assert_ptr_nonnull(r);
  snprintf(expect, sizeof expect, "m.input,input,2,c,current,e4m3,,,,100,%.9g,4,0,1,0,", (double)(448.0f / 100.0f));
  ck_assert_msg(strncmp(r, expect, strlen(expect)) == 0, "%s vs %s", r, expect);
  free(r);
  /* grad_output: E5M2 (hybrid); amax 0 at step 1 keeps the state: step 2 uses 57344/2 */
  r = find_row(csv, "m.grad_output,grad_output,2,d,delayed,e5m2,1,0,max,");
  ck_assert_ptr_nonnull(r);
  /* 0.5 * 28672 = 14336, a quarter of 57344: overshoot -2, exact cast (cosine 1) */
  cut_tail(r, 0, -2.0, 1.0, 0);
  ck_assert_str_eq(r, "m.grad_output,grad_output,2,d,delayed,e5m2,1,0,max,0.5,28672,2,0,1,0,0,0,0,inf,,,,,");
  free(r);
  free(csv);

  /* summary.csv: one row per tensor and configuration with totals over the 2 steps */
  char *p = path_in("out/summary.csv");
  char *sum = tu_read_file(p, NULL);
  free(p);
  ck_assert_int_eq(count_lines(sum), 1 + 2 * 3);
  r = find_row(sum, "m.input,input,d,delayed,e4m3,1,0,max,");
  ck_assert_ptr_nonnull(r);
  ck_assert_msg(strncmp(r, "m.input,input,d,delayed,e4m3,1,0,max,2,8,0,1,1,0,1,0.125,0,0.125,1,1058,", 71) == 0,
                "%s", r);
  free(r);
  free(sum);

  /* histograms.csv: floor(log2|x|) of finite non-zero elements, per tensor and snapshot step */
  p = path_in("out/histograms.csv");
  char *h = tu_read_file(p, NULL);
  free(p);
  ck_assert_ptr_nonnull(h);
  ck_assert_str_eq(h,
                   "tensor,step,log2_bin,count\n"
                   "m.grad_output,0,0,1\nm.grad_output,0,1,1\n"
                   "m.input,0,-1,1\nm.input,0,0,1\nm.input,0,1,1\nm.input,0,2,1\n"
                   "m.grad_output,2,-1,1\n"
                   "m.input,2,-12,1\nm.input,2,1,1\nm.input,2,6,1\n");
  free(h);

  /* no layer triplet (m has no weight): no gemm.csv */
  p = path_in("out/gemm.csv");
  struct stat gsb;
  ck_assert_int_ne(stat(p, &gsb), 0);
  free(p);

  /* run.json: parses, names the version and counts the rows */
  p = path_in("out/run.json");
  json_error_t jerr;
  json_t *j = json_load_file(p, 0, &jerr);
  free(p);
  ck_assert_ptr_nonnull(j);
  ck_assert_str_eq(json_string_value(json_object_get(j, "fp8lab_version")), FP8LAB_VERSION);
  ck_assert_int_eq(json_integer_value(json_object_get(j, "rows")), 12);
  ck_assert_int_eq(json_integer_value(json_object_get(j, "steps_replayed")), 3);
  ck_assert_int_eq(json_array_size(json_object_get(json_object_get(j, "experiment"), "configurations")), 3);
  ck_assert(json_array_size(json_object_get(j, "inputs")) == 4); /* ini, 2 snapshots, amax.csv */
  /* the files the run wrote (no gemm.csv: no layer triplet), then the report's */
  char *outs = json_dumps(json_object_get(j, "outputs"), JSON_COMPACT);
  static const char run_outs[] = "[\"steps.csv\",\"stream.csv\",\"summary.csv\",\"histograms.csv\",\"run.json\","
                                 "\"analysis.csv\",\"recommendations.csv\",\"plots/";
  ck_assert_msg(strncmp(outs, run_outs, strlen(run_outs)) == 0, "%s", outs);
  /* advice.ini: the answer as an experiment (the whole-model setting misses a tensor here) */
  ck_assert_msg(strstr(outs, ",\"report.md\",\"advice.ini\",\"te_recipe.py\",\"notebooks_export/exp.ipynb\"]") != NULL,
                "%s", outs);
  free(outs);
  json_decref(j);
}
END_TEST

/* A layer triplet worked by hand: X = [[1.0625, 2]], W = [[1, 0]], dY = [[1]]. At step 0 the
 * delayed scale is 1: 1.0625 is an E4M3 tie between 1 and 1.125 and rounds to 1 (even), all else
 * is exact. fprop: Y_ref 1.0625, Y 1 -> 0.0625/1.0625; dgrad exact; wgrad: [[1.0625, 2]] against
 * [[1, 2]]. Row-wise pow2 scales land on the same ties (X: 448/2 -> 128, 136 -> 128; column-wise
 * X[0]: 448/1.0625 -> 256, 272 -> 256), so the rowwise rows equal the delayed ones. */
START_TEST(test_gemm_by_hand) {
  char *tdir = path_in("trace");
  mkdir(tdir, 0777);
  free(tdir);
  float x[2] = {1.0625f, 2.0f}, w[2] = {1.0f, 0.0f}, g[1] = {1.0f};
  fp8_tensor_out t[3] = {{"l.grad_output", FP8_DTYPE_F32, 2, {1, 1}, g},
                         {"l.input", FP8_DTYPE_F32, 2, {1, 2}, x},
                         {"l.weight", FP8_DTYPE_F32, 2, {1, 2}, w}};
  char err[FP8_ERRLEN], *p = path_in("trace/step_0.safetensors");
  ck_assert_int_eq(fp8_safetensors_write(p, t, 3, NULL, err, sizeof err), FP8_OK);
  free(p);
  write_text("g.ini", "[trace]\npath = trace\n[recipe.d]\nkind = delayed\nhistory_len = 4\n"
                      "[recipe.row]\nkind = rowwise\n[output]\ndir = out\n");
  char *out;
  int rc = run_cli(&out, "run g.ini --no-report");
  ck_assert_msg(rc == 0, "%s", out);
  /* the final message names the files written, gemm.csv among them */
  ck_assert_msg(strstr(out, "\n  gemm.csv ") != NULL && strstr(out, "\n  run.json ") != NULL &&
                strstr(out, "\n  histograms.csv ") != NULL, "%s", out);
  free(out);
  p = path_in("out/gemm.csv");
  char *csv = tu_read_file(p, NULL);
  free(p);
  ck_assert_ptr_nonnull(csv);
  double f = 0.0625 / 1.0625, wg = 0.0625 / sqrt(1.0625 * 1.0625 + 4.0);
  char expect[1024];
  /* gemm_error = sampled (the default): a 1 x 1, 1 x 2, 1 x 2 output is all taken (the whole
   * output: the exact error, an interval of width 0) */
  snprintf(expect, sizeof expect,
           "layer,gemm,step,recipe,kind,history_len,margin,amax_compute,rel_error,rel_error_lo,"
           "rel_error_hi\n"
           "l,fprop,0,d,delayed,4,0,max,%.9g,%.9g,%.9g\nl,fprop,0,row,rowwise,,,,%.9g,%.9g,%.9g\n"
           "l,dgrad,0,d,delayed,4,0,max,0,0,0\nl,dgrad,0,row,rowwise,,,,0,0,0\n"
           "l,wgrad,0,d,delayed,4,0,max,%.9g,%.9g,%.9g\nl,wgrad,0,row,rowwise,,,,%.9g,%.9g,%.9g\n",
           f, f, f, f, f, f, wg, wg, wg, wg, wg, wg);
  ck_assert_str_eq(csv, expect);
  free(csv);
  /* gemm_error = exact: the same errors, 9 columns */
  write_text("ge.ini", "[trace]\npath = trace\n[recipe.d]\nkind = delayed\nhistory_len = 4\n"
                       "[recipe.row]\nkind = rowwise\n[analysis]\ngemm_error = exact\n"
                       "[output]\ndir = out_exact\n");
  rc = run_cli(&out, "run ge.ini --no-report");
  ck_assert_msg(rc == 0, "%s", out);
  free(out);
  p = path_in("out_exact/gemm.csv");
  csv = tu_read_file(p, NULL);
  free(p);
  snprintf(expect, sizeof expect,
           "layer,gemm,step,recipe,kind,history_len,margin,amax_compute,rel_error\n"
           "l,fprop,0,d,delayed,4,0,max,%.9g\nl,fprop,0,row,rowwise,,,,%.9g\n"
           "l,dgrad,0,d,delayed,4,0,max,0\nl,dgrad,0,row,rowwise,,,,0\n"
           "l,wgrad,0,d,delayed,4,0,max,%.9g\nl,wgrad,0,row,rowwise,,,,%.9g\n",
           f, f, wg, wg);
  ck_assert_str_eq(csv, expect);
  free(csv);
  /* run.json lists gemm.csv among the files the run wrote */
  p = path_in("out/run.json");
  json_error_t jerr;
  json_t *j = json_load_file(p, 0, &jerr);
  free(p);
  ck_assert_ptr_nonnull(j);
  char *outs = json_dumps(json_object_get(j, "outputs"), JSON_COMPACT);
  ck_assert_str_eq(outs, "[\"steps.csv\",\"stream.csv\",\"summary.csv\",\"histograms.csv\",\"gemm.csv\","
                         "\"run.json\"]");
  free(outs);
  json_decref(j);
  /* the rowwise steps.csv row of X: one block (one row), scale 2^7, 1.0625 -> 1 */
  p = path_in("out/steps.csv");
  csv = tu_read_file(p, NULL);
  free(p);
  char *r = find_row(csv, "l.input,input,0,row,rowwise,e4m3,,,,2,,");
  ck_assert_ptr_nonnull(r);
  double snr = 10.0 * log10((1.0625 * 1.0625 + 4.0) / (0.0625 * 0.0625));
  snprintf(expect, sizeof expect, "l.input,input,0,row,rowwise,e4m3,,,,2,,2,0,0,0,0,0,%.9g,%.9g,1,0,7,7,0",
           0.0625 * 0.0625 / 2.0, snr);
  /* the one block: amax 2 at scale 128 is 256, log2(256/448) binades; xhat = {1, 2} */
  float xq[2] = {1.0f, 2.0f};
  cut_tail(r, 0, log2(256.0 / 448.0), cos_of(x, xq, 2), 1);
  ck_assert_str_eq(r, expect);
  free(r);
  free(csv);
  /* gemm = false: no gemm.csv */
  write_text("g2.ini", "[trace]\npath = trace\n[recipe.d]\nkind = delayed\n[analysis]\ngemm = false\n"
                       "[output]\ndir = out2\n");
  ck_assert_int_eq(run_cli(&out, "run g2.ini --quiet --no-report"), 0);
  free(out);
  p = path_in("out2/gemm.csv");
  struct stat sb;
  ck_assert_int_ne(stat(p, &sb), 0);
  free(p);
}
END_TEST

/* A primary engine that declines what the GPU engine declines (the block kinds, and the GEMMs
 * of format = e5m2, which have no cuBLASLt kernel): the CPU engine made with only the
 * per-tensor configurations active, behind a supports() that says so. The runner's composite
 * engine must then send the rest to its CPU engine, with the scales of the primary's casts for
 * the GEMMs; the files must not change. The mask is static: plans borrow their arrays. */
static unsigned char g_active[FP8_EXPERIMENT_MAX_CONFIGS];
static const fp8_config *g_configs;
static fp8_engine_ops g_declining_ops;
static int (*g_sim_supports)(const fp8_engine *, fp8_engine_op, size_t);

static int declining_supports(const fp8_engine *e, fp8_engine_op op, size_t c) {
  if (!g_active[c]) return 0;
  if (op == FP8_OP_GEMM && g_configs[c].format == FP8_SEL_E5M2) return 0;
  return g_sim_supports(e, op, c);
}

static int declining_create(const fp8_engine_plan *plan, fp8_engine **out, char *err,
                            size_t errlen) {
  fp8_engine_plan p = *plan;
  for (size_t c = 0; c < plan->nconfigs; c++)
    g_active[c] = !fp8_recipe_kind_is_block(plan->configs[c].kind);
  g_configs = plan->configs;
  p.active = g_active;
  int rc = fp8_engine_sim_create(&p, out, err, errlen);
  if (rc) return rc;
  g_declining_ops = *(*out)->ops;
  g_sim_supports = g_declining_ops.supports;
  g_declining_ops.supports = declining_supports;
  (*out)->ops = &g_declining_ops;
  snprintf((*out)->name, sizeof (*out)->name, "declining");
  return FP8_OK;
}

/* Runs experiment `ini` (relative to the test directory) through the library on the declining
 * engine (the path a GPU run takes: per-op fallback to the CPU engine), into out_dir. */
static void run_declining_engine(const char *ini, const char *out_dir) {
  char *path = path_in(ini), err[FP8_ERRLEN];
  fp8_experiment ex;
  ck_assert_int_eq(fp8_experiment_load(path, &ex, err, sizeof err), FP8_OK);
  fp8_run_options opt = {.out_dir = out_dir, .threads = 1, .quiet = 1, .engine = declining_create};
  fp8_run_summary sum;
  int rc = fp8_run_experiment(&ex, &opt, &sum, err, sizeof err);
  ck_assert_msg(rc == FP8_OK, "%s", err);
  ck_assert_str_eq(sum.engine, "declining");
  fp8_experiment_free(&ex);
  free(path);
}

/* The row writers build lines in a buffer: a steps.csv row with a tensor name longer than the
 * buffer, and numbers of every kind (inf, nan, integers, %.9g), written twice so that the
 * memo of formatted numbers answers the second time, against the text fprintf writes. */
/* fp8_num_text against printf's "%.9g" (plus nan / inf / -inf), byte for byte: random bit
 * patterns over the whole double range (subnormals included), float32 values widened (what
 * amaxes and scales are), decimal ties at the ninth digit (exact in binary: printf rounds them
 * to even), values next to powers of ten and to 999999999.5 times one, and the extremes. */
static uint64_t nt_state = 0x243F6A8885A308D3ull;
static uint64_t nt_rnd(void) {
  nt_state ^= nt_state >> 12;
  nt_state ^= nt_state << 25;
  nt_state ^= nt_state >> 27;
  return nt_state * 0x2545F4914F6CDD1Dull;
}

static void nt_check(double v, long *n) {
  char a[FP8_NUM_TEXT_MAX], b[64];
  int k = fp8_num_text(v, a);
  if (isnan(v)) snprintf(b, sizeof b, "nan");
  else if (isinf(v)) snprintf(b, sizeof b, v > 0 ? "inf" : "-inf");
  else snprintf(b, sizeof b, "%.9g", v);
  ck_assert_msg(strcmp(a, b) == 0 && k == (int)strlen(b), "%a: got %s, printf %s", v, a, b);
  (*n)++;
}

START_TEST(test_num_text_matches_printf) {
  long n = 0;
  for (int i = 0; i < 200000; i++) {
    uint64_t u = nt_rnd();
    double v;
    memcpy(&v, &u, sizeof v);
    nt_check(v, &n);
    uint32_t fu = (uint32_t)(u >> 32);
    float f;
    memcpy(&f, &fu, sizeof f);
    nt_check((double)f, &n);
    /* a nine-digit tie: (m + 0.5) 10^j for j >= 0 is exact when it fits 53 bits */
    int64_t m = 100000000 + (int64_t)(u % 900000000);
    nt_check(((double)m + 0.5) * (double)(1 << (i % 8)) / (double)(1 << (i % 8)), &n);
    nt_check((double)(m * 10 + 5) * (i % 2 ? 1.0 : -1.0), &n);
    nt_check((double)m * 1e-30 + (double)(u % 7), &n);
  }
  for (int e = -330; e <= 310; e++) {
    double p = pow(10.0, e);
    nt_check(p, &n);
    nt_check(nextafter(p, 0), &n);
    nt_check(nextafter(p, INFINITY), &n);
    nt_check(9.999999995 * p, &n);
    nt_check(nextafter(9.999999995 * p, 0), &n);
    nt_check(nextafter(9.999999995 * p, INFINITY), &n);
    nt_check(-1.23456789e-5 * p, &n);
  }
  const double edge[] = {0.0, -0.0, 1.0, -1.0, 0.5, 1e-4, 9.99999999e-5, 1e-5, 123456789.0,
                         999999999.0, 999999999.5, 1e9, 4.9406564584124654e-324, DBL_MIN,
                         DBL_MAX, -DBL_MAX, 448.0, 57344.0, 3.4028234663852886e38, 0.1, NAN,
                         -NAN, INFINITY, -INFINITY};
  for (size_t i = 0; i < sizeof edge / sizeof *edge; i++) nt_check(edge[i], &n);
  printf("num_text: %ld values match printf\n", n);
}
END_TEST

START_TEST(test_results_rows_by_printf) {
  static char name[3001];
  memset(name, 'a', 3000);
  name[3000] = 0;
  fp8_config cf = {.kind = FP8_KIND_DELAYED, .format = FP8_SEL_HYBRID, .history_len = 16,
                   .margin = -1, .amax_compute = FP8_AMAX_MOST_RECENT};
  strcpy(cf.label, "d");
  fp8_stats st = {.n = 12345678901LL, .nonfinite = 3, .zeros = 0, .overflow = 17,
                  .underflow = 9, .subnormal = 1, .sum_sq_err = 0.1, .sum_sq = 1e30};
  float amaxes[3] = {1832.12f, INFINITY, 448.0f};
  for (int k = 0; k < 6; k++) {
    fp8_steps_row r = {.tensor = k % 2 ? name : "x.input", .role = FP8_ROLE_INPUT, .step = 1234,
                       .config = &cf, .format = FP8_E4M3, .amax = amaxes[k % 3],
                       .scale = k == 2 ? NAN : 0.244140625f, .stats = &st};
    char *got = NULL, *want = NULL;
    size_t gl = 0, wl = 0;
    FILE *g = open_memstream(&got, &gl), *w = open_memstream(&want, &wl);
    fp8_results_put_steps_row(g, &r);
    fprintf(w, "%s,input,1234,d,delayed,e4m3,16,-1,most_recent,", r.tensor);
    fp8_csv_put_num(w, r.amax);
    fputc(',', w);
    fp8_csv_put_num(w, r.scale);
    fprintf(w, ",12345678901,3,0,17,9,1,");
    fp8_csv_put_num(w, fp8_stats_mse(&st));
    fputc(',', w);
    fp8_csv_put_num(w, fp8_stats_snr_db(&st));
    /* clipped 0; overshoot log2(amax scale / 448); cosine 0: sum xhat^2 is 0 and sum x^2 is
     * not; warm-up 0 */
    fputs(",,,,,,0,", w);
    fp8_csv_put_num(w, log2((double)r.amax * (double)r.scale / 448.0));
    fputs(",0,0,,\n", w);
    fclose(g);
    fclose(w);
    ck_assert_msg(gl == wl && memcmp(got, want, gl) == 0, "row %d:\n got  %.200s\n want %.200s", k,
                  got, want);
    free(got);
    free(want);
  }
}
END_TEST

/* stream.csv's rows of one tensor at once (fp8_results_put_stream_rows) against each row
 * written by hand with fprintf and fp8_csv_put_num: 20 configurations (more distinct scales
 * than the writer remembers, two sharing a scale, three left out, both formats, the longest
 * label), names short and too long for the fast path, te_scale given and not, amax 0, inf and
 * finite. */
START_TEST(test_stream_rows_by_printf) {
  enum { NC = 20 };
  static char name[3001];
  memset(name, 'n', 3000);
  name[3000] = 0;
  static fp8_config cf[NC];
  fp8_format fmt[NC];
  float sc[NC];
  unsigned char want[NC];
  for (int c = 0; c < NC; c++) {
    cf[c] = (fp8_config){.kind = FP8_KIND_DELAYED, .format = FP8_SEL_HYBRID,
                         .history_len = 1 << (c % 11), .margin = c % 3 - 1,
                         .amax_compute = c % 2 ? FP8_AMAX_MOST_RECENT : FP8_AMAX_MAX};
    if (c == 7) { /* the longest label */
      memset(cf[c].label, 'L', sizeof cf[c].label - 1);
      cf[c].label[sizeof cf[c].label - 1] = 0;
    } else {
      snprintf(cf[c].label, sizeof cf[c].label, "cfg%d", c);
    }
    fmt[c] = c % 4 == 3 ? FP8_E5M2 : FP8_E4M3;
    sc[c] = c == 12 || c == 15 ? sc[4] : ldexpf(1.0f + c / 32.0f, c - 8); /* 15: e5m2 */
    want[c] = c % 9 != 5;
  }
  const float amaxes[3] = {3.25f, 0.0f, INFINITY};
  fp8_stream_texts *texts = fp8_stream_texts_new();
  ck_assert_ptr_nonnull(texts);
  for (int k = 0; k < 6; k++) {
    fp8_stream_row base = {.tensor = k == 5 ? name : "layers.0.fc1.input", .role = FP8_ROLE_INPUT,
                           .step = 70000 + k, .snapshot = k % 2, .amax = amaxes[k % 3],
                           .warmup = k == 1, .micro = k == 4 ? 3 : 0,
                           .te_scale = k % 2 ? 0.0f : 0.125f * (k + 1)};
    char *got = NULL, *exp = NULL;
    size_t gl = 0, el = 0;
    FILE *g = open_memstream(&got, &gl), *w = open_memstream(&exp, &el);
    /* with a table of the configurations' columns (filled by the first case), and without */
    fp8_results_put_stream_rows(g, &base, cf, fmt, sc, want, NC, k % 2 ? NULL : texts);
    for (int c = 0; c < NC; c++) {
      if (!want[c]) continue;
      fprintf(w, "%s,input,%lld,%s,%s,%lld,%d,%s,%d,", base.tensor, (long long)base.step,
              cf[c].label, fmt[c] == FP8_E5M2 ? "e5m2" : "e4m3", (long long)cf[c].history_len,
              cf[c].margin, c % 2 ? "most_recent" : "max", base.snapshot);
      fp8_csv_put_num(w, base.amax);
      fputc(',', w);
      fp8_csv_put_num(w, sc[c]);
      fputc(',', w);
      double mx = fmt[c] == FP8_E5M2 ? 57344.0 : 448.0;
      fp8_csv_put_num(w, base.amax > 0 ? log2((double)base.amax * (double)sc[c] / mx) : -INFINITY);
      fprintf(w, ",%d,%lld,", base.warmup, (long long)base.micro);
      if (base.te_scale > 0) fp8_csv_put_num(w, base.te_scale);
      fputc('\n', w);
    }
    fclose(g);
    fclose(w);
    ck_assert_msg(gl == el && memcmp(got, exp, gl) == 0, "case %d (%zu vs %zu bytes):\n got  %.300s\n want %.300s",
                  k, gl, el, got, exp);
    free(got);
    free(exp);
  }
  fp8_stream_texts_free(texts);
}
END_TEST

/* The fallback path (the one a GPU run takes): an engine that declines the block kinds leaves
 * them to the composite's CPU engine; the files are those of a plain CPU run. */
START_TEST(test_engine_path_same_output) {
  write_tiny_trace();
  write_text("exp.ini", "[trace]\npath = trace\n[recipe.d]\nkind = delayed\nhistory_len = 1, 2\n"
                        "[recipe.c]\nkind = current\n[recipe.mx]\nkind = mxfp8\n[output]\ndir = out\n");
  char *out;
  ck_assert_int_eq(run_cli(&out, "run exp.ini --quiet --no-report --out direct"), 0);
  free(out);
  char *od = path_in("viaengine");
  run_declining_engine("exp.ini", od);
  const char *files[] = {"steps.csv", "summary.csv", "histograms.csv"};
  for (int i = 0; i < 3; i++) {
    char a[4096], b[4096];
    snprintf(a, sizeof a, "%s/direct/%s", g_dir, files[i]);
    snprintf(b, sizeof b, "%s/%s", od, files[i]);
    char *ca = tu_read_file(a, NULL), *cb = tu_read_file(b, NULL);
    ck_assert_ptr_nonnull(ca);
    ck_assert_ptr_nonnull(cb);
    ck_assert_msg(strcmp(ca, cb) == 0, "%s differs", files[i]);
    free(ca);
    free(cb);
  }
  free(od);
}
END_TEST

/* GEMM errors through the fallback: the declining engine runs the GEMMs of the per-tensor
 * configurations and, like the GPU (no cuBLASLt E5M2 x E5M2 kernel), declines those of
 * format = e5m2 and of the block kinds, which the composite's CPU engine computes with the
 * scales of the primary's casts: gemm.csv is byte-identical to a plain CPU run's, and run.json
 * lists those configurations. */
START_TEST(test_engine_gemm_same_output) {
  char *out;
  ck_assert_int_eq(run_cli(&out, "synth llm trace --steps 4 --seed 3"), 0);
  free(out);
  write_text("exp.ini", "[trace]\npath = trace\n[recipe.d]\nkind = delayed\nhistory_len = 1, 4\n"
                        "format = hybrid\n[recipe.d5]\nkind = delayed\nhistory_len = 1, 4\nformat = e5m2\n"
                        "[recipe.c]\nkind = current\nformat = e4m3, e5m2\n"
                        "[recipe.mx]\nkind = mxfp8\n[analysis]\ngemm = true\ngemm_max_tokens = 24\n"
                        "[output]\ndir = out\n");
  ck_assert_int_eq(run_cli(&out, "run exp.ini --quiet --no-report --out direct"), 0);
  free(out);
  char *od = path_in("viaengine");
  run_declining_engine("exp.ini", od);
  char a[4096], b[4096];
  snprintf(a, sizeof a, "%s/direct/gemm.csv", g_dir);
  snprintf(b, sizeof b, "%s/gemm.csv", od);
  char *ca = tu_read_file(a, NULL), *cb = tu_read_file(b, NULL);
  ck_assert_ptr_nonnull(ca);
  ck_assert_ptr_nonnull(cb);
  ck_assert_msg(count_lines(ca) > 100, "only %d gemm.csv lines", count_lines(ca));
  ck_assert_msg(strcmp(ca, cb) == 0, "gemm.csv differs through the fallback");
  free(ca);
  free(cb);
  /* run.json names what the composite ran on its CPU engine: the casts of the block kinds, the
   * GEMMs of those and of format = e5m2 (the declining engine's rules, worked out here from the
   * experiment), as "<label> #<index>" */
  char *ini = path_in("exp.ini"), err[FP8_ERRLEN];
  fp8_experiment ex;
  ck_assert_int_eq(fp8_experiment_load(ini, &ex, err, sizeof err), FP8_OK);
  free(ini);
  snprintf(b, sizeof b, "%s/run.json", od);
  json_error_t jerr;
  json_t *j = json_load_file(b, 0, &jerr);
  ck_assert_ptr_nonnull(j);
  json_t *det = json_object_get(j, "engine_details");
  json_t *lists[2] = {json_object_get(det, "cpu_quantize_configurations"),
                      json_object_get(det, "cpu_gemm_configurations")};
  size_t n[2] = {0, 0};
  for (size_t c = 0; c < ex.nconfigs; c++) {
    int blk = fp8_recipe_kind_is_block(ex.configs[c].kind);
    int want[2] = {blk, blk || ex.configs[c].format == FP8_SEL_E5M2};
    char label[160];
    snprintf(label, sizeof label, "%s #%zu", ex.configs[c].label, c);
    for (int k = 0; k < 2; k++) {
      if (!want[k]) continue;
      const char *got = json_string_value(json_array_get(lists[k], n[k]++));
      ck_assert_msg(got && strcmp(got, label) == 0, "run.json list %d entry %zu: %s, expected %s",
                    k, n[k] - 1, got ? got : "(none)", label);
    }
  }
  ck_assert_uint_eq(json_array_size(lists[0]), n[0]);
  ck_assert_uint_eq(json_array_size(lists[1]), n[1]);
  ck_assert_msg(n[0] == 1 && n[1] == 4, "%zu casts and %zu GEMMs on the CPU engine, expected 1 "
                "and 4", n[0], n[1]);
  json_decref(j);
  fp8_experiment_free(&ex);
  free(od);
}
END_TEST

START_TEST(test_threads_same_output) {
  write_tiny_trace();
  write_text("exp.ini", TINY_INI);
  char *out;
  ck_assert_int_eq(run_cli(&out, "run exp.ini --quiet --threads 1 --out o1"), 0);
  free(out);
  ck_assert_int_eq(run_cli(&out, "run exp.ini --quiet --threads 4 --out o4"), 0);
  free(out);
  char *a = path_in("o1/steps.csv"), *b = path_in("o4/steps.csv");
  char *ca = tu_read_file(a, NULL), *cb = tu_read_file(b, NULL);
  ck_assert_str_eq(ca, cb);
  free(a); free(b); free(ca); free(cb);
}
END_TEST

/* GEMM errors do not depend on the worker count or on how the workers interleave: four workers
 * calling the BLAS at once, five times, give the one-worker gemm.csv byte for byte. (A CBLAS
 * that is not safe to call from several threads, such as OpenBLAS's serial build without
 * USE_LOCKING, corrupted one row in about four runs here.) */
START_TEST(test_threads_same_gemm) {
  char *out;
  ck_assert_int_eq(run_cli(&out, "synth llm trace --steps 4 --seed 3"), 0);
  free(out);
  write_text("exp.ini", "[trace]\npath = trace\n[recipe.d]\nkind = delayed\nhistory_len = 1, 4\n"
                        "format = hybrid\n[recipe.d5]\nkind = delayed\nhistory_len = 1, 4\nformat = e5m2\n"
                        "[recipe.c]\nkind = current\n[recipe.mx]\n"
                        "kind = mxfp8\n[analysis]\ngemm = true\ngemm_max_tokens = 24\n"
                        "[output]\ndir = out\n");
  ck_assert_int_eq(run_cli(&out, "run exp.ini --quiet --no-report --threads 1 --out g1"), 0);
  free(out);
  char *a = path_in("g1/gemm.csv"), *ca = tu_read_file(a, NULL);
  ck_assert_ptr_nonnull(ca);
  ck_assert_msg(count_lines(ca) > 100, "only %d gemm.csv lines", count_lines(ca));
  for (int r = 0; r < 5; r++) {
    ck_assert_int_eq(run_cli(&out, "run exp.ini --quiet --no-report --threads 4 --force --out g4"), 0);
    free(out);
    char *b = path_in("g4/gemm.csv"), *cb = tu_read_file(b, NULL);
    ck_assert_ptr_nonnull(cb);
    ck_assert_msg(strcmp(ca, cb) == 0, "run %d: gemm.csv with 4 workers differs from 1 worker's", r);
    free(b);
    free(cb);
  }
  free(a);
  free(ca);
}
END_TEST

START_TEST(test_output_dir_rules) {
  write_tiny_trace();
  write_text("exp.ini", TINY_INI);
  char *od = path_in("out");
  mkdir(od, 0777);
  free(od);
  write_text("out/precious.txt", "keep me");
  char *out;
  int rc = run_cli(&out, "run exp.ini --quiet");
  ck_assert_int_eq(rc, 2);
  ck_assert_msg(strstr(out, "out: output directory is not empty") != NULL, "%s", out);
  ck_assert_int_eq(count_lines(out), 1);
  free(out);
  char *p = path_in("out/steps.csv");
  struct stat sb;
  ck_assert_int_ne(stat(p, &sb), 0); /* nothing written */
  ck_assert_int_eq(run_cli(&out, "run exp.ini --quiet --force"), 0);
  free(out);
  ck_assert_int_eq(stat(p, &sb), 0);
  free(p);
  p = path_in("out/precious.txt");
  char *keep = tu_read_file(p, NULL);
  ck_assert_str_eq(keep, "keep me");
  free(keep);
  free(p);
  /* an output directory that cannot be created (a file is in the way) */
  write_text("afile", "x");
  rc = run_cli(&out, "run exp.ini --quiet --out afile/sub");
  ck_assert_int_eq(rc, 2);
  ck_assert_msg(strstr(out, "afile/sub") != NULL && count_lines(out) == 1, "%s", out);
  free(out);
}
END_TEST

START_TEST(test_bad_inputs) {
  write_tiny_trace();
  char *out;
  /* missing experiment file */
  ck_assert_int_eq(run_cli(&out, "run nope.ini"), 2);
  ck_assert_msg(strstr(out, "nope.ini") != NULL, "%s", out);
  free(out);
  /* bad INI line: file:line */
  write_text("bad.ini", "[trace]\npath = trace\n[recipe.x]\nkind = delayed\nhistory_len = 0\n");
  ck_assert_int_eq(run_cli(&out, "run bad.ini --out o"), 2);
  ck_assert_msg(strstr(out, "bad.ini:5:") != NULL && count_lines(out) == 1, "%s", out);
  free(out);
  /* unknown role with hybrid: names the tensor */
  write_text("trace/amax.csv", "step,tensor,amax\n1,m.input,8\n1,m.bias,3\n");
  write_text("exp.ini", TINY_INI);
  ck_assert_int_eq(run_cli(&out, "run exp.ini --out o2"), 2);
  /* at the line of the section whose hybrid (here its default) needs the role */
  ck_assert_str_eq(out, "fp8lab: exp.ini:3: tensor m.bias: role 'bias' is not one of input, weight, "
                        "output, grad_output, grad_input; [recipe.d] uses format = hybrid, which needs "
                        "a role (set format = e4m3 or e5m2, or leave the tensor out with [trace] "
                        "tensors)\n");
  free(out);
  /* ... or of its format key */
  write_text("h.ini", "[trace]\npath = trace\n[recipe.x]\nkind = delayed\nformat = e4m3\n"
                      "[recipe.y]\nkind = current\n\nformat = hybrid\n");
  ck_assert_int_eq(run_cli(&out, "run h.ini --out o2"), 2);
  ck_assert_msg(strncmp(out, "fp8lab: h.ini:9: tensor m.bias: role 'bias' ", 44) == 0 &&
                strstr(out, "[recipe.y] uses format = hybrid") && count_lines(out) == 1, "%s", out);
  free(out);
  /* a tensors selection that matches nothing: at its line */
  write_text("t.ini", "[trace]\npath = trace\ntensors = zzz*, *.weight\n[recipe.x]\nkind = delayed\n");
  ck_assert_int_eq(run_cli(&out, "run t.ini --out o2"), 2);
  ck_assert_str_eq(out, "fp8lab: t.ini:3: tensors = zzz*, *.weight selects none of the tensors of "
                        "the trace trace\n");
  free(out);
  char *p = path_in("o2");
  struct stat sb;
  ck_assert_int_ne(stat(p, &sb), 0); /* no output folder */
  free(p);
  /* ... fine with an explicit format */
  write_text("e4.ini", "[trace]\npath = trace\n[recipe.x]\nkind = delayed\nformat = e4m3\n");
  ck_assert_int_eq(run_cli(&out, "run e4.ini --quiet --out o3"), 0);
  free(out);
  /* a truncated snapshot: names the file */
  write_text("trace/amax.csv", "step,tensor,amax\n");
  write_text("trace/step_7.safetensors", "\x40\x00\x00\x00\x00\x00\x00\x00{\"a.input\":");
  ck_assert_int_eq(run_cli(&out, "run exp.ini --out o4"), 2);
  ck_assert_msg(strstr(out, "step_7.safetensors") != NULL && count_lines(out) == 1, "%s", out);
  free(out);
  p = path_in("o4");
  ck_assert_int_ne(stat(p, &sb), 0);
  free(p);
  /* unknown synth preset */
  write_text("s.ini", "[trace]\npath = synth:gpt9\n[recipe.x]\nkind = current\n");
  ck_assert_int_eq(run_cli(&out, "run s.ini --out o5"), 2);
  ck_assert_msg(strstr(out, "gpt9") != NULL, "%s", out);
  free(out);
  /* usage errors */
  ck_assert_int_eq(run_cli(&out, "frobnicate"), 2);
  free(out);
  ck_assert_int_eq(run_cli(&out, "run exp.ini --threads zero"), 2);
  free(out);
  ck_assert_int_eq(run_cli(&out, "run"), 2);
  free(out);
}
END_TEST

/* When amax.csv disagrees with a snapshot the data wins, and one warning line says how often,
 * with the program's prefix like every other line it prints. */
START_TEST(test_amax_mismatch_warning) {
  write_tiny_trace();
  /* the snapshots' amaxes at step 0 are 4 (m.input) and 2 (m.grad_output) */
  write_text("trace/amax.csv", "step,tensor,amax\n0,m.input,5\n1,m.input,8\n");
  write_text("exp.ini", TINY_INI);
  char *out;
  ck_assert_int_eq(run_cli(&out, "run exp.ini --quiet --no-report"), 0);
  ck_assert_str_eq(out, "fp8lab: warning: 1 snapshot amax differs from amax.csv (the snapshot data "
                        "was used)\n");
  free(out);
  write_text("trace/amax.csv", "step,tensor,amax\n0,m.input,5\n0,m.grad_output,3\n");
  ck_assert_int_eq(run_cli(&out, "run exp.ini --quiet --no-report --force"), 0);
  ck_assert_str_eq(out, "fp8lab: warning: 2 snapshot amaxes differ from amax.csv (the snapshot data "
                        "was used)\n");
  free(out);
  char *p = path_in("out/run.json");
  json_error_t jerr;
  json_t *j = json_load_file(p, 0, &jerr);
  free(p);
  ck_assert_int_eq(json_integer_value(json_object_get(j, "amax_csv_mismatches")), 2);
  json_decref(j);
}
END_TEST

/* A [trace] steps selection that holds no snapshot step would give CSVs without a row (and a
 * report that fails on them only after they were written): refused up front at the key's line,
 * like a tensors selection that matches nothing, with and without the report. A selection of
 * amax.csv steps only (step 1) has no row either. */
START_TEST(test_steps_selecting_nothing) {
  write_tiny_trace();
  char *out;
  write_text("s1.ini", "[trace]\npath = trace\nsteps = 5-9\n[recipe.d]\nkind = delayed\n");
  ck_assert_int_eq(run_cli(&out, "run s1.ini --no-report --out o1"), 2);
  ck_assert_str_eq(out, "fp8lab: s1.ini:3: steps = 5-9 selects none of the 2 snapshot steps of "
                        "the trace trace (0..2)\n");
  free(out);
  ck_assert_int_eq(run_cli(&out, "run s1.ini --out o1"), 2);
  ck_assert_str_eq(out, "fp8lab: s1.ini:3: steps = 5-9 selects none of the 2 snapshot steps of "
                        "the trace trace (0..2)\n");
  free(out);
  char *p = path_in("o1");
  struct stat sb;
  ck_assert_int_ne(stat(p, &sb), 0); /* no output folder */
  free(p);
  write_text("s2.ini", "[trace]\npath = trace\n\nsteps = 1-1:4\n[recipe.d]\nkind = delayed\n");
  ck_assert_int_eq(run_cli(&out, "run s2.ini --no-report --out o2"), 2);
  ck_assert_str_eq(out, "fp8lab: s2.ini:4: steps = 1 selects none of the 2 snapshot steps of "
                        "the trace trace (0..2)\n");
  free(out);
  write_text("s3.ini", "[trace]\npath = trace\nsteps = 1-9:2\n[recipe.d]\nkind = delayed\n");
  ck_assert_int_eq(run_cli(&out, "run s3.ini --no-report --out o3"), 2);
  ck_assert_str_eq(out, "fp8lab: s3.ini:3: steps = 1-9:2 selects none of the 2 snapshot steps of "
                        "the trace trace (0..2)\n");
  free(out);
  /* one snapshot step selected is enough */
  write_text("s4.ini", "[trace]\npath = trace\nsteps = 1-2\n[recipe.d]\nkind = delayed\n");
  ck_assert_int_eq(run_cli(&out, "run s4.ini --quiet --no-report --out o4"), 0);
  free(out);
}
END_TEST

/* Runs fp8lab with the temporary file `.<name>.tmp.<pid>` of dir (relative to the test dir) a
 * symlink to /dev/full, where every write fails with ENOSPC as on a full disk: the shell makes
 * the link with its own pid and execs fp8lab, which keeps that pid. */
static int run_disk_full(char **out, const char *dir, const char *name, const char *args) {
  char cmd[8192];
  /* the rows of the step loop are written into the checkpoint folder (.fp8lab-checkpoint/
   * steps.csv, histograms.csv: renamed at the commit), the other files to .<name>.tmp.<pid> */
  int part = strcmp(name, "steps.csv") == 0 || strcmp(name, "histograms.csv") == 0 ||
             strcmp(name, "stream.csv") == 0;
  if (part)
    snprintf(cmd, sizeof cmd, "cd '%s' && mkdir -p %s/.fp8lab-checkpoint && ln -s /dev/full "
             "%s/.fp8lab-checkpoint/%s && exec \"%s\" %s", g_dir, dir, dir, name, tu_bin(), args);
  else
    snprintf(cmd, sizeof cmd, "cd '%s' && mkdir -p %s && sh -c 'ln -s /dev/full %s/.%s.tmp.$$ && "
             "exec \"%s\" %s'", g_dir, dir, dir, name, tu_bin(), args);
  return tu_run(cmd, out);
}

/* An output write that fails mid-run or at its commit (disk full) is a runtime failure: exit 1
 * (README), one line naming the file; the file is not left behind (no temporary, no partial
 * file under its name). Writes of the run (steps.csv through the step loop's check, summary.csv
 * and run.json at the end) and of the report. */
START_TEST(test_write_failure_exit_1) {
  if (access("/dev/full", W_OK) != 0) {
    printf("test_write_failure_exit_1: skipped: no writable /dev/full\n");
    return;
  }
  write_tiny_trace();
  write_text("exp.ini", TINY_INI);
  char *out;
  const char *files[] = {"steps.csv", "summary.csv", "histograms.csv", "run.json", "stream.csv"};
  for (int i = 0; i < 5; i++) {
    char dir[32];
    snprintf(dir, sizeof dir, "full%d", i);
    char args[128];
    snprintf(args, sizeof args, "run exp.ini --quiet --force --no-report --out %s", dir);
    int rc = run_disk_full(&out, dir, files[i], args);
    char want[256];
    snprintf(want, sizeof want, "fp8lab: %s/%s: write failed: No space left on device\n", dir, files[i]);
    ck_assert_msg(rc == 1, "%s: exit %d: %s", files[i], rc, out);
    ck_assert_str_eq(out, want);
    free(out);
    char rel[64];
    snprintf(rel, sizeof rel, "%s/%s", dir, files[i]);
    char *p = path_in(rel);
    struct stat sb;
    ck_assert_msg(lstat(p, &sb) != 0, "%s left behind", rel);
    free(p);
  }
  /* mid-run: a steps.csv larger than the stdio buffer fails in the step loop */
  ck_assert_int_eq(run_cli(&out, "synth llm big --steps 6 --seed 2"), 0);
  free(out);
  write_text("big.ini", "[trace]\npath = big\n[recipe.d]\nkind = delayed\nhistory_len = 1, 2, 4, 8\n"
                        "margin = 0, 1\n[analysis]\ngemm = false\n");
  int rc = run_disk_full(&out, "fullbig", "steps.csv", "run big.ini --quiet --force --no-report --out fullbig");
  ck_assert_msg(rc == 1, "exit %d: %s", rc, out);
  ck_assert_str_eq(out, "fp8lab: fullbig/steps.csv: write failed: No space left on device\n");
  free(out);
  /* mid-run in stream.csv's writer thread (its rows outgrow the stdio buffer at the first
   * step): the step loop's check, or the drain before a checkpoint, says so */
  rc = run_disk_full(&out, "fullbig2", "stream.csv",
                     "run big.ini --quiet --force --no-report --checkpoint-interval 0 --out fullbig2");
  ck_assert_msg(rc == 1, "exit %d: %s", rc, out);
  ck_assert_str_eq(out, "fp8lab: fullbig2/stream.csv: write failed: No space left on device\n");
  free(out);
  char *left = path_in("fullbig2/stream.csv");
  ck_assert_msg(access(left, F_OK) != 0, "fullbig2/stream.csv left behind");
  free(left);
  /* the report's files */
  ck_assert_int_eq(run_cli(&out, "run exp.ini --quiet --no-report --out rep"), 0);
  free(out);
  rc = run_disk_full(&out, "rep", "analysis.csv", "report rep --quiet");
  ck_assert_msg(rc == 1, "exit %d: %s", rc, out);
  ck_assert_str_eq(out, "fp8lab: report: rep/analysis.csv: write failed: No space left on device\n");
  free(out);
  rc = run_disk_full(&out, "rep", "report.md", "report rep --quiet");
  ck_assert_msg(rc == 1, "exit %d: %s", rc, out);
  ck_assert_str_eq(out, "fp8lab: report: rep/report.md: write failed: No space left on device\n");
  free(out);
  /* fp8lab synth: its amax.csv (temporary amax.csv.tmp.<pid>) */
  char cmd[8192];
  snprintf(cmd, sizeof cmd, "cd '%s' && mkdir syn && sh -c 'ln -s /dev/full syn/amax.csv.tmp.$$ && "
           "exec \"%s\" synth llm syn --steps 2'", g_dir, tu_bin());
  rc = tu_run(cmd, &out);
  ck_assert_msg(rc == 1, "exit %d: %s", rc, out);
  ck_assert_msg(strncmp(out, "fp8lab: syn/amax.csv.tmp.", 25) == 0 && count_lines(out) == 1 &&
                strstr(out, ": write failed: No space left on device\n") != NULL, "%s", out);
  free(out);
}
END_TEST

START_TEST(test_help_version_synth_inspect) {
  char *out;
  ck_assert_int_eq(run_cli(&out, "--version"), 0);
  ck_assert_msg(strstr(out, "fp8lab " FP8LAB_VERSION) != NULL, "%s", out);
  free(out);
  ck_assert_int_eq(run_cli(&out, "--help"), 0);
  ck_assert(strstr(out, "run EXP.ini") != NULL);
  free(out);
  ck_assert_int_eq(run_cli(&out, "run --help"), 0);
  ck_assert(strstr(out, "--threads") != NULL);
  /* every file a run writes, the report's included */
  const char *outputs[] = {"steps.csv", "stream.csv", "summary.csv", "histograms.csv", "gemm.csv", "run.json",
                           "analysis.csv", "recommendations.csv", "report.md",
                           "notebooks_export/<experiment>.ipynb", "plots/"};
  for (size_t i = 0; i < sizeof outputs / sizeof *outputs; i++)
    ck_assert_msg(strstr(out, outputs[i]) != NULL, "run --help does not name %s:\n%s", outputs[i], out);
  free(out);
  ck_assert_int_eq(run_cli(&out, "synth llm st --steps 12 --seed 3"), 0);
  free(out);
  ck_assert_int_eq(run_cli(&out, "inspect st"), 0);
  ck_assert_msg(strstr(out, "layers.0.fc1.input") != NULL && strstr(out, "BF16") != NULL, "%s", out);
  free(out);
  ck_assert_int_eq(run_cli(&out, "inspect does-not-exist"), 2);
  ck_assert(strstr(out, "does-not-exist") != NULL);
  free(out);
  ck_assert_int_eq(run_cli(&out, "synth nope st2"), 2);
  free(out);
  /* synth into a folder that holds a trace: refused without --force (the two would mix),
   * with --force its trace files are replaced and nothing else there is touched */
  write_text("st/notes.txt", "keep");
  ck_assert_int_eq(run_cli(&out, "synth llm st --steps 40"), 2);
  ck_assert_str_eq(out, "fp8lab: st: already holds a trace (12 snapshots and amax.csv): a new one "
                        "would mix with it (use --force to replace its files)\n");
  free(out);
  ck_assert_int_eq(run_cli(&out, "synth llm st --steps 40 --force"), 0);
  free(out);
  ck_assert_int_eq(run_cli(&out, "inspect st"), 0);
  ck_assert_msg(strstr(out, "20 snapshot steps (0..38)") != NULL, "%s", out);
  free(out);
  char *kp = path_in("st/notes.txt"), *keep = tu_read_file(kp, NULL);
  ck_assert_str_eq(keep, "keep");
  free(keep);
  free(kp);
  ck_assert_int_eq(run_cli(&out, "synth --help"), 0);
  ck_assert(strstr(out, "--force") != NULL);
  free(out);
}
END_TEST

/* ------------------------------------------------------------------ tensors that never ran */

/* A trace with tensors that never ran (issue 17: a hook on a module the model never calls
 * writes amax 0 at every step and no snapshot). Snapshots at steps 0 and 2, amax.csv 0..3:
 *   m.input        data 4 (step 0), csv 8 (1), data 100 (2), csv 0 (3): steps 0 1 2 3, one 0
 *   m.grad_output  data 2 (0), csv 0 (1), data all zero (2, csv 0 too): steps 0 1 2, two 0s
 *   a..d.input     csv 0 at steps 0..3, no snapshot: never ran
 *   x.input        csv 8 (1), csv 0 (2, 3), no snapshot: ran, but only amax.csv has it */
static void write_never_ran_trace(void) {
  char *tdir = path_in("lo");
  mkdir(tdir, 0777);
  free(tdir);
  float in0[4] = {1.0f, 2.0f, -4.0f, 0.5f};
  float in2[4] = {100.0f, -3.0f, 0.0f, 0x1p-12f};
  uint16_t g0[2] = {0x3F80, 0xC000}; /* bf16 1.0, -2.0 */
  uint16_t g2[2] = {0x0000, 0x8000}; /* 0, -0 */
  char err[FP8_ERRLEN];
  fp8_tensor_out t0[2] = {{"m.input", FP8_DTYPE_F32, 1, {4}, in0}, {"m.grad_output", FP8_DTYPE_BF16, 1, {2}, g0}};
  fp8_tensor_out t2[2] = {{"m.input", FP8_DTYPE_F32, 1, {4}, in2}, {"m.grad_output", FP8_DTYPE_BF16, 1, {2}, g2}};
  char *p0 = path_in("lo/step_0.safetensors"), *p2 = path_in("lo/step_2.safetensors");
  ck_assert_int_eq(fp8_safetensors_write(p0, t0, 2, NULL, err, sizeof err), FP8_OK);
  ck_assert_int_eq(fp8_safetensors_write(p2, t2, 2, NULL, err, sizeof err), FP8_OK);
  free(p0);
  free(p2);
  char csv[2048];
  int o = snprintf(csv, sizeof csv, "step,tensor,amax\n0,m.input,4\n1,m.input,8\n3,m.input,0\n"
                                    "1,m.grad_output,0\n2,m.grad_output,0\n1,x.input,8\n2,x.input,0\n"
                                    "3,x.input,0\n");
  for (int st = 0; st < 4; st++)
    for (const char *t = "abcd"; *t; t++) o += snprintf(csv + o, sizeof csv - (size_t)o, "%d,%c.input,0\n", st, *t);
  write_text("lo/amax.csv", csv);
}

/* The line of out that starts with name and a blank (malloc'ed, without its newline). */
static char *line_of_tensor(const char *out, const char *name) {
  char prefix[128];
  snprintf(prefix, sizeof prefix, "%s ", name);
  char *l = find_row(out, prefix);
  ck_assert_msg(l != NULL, "no line for %s in:\n%s", name, out);
  return l;
}

/* A line of inspect's table ends with the zero note; its first fields are as counted by hand. */
static void expect_inspect_line(const char *out, const char *name, const char *role,
                                const char *dtype, long long snaps, const char *range,
                                const char *note) {
  char *l = line_of_tensor(out, name);
  char nm[64], rl[64], dt[64], shape[64], steps[64];
  long long sn;
  ck_assert_msg(sscanf(l, "%63s %63s %63s %63s %lld %63s", nm, rl, dt, shape, &sn, steps) == 6, "%s", l);
  ck_assert_str_eq(rl, role);
  ck_assert_str_eq(dt, dtype);
  ck_assert_int_eq(sn, snaps);
  char tail[256];
  snprintf(tail, sizeof tail, " %s%s%s", range, *note ? " " : "", note);
  size_t lt = strlen(tail), ll = strlen(l);
  ck_assert_msg(ll >= lt && strcmp(l + ll - lt, tail) == 0, "line '%s' does not end with '%s'", l, tail);
  free(l);
}

/* advice.ini replays from any working folder (issue 25, points 1-2): its [trace] names the
 * trace by its absolute path (run.json's path is relative to where the run was started, an
 * experiment's paths to the experiment's folder: `fp8lab run advice.ini` exited 2) and carries
 * the run's steps and tensors, and its [analysis] the budgets the advice was derived under, with
 * warm-up and GEMM sampling; the replay's report judges the advice under those budgets and names
 * them. */
/* Field k (0-based) of a CSV row without quoting, copied into buf. */
static const char *csv_field(const char *row, int k, char *buf, size_t n) {
  const char *p = row;
  for (int i = 0; i < k && p; i++) {
    p = strchr(p, ',');
    if (p) p++;
  }
  ck_assert_ptr_nonnull(p);
  size_t len = strcspn(p, ",\n");
  ck_assert_uint_lt(len, n);
  memcpy(buf, p, len);
  buf[len] = 0;
  return buf;
}

static void expect_num(const char *row, int k, const char *what, double want) {
  char b[64];
  double got = strtod(csv_field(row, k, b, sizeof b), NULL);
  ck_assert_msg(got == want || fabs(got - want) <= 1e-8 * fabs(want), "%s: %s, want %.12g in %s",
                what, b, want, row);
}

/* Issue 25 points 10 and 12 by hand. One 1x128 tile of 2^-121 (below 448/FLT_MAX, about
 * 1.3166e-36, so 448/amax overflows float32), once as BF16 (m.grad_output) and once as F32
 * (m.input), E4M3. TE's Float8BlockScaling then scales with the input dtype's largest finite
 * value (recipe_common.cuh compute_scale_from_types):
 *  - BF16, pow2 off: s = 0x1.fep127 = 255 * 2^120. x*s = 255/2 = 127.5, between E4M3's 120 and
 *    128, nearer 128: code 128, nothing saturates (overshoot log2(127.5/448)). 1/s =
 *    2^-128 * (1 + 1/255) is a float32 subnormal (steps of 2^-149): 2^21 + 2^21/255 =
 *    2105376.13 steps rounds to 2^21 + 2^13 + 2^5, i.e. 2^-128 (1 + 2^-8 + 2^-16). xhat = 128
 *    of that = 2^-121 (1 + 2^-8 + 2^-16), error 2^-129 (1 + 2^-8) per element: mse =
 *    2^-258 (1 + 2^-8)^2, SNR 10 log10(2^16 / (1 + 2^-8)^2), log2 scale 120 + log2 255.
 *    (FLT_MAX, the rule before, gives 1/s = 2^-128 exactly and an error of 0.)
 *  - F32, pow2 off: FLT_MAX, x*s = 128 - 2^-17, code 128, 1/s rounds to 2^-128: xhat = x,
 *    mse 0, log2 scale log2(FLT_MAX).
 *  - pow2 on, either dtype: 2^127 (both values truncate to it), x*s = 64 exactly, mse 0.
 *  - amax_epsilon = 1 (block and rowwise; refused for them before): a = 1, s = 448, x*s =
 *    448 * 2^-121 is far below E4M3's smallest subnormal half (2^-10): all 128 codes are 0
 *    (underflow 128), error x: mse 2^-242, overshoot log2(2^-121) = -121. */
START_TEST(test_block_bf16_inf_and_epsilon) {
  char *tdir = path_in("btrace");
  mkdir(tdir, 0777);
  float xf[128];
  uint16_t xb[128];
  for (int i = 0; i < 128; i++) {
    xf[i] = 0x1p-121f;
    xb[i] = 0x0300; /* bf16 2^-121: biased exponent 6, mantissa 0 */
  }
  char err[FP8_ERRLEN];
  fp8_tensor_out t0[2] = {{"m.input", FP8_DTYPE_F32, 2, {1, 128}, xf},
                          {"m.grad_output", FP8_DTYPE_BF16, 2, {1, 128}, xb}};
  char *p0 = path_in("btrace/step_0.safetensors");
  ck_assert_int_eq(fp8_safetensors_write(p0, t0, 2, NULL, err, sizeof err), FP8_OK);
  free(p0);
  free(tdir);
  write_text("b.ini", "[trace]\npath = btrace\n"
                      "[recipe.b]\nkind = block\nformat = e4m3\npow2 = false\n"
                      "[recipe.p]\nkind = block\nformat = e4m3\n"
                      "[recipe.e]\nkind = block\nformat = e4m3\npow2 = false\namax_epsilon = 1\n"
                      "[recipe.r]\nkind = rowwise\nformat = e4m3\npow2 = false\namax_epsilon = 1\n"
                      "[output]\ndir = bout\n");
  char *csv = run_read("run b.ini --quiet", "bout/steps.csv");
  /* columns: n 11, overflow 14, underflow 15, subnormal 16, mse 17, snr_db 18, nblocks 19,
   * blocks_with_overflow 20, log2_scale_min 21, max 22, std 23, clipped 24, overshoot 25 */
  const double bf16_max = 0x1.fep127, mse_b = ldexp((1 + 0x1p-8) * (1 + 0x1p-8), -258);
  struct {
    const char *prefix;
    double underflow, mse, log2s, overshoot;
  } want[] = {
      {"m.grad_output,grad_output,0,b,", 0, mse_b, log2(bf16_max), log2(127.5 / 448)},
      {"m.input,input,0,b,", 0, 0, log2((double)FLT_MAX), log2(0x1p-121 * (double)FLT_MAX / 448)},
      {"m.grad_output,grad_output,0,p,", 0, 0, 127, log2(64.0 / 448)},
      {"m.input,input,0,p,", 0, 0, 127, log2(64.0 / 448)},
      {"m.grad_output,grad_output,0,e,", 128, 0x1p-242, log2(448.0), -121},
      {"m.input,input,0,e,", 128, 0x1p-242, log2(448.0), -121},
      {"m.grad_output,grad_output,0,r,", 128, 0x1p-242, log2(448.0), -121},
      {"m.input,input,0,r,", 128, 0x1p-242, log2(448.0), -121},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    char *row = find_row(csv, want[i].prefix);
    ck_assert_msg(row != NULL, "no row %s in\n%s", want[i].prefix, csv);
    expect_num(row, 11, "n", 128);
    expect_num(row, 14, "overflow", 0);
    expect_num(row, 15, "underflow", want[i].underflow);
    expect_num(row, 16, "subnormal", 0);
    expect_num(row, 17, "mse", want[i].mse);
    expect_num(row, 19, "nblocks", 1);
    expect_num(row, 20, "blocks_with_overflow", 0);
    expect_num(row, 21, "log2_scale_min", want[i].log2s);
    expect_num(row, 22, "log2_scale_max", want[i].log2s);
    expect_num(row, 23, "log2_scale_std", 0);
    expect_num(row, 24, "clipped", 0);
    expect_num(row, 25, "overshoot", want[i].overshoot);
    if (want[i].mse > 0 && want[i].underflow == 0)
      expect_num(row, 18, "snr_db", 10 * log10(0x1p16 / ((1 + 0x1p-8) * (1 + 0x1p-8))));
    free(row);
  }
  free(csv);
}
END_TEST

START_TEST(test_advice_replays_elsewhere) {
  write_tiny_trace();
  write_text("adv.ini", "[trace]\npath = trace\nsteps = 0-2:1\ntensors = m.*\n"
                        "[recipe.d]\nkind = delayed\nhistory_len = 1, 2\n"
                        "[recipe.c]\nkind = current\n"
                        "[analysis]\noverflow_budget = 1e-6\nstep_budget = 0.001\n"
                        "warmup_steps = 1\ngemm_max_tokens = 64\n"
                        "[output]\ndir = advout\n");
  char *out;
  ck_assert_int_eq(run_cli(&out, "run adv.ini --force --quiet"), 0);
  free(out);
  char *p = path_in("advout/advice.ini");
  char *adv = tu_read_file(p, NULL);
  free(p);
  ck_assert_msg(adv != NULL, "the run wrote no advice.ini");
  char *t = path_in("trace"), abs[PATH_MAX], want[PATH_MAX + 128];
  ck_assert_ptr_nonnull(realpath(t, abs));
  free(t);
  snprintf(want, sizeof want, "[trace]\npath = %s\nsteps = 0-2:1\ntensors = m.*\n\n", abs);
  ck_assert_msg(strstr(adv, want) != NULL, "no '%s' in advice.ini:\n%s", want, adv);
  ck_assert_msg(strstr(adv, "\n[analysis]\noverflow_budget = 1e-06\nstep_budget = 0.001\n"
                            "warmup_steps = 1\ngemm = true\ngemm_max_tokens = 64\n") != NULL,
                "advice.ini's [analysis] is not the run's:\n%s", adv);
  free(adv);
  /* from another folder, by a relative path */
  char *d1 = path_in("elsewhere"), *d2 = path_in("elsewhere/deeper");
  mkdir(d1, 0777);
  mkdir(d2, 0777);
  int rc = tu_cli(d2, &out, "run ../../advout/advice.ini --force --quiet");
  ck_assert_msg(rc == 0, "fp8lab run advice.ini from elsewhere/deeper: exit %d:\n%s", rc, out);
  free(out);
  free(d1);
  free(d2);
  p = path_in("advout/advice/report.md");
  char *rep = tu_read_file(p, NULL);
  free(p);
  ck_assert_msg(rep != NULL, "the replay of advice.ini wrote no report");
  ck_assert_msg(strstr(rep, "The mixed recipe **advice**") &&
                    strstr(rep, "within the budgets of this run's [analysis] (overflow_budget "
                                "1e-06 of the values clipped, step_budget 0.001 of the steps"),
                "the confirmation does not name the advice's budgets:\n%s", rep);
  free(rep);
}
END_TEST

/* inspect's columns line up under their headers whatever the names' length (issue 25: a Llama
 * name of 61 characters pushed its row's columns 21 to the right of the header's). */
START_TEST(test_inspect_long_names) {
  const char *longname = "model.layers.0.self_attn.q_proj_with_a_very_long_suffix.input";
  char text[256];
  snprintf(text, sizeof text, "step,tensor,amax\n0,%s,2\n0,l.input,3\n1,l.input,5\n", longname);
  char *tdir = path_in("ln");
  mkdir(tdir, 0777);
  free(tdir);
  write_text("ln/amax.csv", text);
  char *out;
  ck_assert_int_eq(run_cli(&out, "inspect ln"), 0);
  const char *head = strstr(out, "\ntensor ");
  ck_assert_msg(head != NULL, "%s", out);
  head++;
  const char *hend = strchr(head, '\n');
  /* every column's header offset, from the header line */
  const char *cols[] = {"role", "dtype", "shape", "steps", "amax range"};
  size_t at[5];
  for (int k = 0; k < 5; k++) {
    const char *p = strstr(head, cols[k]);
    ck_assert_msg(p && p < hend, "no %s header in %s", cols[k], out);
    at[k] = (size_t)(p - head);
  }
  /* the fields of each row (role input, dtype -, shape -, snapshots 0, steps -, the range)
   * start at those offsets */
  const char *names[2] = {"l.input", longname}, *range[2] = {"3 .. 5", "2 .. 2"};
  for (int i = 0; i < 2; i++) {
    char *l = line_of_tensor(out, names[i]);
    ck_assert_msg(strlen(l) > at[4], "short line '%s'", l);
    const char *want[5] = {"input ", "- ", "- ", "- ", range[i]};
    for (int k = 0; k < 5; k++)
      ck_assert_msg(strncmp(l + at[k], want[k], strlen(want[k])) == 0 && l[at[k] - 1] == ' ',
                    "column %s of '%s' is not at offset %zu, under its header:\n%s", cols[k],
                    names[i], at[k], out);
    free(l);
  }
  free(out);
}
END_TEST

/* inspect tells a tensor that never ran (no snapshot, amax 0 on every amax.csv row) from one
 * skipped at some steps, and counts the steps exactly: a snapshot and an amax.csv row of the
 * same step are one step, the snapshot's amax deciding (was: "(some steps 0: skipped)" for
 * both, counting amax.csv's zeros only). */
START_TEST(test_inspect_never_ran) {
  write_never_ran_trace();
  char *out;
  ck_assert_int_eq(run_cli(&out, "inspect lo"), 0);
  const char *head = "trace lo: 2 snapshot steps (0..2), 24 amax.csv rows (steps 0..3), 7 tensors "
                     "(4 never ran)\n";
  ck_assert_msg(strncmp(out, head, strlen(head)) == 0, "%s", out);
  for (const char *t = "abcd"; *t; t++) {
    char name[16];
    snprintf(name, sizeof name, "%c.input", *t);
    expect_inspect_line(out, name, "input", "-", 0, "-", "never ran (amax 0 on all 4 steps)");
  }
  expect_inspect_line(out, "m.input", "input", "F32", 2, "4 .. 100", "(0 on 1 of 4 steps: skipped there)");
  /* step 2's snapshot is all zero: a zero step, once although amax.csv has a row there too */
  expect_inspect_line(out, "m.grad_output", "grad_output", "BF16", 2, "2 .. 2",
                      "(0 on 2 of 3 steps: skipped there)");
  expect_inspect_line(out, "x.input", "input", "-", 0, "8 .. 8", "(0 on 2 of 3 steps: skipped there)");
  ck_assert_msg(!strstr(out, "some steps 0"), "%s", out);
  free(out);
  /* a tensor without any zero: no note, and no "never ran" count in the header */
  write_text("lo/amax.csv", "step,tensor,amax\n1,m.input,8\n");
  ck_assert_int_eq(run_cli(&out, "inspect lo"), 0);
  ck_assert_msg(strstr(out, ", 2 tensors\n") != NULL, "%s", out);
  expect_inspect_line(out, "m.input", "input", "F32", 2, "4 .. 100", "");
  expect_inspect_line(out, "m.grad_output", "grad_output", "BF16", 2, "2 .. 2", "(0 on 1 of 2 steps: skipped there)");
  free(out);
}
END_TEST

/* run.json's list under key, one name a line ("" when empty); NULL when the key is missing. */
static char *run_json_list(const char *rel, const char *key) {
  char *p = path_in(rel);
  json_error_t jerr;
  json_t *j = json_load_file(p, 0, &jerr);
  free(p);
  ck_assert_msg(j != NULL, "%s: %s", rel, jerr.text);
  json_t *a = json_object_get(j, key);
  char *s = NULL;
  if (json_is_array(a)) {
    s = calloc(1, 4096);
    for (size_t i = 0; i < json_array_size(a); i++) {
      strcat(s, json_string_value(json_array_get(a, i)));
      strcat(s, "\n");
    }
  }
  json_decref(j);
  return s;
}

static void expect_list(const char *rel, const char *key, const char *want) {
  char *got = run_json_list(rel, key);
  ck_assert_msg(got != NULL, "%s: no %s", rel, key);
  ck_assert_str_eq(got, want);
  free(got);
}

/* The lines of out/<file> whose first field is tensor. */
static int rows_of(const char *file, const char *tensor) {
  char *p = path_in(file), *t = tu_read_file(p, NULL);
  free(p);
  ck_assert_ptr_nonnull(t);
  char prefix[64];
  snprintf(prefix, sizeof prefix, "%s,", tensor);
  int n = 0;
  for (const char *l = t; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
    n += strncmp(l, prefix, strlen(prefix)) == 0;
  free(t);
  return n;
}

/* fp8lab run names the tensors it leaves out of the statistics, with the reason, in its
 * summary line (a few, then a count) and in run.json (all); the report names them too. The
 * counts are those of write_never_ran_trace's comment. */
START_TEST(test_run_names_left_out) {
  write_never_ran_trace();
  write_text("lo.ini", "[trace]\npath = lo\n"
                       "[recipe.d]\nkind = delayed\nhistory_len = 1, 2\n"
                       "[recipe.c]\nkind = current\n"
                       "[output]\ndir = out\n");
  char *out;
  int rc = run_cli(&out, "run lo.ini");
  ck_assert_msg(rc == 0, "rc %d: %s", rc, out);
  /* 4 steps (0..3); 2 snapshot steps x 2 tensors x 3 configurations = 12 rows */
  const char *want = "fp8lab: 4 steps, 7 tensors (4 never ran: a.input, b.input, c.input and 1 more; "
                     "1 without a snapshot at a selected step: x.input; left out of statistics), 3 "
                     "configurations: 12 rows in ";
  ck_assert_msg(strncmp(out, want, strlen(want)) == 0, "%s", out);
  free(out);
  expect_list("out/run.json", "tensors_never_ran", "a.input\nb.input\nc.input\nd.input\n");
  expect_list("out/run.json", "tensors_without_snapshot", "x.input\n");
  expect_list("out/run.json", "tensors_without_recipe", "");
  /* where they are: no steps.csv, summary.csv or histograms.csv row; stream.csv has all 4
   * steps under both delayed configurations */
  static const char *const gone[] = {"a.input", "d.input", "x.input"};
  for (int k = 0; k < 3; k++) {
    ck_assert_int_eq(rows_of("out/steps.csv", gone[k]), 0);
    ck_assert_int_eq(rows_of("out/summary.csv", gone[k]), 0);
    ck_assert_int_eq(rows_of("out/histograms.csv", gone[k]), 0);
    ck_assert_int_eq(rows_of("out/stream.csv", gone[k]), 8);
  }
  ck_assert_int_eq(rows_of("out/summary.csv", "m.input"), 3);
  char *p = path_in("out/report.md"), *md = tu_read_file(p, NULL);
  free(p);
  ck_assert_ptr_nonnull(md);
  ck_assert_msg(strstr(md, "2 tensors at 2 snapshot steps (12 rows of steps.csv)") != NULL, "%s", md);
  ck_assert_msg(strstr(md, "\n**Left out of these numbers: 5 tensors** of the replay, without rows "
                           "in steps.csv and summary.csv. Never ran (no snapshot, amax 0 at every "
                           "step of the replay: the module was not called), 4: `a.input`, "
                           "`b.input`, `c.input`, `d.input` (run.json: tensors_never_ran). No "
                           "snapshot at a selected step (a non-zero amax in amax.csv only: "
                           "stream.csv has their steps, the statistics need the data), 1: "
                           "`x.input` (run.json: tensors_without_snapshot).\n") != NULL, "%s", md);
  free(md);

  /* steps = 2: x.input's non-zero amax (step 1) is not selected, only its 0 of step 2: it
   * never ran in this replay of one step */
  write_text("lo2.ini", "[trace]\npath = lo\nsteps = 2\n"
                        "[recipe.d]\nkind = delayed\nhistory_len = 1, 2\n"
                        "[recipe.c]\nkind = current\n"
                        "[output]\ndir = out2\n");
  rc = run_cli(&out, "run lo2.ini --no-report");
  ck_assert_msg(rc == 0, "rc %d: %s", rc, out);
  want = "fp8lab: 1 steps, 7 tensors (5 never ran: a.input, b.input, c.input and 2 more; left out "
         "of statistics), 3 configurations: 6 rows in ";
  ck_assert_msg(strncmp(out, want, strlen(want)) == 0, "%s", out);
  free(out);
  expect_list("out2/run.json", "tensors_never_ran", "a.input\nb.input\nc.input\nd.input\nx.input\n");
  expect_list("out2/run.json", "tensors_without_snapshot", "");

  /* recipe sections for m.* only: the rest is replayed, but no configuration applies to it
   * (m.input 2 steps x 3 configurations, m.grad_output 2 x 2: 10 rows) */
  write_text("lo3.ini", "[trace]\npath = lo\n"
                        "[recipe.d]\nkind = delayed\nhistory_len = 1, 2\ntensors = m.*\n"
                        "[recipe.c]\nkind = current\ntensors = m.input\n"
                        "[output]\ndir = out3\n");
  rc = run_cli(&out, "run lo3.ini --no-report");
  ck_assert_msg(rc == 0, "rc %d: %s", rc, out);
  want = "fp8lab: 4 steps, 7 tensors (5 that no recipe section takes: a.input, b.input, c.input "
         "and 2 more; left out of statistics), 3 configurations: 10 rows in ";
  ck_assert_msg(strncmp(out, want, strlen(want)) == 0, "%s", out);
  free(out);
  expect_list("out3/run.json", "tensors_never_ran", "");
  expect_list("out3/run.json", "tensors_without_recipe", "a.input\nb.input\nc.input\nd.input\nx.input\n");

  /* nothing left out: the summary line as before */
  write_text("lo/amax.csv", "step,tensor,amax\n1,m.input,8\n");
  rc = run_cli(&out, "run lo.ini --force --no-report");
  ck_assert_msg(rc == 0, "rc %d: %s", rc, out);
  want = "fp8lab: 3 steps, 2 tensors, 3 configurations: 12 rows in ";
  ck_assert_msg(strncmp(out, want, strlen(want)) == 0, "%s", out);
  free(out);
  expect_list("out/run.json", "tensors_never_ran", "");
}
END_TEST

/* ------------------------------------------------------------------ multi-rank traces */

static void write_f32_step(const char *rel, const char *name, const float *x, int64_t n) {
  char err[FP8_ERRLEN], *p = path_in(rel);
  fp8_tensor_out t = {name, FP8_DTYPE_F32, 1, {n}, x};
  ck_assert_msg(fp8_safetensors_write(p, &t, 1, NULL, err, sizeof err) == FP8_OK, "%s", err);
  free(p);
}

/* Two ranks of one tensor m.input (E4M3, max 448), snapshots at steps 0 and 3, amax.csv between:
 *          step 0 (data)     step 1 (csv)   step 2 (csv)   step 3 (data)
 *   rank 0 [1, -2]: 2        4              1              [10, 0.25]: 10
 *   rank 1 [100, 0.5]: 100   (no row)       16             [10, -1]: 10
 */
static void write_two_rank_trace(void) {
  char *d = path_in("run");
  mkdir(d, 0777);
  free(d);
  d = path_in("run/rank_0");
  mkdir(d, 0777);
  free(d);
  d = path_in("run/rank_1");
  mkdir(d, 0777);
  free(d);
  static const float a0[2] = {1.0f, -2.0f}, a3[2] = {10.0f, 0.25f};
  static const float b0[2] = {100.0f, 0.5f}, b3[2] = {10.0f, -1.0f};
  write_f32_step("run/rank_0/step_0.safetensors", "m.input", a0, 2);
  write_f32_step("run/rank_0/step_3.safetensors", "m.input", a3, 2);
  write_text("run/rank_0/amax.csv", "step,tensor,amax\n1,m.input,4\n2,m.input,1\n");
  write_f32_step("run/rank_1/step_0.safetensors", "m.input", b0, 2);
  write_f32_step("run/rank_1/step_3.safetensors", "m.input", b3, 2);
  write_text("run/rank_1/amax.csv", "step,tensor,amax\n2,m.input,16\n");
}

static char *read_out(const char *rel) {
  char *p = path_in(rel);
  char *s = tu_read_file(p, NULL);
  free(p);
  ck_assert_msg(s != NULL, "%s missing", rel);
  return s;
}

static void expect_row(const char *csv, const char *prefix) {
  char *r = find_row(csv, prefix);
  ck_assert_msg(r != NULL, "no row starting %s in\n%s", prefix, csv);
  free(r);
}

/* ------------------------------------------------------------------ micro-batches (issue 17) */

/* One stream.csv row of m.input under [recipe.d] (E4M3, history 2, margin 0, max) into b. */
static void micro_row(char *b, size_t n, int64_t step, int snap, float amax, float scale,
                      int warm, int micro, const char *te) {
  char ov[64];
  snprintf(ov, sizeof ov, "%.9g", log2((double)amax * (double)scale / 448.0));
  snprintf(b, n, "m.input,input,%lld,d,e4m3,2,0,max,%d,%.9g,%.9g,%s,%d,%d,%s\n", (long long)step,
           snap, amax, scale, ov, warm, micro, te);
}

/* The trace of the micro-batch tests: a snapshot of m.input at step 2 ([1, -2]: amax 2), and the
 * amax.csv given. */
static void write_micro_trace(const char *csv) {
  char *d = path_in("trace");
  mkdir(d, 0777);
  free(d);
  static const float x2[2] = {1.0f, -2.0f};
  write_f32_step("trace/step_2.safetensors", "m.input", x2, 2);
  write_text("trace/amax.csv", csv);
}

static const char MICRO_INI[] = "[trace]\npath = trace\n[recipe.d]\nkind = delayed\n"
                                "format = e4m3\nhistory_len = 2\n[output]\ndir = out\n";

/* TE updates the delayed history at every micro-batch (RECIPES.md: scale = RN32(448 * 2^-margin
 * / amax_h), amax_h the max of the history of the last 2 non-zero amaxes; scale 1 before any).
 * amax.csv (micro, te_scale): step 0: micro 0 amax 1, micro 1 amax 4; step 1: micro 0 amax 2;
 * step 2: micro 0 amax 8, micro 2 amax 0.5 (no micro 1: not contiguous), snapshot amax 2.
 *   step 0 micro 0: scale 1 (initial; warm-up); fed 1 -> history {1}    -> 448/1 = 448
 *   step 0 micro 1: scale 448 (warm-up ended at micro 0); fed 4 -> {1,4} -> 448/4 = 112
 *   step 1 micro 0: scale 112; fed 2 -> {4,2} -> 448/4 = 112
 *   step 2 micro 0: scale 112; fed 8 (not the snapshot's 2) -> {2,8} -> 448/8 = 56
 *   step 2 micro 2: scale 56; fed 0.5 -> {8,0.5} -> 56
 * The snapshot at step 2 is cast once, with the scale of the step's first micro-batch, 112;
 * amax.csv's max over the step's micro rows (8) differs from its amax (2): one mismatch. */
START_TEST(test_micro_batches_by_hand) {
  write_micro_trace("step,tensor,amax,micro,te_scale\n"
                    "0,m.input,1,0,1\n0,m.input,4,1,448\n1,m.input,2,0,112\n"
                    "2,m.input,8,0,\n2,m.input,0.5,2,56\n");
  write_text("exp.ini", MICRO_INI);
  char *out;
  ck_assert_int_eq(run_cli(&out, "run exp.ini --quiet --no-report"), 0);
  ck_assert_str_eq(out, "fp8lab: warning: 1 snapshot amax differs from amax.csv (the snapshot data "
                        "was used)\n");
  free(out);
  char want[2048], row[256];
  size_t o = (size_t)snprintf(want, sizeof want, "tensor,role,step,recipe,format,history_len,margin,"
                              "amax_compute,snapshot,amax,scale,overshoot,warmup,micro,te_scale\n");
  micro_row(row, sizeof row, 0, 0, 1, 1, 1, 0, "1");
  o += (size_t)snprintf(want + o, sizeof want - o, "%s", row);
  micro_row(row, sizeof row, 0, 0, 4, 448, 0, 1, "448");
  o += (size_t)snprintf(want + o, sizeof want - o, "%s", row);
  micro_row(row, sizeof row, 1, 0, 2, 112, 0, 0, "112");
  o += (size_t)snprintf(want + o, sizeof want - o, "%s", row);
  micro_row(row, sizeof row, 2, 1, 8, 112, 0, 0, "");
  o += (size_t)snprintf(want + o, sizeof want - o, "%s", row);
  micro_row(row, sizeof row, 2, 1, 0.5f, 56, 0, 2, "56");
  snprintf(want + o, sizeof want - o, "%s", row);
  char *stream = read_out("out/stream.csv");
  ck_assert_str_eq(stream, want);
  free(stream);
  /* steps.csv: the snapshot's own amax 2, cast with 112 (2 * 112 = 224 fits) */
  char *steps = read_out("out/steps.csv");
  expect_row(steps, "m.input,input,2,d,delayed,e4m3,2,0,max,2,112,2,0,0,0,0,0,");
  ck_assert_int_eq(count_lines(steps), 2);
  free(steps);
}
END_TEST

/* Without the micro column the replay is the old one: one update per step, and the snapshot's
 * amax replaces amax.csv's. amax.csv: step 0: 4, step 1: 2, step 2: 8 (snapshot: 2), step 3: 1.
 *   step 0: scale 1; fed 4 -> 448/4 = 112
 *   step 1: scale 112; fed 2 -> {4,2} -> 112
 *   step 2: scale 112; fed the snapshot's 2 -> {2,2} -> 224 (not 56: 8 is not fed)
 *   step 3: scale 224
 * A micro column of zeros (one micro-batch per step) and an empty te_scale give byte-identical
 * outputs. */
START_TEST(test_micro_absent_is_old_replay) {
  write_micro_trace("step,tensor,amax\n0,m.input,4\n1,m.input,2\n2,m.input,8\n3,m.input,1\n");
  write_text("exp.ini", MICRO_INI);
  char *out;
  ck_assert_int_eq(run_cli(&out, "run exp.ini --quiet --no-report"), 0);
  free(out);
  char want[2048], row[256];
  size_t o = (size_t)snprintf(want, sizeof want, "tensor,role,step,recipe,format,history_len,margin,"
                              "amax_compute,snapshot,amax,scale,overshoot,warmup,micro,te_scale\n");
  micro_row(row, sizeof row, 0, 0, 4, 1, 1, 0, "");
  o += (size_t)snprintf(want + o, sizeof want - o, "%s", row);
  micro_row(row, sizeof row, 1, 0, 2, 112, 0, 0, "");
  o += (size_t)snprintf(want + o, sizeof want - o, "%s", row);
  micro_row(row, sizeof row, 2, 1, 2, 112, 0, 0, "");
  o += (size_t)snprintf(want + o, sizeof want - o, "%s", row);
  micro_row(row, sizeof row, 3, 0, 1, 224, 0, 0, "");
  snprintf(want + o, sizeof want - o, "%s", row);
  char *stream = read_out("out/stream.csv"), *steps = read_out("out/steps.csv");
  char *summary = read_out("out/summary.csv"), *hist = read_out("out/histograms.csv");
  ck_assert_str_eq(stream, want);
  expect_row(steps, "m.input,input,2,d,delayed,e4m3,2,0,max,2,112,2,0,0,0,0,0,");
  write_text("trace/amax.csv", "step,tensor,amax,micro,te_scale\n0,m.input,4,0,\n1,m.input,2,0,\n"
                               "2,m.input,8,0,\n3,m.input,1,0,\n");
  ck_assert_int_eq(run_cli(&out, "run exp.ini --quiet --no-report --force"), 0);
  free(out);
  const char *files[4] = {"out/stream.csv", "out/steps.csv", "out/summary.csv",
                          "out/histograms.csv"};
  char *before[4] = {stream, steps, summary, hist};
  for (int k = 0; k < 4; k++) {
    char *now = read_out(files[k]);
    ck_assert_msg(strcmp(now, before[k]) == 0, "%s differs:\n%s\nvs\n%s", files[k], now, before[k]);
    free(now);
    free(before[k]);
  }
}
END_TEST

/* Delayed scaling with history_len 2, margin 0, max: the scale a step uses is
 * RN32(448 / max of the last two non-zero amaxes fed to the update), 1 before any.
 *   independent ranks: rank 0 is fed 2, 4, 1 -> step 3 uses 448 / max(4, 1) = 112, so 10 * 112
 *     saturates (overflow 1); rank 1 is fed 100, (0: kept), 16 -> 448 / max(100, 16) = 4.48.
 *   reduce_amax (one group of both): both are fed max(2, 100) = 100, max(4, -) = 4,
 *     max(1, 16) = 16 -> 448 / max(4, 16) = 28 for both ranks; 10 * 28 = 280 fits.
 * The amax column and the statistics stay each rank's own; current scaling is per rank. */
START_TEST(test_ranks_by_hand) {
  write_two_rank_trace();
  write_text("ind.ini", "[trace]\npath = run\n[recipe.d]\nkind = delayed\nhistory_len = 2\n"
                        "[recipe.c]\nkind = current\n[output]\ndir = ind\n");
  write_text("red.ini", "[trace]\npath = run\nreduce_amax = true\n[recipe.d]\nkind = delayed\n"
                        "history_len = 2\n[recipe.c]\nkind = current\n[output]\ndir = red\n");
  write_text("g1.ini", "[trace]\npath = run\nreduce_amax = true\nreduce_group = 1\n[recipe.d]\n"
                       "kind = delayed\nhistory_len = 2\n[recipe.c]\nkind = current\n"
                       "[output]\ndir = g1\n");
  char *out;
  const char *inis[3] = {"ind.ini", "red.ini", "g1.ini"};
  for (int i = 0; i < 3; i++) {
    int rc = run_cli(&out, "run %s --quiet --no-report", inis[i]);
    ck_assert_msg(rc == 0, "%s: rc %d: %s", inis[i], rc, out);
    free(out);
  }
  char expect[256];
  float s100 = 448.0f / 100.0f, c10 = 448.0f / 10.0f;

  char *ind = read_out("ind/steps.csv");
  /* header + 2 snapshot steps x 2 ranks x 2 configurations, in step, tensor-name order */
  ck_assert_int_eq(count_lines(ind), 1 + 8);
  static const char *order[8] = {"rank_0/m.input,input,0,d,", "rank_0/m.input,input,0,c,",
                                 "rank_1/m.input,input,0,d,", "rank_1/m.input,input,0,c,",
                                 "rank_0/m.input,input,3,d,", "rank_0/m.input,input,3,c,",
                                 "rank_1/m.input,input,3,d,", "rank_1/m.input,input,3,c,"};
  const char *line = strchr(ind, '\n') + 1;
  for (int i = 0; i < 8; i++) {
    ck_assert_msg(strncmp(line, order[i], strlen(order[i])) == 0, "row %d: %.60s", i + 1, line);
    line = strchr(line, '\n') + 1;
  }
  /* step 0: scale 1 on both ranks, each with its own amax */
  expect_row(ind, "rank_0/m.input,input,0,d,delayed,e4m3,2,0,max,2,1,2,0,0,0,");
  expect_row(ind, "rank_1/m.input,input,0,d,delayed,e4m3,2,0,max,100,1,2,0,0,0,");
  /* step 3 */
  expect_row(ind, "rank_0/m.input,input,3,d,delayed,e4m3,2,0,max,10,112,2,0,0,1,");
  snprintf(expect, sizeof expect, "rank_1/m.input,input,3,d,delayed,e4m3,2,0,max,10,%.9g,2,0,0,0,",
           (double)s100);
  expect_row(ind, expect);
  snprintf(expect, sizeof expect, "rank_0/m.input,input,3,c,current,e4m3,,,,10,%.9g,", (double)c10);
  expect_row(ind, expect);

  char *red = read_out("red/steps.csv");
  ck_assert_int_eq(count_lines(red), 1 + 8);
  expect_row(red, "rank_0/m.input,input,0,d,delayed,e4m3,2,0,max,2,1,2,0,0,0,");
  expect_row(red, "rank_1/m.input,input,0,d,delayed,e4m3,2,0,max,100,1,2,0,0,0,");
  expect_row(red, "rank_0/m.input,input,3,d,delayed,e4m3,2,0,max,10,28,2,0,0,0,");
  expect_row(red, "rank_1/m.input,input,3,d,delayed,e4m3,2,0,max,10,28,2,0,0,0,");
  /* current scaling is not reduced */
  expect_row(red, expect);
  /* rank 0's step-3 row, all of it: 10 * 28 = 280 lies between the E4M3 values 256 and 288
   * (steps of 32 in that binade) and rounds to 288; 0.25 * 28 = 7 is exact. Dequantized with
   * RN32(1/28) (not exact), each error in double. */
  float sinv = 1.0f / 28.0f, xs[2] = {10.0f, 0.25f}, qs[2] = {288.0f, 7.0f};
  double e2 = 0, x2 = 0;
  float xhs[2];
  for (int i = 0; i < 2; i++) {
    float xh = xhs[i] = qs[i] * sinv;
    double dd = (double)xs[i] - (double)xh;
    e2 += dd * dd;
    x2 += (double)xs[i] * (double)xs[i];
  }
  char *r = find_row(red, "rank_0/m.input,input,3,d,");
  ck_assert_ptr_nonnull(r);
  /* 280 is below 448; step 0 fed the group's 100 into both ranks' histories: not warm-up */
  cut_tail(r, 0, log2(280.0 / 448.0), cos_of(xs, xhs, 2), 0);
  snprintf(expect, sizeof expect,
           "rank_0/m.input,input,3,d,delayed,e4m3,2,0,max,10,28,2,0,0,0,0,0,%.9g,%.9g,,,,,", e2 / 2.0,
           10.0 * log10(x2 / e2));
  ck_assert_str_eq(r, expect);
  free(r);

  /* groups of one rank: the same as no reduction, byte for byte */
  char *g1 = read_out("g1/steps.csv");
  ck_assert_str_eq(g1, ind);
  char *si = read_out("ind/summary.csv"), *sg = read_out("g1/summary.csv");
  ck_assert_str_eq(si, sg);
  ck_assert_ptr_nonnull(strstr(si, "\nrank_1/m.input,input,d,delayed,e4m3,2,0,max,2,"));

  /* run.json: the ranks, the reduction and every rank's files */
  char *p = path_in("red/run.json");
  json_error_t jerr;
  json_t *j = json_load_file(p, 0, &jerr);
  free(p);
  ck_assert_ptr_nonnull(j);
  json_t *tro = json_object_get(j, "trace");
  ck_assert_int_eq(json_integer_value(json_object_get(tro, "ranks")), 2);
  ck_assert(json_is_true(json_object_get(tro, "reduce_amax")));
  ck_assert_int_eq(json_integer_value(json_object_get(tro, "reduce_group")), 2);
  ck_assert_int_eq(json_integer_value(json_object_get(tro, "snapshot_steps")), 2);
  ck_assert_int_eq(json_integer_value(json_object_get(tro, "amax_rows")), 3);
  ck_assert_int_eq(json_integer_value(json_object_get(j, "steps_replayed")), 4);
  ck_assert_int_eq(json_integer_value(json_object_get(j, "tensors")), 2);
  ck_assert_uint_eq(json_array_size(json_object_get(j, "inputs")), 1 + 2 * 3); /* ini; 2 + csv per rank */
  json_decref(j);
  /* a single-rank run.json has none of these keys */
  write_tiny_trace();
  write_text("one.ini", TINY_INI);
  ck_assert_int_eq(run_cli(&out, "run one.ini --quiet --no-report --out one"), 0);
  free(out);
  p = path_in("one/run.json");
  j = json_load_file(p, 0, &jerr);
  free(p);
  ck_assert_ptr_null(json_object_get(json_object_get(j, "trace"), "ranks"));
  json_decref(j);

  /* inspect sees the ranks' tensors */
  ck_assert_int_eq(run_cli(&out, "inspect run"), 0);
  ck_assert_msg(strstr(out, "rank_0/m.input") && strstr(out, "rank_1/m.input"), "%s", out);
  free(out);
  /* ... and, as the runner, takes a tensor's role from its name within the rank: a bare
   * "weight" is a weight, not "(unknown)" as the prefixed name "rank_0/weight" would be */
  {
    float w[2] = {1.0f, -0.5f};
    fp8_tensor_out tw[1] = {{"weight", FP8_DTYPE_F32, 1, {2}, w}};
    char e2[FP8_ERRLEN];
    for (int rk = 0; rk < 2; rk++) {
      char rel[64];
      snprintf(rel, sizeof rel, "bare/rank_%d", rk);
      char *d = path_in(rel);
      ck_assert_int_eq(fp8_mkdir_p(d, e2, sizeof e2), FP8_OK);
      free(d);
      snprintf(rel, sizeof rel, "bare/rank_%d/step_0.safetensors", rk);
      char *f = path_in(rel);
      ck_assert_int_eq(fp8_safetensors_write(f, tw, 1, NULL, e2, sizeof e2), FP8_OK);
      free(f);
    }
    ck_assert_int_eq(run_cli(&out, "inspect bare"), 0);
    const char *l0 = strstr(out, "rank_0/weight"), *l1 = strstr(out, "rank_1/weight");
    ck_assert_msg(l0 && l1 && !strstr(out, "(unknown)"), "%s", out);
    char nm[64], role[64];
    ck_assert_int_eq(sscanf(l0, "%63s %63s", nm, role), 2);
    ck_assert_str_eq(role, "weight");
    ck_assert_int_eq(sscanf(l1, "%63s %63s", nm, role), 2);
    ck_assert_str_eq(role, "weight");
    free(out);
  }
  free(ind);
  free(red);
  free(g1);
  free(si);
  free(sg);
}
END_TEST

/* The fallback path and any number of threads give the same multi-rank files. */
START_TEST(test_ranks_engine_threads) {
  char *out;
  ck_assert_int_eq(run_cli(&out, "synth llm run/rank_0 --steps 8 --seed 1"), 0);
  free(out);
  ck_assert_int_eq(run_cli(&out, "synth spiky run/rank_1 --steps 8 --seed 2"), 0);
  free(out);
  write_text("exp.ini", "[trace]\npath = run\nreduce_amax = true\n[recipe.d]\nkind = delayed\n"
                        "history_len = 1, 4\n[recipe.c]\nkind = current\n[recipe.mx]\nkind = mxfp8\n"
                        "[analysis]\ngemm = false\n[output]\ndir = out\n");
  ck_assert_int_eq(run_cli(&out, "run exp.ini --quiet --no-report --threads 1 --out t1"), 0);
  free(out);
  ck_assert_int_eq(run_cli(&out, "run exp.ini --quiet --no-report --threads 3 --out t3"), 0);
  free(out);
  char *od = path_in("viaengine");
  run_declining_engine("exp.ini", od);
  const char *files[] = {"steps.csv", "summary.csv", "histograms.csv"};
  for (int i = 0; i < 3; i++) {
    char a[4096], b[4096], c[4096];
    snprintf(a, sizeof a, "%s/t1/%s", g_dir, files[i]);
    snprintf(b, sizeof b, "%s/t3/%s", g_dir, files[i]);
    snprintf(c, sizeof c, "%s/%s", od, files[i]);
    char *ca = tu_read_file(a, NULL), *cb = tu_read_file(b, NULL), *cc = tu_read_file(c, NULL);
    ck_assert_ptr_nonnull(ca);
    ck_assert_msg(cb && strcmp(ca, cb) == 0, "%s differs with 3 threads", files[i]);
    ck_assert_msg(cc && strcmp(ca, cc) == 0, "%s differs through the fallback", files[i]);
    free(ca);
    free(cb);
    free(cc);
  }
  free(od);
}
END_TEST

/* A two-rank replay through the report: plots of rank_<r>/ tensors are files in plots/, the
 * report and the notebook are written. */
START_TEST(test_ranks_report) {
  char *out;
  ck_assert_int_eq(run_cli(&out, "synth llm run/rank_0 --steps 12 --seed 1"), 0);
  free(out);
  ck_assert_int_eq(run_cli(&out, "synth spiky run/rank_1 --steps 12 --seed 5"), 0);
  free(out);
  write_text("rep.ini", "[trace]\npath = run\nreduce_amax = true\n"
                        "tensors = layers.0.*, rank_1/layers.1.fc1.*\n[recipe.d]\nkind = delayed\n"
                        "history_len = 1, 16\nmargin = 0, 1\n[recipe.c]\nkind = current\n"
                        "[output]\ndir = out\n");
  int rc = run_cli(&out, "run rep.ini --quiet");
  ck_assert_msg(rc == 0, "rc %d: %s", rc, out);
  free(out);
  char *rep = read_out("out/report.md");
  ck_assert_ptr_nonnull(strstr(rep, "rank_"));
  free(rep);
  char *an = read_out("out/analysis.csv");
  ck_assert_ptr_nonnull(strstr(an, "\nrank_0/layers.0.fc1.input,input,"));
  ck_assert_ptr_nonnull(strstr(an, "\nrank_1/layers.0.fc1.input,input,"));
  /* a glob with '/' looks at the rank-prefixed name */
  ck_assert_ptr_nonnull(strstr(an, "\nrank_1/layers.1.fc1.input,input,"));
  ck_assert_ptr_null(strstr(an, "\nrank_0/layers.1.fc1.input,input,"));
  free(an);
  char *p = path_in("out/notebooks_export/rep.ipynb");
  struct stat sb;
  ck_assert_msg(stat(p, &sb) == 0, "%s", p);
  free(p);
  p = path_in("out/plots/rank_0");
  ck_assert_int_ne(stat(p, &sb), 0); /* no sub-folder from the '/' of the names */
  free(p);
  p = path_in("out/plots/dynamic_range.png");
  ck_assert_int_eq(stat(p, &sb), 0);
  free(p);
}
END_TEST

static int exists(const char *rel) {
  char *p = path_in(rel);
  struct stat sb;
  int r = lstat(p, &sb) == 0;
  free(p);
  return r;
}

static int entries(const char *rel) {
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "ls -A '%s/%s' | wc -l", g_dir, rel);
  char *out;
  ck_assert_int_eq(tu_run(cmd, &out), 0);
  int n = atoi(out);
  free(out);
  return n;
}

/* An error found in the trace (after the experiment file parsed) writes nothing: no output
 * folder is created for it (not even the parents of a nested one), a folder that was there
 * (empty, or an old run's with --force) is left as it was. A synth: trace has to be generated
 * into the output folder before its checks: a folder the run created is removed again, and an
 * old run's trace that --force was to replace is put back. */
START_TEST(test_no_folder_on_input_error) {
  char *out;
  write_two_rank_trace();
  write_text("r3.ini", "[trace]\npath = run\nreduce_amax = true\nreduce_group = 3\n"
                       "[recipe.d]\nkind = delayed\n");
  ck_assert_int_eq(run_cli(&out, "run r3.ini --out a/b/c"), 2);
  ck_assert_str_eq(out, "fp8lab: r3.ini:4: reduce_group = 3 does not divide the 2 ranks of run "
                        "(expected one of 1, 2)\n");
  free(out);
  ck_assert(!exists("a"));
  /* the trace's own errors too: a truncated snapshot */
  write_tiny_trace();
  write_text("exp.ini", TINY_INI);
  write_text("trace/step_7.safetensors", "\x40\x00\x00\x00\x00\x00\x00\x00{\"a.input\":");
  ck_assert_int_eq(run_cli(&out, "run exp.ini --out o4"), 2);
  free(out);
  ck_assert(!exists("o4"));
  /* a folder that was there stays, empty */
  char *d = path_in("empty");
  mkdir(d, 0777);
  free(d);
  ck_assert_int_eq(run_cli(&out, "run r3.ini --out empty"), 2);
  free(out);
  ck_assert(exists("empty"));
  ck_assert_int_eq(entries("empty"), 0);
  /* synth: generated, then refused (tensors selects nothing): the new folder is gone */
  write_text("sy.ini", "[trace]\npath = synth:llm\nsynth_steps = 4\ntensors = zzz*\n"
                       "[recipe.d]\nkind = delayed\n");
  ck_assert_int_eq(run_cli(&out, "run sy.ini --out sy/out"), 2);
  ck_assert_str_eq(out, "fp8lab: sy.ini:4: tensors = zzz* selects none of the tensors of the trace "
                        "sy/out/synth_trace\n");
  free(out);
  ck_assert(!exists("sy"));
  ck_assert_int_eq(run_cli(&out, "run sy.ini --out empty"), 2);
  free(out);
  ck_assert_int_eq(entries("empty"), 0);
  /* ... and over an old run with --force, the old trace stays what it was */
  write_text("prev.ini", "[trace]\npath = synth:llm\nsynth_steps = 4\n[recipe.d]\nkind = delayed\n");
  ck_assert_int_eq(run_cli(&out, "run prev.ini --quiet --no-report --out prev"), 0);
  free(out);
  char *before = read_out("prev/synth_trace/amax.csv");
  int n_before = entries("prev"), nt_before = entries("prev/synth_trace");
  write_text("sy6.ini", "[trace]\npath = synth:llm\nsynth_steps = 6\ntensors = zzz*\n"
                        "[recipe.d]\nkind = delayed\n");
  ck_assert_int_eq(run_cli(&out, "run sy6.ini --force --out prev"), 2);
  free(out);
  char *after = read_out("prev/synth_trace/amax.csv");
  ck_assert_str_eq(after, before);
  ck_assert_int_eq(entries("prev"), n_before);
  ck_assert_int_eq(entries("prev/synth_trace"), nt_before);
  free(before);
  free(after);
}
END_TEST

/* Multi-rank errors through the CLI: exit 2, one line with file:line or the trace folder. */
/* Strided amax-reduction groups (issue 26): 4 ranks, m.input's step-0 amax 1, 2, 4, 8 on
 * ranks 0..3. reduce_group = 2, reduce_stride = 2 form the groups {0, 2} and {1, 3}: at step 1
 * delayed scaling (history 2) scales ranks 0 and 2 by 448 / max(1, 4) = 112 and ranks 1 and 3
 * by 448 / max(2, 8) = 56; the contiguous groups {0, 1} and {2, 3} give 224 and 56 (at step 2
 * rank 0 clips, so that the report writes advice.ini). Errors: a
 * stride without reduce_group, G x S not dividing the ranks. advice.ini and run.json carry
 * it. */
/* The MPI replay's assignment of ranks to processes (issue 26), by hand: the largest rank
 * first, each to the least loaded process (ties: the lower rank, the lower process). */
START_TEST(test_mpi_assign_by_bytes) {
  const uint64_t b1[4] = {10, 40, 30, 20}, eq[4] = {5, 5, 5, 5};
  int o[4];
  fp8_mpi_assign(b1, 4, 2, o); /* 40 -> p0, 30 -> p1, 20 -> p1 (30 < 40), 10 -> p0 (40 < 50) */
  ck_assert(o[0] == 0 && o[1] == 0 && o[2] == 1 && o[3] == 1);
  fp8_mpi_assign(b1, 4, 3, o); /* 40 -> p0, 30 -> p1, 20 -> p2, 10 -> p2 (20 < 30) */
  ck_assert(o[0] == 2 && o[1] == 0 && o[2] == 1 && o[3] == 2);
  fp8_mpi_assign(eq, 4, 2, o); /* equal sizes: round robin */
  ck_assert(o[0] == 0 && o[1] == 1 && o[2] == 0 && o[3] == 1);
  fp8_mpi_assign(eq, 4, 1, o);
  ck_assert(o[0] == 0 && o[1] == 0 && o[2] == 0 && o[3] == 0);
  fp8_mpi_assign(b1, 2, 4, o); /* more processes than ranks: 10 -> p1 (40 went to p0) */
  ck_assert(o[0] == 1 && o[1] == 0);
}
END_TEST

START_TEST(test_ranks_strided_groups) {
  static const float amax0[4] = {1.0f, 2.0f, 4.0f, 8.0f};
  char *top = path_in("run4");
  mkdir(top, 0777);
  free(top);
  for (int r = 0; r < 4; r++) {
    char rel[64];
    snprintf(rel, sizeof rel, "run4/rank_%d", r);
    char *d = path_in(rel);
    mkdir(d, 0777);
    free(d);
    const float x0[2] = {amax0[r], 0.5f}, x1[2] = {1.0f, 0.25f};
    /* step 2: rank 0's m.input jumps to 1000 and clips (so the report advises current scaling
     * for it, and writes advice.ini) */
    const float x2[2] = {r == 0 ? 1000.0f : 1.0f, 0.25f};
    const float *xs[3] = {x0, x1, x2};
    for (int t = 0; t < 3; t++) {
      snprintf(rel, sizeof rel, "run4/rank_%d/step_%d.safetensors", r, t);
      write_f32_step(rel, "m.input", xs[t], 2);
    }
  }
  static const char *const head = "[recipe.d]\nkind = delayed\nhistory_len = 2\n"
                                  "[recipe.c]\nkind = current\n";
  char ini[512];
  snprintf(ini, sizeof ini, "[trace]\npath = run4\nreduce_amax = true\nreduce_group = 2\n"
           "reduce_stride = 2\n%s[output]\ndir = st\n", head);
  write_text("st.ini", ini);
  snprintf(ini, sizeof ini, "[trace]\npath = run4\nreduce_amax = true\nreduce_group = 2\n"
           "%s[output]\ndir = ct\n", head);
  write_text("ct.ini", ini);
  char *out;
  ck_assert_int_eq(run_cli(&out, "run st.ini --quiet"), 0);
  free(out);
  ck_assert_int_eq(run_cli(&out, "run ct.ini --quiet"), 0);
  free(out);
  char *st = read_out("st/steps.csv"), *ct = read_out("ct/steps.csv");
  static const char *const strided[4] = {"112", "56", "112", "56"},
                           *contiguous[4] = {"224", "224", "56", "56"};
  for (int r = 0; r < 4; r++) {
    char want[128];
    snprintf(want, sizeof want, "rank_%d/m.input,input,1,d,delayed,e4m3,2,0,max,1,%s,", r,
             strided[r]);
    expect_row(st, want);
    snprintf(want, sizeof want, "rank_%d/m.input,input,1,d,delayed,e4m3,2,0,max,1,%s,", r,
             contiguous[r]);
    expect_row(ct, want);
  }
  free(st);
  free(ct);
  char *adv = read_out("st/advice.ini"), *js = read_out("st/run.json");
  ck_assert_msg(strstr(adv, "reduce_amax = true\nreduce_group = 2\nreduce_stride = 2\n") != NULL,
                "%s", adv);
  ck_assert_msg(strstr(js, "\"reduce_stride\": 2") != NULL, "%s", js);
  free(adv);
  free(js);
  /* errors, at the key's line, nothing run */
  write_text("s1.ini", "[trace]\npath = run4\nreduce_amax = true\nreduce_stride = 2\n"
                       "[recipe.d]\nkind = delayed\n");
  ck_assert_int_eq(run_cli(&out, "run s1.ini --out s1"), 2);
  ck_assert_str_eq(out, "fp8lab: s1.ini:4: reduce_stride needs reduce_group (the ranks per group; "
                        "a group is ranks r, r+S, ..., r+(G-1)S)\n");
  free(out);
  write_text("s2.ini", "[trace]\npath = run4\nreduce_amax = true\nreduce_group = 2\n"
                       "reduce_stride = 3\n[recipe.d]\nkind = delayed\n");
  ck_assert_int_eq(run_cli(&out, "run s2.ini --out s2"), 2);
  ck_assert_str_eq(out, "fp8lab: s2.ini:5: reduce_group = 2 x reduce_stride = 3 does not divide "
                        "the 4 ranks of run4 (strided groups tile blocks of G x S ranks)\n");
  free(out);
  write_text("s3.ini", "[trace]\npath = run4/rank_0\nreduce_stride = 2\n[recipe.d]\n"
                       "kind = delayed\n");
  ck_assert_int_eq(run_cli(&out, "run s3.ini --out s3"), 2);
  ck_assert_str_eq(out, "fp8lab: s3.ini:3: reduce_stride needs a multi-rank trace, but "
                        "run4/rank_0 is a single-rank trace (point path at the folder that holds "
                        "rank_0/, rank_1/, ...)\n");
  free(out);
}
END_TEST

START_TEST(test_ranks_errors) {
  char *out;
  write_tiny_trace();
  /* reduce_amax on a single-rank trace (e.g. path pointing at one rank_<r>/) */
  write_text("r1.ini", "[trace]\npath = trace\nreduce_amax = true\n[recipe.d]\nkind = delayed\n");
  ck_assert_int_eq(run_cli(&out, "run r1.ini --out o1"), 2);
  ck_assert_str_eq(out, "fp8lab: r1.ini:3: reduce_amax = true needs a multi-rank trace, but trace is a "
                        "single-rank trace (point path at the folder that holds rank_0/, rank_1/, ...)\n");
  free(out);
  char *p = path_in("o1");
  struct stat sb;
  ck_assert_int_ne(stat(p, &sb), 0);
  free(p);
  /* reduce_group on a synth: trace (one rank), found before anything is generated */
  write_text("r2.ini", "[trace]\npath = synth:llm\nsynth_steps = 4\nreduce_group = 2\n"
                       "[recipe.d]\nkind = delayed\n");
  ck_assert_int_eq(run_cli(&out, "run r2.ini --out o2"), 2);
  ck_assert_str_eq(out, "fp8lab: r2.ini:4: reduce_group needs a multi-rank trace, but synth:llm is a "
                        "single-rank trace (point path at the folder that holds rank_0/, rank_1/, ...)\n");
  free(out);
  p = path_in("o2");
  ck_assert_int_ne(stat(p, &sb), 0);
  free(p);
  /* reduce_group not dividing the ranks */
  write_two_rank_trace();
  write_text("r3.ini", "[trace]\npath = run\nreduce_amax = true\nreduce_group = 3\n"
                       "[recipe.d]\nkind = delayed\n");
  ck_assert_int_eq(run_cli(&out, "run r3.ini --out o3"), 2);
  ck_assert_str_eq(out, "fp8lab: r3.ini:4: reduce_group = 3 does not divide the 2 ranks of run "
                        "(expected one of 1, 2)\n");
  free(out);
  /* a bad value: a parse error */
  write_text("r4.ini", "[trace]\npath = run\nreduce_amax = sometimes\n[recipe.d]\nkind = delayed\n");
  ck_assert_int_eq(run_cli(&out, "run r4.ini --out o4"), 2);
  ck_assert_str_eq(out, "fp8lab: r4.ini:3: bad reduce_amax \"sometimes\" (expected true or false)\n");
  free(out);
  /* a gap in the ranks, and a single-rank trace beside rank folders: the folder is named */
  char *d = path_in("run/rank_3");
  mkdir(d, 0777);
  free(d);
  write_text("run/rank_3/amax.csv", "step,tensor,amax\n0,m.input,1\n");
  write_text("r5.ini", "[trace]\npath = run\n[recipe.d]\nkind = delayed\n");
  ck_assert_int_eq(run_cli(&out, "run r5.ini --out o5"), 2);
  ck_assert_str_eq(out, "fp8lab: run: rank_2/ is missing (found 3 rank folders, up to rank_3/; "
                        "expected rank_0/ .. rank_<R-1>/ without gaps)\n");
  free(out);
  d = path_in("run/rank_3");
  tu_rmtree(d);
  free(d);
  write_text("run/amax.csv", "step,tensor,amax\n0,m.input,1\n");
  ck_assert_int_eq(run_cli(&out, "run r5.ini --out o6"), 2);
  ck_assert_str_eq(out, "fp8lab: run: holds both a single-rank trace (amax.csv) and rank folders "
                        "(rank_0/); a trace is one or the other\n");
  free(out);
}
END_TEST

/* ------------------------------------------------------------------ [recipe.*] tensors, label */

/* Two layers a and b (input [2, 4], weight [3, 4], grad_output [2, 3]), snapshots at steps 0
 * and 2 (step 2 five times larger: delayed scaling overflows there), amax.csv at step 1. */
static void write_two_layer_trace(void) {
  char *tdir = path_in("trace");
  mkdir(tdir, 0777);
  free(tdir);
  static const char *const names[6] = {"a.grad_output", "a.input", "a.weight",
                                       "b.grad_output", "b.input", "b.weight"};
  static const int64_t shape[6][2] = {{2, 3}, {2, 4}, {3, 4}, {2, 3}, {2, 4}, {3, 4}};
  static float data[2][6][12];
  for (int st = 0; st < 2; st++) {
    fp8_tensor_out t[6];
    for (int k = 0; k < 6; k++) {
      int n = (int)(shape[k][0] * shape[k][1]);
      for (int i = 0; i < n; i++)
        data[st][k][i] = (float)((i * 7 + k * 3) % 11 - 5) * (0.37f + 0.11f * (float)k) *
                         (st ? 5.0f : 1.0f) * (k >= 3 ? 1e-3f : 1.0f);
      t[k] = (fp8_tensor_out){names[k], FP8_DTYPE_F32, 2, {shape[k][0], shape[k][1]}, data[st][k]};
    }
    char err[FP8_ERRLEN], rel[64];
    snprintf(rel, sizeof rel, "trace/step_%d.safetensors", 2 * st);
    char *p = path_in(rel);
    ck_assert_msg(fp8_safetensors_write(p, t, 6, NULL, err, sizeof err) == FP8_OK, "%s", err);
    free(p);
  }
  write_text("trace/amax.csv", "step,tensor,amax\n1,a.input,3\n1,b.input,0.003\n1,a.grad_output,2\n");
}

/* The data lines of a CSV (header dropped), sorted, as one string. */
static int cmp_line(const void *x, const void *y) {
  return strcmp(*(char *const *)x, *(char *const *)y);
}

static char *sorted_lines(const char *csv, size_t *n_out) {
  size_t n = 0, cap = 16;
  char **v = malloc(cap * sizeof *v);
  const char *p = strchr(csv, '\n');
  p = p ? p + 1 : csv + strlen(csv);
  while (*p) {
    const char *nl = strchr(p, '\n');
    size_t len = nl ? (size_t)(nl - p) : strlen(p);
    if (n == cap) v = realloc(v, (cap *= 2) * sizeof *v);
    v[n] = malloc(len + 2);
    memcpy(v[n], p, len);
    v[n][len] = '\n';
    v[n][len + 1] = 0;
    n++;
    p = nl ? nl + 1 : p + len;
  }
  qsort(v, n, sizeof *v, cmp_line);
  size_t total = 1;
  for (size_t i = 0; i < n; i++) total += strlen(v[i]);
  char *s = malloc(total);
  s[0] = 0;
  for (size_t i = 0; i < n; i++) {
    strcat(s, v[i]);
    free(v[i]);
  }
  free(v);
  if (n_out) *n_out = n;
  return s;
}

/* The sorted data lines of several runs' <dir>/<file> together. */
static char *sorted_union(const char *file, const char *const *dirs, size_t ndirs) {
  size_t cap = 1;
  char **texts = calloc(ndirs, sizeof *texts);
  for (size_t i = 0; i < ndirs; i++) {
    char rel[256];
    snprintf(rel, sizeof rel, "%s/%s", dirs[i], file);
    char *p = path_in(rel);
    texts[i] = tu_read_file(p, NULL);
    free(p);
    if (!texts[i]) texts[i] = strdup("header\n"); /* no such file: no rows */
    cap += strlen(texts[i]);
  }
  char *all = malloc(cap + 16);
  strcpy(all, "header\n");
  for (size_t i = 0; i < ndirs; i++) {
    const char *body = strchr(texts[i], '\n');
    strcat(all, body ? body + 1 : "");
    free(texts[i]);
  }
  free(texts);
  char *s = sorted_lines(all, NULL);
  free(all);
  return s;
}

/* A mixed recipe (current for a.input and a.weight, delayed L=2 m=1 for the rest, one label)
 * and a partial sweep (delayed L=1, 2 for b.input and a.weight): the rows that exist, and
 * every value equal to the same configuration replayed over those tensors alone ([trace]
 * tensors), in steps.csv, summary.csv, stream.csv and gemm.csv. */
START_TEST(test_mixed_recipes) {
  write_two_layer_trace();
  write_text("mixed.ini", "[trace]\npath = trace\n"
                          "[recipe.hot]\nlabel = mix\nkind = current\ntensors = a.input, a.weight\n"
                          "[recipe.rest]\nlabel = mix\nkind = delayed\nhistory_len = 2\nmargin = 1\n"
                          "[recipe.sub]\nkind = delayed\nhistory_len = 1, 2\ntensors = b.input, *.weight\n"
                          "[output]\ndir = mixed\n");
  write_text("r1.ini", "[trace]\npath = trace\ntensors = a.input, a.weight\n"
                       "[recipe.mix]\nkind = current\n[output]\ndir = r1\n");
  write_text("r2.ini", "[trace]\npath = trace\ntensors = a.grad_output, b.*\n"
                       "[recipe.mix]\nkind = delayed\nhistory_len = 2\nmargin = 1\n[output]\ndir = r2\n");
  write_text("r3.ini", "[trace]\npath = trace\ntensors = b.input, *.weight\n"
                       "[recipe.sub]\nkind = delayed\nhistory_len = 1, 2\n[output]\ndir = r3\n");
  const char *ini[4] = {"mixed.ini", "r1.ini", "r2.ini", "r3.ini"};
  for (int i = 0; i < 4; i++) {
    char *out;
    int rc = run_cli(&out, "run %s --quiet --no-report", ini[i]);
    ck_assert_msg(rc == 0, "%s: %s", ini[i], out);
    free(out);
  }
  /* rows: mix for all 6 tensors, sub for b.input, a.weight, b.weight (2 each), at 2 steps */
  char *steps = read_out("mixed/steps.csv");
  size_t n;
  free(sorted_lines(steps, &n));
  ck_assert_uint_eq(n, 2 * (6 + 3 * 2));
  expect_row(steps, "a.input,input,0,mix,current,e4m3,,,,");
  expect_row(steps, "a.grad_output,grad_output,0,mix,delayed,e5m2,2,1,max,");
  expect_row(steps, "b.weight,weight,2,sub,delayed,e4m3,1,0,max,");
  ck_assert_ptr_null(find_row(steps, "a.input,input,0,sub,"));
  ck_assert_ptr_null(find_row(steps, "a.grad_output,grad_output,0,sub,"));
  /* the rows in step, tensor, configuration order: a.weight's mix row before its sub rows */
  const char *w1 = strstr(steps, "a.weight,weight,0,mix,"), *w2 = strstr(steps, "a.weight,weight,0,sub,");
  ck_assert(w1 && w2 && w1 < w2);
  free(steps);
  /* every row as in the replay of each section over its tensors alone */
  static const char *const refs[3] = {"r1", "r2", "r3"};
  static const char *const files[4] = {"steps.csv", "summary.csv", "stream.csv", "gemm.csv"};
  for (int f = 0; f < 4; f++) {
    const char *mixed_dir[1] = {"mixed"};
    char *got = sorted_union(files[f], mixed_dir, 1), *want = sorted_union(files[f], refs, 3);
    size_t d = 0;
    while (got[d] && got[d] == want[d]) d++;
    while (d > 0 && got[d - 1] != '\n') d--;
    ck_assert_msg(strcmp(got, want) == 0, "%s differs at:\n%.300s\nwant\n%.300s", files[f],
                  got + d, want + d);
    ck_assert_msg(strlen(got) > 0, "%s has no row", files[f]);
    free(got);
    free(want);
  }
  /* gemm.csv: layer b under mix (all three operands delayed L=2 m=1); not layer a, whose
   * operands are split between the sections of mix; none under sub (no grad_output) */
  char *gemm = read_out("mixed/gemm.csv");
  expect_row(gemm, "b,fprop,0,mix,delayed,2,1,max,");
  ck_assert_ptr_null(strstr(gemm, "\na,"));
  ck_assert_ptr_null(strstr(gemm, ",sub,"));
  free(gemm);
  /* stream.csv: the delayed configurations where they apply (mix's rest: 4 tensors; sub: 3
   * tensors x 2), every replay step (0, 1, 2) */
  char *stream = read_out("mixed/stream.csv");
  free(sorted_lines(stream, &n));
  ck_assert_uint_eq(n, 3 * (4 + 3 * 2));
  ck_assert_ptr_null(find_row(stream, "a.input,input,1,mix,"));
  expect_row(stream, "a.grad_output,grad_output,1,mix,e5m2,2,1,max,0,2,");
  free(stream);
  /* run.json: each configuration's section and tensors */
  char *p = path_in("mixed/run.json");
  json_error_t jerr;
  json_t *j = json_load_file(p, 0, &jerr);
  free(p);
  ck_assert_ptr_nonnull(j);
  char *cf = json_dumps(json_object_get(json_object_get(j, "experiment"), "configurations"),
                        JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(3));
  /* each configuration's section keys (settings: the advice files write them back) */
#define ST_CUR "\"settings\":\"kind = current\\nformat = hybrid\\nmargin = 0\\namax_epsilon = 0\\npow2 = false\","
#define ST_DL(l, m) "\"settings\":\"kind = delayed\\nformat = hybrid\\nhistory_len = " #l "\\nmargin = " #m "\\namax_compute = max\","
  ck_assert_str_eq(cf, "[{\"recipe\":\"mix\",\"kind\":\"current\",\"format\":\"hybrid\",\"margin\":0,"
                       ST_CUR "\"amax_epsilon\":0.0,\"pow2\":false,\"section\":\"hot\","
                       "\"tensors\":[\"a.input\",\"a.weight\"]},"
                       "{\"recipe\":\"mix\",\"kind\":\"delayed\",\"format\":\"hybrid\",\"margin\":1,"
                       ST_DL(2, 1) "\"history_len\":2,\"amax_compute\":\"max\",\"section\":\"rest\"},"
                       "{\"recipe\":\"sub\",\"kind\":\"delayed\",\"format\":\"hybrid\",\"margin\":0,"
                       ST_DL(1, 0) "\"history_len\":1,\"amax_compute\":\"max\",\"tensors\":[\"b.input\",\"*.weight\"]},"
                       "{\"recipe\":\"sub\",\"kind\":\"delayed\",\"format\":\"hybrid\",\"margin\":0,"
                       ST_DL(2, 0) "\"history_len\":2,\"amax_compute\":\"max\",\"tensors\":[\"b.input\",\"*.weight\"]}]");
#undef ST_CUR
#undef ST_DL
  free(cf);
  json_decref(j);
  /* the report reads it: mix is one configuration */
  char *out;
  ck_assert_msg(run_cli(&out, "report mixed") == 0, "%s", out);
  free(out);
  char *rep = read_out("mixed/report.md");
  const char *row = "| mix (per tensor) |";
  const char *at = strstr(rep, "## All configurations");
  ck_assert_msg(at && strstr(at, row), "%.2000s", at ? at : rep);
  ck_assert_ptr_null(strstr(rep, "| mix (current) |"));
  free(rep);
}
END_TEST

/* The errors found once the trace is open, at the key's line; nothing written. */
START_TEST(test_mixed_recipes_errors) {
  write_two_layer_trace();
  static const struct {
    const char *ini, *msg;
  } cases[] = {
      {"[trace]\npath = trace\n[recipe.hot]\nkind = current\ntensors = a.*, c.*\n",
       "e0.ini:5: tensors glob \"c.*\" of [recipe.hot] matches none of the 6 tensors of the replay"},
      {"[trace]\npath = trace\ntensors = a.*\n[recipe.hot]\nkind = current\ntensors = b.*\n",
       "e1.ini:6: tensors glob \"b.*\" of [recipe.hot] matches none of the 3 tensors of the replay "
       "(those [trace] tensors selects)"},
      {"[trace]\npath = trace\n[recipe.hot]\nlabel = mix\nkind = current\ntensors = a.input\n"
       "[recipe.rest]\nlabel = mix\nkind = delayed\ntensors = b.*\n",
       "e2.ini:10: tensor a.grad_output and 1 more: no section of the recipe label mix ([recipe.hot], "
       "[recipe.rest]) takes it; a shared label is one configuration of every tensor (leave out "
       "the tensors key of its last section to take the rest)"},
      {"[trace]\npath = trace\n[recipe.hot]\nlabel = mix\nkind = current\ntensors = a.*\n"
       "[recipe.rest]\nlabel = mix\nkind = delayed\ntensors = a.input\n",
       "e3.ini:10: [recipe.rest] takes no tensor: every tensor its tensors match is taken by an "
       "earlier section of the recipe label mix ([recipe.hot], [recipe.rest])"},
      /* a glob with / sees rank_<r>/<name>: nothing on a single-rank trace */
      {"[trace]\npath = trace\n[recipe.hot]\nkind = current\ntensors = rank_0/*\n",
       "e4.ini:5: tensors glob \"rank_0/*\" of [recipe.hot] matches none of the 6 tensors of the "
       "replay"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char name[32], *out, want[1024];
    snprintf(name, sizeof name, "e%zu.ini", i);
    write_text(name, cases[i].ini);
    ck_assert_int_eq(run_cli(&out, "run %s --out oe", name), 2);
    snprintf(want, sizeof want, "fp8lab: %s\n", cases[i].msg);
    ck_assert_str_eq(out, want);
    free(out);
    ck_assert(!exists("oe"));
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("run");
  TCase *tc = tcase_create("cli");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_tiny_rows_by_hand);
  tcase_add_test(tc, test_stream_rows_by_printf);
  tcase_add_test(tc, test_micro_batches_by_hand);
  tcase_add_test(tc, test_micro_absent_is_old_replay);
  tcase_add_test(tc, test_gemm_by_hand);
  tcase_add_test(tc, test_engine_gemm_same_output);
  tcase_add_test(tc, test_threads_same_output);
  tcase_add_test(tc, test_threads_same_gemm);
  tcase_add_test(tc, test_engine_path_same_output);
  tcase_add_test(tc, test_output_dir_rules);
  tcase_add_test(tc, test_bad_inputs);
  tcase_add_test(tc, test_steps_selecting_nothing);
  tcase_add_test(tc, test_amax_mismatch_warning);
  tcase_add_test(tc, test_write_failure_exit_1);
  tcase_add_test(tc, test_help_version_synth_inspect);
  tcase_add_test(tc, test_inspect_never_ran);
  tcase_add_test(tc, test_inspect_long_names);
  tcase_add_test(tc, test_advice_replays_elsewhere);
  tcase_add_test(tc, test_block_bf16_inf_and_epsilon);
  tcase_add_test(tc, test_run_names_left_out);
  tcase_add_test(tc, test_ranks_by_hand);
  tcase_add_test(tc, test_ranks_engine_threads);
  tcase_add_test(tc, test_ranks_report);
  tcase_add_test(tc, test_ranks_errors);
  tcase_add_test(tc, test_ranks_strided_groups);
  tcase_add_test(tc, test_mpi_assign_by_bytes);
  tcase_add_test(tc, test_mixed_recipes);
  tcase_add_test(tc, test_mixed_recipes_errors);
  tcase_add_test(tc, test_no_folder_on_input_error);
  tcase_add_test(tc, test_results_rows_by_printf);
  tcase_add_test(tc, test_num_text_matches_printf);
  suite_add_tcase(s, tc);
  return tu_run_suite(s);
}
