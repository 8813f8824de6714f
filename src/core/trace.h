/* trace.h: reading captured traces (safetensors or npy snapshots plus an optional amax.csv).
 *
 * A trace directory holds `step_<N>.safetensors` files, or `step_<N>/` folders of
 * `<tensor>.npy` files, and optionally `amax.csv` (`step,tensor,amax`). Data is mapped, never
 * copied: memory stays bounded by one step's tensors however long the trace is.
 * Errors are returned as fp8_status codes with a one-line message in `err` naming the file and
 * the tensor, line or byte offset.
 */
#ifndef FP8LAB_CORE_TRACE_H
#define FP8LAB_CORE_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "fp8.h"

#define FP8_MAX_DIMS 8
#define FP8_ERRLEN 512

/** One tensor of one step: a view into mapped file data (little-endian, C order). */
typedef struct {
  char *name;            /**< `<module path>.<role>` */
  fp8_dtype dtype;
  int ndim;
  int64_t shape[FP8_MAX_DIMS];
  int64_t numel;
  const void *data;      /**< numel * fp8_dtype_size(dtype) bytes */
} fp8_tensor_view;

/** The tensors of one snapshot step, sorted by name. Owns its mappings. */
typedef struct fp8_step fp8_step;
struct fp8_step {
  int64_t step;
  size_t ntensors;
  fp8_tensor_view *tensors;
  void *priv; /* mappings */
};

/** One row of amax.csv. */
typedef struct {
  int64_t step;
  int32_t tensor; /**< index into fp8_trace.amax_names */
  float amax;
} fp8_amax_row;

/** An opened trace: its snapshot steps (ascending) and its amax stream (sorted by step, then
 *  tensor index; may be empty). */
typedef struct {
  char *dir;
  int is_npy;            /**< 1 when the snapshots are step_<N>/ folders of .npy files */
  size_t nsteps;
  int64_t *steps;        /**< snapshot steps, ascending, unique */
  char **step_paths;     /**< file (safetensors) or folder (npy) of each snapshot step */
  size_t namax;
  fp8_amax_row *amax;    /**< amax.csv rows */
  size_t namax_names;
  char **amax_names;     /**< distinct tensor names of amax.csv, sorted */
} fp8_trace;

/** Opens a trace directory: lists the snapshot steps and reads amax.csv (if any) completely.
 *  A directory with neither snapshots nor amax.csv is an error. */
int fp8_trace_open(const char *dir, fp8_trace *tr, char *err, size_t errlen);
void fp8_trace_close(fp8_trace *tr);

/** Maps snapshot i (0 <= i < nsteps) and validates every header against the file size. */
int fp8_trace_load_step(const fp8_trace *tr, size_t i, fp8_step *out, char *err, size_t errlen);
void fp8_step_free(fp8_step *s);

/** Reads one safetensors file (used by fp8_trace_load_step; exposed for tests and tools).
 *  Sets out->step to -1 (fp8_trace_load_step sets the step number). */
int fp8_safetensors_open(const char *path, fp8_step *out, char *err, size_t errlen);

/** Reads one npy snapshot folder: every `<tensor>.npy` file in it (other files, hidden files
 *  and sub-folders are ignored); each file is mapped and validated. Sets out->step to -1
 *  (fp8_trace_load_step sets the step number). */
int fp8_npy_open_step(const char *dir, fp8_step *out, char *err, size_t errlen);

/** Reads an amax.csv file completely into tr's amax, namax, amax_names and namax_names (which
 *  must be empty). On error they are left empty and err names the file and line. */
int fp8_amax_csv_read(const char *path, fp8_trace *tr, char *err, size_t errlen);

/** A tensor to write: host data in the given dtype. */
typedef struct {
  const char *name;
  fp8_dtype dtype;
  int ndim;
  int64_t shape[FP8_MAX_DIMS];
  const void *data;
} fp8_tensor_out;

/** Writes a safetensors file (JSON header via jansson, 8-byte aligned data), to a temporary
 *  name renamed into place. `metadata` may be NULL (string pairs: k0, v0, k1, v1, ..., NULL). */
int fp8_safetensors_write(const char *path, const fp8_tensor_out *tensors, size_t n,
                          const char *const *metadata, char *err, size_t errlen);

#endif /* FP8LAB_CORE_TRACE_H */
