/* run_progress.c: the run's clock and the progress bar the step loop draws on a terminal
 * (runner_internal.h): steps done of the replay's, the rate and the time left, on stderr,
 * redrawn at most every 0.1 s. */
#include <stdio.h>
#include <time.h>

#include "runner_internal.h"

double run_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void run_progress(size_t done, size_t total, double t0, double *last, int final) {
  double t = run_now_s();
  if (!final && t - *last < 0.1) return;
  *last = t;
  double el = t - t0, rate = el > 0 ? (double)done / el : 0;
  double eta = rate > 0 ? (double)(total - done) / rate : 0;
  int width = 30, fill = total ? (int)((double)width * (double)done / (double)total) : width;
  fprintf(stderr, "\r[%.*s%*s] %zu/%zu steps  %.1f steps/s  ETA %.0fs ", fill,
          "##############################", width - fill, "", done, total, rate, eta);
  if (final) fputc('\n', stderr);
  fflush(stderr);
}
