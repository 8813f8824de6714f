/* results.c: the output schemas and their row writers (see results.h). */
#include "results.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.h"
#include "outfile.h"

static const char *const STEPS_COLS[FP8_STEPS_COL_COUNT] = {
    "tensor", "role", "step", "recipe", "kind", "format", "history_len", "margin",
    "amax_compute", "amax", "scale", "n", "nonfinite", "zeros", "overflow", "underflow",
    "subnormal", "mse", "snr_db", "nblocks", "blocks_with_overflow", "log2_scale_min",
    "log2_scale_max", "log2_scale_std", "clipped", "overshoot", "cos_sim", "warmup", "underflow_expected",
    "mse_expected"};

static const char *const SUMMARY_COLS[FP8_SUMMARY_COL_COUNT] = {
    "tensor", "role", "recipe", "kind", "format", "history_len", "margin", "amax_compute",
    "steps", "n", "nonfinite", "zeros", "overflow", "underflow", "subnormal", "overflow_rate",
    "underflow_rate", "subnormal_rate", "steps_with_overflow", "mse", "snr_db", "snr_db_min",
    "amax_max", "clipped", "clipped_rate", "steps_with_clipped", "overshoot_max", "scale_inv_min",
    "scale_inv_max", "cos_sim_min"};

static const char *const GEMM_COLS[FP8_GEMM_COL_COUNT] = {
    "layer", "gemm", "step", "recipe", "kind", "history_len", "margin", "amax_compute",
    "rel_error", "rel_error_lo", "rel_error_hi"};

static const char *const STREAM_COLS[FP8_STREAM_COL_COUNT] = {
    "tensor", "role", "step", "recipe", "format", "history_len", "margin", "amax_compute",
    "snapshot", "amax", "scale", "overshoot", "warmup", "micro", "te_scale"};

static const char *const HIST_COLS[FP8_HIST_COL_COUNT] = {"tensor", "step", "log2_bin", "count"};

/* steps.csv had 19 columns before the block recipes appended 5, then 24 before issue 13 appended
 * 4; summary.csv had 23 */
const fp8_schema fp8_schema_steps = {"steps.csv", STEPS_COLS, FP8_STEPS_COL_COUNT,
                                     {FP8_STEPS_COL_NBLOCKS, FP8_STEPS_COL_CLIPPED,
                                      FP8_STEPS_COL_WARMUP + 1, FP8_STEPS_COL_COUNT, 0}};
const fp8_schema fp8_schema_summary = {"summary.csv", SUMMARY_COLS, FP8_SUMMARY_COL_COUNT,
                                       {FP8_SUMMARY_COL_CLIPPED, FP8_SUMMARY_COL_COUNT, 0, 0}};
/* stream.csv had 13 columns before issue 17 appended micro and te_scale */
const fp8_schema fp8_schema_stream = {"stream.csv", STREAM_COLS, FP8_STREAM_COL_COUNT,
                                      {FP8_STREAM_COL_MICRO, FP8_STREAM_COL_COUNT, 0, 0}};
/* gemm.csv: 9 columns (exact errors), 11 with the sampled mode's interval (issue 27) */
const fp8_schema fp8_schema_gemm = {"gemm.csv", GEMM_COLS, FP8_GEMM_COL_COUNT,
                                    {FP8_GEMM_COL_REL_ERROR_LO, FP8_GEMM_COL_COUNT, 0, 0}};
const fp8_schema fp8_schema_histograms = {"histograms.csv", HIST_COLS, FP8_HIST_COL_COUNT,
                                          {FP8_HIST_COL_COUNT, 0, 0, 0}};

void fp8_schema_put_header(FILE *fp, const fp8_schema *s) {
  fp8_schema_put_header_n(fp, s, s->ncols);
}

void fp8_schema_put_header_n(FILE *fp, const fp8_schema *s, int ncols) {
  for (int i = 0; i < ncols && i < s->ncols; i++) {
    if (i) fputc(',', fp);
    fputs(s->columns[i], fp);
  }
  fputc('\n', fp);
}

