#!/usr/bin/env python3
"""gen_scale.py: the inputs of bench/scale.sh (issue 27), written fast, not realistically.

  gen_scale.py big DIR [--layers 8] [--hidden 2048] [--ffn 8192] [--tokens 4096]
                       [--snapshots 3] [--steps 1000]
      a transformer-shaped trace: per layer qkv [3h, h], proj [h, h], fc1 [ffn, h] and
      fc2 [h, ffn] Linears, each with <layer>.<lin>.input, .weight and .grad_output in BF16,
      snapshots at steps 0, E, 2E, ... (E = steps / snapshots) and amax.csv over every step.
      With the defaults (a 1-2B-parameter model's shapes) a snapshot is 2.9 GB.
  gen_scale.py amax70b DIR [--steps 10000]
      a 70B-shaped amax stream: Llama-2 70B's 80 layers x 7 Linears x (input, weight,
      grad_output) = 1,680 tensors with Hugging Face's names, every step: 16.8 M rows in
      DIR/amax.csv; and one tiny snapshot at step 0 (every tensor 4 x 8 or 8 x 8), so that the
      run has snapshot rows and a report (a stream-only run has none yet: issue 28).

The values are a 16 M-element pool of Gaussian BF16 values, reused with a per-tensor scale and
offset and a few outlier channels: the replay's cost does not depend on the values, and
generating 9 GB of independent random numbers would take longer than the benchmark.
"""
import argparse
import json
import math
import os
import sys

import numpy as np


def bf16(x):
    """float32 array -> uint16 BF16 bits, rounded to nearest even."""
    u = x.astype(np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


POOL = None


def values(rng, n, scale, cols):
    """n BF16 values of a [n / cols, cols] tensor: the pool from a random offset, scaled, with
    outlier channels 0, cols/3 every row (x 30)."""
    start = int(rng.integers(0, POOL.size))
    idx = (start + np.arange(n, dtype=np.int64)) % POOL.size
    x = POOL[idx] * np.float32(scale)
    x = x.reshape(-1, cols)
    x[:, 0] *= 30
    x[:, cols // 3] *= 30
    return bf16(x.ravel())


def write_snapshot(path, tensors, rng):
    """tensors: [(name, shape, scale)] -> a BF16 safetensors file, written in pieces."""
    header, off = {}, 0
    for name, shape, _ in tensors:
        n = int(np.prod(shape))
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [off, off + 2 * n]}
        off += 2 * n
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for name, shape, scale in tensors:
            f.write(values(rng, int(np.prod(shape)), scale, shape[-1]).tobytes())
    os.replace(tmp, path)


def big(args):
    global POOL
    rng = np.random.default_rng(1)
    POOL = rng.standard_normal(1 << 24, dtype=np.float32)
    h, f, T = args.hidden, args.ffn, args.tokens
    lins = (("qkv", 3 * h, h), ("proj", h, h), ("fc1", f, h), ("fc2", h, f))
    tensors = []
    for layer in range(args.layers):
        for lin, out, inp in lins:
            base = "model.layers.%d.%s" % (layer, lin)
            tensors += [(base + ".input", (T, inp), 1.0), (base + ".weight", (out, inp), 0.02),
                        (base + ".grad_output", (T, out), 1e-4)]
    os.makedirs(args.dir, exist_ok=True)
    every = max(1, args.steps // args.snapshots)
    for s in range(args.snapshots):
        write_snapshot(os.path.join(args.dir, "step_%d.safetensors" % (s * every)), tensors, rng)
    # amax.csv: every step, each tensor's amax drifting slowly (the snapshot steps' amaxes are
    # not their data's: fp8lab warns and uses the data, which is what it would do anyway)
    with open(os.path.join(args.dir, "amax.csv"), "w") as out:
        out.write("step,tensor,amax\n")
        base = np.array([30 * 4.0 * sc for _, _, sc in tensors])
        for step in range(args.steps):
            a = base * (1 + 0.1 * np.sin(step / 37.0 + np.arange(len(tensors))))
            out.write("".join("%d,%s,%.6g\n" % (step, t[0], v) for t, v in zip(tensors, a)))
    print("%s: %d tensors, %d snapshots of %.2f GB, amax.csv %d rows"
          % (args.dir, len(tensors), args.snapshots,
             sum(2 * np.prod(t[1]) for t in tensors) / 1e9, args.steps * len(tensors)))


def amax70b(args):
    lins = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
            "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
    names = ["model.layers.%d.%s.%s" % (l, lin, role) for l in range(80) for lin in lins
             for role in ("input", "weight", "grad_output")]
    base = np.array([(3.0 if n.endswith("input") else 0.05 if n.endswith("weight") else 1e-5)
                     * (1 + (i % 13) / 13.0) for i, n in enumerate(names)])
    os.makedirs(args.dir, exist_ok=True)
    global POOL
    rng = np.random.default_rng(2)
    POOL = rng.standard_normal(1 << 16, dtype=np.float32)
    write_snapshot(os.path.join(args.dir, "step_0.safetensors"),
                   [(n, (8, 8) if n.endswith("weight") else (4, 8), base[i] / 3)
                    for i, n in enumerate(names)], rng)
    path = os.path.join(args.dir, "amax.csv")
    tmp = path + ".tmp"
    with open(tmp, "w") as out:
        out.write("step,tensor,amax\n")
        phase = np.arange(len(names))
        for step in range(args.steps):
            a = base * (1 + 0.2 * np.sin(step / 50.0 + phase))
            if step == args.steps // 2:
                a[7] *= 40  # one spike: a delayed recipe overflows there
            out.write("".join("%d,%s,%.6g\n" % (step, n, v) for n, v in zip(names, a)))
    os.replace(tmp, path)
    print("%s: %d tensors x %d steps = %d rows, %.2f GB" % (
        path, len(names), args.steps, len(names) * args.steps, os.path.getsize(path) / 1e9))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("big")
    p.add_argument("dir")
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--ffn", type=int, default=8192)
    p.add_argument("--tokens", type=int, default=4096)
    p.add_argument("--snapshots", type=int, default=3)
    p.add_argument("--steps", type=int, default=1000)
    p = sub.add_parser("amax70b")
    p.add_argument("dir")
    p.add_argument("--steps", type=int, default=10000)
    args = ap.parse_args()
    big(args) if args.cmd == "big" else amax70b(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
