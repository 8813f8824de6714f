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
        "# wrote it with advice.ini, whose labels replay exactly what each form below applies).\n"
        "# MODEL_RECIPE is the whole-model setting. Two forms of the fixes for the tensors it does\n"
        "# not fit (a larger margin, current scaling, or the module kept out of FP8):\n"
        "# - per tensor (apply()'s default on TE 2.16 and later; advice.ini's label advice): one\n"
        "#   CustomRecipe whose factory gives each advised module's input, weight and grad_output\n"
        "#   their own setting (TENSORS) by the module name TE passes it (QuantizerRole.name),\n"
        "#   delayed scaling as a DelayedScalingRequest (TE keeps its history); a module's input\n"
        "#   and weight share one delayed setting (TE's rule for a forward state); output and\n"
        "#   grad_input, which the factory gets without a name, current scaling in E4M3; a module\n"
        "#   with a tensor in BF16 is kept out of FP8 whole (MODULES: None);\n"
        "# - per module (apply(model, form=\"module\"), the default before 2.16, whose factory\n"
        "#   cannot tell modules apart; label advice_module): MODULES gives each module its own\n"
        "#   recipe, the strongest fix among its tensors (BF16, then current scaling, then the\n"
        "#   largest margin), in an autocast region of its own nested in the model's.\n"
        "#\n"
        "# Use it around your training step (the backward outside the region, as TE wants):\n"
        "#     import te_recipe\n"
        "#     te_recipe.apply(model)  # once, after building the model: warns of what it misses\n"
        "#     with te_recipe.model_region():\n"
        "#         loss = model(batch)\n"
        "#     loss.backward()\n"
        "#\n"
        "# model_region() is the CustomRecipe's region (per tensor), else region(MODEL_RECIPE),\n"
        "# unless every FP8 module of the model has its own recipe. TE runs a module's backward\n"
        "# with the recipe of its forward. A module kept out of FP8 computes in BF16 when its\n"
        "# parameters are BF16 or under torch.autocast. The names are the trace's: a module's\n"
        "# TransformerEngine name (TE's debug logs: name=, Layer_<n>, nvdlfw_inspect's\n"
        "# model.<path>; LayerNormMLP's <name>.fc1/.fc2 and GroupedLinear's <name>.gemm_<i> are\n"
        "# that module) or its path in model.named_modules() (fp8lab's capture tool); apply()\n"
        "# refuses a name the model lacks, and warns, before training, of advised modules TE\n"
        "# does not run in FP8 (plain torch Linears: convert them), of the model's TE modules the\n"
        "# replay did not cover (COVERED: the trace's modules), and of advice TE cannot take apart\n"
        "# (a LayerNormMLP's two GEMMs share a forward state; one name on several modules).\n"
        "# TransformerEngine versions: te.autocast from 2.9 (fp8_autocast before, deprecated\n"
        "# since 2.9; region() takes whichever there is), Float8CurrentScaling from 2.2,\n"
        "# DelayedScaling in every version, CustomRecipe from 2.9, its QuantizerRole and\n"
        "# DelayedScalingRequest from 2.16 (docs/frameworks/te_custom.md).\n"
        "import contextlib\n"
        "import types\n"
        "import warnings\n"
        "\n"
        "import transformer_engine.pytorch as te\n", fp);
  fprintf(fp, "from transformer_engine.common.recipe import DelayedScaling, %sFormat\n\n",
          current ? "Float8CurrentScaling, " : "");
}

/* One advised tensor type of a module in TENSORS. */
typedef struct {
  const char *mod;
  size_t len;
  int role; /* 0 input, 1 weight, 2 grad_output */
  int32_t set;
} te_slot;

static int cmp_slot(const void *pa, const void *pb) {
  const te_slot *a = pa, *b = pb;
  size_t n = a->len < b->len ? a->len : b->len;
  int c = strncmp(a->mod, b->mod, n);
  if (c) return c;
  if (a->len != b->len) return a->len < b->len ? -1 : 1;
  return a->role - b->role;
}

