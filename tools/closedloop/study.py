#!/usr/bin/env python3
"""study.py: the closed-loop study (issue 44): high-precision runs of the tiny GPT, the advice
fp8lab derives from one of them, and the same training re-run under each recipe with fp8lab's
emulator (fp8lab.closedloop), written as the study folder that `fp8lab closedloop STUDY`
reads (tools/closedloop/README.md has its layout and the timings).

    python3 tools/closedloop/study.py [--out DIR] [--steps N] [--seeds 1,2,3] [--labels L,..]
        [--every K] [--eval-every E] [--spike A,B|none] [--spike-factor F] [--open-seed S]
        [--jobs J] [--fp8lab PATH] [--force]

What it does, in order (progress lines on stdout):
1. hp/seed_<s>/ for every seed: experiments/tiny_gpt.py's model trained `steps` steps in FP32
   with fp8lab.capture's Recorder (trace/: amax.csv every step, a snapshot every `every`
   steps), the learning rate x spike_factor at the spike's steps (tiny_gpt.py's --spike),
   loss.csv every step, eval.csv (held-out loss, the Recorder paused) every eval_every steps
   and at the last step.
2. advise/: `fp8lab run advise.ini` (a sweep as experiments/tiny_gpt.ini's: delayed over
   history 1, 16, 128, 1024 x margin 0, 1 x max, most_recent, and current) on
   hp/seed_<open_seed>/trace; its advice.ini's label `advice` becomes recipes.ini's label advice.
3. recipes.ini: advice, te_default (TransformerEngine's DelayedScaling default), bad (a recipe
   that saturates on purpose); open/: `fp8lab run recipes.ini` (the open loop).
4. closed/<label>/seed_<s>/ for every label and seed: the same training under
   fp8lab.closedloop.Emulator(recipes.ini, label) with a Recorder inside it (trace/ with
   te_scale, counts.csv, loss.csv, eval.csv), replay.ini run into replay/ and the self-check:
   replay/stream.csv's scale equals te_scale on every row that has one.
5. timing.csv, study.ini (written last: a study folder with study.ini is complete), then
   `fp8lab closedloop STUDY` when the program has that subcommand.

Runs go to worker processes (this script with --worker), --jobs of them at a time. Exit 2 on
bad arguments, 1 on a runtime error (one line on stderr), also when a closed run's replay does
not reproduce its te_scale.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EXPERIMENTS = os.path.join(ROOT, "experiments")

DEFAULT_STEPS = 300
SPIKE_LEN = 4  # the default spike: steps // 2 and the 3 steps after it (150-153 at 300)
DEFAULT_EVERY = 25
DEFAULT_EVAL_EVERY = 25
DEFAULT_SEEDS = "1,2,3"
LABELS = ("advice", "te_default", "bad")
MARKER = ".closedloop-study"  # in a study folder being written (--force may remove it)

# the advice's sweep: experiments/tiny_gpt.ini's, history 1024 added (TE's default length)
SWEEP = """[recipe.delayed]
kind = delayed
format = hybrid
history_len = 1, 16, 128, 1024
margin = 0, 1
amax_compute = max, most_recent

