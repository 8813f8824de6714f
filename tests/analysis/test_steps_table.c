/* test_steps_table.c: steps.csv as the analysis loads it (src/analysis): grouping, the block
 * columns, malformed and inconsistent lines refused with their line, numbers parsed exactly. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "testutil.h"
#include "results.h" /* fp8_schema_steps */
#include "analysis_helpers.h"

/* ------------------------------------------------------------------ loading and grouping */

START_TEST(load_and_group) {
  sbuf b = with_header();
  /* file order deliberately not step order for group (t.input, d); two tensors, two configs */
  add_row(&b, "t.input", "input", 20, D_CFG, "1,448,100,0,0,0,0,0,1e-06,30");
  add_row(&b, "t.input", "input", 0, D_CFG, "1,1,100,0,0,0,0,0,1e-06,31");
  add_row(&b, "t.input", "input", 0, C_CFG, "1,448,100,0,0,0,0,0,1e-06,32");
  add_row(&b, "a.weight", "weight", 0, D_CFG, "2,1,100,0,0,0,0,0,1e-06,33");
  add_row(&b, "t.input", "input", 10, D_CFG, "inf,2.5e-07,100,100,0,0,0,0,nan,inf");
  fp8_steps_table t;
  char err[256] = "";
  ck_assert_int_eq(parse(&b, &t, err, sizeof err), FP8_OK);
  ck_assert_uint_eq(t.nrows, 5);
  ck_assert_str_eq(t.path, "t.csv");
  /* rows in file order, every field parsed */
  ck_assert_int_eq(t.rows[0].step, 20);
  ck_assert_int_eq(t.rows[0].line, 2);
  ck_assert_int_eq(t.rows[4].line, 6);
  ck_assert(isinf(t.rows[4].amax));
  ck_assert(t.rows[4].scale == 2.5e-07);
  ck_assert(isnan(t.rows[4].mse) && isinf(t.rows[4].snr_db));
  ck_assert_int_eq(t.rows[4].nonfinite, 100);
  ck_assert_int_eq(t.rows[4].zeros, 0);
  ck_assert_int_eq(t.rows[2].kind, FP8_KIND_CURRENT);
  ck_assert_int_eq(t.rows[2].history_len, 0);
  ck_assert_int_eq(t.rows[0].history_len, 16);
  ck_assert_int_eq(t.rows[0].role, FP8_ROLE_INPUT);
  ck_assert(t.rows[0].tensor == t.rows[1].tensor); /* interned */
  /* groups: tensor name order, then first appearance */
  ck_assert_uint_eq(t.ngroups, 3);
  ck_assert_uint_eq(t.ntensors, 2);
  ck_assert_str_eq(t.tensors[0], "a.weight");
  ck_assert_str_eq(t.tensors[1], "t.input");
  ck_assert_str_eq(t.groups[0].tensor, "a.weight");
  ck_assert_str_eq(t.groups[1].key.recipe, "d");
  ck_assert_str_eq(t.groups[2].key.recipe, "c");
  const fp8_steps_group *g = &t.groups[1];
  ck_assert_uint_eq(g->nrows, 3);
  ck_assert_int_eq(fp8_steps_csv_group_row(&t, g, 0)->step, 0);
  ck_assert_int_eq(fp8_steps_csv_group_row(&t, g, 1)->step, 10);
  ck_assert_int_eq(fp8_steps_csv_group_row(&t, g, 2)->step, 20);
  for (size_t i = 0; i < t.nrows; i++) ck_assert(&t.groups[t.rows[i].group] != NULL);
  ck_assert_uint_eq(t.rows[3].group, 0);
  ck_assert_uint_eq(t.rows[2].group, 2);
  fp8_config_key d16 = {"d", FP8_KIND_DELAYED, FP8_E4M3, 16, 0, FP8_AMAX_MAX};
  fp8_config_key c0 = {"c", FP8_KIND_CURRENT, FP8_E4M3, 0, 0, FP8_AMAX_MAX};
  fp8_config_key d16m1 = {"d", FP8_KIND_DELAYED, FP8_E4M3, 16, 1, FP8_AMAX_MAX};
  ck_assert_int_eq(fp8_steps_csv_find_group(&t, "t.input", &d16), 1);
  ck_assert_int_eq(fp8_steps_csv_find_group(&t, "t.input", &c0), 2);
  ck_assert_int_eq(fp8_steps_csv_find_group(&t, "t.input", &d16m1), -1);
  fp8_steps_csv_free(&t);
  fp8_steps_csv_free(&t); /* twice is fine */

  /* CRLF line ends and a last line without a newline are accepted; a header-only file is empty */
  sbuf c = {0};
  add_header(&c, V1_COLS, "\r\n");
  addf(&c, "x.output,output,3," D_CFG ",1,1,5,0,0,0,0,0,0,inf");
  ck_assert_int_eq(parse(&c, &t, err, sizeof err), FP8_OK);
  ck_assert_uint_eq(t.nrows, 1);
  ck_assert(isinf(t.rows[0].snr_db));
  fp8_steps_csv_free(&t);
  sbuf h = with_header();
  ck_assert_int_eq(parse(&h, &t, err, sizeof err), FP8_OK);
  ck_assert_uint_eq(t.nrows, 0);
  ck_assert_uint_eq(t.ngroups, 0);
  fp8_steps_csv_free(&t);
  free(b.s);
  free(c.s);
  free(h.s);
}
END_TEST

