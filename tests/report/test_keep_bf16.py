#!/usr/bin/env python3
"""kind = bf16, the flush budget, and the advice as TransformerEngine code (issue 28).

  - by hand on one tensor and one GEMM: a layer of small integers (exact in FP32), replayed with
    kind bf16 and current scaling, exact GEMM error: bf16's steps.csv rows count the tensor's
    zeros and nothing else (no scale, mse 0, snr inf, overshoot -inf, cos_sim 1) and its three
    GEMM errors are exactly 0, while current scaling's are not (13 is not an E4M3 value at
    scale 448/17);
  - the advice: a trace built so that each fix is needed once (a module whose input has one
    outlier: current scaling flushes 2047 of its 2048 values to zero, over the flush budget;
    a tensor that grows 2.5x a step: margin 2; one with two 100x spikes: current scaling; weights
    whose small values flush at margin 2: the model setting stays at margin 0 or 1).
    advice.ini keeps module b.fc in BF16 (all three of its tensors), and `fp8lab run
    advice.ini`, started from another folder, confirms it (every tensor within the budgets,
    b.fc's rows of kind bf16). Without the flush budget nothing clips b.fc.input: the model
    setting fits it, as before; without a bf16 section, current scaling with a note;
  - te_recipe.py compiles (py_compile), names exactly the modules advice.ini advises (d.fc: its
    input needs current scaling and its gradient margin 2, so current scaling), and apply()
    run against stub TransformerEngine modules gives each module its recipe in a nested
    autocast region nested in the model's (None: enabled=False), with te.autocast (TE >= 2.9)
    and with fp8_autocast alone (before), refusing a model without those modules.

Usage: test_keep_bf16.py FP8LAB_BIN. Needs numpy.
"""
import configparser
import contextlib
import math
import os
import py_compile
import shutil
import sys
import tempfile
import types

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import pycommon  # noqa: E402
from pycommon import check, csv_rows as rows, save_npy as save  # noqa: E402

try:
    import numpy as np
except ImportError:
    pycommon.require("numpy is not installed")

BIN = os.path.abspath(sys.argv[1])


def run(args, cwd):
    return pycommon.run_cli(BIN, args, cwd)


# ------------------------------------------------------------------ by hand: one tensor, one GEMM

def hand(tmp):
    trace = os.path.join(tmp, "hand", "trace")
    x = np.array([[0, 1, -2, 3, 13, 0, 5, -7], [17, 2, 0, -1, 4, 6, -3, 8],
                  [1, 0, 0, 2, -5, 9, 11, -4], [3, -6, 7, 0, 1, 2, -2, 10]], dtype=np.float32)
    w = np.array([[1, -1, 2, 0, 3, 1, -2, 1], [0, 2, -1, 4, 1, -3, 2, 13]], dtype=np.float32)
    g = np.array([[1, -2], [3, 0], [-1, 5], [2, 13]], dtype=np.float32)
    for t in range(3):
        d = os.path.join(trace, "step_%d" % t)
        save(d, "h.fc.input", x)
        save(d, "h.fc.weight", w)
        save(d, "h.fc.grad_output", g)
    ini = os.path.join(tmp, "hand", "h.ini")
    with open(ini, "w") as f:
        f.write("[trace]\npath = trace\n\n[recipe.cur]\nkind = current\n\n[recipe.keep]\n"
                "kind = bf16\n\n[analysis]\ngemm = true\ngemm_error = exact\n\n[output]\n"
                "dir = out\n")
    rc, out = run(["run", "--no-report", ini], tmp)
    check(rc == 0, "hand run: rc %d: %s" % (rc, out[-400:]))
    if rc:
        return
    res = os.path.join(tmp, "hand", "out")
    steps = [r for r in rows(os.path.join(res, "steps.csv")) if r["recipe"] == "keep"]
    check(len(steps) == 9, "hand: 9 bf16 rows (3 tensors x 3 steps), got %d" % len(steps))
    arrays = {"h.fc.input": x, "h.fc.weight": w, "h.fc.grad_output": g}
    for r in steps:
        a = arrays[r["tensor"]]
        want = {"kind": "bf16", "scale": "", "n": str(a.size), "nonfinite": "0",
                "zeros": str(int((a == 0).sum())), "overflow": "0", "underflow": "0",
                "subnormal": "0", "clipped": "0", "mse": "0", "snr_db": "inf",
                "overshoot": "-inf", "cos_sim": "1", "amax": "%g" % np.abs(a).max()}
        for k, v in want.items():
            check(r[k] == v, "hand: %s step %s: %s = %r, expected %r"
                  % (r["tensor"], r["step"], k, r[k], v))
    gemm = rows(os.path.join(res, "gemm.csv"))
    keep = [r for r in gemm if r["recipe"] == "keep"]
    cur = [r for r in gemm if r["recipe"] == "cur"]
    check(len(keep) == 9 and len(cur) == 9, "hand: 9 GEMM rows per configuration")
    for r in keep:  # integers: the FP32 GEMM of the uncast operands is exact
        check(float(r["rel_error"]) == 0.0, "hand: bf16 %s step %s rel_error %s, expected 0"
              % (r["gemm"], r["step"], r["rel_error"]))
    for r in cur:  # 13 * (448 / 17) = 342.6 is not an E4M3 value: current scaling errs
        check(float(r["rel_error"]) > 1e-4, "hand: current %s rel_error %s, expected > 1e-4"
              % (r["gemm"], r["rel_error"]))


