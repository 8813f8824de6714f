/* tu_traces.c: the definitions of tu_traces.h (see there). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testutil.h"
#include "trace.h"
#include "util.h"
#include "tu_traces.h"

/* The folder g_dir/dir with snapshots at steps 0 and 2 of m.input (F32: [1, 2, -4, 0.5], then
 * [100, -3, 0, 2^-12]) and m.grad_output (BF16: [1, -2], then g2). */
static void write_snapshots(const char *dir, const uint16_t g2[2]) {
  static const float in0[4] = {1.0f, 2.0f, -4.0f, 0.5f};
  static const float in2[4] = {100.0f, -3.0f, 0.0f, 0x1p-12f};
  static const uint16_t g0[2] = {0x3F80, 0xC000}; /* bf16 1.0, -2.0 */
  char err[FP8_ERRLEN], rel[256];
  fp8_tensor_out t0[2] = {{"m.input", FP8_DTYPE_F32, 1, {4}, in0}, {"m.grad_output", FP8_DTYPE_BF16, 1, {2}, g0}};
  fp8_tensor_out t2[2] = {{"m.input", FP8_DTYPE_F32, 1, {4}, in2}, {"m.grad_output", FP8_DTYPE_BF16, 1, {2}, g2}};
  mkdir(path_in(dir), 0777);
  snprintf(rel, sizeof rel, "%s/step_0.safetensors", dir);
  ck_assert_int_eq(fp8_safetensors_write(path_in(rel), t0, 2, NULL, err, sizeof err), FP8_OK);
  snprintf(rel, sizeof rel, "%s/step_2.safetensors", dir);
  ck_assert_int_eq(fp8_safetensors_write(path_in(rel), t2, 2, NULL, err, sizeof err), FP8_OK);
}

/* A trace: snapshots at steps 0 and 2 of tensor m.input (F32) and m.grad_output (BF16),
 * amax.csv with m.input = 8 at step 1 (between the snapshots). */
void write_tiny_trace(void) {
  static const uint16_t g2[2] = {0x3F00, 0x0000}; /* 0.5, 0 */
  write_snapshots("trace", g2);
  put_text("trace/amax.csv", "step,tensor,amax\n1,m.input,8\n1,m.grad_output,0\n");
}

/* A trace with tensors that never ran (issue 17: a hook on a module the model never calls
 * writes amax 0 at every step and no snapshot). Snapshots at steps 0 and 2, amax.csv 0..3:
 *   m.input        data 4 (step 0), csv 8 (1), data 100 (2), csv 0 (3): steps 0 1 2 3, one 0
 *   m.grad_output  data 2 (0), csv 0 (1), data all zero (2, csv 0 too): steps 0 1 2, two 0s
 *   a..d.input     csv 0 at steps 0..3, no snapshot: never ran
 *   x.input        csv 8 (1), csv 0 (2, 3), no snapshot: ran, but only amax.csv has it */
void write_never_ran_trace(void) {
  static const uint16_t g2[2] = {0x0000, 0x8000}; /* 0, -0 */
  write_snapshots("lo", g2);
  char csv[2048];
  int o = snprintf(csv, sizeof csv, "step,tensor,amax\n0,m.input,4\n1,m.input,8\n3,m.input,0\n"
                                    "1,m.grad_output,0\n2,m.grad_output,0\n1,x.input,8\n2,x.input,0\n"
                                    "3,x.input,0\n");
  for (int st = 0; st < 4; st++)
    for (const char *t = "abcd"; *t; t++) o += snprintf(csv + o, sizeof csv - (size_t)o, "%d,%c.input,0\n", st, *t);
  put_text("lo/amax.csv", csv);
}

/* A safetensors file at g_dir/rel: u64 length (hlen, or strlen(hdr) when hlen is -1), the
 * header, then ndata bytes of data (byte k is k & 0xff). */
void put_st(const char *rel, const char *hdr, long long hlen, size_t ndata) {
  size_t hl = strlen(hdr), n = 8 + hl + ndata;
  unsigned char *b = malloc(n);
  uint64_t v = hlen < 0 ? hl : (uint64_t)hlen;
  for (int k = 0; k < 8; k++) b[k] = (unsigned char)(v >> (8 * k));
  memcpy(b + 8, hdr, hl);
  for (size_t k = 0; k < ndata; k++) b[8 + hl + k] = (unsigned char)k;
  put_file(rel, b, n);
  free(b);
}

/* fp8_safetensors_open on g_dir/x.safetensors: the status, the message in err. */
int open_st(fp8_step *s, char *err, size_t errlen) {
  int rc = fp8_safetensors_open(path_in("x.safetensors"), s, err, errlen);
  if (rc != FP8_OK) ck_assert_ptr_null(s->tensors);
  return rc;
}

/* g_dir/tr: 4 snapshot steps of the given tensors (F32, 8x8), and g_dir/e.ini replaying it
 * with a delayed (history 1 and 4) and a current recipe into g_dir/out. */
void write_run(const char *const *names, size_t n) {
  mkdir(path_in("tr"), 0777);
  float x[64];
  char err[FP8_ERRLEN], p[64];
  fp8_tensor_out t[4];
  ck_assert_uint_le(n, 4);
  for (int s = 0; s < 4; s++) {
    for (int i = 0; i < 64; i++) x[i] = (float)(i - 32) / 32.0f * (float)(1 + s);
    for (size_t k = 0; k < n; k++) t[k] = (fp8_tensor_out){names[k], FP8_DTYPE_F32, 2, {8, 8}, x};
    snprintf(p, sizeof p, "tr/step_%d.safetensors", s);
    ck_assert_int_eq(fp8_safetensors_write(path_in(p), t, n, NULL, err, sizeof err), FP8_OK);
  }
  put_text("e.ini", "[trace]\npath = tr\n[recipe.d]\nkind = delayed\nhistory_len = 1, 4\n"
                    "[recipe.c]\nkind = current\n[output]\ndir = out\n");
}

/* A run of TWO without its report. */
void run_two(void) {
  write_run(TWO, 2);
  char *out = NULL;
  int rc = run_cli(&out, "run e.ini --quiet --no-report");
  ck_assert_msg(rc == 0, "%s", out);
  free(out);
}
