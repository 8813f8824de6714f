/* fp8lab_timeline.h: `fp8lab timeline` (the command line's part: src/fp8lab.c). */
#ifndef FP8LAB_TIMELINE_CMD_H
#define FP8LAB_TIMELINE_CMD_H

#include <stddef.h>

/** The text of `fp8lab timeline --help`. */
extern const char FP8LAB_TIMELINE_USAGE[];

/** Runs `fp8lab timeline ARGS` (argv without the command): FP8_OK, or a status with one line in
 *  err (FP8_EINVAL and the input statuses: exit 2; FP8_EDEVICE, FP8_ENOMEM, FP8_EWRITE: exit
 *  1). warn: a line to print even on success (the GPU was there but failed; empty if none). */
int fp8lab_timeline(int argc, char **argv, char *warn, size_t warnlen, char *err,
                    size_t errlen);

#endif
