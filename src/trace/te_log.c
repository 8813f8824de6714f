/* te_log.c: `fp8lab import-te`, TransformerEngine's debug statistics logs into a trace
 * (te_log.h; the format: nvidia-dlfw-inspect's nvdlfw_inspect/logging.py, TE's
 * transformer_engine/debug/features/utils/stats_buffer.py; docs/semantics.md).
 *
 * Why a converter and not a trace reader of the log folder: the logs are text with every
 * statistic TE was asked for (often ten per tensor), rewritten by TE at each run (overwrite is
 * its default); one pass turns their cur_amax lines into amax.csv, which every part of fp8lab
 * (inspect, run, MPI, timeline) already reads and a user can open, and te_log.json keeps what
 * the conversion knew (the files, the logging interval, the values the four decimals lost). */
#include "te_log_internal.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "fp8.h"
#include "outfile.h" /* fp8_fopen_regular */
#include "trace.h"
#include "util.h"

#define STATS_DIR "nvdlfw_inspect_statistics_logs"
const char *fp8_te_role_of(const char *t, size_t len) {
  for (size_t k = 0; k < TE_NTENSORS; k++)
    if (strlen(TE_TENSORS[k]) == len && memcmp(t, TE_TENSORS[k], len) == 0) return TE_ROLES[k];
  return NULL;
}

/* nvdlfw_inspect[_<YYYYmmdd>_<HHMMSS>]_globalrank-<R>.log: R, or -1 for another name. */
static long log_file_rank(const char *n) {
  const char *p = "nvdlfw_inspect";
  if (strncmp(n, p, strlen(p)) != 0) return -1;
  n += strlen(p);
  if (n[0] == '_' && strncmp(n, "_globalrank-", 12) != 0) { /* the optional timestamp */
    n++;
    for (int k = 0; k < 15; k++, n++)
      if (k == 8 ? *n != '_' : (*n < '0' || *n > '9')) return -1;
  }
  if (strncmp(n, "_globalrank-", 12) != 0) return -1;
  n += 12;
  if (*n < '0' || *n > '9') return -1;
  char *end;
  errno = 0;
  long r = strtol(n, &end, 10);
  if (errno || r < 0 || r > 1000000 || strcmp(end, ".log") != 0) return -1;
  return r;
}

static int cmp_file(const void *a, const void *b) {
  const te_file *x = a, *y = b;
  return (x->rank > y->rank) - (x->rank < y->rank);
}

/* The statistics folder's log files, sorted by rank: 0 .. R-1, one each. */
static int find_files(te_import *im, const char *logdir, char *err, size_t errlen) {
  char *dir = NULL;
  struct stat st;
  size_t n = strlen(logdir) + sizeof STATS_DIR + 2;
  if (!(dir = malloc(n))) return FP8_ENOMEM;
  snprintf(dir, n, "%s/%s", logdir, STATS_DIR);
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) snprintf(dir, n, "%s", logdir);
  DIR *d = opendir(dir);
  if (!d) {
    int rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s: cannot read directory: %s", dir,
                        strerror(errno));
    free(dir);
    return rc;
  }
  int rc = FP8_OK;
  struct dirent *e;
  while (rc == FP8_OK && (e = readdir(d))) {
    long r = log_file_rank(e->d_name);
    if (r < 0) continue;
    te_file *nf = realloc(im->files, (im->nfiles + 1) * sizeof *nf);
    size_t pl = strlen(dir) + strlen(e->d_name) + 2;
    char *path = nf ? malloc(pl) : NULL;
    if (nf) im->files = nf;
    if (!path) {
      rc = FP8_ENOMEM;
      break;
    }
    snprintf(path, pl, "%s/%s", dir, e->d_name);
    im->files[im->nfiles++] = (te_file){r, path};
  }
  closedir(d);
  if (rc == FP8_OK && im->nfiles == 0)
    rc = fp8_errorf(FP8_EFORMAT, err, errlen,
                    "%s: no TransformerEngine statistics logs "
                    "(nvdlfw_inspect_globalrank-<R>.log, in it or in its " STATS_DIR "/)",
                    dir);
  free(dir);
  if (rc) return rc;
  qsort(im->files, im->nfiles, sizeof *im->files, cmp_file);
  for (size_t k = 0; k < im->nfiles; k++) {
    if (k && im->files[k].rank == im->files[k - 1].rank)
      return fp8_errorf(FP8_EFORMAT, err, errlen,
                        "%s and %s: two logs of global rank %ld (timestamped logs of two "
                        "runs? keep one run's files)",
                        im->files[k - 1].path, im->files[k].path, im->files[k].rank);
    if (im->files[k].rank != (long)k)
      return fp8_errorf(FP8_EFORMAT, err, errlen,
                        "%s: global rank %zu has no log (found ranks up to %ld; expected "
                        "0 .. R-1 without gaps)",
                        im->files[k].path, k, im->files[im->nfiles - 1].rank);
  }
  return FP8_OK;
}

