#!/usr/bin/env python3
"""Hand cases of the closed-loop emulator (python/fp8lab/closedloop.py, issue 44), against an
independent FP8 cast written from RECIPES.md (closedloop_common.ref_qdq), exact equality:
- current scaling on one Linear: y is F.linear of the independently cast x and W (E4M3, each
  scale RN32(448 / amax)); dW = ghat^T xhat and dX = ghat What with g cast to E5M2; the bias
  gradient is g summed over rows, unquantized; counts.csv's row of each tensor;
- delayed scaling over steps and micro-batches: step 0 casts with scale 1, each later
  micro-batch with RN32(RN32(fp8_max 2^-margin) / max of the history's amaxes), the history
  (history_len 3) filled by hand; a frozen evaluation changes no scale and writes no row;
- names, slots and what stays in high precision (a section's `tensors`, `modules`);
- write_te_scale on a Recorder's amax.csv, and its refusal of an amax that is not the emulator's;
- a call under torch.autocast refused; a checkpointed model's recomputation counted once;
- what is not emulated is said: an embedding has no slot, fused 3-D experts warned of at the
  start, the Recorder's tensors the emulator never saw named by write_te_scale.
Usage: test_closedloop_hand.py FP8LAB_BIN. Last line: "N passed, M failed".
"""
import os
import sys

from closedloop_common import (  # noqa: F401
    FP8_MAX, amax, current_scale, f32, main, np, read_counts, ref_qdq, test, torch, write_ini)

F = torch.nn.functional


def _emulator(*a, **kw):
    from fp8lab.closedloop import Emulator
    return Emulator(*a, **kw)


def _data(seed, shape, mag=1.0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g) * mag
    x.view(-1)[0] = 3.5 * mag  # a fixed outlier
    return x


class One(torch.nn.Module):
    def __init__(self, bias=True):
        super().__init__()
        torch.manual_seed(0)
        self.fc = torch.nn.Linear(16, 8, bias=bias)


def _same(a, b, what):
    a, b = torch.as_tensor(a), torch.as_tensor(b)
    assert a.shape == b.shape, "%s: shapes %s and %s" % (what, a.shape, b.shape)
    bad = (a != b).sum().item()
    assert bad == 0, "%s: %d of %d elements differ (max |diff| %g)" % (
        what, bad, a.numel(), (a - b).abs().max().item())


@test
def current_one_linear(tmp):
    ini = write_ini(os.path.join(tmp, "e.ini"), "[recipe.cur]\nkind = current\nformat = hybrid\n")
    m = One()
    x = _data(1, (2, 3, 16))
    r = _data(2, (2, 3, 8), 1e-3)  # the output gradient: loss = sum(y * r)
    counts = os.path.join(tmp, "counts.csv")
    emu = _emulator(m, ini, "cur", counts=counts)
    xx = x.clone().requires_grad_(True)
    with emu:
        y = m.fc(xx)
        (y * r).sum().backward()
        emu.step(0)
    # the independent computation
    x2, w, g2 = x.reshape(-1, 16), m.fc.weight.detach(), r.reshape(-1, 8)
    sx, sw, sg = (current_scale(amax(x2), "e4m3"), current_scale(amax(w), "e4m3"),
                  current_scale(amax(g2), "e5m2"))
    xh = torch.from_numpy(ref_qdq(x2.numpy(), sx, "e4m3"))
    wh = torch.from_numpy(ref_qdq(w.numpy(), sw, "e4m3"))
    gh = torch.from_numpy(ref_qdq(g2.numpy(), sg, "e5m2"))
    assert (xh != x2).any() and (gh != g2).any(), "the cast changed nothing: a vacuous test"
    _same(y.detach(), F.linear(xh, wh, m.fc.bias.detach()).reshape(2, 3, 8), "y")
    _same(m.fc.weight.grad, gh.t().mm(xh), "dW")
    _same(xx.grad, gh.mm(wh).reshape(2, 3, 16), "dX")
    _same(m.fc.bias.grad, g2.sum(0), "db (unquantized g)")
    # the C library's cast itself, element by element
    rec = emu._recipe
    for name, t, s, fmt in (("fc.input", x2, sx, "e4m3"), ("fc.weight", w, sw, "e4m3"),
                            ("fc.grad_output", g2, sg, "e5m2")):
        slot = rec.slot(name)
        assert rec.kind(slot) == "current" and rec.format(slot) == fmt, (name, rec.kind(slot))
        xhat, st = rec.qdq(slot, t.numpy().copy())
        _same(torch.from_numpy(np.asarray(xhat)), torch.from_numpy(ref_qdq(t.numpy(), s, fmt)),
              name + " cast")
        assert f32(st.scale) == f32(s), (name, st.scale, s)
    rows = {r["tensor"]: r for r in read_counts(counts)}
    assert sorted(rows) == ["fc.grad_output", "fc.input", "fc.weight"], sorted(rows)
    for name, t, s, fmt in (("fc.input", x2, sx, "e4m3"), ("fc.weight", w, sw, "e4m3"),
                            ("fc.grad_output", g2, sg, "e5m2")):
        row = rows[name]
        assert (row["step"], row["micro"], row["kind"], row["format"]) == ("0", "0", "current",
                                                                          fmt), row
        assert f32(float(row["amax"])) == f32(amax(t)), row
        assert f32(float(row["scale"])) == f32(s), (row, s)
        assert int(row["n"]) == t.numel(), row
        assert int(row["overflow"]) >= 0 and int(row["zeros"]) == int((t == 0).sum()), row
        ov = float(row["overshoot"])
        assert abs(ov - np.log2(f32(amax(t)) * f32(s) / FP8_MAX[fmt])) < 1e-6, row
    print("current scaling, one Linear: y, dW, dX, db exact; scales %s %s %s" % (sx, sw, sg))


