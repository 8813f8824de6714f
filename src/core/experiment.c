/* experiment.c: loads an experiment file (INI, via libinih) into an fp8_experiment and expands
 * every [recipe.*] section into the Cartesian product of its value lists (experiment.h).
 *
 * libinih splits "key = value" lines; everything around it is done here, in the reader that
 * feeds it one line at a time:
 *   - line numbers: Debian's libinih has no line number in the handler, so the reader counts
 *     lines and the handler, called while inih processes that line, reads the count;
 *   - comments: ';' anywhere, and '#' at the start of a line or after whitespace, start a
 *     comment. inih alone would need whitespace before an inline ';', but the documented
 *     example writes "amax_compute = max, most_recent; default max", so values cannot contain
 *     ';' (they can contain '#': "traces/run#1"). Leading whitespace is removed, so inih never
 *     sees an indented line as a multi-line continuation of the previous value;
 *   - section headers are parsed here, not by inih, which truncates section names to 49
 *     characters: a header ends the previous section, which is validated then (a recipe's
 *     keys can come before its `kind`);
 *   - lines inih would reject are reported here with a precise message (inih's own return
 *     value remains a backstop, "syntax error"); lines longer than inih's 200-byte buffer are
 *     passed to it as "key=x" and the handler takes the value from the full line.
 * Errors are kept by position: the reported one is the first in the file, and "missing"
 * errors (no kind, no path, no section) only count when nothing else went wrong.
 */
#include "experiment.h"

#include "block.h"
#include "trace.h"

#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <ini.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>

#define EXP_LABEL_MAX 63

typedef enum { SEC_NONE, SEC_TRACE, SEC_OUTPUT, SEC_RECIPE, SEC_ANALYSIS, SEC_IGNORED } exp_sec_type;

typedef struct {
  char *key;
  char *value;
  int line;
} exp_entry;

typedef struct {
  char label[EXP_LABEL_MAX + 1];
  int line;
} exp_label;

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

static void exp_fail(exp_ctx *c, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void exp_fail(exp_ctx *c, int line, const char *fmt, ...) {
  c->nfail++;
  if (c->has_err && c->err_line <= line) return;
  c->has_err = 1;
  c->err_line = line;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->err_msg, sizeof c->err_msg, fmt, ap);
  va_end(ap);
}

static char *exp_strdup(exp_ctx *c, const char *s) {
  char *d = strdup(s);
  if (!d) c->nomem = 1;
  return d;
}

static char *exp_trim(char *s) {
  while (isspace((unsigned char)*s)) s++;
  size_t n = strlen(s);
  while (n > 0 && isspace((unsigned char)s[n - 1])) s[--n] = '\0';
  return s;
}

/* ---------------------------------------------------------------- value parsing */

/* A comma list: items trimmed, pointing into buf. */
typedef struct {
  char *buf;
  char **items;
  size_t n;
} exp_list;

static void exp_list_free(exp_list *l) {
  free(l->buf);
  free(l->items);
  memset(l, 0, sizeof *l);
}

/* 0 on success, 1 when an item is empty, -1 when out of memory. */
static int exp_list_split(const char *value, exp_list *l) {
  memset(l, 0, sizeof *l);
  size_t n = 1;
  for (const char *p = value; *p; p++)
    if (*p == ',') n++;
  l->buf = strdup(value);
  l->items = malloc(n * sizeof *l->items);
  if (!l->buf || !l->items) {
    exp_list_free(l);
    return -1;
  }
  char *p = l->buf;
  for (;;) {
    char *comma = strchr(p, ',');
    if (comma) *comma = '\0';
    char *item = exp_trim(p);
    if (!*item) {
      exp_list_free(l);
      return 1;
    }
    l->items[l->n++] = item;
    if (!comma) break;
    p = comma + 1;
  }
  return 0;
}

/* Whole-item base-10 integer. */
static int exp_parse_i64(const char *s, int64_t *out) {
  if (!*s || isspace((unsigned char)*s)) return -1;
  errno = 0;
  char *end;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end) return -1;
  *out = (int64_t)v;
  return 0;
}

static int exp_parse_u64(const char *s, uint64_t *out) {
  if (!*s || isspace((unsigned char)*s) || *s == '-') return -1;
  errno = 0;
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || *end) return -1;
  *out = (uint64_t)v;
  return 0;
}

static int exp_parse_bool(const char *s, int *out) {
  static const char *const yes[] = {"true", "1", "yes", "on"};
  static const char *const no[] = {"false", "0", "no", "off"};
  for (size_t i = 0; i < 4; i++) {
    if (strcasecmp(s, yes[i]) == 0) return *out = 1, 0;
    if (strcasecmp(s, no[i]) == 0) return *out = 0, 0;
  }
  return -1;
}

