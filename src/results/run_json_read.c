/* run_json_read.c: run.json's readers (run_json.h): the report's strict one (fp8_run_json_read:
 * every key it takes checked, the outputs list with them, the document kept for the report's
 * update of that list, run_json.c) and the lenient ones of an earlier run's folder (a run with
 * --force: its outputs list, a killed report's notebook name). The writer, and every key, are
 * run_json.c's and run_json.h's. */
#include "run_json_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8.h"
#include "tensorcore.h" /* fp8_tc_model: experiment.tensor_core */
#include "te_log.h"  /* FP8_TE_LOG_*: trace.te_log's keys */
#include "trace.h"   /* fp8_tensor_name_check */
#include "util.h"


/* ------------------------------------------------------------------ reader */

/* experiment.name becomes the notebook's file name (notebooks_export/<name>.ipynb): a name
 * without '/', not "." or "..", under the tensor-name rules otherwise. */
static int is_file_name(const char *s) {
  char why[FP8_ESC_LEN + 64];
  return fp8_tensor_name_check(s, strlen(s), FP8_NAME_MAX, why, sizeof why) == 0 &&
         !strchr(s, '/') && strcmp(s, ".") != 0;
}

/* A number in 0..1 at key of object o ("<what>: expected a number in 0..1"). */
static int budget_of(const char *path, json_t *o, const char *key, double *out, char *err,
                     size_t errlen) {
  json_t *b = json_object_get(o, key);
  if (!json_is_number(b) || !(json_number_value(b) >= 0 && json_number_value(b) <= 1))
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: %s.%s: expected a number in 0..1", path,
                      FP8_RUNJSON_EXPERIMENT, key);
  *out = json_number_value(b);
  return FP8_OK;
}

/* v's text when v is a JSON string without a NUL inside (JSON's "\u0000", which a C string
 * would cut short); else NULL. */
static const char *plain_string(const json_t *v) {
  return json_is_string(v) && strlen(json_string_value(v)) == json_string_length(v)
             ? json_string_value(v) : NULL;
}

/* The array a (what: its key, for the messages) into *out, a new array of copies of its
 * strings, *n counting those copied (for fp8_run_json_free, whatever fails). names: each one a
 * tensor name (fp8_tensor_name_check, rank prefix allowed); else any string without a NUL. */
static int read_strings(json_t *a, const char *what, int names, char ***out, size_t *n,
                        const char *path, char *err, size_t errlen) {
  if (!json_is_array(a))
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: %s: expected an array of %s", path, what,
                      names ? "tensor names" : "strings");
  if (!(*out = calloc(json_array_size(a) + 1, sizeof **out)))
    return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  for (size_t k = 0; k < json_array_size(a); k++) {
    json_t *v = json_array_get(a, k);
    char why_bad[FP8_ESC_LEN + 64] = "not a string";
    if (names && (!json_is_string(v) ||
                  fp8_tensor_name_check(json_string_value(v), json_string_length(v),
                                        FP8_NAME_MAX + FP8_RANK_PREFIX_MAX, why_bad,
                                        sizeof why_bad) != 0))
      return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: %s[%zu]: expected a tensor name: %s",
                        path, what, k, why_bad);
    if (!names && !plain_string(v))
      return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: %s[%zu]: expected a string", path, what,
                        k);
    if (!((*out)[k] = strdup(json_string_value(v))))
      return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
    *n = k + 1;
  }
  return FP8_OK;
}

/* The lists of tensors without rows (fp8_left_keys: absent in a run.json written before them),
 * each an array of tensor names: the report names them, so each one passes the name rules as
 * steps.csv's names do. */
static int read_left_out(fp8_run_record *r, json_t *j, const char *path, char *err,
                         size_t errlen) {
  for (int why = FP8_LEFT_NEVER_RAN; why < FP8_LEFT_COUNT; why++) {
    const char *key = fp8_left_keys[why];
    json_t *a = json_object_get(j, key);
    int rc = a ? read_strings(a, key, 1, &r->left[why], &r->nleft[why], path, err, errlen)
               : FP8_OK;
    if (rc) return rc;
  }
  return FP8_OK;
}

