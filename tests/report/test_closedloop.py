#!/usr/bin/env python3
"""`fp8lab closedloop STUDY` (issue 44) on a study folder written by hand from known numbers
(no training run, no replay): study.ini, hp/seed_<s>/{loss,eval}.csv, open/{steps,stream}.csv,
closed/<label>/seed_<s>/{loss,eval}.csv and replay/{steps,stream}.csv. Three recipes (A and B
delayed, C current scaling: no stream), three seeds, 20 steps, a spike at steps 5..6. Every
value of the six closedloop_*.csv files is asserted against the hand computation written beside
it (docs/semantics.md, "Open loop against closed loop"); then the self-check's exit status, and
the error cases: a missing file, a malformed line, a label the open run lacks, a bad open_seed
(exit 2, one line naming the file).

Usage: test_closedloop.py FP8LAB_BIN. Standard library only.
"""
import csv
import math
import os
import shutil
import subprocess
import sys
import tempfile

FP8LAB = sys.argv[1]
STEPS = 20
SEEDS = [1, 2, 3]
LABELS = ["A", "B", "C"]
TENSORS = [("l.fc1.input", "input"), ("l.fc1.weight", "weight")]
SNAPS = [0, 10]
FAIL = []


def check(cond, what):
    if not cond:
        FAIL.append(what)
        print("FAIL:", what)


def near(a, b, what, tol=1e-12):
    """a (read from a file) is b: to tol, or exactly b as fp8lab's CSVs print it ("%.9g")."""
    ok = (a is None and b is None) or (a is not None and b is not None and
                                       (abs(a - b) <= tol or a == float("%.9g" % b)))
    check(ok, "%s: got %r, expected %r" % (what, a, b))


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


# ------------------------------------------------------------------ loss and eval by hand
# final loss = mean over steps 18, 19 (>= ceil(0.9 * 20)): written as f - 0.125, f + 0.125
HP_FINAL = {1: 2.0, 2: 2.25, 3: 2.5}        # mean 2.25; gaps -0.25, 0, 0.25: band [-0.25, 0.25]
CL_FINAL = {"A": [2.25, 2.5, 2.75],          # gaps 0, .25, .5: mean .25 (inside, at the edge)
            "B": [3.0, 3.0, 3.25],           # gaps .75, .75, 1: mean 2.5/3 (outside)
            "C": [2.0, 2.0, 2.0]}            # gaps -.25: inside
EVAL = {"hp": (2.5, None), "A": (2.5, 2.5), "B": (2.5, 3.5), "C": (2.4, 2.4)}


def loss_csv(final):
    rows = ["step,loss"] + ["%d,%r" % (s, 4.0 - 0.1 * s) for s in range(18)]
    rows += ["18,%r" % (final - 0.125), "19,%r" % (final + 0.125)]
    return "\n".join(rows) + "\n"


def eval_csv(hp, fp8):
    f = "" if fp8 is None else repr(fp8)
    return "step,loss_hp,loss_fp8\n0,5,%s\n10,3,%s\n19,%r,%s\n" % (f, f, hp, f)


# ------------------------------------------------------------------ steps.csv by hand
STEPS_HEADER = ("tensor,role,step,recipe,kind,format,history_len,margin,amax_compute,amax,scale,"
                "n,nonfinite,zeros,overflow,underflow,subnormal,mse,snr_db,nblocks,"
                "blocks_with_overflow,log2_scale_min,log2_scale_max,log2_scale_std,clipped,"
                "overshoot,cos_sim,warmup,underflow_expected,mse_expected")
