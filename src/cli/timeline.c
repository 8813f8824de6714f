/* timeline.c: `fp8lab timeline` (the command line's part; timeline.h has the plan and the
 * model, timeline_inputs.h what it reads, src/gpu/timeline_gpu*.c the measurement,
 * timeline_report.h the outputs). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "outfile.h"
#include "timeline.h"
#include "timeline_inputs.h"
#include "timeline_report.h"
#include "util.h"

const char FP8LAB_TIMELINE_USAGE[] =
    "usage: fp8lab timeline (TRACE | --layers N --hidden H --ffn F --tokens T) [--out DIR]\n"
    "                       [--device auto|cpu|gpu] [--modes M,...] [--steps N] [--warmup N]\n"
    "                       [--history L] [--world W] [--sequence-parallel]\n"
    "                       [--device-model h100|h200|FILE] [--bench-tensors N]\n"
    "                       [--bench-history L] [--quiet]\n"
    "\n"
    "What delayed scaling's bookkeeping costs per training step, and whether it overlaps\n"
    "(docs/overlap.md). For a model's Linear layers (TRACE: a trace directory, a run folder of\n"
    "rank_<r>/ traces, or synth:<preset>; or TransformerEngine's layer from the four flags:\n"
    "qkv H->3H, proj H->H, fc1 H->F, fc2 F->H per layer), one training step is: per Linear the\n"
    "fused cast (+ transpose, amax) of input and weight and the FP8 fprop GEMM; the forward\n"
    "bookkeeping (amax gather, all-reduce MAX, one fused history + scale update); per Linear in\n"
    "reverse the cast of grad_output, the dgrad and wgrad GEMMs; the backward bookkeeping.\n"
    "Modes:\n"
    "  delayed-inline   bookkeeping on the compute stream (TransformerEngine >= 1.6)\n"
    "  delayed-overlap  bookkeeping on a side stream, joined by an event before the first cast\n"
    "                   of the next step's same phase (what an asynchronous reduction buys)\n"
    "  delayed-none     no bookkeeping (the floor)\n"
    "  current          an amax pass and a scale kernel before every cast, no history\n"
    "On a GPU (the module fp8lab-gpu.so, as `fp8lab run --device gpu` uses) every op of every\n"
    "step is timed with CUDA events; without one, the model estimates it from device\n"
    "parameters and every output says so. Writes into DIR (default out/timeline):\n"
    "  timeline.csv       mode,step,stream,op,tensor,start_us,end_us,source (measured | model)\n"
    "  timeline.md        per mode: step time and spread, exposed bookkeeping and its share, the\n"
    "                     update kernel, the all-reduce; model beside measurement; world sizes\n"
    "  timeline.png       one step per mode (streams as lanes, ops coloured by kind)\n"
    "  timeline_zoom.png  the end of the forward pass, where the bookkeeping runs\n"
    "(other files in DIR are left alone), and prints the summary.\n"
    "\n"
    "  --out DIR            output directory (default out/timeline)\n"
    "  --device D           auto (default: the GPU when one is usable, else the model alone),\n"
    "                       cpu (the model alone), gpu (fail without a GPU)\n"
    "  --modes M,...        modes to run (default all four)\n"
    "  --steps N            measured steps per mode (default 5, at most 100; each after a\n"
    "                       lead-in step of the same mode, modes interleaved), --warmup N\n"
    "                       (default 2, at most 100)\n"
    "  --history L          amax history length (default 1024, TE's)\n"
    "  --world W            ranks of the amax reduction, for the model (default: the trace's\n"
    "                       ranks, else 1; one GPU runs a world of one)\n"
    "  --sequence-parallel  current scaling all-reduces each input's and grad_output's amax\n"
    "  --device-model S     the model's device: h100, h200 (default; h100 when the GPU is one),\n"
    "                       or an INI file: [device] with name, base (h100|h200), hbm_gbps,\n"
    "                       fp8_tflops, kernel_us, allreduce_us, allreduce_hop_us, allreduce_gbps\n"
    "  --bench-tensors N, --bench-history L  the update kernel alone for N tensors at history\n"
    "                       L (default 1000 x 1024; 0 tensors: skipped)\n"
    "  --quiet              no summary\n";

typedef struct {
  const char *trace, *out, *device, *modes, *model;
  long long layers, hidden, ffn, tokens, steps, warmup, history, world, btensors, bhistory;
  int sp, quiet;
} tl_opts;

static int parse_args(int argc, char **argv, tl_opts *o, char *err, size_t errlen) {
  static const struct {
    const char *flag;
    size_t off;
    long long lo, hi;
  } nums[] = {{"--layers", offsetof(tl_opts, layers), 1, 4096},
              {"--hidden", offsetof(tl_opts, hidden), 1, 1LL << 20},
              {"--ffn", offsetof(tl_opts, ffn), 1, 1LL << 22},
              {"--tokens", offsetof(tl_opts, tokens), 1, 1LL << 30},
              {"--steps", offsetof(tl_opts, steps), 1, 100},
              {"--warmup", offsetof(tl_opts, warmup), 0, 100},
              {"--history", offsetof(tl_opts, history), 1, 1LL << 20},
              {"--world", offsetof(tl_opts, world), 1, 1LL << 24},
              {"--bench-tensors", offsetof(tl_opts, btensors), 0, 1LL << 20},
              {"--bench-history", offsetof(tl_opts, bhistory), 1, 1LL << 20}};
  char shown[FP8_ESC_LEN];
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    size_t k = 0;
    while (k < sizeof nums / sizeof *nums && strcmp(a, nums[k].flag) != 0) k++;
    int has = i + 1 < argc;
    if (k < sizeof nums / sizeof *nums) {
      if (!has || fp8_cli_parse_ll(argv[++i], nums[k].lo, nums[k].hi,
                           (long long *)((char *)o + nums[k].off)))
        return fp8_errorf(FP8_EINVAL, err, errlen, "%s wants an integer from %lld to %lld%s%s",
                          a, nums[k].lo, nums[k].hi, has ? ", got " : "",
                          has ? fp8_esc(argv[i], shown, sizeof shown) : "");
    } else if (strcmp(a, "--out") == 0 && has) o->out = argv[++i];
    else if (strcmp(a, "--device") == 0 && has) o->device = argv[++i];
    else if (strcmp(a, "--modes") == 0 && has) o->modes = argv[++i];
    else if (strcmp(a, "--device-model") == 0 && has) o->model = argv[++i];
    else if (strcmp(a, "--sequence-parallel") == 0) o->sp = 1;
    else if (strcmp(a, "--quiet") == 0) o->quiet = 1;
    else if (a[0] == '-' && a[1] == '-')
      return fp8_errorf(FP8_EINVAL, err, errlen, "unknown option %s%s (see fp8lab timeline --help)",
                        fp8_esc(a, shown, sizeof shown), has ? "" : " or its value missing");
    else if (o->trace)
      return fp8_errorf(FP8_EINVAL, err, errlen, "one TRACE only (got %s after %s)",
                        fp8_esc(a, shown, sizeof shown), o->trace);
    else o->trace = a;
  }
  if (strcmp(o->device, "auto") && strcmp(o->device, "cpu") && strcmp(o->device, "gpu"))
    return fp8_errorf(FP8_EINVAL, err, errlen, "--device wants auto, cpu or gpu, got %s",
                      fp8_esc(o->device, shown, sizeof shown));
  if (o->btensors * o->bhistory > (1LL << 28))
    return fp8_errorf(FP8_EINVAL, err, errlen, "--bench-tensors x --bench-history is at most 2^28 "
                      "(a 1 GiB history), got %lld x %lld", o->btensors, o->bhistory);
  const int flags = (o->layers > 0) + (o->hidden > 0) + (o->ffn > 0) + (o->tokens > 0);
  if (o->trace ? flags != 0 : flags != 4)
    return fp8_errorf(FP8_EINVAL, err, errlen,
                      "give a TRACE or all four of --layers, --hidden, --ffn and --tokens "
                      "(not both)");
  return FP8_OK;
}

/* The plans of the modes asked for (default: all four, in enum order). */
static int make_plans(const tl_opts *o, const fp8_tl_shape *s, fp8_tl_plan *plans, size_t *n,
                      char *err, size_t errlen) {
  fp8_tl_mode modes[FP8_TL_NMODES];
  size_t nm = 0;
  char shown[FP8_ESC_LEN];
  if (!o->modes) {
    for (int m = 0; m < FP8_TL_NMODES; m++) modes[nm++] = (fp8_tl_mode)m;
  } else {
    char *list = strdup(o->modes), *save = NULL;
    if (!list) return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
    for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
      fp8_tl_mode m;
      int dup = 0;
      if (fp8_tl_mode_parse(t, &m) != FP8_OK) {
        fp8_errorf(FP8_EINVAL, err, errlen, "--modes: unknown mode %s (delayed-inline, "
                   "delayed-overlap, delayed-none, current)", fp8_esc(t, shown, sizeof shown));
        free(list);
        return FP8_EINVAL;
      }
      for (size_t j = 0; j < nm; j++) dup |= modes[j] == m;
      if (!dup) modes[nm++] = m;
    }
    free(list);
    if (nm == 0) return fp8_errorf(FP8_EINVAL, err, errlen, "--modes: no mode given");
  }
  for (*n = 0; *n < nm; (*n)++) {
    int rc = fp8_tl_plan_build(s, modes[*n], &plans[*n], err, errlen);
    if (rc) return rc;
  }
  return FP8_OK;
}