[recipe.current]
kind = current
format = hybrid
"""

TE_DEFAULT = """; TransformerEngine's DelayedScaling() default: Format.HYBRID, amax_history_len=1024,
; margin=0, amax_compute_algo="max"
[recipe.te_default]
kind = delayed
format = hybrid
history_len = 1024
margin = 0
amax_compute = max
"""

BAD = """; bad on purpose: margin -3 scales every tensor 8x above the range its last amax needs
; (most_recent, history 1: the last amax alone), so every value above amax/8 saturates at the
; format's max (E4M3 448, E5M2 57344) every step: up to half of an operand clipped.
; It still trains (seed 1, 300 steps, spike at 150-153: held-out loss under its FP8 forward
; 4.15 -> 1.13) but clearly worse than high precision (1.00), and its weights are no good in
; high precision (4.7); margin -2 was only slightly worse (1.09), margin -1 not at all (1.00)
[recipe.bad]
kind = delayed
format = hybrid
history_len = 1
margin = -3
amax_compute = most_recent
"""


class StudyError(Exception):
    """A runtime error: one line, exit 1."""


def say(msg):
    print(msg, flush=True)


def write_atomic(path, text):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    try:
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def g(v):
    """A float as the layout writes it: %.9g; None -> empty."""
    return "" if v is None else "%.9g" % v


def eval_steps(steps, every):
    return sorted({s for s in range(0, steps, every)} | {steps - 1})


# ------------------------------------------------------------------ INI files (as fp8lab's)
def ini_sections(text):
    """[(name, [lines])] of an INI text in file order: each section's key lines as written
    (comment and blank lines dropped); lines before the first section under name None."""
    out = [(None, [])]
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in ";#":
            continue
        if line.startswith("[") and line.endswith("]"):
            out.append((line[1:-1].strip(), []))
        else:
            out[-1][1].append(line)
    return out


def section_keys(lines):
    keys = {}
    for line in lines:
        if "=" in line:
            k, v = line.split("=", 1)
            keys[k.strip()] = v.strip()
    return keys


def label_sections(text, label):
    """The [recipe.*] sections of `label` (their `label` key, else the name after recipe.),
    as INI text, in file order."""
    parts = []
    for name, lines in ini_sections(text):
        if name is None or not name.startswith("recipe."):
            continue
        if section_keys(lines).get("label", name[len("recipe."):]) != label:
            continue
        parts.append("[%s]\n%s\n" % (name, "\n".join(lines)))
    return "\n".join(parts)


def read_advice(run_dir):
    """(sections of label advice as INI text, where they came from) of the advice run's folder:
    advice.ini's label `advice` (the per-tensor form), or, when the report wrote no advice.ini
    (it does so only when some tensor needs a fix: the whole-model setting fits them all),
    recommendations.csv's `model` row as the one section [recipe.advice] (format hybrid: the
    model setting spans the E4M3 and E5M2 tensors, docs/semantics.md)."""
    path = os.path.join(run_dir, "advice.ini")
    if os.path.exists(path):
        with open(path) as f:
            text = label_sections(f.read(), "advice")
        if not text:
            raise StudyError("%s: no section of label advice" % path)
        return text, "advise/advice.ini's label advice"
    path = os.path.join(run_dir, "recommendations.csv")
    with open(path) as f:
        head = f.readline().rstrip("\n").split(",")
        rows = [dict(zip(head, line.rstrip("\n").split(","))) for line in f]
    model = [r for r in rows if r.get("scope") == "model"]
    if not model:
        raise StudyError("%s: no model row (no setting meets the budgets) and no advice.ini"
                         % path)
    m = model[0]
    lines = ["[recipe.advice]", "kind = %s" % m["kind"], "format = hybrid"]
    if m["kind"] == "delayed":
        lines += ["history_len = %s" % m["history_len"], "margin = %s" % m["margin"],
                  "amax_compute = %s" % m["amax_compute"]]
    elif m["kind"] != "current":
        raise StudyError("%s: a model row of kind %s" % (path, m["kind"]))
    return "\n".join(lines) + "\n", ("the whole-model setting (advise/recommendations.csv's "
                                      "model row; no advice.ini: it fits every tensor)")


# ------------------------------------------------------------------ the worker processes
def _import_training():
    """tiny_gpt (experiments/), fp8lab.capture and fp8lab.closedloop: the installed package
    or the one on PYTHONPATH, else the checkout's python/."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    sys.path.insert(0, EXPERIMENTS)
    import torch
    torch.set_num_threads(1)
    import tiny_gpt  # inserts the checkout's python/ when fp8lab is not importable
    import fp8lab.capture as capture
    return torch, tiny_gpt, capture


