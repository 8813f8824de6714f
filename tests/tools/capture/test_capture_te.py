#!/usr/bin/env python3
"""Tests of tools/capture with TransformerEngine: TE DumpTensors dumps round-trip through
convert_te_dumps.py bit for bit, and the Recorder on stand-in modules of TE's names and
signatures (Linear, LayerNormLinear, LayerNormMLP, TransformerLayer, GroupedLinear; RMSNorm and
gated MLPs).

Usage: test_capture_te.py FP8LAB_BIN. Needs torch >= 1.13 (capture_common.py: when the running interpreter lacks
it, the test re-runs itself with /usr/bin/python3, Debian's python3-torch, if that one has it;
exit 77, "skipped: torch not importable", when neither does). Last line: "N passed, M failed".
"""
import os
import sys

from capture_common import (  # noqa: E402
    ROOT, FOUR, _close, _snap, convert_te_dumps, fp8lab_capture, hooks_empty, inspect_ok,
    main, nn, read_amax_csv, read_safetensors, ref_amax, replay_ok, run, test, torch)


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
    # the module's file as a script (what python -m fp8lab.te_dumps runs; the package's own
    # test, tests/python, runs it with -m from an installed package)
    script = os.path.join(ROOT, "python", "fp8lab", "te_dumps.py")
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


class _GroupedLinearImpl(_TEBase):
    """te.GroupedLinear(num_gemms, in, out): weight<i> (out, in) per expert, forward(inp,
    m_splits): expert i takes its rows; fp8_meta with num_gemms x 3 forward and x 2 backward
    slots (input 3i, weight 3i + 1, grad_output 2i)."""

    def __init__(self, n, i, o):
        super().__init__()
        self.num_gemms = n
        for k in range(n):
            setattr(self, "weight%d" % k, nn.Parameter(torch.randn(o, i) * (0.3 + k)))
        self.fp8_meta, self.log = {}, []

    def _meta(self):
        if "scaling_fwd" not in self.fp8_meta:
            self.fp8_meta["scaling_fwd"] = _Meta(3 * self.num_gemms)
            self.fp8_meta["scaling_bwd"] = _Meta(2 * self.num_gemms)
        return self.fp8_meta

    def forward(self, inp, m_splits, is_first_microbatch=None):
        outs = [torch.nn.functional.linear(x, getattr(self, "weight%d" % k))
                for k, x in enumerate(inp.split(m_splits))]
        y = torch.cat(outs)
        self._used_fwd(range(3 * self.num_gemms))
        self.last = (inp, y)
        y.retain_grad()
        return self._bwd_tap(y, range(2 * self.num_gemms))


TEGroupedLinear = _te_class("GroupedLinear", _GroupedLinearImpl)


@test
def transformer_engine_grouped_linear(tmp):
    """A stand-in named and shaped like te.GroupedLinear (3 experts): GEMMs
    `<path>.experts.<i>`; expert i's input and grad_output amaxes are those of its rows of the
    module's input and output gradient (by m_splits), 0 when it got no rows (step 1: m_splits
    [5, 0, 3]); every expert's weight every step; tokens.csv holds m_splits; te_scale per
    expert from slots 3i / 3i + 1 / 2i."""
    torch.manual_seed(15)
    model = nn.Module()
    model.moe = TEGroupedLinear(3, 6, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    trace = os.path.join(tmp, "t")
    splits = [[2, 3, 1], [5, 0, 3], [1, 1, 1]]
    want = {}
    with fp8lab_capture.Recorder(model, trace, every=1) as rec:
        for s, m in enumerate(splits):
            x = torch.randn(sum(m), 6) * (s + 1)
            ws = [getattr(model.moe, "weight%d" % k).detach().clone() for k in range(3)]
            y = model.moe(x, m)
            y.pow(2).sum().backward()
            g = model.moe.last[1].grad
            for k, (xs, gs) in enumerate(zip(x.split(m), g.split(m))):
                want[(s, k)] = (ref_amax(xs), ref_amax(ws[k]), ref_amax(gs), m[k])
            opt.step()
            opt.zero_grad()
            rec.step(s)
    gemms = ["moe.experts.%d" % k for k in range(3)]
    assert sorted({n.rsplit(".", 1)[0] for n in rec.names}) == gemms, rec.names
    rows = read_amax_csv(os.path.join(trace, "amax.csv"), micro=True)
    with open(os.path.join(trace, "tokens.csv")) as f:
        tok = f.read().splitlines()
    assert tok[0] == "step,gemm,tokens" and len(tok) == 10, tok
    f_log = [d for kind, d in model.moe.log if kind == "fwd"]
    b_log = [d for kind, d in model.moe.log if kind == "bwd"]
    for (s, k), (xa, wa, ga, cnt) in want.items():
        g = gemms[k]
        assert rows[(s, g + ".input", 0)][0] == ("%.9g" % xa if cnt else "0"), (s, k)
        assert rows[(s, g + ".weight", 0)][0] == "%.9g" % wa, (s, k)
        assert rows[(s, g + ".grad_output", 0)][0] == ("%.9g" % ga if cnt else "0"), (s, k)
        assert "%d,%s,%d" % (s, g, cnt) in tok, (s, k)
        if s:
            assert rows[(s, g + ".weight", 0)][1] == "%.9g" % f_log[s][3 * k + 1], (s, k)
            if cnt:
                assert rows[(s, g + ".input", 0)][1] == "%.9g" % f_log[s][3 * k], (s, k)
        if cnt:
            assert rows[(s, g + ".grad_output", 0)][1] == "%.9g" % b_log[s][2 * k], (s, k)
    assert rows[(1, gemms[1] + ".input", 0)][0] == "0" and want[(1, 1)][3] == 0
    assert rec.never_ran == [], rec.never_ran
    t = _snap(trace, 1)
    assert gemms[1] + ".input" not in t and tuple(t[gemms[0] + ".input"].shape) == (5, 6)
    assert hooks_empty(model) is None, hooks_empty(model)
    replay_ok(trace, tmp)


if __name__ == "__main__":
    sys.exit(main())
