/* test_safetensors.c: the safetensors reader and writer (src/trace/safetensors.c). Every input is
 * written byte by byte here, so the reader is tested independently of the writer (which gets its
 * own round-trip test). Malformed inputs must give the right status and a message naming the file
 * and the tensor, line or byte offset; truncated files must fail cleanly at every length. */
#include <check.h>
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "timeline.h" /* fp8_tl_shape_views: model_shape from a snapshot */
#include "trace.h"
#include "trace_helpers.h"
#include "util.h"

START_TEST(st_good) {
  char *dir = tu_mkdtemp();
  buf_t f = good_file();
  ck_assert_uint_eq((8 + strlen(GOOD_HDR)) % 2, 1); /* data unaligned on purpose */
  write_in(dir, "good.safetensors", f.b, f.n);
  char *p = tu_path(dir, "good.safetensors");
  char err[FP8_ERRLEN] = "";
  fp8_step s;
  ck_assert_int_eq(fp8_safetensors_open(p, &s, err, sizeof err), FP8_OK);
  ck_assert_int_eq(s.step, -1);
  check_good_step(&s);
  fp8_step_free(&s);
  ck_assert_ptr_null(s.tensors);
  fp8_step_free(&s); /* twice is harmless */
  free(p);
  free(f.b);
  tu_rmtree(dir);
  free(dir);
}
END_TEST

START_TEST(st_empty_header) {
  /* "{}" with nothing else: a step with no tensors; also a file of only tensors of size 0 */
  char *dir = tu_mkdtemp();
  buf_t f = st_file("{}", NULL);
  write_in(dir, "e.safetensors", f.b, f.n);
  char *p = tu_path(dir, "e.safetensors");
  char err[FP8_ERRLEN];
  fp8_step s;
  ck_assert_int_eq(fp8_safetensors_open(p, &s, err, sizeof err), FP8_OK);
  ck_assert_uint_eq(s.ntensors, 0);
  fp8_step_free(&s);
  free(f.b);
  f = st_file("{\"t\":{\"dtype\":\"BF16\",\"shape\":[5,0,7],\"data_offsets\":[0,0]}}", NULL);
  write_in(dir, "e.safetensors", f.b, f.n);
  ck_assert_int_eq(fp8_safetensors_open(p, &s, err, sizeof err), FP8_OK);
  ck_assert_uint_eq(s.ntensors, 1);
  ck_assert_int_eq(s.tensors[0].numel, 0);
  ck_assert_int_eq(s.tensors[0].ndim, 3);
  fp8_step_free(&s);
  free(f.b);
  free(p);
  tu_rmtree(dir);
  free(dir);
}
END_TEST

/* ------------------------------------------------------------------ malformed safetensors */

typedef struct {
  const char *hdr;  /* JSON header (NULL: raw bytes given in raw/rawlen) */
  size_t datalen;   /* zero bytes of data after the header */
  int rc;
  const char *want1, *want2; /* substrings of the message (want2 may be NULL) */
} bad_case;

