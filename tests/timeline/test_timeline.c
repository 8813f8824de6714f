/* test_timeline.c: `fp8lab timeline` without a GPU: the plans' schedule per mode, the model's
 * arithmetic against hand calculations (every number below is worked out in the comments from
 * the formulas of timeline.h / docs/semantics.md, not taken from the code's output), shapes
 * from flags and traces, the device-model file, and the command's outputs and errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine.h"
#include "png_io.h"
#include "testutil.h"
#include "timeline.h"
#include "trace.h"
#include "timeline_inputs.h"
#include "timeline_report.h"
#include "util.h"

/* One Linear: tokens 16, in 32, out 64, BF16, history 4, and a device whose numbers make the
 * arithmetic plain: 1 GB/s (1000 bytes per us), 0.001 TFLOP/s (1000 FLOP per us), kernels of
 * at least 2 us, all-reduce 10 us + 40 us per doubling, 1 GB/s. */
static fp8_tl_linear LIN = {"l0", 16, 32, 64, {FP8_DTYPE_BF16, FP8_DTYPE_BF16, FP8_DTYPE_BF16}};
static const fp8_tl_device DEV = {"hand", 1.0, 1e-3, 2.0, 10.0, 40.0, 1.0};

static fp8_tl_shape one_linear(int64_t world, int sp) {
  fp8_tl_shape s;
  memset(&s, 0, sizeof s);
  s.nlinears = 1;
  s.linears = &LIN;
  s.layers = 1;
  s.world = world;
  s.sequence_parallel = sp;
  s.history_len = 4;
  return s;
}

static void model(fp8_tl_mode m, int64_t world, int sp, fp8_tl_plan *p, fp8_tl_span *span,
                  fp8_tl_totals *t) {
  fp8_tl_shape s = one_linear(world, sp);
  char err[256] = "";
  ck_assert_int_eq(fp8_tl_plan_build(&s, m, p, err, sizeof err), FP8_OK);
  ck_assert_int_eq(fp8_tl_model_run(p, &s, &DEV, span, t, err, sizeof err), FP8_OK);
}

