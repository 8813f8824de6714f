/* test_emu.c: the closed-loop emulator's library (src/emu/emu.h) by hand cases: delayed
 * scaling's scales step by step (TE's order: cast with the state's scale, then update), the
 * window's max, an amax of 0, current scaling, E4M3 ties to even, saturation's overflow and
 * clipped counts (RECIPES.md), BF16 rounding, a block kind against the simulator's own call,
 * the section a tensor takes, pending amaxes, and the refusals with their messages. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "block.h"
#include "emu.h"
#include "testutil.h"
#include "tu_dir.h"

static const char *INI =
    "[trace]\npath = t\n"
    "[recipe.d]\nkind = delayed\nformat = e4m3\nhistory_len = 1\nmargin = 0\n"
    "[recipe.h2]\nkind = delayed\nformat = e4m3\nhistory_len = 2\namax_compute = max\n"
    "[recipe.cur]\nkind = current\nformat = e4m3\n"
    "[recipe.keep]\nkind = bf16\n"
    "[recipe.mx]\nkind = mxfp8\nformat = e4m3\n"
    "[recipe.mix]\nkind = current\nformat = hybrid\ntensors = *.weight\n"
    "[recipe.mix2]\nlabel = mix\nkind = delayed\nformat = e5m2\n"
    "[recipe.part]\nkind = delayed\ntensors = blocks.0.*\n";

static fp8emu *open_label(const char *label) {
  char err[512] = "";
  fp8emu *e = fp8emu_open(path_in("x.ini"), label, err, sizeof err);
  ck_assert_msg(e != NULL, "%s", err);
  return e;
}

static int slot_of(fp8emu *e, const char *name) {
  char err[512] = "";
  int s = fp8emu_slot(e, name, err, sizeof err);
  ck_assert_msg(s >= 0, "%s: %d %s", name, s, err);
  return s;
}

/* one cast of a [1, n] tensor; returns its statistics */
static fp8emu_stats cast(fp8emu *e, int slot, const float *x, int n, float *xhat) {
  fp8emu_stats st;
  char err[512] = "";
  ck_assert_msg(fp8emu_qdq(e, slot, x, 1, n, 0, xhat, &st, err, sizeof err) == 0, "%s", err);
  return st;
}

static void step(fp8emu *e, int slot, float amax) {
  float x[2] = {amax, -amax / 2}, xhat[2];
  cast(e, slot, x, 2, xhat);
  char err[512] = "";
  ck_assert_msg(fp8emu_update(e, err, sizeof err) == 0, "%s", err);
}

START_TEST(test_delayed) {
  put_text("x.ini", INI);
  ck_assert_int_eq(fp8emu_abi(), FP8EMU_ABI);
  fp8emu *e = open_label("d");
  int s = slot_of(e, "blocks.0.fc1.input");
  ck_assert_int_eq(slot_of(e, "blocks.0.fc1.input"), s); /* the same name, the same slot */
  ck_assert_str_eq(fp8emu_slot_kind(e, s), "delayed");
  ck_assert_str_eq(fp8emu_slot_format(e, s), "e4m3");
  ck_assert_str_eq(fp8emu_slot_name(e, s), "blocks.0.fc1.input");
  ck_assert_ptr_nonnull(strstr(fp8emu_slot_settings(e, s), "history_len = 1"));
  /* step 0 uses scale 1 (TE's initial scale) */
  ck_assert(fp8emu_scale(e, s) == 1.0);
  float x[3] = {2.0f, -1.0f, 0.5f}, xhat[3];
  fp8emu_stats st = cast(e, s, x, 3, xhat);
  ck_assert(st.scale == 1.0 && st.amax == 2.0 && st.n == 3);
  ck_assert(st.overshoot == log2(2.0 / 448.0));
  ck_assert(xhat[0] == 2.0f && xhat[1] == -1.0f && xhat[2] == 0.5f);
  ck_assert(fp8emu_scale(e, s) == 1.0); /* the update, not the cast, moves it */
  ck_assert_int_eq(fp8emu_update(e, NULL, 0), 0);
  ck_assert(fp8emu_scale(e, s) == 224.0); /* 448 / 2 */
  /* a step in which the tensor did not run (amax 0): the scale is kept (TE PR #825) */
  ck_assert_int_eq(fp8emu_update(e, NULL, 0), 0);
  ck_assert(fp8emu_scale(e, s) == 224.0);
  float z[2] = {0.0f, -0.0f};
  cast(e, s, z, 2, xhat);
  ck_assert_int_eq(fp8emu_update(e, NULL, 0), 0);
  ck_assert(fp8emu_scale(e, s) == 224.0);
  /* the next cast uses 224 */
  st = cast(e, s, x, 3, xhat);
  ck_assert(st.scale == 224.0 && st.overshoot == 0.0);
  fp8emu_close(e);

  /* history 2, max: the window's max */
  e = open_label("h2");
  s = slot_of(e, "a.weight");
  step(e, s, 4.0f);
  ck_assert(fp8emu_scale(e, s) == 112.0);
  step(e, s, 1.0f);
  ck_assert(fp8emu_scale(e, s) == 112.0); /* max(4, 1) */
  step(e, s, 1.0f);
  ck_assert(fp8emu_scale(e, s) == 448.0); /* max(1, 1): the 4 left the window */
  step(e, s, 8.0f);
  ck_assert(fp8emu_scale(e, s) == 56.0);
  fp8emu_close(e);
}
END_TEST

