/* safetensors.c: reading (mmap + jansson, every header field checked against the file size)
 * and writing (temp file + rename) of safetensors files, the snapshot format of traces.
 *
 * Layout: u64 little-endian header length n, n bytes of JSON header
 * {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}},
 * then the data section; offsets are relative to its start (byte 8 + n).
 */
#include "trace_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "block.h"   /* fp8_block_view_2d */
#include "outfile.h" /* fp8_write_errno_status */
#include "util.h"

/* The JSON type of j with its article, for messages ("an array"). */
static const char *json_type_name(const json_t *j) {
  switch (json_typeof(j)) {
  case JSON_OBJECT: return "an object";
  case JSON_ARRAY: return "an array";
  case JSON_STRING: return "a string";
  case JSON_INTEGER: return "an integer";
  case JSON_REAL: return "a real number";
  case JSON_TRUE:
  case JSON_FALSE: return "a boolean";
  case JSON_NULL: return "null";
  }
  return "?";
}

/* Maps a safetensors dtype string to fp8_dtype; 0 on success, -1 when unsupported. */
static int parse_dtype(const char *s, fp8_dtype *out) {
  if (strcmp(s, "F32") == 0) *out = FP8_DTYPE_F32;
  else if (strcmp(s, "BF16") == 0) *out = FP8_DTYPE_BF16;
  else if (strcmp(s, "F16") == 0) *out = FP8_DTYPE_F16;
  else return -1;
  return 0;
}

/* Validates one header entry and fills v (all but name); name is the tensor's name as
 * messages show it (escaped). data_base/data_size: the data section. Returns an fp8_status
 * with err set. */
static int parse_entry(const char *path, const char *name, json_t *ent,
                       const unsigned char *data_base, uint64_t data_size, fp8_tensor_view *v,
                       char *err, size_t errlen) {
  if (!json_is_object(ent))
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: tensor %s: entry is %s, expected an object",
                         path, name, json_type_name(ent));
  json_t *jd = json_object_get(ent, "dtype");
  json_t *js = json_object_get(ent, "shape");
  json_t *jo = json_object_get(ent, "data_offsets");
  if (!jd || !js || !jo)
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: tensor %s: missing \"%s\"", path, name,
                         !jd ? "dtype" : !js ? "shape" : "data_offsets");
  if (!json_is_string(jd))
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: tensor %s: dtype is %s, expected a string",
                         path, name, json_type_name(jd));
  char shown[FP8_ESC_LEN];
  if (parse_dtype(json_string_value(jd), &v->dtype) != 0)
    return fp8_errorf(FP8_EFORMAT, err, errlen,
                         "%s: tensor %s: dtype %s not supported (F32, BF16, F16)", path, name,
                         fp8_escape(json_string_value(jd), json_string_length(jd), shown,
                                    sizeof shown));
  if (!json_is_array(js))
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: tensor %s: shape is %s, expected an array",
                         path, name, json_type_name(js));
  size_t nd = json_array_size(js);
  if (nd > FP8_MAX_DIMS)
    return fp8_errorf(FP8_EFORMAT, err, errlen,
                         "%s: tensor %s: shape has %zu dimensions, at most %d supported", path,
                         name, nd, FP8_MAX_DIMS);
  v->ndim = (int)nd;
  int has_zero = 0;
  for (size_t k = 0; k < nd; k++) {
    json_t *x = json_array_get(js, k);
    if (!json_is_integer(x))
      return fp8_errorf(FP8_EFORMAT, err, errlen,
                           "%s: tensor %s: shape[%zu] is %s, expected an integer", path, name, k,
                           json_type_name(x));
    json_int_t dim = json_integer_value(x);
    if (dim < 0)
      return fp8_errorf(FP8_EFORMAT, err, errlen,
                           "%s: tensor %s: shape[%zu] is %lld, must be >= 0", path, name, k,
                           (long long)dim);
    v->shape[k] = (int64_t)dim;
    if (dim == 0) has_zero = 1;
  }
  size_t esize = fp8_dtype_size(v->dtype);
  int64_t numel = 1;
  if (has_zero) {
    numel = 0;
  } else {
    for (size_t k = 0; k < nd; k++) {
      if (numel > INT64_MAX / (int64_t)esize / v->shape[k])
        return fp8_errorf(FP8_EFORMAT, err, errlen,
                             "%s: tensor %s: shape's element count overflows", path, name);
      numel *= v->shape[k];
    }
  }
  v->numel = numel;
  uint64_t nbytes = (uint64_t)numel * esize;
  if (!json_is_array(jo) || json_array_size(jo) != 2 || !json_is_integer(json_array_get(jo, 0)) ||
      !json_is_integer(json_array_get(jo, 1)))
    return fp8_errorf(FP8_EFORMAT, err, errlen,
                         "%s: tensor %s: data_offsets must be an array of two integers", path,
                         name);
  json_int_t b = json_integer_value(json_array_get(jo, 0));
  json_int_t e = json_integer_value(json_array_get(jo, 1));
  if (b < 0 || e < 0)
    return fp8_errorf(FP8_EFORMAT, err, errlen,
                         "%s: tensor %s: data_offsets [%lld, %lld] negative", path, name,
                         (long long)b, (long long)e);
  if (b > e)
    return fp8_errorf(FP8_EFORMAT, err, errlen,
                         "%s: tensor %s: data_offsets begin %lld > end %lld", path, name,
                         (long long)b, (long long)e);
  if ((uint64_t)e > data_size)
    return fp8_errorf(FP8_EFORMAT, err, errlen,
                         "%s: tensor %s: data_offsets end %lld beyond data size %" PRIu64, path,
                         name, (long long)e, data_size);
  if ((uint64_t)(e - b) != nbytes)
    return fp8_errorf(FP8_EFORMAT, err, errlen,
                         "%s: tensor %s: data_offsets [%lld, %lld] hold %lld bytes, expected "
                         "%" PRIu64 " (%lld elements of %s)",
                         path, name, (long long)b, (long long)e, (long long)(e - b), nbytes,
                         (long long)numel, fp8_dtype_name(v->dtype));
  v->data = data_base ? data_base + b : NULL;
  return FP8_OK;
}

