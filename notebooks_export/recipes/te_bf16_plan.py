# te_bf16_plan.py: fp8lab's BF16 demotion plans (bf16_plan.csv) as TransformerEngine
# code (fp8lab report wrote it beside report.md): each plan's recipe for the model and its
# layers in order; apply_plan() keeps the plan's first `steps` layers out of FP8:
#     import te_bf16_plan
#     te_bf16_plan.apply_plan(model, "fp8")  # or "fp4"; steps=k for step k (default: all)
#     with te_bf16_plan.model_region():
#         loss = model(batch)
#     loss.backward()
# The names are the trace's, found as te_recipe.py finds them (a module's TE name or its
# path; docs/frameworks/te.md); apply_plan() refuses a name the model lacks and warns of
# advised modules that are not TE modules and of TE modules the replay did not cover.
# bf16_plan.ini replays each step (label <plan>_plan_<k>).
# fp8: the answer's whole-model setting (short_margin L=16 m=1 max), as DelayedScaling.
import contextlib
import types
import warnings

import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format


def _fp8_recipe():
    return DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=16, margin=1,
                          amax_compute_algo="max")


PLANS = {  # plan -> (its recipe, its layers in order: step k keeps the first k in BF16)
    "fp8": (_fp8_recipe, [
        "layers.1.fc2",  # step 1
        "layers.1.fc1",  # step 2
        "layers.3.qkv",  # step 3
        "layers.1.qkv",  # step 4
        "layers.0.fc2",  # step 5
        "layers.2.qkv",  # step 6
    ]),
}

MODEL_RECIPE = None  # apply_plan() sets it: the plan's recipe
MODULES = {}  # apply_plan() sets it: the plan's first `steps` layers, None (BF16)
TENSORS = {}  # no per-tensor settings: a plan has one recipe for the rest

# the modules of the replayed trace (apply() warns of the model's TE modules not among them)
COVERED = [
    "layers.0.fc1",
    "layers.0.fc2",
    "layers.0.proj",
    "layers.0.qkv",
    "layers.1.fc1",
    "layers.1.fc2",
    "layers.1.proj",
    "layers.1.qkv",
    "layers.2.fc1",
    "layers.2.fc2",
    "layers.2.proj",
    "layers.2.qkv",
    "layers.3.fc1",
    "layers.3.fc2",
    "layers.3.proj",
    "layers.3.qkv",
]


# TransformerEngine's modules that run FP8 GEMMs, and the names TE gives their GEMMs in its debug
# logs (docs/frameworks/te.md): a module's `name` (given, `Layer_<n>`, or nvdlfw_inspect's
# infer_and_assign_layer_names, `model.<attribute path>`); LayerNormMLP's GEMMs `<name>.fc1`
# and `<name>.fc2`; GroupedLinear's `<name>.gemm_<i>`; MultiheadAttention names its children
# after its own name (`.layernorm_linear_qkv`, `.linear_qkv`, `.layernorm_linear_q`,
# `.linear_kv`, `.proj`) where their attributes are `layernorm_qkv`, `qkv`, `layernorm_query`,
# `key_value`, `proj`.
TE_GEMM_MODULES = ("Linear", "LayerNormLinear", "LayerNormMLP", "GroupedLinear")
_ATTRIBUTE_OF = {"layernorm_linear_qkv": "layernorm_qkv", "linear_qkv": "qkv",
                 "layernorm_linear_q": "layernorm_query", "linear_kv": "key_value"}
_GOVERNS = True  # apply() sets it: whether MODEL_RECIPE governs any module
_CUSTOM = None  # apply()'s CustomRecipe in the per-tensor form (one object, reused every step)
_CHOICES = {}  # apply() fills it: (a name TE's factory sees, tensor type) -> "current" or a margin


class TERecipeWarning(UserWarning):
    """apply()'s list of what the advice does not reach: modules TE does not run in FP8, and
    TE modules the replay did not cover."""


def region(recipe):
    """A new autocast region: FP8 with recipe, or none (recipe None: out of FP8)."""
    if hasattr(te, "autocast"):  # TransformerEngine 2.9 and later
        return te.autocast(enabled=recipe is not None, recipe=recipe)
    return te.fp8_autocast(enabled=recipe is not None, fp8_recipe=recipe)


def model_region():
    """The training step's region: in the per-tensor form apply()'s CustomRecipe; else
    MODEL_RECIPE, or none when apply() found that every FP8 module of the model has its own
    recipe (MODEL_RECIPE would govern nothing)."""
    if _CUSTOM is not None:
        return region(_CUSTOM)
    return region(MODEL_RECIPE) if _GOVERNS else contextlib.nullcontext()


