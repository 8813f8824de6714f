#!/usr/bin/env python3
"""stream.csv on a trace with a dense amax stream, against counts worked out here.

The trace (built below, `design()`): 300 steps, amax.csv rows at (nearly) every step, full
snapshots only every 50 steps (0, 50, ..., 250), three tensors whose amax sequences have
designed events: a slow decay, a slow rise, spikes of 1.03x, 1.05x, 1.5x, 2x, 3x, 5x and 10x,
decays after the big spikes, steps where the module did not run (no row, or an explicit 0),
and an infinite amax before the first finite one. For seven delayed configurations
(history_len 1, 16, 1024 x margin 0, 1 with amax_compute max; 1024 / 0 / most_recent) the test
knows, per tensor and configuration, at which steps the largest element overflows
(RN32(amax * scale) > fp8_max in float32) and clips (RN32(amax * scale) > 464 for E4M3,
>= 61440 for E5M2), worked out twice:

  1. by hand, in the comments and the EXPECTED table of this file (the ratios of each event
     to the history's maximum, with margins of at least 1e-3 against float32 rounding, 1e-7);
  2. by a straightforward re-implementation of TransformerEngine's recurrence (RECIPES.md
     "Delayed scaling": L history slots, roll, max, scale = RN32(RN32(fp8_max 2^-m) / amax),
     a zero amax keeps the state), `te_delayed()`, written for this test from RECIPES.md alone
     (neither fp8lab's C nor tools/reference/fp8ref.py is used for it).

Then `fp8lab run` must write a stream.csv with exactly one row per (replay step, tensor,
delayed configuration) of the union of snapshot and amax.csv steps, in step / tensor /
configuration order, whose scale column is the recurrence's scale bit for bit and whose
amax column is the designed amax, and from whose rows the overflow steps, the clipped steps
and the largest overshoot per (tensor, configuration) are exactly those of (1) and (2). At
snapshot steps steps.csv must agree (overflow > 0 and clipped > 0 exactly when the largest
element overflowed or clipped). The warm-up column: by default exactly the steps up to and
including a tensor's first step with a finite non-zero amax; with [analysis] warmup_steps = 3
the first three steps of the replay for every tensor. analysis.csv's stream columns
(stream_steps, stream_overflow_steps, stream_clipped_steps, overshoot_p50, overshoot_p95,
stream_overshoot_max, clip_step_rate; counted over the non-warm-up stream steps at which the
tensor ran, amax > 0) must equal the same recomputation. Without a delayed configuration there is no stream.csv. Finally the
independent Python reference (fp8ref.py compare) must accept steps.csv, stream.csv and
summary.csv of the run.

Usage: test_stream.py FP8LAB_BIN    (exit 77 = skipped: numpy or ml_dtypes missing; exit 1
instead when FP8LAB_REQUIRE_PYDEPS=1 is set, as .ci/run does)
FP8LAB_KEEP_TMP=DIR keeps the trace and the outputs under DIR.
"""
import csv
import math
import os
import shutil
import subprocess
import sys
import tempfile
import traceback

from stream_design import (  # noqa: E402
    A, B, C, CONFIGS, C_TIE, EXPECTED, EXPECTED_OVERSHOOT_MAX, EXPERIMENT, F32, FMT, NSTEPS,
    REF, SNAP_STEPS, TENSORS, WARMUP_DEFAULT, design, flags, gen_trace, np, quantile,
    recompute, snapshot_tensor, write_trace)


# ------------------------------------------------------------------------------------------
# checks
# ------------------------------------------------------------------------------------------


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.returncode, p.stdout


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def f32_text(t):
    return F32(float(t))        # "%.9g" of a float32 reads back exactly


def close9(a, b):
    """Equal up to "%.9g" printing: one unit of the 9th significant digit (inf == inf)."""
    if math.isinf(a) or math.isinf(b) or math.isnan(a) or math.isnan(b):
        return a == b or (math.isnan(a) and math.isnan(b))
    m = max(abs(a), abs(b))
    return abs(a - b) <= (10.0 ** (math.floor(math.log10(m)) - 8) if m > 0 else 0.0) + 1e-300


