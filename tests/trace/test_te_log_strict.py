#!/usr/bin/env python3
"""`fp8lab import-te` takes only what TransformerEngine writes, and no trace input blocks on a
FIFO (issue 41: case 2 and item 9; docs/semantics.md, "TransformerEngine debug logs").

The logs are written in TE's exact format (test_te_logs.py's te_line: nvidia-dlfw-inspect's
logging.py, `value={:.4f}`, every line ended by a newline), then changed the way a killed job
or a hand edit changes them. Each refused case: exit 2, exactly one stderr line naming the file
and line, nothing written. Each accepted case: the exact amax.csv rows, te_log.json's counts.

  - a last line cut to `value=6.62` (TE wrote 6.6250) without a newline: an error at its
    file:line; with --drop-cut-line the other rows exactly as written, cut_lines_dropped 1 and
    a warning naming file:line;
  - two iteration=/value= pairs in one line (two writes run together), whitespace in the name;
  - values with 3 and 5 decimals; a 40-digit value (beyond float32: strtof overflows); FLT_MAX's
    own decimal, inf and -inf still taken;
  - FIFOs (and a device) where a trace input is read: a rank log (import-te), amax.csv,
    tokens.csv, an npy and a safetensors snapshot, te_log.json (inspect and run), and
    te_overflows.csv (the report): each `<path>: not a regular file`, exit 2, within 20 s (a
    hang is a failure: the process is killed at 20 s and the case fails);
  - an empty rank log and a rank whose cur_amax all read 0.0000: a warning naming the rank and
    its file, te_log.json's ranks_without_amax, and the summary line's tensor count over every
    rank.

Usage: test_te_log_strict.py FP8LAB_BIN. Standard library only.
"""
import csv
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_te_logs import check, FAILS, run_cases  # noqa: E402,F401  (one failure list)
import test_te_logs as TL  # noqa: E402  (te_line: TE's exact line; f32: strtof of a decimal)

BIN = os.path.abspath(sys.argv[1])
LIMIT = 20  # seconds: a command that blocks on a FIFO is killed then, and the case fails
CUT = "cut off: the last line has no newline (a write cut off when the job ended?)"




def run(args, cwd=None):
    """(exit status, stdout, stderr); exit None when the command did not end within LIMIT."""
    try:
        p = subprocess.run([BIN] + args, cwd=cwd, capture_output=True, text=True, timeout=LIMIT)
    except subprocess.TimeoutExpired:
        return None, "", "(killed after %d s: it blocked)" % LIMIT
    return p.returncode, p.stdout, p.stderr


def log_dir(tmp, label, ranks):
    """tmp/label/nvdlfw_inspect_statistics_logs/ with one log per rank: ranks[r] is the text
    (str) of rank r's log, or a callable making the path itself (a FIFO); the log paths."""
    d = os.path.join(tmp, label, "nvdlfw_inspect_statistics_logs")
    os.makedirs(d)
    paths = []
    for r, text in enumerate(ranks):
        p = os.path.join(d, "nvdlfw_inspect_globalrank-%d.log" % r)
        if callable(text):
            text(p)
        else:
            with open(p, "w") as f:
                f.write(text)
        paths.append(p)
    return os.path.join(tmp, label), paths


def amax_rows(path):
    with open(path) as f:
        return list(csv.reader(f))


def want_rows(rows):
    """amax.csv as fp8lab writes it from (step, tensor, printed value): "%.9g" of the float32
    nearest the decimal, by step then name."""
    out = [["step", "tensor", "amax"]]
    for it, name, text in sorted(rows, key=lambda x: (x[0], x[1])):
        v = TL.f32(text)
        out.append([str(it), name, "inf" if v == float("inf") else "%.9g" % v])
    return out