/* A tensor's data region within the data section, for check_tiling. */
typedef struct {
  uint64_t b, e;
  const char *name;
} region;

static int cmp_region(const void *x, const void *y) {
  const region *a = x, *b = y;
  if (a->b != b->b) return a->b < b->b ? -1 : 1;
  if (a->e != b->e) return a->e < b->e ? -1 : 1;
  return strcmp(a->name, b->name);
}

/* The format's own rule (the safetensors crate's Metadata::validate and read_metadata:
 * InvalidOffset, MetadataIncompleteBuffer): the data regions, taken in offset order, tile the
 * data section: each begins where the previous one ended, the first at 0, the last ends at
 * the end of the file. So no two tensors share bytes, no byte is unused, and a header length
 * one byte off (which would shift every tensor by a byte) cannot pass. data_at: the file
 * offset of the data section, for messages. */
static int check_tiling(const char *path, const fp8_step *s, const unsigned char *data_base,
                        uint64_t data_size, uint64_t data_at, char *err, size_t errlen) {
  static const char rule[] = "(the data regions, in offset order, must tile the data section)";
  region *r = malloc((s->ntensors + 1) * sizeof *r);
  if (!r) return FP8_ENOMEM;
  for (size_t i = 0; i < s->ntensors; i++) {
    const fp8_tensor_view *v = &s->tensors[i];
    r[i].b = (uint64_t)((const unsigned char *)v->data - data_base);
    r[i].e = r[i].b + (uint64_t)v->numel * fp8_dtype_size(v->dtype);
    r[i].name = v->name;
  }
  qsort(r, s->ntensors, sizeof *r, cmp_region);
  int rc = FP8_OK;
  char a[FP8_ESC_LEN], b[FP8_ESC_LEN];
  uint64_t end = 0;
  for (size_t i = 0; i < s->ntensors && rc == FP8_OK; i++) {
    if (r[i].b < end)
      rc = fp8_errorf(FP8_EFORMAT, err, errlen,
                      "%s: tensor %s: data_offsets [%" PRIu64 ", %" PRIu64 "] overlap tensor "
                      "%s's [%" PRIu64 ", %" PRIu64 "] %s",
                      path, fp8_esc(r[i].name, a, sizeof a), r[i].b, r[i].e,
                      fp8_esc(r[i - 1].name, b, sizeof b), r[i - 1].b, r[i - 1].e, rule);
    else if (r[i].b > end && i == 0)
      rc = fp8_errorf(FP8_EFORMAT, err, errlen,
                      "%s: tensor %s: data_offsets [%" PRIu64 ", %" PRIu64 "] leave bytes 0 to "
                      "%" PRIu64 " of the data section (file bytes %" PRIu64 " to %" PRIu64 ") "
                      "unused before it %s",
                      path, fp8_esc(r[i].name, a, sizeof a), r[i].b, r[i].e, r[i].b, data_at,
                      data_at + r[i].b, rule);
    else if (r[i].b > end)
      rc = fp8_errorf(FP8_EFORMAT, err, errlen,
                      "%s: tensor %s: data_offsets [%" PRIu64 ", %" PRIu64 "] leave bytes "
                      "%" PRIu64 " to %" PRIu64 " of the data section (file bytes %" PRIu64
                      " to %" PRIu64 ") unused after tensor %s %s",
                      path, fp8_esc(r[i].name, a, sizeof a), r[i].b, r[i].e, end, r[i].b,
                      data_at + end, data_at + r[i].b, fp8_esc(r[i - 1].name, b, sizeof b),
                      rule);
    end = r[i].e;
  }
  if (rc == FP8_OK && end != data_size) {
    uint64_t extra = data_size - end;
    char last[FP8_ESC_LEN + 64] = "";
    if (s->ntensors)
      snprintf(last, sizeof last, "its last tensor (%s) ends at %" PRIu64,
               fp8_esc(r[s->ntensors - 1].name, a, sizeof a), end);
    rc = fp8_errorf(FP8_EFORMAT, err, errlen,
                    "%s: data section of %" PRIu64 " bytes, but %s: %" PRIu64 " byte%s at file "
                    "byte %" PRIu64 " belong%s to no tensor (a wrong header length, or bytes "
                    "after the data)",
                    path, data_size, s->ntensors ? last : "the header has no tensor", extra,
                    extra == 1 ? "" : "s", data_at + end, extra == 1 ? "s" : "");
  }
  free(r);
  return rc;
}