def check_stream(out, amax, rec, warm):
    """stream.csv against the design and the recomputation; warm: {tensor: warm-up steps}.
    -> {(tensor, L, m, ac): rows of that series} for later checks."""
    rows = read_csv(os.path.join(out, "stream.csv"))
    with open(os.path.join(out, "stream.csv")) as f:
        header = f.readline().strip()
    assert header == ("tensor,role,step,recipe,format,history_len,margin,amax_compute,"
                      "snapshot,amax,scale,overshoot,warmup,micro,te_scale"), header
    # one row per (step of the union, tensor, delayed configuration), in that order; the
    # current configuration has none
    want_keys = [(str(t), n, lab, FMT[n], str(L), str(m), ac)
                 for t in range(NSTEPS) for n in TENSORS for lab, L, m, ac in CONFIGS]
    got_keys = [(r["step"], r["tensor"], r["recipe"], r["format"], r["history_len"],
                 r["margin"], r["amax_compute"]) for r in rows]
    assert len(got_keys) == NSTEPS * len(TENSORS) * len(CONFIGS), len(got_keys)
    assert got_keys == want_keys, next((i, g, w) for i, (g, w) in
                                       enumerate(zip(got_keys, want_keys)) if g != w)
    series = {}
    for r in rows:
        n, t = r["tensor"], int(r["step"])
        key = (n, int(r["history_len"]), int(r["margin"]), r["amax_compute"])
        series.setdefault(key, []).append(r)
        want_role = n.rsplit(".", 1)[1]
        snap = 1 if (t in SNAP_STEPS and amax[n][t] != 0) else 0
        assert r["role"] == want_role and int(r["snapshot"]) == snap, r
        a = f32_text(r["amax"])
        assert a.tobytes() == amax[n][t].tobytes(), (r, amax[n][t])
        s = f32_text(r["scale"])
        want_s = rec[key]["scales"][t]
        assert s.tobytes() == want_s.tobytes(), ("scale", r, float(want_s))
        assert close9(float(r["overshoot"]), rec[key]["ov"][t]), (r, rec[key]["ov"][t])
        assert int(r["warmup"]) == (1 if t in warm[n] else 0), (r, sorted(warm[n]))
    # the counts, from stream.csv's own columns
    for key, rs in series.items():
        n = key[0]
        ovf = {int(r["step"]) for r in rs if flags(f32_text(r["amax"]), f32_text(r["scale"]),
                                                   FMT[n])[0]}
        clip = {int(r["step"]) for r in rs if flags(f32_text(r["amax"]), f32_text(r["scale"]),
                                                    FMT[n])[1]}
        ovmax = max(float(r["overshoot"]) for r in rs)
        r_ovf = {t for t in range(NSTEPS) if rec[key]["ovf"][t]}
        r_clip = {t for t in range(NSTEPS) if rec[key]["clip"][t]}
        e_ovf, e_clip = EXPECTED[key]
        assert r_ovf == e_ovf, ("recurrence vs hand: overflow", key, sorted(r_ovf ^ e_ovf))
        assert r_clip == e_clip, ("recurrence vs hand: clipped", key, sorted(r_clip ^ e_clip))
        assert ovf == e_ovf, ("stream.csv: overflow", key, sorted(ovf ^ e_ovf))
        assert clip == e_clip, ("stream.csv: clipped", key, sorted(clip ^ e_clip))
        assert close9(ovmax, max(rec[key]["ov"])), (key, ovmax, max(rec[key]["ov"]))
        if n == C:
            assert ovmax == math.inf
        else:
            assert abs(ovmax - EXPECTED_OVERSHOOT_MAX[key]) < 1e-6, (
                key, ovmax, EXPECTED_OVERSHOOT_MAX[key])
    return series


