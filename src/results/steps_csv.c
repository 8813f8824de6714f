/* steps.csv: one row per (snapshot step, tensor, configuration) (results.h fp8_schema_steps):
 * its columns, its row writer (fp8_steps_csv_put_row, the runner's rows) and its reader
 * (fp8_steps_csv_load, tables.h), which validates every field against the same columns
 * (docs/outputs.md). Parsed rows go to steps_csv_groups.c, which interns the names and groups
 * the rows by configuration key (tensor, recipe, format, history_len, margin, amax_compute),
 * each group in step order. A bad line is reported as "<path>:<line>: <what>" with
 * FP8_EFORMAT; nothing here exits. */
#include "steps_csv_internal.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csv_internal.h" /* the row builder, csv_split, csv_parse_i64, csv_parse_f64 */
#include "outfile.h"      /* fp8_read_stream */
#include "results.h"      /* fp8_schema_steps, FP8_STEPS_COL_* */
#include "trace.h"        /* fp8_tensor_name_check */

/* ------------------------------------------------------------------ the columns */

static const char *const STEPS_COLS[FP8_STEPS_COL_COUNT] = {
    "tensor", "role", "step", "recipe", "kind", "format", "history_len", "margin",
    "amax_compute", "amax", "scale", "n", "nonfinite", "zeros", "overflow", "underflow",
    "subnormal", "mse", "snr_db", "nblocks", "blocks_with_overflow", "log2_scale_min",
    "log2_scale_max", "log2_scale_std", "clipped", "overshoot", "cos_sim", "warmup", "underflow_expected",
    "mse_expected"};

/* steps.csv had 19 columns before the block recipes appended 5, then 24 before issue 13 appended
 * 4 */
const fp8_schema fp8_schema_steps = {"steps.csv", STEPS_COLS, FP8_STEPS_COL_COUNT,
                                     {FP8_STEPS_COL_NBLOCKS, FP8_STEPS_COL_CLIPPED,
                                      FP8_STEPS_COL_WARMUP + 1, FP8_STEPS_COL_COUNT, 0}};

/* ------------------------------------------------------------------ the writer */

double fp8_overshoot(float amax, float scale, fp8_format f) {
  if (!(amax > 0.0f)) return -INFINITY;
  return log2((double)amax * (double)scale / (double)fp8_format_max(f));
}

double fp8_steps_csv_row_overshoot(const fp8_steps_row *r) {
  if (fp8_recipe_kind_is_block(r->config->kind)) return r->block->overshoot;
  if (r->config->kind == FP8_KIND_BF16) return -INFINITY; /* nothing is cast */
  return fp8_overshoot(r->amax, r->scale, r->format);
}

void fp8_steps_csv_put_row(FILE *fp, const fp8_steps_row *r) {
  const fp8_stats *st = r->stats;
  int blk = fp8_recipe_kind_is_block(r->config->kind);
  csv_line l;
  csv_line_init(&l, fp);
  csv_put_row_key(&l, r->tensor, r->role, r->step);
  csv_put_config_cols(&l, r->config, r->format);
  csv_line_num(&l, r->amax);
  csv_line_chr(&l, ',');
  if (fp8_recipe_kind_has_scale(r->config->kind)) csv_line_num(&l, r->scale);
  csv_line_chr(&l, ',');
  csv_put_counts(&l, st);
  csv_line_num(&l, fp8_stats_mse(st));
  csv_line_chr(&l, ',');
  csv_line_num(&l, fp8_stats_snr_db(st));
  if (blk) {
    const fp8_block_stats *b = r->block;
    csv_line_chr(&l, ',');
    csv_line_i64(&l, b->nblocks);
    csv_line_chr(&l, ',');
    csv_line_i64(&l, b->blocks_with_overflow);
    csv_line_chr(&l, ',');
    csv_line_num(&l, b->log2_scale_min);
    csv_line_chr(&l, ',');
    csv_line_num(&l, b->log2_scale_max);
    csv_line_chr(&l, ',');
    csv_line_num(&l, b->log2_scale_std);
    csv_line_chr(&l, ',');
  } else {
    csv_line_str(&l, ",,,,,,");
  }
  csv_line_i64(&l, st->clipped);
  csv_line_chr(&l, ',');
  csv_line_num(&l, fp8_steps_csv_row_overshoot(r));
  csv_line_chr(&l, ',');
  csv_line_num(&l, fp8_stats_cos_sim(st));
  csv_line_str(&l, r->warmup ? ",1," : ",0,");
  /* stochastic rounding's expectation: mse over the finite elements, as the mse column */
  int64_t finite = st->n - st->nonfinite;
  if (blk && !isnan(r->block->underflow_expected)) {
    csv_line_num(&l, r->block->underflow_expected);
    csv_line_chr(&l, ',');
    csv_line_num(&l, finite > 0 ? r->block->sum_sq_err_expected / (double)finite : NAN);
  } else {
    csv_line_chr(&l, ',');
  }
  csv_line_chr(&l, '\n');
  csv_line_flush(&l);
}

