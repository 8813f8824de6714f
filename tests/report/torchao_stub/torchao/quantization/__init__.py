"""torchao.quantization.quantize_ as far as names and arguments go (README.md)."""

QUANTIZED = []  # (fqn, config class name) of every module the filter chose: what the test reads


def quantize_(model, config, filter_fn=None, device=None):
    # torchao 0.18.0 quant_api.py:275-280: filter_fn(module, fqn) -> bool, default _is_linear
    # (not transcribed: the callers here pass their own)
    if filter_fn is None:
        raise NotImplementedError("the stub's quantize_ needs a filter_fn")
    for fqn, m in model.named_modules():
        if filter_fn(m, fqn):
            QUANTIZED.append((fqn, type(config).__name__))
