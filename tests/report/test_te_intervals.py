#!/usr/bin/env python3
"""Per-tensor logging frequencies of TransformerEngine's debug statistics (issue 41, case 3).

TE lets each tensor, and each statistic of it, have its own `freq` (LogTensorStats /
LogFp8TensorStats: a statistic is logged at iteration i when i % freq == 0). The logs are
written here in TE's exact format (tests/trace/test_te_logs.py's te_line), from a delayed-scaling
run simulated here at every iteration (TE's amax history gets an amax at every iteration, logged
or not: history 4, margin 0, max; the scale used at iteration i is RN32(fmt_max / max of the
amaxes of iterations i-4 .. i-1), 1 before any), and each statistic written only at its own
frequency. Checked against numbers computed here, not read back from fp8lab:

  - per tensor: activations and gradients logged every 2 iterations, weights every 5 (with
    their scale_inv_min/max and overflows% at the same frequencies), dynamic_range of the
    activations every 3, one output logged at a single iteration; two ranks. te_log.json's
    per-tensor interval, first/last iteration and statistics map exactly, intervals_differ
    true, the top-level interval the gcd over everything (1); run.json's
    trace.te_log.tensor_intervals; report.md's paragraph names every group with its count and
    roles, the history length per group, and never "logged every iteration"; the TE scale and
    overflows% tables compare nothing (no tensor logged at every iteration: TE's scale cannot
    be reproduced by any replayed history) and count the rows that carry TE's values, as
    counted here; the promise "The configuration TE ran should show no mismatch" is gone;
  - mixed: activations and gradients every iteration, weights every 3: the mismatches count
    over the comparable rows only (TE's configuration: 0 of them, another history > 0), the
    weight rows counted apart, the promise kept for the tensors logged every iteration;
  - uniform: every tensor every iteration: intervals_differ false, every interval 1, TE's
    configuration 0 mismatches and 0 overflow disagreements, the promise as before, no
    not-compared column;
  - older files: a te_log.json without the per-tensor keys and a run.json without
    tensor_intervals still read, every tensor having the top-level interval.

Usage: test_te_intervals.py FP8LAB_BIN. Standard library only.
"""
import csv
import json
import os
import random
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "trace"))
from test_te_logs import te_line, f32, check, FAILS, run_cases  # noqa: E402  (TE's line format,
#   float32 of a text; the one check() and run_cases() of the TE tests)

BIN = os.path.abspath(sys.argv[1])
L = 4           # TE's amax_history_len in the simulated run
ITERS = 30      # iterations 0 .. 29 trained
FMAX = {"activation": 448.0, "weight": 448.0, "gradient": 57344.0, "output": 448.0}
ROLE = {"activation": "input", "weight": "weight", "gradient": "grad_output", "output": "output"}