/* ------------------------------------------------------------------ the reader */

/* A field as a one-line message quotes it: escaped (fp8_escape), at most 40 bytes of it. */
static const char *show(steps_ctx *c, const char *s) { return fp8_esc(s, c->shown, 44); }

/* The name of steps.csv column col. */
static const char *col_name(int col) { return fp8_schema_steps.columns[col]; }

/* Line 1: the first k columns of fp8_schema_steps, k one of its versions (28; 24 before the
 * saturation columns, 19 for fp8lab 0.1 runs before the block columns); sets c->ncols to k. */
static int check_header(steps_ctx *c, char *line) {
  const fp8_schema *s = &fp8_schema_steps;
  char *f[FP8_STEPS_COL_COUNT + 2];
  /* the caller has taken one '\r' off already; fp8_schema_match_header would accept a second */
  size_t len = strlen(line);
  int k = len && line[len - 1] == '\r' ? 0 : fp8_schema_match_header(s, line);
  if (k) {
    c->ncols = k;
    return FP8_OK;
  }
  int n = csv_split(line, f, s->ncols);
  for (int i = 0; i < n && i < s->ncols; i++)
    if (strcmp(f[i], s->columns[i]) != 0)
      return steps_fail_at(c, 1, "not a %s header: column %d is '%s', expected '%s'", s->file,
                           i + 1, show(c, f[i]), s->columns[i]);
  return steps_fail_at(c, 1, "not a %s header: %s%d columns, expected %d", s->file,
                       n > s->ncols ? "more than " : "", n > s->ncols ? s->ncols : n, s->ncols);
}

/* ------------------------------------------------------------------ one data line */

/* "column <name>: expected <what>, found '<field>'" at the current line. */
static int bad(steps_ctx *c, char **f, int col, const char *what) {
  return steps_fail_at(c, c->line, "column %s: expected %s, found '%s'", col_name(col), what,
                       show(c, f[col]));
}

/* tensor, role: a tensor keeps one role over the file. */
static int parse_tensor(steps_ctx *c, char **f, fp8_step_row *r, steps_priv *pv) {
  const char *name = f[FP8_STEPS_COL_TENSOR];
  if (!*name) return bad(c, f, FP8_STEPS_COL_TENSOR, "a tensor name");
  char why[FP8_ESC_LEN + 64]; /* the trace readers' rules, a rank_<r>/ prefix on top */
  if (fp8_tensor_name_check(name, strlen(name), FP8_NAME_MAX + FP8_RANK_PREFIX_MAX, why,
                            sizeof why) != 0)
    return steps_fail_at(c, c->line, "column tensor: %s: %s", show(c, name), why);
  r->role = FP8_ROLE_UNKNOWN;
  if (*f[FP8_STEPS_COL_ROLE]) {
    int found = 0;
    for (int k = FP8_ROLE_INPUT; k < FP8_ROLE_UNKNOWN; k++)
      if (strcmp(f[FP8_STEPS_COL_ROLE], fp8_role_name((fp8_role)k)) == 0) {
        r->role = (fp8_role)k;
        found = 1;
      }
    if (!found)
      return bad(c, f, FP8_STEPS_COL_ROLE, "input, weight, output, grad_output, grad_input or empty");
  }
  int created;
  steps_istr *t = steps_itab_get(&pv->tensors, f[FP8_STEPS_COL_TENSOR], (int)r->role, c->line,
                                 &created);
  if (!t) return FP8_ENOMEM;
  if (!created && t->attr != (int)r->role)
    return steps_fail_at(c, c->line, "tensor %s has role '%s' here but '%s' at line %lld",
                         show(c, f[FP8_STEPS_COL_TENSOR]), fp8_role_name(r->role),
                         fp8_role_name((fp8_role)t->attr), (long long)t->line);
  r->tensor = t->s;
  return FP8_OK;
}

