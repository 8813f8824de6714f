/* report_cost.c: the replay report's "Cost per step (model)": what delayed scaling's
 * bookkeeping would cost per training step of the traced model, from the timeline model
 * (src/timeline/timeline.h) on run.json's model_shape, every mode on the built-in H200. A short
 * table; `fp8lab timeline TRACE` measures it on a GPU and docs/overlap.md reads it. */
#include <stdio.h>

#include "report_internal.h"

void rep_add_cost(const rep_t *r, fp8_doc *d) {
  if (!r->run.has_model_shape) return;
  fp8_tl_device dev;
  fp8_tl_device_builtin("h200", &dev);
  fp8_doc_heading(d, 2, "Cost per step (model)");
  fp8_doc_markdownf(d,
                    "What each way of scaling would cost per training step of the traced model's "
                    "%zu Linear layers (%lld transformer layer%s, amax reduction over %lld "
                    "rank%s, history %d), as fp8lab's timeline model estimates it for an H200: "
                    "**an estimate, not a measurement**. *Bookkeeping exposed* is the time the "
                    "GPU's compute stream spends in delayed scaling's amax reduction and history "
                    "update, or waiting for them, or (current) in the extra amax pass and scale "
                    "before every cast. `fp8lab timeline <trace>` measures it on a GPU; "
                    "docs/overlap.md explains the modes.",
                    r->run.model_shape.nlinears, (long long)r->run.model_shape.layers,
                    r->run.model_shape.layers == 1 ? "" : "s", (long long)r->run.model_shape.world,
                    r->run.model_shape.world == 1 ? "" : "s", (int)r->run.model_shape.history_len);
  static const char *const hdr[] = {"mode", "step (ms)", "bookkeeping exposed (us)", "share",
                                    "memory traffic (GB)", "kernel launches", "all-reduces"};
  fp8_doc_table_begin(d, 7, hdr, "lrrrrrr");
  for (int m = 0; m < FP8_TL_NMODES; m++) {
    fp8_tl_plan p;
    fp8_tl_totals t;
    char err[256], c[6][48];
    if (fp8_tl_plan_build(&r->run.model_shape, (fp8_tl_mode)m, &p, err, sizeof err) != FP8_OK)
      return;
    int rc = fp8_tl_model_run(&p, &r->run.model_shape, &dev, NULL, &t, err, sizeof err);
    fp8_tl_plan_free(&p);
    if (rc) return;
    snprintf(c[0], sizeof c[0], "%.3f", t.step_us / 1e3);
    snprintf(c[1], sizeof c[1], "%.1f", t.exposed_us);
    snprintf(c[2], sizeof c[2], "%.2f%%", 100.0 * t.exposed_us / t.step_us);
    snprintf(c[3], sizeof c[3], "%.3f", t.bytes / 1e9);
    snprintf(c[4], sizeof c[4], "%lld", (long long)t.launches);
    snprintf(c[5], sizeof c[5], "%lld", (long long)t.allreduces);
    const char *cells[] = {fp8_tl_mode_name((fp8_tl_mode)m), c[0], c[1], c[2], c[3], c[4], c[5]};
    fp8_doc_table_row(d, cells);
  }
}
