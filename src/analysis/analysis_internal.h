/* analysis_internal.h: CSV helpers shared by analysis.c and analysis_recommend.c (not public). */
#ifndef FP8LAB_ANALYSIS_INTERNAL_H
#define FP8LAB_ANALYSIS_INTERNAL_H

#include <math.h>
#include <stdio.h>
#include <string.h>

/* "%.9g" with inf/-inf/nan spelled as in steps.csv (glibc could print -nan). */
static inline void ana_put_num(FILE *fp, double v) {
  if (isnan(v)) fputs("nan", fp);
  else if (isinf(v)) fputs(v > 0 ? "inf" : "-inf", fp);
  else fprintf(fp, "%.9g", v);
}

/* A text field, quoted per RFC 4180 when it holds a comma, a quote or a line break. */
static inline void ana_put_text(FILE *fp, const char *s) {
  if (!s) return;
  if (!strpbrk(s, ",\"\r\n")) {
    fputs(s, fp);
    return;
  }
  fputc('"', fp);
  for (; *s; s++) {
    if (*s == '"') fputc('"', fp);
    fputc(*s, fp);
  }
  fputc('"', fp);
}

#endif
