/* test_mixed_recipes.c: [recipe.*] tensors and label (issue 14): a mixed recipe and a partial
 * sweep give the rows of the same configurations replayed over those tensors alone, in every CSV;
 * a layer whose operands the mixed recipe's sections split has GEMM rows (issue 45), checked by
 * hand; the errors found once the trace is open, at the key's line. */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testutil.h"
#include "results.h"
#include "trace.h"
#include "tu_dir.h"
#include "run_helpers.h"
#include "util.h"

/* ------------------------------------------------------------------ [recipe.*] tensors, label */

/* Two layers a and b (input [2, 4], weight [3, 4], grad_output [2, 3]), snapshots at steps 0
 * and 2 (step 2 five times larger: delayed scaling overflows there), amax.csv at step 1. */
static const char *const g_names[6] = {"a.grad_output", "a.input", "a.weight",
                                       "b.grad_output", "b.input", "b.weight"};
static const int64_t g_shape[6][2] = {{2, 3}, {2, 4}, {3, 4}, {2, 3}, {2, 4}, {3, 4}};
static float g_data[2][6][12]; /* [snapshot 0 / 1 (steps 0, 2)][tensor k of g_names] */

static void write_two_layer_trace(void) {
  const char *tdir = path_in("trace");
  mkdir(tdir, 0777);
  for (int st = 0; st < 2; st++) {
    fp8_tensor_out t[6];
    for (int k = 0; k < 6; k++) {
      int n = (int)(g_shape[k][0] * g_shape[k][1]);
      for (int i = 0; i < n; i++)
        g_data[st][k][i] = (float)((i * 7 + k * 3) % 11 - 5) * (0.37f + 0.11f * (float)k) *
                           (st ? 5.0f : 1.0f) * (k >= 3 ? 1e-3f : 1.0f);
      t[k] = (fp8_tensor_out){g_names[k], FP8_DTYPE_F32, 2, {g_shape[k][0], g_shape[k][1]},
                              g_data[st][k]};
    }
    char err[FP8_ERRLEN], rel[64];
    snprintf(rel, sizeof rel, "trace/step_%d.safetensors", 2 * st);
    const char *p = path_in(rel);
    ck_assert_msg(fp8_safetensors_write(p, t, 6, NULL, err, sizeof err) == FP8_OK, "%s", err);
  }
  put_text("trace/amax.csv", "step,tensor,amax\n1,a.input,3\n1,b.input,0.003\n1,a.grad_output,2\n");
}

/* The data lines of a CSV (header dropped), sorted, as one string. */
static int cmp_line(const void *x, const void *y) {
  return strcmp(*(char *const *)x, *(char *const *)y);
}

static char *sorted_lines(const char *csv, size_t *n_out) {
  size_t n = 0, cap = 16;
  char **v = malloc(cap * sizeof *v);
  const char *p = strchr(csv, '\n');
  p = p ? p + 1 : csv + strlen(csv);
  while (*p) {
    const char *nl = strchr(p, '\n');
    size_t len = nl ? (size_t)(nl - p) : strlen(p);
    if (n == cap) v = realloc(v, (cap *= 2) * sizeof *v);
    v[n] = malloc(len + 2);
    memcpy(v[n], p, len);
    v[n][len] = '\n';
    v[n][len + 1] = 0;
    n++;
    p = nl ? nl + 1 : p + len;
  }
  qsort(v, n, sizeof *v, cmp_line);
  size_t total = 1;
  for (size_t i = 0; i < n; i++) total += strlen(v[i]);
  char *s = malloc(total);
  s[0] = 0;
  for (size_t i = 0; i < n; i++) {
    strcat(s, v[i]);
    free(v[i]);
  }
  free(v);
  if (n_out) *n_out = n;
  return s;
}

