#!/usr/bin/env python3
"""Self-test of the Python reference (tools/reference/fp8ref.py, gen_trace.py): safetensors,
experiment files, a small replay, stream.csv and summary.csv worked out by hand, generated
traces end to end, the generator's determinism.

Run: python3 tests/tools/reference/test_ref_replay.py (needs numpy and ml_dtypes: without them
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


@test
def safetensors_roundtrip_unaligned():
    d = tempfile.mkdtemp()
    try:
        a = np.array([[1.5, -2.25, np.inf], [np.nan, 0.0, 3e-41]], np.float32)
        b = np.array([1.0, 1.00390625, 3.0e38], np.float32)     # bf16: 1.00390625 -> 1.0
        c = np.array([65504.0, 1e-7, -0.5], np.float32)
        for pad in range(8):
            p = os.path.join(d, "step_%d.safetensors" % pad)
            write_st(p, [("m.x.input", "F32", a), ("m.x.weight", "BF16", b),
                         ("m.y.grad_input", "F16", c), ("m.z.output", "F32",
                                                        np.zeros((3, 0), np.float32))], pad)
            with open(p, "rb") as f:
                hlen = int.from_bytes(f.read(8), "little")
            t = R.read_safetensors(p)
            assert np.array_equal(t["m.x.input"], a, equal_nan=True)
            assert t["m.x.input"].shape == (2, 3)
            assert list(t["m.x.weight"]) == [1.0, 1.0, float(F32(3.0e38).astype(
                __import__("ml_dtypes").bfloat16).astype(np.float32))]
            assert list(t["m.y.grad_input"]) == [65504.0, float(np.float16(1e-7)), -0.5]
            assert t["m.z.output"].shape == (3, 0)
        assert len({(8 + hlen) % 4 for hlen in [0]}) == 1
        # the data start takes several alignments across the pads
        starts = set()
        for pad in range(8):
            with open(os.path.join(d, "step_%d.safetensors" % pad), "rb") as f:
                starts.add((8 + int.from_bytes(f.read(8), "little")) % 4)
        assert starts == {0, 1, 2, 3}, starts
    finally:
        shutil.rmtree(d)


def make_small_trace(d):
    """step 0: a.input = [1, -2], b.grad_output = [0.5]; step 2 (npy): a.input = [8, 0.25];
    amax.csv: step 1 a.input 4, step 1 b.grad_output 0 (skipped), step 2 a.input 999 (the
    snapshot wins), step 3 c.weight 7 (csv only), step 4 b.grad_output 2; steps 5-6 snapshot
    of b.grad_output only (step 6 is outside the selection in one test)."""
    write_st(os.path.join(d, "step_0.safetensors"),
             [("a.input", "F32", np.array([1.0, -2.0], np.float32)),
              ("b.grad_output", "BF16", np.array([0.5], np.float32))], 3)
    os.makedirs(os.path.join(d, "step_2"))
    np.save(os.path.join(d, "step_2", "a.input.npy"), np.array([8.0, 0.25], "<f4"))
    write_st(os.path.join(d, "step_5.safetensors"),
             [("b.grad_output", "F16", np.array([-3.0, 1.0], np.float32))], 1)
    write_st(os.path.join(d, "step_6.safetensors"),
             [("b.grad_output", "F16", np.array([1.0], np.float32))], 0)
    with open(os.path.join(d, "amax.csv"), "w") as f:
        f.write("step,tensor,amax\n1,a.input,4\n1,b.grad_output,0\n2,a.input,999\n"
                "3,c.weight,7\n4,b.grad_output,2\n")


EXP_SMALL = """[trace]
path = tr   ; relative to this file
steps = 0-5
tensors = a.*, b.*    # c.weight is not selected

[recipe.d]
kind = delayed
format = hybrid, e4m3
history_len = 2, 1
margin = 0
amax_compute = max

