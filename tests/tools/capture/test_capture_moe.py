#!/usr/bin/env python3
"""Tests of tools/capture's Recorder on Hugging Face Mixture-of-Experts models (issue 40): tiny
Mixtral, Qwen3-MoE, GPT-OSS and Llama 4 configurations from transformers, random weights, a few
SGD steps on the CPU, captured unmodified. Every number is checked against hooks and
computations of this file that do not go through the Recorder: the router's top-k (forward
hooks on the routers and experts modules), the rows routed to each expert, the initial
parameters, the gradient of the experts module's output.

Needs torch >= 2.9 and transformers 5.x: the running interpreter is used when it has them,
else the test re-runs itself with the interpreter of fp8lab's virtual environment
(scripts/venv-torch.sh, which makes it once: large). When that cannot be made: exit 77
(skipped), or 1 when FP8LAB_REQUIRE_PYDEPS is set (CI). Usage: test_capture_moe.py FP8LAB_BIN.
Last line: "N passed, M failed".
"""
import csv
import io
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(ROOT, "tests", "common"))
from pycommon import with_venv  # noqa: E402


def _have_deps():
    try:
        import torch
        import transformers
    except ImportError:
        return False
    tv = tuple(int(v) for v in torch.__version__.split("+")[0].split(".")[:2])
    return tv >= (2, 9) and int(transformers.__version__.split(".")[0]) >= 5


with_venv(_have_deps, "torch >= 2.9 and transformers 5.x not importable here")

import torch  # noqa: E402
import transformers  # noqa: E402
import transformers.integrations.moe as hf_moe  # noqa: E402

from capture_common import (  # noqa: E402
    BIN, _snap, fp8lab_capture, inspect_ok, main, nn, read_amax_csv, replay_ok, run, test)

transformers.logging.set_verbosity_error()
COMMON = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)


def _model(kind, impl=None, seed=0):
    torch.manual_seed(seed)
    if kind == "mixtral":
        cfg = transformers.MixtralConfig(num_local_experts=4, num_experts_per_tok=2, **COMMON)
        cls = transformers.MixtralForCausalLM
    elif kind == "qwen3":
        cfg = transformers.Qwen3MoeConfig(num_experts=4, num_experts_per_tok=2,
                                          moe_intermediate_size=64, head_dim=8, **COMMON)
        cls = transformers.Qwen3MoeForCausalLM
    elif kind == "gptoss":
        cfg = transformers.GptOssConfig(num_local_experts=4, num_experts_per_tok=2, head_dim=8,
                                        **COMMON)
        cls = transformers.GptOssForCausalLM
    else:
        cfg = transformers.Llama4TextConfig(num_local_experts=4, num_experts_per_tok=1,
                                            intermediate_size_mlp=64, head_dim=8, **COMMON)
        cls = transformers.Llama4ForCausalLM
    if impl is not None:
        cfg._experts_implementation = impl
    model = cls(cfg)
    with torch.no_grad():  # HF's init leaves some expert tensors at 0 (Llama 4's gate_up_proj)
        for n, p in model.named_parameters():
            if p.dim() == 3 or n.endswith("_bias"):
                p.normal_(0, 0.1)
    return model


def _moe_blocks(model):
    """[(layer, router module, experts module, router attribute)] of the model."""
    out = []
    for i, layer in enumerate(model.model.layers):
        blk = getattr(layer, "mlp", None) or getattr(layer, "feed_forward")
        router = getattr(blk, "gate", None) or getattr(blk, "router")
        out.append((i, router, blk.experts, "gate" if hasattr(blk, "gate") else "router"))
    return out


