#!/usr/bin/env python3
"""The Findings section of report.md (src/report/report_findings.c) against the CSV files.

`fp8lab run experiments/quickstart.ini` into a temporary directory, then every number the
"## Findings" section of report.md quotes (from "## Findings" to the next "## ") is recomputed
here, independently of fp8lab's analysis code, from steps.csv and stream.csv (analysis.csv is
only cross-checked: the p5 SNR and the scale lag it defines are recomputed from steps.csv too):

  - the reference paragraph (delayed L=1024 m=0 max, over every non-warm-up step of stream.csv:
    tensors and tensor-steps whose largest element overflowed, clipped), the largest overshoot,
    the clipped values at the snapshot steps, the warm-up sentence, current scaling's rounding
    sentence, the worst event (issue 42: the largest overshoot of a clipped cast over every
    step and micro-batch of stream.csv, with its micro-batch, and what its snapshot measured,
    "fell to" only for >= 1 dB with more than one value), the snapshot step that lost the most
    when another event, the tensors clipped at its step, the staleness after it, the table by
    role, the table by tensor (its rows, their order, the "... and N more"), the distribution
    of overshoot and the scale lag;
  - outside the Findings (issue 42): the budgets' resolution in the answer and the
    recommendations (a budget below 1/N allows none: N and 1/N recomputed), the micro-batch
    wording of the budgets table, the recommendations' column and the amax timelines' captions
    (their crosses counted), and, across the dense run and its micro-batch copy, the cost
    section's launches and all-reduces doubled by 2 micro-batches per step; on the micro-batch
    copy a constructed overshoot at step 57, micro-batch 1 (no snapshot) is the worst event;
  - a stream step's largest element OVERFLOWED when RN32(float32(amax) * float32(scale)) > the
    format's max (448, 57344), CLIPPED when it is > 464 (E4M3) or >= 61440 (E5M2); overshoot =
    log2(amax * scale / max) in double; warm-up rows are left out of every count and rows with
    amax 0 (the module did not run) are skipped;
  - numbers printed with %.2f / %.3g / %.4g / %.1f are compared at the printed precision (the
    recomputed value formatted the same way, or within half a unit of the last printed digit);
  - after blanking every verified number, the tensor names, the configuration labels and the
    template's own constants ("history_len 1024", "RN32", "p5 SNR", ...), no digit may be left
    in the section: a sentence that quotes a new number needs its check here;
  - step 0 is warm-up: every steps.csv and stream.csv row at step 0 has warmup = 1, and the
    warm-up sentence says "step 0";
  - stream.csv has exactly one row per (step, tensor, delayed configuration), the steps being
    the union of the trace's snapshot steps (<out>/synth_trace/step_<n>.*) and of amax.csv's steps,
    the delayed configurations those of steps.csv; its snapshot rows carry steps.csv's amax and
    scale, its other rows amax.csv's amax.

Every mismatch is listed (expected vs got), then the test fails.

Usage: test_findings.py FP8LAB_BIN [--outdir DIR]
  --outdir DIR: check an existing run directory of the quickstart instead of running one.
  FP8LAB_KEEP_TMP=DIR: run into DIR and keep it.
Exit 77 = skipped (numpy missing; exit 1 instead when FP8LAB_REQUIRE_PYDEPS=1, as .ci/run sets).
Standard library and numpy (float32 arithmetic) only.
"""
import collections
import csv
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

from findings_recompute import (  # noqa: E402
    Checker, FMAX, MAX_TABLE, ROLE_ORDER, ROOT, Run, analysis_row, cell_check, cfg_label,
    cfg_of, clipped, f32, fmt_db, fmt_rate, load_csv, make_headers, make_templates,
    measured_templates, np, overshoot, row_at, scale_lag, snr_loss, steps_stats, stream_stats,
    tables)


T = make_templates(False)
ROLE_HEADER, TENSOR_HEADER = make_headers(False)


def find_one(ck, name, present):
    """The one match of template `name` in the section (None, and a failure, when it is
    missing or repeated; absent when not `present`)."""
    ms = list(T[name].finditer(ck.section))
    if not present:
        ck.expect(not ms, "%s: the sentence is there, but the CSVs give it nothing to say" % name)
        return None
    if len(ms) != 1:
        ck.fail("%s: expected the sentence once, found it %d times" % (name, len(ms)))
        return None
    return ms[0]


# ------------------------------------------------------------------ the checks


def check_findings(run, section, ck):
    per, bins, worst = stream_stats(run)
    snap = {t: steps_stats(rows) for t, rows in run.ref_groups.items()}
    ref_label = cfg_label(run.ref)
    ntensors = len(run.ref_groups)

    # the reference paragraph
    m = find_one(ck, "reference", True)
    if m:
        w = "reference paragraph"
        ck.text(w, m, "label", ref_label)
        ck.int_(w, m, "nsteps", len(run.stream_steps))
        if run.micro:
            ck.int_(w, m, "nmicro", len(run.stream_micros))
        ck.int_(w, m, "tensors", ntensors)
        ck.int_(w, m, "ovf_tensors", sum(1 for t in run.ref_groups if per[t]["ovf"] > 0))
        ck.int_(w, m, "ovf_steps", sum(p["ovf"] for p in per.values()))
        ck.int_(w, m, "clip_tensors", sum(1 for t in run.ref_groups if per[t]["clip"] > 0))
        ck.int_(w, m, "clip_steps", sum(p["clip"] for p in per.values()))

    # the largest overshoot, said apart only when no cast clipped (else it is the worst event)
    clip_steps = sum(p["clip"] for p in per.values())
    m = find_one(ck, "largest", worst[0] > 0 and clip_steps == 0)
    if m:
        w = "largest overshoot"
        ck.text(w, m, "tensor", {t for t, _, _ in worst[1]})
        ck.text(w, m, "step", {str(s) for t, s, _ in worst[1] if t == m.group("tensor")})
        check_micro(ck, w, m, run, {mi for t, s, mi in worst[1]
                                    if t == m.group("tensor") and str(s) == m.group("step")})
        ck.num(w, m, "ov", worst[0], "%.2f" % worst[0])
        ck.num(w, m, "factor", 2.0 ** worst[0], "%.2f" % 2.0 ** worst[0])

    # clipped values at the snapshot steps
    m = find_one(ck, "snapshot", True)
    if m:
        w = "snapshot clipped values"
        clip = sum(s["clipped"] for s in snap.values())
        finite = sum(s["finite"] for s in snap.values())
        rate = clip / finite if finite else float("nan")
        ck.int_(w, m, "tensors_clip", sum(1 for s in snap.values() if s["clipped"] > 0))
        ck.int_(w, m, "tensors", ntensors)
        ck.int_(w, m, "clipped", clip)
        ck.int_(w, m, "finite", finite)
        ck.num(w, m, "rate", rate, fmt_rate(rate))

    check_warmup(run, ck)
    check_rounding(run, ck)
    check_spike(run, ck)
    check_tables(run, ck, per, snap, ref_label)

    # the distribution of overshoot
    ovf_steps = sum(p["ovf"] for p in per.values())
    m = find_one(ck, "bins", ovf_steps > 0)
    if m:
        ck.int_("overshoot distribution", m, "ovf_steps", ovf_steps)
        for i in range(5):
            ck.int_("overshoot distribution", m, "b%d" % i, bins[i])
        ck.expect(sum(bins) == ovf_steps, "overshoot bins do not add up")

    # the scale lag: the most negative worst lag of a reference tensor
    lagged = [(s["lag_worst"], t) for t, s in snap.items() if s["lag_rows"] > 0]
    low = min(lagged)[0] if lagged else 0.0
    m = find_one(ck, "lag", low < 0)
    if m:
        w = "scale lag"
        ck.text(w, m, "tensor", {t for l, t in lagged if l == low})
        t = m.group("tensor")
        if t in snap:
            ck.num(w, m, "worst", low, "%.2f" % low)
            med = snap[t]["lag_median"]
            ck.num(w, m, "median", med, "%.2f" % med)
            ck.int_(w, m, "lag_rows", snap[t]["lag_rows"])
            a = analysis_row(run, t, run.ref)
            if a:  # analysis.csv defines them: it must agree
                ck.expect("%.2f" % float(a["lag_worst"]) == "%.2f" % low and
                          "%.2f" % float(a["lag_median"]) == "%.2f" % med,
                          "scale lag of %s: analysis.csv says %s / %s, steps.csv gives %r / %r" %
                          (t, a["lag_worst"], a["lag_median"], low, med))


