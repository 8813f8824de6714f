/* doc.c: see doc.h. Each block renders itself to Markdown through open_memstream; the
 * notebook is a jansson tree merging consecutive Markdown blocks into one cell, dumped the way
 * Jupyter saves notebooks (indent 1, sorted keys) so that re-saving one gives a small diff. */
#include "doc.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "outfile.h"

typedef enum { BLK_HEADING, BLK_MARKDOWN, BLK_TABLE, BLK_IMAGE, BLK_CODE } blk_kind;

typedef struct {
  blk_kind kind;
  fp8_doc_target target;
  int level;           /* heading: 1-4 */
  char *text;          /* heading text, Markdown, code source, image path */
  char *alt, *caption; /* image; caption may be NULL */
  size_t ncols, nrows, rowcap; /* table: cells[(1 + nrows) * ncols], header row first */
  char **cells;
  char *align; /* table: ncols letters of "lrc" */
} block;

struct fp8_doc {
  block *blocks;
  size_t n, cap;
  fp8_doc_target target;
  int status;    /* sticky: the first failing append */
  char err[256]; /* its message */
};

static void seterr(char *err, size_t errlen, const char *fmt, ...) FP8_DOC_PRINTF(3, 4);
static void seterr(char *err, size_t errlen, const char *fmt, ...) {
  if (!err || errlen == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

static int fail(fp8_doc *d, int status, const char *fmt, ...) FP8_DOC_PRINTF(3, 4);
static int fail(fp8_doc *d, int status, const char *fmt, ...) {
  d->status = status;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(d->err, sizeof d->err, fmt, ap);
  va_end(ap);
  return status;
}

/* Strict UTF-8 (no overlong forms, surrogates or code points past U+10FFFF): the rules
 * jansson's json_string applies, checked at append time so that a write cannot fail on it. */
static int utf8_valid(const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  while (*p) {
    unsigned c = *p;
    size_t n;
    uint32_t cp, min;
    if (c < 0x80) {
      p++;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      n = 1, cp = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2, cp = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3, cp = c & 0x07, min = 0x10000;
    } else {
      return 0;
    }
    for (size_t i = 1; i <= n; i++) { /* stops at the NUL: it is no continuation byte */
      if ((p[i] & 0xC0) != 0x80) return 0;
      cp = (cp << 6) | (p[i] & 0x3Fu);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    p += n + 1;
  }
  return 1;
}

/* Copies a caller's string after checking it; NULL with the document failed otherwise. */
static char *copy_str(fp8_doc *d, const char *s, const char *what, int allow_newline) {
  if (!s) {
    fail(d, FP8_EINVAL, "document: %s is NULL", what);
    return NULL;
  }
  if (!utf8_valid(s)) {
    fail(d, FP8_EINVAL, "document: %s is not valid UTF-8", what);
    return NULL;
  }
  if (!allow_newline && strpbrk(s, "\r\n")) {
    fail(d, FP8_EINVAL, "document: %s \"%.40s...\" holds a line break (one line expected)", what,
         s);
    return NULL;
  }
  char *c = strdup(s);
  if (!c) fail(d, FP8_ENOMEM, "document: out of memory");
  return c;
}

static void block_free(block *b) {
  free(b->text);
  free(b->alt);
  free(b->caption);
  free(b->align);
  if (b->cells)
    for (size_t i = 0; i < (1 + b->nrows) * b->ncols; i++) free(b->cells[i]);
  free(b->cells);
}

/* Appends a zeroed block of the current target; NULL (document failed) when out of memory. */
static block *push(fp8_doc *d, blk_kind kind) {
  if (d->n == d->cap) {
    size_t cap = d->cap ? 2 * d->cap : 16;
    block *nb = realloc(d->blocks, cap * sizeof *nb);
    if (!nb) {
      fail(d, FP8_ENOMEM, "document: out of memory");
      return NULL;
    }
    d->blocks = nb;
    d->cap = cap;
  }
  block *b = &d->blocks[d->n++];
  memset(b, 0, sizeof *b);
  b->kind = kind;
  b->target = d->target;
  return b;
}

/* Removes the block being built after a failure (the status is already set). */
static int pop(fp8_doc *d) {
  block_free(&d->blocks[--d->n]);
  return d->status;
}

/* NULL document: fp8_doc_new failed, so report that; a failed document: its status. */
#define DOC_CHECK(d)                      \
  do {                                    \
    if (!(d)) return FP8_ENOMEM;          \
    if ((d)->status) return (d)->status;  \
  } while (0)

/* Drops trailing newlines in place. */
static void trim_newlines(char *s) {
  size_t n = strlen(s);
  while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r')) s[--n] = 0;
}

/* ------------------------------------------------------------------ building */

fp8_doc *fp8_doc_new(void) {
  return calloc(1, sizeof(fp8_doc));
}

void fp8_doc_free(fp8_doc *doc) {
  if (!doc) return;
  for (size_t i = 0; i < doc->n; i++) block_free(&doc->blocks[i]);
  free(doc->blocks);
  free(doc);
}

int fp8_doc_status(const fp8_doc *doc, char *err, size_t errlen) {
  if (!doc) {
    seterr(err, errlen, "document: out of memory");
    return FP8_ENOMEM;
  }
  if (doc->status) seterr(err, errlen, "%s", doc->err);
  return doc->status;
}

int fp8_doc_set_target(fp8_doc *doc, fp8_doc_target target) {
  DOC_CHECK(doc);
  if (target != FP8_DOC_BOTH && target != FP8_DOC_NOTEBOOK && target != FP8_DOC_MARKDOWN)
    return fail(doc, FP8_EINVAL, "document: target %d is not FP8_DOC_BOTH, _NOTEBOOK or _MARKDOWN",
                (int)target);
  doc->target = target;
  return FP8_OK;
}

int fp8_doc_heading(fp8_doc *doc, int level, const char *text) {
  DOC_CHECK(doc);
  if (level < 1 || level > 4)
    return fail(doc, FP8_EINVAL, "document: heading level %d (expected 1 to 4)", level);
  if (text && !*text) return fail(doc, FP8_EINVAL, "document: empty heading");
  block *b = push(doc, BLK_HEADING);
  if (!b) return doc->status;
  b->level = level;
  if (!(b->text = copy_str(doc, text, "heading", 0))) return pop(doc);
  return FP8_OK;
}

int fp8_doc_markdown(fp8_doc *doc, const char *text) {
  DOC_CHECK(doc);
  block *b = push(doc, BLK_MARKDOWN);
  if (!b) return doc->status;
  if (!(b->text = copy_str(doc, text, "Markdown text", 1))) return pop(doc);
  trim_newlines(b->text);
  if (!*b->text) pop(doc); /* nothing to write: not an error */
  return FP8_OK;
}

int fp8_doc_markdownf(fp8_doc *doc, const char *fmt, ...) {
  DOC_CHECK(doc);
  if (!fmt) return fail(doc, FP8_EINVAL, "document: Markdown format is NULL");
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int len = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (len < 0) {
    va_end(ap2);
    return fail(doc, FP8_EINVAL, "document: cannot format \"%.60s\"", fmt);
  }
  char *s = malloc((size_t)len + 1);
  if (!s) {
    va_end(ap2);
    return fail(doc, FP8_ENOMEM, "document: out of memory");
  }
  vsnprintf(s, (size_t)len + 1, fmt, ap2);
  va_end(ap2);
  int rc = fp8_doc_markdown(doc, s);
  free(s);
  return rc;
}

/* Copies one table row (n cells, NULL cells empty) to dst. */
static int copy_row(fp8_doc *d, char **dst, size_t n, const char *const *cells, const char *what) {
  for (size_t i = 0; i < n; i++) {
    if (!(dst[i] = copy_str(d, cells[i] ? cells[i] : "", what, 1))) return d->status;
  }
  return FP8_OK;
}

int fp8_doc_table_begin(fp8_doc *doc, size_t ncols, const char *const *header, const char *align) {
  DOC_CHECK(doc);
  if (ncols == 0) return fail(doc, FP8_EINVAL, "document: table with 0 columns");
  if (!header) return fail(doc, FP8_EINVAL, "document: table header is NULL");
  if (align) {
    if (strlen(align) != ncols)
      return fail(doc, FP8_EINVAL, "document: table alignment \"%.40s\" has %zu letters, expected %zu",
                  align, strlen(align), ncols);
    if (align[strspn(align, "lrc")] != 0)
      return fail(doc, FP8_EINVAL,
                  "document: table alignment \"%.40s\": expected only 'l', 'r' or 'c'", align);
  }
  block *b = push(doc, BLK_TABLE);
  if (!b) return doc->status;
  b->cells = calloc(ncols, sizeof *b->cells);
  b->align = malloc(ncols + 1);
  if (!b->cells || !b->align) {
    fail(doc, FP8_ENOMEM, "document: out of memory");
    return pop(doc);
  }
  b->ncols = ncols;
  b->rowcap = 0; /* cells holds the header only */
  if (align) {
    memcpy(b->align, align, ncols + 1);
  } else {
    memset(b->align, 'l', ncols);
    b->align[ncols] = 0;
  }
  if (copy_row(doc, b->cells, ncols, header, "table header cell")) return pop(doc);
  return FP8_OK;
}

int fp8_doc_table_row(fp8_doc *doc, const char *const *cells) {
  DOC_CHECK(doc);
  if (doc->n == 0 || doc->blocks[doc->n - 1].kind != BLK_TABLE)
    return fail(doc, FP8_EINVAL, "document: table row without a table (fp8_doc_table_begin first)");
  if (!cells) return fail(doc, FP8_EINVAL, "document: table row is NULL");
  block *b = &doc->blocks[doc->n - 1];
  if (b->nrows == b->rowcap) {
    size_t cap = b->rowcap ? 2 * b->rowcap : 8;
    if (cap > (SIZE_MAX / sizeof(char *) - 1) / b->ncols)
      return fail(doc, FP8_ENOMEM, "document: out of memory");
    char **nc = realloc(b->cells, (1 + cap) * b->ncols * sizeof *nc);
    if (!nc) return fail(doc, FP8_ENOMEM, "document: out of memory");
    b->cells = nc;
    b->rowcap = cap;
  }
  char **dst = b->cells + (1 + b->nrows) * b->ncols;
  memset(dst, 0, b->ncols * sizeof *dst);
  b->nrows++; /* counted now so that block_free frees a partly copied row */
  return copy_row(doc, dst, b->ncols, cells, "table cell");
}

int fp8_doc_image(fp8_doc *doc, const char *path, const char *alt, const char *caption) {
  DOC_CHECK(doc);
  if (path && !*path) return fail(doc, FP8_EINVAL, "document: empty image path");
  block *b = push(doc, BLK_IMAGE);
  if (!b) return doc->status;
  if (!(b->text = copy_str(doc, path, "image path", 0))) return pop(doc);
  if (!(b->alt = copy_str(doc, alt, "image alt text", 0))) return pop(doc);
  if (caption && !(b->caption = copy_str(doc, caption, "image caption", 0))) return pop(doc);
  return FP8_OK;
}

int fp8_doc_code(fp8_doc *doc, const char *source) {
  DOC_CHECK(doc);
  block *b = push(doc, BLK_CODE);
  if (!b) return doc->status;
  if (!(b->text = copy_str(doc, source, "code", 1))) return pop(doc);
  trim_newlines(b->text);
  if (!*b->text) pop(doc);
  return FP8_OK;
}

/* ------------------------------------------------------------------ Markdown */

/* A table cell: '|' escaped (GitHub tables split on it even inside code spans), line breaks
 * as spaces (a table row is one line). */
static void md_cell(FILE *fp, const char *s) {
  for (; *s; s++) {
    if (*s == '|') fputs("\\|", fp);
    else if (*s == '\n' || *s == '\r') fputc(' ', fp);
    else fputc(*s, fp);
  }
}

static void md_row(FILE *fp, char *const *cells, size_t n) {
  fputc('|', fp);
  for (size_t i = 0; i < n; i++) {
    fputc(' ', fp);
    md_cell(fp, cells[i]);
    fputs(" |", fp);
  }
  fputc('\n', fp);
}

/* The longest run of c in s. */
static size_t longest_run(const char *s, char c) {
  size_t best = 0, run = 0;
  for (; *s; s++) {
    run = *s == c ? run + 1 : 0;
    if (run > best) best = run;
  }
  return best;
}

/* One block as Markdown, ending with a newline. */
static void md_block(FILE *fp, const block *b) {
  switch (b->kind) {
  case BLK_HEADING:
    fprintf(fp, "%.*s %s\n", b->level, "####", b->text);
    break;
  case BLK_MARKDOWN:
    fprintf(fp, "%s\n", b->text);
    break;
  case BLK_TABLE:
    md_row(fp, b->cells, b->ncols);
    fputc('|', fp);
    for (size_t i = 0; i < b->ncols; i++)
      fputs(b->align[i] == 'r' ? "---:|" : b->align[i] == 'c' ? ":---:|" : "---|", fp);
    fputc('\n', fp);
    for (size_t r = 0; r < b->nrows; r++) md_row(fp, b->cells + (1 + r) * b->ncols, b->ncols);
    break;
  case BLK_IMAGE: {
    fputs("![", fp);
    for (const char *s = b->alt; *s; s++) {
      if (*s == '[' || *s == ']' || *s == '\\') fputc('\\', fp);
      fputc(*s, fp);
    }
    fputs("](", fp);
    /* A destination with spaces or brackets goes in <...> (CommonMark). */
    if (strpbrk(b->text, " \t()<>")) {
      fputc('<', fp);
      for (const char *s = b->text; *s; s++) {
        if (*s == '<' || *s == '>') fputc('\\', fp);
        fputc(*s, fp);
      }
      fputc('>', fp);
    } else {
      fputs(b->text, fp);
    }
    fputs(")\n", fp);
    if (b->caption) fprintf(fp, "*%s*\n", b->caption);
    break;
  }
  case BLK_CODE: {
    size_t fence = longest_run(b->text, '`') + 1;
    if (fence < 3) fence = 3;
    for (size_t i = 0; i < fence; i++) fputc('`', fp);
    fprintf(fp, "python\n%s\n", b->text);
    for (size_t i = 0; i < fence; i++) fputc('`', fp);
    fputc('\n', fp);
    break;
  }
  }
}

/* Closes a memstream; FP8_ENOMEM (and *buf freed) when any write to it failed. */
static int memstream_close(FILE *fp, char **buf) {
  int bad = ferror(fp) != 0;
  if (fclose(fp) != 0) bad = 1;
  if (bad) {
    free(*buf);
    *buf = NULL;
    return FP8_ENOMEM;
  }
  return FP8_OK;
}

/* The whole Markdown text (malloc'ed): blocks separated by blank lines. */
static int md_render(const fp8_doc *d, char **out, size_t *len) {
  *out = NULL;
  FILE *fp = open_memstream(out, len);
  if (!fp) return FP8_ENOMEM;
  int first = 1;
  for (size_t i = 0; i < d->n; i++) {
    if (d->blocks[i].target == FP8_DOC_NOTEBOOK) continue;
    if (!first) fputc('\n', fp);
    md_block(fp, &d->blocks[i]);
    first = 0;
  }
  return memstream_close(fp, out);
}

/* ------------------------------------------------------------------ notebook */

/* Standard base64 (RFC 4648 section 4). Written here because none of fp8lab's dependencies
 * (jansson, GSL, libpng, PLplot, inih, OpenBLAS) exports an encoder, and GLib's
 * g_base64_encode is not worth a new dependency for twenty lines. */
char *fp8_doc_base64(const void *data, size_t len) {
  static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  if (len / 3 >= SIZE_MAX / 4 - 1) return NULL;
  const unsigned char *p = data;
  char *out = malloc(4 * ((len + 2) / 3) + 1), *o = out;
  if (!out) return NULL;
  size_t i = 0;
  for (; i + 3 <= len; i += 3) {
    uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
    *o++ = tab[v >> 18];
    *o++ = tab[(v >> 12) & 63];
    *o++ = tab[(v >> 6) & 63];
    *o++ = tab[v & 63];
  }
  if (len - i > 0) { /* 1 or 2 bytes left: 2 or 3 symbols and padding */
    uint32_t v = (uint32_t)p[i] << 16 | (len - i == 2 ? (uint32_t)p[i + 1] << 8 : 0);
    *o++ = tab[v >> 18];
    *o++ = tab[(v >> 12) & 63];
    *o++ = len - i == 2 ? tab[(v >> 6) & 63] : '=';
    *o++ = '=';
  }
  *o = 0;
  return out;
}

/* A multi-line string the way Jupyter stores it: a list of lines, each but the last ending
 * with "\n". */
static json_t *source_lines(const char *s, size_t len) {
  while (len > 0 && s[len - 1] == '\n') len--;
  json_t *arr = json_array();
  size_t start = 0;
  for (size_t i = 0; arr && i < len; i++) {
    if (s[i] == '\n' || i + 1 == len) {
      if (json_array_append_new(arr, json_stringn(s + start, i + 1 - start)) != 0) {
        json_decref(arr);
        return NULL;
      }
      start = i + 1;
    }
  }
  return arr;
}

typedef struct {
  json_t *cells;
  size_t ncells;
  FILE *md; /* the Markdown cell being gathered, NULL when none */
  char *mdbuf;
  size_t mdlen;
} nb_build;

/* A new cell with a deterministic id ("cell-0001", ...: nbformat 4.5 wants one per cell). */
static json_t *nb_cell(nb_build *nb, const char *type, json_t *source) {
  char id[32];
  snprintf(id, sizeof id, "cell-%04zu", ++nb->ncells);
  json_t *c = json_object();
  int bad = !c || !source;
  bad |= json_object_set_new(c, "cell_type", json_string(type));
  bad |= json_object_set_new(c, "id", json_string(id));
  bad |= json_object_set_new(c, "metadata", json_object());
  bad |= json_object_set_new(c, "source", source);
  if (strcmp(type, "code") == 0) {
    bad |= json_object_set_new(c, "execution_count", json_null());
    bad |= json_object_set_new(c, "outputs", json_array());
  }
  bad |= json_array_append_new(nb->cells, c);
  return bad ? NULL : c;
}

/* Ends the Markdown cell being gathered, if any. */
static int nb_flush(nb_build *nb) {
  if (!nb->md) return FP8_OK;
  int rc = memstream_close(nb->md, &nb->mdbuf);
  nb->md = NULL;
  if (rc == FP8_OK && !nb_cell(nb, "markdown", source_lines(nb->mdbuf, nb->mdlen)))
    rc = FP8_ENOMEM;
  free(nb->mdbuf);
  nb->mdbuf = NULL;
  return rc;
}

/* Starts or continues the Markdown cell: returns its stream, positioned for a new block. */
static FILE *nb_md(nb_build *nb) {
  if (nb->md) {
    fputc('\n', nb->md);
    return nb->md;
  }
  nb->mdbuf = NULL;
  nb->md = open_memstream(&nb->mdbuf, &nb->mdlen);
  return nb->md;
}

/* Reads a whole file; FP8_EIO / FP8_ENOMEM with the message in err. */
static int read_all(const char *path, unsigned char **data, size_t *len, char *err,
                    size_t errlen) {
  *data = NULL;
  FILE *fp = fopen(path, "rb");
  if (!fp) {
    seterr(err, errlen, "%s: cannot read image: %s", path, strerror(errno));
    return FP8_EIO;
  }
  size_t cap = 1 << 16, n = 0, r;
  unsigned char *buf = malloc(cap);
  int rc = FP8_OK;
  while (buf && (r = fread(buf + n, 1, cap - n, fp)) > 0) {
    n += r;
    if (n == cap) {
      unsigned char *nb = realloc(buf, cap *= 2);
      if (!nb) free(buf);
      buf = nb;
    }
  }
  if (!buf) {
    seterr(err, errlen, "%s: out of memory reading image", path);
    rc = FP8_ENOMEM;
  } else if (ferror(fp)) {
    seterr(err, errlen, "%s: cannot read image: %s", path, strerror(errno));
    rc = FP8_EIO;
    free(buf);
    buf = NULL;
  }
  fclose(fp);
  *data = buf;
  *len = n;
  return rc;
}

/* The image's code cell: Python that displays the file, and its output saved with it. */
static int nb_image(nb_build *nb, const block *b, const char *dir, char *err, size_t errlen) {
  size_t plen = strlen(dir) + strlen(b->text) + 2;
  char *path = malloc(plen);
  if (!path) {
    seterr(err, errlen, "out of memory");
    return FP8_ENOMEM;
  }
  if (b->text[0] == '/') snprintf(path, plen, "%s", b->text);
  else snprintf(path, plen, "%s/%s", dir, b->text);
  unsigned char *png = NULL;
  size_t len = 0;
  char *b64 = NULL, *src = NULL;
  size_t srclen = 0;
  int rc = read_all(path, &png, &len, err, errlen);
  if (rc) goto done;
  static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (len < 8 || memcmp(png, sig, 8) != 0) {
    seterr(err, errlen, "%s: not a PNG file (no PNG signature)", path);
    rc = FP8_EFORMAT;
    goto done;
  }
  rc = FP8_ENOMEM; /* from here on, every failure is an allocation */
  if (!(b64 = fp8_doc_base64(png, len))) goto done;
  /* The path as a Python string literal: backslash escapes for '\\', '"' and control bytes;
   * other bytes are UTF-8, which Python 3 source is. */
  FILE *fp = open_memstream(&src, &srclen);
  if (!fp) goto done;
  fputs("from IPython.display import Image\nImage(filename=\"", fp);
  for (const unsigned char *s = (const unsigned char *)b->text; *s; s++) {
    if (*s == '\\' || *s == '"') fprintf(fp, "\\%c", *s);
    else if (*s < 0x20 || *s == 0x7F) fprintf(fp, "\\x%02x", *s);
    else fputc(*s, fp);
  }
  fputs("\")", fp);
  if (memstream_close(fp, &src)) goto done;
  json_t *cell = nb_cell(nb, "code", source_lines(src, srclen));
  if (!cell) goto done;
  json_t *out = json_object(), *data = json_object();
  int bad = !out || !data;
  bad |= json_object_set_new(data, "image/png", json_string(b64));
  bad |= json_object_set_new(data, "text/plain", json_string("<IPython.core.display.Image object>"));
  bad |= json_object_set_new(out, "data", data);
  bad |= json_object_set_new(out, "metadata", json_object());
  bad |= json_object_set_new(out, "output_type", json_string("display_data"));
  bad |= json_array_append_new(json_object_get(cell, "outputs"), out);
  if (!bad) rc = FP8_OK;
done:
  if (rc == FP8_ENOMEM) seterr(err, errlen, "%s: out of memory embedding image", path);
  free(path);
  free(png);
  free(b64);
  free(src);
  return rc;
}

/* The notebook's JSON text (malloc'ed; the file adds a final newline). */
static int nb_render(const fp8_doc *d, const char *dir, char **out, char *err, size_t errlen) {
  *out = NULL;
  nb_build nb = {0};
  int rc = FP8_ENOMEM;
  json_t *root = json_object(), *meta = json_object(), *ks = json_object(), *li = json_object();
  nb.cells = json_array();
  int bad = !root || !meta || !ks || !li || !nb.cells;
  bad |= json_object_set_new(ks, "display_name", json_string("Python 3"));
  bad |= json_object_set_new(ks, "language", json_string("python"));
  bad |= json_object_set_new(ks, "name", json_string("python3"));
  bad |= json_object_set_new(meta, "kernelspec", ks);
  bad |= json_object_set_new(li, "name", json_string("python"));
  bad |= json_object_set_new(meta, "language_info", li);
  bad |= json_object_set_new(root, "metadata", meta);
  bad |= json_object_set_new(root, "nbformat", json_integer(4));
  bad |= json_object_set_new(root, "nbformat_minor", json_integer(5));
  bad |= json_object_set_new(root, "cells", json_incref(nb.cells));
  if (bad) goto oom;

  for (size_t i = 0; i < d->n; i++) {
    const block *b = &d->blocks[i];
    if (b->target == FP8_DOC_MARKDOWN) continue;
    if (b->kind == BLK_IMAGE || b->kind == BLK_CODE) {
      if (nb_flush(&nb)) goto oom;
      if (b->kind == BLK_IMAGE) {
        if ((rc = nb_image(&nb, b, dir, err, errlen)) != FP8_OK) goto done;
        rc = FP8_ENOMEM;
        if (b->caption) { /* the caption opens the next Markdown cell */
          FILE *fp = nb_md(&nb);
          if (!fp) goto oom;
          fprintf(fp, "*%s*\n", b->caption);
        }
      } else if (!nb_cell(&nb, "code", source_lines(b->text, strlen(b->text)))) {
        goto oom;
      }
    } else {
      FILE *fp = nb_md(&nb);
      if (!fp) goto oom;
      md_block(fp, b);
    }
  }
  if (nb_flush(&nb)) goto oom;
  /* Jupyter's own layout: one-space indent, sorted keys, UTF-8 as is. */
  if (!(*out = json_dumps(root, JSON_INDENT(1) | JSON_SORT_KEYS))) goto oom;
  rc = FP8_OK;
  goto done;
oom:
  rc = FP8_ENOMEM;
  seterr(err, errlen, "out of memory building the notebook");
done:
  if (nb.md) memstream_close(nb.md, &nb.mdbuf);
  free(nb.mdbuf);
  json_decref(nb.cells);
  json_decref(root);
  return rc;
}

/* ------------------------------------------------------------------ writing */

static int doc_ready(const fp8_doc *doc, const char *dir, char *err, size_t errlen) {
  int rc = fp8_doc_status(doc, err, errlen);
  if (rc) return rc;
  if (!dir) {
    seterr(err, errlen, "document: output directory is NULL");
    return FP8_EINVAL;
  }
  return FP8_OK;
}

/* Opens <dir>/<name> under its temporary name and writes text, and a final newline when
 * newline is set (json_dumps ends without one). */
static int open_write(fp8_outfile *of, const char *dir, const char *name, const char *text,
                      size_t len, int newline, char *err, size_t errlen) {
  if (!name || !*name || strchr(name, '/')) {
    seterr(err, errlen, "document: bad output file name \"%s\" (expected a plain name)",
           name ? name : "(null)");
    memset(of, 0, sizeof *of);
    return FP8_EINVAL;
  }
  int rc = fp8_outfile_open(of, dir, name, err, errlen);
  if (rc) return rc;
  fwrite(text, 1, len, of->fp); /* errors surface in fp8_outfile_commit */
  if (newline) fputc('\n', of->fp);
  return FP8_OK;
}

int fp8_doc_write_markdown(const fp8_doc *doc, const char *dir, const char *name, char *err,
                           size_t errlen) {
  int rc = doc_ready(doc, dir, err, errlen);
  if (rc) return rc;
  char *md;
  size_t len;
  if (md_render(doc, &md, &len)) {
    seterr(err, errlen, "out of memory building the Markdown text");
    return FP8_ENOMEM;
  }
  fp8_outfile of;
  rc = open_write(&of, dir, name, md, len, 0, err, errlen);
  if (rc == FP8_OK) rc = fp8_outfile_commit(&of, err, errlen);
  free(md);
  return rc;
}

int fp8_doc_write_notebook(const fp8_doc *doc, const char *dir, const char *name, char *err,
                           size_t errlen) {
  int rc = doc_ready(doc, dir, err, errlen);
  if (rc) return rc;
  char *nb;
  if ((rc = nb_render(doc, dir, &nb, err, errlen)) != FP8_OK) return rc;
  fp8_outfile of;
  rc = open_write(&of, dir, name, nb, strlen(nb), 1, err, errlen);
  if (rc == FP8_OK) rc = fp8_outfile_commit(&of, err, errlen);
  free(nb);
  return rc;
}

int fp8_doc_write(const fp8_doc *doc, const char *dir, const char *md_name, const char *nb_name,
                  char *err, size_t errlen) {
  int rc = doc_ready(doc, dir, err, errlen);
  if (rc) return rc;
  char *md = NULL, *nb = NULL;
  size_t mdlen = 0;
  fp8_outfile mdf = {0}, nbf = {0};
  if ((rc = nb_render(doc, dir, &nb, err, errlen)) != FP8_OK) goto done;
  if (md_render(doc, &md, &mdlen)) {
    seterr(err, errlen, "out of memory building the Markdown text");
    rc = FP8_ENOMEM;
    goto done;
  }
  if ((rc = open_write(&mdf, dir, md_name, md, mdlen, 0, err, errlen)) != FP8_OK) goto done;
  if ((rc = open_write(&nbf, dir, nb_name, nb, strlen(nb), 1, err, errlen)) != FP8_OK) goto done;
  if ((rc = fp8_outfile_commit(&mdf, err, errlen)) != FP8_OK) goto done;
  rc = fp8_outfile_commit(&nbf, err, errlen);
done:
  fp8_outfile_abort(&mdf); /* no-ops once committed */
  fp8_outfile_abort(&nbf);
  free(md);
  free(nb);
  return rc;
}