/* The capture's row subsets (issue 27): metadata "fp8lab.rows.<tensor>" = the rows of the
 * whole tensor, when the snapshot kept a subset of them (fp8lab.capture, Recorder(rows=N)). A
 * key for a tensor the file lacks is ignored; a value that is not a whole number at least the
 * kept rows (and at most 2^40) is bad input. */
#define ROWS_KEY "fp8lab.rows."
static int read_full_rows(const char *path, json_t *meta, fp8_step *out, char *err,
                          size_t errlen) {
  char key[FP8_NAME_MAX + sizeof ROWS_KEY + 1];
  for (size_t i = 0; i < out->ntensors; i++) {
    fp8_tensor_view *v = &out->tensors[i];
    snprintf(key, sizeof key, "%s%s", ROWS_KEY, v->name);
    const char *val = json_string_value(json_object_get(meta, key));
    if (!val) continue;
    int64_t rows = 0, cols = 0, full = 0;
    int ok = *val >= '1' && *val <= '9';
    for (const char *p = val; ok && *p; p++) {
      ok = *p >= '0' && *p <= '9' && full <= ((int64_t)1 << 40) / 10;
      full = full * 10 + (*p - '0');
    }
    if (v->ndim >= 2) fp8_block_view_2d(v->shape, v->ndim, &rows, &cols);
    if (!ok || v->ndim < 2 || full < rows || full > ((int64_t)1 << 40)) {
      char shown[FP8_ESC_LEN], vs[64];
      return fp8_errorf(FP8_EFORMAT, err, errlen, "%s: __metadata__ %s%s = \"%s\": expected the "
                        "rows of the whole tensor, a whole number from its %lld rows to 2^40",
                        path, ROWS_KEY, fp8_esc(v->name, shown, sizeof shown),
                        fp8_esc(val, vs, sizeof vs), (long long)rows);
    }
    v->full_rows = full;
  }
  return FP8_OK;
}

