#!/usr/bin/env python3
"""compare_runs.py: do two `fp8lab run` output directories hold the same answers?

  compare_runs.py DIR_A DIR_B [--rtol 1e-6]
                  [--files steps.csv,summary.csv,histograms.csv,stream.csv,gemm.csv]
                  [--gemm-rtol 1e-3] [--gemm-fprop-rtol 0.1] [--gemm-atol 1e-6] [--show N] [--quiet]

Made for the GPU engine's parity check (scripts/device-parity.sh: `--device cpu` against
`--device gpu` on the same trace and experiment), usable on any two runs. Python's standard
library only, so that it runs on any machine with a python3.

The rule (src/engine/engine.h, kernels/README.md): codes, counts (clipped included), amax, scales
and histograms are bit-identical between the engines; only the three double sums (sum of squared
errors, sum of squares, sum of squared dequantized values) are accumulated in another order on
the GPU and agree to 1e-6 relative. So every cell is compared as text, exactly, except the
columns computed from those sums:
  - mse, underflow_expected, mse_expected (steps.csv; mse also summary.csv):
    |a - b| <= rtol * max(|a|, |b|);
  - snr_db, snr_db_min (dB, 10 log10(sum_sq / sum_sq_err)): relative as above, or within
    10 log10((1 + rtol) / (1 - rtol)) dB (8.7e-6 dB for rtol 1e-6), the most that sums within
    rtol can move it: near 0 dB (everything flushed to zero) a relative rule on the dB value
    would be meaningless;
  - cos_sim (steps.csv), cos_sim_min (summary.csv): c = (sx + sh - se) / (2 sqrt(sx sh)) from
    sx = sum_sq, sh = sum_sq_hat, se = sum_sq_err, which cancels when se is close to sx + sh
    (most of a tensor flushed to zero, or saturated far past max): sums within rtol move c by
    at most rtol * K, K = 2|c| + se / sqrt(sx sh), and se / sqrt(sx sh) follows from c and the
    row's rho = se / sx = 10^(-snr_db / 10) (cos_tolerance below); the cells must agree within
    that (K from either run, the larger) plus the 9 printed digits. A summary row takes rho from
    snr_db_min (the worst step, which bounds every step's K while rho < 1; at rho >= 1, 0 dB,
    some step may cancel completely and the cell is not constrained). steps.csv rows are
    each checked with their own rho, so a summary minimum is checked through its step too.
  inf equals inf of the same sign, nan equals nan, an empty cell only an empty cell. The
  headers must be identical, and so must the row counts (rows are compared in file order: the
  runner writes them in a fixed order, steps, tensor names, configurations).
gemm.csv (when listed in --files and present in both): every column exact but rel_error (and
the FP4 ratio columns ratio, ratio_lo, ratio_hi: quotients of two errors, twice the tolerance;
the tensor-core columns rel_error_exact_acc and rel_error_alt_acc, as rel_error), which
the GPU engine takes from cuBLASLt's real FP8 GEMMs (FP32 accumulation; Hopper's fast
accumulation in fprop, as TransformerEngine) against cuBLASLt's FP32 GEMM, where the CPU uses an
FP32 GEMM of the dequantized operands against a double one: equal only to the accumulation
error. |a - b| <= gemm_rtol * max(|a|, |b|) + gemm_atol, with --gemm-fprop-rtol for fprop rows
(fast accumulation keeps fewer bits: that difference is the hardware's, reported, not a bug
unless it is gross). Per GEMM kind the largest relative difference is printed.
run.json differs by design (engine, wall time) and is not compared; its counts and wall time
are printed for both runs.

Output: per file, rows and cells compared, the exact columns found identical (one line), then
a line for each derived or mismatching column (cells, mismatches, the largest relative
difference seen, and for the dB columns the largest absolute difference), the first --show
mismatches with their line number and the row's key columns (tensor, step, recipe, ...), and
a last line
  RESULT rows=<R> cells=<C> exact_identical=yes|no mismatches=<M> max_rel_mse=<x>
         max_rel_snr=<x> max_abs_snr_db=<x> max_abs_cos=<x> rtol=<x> gemm_max_rel=<k:x,...|none>
         status=PASS|FAIL
(one line) that scripts parse. Exit status: 0 PASS, 1 FAIL (any mismatch, a row count or
header difference), 2 usage error or a file missing in one directory.
"""
import argparse
import csv
import json
import math
import os
import sys