START_TEST(test_current_and_ties) {
  put_text("x.ini", INI);
  fp8emu *e = open_label("cur");
  int s = slot_of(e, "a.input");
  ck_assert(isnan(fp8emu_scale(e, s))); /* no cast yet */
  float x[2] = {3.0f, 1.0f}, xhat[2];
  fp8emu_stats st = cast(e, s, x, 2, xhat);
  ck_assert(st.scale == (double)(448.0f / 3.0f));
  ck_assert(fp8emu_scale(e, s) == (double)(448.0f / 3.0f));
  ck_assert_int_eq(fp8emu_update(e, NULL, 0), 0);
  ck_assert(fp8emu_scale(e, s) == (double)(448.0f / 3.0f)); /* no state: the last cast's */
  fp8emu_close(e);

  /* ties between two E4M3 codes round to the even one (scale 1, step 0 of delayed): near 1
   * the codes are 1/8 apart; 1.0625 lies between 1 (even) and 1.125, 1.1875 between 1.125
   * and 1.25 (even); just above a midpoint goes up */
  e = open_label("d");
  s = slot_of(e, "a.input");
  float t[5] = {1.0625f, 1.1875f, nextafterf(1.0625f, 2.0f), -1.0625f, 0.0f}, th[5];
  cast(e, s, t, 5, th);
  ck_assert(th[0] == 1.0f && th[1] == 1.25f && th[2] == 1.125f && th[3] == -1.0f && th[4] == 0.0f);
  /* saturation: |x*s| > 448 overflows; only past 464 (which ties to 448) is it clipped */
  float big[6] = {448.0f, 460.0f, 464.0f, 465.0f, -1e9f, INFINITY}, bh[6];
  fp8emu_stats sb = cast(e, s, big, 6, bh);
  ck_assert_int_eq(sb.overflow, 4);
  ck_assert_int_eq(sb.clipped, 2);
  ck_assert_int_eq(sb.nonfinite, 1);
  ck_assert(bh[0] == 448.0f && bh[1] == 448.0f && bh[2] == 448.0f && bh[3] == 448.0f &&
            bh[4] == -448.0f && bh[5] == 448.0f);
  ck_assert(sb.amax == INFINITY);
  /* the subnormals: 2^-9 is E4M3's smallest; 2^-11 flushes to 0 (underflow) */
  float sub[3] = {0x1p-9f, 0x1p-11f, 0x1.8p-8f}, sh[3];
  fp8emu_stats ss = cast(e, s, sub, 3, sh);
  ck_assert_int_eq(ss.subnormal, 2);
  ck_assert_int_eq(ss.underflow, 1);
  ck_assert(sh[0] == 0x1p-9f && sh[1] == 0.0f && sh[2] == 0x1.8p-8f);
  /* the pending amax is the max over the casts since the update: inf here */
  float pend[1];
  ck_assert_int_eq(fp8emu_pending(e, pend, 1), 0);
  ck_assert(pend[0] == INFINITY);
  float two[1] = {2.0f};
  ck_assert_int_eq(fp8emu_set_pending(e, two, 1), 0);
  ck_assert_int_eq(fp8emu_update(e, NULL, 0), 0);
  ck_assert(fp8emu_scale(e, s) == 224.0);
  ck_assert_int_eq(fp8emu_pending(e, pend, 1), 0);
  ck_assert(pend[0] == 0.0f);
  /* xhat may be x: the same values and statistics as into another buffer */
  float a[4] = {1.0625f, 3.3f, -0.01f, 500.0f}, ah[4];
  fp8emu_stats s1 = cast(e, s, a, 4, ah);
  fp8emu_stats s2 = cast(e, s, a, 4, a);
  ck_assert(memcmp(a, ah, sizeof a) == 0);
  ck_assert(s1.sum_sq_err == s2.sum_sq_err && s1.sum_sq_err > 0.0 && s1.overflow == s2.overflow);
  fp8emu_close(e);
}
END_TEST

