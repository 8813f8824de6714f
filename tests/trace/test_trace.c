/* test_trace.c: the trace reader (src/trace/trace.c, safetensors.c, npy.c, amaxcsv.c).
 *
 * Every input is written byte by byte here, so the reader is tested independently of the
 * writer (which gets its own round-trip test). Malformed inputs must give the right status and
 * a message naming the file and the tensor, line or byte offset; truncated files must fail
 * cleanly at every length.
 */
#include <check.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "timeline.h" /* fp8_tl_shape_views: model_shape from a snapshot */
#include "trace.h"

/* ------------------------------------------------------------------ byte builders */

typedef struct {
  unsigned char *b;
  size_t n, cap;
} buf_t;

static void put(buf_t *b, const void *p, size_t n) {
  if (b->n + n > b->cap) {
    b->cap = (b->n + n) * 2 + 64;
    b->b = realloc(b->b, b->cap);
    ck_assert_ptr_nonnull(b->b);
  }
  if (n) memcpy(b->b + b->n, p, n);
  b->n += n;
}
static void put_u16(buf_t *b, uint16_t v) {
  unsigned char x[2] = {(unsigned char)v, (unsigned char)(v >> 8)};
  put(b, x, 2);
}
static void put_u32(buf_t *b, uint32_t v) {
  unsigned char x[4];
  for (int k = 0; k < 4; k++) x[k] = (unsigned char)(v >> (8 * k));
  put(b, x, 4);
}
static void put_u64(buf_t *b, uint64_t v) {
  unsigned char x[8];
  for (int k = 0; k < 8; k++) x[k] = (unsigned char)(v >> (8 * k));
  put(b, x, 8);
}
static void put_f32(buf_t *b, float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  put_u32(b, u);
}
static void put_zeros(buf_t *b, size_t n) {
  for (size_t i = 0; i < n; i++) put(b, "", 1);
}

/* A safetensors file: u64 length of hdr, hdr, then the data already in d. */
static buf_t st_file(const char *hdr, const buf_t *d) {
  buf_t b = {0};
  put_u64(&b, strlen(hdr));
  put(&b, hdr, strlen(hdr));
  if (d) put(&b, d->b, d->n);
  return b;
}

static char *path_in(const char *dir, const char *name) {
  char *p = malloc(strlen(dir) + strlen(name) + 2);
  sprintf(p, "%s/%s", dir, name);
  return p;
}

static void write_in(const char *dir, const char *name, const void *data, size_t n) {
  char *p = path_in(dir, name);
  ck_assert_int_eq(tu_write_file(p, data, n), 0);
  free(p);
}

static float to_f32(fp8_dtype d, const void *src, size_t i) {
  float f;
  fp8_dtype_to_f32(d, (const unsigned char *)src + i * fp8_dtype_size(d), 1, &f);
  return f;
}

static int same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

/* ------------------------------------------------------------------ the good file */

/* Header of the good file: unsorted names, metadata, a 0-d and a zero-size tensor, and a
 * length of 8 + odd so that every tensor's data is unaligned. */
static const char *GOOD_HDR =
    "{\"b.f32\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
    "\"__metadata__\":{\"format\":\"pt\",\"note\":\"ignored\"},"
    "\"a.bf16\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[24,32]},"
    "\"y.empty\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[32,32]},"
    "\"c.f16\":{\"dtype\":\"F16\",\"shape\":[2,2],\"data_offsets\":[32,40]},"
    "\"z.scalar\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[40,44]}}";

static const float GOOD_F32[6] = {1.5f, -2.25f, 3.0e-5f, INFINITY, 0.0f, -1.0e-40f};
static const uint16_t GOOD_BF16[4] = {0x3FC0, 0xC000, 0x7F80, 0x0001};
static const uint16_t GOOD_F16[4] = {0x3C00, 0xC000, 0x7BFF, 0x0001};

static buf_t good_file(void) {
  buf_t d = {0};
  for (int i = 0; i < 6; i++) put_f32(&d, GOOD_F32[i]);
  for (int i = 0; i < 4; i++) put_u16(&d, GOOD_BF16[i]);
  for (int i = 0; i < 4; i++) put_u16(&d, GOOD_F16[i]);
  put_f32(&d, 42.0f);
  buf_t b = st_file(GOOD_HDR, &d);
  free(d.b);
  return b;
}

