#!/usr/bin/env python3
"""scripts/compare_runs.py, the judge of the GPU engine's parity check (scripts/device-parity.sh),
on CPU-engine runs: it must pass two runs that are the same and catch every difference the
parity rule forbids.

  - `fp8lab run --device cpu` twice on one synthetic trace, with --threads 1 and --threads 2
    (the runner's output does not depend on the thread count): PASS, exact columns identical,
    every derived difference 0;
  - one ulp more in an exact float column (the float32 `scale` of one row): FAIL, naming the
    column and the row; one more in a count (`overflow`): FAIL;
  - mse of one row 1e-5 relative off: FAIL; 1e-7 relative off: PASS with that max rel diff;
  - snr_db: inf against inf passes, inf against a number fails, 1e-7 relative passes, 1e-4
    relative fails; nan against nan passes (histograms untouched);
  - cos_sim / cos_sim_min (from the three sums, cancelling when most of a tensor is flushed):
    1e-9 off passes, 1e-5 off on a well-conditioned row fails; 5e-5 off at c = 0.01 passes when
    the row's snr_db says 0.0004 dB (rho = 0.9999: the sums within 1e-6 allow ~1e-4 there)
    and fails at 30 dB; a summary cos_sim_min 1e-5 off fails; stream.csv is compared (one ulp
    in its scale fails);
  - a row missing, a header changed, a file missing in one run: FAIL / exit 2;
  - gemm.csv: identical runs pass; rel_error of dgrad 1e-4 relative off passes (reported),
    wgrad 1e-2 off fails, fprop 1e-2 off passes (fast accumulation tolerance 0.1), a changed
    key column fails.
Standard library only, like the script it tests.

Usage: test_compare_runs.py FP8LAB_BIN
"""
import os
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
COMPARE = os.path.join(ROOT, "scripts", "compare_runs.py")

EXP = """[trace]
path = trace
[recipe.delayed]
kind = delayed
format = hybrid
history_len = 1, 16
margin = 0, 1
amax_compute = max, most_recent
[recipe.e5m2]
kind = delayed
format = e5m2
history_len = 4
[recipe.current]
kind = current
format = hybrid
[recipe.rows]
kind = rowwise
[analysis]
gemm = false
"""


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.returncode, p.stdout


def compare(a, b, *extra):
    rc, out = run([sys.executable, COMPARE, a, b, "--show", "5"] + list(extra))
    result = [l for l in out.splitlines() if l.startswith("RESULT ")]
    return rc, out, result[-1] if result else ""


def field(result, key):
    for tok in result.split():
        if tok.startswith(key + "="):
            return tok.split("=", 1)[1]
    raise AssertionError("no %s in %r" % (key, result))


def read(path):
    with open(path) as f:
        return f.read().split("\n")


def write(path, lines):
    with open(path, "w") as f:
        f.write("\n".join(lines))


def edit_cell(path, column, fn, row_pick=None):
    """Applies fn to one cell of `column`: the first data row where row_pick(row dict) holds
    (any row when None). -> (line number, old, new)."""
    lines = read(path)
    header = lines[0].split(",")
    i = header.index(column)
    for n in range(1, len(lines)):
        if not lines[n]:
            continue
        cells = lines[n].split(",")
        if row_pick is None or row_pick(dict(zip(header, cells))):
            old = cells[i]
            cells[i] = fn(old)
            lines[n] = ",".join(cells)
            write(path, lines)
            return n + 1, old, cells[i]
    raise AssertionError("no row of %s fits" % path)


def next_float32(s):
    bits = struct.unpack("<I", struct.pack("<f", float(s)))[0]
    return "%.9g" % struct.unpack("<f", struct.pack("<I", bits + 1))[0]


def finite_nonzero(col):
    def pick(row):
        try:
            v = float(row[col])
        except ValueError:
            return False
        return v != 0 and v == v and abs(v) != float("inf")
    return pick


