#!/usr/bin/env python3
"""advice.ini replays exactly what te_recipe.py applies, form by form (issue 45, "The CustomRecipe
form and advice.ini agree"), on the quickstart's misfits.

The quickstart (synth:llm, delayed scaling swept, current scaling) is run; its advice.ini is
replayed from another folder; te_recipe.py is applied, in a fresh process with tests/report/
te_stub first on sys.path (TransformerEngine v2.18's module tree, recipes and CustomRecipe
machinery transcribed: docs/frameworks/te_custom.md), to a model of te.Linear modules at the
trace's paths (layers.<i>.qkv/proj/fc1/fc2: unnamed, so TE names them Layer_<n>; the factory sees
those names, not the paths), and one step runs under te_recipe.model_region():
  - per tensor (apply(model), the default on 2.16 and later): every module's quantizers as TE's
    factory gave them, slot by slot (forward: input, weight, output; backward: grad_output,
    grad_input), are read as (kind, format, margin, history, amax_compute) and compared with
    the rows of label `advice` in the replay's summary.csv, tensor by tensor;
  - per module (apply(model, form="module")): each module's forward runs under its own
    region's recipe (Float8CurrentScaling / DelayedScaling / out of FP8), compared with label
    `advice_module`'s rows of all of the module's tensors;
  - the replay's report confirms both labels (every tensor within the budgets);
  - by hand: the quickstart advises current scaling for layers.1.fc1's output and layers.1.fc2's
    input and output; the factory form gives layers.1.fc2's input current scaling (E4M3), every
    output E4M3 current scaling (the factory's nameless slot) and everything else the model's
    delayed setting; the per-module form current scaling for all of layers.1.fc1 and .fc2.

Usage: test_te_custom.py FP8LAB_BIN
"""
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
STUB = os.path.join(HERE, "te_stub")
BIN = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else None
FAILS = []
ROLES_FWD = ("input", "weight", "output")
ROLES_BWD = ("grad_output", "grad_input")


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL:", what)
    return cond


PROBE = r'''
import json, sys, warnings
import transformer_engine.pytorch as te

form = sys.argv[1]

class Block(te.Module):
    def __init__(self):
        super().__init__()
        for g in ("qkv", "proj", "fc1", "fc2"):
            setattr(self, g, te.Linear(64, 64))  # unnamed: Layer_<n>

    def forward(self, x):
        for g in ("qkv", "proj", "fc1", "fc2"):
            x = getattr(self, g)(x)
        return x

class Model(te.Module):
    def __init__(self):
        super().__init__()
        self.layers = te.ModuleList([Block() for _ in range(4)])

    def forward(self, x):
        for b in self.layers:
            x = b(x)
        return x

model = Model()
sys.path.insert(0, sys.argv[2])
import te_recipe
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    out = te_recipe.apply(model, form=None if form == "tensor" else form)
with te_recipe.model_region():
    model(0)
def desc(q):
    if type(q).__name__ == "DelayedScalingRequest":
        return {"kind": "delayed", "fmt": q.fp8_format.name, "margin": q.margin,
                "history": q.amax_history_len, "algo": q.amax_compute_algo}
    return {"kind": "current", "dtype": q.dtype.name}
def rdesc(r):
    if r is None:
        return {"kind": "bf16"}
    n = type(r).__name__
    d = {"kind": "current" if n == "Float8CurrentScaling" else "delayed", "fmt": r.fp8_format.name}
    if n == "DelayedScaling":
        d.update(margin=r.margin, history=r.amax_history_len, algo=r.amax_compute_algo)
    return d
res = {"form": out["form"], "warnings": [str(x.message) for x in w], "mods": {}}
for p, m in model.named_modules():
    if type(m).__name__ != "Linear":
        continue
    e = {"name": m.name, "recipe": rdesc(m.recipe_seen)}
    if hasattr(m, "quantizers"):
        e["q"] = {k: [[r.name + "|" + r.tensor_type if r else None, desc(q)] for r, q in v]
                  for k, v in m.quantizers.items()}
    res["mods"][p] = e
print(json.dumps(res))
'''


def probe(form, recipe_dir, tmp):
    script = os.path.join(tmp, "probe_%s.py" % form)
    with open(script, "w") as f:
        f.write(PROBE)
    env = dict(os.environ, PYTHONPATH=STUB, FP8LAB_TE_STUB_VERSION="2.18")
    p = subprocess.run([sys.executable, script, form, recipe_dir], capture_output=True, text=True,
                       env=env, cwd=tmp)
    last = [l for l in p.stdout.splitlines() if l.startswith("{")]
    if not check(p.returncode == 0 and last, "probe %s: rc %d\n%s%s" % (
            form, p.returncode, p.stdout[-2000:], p.stderr[-3000:])):
        return None
    return json.loads(last[-1])


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def replayed(summary, label):
    """tensor -> what the replay ran under label: (kind, format, margin, history, amax_compute)."""
    out = {}
    for r in rows(summary):
        if r["recipe"] != label:
            continue
        k = r["kind"]
        d = (k, r["format"]) if k != "delayed" else \
            (k, r["format"], int(r["margin"]), int(r["history_len"]), r["amax_compute"])
        if k == "bf16":
            d = (k,)
        if out.setdefault(r["tensor"], d) != d:
            out[r["tensor"]] = ("two settings", out[r["tensor"]], d)
    return out


