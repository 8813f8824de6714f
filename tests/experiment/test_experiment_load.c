/* test_experiment_load.c: experiment files (src/experiment): the documented example expands to its
 * configurations in canonical order, key order, defaults, path resolution, step, tensor and rank
 * selection, the reduce keys, comments and CRLF, long lines, I/O errors. */
#include <check.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "experiment.h"
#include "testutil.h"
#include "experiment_helpers.h"
#include "tu_dir.h"

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

START_TEST(test_example) {
  const char *path = write_ini("gpt.ini", EXAMPLE);

  fp8_experiment ex;
  char err[512] = "";
  ck_assert_int_eq(fp8_experiment_load(path, &ex, err, sizeof err), FP8_OK);
  ck_assert_str_eq(err, "");
  ck_assert_str_eq(ex.file, path);
  ck_assert_str_eq(ex.base_dir, g_dir);
  ck_assert_str_eq(ex.name, "gpt");
  char want[4096];
  snprintf(want, sizeof want, "%s/traces/gpt_small", g_dir);
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
  snprintf(want, sizeof want, "%s/out/gpt_small", g_dir);
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
  snprintf(sub, sizeof sub, "%s/experiments", g_dir);
  ck_assert_int_eq(mkdir(sub, 0755), 0);
  write_ini("experiments/q.ini", "[trace]\npath = ../traces/a\n[recipe.r]\nkind = current\n"
                                 "[output]\ndir = /abs/out\n");
  /* relative file path, given relative to g_dir */
  char cwd[4096];
  ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
  ck_assert_int_eq(chdir(g_dir), 0);
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

  /* reduce_group with reduce_amax = false reduces nothing: an error at its line (issue 41) */
  path = write_ini("r2f.ini", "[trace]\nreduce_group = 12\npath = run\nreduce_amax = off\n"
                              "[recipe.r]\nkind = delayed\n");
  ck_assert_int_eq(fp8_experiment_load(path, &ex, err, sizeof err), FP8_EINVAL);
  snprintf(want, sizeof want, "%s:2: reduce_group does nothing with reduce_amax = false (line 4): "
           "it shapes the rank groups over which reduce_amax reduces delayed scaling's amax, and "
           "no amax is reduced (set reduce_amax = true, or remove reduce_group)", path);
  ck_assert_str_eq(err, want);
  /* reduce_group first in the file, then reduce_amax = true: reduce_group is reported; a
   * group larger than R does not divide it */
  path = write_ini("r2.ini", "[trace]\nreduce_group = 12\npath = run\nreduce_amax = on\n"
                             "[recipe.r]\nkind = delayed\n");
  ck_assert_int_eq(fp8_experiment_load(path, &ex, err, sizeof err), FP8_OK);
  ck_assert_int_eq(ex.reduce_amax, 1);
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
           "synth_steps, synth_seed, reduce_amax, reduce_group, reduce_stride or warm_history)", path);
  ck_assert_str_eq(err, want);
  /* [trace] warm_history: true by default, a boolean, an error at its line otherwise */
  path = write_ini("w1.ini", "[trace]\npath = t\n[recipe.r]\nkind = delayed\n");
  ck_assert_int_eq(fp8_experiment_load(path, &ex, err, sizeof err), FP8_OK);
  ck_assert_int_eq(ex.warm_history, 1);
  ck_assert_int_eq(ex.warm_history_line, 0);
  fp8_experiment_free(&ex);
  path = write_ini("w2.ini", "[trace]\npath = t\nsteps = 10-20\nwarm_history = false\n"
                             "[recipe.r]\nkind = delayed\n");
  ck_assert_int_eq(fp8_experiment_load(path, &ex, err, sizeof err), FP8_OK);
  ck_assert_int_eq(ex.warm_history, 0);
  ck_assert_int_eq(ex.warm_history_line, 4);
  fp8_experiment_free(&ex);
  path = write_ini("w3.ini", "[trace]\npath = t\n\nwarm_history = lukewarm\n[recipe.r]\n"
                             "kind = delayed\n");
  ck_assert_int_eq(fp8_experiment_load(path, &ex, err, sizeof err), FP8_EINVAL);
  snprintf(want, sizeof want, "%s:4: bad warm_history \"lukewarm\" (expected true or false)", path);
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
  snprintf(want, sizeof want, "%s/traces/run#1", g_dir);
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
  snprintf(path, sizeof path, "%s/missing.ini", g_dir);
  ck_assert_int_eq(fp8_experiment_load(path, &ex, err, sizeof err), FP8_EIO);
  char want[4200];
  snprintf(want, sizeof want, "%s: cannot open: No such file or directory", path);
  ck_assert_str_eq(err, want);
  ck_assert_ptr_null(ex.file);
  fp8_experiment_free(&ex); /* safe after a failed load */
  fp8_experiment_free(&ex);

  /* a directory opens but cannot be read */
  ck_assert_int_eq(fp8_experiment_load(g_dir, &ex, err, sizeof err), FP8_EIO);
  ck_assert_ptr_nonnull(strstr(err, "cannot read"));
}
END_TEST

TU_MAIN("experiment_load", "load", setup, teardown, 0, test_example, test_key_order_independent,
        test_defaults, test_paths, test_steps_and_globs, test_reduce_keys, test_rank_globs,
        test_comments_crlf, test_long_line, test_io_errors)
