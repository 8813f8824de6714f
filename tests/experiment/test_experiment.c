/* test_experiment.c: experiment files (src/experiment/experiment.c): the documented example expands
 * to its configurations in canonical order, defaults, path resolution, step and tensor
 * selection, comments and CRLF, and a table of bad files, each with its exact "file:line:". */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "experiment.h"
#include "testutil.h"

static char *tmpdir;

static void setup(void) {
  tmpdir = tu_mkdtemp();
  ck_assert_ptr_nonnull(tmpdir);
}

static void teardown(void) {
  tu_rmtree(tmpdir);
  free(tmpdir);
  tmpdir = NULL;
}

/* Writes text to <tmpdir>/<rel> (rel may contain one existing subdir); returns a static path. */
static const char *write_ini(const char *rel, const char *text) {
  static char path[4096];
  snprintf(path, sizeof path, "%s/%s", tmpdir, rel);
  ck_assert_int_eq(tu_write_file(path, text, strlen(text)), 0);
  return path;
}

static const char *EXAMPLE =
    "[trace]\n"
    "path = traces/gpt_small        ; a trace directory, or synth:<preset>\n"
    "steps = 0-999                  ; optional\n"
    "tensors = *.fc1.*, *.qkv.*     ; optional\n"
    "synth_steps = 200              ; optional\n"
    "synth_seed = 1                 ; optional\n"
    "\n"
    "[recipe.delayed_sweep]         ; any label\n"
    "kind = delayed\n"
    "format = hybrid                ; hybrid | e4m3 | e5m2\n"
    "history_len = 1, 16, 128, 1024 ; default 1024\n"
    "margin = 0, 1, 2               ; default 0\n"
    "amax_compute = max, most_recent; default max\n"
    "\n"
    "[recipe.jit]\n"
    "kind = current\n"
    "format = hybrid\n"
    "amax_epsilon = 0               ; default 0\n"
    "pow2 = false                   ; true|false\n"
    "margin = 0                     ; default 0\n"
    "\n"
    "[output]\n"
    "dir = out/gpt_small\n";

static void check_delayed(const fp8_config *c, const char *label, fp8_format_sel f, int32_t hl,
                          int32_t m, fp8_amax_compute ac) {
  ck_assert_str_eq(c->label, label);
  ck_assert_int_eq(c->kind, FP8_KIND_DELAYED);
  ck_assert_int_eq(c->format, f);
  ck_assert_int_eq(c->history_len, hl);
  ck_assert_int_eq(c->margin, m);
  ck_assert_int_eq(c->amax_compute, ac);
}

START_TEST(test_example) {
  const char *path = write_ini("gpt.ini", EXAMPLE);

  fp8_experiment ex;
  char err[512] = "";
  ck_assert_int_eq(fp8_experiment_load(path, &ex, err, sizeof err), FP8_OK);
  ck_assert_str_eq(err, "");
  ck_assert_str_eq(ex.file, path);
  ck_assert_str_eq(ex.base_dir, tmpdir);
  ck_assert_str_eq(ex.name, "gpt");
  char want[4096];
  snprintf(want, sizeof want, "%s/traces/gpt_small", tmpdir);
  ck_assert_str_eq(ex.trace_path, want);
  ck_assert_int_eq(ex.trace_is_synth, 0);
  ck_assert_ptr_null(ex.synth_preset);
  ck_assert_int_eq(ex.has_steps, 1);
  ck_assert_int_eq(ex.step_first, 0);
  ck_assert_int_eq(ex.step_last, 999);
  ck_assert_int_eq(ex.step_stride, 1);
  ck_assert_uint_eq(ex.ntensor_globs, 2);
  ck_assert_str_eq(ex.tensor_globs[0], "*.fc1.*");
  ck_assert_str_eq(ex.tensor_globs[1], "*.qkv.*");
  snprintf(want, sizeof want, "%s/out/gpt_small", tmpdir);
  ck_assert_str_eq(ex.out_dir, want);

  ck_assert_uint_eq(ex.nconfigs, 4 * 3 * 2 + 1);
  const char *L = "delayed_sweep";
  check_delayed(&ex.configs[0], L, FP8_SEL_HYBRID, 1, 0, FP8_AMAX_MAX);
  check_delayed(&ex.configs[1], L, FP8_SEL_HYBRID, 1, 0, FP8_AMAX_MOST_RECENT);
  check_delayed(&ex.configs[2], L, FP8_SEL_HYBRID, 1, 1, FP8_AMAX_MAX);
  check_delayed(&ex.configs[5], L, FP8_SEL_HYBRID, 1, 2, FP8_AMAX_MOST_RECENT);
  check_delayed(&ex.configs[6], L, FP8_SEL_HYBRID, 16, 0, FP8_AMAX_MAX);
  check_delayed(&ex.configs[13], L, FP8_SEL_HYBRID, 128, 0, FP8_AMAX_MOST_RECENT);
  check_delayed(&ex.configs[23], L, FP8_SEL_HYBRID, 1024, 2, FP8_AMAX_MOST_RECENT);
  for (size_t i = 0; i < 24; i++) {
    ck_assert_float_eq(ex.configs[i].amax_epsilon, 0.0f);
    ck_assert_int_eq(ex.configs[i].pow2, 0);
  }
  const fp8_config *j = &ex.configs[24];
  ck_assert_str_eq(j->label, "jit");
  ck_assert_int_eq(j->kind, FP8_KIND_CURRENT);
  ck_assert_int_eq(j->format, FP8_SEL_HYBRID);
  ck_assert_float_eq(j->amax_epsilon, 0.0f);
  ck_assert_int_eq(j->pow2, 0);
  ck_assert_int_eq(j->margin, 0);
  ck_assert_str_eq(fp8_recipe_kind_name(j->kind), "current");
  ck_assert_str_eq(fp8_recipe_kind_name(ex.configs[0].kind), "delayed");
  /* the lines errors found in the trace name: the tensors key, each configuration's format */
  ck_assert_int_eq(ex.tensors_line, 4);
  for (size_t i = 0; i < 24; i++) ck_assert_int_eq(ex.format_lines[i], 10);
  ck_assert_int_eq(ex.format_lines[24], 17);

  fp8_experiment_free(&ex);
  ck_assert_ptr_null(ex.configs);
  ck_assert_uint_eq(ex.nconfigs, 0);
  ck_assert_ptr_null(ex.file);
}
END_TEST

/* The product order does not depend on the key order in the file, and kind may come last. */
START_TEST(test_key_order_independent) {
  const char *path = write_ini("order.ini",
                               "[recipe.r]\n"
                               "amax_compute = most_recent, max\n"
                               "margin = 3, -1\n"
                               "history_len = 8, 4\n"
                               "format = e5m2, E4M3\n"
                               "kind = delayed\n"
                               "[trace]\n"
                               "path = synth:tiny\n");
  fp8_experiment ex;
  char err[512];
  ck_assert_int_eq(fp8_experiment_load(path, &ex, err, sizeof err), FP8_OK);
  ck_assert_uint_eq(ex.nconfigs, 16);
  check_delayed(&ex.configs[0], "r", FP8_SEL_E5M2, 8, 3, FP8_AMAX_MOST_RECENT);
  check_delayed(&ex.configs[1], "r", FP8_SEL_E5M2, 8, 3, FP8_AMAX_MAX);
  check_delayed(&ex.configs[2], "r", FP8_SEL_E5M2, 8, -1, FP8_AMAX_MOST_RECENT);
  check_delayed(&ex.configs[4], "r", FP8_SEL_E5M2, 4, 3, FP8_AMAX_MOST_RECENT);
  check_delayed(&ex.configs[8], "r", FP8_SEL_E4M3, 8, 3, FP8_AMAX_MOST_RECENT);
  check_delayed(&ex.configs[15], "r", FP8_SEL_E4M3, 4, -1, FP8_AMAX_MAX);
  ck_assert_int_eq(ex.trace_is_synth, 1);
  ck_assert_str_eq(ex.trace_path, "synth:tiny");
  ck_assert_str_eq(ex.synth_preset, "tiny");
  fp8_experiment_free(&ex);
}
END_TEST

