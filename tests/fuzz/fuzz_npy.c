/* fuzz_npy.c: libFuzzer target of the npy reader (fp8_npy_open_step, src/trace/npy.c): the input
 * is one <tensor>.npy file of a step_<N>/ snapshot folder. On success the tensor's data is read
 * in full and widened to float32, so that a view past the mapped bytes is an ASan report. */
#include "fuzz_common.h"

#include "trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char dir[1200], err[FZ_ERRLEN];
  fz_mkdir("step_0");
  fz_put("step_0/layers.0.fc1.input.npy", data, size);
  fp8_step st;
  int rc = fp8_npy_open_step(fz_path("step_0", dir, sizeof dir), &st, err, sizeof err);
  fz_check_status("fp8_npy_open_step", rc, err);
  if (rc == FP8_OK) {
    if (st.ntensors != 1 || strcmp(st.tensors[0].name, "layers.0.fc1.input") != 0) abort();
    const fp8_tensor_view *v = &st.tensors[0];
    size_t n = (size_t)v->numel, nbytes = n * fp8_dtype_size(v->dtype);
    if (nbytes > size) abort();
    fz_touch(v->data, nbytes);
    float *x = malloc(n ? n * sizeof *x : 1);
    if (!x) abort();
    fp8_dtype_to_f32(v->dtype, v->data, n, x);
    (void)fp8_amax_f32(x, n);
    free(x);
    fp8_step_free(&st);
  }
  fz_del("step_0/layers.0.fc1.input.npy");
  return 0;
}