# (clipped, underflow, nonfinite) per (label, tensor index, snapshot step); n = 1000
OPEN_COUNTS = {
    "A": {(0, 0): (0, 10, 0), (0, 10): (2, 10, 0), (1, 0): (0, 0, 0), (1, 10): (0, 20, 0)},
    "B": {(0, 0): (4, 0, 0), (0, 10): (4, 0, 0), (1, 0): (0, 0, 0), (1, 10): (0, 0, 0)},
    "C": {(0, 0): (0, 0, 0), (0, 10): (1, 0, 0), (1, 0): (0, 0, 0), (1, 10): (0, 100, 0)},
}
CLOSED_COUNTS = {
    "A": {(0, 0): (0, 0, 0), (0, 10): (4, 0, 0), (1, 0): (0, 0, 200), (1, 10): (0, 80, 0)},
    "B": {(0, 0): (8, 0, 0), (0, 10): (8, 0, 0), (1, 0): (0, 0, 0), (1, 10): (0, 0, 0)},
    "C": {(0, 0): (0, 0, 0), (0, 10): (0, 0, 0), (1, 0): (0, 0, 0), (1, 10): (0, 40, 0)},
}


def steps_row(label, t, step, counts):
    clipped, underflow, nonfinite = counts
    name, role = TENSORS[t]
    delayed = label != "C"
    cfg = "delayed,e4m3,4,0,max" if delayed else "current,e4m3,,,"
    return ("%s,%s,%d,%s,%s,1,1,1000,%d,0,%d,%d,0,0.001,30,,,,,,%d,%r,0.99,0,,"
            % (name, role, step, label, cfg, nonfinite, clipped, underflow, clipped,
               math.log2(1 / 448)))


def steps_csv(labels, counts, drop=()):
    rows = [STEPS_HEADER]
    for label in labels:
        for (t, step), c in sorted(counts[label].items()):
            if (t, step) not in drop:
                rows.append(steps_row(label, t, step, c))
    return "\n".join(rows) + "\n"


# ------------------------------------------------------------------ stream.csv by hand
STREAM_HEADER = ("tensor,role,step,recipe,format,history_len,margin,amax_compute,snapshot,amax,"
                 "scale,overshoot,warmup,micro,te_scale")


def amax_open(label, t, step):
    if label == "A":
        return {5: 1000.0, 8: 500.0}.get(step, 100.0) if t == 0 else 1.0
    return (1000.0 if step == 15 else 100.0) if t == 0 else (0.0 if step == 3 else 1.0)


def amax_closed(label, t, step):
    if label == "A":
        return {5: 1000.0, 12: 600.0}.get(step, 100.0) if t == 0 else (449.0 if step == 2 else 1.0)
    return (1000.0 if step in (15, 16) else 100.0) if t == 0 else 1.0


def stream_csv(labels, amax, te=None, te_bad=None):
    rows = [STREAM_HEADER]
    for step in range(STEPS):
        for t, (name, role) in enumerate(TENSORS):
            for label in labels:
                a = amax(label, t, step)
                ov = math.log2(a / 448) if a > 0 else -math.inf
                te_s = "" if te is None else ("0.5" if te_bad == (label, t, step) else "1")
                rows.append("%s,%s,%d,%s,e4m3,4,0,max,%d,%r,1,%s,0,0,%s" % (
                    name, role, step, label, step in SNAPS, a,
                    "-inf" if ov == -math.inf else repr(ov), te_s))
    return "\n".join(rows) + "\n"


def make_study(root, bad_te=True):
    write(os.path.join(root, "study.ini"),
          "[study]\nexperiment = recipes.ini   ; not read by fp8lab closedloop\n"
          "labels = A, B, C\nseeds = 1, 2, 3\nopen_seed = 1\nsteps = 20\nspike = 5, 6\n"
          "eval_every = 10\n")
    for s in SEEDS:
        d = os.path.join(root, "hp", "seed_%d" % s)
        write(os.path.join(d, "loss.csv"), loss_csv(HP_FINAL[s]))
        write(os.path.join(d, "eval.csv"), eval_csv(*EVAL["hp"]))
    write(os.path.join(root, "open", "steps.csv"), steps_csv(LABELS, OPEN_COUNTS))
    write(os.path.join(root, "open", "stream.csv"), stream_csv(["A", "B"], amax_open))
    for label in LABELS:
        for k, s in enumerate(SEEDS):
            d = os.path.join(root, "closed", label, "seed_%d" % s)
            write(os.path.join(d, "loss.csv"), loss_csv(CL_FINAL[label][k]))
            write(os.path.join(d, "eval.csv"), eval_csv(*EVAL[label]))
            drop = {(1, 10)} if s == 2 else set()  # seed 2's replay lacks weight at step 10
            write(os.path.join(d, "replay", "steps.csv"),
                  steps_csv([label], CLOSED_COUNTS, drop))
            if label != "C":  # current scaling: no stream
                bad = ("B", 0, 7) if (bad_te and label == "B" and s == 2) else None
                write(os.path.join(d, "replay", "stream.csv"),
                      stream_csv([label], amax_closed, te=True, te_bad=bad))