/* TENSORS: the per-tensor form's settings (rep_advice_sets) of the advised modules' input,
 * weight and grad_output that differ from the model setting, per module name (each GEMM of
 * a name has one setting per tensor type). -1: out of memory. */
static int put_tensors(FILE *fp, const rep_t *r, const fp8_recommendation *x) {
  static const char *const roles[3] = {"input", "weight", "grad_output"};
  size_t n = 0, k = 0;
  rep_tset *s = rep_advice_sets(r, x, 1, &n);
  te_slot *v = s ? malloc((n + 1) * sizeof *v) : NULL;
  if (!v) {
    free(s);
    return -1;
  }
  for (size_t i = 0; i < n; i++) {
    const char *t = rep_strip_rank(s[i].tensor);
    size_t g = rep_module_len(t);
    for (int q = 0; q < 3 && t[g] == '.'; q++)
      if (strcmp(t + g + 1, roles[q]) == 0 && s[i].set != x->key.margin &&
          s[i].set != REP_REMEDY_BF16)
        v[k++] = (te_slot){t, rep_te_module_len(t), q, s[i].set};
  }
  qsort(v, k, sizeof *v, cmp_slot);
  fputs("\n# the per-tensor form: per module name, its tensor types' settings other than the model's\n"
        "# (\"current\": current scaling; a number: delayed scaling with that margin)\n"
        "TENSORS = {\n", fp);
  for (size_t i = 0; i < k; i++) {
    int first = i == 0 || v[i - 1].len != v[i].len || strncmp(v[i - 1].mod, v[i].mod, v[i].len);
    if (!first && v[i - 1].role == v[i].role) continue;
    if (first) {
      if (i) fputs("},\n", fp);
      fputs("    ", fp);
      rep_put_pystr(fp, v[i].mod, v[i].len);
      fputs(": {", fp);
    } else
      fputs(", ", fp);
    if (v[i].set == REP_REMEDY_CURRENT) fprintf(fp, "\"%s\": \"current\"", roles[v[i].role]);
    else fprintf(fp, "\"%s\": %d", roles[v[i].role], (int)v[i].set);
  }
  fputs(k ? "},\n}\n" : "}\n", fp);
  free(v);
  free(s);
  return 0;
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
int rep_put_te_covered(FILE *fp, const rep_t *r) {
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
    "_CUSTOM = None  # apply()'s CustomRecipe in the per-tensor form (one object, reused every step)\n"
    "_CHOICES = {}  # apply() fills it: (a name TE's factory sees, tensor type) -> \"current\" or a margin\n"
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
    "    \"\"\"The training step's region: in the per-tensor form apply()'s CustomRecipe; else\n"
    "    MODEL_RECIPE, or none when apply() found that every FP8 module of the model has its own\n"
    "    recipe (MODEL_RECIPE would govern nothing).\"\"\"\n"
    "    if _CUSTOM is not None:\n"
    "        return region(_CUSTOM)\n"
    "    return region(MODEL_RECIPE) if _GOVERNS else contextlib.nullcontext()\n"
    "\n"
    "\n"
    "def _custom_recipe_api():\n"
    "    \"\"\"(CustomRecipe, DelayedScalingRequest) where TransformerEngine's factory can tell modules\n"
    "    apart and keep delayed scaling's state (2.16 and later: QuantizerRole with the module's\n"
    "    name; DelayedScalingRequest), else None.\"\"\"\n"
    "    try:\n"
    "        from transformer_engine.common.recipe import CustomRecipe\n"
    "        from transformer_engine.pytorch.quantization import DelayedScalingRequest, QuantizerRole\n"
    "    except ImportError:\n"
    "        return None\n"
    "    return CustomRecipe, DelayedScalingRequest\n"
    "\n"
    "\n"
    "def _dtype(name):\n"
    "    if hasattr(te, \"DType\"):  # 2.17 and later\n"
    "        return getattr(te.DType, name)\n"
    "    import transformer_engine_torch as tex  # 2.16\n"
    "    return getattr(tex.DType, name)\n"
    "\n"
    "\n",

    "def _quantizer(choice, tensor_type, request):\n"
    "    \"\"\"choice's quantizer for one slot: \"current\" (E5M2 for a HYBRID recipe's grad_output,\n"
    "    E4M3 otherwise, as TE's current-scaling factory), else delayed scaling on MODEL_RECIPE's\n"
    "    line with margin choice (a request: TE keeps its amax history and scale).\"\"\"\n"
    "    if choice == \"current\":\n"
    "        bwd = tensor_type == \"grad_output\" and MODEL_RECIPE.fp8_format == Format.HYBRID\n"
    "        return te.Float8CurrentScalingQuantizer(_dtype(\"kFloat8E5M2\" if bwd else \"kFloat8E4M3\"),\n"
    "                                                device=\"cuda\")\n"
    "    return request(fp8_format=MODEL_RECIPE.fp8_format, margin=choice,\n"
    "                   amax_history_len=MODEL_RECIPE.amax_history_len,\n"
    "                   amax_compute_algo=MODEL_RECIPE.amax_compute_algo)\n"
    "\n"
    "\n"
    "def qfactory(role):\n"
    "    \"\"\"The per-tensor form's CustomRecipe factory: TENSORS' setting for an advised module's\n"
    "    input, weight and grad_output (by the name TE gives the factory: apply() maps the trace's\n"
    "    names to them), MODEL_RECIPE's for every other role; current scaling in E4M3 for the slots\n"
    "    TE gives no name (role None: output and grad_input).\"\"\"\n"
    "    request = _custom_recipe_api()[1]\n"
    "    if role is None:\n"
    "        return _quantizer(\"current\", \"\", request)\n"
    "    choice = _CHOICES.get((role.name, role.tensor_type), MODEL_RECIPE.margin)\n"
    "    return _quantizer(choice, role.tensor_type, request)\n"
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
    "    if recipe == \"current\" or type(recipe).__name__ == \"Float8CurrentScaling\":\n"
    "        return (1, 0)\n"
    "    return (0, recipe if isinstance(recipe, int) else getattr(recipe, \"margin\", 0))\n"
    "\n"
    "\n"
    "def _convert_to(module):\n"
    "    kind = type(module).__name__\n"
    "    if kind in (\"Linear\", \"Conv1D\", \"LazyLinear\"):\n"
    "        return \"te.Linear\"\n"
    "    if \"xpert\" in kind or \"MoE\" in kind:\n"
    "        return \"te.GroupedLinear\"\n"
    "    return \"a TransformerEngine module (te.Linear, te.LayerNormLinear, te.LayerNormMLP, \" \\\n"
    "           \"te.GroupedLinear)\"\n"
    "\n"
    "\n",

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

    "def _tensor_form(model, paths, resolve, path_of):\n"
    "    \"\"\"The per-tensor form: TENSORS' choices by the names TE's factory will see (a module's\n"
    "    `name`, `<name>.fc1`/`.fc2` for a LayerNormMLP), the forward state's delayed requests made\n"
    "    one parameter set where a module holds several GEMMs; returns the warning lines.\"\"\"\n"
    "    lines = []\n"
    "    _CHOICES.clear()\n"
    "    gemms = {}  # id(module) -> (module, {factory name: trace name})\n"
    "    for key, choices in TENSORS.items():\n"
    "        head, _, last = key.rpartition(\".\")\n"
    "        for m in resolve(key):\n"
    "            if not getattr(m, \"name\", None):  # unnamed: the factory would see \"\"\n"
    "                m.name = head if _te_class(m) == \"LayerNormMLP\" and last in (\"fc1\", \"fc2\") \\\n"
    "                    else key\n"
    "            fn = m.name + \".\" + last if _te_class(m) == \"LayerNormMLP\" and \\\n"
    "                last in (\"fc1\", \"fc2\") else m.name\n"
    "            fns = gemms.setdefault(id(m), (m, {}))[1]\n"
    "            fns[fn] = key\n"
    "            if _te_class(m) == \"LayerNormMLP\":  # both GEMMs are in its states\n"
    "                for g in (\"fc1\", \"fc2\"):\n"
    "                    fns.setdefault(m.name + \".\" + g, (head if last in (\"fc1\", \"fc2\") else key)\n"
    "                                   + \".\" + g)\n"
    "            for tt, c in choices.items():\n"
    "                old = _CHOICES.get((fn, tt))\n"
    "                if old is None or _strength(c) > _strength(old):\n"
    "                    _CHOICES[(fn, tt)] = c\n"
    "    for m, fns in gemms.values():\n"
    "        # TE requires one parameter set of the delayed requests in a module's forward state\n"
    "        # (its GEMMs' inputs and weights) and in its backward state (their grad_outputs)\n"
    "        for state, types_ in ((\"forward\", (\"input\", \"weight\")), (\"backward\", (\"grad_output\",))):\n"
    "            slots = [(fn, tt) for fn in fns for tt in types_]\n"
    "            ds = [_CHOICES.get(k, MODEL_RECIPE.margin) for k in slots]\n"
    "            ds = [c for c in ds if c != \"current\"]\n"
    "            if len(set(ds)) > 1:\n"
    "                for k in slots:\n"
    "                    if _CHOICES.get(k, MODEL_RECIPE.margin) != \"current\":\n"
    "                        _CHOICES[k] = max(ds)\n"
    "                lines.append(\"  %s: TE's %s state of this module holds %s: their delayed %s \"\n"
    "                             \"take one setting, margin %d (advice.ini's label advice replayed \"\n"
    "                             \"them apart)\" % (path_of[id(m)], state,\n"
    "                                              \", \".join(sorted(fns.values())),\n"
    "                                              \" and \".join(types_), max(ds)))\n"
    "    # a name TE's factory sees on modules the advice did not name: they take its setting too\n"
    "    advised = {m.name for m, _ in gemms.values()}\n"
    "    for p, m in paths.items():\n"
    "        n = getattr(m, \"name\", None)\n"
    "        if _is_te(m) and id(m) not in gemms and n in advised:\n"
    "            lines.append(\"  %s: named %s as an advised module: TE's factory cannot tell them \"\n"
    "                         \"apart, so it takes that module's setting too\" % (p, n))\n"
    "    if lines:\n",

    "        lines.insert(0, \"per tensor, where TransformerEngine cannot apply the advice as \"\n"
    "                        \"advice.ini replayed it:\")\n"
    "    return lines\n"
    "\n"
    "\n",

    "def apply(model, form=None):\n"
    "    \"\"\"Applies the advice to model (a torch.nn.Module), once, before training. form\n"
    "    \"tensor\" (the default where TransformerEngine has CustomRecipe's QuantizerRole and\n"
    "    DelayedScalingRequest, 2.16 and later): one CustomRecipe (qfactory: TENSORS' settings, the\n"
    "    model setting elsewhere), the modules of MODULES with None kept out of FP8; advice.ini's\n"
    "    label advice replays it. form \"module\" (the default before 2.16): each module of MODULES\n"
    "    its recipe, in its own autocast region; label advice_module replays it.\n"
    "    A name is the module's TE name (its `name`; every module that carries it), else its path\n"
    "    in model.named_modules(); a LayerNormMLP's `.fc1` and `.fc2` (per module: one recipe for\n"
    "    both, the stronger) and a GroupedLinear's `.gemm_<i>` are the module. Raises KeyError for a\n"
    "    name the model lacks. Warns (TERecipeWarning), before training starts, of the advised\n"
    "    modules TE does not run in FP8 (convert them to the TE class named; a module advised None\n"
    "    needs nothing), of the model's TE modules the replay did not cover (they run under the\n"
    "    model setting, unchecked), of a model without TE modules, and where TE cannot take the\n"
    "    per-tensor advice apart. Returns what it did: {\"form\", \"modules\": {path: [names]},\n"
    "    \"not_te\": [(path, class, convert to)], \"not_covered\": [paths], \"model_recipe_governs\":\n"
    "    [paths], \"tensors\": {(factory name, tensor type): setting}}.\"\"\"\n"
    "    global _GOVERNS, _CUSTOM\n"
    "    api = _custom_recipe_api()\n"
    "    if form is None:\n"
    "        form = \"tensor\" if api else \"module\"\n"
    "    if form not in (\"tensor\", \"module\"):\n"
    "        raise ValueError(\"te_recipe.apply: form is \\\"tensor\\\" or \\\"module\\\", not %r\" % (form,))\n"
    "    if form == \"tensor\" and not api:\n"
    "        raise RuntimeError(\"te_recipe.apply: the per-tensor form needs TransformerEngine 2.16 or \"\n"
    "                           \"later (CustomRecipe's QuantizerRole, DelayedScalingRequest); \"\n"
    "                           \"use form=\\\"module\\\"\")\n"
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
    "                       \"call it on the model before apply(), as before training)\")\n",

    "    covered = {id(m) for key in COVERED for m in resolve(key)}\n"
    "    fp8 = [(p, m) for p, m in paths.items() if _te_class(m) in TE_GEMM_MODULES]\n"
    "    not_te = [(path_of[i], type(m).__name__, _convert_to(m)) for i, (m, r, _) in chosen.items()\n"
    "              if not _is_te(m) and r is not None]  # kept out of FP8: nothing to convert\n"
    "    not_covered = [p for p, m in fp8 if id(m) not in covered]\n"
    "    if form == \"tensor\":  # only the modules kept out of FP8 get a region of their own\n"
    "        chosen = {i: c for i, c in chosen.items() if c[1] is None}\n"
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
    "                     \"(the advice did not check them; they run under the model setting):\"\n"
    "                     % len(not_covered))\n"
    "        lines += [\"  \" + p for p in not_covered]\n"
    "    if not fp8:\n"
    "        lines.append(\"the model has no TransformerEngine FP8 module (%s): no recipe of this file \"\n"
    "                     \"applies until its Linear layers are TE modules\" % \", \".join(TE_GEMM_MODULES))\n"
    "    elif not governs:\n"
    "        lines.append(\"every FP8 module has its own recipe: MODEL_RECIPE governs nothing \"\n"
    "                     \"(model_region() opens no outer region)\")\n"
    "    _CUSTOM = None\n"
    "    if form == \"tensor\":\n"
    "        lines += _tensor_form(model, paths, resolve, path_of)\n"
    "        _CUSTOM = api[0](qfactory=qfactory)\n"
    "    if lines:\n"
    "        warnings.warn(\"te_recipe.apply:\\n\" + \"\\n\".join(lines), TERecipeWarning, stacklevel=2)\n"
    "    for m, recipe, _ in chosen.values():\n"
    "        _wrap(m, recipe)\n"
    "    return {\"form\": form, \"modules\": {path_of[i]: keys for i, (_, _, keys) in chosen.items()},\n"
    "            \"not_te\": not_te, \"not_covered\": not_covered, \"model_recipe_governs\": governs,\n"
    "            \"tensors\": dict(_CHOICES)}\n"};

void rep_put_te_footer(FILE *fp) {
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
  if (put_tensors(fp, r, x) || rep_put_te_covered(fp, r)) {
    fp8_outfile_abort(&of);
    free(m);
    return fp8_errorf(FP8_ENOMEM, err, errlen, "out of memory");
  }
  rep_put_te_footer(fp);
  free(m);
  rc = fp8_outfile_commit(&of, err, errlen);
  if (!rc) r->wrote_te_code = 1;
  return rc;
}