def run(args):
    p = subprocess.run([BIN] + args, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def gcd_interval(iters):
    """The common file's rule: gcd of the logged iterations, 0 for one iteration."""
    from math import gcd
    its = sorted(set(iters))
    if len(its) == 1:
        return 0
    g = 0
    for i in its:
        g = gcd(g, i)
    return g


def simulate(root, ranks, plan, seed):
    """TE's logs in root/nvdlfw_inspect_statistics_logs for ranks x layers; plan: {te tensor:
    {stat: freq}} (a freq of ("at", i) logs iteration i only). Returns the expected content:
    {(rank, trace tensor): {"amax": {it: printed}, "scale": {it: TE's scale}, "ovf": {it}}}."""
    rng = random.Random(seed)
    d = os.path.join(root, "nvdlfw_inspect_statistics_logs")
    os.makedirs(d)
    want = {}
    for r in range(ranks):
        lines = []
        for layer in ("net.fc1", "net.fc2"):
            for t, stats in plan.items():
                if t == "output" and layer != "net.fc2":
                    continue
                name = "%s.%s" % (layer, ROLE[t])
                w = want.setdefault((r, name), {"amax": {}, "scale": {}, "ovf": {}, "iters": {}})
                hist, scale = [], 1.0
                for it in range(ITERS):
                    top = 900.0 if t == "gradient" else 30.0
                    amax_text = "%.4f" % rng.uniform(1.0, top)
                    amax = f32(amax_text)
                    over = f32(amax * scale) > FMAX[t]
                    for st, fq in stats.items():
                        logged = it == fq[1] if isinstance(fq, tuple) else it % fq == 0
                        if not logged:
                            continue
                        w["iters"].setdefault(st, []).append(it)
                        v = {"cur_amax": amax, "scale_inv_min": 1.0 / scale,
                             "scale_inv_max": 1.0 / scale, "dynamic_range": 3.0,
                             "overflows%": 0.05 if over else 0.0,
                             "fp8_delayed_scaling_overflows%": 0.05 if over else 0.0}[st]
                        lines.append(te_line("%s_%s_%s" % (layer, t, st), it, v))
                        if st == "cur_amax":
                            w["amax"][it] = amax_text
                        if st == "scale_inv_min":
                            w["scale"][it] = scale
                        if st.endswith("overflows%"):
                            w["ovf"][it] = over
                    hist = (hist + [amax])[-L:]   # TE's history: every iteration, logged or not
                    scale = f32(f32(FMAX[t]) / max(hist))
        with open(os.path.join(d, "nvdlfw_inspect_globalrank-%d.log" % r), "w") as f:
            f.writelines(lines)
    return want


import_summary = {}


def import_and_run(tmp, label, ranks, plan, seed):
    logs = os.path.join(tmp, label + "_logs")
    want = simulate(logs, ranks, plan, seed)
    tr = os.path.join(tmp, label + "_trace")
    rc, so, se = run(["import-te", logs, tr])
    check(rc == 0, "%s: import-te exit %d: %s" % (label, rc, se.strip()))
    # the summary line: the range of the tensors' own intervals, where they differ
    import_summary[label] = so
    ini = os.path.join(tmp, label + ".ini")
    with open(ini, "w") as f:
        f.write("[trace]\npath = %s\n[recipe.delayed]\nkind = delayed\nformat = hybrid\n"
                "history_len = %d, 1\nmargin = 0\n" % (tr, L))
    out = os.path.join(tmp, label + "_out")
    rc, so, se = run(["run", ini, "--out", out, "--quiet", "--threads", "2"])
    check(rc == 0, "%s: run exit %d: %s" % (label, rc, se.strip()))
    meta = json.load(open(os.path.join(tr, "te_log.json"))) if os.path.exists(
        os.path.join(tr, "te_log.json")) else {}
    rj = json.load(open(os.path.join(out, "run.json"))) if os.path.exists(
        os.path.join(out, "run.json")) else {}
    md = open(os.path.join(out, "report.md")).read() if os.path.exists(
        os.path.join(out, "report.md")) else ""
    return want, meta, rj, md


def tables(md):
    """report.md's TE section: its two tables as {header tuple: {configuration: cells}}."""
    sec = md[md.find("## Held against TransformerEngine"):]
    nxt = sec.find("\n## ", 5)
    sec = sec if nxt < 0 else sec[:nxt]
    out, header = {}, None
    for ln in sec.splitlines():
        if not ln.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in ln.strip().strip("|").split("|")]
        if header is None:
            header = tuple(cells)
            out[header] = {}
        elif not set(ln) <= set("|-: "):
            out[header][cells[0]] = cells[1:]
    return sec, out


def table_with(tabs, first_col):
    for h, rows in tabs.items():
        if len(h) > 1 and h[1].startswith(first_col):
            return h, rows
    return None, {}


def expected_tensors(want, ranks):
    """te_log.json's per-tensor keys as this test computes them (over every rank)."""
    names = sorted({n for _, n in want})
    exp = {}
    for n in names:
        its = {}
        for r in range(ranks):
            for st, v in want[(r, n)]["iters"].items():
                its.setdefault(st, []).extend(v)
        a = its["cur_amax"]
        exp[n] = {"interval": gcd_interval(a), "first_iteration": min(a),
                  "last_iteration": max(a),
                  "statistics": {st: gcd_interval(v) for st, v in its.items()}}
    return exp