def check_warmup(run, ck):
    w = "warm-up sentence"
    warm = [r for r in run.rows if r["warmup"]]
    steps = []
    for r in warm:
        if r["step"] not in steps:
            steps.append(r["step"])
    m = find_one(ck, "warmup", bool(warm))
    if not m:
        return
    shown = ", ".join(str(s) for s in steps[:5]) + (", ..." if len(steps) > 5 else "")
    ck.text(w, m, "steps", shown)
    ck.text(w, m, "plural", "s" if len(steps) > 1 else "")
    ck.int_(w, m, "rows", len(warm))
    ck.int_(w, m, "underflow", sum(r["underflow"] for r in warm))
    ck.int_(w, m, "clipped", sum(r["clipped"] for r in warm))
    # step 0 is excluded and said to be
    step0 = [r for r in run.rows if r["step"] == 0]
    ck.expect(step0 and all(r["warmup"] for r in step0),
              "step 0: %d of %d steps.csv rows are not warm-up" %
              (sum(1 for r in step0 if not r["warmup"]), len(step0)))
    ck.expect(run.stream_step0_not_warmup == 0,
              "step 0: %d stream.csv rows are not warm-up" % run.stream_step0_not_warmup)
    ck.expect(m.group("steps").split(", ")[0] == "0", "the warm-up sentence does not say step 0")
    # "where TransformerEngine's scale is still 1": the delayed warm-up rows
    ones = [r for r in warm if r["kind"] == "delayed"]
    ck.expect(all(r["scale"] == 1 for r in ones),
              "warm-up: %d delayed warm-up rows have a scale other than 1" %
              sum(1 for r in ones if r["scale"] != 1))


def check_rounding(run, ck):
    rows = hair = 0
    for t, g in run.cur_groups.items():
        for r in g:
            if r["warmup"]:
                continue
            rows += 1
            hair += r["overflow"] > r["clipped"]
    m = find_one(ck, "rounding", hair > 0)
    if m:
        w = "current-scaling rounding sentence"
        ck.text(w, m, "recipe", run.cur[0])
        ck.int_(w, m, "hair", hair)
        ck.int_(w, m, "rows", rows)


def check_micro(ck, w, m, run, micros):
    """The ", micro-batch M" of a sentence: there exactly on a micro-batch run, one of micros."""
    got = m.group("micro")
    if not run.micro:
        ck.expect(got is None, "%s: a micro-batch on a run without micro-batches" % w)
    elif ck.expect(got is not None, "%s: no micro-batch named (a micro-batch run)" % w):
        ck.text(w, m, "micro", {str(x) for x in micros})


MEAS_T = measured_templates()


def measured_kind(run, row):
    """Which wording report_worst.c's measured_words owes a snapshot row: "fell" only for a loss
    of 1 dB or more against current scaling with more than one value clipped (issue 42)."""
    cur = row_at(run.cur_groups.get(row["tensor"], []), row["step"])
    vals = "one" if row["clipped"] == 1 else "many"
    if not cur:
        return ("nocur", vals), cur
    if row["clipped"] > 1 and cur["snr"] - row["snr"] >= 1.0:
        return ("fell", vals), cur
    return ("below" if cur["snr"] > row["snr"] else "held", vals), cur


def check_measured(run, ck, w, m, row, want):
    """The {meas} group of match m: the wording `want` (measured_kind's, or an unmeasured one)
    with row's numbers."""
    a, b = m.span("meas")
    found = [k for k, t in MEAS_T.items() if t.fullmatch(ck.section, a, b)]
    if not ck.expect(found == [want], "%s: the measurement reads %r (%s), the CSVs give %s" %
                     (w, m.group("meas"), found, want)):
        return
    if row is None:
        return
    mm = MEAS_T[want].fullmatch(ck.section, a, b)
    if want[1] == "many":
        ck.int_(w, mm, "clipped", row["clipped"])
    ck.int_(w, mm, "n", row["n"])
    ck.num(w, mm, "snr", row["snr"], fmt_db(row["snr"]))
    cur = row_at(run.cur_groups.get(row["tensor"], []), row["step"])
    if want[0] != "nocur":
        ck.num(w, mm, "snr_cur", cur["snr"], fmt_db(cur["snr"]))