def read(out, name):
    with open(os.path.join(out, name)) as f:
        return list(csv.DictReader(f))


def num(v):
    return None if v == "" else float(v)


def run(study, *extra):
    return subprocess.run([FP8LAB, "closedloop", study] + list(extra), capture_output=True,
                          text=True)


def check_tables(out):
    # closedloop_loss.csv: hp rows then each label's; gap against the hp mean 2.25
    loss = {(r["label"], int(r["seed"])): r for r in read(out, "closedloop_loss.csv")}
    check(len(loss) == 12, "closedloop_loss.csv: 12 rows")
    for s in SEEDS:
        near(num(loss[("hp", s)]["final_loss"]), HP_FINAL[s], "hp final_loss seed %d" % s)
        near(num(loss[("hp", s)]["gap"]), HP_FINAL[s] - 2.25, "hp gap seed %d" % s)
        check(loss[("hp", s)]["eval_loss_fp8"] == "", "hp eval_loss_fp8 empty")
        near(num(loss[("hp", s)]["eval_loss_hp"]), 2.5, "hp eval_loss_hp")
    for label in LABELS:
        for k, s in enumerate(SEEDS):
            r = loss[(label, s)]
            near(num(r["final_loss"]), CL_FINAL[label][k], "%s final_loss %d" % (label, s))
            near(num(r["gap"]), CL_FINAL[label][k] - 2.25, "%s gap %d" % (label, s))
            near(num(r["eval_loss_hp"]), EVAL[label][0], "%s eval hp" % label)
            near(num(r["eval_loss_fp8"]), EVAL[label][1], "%s eval fp8" % label)

    # closedloop_rates.csv: the sums of the matched rows, finite = n - nonfinite
    rates = {(r["label"], r["source"], int(r["seed"])): r for r in read(out, "closedloop_rates.csv")}
    want = {  # (clipped_rate, underflow_rate, overflow_step_share, rows, stream_rows)
        ("A", "open", 1): (2 / 4000, 40 / 4000, 2 / 40, 4, 40),
        ("A", "closed", 1): (4 / 3800, 80 / 3800, 3 / 40, 4, 40),
        ("A", "closed", 2): (4 / 2800, 0 / 2800, 3 / 40, 3, 40),  # weight@10 not in the replay
        ("A", "closed", 3): (4 / 3800, 80 / 3800, 3 / 40, 4, 40),
        ("B", "open", 1): (8 / 4000, 0.0, 1 / 39, 4, 39),          # weight@3: amax 0, left out
        ("B", "closed", 1): (16 / 4000, 0.0, 2 / 40, 4, 40),
        ("B", "closed", 2): (16 / 3000, 0.0, 2 / 40, 3, 40),
        ("B", "closed", 3): (16 / 4000, 0.0, 2 / 40, 4, 40),
        ("C", "open", 1): (1 / 4000, 100 / 4000, None, 4, 0),      # no stream: share empty
        ("C", "closed", 1): (0.0, 40 / 4000, None, 4, 0),
        ("C", "closed", 2): (0.0, 0.0, None, 3, 0),
        ("C", "closed", 3): (0.0, 40 / 4000, None, 4, 0),
    }
    check(len(rates) == len(want), "closedloop_rates.csv: %d rows" % len(want))
    for key, (c, u, sh, rows, srows) in want.items():
        r = rates.get(key)
        if r is None:
            check(False, "rates row %s missing" % (key,))
            continue
        near(num(r["clipped_rate"]), c, "clipped_rate %s" % (key,))
        near(num(r["underflow_rate"]), u, "underflow_rate %s" % (key,))
        near(num(r["overflow_step_share"]), sh, "overflow_step_share %s" % (key,))
        check(int(r["rows"]) == rows, "rows %s" % (key,))
        check(int(r["stream_rows"]) == srows, "stream_rows %s" % (key,))

    # closedloop_spearman.csv: clipped ranks agree (rho 1); underflow ranks A2 B1 C3 against
    # A3 B1 C2: sum d^2 = 2, rho = 1 - 6*2/(3*8) = 0.5; the share has 2 labels only (C none)
    sp = {r["rate"]: r for r in read(out, "closedloop_spearman.csv")}
    near(num(sp["clipped_rate"]["rho"]), 1.0, "spearman clipped")
    near(num(sp["underflow_rate"]["rho"]), 0.5, "spearman underflow")
    check(sp["overflow_step_share"]["rho"] == "" and sp["overflow_step_share"]["labels"] == "2",
          "spearman share: 2 labels, no rho")

    # closedloop_drift.csv: two tensors a step, median = their mean, p90 = lo + 0.9 (hi - lo)
    drift = {(r["label"], int(r["step"])): r for r in read(out, "closedloop_drift.csv")}
    check(len(drift) == 40, "closedloop_drift.csv: 40 rows, got %d" % len(drift))
    hand = {("A", 2): (2, 224.0, 403.2), ("A", 8): (2, 0.4, 0.72), ("A", 12): (2, 2.5, 4.5),
            ("A", 0): (2, 0.0, 0.0), ("B", 16): (2, 4.5, 8.1), ("B", 3): (1, 0.0, 0.0)}
    for key, (n, med, p90) in hand.items():
        r = drift[key]
        check(int(r["tensors"]) == n, "drift tensors %s" % (key,))
        near(num(r["median_drift"]), med, "median drift %s" % (key,), 1e-9)
        near(num(r["p90_drift"]), p90, "p90 drift %s" % (key,), 1e-9)

    # closedloop_events.csv: A open events input@5, input@8; closed input@5, input@12,
    # weight@2; B open input@15, closed input@15, input@16
    ev = {(r["label"], r["period"]): r for r in read(out, "closedloop_events.csv")}
    want = {("A", "before"): (0, 1, 0, None, 0.0), ("A", "during"): (1, 1, 1, 1.0, 1.0),
            ("A", "after"): (1, 1, 0, 0.0, 0.0), ("A", "all"): (2, 3, 1, 0.5, 1 / 3),
            ("B", "before"): (0, 0, 0, None, None), ("B", "during"): (0, 0, 0, None, None),
            ("B", "after"): (1, 2, 1, 1.0, 0.5), ("B", "all"): (1, 2, 1, 1.0, 0.5),
            ("C", "all"): (0, 0, 0, None, None)}
    for key, (o, c, b, p, rc) in want.items():
        r = ev.get(key)
        if r is None:
            check(False, "events row %s missing" % (key,))
            continue
        check((int(r["open_events"]), int(r["closed_events"]), int(r["both"])) == (o, c, b),
              "events counts %s" % (key,))
        near(num(r["precision"]), p, "precision %s" % (key,))
        near(num(r["recall"]), rc, "recall %s" % (key,))

    # closedloop_selfcheck.csv: 40 rows with a te_scale per delayed run, B seed 2 one differs
    sc = {(r["label"], int(r["seed"])): r for r in read(out, "closedloop_selfcheck.csv")}
    for label in LABELS:
        for s in SEEDS:
            r = sc[(label, s)]
            want_rows = 0 if label == "C" else 40
            check(int(r["te_rows"]) == want_rows, "te_rows %s %d" % (label, s))
            bad = 1 if (label, s) == ("B", 2) else 0
            check(int(r["differ"]) == bad, "differ %s %d" % (label, s))