static void check_good_step(const fp8_step *s) {
  static const char *names[] = {"a.bf16", "b.f32", "c.f16", "y.empty", "z.scalar"};
  ck_assert_uint_eq(s->ntensors, 5);
  for (int i = 0; i < 5; i++) ck_assert_str_eq(s->tensors[i].name, names[i]);
  const fp8_tensor_view *a = &s->tensors[0], *b = &s->tensors[1], *c = &s->tensors[2],
                        *y = &s->tensors[3], *z = &s->tensors[4];
  ck_assert_int_eq(a->dtype, FP8_DTYPE_BF16);
  ck_assert_int_eq(a->ndim, 1);
  ck_assert_int_eq(a->shape[0], 4);
  ck_assert_int_eq(a->numel, 4);
  ck_assert(same_bits(to_f32(a->dtype, a->data, 0), 1.5f));
  ck_assert(same_bits(to_f32(a->dtype, a->data, 1), -2.0f));
  ck_assert(isinf(to_f32(a->dtype, a->data, 2)));
  ck_assert(same_bits(to_f32(a->dtype, a->data, 3), ldexpf(1.0f, -133)));
  ck_assert_int_eq(b->dtype, FP8_DTYPE_F32);
  ck_assert_int_eq(b->ndim, 2);
  ck_assert_int_eq(b->shape[0], 2);
  ck_assert_int_eq(b->shape[1], 3);
  ck_assert_int_eq(b->numel, 6);
  for (int i = 0; i < 6; i++) ck_assert(same_bits(to_f32(b->dtype, b->data, i), GOOD_F32[i]));
  ck_assert_int_eq(c->dtype, FP8_DTYPE_F16);
  ck_assert_int_eq(c->numel, 4);
  ck_assert(same_bits(to_f32(c->dtype, c->data, 0), 1.0f));
  ck_assert(same_bits(to_f32(c->dtype, c->data, 1), -2.0f));
  ck_assert(same_bits(to_f32(c->dtype, c->data, 2), 65504.0f));
  ck_assert(same_bits(to_f32(c->dtype, c->data, 3), ldexpf(1.0f, -24)));
  ck_assert_int_eq(y->ndim, 2);
  ck_assert_int_eq(y->shape[0], 0);
  ck_assert_int_eq(y->shape[1], 3);
  ck_assert_int_eq(y->numel, 0);
  ck_assert_int_eq(z->ndim, 0);
  ck_assert_int_eq(z->numel, 1);
  ck_assert(same_bits(to_f32(z->dtype, z->data, 0), 42.0f));
}

START_TEST(st_good) {
  char *dir = tu_mkdtemp();
  buf_t f = good_file();
  ck_assert_uint_eq((8 + strlen(GOOD_HDR)) % 2, 1); /* data unaligned on purpose */
  write_in(dir, "good.safetensors", f.b, f.n);
  char *p = path_in(dir, "good.safetensors");
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
  char *p = path_in(dir, "e.safetensors");
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
  char *p = path_in(dir, "step_3.safetensors");
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
  char *p = path_in(dir, "x.safetensors");
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
  char *q = path_in(dir, "missing.safetensors");
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
  char *p = path_in(dir, "t.safetensors");
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
  char *p = path_in(dir, "w.safetensors");
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
  char *p = path_in(dir, "r.safetensors");
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
  char *p = path_in(dir, "w.safetensors");
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
  char *q = path_in(dir, "no/such/w.safetensors");
  ck_assert_int_eq(fp8_safetensors_write(q, t, 1, NULL, err, sizeof err), FP8_EIO);
  ck_assert_ptr_nonnull(strstr(err, "no/such/w.safetensors.tmp."));
  /* rename onto a non-empty directory fails: the temp file is removed */
  char *r = path_in(dir, "isdir");
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
  char *sd = path_in(dir, "step_3");
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

/* ------------------------------------------------------------------ amax.csv */

/* A file in step order whose tensors come in module order, not name order, the same at every
 * step (as captures write it): rows sorted by step, then name; the names seen at every step. */
START_TEST(amax_step_order) {
  char *dir = tu_mkdtemp();
  const char *csv = "step,tensor,amax\n0,z.w,1\n0,b.x,2\n0,m.y,3\n1,z.w,4\n1,b.x,5\n1,m.y,6\n"
                    "2,z.w,7\n2,m.y,8\n2,b.x,9\n";
  write_in(dir, "amax.csv", csv, strlen(csv));
  fp8_trace tr;
  char err[FP8_ERRLEN] = "";
  ck_assert_msg(fp8_trace_open(dir, &tr, err, sizeof err) == FP8_OK, "%s", err);
  ck_assert_uint_eq(tr.namax_names, 3);
  ck_assert_str_eq(tr.amax_names[0], "b.x");
  ck_assert_str_eq(tr.amax_names[1], "m.y");
  ck_assert_str_eq(tr.amax_names[2], "z.w");
  static const float want[9] = {2, 3, 1, 5, 6, 4, 9, 8, 7}; /* (step, name) order */
  ck_assert_uint_eq(tr.namax, 9);
  for (int i = 0; i < 9; i++) {
    ck_assert_int_eq(tr.amax[i].step, i / 3);
    ck_assert_int_eq(tr.amax[i].tensor, i % 3);
    ck_assert(tr.amax[i].amax == want[i]);
  }
  fp8_trace_close(&tr);
  tu_rmtree(dir);
  free(dir);
}
END_TEST

START_TEST(amax_good) {
  char *dir = tu_mkdtemp();
  char v[32];
  snprintf(v, sizeof v, "%.9g", 0.1f); /* 0.100000001 */
  char csv[512];
  snprintf(csv, sizeof csv,
           "step,tensor,amax\n"
           "2,b.weight,%s\n"
           "0,b.weight,inf\n"
           "0,a.input,0\n"
           "2,a.input,1.40129846e-45\n"
           "1,a.input,3.40282347e+38\r\n"
           "10,a.input,448\n"
           "\n\n",
           v);
  write_in(dir, "amax.csv", csv, strlen(csv));
  fp8_trace tr;
  char err[FP8_ERRLEN] = "";
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_OK);
  ck_assert_uint_eq(tr.nsteps, 0);
  ck_assert_uint_eq(tr.namax_names, 2);
  ck_assert_str_eq(tr.amax_names[0], "a.input");
  ck_assert_str_eq(tr.amax_names[1], "b.weight");
  ck_assert_uint_eq(tr.namax, 6);
  static const int64_t steps[6] = {0, 0, 1, 2, 2, 10};
  static const int32_t idx[6] = {0, 1, 0, 0, 1, 0};
  for (int i = 0; i < 6; i++) {
    ck_assert_int_eq(tr.amax[i].step, steps[i]);
    ck_assert_int_eq(tr.amax[i].tensor, idx[i]);
  }
  ck_assert(same_bits(tr.amax[0].amax, 0.0f));
  ck_assert(isinf(tr.amax[1].amax) && tr.amax[1].amax > 0);
  ck_assert(same_bits(tr.amax[2].amax, 3.40282347e+38f));
  ck_assert(same_bits(tr.amax[3].amax, ldexpf(1.0f, -149)));
  ck_assert(same_bits(tr.amax[4].amax, 0.1f)); /* %.9g round trip, bit-exact */
  ck_assert(same_bits(tr.amax[5].amax, 448.0f));
  fp8_trace_close(&tr);
  ck_assert_ptr_null(tr.amax);

  /* header only: no rows */
  write_in(dir, "amax.csv", "step,tensor,amax", 16);
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_OK);
  ck_assert_uint_eq(tr.namax, 0);
  fp8_trace_close(&tr);
  tu_rmtree(dir);
  free(dir);
}
END_TEST