/* The sorted data lines of several runs' <dir>/<file> together. */
static char *sorted_union(const char *file, const char *const *dirs, size_t ndirs) {
  size_t cap = 1;
  char **texts = calloc(ndirs, sizeof *texts);
  for (size_t i = 0; i < ndirs; i++) {
    char rel[256];
    snprintf(rel, sizeof rel, "%s/%s", dirs[i], file);
    const char *p = path_in(rel);
    texts[i] = tu_read_file(p, NULL);
    if (!texts[i]) texts[i] = strdup("header\n"); /* no such file: no rows */
    cap += strlen(texts[i]);
  }
  char *all = malloc(cap + 16);
  strcpy(all, "header\n");
  for (size_t i = 0; i < ndirs; i++) {
    const char *body = strchr(texts[i], '\n');
    strcat(all, body ? body + 1 : "");
    free(texts[i]);
  }
  free(texts);
  char *s = sorted_lines(all, NULL);
  free(all);
  return s;
}

/* Field col (0-based) of the row of csv that starts with prefix, as a float. */
static double row_field(const char *csv, const char *prefix, int col) {
  char *row = find_row(csv, prefix);
  ck_assert_msg(row != NULL, "no row starting %s", prefix);
  const char *p = row;
  for (int i = 0; i < col && p; i++) p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL;
  ck_assert_msg(p != NULL, "%s: no field %d", row, col);
  double v = strtod(p, NULL);
  free(row);
  return v;
}

/* x [n] dequantized by a per-tensor cast of scale s to format f with testutil's FP8 reference
 * (an exhaustive search in double, not the simulator): RN32(decode(encode(RN32(x s))) RN32(1/s))
 * (RECIPES.md); the product of an FP8 value and a float is exact in double. */
static void dequant_by_hand(const float *x, int n, float s, fp8_format f, float *q) {
  const float inv = 1.0f / s;
  for (int i = 0; i < n; i++) {
    float y = x[i] * s;
    q[i] = (float)(ref_fp8_value(ref_fp8_encode(y, f), f) * (double)inv);
  }
}

/* rel_error (gemm.h) of layer a's dgrad (dY [2, 3] . W [3, 4]) or wgrad (dY^T . X [2, 4]) from
 * the dequantized operands (qa: dY; qb: W or X) against the originals (a, b), in double. */
static double rel_by_hand(int wgrad, const float *a, const float *b, const float *qa,
                          const float *qb) {
  double num = 0.0, den = 0.0;
  const int rows = wgrad ? 3 : 2, inner = wgrad ? 2 : 3;
  for (int i = 0; i < rows; i++)
    for (int j = 0; j < 4; j++) {
      double y = 0.0, yr = 0.0;
      for (int k = 0; k < inner; k++) {
        int ia = wgrad ? k * 3 + i : i * 3 + k; /* dY[t][o] at t * 3 + o */
        y += (double)qa[ia] * qb[k * 4 + j];
        yr += (double)a[ia] * b[k * 4 + j];
      }
      num += (y - yr) * (y - yr);
      den += yr * yr;
    }
  return sqrt(num / den);
}

/* A mixed recipe (current for a.input and a.weight, delayed L=2 m=1 for the rest, one label)
 * and a partial sweep (delayed L=1, 2 for b.input and a.weight): the rows that exist, and
 * every value equal to the same configuration replayed over those tensors alone ([trace]
 * tensors), in steps.csv, summary.csv, stream.csv and gemm.csv. Layer a, whose operands the
 * two sections of mix split (issue 45): fprop (input and weight, both current) is current
 * scaling's own row; dgrad and wgrad (grad_output delayed, the other operand current) are
 * kind "mixed", their errors those of the two casts with the scales steps.csv gives, by hand. */
