/* fp8lab.c: the command line.
 *
 *   fp8lab run EXP.ini [--out DIR] [--force | --resume] [--threads N] [--quiet]
 *   fp8lab synth PRESET DIR [--steps N] [--seed S] [--force]
 *   fp8lab inspect TRACE
 *   fp8lab import-te LOGDIR TRACEDIR [--force] [--drop-cut-line]
 *   fp8lab report OUTDIR [--budget F]
 *   fp8lab closedloop STUDY [--out DIR]
 *   fp8lab timeline (TRACE | --layers N --hidden H --ffn F --tokens T) [options]
 *   fp8lab --help | --version | CMD --help
 *
 * Exit status: 0 ok, 1 runtime failure (out of memory, a write failing mid-run), 2 bad usage or
 * bad input (experiment file, trace, output directory). Errors are one line on stderr.
 */
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine_load.h"
#include "experiment.h"
#include "cli.h"
#include "closedloop_report.h"
#include "gemm.h"
#include "report.h"
#include "fp8.h"
#include "runner.h"
#include "run_mpi.h"
#include "run_folder.h"
#include "synth.h"
#include "te_log.h"
#include "util.h"

#define EXIT_RUNTIME 1
#define EXIT_USAGE 2

/* Every line fp8lab writes to stderr goes through here: the message is formatted, then
 * passed through fp8_escape_line, so that no byte that reached it (a path given on the
 * command line, say) can break the line or move the terminal's cursor; the escapes a message
 * already holds pass unchanged. */
static void errf(const char *fmt, ...) FP8_PRINTF(1, 2);
static void errf(const char *fmt, ...) {
  char msg[4 * FP8_ERRLEN];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  size_t n = strlen(msg);
  int nl = n && msg[n - 1] == '\n';
  if (nl) msg[--n] = '\0';
  char *line = malloc(4 * n + 1);
  fputs(line ? fp8_escape_line(msg, line, 4 * n + 1) : msg, stderr);
  if (nl) fputc('\n', stderr);
  free(line);
}

/* A command-line argument as a message quotes it (fp8_esc); four at a time. */
static const char *arg(const char *s) {
  static char buf[4][FP8_ESC_LEN];
  static int k;
  k = (k + 1) % 4;
  return fp8_esc(s, buf[k], sizeof buf[k]);
}

static int want_help(int argc, char **argv) {
  for (int i = 0; i < argc; i++)
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return 1;
  return 0;
}

/* Runtime failures (memory, the device, an output write failing: a full disk) exit 1; every
 * other status comes from the input (experiment, trace, output directory) and exits 2. */
static int exit_of(int status) {
  return (status == FP8_ENOMEM || status == FP8_EDEVICE || status == FP8_EWRITE) ? EXIT_RUNTIME
                                                                                 : EXIT_USAGE;
}

/* ------------------------------------------------------------------ report */

/* The report of the folder dir, which the caller holds (run_folder.h). */
static int write_report(const char *dir, double budget, int procs, int quiet) {
  char err[FP8_ERRLEN * 2] = "";
  fp8_report_options ro = {.overflow_budget = budget, .step_budget = -1.0, .procs = procs};
  fp8_report_summary rs;
  int rc = fp8_report_generate(dir, &ro, &rs, err, sizeof err);
  if (rc) {
    errf("fp8lab: report: %s\n", err);
    return exit_of(rc);
  }
  if (!quiet)
    printf("report:   %s\nnotebook: %s\nplots:    %s/ (%zu PNG)\n", rs.report_md, rs.notebook, rs.plots_dir,
           rs.nplots);
  return 0;
}

