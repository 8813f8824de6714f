"""The independent recomputation behind tests/report/test_findings.py: the numbers as
report_findings.c prints them, the overflow / clipped / overshoot rules in float32, steps.csv
and stream.csv loaded (Run) and their statistics, the checker that records every verified
number, and the sentence templates of report.md's Findings section (test_findings.py makes
them for each run: micro-batches or steps). Standard library and numpy (checked on import:
exit 77 without it, or exit 1 when FP8LAB_REQUIRE_PYDEPS=1 is set, as .ci/run does).
"""

import collections
import csv
import math
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

try:
    import numpy as np
except ImportError as e:
    if os.environ.get("FP8LAB_REQUIRE_PYDEPS", "") not in ("", "0"):
        print("FAILED: %s, and FP8LAB_REQUIRE_PYDEPS is set (scripts/install-deps.sh installs "
              "numpy)" % e)
        sys.exit(1)
    print("skipped: %s (scripts/install-deps.sh installs numpy)" % e)
    sys.exit(77)

FMAX = {"e4m3": 448.0, "e5m2": 57344.0}
SNR_CAP = 200.0
MAX_TABLE = 25
ROLE_ORDER = ["input", "weight", "output", "grad_output", "grad_input", ""]  # fp8_role order
REF_KEY = (1024, 0, "max")  # TransformerEngine's default: history_len, margin, amax_compute

# Constants of report_findings.c's sentence templates that contain digits: removed (with the
# verified numbers, tensor names and labels) before the no-digit-left check.
TEMPLATE_CONSTANTS = [
    "history_len 1024, margin 0",
    "history_len 1, margin 0",  # Megatron-LM's default, beside TE's
    "scale is still 1 (the same steps",
    "RN32(max/amax)",
    "half an FP8 ulp",
    "at least 2x smaller",
    "by less than 0.5 binade",
    "by 0.5 to 1,",
    "by 1 to 2,",
    "by 2 binades or more",
    "Scale lag (log2 of",
    "p5 SNR",
]


# ------------------------------------------------------------------ numbers


def f32(s):
    """A float32 field ("%.9g" of a float32 reads back exactly)."""
    return np.float32(float(s))


def fmt_rate(v):
    """rep_fmt_rate: n/a, 0 or 3 significant digits."""
    if math.isnan(v):
        return "n/a"
    if v == 0:
        return "0"
    return "%.3g" % v


def fmt_db(v):
    """rep_fmt_db: n/a, exact at the 200 dB cap, else one decimal."""
    if math.isnan(v):
        return "n/a"
    if v >= SNR_CAP:
        return "exact"
    return "%.1f" % v


def half_unit(s):
    """Half a unit of the last digit printed in s (a decimal, maybe with an exponent)."""
    m = re.fullmatch(r"-?(\d+)(?:\.(\d*))?(?:e([-+]?\d+))?", s)
    if not m:
        return None
    decimals = len(m.group(2) or "")
    exp = int(m.group(3) or 0)
    return 0.5 * 10.0 ** (exp - decimals)


def agrees(got, expected, printed):
    """got (the report's text) against the recomputed value: the same text once printed the
    same way (`printed`), or (not a special value) within half a unit of the last digit of
    `printed` (a value within an ulp of a rounding boundary may print either way)."""
    if got == printed:
        return True
    if printed in ("n/a", "exact", "0", "inf", "-inf") or got in ("n/a", "exact", "inf"):
        return False
    h = half_unit(printed)
    if h is None or half_unit(got) is None or not math.isfinite(expected):
        return False
    return abs(float(got) - expected) <= h * (1 + 1e-9)


def quantile(sorted_x, f):
    """gsl_stats_quantile_from_sorted_data: linear interpolation at f * (n - 1)."""
    n = len(sorted_x)
    if n == 0:
        return float("nan")
    idx = f * (n - 1)
    lhs = int(math.floor(idx))
    if lhs >= n - 1:
        return sorted_x[n - 1]
    d = idx - lhs
    a, b = sorted_x[lhs], sorted_x[lhs + 1]
    return min(max((1 - d) * a + d * b, a), b)


def product32(amax, scale):
    with np.errstate(over="ignore", invalid="ignore"):
        return np.float32(np.float32(amax) * np.float32(scale))


