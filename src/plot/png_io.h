/* png_io.h: PNG files for fp8lab's charts, encoded and decoded with libpng. Every PNG carries
 * caller-given text chunks (fp8lab-version, experiment, tensor, configuration, ...) so that a
 * chart found on disk says where it came from. Files are written to a temporary name in the
 * same directory and renamed into place: a PNG is never half-written. */
#ifndef FP8LAB_PLOT_PNG_IO_H
#define FP8LAB_PLOT_PNG_IO_H

#include <stddef.h>
#include <stdint.h>

/** One text chunk: key 1-79 printable ASCII characters without leading, trailing or double
 *  spaces (the PNG rule); value any NUL-terminated string. ASCII values are written as tEXt,
 *  values with bytes >= 0x80 (taken as UTF-8) as iTXt; both read back the same. */
typedef struct {
  const char *key;
  const char *value;
} fp8_png_text;

/** What fp8_png_read_info returns; release with fp8_png_info_free. */
typedef struct {
  int width, height; /**< pixels */
  size_t ntext;      /**< number of text chunks (tEXt, zTXt and iTXt, file order) */
  char **keys;       /**< ntext malloc'ed keys */
  char **values;     /**< ntext malloc'ed values */
} fp8_png_info;

/**
 * Writes an 8-bit RGB image (rgb: height rows of width*3 bytes, top row first) to path, with
 * the given text chunks before the image data. Written to "<dir>/.<name>.tmp.<pid>" and
 * renamed; on any failure no file is left at path nor at the temporary name.
 * @return FP8_OK; FP8_EINVAL (bad size or key, message in err), FP8_EIO (cannot write or
 *         rename), FP8_ENOMEM.
 */
int fp8_png_write(const char *path, const uint8_t *rgb, int width, int height,
                  const fp8_png_text *text, size_t ntext, char *err, size_t errlen);

/**
 * Reads a PNG's size and all its text chunks (before and after the image data).
 * @return FP8_OK; FP8_EIO (cannot open), FP8_EFORMAT (not a PNG or corrupt), FP8_ENOMEM.
 *         On failure *info is zeroed.
 */
int fp8_png_read_info(const char *path, fp8_png_info *info, char *err, size_t errlen);

/** The value of key in info, or NULL. */
const char *fp8_png_info_get(const fp8_png_info *info, const char *key);

/** Frees what fp8_png_read_info allocated and zeroes *info (safe on a zeroed info). */
void fp8_png_info_free(fp8_png_info *info);

/**
 * Reads a PNG's pixels as 8-bit RGB (any colour type and depth is converted; alpha is
 * composited on white). *rgb is malloc'ed: height rows of width*3 bytes, top row first.
 * @return FP8_OK; FP8_EIO, FP8_EFORMAT, FP8_ENOMEM (then *rgb is NULL).
 */
int fp8_png_read_rgb(const char *path, uint8_t **rgb, int *width, int *height, char *err,
                     size_t errlen);

#endif
