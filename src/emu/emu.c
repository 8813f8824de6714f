/* emu.c: the closed-loop emulator's library (emu.h): one recipe label of an experiment file,
 * a slot per tensor with its configuration resolved once (format, delayed state, current or
 * block parameters), and the cast of fp8lab's engines on caller memory. Every number comes from
 * the simulator's own functions, called as the CPU engine (src/cpu/engine_cpu_work.c) and the
 * runner's plan (src/run/run_plan.c) call them, so that an emulated run's scales and casts are
 * fp8lab run's. Only the fp8emu_* symbols are exported (emu.map). */
#include "emu.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "experiment.h"
#include "recipe.h"
#include "util.h"

/* One tensor's state: its configuration, resolved for its role, and what a cast needs. */
typedef struct {
  char *name;
  const fp8_config *cf;
  fp8_format format;
  fp8_delayed_state dl;  /* delayed only */
  fp8_current_params cp; /* current only */
  fp8_block_params bp;   /* block and FP4 kinds only */
  float scale;           /* current: the last cast's (NaN before the first) */
  float pending;         /* max of the casts' amaxes since the last update */
  char settings[512];
} emu_slot;

struct fp8emu {
  fp8_experiment ex;
  size_t *secs; /* the sections of the label, file order */
  size_t nsecs;
  emu_slot *slots;
  size_t nslots, cap;
  fp8_strset names; /* name -> slot (keys borrowed from slots[].name) */
  float *scratch;   /* the cast's output when xhat overlaps x (the loops read x after writing) */
  size_t scratch_cap;
};

int fp8emu_abi(void) { return FP8EMU_ABI; }

/* The labels of the file's sections, each once, in file order: "a, b, c". */
static void list_labels(const fp8_experiment *ex, char *buf, size_t len) {
  size_t o = 0;
  buf[0] = '\0';
  for (size_t s = 0; s < ex->nsections && o < len; s++) {
    if (ex->sections[s].label_first != s) continue;
    char shown[FP8_ESC_LEN];
    o += (size_t)snprintf(buf + o, len - o, "%s%s", o ? ", " : "",
                          fp8_esc(ex->sections[s].label, shown, sizeof shown));
  }
}

fp8emu *fp8emu_open(const char *ini, const char *label, char *err, size_t errlen) {
  if (!ini || !label) {
    fp8_errorf(FP8_EINVAL, err, errlen, "fp8emu_open: %s is NULL", ini ? "label" : "ini");
    return NULL;
  }
  fp8emu *e = calloc(1, sizeof *e);
  if (!e) {
    fp8_errorf(FP8_ENOMEM, err, errlen, "%s: out of memory", ini);
    return NULL;
  }
  if (fp8_experiment_load(ini, &e->ex, err, errlen) != FP8_OK) {
    free(e);
    return NULL;
  }
  const fp8_experiment *ex = &e->ex;
  char shown[FP8_ESC_LEN];
  e->secs = calloc(ex->nsections + 1, sizeof *e->secs);
  if (!e->secs) {
    fp8_errorf(FP8_ENOMEM, err, errlen, "%s: out of memory", ini);
    goto fail;
  }
  for (size_t s = 0; s < ex->nsections; s++) {
    const fp8_recipe_section *sec = &ex->sections[s];
    if (strcmp(sec->label, label) != 0) continue;
    if (sec->nconfigs != 1) {
      fp8_errorf(FP8_EINVAL, err, errlen,
                 "%s:%d: [recipe.%s] (label %s) sweeps a key (%zu configurations): the "
                 "emulator trains one recipe, give each key of the label one value",
                 ex->file, sec->list_line ? sec->list_line : sec->line, sec->name,
                 fp8_esc(label, shown, sizeof shown), sec->nconfigs);
      goto fail;
    }
    e->secs[e->nsecs++] = s;
  }
  if (!e->nsecs) {
    char labels[FP8_ERRLEN];
    list_labels(ex, labels, sizeof labels);
    fp8_errorf(FP8_EINVAL, err, errlen, "%s: no [recipe.*] section has the label %s (%s: %s)",
               ex->file, fp8_esc(label, shown, sizeof shown),
               ex->nsections ? "the file's labels" : "the file has no [recipe.*] section",
               labels);
    goto fail;
  }
  return e;
fail:
  fp8emu_close(e);
  return NULL;
}

