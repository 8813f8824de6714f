/* doc_internal.h: the document model shared by the writer's three files (not public): doc.c
 * builds the blocks and writes both renderings, doc_markdown.c renders Markdown (also the
 * Markdown cells of the notebook), doc_notebook.c renders the notebook. */
#ifndef FP8LAB_DOC_DOC_INTERNAL_H
#define FP8LAB_DOC_DOC_INTERNAL_H

#include <stddef.h>
#include <stdio.h>

#include "doc.h"
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

/* One block as Markdown, ending with a newline (doc_markdown.c). */
void doc_md_block(FILE *fp, const block *b);
/* Closes a memstream; FP8_ENOMEM (and *buf freed) when any write to it failed. */
int doc_memstream_close(FILE *fp, char **buf);
/* The whole Markdown text (malloc'ed): blocks separated by blank lines. */
int doc_md_render(const fp8_doc *d, char **out, size_t *len);
/* The notebook's JSON text (malloc'ed; the file adds a final newline); reads the images
 * (doc_notebook.c). */
int doc_nb_render(const fp8_doc *d, const char *dir, char **out, char *err, size_t errlen);

/* The document's status, and a directory to write to. */
/* doc_io.c */
int doc_ready(const fp8_doc *doc, const char *dir, char *err, size_t errlen);
/* Opens <dir>/<name> under its temporary name and writes text, and a final newline when
 * newline is set (json_dumps ends without one). */
int doc_open_write(fp8_outfile *of, const char *dir, const char *name, const char *text,
                   size_t len, int newline, char *err, size_t errlen);

#endif
