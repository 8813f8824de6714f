#!/usr/bin/env python3
"""The BF16 demotion plans (issue 45): bf16_plan.csv recomputed from the run's own CSVs, every
prefix of each plan replayed (bf16_plan.ini) and held to what the plan says it leaves missing,
the FLOP shares by hand, and the plans' Megatron-LM and torchao forms.

Runs: experiments/quickstart.ini as shipped (its answer: delayed history 128, margin 1, max,
with misfits in layers.1.fc1 and layers.1.fc2); a two-rank trace (synth llm, 40 steps, seeds 1
and 2) under reduce_amax, whose misfits are on both ranks and whose layers leave FP8 on both;
experiments/fp4.ini shortened (synth_steps 20, its NVFP4 configuration alone besides the FP8
ones, `fp4_gemm_ratio = 3.8` so that some layers fail: the shipped ratio 4 lets every layer
hold, an empty FP4 plan); and its first block alone (below). For each:
  - the FP8 plan: the misfits of recommendations.csv's model setting, from analysis.csv and the
    budgets of run.json (clipped_rate and clip_step_rate within them); their layers (the tensor
    name without its role) ordered by the clipped steps of the layer's tensors under the
    setting (analysis.csv's stream_clipped_steps), their clipped values (steps.csv, warm-up
    rows left out), the GEMM-error ratio to current scaling (gemm.csv: per layer and GEMM the
    lower median over the steps of the two rows' quotient, the largest GEMM), all descending,
    then the name; what each step leaves missing;
  - the FP4 plan: per NVFP4 configuration and layer the verdict from gemm.csv's paired ratios
    (a GEMM holds when the lower median of ratio_hi is at most R, fails when that of ratio_lo
    is above it), the advised one the first with the most layers holding, its layers that do
    not hold ordered by their largest lower-median ratio;
  - the shares: run.json's model_shape, 6 tokens in out per Linear, cumulative; for the
    quickstart by hand (4 blocks of 64 tokens through qkv 128x384, proj 128x128, fc1 128x512,
    fc2 512x128: fc2 and fc1 of one block are 1/12 each);
  - Megatron-LM's ends: a step's layers are the first a and last b whole blocks of layers.<i>,
    every Linear of the model (run.json's model_shape) in them (a third run: the shortened fp4
    run's first block alone, `[trace] tensors = layers.0.*`, with fp4_gemm_ratio 2.5: its FP4
    plan ends with that whole block, which megatron_bf16_plan_fp4.txt gives as
    --num-layers-at-start-in-bf16 1);
  - `fp8lab run bf16_plan.ini` from another folder: per label fp8_plan_<k>, the tensors whose
    delayed rows miss the budgets (analysis.csv) are step k's still_missing and the bf16 rows
    are the first k layers' tensors; per label fp4_plan_<k>, the layers whose NVFP4 rows' ratios
    do not hold are step k's still_missing, and no demoted layer has an NVFP4 row;
  - megatron_bf16_plan_*.txt (every line a flag of Megatron-LM's, transcribed in
    test_frameworks.py), the .yaml (its matchers give the plan's layers the empty recipe, in
    order, and no other module any), torchao_bf16_plan.py against tests/report/torchao_stub (for
    steps 0, 1 and all: every module but the first k layers converted).

Usage: test_bf16_plan.py FP8LAB_BIN
"""
import csv
import fnmatch
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import test_frameworks  # noqa: E402  (Megatron-LM's flags, transcribed; yaml or exit 77)

yaml = test_frameworks.yaml
BIN = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else None
FAILS = []
MEGATRON = dict(test_frameworks.MEGATRON)
# megatron.md 1.2: --fp4-format (transformer_config.py 673-675), --fp4-recipe (679)
MEGATRON.update({"--fp4-format": (str, {"e2m1"}), "--fp4-recipe": (str, {"nvfp4", "custom"})})
R4 = 3.8  # the shortened fp4 run's fp4_gemm_ratio


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL:", what)
    return cond


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def num(s):
    return float("nan") if s in ("", "nan") else float(s)


def close(a, b):
    return (math.isnan(a) and math.isnan(b)) or abs(a - b) <= 1e-6 * max(1.0, abs(b))


