#!/usr/bin/env python3
"""make_corpus.py: (re)writes the seed inputs of the fuzz targets (tests/fuzz/corpus/<target>/
seed-*) from what fp8lab itself writes, kept small (the whole committed corpus well under 2 MB):

  python3 tests/fuzz/make_corpus.py build/fp8lab

- safetensors, npy, amax.csv: a tiny synthetic trace (`fp8lab synth llm`, 4 steps) cut down:
  its real headers and names, every tensor shrunk to a few elements (and F32/F16/BF16 and npy
  1.0/2.0/3.0 variants);
- experiment: the shipped experiments/*.ini, the experiment files of the small runs below and the
  advice.ini the report writes;
- steps.csv, stream.csv, histograms.csv, gemm.csv, run.json: the outputs of three small runs of
  that trace (a quickstart-like delayed/current sweep, the other recipe kinds, a mixed recipe),
  the long files cut to their first lines (the histograms and gemm readers read line by line).

Inputs named regress-* (the findings of the fuzzers) and cov-* (the long run's coverage,
docs/fuzzing.md) are never touched; every seed-* file is rewritten. Python is only the tool here: the inputs are fp8lab's own files.
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(HERE, "corpus")
TARGETS = ["safetensors", "npy", "amax_csv", "experiment", "steps_csv", "stream_csv",
           "histograms_csv", "gemm_csv", "run_json"]
ESIZE = {"F32": 4, "F16": 2, "BF16": 2}


def put(target, name, data):
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(CORPUS, target, "seed-" + name), "wb") as f:
        f.write(data)


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def micro_seeds(amax):
    """amax.csv seeds with the optional columns (issue 17), from the synthetic trace's rows:
    micro alone (each row in micro-batches 0 and 2), te_scale alone (every other row given),
    and both (micro 0, 1; te_scale 448 / amax where amax > 0, else empty)."""
    lines = amax.decode().strip("\n").split("\n")[1:]
    mic, te, both = ["step,tensor,amax,micro"], ["step,tensor,amax,te_scale"], \
        ["step,tensor,amax,micro,te_scale"]
    for i, ln in enumerate(lines):
        a = float(ln.split(",")[2])
        mic += [ln + ",0", ln + ",2"]
        te.append(ln + ("," + "%.9g" % (448.0 / a) if a > 0 and i % 2 == 0 else ","))
        both += [ln + ",0," + ("%.9g" % (448.0 / a) if a > 0 else ""), ln + ",1,"]
    put("amax_csv", "micro.csv", "\n".join(mic) + "\n")
    put("amax_csv", "te-scale.csv", "\n".join(te) + "\n")
    put("amax_csv", "micro-te-scale.csv", "\n".join(both) + "\n")


def safetensors_bytes(tensors, meta):
    """tensors: [(name, dtype, shape, data bytes)] in order, packed back to back."""
    head, off = {}, 0
    if meta is not None:
        head["__metadata__"] = meta
    for name, dtype, shape, data in tensors:
        head[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(data)]}
        off += len(data)
    h = json.dumps(head, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)  # the writer's 8-byte alignment
    return struct.pack("<Q", len(h)) + h + b"".join(t[3] for t in tensors)


def shrink(shape, cap):
    return [min(d, cap) for d in shape]


def nelem(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def safetensors_seeds(trace):
    head, data = read_safetensors(os.path.join(trace, "step_0.safetensors"))
    meta = head.pop("__metadata__", None)
    names = sorted(head)
    tensors = []
    for name in names:
        e = head[name]
        shape = shrink(e["shape"], 2)
        b = e["data_offsets"][0]
        tensors.append((name, e["dtype"], shape, data[b:b + nelem(shape) * ESIZE[e["dtype"]]]))
    put("safetensors", "synth-all.safetensors", safetensors_bytes(tensors, meta))
    put("safetensors", "synth-3.safetensors", safetensors_bytes(tensors[:3], meta))
    one = tensors[1]
    f32 = (one[0], "F32", [2, 2], struct.pack("<4f", 1.5, -448.0, 0.0, float("inf")))
    f16 = (one[0] + "x", "F16", [3], struct.pack("<3H", 0x3C00, 0x7C00, 0x0001))
    bf16 = ("lm_head.weight", "BF16", [1, 2], struct.pack("<2H", 0x3F80, 0x7FC0))
    put("safetensors", "dtypes.safetensors", safetensors_bytes([f32, f16, bf16], {"k": "v"}))
    put("safetensors", "scalar-empty.safetensors",
        safetensors_bytes([("a.input", "F32", [], struct.pack("<f", 2.0)),
                           ("b.input", "BF16", [0, 4], b"")], None))
    put("safetensors", "no-tensors.safetensors", safetensors_bytes([], {"format": "pt"}))
    return tensors


def npy_bytes(descr, shape, data, version=1):
    shp = "(" + "".join("%d, " % d for d in shape).rstrip(" ") + ")" if len(shape) != 1 \
        else "(%d,)" % shape[0]
    d = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shp)
    pre = 10 if version == 1 else 12
    pad = -(pre + len(d) + 1) % 64
    h = (d + " " * pad + "\n").encode()
    lenf = struct.pack("<H", len(h)) if version == 1 else struct.pack("<I", len(h))
    return b"\x93NUMPY" + bytes([version, 0]) + lenf + h + data


def npy_seeds():
    put("npy", "f4-2x3.npy", npy_bytes("<f4", [2, 3], struct.pack("<6f", 1, -2, 3.5, 0, 1e-8, 448)))
    put("npy", "f2-4.npy", npy_bytes("<f2", [4], struct.pack("<4H", 0x3C00, 0xFC00, 0x7E00, 1)))
    put("npy", "v2-f4.npy", npy_bytes("<f4", [1, 1, 2], struct.pack("<2f", 7, -7), version=2))
    put("npy", "v3-pipe.npy", npy_bytes("|f4", [1], struct.pack("<f", 0.25), version=3))
    put("npy", "scalar.npy", npy_bytes("=f4", [], struct.pack("<f", 3.0)))
    put("npy", "empty.npy", npy_bytes("<f2", [0, 5], b""))


def run(cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


EXPERIMENTS = {
    "quick": """# a quickstart-like sweep on a cut-down trace