def _custom_recipe_api():
    """(CustomRecipe, DelayedScalingRequest) where TransformerEngine's factory can tell modules
    apart and keep delayed scaling's state (2.16 and later: QuantizerRole with the module's
    name; DelayedScalingRequest), else None."""
    try:
        from transformer_engine.common.recipe import CustomRecipe
        from transformer_engine.pytorch.quantization import DelayedScalingRequest, QuantizerRole
    except ImportError:
        return None
    return CustomRecipe, DelayedScalingRequest


def _dtype(name):
    if hasattr(te, "DType"):  # 2.17 and later
        return getattr(te.DType, name)
    import transformer_engine_torch as tex  # 2.16
    return getattr(tex.DType, name)


def _quantizer(choice, tensor_type, request):
    """choice's quantizer for one slot: "current" (E5M2 for a HYBRID recipe's grad_output,
    E4M3 otherwise, as TE's current-scaling factory), else delayed scaling on MODEL_RECIPE's
    line with margin choice (a request: TE keeps its amax history and scale)."""
    if choice == "current":
        bwd = tensor_type == "grad_output" and MODEL_RECIPE.fp8_format == Format.HYBRID
        return te.Float8CurrentScalingQuantizer(_dtype("kFloat8E5M2" if bwd else "kFloat8E4M3"),
                                                device="cuda")
    return request(fp8_format=MODEL_RECIPE.fp8_format, margin=choice,
                   amax_history_len=MODEL_RECIPE.amax_history_len,
                   amax_compute_algo=MODEL_RECIPE.amax_compute_algo)


def qfactory(role):
    """The per-tensor form's CustomRecipe factory: TENSORS' setting for an advised module's
    input, weight and grad_output (by the name TE gives the factory: apply() maps the trace's
    names to them), MODEL_RECIPE's for every other role; current scaling in E4M3 for the slots
    TE gives no name (role None: output and grad_input)."""
    request = _custom_recipe_api()[1]
    if role is None:
        return _quantizer("current", "", request)
    choice = _CHOICES.get((role.name, role.tensor_type), MODEL_RECIPE.margin)
    return _quantizer(choice, role.tensor_type, request)


def _wrap(module, recipe):
    def forward_with_recipe(self, *args, **kwargs):
        with region(recipe):
            return type(self).forward(self, *args, **kwargs)

    # a method bound to the module: copy.deepcopy of the model (EMA, eval copies) binds it to
    # the copy, which then runs its own forward
    module.forward = types.MethodType(forward_with_recipe, module)


def _te_class(module):
    """The TransformerEngine class the module is or derives from (Megatron's TELinear is a
    te.Linear), the FP8 GEMM ones first; None for a module outside TE."""
    te_bases = [c for c in type(module).__mro__
                if c.__module__.split(".")[0] == "transformer_engine"]
    for c in te_bases:
        if c.__name__ in TE_GEMM_MODULES:
            return c.__name__
    return te_bases[0].__name__ if te_bases else None


def _is_te(module):
    return _te_class(module) is not None


def _strength(recipe):  # BF16, then current scaling, then the larger margin
    if recipe is None:
        return (2, 0)
    if recipe == "current" or type(recipe).__name__ == "Float8CurrentScaling":
        return (1, 0)
    return (0, recipe if isinstance(recipe, int) else getattr(recipe, "margin", 0))


def _convert_to(module):
    kind = type(module).__name__
    if kind in ("Linear", "Conv1D", "LazyLinear"):
        return "te.Linear"
    if "xpert" in kind or "MoE" in kind:
        return "te.GroupedLinear"
    return "a TransformerEngine module (te.Linear, te.LayerNormLinear, te.LayerNormMLP, " \
           "te.GroupedLinear)"


def _resolver(model):
    paths = dict(model.named_modules())
    names = {}  # a TE name -> its modules (one name may be given to several: all take it)
    for path, m in paths.items():
        n = getattr(m, "name", None)
        if isinstance(n, str) and n:
            names.setdefault(n, []).append(m)

    def path_is_name(k):
        """Whether path k is also the name nvdlfw_inspect's infer_and_assign_layer_names would
        give (model.<path>): it numbers a ModuleList's child by its layer_number, where it has
        one, so such a path is that name only where layer_number is the index."""
        parent = model
        for c in k.split("."):
            child = getattr(parent, c, None)
            if type(parent).__name__ == "ModuleList" and hasattr(child, "layer_number") and \
                    str(child.layer_number) != c:
                return False
            parent = child
        return True

    def find(key):
        for k in (key, ".".join(_ATTRIBUTE_OF.get(c, c) for c in key.split("."))):
            if k in names:
                return names[k]
            if k in paths and (not k.startswith("model.") or path_is_name(k)):
                return [paths[k]]
        return []

    def resolve(key):
        """The modules a trace's module name stands for ([] when none)."""
        ms = find(key)
        if ms:
            return ms
        head, _, last = key.rpartition(".")
        ms = find(head) if head else []
        return [m for m in ms if last in ("fc1", "fc2") and _te_class(m) == "LayerNormMLP" or
                last.startswith("gemm_") and last[5:].isdigit() and
                _te_class(m) == "GroupedLinear"]

    return paths, resolve


