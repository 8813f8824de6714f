/* test_strict_inputs.c: strict trace inputs (issue 16, docs/semantics.md "Strict inputs"):
 * safetensors data regions that must tile the data section, the tensor-name rules of every trace
 * source (safetensors, npy, amax.csv), names that would be drawn as the same plot file, and a bad
 * amax.csv name reported against amax.csv. The expected messages are written out by hand from the
 * rules in docs/semantics.md. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "trace.h"
#include "util.h"
#include "tu_dir.h"
#include "tu_traces.h"

/* The message, from "<path>: " on, must be exactly want. */
static void expect_st(const char *hdr, long long hlen, size_t ndata, const char *want) {
  put_st("x.safetensors", hdr, hlen, ndata);
  char err[FP8_ERRLEN] = "", full[8192];
  fp8_step s;
  int rc = open_st(&s, err, sizeof err);
  snprintf(full, sizeof full, "%s: %s", path_in("x.safetensors"), want);
  ck_assert_msg(rc == FP8_EFORMAT, "rc %d for %s (%s)", rc, hdr, err);
  ck_assert_str_eq(err, full);
  assert_one_line(err);
  fp8_step_free(&s);
}

#define T(name, dt, shape, b, e) \
  "\"" name "\":{\"dtype\":\"" dt "\",\"shape\":" shape ",\"data_offsets\":[" #b "," #e "]}"

/* The data regions, taken in offset order, must tile the data section: the safetensors
 * crate's Metadata::validate (each region begins where the previous one ended, the last one
 * ends at the end of the file: InvalidOffset, MetadataIncompleteBuffer). */
START_TEST(st_tiling) {
  /* header order is not offset order, a zero-size region sits between two others: valid */
  put_st("x.safetensors", "{" T("b", "F32", "[2]", 4, 12) "," T("e", "F32", "[0]", 4, 4) ","
                          T("a", "F32", "[1]", 0, 4) "}", -1, 12);
  char err[FP8_ERRLEN] = "";
  fp8_step s;
  ck_assert_int_eq(open_st(&s, err, sizeof err), FP8_OK);
  ck_assert_uint_eq(s.ntensors, 3);
  ck_assert_str_eq(s.tensors[1].name, "b");
  ck_assert_uint_eq(((const unsigned char *)s.tensors[1].data)[0], 4); /* byte 4 of the data */
  fp8_step_free(&s);

  /* overlap: b's region starts inside a's */
  expect_st("{" T("a", "F32", "[2]", 0, 8) "," T("b", "F32", "[2]", 4, 12) "}", -1, 12,
            "tensor b: data_offsets [4, 12] overlap tensor a's [0, 8] (the data regions, in "
            "offset order, must tile the data section)");
  /* two tensors on the same bytes */
  expect_st("{" T("a", "F32", "[1]", 0, 4) "," T("b", "F32", "[1]", 0, 4) "}", -1, 4,
            "tensor b: data_offsets [0, 4] overlap tensor a's [0, 4] (the data regions, in "
            "offset order, must tile the data section)");
  /* a hole between two regions */
  expect_st("{" T("a", "F32", "[1]", 0, 4) "," T("b", "F32", "[1]", 8, 12) "}", -1, 12,
            "tensor b: data_offsets [8, 12] leave bytes 4 to 8 of the data section (file bytes "
            "120 to 124) unused after tensor a (the data regions, in offset order, must tile the "
            "data section)");
  /* a hole at the start */
  expect_st("{" T("a", "F32", "[1]", 4, 8) "}", -1, 8,
            "tensor a: data_offsets [4, 8] leave bytes 0 to 4 of the data section (file bytes "
            "62 to 66) unused before it (the data regions, in offset order, must tile the data "
            "section)");
  /* trailing bytes */
  expect_st("{" T("a", "F32", "[1]", 0, 4) "}", -1, 5,
            "data section of 5 bytes, but its last tensor (a) ends at 4: 1 byte at file byte 66 "
            "belongs to no tensor (a wrong header length, or bytes after the data)");
  expect_st("{}", -1, 3,
            "data section of 3 bytes, but the header has no tensor: 3 bytes at file byte 10 "
            "belong to no tensor (a wrong header length, or bytes after the data)");
}
END_TEST

/* A header length one byte short: the JSON still parses (the header was padded with a
 * space), so every tensor would be read one byte early; the data section then has one byte
 * more than its tensors hold. */
