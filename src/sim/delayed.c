/* delayed.c: TransformerEngine's delayed scaling (DelayedScaling, fused CUDA update path).
 *
 * TE keeps history[0..L-1] with the current amax written into slot 0 by the cast, and after the
 * update slot 0 is zeroed and slots 1..L-1 hold the L-1 most recent amaxes. The amax used for
 * the next scale is therefore the max of the L most recent non-zero amaxes. Here the history is a
 * ring of L slots (O(1) roll); fp8_delayed_history() rebuilds TE's layout for inspection.
 * With unfused_update it is TE's unfused Python path instead (quantization.py
 * _default_get_amax_and_update_history + _default_sf_compute): every amax, 0 included, is rolled
 * in, and the max over the history propagates NaN (docs/semantics.md "Mixture-of-Experts").
 */
#include "fp8.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *fp8_amax_compute_name(fp8_amax_compute a) {
  return a == FP8_AMAX_MOST_RECENT ? "most_recent" : "max";
}

int fp8_amax_compute_parse(const char *s, fp8_amax_compute *out) {
  if (!s) return FP8_EINVAL;
  if (strcmp(s, "max") == 0) *out = FP8_AMAX_MAX;
  else if (strcmp(s, "most_recent") == 0) *out = FP8_AMAX_MOST_RECENT;
  else return FP8_EINVAL;
  return FP8_OK;
}

float fp8_scaled_max(fp8_format f, int32_t margin) {
  /* 2^-m is exact for |m| <= 64; the product is one float rounding, as TE's
   * fp8_max * std::pow(2.f, -margin). */
  return fp8_format_max(f) * ldexpf(1.0f, -margin);
}

int fp8_delayed_params_check(const fp8_delayed_params *p) {
  if (!p) return FP8_EINVAL;
  if (p->history_len < 1 || p->history_len > FP8_HISTORY_LIMIT) return FP8_EINVAL;
  if (p->margin < -FP8_MARGIN_LIMIT || p->margin > FP8_MARGIN_LIMIT) return FP8_EINVAL;
  if (p->amax_compute != FP8_AMAX_MAX && p->amax_compute != FP8_AMAX_MOST_RECENT)
    return FP8_EINVAL;
  if (p->format != FP8_E4M3 && p->format != FP8_E5M2) return FP8_EINVAL;
  if (p->unfused_update != 0 && p->unfused_update != 1) return FP8_EINVAL;
  return FP8_OK;
}

int fp8_delayed_init(fp8_delayed_state *st, const fp8_delayed_params *p) {
  memset(st, 0, sizeof *st);
  int rc = fp8_delayed_params_check(p);
  if (rc) return rc;
  /* memory as the history fills, not L slots up front: a replay of S steps touches at most S
   * slots of a history of 32768 */
  st->ring_cap = p->history_len < 16 ? p->history_len : 16;
  st->ring = calloc((size_t)st->ring_cap, sizeof *st->ring);
  if (!st->ring) return FP8_ENOMEM;
  if (p->amax_compute == FP8_AMAX_MAX) {
    st->dq_cap = st->ring_cap;
    st->dq_v = malloc((size_t)st->dq_cap * sizeof *st->dq_v);
    st->dq_s = malloc((size_t)st->dq_cap * sizeof *st->dq_s);
    if (!st->dq_v || !st->dq_s) {
      fp8_delayed_free(st);
      return FP8_ENOMEM;
    }
  }
  st->p = *p;
  st->scale = 1.0f;
  st->scaled_max = fp8_scaled_max(p->format, p->margin);
  return FP8_OK;
}

void fp8_delayed_free(fp8_delayed_state *st) {
  if (!st) return;
  free(st->ring);
  free(st->dq_v);
  free(st->dq_s);
  st->ring = NULL;
  st->dq_v = NULL;
  st->dq_s = NULL;
}

/* Room for ring slot st->head (the ring grows while it fills: head == ring_cap < L); and for one
 * more entry of the monotone queue. Doubling, up to L. 0, or -1 when out of memory (the state
 * is unchanged then). */
static int grow_ring(fp8_delayed_state *st) {
  int32_t L = st->p.history_len;
  if (st->head < st->ring_cap) return 0;
  int32_t cap = st->ring_cap > L / 2 ? L : 2 * st->ring_cap;
  float *r = realloc(st->ring, (size_t)cap * sizeof *r);
  if (!r) return -1;
  memset(r + st->ring_cap, 0, (size_t)(cap - st->ring_cap) * sizeof *r);
  st->ring = r;
  st->ring_cap = cap;
  return 0;
}

