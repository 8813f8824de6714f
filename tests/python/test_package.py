#!/usr/bin/env python3
"""The Python package, installed the way a user installs it (issue 43):

  - the wheel is built from the checkout by pip (pyproject.toml: scikit-build-core running the
    project's CMake), once per source state: cached in ~/.cache/fp8lab/wheels/<hash of the
    source files>/ (FP8LAB_WHEEL_CACHE overrides the folder), so a rerun on the same sources
    installs the same wheel;
  - a fresh virtual environment (/usr/bin/python3 -m venv --system-site-packages: Debian's
    python3-torch is the capture's torch, as .ci/run installs it) installs it with pip, which
    brings numpy and pandas;
  - from a working folder outside the checkout, with relative paths: `import fp8lab` comes from
    the venv and imports neither torch nor pandas; fp8lab.__version__, `v/bin/fp8lab --version`
    and CMakeLists.txt's project(VERSION) agree; --version names the package's own GPU module
    (fp8lab/lib/fp8lab/fp8lab-gpu.so) exactly when the build tree has one (a CUDA build);
    fp8lab.capture.Recorder records a tiny model (3 GEMMs, 4 steps, snapshots at 0 and 2):
    amax.csv holds the amaxes the test computes itself with torch; `v/bin/fp8lab run` replays
    it, and its steps.csv and summary.csv are byte for byte those of the build tree's fp8lab on
    the same trace and experiment; fp8lab.load(run) gives every table the run wrote with the
    CSV's header as its columns and every value equal to the CSV's text parsed by hand (an
    integer, a float with inf/nan, a name, empty = missing), run.json as the same dict; the
    same experiment with `stream = npy`: stream_records a np.memmap, its stream the same rows
    as stream.csv's; `python -m fp8lab.te_dumps --help` answers;
  - the checkout's old import (tools/capture on sys.path, `import fp8lab_capture`) still
    works: the same module as fp8lab.capture, with a FutureWarning.

Usage: test_package.py FP8LAB_BIN SOURCE_DIR
Exit 77 = skipped (no /usr/bin/python3 with venv and torch, or no network for the build's
scikit-build-core); a failure instead under FP8LAB_REQUIRE_PYDEPS, as .ci/run sets.
"""
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

SYSTEM_PYTHON = "/usr/bin/python3"
FAILS = []


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL: " + what)


def run(args, cwd=None, env=None):
    p = subprocess.run(args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    return p.returncode, p.stdout


def skip(why):
    if os.environ.get("FP8LAB_REQUIRE_PYDEPS", "") not in ("", "0"):
        print("FAILED: %s, and FP8LAB_REQUIRE_PYDEPS is set" % why)
        sys.exit(1)
    print("skipped: %s" % why)
    sys.exit(77)


def source_key(src):
    """A hash of every file that goes into the wheel: tracked and untracked, not ignored."""
    rc, out = run(["git", "-C", src, "ls-files", "-z", "--cached", "--others",
                   "--exclude-standard"])
    if rc != 0:
        return None
    h = hashlib.sha256()
    for rel in sorted(set(out.split("\0")) - {""}):
        path = os.path.join(src, rel)
        if os.path.isfile(path):
            h.update(rel.encode() + b"\0")
            with open(path, "rb") as f:
                h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()[:20]


def wheel_for(src):
    """The wheel of this source state: from the cache, or built by pip into it."""
    cache = os.environ.get("FP8LAB_WHEEL_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "fp8lab", "wheels")
    key = source_key(src) or "nogit-%d" % os.getpid()
    where = os.path.join(cache, key)
    found = [f for f in os.listdir(where) if f.endswith(".whl")] if os.path.isdir(where) else []
    if found:
        print("wheel: cached %s" % os.path.join(where, found[0]))
        return os.path.join(where, found[0])
    os.makedirs(cache, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".building-", dir=cache)
    t0 = time.monotonic()
    rc, out = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check",
                   "-w", tmp, src])
    if rc != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        if re.search(r"(Could not find a version|No matching distribution|Network is unreachable|"
                     r"Temporary failure in name resolution)", out):
            skip("pip could not fetch the build backend (scikit-build-core): no network?")
        print(out[-6000:])
        check(False, "pip wheel failed: rc %d" % rc)
        return None
    built = [f for f in os.listdir(tmp) if f.endswith(".whl")]
    print("wheel: built %s in %.0f s, %d bytes" % (built[0], time.monotonic() - t0,
                                                    os.path.getsize(os.path.join(tmp, built[0]))))
    try:
        os.rename(tmp, where)  # the finished wheel appears at once, or not at all
    except OSError:  # another run put it there first
        shutil.rmtree(tmp, ignore_errors=True)
        return wheel_for(src)
    # keep the newest three source states
    olds = sorted((d for d in os.listdir(cache) if not d.startswith(".")),
                  key=lambda d: os.path.getmtime(os.path.join(cache, d)))
    for d in olds[:-3]:
        shutil.rmtree(os.path.join(cache, d), ignore_errors=True)
    return os.path.join(where, built[0])