@test
def delayed_over_steps(tmp):
    L, margin = 3, 1
    ini = write_ini(os.path.join(tmp, "e.ini"),
                    "[recipe.del]\nkind = delayed\nformat = hybrid\nhistory_len = %d\n"
                    "margin = %d\namax_compute = max\n" % (L, margin))
    m = One(bias=False)
    counts = os.path.join(tmp, "counts.csv")
    emu = _emulator(m, ini, "del", counts=counts)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    mags = [1.0, 4.0, 0.5, 0.25, 2.0, 8.0, 1.0]   # input magnitude per micro-batch
    plan = [(0, 1), (1, 1), (2, 1), (3, 2), (4, 1), (5, 1)]  # (step, micro-batches)
    hist = {"fc.input": [], "fc.weight": [], "fc.grad_output": []}
    fmt = {"fc.input": "e4m3", "fc.weight": "e4m3", "fc.grad_output": "e5m2"}
    expect = []  # (step, micro, tensor, amax, scale)
    k = 0
    with emu:
        for step, micros in plan:
            for mi in range(micros):
                x = _data(10 + k, (5, 16), mags[k])
                r = _data(30 + k, (5, 8), 1e-2 * mags[k])
                w = m.fc.weight.detach().clone()
                scales = {}
                for n in hist:  # the scale each tensor casts with: from earlier micro-batches
                    h = hist[n][-L:]
                    scales[n] = 1.0 if not h else current_scale(max(h), fmt[n], margin)
                    assert f32(emu.scale(n)) == f32(scales[n]), (step, mi, n, emu.scale(n),
                                                                scales[n])
                y = m.fc(x)
                (y * r).sum().backward()
                xh = torch.from_numpy(ref_qdq(x.numpy(), scales["fc.input"], "e4m3"))
                wh = torch.from_numpy(ref_qdq(w.numpy(), scales["fc.weight"], "e4m3"))
                gh = torch.from_numpy(ref_qdq(r.numpy(), scales["fc.grad_output"], "e5m2"))
                _same(y.detach(), F.linear(xh, wh), "y at step %d micro %d" % (step, mi))
                am = {"fc.input": amax(x), "fc.weight": amax(w), "fc.grad_output": amax(r)}
                for n in hist:
                    hist[n].append(f32(am[n]))
                    expect.append((step, mi, n, am[n], scales[n]))
                if mi + 1 < micros:
                    emu.micro_step()
                    grad_w = m.fc.weight.grad.clone()
                    _same(grad_w, gh.t().mm(xh), "dW of micro 0")
                k += 1
            opt.step()
            opt.zero_grad()
            emu.step(step)
            if step == 2:  # an evaluation with a huge input: no amax recorded, no row
                with emu.frozen(), torch.no_grad():
                    m.fc(torch.full((4, 16), 1e4))
                    m.fc(torch.full((4, 16), 1e4))
    rows = read_counts(counts)
    got = [(int(r["step"]), int(r["micro"]), r["tensor"], float(r["amax"]), float(r["scale"]))
           for r in rows]
    expect.sort(key=lambda e: (e[0], e[1], e[2]))
    assert len(got) == len(expect), (len(got), len(expect))
    for g, e in zip(got, expect):
        assert g[:3] == e[:3] and f32(g[3]) == f32(e[3]) and f32(g[4]) == f32(e[4]), (g, e)
    assert any(e[4] != 1.0 for e in expect) and expect[0][4] == 1.0
    for n in hist:  # te_scale records: the same numbers
        assert f32(emu.record[(3, 1, n)][1]) == f32([e for e in expect if e[:3] == (3, 1, n)][0][4])
    print("delayed scaling: %d counts rows, scales by hand over %d steps (micro-batches in step "
          "3), frozen evaluation kept out" % (len(got), len(plan)))