/* "a", "a-b" or "a-b:stride". Returns NULL or what is wrong. */
static const char *exp_parse_steps(const char *spec, int64_t *a, int64_t *b, int64_t *stride,
                                   int *nomem) {
  const char *why = NULL;
  char *buf = strdup(spec);
  if (!buf) {
    *nomem = 1;
    return "out of memory";
  }
  char *range = buf, *st = NULL;
  char *colon = strchr(buf, ':');
  if (colon) {
    *colon = '\0';
    st = exp_trim(colon + 1);
  }
  range = exp_trim(range);
  if (*range == '-') {
    why = "steps must be >= 0";
    goto done;
  }
  char *dash = strchr(range, '-');
  char *first = range, *last = NULL;
  if (dash) {
    *dash = '\0';
    last = exp_trim(dash + 1);
    first = exp_trim(first);
  } else if (st) {
    why = "a stride needs a range a-b";
    goto done;
  }
  if (exp_parse_i64(first, a) || (last && exp_parse_i64(last, b)) ||
      (st && exp_parse_i64(st, stride))) {
    why = "expected a, a-b or a-b:stride with integers";
    goto done;
  }
  if (!last) *b = *a;
  if (!st) *stride = 1;
  if (*a < 0 || *b < 0) why = "steps must be >= 0";
  else if (*a > *b) why = "the first step is after the last";
  else if (*stride < 1) why = "the stride must be >= 1";
done:
  free(buf);
  return why;
}

/* base_dir/rel, or rel unchanged when it is absolute or base_dir is ".". */
static char *exp_resolve(exp_ctx *c, const char *rel) {
  const char *base = c->ex->base_dir;
  if (rel[0] == '/' || strcmp(base, ".") == 0) return exp_strdup(c, rel);
  size_t nb = strlen(base), nr = strlen(rel);
  int slash = nb > 0 && base[nb - 1] == '/';
  char *out = malloc(nb + nr + 2);
  if (!out) {
    c->nomem = 1;
    return NULL;
  }
  memcpy(out, base, nb);
  if (!slash) out[nb++] = '/';
  memcpy(out + nb, rel, nr + 1);
  return out;
}

/* ---------------------------------------------------------------- [trace] and [output] */

static void exp_trace_end(exp_ctx *c) {
  fp8_experiment *ex = c->ex;
  int have_path = 0;
  for (size_t i = 0; i < c->nents && !c->nomem; i++) {
    const exp_entry *e = &c->ents[i];
    const char *v = e->value;
    if (strcmp(e->key, "path") == 0) {
      if (strncmp(v, "synth:", 6) == 0) {
        if (!v[6]) {
          exp_fail(c, e->line, "empty synth preset in path = %s (expected synth:<preset>)", v);
          continue;
        }
        ex->trace_is_synth = 1;
        ex->trace_path = exp_strdup(c, v);
        ex->synth_preset = exp_strdup(c, v + 6);
      } else {
        ex->trace_path = exp_resolve(c, v);
      }
      have_path = 1;
    } else if (strcmp(e->key, "steps") == 0) {
      const char *why = exp_parse_steps(v, &ex->step_first, &ex->step_last, &ex->step_stride,
                                        &c->nomem);
      if (why) exp_fail(c, e->line, "bad steps \"%s\": %s", v, why);
      else ex->has_steps = 1;
    } else if (strcmp(e->key, "tensors") == 0) {
      exp_list l;
      int rc = exp_list_split(v, &l);
      if (rc < 0) {
        c->nomem = 1;
        continue;
      }
      if (rc > 0) {
        exp_fail(c, e->line, "empty glob in tensors = %s", v);
      } else {
        for (size_t j = 0; j < l.n; j++)
          for (size_t k = 0; k < j; k++)
            if (strcmp(l.items[j], l.items[k]) == 0) {
              exp_fail(c, e->line, "duplicate value \"%s\" in tensors", l.items[j]);
              goto tensors_done;
            }
        ex->tensor_globs = calloc(l.n, sizeof *ex->tensor_globs);
        if (!ex->tensor_globs) {
          c->nomem = 1;
          goto tensors_done;
        }
        ex->ntensor_globs = l.n;
        for (size_t j = 0; j < l.n; j++) ex->tensor_globs[j] = exp_strdup(c, l.items[j]);
      }
    tensors_done:
      exp_list_free(&l);
    } else if (strcmp(e->key, "synth_steps") == 0) {
      int64_t n;
      if (exp_parse_i64(v, &n) || n < 1)
        exp_fail(c, e->line, "bad synth_steps \"%s\" (expected an integer >= 1)", v);
      else ex->synth_steps = n;
    } else if (strcmp(e->key, "synth_seed") == 0) {
      uint64_t s;
      if (exp_parse_u64(v, &s))
        exp_fail(c, e->line, "bad synth_seed \"%s\" (expected an integer in 0..%llu)", v,
                 (unsigned long long)UINT64_MAX);
      else ex->synth_seed = s;
    } else if (strcmp(e->key, "reduce_amax") == 0) {
      int b;
      if (exp_parse_bool(v, &b)) {
        exp_fail(c, e->line, "bad reduce_amax \"%s\" (expected true or false)", v);
      } else {
        ex->reduce_amax = b;
        ex->reduce_amax_line = e->line;
      }
    } else if (strcmp(e->key, "reduce_group") == 0) {
      int64_t n;
      if (exp_parse_i64(v, &n) || n < 1 || n > FP8_RANK_LIMIT) {
        exp_fail(c, e->line,
                 "bad reduce_group \"%s\" (expected an integer in 1..%d: ranks per amax "
                 "reduction group)",
                 v, FP8_RANK_LIMIT);
      } else {
        ex->reduce_group = n;
        ex->reduce_group_line = e->line;
      }
    } else {
      exp_fail(c, e->line,
               "unknown key %s in [trace] (expected path, steps, tensors, synth_steps, "
               "synth_seed, reduce_amax or reduce_group)",
               e->key);
    }
  }
  if (!have_path && !c->has_err)
    exp_fail(c, c->sec_line, "[trace] has no path (expected path = <trace dir> or synth:<preset>)");
  /* synth_steps / synth_seed beside a real trace are accepted and unused: the documented
   * example file has them as commented placeholders. */
}