/* The optional columns micro and te_scale (issue 17): rows sorted by step, then micro, then
 * tensor; te_scale empty is 0 (not given); the same key in two micro-batches is no duplicate. */
START_TEST(amax_micro_te_scale) {
  char *dir = tu_mkdtemp();
  const char *csv = "step,tensor,amax,micro,te_scale\n"
                    "1,a.input,2,0,224\n"
                    "0,b.weight,4,1,\n"
                    "0,a.input,4,1,0.100000001\n"
                    "0,a.input,1,0,1\n"
                    "0,b.weight,3,0,1.5e-40\n";
  write_in(dir, "amax.csv", csv, strlen(csv));
  fp8_trace tr;
  char err[FP8_ERRLEN] = "";
  ck_assert_msg(fp8_trace_open(dir, &tr, err, sizeof err) == FP8_OK, "%s", err);
  ck_assert_uint_eq(tr.namax, 5);
  static const int64_t steps[5] = {0, 0, 0, 0, 1}, micro[5] = {0, 0, 1, 1, 0};
  static const int32_t idx[5] = {0, 1, 0, 1, 0};
  const float amax[5] = {1, 3, 4, 4, 2}, te[5] = {1, 1.5e-40f, 0.1f, 0, 224};
  for (int i = 0; i < 5; i++) {
    ck_assert_int_eq(tr.amax[i].step, steps[i]);
    ck_assert_int_eq(tr.amax[i].micro, micro[i]);
    ck_assert_int_eq(tr.amax[i].tensor, idx[i]);
    ck_assert(same_bits(tr.amax[i].amax, amax[i]));
    ck_assert_msg(same_bits(tr.amax[i].te_scale, te[i]), "row %d: %.9g", i, tr.amax[i].te_scale);
  }
  fp8_trace_close(&tr);
  /* each column alone; without micro every row is micro 0 */
  const char *m = "step,tensor,amax,micro\n0,a,1,7\n";
  write_in(dir, "amax.csv", m, strlen(m));
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_OK);
  ck_assert_int_eq(tr.amax[0].micro, 7);
  ck_assert(same_bits(tr.amax[0].te_scale, 0.0f));
  fp8_trace_close(&tr);
  const char *t = "step,tensor,amax,te_scale\n0,a,1,448\n";
  write_in(dir, "amax.csv", t, strlen(t));
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_OK);
  ck_assert_int_eq(tr.amax[0].micro, 0);
  ck_assert(same_bits(tr.amax[0].te_scale, 448.0f));
  fp8_trace_close(&tr);
  tu_rmtree(dir);
  free(dir);
}
END_TEST

/* Errors of the optional columns: header, body, the message after "amax.csv:". */
typedef struct {
  const char *header, *body, *want;
} csv_bad_cols;