/* The measurement, when a GPU is asked for and usable: FP8_OK with *m filled and *measured = 1;
 * FP8_OK with *measured = 0 and the reason in why (auto without a GPU: the model alone, with
 * a warning in warn when a device is there but fails); FP8_EDEVICE for --device gpu. */
static int measure(const tl_opts *o, const fp8_tl_shape *s, const fp8_tl_plan *plans, size_t n,
                   fp8_tl_measurement *m, int *measured, char *why, size_t whylen, char *warn,
                   size_t warnlen, char *err, size_t errlen) {
  fp8_tl_gpu_fn fn = NULL;
  int quiet = 1;
  *measured = 0;
  if (strcmp(o->device, "cpu") == 0) {
    snprintf(why, whylen, "--device cpu");
    return FP8_OK;
  }
  int rc = fp8_tl_gpu_load(&fn, &quiet, why, whylen);
  if (rc == FP8_OK) {
    fp8_tl_gpu_args a = {.shape = s, .plans = plans, .nplans = n, .warmup = (int32_t)o->warmup,
                         .steps = (int32_t)o->steps, .bench_tensors = (int32_t)o->btensors,
                         .bench_history = (int32_t)o->bhistory, .bench_reps = 21};
    quiet = 0;
    rc = fn(&a, m, why, whylen);
  }
  if (rc == FP8_OK) {
    *measured = 1;
    return FP8_OK;
  }
  if (strcmp(o->device, "gpu") == 0)
    return fp8_errorf(rc == FP8_ENOMEM ? rc : FP8_EDEVICE, err, errlen, "--device gpu: %s", why);
  if (!quiet)
    snprintf(warn, warnlen, "warning: %s; the timeline is the model's estimate alone", why);
  return FP8_OK;
}