# ------------------------------------------------------------------ the advice

STEPS = 10


def advice_trace(trace):
    rng = np.random.default_rng(28)
    base = {n: rng.uniform(0.5, 1.0, (32, 64)) * rng.choice([-1, 1], (32, 64))
            for n in ("in", "w", "g")}
    small = rng.uniform(0.5, 1.0, 2048) * 1e-3          # b.fc.input's bulk: flushed
    sens = np.full(2048, 0.1)
    sens[:31] = 5e-6    # 1.5%: flushed at margin 2 (5e-6 * 112 < 2^-10), kept at margins 0, 1
    sens[31] = 1.0
    for t in range(STEPS):
        d = os.path.join(trace, "step_%d" % t)
        save(d, "a.fc.input", base["in"])
        save(d, "a.fc.weight", base["w"] * 0.05)
        save(d, "a.fc.grad_output", base["g"][:, :16] * 1e-3)
        xb = small.copy()
        xb[0] = 1e4
        save(d, "b.fc.input", xb.reshape(32, 64))
        save(d, "b.fc.weight", base["w"] * 0.05)
        save(d, "b.fc.grad_output", base["g"][:, :16] * 1e-3)
        save(d, "c.fc.input", base["in"] * 2.5 ** t)
        save(d, "d.fc.input", base["in"] * (100.0 if t in (3, 7) else 1.0))
        save(d, "d.fc.grad_output", base["g"][:, :16] * 1e-3 * 2.5 ** t)
        for m in ("p", "q", "r"):
            save(d, m + ".fc.weight", sens)
    return small


def write_ini(path, flush=True, keep=True):
    with open(path, "w") as f:
        f.write("[trace]\npath = trace\n\n[recipe.delayed]\nkind = delayed\nhistory_len = 1\n"
                "margin = 0, 1, 2\n\n[recipe.current]\nkind = current\n\n")
        if keep:
            f.write("[recipe.keep]\nkind = bf16\n\n")
        f.write("[analysis]\n" + ("flush_budget = 0.01\n" if flush else "") +
                "\n[output]\ndir = out\n")


def advice_sections(path):
    cp = configparser.ConfigParser(inline_comment_prefixes=(";",), comment_prefixes=(";",))
    cp.read(path)
    return {s[len("recipe."):]: dict(cp[s]) for s in cp.sections() if s.startswith("recipe.")}


def names(v):
    return sorted(t.strip() for t in v.split(","))


