/* report_advice_forms.c: the advice as each TransformerEngine form applies it, tensor by tensor
 * (rep_advice_sets, report_internal.h), so that advice.ini replays exactly what te_recipe.py
 * applies (issue 45; docs/frameworks/te_custom.md cites TE's sources):
 *
 * - per module (every TE version): a recipe per module, the strongest fix among its tensors
 *   (rep_te_modules), on all of its tensors;
 * - per tensor (TE 2.16 and later: CustomRecipe's factory receives a QuantizerRole with the
 *   module's name and the tensor type input, weight or grad_output): each of those tensors its
 *   own fix, except where TE cannot take it apart:
 *   - the GEMMs of one name (a GroupedLinear's experts, one module on several ranks) take the
 *     strongest fix of each tensor type among them;
 *   - the delayed requests of one forward state (a module's input and weight) must have one
 *     parameter set (TE raises otherwise): both take the larger margin;
 *   - the output and grad_input slots reach the factory without a name (role None): current
 *     scaling with E4M3, as TE's own current-scaling factory gives them;
 *   - a tensor in BF16 keeps its whole module out of FP8 (no per-tensor BF16 before TE's
 *     IdentityQuantizer, which no release has);
 *   - a TransformerLayer's LayerNormMLP (`<name>.layernorm_mlp.fc1/.fc2`) is one module with
 *     two GEMMs: one delayed setting per state over both, fc1's output and fc2's grad_input
 *     taken as TE labels them (layernorm_mlp below). A LayerNormMLP named otherwise is found
 *     only in the model: te_recipe.py's apply() folds it the same way and warns.
 * Tensors of other roles keep their own fix. */
#include "report_internal.h"

#include <stdlib.h>
#include <string.h>

#include "outfile.h"
#include "util.h"

/* The name without a multi-rank trace's "rank_<r>/" prefix: ranks share their modules. */
const char *rep_strip_rank(const char *t) {
  if (strncmp(t, "rank_", 5) != 0) return t;
  const char *p = t + 5;
  while (*p >= '0' && *p <= '9') p++;
  return p > t + 5 && *p == '/' ? p + 1 : t;
}

/* 1 when t[a..b) is a component of decimal digits. */
static int digits(const char *t, size_t a, size_t b) {
  if (a >= b) return 0;
  for (size_t k = a; k < b; k++)
    if (t[k] < '0' || t[k] > '9') return 0;
  return 1;
}

/* The module TransformerEngine applies a recipe to, for tensor t (no rank prefix): the length
 * of its GEMM's name (rep_module_len), except for an expert GEMM (issue 40), whose experts take
 * one recipe: TE's GroupedLinear `<name>.experts.<i>` (import-te's `<name>.gemm_<i>`) is the
 * module <name>; HF's fused experts `<path>.experts.<i>.<param>` the experts module
 * `<path>.experts`. */
size_t rep_te_module_len(const char *t) {
  size_t g = rep_module_len(t), c[3] = {g, g, g}; /* the starts of the last three components */
  int n = 0;
  for (size_t k = g; k > 0 && n < 3; k--)
    if (t[k - 1] == '.') c[n++] = k;
  if (n >= 2 && digits(t, c[0], g) && c[1] + 8 == c[0] && strncmp(t + c[1], "experts.", 8) == 0)
    return c[1] - 1; /* <name>.experts.<i> */
  if (n >= 2 && digits(t, c[1], c[0] - 1) && c[1] >= 8 && strncmp(t + c[1] - 8, "experts.", 8) == 0 &&
      (c[1] == 8 || t[c[1] - 9] == '.'))
    return c[1] - 1; /* <path>.experts.<i>.<param> */
  return g;
}

rep_te_mod *rep_te_modules(const rep_t *r, const fp8_recommendation *x, size_t *n) {
  rep_te_mod *m = calloc(x->nmisfits + r->tab.ngroups + 1, sizeof *m);
  if (!m) return NULL;
  size_t nm = 0;
  for (size_t k = 0; k < x->nmisfits; k++) {
    const char *t = rep_strip_rank(x->misfits[k]);
    size_t len = rep_te_module_len(t), j = 0;
    int32_t rem = rep_remedy(r, x, x->misfits[k]);
    while (j < nm && !(m[j].len == len && strncmp(m[j].name, t, len) == 0)) j++;
    if (j == nm) m[nm++] = (rep_te_mod){t, len, rem, 0};
    else if (rep_fix_stronger(rem, m[j].rem)) m[j].rem = rem;
  }
  /* the routers (left out of the advice): their modules kept out of FP8 */
  for (size_t g = 0; r->router_group && g < r->tab.ngroups; g++) {
    if (!r->router_group[g]) continue;
    const char *t = rep_strip_rank(r->tab.groups[g].tensor);
    size_t len = rep_te_module_len(t), j = 0;
    while (j < nm && !(m[j].len == len && strncmp(m[j].name, t, len) == 0)) j++;
    if (j == nm) m[nm++] = (rep_te_mod){t, len, REP_REMEDY_BF16, 1};
  }
  *n = nm;
  return m;
}

