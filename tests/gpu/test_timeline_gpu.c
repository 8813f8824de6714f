/* test_timeline_gpu.c: the GPU timeline (src/gpu/timeline_gpu*.c) on a small model, every mode.
 *
 * On a device (label gpu) and on the CUDA emulator (test_timeline_gpu_emu, label cpu):
 *   - one record per op of every step run, each ending after it starts;
 *   - the recipe state the steps leave: the amax each tensor's cast found (the cast kernel's
 *     atomic amax in the delayed modes) equals the amax pass of current scaling (another
 *     kernel) and delayed-none's accumulated one; delayed scales are RN32(scaled_max / amax)
 *     (the history holds one constant amax), current scales are fp8_current_scale's; the
 *     overlap mode ends with the inline mode's scales; delayed-none's stay the first scales,
 *     RN32(scaled_max / fill amplitude); every amax is within the fill amplitude (rounded to
 *     the dtype).
 * On the emulator only, the schedule: the mock CUDA runtime logs every stream-ordering call and
 * hb_check.h computes CUDA's happens-before over the log, so every op's dependencies are
 * checked as a GPU guarantees them, under every legal interleaving of the streams:
 *   - the step's data flow, derived here from the op kinds (not from the plan's dependency
 *     list): a GEMM after the casts of its operands, a phase's gather after every cast of
 *     that phase, all-reduce and update after it, the next step's casts of the phase after
 *     the update (they read its scales, and the gather read the amax slots they write),
 *     current scaling's amax -> all-reduce -> scale -> cast;
 *   - delayed-overlap overlaps: the forward update does not hold up the backward of its step,
 *     the backward update not the next step's forward;
 *   - a schedule run without its waits (skip_join) breaks the data flow, so the check can fail.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "engine.h"
#include "fp8.h"
#include "gpu_harness.h"
#include "timeline.h"
#ifdef FP8LAB_TL_EMU
#include "hb_check.h"
#include "mock_cuda.h"
#endif

#define STEPS 2
#define WARMUP 1

static fp8_tl_shape shape;
static fp8_tl_plan plans[FP8_TL_NMODES];

static int run(int skip_join, fp8_tl_measurement *m, char *err, size_t errlen) {
  fp8_tl_gpu_args a = {.shape = &shape, .plans = plans, .nplans = FP8_TL_NMODES,
                       .warmup = WARMUP, .steps = STEPS, .bench_tensors = 8,
                       .bench_history = 16, .bench_reps = 3, .skip_join = skip_join};
  return fp8_timeline_gpu_run(&a, m, err, errlen);
}

static void test_records_and_state(void) {
  fp8_tl_measurement m;
  char err[512] = "";
  int rc = run(0, &m, err, sizeof err);
  GH_REQUIRE(rc == FP8_OK, "fp8_timeline_gpu_run: %s", err);
  size_t want = 0;
  for (int k = 0; k < FP8_TL_NMODES; k++) want += (WARMUP + 2 * STEPS) * plans[k].nops;
  GH_CHECK(m.nrec == want, "%zu records, expected %zu", m.nrec, want);
  size_t bad = 0, measured = 0;
  for (size_t i = 0; i < m.nrec; i++) {
    bad += !(m.rec[i].end_us >= m.rec[i].start_us) || m.rec[i].start_us < -1e-3;
    measured += m.rec[i].step >= 0;
  }
  GH_CHECK(bad == 0, "%zu records end before they start", bad);
  /* the times obey the schedule: an op waiting for another op of its step starts after that
   * op's end (1 us: event timestamps' resolution) */
  size_t late = 0, deps = 0;
  for (size_t i = 0; i < m.nrec; i++) {
    const fp8_tl_op *op = &plans[m.rec[i].plan].ops[m.rec[i].op];
    for (int j = 0; j < op->ndeps; j++) {
      if (op->dep[j].prev) continue; /* another step: another time base */
      const fp8_tl_record *d = &m.rec[i - (size_t)(m.rec[i].op - op->dep[j].op)];
      deps++;
      late += !(d->op == op->dep[j].op && d->iter == m.rec[i].iter &&
                m.rec[i].start_us >= d->end_us - 1.0);
    }
  }
  GH_CHECK(deps > 0 && late == 0, "%zu of %zu dependencies not reflected in the times", late, deps);
  GH_CHECK(measured * 2 == want - (size_t)WARMUP * (want / (WARMUP + 2 * STEPS)),
           "%zu measured records", measured);
  GH_CHECK(m.nbench == 3 && m.update_bench_us[0] >= 0, "update bench: %zu", m.nbench);
  GH_CHECK(m.ntensors == 3 * shape.nlinears, "ntensors %zu", m.ntensors);
  const size_t nt = m.ntensors;
  const float *in = m.scale_state + FP8_TL_DELAYED_INLINE * nt,
              *ov = m.scale_state + FP8_TL_DELAYED_OVERLAP * nt,
              *no = m.scale_state + FP8_TL_DELAYED_NONE * nt,
              *cu = m.scale_state + FP8_TL_CURRENT * nt;
  const float *ain = m.amax_state + FP8_TL_DELAYED_INLINE * nt,
              *ano = m.amax_state + FP8_TL_DELAYED_NONE * nt,
              *acu = m.amax_state + FP8_TL_CURRENT * nt;
  size_t mism = 0;
  for (size_t t = 0; t < nt; t++) {
    const fp8_format f = fp8_tl_format((fp8_tl_operand)(t % 3));
    fp8_current_params cp = {0.0f, 0, 0, f};
    const float smax = fp8_scaled_max(f, 0);
    const float first = smax / fp8_tl_fill_amplitude((fp8_tl_operand)(t % 3));
    int ok = ain[t] > 0 && ain[t] <= 1.01f * fp8_tl_fill_amplitude((fp8_tl_operand)(t % 3)) && ain[t] == acu[t] && ain[t] == ano[t] && in[t] == smax / ain[t] &&
             ov[t] == in[t] && no[t] == first && cu[t] == fp8_current_scale(&cp, acu[t]);
    if (!ok && mism++ < 5)
      fprintf(stderr, "tensor %zu: amax inline %g current %g none %g; scale inline %g overlap %g "
              "none %g current %g (expected %g)\n", t, (double)ain[t], (double)acu[t],
              (double)ano[t], (double)in[t], (double)ov[t], (double)no[t], (double)cu[t],
              (double)(smax / ain[t]));
  }
  GH_CHECK(mism == 0, "%zu of %zu tensors' state differ (first ones above)", mism, nt);
  fp8_tl_measurement_free(&m);
}

