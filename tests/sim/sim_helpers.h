/* sim_helpers.h: bit casts and the seeded random numbers shared by the simulator tests
 * (definitions in sim_helpers.c). */
#ifndef FP8LAB_TESTS_SIM_HELPERS_H
#define FP8LAB_TESTS_SIM_HELPERS_H

#include "testutil.h"

uint32_t f2u(float x);
uint64_t rnd(void);
double rnd_unit(void);

#endif