def worst_casts(run):
    """The worst event (docs/semantics.md, issue 42 point 4), recomputed: of every non-warm-up
    cast of the reference stream (step, micro-batch) whose largest element clipped, the largest
    overshoot; ties to a cast its snapshot row measured (the step's first micro-batch, a
    non-warm-up steps.csv row), then the more clipped values. Returns the tied best casts as
    (tensor, step, micro, amax, scale, fmt, ov, row or None)."""
    cands = []
    for t in run.tensors:
        series = run.ref_series.get(t, [])
        for i, (step, micro, a, sc, fmt, w) in enumerate(series):
            if w or not a > 0 or not clipped(a, sc, fmt):
                continue
            first = i == 0 or series[i - 1][0] != step
            row = row_at(run.ref_groups.get(t, []), step) if first else None
            if row is not None and row["warmup"]:
                row = None
            cands.append((t, step, micro, a, sc, fmt, overshoot(a, sc, fmt), row))
    if not cands:
        return []
    key = lambda c: (c[6], c[7] is not None and 1 or 0, c[7]["clipped"] if c[7] else -1)
    top = max(key(c) for c in cands)
    return [c for c in cands if key(c) == top]


def spike_pool(run):
    """The snapshot event (rep_find_spike): of the non-warm-up reference rows that clipped, the
    one whose cast lost the most SNR against current scaling (ties: the most clipped values);
    when none lost SNR, the most clipped values."""
    live = [r for t in run.tensors for r in run.ref_groups.get(t, []) if not r["warmup"]]
    clipping = [r for r in live if r["clipped"] > 0]
    lost = [(snr_loss(run, r), r) for r in clipping]
    lost = [(l, r) for l, r in lost if l is not None and l > 0]
    if lost:
        top = max(l for l, _ in lost)
        most = max(r["clipped"] for l, r in lost if l == top)
        return [r for l, r in lost if l == top and r["clipped"] == most]
    most = max((r["clipped"] for r in clipping), default=0)
    return [r for r in clipping if r["clipped"] == most]


def check_spike(run, ck):
    """The worst event over every cast of the replay (worst_casts), with what its snapshot
    measured; then the snapshot event that lost the most (spike_pool) when it is another row,
    the tensors clipped at its step and the staleness after it."""
    casts = worst_casts(run)
    m = find_one(ck, "worst", bool(casts))
    wrow = None
    if m:
        w = "worst event"
        ck.text(w, m, "tensor", {c[0] for c in casts})
        cands = [c for c in casts if c[0] == m.group("tensor")]
        ck.text(w, m, "step", {str(c[1]) for c in cands})
        cands = [c for c in cands if str(c[1]) == m.group("step")]
        check_micro(ck, w, m, run, {c[2] for c in cands})
        if run.micro and m.group("micro") is not None:
            cands = [c for c in cands if str(c[2]) == m.group("micro")]
        if cands:
            t, step, micro, a, sc, fmt, ov, wrow = cands[0]
            fits = FMAX[fmt] / float(sc)
            ck.num(w, m, "amax", float(a), "%.4g" % float(a))
            ck.num(w, m, "fits", fits, "%.4g" % fits)
            ck.num(w, m, "binades", ov, "%.2f" % ov)
            ck.num(w, m, "factor", 2.0 ** ov, "%.2f" % 2.0 ** ov)
            if wrow is not None:
                check_measured(run, ck, w, m, wrow, measured_kind(run, wrow)[0])
            else:
                snap = row_at(run.ref_groups.get(t, []), step)
                want = ("later" if snap is not None and not snap["warmup"] else "nosnap", None)
                check_measured(run, ck, w, m, None, want)
    pool = spike_pool(run)
    in_pool = wrow is not None and any(r is wrow for r in pool)
    ms = list(T["spike"].finditer(ck.section))
    srow = wrow if in_pool else None
    if not pool:
        ck.expect(not ms, "the snapshot-event sentence is there, but no snapshot row clipped")
    elif ms or not in_pool:
        if ck.expect(len(ms) == 1, "the snapshot event (another than the worst): expected the "
                     "sentence once, found it %d times" % len(ms)):
            m = ms[0]
            w = "snapshot event"
            ck.text(w, m, "tensor", {r["tensor"] for r in pool})
            cands = [r for r in pool if r["tensor"] == m.group("tensor")]
            ck.text(w, m, "step", {str(r["step"]) for r in cands})
            row = [r for r in cands if str(r["step"]) == m.group("step")]
            if row:
                srow = row[0]
                ck.expect(srow is not wrow, "the snapshot event repeats the worst event")
                fits = FMAX[srow["format"]] / float(srow["scale"])
                ck.num(w, m, "amax", float(srow["amax"]), "%.4g" % float(srow["amax"]))
                ck.num(w, m, "fits", fits, "%.4g" % fits)
                b = math.log2(float(srow["amax"]) / fits)
                ck.num(w, m, "binades", b, "%.2f" % b)
                check_measured(run, ck, w, m, srow, measured_kind(run, srow)[0])
    if srow is None:
        find_one(ck, "spike_list", False)
        find_one(ck, "after", False)
        return
    row = srow
    # the tensors that clipped more than one value at the spike step
    hit = []
    for t in run.tensors:
        x = row_at(run.ref_groups.get(t, []), row["step"])
        if x and not x["warmup"] and x["clipped"] > 1:
            hit.append((t, x["clipped"]))
    ml = find_one(ck, "spike_list", bool(hit))
    if ml:
        w = "tensors clipped at the spike step"
        ck.int_(w, ml, "step", row["step"])
        ck.int_(w, ml, "count", len(hit))
        ck.text(w, ml, "plural", "" if len(hit) == 1 else "s")
        base = ml.start("list")
        items = list(re.finditer(r"(\S+) \((\d+) values\)(?:, |$)", ml.group("list")))
        got = [(i.group(1), int(i.group(2))) for i in items]
        if ck.expect(got == hit, "%s: expected %s, got %s" % (w, hit, ml.group("list"))):
            for i in items:
                ck.verified((base + i.start(1), base + i.end(1)))
                ck.verified((base + i.start(2), base + i.end(2)))

    check_after_spike(run, ck, row)


def check_after_spike(run, ck, srow):
    g = run.ref_groups[srow["tensor"]]
    uf_b = fin_b = uf_a = fin_a = 0
    stale = n_after = 0
    until, running = None, True
    for r in g:
        if r["warmup"]:
            continue
        if r["step"] < srow["step"]:
            uf_b += r["underflow"]
            fin_b += r["n"] - r["nonfinite"]
            continue
        if r["step"] == srow["step"]:
            continue
        n_after += 1
        lag = scale_lag(r["scale"], r["amax"], r["format"], r["m"])
        if running and lag >= 1.0:
            stale += 1
            until = r["step"]
            uf_a += r["underflow"]
            fin_a += r["n"] - r["nonfinite"]
        else:
            running = False
    m = find_one(ck, "after", stale > 0 and fin_b > 0 and fin_a > 0)
    if not m:
        return
    w = "after the spike"
    ck.text(w, m, "tensor", srow["tensor"])
    ck.int_(w, m, "stale", stale)
    ck.int_(w, m, "after", n_after)
    ck.int_(w, m, "until", until)
    ck.text(w, m, "end", ", the end of the run" if stale == n_after else "")
    ck.num(w, m, "before_rate", uf_b / fin_b, "%.3g" % (uf_b / fin_b))
    ck.num(w, m, "after_rate", uf_a / fin_a, "%.3g" % (uf_a / fin_a))