@test
def names_slots_modules(tmp):
    """Slots are made in sorted name order for every GEMM; a section's `tensors` and the
    Emulator's `modules` leave tensors in high precision."""
    class Two(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.seq = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(),
                                           torch.nn.Linear(8, 4))
            self.head = torch.nn.Linear(4, 2)

        def forward(self, x):
            return self.head(self.seq(x))

    ini = write_ini(os.path.join(tmp, "e.ini"),
                    "[recipe.c]\nkind = current\nformat = hybrid\ntensors = seq.*\n")
    m = Two()
    emu = _emulator(m, ini, "c")
    x = torch.randn(3, 8)
    with emu:
        h = m.seq(x)
        y = m.head(h)
        y.sum().backward()
        emu.step(0)
    names = sorted(emu.tensors)
    assert names == sorted("%s.%s" % (g, r) for g in ("head", "seq.0_linear", "seq.2_linear")
                           for r in ("input", "weight", "grad_output")), names
    assert all(emu.tensors[n] is None for n in names if n.startswith("head.")), emu.tensors
    assert all(emu.tensors[n] is not None for n in names if n.startswith("seq.")), emu.tensors
    slots = [emu.tensors[n] for n in names if emu.tensors[n] is not None]
    assert slots == sorted(slots), "slots not in sorted name order: %s" % emu.tensors
    _same(y, F.linear(h, m.head.weight, m.head.bias), "head (no section covers it)")
    assert (h != F.linear(torch.relu(F.linear(x, m.seq[0].weight, m.seq[0].bias)),
                          m.seq[2].weight, m.seq[2].bias)).any(), "seq not cast"
    emu2 = _emulator(m, ini, "c", modules="seq.2*")
    with emu2:
        h0 = m.seq[0](x)  # seq.0 is not intercepted: exact
        _same(h0, F.linear(x, m.seq[0].weight, m.seq[0].bias), "seq.0 left out by modules")
        emu2.step(0)
    assert sorted(emu2.tensors) == ["seq.2_linear.grad_output", "seq.2_linear.input",
                                    "seq.2_linear.weight"], sorted(emu2.tensors)


@test
def write_te_scale_rows(tmp):
    import fp8lab.capture as cap
    ini = write_ini(os.path.join(tmp, "e.ini"),
                    "[recipe.d]\nkind = delayed\nformat = hybrid\nhistory_len = 2\n")
    m = One()
    trace = os.path.join(tmp, "trace")
    emu = _emulator(m, ini, "d")
    with emu:
        with cap.Recorder(m, trace, every=0) as rec:
            for s in range(4):
                m.fc(_data(s, (6, 16), 2.0 ** s)).sum().backward()
                rec.step(s)
                emu.step(s)
    rows, filled = emu.write_te_scale(trace)
    assert rows == 12 and filled == 12, (rows, filled)
    with open(os.path.join(trace, "amax.csv")) as f:
        head = f.readline().strip().split(",")
        body = [dict(zip(head, line.strip().split(","))) for line in f]
    assert head[-1] == "te_scale", head
    for b in body:
        want = emu.record[(int(b["step"]), int(b.get("micro") or 0), b["tensor"])][1]
        assert f32(float(b["te_scale"])) == f32(want), (b, want)
    assert [b["te_scale"] for b in body if b["step"] == "0"] == ["1", "1", "1"], body[:3]
    # a row whose amax differs from the emulator's is refused, and the file is left as it was
    path = os.path.join(trace, "amax.csv")
    text = open(path).read()
    lines = text.splitlines()
    v = lines[1].split(",")
    v[2] = "%.9g" % (float(v[2]) * 2)
    lines[1] = ",".join(v)
    open(path, "w").write("\n".join(lines) + "\n")
    try:
        emu.write_te_scale(trace)
    except ValueError as e:
        assert "not the emulator's" in str(e), e
    else:
        raise AssertionError("a wrong amax was accepted")
    assert not [f for f in os.listdir(trace) if ".tmp." in f], os.listdir(trace)



