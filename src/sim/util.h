/* util.h: the two small helpers every layer of fp8lab uses, kept here at the bottom of the
 * dependency graph (src/sim depends on nothing) so that no file needs a cycle to reach them:
 * the one error-message helper and the one buffer-growth helper. */
#ifndef FP8LAB_SIM_UTIL_H
#define FP8LAB_SIM_UTIL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define FP8_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define FP8_PRINTF(a, b)
#endif

/** Writes a printf-style one-line message into err (when err and errlen) and returns status:
 *  `return fp8_errorf(FP8_EIO, err, errlen, "%s: cannot write", path);` */
int fp8_errorf(int status, char *err, size_t errlen, const char *fmt, ...) FP8_PRINTF(4, 5);

/** Room for one more element in a growing array of n elements of elem bytes: returns arr when
 *  n < *cap, else arr reallocated to twice *cap (`first` when *cap is 0) with *cap updated, or
 *  NULL when out of memory (arr and *cap unchanged, arr still the caller's to free). */
void *fp8_grow(void *arr, size_t n, size_t *cap, size_t elem, size_t first);

#ifdef __cplusplus
}
#endif

#endif /* FP8LAB_SIM_UTIL_H */
