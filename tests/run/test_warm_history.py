#!/usr/bin/env python3
"""[trace] warm_history (issue 42, case 2): a step range replays with the history the run had.

The independent check: a replay of every step of a trace, restricted afterwards to the steps a
selection keeps, must give exactly the rows of the run with that selection and warm_history
(the default): stream.csv byte for byte on those rows, steps.csv likewise. Selections
`steps = F-L` (a range after the trace's first steps) and `steps = F-L:S` (a stride: the
skipped steps feed the history too), on
  - synth:llm (snapshots every 2 steps beside amax.csv: warm steps with a snapshot take its
    amax, read without a cast);
  - a gen_trace.py trace with two micro-batches at every amax.csv row (each warm step feeds
    two updates, from amax.csv's micro rows);
  - a 3-rank gen_trace.py trace with reduce_amax over all ranks.
On each, the run with a selection is also checked against the independent Python reference
(tools/reference/fp8ref.py), which implements warm_history on its own.
warm_history = false keeps the old (cold) replay: its rows are byte for byte those of a run over
a copy of the trace that holds only the selected steps (the earlier steps do not exist), and
differ from the warm run's at the range's first step. run.json records trace.warm_history,
steps_before and steps_skipped; report.md says which history the steps were replayed with; an
advice.ini of a cold run replays cold. A warm run killed mid-replay and resumed gives the same
bytes, and a resume with warm_history changed is refused.

Usage: test_warm_history.py FP8LAB_BIN   (exit 77 = skipped: numpy or ml_dtypes missing; exit 1
instead when FP8LAB_REQUIRE_PYDEPS=1 is set)
"""
import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
REF = os.path.join(ROOT, "tools", "reference")

try:
    import numpy  # noqa: F401
    import ml_dtypes  # noqa: F401
except ImportError as e:
    if os.environ.get("FP8LAB_REQUIRE_PYDEPS", "") not in ("", "0"):
        print("FAILED: %s, and FP8LAB_REQUIRE_PYDEPS is set" % e)
        sys.exit(1)
    print("skipped: %s (scripts/install-deps.sh installs numpy and ml_dtypes)" % e)
    sys.exit(77)

BIN = None
FAILS = []


def check(cond, msg):
    if not cond:
        FAILS.append(msg)
        print("FAIL: " + msg)
    return cond


def run(cmd, cwd, env=None):
    p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    return p.returncode, p.stdout


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def rows(path):
    """(header line, [data lines]) of a CSV, as bytes of text (the rows compared byte for byte)."""
    with open(path) as f:
        lines = f.read().splitlines()
    return lines[0], lines[1:]


def col(header, name):
    return header.split(",").index(name)


def selected(spec):
    m = re.fullmatch(r"(\d+)-(\d+)(?::(\d+))?", spec)
    a, b, s = int(m.group(1)), int(m.group(2)), int(m.group(3) or 1)
    return lambda t: a <= t <= b and (t - a) % s == 0


def restricted(path, keep_step, tensors=None):
    """The rows of a CSV whose step (and tensor, when given) a selection keeps. The rows are
    split on ',' only up to the step column: tensor names hold no comma in these traces."""
    h, ls = rows(path)
    si, ti = col(h, "step"), col(h, "tensor")
    out = []
    for ln in ls:
        f = ln.split(",")
        if keep_step(int(f[si])) and (tensors is None or f[ti] in tensors):
            out.append(ln)
    return h, out


def tensors_of(path):
    h, ls = rows(path)
    ti = col(h, "tensor")
    return {ln.split(",")[ti] for ln in ls}


def exp_text(path_line, steps=None, warm=None, extra_trace="", recipes=None):
    t = "[trace]\n%s\n" % path_line
    if steps:
        t += "steps = %s\n" % steps
    if warm is not None:
        t += "warm_history = %s\n" % ("true" if warm else "false")
    t += extra_trace
    t += recipes or ("[recipe.d]\nkind = delayed\nformat = hybrid\nhistory_len = 1, 16, 1024\n"
                     "[recipe.cur]\nkind = current\nformat = hybrid\n")
    t += "[analysis]\ngemm = false\n"
    return t


