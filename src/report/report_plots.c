/* report_plots.c: the plots of `fp8lab report`, drawn with the chart library (plot.h) under
 * <outdir>/plots, each with its alt text and caption for the document: the drawing shared
 * among forked processes (rep_draw_plots). The charts are in report_plots_stream.c (amax
 * timelines), report_plots_heat.c (overshoot heatmaps), report_plots_steps.c (dynamic range, SNR over steps) and
 * report_plots_configs.c (history x margin heatmaps, per-configuration bars, GEMM error), their
 * helpers inline in report_plots_internal.h. What they show was chosen by report_load.c and
 * report_select.c; nothing here reads a file of the run. */
#include "report_plots_internal.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <time.h>
#include <unistd.h>

#include "util.h"

/* The threads of this process (Linux /proc/self/task), 0 when that cannot be read. */
static int count_threads(void) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return 0;
  int n = 0;
  for (struct dirent *e; (e = readdir(d));)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

/* Whether this process runs one thread. A thread just joined can still be listed for a moment
 * (its tid is cleared before the kernel lets it go: 3 times in 2,000 joins here), so a second
 * thread is given up to 20 ms to leave. */
static int single_threaded(void) {
  for (int i = 0; i < 40; i++) {
    int n = count_threads();
    if (n == 1) return 1;
    if (n == 0) return 0; /* cannot tell: no fork */
    nanosleep(&(struct timespec){.tv_nsec = 500000}, NULL);
  }
  return 0;
}

/* Forks the children that share the drawing (rep_draw_plots). In a child: its rank, its
 * charts only, the write end of its pipe. A child that cannot be forked leaves its charts to
 * this process. */
static void spawn_children(rep_charts *drawn) {
  fflush(NULL); /* nothing buffered is written twice */
  pid_t parent = getpid();
  for (int k = 1; k < drawn->nprocs; k++) {
    int p[2];
    if (pipe(p) != 0) continue;
    pid_t pid = fork();
    if (pid < 0) {
      close(p[0]);
      close(p[1]);
      continue;
    }
    if (pid == 0) {
#ifdef __linux__
      /* a report that is killed takes its children with it: none goes on writing plots (and
       * holding the folder's lock) after it */
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1);
#else
      (void)parent;
#endif
      close(p[0]);
      for (int j = 1; j < k; j++)
        if (drawn->pid[j] > 0) close(drawn->fd[j]);
      memset(drawn->pid, 0, sizeof drawn->pid);
      memset(drawn->mine, 0, sizeof drawn->mine);
      drawn->mine[k] = 1;
      drawn->rank = k;
      drawn->status_fd = p[1];
      return;
    }
    close(p[1]);
    drawn->pid[k] = (int)pid;
    drawn->fd[k] = p[0];
    drawn->mine[k] = 0;
  }
}

/* ------------------------------------------------------------------ all of them */

/* The charts in a fixed order, the same in every process (with one timeline,
 * dynamic_range.png is the second: tests/report/test_report.c relies on which process draws it). */
static int draw_all(const rep_t *r, rep_charts *drawn, int max_timelines, char *err,
                    size_t errlen) {
  int rc = rep_plot_timelines(r, drawn, max_timelines, err, errlen);
  if (rc) return rc;
  if ((rc = rep_plot_dynamic_range(r, drawn, err, errlen)) != FP8_OK) return rc;
  if ((rc = rep_plot_snr(r, drawn, err, errlen)) != FP8_OK) return rc;
  if ((rc = rep_plot_overshoot_maps(r, drawn, err, errlen)) != FP8_OK) return rc;
  if ((rc = rep_plot_config_maps(r, drawn, err, errlen)) != FP8_OK) return rc;
  if ((rc = rep_plot_bars(r, drawn, err, errlen)) != FP8_OK) return rc;
  if ((rc = rep_plot_experts(r, drawn, err, errlen)) != FP8_OK) return rc;
  if (r->have_gemm) rc = rep_plot_gemm(r, drawn, err, errlen);
  return rc;
}

/* A child's word to the parent: its status and message, one write (under PIPE_BUF). */
typedef struct {
  int rc;
  char err[1024];
} child_msg;

int rep_draw_plots(const rep_t *r, rep_charts *drawn, int max_timelines, int procs, char *err,
                   size_t errlen) {
  if (procs <= 0) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    procs = n < 1 ? 1 : n > 4 ? 4 : (int)n;
  }
  if (procs > MAX_PLOT_PROCS) procs = MAX_PLOT_PROCS;
  drawn->nprocs = procs;
  drawn->rank = 0;
  drawn->chart_i = 0;
  memset(drawn->pid, 0, sizeof drawn->pid);
  memset(drawn->mine, 1, sizeof drawn->mine); /* the charts of children that cannot be forked */
  /* fork() copies the calling thread only: a lock another thread held (pango's fontconfig
   * threads, once any text was drawn in this process) would stay locked in the child, and a
   * child waiting for such a thread's work would wait forever. So: only from a process that
   * is known to run one thread. */
  if (procs > 1 && single_threaded()) spawn_children(drawn);
  int rc = draw_all(r, drawn, max_timelines, err, errlen);
  if (drawn->rank > 0) { /* a child: its status to the pipe, no exit handlers, no stdio flush */
    child_msg m;
    memset(&m, 0, sizeof m);
    m.rc = rc;
    if (rc) snprintf(m.err, sizeof m.err, "%s", err);
    ssize_t w = write(drawn->status_fd, &m, sizeof m);
    _exit(w == (ssize_t)sizeof m ? 0 : 1);
  }
  for (int k = 1; k < procs; k++) {
    if (drawn->pid[k] <= 0) continue;
    child_msg m;
    size_t got = 0;
    while (got < sizeof m) {
      ssize_t n = read(drawn->fd[k], (char *)&m + got, sizeof m - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += (size_t)n;
    }
    close(drawn->fd[k]);
    int status = 0;
    while (waitpid((pid_t)drawn->pid[k], &status, 0) < 0 && errno == EINTR) {
    }
    drawn->pid[k] = 0;
    if (rc != FP8_OK) continue;
    if (got == sizeof m && m.rc != FP8_OK) {
      m.err[sizeof m.err - 1] = 0;
      rc = fp8_errorf(m.rc, err, errlen, "%s", m.err);
    } else if (got != sizeof m || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      rc = WIFSIGNALED(status)
               ? fp8_errorf(FP8_EIO, err, errlen, "plots: drawing process %d of %d killed by signal %d",
                            k + 1, procs, WTERMSIG(status))
               : fp8_errorf(FP8_EIO, err, errlen, "plots: drawing process %d of %d ended without its status",
                            k + 1, procs);
    }
  }
  return rc;
}
