/* streamnpy.c: the compact stream (issue 27; docs/design.md "The stream at scale"): stream.npy,
 * one NumPy record per replay (step, micro-batch) holding every stream tensor's amax, TE scale,
 * snapshot and warm-up flags and the scale of every delayed configuration, and stream.json,
 * the names: which tensor and configuration each position is, and each pair's format. The
 * rows of stream.csv are the (record, tensor, configuration) positions whose configuration
 * applies to the tensor, in that order. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "results.h"

int fp8_streamnpy_header(size_t nrec, size_t ntensors, size_t nconfigs, char *buf, size_t len) {
  char dict[512];
  int n = snprintf(dict, sizeof dict,
                   "{'descr': [('step', '<i8'), ('micro', '<i8'), ('amax', '<f4', (%zu,)), "
                   "('te_scale', '<f4', (%zu,)), ('snapshot', '|u1', (%zu,)), "
                   "('warmup', '|u1', (%zu,)), ('scale', '<f4', (%zu, %zu))], "
                   "'fortran_order': False, 'shape': (%zu,), }",
                   ntensors, ntensors, ntensors, ntensors, ntensors, nconfigs, nrec);
  if (n < 0 || (size_t)n >= sizeof dict) return -1;
  /* magic, version 1.0, the header's length (little endian), the dict padded with spaces and
   * a newline so that the data starts at a multiple of 64 bytes */
  size_t total = 10 + (size_t)n + 1;
  total = (total + 63) / 64 * 64;
  if (total > len || total - 10 > 65535) return -1;
  memcpy(buf, "\x93NUMPY\x01\x00", 8);
  buf[8] = (char)((total - 10) & 0xff);
  buf[9] = (char)((total - 10) >> 8);
  memcpy(buf + 10, dict, (size_t)n);
  memset(buf + 10 + n, ' ', total - 10 - (size_t)n - 1);
  buf[total - 1] = '\n';
  return (int)total;
}

size_t fp8_streamnpy_record_size(size_t ntensors, size_t nconfigs) {
  return 16 + ntensors * (4 + 4 + 1 + 1) + 4 * ntensors * nconfigs;
}

void fp8_streamnpy_put_record(FILE *fp, int64_t step, int64_t micro, const float *amax,
                              const float *te_scale, const unsigned char *snapshot,
                              const unsigned char *warmup, const float *scale, size_t ntensors,
                              size_t nconfigs) {
  /* little-endian host (x86-64, aarch64): the arrays are written as they are in memory */
  fwrite(&step, sizeof step, 1, fp);
  fwrite(&micro, sizeof micro, 1, fp);
  fwrite(amax, sizeof *amax, ntensors, fp);
  fwrite(te_scale, sizeof *te_scale, ntensors, fp);
  fwrite(snapshot, 1, ntensors, fp);
  fwrite(warmup, 1, ntensors, fp);
  fwrite(scale, sizeof *scale, ntensors * nconfigs, fp);
}

int fp8_streamnpy_put_index(FILE *fp, const fp8_streamnpy_index *ix) {
  json_t *root = json_object(), *tens = json_array(), *cfgs = json_array();
  if (!root || !tens || !cfgs) goto fail;
  json_object_set_new(root, "fp8lab_stream", json_integer(1));
  json_object_set_new(root, "records", json_integer((json_int_t)ix->nrec));
  for (size_t t = 0; t < ix->ntensors; t++) {
    json_t *o = json_object(), *fm = json_array();
    if (!o || !fm) goto fail;
    json_object_set_new(o, "name", json_string(ix->names[t]));
    json_object_set_new(o, "role", json_string(fp8_role_name(ix->roles[t])));
    for (size_t c = 0; c < ix->nconfigs; c++) /* null: the configuration does not apply */
      json_array_append_new(fm, ix->applies[t * ix->nconfigs + c]
                                    ? json_string(fp8_format_name(ix->formats[t * ix->nconfigs + c]))
                                    : json_null());
    json_object_set_new(o, "formats", fm);
    json_array_append_new(tens, o);
  }
  for (size_t c = 0; c < ix->nconfigs; c++) {
    const fp8_config *cf = ix->configs[c];
    json_array_append_new(cfgs, json_pack("{s:s, s:i, s:i, s:s}", "recipe", cf->label,
                                          "history_len", (int)cf->history_len, "margin",
                                          (int)cf->margin, "amax_compute",
                                          fp8_amax_compute_name(cf->amax_compute)));
  }
  json_object_set_new(root, "tensors", tens);
  json_object_set_new(root, "configs", cfgs);
  int rc = json_dumpf(root, fp, JSON_COMPACT | JSON_PRESERVE_ORDER);
  fputc('\n', fp);
  json_decref(root);
  return rc ? -1 : 0;
fail:
  json_decref(root);
  json_decref(tens);
  json_decref(cfgs);
  return -1;
}