def fp8run(d, name, text, extra=()):
    ini = os.path.join(d, name + ".ini")
    write(ini, text)
    out = os.path.join(d, name)
    rc, o = run([BIN, "run", ini, "--out", out, "--quiet", "--threads", "2", "--force"] +
                list(extra), d)
    assert rc == 0, "%s: exit %d: %s" % (name, rc, o)
    return ini, out


def same_rows(full, part, keep, what):
    """The selected run's stream.csv and steps.csv rows are the full run's, restricted."""
    for f in ("stream.csv", "steps.csv"):
        hp, lp = rows(os.path.join(part, f))
        tens = tensors_of(os.path.join(part, f))
        hf, lf = restricted(os.path.join(full, f), keep, tens)
        if not check(hp == hf, "%s: %s header differs" % (what, f)):
            continue
        if lp != lf:
            diff = next((i for i, (a, b) in enumerate(zip(lf, lp)) if a != b), min(len(lf), len(lp)))
            check(False, "%s: %s: %d rows, the full replay restricted has %d; first difference "
                  "at data row %d:\n  full: %s\n  this: %s" % (
                      what, f, len(lp), len(lf), diff + 1,
                      lf[diff] if diff < len(lf) else "(none)",
                      lp[diff] if diff < len(lp) else "(none)"))
        else:
            print("  %s: %s: %d rows, byte for byte the full replay's" % (what, f, len(lp)))


def reference(ini, out, what, trace=None):
    cmd = [sys.executable, os.path.join(REF, "fp8ref.py"), "compare", ini,
           os.path.join(out, "steps.csv"), "--stream", os.path.join(out, "stream.csv"),
           "--summary", os.path.join(out, "summary.csv"), "--no-gemm",
           os.path.join(out, "gemm.csv")] + (["--trace", trace] if trace else [])
    rc, o = run(cmd, os.path.dirname(ini))
    if check(rc == 0, "%s: the reference disagrees: %s" % (what, o[-3000:])):
        print("  %s: the reference agrees (%s)" % (what, o.strip().splitlines()[-1][:120]))


def run_json_trace(out):
    with open(os.path.join(out, "run.json")) as f:
        return json.load(f)["trace"]


def first_step_differs(warm_out, cold_out, step, what):
    """The cold history gives other scales at the range's first step(s) than the warm one."""
    hw, lw = restricted(os.path.join(warm_out, "stream.csv"), lambda t: t == step)
    hc, lc = restricted(os.path.join(cold_out, "stream.csv"), lambda t: t == step)
    sc = col(hw, "scale")
    ndiff = sum(a.split(",")[sc] != b.split(",")[sc] for a, b in zip(lw, lc))
    check(len(lw) == len(lc) and ndiff > 0,
          "%s: the cold and the warm history give the same scales at step %d (%d rows)"
          % (what, step, len(lw)))
    wi = col(hw, "warmup")
    warm_flags = {a.split(",")[wi] for a in lw}
    check(warm_flags == {"0"}, "%s: warm run's warm-up flags at step %d: %s (expected 0: the "
          "history was fed before)" % (what, step, warm_flags))
    print("  %s: at step %d the cold history gives other scales in %d of %d stream rows"
          % (what, step, ndiff, len(lw)))


# ------------------------------------------------------------------ synth:llm

