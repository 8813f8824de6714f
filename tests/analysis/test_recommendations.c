/* test_recommendations.c: the recommendations of src/analysis (rule by rule), analysis.csv and
 * recommendations.csv, and the whole analysis on a run of the real binary. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "testutil.h"
#include "analysis_helpers.h"

/* ------------------------------------------------------------------ recommendations */

/* Two steps (0 and 10) of one tensor and configuration: n = 1000 each, `ovf` overflows per
 * step, SNR `snr` on both steps (so the median is snr). */
static void add_cfg(sbuf *b, const char *tensor, const char *role, const char *cfg, int ovf,
                    double snr) {
  char rest[160];
  snprintf(rest, sizeof rest, "1,448,1000,0,0,%d,0,0,1e-06,%.9g", ovf, snr);
  add_row(b, tensor, role, 0, cfg, rest);
  add_row(b, tensor, role, 10, cfg, rest);
}

#define H1 "d,delayed,e4m3,1,0,max"
#define H16 "d,delayed,e4m3,16,0,max"
#define H16M1 "d,delayed,e4m3,16,1,max"
#define H16MR "d,delayed,e4m3,16,0,most_recent"
#define CUR "c,current,e4m3,,,"

static sbuf rec_csv(void) {
  sbuf b = with_header();
  /* a.input: H1 and H16 tie at 30 dB -> smaller history_len wins */
  add_cfg(&b, "a.input", "input", H1, 0, 30);
  add_cfg(&b, "a.input", "input", H16, 0, 30);
  add_cfg(&b, "a.input", "input", H16M1, 0, 29);
  add_cfg(&b, "a.input", "input", CUR, 0, 31);
  /* b.input: H1 overflows (0.1% > budget); H16M1 has the best median among the others */
  add_cfg(&b, "b.input", "input", H1, 1, 35);
  add_cfg(&b, "b.input", "input", H16, 0, 28);
  add_cfg(&b, "b.input", "input", H16M1, 0, 28.5);
  add_cfg(&b, "b.input", "input", CUR, 0, 31);
  /* e.input: every delayed configuration overflows: current, and the role setting misses it */
  add_cfg(&b, "e.input", "input", H1, 2, 20);
  add_cfg(&b, "e.input", "input", H16, 1, 20);
  add_cfg(&b, "e.input", "input", H16M1, 3, 20);
  add_cfg(&b, "e.input", "input", CUR, 0, 25);
  /* c.output: overflows everywhere; current in the run */
  add_cfg(&b, "c.output", "output", H1, 4, 20);
  add_cfg(&b, "c.output", "output", H16, 4, 21);
  add_cfg(&b, "c.output", "output", CUR, 0, 26);
  /* d.output: overflows everywhere; no current scaling for it in the run */
  add_cfg(&b, "d.output", "output", H1, 4, 20);
  add_cfg(&b, "d.output", "output", H16, 5, 21);
  /* w.weight: max and most_recent tie: max wins */
  add_cfg(&b, "w.weight", "weight", H16MR, 0, 31);
  add_cfg(&b, "w.weight", "weight", H16, 0, 31);
  return b;
}

static const fp8_recommendation *rec_named(const fp8_recommendations *r, fp8_rec_scope scope,
                                           const char *name) {
  for (size_t i = 0; i < r->nrecs; i++)
    if (r->recs[i].scope == scope && strcmp(r->recs[i].name, name) == 0) return &r->recs[i];
  ck_abort_msg("no recommendation for %s", name);
  return NULL;
}