START_TEST(st_header_length_short) {
  const char *hdr = "{" T("a", "F32", "[2]", 0, 8) "} ";
  expect_st(hdr, (long long)strlen(hdr) - 1, 8,
            "data section of 9 bytes, but its last tensor (a) ends at 8: 1 byte at file byte 70 "
            "belongs to no tensor (a wrong header length, or bytes after the data)");
  /* one byte long: the JSON takes the first data byte (0x00) */
  put_st("x.safetensors", hdr, (long long)strlen(hdr) + 1, 8);
  char err[FP8_ERRLEN] = "";
  fp8_step s;
  ck_assert_int_eq(open_st(&s, err, sizeof err), FP8_EFORMAT);
  ck_assert_msg(strstr(err, "not parseable") != NULL, "%s", err);
  assert_one_line(err);
}
END_TEST

/* ------------------------------------------------------------------ tensor names */

typedef struct {
  const char *json; /* the name as a JSON string's text (escapes included) */
  const char *want; /* the message after "<path>: " */
} name_case;

static const name_case ST_NAMES[] = {
    {"", "tensor : name is empty"},
    {"a/../b", "tensor a/../b: name has a '..' path segment"},
    {"..", "tensor ..: name has a '..' path segment"},
    {"../x", "tensor ../x: name has a '..' path segment"},
    {"x/..", "tensor x/..: name has a '..' path segment"},
    {"/abs.input", "tensor /abs.input: name starts with '/'"},
    {"a\\nb", "tensor a\\nb: name holds the control character \\n at byte 1"},
    {"a\\rb", "tensor a\\rb: name holds the control character \\r at byte 1"},
    {"\\u001b[31mred", "tensor \\x1b[31mred: name holds the control character \\x1b at byte 0"},
    {"tab\\there", "tensor tab\\there: name holds the control character \\t at byte 3"},
    {"del\\u007f", "tensor del\\x7f: name holds the control character \\x7f at byte 3"},
    {"c1\\u009b", "tensor c1\\xc2\\x9b: name holds the control character \\xc2\\x9b at byte 2"},
};

START_TEST(st_names) {
  const name_case *c = &ST_NAMES[_i];
  char hdr[512];
  snprintf(hdr, sizeof hdr, "{\"%s\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
           c->json);
  expect_st(hdr, -1, 4, c->want);
}
END_TEST

/* Too long: 201 bytes (FP8_NAME_MAX is 200); 200 bytes and legal '/', UTF-8 pass. */
START_TEST(st_name_length) {
  char name[6000], hdr[6400], want[600];
  memset(name, 'x', 5000);
  name[5000] = 0;
  snprintf(hdr, sizeof hdr, "{\"%s\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
           name);
  snprintf(want, sizeof want, "tensor %.120s...: name is 5000 bytes long, at most 200", name);
  expect_st(hdr, -1, 4, want);
  name[201] = 0;
  snprintf(hdr, sizeof hdr, "{\"%s\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
           name);
  snprintf(want, sizeof want, "tensor %.120s...: name is 201 bytes long, at most 200", name);
  expect_st(hdr, -1, 4, want);
  name[200] = 0;
  snprintf(hdr, sizeof hdr,
           "{\"%s\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
           "\"rank_0/blocks.0/fc1.input\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]},"
           "\"caf\\u00e9.\\u03b1.input\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]},"
           "\"a..b/.x/c..\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[12,16]}}",
           name);
  put_st("x.safetensors", hdr, -1, 16);
  char err[FP8_ERRLEN] = "";
  fp8_step s;
  ck_assert_msg(open_st(&s, err, sizeof err) == FP8_OK, "%s", err);
  ck_assert_uint_eq(s.ntensors, 4);
  ck_assert_str_eq(s.tensors[0].name, "a..b/.x/c..");
  ck_assert_str_eq(s.tensors[1].name, "caf\xc3\xa9.\xce\xb1.input");
  ck_assert_str_eq(s.tensors[2].name, "rank_0/blocks.0/fc1.input");
  ck_assert_uint_eq(strlen(s.tensors[3].name), 200);
  fp8_step_free(&s);
}
END_TEST

/* An npy folder: the names are the file names without .npy. */
static const unsigned char NPY1[] = "\x93NUMPY\x01\x00\x76\x00"
                                    "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }";

static void put_npy(const char *rel) {
  unsigned char b[10 + 118 + 4];
  memcpy(b, NPY1, 10);
  memset(b + 10, ' ', 118);
  memcpy(b + 10, NPY1 + 10, sizeof NPY1 - 11);
  b[10 + 117] = '\n';
  memset(b + 128, 0, 4);
  put_file(rel, b, sizeof b);
}

