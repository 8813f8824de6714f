/* run_json.c: run.json's writer (run_json.h): the document of what a run did, built from the
 * runner's description (fp8_run_json_write), and the report's update of its outputs list
 * (fp8_run_json_set_report_outputs). Every key is run_json.h's; the reader is run_json_read.c.
 */
#include "run_json.h"

#include <limits.h> /* PATH_MAX */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>

#include <jansson.h>

#include "fp8.h"
#include "tensorcore.h" /* fp8_tc_model: experiment.tensor_core */
#include "outfile.h" /* fp8_outfile, fp8_errorf */
#include "te_log.h"  /* FP8_TE_LOG_*: trace.te_log's keys */
#include "util.h"

#ifndef FP8LAB_GIT_REV
#define FP8LAB_GIT_REV "unknown"
#endif

const char *const fp8_left_keys[FP8_LEFT_COUNT] = {
    [FP8_LEFT_NEVER_RAN] = FP8_RUNJSON_LEFT_NEVER_RAN,
    [FP8_LEFT_NO_SNAPSHOT] = FP8_RUNJSON_LEFT_NO_SNAPSHOT,
    [FP8_LEFT_NO_RECIPE] = FP8_RUNJSON_LEFT_NO_RECIPE,
};

/* root as <dir>/run.json: 2-space indent, keys in insertion order, a final newline */
static int write_doc(const char *dir, const json_t *root, char *err, size_t errlen) {
  char *dump = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  if (!dump) return fp8_errorf(FP8_ENOMEM, err, errlen, "run.json: out of memory");
  int rc = fp8_outfile_write_text(dir, FP8_RUNJSON_FILE, dump, err, errlen);
  free(dump);
  return rc;
}

/* ------------------------------------------------------------------ experiment */