def _tensor_form(model, paths, resolve, path_of):
    """The per-tensor form: TENSORS' choices by the names TE's factory will see (a module's
    `name`, `<name>.fc1`/`.fc2` for a LayerNormMLP), the forward state's delayed requests made
    one parameter set where a module holds several GEMMs; returns the warning lines."""
    lines = []
    _CHOICES.clear()
    gemms = {}  # id(module) -> (module, {factory name: trace name})
    for key, choices in TENSORS.items():
        head, _, last = key.rpartition(".")
        for m in resolve(key):
            if not getattr(m, "name", None):  # unnamed: the factory would see ""
                m.name = head if _te_class(m) == "LayerNormMLP" and last in ("fc1", "fc2") \
                    else key
            fn = m.name + "." + last if _te_class(m) == "LayerNormMLP" and \
                last in ("fc1", "fc2") else m.name
            fns = gemms.setdefault(id(m), (m, {}))[1]
            fns[fn] = key
            if _te_class(m) == "LayerNormMLP":  # both GEMMs are in its states
                for g in ("fc1", "fc2"):
                    fns.setdefault(m.name + "." + g, (head if last in ("fc1", "fc2") else key)
                                   + "." + g)
            for tt, c in choices.items():
                old = _CHOICES.get((fn, tt))
                if old is None or _strength(c) > _strength(old):
                    _CHOICES[(fn, tt)] = c
    for m, fns in gemms.values():
        # TE requires one parameter set of the delayed requests in a module's forward state
        # (its GEMMs' inputs and weights) and in its backward state (their grad_outputs)
        for state, types_ in (("forward", ("input", "weight")), ("backward", ("grad_output",))):
            slots = [(fn, tt) for fn in fns for tt in types_]
            ds = [_CHOICES.get(k, MODEL_RECIPE.margin) for k in slots]
            ds = [c for c in ds if c != "current"]
            if len(set(ds)) > 1:
                for k in slots:
                    if _CHOICES.get(k, MODEL_RECIPE.margin) != "current":
                        _CHOICES[k] = max(ds)
                lines.append("  %s: TE's %s state of this module holds %s: their delayed %s "
                             "take one setting, margin %d (advice.ini's label advice replayed "
                             "them apart)" % (path_of[id(m)], state,
                                              ", ".join(sorted(fns.values())),
                                              " and ".join(types_), max(ds)))
    # a name TE's factory sees on modules the advice did not name: they take its setting too
    advised = {m.name for m, _ in gemms.values()}
    for p, m in paths.items():
        n = getattr(m, "name", None)
        if _is_te(m) and id(m) not in gemms and n in advised:
            lines.append("  %s: named %s as an advised module: TE's factory cannot tell them "
                         "apart, so it takes that module's setting too" % (p, n))
    if lines:
        lines.insert(0, "per tensor, where TransformerEngine cannot apply the advice as "
                        "advice.ini replayed it:")
    return lines