def check_steps(out, amax, rec, warm):
    """steps.csv at the snapshot steps: overflow > 0 / clipped > 0 exactly when the largest
    element overflowed / clipped (RN32(x s) is monotone in |x|); amax, scale and the warm-up
    flag as in the stream."""
    rows = read_csv(os.path.join(out, "steps.csv"))
    seen = set()
    for r in rows:
        n, t = r["tensor"], int(r["step"])
        assert t in SNAP_STEPS and amax[n][t] != 0, r
        assert int(r["warmup"]) == (1 if t in warm[n] else 0), r
        if r["kind"] != "delayed":
            continue
        key = (n, int(r["history_len"]), int(r["margin"]), r["amax_compute"])
        seen.add((key, t))
        assert f32_text(r["scale"]).tobytes() == rec[key]["scales"][t].tobytes(), r
        assert f32_text(r["amax"]).tobytes() == amax[n][t].tobytes(), r
        assert (int(r["overflow"]) > 0) == rec[key]["ovf"][t], r
        assert (int(r["clipped"]) > 0) == rec[key]["clip"][t], r
        assert close9(float(r["overshoot"]), rec[key]["ov"][t]), r
    want = {((n, L, m, ac), t) for n in TENSORS for _l, L, m, ac in CONFIGS for t in SNAP_STEPS
            if amax[n][t] != 0}
    assert seen == want, sorted(seen ^ want)[:5]
    # the events at snapshot steps are there: A's 5x spike at 150, B's 10x spike at 200
    by = {(r["tensor"], r["step"], r["recipe"], r["history_len"], r["margin"]): r
          for r in rows if r["kind"] == "delayed"}
    assert int(by[(A, "150", "d", "1", "0")]["clipped"]) > 0
    assert int(by[(B, "200", "d", "1024", "1")]["clipped"]) > 0
    # 200 is the rise's first step: under L=1 the largest element overflows by a hair (r =
    # 1.005) without clipping; under L=16 the window still holds a larger amax (r = 0.990)
    r200 = by[(A, "200", "d", "1", "0")]
    assert int(r200["overflow"]) > 0 and int(r200["clipped"]) == 0, r200
    assert int(by[(A, "200", "d", "16", "0")]["overflow"]) == 0
    # C at 100: the amax element lands on 464 exactly, overflows and does not clip
    r100 = by[(C, "100", "d", "1", "0")]
    assert f32_text(r100["scale"]) == F32(896) and float(F32(C_TIE * F32(896))) == 464.0
    assert int(r100["overflow"]) == 2 and int(r100["clipped"]) == 0, r100   # +-C_TIE
    return rows


def check_analysis(out, amax, rec, warm):
    """analysis.csv's stream columns of every (tensor, delayed configuration) with steps.csv
    rows, over the non-warm-up stream steps at which the tensor ran (amax > 0; docs/outputs.md):
    stream_steps, stream_overflow_steps, stream_clipped_steps, overshoot_p50 / _p95 /
    stream_overshoot_max, clip_step_rate = stream_clipped_steps / stream_steps; warmup_steps
    counts the group's warm-up rows of steps.csv. Current scaling: the stream columns empty.
    By hand, default warm-up: A 300 - 4 warm-up - 2 zero (120, 121) = 294 steps, B 300 - 1 -
    5 (100-104) = 294, C 300 - 7 = 293; warmup_steps = 3: 297 - 2 = 295, 297 - 5 = 292,
    297 - 2 (C's zeros at 3, 4) = 295, and C's step 5 counts then: its inf is an overflowed
    and clipped step, and the overshoot maximum is inf."""
    path = os.path.join(out, "analysis.csv")
    with open(path) as f:
        header = f.readline().strip().split(",")
    need = ("warmup_steps", "stream_steps", "stream_overflow_steps", "stream_clipped_steps",
            "overshoot_p50", "overshoot_p95", "stream_overshoot_max", "clip_step_rate")
    if not all(c in header for c in need):
        return "analysis.csv has no stream columns (not checked)"
    rows = read_csv(path)
    n_checked = 0
    for r in rows:
        n = r["tensor"]
        if r["kind"] != "delayed":
            assert all(r[c] == "" for c in need[1:-1]), r
            continue
        key = (n, int(r["history_len"]), int(r["margin"]), r["amax_compute"])
        steps = [t for t in range(NSTEPS) if t not in warm[n] and amax[n][t] > 0]
        ovf = sum(rec[key]["ovf"][t] for t in steps)
        clip = sum(rec[key]["clip"][t] for t in steps)
        ov = sorted(rec[key]["ov"][t] for t in steps)
        want_steps = {(A, True): 294, (B, True): 294, (C, True): 293,
                      (A, False): 295, (B, False): 292, (C, False): 295}[
                          (n, warm is WARMUP_DEFAULT)]
        assert len(steps) == want_steps, (n, len(steps), want_steps)
        e_ovf, e_clip = EXPECTED[key]
        assert ovf == len(e_ovf - warm[n]) and clip == len(e_clip - warm[n])
        assert int(r["stream_steps"]) == len(steps), (r, len(steps))
        assert int(r["stream_overflow_steps"]) == ovf, (r, ovf)
        assert int(r["stream_clipped_steps"]) == clip, (r, clip)
        for c, v in (("overshoot_p50", quantile(ov, 0.5)), ("overshoot_p95", quantile(ov, 0.95)),
                     ("stream_overshoot_max", ov[-1]), ("clip_step_rate", clip / len(steps))):
            assert close9(float(r[c]), v), (c, r[c], v, key)
        wrows = sum(1 for t in SNAP_STEPS if amax[n][t] != 0 and t in warm[n])
        assert int(r["warmup_steps"]) == wrows, (r, wrows)
        n_checked += 1
    assert n_checked == len(TENSORS) * len(CONFIGS), n_checked
    return "analysis.csv stream columns match (%d series)" % n_checked