/* A string key of unserved[k] into dst (len bytes): a one-line string that fits; absent and
 * optional: "". */
static int unserved_string(json_t *o, const char *key, int optional, char *dst, size_t len,
                           size_t k, const char *path, char *err, size_t errlen) {
  json_t *v = json_object_get(o, key);
  const char *s = plain_string(v);
  if (!v && optional) return dst[0] = '\0', FP8_OK;
  if (!s || json_string_length(v) >= len || strchr(s, '\n') || strchr(s, '\r'))
    return fp8_errorf(FP8_EFORMAT, err, errlen,
                      "%s: %s[%zu].%s: expected a string of one line, under %zu bytes", path,
                      FP8_RUNJSON_UNSERVED, k, key, len);
  snprintf(dst, len, "%s", s);
  return FP8_OK;
}

/* unserved (absent in a run.json written before it: none): the sections and [analysis] keys
 * the run could not serve, which the report names in its first paragraph. */
static int read_unserved(fp8_run_record *r, json_t *j, const char *path, char *err,
                         size_t errlen) {
  json_t *a = json_object_get(j, FP8_RUNJSON_UNSERVED);
  if (!a) return FP8_OK;
  if (!json_is_array(a))
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: %s: expected an array", path,
                      FP8_RUNJSON_UNSERVED);
  if (!(r->unserved = calloc(json_array_size(a) + 1, sizeof *r->unserved)))
    return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  for (size_t k = 0; k < json_array_size(a); k++) {
    json_t *o = json_array_get(a, k);
    fp8_unserved *u = &r->unserved[k];
    json_t *line = json_object_get(o, FP8_RUNJSON_UN_LINE);
    json_t *nc = json_object_get(o, FP8_RUNJSON_UN_CONFIGURATIONS);
    int rc = json_is_object(o) ? FP8_OK
                               : fp8_errorf(FP8_EFORMAT, err, errlen, "%s: %s[%zu]: expected an "
                                            "object", path, FP8_RUNJSON_UNSERVED, k);
    if (!rc) rc = unserved_string(o, FP8_RUNJSON_UN_SECTION, 0, u->section, sizeof u->section,
                                  k, path, err, errlen);
    if (!rc) rc = unserved_string(o, FP8_RUNJSON_UN_KEY, 1, u->key, sizeof u->key, k, path,
                                  err, errlen);
    int section = !rc && !*u->key; /* a [recipe.*] section: its label, kind, configurations */
    if (!rc) rc = unserved_string(o, FP8_RUNJSON_UN_LABEL, !section, u->label, sizeof u->label,
                                  k, path, err, errlen);
    if (!rc) rc = unserved_string(o, FP8_RUNJSON_UN_KIND, !section, u->kind, sizeof u->kind, k,
                                  path, err, errlen);
    if (!rc) rc = unserved_string(o, FP8_RUNJSON_UN_WHY, 0, u->why, sizeof u->why, k, path, err,
                                  errlen);
    if (!rc && (!json_is_integer(line) || json_integer_value(line) < 1 ||
                json_integer_value(line) > INT32_MAX ||
                (section && (!json_is_integer(nc) || json_integer_value(nc) < 0))))
      rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s: %s[%zu]: expected line (an integer >= 1)%s",
                      path, FP8_RUNJSON_UNSERVED, k,
                      section ? " and configurations (an integer >= 0)" : "");
    if (rc) return rc;
    u->line = (int)json_integer_value(line);
    u->configurations = section ? (long long)json_integer_value(nc) : 0;
    r->nunserved = k + 1;
  }
  return FP8_OK;
}

