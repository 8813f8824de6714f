/* report_fp4_text.c: the report's FP4 section (issue 29; issue 42): the per-role tables, what
 * clipping the numbers show (computed from steps.csv, compared with the value budget, and
 * NVFP4's scale-rounding overflow), and the per-layer verdicts of report_fp4.c with their
 * intervals, the layers too close to call and the cost of the exact recomputations. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report_fp4_internal.h"

/* The GEMMs a role enters as an operand (fp8lab's layer triplet), as a bit mask. */
static unsigned role_gemms(int role) {
  return role == FP8_ROLE_INPUT ? 1u | 4u : role == FP8_ROLE_WEIGHT ? 1u | 2u
       : role == FP8_ROLE_GRAD_OUTPUT ? 2u | 4u : 0u;
}

/* Configuration c's counts over the non-warm-up snapshot rows of one role (role < 0: all). */
typedef struct {
  int64_t clip, ovf, und, fin;
  double uexp;
  int have_exp, any;
} role_totals;

static role_totals totals_of(const rep_t *r, size_t c, int role) {
  role_totals t = {0};
  for (size_t g = 0; g < r->tab.ngroups; g++) {
    const fp8_steps_group *grp = &r->tab.groups[g];
    if (r->gcfg[g] != c || (role >= 0 && (int)grp->role != role)) continue;
    for (size_t k = 0; k < grp->nrows; k++) {
      const fp8_step_row *row = &r->tab.rows[grp->rows[k]];
      if (row->warmup) continue;
      t.any = 1;
      t.clip += row->clipped;
      t.ovf += row->overflow;
      t.und += row->underflow;
      t.fin += row->n - row->nonfinite;
      if (!isnan(row->underflow_expected)) t.have_exp = 1, t.uexp += row->underflow_expected;
    }
  }
  return t;
}

static double rate(int64_t k, int64_t n) { return n ? (double)k / (double)n : NAN; }

static void role_table(const rep_t *r, fp8_doc *d, int role) {
  static const char *const gname[3] = {"fprop", "dgrad", "wgrad"};
  unsigned gm = role_gemms(role);
  char h[3][48];
  const char *hdr[8] = {"configuration", "clipped rate", "overflow rate", "flushed rate",
                        "flushed rate, expected (SR)"};
  int nh = 5;
  for (int g = 0; g < 3; g++)
    if (gm >> g & 1u) {
      snprintf(h[g], sizeof h[g], "%s error", gname[g]);
      hdr[nh++] = h[g];
    }
  fp8_doc_heading(d, 3, fp8_role_name((fp8_role)role));
  static const char align[] = "lrrrrrrrrrrrrrrrrr";
  char al[9];
  snprintf(al, sizeof al, "%.*s", nh, align);
  fp8_doc_table_begin(d, nh, hdr, al);
  for (size_t c = 0; c < r->ncfg; c++) {
    if (r->cfgs[c].same_as != c) continue;
    role_totals t = totals_of(r, c, role);
    if (!t.any) continue;
    char b[7][32];
    const char *cells[8] = {r->cfgs[c].dlabel, rep_fmt_rate(rate(t.clip, t.fin), b[0], 32),
                            rep_fmt_rate(rate(t.ovf, t.fin), b[1], 32),
                            rep_fmt_rate(rate(t.und, t.fin), b[2], 32),
                            t.have_exp ? rep_fmt_rate(t.fin ? t.uexp / (double)t.fin : NAN, b[3], 32)
                                       : ""};
    int n = 5;
    for (int g = 0; g < 3; g++)
      if (gm >> g & 1u) cells[n++] = rep_fmt_rate(r->cfgs[c].gemm_median[g], b[4 + g], 32);
    fp8_doc_table_row(d, cells);
  }
}

/* The distinct FP4 configurations (not mixed recipes). */
static int plain_fp4(const rep_t *r, size_t c) {
  return r->cfgs[c].same_as == c && !r->cfgs[c].mixed &&
         fp8_recipe_kind_is_fp4(r->cfgs[c].key.kind);
}

