/* experiment_sections.c: the [trace], [output] and [analysis] sections of an experiment file
 * (experiment.h lists their keys): each is checked when the section ends, once all its keys
 * are known (experiment.c collects them), with the value parsers of experiment_values.c.
 */
#include "experiment_internal.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensorcore.h" /* fp8_tc_model_parse */
#include "trace.h" /* FP8_RANK_LIMIT */

void fp8_exp_globs(exp_ctx *c, const exp_entry *e, char ***globs, size_t *n) {
  *globs = NULL;
  *n = 0;
  exp_list l;
  int rc = fp8_exp_list_split(e->value, &l);
  if (rc < 0) {
    c->nomem = 1;
    return;
  }
  if (rc > 0) {
    fp8_exp_fail(c, e->line, "empty glob in tensors = %s", e->value);
    goto done;
  }
  for (size_t j = 0; j < l.n; j++)
    for (size_t k = 0; k < j; k++)
      if (strcmp(l.items[j], l.items[k]) == 0) {
        fp8_exp_fail(c, e->line, "duplicate value \"%s\" in tensors", l.items[j]);
        goto done;
      }
  if (!(*globs = calloc(l.n ? l.n : 1, sizeof **globs))) {
    c->nomem = 1;
    goto done;
  }
  for (size_t j = 0; j < l.n; j++) (*globs)[(*n)++] = fp8_exp_strdup(c, l.items[j]);
done:
  fp8_exp_list_free(&l);
}

/* [trace] tensors: a comma list of distinct globs. */
static void trace_tensors(exp_ctx *c, const exp_entry *e) {
  fp8_exp_globs(c, e, &c->ex->tensor_globs, &c->ex->ntensor_globs);
  c->ex->tensors_line = e->line;
}

const char *const fp8_experiment_analysis_keys[FP8_EXP_AKEY_COUNT] = {
    [FP8_EXP_AKEY_OVERFLOW_BUDGET] = "overflow_budget",
    [FP8_EXP_AKEY_STEP_BUDGET] = "step_budget",
    [FP8_EXP_AKEY_FLUSH_BUDGET] = "flush_budget",
    [FP8_EXP_AKEY_ROUTERS] = "routers",
    [FP8_EXP_AKEY_FP4_GEMM_RATIO] = "fp4_gemm_ratio",
    [FP8_EXP_AKEY_WARMUP_STEPS] = "warmup_steps",
    [FP8_EXP_AKEY_GEMM] = "gemm",
    [FP8_EXP_AKEY_GEMM_ERROR] = "gemm_error",
    [FP8_EXP_AKEY_GEMM_SAMPLE] = "gemm_sample",
    [FP8_EXP_AKEY_GEMM_SEED] = "gemm_seed",
    [FP8_EXP_AKEY_GEMM_MAX_TOKENS] = "gemm_max_tokens",
    [FP8_EXP_AKEY_COST_TOKENS] = "cost_tokens",
    [FP8_EXP_AKEY_TENSOR_CORE] = "tensor_core",
};

/* Section values: a fraction in 0..1, or an integer in min..max; else "bad <key> "<value>"
 * (expected <expect>)" at the entry's line. A fraction below the smallest normal double
 * (flush_budget = 1e-320) is in 0..1: strtod gives its nearest double (a subnormal, or 0 below
 * the smallest subnormal) and sets ERANGE, which here is no error; an ERANGE of overflow is
 * (HUGE_VAL, out of 0..1 anyway). */
static void parse_fraction(exp_ctx *c, const exp_entry *e, double *dst, const char *expect) {
  char *end;
  errno = 0;
  double v = strtod(e->value, &end);
  int range = errno == ERANGE && !(fabs(v) <= DBL_MIN);
  if ((errno && errno != ERANGE) || range || end == e->value || *end || !(v >= 0.0 && v <= 1.0))
    fp8_exp_fail(c, e->line, "bad %s \"%s\" (expected %s)", e->key, e->value, expect);
  else *dst = v;
}

