/* report_plots.c: the plots of `fp8lab report`, drawn with the chart library (plot.h) under
 * <outdir>/plots, each with its alt text and caption for the document: amax timelines of the
 * tensors that overflow, the dynamic range at the spike, the SNR over steps, heatmaps over
 * history_len x margin per role, and per-configuration bars (overflow, SNR, GEMM error). What
 * they show was chosen by report_select.c. */
#include "report_internal.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

#include "outfile.h" /* fp8_errorf */
#include "plot.h"

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
static void spawn_children(rep_t *r) {
  fflush(NULL); /* nothing buffered is written twice */
  for (int k = 1; k < r->nprocs; k++) {
    int p[2];
    if (pipe(p) != 0) continue;
    pid_t pid = fork();
    if (pid < 0) {
      close(p[0]);
      close(p[1]);
      continue;
    }
    if (pid == 0) {
      close(p[0]);
      for (int j = 1; j < k; j++)
        if (r->pid[j] > 0) close(r->fd[j]);
      memset(r->pid, 0, sizeof r->pid);
      memset(r->mine, 0, sizeof r->mine);
      r->mine[k] = 1;
      r->rank = k;
      r->status_fd = p[1];
      return;
    }
    close(p[1]);
    r->pid[k] = (int)pid;
    r->fd[k] = p[0];
    r->mine[k] = 0;
  }
}

/* Whether this process draws the report's next chart. */
static int my_chart(rep_t *r) { return r->mine[r->chart_i++ % (size_t)r->nprocs]; }

static plot_t *plot_add(rep_t *r, const char *file) {
  if (r->nplots == MAX_PLOTS) return NULL;
  plot_t *p = &r->plots[r->nplots];
  memset(p, 0, sizeof *p);
  snprintf(p->file, sizeof p->file, "%s", file);
  return p;
}

static void plot_path(const rep_t *r, const char *file, char *out, size_t n) {
  snprintf(out, n, "%s/plots/%s", r->outdir, file);
}

static void sanitize(const char *in, char *out, size_t n) {
  size_t k = 0;
  for (; *in && k + 1 < n; in++) {
    char ch = *in;
    out[k++] = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                       ch == '-' || ch == '.'
                   ? ch
                   : '_';
  }
  out[k] = 0;
}

/* 1. amax timeline of one tensor, with the largest |x| each shown delayed configuration can
 * represent (fp8_max / scale) and the steps where the reference configuration overflowed. */