/* What the clipped rates say (issue 42, case 7): each FP4 configuration's role of the highest
 * clipped rate against the value budget, from the numbers of the tables below. */
static void clip_statement(const rep_t *r, fp8_doc *d) {
  char text[4096];
  size_t at = 0;
  int over = 0;
  for (size_t c = 0; c < r->ncfg; c++) {
    if (!plain_fp4(r, c)) continue;
    int worst = -1;
    double wr = -1.0;
    for (int role = FP8_ROLE_INPUT; role <= FP8_ROLE_GRAD_INPUT; role++) {
      role_totals t = totals_of(r, c, role);
      double x = rate(t.clip, t.fin);
      if (t.any && !isnan(x) && x > wr) wr = x, worst = role;
    }
    if (worst < 0 || !(wr > r->budget) || at >= sizeof text) continue;
    int n = snprintf(text + at, sizeof text - at,
                     "%s under %s %.2g%% of the %s values clip (%.0f times the value budget, "
                     "%g)", over ? ";" : "Clipping is not rare here:", r->cfgs[c].dlabel,
                     100.0 * wr, fp8_role_name((fp8_role)worst), wr / r->budget, r->budget);
    if (n > 0) at += (size_t)n;
    over = 1;
  }
  if (over)
    fp8_doc_markdownf(d, "%s. What FP4 costs shows in the clipped and flushed values and in the "
                         "GEMM error.", text);
  else
    fp8_doc_markdownf(d, "Under every FP4 configuration each role's clipped rate is within the "
                         "value budget (%g): clipping is rare here, and what FP4 costs shows in "
                         "the values flushed to zero and in the GEMM error.", r->budget);
  /* NVFP4's scale-rounding overflow, with its numbers */
  at = 0;
  for (size_t c = 0; c < r->ncfg && at < sizeof text; c++) {
    if (!plain_fp4(r, c) || r->cfgs[c].key.kind != FP8_KIND_NVFP4) continue;
    role_totals t = totals_of(r, c, -1);
    if (!t.any || !t.fin) continue;
    int n = snprintf(text + at, sizeof text - at, "%s%s: %.2g%% of the values overflow, %.2g%% "
                     "clip", at ? "; " : "", r->cfgs[c].dlabel, 100.0 * rate(t.ovf, t.fin),
                     100.0 * rate(t.clip, t.fin));
    if (n > 0) at += (size_t)n;
  }
  if (at)
    fp8_doc_markdownf(d, "NVFP4's overflow counts its **scale-rounding overflow**: a block's "
                         "E4M3 scale is rounded to an E4M3 value, and when it rounds down the "
                         "block's largest values land above 6 (E2M1's largest) after scaling. "
                         "They are counted as overflow (the overflow rate here and the overflow "
                         "bars of the recipes_overflow chart) though they saturate to 6 and lose "
                         "less than a seventh of their value; only values at 7 or more count as "
                         "clipped (the clipped rate, the value budget's quantity), where the "
                         "scale rounded down by more than a seventh (an E4M3 subnormal or zero "
                         "block scale). Over all tensors (%s).", text);
}

void rep_fp4_overflow_caption(const rep_t *r, char *buf, size_t len) {
  int nv = 0;
  for (size_t c = 0; c < r->ncfg; c++) nv |= plain_fp4(r, c) && r->cfgs[c].key.kind == FP8_KIND_NVFP4;
  snprintf(buf, len, "%s", nv ? " NVFP4's overflow bars include its scale-rounding overflow: a "
                                "block whose E4M3 scale rounded down puts its largest values "
                                "above 6 after scaling (counted as overflow; they saturate to "
                                "6), and only values at 7 or more count as clipped."
                              : "");
}