/* The 24-column schema: block rows (empty scale, block statistics) beside per-tensor rows. */
START_TEST(block_columns) {
  sbuf b = {0};
  add_header(&b, FP8_STEPS_COL_CLIPPED, "\n");
  addf(&b, "x.input,input,0," C_CFG ",4,112,4,0,0,0,0,0,0,inf,,,,,\n");
  addf(&b, "x.input,input,0,mx,mxfp8,e4m3,,,,4,,4,0,0,0,0,1,0.5,12.5,1,0,-5,-5,0\n");
  addf(&b, "x.input,input,0,blk,block,e4m3,,,,4,,4,0,4,0,0,0,0,inf,1,0,nan,nan,nan\n");
  fp8_steps_table t;
  char err[256];
  ck_assert_msg(parse(&b, &t, err, sizeof err) == FP8_OK, "%s", err);
  ck_assert_uint_eq(t.nrows, 3);
  ck_assert_int_eq(t.rows[0].nblocks, -1);
  ck_assert(isnan(t.rows[1].scale));
  ck_assert_int_eq(t.rows[1].kind, FP8_KIND_MXFP8);
  ck_assert_int_eq(t.rows[1].nblocks, 1);
  ck_assert_double_eq(t.rows[1].log2_scale_min, -5.0);
  ck_assert(isnan(t.rows[2].log2_scale_std));
  fp8_steps_csv_free(&t);
  free(b.s);
  /* a block row with a scale, a per-tensor row with block statistics */
  const char *bad[][2] = {
      {"x.input,input,0,mx,mxfp8,e4m3,,,,4,2,4,0,0,0,0,1,0.5,12.5,1,0,-5,-5,0",
       "t.csv:2: column scale: expected an empty field for block kinds (their scales are per block), found '2'"},
      {"x.input,input,0," C_CFG ",4,112,4,0,0,0,0,0,0,inf,1,,,,",
       "t.csv:2: column nblocks: expected an empty field for per-tensor kinds, found '1'"},
      {"x.input,input,0,mx,mxfp8,e4m3,,,,4,,4,0,0,0,0,1,0.5,12.5,1,2,-5,-5,0",
       "t.csv:2: column blocks_with_overflow: expected a count <= nblocks, found '2'"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    sbuf c = {0};
    add_header(&c, FP8_STEPS_COL_CLIPPED, "\n");
    addf(&c, "%s\n", bad[i][0]);
    ck_assert_int_eq(parse(&c, &t, err, sizeof err), FP8_EFORMAT);
    ck_assert_str_eq(err, bad[i][1]);
    free(c.s);
  }
}
END_TEST

/* Each malformed input with the exact message it must produce. */
static const struct {
  const char *line; /* a data line (line 2), or a whole text when it starts with '!' */
  const char *msg;
} BAD[] = {
    {"!", "t.csv:1: empty file (expected the steps.csv header)"},
    {"!tensor,role,step\n", "t.csv:1: not a steps.csv header: 3 columns, expected 30"},
    {"!tensor,role,stp,recipe\n", "t.csv:1: not a steps.csv header: column 3 is 'stp', expected 'step'"},
    {"x.input,input,0," D_CFG ",1,1,100,0,0,0,0,0,0", "t.csv:2: expected 19 fields, found 18"},
    {"x.input,input,0," D_CFG ",1,1,100,0,0,0,0,0,0,1,2", "t.csv:2: expected 19 fields, found more than 19"},
    {"", "t.csv:2: empty line"},
    {",input,0," D_CFG ",1,1,100,0,0,0,0,0,0,1", "t.csv:2: column tensor: expected a tensor name, found ''"},
    {"x.input,inp,0," D_CFG ",1,1,100,0,0,0,0,0,0,1",
     "t.csv:2: column role: expected input, weight, output, grad_output, grad_input or empty, found 'inp'"},
    {"x.input,input,-1," D_CFG ",1,1,100,0,0,0,0,0,0,1", "t.csv:2: column step: expected a step number >= 0, found '-1'"},
    {"x.input,input,0,d d,delayed,e4m3,16,0,max,1,1,100,0,0,0,0,0,0,1",
     "t.csv:2: column recipe: expected a recipe label (A-Z a-z 0-9 _ . -), found 'd d'"},
    {"x.input,input,0,d,lazy,e4m3,16,0,max,1,1,100,0,0,0,0,0,0,1", "t.csv:2: column kind: expected delayed, current, mxfp8, block, rowwise, bf16, nvfp4 or mxfp4, found 'lazy'"},
    {"x.input,input,0,d,delayed,hybrid,16,0,max,1,1,100,0,0,0,0,0,0,1", "t.csv:2: column format: expected e4m3 or e5m2, found 'hybrid'"},
    {"x.input,input,0,d,delayed,e4m3,0,0,max,1,1,100,0,0,0,0,0,0,1",
     "t.csv:2: column history_len: expected an integer in 1..1048576 for delayed scaling, found '0'"},
    {"x.input,input,0,d,delayed,e4m3,16,,max,1,1,100,0,0,0,0,0,0,1",
     "t.csv:2: column margin: expected an integer in -64..64 for delayed scaling, found ''"},
    {"x.input,input,0,d,delayed,e4m3,16,0,mean,1,1,100,0,0,0,0,0,0,1",
     "t.csv:2: column amax_compute: expected max or most_recent for delayed scaling, found 'mean'"},
    {"x.input,input,0,c,current,e4m3,16,,,1,1,100,0,0,0,0,0,0,1",
     "t.csv:2: column history_len: expected an empty field for non-delayed kinds, found '16'"},
    {"x.input,input,0," D_CFG ",abc,1,100,0,0,0,0,0,0,1", "t.csv:2: column amax: expected a number >= 0 or inf, found 'abc'"},
    {"x.input,input,0," D_CFG ",0x1p3,1,100,0,0,0,0,0,0,1", "t.csv:2: column amax: expected a number >= 0 or inf, found '0x1p3'"},
    {"x.input,input,0," D_CFG ",nan,1,100,0,0,0,0,0,0,1", "t.csv:2: column amax: expected a number >= 0 or inf, found 'nan'"},
    {"x.input,input,0," D_CFG ",1,inf,100,0,0,0,0,0,0,1", "t.csv:2: column scale: expected a finite number > 0, found 'inf'"},
    {"x.input,input,0," D_CFG ",1,1,1e2,0,0,0,0,0,0,1", "t.csv:2: column n: expected a count (integer >= 0), found '1e2'"},
    {"x.input,input,0," D_CFG ",1,1,100,101,0,0,0,0,0,1", "t.csv:2: column nonfinite: 101 exceeds n = 100"},
    {"x.input,input,0," D_CFG ",1,1,100,10,0,91,0,0,0,1", "t.csv:2: column overflow: 91 exceeds the 90 finite elements"},
    {"x.input,input,0," D_CFG ",1,1,100,0,0,0,0,0,nan,1",
     "t.csv:2: column mse: 'nan' but the row has 100 finite elements (nan exactly when there is none)"},
    {"x.input,input,0," D_CFG ",1,1,100,100,0,0,0,0,0,1",
     "t.csv:2: column mse: '0' but the row has 0 finite elements (nan exactly when there is none)"},
    {"x.input,input,0," D_CFG ",1,1,100,0,0,0,0,0,-1,1", "t.csv:2: column mse: expected a finite number >= 0 or nan, found '-1'"},
    {"x.input,input,0," D_CFG ",1,1,100,0,0,0,0,0,0,-inf", "t.csv:2: column snr_db: expected a number or inf, found '-inf'"},
    {"x.input,input,0," D_CFG ",1,1,100,0,0,0,0,0,0,1 ", "t.csv:2: column snr_db: expected a number or inf, found '1 '"},
};

START_TEST(malformed_lines) {
  for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
    sbuf b = {0};
    if (BAD[i].line[0] == '!') addf(&b, "%s", BAD[i].line + 1);
    else {
      b = with_header();
      addf(&b, "%s\n", BAD[i].line);
    }
    fp8_steps_table t;
    char err[512] = "";
    int rc = fp8_steps_csv_parse("t.csv", b.s ? b.s : "", b.n, &t, err, sizeof err);
    ck_assert_msg(rc == FP8_EFORMAT, "case %zu: rc %d (%s)", i, rc, err);
    ck_assert_msg(strcmp(err, BAD[i].msg) == 0, "case %zu:\n got      %s\n expected %s", i, err,
                  BAD[i].msg);
    ck_assert_uint_eq(t.nrows, 0);
    ck_assert_ptr_null(t.rows);
    fp8_steps_csv_free(&t);
    free(b.s);
  }
}
END_TEST

