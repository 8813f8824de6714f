#!/usr/bin/env python3
"""fp8lab.load (python/fp8lab/results.py) against an independent reading of the same files.

Runs a small Mixture-of-Experts experiment (synth moe: experts.csv; delayed, current and MXFP8
with GEMM errors: gemm.csv) twice, once with stream.csv and once with the compact stream
(stream.npy + stream.json), then checks:
  - every table (bf16_plan.csv included: its types, the plan's steps, the experts of a
    GroupedLinear one layer) against Python's csv module: the file's columns in order, its row
    count, and every field (empty -> missing, integers exact, floats equal as parsed by float(), inf and
    nan included, names as written); integer columns that can be empty are Int64;
  - run.json as a dict equal to json.load's;
  - the npy stream: memory-mapped (np.memmap over the file, not a copy), its long table equal to
    the CSV run's stream.csv row for row (overshoot to the 9 digits stream.csv prints), and
    stream_table(tensors=[...]) equal to that table's rows of the tensor;
  - the reduced copy (name.csv.gz) loads the same frames; a table the run did not write is None;
  - damaged files raise ResultsError naming the file and the line (the byte for stream.npy).

Usage: test_results.py FP8LAB_BIN
Exit 77 = skipped (pandas missing; exit 1 instead when FP8LAB_REQUIRE_PYDEPS=1).
"""
import csv
import gzip
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
sys.path.insert(0, os.path.join(ROOT, "python"))

try:
    import numpy as np
    import pandas as pd
except ImportError as e:
    if os.environ.get("FP8LAB_REQUIRE_PYDEPS", "") not in ("", "0"):
        print("FAILED: %s, and FP8LAB_REQUIRE_PYDEPS is set" % e)
        sys.exit(1)
    print("skipped: %s (fp8lab.results needs numpy and pandas: scripts/install-deps.sh)" % e)
    sys.exit(77)

import fp8lab  # noqa: E402
from fp8lab.results import ResultsError  # noqa: E402

FAILS = []


def check(ok, what):
    if not ok:
        FAILS.append(what)
        print("FAIL: " + what)
    return ok


EXP = """[trace]
path = synth:moe
synth_steps = 60
synth_seed = 3

[recipe.delayed]
kind = delayed
format = hybrid
history_len = 4, 64
margin = 0, 1

[recipe.cur]
kind = current
format = hybrid

[recipe.mx]
kind = mxfp8

[analysis]
gemm = true
gemm_sample = 16

[output]
dir = %s
stream = %s
"""


def field(text):
    """A CSV field as the file means it: None when empty, else int, float or the text."""
    if text == "":
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def same(a, b):
    if b is None:
        return a is None or a is pd.NA or (isinstance(a, float) and math.isnan(a))
    if a is None or a is pd.NA:
        return False
    if isinstance(b, float) and math.isnan(b):
        return isinstance(a, float) and math.isnan(a)
    if isinstance(b, int):
        return not isinstance(a, (str, float)) and int(a) == b or \
            isinstance(a, float) and a == b
    if isinstance(b, float):
        return not isinstance(a, str) and float(a) == b
    return isinstance(a, str) and a == b


def compare_table(df, path, name):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", newline="") as f:
        rows = list(csv.reader(f))
    head, body = rows[0], rows[1:]
    if not check(list(df.columns) == head, "%s: columns %s, the file's %s"
                 % (name, list(df.columns), head)):
        return
    if not check(len(df) == len(body), "%s: %d rows, the file's %d" % (name, len(df), len(body))):
        return
    for j, col in enumerate(head):
        vals = df[col].tolist()
        for i, row in enumerate(body):
            if not same(vals[i], field(row[j])):
                check(False, "%s line %d column %s: %r, the file's %r"
                      % (name, i + 2, col, vals[i], row[j]))
                break
    for col in ("history_len", "margin", "step"):
        if col in df:
            check(str(df[col].dtype) == "Int64", "%s.%s: dtype %s, not Int64"
                  % (name, col, df[col].dtype))


