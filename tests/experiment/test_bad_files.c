/* test_bad_files.c: a table of bad experiment files, each refused with its exact "file:line:" and
 * a word of the message, and an expansion into too many configurations. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "experiment.h"
#include "testutil.h"
#include "experiment_helpers.h"
#include "tu_dir.h"

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
    /* unfused_update (issue 40): delayed only, a boolean, one value per section (no column) */
    {T D "unfused_update = true, false\n", 5, "unfused_update must be a single value"},
    {T D "unfused_update = sometimes\n", 5, "bad unfused_update"},
    {T "[recipe.r]\nkind = current\nunfused_update = true\n", 5, "not a key of kind current"},
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
    {T "warm_history = maybe\n" D, 3, "bad warm_history \"maybe\" (expected true or false)"},
    {T "reduce_group = 0\n" D, 3, "bad reduce_group \"0\""},
    {T "reduce_group = -2\n" D, 3, "bad reduce_group"},
    {T "reduce_group = 1.5\n" D, 3, "bad reduce_group"},
    {T "reduce_group = two\n" D, 3, "bad reduce_group"},
    {T "reduce_group = 65537\n" D, 3, "1..65536"},
    {T "reduce_amax = true\nreduce_group = 2\nreduce_group = 2\n" D, 5, "given twice"},
    /* reduce_group / reduce_stride without reduce_amax = true reduce nothing (issue 41) */
    {T "reduce_group = 2\n" D, 3, "reduce_group does nothing without reduce_amax = true"},
    {T "reduce_amax = no\nreduce_stride = 2\n" D, 4,
     "reduce_stride does nothing with reduce_amax = false (line 3)"},
    /* sr_seed with rounding = nearest draws nothing (issue 41) */
    {T "[recipe.r]\nkind = nvfp4\nrounding = nearest\nsr_seed = 1\n", 6,
     "sr_seed does nothing with rounding = nearest (line 5)"},
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
     "amax_compute, unfused_update, amax_epsilon, pow2, scale_rounding, block, rht, rounding, "
     "block_scale, e4m3_max, sr_seed, tensors or label)"},
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
  Suite *s = suite_create("bad_files");
  TCase *tc = tcase_create("load");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_loop_test(tc, test_bad_files, 0, (int)(sizeof bad_cases / sizeof bad_cases[0]));
  tcase_add_test(tc, test_too_many_configs);
  suite_add_tcase(s, tc);
  return tu_run_suite(s);
}