def refused(tmp, label, ranks, line_of, what, extra=()):
    """import-te of these logs: exit 2, the one stderr line `fp8lab import-te: <file>:<line>:
    <what>...` (line_of: (rank, line), or (rank, None) for a message about the file), and no
    trace folder."""
    logs, paths = log_dir(tmp, label, ranks)
    out = os.path.join(tmp, label + "_trace")
    rc, so, se = run(["import-te", logs, out] + list(extra))
    r, line = line_of
    head = "fp8lab import-te: %s%s: %s" % (paths[r], "" if line is None else ":%d" % line, what)
    check(rc == 2, "%s: exit %s, want 2 (%r)" % (label, rc, se))
    check(se.count("\n") == 1 and se.startswith(head),
          "%s: stderr %r, want one line starting %r" % (label, se, head))
    check(not os.path.exists(out), "%s: nothing written, yet %s exists" % (label, out))
    return paths


def accepted(tmp, label, ranks, extra=()):
    """import-te of these logs, exit 0: (trace folder, stdout, stderr, te_log.json, paths)."""
    logs, paths = log_dir(tmp, label, ranks)
    out = os.path.join(tmp, label + "_trace")
    rc, so, se = run(["import-te", logs, out] + list(extra))
    check(rc == 0, "%s: exit %s, want 0 (%r)" % (label, rc, se))
    meta = {}
    if rc == 0:
        with open(os.path.join(out, "te_log.json")) as f:
            meta = json.load(f)
    return out, so, se, meta, paths


# three tensors at iterations 0 and 5, values in TE's four decimals
GOOD = [(0, "blk.fc1_activation_cur_amax", 1.5), (0, "blk.fc1_weight_cur_amax", 0.25),
        (0, "blk.fc1_gradient_cur_amax", 0.0123), (5, "blk.fc1_activation_cur_amax", 2.75),
        (5, "blk.fc1_weight_cur_amax", 0.5), (5, "blk.fc1_gradient_cur_amax", 0.0456)]
ROLE = {"activation": "input", "weight": "weight", "gradient": "grad_output"}


def good_text(rows=GOOD):
    return "".join(TL.te_line(n, it, v) for it, n, v in rows)


def good_rows(rows=GOOD):
    """What amax.csv holds for the rows (the printed text, rows of 0.0000 left out)."""
    out = []
    for it, n, v in rows:
        layer, t = n.split("_")[0], n.split("_")[1]
        if "%.4f" % v != "0.0000":
            out.append((it, "%s.%s" % (layer, ROLE[t]), "%.4f" % v))
    return out


def case_cut_line(tmp):
    """The issue's case 2: the job was killed while TE wrote `... value=6.6250`; the log ends
    in `value=6.62`, no newline. Refused at that line; --drop-cut-line drops it (and says so)."""
    last = TL.te_line("blk.fc1_activation_cur_amax", 10, 6.625)
    check(last.endswith("value=6.6250\n"), "the line TE wrote: %r" % last)
    text = good_text() + last[:last.index("6.62") + 4]
    n = len(GOOD) + 1
    refused(tmp, "cut", [text], (0, n), CUT + "; --drop-cut-line drops it")
    out, so, se, meta, paths = accepted(tmp, "cut_drop", [text], ["--drop-cut-line"])
    if not meta:
        return
    check(amax_rows(os.path.join(out, "amax.csv")) == want_rows(good_rows()),
          "--drop-cut-line: amax.csv %s, want the other rows exactly" %
          amax_rows(os.path.join(out, "amax.csv")))
    check(meta.get("cut_lines_dropped") == 1, "cut_lines_dropped %s, want 1" %
          meta.get("cut_lines_dropped"))
    check(meta.get("last_iteration") == 5, "the dropped line's iteration 10 is not there: %s" %
          meta.get("last_iteration"))
    warn = "fp8lab import-te: %s:%d: %s: dropped (--drop-cut-line)\n" % (paths[0], n, CUT)
    check(se == warn, "--drop-cut-line: stderr %r, want %r" % (se, warn))
    # a log that ends with its newline: nothing dropped, the key says 0
    out, so, se, meta, paths = accepted(tmp, "whole", [good_text()], ["--drop-cut-line"])
    check(meta.get("cut_lines_dropped") == 0 and se == "", "whole log: %s %r" %
          (meta.get("cut_lines_dropped"), se))
    print("cut line: refused at line %d; dropped with --drop-cut-line, %d rows kept" %
          (n, len(good_rows())))


