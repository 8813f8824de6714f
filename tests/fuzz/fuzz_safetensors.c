/* fuzz_safetensors.c: libFuzzer target of the safetensors reader (fp8_safetensors_open,
 * src/trace/safetensors.c): the input is one step_<N>.safetensors file. On success every
 * tensor's data is read in full, widened to float32 and histogrammed as the runner does, so
 * that a view the header checks let past the mapped bytes is an ASan report. */
#include "fuzz_common.h"

#include "trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[1200], err[FZ_ERRLEN];
  fz_put("step_0.safetensors", data, size);
  fp8_step st;
  int rc = fp8_safetensors_open(fz_path("step_0.safetensors", path, sizeof path), &st, err,
                                sizeof err);
  fz_check_status("fp8_safetensors_open", rc, err);
  if (rc == FP8_OK) {
    int64_t hist[FP8_LOG2_HIST_BINS] = {0};
    for (size_t i = 0; i < st.ntensors; i++) {
      const fp8_tensor_view *v = &st.tensors[i];
      size_t n = (size_t)v->numel, nbytes = n * fp8_dtype_size(v->dtype);
      if (nbytes > size) abort(); /* a view cannot hold more bytes than the file */
      fz_touch(v->data, nbytes);
      (void)fp8_role_of_tensor(v->name);
      float *x = malloc(n ? n * sizeof *x : 1);
      if (!x) abort();
      fp8_dtype_to_f32(v->dtype, v->data, n, x);
      (void)fp8_amax_f32(x, n);
      fp8_log2_histogram(x, n, hist);
      free(x);
    }
    fp8_step_free(&st);
  }
  fz_del("step_0.safetensors");
  return 0;
}