static const bad_case BAD[] = {
    {"not json", 0, FP8_EFORMAT, "JSON header (8 bytes at byte 8) not parseable", "column 3 (byte 11 of the file)"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}", 4, FP8_EFORMAT,
     "not parseable", "line 1"},
    {"[1,2]", 0, FP8_EFORMAT, "JSON header is an array, expected an object", NULL},
    {"{\"t\":5}", 0, FP8_EFORMAT, "tensor t: entry is an integer", NULL},
    {"{\"t\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, FP8_EFORMAT, "tensor t: missing \"dtype\"",
     NULL},
    {"{\"t\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, FP8_EFORMAT,
     "tensor t: missing \"shape\"", NULL},
    {"{\"t\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, FP8_EFORMAT,
     "tensor t: missing \"data_offsets\"", NULL},
    {"{\"t\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, FP8_EFORMAT,
     "tensor t: dtype is an integer, expected a string", NULL},
    {"{\"blocks.0.fc1.input\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8,
     FP8_EFORMAT, "tensor blocks.0.fc1.input: dtype I64 not supported (F32, BF16, F16)", NULL},
    {"{\"t\":{\"dtype\":\"F8_E4M3\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, FP8_EFORMAT,
     "tensor t: dtype F8_E4M3 not supported", NULL},
    {"{\"t\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8, FP8_EFORMAT,
     "tensor t: dtype F64 not supported", NULL},
    {"{\"t\":{\"dtype\":\"F32\",\"shape\":\"1\",\"data_offsets\":[0,4]}}", 4, FP8_EFORMAT,
     "tensor t: shape is a string, expected an array", NULL},
    {"{\"t\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}}", 4, FP8_EFORMAT,
     "tensor t: shape[0] is a real number, expected an integer", NULL},
    {"{\"t\":{\"dtype\":\"F32\",\"shape\":[2,-3],\"data_offsets\":[0,4]}}", 4, FP8_EFORMAT,
     "tensor t: shape[1] is -3, must be >= 0", NULL},
    {"{\"t\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
     FP8_EFORMAT, "tensor t: shape has 9 dimensions, at most 8", NULL},
    {"{\"t\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}", 4,
     FP8_EFORMAT, "tensor t: shape's element count overflows", NULL},
    {"{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, FP8_EFORMAT,
     "tensor t: data_offsets must be an array of two integers", NULL},
    {"{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":{\"a\":1}}}", 4, FP8_EFORMAT,
     "tensor t: data_offsets must be an array of two integers", NULL},
    {"{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 4, FP8_EFORMAT,
     "tensor t: data_offsets [-4, 0] negative", NULL},
    {"{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", 8, FP8_EFORMAT,
     "tensor t: data_offsets begin 8 > end 4", NULL},
    {"{\"blocks.0.fc1.input\":{\"dtype\":\"F32\",\"shape\":[1024],\"data_offsets\":[0,4096]}}",
     4000, FP8_EFORMAT, "tensor blocks.0.fc1.input: data_offsets end 4096 beyond data size 4000",
     NULL},
    {"{\"t\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, FP8_EFORMAT,
     "tensor t: data_offsets [0, 8] hold 8 bytes, expected 12", NULL},
    {"{\"t\":{\"dtype\":\"BF16\",\"shape\":[],\"data_offsets\":[0,4]}}", 4, FP8_EFORMAT,
     "tensor t: data_offsets [0, 4] hold 4 bytes, expected 2", NULL},
    {"{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
     "\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
     4, FP8_EFORMAT, "duplicate", NULL},
    {"{\"__metadata__\":[1],\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
     FP8_EFORMAT, "__metadata__ is an array, expected an object", NULL},
};

START_TEST(st_malformed) {
  const bad_case *c = &BAD[_i];
  char *dir = tu_mkdtemp();
  buf_t d = {0};
  put_zeros(&d, c->datalen);
  buf_t f = st_file(c->hdr, &d);
  write_in(dir, "step_3.safetensors", f.b, f.n);
  char *p = tu_path(dir, "step_3.safetensors");
  char err[FP8_ERRLEN] = "";
  fp8_step s;
  int rc = fp8_safetensors_open(p, &s, err, sizeof err);
  ck_assert_msg(rc == c->rc, "case %d: rc %d, want %d (%s)", _i, rc, c->rc, err);
  ck_assert_msg(strncmp(err, p, strlen(p)) == 0 && strncmp(err + strlen(p), ": ", 2) == 0,
                "case %d: message does not start with the path: %s", _i, err);
  ck_assert_msg(strstr(err, c->want1), "case %d: '%s' not in '%s'", _i, c->want1, err);
  if (c->want2) ck_assert_msg(strstr(err, c->want2), "case %d: '%s' not in '%s'", _i, c->want2, err);
  ck_assert_ptr_null(s.tensors);
  ck_assert_uint_eq(s.ntensors, 0);
  fp8_step_free(&s);
  free(p);
  free(f.b);
  free(d.b);
  tu_rmtree(dir);
  free(dir);
}
END_TEST

static void expect_err(const char *path, int want_rc, const char *want) {
  char err[FP8_ERRLEN] = "";
  fp8_step s;
  int rc = fp8_safetensors_open(path, &s, err, sizeof err);
  ck_assert_msg(rc == want_rc, "rc %d, want %d (%s)", rc, want_rc, err);
  ck_assert_msg(strstr(err, path), "path not in '%s'", err);
  ck_assert_msg(strstr(err, want), "'%s' not in '%s'", want, err);
}

