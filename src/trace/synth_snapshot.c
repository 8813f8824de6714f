/* synth_snapshot.c: a synthetic trace's snapshot file, for every preset (synth.c's "llm",
 * "spiky", "underflow"; synth_moe.c's "moe"): the tensors as fp8_tensor_out (BF16 ones packed)
 * and step_<N>.safetensors with the generator's metadata. A leaf: it calls no other synth file. */
#include "synth_internal.h"

#include <stdio.h>

#include "trace.h"
#include "util.h" /* fp8_errorf */

void fp8_synth_tensor_out(fp8_tensor_out *o, const char *name, fp8_dtype dtype, int64_t rows,
                          int64_t cols, const float *val, uint16_t *packed) {
  const void *data = val;
  if (dtype == FP8_DTYPE_BF16) {
    /* Little-endian hosts only, as the trace format (trace.h). */
    size_t ne = (size_t)(rows * cols);
    for (size_t i = 0; i < ne; i++) packed[i] = fp8_synth_f32_to_bf16(val[i]);
    data = packed;
  }
  memset(o, 0, sizeof *o);
  o->name = name;
  o->dtype = dtype;
  o->ndim = 2;
  o->shape[0] = rows;
  o->shape[1] = cols;
  o->data = data;
}

int fp8_synth_snapshot_write(const char *dir, int64_t step, int64_t steps, const char *preset,
                             uint64_t seed, const fp8_tensor_out *out, size_t n, char *err,
                             size_t errlen) {
  char path[4096], step_s[32], seed_s[32], steps_s[32];
  int pl = snprintf(path, sizeof path, "%s/step_%lld.safetensors", dir, (long long)step);
  if (pl < 0 || (size_t)pl >= sizeof path)
    return fp8_errorf(FP8_EINVAL, err, errlen, "%s: directory path too long", dir);
  snprintf(step_s, sizeof step_s, "%lld", (long long)step);
  snprintf(seed_s, sizeof seed_s, "%llu", (unsigned long long)seed);
  snprintf(steps_s, sizeof steps_s, "%lld", (long long)steps);
  const char *meta[] = {"format", "pt", "generator", "fp8lab synth", "preset", preset,
                        "seed", seed_s, "steps", steps_s, "step", step_s, NULL};
  return fp8_safetensors_write(path, out, n, meta, err, errlen);
}
