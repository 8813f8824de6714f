#!/usr/bin/env python3
"""[analysis] tensor_core through `fp8lab run` and its report (issue 46).

  - against the independent reference (tools/reference/tensorcore.py, the published models
    written on integer significands): a layer with K = 96 (fprop: three MMAs), 40 (dgrad: 32 +
    8) and 24 (wgrad: one partial MMA), hybrid current scaling (fprop E4M3 x E4M3, dgrad and
    wgrad E5M2 x E4M3), exact mode: each GEMM's entries computed by chaining the reference's
    32-term inner products (fast: d = mma(block, c = d); promoted every 128: a partial sum
    from 0 per 128 terms added to an FP32 accumulator), times RN32(RN32(1/s_a) RN32(1/s_b))
    with the scales steps.csv reports; rel_error (TE's form: fprop fast, dgrad and wgrad
    promoted) and fprop's rel_error_alt_acc (the other form, promoted; empty for dgrad and
    wgrad) equal gemm.csv's to 1e-8 relative (its 9 significant digits), for
    h100 and b200; rel_error_exact_acc is the exact run's rel_error, text for text;
  - the sampled mode (delayed, current and block kinds): the h100 run's rel_error_exact_acc
    equals the exact run's rel_error row by row (the same sample), block rows stay exact
    (tensor_core and accumulation exact, no other form), per-tensor rows name h100 and fast
    (fprop) or promoted (dgrad, wgrad); gemm.csv has 19 columns with the model and 11
    without; run.json names the accumulation; the report's GEMM section names it and shows
    what accumulation costs (or says exact);
  - a bad value is one line naming the file and line, exit 2; a model with gemm = false is
    said to have nothing to act on (a warning naming the key's line).

Usage: test_tensor_core.py FP8LAB_BIN. Needs numpy and ml_dtypes.
"""
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
import pycommon  # noqa: E402
from pycommon import check, csv_rows as rows, save_npy as save  # noqa: E402

try:
    import ml_dtypes  # noqa: F401  (fp8ref needs it)
    import numpy as np
except ImportError:
    pycommon.require("numpy or ml_dtypes is not installed")

sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "reference"))
import fp8ref  # noqa: E402
import tensorcore as T  # noqa: E402

BIN = os.path.abspath(sys.argv[1])
F32 = np.float32


def run(args, cwd):
    return pycommon.run_cli(BIN, args, cwd)


def write_trace(d, rng, steps=(0, 1)):
    """one layer m.fc: input [24, 96], weight [40, 96], grad_output [24, 40]: Gaussian with a
    few large and tiny values (alignment and subnormals matter)."""
    for t in steps:
        s = os.path.join(d, "trace", "step_%d" % t)
        x = rng.standard_normal((24, 96)).astype(F32)
        x[:, 5] *= 40
        x[3, :7] *= 1e-3
        w = (rng.standard_normal((40, 96)) * 0.05).astype(F32)
        g = (rng.standard_normal((24, 40)) * 1e-4).astype(F32)
        g[:, 2] *= 30
        save(s, "m.fc.input", x)
        save(s, "m.fc.weight", w)
        save(s, "m.fc.grad_output", g)


def ini(path, recipes, analysis, out):
    with open(path, "w") as f:
        f.write("[trace]\npath = trace\n\n%s\n[analysis]\n%s\n[output]\ndir = %s\n"
                % (recipes, analysis, out))


def chain(a_codes, b_codes, fa, fb, gpu, promote):
    """every row pair's dot product as the GEMM level defines it, from the reference's
    inner products: a_codes [m, k], b_codes [n, k] -> float32 [m, n]."""
    m, k = a_codes.shape
    n = b_codes.shape[0]
    A = np.repeat(a_codes, n, axis=0)          # entry (i, j) at i * n + j
    B = np.tile(b_codes, (m, 1))
    run_len = promote if promote else k
    acc = np.zeros(m * n, F32)
    for r0 in range(0, k, run_len):
        part = np.zeros(m * n, np.uint32)
        for t in range(r0, min(r0 + run_len, k), 32):
            t1 = min(t + 32, r0 + run_len, k)
            part = T.inner_product(A[:, t:t1], B[:, t:t1], part, fa, gpu, fmt_b=fb)
        acc = (acc + part.view(F32)).astype(F32) if promote else part.view(F32)
    return acc.reshape(m, n)


