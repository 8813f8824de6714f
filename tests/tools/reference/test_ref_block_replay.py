#!/usr/bin/env python3
"""Self-test of the Python reference (tools/reference/fp8ref.py, gen_trace.py) on the block
kinds: their experiment files, their rows and gemm.csv's worked out by hand, the sampled GEMM
reference, generated block traces end to end.

Run: python3 tests/tools/reference/test_ref_block_replay.py (needs numpy and ml_dtypes: without them
exit 77, skipped, or exit 1 when FP8LAB_REQUIRE_PYDEPS=1 is set, as .ci/run does)
Prints one line per failure and a final "N passed, M failed"; exits 1 on any failure.
"""
import csv
import io
import math
import os
import shutil
import sys
import tempfile

from ref_common import F32, G, R, main, np, test, write_st  # noqa: E402


# --------------------------------------------------------------------------------------------
# block kinds in the replay, gemm.csv, compare of both
# --------------------------------------------------------------------------------------------


EXP_BLOCKS = """[trace]
path = tr

[recipe.d]
kind = delayed
format = hybrid
history_len = 4

[recipe.c]
kind = current

[recipe.mx]
kind = mxfp8
format = e4m3, hybrid

[recipe.mxf]
kind = mxfp8
format = e4m3
scale_rounding = floor

[recipe.b]
kind = block

[recipe.b2]
kind = block
block = 1x128
pow2 = false

[recipe.r]
kind = rowwise

[analysis]
overflow_budget = 1e-4
gemm = true
gemm_max_tokens = 0
"""


def make_block_trace(d):
    """Two snapshots (steps 0 and 2, step 1 only in amax.csv). Layers: m (input [2, 40] with a
    500 at [0, 1] and a 0.5 at [0, 35], row 1 zero; weight [3, 40]; grad_output [2, 3]),
    n (2x2 operands exact in E4M3 and E5M2 at scale 1), a (shapes disagree: skipped), z (no
    grad_output: skipped). Step 2 doubles everything."""
    rng = np.random.default_rng(3)
    x = np.zeros((2, 40), np.float32)
    x[0, 1], x[0, 35] = 500.0, 0.5
    w = rng.normal(0, 0.02, (3, 40)).astype(np.float32)
    dy = (rng.normal(0, 1e-4, (2, 3))).astype(np.float32)
    base = [("m.input", "F32", x), ("m.weight", "F32", w), ("m.grad_output", "F32", dy),
            ("n.input", "F32", np.array([[1, 2], [3, 4]], np.float32)),
            ("n.weight", "F32", np.array([[1, 0], [0, 0.5]], np.float32)),
            ("n.grad_output", "F32", np.array([[0.25, 1], [2, -1]], np.float32)),
            ("a.input", "F32", np.ones((2, 4), np.float32)),
            ("a.weight", "F32", np.ones((3, 5), np.float32)),
            ("a.grad_output", "F32", np.ones((2, 3), np.float32)),
            ("z.input", "F32", np.ones((2, 4), np.float32)),
            ("z.weight", "F32", np.ones((3, 4), np.float32))]
    write_st(os.path.join(d, "step_0.safetensors"), base, 0)
    write_st(os.path.join(d, "step_2.safetensors"), [(n, t, a * 2) for n, t, a in base], 2)
    with open(os.path.join(d, "amax.csv"), "w") as f:
        f.write("step,tensor,amax\n1,m.input,1000\n1,n.grad_output,0.5\n")


