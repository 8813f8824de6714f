/* tu_traces.h: small traces and safetensors files written into the test's folder (tu_dir.h) with
 * src/trace's writer, and the runs of them that several concept folders' tests start from
 * (definitions and comments in tu_traces.c). Link fp8lab_trace. */
#ifndef FP8LAB_TESTS_TU_TRACES_H
#define FP8LAB_TESTS_TU_TRACES_H

#include "testutil.h"
#include "trace.h"
#include "tu_dir.h"

void write_tiny_trace(void);

static const char TINY_INI[] =
    "[trace]\npath = trace\n"
    "[recipe.d]\nkind = delayed\nhistory_len = 1, 2\n"
    "[recipe.c]\nkind = current\n"
    "[output]\ndir = out\n";
void write_never_ran_trace(void);
void put_st(const char *rel, const char *hdr, long long hlen, size_t ndata);
int open_st(fp8_step *s, char *err, size_t errlen);
void write_run(const char *const *names, size_t n);
static const char *const TWO[] = {"a.fc.input", "a.fc.weight"};
void run_two(void);

#endif
