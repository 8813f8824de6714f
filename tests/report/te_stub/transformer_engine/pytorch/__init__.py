"""TE's PyTorch modules as far as names go (README.md; docs/frameworks/te.md sections 1, 3, 4)."""
import contextlib

from transformer_engine import VERSION

LOG = []  # ("enter", enabled, recipe) / ("exit",) / ("forward", name): what the test reads
STACK = []  # the open autocast regions' recipes (None: a region with enabled=False)
DEBUG = {"enabled": False}  # TEDebugState.debug_enabled (nvdlfw_inspect initialised)
_COUNT = [1]  # TEDebugState.layer_count: starts at 1, never reset


class Module:
    """torch.nn.Module's named_modules(), nothing else."""

    def __init__(self):
        object.__setattr__(self, "_children", {})

    def __setattr__(self, key, value):
        if isinstance(value, Module):
            self._children[key] = value
        object.__setattr__(self, key, value)

    def named_modules(self, memo=None, prefix=""):
        memo = set() if memo is None else memo
        if id(self) in memo:
            return
        memo.add(id(self))
        yield prefix, self
        for k, c in self._children.items():
            yield from c.named_modules(memo, prefix + ("." if prefix else "") + k)

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)


class ModuleList(Module):
    def __init__(self, modules):
        super().__init__()
        for i, m in enumerate(modules):
            setattr(self, str(i), m)

    def __iter__(self):
        return iter(self._children.values())


# they stand in for torch's classes, not TE's: a TE module is one that derives from a class of
# transformer_engine (te_recipe.py looks at the class's module)
Module.__module__ = "torch.nn.modules.module"
ModuleList.__module__ = "torch.nn.modules.container"


def _validate_name(module):
    """TransformerEngineBaseModule._validate_name (base.py): Layer_<n> for an unnamed module."""
    if module.name is None:
        module.name = "Layer_%d" % _COUNT[0]
        _COUNT[0] += 1


class TransformerEngineBaseModule(Module):
    def __init__(self, name=None):
        super().__init__()
        self.name = name
        if VERSION >= (2, 12):  # named at construction, always (base.py:922-924, v2.12 on)
            _validate_name(self)

    def forward(self, x):
        if VERSION < (2, 12) and DEBUG["enabled"]:  # named at the first forward (v2.3-v2.11)
            _validate_name(self)
        LOG.append(("forward", self.name))
        # the recipe this forward runs under (the innermost region's; None: out of FP8), and
        # under a CustomRecipe the quantizers TE's factory gives each slot of the two states
        self.recipe_seen = STACK[-1] if STACK else None
        if type(self.recipe_seen).__name__ == "CustomRecipe" and \
                type(self).__name__ != "DotProductAttention":  # its roles: only with fp8_dpa
            from transformer_engine.pytorch import quantization
            self.quantizers = {"fwd": quantization.custom_state(self, self.recipe_seen, True),
                               "bwd": quantization.custom_state(self, self.recipe_seen, False)}
        return x


class Linear(TransformerEngineBaseModule):
    def __init__(self, in_features, out_features, bias=True, name=None, **kw):
        super().__init__(name)


class LayerNormLinear(TransformerEngineBaseModule):
    def __init__(self, in_features, out_features, eps=1e-5, bias=True, name=None, **kw):
        super().__init__(name)


class LayerNormMLP(TransformerEngineBaseModule):  # GEMMs <name>.fc1, <name>.fc2 in the logs
    def __init__(self, hidden_size, ffn_hidden_size, eps=1e-5, bias=True, name=None, **kw):
        super().__init__(name)


class GroupedLinear(TransformerEngineBaseModule):  # GEMMs <name>.gemm_<i> (v2.11 on)
    def __init__(self, num_gemms, in_features, out_features, bias=True, name=None, **kw):
        super().__init__(name)
        self.num_gemms = num_gemms


class DotProductAttention(TransformerEngineBaseModule):
    def __init__(self, num_attention_heads, kv_channels, name=None, **kw):
        super().__init__(name)