class Watch:
    """Forward hooks on each experts module (and the router for Llama 4), independent of the
    Recorder: per step, each expert's routed rows (token index lists), the experts module's
    input and, through a tensor hook, the gradient of its output."""

    def __init__(self, model, kind):
        self.kind, self.steps, self.cur = kind, [], None
        self.handles = []
        for i, router, experts, _ in _moe_blocks(model):
            if kind == "llama4":
                self.handles.append(router.register_forward_hook(self._router(i)))
                self.handles.append(experts.register_forward_hook(self._llama4_experts(i)))
            else:
                self.handles.append(experts.register_forward_hook(self._experts(i)))

    def begin(self):
        self.cur = {}
        self.steps.append(self.cur)

    def _experts(self, i):
        def hook(m, args, out):
            x, idx, w = args[0], args[1], args[2]
            d = self.cur.setdefault(i, {})
            d["x"], d["idx"], d["w"] = x.detach().clone(), idx.clone(), w.detach().clone()
            out.register_hook(lambda g: d.__setitem__("g", g.detach().clone()))
        return hook

    def _router(self, i):
        def hook(m, args, out):
            scores = out[0].detach().clone()  # (tokens, E): sigmoid of the top-k logits, else 0
            d = self.cur.setdefault(i, {})
            d["x"], d["scores"] = args[0].detach().reshape(-1, args[0].shape[-1]).clone(), scores
            d["idx"] = torch.topk(out[1].detach(), m.top_k, dim=1).indices
        return hook

    def _llama4_experts(self, i):
        def hook(m, args, out):
            self.cur[i]["routed_in"] = args[0].detach().clone()
        return hook

    def rows(self, step, layer, e):
        """(token, top-k slot) pairs routed to expert e at a step, in token order."""
        idx = self.steps[step][layer]["idx"]
        return [(t, k) for t in range(idx.shape[0]) for k in range(idx.shape[1])
                if int(idx[t, k]) == e]


def _train(model, rec, watch, batches, lr=0.05):
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    weights = []
    for s, ids in enumerate(batches):
        weights.append({n: p.detach().clone() for n, p in model.named_parameters()
                        if p.dim() == 3})
        watch.begin()
        out = model(ids, labels=ids)
        out.loss.backward()
        opt.step()
        opt.zero_grad()
        rec.step(s)
    return weights


def _tokens(trace):
    with open(os.path.join(trace, "tokens.csv")) as f:
        assert f.readline() == "step,gemm,tokens\n"
        rows = [line.rstrip("\n").split(",") for line in f]
    out = {}
    for s, g, t in rows:
        assert (int(s), g) not in out, (s, g)
        out[(int(s), g)] = int(t)
    return out, rows


def _near(got, want, what, rtol=2e-5):
    got = float(got)
    assert abs(got - want) <= rtol * max(abs(want), 1e-30), "%s: %r, expected %r" % (
        what, got, want)


def _amax(t):
    return float(t.detach().abs().max()) if t.numel() else 0.0


def _batches(n, seed=1, one_token_last=True):
    g = torch.Generator().manual_seed(seed)
    out = [torch.randint(0, 64, (2, 8), generator=g) for _ in range(n)]
    if one_token_last:  # one token, top-2 of 4 experts: two experts of each layer get none
        out.append(torch.randint(0, 64, (1, 1), generator=g))
    return out