def check_plan(p):
    """bf16_plan.csv's types, and the plan as a table: steps 0..n per plan, each step's
    still_missing within the previous step's, its count in missing, the experts of a
    GroupedLinear one layer (no expert index in a layer's name)."""
    for col in ("step", "clipped_steps", "clipped_values", "missing", "megatron_start",
                "megatron_end"):
        check(str(p[col].dtype) == "Int64", "bf16_plan.%s: dtype %s" % (col, p[col].dtype))
    for col in ("plan", "layer", "verdict", "label"):
        check(str(p[col].dtype) == "category", "bf16_plan.%s: dtype %s" % (col, p[col].dtype))
    check(p.still_missing.dtype == object or pd.api.types.is_string_dtype(p.still_missing),
          "bf16_plan.still_missing: %s, not text" % p.still_missing.dtype)
    fp8 = p[p.plan == "fp8"]
    check(list(fp8.step) == list(range(len(fp8))) and len(fp8) > 2, "fp8 steps %s" % list(fp8.step))
    prev = None
    for _, row in fp8.iterrows():
        miss = set() if pd.isna(row.still_missing) else set(row.still_missing.split("; "))
        check(len(miss) == row.missing and (prev is None or miss < prev),
              "step %d: still_missing %d names, missing %d, not fewer than before"
              % (row.step, len(miss), row.missing))
        prev = miss
    layers = [l for l in fp8.layer if not pd.isna(l)]
    check(any(l.endswith(".mlp.experts") for l in layers) and
          not any(re.search(r"\.experts\.\d+(\.|$)", l) for l in layers),
          "bf16_plan: an expert layer by index, or no experts module: %s" % layers)
    print("ok   bf16_plan: %d fp8 steps, layers %s" % (len(fp8) - 1, layers))


def raises(fn, needles, what):
    try:
        fn()
    except (ResultsError, FileNotFoundError) as e:
        msg = str(e)
        check(all(n in msg for n in needles), "%s: message %r lacks %s" % (what, msg, needles))
        print("ok   %s: %s" % (what, msg))
        return
    except Exception as e:  # noqa: BLE001 (any other exception is the failure)
        check(False, "%s: %s: %s, not ResultsError" % (what, type(e).__name__, e))
        return
    check(False, "%s: no error" % what)


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    exe = os.path.abspath(sys.argv[1])
    tmp = tempfile.mkdtemp(prefix="fp8lab_results_")
    try:
        return run(exe, tmp)
    finally:
        if not os.environ.get("FP8LAB_KEEP_TMP"):
            shutil.rmtree(tmp, ignore_errors=True)


