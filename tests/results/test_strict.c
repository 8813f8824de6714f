/* test_strict.c: strict inputs and one-line messages (issue 16, docs/semantics.md "Strict inputs
 * (issue 16)"): safetensors data regions that must tile the data section, the tensor-name
 * rules of every trace source, distinct plot file names, control bytes in experiment files,
 * the report's readers of fp8lab's own outputs, and every message that quotes input bytes
 * staying one line with those bytes escaped.
 *
 * Every input is written byte by byte here; the expected messages are written out by hand
 * from the rules in docs/semantics.md.
 */
#include <check.h>
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analysis.h"
#include "report_internal.h" /* rep_add_gemm, called directly */
#include "run_json.h"        /* the readers of the run's files, called directly */
#include "tables.h"
#include "experiment.h"
#include "testutil.h"
#include "trace.h"
#include "util.h"

static char *g_dir;

static void setup(void) { g_dir = tu_mkdtemp(); }
static void teardown(void) {
  tu_rmtree(g_dir);
  free(g_dir);
}

/* g_dir/rel (static buffer, one at a time). */
static const char *in_dir(const char *rel) {
  static char p[4096];
  snprintf(p, sizeof p, "%s/%s", g_dir, rel);
  return p;
}

static void put_file(const char *rel, const void *data, size_t n) {
  ck_assert_int_eq(tu_write_file(in_dir(rel), data, n), 0);
}

static void put_text(const char *rel, const char *text) { put_file(rel, text, strlen(text)); }

/* An error message is one line: no newline, CR, ESC or other control byte in it. */
static void assert_one_line(const char *err) {
  for (const unsigned char *p = (const unsigned char *)err; *p; p++)
    ck_assert_msg(*p >= 0x20 && *p != 0x7f, "control byte 0x%02x at %td in '%s'", *p,
                  (const char *)p - err, err);
}

/* ------------------------------------------------------------------ safetensors files */

/* A safetensors file at g_dir/rel: u64 length (hlen, or strlen(hdr) when hlen is -1), the
 * header, then ndata bytes of data (byte k is k & 0xff). */
static void put_st(const char *rel, const char *hdr, long long hlen, size_t ndata) {
  size_t hl = strlen(hdr), n = 8 + hl + ndata;
  unsigned char *b = malloc(n);
  uint64_t v = hlen < 0 ? hl : (uint64_t)hlen;
  for (int k = 0; k < 8; k++) b[k] = (unsigned char)(v >> (8 * k));
  memcpy(b + 8, hdr, hl);
  for (size_t k = 0; k < ndata; k++) b[8 + hl + k] = (unsigned char)k;
  put_file(rel, b, n);
  free(b);
}

/* fp8_safetensors_open on g_dir/x.safetensors: the status, the message in err. */
static int open_st(fp8_step *s, char *err, size_t errlen) {
  int rc = fp8_safetensors_open(in_dir("x.safetensors"), s, err, errlen);
  if (rc != FP8_OK) ck_assert_ptr_null(s->tensors);
  return rc;
}

/* The message, from "<path>: " on, must be exactly want. */
static void expect_st(const char *hdr, long long hlen, size_t ndata, const char *want) {
  put_st("x.safetensors", hdr, hlen, ndata);
  char err[FP8_ERRLEN] = "", full[8192];
  fp8_step s;
  int rc = open_st(&s, err, sizeof err);
  snprintf(full, sizeof full, "%s: %s", in_dir("x.safetensors"), want);
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
  mkdir(in_dir("step_0"), 0777);
  put_npy("step_0/good.input.npy");
  char rel[256];
  snprintf(rel, sizeof rel, "step_0/%s", c->file);
  put_npy(rel);
  char err[FP8_ERRLEN] = "", want[8192];
  fp8_step s;
  int rc = fp8_npy_open_step(in_dir("step_0"), &s, err, sizeof err);
  ck_assert_msg(rc == FP8_EFORMAT, "rc %d (%s)", rc, err);
  snprintf(want, sizeof want, "%s: %s", in_dir("step_0"), c->want);
  ck_assert_str_eq(err, want);
  assert_one_line(err);
  fp8_step_free(&s);
}
END_TEST

