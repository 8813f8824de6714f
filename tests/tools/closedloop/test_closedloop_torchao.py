#!/usr/bin/env python3
"""The closed-loop emulator's current scaling against torchao's emulation (issue 44): torchao's
Float8Linear (convert_to_float8_training, emulate=True: dynamic tensorwise scaling, E4M3 for
input and weight, E5M2 for the output gradient, matmuls in float32 on dequantized operands)
and the Emulator under `kind = current`, `format = hybrid`, `amax_epsilon = 1e-12` (torchao's
clamp) on copies of the same model: forward output, input gradient and weight gradient.
- pow2 = true in both (torchao's round_scales_to_power_of_2): the dequantized operands are the
  same numbers (x_fp8 / s equals x_fp8 * (1/s) for a power of two), so the results are equal
  element for element;
- pow2 = false: torchao dequantizes as x_fp8 / s, TE (and fp8lab) as x_fp8 * RN32(1/s), which
  differ in the last bit of some elements: equal within 1e-6 relative to the largest element.
Needs torch 2.x and torchao: the running interpreter when it has them, else fp8lab's virtual
environment (scripts/venv-torch.sh, which installs torchao); when neither: one line "skipped:
..." and exit 77, a failure under FP8LAB_REQUIRE_PYDEPS.
Usage: test_closedloop_torchao.py FP8LAB_BIN. Last line: "N passed, M failed".
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(ROOT, "tests", "common"))
from pycommon import with_venv  # noqa: E402


def _have_deps():
    try:
        import numpy  # noqa: F401
        import torch  # noqa: F401
        import torchao.float8  # noqa: F401
    except Exception:
        return False
    return True


with_venv(_have_deps, "torchao not installed (nor torch 2.x with it)")

import copy  # noqa: E402

from closedloop_common import main, test, torch, write_ini  # noqa: E402


def _pair(pow2, bias, tmp):
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training
    from fp8lab.closedloop import Emulator
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(64, 32, bias=bias))
    ours = copy.deepcopy(ref)
    cfg = Float8LinearConfig(emulate=True, round_scales_to_power_of_2=pow2)
    ao = convert_to_float8_training(ref, config=cfg)
    assert type(ao[0]).__name__ == "Float8Linear", type(ao[0])
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4, 16, 64, generator=g)
    x[0, 0, 0] = 9.0
    r = torch.randn(4, 16, 32, generator=g) * 1e-3
    xa, xo = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    ya = ao(xa)
    (ya * r).sum().backward()
    ini = write_ini(os.path.join(tmp, "e.ini"),
                    "[recipe.cur]\nkind = current\nformat = hybrid\namax_epsilon = 1e-12\n"
                    "pow2 = %s\n" % ("true" if pow2 else "false"))
    with Emulator(ours, ini, "cur") as emu:
        yo = ours(xo)
        (yo * r).sum().backward()
        emu.step(0)
    out = []
    for what, a, o in (("y", ya.detach(), yo.detach()), ("dX", xa.grad, xo.grad),
                       ("dW", ao[0].weight.grad, ours[0].weight.grad)):
        diff = (a.float() - o.float()).abs()
        rel = float(diff.max() / a.abs().max())
        out.append((what, int((diff != 0).sum()), a.numel(), rel))
    return out


@test
def torchao_pow2_exact(tmp):
    import torchao
    res = _pair(True, False, tmp)
    print("torchao %s, torch %s, pow2 scales, no bias: %s" % (
        torchao.__version__, torch.__version__,
        ", ".join("%s %d of %d differ" % (w, n, t) for w, n, t, _ in res)))
    for what, n, total, rel in res:
        assert n == 0, "%s: %d of %d elements differ from torchao's (max rel %g)" % (
            what, n, total, rel)


@test
def torchao_close(tmp):
    for bias in (False, True):
        res = _pair(False, bias, tmp)
        print("torchao, scales RN32(max / amax), bias %s: %s" % (
            bias, ", ".join("%s %d of %d differ, max %.2g rel" % r for r in res)))
        for what, n, total, rel in res:
            assert rel <= 1e-6, "%s: %g relative to the largest element" % (what, rel)


if __name__ == "__main__":
    sys.exit(main())
