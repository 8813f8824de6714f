#!/usr/bin/env python3
"""fp8lab.te_dumps: TransformerEngine `DumpTensors` dumps -> an fp8lab trace.

(tools/capture/convert_te_dumps.py until issue 43.)

TransformerEngine's precision debug tools (nvidia-dlframework-inspect with the
`transformer_engine.DumpTensors` feature) save tensors with torch.save. The layout assumed here
is the one of TE's `transformer_engine/debug/features/dump_tensors.py` (TE 2.x, read from its
source; TE's docs were not at hand, so check it against your TE version):

    <log_dir>/tensor_dumps/rank_<r>/<layer>_<tensor>_iter_<NNNNNN>.pt

- <layer>: the layer name TE's debug API was given (e.g. `decoder.layers.3.mlp.fc1`), with
  / \\ : * ? " < > | and spaces replaced by `_` (so such characters cannot be recovered);
- <tensor>: activation, gradient, weight, output, wgrad or dgrad;
- <NNNNNN>: the iteration (training step), zero-padded to 6 digits (more digits are accepted);
- each file holds a dict: `high_precision` (the tensor before quantization, when
  high_precision_tensor: True), `quantized` (a TE QuantizedTensor, needs TE to unpickle) and,
  with dump_quantized_internals, raw FP8 data and scales. Only `high_precision` is used; a file
  holding a bare tensor is accepted as that tensor.

TE tensor names map to fp8lab roles: activation -> input, weight -> weight, output -> output,
gradient -> grad_output, dgrad -> grad_input; wgrad (the weight gradient, no fp8lab role) is
skipped unless --keep-wgrad (then named `<layer>.wgrad`, which needs an explicit
`format = e4m3|e5m2` in the experiment). fp8lab tensor name: `<layer>.<role>`.

Output: for each iteration with at least one tensor, `step_<N>.safetensors` (BF16/F16/F32 kept,
other dtypes as F32) and `amax.csv` rows for the tensors of that step (fp8lab's amax rules;
tensors not dumped at a step have no row, so fp8lab treats them as "did not run" there: dump all
tensors with the same freq). Ranks: with one rank directory (or --rank R) the trace goes
directly into OUT; with several, into OUT/rank_<r>/ (the Recorder's layout).

To adapt to another layout, change FILE_RE (it must yield layer, tensor and iteration) and/or
ROLE_OF, or `find_dump_files()`, which returns {rank: [(iteration, layer, te_tensor, path)]}.

Usage: python -m fp8lab.te_dumps DUMP_DIR OUT [--rank R] [--keep-wgrad] [--overwrite] [--trust]
DUMP_DIR: the nvdlfw_inspect log dir, its tensor_dumps/ folder, or one rank_<r>/ folder.
Files are read with torch.load(weights_only=True) (tensors and plain containers only, torch's
default since 2.6); a dict that also holds TE's QuantizedTensor objects is refused with a line
naming the file unless --trust, which unpickles it in full (arbitrary code: only your own
dumps; TE must be importable). Tested with torch 1.13 and 2.15.
"""
import argparse
import os
import re
import sys

try:
    import torch
except ImportError as _e:  # the optional dependency: say how to get it
    raise ImportError("fp8lab.te_dumps needs PyTorch (torch >= 1.13): pip install "
                      "\"fp8lab[capture]\" (or torch) into this environment (%s)" % _e) from _e

if __package__:
    from . import capture as fp8lab_capture
else:  # run as a file (python python/fp8lab/te_dumps.py): its folder holds capture.py
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import capture as fp8lab_capture  # noqa: E402

TE_TENSORS = ("activation", "gradient", "weight", "output", "wgrad", "dgrad")
ROLE_OF = {"activation": "input", "weight": "weight", "output": "output",
           "gradient": "grad_output", "dgrad": "grad_input", "wgrad": "wgrad"}
FILE_RE = re.compile(r"^(?P<layer>.+)_(?P<tensor>%s)_iter_(?P<iter>\d+)\.pt$" %
                     "|".join(TE_TENSORS))
RANK_RE = re.compile(r"^rank_(\d+)$")


def _rank_dirs(root):
    """{rank: directory} for DUMP_DIR given as log dir, tensor_dumps/ or rank_<r>/."""
    if os.path.isdir(os.path.join(root, "tensor_dumps")):
        root = os.path.join(root, "tensor_dumps")
    m = RANK_RE.match(os.path.basename(os.path.normpath(root)))
    if m:
        return {int(m.group(1)): root}
    ranks = {}
    for d in os.listdir(root):
        m = RANK_RE.match(d)
        if m and os.path.isdir(os.path.join(root, d)):
            ranks[int(m.group(1))] = os.path.join(root, d)
    if not ranks:  # .pt files directly in root: one unnamed rank
        ranks[0] = root
    return ranks


def find_dump_files(root):
    """{rank: [(iteration, layer, te_tensor, path)]} sorted by iteration, layer, tensor."""
    out = {}
    for rank, d in sorted(_rank_dirs(root).items()):
        files = []
        for f in os.listdir(d):
            m = FILE_RE.match(f)
            if m:
                files.append((int(m.group("iter")), m.group("layer"), m.group("tensor"),
                              os.path.join(d, f)))
        out[rank] = sorted(files)
    return out