/* Splits name[0..len) as <layer>_<tensor>_<stat> at the last _<tensor>_ of TE's names. */
static int split_name(const char *name, size_t len, size_t *layer_len, size_t *tensor,
                      const char **stat) {
  size_t best = SIZE_MAX, bt = 0;
  for (size_t k = 0; k < TE_NTENSORS; k++) {
    size_t tl = strlen(TE_TENSORS[k]);
    for (size_t i = 1; i + tl + 2 <= len; i++) /* i: the '_' before the tensor */
      if (name[i] == '_' && name[i + tl + 1] == '_' && memcmp(name + i + 1, TE_TENSORS[k], tl) == 0 &&
          (best == SIZE_MAX || i > best)) {
        best = i;
        bt = k;
      }
  }
  if (best == SIZE_MAX || best + strlen(TE_TENSORS[bt]) + 2 >= len) return -1;
  *layer_len = best;
  *tensor = bt;
  *stat = name + best + strlen(TE_TENSORS[bt]) + 2;
  return 0;
}

/* TE's value text, Python's '{:.4f}' of a float: nan, inf, -inf, or -?[0-9]+\.[0-9]{4}; its
 * significant digits in *digits (-1 for the non-finite). 0; -1 not a number; -2 a decimal
 * without exactly four decimals (their count in *decimals); -3 a decimal beyond float32 (TE's
 * statistics are float32: strtof overflows, so TE cannot have printed it). */
static int parse_value(const char *s, double *v, int *digits, int *decimals) {
  if (strcmp(s, "nan") == 0 || strcmp(s, "inf") == 0 || strcmp(s, "-inf") == 0) {
    *v = s[0] == 'n' ? NAN : s[0] == '-' ? -INFINITY : INFINITY;
    *digits = -1;
    return 0;
  }
  const char *p = s + (*s == '-'), *dot = NULL;
  int nd = 0, sig = 0;
  for (; *p; p++) {
    if (*p == '.' && !dot) {
      dot = p;
      continue;
    }
    if (*p < '0' || *p > '9') return -1;
    nd++;
    if (*p != '0' || sig) sig++;
  }
  if (!nd || dot == s + (*s == '-')) return -1; /* Python prints 0.5000, never .5000 */
  *decimals = dot ? (int)(p - dot - 1) : 0;
  if (*decimals != 4) return -2;
  char *end;
  *v = strtod(s, &end);
  *digits = sig;
  if (*end) return -1;
  errno = 0;
  float f = strtof(s, NULL);
  return isinf(f) || errno == ERANGE ? -3 : 0;
}

/* The index of tensor <layer>.<role> in im->tens, added when new; a GroupedLinear's
 * `<name>.gemm_<i>` is expert i of <name>, the expert GEMM `<name>.experts.<i>` (the trace's
 * expert naming; te_log.json keeps TE's layer name). The name is checked only then (trace name
 * rules, and no comma: amax.csv has no quoting), so a line of a known tensor costs one hash
 * lookup. FP8_EFORMAT with why for a name fp8lab cannot take; FP8_ENOMEM. */
