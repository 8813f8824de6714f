/* inspect.c: `fp8lab inspect TRACE`: a trace's tensors with their role, dtype, shape,
 * snapshot steps, non-zero amax range, and the steps at which their amax is 0, telling a
 * tensor that never ran (no snapshot, every amax.csv row 0: a hook on a module the model never
 * calls) from one skipped at some steps (docs/semantics.md, "Tensors that never ran"); with a
 * tokens.csv, one line on its expert GEMMs (docs/semantics.md, "Routed tokens"). */
#include "cli.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8.h"
#include "trace.h"
#include "util.h" /* fp8_grow */

typedef struct {
  char *name;
  fp8_dtype dtype;
  int ndim;
  int64_t shape[FP8_MAX_DIMS];
  int64_t full_rows; /* the whole's rows when the snapshot holds a subset (capture's rows), else 0 */
  long long snapshots;
  int64_t first, last;
  float amin, amax; /* over snapshots and amax.csv */
  /* the steps at which the trace records the tensor (its snapshot steps and amax.csv steps,
   * a step counted once) and those of them whose amax, as the replay takes it (the
   * snapshot's when there is one, else amax.csv's), is 0: the module did not run there */
  long long steps, zero_steps;
  int64_t snap_step; /* the last snapshot step holding it (-1: none yet) */
} inspect_row;

static int cmp_row(const void *a, const void *b) {
  return strcmp(((const inspect_row *)a)->name, ((const inspect_row *)b)->name);
}

/* The row of a name (new when the name is): the set maps the rows' own copies of the names to
 * their indices (a name looked up per amax.csv row: millions of them). */
static inspect_row *row_get(inspect_row **rows, size_t *n, size_t *cap, fp8_strset *set,
                            const char *name) {
  size_t len = strlen(name), k = fp8_strset_get(set, name, len);
  if (k != SIZE_MAX) return &(*rows)[k];
  inspect_row *nr = fp8_grow(*rows, *n, cap, sizeof *nr, 64);
  if (!nr) return NULL;
  *rows = nr;
  inspect_row *r = &(*rows)[*n];
  memset(r, 0, sizeof *r);
  int added;
  if (!(r->name = strdup(name)) || fp8_strset_put(set, r->name, len, &added) != *n) {
    free(r->name);
    return NULL;
  }
  (*n)++;
  r->amin = INFINITY;
  r->amax = -INFINITY;
  r->first = -1;
  r->snap_step = -1;
  return r;
}

/* One amax.csv row: a step of the tensor unless its snapshot of the same step counted it
 * already (the data wins there, as in the replay); its amax joins the range either way. */
static int inspect_amax_row(inspect_row **rows, size_t *n, size_t *cap, fp8_strset *set,
                            size_t *row_of, const fp8_trace *tr, size_t i) {
  size_t t = (size_t)tr->amax[i].tensor; /* row_of[t]: the row of amax name t, once known */
  inspect_row *r = row_of[t] != SIZE_MAX ? &(*rows)[row_of[t]]
                                         : row_get(rows, n, cap, set, tr->amax_names[t]);
  if (!r) return FP8_ENOMEM;
  row_of[t] = (size_t)(r - *rows);
  float a = tr->amax[i].amax;
  if (r->snap_step != tr->amax[i].step) {
    r->steps++;
    r->zero_steps += a == 0.0f;
  }
  if (a == 0.0f) return FP8_OK;
  if (a < r->amin) r->amin = a;
  if (a > r->amax) r->amax = a;
  return FP8_OK;
}

/* What the last column says about the steps with amax 0 ("" when there is none). A tensor
 * with no snapshot whose every amax.csv row is 0 never ran (a hook on a module that the
 * model never calls); one with zeros at some steps was skipped there. */
static void inspect_zero_note(const inspect_row *r, char *buf, size_t n) {
  if (r->snapshots == 0 && r->zero_steps == r->steps)
    snprintf(buf, n, "never ran (amax 0 on all %lld step%s)", r->steps, r->steps == 1 ? "" : "s");
  else if (r->zero_steps)
    snprintf(buf, n, "(0 on %lld of %lld steps: skipped there)", r->zero_steps, r->steps);
  else
    buf[0] = '\0';
}