#ifdef FP8LAB_TL_EMU
/* ------------------------------------------------------------------ the schedule */

#define ITERS (WARMUP + 2 * STEPS)
#define MAXOPS 512

typedef struct {
  const fp8_tl_measurement *m;
  hb_graph *g;
  size_t violations;
  char first[512];
  const fp8_tl_record **tab; /* [plan][iter][op] */
} sched;

static const fp8_tl_record **index_records(const fp8_tl_measurement *m) {
  const fp8_tl_record **t = calloc((size_t)FP8_TL_NMODES * ITERS * MAXOPS, sizeof *t);
  for (size_t r = 0; t && r < m->nrec; r++) {
    const fp8_tl_record *x = &m->rec[r];
    if (x->plan >= 0 && x->plan < FP8_TL_NMODES && x->iter >= 0 && x->iter < ITERS && x->op >= 0 &&
        x->op < MAXOPS)
      t[((size_t)x->plan * ITERS + (size_t)x->iter) * MAXOPS + (size_t)x->op] = x;
  }
  return t;
}

/* The record of op i of plan k, iteration it (NULL: none). */
#define rec_of(s, k, it, i) ((s)->tab[((size_t)(k) * ITERS + (size_t)(it)) * MAXOPS + (size_t)(i)])

/* Does a's end happen before b's start? */
static int before(const sched *s, const fp8_tl_record *a, const fp8_tl_record *b) {
  if (!a || !b) return 0;
  ptrdiff_t x = hb_record_of(s->g, a->ev[1]), y = hb_record_of(s->g, b->ev[0]);
  return x >= 0 && y >= 0 && hb_before(s->g, (size_t)x, (size_t)y);
}

static void need(sched *s, int k, const fp8_tl_record *a, const fp8_tl_record *b,
                 const char *what) {
  if (!a || !b || before(s, a, b)) return;
  if (!s->violations++)
    snprintf(s->first, sizeof s->first, "%s: plan %s iteration %d op %d does not happen before "
             "iteration %d op %d", what, fp8_tl_mode_name(plans[k].mode), (int)a->iter,
             (int)a->op, (int)b->iter, (int)b->op);
}