[recipe.c]
kind = current
format = hybrid
pow2 = true
"""


@test
def experiment_parse_and_order():
    d = tempfile.mkdtemp()
    try:
        ini = os.path.join(d, "e.ini")
        with open(ini, "w") as f:
            f.write(EXP_SMALL.replace("steps = 0-5", "steps = 0-9:3"))
        e = R.parse_experiment(ini)
        assert e.trace_path == os.path.join(d, "tr")
        assert [(c.label, c.kind, c.fmt, c.history_len) for c in e.configs] == [
            ("d", "delayed", "hybrid", 2), ("d", "delayed", "hybrid", 1),
            ("d", "delayed", "e4m3", 2), ("d", "delayed", "e4m3", 1),
            ("c", "current", "hybrid", None)]
        assert e.configs[4].pow2 is True
        assert [t for t in range(12) if e.steps(t)] == [0, 3, 6, 9]
        assert e.tensors("a.input") and e.tensors("b.x") and not e.tensors("c.weight")
        assert [t for t in range(12) if R.StepSel("4")(t)] == [4]
        assert R.resolve_format("hybrid", "grad_input") == "e5m2"
        assert R.resolve_format("hybrid", "weight") == "e4m3"
        assert R.resolve_format("e5m2", "weight") == "e5m2"
    finally:
        shutil.rmtree(d)


@test
def replay_small_by_hand():
    d = tempfile.mkdtemp()
    try:
        os.makedirs(os.path.join(d, "tr"))
        make_small_trace(os.path.join(d, "tr"))
        ini = os.path.join(d, "e.ini")
        with open(ini, "w") as f:
            f.write(EXP_SMALL)
        exp, tr = R.load_for(ini)
        assert sorted(tr.snapshots) == [0, 2, 5]
        rows = R.replay(exp, tr)
        got = [(r["tensor"], r["step"], r["recipe"], r["format"], r["history_len"],
                float(r["amax"]), float(r["scale"])) for r in rows]
        want = [
            # step 0: everything at scale 1; current = pow2(448/2)=128, pow2(57344/.5)=2^16
            ("a.input", 0, "d", "e4m3", 2, 2.0, 1.0), ("a.input", 0, "d", "e4m3", 1, 2.0, 1.0),
            ("a.input", 0, "d", "e4m3", 2, 2.0, 1.0), ("a.input", 0, "d", "e4m3", 1, 2.0, 1.0),
            ("a.input", 0, "c", "e4m3", "", 2.0, 128.0),
            ("b.grad_output", 0, "d", "e5m2", 2, 0.5, 1.0),
            ("b.grad_output", 0, "d", "e5m2", 1, 0.5, 1.0),
            ("b.grad_output", 0, "d", "e4m3", 2, 0.5, 1.0),
            ("b.grad_output", 0, "d", "e4m3", 1, 0.5, 1.0),
            ("b.grad_output", 0, "c", "e5m2", "", 0.5, 65536.0),
            # step 1 (csv a=4) and step 2: a.input amax 8 from the snapshot, not 999;
            # L=2 window (2,4) -> 112; L=1 -> 448/4
            ("a.input", 2, "d", "e4m3", 2, 8.0, 112.0), ("a.input", 2, "d", "e4m3", 1, 8.0, 112.0),
            ("a.input", 2, "d", "e4m3", 2, 8.0, 112.0), ("a.input", 2, "d", "e4m3", 1, 8.0, 112.0),
            ("a.input", 2, "c", "e4m3", "", 8.0, 32.0),
            # step 5: b.grad_output saw 0.5 (step 0), 0 (step 1, kept), 2 (step 4)
            # e5m2 L=2: max(0.5, 2) = 2 -> 28672; L=1 -> 28672; e4m3: 224
            ("b.grad_output", 5, "d", "e5m2", 2, 3.0, 28672.0),
            ("b.grad_output", 5, "d", "e5m2", 1, 3.0, 28672.0),
            ("b.grad_output", 5, "d", "e4m3", 2, 3.0, 224.0),
            ("b.grad_output", 5, "d", "e4m3", 1, 3.0, 224.0),
            ("b.grad_output", 5, "c", "e5m2", "", 3.0, 16384.0),
        ]
        assert got == want, "\n".join(map(str, got))
        r = rows[0]
        assert (r["n"], r["overflow"], r["mse"], r["snr_db"]) == (2, 0, 0.0, math.inf)
        assert rows[5]["role"] == "grad_output" and rows[4]["history_len"] == ""
        # text form, then compare accepts it and rejects perturbations
        buf = io.StringIO()
        R.write_csv(rows, buf)
        lines = buf.getvalue().splitlines()
        assert lines[0] == ",".join(R.COLUMNS)
        # ... clipped 0, overshoot log2(2 * 128 / 448) = log2(4/7), cos_sim 1 (exact),
        # warm-up (step 0: nothing has been fed to the delayed update yet)
        assert lines[5] == ("a.input,input,0,c,current,e4m3,,,,2,128,2,0,0,0,0,0,0,inf,,,,,,"
                            "0,-0.807354922,1,1,,"), lines[5]
        data = list(csv.reader(io.StringIO(buf.getvalue())))
        assert R.compare_rows(rows, data[1:], data[0]) == []
        bad = [list(r) for r in data[1:]]
        bad[3][10] = "112.000008"                       # scale one ulp off
        assert any("scale" in m for m in R.compare_rows(rows, bad, data[0]))
        bad = [list(r) for r in data[1:]]
        bad[3][17] = "1e-31"                             # mse 0 vs 1e-31: within the floor
        assert R.compare_rows(rows, bad, data[0]) == []
        bad[3][17] = "1e-29"
        assert any("mse" in m for m in R.compare_rows(rows, bad, data[0]))
        bad = [list(r) for r in data[1:]]
        bad[0], bad[1] = bad[1], bad[0]                 # order
        assert any("order" in m for m in R.compare_rows(rows, bad, data[0]))
        bad = [list(r) for r in data[1:]][:-1]          # missing row
        assert any("missing" in m for m in R.compare_rows(rows, bad, data[0]))
        bad = [list(r) for r in data[1:]]
        bad[0][18] = "Infinity"                          # spelling of inf
        assert any("written as" in m for m in R.compare_rows(rows, bad, data[0]))
        bad = [list(r) for r in data[1:]]
        bad[7][12] = "1"                                 # nonfinite count
        assert any("nonfinite" in m for m in R.compare_rows(rows, bad, data[0]))
    finally:
        shutil.rmtree(d)


@test
def stream_summary_warmup_by_hand():
    """stream.csv, the warmup column and summary.csv of the small trace (make_small_trace,
    EXP_SMALL): replay steps 0, 1, 2, 4, 5 (step 3 only has the unselected c.weight, step 6 is
    outside steps = 0-5), tensors a.input and b.grad_output, four delayed configurations."""
    d = tempfile.mkdtemp()
    try:
        os.makedirs(os.path.join(d, "tr"))
        make_small_trace(os.path.join(d, "tr"))
        ini = os.path.join(d, "e.ini")
        with open(ini, "w") as f:
            f.write(EXP_SMALL)
        exp, tr = R.load_for(ini)
        full = R.replay_full(exp, tr)
        st = full["stream"]
        assert len(st) == 5 * 2 * 4
        assert [r["step"] for r in st[::8]] == [0, 1, 2, 4, 5]
        assert [(r["tensor"], r["format"], r["history_len"]) for r in st[:8]] == [
            ("a.input", "e4m3", 2), ("a.input", "e4m3", 1), ("a.input", "e4m3", 2),
            ("a.input", "e4m3", 1), ("b.grad_output", "e5m2", 2), ("b.grad_output", "e5m2", 1),
            ("b.grad_output", "e4m3", 2), ("b.grad_output", "e4m3", 1)]
        # (step, snapshot, amax, scale, warmup) of a.input L=2 and b.grad_output e5m2 L=2:
        # a.input fed 2 at step 0 (warm-up ends after it), 4 (csv) at 1, 8 (snapshot, not
        # the csv's 999) at 2, then nothing: scales 1, 448/2, 448/4, 448/8, 448/8
        a = [(r["step"], r["snapshot"], float(r["amax"]), float(r["scale"]), r["warmup"])
             for r in st if r["tensor"] == "a.input" and r["history_len"] == 2][::2]
        assert a == [(0, 1, 2.0, 1.0, 1), (1, 0, 4.0, 224.0, 0), (2, 1, 8.0, 112.0, 0),
                     (4, 0, 0.0, 56.0, 0), (5, 0, 0.0, 56.0, 0)], a
        b = [(r["step"], r["snapshot"], float(r["amax"]), float(r["scale"]), r["warmup"])
             for r in st if r["tensor"] == "b.grad_output" and r["history_len"] == 2 and
             r["format"] == "e5m2"]
        assert b == [(0, 1, 0.5, 1.0, 1), (1, 0, 0.0, 114688.0, 0), (2, 0, 0.0, 114688.0, 0),
                     (4, 0, 2.0, 114688.0, 0), (5, 1, 3.0, 28672.0, 0)], b
        ov = {(r["tensor"], r["step"], r["history_len"], r["format"]): r["overshoot"] for r in st}
        assert ov[("a.input", 4, 2, "e4m3")] == -math.inf
        assert ov[("b.grad_output", 4, 2, "e5m2")] == math.log2(2 * 114688.0 / 57344)  # 2
        assert ov[("a.input", 2, 2, "e4m3")] == math.log2(8 * 112.0 / 448)          # 1
        # steps.csv rows carry the same warm-up flag for every configuration
        w = {(r["tensor"], r["step"]) for r in full["steps"] if r["warmup"]}
        assert w == {("a.input", 0), ("b.grad_output", 0)}, w
        # summary: a.input under d e4m3 L=2: rows at steps 0 and 2, scales 1 and 112
        sm = [r for r in full["summary"] if r["tensor"] == "a.input"]
        assert len(sm) == 5 and [r["steps"] for r in sm] == [2] * 5
        r = sm[0]
        assert (float(r["amax_max"]), float(r["scale_inv_min"]), float(r["scale_inv_max"])) == (
            8.0, float(F32(1) / F32(112)), 1.0)
        # step 2: 8 * 112 = 896 saturates (clipped: > 464) to 448, xhat 4; 0.25 * 112 = 28
        cos = (8 * 4 + 0.25 * 0.25) / (math.sqrt(64 + 0.0625) * math.sqrt(16 + 0.0625))
        assert r["overshoot_max"] == 1.0 and (r["clipped"], r["steps_with_clipped"]) == (1, 1)
        assert abs(r["cos_sim_min"] - cos) < 1e-15, (r["cos_sim_min"], cos)
        # current (pow2): scales 128 (448/2 -> 224 -> 128) and 32 (448/8 = 56 -> 32)
        assert sm[4]["recipe"] == "c" and (sm[4]["scale_inv_min"], sm[4]["scale_inv_max"]) == (
            1 / 128, 1 / 32)
        # text round trip through compare, and perturbations caught
        for rows, cols, cmp in ((st, R.STREAM_COLUMNS, R.compare_stream_rows),
                                (full["summary"], R.SUMMARY_COLUMNS, R.compare_summary_rows)):
            buf = io.StringIO()
            R.write_csv(rows, buf, cols)
            data = list(csv.reader(io.StringIO(buf.getvalue())))
            assert tuple(data[0]) == cols
            assert cmp(rows, data[1:], data[0]) == [], cmp(rows, data[1:], data[0])
            for col in ("scale", "warmup") if cols == R.STREAM_COLUMNS else ("scale_inv_min",
                                                                             "clipped"):
                bad = [list(x) for x in data[1:]]
                k = cols.index(col)
                bad[2][k] = "1" if bad[2][k] != "1" else "0"
                assert any(col in m for m in cmp(rows, bad, data[0])), col
            assert any("row set" in m for m in cmp(rows, data[2:], data[0]))
        # [analysis] warmup_steps = 3: the first three replay steps (0, 1, 2) for every tensor
        with open(ini, "w") as f:
            f.write(EXP_SMALL + "\n[analysis]\nwarmup_steps = 3\n")
        exp, tr = R.load_for(ini)
        full = R.replay_full(exp, tr)
        assert {r["step"] for r in full["stream"] if r["warmup"]} == {0, 1, 2}
        assert {r["step"] for r in full["steps"] if r["warmup"]} == {0, 2}
        assert all(r["warmup"] == 0 for r in full["steps"] if r["step"] == 5)
        # no delayed configuration: no stream.csv expected
        with open(ini, "w") as f:
            f.write(EXP_SMALL.split("[recipe.d]")[0] + "[recipe.c]\nkind = current\n")
        exp, tr = R.load_for(ini)
        assert R.replay_full(exp, tr)["stream"] is None
    finally:
        shutil.rmtree(d)


@test
def generated_trace_end_to_end():
    d = tempfile.mkdtemp()
    aligns = set()
    try:
        for seed in (1, 2):
            tdir = os.path.join(d, "tr%d" % seed)
            ini = os.path.join(d, "e%d.ini" % seed)
            # seed 1: npy snapshots; seed 2: safetensors (a trace is one or the other)
            G.main([tdir, "--seed", str(seed), "--ini", ini] + (["--npy"] if seed == 1 else []))
            exp, tr = R.load_for(ini)
            assert len(exp.configs) == 4 * 3 * 2 + 1 + 1 + 1
            steps = sorted(tr.snapshots)
            assert len(steps) >= 5
            names = set().union(*[set(s) for s in tr.snapshots.values()])
            assert {"edge.empty.weight", "edge.one.grad_output"} <= names
            assert any(n.startswith("ghost") for (_t, n) in tr.csv)
            rows = R.replay(exp, tr)
            out = os.path.join(d, "steps%d.csv" % seed)
            assert R.main(["run", ini, out]) == 0
            assert R.main(["compare", ini, out]) == 0
            n, msgs = R.compare_file(ini, out)
            assert msgs == [] and n == len(rows)
            keys = [(r["step"], r["tensor"]) for r in rows]
            assert keys == sorted(keys)
            # the dtypes and the unaligned data starts the C reader must cope with
            for fn in os.listdir(tdir):
                if fn.endswith(".safetensors"):
                    with open(os.path.join(tdir, fn), "rb") as f:
                        aligns.add((8 + int.from_bytes(f.read(8), "little")) % 4)
            with open(out) as f:
                lines = f.read().splitlines()
            cells = lines[len(lines) // 2].split(",")
            cells[10] = R.fmt_g(np.nextafter(R.parse_f32(cells[10]), F32(0)))
            lines[len(lines) // 2] = ",".join(cells)
            with open(out, "w") as f:
                f.write("\n".join(lines) + "\n")
            assert R.main(["compare", ini, out]) == 1
        assert aligns == {0, 1, 2, 3} or len(aligns) > 1, aligns
    finally:
        shutil.rmtree(d)


@test
def generator_is_deterministic():
    d = tempfile.mkdtemp()
    try:
        G.generate(os.path.join(d, "a"), 5)
        G.generate(os.path.join(d, "b"), 5)
        fa = sorted(os.listdir(os.path.join(d, "a")))
        assert fa == sorted(os.listdir(os.path.join(d, "b")))
        for fn in fa:
            with open(os.path.join(d, "a", fn), "rb") as f1, open(os.path.join(d, "b", fn), "rb") as f2:
                assert f1.read() == f2.read(), fn
    finally:
        shutil.rmtree(d)


if __name__ == "__main__":
    sys.exit(main())
