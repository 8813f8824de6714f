/* synth.h: synthetic traces that model real training behaviour, so the demo and the tests need
 * no downloads. Presets: "llm", "spiky", "underflow" (src/trace/synth.c, docs/reference.md). */
#ifndef FP8LAB_TRACE_SYNTH_H
#define FP8LAB_TRACE_SYNTH_H

#include <stddef.h>
#include <stdint.h>

/** Writes a trace into dir (created if missing): snapshot safetensors files and amax.csv for
 *  `steps` training steps, deterministic for a given seed. FP8_EINVAL for an unknown preset,
 *  and for a dir that already holds a trace (snapshots or amax.csv), naming it: the old
 *  snapshots at steps the new trace lacks would stay and mix with it (fp8_synth_remove_trace
 *  first replaces it). */
int fp8_synth_write(const char *preset, const char *dir, int64_t steps, uint64_t seed,
                    char *err, size_t errlen);

/** Removes the trace files of dir: step_<N>.safetensors files, step_<N>/ npy folders and
 *  amax.csv, nothing else (a missing dir has none). FP8_OK, or FP8_EIO naming what could not be
 *  removed. */
int fp8_synth_remove_trace(const char *dir, char *err, size_t errlen);

/** The snapshot interval of a synthetic trace of `steps` steps: max(1, round(steps / 20)),
 *  so about 20 snapshots (every 10 steps for 200 steps); snapshots at steps 0, k, 2k, ... */
int64_t fp8_synth_snapshot_interval(int64_t steps);

/** NULL-terminated list of preset names. */
const char *const *fp8_synth_presets(void);

#endif /* FP8LAB_TRACE_SYNTH_H */