def check_tables(run, ck, per, snap, ref_label):
    tabs = tables(ck.section)
    by_header = {tuple(h): rows for h, rows in tabs}
    ck.expect(len(tabs) == len(by_header), "two tables with one header")

    # by role
    m = find_one(ck, "roles", True)
    if m:
        ck.text("role table intro", m, "label", ref_label)
    rows = by_header.get(tuple(ROLE_HEADER))
    if ck.expect(rows is not None, "no table by role"):
        expected = []
        for role in ROLE_ORDER:
            ts = [t for t in run.ref_groups if run.role[t] == role]
            if not ts:
                continue
            hit = [t for t in ts if per[t]["ovf"] > 0]
            worst = max((per[t]["ov_max"] for t in hit), default=float("nan"))
            expected.append((role or "(no role)", len(ts), len(hit),
                             sum(1 for t in hit if per[t]["clip"] > 0),
                             sum(per[t]["clip"] for t in hit), worst))
        ck.expect([c[0] for c, _ in rows] == [e[0] for e in expected],
                  "role table: roles %s, expected %s" %
                  ([c[0] for c, _ in rows], [e[0] for e in expected]))
        for (cells, spans), e in zip(rows, expected):
            if cells[0] != e[0] or len(cells) != 6:
                continue
            w = "role table, %s" % e[0]
            for i in range(1, 5):
                cell_check(ck, w, cells, spans, i, e[i])
            cell_check(ck, w, cells, spans, 5, e[5], "%.2f" % e[5] if e[2] else "n/a")

    # by tensor: overflowed tensors, clipped steps desc, overflowed steps desc, overshoot desc
    order = {t: i for i, t in enumerate(run.tensors)}
    ov = sorted((t for t in run.ref_groups if per[t]["ovf"] > 0),
                key=lambda t: (-per[t]["clip"], -per[t]["ovf"], -per[t]["ov_max"], order[t]))
    m = find_one(ck, "tensors", bool(ov))
    if m:
        ck.text("tensor table intro", m, "label", ref_label)
    rows = by_header.get(tuple(TENSOR_HEADER))
    if ck.expect((rows is not None) == bool(ov), "the table by tensor is missing or extra"):
        shown = ov[:MAX_TABLE]
        got = [c[0] for c, _ in (rows or [])]
        ck.expect(got == shown, "tensor table: rows\n  %s\nexpected\n  %s" % (got, shown))
        for cells, spans in rows or []:
            t = cells[0]
            if t not in shown or len(cells) != 8:
                continue
            ck.verified(spans[0])
            w = "tensor table, %s" % t
            p = per[t]
            cell_check(ck, w, cells, spans, 1, run.role[t] or "(no role)")
            mo = re.fullmatch(r"(\d+) of (\d+)", cells[2])
            if ck.expect(mo is not None, "%s: steps overflowed: %r" % (w, cells[2])):
                s = spans[2][0]
                if mo.group(1) == str(p["ovf"]):
                    ck.verified((s + mo.start(1), s + mo.end(1)))
                else:
                    ck.fail("%s: steps overflowed: expected %d, got %s" % (w, p["ovf"], mo.group(1)))
                if mo.group(2) == str(p["ran"]):
                    ck.verified((s + mo.start(2), s + mo.end(2)))
                else:
                    ck.fail("%s: steps overflowed 'of N' (non-warm-up stream steps where the "
                            "tensor ran, amax > 0): expected %d, got %s" %
                            (w, p["ran"], mo.group(2)))
            cell_check(ck, w, cells, spans, 3, p["clip"])
            cell_check(ck, w, cells, spans, 4, p["ov_max"], "%.2f" % p["ov_max"])
            s = snap[t]
            cell_check(ck, w, cells, spans, 5, s["clipped_rate"], fmt_rate(s["clipped_rate"]))
            cell_check(ck, w, cells, spans, 6, s["p5"], fmt_db(s["p5"]))
            cur = steps_stats(run.cur_groups[t])["p5"] if t in run.cur_groups else float("nan")
            cell_check(ck, w, cells, spans, 7, cur, fmt_db(cur))
            # analysis.csv defines the p5 SNR: it must agree with the recomputation
            for c, v in ((run.ref, s["p5"]), (run.cur, cur)):
                a = analysis_row(run, t, c) if c else None
                if a:
                    ck.expect(fmt_db(float(a["snr_p5"])) == fmt_db(v),
                              "%s: analysis.csv snr_p5 %s under %s, steps.csv gives %r" %
                              (w, a["snr_p5"], cfg_label(c), v))
    m = find_one(ck, "more", len(ov) > MAX_TABLE)
    if m:
        ck.int_("tensor table, more", m, "more", len(ov) - MAX_TABLE)