/* The ops of kind `kind` (and operand, or -1 any) of Linear `lin` (-1 any) in phase ph (0 any). */
static int match(const fp8_tl_op *op, fp8_tl_kind kind, int lin, int operand, int ph) {
  return op->kind == kind && (lin < 0 || op->linear == lin) &&
         (operand < 0 || op->operand == operand) && (ph == 0 || op->phase == ph);
}

/* Every data dependency of one step (iteration it) of plan k, and of the next step on it. */
static void check_step(sched *s, int k, int32_t it, int32_t iters) {
  const fp8_tl_plan *p = &plans[k];
  for (size_t j = 0; j < p->nops; j++) {
    const fp8_tl_op *b = &p->ops[j];
    const fp8_tl_record *rb = rec_of(s, k, it, j);
    for (size_t i = 0; i < p->nops; i++) {
      const fp8_tl_op *a = &p->ops[i];
      const fp8_tl_record *ra = rec_of(s, k, it, i);
      int dep = 0;
      if (b->kind == FP8_TL_FPROP)
        dep = match(a, FP8_TL_CAST, b->linear, FP8_TL_INPUT, 0) ||
              match(a, FP8_TL_CAST, b->linear, FP8_TL_WEIGHT, 0);
      else if (b->kind == FP8_TL_DGRAD)
        dep = match(a, FP8_TL_CAST, b->linear, FP8_TL_GRAD_OUTPUT, 0) ||
              match(a, FP8_TL_CAST, b->linear, FP8_TL_WEIGHT, 0);
      else if (b->kind == FP8_TL_WGRAD)
        dep = match(a, FP8_TL_CAST, b->linear, FP8_TL_GRAD_OUTPUT, 0) ||
              match(a, FP8_TL_CAST, b->linear, FP8_TL_INPUT, 0);
      else if (b->kind == FP8_TL_GATHER)
        dep = match(a, FP8_TL_CAST, -1, -1, b->phase);
      else if (b->kind == FP8_TL_ALLREDUCE && b->linear < 0)
        dep = match(a, FP8_TL_GATHER, -1, -1, b->phase);
      else if (b->kind == FP8_TL_ALLREDUCE)
        dep = match(a, FP8_TL_AMAX, b->linear, b->operand, 0);
      else if (b->kind == FP8_TL_UPDATE)
        dep = match(a, FP8_TL_ALLREDUCE, -1, -1, b->phase);
      else if (b->kind == FP8_TL_CAST && p->mode == FP8_TL_CURRENT)
        dep = match(a, FP8_TL_SCALE, b->linear, b->operand, 0);
      else if (b->kind == FP8_TL_SCALE)
        dep = match(a, FP8_TL_AMAX, b->linear, b->operand, 0) ||
              match(a, FP8_TL_ALLREDUCE, b->linear, b->operand, 0);
      if (dep) need(s, k, ra, rb, "data flow");
    }
    /* the next step's casts read the scales this step's update wrote */
    if (b->kind == FP8_TL_UPDATE && it + 1 < iters)
      for (size_t i = 0; i < p->nops; i++)
        if (match(&p->ops[i], FP8_TL_CAST, -1, -1, b->phase))
          need(s, k, rb, rec_of(s, k, it + 1, i), "new scales");
  }
}

/* delayed-overlap: neither update holds up the compute stream's next phase. */
static size_t overlap_violations(sched *s, int k, int32_t iters) {
  const fp8_tl_plan *p = &plans[k];
  size_t n = 0, upd[2] = {0, 0}, first_cast[2] = {0, 0};
  for (size_t i = p->nops; i-- > 0;) {
    if (p->ops[i].kind == FP8_TL_UPDATE) upd[p->ops[i].phase == FP8_BWD] = i;
    if (p->ops[i].kind == FP8_TL_CAST) first_cast[p->ops[i].phase == FP8_BWD] = i;
  }
  for (int32_t it = 0; it + 1 < iters; it++) {
    n += before(s, rec_of(s, k, it, upd[0]), rec_of(s, k, it, first_cast[1]));
    n += before(s, rec_of(s, k, it, upd[1]), rec_of(s, k, it + 1, first_cast[0]));
  }
  return n;
}