def apply(model, form=None):
    """Applies the advice to model (a torch.nn.Module), once, before training. form
    "tensor" (the default where TransformerEngine has CustomRecipe's QuantizerRole and
    DelayedScalingRequest, 2.16 and later): one CustomRecipe (qfactory: TENSORS' settings, the
    model setting elsewhere), the modules of MODULES with None kept out of FP8; advice.ini's
    label advice replays it. form "module" (the default before 2.16): each module of MODULES
    its recipe, in its own autocast region; label advice_module replays it.
    A name is the module's TE name (its `name`; every module that carries it), else its path
    in model.named_modules(); a LayerNormMLP's `.fc1` and `.fc2` (per module: one recipe for
    both, the stronger) and a GroupedLinear's `.gemm_<i>` are the module. Raises KeyError for a
    name the model lacks. Warns (TERecipeWarning), before training starts, of the advised
    modules TE does not run in FP8 (convert them to the TE class named; a module advised None
    needs nothing), of the model's TE modules the replay did not cover (they run under the
    model setting, unchecked), of a model without TE modules, and where TE cannot take the
    per-tensor advice apart. Returns what it did: {"form", "modules": {path: [names]},
    "not_te": [(path, class, convert to)], "not_covered": [paths], "model_recipe_governs":
    [paths], "tensors": {(factory name, tensor type): setting}}."""
    global _GOVERNS, _CUSTOM
    api = _custom_recipe_api()
    if form is None:
        form = "tensor" if api else "module"
    if form not in ("tensor", "module"):
        raise ValueError("te_recipe.apply: form is \"tensor\" or \"module\", not %r" % (form,))
    if form == "tensor" and not api:
        raise RuntimeError("te_recipe.apply: the per-tensor form needs TransformerEngine 2.16 or "
                           "later (CustomRecipe's QuantizerRole, DelayedScalingRequest); "
                           "use form=\"module\"")
    paths, resolve = _resolver(model)
    path_of = {id(m): p for p, m in reversed(list(paths.items()))}
    chosen, missing = {}, []
    for key, recipe in MODULES.items():
        ms = resolve(key)
        if not ms:
            missing.append(key)
        for m in ms:
            c = chosen.setdefault(id(m), [m, recipe, []])
            if _strength(recipe) > _strength(c[1]):
                c[1] = recipe
            c[2].append(key)
    if missing:
        raise KeyError("te_recipe: not modules of this model: " + ", ".join(sorted(missing)) +
                       " (by TE name or module path; TransformerEngine 2.3-2.11 names a module "
                       "given no name= Layer_<n> only at its first forward in debug mode: "
                       "apply() after one step, or give the modules their names; names "
                       "model.<...> come from nvdlfw_inspect's infer_and_assign_layer_names: "
                       "call it on the model before apply(), as before training)")
    covered = {id(m) for key in COVERED for m in resolve(key)}
    fp8 = [(p, m) for p, m in paths.items() if _te_class(m) in TE_GEMM_MODULES]
    not_te = [(path_of[i], type(m).__name__, _convert_to(m)) for i, (m, r, _) in chosen.items()
              if not _is_te(m) and r is not None]  # kept out of FP8: nothing to convert
    not_covered = [p for p, m in fp8 if id(m) not in covered]
    if form == "tensor":  # only the modules kept out of FP8 get a region of their own
        chosen = {i: c for i, c in chosen.items() if c[1] is None}
    governs = [p for p, m in fp8 if id(m) not in chosen]
    _GOVERNS = bool(governs) or not fp8
    lines = []
    if not_te:
        lines.append("%d advised module(s) are not TransformerEngine modules: a TE autocast "
                     "region does nothing to them, so their advice does not apply until they "
                     "are converted:" % len(not_te))
        lines += ["  %s (%s): convert to %s" % x for x in not_te]
    if not_covered:
        lines.append("%d TransformerEngine module(s) of the model were not in the replayed trace "
                     "(the advice did not check them; they run under the model setting):"
                     % len(not_covered))
        lines += ["  " + p for p in not_covered]
    if not fp8:
        lines.append("the model has no TransformerEngine FP8 module (%s): no recipe of this file "
                     "applies until its Linear layers are TE modules" % ", ".join(TE_GEMM_MODULES))
    elif not governs:
        lines.append("every FP8 module has its own recipe: MODEL_RECIPE governs nothing "
                     "(model_region() opens no outer region)")
    _CUSTOM = None
    if form == "tensor":
        lines += _tensor_form(model, paths, resolve, path_of)
        _CUSTOM = api[0](qfactory=qfactory)
    if lines:
        warnings.warn("te_recipe.apply:\n" + "\n".join(lines), TERecipeWarning, stacklevel=2)
    for m, recipe, _ in chosen.values():
        _wrap(m, recipe)
    return {"form": form, "modules": {path_of[i]: keys for i, (_, _, keys) in chosen.items()},
            "not_te": not_te, "not_covered": not_covered, "model_recipe_governs": governs,
            "tensors": dict(_CHOICES)}


def apply_plan(model, plan, steps=None):
    """Applies step `steps` of PLANS[plan] (default: its last) to model, once, before
    training: the plan's recipe for the model (model_region()), its first `steps` layers kept
    out of FP8 (their forwards in a region of their own, FP8 off). apply()'s rules find the
    layers and warn of what the plan does not reach; returns apply()'s dict."""
    global MODEL_RECIPE
    if plan not in PLANS:
        raise KeyError("te_bf16_plan: this run has no %r plan (it has %s)"
                       % (plan, ", ".join(sorted(PLANS))))
    make, layers = PLANS[plan]
    steps = len(layers) if steps is None else steps
    if not 0 <= steps <= len(layers):
        raise ValueError("te_bf16_plan: steps %r: the %s plan has 0 to %d"
                         % (steps, plan, len(layers)))
    MODEL_RECIPE = make()
    MODULES.clear()
    MODULES.update({name: None for name in layers[:steps]})
    return apply(model, form="module")
