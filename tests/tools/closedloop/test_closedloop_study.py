#!/usr/bin/env python3
"""The closed-loop study driver (tools/closedloop/study.py, issue 44), shortened: 30 steps, seeds
1 and 2, every label, a spike at steps 15-18, two runs at a time, into a temporary folder. Checks the study folder's
layout (notes of issue 44, tools/closedloop/README.md): every file of it, the CSV columns and
rows, recipes.ini's labels and no swept key; every closed run's replay reproduces its te_scale
on every row (replay/stream.csv read here: scale == te_scale as float32), the spike shows in the
high-precision loss, and, when this checkout's fp8lab has the closedloop subcommand (its usage
text names it), the report it writes. Usage: test_closedloop_study.py FP8LAB; the emulator's
library from FP8LAB_EMU_LIB (CTest sets it: FP8LAB_EMU_TEST_ENV), else the one beside FP8LAB
(<build>/src/emu/). Exit 77 without torch.
"""
import os
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
STUDY_PY = os.path.join(ROOT, "tools", "closedloop", "study.py")
SYSTEM_PYTHON = "/usr/bin/python3"

STEPS, SEEDS, LABELS, SPIKE, EVERY, EVAL_EVERY = 30, (1, 2), ("advice", "te_default", "bad"), \
    (15, 18), 10, 5


def torch_python():
    """An interpreter that imports torch (this one, else Debian's), or None."""
    for py in (sys.executable, SYSTEM_PYTHON):
        if os.path.exists(py) and subprocess.run(
                [py, "-c", "import torch"], stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL).returncode == 0:
            return py
    return None


def f32(s):
    return struct.unpack("<f", struct.pack("<f", float(s)))[0]


def read_csv(path):
    with open(path) as f:
        head = f.readline().rstrip("\n").split(",")
        rows = [dict(zip(head, line.rstrip("\n").split(","))) for line in f if line.strip()]
    return head, rows


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def exists(path):
    check(os.path.exists(path), "missing: %s" % path)


def check_run(d, closed):
    """hp/seed_<s>/ or closed/<label>/seed_<s>/."""
    exists(os.path.join(d, "trace", "amax.csv"))
    for s in range(0, STEPS, EVERY):
        exists(os.path.join(d, "trace", "step_%d.safetensors" % s))
    head, rows = read_csv(os.path.join(d, "loss.csv"))
    check(head == ["step", "loss"], "%s/loss.csv: header %s" % (d, head))
    check([int(r["step"]) for r in rows] == list(range(STEPS)), "%s/loss.csv: steps" % d)
    check(all(float(r["loss"]) > 0 for r in rows), "%s/loss.csv: a loss <= 0 or nan" % d)
    head, rows = read_csv(os.path.join(d, "eval.csv"))
    check(head == ["step", "loss_hp", "loss_fp8"], "%s/eval.csv: header %s" % (d, head))
    want = sorted(set(range(0, STEPS, EVAL_EVERY)) | {STEPS - 1})
    check([int(r["step"]) for r in rows] == want, "%s/eval.csv: steps %s" % (d, want))
    for r in rows:
        check(float(r["loss_hp"]) > 0, "%s/eval.csv: loss_hp" % d)
        check((r["loss_fp8"] != "") == closed, "%s/eval.csv: loss_fp8 %r" % (d, r["loss_fp8"]))
    head, _ = read_csv(os.path.join(d, "trace", "amax.csv"))
    check(("te_scale" in head) == closed, "%s/trace/amax.csv: header %s" % (d, head))