def case_pairs_and_name(tmp):
    """One iteration=/value= pair per line, after a name without whitespace."""
    stamp = "2025-06-03 12:34:56,789 - INFO - "
    two = stamp + "blk.fc1_activation_cur_amax iteration=5 value=1.0 iteration=7 value=2.0000\n"
    refused(tmp, "two_pairs", [good_text() + two], (0, len(GOOD) + 1),
            "more than one iteration=/value= pair")
    run_on = TL.te_line("blk.fc1_weight_cur_amax", 7, 1.0).rstrip("\n") + \
        TL.TABS + "iteration=000008" + TL.TABS + "value=2.0000\n"
    refused(tmp, "run_on", [good_text() + run_on], (0, len(GOOD) + 1),
            "more than one iteration=/value= pair")
    spaced = TL.te_line("blk.fc1_activation_cur amax", 7, 1.0)
    refused(tmp, "name_space", [good_text() + spaced], (0, len(GOOD) + 1),
            "whitespace in the statistic's name")


def case_decimals(tmp):
    """A finite value has exactly four decimals (`{:.4f}`); inf and -inf as Python prints them."""
    for k, text in ((3, "1.500"), (5, "1.50000"), (0, "15"), (1, "1.5")):
        line = TL.te_line("blk.fc1_activation_cur_amax", 10, 1.5).replace("1.5000", text)
        check(("value=%s\n" % text) in line, "the planted value %r" % line)
        refused(tmp, "dec_%s" % text, [good_text() + line], (0, len(GOOD) + 1),
                "value '%s' has %d decimals: TE writes exactly four" % (text, k))
    # a statistic other than cur_amax follows the rule too
    line = TL.te_line("blk.fc1_activation_dynamic_range", 10, 1.5).replace("1.5000", "1.50")
    refused(tmp, "dec_other", [good_text() + line], (0, len(GOOD) + 1),
            "value '1.50' has 2 decimals")
    # inf and -inf kept: an inf cur_amax is a row, a -inf dynamic_range counted
    rows = GOOD + [(10, "blk.fc1_activation_cur_amax", float("inf"))]
    text = good_text(rows) + TL.te_line("blk.fc1_weight_dynamic_range", 10, float("-inf"))
    check("value=inf\n" in text and "value=-inf\n" in text, "Python prints inf, -inf")
    out, so, se, meta, paths = accepted(tmp, "inf", [text])
    if meta:
        got = amax_rows(os.path.join(out, "amax.csv"))
        want = want_rows(good_rows() + [(10, "blk.fc1.input", "inf")])
        check(got == want, "inf: amax.csv %s, want %s" % (got, want))
        check(meta["other_statistics"] == {"dynamic_range": 1}, meta.get("other_statistics"))


