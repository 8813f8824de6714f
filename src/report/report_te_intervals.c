/* report_te_intervals.c: the words of the report on how often TransformerEngine's debug log
 * logged each tensor (rep_te_interval_words, report_internal.h): run.json's per-tensor
 * intervals grouped, with what a history length then spans. From report_te.c, whose section
 * holds TE's values against the replay. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report_internal.h"

/* fp8lab's roles, for naming the roles of a group of tensors */
static const char *const TE_GROUP_ROLES[] = {"input", "weight", "output", "grad_output",
                                             "grad_input"};
#define TE_NGROUP_ROLES (sizeof TE_GROUP_ROLES / sizeof *TE_GROUP_ROLES)
#define TE_GROUPS_SHOWN 8

/* The tensors logged at one interval: how many, and which roles (bits of TE_GROUP_ROLES). */
typedef struct {
  int64_t interval;
  size_t n;
  unsigned roles;
} te_group;

static int cmp_group(const void *a, const void *b) {
  int64_t x = ((const te_group *)a)->interval, y = ((const te_group *)b)->interval;
  if ((x == 0) != (y == 0)) return x == 0 ? 1 : -1; /* one iteration last */
  return (x > y) - (x < y);
}

/* The log's tensors (run.json trace.te_log.tensor_intervals) grouped by interval, ascending
 * with 0 (one iteration) last: a new array of *n groups; NULL with *n 0 when the run has no
 * per-tensor intervals (or out of memory: the report then speaks of the one interval). */
static te_group *te_groups(const fp8_run_record *run, size_t *n) {
  *n = 0;
  te_group *g = run->nte_tensors ? calloc(run->nte_tensors, sizeof *g) : NULL;
  for (size_t k = 0; g && k < run->nte_tensors; k++) {
    size_t j = 0;
    while (j < *n && g[j].interval != run->te_tensor_intervals[k]) j++;
    if (j == *n) g[(*n)++].interval = run->te_tensor_intervals[k];
    g[j].n++;
    const char *dot = strrchr(run->te_tensor_names[k], '.');
    for (size_t q = 0; dot && q < TE_NGROUP_ROLES; q++)
      if (strcmp(dot + 1, TE_GROUP_ROLES[q]) == 0) g[j].roles |= 1u << q;
  }
  if (g) qsort(g, *n, sizeof *g, cmp_group);
  return g;
}

/* "every 5 iterations", "every iteration", "at one iteration" */
static void every_words(int64_t k, char *out, size_t n) {
  if (k > 1) snprintf(out, n, "every %lld iterations", (long long)k);
  else snprintf(out, n, k == 1 ? "every iteration" : "at one iteration");
}

void rep_te_interval_words(const rep_t *r, char *logged, size_t nl, char *spans, size_t ns) {
  size_t ng;
  te_group *g = te_groups(&r->run, &ng);
  if (ng <= 1) { /* one interval for every tensor: the log's own, or each tensor's alike */
    int64_t k = ng ? g[0].interval : r->run.te_interval;
    every_words(k, logged, nl);
    snprintf(spans, ns, "each step of the replay is a logged iteration, so delayed scaling's "
             "history holds one amax per logged iteration (a history_len of L spans L x %lld "
             "iterations) and what happened between logged iterations is not seen",
             (long long)(k > 0 ? k : 1));
    free(g);
    return;
  }
  size_t used = (size_t)snprintf(logged, nl, "at a different interval per tensor (");
  size_t su = (size_t)snprintf(spans, ns, "each step of the replay is an iteration at which some "
                               "tensor was logged, and a tensor has an amax only at its own "
                               "logged iterations, so delayed scaling's history of a tensor "
                               "holds one amax per iteration it was logged at (a history_len of "
                               "L spans ");
  for (size_t j = 0; j < ng && j < TE_GROUPS_SHOWN; j++) {
    char every[64], roles[128] = "";
    every_words(g[j].interval, every, sizeof every);
    for (size_t q = 0, rl = 0; q < TE_NGROUP_ROLES; q++)
      if (g[j].roles & (1u << q))
        rl += (size_t)snprintf(roles + rl, sizeof roles - rl, "%s%s", rl ? ", " : "",
                               TE_GROUP_ROLES[q]);
    if (used < nl)
      used += (size_t)snprintf(logged + used, nl - used, "%s%s: %zu tensor%s%s%s%s%s",
                               j ? "; " : "", every, g[j].n, g[j].n == 1 ? "" : "s",
                               roles[0] ? " (" : "", roles,
                               roles[0] ? (strchr(roles, ',') ? " roles" : " role") : "",
                               roles[0] ? ")" : "");
    if (su < ns && g[j].interval == 1)
      su += (size_t)snprintf(spans + su, ns - su, "%sL iterations for the tensors logged every "
                             "iteration", j ? ", " : "");
    else if (su < ns && g[j].interval > 1)
      su += (size_t)snprintf(spans + su, ns - su, "%sL x %lld iterations for the tensors "
                             "logged every %lld", j ? ", " : "", (long long)g[j].interval,
                             (long long)g[j].interval);
  }
  if (ng > TE_GROUPS_SHOWN && used < nl)
    used += (size_t)snprintf(logged + used, nl - used, "; and %zu more intervals: te_log.json "
                             "has each tensor's", ng - TE_GROUPS_SHOWN);
  if (used < nl) snprintf(logged + used, nl - used, ")");
  if (su < ns)
    snprintf(spans + su, ns - su, "%s) and what happened between its logged iterations is "
             "not seen", ng > TE_GROUPS_SHOWN ? ", and so on" : "");
  free(g);
}
