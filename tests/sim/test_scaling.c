/* test_scaling.c: delayed scaling (src/sim/delayed.c) by hand and against a literal transcription
 * of TE's amax-history array (the fused kernel, and the unfused Python path of unfused_update),
 * and current scaling's scale. */
#include <check.h>
#include <float.h>
#include <math.h>

#include "testutil.h"
#include "sim_helpers.h"

/* ------------------------------------------------------------------ delayed scaling */

/* A literal transcription of RECIPES.md's TE array semantics, for comparison with the ring. */
typedef struct { int L; float h[1024]; float scale; float scaled_max; int most_recent; } te_ref;

static void te_ref_update(te_ref *r, float last) {
  if (last == 0.0f) return;
  float amax_max = last;
  for (int i = 1; i < r->L; i++) amax_max = fmaxf(amax_max, r->h[i]);
  if (r->L == 1) {
    r->h[0] = last;
  } else {
    for (int i = 1; i <= r->L - 2; i++) r->h[i] = r->h[i + 1];
    r->h[r->L - 1] = last;
    r->h[0] = 0.0f;
  }
  float amax = r->most_recent ? last : amax_max;
  if (isfinite(amax) && amax > 0) {
    float s = r->scaled_max / amax;
    r->scale = isinf(s) ? FLT_MAX : s;
  }
}

START_TEST(test_delayed_first_steps) {
  fp8_delayed_params p = {.history_len = 4, .margin = 0, .amax_compute = FP8_AMAX_MAX, .format = FP8_E4M3};
  fp8_delayed_state st;
  ck_assert_int_eq(fp8_delayed_init(&st, &p), FP8_OK);
  ck_assert_float_eq(st.scale, 1.0f); /* step 0 uses 1.0 */
  ck_assert_float_eq(fp8_delayed_update(&st, 2.0f), 2.0f);
  ck_assert_float_eq(st.scale, 224.0f);
  fp8_delayed_update(&st, 8.0f);
  ck_assert_float_eq(st.scale, 56.0f);
  fp8_delayed_update(&st, 1.0f); /* window max still 8 */
  ck_assert_float_eq(st.scale, 56.0f);
  fp8_delayed_update(&st, 1.0f);
  ck_assert_float_eq(st.scale, 56.0f);
  fp8_delayed_update(&st, 1.0f); /* window {8,1,1,1} */
  ck_assert_float_eq(st.scale, 56.0f);
  fp8_delayed_update(&st, 1.0f); /* window {1,1,1,1}: the 8 dropped out (L = 4) */
  ck_assert_float_eq(st.scale, 448.0f);
  fp8_delayed_free(&st);
}
END_TEST

START_TEST(test_delayed_zero_keeps_state) {
  fp8_delayed_params p = {.history_len = 3, .margin = 1, .amax_compute = FP8_AMAX_MAX, .format = FP8_E5M2};
  fp8_delayed_state st;
  fp8_delayed_init(&st, &p);
  ck_assert_float_eq(st.scaled_max, 28672.0f);
  fp8_delayed_update(&st, 7.0f);
  float before[3], after[3];
  fp8_delayed_history(&st, before);
  float s = st.scale;
  ck_assert_float_eq(s, 28672.0f / 7.0f);
  ck_assert_float_eq(fp8_delayed_update(&st, 0.0f), 0.0f);
  fp8_delayed_history(&st, after);
  ck_assert_float_eq(st.scale, s);
  ck_assert_mem_eq(before, after, sizeof before);
  ck_assert_float_eq(after[0], 0.0f);
  ck_assert_float_eq(after[1], 0.0f);
  ck_assert_float_eq(after[2], 7.0f);
  fp8_delayed_free(&st);
}
END_TEST