@test
def experiment_parse_block_kinds():
    d = tempfile.mkdtemp()
    try:
        ini = os.path.join(d, "e.ini")
        with open(ini, "w") as f:
            f.write(EXP_BLOCKS)
        e = R.parse_experiment(ini)
        assert [(c.label, c.kind, c.fmt) for c in e.configs] == [
            ("d", "delayed", "hybrid"), ("c", "current", "hybrid"), ("mx", "mxfp8", "e4m3"),
            ("mx", "mxfp8", "hybrid"), ("mxf", "mxfp8", "e4m3"), ("b", "block", "e4m3"),
            ("b2", "block", "e4m3"), ("r", "rowwise", "e4m3")]  # block kinds: TE's E4M3 default
        c = {cf.label: cf for cf in e.configs}
        assert c["mx"].rounding == "ceil" and c["mxf"].rounding == "floor"
        assert (c["b"].block, c["b"].pow2, c["b2"].block, c["b2"].pow2, c["r"].pow2) == (
            "auto", True, "1x128", False, True)
        assert all(cf.margin == 0 and cf.amax_epsilon == 0 for cf in e.configs)
        assert (e.gemm, e.gemm_max_tokens, e.overflow_budget) == (True, 0, 1e-4)
        assert c["b"].block_recipe().square("weight") and not c["b"].block_recipe().square("x")
        assert not c["b2"].block_recipe().square("weight")
        # defaults without [analysis]
        with open(ini, "w") as f:
            f.write(EXP_BLOCKS.split("[analysis]")[0])
        e = R.parse_experiment(ini)
        assert (e.gemm, e.gemm_max_tokens) == (True, 1024)
        for bad in ("scale_rounding = up", "scale_rounding = ceil, floor"):
            with open(ini, "w") as f:
                f.write("[recipe.x]\nkind = mxfp8\n%s\n" % bad)
            try:
                R.parse_experiment(ini)
                raise AssertionError("accepted " + bad)
            except ValueError:
                pass
        for bad in ("block = 2x128", "pow2 = true, false", "block = auto, 1x128"):
            with open(ini, "w") as f:
                f.write("[recipe.x]\nkind = block\n%s\n" % bad)
            try:
                R.parse_experiment(ini)
                raise AssertionError("accepted " + bad)
            except ValueError:
                pass
        for bad in ("gemm = maybe", "gemm_max_tokens = -1", "gemm_max_tokens = 1.5"):
            with open(ini, "w") as f:
                f.write("[analysis]\n%s\n" % bad)
            try:
                R.parse_experiment(ini)
                raise AssertionError("accepted " + bad)
            except ValueError:
                pass
    finally:
        shutil.rmtree(d)


def _block_setup(d, exp_text=EXP_BLOCKS):
    os.makedirs(os.path.join(d, "tr"))
    make_block_trace(os.path.join(d, "tr"))
    ini = os.path.join(d, "e.ini")
    with open(ini, "w") as f:
        f.write(exp_text)
    return ini


