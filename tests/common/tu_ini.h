/* tu_ini.h: experiment text loaded from memory (src/experiment), for the tests of control bytes
 * and one-line messages (definitions in tu_ini.c). Link fp8lab_experiment. */
#ifndef FP8LAB_TESTS_TU_INI_H
#define FP8LAB_TESTS_TU_INI_H

#include "testutil.h"
#include "tu_dir.h"

int load_ini(const void *text, size_t n, char *err, size_t errlen);
#define INI_HEAD "[trace]\npath = synth:llm\n[recipe.d]\nkind = delayed\n"

#endif
