#!/usr/bin/env python3
"""tools/te_tb_to_amax.py (issue 28): TE's debug statistics from TensorBoard events.

The event files are written here by hand, independently of the tensorboard package the tool
reads them with: TFRecord framing (length, masked CRC-32C of it, data, masked CRC-32C of it)
around Event protocol buffers encoded field by field (wall_time 1, step 2, file_version 3,
summary 5 > value 1 > tag 1, simple_value 2), as torch.utils.tensorboard's add_scalar writes
them. Checked:
  - two runs (ranks), float32 amaxes that TE's text log would print as 0.0000 or with two
    digits, a user's own scalar (loss), other statistics, wgrad: amax.csv holds exactly the
    float32 values ("%.9g"), rank_<r>/ per run, te_log.json (interval, counts, tensors);
  - the trace replays byte for byte as an amax.csv written here from the same float32 values;
  - bad input, one line, exit 2, nothing written: a NaN amax, a (tensor, step) twice, no
    cur_amax scalar, a non-empty folder without --force; --force replaces;
  - TE's GroupedLinear (issue 40): the layer <name>.gemm_<i> is written <name>.experts.<i>;
  - te_log.json schema 2 (issue 41): "written", each tensor's own interval, first and last
    iteration and statistics' intervals where TE logged tensors and statistics at different
    frequencies, "intervals_differ", "ranks_without_amax" with a warning naming the run.
Usage: test_te_tb.py FP8LAB_BIN. Exit 77 (skipped) without the tensorboard package unless
FP8LAB_REQUIRE_PYDEPS=1 (then a failure: scripts/install-deps.sh installs it).
"""
import json
import os
import subprocess
import sys

BIN = os.path.abspath(sys.argv[1])
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tb_events import check, event, f32, tool, write_events, need_tensorboard  # noqa: E402
import tb_events  # noqa: E402

need_tensorboard()


# ---------------------------------------------------------------- the cases

LAYERS = ["model.layers.0.self_attention.layernorm_qkv", "model.layers.0.layernorm_mlp.fc2"]
ROLE = {"activation": "input", "weight": "weight", "gradient": "grad_output"}


def make_runs(tmp):
    """Two ranks' event folders and the amax.csv rows they hold {rank: {(step, name): f32}}."""
    want = {}
    for r in range(2):
        d = os.path.join(tmp, "tb", "rank%d" % r)
        os.makedirs(d)
        evs, want[r] = [], {}
        for step in range(0, 40, 4):
            sc = [("loss", 2.5 - step / 100.0)]
            for L in LAYERS:
                for t in ("activation", "weight", "gradient", "wgrad"):
                    v = f32((1.5 + step + 7 * r + len(L)) * (1e-6 if t == "gradient" else 1.0))
                    if t == "gradient" and step == 8:
                        v = f32(3.7e-5)   # reads 0.0000 in the text log
                    if t == "activation" and step == 12:
                        v = 0.0           # an all-zero tensor
                    sc.append(("%s_%s_cur_amax" % (L, t), v))
                    sc.append(("%s_%s_dynamic_range" % (L, t), 12.0))
                    if t != "wgrad":
                        want[r][(step, "%s.%s" % (L, ROLE[t]))] = v
            # split over two files, as a writer that was reopened
            evs.append(event(step=step, scalars=sc))
        write_events(os.path.join(d, "events.out.tfevents.1700000000.host.1.0"), evs[:5])
        write_events(os.path.join(d, "events.out.tfevents.1700000100.host.1.0"), evs[5:])
    return want


def replay(tmp, trace, tag):
    ini = os.path.join(tmp, tag + ".ini")
    with open(ini, "w") as f:
        f.write("[trace]\npath = %s\n[recipe.d]\nkind = delayed\nformat = hybrid\n"
                "history_len = 1, 8\nmargin = 0\n" % trace)
    out = os.path.join(tmp, "out_" + tag)
    p = subprocess.run([BIN, "run", ini, "--out", out, "--no-report", "--quiet", "--threads", "2"],
                       capture_output=True, text=True)
    check(p.returncode == 0, "run %s: %s" % (tag, p.stderr.strip()))
    return out