def main():
    if len(sys.argv) != 2:
        print("usage: test_compare_runs.py FP8LAB_BIN")
        return 2
    binary = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="fp8lab-compare-")
    failures = []

    def check(cond, what, out=""):
        print(("ok    " if cond else "FAIL  ") + what)
        if not cond:
            failures.append(what)
            if out:
                print(out)

    try:
        rc, out = run([binary, "synth", "llm", os.path.join(tmp, "trace"), "--steps", "12"])
        assert rc == 0, out
        with open(os.path.join(tmp, "exp.ini"), "w") as f:
            f.write(EXP)
        a, b = os.path.join(tmp, "a"), os.path.join(tmp, "b")
        for d, threads in ((a, "1"), (b, "2")):
            rc, out = run([binary, "run", os.path.join(tmp, "exp.ini"), "--device", "cpu",
                           "--threads", threads, "--no-report", "--quiet", "--out", d])
            assert rc == 0, out

        rc, out, res = compare(a, b)
        check(rc == 0 and field(res, "status") == "PASS" and
              field(res, "exact_identical") == "yes" and field(res, "mismatches") == "0" and
              field(res, "max_rel_mse") == "0" and field(res, "max_abs_snr_db") == "0",
              "cpu (1 thread) vs cpu (2 threads): identical -> %s" % res, out)
        nrows = sum(len(read(os.path.join(a, f))) - 2 for f in
                    ("steps.csv", "summary.csv", "histograms.csv", "stream.csv"))
        check(int(field(res, "rows")) == nrows, "rows compared = %d data rows" % nrows, out)
        check("steps.csv:" in out and "summary.csv:" in out and "histograms.csv:" in out and
              "stream.csv:" in out and field(res, "max_abs_cos") == "0",
              "all four files compared", out)

        def variant(name):
            d = os.path.join(tmp, name)
            shutil.copytree(b, d)
            return d

        # one ulp in an exact float column
        d = variant("ulp")
        line, old, new = edit_cell(os.path.join(d, "steps.csv"), "scale", next_float32,
                                   finite_nonzero("scale"))
        rc, out, res = compare(a, d)
        check(rc == 1 and field(res, "exact_identical") == "no" and
              field(res, "mismatches") == "1" and
              ("steps.csv line %d" % line) in out and ": scale: A %s, B %s" % (old, new) in out,
              "scale %s -> %s (one float32 ulp) caught at line %d" % (old, new, line), out)

        # one more in a count
        d = variant("count")
        line, old, new = edit_cell(os.path.join(d, "summary.csv"), "overflow",
                                   lambda v: str(int(v) + 1))
        rc, out, res = compare(a, d)
        check(rc == 1 and "summary.csv line %d" % line in out and ": overflow:" in out,
              "summary.csv overflow %s -> %s caught" % (old, new), out)

        # mse 1e-5 relative: caught; 1e-7: within the rule
        d = variant("mse5")
        line, old, new = edit_cell(os.path.join(d, "steps.csv"), "mse",
                                   lambda v: "%.9g" % (float(v) * (1 + 1e-5)),
                                   finite_nonzero("mse"))
        rc, out, res = compare(a, d)
        check(rc == 1 and field(res, "exact_identical") == "yes" and
              ": mse: A %s, B %s" % (old, new) in out and
              abs(float(field(res, "max_rel_mse")) - 1e-5) < 1e-6,
              "mse %s -> %s (1e-5 relative) caught, exact columns still identical" % (old, new),
              out)
        d = variant("mse7")
        edit_cell(os.path.join(d, "steps.csv"), "mse", lambda v: "%.9g" % (float(v) * (1 + 1e-7)),
                  finite_nonzero("mse"))
        rc, out, res = compare(a, d)
        check(rc == 0 and 5e-8 < float(field(res, "max_rel_mse")) < 2e-7,
              "mse 1e-7 relative passes, max rel diff reported (%s)" % field(res, "max_rel_mse"),
              out)

        # snr_db: inf == inf; inf vs a number; small and large relative changes
        d = variant("snrinf")
        _, old, _ = edit_cell(os.path.join(d, "steps.csv"), "snr_db", lambda v: "inf",
                              finite_nonzero("snr_db"))
        rc, out, res = compare(a, d)
        check(rc == 1 and ": snr_db: A %s, B inf" % old in out, "snr_db %s vs inf caught" % old,
              out)
        d2 = os.path.join(tmp, "snrinf2")
        shutil.copytree(d, d2)
        rc, out, res = compare(d, d2)
        check(rc == 0, "inf vs inf passes", out)
        d = variant("snr7")
        edit_cell(os.path.join(d, "steps.csv"), "snr_db",
                  lambda v: "%.9g" % (float(v) * (1 + 1e-7)), finite_nonzero("snr_db"))
        rc, out, res = compare(a, d)
        check(rc == 0, "snr_db 1e-7 relative passes", out)
        d = variant("snr4")
        edit_cell(os.path.join(d, "steps.csv"), "snr_db",
                  lambda v: "%.9g" % (float(v) * (1 + 1e-4)),
                  lambda r: finite_nonzero("snr_db")(r) and abs(float(r["snr_db"])) > 1)
        rc, out, res = compare(a, d)
        check(rc == 1 and ": snr_db:" in out, "snr_db 1e-4 relative caught", out)

        # near 0 dB (everything flushed) the dB rule applies: 8.7e-6 dB for rtol 1e-6
        da, db = variant("db0a"), variant("db0b")
        edit_cell(os.path.join(da, "steps.csv"), "snr_db", lambda v: "1e-06")
        edit_cell(os.path.join(db, "steps.csv"), "snr_db", lambda v: "4e-06")
        rc, out, res = compare(da, db)
        check(rc == 0, "snr_db 1e-6 vs 4e-6 dB passes (within 8.7e-6 dB)", out)
        edit_cell(os.path.join(db, "steps.csv"), "snr_db", lambda v: "2e-05")
        rc, out, res = compare(da, db)
        check(rc == 1, "snr_db 1e-6 vs 2e-5 dB caught", out)

        # cos_sim: the tolerance follows the row's conditioning (compare_runs.cos_tolerance)
        good = lambda r: finite_nonzero("cos_sim")(r) and float(r["cos_sim"]) > 0.9 and \
            finite_nonzero("snr_db")(r) and float(r["snr_db"]) > 10
        d = variant("cos9")
        edit_cell(os.path.join(d, "steps.csv"), "cos_sim",
                  lambda v: "%.9g" % (float(v) - 1e-9), good)
        rc, out, res = compare(a, d)
        check(rc == 0 and 0 < float(field(res, "max_abs_cos")) < 1e-8,
              "cos_sim 1e-9 off passes, reported (%s)" % field(res, "max_abs_cos"), out)
        d = variant("cos5")
        line, old, new = edit_cell(os.path.join(d, "steps.csv"), "cos_sim",
                                   lambda v: "%.9g" % (float(v) - 1e-5), good)
        rc, out, res = compare(a, d)
        check(rc == 1 and ": cos_sim: A %s, B %s" % (old, new) in out,
              "cos_sim %s -> %s on a row above 10 dB caught" % (old, new), out)
        da, db = variant("cosfa"), variant("cosfb")
        pick = lambda r: r["kind"] == "delayed"
        for dd, c in ((da, "0.01"), (db, "0.01005")):
            edit_cell(os.path.join(dd, "steps.csv"), "snr_db", lambda v: "0.000434", pick)
            edit_cell(os.path.join(dd, "steps.csv"), "cos_sim", lambda v, c=c: c, pick)
        rc, out, res = compare(da, db)
        check(rc == 0, "cos_sim 0.01 vs 0.01005 at snr_db 0.0004 dB (cancellation) passes", out)
        for dd in (da, db):
            edit_cell(os.path.join(dd, "steps.csv"), "snr_db", lambda v: "30", pick)
        rc, out, res = compare(da, db)
        check(rc == 1 and ": cos_sim:" in out, "cos_sim 0.01 vs 0.01005 at 30 dB caught", out)
        d = variant("cosmin")
        edit_cell(os.path.join(d, "summary.csv"), "cos_sim_min",
                  lambda v: "%.9g" % (float(v) - 1e-5),
                  lambda r: finite_nonzero("cos_sim_min")(r) and float(r["snr_db_min"]) > 10)
        rc, out, res = compare(a, d)
        check(rc == 1 and ": cos_sim_min:" in out, "summary cos_sim_min 1e-5 off caught", out)
        d = variant("stream")
        line, old, new = edit_cell(os.path.join(d, "stream.csv"), "scale", next_float32,
                                   finite_nonzero("scale"))
        rc, out, res = compare(a, d)
        check(rc == 1 and ("stream.csv line %d" % line) in out,
              "stream.csv scale %s -> %s (one ulp) caught at line %d" % (old, new, line), out)

        # nan == nan (log2_scale_* of a block row may be nan; make one on both sides)
        da, db = variant("nana"), variant("nanb")
        for dd in (da, db):
            edit_cell(os.path.join(dd, "summary.csv"), "mse", lambda v: "nan")
        rc, out, res = compare(da, db)
        check(rc == 0, "nan vs nan passes", out)
        rc, out, res = compare(a, db)
        check(rc == 1, "a number vs nan caught", out)

        # structure: a row missing, a header changed, a file missing
        d = variant("short")
        lines = read(os.path.join(d, "histograms.csv"))
        write(os.path.join(d, "histograms.csv"), lines[:-2] + [""])
        rc, out, res = compare(a, d)
        check(rc == 1 and "row counts differ" in out, "a missing row caught", out)
        d = variant("header")
        lines = read(os.path.join(d, "steps.csv"))
        lines[0] = lines[0].replace("snr_db", "snr")
        write(os.path.join(d, "steps.csv"), lines)
        rc, out, res = compare(a, d)
        check(rc == 1 and "headers differ" in out, "a changed header caught", out)
        d = variant("nofile")
        os.remove(os.path.join(d, "summary.csv"))
        rc, out, res = compare(a, d)
        check(rc == 2 and "exists in" in out, "a file missing in one run: exit 2", out)

        # gemm.csv: rel_error within the per-GEMM tolerances, every other column exact
        with open(os.path.join(tmp, "gemm.ini"), "w") as f:
            f.write(EXP.replace("gemm = false", "gemm = true\ngemm_max_tokens = 16")
                    .replace("path = trace", "path = trace\nsteps = 0-3"))
        ga = os.path.join(tmp, "ga")
        rc, out = run([binary, "run", os.path.join(tmp, "gemm.ini"), "--device", "cpu",
                       "--no-report", "--quiet", "--out", ga])
        assert rc == 0, out
        gemm_rows = len(read(os.path.join(ga, "gemm.csv"))) - 2
        gv = lambda name: (shutil.copytree(ga, os.path.join(tmp, name)), os.path.join(tmp, name))[1]
        rc, out, res = compare(ga, gv("gsame"))
        check(rc == 0 and "gemm.csv: %d rows" % gemm_rows in out and gemm_rows > 0 and
              field(res, "gemm_max_rel") == "dgrad:0,fprop:0,wgrad:0",
              "gemm.csv compared (%d rows), identical -> %s" % (gemm_rows, res), out)
        is_kind = lambda k: (lambda r: r["gemm"] == k and finite_nonzero("rel_error")(r))
        d = gv("gdgrad4")
        edit_cell(os.path.join(d, "gemm.csv"), "rel_error",
                  lambda v: "%.9g" % (float(v) * (1 + 1e-4)), is_kind("dgrad"))
        rc, out, res = compare(ga, d)
        check(rc == 0 and "dgrad:0.0001" in field(res, "gemm_max_rel"),
              "gemm dgrad rel_error 1e-4 relative passes and is reported", out)
        d = gv("gwgrad2")
        line, old, new = edit_cell(os.path.join(d, "gemm.csv"), "rel_error",
                                   lambda v: "%.9g" % (float(v) * (1 + 1e-2)), is_kind("wgrad"))
        rc, out, res = compare(ga, d)
        check(rc == 1 and "gemm.csv line %d" % line in out,
              "gemm wgrad rel_error 1e-2 relative caught (line %d)" % line, out)
        d = gv("gfprop2")
        edit_cell(os.path.join(d, "gemm.csv"), "rel_error",
                  lambda v: "%.9g" % (float(v) * (1 + 1e-2)), is_kind("fprop"))
        rc, out, res = compare(ga, d)
        check(rc == 0, "gemm fprop rel_error 1e-2 relative passes (fast accumulation)", out)
        d = gv("gkey")
        edit_cell(os.path.join(d, "gemm.csv"), "step", lambda v: str(int(v) + 1))
        rc, out, res = compare(ga, d)
        check(rc == 1 and "key columns differ" in out, "gemm.csv key column change caught", out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