def reference_errors(d, out, gpu):
    """{(gemm, step): (rel TE's form, rel other form)} from the trace and steps.csv's scales."""
    scale = {}
    for r in rows(os.path.join(d, out, "steps.csv")):
        scale[(r["tensor"], int(r["step"]))] = F32(float(r["scale"]))
    res = {}
    for step in (0, 1):
        s = os.path.join(d, "trace", "step_%d" % step)
        x = {k: np.load(os.path.join(s, "m.fc.%s.npy" % k)).astype(F32)
             for k in ("input", "weight", "grad_output")}
        fmt = {"input": "e4m3", "weight": "e4m3", "grad_output": "e5m2"}
        codes, sinv = {}, {}
        for k in x:
            sc = scale[("m.fc." + k, step)]
            codes[k] = fp8ref.encode((x[k] * sc).astype(F32), fmt[k])
            sinv[k] = F32(F32(1) / sc)
        X, W, G = (x[k].astype(np.float64) for k in ("input", "weight", "grad_output"))
        gemms = {  # a [m, k], b [n, k] codes and the double reference [m, n]
            "fprop": ("input", codes["input"], "weight", codes["weight"], X @ W.T),
            "dgrad": ("grad_output", codes["grad_output"], "weight",
                      np.ascontiguousarray(codes["weight"].T), G @ W),
            "wgrad": ("grad_output", np.ascontiguousarray(codes["grad_output"].T), "input",
                      np.ascontiguousarray(codes["input"].T), G.T @ X),
        }
        for g, (ta, a, tb, b, yref) in gemms.items():
            sab = F32(sinv[ta] * sinv[tb])
            te = 0 if g == "fprop" else 128
            out2 = []
            for promote in (te, 128 - te):
                y = (chain(a, b, fmt[ta], fmt[tb], gpu, promote) * sab).astype(np.float64)
                out2.append(np.linalg.norm(y - yref) / np.linalg.norm(yref))
            res[(g, step)] = tuple(out2)
    return res


def close(a, b, rel):
    return abs(a - b) <= rel * max(abs(a), abs(b))


def case_reference(tmp):
    d = os.path.join(tmp, "ref")
    write_trace(d, np.random.default_rng(46))
    rec = "[recipe.cur]\nkind = current\nformat = hybrid\n"
    base = "gemm_error = exact\ngemm_max_tokens = 0\n"
    ini(os.path.join(d, "x.ini"), rec, base + "tensor_core = exact\n", "out_x")
    rc, out = run(["run", "--no-report", "x.ini"], d)
    if not check(rc == 0, "exact run: rc %d: %s" % (rc, out[-400:])):
        return
    exact = {(r["gemm"], r["step"]): r for r in rows(os.path.join(d, "out_x", "gemm.csv"))}
    for gpu in ("h100", "b200"):
        ini(os.path.join(d, gpu + ".ini"), rec, base + "tensor_core = %s\n" % gpu, "out_" + gpu)
        rc, out = run(["run", "--no-report", gpu + ".ini"], d)
        if not check(rc == 0, "%s run: rc %d: %s" % (gpu, rc, out[-400:])):
            continue
        got = rows(os.path.join(d, "out_" + gpu, "gemm.csv"))
        ref = reference_errors(d, "out_" + gpu, gpu)
        check(len(got) == 6, "%s: %d gemm.csv rows, expected 6" % (gpu, len(got)))
        for r in got:
            g, step = r["gemm"], int(r["step"])
            te, other = ref[(g, step)]
            check(r["tensor_core"] == gpu and
                  r["accumulation"] == ("fast" if g == "fprop" else "promoted"),
                  "%s %s: tensor_core %s accumulation %s" % (gpu, g, r["tensor_core"],
                                                              r["accumulation"]))
            check(close(float(r["rel_error"]), te, 1e-8),
                  "%s %s step %d: rel_error %s, the reference %.10g" % (gpu, g, step,
                                                                       r["rel_error"], te))
            if g == "fprop":  # the other form: fprop's alone (promoted)
                check(close(float(r["rel_error_alt_acc"]), other, 1e-8),
                      "%s %s step %d: rel_error_alt_acc %s, the reference %.10g"
                      % (gpu, g, step, r["rel_error_alt_acc"], other))
            else:
                check(r["rel_error_alt_acc"] == "", "%s %s step %d: rel_error_alt_acc %r, not empty"
                      % (gpu, g, step, r["rel_error_alt_acc"]))
            check(r["rel_error_exact_acc"] == exact[(g, r["step"])]["rel_error"],
                  "%s %s step %d: rel_error_exact_acc %s, the exact run's %s"
                  % (gpu, g, step, r["rel_error_exact_acc"], exact[(g, r["step"])]["rel_error"]))
        # the model is not the FP32 GEMM: far beyond the tolerance somewhere (h100 truncates
        # to 14 bits; b200 sums each MMA exactly and truncates once to float32)
        worst = max(abs(float(r["rel_error"]) / float(r["rel_error_exact_acc"]) - 1) for r in got)
        check(worst > (1e-5 if gpu == "h100" else 1e-8),
              "%s: rel_error within %.2g of the exact accumulation's everywhere" % (gpu, worst))
        print("  %s: largest relative difference from exact accumulation %.2g" % (gpu, worst))
    print("  reference: h100 and b200, exact mode, 6 rows each against tensorcore.py")


