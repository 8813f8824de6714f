/* te_log_stats.c: what `fp8lab import-te` learns of a log beside its amax rows (te_log_internal.h):
 * the trace's name of each TE tensor (a GroupedLinear's experts included), each statistic's own logging interval per tensor (te_log.json's per-tensor "statistics": TE
 * lets each statistic have its own freq), the ranks whose log gave no amax row, and the
 * warnings the summary prints. te_log.c reads the lines and calls these. */
#include "te_log_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8.h"
#include "trace.h" /* FP8_NAME_MAX */
#include "util.h"

/* TE's GroupedLinear (TE >= 2.11, PR #1953: grouped_linear.py _get_debug_quantizers) logs
 * expert i's GEMM as the layer `<name>.gemm_<i>`: the position of `gemm_` in layer[0..ll) when
 * its last dotted component is gemm_ followed by decimal digits, else ll. */
static size_t grouped_gemm_at(const char *layer, size_t ll) {
  size_t c = ll;
  while (c > 0 && layer[c - 1] != '.') c--;
  if (ll - c < 6 || strncmp(layer + c, "gemm_", 5) != 0) return ll;
  for (size_t k = c + 5; k < ll; k++)
    if (layer[k] < '0' || layer[k] > '9') return ll;
  return c;
}

int te_trace_name(const char *layer, size_t ll, size_t t, char *name, size_t n) {
  size_t g = grouped_gemm_at(layer, ll);
  int nl = g < ll ? snprintf(name, n, "%.*s%sexperts.%.*s.%s", (int)(g ? g - 1 : 0), layer,
                             g ? "." : "", (int)(ll - g - 5), layer + g + 5, TE_ROLES[t])
                  : snprintf(name, n, "%.*s.%s", (int)ll, layer, TE_ROLES[t]);
  return nl < 0 || nl >= (int)n ? -1 : nl;
}

/* Notes iteration iter of the statistic logged as name[0..len) = <layer>_<tensor>_<stat> of a
 * tensor with a role (te_log.json's per-tensor "statistics": each statistic's own interval).
 * One lookup of the whole name per line; the tensor is found at the end (te_stats_resolve),
 * so a statistic logged before its tensor's cur_amax, or for a tensor without one, costs
 * nothing more. FP8_OK or FP8_ENOMEM. */
int te_note_stat(te_import *im, const char *name, size_t len, size_t ll, size_t t,
                     size_t stat_off, int64_t iter) {
  size_t id = fp8_strset_get(&im->pset, name, len);
  if (id == SIZE_MAX) {
    te_stat *ns = fp8_grow(im->pstat, im->npstat, &im->cappstat, sizeof *ns, 64);
    if (!ns) return FP8_ENOMEM;
    im->pstat = ns;
    char *own = strndup(name, len);
    int added;
    if (!own || fp8_strset_put(&im->pset, own, len, &added) == SIZE_MAX) {
      free(own);
      return FP8_ENOMEM;
    }
    im->pstat[im->npstat] = (te_stat){own, ll, t, stat_off, 0, iter, iter, UINT32_MAX};
    id = im->npstat++;
  }
  te_stat *p = &im->pstat[id];
  p->gcd = te_gcd(p->gcd, iter);
  if (iter < p->first) p->first = iter;
  if (iter > p->last) p->last = iter;
  return FP8_OK;
}

/* A line for stderr (the summary's warnings), printf-style. FP8_OK or FP8_ENOMEM. */
int te_add_warning(te_import *im, const char *fmt, ...) {
  char **nw = fp8_grow(im->sum.warnings, im->sum.nwarnings, &im->capwarn, sizeof *nw, 8);
  if (!nw) return FP8_ENOMEM;
  im->sum.warnings = nw;
  char *w = malloc(FP8_ERRLEN);
  if (!w) return FP8_ENOMEM;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(w, FP8_ERRLEN, fmt, ap);
  va_end(ap);
  im->sum.warnings[im->sum.nwarnings++] = w;
  return FP8_OK;
}

