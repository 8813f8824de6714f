#!/usr/bin/env python3
"""megatron_args.txt, megatron_precision.yaml and torchao_config.py (issue 45) against the names
in Megatron-LM's and torchao's sources, transcribed here (docs/frameworks/megatron.md 1.2, 2.3;
torchao.md 1) and against te_recipe.py's decision for the same run.

Three runs, each with its report: the quickstart (modules that need current scaling), a trace
from TransformerEngine's debug logs (test_te_names.py's: TE names, amaxes alone), and a
synthetic Mixture-of-Experts trace (routers kept in BF16). For each:
  - megatron_args.txt: every line that is not a comment is one flag of Megatron-LM's table
    below with a valid value, no flag twice; --fp8-format, --fp8-recipe delayed and the history
    length, amax compute and margin are recommendations.csv's model row;
    --te-precision-config-file names megatron_precision.yaml exactly when te_recipe.py has a
    module under current scaling or in BF16; every module te_recipe.py gives a larger margin is
    named in a "Cannot express" comment;
  - megatron_precision.yaml, read with yaml.SafeLoader as Megatron does, passes the rules of
    Megatron's quant_config.py and TEQuantizationParams (keys, enabled, glob, no delayed), and
    its first matching matcher (fnmatch, in file order) gives each of te_recipe.py's modules its
    recipe (current scaling: tensorwise; None: the empty recipe) and no other module of the
    trace (COVERED) any;
  - torchao_config.py, run against tests/report/torchao_stub on a model of the trace's modules
    (one of them with a dimension not divisible by 16), converts every module but te_recipe.py's
    BF16 ones and that one, with the recipe "tensorwise".

Usage: test_frameworks.py FP8LAB_BIN
"""
import csv
import fnmatch
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BIN = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else None
FAILS = []

try:
    import yaml
except ImportError as e:
    if os.environ.get("FP8LAB_REQUIRE_PYDEPS", "") not in ("", "0"):
        print("FAILED: %s, and FP8LAB_REQUIRE_PYDEPS is set (install-deps.sh installs pyyaml)" % e)
        sys.exit(1)
    print("skipped: %s (scripts/install-deps.sh installs pyyaml)" % e)
    sys.exit(77)

sys.path.insert(0, HERE)
import test_te_names  # noqa: E402  (its TE-log trace)

# Megatron-LM's FP8 flags: name -> (type, choices or None). megatron.md 1.2 (transformer_config.py
# 587-656 at main d98e8a6; arguments.py 2020-2022 for --te-precision-config-file).
MEGATRON = {
    "--fp8-format": (str, {"e4m3", "hybrid"}),
    "--fp8-recipe": (str, {"tensorwise", "delayed", "mxfp8", "blockwise", "custom"}),
    "--fp8-margin": (int, None),
    "--fp8-amax-history-len": (int, None),
    "--fp8-amax-compute-algo": (str, {"most_recent", "max"}),
    "--fp8-param-gather": (None, None),
    "--first-last-layers-bf16": (None, None),
    "--num-layers-at-start-in-bf16": (int, None),
    "--num-layers-at-end-in-bf16": (int, None),
    "--te-precision-config-file": (str, None),
}
# TEQuantizationParams' recipe keys at core_v0.16.0 (megatron.md 2.3) and their values
RECIPE_KEYS = {"fp8_quantization_recipe": {"tensorwise", "blockwise", "mxfp8", "custom"},
               "fp4_quantization_recipe": {"nvfp4", "custom"}, "custom_recipe_factory": None,
               "fp8_format": {"e4m3", "hybrid"}, "override_quantized_autocast": {True, False},
               "override_nonquantized_autocast": {True, False}, "tp_only_amax_red": {True, False}}


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL:", what)
    return cond


def megatron_flags(text, name, table=None, check=check):
    """The flags of an arguments file (every line not a comment one flag and its value), each
    checked against table (default: MEGATRON): a Megatron-LM flag, once, an int where it takes
    one, a value among its choices. {flag: value or None}."""
    table = MEGATRON if table is None else table
    flags = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        flag, val = parts[0], parts[1] if len(parts) > 1 else None
        check(flag in table, "%s: %s is not a Megatron-LM flag" % (name, flag))
        check(flag not in flags, "%s: %s twice" % (name, flag))
        typ, choices = table.get(flag, (None, None))
        if typ is int:
            check(val is not None and val.lstrip("-").isdigit(), "%s: %s %r" % (name, flag, val))
        if choices is not None:
            check(val in choices, "%s: %s %r not in %s" % (name, flag, val, sorted(choices)))
        flags[flag] = val
    return flags


def model_row(out):
    with open(os.path.join(out, "recommendations.csv"), newline="") as f:
        return next(r for r in csv.DictReader(f) if r["scope"] == "model")