static void exp_output_end(exp_ctx *c) {
  for (size_t i = 0; i < c->nents && !c->nomem; i++) {
    const exp_entry *e = &c->ents[i];
    if (strcmp(e->key, "dir") == 0) c->ex->out_dir = exp_resolve(c, e->value);
    else exp_fail(c, e->line, "unknown key %s in [output] (expected dir)", e->key);
  }
}

static void exp_analysis_end(exp_ctx *c) {
  for (size_t i = 0; i < c->nents && !c->nomem; i++) {
    const exp_entry *e = &c->ents[i];
    if (strcmp(e->key, "overflow_budget") == 0) {
      char *end;
      errno = 0;
      double v = strtod(e->value, &end);
      if (errno || end == e->value || *end || !(v >= 0.0 && v <= 1.0))
        exp_fail(c, e->line, "bad overflow_budget \"%s\" (expected a fraction of elements in 0..1, "
                 "e.g. 1e-5)", e->value);
      else c->ex->overflow_budget = v;
    } else if (strcmp(e->key, "gemm") == 0) {
      int b;
      if (exp_parse_bool(e->value, &b))
        exp_fail(c, e->line, "bad gemm \"%s\" (expected true or false)", e->value);
      else c->ex->gemm = b;
    } else if (strcmp(e->key, "gemm_max_tokens") == 0) {
      int64_t v;
      if (exp_parse_i64(e->value, &v) || v < 0 || v > (int64_t)1 << 31)
        exp_fail(c, e->line, "bad gemm_max_tokens \"%s\" (expected an integer in 0..2^31, 0 = all "
                 "tokens)", e->value);
      else c->ex->gemm_max_tokens = v;
    } else {
      exp_fail(c, e->line, "unknown key %s in [analysis] (expected overflow_budget, gemm or "
               "gemm_max_tokens)", e->key);
    }
  }
}

/* ---------------------------------------------------------------- [recipe.*] */

enum { K_KIND, K_FORMAT, K_HISTORY, K_MARGIN, K_AMAX_COMPUTE, K_EPS, K_POW2, K_ROUNDING, K_BLOCK,
       K_COUNT };
static const char *const exp_recipe_keys[K_COUNT] = {
    "kind", "format", "history_len", "margin", "amax_compute", "amax_epsilon", "pow2",
    "scale_rounding", "block"};
#define KIND_BIT(k) (1u << (k))
#define ALL_KINDS (KIND_BIT(FP8_KIND_DELAYED) | KIND_BIT(FP8_KIND_CURRENT) | KIND_BIT(FP8_KIND_MXFP8) | \
                   KIND_BIT(FP8_KIND_BLOCK) | KIND_BIT(FP8_KIND_ROWWISE))
static const unsigned exp_recipe_key_kinds[K_COUNT] = {
    ALL_KINDS,                                               /* kind */
    ALL_KINDS,                                               /* format */
    KIND_BIT(FP8_KIND_DELAYED),                              /* history_len */
    KIND_BIT(FP8_KIND_DELAYED) | KIND_BIT(FP8_KIND_CURRENT), /* margin */
    KIND_BIT(FP8_KIND_DELAYED),                              /* amax_compute */
    KIND_BIT(FP8_KIND_CURRENT),                              /* amax_epsilon */
    KIND_BIT(FP8_KIND_CURRENT) | KIND_BIT(FP8_KIND_BLOCK) | KIND_BIT(FP8_KIND_ROWWISE), /* pow2 */
    KIND_BIT(FP8_KIND_MXFP8),                                /* scale_rounding */
    KIND_BIT(FP8_KIND_BLOCK),                                /* block */
};

static int exp_recipe_key(const char *key) {
  for (int k = 0; k < K_COUNT; k++)
    if (strcmp(key, exp_recipe_keys[k]) == 0) return k;
  return -1;
}

