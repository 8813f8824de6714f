/* test_report.c: `fp8lab run` + `fp8lab report` end to end on a small trace with one known
 * event: the PNGs read back with libpng (size, tEXt metadata), the notebook validates with
 * nbformat, the report names the event, and a report can be regenerated from the results. */
#include <check.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "png_io.h"
#include "testutil.h"
#include "trace.h"
#include "tu_dir.h"
#include "util.h"

/* 1 in a ThreadSanitizer build (gcc's macro; clang's feature test) */
#if defined(__SANITIZE_THREAD__)
#define TU_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TU_TSAN 1
#endif
#endif
#ifndef TU_TSAN
#define TU_TSAN 0
#endif

/* 12 snapshot steps of two tensors: a.fc.input (F32, 256 values, amax 1 except 20 at step 6
 * and 1.5 at step 9)
 * and a.fc.grad_output (steady, tiny). Delayed scaling with a long history overflows at step 6
 * and stays stale afterwards; current scaling does not. */
static void write_trace(void) {
  char p[4096];
  snprintf(p, sizeof p, "%s/trace", g_dir);
  mkdir(p, 0777);
  float x[256], g[256];
  char err[FP8_ERRLEN];
  for (int s = 0; s < 12; s++) {
    for (int i = 0; i < 256; i++) {
      x[i] = (float)((i % 17) - 8) / 8.0f * (i % 5 == 0 ? 1.0f : 0.25f);
      g[i] = (float)((i % 13) - 6) * 1e-4f;
    }
    if (s == 6)
      for (int i = 0; i < 16; i++) x[i * 16] = 20.0f;
    /* a mild excursion at step 9: 1.5 x the usual amax clips under history 1, margin 0 only
     * (1.5 * 448 = 672 > 464; margin 1: 336; history 1024 still holds the spike), so that the
     * history x margin maps have cells that differ */
    if (s == 9) x[0] = 1.5f;
    fp8_tensor_out t[2] = {{"a.fc.grad_output", FP8_DTYPE_F32, 2, {16, 16}, g},
                           {"a.fc.input", FP8_DTYPE_F32, 2, {16, 16}, x}};
    snprintf(p, sizeof p, "%s/trace/step_%d.safetensors", g_dir, s);
    ck_assert_int_eq(fp8_safetensors_write(p, t, 2, NULL, err, sizeof err), FP8_OK);
  }
  snprintf(p, sizeof p, "%s/exp.ini", g_dir);
  const char *ini = "[trace]\npath = trace\n"
                    "[recipe.delayed]\nkind = delayed\nhistory_len = 1, 1024\nmargin = 0, 1\n"
                    "[recipe.jit]\nkind = current\n"
                    "[analysis]\noverflow_budget = 1e-3\n"
                    "[output]\ndir = out\n";
  ck_assert_int_eq(tu_write_file(p, ini, strlen(ini)), 0);
}

static int exists(const char *rel) {
  struct stat sb;
  return stat(path_in(rel), &sb) == 0;
}