@test
def replay_block_rows_by_hand():
    d = tempfile.mkdtemp()
    try:
        ini = _block_setup(d)
        exp, tr = R.load_for(ini)
        rows, grows = R.replay_all(exp, tr)
        assert rows == R.replay(exp, tr)
        by = {(r["tensor"], r["step"], r["recipe"], r["format"]): r for r in rows}
        blk = ("nblocks", "blocks_with_overflow", "log2_scale_min", "log2_scale_max",
               "log2_scale_std")

        def b(name, step, rec, fmt):
            r = by[(name, step, rec, fmt)]
            assert r["scale"] == "" and r["history_len"] == r["margin"] == ""
            assert r["amax_compute"] == ""
            return tuple(r[c] for c in blk) + (r["overflow"],)
        # m.input step 0: row 0 amax 500 (0.5 at col 35), row 1 zero
        assert by[("m.input", 0, "mx", "e4m3")]["amax"] == 500
        # mxfp8 ceil: 500/448 -> 2 -> scale 2^-1; 0.5/448 -> 2^-9 -> scale 2^9; 4 blocks
        assert b("m.input", 0, "mx", "e4m3") == (4, 0, -1.0, 9.0, 5.0, 0)
        # floor: 2^(8-8) -> scale 1, 500 saturates; 2^(-1-8) -> scale 2^9
        assert b("m.input", 0, "mxf", "e4m3") == (4, 1, 0.0, 9.0, 4.5, 1)
        # block auto (input: 1x128) and rowwise: one block per row, pow2(448/500) = 0.5
        assert b("m.input", 0, "b", "e4m3") == (2, 0, -1.0, -1.0, 0.0, 0)
        assert b("m.input", 0, "r", "e4m3") == (2, 0, -1.0, -1.0, 0.0, 0)
        l2 = math.log2(float(F32(448.0) / F32(500.0)))
        got = b("m.input", 0, "b2", "e4m3")
        assert got[:2] == (2, 0) and got[2] == got[3] == l2 and got[4] == 0
        # weights: 128x128 under auto (one block), 1x128 rows under b2, rows under rowwise
        assert b("m.weight", 0, "b", "e4m3")[0] == 1 and b("m.weight", 0, "b2", "e4m3")[0] == 3
        assert b("m.weight", 0, "r", "e4m3")[0] == 3 and b("m.weight", 0, "mx", "e4m3")[0] == 6
        # hybrid: grad_output E5M2 under mx hybrid, E4M3 under mx e4m3
        assert ("m.grad_output", 0, "mx", "e5m2") in by and ("m.grad_output", 0, "mx", "e4m3") in by
        # statistics = quantize_stats with each element's block scale
        x = tr.snapshots[0]["m.input"]
        q = R.BlockRecipe("mxfp8", "e4m3", rounding="floor").quantize(x, "input")
        r = by[("m.input", 0, "mxf", "e4m3")]
        for c in R.STAT_FIELDS:
            assert r[c] == q[c], c
        # delayed and current rows: block columns empty, scale set
        for (name, step, rec, fmt), r in by.items():
            if rec in ("d", "c"):
                assert all(r[c] == "" for c in blk) and r["scale"] != ""
        # text
        buf = io.StringIO()
        R.write_csv(rows, buf)
        data = list(csv.reader(io.StringIO(buf.getvalue())))
        assert tuple(data[0]) == R.COLUMNS and len(R.COLUMNS) == 30
        i = [k for k, rr in enumerate(rows) if (rr["tensor"], rr["step"], rr["recipe"]) ==
             ("m.input", 0, "mxf")][0]
        # mxf (floor) on m.input step 0: the 500 block has scale 1 (500 -> 448, clipped:
        # 500 > 464), the 0.5 block scale 2^9 (256, exact), the zero blocks 0. overshoot: the
        # worst block, log2(500 / 448); cos_sim: x . xhat = 500 * 448 + 0.25 over the norms
        cos = (500.0 * 448 + 0.25) / (math.sqrt(500.0 ** 2 + 0.25) * math.sqrt(448.0 ** 2 + 0.25))
        assert data[i + 1][9:] == ["500", "", "80", "0", "78", "1", "0", "0"] + \
            data[i + 1][17:19] + ["4", "1", "0", "9", "4.5", "1",
                                  "%.9g" % math.log2(500.0 / 448), data[i + 1][26], "1", "", ""], \
            data[i + 1]
        assert abs(float(data[i + 1][26]) - cos) < 1e-9, (data[i + 1][26], cos)  # 9 digits
        assert abs(by[("m.input", 0, "mxf", "e4m3")]["cos_sim"] - cos) < 1e-15
        assert R.compare_rows(rows, data[1:], data[0]) == []
        j = [k for k, rr in enumerate(rows) if (rr["tensor"], rr["step"], rr["recipe"]) ==
             ("m.input", 0, "b2")][0]
        k = [k for k, rr in enumerate(rows) if rr["recipe"] == "c"][0]
        for row, col, val, ok in [
                (i, 19, "5", False),            # nblocks
                (i, 20, "0", False),            # blocks_with_overflow
                (i, 21, "1e-10", True),         # log2 min within 1e-9 absolute
                (i, 21, "3e-9", False),
                (i, 23, "nan", False),          # std
                (i, 10, "1", False),            # scale must stay empty
                (k, 19, "0", False),            # block columns empty for current rows
                (j, 21, "%.8g" % l2, False),    # 8 digits: beyond the 9-digit resolution
                (j, 22, "%.9g" % (l2 + 4e-10), True)]:
            bad = [list(rr) for rr in data[1:]]
            bad[row][col] = val
            msgs = R.compare_rows(rows, bad, data[0])
            assert (msgs == []) == ok, (row, col, val, msgs)
        # no block rows at steps without a snapshot; the delayed state ran through step 1
        assert {r["step"] for r in rows} == {0, 2}
        assert by[("m.input", 2, "d", "e4m3")]["scale"] == F32(448) / F32(1000)
    finally:
        shutil.rmtree(d)