def _check_hf(tmp, kind, impl, check_grad=True):
    """Captures the model and checks names, tokens.csv, weights, inputs and gradients against
    Watch; returns (trace, rec, watch, counts of what was checked)."""
    model = _model(kind, impl)
    blocks = _moe_blocks(model)
    watch = Watch(model, kind)
    trace = os.path.join(tmp, "%s_%s" % (kind, impl))
    batches = _batches(3)
    with fp8lab_capture.Recorder(model, trace, every=1) as rec:
        weights = _train(model, rec, watch, batches)
    for h in watch.handles:
        h.remove()
    base = "model.layers.%d." + ("feed_forward" if kind == "llama4" else "mlp") + ".experts.%d.%s"
    want = {base % (i, e, p) + "." + r for i in range(2) for e in range(4)
            for p in ("gate_up_proj", "down_proj") for r in ("input", "weight", "grad_output")}
    names = {n for n in rec.names if ".experts." in n}
    assert names == want and len(names) == 48, sorted(names ^ want)
    amax = read_amax_csv(os.path.join(trace, "amax.csv"))
    tokens, rows = _tokens(trace)
    assert len(rows) == len(batches) * 16, len(rows)
    transposed = kind in ("gptoss", "llama4")
    n = {"tok": 0, "w": 0, "x": 0, "zero": 0, "g": 0}
    for s in range(len(batches)):
        for i, router, experts, rname in blocks:
            d = watch.steps[s][i]
            for e in range(4):
                pairs = watch.rows(s, i, e)
                gu, dn = base % (i, e, "gate_up_proj"), base % (i, e, "down_proj")
                if kind == "llama4":  # routed: the router's top-k; zero rows otherwise
                    routed = [t for t in range(d["scores"].shape[0]) if d["scores"][t, e] > 0]
                    assert routed == [t for t, _ in pairs], (routed, pairs)
                assert tokens[(s, gu)] == tokens[(s, dn)] == len(pairs), (s, gu, tokens[(s, gu)],
                                                                         len(pairs))
                n["tok"] += 2
                for p, g in (("gate_up_proj", gu), ("down_proj", dn)):
                    w = weights[s]["model.layers.%d.%s.experts.%s" % (
                        i, "feed_forward" if kind == "llama4" else "mlp", p)][e]
                    assert amax[(s, g + ".weight")] == "%.9g" % _amax(w), (s, g)
                    n["w"] += 1
                if not pairs:
                    for g in (gu, dn):
                        assert amax[(s, g + ".input")] == "0" and \
                            amax[(s, g + ".grad_output")] == "0", (s, g)
                    n["zero"] += 1
                    continue
                tok = [t for t, _ in pairs]
                if kind == "llama4":
                    T = d["scores"].shape[0]
                    xin = d["routed_in"].reshape(4, T, -1)[e][tok]
                else:
                    xin = d["x"][tok]
                assert amax[(s, gu + ".input")] == "%.9g" % _amax(xin), (s, gu, amax[(s, gu + ".input")], _amax(xin))
                # down_proj's input recomputed from the initial weights of the step
                W = weights[s]
                pre = "model.layers.%d.%s.experts." % (i, "feed_forward" if kind == "llama4"
                                                       else "mlp")
                wgu = W[pre + "gate_up_proj"][e]
                if kind != "gptoss":
                    h = xin @ (wgu if transposed else wgu.t())
                if kind == "gptoss":  # its clamped, interleaved gate: checked by the replay
                    n["x"] += 1
                    continue
                gate, up = h.chunk(2, -1)
                act = torch.nn.functional.silu(gate) * up
                _near(amax[(s, dn + ".input")], _amax(act), (s, dn), rtol=1e-4)
                n["x"] += 2
                if check_grad and kind != "llama4":
                    # d loss / d (down_proj output) of row (t, k) = g[t] * top_k_weight[t, k]
                    gy = torch.stack([d["g"][t] * d["w"][t, k] for t, k in pairs])
                    _near(amax[(s, dn + ".grad_output")], _amax(gy), (s, dn), rtol=1e-4)
                    n["g"] += 1
    return trace, rec, n


def report_names_experts(trace, tmp):
    """fp8lab run under TransformerEngine's default delayed scaling: experts.csv holds the 16
    expert GEMMs (2 layers x 4 experts x 2) with tokens.csv's totals, report.md's
    Mixture-of-Experts section names the expert groups, and the 2 routers (6 tensors) stay
    in BF16 (advice.ini's BF16 section when there is one, else the section's sentence)."""
    ini = os.path.join(tmp, "report.ini")
    out = os.path.join(tmp, "report_out")
    with open(ini, "w") as f:
        f.write("[trace]\npath = %s\n[recipe.d]\nkind = delayed\nmargin = 0, 1\n"
                "[recipe.c]\nkind = current\n[analysis]\ngemm = false\n[output]\ndir = %s\n"
                % (trace, out))
    rc, text = run([BIN, "run", ini, "--quiet", "--force"])
    assert rc == 0, "fp8lab run: rc %d\n%s" % (rc, text)
    tok, _ = _tokens(trace)
    totals = {}
    for (step, gemm), t in tok.items():
        totals[gemm] = totals.get(gemm, 0) + t
    with open(os.path.join(out, "experts.csv")) as f:
        rows = list(csv.DictReader(f))
    assert sorted(r["gemm"] for r in rows) == sorted(totals), [r["gemm"] for r in rows]
    assert len(rows) == 16
    for r in rows:
        assert int(r["tokens"]) == totals[r["gemm"]], (r, totals[r["gemm"]])
    with open(os.path.join(out, "report.md")) as f:
        md = f.read()
    sec = md[md.index("## Mixture-of-Experts"):]
    sec = sec[:sec.index("\n## ")]
    for l in range(2):
        for g in ("gate_up_proj", "down_proj"):
            assert "`model.layers.%d.mlp.experts.*.%s.input`" % (l, g) in sec, sec
    assert "48 expert tensors in 12 expert groups" in sec, sec
    assert "6 router tensors" in sec and "keep them in BF16" in sec, sec