/* 1 when fix a is stronger than b: BF16, then current scaling, then the larger margin. */
int rep_fix_stronger(int32_t a, int32_t b) {
  if (a == b) return 0;
  if (a == REP_REMEDY_BF16 || b == REP_REMEDY_BF16) return a == REP_REMEDY_BF16;
  if (a == REP_REMEDY_CURRENT || b == REP_REMEDY_CURRENT) return a == REP_REMEDY_CURRENT;
  return a > b;
}

/* One tensor of the run: its module (rank prefix dropped) and role, its own fix. */
typedef struct {
  const char *tensor; /* as the trace names it */
  const char *mod;    /* rep_strip_rank(tensor), the first len bytes its module */
  size_t len;
  const char *role;   /* after the module's '.', "" for none */
  int32_t own, set;
  size_t order;       /* position in the run's tensor order */
} tensor_t;

static int cmp_mod(const void *pa, const void *pb) {
  const tensor_t *a = pa, *b = pb;
  size_t n = a->len < b->len ? a->len : b->len;
  int c = strncmp(a->mod, b->mod, n);
  if (c) return c;
  if (a->len != b->len) return a->len < b->len ? -1 : 1;
  return (a->order > b->order) - (a->order < b->order);
}

static int cmp_order(const void *pa, const void *pb) {
  const tensor_t *a = pa, *b = pb;
  return (a->order > b->order) - (a->order < b->order);
}

static int role_is(const tensor_t *t, const char *role) { return strcmp(t->role, role) == 0; }

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A module (rep_te_mod) by name, for bsearch. */
static int cmp_te_mod(const void *pa, const void *pb) {
  const rep_te_mod *a = pa, *b = pb;
  size_t n = a->len < b->len ? a->len : b->len;
  int c = strncmp(a->name, b->name, n);
  return c ? c : (a->len > b->len) - (a->len < b->len);
}

/* The per-tensor form's settings of the tensors v[a..b) of one module name. */
static void per_tensor(tensor_t *v, size_t a, size_t b) {
  static const char *const slots[3] = {"input", "weight", "grad_output"};
  int32_t slot[3];
  int bf16 = 0;
  for (size_t i = a; i < b; i++) bf16 |= v[i].own == REP_REMEDY_BF16;
  for (int s = 0; s < 3; s++) {
    slot[s] = INT32_MIN;
    for (size_t i = a; i < b; i++)
      if (role_is(&v[i], slots[s]) && (slot[s] == INT32_MIN || rep_fix_stronger(v[i].own, slot[s])))
        slot[s] = v[i].own;
  }
  /* one parameter set for the delayed requests of the forward state */
  if (slot[0] >= 0 && slot[1] >= 0) slot[0] = slot[1] = slot[0] > slot[1] ? slot[0] : slot[1];
  for (size_t i = a; i < b; i++) {
    tensor_t *t = &v[i];
    t->set = t->own;
    if (bf16) t->set = REP_REMEDY_BF16;
    else if (role_is(t, "output") || role_is(t, "grad_input")) t->set = REP_SET_UNNAMED;
    else
      for (int s = 0; s < 3; s++)
        if (role_is(t, slots[s])) t->set = slot[s];
  }
}

/* The setting of role's tensors in v[a..b) (the first: per_tensor made them one), or fallback. */
static int32_t role_set(const tensor_t *v, size_t a, size_t b, const char *role, int32_t fallback) {
  for (size_t i = a; i < b; i++)
    if (role_is(&v[i], role)) return v[i].set;
  return fallback;
}

static void set_role(tensor_t *v, size_t a, size_t b, const char *role, int32_t set) {
  for (size_t i = a; i < b; i++)
    if (role_is(&v[i], role)) v[i].set = set;
}

