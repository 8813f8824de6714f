#!/usr/bin/env python3
"""Tests of tools/capture's Recorder on real model shapes: every GEMM of an encoder layer and of
multi-head attention, a module called twice, row subsets, in-place ops, calls without backward,
never-ran warnings, readable names, a tied LM head, matmul with parameters, the operand dtype
under autocast, micro-batches recorded apart.

Usage: test_capture_models.py FP8LAB_BIN. Needs torch >= 1.13 (capture_common.py: when the running interpreter lacks
it, the test re-runs itself with /usr/bin/python3, Debian's python3-torch, if that one has it;
exit 77, "skipped: torch not importable", when neither does). Last line: "N passed, M failed".
"""
import contextlib
import json
import os
import sys
import warnings

from capture_common import (  # noqa: E402
    BIN, FOUR, Net, _close, _snap, fp8lab_capture, hooks_empty, inspect_ok, main, nn,
    read_amax_csv, read_safetensors, ref_amax, replay_ok, run, test, torch, train_steps)


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


if __name__ == "__main__":
    sys.exit(main())