/* One Linear of model_shape.linears, checked as the rest. */
static int read_linear(fp8_tl_linear *l, json_t *o, size_t k, const char *path, char *err,
                       size_t errlen) {
  json_t *v[3], *nm = json_object_get(o, FP8_RUNJSON_LIN_NAME);
  json_t *dt = json_object_get(o, FP8_RUNJSON_LIN_DTYPES);
  static const char *const keys[3] = {FP8_RUNJSON_LIN_TOKENS, FP8_RUNJSON_LIN_IN,
                                      FP8_RUNJSON_LIN_OUT};
  char why[FP8_ESC_LEN + 64] = "not a string";
  if (!json_is_string(nm) || fp8_tensor_name_check(json_string_value(nm), json_string_length(nm),
                                                   FP8_NAME_MAX, why, sizeof why) != 0)
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: model_shape.linears[%zu].name: %s", path,
                      k, why);
  for (int i = 0; i < 3; i++) {
    v[i] = json_object_get(o, keys[i]);
    if (!json_is_integer(v[i]) || json_integer_value(v[i]) < 1 ||
        json_integer_value(v[i]) > ((json_int_t)1 << 40))
      return fp8_errorf(FP8_EFORMAT, err, errlen,
                        "%s: model_shape.linears[%zu].%s: expected an integer from 1 to 2^40",
                        path, k, keys[i]);
  }
  l->tokens = (int64_t)json_integer_value(v[0]);
  l->in = (int64_t)json_integer_value(v[1]);
  l->out = (int64_t)json_integer_value(v[2]);
  if (!json_is_array(dt) || json_array_size(dt) != 3)
    return fp8_errorf(FP8_EFORMAT, err, errlen,
                      "%s: model_shape.linears[%zu].dtypes: expected 3 dtype names", path, k);
  for (int i = 0; i < 3; i++) {
    const char *d = json_string_value(json_array_get(dt, (size_t)i));
    int found = 0;
    for (int t = FP8_DTYPE_F32; t <= FP8_DTYPE_F16 && d; t++)
      if (strcmp(d, fp8_dtype_name((fp8_dtype)t)) == 0) l->dtype[i] = (fp8_dtype)t, found = 1;
    if (!found)
      return fp8_errorf(FP8_EFORMAT, err, errlen,
                        "%s: model_shape.linears[%zu].dtypes[%d]: expected F32, BF16 or F16",
                        path, k, i);
  }
  if (!(l->name = strdup(json_string_value(nm))))
    return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  return FP8_OK;
}

/* run.json's model_shape (absent in a run.json written before it, or for a trace without
 * Linear layers): each Linear's name, sizes and dtypes, checked as the rest. */
static int read_model_shape(fp8_run_record *r, json_t *j, const char *path, char *err,
                            size_t errlen) {
  json_t *ms = json_object_get(j, FP8_RUNJSON_MODEL_SHAPE);
  if (!ms) return FP8_OK;
  json_t *ly = json_object_get(ms, FP8_RUNJSON_MS_LAYERS), *w = json_object_get(ms, FP8_RUNJSON_MS_WORLD);
  json_t *a = json_object_get(ms, FP8_RUNJSON_MS_LINEARS);
  if (!json_is_object(ms) || !json_is_integer(ly) || json_integer_value(ly) < 1 ||
      !json_is_integer(w) || json_integer_value(w) < 1 || json_integer_value(w) > (1 << 24) ||
      !json_is_array(a) || json_array_size(a) == 0)
    return fp8_errorf(FP8_EFORMAT, err, errlen,
                      "%s: model_shape: expected an object with layers and world (integers >= 1) "
                      "and linears (a non-empty array)", path);
  fp8_tl_shape *s = &r->model_shape;
  memset(s, 0, sizeof *s);
  if (!(s->linears = calloc(json_array_size(a), sizeof *s->linears)))
    return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  s->layers = (int64_t)json_integer_value(ly);
  s->world = (int64_t)json_integer_value(w);
  s->history_len = 1024;
  r->has_model_shape = 1; /* freed by fp8_run_json_free whatever follows */
  for (size_t k = 0; k < json_array_size(a); k++) {
    int rc = read_linear(&s->linears[k], json_array_get(a, k), k, path, err, errlen);
    if (rc) return rc;
    s->nlinears = k + 1;
  }
  return FP8_OK;
}

/* An optional string key of object o into *out (NULL when absent). */
static int opt_string(json_t *o, const char *key, const char *what, char **out, const char *path,
                      char *err, size_t errlen) {
  json_t *v = json_object_get(o, key);
  if (!v) return FP8_OK;
  if (!plain_string(v))
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: %s: expected a string", path, what);
  if (!(*out = strdup(json_string_value(v))))
    return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  return FP8_OK;
}