static int tensor_of(te_import *im, const char *layer, size_t ll, size_t t, uint32_t *out,
                     char *why, size_t whylen) {
  char name[FP8_NAME_MAX + 64];
  int nl = te_trace_name(layer, ll, t, name, sizeof name);
  if (nl < 0) {
    snprintf(why, whylen, "name too long");
    return FP8_EFORMAT;
  }
  size_t id = fp8_strset_get(&im->tset, name, (size_t)nl);
  if (id != SIZE_MAX) {
    *out = (uint32_t)id;
    return FP8_OK;
  }
  if (fp8_tensor_name_check(name, (size_t)nl, FP8_NAME_MAX, why, whylen) != 0) return FP8_EFORMAT;
  if (memchr(name, ',', (size_t)nl)) {
    snprintf(why, whylen, "name holds a comma (amax.csv cannot)");
    return FP8_EFORMAT;
  }
  te_tensor *nt = fp8_grow(im->tens, im->ntens, &im->captens, sizeof *nt, 64);
  if (!nt) return FP8_ENOMEM;
  im->tens = nt;
  char *own = strdup(name), *lay = own ? strndup(layer, ll) : NULL;
  int added;
  if (!lay || fp8_strset_put(&im->tset, own, (size_t)nl, &added) == SIZE_MAX) {
    free(own);
    free(lay);
    return FP8_ENOMEM;
  }
  im->tens[im->ntens] = (te_tensor){.name = own, .layer = lay, .te_tensor = t};
  *out = (uint32_t)im->ntens++;
  return FP8_OK;
}

/* Counts a statistic other than the amax (te_log.json's other_statistics), by name. A new
 * name is checked like tensor names (printable UTF-8 of a sane length: a JSON key). */
static int count_stat(te_import *im, const te_file *f, size_t line, const char *stat, size_t sl,
                      char *err, size_t errlen) {
  size_t id = fp8_strset_get(&im->sset, stat, sl);
  if (id == SIZE_MAX) {
    char why[FP8_ESC_LEN + 64], shown[FP8_ESC_LEN];
    if (sl > FP8_NAME_MAX || fp8_tensor_name_check(stat, sl, FP8_NAME_MAX, why, sizeof why))
      return fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%zu: statistic %s: %s", f->path, line,
                        fp8_escape(stat, sl, shown, sizeof shown),
                        sl > FP8_NAME_MAX ? "name too long" : why);
    char **nn = fp8_grow(im->sname, im->nstat, &im->capstat, sizeof *nn, 16);
    if (!nn) return FP8_ENOMEM;
    im->sname = nn;
    size_t *nc = realloc(im->scount, im->capstat * sizeof *nc);
    char *own = nc ? strndup(stat, sl) : NULL;
    if (nc) im->scount = nc;
    int added;
    if (!own || fp8_strset_put(&im->sset, own, sl, &added) == SIZE_MAX) {
      free(own);
      return FP8_ENOMEM;
    }
    im->sname[im->nstat] = own;
    im->scount[im->nstat] = 0;
    id = im->nstat++;
  }
  im->scount[id]++;
  return FP8_OK;
}

#define LINE_FORMAT "'<time> - INFO - <layer>_<tensor>_<stat> iteration=<N> value=<V>'"

