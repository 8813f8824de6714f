/* experiment_select.c: the questions the runner asks a loaded experiment (experiment.h): is a
 * step or a tensor selected by [trace] steps / tensors, and do the [trace] steps selection and
 * the reduce_amax / reduce_group keys fit the trace once it is open. Independent of the loader's files.
 */
#include "experiment.h"

#include <fnmatch.h>
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