static void today(char *out, size_t n) {
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(out, n, "%Y-%m-%d", &tm);
}

int fp8lab_timeline(int argc, char **argv, char *warn, size_t warnlen, char *err,
                    size_t errlen) {
  tl_opts o = {.out = "out/timeline", .device = "auto", .steps = 5, .warmup = 2,
               .history = 1024, .btensors = 1000, .bhistory = 1024};
  fp8_tl_shape s;
  fp8_tl_plan plans[FP8_TL_NMODES];
  fp8_tl_span *spans[FP8_TL_NMODES] = {NULL};
  fp8_tl_totals tot[FP8_TL_NMODES];
  fp8_tl_stats stats[FP8_TL_NMODES];
  fp8_tl_measurement meas;
  fp8_tl_device dev;
  char why[512] = "", date[32];
  size_t np = 0;
  int measured = 0;
  memset(&s, 0, sizeof s);
  memset(plans, 0, sizeof plans);
  memset(&meas, 0, sizeof meas);
  warn[0] = 0;
  int rc = parse_args(argc, argv, &o, err, errlen);
  if (rc) return rc;
  rc = o.trace ? fp8_tl_shape_trace(o.trace, &s, err, errlen)
               : fp8_tl_shape_flags(o.layers, o.hidden, o.ffn, o.tokens, &s, err, errlen);
  if (rc) return rc;
  s.history_len = (int32_t)o.history;
  s.sequence_parallel = o.sp;
  if (o.world > 0) s.world = o.world;
  if ((rc = make_plans(&o, &s, plans, &np, err, errlen))) goto done;
  if (o.model && (rc = fp8_tl_device_load(o.model, &dev, err, errlen))) goto done;
  if ((rc = measure(&o, &s, plans, np, &meas, &measured, why, sizeof why, warn, warnlen, err,
                    errlen)))
    goto done;
  if (!o.model) fp8_tl_device_builtin(measured && strstr(meas.device, "H100") ? "h100" : "h200", &dev);
  for (size_t k = 0; k < np && !rc; k++) {
    if (!(spans[k] = malloc(plans[k].nops * sizeof *spans[k])))
      rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
    else
      rc = fp8_tl_model_run(&plans[k], &s, &dev, spans[k], &tot[k], err, errlen);
  }
  if (rc || (rc = fp8_mkdir_p(o.out, err, errlen))) goto done;
  today(date, sizeof date);
  fp8_tl_report r = {.shape = &s, .dev = &dev, .nplans = np, .plans = plans, .model = spans,
                     .model_tot = tot, .meas = measured ? &meas : NULL, .not_measured = why,
                     .steps = (int32_t)o.steps, .bench_tensors = (int32_t)o.btensors,
                     .bench_history = (int32_t)o.bhistory, .date = date};
  for (size_t k = 0; k < np && measured && !rc; k++)
    if (fp8_tl_stats_of(&r, k, &stats[k]))
      rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  if (rc) goto done;
  r.stats = measured ? stats : NULL;
  if ((rc = fp8_tl_write_csv(o.out, &r, err, errlen))) goto done;
  if ((rc = fp8_tl_write_md(o.out, &r, err, errlen))) goto done;
  if ((rc = fp8_tl_write_png(o.out, &r, err, errlen))) goto done;
  if (!o.quiet) {
    fp8_tl_print(stdout, &r);
    printf("written: %s/timeline.md, timeline.csv, timeline.png, timeline_zoom.png\n", o.out);
  }
done:
  for (size_t k = 0; k < np; k++) fp8_tl_plan_free(&plans[k]), free(spans[k]);
  fp8_tl_measurement_free(&meas);
  fp8_tl_shape_free(&s);
  return rc;
}
