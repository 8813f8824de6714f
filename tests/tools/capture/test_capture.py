#!/usr/bin/env python3
"""Tests of tools/capture (fp8lab_capture.Recorder and convert_te_dumps.py) against fp8lab.

Small models on the CPU are recorded and the results checked: the traces load in
`fp8lab inspect` and replay in `fp8lab run` without amax.csv mismatches; amax.csv equals max |x|
(fp8lab's rules: NaN ignored, inf counts) of the tensors read back from the snapshots by an
independent reader below; BF16 stays BF16; hooks are gone after the `with` block, also after an
exception; a module that did not run and a step without backward give amax 0 rows; several
calls of a module in a step; the rank_<r>/ layout; TE DumpTensors dumps round-trip through
convert_te_dumps.py bit for bit.

Usage: test_capture.py FP8LAB_BIN. Needs torch >= 1.13: when the running interpreter lacks it,
the test re-runs itself with /usr/bin/python3 (Debian's python3-torch) if that one has it;
exit 77 ("skipped: torch not importable") when neither does. Last line: "N passed, M failed".
"""
import contextlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import traceback
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
CAPTURE = os.path.join(ROOT, "tools", "capture")
SYSTEM_PYTHON = "/usr/bin/python3"

try:
    import torch
    import torch.nn as nn