static const csv_bad_cols CSV_BAD_COLS[] = {
    {"step,tensor,amax,micro", "0,a,1,\n", "2: empty micro"},
    {"step,tensor,amax,micro", "0,a,1,-1\n", "2: micro '-1' is not a non-negative integer"},
    {"step,tensor,amax,micro", "0,a,1,1.0\n", "2: micro '1.0' is not a non-negative integer"},
    {"step,tensor,amax,micro", "0,a,1,99999999999999999999\n",
     "2: micro '99999999999999999999' too large"},
    /* a row keeps its micro-batch in 32 bits (issue 27: 24 bytes a row) */
    {"step,tensor,amax,micro", "0,a,1,2147483648\n",
     "2: micro '2147483648' too large (at most 2147483647)"},
    /* duplicates found by sorting, their lines by reading again: the smallest duplicate line,
     * its key's first line, also when the file is out of step order */
    {"step,tensor,amax,micro", "3,a,1,2147483647\n0,b,1,0\n3,a,1,2147483647\n0,b,1,0\n",
     "4: duplicate row for step 3, micro 2147483647, tensor a (first at line 2)"},
    {"step,tensor,amax,micro", "0,a,1\n", "2: expected 4 fields, found 3"},
    {"step,tensor,amax,micro,te_scale", "0,a,1,0\n", "2: expected 5 fields, found 4"},
    {"step,tensor,amax,micro,te_scale", "0,a,1,0,1,2\n", "2: expected 5 fields, found 6"},
    {"step,tensor,amax,micro", "0,a,1,0\n0,b,1,0\n0,a,1,1\n0,a,2,0\n",
     "5: duplicate row for step 0, micro 0, tensor a (first at line 2)"},
    {"step,tensor,amax,te_scale", "0,a,1,0\n", "2: te_scale '0' is zero"},
    {"step,tensor,amax,te_scale", "0,a,1,-0\n", "2: te_scale '-0' is zero"},
    {"step,tensor,amax,te_scale", "0,a,1,-2\n", "2: te_scale '-2' is negative"},
    {"step,tensor,amax,te_scale", "0,a,1,nan\n", "2: te_scale 'nan' is NaN"},
    {"step,tensor,amax,te_scale", "0,a,1,inf\n", "2: te_scale 'inf' is infinite"},
    {"step,tensor,amax,te_scale", "0,a,1,1e39\n", "2: te_scale '1e39' overflows float"},
    {"step,tensor,amax,te_scale", "0,a,1,1e-50\n", "2: te_scale '1e-50' underflows float"},
    {"step,tensor,amax,te_scale", "0,a,1,abc\n", "2: te_scale 'abc' is not a number"},
    {"step,tensor,amax,te_scale", "0,a,1, 2\n", "2: te_scale ' 2' is not a number"},
    {"step,tensor,amax,micro,te_scale", "0,a,1,0,2x\n", "2: te_scale '2x' is not a number"},
    {"step,tensor,amax,te_scale,micro", "0,a,1,1,0\n",
     "1: expected header 'step,tensor,amax', optionally followed by ',micro', ',te_scale' or "
     "',micro,te_scale', found 'step,tensor,amax,te_scale,micro'"},
    {"step,tensor,amax,micro,", "0,a,1,0,\n", "1: expected header"},
};

START_TEST(amax_bad_cols) {
  const csv_bad_cols *c = &CSV_BAD_COLS[_i];
  char *dir = tu_mkdtemp();
  char csv[512];
  snprintf(csv, sizeof csv, "%s\n%s", c->header, c->body);
  write_in(dir, "amax.csv", csv, strlen(csv));
  fp8_trace tr;
  char err[FP8_ERRLEN] = "";
  int rc = fp8_trace_open(dir, &tr, err, sizeof err);
  ck_assert_msg(rc == FP8_EFORMAT, "case %d: rc %d (%s)", _i, rc, err);
  char want[512];
  snprintf(want, sizeof want, "%s/amax.csv:%s", dir, c->want);
  ck_assert_msg(strstr(err, want) == err, "case %d: '%s', want '%s'", _i, err, want);
  ck_assert_ptr_null(tr.amax);
  tu_rmtree(dir);
  free(dir);
}
END_TEST

typedef struct {
  const char *body; /* text after the header line */
  const char *want; /* after "amax.csv:" */
} csv_bad;

static const csv_bad CSV_BAD[] = {
    {"0,a,1\n1,a,abc\n", "3: amax 'abc' is not a number"},
    {"0,a,1.5x\n", "2: amax '1.5x' is not a number"},
    {"0,a,\n", "2: amax '' is not a number"},
    {"0,a, 1\n", "2: amax ' 1' is not a number"},
    {"0,a,nan\n", "2: amax 'nan' is NaN"},
    {"0,a,-1\n", "2: amax '-1' is negative"},
    {"0,a,-inf\n", "2: amax '-inf' is negative"},
    {"0,a,1e39\n", "2: amax '1e39' overflows float"},
    {"-3,a,1\n", "2: step '-3' is not a non-negative integer"},
    {"1.5,a,1\n", "2: step '1.5' is not a non-negative integer"},
    {",a,1\n", "2: step '' is not a non-negative integer"},
    {"99999999999999999999,a,1\n", "2: step '99999999999999999999' too large"},
    {"0,,1\n", "2: empty tensor name"},
    {"0,a,1,2\n", "2: expected 3 fields, found 4"},
    {"0,a\n", "2: expected 3 fields, found 2"},
    {"0,a,1\n\n1,a,2\n", "3: blank line"},
    {"0,a,1\n0,b,1\n5,a,2\n0,a,3\n", "5: duplicate row for step 0, tensor a (first at line 2)"},
    /* files in step order (sorted one step at a time): the duplicate with the smallest line */
    {"0,a,1\n0,b,1\n0,a,3\n1,a,1\n", "4: duplicate row for step 0, tensor a (first at line 2)"},
    {"0,b,1\n0,a,1\n0,b,2\n0,a,2\n", "4: duplicate row for step 0, tensor b (first at line 2)"},
    /* a name is checked where it first appears, after names seen before */
    {"0,a,1\n0,b,1\n1,a,1\n1,b,1\n1,c\x01,1\n", "6: tensor c\\x01: "},
};

START_TEST(amax_bad) {
  const csv_bad *c = &CSV_BAD[_i];
  char *dir = tu_mkdtemp();
  char csv[512];
  snprintf(csv, sizeof csv, "step,tensor,amax\n%s", c->body);
  write_in(dir, "amax.csv", csv, strlen(csv));
  fp8_trace tr;
  char err[FP8_ERRLEN] = "";
  int rc = fp8_trace_open(dir, &tr, err, sizeof err);
  ck_assert_msg(rc == FP8_EFORMAT, "case %d: rc %d (%s)", _i, rc, err);
  char want[256];
  snprintf(want, sizeof want, "%s/amax.csv:%s", dir, c->want);
  ck_assert_msg(strcmp(err, want) == 0 || strstr(err, want) == err, "case %d: '%s', want '%s'",
                _i, err, want);
  ck_assert_ptr_null(tr.amax);
  ck_assert_ptr_null(tr.dir);
  tu_rmtree(dir);
  free(dir);
}
END_TEST

