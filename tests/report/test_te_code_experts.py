#!/usr/bin/env python3
"""te_recipe.py for expert GEMMs (issue 40): TransformerEngine applies a recipe to a module, and
all experts of a GroupedLinear take one recipe, so the report's TE code names the GroupedLinear,
not an expert.

A trace (npy, 10 steps) whose misfits under the model setting (delayed, history 1, margin 0;
the weights p/q/r.fc flush at margin 2 under the flush budget, as in test_keep_bf16.py) are:
  - moe.experts.0.input, growing 2.5x a step: margin 2; moe.experts.1.input, two 100x spikes:
    current scaling (TE GroupedLinear `moe`, import-te's `moe.gemm_<i>`); moe.experts.2.input
    fits;
  - m.mlp.experts.1.gate_up_proj.input, growing: margin 2 (HF's fused experts: the experts
    module `m.mlp.experts`).
te_recipe.py must list exactly two modules: "moe" with current scaling (the strongest fix of its
experts) and "m.mlp.experts" with margin 2, its comment naming each expert tensor's fix, and
apply() on a stub model with those modules must wrap them.

Usage: test_te_code_experts.py FP8LAB_BIN. Needs numpy.
"""
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import types

try:
    import numpy as np
except ImportError:
    print("skipped: numpy is not installed")
    sys.exit(77)

BIN = os.path.abspath(sys.argv[1])


def save(d, name, a):
    os.makedirs(d, exist_ok=True)
    np.save(os.path.join(d, name + ".npy"), np.asarray(a, dtype="<f4"))


def make_trace(trace):
    rng = np.random.default_rng(40)
    x = rng.uniform(0.5, 1.0, (32, 64)) * rng.choice([-1, 1], (32, 64))
    w = rng.uniform(0.5, 1.0, (32, 64)) * rng.choice([-1, 1], (32, 64)) * 0.05
    g = rng.uniform(0.5, 1.0, (32, 16)) * rng.choice([-1, 1], (32, 16)) * 1e-3
    sens = np.full(2048, 0.1)
    sens[:31] = 5e-6    # flushed at margin 2: the model setting stays at margin 0
    sens[31] = 1.0
    for t in range(10):
        d = os.path.join(trace, "step_%d" % t)
        save(d, "a.fc.input", x)
        save(d, "a.fc.weight", w)
        save(d, "a.fc.grad_output", g)
        save(d, "moe.experts.0.input", x * 2.5 ** t)
        save(d, "moe.experts.1.input", x * (100.0 if t in (3, 7) else 1.0))
        save(d, "moe.experts.2.input", x)
        save(d, "m.mlp.experts.0.gate_up_proj.input", x)
        save(d, "m.mlp.experts.1.gate_up_proj.input", x * 2.5 ** t)
        for m in ("p", "q", "r"):
            save(d, m + ".fc.weight", sens)


class Rec:
    def __init__(self, kind, **kw):
        self.kind, self.kw = kind, kw

    def __eq__(self, other):
        return isinstance(other, Rec) and (self.kind, self.kw) == (other.kind, other.kw)

    def __repr__(self):
        return "%s(%s)" % (self.kind, self.kw)


def stubs(log):
    te = types.ModuleType("transformer_engine")
    pt = types.ModuleType("transformer_engine.pytorch")
    common = types.ModuleType("transformer_engine.common")
    recipe = types.ModuleType("transformer_engine.common.recipe")

    @contextlib.contextmanager
    def autocast(enabled=True, recipe=None):
        log.append(("enter", enabled, recipe))
        yield
        log.append(("exit",))

    pt.autocast = pt.fp8_autocast = autocast
    recipe.DelayedScaling = lambda **kw: Rec("DelayedScaling", **kw)
    recipe.Float8CurrentScaling = lambda **kw: Rec("Float8CurrentScaling", **kw)
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


def main():
    tmp = tempfile.mkdtemp(prefix="fp8lab_te_experts_")
    fails = []
    try:
        make_trace(os.path.join(tmp, "trace"))
        with open(os.path.join(tmp, "e.ini"), "w") as f:
            f.write("[trace]\npath = trace\n\n[recipe.delayed]\nkind = delayed\nhistory_len = 1\n"
                    "margin = 0, 1, 2\n\n[recipe.current]\nkind = current\n\n[analysis]\n"
                    "flush_budget = 0.01\n\n[output]\ndir = out\n")
        p = subprocess.run([BIN, "run", "e.ini", "--quiet"], cwd=tmp, capture_output=True,
                           text=True)
        if p.returncode != 0:
            print("FAIL: fp8lab run: exit %d: %s" % (p.returncode, p.stderr[-800:]))
            return 1
        path = os.path.join(tmp, "out", "te_recipe.py")
        with open(path) as f:
            text = f.read()
        log = []
        saved = {k: sys.modules.get(k) for k in stubs(log)}
        sys.modules.update(stubs(log))
        try:
            ns = {}
            exec(compile(text, path, "exec"), ns)
        finally:
            for k, v in saved.items():
                if v is None:
                    sys.modules.pop(k, None)
                else:
                    sys.modules[k] = v
        want = {"moe": Rec("Float8CurrentScaling", fp8_format="HYBRID"),
                "m.mlp.experts": Rec("DelayedScaling", fp8_format="HYBRID", amax_history_len=1,
                                     margin=2, amax_compute_algo="max")}
        if ns["MODEL_RECIPE"] != Rec("DelayedScaling", fp8_format="HYBRID", amax_history_len=1,
                                     margin=0, amax_compute_algo="max"):
            fails.append("MODEL_RECIPE %r" % ns["MODEL_RECIPE"])
        if ns["MODULES"] != want:
            fails.append("MODULES %r, expected %r" % (ns["MODULES"], want))
        for line in ('"moe": Float8CurrentScaling(fp8_format=Format.HYBRID),  # experts.0.input: '
                     'margin 2; experts.1.input: current scaling\n',
                     '"m.mlp.experts": DelayedScaling(fp8_format=Format.HYBRID, '
                     'amax_history_len=1, margin=2, amax_compute_algo="max"),  # '
                     '1.gate_up_proj.input: margin 2\n'):
            if line not in text:
                fails.append("te_recipe.py lacks the line %r:\n%s" % (line, text))
        mods = {n: Module(n, log) for n in ("moe", "m.mlp.experts", "a.fc")}
        model = types.SimpleNamespace(named_modules=lambda: [("", None)] + list(mods.items()))
        ns["apply"](model)
        del log[:]
        mods["moe"].forward(1)
        if log != [("enter", True, want["moe"]), ("forward", "moe"), ("exit",)]:
            fails.append("moe's forward in its own region: %s" % log)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for f in fails:
        print("FAIL:", f)
    if fails:
        return 1
    print("ok: te_recipe.py names the GroupedLinear moe and the experts module m.mlp.experts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