def module(tensor):
    """The layer of a tensor: its name without rank_<r>/ and its role (no experts here)."""
    return re.sub(r"^rank_\d+/", "", tensor).rsplit(".", 1)[0]


def lower_median(v):
    v = sorted(v)
    return v[(len(v) + 1) // 2 - 1]


def fits(r, b):
    cr, sr = num(r["clipped_rate"]), num(r["clip_step_rate"])
    return cr <= b[0] and sr <= b[1]  # False for nan


def budgets(out):
    with open(os.path.join(out, "run.json")) as f:
        e = json.load(f)["experiment"]
    return (e.get("overflow_budget", 1e-5), e.get("step_budget", 0.01)), e


def delayed_key(r):
    return (r["recipe"], r["history_len"], r["margin"], r["amax_compute"])


# ------------------------------------------------------------------ the plans, recomputed

def fp8_plan(out):
    b, _ = budgets(out)
    model = next(r for r in rows(os.path.join(out, "recommendations.csv")) if r["scope"] == "model")
    key = delayed_key(model)
    an = [r for r in rows(os.path.join(out, "analysis.csv"))
          if r["kind"] == "delayed" and delayed_key(r) == key]
    misfits = sorted(r["tensor"] for r in an if not fits(r, b))
    layers = sorted({module(t) for t in misfits})
    cs = {l: 0 for l in layers}
    for r in an:
        if module(r["tensor"]) in cs:
            cs[module(r["tensor"])] += int(r["stream_clipped_steps"])
    cv = {l: 0 for l in layers}
    for r in rows(os.path.join(out, "steps.csv")):
        if r["kind"] == "delayed" and delayed_key(r) == key and r["warmup"] == "0" and \
                module(r["tensor"]) in cv:
            cv[module(r["tensor"])] += int(r["clipped"])
    errs = {}
    gemm = os.path.join(out, "gemm.csv")
    for r in rows(gemm) if os.path.exists(gemm) else []:
        if module(r["layer"] + ".x") not in cs:
            continue
        w = 0 if (r["kind"] == "delayed" and delayed_key(r) == key) else \
            1 if r["recipe"] == "current" else None
        if w is not None:
            errs.setdefault((r["layer"], r["gemm"], r["step"]), [None, None])[w] = num(r["rel_error"])
    per = {}
    for (l, g, _), (a, c) in errs.items():
        if a is not None and c is not None and not math.isnan(a) and not math.isnan(c):
            per.setdefault((l, g), []).append(a / c if c > 0 else math.inf if a > 0 else 1.0)
    ratio = {l: max((lower_median(v) for (ll, _), v in per.items() if module(ll + ".x") == l),
                    default=float("nan")) for l in layers}
    order = sorted(layers, key=lambda l: (-cs[l], -cv[l],
                                          -ratio[l] if not math.isnan(ratio[l]) else math.inf, l))
    keys = {l: (cs[l], cv[l], ratio[l]) for l in layers}
    return order, keys, misfits, key


def fp4_verdicts(gemm_rows, recipe, R):
    by = {}
    for r in gemm_rows:
        if r["recipe"] != recipe or r["kind"] != "nvfp4":
            continue
        by.setdefault(r["layer"], {g: [] for g in ("fprop", "dgrad", "wgrad")})
        if r["ratio_mode"] and not math.isnan(num(r["ratio"])):
            by[r["layer"]][r["gemm"]].append((num(r["ratio"]), num(r["ratio_lo"]),
                                              num(r["ratio_hi"])))
    out = {}
    for layer, gs in by.items():
        v, worst = "holds", -math.inf
        for g, steps in gs.items():
            if not steps:
                v = None
                break
            m = lower_median([s[0] for s in steps])
            lo = lower_median([s[1] for s in steps])
            hi = lower_median([s[2] for s in steps])
            worst = max(worst, m)
            gv = "holds" if hi <= R else "fails" if lo > R else "close"
            if gv == "fails" or (gv == "close" and v == "holds"):
                v = gv
        out[layer] = (v, worst)
    return out


def fp4_plan(out):
    _, e = budgets(out)
    R = e.get("fp4_gemm_ratio", 4.0)
    g = rows(os.path.join(out, "gemm.csv"))
    recipes = []
    for c in e["configurations"]:
        if c["kind"] == "nvfp4" and c["recipe"] not in recipes:
            recipes.append(c["recipe"])
    best, most = None, -1
    for rc in recipes:  # the first with the most layers holding
        n = sum(v == "holds" for v, _ in fp4_verdicts(g, rc, R).values())
        if n > most:
            best, most = rc, n
    ver = fp4_verdicts(g, best, R)
    bad = [l for l, (v, _) in ver.items() if v in ("fails", "close")]
    return sorted(bad, key=lambda l: (-ver[l][1], l)), ver, best, R


def shares(out, order):
    with open(os.path.join(out, "run.json")) as f:
        lin = json.load(f)["model_shape"]["linears"]
    flops = {l["name"]: 6.0 * l["tokens"] * l["in"] * l["out"] for l in lin}
    total, s, acc = sum(flops.values()), [], 0.0
    for l in order:
        acc += flops.get(l, 0.0)
        s.append(acc / total)
    return s


def ends(out, order):
    """Each prefix's pairs (a, b) such that its layers are the first a and the last b whole
    blocks layers.<i> (several when every block is kept: a + b = n); empty: none."""
    mods = {module(r["tensor"]) for r in rows(os.path.join(out, "analysis.csv"))}
    with open(os.path.join(out, "run.json")) as f:  # the model's Linears, replayed or not
        mods |= {l["name"] for l in json.load(f)["model_shape"]["linears"]}
    blocks = {}
    for m in mods:
        blocks.setdefault(int(re.match(r"layers\.(\d+)\.", m).group(1)), set()).add(m)
    n = len(blocks)
    assert sorted(blocks) == list(range(n))
    res, kept = [], set()
    for l in order:
        kept.add(l)
        res.append({(a, b) for a in range(n + 1) for b in range(n + 1 - a)
                    if kept == set().union(*(blocks[i] for i in
                                             list(range(a)) + list(range(n - b, n))))})
    return res


# ------------------------------------------------------------------ the checks

def check_csv(name, out, plan_rows, which, order, left_before, left_of, keys=None, verdicts=None):
    """bf16_plan.csv's rows of one plan against the recomputed plan."""
    got = [r["layer"] for r in plan_rows[1:]]
    check(got == order, "%s %s: layers %s, recomputed %s" % (name, which, got, order))
    sh = shares(out, order)
    en = ends(out, order)
    for k, r in enumerate(plan_rows):
        check(int(r["step"]) == k, "%s %s: step %s at row %d" % (name, which, r["step"], k))
        left = left_before if k == 0 else left_of(k)
        miss = [] if r["still_missing"] == "" else r["still_missing"].split("; ")
        check(sorted(miss) == sorted(left) and int(r["missing"]) == len(left),
              "%s %s step %d: still_missing %s, recomputed %s" % (name, which, k, miss, left))
        if k == 0:
            check(num(r["flops_share"]) == 0.0, "%s %s step 0 share %s" % (name, which, r["flops_share"]))
            continue
        l = order[k - 1] if k - 1 < len(order) else None
        check(close(num(r["flops_share"]), sh[k - 1]), "%s %s step %d share %s, recomputed %.9g"
              % (name, which, k, r["flops_share"], sh[k - 1]))
        mg = (int(r["megatron_start"]), int(r["megatron_end"])) if r["megatron_start"] else None
        check(mg in en[k - 1] if mg else not en[k - 1], "%s %s step %d: megatron ends %s, "
              "recomputed %s" % (name, which, k, mg, en[k - 1]))
        if keys and l in keys:
            c, v, q = keys[l]
            check(int(r["clipped_steps"]) == c and int(r["clipped_values"]) == v and
                  close(num(r["gemm_ratio"]), q),
                  "%s fp8 step %d %s: keys %s %s %s, recomputed %s %s %.9g"
                  % (name, k, l, r["clipped_steps"], r["clipped_values"], r["gemm_ratio"], c, v, q))
        if verdicts and l in verdicts:
            v, q = verdicts[l]
            check(r["verdict"] == {"fails": "fails", "close": "too close to call"}[v] and
                  close(num(r["gemm_ratio"]), q), "%s fp4 step %d %s: %s %s, recomputed %s %.9g"
                  % (name, k, l, r["verdict"], r["gemm_ratio"], v, q))
    return sh


def check_replay(name, out, plan, tmp):
    """`fp8lab run bf16_plan.ini` from another folder, then every label against its step."""
    where = os.path.join(tmp, "elsewhere_" + name)
    os.makedirs(where)
    p = subprocess.run([BIN, "run", os.path.join(out, "bf16_plan.ini"), "--quiet"], cwd=where,
                       capture_output=True, text=True)
    if not check(p.returncode == 0, "%s: bf16_plan.ini replay rc %d %s"
                 % (name, p.returncode, p.stderr[-800:])):
        return
    rep = os.path.join(out, "bf16_plan")
    b, _ = budgets(out)
    an = rows(os.path.join(rep, "analysis.csv"))
    g = rows(os.path.join(rep, "gemm.csv")) if os.path.exists(os.path.join(rep, "gemm.csv")) else []
    _, e = budgets(rep)
    n = 0
    for r in plan:
        label = r["label"]
        if not check(label, "%s: step %s of %s not replayed" % (name, r["step"], r["plan"])):
            continue
        k = int(r["step"])
        want = [] if r["still_missing"] == "" else r["still_missing"].split("; ")
        layers = [x["layer"] for x in plan if x["plan"] == r["plan"] and 0 < int(x["step"]) <= k]
        mine = [x for x in an if x["recipe"] == label]
        bf = sorted({module(x["tensor"]) for x in mine if x["kind"] == "bf16"})
        check(bf == sorted(layers), "%s %s: bf16 layers %s, the plan's first %d %s"
              % (name, label, bf, k, sorted(layers)))
        if r["plan"] == "fp8":
            got = sorted(x["tensor"] for x in mine if x["kind"] == "delayed" and not fits(x, b))
            check(got == sorted(want), "%s %s: the replay misses %s, the plan says %s"
                  % (name, label, got, want))
        else:
            ver = fp4_verdicts(g, label, e["fp4_gemm_ratio"])
            got = sorted(l for l, (v, _) in ver.items() if v in ("fails", "close"))
            check(got == sorted(want), "%s %s: the replay's layers not holding %s, the plan says %s"
                  % (name, label, got, want))
            check(not set(ver) & set(layers), "%s %s: demoted layers with NVFP4 rows %s"
                  % (name, label, sorted(set(ver) & set(layers))))
            check(all(v == "holds" for l, (v, _) in ver.items() if l not in want),
                  "%s %s: a layer without a verdict" % (name, label))
        n += 1
    print("%s: %d prefixes replayed, each as the plan says" % (name, n))


def flags_of(text, name):
    return test_frameworks.megatron_flags(text, name, MEGATRON, check)


def check_yaml(name, path, order, modules):
    with open(path) as f:
        doc = yaml.load(f, Loader=yaml.SafeLoader)
    ms = list(doc["matchers"].values())
    check([m["pattern"] for m in ms] == order and
          all(m["enabled"] is True and m["type"] == "glob" and m["config"] == "bf16" for m in ms),
          "%s: matchers %s, the plan %s" % (name, ms, order))
    check(doc["configs"]["bf16"] == {"transformer_engine_config_type": "TEQuantizationParams",
                                     "training_recipe": {}}, "%s: bf16 config" % name)
    for mod in modules:
        hit = next((m for m in ms if fnmatch.fnmatch(mod, m["pattern"])), None)
        check((hit is not None) == (mod in order), "%s: %s matched %s" % (name, mod, hit))


TORCHAO = r'''
import json, sys, types
torch = types.ModuleType("torch")
torch.nn = types.ModuleType("torch.nn")
class Linear:
    def __init__(self, i, o):
        self.in_features, self.out_features = i, o
torch.nn.Linear = Linear
sys.modules["torch"], sys.modules["torch.nn"] = torch, torch.nn
sys.path.insert(0, sys.argv[1])
import torchao.float8 as f8
import torchao.quantization as q
import torchao_bf16_plan as t
names = json.loads(sys.argv[2])
class Model:
    def named_modules(self):
        return [("", self)] + [(n, Linear(64, 64)) for n in names]
out = {}
for plan, layers in t.PLANS.items():
    for k in sorted({0, 1, len(layers)}):
        f8.CONVERTED.clear(); q.QUANTIZED.clear()
        t.apply(Model(), plan, steps=k)
        out["%s %d" % (plan, k)] = [c[0] for c in f8.CONVERTED + q.QUANTIZED]
print(json.dumps({"plans": t.PLANS, "converted": out}))
'''


TE = r'''
import json, sys, warnings
import transformer_engine.pytorch as te
sys.path.insert(0, sys.argv[1])
import te_bf16_plan as t
names = json.loads(sys.argv[2])

class Model(te.Module):  # a te.Linear at each of the trace's module paths
    def __init__(self):
        super().__init__()
        self.leaves = []
        for n in names:
            parent = self
            parts = n.split(".")
            for c in parts[:-1]:
                if c not in parent._children:
                    setattr(parent, c, te.Module())
                parent = parent._children[c]
            leaf = te.Linear(64, 64)
            setattr(parent, parts[-1], leaf)
            self.leaves.append((n, leaf))

    def forward(self, x):
        for _, m in self.leaves:
            m(x)
        return x

out = {}
for plan, (make, layers) in t.PLANS.items():
    for k in sorted({0, 1, len(layers)}):
        model = Model()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t.apply_plan(model, plan, steps=k)
        with t.model_region():
            model(0)
        out["%s %d" % (plan, k)] = {n: repr(m.recipe_seen) for n, m in model.leaves}
        out["%s recipe" % plan] = repr(make())
print(json.dumps({"plans": {p: v[1] for p, v in t.PLANS.items()}, "ran": out}))
'''


def check_te(name, out, want_plans, modules, plan_rows):
    """te_bf16_plan.py against tests/report/te_stub (TE 2.18): step k of each plan runs the
    first k layers out of FP8 and every other module under the plan's recipe, the one
    bf16_plan.csv names (the FP8 plan's delayed setting; NVFP4BlockScaling for FP4)."""
    env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "te_stub"), FP8LAB_TE_STUB_VERSION="2.18")
    pr = subprocess.run([sys.executable, "-c", TE, out, json.dumps(sorted(modules))],
                        capture_output=True, text=True, env=env)
    if not check(pr.returncode == 0, "%s: te_bf16_plan.py: %s" % (name, pr.stderr[-1500:])):
        return
    res = json.loads(pr.stdout.strip().splitlines()[-1])
    check(res["plans"] == want_plans, "%s: te PLANS %s, want %s" % (name, res["plans"], want_plans))
    for plan in want_plans:
        rec = res["ran"]["%s recipe" % plan]
        r0 = [r for r in plan_rows if r["plan"] == plan][0]
        if plan == "fp8":
            want = "DelayedScaling(" in rec and "amax_history_len=%s," % r0["history_len"] in rec \
                and "margin=%s," % r0["margin"] in rec and "amax_compute_algo='%s'" % \
                r0["amax_compute"] in rec
        else:
            want = rec.startswith("NVFP4BlockScaling(")
        check(want, "%s: te %s recipe %s for bf16_plan.csv's %s" % (name, plan, rec, dict(r0)))
        for key, ran in res["ran"].items():
            if not key.startswith(plan + " ") or key.endswith("recipe"):
                continue
            kept = set(want_plans[plan][:int(key.split()[1])])
            bad = {n: v for n, v in ran.items() if v != ("None" if n in kept else rec)}
            check(not bad, "%s: te %s: modules under the wrong recipe %s" % (name, key, bad))


