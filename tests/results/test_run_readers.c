/* test_run_readers.c: the readers of a run's own files (src/results: histograms.csv, run.json,
 * stream.csv, gemm.csv), through `fp8lab report` and called directly: a good run reads, every
 * edited file is refused with one exact line, and the readers close what they open. */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "report_internal.h" /* rep_add_gemm, called directly */
#include "run_json.h"        /* the readers of the run's files, called directly */
#include "tables.h"
#include "testutil.h"
#include "tu_dir.h"
#include "tu_traces.h"

/* Replaces the first old in g_dir/rel by new. */
static void edit(const char *rel, const char *old, const char *new) {
  size_t n;
  char *t = tu_read_file(path_in(rel), &n);
  ck_assert_ptr_nonnull(t);
  char *at = strstr(t, old);
  ck_assert_msg(at != NULL, "'%s' not in %s", old, rel);
  size_t a = (size_t)(at - t), lo = strlen(old), ln = strlen(new);
  char *u = malloc(n - lo + ln + 1);
  memcpy(u, t, a);
  memcpy(u + a, new, ln);
  memcpy(u + a + ln, at + lo, n - a - lo + 1);
  put_file(rel, u, n - lo + ln);
  free(u);
  free(t);
}

static void append(const char *rel, const char *text) {
  size_t n;
  char *t = tu_read_file(path_in(rel), &n);
  ck_assert_ptr_nonnull(t);
  size_t m = strlen(text);
  t = realloc(t, n + m + 1);
  memcpy(t + n, text, m + 1);
  put_file(rel, t, n + m);
  free(t);
}

/* Sets field col (0-based) of line (1-based) of the CSV file g_dir/rel to value. */
static void set_field(const char *rel, int line, int col, const char *value) {
  size_t n;
  char *t = tu_read_file(path_in(rel), &n);
  ck_assert_ptr_nonnull(t);
  char *p = t;
  for (int l = 1; l < line; l++) {
    p = strchr(p, '\n');
    ck_assert_ptr_nonnull(p);
    p++;
  }
  for (int c = 0; c < col; c++) {
    p = strpbrk(p, ",\n");
    ck_assert(p && *p == ',');
    p++;
  }
  size_t a = (size_t)(p - t), lo = strcspn(p, ",\n"), ln = strlen(value);
  char *u = malloc(n - lo + ln + 1);
  memcpy(u, t, a);
  memcpy(u + a, value, ln);
  memcpy(u + a + ln, p + lo, n - a - lo + 1);
  put_file(rel, u, n - lo + ln);
  free(u);
  free(t);
}

/* The line number of the first line of g_dir/rel that starts with prefix. */
static int line_of(const char *rel, const char *prefix) {
  char *t = tu_read_file(path_in(rel), NULL);
  ck_assert_ptr_nonnull(t);
  int line = 1;
  for (char *p = t; *p; line++) {
    if (strncmp(p, prefix, strlen(prefix)) == 0) break;
    p = strchr(p, '\n');
    ck_assert_ptr_nonnull(p);
    p++;
  }
  free(t);
  return line;
}

/* The report's run is good as written; every reader of it refuses what is not. */
START_TEST(report_reads_good_run) {
  run_two();
  char *out = NULL;
  int rc = run_cli(&out, "report out --quiet");
  ck_assert_msg(rc == 0, "%s", out);
  free(out);
}
END_TEST

START_TEST(report_histograms_negative) {
  run_two();
  set_field("out/histograms.csv", 2, 3, "-5");
  expect_report("out/histograms.csv:2: column count: expected a count (integer >= 0), found '-5'");
}
END_TEST

START_TEST(report_histograms_garbage) {
  run_two();
  append("out/histograms.csv", "garbage\x1b[2J line\n");
  char want[256];
  snprintf(want, sizeof want, "out/histograms.csv:%d: expected 4 fields, found 1",
           line_of("out/histograms.csv", "garbage"));
  expect_report(want);
}
END_TEST