/* What of the trace advice.ini carries on: its absolute path, [trace] steps and tensors, the
 * amax reduction (each absent in a run.json written before it). */
static int read_trace_selection(fp8_run_record *r, json_t *tr, const char *path, char *err,
                                size_t errlen) {
  int rc = opt_string(tr, FP8_RUNJSON_TR_ABS_PATH, "trace.abs_path", &r->trace_abs_path, path,
                      err, errlen);
  if (!rc) rc = opt_string(tr, FP8_RUNJSON_TR_STEPS, "trace.steps", &r->trace_steps, path, err,
                           errlen);
  if (rc) return rc;
  json_t *g = json_object_get(tr, FP8_RUNJSON_TR_TENSORS);
  if (g && (rc = read_strings(g, "trace.tensors", 0, &r->trace_tensors, &r->ntrace_tensors, path,
                              err, errlen)) != FP8_OK)
    return rc;
  json_t *ra = json_object_get(tr, FP8_RUNJSON_TR_REDUCE_AMAX);
  json_t *rg = json_object_get(tr, FP8_RUNJSON_TR_REDUCE_GROUP);
  if (ra && (!json_is_boolean(ra) || !json_is_integer(rg) || json_integer_value(rg) < 1))
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: trace: expected reduce_amax (true or false) "
                      "and reduce_group (an integer >= 1) together", path);
  if (ra) {
    r->reduce_amax = json_is_true(ra);
    r->reduce_group = (int64_t)json_integer_value(rg);
  }
  json_t *rs = json_object_get(tr, FP8_RUNJSON_TR_REDUCE_STRIDE);
  if (rs && (!ra || !json_is_integer(rs) || json_integer_value(rs) < 1))
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: trace.reduce_stride: expected an integer "
                      ">= 1, with reduce_amax and reduce_group", path);
  if (rs) r->reduce_stride = (int64_t)json_integer_value(rs);
  json_t *wh = json_object_get(tr, FP8_RUNJSON_TR_WARM_HISTORY);
  if (wh && !json_is_boolean(wh))
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: trace.warm_history: expected true or false",
                      path);
  r->warm_history = wh && json_is_true(wh); /* absent: a run before the key, cold */
  const char *const cnt_key[2] = {FP8_RUNJSON_TR_STEPS_BEFORE, FP8_RUNJSON_TR_STEPS_SKIPPED};
  int64_t *cnt[2] = {&r->steps_before, &r->steps_skipped};
  for (int k = 0; k < 2; k++) {
    json_t *v = json_object_get(tr, cnt_key[k]);
    *cnt[k] = -1;
    if (v && (!json_is_integer(v) || json_integer_value(v) < 0))
      return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: trace.%s: expected an integer >= 0", path,
                        cnt_key[k]);
    if (v) *cnt[k] = (int64_t)json_integer_value(v);
  }
  json_t *te = json_object_get(tr, FP8_RUNJSON_TR_TE_LOG);
  if (te) {
    json_t *v[3] = {json_object_get(te, FP8_TE_LOG_INTERVAL),
                    json_object_get(te, FP8_TE_LOG_ZERO_VALUES),
                    json_object_get(te, FP8_TE_LOG_COARSE_VALUES)};
    int64_t *dst[3] = {&r->te_interval, &r->te_zero, &r->te_coarse};
    for (int k = 0; k < 3; k++) {
      if (!json_is_integer(v[k]) || json_integer_value(v[k]) < 0)
        return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: trace.te_log: expected interval, "
                          "zero_values and coarse_values (integers >= 0)", path);
      *dst[k] = (int64_t)json_integer_value(v[k]);
    }
    r->has_te_log = 1;
    json_t *ti = json_object_get(te, FP8_TE_LOG_TENSOR_INTERVALS);
    if (ti && (rc = fp8_run_json_read_te_intervals(r, ti, path, err, errlen)) != FP8_OK) return rc;
  }
  return FP8_OK;
}