except ImportError:
    if (os.path.realpath(sys.executable) != os.path.realpath(SYSTEM_PYTHON)
            and os.path.exists(SYSTEM_PYTHON)
            and subprocess.run([SYSTEM_PYTHON, "-c", "import torch"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0):
        os.execv(SYSTEM_PYTHON, [SYSTEM_PYTHON] + sys.argv)
    print("skipped: torch not importable (make tiny-gpt installs Debian's python3-torch)")
    sys.exit(77)

sys.path.insert(0, CAPTURE)
import fp8lab_capture  # noqa: E402
import convert_te_dumps  # noqa: E402

BIN = None
RESULTS = []


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


def f32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]


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


def test(fn):
    RESULTS.append(fn)
    return fn


# ------------------------------------------------------------------ tests
@test
def recorder_amax_matches_snapshots(tmp):
    """Every snapshot tensor's max |x| equals its amax.csv row; all steps and tensors have a
    row; snapshots at multiples of every (step 0 included); fp8lab reads and replays it."""
    torch.manual_seed(0)
    model = Net()
    trace = os.path.join(tmp, "t")
    with fp8lab_capture.Recorder(model, trace, modules="blocks.*.fc1,*.fc2", every=3, roles=FOUR) as rec:
        train_steps(model, rec, 8)
    names = ["blocks.%d.%s.%s" % (i, m, r) for i in range(2) for m in ("fc1", "fc2")
             for r in ("input", "weight", "output", "grad_output")]
    assert sorted(rec.names) == sorted(names), rec.names
    files = sorted(f for f in os.listdir(trace))
    assert files == ["amax.csv", "step_0.safetensors", "step_3.safetensors",
                     "step_6.safetensors"], files
    rows = read_amax_csv(os.path.join(trace, "amax.csv"))
    assert set(rows) == {(s, n) for s in range(8) for n in names}, "rows missing"
    for s in (0, 3, 6):
        tensors, meta = read_safetensors(os.path.join(trace, "step_%d.safetensors" % s))
        assert sorted(tensors) == sorted(names), sorted(tensors)
        assert meta.get("step") == str(s), meta
        for n, (dt, t) in tensors.items():
            assert dt == "F32", (n, dt)
            want = "%.9g" % ref_amax(t) if ref_amax(t) else "0"
            assert rows[(s, n)] == want, (s, n, rows[(s, n)], want)
            assert float(rows[(s, n)]) > 0, (s, n)
    # shapes: Linear input [4,3,8], weight [16,8], output [4,3,16]
    assert tuple(tensors["blocks.0.fc1.input"][1].shape) == (4, 3, 8)
    assert tuple(tensors["blocks.0.fc1.weight"][1].shape) == (16, 8)
    assert tuple(tensors["blocks.0.fc1.grad_output"][1].shape) == (4, 3, 16)
    # the amax text round-trips float32
    for v in rows.values():
        assert v == "0" or "%.9g" % f32(float(v)) == v, v
    inspect_ok(trace, names)
    replay_ok(trace, tmp)


@test
def recorder_captures_the_right_tensors(tmp):
    """The snapshot holds exactly the tensors the module saw: input/output against a manual
    forward, weight against the parameter before the optimizer step, grad_output against
    autograd."""
    torch.manual_seed(1)
    lin = nn.Linear(5, 7)
    model = nn.Sequential()
    model.add_module("lin", lin)
    x = torch.randn(6, 5, requires_grad=True)
    w0 = lin.weight.detach().clone()
    with fp8lab_capture.Recorder(model, os.path.join(tmp, "t"), every=1, roles=FOUR) as rec:
        y = model(x)
        y.retain_grad()
        (y * torch.arange(7.0)).sum().backward()
        with torch.no_grad():
            lin.weight.add_(1.0)  # an "optimizer step" before rec.step
        rec.step(0)
    t, _ = read_safetensors(os.path.join(tmp, "t", "step_0.safetensors"))
    assert torch.equal(t["lin.input"][1], x.detach())
    assert torch.equal(t["lin.weight"][1], w0)
    assert torch.equal(t["lin.output"][1], y.detach())
    assert torch.equal(t["lin.grad_output"][1], y.grad)


@test
def bf16_stays_bf16(tmp):
    """A BF16 model gives BF16 activations, weights and gradients in the snapshot, and amaxes
    equal to the BF16 values'."""
    torch.manual_seed(2)
    model = Net(dtype=torch.bfloat16)
    trace = os.path.join(tmp, "t")
    with fp8lab_capture.Recorder(model, trace, modules="*", every=2) as rec:
        train_steps(model, rec, 3, dtype=torch.bfloat16)
    tensors, _ = read_safetensors(os.path.join(trace, "step_2.safetensors"))
    rows = read_amax_csv(os.path.join(trace, "amax.csv"))
    assert tensors, "empty snapshot"
    for n, (dt, t) in tensors.items():
        assert dt == "BF16", (n, dt)
        assert rows[(2, n)] == "%.9g" % ref_amax(t), (n, rows[(2, n)], ref_amax(t))
    out = inspect_ok(trace, ["blocks.0.fc1.input"])
    assert "BF16" in out, out
    replay_ok(trace, tmp)


@test
def f16_kept_and_f64_converted(tmp):
    """write_safetensors keeps F16 and writes float64 as F32 (both writers agree)."""
    a = torch.randn(3, 4).half()
    b = torch.randn(2, 5, dtype=torch.float64)
    c = torch.tensor(2.5)  # 0-d
    p = os.path.join(tmp, "x.safetensors")
    fp8lab_capture.write_safetensors(p, {"m.input": a, "m.weight": b, "m.output": c},
                                     use_package=False)
    t, _ = read_safetensors(p)
    assert t["m.input"][0] == "F16" and torch.equal(t["m.input"][1], a)
    assert t["m.weight"][0] == "F32" and torch.equal(t["m.weight"][1], b.float())
    assert t["m.output"][0] == "F32" and tuple(t["m.output"][1].shape) == ()
    try:
        import safetensors.torch  # noqa: F401
    except ImportError:
        return
    q = os.path.join(tmp, "y.safetensors")
    fp8lab_capture.write_safetensors(q, {"m.input": a, "m.weight": b, "m.output": c})
    u, _ = read_safetensors(q)
    for k in t:
        assert t[k][0] == u[k][0] and torch.equal(t[k][1], u[k][1]), k


@test
def nan_and_inf_follow_fp8lab(tmp):
    """NaN elements are ignored, inf counts, an all-NaN tensor has amax 0; fp8lab agrees."""
    torch.manual_seed(3)
    lin = nn.Linear(4, 4)
    model = nn.Sequential()
    model.add_module("lin", lin)
    nan, inf = float("nan"), float("inf")
    inputs = [torch.tensor([[1.0, nan, -3.0, 2.0]]), torch.tensor([[nan] * 4]),
              torch.tensor([[1.0, -inf, nan, 0.5]]), torch.zeros(0, 4)]
    trace = os.path.join(tmp, "t")
    with fp8lab_capture.Recorder(model, trace, every=1, roles=("input",)) as rec:
        with torch.no_grad():
            for s, x in enumerate(inputs):
                model(x)
                rec.step(s)
    rows = read_amax_csv(os.path.join(trace, "amax.csv"))
    assert [rows[(s, "lin.input")] for s in range(4)] == ["3", "0", "inf", "0"], rows
    assert fp8lab_capture._fmt_amax(fp8lab_capture.amax_of(inputs[0]).item()) == "3"
    assert fp8lab_capture.amax_of(inputs[1].bfloat16()).item() == 0.0
    assert fp8lab_capture.amax_of(inputs[2].half()).item() == inf
    inspect_ok(trace, ["lin.input"])
    replay_ok(trace, tmp)


@test
def module_not_run_and_no_backward_give_zero(tmp):
    """A module that did not run: amax 0 for all its roles, absent from the snapshot. A step
    without backward (eval mode, no_grad): grad_output 0, the forward roles recorded."""
    torch.manual_seed(4)
    model = Net()
    trace = os.path.join(tmp, "t")
    with fp8lab_capture.Recorder(model, trace, modules="*", every=2, roles=FOUR) as rec:
        train_steps(model, rec, 2)           # steps 0, 1: extra does not run
        model.use_extra = True
        train_steps(model, rec, 1, start=2)  # step 2: extra runs
        model.eval()
        with torch.no_grad():
            model(torch.randn(2, 8))
        rec.step(3)                          # step 3: forward only, in eval mode
        rec.step(4)                          # step 4: nothing ran at all
    rows = read_amax_csv(os.path.join(trace, "amax.csv"))
    for r in ("input", "weight", "output", "grad_output"):
        assert rows[(0, "extra." + r)] == "0" and rows[(1, "extra." + r)] == "0", r
        assert rows[(2, "extra." + r)] != "0", r
        assert rows[(4, "extra." + r)] == "0", r
        assert (rows[(3, "blocks.1.fc2." + r)] == "0") == (r == "grad_output"), r
    assert rows[(3, "blocks.0.fc1.input")] != "0"
    assert rows[(3, "blocks.0.fc1.grad_output")] == "0"
    s0, _ = read_safetensors(os.path.join(trace, "step_0.safetensors"))
    s2, _ = read_safetensors(os.path.join(trace, "step_2.safetensors"))
    s4, _ = read_safetensors(os.path.join(trace, "step_4.safetensors"))
    assert not any(n.startswith("extra.") for n in s0), sorted(s0)
    assert "extra.grad_output" in s2
    assert s4 == {}, sorted(s4)
    inspect_ok(trace, ["extra.input", "blocks.0.fc1.grad_output"])
    replay_ok(trace, tmp)


@test
def paused_ignores_calls(tmp):
    """Calls inside rec.paused() are not recorded."""
    model = Net()
    trace = os.path.join(tmp, "t")
    with fp8lab_capture.Recorder(model, trace, modules="blocks.0.fc1", every=1) as rec:
        with rec.paused(), torch.no_grad():
            model(torch.randn(2, 8))
        rec.step(0)
    rows = read_amax_csv(os.path.join(trace, "amax.csv"))
    assert all(v == "0" for v in rows.values()), rows


@test
def several_calls_in_a_step(tmp):
    """A module called 3 times in a step (weight sharing): amax = max over the calls; the
    snapshot holds the calls concatenated as (-1, last dim), so its amax equals the row."""
    torch.manual_seed(5)
    lin = nn.Linear(6, 6)
    model = nn.Sequential()
    model.add_module("shared", lin)
    xs = [torch.randn(2, 6), 10 * torch.randn(3, 6), torch.randn(1, 2, 6)]
    trace = os.path.join(tmp, "t")
    with fp8lab_capture.Recorder(model, trace, every=1) as rec:
        outs = []
        for x in xs:
            outs.append(model(x))
        sum(o.sum() for o in outs).backward()
        rec.step(0)
    t, _ = read_safetensors(os.path.join(trace, "step_0.safetensors"))
    rows = read_amax_csv(os.path.join(trace, "amax.csv"))
    assert tuple(t["shared.input"][1].shape) == (7, 6), t["shared.input"][1].shape
    assert torch.equal(t["shared.input"][1], torch.cat([x.reshape(-1, 6) for x in xs]))
    assert tuple(t["shared.weight"][1].shape) == (6, 6)  # read once per step
    assert tuple(t["shared.grad_output"][1].shape) == (7, 6)
    for n, (dt, v) in t.items():
        assert rows[(0, n)] == "%.9g" % ref_amax(v), (n, rows[(0, n)], ref_amax(v))
    assert rows[(0, "shared.input")] == "%.9g" % max(ref_amax(x) for x in xs)
    replay_ok(trace, tmp)


@test
def hooks_removed_on_exit_and_on_exception(tmp):
    model = Net()
    with fp8lab_capture.Recorder(model, os.path.join(tmp, "a"), every=1) as rec:
        assert hooks_empty(model) is not None, "nothing installed"
        train_steps(model, rec, 2)
    assert hooks_empty(model) is None, hooks_empty(model)
    try:
        with fp8lab_capture.Recorder(model, os.path.join(tmp, "b"), every=1) as rec:
            train_steps(model, rec, 2)
            model(torch.randn(2, 8))  # an unfinished step
            raise KeyError("boom")
    except KeyError:
        pass
    else:
        raise AssertionError("the exception was swallowed")
    assert hooks_empty(model) is None, hooks_empty(model)
    # the completed steps are kept: amax.csv renamed into place, rows of steps 0 and 1 only
    rows = read_amax_csv(os.path.join(tmp, "b", "amax.csv"))
    assert {s for s, _ in rows} == {0, 1}, sorted(rows)
    assert not os.path.exists(os.path.join(tmp, "b", "amax.csv.partial"))
    # close() is idempotent and the model trains as before
    rec.close()
    model(torch.randn(2, 8)).sum().backward()


@test
def steps_must_increase_and_existing_trace_refused(tmp):
    model = Net()
    trace = os.path.join(tmp, "t")
    with fp8lab_capture.Recorder(model, trace, every=2) as rec:
        train_steps(model, rec, 1)
        for bad in (0, -1):
            try:
                rec.step(bad)
            except ValueError:
                pass
            else:
                raise AssertionError("step %d accepted" % bad)
        # a skipped prediction: step 4 (a snapshot step) arrives when 1 was expected
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            train_steps(model, rec, 1, start=4)
        assert any("snapshot is skipped" in str(x.message) for x in w), [str(x.message) for x in w]
    assert not os.path.exists(os.path.join(trace, "step_4.safetensors"))
    try:
        fp8lab_capture.Recorder(model, trace)
    except FileExistsError:
        pass
    else:
        raise AssertionError("an existing trace was overwritten")
    assert hooks_empty(model) is None
    with fp8lab_capture.Recorder(model, trace, overwrite=True, every=1) as rec:
        train_steps(model, rec, 1)
    assert sorted(os.listdir(trace)) == ["amax.csv", "step_0.safetensors"]
    try:
        fp8lab_capture.Recorder(model, os.path.join(tmp, "u"), modules="nothing.*")
    except ValueError:
        pass
    else:
        raise AssertionError("a glob matching nothing was accepted")


@test
def rank_layout_under_torch_distributed(tmp):
    """With torch.distributed initialised (gloo, world size 1) the trace goes to rank_0/."""
    import torch.distributed as dist
    if not dist.is_available():
        print("    (torch.distributed not available: not checked)")
        return
    dist.init_process_group("gloo", init_method="file://" + os.path.join(tmp, "store"),
                            rank=0, world_size=1)
    try:
        model = Net()
        with fp8lab_capture.Recorder(model, os.path.join(tmp, "t"), every=1) as rec:
            train_steps(model, rec, 1)
        assert rec.path == os.path.join(tmp, "t", "rank_0"), rec.path
        assert sorted(os.listdir(os.path.join(tmp, "t"))) == ["rank_0"]
        inspect_ok(rec.path, ["blocks.0.fc1.input"])
    finally:
        dist.destroy_process_group()


@test
def te_dump_round_trip(tmp):
    """A synthetic DumpTensors directory (2 ranks, dicts with high_precision, a bare tensor,
    BF16 and F32, wgrad) converts into traces whose tensors equal the dumped ones bit for bit."""
    torch.manual_seed(6)
    root = os.path.join(tmp, "log", "tensor_dumps")
    layers = ["decoder.layers.0.self_attention.linear_qkv", "decoder.layers.0.mlp.linear_fc1"]
    te_roles = {"activation": "input", "weight": "weight", "output": "output",
                "gradient": "grad_output", "dgrad": "grad_input"}
    want = {}
    for rank in (0, 1):
        d = os.path.join(root, "rank_%d" % rank)
        os.makedirs(d)
        for it in (0, 5, 10):
            for layer in layers:
                for te in list(te_roles) + ["wgrad"]:
                    dtype = torch.float32 if te in ("weight", "wgrad") else torch.bfloat16
                    t = (torch.randn(4, 6) * (it + 1)).to(dtype)
                    if te == "output" and it == 5:
                        t[0, 0] = float("nan")
                    obj = t if te == "dgrad" else {"high_precision": t,
                                                   "quantized": torch.zeros(1)}
                    torch.save(obj, os.path.join(d, "%s_%s_iter_%06d.pt" % (layer, te, it)))
                    if te != "wgrad":
                        want[(rank, it, "%s.%s" % (layer, te_roles[te]))] = t
        with open(os.path.join(d, "notes.txt"), "w") as f:
            f.write("not a dump\n")
    found = convert_te_dumps.find_dump_files(os.path.join(tmp, "log"))
    assert sorted(found) == [0, 1], sorted(found)
    assert {layer for _, layer, _, _ in found[0]} == set(layers), found[0][:3]
    assert len(found[1]) == 3 * len(layers) * 6, len(found[1])
    out = os.path.join(tmp, "trace")
    script = os.path.join(CAPTURE, "convert_te_dumps.py")
    rc, txt = run([sys.executable, script, os.path.join(tmp, "log"), out])
    assert rc == 0, txt
    assert sorted(os.listdir(out)) == ["rank_0", "rank_1"], os.listdir(out)
    for rank in (0, 1):
        tr = os.path.join(out, "rank_%d" % rank)
        assert sorted(os.listdir(tr)) == ["amax.csv", "step_0.safetensors",
                                          "step_10.safetensors", "step_5.safetensors"]
        rows = read_amax_csv(os.path.join(tr, "amax.csv"))
        for it in (0, 5, 10):
            t, _ = read_safetensors(os.path.join(tr, "step_%d.safetensors" % it))
            names = {n for (r, i, n) in want if r == rank and i == it}
            assert set(t) == names, sorted(t)
            for n in names:
                ref = want[(rank, it, n)]
                dt, v = t[n]
                assert dt == {torch.float32: "F32", torch.bfloat16: "BF16"}[ref.dtype], (n, dt)
                assert torch.equal(v.view(torch.int16) if dt == "BF16" else v.view(torch.int32),
                                   ref.view(torch.int16) if dt == "BF16" else ref.view(torch.int32)), n
                assert rows[(it, n)] == "%.9g" % ref_amax(ref), (n, rows[(it, n)])
        inspect_ok(tr, ["decoder.layers.0.mlp.linear_fc1.grad_output",
                        "decoder.layers.0.self_attention.linear_qkv.grad_input"])
        replay_ok(tr, tmp)
    # one rank, selected: written directly into OUT; refuses to overwrite without --overwrite
    out1 = os.path.join(tmp, "trace1")
    rc, txt = run([sys.executable, script, root, out1, "--rank", "1", "--keep-wgrad"])
    assert rc == 0, txt
    t, _ = read_safetensors(os.path.join(out1, "step_5.safetensors"))
    assert "decoder.layers.0.mlp.linear_fc1.wgrad" in t
    rc, txt = run([sys.executable, script, root, out1, "--rank", "1"])
    assert rc == 2 and "overwrite" in txt, (rc, txt)
    rc, txt = run([sys.executable, script, os.path.join(root, "rank_0"), out1, "--overwrite"])
    assert rc == 0, txt
    t, _ = read_safetensors(os.path.join(out1, "step_5.safetensors"))
    assert "decoder.layers.0.mlp.linear_fc1.wgrad" not in t
    # a dict without high_precision is an error naming the file
    bad = os.path.join(tmp, "bad", "rank_0")
    os.makedirs(bad)
    torch.save({"quantized": torch.zeros(2)}, os.path.join(bad, "l_weight_iter_000001.pt"))
    rc, txt = run([sys.executable, script, bad, os.path.join(tmp, "o")])
    assert rc == 2 and "high_precision" in txt and "l_weight_iter_000001.pt" in txt, txt
    # an object torch.load(weights_only=True) refuses (as TE's QuantizedTensor): one line
    # naming the file, exit 2; with --trust it is unpickled and the tensor converted
    import fractions
    odd = os.path.join(tmp, "odd", "rank_0")
    os.makedirs(odd)
    ref = torch.randn(3, 4)
    torch.save({"high_precision": ref, "quantized": fractions.Fraction(1, 3)},
               os.path.join(odd, "l_activation_iter_000002.pt"))
    rc, txt = run([sys.executable, script, odd, os.path.join(tmp, "o2")])
    assert rc == 2 and "--trust" in txt and "l_activation_iter_000002.pt" in txt, txt
    assert len([x for x in txt.splitlines() if x.startswith("convert_te_dumps:")]) == 1, txt
    rc, txt = run([sys.executable, script, odd, os.path.join(tmp, "o2"), "--trust"])
    assert rc == 0, txt
    t, _ = read_safetensors(os.path.join(tmp, "o2", "step_2.safetensors"))
    assert torch.equal(t["l.input"][1], ref)


# ------------------------------------------------------------------ issue 17: every GEMM
def _snap(trace, step):
    t, _ = read_safetensors(os.path.join(trace, "step_%d.safetensors" % step))
    return {n: v for n, (dt, v) in t.items()}


def _close(a, b, what, rtol=1e-5):
    assert a.shape == b.shape, (what, tuple(a.shape), tuple(b.shape))
    err = float((a.float() - b.float()).abs().max()) if a.numel() else 0.0
    tol = rtol * max(1e-30, float(b.float().abs().max()) if b.numel() else 0.0)
    assert err <= tol, "%s: max |diff| %g > %g" % (what, err, tol)


@test
def encoder_layer_every_gemm(tmp):
    """nn.TransformerEncoderLayer: the packed q/k/v in_proj, out_proj (which torch runs inside
    multi-head attention, not through the out_proj module) and both FFN GEMMs are recorded,
    with amaxes equal to max |x| of the real operands. The operands are recomputed here
    independently from the layer's parameters (post-norm layer, dropout 0), the gradients by
    autograd on that recomputation."""
    torch.manual_seed(7)
    d, h, ff = 16, 4, 24
    layer = nn.TransformerEncoderLayer(d, h, ff, dropout=0.0, batch_first=True)
    model = nn.Sequential()
    model.add_module("enc", layer)
    x = torch.randn(3, 5, d)
    target = torch.randn(3, 5, d)
    trace = os.path.join(tmp, "t")
    with fp8lab_capture.Recorder(model, trace, every=1, roles=FOUR) as rec:
        ((model(x) - target) ** 2).mean().backward()
        rec.step(0)
    gemms = ["enc.self_attn.in_proj", "enc.self_attn.out_proj", "enc.linear1", "enc.linear2"]
    assert sorted(rec.names) == sorted("%s.%s" % (g, r) for g in gemms for r in
                                       ("input", "weight", "output", "grad_output")), rec.names
    assert rec.never_ran == [], rec.never_ran
    # the reference: the layer's forward written out with the same parameters
    sa = layer.self_attn
    xi = x.clone().requires_grad_(True)
    qkv = torch.nn.functional.linear(xi, sa.in_proj_weight, sa.in_proj_bias)
    qkv.retain_grad()
    q, k, v = qkv.chunk(3, -1)
    split = lambda t: t.reshape(3, 5, h, d // h).transpose(1, 2)  # noqa: E731
    att = torch.softmax(split(q) @ split(k).transpose(-2, -1) / (d // h) ** 0.5, -1)
    ctx = (att @ split(v)).transpose(1, 2).reshape(3, 5, d)
    o = torch.nn.functional.linear(ctx, sa.out_proj.weight, sa.out_proj.bias)
    o.retain_grad()
    y1 = layer.norm1(xi + o)
    f1 = torch.nn.functional.linear(y1, layer.linear1.weight, layer.linear1.bias)
    f1.retain_grad()
    a1 = torch.relu(f1)
    f2 = torch.nn.functional.linear(a1, layer.linear2.weight, layer.linear2.bias)
    f2.retain_grad()
    ((layer.norm2(y1 + f2) - target) ** 2).mean().backward()
    # multi-head attention runs its GEMMs sequence-first: (5, 3, d), transposed from batch_first
    sf = lambda t: t.transpose(0, 1)  # noqa: E731
    qkv_g = sf(qkv.grad)
    rows_of = lambda t: sf(t).reshape(-1, d)  # noqa: E731  (out_proj: one row per token)
    want = {"enc.self_attn.in_proj": (sf(x), sa.in_proj_weight, sf(qkv), qkv_g),
            "enc.self_attn.out_proj": (rows_of(ctx), sa.out_proj.weight, rows_of(o),
                                       rows_of(o.grad)),
            "enc.linear1": (y1, layer.linear1.weight, f1, f1.grad),
            "enc.linear2": (a1, layer.linear2.weight, f2, f2.grad)}
    t = _snap(trace, 0)
    rows = read_amax_csv(os.path.join(trace, "amax.csv"))
    for g, (inp, w, out, gout) in want.items():
        for role, ref in (("input", inp), ("weight", w), ("output", out), ("grad_output", gout)):
            n = "%s.%s" % (g, role)
            _close(t[n], ref.detach(), n)
            # amax.csv: exactly max |x| of the recorded operand, and non-zero
            assert rows[(0, n)] == "%.9g" % ref_amax(t[n]), (n, rows[(0, n)])
            assert float(rows[(0, n)]) > 0, n
            assert abs(float(rows[(0, n)]) - ref_amax(ref)) <= 1e-5 * ref_amax(ref), n
    assert torch.equal(t["enc.self_attn.in_proj.input"], sf(x))  # the layer's input as it is
    inspect_ok(trace, [g + ".input" for g in gemms])
    replay_ok(trace, tmp)


@test
def multihead_attention_model_in_and_out_proj(tmp):
    """A small attention model built from nn.MultiheadAttention, trained a few steps: its
    in_proj and out_proj GEMMs have non-zero amaxes on every step, and the snapshots' amaxes
    equal the rows; separate q/k/v projections (kdim != embed_dim) are three GEMMs."""
    torch.manual_seed(8)

    class Attn(nn.Module):
        def __init__(self):
            super().__init__()
            self.mha = nn.MultiheadAttention(12, 3, batch_first=True)
            self.cross = nn.MultiheadAttention(12, 3, kdim=6, vdim=6, batch_first=True)
            self.head = nn.Linear(12, 4)

        def forward(self, x, mem):
            y = x + self.mha(x, x, x, need_weights=False)[0]
            y = y + self.cross(y, mem, mem, need_weights=False)[0]
            return self.head(y)

    model = Attn()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    trace = os.path.join(tmp, "t")
    with fp8lab_capture.Recorder(model, trace, every=2) as rec:
        for s in range(4):
            loss = model(torch.randn(2, 7, 12), torch.randn(2, 5, 6)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step(s)
    gemms = {"mha.in_proj", "mha.out_proj", "cross.q_proj", "cross.k_proj", "cross.v_proj",
             "cross.out_proj", "head"}
    got = {n.rsplit(".", 1)[0] for n in rec.names}
    assert got == gemms, sorted(got)
    rows = read_amax_csv(os.path.join(trace, "amax.csv"))
    for (s, n), a in rows.items():
        assert float(a) > 0, (s, n, a)
    for s in (0, 2):
        for n, v in _snap(trace, s).items():
            assert rows[(s, n)] == "%.9g" % ref_amax(v), (s, n)
    assert tuple(_snap(trace, 0)["cross.k_proj.input"].shape) == (5, 2, 6)  # sequence-first
    replay_ok(trace, tmp)


@test
def module_called_twice_pairs_rows(tmp):
    """A Linear called twice per step, the second call on the first's output, so backward
    reaches call B before call A: each call's grad_output is stored with its own input, and
    grad_output^T @ input over the snapshot's rows equals the weight gradient torch computed.
    The pairing the old Recorder made (grad_outputs in backward order) does not."""
    torch.manual_seed(9)
    lin = nn.Linear(6, 6)
    model = nn.Sequential()
    model.add_module("twice", lin)
    trace = os.path.join(tmp, "t")
    x = torch.randn(4, 6)
    with fp8lab_capture.Recorder(model, trace, every=1) as rec:
        y = model(torch.tanh(model(x)))
        (y ** 2).sum().backward()
        rec.step(0)
    t = _snap(trace, 0)
    xin, go = t["twice.input"], t["twice.grad_output"]
    assert tuple(xin.shape) == (8, 6) and tuple(go.shape) == (8, 6)
    assert torch.equal(xin[:4], x)
    _close(go.t() @ xin, lin.weight.grad, "wgrad from the snapshot's rows")
    swapped = torch.cat([go[4:], go[:4]])  # backward order: call B's gradient first
    err = float((swapped.t() @ xin - lin.weight.grad).abs().max())
    assert err > 1e-3 * float(lin.weight.grad.abs().max()), "the test cannot tell the pairings apart"
    # gemm.csv is written from these rows: the wgrad row exists
    ini = os.path.join(tmp, "gemm.ini")
    out = os.path.join(tmp, "gemm_out")
    with open(ini, "w") as f:
        f.write("[trace]\npath = %s\n[recipe.c]\nkind = current\n[analysis]\ngemm = true\n"
                "[output]\ndir = %s\n" % (trace, out))
    rc, txt = run([BIN, "run", ini, "--quiet", "--force"])
    assert rc == 0, txt
    with open(os.path.join(out, "gemm.csv")) as f:
        gem = [line.split(",") for line in f.read().splitlines()[1:]]
    assert {(r[0], r[1]) for r in gem} >= {("twice", "wgrad"), ("twice", "fprop"),
                                           ("twice", "dgrad")}, gem


@test
def rows_subset_same_rows_and_whole_shape(tmp):
    """Recorder(rows=5): each snapshot keeps 5 of the 12 rows of a GEMM's input, output and
    grad_output, the same 5 for all three (found in a whole capture of the same run), with the
    whole's 12 in the metadata; weights whole; amax.csv the same as the whole capture's; the
    same rows again with the same rows_seed, others with another. fp8lab replays it without an
    amax.csv mismatch, and run.json's model_shape has the whole's 12 tokens."""
    def capture(name, **kw):
        torch.manual_seed(5)
        model = Net()
        trace = os.path.join(tmp, name)
        with fp8lab_capture.Recorder(model, trace, modules="blocks.0.fc1", every=2,
                                     roles=FOUR, **kw) as rec:
            train_steps(model, rec, 3, seed=4)
        return trace
    whole, cut = capture("whole"), capture("cut", rows=5, rows_seed=3)
    again, other = capture("again", rows=5, rows_seed=3), capture("other", rows=5, rows_seed=4)
    for step in (0, 2):
        w, _ = read_safetensors(os.path.join(whole, "step_%d.safetensors" % step))
        c, meta = read_safetensors(os.path.join(cut, "step_%d.safetensors" % step))
        idx = None
        for role in ("input", "output", "grad_output"):
            n = "blocks.0.fc1." + role
            full = w[n][1].reshape(-1, w[n][1].shape[-1])
            kept = c[n][1]
            assert tuple(kept.shape) == (5, full.shape[1]), (n, kept.shape)
            assert meta["fp8lab.rows." + n] == "12", meta
            rows = [next(i for i in range(12) if torch.equal(full[i], kept[k])) for k in range(5)]
            assert rows == sorted(rows) and len(set(rows)) == 5, rows
            idx = idx or rows
            assert rows == idx, (role, rows, idx)  # the same rows for the GEMM's three roles
        assert torch.equal(c["blocks.0.fc1.weight"][1], w["blocks.0.fc1.weight"][1])
        assert "fp8lab.rows.blocks.0.fc1.weight" not in meta
        a, _ = read_safetensors(os.path.join(again, "step_%d.safetensors" % step))
        o, _ = read_safetensors(os.path.join(other, "step_%d.safetensors" % step))
        assert torch.equal(a["blocks.0.fc1.input"][1], c["blocks.0.fc1.input"][1])
        assert not torch.equal(o["blocks.0.fc1.input"][1], c["blocks.0.fc1.input"][1])
    with open(os.path.join(whole, "amax.csv")) as f, open(os.path.join(cut, "amax.csv")) as g:
        assert f.read() == g.read()
    out = inspect_ok(cut, ["blocks.0.fc1.input"])  # the subset shown with the whole's rows
    line = next(x for x in out.splitlines() if x.startswith("blocks.0.fc1.input "))
    assert "[5,8] of 12 rows" in line, line
    line = next(x for x in out.splitlines() if x.startswith("blocks.0.fc1.weight "))
    assert "[16,8]" in line and "rows" not in line, line
    replay_ok(cut, tmp)
    with open(os.path.join(tmp, "replay_out", "run.json")) as f:
        shape = json.load(f)["model_shape"]
    assert [(x["name"], x["tokens"]) for x in shape["linears"]] == [("blocks.0.fc1", 12)], shape
    for bad in (0, -1, 2.5, True):
        try:
            fp8lab_capture.Recorder(Net(), os.path.join(tmp, "bad"), rows=bad)
        except ValueError as e:
            assert "rows" in str(e)
        else:
            raise AssertionError("rows=%r accepted" % (bad,))


@test
def inplace_op_after_a_gemm(tmp):
    """nn.ReLU(inplace=True) right after a Linear (which register_full_backward_hook refused):
    recorded output and grad_output are those of the GEMM, before the in-place op."""
    torch.manual_seed(15)
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(inplace=True), nn.Linear(4, 2))
    x = torch.randn(3, 4)
    trace = os.path.join(tmp, "t")
    with fp8lab_capture.Recorder(model, trace, every=1, roles=FOUR) as rec:
        model(x).sum().backward()
        rec.step(0)
    h = torch.nn.functional.linear(x, model[0].weight, model[0].bias)
    h.retain_grad()
    model[2](torch.relu(h)).sum().backward()
    t = _snap(trace, 0)
    assert torch.equal(t["0_linear.output"], h.detach()), "output after the in-place ReLU"
    assert (h < 0).any(), "the test needs negative outputs"
    _close(t["0_linear.grad_output"], h.grad, "grad_output")


@test
def nothing_left_when_no_backward_for_some_calls(tmp):
    """A GEMM with one call under no_grad and one with backward: the gradient rows cannot pair
    with the input's, so grad_output is left out of the snapshot with a warning; its amax is
    recorded."""
    lin = nn.Linear(4, 4)
    model = nn.Sequential()
    model.add_module("lin", lin)
    trace = os.path.join(tmp, "t")
    with fp8lab_capture.Recorder(model, trace, every=1, micro=False) as rec:
        with torch.no_grad():
            model(torch.randn(2, 4))
        model(torch.randn(3, 4)).sum().backward()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            rec.step(0)
    assert any("1 of the 2 calls of lin" in str(x.message) for x in w), [str(x.message) for x in w]
    t = _snap(trace, 0)
    assert "lin.grad_output" not in t and tuple(t["lin.input"].shape) == (5, 4), sorted(t)
    assert read_amax_csv(os.path.join(trace, "amax.csv"))[(0, "lin.grad_output")] == "1"


@test
def never_ran_warns_one_line(tmp):
    """A hooked Linear that never runs: one warning line naming it at close, rec.never_ran,
    amax 0 rows; a GEMM that ran is not named."""
    import io
    model = Net()
    trace = os.path.join(tmp, "t")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        with fp8lab_capture.Recorder(model, trace, every=0) as rec:
            train_steps(model, rec, 3)
    lines = err.getvalue().splitlines()
    assert lines == ["fp8lab_capture: warning: extra was hooked but never ran in 3 steps: its "
                     "amax.csv rows are all 0"], lines
    assert rec.never_ran == ["extra"], rec.never_ran
    rows = read_amax_csv(os.path.join(trace, "amax.csv"))
    assert all(rows[(s, "extra.input")] == "0" for s in range(3))


@test
def sequential_names_are_readable(tmp):
    """nn.Sequential(Linear, ReLU, Linear): GEMMs named 0_linear and 2_linear, not 0 and 2."""
    model = nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 2))
    with fp8lab_capture.Recorder(model, os.path.join(tmp, "t"), every=0) as rec:
        model(torch.randn(2, 3)).sum().backward()
        rec.step(0)
    assert sorted({n.rsplit(".", 1)[0] for n in rec.names}) == ["0_linear", "2_linear"], rec.names


@test
def tied_lm_head_named_by_its_gemm(tmp):
    """GPT-2's LM head shares the token embedding's parameter (registered first, as
    transformer.wte.weight): its GEMM is named lm_head, after the module that runs it, and the
    snapshots' metadata name the owner (tied.lm_head.weight = transformer.wte.weight). Before,
    the GEMM was recorded as transformer.wte."""
    torch.manual_seed(3)

    class Body(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(11, 6)
            self.fc = nn.Linear(6, 6)

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = Body()
            self.lm_head = nn.Linear(6, 11, bias=False)
            self.lm_head.weight = self.transformer.wte.weight

        def forward(self, ids):
            return self.lm_head(torch.relu(self.transformer.fc(self.transformer.wte(ids))))

    model = LM()
    ids = torch.randint(0, 11, (2, 5))
    trace = os.path.join(tmp, "t")
    with fp8lab_capture.Recorder(model, trace, every=1) as rec:
        model(ids).float().pow(2).mean().backward()
        rec.step(0)
    gemms = sorted({n.rsplit(".", 1)[0] for n in rec.names})
    assert gemms == ["lm_head", "transformer.fc"], gemms
    tensors, meta = read_safetensors(os.path.join(trace, "step_0.safetensors"))
    assert meta.get("tied.lm_head.weight") == "transformer.wte.weight", meta
    assert "tied.transformer.fc.weight" not in meta, meta
    assert torch.equal(tensors["lm_head.weight"][1], model.transformer.wte.weight.detach())
    inspect_ok(trace, ["lm_head.input", "lm_head.weight", "lm_head.grad_output"])
    # with lm_head left out by `modules`, its GEMM is not recorded under the embedding's name
    trace2 = os.path.join(tmp, "t2")
    with fp8lab_capture.Recorder(model, trace2, modules="transformer.*", every=1) as rec:
        model(ids).float().pow(2).mean().backward()
        rec.step(0)
    gemms = sorted({n.rsplit(".", 1)[0] for n in rec.names})
    assert gemms == ["transformer.fc"], gemms


@test
def matmul_with_parameters(tmp):
    """GEMMs written as torch.addmm(b, x, W) with W stored (in, out) (Hugging Face's Conv1D)
    and x @ W.t() are recorded through the TorchFunctionMode, the weight as (out, in); a matmul
    between activations is not."""
    torch.manual_seed(10)

    class Conv1D(nn.Module):
        def __init__(self, nx, nf):
            super().__init__()
            self.weight = nn.Parameter(torch.randn(nx, nf) * 0.2)
            self.bias = nn.Parameter(torch.zeros(nf))

        def forward(self, x):
            return torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight).view(
                *x.shape[:-1], -1)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = Conv1D(4, 6)
            self.proj = nn.Parameter(torch.randn(3, 6) * 0.3)  # used as x @ proj.t()

        def forward(self, x):
            h = self.c_attn(x)
            h = h @ h.transpose(-2, -1) @ h  # activations only: not a GEMM of the model
            return h @ self.proj.t()

    model = M()
    x = torch.randn(2, 5, 4)
    trace = os.path.join(tmp, "t")
    with fp8lab_capture.Recorder(model, trace, every=1) as rec:
        model(x).sum().backward()
        rec.step(0)
    assert sorted({n.rsplit(".", 1)[0] for n in rec.names}) == ["c_attn", "root.proj"], rec.names
    t = _snap(trace, 0)
    assert torch.equal(t["c_attn.weight"], model.c_attn.weight.detach().t())
    assert torch.equal(t["c_attn.input"], x.reshape(-1, 4))
    assert torch.equal(t["root.proj.weight"], model.proj.detach())
    _close(t["c_attn.grad_output"].t() @ t["c_attn.input"], model.c_attn.weight.grad.t(),
           "Conv1D wgrad (out, in)")
    assert hooks_empty(model) is None, hooks_empty(model)


@test
def operand_dtype_under_autocast(tmp):
    """Under CPU autocast (bfloat16) the GEMM consumes BF16 operands: dtype "operand" records
    BF16 input and weight, with amaxes equal to the BF16 values'; dtype "f32" records the F32
    tensors the module was given."""
    torch.manual_seed(11)
    if not hasattr(torch, "autocast"):
        print("    (no torch.autocast: not checked)")
        return
    lin = nn.Linear(8, 8)
    model = nn.Sequential()
    model.add_module("lin", lin)
    x = torch.randn(4, 8) * 3
    for dtype, want in (("operand", "BF16"), ("f32", "F32"), ("f16", "F16")):
        trace = os.path.join(tmp, dtype)
        with fp8lab_capture.Recorder(model, trace, every=1, dtype=dtype, roles=FOUR) as rec:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                y = model(x)
            y.float().sum().backward()
            rec.step(0)
        t, _ = read_safetensors(os.path.join(trace, "step_0.safetensors"))
        rows = read_amax_csv(os.path.join(trace, "amax.csv"))
        for n in ("lin.input", "lin.weight"):
            assert t[n][0] == want, (dtype, n, t[n][0])
            assert rows[(0, n)] == "%.9g" % ref_amax(t[n][1]), (dtype, n)
        if dtype == "operand":
            assert torch.equal(t["lin.input"][1], x.bfloat16())
            assert t["lin.output"][0] == "BF16" and t["lin.grad_output"][0] == "BF16"
        if dtype == "f32":
            assert torch.equal(t["lin.input"][1], x)
    try:
        fp8lab_capture.Recorder(model, os.path.join(tmp, "bad"), dtype="fp8")
    except ValueError as e:
        assert "operand" in str(e), e
    else:
        raise AssertionError("dtype fp8 accepted")


@test
def micro_batches_recorded_apart(tmp):
    """Gradient accumulation, 3 micro-batches per step (forward, backward, forward, ...):
    amax.csv has one row per (step, micro-batch, tensor) with that micro-batch's own amax; the
    snapshot holds the three micro-batches concatenated; rec.micro_step() splits forwards that
    have no backward in between; micro=False merges them into one row per step."""
    torch.manual_seed(12)
    lin = nn.Linear(5, 3)
    model = nn.Sequential()
    model.add_module("lin", lin)
    xs = [[torch.randn(2, 5) * (1 + m + 3 * s) for m in range(3)] for s in range(2)]
    trace = os.path.join(tmp, "t")
    with fp8lab_capture.Recorder(model, trace, every=1) as rec:
        for s in range(2):
            for x in xs[s]:
                model(x).pow(2).sum().backward()
            rec.step(s)
    full = read_amax_csv(os.path.join(trace, "amax.csv"), micro=True)
    assert {(s, m) for s, _, m in full} == {(s, m) for s in range(2) for m in range(3)}, sorted(full)
    for s in range(2):
        for m in range(3):
            assert full[(s, "lin.input", m)][0] == "%.9g" % ref_amax(xs[s][m]), (s, m)
            assert float(full[(s, "lin.grad_output", m)][0]) > 0
            assert full[(s, "lin.weight", m)][0] == "%.9g" % ref_amax(lin.weight)
        t = _snap(trace, s)
        assert torch.equal(t["lin.input"], torch.cat(xs[s])), s
    # forwards only (no backward between them): one micro-batch unless micro_step() is called
    for split in (False, True):
        tr = os.path.join(tmp, "m%d" % split)
        with fp8lab_capture.Recorder(model, tr, every=0, roles=("input",)) as rec:
            with torch.no_grad():
                for x in xs[0]:
                    model(x)
                    if split:
                        rec.micro_step()
            rec.step(0)
        full = read_amax_csv(os.path.join(tr, "amax.csv"), micro=True)
        assert sorted(m for _, _, m in full) == ([0, 1, 2] if split else [0]), sorted(full)
    tr = os.path.join(tmp, "merged")
    with fp8lab_capture.Recorder(model, tr, every=0, micro=False) as rec:
        for x in xs[0]:
            model(x).pow(2).sum().backward()
        rec.step(0)
    with open(os.path.join(tr, "amax.csv")) as f:
        assert f.readline() == "step,tensor,amax\n"
    rows = read_amax_csv(os.path.join(tr, "amax.csv"))
    assert rows[(0, "lin.input")] == "%.9g" % max(ref_amax(x) for x in xs[0])
    replay_ok(trace, tmp)


# ------------------------------------------------------------------ TransformerEngine stand-ins
class _Meta:
    """TE's FP8TensorMeta as far as the Recorder reads it: a `scale` tensor."""

    def __init__(self, n):
        self.scale = torch.ones(n)


class _TEBase(nn.Module):
    """What the stand-ins share with TE's modules: fp8_meta made at the first forward (as TE's
    init_fp8_metadata does), scales used by a call and updated after it (TE updates at the
    autocast exit and the end of backward); here each update doubles the scale, so the value a
    call used is known: the test logs it."""

    def _meta(self):
        if "scaling_fwd" not in self.fp8_meta:
            self.fp8_meta["scaling_fwd"] = _Meta(6)
            self.fp8_meta["scaling_bwd"] = _Meta(6)
        return self.fp8_meta

    def _used_fwd(self, idxs):
        sf = self._meta()["scaling_fwd"].scale
        self.log.append(("fwd", {i: float(sf[i]) for i in idxs}))
        sf.mul_(2)

    def _bwd_tap(self, y, idxs):
        meta = self.fp8_meta

        def hook(g):
            sb = meta["scaling_bwd"].scale
            self.log.append(("bwd", {i: float(sb[i]) for i in idxs}))
            # the update comes after the backward GEMMs: after the Recorder read the scale
            torch.autograd.Variable._execution_engine.queue_callback(lambda: sb.mul_(3))
            return None
        y.register_hook(hook)
        return y


def _te_class(name, base):
    cls = type(name, (base,), {})
    cls.__module__ = "transformer_engine.pytorch.module.stand_in"
    return cls


class _LinearImpl(_TEBase):
    def __init__(self, i, o):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(o, i) * 0.3)
        self.bias = nn.Parameter(torch.zeros(o))
        self.fp8_meta, self.log = {}, []

    def forward(self, inp, is_first_microbatch=None):
        return self._gemm(inp)

    def _gemm(self, operand):
        y = torch.nn.functional.linear(operand, self.weight, self.bias)
        self._used_fwd((0, 1))
        self.last = (operand, y)
        y.retain_grad()
        return self._bwd_tap(y, (0,))


class _LayerNormLinearImpl(_LinearImpl):
    def __init__(self, i, o):
        super().__init__(i, o)
        self.layer_norm_weight = nn.Parameter(1 + 0.1 * torch.randn(i))
        self.layer_norm_bias = nn.Parameter(0.1 * torch.randn(i))
        self.eps, self.normalization, self.zero_centered_gamma = 1e-5, "LayerNorm", False

    def forward(self, inp, is_first_microbatch=None):
        return self._gemm(torch.nn.functional.layer_norm(
            inp, (inp.shape[-1],), self.layer_norm_weight, self.layer_norm_bias, self.eps))


class _LayerNormMLPImpl(_TEBase):
    def __init__(self, i, ff):
        super().__init__()
        self.layer_norm_weight = nn.Parameter(1 + 0.1 * torch.randn(i))
        self.layer_norm_bias = nn.Parameter(0.1 * torch.randn(i))
        self.fc1_weight = nn.Parameter(torch.randn(ff, i) * 0.3)
        self.fc1_bias = nn.Parameter(0.1 * torch.randn(ff))
        self.fc2_weight = nn.Parameter(torch.randn(i, ff) * 0.3)
        self.fc2_bias = nn.Parameter(torch.zeros(i))
        self.eps, self.normalization, self.activation = 1e-5, "LayerNorm", "gelu"
        self.fp8_meta, self.log = {}, []

    def forward(self, inp, is_first_microbatch=None):
        ln = torch.nn.functional.layer_norm(inp, (inp.shape[-1],), self.layer_norm_weight,
                                            self.layer_norm_bias, self.eps)
        z = torch.nn.functional.linear(ln, self.fc1_weight, self.fc1_bias)
        z.retain_grad()
        a = torch.nn.functional.gelu(z, approximate="tanh")
        y = torch.nn.functional.linear(a, self.fc2_weight, self.fc2_bias)
        self._used_fwd((0, 1, 3, 4))
        self.last = (ln, z, a, y)
        y.retain_grad()
        return self._bwd_tap(y, (0, 2))


TELinear = _te_class("Linear", _LinearImpl)
TELayerNormLinear = _te_class("LayerNormLinear", _LayerNormLinearImpl)
TELayerNormMLP = _te_class("LayerNormMLP", _LayerNormMLPImpl)


class _TransformerLayerImpl(nn.Module):
    """te.TransformerLayer's GEMM modules (attention left out: a sum of heads stands in)."""

    def __init__(self, d, ff):
        super().__init__()
        self.self_attention = nn.Module()
        self.self_attention.layernorm_qkv = TELayerNormLinear(d, 3 * d)
        self.self_attention.proj = TELinear(d, d)
        self.layernorm_mlp = TELayerNormMLP(d, ff)

    def forward(self, x):
        q, k, v = self.self_attention.layernorm_qkv(x).chunk(3, -1)
        x = x + self.self_attention.proj(torch.tanh(q) * k + v)
        return x + self.layernorm_mlp(x)


TETransformerLayer = _te_class("TransformerLayer", _TransformerLayerImpl)


@test
def transformer_engine_stand_ins(tmp):
    """Stand-ins named and shaped like te.Linear, te.LayerNormLinear, te.LayerNormMLP inside a
    te.TransformerLayer: the GEMM operands recorded are the normalized input (LayerNormLinear,
    fc1), act(fc1 output) (fc2), the gradients w.r.t. each GEMM's output (fc1's through the
    activation: autograd on the stand-in's own graph is the reference); TE's scale of each
    operand at each step is the one the call used (te_scale column; empty before TE made its
    FP8 metadata); the stand-ins' inner F.linear calls are not recorded a second time."""
    torch.manual_seed(13)
    model = nn.Module()
    model.layers = nn.ModuleList([TETransformerLayer(8, 16)])
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    trace = os.path.join(tmp, "t")
    lyr = model.layers[0]
    qkv, proj, mlp = lyr.self_attention.layernorm_qkv, lyr.self_attention.proj, lyr.layernorm_mlp
    with fp8lab_capture.Recorder(model, trace, every=1, roles=FOUR) as rec:
        for s in range(3):
            x = torch.randn(2, 3, 8)
            lyr(x).pow(2).mean().backward()
            refs = {"qkv": qkv.last, "proj": proj.last, "mlp": mlp.last}
            if s == 1:
                keep = {k: tuple(t.detach().clone() for t in v) for k, v in refs.items()}
                keep.update({k + ".grad": refs[k][-1].grad.clone() for k in refs})
                keep["mlp.z.grad"] = mlp.last[1].grad.clone()
                keep["w"] = {k: v.detach().clone() for k, v in model.named_parameters()}
            opt.step()
            opt.zero_grad()
            rec.step(s)
    p = "layers.0."
    gemms = [p + "self_attention.layernorm_qkv", p + "self_attention.proj",
             p + "layernorm_mlp.fc1", p + "layernorm_mlp.fc2"]
    assert sorted({n.rsplit(".", 1)[0] for n in rec.names}) == sorted(gemms), rec.names
    t = _snap(trace, 1)
    w = keep["w"]
    want = {gemms[0] + ".input": keep["qkv"][0],
            gemms[0] + ".weight": w[p + "self_attention.layernorm_qkv.weight"],
            gemms[0] + ".output": keep["qkv"][1], gemms[0] + ".grad_output": keep["qkv.grad"],
            gemms[1] + ".input": keep["proj"][0], gemms[1] + ".grad_output": keep["proj.grad"],
            gemms[2] + ".input": keep["mlp"][0], gemms[2] + ".weight": w[p + "layernorm_mlp.fc1_weight"],
            gemms[2] + ".output": keep["mlp"][1], gemms[2] + ".grad_output": keep["mlp.z.grad"],
            gemms[3] + ".input": keep["mlp"][2], gemms[3] + ".weight": w[p + "layernorm_mlp.fc2_weight"],
            gemms[3] + ".output": keep["mlp"][3], gemms[3] + ".grad_output": keep["mlp.grad"]}
    for n, ref in want.items():
        _close(t[n], ref, n)
    rows = read_amax_csv(os.path.join(trace, "amax.csv"), micro=True)
    for n, v in t.items():
        assert rows[(1, n, 0)][0] == "%.9g" % ref_amax(v), n
    # TE's scales: the logged values the stand-ins used, step by step
    logs = {gemms[0]: (qkv, {"input": 0, "weight": 1}, {"grad_output": 0}),
            gemms[1]: (proj, {"input": 0, "weight": 1}, {"grad_output": 0}),
            gemms[2]: (mlp, {"input": 0, "weight": 1}, {"grad_output": 2}),
            gemms[3]: (mlp, {"input": 3, "weight": 4}, {"grad_output": 0})}
    checked = 0
    for g, (mod, fwd, bwd) in logs.items():
        f_log = [d for kind, d in mod.log if kind == "fwd"]
        b_log = [d for kind, d in mod.log if kind == "bwd"]
        for s in range(3):
            for role, i in fwd.items():
                got = rows[(s, "%s.%s" % (g, role), 0)][1]
                want_s = "" if s == 0 else "%.9g" % f_log[s][i]  # no metadata before step 0's call
                assert got == want_s, (g, role, s, got, want_s)
                checked += 1
            for role, i in bwd.items():
                got = rows[(s, "%s.%s" % (g, role), 0)][1]
                assert got == "%.9g" % b_log[s][i], (g, role, s, got, b_log[s][i])
                checked += 1
        assert rows[(2, g + ".output", 0)][1] == "", g  # no TE scale for outputs
    assert checked == 36, checked
    assert float(rows[(2, gemms[2] + ".grad_output", 0)][1]) == 9.0  # bwd scale 1 -> 3 -> 9
    assert hooks_empty(model) is None, hooks_empty(model)
    replay_ok(trace, tmp)


@test
def transformer_engine_rmsnorm_and_gated(tmp):
    """LayerNormLinear with RMSNorm and zero-centred gamma, LayerNormMLP with swiglu: the
    recomputed operands equal the stand-ins' (formulas of TE's docs: RMSNorm
    x / sqrt(mean(x^2) + eps) * gamma, gamma + 1 when zero-centred; swiglu silu(a) * b on the
    two halves)."""
    torch.manual_seed(14)

    class RMSLinear(_LayerNormLinearImpl):
        def forward(self, inp, is_first_microbatch=None):
            g = self.layer_norm_weight + 1
            ln = inp * torch.rsqrt(inp.pow(2).mean(-1, keepdim=True) + self.eps) * g
            y = torch.nn.functional.linear(ln, self.weight, self.bias)
            self.last = (ln, y)
            return y

    class SwiMLP(_LayerNormMLPImpl):
        def forward(self, inp, is_first_microbatch=None):
            ln = torch.nn.functional.layer_norm(inp, (inp.shape[-1],), self.layer_norm_weight,
                                                self.layer_norm_bias, self.eps)
            z = torch.nn.functional.linear(ln, self.fc1_weight, self.fc1_bias)
            z.retain_grad()
            a1, a2 = z.chunk(2, -1)
            a = torch.nn.functional.silu(a1) * a2
            y = torch.nn.functional.linear(a, self.fc2_weight, self.fc2_bias)
            self.last = (ln, z, a, y)
            return y

    RL = _te_class("LayerNormLinear", RMSLinear)
    SM = _te_class("LayerNormMLP", SwiMLP)
    model = nn.Module()
    model.qkv = RL(6, 6)
    model.qkv.normalization, model.qkv.zero_centered_gamma = "RMSNorm", True
    model.mlp = SM(6, 8)
    model.mlp.fc2_weight = nn.Parameter(torch.randn(6, 4) * 0.3)
    model.mlp.activation = "swiglu"
    trace = os.path.join(tmp, "t")
    x = torch.randn(4, 6)
    with fp8lab_capture.Recorder(model, trace, every=1) as rec:
        model.mlp(model.qkv(x)).pow(2).sum().backward()
        rec.step(0)
    t = _snap(trace, 0)
    _close(t["qkv.input"], model.qkv.last[0].detach(), "RMSNorm input")
    _close(t["mlp.fc1.input"], model.mlp.last[0].detach(), "LN input")
    _close(t["mlp.fc2.input"], model.mlp.last[2].detach(), "swiglu output")
    _close(t["mlp.fc1.grad_output"], model.mlp.last[1].grad, "fc1 grad through swiglu")


def main():
    global BIN
    if len(sys.argv) != 2:
        print("usage: test_capture.py FP8LAB_BIN", file=sys.stderr)
        return 2
    BIN = os.path.abspath(sys.argv[1])
    torch.set_num_threads(1)
    passed = failed = 0
    for fn in RESULTS:
        tmp = tempfile.mkdtemp(prefix="fp8lab_capture_")
        try:
            fn(tmp)
            passed += 1
            print("ok   %s" % fn.__name__)
        except Exception:
            failed += 1
            print("FAIL %s" % fn.__name__)
            traceback.print_exc(file=sys.stdout)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