/* Parses one item of key k into *v (every axis but amax_epsilon is an integer code).
 * Returns NULL or what was expected. */
static const char *exp_parse_item(int k, const char *s, int64_t *v, double *d, char *expect,
                                  size_t nexpect) {
  switch (k) {
  case K_FORMAT: {
    fp8_format_sel f;
    if (fp8_format_sel_parse(s, &f)) return "hybrid, e4m3 or e5m2";
    *v = f;
    return NULL;
  }
  case K_HISTORY:
    if (exp_parse_i64(s, v) || *v < 1 || *v > FP8_HISTORY_LIMIT) {
      snprintf(expect, nexpect, "an integer in 1..%d", FP8_HISTORY_LIMIT);
      return expect;
    }
    return NULL;
  case K_MARGIN:
    if (exp_parse_i64(s, v) || *v < -FP8_MARGIN_LIMIT || *v > FP8_MARGIN_LIMIT) {
      snprintf(expect, nexpect, "an integer in %d..%d", -FP8_MARGIN_LIMIT,
               FP8_MARGIN_LIMIT);
      return expect;
    }
    return NULL;
  case K_AMAX_COMPUTE: {
    fp8_amax_compute a;
    if (fp8_amax_compute_parse(s, &a)) return "max or most_recent";
    *v = a;
    return NULL;
  }
  case K_EPS: {
    char *end;
    double x = strtod(s, &end);
    if (end == s || *end || !(x >= 0.0) || !isfinite(x) || !isfinite((float)x))
      return "a number >= 0, finite in float32";
    *d = x;
    *v = 0;
    return NULL;
  }
  case K_POW2: {
    int b;
    if (exp_parse_bool(s, &b)) return "true, false, 1, 0, yes, no, on or off";
    *v = b;
    return NULL;
  }
  case K_ROUNDING: {
    fp8_mx_rounding r;
    if (fp8_mx_rounding_parse(s, &r)) return "ceil or floor";
    *v = r;
    return NULL;
  }
  case K_BLOCK: {
    fp8_block_shape b;
    if (fp8_block_shape_parse(s, &b)) return "1x128, 128x128 or auto";
    *v = b;
    return NULL;
  }
  default:
    return "a value";
  }
}