void fp8emu_close(fp8emu *e) {
  if (!e) return;
  for (size_t i = 0; i < e->nslots; i++) {
    if (e->slots[i].cf->kind == FP8_KIND_DELAYED) fp8_delayed_free(&e->slots[i].dl);
    free(e->slots[i].name);
  }
  free(e->slots);
  fp8_strset_free(&e->names);
  free(e->secs);
  free(e->scratch);
  fp8_experiment_free(&e->ex);
  free(e);
}

/* Resolves slot s for configuration cf and the role of s->name; FP8_OK or an error in err. */
static int slot_init(fp8emu *e, emu_slot *s, const fp8_recipe_section *sec, char *err,
                     size_t errlen) {
  const fp8_config *cf = s->cf;
  fp8_role role = fp8_role_of_tensor(s->name);
  char shown[FP8_ESC_LEN];
  if (fp8_format_resolve(cf->format, role, &s->format) != FP8_OK) {
    /* the runner's message (run_plan.c): hybrid needs a role */
    const char *dot = strrchr(s->name, '.');
    char rshown[FP8_ESC_LEN];
    return fp8_errorf(FP8_EINVAL, err, errlen,
                      "%s:%d: tensor %s: role '%s' is not one of input, weight, output, "
                      "grad_output, grad_input; [recipe.%s] uses format = hybrid, which needs a "
                      "role (set format = e4m3 or e5m2)",
                      e->ex.file, e->ex.format_lines[sec->first_config],
                      fp8_esc(s->name, shown, sizeof shown),
                      fp8_esc(dot ? dot + 1 : s->name, rshown, sizeof rshown), sec->name);
  }
  s->scale = NAN;
  fp8_config_settings(cf, s->settings, sizeof s->settings);
  switch (cf->kind) {
  case FP8_KIND_DELAYED: {
    fp8_delayed_params dp = fp8_config_delayed_params(cf, s->format);
    int rc = fp8_delayed_init(&s->dl, &dp);
    if (rc)
      return fp8_errorf(rc, err, errlen, "tensor %s: delayed scaling's state: %s",
                        fp8_esc(s->name, shown, sizeof shown), fp8_strerror(rc));
    s->scale = s->dl.scale;
    break;
  }
  case FP8_KIND_CURRENT: s->cp = fp8_config_current_params(cf, s->format); break;
  case FP8_KIND_BF16: break;
  default:
    /* the CPU engine's block recipe (engine_cpu_work.c's block_stats); the input is the
     * caller's float32 (the block kind's inf_scale: FLT_MAX, as for an F32 trace) */
    s->bp = fp8_config_block_params(cf, role, s->format, FP8_DTYPE_F32);
    break;
  }
  return FP8_OK;
}

int fp8emu_slot(fp8emu *e, const char *tensor, char *err, size_t errlen) {
  if (!e || !tensor)
    return fp8_errorf(-2, err, errlen, "fp8emu_slot: %s is NULL", e ? "tensor" : "the emulator");
  size_t len = strlen(tensor);
  size_t got = fp8_strset_get(&e->names, tensor, len);
  if (got != SIZE_MAX) return (int)got;
  /* the first section of the label, in file order, whose tensors key matches (run_plan.c's
   * run_coverage_init) */
  const fp8_recipe_section *sec = NULL;
  for (size_t k = 0; k < e->nsecs && !sec; k++)
    if (fp8_experiment_section_matches(&e->ex.sections[e->secs[k]], tensor, tensor))
      sec = &e->ex.sections[e->secs[k]];
  if (!sec) return -1;
  if (e->nslots >= INT32_MAX) return fp8_errorf(-2, err, errlen, "fp8emu_slot: too many slots");
  /* the grown array is kept before anything else can fail: realloc may have freed the old */
  emu_slot *grown = fp8_grow(e->slots, e->nslots, &e->cap, sizeof *e->slots, 16);
  if (grown) e->slots = grown;
  char *name = grown ? strdup(tensor) : NULL;
  if (!name) return fp8_errorf(-2, err, errlen, "fp8emu_slot: out of memory");
  emu_slot *s = &e->slots[e->nslots];
  memset(s, 0, sizeof *s);
  s->name = name;
  s->cf = &e->ex.configs[sec->first_config];
  if (slot_init(e, s, sec, err, errlen) != FP8_OK) {
    free(name);
    return -2;
  }
  int added = 0;
  size_t idx = fp8_strset_put(&e->names, s->name, len, &added);
  if (idx == SIZE_MAX) {
    if (s->cf->kind == FP8_KIND_DELAYED) fp8_delayed_free(&s->dl);
    free(name);
    return fp8_errorf(-2, err, errlen, "fp8emu_slot: out of memory");
  }
  e->nslots++;
  return (int)idx;
}