def overflowed(amax, scale, fmt):
    return abs(float(product32(amax, scale))) > FMAX[fmt]


def clipped(amax, scale, fmt):
    y = abs(float(product32(amax, scale)))
    return y > 464.0 if fmt == "e4m3" else y >= 61440.0


def overshoot(amax, scale, fmt):
    if not float(amax) > 0:
        return -math.inf
    return math.log2(float(amax) * float(scale) / FMAX[fmt])


def scale_lag(scale, amax, fmt, margin):
    """log2(jit / scale), jit = RN32(RN32(max * 2^-margin) / amax) in float32 (inf: FLT_MAX)."""
    a = np.float32(amax)
    s = float(scale)
    if not (a > 0) or math.isinf(a) or not (s > 0) or math.isinf(s):
        return float("nan")
    with np.errstate(over="ignore", divide="ignore"):
        scaled_max = np.float32(FMAX[fmt] * 2.0 ** -margin)
        jit = np.float32(scaled_max / a)
    if math.isinf(jit):
        jit = np.float32(np.finfo(np.float32).max)
    return math.log2(float(jit) / s)


# ------------------------------------------------------------------ the CSV files


def opt_int(s):
    return int(s) if s != "" else None


def load_steps(path):
    rows = []
    with open(path, newline="") as f:
        for line, d in enumerate(csv.DictReader(f)):
            kind = d["kind"]
            rows.append({
                "line": line,
                "tensor": d["tensor"],
                "role": d["role"],
                "step": int(d["step"]),
                "recipe": d["recipe"],
                "kind": kind,
                "format": d["format"],
                "h": opt_int(d["history_len"]),
                "m": opt_int(d["margin"]),
                "ac": d["amax_compute"] if kind == "delayed" else "",
                "amax": f32(d["amax"]),
                "scale": f32(d["scale"]),
                "amax_text": d["amax"],
                "scale_text": d["scale"],
                "n": int(d["n"]),
                "nonfinite": int(d["nonfinite"]),
                "overflow": int(d["overflow"]),
                "underflow": int(d["underflow"]),
                "mse": float(d["mse"]),
                "snr": float(d["snr_db"]),
                # clipped: empty in files without it; then overflow stands in (as fp8lab does)
                "clipped": int(d["clipped"]) if d["clipped"] != "" else int(d["overflow"]),
                "warmup": int(d["warmup"]),
            })
    return rows


def cfg_of(r):
    """A configuration: (recipe, kind, history_len, margin, amax_compute)."""
    return (r["recipe"], r["kind"], r["h"], r["m"], r["ac"])


def cfg_label(c):
    recipe, kind, h, m, ac = c
    if kind == "delayed":
        return "%s L=%d m=%d %s" % (recipe, h, m, "max" if ac == "max" else "recent")
    if kind == "current":
        return "current scaling" if recipe == "current" else "%s (current scaling)" % recipe
    return "%s (%s)" % (recipe, kind)


def load_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


# ------------------------------------------------------------------ the checker


class Checker:
    def __init__(self, section):
        self.section = section
        self.errors = []
        self.spans = []  # verified spans of the section, blanked before the digit check

    def fail(self, msg):
        self.errors.append(msg)

    def expect(self, cond, msg):
        if not cond:
            self.fail(msg)
        return cond

    def verified(self, span):
        self.spans.append(span)

    def num(self, where, m, group, expected, printed):
        """Group `group` of match m (a number the report prints) against `expected`, printed
        by fp8lab as `printed`; its span is verified when it agrees."""
        got = m.group(group)
        if agrees(got, expected, printed):
            self.verified(m.span(group))
        else:
            self.fail("%s: %s: expected %s (recomputed %r), got %s" %
                      (where, group, printed, expected, got))

    def int_(self, where, m, group, expected):
        got = m.group(group)
        if got == str(expected):
            self.verified(m.span(group))
        else:
            self.fail("%s: %s: expected %s, got %s" % (where, group, expected, got))

    def text(self, where, m, group, expected):
        """A name or label: exactly `expected`, or one of them when a list/set is given."""
        got = m.group(group)
        ok = got in expected if isinstance(expected, (set, list, tuple)) else got == expected
        if ok:
            self.verified(m.span(group))
        else:
            self.fail("%s: %s: expected %s, got %s" % (where, group, expected, got))

    def residue(self, names):
        """The section with the verified spans, the names and the template constants blanked."""
        chars = list(self.section)
        for a, b in self.spans:
            for i in range(a, b):
                chars[i] = "#"
        s = "".join(chars)
        for n in sorted(names, key=len, reverse=True) + TEMPLATE_CONSTANTS:
            if n and re.search(r"\d", n):
                s = s.replace(n, "#" * len(n))
        return s