PROBE = r'''
import json, sys
sys.path.insert(0, sys.argv[1])
import te_recipe
mods = {}
for k, v in te_recipe.MODULES.items():
    mods[k] = "bf16" if v is None else "current" if type(v).__name__ == "Float8CurrentScaling" \
        else "margin %d" % v.margin
print(json.dumps({"modules": mods, "covered": te_recipe.COVERED}))
'''

TORCHAO = r'''
import json, sys
sys.path.insert(0, sys.argv[1])
import torchao.float8 as f8
import torchao_config

class Linear:
    def __init__(self, i, o):
        self.in_features, self.out_features = i, o

class Model:
    def __init__(self, names, odd):
        self.mods = [(n, Linear(64, 10 if n == odd else 64)) for n in names]
        # a Linear inside each module kept in BF16 (an experts module's experts): kept too
        self.mods += [(n + ".inner", Linear(64, 64)) for n in sorted(torchao_config.KEEP_BF16)]
    def named_modules(self):
        return [("", self)] + self.mods

names, odd = json.loads(sys.argv[2])
m = torchao_config.apply(Model(names, odd))
print(json.dumps({"converted": f8.CONVERTED, "keep": sorted(torchao_config.KEEP_BF16)}))
'''


def py(code, args, env_path=None):
    env = dict(os.environ)
    if env_path:
        env["PYTHONPATH"] = env_path
    p = subprocess.run([sys.executable, "-c", code] + args, capture_output=True, text=True,
                       env=env)
    if not check(p.returncode == 0, "python: rc %d %s" % (p.returncode, p.stderr[-2000:])):
        return None
    return json.loads(p.stdout.strip().splitlines()[-1])


def check_run(name, out):
    print("== %s" % name)
    te = py(PROBE, [out], os.path.join(HERE, "te_stub"))
    if te is None:
        return
    mods, covered = te["modules"], te["covered"]
    row = model_row(out)
    args_path = os.path.join(out, "megatron_args.txt")
    if not check(os.path.exists(args_path), "%s: no megatron_args.txt" % name):
        return
    with open(args_path) as f:
        text = f.read()
    flags = megatron_flags(text, name)
    fmt = {"hybrid": "hybrid", "e4m3": "e4m3"}.get(row["format"], "hybrid")
    check(flags.get("--fp8-recipe") == "delayed" and row["kind"] == "delayed",
          "%s: --fp8-recipe %s, the model row %s" % (name, flags.get("--fp8-recipe"), row["kind"]))
    check(flags.get("--fp8-format") == fmt, "%s: --fp8-format %s, model row format %s"
          % (name, flags.get("--fp8-format"), row["format"]))
    for flag, col in (("--fp8-amax-history-len", "history_len"), ("--fp8-margin", "margin"),
                      ("--fp8-amax-compute-algo", "amax_compute")):
        check(flags.get(flag) == row[col], "%s: %s %s, model row %s %s"
              % (name, flag, flags.get(flag), col, row[col]))
    check("--first-last-layers-bf16" not in flags, "%s: first/last BF16 with delayed" % name)
    needs = {k: v for k, v in mods.items() if v in ("bf16", "current")}
    yml = os.path.join(out, "megatron_precision.yaml")
    check(bool(needs) == os.path.exists(yml) ==
          (flags.get("--te-precision-config-file") == "megatron_precision.yaml"),
          "%s: per-module file %s, flag %s, te_recipe.py modules %s"
          % (name, os.path.exists(yml), flags.get("--te-precision-config-file"), needs))
    for k, v in mods.items():
        if v.startswith("margin"):
            check("#   %s: %s" % (k, v) in text, "%s: %s (%s) not in a Cannot express comment"
                  % (name, k, v))
    if os.path.exists(yml):
        with open(yml) as f:
            doc = yaml.load(f, Loader=yaml.SafeLoader)
        check(set(doc) == {"configs", "matchers"}, "%s: yaml keys %s" % (name, sorted(doc)))
        configs, matchers = doc.get("configs", {}), doc.get("matchers", {})
        for cname, c in configs.items():
            check(c.get("transformer_engine_config_type") == "TEQuantizationParams" and
                  set(c) <= {"transformer_engine_config_type", "training_recipe",
                             "evaluation_recipe"} and isinstance(c.get("training_recipe"), dict),
                  "%s: config %s %s" % (name, cname, c))
            for k, v in c.get("training_recipe", {}).items():
                check(k in RECIPE_KEYS and (RECIPE_KEYS[k] is None or v in RECIPE_KEYS[k]),
                      "%s: config %s: %s: %r" % (name, cname, k, v))
        for mname, m in matchers.items():
            check(m.get("enabled") is True and m.get("type") == "glob" and "pattern" in m and
                  m.get("config") in configs, "%s: matcher %s %s" % (name, mname, m))

        def decide(module):
            for m in matchers.values():
                if m.get("enabled") and fnmatch.fnmatch(module, m["pattern"]):
                    return configs[m["config"]]["training_recipe"]
            return None

        for mod in covered:
            path = mod
            got = decide(path)
            want = {"bf16": {}, "current": {"fp8_quantization_recipe": "tensorwise",
                                            "fp8_format": fmt}}.get(mods.get(mod))
            check(got == want, "%s: %s gets %s from the yaml, te_recipe.py says %s"
                  % (name, path, got, mods.get(mod, "the model recipe")))
        print("yaml: %d matchers for %d modules of %d" % (len(matchers), len(needs), len(covered)))
    # torchao
    ta = os.path.join(out, "torchao_config.py")
    if check(os.path.exists(ta), "%s: no torchao_config.py" % name):
        paths = list(covered)
        odd = next(p for p in paths if p not in {k for k, v in mods.items() if v == "bf16"})
        res = py(TORCHAO, [out, json.dumps([paths, odd])], os.path.join(HERE, "torchao_stub"))
        if res is not None:
            bf16 = sorted(k for k, v in mods.items() if v == "bf16")
            check(res["keep"] == bf16, "%s: KEEP_BF16 %s, te_recipe.py's None %s"
                  % (name, res["keep"], bf16))
            want = [[p, "tensorwise"] for p in paths if p not in bf16 and p != odd]
            check(not any(c[0].endswith(".inner") for c in res["converted"]),
                  "%s: a Linear inside a BF16 module converted" % name)
            check(res["converted"] == want, "%s: torchao converted %s, expected %s"
                  % (name, res["converted"][:5], want[:5]))
            print("torchao: %d of %d modules converted (%d kept in BF16, 1 not divisible by 16)"
                  % (len(res["converted"]), len(paths), len(bf16)))
    print("megatron_args.txt: %s" % " ".join("%s %s" % kv for kv in flags.items()))


