/* test_doc.c: the generic document writer (src/doc/doc*.c): the exact Markdown text, the
 * notebook's structure read back with jansson and validated by nbformat itself, the embedded
 * PNG decoded back to its bytes, base64 against RFC 4648's test vectors, escaping, and errors
 * (a missing image writes nothing; a bad append poisons the document). */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "doc.h"
#include "testutil.h"

#define ERRLEN 512

/* The smallest valid PNG: 1x1 RGBA, one transparent pixel (67 bytes; CRCs checked by zlib). */
static const unsigned char PNG1[67] = {
    0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48,
    0x44, 0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00,
    0x00, 0x1F, 0x15, 0xC4, 0x89, 0x00, 0x00, 0x00, 0x0A, 0x49, 0x44, 0x41, 0x54, 0x78,
    0x9C, 0x63, 0x00, 0x01, 0x00, 0x00, 0x05, 0x00, 0x01, 0x0D, 0x0A, 0x2D, 0xB4, 0x00,
    0x00, 0x00, 0x00, 0x49, 0x45, 0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82};

static char *read_text(const char *dir, const char *name) {
  char *p = tu_path(dir, name);
  char *s = tu_read_file(p, NULL);
  free(p);
  return s;
}

/* An independent base64 decoder (line breaks skipped, padding required); NULL when invalid. */
static unsigned char *b64_decode(const char *s, size_t *outlen) {
  unsigned char *out = malloc(strlen(s) + 1);
  uint32_t acc = 0;
  int bits = 0;
  size_t o = 0, sym = 0, pad = 0;
  for (; *s; s++) {
    int v;
    char c = *s;
    if (c == '\n') continue;
    sym++;
    if (c == '=') {
      pad++;
      continue;
    }
    if (pad) goto bad; /* data after padding */
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    else if (c >= '0' && c <= '9') v = c - '0' + 52;
    else if (c == '+') v = 62;
    else if (c == '/') v = 63;
    else goto bad;
    acc = (acc << 6) | (uint32_t)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = (unsigned char)(acc >> bits);
    }
  }
  if (sym % 4 != 0 || pad > 2) goto bad;
  *outlen = o;
  return out;
bad:
  free(out);
  return NULL;
}

/* A notebook multi-line string (a string or a list of strings) joined (malloc'ed). */
static char *nb_text(json_t *v) {
  if (json_is_string(v)) return strdup(json_string_value(v));
  ck_assert_msg(json_is_array(v), "multi-line string is neither a string nor a list");
  size_t n = 1;
  for (size_t i = 0; i < json_array_size(v); i++) n += strlen(json_string_value(json_array_get(v, i)));
  char *s = calloc(1, n);
  for (size_t i = 0; i < json_array_size(v); i++) {
    json_t *line = json_array_get(v, i);
    ck_assert(json_is_string(line));
    /* Jupyter's layout: every line but the last ends with a newline, and only there. */
    const char *l = json_string_value(line);
    const char *nl = strchr(l, '\n');
    if (i + 1 < json_array_size(v)) ck_assert_msg(nl && nl[1] == 0, "line %zu: \"%s\"", i, l);
    else ck_assert_msg(!nl, "last line \"%s\" ends with a newline", l);
    strcat(s, l);
  }
  return s;
}

/* nbformat's own validator; skipped (with the reason printed) when it is not installed. */
static void nbformat_validate(const char *path) {
  char *out = NULL;
  if (tu_run("/usr/bin/python3 -c 'import nbformat'", &out) != 0) {
    printf("test_doc: nbformat validation skipped: /usr/bin/python3 cannot import nbformat: %s\n",
           out);
    free(out);
    return;
  }
  free(out);
  char cmd[4096];
  snprintf(cmd, sizeof cmd,
           "/usr/bin/python3 -c 'import nbformat,sys; "
           "nbformat.validate(nbformat.read(sys.argv[1], as_version=4))' '%s'",
           path);
  int rc = tu_run(cmd, &out);
  ck_assert_msg(rc == 0, "nbformat rejects %s: %s", path, out);
  free(out);
}

