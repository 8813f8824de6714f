/* doc_notebook.c: the notebook rendering of a document (doc.h): a jansson tree merging
 * consecutive Markdown blocks (rendered by doc_markdown.c) into one cell, each image a Markdown
 * cell of its own with the PNG as the cell's attachment (so that executing the notebook keeps
 * it: saved outputs are replaced on "Run All"), dumped the way Jupyter saves notebooks (indent 1, sorted keys) so that
 * re-saving one gives a small diff. The images' base64 is spliced into the dumped text in
 * place of placeholders: the same bytes as dumping it, without jansson's escaping pass. */
#include "doc_internal.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "fp8.h"
#include "util.h"

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

/* An embedded image: its base64 text goes into the dumped JSON in place of a placeholder
 * string (nb_splice), which spares jansson escaping and copying megabytes of it. */
typedef struct {
  char *b64;
  json_t *data; /* its output's "data" object (owned by the tree) */
} nb_img;

typedef struct {
  json_t *cells;
  size_t ncells;
  FILE *md; /* the Markdown cell being gathered, NULL when none */
  char *mdbuf;
  size_t mdlen;
  nb_img *imgs;
  size_t nimgs, capimgs;
} nb_build;

/* The placeholder of image i as it appears in the dumped JSON, quotes included. */
static void nb_token(size_t i, char *buf, size_t n) {
  snprintf(buf, n, "\"@fp8lab-image-%zu@\"", i);
}

/* The dumped text with each image's placeholder replaced by its base64 (which needs no JSON
 * escape: what jansson would have written). NULL when out of memory or when a placeholder is
 * not found exactly once, in order (a string in the document equal to one): the caller then
 * puts the real strings into the tree. */
static char *nb_splice(const char *text, const nb_build *nb) {
  size_t len = strlen(text), total = len, prev = 0;
  size_t *pos = malloc((nb->nimgs + 1) * sizeof *pos);
  char tok[64];
  if (!pos) return NULL;
  for (size_t i = 0; i < nb->nimgs; i++) {
    nb_token(i, tok, sizeof tok);
    const char *at = strstr(text, tok);
    if (!at || strstr(at + 1, tok) || (size_t)(at - text) < prev) {
      free(pos);
      return NULL;
    }
    pos[i] = (size_t)(at - text);
    prev = pos[i] + strlen(tok);
    total += strlen(nb->imgs[i].b64) + 2 - strlen(tok);
  }
  char *out = malloc(total + 1), *o = out;
  for (size_t i = 0, from = 0; out && i <= nb->nimgs; i++) {
    size_t to = i < nb->nimgs ? pos[i] : len;
    memcpy(o, text + from, to - from);
    o += to - from;
    if (i == nb->nimgs) break;
    nb_token(i, tok, sizeof tok);
    size_t n = strlen(nb->imgs[i].b64);
    *o++ = '"';
    memcpy(o, nb->imgs[i].b64, n);
    o += n;
    *o++ = '"';
    from = to + strlen(tok);
  }
  if (out) *o = 0;
  free(pos);
  return out;
}

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
  int rc = doc_memstream_close(nb->md, &nb->mdbuf);
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
    fp8_errorf(0, err, errlen, "%s: cannot read image: %s", path, strerror(errno));
    return FP8_EIO;
  }
  size_t n = 0;
  char *buf = NULL;
  int rc = fp8_read_stream(fp, &buf, &n);
  if (rc == FP8_ENOMEM) fp8_errorf(0, err, errlen, "%s: out of memory reading image", path);
  else if (rc == FP8_EIO) fp8_errorf(0, err, errlen, "%s: cannot read image: %s", path, strerror(errno));
  fclose(fp);
  *data = (unsigned char *)buf;
  *len = n;
  return rc;
}

/* The attachment name of an image: the file's base name, with every byte other than
 * [A-Za-z0-9._-] made '_' (so that "attachment:<name>" needs no Markdown escape). */
static void nb_attachment_name(const char *path, char *buf, size_t n) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  if (!*base) base = "image.png";
  size_t i = 0;
  for (; base[i] && i + 1 < n; i++) {
    unsigned char c = (unsigned char)base[i];
    int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
             c == '.' || c == '_' || c == '-';
    buf[i] = ok ? (char)c : '_';
  }
  buf[i] = 0;
}

/* The image's Markdown cell: "![alt](attachment:<name>)" and its caption, the PNG in the cell's
 * "attachments". An attachment is part of the cell's source, not an output: it survives "Run
 * All" and "Clear outputs", and needs no file next to the notebook. */