_Static_assert(FP8_STEPS_COL_KIND == FP8_STEPS_COL_RECIPE + 1 &&
                   FP8_STEPS_COL_FORMAT == FP8_STEPS_COL_RECIPE + 2 &&
                   FP8_STEPS_COL_AMAX_COMPUTE == FP8_STEPS_COL_RECIPE + 5,
               "fp8_config_key_parse's field numbers are steps.csv's columns from recipe on");

/* recipe, kind (a tensor keeps one kind per recipe label: checked with its group, in
 * fp8_steps_csv_parse; sections that share a label give its tensors different kinds), format and
 * the delayed-scaling parameters (present exactly for delayed rows), by fp8_config_key_parse. */
static int parse_config(steps_ctx *c, char **f, fp8_step_row *r, steps_priv *pv) {
  fp8_config_key k;
  const char *what;
  int bad_col = fp8_config_key_parse(f[FP8_STEPS_COL_RECIPE], f[FP8_STEPS_COL_KIND],
                                     f[FP8_STEPS_COL_FORMAT], f[FP8_STEPS_COL_HISTORY_LEN],
                                     f[FP8_STEPS_COL_MARGIN], f[FP8_STEPS_COL_AMAX_COMPUTE], &k,
                                     &what);
  if (bad_col >= 0) return bad(c, f, FP8_STEPS_COL_RECIPE + bad_col, what);
  int created;
  steps_istr *rc = steps_itab_get(&pv->recipes, k.recipe, (int)k.kind, c->line, &created);
  if (!rc) return FP8_ENOMEM;
  r->recipe = rc->s;
  r->kind = k.kind;
  r->format = k.format;
  r->history_len = k.history_len;
  r->margin = k.margin;
  r->amax_compute = k.amax_compute;
  return FP8_OK;
}

/* amax, scale (empty for block kinds and bf16), the counts (each <= n, the class counts <= the finite
 * elements), mse and snr_db. */
static int parse_values(steps_ctx *c, char **f, fp8_step_row *r) {
  if (!csv_parse_f64(f[FP8_STEPS_COL_AMAX], &r->amax) || !(r->amax >= 0))
    return bad(c, f, FP8_STEPS_COL_AMAX, "a number >= 0 or inf");
  int blk = fp8_recipe_kind_is_block(r->kind);
  if (!fp8_recipe_kind_has_scale(r->kind)) {
    if (*f[FP8_STEPS_COL_SCALE])
      return bad(c, f, FP8_STEPS_COL_SCALE,
                 blk ? "an empty field for block kinds (their scales are per block)"
                     : "an empty field for kind bf16 (nothing is cast)");
    r->scale = NAN;
  } else if (!csv_parse_f64(f[FP8_STEPS_COL_SCALE], &r->scale) || !(r->scale > 0) ||
             isinf(r->scale)) {
    return bad(c, f, FP8_STEPS_COL_SCALE, "a finite number > 0");
  }

  /* n, nonfinite, zeros, overflow, underflow, subnormal: adjacent columns */
  int64_t *cnt[6] = {&r->n, &r->nonfinite, &r->zeros, &r->overflow, &r->underflow, &r->subnormal};
  for (int k = 0; k < 6; k++)
    if (!csv_parse_i64(f[FP8_STEPS_COL_N + k], 0, cnt[k]))
      return bad(c, f, FP8_STEPS_COL_N + k, "a count (integer >= 0)");
  for (int k = 1; k < 6; k++)
    if (*cnt[k] > r->n)
      return steps_fail_at(c, c->line, "column %s: %lld exceeds n = %lld",
                           col_name(FP8_STEPS_COL_N + k), (long long)*cnt[k], (long long)r->n);
  int64_t finite = r->n - r->nonfinite;
  for (int k = 2; k < 6; k++)
    if (*cnt[k] > finite)
      return steps_fail_at(c, c->line, "column %s: %lld exceeds the %lld finite elements",
                           col_name(FP8_STEPS_COL_N + k), (long long)*cnt[k], (long long)finite);

  /* an MXFP8 block near FLT_MAX can dequantize to inf: mse inf, snr -inf (docs/semantics.md) */
  if (!csv_parse_f64(f[FP8_STEPS_COL_MSE], &r->mse) || r->mse < 0 || (isinf(r->mse) && !blk))
    return bad(c, f, FP8_STEPS_COL_MSE, "a finite number >= 0 or nan");
  if (isnan(r->mse) != (finite == 0))
    return steps_fail_at(c, c->line, "column %s: '%s' but the row has %lld finite elements (nan "
                         "exactly when there is none)", col_name(FP8_STEPS_COL_MSE),
                         show(c, f[FP8_STEPS_COL_MSE]), (long long)finite);
  if (!csv_parse_f64(f[FP8_STEPS_COL_SNR_DB], &r->snr_db) || isnan(r->snr_db) ||
      (r->snr_db == -INFINITY && !blk))
    return bad(c, f, FP8_STEPS_COL_SNR_DB, "a number or inf");
  return FP8_OK;
}