def case_convert(tmp):
    want = make_runs(tmp)
    rc, so, se = tool(["trace", "tb/rank0", "tb/rank1"], cwd=tmp)
    check(rc == 0, "convert: exit %d %s" % (rc, se.strip()))
    check("own interval" not in so, "convert: one interval, none stated per tensor: %r" % so)
    tr = os.path.join(tmp, "trace")
    for r in (0, 1):
        with open(os.path.join(tr, "rank_%d" % r, "amax.csv")) as f:
            lines = f.read().splitlines()
        check(lines[0] == "step,tensor,amax", lines[0])
        got = {}
        for ln in lines[1:]:
            s, n, a = ln.split(",")
            got[(int(s), n)] = a
        check(set(got) == set(want[r]), "rank %d: the rows' keys" % r)
        for k, v in want[r].items():
            if k in got and got[k] != "%.9g" % v:
                check(False, "rank %d %s: %s, want %.9g" % (r, k, got[k], v))
                break
        order = [(int(ln.split(",")[0]), ln.split(",")[1]) for ln in lines[1:]]
        check(order == sorted(order), "rank %d: rows by step, then name" % r)
    meta = json.load(open(os.path.join(tr, "te_log.json")))
    check(meta["interval"] == 4 and meta["first_iteration"] == 0 and meta["last_iteration"] == 36,
          "interval: %s" % meta)
    check(meta["ranks_identical"] is False and meta["amax_rows"] == 2 * 10 * 6, meta["amax_rows"])
    check(meta["wgrad_cur_amax_left_out"] == 2 * 10 * 2, meta["wgrad_cur_amax_left_out"])
    check(meta["other_statistics"] == {"dynamic_range": 2 * 10 * 8}, meta["other_statistics"])
    check(meta["other_scalars"] == 2 * 10, meta["other_scalars"])
    # schema 2 (issue 41): what was written, the per-tensor intervals, no rank without amax
    check(meta.get("written") == ["rank_0/amax.csv", "rank_1/amax.csv", "te_log.json"],
          "written: %s" % meta.get("written"))
    check(meta.get("intervals_differ") is False and meta.get("ranks_without_amax") == [] and
          meta.get("cut_lines_dropped") == 0, "schema 2's top level: %s" % meta)
    for t in meta["tensors"]:
        check(t.get("interval") == 4 and t.get("first_iteration") == 0 and
              t.get("last_iteration") == 36 and
              t.get("statistics") == {"cur_amax": 4, "dynamic_range": 4}, "tensor: %s" % t)
    tens = {t["tensor"]: t for t in meta["tensors"]}
    check(tens[LAYERS[0] + ".input"]["zero_values"] == 1 and
          tens[LAYERS[0] + ".input"]["logged"] == 10, tens[LAYERS[0] + ".input"])
    # the float32 amax below 5e-5 is there, exactly
    with open(os.path.join(tr, "rank_0", "amax.csv")) as f:
        check("8,%s.grad_output,%.9g" % (LAYERS[0], f32(3.7e-5)) in f.read(), "3.7e-5 kept")
    # the same values as a hand-written amax.csv trace: the replays agree byte for byte
    hand = os.path.join(tmp, "hand")
    for r in (0, 1):
        os.makedirs(os.path.join(hand, "rank_%d" % r))
        with open(os.path.join(hand, "rank_%d" % r, "amax.csv"), "w") as f:
            f.write("step,tensor,amax\n")
            for (s, n), v in sorted(want[r].items()):
                f.write("%d,%s,%r\n" % (s, n, v))
    a, b = replay(tmp, hand, "hand"), replay(tmp, tr, "tb")
    for name in ("stream.csv", "summary.csv"):
        with open(os.path.join(a, name), "rb") as fa, open(os.path.join(b, name), "rb") as fb:
            check(fa.read() == fb.read(), "%s differs between the converted and the hand trace" % name)
    # --force
    rc, so, se = tool([tr, os.path.join(tmp, "tb", "rank0")])
    check(rc == 2 and "not empty" in se and se.count("\n") == 1, "no --force: %r" % se)
    rc, so, se = tool([tr, os.path.join(tmp, "tb", "rank0"), "--force"])
    check(rc == 0 and os.path.exists(os.path.join(tr, "amax.csv")) and
          not os.path.exists(os.path.join(tr, "rank_1")), "--force to one rank: %r" % se)
    print("converted: %d rows, replays byte-identical" % meta["amax_rows"])


