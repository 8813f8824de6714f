#!/usr/bin/env python3
"""bench/closedloop.py: the closed-loop emulator's cost (issue 44): the tiny GPT's step time
(experiments/tiny_gpt.py: 17 Linear GEMMs, batch 8 x 32 tokens) in high precision against
the same training under fp8lab.closedloop.Emulator (delayed scaling, hybrid, history 16,
counts.csv written), the two interleaved (plain, emulated, plain, ...) so that drifting load on
a shared machine touches both alike: --reps repeats (default 15) of --steps steps (default 10)
each, medians of the per-step wall times and of the paired ratios. Target: <= 3x.

Usage: OMP_NUM_THREADS=1 python3 bench/closedloop.py [--build build] [--reps 15] [--steps 10]
(libfp8lab_emu.so from the build folder: cmake --build build --target fp8lab_emu).
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "experiments"))

import torch  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--profile", action="store_true", help="cProfile one emulated repeat")
    args = ap.parse_args()
    lib = os.path.join(args.build, "src", "emu", "libfp8lab_emu.so")
    if os.path.exists(lib):
        os.environ.setdefault("FP8LAB_EMU_LIB", lib)
    torch.set_num_threads(1)
    import tiny_gpt as tg
    from fp8lab.closedloop import Emulator
    tmp = tempfile.mkdtemp(prefix="fp8lab_bench_loop_")
    ini = os.path.join(tmp, "loop.ini")
    with open(ini, "w") as f:
        f.write("[trace]\npath = trace\n\n[recipe.loop]\nkind = delayed\nformat = hybrid\n"
                "history_len = 16\n\n[output]\ndir = out\n")
    model, opt, data = tg.setup(1)
    emu = Emulator(model, ini, "loop", counts=os.path.join(tmp, "counts.csv"))
    for _ in range(3):  # warm-up, both ways
        tg.train_step(model, opt, data)
    step = [0]

    def block(emulated):
        t = time.perf_counter()
        if emulated:
            with emu:
                for _ in range(args.steps):
                    tg.train_step(model, opt, data)
                    emu.step(step[0])
                    step[0] += 1
        else:
            for _ in range(args.steps):
                tg.train_step(model, opt, data)
        return (time.perf_counter() - t) / args.steps

    block(True)
    if args.profile:
        import cProfile
        import pstats
        pr = cProfile.Profile()
        pr.enable()
        block(True)
        pr.disable()
        pstats.Stats(pr).sort_stats("tottime").print_stats(15)
    plain, emul, ratio = [], [], []
    for _ in range(args.reps):
        p = block(False)
        e = block(True)
        plain.append(p)
        emul.append(e)
        ratio.append(e / p)
    med = statistics.median
    print("tiny GPT step, wall time, medians of %d interleaved repeats of %d steps (torch %s, "
          "%d thread): high precision %.2f ms, emulated %.2f ms; ratio %.2fx (median of paired "
          "ratios; min %.2fx, max %.2fx)" % (args.reps, args.steps, torch.__version__,
                                              torch.get_num_threads(), 1e3 * med(plain),
                                              1e3 * med(emul), med(ratio), min(ratio),
                                              max(ratio)))


if __name__ == "__main__":
    main()
