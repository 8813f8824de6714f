#!/usr/bin/env python3
"""closedloop_device.py: the closed-loop emulator on a GPU (scripts/device-check.sh's step;
issue 44): experiments/tiny_gpt.py's TinyGPT trained 5 steps under fp8lab.closedloop.Emulator
(delayed scaling, hybrid, history 16) on cuda and, from the same seed, on the CPU; prints both
loss series and whether they agree within the stated tolerance (relative 1e-3 per step: the
GEMMs' summation order differs between the devices, and an element that lands on the other side
of an FP8 rounding boundary moves the loss by more than float32 rounding would). On cuda the
emulator copies each operand to the CPU for the C call and back (docs/semantics.md).
Exit 0 when they agree, 1 when not, 77 when torch has no CUDA device.
Usage: python3 scripts/closedloop_device.py [--steps 5] (libfp8lab_emu.so: $FP8LAB_EMU_LIB or
$FP8LAB_BUILD/src/emu/)."""
import argparse
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "experiments"))
TOL = 1e-3


def run(dev, steps, ini):
    import torch
    import torch.nn.functional as F
    import tiny_gpt as tg
    from fp8lab.closedloop import Emulator
    model, _, data = tg.setup(1)
    model = model.to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    losses = []
    t = time.time()
    with Emulator(model, ini, "loop") as emu:
        for s in range(steps):
            x, y = data.batch()
            x, y = x.to(dev), y.to(dev)
            loss = F.cross_entropy(model(x).reshape(-1, tg.VOCAB), y.reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            emu.step(s)
            losses.append(loss.item())
    return losses, time.time() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=5)
    args = ap.parse_args()
    import torch
    if not torch.cuda.is_available():
        print("closedloop: skipped: torch %s has no CUDA device" % torch.__version__)
        return 77
    torch.set_num_threads(1)
    ini = os.path.join(tempfile.mkdtemp(prefix="fp8lab_loop_dev_"), "loop.ini")
    with open(ini, "w") as f:
        f.write("[trace]\npath = trace\n\n[recipe.loop]\nkind = delayed\nformat = hybrid\n"
                "history_len = 16\n\n[output]\ndir = out\n")
    cpu, tc = run("cpu", args.steps, ini)
    gpu, tg_ = run("cuda", args.steps, ini)
    worst = max(abs(a - b) / abs(a) for a, b in zip(cpu, gpu))
    ok = worst <= TOL
    print("closedloop cpu  losses: %s (%.1f s)" % (" ".join("%.6f" % v for v in cpu), tc))
    print("closedloop cuda losses: %s (%.1f s, %s)" % (" ".join("%.6f" % v for v in gpu), tg_,
                                                      torch.cuda.get_device_name(0)))
    print("SUMMARY closedloop: %s: %d steps on cuda vs cpu under the Emulator, largest relative "
          "loss difference %.2g (tolerance %g)" % ("AGREE" if ok else "DIFFER", args.steps,
                                                  worst, TOL))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
