"""The common part of the tests of tools/capture (tests/tools/capture/test_capture_*.py): torch
(when the running interpreter lacks it, the test re-runs itself with /usr/bin/python3, Debian's
python3-torch, if that one has it; exit 77, "skipped: torch not importable", when neither
does), an independent safetensors and amax.csv reader, the small models and runs of fp8lab the
tests share, the registry of tests (@test) and main(), which runs the tests the importing file
registered, each in a temporary folder.
"""

import json
import os
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
CAPTURE = os.path.join(ROOT, "tools", "capture")
sys.path.insert(0, os.path.join(ROOT, "tests", "common"))
from pycommon import run_tests, test, with_system_python  # noqa: E402,F401

try:
    import torch
    import torch.nn as nn
except ImportError:
    with_system_python("torch", "torch not importable (make tiny-gpt installs Debian's python3-torch)")

sys.path.insert(0, os.path.join(ROOT, "python"))  # the package fp8lab, from the checkout
import fp8lab.capture as fp8lab_capture  # noqa: E402
import fp8lab.te_dumps as convert_te_dumps  # noqa: E402

BIN = os.path.abspath(sys.argv[1]) if len(sys.argv) == 2 else None  # main() checks the usage


# ------------------------------------------------------------------ helpers
def read_safetensors(path):
    """An independent reader: {name: tensor} and the metadata."""
    with open(path, "rb") as f:
        buf = f.read()
    (n,) = struct.unpack("<Q", buf[:8])
    assert (8 + n) % 8 == 0, "header not padded to 8 bytes: %d" % n
    header = json.loads(buf[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    dt = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}
    out = {}
    for name, e in header.items():
        b, en = e["data_offsets"]
        raw = bytearray(buf[8 + n + b:8 + n + en])
        t = torch.frombuffer(raw, dtype=dt[e["dtype"]]) if raw else \
            torch.empty(0, dtype=dt[e["dtype"]])
        out[name] = (e["dtype"], t.reshape(e["shape"]))
    return out, meta


def read_amax_csv(path, micro=False):
    """{(step, tensor): amax text} of an amax.csv (`step,tensor,amax[,micro][,te_scale]`),
    the rows of micro-batch 0; with micro=True every row as
    {(step, tensor, micro): (amax text, te_scale text or None)}."""
    rows, full = {}, {}
    with open(path) as f:
        head = f.readline().rstrip("\n").split(",")
        assert head[:3] == ["step", "tensor", "amax"] and set(head[3:]) <= {"micro", "te_scale"},\
            head
        for line in f:
            v = dict(zip(head, line.rstrip("\n").split(",")))
            assert len(v) == len(head) and line.count(",") == len(head) - 1, line
            m = int(v.get("micro", "0"))
            key = (int(v["step"]), v["tensor"], m)
            assert key not in full, "duplicate row %s" % (key,)
            full[key] = (v["amax"], v.get("te_scale"))
            if m == 0:
                rows[key[:2]] = v["amax"]
    return full if micro else rows


def ref_amax(t):
    """max |x| over non-NaN elements, inf counts, 0 when empty/all-NaN; as a float32 value."""
    x = t.detach().float().reshape(-1)
    x = x[~torch.isnan(x)]
    return 0.0 if x.numel() == 0 else float(x.abs().max())


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.returncode, p.stdout


def inspect_ok(trace, names):
    rc, out = run([BIN, "inspect", trace])
    assert rc == 0, "fp8lab inspect %s: rc %d\n%s" % (trace, rc, out)
    for n in names:
        assert n in out, "fp8lab inspect does not list %s:\n%s" % (n, out)
    return out


def replay_ok(trace, tmp):
    """fp8lab run on the trace: exit 0, rows written, no amax.csv mismatch warning."""
    ini = os.path.join(tmp, "replay.ini")
    with open(ini, "w") as f:
        f.write("[trace]\npath = %s\n[recipe.d]\nkind = delayed\nhistory_len = 1, 4\n"
                "[recipe.c]\nkind = current\n[output]\ndir = %s\n"
                % (trace, os.path.join(tmp, "replay_out")))
    rc, out = run([BIN, "run", ini, "--quiet", "--force"])
    assert rc == 0, "fp8lab run: rc %d\n%s" % (rc, out)
    assert "mismatch" not in out, out
    with open(os.path.join(tmp, "replay_out", "run.json")) as f:
        assert json.load(f)["amax_csv_mismatches"] == 0


class Net(nn.Module):
    """Two blocks of fc1 -> relu -> fc2 plus an optional branch that runs on demand."""

    def __init__(self, d=8, dtype=torch.float32):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Sequential() for _ in range(2)])
        for b in self.blocks:
            b.add_module("fc1", nn.Linear(d, 2 * d))
            b.add_module("act", nn.ReLU())
            b.add_module("fc2", nn.Linear(2 * d, d))
        self.extra = nn.Linear(d, d)
        self.to(dtype)
        self.use_extra = False

    def forward(self, x):
        for b in self.blocks:
            x = x + b(x)
        if self.use_extra:
            x = self.extra(x)
        return x


def train_steps(model, rec, steps, d=8, dtype=torch.float32, seed=0, start=0, hook=None):
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for s in range(start, start + steps):
        x = torch.randn(4, 3, d, generator=g).to(dtype)
        if hook:
            x = hook(s, x)
        loss = model(x).float().pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.step(s)


def hooks_empty(model):
    """None when the Recorder left nothing behind: no module hook, F.linear is torch's own and
    no TorchFunctionMode is active."""
    for name, m in model.named_modules():
        for attr in ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks"):
            d = getattr(m, attr, None)
            if d:
                return "%s.%s not empty" % (name or "root", attr)
    if torch.nn.functional.linear is not ORIG_LINEAR:
        return "torch.nn.functional.linear is still replaced"
    if torch.overrides.has_torch_function((torch.zeros(1),)):
        return "a torch function mode is still active"
    return None


ORIG_LINEAR = torch.nn.functional.linear
FOUR = ("input", "weight", "output", "grad_output")  # the default roles plus output


# ------------------------------------------------------------------ issue 17: every GEMM
def _snap(trace, step):
    t, _ = read_safetensors(os.path.join(trace, "step_%d.safetensors" % step))
    return {n: v for n, (dt, v) in t.items()}


def _close(a, b, what, rtol=1e-5):
    assert a.shape == b.shape, (what, tuple(a.shape), tuple(b.shape))
    err = float((a.float() - b.float()).abs().max()) if a.numel() else 0.0
    tol = rtol * max(1e-30, float(b.float().abs().max()) if b.numel() else 0.0)
    assert err <= tol, "%s: max |diff| %g > %g" % (what, err, tol)


def main():
    global BIN
    if len(sys.argv) != 2:
        print("usage: %s FP8LAB_BIN" % os.path.basename(sys.argv[0]), file=sys.stderr)
        return 2
    BIN = os.path.abspath(sys.argv[1])
    torch.set_num_threads(1)
    return run_tests("fp8lab_capture_")