/* A NUL byte is the file's error wherever it is, before any other error (the file is read a
 * line at a time: an earlier error must not hide it). */
START_TEST(amax_nul) {
  static const struct {
    const char *text;
    size_t len;
    const char *want;
  } cases[] = {
      {"step,tensor,amax\n0,a,1\n0,b\0,1\n", 30, "3: NUL byte in the file"},
      {"step,tensor,amax\n0,a,x\n0,b,1\n1,\0a,1\n", 36, "4: NUL byte in the file"},
      {"step,tensor\n0,a,1\n\n\n0,a\0", 24, "5: NUL byte in the file"},
      {"step,tensor,amax\n0,a,1\n\0", 24, "3: NUL byte in the file"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char *dir = tu_mkdtemp();
    write_in(dir, "amax.csv", cases[i].text, cases[i].len);
    fp8_trace tr;
    char err[FP8_ERRLEN] = "", want[256];
    ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_EFORMAT);
    snprintf(want, sizeof want, "%s/amax.csv:%s", dir, cases[i].want);
    ck_assert_msg(strcmp(err, want) == 0, "case %zu: '%s', want '%s'", i, err, want);
    tu_rmtree(dir);
    free(dir);
  }
}
END_TEST

START_TEST(amax_bad_header) {
  char *dir = tu_mkdtemp();
  fp8_trace tr;
  char err[FP8_ERRLEN] = "";
  static const char *texts[] = {"", "step,tensor\n0,a\n", "Step,Tensor,Amax\n", "\nstep,tensor,amax\n"};
  for (int i = 0; i < 4; i++) {
    write_in(dir, "amax.csv", texts[i], strlen(texts[i]));
    ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_EFORMAT);
    ck_assert_msg(strstr(err, "amax.csv:1: expected header 'step,tensor,amax'"), "%d: %s", i, err);
  }
  tu_rmtree(dir);
  free(dir);
}
END_TEST

/* ------------------------------------------------------------------ trace directories */

START_TEST(trace_steps) {
  char *dir = tu_mkdtemp();
  buf_t f = good_file();
  const char *names[] = {"step_120.safetensors", "step_7.safetensors", "step_000012.safetensors"};
  for (int i = 0; i < 3; i++) write_in(dir, names[i], f.b, f.n);
  /* ignored */
  write_in(dir, "step_12abc.safetensors", "x", 1);
  write_in(dir, "step_.safetensors", "x", 1);
  write_in(dir, "step_3", "x", 1); /* a file, not an npy folder */
  write_in(dir, "notes.txt", "x", 1);
  write_in(dir, "step_5.safetensors.bak", "x", 1);
  char *sub = path_in(dir, "other");
  mkdir(sub, 0700);
  char err[FP8_ERRLEN] = "";
  fp8_trace tr;
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_OK);
  ck_assert_int_eq(tr.is_npy, 0);
  ck_assert_uint_eq(tr.nsteps, 3);
  ck_assert_int_eq(tr.steps[0], 7);
  ck_assert_int_eq(tr.steps[1], 12);
  ck_assert_int_eq(tr.steps[2], 120);
  char *p12 = path_in(dir, "step_000012.safetensors");
  ck_assert_str_eq(tr.step_paths[1], p12);
  ck_assert_str_eq(tr.dir, dir);
  ck_assert_uint_eq(tr.namax, 0);
  fp8_step s;
  for (size_t i = 0; i < 3; i++) {
    ck_assert_int_eq(fp8_trace_load_step(&tr, i, &s, err, sizeof err), FP8_OK);
    ck_assert_int_eq(s.step, tr.steps[i]);
    check_good_step(&s);
    fp8_step_free(&s);
  }
  ck_assert_int_eq(fp8_trace_load_step(&tr, 3, &s, err, sizeof err), FP8_EINVAL);
  fp8_trace_close(&tr);

  /* a broken snapshot: the error names the file */
  write_in(dir, "step_7.safetensors", f.b, f.n - 1);
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_OK);
  ck_assert_int_eq(fp8_trace_load_step(&tr, 0, &s, err, sizeof err), FP8_EFORMAT);
  ck_assert_ptr_nonnull(strstr(err, "step_7.safetensors: tensor z.scalar: data_offsets end 44 "
                                    "beyond data size 43"));
  fp8_trace_close(&tr);

  /* a trailing slash in the directory name */
  char *slash = malloc(strlen(dir) + 2);
  sprintf(slash, "%s/", dir);
  ck_assert_int_eq(fp8_trace_open(slash, &tr, err, sizeof err), FP8_OK);
  ck_assert_str_eq(tr.step_paths[1], p12);
  fp8_trace_close(&tr);
  free(slash);
  free(p12);
  free(sub);
  free(f.b);
  tu_rmtree(dir);
  free(dir);
}
END_TEST