DEFAULT_FILES = ("steps.csv", "summary.csv", "histograms.csv", "stream.csv", "gemm.csv")
# columns computed from the double sums, per file; "rel", "db", or "cos" / "cosmin" with the
# column of the same row that gives rho (see the docstring)
DERIVED = {
    "steps.csv": {"mse": "rel", "snr_db": "db", "cos_sim": ("cos", "snr_db"),
                  # stochastic rounding's expectation (FP4): double sums, as mse
                  "underflow_expected": "rel", "mse_expected": "rel"},
    "summary.csv": {"mse": "rel", "snr_db": "db", "snr_db_min": "db",
                    "cos_sim_min": ("cosmin", "snr_db_min")},
}
# columns that name a row in the mismatch report (those present in the file)
KEYS = ("tensor", "step", "recipe", "kind", "format", "history_len", "margin", "amax_compute",
        "log2_bin")


def parse_float(s):
    try:
        return float(s)
    except ValueError:
        return None


def rel_diff(a, b):
    """Relative difference of two floats; 0 when equal (inf == inf, nan == nan), inf when one
    is non-finite and the other is not (or infinities of opposite signs)."""
    if a == b or (math.isnan(a) and math.isnan(b)):
        return 0.0
    if not (math.isfinite(a) and math.isfinite(b)):
        return math.inf
    return abs(a - b) / max(abs(a), abs(b))


def cos_tolerance(c, rho, worst):
    """K with |c_a - c_b| <= rtol * K when sum_sq, sum_sq_hat and sum_sq_err are each within rtol
    (first order). c = (sx + sh - se) / (2 g), g = sqrt(sx sh); the numerator moves by at most
    rtol (sx + sh + se) = rtol 2 g (c + se/g), the denominator by rtol g, so K = 2|c| + se/g.
    With sx = 1, b = sqrt(sh): b^2 - 2 c b + (1 - rho) = 0, and se/g = rho / b. rho < 1: two
    positive roots, the smaller b = (1 - rho) / (c + sqrt(c^2 - 1 + rho)) the worst; rho >= 1:
    one, b = c + sqrt(c^2 + rho - 1). `worst`: rho is an upper bound of the true rho (a summary's
    snr_db_min): K grows with rho below 1, and is unbounded as rho -> 1 from below, so an upper
    bound >= 1 bounds nothing. None when rho is NaN (then only equal cells pass)."""
    if math.isnan(c) or math.isnan(rho) or rho < 0:
        return None
    cc = max(c, 0.0)
    if rho == 0:
        eg = 0.0
    elif rho < 1:
        eg = rho * (cc + math.sqrt(max(0.0, cc * cc - 1 + rho))) / (1 - rho)
    elif worst or math.isinf(rho):
        eg = math.inf
    else:
        den = cc + math.sqrt(cc * cc + rho - 1)
        eg = rho / den if den > 0 else math.inf
    return 2 * abs(c) + eg


def rho_of_snr(text):
    """se / sx from an snr_db cell (10 log10(sx / se)): inf -> 0, -inf -> inf, else NaN."""
    v = parse_float(text)
    if v is None or math.isnan(v):
        return math.nan
    return 10.0 ** (-v / 10.0) if v > -3000 else math.inf