START_TEST(test_bf16_and_blocks) {
  put_text("x.ini", INI);
  fp8emu *e = open_label("keep");
  int s = slot_of(e, "a.input");
  ck_assert_str_eq(fp8emu_slot_kind(e, s), "bf16");
  /* BF16 keeps 8 bits of significand: 1 + 2^-8 ties to 1 (even), 1 + 3*2^-8 to 1 + 2^-6 */
  float x[5] = {1.0f + 0x1p-8f, 1.0f + 0x3p-8f, 1.0f + 0x1.8p-8f, NAN, -INFINITY}, xh[5];
  fp8emu_stats st = cast(e, s, x, 5, xh);
  ck_assert(xh[0] == 1.0f && xh[1] == 1.0f + 0x1p-6f && xh[2] == 1.0f + 0x1p-7f);
  ck_assert(isnan(xh[3]) && xh[4] == -INFINITY);
  ck_assert(isnan(st.scale) && st.overshoot == -INFINITY && st.sum_sq_err == 0.0 &&
            st.nonfinite == 2 && st.overflow == 0);
  fp8emu_close(e);

  /* mxfp8: the simulator's block quantizer with the CPU engine's parameters, along either
   * direction */
  e = open_label("mx");
  s = slot_of(e, "a.input");
  ck_assert_str_eq(fp8emu_slot_kind(e, s), "mxfp8");
  enum { R = 40, C = 33 };
  static float m[R * C], mh[R * C], ref[R * C];
  for (int i = 0; i < R * C; i++) m[i] = (float)((i * 7919) % 1000 - 500) * (i % 13 ? 1e-3f : 3.0f);
  fp8_block_params bp = fp8_block_params_mxfp8(FP8_E4M3, FP8_MX_ROUND_CEIL);
  for (int dir = 0; dir < 2; dir++) {
    fp8emu_stats bs;
    char err[512] = "";
    ck_assert_msg(fp8emu_qdq(e, s, m, R, C, dir, mh, &bs, err, sizeof err) == 0, "%s", err);
    fp8_stats fs;
    fp8_stats_init(&fs);
    fp8_block_stats bst;
    ck_assert_int_eq(fp8_block_quantize_f32(m, R, C, &bp, dir ? FP8_BLOCK_DIR_COL : FP8_BLOCK_DIR_ROW,
                                            ref, NULL, &fs, &bst), FP8_OK);
    ck_assert(memcmp(mh, ref, sizeof ref) == 0);
    ck_assert(bs.sum_sq_err == fs.sum_sq_err && bs.n == R * C && isnan(bs.scale) &&
              bs.overshoot == bst.overshoot);
  }
  fp8emu_close(e);
}
END_TEST

START_TEST(test_sections) {
  put_text("x.ini", INI);
  /* one label of two sections: each tensor takes the first, in file order, that matches */
  fp8emu *e = open_label("mix");
  int w = slot_of(e, "l.weight"), i = slot_of(e, "l.input"), g = slot_of(e, "l.grad_output");
  ck_assert_str_eq(fp8emu_slot_kind(e, w), "current");
  ck_assert_str_eq(fp8emu_slot_kind(e, i), "delayed");
  ck_assert_str_eq(fp8emu_slot_format(e, i), "e5m2");
  ck_assert_str_eq(fp8emu_slot_format(e, g), "e5m2");
  ck_assert_int_eq(fp8emu_nslots(e), 3);
  fp8emu_close(e);
  /* a tensor no section covers stays in high precision (-1); hybrid needs a role (-2) */
  e = open_label("part");
  char err[512] = "";
  ck_assert_int_eq(fp8emu_slot(e, "blocks.1.fc1.input", err, sizeof err), -1);
  int s = slot_of(e, "blocks.0.fc1.grad_input");
  ck_assert_str_eq(fp8emu_slot_format(e, s), "e5m2");
  ck_assert_int_eq(fp8emu_slot(e, "blocks.0.fc1.bias", err, sizeof err), -2);
  ck_assert_msg(strstr(err, ":29: tensor blocks.0.fc1.bias: role 'bias' is not one of") &&
                strstr(err, "[recipe.part] uses format = hybrid"), "%s", err);
  fp8emu_close(e);
}
END_TEST