START_TEST(test_mixed_recipes) {
  write_two_layer_trace();
  put_text("mixed.ini", "[trace]\npath = trace\n"
                        "[recipe.hot]\nlabel = mix\nkind = current\ntensors = a.input, a.weight\n"
                        "[recipe.rest]\nlabel = mix\nkind = delayed\nhistory_len = 2\nmargin = 1\n"
                        "[recipe.sub]\nkind = delayed\nhistory_len = 1, 2\ntensors = b.input, *.weight\n"
                        "[output]\ndir = mixed\n");
  put_text("r1.ini", "[trace]\npath = trace\ntensors = a.input, a.weight\n"
                     "[recipe.mix]\nkind = current\n[output]\ndir = r1\n");
  put_text("r2.ini", "[trace]\npath = trace\ntensors = a.grad_output, b.*\n"
                     "[recipe.mix]\nkind = delayed\nhistory_len = 2\nmargin = 1\n[output]\ndir = r2\n");
  put_text("r3.ini", "[trace]\npath = trace\ntensors = b.input, *.weight\n"
                     "[recipe.sub]\nkind = delayed\nhistory_len = 1, 2\n[output]\ndir = r3\n");
  put_text("r4.ini", "[trace]\npath = trace\n[recipe.mix]\nkind = current\n[output]\ndir = r4\n");
  const char *ini[5] = {"mixed.ini", "r1.ini", "r2.ini", "r3.ini", "r4.ini"};
  for (int i = 0; i < 5; i++) {
    char *out;
    int rc = run_cli(&out, "run %s --quiet --no-report", ini[i]);
    ck_assert_msg(rc == 0, "%s: %s", ini[i], out);
    free(out);
  }
  /* rows: mix for all 6 tensors, sub for b.input, a.weight, b.weight (2 each), at 2 steps */
  char *steps = read_out("mixed/steps.csv");
  size_t n;
  free(sorted_lines(steps, &n));
  ck_assert_uint_eq(n, 2 * (6 + 3 * 2));
  expect_row(steps, "a.input,input,0,mix,current,e4m3,,,,");
  expect_row(steps, "a.grad_output,grad_output,0,mix,delayed,e5m2,2,1,max,");
  expect_row(steps, "b.weight,weight,2,sub,delayed,e4m3,1,0,max,");
  ck_assert_ptr_null(find_row(steps, "a.input,input,0,sub,"));
  ck_assert_ptr_null(find_row(steps, "a.grad_output,grad_output,0,sub,"));
  /* the rows in step, tensor, configuration order: a.weight's mix row before its sub rows */
  const char *w1 = strstr(steps, "a.weight,weight,0,mix,"), *w2 = strstr(steps, "a.weight,weight,0,sub,");
  ck_assert(w1 && w2 && w1 < w2);
  free(steps);
  /* every row as in the replay of each section over its tensors alone (gemm.csv: but layer
   * a's, which no such replay has: below) */
  static const char *const refs[3] = {"r1", "r2", "r3"};
  static const char *const files[4] = {"steps.csv", "summary.csv", "stream.csv", "gemm.csv"};
  for (int f = 0; f < 4; f++) {
    const char *mixed_dir[1] = {"mixed"};
    char *got = sorted_union(files[f], mixed_dir, 1), *want = sorted_union(files[f], refs, 3);
    if (f == 3) { /* the sorted lines of layer a come first ("a," < "b,") */
      char *at = got;
      while (strncmp(at, "a,", 2) == 0) at = strchr(at, '\n') + 1;
      ck_assert_msg(at - got > 0, "gemm.csv has no row of layer a");
      memmove(got, at, strlen(at) + 1);
    }
    size_t d = 0;
    while (got[d] && got[d] == want[d]) d++;
    while (d > 0 && got[d - 1] != '\n') d--;
    ck_assert_msg(strcmp(got, want) == 0, "%s differs at:\n%.300s\nwant\n%.300s", files[f],
                  got + d, want + d);
    ck_assert_msg(strlen(got) > 0, "%s has no row", files[f]);
    free(got);
    free(want);
  }
  /* gemm.csv: layer b under mix (all three operands delayed L=2 m=1); none under sub (no
   * grad_output) */
  char *gemm = read_out("mixed/gemm.csv");
  expect_row(gemm, "b,fprop,0,mix,delayed,2,1,max,");
  ck_assert_ptr_null(strstr(gemm, ",sub,"));
  /* layer a: its three GEMMs under mix, one row each per step */
  char *steps2 = read_out("mixed/steps.csv"), *cur = read_out("r4/gemm.csv");
  for (int si = 0; si < 2; si++) {
    char pre[128], *got, *want;
    int step = 2 * si;
    /* fprop: input and weight of one section (hot): current scaling's row, as a replay of
     * current scaling over every tensor writes it */
    snprintf(pre, sizeof pre, "a,fprop,%d,mix,current,,,,", step);
    got = find_row(gemm, pre);
    want = find_row(cur, pre);
    ck_assert_msg(got && want, "%s: %s in mixed, %s in r4", pre, got ? "a row" : "no row",
                  want ? "a row" : "no row");
    ck_assert_str_eq(got, want);
    free(got);
    free(want);
    /* dgrad, wgrad: grad_output of rest (delayed, E5M2), the other operand of hot (current,
     * E4M3), each cast with its own scale (steps.csv's scale column, 10) */
    float sc[3], q[3][12]; /* a.grad_output, a.input, a.weight (g_names' order) */
    static const char *const role[3] = {"grad_output", "input", "weight"};
    for (int k = 0; k < 3; k++) {
      snprintf(pre, sizeof pre, "%s,%s,%d,mix,", g_names[k], role[k], step);
      sc[k] = (float)row_field(steps2, pre, 10);
      dequant_by_hand(g_data[si][k], (int)(g_shape[k][0] * g_shape[k][1]), sc[k],
                      k == 0 ? FP8_E5M2 : FP8_E4M3, q[k]);
    }
    const double hand[2] = {rel_by_hand(0, g_data[si][0], g_data[si][2], q[0], q[2]),
                            rel_by_hand(1, g_data[si][0], g_data[si][1], q[0], q[1])};
    for (int w = 0; w < 2; w++) {
      snprintf(pre, sizeof pre, "a,%s,%d,mix,mixed,,,,", w ? "wgrad" : "dgrad", step);
      double rel = row_field(gemm, pre, 8);
      ck_assert_msg(fabs(rel - hand[w]) <= 1e-5 * hand[w] && hand[w] > 0.01,
                    "%s: rel_error %.9g, by hand %.9g", pre, rel, hand[w]);
    }
  }
  free(steps2);
  free(cur);
  free(gemm);
  /* stream.csv: the delayed configurations where they apply (mix's rest: 4 tensors; sub: 3
   * tensors x 2), every replay step (0, 1, 2) */
  char *stream = read_out("mixed/stream.csv");
  free(sorted_lines(stream, &n));
  ck_assert_uint_eq(n, 3 * (4 + 3 * 2));
  ck_assert_ptr_null(find_row(stream, "a.input,input,1,mix,"));
  expect_row(stream, "a.grad_output,grad_output,1,mix,e5m2,2,1,max,0,2,");
  free(stream);
  /* run.json: each configuration's section and tensors */
  const char *p = path_in("mixed/run.json");
  json_error_t jerr;
  json_t *j = json_load_file(p, 0, &jerr);
  ck_assert_ptr_nonnull(j);
  char *cf = json_dumps(json_object_get(json_object_get(j, "experiment"), "configurations"),
                        JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(3));
  /* each configuration's section keys (settings: the advice files write them back) */
#define ST_CUR "\"settings\":\"kind = current\\nformat = hybrid\\nmargin = 0\\namax_epsilon = 0\\npow2 = false\","
#define ST_DL(l, m) "\"settings\":\"kind = delayed\\nformat = hybrid\\nhistory_len = " #l "\\nmargin = " #m "\\namax_compute = max\","
  ck_assert_str_eq(cf, "[{\"recipe\":\"mix\",\"kind\":\"current\",\"format\":\"hybrid\",\"margin\":0,"
                       ST_CUR "\"amax_epsilon\":0.0,\"pow2\":false,\"section\":\"hot\","
                       "\"tensors\":[\"a.input\",\"a.weight\"]},"
                       "{\"recipe\":\"mix\",\"kind\":\"delayed\",\"format\":\"hybrid\",\"margin\":1,"
                       ST_DL(2, 1) "\"history_len\":2,\"amax_compute\":\"max\",\"section\":\"rest\"},"
                       "{\"recipe\":\"sub\",\"kind\":\"delayed\",\"format\":\"hybrid\",\"margin\":0,"
                       ST_DL(1, 0) "\"history_len\":1,\"amax_compute\":\"max\",\"tensors\":[\"b.input\",\"*.weight\"]},"
                       "{\"recipe\":\"sub\",\"kind\":\"delayed\",\"format\":\"hybrid\",\"margin\":0,"
                       ST_DL(2, 0) "\"history_len\":2,\"amax_compute\":\"max\",\"tensors\":[\"b.input\",\"*.weight\"]}]");
#undef ST_CUR
#undef ST_DL
  free(cf);
  json_decref(j);
  /* the report reads it: mix is one configuration */
  char *out;
  ck_assert_msg(run_cli(&out, "report mixed") == 0, "%s", out);
  free(out);
  char *rep = read_out("mixed/report.md");
  const char *row = "| mix (per tensor) |";
  const char *at = strstr(rep, "## All configurations");
  ck_assert_msg(at && strstr(at, row), "%.2000s", at ? at : rep);
  ck_assert_ptr_null(strstr(rep, "| mix (current) |"));
  free(rep);
}
END_TEST

