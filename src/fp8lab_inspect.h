/* fp8lab_inspect.h: `fp8lab inspect TRACE` (the command line's part: src/fp8lab.c). */
#ifndef FP8LAB_INSPECT_H
#define FP8LAB_INSPECT_H

#include <stddef.h>

/** Opens the trace directory dir and prints its table of tensors on stdout (README, "Tensors
 *  that never ran"). FP8_OK, or the trace's status with a one-line message in err (nothing
 *  printed then). */
int fp8lab_inspect(const char *dir, char *err, size_t errlen);

#endif /* FP8LAB_INSPECT_H */
