/* doc_io.c: what the two renderings (doc_markdown.c, doc_notebook.c) and doc.c share: the
 * document's sticky status, and writing one rendered file. A leaf: it calls nothing of the
 * files above it, so that doc.c -> renderers -> doc_io.c has no cycle. */
#include "doc_internal.h"

#include <string.h>

#include "fp8.h"
#include "util.h"

int fp8_doc_status(const fp8_doc *doc, char *err, size_t errlen) {
  if (!doc) {
    fp8_errorf(0, err, errlen, "document: out of memory");
    return FP8_ENOMEM;
  }
  if (doc->status) fp8_errorf(0, err, errlen, "%s", doc->err);
  return doc->status;
}

int doc_ready(const fp8_doc *doc, const char *dir, char *err, size_t errlen) {
  int rc = fp8_doc_status(doc, err, errlen);
  if (rc) return rc;
  if (!dir) {
    fp8_errorf(0, err, errlen, "document: output directory is NULL");
    return FP8_EINVAL;
  }
  return FP8_OK;
}

int doc_open_write(fp8_outfile *of, const char *dir, const char *name, const char *text,
                   size_t len, int newline, char *err, size_t errlen) {
  if (!name || !*name || strchr(name, '/')) {
    fp8_errorf(0, err, errlen, "document: bad output file name \"%s\" (expected a plain name)",
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
