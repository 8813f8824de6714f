/* trace_helpers.c: the definitions of trace_helpers.h (see there). */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "trace.h"
#include "trace_helpers.h"

void put(buf_t *b, const void *p, size_t n) {
  if (b->n + n > b->cap) {
    b->cap = (b->n + n) * 2 + 64;
    b->b = realloc(b->b, b->cap);
    ck_assert_ptr_nonnull(b->b);
  }
  if (n) memcpy(b->b + b->n, p, n);
  b->n += n;
}

void put_u16(buf_t *b, uint16_t v) {
  unsigned char x[2] = {(unsigned char)v, (unsigned char)(v >> 8)};
  put(b, x, 2);
}

void put_u32(buf_t *b, uint32_t v) {
  unsigned char x[4];
  for (int k = 0; k < 4; k++) x[k] = (unsigned char)(v >> (8 * k));
  put(b, x, 4);
}

void put_u64(buf_t *b, uint64_t v) {
  unsigned char x[8];
  for (int k = 0; k < 8; k++) x[k] = (unsigned char)(v >> (8 * k));
  put(b, x, 8);
}

void put_f32(buf_t *b, float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  put_u32(b, u);
}

void put_zeros(buf_t *b, size_t n) {
  for (size_t i = 0; i < n; i++) put(b, "", 1);
}

/* A safetensors file: u64 length of hdr, hdr, then the data already in d. */
buf_t st_file(const char *hdr, const buf_t *d) {
  buf_t b = {0};
  put_u64(&b, strlen(hdr));
  put(&b, hdr, strlen(hdr));
  if (d) put(&b, d->b, d->n);
  return b;
}

void write_in(const char *dir, const char *name, const void *data, size_t n) {
  char *p = tu_path(dir, name);
  ck_assert_int_eq(tu_write_file(p, data, n), 0);
  free(p);
}

float to_f32(fp8_dtype d, const void *src, size_t i) {
  float f;
  fp8_dtype_to_f32(d, (const unsigned char *)src + i * fp8_dtype_size(d), 1, &f);
  return f;
}

int same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

/* Header of the good file: unsorted names, metadata, a 0-d and a zero-size tensor, and a
 * length of 8 + odd so that every tensor's data is unaligned. */
const char *GOOD_HDR =
    "{\"b.f32\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
    "\"__metadata__\":{\"format\":\"pt\",\"note\":\"ignored\"},"
    "\"a.bf16\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[24,32]},"
    "\"y.empty\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[32,32]},"
    "\"c.f16\":{\"dtype\":\"F16\",\"shape\":[2,2],\"data_offsets\":[32,40]},"
    "\"z.scalar\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[40,44]}}";

buf_t good_file(void) {
  buf_t d = {0};
  for (int i = 0; i < 6; i++) put_f32(&d, GOOD_F32[i]);
  for (int i = 0; i < 4; i++) put_u16(&d, GOOD_BF16[i]);
  for (int i = 0; i < 4; i++) put_u16(&d, GOOD_F16[i]);
  put_f32(&d, 42.0f);
  buf_t b = st_file(GOOD_HDR, &d);
  free(d.b);
  return b;
}

void check_good_step(const fp8_step *s) {
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