START_TEST(test_run_writes_report) {
  write_trace();
  char *out;
  int rc = run_cli(&out, "run exp.ini --quiet");
  ck_assert_msg(rc == 0, "rc %d: %s", rc, out);
  free(out);
  ck_assert(exists("out/analysis.csv"));
  ck_assert(exists("out/recommendations.csv"));
  ck_assert(exists("out/report.md"));
  ck_assert(exists("out/notebooks_export/exp.ipynb"));

  /* every plot: 1200x800 or larger, with the provenance chunks */
  const char *plots[] = {"amax_a.fc.input.png",        "dynamic_range.png",          "snr.png",
                         "heatmap_overshoot_input.png", "heatmap_clipped_input.png",  "heatmap_clipsteps_input.png",
                         "recipes_overflow.png",        "recipes_clip_steps.png",     "recipes_snr_p5.png"};
  for (size_t i = 0; i < sizeof plots / sizeof plots[0]; i++) {
    char p[4096], err[256];
    snprintf(p, sizeof p, "%s/out/plots/%s", g_dir, plots[i]);
    fp8_png_info info;
    ck_assert_msg(fp8_png_read_info(p, &info, err, sizeof err) == FP8_OK, "%s: %s", plots[i], err);
    ck_assert_msg(info.width >= 1200 && info.height >= 800, "%s: %dx%d", plots[i], info.width, info.height);
    ck_assert_str_eq(fp8_png_info_get(&info, "fp8lab-version"), FP8LAB_VERSION);
    ck_assert_str_eq(fp8_png_info_get(&info, "experiment"), "exp");
    fp8_png_info_free(&info);
  }
  {
    char p[4096], err[256];
    snprintf(p, sizeof p, "%s/out/plots/dynamic_range.png", g_dir);
    fp8_png_info info;
    ck_assert_int_eq(fp8_png_read_info(p, &info, err, sizeof err), FP8_OK);
    ck_assert_str_eq(fp8_png_info_get(&info, "tensor"), "a.fc.input");
    ck_assert_str_eq(fp8_png_info_get(&info, "step"), "6");
    ck_assert_str_eq(fp8_png_info_get(&info, "configuration"), "delayed L=1024 m=0 max");
    fp8_png_info_free(&info);
  }

  /* the report names the event and the stale steps after it */
  char p[4096];
  snprintf(p, sizeof p, "%s/out/report.md", g_dir);
  char *md = tu_read_file(p, NULL);
  ck_assert_ptr_nonnull(md);
  ck_assert_msg(strstr(md, "**a.fc.input at step 6** reached amax 20") != NULL, "%s", md);
  ck_assert_msg(strstr(md, "16 of 256 values clipped") != NULL, "%s", md);
  ck_assert_msg(strstr(md, "for 5 of the 5 following snapshot steps") != NULL, "%s", md);
  ck_assert(strstr(md, "![amax timeline of a.fc.input](plots/amax_a.fc.input.png)") != NULL);
  /* its caption says which delayed curves it draws: the reference's margin and amax_compute,
   * one per history length (issue 25 point 8: "each delayed configuration", with margin 1's
   * configurations not drawn) */
  ck_assert_msg(strstr(md, "delayed scaling at margin 0 and amax_compute max could represent at "
                           "that step, one curve per history length") != NULL, "%s", md);
  /* the value budget's heatmap outlines a cell when every tensor of the role is within the
   * budget on its own (the cell shows the role's pooled rate) */
  ck_assert_msg(strstr(md, "outlined cells are those where every input tensor is within the "
                           "value budget (0.001, the line on the colour bar) on its own") != NULL,
                "%s", md);
  /* no layer triplet (no weight), so no gemm.csv and no GEMM section (it showed a table of
   * zero errors, "0% of the estimate", until 2026-12-04) */
  ck_assert(!exists("out/gemm.csv"));
  ck_assert_msg(strstr(md, "## GEMM error") == NULL && strstr(md, "(#gemm-error)") == NULL &&
                    strstr(md, "Taking the GEMM error into account") == NULL,
                "%s", md);
  free(md);

  /* the notebook validates (Debian's python3-nbformat) */
  rc = tu_run("/usr/bin/python3 -c 'import nbformat' 2>/dev/null", NULL);
  if (rc == 0) {
    char cmd[4600];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import nbformat,sys; nb=nbformat.read(sys.argv[1], as_version=4); "
             "nbformat.validate(nb); print(sum(1 for c in nb.cells for a in c.get('attachments', {}).values() "
             "if 'image/png' in a))\" '%s/out/notebooks_export/exp.ipynb'",
             g_dir);
    rc = tu_run(cmd, &out);
    ck_assert_msg(rc == 0, "nbformat: %s", out);
    ck_assert_msg(atoi(out) >= 7, "images embedded: %s", out);
    free(out);
  } else {
    printf("note: /usr/bin/python3 cannot import nbformat: notebook validation not run\n");
  }
}
END_TEST