#define NEAR(a, b)                                                                          \
  ck_assert_msg(fabs((double)(a) - (double)(b)) < 1e-9 * (1 + fabs((double)(b))),             \
                "%s = %.12g, expected %.12g", #a, (double)(a), (double)(b))

/* Op durations by hand (bytes / 1000 us, flops / 1000 us, floors of 2 us per launch):
 *   cast X   512 el: 512 * (2 + 2) + 8 = 2056 B  -> 2.056
 *   cast W  2048 el: 8200 B                      -> 8.2
 *   cast dY 1024 el: 4104 B                      -> 4.104
 *   fprop, dgrad, wgrad: 2*16*32*64 = 65536 FLOP -> 65.536 each (bytes 4608, 4096, 5632: less)
 *   gather 2 us (floor), update 2 us (64 and 32 bytes); no all-reduce at world 1 (TE skips it)
 * delayed-none   = 2.056 + 8.2 + 65.536 + 4.104 + 2 * 65.536          = 210.968
 * delayed-inline = 210.968 + 2 * (2 + 2)                               = 218.968, exposed 8 */
START_TEST(model_by_hand_world1) {
  fp8_tl_plan p;
  fp8_tl_span sp[64];
  fp8_tl_totals t;
  model(FP8_TL_DELAYED_NONE, 1, 0, &p, sp, &t);
  NEAR(t.step_us, 210.968);
  NEAR(t.exposed_us, 0.0);
  ck_assert_int_eq(p.nops, 6);
  fp8_tl_plan_free(&p);

  model(FP8_TL_DELAYED_INLINE, 1, 0, &p, sp, &t);
  NEAR(t.step_us, 218.968);
  NEAR(t.exposed_us, 8.0);
  NEAR(t.update_us[0], 2.0);
  NEAR(t.update_us[1], 2.0);
  NEAR(t.allreduce_us, 0.0);
  NEAR(t.gemm_us, 3 * 65.536);
  NEAR(t.cast_us, 2.056 + 8.2 + 4.104);
  /* bytes: casts 2056 + 8200 + 4104; GEMMs 4608 + 4096 + 5632; gathers 12 per tensor (24 + 12);
   * updates 4 n L + 16 n (64 + 32) */
  NEAR(t.bytes, 14360 + 14336 + 36 + 96);
  NEAR(t.flops, 3 * 65536.0);
  ck_assert_int_eq(t.launches, 10);
  ck_assert_int_eq(t.allreduces, 0);
  NEAR(t.allreduce_bytes, 0.0);
  for (size_t i = 0; i < p.nops; i++) ck_assert_int_ne(p.ops[i].kind, FP8_TL_ALLREDUCE);
  /* the spans: forward bookkeeping right after fprop (75.792), on the compute stream */
  ck_assert_int_eq(p.ops[3].kind, FP8_TL_GATHER);
  ck_assert_int_eq(p.ops[4].kind, FP8_TL_UPDATE);
  NEAR(sp[3].start_us, 75.792);
  NEAR(sp[4].end_us, 79.792);
  fp8_tl_plan_free(&p);

  /* overlap at world 1: the side stream's 4 us hide behind the backward (and the next
   * forward): the step is delayed-none's and nothing is exposed */
  model(FP8_TL_DELAYED_OVERLAP, 1, 0, &p, sp, &t);
  NEAR(t.step_us, 210.968);
  NEAR(t.exposed_us, 0.0);
  fp8_tl_plan_free(&p);

  /* current: amax X max(2 launches * 2, 1.028) = 4, W 4.1, dY max(4, 2.052) = 4; scale 2 each
   * = 210.968 + 18.1 */
  model(FP8_TL_CURRENT, 1, 0, &p, sp, &t);
  NEAR(t.step_us, 229.068);
  NEAR(t.exposed_us, 18.1);
  ck_assert_int_eq(t.allreduces, 0);
  ck_assert_int_eq(t.launches, 3 * (1 + 2 + 1) + 3);
  fp8_tl_plan_free(&p);

  NEAR(fp8_tl_model_update_us(&DEV, 1000, 1024), (4.0 * 1000 * 1024 + 16000) / 1000);
  NEAR(fp8_tl_model_update_us(&DEV, 1, 1), 2.0);
}
END_TEST

/* World 4: an all-reduce is 10 + 40 * 2 + 2 * 3/4 * bytes / 1000: forward 8 bytes -> 90.012,
 * backward 4 bytes -> 90.006.
 * inline: 210.968 + (2 + 90.012 + 2) + (2 + 90.006 + 2) = 398.986, exposed 188.018.
 * overlap: step 0: fprop ends 75.792; side: gather 77.792, all-reduce 167.804, update 169.804;
 * backward ends 210.968; side: gather 212.968, all-reduce 302.974, update 304.974. Step 1
 * begins at 210.968; wait(fwd) needs 169.804: no stall; fprop ends 286.76; the side stream is
 * busy until 304.974, so the forward bookkeeping starts there; wait(bwd) at 286.76 needs step
 * 0's update, 304.974: a stall of 18.214; backward 4.104 + 2 * 65.536 ends at 440.15, so the
 * step is 229.182 with 18.214 exposed.
 * current with sequence parallelism: two 4-byte all-reduces of 90.006 on top of 229.068. */
START_TEST(model_by_hand_world4) {
  fp8_tl_plan p;
  fp8_tl_span sp[64];
  fp8_tl_totals t;
  model(FP8_TL_DELAYED_INLINE, 4, 0, &p, sp, &t);
  NEAR(t.step_us, 398.986);
  NEAR(t.exposed_us, 188.018);
  fp8_tl_plan_free(&p);

  model(FP8_TL_DELAYED_OVERLAP, 4, 0, &p, sp, &t);
  NEAR(t.step_us, 229.182);
  NEAR(t.exposed_us, 18.214);
  /* the second wait (before the grad_output cast) holds the stall */
  ck_assert_int_eq(p.ops[7].kind, FP8_TL_WAIT);
  NEAR(sp[7].start_us, 75.792);
  NEAR(sp[7].end_us, 75.792 + 18.214);
  /* the side stream's forward gather starts when the side stream is free: 304.974 - 210.968 */
  ck_assert_int_eq(p.ops[4].stream, FP8_TL_SIDE);
  NEAR(sp[4].start_us, 94.006);
  fp8_tl_plan_free(&p);

  model(FP8_TL_CURRENT, 4, 1, &p, sp, &t);
  NEAR(t.step_us, 229.068 + 2 * 90.006);
  NEAR(t.exposed_us, 18.1 + 2 * 90.006);
  ck_assert_int_eq(t.allreduces, 2);
  fp8_tl_plan_free(&p);
}
END_TEST

/* The schedule: which op waits for which, per mode (world 2: with the amax all-reduce). */
START_TEST(plan_schedule) {
  fp8_tl_shape s = one_linear(2, 0);
  fp8_tl_plan p;
  char err[256];
  static const fp8_tl_kind overlap[] = {
      FP8_TL_WAIT, FP8_TL_CAST, FP8_TL_CAST, FP8_TL_FPROP, FP8_TL_GATHER, FP8_TL_ALLREDUCE,
      FP8_TL_UPDATE, FP8_TL_WAIT, FP8_TL_CAST, FP8_TL_DGRAD, FP8_TL_WGRAD, FP8_TL_GATHER,
      FP8_TL_ALLREDUCE, FP8_TL_UPDATE};
  ck_assert_int_eq(fp8_tl_plan_build(&s, FP8_TL_DELAYED_OVERLAP, &p, err, sizeof err), FP8_OK);
  ck_assert_int_eq(p.nops, 14);
  for (size_t i = 0; i < 14; i++) ck_assert_int_eq(p.ops[i].kind, overlap[i]);
  for (size_t i = 4; i < 7; i++) ck_assert_int_eq(p.ops[i].stream, FP8_TL_SIDE);
  for (size_t i = 11; i < 14; i++) ck_assert_int_eq(p.ops[i].stream, FP8_TL_SIDE);
  /* side gathers start after the phase's last op; waits on the previous step's updates */
  ck_assert_int_eq(p.ops[4].ndeps, 1);
  ck_assert_int_eq(p.ops[4].dep[0].op, 3);
  ck_assert_int_eq(p.ops[4].dep[0].prev, 0);
  ck_assert_int_eq(p.ops[11].dep[0].op, 10);
  ck_assert_int_eq(p.ops[0].dep[0].op, 6);
  ck_assert_int_eq(p.ops[0].dep[0].prev, 1);
  ck_assert_int_eq(p.ops[7].dep[0].op, 13);
  ck_assert_int_eq(p.ops[7].dep[0].prev, 1);
  ck_assert_int_eq(p.ops[8].operand, FP8_TL_GRAD_OUTPUT);
  ck_assert_int_eq(p.nphase[0], 2);
  ck_assert_int_eq(p.nphase[1], 1);
  ck_assert_int_eq(p.phase_tensors[0][1], 1);
  ck_assert_int_eq(p.phase_tensors[1][0], 2);
  fp8_tl_plan_free(&p);
  /* inline: everything on the compute stream, no dependency */
  ck_assert_int_eq(fp8_tl_plan_build(&s, FP8_TL_DELAYED_INLINE, &p, err, sizeof err), FP8_OK);
  ck_assert_int_eq(p.nops, 12);
  for (size_t i = 0; i < p.nops; i++) {
    ck_assert_int_eq(p.ops[i].stream, FP8_TL_COMPUTE);
    ck_assert_int_eq(p.ops[i].ndeps, 0);
  }
  fp8_tl_plan_free(&p);
  /* current with sequence parallelism: amax, all-reduce, scale, cast for X and dY; amax,
   * scale, cast for W */
  s.sequence_parallel = 1;
  static const fp8_tl_kind cur[] = {FP8_TL_AMAX, FP8_TL_ALLREDUCE, FP8_TL_SCALE, FP8_TL_CAST,
                                    FP8_TL_AMAX, FP8_TL_SCALE, FP8_TL_CAST, FP8_TL_FPROP,
                                    FP8_TL_AMAX, FP8_TL_ALLREDUCE, FP8_TL_SCALE, FP8_TL_CAST,
                                    FP8_TL_DGRAD, FP8_TL_WGRAD};
  ck_assert_int_eq(fp8_tl_plan_build(&s, FP8_TL_CURRENT, &p, err, sizeof err), FP8_OK);
  ck_assert_int_eq(p.nops, 14);
  for (size_t i = 0; i < 14; i++) ck_assert_int_eq(p.ops[i].kind, cur[i]);
  fp8_tl_plan_free(&p);
  /* world 1: no all-reduce in any mode (TE skips the call), even with sequence parallelism */
  s.world = 1;
  for (int m = 0; m < FP8_TL_NMODES; m++) {
    ck_assert_int_eq(fp8_tl_plan_build(&s, (fp8_tl_mode)m, &p, err, sizeof err), FP8_OK);
    ck_assert_uint_eq(p.nops, m == FP8_TL_DELAYED_OVERLAP ? 12 : m == FP8_TL_DELAYED_INLINE ? 10
                              : m == FP8_TL_DELAYED_NONE ? 6 : 12);
    for (size_t i = 0; i < p.nops; i++) ck_assert_int_ne(p.ops[i].kind, FP8_TL_ALLREDUCE);
    fp8_tl_plan_free(&p);
  }
  s.nlinears = 0;
  ck_assert_int_eq(fp8_tl_plan_build(&s, FP8_TL_CURRENT, &p, err, sizeof err), FP8_EINVAL);
}
END_TEST

START_TEST(shape_from_flags) {
  fp8_tl_shape s;
  char err[256];
  ck_assert_int_eq(fp8_tl_shape_flags(2, 8, 16, 4, &s, err, sizeof err), FP8_OK);
  ck_assert_int_eq(s.nlinears, 8);
  ck_assert_int_eq(s.layers, 2);
  ck_assert_str_eq(s.linears[4].name, "layers.1.qkv");
  ck_assert_int_eq(s.linears[4].out, 24);
  ck_assert_int_eq(s.linears[7].in, 16);
  ck_assert_int_eq(s.linears[7].out, 8);
  ck_assert_int_eq(s.linears[7].tokens, 4);
  ck_assert_int_eq(s.history_len, 1024);
  fp8_tl_shape_free(&s);
  ck_assert_int_eq(fp8_tl_shape_flags(0, 8, 16, 4, &s, err, sizeof err), FP8_EINVAL);
  ck_assert_ptr_nonnull(strstr(err, "at least 1"));
  ck_assert_int_eq(fp8_tl_shape_flags(1, 1 << 20, 1 << 22, 1 << 30, &s, err, sizeof err),
                   FP8_EINVAL);
}
END_TEST

static fp8_tensor_view view(const char *name, int64_t r, int64_t c, fp8_dtype d) {
  fp8_tensor_view v = {.name = (char *)name, .dtype = d, .ndim = 2, .shape = {r, c}, .numel = r * c};
  return v;
}

/* Linears from names and shapes: tokens from input, else from grad_output; natural order;
 * layers from the first numeric component; a weight without input or grad_output is not one. */
START_TEST(shape_from_views) {
  fp8_tensor_view v[] = {
      view("blk.10.fc.input", 8, 4, FP8_DTYPE_BF16), view("blk.10.fc.weight", 6, 4, FP8_DTYPE_F32),
      view("blk.2.fc.grad_output", 5, 3, FP8_DTYPE_F16), view("blk.2.fc.weight", 3, 7, FP8_DTYPE_BF16),
      view("blk.2.head.weight", 3, 3, FP8_DTYPE_BF16), view("lone.weight", 2, 2, FP8_DTYPE_BF16),
      view("blk.2.mm.input", 9, 2, FP8_DTYPE_BF16), view("blk.2.mm.weight", 4, 2, FP8_DTYPE_BF16),
      view("blk.2.ln.input", 5, 7, FP8_DTYPE_BF16), view("blk.2.ln.weight", 7, 1, FP8_DTYPE_BF16)};
  v[9].ndim = 1; /* a LayerNorm's weight [7]: not a Linear */
  fp8_tl_shape s;
  char err[256];
  ck_assert_int_eq(fp8_tl_shape_views(v, 10, &s, err, sizeof err), FP8_OK);
  ck_assert_int_eq(s.nlinears, 3);
  ck_assert_str_eq(s.linears[0].name, "blk.2.fc");
  ck_assert_int_eq(s.linears[0].tokens, 5);
  ck_assert_int_eq(s.linears[0].in, 7);
  ck_assert_int_eq(s.linears[0].dtype[FP8_TL_INPUT], FP8_DTYPE_F16);
  ck_assert_str_eq(s.linears[1].name, "blk.2.mm");
  ck_assert_int_eq(s.linears[1].tokens, 9);
  ck_assert_str_eq(s.linears[2].name, "blk.10.fc");
  ck_assert_int_eq(s.linears[2].dtype[FP8_TL_WEIGHT], FP8_DTYPE_F32);
  ck_assert_int_eq(s.linears[2].dtype[FP8_TL_GRAD_OUTPUT], FP8_DTYPE_BF16);
  ck_assert_int_eq(s.layers, 2);
  fp8_tl_shape_free(&s);

  /* a Linear outside the numbered layers (an LM head) is not a layer (issue 25 point 5: a
   * 4-layer model with its head was counted as 5) */
  fp8_tensor_view w[] = {
      view("model.layers.0.fc.input", 8, 4, FP8_DTYPE_BF16),
      view("model.layers.0.fc.weight", 6, 4, FP8_DTYPE_BF16),
      view("model.layers.1.fc.input", 8, 4, FP8_DTYPE_BF16),
      view("model.layers.1.fc.weight", 6, 4, FP8_DTYPE_BF16),
      view("lm_head.input", 8, 4, FP8_DTYPE_BF16), view("lm_head.weight", 50, 4, FP8_DTYPE_BF16)};
  ck_assert_int_eq(fp8_tl_shape_views(w, 6, &s, err, sizeof err), FP8_OK);
  ck_assert_int_eq(s.nlinears, 3);
  ck_assert_int_eq(s.layers, 2);
  ck_assert_uint_eq(fp8_tl_layer_prefix("lm_head"), 0);
  ck_assert_uint_eq(fp8_tl_outside_layers(&s), 1);
  fp8_tl_shape_free(&s);
  /* no numbered layer at all: the whole model is one layer, nothing "outside" it */
  fp8_tensor_view u[] = {view("fc1.input", 8, 4, FP8_DTYPE_BF16), view("fc1.weight", 6, 4, FP8_DTYPE_BF16),
                         view("fc2.input", 8, 6, FP8_DTYPE_BF16), view("fc2.weight", 4, 6, FP8_DTYPE_BF16)};
  ck_assert_int_eq(fp8_tl_shape_views(u, 4, &s, err, sizeof err), FP8_OK);
  ck_assert_int_eq(s.nlinears, 2);
  ck_assert_int_eq(s.layers, 1);
  ck_assert_uint_eq(fp8_tl_outside_layers(&s), 0);
  ck_assert_uint_eq(fp8_tl_layer_prefix("model.layers.1.fc"), strlen("model.layers.1"));
  fp8_tl_shape_free(&s);
}
END_TEST

/* A MoE-sized step (issue 40: ~10^5 views; the views were found by a scan of the step for
 * every weight, and the layers counted over every pair): 4 layers x 300 experts (names
 * model.layers.L.mlp.experts.E.up, given in a shuffled order), each expert's input with
 * tokens 1 + (L * 300 + E) % 97 rows, its grad_output with 1000 rows (not read: the input has
 * the tokens), and names beside them that sort between a Linear's views ("...experts.E.up_x"
 * with '_' after '.', "...experts.E.u" a prefix) but are not its views. Every Linear, its
 * tokens by hand, and 4 layers. */
START_TEST(shape_from_many_views) {
  enum { L = 4, E = 300, PER = 5 };
  size_t n = (size_t)L * E * PER;
  fp8_tensor_view *v = calloc(n, sizeof *v);
  char(*names)[64] = calloc(n, sizeof *names);
  ck_assert_ptr_nonnull(v);
  ck_assert_ptr_nonnull(names);
  size_t k = 0;
  for (int l = 0; l < L; l++)
    for (int e = 0; e < E; e++) {
      const char *tail[PER] = {"up.input", "up.weight", "up.grad_output", "up_x.input",
                               "u.input"};
      int64_t tok = 1 + (l * E + e) % 97;
      int64_t rows[PER] = {tok, 8, 1000, 7777, 6666};
      int64_t cols[PER] = {4, 4, 8, 4, 4};
      for (int j = 0; j < PER; j++, k++) {
        snprintf(names[k], sizeof names[k], "model.layers.%d.mlp.experts.%d.%s", l, e, tail[j]);
        v[k] = view(names[k], rows[j], cols[j], FP8_DTYPE_BF16);
      }
    }
  /* shuffled: a fixed permutation (an LCG), so the views' order is no help */
  uint32_t x = 12345;
  for (size_t i = n - 1; i > 0; i--) {
    x = x * 1664525u + 1013904223u;
    size_t j = x % (i + 1);
    fp8_tensor_view t = v[i];
    v[i] = v[j];
    v[j] = t;
  }
  fp8_tl_shape s;
  char err[256];
  ck_assert_int_eq(fp8_tl_shape_views(v, n, &s, err, sizeof err), FP8_OK);
  ck_assert_uint_eq(s.nlinears, (size_t)L * E);
  ck_assert_int_eq(s.layers, L);
  /* natural order: layers 0..3, experts 0..299 */
  for (int l = 0; l < L; l++)
    for (int e = 0; e < E; e++) {
      const fp8_tl_linear *lin = &s.linears[l * E + e];
      char want[64];
      snprintf(want, sizeof want, "model.layers.%d.mlp.experts.%d.up", l, e);
      ck_assert_str_eq(lin->name, want);
      ck_assert_int_eq(lin->tokens, 1 + (l * E + e) % 97);
      ck_assert_int_eq(lin->in, 4);
      ck_assert_int_eq(lin->out, 8);
    }
  fp8_tl_shape_free(&s);
  free(v);
  free(names);
}
END_TEST

START_TEST(shape_from_synth_trace) {
  fp8_tl_shape s;
  char err[512];
  ck_assert_int_eq(fp8_tl_shape_trace("synth:llm", &s, err, sizeof err), FP8_OK);
  ck_assert_int_eq(s.nlinears, 16);
  ck_assert_int_eq(s.layers, 4);
  ck_assert_int_eq(s.world, 1);
  ck_assert_str_eq(s.linears[0].name, "layers.0.fc1");
  ck_assert_int_eq(s.linears[0].tokens, 64);
  ck_assert_int_eq(s.linears[0].in, 128);
  ck_assert_int_eq(s.linears[0].out, 512);
  ck_assert_int_eq(s.linears[0].dtype[FP8_TL_WEIGHT], FP8_DTYPE_F32);
  ck_assert_int_eq(s.linears[0].dtype[FP8_TL_INPUT], FP8_DTYPE_BF16);
  ck_assert_str_eq(s.linears[15].name, "layers.3.qkv");
  fp8_tl_shape_free(&s);
  ck_assert_int_ne(fp8_tl_shape_trace("synth:nope", &s, err, sizeof err), FP8_OK);
  ck_assert_int_ne(fp8_tl_shape_trace("/nonexistent/trace", &s, err, sizeof err), FP8_OK);
}
END_TEST

static int load_dev(const char *dir, const char *text, fp8_tl_device *d, char *err, size_t n) {
  char path[4200];
  snprintf(path, sizeof path, "%s/dev.ini", dir);
  ck_assert_int_eq(tu_write_file(path, text, strlen(text)), 0);
  return fp8_tl_device_load(path, d, err, n);
}

START_TEST(device_model_file) {
  char *dir = tu_mkdtemp(), err[600];
  fp8_tl_device d;
  ck_assert_int_eq(fp8_tl_device_load("h100", &d, err, sizeof err), FP8_OK);
  NEAR(d.hbm_gbps, 3000.0);
  ck_assert_int_eq(load_dev(dir, "# mine\n[device]\nname = my gpu\nbase = h100\nfp8_tflops = 900 "
                                  "; lower\nallreduce_hop_us = 0\n", &d, err, sizeof err), FP8_OK);
  ck_assert_str_eq(d.name, "my gpu");
  NEAR(d.fp8_tflops, 900.0);
  NEAR(d.hbm_gbps, 3000.0); /* from base h100 */
  NEAR(d.allreduce_hop_us, 0.0);
  /* a BOM, CRLF line ends and an indented key (not the continuation of the value before it) */
  ck_assert_int_eq(load_dev(dir, "\xEF\xBB\xBF[device]\r\nhbm_gbps = 4000\r\n\n  fp8_tflops = 900\r\n",
                            &d, err, sizeof err), FP8_OK);
  NEAR(d.hbm_gbps, 4000.0);
  NEAR(d.fp8_tflops, 900.0);
  static const struct {
    const char *text, *msg;
  } bad[] = {
      {"[device]\nhbm_gbps = 1\nfoo = 2\n", "dev.ini:3: unknown key foo"},
      {"[device]\nkernel_us = 1\nkernel_us = 2\n", "dev.ini:3: key kernel_us given twice"},
      {"[device]\nkernel_us = -1\n", "dev.ini:2: expected a positive number, got '-1'"},
      {"[device]\nkernel_us = 0\n", "dev.ini:2: expected a positive number, got '0'"},
      {"[device]\nhbm_gbps = 5e999\n", "dev.ini:2: expected a positive number"},
      {"[device]\nhbm_gbps = 1\nbase = h200\n", "dev.ini:3: base must come before"},
      {"[device]\nbase = a100\n", "dev.ini:2: base a100: expected h100 or h200"},
      {"hbm_gbps = 1\n", "dev.ini:1: key hbm_gbps outside [device]"},
      {"[gpu]\n", "dev.ini:1: unknown section [gpu]"},
      {"# nothing\n", "dev.ini:1: no [device] section"},
      {"[device]\njust words\n", "dev.ini:2: syntax error"},
      {"[device\nhbm_gbps = 1\n", "dev.ini:1: expected [device] alone on its line, got [device"},
      {"[device] x = 1\n", "dev.ini:1: expected [device] alone on its line"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    err[0] = 0;
    ck_assert_int_eq(load_dev(dir, bad[i].text, &d, err, sizeof err), FP8_EINVAL);
    ck_assert_msg(strstr(err, bad[i].msg), "case %zu: '%s' lacks '%s'", i, err, bad[i].msg);
    ck_assert_ptr_null(strchr(err, '\n'));
  }
  ck_assert_int_eq(fp8_tl_device_load("/nonexistent.ini", &d, err, sizeof err), FP8_EIO);
  tu_rmtree(dir);
  free(dir);
}
END_TEST

/* The measured steps' statistics on made-up records: plan 0 delayed-inline (12 ops, 6 of them
 * bookkeeping), plan 1 delayed-none (6 ops). Op i of a step with factor f spans [i f, (i+1) f],
 * so the step takes nops * f and each op f. inline: f = 2, 1, 3 over rounds 0-2 (steps 24, 12,
 * 36: median 24, the median step 0; exposed 6 f: 12); its round 3 lacks an op (left out). none:
 * f = 1, 1, 2, 5 (steps 6, 6, 12, 30). Paired inline - none: 18, 6, 24 (median 18). */
static void add_step(fp8_tl_measurement *m, int32_t plan, int32_t step, size_t nops, double f,
                     size_t skip) {
  for (size_t i = 0; i < nops; i++)
    if (i != skip)
      m->rec[m->nrec++] = (fp8_tl_record){plan, step, step, (int32_t)i, (double)i * f,
                                          (double)(i + 1) * f, {NULL, NULL}};
}

START_TEST(measured_statistics) {
  fp8_tl_shape s = one_linear(2, 0);
  fp8_tl_plan p[2];
  char err[256];
  ck_assert_int_eq(fp8_tl_plan_build(&s, FP8_TL_DELAYED_INLINE, &p[0], err, sizeof err), FP8_OK);
  ck_assert_int_eq(fp8_tl_plan_build(&s, FP8_TL_DELAYED_NONE, &p[1], err, sizeof err), FP8_OK);
  ck_assert_int_eq(p[0].nops, 12);
  ck_assert_int_eq(p[1].nops, 6);
  fp8_tl_record rec[100];
  fp8_tl_measurement m = {.rec = rec};
  static const double fi[4] = {2, 1, 3, 7}, fn[4] = {1, 1, 2, 5};
  for (int32_t k = 0; k < 4; k++) {
    add_step(&m, 0, k, 12, fi[k], k == 3 ? 5 : 99);
    add_step(&m, 1, k, 6, fn[k], 99);
  }
  fp8_tl_report r = {.shape = &s, .nplans = 2, .plans = p, .meas = &m, .steps = 4};
  fp8_tl_stats st;
  ck_assert_int_eq(fp8_tl_stats_of(&r, 0, &st), FP8_OK);
  NEAR(st.step_med, 24.0);
  NEAR(st.step_min, 12.0);
  NEAR(st.step_max, 36.0);
  NEAR(st.exposed_med, 12.0);
  NEAR(st.update_med[0], 2.0);
  NEAR(st.allreduce_med, 4.0);
  NEAR(st.vs_none_med, 18.0);
  NEAR(st.vs_none_min, 6.0);
  NEAR(st.vs_none_max, 24.0);
  ck_assert_int_eq(st.median_step, 0);
  ck_assert_int_eq(fp8_tl_stats_of(&r, 1, &st), FP8_OK);
  NEAR(st.step_med, 9.0); /* 6, 6, 12, 30: the mean of the middle two */
  ck_assert_int_eq(st.median_step, 0);
  NEAR(st.vs_none_med, 0.0);
  double d[3];
  ck_assert_int_eq(fp8_tl_paired(&r, 1, 0, d), FP8_OK);
  NEAR(d[0], -18.0);
  fp8_tl_plan_free(&p[0]);
  fp8_tl_plan_free(&p[1]);
}
END_TEST

static size_t count_lines(const char *s) {
  size_t n = 0;
  for (; *s; s++) n += *s == '\n';
  return n;
}

/* The command without a GPU: the estimate, labelled so, every mode in timeline.md, the CSV's
 * schema and one row per op of each mode's model step, both PNGs with their text chunks. */
START_TEST(cli_estimate) {
  char *dir = tu_mkdtemp(), *out = NULL, path[4200];
  int st = tu_cli(dir, &out, "timeline synth:llm --device cpu --out tl --history 16");
  ck_assert_msg(st == 0, "exit %d: %s", st, out);
  ck_assert_ptr_nonnull(strstr(out, "MODEL ESTIMATE, not a measurement (--device cpu)"));
  ck_assert_ptr_nonnull(strstr(out, "delayed-overlap"));
  free(out);
  snprintf(path, sizeof path, "%s/tl/timeline.md", dir);
  char *md = tu_read_file(path, NULL);
  ck_assert_ptr_nonnull(md);
  ck_assert_ptr_nonnull(strstr(md, "**Not measured** (--device cpu)"));
  static const char *const modes[] = {"| delayed-inline |", "| delayed-overlap |",
                                      "| delayed-none |", "| current |"};
  for (int m = 0; m < 4; m++) ck_assert_msg(strstr(md, modes[m]), "no row %s", modes[m]);
  ck_assert_ptr_nonnull(strstr(md, "| 32 (forward) | 16 |"));
  ck_assert_ptr_nonnull(strstr(md, "| 1000 | 1024 | not measured |"));
  free(md);
  /* 16 Linears: delayed-inline 16 * 6 + 4 ops (world 1: no all-reduce), overlap + 2 waits,
   * none 96, current 16 * 12 */
  snprintf(path, sizeof path, "%s/tl/timeline.csv", dir);
  char *csv = tu_read_file(path, NULL);
  ck_assert_ptr_nonnull(csv);
  ck_assert_int_eq(strncmp(csv, "mode,step,stream,op,tensor,start_us,end_us,source\n", 50), 0);
  ck_assert_int_eq(count_lines(csv), 1 + 100 + 102 + 96 + 192);
  ck_assert_ptr_nonnull(strstr(csv, "\ndelayed-overlap,0,side,update,backward,"));
  ck_assert_ptr_nonnull(strstr(csv, "\ncurrent,0,compute,amax,layers.0.fc1.input,"));
  ck_assert_ptr_null(strstr(csv, ",measured\n"));
  free(csv);
  for (int z = 0; z < 2; z++) {
    fp8_png_info info;
    char err[256];
    snprintf(path, sizeof path, "%s/tl/timeline%s.png", dir, z ? "_zoom" : "");
    ck_assert_int_eq(fp8_png_read_info(path, &info, err, sizeof err), FP8_OK);
    ck_assert_str_eq(fp8_png_info_get(&info, "plot"), "timeline");
    ck_assert_str_eq(fp8_png_info_get(&info, "device"), "model estimate, not measured");
    ck_assert_ptr_nonnull(strstr(fp8_png_info_get(&info, "shape"), "synth:llm"));
    fp8_png_info_free(&info);
  }
  /* the flag form */
  st = tu_cli(dir, &out, "timeline --layers 2 --hidden 64 --ffn 256 --tokens 128 --device cpu "
                         "--out tl2 --modes current,delayed-inline --quiet");
  ck_assert_msg(st == 0 && out[0] == 0, "exit %d: %s", st, out);
  free(out);
  snprintf(path, sizeof path, "%s/tl2/timeline.md", dir);
  md = tu_read_file(path, NULL);
  ck_assert_ptr_nonnull(strstr(md, "8 Linear layers in 2 transformer layers"));
  ck_assert_ptr_null(strstr(md, "| delayed-overlap |"));
  free(md);
  /* a trace with an LM head: two layers, and the head counted apart (issue 25 point 5) */
  snprintf(path, sizeof path, "%s/lm", dir);
  mkdir(path, 0777);
  float x[32], w[400];
  for (int i = 0; i < 32; i++) x[i] = 1.0f;
  for (int i = 0; i < 400; i++) w[i] = 0.5f;
  fp8_tensor_out t[6] = {{"layers.0.fc.input", FP8_DTYPE_F32, 2, {8, 4}, x},
                         {"layers.0.fc.weight", FP8_DTYPE_F32, 2, {6, 4}, w},
                         {"layers.1.fc.input", FP8_DTYPE_F32, 2, {8, 4}, x},
                         {"layers.1.fc.weight", FP8_DTYPE_F32, 2, {6, 4}, w},
                         {"lm_head.input", FP8_DTYPE_F32, 2, {8, 4}, x},
                         {"lm_head.weight", FP8_DTYPE_F32, 2, {100, 4}, w}};
  char err2[FP8_ERRLEN];
  snprintf(path, sizeof path, "%s/lm/step_0.safetensors", dir);
  ck_assert_int_eq(fp8_safetensors_write(path, t, 6, NULL, err2, sizeof err2), FP8_OK);
  st = tu_cli(dir, &out, "timeline lm --device cpu --out tl3 --quiet");
  ck_assert_msg(st == 0 && out[0] == 0, "exit %d: %s", st, out);
  free(out);
  snprintf(path, sizeof path, "%s/tl3/timeline.md", dir);
  md = tu_read_file(path, NULL);
  ck_assert_msg(strstr(md, "Shape: 3 Linear layers in 2 transformer layers and 1 outside them "
                           "(such as an LM head)") != NULL, "%.400s", md);
  free(md);
  tu_rmtree(dir);
  free(dir);
}
END_TEST

/* Bad input: one line, exit 2; a GPU asked for where there is none: exit 1. */
START_TEST(cli_errors) {
  char *dir = tu_mkdtemp(), *out = NULL;
  static const struct {
    const char *args, *msg;
    int status;
  } cases[] = {
      {"timeline", "give a TRACE or all four of --layers", 2},
      {"timeline synth:llm --layers 2", "give a TRACE or all four", 2},
      {"timeline --layers 2 --hidden 8 --ffn 8", "give a TRACE or all four", 2},
      {"timeline synth:llm --modes delayed,current", "--modes: unknown mode delayed", 2},
      {"timeline synth:llm --steps 0", "--steps wants an integer from 1 to 100, got 0", 2},
      {"timeline synth:llm --bench-tensors 1048576 --bench-history 1024", "at most 2^28", 2},
      {"timeline synth:llm --device tpu", "--device wants auto, cpu or gpu, got tpu", 2},
      {"timeline synth:llm --bogus", "unknown option --bogus", 2},
      {"timeline synth:llm --device-model nope.ini --device cpu", "nope.ini: cannot open", 2},
      {"timeline /nonexistent/trace --device cpu", "/nonexistent/trace", 2},
      {"timeline synth:llm --device gpu", "--device gpu: ", 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    int st = tu_cli(dir, &out, "%s", cases[i].args);
    ck_assert_msg(st == cases[i].status, "%s: exit %d: %s", cases[i].args, st, out);
    ck_assert_msg(strstr(out, cases[i].msg), "%s: '%s' lacks '%s'", cases[i].args, out,
                  cases[i].msg);
    ck_assert_msg(count_lines(out) == 1, "%s: not one line: %s", cases[i].args, out);
    free(out);
  }
  tu_rmtree(dir);
  free(dir);
}
END_TEST

int main(void) {
  Suite *s = suite_create("timeline");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, model_by_hand_world1);
  tcase_add_test(tc, model_by_hand_world4);
  tcase_add_test(tc, plan_schedule);
  tcase_add_test(tc, shape_from_flags);
  tcase_add_test(tc, shape_from_views);
  tcase_add_test(tc, shape_from_many_views);
  tcase_add_test(tc, shape_from_synth_trace);
  tcase_add_test(tc, device_model_file);
  tcase_add_test(tc, measured_statistics);
  tcase_add_test(tc, cli_estimate);
  tcase_add_test(tc, cli_errors);
  suite_add_tcase(s, tc);
  return tu_run_suite(s);
}