START_TEST(recommendations_rules) {
  sbuf b = rec_csv();
  fp8_steps_table t;
  fp8_analysis a;
  fp8_recommendations r;
  char err[256];
  ck_assert_int_eq(parse(&b, &t, err, sizeof err), FP8_OK);
  ck_assert_int_eq(fp8_analysis_compute(&t, &a, err, sizeof err), FP8_OK);
  fp8_budgets bud = {.value = 1e-5, .step = 0.01};
  ck_assert_int_eq(fp8_analysis_recommend(&a, &bud, &r, err, sizeof err), FP8_OK);
  ck_assert_uint_eq(r.ntensor_recs, 6);
  ck_assert_uint_eq(r.nrecs, 6 + 3 + 1); /* roles input, weight, output; the model */
  ck_assert_str_eq(r.recs[0].name, "a.input");
  ck_assert_str_eq(r.recs[6].name, "input");
  ck_assert_str_eq(r.recs[7].name, "weight");
  ck_assert_str_eq(r.recs[8].name, "output");

  const fp8_recommendation *x = rec_named(&r, FP8_REC_TENSOR, "a.input");
  ck_assert(x->in_run && x->meets_budget && x->key.kind == FP8_KIND_DELAYED);
  ck_assert_int_eq(x->key.history_len, 1); /* tie at 30 dB: the smaller history */
  ck_assert_str_eq(x->decided_by, "parameters");
  ck_assert_int_eq(x->covers, 3);
  ck_assert_int_eq(x->of, 3);
  ck_assert_ptr_nonnull(x->stats);
  ck_assert_double_eq(x->snr_median, 30.0);

  /* b.input: H16 margin 0 fits, so margin 1 (28.5 dB) is not a candidate at history 16: the
   * smallest margin that fits is the only candidate */
  x = rec_named(&r, FP8_REC_TENSOR, "b.input");
  ck_assert(x->meets_budget && x->key.history_len == 16 && x->key.margin == 0);
  ck_assert_int_eq(x->covers, 2);
  ck_assert_double_eq(x->snr_median, 28.0);
  ck_assert_double_eq(x->snr_p5, 28.0);
  ck_assert_str_eq(x->decided_by, "only fit");

  x = rec_named(&r, FP8_REC_TENSOR, "c.output");
  ck_assert(!x->meets_budget && x->in_run && x->key.kind == FP8_KIND_CURRENT);
  ck_assert_str_eq(x->key.recipe, "c");
  ck_assert_int_eq(x->covers, 0);
  ck_assert_double_eq(x->best_delayed_overflow, 4.0 / 1000.0);
  ck_assert_str_eq(x->note, "no delayed configuration fits the budgets 1e-05 of the values and "
                            "0.01 of the steps (the lowest delayed clipped rate is 0.004): use "
                            "current scaling (recipe c; e4m3); p5 SNR 26.00 dB");
  ck_assert_str_eq(x->decided_by, "fallback");

  x = rec_named(&r, FP8_REC_TENSOR, "d.output");
  ck_assert(!x->meets_budget && !x->in_run && x->key.kind == FP8_KIND_CURRENT);
  ck_assert_ptr_null(x->key.recipe);
  ck_assert(strstr(x->note, "current scaling (not in this run)") != NULL);
  ck_assert(strstr(x->note, "no delayed configuration fits the budgets") != NULL);

  x = rec_named(&r, FP8_REC_TENSOR, "w.weight");
  ck_assert(x->meets_budget && x->key.amax_compute == FP8_AMAX_MAX);
  ck_assert_str_eq(x->decided_by, "parameters");

  /* role input: H16 and H16M1 both fit a and b (2 of 3), H1 only a: at history 16 margin 0
   * is the smallest with the most; it fits more tensors than H1 */
  x = rec_named(&r, FP8_REC_ROLE, "input");
  ck_assert(x->meets_budget && x->key.kind == FP8_KIND_DELAYED);
  ck_assert_int_eq(x->key.history_len, 16);
  ck_assert_int_eq(x->key.margin, 0);
  ck_assert_int_eq(x->covers, 2);
  ck_assert_int_eq(x->of, 3);
  ck_assert_str_eq(x->decided_by, "fits");
  ck_assert_double_eq_tol(x->snr_p5, (30 + 28 + 20) / 3.0, 1e-12);
  ck_assert_uint_eq(x->nmisfits, 1);
  ck_assert_str_eq(x->misfits[0], "e.input");
  ck_assert_double_eq_tol(x->snr_median, (30 + 28 + 20) / 3.0, 1e-12); /* mean over all 3 */
  ck_assert_double_eq(x->overflow_rate, 1.0 / 1000.0);                  /* worst: e.input */
  ck_assert(strstr(x->note, "does not fit: e.input") != NULL);

  /* the model: only H16 m0 ran on all six tensors (a whole-model setting must have), and it fits
   * a, b and w (3 of 6); the misfits in tensor order */
  ck_assert_int_eq(r.recs[9].scope, FP8_REC_MODEL);
  x = &r.recs[9];
  ck_assert_str_eq(x->name, "all tensors");
  ck_assert(x->meets_budget && x->key.history_len == 16 && x->key.margin == 0 &&
            x->key.amax_compute == FP8_AMAX_MAX);
  ck_assert_int_eq(x->covers, 3);
  ck_assert_int_eq(x->of, 6);
  ck_assert_str_eq(x->decided_by, "only fit");
  ck_assert_uint_eq(x->nmisfits, 3);
  ck_assert_str_eq(x->misfits[0], "c.output");
  ck_assert_str_eq(x->misfits[1], "d.output");
  ck_assert_str_eq(x->misfits[2], "e.input");

  /* role output: nothing fits -> current, run by 1 of 2 tensors */
  x = rec_named(&r, FP8_REC_ROLE, "output");
  ck_assert(!x->meets_budget && x->in_run && x->key.kind == FP8_KIND_CURRENT);
  ck_assert_int_eq(x->covers, 1);
  ck_assert_int_eq(x->of, 2);
  ck_assert(strstr(x->note, "no delayed configuration fits the budgets for any output tensor") !=
            NULL);
  fp8_recommendations_free(&r);

  /* generous budgets (every step of these clips: the step budget must allow all of them):
   * every tensor gets delayed scaling; H1 now wins b.input (35 dB against 28) */
  bud = (fp8_budgets){.value = 0.01, .step = 1.0};
  ck_assert_int_eq(fp8_analysis_recommend(&a, &bud, &r, err, sizeof err), FP8_OK);
  x = rec_named(&r, FP8_REC_TENSOR, "b.input");
  ck_assert(x->meets_budget && x->key.history_len == 1);
  ck_assert_str_eq(x->decided_by, "p5 SNR");
  x = rec_named(&r, FP8_REC_TENSOR, "c.output");
  ck_assert(x->meets_budget && x->key.history_len == 16); /* 21 dB beats 20 */
  /* role input: H1 and H16 m0 fit all three; mean p5 (30+35+20)/3 beats (30+28+20)/3 */
  x = rec_named(&r, FP8_REC_ROLE, "input");
  ck_assert_int_eq(x->covers, 3);
  ck_assert_int_eq(x->key.history_len, 1);
  ck_assert_str_eq(x->decided_by, "p5 SNR");
  ck_assert_uint_eq(x->nmisfits, 0);
  fp8_recommendations_free(&r);
  /* the value budget alone is not enough: one clipping step in two is over a 0.01 step budget */
  bud = (fp8_budgets){.value = 0.01, .step = 0.01};
  ck_assert_int_eq(fp8_analysis_recommend(&a, &bud, &r, err, sizeof err), FP8_OK);
  x = rec_named(&r, FP8_REC_TENSOR, "b.input");
  ck_assert(x->meets_budget && x->key.history_len == 16);
  fp8_recommendations_free(&r);

  bud = (fp8_budgets){.value = NAN, .step = 0.01};
  ck_assert_int_eq(fp8_analysis_recommend(&a, &bud, &r, err, sizeof err), FP8_EINVAL);
  bud = (fp8_budgets){.value = 1e-5, .step = -1};
  ck_assert_int_eq(fp8_analysis_recommend(&a, &bud, &r, err, sizeof err), FP8_EINVAL);
  fp8_analysis_free(&a);
  fp8_steps_csv_free(&t);
  free(b.s);
}
END_TEST

