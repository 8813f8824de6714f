#!/usr/bin/env python3
"""The report holds TE's overflows% of the import the run used, or refuses (issue 41, case 4).

`fp8lab report` reads te_overflows.csv from the trace folder at report time. A re-import after
the run used to change an existing run's report silently (1 disagreement became 61). Now
run.json's inputs[] lists the file with its sha256, and the report reads it only as listed:

  - baseline: a trace imported from TE-format logs (tests/trace/test_te_logs.py's te_line) with
    cur_amax and overflows% for three tensors over 30 iterations, TE's overflows% 0.0500 where
    the replay of TE's recipe (history 4, margin 0) overflows and 0.0000 elsewhere, one 0.0100
    planted where nothing overflowed; `fp8lab run` then `fp8lab report`: the overflows% table's
    rows for history 4 and history 1 equal the counts worked out here (delayed scaling's
    recurrence in float32, the replay's overflow rule RN32(amax x scale) > fp8_max);
  - te_overflows.csv changed since the run (one value rewritten in place, same size; the file
    replaced by another import's, renamed over it; the file deleted): `fp8lab report` is exit 2
    with one line naming the file and saying it changed (or is gone) since the run and to run
    again; every file of the run folder is byte-identical afterwards (nothing written);
  - the file put back as it was: the report passes again, with the baseline's numbers;
  - a run.json from before the hashes (no sha256, no TE files in inputs[]): today's behaviour,
    the file read as it is now (the changed numbers);
  - a run.json with hashes that does not list te_overflows.csv (the run's trace had none):
    a file that appeared since is not read (no overflows% table).

Usage: test_te_overflows_pinned.py FP8LAB_BIN. Standard library only.
"""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

BIN = os.path.abspath(sys.argv[1])
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "trace"))
from test_te_logs import check, FAILS, run_cases  # noqa: E402,F401  (one failure list)
import test_te_logs as tl  # noqa: E402  (TE's log format: te_line, f32)

HIST = (4, 1)          # the experiment's histories: 4 is TE's recipe in the log
FMAX = {"activation": 448.0, "weight": 448.0, "gradient": 57344.0}  # hybrid: E4M3, E4M3, E5M2
ROLE = {"activation": "input", "weight": "weight", "gradient": "grad_output"}




