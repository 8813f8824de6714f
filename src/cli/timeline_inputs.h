/* timeline_inputs.h: what `fp8lab timeline` reads besides its flags, the parts of it that
 * touch files and processes: a model's shape read from a trace (or a synthetic preset), the
 * device-model file, and the GPU module's timeline entry point. (The plan and the model that
 * use them, which the GPU module shares, are src/timeline: pure C over src/sim.) */
#ifndef FP8LAB_CLI_TIMELINE_INPUTS_H
#define FP8LAB_CLI_TIMELINE_INPUTS_H

#include <stddef.h>

#include "timeline.h"

/** The Linears of a trace (a directory, a run folder of rank_<r>/ traces, or synth:<preset>,
 *  generated into a temporary folder and removed): the tensors of the first snapshot step
 *  (rank 0's) named `<L>.weight`, 2-D view [out, in], with `<L>.input` [tokens, in] or else
 *  `<L>.grad_output` [tokens, out] giving the tokens; in natural name order (numbers by value:
 *  layers.2 before layers.10). layers: the distinct prefixes up to the first all-digit name
 *  component (1 when no name has one); world: the trace's ranks (1 for a single-rank trace).
 *  Errors name the trace: FP8_EINVAL/EFORMAT/EIO as the trace reader gives them, FP8_EINVAL
 *  when no Linear is found. */
int fp8_tl_shape_trace(const char *trace, fp8_tl_shape *s, char *err, size_t errlen);

/** A device model: "h100", "h200" (built in), or an INI file whose [device] section sets any of
 *  name, base (h100 | h200: the defaults of the keys not given; default h200), hbm_gbps,
 *  fp8_tflops, kernel_us, allreduce_us, allreduce_hop_us, allreduce_gbps (positive finite
 *  numbers; hop may be 0). Errors: "FILE:LINE: message", FP8_EINVAL; FP8_EIO when the file
 *  cannot be read. */
int fp8_tl_device_load(const char *spec, fp8_tl_device *d, char *err, size_t errlen);

/** The GPU module's timeline runner, loaded as `fp8lab run --device gpu` loads the engine
 *  (driver probe, fp8lab-gpu.so next to the binary or FP8LAB_GPU_MODULE): *fn, or
 *  FP8_EDEVICE with the reason (*quiet = 1 when there is simply no device or no module). */
int fp8_tl_gpu_load(fp8_tl_gpu_fn *fn, int *quiet, char *err, size_t errlen);

#endif /* FP8LAB_CLI_TIMELINE_INPUTS_H */
