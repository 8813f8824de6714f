/* steps_csv_internal.h: what the steps.csv reader's two halves share (not public): the parser
 * (steps_csv.c: lines, fields, validation) hands each parsed row to the string table and the
 * group map of steps_csv_groups.c, which then orders the groups and checks for duplicates. */
#ifndef FP8LAB_RESULTS_STEPS_CSV_INTERNAL_H
#define FP8LAB_RESULTS_STEPS_CSV_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "tables.h"
#include "util.h" /* FP8_PRINTF */

/* ------------------------------------------------------------------ parser state */

typedef struct {
  const char *name;
  char *err;
  size_t errlen;
  int64_t line;
  char shown[80];
  int ncols; /* of the header: one of fp8_schema_steps.versions */
} steps_ctx;

/* Writes "<name>:<line>: <message>" into c->err; returns FP8_EFORMAT. */
int steps_fail_at(steps_ctx *c, int64_t line, const char *fmt, ...) FP8_PRINTF(3, 4);

/* ------------------------------------------------------------------ interned strings */

typedef struct {
  char *s;
  uint64_t h;
  int attr;     /* tensors: role; pairs: kind */
  int64_t line; /* first line it was seen on */
} steps_istr;

typedef struct {
  steps_istr *slots;
  size_t cap, n;
} steps_itab;

/* The entry for s (created with attr and line when new, *created = 1); NULL when out of
 * memory. Equal strings get the same entry, so interned names compare by pointer. */
steps_istr *steps_itab_get(steps_itab *t, const char *s, int attr, int64_t line, int *created);
void steps_itab_free(steps_itab *t);

/* What fp8_steps_table.priv_ points to. */
typedef struct {
  steps_itab tensors, recipes;
  steps_itab pairs; /* "tensor,recipe" of each pair seen; attr: its kind */
  size_t *row_index; /* storage of every group's rows[] */
} steps_priv;

/* ------------------------------------------------------------------ group map */

typedef struct {
  fp8_steps_group *g; /* key + counts, in order of first appearance */
  int64_t *first_line;
  size_t n, cap;
  size_t *slots; /* open addressing: group index + 1, 0 = empty */
  size_t nslots;
} steps_gmap;

/* The index of the row's group, created on first sight; (size_t)-1 when out of memory. */
size_t steps_gmap_get(steps_gmap *gm, const fp8_step_row *r);
void steps_gmap_free(steps_gmap *gm);

/* Builds t's groups from the parsed rows (t->rows, t->nrows; row_group[i]: the gmap index of
 * row i): group order, each group's rows by step, the distinct tensors. A step twice in one
 * group is FP8_EFORMAT at its later line (message through c). */
int steps_build_groups(steps_ctx *c, fp8_steps_table *t, steps_priv *pv, steps_gmap *gm,
                       const size_t *row_group);

#endif