START_TEST(test_report_regenerates) {
  write_trace();
  char *out;
  ck_assert_int_eq(run_cli(&out, "run exp.ini --quiet --no-report"), 0);
  free(out);
  ck_assert(exists("out/steps.csv"));
  ck_assert(!exists("out/report.md"));
  int rc = run_cli(&out, "report out --budget 0");
  ck_assert_msg(rc == 0, "%s", out);
  ck_assert(strstr(out, "report:") != NULL);
  free(out);
  ck_assert(exists("out/report.md"));
  /* budget 0: the input tensor overflows under every delayed configuration of this run */
  char p[4096];
  snprintf(p, sizeof p, "%s/out/recommendations.csv", g_dir);
  char *csv = tu_read_file(p, NULL);
  ck_assert_msg(strstr(csv, "tensor,a.fc.input,jit,current,") != NULL, "%s", csv);
  free(csv);
  /* the step plots read stream.csv (every step); without it they fall back to the snapshot rows */
  snprintf(p, sizeof p, "%s/out/report.md", g_dir);
  char *md = tu_read_file(p, NULL);
  ck_assert_msg(strstr(md, "a.fc.input at every step: the tensor's amax") != NULL, "%s", md);
  ck_assert_msg(strstr(md, "input tensor at every step (stream.csv)") != NULL, "%s", md);
  free(md);
  ck_assert(!exists("out/plots/heatmap_snr_input.png") && !exists("out/plots/recipes_snr.png"));
  snprintf(p, sizeof p, "%s/out/stream.csv", g_dir);
  ck_assert_int_eq(unlink(p), 0);
  /* run.json lists stream.csv: without it the report is an error (exit 2, naming the file),
   * not a quieter report from the snapshot steps */
  ck_assert_int_eq(run_cli(&out, "report out --quiet"), 2);
  ck_assert_msg(strstr(out, "out/stream.csv: missing, but run.json lists it") != NULL, "%s", out);
  free(out);
  /* a run whose run.json does not list it (an fp8lab before stream.csv existed): the step
   * plots fall back to the snapshot rows */
  snprintf(p, sizeof p, "%s/out/run.json", g_dir);
  char *js = tu_read_file(p, NULL);
  char *hit = strstr(js, "\"stream.csv\",");
  ck_assert_msg(hit != NULL, "%s", js);
  memmove(hit, hit + strlen("\"stream.csv\","), strlen(hit + strlen("\"stream.csv\",")) + 1);
  FILE *jf = fopen(p, "w");
  ck_assert(jf && fputs(js, jf) >= 0 && fclose(jf) == 0);
  free(js);
  snprintf(p, sizeof p, "%s/out/plots/heatmap_overshoot_input.png", g_dir);
  ck_assert_int_eq(unlink(p), 0);
  ck_assert_int_eq(run_cli(&out, "report out --quiet"), 0);
  free(out);
  ck_assert(exists("out/plots/heatmap_overshoot_input.png"));
  snprintf(p, sizeof p, "%s/out/report.md", g_dir);
  md = tu_read_file(p, NULL);
  ck_assert_msg(strstr(md, "a.fc.input at snapshot steps: the tensor's amax") != NULL, "%s", md);
  ck_assert_msg(strstr(md, "input tensor at the snapshot steps") != NULL, "%s", md);
  free(md);
  /* errors: no such dir, a bad budget */
  ck_assert_int_eq(run_cli(&out, "report nowhere"), 2);
  ck_assert(strstr(out, "nowhere") != NULL);
  free(out);
  ck_assert_int_eq(run_cli(&out, "report out --budget 2"), 2);
  free(out);
}
END_TEST

/* "Held against TransformerEngine" (issue 17): stream.csv given TE's scale, per (step, micro,
 * tensor) the scale configuration delayed L=1 m=0 replayed, on every configuration's rows,
 * except two rows that differ: a.fc.input at step 7 (2x: relative difference 1) and
 * a.fc.grad_output at step 3 (1.25x); the first mismatch in (step, micro, tensor) order is
 * a.fc.grad_output at step 3. Without any te_scale the section is absent. */
START_TEST(test_report_te_scale) {
  write_trace();
  char *out;
  ck_assert_int_eq(run_cli(&out, "run exp.ini --quiet --no-report"), 0);
  free(out);
  char p[4096];
  snprintf(p, sizeof p, "%s/out/report.md", g_dir);
  ck_assert_int_eq(run_cli(&out, "report out --quiet"), 0);
  free(out);
  char *md = tu_read_file(p, NULL);
  ck_assert_ptr_null(strstr(md, "Held against TransformerEngine"));
  free(md);
  snprintf(p, sizeof p, "%s/out/stream.csv", g_dir);
  char *text = tu_read_file(p, NULL);
  /* pass 1: the L=1 m=0 scale of each (step, tensor); pass 2: written as te_scale on all rows */
  char te[12][2][32];
  memset(te, 0, sizeof te);
  size_t cap = strlen(text) * 2 + 64, o = 0;
  char *w = malloc(cap);
  for (int pass = 0; pass < 2; pass++) {
    char *copy = strdup(text), *save = NULL;
    int first = 1;
    for (char *ln = strtok_r(copy, "\n", &save); ln; ln = strtok_r(NULL, "\n", &save)) {
      if (first) {
        first = 0;
        if (pass) o += (size_t)snprintf(w + o, cap - o, "%s\n", ln);
        continue;
      }
      char *f[16], *q = ln;
      int nf = 0;
      f[nf++] = q;
      for (; *q; q++)
        if (*q == ',') *q = '\0', f[nf++] = q + 1;
      ck_assert_int_eq(nf, 15);
      int step = atoi(f[2]), k = strcmp(f[0], "a.fc.input") == 0;
      if (!pass) {
        if (!strcmp(f[3], "delayed") && !strcmp(f[5], "1") && !strcmp(f[6], "0")) {
          double sc = atof(f[10]);
          if (step == 7 && k) sc *= 2.0;
          if (step == 3 && !k) sc *= 1.25;
          snprintf(te[step][k], sizeof te[step][k], "%.9g", (float)sc);
        }
        continue;
      }
      for (int j = 0; j < 14; j++) o += (size_t)snprintf(w + o, cap - o, "%s,", f[j]);
      o += (size_t)snprintf(w + o, cap - o, "%s\n", te[step][k]);
    }
    free(copy);
  }
  ck_assert_int_eq(tu_write_file(p, w, o), 0);
  free(w);
  free(text);
  ck_assert_int_eq(run_cli(&out, "report out --quiet"), 0);
  free(out);
  snprintf(p, sizeof p, "%s/out/report.md", g_dir);
  md = tu_read_file(p, NULL);
  ck_assert_ptr_nonnull(strstr(md, "## Held against TransformerEngine"));
  /* 12 steps x 2 tensors per configuration */
  ck_assert_msg(strstr(md, "| delayed L=1 m=0 max | 24 | 2 | 1 | a.fc.grad_output step 3 micro 0 |"),
                "%s", strstr(md, "## Held against"));
  free(md);
}
END_TEST

