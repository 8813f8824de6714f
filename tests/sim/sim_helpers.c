/* sim_helpers.c: the definitions of sim_helpers.h (see there). */
#include <check.h>
#include <string.h>

#include "testutil.h"
#include "sim_helpers.h"

uint32_t f2u(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }

/* xorshift64*: deterministic test data without touching the code under test. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

uint64_t rnd(void) {
  rng_state ^= rng_state >> 12; rng_state ^= rng_state << 25; rng_state ^= rng_state >> 27;
  return rng_state * 0x2545F4914F6CDD1Dull;
}

double rnd_unit(void) { return (double)(rnd() >> 11) / 9007199254740992.0; }