def worker(spec):
    """One run (spec: a dict; kind hp or closed); prints progress lines and, last, one
    `RESULT {json}` line for the driver."""
    torch, tg, capture = _import_training()
    import copy
    kind, seed, steps = spec["kind"], spec["seed"], spec["steps"]
    spike = tuple(spec["spike"]) if spec["spike"] else None
    run_dir = spec["dir"]
    trace = os.path.join(run_dir, "trace")
    os.makedirs(run_dir, exist_ok=True)
    name = "hp seed %d" % seed if kind == "hp" else "%s seed %d" % (spec["label"], seed)
    evals = set(eval_steps(steps, spec["eval_every"]))
    model, opt, data = tg.setup(seed)
    held = tg.heldout_batches(seed)
    emu = None
    if kind == "closed":
        from fp8lab.closedloop import Emulator
        emu = Emulator(model, spec["recipes"], spec["label"],
                       counts=os.path.join(run_dir, "counts.csv"), modules=tg.MODULES)
    losses, rows = [], []
    train_s = 0.0
    t_start = time.perf_counter()
    with (emu if emu is not None else _Null()):
        with capture.Recorder(model, trace, modules=tg.MODULES, every=spec["every"],
                              overwrite=True) as rec:
            for step in range(steps):
                t0 = time.perf_counter()
                loss = tg.train_step(model, opt, data, tg.spike_factor(step, spike,
                                                                       spec["spike_factor"]))
                if emu is not None:
                    emu.step(step)
                rec.step(step)
                train_s += time.perf_counter() - t0
                losses.append((step, loss))
                if step in evals:
                    with rec.paused():
                        if emu is None:
                            rows.append((step, tg.evaluate(model, held), None))
                        else:
                            # a copy's parameters are not the emulator's: high precision
                            lhp = tg.evaluate(copy.deepcopy(model), held)
                            with emu.frozen():
                                rows.append((step, lhp, tg.evaluate(model, held)))
                if (step + 1) % 50 == 0 or step == steps - 1:
                    say("%s: step %d/%d  loss %.4f  (%.1f steps/s)"
                        % (name, step + 1, steps, loss, (step + 1) / train_s))
    filled = None
    if emu is not None:
        filled = emu.write_te_scale(trace)
    write_atomic(os.path.join(run_dir, "loss.csv"),
                 "step,loss\n" + "".join("%d,%s\n" % (s, g(v)) for s, v in losses))
    write_atomic(os.path.join(run_dir, "eval.csv"),
                 "step,loss_hp,loss_fp8\n" +
                 "".join("%d,%s,%s\n" % (s, g(a), g(b)) for s, a, b in rows))
    print("RESULT " + json.dumps({"seconds": train_s, "total": time.perf_counter() - t_start,
                                  "te_scale": filled}), flush=True)


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


# ------------------------------------------------------------------ the driver
def run_workers(specs, jobs, python):
    """Runs the specs' workers, `jobs` at a time; relays their output; returns their results
    (in spec order). StudyError when one fails."""
    results = [None] * len(specs)
    pending = list(enumerate(specs))
    running = []
    failed = []

    def pump(i, proc):
        for line in proc.stdout:
            if line.startswith("RESULT "):
                results[i] = json.loads(line[len("RESULT "):])
            else:
                sys.stdout.write(line)
                sys.stdout.flush()

    while pending or running:
        while pending and len(running) < jobs and not failed:
            i, spec = pending.pop(0)
            proc = subprocess.Popen([python, os.path.abspath(__file__), "--worker",
                                     json.dumps(spec)], stdout=subprocess.PIPE,
                                    universal_newlines=True, bufsize=1)
            th = threading.Thread(target=pump, args=(i, proc), daemon=True)
            th.start()
            running.append((i, proc, th))
        if not running:
            break
        time.sleep(0.2)
        for item in list(running):
            i, proc, th = item
            if proc.poll() is None:
                continue
            th.join()
            running.remove(item)
            if proc.returncode != 0 or results[i] is None:
                failed.append("%s (exit %d)" % (describe(specs[i]), proc.returncode))
        if failed and not running:
            break
    if failed:
        raise StudyError("run failed: " + ", ".join(failed))
    return results


def describe(spec):
    return ("hp seed %d" % spec["seed"] if spec["kind"] == "hp"
            else "%s seed %d" % (spec["label"], spec["seed"]))