START_TEST(test_base64_rfc4648) {
  static const char *const kat[][2] = {{"", ""},         {"f", "Zg=="},     {"fo", "Zm8="},
                                       {"foo", "Zm9v"},  {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="},
                                       {"foobar", "Zm9vYmFy"}};
  for (size_t i = 0; i < sizeof kat / sizeof kat[0]; i++) {
    char *s = fp8_doc_base64(kat[i][0], strlen(kat[i][0]));
    ck_assert_ptr_nonnull(s);
    ck_assert_str_eq(s, kat[i][1]);
    free(s);
  }
  /* Every byte value, and the high bit: through the test's own decoder. */
  unsigned char all[256];
  for (int i = 0; i < 256; i++) all[i] = (unsigned char)(255 - i);
  for (size_t n = 250; n <= 256; n++) {
    char *s = fp8_doc_base64(all, n);
    ck_assert_uint_eq(strlen(s), 4 * ((n + 2) / 3));
    size_t len = 0;
    unsigned char *back = b64_decode(s, &len);
    ck_assert_ptr_nonnull(back);
    ck_assert_uint_eq(len, n);
    ck_assert(memcmp(back, all, n) == 0);
    free(back);
    free(s);
  }
  char *s = fp8_doc_base64(PNG1, sizeof PNG1);
  ck_assert_str_eq(s, "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAACklEQVR4nGMAAQAABQABDQottAAAAABJRU5E"
                      "rkJggg==");
  free(s);
}
END_TEST

/* Every block kind, both targets; the image in a subdirectory as the report's plots will be. */
static fp8_doc *sample_doc(void) {
  fp8_doc *d = fp8_doc_new();
  ck_assert_ptr_nonnull(d);
  ck_assert_int_eq(fp8_doc_heading(d, 1, "Report"), FP8_OK);
  ck_assert_int_eq(fp8_doc_markdownf(d, "Replayed **%d** steps of `%s`.\n\n", 3, "gpt"), FP8_OK);
  ck_assert_int_eq(fp8_doc_heading(d, 2, "Saturation"), FP8_OK);
  ck_assert_int_eq(fp8_doc_table_begin(d, 3, (const char *[]){"tensor", "saturated %", "note"}, "lrc"),
                   FP8_OK);
  ck_assert_int_eq(fp8_doc_table_row(d, (const char *[]){"a|b", "1.50", "x"}), FP8_OK);
  ck_assert_int_eq(fp8_doc_table_row(d, (const char *[]){"fc1", "12.00", NULL}), FP8_OK);
  ck_assert_int_eq(fp8_doc_image(d, "plots/one.png", "one pixel", "Figure 1: a pixel."), FP8_OK);
  ck_assert_int_eq(fp8_doc_markdown(d, "After the figure."), FP8_OK);
  ck_assert_int_eq(fp8_doc_code(d, "x = 1\nprint(x)\n"), FP8_OK);
  ck_assert_int_eq(fp8_doc_set_target(d, FP8_DOC_NOTEBOOK), FP8_OK);
  ck_assert_int_eq(fp8_doc_markdown(d, "Load the data:"), FP8_OK);
  ck_assert_int_eq(fp8_doc_code(d, "import pandas as pd\nsteps = pd.read_csv(\"steps.csv\")"), FP8_OK);
  ck_assert_int_eq(fp8_doc_set_target(d, FP8_DOC_MARKDOWN), FP8_OK);
  ck_assert_int_eq(fp8_doc_markdown(d, "See *report.ipynb* for the data."), FP8_OK);
  ck_assert_int_eq(fp8_doc_image(d, "plots/md only.png", "md [only]", NULL), FP8_OK);
  ck_assert_int_eq(fp8_doc_set_target(d, FP8_DOC_BOTH), FP8_OK);
  ck_assert_int_eq(fp8_doc_heading(d, 4, "End"), FP8_OK);
  ck_assert_int_eq(fp8_doc_status(d, NULL, 0), FP8_OK);
  return d;
}

static const char SAMPLE_MD[] =
    "# Report\n"
    "\n"
    "Replayed **3** steps of `gpt`.\n"
    "\n"
    "## Saturation\n"
    "\n"
    "| tensor | saturated % | note |\n"
    "|---|---:|:---:|\n"
    "| a\\|b | 1.50 | x |\n"
    "| fc1 | 12.00 |  |\n"
    "\n"
    "![one pixel](plots/one.png)\n"
    "*Figure 1: a pixel.*\n"
    "\n"
    "After the figure.\n"
    "\n"
    "```python\n"
    "x = 1\n"
    "print(x)\n"
    "```\n"
    "\n"
    "See *report.ipynb* for the data.\n"
    "\n"
    "![md \\[only\\]](<plots/md only.png>)\n"
    "\n"
    "#### End\n";

/* Writes the PNG as <dir>/plots/one.png. */
static void write_png(const char *dir) {
  char *plots = tu_path(dir, "plots");
  ck_assert_int_eq(mkdir(plots, 0777), 0);
  char *png = tu_path(plots, "one.png");
  ck_assert_int_eq(tu_write_file(png, PNG1, sizeof PNG1), 0);
  free(png);
  free(plots);
}

static json_t *cell_at(json_t *cells, size_t i, const char *type) {
  json_t *c = json_array_get(cells, i);
  ck_assert_ptr_nonnull(c);
  ck_assert_msg(strcmp(json_string_value(json_object_get(c, "cell_type")), type) == 0,
                "cell %zu is %s, expected %s", i, json_string_value(json_object_get(c, "cell_type")),
                type);
  ck_assert(json_is_object(json_object_get(c, "metadata")));
  if (strcmp(type, "code") == 0) ck_assert(json_is_null(json_object_get(c, "execution_count")));
  return c;
}

static void assert_source(json_t *cell, const char *expected) {
  char *s = nb_text(json_object_get(cell, "source"));
  ck_assert_str_eq(s, expected);
  free(s);
}

START_TEST(test_write_both) {
  char *dir = tu_mkdtemp();
  write_png(dir);
  fp8_doc *d = sample_doc();
  char err[ERRLEN] = "";
  int rc = fp8_doc_write(d, dir, "report.md", "report.ipynb", err, sizeof err);
  ck_assert_msg(rc == FP8_OK, "%s", err);
  fp8_doc_free(d);
  ck_assert_int_eq(tu_count_entries(dir), 3); /* plots/, report.md, report.ipynb: no temp files */

  char *md = read_text(dir, "report.md");
  ck_assert_str_eq(md, SAMPLE_MD);
  free(md);

  char *nbpath = tu_path(dir, "report.ipynb");
  json_error_t jerr;
  json_t *nb = json_load_file(nbpath, 0, &jerr);
  ck_assert_msg(nb != NULL, "report.ipynb: %s (line %d)", jerr.text, jerr.line);
  ck_assert_int_eq(json_integer_value(json_object_get(nb, "nbformat")), 4);
  ck_assert_int_eq(json_integer_value(json_object_get(nb, "nbformat_minor")), 5);
  json_t *meta = json_object_get(nb, "metadata");
  ck_assert_str_eq(json_string_value(json_object_get(json_object_get(meta, "kernelspec"), "name")),
                   "python3");
  ck_assert_str_eq(
      json_string_value(json_object_get(json_object_get(meta, "language_info"), "name")), "python");

  /* markdown (heading, paragraph, heading, table) | image + caption | paragraph | code |
   * notebook-only markdown | notebook-only code | heading; the Markdown-only blocks are gone. */
  json_t *cells = json_object_get(nb, "cells");
  ck_assert_uint_eq(json_array_size(cells), 7);
  for (size_t i = 0; i < 7; i++) {
    char want[32];
    snprintf(want, sizeof want, "cell-%04zu", i + 1);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(cells, i), "id")), want);
  }
  assert_source(cell_at(cells, 0, "markdown"),
                "# Report\n\nReplayed **3** steps of `gpt`.\n\n## Saturation\n\n"
                "| tensor | saturated % | note |\n|---|---:|:---:|\n| a\\|b | 1.50 | x |\n"
                "| fc1 | 12.00 |  |");
  /* the image: a Markdown cell with the PNG as its attachment (no output to lose on "Run All") */
  json_t *img = cell_at(cells, 1, "markdown");
  assert_source(img, "![one pixel](attachment:one.png)\n*Figure 1: a pixel.*");
  ck_assert_ptr_null(json_object_get(img, "outputs"));
  json_t *atts = json_object_get(img, "attachments");
  ck_assert_uint_eq(json_object_size(atts), 1);
  json_t *data = json_object_get(atts, "one.png");
  ck_assert_uint_eq(json_object_size(data), 1);
  json_t *pngv = json_object_get(data, "image/png");
  char *b64 = json_is_string(pngv) ? strdup(json_string_value(pngv)) : nb_text(pngv);
  size_t len = 0;
  unsigned char *png = b64_decode(b64, &len);
  ck_assert_msg(png != NULL, "image/png is not valid base64: %s", b64);
  ck_assert_uint_eq(len, sizeof PNG1);
  ck_assert(memcmp(png, PNG1, len) == 0);
  free(png);
  free(b64);
  assert_source(cell_at(cells, 2, "markdown"), "After the figure.");
  json_t *code = cell_at(cells, 3, "code");
  assert_source(code, "x = 1\nprint(x)");
  ck_assert(json_is_array(json_object_get(code, "outputs")));
  ck_assert_uint_eq(json_array_size(json_object_get(code, "outputs")), 0);
  assert_source(cell_at(cells, 4, "markdown"), "Load the data:");
  assert_source(cell_at(cells, 5, "code"), "import pandas as pd\nsteps = pd.read_csv(\"steps.csv\")");
  assert_source(cell_at(cells, 6, "markdown"), "#### End");
  json_decref(nb);

  nbformat_validate(nbpath);

  /* The separate writers give the same files. */
  d = sample_doc();
  ck_assert_int_eq(fp8_doc_write_markdown(d, dir, "again.md", err, sizeof err), FP8_OK);
  ck_assert_int_eq(fp8_doc_write_notebook(d, dir, "again.ipynb", err, sizeof err), FP8_OK);
  fp8_doc_free(d);
  char *a = read_text(dir, "report.ipynb"), *b = read_text(dir, "again.ipynb");
  ck_assert_str_eq(a, b);
  free(a);
  free(b);
  a = read_text(dir, "again.md");
  ck_assert_str_eq(a, SAMPLE_MD);
  free(a);

  free(nbpath);
  tu_rmtree(dir);
  free(dir);
}
END_TEST