static int plot_timeline(rep_t *r, const char *tensor, char *err, size_t errlen) {
  ptrdiff_t gref = rep_group_of(r, tensor, (size_t)r->ref);
  if (gref < 0) return FP8_OK;
  const fp8_steps_group *gr = &r->tab.groups[gref];
  size_t n = gr->nrows;
  double *x = calloc(n + 1, sizeof *x), *amax = calloc(n + 1, sizeof *amax);
  double *fit = calloc((n + 1) * MAX_SHOWN, sizeof *fit);
  double *ox = calloc(n + 1, sizeof *ox), *oy = calloc(n + 1, sizeof *oy);
  int rc = FP8_OK;
  if (!x || !amax || !fit || !ox || !oy) {
    rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
    goto done;
  }
  size_t no = 0;
  for (size_t i = 0; i < n; i++) {
    const fp8_step_row *row = fp8_steps_group_row(&r->tab, gr, i);
    x[i] = (double)row->step;
    amax[i] = row->amax;
    if (row->overflow > 0) {
      ox[no] = (double)row->step;
      oy[no++] = row->amax;
    }
  }
  fp8_series series[1 + MAX_SHOWN];
  char labels[MAX_SHOWN][200];
  size_t ns = 0;
  series[ns++] = (fp8_series){.x = x, .y = amax, .n = n, .label = "amax of the step", .color = FP8_COLOR_BLACK,
                              .style = FP8_STYLE_LINE, .marker = FP8_MARKER_CIRCLE};
  static const fp8_color colors[MAX_SHOWN] = {FP8_COLOR_ORANGE, FP8_COLOR_SKYBLUE, FP8_COLOR_GREEN, FP8_COLOR_PURPLE};
  for (size_t k = 0; k < r->nshown; k++) {
    ptrdiff_t g = rep_group_of(r, tensor, r->shown[k]);
    if (g < 0) continue;
    double *y = fit + k * (n + 1);
    for (size_t i = 0; i < n; i++) {
      const fp8_step_row *row = rep_row_at(r, g, (int64_t)x[i]);
      y[i] = row ? fp8_format_max(row->format) / row->scale : NAN;
    }
    snprintf(labels[k], sizeof labels[k], "fits under %s", r->cfgs[r->shown[k]].label);
    series[ns++] = (fp8_series){.x = x, .y = y, .n = n, .label = labels[k], .color = colors[k],
                                .style = FP8_STYLE_STEP, .dashed = k % 2};
  }
  char olabel[200];
  snprintf(olabel, sizeof olabel, "overflow under %s", r->cfgs[r->ref].label);
  fp8_markers marks = {.x = ox, .y = oy, .n = no, .label = olabel, .color = FP8_COLOR_VERMILLION,
                       .marker = FP8_MARKER_CROSS};
  char title[512], file[300], path[4600], safe[200];
  snprintf(title, sizeof title, "%s: amax per step and what delayed scaling can represent", tensor);
  sanitize(tensor, safe, sizeof safe);
  snprintf(file, sizeof file, "amax_%s.png", safe);
  plot_path(r, file, path, sizeof path);
  fp8_png_text text[] = {{"fp8lab-version", FP8LAB_VERSION}, {"experiment", r->name}, {"tensor", tensor},
                         {"configuration", r->cfgs[r->ref].label}, {"plot", "amax timeline"}};
  fp8_chart ch = {.title = title, .xlabel = "training step", .ylabel = "|x| (log scale)", .logy = 1,
                  .grid = 1, .text = text, .ntext = 5};
  rc = !my_chart(r) ? FP8_OK : fp8_plot_lines(path, &ch, series, ns, no ? &marks : NULL, no ? 1 : 0, err, errlen);
  if (rc) goto done;
  plot_t *p = plot_add(r, file);
  if (p) {
    snprintf(p->alt, sizeof p->alt, "amax timeline of %s", tensor);
    snprintf(p->caption, sizeof p->caption,
             "%s: the tensor's amax at each snapshot step (black) against the largest |x| each "
             "delayed configuration could represent at that step (fp8_max / scale, from the "
             "history of earlier steps); crosses mark the steps where %s overflowed.",
             tensor, r->cfgs[r->ref].label);
    r->nplots++;
  }
done:
  free(x);
  free(amax);
  free(fit);
  free(ox);
  free(oy);
  return rc;
}