int fp8_schema_match_header(const fp8_schema *s, const char *line) {
  size_t len = strlen(line);
  if (len && line[len - 1] == '\r') len--;
  /* how many leading columns the line names exactly */
  int k = 0;
  size_t pos = 0;
  while (k < s->ncols) {
    size_t n = strlen(s->columns[k]);
    if (pos + n > len || memcmp(line + pos, s->columns[k], n) != 0) return 0;
    pos += n;
    k++;
    if (pos == len) break;
    if (line[pos] != ',') return 0;
    pos++;
  }
  if (pos != len) return 0;
  for (int v = 0; v < 5 && s->versions[v]; v++)
    if (s->versions[v] == k) return k;
  return 0;
}

int fp8_schema_column(const fp8_schema *s, const char *name) {
  for (int i = 0; i < s->ncols; i++)
    if (strcmp(s->columns[i], name) == 0) return i;
  return -1;
}

/* ------------------------------------------------------------------ a row, built in memory
 *
 * The row writers build each line in a buffer and write it once: integers by hand, numbers as
 * fp8_csv_put_num writes them ("%.9g", inf/-inf/nan) through a small memo of the last numbers
 * formatted (an amax repeats for every configuration of a tensor, a scale and its statistics
 * for every configuration that shares them), which is what makes a sweep's many rows cheap.
 * The text is byte for byte fp8_csv_put_num's. The memo is each thread's own (a run's
 * steps.csv and stream.csv rows are written by a thread of their own: run_writer.c). */

typedef struct {
  FILE *fp;
  size_t n;        /* bytes in buf */
  char buf[1024];  /* the line so far (a longer line is written in pieces) */
} line_t;

static void line_init(line_t *l, FILE *fp) {
  l->fp = fp;
  l->n = 0;
}

/* k bytes into buf (n of cap used): when they do not fit, what there is goes to fp first, and
 * what cannot fit at all goes straight to fp. */