def fp8lab_run(binary, ini, out, cwd):
    r = subprocess.run([binary, "run", ini, "--out", out, "--force", "--quiet"], cwd=cwd,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    if r.returncode != 0:
        msg = r.stdout.strip().splitlines()
        raise StudyError("fp8lab run %s failed (exit %d): %s" %
                         (ini, r.returncode, msg[-1] if msg else ""))


def self_check(stream_csv):
    """(rows reproducing te_scale, rows with a te_scale) of a replay's stream.csv: the scale the
    replay computed equals the one the emulated run cast with, compared as float32."""
    import struct

    def f32(s):
        return struct.unpack("<f", struct.pack("<f", float(s)))[0]

    with open(stream_csv) as f:
        head = f.readline().rstrip("\n").split(",")
        if "te_scale" not in head or "scale" not in head:
            return 0, 0
        ci, ti = head.index("scale"), head.index("te_scale")
        ok = n = 0
        for line in f:
            v = line.rstrip("\n").split(",")
            if len(v) <= ti or v[ti] == "":
                continue
            n += 1
            ok += f32(v[ci]) == f32(v[ti])
    return ok, n


def find_fp8lab(arg):
    if arg:
        if not (os.path.isfile(arg) and os.access(arg, os.X_OK)):
            raise StudyError("--fp8lab %s: not an executable file" % arg)
        return os.path.abspath(arg)
    built = os.path.join(ROOT, "build", "fp8lab")
    if os.access(built, os.X_OK):
        return built
    try:
        sys.path.insert(0, os.path.join(ROOT, "python"))
        import fp8lab
        return fp8lab.executable()
    except (ImportError, FileNotFoundError):
        raise StudyError("no fp8lab program: build it (make build) or pass --fp8lab PATH")


def prepare_out(out, force):
    if os.path.exists(out):
        if not os.path.isdir(out):
            raise StudyError("%s: exists and is not a folder" % out)
        if os.listdir(out):
            ours = (os.path.exists(os.path.join(out, "study.ini"))
                    or os.path.exists(os.path.join(out, MARKER)))
            if not force:
                raise StudyError("%s: not empty (--force replaces an earlier study)" % out)
            if not ours:
                raise StudyError("%s: not empty and not a study folder: not removed" % out)
            shutil.rmtree(out)
    os.makedirs(out, exist_ok=True)
    write_atomic(os.path.join(out, MARKER), "a closed-loop study being written (study.py)\n")


def parse_list(text, what, conv=int):
    try:
        vals = [conv(v.strip()) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError("--%s: a comma-separated list, got %r" % (what, text))
    if not vals or len(set(vals)) != len(vals):
        raise ValueError("--%s: a non-empty list without repeats, got %r" % (what, text))
    return vals


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="study.py", description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "out", "closedloop"))
    ap.add_argument("--steps", type=int, default=DEFAULT_STEPS)
    ap.add_argument("--seeds", default=DEFAULT_SEEDS)
    ap.add_argument("--open-seed", type=int, default=None,
                    help="the hp seed whose trace the advice and the open loop use (first seed)")
    ap.add_argument("--labels", default=",".join(LABELS),
                    help="a subset of %s, in the order to show them" % ",".join(LABELS))
    ap.add_argument("--every", type=int, default=DEFAULT_EVERY, help="snapshot interval")
    ap.add_argument("--eval-every", type=int, default=DEFAULT_EVAL_EVERY)
    ap.add_argument("--spike", default=None,
                    help="A,B or none (default: the middle step and the 3 after it: 150,153 "
                    "at 300 steps)")
    ap.add_argument("--spike-factor", type=float, default=None,
                    help="learning-rate factor at the spike (tiny_gpt.SPIKE_FACTOR: 20)")
    ap.add_argument("--jobs", type=int, default=1,
                    help="runs in parallel (1: see tools/closedloop/README.md, \"Time\")")
    ap.add_argument("--fp8lab", default=None, help="the fp8lab program")
    ap.add_argument("--force", action="store_true", help="replace an earlier study folder")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker is not None:
        return args
    try:
        args.seeds = parse_list(args.seeds, "seeds")
        args.labels = parse_list(args.labels, "labels", str)
        bad = [lab for lab in args.labels if lab not in LABELS]
        if bad:
            raise ValueError("--labels: unknown %s (known: %s)" % (",".join(bad),
                                                                   ",".join(LABELS)))
        if args.steps < 2:
            raise ValueError("--steps must be >= 2")
        for k in ("every", "eval_every", "jobs"):
            if getattr(args, k) < 1:
                raise ValueError("--%s must be >= 1" % k.replace("_", "-"))
        if args.open_seed is None:
            args.open_seed = args.seeds[0]
        if args.open_seed not in args.seeds:
            raise ValueError("--open-seed %d is not one of --seeds" % args.open_seed)
        if args.spike is None:
            args.spike = "%d,%d" % (args.steps // 2,
                                    min(args.steps // 2 + SPIKE_LEN - 1, args.steps - 1))
        spike = _parse_spike(args.spike)
        if spike is not None and spike[1] >= args.steps:
            raise ValueError("--spike %d,%d: past the last step %d" % (spike + (args.steps - 1,)))
        args.spike = spike
        if args.spike_factor is not None and not args.spike_factor > 0:
            raise ValueError("--spike-factor must be > 0")
    except ValueError as e:
        ap.error(str(e))  # exit 2
    return args


def _parse_spike(text):
    """tiny_gpt.parse_spike without importing torch (the driver does not need it)."""
    if text is None or text.strip().lower() in ("", "none"):
        return None
    parts = text.split(",")
    if len(parts) != 2:
        raise ValueError("--spike takes A,B (first and last step) or none, got %r" % text)
    try:
        a, b = (int(v) for v in parts)
    except ValueError:
        raise ValueError("--spike takes A,B (integers), got %r" % text)
    if a < 0 or b < a:
        raise ValueError("--spike A,B needs 0 <= A <= B, got %r" % text)
    return a, b


def spike_factor_default():
    """tiny_gpt.SPIKE_FACTOR, read from its source (the driver does not import torch)."""
    import re
    with open(os.path.join(EXPERIMENTS, "tiny_gpt.py")) as f:
        m = re.search(r"^SPIKE_FACTOR = ([0-9.eE+-]+)", f.read(), re.M)
    if not m:
        raise StudyError("experiments/tiny_gpt.py: no SPIKE_FACTOR")
    return float(m.group(1))


def study(args):
    t_all = time.perf_counter()
    binary = find_fp8lab(args.fp8lab)
    out = os.path.abspath(args.out)
    python = sys.executable
    # the emulator's library of the same build as the program (fp8lab.emu looks there too
    # when the build is the checkout's build/; FP8LAB_EMU_LIB set by the caller wins)
    lib = os.path.join(os.path.dirname(binary), "src", "emu", "libfp8lab_emu.so")
    if not os.environ.get("FP8LAB_EMU_LIB") and os.path.exists(lib):
        os.environ["FP8LAB_EMU_LIB"] = lib
    factor = args.spike_factor if args.spike_factor is not None else spike_factor_default()
    # the emulator must be importable before hours of training start
    r = subprocess.run([python, "-c", "import sys; sys.path.insert(0, %r); import tiny_gpt; "
                        "import fp8lab.closedloop, fp8lab.emu; fp8lab.emu.library_path()"
                        % EXPERIMENTS],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    if r.returncode != 0:
        last = r.stdout.strip().splitlines()
        raise StudyError("fp8lab.closedloop is not usable with %s (%s): it needs torch and "
                         "libfp8lab_emu.so (build target fp8lab_emu)" % (python,
                         last[-1] if last else "exit %d" % r.returncode))
    prepare_out(out, args.force)
    common = {"steps": args.steps, "spike": args.spike, "spike_factor": factor,
              "every": args.every, "eval_every": args.eval_every}
    say("closed-loop study -> %s: %d steps, seeds %s, labels %s, spike %s (lr x %g), "
        "snapshots every %d, eval every %d, %d job(s)"
        % (out, args.steps, ",".join(map(str, args.seeds)), ",".join(args.labels),
           "%d-%d" % args.spike if args.spike else "none", factor, args.every,
           args.eval_every, args.jobs))
    timing = []

    # 1. high-precision runs
    specs = [dict(common, kind="hp", seed=s, dir=os.path.join(out, "hp", "seed_%d" % s))
             for s in args.seeds]
    t0 = time.perf_counter()
    for spec, res in zip(specs, run_workers(specs, args.jobs, python)):
        timing.append(("hp", "", spec["seed"], args.steps, res["seconds"]))
    say("hp runs done in %.0f s" % (time.perf_counter() - t0))

    # 2. the advice, 3. recipes.ini and the open loop
    trace_rel = "hp/seed_%d/trace" % args.open_seed
    parts = []
    if "advice" in args.labels:
        write_atomic(os.path.join(out, "advise.ini"),
                     "; advise.ini: the sweep the study's advice comes from (study.py)\n"
                     "[trace]\npath = %s\n\n%s\n[analysis]\ngemm = false\n" % (trace_rel, SWEEP))
        fp8lab_run(binary, "advise.ini", os.path.join(out, "advise"), out)
        advice, source = read_advice(os.path.join(out, "advise"))
        parts.append("; label advice, from fp8lab run advise.ini on %s:\n; %s\n%s"
                     % (trace_rel, source, advice))
        say("advice: %d section(s): %s" % (advice.count("[recipe."), source))
    if "te_default" in args.labels:
        parts.append(TE_DEFAULT)
    if "bad" in args.labels:
        parts.append(BAD)
    recipes = ("; recipes.ini: the closed-loop study's recipes (tools/closedloop/study.py), one "
               "label each:\n; %s\n[trace]\npath = %s\n\n%s\n[analysis]\ngemm = false\n"
               % (", ".join(args.labels), trace_rel, "\n".join(parts)))
    write_atomic(os.path.join(out, "recipes.ini"), recipes)
    fp8lab_run(binary, "recipes.ini", os.path.join(out, "open"), out)
    say("open loop: open/ (fp8lab run recipes.ini)")

    # 4. closed-loop runs
    specs = [dict(common, kind="closed", label=lab, seed=s,
                  recipes=os.path.join(out, "recipes.ini"),
                  dir=os.path.join(out, "closed", lab, "seed_%d" % s))
             for lab in args.labels for s in args.seeds]
    t0 = time.perf_counter()
    results = run_workers(specs, args.jobs, python)
    say("closed runs done in %.0f s" % (time.perf_counter() - t0))
    mismatched = []
    for spec, res in zip(specs, results):
        timing.append(("closed", spec["label"], spec["seed"], args.steps, res["seconds"]))
        d = spec["dir"]
        write_atomic(os.path.join(d, "replay.ini"),
                     "; replay.ini: the closed run's trace under its recipe (the self-check: "
                     "stream.csv's scale equals te_scale)\n[trace]\npath = trace\n\n%s\n"
                     "[analysis]\ngemm = false\n" % label_sections(recipes, spec["label"]))
        fp8lab_run(binary, "replay.ini", os.path.join(d, "replay"), d)
        ok, n = self_check(os.path.join(d, "replay", "stream.csv"))
        say("%s seed %d: %d of %d rows reproduce te_scale" % (spec["label"], spec["seed"], ok, n))
        if ok != n:
            mismatched.append("%s seed %d" % (spec["label"], spec["seed"]))

    # 5. timing.csv, study.ini, the report
    write_atomic(os.path.join(out, "timing.csv"), "what,label,seed,steps,seconds\n" +
                 "".join("%s,%s,%d,%d,%s\n" % (w, lab, s, n, g(sec))
                         for w, lab, s, n, sec in timing))
    write_atomic(os.path.join(out, "study.ini"),
                 "; study.ini: the closed-loop study (tools/closedloop/study.py); "
                 "fp8lab closedloop reads it\n[study]\nexperiment = recipes.ini\n"
                 "labels = %s\nseeds = %s\nopen_seed = %d\nsteps = %d\n%seval_every = %d\n"
                 % (", ".join(args.labels), ", ".join(map(str, args.seeds)), args.open_seed,
                    args.steps, "spike = %d, %d\n" % args.spike if args.spike else "",
                    args.eval_every))
    os.remove(os.path.join(out, MARKER))
    say("study written in %.0f s: %s" % (time.perf_counter() - t_all, out))
    if mismatched:
        raise StudyError("self-check: %s do not reproduce te_scale in their replay"
                         % ", ".join(mismatched))
    has = subprocess.run([binary, "closedloop", "--help"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL).returncode == 0
    if not has:
        say("fp8lab closedloop: not in this fp8lab (%s); the study folder is ready for it"
            % binary)
        return
    r = subprocess.run([binary, "closedloop", out])
    if r.returncode != 0:
        raise StudyError("fp8lab closedloop %s failed (exit %d)" % (out, r.returncode))


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        if args.worker is not None:
            worker(json.loads(args.worker))
        else:
            study(args)
    except StudyError as e:
        sys.stderr.write("study.py: error: %s\n" % e)
        return 1
    except (OSError, ValueError, RuntimeError) as e:
        sys.stderr.write("study.py: error: %s\n" % e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