START_TEST(test_missing_image) {
  char *dir = tu_mkdtemp();
  fp8_doc *d = sample_doc(); /* plots/one.png not written */
  char err[ERRLEN] = "";
  ck_assert_int_eq(fp8_doc_write(d, dir, "report.md", "report.ipynb", err, sizeof err), FP8_EIO);
  ck_assert_msg(strstr(err, "plots/one.png") != NULL, "message does not name the file: %s", err);
  ck_assert_int_eq(tu_count_entries(dir), 0);
  err[0] = 0;
  ck_assert_int_eq(fp8_doc_write_notebook(d, dir, "report.ipynb", err, sizeof err), FP8_EIO);
  ck_assert_msg(strstr(err, "plots/one.png") != NULL, "message does not name the file: %s", err);
  ck_assert_int_eq(tu_count_entries(dir), 0);
  /* Markdown only links images: it does not need them. */
  ck_assert_int_eq(fp8_doc_write_markdown(d, dir, "report.md", err, sizeof err), FP8_OK);
  ck_assert_int_eq(tu_count_entries(dir), 1);

  /* A file that is not a PNG is refused too. */
  char *plots = tu_path(dir, "plots");
  ck_assert_int_eq(mkdir(plots, 0777), 0);
  char *fake = tu_path(plots, "one.png");
  ck_assert_int_eq(tu_write_file(fake, "GIF89a", 6), 0);
  ck_assert_int_eq(fp8_doc_write(d, dir, "r2.md", "r2.ipynb", err, sizeof err), FP8_EFORMAT);
  ck_assert_msg(strstr(err, "plots/one.png") != NULL, "%s", err);
  ck_assert_int_eq(tu_count_entries(dir), 2); /* report.md, plots/ */
  fp8_doc_free(d);
  free(fake);
  free(plots);
  tu_rmtree(dir);
  free(dir);
}
END_TEST

