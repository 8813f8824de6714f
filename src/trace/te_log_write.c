/* te_log_write.c: the writing half of `fp8lab import-te` (te_log_internal.h): a checked
 * import's rows as each rank's amax.csv, in step then name order, TE's overflows% as
 * te_overflows.csv, and te_log.json listing every file written, all into a fresh folder
 * beside the target that is moved in at the end (te_log_dir.c). */
#include "te_log_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "fp8.h"
#include "outfile.h"
#include "util.h"

static int cmp_rank_iter_name(const void *a, const void *b) {
  const te_row *x = a, *y = b;
  if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
  if (x->iter != y->iter) return x->iter < y->iter ? -1 : 1;
  return (x->ord > y->ord) - (x->ord < y->ord);
}

/* A tensor's name and index, for ordering tensors by name. */
typedef struct {
  const char *name;
  uint32_t id;
} name_id;

static int cmp_name_id(const void *a, const void *b) {
  return strcmp(((const name_id *)a)->name, ((const name_id *)b)->name);
}

/* The tensors' indices in name order (new array; NULL when out of memory). */
static name_id *by_name(const te_import *im) {
  name_id *v = malloc((im->ntens + 1) * sizeof *v);
  if (!v) return NULL;
  for (size_t k = 0; k < im->ntens; k++) v[k] = (name_id){im->tens[k].name, (uint32_t)k};
  qsort(v, im->ntens, sizeof *v, cmp_name_id);
  return v;
}

/* One rank's amax.csv: step,tensor,amax, by step and name, the 0.0000 rows left out. */
static int write_amax(te_import *im, const char *dir, uint32_t rank, size_t *k, char *err,
                      size_t errlen) {
  fp8_outfile of;
  int rc = fp8_outfile_open(&of, dir, "amax.csv", err, errlen);
  if (rc) return rc;
  fputs(im->scale_rows ? "step,tensor,amax,te_scale\n" : "step,tensor,amax\n", of.fp);
  for (; *k < im->nrows && im->rows[*k].rank == rank; (*k)++) {
    const te_row *r = &im->rows[*k];
    if (r->v == 0.0f) continue;
    fprintf(of.fp, "%" PRId64 ",%s,", r->iter, im->tens[r->tensor].name);
    fp8_csv_put_num(of.fp, (double)r->v);
    if (im->scale_rows) {
      fputc(',', of.fp);
      if (r->te_scale > 0.0f) fp8_csv_put_num(of.fp, (double)r->te_scale);
    }
    fputc('\n', of.fp);
    im->sum.amax_rows++;
  }
  return fp8_outfile_commit(&of, err, errlen);
}

/* te_overflows.csv: TE's logged overflows% per (rank, iteration, tensor), the tensor named as
 * the trace names it (rank_<r>/ before it in a multi-rank trace), sorted; a later iteration's
 * repeat of a (rank, tensor, iteration) keeps the first. Only when the log has overflows%. */
static const uint32_t *g_order; /* cmp_ovf's tensor order (the writing is single-threaded) */

static int cmp_ovf(const void *a, const void *b) {
  const te_sinv *x = a, *y = b;
  if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
  if (x->iter != y->iter) return x->iter < y->iter ? -1 : 1;
  uint32_t i = g_order[x->tensor], j = g_order[y->tensor];
  return (i > j) - (i < j);
}

static int write_overflows(te_import *im, const char *dir, const uint32_t *order, char *err,
                           size_t errlen) {
  if (!im->novf) return FP8_OK;
  g_order = order;
  qsort(im->ovf, im->novf, sizeof *im->ovf, cmp_ovf);
  fp8_outfile of;
  int rc = fp8_outfile_open(&of, dir, "te_overflows.csv", err, errlen);
  if (rc) return rc;
  fputs("step,tensor,overflows_pct\n", of.fp);
  for (size_t k = 0; k < im->novf; k++) {
    const te_sinv *o = &im->ovf[k];
    if (k && cmp_ovf(o, &im->ovf[k - 1]) == 0) continue;
    fprintf(of.fp, "%" PRId64 ",", o->iter);
    if (im->nfiles > 1) fprintf(of.fp, "rank_%u/", o->rank);
    fprintf(of.fp, "%s,", im->tens[o->tensor].name);
    fprintf(of.fp, "%.4f\n", (double)o->v); /* the log's four decimals, as TE printed them */
  }
  return fp8_outfile_commit(&of, err, errlen);
}

/* A tensor's schema-2 keys of te_log.json into its entry e: its cur_amax interval (gcd of
 * the iterations logged, every rank; 0 for one), first and last iteration (left out for a
 * tensor whose cur_amax was not logged), and "statistics", each logged statistic's interval
 * by the same rule (two TE names of one trace tensor merged). 0, or -1 out of memory. */