START_TEST(test_bad_calls) {
  put_text("x.ini", INI);
  fp8emu *e = open_label("d");
  int s = slot_of(e, "a.input");
  char err[512];
  float x[2] = {1.0f, 2.0f}, xh[2];
  fp8emu_stats st;
  ck_assert_int_eq(fp8emu_qdq(e, 5, x, 1, 2, 0, xh, &st, err, sizeof err), -2);
  ck_assert_str_eq(err, "fp8emu_qdq: slot 5 is not one of the 1 slots");
  ck_assert_int_eq(fp8emu_qdq(e, -1, x, 1, 2, 0, xh, &st, err, sizeof err), -2);
  ck_assert_int_eq(fp8emu_qdq(NULL, s, x, 1, 2, 0, xh, &st, err, sizeof err), -2);
  ck_assert_int_eq(fp8emu_qdq(e, s, NULL, 1, 2, 0, xh, &st, err, sizeof err), -2);
  ck_assert_str_eq(err, "fp8emu_qdq: tensor a.input: x is NULL");
  ck_assert_int_eq(fp8emu_qdq(e, s, x, 1, 2, 0, NULL, &st, err, sizeof err), -2);
  ck_assert_int_eq(fp8emu_qdq(e, s, x, -1, 2, 0, xh, &st, err, sizeof err), -2);
  ck_assert_str_eq(err, "fp8emu_qdq: tensor a.input: bad shape [-1, 2]");
  ck_assert_int_eq(fp8emu_qdq(e, s, x, INT64_MAX, 2, 0, xh, &st, err, sizeof err), -2);
  ck_assert_int_eq(fp8emu_qdq(e, s, x, 1, 2, 2, xh, &st, err, sizeof err), -2);
  ck_assert_int_eq(fp8emu_qdq(e, s, NULL, 0, 5, 0, NULL, NULL, err, sizeof err), 0); /* empty */
  ck_assert_int_eq(fp8emu_slot(NULL, "a.input", err, sizeof err), -2);
  ck_assert_int_eq(fp8emu_slot(e, NULL, err, sizeof err), -2);
  ck_assert_ptr_null(fp8emu_slot_kind(e, 1));
  ck_assert_ptr_null(fp8emu_slot_name(NULL, 0));
  ck_assert(isnan(fp8emu_scale(e, 3)));
  float p[2] = {1.0f, 1.0f};
  ck_assert_int_eq(fp8emu_pending(e, p, 2), -2);
  ck_assert_int_eq(fp8emu_pending(e, NULL, 1), -2);
  ck_assert_int_eq(fp8emu_set_pending(e, p, -1), -2);
  float neg[1] = {-1.0f};
  ck_assert_int_eq(fp8emu_set_pending(e, neg, 1), -2);
  ck_assert_int_eq(fp8emu_update(NULL, err, sizeof err), -2);
  ck_assert_int_eq(fp8emu_nslots(NULL), 0);
  fp8emu_close(e);
  fp8emu_close(NULL);
}
END_TEST

START_TEST(test_refusals) {
  put_text("x.ini", INI);
  char err[512] = "";
  ck_assert_ptr_null(fp8emu_open(path_in("x.ini"), "nope", err, sizeof err));
  char want[1024];
  snprintf(want, sizeof want,
           "%s: no [recipe.*] section has the label nope (the file's labels: d, h2, cur, keep, "
           "mx, mix, part)", path_in("x.ini"));
  ck_assert_str_eq(err, want);
  /* a swept key: one run trains one recipe */
  put_text("s.ini", "[trace]\npath = t\n[recipe.a]\nkind = delayed\n"
                    "[recipe.b]\nkind = delayed\nhistory_len = 1\nmargin = 0, 1\n");
  ck_assert_ptr_null(fp8emu_open(path_in("s.ini"), "b", err, sizeof err));
  snprintf(want, sizeof want,
           "%s:8: [recipe.b] (label b) sweeps a key (2 configurations): the emulator trains one "
           "recipe, give each key of the label one value", path_in("s.ini"));
  ck_assert_str_eq(err, want);
  /* the file's own errors come from the experiment loader, with file and line */
  put_text("bad.ini", "[trace]\npath = t\n[recipe.a]\nkind = sometimes\n");
  ck_assert_ptr_null(fp8emu_open(path_in("bad.ini"), "a", err, sizeof err));
  snprintf(want, sizeof want, "%s:4:", path_in("bad.ini"));
  ck_assert_msg(strncmp(err, want, strlen(want)) == 0, "%s", err);
  ck_assert_ptr_null(fp8emu_open(path_in("none.ini"), "a", err, sizeof err));
  ck_assert_ptr_null(fp8emu_open(NULL, "a", err, sizeof err));
  ck_assert_str_eq(err, "fp8emu_open: ini is NULL");
  ck_assert_ptr_null(fp8emu_open(path_in("x.ini"), NULL, NULL, 0));
}
END_TEST

TU_MAIN("emu", "api", setup, teardown, 0, test_delayed, test_current_and_ties,
        test_bf16_and_blocks, test_sections, test_bad_calls, test_refusals)
