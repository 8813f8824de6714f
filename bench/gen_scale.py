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
  gen_scale.py amaxmoe DIR [--steps 1000] [--tokens 8192] [--seed 3]
      a DeepSeek-V3-shaped amax stream (issue 40) with transformers-5 names: 61 layers of MLA
      attention (q_a_proj, q_b_proj, kv_a_proj_with_mqa, kv_b_proj, o_proj); layers 0-2 a dense
      MLP (gate_proj, up_proj, down_proj); layers 3-60 a router (mlp.gate), 256 routed experts
      (mlp.experts.E.gate_up_proj, mlp.experts.E.down_proj) and a shared expert
      (mlp.shared_experts.{gate,up,down}_proj); lm_head; roles input, weight, grad_output:
      90,729 tensors (89,088 of them routed experts') x 1,000 steps = 90.7 M rows in
      DIR/amax.csv (6.1 GB); DIR/tokens.csv (`step,gemm,tokens`, one row per step and expert
      GEMM: 29.7 M rows); one tiny snapshot at step 0 (4 x 8 or 8 x 8; an expert that got no
      token at step 0 has no input or grad_output there: it did not run).
      Routing: --tokens tokens a step, top-8 of 256 drawn as a multinomial of 8 x tokens over
      the experts' popularity (per layer: lognormal, 5% of the experts cold, 0.02-3 tokens a
      step on average, so they get none at many steps; popularity drifts). An expert that got
      no token has input and grad_output amax 0 (did not run), its weight every step. Outlier
      experts: 4 per layer in 6 layers whose inputs spike 20-60x at 2% of their steps.

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


# --- amaxmoe: DeepSeek-V3's shapes -----------------------------------------------------------
MOE_LAYERS, MOE_DENSE, MOE_EXPERTS, MOE_TOPK = 61, 3, 256, 8
ROLES = ("input", "weight", "grad_output")
VALW = 11  # a value's text: d.ddddde+XX


def moe_tensors():
    """The tensors in capture order: (names, role [n], slot [n]: the (MoE layer, expert) index
    of a routed expert's tensor, else -1), and the expert GEMMs in order (names, slot)."""
    names, role, slot, gemms, gslot = [], [], [], [], []
    attn = ("q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj")

    def add(gemm, s):
        for r, rn in enumerate(ROLES):
            names.append("%s.%s" % (gemm, rn))
            role.append(r)
            slot.append(s)

    for l in range(MOE_LAYERS):
        p = "model.layers.%d." % l
        for a in attn:
            add(p + "self_attn." + a, -1)
        if l < MOE_DENSE:
            for m in ("gate_proj", "up_proj", "down_proj"):
                add(p + "mlp." + m, -1)
            continue
        add(p + "mlp.gate", -1)
        ml = l - MOE_DENSE
        for e in range(MOE_EXPERTS):
            for g in ("gate_up_proj", "down_proj"):
                s = ml * MOE_EXPERTS + e
                add("%smlp.experts.%d.%s" % (p, e, g), s)
                gemms.append("%smlp.experts.%d.%s" % (p, e, g))
                gslot.append(s)
        for m in ("gate_proj", "up_proj", "down_proj"):
            add(p + "mlp.shared_experts." + m, -1)
    add("lm_head", -1)
    return names, np.array(role), np.array(slot), gemms, np.array(gslot)