int fp8_safetensors_open(const char *path, fp8_step *out, char *err, size_t errlen) {
  int rc = FP8_OK;
  fp8_map m = {NULL, 0};
  json_t *root = NULL;
  memset(out, 0, sizeof *out);
  out->step = -1;
  if (err && errlen) err[0] = '\0';

  rc = fp8_map_file(path, &m, err, errlen);
  if (rc != FP8_OK) goto done;
  const unsigned char *base = m.addr;
  if (m.len < 8) {
    rc = fp8_errorf(FP8_EFORMAT, err, errlen,
                       "%s: file size %zu is less than the 8-byte header length field", path,
                       m.len);
    goto done;
  }
  uint64_t hlen = 0;
  for (int k = 7; k >= 0; k--) hlen = (hlen << 8) | base[k];
  if (hlen > m.len - 8) {
    rc = fp8_errorf(FP8_EFORMAT, err, errlen,
                       "%s: header length %" PRIu64 " at byte 0 exceeds file size %zu", path,
                       hlen, m.len);
    goto done;
  }
  json_error_t jerr;
  root = json_loadb((const char *)base + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
  if (!root) {
    char text[FP8_ESC_LEN]; /* jansson quotes the input near the error */
    rc = fp8_errorf(FP8_EFORMAT, err, errlen,
                       "%s: JSON header (%" PRIu64 " bytes at byte 8) not parseable: %s at "
                       "line %d, column %d (byte %lld of the file)",
                       path, hlen, fp8_esc(jerr.text, text, sizeof text), jerr.line, jerr.column,
                       (long long)(8 + (jerr.position > 0 ? jerr.position : 0)));
    goto done;
  }
  if (!json_is_object(root)) {
    rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s: JSON header is %s, expected an object",
                       path, json_type_name(root));
    goto done;
  }
  const unsigned char *data_base = base + 8 + hlen;
  uint64_t data_size = m.len - 8 - hlen;
  size_t n = json_object_size(root);
  json_t *meta = json_object_get(root, "__metadata__");
  if (meta) {
    if (!json_is_object(meta)) {
      rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s: __metadata__ is %s, expected an object",
                         path, json_type_name(meta));
      goto done;
    }
    const char *k;
    json_t *val;
    json_object_foreach(meta, k, val) {
      if (!json_is_string(val)) {
        char key[FP8_ESC_LEN];
        rc = fp8_errorf(FP8_EFORMAT, err, errlen,
                           "%s: __metadata__ value of %s is %s, expected a string", path,
                           fp8_esc(k, key, sizeof key), json_type_name(val));
        goto done;
      }
    }
    n--;
  }
  if (n > 0) {
    out->tensors = calloc(n, sizeof *out->tensors);
    if (!out->tensors) {
      rc = FP8_ENOMEM;
      goto done;
    }
  }
  const char *name;
  json_t *ent;
  json_object_foreach(root, name, ent) {
    if (strcmp(name, "__metadata__") == 0) continue;
    fp8_tensor_view *v = &out->tensors[out->ntensors];
    char shown[FP8_ESC_LEN], why[FP8_ESC_LEN + 64];
    fp8_esc(name, shown, sizeof shown);
    if (fp8_tensor_name_check(name, strlen(name), FP8_NAME_MAX, why, sizeof why) != 0) {
      rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s: tensor %s: %s", path, shown, why);
      goto done;
    }
    rc = parse_entry(path, shown, ent, data_base, data_size, v, err, errlen);
    if (rc != FP8_OK) goto done;
    v->name = strdup(name);
    if (!v->name) {
      rc = FP8_ENOMEM;
      goto done;
    }
    out->ntensors++;
  }
  rc = check_tiling(path, out, data_base, data_size, 8 + hlen, err, errlen);
  if (rc != FP8_OK) goto done;
  if (meta && (rc = read_full_rows(path, meta, out, err, errlen)) != FP8_OK) goto done;
  fp8_step_sort(out); /* names are unique: JSON_REJECT_DUPLICATES */
  rc = fp8_step_add_map(out, &m);
  if (rc != FP8_OK) goto done;
  m.addr = NULL; /* now owned by out */
done:
  if (rc == FP8_ENOMEM && err && errlen && !err[0])
    fp8_errorf(rc, err, errlen, "%s: out of memory", path);
  json_decref(root);
  fp8_map_release(&m);
  if (rc != FP8_OK) fp8_step_free(out);
  return rc;
}

/* ------------------------------------------------------------------ writer */

/* The writer refuses the names the reader would refuse (and __metadata__). */
static int check_out_name(const char *path, size_t i, const char *name, char *err,
                          size_t errlen) {
  char why[FP8_ESC_LEN + 64] = "", shown[FP8_ESC_LEN];
  if (name && strcmp(name, "__metadata__") != 0 &&
      fp8_tensor_name_check(name, strlen(name), FP8_NAME_MAX, why, sizeof why) == 0)
    return FP8_OK;
  return fp8_errorf(FP8_EINVAL, err, errlen, "%s: tensor %zu: invalid name '%s'%s%s", path, i,
                    fp8_esc(name, shown, sizeof shown), *why ? ": " : "", why);
}