static void buf_put(FILE *fp, char *buf, size_t cap, size_t *n, const char *s, size_t k) {
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
static void line_put(line_t *l, const char *s, size_t k) {
  buf_put(l->fp, l->buf, sizeof l->buf, &l->n, s, k);
}

static void line_str(line_t *l, const char *s) { line_put(l, s, strlen(s)); }
static void line_chr(line_t *l, char c) { line_put(l, &c, 1); }

static void line_i64(line_t *l, long long v) {
  char b[24], *q = b + sizeof b;
  unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
  do {
    *--q = (char)('0' + u % 10);
    u /= 10;
  } while (u);
  if (v < 0) *--q = '-';
  line_put(l, q, (size_t)(b + sizeof b - q));
}

typedef struct {
  uint64_t bits;
  int used;
  uint8_t len;
  char s[FP8_NUM_TEXT_MAX];
} num_memo;
static _Thread_local num_memo g_memo[512]; /* each thread its own (above) */

static void line_num(line_t *l, double v) {
  uint64_t bits;
  memcpy(&bits, &v, sizeof bits);
  num_memo *m = &g_memo[(bits ^ (bits >> 29) ^ (bits >> 47)) & 511];
  if (!m->used || m->bits != bits) {
    m->len = (uint8_t)fp8_num_text(v, m->s);
    m->bits = bits;
    m->used = 1;
  }
  line_put(l, m->s, m->len);
}

static void line_flush(line_t *l) {
  if (l->n) fwrite(l->buf, 1, l->n, l->fp);
  l->n = 0;
}

/* recipe, kind, format and the three delayed-scaling columns (empty for other kinds) */
static void put_config_cols(line_t *l, const fp8_config *c, fp8_format f) {
  line_str(l, c->label);
  line_chr(l, ',');
  line_str(l, fp8_recipe_kind_name(c->kind));
  line_chr(l, ',');
  line_str(l, fp8_kind_format_name(c->kind, f));
  line_chr(l, ',');
  if (c->kind == FP8_KIND_DELAYED) {
    line_i64(l, c->history_len);
    line_chr(l, ',');
    line_i64(l, c->margin);
    line_chr(l, ',');
    line_str(l, fp8_amax_compute_name(c->amax_compute));
    line_chr(l, ',');
  } else {
    line_str(l, ",,,");
  }
}

/* tensor, role, step: the first columns of steps.csv and stream.csv */
static void put_row_key(line_t *l, const char *tensor, fp8_role role, int64_t step) {
  line_str(l, tensor);
  line_chr(l, ',');
  line_str(l, fp8_role_name(role));
  line_chr(l, ',');
  line_i64(l, step);
  line_chr(l, ',');
}

static void put_counts(line_t *l, const fp8_stats *st) {
  const int64_t v[6] = {st->n, st->nonfinite, st->zeros, st->overflow, st->underflow,
                        st->subnormal};
  for (int k = 0; k < 6; k++) {
    line_i64(l, v[k]);
    line_chr(l, ',');
  }
}

double fp8_overshoot(float amax, float scale, fp8_format f) {
  if (!(amax > 0.0f)) return -INFINITY;
  return log2((double)amax * (double)scale / (double)fp8_format_max(f));
}

double fp8_steps_row_overshoot(const fp8_steps_row *r) {
  if (fp8_recipe_kind_is_block(r->config->kind)) return r->block->overshoot;
  if (r->config->kind == FP8_KIND_BF16) return -INFINITY; /* nothing is cast */
  return fp8_overshoot(r->amax, r->scale, r->format);
}

void fp8_results_put_steps_row(FILE *fp, const fp8_steps_row *r) {
  const fp8_stats *st = r->stats;
  int blk = fp8_recipe_kind_is_block(r->config->kind);
  line_t l;
  line_init(&l, fp);
  put_row_key(&l, r->tensor, r->role, r->step);
  put_config_cols(&l, r->config, r->format);
  line_num(&l, r->amax);
  line_chr(&l, ',');
  if (fp8_recipe_kind_has_scale(r->config->kind)) line_num(&l, r->scale);
  line_chr(&l, ',');
  put_counts(&l, st);
  line_num(&l, fp8_stats_mse(st));
  line_chr(&l, ',');
  line_num(&l, fp8_stats_snr_db(st));
  if (blk) {
    const fp8_block_stats *b = r->block;
    line_chr(&l, ',');
    line_i64(&l, b->nblocks);
    line_chr(&l, ',');
    line_i64(&l, b->blocks_with_overflow);
    line_chr(&l, ',');
    line_num(&l, b->log2_scale_min);
    line_chr(&l, ',');
    line_num(&l, b->log2_scale_max);
    line_chr(&l, ',');
    line_num(&l, b->log2_scale_std);
    line_chr(&l, ',');
  } else {
    line_str(&l, ",,,,,,");
  }
  line_i64(&l, st->clipped);
  line_chr(&l, ',');
  line_num(&l, fp8_steps_row_overshoot(r));
  line_chr(&l, ',');
  line_num(&l, fp8_stats_cos_sim(st));
  line_str(&l, r->warmup ? ",1," : ",0,");
  /* stochastic rounding's expectation: mse over the finite elements, as the mse column */
  int64_t finite = st->n - st->nonfinite;
  if (blk && !isnan(r->block->underflow_expected)) {
    line_num(&l, r->block->underflow_expected);
    line_chr(&l, ',');
    line_num(&l, finite > 0 ? r->block->sum_sq_err_expected / (double)finite : NAN);
  } else {
    line_chr(&l, ',');
  }
  line_chr(&l, '\n');
  line_flush(&l);
}

/* A block of rows, written when full and at the end. */
typedef struct {
  FILE *fp;
  size_t n;
  char buf[32768];
} block_t;

/* The text of v as line_num writes it (fp8_num_text), into s (FP8_NUM_TEXT_MAX); its length. */
static size_t num_into(double v, char *s) {
  line_t l;
  l.fp = NULL;
  l.n = 0;
  line_num(&l, v);
  memcpy(s, l.buf, l.n);
  return l.n;
}

/* n bytes from s to d in 16-byte pieces: reads and writes up to 15 bytes past n, which the
 * callers' arrays have room for (a row's few short pieces: memcpy of a variable length was a
 * call or a `rep movs` each, a quarter of the stream's text) */
static inline void copy16(char *d, const char *s, size_t n) {
  for (size_t i = 0; i < n; i += 16) memcpy(d + i, s + i, 16);
}

/* A configuration's columns of a stream row, "recipe,format,history_len,margin,amax_compute":
 * the same for every tensor and step of a run, so made once per (configuration, format) into
 * the run's fp8_stream_texts for its first CFG_CACHE configurations (one past them, or without
 * a table, is made into the caller's spare each time). */
enum { CFG_CACHE = 128 };
typedef struct {
  uint8_t ready, n;
  char s[126 + 16]; /* a label is under 64 bytes, the rest under 48; room for copy16 */
} cfg_text;

struct fp8_stream_texts {
  cfg_text t[CFG_CACHE * 2]; /* [c * 2 + format] */
};

fp8_stream_texts *fp8_stream_texts_new(void) { return calloc(1, sizeof(fp8_stream_texts)); }
void fp8_stream_texts_free(fp8_stream_texts *t) { free(t); }

static const cfg_text *config_text(fp8_stream_texts *texts, const fp8_config *cf, size_t c,
                                   fp8_format f, cfg_text *spare) {
  cfg_text *ct = texts && c < CFG_CACHE && (unsigned)f < 2 ? &texts->t[c * 2 + (size_t)f] : spare;
  if (ct != spare && ct->ready) return ct;
  line_t l;
  line_init(&l, NULL);
  line_str(&l, cf->label);
  line_chr(&l, ',');
  line_str(&l, fp8_format_name(f));
  line_chr(&l, ',');
  line_i64(&l, cf->history_len);
  line_chr(&l, ',');
  line_i64(&l, cf->margin);
  line_chr(&l, ',');
  line_str(&l, fp8_amax_compute_name(cf->amax_compute));
  memcpy(ct->s, l.buf, l.n);
  ct->n = (uint8_t)l.n;
  ct->ready = 1;
  return ct;
}

void fp8_results_put_stream_row(FILE *fp, const fp8_stream_row *r) {
  line_t l;
  cfg_text spare;
  const cfg_text *ct = config_text(NULL, r->config, 0, r->format, &spare);
  line_init(&l, fp);
  put_row_key(&l, r->tensor, r->role, r->step);
  line_put(&l, ct->s, ct->n);
  line_str(&l, r->snapshot ? ",1," : ",0,");
  line_num(&l, r->amax);
  line_chr(&l, ',');
  line_num(&l, r->scale);
  line_chr(&l, ',');
  line_num(&l, fp8_overshoot(r->amax, r->scale, r->format));
  line_str(&l, r->warmup ? ",1," : ",0,");
  line_i64(&l, r->micro);
  line_chr(&l, ',');
  if (r->te_scale > 0.0f) line_num(&l, r->te_scale);
  line_chr(&l, '\n');
  line_flush(&l);
}

void fp8_results_put_stream_rows(FILE *fp, const fp8_stream_row *base, const fp8_config *configs,
                                 const fp8_format *formats, const float *scales,
                                 const unsigned char *want, size_t nconfigs,
                                 fp8_stream_texts *texts) {
  /* the key "tensor,role,step," and the parts around the scale: ",snap,amax," before it and
   * ",warmup,micro,te_scale\n" after the overshoot; a name too long for the key's room goes
   * row by row */
  line_t key, mid, tail;
  line_init(&key, NULL);
  size_t tl = strlen(base->tensor);
  if (tl + 64 > sizeof key.buf) {
    for (size_t c = 0; c < nconfigs; c++) {
      if (!want[c]) continue;
      fp8_stream_row r = *base;
      r.config = &configs[c];
      r.format = formats[c];
      r.scale = scales[c];
      fp8_results_put_stream_row(fp, &r);
    }
    return;
  }
  put_row_key(&key, base->tensor, base->role, base->step);
  line_init(&mid, NULL);
  line_str(&mid, base->snapshot ? ",1," : ",0,");
  line_num(&mid, base->amax);
  line_chr(&mid, ',');
  line_init(&tail, NULL);
  line_str(&tail, base->warmup ? ",1," : ",0,");
  line_i64(&tail, base->micro);
  line_chr(&tail, ',');
  if (base->te_scale > 0.0f) line_num(&tail, base->te_scale);
  line_chr(&tail, '\n');
  /* the distinct (scale, format) pairs of this call: their texts and overshoots */
  enum { NSEEN = 16 };
  struct {
    uint32_t bits;
    fp8_format f;
    uint8_t sl, ol;
    char s[FP8_NUM_TEXT_MAX], o[FP8_NUM_TEXT_MAX];
  } seen[NSEEN];
  size_t nseen = 0, next = 0;
  block_t blk, *b = &blk; /* the rows of the call, written at once (32 KiB at a time) */
  b->fp = fp;
  b->n = 0;
  for (size_t c = 0; c < nconfigs; c++) {
    if (!want[c]) continue;
    uint32_t bits;
    memcpy(&bits, &scales[c], sizeof bits);
    size_t k = 0;
    while (k < nseen && !(seen[k].bits == bits && seen[k].f == formats[c])) k++;
    if (k == nseen) { /* a new one (the table full: the oldest goes) */
      k = nseen < NSEEN ? nseen++ : next++ % NSEEN;
      seen[k].bits = bits;
      seen[k].f = formats[c];
      seen[k].sl = (uint8_t)num_into(scales[c], seen[k].s);
      /* (an overshoot is new at each step: not through the memo) */
      seen[k].ol = (uint8_t)fp8_num_text(fp8_overshoot(base->amax, scales[c], formats[c]), seen[k].o);
    }
    cfg_text spare;
    const cfg_text *ct = config_text(texts, &configs[c], c, formats[c], &spare);
    /* the row's pieces straight into the block (a row is under its 1 KiB: the key's room was
     * checked above, a label is under 64 bytes) */
    size_t len = key.n + ct->n + mid.n + seen[k].sl + 1 + seen[k].ol + tail.n;
    if (b->n + len + 16 > sizeof b->buf) {
      fwrite(b->buf, 1, b->n, fp);
      b->n = 0;
    }
    char *o = b->buf + b->n;
    copy16(o, key.buf, key.n);
    o += key.n;
    copy16(o, ct->s, ct->n);
    o += ct->n;
    copy16(o, mid.buf, mid.n);
    o += mid.n;
    copy16(o, seen[k].s, seen[k].sl);
    o += seen[k].sl;
    *o++ = ',';
    copy16(o, seen[k].o, seen[k].ol);
    o += seen[k].ol;
    copy16(o, tail.buf, tail.n);
    b->n += len;
  }
  if (b->n) fwrite(b->buf, 1, b->n, fp);
}

void fp8_summary_acc_init(fp8_summary_acc *a) {
  memset(a, 0, sizeof *a);
  fp8_stats_init(&a->st);
  a->snr_min = INFINITY;
  a->overshoot_max = -INFINITY;
  a->scale_inv_min = a->scale_inv_max = NAN;
  a->cos_min = INFINITY;
}

void fp8_summary_acc_add(fp8_summary_acc *a, const fp8_steps_row *r) {
  const fp8_stats *st = r->stats;
  double snr = fp8_stats_snr_db(st), cs = fp8_stats_cos_sim(st), ov = fp8_steps_row_overshoot(r);
  a->steps++;
  a->steps_with_overflow += st->overflow > 0;
  a->steps_with_clipped += st->clipped > 0;
  fp8_stats_merge(&a->st, st);
  if (snr < a->snr_min) a->snr_min = snr;
  if (r->amax > a->amax_max) a->amax_max = r->amax;
  if (ov > a->overshoot_max) a->overshoot_max = ov;
  if (cs < a->cos_min) a->cos_min = cs;
  if (fp8_recipe_kind_has_scale(r->config->kind)) {
    float si = 1.0f / r->scale; /* RN32(1/s): the scale_inv TE stores and the dequantization uses */
    if (!(si >= a->scale_inv_min)) a->scale_inv_min = si; /* NaN start: the first step sets it */
    if (!(si <= a->scale_inv_max)) a->scale_inv_max = si;
  }
}

void fp8_results_put_summary_row(FILE *fp, const char *tensor, fp8_role role,
                                 const fp8_config *cf, fp8_format format,
                                 const fp8_summary_acc *a) {
  const fp8_stats *st = &a->st;
  double finite = (double)(st->n - st->nonfinite);
  line_t l;
  line_init(&l, fp);
  line_str(&l, tensor);
  line_chr(&l, ',');
  line_str(&l, fp8_role_name(role));
  line_chr(&l, ',');
  put_config_cols(&l, cf, format);
  line_i64(&l, a->steps);
  line_chr(&l, ',');
  put_counts(&l, st);
  line_num(&l, finite > 0 ? (double)st->overflow / finite : NAN);
  line_chr(&l, ',');
  line_num(&l, finite > 0 ? (double)st->underflow / finite : NAN);
  line_chr(&l, ',');
  line_num(&l, finite > 0 ? (double)st->subnormal / finite : NAN);
  line_chr(&l, ',');
  line_i64(&l, a->steps_with_overflow);
  line_chr(&l, ',');
  line_num(&l, fp8_stats_mse(st));
  line_chr(&l, ',');
  line_num(&l, fp8_stats_snr_db(st));
  line_chr(&l, ',');
  line_num(&l, a->snr_min);
  line_chr(&l, ',');
  line_num(&l, a->amax_max);
  line_chr(&l, ',');
  line_i64(&l, st->clipped);
  line_chr(&l, ',');
  line_num(&l, finite > 0 ? (double)st->clipped / finite : NAN);
  line_chr(&l, ',');
  line_i64(&l, a->steps_with_clipped);
  line_chr(&l, ',');
  line_num(&l, a->overshoot_max);
  line_chr(&l, ',');
  if (fp8_recipe_kind_has_scale(cf->kind)) line_num(&l, a->scale_inv_min);
  line_chr(&l, ',');
  if (fp8_recipe_kind_has_scale(cf->kind)) line_num(&l, a->scale_inv_max);
  line_chr(&l, ',');
  line_num(&l, a->cos_min);
  line_chr(&l, '\n');
  line_flush(&l);
}

void fp8_results_put_gemm_row(FILE *fp, const char *layer, int gemm_kind, int64_t step,
                              const fp8_config *cf, double rel_error, const double *interval) {
  line_t l;
  line_init(&l, fp);
  line_str(&l, layer);
  line_chr(&l, ',');
  line_str(&l, fp8_gemm_name((fp8_gemm_kind)gemm_kind));
  line_chr(&l, ',');
  line_i64(&l, step);
  line_chr(&l, ',');
  line_str(&l, cf->label);
  line_chr(&l, ',');
  line_str(&l, fp8_recipe_kind_name(cf->kind));
  line_chr(&l, ',');
  if (cf->kind == FP8_KIND_DELAYED) {
    line_i64(&l, cf->history_len);
    line_chr(&l, ',');
    line_i64(&l, cf->margin);
    line_chr(&l, ',');
    line_str(&l, fp8_amax_compute_name(cf->amax_compute));
    line_chr(&l, ',');
  } else {
    line_str(&l, ",,,");
  }
  line_num(&l, rel_error);
  if (interval) {
    line_chr(&l, ',');
    line_num(&l, interval[0]);
    line_chr(&l, ',');
    line_num(&l, interval[1]);
  }
  line_chr(&l, '\n');
  line_flush(&l);
}

void fp8_results_put_histogram(FILE *fp, const char *tensor, int64_t step,
                               const int64_t hist[FP8_LOG2_HIST_BINS]) {
  line_t l;
  line_init(&l, fp);
  for (int b = 0; b < FP8_LOG2_HIST_BINS; b++) {
    if (!hist[b]) continue;
    line_str(&l, tensor);
    line_chr(&l, ',');
    line_i64(&l, step);
    line_chr(&l, ',');
    line_i64(&l, b + FP8_LOG2_HIST_MIN);
    line_chr(&l, ',');
    line_i64(&l, hist[b]);
    line_chr(&l, '\n');
    if (l.n > 768) line_flush(&l);
  }
  line_flush(&l);
}