static int grow_queue(fp8_delayed_state *st) {
  int32_t L = st->p.history_len;
  if (st->dq_n < st->dq_cap || st->dq_cap == L) return 0;
  int32_t cap = st->dq_cap > L / 2 ? L : 2 * st->dq_cap;
  float *v = malloc((size_t)cap * sizeof *v);
  int64_t *q = malloc((size_t)cap * sizeof *q);
  if (!v || !q) {
    free(v);
    free(q);
    return -1;
  }
  for (int32_t k = 0; k < st->dq_n; k++) { /* in queue order, from 0 */
    int32_t at = (st->dq_first + k) % st->dq_cap;
    v[k] = st->dq_v[at];
    q[k] = st->dq_s[at];
  }
  free(st->dq_v);
  free(st->dq_s);
  st->dq_v = v;
  st->dq_s = q;
  st->dq_first = 0;
  st->dq_cap = cap;
  return 0;
}

float fp8_delayed_update(fp8_delayed_state *st, float last) {
  /* TE's fused update (common/recipe/delayed_scaling.cu kernel_bulk, since TE PR #825 "Avoid
   * amax roll for non-run modules"): a tensor whose amax is 0 (its module did not run) keeps
   * history and scale. The unfused path (NVTE_UNFUSED_FP8_UPDATE=1) rolls the 0 in. */
  const int unfused = st->p.unfused_update;
  if (last == 0.0f && !unfused) return 0.0f;
  int32_t L = st->p.history_len;
  if (grow_ring(st) || (st->dq_v && grow_queue(st))) { /* out of memory: not updated */
    st->oom = 1;
    return NAN;
  }
  st->ring[st->head] = last;
  st->head = st->head + 1 == L ? 0 : st->head + 1;
  st->updates++;

  float amax;
  if (st->p.amax_compute == FP8_AMAX_MOST_RECENT) {
    amax = last;
  } else {
    /* The max of the ring's L slots (the initial zeros count as 0), fmaxf semantics: a NaN
     * amax is ignored. The monotone queue holds, in decreasing order, the values of the window
     * (roll numbers updates - L + 1 .. updates) that no later value reaches. */
    const int64_t seq = st->updates;
    const int32_t C = st->dq_cap;
    while (st->dq_n && st->dq_s[st->dq_first] <= seq - L) { /* left the window */
      st->dq_first = st->dq_first + 1 == C ? 0 : st->dq_first + 1;
      st->dq_n--;
    }
    if (!isnan(last)) { /* positions dq_first + k < 2C: one subtraction instead of a division */
      int32_t back;
      while (st->dq_n && st->dq_v[(back = st->dq_first + st->dq_n - 1) >= C ? back - C : back] <= last)
        st->dq_n--;
      int32_t at = st->dq_first + st->dq_n;
      if (at >= C) at -= C;
      st->dq_v[at] = last;
      st->dq_s[at] = seq;
      st->dq_n++;
    }
    amax = st->dq_n ? st->dq_v[st->dq_first] : 0.0f;
    /* unfused: torch.max over the history propagates a NaN for as long as it is in the window */
    if (unfused) {
      if (isnan(last)) st->nan_roll = seq;
      if (st->nan_roll > 0 && st->nan_roll > seq - L) amax = NAN;
    }
  }
  if (isfinite(amax) && amax > 0.0f) {
    float s;
    if (unfused) {
      /* _default_sf_compute: (fp8_max / amax) / 2**margin, two float32 roundings (they differ
       * from the fused kernel's one only where fp8_max / amax overflows or the result is
       * subnormal, with a margin) */
      float q = fp8_format_max(st->p.format) / amax;
      s = q / ldexpf(1.0f, st->p.margin);
    } else {
      s = st->scaled_max / amax;
    }
    st->scale = isinf(s) ? FLT_MAX : s;
  }
  return amax;
}

void fp8_delayed_history(const fp8_delayed_state *st, float *out) {
  int32_t L = st->p.history_len;
  /* ring[head-1] is the most recent; walk backwards from out[L-1]. Slots not yet rolled into
   * are the initial zeros (and may not be allocated yet). */
  for (int32_t k = 0; k < L; k++) {
    int32_t idx = ((st->head - 1 - k) % L + L) % L;
    out[L - 1 - k] = k < st->updates ? st->ring[idx] : 0.0f;
  }
  if (L >= 2) out[0] = 0.0f;
}