[trace]
path = trace
tensors = layers.0.fc1.*
steps = 0-3

[recipe.delayed]
kind = delayed
format = hybrid
history_len = 1, 16
margin = 0, 1
amax_compute = max, most_recent

[recipe.current]
kind = current
format = hybrid

[analysis]
overflow_budget = 1e-4
step_budget = 0.05
gemm = true
gemm_max_tokens = 16

[output]
dir = out_quick
""",
    "kinds": """[trace]
path = trace
tensors = layers.0.fc1.input, layers.0.fc1.weight, layers.0.fc1.grad_output

[recipe.mx]
kind = mxfp8
scale_rounding = ceil

[recipe.deepseek]
kind = block
block = auto

[recipe.rowwise]
kind = rowwise

[recipe.cur]
kind = current
format = e4m3

[analysis]
gemm = false

[output]
dir = out_kinds
""",
    "mixed": """[trace]
path = synth:llm
synth_steps = 3
synth_seed = 7
tensors = layers.1.fc2.*

[recipe.mixed]
kind = current
format = hybrid
tensors = layers.1.fc2.output

[recipe.mixed_rest]
label = mixed
kind = delayed
format = e5m2
history_len = 4
margin = 2

[recipe.te]
kind = delayed
history_len = 1024
margin = 0
amax_compute = most_recent

[analysis]
warmup_steps = 1
gemm = true
gemm_max_tokens = 8