/* One line of a statistics log (NUL-terminated, newline removed). */
static int parse_line(te_import *im, const te_file *f, size_t line, char *s, char *err,
                      size_t errlen) {
  char shown[FP8_ESC_LEN], why[FP8_ESC_LEN + 64];
  const char *body = strstr(s, " - INFO - ");
  if (body) body += 10;
  else if (strncmp(s, "INFO - ", 7) == 0) body = s + 7;
  else
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%zu: not a statistics line (expected "
                      LINE_FORMAT "): '%s'", f->path, line, fp8_esc(s, shown, sizeof shown));
  /* <name> iteration=<N> value=<V>: the name ends at the first whitespace (TE's names hold
   * none), then exactly one iteration=/value= pair (two writes run together hold two) */
  size_t nlen = strcspn(body, " \t");
  const char *p = body + nlen;
  while (*p == ' ' || *p == '\t') p++;
  size_t nit = 0, nval = 0;
  for (const char *q = p; (q = strstr(q, "iteration=")); q += 10) nit++;
  for (const char *q = p; (q = strstr(q, "value=")); q += 6) nval++;
  if (nit > 1 || nval > 1)
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%zu: more than one iteration=/value= pair "
                      "(TE writes one per line: two writes run together?)", f->path, line);
  if (!nlen || p == body + nlen || strncmp(p, "iteration=", 10) != 0) {
    if (nlen && strstr(p, "iteration="))
      return fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%zu: whitespace in the statistic's name "
                        "(TE's names hold none; expected " LINE_FORMAT ")", f->path, line);
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%zu: no ' iteration=' (expected "
                      LINE_FORMAT ")", f->path, line);
  }
  p += 10;
  int64_t iter = 0;
  if (*p < '0' || *p > '9')
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%zu: iteration is not a non-negative "
                      "integer", f->path, line);
  for (; *p >= '0' && *p <= '9'; p++) {
    if (iter > (INT64_MAX - 9) / 10)
      return fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%zu: iteration too large", f->path, line);
    iter = iter * 10 + (*p - '0');
  }
  const char *ws = p;
  while (*p == ' ' || *p == '\t') p++;
  if (p == ws || strncmp(p, "value=", 6) != 0)
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%zu: no ' value=' after the iteration "
                      "(expected " LINE_FORMAT ")", f->path, line);
  const char *vs = p + 6;
  double v = 0;
  int digits = 0, decimals = 0, pv = parse_value(vs, &v, &digits, &decimals);
  if (pv == -1)
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%zu: value '%s' is not a number", f->path,
                      line, fp8_esc(vs, shown, sizeof shown));
  if (pv == -2)
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%zu: value '%s' has %d decimals: TE "
                      "writes exactly four ({:.4f}; a cut-off or edited line?)", f->path, line,
                      fp8_esc(vs, shown, sizeof shown), decimals);
  if (pv == -3)
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%zu: value '%s' is beyond float32 "
                      "(3.40282347e+38): TE's statistics are float32, it cannot print it",
                      f->path, line, fp8_esc(vs, shown, sizeof shown));
  size_t ll, t;
  const char *stat;
  if (!nlen || split_name(body, nlen, &ll, &t, &stat))
    return fp8_errorf(FP8_EFORMAT, err, errlen,
                      "%s:%zu: '%s' is not <layer>_<tensor>_<stat> with a tensor of "
                      "activation, weight, output, gradient, dgrad, wgrad",
                      f->path, line, fp8_escape(body, nlen, shown, sizeof shown));
  size_t stat_len = nlen - (size_t)(stat - body);
#define STAT_IS(lit) (stat_len == sizeof(lit) - 1 && memcmp(stat, lit, sizeof(lit) - 1) == 0)
  im->sum.lines++;
  if (TE_ROLES[t] && te_note_stat(im, body, nlen, ll, t, (size_t)(stat - body), iter) != FP8_OK)
    return FP8_ENOMEM;
  /* TE's scale of the recipe trained with (per tensor: min = max), unprefixed or of delayed
   * scaling; kept to go beside the tensor's amax as amax.csv's te_scale */
  int sk = STAT_IS("scale_inv_min") || STAT_IS("fp8_delayed_scaling_scale_inv_min") ? 0
         : STAT_IS("scale_inv_max") || STAT_IS("fp8_delayed_scaling_scale_inv_max") ? 1 : -1;
  int amax = STAT_IS("cur_amax");
  /* TE's overflows% (delayed scaling only): te_overflows.csv, for the report's TE section */
  if ((STAT_IS("overflows%") || STAT_IS("fp8_delayed_scaling_overflows%")) && TE_ROLES[t] &&
      isfinite(v) && v >= 0) {
    uint32_t oid;
    int orc = tensor_of(im, body, ll, t, &oid, why, sizeof why);
    if (orc == FP8_ENOMEM) return orc;
    if (orc == FP8_OK) {
      te_sinv *no = fp8_grow(im->ovf, im->novf, &im->capovf, sizeof *no, 1024);
      if (!no) return FP8_ENOMEM;
      im->ovf = no;
      im->ovf[im->novf++] = (te_sinv){iter, oid, (uint32_t)f->rank, 2, (float)v};
    }
  }