def check_stream_rows(run, ck):
    """One stream.csv row per (step of the trace, micro-batch, tensor, delayed configuration)."""
    with open(os.path.join(run.outdir, "run.json")) as f:
        trace = json.load(f)["trace"].get("abs_path") or os.path.join(run.outdir, "synth_trace")
    snaps = set()
    for f in os.listdir(trace):
        mo = re.fullmatch(r"step_(\d+)\..+", f)
        if mo:
            snaps.add(int(mo.group(1)))
    amax_rows = load_csv(os.path.join(trace, "amax.csv"))
    amax_of = {(int(d["step"]), int(d.get("micro") or 0), d["tensor"]): d["amax"]
               for d in amax_rows}
    micros = collections.defaultdict(set)
    for s, mi, _t in amax_of:
        micros[s].add(mi)
    steps = snaps | set(micros)
    for s in steps:
        micros[s] = micros[s] or {0}
    ck.expect(snaps and amax_of, "the trace has no snapshot or no amax.csv row")
    ck.expect({t for _, _, t in amax_of} == set(run.tensors),
              "amax.csv's tensors differ from steps.csv's")
    fmt = {(r["tensor"], r["recipe"]): r["format"] for r in run.rows if r["kind"] == "delayed"}
    delayed = [c for c in run.configs if c[1] == "delayed"]
    expected = {(s, mi, t, c[0], fmt[(t, c[0])], c[2], c[3], c[4])
                for s in steps for mi in micros[s] for t in run.tensors for c in delayed}
    got = set(run.stream_keys)
    dup = [k for k, n in run.stream_keys.items() if n > 1]
    ck.expect(not dup, "stream.csv: %d keys repeated, e.g. %s" % (len(dup), dup[:3]))
    ck.expect(got == expected,
              "stream.csv: %d (step, tensor, configuration) rows missing (e.g. %s), %d extra "
              "(e.g. %s)" % (len(expected - got), sorted(expected - got)[:3], len(got - expected),
                             sorted(got - expected)[:3]))
    ncasts = sum(len(micros[s]) for s in steps)
    ck.expect(run.stream_rows == ncasts * len(run.tensors) * len(delayed),
              "stream.csv: %d rows, expected %d (step, micro-batch) x %d tensors x %d delayed "
              "configurations" % (run.stream_rows, ncasts, len(run.tensors), len(delayed)))
    # its snapshot rows are steps.csv's rows (amax, scale); at a step of several micro-batches
    # (docs/semantics.md, issue 17) every micro-batch row is marked, carries the micro-batch's
    # own amax (amax.csv's, 0 without a row), and the first one the scale steps.csv's row used
    srow = {(r["tensor"], r["step"], cfg_of(r)): r for r in run.rows if r["kind"] == "delayed"}
    multi = {s for s in steps if len(micros[s]) > 1}
    bad = [k for k in run.stream_snapshot
           if k[:3] not in srow or
           (f32(k[3]) != srow[k[:3]]["amax"] if k[1] not in multi else
            f32(k[3]) != f32(amax_of.get((k[1], k[5], k[0]), "0"))) or
           (k[5] == min(micros[k[1]]) and f32(k[4]) != srow[k[:3]]["scale"])]
    ck.expect(not bad, "stream.csv: %d snapshot rows differ from steps.csv, e.g. %s" %
              (len(bad), bad[:3]))
    nsnap = sum(len(micros[k[1]]) for k in srow)
    ck.expect(len(run.stream_snapshot) == nsnap,
              "stream.csv: %d snapshot rows, expected %d (steps.csv's delayed rows, each once "
              "per micro-batch of its step)" % (len(run.stream_snapshot), nsnap))
    bad = [k for k in run.stream_other
           if f32(k[2]) != f32(amax_of.get((k[1], k[3], k[0]),
                                           "0" if k[1] in multi else "nan"))]
    ck.expect(not bad, "stream.csv: %d non-snapshot rows whose amax is not amax.csv's, e.g. %s" %
              (len(bad), bad[:3]))


# ------------------------------------------------------------------ the answer (first section)

SNR_TIE_DB = 0.05


def model_choice(run, bv, bs):
    """The model-scope rule (analysis.h), recomputed: a delayed configuration fits a tensor when
    its clipped values over finite values (non-warm-up snapshot rows) are <= bv and its clipped
    steps over the steps it ran (stream) <= bs; a setting (recipe, h, m, ac) covers the tensors
    it fits; per (recipe, h, ac) the smallest margin with the most covers competes; the most
    covers, then the mean p5 SNR (0.05 dB ties), the mean underflow rate, the smaller history,
    margin, max first. Returns (setting, covers, misfits, tensors with no fitting delayed
    configuration)."""
    fit = {}      # (tensor, setting) -> bool
    p5 = collections.defaultdict(list)
    under = collections.defaultdict(list)
    first = {}
    for i, k in enumerate(run.group_keys):
        tensor, recipe, kind, fmt, h, m, ac = k
        if kind != "delayed":
            continue
        live = [r for r in run.groups[k] if not r["warmup"]]
        st = steps_stats(run.groups[k])
        fin = st["finite"]
        ran, clip = run.clip_steps.get((tensor, (recipe, kind, h, m, ac)), [0, 0])
        rate = clip / ran if ran else float("nan")
        setting = (recipe, h, m, ac)
        first.setdefault(setting, i)
        fit[(tensor, setting)] = st["clipped_rate"] <= bv and rate <= bs
        if not math.isnan(st["p5"]):
            p5[setting].append(st["p5"])
        if fin:
            under[setting].append(sum(r["underflow"] for r in live) / fin)
    # a setting for the whole model must have run on every tensor (not a partial sweep, nor one
    # section of a mixed label): the tensors that have a group of it
    ran = collections.Counter((k[1], k[4], k[5], k[6]) for k in run.group_keys if k[2] == "delayed")
    settings = sorted((x for x in first if ran[x] == len(run.tensors)),
                      key=lambda x: (x[0], x[1], 0 if x[3] == "max" else 1, x[2], first[x]))
    covers = {x: sum(1 for t in run.tensors if fit.get((t, x))) for x in settings}
    mean = lambda v: sum(v) / len(v) if v else float("nan")
    cands, line_best = [], None
    for x in settings + [None]:
        if line_best and (x is None or (x[0], x[1], x[3]) != (line_best[0], line_best[1], line_best[3])):
            cands.append(line_best)
            line_best = None
        if x is not None and (line_best is None or covers[x] > covers[line_best]):
            line_best = x

    def better(a, b):  # a strictly better than b
        if covers[a] != covers[b]:
            return covers[a] > covers[b]
        pa, pb = mean(p5[a]), mean(p5[b])
        if abs(pa - pb) > SNR_TIE_DB:
            return pa > pb
        ua, ub = mean(under[a]), mean(under[b])
        if ua != ub:
            return ua < ub
        ka = (a[1], a[2], 0 if a[3] == "max" else 1, first[a])
        kb = (b[1], b[2], 0 if b[3] == "max" else 1, first[b])
        return ka < kb

    best = None
    for x in cands:
        if best is None or better(x, best):
            best = x
    if best is None or covers[best] == 0:
        return None, 0, [], len(run.tensors)
    misfits = [t for t in run.tensors if not fit.get((t, best))]
    no_fit = sum(1 for t in run.tensors if not any(fit.get((t, x)) for x in settings))
    return best, covers[best], misfits, no_fit