[output]
dir = out_mixed
""",
}


def head(path, lines):
    with open(path, "rb") as f:
        return b"".join(f.readlines()[:lines])


def left_out_seed(run_json):
    """A run.json whose lists of tensors left out (issue 17) are not empty: the synthetic trace
    has no tensor that never ran, so the quick run's lists are filled in (one name each, a
    multi-rank one among them) for the reader of those keys to start from."""
    j = json.loads(run_json)
    j["tensors_never_ran"] = ["layers.0.attn.out_proj.input", "rank_1/layers.0.attn.out_proj.input"]
    j["tensors_without_snapshot"] = ["layers.0.extra.input"]
    j["tensors_without_recipe"] = ["layers.1.fc2.weight"]
    return (json.dumps(j, indent=2) + "\n").encode()


def te_log_seed(run_json):
    """A run.json of a trace from TE's debug logs whose tensors were logged at intervals of
    their own (issue 41): trace.te_log with tensor_intervals (2, 5, and 0 for one iteration),
    for the reader of that key to start from."""
    j = json.loads(run_json)
    j["trace"]["te_log"] = {"interval": 1, "zero_values": 0, "coarse_values": 2,
                            "tensor_intervals": {"layers.0.attn.qkv.input": 2,
                                                 "layers.0.attn.qkv.grad_output": 2,
                                                 "layers.0.attn.qkv.weight": 5,
                                                 "layers.0.attn.out_proj.output": 0}}
    return (json.dumps(j, indent=2) + "\n").encode()


def output_seeds(fp8lab, tmp):
    for name, text in EXPERIMENTS.items():
        ini = os.path.join(tmp, name + ".ini")
        with open(ini, "w") as f:
            f.write(text)
        put("experiment", name + ".ini", text)
        run([fp8lab, "run", ini, "--force", "--quiet", "--threads", "1"])
        out = os.path.join(tmp, "out_" + name)
        steps = os.path.join(out, "steps.csv")
        put("steps_csv", name + ".csv", open(steps, "rb").read())
        if os.path.exists(os.path.join(out, "stream.csv")):
            put("stream_csv", name + ".csv", open(os.path.join(out, "stream.csv"), "rb").read())
        put("histograms_csv", name + ".csv", head(os.path.join(out, "histograms.csv"), 60))
        if os.path.exists(os.path.join(out, "gemm.csv")):
            put("gemm_csv", name + ".csv", head(os.path.join(out, "gemm.csv"), 60))
        put("run_json", name + ".json", open(os.path.join(out, "run.json"), "rb").read())
        if name == "quick":
            put("run_json", "leftout.json", left_out_seed(open(os.path.join(out, "run.json"), "rb").read()))
            put("run_json", "te-intervals.json",
                te_log_seed(open(os.path.join(out, "run.json"), "rb").read()))
        if os.path.exists(os.path.join(out, "advice.ini")):
            put("experiment", name + "-advice.ini", open(os.path.join(out, "advice.ini")).read())


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_corpus.py FP8LAB_BINARY")
    fp8lab = os.path.abspath(sys.argv[1])
    for t in TARGETS:
        d = os.path.join(CORPUS, t)
        os.makedirs(d, exist_ok=True)
        for f in os.listdir(d):
            if f.startswith("seed-"):
                os.remove(os.path.join(d, f))
    tmp = tempfile.mkdtemp(prefix="fp8lab-corpus-")
    try:
        trace = os.path.join(tmp, "trace")
        run([fp8lab, "synth", "llm", trace, "--steps", "4", "--seed", "1"])
        safetensors_seeds(trace)
        npy_seeds()
        put("amax_csv", "synth.csv", head(os.path.join(trace, "amax.csv"), 40))
        crlf = head(os.path.join(trace, "amax.csv"), 6).replace(b"\n", b"\r\n")
        put("amax_csv", "crlf.csv", crlf)
        micro_seeds(head(os.path.join(trace, "amax.csv"), 12))
        for f in sorted(os.listdir(os.path.join(ROOT, "experiments"))):
            if f.endswith(".ini"):
                put("experiment", f, open(os.path.join(ROOT, "experiments", f)).read())
        output_seeds(fp8lab, tmp)
    finally:
        shutil.rmtree(tmp)
    total = sum(os.path.getsize(os.path.join(dp, f))
                for dp, _, fs in os.walk(CORPUS) for f in fs)
    print("corpus: %d bytes in %s" % (total, CORPUS))


if __name__ == "__main__":
    main()