START_TEST(npy_name_length) {
  mkdir(in_dir("step_0"), 0777);
  char rel[300], want[8192], err[FP8_ERRLEN] = "";
  char name[240];
  memset(name, 'n', 230);
  name[230] = 0;
  snprintf(rel, sizeof rel, "step_0/%s.npy", name);
  put_npy(rel);
  fp8_step s;
  ck_assert_int_eq(fp8_npy_open_step(in_dir("step_0"), &s, err, sizeof err), FP8_EFORMAT);
  snprintf(want, sizeof want, "%s: tensor %.120s...: name is 230 bytes long, at most 200",
           in_dir("step_0"), name);
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

/* ------------------------------------------------------------------ experiment files */

/* Loads g_dir/e.ini; returns the status, the message in err. */
static int load_ini(const void *text, size_t n, char *err, size_t errlen) {
  put_file("e.ini", text, n);
  fp8_experiment ex;
  int rc = fp8_experiment_load(in_dir("e.ini"), &ex, err, errlen);
  if (rc == FP8_OK) fp8_experiment_free(&ex);
  return rc;
}

#define INI_HEAD "[trace]\npath = synth:llm\n[recipe.d]\nkind = delayed\n"

typedef struct {
  const char *text;
  size_t len; /* bytes of text (NUL bytes inside) */
  const char *want; /* after "<path>:" */
} ini_case;

#define INI(s, want) {s, sizeof s - 1, want}

static const ini_case INI_BAD[] = {
    /* the case: the NUL made history 1 the only value */
    INI(INI_HEAD "history_len = 1\0, 4\n", "5: NUL byte at column 16 (a text file has none)"),
    INI(INI_HEAD "margin = 0\x1b[2J\n", "5: control character \\x1b at column 11 (only tab is "
                                        "allowed)"),
    INI(INI_HEAD "margin = 0\r1\n", "5: control character \\r at column 11 (only tab is allowed)"),
    INI(INI_HEAD "margin = 0\v\n", "5: control character \\x0b at column 11 (only tab is "
                                   "allowed)"),
    INI(INI_HEAD "ma\x7frgin = 0\n", "5: control character \\x7f at column 3 (only tab is "
                                     "allowed)"),
    INI("[trace]\npath = synth:llm\n[recipe.\x1b[31md]\n", "3: control character \\x1b at "
                                                          "column 9 (only tab is allowed)"),
    INI(INI_HEAD "margin = 0 ; \x01 in a comment\n", "5: control character \\x01 at column 14 "
                                                     "(only tab is allowed)"),
    INI(INI_HEAD "margin = \xff\n", "5: byte \\xff at column 10 is not UTF-8"),
    INI(INI_HEAD "margin = \xc3\n", "5: byte \\xc3 at column 10 is not UTF-8"),
};

START_TEST(ini_control_bytes) {
  const ini_case *c = &INI_BAD[_i];
  char err[FP8_ERRLEN] = "", want[8192];
  int rc = load_ini(c->text, c->len, err, sizeof err);
  ck_assert_msg(rc == FP8_EINVAL, "case %d: rc %d (%s)", _i, rc, err);
  snprintf(want, sizeof want, "%s:%s", in_dir("e.ini"), c->want);
  ck_assert_str_eq(err, want);
  assert_one_line(err);
}
END_TEST

/* What stays legal: tabs, CRLF line ends, a last line without newline, UTF-8 in comments and
 * values, a BOM. */
START_TEST(ini_text_ok) {
  static const char ok[] = "\xef\xbb\xbf[trace]\r\npath\t=\tsynth:llm ; caf\xc3\xa9\r\n"
                           "[recipe.d]\nkind = delayed\nhistory_len = 1, 4\r\n"
                           "[output]\ndir = out/\xce\xb1";
  char err[FP8_ERRLEN] = "";
  put_file("e.ini", ok, sizeof ok - 1);
  fp8_experiment ex;
  ck_assert_msg(fp8_experiment_load(in_dir("e.ini"), &ex, err, sizeof err) == FP8_OK, "%s", err);
  ck_assert_uint_eq(ex.nconfigs, 2);
  ck_assert_int_eq(ex.configs[1].history_len, 4);
  ck_assert_ptr_nonnull(strstr(ex.out_dir, "out/\xce\xb1"));
  fp8_experiment_free(&ex);
}
END_TEST

/* ------------------------------------------------------------------ runs and reports */

#define run_cli(out, ...) tu_cli(g_dir, (out), __VA_ARGS__)

/* g_dir/tr: 4 snapshot steps of the given tensors (F32, 8x8), and g_dir/e.ini replaying it
 * with a delayed (history 1 and 4) and a current recipe into g_dir/out. */
static void write_run(const char *const *names, size_t n) {
  mkdir(in_dir("tr"), 0777);
  float x[64];
  char err[FP8_ERRLEN], p[64];
  fp8_tensor_out t[4];
  ck_assert_uint_le(n, 4);
  for (int s = 0; s < 4; s++) {
    for (int i = 0; i < 64; i++) x[i] = (float)(i - 32) / 32.0f * (float)(1 + s);
    for (size_t k = 0; k < n; k++) t[k] = (fp8_tensor_out){names[k], FP8_DTYPE_F32, 2, {8, 8}, x};
    snprintf(p, sizeof p, "tr/step_%d.safetensors", s);
    ck_assert_int_eq(fp8_safetensors_write(in_dir(p), t, n, NULL, err, sizeof err), FP8_OK);
  }
  put_text("e.ini", "[trace]\npath = tr\n[recipe.d]\nkind = delayed\nhistory_len = 1, 4\n"
                    "[recipe.c]\nkind = current\n[output]\ndir = out\n");
}

static const char *const TWO[] = {"a.fc.input", "a.fc.weight"};

/* A run of TWO without its report. */
static void run_two(void) {
  write_run(TWO, 2);
  char *out = NULL;
  int rc = run_cli(&out, "run e.ini --quiet --no-report");
  ck_assert_msg(rc == 0, "%s", out);
  free(out);
}

/* Replaces the first old in g_dir/rel by new. */
static void edit(const char *rel, const char *old, const char *new) {
  size_t n;
  char *t = tu_read_file(in_dir(rel), &n);
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

/* Replaces every old in g_dir/rel by new. */
static void replace_all(const char *rel, const char *old, const char *new) {
  char *t = tu_read_file(in_dir(rel), NULL);
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

static void append(const char *rel, const char *text) {
  size_t n;
  char *t = tu_read_file(in_dir(rel), &n);
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
  char *t = tu_read_file(in_dir(rel), &n);
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

/* fp8lab report out (in g_dir): exit 2 with exactly "fp8lab: report: <want>\n". */
static void expect_report(const char *want) {
  char *out = NULL, full[8192];
  int rc = run_cli(&out, "report out --quiet");
  snprintf(full, sizeof full, "fp8lab: report: %s\n", want);
  ck_assert_msg(rc == 2, "exit %d: %s", rc, out);
  ck_assert_str_eq(out, full);
  free(out);
}

/* The line number of the first line of g_dir/rel that starts with prefix. */
static int line_of(const char *rel, const char *prefix) {
  char *t = tu_read_file(in_dir(rel), NULL);
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
  ck_assert_int_eq(unlink(in_dir("out/run.json")), 0);
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

/* run.json's lists of tensors left out (issue 17): the run writes them (empty here: both
 * tensors have rows), the report accepts them, and a malformed one is refused at its key. */
START_TEST(report_run_json_left_out) {
  run_two();
  char *j = tu_read_file(in_dir("out/run.json"), NULL);
  ck_assert_ptr_nonnull(j);
  ck_assert_msg(strstr(j, "\"tensors_never_ran\": [],\n  \"tensors_without_snapshot\": [],\n"
                          "  \"tensors_without_recipe\": [],\n") != NULL, "%s", j);
  free(j);
  edit("out/run.json", "\"tensors_never_ran\": []", "\"tensors_never_ran\": [\"z.out_proj.input\"]");
  char *out = NULL;
  int rc = run_cli(&out, "report out --quiet");
  ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
  free(out);
  char *md = tu_read_file(in_dir("out/report.md"), NULL);
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
  snprintf(outdir, sizeof outdir, "%s", in_dir("out"));
  snprintf(gemm, sizeof gemm, "%s/gemm.csv", outdir);
  snprintf(hist, sizeof hist, "%s/histograms.csv", outdir);
  r->outdir = outdir;
  char err[1024];
  int before = open_fds(), have = 0;
  for (int i = 0; i < 50; i++) {
    err[0] = 0;
    fp8_gemm_table g;
    ck_assert_int_eq(fp8_gemmcsv_load(gemm, &g, err, sizeof err), FP8_OK);
    ck_assert_int_eq(g.n, 1);
    ck_assert_str_eq(g.rows[0].key.recipe, "d");
    /* no configurations loaded: the row names none */
    ck_assert_int_eq(rep_add_gemm(r, &g, "gemm.csv", &have, err, sizeof err), FP8_EFORMAT);
    ck_assert_str_eq(err, "gemm.csv:2: recipe d (delayed) is not a configuration of steps.csv");
    fp8_gemmcsv_free(&g);
    fp8_hist_table h;
    ck_assert_int_eq(fp8_hist_load(hist, &h, err, sizeof err), FP8_OK);
    fp8_hist_free(&h);
    fp8_run_record rec;
    ck_assert_int_eq(fp8_runjson_read(outdir, &rec, err, sizeof err), FP8_OK);
    fp8_run_record_free(&rec);
  }
  ck_assert_int_eq(open_fds(), before);
  put_text("out/gemm.csv", "layer,gemm\n");
  for (int i = 0; i < 50; i++) {
    fp8_gemm_table g;
    ck_assert_int_eq(fp8_gemmcsv_load(gemm, &g, err, sizeof err), FP8_EFORMAT);
  }
  ck_assert_int_eq(open_fds(), before);
  free(r);
}
END_TEST

/* The readers of histograms.csv and gemm.csv called directly: a bad line is one message naming
 * the file and the line, and the table stays empty (safe to free). */
START_TEST(result_readers_bad_line) {
  char path[4200], err[1024];
  snprintf(path, sizeof path, "%s", in_dir("h.csv"));
  put_text("h.csv", "tensor,step,log2_bin,count\na.fc.input,0,3,7\na.fc.input,0,3\n");
  fp8_hist_table h;
  ck_assert_int_eq(fp8_hist_load(path, &h, err, sizeof err), FP8_EFORMAT);
  ck_assert_ptr_nonnull(strstr(err, "h.csv:3: expected 4 fields, found 3"));
  ck_assert_int_eq(h.n, 0);
  fp8_hist_free(&h);
  put_text("h.csv", "tensor,step,log2_bin,count\na.fc.input,0,3,7\na.fc.input,0,3,2\n");
  ck_assert_int_eq(fp8_hist_load(path, &h, err, sizeof err), FP8_OK);
  double counts[FP8_LOG2_HIST_BINS];
  int lo = 0, n = 0;
  ck_assert_int_eq(fp8_hist_get(&h, "a.fc.input", 0, counts, &lo, &n), FP8_OK);
  ck_assert_int_eq(lo, 3);
  ck_assert_int_eq(n, 1);
  ck_assert(counts[0] == 2.0); /* a bin listed twice: its last count */
  ck_assert_int_eq(fp8_hist_get(&h, "a.fc.input", 1, counts, &lo, &n), FP8_EFORMAT);
  fp8_hist_free(&h);
  snprintf(path, sizeof path, "%s", in_dir("g.csv"));
  put_text("g.csv", "layer,gemm,step,recipe,kind,history_len,margin,amax_compute,rel_error\n"
                    "a.fc,fprop,0,c,current,,,,0.5\na.fc,fprop,0,c,current,1,,,0.5\n");
  fp8_gemm_table g;
  ck_assert_int_eq(fp8_gemmcsv_load(path, &g, err, sizeof err), FP8_EFORMAT);
  ck_assert_ptr_nonnull(strstr(err, "g.csv:3: column history_len: expected an empty field for "
                                    "non-delayed kinds, found '1'"));
  ck_assert_int_eq(g.n, 0);
  fp8_gemmcsv_free(&g);
}
END_TEST

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
  ck_assert_int_ne(stat(in_dir("out"), &st), 0); /* nothing written */
  /* the report: a run of two tensors, one renamed in steps.csv and stream.csv */
  tu_rmtree(in_dir("tr"));
  run_two();
  replace_all("out/steps.csv", "a.fc.input,", "a_fc.input,");
  replace_all("out/steps.csv", "a.fc.weight,", "a/fc.input,");
  unlink(in_dir("out/stream.csv"));
  expect_report("out/steps.csv: tensors a/fc.input and a_fc.input would both be drawn as "
                "plots/amax_a_fc.input.png; rename one");
}
END_TEST

/* A bad name in amax.csv is reported against amax.csv at its line, not against the
 * experiment file (where the hybrid format's role check used to find it). */
START_TEST(amax_name_via_run) {
  mkdir(in_dir("tr"), 0777);
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

/* ------------------------------------------------------------------ one-line messages */

/* fp8_escape's rules, case by case (docs/semantics.md). */
START_TEST(escape_rules) {
  static const struct {
    const char *in;
    size_t len;
    const char *out;
  } C[] = {
      {"plain.name-0", 12, "plain.name-0"},
      {"a\nb\rc\td", 7, "a\\nb\\rc\\td"},
      {"back\\slash", 10, "back\\\\slash"},
      {"\x1b[31mred\x1b[0m", 12, "\\x1b[31mred\\x1b[0m"},
      {"nul\0x", 5, "nul\\x00x"},
      {"del\x7f", 4, "del\\x7f"},
      {"caf\xc3\xa9 \xce\xb1 \xf0\x9f\x98\x80", 13, "caf\xc3\xa9 \xce\xb1 \xf0\x9f\x98\x80"},
      {"c1\xc2\x9b", 4, "c1\\xc2\\x9b"},              /* U+009B, CSI */
      {"bad\xff\xfe", 5, "bad\\xff\\xfe"},             /* not UTF-8 */
      {"over\xc0\xaf", 6, "over\\xc0\\xaf"},           /* overlong '/' */
      {"sur\xed\xa0\x80", 6, "sur\\xed\\xa0\\x80"},    /* a surrogate */
      {"cut\xe2\x82", 5, "cut\\xe2\\x82"},             /* a sequence cut short */
      {"big\xf4\x90\x80\x80", 7, "big\\xf4\\x90\\x80\\x80"}, /* above U+10FFFF */
  };
  char out[FP8_ESC_LEN];
  for (size_t i = 0; i < sizeof C / sizeof *C; i++)
    ck_assert_str_eq(fp8_escape(C[i].in, C[i].len, out, sizeof out), C[i].out);
  /* too long: cut between escapes, "..." after at most outlen - 4 bytes */
  ck_assert_str_eq(fp8_escape("abcdefgh", 8, out, 9), "abcdefgh");
  ck_assert_str_eq(fp8_escape("abcdefghi", 9, out, 9), "abcde...");
  ck_assert_str_eq(fp8_escape("ab\ncdefgh", 9, out, 9), "ab\\nc...");
  ck_assert_str_eq(fp8_escape("abcd\ncdefgh", 11, out, 9), "abcd...");
  ck_assert_str_eq(fp8_escape("\x1b\x1b\x1b", 3, out, 9), "\\x1b...");
  /* the printing net keeps backslashes (the escapes a message already holds) */
  ck_assert_str_eq(fp8_escape_line("a\\nb\nc\x1b", out, sizeof out), "a\\nb\\nc\\x1b");
}
END_TEST

/* One case: a message of the library on crafted input, the escaped text it must hold. */
START_TEST(one_line_library) {
  char err[FP8_ERRLEN] = "";
  fp8_step s;
  /* safetensors: jansson's error quotes the input near the error */
  put_st("x.safetensors", "{\"a\":1}\n\x1b" "x", -1, 0);
  ck_assert_int_eq(open_st(&s, err, sizeof err), FP8_EFORMAT);
  assert_one_line(err);
  ck_assert_msg(strstr(err, "end of file expected near '\\x1b'"), "%s", err);
  /* a __metadata__ key and a dtype */
  put_st("x.safetensors", "{\"__metadata__\":{\"k\\u001b[2J\":1}}", -1, 0);
  ck_assert_int_eq(open_st(&s, err, sizeof err), FP8_EFORMAT);
  assert_one_line(err);
  ck_assert_msg(strstr(err, "__metadata__ value of k\\x1b[2J is an integer"), "%s", err);
  put_st("x.safetensors", "{\"t\":{\"dtype\":\"F\\n32\",\"shape\":[1],\"data_offsets\":[0,4]}}", -1, 4);
  ck_assert_int_eq(open_st(&s, err, sizeof err), FP8_EFORMAT);
  assert_one_line(err);
  ck_assert_msg(strstr(err, "tensor t: dtype F\\n32 not supported"), "%s", err);
  /* npy: a key and a descr of the header */
  mkdir(in_dir("step_0"), 0777);
  static const char hk[] = "\x93NUMPY\x01\x00\x20\x00{'de\x1b[Ar': '<f4', }            \n";
  put_file("step_0/t.npy", hk, sizeof hk - 1);
  ck_assert_int_eq(fp8_npy_open_step(in_dir("step_0"), &s, err, sizeof err), FP8_EFORMAT);
  assert_one_line(err);
  ck_assert_msg(strstr(err, "unexpected or repeated key 'de\\x1b[Ar' at byte 11"), "%s", err);
  static const char hd[] = "\x93NUMPY\x01\x00\x3b\x00{'descr': '<f\r\n', 'fortran_order': False, "
                           "'shape': (), }  \n";
  put_file("step_0/t.npy", hd, sizeof hd - 1);
  ck_assert_int_eq(fp8_npy_open_step(in_dir("step_0"), &s, err, sizeof err), FP8_EFORMAT);
  assert_one_line(err);
  ck_assert_msg(strstr(err, "dtype '<f\\r\\n' not supported"), "%s", err);
  /* experiment files: an unknown key or section is quoted escaped (its bytes passed the line
   * check, so only a backslash is left to escape) */
  static const char k[] = INI_HEAD "mar\\gin = 1\n";
  ck_assert_int_eq(load_ini(k, sizeof k - 1, err, sizeof err), FP8_EINVAL);
  ck_assert_msg(strstr(err, ":5: unknown key mar\\\\gin in [recipe.d]"), "%s", err);
  static const char sec[] = "[tr\\ace]\n";
  ck_assert_int_eq(load_ini(sec, sizeof sec - 1, err, sizeof err), FP8_EINVAL);
  ck_assert_msg(strstr(err, ":1: unknown section [tr\\\\ace]"), "%s", err);
  /* a tab passes the line check, but not into a message (fuzz_experiment found these raw:
   * tests/fuzz/corpus/experiment/regress-tab-in-key) */
  static const char tab[] = "1e-5[\tr::l\n";
  ck_assert_int_eq(load_ini(tab, sizeof tab - 1, err, sizeof err), FP8_EINVAL);
  assert_one_line(err);
  ck_assert_msg(strstr(err, ":1: key 1e-5[\\tr outside any section"), "%s", err);
  static const char dup[] = INI_HEAD "m\targin = 1\nm\targin = 2\n";
  ck_assert_int_eq(load_ini(dup, sizeof dup - 1, err, sizeof err), FP8_EINVAL);
  assert_one_line(err);
  ck_assert_msg(strstr(err, ":5: unknown key m\\targin in [recipe.d]"), "%s", err);
  static const char val[] = "[trace]\npath = tr\n[recipe.x]\nkind = cur\trent\n";
  ck_assert_int_eq(load_ini(val, sizeof val - 1, err, sizeof err), FP8_EINVAL);
  assert_one_line(err);
  ck_assert_msg(strstr(err, ":4: bad kind \"cur\\trent\""), "%s", err);
  static const char lab[] = "[recipe.a\tb]\n";
  ck_assert_int_eq(load_ini(lab, sizeof lab - 1, err, sizeof err), FP8_EINVAL);
  assert_one_line(err);
  ck_assert_msg(strstr(err, ":1: bad character '\\t' in recipe label a\\tb"), "%s", err);
  /* steps.csv: a field quoted in a message, a name with a CR */
  fp8_steps_table t;
  char csv[2048];
  snprintf(csv, sizeof csv, "%s\n%s\n", "tensor,role,step,recipe,kind,format,history_len,margin,"
           "amax_compute,amax,scale,n,nonfinite,zeros,overflow,underflow,subnormal,mse,snr_db",
           "a.input,in\x1b[1Aput,0,d,current,e4m3,,,,1,1,1,0,0,0,0,0,0,1");
  ck_assert_int_eq(fp8_steps_parse("s.csv", csv, strlen(csv), &t, err, sizeof err), FP8_EFORMAT);
  assert_one_line(err);
  ck_assert_msg(strstr(err, "found 'in\\x1b[1Aput'"), "%s", err);
  snprintf(csv, sizeof csv, "%s\n%s\n", "tensor,role,step,recipe,kind,format,history_len,margin,"
           "amax_compute,amax,scale,n,nonfinite,zeros,overflow,underflow,subnormal,mse,snr_db",
           "a\rb.input,input,0,d,current,e4m3,,,,1,1,1,0,0,0,0,0,0,1");
  ck_assert_int_eq(fp8_steps_parse("s.csv", csv, strlen(csv), &t, err, sizeof err), FP8_EFORMAT);
  ck_assert_str_eq(err, "s.csv:2: column tensor: a\\rb.input: name holds the control character "
                        "\\r at byte 1");
  /* two names for one plot file, one with a backslash */
  const char *names[] = {"a\\b.input", "a_b.input"};
  ck_assert_int_eq(fp8_tensor_files_distinct(names, 2, "tr", err, sizeof err), FP8_EFORMAT);
  ck_assert_str_eq(err, "tr: tensors a\\\\b.input and a_b.input would both be drawn as "
                        "plots/amax_a_b.input.png; rename one");
}
END_TEST

/* The CLI: arguments it quotes, and paths in the messages it prints. */
START_TEST(one_line_cli) {
  static const struct {
    const char *args, *want;
  } C[] = {
      {"run --threads \"$(printf '\\033[2J')\" e.ini",
       "fp8lab run: --threads wants an integer from 1 to 64, got '\\x1b[2J'\n"},
      {"report \"$(printf 'no\\nwhere')\"",
       "fp8lab: report: no\\nwhere/run.json: cannot open: No such file or directory (fp8lab "
       "report reads a folder that fp8lab run wrote)\n"},
      {"run \"$(printf 'a\\rb.ini')\"", "fp8lab: a\\rb.ini: cannot open: No such file or directory\n"},
      {"\"$(printf 'x\\033]0;t\\007')\"",
       "fp8lab: unknown command 'x\\x1b]0;t\\x07' (run, synth, inspect, report, timeline, import-te; see "
       "fp8lab --help)\n"},
  };
  for (size_t i = 0; i < sizeof C / sizeof *C; i++) {
    char *out = NULL;
    ck_assert_int_eq(run_cli(&out, "%s", C[i].args), 2);
    ck_assert_str_eq(out, C[i].want);
    free(out);
  }
}
END_TEST

/* ------------------------------------------------------------------ Suite */

static Suite *strict_suite(void) {
  Suite *s = suite_create("strict");
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
  tcase_add_loop_test(tc, ini_control_bytes, 0, sizeof INI_BAD / sizeof *INI_BAD);
  tcase_add_test(tc, ini_text_ok);
  tcase_add_test(tc, report_reads_good_run);
  tcase_add_test(tc, report_histograms_negative);
  tcase_add_test(tc, report_histograms_garbage);
  tcase_add_test(tc, report_histograms_fields);
  tcase_add_test(tc, report_run_json_missing);
  tcase_add_test(tc, report_run_json_left_out);
  tcase_add_test(tc, report_run_json_corrupt);
  tcase_add_test(tc, report_stream_strict);
  tcase_add_test(tc, report_gemm_strict);
  tcase_add_test(tc, report_readers_close_files);
  tcase_add_test(tc, result_readers_bad_line);
  tcase_add_test(tc, plot_file_collision);
  tcase_add_test(tc, amax_name_via_run);
  tcase_add_test(tc, escape_rules);
  tcase_add_test(tc, one_line_library);
  tcase_add_test(tc, one_line_cli);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tu_run_suite(strict_suite()); }