class MultiheadAttention(Module):
    """A plain module that names itself (multi_head_attention.py:345-346) and builds its
    children's names from its constructor argument `name` (392, 465, 479)."""

    def __init__(self, hidden_size, num_attention_heads, layer_number=None, input_layernorm=True,
                 name=None, **kw):
        super().__init__()
        self.layer_number = 1 if layer_number is None else layer_number
        self.name = name
        if VERSION >= (2, 12):
            _validate_name(self)
        if input_layernorm:
            self.layernorm_qkv = LayerNormLinear(
                hidden_size, 3 * hidden_size,
                name=name + ".layernorm_linear_qkv" if name is not None else None)
        else:
            self.qkv = Linear(hidden_size, 3 * hidden_size,
                              name=name + ".linear_qkv" if name is not None else None)
        self.core_attention = DotProductAttention(
            num_attention_heads, hidden_size // num_attention_heads,
            name=name + ".core_attention" if name is not None else None)
        self.proj = Linear(hidden_size, hidden_size, name=name + ".proj" if name is not None else None)

    def forward(self, x):
        qkv = self.layernorm_qkv if hasattr(self, "layernorm_qkv") else self.qkv
        return self.proj(self.core_attention(qkv(x)))


class TransformerLayer(Module):
    """transformer.py: names itself (426-427), then passes `<name>.self_attention` (476) and
    `<name>.layernorm_mlp` (529) down: from self.name in 2.12 on, from the constructor argument
    before (v2.9 428, 445, 480)."""

    def __init__(self, hidden_size, ffn_hidden_size, num_attention_heads, layer_number=None,
                 name=None, **kw):
        super().__init__()
        self.layer_number = layer_number
        self.name = name
        if VERSION >= (2, 12):
            _validate_name(self)
        base = self.name if VERSION >= (2, 12) else name
        self.self_attention = MultiheadAttention(
            hidden_size, num_attention_heads, layer_number=layer_number,
            name=base + ".self_attention" if base is not None else None)
        self.layernorm_mlp = LayerNormMLP(
            hidden_size, ffn_hidden_size,
            name=base + ".layernorm_mlp" if base is not None else None)

    def forward(self, x):
        return self.layernorm_mlp(self.self_attention(x))


@contextlib.contextmanager
def _region(enabled, recipe):
    LOG.append(("enter", enabled, recipe))
    STACK.append(recipe if enabled else None)
    try:
        yield
    finally:
        STACK.pop()
        LOG.append(("exit",))


def fp8_autocast(enabled=True, calibrating=False, fp8_recipe=None, fp8_group=None, _graph=False):
    return _region(enabled, fp8_recipe)


if VERSION >= (2, 9):
    def autocast(enabled=True, calibrating=False, recipe=None, amax_reduction_group=None,
                 _graph=False):
        return _region(enabled, recipe)


class Float8CurrentScalingQuantizer:
    """tensor/float8_tensor.py (v2.16 216-230, v2.18 215-229): fp8_dtype and device required."""

    def __init__(self, fp8_dtype, device, *, rowwise=True, columnwise=True,
                 use_existing_amax=False, with_amax_reduction=False, amax_reduction_group=None,
                 force_pow_2_scales=False, amax_epsilon=0.0, scale=None, amax=None):
        import transformer_engine_torch as tex
        if not isinstance(fp8_dtype, tex.DType):
            raise TypeError("fp8_dtype: a DType, not %r" % (fp8_dtype,))
        self.dtype = fp8_dtype
        self.force_pow_2_scales = force_pow_2_scales
        self.amax_epsilon = amax_epsilon


if VERSION >= (2, 16):  # __init__.py:51-53 (v2.16), 53-55 (v2.18)
    from transformer_engine.pytorch.quantization import DelayedScalingRequest, QuantizerRole  # noqa
if VERSION >= (2, 17):  # te.DType (constants.py), the same values as tex.DType
    from transformer_engine_torch import DType  # noqa