static void exp_recipe_end(exp_ctx *c) {
  fp8_experiment *ex = c->ex;
  const char *label = c->secname + 7;
  const exp_entry *kind_ent = NULL;
  int64_t *vals[K_COUNT] = {0};
  size_t nvals[K_COUNT] = {0};
  double eps = 0.0;

  for (size_t i = 0; i < c->nents; i++) {
    int k = exp_recipe_key(c->ents[i].key);
    if (k < 0)
      exp_fail(c, c->ents[i].line,
               "unknown key %s in [%s] (expected kind, format, history_len, margin, "
               "amax_compute, amax_epsilon, pow2, scale_rounding or block)",
               c->ents[i].key, c->secname);
    else if (k == K_KIND) kind_ent = &c->ents[i];
  }
  if (!kind_ent) {
    if (!c->has_err)
      exp_fail(c, c->sec_line,
               "[%s] has no kind (expected kind = delayed, current, mxfp8, block or rowwise)",
               c->secname);
    goto done;
  }
  fp8_recipe_kind kind;
  if (strcasecmp(kind_ent->value, "delayed") == 0) kind = FP8_KIND_DELAYED;
  else if (strcasecmp(kind_ent->value, "current") == 0) kind = FP8_KIND_CURRENT;
  else if (strcasecmp(kind_ent->value, "mxfp8") == 0) kind = FP8_KIND_MXFP8;
  else if (strcasecmp(kind_ent->value, "block") == 0) kind = FP8_KIND_BLOCK;
  else if (strcasecmp(kind_ent->value, "rowwise") == 0) kind = FP8_KIND_ROWWISE;
  else {
    exp_fail(c, kind_ent->line,
             "bad kind \"%s\" (expected a single value: delayed, current, mxfp8, block or rowwise)",
             kind_ent->value);
    goto done;
  }

  for (size_t i = 0; i < c->nents && !c->nomem; i++) {
    const exp_entry *e = &c->ents[i];
    int k = exp_recipe_key(e->key);
    if (k <= K_KIND) continue;
    if (!(exp_recipe_key_kinds[k] & KIND_BIT(kind))) {
      exp_fail(c, e->line, "%s is not a key of kind %s", e->key, fp8_recipe_kind_name(kind));
      continue;
    }
    exp_list l;
    int rc = exp_list_split(e->value, &l);
    if (rc < 0) {
      c->nomem = 1;
      break;
    }
    if (rc > 0) {
      exp_fail(c, e->line, "empty item in the list %s = %s", e->key, e->value);
      continue;
    }
    if (kind != FP8_KIND_DELAYED && k != K_FORMAT && l.n > 1) {
      exp_fail(c, e->line,
               "%s must be a single value for kind %s: steps.csv has no column to tell "
               "such configurations apart (use one [recipe.*] section per setting)",
               e->key, fp8_recipe_kind_name(kind));
      exp_list_free(&l);
      continue;
    }
    vals[k] = malloc(l.n * sizeof *vals[k]);
    if (!vals[k]) {
      c->nomem = 1;
      exp_list_free(&l);
      break;
    }
    for (size_t j = 0; j < l.n; j++) {
      char expect[64];
      const char *why = exp_parse_item(k, l.items[j], &vals[k][j], &eps, expect, sizeof expect);
      if (why) {
        exp_fail(c, e->line, "bad %s \"%s\" (expected %s)", e->key, l.items[j], why);
        break;
      }
      size_t dup = j;
      for (size_t m = 0; m < j; m++)
        if (vals[k][m] == vals[k][j] && k != K_EPS) dup = m;
      if (dup != j) {
        exp_fail(c, e->line, "duplicate value \"%s\" in the list %s = %s", l.items[j], e->key,
                 e->value);
        break;
      }
      nvals[k] = j + 1;
    }
    exp_list_free(&l);
  }
  if (c->nomem || c->nfail != c->sec_nfail) goto done;

  /* Absent keys: their default, as a one-value axis. */
  /* pow2 defaults to true for block and rowwise (DeepSeek-V3, torchao), false for current */
  int64_t defaults[K_COUNT] = {0, FP8_SEL_HYBRID, 1024, 0, FP8_AMAX_MAX, 0, 0, FP8_MX_ROUND_CEIL,
                               FP8_BLOCK_SHAPE_AUTO};
  defaults[K_POW2] = kind == FP8_KIND_BLOCK || kind == FP8_KIND_ROWWISE;
  for (int k = K_FORMAT; k < K_COUNT; k++) {
    if (vals[k]) continue;
    vals[k] = malloc(sizeof *vals[k]);
    if (!vals[k]) {
      c->nomem = 1;
      goto done;
    }
    vals[k][0] = defaults[k];
    nvals[k] = 1;
  }

  /* Canonical product order: delayed = format, history_len, margin, amax_compute (last
   * fastest); current = format (its other keys are single values). */
  static const int axes_delayed[] = {K_FORMAT, K_HISTORY, K_MARGIN, K_AMAX_COMPUTE};
  static const int axes_current[] = {K_FORMAT};
  const int *axes = kind == FP8_KIND_DELAYED ? axes_delayed : axes_current;
  size_t naxes = kind == FP8_KIND_DELAYED ? 4 : 1;
  size_t count = 1;
  int saturated = 0;
  for (size_t a = 0; a < naxes; a++) {
    count *= nvals[axes[a]];
    if (count > FP8_EXPERIMENT_MAX_CONFIGS) {
      saturated = 1;
      break;
    }
  }
  if (saturated || ex->nconfigs + count > FP8_EXPERIMENT_MAX_CONFIGS) {
    exp_fail(c, c->sec_line,
             "too many configurations: [%s] expands to %s%zu, %zu before it; the limit is %d",
             c->secname, saturated ? "more than " : "", saturated ? (size_t)FP8_EXPERIMENT_MAX_CONFIGS : count,
             ex->nconfigs, FP8_EXPERIMENT_MAX_CONFIGS);
    goto done;
  }
  fp8_config *cfgs = realloc(ex->configs, (ex->nconfigs + count) * sizeof *cfgs);
  if (!cfgs) {
    c->nomem = 1;
    goto done;
  }
  ex->configs = cfgs;
  for (size_t i = 0; i < count; i++) {
    size_t idx[4] = {0}, r = i;
    for (size_t a = naxes; a-- > 0;) {
      idx[a] = r % nvals[axes[a]];
      r /= nvals[axes[a]];
    }
    fp8_config *cf = &ex->configs[ex->nconfigs + i];
    memset(cf, 0, sizeof *cf);
    snprintf(cf->label, sizeof cf->label, "%s", label);
    cf->kind = kind;
    cf->format = (fp8_format_sel)vals[K_FORMAT][idx[0]];
    if (kind == FP8_KIND_DELAYED) {
      cf->history_len = (int32_t)vals[K_HISTORY][idx[1]];
      cf->margin = (int32_t)vals[K_MARGIN][idx[2]];
      cf->amax_compute = (fp8_amax_compute)vals[K_AMAX_COMPUTE][idx[3]];
      fp8_delayed_params p = {cf->history_len, cf->margin, cf->amax_compute, FP8_E4M3};
      if (fp8_delayed_params_check(&p)) goto bad_params;
    } else if (kind == FP8_KIND_CURRENT) {
      cf->margin = (int32_t)vals[K_MARGIN][0];
      cf->amax_epsilon = (float)eps;
      cf->pow2 = (int)vals[K_POW2][0];
      fp8_current_params p = {cf->amax_epsilon, cf->pow2 != 0, cf->margin, FP8_E4M3};
      if (fp8_current_params_check(&p)) goto bad_params;
    } else {
      cf->pow2 = (int)vals[K_POW2][0];
      cf->mx_rounding = (int)vals[K_ROUNDING][0];
      cf->block_shape = (int)vals[K_BLOCK][0];
    }
  }
  ex->nconfigs += count;
  goto done;
bad_params: /* unreachable: every value was range-checked above */
  exp_fail(c, c->sec_line, "[%s]: parameters rejected by the simulator", c->secname);
done:
  for (int k = 0; k < K_COUNT; k++) free(vals[k]);
}