@test
def sampled_gemm_reference():
    """The reference's sampled GEMM error (docs/semantics.md) against the definitions: the
    block's entries are the full output's, the whole output gives the exact error with a
    zero-width interval, the weighted (Hansen-Hurwitz) sums are unbiased over seeds, an outlier
    channel is drawn far more often than uniformly, and the seed ignores rank_<r>/."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((40, 24)).astype(np.float32)
    x[:, 3] *= 20                          # an outlier input channel: a heavy wgrad column
    w = (0.1 * rng.standard_normal((16, 24))).astype(np.float32)
    dy = rng.standard_normal((40, 16)).astype(np.float32)
    ops = {"input": x, "weight": w, "grad_output": dy}
    rec = R.TensorRecipe("e4m3", {r: R.F32(448) / R.F32(np.abs(ops[r]).max())
                                  for r in R.TRIPLET_ROLES})
    exact = R.gemm_errors(x, w, dy, rec)
    q = {r: rec.quantize(ops[r], r)["xhat"] for r in R.TRIPLET_ROLES}
    for g in R.GEMMS:
        (ra, _), (rb, _) = R.GEMM_OPERANDS[g]
        full = R._gemm(g, ops[ra], ops[rb], np.float64)
        s = R.GemmSample(g, ops, 6, 123)
        assert s.yref.shape == (6, 6)
        assert np.allclose(s.yref, full[np.ix_(s.rows, s.cols)], rtol=1e-12, atol=0)
        rel, lo, hi = s.error(q[ra], q[rb])
        assert 0 < lo < rel < hi, (g, lo, rel, hi)
        whole = R.GemmSample(g, ops, 1000, 1)
        rel, lo, hi = whole.error(q[ra], q[rb])
        assert lo == rel == hi and abs(rel - exact[g]) <= 1e-5 * exact[g], (g, rel, exact[g])
    # wgrad: output [16 (out), 24 (in)]; column 3 (the outlier channel) carries most of ||Y||
    full = R._gemm("wgrad", dy, x, np.float64)
    tot, hits, n = 0.0, 0, 2000
    for seed in range(n):
        s = R.GemmSample("wgrad", ops, 4, seed)
        tot += float(np.sum(np.outer(s.u, s.v) * s.yref ** 2)) / 16 * full.size
        hits += int(3 in s.cols)
    assert abs(tot / n - float(np.sum(full ** 2))) < 0.05 * float(np.sum(full ** 2))
    assert hits > 0.9 * n, hits            # uniformly: 1 - (23/24)^4 = 16% of the draws
    # a large operand's sizes: columns over every 2nd row, rows over every 3rd group of 32
    m = rng.standard_normal((767, 1537)).astype(np.float32)
    rows, cols = R._sq_sums(m)
    cs = np.zeros(1537, np.float32)
    lanes = np.zeros((767, 8), np.float32)
    for i in range(0, 767, 2):
        cs += m[i] * m[i]
    for j in range(1537):
        if (j // 32) % 3 == 0:
            lanes[:, j % 8] += m[:, j] * m[:, j]
    l_ = [lanes[:, k] for k in range(8)]
    assert np.array_equal(cols, cs.astype(np.float64))
    assert np.array_equal(rows, (((l_[0] + l_[1]) + (l_[2] + l_[3])) +
                                 ((l_[4] + l_[5]) + (l_[6] + l_[7]))).astype(np.float64))
    assert R.sample_seed(0, "rank_3/a.fc", 5, "fprop") == R.sample_seed(0, "a.fc", 5, "fprop")
    assert R.sample_seed(0, "a.fc", 5, "fprop") != R.sample_seed(0, "a.fc", 6, "fprop")


@test
def gemm_rows_by_hand():
    d = tempfile.mkdtemp()
    try:
        ini = _block_setup(d)
        exp, tr = R.load_for(ini)
        exp.gemm_error = "exact"     # the exact mode by hand (the sampled one: sampled_gemm_*)
        rows, grows = R.replay_all(exp, tr)
        keys = [(g["layer"], g["gemm"], g["step"], g["recipe"]) for g in grows]
        # steps, layers m and n (a: shapes disagree, z: no grad_output), gemms, configs
        labels = [c.label for c in exp.configs]
        want = [(L, g, t, lab) for t in (0, 2) for L in ("m", "n") for g in R.GEMMS
                for lab in labels]
        assert keys == want, keys[:10]
        G_ = {(g["layer"], g["gemm"], g["step"], g["recipe"], i % len(labels)): g
              for i, g in enumerate(grows)}
        assert G_[("n", "fprop", 0, "d", 0)]["history_len"] == 4
        assert G_[("n", "fprop", 0, "c", 1)]["history_len"] == ""
        # delayed step 0: scale 1, n's operands exact -> 0; m's input saturates at 448
        for g in R.GEMMS:
            assert G_[("n", g, 0, "d", 0)]["rel_error"] == 0
        assert G_[("m", "fprop", 0, "d", 0)]["rel_error"] > 0.01
        assert G_[("m", "dgrad", 0, "d", 0)]["rel_error"] > 0    # grad ~1e-4: E5M2 subnormals
        # every row = gemm_errors with the scales of the steps rows (delayed), own scales
        # (current), block recipes
        srow = {(r["tensor"], r["step"], r["recipe"], r["format"]): r for r in rows}
        for t in (0, 2):
            snap = tr.snapshots[t]
            for L in ("m", "n"):
                x, w, dy = (R.as_matrix(snap["%s.%s" % (L, r)]) for r in R.TRIPLET_ROLES)
                for ci, cfg in enumerate(exp.configs):
                    if cfg.kind in R.BLOCK_KINDS:
                        rec = R.BlockRecipe(cfg.kind, cfg.fmt, rounding=cfg.rounding,
                                            block=cfg.block, pow2=cfg.pow2)
                    else:
                        sc = {r: srow[("%s.%s" % (L, r), t, cfg.label,
                                       R.resolve_format(cfg.fmt, r))]["scale"]
                              for r in R.TRIPLET_ROLES}
                        rec = R.TensorRecipe(cfg.fmt, sc)
                    e = R.gemm_errors(x, w, dy, rec)
                    for g in R.GEMMS:
                        assert G_[(L, g, t, cfg.label, ci)]["rel_error"] == e[g], (L, g, t, ci)
        # sampling: gemm_max_tokens = 1 < tokens 2 -> row 0 only
        exp.gemm_max_tokens = 1
        _r, g1 = R.replay_all(exp, tr)
        x, w, dy = (R.as_matrix(tr.snapshots[2]["m.%s" % r]) for r in R.TRIPLET_ROLES)
        rec = exp.configs[-1].block_recipe()
        e = R.gemm_errors(x, w, dy, rec, 1)
        last = [g for g in g1 if (g["layer"], g["step"], g["recipe"]) == ("m", 2, "r")]
        assert [g["rel_error"] for g in last] == [e[g] for g in R.GEMMS]
        # text
        buf = io.StringIO()
        R.write_csv(grows, buf, R.GEMM_COLUMNS)
        lines = buf.getvalue().splitlines()
        assert lines[0] == "layer,gemm,step,recipe,kind,history_len,margin,amax_compute,rel_error"
        assert lines[1].startswith("m,fprop,0,d,delayed,4,0,max,") and \
            lines[2].startswith("m,fprop,0,c,current,,,,"), lines[:3]
        data = list(csv.reader(io.StringIO(buf.getvalue())))
        assert R.compare_gemm_rows(grows, data[1:], data[0]) == []
        i = 1 + [k for k, g in enumerate(grows) if g["rel_error"] > 0.01][0]
        v = float(data[i][8])
        for val, ok in [(repr(v * (1 + 5e-4)), True), (repr(v * (1 + 2e-3)), False),
                        ("inf", False), ("nan", False), ("NaN", False)]:
            bad = [list(rr) for rr in data[1:]]
            bad[i - 1][8] = val
            assert (R.compare_gemm_rows(grows, bad, data[0]) == []) == ok, (val, v)
        z = 1 + [k for k, g in enumerate(grows) if g["rel_error"] == 0][0]
        for val, ok in [("5e-8", True), ("3e-7", False)]:       # absolute floor 1e-7
            bad = [list(rr) for rr in data[1:]]
            bad[z - 1][8] = val
            assert (R.compare_gemm_rows(grows, bad, data[0]) == []) == ok, val
        bad = [list(rr) for rr in data[1:]]
        bad[0], bad[1] = bad[1], bad[0]
        assert any("order" in m for m in R.compare_gemm_rows(grows, bad, data[0]))
        assert any("missing" in m for m in R.compare_gemm_rows(grows, data[2:], data[0]))
        assert any("header" in m for m in R.compare_gemm_rows(grows, data[1:], data[0][:-1]))
        # the non-finite conventions of rel_error
        assert math.isnan(R.rel_error(np.array([np.nan]), np.array([1.0])))
        assert R.rel_error(np.array([1.0]), np.array([0.0])) == math.inf
    finally:
        shutil.rmtree(d)


@test
def gemm_csv_expected_or_absent():
    d = tempfile.mkdtemp()
    try:
        ini = _block_setup(d)
        steps = os.path.join(d, "steps.csv")
        gemm = os.path.join(d, "gemm.csv")
        assert R.main(["run", ini, steps, "--gemm", gemm]) == 0
        assert os.path.exists(gemm)
        assert R.main(["compare", ini, steps, "--gemm", gemm]) == 0
        assert R.main(["compare", ini, steps]) == 0                  # gemm.csv not checked
        assert R.main(["compare", ini, steps, "--no-gemm", gemm]) == 1
        with open(gemm) as f:
            lines = f.read().splitlines()
        cells = lines[5].split(",")
        cells[8] = repr(float(cells[8]) * 1.01 + 1e-6)
        lines[5] = ",".join(cells)
        with open(gemm, "w") as f:
            f.write("\n".join(lines) + "\n")
        assert R.main(["compare", ini, steps, "--gemm", gemm]) == 1
        os.remove(gemm)
        assert R.main(["compare", ini, steps, "--gemm", gemm]) == 1   # missing
        # gemm = false: none expected; an existing file is a mismatch
        for text in (EXP_BLOCKS.replace("gemm = true", "gemm = false"),
                     EXP_BLOCKS.replace("[trace]\n", "[trace]\ntensors = a.*, z.*, m.input\n")):
            with open(ini, "w") as f:
                f.write(text)
            exp, tr = R.load_for(ini)
            assert R.replay_all(exp, tr)[1] is None
            assert R.main(["run", ini, steps, "--gemm", gemm]) == 0
            assert not os.path.exists(gemm)
            assert R.main(["compare", ini, steps, "--gemm", gemm]) == 0
            assert R.main(["compare", ini, steps, "--no-gemm", gemm]) == 0
            with open(gemm, "w") as f:
                f.write(",".join(R.GEMM_COLUMNS) + "\n")
            assert R.main(["compare", ini, steps, "--gemm", gemm]) == 1
            assert R.main(["compare", ini, steps, "--no-gemm", gemm]) == 1
            os.remove(gemm)
    finally:
        shutil.rmtree(d)


@test
def generated_blocks_trace_end_to_end():
    d = tempfile.mkdtemp()
    try:
        for seed, extra in ((3, []), (4, ["--select"])):
            tdir = os.path.join(d, "tr%d" % seed)
            ini = os.path.join(d, "e%d.ini" % seed)
            G.main([tdir, "--seed", str(seed), "--ini", ini, "--blocks"] + extra)
            exp, tr = R.load_for(ini)
            kinds = [c.kind for c in exp.configs]
            assert kinds.count("mxfp8") == 2 and kinds.count("block") == 3
            assert kinds.count("rowwise") == 2 and exp.gemm_max_tokens == 48
            eps = [float(c.amax_epsilon) for c in exp.configs if c.kind in ("block", "rowwise")]
            assert eps == [0.0, 0.0, float(R.F32(1e-30)), 0.0, float(R.F32(1e-12))], eps
            rows, grows = R.replay_all(exp, tr)
            assert grows, "no gemm rows"
            layers = {g["layer"] for g in grows}
            assert layers == ({"gemm0"} if extra else {"gemm0", "gemm1"}), layers
            snaps = sorted(tr.snapshots)
            for L in layers:
                st = {g["step"] for g in grows if g["layer"] == L}
                assert 0 < len(st) < len(snaps) or (extra and len(st) >= 1), (L, st, snaps)
            shp = {n: a.shape for s in tr.snapshots.values() for n, a in s.items()}
            assert shp["gemm0.input"] == (70, 150)
            if not extra:
                assert shp["gemm1.input"] == (2, 20, 72)
            assert all(math.isfinite(g["rel_error"]) and 0 < g["rel_error"] < 1 for g in grows)
            # block rows exercise partial blocks and overflow (floor rounding)
            mxf = [r for r in rows if r["recipe"] == "mxf" and r["tensor"] == "gemm0.weight"]
            assert mxf and all(r["nblocks"] == 130 * 5 for r in mxf)
            assert any(r["blocks_with_overflow"] > 0 for r in rows if r["recipe"] == "mxf")
            if not extra:     # text round trip in memory (each replay takes seconds)
                gcols = R.GEMM_SAMPLED_COLUMNS if "rel_error_lo" in grows[0] else R.GEMM_COLUMNS
                for rr, cols, cmp in ((rows, R.COLUMNS, R.compare_rows),
                                      (grows, gcols, R.compare_gemm_rows)):
                    buf = io.StringIO()
                    R.write_csv(rr, buf, cols)
                    data = list(csv.reader(io.StringIO(buf.getvalue())))
                    assert cmp(rr, data[1:], data[0]) == []
                    assert cmp(rr, data[1:-1], data[0]) != []
                continue
            out = os.path.join(d, "steps%d.csv" % seed)
            gout = os.path.join(d, "gemm%d.csv" % seed)
            assert R.main(["run", ini, out, "--gemm", gout]) == 0
            assert R.main(["compare", ini, out, "--gemm", gout]) == 0
            with open(gout) as f:
                lines = f.read().splitlines()
            lines = lines[:-1]
            with open(gout, "w") as f:
                f.write("\n".join(lines) + "\n")
            assert R.main(["compare", ini, out, "--gemm", gout]) == 1
        # deterministic, and --blocks leaves the trace without it alone
        G.generate(os.path.join(d, "a"), 5, blocks=True)
        G.generate(os.path.join(d, "b"), 5, blocks=True)
        for fn in os.listdir(os.path.join(d, "a")):
            with open(os.path.join(d, "a", fn), "rb") as f1, \
                    open(os.path.join(d, "b", fn), "rb") as f2:
                assert f1.read() == f2.read(), fn
    finally:
        shutil.rmtree(d)


if __name__ == "__main__":
    sys.exit(main())