@test
def mixtral_default_grouped_mm(tmp):
    """Mixtral, experts_implementation "grouped_mm" (transformers 5.25's default, through
    torch._grouped_mm on the CPU): 48 expert tensors; tokens.csv = the router's top-k counts;
    weights = max |W[e]| before each step's update (every expert, every step); inputs = max
    over the routed rows; down_proj's grad_output = max |g_t * w_tk| over its rows; the
    one-token step leaves two experts per layer with tokens 0 and input/grad_output 0. The
    trace replays without an amax.csv mismatch (each expert's snapshot = its amax.csv)."""
    assert transformers.MixtralConfig()._experts_implementation in (None, "grouped_mm")
    trace, rec, n = _check_hf(tmp, "mixtral", None)
    # 4 steps x 2 layers x 4 experts: 4 expert-steps without tokens (the one-token step)
    assert n == {"tok": 64, "w": 64, "x": 56, "zero": 4, "g": 28}, n
    assert rec.never_ran == [] and rec.uncaptured == [], (rec.never_ran, rec.uncaptured)
    # the router is an ordinary GEMM, registered up front
    assert "model.layers.0.mlp.gate.input" in rec.names
    out = inspect_ok(trace, ["model.layers.1.mlp.experts.3.down_proj.grad_output",
                             "model.layers.0.mlp.gate.weight"])
    assert "experts.2.gate_up_proj.weight" in out
    replay_ok(trace, tmp)
    report_names_experts(trace, tmp)
    print("     mixtral grouped_mm: %s" % n)


@test
def mixtral_eager(tmp):
    """The same with experts_implementation "eager": F.linear(x, gate_up_proj[e]) per expert hit
    (an expert with no token is not called, yet its weight is recorded every step)."""
    trace, rec, n = _check_hf(tmp, "mixtral", "eager")
    assert n == {"tok": 64, "w": 64, "x": 56, "zero": 4, "g": 28}, n
    assert rec.never_ran == [] and rec.uncaptured == []
    replay_ok(trace, tmp)
    print("     mixtral eager: %s" % n)


@test
def implementations_agree(tmp):
    """grouped_mm, batched_mm, eager and transformers' grouped_mm_fallback op (forced as on
    the CPU with torch <= 2.10) give the same amax.csv (to float rounding) and the same
    tokens.csv: nothing is recorded twice (the fallback's own torch.mm calls, its Python
    backward)."""
    traces = {}
    orig = hf_moe._can_use_grouped_mm
    for impl in ("grouped_mm", "batched_mm", "eager", "fallback"):
        model = _model("mixtral", "grouped_mm" if impl == "fallback" else impl)
        trace = os.path.join(tmp, impl)
        if impl == "fallback":
            hf_moe._can_use_grouped_mm = lambda *a, **k: False
        try:
            with fp8lab_capture.Recorder(model, trace, every=1) as rec:
                _train(model, rec, Watch(model, "mixtral"), _batches(2))
        finally:
            hf_moe._can_use_grouped_mm = orig
        traces[impl] = (read_amax_csv(os.path.join(trace, "amax.csv")), _tokens(trace)[1])
    ref_a, ref_t = traces["grouped_mm"]
    for impl, (a, t) in traces.items():
        assert t == ref_t, impl
        assert set(a) == set(ref_a), impl
        for k, v in a.items():
            _near(v, float(ref_a[k]), (impl, k), rtol=1e-4)
    # each token goes to top-2 experts: 2 x 16 per layer and GEMM at (2, 8), 2 x 1 at (1, 1)
    assert sum(int(r[2]) for r in ref_t) == 2 * (2 * 2 * 32) + 2 * 2 * 2, \
        sum(int(r[2]) for r in ref_t)


