# torchao_config.py: the advice of fp8lab's report as torchao float8 training (fp8lab
# report wrote it beside report.md). torchao 0.10.0 or later (convert_to_float8_training,
# Float8LinearConfig.from_recipe_name; docs/frameworks/torchao.md cites torchao 0.18.0).
# torchao has no delayed scaling (removed in 0.10.0): its "tensorwise" recipe is current
# scaling per tensor, E4M3 forward and E5M2 gradients, what fp8lab's replay calls current
# scaling with format hybrid. Use it after building the model, before torch.compile:
#     import torchao_config
#     model = torchao_config.apply(model)
# Cannot express: the advised delayed-scaling setting (history length, margin, amax
# compute) and its per-module margins: under current scaling no largest element clips.
# This run replayed current scaling: the report's rows of its configuration are what
# this file does (up to torchao's arithmetic).
from torchao.float8 import Float8LinearConfig, convert_to_float8_training

RECIPE = "tensorwise"

# modules the advice keeps out of FP8: their paths in model.named_modules(), with every
# nn.Linear inside them (torchao calls the filter with each nn.Linear's own path)
KEEP_BF16 = frozenset([
])


def module_filter_fn(module, fqn):
    """torchao's filter (module, fqn) -> bool: True converts that nn.Linear to float8."""
    if any(fqn == k or fqn.startswith(k + ".") for k in KEEP_BF16):
        return False
    # torchao's docs: its float8 GEMMs need both dimensions divisible by 16
    return module.in_features % 16 == 0 and module.out_features % 16 == 0


def apply(model):
    """The model with its nn.Linear layers converted (KEEP_BF16 left as they are)."""
    names = {name for name, _ in model.named_modules()}
    missing = sorted(KEEP_BF16 - names)
    if missing:
        raise KeyError("torchao_config: not modules of this model: " + ", ".join(missing))
    return convert_to_float8_training(model, module_filter_fn=module_filter_fn,
                                      config=Float8LinearConfig.from_recipe_name(RECIPE))
