# te_recipe.py: the advice of fp8lab's report as TransformerEngine code (fp8lab report
# wrote it from the decision advice.ini replays). MODEL_RECIPE is the whole-model
# setting; MODULES gives each module it does not fit its own recipe: a larger margin,
# current scaling, or None (the module kept out of FP8). TransformerEngine applies a
# recipe to a whole module (its input, weight and gradient), so a module takes the
# strongest fix among its tensors (BF16, then current scaling, then the largest margin).
#
# Use it around your training step (the backward outside the region, as TE wants):
#     import te_recipe
#     te_recipe.apply(model)  # once, after building the model
#     with te_recipe.region(te_recipe.MODEL_RECIPE):
#         loss = model(batch)
#     loss.backward()
#
# apply() wraps each listed module's forward in its own autocast region nested in the
# model's (the inner region overrides the outer one; TE runs a module's backward with
# the recipe of its forward). Keep the outer region enabled with MODEL_RECIPE: delayed
# scaling updates its scales when the outermost region exits. A module kept out of FP8
# computes in BF16 when its parameters are BF16 or under torch.autocast. The names are
# the trace's module paths (its tensor names without the role), which fp8lab's capture
# tool takes from model.named_modules(); apply() refuses a name the model lacks.
# TransformerEngine versions: te.autocast from 2.9 (fp8_autocast before, deprecated
# since 2.9; region() takes whichever there is), Float8CurrentScaling from 2.2,
# DelayedScaling in every version.
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Float8CurrentScaling, Format

MODEL_RECIPE = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=16, margin=1, amax_compute_algo="max")

MODULES = {
    "layers.0.fc2": Float8CurrentScaling(fp8_format=Format.HYBRID),  # grad_output: current scaling
    "layers.1.fc1": Float8CurrentScaling(fp8_format=Format.HYBRID),  # output: current scaling
    "layers.1.fc2": Float8CurrentScaling(fp8_format=Format.HYBRID),  # input: current scaling; output: current scaling
    "layers.1.qkv": Float8CurrentScaling(fp8_format=Format.HYBRID),  # grad_output: current scaling
    "layers.2.qkv": Float8CurrentScaling(fp8_format=Format.HYBRID),  # grad_output: current scaling
    "layers.3.qkv": Float8CurrentScaling(fp8_format=Format.HYBRID),  # grad_output: current scaling
}


def region(recipe):
    """A new autocast region: FP8 with recipe, or none (recipe None: out of FP8)."""
    if hasattr(te, "autocast"):  # TransformerEngine 2.9 and later
        return te.autocast(enabled=recipe is not None, recipe=recipe)
    return te.fp8_autocast(enabled=recipe is not None, fp8_recipe=recipe)


def _wrap(module, recipe):
    forward = module.forward

    def forward_with_recipe(*args, **kwargs):
        with region(recipe):
            return forward(*args, **kwargs)

    module.forward = forward_with_recipe


def apply(model):
    """Gives each module of MODULES its recipe (model: a torch.nn.Module)."""
    modules = dict(model.named_modules())
    missing = sorted(set(MODULES) - set(modules))
    if missing:
        raise KeyError("te_recipe: not modules of this model: " + ", ".join(missing))
    for name, recipe in MODULES.items():
        _wrap(modules[name], recipe)