def check_frameworks(name, out, p8, p4, modules, fp4_ends, plan_rows=()):
    fp8_txt = os.path.join(out, "megatron_bf16_plan_fp8.txt")
    if p8 and check(os.path.exists(fp8_txt), "%s: no megatron_bf16_plan_fp8.txt" % name):
        with open(fp8_txt) as f:
            flags = flags_of(f.read(), "megatron_bf16_plan_fp8.txt")
        check(flags.get("--fp8-recipe") == "delayed" and "--first-last-layers-bf16" not in flags
              and flags.get("--te-precision-config-file") == "megatron_bf16_plan_fp8.yaml",
              "%s: fp8 flags %s" % (name, flags))
        check_yaml(name + " fp8", os.path.join(out, "megatron_bf16_plan_fp8.yaml"), p8, modules)
    fp4_txt = os.path.join(out, "megatron_bf16_plan_fp4.txt")
    check(bool(p4) == os.path.exists(fp4_txt), "%s: megatron_bf16_plan_fp4.txt %s, fp4 plan %s"
          % (name, os.path.exists(fp4_txt), p4))
    if p4 and os.path.exists(fp4_txt):
        with open(fp4_txt) as f:
            flags = flags_of(f.read(), "megatron_bf16_plan_fp4.txt")
        check(flags.get("--fp4-format") == "e2m1" and flags.get("--fp4-recipe") == "nvfp4",
              "%s: fp4 flags %s" % (name, flags))
        yml = os.path.join(out, "megatron_bf16_plan_fp4.yaml")
        if fp4_ends:
            got = (int(flags.get("--num-layers-at-start-in-bf16", -1)),
                   int(flags.get("--num-layers-at-end-in-bf16", -1)))
            check(got in fp4_ends and "--first-last-layers-bf16" in flags and
                  not os.path.exists(yml),
                  "%s: fp4 first/last %s, want %s" % (name, flags, fp4_ends))
        else:
            check(flags.get("--te-precision-config-file") == "megatron_bf16_plan_fp4.yaml" and
                  "--first-last-layers-bf16" not in flags, "%s: fp4 flags %s" % (name, flags))
            check_yaml(name + " fp4", yml, p4, modules)
    env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "torchao_stub"))
    pr = subprocess.run([sys.executable, "-c", TORCHAO, out, json.dumps(sorted(modules))],
                        capture_output=True, text=True, env=env)
    if not check(pr.returncode == 0, "%s: torchao_bf16_plan.py: %s" % (name, pr.stderr[-1500:])):
        return
    res = json.loads(pr.stdout.strip().splitlines()[-1])
    want_plans = {k: v for k, v in (("fp8", p8), ("fp4", p4)) if v}
    check(res["plans"] == want_plans, "%s: PLANS %s, want %s" % (name, res["plans"], want_plans))
    for key, conv in res["converted"].items():
        plan, k = key.split()
        kept = set(want_plans[plan][:int(k)])
        check(conv == [m for m in sorted(modules) if m not in kept],
              "%s: torchao %s converted %s" % (name, key, conv))
    check_te(name, out, want_plans, modules, plan_rows)


