/* engine_check.h: an engine against the simulator, op by op (ggml's test-backend-ops): the GPU
 * engine's built-in self-check at start (small), and the conformance test of every engine the
 * build has (full; tests/engine/test_engine_conformance.c).
 *
 * The check builds its own replay: eight tensors (F32, BF16, F16; the three roles of a linear
 * layer; a pair that shares an amax-reduction slot) whose values cover FP8 rounding ties of both
 * formats at power-of-two scales, FP8 and float32 subnormals, values that flush to zero,
 * saturation after an amax jump, NaN, +-inf and +-0; a tensor that skips a step; delayed
 * configurations (history 1, 2, 16, ..., margins, max / most_recent, every format selection),
 * current ones (epsilon, pow2, margin) and the block kinds; and a layer whose GEMM operands are
 * integers at power-of-two scales, so that every product and partial sum is exact in FP32 (and
 * in Hopper's reduced-precision fast accumulation): its errors do not depend on the order of
 * accumulation. It then runs the step lifecycle of engine.h on the engine, computes the same
 * with src/sim directly (the oracle keeps its own delayed states and does its own reduction),
 * and compares: amax, histogram, scales, codes (cast), counts, block statistics and the
 * delayed state after each end_phase bit for bit; the three double sums and the GEMM errors
 * within 1e-6 relative. Ops the engine declines (supports() = 0) are skipped and counted.
 */
#ifndef FP8LAB_ENGINE_ENGINE_CHECK_H
#define FP8LAB_ENGINE_ENGINE_CHECK_H

#include "engine.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  int full;                    /**< 0: the self-check (a few thousand values, 3 steps, 10
                                    configurations); 1: the conformance suite (about 10^6
                                    values, 6 steps, more than 64 per-tensor configurations) */
  int threads;                 /**< the plan's threads */
  const fp8_engine_comm *comm; /**< given to the engine's plan (counted); NULL: none */
} fp8_check_options;

typedef struct {
  long long values;            /**< values compared */
  long long mismatches;
  long long declined;          /**< (op, configuration) pairs the engine declined */
  long long gemm_layers;       /**< layer GEMM calls compared */
  long long comm_calls;        /**< all-reduces the engine made through opt->comm */
  /* coverage of saturation, over the per-tensor statistics compared (simulator's values), so
   * that a test can require both sides of the clipped midpoint to have been reached */
  long long clipped_cases;     /**< (step, tensor, configuration) with clipped > 0 */
  long long unclipped_cases;   /**< ... with overflow > clipped: |x s| in (max, midpoint] */
  char first[512];             /**< the first mismatch, "" when none */
  double seconds;
} fp8_check_report;

/** Runs the check on an engine made by `make`. Returns FP8_OK when the check ran to the end
 *  (rep->mismatches says whether it passed), or the status of the engine's first failing op
 *  (then err says which op). */
int fp8_engine_check(fp8_engine_factory make, const fp8_check_options *opt,
                     fp8_check_report *rep, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* FP8LAB_ENGINE_ENGINE_CHECK_H */