START_TEST(trace_errors) {
  char *dir = tu_mkdtemp();
  char err[FP8_ERRLEN] = "";
  fp8_trace tr;
  /* empty directory */
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_EFORMAT);
  ck_assert_ptr_nonnull(strstr(err, "not a trace"));
  /* missing directory */
  char *missing = path_in(dir, "nope");
  ck_assert_int_eq(fp8_trace_open(missing, &tr, err, sizeof err), FP8_EIO);
  ck_assert_ptr_nonnull(strstr(err, missing));
  /* duplicate step numbers */
  write_in(dir, "step_5.safetensors", "{}", 2);
  write_in(dir, "step_005.safetensors", "{}", 2);
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_EFORMAT);
  ck_assert_msg(strstr(err, "step 5 given twice: step_005.safetensors and step_5.safetensors"),
                "%s", err);
  ck_assert_ptr_null(tr.steps);
  char *p = path_in(dir, "step_005.safetensors");
  unlink(p);
  free(p);
  /* safetensors and npy mixed */
  char *sd = path_in(dir, "step_9");
  mkdir(sd, 0700);
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_EFORMAT);
  ck_assert_msg(strstr(err, "mixes safetensors files (step_5.safetensors) and npy folders "
                            "(step_9/)"),
                "%s", err);
  /* a step number beyond int64 */
  rmdir(sd);
  write_in(dir, "step_99999999999999999999.safetensors", "{}", 2);
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_EFORMAT);
  ck_assert_ptr_nonnull(strstr(err, "step_99999999999999999999.safetensors: step number too large"));
  p = path_in(dir, "step_99999999999999999999.safetensors");
  unlink(p);
  free(p);
  /* a bad amax.csv fails the open */
  write_in(dir, "amax.csv", "step,tensor,amax\n0,a,1\n0,a,x\n", 29);
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_EFORMAT);
  ck_assert_ptr_nonnull(strstr(err, "amax.csv:3: amax 'x' is not a number"));
  ck_assert_ptr_null(tr.dir);
  /* snapshots plus a good amax.csv */
  write_in(dir, "amax.csv", "step,tensor,amax\n0,a,1\n", 23);
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_OK);
  ck_assert_uint_eq(tr.nsteps, 1);
  ck_assert_uint_eq(tr.namax, 1);
  fp8_trace_close(&tr);
  fp8_trace_close(&tr); /* twice is harmless */
  free(sd);
  free(missing);
  tu_rmtree(dir);
  free(dir);
}
END_TEST

/* ------------------------------------------------------------------ multi-rank traces */

static char *mkdir_in(const char *dir, const char *name) {
  char *p = path_in(dir, name);
  ck_assert_int_eq(mkdir(p, 0700), 0);
  return p;
}

/* rank_0: snapshots at steps 3 and 7 (the good file), amax.csv with b.x at steps 1 and 3;
 * rank_1: a snapshot at step 5, amax.csv with a.y at step 1; rank_2: amax.csv only, with
 * b.x at step 2. */
