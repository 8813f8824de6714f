#!/usr/bin/env python3
"""Tests of the Recorder's rule for forwards that are not training calls (issue 44):
evaluation forwards (the Recorder's model in eval() mode, or torch.inference_mode()) stay out of
amax.csv and the snapshots (eval="skip", the default) or go to <trace>/eval/amax.csv
(eval="apart"); a torch.no_grad() forward in training mode is recorded; an activation
recomputation (torch.utils.checkpoint, use_reentrant True and False) is not a second call:
the checkpointed model's trace equals the plain model's; GEMM calls after the last rec.step
are reported at close (rec.unstepped, one line on stderr).

Usage: test_capture_eval.py FP8LAB_BIN. Needs torch >= 1.13 (capture_common.py re-runs it with
/usr/bin/python3 when the running interpreter lacks torch; exit 77 when none has it). Last
line: "N passed, M failed".
"""
import contextlib
import io
import os
import sys
import warnings

from capture_common import (  # noqa: E402
    FOUR, Net, fp8lab_capture, inspect_ok, main, nn, read_amax_csv, read_safetensors,
    ref_amax, replay_ok, test, torch)
import torch.utils.checkpoint as ckpt  # noqa: E402


def _text(path):
    with open(path) as f:
        return f.read()


def _snaps(trace):
    out = {}
    for f in sorted(os.listdir(trace)):
        if f.endswith(".safetensors"):
            t, _ = read_safetensors(os.path.join(trace, f))
            out[f] = {n: v for n, (dt, v) in t.items()}
    return out


def _same_snaps(a, b):
    sa, sb = _snaps(a), _snaps(b)
    assert sorted(sa) == sorted(sb), (sorted(sa), sorted(sb))
    for f in sa:
        assert sorted(sa[f]) == sorted(sb[f]), (f, sorted(sa[f]), sorted(sb[f]))
        for n in sa[f]:
            assert torch.equal(sa[f][n], sb[f][n]), (f, n)
    return sa


def _loop(model, rec, steps, between=None, before_step=None, seed=0, d=8):
    """A training loop: between(s) after rec.step(s), before_step(s) after backward."""
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for s in range(steps):
        x = torch.randn(4, 3, d, generator=g)
        loss = model(x).float().pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if before_step:
            before_step(s)
        rec.step(s)
        if between:
            between(s)


EVAL_X = {s: 50.0 * torch.randn(5, 8, generator=torch.Generator().manual_seed(100 + s))
          for s in range(8)}  # far larger than the training inputs: pollution shows


def _evaluate(model, s):
    model.eval()
    with torch.no_grad():
        model(EVAL_X[s])
    model.train()


def _run(tmp, name, eval_mode=None, between=None, before_step=None, steps=5):
    torch.manual_seed(7)
    model = Net()
    trace = os.path.join(tmp, name)
    kw = {} if eval_mode is None else {"eval": eval_mode}
    with fp8lab_capture.Recorder(model, trace, every=2, roles=FOUR, **kw) as rec:
        _loop(model, rec, steps, between=lambda s: between(model, s) if between else None,
              before_step=lambda s: before_step(model, s) if before_step else None)
    return trace, rec, model


# ------------------------------------------------------------------ tests
@test
def eval_forwards_not_in_amax_csv(tmp):
    """model.eval() forwards between steps (after rec.step, and after backward before it) are
    not recorded by default: amax.csv and the snapshots equal, byte for byte and tensor for
    tensor, those of the run without them; no evaluation file; no micro-batch of their own."""
    plain, _, _ = _run(tmp, "plain")
    ev, rec, _ = _run(tmp, "ev", between=_evaluate, before_step=_evaluate)
    assert _text(os.path.join(ev, "amax.csv")) == _text(os.path.join(plain, "amax.csv"))
    _same_snaps(ev, plain)
    assert not os.path.exists(os.path.join(ev, "eval")), os.listdir(ev)
    assert rec.unstepped == 0 and rec.eval_steps == 0, (rec.unstepped, rec.eval_steps)
    rows = read_amax_csv(os.path.join(ev, "amax.csv"), micro=True)
    assert {m for (_, _, m) in rows} == {0}, "an evaluation forward started a micro-batch"
    # the old rule, kept as eval="record": the evaluation inputs are in amax.csv
    old, _, _ = _run(tmp, "old", eval_mode="record", between=_evaluate)
    r_old = read_amax_csv(os.path.join(old, "amax.csv"))
    r_plain = read_amax_csv(os.path.join(plain, "amax.csv"))
    for s in range(1, 5):
        assert r_old[(s, "blocks.0.fc1.input")] == "%.9g" % ref_amax(EVAL_X[s - 1]), s
        assert float(r_plain[(s, "blocks.0.fc1.input")]) < float(r_old[(s, "blocks.0.fc1.input")])


