/* report_bf16_plan_files.c: the BF16 demotion plans (report_bf16_plan.c) as files:
 * bf16_plan.csv, a row per step of each plan (docs/outputs.md), and bf16_plan.ini, one
 * experiment whose labels replay every prefix of each plan, written like advice.ini (the run's
 * [trace] and [analysis], a temporary name renamed into place). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "outfile.h"
#include "outputs.h"
#include "report_internal.h"
#include "util.h"

static const char *const PLAN_NAME[REP_NPLANS] = {"fp8", "fp4"};

int rep_plan_file_open(rep_t *r, int i, fp8_outfile *of, char *err, size_t errlen) {
  int rc = fp8_outfile_open(of, r->outdir, fp8_plan_outputs[i].name, err, errlen);
  if (!rc) fputs(fp8_plan_outputs[i].sig, of->fp);
  return rc;
}

int rep_plan_file_commit(rep_t *r, int i, fp8_outfile *of, char *err, size_t errlen) {
  int rc = fp8_outfile_commit(of, err, errlen);
  if (!rc) r->wrote_plan |= 1 << i;
  return rc;
}

/* A plan's layer of a tensor name without its rank prefix: its step, 0 when not in the plan. */
typedef struct {
  const char *tensor; /* without the rank prefix */
  size_t step;
} tstep;

static int cmp_tstep(const void *a, const void *b) {
  return strcmp(((const tstep *)a)->tensor, ((const tstep *)b)->tensor);
}

/* The run's tensors without their rank prefixes, each once in strcmp order, with the step of
 * plan p that keeps its layer in BF16 (0: none) and whether it is a router the advice keeps in
 * BF16 (REP_PLAN_FP8 only). calloc'ed, *n entries; NULL when out of memory. */
static tstep *plan_tensors(const rep_t *r, const rep_plan *p, int which, size_t *n) {
  tstep *v = calloc(r->tab.ngroups + 1, sizeof *v);
  if (!v) return NULL;
  size_t m = 0;
  for (size_t g = 0; g < r->tab.ngroups; g++) {
    const char *t = rep_strip_rank(r->tab.groups[g].tensor);
    v[m++] = (tstep){t, which == REP_PLAN_FP8 && r->router_group && r->router_group[g] ? SIZE_MAX : 0};
  }
  if (m > 1) qsort(v, m, sizeof *v, cmp_tstep);
  size_t u = 0;
  for (size_t i = 0; i < m; i++) {
    if (u && strcmp(v[i].tensor, v[u - 1].tensor) == 0) {
      if (v[i].step == SIZE_MAX) v[u - 1].step = SIZE_MAX;
      continue;
    }
    v[u++] = v[i];
  }
  for (size_t i = 0; i < u; i++) { /* each tensor once (not each of its configurations) */
    size_t len = rep_te_module_len(v[i].tensor);
    for (size_t k = 0; k < p->nsteps && !v[i].step; k++)
      if (p->steps[k].len == len && strncmp(p->steps[k].name, v[i].tensor, len) == 0)
        v[i].step = k + 1;
  }
  *n = u;
  return v;
}

/* Whether tensor t is in BF16 at prefix k: a router (in every prefix), or its layer's step is
 * at most k. */
static int in_bf16(const tstep *t, size_t k) {
  return t->step == SIZE_MAX || (t->step && t->step <= k);
}

/* One label <plan>_plan_<k>: the first k layers' tensors (and for the FP8 plan the routers)
 * in kind bf16, the rest under the plan's configuration (its settings lines). */
static void put_prefix(FILE *fp, int which, size_t k, const tstep *v, size_t nv,
                       const char *settings) {
  const char *pn = PLAN_NAME[which];
  size_t nb = 0;
  for (size_t i = 0; i < nv; i++) nb += (size_t)in_bf16(&v[i], k);
  if (nb == nv) { /* every layer in BF16: the label is that section alone */
    fprintf(fp, "\n[recipe.%s_plan_%zu]\nlabel = %s_plan_%zu\nkind = bf16\n", pn, k, pn, k);
    return;
  }
  if (nb) {
    fprintf(fp, "\n[recipe.%s_plan_%zu_bf16]\nlabel = %s_plan_%zu\nkind = bf16\ntensors = ", pn, k,
            pn, k);
    for (size_t i = 0, n = 0; i < nv; i++)
      if (in_bf16(&v[i], k)) {
        fputs(n++ ? ", " : "", fp);
        rep_put_tensor_glob(fp, v[i].tensor);
      }
    fputc('\n', fp);
  }
  fprintf(fp, "\n[recipe.%s_plan_%zu]\nlabel = %s_plan_%zu\n%s\n", pn, k, pn, k, settings);
  if (nb) fputs("; no tensors key: every tensor the section above leaves\n", fp);
}