START_TEST(test_escaping) {
  char *dir = tu_mkdtemp();
  fp8_doc *d = fp8_doc_new();
  fp8_doc_table_begin(d, 2, (const char *[]){"a|b", "c"}, NULL);
  fp8_doc_table_row(d, (const char *[]){"|x|", "two\nlines"});
  fp8_doc_table_row(d, (const char *[]){"`p|q`", "\\"});
  fp8_doc_code(d, "s = \"\"\"\n```\n\"\"\"");
  fp8_doc_markdown(d, "\n\n"); /* empty: nothing appended */
  fp8_doc_code(d, "");
  fp8_doc_image(d, "a\"b\\c.png", "x", NULL);
  char err[ERRLEN] = "";
  ck_assert_msg(fp8_doc_write_markdown(d, dir, "t.md", err, sizeof err) == FP8_OK, "%s", err);
  char *md = read_text(dir, "t.md");
  ck_assert_str_eq(md,
                   "| a\\|b | c |\n"
                   "|---|---|\n"
                   "| \\|x\\| | two lines |\n"
                   "| `p\\|q` | \\ |\n"
                   "\n"
                   "````python\n"
                   "s = \"\"\"\n"
                   "```\n"
                   "\"\"\"\n"
                   "````\n"
                   "\n"
                   "![x](a\"b\\c.png)\n");
  free(md);

  /* The image path becomes a Python string literal with its quote and backslash escaped. */
  char *png = tu_path(dir, "a\"b\\c.png");
  ck_assert_int_eq(tu_write_file(png, PNG1, sizeof PNG1), 0);
  free(png);
  ck_assert_msg(fp8_doc_write_notebook(d, dir, "t.ipynb", err, sizeof err) == FP8_OK, "%s", err);
  char *path = tu_path(dir, "t.ipynb");
  json_t *nb = json_load_file(path, 0, NULL);
  ck_assert_ptr_nonnull(nb);
  json_t *cells = json_object_get(nb, "cells");
  ck_assert_uint_eq(json_array_size(cells), 3);
  assert_source(cell_at(cells, 0, "markdown"),
                "| a\\|b | c |\n|---|---|\n| \\|x\\| | two lines |\n| `p\\|q` | \\ |");
  assert_source(cell_at(cells, 1, "code"), "s = \"\"\"\n```\n\"\"\"");
  /* the attachment's name: the file's base name with the quote and backslash made '_' */
  json_t *icell = cell_at(cells, 2, "markdown");
  assert_source(icell, "![x](attachment:a_b_c.png)");
  ck_assert_ptr_nonnull(json_object_get(json_object_get(icell, "attachments"), "a_b_c.png"));
  json_decref(nb);
  nbformat_validate(path);
  free(path);
  fp8_doc_free(d);
  tu_rmtree(dir);
  free(dir);
}
END_TEST