/* 2. heatmaps over history_len x margin, per role: overflow rate and median SNR. */
static int plot_heatmaps(rep_t *r, char *err, size_t errlen) {
  if (r->ref < 0) return FP8_OK;
  const cfg_t *b = &r->cfgs[r->ref];
  int32_t hs[64], ms[64];
  size_t nh = 0, nm = 0;
  for (size_t c = 0; c < r->ncfg; c++) {
    const cfg_t *x = &r->cfgs[c];
    if (x->kind != FP8_KIND_DELAYED || x->ac != b->ac || strcmp(x->recipe, b->recipe) != 0) continue;
    size_t i = 0;
    while (i < nh && hs[i] != x->h) i++;
    if (i == nh && nh < 64) hs[nh++] = x->h;
    i = 0;
    while (i < nm && ms[i] != x->m) i++;
    if (i == nm && nm < 64) ms[nm++] = x->m;
  }
  if (nh * nm < 2) return FP8_OK;
  for (size_t i = 1; i < nh; i++)
    for (size_t j = i; j > 0 && hs[j] < hs[j - 1]; j--) { int32_t t = hs[j]; hs[j] = hs[j - 1]; hs[j - 1] = t; }
  for (size_t i = 1; i < nm; i++)
    for (size_t j = i; j > 0 && ms[j] < ms[j - 1]; j--) { int32_t t = ms[j]; ms[j] = ms[j - 1]; ms[j - 1] = t; }
  char xl[64][16], yl[64][16];
  const char *xp[64], *yp[64];
  for (size_t i = 0; i < nh; i++) { snprintf(xl[i], sizeof xl[i], "%d", (int)hs[i]); xp[i] = xl[i]; }
  for (size_t i = 0; i < nm; i++) { snprintf(yl[i], sizeof yl[i], "%d", (int)ms[i]); yp[i] = yl[i]; }
  for (int role = FP8_ROLE_INPUT; role <= FP8_ROLE_UNKNOWN; role++) {
    double ov[64 * 64], snr[64 * 64];
    int any = 0;
    for (size_t iy = 0; iy < nm; iy++)
      for (size_t ix = 0; ix < nh; ix++) {
        int64_t o = 0, f = 0;
        double med[4096];
        size_t nmed = 0;
        for (size_t g = 0; g < r->tab.ngroups; g++) {
          const fp8_steps_group *gr = &r->tab.groups[g];
          const cfg_t *c = &r->cfgs[r->gcfg[g]];
          if ((int)gr->role != role || c->kind != FP8_KIND_DELAYED || c->ac != b->ac || c->h != hs[ix] ||
              c->m != ms[iy] || strcmp(c->recipe, b->recipe) != 0)
            continue;
          const fp8_group_stats *s = &r->an.stats[g];
          o += s->overflow;
          f += s->finite;
          if (s->snr_rows > 0 && nmed < 4096) med[nmed++] = s->snr_median;
        }
        ov[iy * nh + ix] = f > 0 ? (double)o / (double)f : NAN;
        gsl_sort(med, 1, nmed);
        snr[iy * nh + ix] = nmed ? gsl_stats_median_from_sorted_data(med, 1, nmed) : NAN;
        any |= f > 0;
      }
    if (!any) continue;
    const char *rname = role == FP8_ROLE_UNKNOWN ? "other" : fp8_role_name((fp8_role)role);
    for (int metric = 0; metric < 2; metric++) {
      char title[512], file[200], path[4600];
      snprintf(title, sizeof title, "%s tensors, %s, amax_compute = %s: %s", rname, b->recipe,
               b->ac == FP8_AMAX_MAX ? "max" : "most_recent",
               metric == 0 ? "overflow rate (saturated / finite elements)" : "median SNR over tensors");
      snprintf(file, sizeof file, "heatmap_%s_%s.png", metric == 0 ? "overflow" : "snr", rname);
      plot_path(r, file, path, sizeof path);
      fp8_png_text text[] = {{"fp8lab-version", FP8LAB_VERSION}, {"experiment", r->name}, {"role", rname},
                             {"configuration", b->recipe}, {"plot", metric == 0 ? "overflow heatmap" : "snr heatmap"}};
      fp8_chart ch = {.title = title, .xlabel = "history_len (steps)", .ylabel = "margin (binades)",
                      .text = text, .ntext = 5};
      fp8_heatmap hm = {.nx = nh, .ny = nm, .xlabels = xp, .ylabels = yp, .values = metric == 0 ? ov : snr,
                        .cell_format = metric == 0 ? "%.2g" : "%.1f",
                        .colorbar_label = metric == 0 ? "overflow rate" : "median SNR (dB)",
                        .reverse = metric == 0};
      int rc = !my_chart(r) ? FP8_OK : fp8_plot_heatmap(path, &ch, &hm, err, errlen);
      if (rc) return rc;
      plot_t *p = plot_add(r, file);
      if (p) {
        snprintf(p->alt, sizeof p->alt, "%s heatmap for %s tensors", metric == 0 ? "overflow" : "SNR", rname);
        snprintf(p->caption, sizeof p->caption,
                 metric == 0
                     ? "Overflow rate of all %s tensors (saturated values over finite values, all snapshot "
                       "steps) for each amax history length and margin."
                     : "Median over the %s tensors of each tensor's median SNR (dB) for each amax history "
                       "length and margin.",
                 rname);
        r->nplots++;
      }
    }
  }
  return FP8_OK;
}

