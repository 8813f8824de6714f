/* doc.h: a generic document writer, for the report (src/report). A document is a list of blocks
 * (headings, Markdown paragraphs, tables, PNG images, Python code) built in memory and written
 * twice: as Markdown (report.md) and as a Jupyter notebook (nbformat 4.5, JSON via jansson).
 * It knows nothing of fp8lab's statistics: the report code decides what goes in.
 *
 * Errors are sticky, like cairo's: the first failing append (bad argument, out of memory)
 * is remembered with its message, later appends do nothing, and every write returns it. So a
 * caller may append without checking each call and check the write alone.
 *
 *   fp8_doc *d = fp8_doc_new();
 *   fp8_doc_heading(d, 1, "Analysis");
 *   fp8_doc_markdownf(d, "%zu tensors, %d steps.", n, steps);
 *   fp8_doc_table_begin(d, 2, (const char *[]){"tensor", "saturated"}, "lr");
 *   fp8_doc_table_row(d, (const char *[]){"blocks.0.fc1.input", "0.12"});
 *   fp8_doc_image(d, "plots/amax.png", "amax per step", "Figure 1: amax per step.");
 *   fp8_doc_set_target(d, FP8_DOC_NOTEBOOK);     // pandas loading: notebook only
 *   fp8_doc_code(d, "import pandas as pd\nsteps = pd.read_csv(\"steps.csv\")");
 *   fp8_doc_set_target(d, FP8_DOC_BOTH);
 *   rc = fp8_doc_write(d, outdir, "report.md", "report.ipynb", err, sizeof err);
 *   fp8_doc_free(d);
 */
#ifndef FP8LAB_DOC_DOC_H
#define FP8LAB_DOC_DOC_H

#include <stddef.h>

#if defined(__GNUC__)
#define FP8_DOC_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define FP8_DOC_PRINTF(f, a)
#endif

/** Which outputs a block appears in. */
typedef enum {
  FP8_DOC_BOTH = 0,     /**< Markdown and notebook (the default) */
  FP8_DOC_NOTEBOOK = 1, /**< notebook only (e.g. the cells that load the CSVs with pandas) */
  FP8_DOC_MARKDOWN = 2, /**< Markdown only */
} fp8_doc_target;

/** A document under construction (opaque). */
typedef struct fp8_doc fp8_doc;

/** A new empty document (target FP8_DOC_BOTH); NULL when out of memory. */
fp8_doc *fp8_doc_new(void);
/** Frees a document and everything it holds (NULL is fine). */
void fp8_doc_free(fp8_doc *doc);

/** The document's sticky status: FP8_OK, or the first append's failure with its message
 *  copied into err (err may be NULL). */
int fp8_doc_status(const fp8_doc *doc, char *err, size_t errlen);

/** Sets the target of the blocks appended from now on (FP8_DOC_BOTH until changed); a table's
 *  rows belong to its block, whose target is fixed at fp8_doc_table_begin. FP8_EINVAL when
 *  target is not an fp8_doc_target value. */
int fp8_doc_set_target(fp8_doc *doc, fp8_doc_target target);

/* All appends copy their strings (the caller keeps ownership), take UTF-8 text and return
 * FP8_OK, FP8_EINVAL (bad argument: the message says which) or FP8_ENOMEM; once the document
 * has failed they do nothing and return its status. */

/** A heading, level 1-4 ("#" to "####"); text is one line of Markdown, not empty. */
int fp8_doc_heading(fp8_doc *doc, int level, const char *text);

/** A paragraph of raw Markdown, passed through as is (lists, emphasis, code spans, several
 *  paragraphs: anything). Trailing newlines are dropped; an empty text appends nothing. */
int fp8_doc_markdown(fp8_doc *doc, const char *text);
/** fp8_doc_markdown with printf formatting. */
int fp8_doc_markdownf(fp8_doc *doc, const char *fmt, ...) FP8_DOC_PRINTF(2, 3);

/** Starts a table of ncols >= 1 columns: header[ncols] are the column titles; align is NULL
 *  (every column left) or a string of ncols letters, 'l' left, 'r' right (numbers: "---:"),
 *  'c' centered. Rows follow with fp8_doc_table_row. In Markdown it is a GitHub pipe table;
 *  in a cell, '|' is written "\|" and a newline becomes a space. */
int fp8_doc_table_begin(fp8_doc *doc, size_t ncols, const char *const *header, const char *align);
/** Appends a row of ncols cells (NULL cells are empty) to the table begun last; FP8_EINVAL
 *  when the last block is not a table. */
int fp8_doc_table_row(fp8_doc *doc, const char *const *cells);

/** An image: path of a PNG relative to the directory the documents are written to (the
 *  notebook reads it at write time and embeds it), alt text, optional caption (Markdown, one
 *  line, NULL for none). Markdown: "![alt](path)" and "*caption*" on the next line. Notebook: a
 *  Markdown cell of its own, "![alt](attachment:<file name>)" and the caption, the PNG embedded
 *  (base64) as the cell's attachment, which executing the notebook leaves in place. */
int fp8_doc_image(fp8_doc *doc, const char *path, const char *alt, const char *caption);

/** Python source: a code cell (not run: no outputs) in the notebook, a ```python fenced block
 *  in Markdown (a longer fence when the code holds ```). Trailing newlines are dropped. */
int fp8_doc_code(fp8_doc *doc, const char *source);

/** Writes the Markdown rendering of the document to <dir>/<name> (temporary name, renamed).
 *  Images are only linked: their files are not read. FP8_EIO naming the file on failure. */
int fp8_doc_write_markdown(const fp8_doc *doc, const char *dir, const char *name, char *err,
                           size_t errlen);
/** Writes the notebook to <dir>/<name> (temporary name, renamed). Each image is read from
 *  <dir>/<path> (or <path> if absolute): a missing or unreadable one is FP8_EIO naming it, a
 *  file that is not a PNG is FP8_EFORMAT, and nothing is written. */
int fp8_doc_write_notebook(const fp8_doc *doc, const char *dir, const char *name, char *err,
                           size_t errlen);
/** Writes both: every image is read and both texts are built before either file is opened,
 *  so a missing image (FP8_EIO naming it) leaves nothing written. Markdown is committed first;
 *  only a failing rename of the notebook could leave the new Markdown beside no notebook. */
int fp8_doc_write(const fp8_doc *doc, const char *dir, const char *md_name, const char *nb_name,
                  char *err, size_t errlen);

/** Standard base64 (RFC 4648 section 4, '+' '/', '=' padding, no line breaks) of len bytes, as
 *  a malloc'ed NUL-terminated string; NULL when out of memory. */
char *fp8_doc_base64(const void *data, size_t len);

#endif