def case_sampled(tmp):
    d = os.path.join(tmp, "sampled")
    write_trace(d, np.random.default_rng(7), steps=(0, 1, 2))
    rec = ("[recipe.dl]\nkind = delayed\nformat = hybrid\nhistory_len = 4\n\n"
           "[recipe.cur]\nkind = current\nformat = hybrid\n\n"
           "[recipe.blk]\nkind = block\nformat = e4m3\n")
    outs = {}
    for m in ("exact", "h100"):
        ini(os.path.join(d, m + ".ini"), rec, "gemm_sample = 8\ntensor_core = %s\n" % m, "out_" + m)
        rc, out = run(["run", m + ".ini"], d)
        if not check(rc == 0, "sampled %s run: rc %d: %s" % (m, rc, out[-400:])):
            return
        outs[m] = os.path.join(d, "out_" + m)
    hx = open(os.path.join(outs["exact"], "gemm.csv")).readline().strip().split(",")
    hh = open(os.path.join(outs["h100"], "gemm.csv")).readline().strip().split(",")
    check(len(hx) == 11 and len(hh) == 19 and hh[-4:] == ["tensor_core", "accumulation",
                                                          "rel_error_exact_acc",
                                                          "rel_error_alt_acc"],
          "gemm.csv headers: %s / %s" % (hx, hh))
    rx = rows(os.path.join(outs["exact"], "gemm.csv"))
    rh = rows(os.path.join(outs["h100"], "gemm.csv"))
    check(len(rx) == len(rh) == 3 * 3 * 3, "rows: %d, %d" % (len(rx), len(rh)))
    for a, b in zip(rx, rh):
        key = (b["layer"], b["gemm"], b["step"], b["recipe"])
        check((a["layer"], a["gemm"], a["step"], a["recipe"]) == key, "row order differs")
        check(b["rel_error_exact_acc"] == a["rel_error"],
              "%s: rel_error_exact_acc %s, the exact run's %s" % (key, b["rel_error_exact_acc"],
                                                                  a["rel_error"]))
        if b["kind"] == "block":
            check(b["tensor_core"] == "exact" and b["accumulation"] == "exact" and
                  b["rel_error_alt_acc"] == "" and b["rel_error"] == a["rel_error"] and
                  b["rel_error_lo"] == a["rel_error_lo"],
                  "%s: a block row is not left exact: %s" % (key, b))
        else:
            want = "fast" if b["gemm"] == "fprop" else "promoted"
            check(b["tensor_core"] == "h100" and b["accumulation"] == want and
                  (b["rel_error_alt_acc"] != "") == (b["gemm"] == "fprop") and
                  float(b["rel_error_lo"]) <= float(b["rel_error"]) <= float(b["rel_error_hi"]),
                  "%s: per-tensor row: %s" % (key, b))
    for m in ("exact", "h100"):
        ex = json.load(open(os.path.join(outs[m], "run.json")))["experiment"]
        check(ex.get("tensor_core") == m, "%s: run.json tensor_core %r" % (m, ex.get("tensor_core")))
        acc = ex.get("accumulation")
        check((acc is None) if m == "exact" else
              (acc.get("fprop") == "fast" and acc.get("dgrad") == "promoted" and
               acc.get("promote_every") == 128 and acc.get("mma_k") == 32),
              "%s: run.json accumulation %r" % (m, acc))
        md = open(os.path.join(outs[m], "report.md")).read()
        check(("Accumulation: **%s**" % m) in md, "%s: report.md does not name it" % m)
        check(("### What accumulation costs" in md) == (m == "h100"),
              "%s: report.md's cost table present: %s" % (m, "### What accumulation costs" in md))
    # the report again from the files (the reader of the new columns)
    rc, out = run(["report", "out_h100"], d)
    check(rc == 0, "fp8lab report out_h100: rc %d: %s" % (rc, out[-300:]))
    print("  sampled: 27 rows, exact accumulation column equal to the exact run's, block rows exact")


