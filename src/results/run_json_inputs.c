/* run_json_inputs.c: what run.json says of the files the run read (run_json.h): inputs[] with
 * their sizes and SHA-256 (fp8_run_json_input: the report checks a trace file against it), and
 * for a trace from TransformerEngine's debug logs each tensor's logging interval
 * (trace.te_log.tensor_intervals; fp8_run_te_tensor_interval). Read by run_json_read.c's
 * strict reader, every entry checked. */
#include "run_json_internal.h"

#include <stdlib.h>
#include <string.h>

#include "fp8.h"
#include "te_log.h" /* FP8_TE_LOG_TENSOR_INTERVALS */
#include "util.h"


static int cmp_te_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A tensor's name and interval, sorted together. */
typedef struct {
  char *name;
  int64_t interval;
} te_named;

static int cmp_te_named(const void *a, const void *b) {
  return strcmp(((const te_named *)a)->name, ((const te_named *)b)->name);
}

/* trace.te_log.tensor_intervals: {name: interval >= 0}, into r sorted by name. */
int fp8_run_json_read_te_intervals(fp8_run_record *r, json_t *ti, const char *path, char *err,
                             size_t errlen) {
  if (!json_is_object(ti))
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: trace.te_log.%s: expected an object "
                      "(tensor name: interval)", path, FP8_TE_LOG_TENSOR_INTERVALS);
  size_t n = json_object_size(ti), k = 0;
  te_named *v = calloc(n + 1, sizeof *v);
  r->te_tensor_names = calloc(n + 1, sizeof *r->te_tensor_names);
  r->te_tensor_intervals = calloc(n + 1, sizeof *r->te_tensor_intervals);
  int rc = v && r->te_tensor_names && r->te_tensor_intervals ? FP8_OK : FP8_ENOMEM;
  const char *key;
  json_t *x;
  json_object_foreach(ti, key, x) {
    if (rc != FP8_OK) break;
    if (!json_is_integer(x) || json_integer_value(x) < 0)
      rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s: trace.te_log.%s: %s: expected an integer "
                      ">= 0", path, FP8_TE_LOG_TENSOR_INTERVALS, key);
    else if (!(v[k].name = strdup(key))) rc = FP8_ENOMEM;
    else v[k++].interval = (int64_t)json_integer_value(x);
  }
  if (rc == FP8_OK) qsort(v, k, sizeof *v, cmp_te_named);
  for (size_t i = 0; v && i < k; i++) { /* handed over to r, to be freed with it */
    r->te_tensor_names[i] = v[i].name;
    r->te_tensor_intervals[i] = v[i].interval;
  }
  if (r->te_tensor_names) r->nte_tensors = k;
  else for (size_t i = 0; v && i < k; i++) free(v[i].name);
  free(v);
  if (rc == FP8_ENOMEM) return fp8_errorf(rc, err, errlen, "out of memory");
  return rc;
}

int64_t fp8_run_te_tensor_interval(const fp8_run_record *r, const char *tensor) {
  const char *t = tensor; /* rank_<r>/<name>: the name within the rank */
  if (strncmp(t, "rank_", 5) == 0) {
    const char *p = t + 5;
    while (*p >= '0' && *p <= '9') p++;
    if (p > t + 5 && *p == '/') t = p + 1;
  }
  if (!r->nte_tensors) return r->te_interval;
  char *const *hit = bsearch(&t, r->te_tensor_names, r->nte_tensors, sizeof *r->te_tensor_names,
                             cmp_te_name);
  return hit ? r->te_tensor_intervals[hit - r->te_tensor_names] : r->te_interval;
}

/* 1 when s is 64 lowercase hex digits (a sha256 as run.json writes it) */
static int is_sha256_hex(const char *s) {
  size_t i = 0;
  for (; s[i] && i < 64; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
  return i == 64 && !s[i];
}

/* inputs[]: each entry's path, bytes and sha256, checked (the report trusts a sha256 to say
 * whether a trace file is still what the run read; a run.json without the key lists none) */
int fp8_run_json_read_inputs(fp8_run_record *r, json_t *j, const char *path, char *err,
                       size_t errlen) {
  json_t *a = json_object_get(j, FP8_RUNJSON_INPUTS);
  if (!a) return FP8_OK;
  if (!json_is_array(a))
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: %s: expected an array", path,
                      FP8_RUNJSON_INPUTS);
  if (!(r->inputs = calloc(json_array_size(a) + 1, sizeof *r->inputs)))
    return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  for (size_t k = 0; k < json_array_size(a); k++) {
    json_t *o = json_array_get(a, k);
    json_t *pv = json_object_get(o, FP8_RUNJSON_IN_PATH); /* a string without a NUL inside */
    const char *p = json_is_string(pv) && strlen(json_string_value(pv)) == json_string_length(pv)
                        ? json_string_value(pv) : NULL;
    json_t *b = json_object_get(o, FP8_RUNJSON_IN_BYTES);
    json_t *h = json_object_get(o, FP8_RUNJSON_IN_SHA256);
    if (!json_is_object(o) || !p || (b && (!json_is_integer(b) || json_integer_value(b) < 0)) ||
        (h && (!json_is_string(h) || !is_sha256_hex(json_string_value(h)))))
      return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: %s[%zu]: expected an object with path "
                        "(a string), bytes (an integer >= 0) and sha256 (64 lowercase hex "
                        "digits), the last two optional", path, FP8_RUNJSON_INPUTS, k);
    struct fp8_run_input *in = &r->inputs[r->ninputs];
    if (!(in->path = strdup(p))) return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
    in->bytes = b ? (int64_t)json_integer_value(b) : -1;
    if (h) {
      memcpy(in->sha256, json_string_value(h), FP8_SHA256_HEX);
      r->inputs_hashed = 1;
    }
    r->ninputs++;
  }
  return FP8_OK;
}

const struct fp8_run_input *fp8_run_json_input(const fp8_run_record *rec, const char *path) {
  for (size_t k = 0; k < rec->ninputs; k++)
    if (strcmp(rec->inputs[k].path, path) == 0) return &rec->inputs[k];
  return NULL;
}