#undef STAT_IS
  uint32_t id;
  int rc;
  if (sk >= 0 && TE_ROLES[t] && isfinite(v) && v >= 0) {
    rc = tensor_of(im, body, ll, t, &id, why, sizeof why);
    if (rc == FP8_ENOMEM) return rc;
    if (rc == FP8_OK) { /* a name amax.csv cannot hold has no amax row to go beside */
      te_sinv *ns = fp8_grow(im->sinv, im->nsinv, &im->capsinv, sizeof *ns, 1024);
      if (!ns) return FP8_ENOMEM;
      im->sinv = ns;
      im->sinv[im->nsinv++] = (te_sinv){iter, id, (uint32_t)f->rank, sk, strtof(vs, NULL)};
    }
  }
  if (!amax || !TE_ROLES[t]) {
    if (amax) im->left_wgrad++;
    im->sum.other_lines++;
    return count_stat(im, f, line, stat, stat_len, err, errlen);
  }
  if (isnan(v) || v < 0)
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%zu: cur_amax '%s' is %s: an amax "
                      "fp8lab can replay is a non-negative number (inf included)", f->path, line,
                      fp8_esc(vs, shown, sizeof shown), isnan(v) ? "NaN" : "negative");
  if ((rc = tensor_of(im, body, ll, t, &id, why, sizeof why)) != FP8_OK) {
    if (rc != FP8_EFORMAT) return rc;
    char tname[FP8_NAME_MAX + 64];
    int tl = snprintf(tname, sizeof tname, "%.*s.%s", (int)ll, body, TE_ROLES[t]);
    size_t tn = tl < 0 ? 0 : (size_t)tl < sizeof tname ? (size_t)tl : sizeof tname - 1;
    return fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%zu: tensor %s: %s", f->path, line,
                      fp8_escape(tname, tn, shown, sizeof shown), why);
  }
  te_tensor *tt = &im->tens[id];
  float fv = isinf(v) ? (float)v : strtof(vs, NULL); /* as amax.csv reads the same text */
  if (f->rank == 0) tt->logged++;
  if (isfinite(fv) && fv == 0.0f) { /* 0.0000: below 5e-5, or a zero tensor: left out */
    im->sum.zero_values++;
    if (f->rank == 0) tt->zero++;
  } else if (digits >= 0 && digits < 3) {
    im->sum.coarse_values++;
    if (f->rank == 0) tt->coarse++;
  }
  te_row *nr = fp8_grow(im->rows, im->nrows, &im->caprows, sizeof *nr, 4096);
  if (!nr) return FP8_ENOMEM;
  im->rows = nr;
  /* the zero rows are kept for the interval and the duplicate check, not written */
  im->rows[im->nrows++] = (te_row){iter, id, (uint32_t)f->rank, 0, line, fv, 0.0f};
  return FP8_OK;
}

#define CUT_LINE "cut off: the last line has no newline (a write cut off when the job ended?)"

/* One log, line by line. TE ends every line with a newline: a last line without one is a
 * write cut off (a job killed at its time limit), an error, or with FP8_TE_DROP_CUT_LINE
 * dropped, counted and warned about. The log is a regular file (a FIFO would block). */
static int read_file(te_import *im, const te_file *f, unsigned flags, char *err, size_t errlen) {
  FILE *fp = fp8_fopen_regular(f->path, err, errlen);
  if (!fp) return FP8_EFORMAT;
  char *buf = NULL;
  size_t cap = 0, line = 0;
  ssize_t n;
  int rc = FP8_OK;
  while (rc == FP8_OK && (n = getline(&buf, &cap, fp)) >= 0) {
    line++;
    if (n && buf[n - 1] != '\n') { /* the last line (getline reads to the end) */
      if (!(flags & FP8_TE_DROP_CUT_LINE))
        rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%zu: " CUT_LINE "; --drop-cut-line "
                        "drops it", f->path, line);
      else if ((rc = te_add_warning(im, "%s:%zu: " CUT_LINE ": dropped (--drop-cut-line)",
                                 f->path, line)) == FP8_OK)
        im->sum.cut_lines_dropped++;
      break;
    }
    if (n && buf[n - 1] == '\n') buf[--n] = '\0';
    if (n && buf[n - 1] == '\r') buf[--n] = '\0';
    if ((size_t)n != strlen(buf))
      rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%zu: a NUL byte in the line", f->path, line);
    else if (n == 0)
      rc = fp8_errorf(FP8_EFORMAT, err, errlen, "%s:%zu: empty line", f->path, line);
    else
      rc = parse_line(im, f, line, buf, err, errlen);
  }
  if (rc == FP8_OK && ferror(fp))
    rc = fp8_errorf(FP8_EIO, err, errlen, "%s: read error: %s", f->path, strerror(errno));
  free(buf);
  fclose(fp);
  return rc;
}