def check_distinct(run, report, ck):
    """Configurations that provably share every scale (delayed, one section, one margin,
    most_recent or history 1 with max) are one class: their steps.csv rows must be equal in every
    statistic; the report and run.json count the classes; the All configurations table lists
    each class once."""
    def recent(c):
        return c[1] == "delayed" and (c[4] == "most_recent" or c[2] == 1)
    classes = []
    for c in run.configs:
        for cl in classes:
            h = cl[0]
            if recent(c) and recent(h) and h[0] == c[0] and h[3] == c[3]:
                cl.append(c)
                break
        else:
            classes.append([c])
    stat_cols = ("amax", "scale", "n", "nonfinite", "overflow", "underflow", "mse", "snr", "clipped")
    for cl in classes:
        if len(cl) < 2:
            continue
        base = run.of_config(cl[0])
        for c in cl[1:]:
            other = run.of_config(c)
            for t, rows in base.items():
                orows = other.get(t, [])
                same = len(rows) == len(orows) and all(
                    all((a[k] == b[k]) or (a[k] != a[k] and b[k] != b[k]) for k in stat_cols)
                    for a, b in zip(rows, orows))
                ck.expect(same, "%s and %s are called identical but differ for %s" %
                          (cfg_label(cl[0]), cfg_label(c), t))
    n = len(classes)
    m = re.search(r"through (\d+) FP8 scaling configurations \((\d+) distinct", report)
    ck.expect(m and (int(m.group(1)), int(m.group(2))) == (len(run.configs), n),
              "the report's configuration count %s, expected %d (%d distinct)" %
              (m.group(0) if m else None, len(run.configs), n))
    with open(os.path.join(run.outdir, "run.json")) as f:
        j = json.load(f)
    ck.expect(j.get("distinct_configurations") == n,
              "run.json distinct_configurations %s, expected %d" % (j.get("distinct_configurations"), n))
    i = report.find("## All configurations")
    j = report.find("\n## ", i + 1)  # the section ends at the next heading (Cost per step, ...)
    rows = re.findall(r"^\| (?!configuration|---)[^|]+\|", report[i:j if j >= 0 else len(report)],
                      re.M)
    ck.expect(len(rows) == n, "All configurations lists %d rows, expected %d" % (len(rows), n))
    return n


def section_of(report, heading):
    i = report.find("## %s\n" % heading)
    if i < 0:
        return None
    j = report.find("\n## ", i + 1)
    return report[i:j if j >= 0 else len(report)]


def check_resolution(run, report, ck):
    """The budgets' resolution (issue 42 point 3): a budget below 1/N (N the most non-warm-up
    stream casts a tensor ran, amax > 0; the value budget: the most finite values of a tensor at
    its non-warm-up snapshot rows) allows none at all, and the answer and the recommendations
    say so with 1/N; nothing is said when the budget resolves."""
    with open(os.path.join(run.outdir, "run.json")) as f:
        ex = json.load(f)["experiment"]
    bv, bs = ex["overflow_budget"], ex["step_budget"]
    n = max((c[0] for (t, cfg), c in run.clip_steps.items()), default=0)
    v = max((steps_stats(run.groups[k])["finite"] for k in run.group_keys if k[2] == "delayed"),
            default=0)
    u, us = ("micro-batch", "micro-batches") if run.micro else ("step", "steps")
    want = []
    if n and 0 < bs < 1.0 / n:
        want.append("The step budget %.3g is below 1/%d = %.3g (%d: the most %s of the replay a "
                    "tensor ran, warm-up left out): it allows no clipped %s at all; the smallest "
                    "step budget this run resolves is %.3g." % (bs, n, 1.0 / n, n, us, u, 1.0 / n))
    if v and 0 < bv < 1.0 / v:
        want.append("The value budget %.3g is below 1/%d = %.3g (%d: the most finite values of a "
                    "tensor at the snapshot steps, warm-up left out): it allows no clipped value "
                    "at all; the smallest value budget this run resolves is %.3g." %
                    (bv, v, 1.0 / v, v, 1.0 / v))
    for name in ("The answer", "Recommendations per role and per tensor"):
        sec = section_of(report, name) or ""
        got = re.findall(r"The (?:step|value) budget \S+ is below 1/.*?resolves is \S+\.", sec)
        ck.expect(got == want, "%s: the budgets' resolution reads %s, the CSVs give %s (step "
                  "budget %g over at most %d casts, value budget %g over at most %d values)" %
                  (name, got, want, bs, n, bv, v))
    # the sensitivity table's rows (budgets x 0.1, 1, 10, capped at 1): each row below the
    # resolution says so, with 1/N; the others say nothing
    sec = section_of(report, "The answer") or ""
    cells = re.findall(r"^\| ((?:\*\*)?[0-9.e+-]+, [0-9.e+-]+[^|]*)\|", sec, re.M)
    ck.expect(len(cells) == 3, "the sensitivity table has %d rows, expected 3" % len(cells))
    for f, cell in zip((0.1, 1.0, 10.0), cells):
        sv, ss = min(bv * f, 1.0), min(bs * f, 1.0)
        sb = n and 0 < ss < 1.0 / n
        vb = v and 0 < sv < 1.0 / v
        tag = (" (both below 1/%d and 1/%d: none at all)" % (v, n) if sb and vb else
               " (step budget below 1/%d: none at all)" % n if sb else
               " (value budget below 1/%d: none at all)" % v if vb else "")
        ck.expect(cell.rstrip().endswith(tag) and ("none at all" in cell) == bool(tag),
                  "the sensitivity row of budgets x %g reads %r, expected it to end %r" %
                  (f, cell, tag))
    return want


def check_micro_words(run, report, ck):
    """Micro-batch wording (issue 42 point 6): the budgets table's header and the
    recommendations' column count micro-batches on a micro-batch run, steps otherwise; each amax
    timeline's caption counts its crosses (the tensor's clipped non-warm-up casts) in them."""
    u, us = ("micro-batch", "micro-batches") if run.micro else ("step", "steps")
    for text in ("| budgets (values, %s) |" % us, "| clipped %s (worst tensor) |" % us):
        ck.expect(text in report, "report.md lacks the header %r" % text)
    if run.micro:
        for text in ("budgets (values, steps)", "clipped steps (worst tensor)"):
            ck.expect(text not in report, "report.md still says %r on a micro-batch run" % text)
    caps = re.findall(r"^\*(\S+) at every (step|micro-batch): .*?Crosses mark the (\d+) (\w[\w-]*) "
                      r"where the largest element clipped under", report, re.M)
    ck.expect(caps, "no amax timeline caption from the stream")
    for t, src, nc, unit in caps:
        want = sum(1 for step, mi, a, sc, fmt, w in run.ref_series.get(t, [])
                   if not w and clipped(a, sc, fmt))
        ck.expect((src, unit, int(nc)) == (u, us, want),
                  "amax timeline of %s: 'at every %s ... Crosses mark the %s %s', expected every "
                  "%s, %d %s" % (t, src, nc, unit, u, want, us))


def cost_rows(report):
    """The cost section's table: mode -> its cells."""
    sec = section_of(report, "Cost per step (model)") or ""
    return {cells[0]: cells for h, rows in tables(sec) if h and h[0] == "mode"
            for cells, _ in rows}