START_TEST(trace_ranks) {
  char *dir = tu_mkdtemp();
  buf_t f = good_file();
  char *r0 = mkdir_in(dir, "rank_0"), *r1 = mkdir_in(dir, "rank_1"), *r2 = mkdir_in(dir, "rank_2");
  write_in(r0, "step_3.safetensors", f.b, f.n);
  write_in(r0, "step_7.safetensors", f.b, f.n);
  write_in(r0, "amax.csv", "step,tensor,amax\n3,b.x,2\n1,b.x,1.5\n", 34);
  write_in(r1, "step_5.safetensors", f.b, f.n);
  write_in(r1, "amax.csv", "step,tensor,amax\n1,a.y,4\n", 24);
  write_in(r2, "amax.csv", "step,tensor,amax\n2,b.x,8\n", 24);
  write_in(dir, "rank_9", "a file, not a rank", 18); /* not a folder: ignored */
  write_in(dir, "notes.txt", "x", 1);
  char err[FP8_ERRLEN] = "";
  fp8_trace tr;
  ck_assert_msg(fp8_trace_open(dir, &tr, err, sizeof err) == FP8_OK, "%s", err);
  ck_assert_uint_eq(tr.nranks, 3);
  ck_assert_str_eq(tr.ranks[1].dir, r1);
  ck_assert_ptr_null(tr.step_paths);
  ck_assert_int_eq(tr.is_npy, 0);
  /* the union of the ranks' snapshot steps */
  ck_assert_uint_eq(tr.nsteps, 3);
  ck_assert_int_eq(tr.steps[0], 3);
  ck_assert_int_eq(tr.steps[1], 5);
  ck_assert_int_eq(tr.steps[2], 7);
  /* amax.csv rows of every rank, renamed, sorted by step then name */
  ck_assert_uint_eq(tr.namax_names, 3);
  ck_assert_str_eq(tr.amax_names[0], "rank_0/b.x");
  ck_assert_str_eq(tr.amax_names[1], "rank_1/a.y");
  ck_assert_str_eq(tr.amax_names[2], "rank_2/b.x");
  ck_assert_uint_eq(tr.namax, 4);
  static const int64_t want_step[4] = {1, 1, 2, 3};
  static const int32_t want_tensor[4] = {0, 1, 2, 0};
  static const float want_amax[4] = {1.5f, 4.0f, 8.0f, 2.0f};
  for (int i = 0; i < 4; i++) {
    ck_assert_int_eq(tr.amax[i].step, want_step[i]);
    ck_assert_int_eq(tr.amax[i].tensor, want_tensor[i]);
    ck_assert(same_bits(tr.amax[i].amax, want_amax[i]));
  }
  /* the ranks' own amax rows moved into the union */
  ck_assert_uint_eq(tr.ranks[0].namax, 0);
  /* one rank at a time: names prefixed; a rank without a snapshot at that step has none */
  fp8_step s;
  ck_assert_int_eq(fp8_trace_load_step_rank(&tr, 0, 0, &s, err, sizeof err), FP8_OK);
  ck_assert_int_eq(s.step, 3);
  ck_assert_uint_eq(s.ntensors, 5);
  ck_assert_str_eq(s.tensors[0].name, "rank_0/a.bf16");
  ck_assert_str_eq(s.tensors[4].name, "rank_0/z.scalar");
  ck_assert(same_bits(to_f32(s.tensors[1].dtype, s.tensors[1].data, 0), 1.5f));
  fp8_step_free(&s);
  ck_assert_int_eq(fp8_trace_load_step_rank(&tr, 0, 1, &s, err, sizeof err), FP8_OK);
  ck_assert_int_eq(s.step, 3);
  ck_assert_uint_eq(s.ntensors, 0);
  fp8_step_free(&s);
  ck_assert_int_eq(fp8_trace_load_step_rank(&tr, 1, 1, &s, err, sizeof err), FP8_OK);
  ck_assert_int_eq(s.step, 5);
  ck_assert_str_eq(s.tensors[2].name, "rank_1/c.f16");
  fp8_step_free(&s);
  ck_assert_int_eq(fp8_trace_load_step_rank(&tr, 0, 3, &s, err, sizeof err), FP8_EINVAL);
  ck_assert_int_eq(fp8_trace_load_step_rank(&tr, 3, 0, &s, err, sizeof err), FP8_EINVAL);
  fp8_trace_close(&tr);

  /* the whole step: every rank's tensors, sorted by name */
  write_in(r1, "step_3.safetensors", f.b, f.n);
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_OK);
  ck_assert_int_eq(fp8_trace_load_step(&tr, 0, &s, err, sizeof err), FP8_OK);
  ck_assert_int_eq(s.step, 3);
  ck_assert_uint_eq(s.ntensors, 10);
  ck_assert_str_eq(s.tensors[0].name, "rank_0/a.bf16");
  ck_assert_str_eq(s.tensors[4].name, "rank_0/z.scalar");
  ck_assert_str_eq(s.tensors[5].name, "rank_1/a.bf16");
  ck_assert_str_eq(s.tensors[9].name, "rank_1/z.scalar");
  ck_assert(same_bits(to_f32(s.tensors[6].dtype, s.tensors[6].data, 1), -2.25f));
  fp8_step_free(&s);
  /* a single-rank trace is rank 0 of itself */
  fp8_trace one;
  ck_assert_int_eq(fp8_trace_open(r0, &one, err, sizeof err), FP8_OK);
  ck_assert_uint_eq(one.nranks, 0);
  ck_assert_int_eq(fp8_trace_load_step_rank(&one, 1, 0, &s, err, sizeof err), FP8_OK);
  ck_assert_int_eq(s.step, 7);
  ck_assert_str_eq(s.tensors[0].name, "a.bf16");
  fp8_step_free(&s);
  ck_assert_int_eq(fp8_trace_load_step_rank(&one, 0, 1, &s, err, sizeof err), FP8_EINVAL);
  fp8_trace_close(&one);
  fp8_trace_close(&tr);

  /* rank_<r>/ prefixes */
  size_t rk = 99;
  ck_assert_str_eq(fp8_trace_split_rank("rank_12/a.b/c", &rk), "a.b/c");
  ck_assert_uint_eq(rk, 12);
  ck_assert_str_eq(fp8_trace_split_rank("rank_0/x", &rk), "x");
  ck_assert_uint_eq(rk, 0);
  ck_assert_ptr_null(fp8_trace_split_rank("rank_01/x", &rk));
  ck_assert_ptr_null(fp8_trace_split_rank("rank_/x", &rk));
  ck_assert_ptr_null(fp8_trace_split_rank("rank_1x/x", &rk));
  ck_assert_ptr_null(fp8_trace_split_rank("rank_1", &rk));
  ck_assert_ptr_null(fp8_trace_split_rank("m.input", &rk));
  ck_assert_ptr_null(fp8_trace_split_rank("rank_65536/x", &rk));
  free(r0);
  free(r1);
  free(r2);
  free(f.b);
  tu_rmtree(dir);
  free(dir);
}
END_TEST

/* Folders of ranks that are not rank_0 .. rank_<R-1>, or that sit beside a single-rank trace:
 * exact messages naming the folder. */