/* The images' base64 is spliced into the dumped JSON in place of placeholder strings: text in
 * the document that quotes a placeholder stays as it is, and text equal to one (which the
 * splice cannot tell from it) makes the notebook go the slow way; either way each image cell
 * holds its image and every text its text. */
static void assert_image_cell(json_t *cells, size_t i) {
  json_t *atts = json_object_get(cell_at(cells, i, "markdown"), "attachments");
  json_t *data = json_object_get(atts, "one.png");
  const char *b64 = json_string_value(json_object_get(data, "image/png"));
  ck_assert_ptr_nonnull(b64);
  size_t len = 0;
  unsigned char *png = b64_decode(b64, &len);
  ck_assert_msg(png && len == sizeof PNG1 && memcmp(png, PNG1, len) == 0, "cell %zu: not the image",
                i);
  free(png);
}

START_TEST(test_image_placeholders) {
  const char *texts[][2] = {{"say \"@fp8lab-image-0@\" twice: \"@fp8lab-image-1@\"", "x = 1"},
                            {"@fp8lab-image-0@", "@fp8lab-image-1@"}};
  for (int k = 0; k < 2; k++) {
    char *dir = tu_mkdtemp();
    write_png(dir);
    fp8_doc *d = fp8_doc_new();
    ck_assert_int_eq(fp8_doc_image(d, "plots/one.png", "a", NULL), FP8_OK);
    ck_assert_int_eq(fp8_doc_markdown(d, texts[k][0]), FP8_OK);
    ck_assert_int_eq(fp8_doc_image(d, "plots/one.png", "b", NULL), FP8_OK);
    ck_assert_int_eq(fp8_doc_code(d, texts[k][1]), FP8_OK);
    char err[ERRLEN] = "";
    ck_assert_msg(fp8_doc_write_notebook(d, dir, "p.ipynb", err, sizeof err) == FP8_OK, "%s", err);
    fp8_doc_free(d);
    char *path = tu_path(dir, "p.ipynb");
    json_error_t jerr;
    json_t *nb = json_load_file(path, 0, &jerr);
    ck_assert_msg(nb != NULL, "p.ipynb: %s (line %d)", jerr.text, jerr.line);
    json_t *cells = json_object_get(nb, "cells");
    ck_assert_uint_eq(json_array_size(cells), 4);
    assert_image_cell(cells, 0);
    assert_source(cell_at(cells, 1, "markdown"), texts[k][0]);
    assert_image_cell(cells, 2);
    assert_source(cell_at(cells, 3, "code"), texts[k][1]);
    json_decref(nb);
    free(path);
    tu_rmtree(dir);
    free(dir);
  }
}
END_TEST