START_TEST(st_sizes) {
  char *dir = tu_mkdtemp();
  char *p = tu_path(dir, "x.safetensors");
  /* shorter than the length field */
  write_in(dir, "x.safetensors", "\x02\0\0\0\0", 5);
  expect_err(p, FP8_EFORMAT, "file size 5 is less than the 8-byte header length");
  /* header length beyond the file */
  buf_t b = {0};
  put_u64(&b, 123456);
  put_zeros(&b, 4000 - 8);
  write_in(dir, "x.safetensors", b.b, b.n);
  expect_err(p, FP8_EFORMAT, "header length 123456 at byte 0 exceeds file size 4000");
  /* a length so large that 8 + length wraps */
  b.n = 0;
  put_u64(&b, UINT64_MAX - 3);
  put(&b, "{}", 2);
  write_in(dir, "x.safetensors", b.b, b.n);
  expect_err(p, FP8_EFORMAT, "header length 18446744073709551612 at byte 0 exceeds file size 10");
  /* empty header */
  b.n = 0;
  put_u64(&b, 0);
  write_in(dir, "x.safetensors", b.b, b.n);
  expect_err(p, FP8_EFORMAT, "not parseable");
  /* NUL inside the header */
  b.n = 0;
  put_u64(&b, 4);
  put(&b, "{\0}", 4);
  write_in(dir, "x.safetensors", b.b, b.n);
  expect_err(p, FP8_EFORMAT, "not parseable");
  /* missing file, a directory */
  char *q = tu_path(dir, "missing.safetensors");
  expect_err(q, FP8_EIO, "cannot open");
  expect_err(dir, FP8_EIO, "not a regular file");
  free(q);
  free(b.b);
  free(p);
  tu_rmtree(dir);
  free(dir);
}
END_TEST

START_TEST(st_truncated) {
  char *dir = tu_mkdtemp();
  char *p = tu_path(dir, "t.safetensors");
  buf_t f = good_file();
  for (size_t len = 0; len < f.n; len++) {
    write_in(dir, "t.safetensors", f.b, len);
    char err[FP8_ERRLEN] = "";
    fp8_step s;
    int rc = fp8_safetensors_open(p, &s, err, sizeof err);
    ck_assert_msg(rc == FP8_EFORMAT, "length %zu of %zu: rc %d (%s)", len, f.n, rc, err);
    ck_assert_msg(strstr(err, p) == err, "length %zu: %s", len, err);
    ck_assert_ptr_null(s.tensors);
    fp8_step_free(&s);
  }
  write_in(dir, "t.safetensors", f.b, f.n);
  char err[FP8_ERRLEN];
  fp8_step s;
  ck_assert_int_eq(fp8_safetensors_open(p, &s, err, sizeof err), FP8_OK);
  fp8_step_free(&s);
  free(f.b);
  free(p);
  tu_rmtree(dir);
  free(dir);
}
END_TEST

/* ------------------------------------------------------------------ writer */