static sched check_schedule(const fp8_tl_measurement *m, size_t *overlap_blocked) {
  size_t n = 0;
  const mock_cuda_op *log = mock_cuda_log(&n);
  sched s = {m, hb_build(log, n), 0, "", index_records(m)};
  const int32_t iters = ITERS;
  *overlap_blocked = 0;
  if (!s.g || !s.tab) return s;
  for (int k = 0; k < FP8_TL_NMODES; k++)
    for (int32_t it = 0; it < iters; it++) check_step(&s, k, it, iters);
  *overlap_blocked = overlap_violations(&s, FP8_TL_DELAYED_OVERLAP, iters);
  return s;
}

static void test_schedule(void) {
  fp8_tl_measurement m;
  char err[512] = "";
  size_t blocked = 0, n = 0;
  mock_cuda_log_start();
  int rc = run(0, &m, err, sizeof err);
  mock_cuda_log_stop();
  GH_REQUIRE(rc == FP8_OK, "fp8_timeline_gpu_run: %s", err);
  const mock_cuda_op *log = mock_cuda_log(&n);
  /* no kernel, GEMM or all-reduce on the legacy stream (which would synchronise with every
   * blocking stream); the synchronous uploads of the setup are legacy-stream work by CUDA's
   * definition */
  size_t on_default = 0;
  const char *first = "";
  for (size_t i = 0; i < n; i++)
    if (log[i].kind == MOCK_OP_WORK && log[i].stream == 0 && log[i].what &&
        strncmp(log[i].what, "cudaMemcpy", 10) != 0 && strncmp(log[i].what, "cudaMemset", 10) != 0)
      first = on_default++ ? first : log[i].what;
  GH_CHECK(n > 0 && on_default == 0, "%zu log entries, %zu launches on the legacy stream (%s)", n,
           on_default, first);
  sched s = check_schedule(&m, &blocked);
  GH_CHECK(s.g != NULL, "hb_build failed");
  GH_CHECK(s.violations == 0, "%zu dependencies not guaranteed; first: %s", s.violations,
           s.first);
  GH_CHECK(blocked == 0, "delayed-overlap: an update holds up the compute stream %zu times",
           blocked);
  /* the inline mode does block: its forward update precedes its backward */
  sched inl = s;
  size_t inline_blocked = overlap_violations(&inl, FP8_TL_DELAYED_INLINE, ITERS);
  GH_CHECK(inline_blocked == 2 * (WARMUP + 2 * STEPS - 1),
           "delayed-inline: %zu blocking updates, expected %d", inline_blocked,
           2 * (WARMUP + 2 * STEPS - 1));
  hb_free(s.g);
  free(s.tab);
  fp8_tl_measurement_free(&m);

  /* without its waits, the overlap schedule breaks the data flow: the check can fail */
  mock_cuda_log_start();
  rc = run(1, &m, err, sizeof err);
  mock_cuda_log_stop();
  GH_REQUIRE(rc == FP8_OK, "fp8_timeline_gpu_run (skip_join): %s", err);
  s = check_schedule(&m, &blocked);
  GH_CHECK(s.violations > 0, "a schedule without waits passed the dependency check");
  GH_CHECK(strstr(s.first, "delayed-overlap") != NULL, "first violation: %s", s.first);
  hb_free(s.g);
  free(s.tab);
  fp8_tl_measurement_free(&m);
}
#endif

int main(void) {
#ifndef FP8LAB_TL_EMU
  gh_skip_without_device();
#endif
  char err[256];
  if (fp8_tl_shape_flags(2, 32, 64, 32, &shape, err, sizeof err) != FP8_OK) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  shape.history_len = 4;
  for (int k = 0; k < FP8_TL_NMODES; k++)
    if (fp8_tl_plan_build(&shape, (fp8_tl_mode)k, &plans[k], err, sizeof err) != FP8_OK) {
      fprintf(stderr, "%s\n", err);
      return 1;
    }
  GH_RUN(test_records_and_state);
#ifdef FP8LAB_TL_EMU
  GH_RUN(test_schedule);
#endif
  for (int k = 0; k < FP8_TL_NMODES; k++) fp8_tl_plan_free(&plans[k]);
  fp8_tl_shape_free(&shape);
  return gh_summary();
}
