/* util.h: the small helpers every layer of fp8lab uses, kept here at the bottom of the
 * dependency graph (src/sim depends on nothing) so that no file needs a cycle to reach them:
 * the one error-message helper, the one escaper of input bytes quoted in messages (with its
 * UTF-8 decoder) and the one buffer-growth helper. */
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

/** Bytes of a one-line message buffer (err, errlen): every message fits. */
#define FP8_ERRLEN 512

/** Bytes of a buffer for one quoted item of a message: fp8_escape shows up to FP8_ESC_SHOW
 *  bytes of escaped text, then "..." (an item is a name, a key, a field: the message stays
 *  readable and within FP8_ERRLEN whatever the input holds). */
#define FP8_ESC_SHOW 120
#define FP8_ESC_LEN (FP8_ESC_SHOW + 4)

/** Length (1 to 4) of the well-formed UTF-8 sequence at s[0..len) (RFC 3629: no overlong
 *  form, no surrogate, at most U+10FFFF), its code point in *cp; 0 when s does not start
 *  with one (len 0 included). */
size_t fp8_utf8_decode(const unsigned char *s, size_t len, unsigned *cp);

/** 1 for the code points docs/semantics.md calls control characters: C0 (U+0000..U+001F),
 *  DEL (U+007F) and C1 (U+0080..U+009F, which terminals take as escape sequences too). */
int fp8_is_control(unsigned cp);

/** Writes len bytes of s, escaped for a one-line message, into out (outlen bytes, always
 *  NUL-terminated when outlen > 0) and returns out. Printable ASCII and well-formed UTF-8 of
 *  characters other than controls are copied; a backslash becomes \\, newline \n, carriage
 *  return \r, tab \t; every other byte (other controls, each byte of a C1 character's UTF-8,
 *  bytes that are not well-formed UTF-8, NUL included) becomes \xNN with lowercase hex. So a
 *  message never holds a line break or a terminal escape from its input, and every byte can
 *  be read back. Text that does not fit ends with "..." (cut between escapes): at most
 *  outlen - 4 bytes of escaped text then. docs/semantics.md, "Strict inputs (issue 16)". */
const char *fp8_escape(const char *s, size_t len, char *out, size_t outlen);

/** fp8_escape of the NUL-terminated string s (NULL shows as "(null)"). */
const char *fp8_esc(const char *s, char *out, size_t outlen);

/** The safety net where a message is printed (the CLI's stderr lines): like fp8_escape but a
 *  backslash is left as it is, so that the escapes a message already holds pass unchanged,
 *  while any control byte or stray byte that reached it (a path given on the command line)
 *  still cannot break the line. No "..." cut: out should hold 4 * len + 1 bytes. */
const char *fp8_escape_line(const char *s, char *out, size_t outlen);

/** strcmp, except that runs of digits compare by value ("layers.2" < "layers.10"); names equal
 *  so (leading zeros: "l01" and "l1") by strcmp, so that the order is total. */
int fp8_natural_cmp(const char *a, const char *b);

/** A set of strings, each with the index it was added as (0, 1, 2, ...): open addressing on
 *  FNV-1a, for turning many repeated names into indices without a sort of all of them. The
 *  keys are borrowed (they must outlive the map and not move). Zero-initialise it. */
typedef struct {
  const char **key; /**< [cap] (NULL: empty slot) */
  size_t *len, *idx;
  size_t cap, n;
} fp8_strset;
/** The index of key[0..len) (n bytes, no NUL needed), adding it as the next index when new
 *  (*added set). SIZE_MAX when out of memory. */
size_t fp8_strset_put(fp8_strset *s, const char *key, size_t len, int *added);
/** The index of key[0..len), or SIZE_MAX when absent. */
size_t fp8_strset_get(const fp8_strset *s, const char *key, size_t len);
void fp8_strset_free(fp8_strset *s);

/** Room for one more element in a growing array of n elements of elem bytes: returns arr when
 *  n < *cap, else arr reallocated to twice *cap (`first` when *cap is 0) with *cap updated, or
 *  NULL when out of memory (arr and *cap unchanged, arr still the caller's to free). */
void *fp8_grow(void *arr, size_t n, size_t *cap, size_t elem, size_t first);

#ifdef __cplusplus
}
#endif

#endif /* FP8LAB_SIM_UTIL_H */