class RowWriter:
    """Writes `step,<name>,<value>` rows fast, a step at a time with numpy: the names' prefixes
    (one copy per step-number width, kept) and the values' text scattered into one buffer."""

    def __init__(self, names):
        self.names = [n.encode() for n in names]
        self.pre = {}
        self.fixed = {}

    def prefix(self, d):
        if d not in self.pre:
            plen = np.array([d + 1 + len(nm) + 1 for nm in self.names], np.int64)
            buf = b"".join(b"0" * d + b"," + nm + b"," for nm in self.names)
            rowid = np.repeat(np.arange(len(plen)), plen)
            rel = np.arange(len(buf)) - np.repeat(np.cumsum(plen) - plen, plen)
            self.pre[d] = (np.frombuffer(buf, np.uint8).copy(), plen, rowid, rel)
        return self.pre[d]

    def rows(self, step, text, vlen):
        """text: uint8 [n, w], the values' text right-aligned in w; vlen [n]: its length in
        characters -> the step's rows as bytes."""
        sd = np.frombuffer(str(step).encode(), np.uint8)
        d = sd.size
        pbuf, plen, rowid, rel = self.prefix(d)
        w = text.shape[1]
        rowlen = plen + vlen + 1
        start = np.cumsum(rowlen) - rowlen
        out = np.empty(int(rowlen.sum()), np.uint8)
        key = (d, vlen[0]) if np.all(vlen == vlen[0]) else None
        if key is not None and key in self.fixed:
            pidx = self.fixed[key]
        else:
            pidx = start[rowid] + rel
            if key is not None:
                self.fixed = {key: pidx}
        out[pidx] = pbuf
        out[(start[:, None] + np.arange(d)).ravel()] = np.tile(sd, len(plen))
        mask = np.arange(w)[None, :] >= (w - vlen)[:, None]
        pos = (start + plen - (w - vlen))[:, None] + np.arange(w)
        out[pos[mask]] = text[mask]
        out[start + rowlen - 1] = ord("\n")
        return out.tobytes()


