"""transformer_engine/pytorch/quantization.py (2.9 and later) as far as CustomRecipe goes: the
factory's QuantizerRole and DelayedScalingRequest (2.16 and later: commit d73bfa14f, "Introduce
QuantizerRole"), and how CustomRecipeState calls the factory for a module (docs/frameworks/
te_custom.md sections 1.2 and 2.2, te.md section 2.4)."""
import dataclasses
from typing import Any, Callable, Optional, Union

from transformer_engine import VERSION
from transformer_engine.common.recipe import Format

if VERSION < (2, 9):
    raise ImportError("transformer_engine.pytorch.quantization: TE 2.9 and later")

if VERSION >= (2, 16):
    @dataclasses.dataclass(frozen=True)
    class QuantizerRole:  # v2.18 quantization.py:56-96
        module_type: str = ""
        tensor_type: str = ""
        name: str = ""

    class QuantizerRequest:  # v2.18 quantization.py:99-111
        pass

    @dataclasses.dataclass(frozen=True)
    class DelayedScalingRequest(QuantizerRequest):  # v2.18 quantization.py:114-146
        fp8_format: Format = Format.HYBRID
        margin: int = 0
        amax_history_len: int = 1024
        amax_compute_algo: Union[str, Callable] = "max"
        scaling_factor_compute_algo: Optional[Callable] = None
        reduce_amax: bool = True


_DS_FIELDS = ("fp8_format", "margin", "amax_history_len", "amax_compute_algo",
              "scaling_factor_compute_algo", "reduce_amax")


def roles(module, fwd):
    """get_quantizer_roles of TE's modules (v2.18 linear.py:1740-1765, layernorm_mlp.py:
    2180-2225, grouped_linear.py:1508-1533): the slots of the module's forward or backward
    state; None for a boundary slot whose consumer is unknown."""
    if VERSION < (2, 16):
        raise NotImplementedError("role strings (2.9-2.15) carry no module: not modelled")
    cls = [c.__name__ for c in type(module).__mro__]
    name = module.name or ""
    if "LayerNormMLP" in cls:
        fc1 = name + ".fc1" if name else "fc1"
        fc2 = name + ".fc2" if name else "fc2"
        R = QuantizerRole
        if fwd:
            return [R("linear", "input", fc1), R("linear", "weight", fc1), R("linear", "input", fc2),
                    R("linear", "input", fc2), R("linear", "weight", fc2), None]
        return [R("linear", "grad_output", fc1), None, R("linear", "grad_output", fc2),
                R("linear", "grad_output", fc1)]
    kind = "grouped_linear" if "GroupedLinear" in cls else "linear"
    n = getattr(module, "num_gemms", 1)
    if fwd:
        base = [QuantizerRole(kind, "input", name), QuantizerRole(kind, "weight", name), None]
    else:
        base = [QuantizerRole(kind, "grad_output", name), None]
    return base * n


def custom_state(module, recipe, fwd):
    """CustomRecipeState.make_quantizers (v2.18 quantization.py:1895-1953): the factory called
    once per slot; None rejected; the DelayedScalingRequests of the state must all match
    (_handle_delayed_scaling_requests, 1728-1812), else ValueError as TE raises it."""
    rs = roles(module, fwd)
    raw = [recipe.qfactory(r) for r in rs]
    for i, q in enumerate(raw):
        if q is None:
            raise ValueError("CustomRecipe qfactory returned None for slot %d (role=%r). Every "
                             "slot must return a Quantizer instance or a QuantizerRequest." % (i, rs[i]))
    ds = [(i, q) for i, q in enumerate(raw) if isinstance(q, DelayedScalingRequest)]
    for idx, q in ds[1:]:
        for f in _DS_FIELDS:
            v0, vi = getattr(ds[0][1], f), getattr(q, f)
            if v0 != vi:
                raise ValueError("All DelayedScalingRequests in one CustomRecipeState must match. "
                                 "Slot %d has %s=%r, slot %d has %s=%r"
                                 % (ds[0][0], f, v0, idx, f, vi))
    return list(zip(rs, raw))