START_TEST(test_delayed_extremes) {
  fp8_delayed_params p = {.history_len = 1, .margin = 0, .amax_compute = FP8_AMAX_MAX, .format = FP8_E4M3};
  fp8_delayed_state st;
  fp8_delayed_init(&st, &p);
  fp8_delayed_update(&st, 0x1p-140f); /* 448 / tiny = inf -> FLT_MAX */
  ck_assert_float_eq(st.scale, FLT_MAX);
  fp8_delayed_update(&st, 4.0f);
  ck_assert_float_eq(st.scale, 112.0f);
  ck_assert(isinf(fp8_delayed_update(&st, INFINITY))); /* inf: scale kept */
  ck_assert_float_eq(st.scale, 112.0f);
  float h[1];
  fp8_delayed_history(&st, h);
  ck_assert(isinf(h[0])); /* L = 1: the history is just last */
  fp8_delayed_update(&st, NAN); /* NaN: not finite, scale kept */
  ck_assert_float_eq(st.scale, 112.0f);
  fp8_delayed_free(&st);
  /* with max over a window, an inf amax blocks updates until it leaves the window */
  p.history_len = 2;
  fp8_delayed_init(&st, &p);
  fp8_delayed_update(&st, 2.0f);
  fp8_delayed_update(&st, INFINITY);
  fp8_delayed_update(&st, 4.0f);
  ck_assert_float_eq(st.scale, 224.0f);
  fp8_delayed_update(&st, 4.0f);
  ck_assert_float_eq(st.scale, 112.0f);
  fp8_delayed_free(&st);
  /* margin and most_recent */
  p = (fp8_delayed_params){.history_len = 8, .margin = -1, .amax_compute = FP8_AMAX_MOST_RECENT, .format = FP8_E4M3};
  fp8_delayed_init(&st, &p);
  fp8_delayed_update(&st, 100.0f);
  fp8_delayed_update(&st, 3.0f);
  ck_assert_float_eq(st.scale, 896.0f / 3.0f);
  fp8_delayed_free(&st);
  p.history_len = 0;
  ck_assert_int_eq(fp8_delayed_init(&st, &p), FP8_EINVAL);
  p.history_len = 4;
  p.margin = 65;
  ck_assert_int_eq(fp8_delayed_init(&st, &p), FP8_EINVAL);
}
END_TEST

START_TEST(test_delayed_constant_history) {
  /* constant-filled steps: TE layout [0, c, c, c] after three or more steps with L = 4 */
  fp8_delayed_params p = {.history_len = 4, .margin = 0, .amax_compute = FP8_AMAX_MAX, .format = FP8_E4M3};
  fp8_delayed_state st;
  fp8_delayed_init(&st, &p);
  float h[4];
  fp8_delayed_update(&st, 5.0f);
  fp8_delayed_history(&st, h);
  float e1[4] = {0, 0, 0, 5};
  ck_assert_mem_eq(h, e1, sizeof h);
  fp8_delayed_update(&st, 5.0f);
  fp8_delayed_update(&st, 5.0f);
  fp8_delayed_history(&st, h);
  float e3[4] = {0, 5, 5, 5};
  ck_assert_mem_eq(h, e3, sizeof h);
  for (int i = 0; i < 10; i++) fp8_delayed_update(&st, 5.0f);
  fp8_delayed_history(&st, h);
  ck_assert_mem_eq(h, e3, sizeof h);
  ck_assert_float_eq(st.scale, 448.0f / 5.0f);
  fp8_delayed_free(&st);
}
END_TEST