START_TEST(report_histograms_fields) {
  run_two();
  set_field("out/histograms.csv", 2, 2, "-200");
  expect_report("out/histograms.csv:2: column log2_bin: expected an integer in -149..127, found "
                "'-200'");
  set_field("out/histograms.csv", 2, 2, "-6");
  set_field("out/histograms.csv", 2, 1, "x");
  expect_report("out/histograms.csv:2: column step: expected a step number >= 0, found 'x'");
  set_field("out/histograms.csv", 2, 1, "0");
  set_field("out/histograms.csv", 2, 0, "../a.fc.input");
  expect_report("out/histograms.csv:2: column tensor: ../a.fc.input: name has a '..' path "
                "segment");
  set_field("out/histograms.csv", 2, 0, "a.fc.input");
  set_field("out/histograms.csv", 2, 3, "2x");
  expect_report("out/histograms.csv:2: column count: expected a count (integer >= 0), found '2x'");
  edit("out/histograms.csv", "\n", "\n\n");
  expect_report("out/histograms.csv:2: empty line");
  put_text("out/histograms.csv", "tensor,step,bin,count\n");
  expect_report("out/histograms.csv:1: not a histograms.csv header (expected "
                "'tensor,step,log2_bin,count')");
}
END_TEST

START_TEST(report_run_json_missing) {
  run_two();
  ck_assert_int_eq(unlink(path_in("out/run.json")), 0);
  expect_report("out/run.json: cannot open: No such file or directory (fp8lab report reads a "
                "folder that fp8lab run wrote)");
}
END_TEST

START_TEST(report_run_json_corrupt) {
  run_two();
  put_text("out/run.json", "{\n  \"fp8lab_version\": \"0.1.0\",\n  \"experiment\": {\n");
  expect_report("out/run.json:4: not JSON: string or '}' expected near end of file");
  put_text("out/run.json", "[1, 2]\n");
  expect_report("out/run.json: expected a JSON object");
  put_text("out/run.json", "{\"experiment\": {\"name\": \"../x\", \"overflow_budget\": 1e-5, "
                           "\"step_budget\": 0.01}, \"trace\": {\"path\": \"tr\"}}\n");
  expect_report("out/run.json: experiment.name '../x' is not a file name (a name without '/', "
                "not . or .., printable UTF-8 of 1 to 200 bytes)");
  put_text("out/run.json", "{\"experiment\": {\"name\": \"e\", \"overflow_budget\": \"x\", "
                           "\"step_budget\": 0.01}, \"trace\": {\"path\": \"tr\"}}\n");
  expect_report("out/run.json: experiment.overflow_budget: expected a number in 0..1");
  put_text("out/run.json", "{\"experiment\": {\"name\": \"e\", \"overflow_budget\": 1e-5, "
                           "\"step_budget\": 0.01}}\n");
  expect_report("out/run.json: trace: expected an object");
}
END_TEST

/* trace.warm_history (issue 42): always written, a boolean; a count of left-out steps an
 * integer >= 0; a run.json without the key (an older run, cold) is read. */
START_TEST(report_run_json_warm_history) {
  run_two();
  char *t = tu_read_file(path_in("out/run.json"), NULL);
  ck_assert_ptr_nonnull(strstr(t, "\"warm_history\": true"));
  free(t);
  edit("out/run.json", "\"warm_history\": true", "\"warm_history\": \"yes\"");
  expect_report("out/run.json: trace.warm_history: expected true or false");
  edit("out/run.json", "\"warm_history\": \"yes\"", "\"steps_before\": -3");
  expect_report("out/run.json: trace.steps_before: expected an integer >= 0");
  edit("out/run.json", "\"steps_before\": -3", "\"steps_skipped\": 0");
  char *out = NULL;
  int rc = run_cli(&out, "report out --quiet");
  ck_assert_msg(rc == 0, "%s", out);
  free(out);
}
END_TEST