def case_nan_and_block_operand(tmp):
    """Two rows the writer and the reader must agree on: a NaN in the input makes fprop's two
    errors NaN (written "nan", not empty: the report reads the file back), and a label whose
    grad_output is MXFP8 leaves all its GEMMs to the FP32 path (the engine computes a request
    with a block operand in FP32), so even fprop of its per-tensor input and weight is labelled
    exact, equal to the exact run's."""
    d = os.path.join(tmp, "nanblk")
    write_trace(d, np.random.default_rng(5))
    p = os.path.join(d, "trace", "step_1", "m.fc.input.npy")
    x = np.load(p)
    x[2, 3] = np.nan
    np.save(p, x)
    rec = ("[recipe.cur]\nkind = current\nformat = hybrid\n\n"
           "[recipe.mx]\nkind = mxfp8\ntensors = m.fc.grad_output\n\n"
           "[recipe.mx_rest]\nlabel = mx\nkind = current\nformat = hybrid\n")
    base = "gemm_error = exact\ngemm_max_tokens = 0\n"
    got = {}
    for m in ("exact", "h100"):
        ini(os.path.join(d, m + ".ini"), rec, base + "tensor_core = %s\n" % m, "out_" + m)
        rc, out = run(["run", m + ".ini"], d)  # with the report: it reads gemm.csv back
        if not check(rc == 0 and os.path.exists(os.path.join(d, "out_" + m, "report.md")),
                     "nan/block %s run: rc %d: %s" % (m, rc, out[-400:])):
            return
        got[m] = {(r["gemm"], r["step"], r["recipe"]): r
                  for r in rows(os.path.join(d, "out_" + m, "gemm.csv"))}
    check(len(got["h100"]) == 12, "nan/block: %d rows, expected 12" % len(got["h100"]))
    for key, r in sorted(got["h100"].items()):
        g, step, label = key
        if label == "mx":
            check(r["tensor_core"] == "exact" and r["accumulation"] == "exact" and
                  r["rel_error_alt_acc"] == "" and
                  r["rel_error"] == r["rel_error_exact_acc"] == got["exact"][key]["rel_error"],
                  "nan/block %s: a request with an MXFP8 operand, not left exact: %s" % (key, r))
        elif g == "fprop" and step == "1":
            check(r["rel_error"] == r["rel_error_exact_acc"] == r["rel_error_alt_acc"] == "nan",
                  "nan/block %s: the NaN input's fprop row: %s" % (key, r))
        else:
            check(r["tensor_core"] == "h100" and
                  (r["rel_error_alt_acc"] != "") == (g == "fprop"),
                  "nan/block %s: per-tensor row: %s" % (key, r))
    print("  nan and block operand: fprop's NaN errors written nan, the mx label's 6 rows exact")


def case_bad_value(tmp):
    d = os.path.join(tmp, "bad")
    write_trace(d, np.random.default_rng(1), steps=(0,))
    ini(os.path.join(d, "b.ini"), "[recipe.cur]\nkind = current\n", "tensor_core = a100\n", "o")
    rc, out = run(["run", "b.ini"], d)
    lines = out.strip().splitlines()
    check(rc == 2 and len(lines) == 1 and "b.ini:8:" in lines[0] and "tensor_core" in lines[0],
          "bad tensor_core: rc %d: %r" % (rc, out))
    print("  bad value: %s" % (lines[0] if lines else ""))
    # a model without GEMM errors: run, and said on stderr (the key's line)
    ini(os.path.join(d, "g.ini"), "[recipe.cur]\nkind = current\n",
        "gemm = false\ntensor_core = h100\n", "og")
    rc, out = run(["run", "--no-report", "g.ini"], d)
    check(rc == 0 and "fp8lab: warning: g.ini:9: [analysis] tensor_core has nothing to act on: "
          "gemm = false" in out and not os.path.exists(os.path.join(d, "og", "gemm.csv")),
          "tensor_core with gemm = false: rc %d: %r" % (rc, out[-300:]))


def main():
    with tempfile.TemporaryDirectory() as tmp:
        case_reference(tmp)
        case_sampled(tmp)
        case_nan_and_block_operand(tmp)
        case_bad_value(tmp)
    return pycommon.finish()


if __name__ == "__main__":
    sys.exit(main())