int fp8emu_nslots(const fp8emu *e) { return e ? (int)e->nslots : 0; }

static const emu_slot *slot_at(const fp8emu *e, int slot) {
  return e && slot >= 0 && (size_t)slot < e->nslots ? &e->slots[slot] : NULL;
}

const char *fp8emu_slot_name(const fp8emu *e, int slot) {
  const emu_slot *s = slot_at(e, slot);
  return s ? s->name : NULL;
}

const char *fp8emu_slot_kind(const fp8emu *e, int slot) {
  const emu_slot *s = slot_at(e, slot);
  return s ? fp8_recipe_kind_name(s->cf->kind) : NULL;
}

const char *fp8emu_slot_format(const fp8emu *e, int slot) {
  const emu_slot *s = slot_at(e, slot);
  return s ? fp8_kind_format_name(s->cf->kind, s->format) : NULL;
}

const char *fp8emu_slot_settings(const fp8emu *e, int slot) {
  const emu_slot *s = slot_at(e, slot);
  return s ? s->settings : NULL;
}

/* x rounded to BF16 (nearest, ties to even), as float32; NaN stays NaN (quietened), inf inf. */
static void round_bf16(const float *x, size_t n, float *out) {
  for (size_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, &x[i], sizeof u);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) u |= 0x00400000u;
    else u += 0x7FFFu + ((u >> 16) & 1u);
    u &= 0xFFFF0000u;
    memcpy(&out[i], &u, sizeof u);
  }
}

