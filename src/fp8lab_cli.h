/* fp8lab_cli.h: what the command-line files (fp8lab.c, fp8lab_timeline.c) share. */
#ifndef FP8LAB_CLI_H
#define FP8LAB_CLI_H

#include <errno.h>
#include <stdlib.h>

/** A decimal integer in [lo, hi], the whole string: 0 and *out, or -1. */
static inline int fp8_cli_parse_ll(const char *s, long long lo, long long hi, long long *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

#endif