def case_intervals(tmp):
    """Each tensor's own logging interval (TE's freq per tensor and per statistic, issue 41
    item 3): activation cur_amax every 2 iterations (0..20), weight every 5, gradient cur_amax
    every 2 with dynamic_range every 6, output's dynamic_range alone every 3; over two ranks,
    rank 1 logging from iteration 4. A third rank whose amaxes are all 0 and a fourth with no
    cur_amax at all are ranks_without_amax, each warned about on stderr naming its folder."""
    L = "dec.1.fc2"
    logged = {"activation_cur_amax": 2, "weight_cur_amax": 5, "gradient_cur_amax": 2,
              "gradient_dynamic_range": 6, "output_dynamic_range": 3}
    runs = []
    for r in range(4):
        d = os.path.join(tmp, "tb_iv", "rank%d" % r)
        os.makedirs(d)
        evs = []
        for it in range(0, 21):
            sc = [("lr", 1e-4)]
            for stat, k in sorted(logged.items()):
                if it % k == 0 and (r != 1 or it >= 4) and (r != 3 or "amax" not in stat):
                    sc.append(("%s_%s" % (L, stat), 0.0 if r == 2 else 1.0 + it))
            evs.append(event(step=it, scalars=sc))
        write_events(os.path.join(d, "events.out.tfevents.1.h.1.0"), evs)
        runs.append(d)
    tr = os.path.join(tmp, "trace_iv")
    rc, so, se = tool([tr] + runs)
    check(rc == 0, "intervals: exit %d %s" % (rc, se.strip()))
    if rc:
        return
    meta = json.load(open(os.path.join(tr, "te_log.json")))
    tens = {t["tensor"]: t for t in meta["tensors"]}
    check(sorted(tens) == [L + "." + x for x in ("grad_output", "input", "output", "weight")],
          sorted(tens))
    want = {"input": (2, 0, 20, {"cur_amax": 2}), "weight": (5, 0, 20, {"cur_amax": 5}),
            "grad_output": (2, 0, 20, {"cur_amax": 2, "dynamic_range": 6})}
    for role, (iv, first, last, stats) in want.items():
        t = tens.get(L + "." + role, {})
        check((t.get("interval"), t.get("first_iteration"), t.get("last_iteration"),
               t.get("statistics")) == (iv, first, last, stats), "%s: %s" % (role, t))
    out = tens.get(L + ".output", {})
    check(out.get("interval") == 0 and "first_iteration" not in out and
          out.get("statistics") == {"dynamic_range": 3}, "output (no cur_amax): %s" % out)
    check(meta["interval"] == 1 and meta.get("intervals_differ") is True,
          "the log's interval gcd(2, 5) = 1, the tensors' differ: %s %s"
          % (meta["interval"], meta.get("intervals_differ")))
    check(meta.get("ranks_without_amax") == [2, 3], "ranks_without_amax: %s"
          % meta.get("ranks_without_amax"))
    warn = [ln for ln in se.splitlines() if "warning" in ln]
    check(len(warn) == 2 and "rank 2" in warn[0] and runs[2] in warn[0] and "rank 3" in warn[1]
          and runs[3] in warn[1], "the warnings: %r" % se)
    check("of 3 tensors" in so, "the summary counts the tensors with an amax: %r" % so)
    check("each tensor logged at its own interval, 2 to 5 iterations" in so,
          "the summary states the tensors' own intervals: %r" % so)


def case_grouped_linear(tmp):
    """TE's GroupedLinear GEMM i (the layer <name>.gemm_<i>) is expert i of <name>, as
    import-te names it (issue 40); a near miss keeps its name."""
    d = os.path.join(tmp, "tb_gl")
    os.makedirs(d)
    gl = "decoder.layers.0.mlp.experts.linear_fc2"
    write_events(os.path.join(d, "events.out.tfevents.1.h.1.0"),
                 [event(step=s, scalars=[(gl + ".gemm_2_activation_cur_amax", 1.5 + s),
                                         (gl + ".gemm_10_gradient_cur_amax", 0.5),
                                         ("p.gemm_x_weight_cur_amax", 2.0)]) for s in (0, 1)])
    tr = os.path.join(tmp, "trace_gl")
    rc, so, se = tool([tr, d])
    check(rc == 0, "GroupedLinear: exit %d %s" % (rc, se.strip()))
    if rc:
        return
    with open(os.path.join(tr, "amax.csv")) as f:
        got = f.read()
    want = ("step,tensor,amax\n"
            "0,%s.experts.10.grad_output,0.5\n0,%s.experts.2.input,1.5\n0,p.gemm_x.weight,2\n"
            "1,%s.experts.10.grad_output,0.5\n1,%s.experts.2.input,2.5\n1,p.gemm_x.weight,2\n"
            % (gl, gl, gl, gl))
    check(got == want, "GroupedLinear amax.csv:\n%s" % got)


def bad(tmp, label, events, want):
    d = os.path.join(tmp, "bad_" + label)
    os.makedirs(d)
    write_events(os.path.join(d, "events.out.tfevents.1.h.1.0"), events)
    out = os.path.join(tmp, "bad_out_" + label)
    rc, so, se = tool([out, d])
    check(rc == 2 and se.count("\n") == 1 and want in se, "%s: exit %d %r" % (label, rc, se))
    check(not os.path.exists(out), "%s: nothing written" % label)


def case_bad(tmp):
    ok = event(step=0, scalars=[("a.fc1_activation_cur_amax", 2.0)])
    bad(tmp, "nan", [ok, event(step=1, scalars=[("a.fc1_activation_cur_amax", float("nan"))])], "NaN")
    bad(tmp, "twice", [ok, event(step=0, scalars=[("a.fc1_activation_cur_amax", 3.0)])],
        "a second time")
    bad(tmp, "none", [event(step=0, scalars=[("loss", 1.0)])], "no <layer>_<tensor>_cur_amax")


def main():
    tb_events.run_cases("fp8lab-tb-", [case_convert, case_intervals, case_grouped_linear, case_bad],
                        "te tensorboard")


if __name__ == "__main__":
    main()