# ------------------------------------------------------------------ sentence templates

PLACE = {
    "int": r"-?\d+",
    "num": r"-?(?:\d+(?:\.\d*)?(?:e[-+]?\d+)?|inf)|n/a|exact|nan",
    "name": r"\S+?",
    "text": r".+?",
    "opt": r".*?",
    "s": r"s?",
}


def template(t):
    """A sentence template: {name:kind} placeholders (PLACE), [[...]] optional, the rest literal."""
    out, pos = [], 0
    for m in re.finditer(r"\{(\w+):(\w+)\}|\[\[|\]\]", t):
        out.append(re.escape(t[pos:m.start()]))
        tok = m.group(0)
        if tok == "[[":
            out.append("(?:")
        elif tok == "]]":
            out.append(")?")
        else:
            out.append("(?P<%s>%s)" % (m.group(1), PLACE[m.group(2)]))
        pos = m.end()
    out.append(re.escape(t[pos:]))
    return re.compile("".join(out))


def make_templates(micro):
    """The sentences of the Findings section; `micro`: the trace has steps of several
    micro-batches (the stream's counts are then over micro-batches, and say so)."""
    u, us = ("micro-batch", "micro-batches") if micro else ("step", "steps")
    over = ("Over the {nmicro:int} micro-batches of the replay ({nsteps:int} steps; every "
            "micro-batch of stream.csv, snapshot or amax.csv, each a cast; each tensor's warm-up "
            "micro-batches and those it did not run left out)" if micro else
            "Over the {nsteps:int} steps of the replay (every step of stream.csv, snapshot or "
            "amax.csv; each tensor's warm-up steps and the steps it did not run left out)")
    at = "[[, micro-batch {micro:int}]]"
    return {
    "reference": template(
        "Reference configuration: **{label:text}** (TransformerEngine's default is history_len "
        "1024, margin 0, amax_compute max; Megatron-LM's is history_len 1, margin 0, "
        "most_recent). " + over + ", under it the largest element of "
        "**{clip_tensors:int} of {tensors:int} tensors** clipped, i.e. saturated past the "
        "rounding of the max, at some " + u + " ({clip_steps:int} tensor-" + us + " in all). "
        "Counting also the overflows by rounding only (a hair above the max, saturated with an "
        "error under half an FP8 ulp), {ovf_tensors:int} tensors overflowed ({ovf_steps:int} "
        "tensor-" + us + ")."),
    "largest": template(
        "The largest overshoot (by rounding only: no " + u + " clipped): **{tensor:name} at step "
        "{step:int}" + at + "**, {ov:num} binades ({factor:num}x) past the max."),
    "snapshot": template(
        "At the snapshot steps, {tensors_clip:int} of {tensors:int} tensors have clipped values "
        "({clipped:int} of {finite:int} values, rate {rate:num})."),
    "warmup": template(
        "Warm-up: each tensor's steps before a non-zero amax entered its history (here "
        "step{plural:s} {steps:text}), where delayed scaling's scale is still 1 (the same steps for "
        "every configuration, so that all are compared over the same steps), are left out "
        "of every rate, count and recommendation: {rows:int} rows of steps.csv, holding "
        "{underflow:int} values flushed to zero and {clipped:int} clipped values."),
    "rounding": template(
        "Under current scaling (recipe {recipe:name}), {hair:int} of {rows:int} rows count an "
        "overflow that is not clipped: the tensor's amax times RN32(max/amax) rounds a hair above "
        "the max, and the cast saturates it with an error under half an FP8 ulp. Such rounding "
        "overflows are not counted as clipped anywhere in this report."),
    "worst": template(
        "The worst event (the largest overshoot of a clipped " + u + ", over every " + u + " of "
        "the replay): **{tensor:name} at step {step:int}" + at + "** reached amax {amax:num} "
        "while the delayed scale, taken from earlier " + us + ", could represent only "
        "{fits:num} ({binades:num} binades, {factor:num}x, too small a range): {meas:text}.\n"),
    "spike": template(
        "At the snapshot steps (where the values are counted), the one that lost the most: "
        "**{tensor:name} at step {step:int}** reached amax {amax:num} while the delayed scale "
        "could represent only {fits:num} ({binades:num} binades too small a range): "
        "{meas:text}.\n"),
    "spike_list": template(
        "At step {step:int}, {count:int} tensor{plural:s} clipped more than one value: "
        "{list:text}.\n"),
    "after": template(
        "After the spike, the delayed scale of {tensor:name} stayed at least 2x smaller than the "
        "just-in-time one for {stale:int} of the {after:int} following snapshot steps (through "
        "step {until:int}{end:opt}): the history still holds the spike's amax. Its underflow "
        "rate (values flushed to zero) went from {before_rate:num} before the spike to "
        "{after_rate:num} in those steps."),
    "roles": template("By role, under {label:text} (every " + u + " of the replay):"),
    "tensors": template("Tensors whose largest element overflowed under {label:text}, most "
                        "clipped " + us + " first" + (
                            " (counts of micro-batches: \"N of M\" is N of the M micro-batches "
                            "the tensor ran, warm-up left out)" if micro else "") + ":"),
    "more": template("... and {more:int} more (see analysis.csv)."),
    "bins": template(
        "How far past the max the {ovf_steps:int} overflowed tensor-" + us + " went: {b0:int} only by "
        "rounding (not clipped), {b1:int} by less than 0.5 binade, {b2:int} by 0.5 to 1, "
        "{b3:int} by 1 to 2, {b4:int} by 2 binades or more."),
    "lag": template(
        "Scale lag (log2 of the just-in-time scale over the delayed scale, at the snapshot steps; "
        "negative: the delayed scale was too large, values saturate once it is below -margin): "
        "the worst is {worst:num} binades for {tensor:name}, whose median scale lag over its "
        "{lag_rows:int} snapshot steps is {median:num} binades."),
    }