/* run.json's lists of tensors left out (issue 17): the run writes them (empty here: both
 * tensors have rows), the report accepts them, and a malformed one is refused at its key. */
START_TEST(report_run_json_left_out) {
  run_two();
  char *j = tu_read_file(path_in("out/run.json"), NULL);
  ck_assert_ptr_nonnull(j);
  ck_assert_msg(strstr(j, "\"tensors_never_ran\": [],\n  \"tensors_without_snapshot\": [],\n"
                          "  \"tensors_without_recipe\": [],\n") != NULL, "%s", j);
  free(j);
  edit("out/run.json", "\"tensors_never_ran\": []", "\"tensors_never_ran\": [\"z.out_proj.input\"]");
  char *out = NULL;
  int rc = run_cli(&out, "report out --quiet");
  ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
  free(out);
  char *md = tu_read_file(path_in("out/report.md"), NULL);
  ck_assert_ptr_nonnull(md);
  ck_assert_msg(strstr(md, "**Left out of these numbers: 1 tensor** of the replay, without rows in "
                           "steps.csv and summary.csv. Never ran (no snapshot, amax 0 at every "
                           "step of the replay: the module was not called), 1: `z.out_proj.input` "
                           "(run.json: tensors_never_ran).\n") != NULL, "%s", md);
  free(md);
  /* the report wrote run.json again (its outputs), with jansson's indentation */
  edit("out/run.json", "[\n    \"z.out_proj.input\"\n  ]", "\"z.out_proj.input\"");
  expect_report("out/run.json: tensors_never_ran: expected an array of tensor names");
  edit("out/run.json", "\"tensors_never_ran\": \"z.out_proj.input\"", "\"tensors_never_ran\": []");
  edit("out/run.json", "\"tensors_without_snapshot\": []", "\"tensors_without_snapshot\": [\"a\", 7]");
  expect_report("out/run.json: tensors_without_snapshot[1]: expected a tensor name: not a string");
  edit("out/run.json", "[\"a\", 7]", "[\"a\", \"../b\"]");
  expect_report("out/run.json: tensors_without_snapshot[1]: expected a tensor name: name has a "
                "'..' path segment");
  edit("out/run.json", "[\"a\", \"../b\"]", "[]");
  edit("out/run.json", "\"tensors_without_recipe\": []", "\"tensors_without_recipe\": [\"a\\u001b[2J\"]");
  expect_report("out/run.json: tensors_without_recipe[0]: expected a tensor name: name holds the "
                "control character \\x1b at byte 1");
}
END_TEST

START_TEST(report_stream_strict) {
  run_two();
  int line = line_of("out/stream.csv", "a.fc.input,input,1,");
  edit("out/stream.csv", "a.fc.input,input,1,d,e4m3,1,", "a.fc.input,input,1,d,e4m3,1x,");
  char want[256];
  snprintf(want, sizeof want, "out/stream.csv:%d: this step's rows differ from the first step's",
           line);
  expect_report(want);
  edit("out/stream.csv", "a.fc.input,input,1,d,e4m3,1x,", "a.fc.input,inptu,1,d,e4m3,1,");
  expect_report(want);
  edit("out/stream.csv", "a.fc.input,inptu,1,d,e4m3,1,", "a.fc.input,input,1,d,e4m3,1,");
  edit("out/stream.csv", "a.fc.input,input,0,", "a.fc.input,inptu,0,");
  expect_report("out/stream.csv:2: bad configuration columns");
}
END_TEST

START_TEST(report_gemm_strict) {
  run_two();
  put_text("out/gemm.csv", "layer,gemm,step,recipe,kind,history_len,margin,amax_compute,"
                           "rel_error\na.fc,fprop,0,d,delayed,1x,0,max,0.01\n");
  expect_report("out/gemm.csv:2: column history_len: expected an integer in 1..1048576 for "
                "delayed scaling, found '1x'");
}
END_TEST