/* The delayed settings among roles of the two ranges made one: the largest margin. */
static void one_delayed(tensor_t *v, const size_t r[4], const char *const *roles, int nroles) {
  int32_t m = -1;
  for (int k = 0; k < 2; k++)
    for (int q = 0; q < nroles; q++) {
      int32_t x = role_set(v, r[2 * k], r[2 * k + 1], roles[q], -1);
      if (x > m) m = x;
    }
  for (int k = 0; k < 2; k++)
    for (size_t i = r[2 * k]; i < r[2 * k + 1]; i++)
      for (int q = 0; q < nroles; q++)
        if (role_is(&v[i], roles[q]) && v[i].set >= 0) v[i].set = m;
}

/* TransformerLayer's LayerNormMLP (`<name>.layernorm_mlp`, whose GEMMs TE names `.fc1` and
 * `.fc2`), fc1's tensors v[r[0]..r[1]) and fc2's v[r[2]..r[3]): one module, so one forward
 * state (both GEMMs' inputs and weights: one delayed setting), one backward state (both
 * grad_outputs), fc1's output slot labelled fc2's input and fc2's grad_input slot fc1's
 * grad_output (layernorm_mlp.py get_quantizer_roles, docs/frameworks/te.md 2.4), and BF16 for
 * both or neither. */
static void layernorm_mlp(tensor_t *v, const size_t r[4]) {
  static const char *const fwd[2] = {"input", "weight"}, *const bwd[1] = {"grad_output"};
  int bf16 = 0;
  for (int k = 0; k < 2; k++)
    for (size_t i = r[2 * k]; i < r[2 * k + 1]; i++) bf16 |= v[i].set == REP_REMEDY_BF16;
  if (bf16) {
    for (int k = 0; k < 2; k++)
      for (size_t i = r[2 * k]; i < r[2 * k + 1]; i++) v[i].set = REP_REMEDY_BF16;
    return;
  }
  one_delayed(v, r, fwd, 2);
  one_delayed(v, r, bwd, 1);
  set_role(v, r[0], r[1], "output", role_set(v, r[2], r[3], "input", REP_SET_UNNAMED));
  set_role(v, r[2], r[3], "grad_input", role_set(v, r[0], r[1], "grad_output", REP_SET_UNNAMED));
}

/* 1 when module m[0..len) is `[<name>.]layernorm_mlp.<gemm>`. */
static int is_lnmlp(const char *m, size_t len, const char *gemm) {
  static const char tail[] = "layernorm_mlp.";
  size_t t = sizeof tail - 1, g = strlen(gemm);
  if (len < t + g || strncmp(m + len - g, gemm, g) != 0 || strncmp(m + len - g - t, tail, t) != 0)
    return 0;
  return len == t + g || m[len - g - t - 1] == '.';
}