static int tensor_intervals(const te_import *im, const te_tensor *t, json_t *e) {
  int bad = json_object_set_new(e, FP8_TE_LOG_INTERVAL,
                                json_integer(t->has_iter ? te_interval_of(t->igcd, t->first,
                                                                          t->last) : 0)) != 0;
  if (t->has_iter) {
    bad |= json_object_set_new(e, "first_iteration", json_integer(t->first)) != 0;
    bad |= json_object_set_new(e, "last_iteration", json_integer(t->last)) != 0;
  }
  json_t *st = json_object();
  bad |= !st;
  for (size_t k = t->stat_lo; !bad && k < t->stat_hi;) {
    const te_stat *p = &im->pstat[k];
    const char *name = p->key + p->stat_off;
    int64_t g = 0, f = p->first, l = p->last;
    for (; k < t->stat_hi && strcmp(im->pstat[k].key + im->pstat[k].stat_off, name) == 0; k++) {
      const te_stat *q = &im->pstat[k];
      g = te_gcd(g, q->gcd);
      if (q->first < f) f = q->first;
      if (q->last > l) l = q->last;
    }
    bad |= json_object_set_new(st, name, json_integer(te_interval_of(g, f, l))) != 0;
  }
  bad |= json_object_set_new(e, "statistics", st) != 0;
  return bad ? -1 : 0;
}

static int write_json(te_import *im, const char *logdir, const char *dir, json_t *written,
                      char *err, size_t errlen) {
  json_t *o = json_object(), *files = json_array(), *tens = json_array(), *other = json_object();
  int bad = !o || !files || !tens || !other;
  for (size_t k = 0; !bad && k < im->nfiles; k++) {
    const char *slash = strrchr(im->files[k].path, '/');
    bad |= json_array_append_new(files, json_pack("{s:i, s:s}", "rank", (json_int_t)k, "file",
                                                  slash ? slash + 1 : im->files[k].path)) != 0;
  }
  name_id *ord = bad ? NULL : by_name(im);
  bad |= !ord;
  for (size_t k = 0; !bad && k < im->ntens; k++) {
    const te_tensor *t = &im->tens[ord[k].id];
    json_t *e = json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:i}", FP8_TE_LOG_TENSOR, t->name,
                          "te_layer", t->layer, "te_tensor", TE_TENSORS[t->te_tensor],
                          "role", TE_ROLES[t->te_tensor], "logged", (json_int_t)t->logged,
                          FP8_TE_LOG_ZERO_VALUES, (json_int_t)t->zero, FP8_TE_LOG_COARSE_VALUES,
                          (json_int_t)t->coarse);
    bad |= !e || tensor_intervals(im, t, e) != 0;
    bad |= json_array_append_new(tens, e) != 0;
  }
  free(ord);
  for (size_t k = 0; !bad && k < im->nstat; k++)
    bad |= json_object_set_new(other, im->sname[k], json_integer((json_int_t)im->scount[k])) != 0;
  if (!bad) {
    bad |= json_object_set_new(o, "source", json_string("TransformerEngine debug statistics "
                                                        "logs (nvdlfw_inspect, cur_amax)")) != 0;
    json_t *ld = json_string(logdir); /* NULL for a path that is not UTF-8: shown escaped */
    char shown[FP8_ESC_LEN];
    if (!ld) ld = json_string(fp8_esc(logdir, shown, sizeof shown));
    bad |= json_object_set_new(o, "log_dir", ld) != 0;
    bad |= json_object_set_new(o, "files", files) != 0;
    files = NULL;
    bad |= json_object_set_new(o, FP8_TE_LOG_INTERVAL, json_integer(im->sum.interval)) != 0;
    bad |= json_object_set_new(o, FP8_TE_LOG_INTERVALS_DIFFER,
                               json_boolean(im->intervals_differ)) != 0;
    bad |= json_object_set_new(o, "first_iteration", json_integer(im->sum.first)) != 0;
    bad |= json_object_set_new(o, "last_iteration", json_integer(im->sum.last)) != 0;
    bad |= json_object_set_new(o, "ranks_identical", json_boolean(im->sum.ranks_identical)) != 0;
    bad |= json_object_set_new(o, "amax_rows", json_integer((json_int_t)im->sum.amax_rows)) != 0;
    bad |= json_object_set_new(o, FP8_TE_LOG_ZERO_VALUES, json_integer((json_int_t)im->sum.zero_values)) != 0;
    bad |= json_object_set_new(o, FP8_TE_LOG_COARSE_VALUES,
                               json_integer((json_int_t)im->sum.coarse_values)) != 0;
    bad |= json_object_set_new(o, "te_scale_rows", json_integer((json_int_t)im->scale_rows)) != 0;
    bad |= json_object_set_new(o, "te_scale_unusable",
                               json_integer((json_int_t)im->scale_lost)) != 0;
    bad |= json_object_set_new(o, "te_overflow_rows", json_integer((json_int_t)im->novf)) != 0;
    bad |= json_object_set_new(o, "wgrad_cur_amax_left_out",
                               json_integer((json_int_t)im->left_wgrad)) != 0;
    json_t *na = json_array(); /* the ranks whose log gave no amax row (te_log.c, note_ranks) */
    for (size_t k = 0; na && k < im->nnoamax; k++)
      bad |= json_array_append_new(na, json_integer((json_int_t)im->noamax[k])) != 0;
    bad |= json_object_set_new(o, "ranks_without_amax", na) != 0;
    bad |= json_object_set_new(o, "cut_lines_dropped",
                               json_integer((json_int_t)im->sum.cut_lines_dropped)) != 0;
    bad |= json_object_set_new(o, FP8_TE_LOG_TENSORS, tens) != 0;
    tens = NULL;
    bad |= json_object_set_new(o, "other_statistics", other) != 0;
    other = NULL;
    /* every file of the import, te_log.json last: what a later --force may replace */
    bad |= json_array_append_new(written, json_string(FP8_TE_LOG_FILE)) != 0;
    bad |= json_object_set(o, "written", written) != 0;
  }
  char *text = bad ? NULL : json_dumps(o, JSON_INDENT(2) | JSON_ENSURE_ASCII);
  json_decref(o);
  json_decref(files);
  json_decref(tens);
  json_decref(other);
  if (!text) return FP8_ENOMEM;
  int rc = fp8_outfile_write_text(dir, FP8_TE_LOG_FILE, text, err, errlen);
  free(text);
  return rc;
}