START_TEST(malformed_consistency) {
  char err[512];
  fp8_steps_table t;
  /* a duplicate (group, step) is reported at its second line */
  sbuf b = with_header();
  add_row(&b, "x.input", "input", 0, D_CFG, "1,1,100,0,0,0,0,0,0,1");
  add_row(&b, "x.input", "input", 1, D_CFG, "1,1,100,0,0,0,0,0,0,1");
  add_row(&b, "x.input", "input", 0, D_CFG, "1,1,100,0,0,0,0,0,0,1");
  ck_assert_int_eq(parse(&b, &t, err, sizeof err), FP8_EFORMAT);
  ck_assert_str_eq(err, "t.csv:4: duplicate row: step 0 of tensor x.input, configuration d e4m3 "
                        "history_len 16 margin 0 max, already at line 2");
  free(b.s);
  /* a tensor changing role; a recipe label changing kind */
  b = with_header();
  add_row(&b, "x.input", "input", 0, D_CFG, "1,1,100,0,0,0,0,0,0,1");
  add_row(&b, "x.input", "", 1, D_CFG, "1,1,100,0,0,0,0,0,0,1");
  ck_assert_int_eq(parse(&b, &t, err, sizeof err), FP8_EFORMAT);
  ck_assert_str_eq(err, "t.csv:3: tensor x.input has role '' here but 'input' at line 2");
  free(b.s);
  /* a recipe label may have different kinds for different tensors (sections that share a
   * label, issue 14), but a tensor keeps one kind per label */
  b = with_header();
  add_row(&b, "x.input", "input", 0, D_CFG, "1,1,100,0,0,0,0,0,0,1");
  add_row(&b, "y.input", "input", 0, "d,current,e4m3,,,", "1,1,100,0,0,0,0,0,0,1");
  ck_assert_int_eq(parse(&b, &t, err, sizeof err), FP8_OK);
  ck_assert_uint_eq(t.ngroups, 2);
  ck_assert_int_eq(t.groups[0].key.kind, FP8_KIND_DELAYED);
  ck_assert_int_eq(t.groups[1].key.kind, FP8_KIND_CURRENT);
  fp8_steps_csv_free(&t);
  free(b.s);
  b = with_header();
  add_row(&b, "x.input", "input", 0, D_CFG, "1,1,100,0,0,0,0,0,0,1");
  add_row(&b, "y.input", "input", 0, "d,current,e4m3,,,", "1,1,100,0,0,0,0,0,0,1");
  add_row(&b, "x.input", "input", 1, "d,current,e4m3,,,", "1,1,100,0,0,0,0,0,0,1");
  ck_assert_int_eq(parse(&b, &t, err, sizeof err), FP8_EFORMAT);
  ck_assert_str_eq(err, "t.csv:4: tensor x.input: recipe d is current here but delayed at line 2");
  free(b.s);
  /* a NUL byte */
  b = with_header();
  add_row(&b, "x.input", "input", 0, D_CFG, "1,1,100,0,0,0,0,0,0,1");
  b.s[b.n - 3] = 0;
  ck_assert_int_eq(parse(&b, &t, err, sizeof err), FP8_EFORMAT);
  ck_assert_str_eq(err, "t.csv:2: NUL byte in the line");
  free(b.s);
}
END_TEST

