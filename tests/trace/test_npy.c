/* test_npy.c: the npy reader (src/trace/npy.c): good files of every dtype and version, and
 * malformed headers. Every input is written byte by byte here, so the reader is tested
 * independently of the writer (which gets its own round-trip test). Malformed inputs must give the
 * right status and a message naming the file and the tensor, line or byte offset; truncated files
 * must fail cleanly at every length. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testutil.h"
#include "trace.h"
#include "trace_helpers.h"
#include "util.h"

/* ------------------------------------------------------------------ npy */

/* An npy file of the given version with header dict text `dict` (padded to 64 with '\n'). */
static buf_t npy_file(int major, const char *dict, const buf_t *data) {
  buf_t b = {0};
  size_t pre = major == 1 ? 10 : 12;
  size_t hl = strlen(dict) + 1;
  hl += (64 - (pre + hl) % 64) % 64;
  put(&b, "\x93NUMPY", 6);
  unsigned char v[2] = {(unsigned char)major, 0};
  put(&b, v, 2);
  if (major == 1) put_u16(&b, (uint16_t)hl);
  else put_u32(&b, (uint32_t)hl);
  put(&b, dict, strlen(dict));
  for (size_t k = strlen(dict); k + 1 < hl; k++) put(&b, " ", 1);
  put(&b, "\n", 1);
  if (data) put(&b, data->b, data->n);
  return b;
}

START_TEST(npy_good) {
  char *dir = tu_mkdtemp();
  char *sd = tu_path(dir, "step_3");
  mkdir(sd, 0700);
  buf_t d32 = {0}, d16 = {0};
  for (int i = 0; i < 6; i++) put_f32(&d32, GOOD_F32[i]);
  for (int i = 0; i < 4; i++) put_u16(&d16, GOOD_F16[i]);
  buf_t a = npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", &d32);
  buf_t b = npy_file(2, "{'descr': '<f2', 'fortran_order': False, 'shape': (4,), }", &d16);
  buf_t c = npy_file(3, "{\"shape\":(),\"fortran_order\":False,\"descr\":\"=f4\"}", NULL);
  put_f32(&c, -7.0f);
  buf_t e = npy_file(1, "{'descr': '|f2', 'fortran_order': False, 'shape': (0, 5), }", NULL);
  write_in(sd, "blocks.0.fc1.weight.npy", a.b, a.n);
  write_in(sd, "blocks.0.fc1.input.npy", b.b, b.n);
  write_in(sd, "head.output.npy", c.b, c.n);
  write_in(sd, "empty.grad_output.npy", e.b, e.n);
  write_in(sd, "README.txt", "ignored", 7);
  write_in(sd, ".hidden.npy", "junk", 4);

  char err[FP8_ERRLEN] = "";
  fp8_step s;
  ck_assert_int_eq(fp8_npy_open_step(sd, &s, err, sizeof err), FP8_OK);
  ck_assert_uint_eq(s.ntensors, 4);
  ck_assert_str_eq(s.tensors[0].name, "blocks.0.fc1.input");
  ck_assert_str_eq(s.tensors[1].name, "blocks.0.fc1.weight");
  ck_assert_str_eq(s.tensors[2].name, "empty.grad_output");
  ck_assert_str_eq(s.tensors[3].name, "head.output");
  const fp8_tensor_view *v = &s.tensors[1];
  ck_assert_int_eq(v->dtype, FP8_DTYPE_F32);
  ck_assert_int_eq(v->ndim, 2);
  ck_assert_int_eq(v->shape[0], 2);
  ck_assert_int_eq(v->shape[1], 3);
  for (int i = 0; i < 6; i++) ck_assert(same_bits(to_f32(v->dtype, v->data, i), GOOD_F32[i]));
  v = &s.tensors[0];
  ck_assert_int_eq(v->dtype, FP8_DTYPE_F16);
  ck_assert_int_eq(v->numel, 4);
  ck_assert(same_bits(to_f32(v->dtype, v->data, 2), 65504.0f));
  ck_assert_int_eq(s.tensors[2].numel, 0);
  ck_assert_int_eq(s.tensors[2].ndim, 2);
  ck_assert_int_eq(s.tensors[3].ndim, 0);
  ck_assert(same_bits(to_f32(FP8_DTYPE_F32, s.tensors[3].data, 0), -7.0f));
  fp8_step_free(&s);

  /* the same folder through a trace */
  fp8_trace tr;
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_OK);
  ck_assert_int_eq(tr.is_npy, 1);
  ck_assert_uint_eq(tr.nsteps, 1);
  ck_assert_int_eq(tr.steps[0], 3);
  ck_assert_int_eq(fp8_trace_load_step(&tr, 0, &s, err, sizeof err), FP8_OK);
  ck_assert_int_eq(s.step, 3);
  ck_assert_uint_eq(s.ntensors, 4);
  fp8_step_free(&s);
  fp8_trace_close(&tr);

  /* truncation of the v1 file at every length */
  for (size_t len = 0; len < a.n; len++) {
    write_in(sd, "blocks.0.fc1.weight.npy", a.b, len);
    int rc = fp8_npy_open_step(sd, &s, err, sizeof err);
    ck_assert_msg(rc == FP8_EFORMAT, "length %zu: rc %d (%s)", len, rc, err);
    ck_assert_msg(strstr(err, "blocks.0.fc1.weight.npy: "), "length %zu: %s", len, err);
    ck_assert_ptr_null(s.tensors);
  }
  free(a.b);
  free(b.b);
  free(c.b);
  free(e.b);
  free(d32.b);
  free(d16.b);
  free(sd);
  tu_rmtree(dir);
  free(dir);
}
END_TEST