def case_synth(d):
    n = 30  # snapshots every 2 steps (fp8_synth_snapshot_interval)
    path = "path = synth:llm\nsynth_steps = %d\nsynth_seed = 5" % n
    _, full = fp8run(d, "full", exp_text(path), ["--no-report"])
    rng, strd = "10-%d" % (n - 1), "10-%d:5" % (n - 1)
    ini_r, out_r = fp8run(d, "range", exp_text(path, rng))
    same_rows(full, out_r, selected(rng), "synth:llm steps = %s" % rng)
    ini_s, out_s = fp8run(d, "stride", exp_text(path, strd), ["--no-report"])
    same_rows(full, out_s, selected(strd), "synth:llm steps = %s" % strd)
    reference(ini_r, out_r, "synth:llm steps = %s" % rng, os.path.join(out_r, "synth_trace"))
    reference(ini_s, out_s, "synth:llm steps = %s" % strd, os.path.join(out_s, "synth_trace"))
    tr = run_json_trace(out_r)
    check(tr.get("warm_history") is True and tr.get("steps_before") == 10 and
          tr.get("steps_skipped") == 0, "run.json trace: %s" % tr)
    tr = run_json_trace(out_s)
    # 10-29:5 keeps 10, 15, 20, 25: 10 steps before, and 4 of each 5 between 10 and 25
    check(tr.get("steps_before") == 10 and tr.get("steps_skipped") == 12,
          "run.json trace (stride): %s" % tr)
    check(run_json_trace(full).get("warm_history") is True and
          "steps_before" not in run_json_trace(full), "run.json without steps: %s"
          % run_json_trace(full))
    with open(os.path.join(out_r, "report.md")) as f:
        md = f.read()
    want = ("Steps 10-29 replayed with the amax history of the 10 earlier steps of the trace "
            "(warm_history = true): the delayed scales are the ones training had.")
    check(want in md, "report.md (warm) lacks: %s" % want)

    # warm_history = false: the old replay, the earlier steps absent; the same rows as a run
    # over a trace that holds only the selected steps
    ini_c, out_c = fp8run(d, "cold", exp_text(path, rng, warm=False))
    first_step_differs(out_r, out_c, 10, "synth:llm")
    cut = os.path.join(d, "cut_trace")
    src = os.path.join(full, "synth_trace")
    os.makedirs(cut)
    keep = selected(rng)
    for fn in os.listdir(src):
        m = re.fullmatch(r"step_(\d+)\.safetensors", fn)
        if m and keep(int(m.group(1))):
            shutil.copy(os.path.join(src, fn), cut)
    with open(os.path.join(src, "amax.csv")) as f, open(os.path.join(cut, "amax.csv"), "w") as g:
        for i, ln in enumerate(f):
            if i == 0 or keep(int(ln.split(",")[0])):
                g.write(ln)
    _, out_cut = fp8run(d, "cut", exp_text("path = cut_trace"), ["--no-report"])
    for fname in ("stream.csv", "steps.csv", "summary.csv", "histograms.csv"):
        with open(os.path.join(out_c, fname), "rb") as a, open(os.path.join(out_cut, fname), "rb") as b:
            check(a.read() == b.read(), "warm_history = false: %s differs from the run over the "
                  "trace without the earlier steps" % fname)
    print("  synth:llm warm_history = false: stream, steps, summary and histograms byte for byte "
          "those of the trace without steps 0-9")
    tr = run_json_trace(out_c)
    check(tr.get("warm_history") is False and tr.get("steps_before") == 10, "cold run.json: %s" % tr)
    with open(os.path.join(out_c, "report.md")) as f:
        md = f.read()
    want = ("Steps 10-29 replayed with each tensor's amax history empty at step 10, though the "
            "trace has 10 earlier steps (warm_history = false): the delayed scales of the first "
            "steps are not the ones training had.")
    check(want in md, "report.md (cold) lacks: %s" % want)
    if os.path.exists(os.path.join(out_c, "advice.ini")):
        with open(os.path.join(out_c, "advice.ini")) as f:
            check("\nwarm_history = false\n" in f.read(), "the cold run's advice.ini replays warm")
    return full


# ------------------------------------------------------------------ gen_trace: micro, ranks

def add_micro(trace):
    """Two micro-batches at every amax.csv row: micro 0 the amax, micro 1 1.5 times it."""
    with open(os.path.join(trace, "amax.csv"), newline="") as f:
        rs = [r for r in csv.reader(f) if r and not r[0].startswith(";")]
    with open(os.path.join(trace, "amax.csv"), "w") as f:
        f.write("step,tensor,amax,micro\n")
        for r in rs[1:]:
            a = float(r[2])
            f.write("%s,%s,%s,0\n%s,%s,%.9g,1\n" % (r[0], r[1], r[2], r[0], r[1], 1.5 * a))


def gen(d, seed, ranks=0):
    tr = os.path.join(d, "tr")
    args = [sys.executable, os.path.join(REF, "gen_trace.py"), tr, "--seed", str(seed)]
    if ranks:
        args += ["--ranks", str(ranks)]
    rc, o = run(args, d)
    assert rc == 0, o
    snaps = [int(x) for x in re.search(r"snapshots at steps ([0-9 ]+)", o).group(1).split()]
    return tr, snaps