/* Every output file of the report, read whole, in a fixed order: "name:" then its bytes (PNGs
 * hold NULs: *len says how many). */
static char *report_files(size_t *len) {
  const char *files[] = {"analysis.csv", "recommendations.csv", "report.md", "notebooks_export/exp.ipynb",
                         "plots/amax_a.fc.input.png", "plots/dynamic_range.png", "plots/snr.png",
                         "plots/heatmap_overshoot_input.png", "plots/heatmap_clipped_input.png",
                         "plots/heatmap_clipsteps_input.png", "plots/recipes_overflow.png",
                         "plots/recipes_clip_steps.png", "plots/recipes_snr_p5.png"};
  size_t n = 0;
  char *all = NULL;
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    char p[4096];
    size_t flen = 0;
    snprintf(p, sizeof p, "%s/out/%s", g_dir, files[i]);
    char *b = tu_read_file(p, &flen);
    ck_assert_msg(b != NULL, "%s missing", files[i]);
    size_t name = strlen(files[i]);
    all = realloc(all, n + name + 1 + flen);
    ck_assert_ptr_nonnull(all);
    memcpy(all + n, files[i], name);
    all[n + name] = ':';
    memcpy(all + n + name + 1, b, flen);
    n += name + 1 + flen;
    free(b);
  }
  *len = n;
  return all;
}

/* The plots drawn by 1, 2 or 3 processes (--jobs): the same bytes in every file; a chart that a
 * child process fails to write fails the report with the chart's name, as in one process. */
START_TEST(test_report_jobs) {
  write_trace();
  char *out;
  ck_assert_int_eq(run_cli(&out, "run exp.ini --quiet --no-report"), 0);
  free(out);
  ck_assert_int_eq(run_cli(&out, "report out --quiet --jobs 1"), 0);
  free(out);
  size_t n1, n2, n3;
  char *one = report_files(&n1);
  ck_assert_int_eq(run_cli(&out, "report out --quiet --jobs 2"), 0);
  free(out);
  char *two = report_files(&n2);
  ck_assert_int_eq(run_cli(&out, "report out --quiet --jobs 3"), 0);
  free(out);
  char *three = report_files(&n3);
  ck_assert_uint_gt(n1, 100000); /* the PNGs are in there */
  ck_assert_msg(n1 == n2 && memcmp(one, two, n1) == 0, "--jobs 2 differs from --jobs 1");
  ck_assert_msg(n1 == n3 && memcmp(one, three, n1) == 0, "--jobs 3 differs from --jobs 1");
  free(one);
  free(two);
  free(three);

  /* dynamic_range.png is the second chart drawn: with --jobs 2 the child's. A directory in its
   * place (with a file in it) makes its rename fail. */
  char p[4096];
  snprintf(p, sizeof p, "%s/out/plots/dynamic_range.png", g_dir);
  ck_assert_int_eq(unlink(p), 0);
  ck_assert_int_eq(mkdir(p, 0777), 0);
  snprintf(p, sizeof p, "%s/out/plots/dynamic_range.png/keep", g_dir);
  ck_assert_int_eq(tu_write_file(p, "x", 1), 0);
  snprintf(p, sizeof p, "%s/out/plots/snr.png", g_dir);
  ck_assert_int_eq(unlink(p), 0);
  for (int jobs = 1; jobs <= 2; jobs++) {
    int rc = run_cli(&out, "report out --quiet --jobs %d", jobs);
    ck_assert_msg(rc != 0, "--jobs %d: rc 0: %s", jobs, out);
    /* the chart's own failure (not a later step's, such as the notebook reading the image) */
    ck_assert_msg(strstr(out, "out/plots/dynamic_range.png: write failed") != NULL, "--jobs %d: %s", jobs, out);
    free(out);
  }
  /* the parent's next chart (snr.png, the third) was still drawn with --jobs 2. Not under
   * ThreadSanitizer (.ci/run's FP8LAB_TSAN build): its runtime keeps a thread of its own in
   * every process, so the report never forks (it forks only a single-threaded process) and
   * draws every chart itself, stopping at the failed one. */
#if !TU_TSAN
  ck_assert(exists("out/plots/snr.png"));
#endif
  /* bad --jobs */
  ck_assert_int_eq(run_cli(&out, "report out --jobs 0"), 2);
  ck_assert(strstr(out, "--jobs") != NULL);
  free(out);
  ck_assert_int_eq(run_cli(&out, "report out --jobs 9"), 2);
  free(out);
}
END_TEST