static json_t *configs_json(const fp8_experiment *ex) {
  json_t *arr = json_array();
  for (size_t c = 0; c < ex->nconfigs; c++) {
    const fp8_config *cf = &ex->configs[c];
    json_t *o = json_pack("{s:s, s:s, s:s, s:i}", FP8_RUNJSON_CFG_RECIPE, cf->label,
                          FP8_RUNJSON_CFG_KIND, fp8_recipe_kind_name(cf->kind),
                          FP8_RUNJSON_CFG_FORMAT, fp8_format_sel_name(cf->format),
                          FP8_RUNJSON_CFG_MARGIN, (int)cf->margin);
    char settings[512];
    fp8_config_settings(cf, settings, sizeof settings);
    json_object_set_new(o, FP8_RUNJSON_CFG_SETTINGS, json_string(settings));
    if (cf->kind == FP8_KIND_DELAYED) {
      json_object_set_new(o, FP8_RUNJSON_CFG_HISTORY_LEN, json_integer(cf->history_len));
      json_object_set_new(o, FP8_RUNJSON_CFG_AMAX_COMPUTE,
                          json_string(fp8_amax_compute_name(cf->amax_compute)));
      /* only when set: a fused run's run.json is as before (TE's default) */
      if (cf->unfused_update) json_object_set_new(o, FP8_RUNJSON_CFG_UNFUSED_UPDATE, json_true());
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
  ptrdiff_t fr = ex->gemm ? fp8_experiment_fp4_reference(ex) : -1;
  if (fr >= 0) { /* what gemm.csv's ratio columns divide by (issue 42) */
    const fp8_config *x = &ex->configs[fr];
    int dl = x->kind == FP8_KIND_DELAYED;
    char h[16] = "", m[16] = "";
    if (dl) snprintf(h, sizeof h, "%d", (int)x->history_len), snprintf(m, sizeof m, "%d", (int)x->margin);
    json_object_set_new(exo, FP8_RUNJSON_EX_FP4_REFERENCE,
                        json_pack("{s:s, s:s, s:s, s:s, s:s}", FP8_RUNJSON_CFG_RECIPE, x->label,
                                  FP8_RUNJSON_CFG_KIND, fp8_recipe_kind_name(x->kind),
                                  "history_len", h, FP8_RUNJSON_CFG_MARGIN, m, "amax_compute",
                                  dl ? fp8_amax_compute_name(x->amax_compute) : ""));
  }
  if (!isnan(ex->flush_budget)) /* only when set: a run.json without it is as before */
    json_object_set_new(exo, FP8_RUNJSON_EX_FLUSH_BUDGET, json_real(ex->flush_budget));
  if (ex->routers_fp8) /* only when not the default: another run.json is as before */
    json_object_set_new(exo, FP8_RUNJSON_EX_ROUTERS, json_string("fp8"));
  if (ex->warmup_steps >= 0)
    json_object_set_new(exo, FP8_RUNJSON_EX_WARMUP_STEPS,
                        json_integer((json_int_t)ex->warmup_steps));
  json_object_set_new(exo, FP8_RUNJSON_EX_GEMM, json_boolean(ex->gemm));
  json_object_set_new(exo, FP8_RUNJSON_EX_GEMM_MAX_TOKENS,
                      json_integer((json_int_t)ex->gemm_max_tokens));
  json_object_set_new(exo, FP8_RUNJSON_EX_GEMM_ERROR,
                      json_string(ex->gemm_sampled ? FP8_RUNJSON_GEMM_SAMPLED
                                                   : FP8_RUNJSON_GEMM_EXACT));
  if (ex->gemm_sampled) {
    json_object_set_new(exo, FP8_RUNJSON_EX_GEMM_SAMPLE, json_integer((json_int_t)ex->gemm_sample));
    json_object_set_new(exo, FP8_RUNJSON_EX_GEMM_SEED, json_integer((json_int_t)ex->gemm_seed));
  }
  /* the accumulation the GEMM errors assume (tensorcore.h; docs/semantics.md) */
  json_object_set_new(exo, FP8_RUNJSON_EX_TENSOR_CORE,
                      json_string(fp8_tc_model_name((fp8_tc_model)ex->tensor_core)));
  if (ex->tensor_core != FP8_TC_EXACT)
    json_object_set_new(exo, FP8_RUNJSON_EX_ACCUMULATION,
                        json_pack("{s:s, s:s, s:s, s:i, s:i, s:s}", "fprop", "fast", "dgrad",
                                  "promoted", "wgrad", "promoted", "mma_k", FP8_TC_MMA_K,
                                  "promote_every", FP8_TC_PROMOTE, "block_kinds", "exact"));
  if (ex->cost_tokens > 0)
    json_object_set_new(exo, FP8_RUNJSON_EX_COST_TOKENS, json_integer((json_int_t)ex->cost_tokens));
  return exo;
}

/* ------------------------------------------------------------------ trace */

static json_t *trace_json(const fp8_experiment *ex, const fp8_trace *tr, const char *trace_dir,
                          const fp8_run_json_desc *d) {
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
    json_object_set_new(tro, FP8_RUNJSON_TR_STEPS_BEFORE, json_integer((json_int_t)d->steps_before));
    json_object_set_new(tro, FP8_RUNJSON_TR_STEPS_SKIPPED,
                        json_integer((json_int_t)d->steps_skipped));
  }
  json_object_set_new(tro, FP8_RUNJSON_TR_WARM_HISTORY, json_boolean(ex->warm_history));
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
  if (tr->has_te_log) { /* the trace is TransformerEngine's debug log (fp8lab import-te) */
    json_t *te = json_pack("{s:I, s:I, s:I}", FP8_TE_LOG_INTERVAL, (json_int_t)tr->te_interval,
                           FP8_TE_LOG_ZERO_VALUES, (json_int_t)tr->te_zero,
                           FP8_TE_LOG_COARSE_VALUES, (json_int_t)tr->te_coarse);
    if (te && tr->nte_tensors) { /* te_log.json's own interval per tensor (schema 2) */
      json_t *ti = json_object();
      for (size_t k = 0; ti && k < tr->nte_tensors; k++)
        json_object_set_new(ti, tr->te_tensor_names[k], json_integer(tr->te_tensor_intervals[k]));
      json_object_set_new(te, FP8_TE_LOG_TENSOR_INTERVALS, ti);
    }
    json_object_set_new(tro, FP8_RUNJSON_TR_TE_LOG, te);
  }
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

/* ------------------------------------------------------------------ inputs */

/* Appends a copy of path (p: the folder, then the file name) to in. */
static int add_input(fp8_run_inputs *in, size_t *cap, const char *dir, const char *name) {
  if (in->n == *cap) {
    size_t nc = *cap ? 2 * *cap : 64;
    char **np = realloc(in->path, nc * sizeof *np);
    if (!np) return FP8_ENOMEM;
    in->path = np;
    char (*nh)[FP8_SHA256_HEX] = realloc(in->sha256, nc * sizeof *nh);
    if (!nh) return FP8_ENOMEM;
    in->sha256 = nh;
    fp8_file_id *ni = realloc(in->id, nc * sizeof *ni);
    if (!ni) return FP8_ENOMEM;
    in->id = ni;
    *cap = nc;
  }
  size_t len = (dir ? strlen(dir) + 1 : 0) + strlen(name) + 1;
  char *p = malloc(len);
  if (!p) return FP8_ENOMEM;
  if (dir) snprintf(p, len, "%s/%s", dir, name);
  else snprintf(p, len, "%s", name);
  in->path[in->n] = p;
  fp8_file_id_of(p, &in->id[in->n]); /* as the run found it: the hash must be of this file */
  in->sha256[in->n++][0] = '\0';
  return FP8_OK;
}

/* 1 when <dir>/<name> exists */
static int exists_in(const char *dir, const char *name) {
  char p[4096 + 64];
  struct stat sb;
  snprintf(p, sizeof p, "%s/%s", dir, name);
  return stat(p, &sb) == 0;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A snapshot: a safetensors file, or an npy step folder, whose files are the inputs (the
 * <tensor>.npy files the npy reader reads: not hidden, ending .npy), by name. */
static int add_snapshot(fp8_run_inputs *in, size_t *cap, const char *path) {
  struct stat sb;
  if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) return add_input(in, cap, NULL, path);
  DIR *d = opendir(path);
  if (!d) return add_input(in, cap, NULL, path); /* the hash then says why it cannot read */
  char **names = NULL;
  size_t n = 0, capn = 0;
  int rc = FP8_OK;
  for (struct dirent *e; rc == FP8_OK && (e = readdir(d)) != NULL;) {
    size_t nl = strlen(e->d_name);
    if (e->d_name[0] == '.' || nl <= 4 || strcmp(e->d_name + nl - 4, ".npy") != 0) continue;
    char **nn = fp8_grow(names, n, &capn, sizeof *nn, 64);
    char *own = nn ? strdup(e->d_name) : NULL;
    if (nn) names = nn;
    if (!own) rc = FP8_ENOMEM;
    else names[n++] = own;
  }
  closedir(d);
  if (n) qsort(names, n, sizeof *names, cmp_str);
  for (size_t k = 0; k < n; k++) {
    if (rc == FP8_OK) rc = add_input(in, cap, path, names[k]);
    free(names[k]);
  }
  free(names);
  return rc;
}

int fp8_run_inputs_list(const fp8_experiment *ex, const fp8_trace *tr, const char *trace_dir,
                        fp8_run_inputs *in) {
  memset(in, 0, sizeof *in);
  size_t cap = 0;
  int rc = add_input(in, &cap, NULL, ex->file);
  for (size_t i = 0; !rc && i < tr->nsteps && !tr->nranks; i++)
    rc = add_snapshot(in, &cap, tr->step_paths[i]);
  if (!rc && tr->namax && !tr->nranks) rc = add_input(in, &cap, trace_dir, "amax.csv");
  if (!rc && tr->has_tokens && !tr->nranks) rc = add_input(in, &cap, trace_dir, "tokens.csv");
  for (size_t rk = 0; !rc && rk < tr->nranks; rk++) { /* rank by rank: snapshots, amax.csv, tokens.csv */
    const fp8_trace *t = &tr->ranks[rk];
    for (size_t i = 0; !rc && i < t->nsteps; i++) rc = add_snapshot(in, &cap, t->step_paths[i]);
    if (!rc && exists_in(t->dir, "amax.csv")) rc = add_input(in, &cap, t->dir, "amax.csv");
    if (!rc && t->has_tokens) rc = add_input(in, &cap, t->dir, "tokens.csv");
  }
  /* a TransformerEngine import's record and TE's overflows% (the report reads the latter) */
  if (!rc && exists_in(trace_dir, FP8_TE_LOG_FILE))
    rc = add_input(in, &cap, trace_dir, FP8_TE_LOG_FILE);
  if (!rc && exists_in(trace_dir, FP8_TE_OVERFLOWS_FILE))
    rc = add_input(in, &cap, trace_dir, FP8_TE_OVERFLOWS_FILE);
  return rc;
}

int fp8_run_inputs_hash(fp8_run_inputs *in, char *err, size_t errlen) {
  int rc = FP8_OK;
  for (size_t i = 0; i < in->n && rc == FP8_OK; i++)
    if (!in->sha256[i][0]) rc = fp8_sha256_file(in->path[i], NULL, &in->id[i], in->sha256[i], err, errlen);
  return rc;
}

void fp8_run_inputs_free(fp8_run_inputs *in) {
  for (size_t i = 0; i < in->n; i++) free(in->path[i]);
  free(in->path);
  free(in->sha256);
  free(in->id);
  memset(in, 0, sizeof *in);
}

/* inputs[]: each input's path, its bytes (when stat can tell) and its sha256 (when hashed) */
static json_t *inputs_json(const fp8_run_inputs *in) {
  json_t *inputs = json_array();
  for (size_t i = 0; i < in->n; i++) {
    struct stat sb;
    json_t *o = json_pack("{s:s}", FP8_RUNJSON_IN_PATH, in->path[i]);
    if (stat(in->path[i], &sb) == 0)
      json_object_set_new(o, FP8_RUNJSON_IN_BYTES, json_integer((json_int_t)sb.st_size));
    if (in->sha256[i][0])
      json_object_set_new(o, FP8_RUNJSON_IN_SHA256, json_string(in->sha256[i]));
    json_array_append_new(inputs, o);
  }
  return inputs;
}

/* ------------------------------------------------------------------ engine, model shape */

/* Which engine ran what: the primary, the configurations its CPU engine ran instead (the
 * composite's fallback), the self-check. */
static json_t *engine_json(const fp8_run_json_desc *d) {
  json_t *o = json_pack("{s:s, s:s}", FP8_RUNJSON_ENG_NAME, d->engine, FP8_RUNJSON_ENG_DEVICE,
                        d->device ? d->device : "cpu");
  if (d->module) json_object_set_new(o, FP8_RUNJSON_ENG_MODULE, json_string(d->module));
  json_t *sc = json_object();
  json_object_set_new(sc, FP8_RUNJSON_SC_RAN, json_boolean(d->self_check_ran));
  if (d->self_check_ran) {
    json_object_set_new(sc, FP8_RUNJSON_SC_PASSED, json_boolean(d->self_check_passed));
    json_object_set_new(sc, FP8_RUNJSON_SC_VALUES, json_integer(d->self_check_values));
  }
  if (d->self_check_note && *d->self_check_note)
    json_object_set_new(sc, FP8_RUNJSON_SC_NOTE, json_string(d->self_check_note));
  json_object_set_new(o, FP8_RUNJSON_ENG_SELF_CHECK, sc);
  json_t *q = json_array(), *g = json_array();
  for (size_t c = 0; c < d->ex->nconfigs; c++) {
    char label[160];
    snprintf(label, sizeof label, "%s #%zu", d->ex->configs[c].label, c);
    if (d->cpu_quantize && d->cpu_quantize[c]) json_array_append_new(q, json_string(label));
    if (d->cpu_gemm && d->cpu_gemm[c]) json_array_append_new(g, json_string(label));
  }
  json_object_set_new(o, FP8_RUNJSON_ENG_CPU_QUANTIZE, q);
  json_object_set_new(o, FP8_RUNJSON_ENG_CPU_GEMM, g);
  return o;
}

/* The model_shape object of a traced model's Linears, for the report's cost table
 * (fp8_tl_shape_views of the first snapshot step, rank 0's; docs/overlap.md): {"layers",
 * "world" (the amax reduction group: reduce_amax's group, else 1), "linears": [{name, tokens,
 * in, out, dtypes: [input, weight, grad_output]}]}; NULL when the trace has none. */
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
  json_t *o = json_pack("{s:I, s:I}", FP8_RUNJSON_MS_LAYERS, (json_int_t)s.layers,
                        FP8_RUNJSON_MS_WORLD, (json_int_t)world);
  json_t *a = json_array();
  for (size_t i = 0; i < s.nlinears; i++) {
    const fp8_tl_linear *l = &s.linears[i];
    json_array_append_new(
        a, json_pack("{s:s, s:I, s:I, s:I, s:[s,s,s]}", FP8_RUNJSON_LIN_NAME, l->name,
                     FP8_RUNJSON_LIN_TOKENS, (json_int_t)l->tokens, FP8_RUNJSON_LIN_IN,
                     (json_int_t)l->in, FP8_RUNJSON_LIN_OUT, (json_int_t)l->out,
                     FP8_RUNJSON_LIN_DTYPES, fp8_dtype_name(l->dtype[0]),
                     fp8_dtype_name(l->dtype[1]), fp8_dtype_name(l->dtype[2])));
  }
  json_object_set_new(o, FP8_RUNJSON_MS_LINEARS, a);
  fp8_tl_shape_free(&s);
  return o;
}

/* ------------------------------------------------------------------ unserved */

/* unserved[]: a section's {section, label, kind, configurations, line, why}, a key's
 * {section, key, line, why} */
static json_t *unserved_json(const fp8_run_json_desc *d) {
  json_t *a = json_array();
  for (size_t i = 0; a && i < d->nunserved; i++) {
    const fp8_unserved *u = &d->unserved[i];
    json_t *o = json_pack("{s:s}", FP8_RUNJSON_UN_SECTION, u->section);
    if (*u->key) {
      json_object_set_new(o, FP8_RUNJSON_UN_KEY, json_string(u->key));
    } else {
      json_object_set_new(o, FP8_RUNJSON_UN_LABEL, json_string(u->label));
      json_object_set_new(o, FP8_RUNJSON_UN_KIND, json_string(u->kind));
      json_object_set_new(o, FP8_RUNJSON_UN_CONFIGURATIONS, json_integer(u->configurations));
    }
    json_object_set_new(o, FP8_RUNJSON_UN_LINE, json_integer(u->line));
    json_object_set_new(o, FP8_RUNJSON_UN_WHY, json_string(u->why));
    json_array_append_new(a, o);
  }
  return a;
}

/* ------------------------------------------------------------------ the document */

static json_t *names_json(const fp8_outputs *o) {
  json_t *a = json_array();
  for (size_t i = 0; i < o->n; i++) json_array_append_new(a, json_string(o->names[i]));
  return a;
}

int fp8_run_json_write(const char *dir, const fp8_run_json_desc *d, char *err, size_t errlen) {
  const fp8_experiment *ex = d->ex;
  fp8_run_inputs own = {0}; /* no inputs given: listed and hashed here */
  if (!d->inputs) {
    int rc = fp8_run_inputs_list(ex, d->trace, d->trace_dir, &own);
    if (rc) fp8_errorf(rc, err, errlen, "run.json: out of memory");
    else rc = fp8_run_inputs_hash(&own, err, errlen);
    if (rc) {
      fp8_run_inputs_free(&own);
      return rc;
    }
  }
  json_t *root = json_object();
  json_object_set_new(root, FP8_RUNJSON_VERSION, json_string(FP8LAB_VERSION));
  json_object_set_new(root, FP8_RUNJSON_GIT_REVISION, json_string(FP8LAB_GIT_REV));
  json_object_set_new(root, FP8_RUNJSON_STARTED_UTC, json_string(d->started_utc));
  json_object_set_new(root, FP8_RUNJSON_EXPERIMENT, experiment_json(ex));
  json_object_set_new(root, FP8_RUNJSON_TRACE, trace_json(ex, d->trace, d->trace_dir, d));
  json_object_set_new(root, FP8_RUNJSON_INPUTS, inputs_json(d->inputs ? d->inputs : &own));
  fp8_run_inputs_free(&own);
  json_object_set_new(root, FP8_RUNJSON_OUTPUTS, names_json(d->outputs));
  json_object_set_new(root, FP8_RUNJSON_STEPS_REPLAYED, json_integer(d->steps));
  json_object_set_new(root, FP8_RUNJSON_TENSORS, json_integer(d->tensors));
  /* the tensors without rows, by reason, each list complete (the summary line names a few) */
  for (int why = FP8_LEFT_NEVER_RAN; why < FP8_LEFT_COUNT; why++) {
    json_t *names = json_array();
    for (size_t i = 0; d->left && i < d->ntensors; i++)
      if (d->left[i] == why) json_array_append_new(names, json_string(d->tensor_names[i]));
    json_object_set_new(root, fp8_left_keys[why], names);
  }
  json_object_set_new(root, FP8_RUNJSON_CONFIGURATIONS, json_integer(d->configs));
  json_object_set_new(root, FP8_RUNJSON_UNSERVED, unserved_json(d));
  size_t distinct = 0; /* classes of provably identical configurations (fp8_config_identical) */
  for (size_t c = 0; c < ex->nconfigs; c++) {
    size_t k = 0;
    while (k < c && !fp8_config_identical(&ex->configs[k], &ex->configs[c])) k++;
    distinct += k == c;
  }
  json_object_set_new(root, FP8_RUNJSON_DISTINCT_CONFIGURATIONS,
                      json_integer((json_int_t)distinct));
  json_object_set_new(root, FP8_RUNJSON_ROWS, json_integer(d->rows));
  json_object_set_new(root, FP8_RUNJSON_GEMM_ROWS, json_integer(d->gemm_rows));
  json_object_set_new(root, FP8_RUNJSON_STREAM_ROWS, json_integer(d->stream_rows));
  json_object_set_new(root, FP8_RUNJSON_THREADS, json_integer(d->threads));
  if (d->processes > 1) { /* MPI: the processes of the replay (one process: no key, as before) */
    json_object_set_new(root, FP8_RUNJSON_PROCESSES, json_integer(d->processes));
    json_t *pb = json_array();
    for (int p = 0; pb && d->process_bytes && p < d->processes; p++)
      json_array_append_new(pb, json_integer((json_int_t)d->process_bytes[p]));
    if (pb) json_object_set_new(root, FP8_RUNJSON_PROCESS_BYTES, pb);
  }
  if (d->amax_exchange) /* MPI: MPI_Allreduce, or NCCL's all-reduce between the GPUs */
    json_object_set_new(root, FP8_RUNJSON_AMAX_EXCHANGE, json_string(d->amax_exchange));
  json_object_set_new(root, FP8_RUNJSON_ENGINE, json_string(d->engine));
  json_object_set_new(root, FP8_RUNJSON_ENGINE_DETAILS, engine_json(d));
  json_object_set_new(root, FP8_RUNJSON_AMAX_CSV_MISMATCHES, json_integer(d->mismatches));
  json_object_set_new(root, FP8_RUNJSON_WALL_TIME_S, json_real(d->wall_s));
  json_t *ms = model_shape_json(ex, d->trace);
  if (ms) json_object_set_new(root, FP8_RUNJSON_MODEL_SHAPE, ms);

  int rc = write_doc(dir, root, err, errlen);
  json_decref(root);
  return rc;
}

/* ------------------------------------------------------------------ the report's outputs */

int fp8_run_json_set_report_outputs(const fp8_run_record *rec, const char *dir,
                                    const fp8_outputs *mine, char *err, size_t errlen) {
  json_t *root = rec->doc_;
  if (!json_is_object(root)) return FP8_OK; /* no document was read: no list to keep */
  fp8_outputs earlier = {0};
  json_t *outs = json_array(), *old = json_object_get(root, FP8_RUNJSON_OUTPUTS);
  int rc = outs ? FP8_OK : FP8_ENOMEM;
  /* the runner's entries stay (in their order), an earlier report's give way to this one's */
  for (size_t i = 0; i < json_array_size(old) && !rc; i++) {
    json_t *e = json_array_get(old, i);
    const char *name = json_string_value(e);
    if (!name || !fp8_output_of_report(name)) rc = json_array_append(outs, e) ? FP8_ENOMEM : FP8_OK;
    else rc = fp8_outputs_add(&earlier, name);
  }
  for (size_t i = 0; i < mine->n && !rc; i++)
    rc = json_array_append_new(outs, json_string(mine->names[i])) ? FP8_ENOMEM : FP8_OK;
  if (!rc && json_object_set(root, FP8_RUNJSON_OUTPUTS, outs) != 0) rc = FP8_ENOMEM;
  if (rc) fp8_errorf(rc, err, errlen, "run.json: out of memory");
  else rc = write_doc(dir, root, err, errlen);
  if (!rc) fp8_outputs_remove_stale(dir, &earlier, mine);
  json_decref(outs);
  fp8_outputs_free(&earlier);
  return rc;
}
