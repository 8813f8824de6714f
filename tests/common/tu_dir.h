/* tu_dir.h: the temporary folder of a test (g_dir: made by setup, removed by teardown, the tcase's
 * checked fixture), files in it, fp8lab run there (run_cli), and lines looked up in what it wrote.
 * Shared by the tests of several concept folders; definitions and comments in tu_dir.c. */
#ifndef FP8LAB_TESTS_TU_DIR_H
#define FP8LAB_TESTS_TU_DIR_H

#include <stddef.h>

#include "testutil.h"

extern char *g_dir;
void setup(void);
void teardown(void);
const char *path_in(const char *rel);
void put_file(const char *rel, const void *data, size_t n);
void put_text(const char *rel, const char *text);
#define run_cli(out, ...) tu_cli(g_dir, (out), __VA_ARGS__)

char *find_row(const char *csv, const char *prefix);
int count_lines(const char *s);
void assert_one_line(const char *err);
void expect_report(const char *want);

#endif
