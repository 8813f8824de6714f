#!/usr/bin/env python3
"""The closed loop's self-check in small (issue 44): experiments/tiny_gpt.py's TinyGPT trained
20 steps under the Emulator (delayed scaling, history_len 16) with a Recorder inside it (every
5 steps a snapshot), Emulator.write_te_scale on the trace, then `fp8lab run` of an experiment
holding that label on the emulated trace: every stream.csv row's scale (fp8lab's replay) must
equal its te_scale (the scale the emulated run cast with), 0 mismatches of N rows, N printed;
counts.csv has one row per cast tensor and step. Usage: test_closedloop_selfcheck.py
FP8LAB_BIN. Last line: "N passed, M failed".
"""
import csv
import os
import subprocess
import sys

from closedloop_common import f32, main, read_counts, test, torch, write_ini


@test
def tiny_gpt_selfcheck(tmp):
    import fp8lab.capture as cap
    from fp8lab.closedloop import Emulator
    import closedloop_common as cc
    import tiny_gpt as tg
    steps = 20
    ini = write_ini(os.path.join(tmp, "loop.ini"),
                    "[recipe.loop]\nkind = delayed\nformat = hybrid\nhistory_len = 16\n"
                    "margin = 0\namax_compute = max\n")
    trace = os.path.join(tmp, "trace")
    counts = os.path.join(tmp, "counts.csv")
    model, opt, data = tg.setup(1)
    emu = Emulator(model, ini, "loop", counts=counts)
    losses = []
    with emu:
        with cap.Recorder(model, trace, modules=tg.MODULES, every=5) as rec:
            for step in range(steps):
                losses.append(tg.train_step(model, opt, data))
                rec.step(step)
                emu.step(step)
    assert losses[-1] < losses[0] - 0.5, "the emulated run did not learn: %s" % losses
    rows, filled = emu.write_te_scale(trace)
    n_rec = len(rec.names)
    assert rows == steps * n_rec and filled == rows, (rows, filled, n_rec)
    # counts.csv: every GEMM of the model (modules=None: the LM head too), 3 tensors each
    cnt = read_counts(counts)
    per_step = 3 * (4 * tg.N_LAYER + 1)  # qkv, proj, fc1, fc2 per block, and head
    assert len(cnt) == steps * per_step, (len(cnt), steps, per_step)
    assert len({r["tensor"] for r in cnt}) == per_step
    assert {r["kind"] for r in cnt} == {"delayed"}
    assert {r["format"] for r in cnt if r["tensor"].endswith(".grad_output")} == {"e5m2"}
    assert {r["format"] for r in cnt if not r["tensor"].endswith(".grad_output")} == {"e4m3"}
    assert all(r["scale"] == "1" for r in cnt if r["step"] == "0"), "step 0 must cast with 1"
    p = subprocess.run([cc.BIN, "run", ini], cwd=tmp, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    assert p.returncode == 0, p.stdout[-3000:]
    with open(os.path.join(tmp, "out", "stream.csv")) as f:
        stream = list(csv.DictReader(f))
    n, bad = 0, []
    for r in stream:
        assert r["te_scale"] != "", "a stream row without te_scale: %s" % r
        n += 1
        if f32(float(r["scale"])) != f32(float(r["te_scale"])):
            bad.append(r)
    assert n == steps * n_rec, (n, steps, n_rec)
    print("self-check: %d mismatches of %d stream.csv rows (scale vs te_scale), %d steps, "
          "loss %.3f -> %.3f" % (len(bad), n, steps, losses[0], losses[-1]))
    assert not bad, "first mismatches: %s" % bad[:3]


if __name__ == "__main__":
    sys.exit(main())