@test
def autocast_refused(tmp):
    """Under torch.autocast the emulated GEMM would run (and its gradient arrive) in another
    dtype than the float32 casts: refused with one clear message, outside it the call runs."""
    ini = write_ini(os.path.join(tmp, "e.ini"), "[recipe.cur]\nkind = current\nformat = hybrid\n")
    m = One()
    with _emulator(m, ini, "cur"):
        try:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                m.fc(_data(1, (4, 16)))
        except RuntimeError as e:
            assert "torch.autocast" in str(e), e
        else:
            raise AssertionError("a call under torch.autocast was not refused")
        assert m.fc(_data(1, (4, 16))).dtype == torch.float32


class _Ck(torch.nn.Module):
    """Two Linears, optionally under activation checkpointing (recomputed in backward)."""
    def __init__(self, ck, reentrant):
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b = torch.nn.Linear(8, 8), torch.nn.Linear(8, 4)
        self.ck, self.reentrant = ck, reentrant

    def blk(self, x):
        return self.b(torch.relu(self.a(x)))

    def forward(self, x):
        if not self.ck:
            return self.blk(x)
        from torch.utils.checkpoint import checkpoint
        if torch.__version__ < "2":
            return checkpoint(self.blk, x)  # 1.13: reentrant only
        return checkpoint(self.blk, x, use_reentrant=self.reentrant)


@test
def checkpointing_counted_once(tmp):
    """A checkpointed model's recomputation casts again with the same scale: counts.csv equals
    the plain model's (each cast counted once), reentrant and not."""
    ini = write_ini(os.path.join(tmp, "e.ini"), "[recipe.cur]\nkind = current\nformat = hybrid\n")

    def run(ck, reentrant, tag):
        m, path = _Ck(ck, reentrant), os.path.join(tmp, "counts_%s.csv" % tag)
        with _emulator(m, ini, "cur", counts=path) as emu:
            for step in range(2):
                x = _data(10 + step, (5, 8)).requires_grad_(True)
                m(x).sum().backward()
                emu.step(step)
        return open(path).read()

    plain = run(False, True, "plain")
    for reentrant in (True, False):
        got = run(True, reentrant, "ck%d" % reentrant)
        assert got == plain, "checkpointed (use_reentrant=%s): counts.csv differs:\n%s\n%s" % (
            reentrant, got, plain)


class _Moe(torch.nn.Module):
    """An embedding, a Linear and a fused 3-D expert weight used through torch.bmm."""
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.emb = torch.nn.Embedding(10, 8)
        self.fc = torch.nn.Linear(8, 8)
        self.experts = torch.nn.Parameter(torch.randn(2, 8, 8) * 0.1)

    def forward(self, idx):
        h = self.fc(self.emb(idx))                       # (2, 4, 8): one row block per expert
        return torch.bmm(h, self.experts)


@test
def what_is_not_emulated_is_said(tmp):
    """An embedding is not a GEMM (no slot); fused 3-D expert weights are not intercepted: one
    warning naming them as the Emulator starts, and write_te_scale names the Recorder's tensors
    it never saw (their rows get no te_scale)."""
    import contextlib
    import io
    import fp8lab.capture as cap
    ini = write_ini(os.path.join(tmp, "e.ini"),
                    "[recipe.d]\nkind = delayed\nformat = hybrid\nhistory_len = 2\n")
    m, trace, err = _Moe(), os.path.join(tmp, "trace"), io.StringIO()
    emu = _emulator(m, ini, "d")
    assert sorted(emu.tensors) == [] and [g for _, g, _, _ in emu._gemms] == ["fc"], emu._gemms
    with contextlib.redirect_stderr(err):
        with emu:
            with cap.Recorder(m, trace, every=0) as rec:
                for s in range(2):
                    m(torch.tensor([[1, 2, 3, 4], [5, 6, 7, 8]])).sum().backward()
                    rec.step(s)
                    emu.step(s)
        emu.write_te_scale(trace)
    text = err.getvalue()
    assert sorted(emu.tensors) == ["fc.grad_output", "fc.input", "fc.weight"], emu.tensors
    assert emu.not_emulated == ["experts"], emu.not_emulated
    assert "1 parameter(s) of 3 or more dimensions" in text and "experts" in text, text
    assert len(emu.uncast) == 6 and all(".experts." in t for t in emu.uncast), emu.uncast
    assert "were not cast by the emulator" in text, text

if __name__ == "__main__":
    sys.exit(main())
