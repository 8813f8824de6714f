#!/usr/bin/env python3
"""peer_sweep.py: the numpy + ml_dtypes peer of `fp8lab run` for bench/sweep.sh.

What a user without fp8lab would write to sweep TransformerEngine's delayed scaling over a
captured trace: read the safetensors snapshots and amax.csv with numpy, run the delayed
recurrence over every step, and at every snapshot step quantize every selected tensor under
every configuration, one configuration after the other (no sharing between configurations
that happen to have the same scale, no histograms): y = RN32(x * s), saturate to +-max
(ml_dtypes' astype does not saturate: E4M3 overflows to NaN, E5M2 to inf; NaN stays NaN),
cast with ml_dtypes (round to nearest even), decode, xhat = RN32(decode * RN32(1 / s)); count
and sum with numpy. With [analysis] gemm on, also the GEMM errors of every layer triplet and
configuration (fprop / dgrad / wgrad of the dequantized operands in a float32 matmul against
the float64 matmul of the originals, rel_error = ||Y - Yref||_F / ||Yref||_F).

It uses nothing of fp8lab (no code, no outputs) to do its work; the semantics are those of
../shared/RECIPES.md and docs/reference.md ("Traces"), docs/outputs.md (gemm.csv) as a user
reads them.

Usage:
  peer_sweep.py run EXP.ini [--trace DIR] [--totals CSV] [--gemm CSV]
      replay; print per configuration (label, history_len, margin, amax_compute) the rows,
      overflow and underflow summed over all tensors and snapshot steps. --totals writes the
      per tensor and configuration totals (for `check`), --gemm the GEMM errors.
  peer_sweep.py check TOTALS.csv FP8LAB_OUTDIR [--gemm PEER_GEMM.csv]
      compare with an fp8lab output directory: summary.csv summed per configuration (rows,
      n, nonfinite, zeros, overflow, underflow, subnormal exactly, per tensor as well; the
      squared-error sum to 1e-6 relative) and, with --gemm, gemm.csv row for row (rel_error
      to 1e-3 relative, absolute floor 1e-7). Exit 0 = equal, 1 = different, 2 = error.

The experiment file is read with configparser: [trace] path (relative to the file; a single
trace directory, not synth: or a multi-rank run folder), steps, tensors (comma list of
fnmatch globs); [recipe.*] sections of kind delayed (format, history_len, margin,
amax_compute, each a comma list: Cartesian product, format slowest, amax_compute fastest);
[analysis] gemm, gemm_max_tokens, gemm_error = exact. Anything else it does not model is an error (exit 2).
"""
import os

# Single-threaded like `fp8lab --threads 1` (which also runs OpenBLAS on one thread); must be
# set before numpy loads OpenBLAS. An explicit setting wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import configparser  # noqa: E402
import csv  # noqa: E402
import fnmatch  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402

F32 = np.float32
FLT_MAX = np.finfo(np.float32).max

# format -> (ml_dtypes type, max finite, smallest normal)
FORMATS = {
    "e4m3": (ml_dtypes.float8_e4m3fn, F32(448.0), F32(2.0 ** -6)),
    "e5m2": (ml_dtypes.float8_e5m2, F32(57344.0), F32(2.0 ** -14)),
}
FWD = ("input", "weight", "output")
BWD = ("grad_output", "grad_input")
# counters per (tensor, configuration): rows, n, nonfinite, zeros, overflow, underflow, subnormal
COUNTS = ("rows", "n", "nonfinite", "zeros", "overflow", "underflow", "subnormal")
SUMS = ("err_sum", "x2_sum")     # sum (x - xhat)^2 and sum x^2 over finite x, float64


class Error(Exception):
    pass


# ----------------------------------------------------------------------------- experiment


class Config:
    def __init__(self, label, fmt, history_len, margin, amax_compute):
        self.label, self.fmt = label, fmt
        self.history_len, self.margin, self.amax_compute = history_len, margin, amax_compute

    def key(self):
        return (self.label, str(self.history_len), str(self.margin), self.amax_compute)


def _items(text):
    return [v.strip() for v in text.split(",") if v.strip()]