/* ------------------------------------------------------------------ output files */

START_TEST(csv_outputs) {
  sbuf b = rec_csv();
  /* one group with a known full analysis.csv line (z sorts last) */
  add_row(&b, "z.grad_output", "grad_output", 3, "d,delayed,e5m2,2,1,most_recent",
          "57344,0.5,100,0,0,1,2,3,1e-06,12.5");
  fp8_steps_table t;
  fp8_analysis a;
  fp8_recommendations r;
  char err[256];
  ck_assert_int_eq(parse(&b, &t, err, sizeof err), FP8_OK);
  ck_assert_int_eq(fp8_analysis_compute(&t, &a, err, sizeof err), FP8_OK);
  fp8_budgets bud = {.value = FP8_ANALYSIS_OVERFLOW_BUDGET, .step = FP8_ANALYSIS_STEP_BUDGET};
  ck_assert_int_eq(fp8_analysis_recommend(&a, &bud, &r, err, sizeof err), FP8_OK);
  char *dir = tu_mkdtemp();
  ck_assert_int_eq(fp8_analysis_write(&a, dir, err, sizeof err), FP8_OK);
  ck_assert_int_eq(fp8_recommend_write(&r, dir, err, sizeof err), FP8_OK);
  char path[512];
  snprintf(path, sizeof path, "%s/analysis.csv", dir);
  char *text = tu_read_file(path, NULL);
  ck_assert_ptr_nonnull(text);
  /* the header, as analysis.h's fp8_schema_analysis declares it */
  static const char analysis_header[] =
      "tensor,role,recipe,kind,format,history_len,margin,amax_compute,steps,overflow_rate,"
      "underflow_rate,subnormal_rate,steps_with_overflow,longest_overflow_run,"
      "first_overflow_step,snr_mean,snr_median,snr_p5,snr_min,snr_ci_lo,snr_ci_hi,lag_median,"
      "lag_worst,snr_slope,warmup_steps,clipped_rate,steps_with_clipped,cos_sim_median,"
      "overshoot_max,stream_steps,stream_overflow_steps,stream_clipped_steps,overshoot_p50,"
      "overshoot_p95,stream_overshoot_max,clip_step_rate\n";
  ck_assert(strncmp(text, analysis_header, strlen(analysis_header)) == 0);
  int lines = 0;
  for (char *p = text; *p; p++) lines += *p == '\n';
  ck_assert_int_eq(lines, 1 + (int)t.ngroups);
  /* e5m2 margin 1: scaled max 28672, jit scale of 57344 is 0.5 -> lag 0 */
  ck_assert(strstr(text, "\nz.grad_output,grad_output,d,delayed,e5m2,2,1,most_recent,1,0.01,0.02,"
                         "0.03,1,1,3,12.5,12.5,12.5,12.5,12.5,12.5,0,0,nan,"
                         /* a file without clipped: its overflow stands in; no stream */
                         "0,0.01,1,nan,nan,,,,,,,1\n") != NULL);
  ck_assert(strstr(text, "\na.input,input,c,current,e4m3,,,,2,0,0,0,0,0,,31,31,31,31,31,31,0,0,0,"
                         "0,0,0,nan,nan,,,,,,,0\n") != NULL);
  free(text);
  snprintf(path, sizeof path, "%s/recommendations.csv", dir);
  text = tu_read_file(path, NULL);
  ck_assert_ptr_nonnull(text);
  /* the header, as analysis.h's fp8_schema_recommendations declares it */
  static const char recommend_header[] =
      "scope,name,recipe,kind,format,history_len,margin,amax_compute,overflow_rate,snr_median,"
      "covers,of,note,clipped_rate,clip_step_rate,snr_p5,underflow_rate,decided_by\n";
  ck_assert(strncmp(text, recommend_header, strlen(recommend_header)) == 0);
  ck_assert(strstr(text, "\ntensor,a.input,d,delayed,e4m3,1,0,max,0,30,3,3,delayed scaling") != NULL);
  ck_assert(strstr(text, ",0,0,30,0,parameters\n") != NULL); /* a.input's last columns */
  ck_assert(strstr(text, "\ntensor,d.output,,current,,,,,,,0,2,no delayed configuration") != NULL);
  ck_assert(strstr(text, "\nrole,input,d,delayed,e4m3,16,0,max,0.001,26,2,3,") != NULL);
  ck_assert(strstr(text, "\nrole,output,c,current,e4m3,,,,0,26,1,2,") != NULL);
  free(text);
  /* no temporary file is left behind */
  char *out = NULL;
  char cmd[600];
  snprintf(cmd, sizeof cmd, "ls -A '%s'", dir);
  ck_assert_int_eq(tu_run(cmd, &out), 0);
  ck_assert_str_eq(out, "analysis.csv\nrecommendations.csv\n");
  free(out);
  /* a missing directory is FP8_EIO naming the file */
  char bad[600];
  snprintf(bad, sizeof bad, "%s/no/such", dir);
  ck_assert_int_eq(fp8_analysis_write(&a, bad, err, sizeof err), FP8_EIO);
  ck_assert(strstr(err, "analysis.csv") != NULL);
  fp8_recommendations_free(&r);
  fp8_analysis_free(&a);
  fp8_steps_csv_free(&t);
  tu_rmtree(dir);
  free(dir);
  free(b.s);
}
END_TEST