static int cmd_report(int argc, char **argv) {
  if (want_help(argc, argv)) {
    fputs(FP8LAB_USAGE_REPORT, stdout);
    return 0;
  }
  const char *dir = NULL;
  double budget = -1.0;
  int quiet = 0;
  long long jobs = 0;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--jobs") == 0 && i + 1 < argc) {
      if (fp8_cli_parse_ll(argv[++i], 1, 8, &jobs) != 0) {
        errf("fp8lab report: --jobs wants an integer from 1 to 8, got '%s'\n", arg(argv[i]));
        return EXIT_USAGE;
      }
    } else if (strcmp(argv[i], "--budget") == 0 && i + 1 < argc) {
      char *end;
      errno = 0;
      budget = strtod(argv[++i], &end);
      /* a fraction below the smallest normal double (1e-320) is in 0..1: strtod's ERANGE of
       * underflow is no error here, as for the experiment's budgets */
      if ((errno && !(errno == ERANGE && fabs(budget) <= DBL_MIN)) || end == argv[i] || *end ||
          !(budget >= 0 && budget <= 1)) {
        errf("fp8lab report: --budget wants a fraction in 0..1, got '%s'\n", arg(argv[i]));
        return EXIT_USAGE;
      }
    } else if (strcmp(argv[i], "--quiet") == 0 || strcmp(argv[i], "-q") == 0) {
      quiet = 1;
    } else if (argv[i][0] == '-' && argv[i][1]) {
      errf("fp8lab report: unknown or incomplete option '%s' (see fp8lab report --help)\n", arg(argv[i]));
      return EXIT_USAGE;
    } else if (!dir) {
      dir = argv[i];
    } else {
      errf("fp8lab report: one output directory expected, got also '%s'\n", arg(argv[i]));
      return EXIT_USAGE;
    }
  }
  if (!dir) {
    fputs(FP8LAB_USAGE_REPORT, stderr);
    return EXIT_USAGE;
  }
  /* the folder held for the report: refused when an interrupted run left it (run_folder.h) */
  char err[FP8_ERRLEN * 2] = "";
  fp8_run_folder folder;
  int rc = fp8_run_folder_open_report(dir, &folder, err, sizeof err);
  if (rc) {
    errf("fp8lab: report: %s\n", err);
    return exit_of(rc);
  }
  int ret = write_report(dir, budget, (int)jobs, quiet);
  fp8_run_folder_close(&folder, ret == 0);
  return ret;
}

/* ------------------------------------------------------------------ run */

/* The experiment's sections and [analysis] keys a run without snapshot rows could not serve
 * (run.json's unserved): one warning line each, at its line of the file, whatever --quiet. */
static void print_unserved(const fp8_run_summary *sum, const char *exp) {
  char sec[FP8_ESC_LEN], lab[FP8_ESC_LEN];
  for (size_t i = 0; i < sum->nunserved; i++) {
    const fp8_unserved *u = &sum->unserved[i];
    char what[512];
    if (*u->key)
      snprintf(what, sizeof what, "[%s] %s", u->section, u->key);
    else if (strcmp(u->section + 7, u->label) != 0) /* "recipe.<name>", another label */
      snprintf(what, sizeof what, "[%s] (label %s, kind %s, %lld configuration%s)",
               fp8_esc(u->section, sec, sizeof sec), fp8_esc(u->label, lab, sizeof lab), u->kind,
               u->configurations, u->configurations == 1 ? "" : "s");
    else
      snprintf(what, sizeof what, "[%s] (kind %s, %lld configuration%s)",
               fp8_esc(u->section, sec, sizeof sec), u->kind, u->configurations,
               u->configurations == 1 ? "" : "s");
    errf("fp8lab: warning: %s:%d: %s has nothing to act on: the trace has no snapshots, only "
         "amaxes; %s\n", arg(exp), u->line, what, u->why);
  }
}

/* The run's final message (and its warnings). */
static void print_run_summary(const fp8_run_summary *sum, const char *dir, int quiet) {
  if (sum->resumed_at >= 0 && !quiet)
    errf("fp8lab: resumed %s after step %lld of %lld\n", sum->out_dir, sum->resumed_at,
         sum->steps);
  if (sum->mismatches)
    errf("fp8lab: warning: %lld snapshot %s from amax.csv (the snapshot data was used)\n",
         sum->mismatches, sum->mismatches == 1 ? "amax differs" : "amaxes differ");
  if (!quiet) {
    printf("fp8lab: %lld steps, %lld tensors%s%s%s, %lld configurations: %lld rows in %.2f s\n"
           "results in %s:\n"
           "  steps.csv       per snapshot step, tensor and configuration\n"
           "  summary.csv     per tensor and configuration\n"
           "  histograms.csv  log2 magnitudes per tensor and snapshot step\n",
           sum->steps, sum->tensors, *sum->left_note ? " (" : "", sum->left_note,
           *sum->left_note ? ")" : "", sum->configs, sum->rows, sum->wall_s, dir);
    if (sum->stream_rows > 0)
      printf("  stream.csv      every step's amax, scale and overshoot per delayed configuration\n");
    if (sum->gemm_rows > 0) printf("  gemm.csv        GEMM errors per layer, step and configuration\n");
    printf("  run.json        what ran, and every file written\n");
    if (*sum->split_note) printf("fp8lab: %s\n", sum->split_note);
  }
}