typedef struct {
  int major;
  const char *dict;
  size_t datalen;
  const char *want;
} npy_bad;

static const npy_bad NPY_BAD[] = {
    {1, "{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", 4,
     "dtype '>f4' is big-endian"},
    {1, "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", 8,
     "dtype '<f8' not supported (<f4, <f2)"},
    {1, "{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }", 4, "dtype '<i4' not supported"},
    {1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16,
     "fortran_order True not supported"},
    {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 8,
     "holds 8 bytes, expected 12"},
    {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", 8,
     "holds 8 bytes, expected 4"},
    {1, "{'descr': '<f4', 'fortran_order': False, }", 4, "missing key 'shape'"},
    {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", 4,
     "expected a non-negative integer in shape at byte"},
    {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }", 4,
     "more than 8 dimensions"},
    {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", 4,
     "unexpected or repeated key 'x'"},
    {1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", 4,
     "unexpected or repeated key 'descr'"},
    {1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", 4,
     "descr at byte 20 is not a simple dtype string"},
    {1, "['descr']", 4, "expected '{' at byte 10"},
    {4, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", 4,
     "npy format version 4.0 not supported"},
};

START_TEST(npy_malformed) {
  const npy_bad *c = &NPY_BAD[_i];
  char *dir = tu_mkdtemp();
  buf_t d = {0};
  put_zeros(&d, c->datalen);
  buf_t f = npy_file(c->major, c->dict, &d);
  write_in(dir, "blocks.1.attn.input.npy", f.b, f.n);
  char err[FP8_ERRLEN] = "";
  fp8_step s;
  int rc = fp8_npy_open_step(dir, &s, err, sizeof err);
  ck_assert_msg(rc == FP8_EFORMAT, "case %d: rc %d (%s)", _i, rc, err);
  ck_assert_msg(strstr(err, "/blocks.1.attn.input.npy: "), "case %d: %s", _i, err);
  ck_assert_msg(strstr(err, c->want), "case %d: '%s' not in '%s'", _i, c->want, err);
  free(f.b);
  free(d.b);
  /* bad magic, and a header length beyond the file */
  write_in(dir, "blocks.1.attn.input.npy", "\x93NUMPZ\x01\x00\x10\x00", 10);
  ck_assert_int_eq(fp8_npy_open_step(dir, &s, err, sizeof err), FP8_EFORMAT);
  ck_assert_ptr_nonnull(strstr(err, "not an npy file"));
  write_in(dir, "blocks.1.attn.input.npy", "\x93NUMPY\x01\x00\x10\x00{}", 12);
  ck_assert_int_eq(fp8_npy_open_step(dir, &s, err, sizeof err), FP8_EFORMAT);
  ck_assert_ptr_nonnull(strstr(err, "header length 16 at byte 8 exceeds file size 12"));
  tu_rmtree(dir);
  free(dir);
}
END_TEST

int main(void) {
  Suite *s = suite_create("npy");
  TCase *tc = tcase_create("npy");
  tcase_add_test(tc, npy_good);
  tcase_add_loop_test(tc, npy_malformed, 0, (int)(sizeof NPY_BAD / sizeof NPY_BAD[0]));
  suite_add_tcase(s, tc);
  return tu_run_suite(s);
}