/* Builds the header object; *data_total gets the data section size. */
static int build_header(const char *path, const fp8_tensor_out *t, size_t n,
                        const char *const *metadata, json_t **out, uint64_t *data_total,
                        char *err, size_t errlen) {
  int rc = FP8_OK;
  json_t *root = json_object();
  uint64_t off = 0;
  if (!root) {
    rc = FP8_ENOMEM;
    goto done;
  }
  for (size_t i = 0; i < n; i++) {
    if ((rc = check_out_name(path, i, t[i].name, err, errlen)) != FP8_OK) goto done;
    if (json_object_get(root, t[i].name)) {
      rc = fp8_errorf(FP8_EINVAL, err, errlen, "%s: tensor %s given twice", path, t[i].name);
      goto done;
    }
    if (t[i].dtype != FP8_DTYPE_F32 && t[i].dtype != FP8_DTYPE_BF16 &&
        t[i].dtype != FP8_DTYPE_F16) {
      rc = fp8_errorf(FP8_EINVAL, err, errlen, "%s: tensor %s: invalid dtype %d", path,
                         t[i].name, (int)t[i].dtype);
      goto done;
    }
    if (t[i].ndim < 0 || t[i].ndim > FP8_MAX_DIMS) {
      rc = fp8_errorf(FP8_EINVAL, err, errlen, "%s: tensor %s: ndim %d not in 0..%d", path,
                         t[i].name, t[i].ndim, FP8_MAX_DIMS);
      goto done;
    }
    uint64_t esize = fp8_dtype_size(t[i].dtype), numel = 1;
    int has_zero = 0;
    for (int k = 0; k < t[i].ndim; k++) {
      if (t[i].shape[k] < 0) {
        rc = fp8_errorf(FP8_EINVAL, err, errlen, "%s: tensor %s: shape[%d] is %lld", path,
                           t[i].name, k, (long long)t[i].shape[k]);
        goto done;
      }
      if (t[i].shape[k] == 0) has_zero = 1;
    }
    for (int k = 0; k < t[i].ndim && !has_zero; k++) {
      if (numel > (uint64_t)INT64_MAX / esize / (uint64_t)t[i].shape[k]) {
        rc = fp8_errorf(FP8_EINVAL, err, errlen, "%s: tensor %s: element count overflows",
                           path, t[i].name);
        goto done;
      }
      numel *= (uint64_t)t[i].shape[k];
    }
    if (has_zero) numel = 0;
    uint64_t nbytes = numel * esize;
    if (nbytes > 0 && !t[i].data) {
      rc = fp8_errorf(FP8_EINVAL, err, errlen, "%s: tensor %s: data is NULL", path, t[i].name);
      goto done;
    }
    if (off > (uint64_t)INT64_MAX - nbytes) {
      rc = fp8_errorf(FP8_EINVAL, err, errlen, "%s: total data size overflows", path);
      goto done;
    }
    json_t *shape = json_array();
    json_t *offs = json_array();
    json_t *ent = json_object();
    int bad = !shape || !offs || !ent;
    for (int k = 0; k < t[i].ndim && !bad; k++)
      bad |= json_array_append_new(shape, json_integer((json_int_t)t[i].shape[k])) != 0;
    if (!bad)
      bad = json_array_append_new(offs, json_integer((json_int_t)off)) != 0 ||
            json_array_append_new(offs, json_integer((json_int_t)(off + nbytes))) != 0 ||
            json_object_set_new(ent, "dtype", json_string(fp8_dtype_name(t[i].dtype))) != 0;
    if (bad) {
      json_decref(shape);
      json_decref(offs);
      json_decref(ent);
      rc = FP8_ENOMEM;
      goto done;
    }
    json_object_set_new(ent, "shape", shape);
    json_object_set_new(ent, "data_offsets", offs);
    if (json_object_set_new(root, t[i].name, ent) != 0) {
      rc = FP8_ENOMEM;
      goto done;
    }
    off += nbytes;
  }
  if (metadata) {
    json_t *meta = json_object();
    if (!meta || json_object_set_new(root, "__metadata__", meta) != 0) {
      rc = FP8_ENOMEM;
      goto done;
    }
    for (size_t k = 0; metadata[k]; k += 2) {
      if (!metadata[k + 1]) {
        rc = fp8_errorf(FP8_EINVAL, err, errlen, "%s: metadata key %s has no value", path,
                           metadata[k]);
        goto done;
      }
      json_t *s = json_string(metadata[k + 1]);
      if (!s) {
        rc = fp8_errorf(FP8_EINVAL, err, errlen,
                           "%s: metadata %s: value is not valid UTF-8", path, metadata[k]);
        goto done;
      }
      if (json_object_set_new(meta, metadata[k], s) != 0) {
        rc = fp8_errorf(FP8_EINVAL, err, errlen, "%s: metadata key %s is not valid UTF-8",
                           path, metadata[k]);
        goto done;
      }
    }
  }
  *data_total = off;
done:
  if (rc != FP8_OK) {
    json_decref(root);
    root = NULL;
  }
  *out = root;
  return rc;
}