/* Appends the trace-relative path of a file just written to the import's list. */
static int add_written(json_t *written, const char *rel) {
  return json_array_append_new(written, json_string(rel)) != 0 ? FP8_ENOMEM : FP8_OK;
}

int te_write_trace(te_import *im, const char *logdir, const char *tracedir, int force, char *err,
                   size_t errlen) {
  te_dir td;
  int rc = te_dir_open(&td, tracedir, force, err, errlen);
  if (rc) return rc;
  const char *out = td.tmp; /* the import goes here, then is moved in */
  json_t *written = json_array();
  name_id *byname = by_name(im);
  uint32_t *order = byname ? malloc((im->ntens + 1) * sizeof *order) : NULL;
  if (!order || !written) rc = FP8_ENOMEM;
  if (rc == FP8_OK) {
    for (size_t k = 0; k < im->ntens; k++) order[byname[k].id] = (uint32_t)k;
    for (size_t k = 0; k < im->nrows; k++) im->rows[k].ord = order[im->rows[k].tensor];
    qsort(im->rows, im->nrows, sizeof *im->rows, cmp_rank_iter_name);
    size_t k = 0;
    for (uint32_t r = 0; rc == FP8_OK && r < im->nfiles; r++) {
      char sub[64];
      snprintf(sub, sizeof sub, "rank_%u", r);
      size_t n = strlen(out) + sizeof sub + 2;
      char *d = malloc(n);
      if (!d) {
        rc = FP8_ENOMEM;
        break;
      }
      snprintf(d, n, "%s/%s", out, sub);
      if (im->nfiles == 1) snprintf(d, n, "%s", out);
      else rc = fp8_mkdir_p(d, err, errlen);
      if (rc == FP8_OK) rc = write_amax(im, d, r, &k, err, errlen);
      free(d);
      if (rc == FP8_OK) {
        strcat(sub, "/amax.csv");
        rc = add_written(written, im->nfiles == 1 ? "amax.csv" : sub);
      }
    }
  }
  if (rc == FP8_OK) rc = write_overflows(im, out, order, err, errlen);
  if (rc == FP8_OK && im->novf) rc = add_written(written, "te_overflows.csv");
  free(order);
  free(byname);
  if (rc == FP8_OK) rc = write_json(im, logdir, out, written, err, errlen);
  json_decref(written);
  if (rc == FP8_OK) rc = te_dir_commit(&td, err, errlen);
  else if (rc == FP8_EWRITE || rc == FP8_EIO) { /* the temporary folder's name is not the user's */
    size_t n = strlen(err);
    snprintf(err + n, errlen > n ? errlen - n : 0, " (%s: unchanged)", tracedir);
  }
  te_dir_close(&td);
  return rc;
}
