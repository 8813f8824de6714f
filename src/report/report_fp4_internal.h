/* report_fp4_internal.h: what report_fp4.c (the verdict per layer, advice_fp4.ini) and
 * report_fp4_text.c (the FP4 section's text and tables) share (not public). */
#ifndef FP8LAB_REPORT_REPORT_FP4_INTERNAL_H
#define FP8LAB_REPORT_REPORT_FP4_INTERNAL_H

#include "report_internal.h"

/* One GEMM of one layer under one configuration over the snapshot steps: the lower medians
 * (the ceil(n/2)-th smallest) of the per-step ratios and of their intervals' ends, and the
 * verdict they give (issue 42). */
typedef struct {
  double m, lo, hi;  /* NaN: no step with a ratio */
  size_t n, nrec;    /* steps with a ratio; of them recomputed exactly */
  int verdict;       /* V_HOLDS, V_FAILS, V_CLOSE (too close to call), V_NONE (no ratio) */
} gstat;

enum { V_NONE, V_HOLDS, V_FAILS, V_CLOSE };

struct rep_fp4 {
  size_t nlayers;
  char **layers; /* strcmp order */
  gstat *st;     /* [ncfg][nlayers][3] */
  ptrdiff_t ref; /* the FP8 configuration of the criterion; -1: none */
  int paired;    /* the ratios are gemm.csv's paired ones (else from the rows: an older run) */
  ptrdiff_t fallback, advised; /* the FP8 configuration for the other layers, the NVFP4 one */
  int advised_tie;             /* the advised one is tied (held layers) with another */
  ptrdiff_t fallback_tie;      /* a configuration the fallback is tied with (-1: none) */
  size_t nratio, nrecomp;      /* FP4 ratio rows; of them recomputed exactly */
  double madd_exact, madd_extra; /* the exact mode's multiply-adds of those GEMMs; the extra */
};

/* Configuration c's statistics of layer l, [3] (fprop, dgrad, wgrad). */
gstat *rep_fp4_st(const rep_t *r, size_t c, size_t l);
/* An FP4 configuration, or a mixed recipe with FP4 tensors. */
int rep_fp4_has(const rep_t *r, size_t c);
/* Layer l's verdict under c (V_*): fails when a GEMM fails, holds when all three hold, too
 * close to call otherwise, V_NONE when a GEMM has no ratio; a mixed recipe on its GEMMs with an
 * FP4 operand only (V_NONE without one); *worst (non-NULL): the GEMM of the largest median
 * ratio. */
int rep_fp4_layer_verdict(const rep_t *r, size_t c, size_t l, int *worst);

#endif