def run(exe, tmp):
    for mode in ("csv", "npy"):
        with open(os.path.join(tmp, "exp_%s.ini" % mode), "w") as f:
            f.write(EXP % ("out_" + mode, mode))
        p = subprocess.run([exe, "run", "exp_%s.ini" % mode], cwd=tmp, capture_output=True,
                           text=True)
        if p.returncode != 0:
            print("fp8lab run exp_%s.ini: rc %d\n%s" % (mode, p.returncode, p.stderr[-2000:]))
            return 1
    out_csv, out_npy = os.path.join(tmp, "out_csv"), os.path.join(tmp, "out_npy")

    # from another folder, a relative path
    os.chdir(tmp)
    r = fp8lab.load("out_csv")
    check(r.path == out_csv, "path %s" % r.path)
    with open(os.path.join(out_csv, "run.json")) as f:
        check(r.info == json.load(f), "info is not run.json")
    want = ["steps", "summary", "stream", "gemm", "histograms", "experts", "analysis",
            "recommendations", "bf16_plan"]
    check(r.tables() == want, "tables() %s" % r.tables())
    for name in want:
        df = getattr(r, name)
        check(getattr(r, name) is df, "%s: read twice" % name)
        compare_table(df, os.path.join(out_csv, name + ".csv"), name)
        print("ok   %s: %d rows x %d columns" % (name, len(df), len(df.columns)))
    check(r.timeline is None, "timeline: not None without timeline.csv")
    check(r.stream_records is None and r.stream_index is None, "stream_records with stream.csv")
    check(len(r.gemm.kind.unique()) == 3 and len(r.experts) > 0,
          "the run has 3 kinds of GEMM rows and experts: %s, %d experts"
          % (list(r.gemm.kind.unique()), len(r.experts)))
    check_plan(r.bf16_plan)

    # the compact stream: memory-mapped, the same rows as stream.csv
    n = fp8lab.load(out_npy)
    rec = n.stream_records
    check(isinstance(rec, np.memmap) and os.path.samefile(rec.filename,
                                                         os.path.join(out_npy, "stream.npy")),
          "stream_records: %s, not a memmap of stream.npy" % type(rec))
    check(not rec.flags.writeable and not rec.flags.owndata, "stream_records owns or writes data")
    with open(os.path.join(out_npy, "stream.json")) as f:
        check(n.stream_index == json.load(f), "stream_index is not stream.json")
    check(n.tables() == want, "npy run tables() %s" % n.tables())
    a, b = r.stream, n.stream
    check(list(a.columns) == list(b.columns) and len(a) == len(b),
          "npy stream: %s x %d, stream.csv's %s x %d" % (list(b.columns), len(b),
                                                         list(a.columns), len(a)))
    for col in a.columns:
        x, y = a[col], b[col]
        if col == "overshoot":  # stream.csv prints 9 digits of the double
            ok = np.allclose(x.to_numpy(), y.to_numpy(), rtol=1e-8, atol=1e-12, equal_nan=True) \
                and bool(((x == -np.inf) == (y == -np.inf)).all())
        elif str(x.dtype) == "float64":  # float32 values: stream.csv's 9 digits round-trip them
            ok = np.array_equal(x.to_numpy().astype(np.float32), y.to_numpy().astype(np.float32),
                                equal_nan=True) and bool((y.to_numpy().astype(np.float32)
                                                          == y.to_numpy())[y.notna()].all())
        else:
            ok = x.astype(object).where(x.notna(), None).tolist() == \
                y.astype(object).where(y.notna(), None).tolist()
        check(ok, "npy stream column %s differs from stream.csv's" % col)
        check(str(x.dtype) == str(y.dtype), "npy stream column %s: dtype %s, stream.csv's %s"
              % (col, y.dtype, x.dtype))
    some = [str(a.tensor.iloc[0]), str(a.tensor.iloc[-1])]
    part = n.stream_table(tensors=some)
    ref = a[a.tensor.isin(some)].reset_index(drop=True)
    check(len(part) == len(ref) > 0
          and np.array_equal(part.scale.to_numpy(np.float32), ref.scale.to_numpy(np.float32))
          and part.tensor.astype(str).tolist() == ref.tensor.astype(str).tolist(),
          "stream_table(tensors=%s): %d rows, stream.csv's %d" % (some, len(part), len(ref)))
    check(len(r.stream_table(tensors=some)) == len(ref), "stream_table on a CSV stream")
    # record r, tensor t, configuration c by hand: the first row of stream.csv of tensor `some[1]`
    ix = n.stream_index
    t = [x["name"] for x in ix["tensors"]].index(some[1])
    row = ref[ref.tensor == some[1]].iloc[0]
    c = next(i for i, x in enumerate(ix["configs"])
             if x["recipe"] == row.recipe and x["history_len"] == row.history_len
             and x["margin"] == row.margin and x["amax_compute"] == row.amax_compute)
    k = int(np.nonzero((rec["step"] == row.step) & (rec["micro"] == row.micro))[0][0])
    check(rec["scale"][k, t, c] == np.float32(row.scale)
          and rec["amax"][k, t] == np.float32(row.amax),
          "stream_records[%d] tensor %d config %d: scale %r amax %r, stream.csv's %r %r"
          % (k, t, c, rec["scale"][k, t, c], rec["amax"][k, t], row.scale, row.amax))

    # the reduced copy: gzipped CSVs, steps.csv and gemm.csv left out
    red = os.path.join(tmp, "reduced")
    os.makedirs(red)
    shutil.copyfile(os.path.join(out_csv, "run.json"), os.path.join(red, "run.json"))
    for name in ("summary", "analysis", "stream"):
        with open(os.path.join(out_csv, name + ".csv"), "rb") as f, \
                gzip.open(os.path.join(red, name + ".csv.gz"), "wb") as g:
            g.write(f.read())
    z = fp8lab.load(red)
    check(z.tables() == ["summary", "stream", "analysis"], "reduced tables() %s" % z.tables())
    check(z.steps is None and z.gemm is None, "reduced: steps or gemm not None")
    for name in ("summary", "analysis", "stream"):
        check(getattr(z, name).equals(getattr(r, name)), "reduced %s.csv.gz differs" % name)

    # damaged files
    bad = os.path.join(tmp, "bad")
    shutil.copytree(out_csv, bad, ignore=shutil.ignore_patterns("plots", "synth_trace"))
    with open(os.path.join(bad, "steps.csv")) as f:
        lines = f.read().split("\n")
    head = lines[0].split(",")
    cells = lines[4].split(",")
    cells[head.index("n")] = "12x"
    lines[4] = ",".join(cells)
    with open(os.path.join(bad, "steps.csv"), "w") as f:
        f.write("\n".join(lines))
    raises(lambda: fp8lab.load(bad).steps, ["steps.csv", "line 5", "column n", "12x"],
           "a non-integer n")
    with open(os.path.join(bad, "summary.csv")) as f:
        text = f.read()
    with open(os.path.join(bad, "summary.csv"), "w") as f:
        f.write(text.replace("tensor,role", "tensor,rol", 1))
    raises(lambda: fp8lab.load(bad).summary, ["summary.csv", "line 1"], "a wrong header")
    with open(os.path.join(bad, "analysis.csv"), "a") as f:
        f.write("x,y\n")
    raises(lambda: fp8lab.load(bad).analysis, ["analysis.csv", "line %d" % (len(r.analysis) + 2)],
           "a short row")
    with open(os.path.join(bad, "bf16_plan.csv")) as f:
        lines = f.read().split("\n")
    cells = lines[2].split(",")  # step 1's row: its clipped steps are a number
    cells[lines[0].split(",").index("clipped_steps")] = "2.5"
    lines[2] = ",".join(cells)
    with open(os.path.join(bad, "bf16_plan.csv"), "w") as f:
        f.write("\n".join(lines))
    raises(lambda: fp8lab.load(bad).bf16_plan, ["bf16_plan.csv", "line 3", "column clipped_steps",
                                                "2.5"], "a non-integer clipped_steps")
    with open(os.path.join(bad, "run.json"), "w") as f:
        f.write('{"fp8lab":\n  "0.1",\n  oops}\n')
    raises(lambda: fp8lab.load(bad), ["run.json", "line 3"], "run.json not JSON")
    os.remove(os.path.join(bad, "run.json"))
    raises(lambda: fp8lab.load(bad), ["no run.json"], "no run.json")
    raises(lambda: fp8lab.load(os.path.join(tmp, "nowhere")), ["no such folder"], "no folder")
    badn = os.path.join(tmp, "badnpy")
    shutil.copytree(out_npy, badn, ignore=shutil.ignore_patterns("plots", "synth_trace"))
    size = os.path.getsize(os.path.join(badn, "stream.npy"))
    with open(os.path.join(badn, "stream.npy"), "r+b") as f:
        f.truncate(size - 7)
    raises(lambda: fp8lab.load(badn).stream, ["stream.npy", "record %d is cut short" % (len(rec) - 1)],
           "a truncated stream.npy")
    shutil.copyfile(os.path.join(out_npy, "stream.npy"), os.path.join(badn, "stream.npy"))
    with open(os.path.join(badn, "stream.json")) as f:
        ix = json.load(f)
    ix["records"] += 1
    with open(os.path.join(badn, "stream.json"), "w") as f:
        json.dump(ix, f)
    raises(lambda: fp8lab.load(badn).stream_records, ["stream.npy", "does not match"],
           "stream.json's records off by one")
    # fp8lab timeline's folder: timeline.csv, no run.json (the model's estimate without a GPU)
    p = subprocess.run([exe, "timeline", "--layers", "1", "--hidden", "128", "--ffn", "256",
                        "--tokens", "64", "--out", "tl"], cwd=tmp, capture_output=True, text=True)
    if check(p.returncode == 0, "fp8lab timeline: rc %d %s" % (p.returncode, p.stderr[-500:])):
        tl = fp8lab.load("tl")
        check(tl.info is None and tl.tables() == ["timeline"], "timeline folder: %s" % tl)
        compare_table(tl.timeline, os.path.join(tmp, "tl", "timeline.csv"), "timeline")
        print("ok   timeline: %d rows" % len(tl.timeline))
    try:
        fp8lab.load(out_csv).stepz
        check(False, "an unknown attribute: no AttributeError")
    except AttributeError as e:
        check("steps" in str(e), "AttributeError names the tables: %s" % e)
    print("%d failure(s)" % len(FAILS))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
