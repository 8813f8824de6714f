#!/usr/bin/env python3
"""te_recipe.py on TransformerEngine models as TE names them (issue 45, first part).

A trace from TransformerEngine's debug logs (nvdlfw_inspect's statistics files) of a model of
TransformerLayers named `decoder.<i>` and an unnamed te.Linear head: the GEMMs carry the names
TE's debug API gives them, written here by hand from TE's sources (docs/frameworks/te.md 1.3):
`decoder.<i>.self_attention.layernorm_linear_qkv`, `decoder.<i>.self_attention.proj`,
`decoder.<i>.layernorm_mlp.fc1`, `decoder.<i>.layernorm_mlp.fc2` and `Layer_1` (the head, the
first unnamed module of a fresh process). Steady amaxes, except: decoder.1's fc2 input, the
head's input and decoder.0's fc1 input spike five times, each spike 10x the last (no margin
keeps up: current scaling), so that the advice names modules by those names. (A trace of
amaxes alone has no value budget, so its per-module fixes are current scaling: the folding of a
LayerNormMLP's two fixes into the stronger is checked on MODULES set by hand, case "fold".)

`fp8lab import-te`, then `fp8lab run` (delayed sweep and current scaling, with its report) writes te_recipe.py,
which is then run against tests/report/te_stub (TransformerEngine's module tree and recipe
signatures transcribed from TE v2.18 and v2.9) in a fresh process each:
  - v2.18, the model as the log's run built it: apply() maps every advised name to the module
    expected by hand (`X.layernorm_mlp.fc1`/`.fc2` -> the LayerNormMLP at path
    `decoder.X.layernorm_mlp`, one recipe for both: the stronger; `Layer_1` -> `head`;
    `...layernorm_linear_qkv` -> the LayerNormLinear at `...self_attention.layernorm_qkv`),
    wraps exactly those modules (a forward opens the module's own region with its recipe),
    warns of nothing, and every recipe is constructed with TE's own arguments;
  - v2.18 with one more TE Linear that the trace does not have: a TERecipeWarning naming it;
  - v2.9, debug on: before any forward `Layer_1` has no module yet (TE names unnamed modules at
    their first forward there): apply() raises KeyError naming it and saying why; after one
    forward it maps as in v2.18;
  - names from nvdlfw_inspect's infer_and_assign_layer_names (te_stub/nvdlfw_inspect, MODULES set
    by hand): `model.decoder.<layer_number>...` found on the layer of that layer_number (path
    index one less) once it has run; before, a KeyError that says to call it;
  - a plain PyTorch-style model (classes outside transformer_engine) with the quickstart's
    module names: apply() still wraps them, and warns, listing each advised module with the
    TE class to convert it to (te.Linear) and saying the model has no TE module, before
    training.

Usage: test_te_names.py FP8LAB_BIN
"""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
STUB = os.path.join(HERE, "te_stub")
BIN = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else None
FAILS = []
TABS = " \t\t\t\t "
LAYERS = 3


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL:", what)
    return cond


def te_line(name, it, value):
    """A line of nvdlfw_inspect's statistics log (nvdlfw_inspect/logging.py:118, 132)."""
    return "2025-06-03 12:34:56,789 - INFO - %s%siteration=%06d%svalue=%.4f\n" % (
        name, TABS, it, TABS, value)


# The GEMM names TE's debug API gives this model, by hand from te.md 1.3 (not from the stub).
GEMMS = ["decoder.%d.%s" % (i, g) for i in range(LAYERS)
         for g in ("self_attention.layernorm_linear_qkv", "self_attention.proj",
                   "layernorm_mlp.fc1", "layernorm_mlp.fc2")] + ["Layer_1"]
# ... and the module each stands for, as a path of the model below
MODULE_OF = {g: "decoder.%s.%s" % (g.split(".")[1], {
    "layernorm_linear_qkv": "self_attention.layernorm_qkv", "proj": "self_attention.proj",
    "fc1": "layernorm_mlp", "fc2": "layernorm_mlp"}[g.rsplit(".", 1)[1]])
    for g in GEMMS if g.startswith("decoder.")}
