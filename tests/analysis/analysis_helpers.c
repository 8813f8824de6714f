/* analysis_helpers.c: the definitions of analysis_helpers.h (see there). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "results.h" /* fp8_schema_steps */
#include "testutil.h"
#include "analysis_helpers.h"

void addf(sbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (b->n + (size_t)k + 1 > b->cap) {
    b->cap = 2 * (b->n + (size_t)k + 1) + 256;
    b->s = realloc(b->s, b->cap);
  }
  va_start(ap, fmt);
  vsnprintf(b->s + b->n, (size_t)k + 1, fmt, ap);
  va_end(ap);
  b->n += (size_t)k;
}

void add_header(sbuf *b, int ncols, const char *eol) {
  for (int i = 0; i < ncols; i++) addf(b, "%s%s", i ? "," : "", fp8_schema_steps.columns[i]);
  addf(b, "%s", eol);
}

sbuf with_header(void) {
  sbuf b = {0};
  add_header(&b, V1_COLS, "\n");
  return b;
}

int parse(const sbuf *b, fp8_steps_table *t, char *err, size_t errlen) {
  return fp8_steps_csv_parse("t.csv", b->s, b->n, t, err, errlen);
}

/* a row: tensor, role, step, configuration (6 fields), then the 10 numeric fields as text */
void add_row(sbuf *b, const char *tensor, const char *role, long step, const char *cfg,
                    const char *rest) {
  addf(b, "%s,%s,%ld,%s,%s\n", tensor, role, step, cfg, rest);
}