# The user's side, run by the venv's python in the working folder: capture, then print the
# amaxes the test computes itself (one JSON line).
CAPTURE = r'''
import json, sys
import fp8lab
light = not ({"torch", "pandas"} & set(sys.modules))
import torch
import torch.nn as nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 8))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
want = {}
with fp8lab.capture.Recorder(model, "trace", every=2, micro=False) as rec:
    for step in range(4):
        x = torch.randn(8, 16) * (1 + step)
        acts = [x]
        h = x
        for m in model:
            h = m(h)
            acts.append(h)
        for i, idx in enumerate((0, 2, 4)):
            want["%d,%d_linear.input" % (step, idx)] = acts[idx].abs().max().item()
            want["%d,%d_linear.weight" % (step, idx)] = model[idx].weight.abs().max().item()
        opt.zero_grad()
        h.pow(2).mean().backward()
        opt.step()
        rec.step(step)
print(json.dumps({"file": fp8lab.__file__, "version": fp8lab.__version__, "light": light,
                  "exe": fp8lab.executable(), "want": want}))
'''

# Reads every table of the run with fp8lab.load and with the csv module, and compares.
LOAD = r'''
import csv, json, math, sys
import fp8lab
import pandas as pd
r = fp8lab.load(sys.argv[1])
bad = []
tables = {}
def parse(t):
    if t == "":
        return None
    try:
        return int(t)
    except ValueError:
        pass
    try:
        return float(t)
    except ValueError:
        return t
def same(a, b):
    if b is None:
        return a is None or a is pd.NA or (isinstance(a, float) and math.isnan(a))
    if isinstance(b, float) and math.isnan(b):
        return isinstance(a, float) and math.isnan(a)
    if isinstance(b, (int, float)) and not isinstance(a, str):
        return a is not None and a is not pd.NA and float(a) == float(b)
    return str(a) == str(b)
for name in ("steps", "summary", "stream", "histograms", "gemm", "analysis", "recommendations"):
    df = getattr(r, name)
    try:
        f = open("%s/%s.csv" % (sys.argv[1], name), newline="")
    except FileNotFoundError:
        if df is not None:
            bad.append("%s: a DataFrame for a file the run did not write" % name)
        continue
    with f:
        rows = list(csv.reader(f))
    if df is None:
        bad.append("%s: None, but %s.csv exists" % (name, name))
        continue
    tables[name] = [len(rows) - 1, len(rows[0])]
    if list(df.columns) != rows[0]:
        bad.append("%s: columns %s, the CSV's %s" % (name, list(df.columns), rows[0]))
        continue
    if len(df) != len(rows) - 1:
        bad.append("%s: %d rows, the CSV's %d" % (name, len(df), len(rows) - 1))
        continue
    for j, col in enumerate(rows[0]):
        vals = df[col].tolist()
        for i, row in enumerate(rows[1:]):
            if not same(vals[i], parse(row[j])):
                bad.append("%s: row %d column %s: %r, the CSV's %r" % (name, i + 1, col, vals[i], row[j]))
                break
info = r.info if hasattr(r, "info") else None
with open("%s/run.json" % sys.argv[1]) as f:
    same_json = info == json.load(f)
print(json.dumps({"bad": bad[:20], "tables": tables, "run_json": same_json}))
'''

NPY = r'''
import json, sys
import numpy as np
import fp8lab
a, b = fp8lab.load(sys.argv[1]), fp8lab.load(sys.argv[2])
bad = []
if not isinstance(b.stream_records, np.memmap) or a.stream_records is not None:
    bad.append("stream_records: %s and %s" % (type(a.stream_records), type(b.stream_records)))
x, y = a.stream, b.stream
if list(x.columns) != list(y.columns) or len(x) != len(y):
    bad.append("shapes %s %s" % (x.shape, y.shape))
else:
    for c in x.columns:
        if str(x[c].dtype) == "float64":
            u, v = x[c].to_numpy(), y[c].to_numpy()
            ok = np.allclose(u, v, rtol=1e-8, atol=1e-12, equal_nan=True) if c == "overshoot" \
                else np.array_equal(u.astype(np.float32), v.astype(np.float32), equal_nan=True)
        else:
            ok = x[c].astype(str).tolist() == y[c].astype(str).tolist()
        if not ok:
            bad.append("column %s differs" % c)
print(json.dumps({"bad": bad, "rows": len(y)}))
'''

