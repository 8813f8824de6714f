/* csv_internal.h: what the files of src/results that write and read a CSV share (private to
 * the folder): the row builder every writer puts its lines together with, the splitter and
 * the field parsers every reader cuts and checks its fields with, and the whole-file loader of the small tables
 * (histograms.csv, gemm.csv). csv.c holds the non-inline half.
 *
 * The row builder builds each line in a buffer and writes it once: integers by hand, numbers
 * as fp8_csv_put_num writes them ("%.9g", inf/-inf/nan) through a small memo of the last
 * numbers formatted (an amax repeats for every configuration of a tensor, a scale and its
 * statistics for every configuration that shares them), which is what makes a sweep's many
 * rows cheap. The text is byte for byte fp8_csv_put_num's. The memo is each thread's own (a
 * run's steps.csv and stream.csv rows are written by a thread of their own: src/run's
 * run_writer.c). Static inline: the writers are hot, and every call stays inlined as it was
 * when they were one file. */
#ifndef FP8LAB_RESULTS_CSV_INTERNAL_H
#define FP8LAB_RESULTS_CSV_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "outfile.h" /* fp8_num_text, FP8_NUM_TEXT_MAX */
#include "results.h"

/* ------------------------------------------------------------------ a row, built in memory */

typedef struct {
  FILE *fp;
  size_t n;        /* bytes in buf */
  char buf[1024];  /* the line so far (a longer line is written in pieces) */
} csv_line;

static inline void csv_line_init(csv_line *l, FILE *fp) {
  l->fp = fp;
  l->n = 0;
}

/* k bytes into buf (n of cap used): when they do not fit, what there is goes to fp first, and
 * what cannot fit at all goes straight to fp. */
static inline void csv_buf_put(FILE *fp, char *buf, size_t cap, size_t *n, const char *s,
                               size_t k) {
  if (*n + k > cap) {
    if (*n) fwrite(buf, 1, *n, fp);
    *n = 0;
    if (k > cap) {
      fwrite(s, 1, k, fp);
      return;
    }
  }
  memcpy(buf + *n, s, k);
  *n += k;
}

/* (a long tensor name: what there is is written, then it goes on) */
static inline void csv_line_put(csv_line *l, const char *s, size_t k) {
  csv_buf_put(l->fp, l->buf, sizeof l->buf, &l->n, s, k);
}

static inline void csv_line_str(csv_line *l, const char *s) { csv_line_put(l, s, strlen(s)); }
static inline void csv_line_chr(csv_line *l, char c) { csv_line_put(l, &c, 1); }

static inline void csv_line_i64(csv_line *l, long long v) {
  char b[24], *q = b + sizeof b;
  unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
  do {
    *--q = (char)('0' + u % 10);
    u /= 10;
  } while (u);
  if (v < 0) *--q = '-';
  csv_line_put(l, q, (size_t)(b + sizeof b - q));
}

typedef struct {
  uint64_t bits;
  int used;
  uint8_t len;
  char s[FP8_NUM_TEXT_MAX];
} csv_num_memo;
/* each thread its own (above); csv.c */
extern _Thread_local csv_num_memo csv_memo[512];

static inline void csv_line_num(csv_line *l, double v) {
  uint64_t bits;
  memcpy(&bits, &v, sizeof bits);
  csv_num_memo *m = &csv_memo[(bits ^ (bits >> 29) ^ (bits >> 47)) & 511];
  if (!m->used || m->bits != bits) {
    m->len = (uint8_t)fp8_num_text(v, m->s);
    m->bits = bits;
    m->used = 1;
  }
  csv_line_put(l, m->s, m->len);
}

static inline void csv_line_flush(csv_line *l) {
  if (l->n) fwrite(l->buf, 1, l->n, l->fp);
  l->n = 0;
}

/* The text of v as csv_line_num writes it (fp8_num_text), into s (FP8_NUM_TEXT_MAX); its
 * length. */
static inline size_t csv_num_into(double v, char *s) {
  csv_line l;
  csv_line_init(&l, NULL);
  csv_line_num(&l, v);
  memcpy(s, l.buf, l.n);
  return l.n;
}

/* history_len, margin, amax_compute and their commas: a delayed configuration's values, empty
 * for other kinds (steps.csv, summary.csv and gemm.csv) */