typedef struct {
  const char *file; /* in step_0/ */
  const char *want; /* after "<dir>/step_0: " */
} npy_case;

static const npy_case NPY_NAMES[] = {
    {"a\nb.npy", "tensor a\\nb: name holds the control character \\n at byte 1"},
    {"a\rb.npy", "tensor a\\rb: name holds the control character \\r at byte 1"},
    {"\x1b[2Jx.npy", "tensor \\x1b[2Jx: name holds the control character \\x1b at byte 0"},
    {"bad\xff\xfe.npy", "tensor bad\\xff\\xfe: name is not valid UTF-8 at byte 3"},
    {"over\xc0\xaf.npy", "tensor over\\xc0\\xaf: name is not valid UTF-8 at byte 4"},
};

START_TEST(npy_names) {
  const npy_case *c = &NPY_NAMES[_i];
  mkdir(path_in("step_0"), 0777);
  put_npy("step_0/good.input.npy");
  char rel[256];
  snprintf(rel, sizeof rel, "step_0/%s", c->file);
  put_npy(rel);
  char err[FP8_ERRLEN] = "", want[8192];
  fp8_step s;
  int rc = fp8_npy_open_step(path_in("step_0"), &s, err, sizeof err);
  ck_assert_msg(rc == FP8_EFORMAT, "rc %d (%s)", rc, err);
  snprintf(want, sizeof want, "%s: %s", path_in("step_0"), c->want);
  ck_assert_str_eq(err, want);
  assert_one_line(err);
  fp8_step_free(&s);
}
END_TEST

START_TEST(npy_name_length) {
  mkdir(path_in("step_0"), 0777);
  char rel[300], want[8192], err[FP8_ERRLEN] = "";
  char name[240];
  memset(name, 'n', 230);
  name[230] = 0;
  snprintf(rel, sizeof rel, "step_0/%s.npy", name);
  put_npy(rel);
  fp8_step s;
  ck_assert_int_eq(fp8_npy_open_step(path_in("step_0"), &s, err, sizeof err), FP8_EFORMAT);
  snprintf(want, sizeof want, "%s: tensor %.120s...: name is 230 bytes long, at most 200",
           path_in("step_0"), name);
  ck_assert_str_eq(err, want);
}
END_TEST

/* amax.csv: a bad name is an error at its line of amax.csv. */
typedef struct {
  const char *body;
  const char *want; /* after "<dir>/amax.csv:" */
} csv_case;

static const csv_case CSV_NAMES[] = {
    {"0,a.input,1\n0,a/../b.input,1\n", "3: tensor a/../b.input: name has a '..' path segment"},
    {"0,/x.input,1\n", "2: tensor /x.input: name starts with '/'"},
    {"0,x\x1b[31m.input,1\n", "2: tensor x\\x1b[31m.input: name holds the control character "
                              "\\x1b at byte 1"},
    {"0,x\ry,1\n", "2: tensor x\\ry: name holds the control character \\r at byte 1"},
    {"0,\xe2\x82,1\n", "2: tensor \\xe2\\x82: name is not valid UTF-8 at byte 0"},
    /* the other fields quote their text escaped */
    {"\x1b[2J,a,1\n", "2: step '\\x1b[2J' is not a non-negative integer"},
    {"0,a,1\x1b]0;pwned\x07\n", "2: amax '1\\x1b]0;pwned\\x07' is not a number"},
    {"0,a\\b,1\n0,a\\b,2\n", "3: duplicate row for step 0, tensor a\\\\b (first at line 2)"},
};

START_TEST(amax_names) {
  const csv_case *c = &CSV_NAMES[_i];
  char csv[512];
  snprintf(csv, sizeof csv, "step,tensor,amax\n%s", c->body);
  put_text("amax.csv", csv);
  fp8_trace tr;
  char err[FP8_ERRLEN] = "", want[8192];
  int rc = fp8_trace_open(g_dir, &tr, err, sizeof err);
  ck_assert_msg(rc == FP8_EFORMAT, "case %d: rc %d (%s)", _i, rc, err);
  snprintf(want, sizeof want, "%s/amax.csv:%s", g_dir, c->want);
  ck_assert_str_eq(err, want);
  assert_one_line(err);
}
END_TEST

