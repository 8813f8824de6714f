/* png_deflate.h: the compressed image data of fp8lab's PNGs (not public; png_io.c writes it as
 * the IDAT chunk). A zlib stream (RFC 1950) of the rows of an 8-bit RGB image, each with filter
 * type 0 (None), compressed by a deflate (RFC 1951) encoder made for charts: a match is looked
 * for at one pixel to the left, one row up and one hashed earlier position (at bytes the first
 * two do not cover), and each block gets its own Huffman codes. Charts are large flat areas,
 * straight lines and repeated glyphs: on the quickstart report's 19 charts this is as small as
 * libpng's default (zlib level 6, adaptive filters) in a twentieth of its time, where zlib's
 * fastest setting (level 1, no filter) takes 3.5 times as long for files 37% larger. Any
 * inflater reads it. */
#ifndef FP8LAB_PLOT_PNG_DEFLATE_H
#define FP8LAB_PLOT_PNG_DEFLATE_H

#include <stddef.h>
#include <stdint.h>

/**
 * Compresses rgb (height rows of width*3 bytes) as PNG image data: the zlib stream of the
 * height rows "0, row bytes". *out is malloc'ed (*outlen bytes) and the caller frees it.
 * @return FP8_OK; FP8_EINVAL (width or height <= 0); FP8_ENOMEM (then *out is NULL).
 */
int fp8_png_deflate(const uint8_t *rgb, int width, int height, uint8_t **out, size_t *outlen);

/** The Adler-32 checksum (RFC 1950) of n bytes, continuing from adler (1 to start). */
uint32_t fp8_png_adler32(uint32_t adler, const uint8_t *p, size_t n);
/** The same with the loop chosen: isa -1 the fastest this CPU runs, 0 baseline, 1 AVX2 (x86-64;
 *  the caller checks the CPU). Every variant returns the same checksum (tests). */
uint32_t fp8_png_adler32_isa(uint32_t adler, const uint8_t *p, size_t n, int isa);

#endif
