/* doc.c: see doc.h. The document model: appends check and copy their arguments into blocks
 * (errors sticky, see doc.h); the renderings are doc_markdown.c and doc_notebook.c, and
 * fp8_doc_write puts both on disk. */
#include "doc_internal.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8.h"
#include "util.h"

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

/* ------------------------------------------------------------------ writing */

int fp8_doc_write(const fp8_doc *doc, const char *dir, const char *md_name, const char *nb_name,
                  char *err, size_t errlen) {
  int rc = doc_ready(doc, dir, err, errlen);
  if (rc) return rc;
  char *md = NULL, *nb = NULL;
  size_t mdlen = 0;
  fp8_outfile mdf = {0}, nbf = {0};
  if ((rc = doc_nb_render(doc, dir, &nb, err, errlen)) != FP8_OK) goto done;
  if (doc_md_render(doc, &md, &mdlen)) {
    fp8_errorf(0, err, errlen, "out of memory building the Markdown text");
    rc = FP8_ENOMEM;
    goto done;
  }
  if ((rc = doc_open_write(&mdf, dir, md_name, md, mdlen, 0, err, errlen)) != FP8_OK) goto done;
  if ((rc = doc_open_write(&nbf, dir, nb_name, nb, strlen(nb), 1, err, errlen)) != FP8_OK) goto done;
  if ((rc = fp8_outfile_commit(&mdf, err, errlen)) != FP8_OK) goto done;
  rc = fp8_outfile_commit(&nbf, err, errlen);
done:
  fp8_outfile_abort(&mdf); /* no-ops once committed */
  fp8_outfile_abort(&nbf);
  free(md);
  free(nb);
  return rc;
}