@test
def eval_apart_goes_to_its_own_file(tmp):
    """eval="apart": the training amax.csv equals the run without evaluation; eval/amax.csv
    (same format) has rows only at the steps an evaluation ran before (attributed to the
    rec.step that follows them, as training forwards), its input amax the evaluation input's,
    its weight the weight then (= that step's training weight row), grad_output 0; fp8lab
    inspects and replays it on its own."""
    plain, _, _ = _run(tmp, "plain")

    def between(model, s):
        if s in (0, 2):
            _evaluate(model, s)
    ev, rec, _ = _run(tmp, "ev", eval_mode="apart", between=between)
    assert _text(os.path.join(ev, "amax.csv")) == _text(os.path.join(plain, "amax.csv"))
    _same_snaps(ev, plain)
    assert sorted(os.listdir(os.path.join(ev, "eval"))) == ["amax.csv"]
    assert rec.eval_steps == 2, rec.eval_steps
    head = _text(os.path.join(ev, "amax.csv")).split("\n")[0]
    assert _text(os.path.join(ev, "eval", "amax.csv")).split("\n")[0] == head
    er = read_amax_csv(os.path.join(ev, "eval", "amax.csv"))
    tr = read_amax_csv(os.path.join(ev, "amax.csv"))
    assert {s for s, _ in er} == {1, 3}, sorted(er)
    assert {n for _, n in er} == {n for _, n in tr}
    for s, src in ((1, 0), (3, 2)):
        assert er[(s, "blocks.0.fc1.input")] == "%.9g" % ref_amax(EVAL_X[src]), s
        for n in ("blocks.0.fc1.weight", "blocks.1.fc2.weight"):
            assert er[(s, n)] == tr[(s, n)], (s, n, er[(s, n)], tr[(s, n)])
        for i in range(2):
            for m in ("fc1", "fc2"):
                assert er[(s, "blocks.%d.%s.grad_output" % (i, m))] == "0"
                assert er[(s, "blocks.%d.%s.output" % (i, m))] != "0"
        assert er[(s, "extra.input")] == "0"
    print("    eval rows: step 1 blocks.0.fc1.input %s (training %s)"
          % (er[(1, "blocks.0.fc1.input")], tr[(1, "blocks.0.fc1.input")]))
    inspect_ok(os.path.join(ev, "eval"), ["blocks.0.fc1.input"])
    replay_ok(os.path.join(ev, "eval"), tmp)


@test
def inference_mode_not_recorded(tmp):
    """A forward under torch.inference_mode() (model left in training mode) is not recorded:
    amax.csv equals the run without it; with eval="apart" it goes to eval/amax.csv."""
    plain, _, _ = _run(tmp, "plain")

    def infer(model, s):
        with torch.inference_mode():
            model(EVAL_X[s])
    ev, _, _ = _run(tmp, "inf", between=infer, before_step=infer)
    assert _text(os.path.join(ev, "amax.csv")) == _text(os.path.join(plain, "amax.csv"))
    _same_snaps(ev, plain)
    ap, _, _ = _run(tmp, "ap", eval_mode="apart", between=infer)
    assert _text(os.path.join(ap, "amax.csv")) == _text(os.path.join(plain, "amax.csv"))
    er = read_amax_csv(os.path.join(ap, "eval", "amax.csv"))
    assert er[(2, "blocks.0.fc1.input")] == "%.9g" % ref_amax(EVAL_X[1]), er[(2, "blocks.0.fc1.input")]


@test
def no_grad_forward_in_train_mode_recorded(tmp):
    """A torch.no_grad() forward in training mode is a training call (reentrant
    checkpointing's first forward is one): its input is in amax.csv."""
    plain, _, _ = _run(tmp, "plain")

    def nograd(model, s):
        with torch.no_grad():
            model(EVAL_X[s])
    ng, _, _ = _run(tmp, "ng", between=nograd)
    r = read_amax_csv(os.path.join(ng, "amax.csv"))
    rp = read_amax_csv(os.path.join(plain, "amax.csv"))
    for s in range(1, 5):
        assert r[(s, "blocks.0.fc1.input")] == "%.9g" % ref_amax(EVAL_X[s - 1]), s
        assert r[(s, "blocks.0.fc1.input")] != rp[(s, "blocks.0.fc1.input")], s


