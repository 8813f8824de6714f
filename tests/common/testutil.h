/* testutil.h: shared helpers for fp8lab's Check tests: an independent FP8 reference (nearest
 * representable value by exhaustive search, in double), temp dirs, file helpers, running the CLI. */
#ifndef FP8LAB_TESTUTIL_H
#define FP8LAB_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

#include <check.h>

#include "fp8.h"

/** Value of a code computed from the format definition in double (NaN for NaN codes). */
double ref_fp8_value(uint8_t code, fp8_format f);
/** Reference encode: nearest finite value in double, ties to even code, saturating, NaN 0x7F. */
uint8_t ref_fp8_encode(float y, fp8_format f);

/** Makes a fresh temporary directory (mkdtemp) and returns its malloc'ed path. */
char *tu_mkdtemp(void);
/** Removes a directory tree (rm -rf). */
void tu_rmtree(const char *path);
/** dir/rel, malloc'ed. */
char *tu_path(const char *dir, const char *rel);
/** The entries of a folder besides . and .. (temporary files left behind count too). */
int tu_count_entries(const char *dir);
/** Writes len bytes to path; returns 0 on success. */
int tu_write_file(const char *path, const void *data, size_t len);
/** Reads a whole file (NUL-terminated, malloc'ed); *len gets its size. NULL on failure. */
char *tu_read_file(const char *path, size_t *len);
/** Runs a shell command, capturing stdout+stderr into *output (malloc'ed); returns the exit status. */
int tu_run(const char *cmd, char **output);
/** Runs `cd DIR && fp8lab <printf-formatted args>`, capturing its output into *output. */
int tu_cli(const char *dir, char **output, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/** The fp8lab binary (FP8LAB_BIN) and the source tree (FP8LAB_SOURCE_DIR). */
const char *tu_bin(void);
const char *tu_source_dir(void);

/** Runs a Check suite (CK_NORMAL output) and frees it; returns the process exit code. */
int tu_run_suite(Suite *s);

/** Runs the n tests, in order, as the one tcase of a suite: with the checked fixture
 *  setup/teardown (NULL: none) and Check's timeout in seconds (0: its default,
 *  CK_DEFAULT_TIMEOUT); returns the process exit code (tu_run_suite). */
int tu_run_tcase(const char *suite, const char *tcase, void (*setup)(void),
                 void (*teardown)(void), int timeout, const TTest *const *tests, size_t n);

/** main() of a test program that is one tcase of plain tests (TU_MAIN("suite", "tcase",
 *  setup or NULL, teardown or NULL, timeout or 0, test_a, test_b, ...)); a program with loop
 *  tests or several tcases writes its own main() with tu_run_suite. */
#define TU_MAIN(suite, tcase, setup, teardown, timeout, ...)                                \
  int main(void) {                                                                          \
    const TTest *const tu_tests_[] = {__VA_ARGS__};                                         \
    return tu_run_tcase(suite, tcase, setup, teardown, timeout, tu_tests_,                  \
                        sizeof tu_tests_ / sizeof *tu_tests_);                              \
  }

#endif