/* The header line of amax.csv is quoted escaped too. */
START_TEST(amax_header_escaped) {
  put_text("amax.csv", "step,tensor\x1b[1A,amax\n");
  fp8_trace tr;
  char err[FP8_ERRLEN] = "", want[8192];
  ck_assert_int_eq(fp8_trace_open(g_dir, &tr, err, sizeof err), FP8_EFORMAT);
  snprintf(want, sizeof want,
           "%s/amax.csv:1: expected header 'step,tensor,amax', optionally followed by "
           "',micro', ',te_scale' or ',micro,te_scale', found 'step,tensor\\x1b[1A,amax'",
           g_dir);
  ck_assert_str_eq(err, want);
}
END_TEST

/* Replaces every old in g_dir/rel by new. */
static void replace_all(const char *rel, const char *old, const char *new) {
  char *t = tu_read_file(path_in(rel), NULL);
  ck_assert_ptr_nonnull(t);
  size_t lo = strlen(old), ln = strlen(new), k = 0;
  for (char *p = t; (p = strstr(p, old)); p += lo) k++;
  char *u = malloc(strlen(t) + k * ln + 1), *o = u;
  for (char *p = t, *q; (q = strstr(p, old)) || *p; p = q + lo) {
    if (!q) {
      strcpy(o, p);
      o += strlen(p);
      break;
    }
    memcpy(o, p, (size_t)(q - p));
    o += q - p;
    memcpy(o, new, ln);
    o += ln;
  }
  *o = 0;
  put_text(rel, u);
  free(u);
  free(t);
}

/* Two tensors whose plot files would be the same: an error naming both, before the replay
 * (fp8lab run) and in fp8lab report (a steps.csv written by hand). */
START_TEST(plot_file_collision) {
  static const char *const names[] = {"x/y.input", "x_y.input"};
  write_run(names, 2);
  char *out = NULL, want[8192];
  int rc = run_cli(&out, "run e.ini --quiet");
  snprintf(want, sizeof want,
           "fp8lab: tr: tensors x/y.input and x_y.input would both be drawn as "
           "plots/amax_x_y.input.png; rename one\n");
  ck_assert_msg(rc == 2, "exit %d: %s", rc, out);
  ck_assert_str_eq(out, want);
  free(out);
  struct stat st;
  ck_assert_int_ne(stat(path_in("out"), &st), 0); /* nothing written */
  /* the report: a run of two tensors, one renamed in steps.csv and stream.csv */
  tu_rmtree(path_in("tr"));
  run_two();
  replace_all("out/steps.csv", "a.fc.input,", "a_fc.input,");
  replace_all("out/steps.csv", "a.fc.weight,", "a/fc.input,");
  unlink(path_in("out/stream.csv"));
  expect_report("out/steps.csv: tensors a/fc.input and a_fc.input would both be drawn as "
                "plots/amax_a_fc.input.png; rename one");
}
END_TEST

/* A bad name in amax.csv is reported against amax.csv at its line, not against the
 * experiment file (where the hybrid format's role check used to find it). */
START_TEST(amax_name_via_run) {
  mkdir(path_in("tr"), 0777);
  put_text("tr/amax.csv", "step,tensor,amax\n0,a.input,1\n1,weird\x1bname,2\n");
  put_text("e.ini", "[trace]\npath = tr\n[recipe.d]\nkind = delayed\nformat = hybrid\n"
                    "[output]\ndir = out\n");
  char *out = NULL, want[8192];
  int rc = run_cli(&out, "run e.ini --quiet");
  snprintf(want, sizeof want,
           "fp8lab: tr/amax.csv:3: tensor weird\\x1bname: name holds the control character "
           "\\x1b at byte 5\n");
  ck_assert_msg(rc == 2, "exit %d: %s", rc, out);
  ck_assert_str_eq(out, want);
  free(out);
}
END_TEST

int main(void) {
  Suite *s = suite_create("strict_inputs");
  TCase *tc = tcase_create("strict");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, st_tiling);
  tcase_add_test(tc, st_header_length_short);
  tcase_add_loop_test(tc, st_names, 0, sizeof ST_NAMES / sizeof *ST_NAMES);
  tcase_add_test(tc, st_name_length);
  tcase_add_loop_test(tc, npy_names, 0, sizeof NPY_NAMES / sizeof *NPY_NAMES);
  tcase_add_test(tc, npy_name_length);
  tcase_add_loop_test(tc, amax_names, 0, sizeof CSV_NAMES / sizeof *CSV_NAMES);
  tcase_add_test(tc, amax_header_escaped);
  tcase_add_test(tc, plot_file_collision);
  tcase_add_test(tc, amax_name_via_run);
  suite_add_tcase(s, tc);
  return tu_run_suite(s);
}