/* the rows by rank, tensor, iteration (the duplicate check and the comparison of ranks) */
static int cmp_rank_tensor_iter(const void *a, const void *b) {
  const te_row *x = a, *y = b;
  if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
  if (x->tensor != y->tensor) return x->tensor < y->tensor ? -1 : 1;
  if (x->iter != y->iter) return x->iter < y->iter ? -1 : 1;
  return (x->line > y->line) - (x->line < y->line);
}

/* Duplicates, the interval, whether the ranks agree. */
static int check_rows(te_import *im, char *err, size_t errlen) {
  qsort(im->rows, im->nrows, sizeof *im->rows, cmp_rank_tensor_iter);
  int64_t g = 0;
  im->sum.first = im->nrows ? INT64_MAX : 0;
  im->sum.last = 0;
  for (size_t k = 0; k < im->nrows; k++) {
    const te_row *r = &im->rows[k];
    if (k && r->rank == r[-1].rank && r->tensor == r[-1].tensor && r->iter == r[-1].iter) {
      const te_tensor *t = &im->tens[r->tensor];
      return fp8_errorf(FP8_EFORMAT, err, errlen,
                        "%s:%zu: %s_%s_cur_amax at iteration %" PRId64 " a second time "
                        "(first at line %zu; a log appended to by two runs? keep one run's "
                        "lines)",
                        im->files[r->rank].path, r->line, t->layer, TE_TENSORS[t->te_tensor],
                        r->iter, r[-1].line);
    }
    g = te_gcd(g, r->iter);
    if (r->iter < im->sum.first) im->sum.first = r->iter;
    if (r->iter > im->sum.last) im->sum.last = r->iter;
    te_tensor *t = &im->tens[r->tensor]; /* its own interval, over every rank */
    t->igcd = te_gcd(t->igcd, r->iter);
    if (!t->has_iter || r->iter < t->first) t->first = r->iter;
    if (!t->has_iter || r->iter > t->last) t->last = r->iter;
    t->has_iter = 1;
  }
  /* the tensors' own intervals (te_log.json's per-tensor "interval"): all equal or not */
  int64_t seen = -1;
  im->intervals_differ = 0;
  for (size_t k = 0; k < im->ntens; k++) {
    const te_tensor *t = &im->tens[k];
    if (!t->has_iter) continue; /* only scale_inv or overflows% logged: no interval */
    int64_t iv = te_interval_of(t->igcd, t->first, t->last);
    if (seen >= 0 && iv != seen) im->intervals_differ = 1;
    if (seen < 0 || iv < im->sum.interval_min) im->sum.interval_min = iv;
    if (seen < 0 || iv > im->sum.interval_max) im->sum.interval_max = iv;
    seen = iv;
  }
  /* iterations are multiples of freq counted from 0 (TE: iteration % freq == 0) */
  im->sum.interval = im->sum.first == im->sum.last ? 0 : g;
  /* the ranks agree when each holds rank 0's rows, value for value */
  size_t per = 0;
  while (per < im->nrows && im->rows[per].rank == 0) per++;
  int same = im->nrows == per * im->nfiles;
  for (size_t k = per; same && k < im->nrows; k++) {
    const te_row *a = &im->rows[k % per], *b = &im->rows[k];
    same = a->tensor == b->tensor && a->iter == b->iter && memcmp(&a->v, &b->v, sizeof a->v) == 0;
  }
  im->sum.ranks_identical = same;
  return FP8_OK;
}

static int cmp_sinv(const void *a, const void *b) {
  const te_sinv *x = a, *y = b;
  if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
  if (x->tensor != y->tensor) return x->tensor < y->tensor ? -1 : 1;
  if (x->iter != y->iter) return x->iter < y->iter ? -1 : 1;
  return x->kind - y->kind;
}

/* Each amax row's te_scale: 1 / scale_inv where the tensor's scale_inv_min and _max agree at
 * that iteration (or one of them was logged); not when they differ (a block recipe's scales),
 * or read 0.0000. The rows are sorted by rank, tensor, iteration (check_rows). */
