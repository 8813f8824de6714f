/* test_csv_rows.c: the writers of src/results (and the number text of src/io/outfile.h) against
 * printf: fp8_csv_put_num's text for random and edge values, steps.csv and summary.csv rows, and
 * stream.csv's rows of one tensor at once, each against the row written by hand with fprintf. */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "outfile.h"
#include "results.h"
#include "stream_internal.h" /* fp8_stream_csv_put_rows, fp8_stream_row */
#include "tu_dir.h"

/* The row writers build lines in a buffer: a steps.csv row with a tensor name longer than the
 * buffer, and numbers of every kind (inf, nan, integers, %.9g), written twice so that the
 * memo of formatted numbers answers the second time, against the text fprintf writes. */
/* fp8_num_text against printf's "%.9g" (plus nan / inf / -inf), byte for byte: random bit
 * patterns over the whole double range (subnormals included), float32 values widened (what
 * amaxes and scales are), decimal ties at the ninth digit (exact in binary: printf rounds them
 * to even), values next to powers of ten and to 999999999.5 times one, and the extremes. */
static uint64_t nt_state = 0x243F6A8885A308D3ull;
static uint64_t nt_rnd(void) {
  nt_state ^= nt_state >> 12;
  nt_state ^= nt_state << 25;
  nt_state ^= nt_state >> 27;
  return nt_state * 0x2545F4914F6CDD1Dull;
}

static void nt_check(double v, long *n) {
  char a[FP8_NUM_TEXT_MAX], b[64];
  int k = fp8_num_text(v, a);
  if (isnan(v)) snprintf(b, sizeof b, "nan");
  else if (isinf(v)) snprintf(b, sizeof b, v > 0 ? "inf" : "-inf");
  else snprintf(b, sizeof b, "%.9g", v);
  ck_assert_msg(strcmp(a, b) == 0 && k == (int)strlen(b), "%a: got %s, printf %s", v, a, b);
  (*n)++;
}

START_TEST(test_num_text_matches_printf) {
  long n = 0;
  for (int i = 0; i < 200000; i++) {
    uint64_t u = nt_rnd();
    double v;
    memcpy(&v, &u, sizeof v);
    nt_check(v, &n);
    uint32_t fu = (uint32_t)(u >> 32);
    float f;
    memcpy(&f, &fu, sizeof f);
    nt_check((double)f, &n);
    /* a nine-digit tie: (m + 0.5) 10^j for j >= 0 is exact when it fits 53 bits */
    int64_t m = 100000000 + (int64_t)(u % 900000000);
    nt_check(((double)m + 0.5) * (double)(1 << (i % 8)) / (double)(1 << (i % 8)), &n);
    nt_check((double)(m * 10 + 5) * (i % 2 ? 1.0 : -1.0), &n);
    nt_check((double)m * 1e-30 + (double)(u % 7), &n);
  }
  for (int e = -330; e <= 310; e++) {
    double p = pow(10.0, e);
    nt_check(p, &n);
    nt_check(nextafter(p, 0), &n);
    nt_check(nextafter(p, INFINITY), &n);
    nt_check(9.999999995 * p, &n);
    nt_check(nextafter(9.999999995 * p, 0), &n);
    nt_check(nextafter(9.999999995 * p, INFINITY), &n);
    nt_check(-1.23456789e-5 * p, &n);
  }
  const double edge[] = {0.0, -0.0, 1.0, -1.0, 0.5, 1e-4, 9.99999999e-5, 1e-5, 123456789.0,
                         999999999.0, 999999999.5, 1e9, 4.9406564584124654e-324, DBL_MIN,
                         DBL_MAX, -DBL_MAX, 448.0, 57344.0, 3.4028234663852886e38, 0.1, NAN,
                         -NAN, INFINITY, -INFINITY};
  for (size_t i = 0; i < sizeof edge / sizeof *edge; i++) nt_check(edge[i], &n);
  printf("num_text: %ld values match printf\n", n);
}
END_TEST

START_TEST(test_results_rows_by_printf) {
  static char name[3001];
  memset(name, 'a', 3000);
  name[3000] = 0;
  fp8_config cf = {.kind = FP8_KIND_DELAYED, .format = FP8_SEL_HYBRID, .history_len = 16,
                   .margin = -1, .amax_compute = FP8_AMAX_MOST_RECENT};
  strcpy(cf.label, "d");
  fp8_stats st = {.n = 12345678901LL, .nonfinite = 3, .zeros = 0, .overflow = 17,
                  .underflow = 9, .subnormal = 1, .sum_sq_err = 0.1, .sum_sq = 1e30};
  float amaxes[3] = {1832.12f, INFINITY, 448.0f};
  for (int k = 0; k < 6; k++) {
    fp8_steps_row r = {.tensor = k % 2 ? name : "x.input", .role = FP8_ROLE_INPUT, .step = 1234,
                       .config = &cf, .format = FP8_E4M3, .amax = amaxes[k % 3],
                       .scale = k == 2 ? NAN : 0.244140625f, .stats = &st};
    char *got = NULL, *want = NULL;
    size_t gl = 0, wl = 0;
    FILE *g = open_memstream(&got, &gl), *w = open_memstream(&want, &wl);
    fp8_steps_csv_put_row(g, &r);
    fprintf(w, "%s,input,1234,d,delayed,e4m3,16,-1,most_recent,", r.tensor);
    fp8_csv_put_num(w, r.amax);
    fputc(',', w);
    fp8_csv_put_num(w, r.scale);
    fprintf(w, ",12345678901,3,0,17,9,1,");
    fp8_csv_put_num(w, fp8_stats_mse(&st));
    fputc(',', w);
    fp8_csv_put_num(w, fp8_stats_snr_db(&st));
    /* clipped 0; overshoot log2(amax scale / 448); cosine 0: sum xhat^2 is 0 and sum x^2 is
     * not; warm-up 0 */
    fputs(",,,,,,0,", w);
    fp8_csv_put_num(w, log2((double)r.amax * (double)r.scale / 448.0));
    fputs(",0,0,,\n", w);
    fclose(g);
    fclose(w);
    ck_assert_msg(gl == wl && memcmp(got, want, gl) == 0, "row %d:\n got  %.200s\n want %.200s", k,
                  got, want);
    free(got);
    free(want);
  }
}
END_TEST

