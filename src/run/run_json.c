/* run_json.c: the files a run writes once, at its end: summary.csv (the totals the step loop
 * accumulated) and run.json (what ran, on which engine, with what inputs); and the progress bar
 * the step loop draws on a terminal. */
#include <limits.h> /* PATH_MAX */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <jansson.h>

#include "run_json.h" /* the keys, fp8_runjson_model_shape, fp8_runjson_write */
#include "runner_internal.h"
#include "timeline.h"

#ifndef FP8LAB_GIT_REV
#define FP8LAB_GIT_REV "unknown"
#endif

void run_write_summary(FILE *fp, const run_t *r) {
  fp8_schema_put_header(fp, &fp8_schema_summary);
  for (size_t i = 0; i < r->ntensors; i++) {
    const run_tensor *t = &r->t[i];
    for (size_t c = 0; c < r->nconfigs; c++)
      if (t->acc[c].steps)
        fp8_results_put_summary_row(fp, t->name, r->roles[i], &r->ex->configs[c],
                                    r->formats[i * r->nconfigs + c], &t->acc[c]);
  }
}

double run_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void run_progress(size_t done, size_t total, double t0, double *last, int final) {
  double t = run_now_s();
  if (!final && t - *last < 0.1) return;
  *last = t;
  double el = t - t0, rate = el > 0 ? (double)done / el : 0;
  double eta = rate > 0 ? (double)(total - done) / rate : 0;
  int width = 30, fill = total ? (int)((double)width * (double)done / (double)total) : width;
  fprintf(stderr, "\r[%.*s%*s] %zu/%zu steps  %.1f steps/s  ETA %.0fs ", fill,
          "##############################", width - fill, "", done, total, rate, eta);
  if (final) fputc('\n', stderr);
  fflush(stderr);
}

static json_t *configs_json(const fp8_experiment *ex) {
  json_t *arr = json_array();
  for (size_t c = 0; c < ex->nconfigs; c++) {
    const fp8_config *cf = &ex->configs[c];
    const char *fmt = cf->format == FP8_SEL_HYBRID ? "hybrid"
                    : cf->format == FP8_SEL_E4M3 ? "e4m3" : "e5m2";
    json_t *o = json_pack("{s:s, s:s, s:s, s:i}", FP8_RUNJSON_CFG_RECIPE, cf->label,
                          FP8_RUNJSON_CFG_KIND, fp8_recipe_kind_name(cf->kind),
                          FP8_RUNJSON_CFG_FORMAT, fmt, FP8_RUNJSON_CFG_MARGIN, (int)cf->margin);
    char settings[512];
    fp8_config_settings(cf, settings, sizeof settings);
    json_object_set_new(o, FP8_RUNJSON_CFG_SETTINGS, json_string(settings));
    if (cf->kind == FP8_KIND_DELAYED) {
      json_object_set_new(o, FP8_RUNJSON_CFG_HISTORY_LEN, json_integer(cf->history_len));
      json_object_set_new(o, FP8_RUNJSON_CFG_AMAX_COMPUTE,
                          json_string(fp8_amax_compute_name(cf->amax_compute)));
    } else {
      json_object_set_new(o, FP8_RUNJSON_CFG_AMAX_EPSILON, json_real(cf->amax_epsilon));
      json_object_set_new(o, FP8_RUNJSON_CFG_POW2, json_boolean(cf->pow2));
    }
    /* the section's tensor subset (absent: every tensor) and, when it differs from the label,
     * the section's name (sections that share a label) */
    const fp8_recipe_section *s = ex->config_section ? &ex->sections[ex->config_section[c]] : NULL;
    if (s && strcmp(s->name, s->label) != 0)
      json_object_set_new(o, FP8_RUNJSON_CFG_SECTION, json_string(s->name));
    if (s && s->nglobs) {
      json_t *g = json_array();
      for (size_t j = 0; j < s->nglobs; j++) json_array_append_new(g, json_string(s->globs[j]));
      json_object_set_new(o, FP8_RUNJSON_CFG_TENSORS, g);
    }
    json_array_append_new(arr, o);
  }
  return arr;
}

static json_t *file_json(const char *path) {
  struct stat sb;
  json_t *o = json_pack("{s:s}", FP8_RUNJSON_IN_PATH, path);
  if (stat(path, &sb) == 0)
    json_object_set_new(o, FP8_RUNJSON_IN_BYTES, json_integer((json_int_t)sb.st_size));
  return o;
}