/* The trace object: its path, and a synthetic trace's preset, steps and seed together. */
static int read_trace(fp8_run_record *r, json_t *j, const char *path, char *err, size_t errlen) {
  json_t *tr = json_object_get(j, FP8_RUNJSON_TRACE);
  if (!json_is_object(tr))
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: trace: expected an object", path);
  json_t *tp = json_object_get(tr, FP8_RUNJSON_TR_PATH);
  json_t *preset = json_object_get(tr, FP8_RUNJSON_TR_SYNTH_PRESET);
  if (!json_is_string(tp))
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: trace.path: expected a string", path);
  if (!(r->trace_path = strdup(json_string_value(tp))))
    return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  int rc = read_trace_selection(r, tr, path, err, errlen);
  if (rc || !preset) return rc;
  json_t *st = json_object_get(tr, FP8_RUNJSON_TR_SYNTH_STEPS);
  json_t *sd = json_object_get(tr, FP8_RUNJSON_TR_SYNTH_SEED);
  if (!json_is_string(preset) || !json_is_integer(st) || !json_is_integer(sd))
    return fp8_errorf(FP8_EFORMAT, err, errlen,
                      "%s: trace: expected synth_preset (a string), synth_steps and synth_seed "
                      "(integers) together", path);
  if (!(r->synth_preset = strdup(json_string_value(preset))))
    return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  r->synth_steps = (int64_t)json_integer_value(st);
  r->synth_seed = (int64_t)json_integer_value(sd);
  return FP8_OK;
}

/* The names of the outputs list of document j that pass fp8_output_name_ok, appended to o (no
 * list, or no document: none). FP8_OK or FP8_ENOMEM. */
static int add_outputs(json_t *j, fp8_outputs *o) {
  json_t *arr = json_object_get(j, FP8_RUNJSON_OUTPUTS);
  int rc = FP8_OK;
  for (size_t i = 0; i < json_array_size(arr) && rc == FP8_OK; i++) {
    const char *name = json_string_value(json_array_get(arr, i));
    if (name && fp8_output_name_ok(name)) rc = fp8_outputs_add(o, name);
  }
  return rc;
}