/* The block statistics: empty for per-tensor kinds; a file without them (the 19-column
 * version) has no block rows. */
static int parse_block_stats(steps_ctx *c, char **f, fp8_step_row *r) {
  int blk = fp8_recipe_kind_is_block(r->kind);
  r->nblocks = r->blocks_with_overflow = -1;
  r->log2_scale_min = r->log2_scale_max = r->log2_scale_std = NAN;
  if (c->ncols <= FP8_STEPS_COL_NBLOCKS) {
    if (blk)
      return bad(c, f, FP8_STEPS_COL_KIND, "a per-tensor kind in a steps.csv without block columns");
    return FP8_OK;
  }
  if (!blk) {
    for (int col = FP8_STEPS_COL_NBLOCKS; col <= FP8_STEPS_COL_LOG2_SCALE_STD; col++)
      if (*f[col]) return bad(c, f, col, "an empty field for per-tensor kinds");
    return FP8_OK;
  }
  if (!csv_parse_i64(f[FP8_STEPS_COL_NBLOCKS], 0, &r->nblocks))
    return bad(c, f, FP8_STEPS_COL_NBLOCKS, "a count (integer >= 0)");
  if (!csv_parse_i64(f[FP8_STEPS_COL_BLOCKS_WITH_OVERFLOW], 0, &r->blocks_with_overflow) ||
      r->blocks_with_overflow > r->nblocks)
    return bad(c, f, FP8_STEPS_COL_BLOCKS_WITH_OVERFLOW, "a count <= nblocks");
  /* log2_scale_min, _max, _std: adjacent columns */
  double *l2[3] = {&r->log2_scale_min, &r->log2_scale_max, &r->log2_scale_std};
  for (int k = 0; k < 3; k++)
    if (!csv_parse_f64(f[FP8_STEPS_COL_LOG2_SCALE_MIN + k], l2[k]))
      return bad(c, f, FP8_STEPS_COL_LOG2_SCALE_MIN + k, "a number or nan");
  return FP8_OK;
}

/* underflow_expected, mse_expected (issue 29): both empty, or (FP4 kinds only) an expected
 * count within the finite elements and an mse >= 0. */
static int parse_expected(steps_ctx *c, char **f, fp8_step_row *r) {
  r->underflow_expected = r->mse_expected = NAN;
  if (c->ncols <= FP8_STEPS_COL_UNDERFLOW_EXPECTED) return FP8_OK;
  const char *u = f[FP8_STEPS_COL_UNDERFLOW_EXPECTED], *m = f[FP8_STEPS_COL_MSE_EXPECTED];
  if (!*u && !*m) return FP8_OK;
  if (!fp8_recipe_kind_is_fp4(r->kind))
    return bad(c, f, FP8_STEPS_COL_UNDERFLOW_EXPECTED, "an empty field for non-FP4 kinds");
  if (!csv_parse_f64(u, &r->underflow_expected) || !(r->underflow_expected >= 0) ||
      r->underflow_expected > (double)(r->n - r->nonfinite))
    return bad(c, f, FP8_STEPS_COL_UNDERFLOW_EXPECTED, "a number in 0..the finite elements");
  int64_t finite = r->n - r->nonfinite;
  if (!csv_parse_f64(m, &r->mse_expected) || isinf(r->mse_expected) ||
      (finite > 0 ? !(r->mse_expected >= 0) : !isnan(r->mse_expected)))
    return bad(c, f, FP8_STEPS_COL_MSE_EXPECTED, "a finite number >= 0 (nan: no finite element)");
  return FP8_OK;
}

