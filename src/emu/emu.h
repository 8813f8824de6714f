/* emu.h: fp8lab's recipe arithmetic for callers outside C (the closed-loop emulator,
 * python/fp8lab/closedloop.py, through ctypes): one recipe of an experiment or advice file,
 * a state per tensor, the cast (quantize, then dequantize) with its statistics, and the
 * delayed-scaling update in TransformerEngine's order. A shared library, libfp8lab_emu.so, over
 * src/sim (the arithmetic) and src/experiment (the file and its tensors globs): the same code
 * fp8lab run replays with, so the emulated run's scales and casts are fp8lab's by construction.
 *
 * Only plain C types cross this interface (no struct of the simulator's), and fp8emu_stats is
 * the one struct: its layout is part of the ABI (FP8EMU_ABI). */
#ifndef FP8LAB_EMU_EMU_H
#define FP8LAB_EMU_EMU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Bumped whenever a signature or fp8emu_stats changes; the Python side refuses another. */
#define FP8EMU_ABI 1
int fp8emu_abi(void);

typedef struct fp8emu fp8emu;

/** The statistics of one cast (fp8emu_qdq), fp8lab's (steps.csv's columns, RECIPES.md). */
typedef struct {
  double amax;       /**< max |x| over the non-NaN elements (inf counts), 0 when none */
  double scale;      /**< the scale the cast used (per-tensor kinds); NaN for the block and
                          FP4 kinds and bf16 */
  double overshoot;  /**< log2(amax * scale / fp8_max) in double (stream.csv's column; -inf
                          for amax 0): > 0 when the tensor's largest element saturated; the
                          block and FP4 kinds: the max over the blocks (steps.csv's column,
                          fp8_block_stats); bf16: -inf (nothing is cast) */
  int64_t n, nonfinite, zeros, overflow, underflow, subnormal, clipped;
  double sum_sq_err, sum_sq, sum_sq_hat;
} fp8emu_stats;

/** Opens experiment file `ini` (any fp8lab experiment or advice.ini) and takes the recipe of
 *  `label`: every [recipe.*] section whose label is `label` (the label key, else the section
 *  name), each with one value per key (a swept key is refused: one run trains one recipe).
 *  NULL with "file:line: message" (or "file: message") in err on any error. */
fp8emu *fp8emu_open(const char *ini, const char *label, char *err, size_t errlen);
void fp8emu_close(fp8emu *e);

/** The slot of a tensor, named as in a trace (`<GEMM>.<role>`, e.g. `blocks.0.attn.qkv.input`;
 *  the role is the last component: input, weight, grad_output, output, grad_input). The first
 *  call creates it (delayed: scale 1, empty history, as TE at step 0). Returns the slot (>= 0),
 *  -1 when no section of the label covers the tensor (it stays in high precision: the caller
 *  does not cast it), -2 on error (err: a name without a known role under format = hybrid,
 *  as fp8lab run refuses it; out of memory). The section is the first of the label, in file
 *  order, whose tensors key matches the name (fp8lab run's rule). The same name gives the
 *  same slot. */
int fp8emu_slot(fp8emu *e, const char *tensor, char *err, size_t errlen);
/** Slots created so far. */
int fp8emu_nslots(const fp8emu *e);
/** The slot's tensor name, its kind ("delayed", "current", "mxfp8", "block", "rowwise", "bf16",
 *  "nvfp4", "mxfp4") and element format ("e4m3", "e5m2", "e2m1"); NULL for a bad slot. */
const char *fp8emu_slot_name(const fp8emu *e, int slot);
const char *fp8emu_slot_kind(const fp8emu *e, int slot);
const char *fp8emu_slot_format(const fp8emu *e, int slot);
/** The configuration's keys, one "key = value" line each (fp8_config_settings). */
const char *fp8emu_slot_settings(const fp8emu *e, int slot);

/** Casts x [rows, cols] (float32, row-major) as the slot's recipe does, writing the
 *  dequantized values to xhat (may equal x) and the statistics to st (may be NULL):
 *  delayed: the state's scale (fp8_quantize_f32: xhat = RN32(decode(q) * RN32(1/s)));
 *  current: the scale of x's own amax; block and FP4 kinds: fp8lab's block quantizer with
 *  blocks along dir (0: along each row, the GEMM contracting over cols; 1: along each column),
 *  its parameters as the CPU engine's for the slot's role and a float32 input (NVFP4's
 *  Hadamard transform stays off);
 *  bf16: xhat = RN_bf16(x) (the operand as BF16 holds it); statistics as fp8lab run's for
 *  that kind. Records x's amax as the slot's pending amax (the max over the calls since the
 *  last fp8emu_update: several calls of a GEMM in a micro-batch). Returns 0, or -2 with err
 *  (NULL e, x or xhat with elements, a bad slot, negative sizes, dir not 0 or 1, out of
 *  memory); nothing is recorded then. */
int fp8emu_qdq(fp8emu *e, int slot, const float *x, int64_t rows, int64_t cols, int dir,
               float *xhat, fp8emu_stats *st, char *err, size_t errlen);

/** The scale the slot's next cast uses (delayed: the state's; current: the last cast's, NaN
 *  before the first; NaN for the block and FP4 kinds and bf16; NaN for a bad slot). */
double fp8emu_scale(const fp8emu *e, int slot);

/** The pending amaxes of slots 0 .. n-1 (n <= fp8emu_nslots; 0 for a slot not cast since the
 *  last update), to be reduced across ranks (max) and written back with fp8emu_set_pending
 *  before fp8emu_update, as TE reduces amaxes over the data-parallel group. Both return 0, or
 *  -2 (no message) for a NULL pointer, n < 0 or n > fp8emu_nslots; set_pending also for an
 *  amax that is negative or NaN (then nothing is written). */
int fp8emu_pending(const fp8emu *e, float *amax, int n);
int fp8emu_set_pending(fp8emu *e, const float *amax, int n);

/** The end of a micro-batch (TE's update after each forward and backward): every delayed
 *  slot rolls its pending amax into its history (an amax of 0, a slot that did not run,
 *  keeps history and scale: fp8_delayed_update) and takes its next scale; pending amaxes are
 *  reset. Returns 0, or -2 with err (out of memory). */
int fp8emu_update(fp8emu *e, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* FP8LAB_EMU_EMU_H */