# What a snapshot row measured (report_worst.c measured_words), or why a cast was not measured:
# matched in full against the {meas} group of the worst-event and spike sentences.
MEASURED_VALS = {"one": "one value of {n:int} clipped",
                 "many": "{clipped:int} of {n:int} values clipped"}
MEASURED = {
    "fell": "{vals} and the SNR of the cast fell to {snr:num} dB (current scaling: {snr_cur:num} dB)",
    "below": "{vals}, SNR {snr:num} dB against {snr_cur:num} dB under current scaling",
    "held": "{vals}, yet the SNR of the cast did not suffer: {snr:num} dB, current scaling "
            "{snr_cur:num} dB (the larger delayed scale gave the other values finer steps than "
            "the clipped ones cost)",
    "nocur": "{vals} and the SNR of the cast was {snr:num} dB",
}
UNMEASURED = {
    "nosnap": "not a snapshot step, so its clipped values were not counted",
    "later": "a later micro-batch of a snapshot step (the snapshot is cast with the first one's "
             "scale), so its clipped values were not counted",
}


def measured_templates():
    out = {}
    for k, t in MEASURED.items():
        for v, vt in MEASURED_VALS.items():
            out[(k, v)] = template(t.replace("{vals}", vt))
    for k, t in UNMEASURED.items():
        out[(k, None)] = template(t)
    return out


def make_headers(micro):
    u, us = ("micro-batch", "micro-batches") if micro else ("step", "steps")
    return (["role", "tensors", "with an overflowed " + u, "with a clipped " + u, "clipped " + us,
             "worst overshoot (binades)"],
            ["tensor", "role", us + " overflowed", us + " clipped", "worst overshoot (binades)",
             "clipped rate (values)", "p5 SNR (dB)", "p5 SNR, current (dB)"])


