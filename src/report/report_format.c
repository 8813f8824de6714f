/* report_format.c: how the report's tables print rates and SNRs (report_internal.h); a leaf,
 * shared by report_text.c and report_findings.c. */
#include "report_internal.h"

#include <math.h>
#include <stdio.h>

const char *rep_fmt_rate(double v, char *buf, size_t n) {
  if (isnan(v)) snprintf(buf, n, "n/a");
  else if (v == 0) snprintf(buf, n, "0");
  else snprintf(buf, n, "%.3g", v);
  return buf;
}

const char *rep_fmt_db(double v, char *buf, size_t n) {
  if (isnan(v)) snprintf(buf, n, "n/a");
  else if (v >= FP8_ANALYSIS_SNR_CAP_DB) snprintf(buf, n, "exact");
  else snprintf(buf, n, "%.1f", v);
  return buf;
}