/* The open file descriptors of this process (/proc/self/fd, less the directory's own). */
static int open_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  ck_assert_ptr_nonnull(d);
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
  closedir(d);
  return n - 1;
}

/* The report's readers (src/results: tables.h, run_json.h) close what they open, on success
 * and on every error (gemm.csv's reader never closed its file: libFuzzer's fuzz_gemm_csv ran
 * out of descriptors after about a thousand inputs). Called in this process, 50 times each, so
 * that one lost descriptor per call shows. */
START_TEST(report_readers_close_files) {
  run_two();
  put_text("out/gemm.csv", "layer,gemm,step,recipe,kind,history_len,margin,amax_compute,"
                           "rel_error\na.fc,fprop,0,d,delayed,1,0,max,0.01\n");
  rep_t *r = calloc(1, sizeof *r);
  ck_assert_ptr_nonnull(r);
  char outdir[4096], gemm[4200], hist[4200];
  snprintf(outdir, sizeof outdir, "%s", path_in("out"));
  snprintf(gemm, sizeof gemm, "%s/gemm.csv", outdir);
  snprintf(hist, sizeof hist, "%s/histograms.csv", outdir);
  r->outdir = outdir;
  char err[1024];
  int before = open_fds(), have = 0;
  for (int i = 0; i < 50; i++) {
    err[0] = 0;
    fp8_gemm_table g;
    ck_assert_int_eq(fp8_gemm_csv_load(gemm, &g, err, sizeof err), FP8_OK);
    ck_assert_int_eq(g.n, 1);
    ck_assert_str_eq(g.rows[0].key.recipe, "d");
    /* no configurations loaded: the row names none */
    ck_assert_int_eq(rep_add_gemm(r, &g, "gemm.csv", &have, err, sizeof err), FP8_EFORMAT);
    ck_assert_str_eq(err, "gemm.csv:2: recipe d (delayed) is not a configuration of steps.csv");
    fp8_gemm_csv_free(&g);
    fp8_hist_table h;
    ck_assert_int_eq(fp8_histograms_csv_load(hist, &h, err, sizeof err), FP8_OK);
    fp8_histograms_csv_free(&h);
    fp8_run_record rec;
    ck_assert_int_eq(fp8_run_json_read(outdir, &rec, err, sizeof err), FP8_OK);
    fp8_run_json_free(&rec);
  }
  ck_assert_int_eq(open_fds(), before);
  put_text("out/gemm.csv", "layer,gemm\n");
  for (int i = 0; i < 50; i++) {
    fp8_gemm_table g;
    ck_assert_int_eq(fp8_gemm_csv_load(gemm, &g, err, sizeof err), FP8_EFORMAT);
  }
  ck_assert_int_eq(open_fds(), before);
  free(r);
}
END_TEST

/* The readers of histograms.csv and gemm.csv called directly: a bad line is one message naming
 * the file and the line, and the table stays empty (safe to free). */