START_TEST(test_delayed_vs_te_array) {
  /* Random amax streams with zeros, tiny, huge, inf and NaN values: the ring equals the literal
   * TE array in scale and history after every step, for several L and both amax_compute. */
  int lens[] = {1, 2, 3, 7, 16, 64};
  for (int li = 0; li < 6; li++)
    for (int mr = 0; mr < 2; mr++)
      for (int margin = -2; margin <= 3; margin += 5) {
        fp8_delayed_params p = {.history_len = lens[li], .margin = margin,
                                .amax_compute = mr ? FP8_AMAX_MOST_RECENT : FP8_AMAX_MAX,
                                .format = margin > 0 ? FP8_E5M2 : FP8_E4M3};
        fp8_delayed_state st;
        fp8_delayed_init(&st, &p);
        te_ref r = {.L = lens[li], .scale = 1.0f, .most_recent = mr};
        r.scaled_max = fp8_format_max(p.format) * ldexpf(1.0f, -margin);
        float h[64];
        for (int t = 0; t < 500; t++) {
          uint64_t k = rnd() % 20;
          float a = k == 0 ? 0.0f : k == 1 ? INFINITY : k == 2 ? NAN : k == 3 ? 0x1p-149f
                  : (float)pow(2.0, -20.0 + 40.0 * rnd_unit());
          fp8_delayed_update(&st, a);
          te_ref_update(&r, a);
          ck_assert_msg(f2u(st.scale) == f2u(r.scale), "L=%d mr=%d t=%d: %a vs %a", lens[li], mr, t,
                        st.scale, r.scale);
          fp8_delayed_history(&st, h);
          for (int i = 0; i < lens[li]; i++)
            ck_assert(f2u(h[i]) == f2u(r.h[i]) || (isnan(h[i]) && isnan(r.h[i])));
        }
        fp8_delayed_free(&st);
      }
}
END_TEST

START_TEST(test_delayed_long_windows) {
  /* The max over long windows, which the state keeps as a monotone queue: long decreasing runs
   * (the max leaves the window at every step), spikes, plateaus of equal values, NaN, inf and
   * zeros, against the literal TE array, 3000 steps. */
  int lens[] = {5, 33, 1024};
  for (int li = 0; li < 3; li++) {
    fp8_delayed_params p = {.history_len = lens[li], .margin = 0, .amax_compute = FP8_AMAX_MAX,
                            .format = FP8_E4M3};
    fp8_delayed_state st;
    ck_assert_int_eq(fp8_delayed_init(&st, &p), FP8_OK);
    te_ref r = {.L = lens[li], .scale = 1.0f, .most_recent = 0, .scaled_max = 448.0f};
    float a = 1000.0f;
    for (int t = 0; t < 3000; t++) {
      uint64_t k = rnd() % 100;
      if (k < 70) a *= 0.99f;                   /* decreasing */
      else if (k < 80) a *= 1.0f;               /* equal to the last */
      else if (k < 85) a = 1e4f * (float)rnd_unit();
      float v = k == 90 ? NAN : k == 91 ? INFINITY : k == 92 ? 0.0f : a;
      /* TE's amax: fmaxf of the new value and the array's L-1 older entries, before the roll */
      float m = v;
      for (int i = 1; i < lens[li]; i++) m = fmaxf(m, r.h[i]);
      float used = fp8_delayed_update(&st, v);
      te_ref_update(&r, v);
      ck_assert_msg(f2u(st.scale) == f2u(r.scale), "L=%d t=%d: scale %a, TE %a", lens[li], t,
                    st.scale, r.scale);
      if (v != 0.0f && !isnan(m))
        ck_assert_msg(f2u(used) == f2u(m), "L=%d t=%d: amax used %a, TE %a", lens[li], t, used, m);
    }
    fp8_delayed_free(&st);
  }
}
END_TEST

/* ------------------------------------------------------------------ unfused update (issue 40) */

/* A literal transcription of TE's unfused Python update (transformer_engine/pytorch/
 * quantization.py at 2.20.0.dev0: the cast writes the amax into h[0]; _default_get_amax_and_
 * update_history: amax = torch.max(h) (NaN propagates) or h[0] for most_recent, then
 * torch.roll(h, -1) and h[0] = 0; _default_sf_compute: sf = (fp8_max / amax) / 2**margin, kept
 * where amax <= 0 or not finite, FLT_MAX where inf). Every step updates, an amax of 0 included. */
typedef struct { int L; float h[1024]; float scale; float fp8_max; int margin; int most_recent; } te_unfused;