def te_rows(want, comparable):
    """Per configuration: stream rows carrying TE's scale / a logged overflows%, of the
    tensors logged every iteration (comparable) or of the others."""
    sc = sum(len(set(w["scale"]) & set(w["amax"])) for (r, n), w in want.items()
             if comparable(n))
    ov = sum(len(set(w["ovf"]) & set(w["amax"])) for (r, n), w in want.items()
             if comparable(n))
    return sc, ov


def case_per_tensor(tmp):
    """The issue's case 3: activations and gradients every 2, weights every 5."""
    plan = {"activation": {"cur_amax": 2, "scale_inv_min": 2, "scale_inv_max": 2,
                           "overflows%": 2, "dynamic_range": 3},
            "gradient": {"cur_amax": 2, "scale_inv_min": 2, "scale_inv_max": 2,
                         "fp8_delayed_scaling_overflows%": 2},
            "weight": {"cur_amax": 5, "scale_inv_min": 5, "scale_inv_max": 5, "overflows%": 5},
            "output": {"cur_amax": ("at", 10)}}
    want, meta, rj, md = import_and_run(tmp, "pt", 2, plan, 11)
    check("each tensor logged at its own interval: te_log.json lists them" in
          import_summary["pt"], "import-te's summary line (one tensor logged at one iteration): "
          "%r" % import_summary["pt"])
    exp = expected_tensors(want, 2)
    got = {t["tensor"]: {k: t.get(k) for k in ("interval", "first_iteration", "last_iteration",
                                                "statistics")}
           for t in meta.get("tensors", [])}
    check(got == exp, "te_log.json per-tensor keys:\n got %s\nwant %s" % (got, exp))
    check(exp["net.fc1.input"]["interval"] == 2 and exp["net.fc1.weight"]["interval"] == 5 and
          exp["net.fc2.output"]["interval"] == 0 and
          exp["net.fc1.input"]["statistics"]["dynamic_range"] == 3, "the plan as meant: %s" % exp)
    check(meta.get("intervals_differ") is True, "intervals_differ: %s" % meta.get("intervals_differ"))
    check(meta.get("interval") == 1, "top-level interval (gcd of all): %s" % meta.get("interval"))
    te = rj.get("trace", {}).get("te_log", {})
    check(te.get("tensor_intervals") == {n: e["interval"] for n, e in exp.items()},
          "run.json trace.te_log.tensor_intervals: %s" % te.get("tensor_intervals"))
    para = md[md.find("**The amaxes come from"):]
    para = para[:para.find("\n")]
    check("logged every iteration" not in md, "report.md says 'logged every iteration'")
    for text in ("every 2 iterations: 4 tensors (input, grad_output roles)",
                 "every 5 iterations: 2 tensors (weight role)",
                 "at one iteration: 1 tensor (output role)",
                 "L x 2 iterations for the tensors logged every 2",
                 "L x 5 iterations for the tensors logged every 5"):
        check(text in para, "the paragraph lacks %r: %s" % (text, para))
    sec, tabs = tables(md)
    check("should show no mismatch" not in sec and "should show no disagreement" not in sec,
          "the promise stays though no tensor is comparable")
    check("no replayed configuration can reproduce TE's scale" in sec, "the plain statement")
    nsc, nov = te_rows(want, lambda n: n.endswith(".output"))  # nothing logged every iteration
    check(nsc == 0 and nov == 0, "the test's own plan: nothing comparable")
    sc, ov = te_rows(want, lambda n: True)
    check(sc == 2 * 2 * (15 + 15 + 6) and ov == sc, "the rows counted here: %d %d" % (sc, ov))
    h, rows = table_with(tabs, "rows with TE's scale")
    check(h == ("configuration", "rows with TE's scale (not compared)"), "scale table: %s" % (h,))
    check(rows == {"delayed L=%d m=0 max" % L: [str(sc)], "delayed L=1 m=0 max": [str(sc)]},
          "scale table rows: %s, want %d each" % (rows, sc))
    h, rows = table_with(tabs, "rows at logged iterations")
    check(h == ("configuration", "rows at logged iterations (not compared)"),
          "overflow table: %s" % (h,))
    check(rows == {"delayed L=%d m=0 max" % L: [str(ov)], "delayed L=1 m=0 max": [str(ov)]},
          "overflow table rows: %s, want %d each" % (rows, ov))
    print("per tensor: intervals 2, 5, 0 recorded; %d TE-scale rows not compared" % sc)