MOE = """[trace]
path = synth:moe
synth_steps = 120
synth_seed = 1

[recipe.delayed]
kind = delayed
format = hybrid
history_len = 16, 1024
margin = 0, 1, 2

[recipe.current]
kind = current
format = hybrid

[output]
dir = out_moe
"""


CURRENT = """[trace]
path = synth:llm
synth_steps = 60
synth_seed = 2

[recipe.current]
kind = current
format = hybrid

[output]
dir = out_cur
"""


def main():
    if BIN is None:
        print(__doc__)
        return 2
    tmp = tempfile.mkdtemp(prefix="fp8lab_frameworks_")
    try:
        test_te_names.BIN = BIN
        p = subprocess.run([BIN, "run", os.path.join(ROOT, "experiments", "quickstart.ini"),
                            "--out", os.path.join(tmp, "q"), "--quiet"], capture_output=True,
                           text=True)
        if check(p.returncode == 0, "quickstart: rc %d %s" % (p.returncode, p.stderr[-500:])):
            check_run("quickstart", os.path.join(tmp, "q"))
        test_te_names.make_logs(os.path.join(tmp, "logs"))
        with open(os.path.join(tmp, "te.ini"), "w") as f:
            f.write(test_te_names.EXP)
        with open(os.path.join(tmp, "moe.ini"), "w") as f:
            f.write(MOE)
        with open(os.path.join(tmp, "cur.ini"), "w") as f:
            f.write(CURRENT)
        p = subprocess.run([BIN, "run", "cur.ini", "--quiet"], cwd=tmp, capture_output=True,
                           text=True)
        if check(p.returncode == 0, "current-only run: rc %d %s" % (p.returncode, p.stderr[-500:])):
            with open(os.path.join(tmp, "out_cur", "megatron_args.txt")) as f:
                lines = [l for l in f.read().splitlines() if not l.startswith("#")]
            check(lines == ["--fp8-format hybrid", "--fp8-recipe tensorwise"],
                  "current scaling, format hybrid: megatron_args.txt %s" % lines)
            with open(os.path.join(tmp, "out_cur", "torchao_config.py")) as f:
                check("Cannot express: format e4m3" not in f.read(),
                      "torchao_config.py: a hybrid run said e4m3")
        for args, out in ((["import-te", "logs", "te_logs"], None), (["run", "te.ini", "--quiet"], "out"),
                          (["run", "moe.ini", "--quiet"], "out_moe")):
            p = subprocess.run([BIN] + args, cwd=tmp, capture_output=True, text=True)
            if check(p.returncode == 0, "%s: rc %d %s" % (args, p.returncode, p.stderr[-500:])) \
                    and out:
                check_run({"out": "TE logs", "out_moe": "MoE"}[out], os.path.join(tmp, out))
    finally:
        if not os.environ.get("FP8LAB_KEEP_TMP"):
            shutil.rmtree(tmp, ignore_errors=True)
    print("%d failure(s)" % len(FAILS))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