def advice(tmp):
    root = os.path.join(tmp, "adv")
    small = advice_trace(os.path.join(root, "trace"))
    write_ini(os.path.join(root, "e.ini"))
    rc, out = run(["run", "e.ini"], root)
    check(rc == 0, "advice run: rc %d: %s" % (rc, out[-600:]))
    if rc:
        return None
    res = os.path.join(root, "out")
    # the flush rate current scaling gives b.fc.input, by hand: scale 448 / 1e4 puts every bulk
    # value below half the smallest E4M3 subnormal (2^-10): 2047 of 2048 flushed, every step
    scale = np.float32(448.0) / np.float32(1e4)
    check(float(np.abs(small[1:]).max()) * scale < 2.0 ** -10, "hand: the bulk flushes")
    an = {(r["tensor"], r["recipe"], r["margin"]): r for r in rows(os.path.join(res, "analysis.csv"))}
    ur = float(an[("b.fc.input", "current", "")]["underflow_rate"])
    check(abs(ur - 2047 / 2048) < 1e-6, "b.fc.input current underflow_rate %g, expected 2047/2048" % ur)
    rec = {r["name"]: r for r in rows(os.path.join(res, "recommendations.csv")) if r["scope"] == "tensor"}
    check(rec["b.fc.input"]["kind"] == "bf16" and rec["b.fc.input"]["recipe"] == "keep",
          "recommendations.csv: b.fc.input kept in BF16: %s" % rec["b.fc.input"])
    check("misses the flush budget" in rec["b.fc.input"]["note"], "b.fc.input note names the budget")
    check(rec["d.fc.input"]["kind"] == "current", "d.fc.input: current scaling")
    secs = advice_sections(os.path.join(res, "advice.ini"))
    check(secs.get("advice_bf16", {}).get("kind") == "bf16" and
          names(secs["advice_bf16"].get("tensors", "")) ==
          ["b.fc.grad_output", "b.fc.input", "b.fc.weight"],
          "advice.ini keeps module b.fc in BF16, all three tensors: %s" % secs.get("advice_bf16"))
    check(names(secs.get("advice_current", {}).get("tensors", "")) == ["d.fc.input"] and
          secs["advice_current"].get("kind") == "current",
          "advice.ini: d.fc.input current: %s" % secs.get("advice_current"))
    # the per-module form (label advice_module): a module takes its strongest fix on every tensor
    check(names(secs.get("advice_module_current", {}).get("tensors", "")) ==
          ["d.fc.grad_output", "d.fc.input"] and
          names(secs.get("advice_module_margin_2", {}).get("tensors", "")) == ["c.fc.input"] and
          names(secs.get("advice_module_bf16", {}).get("tensors", "")) ==
          ["b.fc.grad_output", "b.fc.input", "b.fc.weight"],
          "advice.ini, label advice_module: %s" % {k: v for k, v in secs.items() if "module" in k})
    check(names(secs.get("advice_margin_2", {}).get("tensors", "")) ==
          ["c.fc.input", "d.fc.grad_output"], "advice.ini: margin 2 for the growing tensors: %s"
          % secs.get("advice_margin_2"))
    with open(os.path.join(res, "advice.ini")) as f:
        check("flush_budget = 0.01\n" in f.read(), "advice.ini carries flush_budget")
    with open(os.path.join(res, "report.md")) as f:
        rep = f.read()
    check("BF16 for module b.fc" in rep, "report.md: BF16 for module b.fc")
    check("te_recipe.py" in rep, "report.md names te_recipe.py")

    # the replay of advice.ini, started from another folder with a relative path
    other = os.path.join(tmp, "elsewhere")
    os.makedirs(other, exist_ok=True)
    rel = os.path.relpath(os.path.join(res, "advice.ini"), other)
    rc, out = run(["run", rel], other)
    check(rc == 0, "fp8lab run advice.ini: rc %d: %s" % (rc, out[-600:]))
    if rc == 0:
        ares = os.path.join(res, "advice")
        summ = [r for r in rows(os.path.join(ares, "summary.csv")) if r["recipe"] == "advice"]
        kinds = {r["tensor"]: r["kind"] for r in summ}
        check(all(kinds[t] == "bf16" for t in ("b.fc.input", "b.fc.weight", "b.fc.grad_output")),
              "advice replay: b.fc's rows are bf16: %s" % kinds)
        check(kinds.get("d.fc.input") == "current" and kinds.get("c.fc.input") == "delayed",
              "advice replay: the other fixes: %s" % kinds)
        with open(os.path.join(ares, "report.md")) as f:
            arep = f.read()
        check("**12 of 12 tensors** within the budgets" in arep and
              "the advice holds on this replay" in arep, "advice replay confirms the advice")

    # without the flush budget (delayed scaling fits b.fc.input: nothing clips), without bf16
    for flush, keep, want in ((False, True, "without flush_budget"), (True, False, "without bf16")):
        d = os.path.join(tmp, "adv_" + want.split()[1])
        shutil.copytree(os.path.join(root, "trace"), os.path.join(d, "trace"))
        write_ini(os.path.join(d, "e.ini"), flush, keep)
        rc, out = run(["run", "e.ini"], d)
        check(rc == 0, "%s: rc %d: %s" % (want, rc, out[-400:]))
        if rc:
            continue
        s = advice_sections(os.path.join(d, "out", "advice.ini"))
        listed = [t for kv in s.values() for t in names(kv.get("tensors", ""))]
        if keep:  # no flush budget: nothing clips b.fc.input, delayed scaling fits it
            check("advice_bf16" not in s and "b.fc.input" not in listed,
                  "%s: b.fc.input under the model setting, no BF16: %s" % (want, s))
        else:
            check("b.fc.input" in names(s.get("advice_current", {}).get("tensors", "")),
                  "%s: b.fc.input current scaling: %s" % (want, s))
        r = {x["name"]: x for x in rows(os.path.join(d, "out", "recommendations.csv"))
             if x["scope"] == "tensor"}
        if not keep:
            check("a bf16 section in the sweep" in r["b.fc.input"]["note"],
                  "without bf16: the note says what would help: %s" % r["b.fc.input"]["note"])
    return res, secs