/* ---------------------------------------------------------------- sections and lines */

static void exp_section_end(exp_ctx *c) {
  if (!c->nomem) {
    switch (c->sec) {
    case SEC_TRACE: exp_trace_end(c); break;
    case SEC_OUTPUT: exp_output_end(c); break;
    case SEC_ANALYSIS: exp_analysis_end(c); break;
    case SEC_RECIPE: exp_recipe_end(c); break;
    default: break;
    }
  }
  for (size_t i = 0; i < c->nents; i++) {
    free(c->ents[i].key);
    free(c->ents[i].value);
  }
  c->nents = 0;
  c->sec = SEC_NONE;
}

/* s: "[...]" with comments and surrounding whitespace removed. */
static void exp_section_begin(exp_ctx *c, char *s) {
  int line = c->lineno;
  exp_section_end(c);
  c->sec = SEC_IGNORED;
  c->sec_line = line;
  c->sec_nfail = c->nfail;
  char *end = strchr(s, ']');
  if (!end) {
    exp_fail(c, line, "syntax error: section header %s has no closing ]", s);
    return;
  }
  *end = '\0';
  const char *name = s + 1;
  const char *rest = end + 1;
  while (isspace((unsigned char)*rest)) rest++;
  if (*rest) {
    exp_fail(c, line, "syntax error: unexpected text after [%s]: %s", name, rest);
    return;
  }
  snprintf(c->secname, sizeof c->secname, "%s", name);
  if (strcmp(name, "trace") == 0 || strcmp(name, "output") == 0 || strcmp(name, "analysis") == 0) {
    int *seen = name[0] == 't' ? &c->trace_line : name[0] == 'o' ? &c->output_line : &c->analysis_line;
    if (*seen) {
      exp_fail(c, line, "section [%s] given twice (first at line %d)", name, *seen);
      return;
    }
    *seen = line;
    c->sec = name[0] == 't' ? SEC_TRACE : name[0] == 'o' ? SEC_OUTPUT : SEC_ANALYSIS;
  } else if (strncmp(name, "recipe.", 7) == 0) {
    const char *label = name + 7;
    size_t n = strlen(label);
    if (n == 0) {
      exp_fail(c, line, "empty recipe label in [%s] (expected [recipe.<label>])", name);
      return;
    }
    if (n > EXP_LABEL_MAX) {
      exp_fail(c, line, "recipe label %s too long (%zu characters, at most %d)", label, n,
               EXP_LABEL_MAX);
      return;
    }
    for (const char *p = label; *p; p++)
      if (!isalnum((unsigned char)*p) && *p != '_' && *p != '.' && *p != '-') {
        exp_fail(c, line, "bad character '%c' in recipe label %s (allowed: A-Z a-z 0-9 _ . -)",
                 *p, label);
        return;
      }
    for (size_t i = 0; i < c->nlabels; i++)
      if (strcmp(c->labels[i].label, label) == 0) {
        exp_fail(c, line, "section [%s] given twice (first at line %d)", name,
                 c->labels[i].line);
        return;
      }
    if (c->nlabels == c->caplabels) {
      size_t cap = c->caplabels ? 2 * c->caplabels : 8;
      exp_label *l = realloc(c->labels, cap * sizeof *l);
      if (!l) {
        c->nomem = 1;
        return;
      }
      c->labels = l;
      c->caplabels = cap;
    }
    snprintf(c->labels[c->nlabels].label, sizeof c->labels[c->nlabels].label, "%s", label);
    c->labels[c->nlabels++].line = line;
    c->sec = SEC_RECIPE;
  } else {
    exp_fail(c, line, "unknown section [%s] (expected [trace], [recipe.<label>], [analysis] or [output])",
             name);
  }
}