def read_experiment(path):
    cp = configparser.ConfigParser(inline_comment_prefixes=(";", "#"), interpolation=None)
    cp.optionxform = str
    with open(path, encoding="utf-8") as f:
        cp.read_file(f)
    base = os.path.dirname(os.path.abspath(path))
    exp = dict(trace=None, steps=None, tensors=None, gemm=True, gemm_max_tokens=1024,
               configs=[])
    for sec in cp.sections():
        kv = cp[sec]
        if sec == "trace":
            for k in kv:
                if k not in ("path", "steps", "tensors"):
                    raise Error("[trace] %s: not modelled by the peer" % k)
            if "path" in kv:
                if kv["path"].startswith("synth:"):
                    raise Error("[trace] path: synth: is not modelled; generate the trace first")
                exp["trace"] = os.path.normpath(os.path.join(base, kv["path"]))
            if "steps" in kv:
                m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*(?::\s*(\d+)\s*)?)?", kv["steps"])
                if not m:
                    raise Error("[trace] steps: bad selection %r" % kv["steps"])
                a = int(m.group(1))
                b = int(m.group(2)) if m.group(2) else a
                st = int(m.group(3)) if m.group(3) else 1
                exp["steps"] = (a, b, st)
            if "tensors" in kv:
                exp["tensors"] = _items(kv["tensors"])
        elif sec == "analysis":
            for k in kv:
                if k == "gemm":
                    exp["gemm"] = cp.getboolean(sec, k)
                elif k == "gemm_max_tokens":
                    exp["gemm_max_tokens"] = int(kv[k])
                elif k == "gemm_error":  # the peer computes every entry: exact only
                    if kv[k].strip() != "exact":
                        raise Error("[analysis] gemm_error = %s: the peer models exact only"
                                    % kv[k].strip())
                elif k != "overflow_budget":   # a report setting: no effect on the replay
                    raise Error("[analysis] %s: not modelled by the peer" % k)
        elif sec.startswith("recipe."):
            label = sec[len("recipe."):]
            if kv.get("kind", "").strip() != "delayed":
                raise Error("[%s] kind %r: the peer models kind = delayed only"
                            % (sec, kv.get("kind")))
            for k in kv:
                if k not in ("kind", "format", "history_len", "margin", "amax_compute"):
                    raise Error("[%s] %s: not modelled by the peer" % (sec, k))
            for fmt in _items(kv.get("format", "hybrid")):
                for h in _items(kv.get("history_len", "1024")):
                    for m in _items(kv.get("margin", "0")):
                        for a in _items(kv.get("amax_compute", "max")):
                            if fmt not in ("hybrid", "e4m3", "e5m2") or int(h) < 1 or \
                                    a not in ("max", "most_recent"):
                                raise Error("[%s] bad value" % sec)
                            exp["configs"].append(Config(label, fmt, int(h), int(m), a))
        elif sec != "output":
            raise Error("[%s]: not modelled by the peer" % sec)
    if exp["trace"] is None:
        raise Error("%s: no [trace] path" % path)
    if not exp["configs"]:
        raise Error("%s: no [recipe.*] section" % path)
    return exp


def step_selected(exp, t):
    if exp["steps"] is None:
        return True
    a, b, st = exp["steps"]
    return a <= t <= b and (t - a) % st == 0


def tensor_selected(exp, name):
    return exp["tensors"] is None or any(fnmatch.fnmatchcase(name, g) for g in exp["tensors"])


def role_of(name):
    return name.rsplit(".", 1)[-1]


def format_of(cfg, name):
    if cfg.fmt != "hybrid":
        return cfg.fmt
    r = role_of(name)
    if r in FWD:
        return "e4m3"
    if r in BWD:
        return "e5m2"
    raise Error("format hybrid: tensor %s has no known role" % name)

# ----------------------------------------------------------------------------- trace