EXP = """[trace]
path = trace

[recipe.delayed]
kind = delayed
format = hybrid
history_len = 1, 4
margin = 0, 1

[recipe.current]
kind = current
format = hybrid

[output]
dir = run
"""


def last_json(out):
    for line in reversed(out.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return None


def amax_rows(path):
    with open(path) as f:
        lines = f.read().splitlines()
    return {",".join(l.split(",")[:2]): float(l.split(",")[2]) for l in lines[1:]}


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    fp8lab_bin, src = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    if not os.path.exists(SYSTEM_PYTHON) or run([SYSTEM_PYTHON, "-c", "import venv, torch"])[0]:
        skip("%s with venv and torch is needed (Debian's python3-venv, python3-torch)"
             % SYSTEM_PYTHON)
    wheel = wheel_for(src)
    if wheel is None:
        return 1
    with tempfile.TemporaryDirectory(prefix="fp8lab_pkg_") as tmp:
        venv, work = os.path.join(tmp, "v"), os.path.join(tmp, "work")
        os.mkdir(work)
        rc, out = run([SYSTEM_PYTHON, "-m", "venv", "--system-site-packages", venv])
        check(rc == 0, "venv: rc %d %s" % (rc, out))
        t0 = time.monotonic()
        rc, out = run([os.path.join(venv, "bin", "pip"), "install", "--disable-pip-version-check",
                       "-q", wheel])
        print("pip install of the wheel: %.0f s" % (time.monotonic() - t0))
        if rc != 0:
            print(out[-4000:])
            check(False, "pip install %s: rc %d" % (wheel, rc))
            return 1
        py, exe = os.path.join(venv, "bin", "python"), os.path.join(venv, "bin", "fp8lab")
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)  # nothing from the checkout
        # the package, from a folder outside the checkout: import, capture
        rc, out = run([py, "-c", CAPTURE], cwd=work, env=env)
        got = last_json(out) if rc == 0 else None
        check(got is not None, "capture script: rc %d\n%s" % (rc, out[-3000:]))
        if got is None:
            return 1
        site = os.path.realpath(os.path.join(venv, "lib"))
        check(os.path.realpath(got["file"]).startswith(site),
              "import fp8lab came from %s, not the venv" % got["file"])
        check(got["light"], "import fp8lab imported torch or pandas")
        with open(os.path.join(src, "CMakeLists.txt")) as f:
            version = re.search(r"project\(fp8lab VERSION ([0-9.]+)", f.read()).group(1)
        check(got["version"] == version, "fp8lab.__version__ %s, CMake's %s" % (got["version"],
                                                                                 version))
        amax = amax_rows(os.path.join(work, "trace", "amax.csv"))
        for k, v in sorted(got["want"].items()):
            check(k in amax and amax[k] == float("%.9g" % v),
                  "amax.csv %s: %r, torch's %r" % (k, amax.get(k), v))
        check(sorted(f for f in os.listdir(os.path.join(work, "trace")) if f.startswith("step_"))
              == ["step_0.safetensors", "step_2.safetensors"], "snapshots: %s"
              % sorted(os.listdir(os.path.join(work, "trace"))))
        # the CLI from the venv's bin: version, GPU module
        rc, out = run([exe, "--version"], cwd=work, env=env)
        check(rc == 0 and out.splitlines()[0] == "fp8lab %s" % version,
              "fp8lab --version: rc %d %r" % (rc, out))
        module = os.path.join(os.path.dirname(got["exe"]), "..", "lib", "fp8lab", "fp8lab-gpu.so")
        built_module = os.path.exists(os.path.join(os.path.dirname(fp8lab_bin), "fp8lab-gpu.so"))
        check(os.path.exists(module) == built_module,
              "the package's GPU module exists: %s, the build tree's: %s"
              % (os.path.exists(module), built_module))
        if built_module:
            check(("GPU module: %s" % module) in out, "--version does not name %s:\n%s"
                  % (module, out))
        # the closed-loop emulator's library, shipped in the package (fp8lab/lib/fp8lab/) and
        # found there by fp8lab.emu without FP8LAB_EMU_LIB (issue 44)
        with open(os.path.join(work, "emu.ini"), "w") as f:
            f.write("[trace]\npath = t\n[recipe.d]\nkind = delayed\n")
        emu_env = dict(env)
        emu_env.pop("FP8LAB_EMU_LIB", None)
        rc, out = run([py, "-c", "import numpy as np, fp8lab.emu as e; r = e.Recipe('emu.ini', 'd'); "
                       "s = r.slot('a.input'); r.qdq(s, np.array([2.0], np.float32)); r.update(); "
                       "print(e.library_path()); print(r.scale(s))"], cwd=work, env=emu_env)
        lines = out.splitlines()
        check(rc == 0 and len(lines) >= 2 and lines[-1] == "224.0" and
              lines[-2].endswith(os.path.join("fp8lab", "lib", "fp8lab", "libfp8lab_emu.so")) and
              os.path.realpath(src) not in os.path.realpath(lines[-2]),
              "fp8lab.emu from the installed package: rc %d %r" % (rc, out[-2000:]))
        # the replay, installed against the build tree's binary
        with open(os.path.join(work, "exp.ini"), "w") as f:
            f.write(EXP)
        rc, out = run([exe, "run", "exp.ini", "--quiet"], cwd=work, env=env)
        check(rc == 0, "v/bin/fp8lab run: rc %d\n%s" % (rc, out[-3000:]))
        rc, out2 = run([fp8lab_bin, "run", "exp.ini", "--quiet", "--out", "run_build"], cwd=work)
        check(rc == 0, "build tree's fp8lab run: rc %d\n%s" % (rc, out2[-3000:]))
        for name in ("steps.csv", "summary.csv", "stream.csv", "analysis.csv"):
            a, b = (os.path.join(work, d, name) for d in ("run", "run_build"))
            same = os.path.exists(a) and os.path.exists(b) and open(a).read() == open(b).read()
            check(same, "%s differs between the installed and the build tree's fp8lab" % name)
        # the results API against the CSVs
        rc, out = run([py, "-c", LOAD, "run"], cwd=work, env=env)
        res = last_json(out) if rc == 0 else None
        check(res is not None, "fp8lab.load: rc %d\n%s" % (rc, out[-3000:]))
        if res is not None:
            for b in res["bad"]:
                check(False, "fp8lab.load: " + b)
            print("fp8lab.load: tables (rows, columns) %s" % res["tables"])
            check(set(res["tables"]) >= {"steps", "summary", "stream", "histograms", "analysis",
                                         "recommendations"}, "tables: %s" % res["tables"])
            check(res["run_json"], "fp8lab.load(run).info is not run.json")
        # the compact stream (stream.npy) of the same experiment: memory-mapped, and its long
        # table the same as stream.csv's (amax and scale float32-equal: stream.csv's 9 digits)
        with open(os.path.join(work, "exp_npy.ini"), "w") as f:
            f.write(EXP.replace("dir = run", "dir = run_npy\nstream = npy"))
        rc, out = run([exe, "run", "exp_npy.ini", "--quiet"], cwd=work, env=env)
        check(rc == 0, "v/bin/fp8lab run exp_npy.ini: rc %d\n%s" % (rc, out[-3000:]))
        rc, out = run([py, "-c", NPY, "run", "run_npy"], cwd=work, env=env)
        res = last_json(out) if rc == 0 else None
        check(res is not None and res["bad"] == [] and res["rows"] > 0,
              "fp8lab.load(run_npy).stream: rc %d %s" % (rc, res if res else out[-3000:]))
        if res is not None:
            print("fp8lab.load: the npy stream's %d rows equal stream.csv's" % res["rows"])
        rc, out = run([py, "-m", "fp8lab.te_dumps", "--help"], cwd=work, env=env)
        check(rc == 0 and "DUMP_DIR" in out.replace("dump_dir", "DUMP_DIR"),
              "python -m fp8lab.te_dumps --help: rc %d %s" % (rc, out[-500:]))
    # the old import from the checkout
    old = ("import sys, warnings\n"
           "sys.path.insert(0, %r)\n"
           "with warnings.catch_warnings(record=True) as w:\n"
           "    warnings.simplefilter('always')\n"
           "    import fp8lab_capture\n"
           "import fp8lab.capture\n"
           "assert fp8lab_capture is fp8lab.capture, fp8lab_capture\n"
           "assert fp8lab_capture.Recorder is fp8lab.capture.Recorder\n"
           "assert any(issubclass(x.category, FutureWarning) and 'fp8lab.capture' in str(x.message)"
           " for x in w), [str(x.message) for x in w]\n"
           "print('old import ok')\n" % os.path.join(src, "tools", "capture"))
    rc, out = run([SYSTEM_PYTHON, "-c", old], cwd=tempfile.gettempdir())
    check(rc == 0 and "old import ok" in out, "import fp8lab_capture: rc %d\n%s" % (rc, out))
    print("%d failure(s)" % len(FAILS))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