/* One row per tensor of the trace (unsorted): its snapshots, and its steps and zero steps over
 * the snapshots and amax.csv rows taken in step order (both are sorted), so that a snapshot
 * and an amax.csv row of the same step count as one step. */
static int inspect_collect(const fp8_trace *tr, inspect_row **rows_out, size_t *n_out, char *err,
                           size_t errlen) {
  inspect_row *rows = NULL;
  size_t n = 0, cap = 0;
  fp8_strset set = {0};
  size_t *row_of = malloc((tr->namax_names + 1) * sizeof *row_of);
  int rc = row_of ? FP8_OK : FP8_ENOMEM;
  for (size_t k = 0; row_of && k < tr->namax_names; k++) row_of[k] = SIZE_MAX;
  float *buf = NULL;
  size_t bufcap = 0;
  size_t arow = 0;
  for (size_t i = 0; i < tr->nsteps && rc == FP8_OK; i++) {
    for (; arow < tr->namax && tr->amax[arow].step < tr->steps[i] && rc == FP8_OK; arow++)
      rc = inspect_amax_row(&rows, &n, &cap, &set, row_of, tr, arow);
    if (rc) break;
    fp8_step s;
    rc = fp8_trace_load_step(tr, i, &s, err, errlen);
    if (rc) break;
    for (size_t k = 0; k < s.ntensors; k++) {
      const fp8_tensor_view *v = &s.tensors[k];
      inspect_row *r = row_get(&rows, &n, &cap, &set, v->name);
      if (!r) { rc = FP8_ENOMEM; break; }
      if (r->snapshots == 0) {
        r->dtype = v->dtype;
        r->ndim = v->ndim;
        memcpy(r->shape, v->shape, sizeof r->shape);
        r->full_rows = v->full_rows;
        r->first = tr->steps[i];
      }
      r->snapshots++;
      r->last = tr->steps[i];
      r->snap_step = tr->steps[i];
      if ((size_t)v->numel > bufcap) {
        free(buf);
        bufcap = (size_t)v->numel;
        buf = malloc(bufcap * sizeof *buf);
        if (!buf) { rc = FP8_ENOMEM; break; }
      }
      fp8_dtype_to_f32(v->dtype, v->data, (size_t)v->numel, buf);
      float a = fp8_amax_f32(buf, (size_t)v->numel);
      r->steps++;
      if (a == 0.0f) { r->zero_steps++; continue; } /* all zeros: no non-zero range */
      if (a < r->amin) r->amin = a;
      if (a > r->amax) r->amax = a;
    }
    fp8_step_free(&s);
    for (; arow < tr->namax && tr->amax[arow].step == tr->steps[i] && rc == FP8_OK; arow++)
      rc = inspect_amax_row(&rows, &n, &cap, &set, row_of, tr, arow);
  }
  for (; arow < tr->namax && rc == FP8_OK; arow++) rc = inspect_amax_row(&rows, &n, &cap, &set, row_of, tr, arow);
  free(buf);
  fp8_strset_free(&set);
  free(row_of);
  *rows_out = rows;
  *n_out = n;
  if (rc == FP8_ENOMEM) snprintf(err, errlen, "out of memory");
  return rc;
}