rep_tset *rep_advice_sets(const rep_t *r, const fp8_recommendation *x, int per_tensor_form,
                          size_t *n) {
  size_t ns = r->an.nstats, nt = 0;
  tensor_t *v = malloc((ns + 1) * sizeof *v);
  rep_tset *out = malloc((ns + 1) * sizeof *out);
  size_t nm = 0;
  rep_te_mod *m = per_tensor_form ? NULL : rep_te_modules(r, x, &nm);
  const char **mis = malloc((x->nmisfits + 1) * sizeof *mis); /* sorted: found by bsearch */
  if (!v || !out || !mis || (!per_tensor_form && !m)) {
    free(v);
    free(out);
    free(m);
    free(mis);
    return NULL;
  }
  for (size_t k = 0; k < x->nmisfits; k++) mis[k] = x->misfits[k];
  if (x->nmisfits > 1) qsort(mis, x->nmisfits, sizeof *mis, cmp_str);
  if (m) qsort(m, nm, sizeof *m, cmp_te_mod);
  const char *last = NULL;
  for (size_t i = 0; i < ns; i++) {
    const char *t = r->an.stats[i].group->tensor;
    if (t == last) continue; /* a tensor's groups are contiguous */
    last = t;
    const char *s = rep_strip_rank(t);
    size_t len = rep_te_module_len(s), g = rep_module_len(s);
    int32_t own = x->key.margin;
    if (r->router_group && r->router_group[i]) own = REP_REMEDY_BF16;
    else if (bsearch(&t, mis, x->nmisfits, sizeof *mis, cmp_str)) own = rep_remedy(r, x, t);
    v[nt] = (tensor_t){t, s, len, s[g] == '.' ? s + g + 1 : "", own, own, nt};
    nt++;
  }
  if (per_tensor_form) {
    if (nt > 1) qsort(v, nt, sizeof *v, cmp_mod);
    for (size_t a = 0, b; a < nt; a = b) {
      for (b = a + 1; b < nt && v[b].len == v[a].len && strncmp(v[b].mod, v[a].mod, v[a].len) == 0;
           b++) {
      }
      per_tensor(v, a, b);
    }
    /* a LayerNormMLP's two GEMMs: fc2's module follows fc1's in name order, past names that
     * extend fc1's (`...fc1x`), which share its prefix */
    for (size_t a = 0, b; a < nt; a = b) {
      for (b = a + 1; b < nt && v[b].len == v[a].len && strncmp(v[b].mod, v[a].mod, v[a].len) == 0;
           b++) {
      }
      if (!is_lnmlp(v[a].mod, v[a].len, "fc1")) continue;
      size_t c = b, len = v[a].len;
      while (c < nt && v[c].len >= len - 1 && strncmp(v[c].mod, v[a].mod, len - 1) == 0 &&
             !(v[c].len == len && v[c].mod[len - 1] == '2'))
        c++;
      if (c == nt || v[c].len != len || strncmp(v[c].mod, v[a].mod, len - 1) != 0) continue;
      size_t d = c + 1;
      while (d < nt && v[d].len == len && strncmp(v[d].mod, v[c].mod, len) == 0) d++;
      const size_t r[4] = {a, b, c, d};
      layernorm_mlp(v, r);
    }
    if (nt > 1) qsort(v, nt, sizeof *v, cmp_order);
  } else
    for (size_t i = 0; i < nt; i++) {
      const rep_te_mod key = {v[i].mod, v[i].len, 0, 0};
      const rep_te_mod *j = bsearch(&key, m, nm, sizeof *m, cmp_te_mod);
      v[i].set = j ? j->rem : x->key.margin;
    }
  for (size_t i = 0; i < nt; i++) out[i] = (rep_tset){v[i].tensor, v[i].set};
  free(v);
  free(m);
  free(mis);
  *n = nt;
  return out;
}

/* ------------------------------------------------------------------ advice.ini */

/* A tensor name as a `tensors` glob that matches it alone (fnmatch): * ? [ # as [*] [?] [[]
 * [#] ('#' after a space would start a comment), a backslash escaped; ';' (which starts a
 * comment anywhere in an experiment file) as '?'. */
void rep_put_tensor_glob(FILE *fp, const char *s) {
  for (; *s; s++) {
    if (strchr("*?[#", *s)) fprintf(fp, "[%c]", *s);
    else if (*s == ';') fputc('?', fp);
    else {
      if (*s == '\\') fputc('\\', fp);
      fputc(*s, fp);
    }
  }
}


static void put_delayed(FILE *fp, const char *label, const char *section,
                        const fp8_recommendation *x, int32_t margin, const char *fmt) {
  fprintf(fp, "\n[recipe.%s_%s]\nlabel = %s\nkind = delayed\nformat = %s\nhistory_len = %d\n"
          "margin = %d\namax_compute = %s\n", label, section, label, fmt, (int)x->key.history_len,
          (int)margin, fp8_amax_compute_name(x->key.amax_compute));
}

/* tensors = the tensors of s whose setting is set or set2 */
static void put_tensors(FILE *fp, const rep_tset *s, size_t n, int32_t set, int32_t set2) {
  fputs("tensors = ", fp);
  for (size_t i = 0, k = 0; i < n; i++)
    if (s[i].set == set || s[i].set == set2) {
      fputs(k++ ? ", " : "", fp);
      rep_put_tensor_glob(fp, s[i].tensor);
    }
  fputc('\n', fp);
}

static int has_set(const rep_tset *s, size_t n, int32_t set) {
  for (size_t i = 0; i < n; i++)
    if (s[i].set == set) return 1;
  return 0;
}

/* One recipe label of advice.ini: the settings s of the run's n tensors (rep_advice_sets) as
 * sections of one label, each tensor listed in the one that holds it: BF16, current scaling,
 * current scaling in E4M3 (the factory's nameless slots; with current scaling itself when the
 * setting's format is E4M3), each larger margin, and the model setting for the rest. */