static int cmd_run(int argc, char **argv) {
  if (want_help(argc, argv)) {
    fputs(FP8LAB_USAGE_RUN, stdout);
    return 0;
  }
  const char *exp = NULL;
  const char *device = "auto";
  int no_report = 0;
  fp8_run_options opt = {.threads = 0, .checkpoint_s = 30};
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--out") == 0 && i + 1 < argc) {
      opt.out_dir = argv[++i];
    } else if (strcmp(a, "--force") == 0) {
      opt.force = 1;
    } else if (strcmp(a, "--quiet") == 0 || strcmp(a, "-q") == 0) {
      opt.quiet = 1;
    } else if (strcmp(a, "--no-report") == 0) {
      no_report = 1;
    } else if (strcmp(a, "--resume") == 0) {
      opt.resume = 1;
    } else if (strcmp(a, "--checkpoint-interval") == 0 && i + 1 < argc) {
      char *end;
      errno = 0;
      opt.checkpoint_s = strtod(argv[++i], &end);
      if (errno || end == argv[i] || *end || !(opt.checkpoint_s >= 0 && opt.checkpoint_s <= 1e6)) {
        errf("fp8lab run: --checkpoint-interval wants seconds from 0 to 1e6, got '%s'\n",
             arg(argv[i]));
        return EXIT_USAGE;
      }
    } else if (strcmp(a, "--device") == 0 && i + 1 < argc) {
      device = argv[++i];
      if (strcmp(device, "auto") && strcmp(device, "cpu") && strcmp(device, "gpu")) {
        errf("fp8lab run: --device wants auto, cpu or gpu, got '%s'\n", arg(device));
        return EXIT_USAGE;
      }
    } else if (strcmp(a, "--threads") == 0 && i + 1 < argc) {
      long long v;
      if (fp8_cli_parse_ll(argv[++i], 1, 64, &v)) {
        errf("fp8lab run: --threads wants an integer from 1 to 64, got '%s'\n", arg(argv[i]));
        return EXIT_USAGE;
      }
      opt.threads = (int)v;
    } else if (a[0] == '-' && a[1]) {
      errf("fp8lab run: unknown or incomplete option '%s' (see fp8lab run --help)\n", arg(a));
      return EXIT_USAGE;
    } else if (!exp) {
      exp = a;
    } else {
      errf("fp8lab run: one experiment file expected, got also '%s'\n", arg(a));
      return EXIT_USAGE;
    }
  }
  if (!exp) {
    fputs(FP8LAB_USAGE_RUN, stderr);
    return EXIT_USAGE;
  }
  if (opt.resume && opt.force) {
    errf("fp8lab run: --resume continues an interrupted run, --force starts over: "
         "give one of them\n");
    return EXIT_USAGE;
  }
  opt.report_follows = !no_report;
  if (opt.threads == 0) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    opt.threads = n > 0 ? (n > 64 ? 64 : (int)n) : 1;
  }
  opt.progress = isatty(STDERR_FILENO) && fp8_mpi_rank() == 0;

  char err[FP8_ERRLEN * 2] = "";
  fp8_experiment ex;
  int rc = fp8_experiment_load(exp, &ex, err, sizeof err);
  if (rc) {
    errf("fp8lab: %s\n", err);
    return EXIT_USAGE;
  }
  if (ex.trace_is_synth) {
    int known = 0;
    for (const char *const *p = fp8_synth_presets(); *p; p++) known |= strcmp(*p, ex.synth_preset) == 0;
    if (!known) {
      errf("fp8lab: %s: [trace] path: unknown synth preset '%s' (llm, spiky, underflow, moe)\n",
              arg(exp), arg(ex.synth_preset));
      fp8_experiment_free(&ex);
      return EXIT_USAGE;
    }
  }
  /* the engine: the GPU module when asked for (or auto and usable) and its self-check passes,
   * else the CPU engine (engine_load.h) */
  fp8_engine_selection sel;
  char warn[FP8_ERRLEN * 2] = "";
  rc = fp8_engine_select(device, opt.threads, &sel, warn, sizeof warn, err, sizeof err);
  if (rc) {
    errf("fp8lab: %s\n", err);
    fp8_engine_selection_close(&sel);
    fp8_experiment_free(&ex);
    return EXIT_RUNTIME;
  }
  if (*warn) errf("fp8lab: %s\n", warn);
  opt.engine = sel.factory;
  opt.choice = &sel.choice;
  opt.exchange = sel.exchange;
  if (sel.factory && !opt.quiet)
    errf("fp8lab: GPU engine (%s), self-check passed: %lld values in %.2f s\n",
            sel.module, sel.check.values, sel.check.seconds);
  /* a tensor-core model with no GEMM error to apply it to: said, as a key with nothing to act on */
  if (ex.tensor_core != 0 && !ex.gemm && fp8_mpi_rank() == 0)
    errf("fp8lab: warning: %s:%d: [analysis] tensor_core has nothing to act on: gemm = false "
         "(no GEMM errors)\n", arg(exp), ex.analysis_line[FP8_EXP_AKEY_TENSOR_CORE]);
  fp8_run_summary sum;
  rc = fp8_run_experiment(&ex, &opt, &sum, err, sizeof err);
  fp8_engine_selection_close(&sel);
  fp8_experiment_free(&ex);
  if (rc) {
    errf("fp8lab: %s\n", err);
    return exit_of(rc);
  }
  if (fp8_mpi_rank() != 0) { /* process 0 writes the summary and the report */
    free(sum.unserved);
    return 0;
  }
  char real[PATH_MAX];
  const char *dir = realpath(sum.out_dir, real) ? real : sum.out_dir;
  print_unserved(&sum, exp);
  free(sum.unserved);
  print_run_summary(&sum, dir, opt.quiet);
  if (no_report) return 0;
  int ret = write_report(dir, -1.0, opt.threads, opt.quiet);
  /* complete: the marker goes; else the folder stays marked (a resume reports again) */
  fp8_run_folder_close(&sum.folder, ret == 0);
  return ret;
}