/* The errors found once the trace is open, at the key's line; nothing written. */
START_TEST(test_mixed_recipes_errors) {
  write_two_layer_trace();
  static const struct {
    const char *ini, *msg;
  } cases[] = {
      {"[trace]\npath = trace\n[recipe.hot]\nkind = current\ntensors = a.*, c.*\n",
       "e0.ini:5: tensors glob \"c.*\" of [recipe.hot] matches none of the 6 tensors of the replay"},
      {"[trace]\npath = trace\ntensors = a.*\n[recipe.hot]\nkind = current\ntensors = b.*\n",
       "e1.ini:6: tensors glob \"b.*\" of [recipe.hot] matches none of the 3 tensors of the replay "
       "(those [trace] tensors selects)"},
      {"[trace]\npath = trace\n[recipe.hot]\nlabel = mix\nkind = current\ntensors = a.input\n"
       "[recipe.rest]\nlabel = mix\nkind = delayed\ntensors = b.*\n",
       "e2.ini:10: tensor a.grad_output and 1 more: no section of the recipe label mix ([recipe.hot], "
       "[recipe.rest]) takes it; a shared label is one configuration of every tensor (leave out "
       "the tensors key of its last section to take the rest)"},
      {"[trace]\npath = trace\n[recipe.hot]\nlabel = mix\nkind = current\ntensors = a.*\n"
       "[recipe.rest]\nlabel = mix\nkind = delayed\ntensors = a.input\n",
       "e3.ini:10: [recipe.rest] takes no tensor: every tensor its tensors match is taken by an "
       "earlier section of the recipe label mix ([recipe.hot], [recipe.rest])"},
      /* a glob with / sees rank_<r>/<name>: nothing on a single-rank trace */
      {"[trace]\npath = trace\n[recipe.hot]\nkind = current\ntensors = rank_0/*\n",
       "e4.ini:5: tensors glob \"rank_0/*\" of [recipe.hot] matches none of the 6 tensors of the "
       "replay"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char name[32], *out, want[1024];
    snprintf(name, sizeof name, "e%zu.ini", i);
    put_text(name, cases[i].ini);
    ck_assert_int_eq(run_cli(&out, "run %s --out oe", name), 2);
    snprintf(want, sizeof want, "fp8lab: %s\n", cases[i].msg);
    ck_assert_str_eq(out, want);
    free(out);
    ck_assert(!exists("oe"));
  }
}
END_TEST

TU_MAIN("mixed_recipes", "cli", setup, teardown, 120, test_mixed_recipes, test_mixed_recipes_errors)