def tables(section):
    """The tables of the section: [(header, [(cells, spans)])] with the cells' spans in it."""
    out, cur, pos = [], None, 0
    for line in section.split("\n"):
        start = pos
        pos += len(line) + 1
        if not line.startswith("|"):
            cur = None
            continue
        cells, spans, i = [], [], 1
        while True:
            j = line.find("|", i)
            if j < 0:
                break
            raw = line[i:j]
            lead = len(raw) - len(raw.lstrip())
            cells.append(raw.strip())
            spans.append((start + i + lead, start + i + lead + len(raw.strip())))
            i = j + 1
        if cur is None:
            cur = (cells, [])
            out.append(cur)
        elif not all(re.fullmatch(r":?-+:?", c) for c in cells):
            cur[1].append((cells, spans))
    return out


# ------------------------------------------------------------------ recomputation


class Run:
    """Everything recomputed from the CSV files of one run directory."""

    def __init__(self, outdir):
        self.outdir = outdir
        self.rows = load_steps(os.path.join(outdir, "steps.csv"))
        # groups: (tensor, recipe, kind, format, h, m, ac) -> rows by step; tensor name order,
        # then first appearance (as fp8lab's steps.csv loader orders them)
        first = {}
        groups = collections.defaultdict(list)
        for r in self.rows:
            k = (r["tensor"], r["recipe"], r["kind"], r["format"], r["h"], r["m"], r["ac"])
            first.setdefault(k, r["line"])
            groups[k].append(r)
        self.group_keys = sorted(groups, key=lambda k: (k[0], first[k]))
        for k in groups:
            groups[k].sort(key=lambda r: r["step"])
        self.groups = groups
        self.configs = []  # experiment order
        for k in self.group_keys:
            c = (k[1], k[2], k[4], k[5], k[6])
            if c not in self.configs:
                self.configs.append(c)
        self.tensors = sorted({r["tensor"] for r in self.rows})
        self.role = {r["tensor"]: r["role"] for r in self.rows}
        refs = [c for c in self.configs if c[1] == "delayed" and (c[2], c[3], c[4]) == REF_KEY]
        assert len(refs) == 1, "expected one delayed configuration 1024/0/max, got %s" % refs
        self.ref = refs[0]
        curs = [c for c in self.configs if c[1] == "current"]
        self.cur = curs[0] if curs else None
        self.ref_groups = self.of_config(self.ref)  # tensor -> rows
        self.cur_groups = self.of_config(self.cur) if self.cur else {}
        self.load_stream()

    def of_config(self, c):
        out = {}
        for k in self.group_keys:
            if (k[1], k[2], k[4], k[5], k[6]) == c:
                assert k[0] not in out, "two groups of %s under %s" % (k[0], c)
                out[k[0]] = self.groups[k]
        return out

    def load_stream(self):
        self.stream_keys = collections.Counter()
        self.stream_rows = 0
        self.stream_steps = set()
        self.stream_micros = set()  # (step, micro): the casts of the replay
        self.stream_step0_not_warmup = 0
        # tensor -> [(step, micro, amax, scale, fmt, warmup)]
        self.ref_series = collections.defaultdict(list)
        # (tensor, cfg) -> [steps it ran (non-warm-up, amax > 0), of them with a clipped largest
        # element]: the step budget's rate of every delayed configuration (the answer's check)
        self.clip_steps = collections.defaultdict(lambda: [0, 0])
        self.stream_snapshot = []  # (tensor, step, cfg, amax, scale) of rows with snapshot = 1
        self.stream_other = []     # (tensor, step, amax) of a few rows with snapshot = 0
        with open(os.path.join(self.outdir, "stream.csv"), newline="") as f:
            for d in csv.DictReader(f):
                self.stream_rows += 1
                step = int(d["step"])
                micro = int(d.get("micro") or 0)
                h, m, ac = int(d["history_len"]), int(d["margin"]), d["amax_compute"]
                key = (step, micro, d["tensor"], d["recipe"], d["format"], h, m, ac)
                self.stream_keys[key] += 1
                self.stream_steps.add(step)
                self.stream_micros.add((step, micro))
                w = int(d["warmup"])
                if step == 0 and micro == 0 and not w:  # a later micro-batch of step 0
                    # is past warm-up once an earlier one fed the history (docs/semantics.md)
                    self.stream_step0_not_warmup += 1
                cfg = (d["recipe"], "delayed", h, m, ac)
                if d["snapshot"] == "1":
                    self.stream_snapshot.append((d["tensor"], step, cfg, d["amax"], d["scale"],
                                                 micro))
                elif cfg == self.ref:
                    self.stream_other.append((d["tensor"], step, d["amax"], micro))
                if cfg == self.ref:
                    self.ref_series[d["tensor"]].append(
                        (step, micro, f32(d["amax"]), f32(d["scale"]), d["format"], w))
                a = f32(d["amax"])
                if not w and a > 0:
                    cs = self.clip_steps[(d["tensor"], cfg)]
                    cs[0] += 1
                    cs[1] += clipped(a, f32(d["scale"]), d["format"])
        for s in self.ref_series.values():
            s.sort()
        self.micro = len(self.stream_micros) > len(self.stream_steps)


