/* test_recipe_sections.c: [recipe.*] sections: the FP4 kinds' keys and their defaults (issue 29),
 * and several sections under one label with tensors selections (a mixed recipe, issue 14). */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "experiment.h"
#include "testutil.h"
#include "experiment_helpers.h"
#include "tu_dir.h"

/* The FP4 kinds' keys (issue 29): TE's defaults when absent (16x16 weights, the transform,
 * stochastic rounding of the gradients, max6, E4M3 maximum 448, or 256 under 4over6), and every
 * configuration's settings (fp8_config_settings) read back as a section give it again, field
 * for field. */
START_TEST(test_fp4_keys_and_settings) {
  const char *path = write_ini("fp4.ini",
      "[trace]\npath = t\n"
      "[recipe.nv]\nkind = nvfp4\n"
      "[recipe.nv46]\nkind = nvfp4\nblock_scale = 4over6_mae\nblock = 1x16\nrht = off\n"
      "rounding = nearest\n"
      "[recipe.nv46b]\nkind = nvfp4\nblock_scale = 4over6_mse\ne4m3_max = 448\nblock = 16x16\n"
      "rounding = stochastic\nsr_seed = 12345678901\n"
      "[recipe.mx]\nkind = mxfp4\nscale_rounding = floor\n"
      "[recipe.d]\nkind = delayed\nformat = e5m2\nhistory_len = 7\nmargin = -2\n"
      "amax_compute = most_recent\n"
      "[recipe.du]\nkind = delayed\nhistory_len = 4\nunfused_update = on\n"
      "[recipe.c]\nkind = current\nformat = e4m3\nmargin = 3\namax_epsilon = 1e-12\npow2 = true\n"
      "[recipe.m8]\nkind = mxfp8\nformat = e5m2\nscale_rounding = floor\n"
      "[recipe.b]\nkind = block\nblock = 1x128\npow2 = false\namax_epsilon = 0.0001\n"
      "[recipe.rw]\nkind = rowwise\namax_epsilon = 1e-12\n"
      "[recipe.keep]\nkind = bf16\n");
  fp8_experiment ex;
  char err[512];
  ck_assert_msg(fp8_experiment_load(path, &ex, err, sizeof err) == FP8_OK, "%s", err);
  ck_assert_uint_eq(ex.nconfigs, 11);
  /* unfused_update (issue 40): one value for the section's whole sweep, off by default */
  ck_assert(ex.configs[4].unfused_update == 0 && ex.configs[5].unfused_update == 1 &&
            ex.configs[6].unfused_update == 0);
  char dst[512];
  fp8_config_settings(&ex.configs[5], dst, sizeof dst);
  ck_assert_str_eq(dst, "kind = delayed\nformat = hybrid\nhistory_len = 4\nmargin = 0\n"
                        "amax_compute = max\nunfused_update = true");
  fp8_config_settings(&ex.configs[4], dst, sizeof dst);
  ck_assert_ptr_null(strstr(dst, "unfused"));
  const fp8_config *nv = &ex.configs[0], *n46 = &ex.configs[1], *n46b = &ex.configs[2];
  ck_assert_int_eq(nv->kind, FP8_KIND_NVFP4);
  ck_assert_int_eq(nv->nvfp4_block, FP8_NVFP4_BLOCK_AUTO);
  ck_assert_int_eq(nv->rht, 1);
  ck_assert_int_eq(nv->fp4_rounding, FP8_FP4_ROUND_AUTO);
  ck_assert_int_eq(nv->fp4_rule, 0);
  ck_assert(nv->e4m3_max == 448.0f && nv->sr_seed == 0);
  ck_assert(n46->fp4_rule == 1 && n46->e4m3_max == 256.0f && n46->rht == 0 &&
            n46->nvfp4_block == FP8_NVFP4_BLOCK_1X16 && n46->fp4_rounding == FP8_FP4_ROUND_NEAREST &&
            n46->sr_seed == 0);
  ck_assert(n46b->fp4_rule == 2 && n46b->e4m3_max == 448.0f && n46b->sr_seed == 12345678901ull &&
            n46b->nvfp4_block == FP8_NVFP4_BLOCK_16X16 && n46b->fp4_rounding == FP8_FP4_ROUND_STOCHASTIC);
  /* sr_seed is written back only where something is drawn (issue 41: beside rounding =
   * nearest the loader refuses it) */
  fp8_config_settings(n46, dst, sizeof dst);
  ck_assert_msg(strstr(dst, "sr_seed") == NULL, "%s", dst);
  fp8_config_settings(n46b, dst, sizeof dst);
  ck_assert_msg(strstr(dst, "\nsr_seed = 12345678901") != NULL, "%s", dst);
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
                  a->sr_seed == b->sr_seed && a->unfused_update == b->unfused_update &&
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

TU_MAIN("recipe_sections", "load", setup, teardown, 0, test_mixed_sections,
        test_fp4_keys_and_settings)