static void te_unfused_update(te_unfused *r, float last) {
  r->h[0] = last;
  float amax = r->h[0];
  if (!r->most_recent)
    for (int i = 1; i < r->L; i++) amax = (isnan(amax) || isnan(r->h[i])) ? NAN : fmaxf(amax, r->h[i]);
  if (r->L > 1) {
    float first = r->h[0];
    for (int i = 0; i < r->L - 1; i++) r->h[i] = r->h[i + 1];
    r->h[r->L - 1] = first;
  }
  r->h[0] = 0.0f;
  float q = r->fp8_max / amax;
  float sf = q / ldexpf(1.0f, r->margin);
  if (!(amax > 0.0f) || !isfinite(amax)) sf = r->scale;
  r->scale = isinf(sf) ? FLT_MAX : sf;
}

/* The hand case of a Mixture-of-Experts tensor that gets no tokens at some steps (amax 0),
 * E4M3, margin 0 (scaled_max 448), amaxes by step: 2, 0, 0, 8, 0, 3, 0, 0, 0.
 * Scale after each step's update (the scale of the next step), windows in TE's order:
 *   fused (zeros skipped: the window holds the non-zero amaxes 2, 8, 3 as they come):
 *     L = 2: {2} 224, 224, 224, {2,8} 56, 56, {8,3} 56, 56, 56, 56
 *     L = 4: {2} 224, 224, 224, {2,8} 56, 56, {2,8,3} 56, 56, 56, 56
 *   unfused (every amax rolled in; a window of zeros keeps the scale):
 *     L = 2: {0,2} 224, {2,0} 224, {0,0} kept 224, {0,8} 56, {8,0} 56, {0,3} 448/3,
 *            {3,0} 448/3, {0,0} kept 448/3, kept 448/3
 *     L = 4: {0,0,0,2} 224, {0,0,2,0} 224, {0,2,0,0} 224, {2,0,0,8} 56, {0,0,8,0} 56,
 *            {0,8,0,3} 56, {8,0,3,0} 56, {0,3,0,0} 448/3, {3,0,0,0} 448/3
 * 448/3 = 149.333... is 0x1.2aaaaap+7 in float32 (RN: the 24-bit significand 1.0010101...0101
 * followed by 01..., rounded down). The unfused L = 2 scale changes at step 5 (the window lost
 * the 8), L = 4 at step 7; the fused scale stays 56. */
static const float MOE_AMAX[9] = {2, 0, 0, 8, 0, 3, 0, 0, 0};
#define S3 0x1.2aaaaap+7f