/* An integer in min..max into *dst; returns 1 when it was one. */
static int parse_count(exp_ctx *c, const exp_entry *e, int64_t min, int64_t max, int64_t *dst,
                       const char *expect) {
  int64_t v;
  if (fp8_exp_parse_i64(e->value, &v) || v < min || v > max) {
    fp8_exp_fail(c, e->line, "bad %s \"%s\" (expected %s)", e->key, e->value, expect);
    return 0;
  }
  *dst = v;
  return 1;
}

/* reduce_group and reduce_stride shape the groups over which reduce_amax takes the max of
 * delayed scaling's amax: without reduce_amax = true nothing is reduced and they would be
 * recorded (run.json, advice.ini) though they did nothing, so each is an error at its line, as
 * a key of another kind is. Not when reduce_amax itself was given a bad value (that error is
 * the one to fix). */
static void trace_reduce_check(exp_ctx *c) {
  const fp8_experiment *ex = c->ex;
  int amax_given = 0;
  for (size_t i = 0; i < c->nents; i++) amax_given |= strcmp(c->ents[i].key, "reduce_amax") == 0;
  if (ex->reduce_amax || (amax_given && !ex->reduce_amax_line)) return;
  const int lines[2] = {ex->reduce_group_line, ex->reduce_stride_line};
  static const char *const keys[2] = {"reduce_group", "reduce_stride"};
  for (int k = 0; k < 2; k++) {
    if (!lines[k]) continue;
    char amax[64] = "without reduce_amax = true";
    if (ex->reduce_amax_line)
      snprintf(amax, sizeof amax, "with reduce_amax = false (line %d)", ex->reduce_amax_line);
    fp8_exp_fail(c, lines[k],
                 "%s does nothing %s: it shapes the rank groups over which reduce_amax reduces "
                 "delayed scaling's amax, and no amax is reduced (set reduce_amax = true, or "
                 "remove %s)",
                 keys[k], amax, keys[k]);
  }
}

_Static_assert(FP8_RANK_LIMIT == 65536, "the reduce_group / reduce_stride messages say 65536");

void fp8_exp_trace_end(exp_ctx *c) {
  char shown[FP8_ESC_LEN]; /* an unknown key, quoted */
  fp8_experiment *ex = c->ex;
  int have_path = 0;
  for (size_t i = 0; i < c->nents && !c->nomem; i++) {
    const exp_entry *e = &c->ents[i];
    const char *v = e->value;
    if (strcmp(e->key, "path") == 0) {
      if (strncmp(v, "synth:", 6) == 0) {
        if (!v[6]) {
          fp8_exp_fail(c, e->line, "empty synth preset in path = %s (expected synth:<preset>)", v);
          continue;
        }
        ex->trace_is_synth = 1;
        ex->trace_path = fp8_exp_strdup(c, v);
        ex->synth_preset = fp8_exp_strdup(c, v + 6);
      } else {
        ex->trace_path = fp8_exp_resolve(c, v);
      }
      have_path = 1;
    } else if (strcmp(e->key, "steps") == 0) {
      const char *why = fp8_exp_parse_steps(v, &ex->step_first, &ex->step_last, &ex->step_stride,
                                            &c->nomem);
      if (why) {
        fp8_exp_fail(c, e->line, "bad steps \"%s\": %s", v, why);
      } else {
        ex->has_steps = 1;
        ex->steps_line = e->line;
      }
    } else if (strcmp(e->key, "tensors") == 0) {
      trace_tensors(c, e);
    } else if (strcmp(e->key, "synth_steps") == 0) {
      int64_t n;
      if (fp8_exp_parse_i64(v, &n) || n < 1)
        fp8_exp_fail(c, e->line, "bad synth_steps \"%s\" (expected an integer >= 1)", v);
      else ex->synth_steps = n;
    } else if (strcmp(e->key, "synth_seed") == 0) {
      uint64_t s;
      if (fp8_exp_parse_u64(v, &s))
        fp8_exp_fail(c, e->line, "bad synth_seed \"%s\" (expected an integer in 0..%llu)", v,
                     (unsigned long long)UINT64_MAX);
      else ex->synth_seed = s;
    } else if (strcmp(e->key, "reduce_amax") == 0) {
      int b;
      if (fp8_exp_parse_bool(v, &b)) {
        fp8_exp_fail(c, e->line, "bad reduce_amax \"%s\" (expected true or false)", v);
      } else {
        ex->reduce_amax = b;
        ex->reduce_amax_line = e->line;
      }
    } else if (strcmp(e->key, "warm_history") == 0) {
      int b;
      if (fp8_exp_parse_bool(v, &b)) {
        fp8_exp_fail(c, e->line, "bad warm_history \"%s\" (expected true or false)",
                     fp8_esc(v, shown, sizeof shown));
      } else {
        ex->warm_history = b;
        ex->warm_history_line = e->line;
      }
    } else if (strcmp(e->key, "reduce_group") == 0) {
      if (parse_count(c, e, 1, FP8_RANK_LIMIT, &ex->reduce_group,
                      "an integer in 1..65536: ranks per amax reduction group"))
        ex->reduce_group_line = e->line;
    } else if (strcmp(e->key, "reduce_stride") == 0) {
      if (parse_count(c, e, 1, FP8_RANK_LIMIT, &ex->reduce_stride,
                      "an integer in 1..65536: the distance between the ranks of an amax "
                      "reduction group"))
        ex->reduce_stride_line = e->line;
    } else {
      fp8_exp_fail(c, e->line,
                   "unknown key %s in [trace] (expected path, steps, tensors, synth_steps, "
                   "synth_seed, reduce_amax, reduce_group, reduce_stride or warm_history)",
                   fp8_esc(e->key, shown, sizeof shown));
    }
  }
  if (!have_path && !c->has_err)
    fp8_exp_fail(c, c->sec_line,
                 "[trace] has no path (expected path = <trace dir> or synth:<preset>)");
  trace_reduce_check(c);
  /* synth_steps / synth_seed beside a real trace are accepted and unused: the documented
   * example file has them as commented placeholders. */
}