/* 3. dynamic range at the spike: log2|x| histogram against the windows each scale covers. */
static int plot_dynamic_range(rep_t *r, char *err, size_t errlen) {
  if (r->spike_group < 0) return FP8_OK;
  const fp8_steps_group *gr = &r->tab.groups[r->spike_group];
  const fp8_step_row *row = &r->tab.rows[r->spike_row];
  double counts[FP8_LOG2_HIST_BINS];
  int lo, nb;
  if (rep_load_histogram(r, gr->tensor, row->step, counts, &lo, &nb) != FP8_OK) return FP8_OK;
  double edges[FP8_LOG2_HIST_BINS + 1];
  for (int i = 0; i <= nb; i++) edges[i] = lo + i;
  fp8_format f = row->format;
  double minsub = f == FP8_E4M3 ? -9.0 : -16.0, maxl = log2(fp8_format_max(f));
  double sd = row->scale, sj;
  const fp8_step_row *cr = r->cur >= 0 ? rep_row_at(r, rep_group_of(r, gr->tensor, (size_t)r->cur), row->step) : NULL;
  if (cr) {
    sj = cr->scale;
  } else {
    fp8_current_params p = {.amax_epsilon = 0, .pow2 = false, .margin = 0, .format = f};
    sj = fp8_current_scale(&p, (float)row->amax);
  }
  char l1[256], l2[256];
  snprintf(l1, sizeof l1, "%s under %s (scale %.3g)", fp8_format_name(f), r->cfgs[r->ref].label, sd);
  snprintf(l2, sizeof l2, "%s under current scaling (scale %.3g)", fp8_format_name(f), sj);
  fp8_window w[2] = {{minsub - log2(sd), maxl - log2(sd), l1, FP8_COLOR_ORANGE},
                     {minsub - log2(sj), maxl - log2(sj), l2, FP8_COLOR_SKYBLUE}};
  fp8_hist h = {.nbins = (size_t)nb, .edges = edges, .counts = counts, .label = "elements per binade",
                .color = FP8_COLOR_BLUE};
  char title[512], path[4600], stepbuf[32];
  snprintf(title, sizeof title, "%s at step %lld: magnitudes and the range each scale represents", gr->tensor,
           (long long)row->step);
  snprintf(stepbuf, sizeof stepbuf, "%lld", (long long)row->step);
  plot_path(r, "dynamic_range.png", path, sizeof path);
  fp8_png_text text[] = {{"fp8lab-version", FP8LAB_VERSION}, {"experiment", r->name}, {"tensor", gr->tensor},
                         {"step", stepbuf}, {"configuration", r->cfgs[r->ref].label}};
  fp8_chart ch = {.title = title, .xlabel = "log2 |x| (binade)", .ylabel = "elements (log scale)", .logy = 1,
                  .grid = 1, .text = text, .ntext = 5};
  int rc = !my_chart(r) ? FP8_OK : fp8_plot_histogram(path, &ch, &h, w, 2, err, errlen);
  if (rc) return rc;
  plot_t *p = plot_add(r, "dynamic_range.png");
  if (p) {
    snprintf(p->alt, sizeof p->alt, "dynamic range of %s at step %lld", gr->tensor, (long long)row->step);
    snprintf(p->caption, sizeof p->caption,
             "Magnitudes of %s at step %lld (histogram of log2|x|) and the windows %s can represent "
             "(from its smallest subnormal to its max) under the delayed scale and under the "
             "just-in-time scale: values right of a window saturate, values left of it flush to zero.",
             gr->tensor, (long long)row->step, fp8_format_name(f));
    r->nplots++;
  }
  return FP8_OK;
}