/* stream.csv's rows of one tensor at once (fp8_stream_csv_put_rows) against each row
 * written by hand with fprintf and fp8_csv_put_num: 20 configurations (more distinct scales
 * than the writer remembers, two sharing a scale, three left out, both formats, the longest
 * label), names short and too long for the fast path, te_scale given and not, amax 0, inf and
 * finite. */
START_TEST(test_stream_rows_by_printf) {
  enum { NC = 20 };
  static char name[3001];
  memset(name, 'n', 3000);
  name[3000] = 0;
  static fp8_config cf[NC];
  const fp8_config *cfp[NC]; /* the writer's configurations, as the stream's layout holds them */
  fp8_format fmt[NC];
  float sc[NC];
  unsigned char want[NC];
  for (int c = 0; c < NC; c++) {
    cf[c] = (fp8_config){.kind = FP8_KIND_DELAYED, .format = FP8_SEL_HYBRID,
                         .history_len = 1 << (c % 11), .margin = c % 3 - 1,
                         .amax_compute = c % 2 ? FP8_AMAX_MOST_RECENT : FP8_AMAX_MAX};
    if (c == 7) { /* the longest label */
      memset(cf[c].label, 'L', sizeof cf[c].label - 1);
      cf[c].label[sizeof cf[c].label - 1] = 0;
    } else {
      snprintf(cf[c].label, sizeof cf[c].label, "cfg%d", c);
    }
    fmt[c] = c % 4 == 3 ? FP8_E5M2 : FP8_E4M3;
    sc[c] = c == 12 || c == 15 ? sc[4] : ldexpf(1.0f + c / 32.0f, c - 8); /* 15: e5m2 */
    want[c] = c % 9 != 5;
    cfp[c] = &cf[c];
  }
  const float amaxes[3] = {3.25f, 0.0f, INFINITY};
  fp8_stream_csv_texts *texts = fp8_stream_csv_texts_new();
  ck_assert_ptr_nonnull(texts);
  for (int k = 0; k < 6; k++) {
    fp8_stream_row base = {.tensor = k == 5 ? name : "layers.0.fc1.input", .role = FP8_ROLE_INPUT,
                           .step = 70000 + k, .snapshot = k % 2, .amax = amaxes[k % 3],
                           .warmup = k == 1, .micro = k == 4 ? 3 : 0,
                           .te_scale = k % 2 ? 0.0f : 0.125f * (k + 1)};
    char *got = NULL, *exp = NULL;
    size_t gl = 0, el = 0;
    FILE *g = open_memstream(&got, &gl), *w = open_memstream(&exp, &el);
    /* with a table of the configurations' columns (filled by the first case), and without */
    fp8_stream_csv_put_rows(g, &base, cfp, fmt, sc, want, NC, k % 2 ? NULL : texts);
    for (int c = 0; c < NC; c++) {
      if (!want[c]) continue;
      fprintf(w, "%s,input,%lld,%s,%s,%lld,%d,%s,%d,", base.tensor, (long long)base.step,
              cf[c].label, fmt[c] == FP8_E5M2 ? "e5m2" : "e4m3", (long long)cf[c].history_len,
              cf[c].margin, c % 2 ? "most_recent" : "max", base.snapshot);
      fp8_csv_put_num(w, base.amax);
      fputc(',', w);
      fp8_csv_put_num(w, sc[c]);
      fputc(',', w);
      double mx = fmt[c] == FP8_E5M2 ? 57344.0 : 448.0;
      fp8_csv_put_num(w, base.amax > 0 ? log2((double)base.amax * (double)sc[c] / mx) : -INFINITY);
      fprintf(w, ",%d,%lld,", base.warmup, (long long)base.micro);
      if (base.te_scale > 0) fp8_csv_put_num(w, base.te_scale);
      fputc('\n', w);
    }
    fclose(g);
    fclose(w);
    ck_assert_msg(gl == el && memcmp(got, exp, gl) == 0, "case %d (%zu vs %zu bytes):\n got  %.300s\n want %.300s",
                  k, gl, el, got, exp);
    free(got);
    free(exp);
  }
  fp8_stream_csv_texts_free(texts);
}
END_TEST

TU_MAIN("csv_rows", "cli", setup, teardown, 120, test_stream_rows_by_printf,
        test_results_rows_by_printf, test_num_text_matches_printf)
