/* util.c: see util.h. */
#include "util.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int fp8_errorf(int status, char *err, size_t errlen, const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return status;
}

void *fp8_grow(void *arr, size_t n, size_t *cap, size_t elem, size_t first) {
  if (n < *cap) return arr;
  size_t nc = *cap ? 2 * *cap : first;
  if (nc > SIZE_MAX / elem) return NULL;
  void *na = realloc(arr, nc * elem);
  if (na) *cap = nc;
  return na;
}