START_TEST(st_write_roundtrip) {
  char *dir = tu_mkdtemp();
  char *p = tu_path(dir, "w.safetensors");
  float w[6] = {1.0f, -2.5f, 1e-30f, INFINITY, -0.0f, 3.14159274f};
  uint16_t h[3] = {0x3C00, 0x8001, 0x7C00};
  uint16_t bf[1] = {0x4049};
  fp8_tensor_out t[4] = {
      {"zz.weight", FP8_DTYPE_F32, 2, {2, 3}, w},
      {"aa.input", FP8_DTYPE_F16, 1, {3}, h},
      {"mm.output", FP8_DTYPE_BF16, 0, {0}, bf},
      {"ee.grad_input", FP8_DTYPE_F32, 2, {4, 0}, NULL},
  };
  const char *meta[] = {"format", "pt", "step", "12", NULL};
  char err[FP8_ERRLEN] = "";
  ck_assert_int_eq(fp8_safetensors_write(p, t, 4, meta, err, sizeof err), FP8_OK);

  /* the raw bytes: aligned data start, compact sorted JSON, space padding, data in order */
  size_t n;
  char *raw = tu_read_file(p, &n);
  ck_assert_ptr_nonnull(raw);
  uint64_t hl = 0;
  for (int k = 7; k >= 0; k--) hl = (hl << 8) | (unsigned char)raw[k];
  ck_assert_uint_eq((8 + hl) % 8, 0);
  ck_assert_uint_eq(n, 8 + hl + 24 + 6 + 2);
  const char *want =
      "{\"__metadata__\":{\"format\":\"pt\",\"step\":\"12\"},"
      "\"aa.input\":{\"data_offsets\":[24,30],\"dtype\":\"F16\",\"shape\":[3]},"
      "\"ee.grad_input\":{\"data_offsets\":[32,32],\"dtype\":\"F32\",\"shape\":[4,0]},"
      "\"mm.output\":{\"data_offsets\":[30,32],\"dtype\":\"BF16\",\"shape\":[]},"
      "\"zz.weight\":{\"data_offsets\":[0,24],\"dtype\":\"F32\",\"shape\":[2,3]}}";
  ck_assert_uint_le(strlen(want), hl);
  ck_assert_int_eq(memcmp(raw + 8, want, strlen(want)), 0);
  for (size_t k = 8 + strlen(want); k < 8 + hl; k++) ck_assert_int_eq(raw[k], ' ');
  ck_assert_int_eq(memcmp(raw + 8 + hl, w, 24), 0); /* little-endian host */
  free(raw);

  fp8_step s;
  ck_assert_int_eq(fp8_safetensors_open(p, &s, err, sizeof err), FP8_OK);
  ck_assert_uint_eq(s.ntensors, 4);
  ck_assert_str_eq(s.tensors[0].name, "aa.input");
  ck_assert_str_eq(s.tensors[1].name, "ee.grad_input");
  ck_assert_str_eq(s.tensors[2].name, "mm.output");
  ck_assert_str_eq(s.tensors[3].name, "zz.weight");
  for (int i = 0; i < 6; i++)
    ck_assert(same_bits(to_f32(FP8_DTYPE_F32, s.tensors[3].data, i), w[i]));
  ck_assert(same_bits(to_f32(FP8_DTYPE_F16, s.tensors[0].data, 1), -ldexpf(1.0f, -24)));
  ck_assert(isinf(to_f32(FP8_DTYPE_F16, s.tensors[0].data, 2)));
  ck_assert(same_bits(to_f32(FP8_DTYPE_BF16, s.tensors[2].data, 0), 3.140625f));
  ck_assert_int_eq(s.tensors[2].ndim, 0);
  ck_assert_int_eq(s.tensors[1].numel, 0);
  fp8_step_free(&s);

  /* no temporary file is left behind */
  DIR *d = opendir(dir);
  struct dirent *e;
  int files = 0;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.') files++;
  closedir(d);
  ck_assert_int_eq(files, 1);

  /* no metadata, no tensors */
  ck_assert_int_eq(fp8_safetensors_write(p, NULL, 0, NULL, err, sizeof err), FP8_OK);
  raw = tu_read_file(p, &n);
  ck_assert_uint_eq(n, 16);
  ck_assert_int_eq(memcmp(raw, "\x08\0\0\0\0\0\0\0{}      ", 16), 0);
  free(raw);
  free(p);
  tu_rmtree(dir);
  free(dir);
}
END_TEST

/* The capture's row subsets (issue 27): metadata fp8lab.rows.<tensor> gives the whole
 * tensor's rows (view.full_rows), which model_shape's tokens take; 0 for tensors without it;
 * bad values (not a whole number, fewer than the rows kept, past 2^40) name file and key. */
START_TEST(st_full_rows) {
  char *dir = tu_mkdtemp();
  char *p = tu_path(dir, "r.safetensors");
  float x[4 * 3 * 2] = {0}, w[2 * 3] = {0}, g[4 * 2 * 2] = {0};
  fp8_tensor_out t[3] = {{"l.input", FP8_DTYPE_F32, 3, {4, 3, 2}, x}, /* 12 rows of 2 */
                         {"l.weight", FP8_DTYPE_F32, 2, {2, 2}, w},
                         {"l.grad_output", FP8_DTYPE_F32, 2, {8, 2}, g}};
  char err[FP8_ERRLEN] = "";
  const char *good[] = {"fp8lab.rows.l.input", "4096", "fp8lab.rows.l.grad_output", "12",
                        "fp8lab.rows.gone.input", "x", NULL}; /* a key of no tensor: ignored */
  ck_assert_int_eq(fp8_safetensors_write(p, t, 3, good, err, sizeof err), FP8_OK);
  fp8_step s;
  ck_assert_msg(fp8_safetensors_open(p, &s, err, sizeof err) == FP8_OK, "%s", err);
  ck_assert_str_eq(s.tensors[0].name, "l.grad_output");
  ck_assert_int_eq(s.tensors[0].full_rows, 12);
  ck_assert_int_eq(s.tensors[1].full_rows, 4096);
  ck_assert_int_eq(s.tensors[2].full_rows, 0); /* the weight: whole */
  /* model_shape: the Linear l (2 x 2) with the whole's 4096 tokens, not the 12 kept */
  fp8_tl_shape sh;
  ck_assert_int_eq(fp8_tl_shape_views(s.tensors, s.ntensors, &sh, err, sizeof err), FP8_OK);
  ck_assert_uint_eq(sh.nlinears, 1);
  ck_assert_int_eq(sh.linears[0].tokens, 4096);
  fp8_tl_shape_free(&sh);
  fp8_step_free(&s);
  const char *bad[][2] = {{"0", "\"0\""}, {"11", "\"11\""}, {"12a", "\"12a\""},
                          {"1099511627777", "\"1099511627777\""}, {"-5", "\"-5\""}};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    const char *m[] = {"fp8lab.rows.l.input", bad[k][0], NULL};
    ck_assert_int_eq(fp8_safetensors_write(p, t, 3, m, err, sizeof err), FP8_OK);
    ck_assert_int_eq(fp8_safetensors_open(p, &s, err, sizeof err), FP8_EFORMAT);
    ck_assert_msg(strstr(err, "r.safetensors: __metadata__ fp8lab.rows.l.input = ") &&
                      strstr(err, bad[k][1]) && strstr(err, "from its 12 rows to 2^40"),
                  "%s", err);
  }
  /* exactly the rows kept, and 2^40: accepted */
  const char *edge[] = {"fp8lab.rows.l.input", "12", "fp8lab.rows.l.grad_output", "1099511627776",
                        NULL};
  ck_assert_int_eq(fp8_safetensors_write(p, t, 3, edge, err, sizeof err), FP8_OK);
  ck_assert_msg(fp8_safetensors_open(p, &s, err, sizeof err) == FP8_OK, "%s", err);
  ck_assert_int_eq(s.tensors[0].full_rows, 1099511627776LL);
  fp8_step_free(&s);
  free(p);
  tu_rmtree(dir);
  free(dir);
}
END_TEST