def case_float32(tmp):
    """A decimal beyond float32 cannot come from TE (its statistics are float32): an error.
    FLT_MAX's own decimal is the largest TE can print, and is taken."""
    big = "1234567890123456789012345678901234567890.0000"  # 40 digits, 1.2e39 > FLT_MAX
    check(len(big.split(".")[0]) == 40, "40 digits")
    line = TL.te_line("blk.fc1_activation_cur_amax", 10, 1.5).replace("1.5000", big)
    refused(tmp, "f32_40", [good_text() + line], (0, len(GOOD) + 1),
            "value '%s' is beyond float32" % big)
    # 2^128 (the overflow threshold is FLT_MAX + half an ulp: 2^128 - 2^103), written in full
    line = TL.te_line("blk.fc1_weight_l1_norm", 10, 1.5).replace("1.5000", "%d.0000" % 2 ** 128)
    refused(tmp, "f32_2p128", [good_text() + line], (0, len(GOOD) + 1), "value '%d.0000' is "
            "beyond float32" % 2 ** 128)
    fmax = (2 - 2 ** -23) * 2 ** 127
    line = TL.te_line("blk.fc1_activation_cur_amax", 10, fmax)
    check(line.endswith("value=340282346638528859811704183484516925440.0000\n"), line)
    out, so, se, meta, paths = accepted(tmp, "f32_max", [good_text() + line])
    if meta:
        got = amax_rows(os.path.join(out, "amax.csv"))
        check(got[-1] == ["10", "blk.fc1.input", "3.40282347e+38"], "FLT_MAX row %s" % got[-1])
        check(len(got) == len(good_rows()) + 2, "rows %d" % len(got))


def fifo(path):
    os.mkfifo(path)


def case_fifo_log(tmp):
    """A FIFO (or a device) named like a rank log: exit 2, `<path>: not a regular file`."""
    refused(tmp, "fifo_log", [good_text(), fifo], (1, None), "not a regular file")
    refused(tmp, "dev_log", [lambda p: os.symlink("/dev/null", p)], (0, None),
            "not a regular file")


AMAX = "step,tensor,amax\n0,blk.fc1.input,1.5\n1,blk.fc1.input,2.5\n2,blk.fc1.input,2\n"
INI = ("[trace]\npath = %s\n[recipe.delayed]\nkind = delayed\nformat = hybrid\n"
       "history_len = 1\nmargin = 0\n")


def trace_with(tmp, label, files):
    """A trace folder: files name -> text (str) or fifo; the experiment file running it."""
    d = os.path.join(tmp, label)
    os.makedirs(d)
    for name, what in files.items():
        p = os.path.join(d, name)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        if what is fifo:
            fifo(p)
        else:
            with open(p, "w") as f:
                f.write(what)
    ini = os.path.join(tmp, label + ".ini")
    with open(ini, "w") as f:
        f.write(INI % d)
    return d, ini


def case_fifo_trace(tmp):
    """inspect and run on a trace whose amax.csv, tokens.csv, snapshot or te_log.json is a
    FIFO: exit 2, one line `fp8lab: <path>: not a regular file`, no run folder."""
    cases = {"amax.csv": {"amax.csv": fifo},
             "tokens.csv": {"amax.csv": AMAX, "tokens.csv": fifo},
             "step_0/blk.fc1.input.npy": {"step_0/blk.fc1.input.npy": fifo},
             "step_0.safetensors": {"step_0.safetensors": fifo},
             "te_log.json": {"amax.csv": AMAX, "te_log.json": fifo}}
    for k, (bad, files) in enumerate(cases.items()):
        d, ini = trace_with(tmp, "fifo_trace_%d" % k, files)
        line = "fp8lab: %s/%s: not a regular file\n" % (d, bad)
        rc, so, se = run(["inspect", d])
        check(rc == 2 and se == line, "inspect, FIFO %s: exit %s %r, want 2 %r" %
              (bad, rc, se, line))
        out = os.path.join(tmp, "fifo_run_%d" % k)
        rc, so, se = run(["run", ini, "--out", out, "--quiet", "--no-report", "--threads", "1"])
        check(rc == 2 and se == line and not os.path.exists(out),
              "run, FIFO %s: exit %s %r, want 2 %r and no %s" % (bad, rc, se, line, out))
    # te_overflows.csv, read for the report's TE section: the report refuses it
    tel = json.dumps({"interval": 1, "zero_values": 0, "coarse_values": 0})
    d, ini = trace_with(tmp, "fifo_ovf", {"amax.csv": AMAX, "te_log.json": tel,
                                          "te_overflows.csv": fifo})
    out = os.path.join(tmp, "fifo_ovf_run")
    rc, so, se = run(["run", ini, "--out", out, "--quiet", "--threads", "1"])
    what = "%s/te_overflows.csv: not a regular file\n" % d
    check(rc == 2 and se.count("\n") == 1 and se.endswith(what) and
          not os.path.exists(os.path.join(out, "report.md")),
          "run with the report, FIFO te_overflows.csv: exit %s %r, want 2 and ...%r" %
          (rc, se, what))
    print("FIFOs: a log, %s, te_overflows.csv: each exit 2 within %d s" %
          (", ".join(cases), LIMIT))


