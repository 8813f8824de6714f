/* outputs.c: the names of a run folder's files (outputs.h): the list, which names are
 * fp8lab's, and the removal of an earlier run's that were not written again. run.json's
 * outputs key holds the list (run_json.c writes it, run_json_read.c reads it). */
#include "outputs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fp8.h"
#include "util.h"     /* fp8_grow */

int fp8_outputs_has(const fp8_outputs *o, const char *name) {
  for (size_t i = 0; i < o->n; i++)
    if (strcmp(o->names[i], name) == 0) return 1;
  return 0;
}

int fp8_outputs_add(fp8_outputs *o, const char *name) {
  if (fp8_outputs_has(o, name)) return FP8_OK;
  char **nn = fp8_grow(o->names, o->n, &o->cap, sizeof *o->names, 32);
  if (!nn) return FP8_ENOMEM;
  o->names = nn;
  if (!(nn[o->n] = strdup(name))) return FP8_ENOMEM;
  o->n++;
  return FP8_OK;
}

void fp8_outputs_free(fp8_outputs *o) {
  for (size_t i = 0; i < o->n; i++) free(o->names[i]);
  free(o->names);
  memset(o, 0, sizeof *o);
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n > k && strcmp(s + n - k, suffix) == 0;
}

/* A plain file name: not empty, no '/', not hidden (which also rules out "." and ".."). */
static int plain_name(const char *s) {
  return *s && *s != '.' && !strchr(s, '/');
}

int fp8_output_of_framework(const char *name) {
  return strcmp(name, "megatron_args.txt") == 0 || strcmp(name, "megatron_precision.yaml") == 0 ||
         strcmp(name, "torchao_config.py") == 0;
}

const fp8_plan_output fp8_plan_outputs[FP8_PLAN_OUTPUTS] = {
    {"bf16_plan.csv", "plan,recipe,kind,history_len,margin,amax_compute,step,layer,"},
    {"bf16_plan.ini", "; bf16_plan.ini: the report's BF16 demotion plans"},
    {"megatron_bf16_plan_fp8.txt", "# megatron_bf16_plan_fp8.txt: fp8lab's BF16 demotion plan"},
    {"megatron_bf16_plan_fp8.yaml", "# megatron_bf16_plan_fp8.yaml: fp8lab's BF16 demotion plan"},
    {"megatron_bf16_plan_fp4.txt", "# megatron_bf16_plan_fp4.txt: fp8lab's BF16 demotion plan"},
    {"megatron_bf16_plan_fp4.yaml", "# megatron_bf16_plan_fp4.yaml: fp8lab's BF16 demotion plan"},
    {"torchao_bf16_plan.py", "# torchao_bf16_plan.py: fp8lab's BF16 demotion plans"},
    {"te_bf16_plan.py", "# te_bf16_plan.py: fp8lab's BF16 demotion plans"}};

int fp8_output_of_plan(const char *name) {
  for (size_t i = 0; i < FP8_PLAN_OUTPUTS; i++)
    if (strcmp(name, fp8_plan_outputs[i].name) == 0) return 1;
  return 0;
}

int fp8_output_name_ok(const char *name) {
  if (strncmp(name, "plots/", 6) == 0) return plain_name(name + 6) && ends_with(name, ".png");
  if (strncmp(name, "notebooks_export/", 17) == 0)
    return plain_name(name + 17) && ends_with(name, ".ipynb");
  return plain_name(name) &&
         (ends_with(name, ".csv") || strcmp(name, "run.json") == 0 || strcmp(name, "report.md") == 0 ||
          strcmp(name, "advice.ini") == 0 || strcmp(name, "te_recipe.py") == 0 ||
          fp8_output_of_framework(name) || fp8_output_of_plan(name) ||
          strcmp(name, "advice_fp4.ini") == 0 || strcmp(name, "stream.npy") == 0 ||
          strcmp(name, "stream.json") == 0);
}

int fp8_output_of_report(const char *name) {
  return strcmp(name, "analysis.csv") == 0 || strcmp(name, "recommendations.csv") == 0 ||
         strcmp(name, "report.md") == 0 || strcmp(name, "advice.ini") == 0 ||
         strcmp(name, "te_recipe.py") == 0 || strcmp(name, "advice_fp4.ini") == 0 ||
         fp8_output_of_framework(name) || fp8_output_of_plan(name) ||
         strncmp(name, "plots/", 6) == 0 ||
         strncmp(name, "notebooks_export/", 17) == 0;
}

void fp8_outputs_remove_stale(const char *dir, const fp8_outputs *old, const fp8_outputs *keep) {
  static const char *const folders[2] = {"plots/", "notebooks_export/"};
  char path[4096 + 600];
  struct stat sb;
  int emptied[2] = {0, 0};
  for (size_t i = 0; i < old->n; i++) {
    const char *name = old->names[i];
    if (!fp8_output_name_ok(name) || fp8_outputs_has(keep, name)) continue;
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) continue;
    if (lstat(path, &sb) != 0 || S_ISDIR(sb.st_mode) || unlink(path) != 0) continue;
    for (int f = 0; f < 2; f++) emptied[f] |= strncmp(name, folders[f], strlen(folders[f])) == 0;
  }
  /* a report folder this removal emptied goes too (rmdir: only when nothing else is in it) */
  for (int f = 0; f < 2; f++)
    if (emptied[f] && snprintf(path, sizeof path, "%s/%s", dir, folders[f]) < (int)sizeof path)
      rmdir(path);
}
