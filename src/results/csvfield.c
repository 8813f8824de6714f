/* csvfield.c: the field parsers every reader of a result file shares (stepscsv_internal.h):
 * integers as digits only, floats as printf("%.9g") writes them (stepscsv.c, streamcsv.c,
 * resultcsv.c, config_key.c). A leaf: it calls no other file of the folder. */
#include <errno.h>
#include <float.h> /* FLT_EVAL_METHOD */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "stepscsv_internal.h"

/* Digits only (after a '-' where allowed), within int64: strtoll's value for those. */
int steps_parse_i64(const char *s, int allow_neg, int64_t *out) {
  const char *p = s;
  int neg = *p == '-' && allow_neg;
  p += neg;
  if (!*p) return 0;
  uint64_t v = 0;
  for (; *p; p++) {
    if (*p < '0' || *p > '9') return 0;
    unsigned d = (unsigned)(*p - '0');
    if (v > (UINT64_MAX - d) / 10) return 0;
    v = v * 10 + d;
  }
  if (v > (uint64_t)INT64_MAX + (uint64_t)neg) return 0;
  *out = neg && v ? -(int64_t)(v - 1) - 1 : (int64_t)v;
  return 1;
}

/* Clinger's fast path for [+-]digits[.digits][(e|E)[+-]digits]: with at most 19 significant
 * digits forming w <= 2^53 and a decimal exponent e, |e| <= 22, both w and 10^|e| are exact
 * doubles and the one multiplication or division rounds correctly: strtod's value. 0 (and
 * *out untouched) for anything else, which strtod then decides. */
static int parse_f64_fast(const char *s, double *out) {
#if FLT_EVAL_METHOD == 0
  static const double p10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                 1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
  const char *p = s;
  int neg = *p == '-', any = 0, nd = 0, e = 0;
  if (*p == '-' || *p == '+') p++;
  uint64_t w = 0;
  for (int frac = 0;; p++) {
    if (*p == '.' && !frac) {
      frac = 1;
      continue;
    }
    if (*p < '0' || *p > '9') break;
    any = 1;
    e -= frac;
    if (w == 0 && *p == '0') continue; /* leading zeros are not significant */
    if (++nd > 19) return 0;
    w = w * 10 + (uint64_t)(*p - '0');
  }
  if (!any) return 0;
  if (*p == 'e' || *p == 'E') {
    p++;
    int eneg = *p == '-', x = 0;
    if (*p == '-' || *p == '+') p++;
    if (*p < '0' || *p > '9') return 0;
    for (; *p >= '0' && *p <= '9'; p++)
      if ((x = x * 10 + (*p - '0')) > 9999) return 0;
    e += eneg ? -x : x;
  }
  if (*p || w > (uint64_t)1 << 53 || e < -22 || e > 22) return 0;
  double v = e < 0 ? (double)w / p10[-e] : (double)w * p10[e];
  *out = neg ? -v : v;
  return 1;
#else
  (void)s;
  (void)out;
  return 0;
#endif
}

/* A decimal float as printf("%.9g") writes it, or inf, -inf, nan. No hex, no spaces. */
int steps_parse_f64(const char *s, double *out) {
  if (parse_f64_fast(s, out)) return 1;
  if (strcmp(s, "inf") == 0) return *out = INFINITY, 1;
  if (strcmp(s, "-inf") == 0) return *out = -INFINITY, 1;
  if (strcmp(s, "nan") == 0) return *out = NAN, 1;
  int digit = 0;
  for (const char *q = s; *q; q++) {
    if (*q >= '0' && *q <= '9') digit = 1;
    else if (!strchr(".eE+-", *q)) return 0;
  }
  if (!digit) return 0;
  errno = 0;
  char *end;
  double v = strtod(s, &end);
  if (*end || (errno == ERANGE && isinf(v))) return 0;
  *out = v;
  return 1;
}
