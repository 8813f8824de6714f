/* fp8lab.c: the command line (placeholder until the trace runner lands). */
#include <stdio.h>
#include "fp8.h"
int main(void) { printf("fp8lab %s\n", FP8LAB_VERSION); return 0; }
