/* engine_check_internal.h: the fixture of engine_check.c (its replay: tensors, configurations,
 * data of every step), built by engine_check_data.c. */
#ifndef FP8LAB_ENGINE_ENGINE_CHECK_INTERNAL_H
#define FP8LAB_ENGINE_ENGINE_CHECK_INTERNAL_H

#include "fp8.h"
#include "recipe.h"

#define CHK_TENSORS 8
#define CHK_LAYER_X 4 /* l0.input, l0.weight, l0.grad_output */
#define CHK_LAYER_W 5
#define CHK_LAYER_G 3

typedef struct {
  int nsteps;
  size_t ntensors;
  const char *names[CHK_TENSORS];
  fp8_role roles[CHK_TENSORS];
  fp8_dtype dtype[CHK_TENSORS];
  int ndim[CHK_TENSORS];
  int64_t shape[CHK_TENSORS][2];
  int64_t numel[CHK_TENSORS];
  size_t red_slot[CHK_TENSORS];
  size_t nred;
  size_t nconfigs;
  fp8_config *configs;         /* owned */
  fp8_format *formats;         /* [ntensors * nconfigs], owned */
  int64_t gemm_max_tokens;
} chk_fixture;

/* The fixture of a size (0 self-check, 1 conformance); FP8_ENOMEM. */
int chk_fixture_init(chk_fixture *f, int size);
void chk_fixture_free(chk_fixture *f);
/* Tensor t's raw bytes at step s in a new buffer (*out; NULL when t does not run at step s). */
int chk_fixture_data(const chk_fixture *f, size_t t, int s, void **out);

#endif /* FP8LAB_ENGINE_ENGINE_CHECK_INTERNAL_H */
