/* report_te_code.c: te_recipe.py (rep_write_te_code, report_internal.h), the report's advice as
 * TransformerEngine code. It is advice.ini's decision (report_answer.c: the model setting, and
 * for each tensor it does not fit rep_remedy's fix), taken to the granularity TransformerEngine
 * applies a recipe at: a module (a Linear's input, weight and gradient together). A module
 * takes the strongest fix among its advised tensors: BF16, then current scaling, then the
 * largest margin (each of them fits the tensors a weaker one fits: current scaling never
 * clips, BF16 casts nothing, a larger margin only adds headroom on the same line).
 *
 * The code wraps each advised module's forward in its own autocast region, nested in the
 * model's (TE keeps the recipe a module ran its forward with for its backward; docs/capture.md
 * "Applying the advice in TransformerEngine" cites the sources and versions). tests/report/test_keep_bf16.py compiles it and runs apply() against
 * stub TransformerEngine modules. An expert GEMM's module is its GroupedLinear (or HF's experts
 * module): one recipe for all its experts (te_module_len; tests/report/test_te_code_experts.py). */
#include "report_internal.h"

#include <stdlib.h>
#include <string.h>

#include "outfile.h"
#include "util.h"

typedef struct {
  const char *name; /* into a misfit's tensor name, without its rank_<r>/ prefix */
  size_t len;
  int32_t rem;      /* rep_remedy's, the strongest over the module's advised tensors */
  int router;       /* a Mixture-of-Experts router kept in BF16 ([analysis] routers = bf16) */
} te_mod;

/* The name without a multi-rank trace's "rank_<r>/" prefix: ranks share their modules. */
static const char *strip_rank(const char *t) {
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
static size_t te_module_len(const char *t) {
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

/* 1 when fix a is stronger than b: BF16, then current scaling, then the larger margin. */
static int stronger(int32_t a, int32_t b) {
  if (a == b) return 0;
  if (a == REP_REMEDY_BF16 || b == REP_REMEDY_BF16) return a == REP_REMEDY_BF16;
  if (a == REP_REMEDY_CURRENT || b == REP_REMEDY_CURRENT) return a == REP_REMEDY_CURRENT;
  return a > b;
}

/* A module name as a Python string literal's contents (backslash and quote escaped). */
static void put_pystr(FILE *fp, const char *s, size_t n) {
  fputc('"', fp);
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '\\' || s[i] == '"') fputc('\\', fp);
    fputc(s[i], fp);
  }
  fputc('"', fp);
}

static void put_delayed(FILE *fp, const fp8_recommendation *x, const char *fmt, int32_t margin) {
  fprintf(fp, "DelayedScaling(fp8_format=Format.%s, amax_history_len=%d, margin=%d, "
          "amax_compute_algo=\"%s\")", fmt, (int)x->key.history_len, (int)margin,
          fp8_amax_compute_name(x->key.amax_compute));
}

static void put_header(FILE *fp, int current) {
  fputs("# te_recipe.py: the advice of fp8lab's report as TransformerEngine code (fp8lab report\n"
        "# wrote it from the decision advice.ini replays). MODEL_RECIPE is the whole-model\n"
        "# setting; MODULES gives each module it does not fit its own recipe: a larger margin,\n"
        "# current scaling, or None (the module kept out of FP8). TransformerEngine applies a\n"
        "# recipe to a whole module (its input, weight and gradient), so a module takes the\n"
        "# strongest fix among its tensors (BF16, then current scaling, then the largest margin).\n"
        "#\n"
        "# Use it around your training step (the backward outside the region, as TE wants):\n"
        "#     import te_recipe\n"
        "#     te_recipe.apply(model)  # once, after building the model\n"
        "#     with te_recipe.region(te_recipe.MODEL_RECIPE):\n"
        "#         loss = model(batch)\n"
        "#     loss.backward()\n"
        "#\n"
        "# apply() wraps each listed module's forward in its own autocast region nested in the\n"
        "# model's (the inner region overrides the outer one; TE runs a module's backward with\n"
        "# the recipe of its forward). Keep the outer region enabled with MODEL_RECIPE: delayed\n"
        "# scaling updates its scales when the outermost region exits. A module kept out of FP8\n"
        "# computes in BF16 when its parameters are BF16 or under torch.autocast. The names are\n"
        "# the trace's module paths (its tensor names without the role), which fp8lab's capture\n"
        "# tool takes from model.named_modules(); apply() refuses a name the model lacks.\n"
        "# TransformerEngine versions: te.autocast from 2.9 (fp8_autocast before, deprecated\n"
        "# since 2.9; region() takes whichever there is), Float8CurrentScaling from 2.2,\n"
        "# DelayedScaling in every version.\n"
        "import transformer_engine.pytorch as te\n", fp);
  fprintf(fp, "from transformer_engine.common.recipe import DelayedScaling, %sFormat\n\n",
          current ? "Float8CurrentScaling, " : "");
}