/* ------------------------------------------------------------------ synth */

static int cmd_synth(int argc, char **argv) {
  if (want_help(argc, argv)) {
    fputs(FP8LAB_USAGE_SYNTH, stdout);
    return 0;
  }
  const char *pos[2] = {NULL, NULL};
  int npos = 0;
  long long steps = 200, seed = 1;
  int force = 0;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--force") == 0) {
      force = 1;
    } else if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc) {
      if (fp8_cli_parse_ll(argv[++i], 1, 1000000, &steps)) {
        errf("fp8lab synth: --steps wants an integer from 1 to 1000000, got '%s'\n", arg(argv[i]));
        return EXIT_USAGE;
      }
    } else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
      if (fp8_cli_parse_ll(argv[++i], 0, LLONG_MAX, &seed)) {
        errf("fp8lab synth: --seed wants a non-negative integer, got '%s'\n", arg(argv[i]));
        return EXIT_USAGE;
      }
    } else if (argv[i][0] == '-' && argv[i][1]) {
      errf("fp8lab synth: unknown or incomplete option '%s' (see fp8lab synth --help)\n", arg(argv[i]));
      return EXIT_USAGE;
    } else if (npos < 2) {
      pos[npos++] = argv[i];
    } else {
      errf("fp8lab synth: too many arguments ('%s')\n", arg(argv[i]));
      return EXIT_USAGE;
    }
  }
  if (npos != 2) {
    fputs(FP8LAB_USAGE_SYNTH, stderr);
    return EXIT_USAGE;
  }
  char err[FP8_ERRLEN] = "";
  int rc = FP8_OK;
  /* the preset first: an unknown one must not cost the old trace */
  int known = 0;
  for (const char *const *p = fp8_synth_presets(); *p; p++) known |= strcmp(*p, pos[0]) == 0;
  if (known && force) rc = fp8_synth_remove_trace(pos[1], err, sizeof err);
  if (!rc) rc = fp8_synth_write(pos[0], pos[1], steps, (uint64_t)seed, err, sizeof err);
  if (rc) {
    errf("fp8lab: %s\n", err);
    return exit_of(rc);
  }
  printf("fp8lab: wrote synthetic trace '%s' (%lld steps, seed %lld) to %s\n", pos[0], steps, seed, pos[1]);
  return 0;
}

/* ------------------------------------------------------------------ inspect */

