"""nvdlfw_inspect's infer_and_assign_layer_names, as NVIDIA/nvidia-dlfw-inspect dc19d10 writes it
(nvdlfw_inspect/api.py:112-147; docs/frameworks/te.md 1.4): every submodule's `name` becomes its
attribute path under "model", a ModuleList's child numbered by its `layer_number` attribute when
it has one (even None), else by its index."""


def infer_and_assign_layer_names(model):
    def helper(module, module_name):
        if type(module).__name__ == "ModuleList":
            for name, child in module._children.items():
                layer_number = getattr(child, "layer_number", name)
                helper(child, f"{module_name}.{layer_number}")
        else:
            module.name = module_name
            for name, child in module._children.items():
                helper(child, f"{module_name}.{name}")

    helper(model, "model")