static void join_scales(te_import *im) {
  if (!im->nsinv) return;
  qsort(im->sinv, im->nsinv, sizeof *im->sinv, cmp_sinv);
  size_t j = 0;
  for (size_t k = 0; k < im->nrows; k++) {
    te_row *r = &im->rows[k];
    while (j < im->nsinv && cmp_sinv(&im->sinv[j], &(te_sinv){r->iter, r->tensor, r->rank, -1, 0}) < 0) j++;
    float lo = -1, hi = -1;
    for (size_t q = j; q < im->nsinv && im->sinv[q].rank == r->rank &&
                       im->sinv[q].tensor == r->tensor && im->sinv[q].iter == r->iter; q++)
      *(im->sinv[q].kind ? &hi : &lo) = im->sinv[q].v;
    if (lo < 0 && hi < 0) continue;
    float si = lo >= 0 ? lo : hi;
    if ((lo >= 0 && hi >= 0 && lo != hi) || !(si > 0.0f)) {
      im->scale_lost += r->v != 0.0f;
      continue;
    }
    float sc = 1.0f / si;
    if (r->v != 0.0f && isfinite(sc) && sc > 0.0f) {
      r->te_scale = sc;
      im->scale_rows++;
    }
  }
}

void fp8_te_import_summary_free(fp8_te_import_summary *sum) {
  if (!sum) return;
  for (size_t k = 0; k < sum->nwarnings; k++) free(sum->warnings[k]);
  free(sum->warnings);
  sum->warnings = NULL;
  sum->nwarnings = 0;
}

int fp8_te_import(const char *logdir, const char *tracedir, int force, unsigned flags,
                  fp8_te_import_summary *sum, char *err, size_t errlen) {
  te_import im;
  memset(&im, 0, sizeof im);
  int rc = find_files(&im, logdir, err, errlen);
  /* per rank: its statistics lines, then its dropped cut-off lines (note_ranks) */
  size_t *lines = rc == FP8_OK ? calloc(2 * im.nfiles + 1, sizeof *lines) : NULL;
  if (rc == FP8_OK && !lines) rc = FP8_ENOMEM;
  for (size_t k = 0; rc == FP8_OK && k < im.nfiles; k++) {
    size_t before = im.sum.lines, cut = im.sum.cut_lines_dropped;
    rc = read_file(&im, &im.files[k], flags, err, errlen);
    lines[k] = im.sum.lines - before;
    lines[im.nfiles + k] = im.sum.cut_lines_dropped - cut;
  }
  if (rc == FP8_OK && im.nrows == 0)
    rc = fp8_errorf(FP8_EFORMAT, err, errlen,
                    "%s: no cur_amax of activation, weight, output, gradient or dgrad in %zu "
                    "statistics lines (log LogTensorStats' cur_amax: docs/capture.md)",
                    im.files[0].path, im.sum.lines);
  if (rc == FP8_OK) rc = check_rows(&im, err, errlen);
  if (rc == FP8_OK) join_scales(&im);
  if (rc == FP8_OK) te_stats_resolve(&im);
  im.sum.ranks = im.nfiles;
  if (rc == FP8_OK) rc = te_note_ranks(&im, lines, lines + im.nfiles);
  free(lines);
  if (rc == FP8_OK) rc = te_write_trace(&im, logdir, tracedir, force, err, errlen);
  if (rc != FP8_OK) fp8_te_import_summary_free(&im.sum); /* warnings on success only */
  if (sum) *sum = im.sum;
  else fp8_te_import_summary_free(&im.sum);
  free(im.noamax);
  for (size_t k = 0; k < im.nfiles; k++) free(im.files[k].path);
  free(im.files);
  free(im.rows);
  free(im.sinv);
  free(im.ovf);
  for (size_t k = 0; k < im.ntens; k++) {
    free(im.tens[k].name);
    free(im.tens[k].layer);
  }
  free(im.tens);
  for (size_t k = 0; k < im.nstat; k++) free(im.sname[k]);
  free(im.sname);
  free(im.scount);
  fp8_strset_free(&im.tset);
  fp8_strset_free(&im.sset);
  for (size_t k = 0; k < im.npstat; k++) free(im.pstat[k].key);
  free(im.pstat);
  fp8_strset_free(&im.pset);
  return rc;
}