void fp8_exp_output_end(exp_ctx *c) {
  char shown[FP8_ESC_LEN]; /* an unknown key, quoted */
  for (size_t i = 0; i < c->nents && !c->nomem; i++) {
    const exp_entry *e = &c->ents[i];
    if (strcmp(e->key, "dir") == 0) c->ex->out_dir = fp8_exp_resolve(c, e->value);
    else if (strcmp(e->key, "stream") == 0) {
      if (strcmp(e->value, "auto") == 0) c->ex->stream_format = FP8_STREAM_AUTO;
      else if (strcmp(e->value, "csv") == 0) c->ex->stream_format = FP8_STREAM_CSV;
      else if (strcmp(e->value, "npy") == 0) c->ex->stream_format = FP8_STREAM_NPY;
      else
        fp8_exp_fail(c, e->line, "bad stream \"%s\" (expected auto, csv or npy)",
                     fp8_esc(e->value, shown, sizeof shown));
    } else
      fp8_exp_fail(c, e->line, "unknown key %s in [output] (expected dir or stream)",
                   fp8_esc(e->key, shown, sizeof shown));
  }
}

void fp8_exp_analysis_end(exp_ctx *c) {
  char shown[FP8_ESC_LEN]; /* an unknown key, quoted */
  for (size_t i = 0; i < c->nents && !c->nomem; i++) {
    const exp_entry *e = &c->ents[i];
    for (int k = 0; k < FP8_EXP_AKEY_COUNT; k++)
      if (strcmp(e->key, fp8_experiment_analysis_keys[k]) == 0) c->ex->analysis_line[k] = e->line;
    if (strcmp(e->key, "overflow_budget") == 0) {
      parse_fraction(c, e, &c->ex->overflow_budget,
                     "a fraction of elements in 0..1, e.g. 1e-5");
    } else if (strcmp(e->key, "step_budget") == 0) {
      parse_fraction(c, e, &c->ex->step_budget, "a fraction of steps in 0..1, e.g. 0.01");
    } else if (strcmp(e->key, "flush_budget") == 0) {
      parse_fraction(c, e, &c->ex->flush_budget,
                     "a fraction of a tensor's finite values flushed to zero in 0..1, e.g. "
                     "0.01: off unless given");
    } else if (strcmp(e->key, "routers") == 0) {
      if (strcmp(e->value, "bf16") == 0) c->ex->routers_fp8 = 0;
      else if (strcmp(e->value, "fp8") == 0) c->ex->routers_fp8 = 1;
      else
        fp8_exp_fail(c, e->line, "bad routers \"%s\" (expected bf16: Mixture-of-Experts routers "
                     "left out of the FP8 advice, or fp8: advised as any tensor)",
                     fp8_esc(e->value, shown, sizeof shown));
    } else if (strcmp(e->key, "fp4_gemm_ratio") == 0) {
      char *end;
      errno = 0;
      double v = strtod(e->value, &end);
      if (errno || end == e->value || *end || !(v >= 1.0 && v <= 1e6))
        fp8_exp_fail(c, e->line, "bad fp4_gemm_ratio \"%s\" (expected a number in 1..1e6: how "
                     "many times the FP8 reference's GEMM error an FP4 layer may have)",
                     fp8_esc(e->value, shown, sizeof shown));
      else c->ex->fp4_gemm_ratio = v;
    } else if (strcmp(e->key, "warmup_steps") == 0) {
      parse_count(c, e, 0, (int64_t)1 << 40, &c->ex->warmup_steps,
                  "an integer >= 0: the first N steps of the replay are warm-up for every "
                  "tensor");
    } else if (strcmp(e->key, "gemm") == 0) {
      int b;
      if (fp8_exp_parse_bool(e->value, &b))
        fp8_exp_fail(c, e->line, "bad gemm \"%s\" (expected true or false)", e->value);
      else c->ex->gemm = b;
    } else if (strcmp(e->key, "gemm_max_tokens") == 0) {
      parse_count(c, e, 0, (int64_t)1 << 31, &c->ex->gemm_max_tokens,
                  "an integer in 0..2^31, 0 = all tokens");
    } else if (strcmp(e->key, "gemm_error") == 0) {
      if (strcmp(e->value, "sampled") == 0) c->ex->gemm_sampled = 1;
      else if (strcmp(e->value, "exact") == 0) c->ex->gemm_sampled = 0;
      else
        fp8_exp_fail(c, e->line, "bad gemm_error \"%s\" (expected sampled or exact)",
                     fp8_esc(e->value, shown, sizeof shown));
    } else if (strcmp(e->key, "gemm_sample") == 0) {
      parse_count(c, e, 2, 65536, &c->ex->gemm_sample,
                  "an integer in 2..65536: the output rows and columns sampled per GEMM");
    } else if (strcmp(e->key, "gemm_seed") == 0) {
      int64_t seed = 0;
      if (parse_count(c, e, 0, INT64_MAX, &seed, "an integer >= 0"))
        c->ex->gemm_seed = (uint64_t)seed;
    } else if (strcmp(e->key, "tensor_core") == 0) {
      fp8_tc_model m;
      if (fp8_tc_model_parse(e->value, &m))
        fp8_exp_fail(c, e->line, "bad tensor_core \"%s\" (expected exact, h100, h200 or b200: "
                     "how the FP8 GEMMs accumulate)", fp8_esc(e->value, shown, sizeof shown));
      else c->ex->tensor_core = (int)m;
    } else if (strcmp(e->key, "cost_tokens") == 0) {
      parse_count(c, e, 0, (int64_t)1 << 31, &c->ex->cost_tokens,
                  "an integer in 0..2^31: the tokens per step of the production run, 0 = the "
                  "captured batch's");
    } else {
      fp8_exp_fail(c, e->line, "unknown key %s in [analysis] (expected overflow_budget, "
                   "step_budget, flush_budget, routers, fp4_gemm_ratio, warmup_steps, gemm, "
                   "gemm_error, gemm_sample, gemm_seed, gemm_max_tokens, tensor_core or cost_tokens)",
                   fp8_esc(e->key, shown, sizeof shown));
    }
  }
}