class Column:
    def __init__(self, name, rule):
        self.name = name
        self.rule = rule  # "exact", "rel", "db", "cos" or "cosmin"
        self.cells = 0
        self.mismatches = 0
        self.max_rel = 0.0  # over the cells that parse as numbers on both sides
        self.max_abs = 0.0
        self.numeric = True

    def describe(self):
        if self.rule == "exact":
            rule = "exact"
        elif self.rule == "rel":
            rule = "rtol"
        elif self.rule == "db":
            rule = "rtol or dB"
        else:
            rule = "rtol * K"
        s = "  %-22s %-10s %9d cells %6d mismatches" % (self.name, rule, self.cells,
                                                       self.mismatches)
        if self.numeric:
            s += "  max rel diff %.3g" % self.max_rel
            if self.rule == "db":
                s += "  max abs diff %.3g dB" % self.max_abs
            elif self.rule in ("cos", "cosmin"):
                s += "  max abs diff %.3g" % self.max_abs
        else:
            s += "  (text)"
        return s


def split_line(line):
    """One CSV record (fp8lab writes no quotes unless a name needs them) -> fields."""
    line = line.rstrip("\r\n")
    if '"' in line:
        return next(csv.reader([line]))
    return line.split(",")


def cell_rel(va, vb):
    """Relative difference of two cells: as rel_diff for numbers, else 0 or inf."""
    fa, fb = parse_float(va), parse_float(vb)
    if fa is None or fb is None:
        return 0.0 if va == vb else math.inf
    return rel_diff(fa, fb)


def cos_ok(fa, fb, refs, worst, rtol):
    """The cos rule (docstring): |a - b| <= rtol K (1.001, for the second-order terms) plus the
    printing of 9 significant digits; refs: the two rows' snr_db (or snr_db_min) cells."""
    if fa == fb or (math.isnan(fa) and math.isnan(fb)):
        return True
    if not (math.isfinite(fa) and math.isfinite(fb)):
        return False
    ks = [cos_tolerance(c, rho_of_snr(ref), worst) for c, ref in ((fa, refs[0]), (fb, refs[1]))]
    if None in ks:
        return False
    return abs(fa - fb) <= rtol * max(ks) * 1.001 + 1e-8 * max(abs(fa), abs(fb))


def compare_cells(col, va, vb, rtol, db_tol, refs=None):
    """Compares one cell pair under col's rule, updates col's maxima -> ok. refs: the reference
    cells (A, B) of the cos rules."""
    fa, fb = parse_float(va), parse_float(vb)
    if fa is None or fb is None:
        ok = va == vb
        r = d = 0.0 if ok else math.inf
    else:
        r = rel_diff(fa, fb)
        d = 0.0 if r == 0.0 else (abs(fa - fb) if math.isfinite(r) else math.inf)
        if col.rule == "exact":
            ok = va == vb
        elif col.rule == "rel":
            ok = r <= rtol
        elif col.rule == "db":
            ok = r <= rtol or d <= db_tol
        else:
            ok = cos_ok(fa, fb, refs, col.rule == "cosmin", rtol)
    col.max_rel = max(col.max_rel, r)
    col.max_abs = max(col.max_abs, d)
    if not ok:
        col.mismatches += 1
    return ok


