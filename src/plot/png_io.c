/* png_io.c: see png_io.h. libpng reports errors by longjmp: every function here installs its own
 * error handler (which records the message) and cleans up in one place after setjmp returns.
 * Writing, libpng lays out the file (signature, IHDR, text chunks, CRCs) around image data
 * compressed by png_deflate.c. */
#include "png_io.h"

#include <errno.h>
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8.h"
#include "outfile.h"
#include "png_deflate.h"

/* Error state passed to libpng's handlers: the message of the error that longjmp'ed. */
typedef struct {
  char msg[200];
} png_err_ctx;

static void on_png_error(png_structp png, png_const_charp msg) {
  png_err_ctx *ctx = png_get_error_ptr(png);
  if (ctx) snprintf(ctx->msg, sizeof ctx->msg, "%s", msg);
  png_longjmp(png, 1);
}

/* Warnings (e.g. a benign CRC note) are not errors and must not reach stderr. */
static void on_png_warning(png_structp png, png_const_charp msg) {
  (void)png;
  (void)msg;
}

static int key_ok(const char *k) {
  size_t n = k ? strlen(k) : 0;
  if (n < 1 || n > 79 || k[0] == ' ' || k[n - 1] == ' ') return 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)k[i];
    if (c < 0x20 || c > 0x7E) return 0;
    if (c == ' ' && k[i + 1] == ' ') return 0;
  }
  return 1;
}

static int is_ascii(const char *s) {
  for (; *s; s++)
    if ((unsigned char)*s >= 0x80) return 0;
  return 1;
}

int fp8_png_write(const char *path, const uint8_t *rgb, int width, int height,
                  const fp8_png_text *text, size_t ntext, char *err, size_t errlen) {
  if (!path || !*path || !rgb || width <= 0 || height <= 0 || (ntext && !text)) {
    snprintf(err, errlen, "png %s: expected a path, pixels and a positive size, got %dx%d",
             path ? path : "(null)", width, height);
    return FP8_EINVAL;
  }
  for (size_t i = 0; i < ntext; i++) {
    if (!key_ok(text[i].key)) {
      snprintf(err, errlen,
               "png %s: text key %zu \"%s\" is not 1-79 printable ASCII characters without "
               "leading, trailing or double spaces", path, i, text[i].key ? text[i].key : "(null)");
      return FP8_EINVAL;
    }
    if (!text[i].value) {
      snprintf(err, errlen, "png %s: text key \"%s\" has a NULL value", path, text[i].key);
      return FP8_EINVAL;
    }
  }

  /* Split path into directory and file name for fp8_outfile (tmp name in the same dir). */
  const char *slash = strrchr(path, '/');
  char *dir = NULL;
  if (slash) {
    size_t dlen = (size_t)(slash - path);
    dir = malloc(dlen + 2);
    if (!dir) {
      snprintf(err, errlen, "out of memory");
      return FP8_ENOMEM;
    }
    if (dlen == 0) {
      strcpy(dir, "/");
    } else {
      memcpy(dir, path, dlen);
      dir[dlen] = 0;
    }
  }
  const char *name = slash ? slash + 1 : path;
  if (!*name) {
    free(dir);
    snprintf(err, errlen, "png %s: path names a directory, expected a file", path);
    return FP8_EINVAL;
  }

  uint8_t *zdata_ = NULL;
  size_t zlen = 0;
  if (fp8_png_deflate(rgb, width, height, &zdata_, &zlen) != FP8_OK) {
    free(dir);
    snprintf(err, errlen, "out of memory");
    return FP8_ENOMEM;
  }
  uint8_t *volatile zdata = zdata_; /* freed after a longjmp too */
  fp8_outfile of;
  int rc = fp8_outfile_open(&of, dir ? dir : ".", name, err, errlen);
  free(dir);
  if (rc != FP8_OK) {
    free(zdata);
    return rc;
  }

  png_err_ctx ctx = {{0}};
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &ctx, on_png_error,
                                            on_png_warning);
  png_infop info = png ? png_create_info_struct(png) : NULL;
  png_text *volatile chunks = NULL;
  if (!png || !info) {
    png_destroy_write_struct(&png, &info);
    fp8_outfile_abort(&of);
    free(zdata);
    snprintf(err, errlen, "out of memory");
    return FP8_ENOMEM;
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    free(chunks);
    free(zdata);
    fp8_outfile_abort(&of);
    snprintf(err, errlen, "png %s: libpng: %s", path, ctx.msg);
    return FP8_EWRITE; /* our own pixels: what fails here is the writing (libpng's "Write Error") */
  }
  png_init_io(png, of.fp);
  png_set_IHDR(png, info, (png_uint_32)width, (png_uint_32)height, 8, PNG_COLOR_TYPE_RGB,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (ntext) {
    chunks = calloc(ntext, sizeof *chunks);
    if (!chunks) png_error(png, "out of memory");
    for (size_t i = 0; i < ntext; i++) {
      chunks[i].key = (png_charp)text[i].key;
      chunks[i].text = (png_charp)text[i].value;
      chunks[i].text_length = strlen(text[i].value);
      if (is_ascii(text[i].value)) {
        chunks[i].compression = PNG_TEXT_COMPRESSION_NONE;
      } else {
        chunks[i].compression = PNG_ITXT_COMPRESSION_NONE;
        chunks[i].itxt_length = chunks[i].text_length;
        chunks[i].text_length = 0;
      }
    }
    png_set_text(png, info, chunks, (int)ntext);
  }
  png_write_info(png, info);
  /* the image data is png_deflate.c's zlib stream (libpng's zlib deflate took 20 times as
   * long for the same size), in IDAT chunks of at most 1 MiB, then the end chunk */
  for (size_t off = 0; off < zlen; off += (size_t)1 << 20) {
    size_t n = zlen - off < (size_t)1 << 20 ? zlen - off : (size_t)1 << 20;
    png_write_chunk(png, (png_const_bytep) "IDAT", zdata + off, n);
  }
  png_write_chunk(png, (png_const_bytep) "IEND", NULL, 0);
  png_destroy_write_struct(&png, &info);
  free(chunks);
  free(zdata);
  return fp8_outfile_commit(&of, err, errlen);
}

