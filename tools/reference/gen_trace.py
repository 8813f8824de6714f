#!/usr/bin/env python3
"""Generate a random tensor trace (and optionally an experiment INI) for testing fp8lab
against the Python reference (fp8ref.py).

  gen_trace.py DIR [--seed S] [--ini PATH] [--out OUTDIR] [--npy] [--select] [--blocks]
               [--ranks R] [--reduce-amax] [--reduce-group N] [--reduce-stride S]
  gen_trace.py DIR --moe E [--ranks R] [--seed S] [--ini PATH] [--out OUTDIR] [--npy]
               [--reduce-amax] [--reduce-group N]

DIR gets step_<N>.safetensors snapshots (own writer: 8-byte LE header length, JSON header
padded with a random number of spaces so that the data does not always start 4-aligned, then
the data) at irregular steps, and amax.csv with rows for many more steps. --npy writes all
snapshots as step_<N>/<name>.npy instead (F32/F16; BF16 tensors widened to F32). --ini writes an experiment
whose [trace] path points at DIR (relative to the INI's folder) with a delayed sweep, a delayed
e5m2 recipe and two current recipes; --out sets its [output] dir (default: out, beside the INI).
--select adds [trace] steps/tensors selections to the INI.

--blocks adds GEMM layer triplets to the trace (gemm0: input [70, 150] BF16, weight [130, 150]
F32, grad_output [70, 130] BF16, more tokens than gemm_max_tokens = 48; gemm1: input
[2, 20, 72], weight [40, 72], grad_output [2, 20, 40]; gemm_bad, whose shapes do not agree and
which is always skipped), with realistic magnitudes (activations ~1 with outlier channels,
weights ~0.02, gradients ~1e-4), one member missing at one snapshot step per layer, an
activation outlier at one step, amax.csv rows between snapshots, a BF16 bftiny.grad_output
whose tiles' amaxes lie below 448 / FLT_MAX (bf16_tiny); and to the INI the block recipes
(mxfp8 ceil, mxfp8 floor e4m3, block auto, block 1x128 without pow2, block hybrid without pow2
with amax_epsilon 1e-30, rowwise, rowwise with amax_epsilon 1e-12) and an [analysis] section (gemm = true, gemm_max_tokens = 48). With --select, the tensors selection
keeps gemm0 whole and only gemm1.grad_output (so gemm1 has no triplet).
Without --blocks the output is exactly what it was before the option existed.

--ranks R writes a multi-rank trace instead: DIR/rank_0/ .. DIR/rank_<R-1>/, each a trace as
above (safetensors, or npy with --npy; with --blocks each rank has the GEMM layers, drawn per
rank) with the same tensor names and the same
snapshot steps, but values drawn per rank, so that the ranks' amaxes differ: every rank has its
own random spikes plus a planted one (rank r: 2^(24+6r) in one tensor at one snapshot step),
one tensor is missing on rank 1 at one snapshot step (neither in the snapshot nor in amax.csv),
the last rank has a snapshot step no other rank has, each rank's amax.csv covers its own random
set of steps between the snapshots (steps that only some ranks record), and each rank has an
amax.csv-only tensor of its own (ghost_r<r>.input) besides the shared ones. --reduce-amax and
--reduce-group N (--reduce-stride S) add [trace] reduce_amax = true and reduce_group = N
(reduce_stride = S) to the INI; with --select,
the tensors selection also keeps rank_0/*.input (a glob with '/', matched against the
rank-prefixed name).

--moe E writes a Mixture-of-Experts trace instead (issue 40; generate_moe): one attention GEMM,
the router (mlp.gate) and E expert GEMMs model.layers.0.mlp.experts.<e>.gate_up_proj, steps
0 .. 29, snapshots at every third step, amax.csv at every step, tokens.csv; experts get no
tokens at some steps (amax 0 for input and grad_output, absent from the snapshot; the weight
recorded every step), expert E-1 none at steps 6 .. 17. With --ranks R the experts are split
over the ranks (expert parallelism: rank r holds experts r*E/R .. (r+1)*E/R - 1), attention and
router on every rank. Its INI sweeps delayed scaling under both rules (unfused_update) and
current scaling, with exact GEMM errors.

Everything is drawn from numpy's Generator seeded with S: the same seed gives the same files.
"""

import argparse
import json
import os
import struct
import sys

import numpy as np
import ml_dtypes

ROLES = ("input", "weight", "output", "grad_output", "grad_input")
FWD = ("input", "weight", "output")
E4M3_MAX = 448.0
E5M2_MAX = 57344.0
DT_SIZE = {"F32": 4, "BF16": 2, "F16": 2}