START_TEST(trace_rank_errors) {
  char *dir = tu_mkdtemp();
  char err[FP8_ERRLEN] = "", want[1024];
  fp8_trace tr;
  static const char CSV[] = "step,tensor,amax\n0,a.input,1\n";
  /* rank_0 missing */
  char *r1 = mkdir_in(dir, "rank_1");
  write_in(r1, "amax.csv", CSV, strlen(CSV));
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_EFORMAT);
  snprintf(want, sizeof want, "%s: rank_0/ is missing (found 1 rank folders, up to rank_1/; "
           "expected rank_0/ .. rank_<R-1>/ without gaps)", dir);
  ck_assert_str_eq(err, want);
  ck_assert_ptr_null(tr.dir);
  /* a gap */
  char *r0 = mkdir_in(dir, "rank_0"), *r3 = mkdir_in(dir, "rank_3");
  write_in(r0, "amax.csv", CSV, strlen(CSV));
  write_in(r3, "amax.csv", CSV, strlen(CSV));
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_EFORMAT);
  snprintf(want, sizeof want, "%s: rank_2/ is missing (found 3 rank folders, up to rank_3/; "
           "expected rank_0/ .. rank_<R-1>/ without gaps)", dir);
  ck_assert_str_eq(err, want);
  tu_rmtree(r3);
  /* a rank folder that is not a trace */
  char *r2 = mkdir_in(dir, "rank_2");
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_EFORMAT);
  snprintf(want, sizeof want, "%s: not a trace: no step_<N>.safetensors files, step_<N>/ folders "
           "or amax.csv", r2);
  ck_assert_str_eq(err, want);
  /* a bad amax.csv in a rank names that rank's file */
  write_in(r2, "amax.csv", "step,tensor,amax\n0,a,x\n", 23);
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_EFORMAT);
  snprintf(want, sizeof want, "%s/amax.csv:2: amax 'x' is not a number", r2);
  ck_assert_str_eq(err, want);
  write_in(r2, "amax.csv", CSV, strlen(CSV));
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_OK);
  ck_assert_uint_eq(tr.nranks, 3);
  fp8_trace_close(&tr);
  /* a leading zero */
  char *r01 = mkdir_in(dir, "rank_01");
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_EFORMAT);
  snprintf(want, sizeof want, "%s: rank_01/: a rank folder is named rank_<r> with r written "
           "without leading zeros", dir);
  ck_assert_str_eq(err, want);
  rmdir(r01);
  /* too many ranks */
  char *big = mkdir_in(dir, "rank_65536");
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_EFORMAT);
  snprintf(want, sizeof want, "%s: rank_65536/: rank number too large (rank folders go up to "
           "rank_65535/)", dir);
  ck_assert_str_eq(err, want);
  rmdir(big);
  /* beside a single-rank trace: a snapshot, an npy folder, amax.csv */
  write_in(dir, "step_4.safetensors", "x", 1);
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_EFORMAT);
  snprintf(want, sizeof want, "%s: holds both a single-rank trace (step_4.safetensors) and rank "
           "folders (rank_0/); a trace is one or the other", dir);
  ck_assert_str_eq(err, want);
  char *p = path_in(dir, "step_4.safetensors");
  unlink(p);
  free(p);
  char *npy = mkdir_in(dir, "step_2");
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_EFORMAT);
  snprintf(want, sizeof want, "%s: holds both a single-rank trace (step_2/) and rank folders "
           "(rank_0/); a trace is one or the other", dir);
  ck_assert_str_eq(err, want);
  rmdir(npy);
  write_in(dir, "amax.csv", CSV, strlen(CSV));
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_EFORMAT);
  snprintf(want, sizeof want, "%s: holds both a single-rank trace (amax.csv) and rank folders "
           "(rank_0/); a trace is one or the other", dir);
  ck_assert_str_eq(err, want);
  /* the rank folders of a rank are not looked at: rank_0/rank_0/ is just ignored there */
  p = path_in(dir, "amax.csv");
  unlink(p);
  free(p);
  char *nested = mkdir_in(r0, "rank_0");
  ck_assert_int_eq(fp8_trace_open(dir, &tr, err, sizeof err), FP8_OK);
  ck_assert_uint_eq(tr.ranks[0].nranks, 0);
  fp8_trace_close(&tr);
  /* an empty folder: the message mentions rank folders */
  char *empty = mkdir_in(dir, "empty");
  ck_assert_int_eq(fp8_trace_open(empty, &tr, err, sizeof err), FP8_EFORMAT);
  snprintf(want, sizeof want, "%s: not a trace: no step_<N>.safetensors files, step_<N>/ folders, "
           "amax.csv or rank_<r>/ folders", empty);
  ck_assert_str_eq(err, want);
  free(empty);
  free(nested);
  free(npy);
  free(big);
  free(r01);
  free(r0);
  free(r1);
  free(r2);
  free(r3);
  tu_rmtree(dir);
  free(dir);
}
END_TEST

int main(void) {
  Suite *s = suite_create("trace");
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
  tc = tcase_create("npy");
  tcase_add_test(tc, npy_good);
  tcase_add_loop_test(tc, npy_malformed, 0, (int)(sizeof NPY_BAD / sizeof NPY_BAD[0]));
  suite_add_tcase(s, tc);
  tc = tcase_create("amax");
  tcase_add_test(tc, amax_good);
  tcase_add_test(tc, amax_step_order);
  tcase_add_test(tc, amax_nul);
  tcase_add_loop_test(tc, amax_bad, 0, (int)(sizeof CSV_BAD / sizeof CSV_BAD[0]));
  tcase_add_test(tc, amax_bad_header);
  tcase_add_test(tc, amax_micro_te_scale);
  tcase_add_loop_test(tc, amax_bad_cols, 0, (int)(sizeof CSV_BAD_COLS / sizeof CSV_BAD_COLS[0]));
  suite_add_tcase(s, tc);
  tc = tcase_create("dir");
  tcase_add_test(tc, trace_steps);
  tcase_add_test(tc, trace_errors);
  tcase_add_test(tc, trace_ranks);
  tcase_add_test(tc, trace_rank_errors);
  suite_add_tcase(s, tc);
  return tu_run_suite(s);
}