/* Whether plan `which` goes into bf16_plan.ini: its configuration's settings are in run.json
 * (and, for FP4, its reference's: the replay must judge the ratio against the same one). */
static const char *ini_settings(const rep_t *r, int which) {
  const rep_plan *p = rep_bf16_plan(r, which);
  if (!p) return NULL;
  if (which == REP_PLAN_FP4 && (p->ref < 0 || !rep_settings_of(r, (size_t)p->ref))) return NULL;
  return rep_settings_of(r, p->cfg);
}

static int write_ini(rep_t *r, char *err, size_t errlen) {
  const char *set[REP_NPLANS];
  int any = 0;
  for (int w = 0; w < REP_NPLANS; w++) any |= (set[w] = ini_settings(r, w)) != NULL;
  if (!any) return FP8_OK; /* a run.json written before the settings */
  const rep_plan *p8 = set[REP_PLAN_FP8] ? rep_bf16_plan(r, REP_PLAN_FP8) : NULL;
  const rep_plan *p4 = set[REP_PLAN_FP4] ? rep_bf16_plan(r, REP_PLAN_FP4) : NULL;
  fp8_outfile of;
  int rc = rep_plan_file_open(r, REP_PF_INI, &of, err, errlen);
  if (rc) return rc;
  FILE *fp = of.fp;
  fputs(" as one experiment (fp8lab report\n"
        "; wrote it; bf16_plan.csv and report.md's \"Keeping layers in BF16\" are the plans).\n"
        "; Label <plan>_plan_<k> replays step k of a plan: its first k layers kept in BF16\n"
        "; (kind = bf16: every tensor of those modules), every other tensor under the plan's\n"
        "; configuration.", fp);
  if (p8)
    fprintf(fp, " fp8_plan_<k>: the answer's whole-model setting, %s.",
            r->cfgs[p8->cfg].dlabel);
  if (p8 && r->router_group) fputs(" The Mixture-of-Experts routers stay in BF16 in every fp8 label.", fp);
  if (p4)
    fprintf(fp, " fp4_plan_<k>: %s, the advised FP4 configuration; fp8_reference is the FP4\n"
            "; verdict's FP8 reference, so that the replay judges each layer's ratio again.",
            r->cfgs[p4->cfg].dlabel);
  fputs("\n; Replay it, then compare each label's tensors outside the budgets (FP8) or layers\n"
        "; that do not hold (FP4) with bf16_plan.csv's still_missing of that step:\n"
        ";   fp8lab run bf16_plan.ini\n", fp);
  for (int w = 0; w < REP_NPLANS; w++) {
    const rep_plan *p = w == REP_PLAN_FP8 ? p8 : p4;
    if (p && p->stride > 1)
      fprintf(fp, "; (%s plan: every %zu-th step and the last, so that the configurations stay\n"
              "; within an experiment's limit)\n", PLAN_NAME[w], p->stride);
  }
  rep_put_trace(fp, r);
  rep_put_analysis(fp, r);
  if (p4) fprintf(fp, "fp4_gemm_ratio = %g\n", r->run.fp4_gemm_ratio);
  const rep_plan *pr = p4 ? p4 : p8;
  const char *rs = pr->ref >= 0 ? rep_settings_of(r, (size_t)pr->ref) : NULL;
  if (rs) /* first: the experiment's FP4 reference is its first such configuration */
    fprintf(fp, "\n[recipe.fp8_reference]\n%s\n", rs);
  for (int w = 0; w < REP_NPLANS && !rc; w++) {
    const rep_plan *p = w == REP_PLAN_FP8 ? p8 : p4;
    if (!p) continue;
    size_t nv = 0;
    tstep *v = plan_tensors(r, p, w, &nv);
    if (!v) {
      rc = fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
      break;
    }
    for (size_t k = 0; k <= p->nsteps; k++)
      if (rep_bf16_plan_replayed(p, k)) put_prefix(fp, w, k, v, nv, set[w]);
    free(v);
  }
  fputs("\n[output]\ndir = bf16_plan\n", fp);
  if (rc) {
    fp8_outfile_abort(&of);
    return rc;
  }
  rc = rep_plan_file_commit(r, REP_PF_INI, &of, err, errlen);
  if (!rc) r->wrote_plan |= (p8 ? 512 : 0) | (p4 ? 1024 : 0);
  return rc;
}