START_TEST(result_readers_bad_line) {
  char path[4200], err[1024];
  snprintf(path, sizeof path, "%s", path_in("h.csv"));
  put_text("h.csv", "tensor,step,log2_bin,count\na.fc.input,0,3,7\na.fc.input,0,3\n");
  fp8_hist_table h;
  ck_assert_int_eq(fp8_histograms_csv_load(path, &h, err, sizeof err), FP8_EFORMAT);
  ck_assert_ptr_nonnull(strstr(err, "h.csv:3: expected 4 fields, found 3"));
  ck_assert_int_eq(h.n, 0);
  fp8_histograms_csv_free(&h);
  put_text("h.csv", "tensor,step,log2_bin,count\na.fc.input,0,3,7\na.fc.input,0,3,2\n");
  ck_assert_int_eq(fp8_histograms_csv_load(path, &h, err, sizeof err), FP8_OK);
  double counts[FP8_LOG2_HIST_BINS];
  int lo = 0, n = 0;
  ck_assert_int_eq(fp8_histograms_csv_get(&h, "a.fc.input", 0, counts, &lo, &n), FP8_OK);
  ck_assert_int_eq(lo, 3);
  ck_assert_int_eq(n, 1);
  ck_assert(counts[0] == 2.0); /* a bin listed twice: its last count */
  ck_assert_int_eq(fp8_histograms_csv_get(&h, "a.fc.input", 1, counts, &lo, &n), FP8_EFORMAT);
  fp8_histograms_csv_free(&h);
  snprintf(path, sizeof path, "%s", path_in("g.csv"));
  put_text("g.csv", "layer,gemm,step,recipe,kind,history_len,margin,amax_compute,rel_error\n"
                    "a.fc,fprop,0,c,current,,,,0.5\na.fc,fprop,0,c,current,1,,,0.5\n");
  fp8_gemm_table g;
  ck_assert_int_eq(fp8_gemm_csv_load(path, &g, err, sizeof err), FP8_EFORMAT);
  ck_assert_ptr_nonnull(strstr(err, "g.csv:3: column history_len: expected an empty field for "
                                    "non-delayed kinds, found '1'"));
  ck_assert_int_eq(g.n, 0);
  fp8_gemm_csv_free(&g);
}
END_TEST

/* gemm.csv's FP4 ratio columns (issue 42): a 15-column file of the exact mode (empty interval)
 * and of the sampled mode read field for field, an empty ratio on a non-FP4 row; each bad
 * field refused with its column. */
START_TEST(result_gemm_ratio_columns) {
  char path[4200], err[1024];
  snprintf(path, sizeof path, "%s", path_in("g.csv"));
  const char *hdr = "layer,gemm,step,recipe,kind,history_len,margin,amax_compute,rel_error,"
                    "rel_error_lo,rel_error_hi,ratio,ratio_lo,ratio_hi,ratio_mode\n";
  char text[1024];
  snprintf(text, sizeof text, "%sa.fc,fprop,0,c,current,,,,0.5,,,,,,\n"
                              "a.fc,fprop,0,nv,nvfp4,,,,2,,,4,4,4,exact\n", hdr);
  put_text("g.csv", text);
  fp8_gemm_table g;
  ck_assert_int_eq(fp8_gemm_csv_load(path, &g, err, sizeof err), FP8_OK);
  ck_assert_int_eq(g.n, 2);
  ck_assert(isnan(g.rows[0].rel_lo) && isnan(g.rows[0].ratio));
  ck_assert_int_eq(g.rows[0].ratio_mode, FP8_GEMM_RATIO_NONE);
  ck_assert(isnan(g.rows[1].rel_lo) && g.rows[1].ratio == 4.0 && g.rows[1].ratio_hi == 4.0);
  ck_assert_int_eq(g.rows[1].ratio_mode, FP8_GEMM_RATIO_EXACT);
  fp8_gemm_csv_free(&g);
  snprintf(text, sizeof text, "%sa.fc,wgrad,2,nv,nvfp4,,,,2,1.5,2.5,3.9,3.5,4.25,sampled\n"
                              "a.fc,wgrad,4,nv,nvfp4,,,,2,1.5,2.5,4.1,4.1,4.1,recomputed\n", hdr);
  put_text("g.csv", text);
  ck_assert_int_eq(fp8_gemm_csv_load(path, &g, err, sizeof err), FP8_OK);
  ck_assert(g.rows[0].rel_lo == 1.5 && g.rows[0].ratio_lo == 3.5 && g.rows[0].ratio_hi == 4.25);
  ck_assert_int_eq(g.rows[0].ratio_mode, FP8_GEMM_RATIO_SAMPLED);
  ck_assert_int_eq(g.rows[1].ratio_mode, FP8_GEMM_RATIO_RECOMPUTED);
  fp8_gemm_csv_free(&g);
  static const struct {
    const char *row, *msg;
  } bad[] = {
      {"a.fc,fprop,0,nv,nvfp4,,,,2,,,4,4,4,guessed", "column ratio_mode: expected sampled, exact, "
                                                     "recomputed or empty, found 'guessed'"},
      {"a.fc,fprop,0,nv,nvfp4,,,,2,,,4,4.5,5,sampled", "column ratio_lo: expected a number >= 0 "
                                                       "and <= ratio"},
      {"a.fc,fprop,0,nv,nvfp4,,,,2,,,4,3,3.5,sampled", "column ratio_hi: expected a number >= "
                                                       "ratio"},
      {"a.fc,fprop,0,c,current,,,,2,,,4,,,", "column ratio: expected empty, as ratio_mode is"},
  };
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    snprintf(text, sizeof text, "%s%s\n", hdr, bad[k].row);
    put_text("g.csv", text);
    ck_assert_int_eq(fp8_gemm_csv_load(path, &g, err, sizeof err), FP8_EFORMAT);
    ck_assert_msg(strstr(err, "g.csv:2: ") && strstr(err, bad[k].msg), "%s: %s", bad[k].row, err);
    ck_assert_int_eq(g.n, 0);
    fp8_gemm_csv_free(&g);
  }
}
END_TEST