def run_case(name, exp, tmp, quickstart, want_ends=False, fp4=True):
    out = os.path.join(tmp, name)
    p = subprocess.run([BIN, "run", exp, "--out", out, "--quiet"], capture_output=True, text=True)
    if not check(p.returncode == 0, "%s: rc %d %s" % (name, p.returncode, p.stderr[-800:])):
        return
    plan = rows(os.path.join(out, "bf16_plan.csv"))
    modules = {module(r["tensor"]) for r in rows(os.path.join(out, "analysis.csv"))}
    # FP8
    order, keys, misfits, key = fp8_plan(out)
    r8 = [r for r in plan if r["plan"] == "fp8"]
    check(r8 and all(delayed_key(r) == key for r in r8), "%s: fp8 rows' setting" % name)
    step_of = {l: i + 1 for i, l in enumerate(order)}
    check_csv(name, out, r8, "fp8", order, misfits,
              lambda k: [t for t in misfits if step_of[module(t)] > k], keys=keys)
    print("%s fp8 plan (%s): %s" % (name, " ".join(key), order))
    if name == "ranks":  # both ranks' tensors among the misfits, their layers named once
        check({t.split("/")[0] for t in misfits} == {"rank_0", "rank_1"} and
              not any("/" in l for l in order), "ranks: misfits %s, layers %s" % (misfits, order))
    if quickstart:
        check(key == ("delayed", "128", "1", "max") and
              set(order) == {"layers.1.fc1", "layers.1.fc2"},
              "quickstart: the answer %s and its misfits' layers %s" % (key, order))
        # by hand: fc1 and fc2 each 6*64*128*512 FLOPs of 4 * 6*64*(128*384 + 128*128 + 2*128*512)
        hand = [128 * 512 / (4 * (128 * 384 + 128 * 128 + 2 * 128 * 512))]
        hand.append(2 * hand[0])
        check(hand == [1 / 12, 1 / 6] and
              [close(num(r["flops_share"]), h) for r, h in zip(r8[1:], hand)] == [True, True],
              "quickstart: shares %s, by hand %s" % ([r["flops_share"] for r in r8[1:]], hand))
    # FP4
    r4 = [r for r in plan if r["plan"] == "fp4"]
    o4 = []
    if fp4:
        o4, ver, best, R = fp4_plan(out)
        check(len(o4) >= 2, "%s: the FP4 plan has %d steps: lower fp4_gemm_ratio for a test"
              % (name, len(o4)))
        check(r4 and r4[0]["recipe"] == best, "%s: the fp4 plan's configuration %s, want %s"
              % (name, r4[0]["recipe"] if r4 else None, best))
        check_csv(name, out, r4, "fp4", o4, o4, lambda k: o4[k:], verdicts=ver)
        print("%s fp4 plan (%s, R %g): %s" % (name, best, R, o4))
    else:
        check(not r4, "%s: an fp4 plan without FP4 configurations" % name)
    en4 = ends(out, o4)[-1] if o4 else set()
    check(bool(en4) == want_ends, "%s: the FP4 plan's layers are whole blocks at the ends: %s"
          % (name, en4))
    check_frameworks(name, out, order, o4, modules, en4, plan)
    check_replay(name, out, plan, tmp)


