/* experiment_select.c: the questions the runner asks a loaded experiment (experiment.h): is a
 * step or a tensor selected by [trace] steps / tensors, and do the [trace] steps selection and
 * the reduce_amax / reduce_group keys fit the trace once it is open. Independent of the loader's files.
 */
#include "experiment.h"

#include <fnmatch.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "util.h" /* fp8_errorf, FP8_ERRLEN */

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
    if (!gl || (ex->reduce_stride_line && ex->reduce_stride_line < gl)) gl = ex->reduce_stride_line;
    if (al && (!gl || al < gl)) {
      line = al;
      snprintf(msg, sizeof msg,
               "reduce_amax = true needs a multi-rank trace, but %s is a single-rank trace "
               "(point path at the folder that holds rank_0/, rank_1/, ...)",
               trace);
    } else if (gl) {
      line = gl;
      snprintf(msg, sizeof msg,
               "%s needs a multi-rank trace, but %s is a single-rank trace (point "
               "path at the folder that holds rank_0/, rank_1/, ...)",
               gl == ex->reduce_group_line ? "reduce_group" : "reduce_stride", trace);
    }
  } else if (ex->reduce_stride_line && !ex->reduce_group_line) {
    line = ex->reduce_stride_line;
    snprintf(msg, sizeof msg,
             "reduce_stride needs reduce_group (the ranks per group; a group is ranks r, r+S, "
             "..., r+(G-1)S)");
  } else if (ex->reduce_stride_line &&
             nranks % ((size_t)ex->reduce_group * (size_t)ex->reduce_stride) != 0) {
    line = ex->reduce_stride_line;
    snprintf(msg, sizeof msg,
             "reduce_group = %lld x reduce_stride = %lld does not divide the %zu ranks of %s "
             "(strided groups tile blocks of G x S ranks)",
             (long long)ex->reduce_group, (long long)ex->reduce_stride, nranks, trace);
  } else if (ex->reduce_group_line && nranks % (size_t)ex->reduce_group != 0) {
    line = ex->reduce_group_line;
    int o = snprintf(msg, sizeof msg,
                     "reduce_group = %lld does not divide the %zu ranks of %s (expected one of",
                     (long long)ex->reduce_group, nranks, trace);
    for (size_t d = 1, k = 0; d <= nranks && o > 0 && (size_t)o < sizeof msg - 16; d++)
      if (nranks % d == 0)
        o += snprintf(msg + o, sizeof msg - (size_t)o, "%s %zu", k++ ? "," : "", d);
    if (o > 0 && (size_t)o < sizeof msg - 2) snprintf(msg + o, sizeof msg - (size_t)o, ")");
  }
  if (!line) return FP8_OK;
  return fp8_errorf(FP8_EINVAL, err, errlen, "%s:%d: %s", ex->file, line, msg);
}

int fp8_experiment_check_steps(const fp8_experiment *ex, const int64_t *steps, size_t n,
                               const char *trace, char *err, size_t errlen) {
  if (!ex->has_steps) return FP8_OK;
  for (size_t i = 0; i < n; i++)
    if (fp8_experiment_step_selected(ex, steps[i])) return FP8_OK;
  /* the selection as the canonical a, a-b or a-b:stride */
  char sel[96];
  int o = snprintf(sel, sizeof sel, "%lld", (long long)ex->step_first);
  if (ex->step_last != ex->step_first)
    o += snprintf(sel + o, sizeof sel - (size_t)o, "-%lld", (long long)ex->step_last);
  if (ex->step_last != ex->step_first && ex->step_stride != 1)
    snprintf(sel + o, sizeof sel - (size_t)o, ":%lld", (long long)ex->step_stride);
  if (n == 0)
    return fp8_errorf(FP8_EINVAL, err, errlen,
                      "%s:%d: steps = %s selects no snapshot step: the trace %s has no snapshot",
                      ex->file, ex->steps_line, sel, trace);
  return fp8_errorf(FP8_EINVAL, err, errlen,
                    "%s:%d: steps = %s selects none of the %zu snapshot steps of the trace %s "
                    "(%lld..%lld)",
                    ex->file, ex->steps_line, sel, n, trace, (long long)steps[0],
                    (long long)steps[n - 1]);
}

size_t fp8_experiment_reduce_group(const fp8_experiment *ex, size_t nranks) {
  return ex->reduce_group > 0 ? (size_t)ex->reduce_group : nranks;
}

size_t fp8_experiment_group_of(const fp8_experiment *ex, size_t nranks, size_t r) {
  size_t g = fp8_experiment_reduce_group(ex, nranks), s = ex->reduce_stride > 1
                                                             ? (size_t)ex->reduce_stride : 1;
  if (g == 0) return 0;
  return r / (g * s) * s + r % s;
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

int fp8_experiment_section_matches(const fp8_recipe_section *s, const char *full,
                                   const char *local) {
  if (s->nglobs == 0) return 1;
  for (size_t i = 0; i < s->nglobs; i++) {
    const char *g = s->globs[i];
    if (fnmatch(g, strchr(g, '/') ? full : local, 0) == 0) return 1;
  }
  return 0;
}

/* The FP4 criterion's FP8 reference (issue 42): the report's choice (report_select.c), made
 * here once so that the run pairs its ratios with it and run.json names it. */
ptrdiff_t fp8_experiment_fp4_reference(const fp8_experiment *ex) {
  int fp4 = 0;
  for (size_t c = 0; c < ex->nconfigs; c++) fp4 |= fp8_recipe_kind_is_fp4(ex->configs[c].kind);
  if (!fp4) return -1;
  ptrdiff_t cur = -1, ref = -1;
  for (size_t c = 0; c < ex->nconfigs; c++) {
    const fp8_config *x = &ex->configs[c];
    if (ex->sections[ex->config_section[c]].label_count > 1) continue; /* a mixed recipe */
    if (x->kind == FP8_KIND_CURRENT) {
      if (cur < 0) cur = (ptrdiff_t)c;
      continue;
    }
    if (fp8_recipe_kind_is_fp4(x->kind) || x->kind == FP8_KIND_BF16) continue;
    if (ref < 0) {
      ref = (ptrdiff_t)c;
      continue;
    }
    const fp8_config *b = &ex->configs[ref];
    int xdl = x->kind == FP8_KIND_DELAYED, bdl = b->kind == FP8_KIND_DELAYED;
    int xh = xdl ? x->history_len : 0, bh = bdl ? b->history_len : 0;
    int xm = xdl ? abs(x->margin) : 0, bm = bdl ? abs(b->margin) : 0;
    int xa = !xdl || x->amax_compute == FP8_AMAX_MAX, ba = !bdl || b->amax_compute == FP8_AMAX_MAX;
    int xd = xh == 1024 && xm == 0 && xa, bd = bh == 1024 && bm == 0 && ba;
    if (xd != bd) {
      if (xd) ref = (ptrdiff_t)c;
      continue;
    }
    if (xa != ba) {
      if (xa) ref = (ptrdiff_t)c;
      continue;
    }
    if (xm != bm) {
      if (xm < bm) ref = (ptrdiff_t)c;
      continue;
    }
    if (xh > bh) ref = (ptrdiff_t)c;
  }
  return cur >= 0 ? cur : ref;
}