static int cmp_cstr(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A trace with tokens.csv (any rank): one line, its expert GEMMs (by name within the rank:
 * replicas on several ranks count once, their tokens summed per step), the experts per group
 * and the share of expert-steps (a GEMM's tokens.csv steps) with zero tokens: the steps an
 * expert did not run. */
static int inspect_tokens_line(const fp8_trace *tr, char *err, size_t errlen) {
  if (!fp8_trace_has_tokens(tr)) return FP8_OK;
  fp8_tokens_table m;
  int rc = fp8_trace_tokens_merge(tr, NULL, NULL, &m, err, errlen);
  if (rc) return rc;
  char **groups = malloc((m.ngemms + 1) * sizeof *groups);
  size_t ng = 0, lo = 0, hi = 0, zero = 0;
  for (size_t g = 0; groups && g < m.ngemms; g++) {
    char grp[FP8_NAME_MAX + 1];
    fp8_expert_of(m.gemms[g], NULL, grp, sizeof grp);
    if (!(groups[ng] = strdup(grp))) break;
    ng++;
  }
  if (!groups || ng < m.ngemms) {
    rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  } else {
    qsort(groups, ng, sizeof *groups, cmp_cstr);
    size_t ngroups = 0;
    for (size_t b = 0, e; b < ng; b = e) { /* the experts of each group: the fewest, the most */
      for (e = b + 1; e < ng && strcmp(groups[e], groups[b]) == 0; e++) {}
      if (!ngroups || e - b < lo) lo = e - b;
      if (!ngroups || e - b > hi) hi = e - b;
      ngroups++;
    }
    for (size_t i = 0; i < m.nrows; i++) zero += m.rows[i].tokens == 0;
    printf("tokens.csv: %zu expert GEMM%s in %zu group%s of ", m.ngemms,
           m.ngemms == 1 ? "" : "s", ngroups, ngroups == 1 ? "" : "s");
    if (lo == hi) printf("%zu expert%s", lo, lo == 1 ? "" : "s");
    else printf("%zu to %zu experts", lo, hi);
    printf(", %zu of %zu expert-steps with zero tokens (%.1f%%)\n", zero, m.nrows,
           m.nrows ? 100.0 * (double)zero / (double)m.nrows : 0.0);
  }
  for (size_t g = 0; groups && g < ng; g++) free(groups[g]);
  free(groups);
  fp8_tokens_free(&m);
  return rc;
}

/* The micro-batches of the trace (issue 42 point 6): amax.csv's micro column, per step (its
 * rows sorted by step, micro, tensor). One line when some step has more than one; nothing for a
 * trace of one micro-batch per step (its output as before). */
static void inspect_micro_line(const fp8_trace *tr) {
  long long steps = 0, multi = 0, casts = 0, lo = 0, hi = 0, first = -1, last = -1;
  for (size_t i = 0; i < tr->namax;) {
    int64_t step = tr->amax[i].step;
    long long m = 0;
    for (int32_t prev = -1; i < tr->namax && tr->amax[i].step == step; i++)
      if (tr->amax[i].micro != prev || m == 0) m++, prev = tr->amax[i].micro;
    steps++;
    casts += m;
    if (steps == 1 || m < lo) lo = m;
    if (m > hi) hi = m;
    if (m > 1) {
      multi++;
      if (first < 0) first = step;
      last = step;
    }
  }
  if (!multi) return;
  if (multi == steps && lo == hi)
    printf("micro-batches (amax.csv's micro): %lld per step at each of its %lld steps, %lld "
           "micro-batches in all; the delayed history advances per micro-batch\n", hi, steps,
           casts);
  else
    printf("micro-batches (amax.csv's micro): %lld of its %lld steps hold more than one (steps "
           "%lld..%lld), %lld to %lld per step, %lld micro-batches in all; the delayed history "
           "advances per micro-batch\n", multi, steps, first, last, lo, hi, casts);
}

/* The table: a first line with the trace's counts, then one line per tensor (sorted). */
static int inspect_print(const char *dir, const fp8_trace *tr, inspect_row *rows, size_t n,
                         char *err, size_t errlen) {
  size_t never = 0;
  for (size_t i = 0; i < n; i++) never += rows[i].snapshots == 0 && rows[i].zero_steps == rows[i].steps;
  qsort(rows, n, sizeof *rows, cmp_row);
  printf("trace %s: %zu snapshot steps", dir, tr->nsteps);
  if (tr->nsteps) printf(" (%lld..%lld)", (long long)tr->steps[0], (long long)tr->steps[tr->nsteps - 1]);
  printf(", %zu amax.csv rows", tr->namax);
  if (tr->namax) printf(" (steps %lld..%lld)", (long long)tr->amax[0].step, (long long)tr->amax[tr->namax - 1].step);
  printf(", %zu tensors", n);
  if (never) printf(" (%zu never ran)", never);
  printf("\n");
  inspect_micro_line(tr);
  int rc = inspect_tokens_line(tr, err, errlen);
  if (rc) return rc;
  /* each row's cells first, then the columns as wide as their widest cell (at least the
   * header's width of before), so that long names (Llama's, 40+ characters) stay aligned */
  typedef struct {
    char shape[128], steps[64], range[64], note[96];
    const char *role;
  } cells;
  cells *cl = calloc(n ? n : 1, sizeof *cl);
  if (!cl) return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  int wname = 40, wshape = 18, wsteps = 13;
  for (size_t i = 0; i < n; i++) {
    inspect_row *r = &rows[i];
    cells *c = &cl[i];
    snprintf(c->shape, sizeof c->shape, "-");
    snprintf(c->steps, sizeof c->steps, "-");
    snprintf(c->range, sizeof c->range, "-");
    if (r->snapshots) {
      int o = snprintf(c->shape, sizeof c->shape, "[");
      for (int d = 0; d < r->ndim && o < (int)sizeof c->shape - 24; d++)
        o += snprintf(c->shape + o, sizeof c->shape - (size_t)o, "%s%lld", d ? "," : "",
                      (long long)r->shape[d]);
      o += snprintf(c->shape + o, sizeof c->shape - (size_t)o, "]");
      if (r->full_rows > 0 && o < (int)sizeof c->shape - 40) /* a subset of the rows */
        snprintf(c->shape + o, sizeof c->shape - (size_t)o, " of %lld rows",
                 (long long)r->full_rows);
      snprintf(c->steps, sizeof c->steps, "%lld..%lld", (long long)r->first, (long long)r->last);
    }
    if (r->amax >= r->amin) snprintf(c->range, sizeof c->range, "%.4g .. %.4g", r->amin, r->amax);
    size_t rank;
    const char *within = tr->nranks > 0 ? fp8_trace_split_rank(r->name, &rank) : NULL;
    /* as the runner: a multi-rank tensor's role comes from its name within the rank */
    c->role = fp8_role_name(fp8_role_of_tensor(within ? within : r->name));
    inspect_zero_note(r, c->note, sizeof c->note);
    int l = (int)strlen(r->name);
    if (l > wname) wname = l;
    if ((l = (int)strlen(c->shape)) > wshape) wshape = l;
    if ((l = (int)strlen(c->steps)) > wsteps) wsteps = l;
  }
  printf("%-*s %-12s %-5s %-*s %9s %-*s %-31s\n", wname, "tensor", "role", "dtype", wshape,
         "shape", "snapshots", wsteps, "steps", "amax range (non-zero)");
  for (size_t i = 0; i < n; i++) {
    const inspect_row *r = &rows[i];
    const cells *c = &cl[i];
    printf("%-*s %-12s %-5s %-*s %9lld %-*s %s%s%s\n", wname, r->name,
           *c->role ? c->role : "(unknown)", r->snapshots ? fp8_dtype_name(r->dtype) : "-",
           wshape, c->shape, r->snapshots, wsteps, c->steps, c->range, *c->note ? " " : "",
           c->note);
  }
  free(cl);
  return FP8_OK;
}

int fp8lab_inspect(const char *dir, char *err, size_t errlen) {
  fp8_trace tr;
  int rc = fp8_trace_open(dir, &tr, err, errlen);
  if (rc) return rc;
  inspect_row *rows = NULL;
  size_t n = 0;
  rc = inspect_collect(&tr, &rows, &n, err, errlen);
  if (rc == FP8_OK) rc = inspect_print(dir, &tr, rows, n, err, errlen);
  for (size_t i = 0; i < n; i++) free(rows[i].name);
  free(rows);
  fp8_trace_close(&tr);
  return rc;
}