def main():
    if len(sys.argv) != 2:
        sys.stderr.write("usage: test_closedloop_study.py FP8LAB\n")
        return 2
    binary = os.path.abspath(sys.argv[1])
    lib = os.environ.get("FP8LAB_EMU_LIB") or os.path.join(os.path.dirname(binary), "src",
                                                           "emu", "libfp8lab_emu.so")
    check(os.path.exists(lib), "no emulator library %s (build target fp8lab_emu)" % lib)
    py = torch_python()
    if py is None:
        print("skipped: torch not importable (make tiny-gpt installs Debian's python3-torch)")
        return 77
    with open(os.path.join(ROOT, "src", "cli", "usage.c")) as f:
        has_closedloop = "closedloop STUDY" in f.read()
    tmp = tempfile.mkdtemp(prefix="fp8lab_closedloop_")
    try:
        study = os.path.join(tmp, "study")
        env = dict(os.environ, OMP_NUM_THREADS="1", FP8LAB_EMU_LIB=lib)
        cmd = [py, STUDY_PY, "--out", study, "--steps", str(STEPS),
               "--seeds", ",".join(map(str, SEEDS)), "--spike", "%d,%d" % SPIKE,
               "--every", str(EVERY), "--eval-every", str(EVAL_EVERY), "--jobs", "2",
               "--fp8lab", binary]
        res = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             universal_newlines=True)
        sys.stdout.write(res.stdout)
        check(res.returncode == 0, "study.py exit %d" % res.returncode)

        # bad arguments: exit 2, one line; an existing study without --force: exit 1
        for bad in (["--labels", "advice,nope"], ["--steps", "30", "--spike", "40,41"], ["--steps", "x"]):
            b = subprocess.run([py, STUDY_PY, "--out", os.path.join(tmp, "x")] + bad, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               universal_newlines=True)
            check(b.returncode == 2, "%s: exit %d, expected 2" % (bad, b.returncode))
        b = subprocess.run(cmd, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True)
        check(b.returncode == 1 and "--force" in b.stderr,
              "an existing study without --force: exit %d %s" % (b.returncode, b.stderr))

        # study.ini
        with open(os.path.join(study, "study.ini")) as f:
            ini = f.read()
        for line in ("[study]", "experiment = recipes.ini", "labels = advice, te_default, bad",
                     "seeds = 1, 2", "open_seed = 1", "steps = %d" % STEPS,
                     "spike = %d, %d" % SPIKE, "eval_every = %d" % EVAL_EVERY):
            check(line in ini.splitlines(), "study.ini lacks %r:\n%s" % (line, ini))
        check(not os.path.exists(os.path.join(study, ".closedloop-study")), "marker left")

        # recipes.ini: the trace, every label, one configuration per section, gemm = false
        with open(os.path.join(study, "recipes.ini")) as f:
            rec = [ln.strip() for ln in f if ln.strip() and not ln.lstrip().startswith(";")]
        check("path = hp/seed_1/trace" in rec and "gemm = false" in rec, "recipes.ini: %s" % rec)
        check("[recipe.te_default]" in rec and "[recipe.bad]" in rec, "recipes.ini: labels")
        check("label = advice" in rec, "recipes.ini: no section of label advice")
        for ln in rec:
            if "=" in ln and not ln.startswith("tensors"):
                check("," not in ln.split("=", 1)[1], "recipes.ini: a swept key: %s" % ln)

        # the open loop: every label
        exists(os.path.join(study, "open", "run.json"))
        _, rows = read_csv(os.path.join(study, "open", "stream.csv"))
        check({r["recipe"] for r in rows} == set(LABELS),
              "open/stream.csv recipes: %s" % sorted({r["recipe"] for r in rows}))

        # the runs
        for s in SEEDS:
            check_run(os.path.join(study, "hp", "seed_%d" % s), False)
        _, rows = read_csv(os.path.join(study, "hp", "seed_1", "loss.csv"))
        loss = [float(r["loss"]) for r in rows]
        check(max(loss[SPIKE[0] + 1:SPIKE[1] + 3]) > 1.3 * loss[SPIKE[0]],
              "no loss spike after steps %d-%d: %s" % (SPIKE + (loss,)))
        for lab in LABELS:
            for s in SEEDS:
                d = os.path.join(study, "closed", lab, "seed_%d" % s)
                check_run(d, True)
                head, rows = read_csv(os.path.join(d, "counts.csv"))
                check(head[:8] == ["step", "micro", "tensor", "kind", "format", "amax", "scale",
                                   "overshoot"] and head[-1] == "clipped",
                      "%s/counts.csv header %s" % (d, head))
                check({int(r["step"]) for r in rows} == set(range(STEPS)), "%s counts steps" % d)
                exists(os.path.join(d, "replay.ini"))
                _, rows = read_csv(os.path.join(d, "replay", "stream.csv"))
                with_te = [r for r in rows if r["te_scale"] != ""]
                bad = [r for r in with_te if f32(r["scale"]) != f32(r["te_scale"])]
                check(with_te, "%s: no stream.csv row has a te_scale" % d)
                check(not bad, "%s: %d of %d rows do not reproduce te_scale, e.g. %s" %
                      (d, len(bad), len(with_te), bad[0] if bad else ""))
                check("%s seed %d: %d of %d rows reproduce te_scale"
                      % (lab, s, len(with_te), len(with_te)) in res.stdout,
                      "the self-check line of %s seed %d" % (lab, s))
        _, rows = read_csv(os.path.join(study, "timing.csv"))
        check(sorted((r["what"], r["label"], int(r["seed"])) for r in rows) ==
              sorted([("hp", "", s) for s in SEEDS] +
                     [("closed", lab, s) for lab in LABELS for s in SEEDS]), "timing.csv rows")

        # the report: required once this checkout's fp8lab has `closedloop`
        report = os.path.join(study, "report", "closedloop.md")
        if has_closedloop:
            check(subprocess.run([binary, "closedloop", "--help"], stdout=subprocess.DEVNULL)
                  .returncode == 0, "fp8lab closedloop --help fails in this build")
            exists(report)
        else:
            print("note: this checkout's fp8lab has no closedloop subcommand: report not checked")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("ok: the closed-loop study's layout, replays and self-check")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except AssertionError as e:
        print("FAIL: %s" % e)
        sys.exit(1)