static int nb_image(nb_build *nb, const block *b, const char *dir, char *err, size_t errlen) {
  size_t plen = strlen(dir) + strlen(b->text) + 2;
  char *path = malloc(plen);
  if (!path) {
    fp8_errorf(0, err, errlen, "out of memory");
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
    fp8_errorf(0, err, errlen, "%s: not a PNG file (no PNG signature)", path);
    rc = FP8_EFORMAT;
    goto done;
  }
  rc = FP8_ENOMEM; /* from here on, every failure is an allocation */
  if (!(b64 = fp8_doc_base64(png, len))) goto done;
  char name[256], target[300];
  nb_attachment_name(b->text, name, sizeof name);
  snprintf(target, sizeof target, "attachment:%s", name);
  block ref = *b; /* the same image block, pointing at the attachment */
  ref.text = target;
  FILE *fp = open_memstream(&src, &srclen);
  if (!fp) goto done;
  doc_md_block(fp, &ref);
  if (doc_memstream_close(fp, &src)) goto done;
  json_t *cell = nb_cell(nb, "markdown", source_lines(src, srclen));
  if (!cell) goto done;
  nb_img *imgs = fp8_grow(nb->imgs, nb->nimgs, &nb->capimgs, sizeof *imgs, 16);
  if (!imgs) goto done;
  nb->imgs = imgs;
  char tok[64]; /* the placeholder without its quotes */
  nb_token(nb->nimgs, tok, sizeof tok);
  tok[strlen(tok) - 1] = 0;
  json_t *att = json_object(), *data = json_object();
  int bad = !att || !data;
  bad |= json_object_set_new(data, "image/png", json_string(tok + 1));
  imgs[nb->nimgs++] = (nb_img){b64, data};
  b64 = NULL;
  bad |= json_object_set_new(att, name, data);
  bad |= json_object_set_new(cell, "attachments", att);
  if (!bad) rc = FP8_OK;
done:
  if (rc == FP8_ENOMEM) fp8_errorf(0, err, errlen, "%s: out of memory embedding image", path);
  free(path);
  free(png);
  free(b64);
  free(src);
  return rc;
}

int doc_nb_render(const fp8_doc *d, const char *dir, char **out, char *err, size_t errlen) {
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
      } else if (!nb_cell(&nb, "code", source_lines(b->text, strlen(b->text)))) {
        goto oom;
      }
    } else {
      FILE *fp = nb_md(&nb);
      if (!fp) goto oom;
      doc_md_block(fp, b);
    }
  }
  if (nb_flush(&nb)) goto oom;
  /* Jupyter's own layout: one-space indent, sorted keys, UTF-8 as is. */
  char *text = json_dumps(root, JSON_INDENT(1) | JSON_SORT_KEYS);
  if (!text) goto oom;
  *out = nb_splice(text, &nb);
  free(text);
  if (!*out) { /* the slow way: the real strings in the tree */
    for (size_t i = 0; i < nb.nimgs; i++)
      if (json_object_set_new(nb.imgs[i].data, "image/png", json_string(nb.imgs[i].b64)))
        goto oom;
    if (!(*out = json_dumps(root, JSON_INDENT(1) | JSON_SORT_KEYS))) goto oom;
  }
  rc = FP8_OK;
  goto done;
oom:
  rc = FP8_ENOMEM;
  fp8_errorf(0, err, errlen, "out of memory building the notebook");
done:
  if (nb.md) doc_memstream_close(nb.md, &nb.mdbuf);
  free(nb.mdbuf);
  for (size_t i = 0; i < nb.nimgs; i++) free(nb.imgs[i].b64);
  free(nb.imgs);
  json_decref(nb.cells);
  json_decref(root);
  return rc;
}

int fp8_doc_write_notebook(const fp8_doc *doc, const char *dir, const char *name, char *err,
                           size_t errlen) {
  int rc = doc_ready(doc, dir, err, errlen);
  if (rc) return rc;
  char *nb;
  if ((rc = doc_nb_render(doc, dir, &nb, err, errlen)) != FP8_OK) return rc;
  fp8_outfile of;
  rc = doc_open_write(&of, dir, name, nb, strlen(nb), 1, err, errlen);
  if (rc == FP8_OK) rc = fp8_outfile_commit(&of, err, errlen);
  free(nb);
  return rc;
}