static inline void csv_put_delayed_cols(csv_line *l, const fp8_config *c) {
  if (c->kind == FP8_KIND_DELAYED) {
    csv_line_i64(l, c->history_len);
    csv_line_chr(l, ',');
    csv_line_i64(l, c->margin);
    csv_line_chr(l, ',');
    csv_line_str(l, fp8_amax_compute_name(c->amax_compute));
    csv_line_chr(l, ',');
  } else {
    csv_line_str(l, ",,,");
  }
}

/* recipe, kind, format and the three delayed-scaling columns (empty for other kinds): the
 * configuration's columns of steps.csv and summary.csv */
static inline void csv_put_config_cols(csv_line *l, const fp8_config *c, fp8_format f) {
  csv_line_str(l, c->label);
  csv_line_chr(l, ',');
  csv_line_str(l, fp8_recipe_kind_name(c->kind));
  csv_line_chr(l, ',');
  csv_line_str(l, fp8_kind_format_name(c->kind, f));
  csv_line_chr(l, ',');
  csv_put_delayed_cols(l, c);
}

/* tensor, role, step: the first columns of steps.csv and stream.csv */
static inline void csv_put_row_key(csv_line *l, const char *tensor, fp8_role role,
                                   int64_t step) {
  csv_line_str(l, tensor);
  csv_line_chr(l, ',');
  csv_line_str(l, fp8_role_name(role));
  csv_line_chr(l, ',');
  csv_line_i64(l, step);
  csv_line_chr(l, ',');
}

/* n numbers, each followed by a comma */
static inline void csv_put_nums(csv_line *l, const double *v, int n) {
  for (int k = 0; k < n; k++) {
    csv_line_num(l, v[k]);
    csv_line_chr(l, ',');
  }
}

/* n, nonfinite, zeros, overflow, underflow, subnormal: the counts of a steps.csv row */
static inline void csv_put_counts(csv_line *l, const fp8_stats *st) {
  const int64_t v[6] = {st->n, st->nonfinite, st->zeros, st->overflow, st->underflow,
                        st->subnormal};
  for (int k = 0; k < 6; k++) {
    csv_line_i64(l, v[k]);
    csv_line_chr(l, ',');
  }
}

/* ------------------------------------------------------------------ fields (csv.c) */

/* Digits only (a leading '-' when allow_neg) within int64: strtoll's value for those. 1 on
 * success. */
int csv_parse_i64(const char *s, int allow_neg, int64_t *out);
/* A "%.9g"-style decimal or inf, -inf, nan (no hex, no spaces). 1 on success. */
int csv_parse_f64(const char *s, double *out);
/* A CSV line of fp8lab's (no quoting: no field holds a comma) split in place at every comma
 * into f[0..max): the number of fields, max + 1 when there are more (f[0..max) then hold the
 * first max, each cut at its comma). The one splitter of the readers here. */
int csv_split(char *line, char **f, int max);

/* ------------------------------------------------------------------ a table read whole (csv.c) */

/* One data line's fields (the header's columns of them, split; those past them NULL) into the
 * row at row. */
typedef int (*csv_row_parser)(const char *path, int64_t line, char **f, void *row, char *err,
                              size_t errlen);

/* The most columns of a file csv_load_table reads (the size of its field array): gemm.csv has
 * 19, experts.csv and histograms.csv fewer. Each loader checks its schema at compile time. */
enum { CSV_MAX_COLS = 32 };

/* A result file read whole into *text and parsed into rows, an array of *n rows of row_size
 * bytes each whose address goes into the table's row pointer at rows_field (&table->rows):
 * the header must be one of the schema's versions, every later line non-empty with that many
 * fields, each parsed by parse (fields point into *text). On failure the rows and *text are
 * freed (both NULL, *n 0). Messages "<path>:<line>: <what>". */
int csv_load_table(const char *path, const fp8_schema *s, size_t row_size, csv_row_parser parse,
                   char **text, void *rows_field, size_t *n, char *err, size_t errlen);
/* "<path>:<line>: column <name>: expected <what>, found '<field>'" (FP8_EFORMAT) */
int csv_bad_field(const char *path, int64_t line, const fp8_schema *s, int col,
                  const char *field, const char *what, char *err, size_t errlen);
/* A tensor (or layer) column: the name rules (names of a multi-rank trace carry their
 * rank_<r>/). FP8_OK or FP8_EFORMAT. */
int csv_check_tensor_field(const char *path, int64_t line, const fp8_schema *s, int col,
                           const char *name, char *err, size_t errlen);

#endif /* FP8LAB_RESULTS_CSV_INTERNAL_H */