def case_ranks_without_amax(tmp):
    """Item 9: an empty rank log, and a rank whose cur_amax all read 0.0000, are warned about
    (rank and file), listed in ranks_without_amax; the summary counts every rank's tensors."""
    # rank 0 empty, rank 1 logs the three tensors (today: "of 0 tensors", no warning)
    out, so, se, meta, paths = accepted(tmp, "empty_rank", ["", good_text()])
    if meta:
        warn = ("fp8lab import-te: global rank 0 (%s): no amax row: the log is empty "
                "(te_log.json's ranks_without_amax)\n" % paths[0])
        check(se == warn, "empty rank: stderr %r, want %r" % (se, warn))
        check(meta.get("ranks_without_amax") == [0], "ranks_without_amax %s" %
              meta.get("ranks_without_amax"))
        check(so.startswith("fp8lab: wrote 6 amax rows of 3 tensors from 2 rank logs "),
              "summary %r: 6 rows of 3 tensors" % so)
        check(amax_rows(os.path.join(out, "rank_0", "amax.csv")) == [["step", "tensor", "amax"]]
              and amax_rows(os.path.join(out, "rank_1", "amax.csv")) == want_rows(good_rows()),
              "empty rank: the ranks' amax.csv")
    # rank 0 logs the activation only; rank 1 logs all three, every cur_amax 0.0000
    r0 = [g for g in GOOD if "activation" in g[1]]
    r1 = [(it, n, 0.00004) for it, n, _ in GOOD]
    out, so, se, meta, paths = accepted(tmp, "zero_rank", [good_text(r0), good_text(r1)])
    if meta:
        lines = se.splitlines(True)
        warn = ("fp8lab import-te: global rank 1 (%s): no amax row: all 6 cur_amax values read "
                "0.0000 (te_log.json's ranks_without_amax)\n" % paths[1])
        check(len(lines) == 2 and lines[0] == warn and
              lines[1].startswith("fp8lab import-te: 6 cur_amax values read 0.0000"),
              "zero rank: stderr %r, want %r then the 0.0000 count" % (se, warn))
        check(meta.get("ranks_without_amax") == [1], "ranks_without_amax %s" %
              meta.get("ranks_without_amax"))
        check(so.startswith("fp8lab: wrote 2 amax rows of 1 tensors from 2 rank logs "),
              "summary %r: 2 rows of 1 tensor" % so)
    # the same tensors split over two ranks: the count is over both (rank 0's alone is 1)
    r1 = [g for g in GOOD if "activation" not in g[1]]
    out, so, se, meta, paths = accepted(tmp, "split_rank", [good_text(r0), good_text(r1)])
    if meta:
        check(so.startswith("fp8lab: wrote 6 amax rows of 3 tensors from 2 rank logs ") and
              se == "" and meta.get("ranks_without_amax") == [],
              "split ranks: %r %r %s" % (so, se, meta.get("ranks_without_amax")))
    print("ranks without amax: warned, listed; tensors counted over every rank")


def main():
    run_cases("fp8lab-te-strict-", (case_cut_line, case_pairs_and_name, case_decimals, case_float32,
                     case_fifo_log, case_fifo_trace, case_ranks_without_amax), "te log strict")


if __name__ == "__main__":
    main()