def run_case(binary, d, name, analysis, warm):
    ini = os.path.join(d, name + ".ini")
    out = os.path.join(d, "out_" + name)
    with open(ini, "w") as f:
        f.write(EXPERIMENT.format(out="out_" + name, analysis=analysis))
    rc, text = run([binary, "run", ini, "--quiet", "--threads", "2"])
    assert rc == 0, text
    assert "differ" not in text, text       # the snapshots agree with amax.csv
    return ini, out


def npy_rows(out):
    """stream.npy + stream.json (the compact stream, issue 27) as stream.csv's rows: the
    (record, tensor, configuration) positions whose format is not null, in that order, each a
    dict of the CSV's key columns and the raw float32 amax, scale and te_scale."""
    a = np.load(os.path.join(out, "stream.npy"))
    import json
    ix = json.load(open(os.path.join(out, "stream.json")))
    assert ix["records"] == len(a), (ix["records"], len(a))
    rows = []
    for r in range(len(a)):
        for t, ten in enumerate(ix["tensors"]):
            for c, cf in enumerate(ix["configs"]):
                fm = ten["formats"][c]
                if fm is None:
                    assert np.isnan(a["scale"][r, t, c])
                    continue
                rows.append(dict(tensor=ten["name"], role=ten["role"], step=int(a["step"][r]),
                                 recipe=cf["recipe"], format=fm, history_len=cf["history_len"],
                                 margin=cf["margin"], amax_compute=cf["amax_compute"],
                                 snapshot=int(a["snapshot"][r, t]), warmup=int(a["warmup"][r, t]),
                                 micro=int(a["micro"][r]), amax=a["amax"][r, t],
                                 scale=a["scale"][r, t, c], te_scale=a["te_scale"][r, t]))
    return rows


def check_npy_against_csv(npy_out, csv_out):
    """Every row of the compact stream equals stream.csv's: keys as text, amax and scale to the
    float32 bit, te_scale NaN where the CSV's is empty. -> (rows, bytes per row)."""
    got = npy_rows(npy_out)
    want = read_csv(os.path.join(csv_out, "stream.csv"))
    assert len(got) == len(want), (len(got), len(want))
    for g, w in zip(got, want):
        for k in ("tensor", "role", "step", "recipe", "format", "history_len", "margin",
                  "amax_compute", "snapshot", "warmup", "micro"):
            assert str(g[k]) == w[k], (k, g, w)
        for k in ("amax", "scale"):
            assert g[k].tobytes() == f32_text(w[k]).tobytes(), (k, g, w)
        assert (np.isnan(g["te_scale"]) and w["te_scale"] == "") or \
            g["te_scale"].tobytes() == f32_text(w["te_scale"]).tobytes(), (g, w)
    size = os.path.getsize(os.path.join(npy_out, "stream.npy"))
    return len(got), size / len(got)


def png_rgb(path):
    """The pixels of an 8-bit RGB or RGBA PNG (what fp8lab writes): (w, h, rows of (r, g, b))."""
    import struct
    import zlib
    data = open(path, "rb").read()
    pos, idat = 8, b""
    while pos < len(data):
        n = struct.unpack(">I", data[pos:pos + 4])[0]
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and ctype in (2, 6), (depth, ctype)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = np.frombuffer(zlib.decompress(idat), dtype=np.uint8)
    bpp = 3 if ctype == 2 else 4
    stride = w * bpp
    out = np.zeros((h, stride), dtype=np.int32)
    prev = np.zeros(stride, dtype=np.int32)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)].astype(np.int32)
        if f == 0:
            cur = line
        elif f == 2:
            cur = (line + prev) & 255
        else:  # sub, average, paeth: byte by byte
            cur = np.zeros(stride, dtype=np.int32)
            for x in range(stride):
                a = cur[x - bpp] if x >= bpp else 0
                b, c = prev[x], (prev[x - bpp] if x >= bpp else 0)
                if f == 1:
                    pr = a
                elif f == 3:
                    pr = (a + b) // 2
                else:
                    pp = a + b - c
                    pa, pb, pc = abs(pp - a), abs(pp - b), abs(pp - c)
                    pr = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                cur[x] = (line[x] + pr) & 255
        out[y] = cur
        prev = cur
    return w, h, out.reshape(h, w, bpp)[:, :, :3]