START_TEST(st_write_errors) {
  char *dir = tu_mkdtemp();
  char err[FP8_ERRLEN] = "";
  float x[1] = {1};
  fp8_tensor_out t[2] = {{"a", FP8_DTYPE_F32, 1, {1}, x}, {"a", FP8_DTYPE_F32, 1, {1}, x}};
  char *p = tu_path(dir, "w.safetensors");
  ck_assert_int_eq(fp8_safetensors_write(p, t, 2, NULL, err, sizeof err), FP8_EINVAL);
  ck_assert_ptr_nonnull(strstr(err, "tensor a given twice"));
  t[1].name = "b";
  t[1].ndim = 9;
  ck_assert_int_eq(fp8_safetensors_write(p, t, 2, NULL, err, sizeof err), FP8_EINVAL);
  ck_assert_ptr_nonnull(strstr(err, "tensor b: ndim 9"));
  t[1].ndim = 1;
  t[1].shape[0] = -1;
  ck_assert_int_eq(fp8_safetensors_write(p, t, 2, NULL, err, sizeof err), FP8_EINVAL);
  t[1].shape[0] = 2;
  t[1].data = NULL;
  ck_assert_int_eq(fp8_safetensors_write(p, t, 2, NULL, err, sizeof err), FP8_EINVAL);
  ck_assert_ptr_nonnull(strstr(err, "tensor b: data is NULL"));
  ck_assert_int_eq(access(p, F_OK), -1);
  /* a directory that does not exist: EIO, and nothing left behind */
  char *q = tu_path(dir, "no/such/w.safetensors");
  ck_assert_int_eq(fp8_safetensors_write(q, t, 1, NULL, err, sizeof err), FP8_EIO);
  ck_assert_ptr_nonnull(strstr(err, "no/such/w.safetensors.tmp."));
  /* rename onto a non-empty directory fails: the temp file is removed */
  char *r = tu_path(dir, "isdir");
  mkdir(r, 0700);
  write_in(r, "inside", "x", 1);
  ck_assert_int_eq(fp8_safetensors_write(r, t, 1, NULL, err, sizeof err), FP8_EIO);
  ck_assert_ptr_nonnull(strstr(err, "cannot rename"));
  DIR *d = opendir(dir);
  struct dirent *e;
  int files = 0;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.') files++;
  closedir(d);
  ck_assert_int_eq(files, 1); /* only isdir */
  free(r);
  free(q);
  free(p);
  tu_rmtree(dir);
  free(dir);
}
END_TEST

int main(void) {
  Suite *s = suite_create("safetensors");
  TCase *tc = tcase_create("safetensors");
  tcase_add_test(tc, st_good);
  tcase_add_test(tc, st_empty_header);
  tcase_add_loop_test(tc, st_malformed, 0, (int)(sizeof BAD / sizeof BAD[0]));
  tcase_add_test(tc, st_sizes);
  tcase_add_test(tc, st_truncated);
  tcase_add_test(tc, st_write_roundtrip);
  tcase_add_test(tc, st_full_rows);
  tcase_add_test(tc, st_write_errors);
  suite_add_tcase(s, tc);
  return tu_run_suite(s);
}
