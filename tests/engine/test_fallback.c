/* test_fallback.c: the runner's per-op fallback (the path a GPU run takes) with an engine that
 * declines what the GPU declines (block kinds, e5m2 GEMMs): the composite engine hands those to
 * its CPU engine, and every file equals a plain CPU run's, multi-rank traces and any thread count
 * included. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "engine_cpu.h"
#include "engine_impl.h"
#include "experiment.h"
#include "runner.h"
#include "tu_dir.h"
#include "tu_traces.h"
#include "util.h"

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
  int rc = fp8_engine_cpu_create(&p, out, err, errlen);
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
  const char *path = path_in(ini);
  char err[FP8_ERRLEN];
  fp8_experiment ex;
  ck_assert_int_eq(fp8_experiment_load(path, &ex, err, sizeof err), FP8_OK);
  fp8_run_options opt = {.out_dir = out_dir, .threads = 1, .quiet = 1, .engine = declining_create};
  fp8_run_summary sum;
  int rc = fp8_run_experiment(&ex, &opt, &sum, err, sizeof err);
  ck_assert_msg(rc == FP8_OK, "%s", err);
  ck_assert_str_eq(sum.engine, "declining");
  fp8_experiment_free(&ex);
}

/* The fallback path (the one a GPU run takes): an engine that declines the block kinds leaves
 * them to the composite's CPU engine; the files are those of a plain CPU run. */
START_TEST(test_engine_path_same_output) {
  write_tiny_trace();
  put_text("exp.ini", "[trace]\npath = trace\n[recipe.d]\nkind = delayed\nhistory_len = 1, 2\n"
                      "[recipe.c]\nkind = current\n[recipe.mx]\nkind = mxfp8\n[output]\ndir = out\n");
  char *out;
  ck_assert_int_eq(run_cli(&out, "run exp.ini --quiet --no-report --out direct"), 0);
  free(out);
  const char *od = path_in("viaengine");
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
  put_text("exp.ini", "[trace]\npath = trace\n[recipe.d]\nkind = delayed\nhistory_len = 1, 4\n"
                      "format = hybrid\n[recipe.d5]\nkind = delayed\nhistory_len = 1, 4\nformat = e5m2\n"
                      "[recipe.c]\nkind = current\nformat = e4m3, e5m2\n"
                      "[recipe.mx]\nkind = mxfp8\n[analysis]\ngemm = true\ngemm_max_tokens = 24\n"
                      "[output]\ndir = out\n");
  ck_assert_int_eq(run_cli(&out, "run exp.ini --quiet --no-report --out direct"), 0);
  free(out);
  const char *od = path_in("viaengine");
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
  const char *ini = path_in("exp.ini");
  char err[FP8_ERRLEN];
  fp8_experiment ex;
  ck_assert_int_eq(fp8_experiment_load(ini, &ex, err, sizeof err), FP8_OK);
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
}
END_TEST

/* The fallback path and any number of threads give the same multi-rank files. */
START_TEST(test_ranks_engine_threads) {
  char *out;
  ck_assert_int_eq(run_cli(&out, "synth llm run/rank_0 --steps 8 --seed 1"), 0);
  free(out);
  ck_assert_int_eq(run_cli(&out, "synth spiky run/rank_1 --steps 8 --seed 2"), 0);
  free(out);
  put_text("exp.ini", "[trace]\npath = run\nreduce_amax = true\n[recipe.d]\nkind = delayed\n"
                      "history_len = 1, 4\n[recipe.c]\nkind = current\n[recipe.mx]\nkind = mxfp8\n"
                      "[analysis]\ngemm = false\n[output]\ndir = out\n");
  ck_assert_int_eq(run_cli(&out, "run exp.ini --quiet --no-report --threads 1 --out t1"), 0);
  free(out);
  ck_assert_int_eq(run_cli(&out, "run exp.ini --quiet --no-report --threads 3 --out t3"), 0);
  free(out);
  const char *od = path_in("viaengine");
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
}
END_TEST

TU_MAIN("fallback", "cli", setup, teardown, 120, test_engine_gemm_same_output,
        test_engine_path_same_output, test_ranks_engine_threads)