/* The real thing: fp8lab run on a tiny synthetic trace, then the whole pipeline on its
 * steps.csv; cross-checks against summary.csv (same rates, computed independently by the runner). */
START_TEST(pipeline_on_a_run) {
  char *dir = tu_mkdtemp();
  char ini[600], cmd[2048], path[700], err[512];
  snprintf(ini, sizeof ini, "%s/exp.ini", dir);
  const char *exp = "[trace]\npath = synth:spiky\nsynth_steps = 40\n"
                    "[recipe.delayed]\nkind = delayed\nformat = hybrid\nhistory_len = 1, 16\n"
                    "margin = 0, 1\n[recipe.jit]\nkind = current\nformat = hybrid\n"
                    /* no warm-up: summary.csv's totals (all snapshot steps) are then the
                     * analysis's (which leaves warm-up rows out) */
                    "[analysis]\nwarmup_steps = 0\n";
  ck_assert_int_eq(tu_write_file(ini, exp, strlen(exp)), 0);
  snprintf(cmd, sizeof cmd, "'%s' run '%s' --out '%s/out' --quiet", tu_bin(), ini, dir);
  char *out = NULL;
  int rc = tu_run(cmd, &out);
  ck_assert_msg(rc == 0, "%s", out);
  free(out);
  snprintf(path, sizeof path, "%s/out/steps.csv", dir);
  fp8_steps_table t;
  fp8_analysis a;
  fp8_recommendations r;
  ck_assert_msg(fp8_steps_csv_load(path, &t, err, sizeof err) == FP8_OK, "%s", err);
  ck_assert_uint_eq(t.ngroups, t.ntensors * 5);
  ck_assert_int_eq(fp8_analysis_compute(&t, &a, err, sizeof err), FP8_OK);
  fp8_budgets bud = {.value = 1e-5, .step = 0.01};
  ck_assert_int_eq(fp8_analysis_recommend(&a, &bud, &r, err, sizeof err), FP8_OK);
  ck_assert_uint_eq(r.ntensor_recs, t.ntensors);
  /* summary.csv's rows are in the same order as our groups: compare the rates */
  snprintf(path, sizeof path, "%s/out/summary.csv", dir);
  char *sum = tu_read_file(path, NULL);
  ck_assert_ptr_nonnull(sum);
  char *line = strchr(sum, '\n') + 1;
  for (size_t i = 0; i < a.nstats; i++) {
    char *f[32];
    int nf = 0;
    char *end = strchr(line, '\n');
    *end = 0;
    for (char *p = line;; p++) {
      if (nf == 0 || p[-1] == 0) f[nf++] = p;
      if (!*p) break;
      if (*p == ',') *p = 0;
    }
    const fp8_group_stats *s = &a.stats[i];
    ck_assert_str_eq(f[0], s->group->tensor);
    ck_assert_str_eq(f[2], s->group->key.recipe);
    ck_assert_int_eq(atoll(f[8]), s->steps);
    ck_assert_double_eq_tol(atof(f[15]), s->overflow_rate, 1e-8 * s->overflow_rate + 1e-300);
    ck_assert_double_eq_tol(atof(f[16]), s->underflow_rate, 1e-8 * s->underflow_rate + 1e-300);
    ck_assert_int_eq(atoll(f[18]), s->steps_with_overflow);
    double snr_min = atof(f[21]);
    ck_assert_double_eq_tol(s->snr_min, snr_min > 200 ? 200 : snr_min, 1e-6);
    ck_assert(s->snr_min <= s->snr_p5 && s->snr_p5 <= s->snr_median);
    if (s->group->key.kind == FP8_KIND_CURRENT) ck_assert_double_eq(s->lag_worst, 0.0);
    line = end + 1;
  }
  free(sum);
  ck_assert_int_eq(fp8_analysis_write(&a, dir, err, sizeof err), FP8_OK);
  ck_assert_int_eq(fp8_recommend_write(&r, dir, err, sizeof err), FP8_OK);
  fp8_recommendations_free(&r);
  fp8_analysis_free(&a);
  fp8_steps_csv_free(&t);
  tu_rmtree(dir);
  free(dir);
}
END_TEST

TU_MAIN("recommendations", "recommend", NULL, NULL, 120, recommendations_rules, csv_outputs,
        pipeline_on_a_run)