/* The ini_reader: one physical line per call, cleaned (see the top of the file). */
static char *exp_reader(char *str, int num, void *stream) {
  exp_ctx *c = stream;
  c->long_value = NULL;
  if (c->nomem || num < 8) return NULL;
  errno = 0;
  ssize_t got = getline(&c->buf, &c->cap, c->fp);
  if (got < 0) {
    if (ferror(c->fp)) c->read_errno = errno ? errno : EIO;
    return NULL;
  }
  c->lineno++;
  char *s = c->buf;
  if (c->lineno == 1 && (unsigned char)s[0] == 0xEF && (unsigned char)s[1] == 0xBB &&
      (unsigned char)s[2] == 0xBF)
    s += 3; /* UTF-8 BOM */
  for (char *p = s; *p; p++)
    if (*p == ';' || (*p == '#' && (p == s || isspace((unsigned char)p[-1])))) {
      *p = '\0';
      break;
    }
  s = exp_trim(s);
  str[0] = '\0';
  if (*s == '\0') return str;
  if (*s == '[') {
    exp_section_begin(c, s);
    return str;
  }
  char *split = strpbrk(s, "=:");
  if (!split) {
    exp_fail(c, c->lineno, "syntax error: expected key = value, [section] or a comment, found %s",
             s);
    return str;
  }
  size_t n = strlen(s);
  if (n < (size_t)num) {
    memcpy(str, s, n + 1);
    return str;
  }
  /* Too long for inih's buffer: hand it the key only, keep the value here. */
  size_t nk = (size_t)(split - s);
  if (nk + 3 > (size_t)num) {
    exp_fail(c, c->lineno, "key name longer than %d characters", num - 3);
    return str;
  }
  memcpy(str, s, nk);
  memcpy(str + nk, "=x", 3);
  char *v = split + 1;
  while (isspace((unsigned char)*v)) v++;
  c->long_value = v;
  return str;
}

/* The ini_handler: records the key in the current section (validated at section end). */
static int exp_handler(void *user, const char *section, const char *name, const char *value) {
  (void)section; /* ours, from the reader: inih truncates long section names */
  exp_ctx *c = user;
  int line = c->lineno;
  if (c->long_value) value = c->long_value;
  if (c->nomem || c->sec == SEC_IGNORED) return 1;
  if (c->sec == SEC_NONE) {
    exp_fail(c, line, "key %s outside any section (expected [trace], [recipe.<label>] or [output] first)",
             name);
    return 1;
  }
  for (size_t i = 0; i < c->nents; i++)
    if (strcmp(c->ents[i].key, name) == 0) {
      exp_fail(c, line, "key %s given twice in [%s] (first at line %d)", name, c->secname,
               c->ents[i].line);
      return 1;
    }
  if (!*value) {
    exp_fail(c, line, "empty value for %s in [%s]", name, c->secname);
    return 1;
  }
  if (c->nents == c->capents) {
    size_t cap = c->capents ? 2 * c->capents : 8;
    exp_entry *e = realloc(c->ents, cap * sizeof *e);
    if (!e) {
      c->nomem = 1;
      return 1;
    }
    c->ents = e;
    c->capents = cap;
  }
  exp_entry *e = &c->ents[c->nents];
  e->key = strdup(name);
  e->value = strdup(value);
  e->line = line;
  if (!e->key || !e->value) {
    free(e->key);
    free(e->value);
    c->nomem = 1;
    return 1;
  }
  c->nents++;
  return 1;
}

/* ---------------------------------------------------------------- public */