# ------------------------------------------------------------------ te_recipe.py

class Recorder:
    def __init__(self, kind, **kw):
        self.kind, self.kw = kind, kw

    def __eq__(self, other):
        return isinstance(other, Recorder) and (self.kind, self.kw) == (other.kind, other.kw)

    def __repr__(self):
        return "%s(%s)" % (self.kind, self.kw)


def stub_te(log, new_api):
    """TE's modules as far as te_recipe.py uses them; new_api: with te.autocast (TE >= 2.9,
    `recipe=`), else only fp8_autocast (`fp8_recipe=`)."""
    te = types.ModuleType("transformer_engine")
    pt = types.ModuleType("transformer_engine.pytorch")
    common = types.ModuleType("transformer_engine.common")
    recipe = types.ModuleType("transformer_engine.common.recipe")

    @contextlib.contextmanager
    def fp8_autocast(enabled=True, calibrating=False, fp8_recipe=None, fp8_group=None):
        log.append(("enter", enabled, fp8_recipe))
        yield
        log.append(("exit",))

    @contextlib.contextmanager
    def autocast(enabled=True, calibrating=False, recipe=None, amax_reduction_group=None):
        log.append(("enter", enabled, recipe))
        yield
        log.append(("exit",))

    pt.fp8_autocast = fp8_autocast
    if new_api:
        pt.autocast = autocast
    recipe.DelayedScaling = lambda **kw: Recorder("DelayedScaling", **kw)
    recipe.Float8CurrentScaling = lambda **kw: Recorder("Float8CurrentScaling", **kw)
    recipe.Format = types.SimpleNamespace(HYBRID="HYBRID", E4M3="E4M3", E5M2="E5M2")
    te.pytorch, te.common, common.recipe = pt, common, recipe
    return {"transformer_engine": te, "transformer_engine.pytorch": pt,
            "transformer_engine.common": common, "transformer_engine.common.recipe": recipe}