/* The files under out/, sorted, one per line, relative to it (the trace is not the run's). */
static char *files_under(const char *rel) {
  char cmd[4600];
  snprintf(cmd, sizeof cmd, "cd '%s/%s' && find . -type f | sed 's|^\\./||' | LC_ALL=C sort", g_dir, rel);
  char *out;
  ck_assert_int_eq(tu_run(cmd, &out), 0);
  return out;
}

/* run.json's outputs, sorted, one per line; *n the number of entries (duplicates counted). */
static char *listed_outputs(const char *rel, size_t *n) {
  char p[4096];
  snprintf(p, sizeof p, "%s/%s/run.json", g_dir, rel);
  json_error_t jerr;
  json_t *j = json_load_file(p, 0, &jerr);
  ck_assert_msg(j != NULL, "%s: %s", p, jerr.text);
  json_t *o = json_object_get(j, "outputs");
  ck_assert(json_is_array(o));
  *n = json_array_size(o);
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s/listed.txt", g_dir);
  FILE *fp = fopen(tmp, "w");
  for (size_t i = 0; i < *n; i++) fprintf(fp, "%s\n", json_string_value(json_array_get(o, i)));
  fclose(fp);
  json_decref(j);
  char cmd[4600];
  snprintf(cmd, sizeof cmd, "LC_ALL=C sort '%s'", tmp);
  char *out;
  ck_assert_int_eq(tu_run(cmd, &out), 0);
  unlink(tmp);
  return out;
}

static int count_nl(const char *s) {
  int n = 0;
  for (; *s; s++) n += *s == '\n';
  return n;
}

/* run.json's outputs name every file the run wrote, the report's included (report.md, the
 * notebook, every plot), each once, and nothing else; a report written again (other budget)
 * keeps the list true. */
START_TEST(test_outputs_listed) {
  write_trace();
  char *out;
  ck_assert_int_eq(run_cli(&out, "run exp.ini --quiet"), 0);
  free(out);
  size_t n;
  char *files = files_under("out"), *listed = listed_outputs("out", &n);
  ck_assert_str_eq(listed, files);
  ck_assert_int_eq((int)n, count_nl(files));
  ck_assert_ptr_nonnull(strstr(files, "report.md\n"));
  ck_assert_ptr_nonnull(strstr(files, "notebooks_export/exp.ipynb\n"));
  ck_assert_ptr_nonnull(strstr(files, "plots/dynamic_range.png\n"));
  free(files);
  free(listed);
  ck_assert_int_eq(run_cli(&out, "report out --quiet --budget 0"), 0);
  free(out);
  files = files_under("out");
  listed = listed_outputs("out", &n);
  ck_assert_str_eq(listed, files);
  ck_assert_int_eq((int)n, count_nl(files));
  free(files);
  free(listed);
  /* without the report: the run's own files */
  ck_assert_int_eq(run_cli(&out, "run exp.ini --quiet --no-report --out bare"), 0);
  free(out);
  listed = listed_outputs("bare", &n);
  ck_assert_str_eq(listed, "histograms.csv\nrun.json\nsteps.csv\nstream.csv\nsummary.csv\n");
  free(listed);
}
END_TEST

/* Adds names to run.json's outputs of out/ (as an earlier fp8lab, or a hand, might have). */
static void list_in_run_json(const char *const *names, size_t n) {
  char p[4096];
  snprintf(p, sizeof p, "%s/out/run.json", g_dir);
  json_error_t jerr;
  json_t *j = json_load_file(p, 0, &jerr);
  ck_assert_ptr_nonnull(j);
  json_t *o = json_object_get(j, "outputs");
  for (size_t i = 0; i < n; i++) json_array_append_new(o, json_string(names[i]));
  ck_assert_int_eq(json_dump_file(j, p, JSON_INDENT(2) | JSON_PRESERVE_ORDER), 0);
  json_decref(j);
}

/* --force removes the earlier run's files that the new run does not write again (its plots, its
 * notebook under another experiment name, the report files of a --no-report run), so the folder
 * holds exactly the files run.json lists, and never a file fp8lab did not write: a user's PNG in
 * plots/, a notebook of theirs, other files, and names a run.json may list outside the folder or
 * of another kind. A report written again removes the earlier report's plots it did not draw. */
