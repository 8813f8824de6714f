/* experiment_internal.h: what the files of the experiment loader share (experiment.c reads the
 * INI lines, experiment_values.c parses values and records errors, experiment_sections.c checks
 * [trace], [analysis] and [output], experiment_recipe.c expands [recipe.*]): the loader's
 * state and the functions one file calls in another. Calls go one way only: experiment.c ->
 * sections / recipe -> values (a leaf), so no two of these files call each other.
 * Not installed, not for use outside src/experiment/experiment*.c.
 */
#ifndef FP8LAB_EXPERIMENT_EXPERIMENT_INTERNAL_H
#define FP8LAB_EXPERIMENT_EXPERIMENT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "experiment.h"
#include "util.h" /* FP8_PRINTF, fp8_errorf, fp8_grow */

#define EXP_LABEL_MAX 63

typedef enum { SEC_NONE, SEC_TRACE, SEC_OUTPUT, SEC_RECIPE, SEC_ANALYSIS, SEC_IGNORED } exp_sec_type;

/* One "key = value" line of the section being read. */
typedef struct {
  char *key;
  char *value;
  int line;
} exp_entry;

/* One [recipe.<label>] header seen, for "given twice". */
typedef struct {
  char label[EXP_LABEL_MAX + 1];
  int line;
} exp_label;

/* The loader's state while one file is read. */
typedef struct {
  fp8_experiment *ex;
  FILE *fp;
  char *buf; /* getline buffer */
  size_t cap;
  int lineno;
  const char *long_value; /* value of the current line when it did not fit inih's buffer */
  int nomem;
  int read_errno;
  /* the error to report: the one with the smallest line */
  int has_err;
  int err_line;
  unsigned nfail; /* every failure, kept or not */
  char err_msg[512];
  /* the section being read */
  exp_sec_type sec;
  int sec_line;
  unsigned sec_nfail; /* nfail when the section began */
  char secname[96];
  exp_entry *ents;
  size_t nents, capents;
  /* sections seen */
  int trace_line, output_line, analysis_line;
  exp_label *labels;
  size_t nlabels, caplabels;
} exp_ctx;

/* ---------------------------------------------------------------- experiment_values.c */

/** Records a failure at line; the message kept is that of the first failure in the file (the
 *  smallest line; the earliest call among equal lines). It formats into c->err_msg itself,
 *  not via fp8_errorf: it also has to decide whether to keep the message at all. */
void fp8_exp_fail(exp_ctx *c, int line, const char *fmt, ...) FP8_PRINTF(3, 4);
/** strdup that sets c->nomem when out of memory. */
char *fp8_exp_strdup(exp_ctx *c, const char *s);
/** s with leading and trailing whitespace removed (in place). */
char *fp8_exp_trim(char *s);

/** A comma list: items trimmed, pointing into buf. */
typedef struct {
  char *buf;
  char **items;
  size_t n;
} exp_list;

void fp8_exp_list_free(exp_list *l);
/** 0 on success, 1 when an item is empty, -1 when out of memory. */
int fp8_exp_list_split(const char *value, exp_list *l);
/* A tensors key (in [trace] or a [recipe.*]): a comma list of distinct globs into *globs /
 * *n (allocated; *n 0 on error, with the error at the key's line). */
void fp8_exp_globs(exp_ctx *c, const exp_entry *e, char ***globs, size_t *n);

/** Whole-item base-10 integers and booleans: 0 on success, -1 when s is not one. */
int fp8_exp_parse_i64(const char *s, int64_t *out);
int fp8_exp_parse_u64(const char *s, uint64_t *out);
int fp8_exp_parse_bool(const char *s, int *out);
/** "a", "a-b" or "a-b:stride". Returns NULL or what is wrong. */
const char *fp8_exp_parse_steps(const char *spec, int64_t *a, int64_t *b, int64_t *stride,
                                int *nomem);
/** base_dir/rel, or rel unchanged when it is absolute or base_dir is "." (NULL and c->nomem
 *  when out of memory). */
char *fp8_exp_resolve(exp_ctx *c, const char *rel);

/* ---------------------------------------------------------------- section ends */

/** Validate the keys of the section just read (c->ents) into c->ex, reporting with
 *  fp8_exp_fail. experiment_sections.c: */
void fp8_exp_trace_end(exp_ctx *c);
void fp8_exp_output_end(exp_ctx *c);
void fp8_exp_analysis_end(exp_ctx *c);
/** experiment_recipe.c: also expands the section's sweep into c->ex->configs. */
void fp8_exp_recipe_end(exp_ctx *c);
/** experiment_recipe.c: after the last section, the checks of labels shared by sections. */
void fp8_exp_labels_end(exp_ctx *c);

#endif /* FP8LAB_EXPERIMENT_EXPERIMENT_INTERNAL_H */