static json_t *experiment_json(const fp8_experiment *ex) {
  size_t len = 0;
  char *text = NULL;
  FILE *fp = fopen(ex->file, "rb");
  if (fp) {
    text = malloc(1 << 20);
    if (text) {
      len = fread(text, 1, (1 << 20) - 1, fp);
      text[len] = 0;
    }
    fclose(fp);
  }
  json_t *exo = json_pack("{s:s, s:s}", FP8_RUNJSON_EX_FILE, ex->file, FP8_RUNJSON_EX_NAME,
                          ex->name);
  if (text) json_object_set_new(exo, FP8_RUNJSON_EX_TEXT, json_stringn_nocheck(text, len));
  free(text);
  json_object_set_new(exo, FP8_RUNJSON_EX_CONFIGURATIONS, configs_json(ex));
  json_object_set_new(exo, FP8_RUNJSON_EX_OVERFLOW_BUDGET, json_real(ex->overflow_budget));
  json_object_set_new(exo, FP8_RUNJSON_EX_STEP_BUDGET, json_real(ex->step_budget));
  int fp4 = 0;
  for (size_t c = 0; c < ex->nconfigs; c++) fp4 |= fp8_recipe_kind_is_fp4(ex->configs[c].kind);
  if (fp4) /* only with an FP4 configuration: another run.json is as before */
    json_object_set_new(exo, FP8_RUNJSON_EX_FP4_GEMM_RATIO, json_real(ex->fp4_gemm_ratio));
  if (!isnan(ex->flush_budget)) /* only when set: a run.json without it is as before */
    json_object_set_new(exo, FP8_RUNJSON_EX_FLUSH_BUDGET, json_real(ex->flush_budget));
  if (ex->warmup_steps >= 0)
    json_object_set_new(exo, FP8_RUNJSON_EX_WARMUP_STEPS,
                        json_integer((json_int_t)ex->warmup_steps));
  json_object_set_new(exo, FP8_RUNJSON_EX_GEMM, json_boolean(ex->gemm));
  json_object_set_new(exo, FP8_RUNJSON_EX_GEMM_MAX_TOKENS,
                      json_integer((json_int_t)ex->gemm_max_tokens));
  json_object_set_new(exo, FP8_RUNJSON_EX_GEMM_ERROR,
                      json_string(ex->gemm_sampled ? "sampled" : "exact"));
  if (ex->gemm_sampled) {
    json_object_set_new(exo, FP8_RUNJSON_EX_GEMM_SAMPLE, json_integer((json_int_t)ex->gemm_sample));
    json_object_set_new(exo, FP8_RUNJSON_EX_GEMM_SEED, json_integer((json_int_t)ex->gemm_seed));
  }
  if (ex->cost_tokens > 0)
    json_object_set_new(exo, FP8_RUNJSON_EX_COST_TOKENS, json_integer((json_int_t)ex->cost_tokens));
  return exo;
}

static json_t *trace_json(const fp8_experiment *ex, const fp8_trace *tr, const char *trace_dir) {
  json_t *tro = json_pack("{s:s, s:I, s:I}", FP8_RUNJSON_TR_PATH, trace_dir,
                          FP8_RUNJSON_TR_SNAPSHOT_STEPS, (json_int_t)tr->nsteps,
                          FP8_RUNJSON_TR_AMAX_ROWS, (json_int_t)tr->namax);
  char abs[PATH_MAX];
  if (!ex->trace_is_synth && realpath(trace_dir, abs)) /* advice.ini replays from anywhere */
    json_object_set_new(tro, FP8_RUNJSON_TR_ABS_PATH, json_string(abs));
  if (ex->has_steps) {
    char st[96];
    snprintf(st, sizeof st, "%lld-%lld:%lld", (long long)ex->step_first,
             (long long)ex->step_last, (long long)ex->step_stride);
    json_object_set_new(tro, FP8_RUNJSON_TR_STEPS, json_string(st));
  }
  if (ex->ntensor_globs) {
    json_t *g = json_array();
    for (size_t i = 0; i < ex->ntensor_globs; i++)
      json_array_append_new(g, json_string(ex->tensor_globs[i]));
    json_object_set_new(tro, FP8_RUNJSON_TR_TENSORS, g);
  }
  if (ex->trace_is_synth) {
    json_object_set_new(tro, FP8_RUNJSON_TR_SYNTH_PRESET, json_string(ex->synth_preset));
    json_object_set_new(tro, FP8_RUNJSON_TR_SYNTH_STEPS, json_integer(ex->synth_steps));
    json_object_set_new(tro, FP8_RUNJSON_TR_SYNTH_SEED, json_integer((json_int_t)ex->synth_seed));
  }
  if (tr->has_te_log) /* the trace is TransformerEngine's debug log (fp8lab import-te) */
    json_object_set_new(tro, FP8_RUNJSON_TR_TE_LOG,
                        json_pack("{s:I, s:I, s:I}", "interval", (json_int_t)tr->te_interval,
                                  "zero_values", (json_int_t)tr->te_zero, "coarse_values",
                                  (json_int_t)tr->te_coarse));
  if (tr->nranks) { /* only for multi-rank traces: a single-rank run.json is as it was */
    json_object_set_new(tro, FP8_RUNJSON_TR_RANKS, json_integer((json_int_t)tr->nranks));
    json_object_set_new(tro, FP8_RUNJSON_TR_REDUCE_AMAX, json_boolean(ex->reduce_amax));
    json_object_set_new(tro, FP8_RUNJSON_TR_REDUCE_GROUP,
                        json_integer((json_int_t)fp8_experiment_reduce_group(ex, tr->nranks)));
    if (ex->reduce_stride > 1) /* strided groups only: contiguous ones read as before */
      json_object_set_new(tro, FP8_RUNJSON_TR_REDUCE_STRIDE,
                          json_integer((json_int_t)ex->reduce_stride));
  }
  return tro;
}