START_TEST(test_force_removes_stale_outputs) {
  write_trace();
  char *out;
  ck_assert_int_eq(run_cli(&out, "run exp.ini --quiet"), 0);
  free(out);
  put_text("out/plots/mine.png", "not fp8lab's");
  put_text("out/notebooks_export/mine.ipynb", "{}");
  put_text("out/notes.txt", "keep");
  put_text("outside.txt", "keep");
  put_text("out/plots/other.txt", "keep");
  const char *odd[] = {"../outside.txt", "notes.txt", "plots/other.txt", "plots/../notes.txt",
                       "/etc/hostname", ".hidden.csv"};
  put_text("out/.hidden.csv", "keep");
  list_in_run_json(odd, sizeof odd / sizeof *odd);
  char *before = files_under("out");
  /* another experiment (another notebook name) with fewer plots: no current scaling */
  put_text("small.ini", "[trace]\npath = trace\n[recipe.delayed]\nkind = delayed\nhistory_len = 4\n"
                        "[output]\ndir = out\n");
  ck_assert_int_eq(run_cli(&out, "run small.ini --quiet --force"), 0);
  free(out);
  size_t n;
  char *listed = listed_outputs("out", &n), *files = files_under("out");
  /* on disk: what run.json lists, plus the files that are not fp8lab's */
  char want[16384];
  snprintf(want, sizeof want, "%s.hidden.csv\nnotebooks_export/mine.ipynb\nnotes.txt\nplots/mine.png\n"
           "plots/other.txt\n", listed);
  char cmd[20000];
  snprintf(cmd, sizeof cmd, "printf '%%s' '%s' | LC_ALL=C sort", want);
  char *sorted;
  ck_assert_int_eq(tu_run(cmd, &sorted), 0);
  ck_assert_str_eq(files, sorted);
  ck_assert_ptr_null(strstr(files, "notebooks_export/exp.ipynb"));
  ck_assert_ptr_nonnull(strstr(files, "notebooks_export/small.ipynb"));
  ck_assert_ptr_nonnull(strstr(before, "plots/heatmap_clipsteps_input.png"));
  ck_assert_ptr_null(strstr(files, "plots/heatmap_clipsteps_input.png")); /* one history_len, one margin */
  ck_assert(exists("outside.txt"));
  free(sorted);
  free(listed);
  free(files);
  free(before);
  /* --no-report: the earlier report's files go, the user's stay */
  ck_assert_int_eq(run_cli(&out, "run small.ini --quiet --force --no-report"), 0);
  free(out);
  files = files_under("out");
  ck_assert_str_eq(files, ".hidden.csv\nhistograms.csv\nnotebooks_export/mine.ipynb\nnotes.txt\n"
                          "plots/mine.png\nplots/other.txt\nrun.json\nsteps.csv\nstream.csv\nsummary.csv\n");
  free(files);
  /* a report written again: a plot of the earlier report that it does not draw goes */
  ck_assert_int_eq(run_cli(&out, "report out --quiet"), 0);
  free(out);
  put_text("out/plots/amax_gone.png", "drawn by an earlier report");
  const char *gone[] = {"plots/amax_gone.png"};
  list_in_run_json(gone, 1);
  ck_assert_int_eq(run_cli(&out, "report out --quiet"), 0);
  free(out);
  ck_assert(!exists("out/plots/amax_gone.png"));
  ck_assert(exists("out/plots/mine.png"));
  files = files_under("out");
  listed = listed_outputs("out", &n);
  ck_assert_ptr_null(strstr(listed, "amax_gone"));
  free(files);
  free(listed);
}
END_TEST

/* Found writing the fuzz corpus (issue 16): a run whose reference configuration is a block
 * kind (mxfp8, block, rowwise: no one scale per tensor, the scale field of its rows is empty)
 * failed its report with exit 2 ("dynamic_range.png: window 0: expected finite lo < hi, got
 * nan, nan"). The report must come out, without the dynamic-range plot (there is no window to
 * draw), both when the block kind is the only configuration and when it stays the reference
 * beside a delayed one (margin 1 loses the reference choice to margin 0). */
START_TEST(test_report_block_reference) {
  write_trace();
  const char *inis[] = {"[trace]\npath = trace\n[recipe.mx]\nkind = mxfp8\n[output]\ndir = out\n",
                        "[trace]\npath = trace\n[recipe.rw]\nkind = rowwise\n"
                        "[recipe.d]\nkind = delayed\nhistory_len = 16\nmargin = 1\n"
                        "[output]\ndir = out\n"};
  for (size_t i = 0; i < 2; i++) {
    char p[4096], *out;
    snprintf(p, sizeof p, "%s/blk.ini", g_dir);
    ck_assert_int_eq(tu_write_file(p, inis[i], strlen(inis[i])), 0);
    int rc = run_cli(&out, "run blk.ini --quiet --force");
    ck_assert_msg(rc == 0, "experiment %zu: rc %d: %s", i, rc, out);
    free(out);
    ck_assert(exists("out/report.md"));
    ck_assert(!exists("out/plots/dynamic_range.png"));
  }
}
END_TEST

/* Writes the experiment `ini` as <g_dir>/<name>, runs it (exit 0 required) and returns the
 * file `rel` of its outputs (malloc'ed). */