static int cmp_pstat(const void *a, const void *b) {
  const te_stat *x = a, *y = b;
  if (x->tensor != y->tensor) return x->tensor < y->tensor ? -1 : 1;
  return strcmp(x->key + x->stat_off, y->key + y->stat_off);
}

/* Each noted statistic's tensor (the name tensor_of gives it; UINT32_MAX for a tensor with
 * neither cur_amax, scale_inv nor overflows%: not in te_log.json's tensors), then the
 * statistics sorted by (tensor, name) and each tensor's range of them. Two TE names of one
 * trace tensor (a GroupedLinear's `x.gemm_1` and a layer `x.experts.1`) stay two entries of one
 * name, which the writer merges. */
void te_stats_resolve(te_import *im) {
  for (size_t k = 0; k < im->npstat; k++) {
    te_stat *p = &im->pstat[k];
    char name[FP8_NAME_MAX + 64];
    int nl = te_trace_name(p->key, p->layer_len, p->te_tensor, name, sizeof name);
    size_t id = nl < 0 ? SIZE_MAX : fp8_strset_get(&im->tset, name, (size_t)nl);
    p->tensor = id == SIZE_MAX ? UINT32_MAX : (uint32_t)id;
  }
  /* the set's indices are not needed after this: sorting moves the entries under them */
  if (im->npstat > 1) qsort(im->pstat, im->npstat, sizeof *im->pstat, cmp_pstat);
  size_t k = 0;
  for (size_t t = 0; t < im->ntens; t++) {
    while (k < im->npstat && im->pstat[k].tensor < t) k++;
    im->tens[t].stat_lo = k;
    while (k < im->npstat && im->pstat[k].tensor == t) k++;
    im->tens[t].stat_hi = k;
  }
}

/* The ranks whose log gave no amax row (te_log.json's ranks_without_amax: an empty log, no
 * cur_amax line, or every cur_amax read 0.0000), each warned about with its file and why;
 * the summary's count of distinct tensors with an amax row written, over every rank. lines[r]:
 * rank r's statistics lines, cut[r] its dropped cut-off lines. FP8_OK or FP8_ENOMEM. */
int te_note_ranks(te_import *im, const size_t *lines, const size_t *cut) {
  size_t *amax = calloc(im->nfiles + 1, sizeof *amax);
  size_t *nonzero = calloc(im->nfiles + 1, sizeof *nonzero);
  unsigned char *seen = calloc(im->ntens + 1, 1);
  int rc = amax && nonzero && seen ? FP8_OK : FP8_ENOMEM;
  for (size_t k = 0; rc == FP8_OK && k < im->nrows; k++) {
    const te_row *r = &im->rows[k];
    amax[r->rank]++;
    nonzero[r->rank] += r->v != 0.0f;
    seen[r->tensor] |= r->v != 0.0f; /* a tensor of the rows written */
  }
  im->sum.tensors = 0;
  for (size_t t = 0; rc == FP8_OK && t < im->ntens; t++) im->sum.tensors += seen[t];
  if (rc == FP8_OK && !(im->noamax = calloc(im->nfiles + 1, sizeof *im->noamax))) rc = FP8_ENOMEM;
  for (size_t r = 0; rc == FP8_OK && r < im->nfiles; r++) {
    if (nonzero[r]) continue;
    im->noamax[im->nnoamax++] = (uint32_t)r;
    char why[96];
    if (!lines[r])
      snprintf(why, sizeof why, "%s", cut[r] ? "its one line was cut off" : "the log is empty");
    else if (!amax[r])
      snprintf(why, sizeof why, "no cur_amax line in its %zu statistics lines", lines[r]);
    else
      snprintf(why, sizeof why, "all %zu cur_amax values read 0.0000", amax[r]);
    rc = te_add_warning(im, "global rank %zu (%s): no amax row: %s (te_log.json's "
                     "ranks_without_amax)", r, im->files[r].path, why);
  }
  im->sum.ranks_without_amax = im->nnoamax;
  free(amax);
  free(nonzero);
  free(seen);
  return rc;
}