START_TEST(test_delayed_moe_zero_steps_by_hand) {
  static const float want[4][9] = {
      {224, 224, 224, 56, 56, 56, 56, 56, 56}, /* fused L = 2 */
      {224, 224, 224, 56, 56, 56, 56, 56, 56}, /* fused L = 4 */
      {224, 224, 224, 56, 56, S3, S3, S3, S3}, /* unfused L = 2 */
      {224, 224, 224, 56, 56, 56, 56, S3, S3}, /* unfused L = 4 */
  };
  /* TE's layout of the history after steps 2 and 8 (out[L-1] the latest, out[0] = 0) */
  static const float hist2[4][4] = {{0, 2}, {0, 0, 0, 2}, {0, 0}, {0, 2, 0, 0}};
  static const float hist8[4][4] = {{0, 3}, {0, 2, 8, 3}, {0, 0}, {0, 0, 0, 0}};
  ck_assert_float_eq(448.0f / 3.0f, S3);
  for (int k = 0; k < 4; k++) {
    int L = k % 2 ? 4 : 2, unfused = k >= 2;
    fp8_delayed_params p = {.history_len = L, .margin = 0, .amax_compute = FP8_AMAX_MAX,
                            .format = FP8_E4M3, .unfused_update = unfused};
    fp8_delayed_state st;
    ck_assert_int_eq(fp8_delayed_init(&st, &p), FP8_OK);
    float h[4];
    for (int t = 0; t < 9; t++) {
      float before = st.scale;
      fp8_delayed_update(&st, MOE_AMAX[t]);
      ck_assert_msg(f2u(st.scale) == f2u(want[k][t]), "%s L=%d step %d: scale %a, want %a",
                    unfused ? "unfused" : "fused", L, t, st.scale, want[k][t]);
      if (!unfused && MOE_AMAX[t] == 0.0f) ck_assert(f2u(st.scale) == f2u(before));
      if (t == 2 || t == 8) {
        fp8_delayed_history(&st, h);
        const float *w = t == 2 ? hist2[k] : hist8[k];
        for (int i = 0; i < L; i++)
          ck_assert_msg(f2u(h[i]) == f2u(w[i]), "%s L=%d after step %d: history[%d] %g, want %g",
                        unfused ? "unfused" : "fused", L, t, i, h[i], w[i]);
      }
    }
    /* the rolls: fused 3 (the non-zero amaxes), unfused 9 */
    ck_assert_int_eq(st.updates, unfused ? 9 : 3);
    fp8_delayed_free(&st);
  }
  /* most_recent: a 0 keeps the scale under both rules (448/3 stays after step 5) */
  for (int unfused = 0; unfused < 2; unfused++) {
    fp8_delayed_params p = {.history_len = 4, .amax_compute = FP8_AMAX_MOST_RECENT,
                            .format = FP8_E4M3, .unfused_update = unfused};
    fp8_delayed_state st;
    fp8_delayed_init(&st, &p);
    for (int t = 0; t < 9; t++) fp8_delayed_update(&st, MOE_AMAX[t]);
    ck_assert(f2u(st.scale) == f2u(S3));
    fp8_delayed_free(&st);
  }
  fp8_delayed_params bad = {.history_len = 4, .format = FP8_E4M3, .unfused_update = 2};
  ck_assert_int_eq(fp8_delayed_params_check(&bad), FP8_EINVAL);
}
END_TEST

START_TEST(test_delayed_unfused_vs_te_python) {
  /* Random streams with long runs of zeros (experts without tokens), inf, NaN, tiny values and
   * margins: the unfused state equals the literal transcription of TE's Python in scale and
   * history after every step. The tiny amaxes with a margin reach the two roundings of
   * _default_sf_compute (2^-149 with margin -2: 448 / 2^-149 overflows, so does the fused
   * 1792 / 2^-149; 1e-38 with margin 10: 448 / 1e-38 = inf -> FLT_MAX where the fused
   * 0.4375 / 1e-38 is finite), and NaN stays in torch.max's window for L steps. */
  int lens[] = {1, 2, 3, 7, 16, 64};
  int diverged = 0;
  for (int li = 0; li < 6; li++)
    for (int mr = 0; mr < 2; mr++)
      for (int margin = -2; margin <= 10; margin += margin == 3 ? 7 : 5) {
        fp8_delayed_params p = {.history_len = lens[li], .margin = margin,
                                .amax_compute = mr ? FP8_AMAX_MOST_RECENT : FP8_AMAX_MAX,
                                .format = margin == 3 ? FP8_E5M2 : FP8_E4M3, .unfused_update = 1};
        fp8_delayed_params pf = p;
        pf.unfused_update = 0;
        fp8_delayed_state st, fused;
        ck_assert_int_eq(fp8_delayed_init(&st, &p), FP8_OK);
        fp8_delayed_init(&fused, &pf);
        te_unfused r = {.L = lens[li], .scale = 1.0f, .fp8_max = fp8_format_max(p.format),
                        .margin = margin, .most_recent = mr};
        float h[64];
        for (int t = 0; t < 600; t++) {
          uint64_t k = rnd() % 24;
          float a = (t / 40) % 2 ? 0.0f /* a run of steps without tokens */
                  : k < 4 ? 0.0f : k == 4 ? INFINITY : k == 5 ? NAN : k == 6 ? 0x1p-149f
                  : k == 7 ? 1e-38f : (float)pow(2.0, -20.0 + 40.0 * rnd_unit());
          fp8_delayed_update(&st, a);
          fp8_delayed_update(&fused, a);
          te_unfused_update(&r, a);
          ck_assert_msg(f2u(st.scale) == f2u(r.scale), "L=%d mr=%d margin %d t=%d: %a vs TE %a",
                        lens[li], mr, margin, t, st.scale, r.scale);
          if (f2u(st.scale) != f2u(fused.scale)) diverged++;
          /* (L = 1: fp8_delayed_history shows the latest amax, RECIPES.md's reading; TE's
           * tensor holds 0 there after the update. The scale above is what counts.) */
          fp8_delayed_history(&st, h);
          for (int i = 0; i < lens[li] && lens[li] > 1; i++)
            ck_assert_msg(f2u(h[i]) == f2u(r.h[i]) || (isnan(h[i]) && isnan(r.h[i])),
                          "L=%d mr=%d t=%d: history[%d] %a vs TE %a", lens[li], mr, t, i, h[i],
                          r.h[i]);
        }
        fp8_delayed_free(&st);
        fp8_delayed_free(&fused);
      }
  ck_assert_int_gt(diverged, 0); /* the two rules do differ on these streams */
  /* and the two roundings by themselves: 1e-38 at margin 10, one step */
  fp8_delayed_params p1 = {.history_len = 1, .margin = 10, .amax_compute = FP8_AMAX_MAX,
                           .format = FP8_E4M3, .unfused_update = 1};
  fp8_delayed_state a, b;
  fp8_delayed_init(&a, &p1);
  p1.unfused_update = 0;
  fp8_delayed_init(&b, &p1);
  fp8_delayed_update(&a, 1e-38f);
  fp8_delayed_update(&b, 1e-38f);
  ck_assert(f2u(a.scale) == f2u(FLT_MAX));
  ck_assert(f2u(b.scale) == f2u(0.4375f / 1e-38f) && isfinite(b.scale));
  fp8_delayed_free(&a);
  fp8_delayed_free(&b);
}
END_TEST