static char *run_and_read(const char *name, const char *ini, const char *rel) {
  char p[4096], *out;
  snprintf(p, sizeof p, "%s/%s", g_dir, name);
  ck_assert_int_eq(tu_write_file(p, ini, strlen(ini)), 0);
  int rc = run_cli(&out, "run %s --quiet --force", name);
  ck_assert_msg(rc == 0, "%s: rc %d: %s", name, rc, out);
  free(out);
  snprintf(p, sizeof p, "%s/%s", g_dir, rel);
  char *text = tu_read_file(p, NULL);
  ck_assert_msg(text != NULL, "%s: no %s", name, rel);
  return text;
}

/* Issue 25 point 4: a worst event whose cast is more accurate than current scaling's. 256
 * values of 13/14 (x * 448 = 416, an E4M3 value) and one of 1.0 at steps 0-5; at step 6 that one
 * is 1.04. Delayed scaling keeps the scale 448 / 1 = 448: 1.04 * 448 = 465.9 clips (> 464) to
 * 448, an error of 0.04, and the other values are exact: SNR 10 log10((255 (13/14)^2 + 1.04^2) /
 * 0.04^2) = 51.4 dB. Current scaling's 448 / 1.04 puts 13/14 at 400, the midpoint of 384 and
 * 416: an error of 16 / 430.8 = 0.037 on 255 values, SNR 28.0 dB. So the sentence may not say
 * that the SNR "fell to" 51.4 dB. */
START_TEST(test_report_worst_event_not_better) {
  char p[4096], err[FP8_ERRLEN];
  snprintf(p, sizeof p, "%s/wtrace", g_dir);
  mkdir(p, 0777);
  float x[256];
  for (int s = 0; s < 7; s++) {
    for (int i = 0; i < 256; i++) x[i] = 13.0f / 14.0f;
    x[0] = s == 6 ? 1.04f : 1.0f;
    fp8_tensor_out t[1] = {{"a.fc.input", FP8_DTYPE_F32, 2, {16, 16}, x}};
    snprintf(p, sizeof p, "%s/wtrace/step_%d.safetensors", g_dir, s);
    ck_assert_int_eq(fp8_safetensors_write(p, t, 1, NULL, err, sizeof err), FP8_OK);
  }
  const char *ini = "[trace]\npath = wtrace\n"
                    "[recipe.delayed]\nkind = delayed\nhistory_len = 1024\n"
                    "[recipe.jit]\nkind = current\n[output]\ndir = wout\n";
  char *rep = run_and_read("w.ini", ini, "wout/report.md");
  double sig = 255.0 * (13.0 / 14.0) * (13.0 / 14.0) + 1.04 * 1.04;
  char want[512];
  /* the worst event over every cast (issue 42 point 4): the one clipped step, its snapshot's
   * one value worded as such */
  snprintf(want, sizeof want, "**a.fc.input at step 6** reached amax 1.04 while the delayed "
           "scale, taken from earlier steps, could represent only 1 (0.06 binades, 1.04x, too "
           "small a range): one value of 256 clipped, yet the SNR of the cast did not suffer: "
           "%.1f dB, current scaling %.1f dB", 10 * log10(sig / (0.04 * 0.04)),
           10 * log10(sig / (255.0 * (16.0 / (448.0 / 1.04)) * (16.0 / (448.0 / 1.04)))));
  ck_assert_msg(strstr(rep, want) != NULL, "want \"%s\" in\n%.900s", want, strstr(rep, "The worst"));
  ck_assert_ptr_null(strstr(rep, "fell to"));
  free(rep);
}
END_TEST

/* Issue 42 point 4: a one-value event under 1 dB is never a fall. Values (i + 0.5) / 256 for
 * i < 255 and one of 1.0 at steps 0-5, 1.06 at step 6: the delayed scale 448 / 1 clips that one
 * (1.06 * 448 = 474.9 > 464) and current scaling (448 / 1.06) is a little more accurate: the
 * SNRs 31.599 and 31.757 dB (numpy + ml_dtypes' float8_e4m3fn, RN of x * s in float32, the
 * error in double), a loss of 0.16 dB, worded as one value clipped at 31.6 against 31.8 dB. */
