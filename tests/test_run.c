/* test_run.c: `fp8lab run`, `synth` and `inspect` end to end through the real binary: rows of
 * steps.csv worked out by hand on a tiny trace, the CSV schemas, run.json, and every bad-input
 * path (exit 2, one line naming the file, nothing written). */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testutil.h"
#include "engine_sim.h"
#include "experiment.h"
#include "runner.h"
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

static int count_lines(const char *s) {
  int n = 0;
  for (; *s; s++) n += *s == '\n';
  return n;
}

START_TEST(test_tiny_rows_by_hand) {
  write_tiny_trace();
  write_text("exp.ini", TINY_INI);
  char *out;
  int rc = run_cli(&out, "run exp.ini --quiet");
  ck_assert_msg(rc == 0, "rc %d: %s", rc, out);
  free(out);
  char *p = path_in("out/steps.csv");
  char *csv = tu_read_file(p, NULL);
  free(p);
  ck_assert_ptr_nonnull(csv);
  /* header, then 2 snapshot steps x 2 tensors x 3 configurations */
  ck_assert_int_eq(count_lines(csv), 1 + 2 * 2 * 3);
  static const char header[] =
      "tensor,role,step,recipe,kind,format,history_len,margin,amax_compute,amax,scale,n,"
      "nonfinite,zeros,overflow,underflow,subnormal,mse,snr_db,nblocks,blocks_with_overflow,"
      "log2_scale_min,log2_scale_max,log2_scale_std\n";
  ck_assert(strncmp(csv, header, strlen(header)) == 0);
  /* step 0: every delayed configuration uses scale 1; x*1 fits E4M3 exactly: no error */
  char *r = find_row(csv, "m.input,input,0,d,delayed,e4m3,1,0,max,");
  ck_assert_ptr_nonnull(r);
  ck_assert_str_eq(r, "m.input,input,0,d,delayed,e4m3,1,0,max,4,1,4,0,0,0,0,0,0,inf,,,,,");
  free(r);
  /* current scaling at step 0: 448/4 = 112; 0.5*112 = 56 exact, all exact again */
  r = find_row(csv, "m.input,input,0,c,current,e4m3,,,,");
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
  for (int i = 0; i < 4; i++) {
    float xh = qv[i] * sinv;
    double d = (double)xin[i] - (double)xh;
    e2 += d * d;
    x2 += (double)xin[i] * (double)xin[i];
  }
  char expect[256];
  snprintf(expect, sizeof expect, "m.input,input,2,d,delayed,e4m3,1,0,max,100,56,4,0,1,1,0,1,%.9g,%.9g,,,,,",
           e2 / 4.0, 10.0 * log10(x2 / e2));
  ck_assert_str_eq(r, expect);
  free(r);
  r = find_row(csv, "m.input,input,2,d,delayed,e4m3,2,0,max,");
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
  ck_assert_str_eq(r, "m.grad_output,grad_output,2,d,delayed,e5m2,1,0,max,0.5,28672,2,0,1,0,0,0,0,inf,,,,,");
  free(r);
  free(csv);

  /* summary.csv: one row per tensor and configuration with totals over the 2 steps */
  p = path_in("out/summary.csv");
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
  int rc = run_cli(&out, "run g.ini --quiet --no-report");
  ck_assert_msg(rc == 0, "%s", out);
  free(out);
  p = path_in("out/gemm.csv");
  char *csv = tu_read_file(p, NULL);
  free(p);
  ck_assert_ptr_nonnull(csv);
  double f = 0.0625 / 1.0625, wg = 0.0625 / sqrt(1.0625 * 1.0625 + 4.0);
  char expect[1024];
  snprintf(expect, sizeof expect,
           "layer,gemm,step,recipe,kind,history_len,margin,amax_compute,rel_error\n"
           "l,fprop,0,d,delayed,4,0,max,%.9g\nl,fprop,0,row,rowwise,,,,%.9g\n"
           "l,dgrad,0,d,delayed,4,0,max,0\nl,dgrad,0,row,rowwise,,,,0\n"
           "l,wgrad,0,d,delayed,4,0,max,%.9g\nl,wgrad,0,row,rowwise,,,,%.9g\n",
           f, f, wg, wg);
  ck_assert_str_eq(csv, expect);
  free(csv);
  /* the rowwise steps.csv row of X: one block (one row), scale 2^7, 1.0625 -> 1 */
  p = path_in("out/steps.csv");
  csv = tu_read_file(p, NULL);
  free(p);
  char *r = find_row(csv, "l.input,input,0,row,rowwise,e4m3,,,,2,,");
  ck_assert_ptr_nonnull(r);
  double snr = 10.0 * log10((1.0625 * 1.0625 + 4.0) / (0.0625 * 0.0625));
  snprintf(expect, sizeof expect, "l.input,input,0,row,rowwise,e4m3,,,,2,,2,0,0,0,0,0,%.9g,%.9g,1,0,7,7,0",
           0.0625 * 0.0625 / 2.0, snr);
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

/* The engine code path (the one the GPU engine takes) gives the same files as the direct CPU
 * path: run through the library with the simulator behind the engine interface. */
START_TEST(test_engine_path_same_output) {
  write_tiny_trace();
  write_text("exp.ini", "[trace]\npath = trace\n[recipe.d]\nkind = delayed\nhistory_len = 1, 2\n"
                        "[recipe.c]\nkind = current\n[recipe.mx]\nkind = mxfp8\n[output]\ndir = out\n");
  char *out;
  ck_assert_int_eq(run_cli(&out, "run exp.ini --quiet --no-report --out direct"), 0);
  free(out);
  char *ini = path_in("exp.ini"), *od = path_in("viaengine"), err[FP8_ERRLEN];
  fp8_experiment ex;
  ck_assert_int_eq(fp8_experiment_load(ini, &ex, err, sizeof err), FP8_OK);
  fp8_engine *e;
  ck_assert_int_eq(fp8_engine_sim_create(&e, err, sizeof err), FP8_OK);
  fp8_run_options opt = {.out_dir = od, .threads = 1, .quiet = 1, .engine = e};
  fp8_run_summary sum;
  int rc = fp8_run_experiment(&ex, &opt, &sum, err, sizeof err);
  ck_assert_msg(rc == FP8_OK, "%s", err);
  e->free(e);
  fp8_experiment_free(&ex);
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
  free(ini);
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
  ck_assert_msg(strstr(out, "m.bias") != NULL && count_lines(out) == 1, "%s", out);
  free(out);
  char *p = path_in("o2/steps.csv");
  struct stat sb;
  ck_assert_int_ne(stat(p, &sb), 0);
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
  p = path_in("o4/steps.csv");
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
}
END_TEST

int main(void) {
  Suite *s = suite_create("run");
  TCase *tc = tcase_create("cli");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_tiny_rows_by_hand);
  tcase_add_test(tc, test_gemm_by_hand);
  tcase_add_test(tc, test_threads_same_output);
  tcase_add_test(tc, test_engine_path_same_output);
  tcase_add_test(tc, test_output_dir_rules);
  tcase_add_test(tc, test_bad_inputs);
  tcase_add_test(tc, test_help_version_synth_inspect);
  suite_add_tcase(s, tc);
  return tu_run_suite(s);
}