def case_mixed(tmp):
    """Activations and gradients every iteration (comparable), weights every 3 (not)."""
    plan = {"activation": {"cur_amax": 1, "scale_inv_min": 1, "scale_inv_max": 1,
                           "overflows%": 1},
            "gradient": {"cur_amax": 1, "scale_inv_min": 1, "scale_inv_max": 1,
                         "fp8_delayed_scaling_overflows%": 1},
            "weight": {"cur_amax": 3, "scale_inv_min": 3, "scale_inv_max": 3, "overflows%": 3}}
    want, meta, rj, md = import_and_run(tmp, "mx", 1, plan, 12)
    check("each tensor logged at its own interval, 1 to 3 iterations" in import_summary["mx"],
          "mixed: import-te's summary line: %r" % import_summary["mx"])
    check(meta.get("intervals_differ") is True, "mixed: intervals_differ")
    sc, ov = te_rows(want, lambda n: not n.endswith(".weight"))
    nsc, nov = te_rows(want, lambda n: n.endswith(".weight"))
    check(sc == 2 * 2 * 30 and nsc == 2 * 10, "the rows counted here: %d %d" % (sc, nsc))
    sec, tabs = tables(md)
    check("The configuration TE ran should show no mismatch on the tensors logged every "
          "iteration" in sec, "mixed: the promise for the comparable tensors")
    check("4 of the log's 6 tensors" in sec, "mixed: the count of comparable tensors")
    check("(a history_len of L spans L iterations for the tensors logged every iteration, "
          "L x 3 iterations for the tensors logged every 3)" in md, "mixed: the history spans")
    h, rows = table_with(tabs, "rows with TE's scale")
    check(h is not None and h[-1] == "rows of tensors logged less often (not compared)",
          "mixed scale table header %s" % (h,))
    te_cfg = rows.get("delayed L=%d m=0 max" % L, [])
    check(te_cfg[:2] == [str(sc), "0"] and te_cfg[-1:] == [str(nsc)],
          "mixed: TE's configuration %s, want %d rows, 0 mismatches, %d apart" % (te_cfg, sc, nsc))
    other = rows.get("delayed L=1 m=0 max", [])
    check(other[:1] == [str(sc)] and other[-1:] == [str(nsc)] and int(other[1]) > 0,
          "mixed: another history: %s" % other)
    h, rows = table_with(tabs, "rows at logged iterations")
    te_cfg = rows.get("delayed L=%d m=0 max" % L, [])
    over = sum(v for (r, n), w in want.items() if not n.endswith(".weight")
               for v in w["ovf"].values())
    check(te_cfg[:4] == [str(ov), str(over), str(over), "0"] and te_cfg[-1:] == [str(nov)],
          "mixed overflows: TE's configuration %s, want %d rows, %d overflowed both, 0 "
          "disagree, %d apart" % (te_cfg, ov, over, nov))
    print("mixed: %d comparable rows, 0 mismatches for TE's configuration, %d apart" % (sc, nsc))