/* One "key = value" line per '\n' of s: key [a-z0-9_]+, value [A-Za-z0-9_.+-]+. */
static int settings_ok(const char *s) {
  for (;;) {
    const char *k = s;
    while ((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_') s++;
    if (s == k || strncmp(s, " = ", 3) != 0) return 0;
    s += 3;
    const char *v = s;
    while ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
           *s == '_' || *s == '.' || *s == '+' || *s == '-')
      s++;
    if (s == v) return 0;
    if (!*s) return 1;
    if (*s++ != '\n') return 0;
  }
}

/* experiment.configurations[*].settings, where present, into r->settings. */
static int read_settings(fp8_run_record *r, json_t *ex, const char *path, char *err,
                         size_t errlen) {
  json_t *a = json_object_get(ex, FP8_RUNJSON_EX_CONFIGURATIONS);
  if (!json_is_array(a)) return FP8_OK;
  size_t n = json_array_size(a);
  if (!(r->settings = calloc(n + 1, sizeof *r->settings)))
    return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  for (size_t i = 0; i < n; i++) {
    json_t *o = json_array_get(a, i), *st = json_object_get(o, FP8_RUNJSON_CFG_SETTINGS);
    json_t *rc = json_object_get(o, FP8_RUNJSON_CFG_RECIPE), *kd = json_object_get(o, FP8_RUNJSON_CFG_KIND);
    if (!st) continue;
    if (!plain_string(st) || !json_is_string(rc) || !json_is_string(kd) ||
        json_string_length(rc) >= 64 || json_string_length(kd) >= 16 ||
        !settings_ok(json_string_value(st)))
      return fp8_errorf(FP8_EFORMAT, err, errlen,
                        "%s: %s.%s[%zu]: expected recipe, kind and settings (\"key = value\" lines)",
                        path, FP8_RUNJSON_EXPERIMENT, FP8_RUNJSON_EX_CONFIGURATIONS, i);
    struct fp8_run_settings *s = &r->settings[r->nsettings];
    snprintf(s->recipe, sizeof s->recipe, "%s", json_string_value(rc));
    snprintf(s->kind, sizeof s->kind, "%s", json_string_value(kd));
    if (!(s->lines = strdup(json_string_value(st))))
      return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
    r->nsettings++;
  }
  return FP8_OK;
}

/* The keys the report takes from run.json, each checked: it is fp8lab's own file, and a
 * corrupted one would give a report of another experiment (or a notebook written outside the
 * folder). r holds the defaults of the keys that may be absent (fp8_run_json_read). */
static int read_record(fp8_run_record *r, json_t *j, const char *path, char *err, size_t errlen) {
  char shown[FP8_ESC_LEN];
  if (!json_is_object(j))
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: expected a JSON object", path);
  json_t *ex = json_object_get(j, FP8_RUNJSON_EXPERIMENT);
  if (!json_is_object(ex))
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: experiment: expected an object", path);
  json_t *nm = json_object_get(ex, FP8_RUNJSON_EX_NAME);
  if (!json_is_string(nm))
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: experiment.name: expected a string", path);
  if (!plain_string(nm) || !is_file_name(json_string_value(nm)))
    return fp8_errorf(FP8_EFORMAT, err, errlen,
                      "%s: experiment.name '%s' is not a file name (a name without '/', not . or "
                      ".., printable UTF-8 of 1 to %d bytes)",
                      path, fp8_escape(json_string_value(nm), json_string_length(nm), shown,
                                       sizeof shown), FP8_NAME_MAX);
  snprintf(r->name, sizeof r->name, "%s", json_string_value(nm));
  int rc = budget_of(path, ex, FP8_RUNJSON_EX_OVERFLOW_BUDGET, &r->overflow_budget, err, errlen);
  if (!rc) rc = budget_of(path, ex, FP8_RUNJSON_EX_STEP_BUDGET, &r->step_budget, err, errlen);
  if (!rc) rc = read_settings(r, ex, path, err, errlen);
  if (rc) return rc;
  json_t *fr = json_object_get(ex, FP8_RUNJSON_EX_FP4_GEMM_RATIO);
  if (fr && (!json_is_number(fr) || !(json_number_value(fr) >= 1.0 && json_number_value(fr) <= 1e6)))
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: %s.%s: expected a number in 1..1e6", path,
                      FP8_RUNJSON_EXPERIMENT, FP8_RUNJSON_EX_FP4_GEMM_RATIO);
  if (fr) r->fp4_gemm_ratio = json_number_value(fr);
  json_t *fx = json_object_get(ex, FP8_RUNJSON_EX_FP4_REFERENCE);
  if (fx) { /* issue 42: gemm.csv's spelling of the configuration */
    static const char *const keys[5] = {FP8_RUNJSON_CFG_RECIPE, FP8_RUNJSON_CFG_KIND,
                                        "history_len", FP8_RUNJSON_CFG_MARGIN, "amax_compute"};
    const char *v[5];
    const char *what = "";
    int ok = json_is_object(fx);
    for (int k = 0; k < 5 && ok; k++) {
      json_t *e = json_object_get(fx, keys[k]);
      ok = e && json_is_string(e) && strlen(json_string_value(e)) < 64;
      v[k] = ok ? json_string_value(e) : NULL;
    }
    if (ok) {
      snprintf(r->fp4_reference_recipe, sizeof r->fp4_reference_recipe, "%s", v[0]);
      ok = fp8_config_key_parse(r->fp4_reference_recipe, v[1], NULL, v[2], v[3], v[4],
                                &r->fp4_reference, &what) < 0;
    }
    if (!ok)
      return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: %s.%s: expected an object of strings "
                        "recipe, kind, history_len, margin and amax_compute as gemm.csv "
                        "spells a configuration%s%s", path, FP8_RUNJSON_EXPERIMENT,
                        FP8_RUNJSON_EX_FP4_REFERENCE, *what ? ": " : "", what);
    r->has_fp4_reference = 1;
  }
  if (json_object_get(ex, FP8_RUNJSON_EX_FLUSH_BUDGET))
    rc = budget_of(path, ex, FP8_RUNJSON_EX_FLUSH_BUDGET, &r->flush_budget, err, errlen);
  if (rc) return rc;
  json_t *ro = json_object_get(ex, FP8_RUNJSON_EX_ROUTERS);
  if (ro && (!json_is_string(ro) || (strcmp(json_string_value(ro), "fp8") != 0 &&
                                     strcmp(json_string_value(ro), "bf16") != 0)))
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: %s.%s: expected \"bf16\" or \"fp8\"", path,
                      FP8_RUNJSON_EXPERIMENT, FP8_RUNJSON_EX_ROUTERS);
  r->routers_fp8 = ro && strcmp(json_string_value(ro), "fp8") == 0;
  json_t *wu = json_object_get(ex, FP8_RUNJSON_EX_WARMUP_STEPS);
  if (wu && (!json_is_integer(wu) || json_integer_value(wu) < 0))
    return fp8_errorf(FP8_EFORMAT, err, errlen,
                      "%s: experiment.warmup_steps: expected an integer >= 0", path);
  if (wu) r->warmup_steps = (int64_t)json_integer_value(wu);
  json_t *gm = json_object_get(ex, FP8_RUNJSON_EX_GEMM);
  json_t *gt = json_object_get(ex, FP8_RUNJSON_EX_GEMM_MAX_TOKENS);
  if ((gm && !json_is_boolean(gm)) ||
      (gt && (!json_is_integer(gt) || json_integer_value(gt) < 0 ||
              json_integer_value(gt) > ((json_int_t)1 << 31))))
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: experiment: expected gemm (true or false) "
                      "and gemm_max_tokens (an integer in 0..2^31)", path);
  if (gm) r->gemm = json_is_true(gm);
  if (gt) r->gemm_max_tokens = (int64_t)json_integer_value(gt);
  json_t *ge = json_object_get(ex, FP8_RUNJSON_EX_GEMM_ERROR);
  json_t *gs = json_object_get(ex, FP8_RUNJSON_EX_GEMM_SAMPLE);
  json_t *gd = json_object_get(ex, FP8_RUNJSON_EX_GEMM_SEED);
  const char *ges = ge && json_is_string(ge) ? json_string_value(ge) : NULL;
  int sampled = ges && strcmp(ges, FP8_RUNJSON_GEMM_SAMPLED) == 0;
  if ((ge && (!ges || (!sampled && strcmp(ges, FP8_RUNJSON_GEMM_EXACT) != 0))) ||
      (sampled && (!gs || !json_is_integer(gs) || json_integer_value(gs) < 2 ||
                   json_integer_value(gs) > 65536 || !gd || !json_is_integer(gd) ||
                   json_integer_value(gd) < 0)))
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: experiment: expected gemm_error (sampled "
                      "or exact), and with sampled gemm_sample (an integer in 2..65536) and "
                      "gemm_seed (an integer >= 0)", path);
  r->gemm_sampled = sampled;
  if (sampled) {
    r->gemm_sample = (int64_t)json_integer_value(gs);
    r->gemm_seed = (int64_t)json_integer_value(gd);
  }
  json_t *tc = json_object_get(ex, FP8_RUNJSON_EX_TENSOR_CORE);
  fp8_tc_model tcm = FP8_TC_EXACT;
  if (tc && (!json_is_string(tc) || fp8_tc_model_parse(json_string_value(tc), &tcm)))
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: experiment.tensor_core: expected exact, "
                      "h100 or b200", path);
  r->tensor_core = (int)tcm;
  json_t *ct = json_object_get(ex, FP8_RUNJSON_EX_COST_TOKENS);
  if (ct && (!json_is_integer(ct) || json_integer_value(ct) < 1 ||
             json_integer_value(ct) > ((json_int_t)1 << 31)))
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: experiment.cost_tokens: expected an "
                      "integer in 1..2^31", path);
  if (ct) r->cost_tokens = (int64_t)json_integer_value(ct);
  if ((rc = read_left_out(r, j, path, err, errlen)) != FP8_OK) return rc;
  if ((rc = read_unserved(r, j, path, err, errlen)) != FP8_OK) return rc;
  if (add_outputs(j, &r->outputs) != FP8_OK)
    return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  if ((rc = read_model_shape(r, j, path, err, errlen)) != FP8_OK) return rc;
  if ((rc = fp8_run_json_read_inputs(r, j, path, err, errlen)) != FP8_OK) return rc;
  return read_trace(r, j, path, err, errlen);
}

