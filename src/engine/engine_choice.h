/* engine_choice.h: how a run's engine was chosen (`--device`, the GPU module, its self-check),
 * as the engine selection (engine_load.h) records it for run.json. Apart from engine_load.h so
 * that the runner, which writes it into run.json, sees the record and not the module loader. */
#ifndef FP8LAB_ENGINE_ENGINE_CHOICE_H
#define FP8LAB_ENGINE_ENGINE_CHOICE_H

/** How the engine was chosen, for run.json (fp8_engine_select fills it). */
typedef struct {
  const char *device;          /**< the --device request: "auto", "cpu", "gpu" */
  const char *module;          /**< the GPU module's path, or NULL */
  int self_check_ran;          /**< the GPU engine's self-check ran */
  int self_check_passed;
  long long self_check_values; /**< values compared */
  const char *self_check_note; /**< the first mismatch, or why the GPU was not used ("" none) */
} fp8_engine_choice;

#endif /* FP8LAB_ENGINE_ENGINE_CHOICE_H */
