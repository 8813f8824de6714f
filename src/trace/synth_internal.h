/* synth_internal.h: what the two files of the synthetic-trace generator share: the model's
 * state (synth_model.c generates it one step at a time, with the presets' behaviours) and the
 * BF16 packing; synth.c writes what synth_model.c generates. synth.c calls synth_model.c, never
 * the other way round. Not installed, not for use outside src/trace/synth*.c.
 */
#ifndef FP8LAB_TRACE_SYNTH_INTERNAL_H
#define FP8LAB_TRACE_SYNTH_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "fp8.h"
#include "trace.h" /* fp8_tensor_out */

#define SYN_LAYERS 4
#define SYN_MODULES 4
#define SYN_ROLES 4
#define SYN_NTENSORS (SYN_LAYERS * SYN_MODULES * SYN_ROLES)
#define SYN_TOKENS 64
#define SYN_MAX_DIM 512
#define SYN_HID_OUTLIERS 4  /* outlier channels of the residual stream (qkv/fc1 inputs) */
#define SYN_FFN_OUTLIERS 3  /* massive-activation channels of fc1.output */
#define SYN_SPIKE_MAX_ROWS 4

typedef enum { PRESET_LLM, PRESET_SPIKY, PRESET_UNDERFLOW } syn_preset;

typedef struct {
  char name[48];
  int layer, module, role;
  int64_t rows, cols;
  fp8_dtype dtype;
  float *val;        /* this step's values (weights: the persistent weights) */
  uint16_t *packed;  /* BF16 bit patterns for a snapshot (NULL for F32 tensors) */
  float amax;
  int present;
  /* this step's spike: rows multiplied by factor (factor 1 = none) */
  float spike_factor;
  int spike_nrows;
  int spike_rows[SYN_SPIKE_MAX_ROWS];
} syn_tensor;

typedef struct {
  syn_preset preset;
  int64_t steps;
  gsl_rng *rng; /* data */
  gsl_rng *ev;  /* events */
  syn_tensor t[SYN_NTENSORS];
  syn_tensor *order[SYN_NTENSORS]; /* the tensors sorted by name */
  int hid_col[SYN_HID_OUTLIERS];
  float hid_mag[SYN_HID_OUTLIERS];
  int ffn_col[SYN_FFN_OUTLIERS];
  float ffn_mean[SYN_FFN_OUTLIERS];
  float w_std[SYN_MODULES];
  float tok[SYN_TOKENS];  /* this step's per-token activation scale */
  float tokg[SYN_TOKENS]; /* this step's per-token gradient scale */
  float u[SYN_MAX_DIM], v[SYN_MAX_DIM];
  /* the scheduled spike (llm, spiky) */
  int64_t spike_step, spike_len;
  int spike_layer;
  /* the next frequent spike (spiky) */
  int64_t next_spike;
} syn_state;

/* float32 -> BF16 with round to nearest, ties to even; NaN stays a (quiet) NaN of its sign
 * (adding the rounding bias to a NaN payload could carry it into an infinity). Inline: it runs
 * over every element of every step, in both files. */
static inline uint16_t fp8_synth_f32_to_bf16(float x) {
  uint32_t b;
  memcpy(&b, &x, sizeof b);
  if ((b & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((b >> 16) | 0x0040u);
  b += 0x7FFFu + ((b >> 16) & 1u);
  return (uint16_t)(b >> 16);
}

/** Allocates and seeds the state of a trace of `steps` steps (st is zeroed first). FP8_ENOMEM
 *  when out of memory; fp8_synth_state_free is then still needed. */
int fp8_synth_state_init(syn_state *st, syn_preset preset, int64_t steps, uint64_t seed);
/** Frees what fp8_synth_state_init allocated (not st itself). */
void fp8_synth_state_free(syn_state *st);
/** Generates step `step` (called for 0, 1, ..., steps-1 in order): every tensor's values as
 *  stored (BF16-rounded where BF16), its amax, and whether its module ran. */
void fp8_synth_gen_step(syn_state *st, int64_t step);

/** Rounds n floats in place to the values their BF16 encoding decodes to (synth_model.c). */
void fp8_synth_round_bf16(float *x, size_t n);
/** Student-t with 4 degrees of freedom, Bailey's polar method (synth_model.c). */
float fp8_synth_student_t4(gsl_rng *r);

/* synth_snapshot.c: a snapshot's tensors and file, for every preset */
/** Fills *o with a 2-D tensor of rows x cols float values val (BF16 ones packed into packed
 *  first, which holds rows * cols; F32 ones point at val). */
void fp8_synth_tensor_out(fp8_tensor_out *o, const char *name, fp8_dtype dtype, int64_t rows,
                          int64_t cols, const float *val, uint16_t *packed);
/** Writes <dir>/step_<step>.safetensors from out[0..n) with the generator's metadata (preset,
 *  seed, steps, step). FP8_OK, or fp8_safetensors_write's status and message. */
int fp8_synth_snapshot_write(const char *dir, int64_t step, int64_t steps, const char *preset,
                             uint64_t seed, const fp8_tensor_out *out, size_t n, char *err,
                             size_t errlen);

/** The "moe" preset (synth_moe.c): writes the snapshots, amax.csv and tokens.csv of a
 *  Mixture-of-Experts trace into dir (which exists and holds no trace: synth.c checked). */
int fp8_synth_moe_write(const char *dir, int64_t steps, uint64_t seed, char *err, size_t errlen);

#endif /* FP8LAB_TRACE_SYNTH_INTERNAL_H */