START_TEST(load_from_file) {
  char *dir = tu_mkdtemp();
  char path[512], err[512];
  fp8_steps_table t;
  snprintf(path, sizeof path, "%s/steps.csv", dir);
  /* missing file */
  ck_assert_int_eq(fp8_steps_csv_load(path, &t, err, sizeof err), FP8_EIO);
  ck_assert(strncmp(err, path, strlen(path)) == 0);
  /* a bad line 3 names the path and the line */
  sbuf b = with_header();
  add_row(&b, "x.input", "input", 0, D_CFG, "1,1,100,0,0,0,0,0,0,1");
  add_row(&b, "x.input", "input", 1, D_CFG, "1,1,100,0,0,0,0,0,zero,1");
  ck_assert_int_eq(tu_write_file(path, b.s, b.n), 0);
  ck_assert_int_eq(fp8_steps_csv_load(path, &t, err, sizeof err), FP8_EFORMAT);
  char expect[700];
  snprintf(expect, sizeof expect, "%s:3: column mse: expected a finite number >= 0 or nan, found 'zero'",
           path);
  ck_assert_str_eq(err, expect);
  /* every prefix of a valid file either loads or fails with a message: never a crash */
  free(b.s);
  b = with_header();
  add_row(&b, "x.input", "input", 0, D_CFG, "1,1,100,0,0,0,0,0,0,1");
  add_row(&b, "x.input", "input", 1, C_CFG, "1e-3,448,100,100,0,0,0,0,nan,inf");
  for (size_t k = 0; k <= b.n; k++) {
    err[0] = 0;
    int rc = fp8_steps_csv_parse("p.csv", b.s, k, &t, err, sizeof err);
    ck_assert(rc == FP8_OK || (rc == FP8_EFORMAT && strncmp(err, "p.csv:", 6) == 0));
    fp8_steps_csv_free(&t);
  }
  free(b.s);
  tu_rmtree(dir);
  free(dir);
}
END_TEST