def compare_file(path_a, path_b, rtol, show):
    """-> (rows, cells, columns dict, problems list, mismatch lines). Rows whose text is
    identical are counted without being parsed (the common case: only the derived columns of
    a GPU run differ, in their last digits); in the others, the exact columns are compared as
    one tuple first, and the cells are looked at one by one only when that differs."""
    name = os.path.basename(path_a)
    rules = DERIVED.get(name, {})
    db_tol = 10.0 * math.log10((1.0 + rtol) / (1.0 - rtol))
    problems = []
    shown = []
    with open(path_a, newline="") as fa, open(path_b, newline="") as fb:
        la, lb = fa.readline(), fb.readline()
        if not la or not lb:
            problems.append("%s: empty file (%s)" % (name, path_a if not la else path_b))
            return 0, 0, {}, problems, shown
        ha, hb = split_line(la), split_line(lb)
        if ha != hb:
            problems.append("%s: headers differ:\n    A: %s\n    B: %s" % (name, ",".join(ha),
                                                                        ",".join(hb)))
            return 0, 0, {}, problems, shown
        ncol = len(ha)
        rule_of = {c: (r if isinstance(r, str) else r[0]) for c, r in rules.items()}
        cols = [Column(c, rule_of.get(c, "exact")) for c in ha]
        # the cos rules' reference column (snr_db / snr_db_min) of each cos column
        refcol = {i: ha.index(rules[c][1]) for i, c in enumerate(ha)
                  if not isinstance(rules.get(c, ""), str) and rules[c][1] in ha}
        exact_idx = [i for i, c in enumerate(cols) if c.rule == "exact"]
        derived_idx = [i for i, c in enumerate(cols) if c.rule != "exact"]
        exact_of = (lambda f: tuple(f[i] for i in exact_idx))
        keyidx = [i for i, c in enumerate(ha) if c in KEYS]
        rows = 0
        line = 1
        for la in fa:
            lb = fb.readline()
            line += 1
            if not lb:
                problems.append("%s: row counts differ: A has %d rows, B has %d" %
                                (name, rows + 1 + sum(1 for _ in fa), rows))
                break
            rows += 1
            if rows == 1:  # text columns: those whose first cell is not a number
                for c, v in zip(cols, split_line(la)):
                    c.numeric = v == "" or parse_float(v) is not None
            if la == lb:
                continue
            a, b = split_line(la), split_line(lb)
            if len(a) != ncol or len(b) != ncol:
                problems.append("%s line %d: %d / %d fields, the header has %d" %
                                (name, line, len(a), len(b), ncol))
                continue
            check = derived_idx if exact_of(a) == exact_of(b) else range(ncol)
            for i in check:
                refs = (a[refcol[i]], b[refcol[i]]) if i in refcol else ("nan", "nan")
                if not compare_cells(cols[i], a[i], b[i], rtol, db_tol, refs) and \
                        len(shown) < show:
                    key = ", ".join("%s=%s" % (ha[k], a[k]) for k in keyidx if a[k] != "")
                    shown.append("  %s line %d (%s): %s: A %s, B %s (rel diff %.3g)" %
                                 (name, line, key, ha[i], a[i], b[i], cell_rel(a[i], b[i])))
        else:
            rest = sum(1 for _ in fb)
            if rest:
                problems.append("%s: row counts differ: A has %d rows, B has %d" %
                                (name, rows, rows + rest))
    for c in cols:
        c.cells = rows
    return rows, rows * ncol, {c.name: c for c in cols}, problems, shown