static int cmd_inspect(int argc, char **argv) {
  if (want_help(argc, argv) || argc != 1) {
    fputs(FP8LAB_USAGE_INSPECT, argc == 1 ? stdout : stderr);
    return argc == 1 ? 0 : EXIT_USAGE;
  }
  char err[FP8_ERRLEN] = "";
  int rc = fp8lab_inspect(argv[0], err, sizeof err);
  if (rc) {
    errf("fp8lab: %s\n", err);
    return exit_of(rc);
  }
  return 0;
}

/* ------------------------------------------------------------------ import-te */

static int cmd_import_te(int argc, char **argv) {
  if (want_help(argc, argv)) {
    fputs(FP8LAB_USAGE_IMPORT_TE, stdout);
    return 0;
  }
  const char *pos[2] = {NULL, NULL};
  int npos = 0, force = 0;
  unsigned flags = 0;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--force") == 0) {
      force = 1;
    } else if (strcmp(argv[i], "--drop-cut-line") == 0) {
      flags |= FP8_TE_DROP_CUT_LINE;
    } else if (argv[i][0] == '-' && argv[i][1]) {
      errf("fp8lab import-te: unknown option '%s' (see fp8lab import-te --help)\n", arg(argv[i]));
      return EXIT_USAGE;
    } else if (npos < 2) {
      pos[npos++] = argv[i];
    } else {
      errf("fp8lab import-te: too many arguments ('%s')\n", arg(argv[i]));
      return EXIT_USAGE;
    }
  }
  if (npos != 2) {
    fputs(FP8LAB_USAGE_IMPORT_TE, stderr);
    return EXIT_USAGE;
  }
  char err[FP8_ERRLEN] = "";
  fp8_te_import_summary sum;
  int rc = fp8_te_import(pos[0], pos[1], force, flags, &sum, err, sizeof err);
  if (rc) {
    errf("fp8lab import-te: %s\n", err);
    return exit_of(rc);
  }
  printf("fp8lab: wrote %zu amax rows of %zu tensors from %zu rank log%s (iterations %lld-%lld",
         sum.amax_rows, sum.tensors, sum.ranks, sum.ranks == 1 ? "" : "s", (long long)sum.first,
         (long long)sum.last);
  if (sum.interval_min != sum.interval_max && sum.interval_min > 0) /* TE's freq per tensor */
    printf(", each tensor logged at its own interval, %lld to %lld iterations",
           (long long)sum.interval_min, (long long)sum.interval_max);
  else if (sum.interval_min != sum.interval_max) /* some tensor logged at one iteration */
    printf(", each tensor logged at its own interval: te_log.json lists them");
  else if (sum.interval > 1)
    printf(", logged every %lld", (long long)sum.interval);
  printf(") to %s\n", pos[1]);
  for (size_t k = 0; k < sum.nwarnings; k++) errf("fp8lab import-te: %s\n", sum.warnings[k]);
  fp8_te_import_summary_free(&sum);
  if (sum.zero_values)
    errf("fp8lab import-te: %zu cur_amax values read 0.0000 (below 5e-5 in TE's four decimals, "
         "or a zero tensor): left out, as steps those tensors did not run (te_log.json counts "
         "them per tensor)\n", sum.zero_values);
  if (sum.coarse_values)
    errf("fp8lab import-te: %zu cur_amax values have fewer than 3 significant digits in TE's "
         "four decimals (te_log.json counts them per tensor)\n", sum.coarse_values);
  return 0;
}

/* ------------------------------------------------------------------ closedloop */

/* Exit 0, or 1 when a closed run's replay does not reproduce its te_scale (the self-check:
 * everything is written first, report.md says so at its top), 2 for a bad study folder. */
