#!/usr/bin/env python3
"""Tests of tools/capture's Recorder (fp8lab_capture.py) on small models against fp8lab: the
traces load in `fp8lab inspect` and replay in `fp8lab run` without amax.csv mismatches; amax.csv
equals max |x| (fp8lab's rules: NaN ignored, inf counts) of the tensors read back from the
snapshots by an independent reader (capture_common.py); BF16 stays BF16; hooks are gone after the
`with` block, also after an exception; a module that did not run and a step without backward
give amax 0 rows; several calls of a module in a step; steps must increase; the rank_<r>/ layout.

Usage: test_capture_recorder.py FP8LAB_BIN. Needs torch >= 1.13 (capture_common.py: when the running interpreter lacks
it, the test re-runs itself with /usr/bin/python3, Debian's python3-torch, if that one has it;
exit 77, "skipped: torch not importable", when neither does). Last line: "N passed, M failed".
"""
import os
import struct
import sys
import warnings

from capture_common import (  # noqa: E402
    FOUR, Net, fp8lab_capture, hooks_empty, inspect_ok, main, nn, read_amax_csv,
    read_safetensors, ref_amax, replay_ok, test, torch, train_steps)


def f32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]


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
    without backward (a torch.no_grad() forward in training mode): grad_output 0, the forward
    roles recorded (issue 44: an eval() forward is not recorded; test_capture_eval.py)."""
    torch.manual_seed(4)
    model = Net()
    trace = os.path.join(tmp, "t")
    with fp8lab_capture.Recorder(model, trace, modules="*", every=2, roles=FOUR) as rec:
        train_steps(model, rec, 2)           # steps 0, 1: extra does not run
        model.use_extra = True
        train_steps(model, rec, 1, start=2)  # step 2: extra runs
        with torch.no_grad():
            model(torch.randn(2, 8))
        rec.step(3)                          # step 3: forward only, no_grad in training mode
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


if __name__ == "__main__":
    sys.exit(main())