/* ------------------------------------------------------------------ current scaling */

START_TEST(test_current_scale) {
  fp8_current_params p = {.amax_epsilon = 0.0f, .pow2 = false, .margin = 0, .format = FP8_E4M3};
  ck_assert_float_eq(fp8_current_scale(&p, 3.0f), 448.0f / 3.0f);
  ck_assert_float_eq(fp8_current_scale(&p, 0.0f), 1.0f);
  ck_assert_float_eq(fp8_current_scale(&p, INFINITY), 1.0f);
  ck_assert_float_eq(fp8_current_scale(&p, NAN), 1.0f);
  ck_assert_float_eq(fp8_current_scale(&p, 0x1p-140f), FLT_MAX);
  p.pow2 = true;
  ck_assert_float_eq(fp8_current_scale(&p, 3.0f), 128.0f); /* 149.33 -> 128 */
  ck_assert_float_eq(fp8_current_scale(&p, 0.5f), 512.0f); /* 896 -> 512 */
  p.pow2 = false;
  p.amax_epsilon = 0.25f;
  ck_assert_float_eq(fp8_current_scale(&p, 0.0f), 1792.0f);
  ck_assert_float_eq(fp8_current_scale(&p, 0.125f), 1792.0f);
  ck_assert_float_eq(fp8_current_scale(&p, 1.0f), 448.0f);
  p.amax_epsilon = 0.0f;
  p.margin = 2;
  p.format = FP8_E5M2;
  ck_assert_float_eq(fp8_current_scale(&p, 7.0f), 14336.0f / 7.0f);
  ck_assert_int_eq(fp8_current_params_check(&p), FP8_OK);
  p.amax_epsilon = -1.0f;
  ck_assert_int_eq(fp8_current_params_check(&p), FP8_EINVAL);
}
END_TEST

TU_MAIN("scaling", "core", NULL, NULL, 120, test_delayed_first_steps, test_delayed_zero_keeps_state,
        test_delayed_extremes, test_delayed_constant_history, test_delayed_vs_te_array,
        test_delayed_long_windows, test_delayed_moe_zero_steps_by_hand,
        test_delayed_unfused_vs_te_python, test_current_scale)