int fp8emu_qdq(fp8emu *e, int slot, const float *x, int64_t rows, int64_t cols, int dir,
               float *xhat, fp8emu_stats *st, char *err, size_t errlen) {
  if (!e) return fp8_errorf(-2, err, errlen, "fp8emu_qdq: the emulator is NULL");
  if (!slot_at(e, slot))
    return fp8_errorf(-2, err, errlen, "fp8emu_qdq: slot %d is not one of the %zu slots", slot,
                      e->nslots);
  emu_slot *s = &e->slots[slot];
  if (rows < 0 || cols < 0 || (cols && rows > INT64_MAX / cols) ||
      (uint64_t)rows * (uint64_t)cols > SIZE_MAX / sizeof(float))
    return fp8_errorf(-2, err, errlen, "fp8emu_qdq: tensor %s: bad shape [%lld, %lld]", s->name,
                      (long long)rows, (long long)cols);
  if (dir != 0 && dir != 1)
    return fp8_errorf(-2, err, errlen,
                      "fp8emu_qdq: tensor %s: dir %d (expected 0: along rows, 1: along columns)",
                      s->name, dir);
  size_t n = (size_t)rows * (size_t)cols;
  if (n && (!x || !xhat))
    return fp8_errorf(-2, err, errlen, "fp8emu_qdq: tensor %s: %s is NULL", s->name,
                      x ? "xhat" : "x");
  /* the simulator's loops read x after writing xhat (the error sums): an overlapping output
   * goes through the scratch buffer */
  float *out = xhat;
  uintptr_t xa = (uintptr_t)x, ha = (uintptr_t)xhat, nb = n * sizeof(float);
  int overlap = n && ha < xa + nb && xa < ha + nb;
  if (overlap) {
    if (n > e->scratch_cap) {
      float *b = malloc(nb);
      if (!b) return fp8_errorf(-2, err, errlen, "fp8emu_qdq: tensor %s: out of memory", s->name);
      free(e->scratch);
      e->scratch = b;
      e->scratch_cap = n;
    }
    out = e->scratch;
  }
  float amax = fp8_amax_f32(x, n);
  fp8_stats fs;
  fp8_stats_init(&fs);
  float scale = NAN;
  double overshoot = NAN;
  fp8_recipe_kind kind = s->cf->kind;
  if (kind == FP8_KIND_DELAYED || kind == FP8_KIND_CURRENT) {
    if (kind == FP8_KIND_DELAYED) scale = s->dl.scale;
    else scale = s->scale = fp8_current_scale(&s->cp, amax);
    fp8_quantize_f32(x, n, scale, s->format, NULL, out, &fs);
    /* stream.csv's overshoot (results' fp8_overshoot) */
    overshoot = amax > 0.0f ? log2((double)amax * (double)scale / (double)fp8_format_max(s->format))
                            : -INFINITY;
  } else if (kind == FP8_KIND_BF16) {
    round_bf16(x, n, out);
    /* the bf16 kind's statistics: scale 1's pass, uncast (engine_cpu_work.c) */
    fp8_quantize_stats_f32(x, n, 1.0f, s->format, &fs);
    fp8_stats_uncast(&fs);
    overshoot = -INFINITY; /* nothing is cast (steps.csv) */
  } else {
    fp8_block_stats bst;
    int rc = fp8_block_quantize_f32(x, rows, cols, &s->bp, dir ? FP8_BLOCK_DIR_COL : FP8_BLOCK_DIR_ROW,
                                    out, NULL, &fs, &bst);
    if (rc)
      return fp8_errorf(-2, err, errlen, "fp8emu_qdq: tensor %s: %s", s->name,
                        rc == FP8_ENOMEM ? "out of memory" : fp8_strerror(rc));
    overshoot = bst.overshoot;
  }
  if (overlap) memcpy(xhat, out, nb);
  s->pending = fmaxf(s->pending, amax);
  if (st) {
    *st = (fp8emu_stats){.amax = amax, .scale = scale, .overshoot = overshoot, .n = fs.n,
                         .nonfinite = fs.nonfinite, .zeros = fs.zeros, .overflow = fs.overflow,
                         .underflow = fs.underflow, .subnormal = fs.subnormal,
                         .clipped = fs.clipped, .sum_sq_err = fs.sum_sq_err, .sum_sq = fs.sum_sq,
                         .sum_sq_hat = fs.sum_sq_hat};
  }
  return 0;
}

double fp8emu_scale(const fp8emu *e, int slot) {
  const emu_slot *s = slot_at(e, slot);
  if (!s) return NAN;
  if (s->cf->kind == FP8_KIND_DELAYED) return s->dl.scale;
  return s->scale;
}

int fp8emu_pending(const fp8emu *e, float *amax, int n) {
  if (!e || n < 0 || (size_t)n > e->nslots || (n && !amax)) return -2;
  for (int i = 0; i < n; i++) amax[i] = e->slots[i].pending;
  return 0;
}

int fp8emu_set_pending(fp8emu *e, const float *amax, int n) {
  if (!e || n < 0 || (size_t)n > e->nslots || (n && !amax)) return -2;
  for (int i = 0; i < n; i++)
    if (!(amax[i] >= 0.0f)) return -2; /* an amax is >= 0 and never NaN (fp8_amax_f32) */
  for (int i = 0; i < n; i++) e->slots[i].pending = amax[i];
  return 0;
}

int fp8emu_update(fp8emu *e, char *err, size_t errlen) {
  if (!e) return fp8_errorf(-2, err, errlen, "fp8emu_update: the emulator is NULL");
  int rc = 0;
  for (size_t i = 0; i < e->nslots; i++) {
    emu_slot *s = &e->slots[i];
    if (s->cf->kind == FP8_KIND_DELAYED) {
      fp8_delayed_update(&s->dl, s->pending);
      if (s->dl.oom) { /* that update was skipped; the state is as before it */
        s->dl.oom = 0;
        if (!rc)
          rc = fp8_errorf(-2, err, errlen,
                          "fp8emu_update: tensor %s: out of memory for the amax history",
                          s->name);
      }
    }
    s->pending = 0.0f;
  }
  return rc;
}