int fp8_safetensors_write(const char *path, const fp8_tensor_out *tensors, size_t n,
                          const char *const *metadata, char *err, size_t errlen) {
  int rc = FP8_OK;
  json_t *root = NULL;
  char *hdr = NULL, *tmp = NULL;
  FILE *f = NULL;
  uint64_t data_total = 0;
  if (err && errlen) err[0] = '\0';
  if (!path || (n > 0 && !tensors)) {
    rc = fp8_errorf(FP8_EINVAL, err, errlen, "safetensors write: NULL path or tensors");
    goto done;
  }
  rc = build_header(path, tensors, n, metadata, &root, &data_total, err, errlen);
  if (rc != FP8_OK) goto done;
  hdr = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);
  if (!hdr) {
    rc = FP8_ENOMEM;
    goto done;
  }
  size_t len = strlen(hdr);
  size_t pad = (8 - (8 + len) % 8) % 8;
  size_t tl = strlen(path) + 32;
  tmp = malloc(tl);
  if (!tmp) {
    rc = FP8_ENOMEM;
    goto done;
  }
  snprintf(tmp, tl, "%s.tmp.%ld", path, (long)getpid());
  f = fopen(tmp, "wb");
  if (!f) {
    rc = fp8_errorf(fp8_write_errno_status(errno), err, errlen, "%s: cannot create: %s", tmp,
                    strerror(errno));
    free(tmp);
    tmp = NULL; /* nothing to remove */
    goto done;
  }
  unsigned char lenb[8];
  uint64_t hl = len + pad;
  for (int k = 0; k < 8; k++) lenb[k] = (unsigned char)(hl >> (8 * k));
  int ok = fwrite(lenb, 1, 8, f) == 8 && fwrite(hdr, 1, len, f) == len;
  for (size_t k = 0; k < pad && ok; k++) ok = fputc(' ', f) != EOF;
  for (size_t i = 0; i < n && ok; i++) {
    uint64_t numel = 1; /* validated by build_header: no overflow unless a dim is 0 */
    for (int k = 0; k < tensors[i].ndim; k++)
      if (tensors[i].shape[k] == 0) numel = 0;
    for (int k = 0; k < tensors[i].ndim && numel; k++) numel *= (uint64_t)tensors[i].shape[k];
    size_t nb = (size_t)numel * fp8_dtype_size(tensors[i].dtype);
    if (nb) ok = fwrite(tensors[i].data, 1, nb, f) == nb;
  }
  if (!ok) {
    rc = fp8_errorf(FP8_EWRITE, err, errlen, "%s: write failed: %s", tmp, strerror(errno));
    goto done;
  }
  int cr = fclose(f);
  f = NULL;
  if (cr != 0) {
    rc = fp8_errorf(FP8_EWRITE, err, errlen, "%s: write failed: %s", tmp, strerror(errno));
    goto done;
  }
  if (rename(tmp, path) != 0) {
    rc = fp8_errorf(fp8_write_errno_status(errno), err, errlen,
                    "%s: cannot rename %s into place: %s", path, tmp, strerror(errno));
    goto done;
  }
done:
  if (rc == FP8_ENOMEM && err && errlen && !err[0])
    fp8_errorf(rc, err, errlen, "%s: out of memory", path ? path : "");
  if (f) fclose(f);
  if (rc != FP8_OK && tmp) unlink(tmp);
  free(tmp);
  free(hdr);
  json_decref(root);
  return rc;
}