void fp8_run_json_free(fp8_run_record *r) {
  fp8_outputs_free(&r->outputs);
  json_decref(r->doc_);
  r->doc_ = NULL;
  if (r->has_model_shape) fp8_tl_shape_free(&r->model_shape);
  r->has_model_shape = 0;
  for (int why = 0; why < FP8_LEFT_COUNT; why++) {
    for (size_t k = 0; k < r->nleft[why]; k++) free(r->left[why][k]);
    free(r->left[why]);
    r->left[why] = NULL;
    r->nleft[why] = 0;
  }
  free(r->unserved);
  r->unserved = NULL;
  r->nunserved = 0;
  for (size_t k = 0; k < r->ninputs; k++) free(r->inputs[k].path);
  free(r->inputs);
  r->inputs = NULL;
  r->ninputs = 0;
  r->inputs_hashed = 0;
  for (size_t k = 0; k < r->nsettings; k++) free(r->settings[k].lines);
  free(r->settings);
  r->settings = NULL;
  r->nsettings = 0;
  free(r->trace_path);
  free(r->synth_preset);
  free(r->trace_abs_path);
  free(r->trace_steps);
  for (size_t i = 0; i < r->ntrace_tensors; i++) free(r->trace_tensors[i]);
  free(r->trace_tensors);
  for (size_t i = 0; i < r->nte_tensors; i++) free(r->te_tensor_names[i]);
  free(r->te_tensor_names);
  free(r->te_tensor_intervals);
  r->te_tensor_names = NULL;
  r->te_tensor_intervals = NULL;
  r->nte_tensors = 0;
  r->trace_path = r->synth_preset = r->trace_abs_path = r->trace_steps = NULL;
  r->trace_tensors = NULL;
  r->ntrace_tensors = 0;
}