def case_gen(d, what, seed, ranks=0, micro=False, reduce=False):
    os.makedirs(d)
    tr, snaps = gen(d, seed, ranks)
    if micro:
        add_micro(tr)
    extra = "reduce_amax = true\n" if reduce else ""
    recipes = ("[recipe.d]\nkind = delayed\nformat = hybrid\nhistory_len = 1, 4, 1024\n"
               "margin = 0\namax_compute = max, most_recent\n")
    _, full = fp8run(d, "full", exp_text("path = tr", extra_trace=extra, recipes=recipes),
                     ["--no-report"])
    first = snaps[1]  # a range that leaves out the first snapshot and amax.csv steps
    for spec in ("%d-%d" % (first, snaps[-1] + 5), "%d-%d:3" % (first, snaps[-1] + 5)):
        ini, out = fp8run(d, "sel" + spec.replace(":", "_"), exp_text("path = tr", spec,
                          extra_trace=extra, recipes=recipes), ["--no-report"])
        same_rows(full, out, selected(spec), "%s steps = %s" % (what, spec))
        reference(ini, out, "%s steps = %s" % (what, spec))


# ------------------------------------------------------------------ resume

def case_resume(d, full):
    """A warm run killed after a checkpoint and resumed: the same bytes; a resume with
    warm_history changed is refused (the experiment differs)."""
    path = "path = synth:llm\nsynth_steps = 30\nsynth_seed = 5"
    text = exp_text(path, "10-29:3")
    _, ref_out = fp8run(d, "res_ref", text, ["--no-report"])
    ini = os.path.join(d, "res.ini")
    write(ini, text)
    out = os.path.join(d, "res")
    env = dict(os.environ, FP8LAB_TEST_STEP_DELAY_MS="150")
    p = subprocess.Popen([BIN, "run", ini, "--out", out, "--quiet", "--no-report",
                          "--checkpoint-interval", "0"], cwd=d, env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    state = os.path.join(out, ".fp8lab-checkpoint", "state")
    t0 = time.time()
    while time.time() - t0 < 60 and p.poll() is None:
        # a checkpoint after a few steps: the warm steps before them are in its amax log
        if os.path.exists(state) and os.path.getsize(state) > 0 and time.time() - t0 > 1.0:
            break
        time.sleep(0.05)
    killed = p.poll() is None
    if killed:
        p.send_signal(signal.SIGKILL)
    p.wait()
    check(killed, "resume: the run ended before the kill")
    # warm_history changed: another experiment, refused
    bad = os.path.join(d, "res_cold.ini")
    write(bad, exp_text(path, "10-29:3", warm=False))
    shutil.copytree(out, out + "_copy")
    rc, o = run([BIN, "run", bad, "--out", out + "_copy", "--resume", "--quiet", "--no-report"], d)
    check(rc == 2 and "not the experiment of the interrupted run" in o,
          "resume with warm_history changed: exit %d: %s" % (rc, o))
    rc, o = run([BIN, "run", ini, "--out", out, "--resume", "--quiet", "--no-report"], d)
    if check(rc == 0, "resume: exit %d: %s" % (rc, o)):
        for f in ("stream.csv", "steps.csv", "summary.csv", "histograms.csv"):
            with open(os.path.join(ref_out, f), "rb") as a, open(os.path.join(out, f), "rb") as b:
                check(a.read() == b.read(), "resume: %s differs from the uninterrupted run's" % f)
        print("  resume of a warm stride run killed mid-replay: the same bytes; warm_history "
              "changed: refused")


def main():
    global BIN
    BIN = os.path.abspath(sys.argv[1])
    tmp = tempfile.mkdtemp(prefix="fp8lab_warm_")
    try:
        t = time.time()
        full = case_synth(os.path.join(tmp))
        case_gen(os.path.join(tmp, "micro"), "micro-batches", 3, micro=True)
        case_gen(os.path.join(tmp, "ranks"), "3 ranks reduce_amax", 4, ranks=3, reduce=True)
        case_resume(tmp, full)
        print("(%.1f s)" % (time.time() - t))
    finally:
        if not FAILS:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print("kept %s" % tmp)
    if FAILS:
        print("%d failure(s)" % len(FAILS))
        return 1
    print("warm_history: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
