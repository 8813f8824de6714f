/* analysis_internal.h: CSV helpers shared by analysis.c and analysis_recommend.c (not public). */
#ifndef FP8LAB_ANALYSIS_ANALYSIS_INTERNAL_H
#define FP8LAB_ANALYSIS_ANALYSIS_INTERNAL_H

#include <math.h>
#include <stdio.h>
#include <string.h>

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