int fp8_run_json_read(const char *dir, fp8_run_record *rec, char *err, size_t errlen) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", dir, FP8_RUNJSON_FILE);
  memset(rec, 0, sizeof *rec);
  /* the defaults of the keys a run.json may lack (written before them) */
  rec->overflow_budget = rec->step_budget = -1;
  rec->flush_budget = NAN; /* off */
  rec->fp4_gemm_ratio = 4.0;
  rec->warmup_steps = -1;
  rec->gemm = -1;
  rec->gemm_max_tokens = -1;
  FILE *fp = fopen(path, "rb");
  if (!fp)
    return fp8_errorf(FP8_EIO, err, errlen,
                      "%s: cannot open: %s (fp8lab report reads a folder that fp8lab run wrote)",
                      path, strerror(errno));
  json_error_t jerr;
  json_t *j = json_loadf(fp, JSON_REJECT_DUPLICATES, &jerr);
  fclose(fp);
  int rc;
  if (!j) {
    char text[FP8_ESC_LEN];
    rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%d: not JSON: %s", path, jerr.line,
                    fp8_esc(jerr.text, text, sizeof text));
  } else {
    rc = read_record(rec, j, path, err, errlen);
  }
  rec->doc_ = j; /* for fp8_run_json_set_report_outputs; freed with the record */
  return rc;
}

/* <dir>/run.json as jansson reads it, no key checked (NULL: none, or not JSON) */
static json_t *load_lenient(const char *dir) {
  size_t len = strlen(dir) + 16;
  char *path = malloc(len);
  if (!path) return NULL;
  snprintf(path, len, "%s/%s", dir, FP8_RUNJSON_FILE);
  json_error_t jerr;
  json_t *j = json_load_file(path, 0, &jerr);
  free(path);
  return j;
}

int fp8_run_json_read_name(const char *dir, char *name, size_t len) {
  json_t *j = load_lenient(dir);
  const char *s = json_string_value(
      json_object_get(json_object_get(j, FP8_RUNJSON_EXPERIMENT), FP8_RUNJSON_EX_NAME));
  int ok = s && (size_t)snprintf(name, len, "%s", s) < len;
  json_decref(j);
  return ok;
}

int fp8_run_json_read_outputs(const char *dir, fp8_outputs *o) {
  json_t *j = load_lenient(dir);
  int rc = add_outputs(j, o);
  json_decref(j);
  return rc;
}