def check_cost_micro(plain_dir, micro_dir):
    """The cost model counts micro-batches (issue 42 point 5): the same trace with a micro column
    of two micro-batches per step models twice the launches and all-reduces of the trace
    without it (TransformerEngine's bookkeeping after each micro-batch's pass), and says so."""
    errors = []
    reps = []
    for d in (plain_dir, micro_dir):
        with open(os.path.join(d, "report.md")) as f:
            reps.append(f.read())
    a, b = cost_rows(reps[0]), cost_rows(reps[1])
    if not a or set(a) != set(b):
        return ["cost section: modes %s without micro-batches, %s with" % (sorted(a), sorted(b))]
    for mode in a:
        for col, name in ((5, "kernel launches"), (6, "all-reduces")):
            if int(b[mode][col]) != 2 * int(a[mode][col]):
                errors.append("cost, %s: %s %s with 2 micro-batches per step, %s without (expected "
                              "twice)" % (mode, name, b[mode][col], a[mode][col]))
        if b[mode][3] != a[mode][3]:
            errors.append("cost, %s: the share %s with micro-batches, %s without (a step of two "
                          "passes keeps one pass's share)" % (mode, b[mode][3], a[mode][3]))
    if "x 2 micro-batches per step" not in reps[1]:
        errors.append("cost: the micro-batch run does not say 'x 2 micro-batches per step'")
    if "micro-batches per step" in reps[0]:
        errors.append("cost: the run without micro-batches speaks of micro-batches per step")
    return errors


def answer_section(report):
    i = report.find("## The answer\n")
    if i < 0:
        return None
    j = report.find("\n## ", i + 1)
    return report[i:j if j >= 0 else len(report)]


def check_answer(run, report, ck):
    """The first section's TE recipe line, its fit count and misfits, and the sensitivity rows,
    against model_choice over the CSVs."""
    sec = answer_section(report)
    if not ck.expect(sec is not None, "report.md has no '## The answer' section first"):
        return
    ck.expect(report.find("## The answer") < report.find("## Findings"),
              "The answer does not come before the Findings")
    with open(os.path.join(run.outdir, "run.json")) as f:
        ex = json.load(f)["experiment"]
    bv, bs = ex["overflow_budget"], ex["step_budget"]
    best, cov, misfits, _ = model_choice(run, bv, bs)
    m = re.search(r'DelayedScaling\(fp8_format=Format\.(\w+), amax_history_len=(\d+), '
                  r'margin=(-?\d+), amax_compute_algo="(\w+)"\)', sec)
    if not ck.expect(m is not None and best is not None, "no DelayedScaling line (or nothing fits)"):
        return
    got = (int(m.group(2)), int(m.group(3)), m.group(4))
    ck.expect(got == (best[1], best[2], best[3]),
              "the recipe line says %s, the CSVs give history_len %d, margin %d, %s" %
              (got, best[1], best[2], best[3]))
    fmts = {k[3] for k in run.group_keys if k[2] == "delayed" and (k[1], k[4], k[5], k[6]) == best}
    want_fmt = "HYBRID" if fmts == {"e4m3", "e5m2"} else fmts.pop().upper()
    ck.expect(m.group(1) == want_fmt, "Format.%s, expected Format.%s" % (m.group(1), want_fmt))
    f = re.search(r"for \*\*(\d+) of (\d+) tensors\*\*", sec)
    ck.expect(f and (int(f.group(1)), int(f.group(2))) == (cov, len(run.tensors)),
              "fits: %s, expected %d of %d" % (f.group(0) if f else None, cov, len(run.tensors)))
    if misfits:
        listed = re.findall(r"^\| (\S+) \| \S+ \| (?:margin|current)", sec, re.M)
        ck.expect(listed == misfits, "misfits listed %s, expected %s" % (listed, misfits))
    rows = re.findall(r"^\| (?:\*\*)?([0-9.e+-]+), ([0-9.e+-]+)(?:\*\*)?(?: \(this report\))?(?: \([^)]*: none at all\))? \| "
                      r"(?:history_len (\d+), margin (-?\d+), (\w+)|none: current scaling) \| "
                      r"(\d+) of (\d+) \| (\d+) \|$", sec, re.M)
    ck.expect(len(rows) == 3, "sensitivity table: %d rows, expected 3" % len(rows))
    for fac, row in zip((0.1, 1.0, 10.0), rows):
        b2, s2 = min(bv * fac, 1.0), min(bs * fac, 1.0)
        x, c2, _, nof = model_choice(run, b2, s2)
        ck.expect(abs(float(row[0]) - b2) <= 1e-6 * b2 and abs(float(row[1]) - s2) <= 1e-6 * s2,
                  "sensitivity budgets %s, %s vs %g, %g" % (row[0], row[1], b2, s2))
        if x is None:
            ck.expect(row[2] == "", "x%g: a setting where none fits" % fac)
        else:
            ck.expect((int(row[2]), int(row[3]), row[4]) == (x[1], x[2], x[3]),
                      "x%g: setting %s, expected %s" % (fac, row[2:5], x[1:]))
        ck.expect(int(row[5]) == c2 and int(row[7]) == nof,
                  "x%g: fits %s and %s needing current, expected %d and %d" %
                  (fac, row[5], row[7], c2, nof))


def findings_section(report):
    lines = report.split("\n")
    try:
        i = lines.index("## Findings")
    except ValueError:
        return None
    j = i + 1
    while j < len(lines) and not lines[j].startswith("## "):
        j += 1
    # the plots placed in the section (an image line, its caption line in italics) are not
    # the Findings' text: their numbers are the plots' own
    body, skip = [], False
    for ln in lines[i + 1:j]:
        if ln.startswith("!["):
            skip = True
            continue
        if skip and ln.startswith("*") and ln.endswith("*"):
            skip = False
            continue
        skip = False
        body.append(ln)
    return "\n".join(body) + "\n"


DENSE_INI = """; a second trace with a dense amax stream: amax.csv at every step, a snapshot every 10
[trace]
path = synth:llm
synth_steps = 150
synth_seed = 5
[recipe.delayed]
kind = delayed
format = hybrid
history_len = 1, 16, 1024
margin = 0, 1, 2
amax_compute = max
[recipe.current]
kind = current
format = hybrid
"""


MICRO_INI = """; the dense trace under gradient accumulation: two micro-batches at every step;
; a step budget under 1/(micro-batches a tensor ran): the report says it allows none
[trace]
path = {path}
[analysis]
step_budget = 0.001
[recipe.delayed]
kind = delayed
format = hybrid
history_len = 1, 16, 1024
margin = 0, 1
amax_compute = max
[recipe.current]
kind = current
format = hybrid
"""