/* A CSV text field: quoted when it holds a comma, a quote or a line break. */
static void put_field(FILE *fp, const char *s, size_t n) {
  int q = 0;
  for (size_t i = 0; i < n && !q; i++) q = s[i] == ',' || s[i] == '"' || s[i] == '\n' || s[i] == '\r';
  if (q) fputc('"', fp);
  for (size_t i = 0; i < n; i++) {
    if (q && s[i] == '"') fputc('"', fp);
    fputc(s[i], fp);
  }
  if (q) fputc('"', fp);
}

static void put_num_or_empty(FILE *fp, double v) {
  if (!isnan(v)) fp8_csv_put_num(fp, v);
  fputc(',', fp);
}

/* A row of step k of plan `which`: the layer it keeps (none at step 0) and what is left. */
/* -1: out of memory (the row is then incomplete: the caller aborts the file). */
static int csv_row(FILE *fp, const rep_t *r, int which, const rep_plan *p, size_t k, int labels) {
  const cfg_t *c = &r->cfgs[p->cfg];
  fprintf(fp, "%s,", PLAN_NAME[which]);
  put_field(fp, c->key.recipe, strlen(c->key.recipe));
  fprintf(fp, ",%s,", fp8_recipe_kind_name(c->key.kind));
  fp8_config_key_put_delayed_csv(fp, &c->key, 1);
  fprintf(fp, "%zu,", k);
  const rep_plan_step *s = k ? &p->steps[k - 1] : NULL;
  if (s) {
    put_field(fp, s->name, s->len);
    fprintf(fp, ",%s,%lld,%lld,", which == REP_PLAN_FP8 ? "misses" : s->fails ? "fails"
                                  : "too close to call", (long long)s->clipped_steps,
            (long long)s->clipped_values);
    put_num_or_empty(fp, s->ratio);
    put_num_or_empty(fp, s->flops);
    put_num_or_empty(fp, s->share);
  } else {
    fputs(",,,,,,", fp);
    put_num_or_empty(fp, r->run.has_model_shape ? 0.0 : NAN);
  }
  const size_t n = s ? s->left : p->nmiss; /* what is missing after step k */
  fprintf(fp, "%zu,", n);
  size_t at = 0, len = 0;
  char *list = NULL;
  for (size_t i = 0; n && i < p->nmiss; i++) len += p->miss_step[i] > k ? strlen(p->miss[i]) + 2 : 0;
  if (n && !(list = malloc(len + 1))) return -1;
  for (size_t i = 0; list && i < p->nmiss; i++)
    if (p->miss_step[i] > k) at += (size_t)sprintf(list + at, "%s%s", at ? "; " : "", p->miss[i]);
  if (list) put_field(fp, list, at);
  free(list);
  fputc(',', fp);
  if (s && s->mg_start >= 0) fprintf(fp, "%d,%d,", s->mg_start, s->mg_end);
  else fputs(",,", fp);
  if (labels && rep_bf16_plan_replayed(p, k)) fprintf(fp, "%s_plan_%zu", PLAN_NAME[which], k);
  fputc('\n', fp);
  return 0;
}

static int write_csv(rep_t *r, char *err, size_t errlen) {
  fp8_outfile of;
  int rc = rep_plan_file_open(r, REP_PF_CSV, &of, err, errlen); /* the header's first columns */
  if (rc) return rc;
  fputs("verdict,clipped_steps,clipped_values,gemm_ratio,layer_flops,flops_share,missing,"
        "still_missing,megatron_start,megatron_end,label\n", of.fp);
  for (int w = 0; w < REP_NPLANS; w++) {
    const rep_plan *p = rep_bf16_plan(r, w);
    for (size_t k = 0; p && k <= p->nsteps; k++)
      if (csv_row(of.fp, r, w, p, k, (r->wrote_plan & (w == REP_PLAN_FP8 ? 512 : 1024)) != 0)) {
        fp8_outfile_abort(&of);
        return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
      }
  }
  return rep_plan_file_commit(r, REP_PF_CSV, &of, err, errlen);
}

int rep_write_bf16_plan(rep_t *r, char *err, size_t errlen) {
  if (!rep_bf16_plan(r, REP_PLAN_FP8) && !rep_bf16_plan(r, REP_PLAN_FP4)) return FP8_OK;
  int rc = write_ini(r, err, errlen);
  return rc ? rc : write_csv(r, err, errlen);
}