RANKS = """[trace]
path = ranks_trace
reduce_amax = true

[recipe.delayed]
kind = delayed
history_len = 16, 1024
margin = 0, 1

[recipe.current]
kind = current

[analysis]
gemm = false
"""


def cases(tmp):
    run_case("quickstart", os.path.join(ROOT, "experiments", "quickstart.ini"), tmp, True,
             fp4=False)
    # two ranks under reduce_amax: a layer leaves FP8 on both, and what each step leaves
    # missing (misfits of both ranks) is what the replay finds
    for rank in (0, 1):
        p = subprocess.run([BIN, "synth", "llm", os.path.join(tmp, "ranks_trace", "rank_%d" % rank),
                            "--steps", "40", "--seed", str(rank + 1)], capture_output=True)
        check(p.returncode == 0, "synth rank %d: rc %d" % (rank, p.returncode))
    with open(os.path.join(tmp, "ranks.ini"), "w") as f:
        f.write(RANKS)
    run_case("ranks", os.path.join(tmp, "ranks.ini"), tmp, False, fp4=False)
    with open(os.path.join(ROOT, "experiments", "fp4.ini")) as f:
        text = f.read()
    text = text.replace("synth_steps = 200", "synth_steps = 20")
    text = re.sub(r"\[recipe\.nvfp4_4over6\].*?(?=\n\[analysis\])", "", text, flags=re.S)
    text = text.replace("[analysis]\n", "[analysis]\nfp4_gemm_ratio = %g\n" % R4)
    check("synth_steps = 20" in text and "[recipe.nvfp4]" in text and
          "[recipe.nvfp4_4over6]" not in text and "[recipe.mxfp4]" not in text,
          "the shortened fp4.ini")
    exp = os.path.join(tmp, "fp4_short.ini")
    with open(exp, "w") as f:
        f.write(text)
    run_case("fp4", exp, tmp, False)
    # the first block of the same trace alone, with a ratio that fails its four layers: the
    # FP4 plan keeps the whole first block of the model (run.json's model_shape: four),
    # which Megatron-LM's first-layer count expresses
    text = text.replace("synth_seed = 1\n", "synth_seed = 1\ntensors = layers.0.*\n").replace(
        "fp4_gemm_ratio = %g" % R4, "fp4_gemm_ratio = 2.5")
    exp = os.path.join(tmp, "fp4_ends.ini")
    with open(exp, "w") as f:
        f.write(text)
    run_case("fp4_ends", exp, tmp, False, want_ends=True)


def main():
    if BIN is None:
        print(__doc__)
        return 2
    tmp = tempfile.mkdtemp(prefix="fp8lab_bf16_plan_")
    try:
        cases(tmp)
    finally:
        if not os.environ.get("FP8LAB_KEEP_TMP"):
            shutil.rmtree(tmp, ignore_errors=True)
    fails = FAILS + test_frameworks.FAILS  # the flags' checks record there
    print("%d failure(s)" % len(fails))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