/* gemm.csv's kind "mixed" (issue 45: a GEMM of a mixed recipe whose operands' sections differ):
 * read with empty delayed columns; refused with a delayed column, and in steps.csv, which has
 * no such kind. */
START_TEST(result_gemm_mixed_kind) {
  char path[4200], err[1024];
  snprintf(path, sizeof path, "%s", path_in("g.csv"));
  put_text("g.csv", "layer,gemm,step,recipe,kind,history_len,margin,amax_compute,rel_error\n"
                    "a.fc,fprop,0,hyb,mxfp8,,,,0.03\na.fc,dgrad,0,hyb,mixed,,,,0.13\n");
  fp8_gemm_table g;
  ck_assert_int_eq(fp8_gemm_csv_load(path, &g, err, sizeof err), FP8_OK);
  ck_assert_int_eq(g.n, 2);
  ck_assert_int_eq(g.rows[0].key.kind, FP8_KIND_MXFP8);
  ck_assert_int_eq(g.rows[1].key.kind, FP8_KIND_MIXED);
  ck_assert_str_eq(g.rows[1].key.recipe, "hyb");
  ck_assert(g.rows[1].rel_error == 0.13);
  fp8_gemm_csv_free(&g);
  put_text("g.csv", "layer,gemm,step,recipe,kind,history_len,margin,amax_compute,rel_error\n"
                    "a.fc,dgrad,0,hyb,mixed,16,,,0.13\n");
  ck_assert_int_eq(fp8_gemm_csv_load(path, &g, err, sizeof err), FP8_EFORMAT);
  ck_assert_ptr_nonnull(strstr(err, "g.csv:2: column history_len: expected an empty field for "
                                    "non-delayed kinds, found '16'"));
  fp8_gemm_csv_free(&g);
  fp8_config_key k;
  const char *what = NULL;
  ck_assert_int_eq(fp8_config_key_parse("hyb", "mixed", "e4m3", "", "", "", &k, &what), 1);
  ck_assert_str_eq(what, "delayed, current, mxfp8, block, rowwise, bf16, nvfp4 or mxfp4");
}
END_TEST

TU_MAIN("run_readers", "strict", setup, teardown, 0, report_reads_good_run,
        report_run_json_warm_history,
        report_histograms_negative, report_histograms_garbage, report_histograms_fields,
        report_run_json_missing, report_run_json_left_out, report_run_json_corrupt,
        report_stream_strict, report_gemm_strict, report_readers_close_files,
        result_readers_bad_line, result_gemm_ratio_columns, result_gemm_mixed_kind)