def from_quantizer(d, role):
    """The replay's row for a TE quantizer of a tensor of this role (HYBRID: E4M3 forward,
    E5M2 backward, as TE's DelayedScaling picks the dtype by the state)."""
    if d["kind"] == "current":
        return ("current", {"kFloat8E4M3": "e4m3", "kFloat8E5M2": "e5m2"}[d["dtype"]])
    fmt = {"HYBRID": "e5m2" if role in ROLES_BWD else "e4m3", "E4M3": "e4m3"}[d["fmt"]]
    return ("delayed", fmt, d["margin"], d["history"], d["algo"])


def from_recipe(d, role):
    if d["kind"] == "bf16":
        return ("bf16",)
    fmt = {"HYBRID": "e5m2" if role in ROLES_BWD else "e4m3", "E4M3": "e4m3"}[d["fmt"]]
    if d["kind"] == "current":
        return ("current", fmt)
    return ("delayed", fmt, d["margin"], d["history"], d["algo"])


def run(tmp):
    shutil.copy(os.path.join(ROOT, "experiments", "quickstart.ini"), os.path.join(tmp, "q.ini"))
    with open(os.path.join(tmp, "q.ini")) as f:
        text = f.read().replace("dir = ../out/quickstart", "dir = out")
    with open(os.path.join(tmp, "q.ini"), "w") as f:
        f.write(text)
    p = subprocess.run([BIN, "run", "q.ini", "--quiet"], cwd=tmp, capture_output=True, text=True)
    if not check(p.returncode == 0, "quickstart: rc %d %s" % (p.returncode, p.stderr[-800:])):
        return
    out = os.path.join(tmp, "out")
    other = os.path.join(tmp, "elsewhere")
    os.makedirs(other)
    p = subprocess.run([BIN, "run", os.path.relpath(os.path.join(out, "advice.ini"), other),
                        "--quiet"], cwd=other, capture_output=True, text=True)
    if not check(p.returncode == 0, "advice replay: rc %d %s" % (p.returncode, p.stderr[-800:])):
        return
    adv = os.path.join(out, "advice")
    summary = os.path.join(adv, "summary.csv")
    with open(os.path.join(adv, "report.md")) as f:
        rep = f.read()
    for label in ("advice", "advice_module"):
        check("The mixed recipe **%s** (a setting per tensor, its sections' `tensors`): **64 of "
              "64 tensors** within the budgets" % label in rep and
              rep.count(": the advice holds on this replay") == 2,
              "the replay confirms label %s" % label)

    # per tensor: the factory's quantizers, slot by slot, against label advice's rows
    res = probe("tensor", out, tmp)
    if res:
        check(res["form"] == "tensor" and not res["warnings"], "tensor form, no warning: %s"
              % {k: res[k] for k in ("form", "warnings")})
        got = {}
        for path, e in res["mods"].items():
            q = e.get("q")
            if not check(q is not None, "%s ran under the CustomRecipe" % path):
                continue
            for state, roles in (("fwd", ROLES_FWD), ("bwd", ROLES_BWD)):
                check(len(q[state]) == len(roles), "%s %s: %d slots" % (path, state, len(q[state])))
                for (rn, d), role in zip(q[state], roles):
                    # the factory saw the module's TE name, not the trace's path
                    check(rn is None if role in ("output", "grad_input") else
                          rn == "%s|%s" % (e["name"], role), "%s %s: role %s" % (path, role, rn))
                    got["%s.%s" % (path, role)] = from_quantizer(d, role)
        want = replayed(summary, "advice")
        common = sorted(set(want) & set(got))
        check(len(common) == 64 and set(want) <= set(got),
              "tensor form: the replay's 64 tensors all have a factory slot (%d common)" % len(common))
        diff = [(t, got[t], want[t]) for t in common if got[t] != want[t]]
        check(not diff, "tensor form: the factory applies other than advice.ini replays: %s" % diff[:5])
        # by hand: the quickstart's misfits (report: layers.1.fc1.output, layers.1.fc2.input and
        # .output need current scaling), in the factory's form
        cur = sorted(t for t in common if got[t][0] == "current")
        check(cur == sorted(["layers.1.fc2.input"] + ["layers.%d.%s.output" % (i, g)
                                                      for i in range(4)
                                                      for g in ("qkv", "proj", "fc1", "fc2")]),
              "tensor form, by hand: current scaling for %s" % cur)
        check(got.get("layers.1.fc2.input") == ("current", "e4m3") and
              got.get("layers.1.fc2.grad_output", ("",))[0] == "delayed",
              "tensor form, by hand: layers.1.fc2 %s" % {t: got.get(t) for t in got
                                                          if t.startswith("layers.1.fc2")})

    # per module: each module's region, against label advice_module's rows
    res = probe("module", out, tmp)
    if res:
        check(res["form"] == "module", "module form: %s" % res["form"])
        got = {}
        for path, e in res["mods"].items():
            for role in ROLES_FWD + ROLES_BWD:
                got["%s.%s" % (path, role)] = from_recipe(e["recipe"], role)
        want = replayed(summary, "advice_module")
        diff = [(t, got.get(t), want[t]) for t in sorted(want) if got.get(t) != want[t]]
        check(len(want) == 64 and not diff,
              "module form: the regions apply other than advice.ini replays: %s" % diff[:5])
        cur = sorted({t.rsplit(".", 1)[0] for t in want if got.get(t, ("",))[0] == "current"})
        check(cur == ["layers.1.fc1", "layers.1.fc2"], "module form, by hand: current for %s" % cur)


def main():
    if BIN is None:
        print(__doc__)
        return 2
    tmp = tempfile.mkdtemp(prefix="fp8lab_te_custom_")
    try:
        run(tmp)
    finally:
        if not os.environ.get("FP8LAB_KEEP_TMP"):
            shutil.rmtree(tmp, ignore_errors=True)
    if FAILS:
        print("%d check(s) failed" % len(FAILS))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