static void put_label(FILE *fp, const char *label, const rep_tset *s, size_t n,
                      const fp8_recommendation *x, const char *fmt) {
  int e4m3 = strcmp(fmt, "e4m3") == 0;
  if (has_set(s, n, REP_REMEDY_BF16)) {
    fprintf(fp, "\n[recipe.%s_bf16]\nlabel = %s\nkind = bf16\n", label, label);
    put_tensors(fp, s, n, REP_REMEDY_BF16, REP_REMEDY_BF16);
  }
  if (has_set(s, n, REP_REMEDY_CURRENT) || (e4m3 && has_set(s, n, REP_SET_UNNAMED))) {
    fprintf(fp, "\n[recipe.%s_current]\nlabel = %s\nkind = current\nformat = %s\n", label,
            label, fmt);
    put_tensors(fp, s, n, REP_REMEDY_CURRENT, e4m3 ? REP_SET_UNNAMED : REP_REMEDY_CURRENT);
  }
  if (!e4m3 && has_set(s, n, REP_SET_UNNAMED)) {
    fprintf(fp, "\n[recipe.%s_unnamed]\nlabel = %s\nkind = current\nformat = e4m3\n"
            "; the slots TE's factory gets no name for (output, grad_input): E4M3 current scaling\n",
            label, label);
    put_tensors(fp, s, n, REP_SET_UNNAMED, REP_SET_UNNAMED);
  }
  for (int32_t done = -1;;) { /* each larger margin, in increasing order */
    int32_t next = INT32_MAX;
    for (size_t i = 0; i < n; i++)
      if (s[i].set >= 0 && s[i].set != x->key.margin && s[i].set > done && s[i].set < next)
        next = s[i].set;
    if (next == INT32_MAX) break;
    char sec[64];
    snprintf(sec, sizeof sec, "margin_%d", (int)next);
    put_delayed(fp, label, sec, x, next, fmt);
    put_tensors(fp, s, n, next, next);
    done = next;
  }
  if (has_set(s, n, x->key.margin)) {
    put_delayed(fp, label, "rest", x, x->key.margin, fmt);
    fputs("; no tensors key: every tensor the sections above leave\n", fp);
  }
}

int rep_write_advice(rep_t *r, char *err, size_t errlen) {
  const fp8_recommendation *x = rep_model_rec(r);
  if (!x || !x->in_run || x->key.kind != FP8_KIND_DELAYED || !x->meets_budget ||
      (!x->nmisfits && !r->router_group))
    return FP8_OK;
  size_t n = 0, nm = 0;
  rep_tset *st = rep_advice_sets(r, x, 1, &n), *sm = rep_advice_sets(r, x, 0, &nm);
  if (!st || !sm) {
    free(st);
    free(sm);
    return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  }
  const char *fmt = rep_setting_format(r, x);
  fp8_outfile of;
  int rc = fp8_outfile_open(&of, r->outdir, "advice.ini", err, errlen);
  if (rc) {
    free(st);
    free(sm);
    return rc;
  }
  FILE *fp = of.fp;
  fprintf(fp, "; advice.ini: the report's answer as one experiment (fp8lab report wrote it): the\n"
          "; whole-model setting, and for the tensors it does not fit the fix the report names\n"
          "; (a larger margin, current scaling, or the module kept in BF16; Mixture-of-Experts\n"
          "; routers kept in BF16), as te_recipe.py beside it applies them in TransformerEngine:\n"
          ";   advice         per tensor, te_recipe.apply(model) on TE 2.16 and later (CustomRecipe:\n"
          ";                  a module's input and weight share one delayed setting, the larger\n"
          ";                  margin; output and grad_input, which TE's factory gets without a\n"
          ";                  name, current scaling in E4M3; BF16 for a whole module)\n"
          ";   advice_module  per module, te_recipe.apply(model, form=\"module\") (TE before 2.16):\n"
          ";                  each module the strongest fix among its tensors, on all of them\n"
          ";   one_recipe     the whole-model setting alone\n"
          "; Replay it to confirm the advice:\n"
          ";   fp8lab run advice.ini\n");
  rep_put_trace(fp, r);
  rep_put_analysis(fp, r);
  put_label(fp, "advice", st, n, x, fmt);
  put_label(fp, "advice_module", sm, nm, x, fmt);
  fprintf(fp, "\n[recipe.one_recipe]\nkind = delayed\nformat = %s\nhistory_len = %d\nmargin = %d\n"
          "amax_compute = %s\n\n[output]\ndir = advice\n", fmt, (int)x->key.history_len,
          (int)x->key.margin, fp8_amax_compute_name(x->key.amax_compute));
  free(st);
  free(sm);
  rc = fp8_outfile_commit(&of, err, errlen);
  if (!rc) r->wrote_advice = 1;
  return rc;
}