START_TEST(test_report_one_value_no_fall) {
  char p[4096], err[FP8_ERRLEN];
  snprintf(p, sizeof p, "%s/otrace", g_dir);
  mkdir(p, 0777);
  float x[256];
  for (int s = 0; s < 7; s++) {
    for (int i = 0; i < 255; i++) x[i] = ((float)i + 0.5f) / 256.0f;
    x[255] = s == 6 ? 1.06f : 1.0f;
    fp8_tensor_out t[1] = {{"a.fc.input", FP8_DTYPE_F32, 2, {16, 16}, x}};
    snprintf(p, sizeof p, "%s/otrace/step_%d.safetensors", g_dir, s);
    ck_assert_int_eq(fp8_safetensors_write(p, t, 1, NULL, err, sizeof err), FP8_OK);
  }
  const char *ini = "[trace]\npath = otrace\n"
                    "[recipe.delayed]\nkind = delayed\nhistory_len = 1024\n"
                    "[recipe.jit]\nkind = current\n[output]\ndir = oout\n";
  char *rep = run_and_read("o.ini", ini, "oout/report.md");
  const char *want = "**a.fc.input at step 6** reached amax 1.06 while the delayed scale, taken "
                     "from earlier steps, could represent only 1 (0.08 binades, 1.06x, too small "
                     "a range): one value of 256 clipped, SNR 31.6 dB against 31.8 dB under "
                     "current scaling.";
  ck_assert_msg(strstr(rep, want) != NULL, "want \"%s\" in\n%.900s", want, strstr(rep, "The worst"));
  ck_assert_ptr_null(strstr(rep, "fell to"));
  free(rep);
}
END_TEST

/* Issue 25 point 5: the cost section states the shape it models, takes the production tokens
 * per step from [analysis] cost_tokens (scaling the captured batch's 64), shows no all-reduce
 * at one rank, and says when the step is launch-bound. synth:llm has 16 Linears in 4 layers. */
START_TEST(test_report_cost_shape) {
  const char *ini = "[trace]\npath = synth:llm\nsynth_steps = 3\n"
                    "[recipe.d]\nkind = delayed\nhistory_len = 16\n[recipe.c]\nkind = current\n"
                    "[analysis]\ncost_tokens = 4096\n[output]\ndir = cout\n";
  for (int k = 0; k < 2; k++) {
    /* k = 0: with cost_tokens; k = 1: without (the captured batch, and the hint to set it) */
    char text[1024];
    snprintf(text, sizeof text, "%s", ini);
    if (k == 1) {
      char *a = strstr(text, "[analysis]");
      const size_t cut = strlen("[analysis]\ncost_tokens = 4096\n");
      memmove(a, a + cut, strlen(a + cut) + 1);
    }
    char *rep = run_and_read("c.ini", text, "cout/report.md");
    const char *want = k == 0 ? "The shape it models: 16 Linears (4 transformer layers), 4096 "
                                "tokens per step (`[analysis] cost_tokens`; the trace captured "
                                "64), one rank (no all-reduce: TransformerEngine skips it at world "
                                "size 1), history 1024."
                              : "The shape it models: 16 Linears (4 transformer layers), 64 "
                                "tokens per step (the captured batch), one rank (no all-reduce: "
                                "TransformerEngine skips it at world size 1), history 1024.";
    ck_assert_msg(strstr(rep, want) != NULL, "want \"%s\" in\n%s", want,
                  strstr(rep, "## Cost per step"));
    /* every mode's all-reduce count (the table's last column) is 0 */
    const char *modes[] = {"| delayed-inline |", "| delayed-overlap |", "| delayed-none |",
                           "| current |"};
    for (int m = 0; m < 4; m++) {
      const char *row = strstr(rep, modes[m]);
      ck_assert_ptr_nonnull(row);
      const char *eol = strchr(row, '\n');
      ck_assert_ptr_nonnull(eol);
      ck_assert_msg(eol - row > 5 && strncmp(eol - 5, "| 0 |", 5) == 0, "row %.*s",
                    (int)(eol - row), row);
    }
    /* 64 tokens: every GEMM of these Linears (128 x 512 and back) is at the launch latency */
    ck_assert_ptr_nonnull(strstr(rep, "**These shares are those of a launch-bound step**: at "));
    ck_assert_int_eq(strstr(rep, "Set `[analysis] cost_tokens` to the production run's") != NULL,
                     k == 1);
    free(rep);
    char p[4096];
    snprintf(p, sizeof p, "%s/cout/advice.ini", g_dir);
    char *adv = tu_read_file(p, NULL);
    ck_assert_ptr_nonnull(adv);
    ck_assert_int_eq(strstr(adv, "\ncost_tokens = 4096\n") != NULL, k == 0);
    free(adv);
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("report");
  TCase *tc = tcase_create("report");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_run_writes_report);
  tcase_add_test(tc, test_report_regenerates);
  tcase_add_test(tc, test_report_te_scale);
  tcase_add_test(tc, test_report_jobs);
  tcase_add_test(tc, test_outputs_listed);
  tcase_add_test(tc, test_force_removes_stale_outputs);
  tcase_add_test(tc, test_report_block_reference);
  tcase_add_test(tc, test_report_worst_event_not_better);
  tcase_add_test(tc, test_report_one_value_no_fall);
  tcase_add_test(tc, test_report_cost_shape);
  suite_add_tcase(s, tc);
  return tu_run_suite(s);
}