class Module:
    def __init__(self, name, log):
        self.name, self.log = name, log

    def forward(self, x):
        self.log.append(("forward", self.name))
        return x


class Model:
    def __init__(self, names, log):
        self.mods = {n: Module(n, log) for n in names}

    def named_modules(self):
        return [("", self)] + list(self.mods.items())


def te_code(res, secs):
    path = os.path.join(res, "te_recipe.py")
    check(os.path.exists(path), "te_recipe.py written next to advice.ini")
    if not os.path.exists(path):
        return
    try:
        py_compile.compile(path, doraise=True)
    except py_compile.PyCompileError as e:
        check(False, "te_recipe.py does not compile: %s" % e)
        return
    for new_api in (True, False):
        te_code_run(path, secs, new_api)


def te_code_run(path, secs, new_api):
    log = []
    stubs = stub_te(log, new_api)
    saved = {k: sys.modules.get(k) for k in stubs}
    sys.modules.update(stubs)
    try:
        ns = {}
        with open(path) as f:
            exec(compile(f.read(), path, "exec"), ns)
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    # the modules advice.ini advises: those of its sections with a tensors key
    advised = set()
    for s, kv in secs.items():
        if "tensors" in kv:
            advised |= {t.rsplit(".", 1)[0] for t in names(kv["tensors"])}
    check(set(ns["MODULES"]) == advised == {"b.fc", "c.fc", "d.fc"},
          "te_recipe.py MODULES %s, advice.ini's modules %s" % (sorted(ns["MODULES"]), sorted(advised)))
    model_margin = int(secs["advice_rest"]["margin"])
    check(ns["MODEL_RECIPE"] == Recorder("DelayedScaling", fp8_format="HYBRID", amax_history_len=1,
                                         margin=model_margin, amax_compute_algo="max"),
          "MODEL_RECIPE %r" % ns["MODEL_RECIPE"])
    want = {"b.fc": None,
            "c.fc": Recorder("DelayedScaling", fp8_format="HYBRID", amax_history_len=1, margin=2,
                             amax_compute_algo="max"),
            "d.fc": Recorder("Float8CurrentScaling", fp8_format="HYBRID")}
    for k, v in want.items():
        check(ns["MODULES"].get(k) == v, "MODULES[%s] = %r, expected %r" % (k, ns["MODULES"].get(k), v))
    model = Model(["a.fc", "b.fc", "c.fc", "d.fc", "p.fc"], log)
    ns["apply"](model)
    for name in ("a.fc", "b.fc", "d.fc"):
        del log[:]
        model.mods[name].forward(1)
        if name == "a.fc":
            check(log == [("forward", "a.fc")], "a.fc left as it was: %s" % log)
        else:
            r = want[name]
            check(log == [("enter", r is not None, r), ("forward", name), ("exit",)],
                  "%s forward in its own region (te.autocast: %s): %s" % (name, new_api, log))
    del log[:]
    with ns["region"](ns["MODEL_RECIPE"]):
        model.mods["d.fc"].forward(1)
    check(log == [("enter", True, ns["MODEL_RECIPE"]), ("enter", True, want["d.fc"]),
                  ("forward", "d.fc"), ("exit",), ("exit",)], "nested regions: %s" % log)
    try:
        ns["apply"](Model(["a.fc", "b.fc"], log))
        check(False, "apply() on a model without c.fc and d.fc must raise")
    except KeyError as e:
        check("c.fc" in str(e) and "d.fc" in str(e), "apply() names the missing modules: %s" % e)


def main():
    tmp = tempfile.mkdtemp(prefix="fp8lab_bf16_")
    try:
        hand(tmp)
        got = advice(tmp)
        if got:
            te_code(*got)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if not pycommon.FAILS:
        print("ok: kind bf16 by hand, the flush budget's advice replayed, te_recipe.py")
    return pycommon.finish()


if __name__ == "__main__":
    sys.exit(main())