static int cmd_closedloop(int argc, char **argv) {
  if (want_help(argc, argv)) {
    fputs(FP8LAB_USAGE_CLOSEDLOOP, stdout);
    return 0;
  }
  const char *study = NULL, *out = NULL;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
      out = argv[++i];
    } else if (argv[i][0] == '-' && argv[i][1]) {
      errf("fp8lab closedloop: unknown or incomplete option '%s' (see fp8lab closedloop "
           "--help)\n", arg(argv[i]));
      return EXIT_USAGE;
    } else if (!study) {
      study = argv[i];
    } else {
      errf("fp8lab closedloop: one study folder expected, got also '%s'\n", arg(argv[i]));
      return EXIT_USAGE;
    }
  }
  if (!study) {
    fputs(FP8LAB_USAGE_CLOSEDLOOP, stderr);
    return EXIT_USAGE;
  }
  char err[FP8_ERRLEN * 2] = "";
  fp8_closedloop_summary sum;
  int rc = fp8_closedloop_report(study, out, &sum, err, sizeof err);
  if (rc) {
    errf("fp8lab closedloop: %s\n", err);
    return exit_of(rc);
  }
  printf("report: %s (%zu plot%s)\n", sum.report_md, sum.nplots, sum.nplots == 1 ? "" : "s");
  if (sum.runs_differing) {
    errf("fp8lab closedloop: self-check failed: %lld of %lld closed runs' replays do not "
         "reproduce te_scale; %s\n",
         (long long)sum.runs_differing, (long long)sum.runs, sum.first_differing);
    return EXIT_RUNTIME;
  }
  return 0;
}

/* ------------------------------------------------------------------ timeline */

static int cmd_timeline(int argc, char **argv) {
  if (want_help(argc, argv)) {
    fputs(FP8LAB_TIMELINE_USAGE, stdout);
    return 0;
  }
  char err[FP8_ERRLEN * 2] = "", warn[FP8_ERRLEN * 2] = "";
  int rc = fp8lab_timeline(argc, argv, warn, sizeof warn, err, sizeof err);
  if (warn[0]) errf("fp8lab timeline: %s\n", warn);
  if (rc) {
    errf("fp8lab timeline: %s\n", err);
    return exit_of(rc);
  }
  return 0;
}

int main(int argc, char **argv) {
  fp8_gemm_blas_single_thread();
  if (argc < 2) {
    fputs(FP8LAB_USAGE, stderr);
    return EXIT_USAGE;
  }
  const char *cmd = argv[1];
  /* FP8LAB_ISA=generic|avx2|avx512: the simulator's loop variant (benchmarks; the results are
   * identical whichever runs) */
  const char *isa = getenv("FP8LAB_ISA");
  if (isa && *isa) {
    fp8_isa want = FP8_ISA_AUTO;
    for (int k = FP8_ISA_GENERIC; k <= FP8_ISA_AVX512; k++)
      if (strcmp(isa, fp8_isa_name((fp8_isa)k)) == 0) want = (fp8_isa)k;
    if (want == FP8_ISA_AUTO || fp8_isa_set(want) != FP8_OK) {
      errf("fp8lab: FP8LAB_ISA=%s: not one of generic, avx2, avx512 that this CPU runs\n", arg(isa));
      return EXIT_USAGE;
    }
  }
  if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
    fputs(FP8LAB_USAGE, stdout);
    return 0;
  }
  if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
    printf("fp8lab %s\n", FP8LAB_VERSION);
    char mod[PATH_MAX]; /* where a GPU run would load the engine from (issue 43: installed) */
    int found = fp8_gpu_module_find(mod, sizeof mod);
    if (found == 1) printf("GPU module: %s\n", mod);
    else if (found == 0) printf("GPU module: none (built without CUDA: no %s)\n", mod);
    return 0;
  }
  if (strcmp(cmd, "run") == 0) { /* under mpirun / srun: one process of an MPI replay */
    fp8_mpi_init(&argc, &argv);
    /* the processes other than 0 are silent: process 0 says what every one agreed on */
    if (fp8_mpi_rank() != 0 && !freopen("/dev/null", "w", stderr)) return EXIT_RUNTIME;
    int ret = cmd_run(argc - 2, argv + 2);
    fp8_mpi_finalize();
    return ret;
  }
  if (strcmp(cmd, "synth") == 0) return cmd_synth(argc - 2, argv + 2);
  if (strcmp(cmd, "inspect") == 0) return cmd_inspect(argc - 2, argv + 2);
  if (strcmp(cmd, "report") == 0) return cmd_report(argc - 2, argv + 2);
  if (strcmp(cmd, "timeline") == 0) return cmd_timeline(argc - 2, argv + 2);
  if (strcmp(cmd, "import-te") == 0) return cmd_import_te(argc - 2, argv + 2);
  if (strcmp(cmd, "closedloop") == 0) return cmd_closedloop(argc - 2, argv + 2);
  errf("fp8lab: unknown command '%s' (run, synth, inspect, report, timeline, import-te, "
       "closedloop; see fp8lab --help)\n",
       arg(cmd));
  return EXIT_USAGE;
}
