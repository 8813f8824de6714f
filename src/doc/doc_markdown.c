/* doc_markdown.c: the Markdown rendering of a document (doc.h): GitHub pipe tables, CommonMark
 * image links, fenced code; each block renders itself through open_memstream, and the
 * notebook's Markdown cells (doc_notebook.c) are the same text. */
#include "doc_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8.h"
#include "util.h"

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

void doc_md_block(FILE *fp, const block *b) {
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

int doc_memstream_close(FILE *fp, char **buf) {
  int bad = ferror(fp) != 0;
  if (fclose(fp) != 0) bad = 1;
  if (bad) {
    free(*buf);
    *buf = NULL;
    return FP8_ENOMEM;
  }
  return FP8_OK;
}

int doc_md_render(const fp8_doc *d, char **out, size_t *len) {
  *out = NULL;
  FILE *fp = open_memstream(out, len);
  if (!fp) return FP8_ENOMEM;
  int first = 1;
  for (size_t i = 0; i < d->n; i++) {
    if (d->blocks[i].target == FP8_DOC_NOTEBOOK) continue;
    if (!first) fputc('\n', fp);
    doc_md_block(fp, &d->blocks[i]);
    first = 0;
  }
  return doc_memstream_close(fp, out);
}

int fp8_doc_write_markdown(const fp8_doc *doc, const char *dir, const char *name, char *err,
                           size_t errlen) {
  int rc = doc_ready(doc, dir, err, errlen);
  if (rc) return rc;
  char *md;
  size_t len;
  if (doc_md_render(doc, &md, &len)) {
    fp8_errorf(0, err, errlen, "out of memory building the Markdown text");
    return FP8_ENOMEM;
  }
  fp8_outfile of;
  rc = doc_open_write(&of, dir, name, md, len, 0, err, errlen);
  if (rc == FP8_OK) rc = fp8_outfile_commit(&of, err, errlen);
  free(md);
  return rc;
}