static json_t *inputs_json(const fp8_experiment *ex, const fp8_trace *tr, const char *trace_dir) {
  json_t *inputs = json_array();
  json_array_append_new(inputs, file_json(ex->file));
  for (size_t i = 0; i < tr->nsteps && !tr->nranks; i++)
    json_array_append_new(inputs, file_json(tr->step_paths[i]));
  if (tr->namax && !tr->nranks) {
    char p[4096 + 16];
    snprintf(p, sizeof p, "%s/amax.csv", trace_dir);
    json_array_append_new(inputs, file_json(p));
  }
  for (size_t rk = 0; rk < tr->nranks; rk++) { /* rank by rank: snapshots, then amax.csv */
    const fp8_trace *t = &tr->ranks[rk];
    for (size_t i = 0; i < t->nsteps; i++) json_array_append_new(inputs, file_json(t->step_paths[i]));
    char p[4096 + 48];
    struct stat sb;
    snprintf(p, sizeof p, "%s/amax.csv", t->dir);
    if (stat(p, &sb) == 0) json_array_append_new(inputs, file_json(p));
  }
  return inputs;
}

/* Which engine ran what: the primary, the configurations its CPU engine ran instead (the
 * composite's fallback), the self-check. */
static json_t *engine_json(const run_t *r) {
  const fp8_engine_choice *ch = r->opt->choice;
  json_t *o = json_pack("{s:s, s:s}", "name", fp8_engine_name(r->engine), "device",
                        ch && ch->device ? ch->device : "cpu");
  if (ch && ch->module) json_object_set_new(o, "module", json_string(ch->module));
  json_t *sc = json_object();
  json_object_set_new(sc, "ran", json_boolean(ch && ch->self_check_ran));
  if (ch && ch->self_check_ran) {
    json_object_set_new(sc, "passed", json_boolean(ch->self_check_passed));
    json_object_set_new(sc, "values_compared", json_integer(ch->self_check_values));
  }
  if (ch && ch->self_check_note && *ch->self_check_note)
    json_object_set_new(sc, "note", json_string(ch->self_check_note));
  json_object_set_new(o, "self_check", sc);
  json_t *q = json_array(), *g = json_array();
  for (size_t c = 0; c < r->nconfigs; c++) {
    char label[160];
    snprintf(label, sizeof label, "%s #%zu", r->ex->configs[c].label, c);
    if (fp8_engine_falls_back(r->engine, FP8_OP_QUANTIZE_STATS, c))
      json_array_append_new(q, json_string(label));
    if (fp8_engine_falls_back(r->engine, FP8_OP_GEMM, c))
      json_array_append_new(g, json_string(label));
  }
  json_object_set_new(o, "cpu_quantize_configurations", q);
  json_object_set_new(o, "cpu_gemm_configurations", g);
  return o;
}

/* The traced model's Linear layers for the report's cost table (fp8_tl_shape_views of the first
 * snapshot step, rank 0's; docs/overlap.md): {"layers", "world" (the amax reduction group:
 * reduce_amax's group, else 1), "linears": [{name, tokens, in, out, dtypes: [input, weight,
 * grad_output]}]}; NULL when the trace has none. */
static json_t *model_shape_json(const fp8_experiment *ex, const fp8_trace *tr) {
  const fp8_trace *t0 = tr->nranks ? &tr->ranks[0] : tr;
  fp8_step st;
  fp8_tl_shape s;
  char err[FP8_ERRLEN];
  if (t0->nsteps == 0 || fp8_trace_load_step(t0, 0, &st, err, sizeof err) != FP8_OK) return NULL;
  int rc = fp8_tl_shape_views(st.tensors, st.ntensors, &s, err, sizeof err);
  fp8_step_free(&st);
  if (rc != FP8_OK) return NULL;
  if (s.nlinears == 0) {
    fp8_tl_shape_free(&s);
    return NULL;
  }
  int64_t world = tr->nranks && ex->reduce_amax
                      ? (int64_t)fp8_experiment_reduce_group(ex, tr->nranks) : 1;
  json_t *o = fp8_runjson_model_shape(&s, world);
  fp8_tl_shape_free(&s);
  return o;
}