def sci_text(v):
    """float array (>= 0) -> uint8 [n, 11]: '%.5e' for every value (0 -> 0.00000e+00)."""
    v = np.asarray(v, np.float64)
    pos = v > 0
    e = np.where(pos, np.floor(np.log10(np.where(pos, v, 1.0))), 0).astype(np.int64)
    m = np.where(pos, np.rint(v / 10.0 ** e * 1e5), 0).astype(np.int64)
    over = m >= 1000000  # 9.999995 rounds up to 10.00000
    e[over] += 1
    m[over] = 100000
    low = pos & (m < 100000)  # log10 rounding just below a power of 10
    e[low] -= 1
    m[low] = np.rint(v[low] / 10.0 ** e[low] * 1e5).astype(np.int64)
    t = np.empty((v.size, VALW), np.uint8)
    for i in range(6):
        t[:, 0 if i == 0 else i + 1] = 48 + (m // 10 ** (5 - i)) % 10
    t[:, 1] = ord(".")
    t[:, 7] = ord("e")
    t[:, 8] = np.where(e < 0, ord("-"), ord("+"))
    a = np.abs(e)
    t[:, 9] = 48 + a // 10
    t[:, 10] = 48 + a % 10
    return t


def int_text(c, width):
    """non-negative int array -> (uint8 [n, width], right-aligned digits; [n] their count)."""
    t = np.empty((c.size, width), np.uint8)
    for i in range(width):
        t[:, i] = 48 + (c // 10 ** (width - 1 - i)) % 10
    nd = np.ones(c.size, np.int64)
    for i in range(1, width):
        nd += c >= 10 ** i
    return t, nd


def amaxmoe(args):
    import time
    t0 = time.time()
    names, role, slot, gemms, gslot = moe_tensors()
    n, nmoe = len(names), (MOE_LAYERS - MOE_DENSE) * MOE_EXPERTS
    rng = np.random.default_rng(args.seed)
    # base amaxes: input ~3, weight ~0.05, grad_output ~1e-5, varied per tensor
    base = np.choose(role, [3.0, 0.05, 1e-5]) * (1 + (np.arange(n) % 13) / 13.0)
    phase = rng.uniform(0, 2 * np.pi, n)
    # routing: per MoE layer, the experts' popularity
    nml = MOE_LAYERS - MOE_DENSE
    pop = rng.lognormal(0.0, 0.6, (nml, MOE_EXPERTS))
    cold = rng.random((nml, MOE_EXPERTS)) < 0.05
    mean_tok = MOE_TOPK * args.tokens / MOE_EXPERTS
    pop[cold] = rng.uniform(0.02, 3.0, cold.sum()) / mean_tok  # 0.02-3 tokens a step
    pop_phase = rng.uniform(0, 2 * np.pi, (nml, MOE_EXPERTS))
    # outlier experts: 4 per layer in 6 MoE layers, inputs spiking 20-60x at 2% of their steps
    out_slots = np.array([ml * MOE_EXPERTS + e for ml in rng.choice(nml, 6, replace=False)
                          for e in rng.choice(MOE_EXPERTS, 4, replace=False)])
    ex = slot >= 0
    ex_in = ex & (role != 1)  # an expert's input and grad_output: 0 when it got no token
    is_out = np.isin(slot, out_slots) & (role == 0)
    os.makedirs(args.dir, exist_ok=True)
    amax_w, tok_w = RowWriter(names), RowWriter(gemms)
    vw = np.full(n, VALW, np.int64)
    tw = 1 + len(str(args.tokens))
    ap, tp = os.path.join(args.dir, "amax.csv"), os.path.join(args.dir, "tokens.csv")
    zero_at0 = None
    with open(ap + ".tmp", "wb") as fa, open(tp + ".tmp", "wb") as ft:
        fa.write(b"step,tensor,amax\n")
        ft.write(b"step,gemm,tokens\n")
        for step in range(args.steps):
            p = pop * np.exp(0.3 * np.sin(step / 100.0 + pop_phase))
            p /= p.sum(axis=1, keepdims=True)
            tok = rng.multinomial(MOE_TOPK * args.tokens, p).ravel()  # [nmoe]
            tok = np.minimum(tok, args.tokens)  # top-k: an expert sees a token at most once
            a = base * (1 + np.where(role == 1, 0.01, 0.2) * np.sin(step / 50.0 + phase))
            t = tok[np.where(ex, slot, 0)]
            # the max over more tokens is larger: +5% per e-fold of tokens over 1
            a = np.where(ex_in, a * (1 + 0.05 * np.log(np.maximum(t, 1))), a)
            a[ex_in & (t == 0)] = 0.0
            spike = is_out & (t > 0) & (rng.random(n) < 0.02)
            a[spike] *= rng.uniform(20, 60, spike.sum())
            if step == 0:
                zero_at0 = ex_in & (t == 0)
                a0 = a
            fa.write(amax_w.rows(step, sci_text(a), vw))
            ft.write(tok_w.rows(step, *int_text(tok[gslot], tw)))
    os.replace(ap + ".tmp", ap)
    os.replace(tp + ".tmp", tp)
    # the snapshot: every tensor that ran at step 0, tiny, its values the pool's at amax / 3
    global POOL
    POOL = rng.standard_normal(1 << 16, dtype=np.float32)
    write_snapshot(os.path.join(args.dir, "step_0.safetensors"),
                   [(nm, (8, 8) if role[i] == 1 else (4, 8), a0[i] / 3)
                    for i, nm in enumerate(names) if not zero_at0[i]], rng)
    dt = time.time() - t0
    print("%s: %d tensors (%d routed experts' in %d MoE layers x %d experts) x %d steps = %d "
          "rows, %.2f GB; tokens.csv %d rows, %.2f GB; step_0 without %d tensors that did not "
          "run; %.0f s" % (
              ap, n, ex.sum(), nml, MOE_EXPERTS, args.steps, n * args.steps,
              os.path.getsize(ap) / 1e9, len(gemms) * args.steps, os.path.getsize(tp) / 1e9,
              zero_at0.sum(), dt))


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
    p = sub.add_parser("amaxmoe")
    p.add_argument("dir")
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--tokens", type=int, default=8192)
    p.add_argument("--seed", type=int, default=3)
    args = ap.parse_args()
    {"big": big, "amax70b": amax70b, "amaxmoe": amaxmoe}[args.cmd](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
