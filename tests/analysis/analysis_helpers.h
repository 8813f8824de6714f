/* analysis_helpers.h: steps.csv text built in memory and parsed, shared by the analysis tests
 * (definitions in analysis_helpers.c). */
#ifndef FP8LAB_TESTS_ANALYSIS_HELPERS_H
#define FP8LAB_TESTS_ANALYSIS_HELPERS_H

#include "testutil.h"
#include "analysis.h"
#include "results.h" /* fp8_schema_steps */

typedef struct {
  char *s;
  size_t n, cap;
} sbuf;
void addf(sbuf *b, const char *fmt, ...);

/* The steps.csv header as results.h spells it: its first ncols columns, then eol. */
#define V1_COLS FP8_STEPS_COL_NBLOCKS /* the 19 columns before the block columns */

void add_header(sbuf *b, int ncols, const char *eol);
sbuf with_header(void);
int parse(const sbuf *b, fp8_steps_table *t, char *err, size_t errlen);
#define D_CFG "d,delayed,e4m3,16,0,max"

#define C_CFG "c,current,e4m3,,,"

void add_row(sbuf *b, const char *tensor, const char *role, long step, const char *cfg,
                    const char *rest);

#endif