static void put_footer(FILE *fp) {
  fputs("\n\ndef region(recipe):\n"
        "    \"\"\"A new autocast region: FP8 with recipe, or none (recipe None: out of FP8).\"\"\"\n"
        "    if hasattr(te, \"autocast\"):  # TransformerEngine 2.9 and later\n"
        "        return te.autocast(enabled=recipe is not None, recipe=recipe)\n"
        "    return te.fp8_autocast(enabled=recipe is not None, fp8_recipe=recipe)\n"
        "\n"
        "\n"
        "def _wrap(module, recipe):\n"
        "    forward = module.forward\n"
        "\n"
        "    def forward_with_recipe(*args, **kwargs):\n"
        "        with region(recipe):\n"
        "            return forward(*args, **kwargs)\n"
        "\n"
        "    module.forward = forward_with_recipe\n"
        "\n"
        "\n"
        "def apply(model):\n"
        "    \"\"\"Gives each module of MODULES its recipe (model: a torch.nn.Module).\"\"\"\n"
        "    modules = dict(model.named_modules())\n"
        "    missing = sorted(set(MODULES) - set(modules))\n"
        "    if missing:\n"
        "        raise KeyError(\"te_recipe: not modules of this model: \" + \", \".join(missing))\n"
        "    for name, recipe in MODULES.items():\n"
        "        _wrap(modules[name], recipe)\n", fp);
}

int rep_write_te_code(rep_t *r, char *err, size_t errlen) {
  const fp8_recommendation *x = rep_model_rec(r);
  if (!x || !x->in_run || x->key.kind != FP8_KIND_DELAYED || !x->meets_budget ||
      (!x->nmisfits && !r->router_group))
    return FP8_OK; /* advice.ini's condition: no per-module advice */
  te_mod *m = calloc(x->nmisfits + r->tab.ngroups + 1, sizeof *m);
  if (!m) return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  size_t nm = 0;
  for (size_t k = 0; k < x->nmisfits; k++) {
    const char *t = strip_rank(x->misfits[k]);
    size_t len = te_module_len(t), j = 0;
    int32_t rem = rep_remedy(r, x, x->misfits[k]);
    while (j < nm && !(m[j].len == len && strncmp(m[j].name, t, len) == 0)) j++;
    if (j == nm) m[nm++] = (te_mod){t, len, rem, 0};
    else if (stronger(rem, m[j].rem)) m[j].rem = rem;
  }
  /* the routers (left out of the advice): their modules kept out of FP8 */
  for (size_t g = 0; r->router_group && g < r->tab.ngroups; g++) {
    if (!r->router_group[g]) continue;
    const char *t = strip_rank(r->tab.groups[g].tensor);
    size_t len = te_module_len(t), j = 0;
    while (j < nm && !(m[j].len == len && strncmp(m[j].name, t, len) == 0)) j++;
    if (j == nm) m[nm++] = (te_mod){t, len, REP_REMEDY_BF16, 1};
  }
  const char *fmt = rep_te_format(r, x);
  fp8_outfile of;
  int rc = fp8_outfile_open(&of, r->outdir, "te_recipe.py", err, errlen);
  if (rc) {
    free(m);
    return rc;
  }
  FILE *fp = of.fp;
  int current = 0;
  for (size_t j = 0; j < nm; j++) current |= m[j].rem == REP_REMEDY_CURRENT;
  put_header(fp, current);
  fputs("MODEL_RECIPE = ", fp);
  put_delayed(fp, x, fmt, x->key.margin);
  fputs("\n\nMODULES = {\n", fp);
  for (size_t j = 0; j < nm; j++) {
    fputs("    ", fp);
    put_pystr(fp, m[j].name, m[j].len);
    fputs(": ", fp);
    if (m[j].rem == REP_REMEDY_BF16) fputs("None,", fp);
    else if (m[j].rem == REP_REMEDY_CURRENT) fprintf(fp, "Float8CurrentScaling(fp8_format=Format.%s),", fmt);
    else {
      put_delayed(fp, x, fmt, m[j].rem);
      fputc(',', fp);
    }
    /* which of its tensors asked for what (the report's table of misfits) */
    fputs("  #", fp);
    if (m[j].router) {
      fputs(" Mixture-of-Experts router: kept out of FP8 ([analysis] routers = bf16)\n", fp);
      continue;
    }
    for (size_t k = 0, n = 0; k < x->nmisfits; k++) {
      const char *t = strip_rank(x->misfits[k]);
      if (te_module_len(t) != m[j].len || strncmp(t, m[j].name, m[j].len) != 0) continue;
      int32_t rem = rep_remedy(r, x, x->misfits[k]);
      int dup = 0; /* the same tensor of another rank */
      for (size_t q = 0; q < k && !dup; q++) dup = strcmp(strip_rank(x->misfits[q]), t) == 0;
      if (dup) continue;
      fprintf(fp, "%s %s: ", n++ ? ";" : "", t + m[j].len + (t[m[j].len] == '.'));
      if (rem == REP_REMEDY_BF16) fputs("BF16 (current scaling misses the flush budget)", fp);
      else if (rem == REP_REMEDY_CURRENT) fputs("current scaling", fp);
      else fprintf(fp, "margin %d", (int)rem);
    }
    fputc('\n', fp);
  }
  fputs("}\n", fp);
  put_footer(fp);
  free(m);
  rc = fp8_outfile_commit(&of, err, errlen);
  if (!rc) r->wrote_te_code = 1;
  return rc;
}