/* Opens path and checks the signature; on success *fpp is open and positioned after it. */
static int open_png(const char *path, FILE **fpp, char *err, size_t errlen) {
  FILE *fp = fopen(path, "rb");
  if (!fp) {
    snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    return FP8_EIO;
  }
  unsigned char sig[8];
  if (fread(sig, 1, 8, fp) != 8 || png_sig_cmp(sig, 0, 8) != 0) {
    fclose(fp);
    snprintf(err, errlen, "%s: not a PNG file (bad signature)", path);
    return FP8_EFORMAT;
  }
  *fpp = fp;
  return FP8_OK;
}

/* Appends the text chunks of info to out (which owns its strings). */
static int collect_text(png_structp png, png_infop info, fp8_png_info *out) {
  png_textp t = NULL;
  int n = 0;
  png_get_text(png, info, &t, &n);
  if (n <= 0) return FP8_OK;
  char **k = realloc(out->keys, (out->ntext + (size_t)n) * sizeof *k);
  if (!k) return FP8_ENOMEM;
  out->keys = k;
  char **v = realloc(out->values, (out->ntext + (size_t)n) * sizeof *v);
  if (!v) return FP8_ENOMEM;
  out->values = v;
  for (int i = 0; i < n; i++) {
    size_t len = t[i].compression > 0 ? t[i].itxt_length : t[i].text_length;
    char *key = strdup(t[i].key);
    char *val = malloc(len + 1);
    if (!key || !val) {
      free(key);
      free(val);
      return FP8_ENOMEM;
    }
    if (len) memcpy(val, t[i].text, len);
    val[len] = 0;
    out->keys[out->ntext] = key;
    out->values[out->ntext] = val;
    out->ntext++;
  }
  return FP8_OK;
}