START_TEST(test_sticky_errors) {
  char *dir = tu_mkdtemp();
  char err[ERRLEN] = "";
  /* Each bad append: FP8_EINVAL, the document refuses later appends and every write. */
  for (int k = 0; k < 8; k++) {
    fp8_doc *d = fp8_doc_new();
    ck_assert_int_eq(fp8_doc_heading(d, 1, "ok"), FP8_OK);
    int rc = -1;
    const char *want = NULL;
    switch (k) {
    case 0: rc = fp8_doc_heading(d, 0, "x"), want = "level 0"; break;
    case 1: rc = fp8_doc_heading(d, 5, "x"), want = "level 5"; break;
    case 2: rc = fp8_doc_heading(d, 2, "two\nlines"), want = "line break"; break;
    case 3: rc = fp8_doc_table_row(d, (const char *[]){"x"}), want = "without a table"; break;
    case 4: rc = fp8_doc_table_begin(d, 2, (const char *[]){"a", "b"}, "r"), want = "1 letters"; break;
    case 5: rc = fp8_doc_table_begin(d, 1, (const char *[]){"a"}, "x"), want = "'l', 'r' or 'c'"; break;
    case 6: rc = fp8_doc_markdown(d, "bad \xC3\x28 utf-8"), want = "UTF-8"; break;
    case 7: rc = fp8_doc_set_target(d, (fp8_doc_target)7), want = "target 7"; break;
    }
    ck_assert_int_eq(rc, FP8_EINVAL);
    ck_assert_int_eq(fp8_doc_markdown(d, "later"), FP8_EINVAL);
    ck_assert_int_eq(fp8_doc_status(d, err, sizeof err), FP8_EINVAL);
    ck_assert_msg(strstr(err, want) != NULL, "case %d: \"%s\" lacks \"%s\"", k, err, want);
    err[0] = 0;
    ck_assert_int_eq(fp8_doc_write(d, dir, "r.md", "r.ipynb", err, sizeof err), FP8_EINVAL);
    ck_assert_msg(strstr(err, want) != NULL, "case %d: \"%s\" lacks \"%s\"", k, err, want);
    ck_assert_int_eq(fp8_doc_write_markdown(d, dir, "r.md", err, sizeof err), FP8_EINVAL);
    ck_assert_int_eq(tu_count_entries(dir), 0);
    fp8_doc_free(d);
  }
  /* A NULL document (fp8_doc_new out of memory) reads as FP8_ENOMEM all the way to the write. */
  ck_assert_int_eq(fp8_doc_heading(NULL, 1, "x"), FP8_ENOMEM);
  ck_assert_int_eq(fp8_doc_write(NULL, dir, "r.md", "r.ipynb", err, sizeof err), FP8_ENOMEM);
  fp8_doc_free(NULL);
  /* A bad file name. */
  fp8_doc *d = fp8_doc_new();
  ck_assert_int_eq(fp8_doc_write_markdown(d, dir, "sub/r.md", err, sizeof err), FP8_EINVAL);
  /* A missing directory: FP8_EIO naming it. */
  char *missing = tu_path(dir, "nope");
  ck_assert_int_eq(fp8_doc_write(d, missing, "r.md", "r.ipynb", err, sizeof err), FP8_EIO);
  ck_assert_msg(strstr(err, "nope") != NULL, "%s", err);
  free(missing);
  ck_assert_int_eq(tu_count_entries(dir), 0);
  fp8_doc_free(d);
  tu_rmtree(dir);
  free(dir);
}
END_TEST