def compare_gemm(path_a, path_b, rtol, fprop_rtol, atol, show):
    """gemm.csv: -> (rows, cells, {kind: [cells, mismatches, max rel diff]}, exact mismatches,
    problems, mismatch lines)."""
    problems, shown = [], []
    stats = {}
    exact_mis = 0
    with open(path_a, newline="") as fa, open(path_b, newline="") as fb:
        ra, rb = list(csv.reader(fa)), list(csv.reader(fb))
    if not ra or not rb or ra[0] != rb[0]:
        problems.append("gemm.csv: headers differ or a file is empty")
        return 0, 0, stats, 0, problems, shown
    head = ra[0]
    if "rel_error" not in head or "gemm" not in head:
        problems.append("gemm.csv: no rel_error / gemm column")
        return 0, 0, stats, 0, problems, shown
    ie, ig = head.index("rel_error"), head.index("gemm")
    # the FP4 ratio columns (issue 42): a quotient of two rel_errors, so twice their tolerance
    tcols = [(ie, 1.0)] + [(head.index(c), 2.0) for c in ("ratio", "ratio_lo", "ratio_hi")
                           if c in head]
    # the tensor-core columns (issue 46): errors like rel_error (tensor_core, accumulation exact)
    tcols += [(head.index(c), 1.0) for c in ("rel_error_exact_acc", "rel_error_alt_acc")
              if c in head]
    tidx = {i for i, _ in tcols}
    if len(ra) != len(rb):
        problems.append("gemm.csv: row counts differ: A has %d rows, B has %d" %
                        (len(ra) - 1, len(rb) - 1))
    rows = min(len(ra), len(rb)) - 1
    for line in range(1, rows + 1):
        a, b = ra[line], rb[line]
        if len(a) != len(head) or len(b) != len(head):
            problems.append("gemm.csv line %d: field count differs from the header" % (line + 1))
            continue
        if [v for i, v in enumerate(a) if i not in tidx] != [v for i, v in enumerate(b) if i not in tidx]:
            exact_mis += 1
            if len(shown) < show:
                shown.append("  gemm.csv line %d: key columns differ: A %s, B %s" %
                             (line + 1, ",".join(a), ",".join(b)))
            continue
        kind = a[ig]
        st = stats.setdefault(kind, [0, 0, 0.0])
        for ic, k in tcols:
            if ic != ie and a[ic] == "" and b[ic] == "":
                continue  # no ratio on this row
            st[0] += 1
            fa_, fb_ = parse_float(a[ic]), parse_float(b[ic])
            if fa_ is None or fb_ is None:
                ok, r = a[ic] == b[ic], (0.0 if a[ic] == b[ic] else math.inf)
            else:
                r = rel_diff(fa_, fb_)
                tol = k * (fprop_rtol if kind == "fprop" else rtol)
                ok = r == 0.0 or (math.isfinite(r) and
                                  abs(fa_ - fb_) <= tol * max(abs(fa_), abs(fb_)) + atol)
            st[2] = max(st[2], r)
            if not ok:
                st[1] += 1
                if len(shown) < show:
                    shown.append("  gemm.csv line %d (%s): %s A %s, B %s (rel diff %.3g)" %
                                 (line + 1, ",".join(a[:ie]), head[ic], a[ic], b[ic], r))
    return rows, rows * len(head), stats, exact_mis, problems, shown