int fp8_png_read_info(const char *path, fp8_png_info *info, char *err, size_t errlen) {
  memset(info, 0, sizeof *info);
  FILE *fp = NULL;
  int rc = open_png(path, &fp, err, errlen);
  if (rc != FP8_OK) return rc;
  png_err_ctx ctx = {{0}};
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &ctx, on_png_error,
                                           on_png_warning);
  png_infop pinfo = png ? png_create_info_struct(png) : NULL;
  png_infop end = png ? png_create_info_struct(png) : NULL;
  if (!png || !pinfo || !end) {
    png_destroy_read_struct(&png, &pinfo, &end);
    fclose(fp);
    snprintf(err, errlen, "out of memory");
    return FP8_ENOMEM;
  }
  volatile int status = FP8_OK;
  if (setjmp(png_jmpbuf(png))) {
    if (status == FP8_OK) {
      status = FP8_EFORMAT;
      snprintf(err, errlen, "%s: corrupt PNG: %s", path, ctx.msg);
    }
    goto done;
  }
  png_init_io(png, fp);
  png_set_sig_bytes(png, 8);
  png_read_info(png, pinfo);
  info->width = (int)png_get_image_width(png, pinfo);
  info->height = (int)png_get_image_height(png, pinfo);
  if (collect_text(png, pinfo, info) != FP8_OK) {
    status = FP8_ENOMEM;
    snprintf(err, errlen, "out of memory");
    goto done;
  }
  /* Text chunks may also follow the image data: skip the rows (decoded, which also verifies
   * the data) and read the end. */
  png_set_expand(png);
  png_set_strip_16(png);
  png_read_update_info(png, pinfo);
  {
    png_size_t rowbytes = png_get_rowbytes(png, pinfo);
    int passes = png_set_interlace_handling(png);
    png_bytep row = malloc(rowbytes);
    if (!row) {
      status = FP8_ENOMEM;
      snprintf(err, errlen, "out of memory");
      goto done;
    }
    /* row must be freed if libpng longjmps: keep it in ctx-free storage via a second setjmp. */
    if (setjmp(png_jmpbuf(png))) {
      free(row);
      status = FP8_EFORMAT;
      snprintf(err, errlen, "%s: corrupt PNG: %s", path, ctx.msg);
      goto done;
    }
    for (int p = 0; p < passes; p++)
      for (int y = 0; y < info->height; y++) png_read_row(png, row, NULL);
    free(row);
  }
  if (setjmp(png_jmpbuf(png))) {
    status = FP8_EFORMAT;
    snprintf(err, errlen, "%s: corrupt PNG: %s", path, ctx.msg);
    goto done;
  }
  png_read_end(png, end);
  if (collect_text(png, end, info) != FP8_OK) {
    status = FP8_ENOMEM;
    snprintf(err, errlen, "out of memory");
  }
done:
  png_destroy_read_struct(&png, &pinfo, &end);
  fclose(fp);
  if (status != FP8_OK) fp8_png_info_free(info);
  return status;
}

const char *fp8_png_info_get(const fp8_png_info *info, const char *key) {
  for (size_t i = 0; i < info->ntext; i++)
    if (strcmp(info->keys[i], key) == 0) return info->values[i];
  return NULL;
}

void fp8_png_info_free(fp8_png_info *info) {
  for (size_t i = 0; i < info->ntext; i++) {
    free(info->keys ? info->keys[i] : NULL);
    free(info->values ? info->values[i] : NULL);
  }
  free(info->keys);
  free(info->values);
  memset(info, 0, sizeof *info);
}

int fp8_png_read_rgb(const char *path, uint8_t **rgb, int *width, int *height, char *err,
                     size_t errlen) {
  *rgb = NULL;
  /* libpng's simplified API does the conversions (palette, grey, 16 bit, alpha on white). */
  png_image img;
  memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  FILE *fp = fopen(path, "rb");
  if (!fp) {
    snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    return FP8_EIO;
  }
  if (!png_image_begin_read_from_stdio(&img, fp)) {
    snprintf(err, errlen, "%s: not a readable PNG: %s", path, img.message);
    png_image_free(&img);
    fclose(fp);
    return FP8_EFORMAT;
  }
  img.format = PNG_FORMAT_RGB;
  size_t size = PNG_IMAGE_SIZE(img);
  uint8_t *buf = malloc(size);
  if (!buf) {
    png_image_free(&img);
    fclose(fp);
    snprintf(err, errlen, "out of memory");
    return FP8_ENOMEM;
  }
  png_color white = {255, 255, 255};
  if (!png_image_finish_read(&img, &white, buf, 0, NULL)) {
    snprintf(err, errlen, "%s: corrupt PNG: %s", path, img.message);
    png_image_free(&img);
    free(buf);
    fclose(fp);
    return FP8_EFORMAT;
  }
  fclose(fp);
  *rgb = buf;
  *width = (int)img.width;
  *height = (int)img.height;
  return FP8_OK;
}