int run_write_json(const char *dir, const run_t *r, const fp8_trace *tr, const char *trace_dir,
                   const fp8_run_summary *sum, const char *started, int threads,
                   const fp8_outputs *outputs, char *err, size_t errlen) {
  const fp8_experiment *ex = r->ex;
  json_t *root = json_object();
  json_object_set_new(root, FP8_RUNJSON_VERSION, json_string(FP8LAB_VERSION));
  json_object_set_new(root, FP8_RUNJSON_GIT_REVISION, json_string(FP8LAB_GIT_REV));
  json_object_set_new(root, FP8_RUNJSON_STARTED_UTC, json_string(started));
  json_object_set_new(root, FP8_RUNJSON_EXPERIMENT, experiment_json(ex));
  json_object_set_new(root, FP8_RUNJSON_TRACE, trace_json(ex, tr, trace_dir));
  json_object_set_new(root, FP8_RUNJSON_INPUTS, inputs_json(ex, tr, trace_dir));
  json_t *outs = json_array();
  for (size_t i = 0; i < outputs->n; i++) json_array_append_new(outs, json_string(outputs->names[i]));
  json_object_set_new(root, FP8_RUNJSON_OUTPUTS, outs);
  json_object_set_new(root, FP8_RUNJSON_STEPS_REPLAYED, json_integer(sum->steps));
  json_object_set_new(root, FP8_RUNJSON_TENSORS, json_integer(sum->tensors));
  /* the tensors without rows, by reason, each list complete (the summary line names a few) */
  for (int why = FP8_LEFT_NEVER_RAN; why < FP8_LEFT_COUNT; why++) {
    json_t *names = json_array();
    for (size_t i = 0; r->left && i < r->ntensors; i++)
      if (r->left[i] == why) json_array_append_new(names, json_string(r->t[i].name));
    json_object_set_new(root, fp8_left_keys[why], names);
  }
  json_object_set_new(root, FP8_RUNJSON_CONFIGURATIONS, json_integer(sum->configs));
  size_t distinct = 0; /* classes of provably identical configurations (fp8_config_identical) */
  for (size_t c = 0; c < ex->nconfigs; c++) {
    size_t k = 0;
    while (k < c && !fp8_config_identical(&ex->configs[k], &ex->configs[c])) k++;
    distinct += k == c;
  }
  json_object_set_new(root, FP8_RUNJSON_DISTINCT_CONFIGURATIONS,
                      json_integer((json_int_t)distinct));
  json_object_set_new(root, FP8_RUNJSON_ROWS, json_integer(sum->rows));
  json_object_set_new(root, FP8_RUNJSON_GEMM_ROWS, json_integer(sum->gemm_rows));
  json_object_set_new(root, FP8_RUNJSON_STREAM_ROWS, json_integer(sum->stream_rows));
  json_object_set_new(root, FP8_RUNJSON_THREADS, json_integer(threads));
  if (r->np > 1) { /* MPI: the processes of the replay (one process: no key, as before) */
    json_object_set_new(root, FP8_RUNJSON_PROCESSES, json_integer(r->np));
    json_t *pb = json_array();
    for (int p = 0; pb && r->proc_bytes && p < r->np; p++)
      json_array_append_new(pb, json_integer((json_int_t)r->proc_bytes[p]));
    if (pb) json_object_set_new(root, FP8_RUNJSON_PROCESS_BYTES, pb);
  }
  if (r->split) /* MPI: MPI_Allreduce, or NCCL's all-reduce between the GPUs */
    json_object_set_new(root, FP8_RUNJSON_AMAX_EXCHANGE, json_string(r->exchange));
  json_object_set_new(root, FP8_RUNJSON_ENGINE, json_string(fp8_engine_name(r->engine)));
  json_object_set_new(root, FP8_RUNJSON_ENGINE_DETAILS, engine_json(r));
  json_object_set_new(root, FP8_RUNJSON_AMAX_CSV_MISMATCHES, json_integer(r->mismatches));
  json_object_set_new(root, FP8_RUNJSON_WALL_TIME_S, json_real(sum->wall_s));
  json_t *ms = model_shape_json(ex, tr);
  if (ms) json_object_set_new(root, FP8_RUNJSON_MODEL_SHAPE, ms);

  int rc = fp8_runjson_write(dir, root, err, errlen);
  json_decref(root);
  return rc;
}