SPIKE_STEP, SPIKE_TENSOR = 57, "layers.1.fc1.input"  # not a snapshot step (those are 8k)


def make_micro_trace(src, dst):
    """A copy of trace `src` whose amax.csv has two micro-batches at every step: micro 0 the
    original amax, micro 1 the amax times a factor in [1/4, 4] drawn per row (a fixed
    generator), so that some micro-batches jump past the history and clip; and at step 57,
    micro-batch 1, layers.1.fc1.input's amax times 2^6: a clipped cast at a step without a
    snapshot that overshoots every other (the worst event of the run, issue 42 point 4)."""
    os.makedirs(dst)
    for f in os.listdir(src):
        if f != "amax.csv":
            shutil.copy(os.path.join(src, f), os.path.join(dst, f))
    rng = np.random.default_rng(17)
    with open(os.path.join(src, "amax.csv"), newline="") as fi, \
            open(os.path.join(dst, "amax.csv"), "w") as fo:
        fo.write("step,tensor,amax,micro\n")
        for d in csv.DictReader(fi):
            a = np.float32(d["amax"])
            b = np.float32(a * np.float32(2.0 ** rng.uniform(-2, 2)))
            if (int(d["step"]), d["tensor"]) == (SPIKE_STEP, SPIKE_TENSOR):
                b = np.float32(b * np.float32(64.0))
            fo.write("%s,%s,%s,0\n%s,%s,%.9g,1\n" % (d["step"], d["tensor"], d["amax"],
                                                     d["step"], d["tensor"], float(b)))


def run_fp8lab(binary, ini, outdir):
    cmd = [binary, "run", ini, "--out", outdir, "--force", "--quiet"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        print("FAILED: %s: exit %d\n%s" % (" ".join(cmd), p.returncode, p.stdout))
        return False
    return True


def check_run(outdir):
    """Every check on one run folder; returns (errors, verified numbers, stream rows)."""
    with open(os.path.join(outdir, "report.md")) as f:
        report = f.read()
    section = findings_section(report)
    if section is None:
        return ["report.md has no '## Findings' section"], 0, 0
    run = Run(outdir)
    global T, ROLE_HEADER, TENSOR_HEADER
    T = make_templates(run.micro)
    ROLE_HEADER, TENSOR_HEADER = make_headers(run.micro)
    ack = Checker(report)
    check_answer(run, report, ack)
    ndistinct = check_distinct(run, report, ack)
    if os.path.basename(os.path.normpath(outdir)) == "quickstart":
        ack.expect(ndistinct == 13, "the quickstart has %d distinct configurations, expected 13 "
                   "(3 margins x (most_recent at any L = L=1 max) + 3 x 3 max at L=16, 128, 1024 "
                   "+ current)" % ndistinct)
    if os.path.basename(os.path.normpath(outdir)) == "micro":
        # the constructed spike off the snapshot steps must be the worst event
        casts = worst_casts(run)
        ack.expect([(c[0], c[1], c[2], c[7]) for c in casts] == [(SPIKE_TENSOR, SPIKE_STEP, 1, None)],
                   "the micro run's worst cast is %s, expected the constructed one (%s, step %d, "
                   "micro-batch 1)" % ([c[:3] for c in casts], SPIKE_TENSOR, SPIKE_STEP))
        ack.expect("**%s at step %d, micro-batch 1** reached amax" % (SPIKE_TENSOR, SPIKE_STEP)
                   in report, "the report does not name the constructed worst event")
    check_resolution(run, report, ack)
    check_micro_words(run, report, ack)
    ck = Checker(section)
    check_findings(run, section, ck)
    check_stream_rows(run, ck)
    # no number left unverified
    names = set(run.tensors) | {cfg_label(c) for c in run.configs}
    left = ck.residue(names)
    for mo in re.finditer(r"\d+", left):
        a, b = max(0, mo.start() - 50), min(len(section), mo.end() + 50)
        ck.fail("an unverified number in the Findings section: %r in ...%s..." %
                (section[mo.start():mo.end()], section[a:b].replace("\n", " ")))
    return ack.errors + ck.errors, len(ck.spans), run.stream_rows


def main():
    args = sys.argv[1:]
    outdirs = []
    if len(args) == 3 and args[1] == "--outdir":
        outdirs = [args[2]]
    elif len(args) != 1:
        print(__doc__)
        return 2
    tmp = None
    if not outdirs:
        keep = os.environ.get("FP8LAB_KEEP_TMP")
        if keep:
            os.makedirs(keep, exist_ok=True)
            base = keep
        else:
            tmp = tempfile.mkdtemp(prefix="fp8lab_findings_")
            base = tmp
        outdirs = [os.path.join(base, "quickstart"), os.path.join(base, "dense")]
        dense_ini = os.path.join(base, "dense.ini")
        with open(dense_ini, "w") as f:
            f.write(DENSE_INI)
        if not run_fp8lab(args[0], os.path.join(ROOT, "experiments", "quickstart.ini"), outdirs[0]):
            return 1
        if not run_fp8lab(args[0], dense_ini, outdirs[1]):
            return 1
        # micro-batches (issue 25 point 3): the report counts them as such
        micro_trace = os.path.join(base, "micro_trace")
        shutil.rmtree(micro_trace, ignore_errors=True)
        make_micro_trace(os.path.join(outdirs[1], "synth_trace"), micro_trace)
        micro_ini = os.path.join(base, "micro.ini")
        with open(micro_ini, "w") as f:
            f.write(MICRO_INI.format(path=micro_trace))
        outdirs.append(os.path.join(base, "micro"))
        if not run_fp8lab(args[0], micro_ini, outdirs[2]):
            return 1
    try:
        failed = 0
        if len(outdirs) == 3:  # the dense trace, with and without micro-batches
            errors = check_cost_micro(outdirs[1], outdirs[2])
            for e in errors:
                print("FAILED: " + e)
            failed |= bool(errors)
            if not errors:
                print("ok: the cost section's launches and all-reduces double with 2 micro-batches "
                      "per step")
        for outdir in outdirs:
            errors, nverified, nstream = check_run(outdir)
            if errors:
                print("FAILED: %d mismatches between report.md's answer and Findings and the CSVs "
                      "of %s:" % (len(errors), outdir))
                for e in errors:
                    print("  - " + e)
                failed = 1
            else:
                print("ok: %s: the TE recipe line and the budget sensitivity agree with the CSVs; "
                      "every number of the Findings section (%d verified) agrees with steps.csv and "
                      "stream.csv; step 0 is warm-up; stream.csv has one row per step x tensor x "
                      "delayed configuration (%d rows)" % (outdir, nverified, nstream))
        return failed
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