def stream_stats(run):
    """Per reference tensor, over its non-warm-up stream steps where it ran (amax > 0); the
    overshoot bins; the largest overshoot and its (tensor, step, micro) casts."""
    per = {}
    bins = [0] * 5
    worst = (-math.inf, [])
    for t in run.tensors:
        ran = ovf = clip = 0
        ov_max = -math.inf
        for step, micro, a, s, fmt, w in run.ref_series.get(t, []):
            if w or not a > 0:
                continue
            ran += 1
            o, c, ov = overflowed(a, s, fmt), clipped(a, s, fmt), overshoot(a, s, fmt)
            ovf += o
            clip += c
            if o:
                bins[0 if not c else 1 if ov < 0.5 else 2 if ov < 1 else 3 if ov < 2 else 4] += 1
            ov_max = max(ov_max, ov)
            if ov > worst[0]:
                worst = (ov, [(t, step, micro)])
            elif ov == worst[0]:
                worst[1].append((t, step, micro))
        per[t] = {"ran": ran, "ovf": ovf, "clip": clip, "ov_max": ov_max}
    return per, bins, worst


def steps_stats(rows):
    """One group's non-warm-up snapshot rows: clipped, finite, the p5 SNR, the scale lags."""
    live = [r for r in rows if not r["warmup"]]
    clip = sum(r["clipped"] for r in live)
    finite = sum(r["n"] - r["nonfinite"] for r in live)
    snr = sorted(min(r["snr"], SNR_CAP) for r in live if not math.isnan(r["mse"]))
    lags = []
    for r in live:
        margin = r["m"] if r["kind"] == "delayed" else 0
        lag = scale_lag(r["scale"], r["amax"], r["format"], margin)
        if not math.isnan(lag):
            lags.append(lag if r["kind"] == "delayed" else 0.0)
    lags.sort()
    return {
        "clipped": clip,
        "finite": finite,
        "clipped_rate": clip / finite if finite else float("nan"),
        "p5": quantile(snr, 0.05),
        "lag_worst": lags[0] if lags else float("nan"),
        "lag_median": quantile(lags, 0.5),
        "lag_rows": len(lags),
    }


def row_at(rows, step):
    for r in rows:
        if r["step"] == step:
            return r
    return None


def snr_loss(run, r):
    """The SNR (dB) a reference row lost against current scaling at its tensor and step (None
    without a current-scaling row)."""
    cur = row_at(run.cur_groups.get(r["tensor"], []), r["step"])
    return cur["snr"] - r["snr"] if cur else None


def analysis_row(run, tensor, cfg):
    if not hasattr(run, "_analysis"):
        run._analysis = {}
        for d in load_csv(os.path.join(run.outdir, "analysis.csv")):
            kind = d["kind"]
            c = (d["recipe"], kind, opt_int(d["history_len"]), opt_int(d["margin"]),
                 d["amax_compute"] if kind == "delayed" else "")
            run._analysis[(d["tensor"], c)] = d
    return run._analysis.get((tensor, cfg))


def cell_check(ck, where, cells, spans, i, expected, printed=None):
    """Cell i of a table row: its text `printed` (default: str(expected)) at the printed
    precision."""
    got = cells[i]
    printed = str(expected) if printed is None else printed
    ok = agrees(got, expected, printed) if isinstance(expected, float) else got == printed
    if ok:
        ck.verified(spans[i])
    else:
        ck.fail("%s: column %r: expected %s, got %s" % (where, cells and i, printed, got))