/* Numbers are read to the double strtod gives (the loader's short path covers the %.9g ones;
 * other spellings go to strtod): the expected bits are Python's float(s).hex() of each text. */
START_TEST(numbers_parse_exactly) {
  static const struct {
    const char *text;
    double want;
  } v[] = {{"0.000208854675", 0x1.b5fffff5b12c1p-13},  {"8.99519892", 0x1.1fd8ab67cd43cp+3},
           {"1.77305322e-11", 0x1.37eb37dc8b893p-36},  {"1e-22", 0x1.e392010175ee6p-74},
           {"123456789e-30", 0x1.2a800d15b2fe8p-73},   {"0.1", 0x1.999999999999ap-4},
           {"7e22", 0x1.da56a4b0835c0p+75},            {"9007199254740993", 0x1p+53},
           {"1.00000000000000000000001", 0x1p+0},      {"3.4028234663852886e+38", 0x1.fffffep+127}};
  size_t nv = sizeof v / sizeof v[0];
  sbuf b = with_header();
  for (size_t i = 0; i < nv; i++) {
    char rest[256];
    /* the text as amax, mse and snr_db; n = the largest int64 on the first row */
    snprintf(rest, sizeof rest, "%s,1,%s,0,0,0,0,0,%s,%s", v[i].text,
             i ? "100" : "9223372036854775807", v[i].text, v[i].text);
    add_row(&b, "x.input", "input", (long)i, D_CFG, rest);
  }
  fp8_steps_table t;
  char err[256] = "";
  ck_assert_msg(parse(&b, &t, err, sizeof err) == FP8_OK, "%s", err);
  for (size_t i = 0; i < nv; i++) {
    const fp8_step_row *r = &t.rows[i];
    ck_assert_msg(r->amax == v[i].want && r->mse == v[i].want && r->snr_db == v[i].want,
                  "%s: read %a, want %a", v[i].text, r->amax, v[i].want);
  }
  ck_assert(t.rows[0].n == INT64_MAX);
  fp8_steps_csv_free(&t);
  free(b.s);
}
END_TEST

TU_MAIN("steps_table", "stats", NULL, NULL, 0, numbers_parse_exactly, load_and_group,
        malformed_lines, malformed_consistency, load_from_file, block_columns)