def main():
    tmp = tempfile.mkdtemp(prefix="fp8lab_closedloop_")
    try:
        study = os.path.join(tmp, "study")
        make_study(study)
        p = run(study)
        check(p.returncode == 1, "self-check failure: exit 1, got %d (%s)" % (p.returncode, p.stderr))
        check("self-check failed" in p.stderr and "B seed 2" in p.stderr and "step 7" in p.stderr,
              "self-check message: %r" % p.stderr)
        out = os.path.join(study, "report")
        check_tables(out)
        md = open(os.path.join(out, "closedloop.md")).read()
        for text in ("SELF-CHECK FAILED", "39 of 40 rows", "40 of 40 rows", "**outside**",
                     "from step 2 on, the median amax drift exceeds 10%",
                     "from step 16 on", "fewer than 3: no rank correlation",
                     "plots/closedloop_loss.png", "plots/closedloop_drift.png",
                     "evaluating in high precision misjudges this recipe"):
            check(text in md, "closedloop.md holds %r" % text)
        for f in ("closedloop.ipynb", "plots/closedloop_loss.png", "plots/closedloop_drift.png"):
            check(os.path.isfile(os.path.join(out, f)), "%s written" % f)

        # the self-check passing: exit 0, into --out
        good = os.path.join(tmp, "good")
        make_study(good, bad_te=False)
        p = run(good, "--out", os.path.join(tmp, "good_out"))
        check(p.returncode == 0, "clean study: exit 0, got %d (%s)" % (p.returncode, p.stderr))
        check(os.path.isfile(os.path.join(tmp, "good_out", "closedloop_rates.csv")), "--out used")

        # errors: exit 2, one line naming the file
        def expect_error(mutate, needle, what):
            d = os.path.join(tmp, "bad")
            shutil.rmtree(d, ignore_errors=True)
            make_study(d, bad_te=False)
            mutate(d)
            p = run(d)
            lines = p.stderr.strip().split("\n")
            check(p.returncode == 2 and len(lines) == 1 and needle in p.stderr,
                  "%s: exit %d, stderr %r (expected 2 and %r)" % (what, p.returncode, p.stderr,
                                                                   needle))

        expect_error(lambda d: os.remove(os.path.join(d, "closed", "B", "seed_2", "loss.csv")),
                     "closed/B/seed_2/loss.csv: cannot open", "missing loss.csv")
        expect_error(lambda d: os.remove(os.path.join(d, "open", "steps.csv")),
                     "open/steps.csv", "missing open steps.csv")
        expect_error(lambda d: write(os.path.join(d, "hp", "seed_3", "loss.csv"),
                                     "step,loss\n0,1\n1,abc\n"),
                     "hp/seed_3/loss.csv:3: column loss", "malformed loss.csv")
        expect_error(lambda d: write(os.path.join(d, "study.ini"),
                                     "[study]\nlabels = A\nseeds = 1\nopen_seed = 9\nsteps = 20\n"),
                     "study.ini: open_seed 9", "bad open_seed")
        expect_error(lambda d: write(os.path.join(d, "study.ini"),
                                     "[study]\nlabels = A\nseeds = 1\nopen_seed = 1\nsteps = 20\n"
                                     "colour = red\n"),
                     "study.ini:6: unknown key colour", "unknown key")

        def add_label_d(d):
            write(os.path.join(d, "study.ini"),
                  "[study]\nlabels = A, D\nseeds = 1\nopen_seed = 1\nsteps = 20\n")
            src = os.path.join(d, "closed", "A", "seed_1")
            shutil.copytree(src, os.path.join(d, "closed", "D", "seed_1"))

        expect_error(add_label_d, "open/steps.csv: no row of label D", "label not in open")
        expect_error(lambda d: os.remove(os.path.join(d, "study.ini")), "study.ini: cannot open",
                     "missing study.ini")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if FAIL:
        print("%d failures" % len(FAIL))
        return 1
    print("test_closedloop: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