/* 4. SNR over steps of the spike tensor: shown delayed configurations against current. */
static int plot_snr(rep_t *r, char *err, size_t errlen) {
  if (r->spike_group < 0) return FP8_OK;
  const char *tensor = r->tab.groups[r->spike_group].tensor;
  size_t cfgs[MAX_SHOWN + 1], nc = 0;
  for (size_t k = 0; k < r->nshown; k++) cfgs[nc++] = r->shown[k];
  if (r->cur >= 0) cfgs[nc++] = (size_t)r->cur;
  fp8_series s[MAX_SHOWN + 1];
  double *buf[MAX_SHOWN + 1][2];
  size_t ns = 0;
  int rc = FP8_OK;
  static const fp8_color colors[MAX_SHOWN] = {FP8_COLOR_ORANGE, FP8_COLOR_SKYBLUE, FP8_COLOR_GREEN, FP8_COLOR_PURPLE};
  for (size_t k = 0; k < nc; k++) {
    ptrdiff_t g = rep_group_of(r, tensor, cfgs[k]);
    buf[k][0] = buf[k][1] = NULL;
    if (g < 0) continue;
    const fp8_steps_group *gr = &r->tab.groups[g];
    double *x = calloc(gr->nrows + 1, sizeof *x), *y = calloc(gr->nrows + 1, sizeof *y);
    buf[k][0] = x;
    buf[k][1] = y;
    if (!x || !y) { rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory"); goto done; }
    for (size_t i = 0; i < gr->nrows; i++) {
      const fp8_step_row *row = fp8_steps_group_row(&r->tab, gr, i);
      x[i] = (double)row->step;
      y[i] = isfinite(row->snr_db) ? row->snr_db : NAN;
    }
    int is_cur = r->cfgs[cfgs[k]].kind == FP8_KIND_CURRENT;
    s[ns++] = (fp8_series){.x = x, .y = y, .n = gr->nrows, .label = r->cfgs[cfgs[k]].label,
                           .color = is_cur ? FP8_COLOR_BLACK : colors[k % MAX_SHOWN],
                           .style = FP8_STYLE_LINE, .marker = is_cur ? FP8_MARKER_SQUARE : FP8_MARKER_CIRCLE,
                           .dashed = is_cur};
  }
  if (ns) {
    char title[512], path[4600];
    snprintf(title, sizeof title, "%s: SNR of the FP8 cast per step", tensor);
    plot_path(r, "snr.png", path, sizeof path);
    fp8_png_text text[] = {{"fp8lab-version", FP8LAB_VERSION}, {"experiment", r->name}, {"tensor", tensor},
                           {"plot", "snr over steps"}};
    fp8_chart ch = {.title = title, .xlabel = "training step", .ylabel = "SNR (dB)", .grid = 1, .text = text,
                    .ntext = 4};
    rc = !my_chart(r) ? FP8_OK : fp8_plot_lines(path, &ch, s, ns, NULL, 0, err, errlen);
    if (rc) goto done;
    plot_t *p = plot_add(r, "snr.png");
    if (p) {
      snprintf(p->alt, sizeof p->alt, "SNR over steps of %s", tensor);
      snprintf(p->caption, sizeof p->caption,
               "SNR (10 log10 of signal over quantization error power) of %s at each snapshot step, "
               "delayed configurations against current scaling (black, dashed).", tensor);
      r->nplots++;
    }
  }
done:
  for (size_t k = 0; k < nc; k++) {
    free(buf[k][0]);
    free(buf[k][1]);
  }
  return rc;
}

/* 5. recipe comparison: overflow rate and median SNR per configuration. */
static int plot_bars(rep_t *r, char *err, size_t errlen) {
  if (r->ncfg == 0) return FP8_OK;
  const char **cat = calloc(r->ncfg, sizeof *cat);
  double *ov = calloc(r->ncfg, sizeof *ov), *snr = calloc(r->ncfg, sizeof *snr);
  int rc = FP8_OK;
  if (!cat || !ov || !snr) { rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory"); goto done; }
  int any_ov = 0;
  for (size_t c = 0; c < r->ncfg; c++) {
    cat[c] = r->cfgs[c].label;
    ov[c] = r->cfgs[c].finite ? (double)r->cfgs[c].overflow / (double)r->cfgs[c].finite : NAN;
    any_ov |= ov[c] > 0;
    snr[c] = r->cfgs[c].snr_median;
  }
  for (int metric = 0; metric < 2; metric++) {
    if (metric == 0 && !any_ov) continue;
    char path[4600];
    const char *file = metric == 0 ? "recipes_overflow.png" : "recipes_snr.png";
    plot_path(r, file, path, sizeof path);
    fp8_png_text text[] = {{"fp8lab-version", FP8LAB_VERSION}, {"experiment", r->name},
                           {"plot", metric == 0 ? "overflow per configuration" : "snr per configuration"}};
    fp8_chart ch = {.title = metric == 0 ? "Overflow rate per configuration (all tensors)"
                                         : "Median SNR per configuration (median over tensors)",
                    .xlabel = "configuration", .ylabel = metric == 0 ? "overflow rate (log scale)" : "SNR (dB)",
                    .logy = metric == 0, .grid = 1, .text = text, .ntext = 3,
                    .width = r->ncfg > 16 ? 1600 : 1200, .height = 900};
    fp8_bar_series bs = {.values = metric == 0 ? ov : snr, .label = metric == 0 ? "overflow rate" : "median SNR",
                         .color = metric == 0 ? FP8_COLOR_VERMILLION : FP8_COLOR_BLUE};
    rc = !my_chart(r) ? FP8_OK : fp8_plot_bars(path, &ch, cat, r->ncfg, &bs, 1, err, errlen);
    if (rc) goto done;
    plot_t *p = plot_add(r, file);
    if (p) {
      snprintf(p->alt, sizeof p->alt, "%s per configuration", metric == 0 ? "overflow rate" : "median SNR");
      snprintf(p->caption, sizeof p->caption, "%s",
               metric == 0 ? "Saturated values over finite values, summed over all tensors and snapshot steps, "
                             "for each configuration (a missing bar is zero)."
                           : "Median over tensors of each tensor's median SNR for each configuration.");
      r->nplots++;
    }
  }
done:
  free(cat);
  free(ov);
  free(snr);
  return rc;
}

/* 6. GEMM error per configuration: median rel_error of fprop, dgrad and wgrad. */
static int plot_gemm(rep_t *r, char *err, size_t errlen) {
  const char **cat = calloc(r->ncfg + 1, sizeof *cat);
  double *v = calloc(3 * (r->ncfg + 1), sizeof *v);
  int rc = FP8_OK;
  if (!cat || !v) { rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory"); goto done; }
  for (size_t c = 0; c < r->ncfg; c++) {
    cat[c] = r->cfgs[c].label;
    for (int g = 0; g < 3; g++) v[(size_t)g * r->ncfg + c] = r->cfgs[c].gemm_median[g];
  }
  fp8_bar_series bs[3] = {{v, "fprop (input x weight)", FP8_COLOR_BLUE},
                          {v + r->ncfg, "dgrad (grad_output x weight)", FP8_COLOR_ORANGE},
                          {v + 2 * r->ncfg, "wgrad (grad_output^T x input)", FP8_COLOR_GREEN}};
  char path[4600];
  plot_path(r, "gemm_error.png", path, sizeof path);
  fp8_png_text text[] = {{"fp8lab-version", FP8LAB_VERSION}, {"experiment", r->name}, {"plot", "gemm error"}};
  fp8_chart ch = {.title = "GEMM output error per configuration (median over layers and steps)",
                  .xlabel = "configuration", .ylabel = "relative Frobenius error (log scale)", .logy = 1,
                  .grid = 1, .text = text, .ntext = 3, .width = r->ncfg > 16 ? 1600 : 1200, .height = 900};
  rc = !my_chart(r) ? FP8_OK : fp8_plot_bars(path, &ch, cat, r->ncfg, bs, 3, err, errlen);
  if (rc) goto done;
  plot_t *p = plot_add(r, "gemm_error.png");
  if (p) {
    snprintf(p->alt, sizeof p->alt, "GEMM error per configuration");
    snprintf(p->caption, sizeof p->caption,
             "||Y - Y_ref|| / ||Y_ref|| of each layer's fprop, dgrad and wgrad computed from the FP8-dequantized "
             "operands (FP32 GEMM) against the original operands (double), median over layers and snapshot steps.");
    r->nplots++;
  }
done:
  free(cat);
  free(v);
  return rc;
}

/* ------------------------------------------------------------------ all of them */

/* Amax timelines: the spike tensor first, then the worst overflowing ones, max_timelines in
 * all. */
static int plot_timelines(rep_t *r, int max_timelines, char *err, size_t errlen) {
  if (r->ref < 0) return FP8_OK;
  int rc = FP8_OK;
  ov_t *ov = calloc(r->tab.ngroups + 1, sizeof *ov);
  if (!ov) return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  size_t nov = rep_overflowing(r, ov);
  size_t drawn = 0;
  if (r->spike_group >= 0) {
    rc = plot_timeline(r, r->tab.groups[r->spike_group].tensor, err, errlen);
    if (rc) goto done;
    drawn++;
  }
  for (size_t i = 0; i < nov && drawn < (size_t)max_timelines; i++) {
    const char *t = r->tab.groups[ov[i].g].tensor;
    if (r->spike_group >= 0 && strcmp(t, r->tab.groups[r->spike_group].tensor) == 0) continue;
    rc = plot_timeline(r, t, err, errlen);
    if (rc) goto done;
    drawn++;
  }
done:
  free(ov);
  return rc;
}

static int draw_all(rep_t *r, int max_timelines, int have_gemm, char *err, size_t errlen) {
  int rc = plot_timelines(r, max_timelines, err, errlen);
  if (rc) return rc;
  if ((rc = plot_dynamic_range(r, err, errlen)) != FP8_OK) return rc;
  if ((rc = plot_snr(r, err, errlen)) != FP8_OK) return rc;
  if ((rc = plot_heatmaps(r, err, errlen)) != FP8_OK) return rc;
  if ((rc = plot_bars(r, err, errlen)) != FP8_OK) return rc;
  if (have_gemm) rc = plot_gemm(r, err, errlen);
  return rc;
}

/* A child's word to the parent: its status and message, one write (under PIPE_BUF). */
typedef struct {
  int rc;
  char err[1024];
} child_msg;

int rep_draw_plots(rep_t *r, int max_timelines, int have_gemm, int procs, char *err, size_t errlen) {
  if (procs <= 0) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    procs = n < 1 ? 1 : n > 4 ? 4 : (int)n;
  }
  if (procs > MAX_PLOT_PROCS) procs = MAX_PLOT_PROCS;
  r->nprocs = procs;
  r->rank = 0;
  r->chart_i = 0;
  memset(r->pid, 0, sizeof r->pid);
  memset(r->mine, 1, sizeof r->mine); /* the charts of children that cannot be forked */
  /* fork() copies the calling thread only: a lock another thread held (pango's fontconfig
   * threads, once any text was drawn in this process) would stay locked in the child, and a
   * child waiting for such a thread's work would wait forever. So: only from a process that
   * is known to run one thread. */
  if (procs > 1 && single_threaded()) spawn_children(r);
  int rc = draw_all(r, max_timelines, have_gemm, err, errlen);
  if (r->rank > 0) { /* a child: its status to the pipe, no exit handlers, no stdio flush */
    child_msg m;
    memset(&m, 0, sizeof m);
    m.rc = rc;
    if (rc) snprintf(m.err, sizeof m.err, "%s", err);
    ssize_t w = write(r->status_fd, &m, sizeof m);
    _exit(w == (ssize_t)sizeof m ? 0 : 1);
  }
  for (int k = 1; k < procs; k++) {
    if (r->pid[k] <= 0) continue;
    child_msg m;
    size_t got = 0;
    while (got < sizeof m) {
      ssize_t n = read(r->fd[k], (char *)&m + got, sizeof m - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += (size_t)n;
    }
    close(r->fd[k]);
    int status = 0;
    while (waitpid((pid_t)r->pid[k], &status, 0) < 0 && errno == EINTR) {
    }
    r->pid[k] = 0;
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
