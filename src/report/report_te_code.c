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
 * "Applying the advice in TransformerEngine" cites the sources and versions). apply() finds a
 * module by the name TE gives it (docs/frameworks/te.md) or by its path, and warns of what the
 * advice does not reach (FOOTER; COVERED lists the trace's modules). tests/report/
 * test_keep_bf16.py compiles it and runs apply() against stub TransformerEngine modules;
 * test_te_names.py against TE's module tree transcribed (tests/report/te_stub). An expert GEMM's module is its GroupedLinear (or HF's experts
 * module): one recipe for all its experts (rep_te_module_len; tests/report/test_te_code_experts.py). */
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

/* 1 when fix a is stronger than b: BF16, then current scaling, then the larger margin. */
static int stronger(int32_t a, int32_t b) {
  if (a == b) return 0;
  if (a == REP_REMEDY_BF16 || b == REP_REMEDY_BF16) return a == REP_REMEDY_BF16;
  if (a == REP_REMEDY_CURRENT || b == REP_REMEDY_CURRENT) return a == REP_REMEDY_CURRENT;
  return a > b;
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
    else if (stronger(rem, m[j].rem)) m[j].rem = rem;
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

void rep_put_pystr(FILE *fp, const char *s, size_t n) {
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
        "#     te_recipe.apply(model)  # once, after building the model: warns of what it misses\n"
        "#     with te_recipe.model_region():\n"
        "#         loss = model(batch)\n"
        "#     loss.backward()\n"
        "#\n"
        "# apply() wraps each listed module's forward in its own autocast region nested in the\n"
        "# model's (the inner region overrides the outer one; TE runs a module's backward with\n"
        "# the recipe of its forward). model_region() is region(MODEL_RECIPE), the outer region,\n"
        "# unless every FP8 module of the model has its own recipe. A module kept out of FP8\n"
        "# computes in BF16 when its parameters are BF16 or under torch.autocast. The names are\n"
        "# the trace's: a module's TransformerEngine name (TE's debug logs: name=, Layer_<n>,\n"
        "# nvdlfw_inspect's model.<path>; LayerNormMLP's <name>.fc1/.fc2 and GroupedLinear's\n"
        "# <name>.gemm_<i> are that module) or its path in model.named_modules() (fp8lab's\n"
        "# capture tool); apply() refuses a name the model lacks, and warns, before training,\n"
        "# of advised modules TE does not run in FP8 (plain torch Linears: convert them) and of\n"
        "# the model's TE modules the replay did not cover (COVERED: the trace's modules).\n"
        "# TransformerEngine versions: te.autocast from 2.9 (fp8_autocast before, deprecated\n"
        "# since 2.9; region() takes whichever there is), Float8CurrentScaling from 2.2,\n"
        "# DelayedScaling in every version.\n"
        "import contextlib\n"
        "import types\n"
        "import warnings\n"
        "\n"
        "import transformer_engine.pytorch as te\n", fp);
  fprintf(fp, "from transformer_engine.common.recipe import DelayedScaling, %sFormat\n\n",
          current ? "Float8CurrentScaling, " : "");
}

/* A module name: the first len bytes of name. */
typedef struct {
  const char *name;
  size_t len;
} te_name;

static int cmp_te_name(const void *pa, const void *pb) {
  const te_name *a = pa, *b = pb;
  size_t n = a->len < b->len ? a->len : b->len;
  int c = strncmp(a->name, b->name, n);
  return c ? c : (a->len > b->len) - (a->len < b->len);
}

/* COVERED: every module of the trace (its tensors' rep_te_module_len, ranks' prefixes dropped),
 * each once, in name order, as a Python list. -1: out of memory. */
static int put_covered(FILE *fp, const rep_t *r) {
  size_t n = r->tab.ngroups, k = 0;
  te_name *v = malloc((n + 1) * sizeof *v);
  if (!v) return -1;
  for (size_t g = 0; g < n; g++) {
    const char *t = rep_strip_rank(r->tab.groups[g].tensor);
    v[g] = (te_name){t, rep_te_module_len(t)};
  }
  qsort(v, n, sizeof *v, cmp_te_name);
  fputs("\n# the modules of the replayed trace (apply() warns of the model's TE modules not among them)\n"
        "COVERED = [\n", fp);
  for (size_t g = 0; g < n; g++) {
    if (k && cmp_te_name(&v[g], &v[k - 1]) == 0) continue;
    v[k++] = v[g];
    fputs("    ", fp);
    rep_put_pystr(fp, v[g].name, v[g].len);
    fputs(",\n", fp);
  }
  fputs("]\n", fp);
  free(v);
  return 0;
}

/* apply() and its helpers: the names TE gives its modules and GEMMs mapped to the model's
 * modules (docs/frameworks/te.md cites TE's sources), the listed warnings, model_region().
 * Pieces of under 4095 bytes (C11's string literal limit). */
static const char *const FOOTER[] = {
    "\n"
    "\n"
    "# TransformerEngine's modules that run FP8 GEMMs, and the names TE gives their GEMMs in its debug\n"
    "# logs (docs/frameworks/te.md): a module's `name` (given, `Layer_<n>`, or nvdlfw_inspect's\n"
    "# infer_and_assign_layer_names, `model.<attribute path>`); LayerNormMLP's GEMMs `<name>.fc1`\n"
    "# and `<name>.fc2`; GroupedLinear's `<name>.gemm_<i>`; MultiheadAttention names its children\n"
    "# after its own name (`.layernorm_linear_qkv`, `.linear_qkv`, `.layernorm_linear_q`,\n"
    "# `.linear_kv`, `.proj`) where their attributes are `layernorm_qkv`, `qkv`, `layernorm_query`,\n"
    "# `key_value`, `proj`.\n"
    "TE_GEMM_MODULES = (\"Linear\", \"LayerNormLinear\", \"LayerNormMLP\", \"GroupedLinear\")\n"
    "_ATTRIBUTE_OF = {\"layernorm_linear_qkv\": \"layernorm_qkv\", \"linear_qkv\": \"qkv\",\n"
    "                 \"layernorm_linear_q\": \"layernorm_query\", \"linear_kv\": \"key_value\"}\n"
    "_GOVERNS = True  # apply() sets it: whether MODEL_RECIPE governs any module\n"
    "\n"
    "\n"
    "class TERecipeWarning(UserWarning):\n"
    "    \"\"\"apply()'s list of what the advice does not reach: modules TE does not run in FP8, and\n"
    "    TE modules the replay did not cover.\"\"\"\n"
    "\n"
    "\n"
    "def region(recipe):\n"
    "    \"\"\"A new autocast region: FP8 with recipe, or none (recipe None: out of FP8).\"\"\"\n"
    "    if hasattr(te, \"autocast\"):  # TransformerEngine 2.9 and later\n"
    "        return te.autocast(enabled=recipe is not None, recipe=recipe)\n"
    "    return te.fp8_autocast(enabled=recipe is not None, fp8_recipe=recipe)\n"
    "\n"
    "\n"
    "def model_region():\n"
    "    \"\"\"The training step's region: MODEL_RECIPE, or none when apply() found that every FP8\n"
    "    module of the model has its own recipe (MODEL_RECIPE would govern nothing).\"\"\"\n"
    "    return region(MODEL_RECIPE) if _GOVERNS else contextlib.nullcontext()\n"
    "\n"
    "\n"
    "def _wrap(module, recipe):\n"
    "    def forward_with_recipe(self, *args, **kwargs):\n"
    "        with region(recipe):\n"
    "            return type(self).forward(self, *args, **kwargs)\n"
    "\n"
    "    # a method bound to the module: copy.deepcopy of the model (EMA, eval copies) binds it to\n"
    "    # the copy, which then runs its own forward\n"
    "    module.forward = types.MethodType(forward_with_recipe, module)\n"
    "\n"
    "\n"
    "def _te_class(module):\n"
    "    \"\"\"The TransformerEngine class the module is or derives from (Megatron's TELinear is a\n"
    "    te.Linear), the FP8 GEMM ones first; None for a module outside TE.\"\"\"\n"
    "    te_bases = [c for c in type(module).__mro__\n"
    "                if c.__module__.split(\".\")[0] == \"transformer_engine\"]\n"
    "    for c in te_bases:\n"
    "        if c.__name__ in TE_GEMM_MODULES:\n"
    "            return c.__name__\n"
    "    return te_bases[0].__name__ if te_bases else None\n"
    "\n"
    "\n"
    "def _is_te(module):\n"
    "    return _te_class(module) is not None\n"
    "\n"
    "\n"
    "def _strength(recipe):  # BF16, then current scaling, then the larger margin\n"
    "    if recipe is None:\n"
    "        return (2, 0)\n"
    "    if type(recipe).__name__ == \"Float8CurrentScaling\":\n"
    "        return (1, 0)\n"
    "    return (0, getattr(recipe, \"margin\", 0))\n"
    "\n"
    "\n",

    "def _convert_to(module):\n"
    "    kind = type(module).__name__\n"
    "    if kind in (\"Linear\", \"Conv1D\", \"LazyLinear\"):\n"
    "        return \"te.Linear\"\n"
    "    if \"xpert\" in kind or \"MoE\" in kind:\n"
    "        return \"te.GroupedLinear\"\n"
    "    return \"a TransformerEngine module (te.Linear, te.LayerNormLinear, te.LayerNormMLP, \" \\\n"
    "           \"te.GroupedLinear)\"\n"
    "\n"
    "\n"
    "def _resolver(model):\n"
    "    paths = dict(model.named_modules())\n"
    "    names = {}  # a TE name -> its modules (one name may be given to several: all take it)\n"
    "    for path, m in paths.items():\n"
    "        n = getattr(m, \"name\", None)\n"
    "        if isinstance(n, str) and n:\n"
    "            names.setdefault(n, []).append(m)\n"
    "\n"
    "    def path_is_name(k):\n"
    "        \"\"\"Whether path k is also the name nvdlfw_inspect's infer_and_assign_layer_names would\n"
    "        give (model.<path>): it numbers a ModuleList's child by its layer_number, where it has\n"
    "        one, so such a path is that name only where layer_number is the index.\"\"\"\n"
    "        parent = model\n"
    "        for c in k.split(\".\"):\n"
    "            child = getattr(parent, c, None)\n"
    "            if type(parent).__name__ == \"ModuleList\" and hasattr(child, \"layer_number\") and \\\n"
    "                    str(child.layer_number) != c:\n"
    "                return False\n"
    "            parent = child\n"
    "        return True\n"
    "\n"
    "    def find(key):\n"
    "        for k in (key, \".\".join(_ATTRIBUTE_OF.get(c, c) for c in key.split(\".\"))):\n"
    "            if k in names:\n"
    "                return names[k]\n"
    "            if k in paths and (not k.startswith(\"model.\") or path_is_name(k)):\n"
    "                return [paths[k]]\n"
    "        return []\n"
    "\n"
    "    def resolve(key):\n"
    "        \"\"\"The modules a trace's module name stands for ([] when none).\"\"\"\n"
    "        ms = find(key)\n"
    "        if ms:\n"
    "            return ms\n"
    "        head, _, last = key.rpartition(\".\")\n"
    "        ms = find(head) if head else []\n"
    "        return [m for m in ms if last in (\"fc1\", \"fc2\") and _te_class(m) == \"LayerNormMLP\" or\n"
    "                last.startswith(\"gemm_\") and last[5:].isdigit() and\n"
    "                _te_class(m) == \"GroupedLinear\"]\n"
    "\n"
    "    return paths, resolve\n"
    "\n"
    "\n",

    "def apply(model):\n"
    "    \"\"\"Gives each module of MODULES its recipe (model: a torch.nn.Module). A name is the\n"
    "    module's TE name (its `name`; every module that carries it), else its path in\n"
    "    model.named_modules(); a LayerNormMLP's\n"
    "    `.fc1` and `.fc2` (one recipe for both: the stronger) and a GroupedLinear's `.gemm_<i>` are\n"
    "    the module. Raises KeyError for a name the model lacks. Warns (TERecipeWarning), before\n"
    "    training starts, of the advised modules TE does not run in FP8 (convert them to the TE\n"
    "    class named; a module advised None needs nothing), of the model's TE modules the replay\n"
    "    did not cover (they run under MODEL_RECIPE, unchecked), and of a model without TE modules. Returns what it did: {\"modules\": {path: [names]}, \"not_te\":\n"
    "    [(path, class, convert to)], \"not_covered\": [paths], \"model_recipe_governs\": [paths]}.\"\"\"\n"
    "    global _GOVERNS\n"
    "    paths, resolve = _resolver(model)\n"
    "    path_of = {id(m): p for p, m in reversed(list(paths.items()))}\n"
    "    chosen, missing = {}, []\n"
    "    for key, recipe in MODULES.items():\n"
    "        ms = resolve(key)\n"
    "        if not ms:\n"
    "            missing.append(key)\n"
    "        for m in ms:\n"
    "            c = chosen.setdefault(id(m), [m, recipe, []])\n"
    "            if _strength(recipe) > _strength(c[1]):\n"
    "                c[1] = recipe\n"
    "            c[2].append(key)\n"
    "    if missing:\n"
    "        raise KeyError(\"te_recipe: not modules of this model: \" + \", \".join(sorted(missing)) +\n"
    "                       \" (by TE name or module path; TransformerEngine 2.3-2.11 names a module \"\n"
    "                       \"given no name= Layer_<n> only at its first forward in debug mode: \"\n"
    "                       \"apply() after one step, or give the modules their names; names \"\n"
    "                       \"model.<...> come from nvdlfw_inspect's infer_and_assign_layer_names: \"\n"
    "                       \"call it on the model before apply(), as before training)\")\n"
    "    covered = {id(m) for key in COVERED for m in resolve(key)}\n"
    "    fp8 = [(p, m) for p, m in paths.items() if _te_class(m) in TE_GEMM_MODULES]\n"
    "    not_te = [(path_of[i], type(m).__name__, _convert_to(m)) for i, (m, r, _) in chosen.items()\n"
    "              if not _is_te(m) and r is not None]  # kept out of FP8: nothing to convert\n"
    "    not_covered = [p for p, m in fp8 if id(m) not in covered]\n"
    "    governs = [p for p, m in fp8 if id(m) not in chosen]\n"
    "    _GOVERNS = bool(governs) or not fp8\n"
    "    lines = []\n"
    "    if not_te:\n"
    "        lines.append(\"%d advised module(s) are not TransformerEngine modules: a TE autocast \"\n"
    "                     \"region does nothing to them, so their advice does not apply until they \"\n"
    "                     \"are converted:\" % len(not_te))\n"
    "        lines += [\"  %s (%s): convert to %s\" % x for x in not_te]\n"
    "    if not_covered:\n"
    "        lines.append(\"%d TransformerEngine module(s) of the model were not in the replayed trace \"\n"
    "                     \"(the advice did not check them; they run under MODEL_RECIPE):\"\n"
    "                     % len(not_covered))\n"
    "        lines += [\"  \" + p for p in not_covered]\n"
    "    if not fp8:\n"
    "        lines.append(\"the model has no TransformerEngine FP8 module (%s): no recipe of this file \"\n"
    "                     \"applies until its Linear layers are TE modules\" % \", \".join(TE_GEMM_MODULES))\n"
    "    elif not governs:\n"
    "        lines.append(\"every FP8 module has its own recipe: MODEL_RECIPE governs nothing \"\n"
    "                     \"(model_region() opens no outer region)\")\n"
    "    if lines:\n"
    "        warnings.warn(\"te_recipe.apply:\\n\" + \"\\n\".join(lines), TERecipeWarning, stacklevel=2)\n"
    "    for m, recipe, _ in chosen.values():\n"
    "        _wrap(m, recipe)\n"
    "    return {\"modules\": {path_of[i]: keys for i, (_, _, keys) in chosen.items()},\n"
    "            \"not_te\": not_te, \"not_covered\": not_covered, \"model_recipe_governs\": governs}\n"};

static void put_footer(FILE *fp) {
  for (size_t i = 0; i < sizeof FOOTER / sizeof *FOOTER; i++) fputs(FOOTER[i], fp);
}

int rep_write_te_code(rep_t *r, char *err, size_t errlen) {
  const fp8_recommendation *x = rep_model_rec(r);
  if (!x || !x->in_run || x->key.kind != FP8_KIND_DELAYED || !x->meets_budget ||
      (!x->nmisfits && !r->router_group))
    return FP8_OK; /* advice.ini's condition: no per-module advice */
  size_t nm = 0;
  rep_te_mod *m = rep_te_modules(r, x, &nm);
  if (!m) return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
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
    rep_put_pystr(fp, m[j].name, m[j].len);
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
      const char *t = rep_strip_rank(x->misfits[k]);
      if (rep_te_module_len(t) != m[j].len || strncmp(t, m[j].name, m[j].len) != 0) continue;
      int32_t rem = rep_remedy(r, x, x->misfits[k]);
      int dup = 0; /* the same tensor of another rank */
      for (size_t q = 0; q < k && !dup; q++) dup = strcmp(rep_strip_rank(x->misfits[q]), t) == 0;
      if (dup) continue;
      fprintf(fp, "%s %s: ", n++ ? ";" : "", t + m[j].len + (t[m[j].len] == '.'));
      if (rem == REP_REMEDY_BF16) fputs("BF16 (current scaling misses the flush budget)", fp);
      else if (rem == REP_REMEDY_CURRENT) fputs("current scaling", fp);
      else fprintf(fp, "margin %d", (int)rem);
    }
    fputc('\n', fp);
  }
  fputs("}\n", fp);
  if (put_covered(fp, r)) {
    fp8_outfile_abort(&of);
    free(m);
    return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  }
  put_footer(fp);
  free(m);
  rc = fp8_outfile_commit(&of, err, errlen);
  if (!rc) r->wrote_te_code = 1;
  return rc;
}