MODULE_OF["Layer_1"] = "head"
SPIKY = {"decoder.1.layernorm_mlp.fc2", "Layer_1", "decoder.0.layernorm_mlp.fc1"}


def make_logs(root):
    rng = random.Random(7)
    d = os.path.join(root, "nvdlfw_inspect_statistics_logs")
    os.makedirs(d)
    out = []
    for it in range(0, 400, 2):
        for g in GEMMS:
            for t, base in (("activation", 4.0), ("weight", 0.5), ("output", 2.0),
                            ("gradient", 0.01)):
                v = base * rng.uniform(0.9, 1.1)
                if g in SPIKY and t == "activation" and it % 80 == 26:
                    v *= 10.0 ** (1 + it // 80)  # each spike 10x the last: delayed clips each
                out.append(te_line("%s_%s_cur_amax" % (g, t), it, v))
    with open(os.path.join(d, "nvdlfw_inspect_globalrank-0.log"), "w") as f:
        f.writelines(out)


EXP = """[trace]
path = te_logs

[recipe.delayed]
kind = delayed
format = hybrid
history_len = 16, 128
margin = 0, 1, 2

[recipe.current]
kind = current
format = hybrid

[output]
dir = out
"""

# Runs in a fresh process with the stub first on sys.path: builds the model, applies
# te_recipe.py, prints one JSON line.
PROBE = r'''
import json, os, sys, warnings
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Float8CurrentScaling

case = sys.argv[2]
FORM = "module" if case != "tensor" else None  # None: apply()'s default (per tensor on 2.18)
res = {}

class Model(te.Module):
    def __init__(self, extra=False):
        super().__init__()
        self.decoder = te.ModuleList([te.TransformerLayer(64, 256, 4, layer_number=i + 1,
                                                          name="decoder.%d" % i)
                                      for i in range(LAYERS)])
        self.head = te.Linear(64, 128)  # no name: Layer_<n>
        if extra:
            self.extra = te.Linear(64, 64, name="extra")

    def forward(self, x):
        for layer in self.decoder:
            x = layer(x)
        return self.head(x)

class Plain(te.Module):  # not a TE module: torch's Linear, by class name
    pass

class Linear(te.Module):
    def forward(self, x):
        te.LOG.append(("forward", "plain"))
        return x

if case == "plain":  # modules outside transformer_engine, with the quickstart's names
    model = te.Module()
    model.layers = te.ModuleList([Plain() for _ in range(4)])
    for blk in model.layers:
        for n in ("qkv", "proj", "fc1", "fc2"):
            setattr(blk, n, Linear())
else:
    model = Model(extra=case == "extra")
    if case in ("shared", "subclass", "wrapper", "deepcopy", "hfpath"):
        sys.path.insert(0, os.path.dirname(sys.argv[1]))
        import te_recipe
        if case == "shared":  # one TE name on three modules: all take its recipe
            for i in range(3):
                setattr(model, "extra_%d" % i, te.Linear(64, 64, name="shared"))
            te_recipe.MODULES = {"shared": None}
            te_recipe.COVERED = list(te_recipe.COVERED) + ["shared"]
        if case == "subclass":  # Megatron's TELinear is a te.Linear: TE, not "convert it"
            class TELinear(te.Linear):
                pass
            model.mega = TELinear(64, 64, name="mega")
            te_recipe.MODULES = {"mega": Float8CurrentScaling()}
            te_recipe.COVERED = list(te_recipe.COVERED) + ["mega"]
        if case == "wrapper":  # a wrapper's attribute `model`: paths model.<...>, not names
            inner, model = model, te.Module()
            model.model = inner
            te_recipe.MODULES = {"model.decoder.1.layernorm_mlp.fc2": Float8CurrentScaling()}
        if case == "hfpath":  # Hugging Face's model.layers.<i>: no layer_number, the path is it
            inner, model = te.Module(), te.Module()
            inner.layers = te.ModuleList([te.Module() for _ in range(2)])
            for blk in inner.layers:
                blk.fc = te.Linear(64, 64, name=None)
            model.model = inner
            te_recipe.MODULES = {"model.layers.1.fc": Float8CurrentScaling()}
    if case in ("infer", "infer_first"):  # nvdlfw_inspect's names: layer_number, from 1
        sys.path.insert(0, os.path.dirname(sys.argv[1]))
        import te_recipe
        te_recipe.MODULES = {
            "model.decoder.1.layernorm_mlp.fc2": Float8CurrentScaling(),
            "model.decoder.3.self_attention.layernorm_qkv": Float8CurrentScaling(),
            "model.head": None}
        if case == "infer_first":
            from nvdlfw_inspect.api import infer_and_assign_layer_names
            infer_and_assign_layer_names(model)
    if case == "fold":  # one LayerNormMLP, two fixes: the stronger for the module
        sys.path.insert(0, os.path.dirname(sys.argv[1]))
        import te_recipe
        te_recipe.MODULES = {
            "decoder.0.layernorm_mlp.fc1": DelayedScaling(margin=2),
            "decoder.0.layernorm_mlp.fc2": Float8CurrentScaling(),
            "decoder.1.layernorm_mlp.fc1": None,
            "decoder.1.layernorm_mlp.fc2": Float8CurrentScaling(),
            "decoder.2.layernorm_mlp.fc1": DelayedScaling(margin=1),
            "decoder.2.layernorm_mlp.fc2": DelayedScaling(margin=2)}
    if case == "v2.9_after":
        te.DEBUG["enabled"] = True
        model(0)
sys.path.insert(0, os.path.dirname(sys.argv[1]))
import te_recipe
paths = {id(m): p for p, m in model.named_modules()}
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    try:
        out = te_recipe.apply(model, form=FORM)
    except KeyError as e:
        print(json.dumps({"keyerror": str(e)}))
        sys.exit(0)
res["warnings"] = [str(x.message) for x in w if x.category.__name__ == "TERecipeWarning"]
res["modules"] = out["modules"]
res["not_te"] = out["not_te"]
res["not_covered"] = out["not_covered"]
res["governs"] = len(out["model_recipe_governs"])
# each wrapped module's forward opens a region with its recipe
regions = {}
for p, m in model.named_modules():
    if p in out["modules"]:
        del te.LOG[:]
        m.forward(0)
        regions[p] = [repr(x[2]) if x[0] == "enter" else x[0] for x in te.LOG]
res["regions"] = regions
if case == "deepcopy":  # a copy of the model runs its own modules under the recipe
    import copy
    twin = copy.deepcopy(model)
    twin.head.name = "copied"
    del te.LOG[:]
    twin.head.forward(0)
    res["copy_log"] = [list(x) if x[0] == "forward" else x[0] for x in te.LOG]
if case == "tensor":  # one step under the CustomRecipe: the quantizers TE's factory gave
    def desc(q):
        if type(q).__name__ == "DelayedScalingRequest":
            return ["delayed", q.fp8_format.name, q.margin, q.amax_history_len, q.amax_compute_algo]
        return ["current", q.dtype.name]
    with te_recipe.model_region():
        model(0)
    res["form"] = out["form"]
    res["model_margin"] = te_recipe.MODEL_RECIPE.margin
    res["model_history"] = te_recipe.MODEL_RECIPE.amax_history_len
    res["quantizers"] = {
        p: {k: [[r.name + "|" + r.tensor_type if r else None, desc(q)] for r, q in v]
            for k, v in m.quantizers.items()}
        for p, m in model.named_modules() if hasattr(m, "quantizers")}
    res["te_name"] = {p: m.name for p, m in model.named_modules() if hasattr(m, "quantizers")}
res["recipes"] = {k: repr(v) for k, v in te_recipe.MODULES.items()}
res["model_recipe"] = repr(te_recipe.MODEL_RECIPE)
res["class_of"] = {p: type(m).__name__ for p, m in model.named_modules()}
print(json.dumps(res))
'''.replace("LAYERS", str(LAYERS))


def probe(te_recipe, version, case, tmp):
    script = os.path.join(tmp, "probe.py")
    with open(script, "w") as f:
        f.write(PROBE)
    env = dict(os.environ, PYTHONPATH=STUB, FP8LAB_TE_STUB_VERSION=version)
    p = subprocess.run([sys.executable, script, te_recipe, case], capture_output=True,
                       text=True, env=env, cwd=tmp)
    last = [l for l in p.stdout.splitlines() if l.startswith("{")]
    if not check(p.returncode == 0 and last, "probe %s %s: rc %d\n%s%s" % (
            version, case, p.returncode, p.stdout[-2000:], p.stderr[-3000:])):
        return None
    return json.loads(last[-1])


def strength(r):
    if r == "None":
        return (2, 0)
    if r.startswith("Float8CurrentScaling"):
        return (1, 0)
    return (0, int(r.split("margin=")[1].split(",")[0].rstrip(")")))


def main():
    if BIN is None:
        print(__doc__)
        return 2
    tmp = tempfile.mkdtemp(prefix="fp8lab_te_names_")
    try:
        return run(tmp)
    finally:
        if not os.environ.get("FP8LAB_KEEP_TMP"):
            shutil.rmtree(tmp, ignore_errors=True)


def run(tmp):
    make_logs(os.path.join(tmp, "logs"))
    p = subprocess.run([BIN, "import-te", "logs", "te_logs"], cwd=tmp, capture_output=True,
                       text=True)
    if not check(p.returncode == 0, "import-te: rc %d %s" % (p.returncode, p.stderr[-2000:])):
        return 1
    with open(os.path.join(tmp, "exp.ini"), "w") as f:
        f.write(EXP)
    p = subprocess.run([BIN, "run", "exp.ini", "--quiet"], cwd=tmp, capture_output=True,
                       text=True)
    if not check(p.returncode == 0, "fp8lab run: rc %d %s" % (p.returncode, p.stderr[-2000:])):
        return 1
    te_recipe = os.path.join(tmp, "out", "te_recipe.py")
    if not check(os.path.exists(te_recipe), "no te_recipe.py (the advice had no per-module fix)"):
        return 1
    res = probe(te_recipe, "2.18", "named", tmp)
    if res is None:
        return 1
    advised = res["recipes"]
    print("advised: %s" % ", ".join("%s: %s" % (k, v.split("(")[0]) for k, v in advised.items()))
    check(SPIKY <= set(advised), "the spiky GEMMs %s advised: %s" % (sorted(SPIKY), sorted(advised)))

    check(set(advised) <= set(GEMMS), "advised names not TE's: %s" % sorted(set(advised) - set(GEMMS)))
    # every advised name on its module, by hand
    want = {}
    for g in advised:
        want.setdefault(MODULE_OF[g], []).append(g)
    check({k: sorted(v) for k, v in res["modules"].items()} == {k: sorted(v) for k, v in want.items()},
          "apply() mapped %s, expected %s" % (res["modules"], want))
    check(res["class_of"].get("decoder.1.layernorm_mlp") == "LayerNormMLP" and
          res["class_of"].get("head") == "Linear", "classes %s" % res["class_of"])
    check(res["warnings"] == [] and res["not_te"] == [] and res["not_covered"] == [],
          "v2.18 named model: no warning expected: %s" % res["warnings"])
    check(res["governs"] > 0, "MODEL_RECIPE governs the other modules")
    for path, keys in want.items():
        best = max((advised[k] for k in keys), key=strength)
        check(res["regions"].get(path) == [best, "forward", "exit"],
              "%s: forward regions %s, expected its recipe %s" % (path, res["regions"].get(path), best))
    # folding: the stronger fix of fc1 and fc2 (BF16, then current, then the larger margin)
    # the per-tensor form (apply()'s default on 2.18): one CustomRecipe; the factory gives the
    # spiky inputs current scaling by the names TE passes it (a LayerNormMLP's <name>.fc1/.fc2,
    # the head's Layer_1), every other input, weight and grad_output MODEL_RECIPE's delayed
    # setting as a request, the nameless slots E4M3 current scaling; no ValueError from TE's
    # checks (the stub's custom_state: None, unequal delayed requests in one state)
    res = probe(te_recipe, "2.18", "tensor", tmp)
    if res:
        check(res["form"] == "tensor" and not res["warnings"] and
              sorted(res["modules"]) == [], "tensor form: %s" % {k: res[k] for k in
                                                                ("form", "warnings", "modules")})
        want_mods = sorted(set(MODULE_OF.values()))
        check(sorted(res["quantizers"]) == want_mods,
              "tensor form: every TE GEMM module ran under the CustomRecipe: %s" % sorted(res["quantizers"]))
        bad = []
        dl = ["delayed", "HYBRID", res["model_margin"], res["model_history"], "max"]
        for path, q in sorted(res["quantizers"].items()):
            for state in ("fwd", "bwd"):
                for rn, d in q[state]:
                    if rn is None:
                        exp = ["current", "kFloat8E4M3"]
                    else:
                        name, tt = rn.split("|")
                        exp = ["current", "kFloat8E4M3"] if name in SPIKY and tt == "input" else dl
                    if d != exp:
                        bad.append((path, state, rn, d, exp))
        check(not bad, "tensor form: quantizers other than by hand: %s" % bad[:6])
        # ... and exactly what advice.ini's label advice replays, slot by slot (a LayerNormMLP's
        # slots: fc1 input, weight, output, fc2 input, weight, output; fc1 grad_output,
        # grad_input, fc2 grad_output, grad_input), where the trace has the tensor
        slots = {"fwd": ["input", "weight", "output"], "bwd": ["grad_output", "grad_input"]}
        ln = {"fwd": ["fc1.input", "fc1.weight", "fc1.output", "fc2.input", "fc2.weight",
                      "fc2.output"],
              "bwd": ["fc1.grad_output", "fc1.grad_input", "fc2.grad_output", "fc2.grad_input"]}
        got = {}
        for path, q in res["quantizers"].items():
            lnmlp = res["class_of"].get(path) == "LayerNormMLP"
            for state in ("fwd", "bwd"):
                for (rn, d), role in zip(q[state], (ln if lnmlp else slots)[state]):
                    bwd = role.split(".")[-1] in ("grad_output", "grad_input")
                    got["%s.%s" % (res["te_name"][path], role)] = \
                        ("current", d[1][7:].lower()) if d[0] == "current" else \
                        ("delayed", "e5m2" if bwd else "e4m3", d[2], d[3], d[4])
        p = subprocess.run([BIN, "run", os.path.join("out", "advice.ini"), "--quiet"], cwd=tmp,
                           capture_output=True, text=True)
        if check(p.returncode == 0, "advice.ini replay: rc %d %s" % (p.returncode, p.stderr[-800:])):
            # an amax trace: current scaling has no rows (no stream series), so each tensor's
            # setting is its section of label advice in advice.ini (the first in file order that
            # lists it; the section without `tensors` takes the rest), checked against the
            # replay's analysis.csv rows (its delayed tensors) where it has them
            import configparser
            import csv
            cp = configparser.ConfigParser(inline_comment_prefixes=(";",),
                                           comment_prefixes=(";",))
            cp.read(os.path.join(tmp, "out", "advice.ini"))
            secs = [cp[x] for x in cp.sections() if x.startswith("recipe.") and
                    cp[x].get("label") == "advice"]
            every = ["%s.%s" % (g, r) for g in GEMMS
                     for r in ("input", "weight", "output", "grad_output")]
            rep = {}
            for sec in secs:
                listed = [t.strip() for t in sec["tensors"].split(",")] if "tensors" in sec \
                    else every
                for t in listed:
                    if t in rep:
                        continue
                    bwd = t.endswith(".grad_output") or t.endswith(".grad_input")
                    fmt = sec.get("format", "hybrid")
                    fmt = ("e5m2" if bwd else "e4m3") if fmt == "hybrid" else fmt
                    rep[t] = (sec["kind"], fmt) if sec["kind"] == "current" else \
                        (sec["kind"], fmt, int(sec["margin"]), int(sec["history_len"]),
                         sec["amax_compute"])
            with open(os.path.join(tmp, "out", "advice", "analysis.csv"), newline="") as f:
                an = {r["tensor"]: (r["kind"], r["format"], int(r["margin"]),
                                    int(r["history_len"]), r["amax_compute"])
                      for r in csv.DictReader(f) if r["recipe"] == "advice"}
            check(an and all(rep.get(t) == v for t, v in an.items()) and
                  sorted(t for t in rep if rep[t][0] == "delayed") == sorted(an),
                  "advice.ini's sections against its replay's analysis.csv: %s"
                  % [(t, v, rep.get(t)) for t, v in an.items() if rep.get(t) != v][:4])
            diff = [(t, got.get(t), rep[t]) for t in sorted(rep) if got.get(t) != rep[t]]
            check(len(rep) == len(GEMMS) * 4 and not diff,
                  "tensor form against advice.ini's replay (%d tensors): %s" % (len(rep), diff[:5]))
            check(rep.get("decoder.1.layernorm_mlp.fc1.output") == ("current", "e4m3") and
                  rep.get("decoder.1.layernorm_mlp.fc2.output") == ("current", "e4m3") and
                  rep.get("decoder.2.layernorm_mlp.fc1.output", ("",))[0] == "delayed",
                  "advice.ini: a LayerNormMLP's fc1 output takes fc2's input setting: %s"
                  % {t: rep.get(t) for t in rep if ".layernorm_mlp.fc1.output" in t})
        # decoder.1's LayerNormMLP: fc1's output slot is labelled fc2's input (TE's roles)
        fwd = res["quantizers"].get("decoder.1.layernorm_mlp", {}).get("fwd", [])
        check([x[0] for x in fwd] == ["decoder.1.layernorm_mlp.fc1|input",
                                      "decoder.1.layernorm_mlp.fc1|weight",
                                      "decoder.1.layernorm_mlp.fc2|input",
                                      "decoder.1.layernorm_mlp.fc2|input",
                                      "decoder.1.layernorm_mlp.fc2|weight", None],
              "LayerNormMLP forward roles: %s" % fwd)
    res = probe(te_recipe, "2.18", "fold", tmp)
    if res is not None:
        got = {p: r[0] for p, r in res["regions"].items()}
        want_fold = {"decoder.0.layernorm_mlp": "Float8CurrentScaling", "decoder.1.layernorm_mlp":
                     "None", "decoder.2.layernorm_mlp": "DelayedScaling"}
        check({p: r.split("(")[0] for p, r in got.items()} == want_fold and
              "margin=2" in got.get("decoder.2.layernorm_mlp", ""),
              "folded recipes %s, expected %s (decoder.2: margin 2)" % (got, want_fold))
    # nvdlfw_inspect's infer_and_assign_layer_names (Megatron, BioNeMo): model.<path> with a
    # ModuleList's layers numbered by layer_number (1-3 here, paths 0-2): found once it has run,
    # and refused (not mapped to the wrong layer by the path) before
    res = probe(te_recipe, "2.18", "infer_first", tmp)
    if res is not None:
        check(res.get("modules") == {
            "decoder.0.layernorm_mlp": ["model.decoder.1.layernorm_mlp.fc2"],
            "decoder.2.self_attention.layernorm_qkv": ["model.decoder.3.self_attention.layernorm_qkv"],
            "head": ["model.head"]}, "infer_and_assign_layer_names names: %s" % res)
    res = probe(te_recipe, "2.18", "infer", tmp)
    if res is not None:
        check("keyerror" in res and "infer_and_assign_layer_names" in res["keyerror"] and
              "model.decoder.1.layernorm_mlp.fc2" in res["keyerror"],
              "inferred names before infer_and_assign_layer_names: %s" % res)
    # what a review found: one TE name on several modules, a TE subclass, a wrapper whose
    # attribute is called model, a deep copy of the model
    res = probe(te_recipe, "2.18", "shared", tmp)
    if res is not None:
        check(sorted(res["modules"]) == ["extra_0", "extra_1", "extra_2"] and
              not any("extra_" in w for w in res["warnings"]),
              "one TE name, three modules: %s" % res)
    res = probe(te_recipe, "2.18", "subclass", tmp)
    if res is not None:
        check(res["modules"] == {"mega": ["mega"]} and res["not_te"] == [] and
              res["warnings"] == [], "a te.Linear subclass: %s" % res)
    res = probe(te_recipe, "2.18", "wrapper", tmp)
    if res is not None:
        check("keyerror" in res and "model.decoder.1.layernorm_mlp.fc2" in res["keyerror"],
              "model.<...> name found by a wrapper's path: %s" % res)
    res = probe(te_recipe, "2.18", "hfpath", tmp)
    if res is not None:
        check(res.get("modules") == {"model.layers.1.fc": ["model.layers.1.fc"]},
              "a Hugging Face path model.layers.1.fc: %s" % res)
    if "Layer_1" in advised:
        res = probe(te_recipe, "2.18", "deepcopy", tmp)
        if res is not None:
            check(res.get("copy_log", [None])[1:] == [["forward", "copied"], "exit"],
                  "deepcopy: the copy's head ran %s" % res.get("copy_log"))
    # a TE module the trace does not have
    res = probe(te_recipe, "2.18", "extra", tmp)
    if res is not None:
        check(res["not_covered"] == ["extra"] and any("extra" in w and "not in the replayed trace"
                                                      in w for w in res["warnings"]),
              "extra module: not_covered %s, warnings %s" % (res["not_covered"], res["warnings"]))
        print("warning (module not in the trace):\n  " + "\n  ".join(res["warnings"]))
    # TE 2.9: unnamed modules named at their first forward, in debug mode
    if "Layer_1" in advised:
        res = probe(te_recipe, "2.9", "named", tmp)
        if res is not None:
            check("keyerror" in res and "Layer_1" in res["keyerror"] and "first forward" in
                  res["keyerror"], "v2.9 before a forward: %s" % res)
            print("v2.9 before a forward: %s" % res.get("keyerror"))
    res = probe(te_recipe, "2.9", "v2.9_after", tmp)
    if res is not None:
        check({k: sorted(v) for k, v in res.get("modules", {}).items()} ==
              {k: sorted(v) for k, v in want.items()} and res["warnings"] == [],
              "v2.9 after a debug forward: %s" % res)
    # a plain PyTorch model: the quickstart's advice
    q = os.path.join(tmp, "q")
    p = subprocess.run([BIN, "run", os.path.join(ROOT, "experiments", "quickstart.ini"), "--out",
                        q, "--quiet"], capture_output=True, text=True)
    if check(p.returncode == 0 and os.path.exists(os.path.join(q, "te_recipe.py")),
             "quickstart run: rc %d %s" % (p.returncode, p.stderr[-1000:])):
        res = probe(os.path.join(q, "te_recipe.py"), "2.18", "plain", tmp)
        if res is not None:
            quick = sorted(res["recipes"])
            check(sorted(x[0] for x in res["not_te"]) == quick and
                  all(x[2] == "te.Linear" for x in res["not_te"]),
                  "plain model: not_te %s, advised %s" % (res["not_te"], quick))
            check(len(res["warnings"]) == 1 and all(("%s (Linear): convert to te.Linear" % m)
                                                    in res["warnings"][0] for m in quick)
                  and "no TransformerEngine FP8 module" in res["warnings"][0],
                  "plain model: warning %s" % res["warnings"])
            print("warning (plain model):\n  " + "\n  ".join(res["warnings"]))
    print("%d failure(s)" % len(FAILS))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
