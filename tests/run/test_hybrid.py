#!/usr/bin/env python3
"""experiments/hybrid.ini (issue 45): a recipe label of an MXFP8 section (input, weight, output)
and an NVFP4 one (grad_output) on the quickstart's synth:llm trace (200 steps, seed 1), through
`fp8lab run` and the independent reference (tools/reference/fp8ref.py), with gemm_error =
sampled (the file as shipped) and exact:

  - gemm.csv equals the reference's row for row (every key; rel_error, its interval and the FP4
    ratio columns to 1e-3 relative; fp8ref.py compare), steps.csv and summary.csv too (but the
    NVFP4 rows, whose casts tests/run/test_fp4_run.py holds to fp4ref.py);
  - the label has rows for every layer of the trace (16), three GEMMs at each snapshot step
    where the layer is whole: fprop of kind mxfp8 (input and weight both of the MXFP8
    section), dgrad and wgrad of kind mixed (grad_output of the NVFP4 one), with the FP4 ratio
    on the mixed ones only;
  - the report's GEMM error section says that TransformerEngine has no GEMM for dgrad's and
    wgrad's NVFP4 x MXFP8 operands, in all 16 layers, and what TE does instead.

Usage: test_hybrid.py FP8LAB_BIN (exit 77: numpy or ml_dtypes missing; 1 instead with
FP8LAB_REQUIRE_PYDEPS=1). About 45 s on 2 cores (two replays and two reference replays).
"""
import csv
import os
import shutil
import sys
import tempfile

# test_replay's import skips (77) without numpy or ml_dtypes, as every reference test does
from test_replay import ROOT, run  # noqa: E402

REF = os.path.join(ROOT, "tools", "reference", "fp8ref.py")
INI = os.path.join(ROOT, "experiments", "hybrid.ini")
FAILS = []
LABEL = "mxfp8_nvfp4"


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL:", what)


def one_mode(binary, tmp, mode):
    """Runs hybrid.ini as shipped (mode exact: a copy with gemm_error = exact) and checks it;
    -> report.md's text (sampled) or None."""
    d = os.path.join(tmp, mode)
    os.makedirs(d)
    ini = INI
    if mode == "exact":
        ini = os.path.join(d, "hybrid.ini")
        with open(INI) as f:
            text = f.read()
        with open(ini, "w") as f:
            f.write(text.replace("gemm = true\n", "gemm = true\ngemm_error = exact\n"))
    out = os.path.join(d, "out")
    cmd = [binary, "run", ini, "--out", out, "--quiet", "--threads", "2"]
    rc, log = run(cmd + (["--no-report"] if mode == "exact" else []))
    check(rc == 0, "%s: fp8lab run: rc %d: %s" % (mode, rc, log[-600:]))
    if rc:
        return None
    rc, log = run([sys.executable, REF, "compare", ini, os.path.join(out, "steps.csv"),
                   "--trace", os.path.join(out, "synth_trace"),
                   "--gemm", os.path.join(out, "gemm.csv"),
                   "--summary", os.path.join(out, "summary.csv")])
    check(rc == 0 and "gemm.csv matches" in log, "%s: against the reference: %s" % (mode, log[-2000:]))
    print("%s: %s" % (mode, log.strip().splitlines()[-1] if log.strip() else ""))
    with open(os.path.join(out, "gemm.csv"), newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["recipe"] == LABEL]
    layers = {r["layer"] for r in rows}
    check(len(layers) == 16, "%s: %s has rows for %d layers, expected 16" % (mode, LABEL, len(layers)))
    per = {}
    for r in rows:
        per.setdefault((r["layer"], r["step"]), []).append(r)
    kinds = {"fprop": "mxfp8", "dgrad": "mixed", "wgrad": "mixed"}
    for (layer, step), rs in sorted(per.items()):
        got = sorted((r["gemm"], r["kind"], r["ratio_mode"] != "") for r in rs)
        want = sorted((g, k, k == "mixed") for g, k in kinds.items())
        check(got == want, "%s: %s step %s: rows (gemm, kind, ratio) %s, expected %s"
              % (mode, layer, step, got, want))
    # every layer's snapshot steps: those of the current-scaling rows (the same layer triplets)
    with open(os.path.join(out, "gemm.csv"), newline="") as f:
        cur = {(r["layer"], r["step"]) for r in csv.DictReader(f) if r["recipe"] == "current"}
    check(set(per) == cur, "%s: %s's (layer, step) pairs differ from current scaling's" % (mode, LABEL))
    print("%s: %s: %d rows, %d layers, %d (layer, step) pairs" % (mode, LABEL, len(rows),
                                                                  len(layers), len(per)))
    if mode == "exact":
        return None
    with open(os.path.join(out, "report.md")) as f:
        return f.read()


def check_report(md):
    """The GEMM error section names dgrad's and wgrad's NVFP4 x MXFP8 operands in all 16 layers
    as GEMMs TransformerEngine has none for, and what TE does instead; no other label."""
    at = md.find("## GEMM error")
    sec = md[at:md.find("\n## ", at + 1)]
    want = ("dgrad multiplies grad_output (nvfp4) by weight (mxfp8 e4m3) in 16 layers; "
            "wgrad multiplies grad_output (nvfp4) by input (mxfp8 e4m3) in 16 layers")
    check(at >= 0 and ("**%s (per tensor)** multiplies operands that TransformerEngine has no "
                       "GEMM for: %s." % (LABEL, want)) in sec,
          "report: the GEMM error section does not name the mixed GEMMs:\n%s" % sec[:3000])
    check("`mxfp8_fwd_nvfp4_bwd_factory`" in sec and "CanonicalizeGemmInput" in sec,
          "report: no statement of what TE does instead")
    check(sec.count("TransformerEngine has no GEMM for") == 1,
          "report: a label other than %s said to have GEMMs TE lacks" % LABEL)


def main():
    binary = os.path.abspath(sys.argv[1])
    tmp = tempfile.mkdtemp(prefix="fp8lab-hybrid-")
    try:
        md = one_mode(binary, tmp, "sampled")
        one_mode(binary, tmp, "exact")
        if md is not None:
            check_report(md)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("hybrid.ini: %s" % ("; ".join(FAILS) if FAILS else "every check passed"))
    return int(bool(FAILS))


if __name__ == "__main__":
    sys.exit(main())