/* One verdict cell: the worst GEMM's median ratio and interval, and the verdict. */
static void verdict_cell(const rep_t *r, size_t c, size_t l, char *b, size_t len) {
  static const char *const gname[3] = {"fprop", "dgrad", "wgrad"};
  int w = 0, v = rep_fp4_layer_verdict(r, c, l, &w);
  if (v == V_NONE) {
    snprintf(b, len, "n/a");
    return;
  }
  const gstat *s = &rep_fp4_st(r, c, l)[w];
  char iv[64] = "";
  if (s->lo != s->hi) snprintf(iv, sizeof iv, " [%.2f, %.2f]", s->lo, s->hi);
  snprintf(b, len, "%s%.2fx%s%s %s%s", v == V_FAILS ? "**" : "", s->m, v == V_FAILS ? "**" : "",
           iv, gname[w], v == V_FAILS ? " (no)" : v == V_CLOSE ? " (too close to call)" : "");
}

void rep_add_fp4(const rep_t *r, fp8_doc *d) {
  const struct rep_fp4 *f = r->fp4;
  if (!f || r->stream_only) return;
  fp8_doc_heading(d, 2, "FP4: NVFP4 and MXFP4");
  fp8_doc_markdown(d,
                   "The FP4 configurations of this run beside the FP8 ones. FP4 keeps one mantissa "
                   "bit to E4M3's three (elements +-{0, 0.5, 1, 1.5, 2, 3, 4, 6}): its scales are "
                   "per block (NVFP4: E4M3 scales of 1x16 runs, 16x16 for weights, under a "
                   "per-tensor scale; MXFP4: power-of-two scales of 1x32 runs). Per role: clipped, "
                   "overflowed and flushed values over the finite values (warm-up left out); under "
                   "stochastic rounding the flushed count is one seeded draw, and its exact "
                   "expectation is beside it; the median GEMM errors of the GEMMs the role is an "
                   "operand of (over layers and snapshot steps).");
  clip_statement(r, d);
  for (int role = FP8_ROLE_INPUT; role <= FP8_ROLE_GRAD_INPUT; role++) {
    int any = 0;
    for (size_t g = 0; g < r->tab.ngroups && !any; g++) any = (int)r->tab.groups[g].role == role;
    if (any) role_table(r, d, role);
  }
  if (f->nlayers == 0) {
    fp8_doc_markdown(d, "Which layers hold under FP4 is measured by their GEMM errors: this run "
                        "has none (`[analysis] gemm = true`, and layers whose input, weight and "
                        "grad_output were captured).");
    return;
  }
  if (f->ref < 0) {
    fp8_doc_markdown(d, "Which layers hold under FP4 is measured against an FP8 configuration "
                        "(current scaling, or delayed scaling): this run has neither.");
    return;
  }
  const double R = r->run.fp4_gemm_ratio;
  fp8_doc_markdownf(d,
                    "**Which layers hold.** At each snapshot step a GEMM's ratio is its error over "
                    "%s's at the same layer and step%s. A step is within when its ratio is at "
                    "most %g (`[analysis] fp4_gemm_ratio`, default 4: E2M1's rounding step is 4 "
                    "times E4M3's, so about 4x is what the format itself costs; more means the "
                    "scaling failed the layer: values flushed, an outlier's block). A GEMM holds "
                    "when at least half of its snapshot steps are within, i.e. when the lower "
                    "median of its per-step ratios (the ceil(n/2)-th smallest of n) is at most "
                    "%g, decided on the intervals: it holds when the lower median of their upper "
                    "ends is at most %g, fails when that of their lower ends is above it, and "
                    "is **too close to call** otherwise. A layer holds when its three GEMMs "
                    "hold (under a mixed recipe: its GEMMs with an FP4 operand; the others take "
                    "no ratio). The table gives each layer's GEMM of the largest median ratio: the "
                    "median ratio [median of the lower ends, median of the upper ends] (no "
                    "interval: exact).",
                    r->cfgs[f->ref].dlabel,
                    !f->paired ? " (this run's gemm.csv has no paired ratios, an older run: "
                                 "each is divided from the two rows, its interval from the "
                                 "rows' own, wider than the paired one)"
                    : r->run.gemm_sampled ? ", both estimated on the same sampled entries "
                                            "(paired), with its 95% interval; a ratio whose "
                                            "interval straddled the threshold was computed again "
                                            "exactly, both errors on the whole output"
                                          : " (gemm_error = exact: every ratio exact)",
                    R, R, R);
  const char *hdr[1 + 16];
  size_t fc[16], nfc = 0;
  hdr[0] = "layer";
  for (size_t c = 0; c < r->ncfg && nfc < 16; c++)
    if (rep_fp4_has(r, c) && r->cfgs[c].same_as == c) {
      fc[nfc] = c;
      hdr[1 + nfc++] = r->cfgs[c].dlabel;
    }
  char al[20];
  snprintf(al, sizeof al, "%.*s", (int)(1 + nfc), "lrrrrrrrrrrrrrrrrr");
  fp8_doc_table_begin(d, (int)(1 + nfc), hdr, al);
  size_t *held = calloc(2 * nfc + 1, sizeof *held);
  char (*b)[96] = malloc((nfc + 1) * sizeof *b);
  const char **cells = malloc((nfc + 1) * sizeof *cells);
  for (size_t l = 0; held && b && cells && l < f->nlayers; l++) {
    cells[0] = f->layers[l];
    for (size_t k = 0; k < nfc; k++) {
      int v = rep_fp4_layer_verdict(r, fc[k], l, NULL);
      held[k] += v == V_HOLDS;
      held[nfc + k] += v == V_CLOSE;
      verdict_cell(r, fc[k], l, b[k], sizeof b[k]);
      cells[1 + k] = b[k];
    }
    fp8_doc_table_row(d, cells);
  }
  char list[2048];
  size_t at = 0;
  for (size_t k = 0; held && k < nfc && at < sizeof list; k++) {
    int n = snprintf(list + at, sizeof list - at, "%s- %s: %zu of %zu layers hold", k ? "\n" : "",
                     r->cfgs[fc[k]].dlabel, held[k], f->nlayers);
    if (n > 0) at += (size_t)n;
    if (held[nfc + k] && at < sizeof list) {
      n = snprintf(list + at, sizeof list - at, ", %zu too close to call", held[nfc + k]);
      if (n > 0) at += (size_t)n;
    }
    if (at < sizeof list) list[at++] = '.', list[at] = 0;
  }
  if (at) fp8_doc_markdown(d, list);
  free(held);
  free(b);
  free(cells);
  if (f->paired && r->run.gemm_sampled)
    fp8_doc_markdownf(d, "Of the %zu per-step ratios of the FP4 configurations, %zu straddled %g "
                         "on the sample and were computed again exactly: %.3g multiply-adds more, "
                         "%.2g%% of what `gemm_error = exact` would spend on these GEMMs (the FP4 "
                         "configurations', the reference's and the double reference).",
                      f->nratio, f->nrecomp, R, f->madd_extra,
                      f->madd_exact > 0 ? 100.0 * f->madd_extra / f->madd_exact : 0.0);
  if (f->advised >= 0 && f->fallback >= 0) {
    char tie[512] = "";
    if (f->fallback_tie >= 0)
      snprintf(tie, sizeof tie, "; tied within the interval with %s, whose point estimate is "
               "lower: the criterion's reference is kept", r->cfgs[f->fallback_tie].dlabel);
    fp8_doc_markdownf(d,
                      "As one experiment: advice_fp4.ini next to this report gives the layers that "
                      "hold under %s%s that configuration, and the others (those that fail, and "
                      "those too close to call) %s (the FP8 configuration of the lowest GEMM "
                      "error in this run%s); `fp8lab run advice_fp4.ini` replays it.",
                      r->cfgs[f->advised].dlabel,
                      f->advised_tie ? " (tied in held layers with another NVFP4 configuration: "
                                       "the first of the experiment)" : "",
                      r->cfgs[f->fallback].dlabel, tie);
  }
}
