/* test_rows_by_hand.c: `fp8lab run` through the real binary, its rows worked out by hand:
 * steps.csv and the CSV schemas on a tiny trace, a layer triplet's gemm.csv rows, and a block-
 * scaled tile of 2^-121 as BF16 and F32 (issue 25: the dtype's largest value in the scale,
 * amax_epsilon). */
#include <check.h>
#include <jansson.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testutil.h"
#include "trace.h"
#include "tu_dir.h"
#include "tu_traces.h"
#include "run_helpers.h"
#include "util.h"

/* Runs `fp8lab <cmd>` (exit 0 required) and returns the output file rel (malloc'ed). */
static char *run_read(const char *cmd, const char *rel) {
  char *out;
  int rc = run_cli(&out, "%s", cmd);
  ck_assert_msg(rc == 0, "%s: rc %d: %s", cmd, rc, out);
  free(out);
  const char *p = path_in(rel);
  char *text = tu_read_file(p, NULL);
  ck_assert_msg(text != NULL, "%s: no %s", cmd, rel);
  return text;
}

START_TEST(test_tiny_rows_by_hand) {
  write_tiny_trace();
  put_text("exp.ini", TINY_INI);
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
  const char *p = path_in("out/summary.csv");
  char *sum = tu_read_file(p, NULL);
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

  /* run.json: parses, names the version and counts the rows */
  p = path_in("out/run.json");
  json_error_t jerr;
  json_t *j = json_load_file(p, 0, &jerr);
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
  /* advice.ini: the answer as an experiment (the whole-model setting misses a tensor here),
   * and the BF16 demotion plan of that tensor's layer (issue 45) */
  ck_assert_msg(strstr(outs, ",\"report.md\",\"advice.ini\",\"te_recipe.py\",\"megatron_args.txt\","
                             "\"megatron_precision.yaml\",\"torchao_config.py\",\"bf16_plan.csv\","
                             "\"bf16_plan.ini\",\"megatron_bf16_plan_fp8.txt\","
                             "\"megatron_bf16_plan_fp8.yaml\",\"torchao_bf16_plan.py\","
                             "\"te_bf16_plan.py\",\"notebooks_export/exp.ipynb\"]") != NULL,
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
  const char *tdir = path_in("trace");
  mkdir(tdir, 0777);
  float x[2] = {1.0625f, 2.0f}, w[2] = {1.0f, 0.0f}, g[1] = {1.0f};
  fp8_tensor_out t[3] = {{"l.grad_output", FP8_DTYPE_F32, 2, {1, 1}, g},
                         {"l.input", FP8_DTYPE_F32, 2, {1, 2}, x},
                         {"l.weight", FP8_DTYPE_F32, 2, {1, 2}, w}};
  const char *p = path_in("trace/step_0.safetensors");
  char err[FP8_ERRLEN];
  ck_assert_int_eq(fp8_safetensors_write(p, t, 3, NULL, err, sizeof err), FP8_OK);
  put_text("g.ini", "[trace]\npath = trace\n[recipe.d]\nkind = delayed\nhistory_len = 4\n"
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
  put_text("ge.ini", "[trace]\npath = trace\n[recipe.d]\nkind = delayed\nhistory_len = 4\n"
                     "[recipe.row]\nkind = rowwise\n[analysis]\ngemm_error = exact\n"
                     "[output]\ndir = out_exact\n");
  rc = run_cli(&out, "run ge.ini --no-report");
  ck_assert_msg(rc == 0, "%s", out);
  free(out);
  p = path_in("out_exact/gemm.csv");
  csv = tu_read_file(p, NULL);
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
  ck_assert_ptr_nonnull(j);
  char *outs = json_dumps(json_object_get(j, "outputs"), JSON_COMPACT);
  ck_assert_str_eq(outs, "[\"steps.csv\",\"stream.csv\",\"summary.csv\",\"histograms.csv\",\"gemm.csv\","
                         "\"run.json\"]");
  free(outs);
  json_decref(j);
  /* the rowwise steps.csv row of X: one block (one row), scale 2^7, 1.0625 -> 1 */
  p = path_in("out/steps.csv");
  csv = tu_read_file(p, NULL);
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
  put_text("g2.ini", "[trace]\npath = trace\n[recipe.d]\nkind = delayed\n[analysis]\ngemm = false\n"
                     "[output]\ndir = out2\n");
  ck_assert_int_eq(run_cli(&out, "run g2.ini --quiet --no-report"), 0);
  free(out);
  p = path_in("out2/gemm.csv");
  struct stat sb;
  ck_assert_int_ne(stat(p, &sb), 0);
}
END_TEST

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
  const char *tdir = path_in("btrace");
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
  const char *p0 = path_in("btrace/step_0.safetensors");
  ck_assert_int_eq(fp8_safetensors_write(p0, t0, 2, NULL, err, sizeof err), FP8_OK);
  put_text("b.ini", "[trace]\npath = btrace\n"
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

TU_MAIN("rows_by_hand", "cli", setup, teardown, 120, test_tiny_rows_by_hand, test_gemm_by_hand,
        test_block_bf16_inf_and_epsilon)
