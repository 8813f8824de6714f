#!/usr/bin/env python3
"""`fp8lab timeline` measured, without a GPU: FP8LAB_GPU_MODULE names fp8lab-gpu-emu.so (the GPU
module over the CUDA emulator and the host-memory CUDA runtime, cuBLASLt and NCCL of tests/gpu),
so the whole command runs its measuring path: the module's fp8_timeline_gpu_run, the records
turned into timeline.csv, timeline.md and the charts. The emulator's times are host times, not a
GPU's: this checks the plumbing and the outputs' structure (tests/gpu/test_timeline_gpu.c checks
the schedule itself), not the figures.

Checks:
  - --device gpu: exit 0; timeline.csv has the header mode,step,stream,op,tensor,start_us,
    end_us,source and, per mode, --steps measured steps whose rows are the model's step's rows
    (same ops, streams and tensors, in order), start <= end; timeline.md says "Measured on mock
    device" and has every mode's row in both tables; both PNGs carry the device in a tEXt chunk;
  - --device auto takes the emulated GPU as well;
  - a module without the timeline's entry point (fp8lab-gpu-broken.so): --device auto warns in
    one line and writes the model's estimate (no measured rows), --device gpu exits 1.

Usage: test_timeline_emu.py FP8LAB_BIN FP8LAB_GPU_EMU_MODULE FP8LAB_GPU_BROKEN_MODULE
"""
import csv
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

MODES = ["delayed-inline", "delayed-overlap", "delayed-none", "current"]
HEADER = ["mode", "step", "stream", "op", "tensor", "start_us", "end_us", "source"]
FAILS = []


def check(cond, msg):
    if not cond:
        FAILS.append(msg)
        print("FAIL:", msg, file=sys.stderr)


def run(binary, module, args, cwd):
    env = dict(os.environ)
    env["FP8LAB_GPU_MODULE"] = module
    return subprocess.run([binary, "timeline"] + args, cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


def png_text(path):
    """The tEXt chunks of a PNG, read independently of fp8lab's own reader."""
    out = {}
    with open(path, "rb") as f:
        data = f.read()
    check(data[:8] == b"\x89PNG\r\n\x1a\n", f"{path}: not a PNG")
    pos = 8
    while pos + 8 <= len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        check(zlib.crc32(kind + body) == struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])[0],
              f"{path}: bad CRC in {kind}")
        if kind == b"tEXt":
            k, v = body.split(b"\0", 1)
            out[k.decode()] = v.decode("latin-1")
        pos += 12 + n
    return out


def check_outputs(out, steps, measured, device_word):
    with open(os.path.join(out, "timeline.csv"), newline="") as f:
        rows = list(csv.reader(f))
    check(rows[0] == HEADER, f"timeline.csv header {rows[0]}")
    rows = rows[1:]
    for mode in MODES:
        model = [r for r in rows if r[0] == mode and r[7] == "model"]
        check(len(model) > 0 and all(r[1] == "0" for r in model), f"{mode}: model rows")
        meas = [r for r in rows if r[0] == mode and r[7] == "measured"]
        check(len(meas) == (steps * len(model) if measured else 0),
              f"{mode}: {len(meas)} measured rows, expected {steps} x {len(model)}")
        for s in range(steps if measured else 0):
            step = [r for r in meas if r[1] == str(s)]
            check([r[2:5] for r in step] == [r[2:5] for r in model],
                  f"{mode} step {s}: ops differ from the model's step")
            check(all(float(r[5]) <= float(r[6]) for r in step), f"{mode} step {s}: end < start")
        sides = {r[3] for r in model if r[2] == "side"}
        # one rank (these runs' world): no all-reduce, as TE skips it at world size 1
        check(sides == ({"gather", "update"} if mode == "delayed-overlap" else set()),
              f"{mode}: side-stream ops {sides}")
        check(not any(r[3] == "allreduce" for r in model), f"{mode}: an all-reduce at world 1")
    with open(os.path.join(out, "timeline.md")) as f:
        md = f.read()
    check(("**Measured** on mock device" in md) == measured, "timeline.md: measured or not")
    for mode in MODES:
        check(md.count(f"| {mode} |") == (2 if measured else 1), f"timeline.md: rows of {mode}")
    for png in ("timeline.png", "timeline_zoom.png"):
        text = png_text(os.path.join(out, png))
        check(text.get("plot") == "timeline", f"{png}: plot chunk {text.get('plot')}")
        check(device_word in text.get("device", ""), f"{png}: device chunk {text.get('device')}")


def main():
    binary, emu, broken = sys.argv[1:4]
    tmp = tempfile.mkdtemp(prefix="fp8lab-tl-emu-")
    try:
        args = ["synth:llm", "--steps", "2", "--warmup", "1", "--bench-tensors", "16",
                "--bench-history", "8"]
        p = run(binary, emu, args + ["--device", "gpu", "--out", "gpu"], tmp)
        check(p.returncode == 0 and p.stderr == "", f"--device gpu: exit {p.returncode}: {p.stderr}")
        check("measured on mock device" in p.stdout, f"--device gpu stdout: {p.stdout}")
        check_outputs(os.path.join(tmp, "gpu"), 2, True, "mock device")

        p = run(binary, emu, args + ["--out", "auto", "--quiet"], tmp)
        check(p.returncode == 0 and p.stdout == "", f"--device auto: {p.returncode} {p.stdout}")
        check_outputs(os.path.join(tmp, "auto"), 2, True, "mock device")

        p = run(binary, broken, args + ["--out", "broken"], tmp)
        check(p.returncode == 0, f"broken module, auto: exit {p.returncode}")
        check(p.stderr.count("\n") == 1 and "fp8_timeline_gpu_run" in p.stderr and
              "model's estimate alone" in p.stderr, f"broken module, auto: stderr {p.stderr!r}")
        check_outputs(os.path.join(tmp, "broken"), 2, False, "model estimate")

        p = run(binary, broken, args + ["--device", "gpu", "--out", "broken2"], tmp)
        check(p.returncode == 1 and p.stderr.count("\n") == 1 and
              "--device gpu: " in p.stderr, f"broken module, gpu: {p.returncode} {p.stderr!r}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(FAILS)} failures")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