def run(args):
    p = subprocess.run([BIN] + args, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def scales(amaxes, L, fmax):
    """The scale delayed scaling uses at each iteration (margin 0, max): RN32(fmax / the max of
    the previous L amaxes), 1 before any."""
    out, hist, s = [], [], 1.0
    for a in amaxes:
        out.append(s)
        hist = (hist + [a])[-L:]
        s = tl.f32(tl.f32(fmax) / max(hist))
    return out


def make_trace(tmp):
    """TE logs, imported; returns (trace, {(tensor, it): pct}, {(tensor, it): amax as read})."""
    rng = random.Random(41)
    logs = os.path.join(tmp, "logs", "nvdlfw_inspect_statistics_logs")
    os.makedirs(logs)
    lines, pct, amax, planted = [], {}, {}, False
    for t in ("activation", "weight", "gradient"):
        vals = [tl.f32(rng.uniform(1.0, 30.0) if t != "gradient" else rng.uniform(1.0, 900.0))
                for _ in range(30)]
        printed = [tl.f32("%.4f" % v) for v in vals]    # what amax.csv and the replay hold
        sc = scales(printed, HIST[0], FMAX[t])
        name = "net.fc1." + ROLE[t]
        for it, v in enumerate(vals):
            over = tl.f32(printed[it] * sc[it]) > FMAX[t]
            p = 0.05 if over else 0.0
            if not over and not planted and t == "activation" and it > HIST[0]:
                p, planted = 0.01, True                   # TE saw one the replay did not
            stat = "fp8_delayed_scaling_overflows%" if t == "gradient" else "overflows%"
            lines.append(tl.te_line("net.fc1_%s_cur_amax" % t, it, v))
            lines.append(tl.te_line("net.fc1_%s_%s" % (t, stat), it, p))
            pct[(name, it)] = float("%.4f" % p)
            amax[(name, it)] = printed[it]
    with open(os.path.join(logs, "nvdlfw_inspect_globalrank-0.log"), "w") as f:
        f.writelines(lines)
    tr = os.path.join(tmp, "trace")
    rc, so, se = run(["import-te", os.path.join(tmp, "logs"), tr])
    check(rc == 0, "import-te: exit %d %r" % (rc, se))
    return tr, pct, amax


def expected(pct, amax):
    """The overflows% table's numbers per history: rows, TE overflowed, replay overflowed,
    disagree."""
    want = {}
    for L in HIST:
        n = te = rp = dis = 0
        for t in FMAX:
            name = "net.fc1." + ROLE[t]
            sc = scales([amax[(name, it)] for it in range(30)], L, FMAX[t])
            for it in range(30):
                a, b = pct[(name, it)] > 0, tl.f32(amax[(name, it)] * sc[it]) > FMAX[t]
                n, te, rp, dis = n + 1, te + a, rp + b, dis + (a != b)
        want["delayed L=%d m=0 max" % L] = [str(n), str(te), str(rp), str(dis)]
    return want


def overflow_table(out):
    """report.md's overflows% rows: {configuration: [rows, TE, replay, disagree]}, or None."""
    md = open(os.path.join(out, "report.md")).read()
    cut = md.find("TransformerEngine's `overflows%`")
    if cut < 0:
        return None
    return {ln.split("|")[1].strip(): [c.strip() for c in ln.split("|")[2:6]]
            for ln in md[cut:].splitlines() if ln.startswith("| delayed L=")}


def folder_bytes(d):
    got = {}
    for root, dirs, files in os.walk(d):
        for f in files:
            p = os.path.join(root, f)
            with open(p, "rb") as fh:
                got[os.path.relpath(p, d)] = fh.read()
    return got


def refused(out, path, word, label):
    """fp8lab report out: exit 2, one line naming path, `word` since the run; nothing written."""
    before = folder_bytes(out)
    rc, so, se = run(["report", out, "--quiet"])
    check(rc == 2 and se.count("\n") == 1 and path in se and
          ("%s since the run" % word) in se and "run the experiment again" in se,
          "%s: exit %d, stderr %r" % (label, rc, se))
    after = folder_bytes(out)
    check(after == before, "%s: the run folder changed: %s" % (label, sorted(
        k for k in set(before) | set(after) if before.get(k) != after.get(k))))
    print("%s: exit %d: %s" % (label, rc, se.strip()))


def main():
    tmp = tempfile.mkdtemp(prefix="fp8lab-te-pinned-")
    try:
        tr, pct, amax = make_trace(tmp)
        ovf = os.path.join(tr, "te_overflows.csv")
        original = open(ovf, "rb").read()
        want = expected(pct, amax)
        check(want["delayed L=4 m=0 max"][3] == "1", "the case plants one disagreement: %s" % want)
        ini = os.path.join(tmp, "te.ini")
        with open(ini, "w") as f:
            f.write("[trace]\npath = %s\n[recipe.delayed]\nkind = delayed\nformat = hybrid\n"
                    "history_len = 4, 1\nmargin = 0\n" % tr)
        out = os.path.join(tmp, "out")
        rc, so, se = run(["run", ini, "--out", out, "--quiet", "--threads", "1"])
        check(rc == 0, "run: exit %d %r" % (rc, se))
        rc, so, se = run(["report", out, "--quiet"])
        check(rc == 0, "baseline report: exit %d %r" % (rc, se))
        check(overflow_table(out) == want, "baseline overflows%% table %s, expected %s"
              % (overflow_table(out), want))
        print("baseline: %s" % want)

        # one value rewritten in place (same inode, same size): 0.0500 -> 0.0000 on one row
        changed = original.replace(b",0.0500\n", b",0.0000\n", 1)
        check(changed != original and len(changed) == len(original), "the edit changes a value")
        with open(ovf, "r+b") as f:
            f.write(changed)
        refused(out, ovf, "changed", "rewritten in place")
        # another import's file renamed over it (what a re-import's rename does)
        other = os.path.join(tr, ".te_overflows.csv.tmp")
        with open(other, "wb") as f:
            f.write(original.replace(b",0.0000\n", b",0.0500\n"))
        os.rename(other, ovf)
        refused(out, ovf, "changed", "replaced by another import's")
        os.remove(ovf)
        refused(out, ovf, "gone", "deleted")

        # put back as the run read it: the report passes, with the baseline's numbers
        with open(ovf, "wb") as f:
            f.write(original)
        rc, so, se = run(["report", out, "--quiet"])
        check(rc == 0 and overflow_table(out) == want,
              "restored: exit %d %r, table %s" % (rc, se, overflow_table(out)))

        # a run.json from before the hashes: the file read as it is now (today's behaviour)
        with open(ovf, "wb") as f:
            f.write(changed)
        rj = os.path.join(out, "run.json")
        doc = json.load(open(rj))
        hashed = json.loads(json.dumps(doc))
        old = json.loads(json.dumps(doc))
        old["inputs"] = [{k: v for k, v in e.items() if k != "sha256"} for e in old["inputs"]
                         if not e["path"].endswith(("/te_log.json", "/te_overflows.csv"))]
        with open(rj, "w") as f:
            json.dump(old, f, indent=2)
        rc, so, se = run(["report", out, "--quiet"])
        got = overflow_table(out)
        lw = want["delayed L=4 m=0 max"]
        check(rc == 0 and got and got["delayed L=4 m=0 max"][:2] == lw[:1] + [str(int(lw[1]) - 1)],
              "older run.json: exit %d %r, the changed file's table %s" % (rc, se, got))

        # hashes, but te_overflows.csv not among the inputs: a file that appeared is not read
        hashed["inputs"] = [e for e in hashed["inputs"]
                            if not e["path"].endswith("/te_overflows.csv")]
        with open(rj, "w") as f:
            json.dump(hashed, f, indent=2)
        rc, so, se = run(["report", out, "--quiet"])
        check(rc == 0 and overflow_table(out) is None,
              "not listed: exit %d %r, table %s" % (rc, se, overflow_table(out)))
    finally:
        if not FAILS:
            shutil.rmtree(tmp)
        else:
            print("kept", tmp)
    if FAILS:
        print("%d failures" % len(FAILS))
        sys.exit(1)
    print("te overflows pinned: all checks passed")


if __name__ == "__main__":
    main()
