/* cli.h: what the command-line files share: the subcommands that have files of their own
 * (inspect.c, timeline.c; fp8lab.c holds main, run, report and synth) and the integer parser. */
#ifndef FP8LAB_CLI_H
#define FP8LAB_CLI_H

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

/** A decimal integer in [lo, hi], the whole string: 0 and *out, or -1. */
static inline int fp8_cli_parse_ll(const char *s, long long lo, long long hi, long long *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

/** `fp8lab inspect TRACE`: opens the trace directory dir and prints its table of tensors on
 *  stdout (docs/reference.md, "Tensors that never ran"). FP8_OK, or the trace's status with a
 *  one-line message in err (nothing printed then). */
int fp8lab_inspect(const char *dir, char *err, size_t errlen);

/** The --help texts (usage.c): fp8lab's overview and each command's. */
extern const char FP8LAB_USAGE[], FP8LAB_USAGE_RUN[], FP8LAB_USAGE_REPORT[], FP8LAB_USAGE_SYNTH[],
    FP8LAB_USAGE_INSPECT[], FP8LAB_USAGE_IMPORT_TE[], FP8LAB_USAGE_CLOSEDLOOP[];

/** The text of `fp8lab timeline --help`. */
extern const char FP8LAB_TIMELINE_USAGE[];

/** Runs `fp8lab timeline ARGS` (argv without the command): FP8_OK, or a status with one line in
 *  err (FP8_EINVAL and the input statuses: exit 2; FP8_EDEVICE, FP8_ENOMEM, FP8_EWRITE: exit
 *  1). warn: a line to print even on success (the GPU was there but failed; empty if none). */
int fp8lab_timeline(int argc, char **argv, char *warn, size_t warnlen, char *err,
                    size_t errlen);

#endif /* FP8LAB_CLI_H */
