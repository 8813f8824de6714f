/* tu_ini.c: the definitions of tu_ini.h (see there). */
#include <check.h>

#include "experiment.h"
#include "testutil.h"
#include "tu_ini.h"

/* Loads g_dir/e.ini; returns the status, the message in err. */
int load_ini(const void *text, size_t n, char *err, size_t errlen) {
  put_file("e.ini", text, n);
  fp8_experiment ex;
  int rc = fp8_experiment_load(path_in("e.ini"), &ex, err, errlen);
  if (rc == FP8_OK) fp8_experiment_free(&ex);
  return rc;
}