START_TEST(test_empty_doc) {
  char *dir = tu_mkdtemp();
  fp8_doc *d = fp8_doc_new();
  char err[ERRLEN] = "";
  ck_assert_msg(fp8_doc_write(d, dir, "e.md", "e.ipynb", err, sizeof err) == FP8_OK, "%s", err);
  size_t len = 1;
  char *p = tu_path(dir, "e.md");
  free(tu_read_file(p, &len));
  free(p);
  ck_assert_uint_eq(len, 0);
  p = tu_path(dir, "e.ipynb");
  json_t *nb = json_load_file(p, 0, NULL);
  ck_assert_ptr_nonnull(nb);
  ck_assert_uint_eq(json_array_size(json_object_get(nb, "cells")), 0);
  json_decref(nb);
  nbformat_validate(p);
  free(p);
  fp8_doc_free(d);
  tu_rmtree(dir);
  free(dir);
}
END_TEST

int main(void) {
  Suite *s = suite_create("doc");
  TCase *tc = tcase_create("doc");
  tcase_set_timeout(tc, 120); /* nbformat's import takes a second or two */
  tcase_add_test(tc, test_base64_rfc4648);
  tcase_add_test(tc, test_write_both);
  tcase_add_test(tc, test_missing_image);
  tcase_add_test(tc, test_escaping);
  tcase_add_test(tc, test_image_placeholders);
  tcase_add_test(tc, test_sticky_errors);
  tcase_add_test(tc, test_empty_doc);
  suite_add_tcase(s, tc);
  return tu_run_suite(s);
}