START_TEST(test_defaults) {
  const char *path = write_ini("d.ini",
                               "[trace]\npath = synth:small\n"
                               "[recipe.a]\nkind = delayed\n"
                               "[recipe.b]\nkind = current\n"
                               "[recipe.c]\nkind = current\nformat = e4m3, e5m2\n"
                               "amax_epsilon = 1e-12\npow2 = YES\nmargin = -2\n");
  fp8_experiment ex;
  char err[512];
  ck_assert_int_eq(fp8_experiment_load(path, &ex, err, sizeof err), FP8_OK);
  ck_assert_int_eq(ex.synth_steps, 200);
  ck_assert_uint_eq(ex.synth_seed, 1);
  ck_assert_int_eq(ex.has_steps, 0);
  ck_assert_uint_eq(ex.ntensor_globs, 0);
  ck_assert_ptr_null(ex.out_dir);
  ck_assert_str_eq(ex.name, "d");
  ck_assert_uint_eq(ex.nconfigs, 4);
  check_delayed(&ex.configs[0], "a", FP8_SEL_HYBRID, 1024, 0, FP8_AMAX_MAX);
  /* format not given: its hybrid default is the [recipe.*] header's */
  ck_assert_int_eq(ex.format_lines[0], 3);
  ck_assert_int_eq(ex.format_lines[1], 5);
  ck_assert_int_eq(ex.format_lines[2], 9);
  ck_assert_int_eq(ex.tensors_line, 0);
  ck_assert_int_eq(ex.configs[1].kind, FP8_KIND_CURRENT);
  ck_assert_str_eq(ex.configs[1].label, "b");
  ck_assert_int_eq(ex.configs[1].format, FP8_SEL_HYBRID);
  ck_assert_float_eq(ex.configs[1].amax_epsilon, 0.0f);
  ck_assert_int_eq(ex.configs[1].pow2, 0);
  ck_assert_int_eq(ex.configs[1].margin, 0);
  /* a list of e4m3 and e5m2 is fine: the format column tells them apart */
  static const fp8_format_sel fmts[2] = {FP8_SEL_E4M3, FP8_SEL_E5M2};
  for (int i = 0; i < 2; i++) {
    const fp8_config *c = &ex.configs[2 + i];
    ck_assert_str_eq(c->label, "c");
    ck_assert_int_eq(c->format, fmts[i]);
    ck_assert_float_eq(c->amax_epsilon, 1e-12f);
    ck_assert_int_eq(c->pow2, 1);
    ck_assert_int_eq(c->margin, -2);
  }
  fp8_experiment_free(&ex);

  /* the block kinds default to E4M3 for every tensor, as TE's MXFP8BlockScaling and
   * Float8BlockScaling (recipe __init__.py: fp8_format = Format.E4M3), torchao's row-wise
   * recipe and DeepSeek-V3 do; and block and rowwise take amax_epsilon (DeepSeek-V3's 1e-4,
   * torchao's 1e-12) */
  path = write_ini("k.ini", "[trace]\npath = synth:small\n"
                            "[recipe.m]\nkind = mxfp8\n[recipe.b]\nkind = block\n"
                            "[recipe.r]\nkind = rowwise\n"
                            "[recipe.be]\nkind = block\namax_epsilon = 1e-4\n"
                            "[recipe.re]\nkind = rowwise\namax_epsilon = 1e-12\nformat = hybrid\n");
  ck_assert_int_eq(fp8_experiment_load(path, &ex, err, sizeof err), FP8_OK);
  ck_assert_uint_eq(ex.nconfigs, 5);
  static const fp8_recipe_kind kinds[5] = {FP8_KIND_MXFP8, FP8_KIND_BLOCK, FP8_KIND_ROWWISE,
                                           FP8_KIND_BLOCK, FP8_KIND_ROWWISE};
  static const float eps[5] = {0.0f, 0.0f, 0.0f, 1e-4f, 1e-12f};
  for (int i = 0; i < 5; i++) {
    ck_assert_int_eq(ex.configs[i].kind, kinds[i]);
    ck_assert_int_eq(ex.configs[i].format, i < 4 ? FP8_SEL_E4M3 : FP8_SEL_HYBRID);
    ck_assert_float_eq(ex.configs[i].amax_epsilon, eps[i]);
  }
  fp8_experiment_free(&ex);

  /* synth_steps / synth_seed with a synth: path */
  path = write_ini("s.ini", "[trace]\npath = synth:x\nsynth_steps = 7\n"
                            "synth_seed = 18446744073709551615\n[recipe.r]\nkind=current\n");
  ck_assert_int_eq(fp8_experiment_load(path, &ex, err, sizeof err), FP8_OK);
  ck_assert_int_eq(ex.synth_steps, 7);
  ck_assert_uint_eq(ex.synth_seed, UINT64_MAX);
  /* the GEMM error's defaults (issue 27): sampled, 64 rows and columns, seed 0 */
  ck_assert_int_eq(ex.gemm, 1);
  ck_assert_int_eq(ex.gemm_sampled, 1);
  ck_assert_int_eq(ex.gemm_sample, 64);
  ck_assert_uint_eq(ex.gemm_seed, 0);
  ck_assert_int_eq(ex.gemm_max_tokens, 1024);
  fp8_experiment_free(&ex);

  path = write_ini("g.ini", "[trace]\npath = t\n[recipe.r]\nkind=current\n[analysis]\n"
                            "gemm_error = exact\ngemm_sample = 2\ngemm_seed = 77\n");
  ck_assert_int_eq(fp8_experiment_load(path, &ex, err, sizeof err), FP8_OK);
  ck_assert_int_eq(ex.gemm_sampled, 0);
  ck_assert_int_eq(ex.gemm_sample, 2);
  ck_assert_uint_eq(ex.gemm_seed, 77);
  fp8_experiment_free(&ex);
  static const char *const bad[][2] = {
      {"gemm_error = Sampled", "g2.ini:6: bad gemm_error \"Sampled\" (expected sampled or exact)"},
      {"gemm_sample = 1", "g2.ini:6: bad gemm_sample \"1\" (expected an integer in 2..65536: the "
                          "output rows and columns sampled per GEMM)"},
      {"gemm_sample = 65537", "g2.ini:6: bad gemm_sample \"65537\""},
      {"gemm_seed = -1", "g2.ini:6: bad gemm_seed \"-1\" (expected an integer >= 0)"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char text[256];
    snprintf(text, sizeof text, "[trace]\npath = t\n[recipe.r]\nkind=current\n[analysis]\n%s\n",
             bad[i][0]);
    path = write_ini("g2.ini", text);
    ck_assert_int_eq(fp8_experiment_load(path, &ex, err, sizeof err), FP8_EINVAL);
    ck_assert_msg(strstr(err, bad[i][1]) != NULL, "%s: %s", bad[i][0], err);
    fp8_experiment_free(&ex);
  }
}
END_TEST

START_TEST(test_paths) {
  char sub[4096];
  snprintf(sub, sizeof sub, "%s/experiments", tmpdir);
  ck_assert_int_eq(mkdir(sub, 0755), 0);
  write_ini("experiments/q.ini", "[trace]\npath = ../traces/a\n[recipe.r]\nkind = current\n"
                                 "[output]\ndir = /abs/out\n");
  /* relative file path, given relative to tmpdir */
  char cwd[4096];
  ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
  ck_assert_int_eq(chdir(tmpdir), 0);
  fp8_experiment ex;
  char err[512];
  ck_assert_int_eq(fp8_experiment_load("experiments/q.ini", &ex, err, sizeof err), FP8_OK);
  ck_assert_str_eq(ex.file, "experiments/q.ini");
  ck_assert_str_eq(ex.base_dir, "experiments");
  ck_assert_str_eq(ex.name, "q");
  ck_assert_str_eq(ex.trace_path, "experiments/../traces/a");
  ck_assert_str_eq(ex.out_dir, "/abs/out");
  fp8_experiment_free(&ex);

  /* a file in the current directory: paths stay as written */
  write_ini("plain", "[trace]\npath = t\n[recipe.r]\nkind = current\n[output]\ndir = o\n");
  ck_assert_int_eq(fp8_experiment_load("plain", &ex, err, sizeof err), FP8_OK);
  ck_assert_str_eq(ex.base_dir, ".");
  ck_assert_str_eq(ex.name, "plain");
  ck_assert_str_eq(ex.trace_path, "t");
  ck_assert_str_eq(ex.out_dir, "o");
  fp8_experiment_free(&ex);
  ck_assert_int_eq(chdir(cwd), 0);
}
END_TEST

START_TEST(test_steps_and_globs) {
  const char *path = write_ini("sel.ini", "[trace]\npath = t\nsteps = 10-20:5\n"
                                          "tensors = blocks.*.fc1.input, *.qkv.*\n"
                                          "[recipe.r]\nkind = delayed\n");
  fp8_experiment ex;
  char err[512];
  ck_assert_int_eq(fp8_experiment_load(path, &ex, err, sizeof err), FP8_OK);
  ck_assert_int_eq(ex.step_first, 10);
  ck_assert_int_eq(ex.step_last, 20);
  ck_assert_int_eq(ex.step_stride, 5);
  static const int sel[] = {10, 15, 20};
  for (int64_t s = 0; s < 30; s++) {
    int want = 0;
    for (int i = 0; i < 3; i++) want |= s == sel[i];
    ck_assert_int_eq(fp8_experiment_step_selected(&ex, s), want);
  }
  ck_assert(fp8_experiment_tensor_selected(&ex, "blocks.3.fc1.input"));
  ck_assert(!fp8_experiment_tensor_selected(&ex, "blocks.3.fc1.weight"));
  ck_assert(fp8_experiment_tensor_selected(&ex, "blocks.0.attn.qkv.grad_output"));
  ck_assert(!fp8_experiment_tensor_selected(&ex, "blocks.0.attn.proj.input"));
  /* against a trace's snapshot steps: one selected is enough; none is an error at the line */
  ck_assert_int_eq(ex.steps_line, 3);
  static const int64_t snaps[3] = {0, 15, 40}, other[3] = {0, 12, 40};
  ck_assert_int_eq(fp8_experiment_check_steps(&ex, snaps, 3, "tr", err, sizeof err), FP8_OK);
  ck_assert_int_eq(fp8_experiment_check_steps(&ex, other, 3, "tr", err, sizeof err), FP8_EINVAL);
  char want[4200];
  snprintf(want, sizeof want, "%s:3: steps = 10-20:5 selects none of the 3 snapshot steps of the "
           "trace tr (0..40)", path);
  ck_assert_str_eq(err, want);
  ck_assert_int_eq(fp8_experiment_check_steps(&ex, NULL, 0, "tr", err, sizeof err), FP8_EINVAL);
  snprintf(want, sizeof want, "%s:3: steps = 10-20:5 selects no snapshot step: the trace tr has no "
           "snapshot", path);
  ck_assert_str_eq(err, want);
  fp8_experiment_free(&ex);

  /* a single step; no tensors key selects everything */
  path = write_ini("one.ini", "[trace]\npath = t\nsteps = 7\n[recipe.r]\nkind = delayed\n");
  ck_assert_int_eq(fp8_experiment_load(path, &ex, err, sizeof err), FP8_OK);
  ck_assert_int_eq(ex.has_steps, 1);
  ck_assert(!fp8_experiment_step_selected(&ex, 6));
  ck_assert(fp8_experiment_step_selected(&ex, 7));
  ck_assert(!fp8_experiment_step_selected(&ex, 8));
  ck_assert(fp8_experiment_tensor_selected(&ex, "anything.input"));
  fp8_experiment_free(&ex);

  /* no steps key: every step */
  path = write_ini("all.ini", "[trace]\npath = t\n[recipe.r]\nkind = delayed\n");
  ck_assert_int_eq(fp8_experiment_load(path, &ex, err, sizeof err), FP8_OK);
  ck_assert_int_eq(ex.steps_line, 0);
  ck_assert_int_eq(fp8_experiment_check_steps(&ex, NULL, 0, "tr", err, sizeof err), FP8_OK);
  ck_assert(fp8_experiment_step_selected(&ex, 0));
  ck_assert(fp8_experiment_step_selected(&ex, 123456789));
  fp8_experiment_free(&ex);

  /* a-b without stride */
  path = write_ini("ab.ini", "[trace]\npath = t\nsteps = 3 - 5\n[recipe.r]\nkind = delayed\n");
  ck_assert_int_eq(fp8_experiment_load(path, &ex, err, sizeof err), FP8_OK);
  ck_assert(!fp8_experiment_step_selected(&ex, 2));
  ck_assert(fp8_experiment_step_selected(&ex, 4));
  ck_assert(!fp8_experiment_step_selected(&ex, 6));
  fp8_experiment_free(&ex);
}
END_TEST

/* [trace] reduce_amax / reduce_group: values, defaults, and the checks made once the trace's
 * ranks are known (fp8_experiment_check_ranks), with their exact messages. */
START_TEST(test_reduce_keys) {
  fp8_experiment ex;
  char err[1024], want[4096 + 1024];
  /* defaults */
  const char *path = write_ini("r0.ini", "[trace]\npath = run\n[recipe.r]\nkind = delayed\n");
  ck_assert_int_eq(fp8_experiment_load(path, &ex, err, sizeof err), FP8_OK);
  ck_assert_int_eq(ex.reduce_amax, 0);
  ck_assert_int_eq(ex.reduce_group, 0);
  ck_assert_int_eq(ex.reduce_amax_line, 0);
  ck_assert_int_eq(ex.reduce_group_line, 0);
  ck_assert_uint_eq(fp8_experiment_reduce_group(&ex, 8), 8);
  ck_assert_int_eq(fp8_experiment_check_ranks(&ex, 0, "run", err, sizeof err), FP8_OK);
  ck_assert_int_eq(fp8_experiment_check_ranks(&ex, 3, "run", err, sizeof err), FP8_OK);
  fp8_experiment_free(&ex);

  /* both keys */
  path = write_ini("r1.ini", "[trace]\npath = run\nreduce_amax = yes\nreduce_group = 2\n"
                             "[recipe.r]\nkind = delayed\n");
  ck_assert_int_eq(fp8_experiment_load(path, &ex, err, sizeof err), FP8_OK);
  ck_assert_int_eq(ex.reduce_amax, 1);
  ck_assert_int_eq(ex.reduce_group, 2);
  ck_assert_int_eq(ex.reduce_amax_line, 3);
  ck_assert_int_eq(ex.reduce_group_line, 4);
  ck_assert_uint_eq(fp8_experiment_reduce_group(&ex, 8), 2);
  ck_assert_int_eq(fp8_experiment_check_ranks(&ex, 4, "run", err, sizeof err), FP8_OK);
  ck_assert_int_eq(fp8_experiment_check_ranks(&ex, 2, "run", err, sizeof err), FP8_OK);
  /* a single-rank trace: the first key in the file is reported */
  ck_assert_int_eq(fp8_experiment_check_ranks(&ex, 0, "run/rank_0", err, sizeof err), FP8_EINVAL);
  snprintf(want, sizeof want, "%s:3: reduce_amax = true needs a multi-rank trace, but run/rank_0 is "
           "a single-rank trace (point path at the folder that holds rank_0/, rank_1/, ...)", path);
  ck_assert_str_eq(err, want);
  /* R not a multiple of reduce_group */
  ck_assert_int_eq(fp8_experiment_check_ranks(&ex, 3, "run", err, sizeof err), FP8_EINVAL);
  snprintf(want, sizeof want, "%s:4: reduce_group = 2 does not divide the 3 ranks of run (expected "
           "one of 1, 3)", path);
  ck_assert_str_eq(err, want);
  ck_assert_int_eq(fp8_experiment_check_ranks(&ex, 1, "run", err, sizeof err), FP8_EINVAL);
  snprintf(want, sizeof want, "%s:4: reduce_group = 2 does not divide the 1 ranks of run (expected "
           "one of 1)", path);
  ck_assert_str_eq(err, want);
  fp8_experiment_free(&ex);

  /* reduce_group first in the file, then reduce_amax = false: reduce_group is reported; a
   * group larger than R does not divide it */
  path = write_ini("r2.ini", "[trace]\nreduce_group = 12\npath = run\nreduce_amax = off\n"
                             "[recipe.r]\nkind = delayed\n");
  ck_assert_int_eq(fp8_experiment_load(path, &ex, err, sizeof err), FP8_OK);
  ck_assert_int_eq(ex.reduce_amax, 0);
  ck_assert_int_eq(ex.reduce_amax_line, 4);
  ck_assert_int_eq(fp8_experiment_check_ranks(&ex, 0, "synth:llm", err, sizeof err), FP8_EINVAL);
  snprintf(want, sizeof want, "%s:2: reduce_group needs a multi-rank trace, but synth:llm is a "
           "single-rank trace (point path at the folder that holds rank_0/, rank_1/, ...)", path);
  ck_assert_str_eq(err, want);
  ck_assert_int_eq(fp8_experiment_check_ranks(&ex, 12, "run", err, sizeof err), FP8_OK);
  ck_assert_int_eq(fp8_experiment_check_ranks(&ex, 24, "run", err, sizeof err), FP8_OK);
  ck_assert_int_eq(fp8_experiment_check_ranks(&ex, 6, "run", err, sizeof err), FP8_EINVAL);
  snprintf(want, sizeof want, "%s:2: reduce_group = 12 does not divide the 6 ranks of run (expected "
           "one of 1, 2, 3, 6)", path);
  ck_assert_str_eq(err, want);
  fp8_experiment_free(&ex);

  /* reduce_amax = false alone states the default: fine on a single-rank trace */
  path = write_ini("r3.ini", "[trace]\npath = t\nreduce_amax = false\n[recipe.r]\nkind = delayed\n");
  ck_assert_int_eq(fp8_experiment_load(path, &ex, err, sizeof err), FP8_OK);
  ck_assert_int_eq(fp8_experiment_check_ranks(&ex, 0, "t", err, sizeof err), FP8_OK);
  fp8_experiment_free(&ex);

  /* the parse errors, whole */
  path = write_ini("r4.ini", "[trace]\npath = t\nreduce_amax = 2\n[recipe.r]\nkind = delayed\n");
  ck_assert_int_eq(fp8_experiment_load(path, &ex, err, sizeof err), FP8_EINVAL);
  snprintf(want, sizeof want, "%s:3: bad reduce_amax \"2\" (expected true or false)", path);
  ck_assert_str_eq(err, want);
  path = write_ini("r5.ini", "[trace]\npath = t\n\nreduce_group = 0\n[recipe.r]\nkind = delayed\n");
  ck_assert_int_eq(fp8_experiment_load(path, &ex, err, sizeof err), FP8_EINVAL);
  snprintf(want, sizeof want, "%s:4: bad reduce_group \"0\" (expected an integer in 1..65536: ranks "
           "per amax reduction group)", path);
  ck_assert_str_eq(err, want);
  path = write_ini("r6.ini", "[trace]\npath = t\nreduce = true\n[recipe.r]\nkind = delayed\n");
  ck_assert_int_eq(fp8_experiment_load(path, &ex, err, sizeof err), FP8_EINVAL);
  snprintf(want, sizeof want, "%s:3: unknown key reduce in [trace] (expected path, steps, tensors, "
           "synth_steps, synth_seed, reduce_amax, reduce_group or reduce_stride)", path);
  ck_assert_str_eq(err, want);
  path = write_ini("r7.ini", "[trace]\npath = t\nreduce_stride = 0\n[recipe.r]\nkind = delayed\n");
  ck_assert_int_eq(fp8_experiment_load(path, &ex, err, sizeof err), FP8_EINVAL);
  snprintf(want, sizeof want, "%s:3: bad reduce_stride \"0\" (expected an integer in 1..65536: "
           "the distance between the ranks of an amax reduction group)", path);
  ck_assert_str_eq(err, want);
  /* strided groups of 2 ranks 2 apart in 8 ranks: {0, 2}, {1, 3}, {4, 6}, {5, 7} */
  path = write_ini("r8.ini", "[trace]\npath = t\nreduce_amax = true\nreduce_group = 2\n"
                             "reduce_stride = 2\n[recipe.r]\nkind = delayed\n");
  ck_assert_int_eq(fp8_experiment_load(path, &ex, err, sizeof err), FP8_OK);
  ck_assert_int_eq(ex.reduce_stride, 2);
  ck_assert_int_eq(ex.reduce_stride_line, 5);
  static const size_t group[8] = {0, 1, 0, 1, 2, 3, 2, 3};
  for (size_t r = 0; r < 8; r++) ck_assert_uint_eq(fp8_experiment_group_of(&ex, 8, r), group[r]);
  fp8_experiment_free(&ex);
}
END_TEST

/* [trace] tensors on a multi-rank trace: globs without '/' look at the name within the rank,
 * globs with '/' at rank_<r>/<name>. */
START_TEST(test_rank_globs) {
  const char *path = write_ini("g.ini", "[trace]\npath = t\ntensors = blocks.*.fc1.input, "
                                        "rank_1/*.weight\n[recipe.r]\nkind = delayed\n");
  fp8_experiment ex;
  char err[512];
  ck_assert_int_eq(fp8_experiment_load(path, &ex, err, sizeof err), FP8_OK);
  ck_assert(fp8_experiment_rank_tensor_selected(&ex, "rank_0/blocks.2.fc1.input", "blocks.2.fc1.input"));
  ck_assert(fp8_experiment_rank_tensor_selected(&ex, "rank_7/blocks.2.fc1.input", "blocks.2.fc1.input"));
  ck_assert(!fp8_experiment_rank_tensor_selected(&ex, "rank_0/blocks.2.fc1.weight", "blocks.2.fc1.weight"));
  ck_assert(fp8_experiment_rank_tensor_selected(&ex, "rank_1/blocks.2.fc1.weight", "blocks.2.fc1.weight"));
  ck_assert(!fp8_experiment_rank_tensor_selected(&ex, "rank_10/blocks.2.fc1.weight", "blocks.2.fc1.weight"));
  /* "*" alone does not reach over the rank prefix in a glob without '/' */
  fp8_experiment_free(&ex);
  path = write_ini("g2.ini", "[trace]\npath = t\ntensors = *1*\n[recipe.r]\nkind = delayed\n");
  ck_assert_int_eq(fp8_experiment_load(path, &ex, err, sizeof err), FP8_OK);
  ck_assert(!fp8_experiment_rank_tensor_selected(&ex, "rank_1/a.input", "a.input"));
  ck_assert(fp8_experiment_rank_tensor_selected(&ex, "rank_0/fc1.input", "fc1.input"));
  fp8_experiment_free(&ex);
}
END_TEST

START_TEST(test_comments_crlf) {
  const char *path = write_ini(
      "c.ini",
      "# a comment\r\n"
      "; another\r\n"
      "   # indented comment\r\n"
      "[trace]   # after a header\r\n"
      "path = traces/run#1   # '#' inside a value is kept, after whitespace it starts a comment\r\n"
      "tensors = a;b, c   ; ';' starts a comment anywhere\r\n"
      "\r\n"
      "  [recipe.x] ; indented header\r\n"
      "   kind = delayed     # indented keys are keys, not continuation lines\r\n"
      "   margin = 1,2#3 ;x\r\n"
      "[recipe.y]\r\n"
      "kind: current\r\n");
  fp8_experiment ex;
  char err[512];
  ck_assert_msg(fp8_experiment_load(path, &ex, err, sizeof err) == FP8_EINVAL, "%s", err);
  /* margin "2#3" is not a number: the '#' is not after whitespace */
  char want[4096 + 16];
  snprintf(want, sizeof want, "%s:10: ", path);
  ck_assert_msg(strncmp(err, want, strlen(want)) == 0, "%s", err);
  ck_assert_ptr_nonnull(strstr(err, "2#3"));
  ck_assert_ptr_null(ex.configs);

  path = write_ini(
      "c2.ini",
      "\xEF\xBB\xBF# BOM first\r\n"
      "[trace]   # after a header\r\n"
      "path = traces/run#1   # comment\r\n"
      "tensors = a, c;b, comment\r\n"
      "\r\n"
      "  [recipe.x] ; indented header\r\n"
      "   kind = delayed     # indented\r\n"
      "   margin = 1,2 ;x\r\n"
      "[recipe.y]\r\n"
      "kind: current\r\n");
  ck_assert_msg(fp8_experiment_load(path, &ex, err, sizeof err) == FP8_OK, "%s", err);
  snprintf(want, sizeof want, "%s/traces/run#1", tmpdir);
  ck_assert_str_eq(ex.trace_path, want);
  ck_assert_uint_eq(ex.ntensor_globs, 2);
  ck_assert_str_eq(ex.tensor_globs[0], "a");
  ck_assert_str_eq(ex.tensor_globs[1], "c");
  ck_assert_uint_eq(ex.nconfigs, 3);
  ck_assert_int_eq(ex.configs[0].margin, 1);
  ck_assert_int_eq(ex.configs[1].margin, 2);
  ck_assert_str_eq(ex.configs[2].label, "y");
  fp8_experiment_free(&ex);
}
END_TEST

/* Lines longer than libinih's 200-byte buffer still parse, and line numbers stay right. */
START_TEST(test_long_line) {
  char text[8192];
  int n = snprintf(text, sizeof text, "[trace]\npath = t\ntensors = ");
  for (int i = 0; i < 60; i++) n += snprintf(text + n, sizeof text - (size_t)n, "%sblk.%d.*", i ? ", " : "", i);
  n += snprintf(text + n, sizeof text - (size_t)n, "\n[recipe.r]\nkind = delayed\nhistory_len = 0\n");
  const char *path = write_ini("long.ini", text);
  fp8_experiment ex;
  char err[512];
  ck_assert_int_eq(fp8_experiment_load(path, &ex, err, sizeof err), FP8_EINVAL);
  char want[4096 + 16];
  snprintf(want, sizeof want, "%s:6: ", path);
  ck_assert_msg(strncmp(err, want, strlen(want)) == 0, "%s", err);

  char *fix = strstr(text, "history_len = 0");
  fix[14] = '2';
  path = write_ini("long.ini", text);
  ck_assert_msg(fp8_experiment_load(path, &ex, err, sizeof err) == FP8_OK, "%s", err);
  ck_assert_uint_eq(ex.ntensor_globs, 60);
  ck_assert_str_eq(ex.tensor_globs[59], "blk.59.*");
  fp8_experiment_free(&ex);
}
END_TEST

START_TEST(test_io_errors) {
  fp8_experiment ex;
  char err[512];
  char path[4096];
  snprintf(path, sizeof path, "%s/missing.ini", tmpdir);
  ck_assert_int_eq(fp8_experiment_load(path, &ex, err, sizeof err), FP8_EIO);
  char want[4200];
  snprintf(want, sizeof want, "%s: cannot open: No such file or directory", path);
  ck_assert_str_eq(err, want);
  ck_assert_ptr_null(ex.file);
  fp8_experiment_free(&ex); /* safe after a failed load */
  fp8_experiment_free(&ex);

  /* a directory opens but cannot be read */
  ck_assert_int_eq(fp8_experiment_load(tmpdir, &ex, err, sizeof err), FP8_EIO);
  ck_assert_ptr_nonnull(strstr(err, "cannot read"));
}
END_TEST

/* ---------------------------------------------------------------- bad files */

typedef struct {
  const char *text;
  int line;
  const char *word; /* a word of the message */
} bad_case;

#define T "[trace]\npath = t\n"
#define D "[recipe.r]\nkind = delayed\n"
static const bad_case bad_cases[] = {
    /* sections */
    {"[recipe.r]\nkind = delayed\n", 0, "no [trace] section"},
    {T, 0, "no [recipe"},
    {T D "[foo]\n", 5, "unknown section"},
    {T D "[trace]\npath = u\n", 5, "given twice"},
    {T D "[recipe.r]\nkind = current\n", 5, "given twice"},
    {T "[output]\ndir = a\n[output]\n" D, 5, "given twice"},
    {T "[recipe.]\nkind = delayed\n", 3, "empty recipe label"},
    {T "[recipe.a b]\nkind = delayed\n", 3, "bad character"},
    {T "[recipe.a0123456789012345678901234567890123456789012345678901234567890123]\n"
       "kind = delayed\n",
     3, "too long"},
    {"[trace]\n\n\n" D, 1, "no path"},
    {T "[recipe.r]\nformat = e4m3\n\n", 3, "no kind"},
    {"kind = delayed\n" T D, 1, "outside any section"},
    /* syntax */
    {T "[recipe.r\nkind = delayed\n", 3, "syntax error"},
    {T D "history_len\n", 5, "syntax error"},
    {T "[trace] x\n" D, 3, "unexpected text"},
    /* keys */
    {T D "foo = 1\n", 5, "unknown key foo"},
    {T "unknown = 1\n" D, 3, "unknown key"},
    {T "[output]\npath = x\n" D, 4, "unknown key"},
    {T D "margin = 1\nmargin = 2\n", 6, "given twice"},
    {T "[recipe.r]\nhistory_len = 4\nkind = current\n", 4, "not a key of kind current"},
    /* amax_epsilon: current, block and rowwise (TE's Float8BlockScaling, torchao); MXFP8's
     * E8M0 scale has no epsilon in TE, delayed scaling none either */
    {T "[recipe.r]\nkind = mxfp8\namax_epsilon = 1e-4\n", 5, "not a key of kind mxfp8"},
    /* kind bf16 casts nothing: no key but kind (format has no meaning); flush_budget a fraction */
    {T "[recipe.r]\nkind = bf16\nformat = e4m3\n", 5, "format is not a key of kind bf16"},
    {T "[recipe.r]\nkind = bf16\nmargin = 1\n", 5, "margin is not a key of kind bf16"},
    {T D "[analysis]\nflush_budget = 2\n", 6, "bad flush_budget"},
    {T D "[analysis]\nflush_budget = -0.1\n", 6, "bad flush_budget"},
    {T D "[analysis]\ncost_tokens = -1\n", 6, "bad cost_tokens"},
    {T D "[analysis]\ncost_tokens = 1e6\n", 6, "bad cost_tokens"},
    {T "[recipe.r]\nkind = delayed\namax_epsilon = 1e-4\n", 5, "not a key of kind delayed"},
    {T "[recipe.r]\nkind = block\namax_epsilon = -1\n", 5, "amax_epsilon"},
    {T "[recipe.r]\nkind = rowwise\namax_epsilon = 1e-12, 0\n", 5, "single value"},
    {T "[recipe.r]\npow2 = true\nformat = e4m3\nkind = delayed\n", 4,
     "not a key of kind delayed"},
    {T "[recipe.r]\nkind = delayed, current\n", 4, "kind"},
    {T "[recipe.r]\nkind = eager\n", 4, "bad kind"},
    /* values */
    {T D "format = \n", 5, "empty value"},
    {T D "margin = 1,,2\n", 5, "empty item"},
    {T D "margin = 1,\n", 5, "empty item"},
    {T D "margin = 1, 2, 1\n", 5, "duplicate value"},
    {T D "format = e4m3, E4M3\n", 5, "duplicate value"},
    {T D "format = e3m4\n", 5, "bad format"},
    {T D "history_len = 0\n", 5, "history_len"},
    {T D "history_len = 1048577\n", 5, "history_len"},
    {T D "history_len = 12abc\n", 5, "history_len"},
    {T D "history_len = 99999999999999999999\n", 5, "history_len"},
    {T D "margin = 65\n", 5, "margin"},
    {T D "margin = -65\n", 5, "margin"},
    {T D "margin = 1.5\n", 5, "margin"},
    {T D "amax_compute = mean\n", 5, "amax_compute"},
    {T "[recipe.r]\nkind = current\namax_epsilon = -1\n", 5, "amax_epsilon"},
    {T "[recipe.r]\nkind = current\namax_epsilon = nan\n", 5, "amax_epsilon"},
    {T "[recipe.r]\nkind = current\namax_epsilon = inf\n", 5, "amax_epsilon"},
    {T "[recipe.r]\nkind = current\namax_epsilon = 1e39\n", 5, "amax_epsilon"},
    {T "[recipe.r]\nkind = current\npow2 = maybe\n", 5, "pow2"},
    {T "[recipe.r]\nkind = current\namax_epsilon = 0, 1\n", 5, "one [recipe.*] section per"},
    {T "[recipe.r]\nkind = current\npow2 = true, false\n", 5, "single value"},
    {T "[recipe.r]\nmargin = 0, 1\nkind = current\n", 4, "single value"},
    /* [trace] */
    {"[trace]\npath = synth:\n" D, 2, "empty synth preset"},
    {T "steps = 5-3\n" D, 3, "steps"},
    {T "steps = 0-10:0\n" D, 3, "stride"},
    {T "steps = -1-10\n" D, 3, ">= 0"},
    {T "steps = 1-x\n" D, 3, "steps"},
    {T "steps = 4:2\n" D, 3, "steps"},
    {T "tensors = a, , b\n" D, 3, "empty glob"},
    {T "tensors = a, a\n" D, 3, "duplicate"},
    {"[trace]\npath = synth:p\nsynth_steps = 0\n" D, 3, "synth_steps"},
    {"[trace]\npath = synth:p\nsynth_seed = -1\n" D, 3, "synth_seed"},
    {T D "history_len = 1-2\n", 5, "history_len"},
    {T "steps = 0-1\nsteps = 0-2\n" D, 4, "given twice"},
    {T "reduce_amax = maybe\n" D, 3, "bad reduce_amax \"maybe\" (expected true or false)"},
    {T "reduce_amax = true, false\n" D, 3, "bad reduce_amax"},
    {T "reduce_group = 0\n" D, 3, "bad reduce_group \"0\""},
    {T "reduce_group = -2\n" D, 3, "bad reduce_group"},
    {T "reduce_group = 1.5\n" D, 3, "bad reduce_group"},
    {T "reduce_group = two\n" D, 3, "bad reduce_group"},
    {T "reduce_group = 65537\n" D, 3, "1..65536"},
    {T "reduce_group = 2\nreduce_group = 2\n" D, 4, "given twice"},
    {T "[recipe.r]\nkind = current\nformat = hybrid, e4m3, e5m2, e4m3\n", 5, "duplicate"},
    /* a format list with hybrid and a format it resolves to for some role: the rows of those
     * tensors could not be told apart (steps.csv shows the resolved format), in every kind */
    {T D "format = hybrid, e4m3\n", 5,
     "bad format list \"hybrid, e4m3\": hybrid casts the forward roles (input, weight, output) to "
     "e4m3 too, so their rows could not be told apart (steps.csv shows the resolved format): use "
     "one [recipe.*] section per format"},
    {T D "format = e5m2, hybrid\n", 5,
     "hybrid casts the backward roles (grad_output, grad_input) to e5m2 too"},
    {T D "history_len = 1, 2\nformat = e4m3, e5m2, hybrid\n", 6, "forward roles (input, weight, output) to e4m3"},
    {T "[recipe.r]\nkind = current\nformat = hybrid, e5m2\n", 5, "bad format list"},
    {T "[recipe.r]\nformat = e4m3, hybrid\nkind = mxfp8\n", 4, "bad format list"},
    {T "[recipe.r]\nkind = block\nformat = hybrid, e4m3\n", 5, "bad format list"},
    {T "[recipe.r]\nkind = rowwise\nformat = hybrid, e5m2\n", 5, "bad format list"},
    /* [recipe.*] tensors and label (issue 14) */
    {T D "tensors = x.*, \n", 5, "empty glob in tensors = x.*,"},
    {T D "tensors = a, b, a\n", 5, "duplicate value \"a\" in tensors"},
    {T D "label = a b\n", 5,
     "bad character ' ' in label a b (a single recipe label; allowed: A-Z a-z 0-9 _ . -)"},
    {T D "label = a0123456789012345678901234567890123456789012345678901234567890123\n", 5,
     "label a0123456789012345678901234567890123456789012345678901234567890123 too long (65 "
     "characters, at most 63)"},
    {T D "label = x\nlabel = y\n", 6, "key label given twice in [recipe.r] (first at line 5)"},
    {T D "tensor = x\n", 5,
     "unknown key tensor in [recipe.r] (expected kind, format, history_len, margin, "
     "amax_compute, amax_epsilon, pow2, scale_rounding, block, rht, rounding, block_scale, e4m3_max, sr_seed, tensors or label)"},
    {T "[recipe.a]\nkind = current\ntensors = x.*\n[recipe.b]\nlabel = a\nkind = delayed\n"
       "history_len = 16, 128\n",
     9,
     "[recipe.b] shares the recipe label a with [recipe.a] (line 3), so it must be one "
     "configuration, but it expands to 2: each tensor has one row per step under a label (sweep "
     "in sections of their own labels)"},
    {T "[recipe.a]\nkind = delayed\nmargin = 0, 1\ntensors = x.*\n[recipe.b]\nlabel = a\n"
       "kind = current\n",
     5, "[recipe.a] shares the recipe label a with [recipe.b] (line 7), so it must be one "
        "configuration, but it expands to 2"},
    {T "[recipe.a]\nkind = current\nlabel = m\ntensors = x.*\n[recipe.b]\nlabel = m\n"
       "kind = delayed\nformat = e4m3, e5m2\n",
     10, "[recipe.b] shares the recipe label m with [recipe.a] (line 3)"},
    {T "[recipe.a]\nkind = current\n[recipe.b]\nlabel = a\nkind = delayed\ntensors = x.*\n", 5,
     "[recipe.b] can take no tensor: [recipe.a] (line 3) comes before it with the label a and "
     "has no tensors key, so it takes every tensor (give the section that takes the rest last)"},
    /* the FP4 kinds (issue 29) */
    {T "[recipe.r]\nkind = nvfp4\nformat = e4m3\n", 5, "format is not a key of kind nvfp4"},
    {T "[recipe.r]\nkind = mxfp4\nformat = e4m3\n", 5, "format is not a key of kind mxfp4"},
    {T "[recipe.r]\nkind = nvfp4\nblock = 1x128\n", 5, "bad block \"1x128\" (expected 1x16, 16x16 or auto)"},
    {T "[recipe.r]\nkind = block\nblock = 16x16\n", 5, "bad block \"16x16\" (expected 1x128, 128x128 or auto)"},
    {T "[recipe.r]\nkind = nvfp4\nrounding = up\n", 5, "bad rounding \"up\" (expected nearest, stochastic or auto)"},
    {T "[recipe.r]\nkind = nvfp4\nblock_scale = 4over6\n", 5, "bad block_scale \"4over6\" (expected max6, 4over6_mae or 4over6_mse)"},
    {T "[recipe.r]\nkind = nvfp4\ne4m3_max = 240\n", 5, "bad e4m3_max \"240\" (expected 256 or 448)"},
    {T "[recipe.r]\nkind = nvfp4\nsr_seed = -3\n", 5, "bad sr_seed \"-3\" (expected an integer >= 0)"},
    {T "[recipe.r]\nkind = nvfp4\nrht = maybe\n", 5, "bad rht \"maybe\""},
    {T "[recipe.r]\nkind = nvfp4\nrht = true, false\n", 5, "rht must be a single value for kind nvfp4"},
    {T "[recipe.r]\nkind = mxfp4\nrht = true\n", 5, "rht is not a key of kind mxfp4"},
    {T "[recipe.r]\nkind = current\nsr_seed = 1\n", 5, "sr_seed is not a key of kind current"},
    {T D "[analysis]\nfp4_gemm_ratio = 0.5\n", 6, "bad fp4_gemm_ratio \"0.5\" (expected a number in 1..1e6"},
    /* the first error in the file wins, whatever order the checks run in */
    {T "[recipe.r]\nhistory_len = 0\nfoo = 1\nkind = delayed\n", 4, "history_len"},
    {T "[recipe.r]\nhistory_len = 4\nkind = current\n[bad]\n", 4, "not a key"},
    {T "[recipe.r]\nfoo\nformat = e4m3\n", 4, "syntax error"},
};
#undef T
#undef D

START_TEST(test_bad_files) {
  const bad_case *bc = &bad_cases[_i];
  char name[64];
  snprintf(name, sizeof name, "bad%02d.ini", _i);
  const char *path = write_ini(name, bc->text);
  fp8_experiment ex;
  char err[512] = "";
  int rc = fp8_experiment_load(path, &ex, err, sizeof err);
  ck_assert_msg(rc == FP8_EINVAL, "case %d: status %d, err %s", _i, rc, err);
  char want[4200];
  /* line 0: the file as a whole, without a line number that no line has */
  if (bc->line) snprintf(want, sizeof want, "%s:%d: ", path, bc->line);
  else snprintf(want, sizeof want, "%s: ", path);
  ck_assert_msg(strncmp(err, want, strlen(want)) == 0, "case %d: want prefix %s, got %s", _i,
                want, err);
  ck_assert_msg(strstr(err, bc->word) != NULL, "case %d: want \"%s\" in %s", _i, bc->word, err);
  ck_assert_msg(strchr(err, '\n') == NULL, "case %d: more than one line: %s", _i, err);
  /* the struct is zeroed and free is safe */
  ck_assert_ptr_null(ex.file);
  ck_assert_ptr_null(ex.configs);
  ck_assert_uint_eq(ex.nconfigs, 0);
  fp8_experiment_free(&ex);
}
END_TEST

/* The FP4 kinds' keys (issue 29): TE's defaults when absent (16x16 weights, the transform,
 * stochastic rounding of the gradients, max6, E4M3 maximum 448, or 256 under 4over6), and every
 * configuration's settings (fp8_config_settings) read back as a section give it again, field
 * for field. */
START_TEST(test_fp4_keys_and_settings) {
  const char *path = write_ini("fp4.ini",
      "[trace]\npath = t\n"
      "[recipe.nv]\nkind = nvfp4\n"
      "[recipe.nv46]\nkind = nvfp4\nblock_scale = 4over6_mae\nblock = 1x16\nrht = off\n"
      "rounding = nearest\nsr_seed = 12345678901\n"
      "[recipe.nv46b]\nkind = nvfp4\nblock_scale = 4over6_mse\ne4m3_max = 448\nblock = 16x16\n"
      "rounding = stochastic\n"
      "[recipe.mx]\nkind = mxfp4\nscale_rounding = floor\n"
      "[recipe.d]\nkind = delayed\nformat = e5m2\nhistory_len = 7\nmargin = -2\n"
      "amax_compute = most_recent\n"
      "[recipe.c]\nkind = current\nformat = e4m3\nmargin = 3\namax_epsilon = 1e-12\npow2 = true\n"
      "[recipe.m8]\nkind = mxfp8\nformat = e5m2\nscale_rounding = floor\n"
      "[recipe.b]\nkind = block\nblock = 1x128\npow2 = false\namax_epsilon = 0.0001\n"
      "[recipe.rw]\nkind = rowwise\namax_epsilon = 1e-12\n"
      "[recipe.keep]\nkind = bf16\n");
  fp8_experiment ex;
  char err[512];
  ck_assert_msg(fp8_experiment_load(path, &ex, err, sizeof err) == FP8_OK, "%s", err);
  ck_assert_uint_eq(ex.nconfigs, 10);
  const fp8_config *nv = &ex.configs[0], *n46 = &ex.configs[1], *n46b = &ex.configs[2];
  ck_assert_int_eq(nv->kind, FP8_KIND_NVFP4);
  ck_assert_int_eq(nv->nvfp4_block, FP8_NVFP4_BLOCK_AUTO);
  ck_assert_int_eq(nv->rht, 1);
  ck_assert_int_eq(nv->fp4_rounding, FP8_FP4_ROUND_AUTO);
  ck_assert_int_eq(nv->fp4_rule, 0);
  ck_assert(nv->e4m3_max == 448.0f && nv->sr_seed == 0);
  ck_assert(n46->fp4_rule == 1 && n46->e4m3_max == 256.0f && n46->rht == 0 &&
            n46->nvfp4_block == FP8_NVFP4_BLOCK_1X16 && n46->fp4_rounding == FP8_FP4_ROUND_NEAREST &&
            n46->sr_seed == 12345678901ull);
  ck_assert(n46b->fp4_rule == 2 && n46b->e4m3_max == 448.0f &&
            n46b->nvfp4_block == FP8_NVFP4_BLOCK_16X16 && n46b->fp4_rounding == FP8_FP4_ROUND_STOCHASTIC);
  ck_assert(ex.configs[3].kind == FP8_KIND_MXFP4 && ex.configs[3].mx_rounding == FP8_MX_ROUND_FLOOR);
  /* the simulator's parameters: auto is 16x16 and stochastic for the roles TE gives them */
  fp8_block_params w = fp8_config_block_params(nv, FP8_ROLE_WEIGHT, FP8_E4M3, FP8_DTYPE_BF16);
  fp8_block_params g = fp8_config_block_params(nv, FP8_ROLE_GRAD_OUTPUT, FP8_E4M3, FP8_DTYPE_BF16);
  fp8_block_params x = fp8_config_block_params(nv, FP8_ROLE_INPUT, FP8_E4M3, FP8_DTYPE_BF16);
  ck_assert(w.square && !w.stochastic && g.stochastic && !g.square && !x.stochastic && !x.square);
  ck_assert(w.kind == FP8_BLOCK_KIND_NVFP4 && w.block_len == 16 && fp8_block_params_check(&w) == FP8_OK);
  /* settings, written as a section and read back */
  char text[8192] = "[trace]\npath = t\n";
  for (size_t c = 0; c < ex.nconfigs; c++) {
    char st[512];
    fp8_config_settings(&ex.configs[c], st, sizeof st);
    size_t at = strlen(text);
    snprintf(text + at, sizeof text - at, "[recipe.%s]\n%s\n", ex.configs[c].label, st);
  }
  fp8_experiment ex2;
  const char *p2 = write_ini("fp4_again.ini", text);
  ck_assert_msg(fp8_experiment_load(p2, &ex2, err, sizeof err) == FP8_OK, "%s\n%s", err, text);
  ck_assert_uint_eq(ex2.nconfigs, ex.nconfigs);
  for (size_t c = 0; c < ex.nconfigs; c++) {
    const fp8_config *a = &ex.configs[c], *b = &ex2.configs[c];
    ck_assert_msg(a->kind == b->kind && a->format == b->format && a->history_len == b->history_len &&
                  a->margin == b->margin && a->amax_compute == b->amax_compute &&
                  a->amax_epsilon == b->amax_epsilon && a->pow2 == b->pow2 &&
                  a->mx_rounding == b->mx_rounding && a->nvfp4_block == b->nvfp4_block &&
                  a->rht == b->rht && a->fp4_rounding == b->fp4_rounding &&
                  a->fp4_rule == b->fp4_rule && a->e4m3_max == b->e4m3_max &&
                  a->sr_seed == b->sr_seed &&
                  (a->kind != FP8_KIND_BLOCK || a->block_shape == b->block_shape),
                  "configuration %s differs after its settings: %s", a->label, text);
  }
  fp8_experiment_free(&ex2);
  fp8_experiment_free(&ex);
}
END_TEST

/* [recipe.*] tensors and label (issue 14): the sections, their globs and labels, and the
 * configurations' labels and sections. */
START_TEST(test_mixed_sections) {
  const char *path = write_ini("mixed.ini",
                               "[trace]\npath = t\n"
                               "[recipe.hot]\nkind = current\nlabel = mixed\n"
                               "tensors = layers.1.fc1.output, rank_0/*.fc2.*\n"
                               "[recipe.sweep]\nkind = delayed\nhistory_len = 1, 16\n"
                               "tensors = *.qkv.*\n"
                               "[recipe.rest]\nkind = delayed\nlabel = mixed\nhistory_len = 16\n"
                               "margin = 1\n");
  fp8_experiment ex;
  char err[512] = "";
  ck_assert_msg(fp8_experiment_load(path, &ex, err, sizeof err) == FP8_OK, "%s", err);
  ck_assert_uint_eq(ex.nconfigs, 4);
  ck_assert_uint_eq(ex.nsections, 3);
  const fp8_recipe_section *s = ex.sections;
  ck_assert_str_eq(s[0].name, "hot");
  ck_assert_str_eq(s[0].label, "mixed");
  ck_assert_int_eq(s[0].line, 3);
  ck_assert_int_eq(s[0].label_line, 5);
  ck_assert_int_eq(s[0].tensors_line, 6);
  ck_assert_uint_eq(s[0].nglobs, 2);
  ck_assert_str_eq(s[0].globs[0], "layers.1.fc1.output");
  ck_assert_str_eq(s[0].globs[1], "rank_0/*.fc2.*");
  ck_assert_uint_eq(s[0].label_count, 2);
  ck_assert_str_eq(s[1].label, "sweep");
  ck_assert_int_eq(s[1].label_line, 0);
  ck_assert_uint_eq(s[1].label_count, 1);
  ck_assert_uint_eq(s[1].first_config, 1);
  ck_assert_uint_eq(s[1].nconfigs, 2);
  ck_assert_int_eq(s[1].list_line, 9);
  ck_assert_str_eq(s[2].name, "rest");
  ck_assert_uint_eq(s[2].nglobs, 0);
  ck_assert_int_eq(s[2].tensors_line, 0);
  ck_assert_uint_eq(s[2].label_first, 0);
  ck_assert_uint_eq(s[2].label_count, 2);
  /* the rows of both sections carry the label */
  ck_assert_str_eq(ex.configs[0].label, "mixed");
  ck_assert_int_eq(ex.configs[0].kind, FP8_KIND_CURRENT);
  check_delayed(&ex.configs[1], "sweep", FP8_SEL_HYBRID, 1, 0, FP8_AMAX_MAX);
  check_delayed(&ex.configs[2], "sweep", FP8_SEL_HYBRID, 16, 0, FP8_AMAX_MAX);
  check_delayed(&ex.configs[3], "mixed", FP8_SEL_HYBRID, 16, 1, FP8_AMAX_MAX);
  size_t want_sec[4] = {0, 1, 1, 2};
  for (int c = 0; c < 4; c++) ck_assert_uint_eq(ex.config_section[c], want_sec[c]);
  /* the section globs follow [trace] tensors' rank rules */
  ck_assert(fp8_experiment_section_matches(&s[0], "layers.1.fc1.output", "layers.1.fc1.output"));
  ck_assert(fp8_experiment_section_matches(&s[0], "rank_1/layers.1.fc1.output", "layers.1.fc1.output"));
  ck_assert(fp8_experiment_section_matches(&s[0], "rank_0/layers.0.fc2.input", "layers.0.fc2.input"));
  ck_assert(!fp8_experiment_section_matches(&s[0], "rank_1/layers.0.fc2.input", "layers.0.fc2.input"));
  ck_assert(fp8_experiment_section_matches(&s[2], "anything", "anything"));
  fp8_experiment_free(&ex);
  /* a label of one section only renames its rows; a label may name another section's name */
  path = write_ini("mixed.ini", "[trace]\npath = t\n[recipe.a]\nkind = delayed\nlabel = b\n"
                                "margin = 0, 1\n");
  ck_assert_msg(fp8_experiment_load(path, &ex, err, sizeof err) == FP8_OK, "%s", err);
  ck_assert_str_eq(ex.configs[1].label, "b");
  ck_assert_uint_eq(ex.sections[0].label_count, 1);
  fp8_experiment_free(&ex);
  path = write_ini("mixed.ini", "[trace]\npath = t\n[recipe.a]\nkind = current\ntensors = x\n"
                                "[recipe.b]\nkind = delayed\nlabel = a\n");
  ck_assert_msg(fp8_experiment_load(path, &ex, err, sizeof err) == FP8_OK, "%s", err);
  ck_assert_str_eq(ex.configs[1].label, "a");
  ck_assert_uint_eq(ex.sections[1].label_count, 2);
  fp8_experiment_free(&ex);
  /* the shipped example */
  char shipped[4096];
  snprintf(shipped, sizeof shipped, "%s/experiments/mixed.ini", tu_source_dir());
  ck_assert_msg(fp8_experiment_load(shipped, &ex, err, sizeof err) == FP8_OK, "%s", err);
  ck_assert_uint_eq(ex.nconfigs, 3);
  ck_assert_str_eq(ex.configs[0].label, "mixed");
  ck_assert_int_eq(ex.configs[0].kind, FP8_KIND_CURRENT);
  check_delayed(&ex.configs[1], "mixed", FP8_SEL_HYBRID, 16, 1, FP8_AMAX_MAX);
  check_delayed(&ex.configs[2], "te_default", FP8_SEL_HYBRID, 1024, 0, FP8_AMAX_MAX);
  ck_assert_uint_eq(ex.sections[0].nglobs, 3);
  ck_assert_uint_eq(ex.sections[1].nglobs, 0);
  fp8_experiment_free(&ex);
}
END_TEST

/* More than 4096 configurations in total. */
START_TEST(test_too_many_configs) {
  char text[16384];
  int n = snprintf(text, sizeof text, "[trace]\npath = t\n[recipe.a]\nkind = delayed\n"
                                      "format = e4m3, e5m2\nmargin = 0, 1\nhistory_len = ");
  for (int i = 1; i <= 1024; i++) n += snprintf(text + n, sizeof text - (size_t)n, "%s%d", i > 1 ? "," : "", i);
  /* 2 * 2 * 1024 = 4096: exactly the limit */
  n += snprintf(text + n, sizeof text - (size_t)n, "\n");
  const char *path = write_ini("many.ini", text);
  fp8_experiment ex;
  char err[512];
  ck_assert_msg(fp8_experiment_load(path, &ex, err, sizeof err) == FP8_OK, "%s", err);
  ck_assert_uint_eq(ex.nconfigs, 4096);
  check_delayed(&ex.configs[4095], "a", FP8_SEL_E5M2, 1024, 1, FP8_AMAX_MAX);
  fp8_experiment_free(&ex);
  /* one more in a second section */
  snprintf(text + n, sizeof text - (size_t)n, "\n[recipe.b]\nkind = current\n");
  path = write_ini("many.ini", text);
  ck_assert_int_eq(fp8_experiment_load(path, &ex, err, sizeof err), FP8_EINVAL);
  char want[4200];
  snprintf(want, sizeof want, "%s:9: ", path);
  ck_assert_msg(strncmp(err, want, strlen(want)) == 0, "%s", err);
  ck_assert_ptr_nonnull(strstr(err, "too many configurations"));
  /* a single section over the limit, whose product would overflow without a cap */
  n = snprintf(text, sizeof text, "[trace]\npath = t\n[recipe.a]\nkind = delayed\nhistory_len = ");
  for (int i = 1; i <= 1000; i++) n += snprintf(text + n, sizeof text - (size_t)n, "%s%d", i > 1 ? "," : "", i);
  n += snprintf(text + n, sizeof text - (size_t)n, "\nmargin = ");
  for (int i = -10; i <= 10; i++) n += snprintf(text + n, sizeof text - (size_t)n, "%s%d", i > -10 ? "," : "", i);
  snprintf(text + n, sizeof text - (size_t)n, "\n");
  path = write_ini("many.ini", text);
  ck_assert_int_eq(fp8_experiment_load(path, &ex, err, sizeof err), FP8_EINVAL);
  snprintf(want, sizeof want, "%s:3: ", path);
  ck_assert_msg(strncmp(err, want, strlen(want)) == 0, "%s", err);
}
END_TEST

int main(void) {
  Suite *s = suite_create("experiment");
  TCase *tc = tcase_create("load");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_example);
  tcase_add_test(tc, test_key_order_independent);
  tcase_add_test(tc, test_defaults);
  tcase_add_test(tc, test_paths);
  tcase_add_test(tc, test_steps_and_globs);
  tcase_add_test(tc, test_reduce_keys);
  tcase_add_test(tc, test_rank_globs);
  tcase_add_test(tc, test_comments_crlf);
  tcase_add_test(tc, test_long_line);
  tcase_add_test(tc, test_io_errors);
  tcase_add_loop_test(tc, test_bad_files, 0, (int)(sizeof bad_cases / sizeof bad_cases[0]));
  tcase_add_test(tc, test_too_many_configs);
  tcase_add_test(tc, test_mixed_sections);
  tcase_add_test(tc, test_fp4_keys_and_settings);
  suite_add_tcase(s, tc);
  return tu_run_suite(s);
}