def run_info(d):
    try:
        with open(os.path.join(d, "run.json")) as f:
            j = json.load(f)
    except (OSError, ValueError):
        return None
    return j


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir_a")
    ap.add_argument("dir_b")
    ap.add_argument("--rtol", type=float, default=1e-6,
                    help="relative tolerance of the columns derived from the error sums")
    ap.add_argument("--files", default=",".join(DEFAULT_FILES),
                    help="comma list of the CSV files to compare (default %(default)s)")
    ap.add_argument("--gemm-rtol", type=float, default=1e-3,
                    help="gemm.csv rel_error of dgrad/wgrad rows: relative tolerance")
    ap.add_argument("--gemm-fprop-rtol", type=float, default=0.1,
                    help="gemm.csv rel_error of fprop rows (fast accumulation)")
    ap.add_argument("--gemm-atol", type=float, default=1e-6,
                    help="gemm.csv rel_error: absolute tolerance added to the relative one")
    ap.add_argument("--show", type=int, default=10, help="mismatches to print (default 10)")
    ap.add_argument("--quiet", action="store_true", help="only the RESULT line")
    args = ap.parse_args(argv)
    if not (0 < args.rtol < 1):
        print("compare_runs: --rtol wants a number in (0, 1)", file=sys.stderr)
        return 2
    files = [f for f in args.files.split(",") if f]

    def say(s):
        if not args.quiet:
            print(s)

    for d in (args.dir_a, args.dir_b):
        j = run_info(d)
        if j:
            say("%s: engine %s, %s steps, %s tensors, %s configurations, %s rows, %s threads, "
                "replay %.3f s" % (d, j.get("engine"), j.get("steps_replayed"), j.get("tensors"),
                                    j.get("configurations"), j.get("rows"), j.get("threads"),
                                    float(j.get("wall_time_s", float("nan")))))
        else:
            say("%s: (no readable run.json)" % d)
    total_rows = total_cells = total_mis = 0
    problems = []
    max_rel = {"rel": 0.0, "db": 0.0}
    max_abs_db = max_abs_cos = 0.0
    gemm_max = {}
    exact_ok = True
    for name in files:
        pa, pb = os.path.join(args.dir_a, name), os.path.join(args.dir_b, name)
        ea, eb = os.path.isfile(pa), os.path.isfile(pb)
        if not ea and not eb:
            say("%s: in neither directory, skipped" % name)
            continue
        if ea != eb:
            print("compare_runs: %s exists in %s only" % (name, args.dir_a if ea else args.dir_b),
                  file=sys.stderr)
            return 2
        if name == "gemm.csv":
            rows, cells, gst, emis, probs, shown = compare_gemm(
                pa, pb, args.gemm_rtol, args.gemm_fprop_rtol, args.gemm_atol, args.show)
            problems += probs
            total_rows += rows
            total_cells += cells
            mis = emis + sum(v[1] for v in gst.values())
            total_mis += mis
            exact_ok = exact_ok and emis == 0
            say("gemm.csv: %d rows, %d cells, %d mismatches (key columns: %d)" %
                (rows, cells, mis, emis))
            for kind in sorted(gst):
                c, m, r = gst[kind]
                say("  rel_error %-6s %9d cells %6d mismatches  max rel diff %.3g (tol %g + %g)" %
                    (kind, c, m, r, args.gemm_fprop_rtol if kind == "fprop" else args.gemm_rtol,
                     args.gemm_atol))
                gemm_max[kind] = max(gemm_max.get(kind, 0.0), r)
            for sline in shown:
                say(sline)
            for p_ in probs:
                say("PROBLEM " + p_)
            continue
        rows, cells, cols, probs, shown = compare_file(pa, pb, args.rtol, args.show)
        problems += probs
        total_rows += rows
        total_cells += cells
        mis = sum(c.mismatches for c in cols.values())
        total_mis += mis
        say("%s: %d rows, %d cells, %d mismatches" % (name, rows, cells, mis))
        same = [c.name for c in cols.values() if c.rule == "exact" and c.mismatches == 0]
        if same:
            say("  identical (exact columns, %d cells each): %s" % (rows, " ".join(same)))
        for c in cols.values():
            if c.rule != "exact" or c.mismatches:
                say(c.describe())
            if c.rule == "exact":
                exact_ok = exact_ok and c.mismatches == 0
            elif c.rule in ("cos", "cosmin"):
                max_abs_cos = max(max_abs_cos, c.max_abs)
            else:
                max_rel[c.rule] = max(max_rel[c.rule], c.max_rel)
                if c.rule == "db":
                    max_abs_db = max(max_abs_db, c.max_abs)
        if shown:
            say("first mismatches (A = %s, B = %s):" % (args.dir_a, args.dir_b))
            for s in shown:
                say(s)
        for p in probs:
            say("PROBLEM " + p)
    if problems:
        exact_ok = False
    ok = total_mis == 0 and not problems
    gemm = ",".join("%s:%.3g" % (k, gemm_max[k]) for k in sorted(gemm_max)) or "none"
    print("RESULT rows=%d cells=%d exact_identical=%s mismatches=%d max_rel_mse=%.3g "
          "max_rel_snr=%.3g max_abs_snr_db=%.3g max_abs_cos=%.3g rtol=%g gemm_max_rel=%s "
          "status=%s" %
          (total_rows, total_cells, "yes" if exact_ok else "no", total_mis, max_rel["rel"],
           max_rel["db"], max_abs_db, max_abs_cos, args.rtol, gemm, "PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
