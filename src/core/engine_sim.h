/* engine_sim.h: the CPU simulator as an fp8_engine (see engine_sim.c). */
#ifndef FP8LAB_CORE_ENGINE_SIM_H
#define FP8LAB_CORE_ENGINE_SIM_H

#include "engine.h"

int fp8_engine_sim_create(fp8_engine **out, char *err, size_t errlen);

#endif
