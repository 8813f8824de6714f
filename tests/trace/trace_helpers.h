/* trace_helpers.h: byte builders and the good files shared by the trace reader tests (definitions
 * and comments in trace_helpers.c). */
#ifndef FP8LAB_TESTS_TRACE_HELPERS_H
#define FP8LAB_TESTS_TRACE_HELPERS_H

#include <check.h>

#include "testutil.h"
#include "trace.h"

typedef struct {
  unsigned char *b;
  size_t n, cap;
} buf_t;
void put(buf_t *b, const void *p, size_t n);
void put_u16(buf_t *b, uint16_t v);
void put_u32(buf_t *b, uint32_t v);
void put_u64(buf_t *b, uint64_t v);
void put_f32(buf_t *b, float f);
void put_zeros(buf_t *b, size_t n);
buf_t st_file(const char *hdr, const buf_t *d);
void write_in(const char *dir, const char *name, const void *data, size_t n);
float to_f32(fp8_dtype d, const void *src, size_t i);
int same_bits(float a, float b);
extern const char *GOOD_HDR;
static const float GOOD_F32[6] = {1.5f, -2.25f, 3.0e-5f, INFINITY, 0.0f, -1.0e-40f};
static const uint16_t GOOD_BF16[4] = {0x3FC0, 0xC000, 0x7F80, 0x0001};
static const uint16_t GOOD_F16[4] = {0x3C00, 0xC000, 0x7BFF, 0x0001};
buf_t good_file(void);
void check_good_step(const fp8_step *s);

#endif