def case_uniform(tmp):
    """Every tensor every iteration: everything comparable, the promise kept."""
    plan = {"activation": {"cur_amax": 1, "scale_inv_min": 1, "scale_inv_max": 1,
                           "overflows%": 1},
            "weight": {"cur_amax": 1, "scale_inv_min": 1, "scale_inv_max": 1, "overflows%": 1},
            "gradient": {"cur_amax": 1, "scale_inv_min": 1, "scale_inv_max": 1,
                         "fp8_delayed_scaling_overflows%": 1}}
    want, meta, rj, md = import_and_run(tmp, "un", 1, plan, 13)
    check("own interval" not in import_summary["un"] and "logged every" not in
          import_summary["un"], "uniform: import-te's summary line: %r" % import_summary["un"])
    check(meta.get("intervals_differ") is False, "uniform: intervals_differ false")
    check({t["tensor"]: t.get("interval") for t in meta.get("tensors", [])} ==
          {n: 1 for _, n in want}, "uniform: every tensor's interval 1")
    check(rj.get("trace", {}).get("te_log", {}).get("tensor_intervals") ==
          {n: 1 for _, n in want}, "uniform: run.json tensor_intervals")
    check("logged every iteration: each step of the replay is a logged iteration" in md,
          "uniform: the paragraph as before")
    sec, tabs = tables(md)
    check("The configuration TE ran should show no mismatch (" in sec and
          "not compared" not in sec, "uniform: the promise, nothing apart")
    sc, ov = te_rows(want, lambda n: True)
    h, rows = table_with(tabs, "rows with TE's scale")
    check(h is not None and len(h) == 5, "uniform: the five-column table %s" % (h,))
    check(rows.get("delayed L=%d m=0 max" % L, [])[:2] == [str(sc), "0"],
          "uniform: TE's configuration %s, want %d rows and 0 mismatches" %
          (rows.get("delayed L=%d m=0 max" % L), sc))
    h, rows = table_with(tabs, "rows at logged iterations")
    check(rows.get("delayed L=%d m=0 max" % L, [])[:4][3:] == ["0"] and
          rows.get("delayed L=%d m=0 max" % L, [""])[0] == str(ov),
          "uniform overflows: %s" % rows.get("delayed L=%d m=0 max" % L))
    print("uniform: %d rows, 0 mismatches for TE's configuration" % sc)


def case_older_files(tmp):
    """A te_log.json of before the per-tensor keys (case_per_tensor's, with them removed) still
    loads: every tensor then has the top-level interval (1 here: the gcd over every tensor), so
    run.json has no tensor_intervals and every row counts as comparable, as before; a run.json
    without tensor_intervals (case_per_tensor's, with it removed) still reads in `fp8lab
    report`, every tensor having trace.te_log.interval."""
    tr = os.path.join(tmp, "pt_trace")
    path = os.path.join(tr, "te_log.json")
    meta = json.load(open(path))
    meta.pop("intervals_differ", None)
    for t in meta["tensors"]:
        for k in ("interval", "first_iteration", "last_iteration", "statistics"):
            t.pop(k, None)
    with open(path, "w") as f:
        json.dump(meta, f, indent=2)
    out = os.path.join(tmp, "old_out")
    rc, so, se = run(["run", os.path.join(tmp, "pt.ini"), "--out", out, "--quiet",
                      "--threads", "2"])
    check(rc == 0, "older te_log.json: run exit %d: %s" % (rc, se.strip()))
    te = json.load(open(os.path.join(out, "run.json")))["trace"]["te_log"] if rc == 0 else {}
    check(te.get("interval") == 1 and "tensor_intervals" not in te,
          "older te_log.json: run.json trace.te_log %s" % te)
    md = open(os.path.join(out, "report.md")).read() if rc == 0 else ""
    check("logged every iteration: each step of the replay" in md,
          "older te_log.json: the one interval in the paragraph")
    h, rows = table_with(tables(md)[1], "rows with TE's scale")
    check(h is not None and len(h) == 5 and
          rows.get("delayed L=%d m=0 max" % L, [""])[0] == str(2 * 2 * (15 + 15 + 6)),
          "older te_log.json: every row compared: %s %s" % (h, rows))
    # run.json without tensor_intervals: `fp8lab report` reads it; the top-level interval then
    # holds for every tensor (per-tensor intervals of 2 and 5 are lost: 1 from their gcd)
    out = os.path.join(tmp, "pt_out")
    rj = json.load(open(os.path.join(out, "run.json")))
    rj["trace"]["te_log"].pop("tensor_intervals", None)
    with open(os.path.join(out, "run.json"), "w") as f:
        json.dump(rj, f, indent=2)
    rc, so, se = run(["report", out, "--quiet", "--jobs", "1"])
    check(rc == 0, "older run.json: report exit %d: %s" % (rc, se.strip()))
    md = open(os.path.join(out, "report.md")).read()
    check("logged every iteration: each step of the replay" in md,
          "older run.json: the one interval in the paragraph")


def main():
    run_cases("fp8lab-te-intervals-",
              (case_per_tensor, case_mixed, case_uniform, case_older_files), "te intervals")


if __name__ == "__main__":
    main()