def same_report(a, b):
    """report.md, analysis.csv, recommendations.csv, advice.ini and every plot byte for byte."""
    names = ["report.md", "analysis.csv", "recommendations.csv", "advice.ini"]
    names += ["plots/" + p for p in sorted(os.listdir(os.path.join(a, "plots")))]
    assert names[4:] == ["plots/" + p for p in sorted(os.listdir(os.path.join(b, "plots")))]
    for n in names:
        with open(os.path.join(a, n), "rb") as f, open(os.path.join(b, n), "rb") as g:
            assert f.read() == g.read(), n
    return len(names)


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("FP8LAB_BIN", "fp8lab")
    keep = os.environ.get("FP8LAB_KEEP_TMP")
    d = keep if keep else tempfile.mkdtemp(prefix="fp8lab-stream-")
    os.makedirs(d, exist_ok=True)
    failed = 0
    try:
        amax, no_row = design()
        write_trace(os.path.join(d, "trace"), amax, no_row)
        rec = recompute(amax)
        cases = []

        def default_case():
            ini, out = run_case(binary, d, "default", "", WARMUP_DEFAULT)
            check_stream(out, amax, rec, WARMUP_DEFAULT)
            check_steps(out, amax, rec, WARMUP_DEFAULT)
            line = check_analysis(out, amax, rec, WARMUP_DEFAULT)
            rc, text = run([sys.executable, os.path.join(REF, "fp8ref.py"), "compare", ini,
                            os.path.join(out, "steps.csv"), "--stream",
                            os.path.join(out, "stream.csv"), "--summary",
                            os.path.join(out, "summary.csv")])
            assert rc == 0, text
            return line + "; " + text.strip().splitlines()[-1]
        cases.append(("default warm-up", default_case))

        def warmup3_case():
            w3 = {n: {0, 1, 2} for n in TENSORS}
            assert w3 != WARMUP_DEFAULT
            ini, out = run_case(binary, d, "warmup3", "[analysis]\nwarmup_steps = 3\n", w3)
            check_stream(out, amax, rec, w3)
            check_steps(out, amax, rec, w3)
            return check_analysis(out, amax, rec, w3)
        cases.append(("[analysis] warmup_steps = 3", warmup3_case))

        def no_delayed_case():
            ini = os.path.join(d, "current.ini")
            out = os.path.join(d, "out_current")
            with open(ini, "w") as f:
                f.write("[trace]\npath = trace\n[recipe.cur]\nkind = current\n"
                        "[output]\ndir = out_current\n")
            rc, text = run([binary, "run", ini, "--quiet", "--no-report"])
            assert rc == 0, text
            assert os.path.exists(os.path.join(out, "steps.csv"))
            assert not os.path.exists(os.path.join(out, "stream.csv"))
            return "no delayed configuration: no stream.csv"
        cases.append(("current scaling only", no_delayed_case))

        def npy_case():
            # the same experiment with [output] stream = npy, in its own folder under the same
            # experiment name (the report's titles name it)
            sub = os.path.join(d, "npy")
            os.makedirs(sub, exist_ok=True)
            os.symlink(os.path.join(d, "trace"), os.path.join(sub, "trace"))
            for fmt in ("npy", "csv"):
                with open(os.path.join(sub, "default.ini"), "w") as f:
                    f.write(EXPERIMENT.format(out="out_" + fmt, analysis="")
                            .replace("[output]", "[output]\nstream = %s" % fmt))
                rc, text = run([binary, "run", os.path.join(sub, "default.ini"), "--quiet",
                                "--threads", "2"])
                assert rc == 0, text
            npy_out, csv_out = os.path.join(sub, "out_npy"), os.path.join(sub, "out_csv")
            assert not os.path.exists(os.path.join(npy_out, "stream.csv"))
            rows, bpr = check_npy_against_csv(npy_out, csv_out)
            assert bpr <= 8, bpr
            n = same_report(npy_out, csv_out)
            # the scales read back from the file a tensor at a time (FP8LAB_TEST_VISIT_BYTES:
            # the blocks a 70B stream is read in, made small): the same report again
            one = os.path.join(sub, "out_npy_blocks")
            shutil.copytree(npy_out, one)
            shutil.rmtree(os.path.join(one, "plots"))
            p = subprocess.run([binary, "report", one, "--quiet"], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True,
                               env=dict(os.environ, FP8LAB_TEST_VISIT_BYTES="1"))
            assert p.returncode == 0, p.stdout
            same_report(one, csv_out)
            # damaged: cut short, a scale of 0, bytes added: one line naming the record
            data = open(os.path.join(npy_out, "stream.npy"), "rb").read()
            hlen = 10 + int.from_bytes(data[8:10], "little")
            rec = 16 + 3 * 10 + 3 * 7 * 4
            bad = {"short": data[:-5], "long": data + b"\0",
                   "zero scale": data[:hlen + 5 * rec + 16 + 30 + 4] + b"\0\0\0\0" +
                   data[hlen + 5 * rec + 16 + 30 + 8:]}
            want = {"short": "stream.npy: record 299 (byte %d): the file ends" % (hlen + 299 * rec),
                    "long": "stream.npy: bytes after the 300 records",
                    "zero scale": "stream.npy: record 5 (byte %d): scale: expected a finite "
                                  "number > 0" % (hlen + 5 * rec)}
            for what, blob in bad.items():
                with open(os.path.join(npy_out, "stream.npy"), "wb") as f:
                    f.write(blob)
                rc, text = run([binary, "report", npy_out, "--quiet"])
                assert rc == 2 and want[what] in text and len(text.strip().splitlines()) == 1, \
                    (what, rc, text)
            return ("%d rows equal stream.csv's, %.2f bytes a row; the report and its %d files "
                    "byte-identical; a damaged stream.npy: exit 2" % (rows, bpr, n))
        cases.append(("[output] stream = npy", npy_case))

        def auto_case():
            # above FP8LAB's threshold (5,000,000 rows) stream = auto writes stream.npy: an
            # amax stream of 2,000 tensors x 500 steps under 6 configurations is 6 M rows
            at = os.path.join(d, "auto")
            os.makedirs(os.path.join(at, "trace"), exist_ok=True)
            with open(os.path.join(at, "trace", "amax.csv"), "w") as f:
                f.write("step,tensor,amax\n")
                for s in range(500):
                    f.write("".join("%d,l%d.fc.input,%g\n" % (s, k, 1 + (s * k) % 7)
                                    for k in range(2000)))
            with open(os.path.join(at, "auto.ini"), "w") as f:
                f.write("[trace]\npath = trace\n[recipe.d]\nkind = delayed\n"
                        "history_len = 1, 16, 1024\nmargin = 0, 1\n[output]\ndir = o\n")
            rc, text = run([binary, "run", os.path.join(at, "auto.ini"), "--quiet", "--no-report"])
            assert rc == 0, text
            o = os.path.join(at, "o")
            assert os.path.exists(os.path.join(o, "stream.npy")) and \
                not os.path.exists(os.path.join(o, "stream.csv")), os.listdir(o)
            import json
            run_json = json.load(open(os.path.join(o, "run.json")))
            assert run_json["stream_rows"] == 6000000, run_json["stream_rows"]
            assert "stream.npy" in run_json["outputs"] and "stream.json" in run_json["outputs"]
            a = np.load(os.path.join(o, "stream.npy"), mmap_mode="r")
            assert a.shape == (500,) and a["scale"].shape == (500, 2000, 6), a["scale"].shape
            bpr = os.path.getsize(os.path.join(o, "stream.npy")) / 6e6
            assert bpr <= 8, bpr
            return "6 M rows: stream.npy, %.2f bytes a row" % bpr
        cases.append(("[output] stream = auto above the threshold", auto_case))

        def many_case():
            # 80 input tensors in 40 layers (model.layers.N.fc1/fc2), 400 steps, one event:
            # layers.23.fc2's amax 64x at step 250 under L=16 m=0. Past 64 rows the heatmap is
            # by layer (a row the largest of its tensors) plus the worst 32 tensors; the event
            # must show in layer 23's row at its step, and nowhere else (issue 27)
            md = os.path.join(d, "many")
            os.makedirs(os.path.join(md, "trace"), exist_ok=True)
            names = ["model.layers.%d.fc%d.input" % (i, j) for i in range(40) for j in (1, 2)]
            ev_t, ev_s, nst = "model.layers.23.fc2.input", 250, 400
            gen_trace.write_safetensors(os.path.join(md, "trace", "step_0.safetensors"),
                                        [(n, "F32", snapshot_tensor(F32(1.0))) for n in names],
                                        np.random.default_rng(7))
            with open(os.path.join(md, "trace", "amax.csv"), "w") as f:
                f.write("step,tensor,amax\n")
                for t in range(nst):
                    for n in names:
                        f.write("%d,%s,%g\n" % (t, n, 64.0 if (n, t) == (ev_t, ev_s) else 1.0))
            with open(os.path.join(md, "many.ini"), "w") as f:
                f.write("[trace]\npath = trace\n[recipe.d]\nkind = delayed\nformat = e4m3\n"
                        "history_len = 16\nmargin = 0\n[output]\ndir = o\n")
            rc, text = run([binary, "run", os.path.join(md, "many.ini"), "--quiet"])
            assert rc == 0, text
            o = os.path.join(md, "o")
            plots = sorted(os.listdir(os.path.join(o, "plots")))
            assert "heatmap_overshoot_input.png" in plots and \
                "heatmap_overshoot_input_worst.png" in plots, plots
            rep = open(os.path.join(o, "report.md")).read()
            assert "the 80 input tensors by layer (40 layers; a row: the largest of its " \
                "tensors)" in rep, rep
            assert "the 32 input tensors of 80 with the largest overshoot" in rep, rep
            w, h, px = png_rgb(os.path.join(o, "plots", "heatmap_overshoot_input.png"))
            r, g, b = px[:, :, 0], px[:, :, 1], px[:, :, 2]
            loud = (r > 90) & (r > b + 60) & (g < 180)
            loud[:, w - 145:] = False                     # the colour bar
            ys, xs = np.nonzero(loud)
            assert len(xs) > 0, "no loud pixel in the layer heatmap"
            assert xs.max() - xs.min() <= 3, (xs.min(), xs.max())
            # the rows: runs of cell pixels (not white) down a column left of the event,
            # split by the white lines between rows; the event's pixels in run 23 of 40
            col = px[:, xs.min() - 30, :]
            cell = ~np.all(col >= 250, axis=1)
            runs, y0 = [], None
            for y in range(h):
                if cell[y] and y0 is None:
                    y0 = y
                if not cell[y] and y0 is not None:
                    runs.append((y0, y - 1))
                    y0 = None
            runs = [ru for ru in runs if ru[1] - ru[0] >= 10]  # rows, not tick marks or text
            assert len(runs) == 40, runs
            k = [i for i, (a, z) in enumerate(runs) if a <= ys.min() and ys.max() <= z]
            assert k == [23], (k, ys.min(), ys.max(), runs[22:25])
            # x: the cells span steps 0..399 (a column a step): the event's pixels at step 250
            # (the cells of layer 20, clear of the ticks: amax x scale exactly the max,
            # overshoot 0, the quiet scale's top, light blue (158, 202, 236) since issue 42
            # (before: (240, 240, 240)), not orange: a value that fits is not saturated)
            row = px[(runs[20][0] + runs[20][1]) // 2, :w - 145, :].astype(int)
            q = np.all(np.abs(row - np.array([158, 202, 236])) <= 3, axis=1)
            x0 = x1 = best = 0
            for x in range(len(q)):              # the longest run of them
                if q[x]:
                    a = x if x == 0 or not q[x - 1] else a
                    if x - a + 1 > best:
                        best, x0, x1 = x - a + 1, a, x
            assert best > w / 2, (x0, x1, best)
            ex = x0 + (ev_s + 0.5) / nst * (x1 - x0 + 1)
            assert abs((xs.min() + xs.max()) / 2 - ex) <= 3, (xs.min(), xs.max(), ex)
            return "80 tensors: a layer heatmap of 40 rows and the worst 32; the event at " \
                "layer 23, step 250"
        cases.append(("many tensors: heatmaps by layer and the worst", many_case))

        for name, fn in cases:
            try:
                line = fn()
                print("  %s: ok (%s)" % (name, line))
            except AssertionError:
                failed += 1
                print("FAIL %s:\n%s" % (name, traceback.format_exc()))
    finally:
        if not keep:
            shutil.rmtree(d, ignore_errors=True)
    print("%d passed, %d failed" % (len(cases) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