@test
def qwen3_moe(tmp):
    """Qwen3-MoE (grouped_mm): names, tokens, weights, inputs, gradients as for Mixtral; the
    snapshot's expert weight is W[e] as stored (out, in)."""
    trace, rec, n = _check_hf(tmp, "qwen3", None)
    assert n == {"tok": 64, "w": 64, "x": 56, "zero": 4, "g": 28}, n
    t = _snap(trace, 0)
    model = _model("qwen3", None)  # same seed: the initial weights
    w = model.model.layers[1].mlp.experts.down_proj.detach()[2]
    assert torch.equal(t["model.layers.1.mlp.experts.2.down_proj.weight"], w)
    print("     qwen3: %s" % n)


@test
def gpt_oss(tmp):
    """GPT-OSS: experts stored transposed (E, in, out) with biases, grouped_mm and eager
    (x @ W[e]): weights recorded as (out, in) = W[e]^T, tokens and gate_up inputs from the
    router, the replay without mismatch."""
    for impl in (None, "eager"):
        trace, rec, n = _check_hf(tmp, "gptoss", impl, check_grad=False)
        # 5 expert-steps without tokens: 4 in the one-token step, 1 in a routed batch
        assert n == {"tok": 64, "w": 64, "x": 27, "zero": 5, "g": 0}, n
        t = _snap(trace, 0)
        model = _model("gptoss", impl)
        w = model.model.layers[0].mlp.experts.gate_up_proj.detach()[1]  # (in 32, out 128)
        got = t["model.layers.0.mlp.experts.1.gate_up_proj.weight"]
        assert tuple(got.shape) == (128, 32) and torch.equal(got, w.t()), tuple(got.shape)
        assert "model.layers.0.mlp.router.weight" in rec.names
        os.makedirs(os.path.join(tmp, str(impl)))
        replay_ok(trace, os.path.join(tmp, str(impl)))
        print("     gpt-oss %s: %s" % (impl or "grouped_mm", n))


@test
def llama4_bmm(tmp):
    """Llama 4: bmm over all experts with zero rows for tokens not routed: an expert's tokens
    are the router's top-1 choices only, its input amax is over the routed rows (hidden x
    sigmoid(score)), its snapshot holds those rows alone; weights (E, in, out) recorded as
    (out, in)."""
    trace, rec, n = _check_hf(tmp, "llama4", None, check_grad=False)
    # top-1 of 4: the one-token step leaves 3 experts of each layer without tokens (6 of 32)
    assert n == {"tok": 64, "w": 64, "x": 52, "zero": 6, "g": 0}, n
    t = _snap(trace, 0)
    tokens, _ = _tokens(trace)
    g = "model.layers.0.feed_forward.experts.%d.gate_up_proj"
    for e in range(4):
        if tokens[(0, g % e)]:
            assert t[g % e + ".input"].shape[0] == tokens[(0, g % e)], e
            assert float(t[g % e + ".input"].abs().amax(1).min()) > 0
    assert tuple(t[g % 0 + ".weight"].shape) == (128, 32)
    replay_ok(trace, tmp)
    print("     llama4: %s" % n)


@test
def uncaptured_3d_parameter_warns(tmp):
    """A 3-D parameter used through an op the Recorder does not wrap (einsum) gets one warning
    line naming it, once, and is listed in rec.uncaptured; a 3-D parameter used through bmm
    is captured (no warning)."""

    class Toy(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.mix = nn.Parameter(torch.randn(2, 4, 4))
            self.experts = nn.Module()
            self.experts.w = nn.Parameter(torch.randn(2, 4, 4))

        def forward(self, x):
            y = self.lin(x)
            y = torch.einsum("bi,eio->bo", y, self.mix)
            return torch.bmm(y.unsqueeze(0).expand(2, -1, -1), self.experts.w).sum(0)

    model = Toy()
    err = io.StringIO()
    old, sys.stderr = sys.stderr, err
    try:
        with fp8lab_capture.Recorder(model, os.path.join(tmp, "t")) as rec:
            for s in range(3):
                model(torch.randn(3, 4)).pow(2).sum().backward()
                rec.step(s)
    finally:
        sys.stderr = old
    lines = [x for x in err.getvalue().splitlines() if "3 or more dimensions" in x]
    assert len(lines) == 1 and "parameter mix " in lines[0], err.getvalue()
    assert rec.uncaptured == ["mix"], rec.uncaptured
    assert "experts.0.w.input" in " ".join(rec.names), rec.names


if __name__ == "__main__":
    sys.exit(main())