static void exp_set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void exp_set_err(char *err, size_t errlen, const char *fmt, ...) {
  if (!err || errlen == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

/* base_dir and name from the file path as given. */
static int exp_names(fp8_experiment *ex) {
  const char *path = ex->file;
  const char *slash = strrchr(path, '/');
  if (!slash) {
    ex->base_dir = strdup(".");
  } else {
    size_t n = (size_t)(slash - path);
    while (n > 1 && path[n - 1] == '/') n--; /* "a//q.ini" -> "a" */
    if (n == 0) n = 1;                        /* "/q.ini" -> "/" */
    ex->base_dir = strndup(path, n);
  }
  const char *base = slash ? slash + 1 : path;
  size_t nb = strlen(base);
  if (nb > 4 && strcmp(base + nb - 4, ".ini") == 0) nb -= 4;
  ex->name = strndup(base, nb);
  return ex->base_dir && ex->name ? FP8_OK : FP8_ENOMEM;
}

int fp8_experiment_load(const char *path, fp8_experiment *ex, char *err, size_t errlen) {
  exp_ctx c;
  int status = FP8_OK;
  memset(&c, 0, sizeof c);
  if (err && errlen) err[0] = '\0';
  if (!ex) return FP8_EINVAL;
  memset(ex, 0, sizeof *ex);
  if (!path || !*path) {
    exp_set_err(err, errlen, "experiment file path is empty");
    return FP8_EINVAL;
  }
  c.ex = ex;
  ex->synth_steps = 200;
  ex->synth_seed = 1;
  ex->overflow_budget = 1e-5;
  ex->gemm = 1;
  ex->gemm_max_tokens = 1024;
  ex->step_stride = 1;
  ex->file = strdup(path);
  if (!ex->file || exp_names(ex) != FP8_OK) {
    status = FP8_ENOMEM;
    goto done;
  }
  c.fp = fopen(path, "r");
  if (!c.fp) {
    exp_set_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    status = FP8_EIO;
    goto done;
  }
  int rc = ini_parse_stream(exp_reader, &c, exp_handler, &c);
  if (c.nomem || rc == -2) {
    status = FP8_ENOMEM;
    goto done;
  }
  if (c.read_errno) {
    exp_set_err(err, errlen, "%s: cannot read: %s", path, strerror(c.read_errno));
    status = FP8_EIO;
    goto done;
  }
  exp_section_end(&c);
  if (c.nomem) {
    status = FP8_ENOMEM;
    goto done;
  }
  /* The reader reports every line inih rejects; its count is a backstop. */
  if (rc > 0 && (!c.has_err || rc < c.err_line)) {
    c.has_err = 1;
    c.err_line = rc;
    snprintf(c.err_msg, sizeof c.err_msg, "syntax error");
  }
  if (!c.has_err && !c.trace_line) exp_fail(&c, 0, "no [trace] section");
  if (!c.has_err && c.nlabels == 0) exp_fail(&c, 0, "no [recipe.<label>] section");
  if (c.has_err) {
    exp_set_err(err, errlen, "%s:%d: %s", path, c.err_line, c.err_msg);
    status = FP8_EINVAL;
  }
done:
  if (status == FP8_ENOMEM) exp_set_err(err, errlen, "%s: out of memory", path);
  if (c.fp) fclose(c.fp);
  for (size_t i = 0; i < c.nents; i++) {
    free(c.ents[i].key);
    free(c.ents[i].value);
  }
  free(c.ents);
  free(c.labels);
  free(c.buf);
  if (status != FP8_OK) fp8_experiment_free(ex);
  return status;
}

void fp8_experiment_free(fp8_experiment *ex) {
  if (!ex) return;
  free(ex->file);
  free(ex->base_dir);
  free(ex->name);
  free(ex->trace_path);
  free(ex->synth_preset);
  if (ex->tensor_globs)
    for (size_t i = 0; i < ex->ntensor_globs; i++) free(ex->tensor_globs[i]);
  free(ex->tensor_globs);
  free(ex->out_dir);
  free(ex->configs);
  memset(ex, 0, sizeof *ex);
}

int fp8_experiment_step_selected(const fp8_experiment *ex, int64_t step) {
  if (!ex->has_steps) return 1;
  return step >= ex->step_first && step <= ex->step_last &&
         (step - ex->step_first) % ex->step_stride == 0;
}

int fp8_experiment_tensor_selected(const fp8_experiment *ex, const char *name) {
  if (ex->ntensor_globs == 0) return 1;
  for (size_t i = 0; i < ex->ntensor_globs; i++)
    if (fnmatch(ex->tensor_globs[i], name, 0) == 0) return 1;
  return 0;
}

int fp8_experiment_check_ranks(const fp8_experiment *ex, size_t nranks, const char *trace,
                               char *err, size_t errlen) {
  int line = 0;
  char msg[FP8_ERRLEN];
  if (nranks == 0) {
    /* reduce_amax = false states the default and is fine anywhere; true and reduce_group
     * would silently do nothing on one rank, which is most likely a path pointing at one
     * rank_<r>/ folder instead of the run folder */
    int al = ex->reduce_amax ? ex->reduce_amax_line : 0, gl = ex->reduce_group_line;
    if (al && (!gl || al < gl)) {
      line = al;
      snprintf(msg, sizeof msg,
               "reduce_amax = true needs a multi-rank trace, but %s is a single-rank trace "
               "(point path at the folder that holds rank_0/, rank_1/, ...)",
               trace);
    } else if (gl) {
      line = gl;
      snprintf(msg, sizeof msg,
               "reduce_group needs a multi-rank trace, but %s is a single-rank trace (point "
               "path at the folder that holds rank_0/, rank_1/, ...)",
               trace);
    }
  } else if (ex->reduce_group_line && nranks % (size_t)ex->reduce_group != 0) {
    line = ex->reduce_group_line;
    int o = snprintf(msg, sizeof msg,
                     "reduce_group = %lld does not divide the %zu ranks of %s (expected one of",
                     (long long)ex->reduce_group, nranks, trace);
    for (size_t d = 1, k = 0; d <= nranks && o > 0 && (size_t)o < sizeof msg - 16; d++)
      if (nranks % d == 0) o += snprintf(msg + o, sizeof msg - (size_t)o, "%s %zu", k++ ? "," : "", d);
    if (o > 0 && (size_t)o < sizeof msg - 2) snprintf(msg + o, sizeof msg - (size_t)o, ")");
  }
  if (!line) return FP8_OK;
  if (err && errlen) snprintf(err, errlen, "%s:%d: %s", ex->file, line, msg);
  return FP8_EINVAL;
}

size_t fp8_experiment_reduce_group(const fp8_experiment *ex, size_t nranks) {
  return ex->reduce_group > 0 ? (size_t)ex->reduce_group : nranks;
}

int fp8_experiment_rank_tensor_selected(const fp8_experiment *ex, const char *full,
                                        const char *local) {
  if (ex->ntensor_globs == 0) return 1;
  for (size_t i = 0; i < ex->ntensor_globs; i++) {
    const char *g = ex->tensor_globs[i];
    if (fnmatch(g, strchr(g, '/') ? full : local, 0) == 0) return 1;
  }
  return 0;
}
