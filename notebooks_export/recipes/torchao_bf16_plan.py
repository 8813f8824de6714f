# torchao_bf16_plan.py: fp8lab's BF16 demotion plans (bf16_plan.csv) as torchao training
# (fp8lab report wrote it beside report.md): each plan's layers in its order, and
# apply(), which converts the model leaving the plan's first `steps` layers out:
#     import torchao_bf16_plan
#     model = torchao_bf16_plan.apply(model, "fp8")  # or "fp4"; steps=k for step k
# The names are the trace's module names (their paths in model.named_modules() for
# fp8lab's capture tool); apply() refuses a name the model lacks.
# fp8: torchao's float8 training (torchao 0.10.0 or later), recipe "tensorwise":
# current scaling per tensor. Cannot express: the delayed-scaling setting the plan was
# made under (short_margin L=16 m=1 max; torchao has no delayed scaling since 0.10.0). Under
# current scaling no largest element clips, so these are the layers the replay found
# missing the budgets under that setting, kept out of FP8 here as they would be there.

PLANS = {
    "fp8": [
        "layers.1.fc2",  # step 1
        "layers.1.fc1",  # step 2
        "layers.3.qkv",  # step 3
        "layers.1.qkv",  # step 4
        "layers.0.fc2",  # step 5
        "layers.2.qkv",  # step 6
    ],
}


def apply(model, plan, steps=None):
    """The model converted by torchao, the first `steps` layers of PLANS[plan] (default:
    all) left as they are. plan "fp8": float8 training with the tensorwise recipe, "fp4":
    NVFP4 training."""
    if plan not in PLANS:
        raise KeyError("torchao_bf16_plan: this run has no %r plan (it has %s)"
                       % (plan, ", ".join(sorted(PLANS))))
    layers = PLANS[plan]
    steps = len(layers) if steps is None else steps
    if not 0 <= steps <= len(layers):
        raise ValueError("torchao_bf16_plan: steps %r: the %s plan has 0 to %d"
                         % (steps, plan, len(layers)))
    keep = frozenset(layers[:steps])
    missing = sorted(keep - {name for name, _ in model.named_modules()})
    if missing:
        raise KeyError("torchao_bf16_plan: not modules of this model: " + ", ".join(missing))

    def kept(fqn):  # the layer itself, or a Linear inside it (an experts module's experts)
        return any(fqn == k or fqn.startswith(k + ".") for k in keep)

    if plan == "fp8":
        from torchao.float8 import Float8LinearConfig, convert_to_float8_training

        def module_filter_fn(module, fqn):
            # torchao's docs: its float8 GEMMs need both dimensions divisible by 16
            return not kept(fqn) and module.in_features % 16 == 0 and \
                module.out_features % 16 == 0

        return convert_to_float8_training(
            model, module_filter_fn=module_filter_fn,
            config=Float8LinearConfig.from_recipe_name("tensorwise"))
    import torch
    from torchao.prototype.moe_training.nvfp4_training.nvfp4_training import NVFP4TrainingConfig
    from torchao.quantization import quantize_

    def filter_fn(module, fqn):  # quantize_'s default filter is replaced: the Linear test too
        return isinstance(module, torch.nn.Linear) and not kept(fqn)

    quantize_(model, NVFP4TrainingConfig(), filter_fn=filter_fn)
    return model