/* clipped, overshoot, cos_sim, warmup (issue 13). A file written before them has none: clipped
 * is taken as overflow (what such a file can say; the table's has_clipped is 0), overshoot and
 * cos_sim NaN, no warm-up. */
static int parse_saturation(steps_ctx *c, char **f, fp8_step_row *r) {
  r->clipped = r->overflow;
  r->overshoot = r->cos_sim = NAN;
  r->warmup = 0;
  if (c->ncols <= FP8_STEPS_COL_CLIPPED) return FP8_OK;
  if (!csv_parse_i64(f[FP8_STEPS_COL_CLIPPED], 0, &r->clipped) || r->clipped > r->overflow)
    return bad(c, f, FP8_STEPS_COL_CLIPPED, "a count <= overflow");
  if (!csv_parse_f64(f[FP8_STEPS_COL_OVERSHOOT], &r->overshoot) || isnan(r->overshoot))
    return bad(c, f, FP8_STEPS_COL_OVERSHOOT, "a number, -inf or inf");
  if (!csv_parse_f64(f[FP8_STEPS_COL_COS_SIM], &r->cos_sim) ||
      !(isnan(r->cos_sim) || (r->cos_sim >= -1.0 && r->cos_sim <= 1.0)))
    return bad(c, f, FP8_STEPS_COL_COS_SIM, "a number in -1..1 or nan");
  const char *w = f[FP8_STEPS_COL_WARMUP];
  if (strcmp(w, "0") && strcmp(w, "1")) return bad(c, f, FP8_STEPS_COL_WARMUP, "0 or 1");
  r->warmup = w[0] == '1';
  return parse_expected(c, f, r);
}

static int parse_row(steps_ctx *c, char *line, fp8_step_row *r, steps_priv *pv) {
  char *f[FP8_STEPS_COL_COUNT + 2];
  int nf = csv_split(line, f, c->ncols);
  if (nf != c->ncols)
    return steps_fail_at(c, c->line, "expected %d fields, found %s%d", c->ncols,
                         nf > c->ncols ? "more than " : "", nf > c->ncols ? c->ncols : nf);
  memset(r, 0, sizeof *r);
  r->line = c->line;
  int rc = parse_tensor(c, f, r, pv);
  if (rc) return rc;
  if (!csv_parse_i64(f[FP8_STEPS_COL_STEP], 0, &r->step))
    return bad(c, f, FP8_STEPS_COL_STEP, "a step number >= 0");
  if ((rc = parse_config(c, f, r, pv)) != FP8_OK) return rc;
  if ((rc = parse_values(c, f, r)) != FP8_OK) return rc;
  if ((rc = parse_block_stats(c, f, r)) != FP8_OK) return rc;
  return parse_saturation(c, f, r);
}

/* A tensor keeps one kind per recipe label (the rows of a (tensor, recipe) pair come from one
 * [recipe.*] section). Checked against the row's group, and for a group seen first against
 * the (tensor, recipe) pair's first group (pv->pairs, keyed "tensor,recipe": no field holds a
 * comma), so that a file costs one pair lookup per group, not per row. */
static int check_kind(steps_ctx *c, steps_priv *pv, const steps_gmap *gm, size_t g, int created,
                      const fp8_step_row *r) {
  const fp8_steps_group *grp = &gm->g[g];
  int64_t line = gm->first_line[g];
  fp8_recipe_kind kind = grp->key.kind;
  if (created) {
    size_t nt = strlen(r->tensor), nr = strlen(r->recipe);
    char stack[256], *key = nt + nr + 2 <= sizeof stack ? stack : malloc(nt + nr + 2);
    if (!key) return FP8_ENOMEM;
    memcpy(key, r->tensor, nt);
    key[nt] = ',';
    memcpy(key + nt + 1, r->recipe, nr + 1);
    int made;
    steps_istr *p = steps_itab_get(&pv->pairs, key, (int)r->kind, c->line, &made);
    if (key != stack) free(key);
    if (!p) return FP8_ENOMEM;
    kind = (fp8_recipe_kind)p->attr;
    line = p->line;
  }
  if (kind == r->kind) return FP8_OK;
  return steps_fail_at(c, c->line, "tensor %s: recipe %s is %s here but %s at line %lld",
                       show(c, r->tensor), r->recipe, fp8_recipe_kind_name(r->kind),
                       fp8_recipe_kind_name(kind), (long long)line);
}