class CkptNet(nn.Module):
    """inp -> two blocks (fc1, relu, dropout, fc2; checkpointed or not) -> head."""

    def __init__(self, mode=None, d=8):
        super().__init__()
        self.inp = nn.Linear(d, d)
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(d, 2 * d), nn.ReLU(),
                                                   nn.Dropout(0.25), nn.Linear(2 * d, d))
                                     for _ in range(2)])
        self.head = nn.Linear(d, d)
        self.mode = mode  # None: plain; "reentrant"; "nonreentrant"

    def forward(self, x):
        x = self.inp(x)
        for b in self.blocks:
            if self.mode is None:
                x = x + b(x)
            else:
                x = x + ckpt.checkpoint(b, x, use_reentrant=self.mode == "reentrant")
        return self.head(x)


def _ckpt_run(tmp, mode, micro="auto"):
    torch.manual_seed(11)
    model = CkptNet(mode)
    trace = os.path.join(tmp, "%s_%s" % (mode, micro))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with fp8lab_capture.Recorder(model, trace, every=2, roles=fp8lab_capture.ALL_ROLES,
                                     micro=micro) as rec:
            _loop(model, rec, 4)
    msgs = [str(x.message) for x in w if "fp8lab_capture" in str(x.message)]
    assert not msgs, msgs
    return trace, rec


@test
def checkpointed_model_recorded_once_per_step(tmp):
    """torch.utils.checkpoint, use_reentrant True and False: each GEMM is one call a step (the
    recomputation in backward is not a second call nor a micro-batch); amax.csv equals the plain
    model's byte for byte and the snapshots tensor for tensor (one call's rows, grad_output and
    grad_input included, paired), for micro "auto" and False."""
    for micro in ("auto", False):
        plain, rp = _ckpt_run(tmp, None, micro)
        text = _text(os.path.join(plain, "amax.csv"))
        for mode in ("reentrant", "nonreentrant"):
            tr, rec = _ckpt_run(tmp, mode, micro)
            assert rec.names == rp.names, (rec.names, rp.names)
            assert _text(os.path.join(tr, "amax.csv")) == text, (mode, micro)
            snaps = _same_snaps(tr, plain)
            s0 = snaps["step_0.safetensors"]
            assert tuple(s0["blocks.0.0_linear.input"].shape) == (4, 3, 8), \
                s0["blocks.0.0_linear.input"].shape
            assert "blocks.1.3_linear.grad_output" in s0 and "blocks.0.0_linear.grad_input" in s0
        rows = read_amax_csv(os.path.join(plain, "amax.csv"), micro=bool(micro))
        print("    micro=%s: %d amax rows, one per (step, tensor); blocks.0.0_linear.grad_output "
              "step 3 = %s" % (micro, len(rows), read_amax_csv(os.path.join(plain, "amax.csv"))[
                  (3, "blocks.0.0_linear.grad_output")]))
        if micro:
            assert {m for (_, _, m) in rows} == {0}


@test
def trailing_forward_reported(tmp):
    """GEMM calls recorded after the last rec.step: one warning line at close naming their
    count and the last step, rec.unstepped; amax.csv holds the stepped steps only. An eval()
    forward there is not recorded (not counted) unless eval="apart"."""
    torch.manual_seed(3)
    model = Net()
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        with fp8lab_capture.Recorder(model, os.path.join(tmp, "t"), every=0) as rec:
            _loop(model, rec, 2)
            model(torch.randn(2, 8)).sum().backward()  # a step without rec.step
            _evaluate(model, 0)
    lines = [l for l in err.getvalue().splitlines() if "after the last rec.step" in l]
    assert rec.unstepped == 4, rec.unstepped  # blocks.{0,1}.fc{1,2}
    assert len(lines) == 1 and "4 GEMM calls recorded after the last rec.step (step 1)" in \
        lines[0] and "not in amax.csv" in lines[0], err.getvalue()
    print("    " + lines[0])
    assert {s for s, _ in read_amax_csv(os.path.join(tmp, "t", "amax.csv"))} == {0, 1}
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        with fp8lab_capture.Recorder(model, os.path.join(tmp, "u"), every=0,
                                     eval="apart") as rec:
            _loop(model, rec, 1)
            _evaluate(model, 0)
    assert rec.unstepped == 4, rec.unstepped
    assert not os.path.exists(os.path.join(tmp, "u", "eval", "amax.csv"))
    with contextlib.redirect_stderr(io.StringIO()) as err:
        with fp8lab_capture.Recorder(model, os.path.join(tmp, "v"), every=0) as rec:
            _loop(model, rec, 1)
    assert rec.unstepped == 0 and "rec.step" not in err.getvalue(), err.getvalue()


if __name__ == "__main__":
    sys.exit(main())