# --------------------------------------------------------------------------------------------
# safetensors writer
# --------------------------------------------------------------------------------------------


def to_bytes(arr32, dtype):
    a = np.asarray(arr32, dtype=np.float32)
    if dtype == "F32":
        return a.astype("<f4").tobytes()
    if dtype == "F16":
        with np.errstate(over="ignore"):
            return a.astype("<f2").tobytes()
    return a.astype(ml_dtypes.bfloat16).view("<u2").tobytes()


def write_safetensors(path, tensors, rng):
    """tensors: list of (name, dtype, float32 array). Order of the data is shuffled."""
    order = list(range(len(tensors)))
    rng.shuffle(order)
    header = {}
    blobs = []
    off = 0
    for i in order:
        name, dt, arr = tensors[i]
        b = to_bytes(arr, dt)
        header[name] = {"dtype": dt, "shape": list(arr.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    if rng.random() < 0.5:
        header["__metadata__"] = {"format": "pt", "generator": "fp8lab gen_trace"}
    # JSON key order: shuffle so the header is not in data order
    keys = list(header)
    rng.shuffle(keys)
    text = json.dumps({k: header[k] for k in keys}, separators=(",", ":") if rng.random() < 0.5
                      else (", ", ": ")).encode("utf-8")
    text += b" " * int(rng.integers(0, 8))
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def write_npy_dir(path, tensors):
    os.makedirs(path, exist_ok=True)
    for name, dt, arr in tensors:
        a = np.asarray(arr, dtype=np.float32)
        with np.errstate(over="ignore"):
            a = a.astype("<f2") if dt == "F16" else a.astype("<f4")
        np.save(os.path.join(path, name + ".npy"), a)

# --------------------------------------------------------------------------------------------
# values
# --------------------------------------------------------------------------------------------


def representable(a, dt):
    """Round float32 values to what the dtype stores (as float32)."""
    a = np.asarray(a, dtype=np.float32)
    with np.errstate(over="ignore"):
        if dt == "F16":
            return a.astype(np.float16).astype(np.float32)
        if dt == "BF16":
            return a.astype(ml_dtypes.bfloat16).astype(np.float32)
    return a


def exp_range(dt):
    """Binade range of normal-ish values the dtype can hold comfortably."""
    if dt == "F16":
        return -24, 15
    return -140, 120


def wide_values(rng, n, dt, center):
    lo, hi = exp_range(dt)
    c = min(max(center, lo + 15), hi - 15)
    e = rng.uniform(c - 15, c + 15, size=n)            # ~30 binades, log-uniform magnitudes
    v = np.exp2(e) * rng.choice([-1.0, 1.0], size=n)
    v[rng.random(n) < 0.05] = 0.0                      # exact zeros
    return representable(v, dt)


def tie_values(rng, n, fmt_max, mbits, emin, k):
    """Values that are exactly halfway between two FP8 values (normal and subnormal) once
    multiplied by 2^-k (k chosen so that the tensor's amax is fmt_max * 2^k)."""
    out = np.empty(n, dtype=np.float64)
    for i in range(n):
        r = rng.random()
        if r < 0.6:       # normal tie: (1 + (2j+1)/2^(m+1)) * 2^e
            j = int(rng.integers(0, 2 ** mbits))
            e = int(rng.integers(emin, int(np.log2(fmt_max))))
            v = (1.0 + (2 * j + 1) / 2.0 ** (mbits + 1)) * 2.0 ** e
        elif r < 0.85:    # subnormal tie: (2j+1) * 2^(emin - mbits - 1)
            j = int(rng.integers(0, 2 ** mbits))
            v = (2 * j + 1) * 2.0 ** (emin - mbits - 1)
        else:             # exactly representable
            j = int(rng.integers(0, 2 ** mbits))
            v = (1.0 + j / 2.0 ** mbits) * 2.0 ** int(rng.integers(emin - mbits, 5))
        out[i] = v * rng.choice([-1.0, 1.0])
    out[0] = fmt_max * rng.choice([-1.0, 1.0])
    return (out * 2.0 ** k).astype(np.float32)

# --------------------------------------------------------------------------------------------
# the trace
# --------------------------------------------------------------------------------------------


SHAPES = [(37,), (1000,), (5, 33), (3, 7, 45), (64, 96), (17, 31), (2, 3, 129), (128,), (7, 64),
          (4, 4, 4), (300, 3), (31,), (2, 2, 2)]


def module_names(rng):
    pool = ["blocks.%d.attn.qkv", "blocks.%d.attn.proj", "blocks.%d.mlp.fc1", "blocks.%d.mlp.fc2",
            "layer%d.linear", "enc.l%d.ff", "lm_head%d", "dec.%d.cross"]
    mods = set()
    while len(mods) < int(rng.integers(3, 6)):
        p = pool[int(rng.integers(0, len(pool)))]
        mods.add(p % int(rng.integers(0, 12)) if "%d" in p else p)
    return sorted(mods)


class TensorSpec:
    def __init__(self, name, role, dtype, shape, kind, center):
        self.name, self.role, self.dtype, self.shape = name, role, dtype, shape
        self.kind = kind          # wide | ties | tiny | denorm | special
        self.center = center


def make_specs(rng):
    specs = []
    for mod in module_names(rng):
        roles = [r for r in ROLES if rng.random() < 0.75] or ["input"]
        for role in roles:
            dt = ["F32", "BF16", "F16"][int(rng.integers(0, 3))]
            shape = SHAPES[int(rng.integers(0, len(SHAPES)))]
            kind = rng.choice(["wide", "wide", "wide", "ties", "special", "tiny"])
            specs.append(TensorSpec("%s.%s" % (mod, role), role, dt, shape, str(kind),
                                    int(rng.integers(-20, 21))))
    # guaranteed corner cases
    specs.append(TensorSpec("edge.empty.weight", "weight", "F32", (0, 16), "wide", 0))
    specs.append(TensorSpec("edge.one.grad_output", "grad_output", "BF16", (1,), "wide", -5))
    specs.append(TensorSpec("edge.ties.input", "input", "F32", (17, 33), "ties", 0))
    specs.append(TensorSpec("edge.ties.grad_input", "grad_input", "BF16", (45,), "ties", 0))
    specs.append(TensorSpec("edge.tiny.output", "output", "F16", (3, 11), "tiny", 0))
    specs.append(TensorSpec("edge.denorm.input", "input", "F32", (40,), "denorm", 0))
    specs.append(TensorSpec("edge.special.grad_output", "grad_output", "F32", (9, 9), "special", 3))
    for s in specs:
        if s.kind == "ties" and s.dtype == "F16":
            s.dtype = "BF16"      # keep fmt_max * 2^k and the subnormal ties representable
        if s.kind == "denorm":
            s.dtype = "F32"
    return specs


def ties_k(rng, spec):
    return int(rng.integers(-3, 6))


def gen_tensor(rng, spec, step_info):
    n = int(np.prod(spec.shape, dtype=np.int64))
    fwd = spec.role in FWD
    if n == 0:
        return np.zeros(spec.shape, dtype=np.float32)
    kind = spec.kind
    if kind == "ties":
        k = ties_k(rng, spec)
        if fwd:
            v = tie_values(rng, n, E4M3_MAX, 3, -6, k)
        else:
            v = tie_values(rng, n, E5M2_MAX, 2, -14, k)
        v = representable(v, spec.dtype)
    elif kind == "tiny":
        v = representable(np.exp2(rng.uniform(-17, -11, n)) * rng.choice([-1.0, 1.0], n),
                          spec.dtype)
        v[rng.random(n) < 0.1] = 0.0
    elif kind == "denorm":   # float32 subnormals: amax so small that 448/amax overflows
        v = (rng.integers(1, 1 << 20, n) * 2.0 ** -149 * rng.choice([-1.0, 1.0], n))
        v = v.astype(np.float32)
        if rng.random() < 0.5:
            v[int(rng.integers(0, n))] = np.float32(2.0 ** -149)
    else:
        v = wide_values(rng, n, spec.dtype, spec.center + int(rng.integers(-3, 4)))
    v = np.asarray(v, dtype=np.float32)
    r = rng.random()
    if kind == "special" and r < 0.7:
        m = int(rng.integers(1, 4))
        idx = rng.choice(n, size=min(m, n), replace=False)
        v[idx] = rng.choice([np.inf, -np.inf, np.nan], size=len(idx))
    elif kind == "special" and r < 0.8:
        v[:] = np.nan                                   # all-NaN: amax 0
    elif kind == "wide" and r < 0.12:                   # amax spike
        big = 60000.0 if spec.dtype == "F16" else float(2.0 ** rng.integers(40, 100))
        v[int(rng.integers(0, n))] = np.float32(big * rng.choice([-1.0, 1.0]))
    elif kind == "wide" and r < 0.16:
        v[:] = 0.0                                      # module ran with an all-zero tensor
    return v.reshape(spec.shape)


def amax_text(rng, v):
    v = np.float32(v)
    r = rng.random()
    if np.isinf(v):
        return "inf"
    if v == 0:
        return "0" if r < 0.5 else "0.0"
    if r < 0.6:
        return "%.9g" % float(v)
    if r < 0.8:
        return "%.17g" % (float(v) * (1.0 + rng.uniform(-1e-7, 1e-7)))  # rounds in the parser
    return "%.6e" % float(v)


def csv_amax(rng, spec, k_ties=None):
    r = rng.random()
    if r < 0.15:
        return 0.0                       # module skipped
    fwd = spec.role in FWD
    if spec.kind == "ties":
        return (E4M3_MAX if fwd else E5M2_MAX) * 2.0 ** int(rng.integers(-3, 6))
    if r < 0.18:
        return float("inf")
    if r < 0.25:
        return float(2.0 ** rng.integers(40, 100))   # spike
    if spec.kind == "tiny":
        return float(2.0 ** rng.uniform(-14, -9))
    if spec.kind == "denorm":
        return float(2.0 ** rng.uniform(-149, -128))
    return float(2.0 ** rng.uniform(spec.center + 10, spec.center + 16))


# GEMM layer triplets (--blocks): layer -> (input, weight, grad_output) shapes
GEMM_LAYERS = [
    ("gemm0", (70, 150), (130, 150), (70, 130)),        # tokens 70 > gemm_max_tokens 48
    ("gemm1", (2, 20, 72), (40, 72), (2, 20, 40)),      # 3-D activations, 40 tokens
    ("gemm_bad", (16, 40), (24, 36), (16, 24)),         # in 40 != 36: never a triplet
]
GEMM_DTYPES = {"input": "BF16", "weight": "F32", "grad_output": "BF16"}
GEMM_MAX_TOKENS = 48


def bf16_tiny(t):
    """A BF16 [3, 200] tensor whose first row's 1x128 tiles have amaxes below 448 / FLT_MAX
    (values 2^-133 .. 2^-120; 448 / FLT_MAX = 2^-119.19: fp8_max / amax overflows float32, so
    TE's Float8BlockScaling scales with BF16's largest finite value), a second row of ordinary
    values and a third of zeros and tiny values (amax_epsilon's floor). Its own generator: the
    rest of the trace does not depend on it."""
    rng = np.random.default_rng([t, 424242])
    x = np.zeros((3, 200))
    x[0] = np.exp2(rng.uniform(-133, -120, 200)) * rng.choice([-1.0, 1.0], 200)
    x[1] = rng.normal(0, 1, 200)
    x[2, ::7] = np.exp2(rng.uniform(-60, -20, 29))
    return representable(x, "BF16")


class GemmModel:
    """Realistic operands of the GEMM layers, drawn from their own generator (brng) so that the
    rest of the trace does not depend on it: activations ~N(0,1) with a few outlier channels
    (10-30x) growing slowly, weights ~N(0, 0.02) drifting, Student-t gradients ~1e-4 shrinking
    over the run; one activation outlier (~50x on a few tokens of gemm0) at one snapshot step;
    per layer one snapshot step (never the second one, which --select keeps) missing one
    member."""

    def __init__(self, brng, snap_steps):
        self.rng = brng
        self.snap_steps = snap_steps
        self.layers = {}
        for name, xs, ws, ds in GEMM_LAYERS:
            n_in = xs[-1]
            ch = brng.choice(n_in, size=3, replace=False)
            gain = np.ones(n_in)
            gain[ch] = brng.uniform(10, 30, size=3)
            w0 = brng.normal(0, 0.02, ws)
            cand = [t for i, t in enumerate(snap_steps) if i != 1]
            miss_step = cand[int(brng.integers(0, len(cand)))]
            miss_role = ("input", "weight", "grad_output")[int(brng.integers(0, 3))]
            self.layers[name] = dict(shapes={"input": xs, "weight": ws, "grad_output": ds},
                                     gain=gain, w0=w0, miss=(miss_step, miss_role))
        self.outlier_step = snap_steps[int(brng.integers(0, len(snap_steps)))]
        self.last = max(snap_steps) + 6

    def value(self, layer, role, t):
        L = self.layers[layer]
        shape = L["shapes"][role]
        rng = self.rng
        prog = t / float(self.last)
        if role == "input":
            x = rng.normal(0, 1, shape) * L["gain"] * (1.0 + 0.5 * prog)
            if layer == "gemm0" and t == self.outlier_step:
                x2 = x.reshape(-1, shape[-1])
                toks = rng.choice(x2.shape[0], size=3, replace=False)
                x2[toks, int(rng.integers(0, shape[-1]))] *= rng.uniform(40, 60)
        elif role == "weight":
            x = L["w0"] * (1.0 + 0.05 * prog) + rng.normal(0, 0.0005, shape)
        else:
            x = rng.standard_t(3, shape) * 1e-4 * (1.0 - 0.8 * prog)
        return representable(x, GEMM_DTYPES[role])

    def tensors(self, t):
        out = []
        for name, _xs, _ws, _ds in GEMM_LAYERS:
            for role in ("input", "weight", "grad_output"):
                if self.layers[name]["miss"] == (t, role):
                    continue
                out.append(("%s.%s" % (name, role), GEMM_DTYPES[role], self.value(name, role, t)))
        out.append(("bftiny.grad_output", "BF16", bf16_tiny(t)))
        return out

    def amax_rows(self, snap_steps):
        """amax.csv rows of the GEMM tensors at some steps between the snapshots."""
        rows = []
        for t in range(0, self.last):
            if t in snap_steps or self.rng.random() < 0.5:
                continue
            for name, _xs, _ws, _ds in GEMM_LAYERS:
                gmax = float(np.max(self.layers[name]["gain"]))
                prog = t / float(self.last)
                typ = {"input": 3.5 * gmax * (1.0 + 0.5 * prog), "weight": 0.09,
                       "grad_output": 2e-3 * (1.0 - 0.8 * prog)}
                for role in ("input", "weight", "grad_output"):
                    if self.rng.random() < 0.8:
                        v = np.float32(typ[role] * self.rng.uniform(0.7, 1.3))
                        rows.append((t, "%s.%s" % (name, role), "%.9g" % float(v)))
        return rows


def generate(dirpath, seed, npy=False, blocks=False):
    rng = np.random.default_rng(seed)
    os.makedirs(dirpath, exist_ok=True)
    specs = make_specs(rng)
    n_snap = int(rng.integers(5, 9))
    snap_steps = sorted(int(s) for s in rng.choice(np.arange(0, 90), size=n_snap, replace=False))
    gm = GemmModel(np.random.default_rng(seed + 7777777), snap_steps) if blocks else None
    # tensors that only ever appear in amax.csv
    csv_only = [TensorSpec("ghost%d.%s" % (i, r), r, "F32", (1,), "wide", int(rng.integers(-5, 5)))
                for i, r in enumerate(rng.choice(ROLES, size=2, replace=False))]
    for t in snap_steps:
        tensors = []
        for s in specs:
            present = rng.random() < 0.85 or s.name.startswith("edge.")
            if present:
                tensors.append((s.name, s.dtype, gen_tensor(rng, s, t)))
        if gm is not None:
            tensors += gm.tensors(t)
        if npy:  # a trace is all safetensors or all npy (fp8lab rejects a mix)
            write_npy_dir(os.path.join(dirpath, "step_%d" % t),
                          [(nm, dt if dt != "BF16" else "F32", a) for nm, dt, a in tensors])
        else:
            write_safetensors(os.path.join(dirpath, "step_%d.safetensors" % t), tensors, rng)
    # amax.csv: many extra steps, some snapshot steps too, and the csv-only tensors
    last = snap_steps[-1] + 6
    rows = []
    for t in range(0, last):
        if t in snap_steps:
            p_row = 0.3      # also at snapshot steps: the snapshot wins for tensors it holds
        else:
            p_row = 0.6
        if rng.random() > p_row and t not in snap_steps:
            continue
        for s in specs + csv_only:
            if rng.random() < 0.7:
                rows.append((t, s.name, amax_text(rng, csv_amax(rng, s))))
    if gm is not None:
        rows += gm.amax_rows(snap_steps)
    if rng.random() < 0.3:
        rng.shuffle(rows)                # row order must not matter
    with open(os.path.join(dirpath, "amax.csv"), "w") as f:
        f.write("step,tensor,amax\n")
        for t, name, txt in rows:
            f.write("%d,%s,%s\n" % (t, name, txt))
    return snap_steps, specs, csv_only


def generate_ranks(dirpath, seed, nranks, npy=False, blocks=False):
    """A multi-rank trace: dirpath/rank_<r>/ for r < nranks (see the module docstring)."""
    rng = np.random.default_rng(seed)
    specs = make_specs(rng)
    n_snap = int(rng.integers(5, 9))
    snap_steps = sorted(int(s) for s in rng.choice(np.arange(0, 90), size=n_snap, replace=False))
    csv_only = [TensorSpec("ghost%d.%s" % (i, r), r, "F32", (1,), "wide", int(rng.integers(-5, 5)))
                for i, r in enumerate(rng.choice(ROLES, size=2, replace=False))]
    last = snap_steps[-1] + 6
    extra_step = int(rng.choice([t for t in range(0, last) if t not in snap_steps]))
    wide = [s for s in specs if s.kind == "wide" and not s.name.startswith("edge.")] or \
        [s for s in specs if not s.name.startswith("edge.")]
    missing = (1, snap_steps[1], wide[0].name)          # (rank, step, tensor)
    spikes = {}                                         # (rank, step) -> (tensor, factor)
    for r in range(nranks):
        spec = wide[int(rng.integers(0, len(wide)))]
        spikes[(r, snap_steps[int(rng.integers(0, n_snap))])] = (spec.name, 2.0 ** (24 + 6 * r))
    for r in range(nranks):
        rr = np.random.default_rng([seed, 1 + r])
        rdir = os.path.join(dirpath, "rank_%d" % r)
        os.makedirs(rdir, exist_ok=True)
        steps_r = sorted(snap_steps + ([extra_step] if r == nranks - 1 else []))
        gm = GemmModel(np.random.default_rng([seed + 7777777, r]), steps_r) if blocks else None
        for t in steps_r:
            tensors = []
            for s in specs:
                present = rr.random() < 0.85 or s.name.startswith("edge.")
                if (r, t, s.name) == missing:
                    present = False
                if present:
                    v = gen_tensor(rr, s, t)
                    sp = spikes.get((r, t))
                    if sp is not None and sp[0] == s.name and v.size:
                        flat = v.reshape(-1)
                        k = int(rr.integers(0, flat.size))
                        flat[k] = np.float32(max(abs(float(flat[k])), 1.0) * sp[1])
                        v = representable(v, s.dtype)
                    tensors.append((s.name, s.dtype, v))
            if gm is not None:
                tensors += gm.tensors(t)
            if npy:
                write_npy_dir(os.path.join(rdir, "step_%d" % t),
                              [(nm, dt if dt != "BF16" else "F32", a) for nm, dt, a in tensors])
            else:
                write_safetensors(os.path.join(rdir, "step_%d.safetensors" % t), tensors, rr)
        own_ghost = TensorSpec("ghost_r%d.input" % r, "input", "F32", (1,), "wide", r)
        rows = []
        for t in range(0, last):
            if t not in steps_r and rr.random() > 0.6:
                continue                                 # a step this rank does not record
            for s in specs + csv_only + [own_ghost]:
                if (r, t, s.name) == missing:
                    continue
                if rr.random() < 0.7:
                    rows.append((t, s.name, amax_text(rr, csv_amax(rr, s))))
        if gm is not None:
            rows += gm.amax_rows(steps_r)
        if rr.random() < 0.3:
            rr.shuffle(rows)
        with open(os.path.join(rdir, "amax.csv"), "w") as f:
            f.write("step,tensor,amax\n")
            for t, name, txt in rows:
                f.write("%d,%s,%s\n" % (t, name, txt))
    return snap_steps, specs, csv_only


# --------------------------------------------------------------------------------------------
# Mixture-of-Experts traces (--moe E; issue 40)
# --------------------------------------------------------------------------------------------

MOE_DIM, MOE_HID = 24, 16   # d_model, expert hidden width


def moe_names(nexperts):
    """(attention GEMMs, router GEMM, expert GEMMs) of layer 0, the issue's naming."""
    return (["model.layers.0.self_attn.q_proj"], "model.layers.0.mlp.gate",
            ["model.layers.0.mlp.experts.%d.gate_up_proj" % e for e in range(nexperts)])


def generate_moe(dirpath, seed, nexperts, nranks=0, npy=False):
    """An MoE trace: attention and router GEMMs on every rank, E expert GEMMs (input, weight,
    grad_output each), steps 0 .. 29, snapshots at every third step and amax.csv rows at every
    step. Each step routes a random number of tokens to each expert, and 0 to some (runs of
    steps without tokens, expert E-1 none from step 6 to 17, plus random ones): there its input
    and grad_output have amax 0 in amax.csv and no snapshot entry, while its weight is recorded
    every step (TE quantizes every expert's weight every step); tokens.csv says how many. With
    nranks R (expert parallelism): rank_<r>/ holds experts r*E/R .. (r+1)*E/R - 1 and its own
    attention and router tensors (values drawn per rank)."""
    rng = np.random.default_rng([seed, 4040])
    attn, gate, experts = moe_names(nexperts)
    steps = list(range(30))
    snaps = set(range(0, 30, 3))
    ranks = max(nranks, 1)
    assert nexperts % ranks == 0, "--moe E must be a multiple of --ranks"
    per = nexperts // ranks
    # tokens[t][e]: the expert's routed rows at step t (0: none)
    tokens = []
    for t in steps:
        row = []
        for e in range(nexperts):
            k = int(rng.integers(1, 9))
            if (e == nexperts - 1 and 6 <= t <= 17) or rng.random() < 0.2:
                k = 0
            row.append(k)
        tokens.append(row)
    for r in range(ranks):
        rr = np.random.default_rng([seed, 4041, r])
        d = os.path.join(dirpath, "rank_%d" % r) if nranks else dirpath
        os.makedirs(d, exist_ok=True)
        mine = experts[r * per:(r + 1) * per]
        amax_rows, tok_rows = [], []
        w = {g: (rr.standard_normal((MOE_HID, MOE_DIM)) * 0.02).astype(np.float32)
             for g in attn + [gate] + mine}
        for t in steps:
            tensors = []
            for g in attn + [gate] + mine:
                e = experts.index(g) if g in experts else None
                n = 12 if e is None else tokens[t][e]
                w[g] = (w[g] * np.float32(1.0 + 0.01 * rr.standard_normal())).astype(np.float32)
                vals = {"weight": w[g]}
                if n:
                    x = rr.standard_normal((n, MOE_DIM)).astype(np.float32)
                    if rr.random() < 0.15:   # an outlier channel now and then
                        x[:, int(rr.integers(0, MOE_DIM))] *= np.float32(2.0 ** rr.integers(4, 9))
                    vals["input"] = x
                    vals["grad_output"] = (rr.standard_normal((n, MOE_HID)) *
                                           2.0 ** rr.uniform(-16, -10)).astype(np.float32)
                for role in ("input", "weight", "grad_output"):
                    name = "%s.%s" % (g, role)
                    a = vals.get(role)
                    amax = float(np.abs(a).max()) if a is not None else 0.0
                    if t in snaps and a is not None:
                        tensors.append((name, "F32", a))
                        amax_rows.append((t, name, "%.9g" % amax))   # exactly the snapshot's
                    else:
                        amax_rows.append((t, name, amax_text(rr, amax)))
                if e is not None:
                    tok_rows.append((t, g, n))
            if t in snaps:
                if npy:
                    write_npy_dir(os.path.join(d, "step_%d" % t), tensors)
                else:
                    write_safetensors(os.path.join(d, "step_%d.safetensors" % t), tensors, rr)
        with open(os.path.join(d, "amax.csv"), "w") as f:
            f.write("step,tensor,amax\n")
            for t, name, txt in amax_rows:
                f.write("%d,%s,%s\n" % (t, name, txt))
        with open(os.path.join(d, "tokens.csv"), "w") as f:
            f.write("step,gemm,tokens\n")
            for t, g, n in tok_rows:
                f.write("%d,%s,%d\n" % (t, g, n))
    return sorted(snaps), attn + [gate] + experts, tokens


MOE_INI = """; generated by tools/reference/gen_trace.py --moe {nexperts} --seed {seed}
[trace]
path = {path}
{reduce}
[recipe.fused]
kind = delayed
history_len = 1, 2, 4, 16
margin = 0, 1
amax_compute = max, most_recent

[recipe.unfused]
kind = delayed
history_len = 1, 2, 4, 16
margin = 0, 1
amax_compute = max, most_recent
unfused_update = true

[recipe.cur]
kind = current

[analysis]
gemm = true
gemm_error = exact

[output]
dir = {out}
"""


INI = """; generated by tools/reference/gen_trace.py --seed {seed}
[trace]
path = {path}
{select}
[recipe.sweep]
kind = delayed
format = hybrid
history_len = 1, 2, 5, 1024   ; the sweep axes
margin = -1, 0, 2
amax_compute = max, most_recent

[recipe.e5m2]
kind = delayed
format = e5m2
history_len = 3
margin = 0
amax_compute = max # inline comment with '#'

[recipe.cur_pow2]
kind = current
format = hybrid
pow2 = true

[recipe.cur_eps]
kind = current
format = hybrid
amax_epsilon = 1e-3
margin = 1

{blocks}[output]
dir = {out}
"""

BLOCKS_INI = """[recipe.mx]
kind = mxfp8

[recipe.mxf]
kind = mxfp8
format = e4m3
scale_rounding = floor

[recipe.blk]
kind = block

[recipe.blk_np2]
kind = block
block = 1x128
pow2 = false

[recipe.blk_eps]
kind = block
pow2 = false
format = hybrid
amax_epsilon = 1e-30

[recipe.row]
kind = rowwise

[recipe.row_eps]
kind = rowwise
amax_epsilon = 1e-12

[analysis]
gemm = true
gemm_max_tokens = %d

""" % GEMM_MAX_TOKENS


def write_ini(ini_path, trace_dir, seed, out=None, select=None, blocks=False, reduce=None):
    base = os.path.dirname(os.path.abspath(ini_path))
    rel = os.path.relpath(os.path.abspath(trace_dir), base)
    if out is None:
        out = "out"
    else:
        out = os.path.relpath(os.path.abspath(out), base)
    with open(ini_path, "w") as f:
        f.write(INI.format(seed=seed, path=rel, out=out, select=(select or "") + (reduce or ""),
                           blocks=BLOCKS_INI if blocks else ""))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ini", help="also write an experiment INI here")
    ap.add_argument("--out", help="[output] dir for the INI (default: out beside the INI)")
    ap.add_argument("--npy", action="store_true", help="write the snapshots in npy form")
    ap.add_argument("--select", action="store_true",
                    help="add [trace] steps and tensors selections to the INI")
    ap.add_argument("--blocks", action="store_true",
                    help="add GEMM layer triplets to the trace, block recipes and [analysis] "
                         "to the INI")
    ap.add_argument("--ranks", type=int, default=0,
                    help="write a multi-rank trace: DIR/rank_0 .. DIR/rank_<R-1>")
    ap.add_argument("--reduce-amax", action="store_true",
                    help="[trace] reduce_amax = true in the INI")
    ap.add_argument("--reduce-group", type=int, help="[trace] reduce_group = N in the INI")
    ap.add_argument("--reduce-stride", type=int, help="[trace] reduce_stride = S in the INI")
    ap.add_argument("--moe", type=int, default=0, metavar="E",
                    help="write a Mixture-of-Experts trace with E experts instead (with --ranks "
                         "R: expert-parallel, E/R experts per rank)")
    args = ap.parse_args(argv)
    if args.moe:
        snap_steps, gemms, _ = generate_moe(args.dir, args.seed, args.moe, args.ranks, args.npy)
        if args.ini:
            base = os.path.dirname(os.path.abspath(args.ini))
            reduce = ""
            if args.reduce_amax or args.reduce_group is not None:  # reduce_group needs it
                reduce += "reduce_amax = true\n"
            if args.reduce_group is not None:
                reduce += "reduce_group = %d\n" % args.reduce_group
            with open(args.ini, "w") as f:
                f.write(MOE_INI.format(
                    nexperts=args.moe, seed=args.seed, reduce=reduce,
                    path=os.path.relpath(os.path.abspath(args.dir), base),
                    out=os.path.relpath(os.path.abspath(args.out), base) if args.out else "out"))
        print("gen_trace: MoE, %d experts, %d snapshots, %d GEMMs%s -> %s" % (
            args.moe, len(snap_steps), len(gemms),
            ", %d ranks (expert-parallel)" % args.ranks if args.ranks else "", args.dir))
        return 0
    if args.ranks:
        snap_steps, specs, _ = generate_ranks(args.dir, args.seed, args.ranks, args.npy,
                                              args.blocks)
    else:
        snap_steps, specs, _ = generate(args.dir, args.seed, args.npy, args.blocks)
    if args.ini:
        select = None
        if args.select:
            rng = np.random.default_rng(args.seed + 1000003)
            # from the second snapshot on, every other step: drops some snapshots and csv rows
            select = "steps = %d-%d:2\ntensors = edge.*, *.grad_*, ghost*%s%s\n" % (
                snap_steps[1], snap_steps[-1] + 3, ", gemm0.*" if args.blocks else "",
                ", rank_0/*.input" if args.ranks else "")
        reduce = ""
        if args.reduce_amax or args.reduce_group is not None or args.reduce_stride is not None:
            reduce += "reduce_amax = true\n"  # reduce_group / reduce_stride need it
        if args.reduce_group is not None:
            reduce += "reduce_group = %d\n" % args.reduce_group
        if args.reduce_stride is not None:
            reduce += "reduce_stride = %d\n" % args.reduce_stride
        write_ini(args.ini, args.dir, args.seed, args.out, select, args.blocks, reduce)
    print("gen_trace: %d snapshots at steps %s, %d tensors%s%s -> %s" % (
        len(snap_steps), " ".join(map(str, snap_steps)), len(specs),
        " + %d GEMM layers" % len(GEMM_LAYERS) if args.blocks else "",
        ", %d ranks" % args.ranks if args.ranks else "", args.dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