/* ------------------------------------------------------------------ public */

int fp8_steps_csv_parse(const char *name, const char *text, size_t len, fp8_steps_table *t,
                        char *err, size_t errlen) {
  memset(t, 0, sizeof *t);
  if (err && errlen) err[0] = 0;
  steps_ctx c = {.name = name ? name : "steps.csv", .err = err, .errlen = errlen};
  int rc = FP8_OK;
  char *line = NULL;
  size_t linecap = 0, cap = 0, gcap = 0;
  size_t *row_group = NULL;
  steps_gmap gm = {0};
  steps_priv *pv = calloc(1, sizeof *pv);
  t->path = strdup(c.name);
  if (!pv || !t->path || (!text && len)) {
    free(pv);
    rc = text || !len ? FP8_ENOMEM : FP8_EINVAL;
    if (rc == FP8_ENOMEM) snprintf(err, errlen, "%s: out of memory", c.name);
    else snprintf(err, errlen, "%s: no text", c.name);
    goto done;
  }
  t->priv_ = pv;
  if (len == 0) {
    rc = steps_fail_at(&c, 1, "empty file (expected the %s header)", fp8_schema_steps.file);
    goto done;
  }
  size_t pos = 0;
  while (pos < len) {
    const char *p = text + pos;
    const char *nl = memchr(p, '\n', len - pos);
    size_t n = nl ? (size_t)(nl - p) : len - pos;
    pos += n + (nl != NULL);
    c.line++;
    if (n && p[n - 1] == '\r') n--;
    if (memchr(p, 0, n)) {
      rc = steps_fail_at(&c, c.line, "NUL byte in the line");
      goto done;
    }
    if (n + 1 > linecap) {
      size_t nc = (n + 1) * 2;
      char *l = realloc(line, nc);
      if (!l) {
        rc = FP8_ENOMEM;
        goto done;
      }
      line = l;
      linecap = nc;
    }
    memcpy(line, p, n);
    line[n] = 0;
    if (c.line == 1) {
      rc = check_header(&c, line);
      if (rc) goto done;
      t->has_clipped = c.ncols > FP8_STEPS_COL_CLIPPED;
      continue;
    }
    if (n == 0) {
      rc = steps_fail_at(&c, c.line, "empty line");
      goto done;
    }
    fp8_step_row *rows = fp8_grow(t->rows, t->nrows, &cap, sizeof *rows, 1024);
    size_t *rg = rows ? fp8_grow(row_group, t->nrows, &gcap, sizeof *rg, 1024) : NULL;
    if (rows) t->rows = rows;
    if (rg) row_group = rg;
    if (!rows || !rg) {
      rc = FP8_ENOMEM;
      goto done;
    }
    fp8_step_row *r = &t->rows[t->nrows];
    rc = parse_row(&c, line, r, pv);
    if (rc) goto done;
    size_t ngroups = gm.n;
    size_t g = steps_gmap_get(&gm, r);
    if (g == (size_t)-1) {
      rc = FP8_ENOMEM;
      goto done;
    }
    if ((rc = check_kind(&c, pv, &gm, g, gm.n > ngroups, r)) != FP8_OK) goto done;
    row_group[t->nrows++] = g;
  }
  rc = steps_build_groups(&c, t, pv, &gm, row_group);
done:
  if (rc == FP8_ENOMEM && err && errlen) snprintf(err, errlen, "%s: out of memory", c.name);
  free(line);
  free(row_group);
  steps_gmap_free(&gm);
  if (rc) fp8_steps_csv_free(t);
  return rc;
}

int fp8_steps_csv_load(const char *path, fp8_steps_table *t, char *err, size_t errlen) {
  memset(t, 0, sizeof *t);
  FILE *fp = fopen(path, "rb");
  if (!fp) {
    snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    return FP8_EIO;
  }
  size_t n = 0;
  char *buf = NULL;
  int rc = fp8_read_stream(fp, &buf, &n);
  if (rc == FP8_ENOMEM) snprintf(err, errlen, "%s: out of memory", path);
  else if (rc == FP8_EIO) snprintf(err, errlen, "%s: read failed: %s", path, strerror(errno));
  fclose(fp);
  if (rc == FP8_OK) rc = fp8_steps_csv_parse(path, buf, n, t, err, errlen);
  free(buf);
  return rc;
}

