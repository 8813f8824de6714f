/* trace_internal.h: helpers shared by the trace reader's files (trace.c, safetensors.c, npy.c,
 * amaxcsv.c), defined in the leaf trace_util.c: read-only file mappings, and the private part
 * of fp8_step.
 * Not installed, not for use outside src/core/trace*.c and friends.
 */
#ifndef FP8LAB_CORE_TRACE_INTERNAL_H
#define FP8LAB_CORE_TRACE_INTERNAL_H

#include <stddef.h>

#include "trace.h"
#include "util.h" /* fp8_errorf, fp8_grow */

/** A read-only mapping of a whole file. addr is NULL for an empty file. */
typedef struct {
  void *addr;
  size_t len;
} fp8_map;

/** Maps a regular file read-only (FP8_EIO naming path on failure). */
int fp8_map_file(const char *path, fp8_map *m, char *err, size_t errlen);
/** Unmaps (no-op for an empty mapping) and clears m. */
void fp8_map_release(fp8_map *m);

/** What fp8_step.priv points to: the mappings the step's views point into. */
typedef struct {
  size_t nmaps, cap;
  fp8_map *maps;
} fp8_step_priv;

/** Appends a mapping to the step (allocating priv on first use); on FP8_ENOMEM the mapping is
 *  NOT taken over and remains the caller's to release. */
int fp8_step_add_map(fp8_step *s, const fp8_map *m);
/** Sorts the step's tensors by name (strcmp). Returns the index of the first of two equal
 *  names, or -1 when all names are distinct. */
long fp8_step_sort(fp8_step *s);

#endif /* FP8LAB_CORE_TRACE_INTERNAL_H */