def _torch_load(path, trust):
    """torch.load with weights_only=True (plain tensors and containers only, the default of
    torch >= 2.6); a file that needs more (TE's QuantizedTensor objects under `quantized`) is
    refused with a ValueError naming it, unless `trust` (--trust: the files are yours), which
    unpickles it in full (TE must then be importable for its classes)."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except TypeError:  # a torch without weights_only (< 1.13): not supported
        raise ValueError("%s: this torch.load has no weights_only (torch >= 1.13 needed)" % path)
    except Exception as e:  # pickle.UnpicklingError, RuntimeError, EOFError ...
        if not trust:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            first = re.sub(r"\x1b\[[0-9;]*[A-Za-z]|[\x00-\x1f\x7f]", "", first)
            raise ValueError("%s: torch.load(weights_only=True) refused it (%s); if you trust "
                             "these files, rerun with --trust" % (path, first[:200]))
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except Exception as e:
        raise ValueError("%s: cannot be unpickled: %s: %s" % (path, type(e).__name__,
                                                           str(e).strip()[:200]))


def _load_tensor(path, trust=False):
    obj = _torch_load(path, trust)
    if isinstance(obj, torch.Tensor):
        return obj
    if isinstance(obj, dict):
        t = obj.get("high_precision")
        if isinstance(t, torch.Tensor):
            return t
        raise ValueError("%s: no 'high_precision' tensor (keys: %s); dump with "
                         "high_precision_tensor: True" % (path, sorted(map(str, obj))))
    raise ValueError("%s: holds %s, expected a dict or a tensor" % (path, type(obj).__name__))


def convert_rank(files, out, keep_wgrad=False, overwrite=False, trust=False):
    """Writes one rank's files as a trace in `out`; returns (steps, tensors written)."""
    os.makedirs(out, exist_ok=True)
    ours = [f for f in os.listdir(out) if (f.startswith("step_") and
            f.endswith(".safetensors")) or f == "amax.csv"]
    if ours and not overwrite:
        raise FileExistsError("%s already holds a trace (%s, ...); use --overwrite" %
                              (out, sorted(ours)[0]))
    for f in ours:
        os.remove(os.path.join(out, f))
    by_iter = {}
    for it, layer, te, path in files:
        if te == "wgrad" and not keep_wgrad:
            continue
        by_iter.setdefault(it, []).append(("%s.%s" % (layer, ROLE_OF[te]), path))
    rows = ["step,tensor,amax\n"]
    ntensors = 0
    for it in sorted(by_iter):
        tensors = {}
        for name, path in by_iter[it]:
            if name in tensors:
                raise ValueError("step %d: tensor %s given twice (%s)" % (it, name, path))
            tensors[name] = _load_tensor(path, trust)
        for name in sorted(tensors):
            rows.append("%d,%s,%s\n" % (it, name, fp8lab_capture._fmt_amax(
                fp8lab_capture.amax_of(tensors[name]).item())))
        fp8lab_capture.write_safetensors(os.path.join(out, "step_%d.safetensors" % it), tensors,
                                         metadata={"producer": "convert_te_dumps", "step": it})
        ntensors += len(tensors)
    tmp = os.path.join(out, "amax.csv.tmp.%d" % os.getpid())
    with open(tmp, "w") as f:
        f.write("".join(rows))
    os.replace(tmp, os.path.join(out, "amax.csv"))
    return len(by_iter), ntensors


def convert(dump_dir, out, rank=None, keep_wgrad=False, overwrite=False, trust=False):
    """Converts a DumpTensors directory; returns {rank: (output dir, steps, tensors)}."""
    found = find_dump_files(dump_dir)
    if rank is not None:
        if rank not in found:
            raise ValueError("%s: no rank_%d (ranks: %s)" % (dump_dir, rank, sorted(found)))
        found = {rank: found[rank]}
    result = {}
    for r, files in found.items():
        if not files:
            raise ValueError("%s: rank %d: no <layer>_<tensor>_iter_<N>.pt files" % (dump_dir, r))
        d = out if len(found) == 1 else os.path.join(out, "rank_%d" % r)
        steps, n = convert_rank(files, d, keep_wgrad, overwrite, trust)
        result[r] = (d, steps, n)
    return result


def main(argv=None):
    ap = argparse.ArgumentParser(description="Convert TransformerEngine DumpTensors dumps "
                                 "into an fp8lab trace (layout: see the module docstring).")
    ap.add_argument("dump_dir")
    ap.add_argument("out")
    ap.add_argument("--rank", type=int, default=None, help="convert this rank only, into OUT")
    ap.add_argument("--keep-wgrad", action="store_true", help="also write <layer>.wgrad")
    ap.add_argument("--overwrite", action="store_true", help="replace a trace in OUT")
    ap.add_argument("--trust", action="store_true",
                    help="unpickle files that torch.load(weights_only=True) refuses (TE's "
                    "quantized tensors): only for dumps you trust")
    a = ap.parse_args(argv)
    try:
        res = convert(a.dump_dir, a.out, a.rank, a.keep_wgrad, a.overwrite, a.trust)
    except (OSError, ValueError) as e:
        print("convert_te_dumps: %s" % e, file=sys.stderr)
        return 2
    for r, (d, steps, n) in sorted(res.items()):
        print("rank %d: %d steps, %d tensors -> %s" % (r, steps, n, d))
    return 0


if __name__ == "__main__":
    sys.exit(main())