def read_safetensors(path, want):
    """{name: float32 ndarray} of the tensors `want(name)` accepts."""
    with open(path, "rb") as f:
        blob = f.read()
    hlen = int(np.frombuffer(blob, dtype="<u8", count=1)[0])
    header = json.loads(blob[8:8 + hlen])
    data = memoryview(blob)[8 + hlen:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__" or not want(name):
            continue
        b0, b1 = info["data_offsets"]
        raw = data[b0:b1]
        dt = info["dtype"]
        if dt == "F32":
            a = np.frombuffer(raw, dtype="<f4").astype(np.float32)
        elif dt == "F16":
            a = np.frombuffer(raw, dtype="<f2").astype(np.float32)
        elif dt == "BF16":
            a = np.frombuffer(raw, dtype=ml_dtypes.bfloat16).astype(np.float32)
        else:
            raise Error("%s: %s: dtype %s not modelled" % (path, name, dt))
        out[name] = a.reshape([int(d) for d in info["shape"]])
    return out


def scan_trace(exp):
    """-> (snapshot files {step: path}, amax.csv {(step, name): float32}, tensor names)."""
    d = exp["trace"]
    if not os.path.isdir(d):
        raise Error("trace directory %s does not exist" % d)
    snaps = {}
    for fn in os.listdir(d):
        if fn.startswith("rank_"):
            raise Error("%s: multi-rank traces are not modelled by the peer" % d)
        m = re.fullmatch(r"step_([0-9]+)\.safetensors", fn)
        if m and step_selected(exp, int(m.group(1))):
            snaps[int(m.group(1))] = os.path.join(d, fn)
        elif re.fullmatch(r"step_([0-9]+)", fn):
            raise Error("%s: npy snapshots are not modelled by the peer" % d)
    csv_amax = {}
    p = os.path.join(d, "amax.csv")
    if os.path.exists(p):
        with open(p, newline="") as f:
            for row in csv.reader(f):
                if not row or row[0].strip() == "step":
                    continue
                t, name = int(row[0]), row[1].strip()
                if step_selected(exp, t) and tensor_selected(exp, name):
                    # fp8lab writes %.9g, which float32(double) gets back exactly
                    csv_amax[(t, name)] = F32(float(row[2]))
    names = {n for (_t, n) in csv_amax}
    for path in snaps.values():     # the names of the snapshots: their headers only
        with open(path, "rb") as f:
            hlen = int(np.frombuffer(f.read(8), dtype="<u8")[0])
            header = json.loads(f.read(hlen))
        names |= {n for n in header if n != "__metadata__" and tensor_selected(exp, n)}
    return snaps, csv_amax, sorted(names)

# ----------------------------------------------------------------------------- recipes


class Delayed:
    """TE's fused delayed scaling for one tensor and configuration: scale 1.0 at first, history
    of the last L non-zero amaxes; after each step amax = max(window) or the latest, scale =
    RN32(RN32(fp8_max * 2^-margin) / amax) when amax is finite and > 0, else kept."""

    def __init__(self, cfg, fmt):
        self.L, self.most_recent = cfg.history_len, cfg.amax_compute == "most_recent"
        self.scaled_max = F32(float(FORMATS[fmt][1]) * 2.0 ** -cfg.margin)
        self.hist = []          # non-zero amaxes, oldest first (only the last L matter)
        self.scale = F32(1.0)

    def update(self, a):
        if a == 0:
            return              # the module did not run: no roll, scale kept
        self.hist.append(a)
        del self.hist[:-self.L]
        amax = a if self.most_recent else max(self.hist)
        if math.isfinite(amax) and amax > 0:
            with np.errstate(over="ignore"):
                s = self.scaled_max / F32(amax)
            self.scale = F32(FLT_MAX) if np.isinf(s) else F32(s)


def amax_of(x):
    """max |x|, NaN ignored, inf counts, 0 for an empty or all-NaN tensor."""
    return F32(np.fmax.reduce(np.abs(x).ravel(), initial=F32(0)))


def quantize(x, s, fmt, acc):
    """Quantize x (float32, any shape) with scale s in fmt; add the counts and sums to acc
    (a dict); return xhat (float32, x's shape)."""
    dtype, fmax, fmin_normal = FORMATS[fmt]
    s = F32(s)
    with np.errstate(over="ignore", invalid="ignore"):
        y = x * s                                            # RN32(x * s)
        q = np.clip(y, -fmax, fmax).astype(dtype)            # saturate, round to nearest even
        dec = q.astype(np.float32)
        xhat = dec * (F32(1) / s)                            # RN32(decode * RN32(1 / s))
        fin = np.isfinite(x)
        acc["rows"] += 1
        acc["n"] += x.size
        acc["nonfinite"] += x.size - int(np.count_nonzero(fin))
        acc["zeros"] += int(np.count_nonzero(x == 0))
        acc["overflow"] += int(np.count_nonzero(fin & (np.abs(y) > fmax)))
        acc["underflow"] += int(np.count_nonzero(fin & (x != 0) & (dec == 0)))
        acc["subnormal"] += int(np.count_nonzero(fin & (dec != 0) & (np.abs(dec) < fmin_normal)))
        xf = x[fin].astype(np.float64)
        err = xf - xhat[fin].astype(np.float64)
        acc["err_sum"] += float(np.sum(err * err))
        acc["x2_sum"] += float(np.sum(xf * xf))
    return xhat

# ----------------------------------------------------------------------------- GEMMs


GEMMS = ("fprop", "dgrad", "wgrad")


def matrix(a):
    return a.reshape(1, -1) if a.ndim == 1 else a.reshape(-1, a.shape[-1])


def triplets(snap):
    """[(layer, input, weight, grad_output)] of the layers whose three are in the snapshot with
    agreeing shapes (input [T, in], weight [out, in], grad_output [T, out])."""
    out = []
    for name in sorted(snap):
        if not name.endswith(".input"):
            continue
        layer = name[:-len(".input")]
        w, dy = snap.get(layer + ".weight"), snap.get(layer + ".grad_output")
        if w is None or dy is None:
            continue
        x, w, dy = matrix(snap[name]), matrix(w), matrix(dy)
        if x.shape[0] == dy.shape[0] and x.shape[1] == w.shape[1] and w.shape[0] == dy.shape[1]:
            out.append((layer, x, w, dy))
    return out


def token_rows(tokens, max_tokens):
    if 0 < max_tokens < tokens:
        return np.arange(max_tokens, dtype=np.int64) * tokens // max_tokens
    return None


def gemms(x, w, dy, rows, dtype):
    if rows is not None:
        x, dy = x[rows], dy[rows]
    x, w, dy = x.astype(dtype), w.astype(dtype), dy.astype(dtype)
    return {"fprop": x @ w.T, "dgrad": dy @ w, "wgrad": dy.T @ x}


def rel_error(y, yref):
    d = y.astype(np.float64) - yref
    num, den = math.sqrt(float(np.sum(d * d))), math.sqrt(float(np.sum(yref * yref)))
    if den == 0:
        return 0.0 if num == 0 else (math.nan if math.isnan(num) else math.inf)
    return num / den

# ----------------------------------------------------------------------------- replay


def replay(exp):
    snaps, csv_amax, names = scan_trace(exp)
    configs = exp["configs"]
    steps = sorted(set(snaps) | {t for (t, _n) in csv_amax})
    state = {n: [Delayed(c, format_of(c, n)) for c in configs] for n in names}
    acc = {n: [dict(dict.fromkeys(COUNTS, 0), **dict.fromkeys(SUMS, 0.0)) for _ in configs]
           for n in names}
    gemm_rows = []
    for t in steps:
        snap = read_safetensors(snaps[t], lambda n: tensor_selected(exp, n)) if t in snaps else {}
        done = set()
        if exp["gemm"]:
            for layer, x, w, dy in triplets(snap):
                rows = token_rows(x.shape[0], exp["gemm_max_tokens"])
                ref = gemms(x, w, dy, rows, np.float64)
                ops = [(layer + "." + r, a) for r, a in (("input", x), ("weight", w),
                                                          ("grad_output", dy))]
                for ci, cfg in enumerate(configs):
                    xh = [quantize(a, state[n][ci].scale, format_of(cfg, n), acc[n][ci])
                          for n, a in ops]
                    y = gemms(xh[0], xh[1], xh[2], rows, np.float32)
                    for g in GEMMS:
                        gemm_rows.append((layer, g, t, cfg, rel_error(y[g], ref[g])))
                done |= {n for n, _a in ops}
        for n in sorted(snap):
            if n in done:
                continue
            x = snap[n]
            for ci, cfg in enumerate(configs):
                quantize(x, state[n][ci].scale, format_of(cfg, n), acc[n][ci])
        for n in names:   # after every cast of the step: the delayed update
            a = amax_of(snap[n]) if n in snap else csv_amax.get((t, n), F32(0))
            for st in state[n]:
                st.update(a)
    return steps, snaps, names, acc, gemm_rows


def cmd_run(args):
    exp = read_experiment(args.ini)
    if args.trace:
        exp["trace"] = os.path.abspath(args.trace)
    steps, snaps, names, acc, gemm_rows = replay(exp)
    configs = exp["configs"]
    print("peer_sweep: %s: %d tensors, %d steps (%d snapshots), %d configurations, gemm %s"
          % (args.ini, len(names), len(steps), len(snaps), len(configs),
             "on: %d GEMM rows" % len(gemm_rows) if exp["gemm"] else "off"))
    print("%-12s %11s %6s %-11s %8s %12s %12s" % ("config", "history_len", "margin",
                                                "amax_comp", "rows", "overflow", "underflow"))
    tot = dict.fromkeys(COUNTS, 0)
    for ci, c in enumerate(configs):
        s = {k: sum(acc[n][ci][k] for n in names) for k in COUNTS}
        print("%-12s %11d %6d %-11s %8d %12d %12d" % (c.label, c.history_len, c.margin,
                                                     c.amax_compute, s["rows"], s["overflow"],
                                                     s["underflow"]))
        for k in COUNTS:
            tot[k] += s[k]
    print("total: %d rows, overflow %d, underflow %d" % (tot["rows"], tot["overflow"],
                                                          tot["underflow"]))
    if args.totals:
        with open(args.totals, "w", newline="") as f:
            wr = csv.writer(f, lineterminator="\n")
            wr.writerow(("tensor", "recipe", "history_len", "margin", "amax_compute")
                        + COUNTS + SUMS)
            for n in names:
                for ci, c in enumerate(configs):
                    a = acc[n][ci]
                    if a["rows"]:
                        wr.writerow((n,) + c.key() + tuple(a[k] for k in COUNTS)
                                    + tuple(repr(a[k]) for k in SUMS))
    if args.gemm:
        with open(args.gemm, "w", newline="") as f:
            wr = csv.writer(f, lineterminator="\n")
            wr.writerow(("layer", "gemm", "step", "recipe", "history_len", "margin",
                         "amax_compute", "rel_error"))
            for layer, g, t, c, e in gemm_rows:
                wr.writerow((layer, g, t) + c.key() + (repr(e),))
    return 0

# ----------------------------------------------------------------------------- check


def _close(a, b, rel, floor):
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= max(rel * max(abs(a), abs(b)), floor)


def cmd_check(args):
    with open(args.totals, newline="") as f:
        peer = list(csv.DictReader(f))
    with open(os.path.join(args.outdir, "summary.csv"), newline="") as f:
        summ = list(csv.DictReader(f))
    key = ("recipe", "history_len", "margin", "amax_compute")
    msgs = []
    mine, theirs = {}, {}
    for r in peer:
        k = tuple(r[c] for c in key)
        mine.setdefault(k, {c: 0 for c in COUNTS + ("err_sum",)})
        for c in COUNTS:
            mine[k][c] += int(r[c])
        mine[k]["err_sum"] += float(r["err_sum"])
    per_tensor = {(r["tensor"],) + tuple(r[c] for c in key): r for r in peer}
    for r in summ:
        if r["kind"] != "delayed":
            continue
        k = tuple(r[c] for c in key)
        theirs.setdefault(k, {c: 0 for c in COUNTS + ("err_sum",)})
        got = dict(rows=int(r["steps"]), **{c: int(r[c]) for c in COUNTS[1:]})
        nfin = got["n"] - got["nonfinite"]
        mse = float(r["mse"])
        esum = mse * nfin if nfin else 0.0
        for c in COUNTS:
            theirs[k][c] += got[c]
        theirs[k]["err_sum"] += esum
        p = per_tensor.pop((r["tensor"],) + k, None)
        if p is None:
            msgs.append("summary.csv has %s %s; the peer has no such rows" % (r["tensor"], k))
            continue
        for c in COUNTS:
            if int(p[c]) != got[c]:
                msgs.append("%s %s: %s fp8lab %d, peer %s" % (r["tensor"], "/".join(k), c,
                                                             got[c], p[c]))
    for (tensor, *k), _p in per_tensor.items():
        msgs.append("the peer has %s %s; summary.csv has no such row" % (tensor, tuple(k)))
    print("%-24s %8s %12s %12s   %s" % ("configuration", "rows", "overflow", "underflow",
                                         "fp8lab = peer"))
    for k in sorted(set(mine) | set(theirs), key=lambda k: (k[0], int(k[1]), int(k[2]), k[3])):
        a, b = mine.get(k), theirs.get(k)
        if a is None or b is None:
            msgs.append("configuration %s only in the %s" % (k, "peer" if b is None else "fp8lab"))
            continue
        bad = ["%s fp8lab %d, peer %d" % (c, b[c], a[c]) for c in COUNTS if a[c] != b[c]]
        if not _close(a["err_sum"], b["err_sum"], 1e-6, 1e-300):
            bad.append("squared-error sum fp8lab %.9g, peer %.9g" % (b["err_sum"], a["err_sum"]))
        print("%-24s %8d %12d %12d   %s" % ("/".join(k), b["rows"], b["overflow"],
                                            b["underflow"], "NO" if bad else "yes"))
        msgs += ["%s: %s" % ("/".join(k), m) for m in bad]
    gemm_note = ""
    if args.gemm:
        gpath = os.path.join(args.outdir, "gemm.csv")
        with open(args.gemm, newline="") as f:
            pg = list(csv.DictReader(f))
        if not os.path.exists(gpath):
            if pg:
                msgs.append("gemm.csv missing from %s; the peer has %d rows" % (args.outdir,
                                                                                  len(pg)))
        else:
            with open(gpath, newline="") as f:
                fg = [r for r in csv.DictReader(f) if r["kind"] == "delayed"]
            gk = ("layer", "gemm", "step", "recipe", "history_len", "margin", "amax_compute")
            fk = {tuple(r[c] for c in gk): float(r["rel_error"]) for r in fg}
            pk = {tuple(r[c] for c in gk): float(r["rel_error"]) for r in pg}
            if set(fk) != set(pk):
                msgs.append("gemm.csv rows: fp8lab %d, peer %d, %d in common"
                            % (len(fk), len(pk), len(set(fk) & set(pk))))
            worst = 0.0
            for k in set(fk) & set(pk):
                a, b = fk[k], pk[k]
                if not _close(a, b, 1e-3, 1e-7):
                    msgs.append("gemm.csv %s: rel_error fp8lab %.9g, peer %.9g" % (k, a, b))
                elif math.isfinite(a) and max(abs(a), abs(b)) > 0:
                    worst = max(worst, abs(a - b) / max(abs(a), abs(b)))
            gemm_note = "; gemm.csv: %d rows, rel_error within %.2g relative" % (len(fk), worst)
            print("gemm.csv" + gemm_note[len("; gemm.csv"):])
    if msgs:
        print("peer_sweep check: fp8lab (%s) and the peer DIFFER:" % args.outdir)
        for m in msgs[:30]:
            print("  " + m)
        if len(msgs) > 30:
            print("  ... %d more" % (len(msgs) - 30))
        return 1
    print("peer_sweep check: the peer's totals equal fp8lab's (%d configuration%s, %d "
          "tensor x configuration totals%s)" % (len(theirs), "" if len(theirs) == 1 else "s",
                                                len(summ), gemm_note))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("run")
    p.add_argument("ini")
    p.add_argument("--trace", help="trace directory (instead of [trace] path)")
    p.add_argument("--totals", help="write per tensor and configuration totals (CSV)")
    p.add_argument("--gemm", help="write the GEMM errors (CSV)")
    p = sub.add_parser("check")
    p.add_argument("totals")
    p.add_argument("outdir")
    p.add_argument("--gemm", help="the peer's GEMM errors, to compare with gemm.csv")
    args = ap.parse_args(argv)
    try:
        return cmd_run(args) if args.cmd == "run" else cmd_check(args)
    except (Error, OSError, ValueError, KeyError, configparser.Error) as e:
        print("peer_sweep: error: %s" % e, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
