"""fp8lab.results: a run folder's tables as pandas DataFrames (issue 43).

    import fp8lab
    r = fp8lab.load("out/tiny_gpt")        # a Run; nothing is read yet but run.json
    r.info["experiment"]["name"]           # run.json as a dict
    r.steps, r.summary, r.analysis         # DataFrames, read on first use, then kept
    r.bf16_plan[r.bf16_plan.plan == "fp8"] # the BF16 demotion plan, a row per step
    r.recommendations[r.recommendations.scope == "role"]
    r.stream                               # stream.csv's rows, from stream.csv or stream.npy
    r.stream_records["scale"][step, t, c]  # stream.npy memory-mapped (None with stream.csv)

Every table has exactly the columns of its file, in the file's order, as docs/outputs.md
describes them: integer columns that may be empty (current scaling has no history_len or margin)
as pandas' nullable Int64, names (tensor, role, recipe, ...) as categories, empty fields as
missing values (NaN, <NA>), `inf`/`-inf`/`nan` as floats. A table the run did not write (gemm.csv
without layer triplets, experts.csv without tokens.csv, analysis.csv before `fp8lab report`,
bf16_plan.csv of a report without a plan) is None. The reduced copy `make notebooks` ships
(name.csv.gz) loads the same way.

A damaged file raises ResultsError (a ValueError) whose message names the file and the line
(the record and its byte offset for stream.npy), as `fp8lab report` does.

Needs numpy and pandas (the package's dependencies); nothing else.
"""
import csv
import gzip
import io
import json
import math
import os

import numpy as np
import pandas as pd

__all__ = ["load", "Run", "ResultsError", "TABLES", "config_label"]

# The tables of a run folder, in the order docs/outputs.md lists them (then fp8lab timeline's).
TABLES = ("steps", "summary", "stream", "gemm", "histograms", "experts", "analysis",
          "recommendations", "bf16_plan", "timeline")

# The columns a file must have for it to be that table (the first ones of its header): what a
# reader can rely on whatever fp8lab version wrote it (later versions append columns).
_REQUIRED = {
    "steps": ("tensor", "role", "step", "recipe", "kind", "format"),
    "summary": ("tensor", "role", "recipe", "kind", "format"),
    "stream": ("tensor", "role", "step", "recipe", "format", "history_len", "margin",
               "amax_compute", "snapshot", "amax", "scale", "overshoot", "warmup"),
    "gemm": ("layer", "gemm", "step", "recipe", "kind", "history_len", "margin", "amax_compute",
             "rel_error"),
    "histograms": ("tensor", "step", "log2_bin", "count"),
    "experts": ("gemm", "group", "expert", "steps", "steps_run", "tokens"),
    "analysis": ("tensor", "role", "recipe", "kind", "format", "history_len", "margin",
                 "amax_compute", "steps"),
    "recommendations": ("scope", "name", "recipe", "kind", "format", "history_len", "margin",
                        "amax_compute"),
    "bf16_plan": ("plan", "recipe", "kind", "history_len", "margin", "amax_compute", "step",
                  "layer"),
    "timeline": ("mode", "step", "stream", "op", "tensor", "start_us", "end_us"),
}

# Integer columns (nullable Int64: some may be empty) and name columns (categories); every other
# column is what pandas makes of it: float64 for numbers (inf, nan), object for free text.
_INTS = frozenset("""step history_len margin steps n nonfinite zeros overflow underflow subnormal
clipped steps_with_overflow steps_with_clipped longest_overflow_run first_overflow_step
warmup_steps stream_steps stream_overflow_steps stream_clipped_steps covers of snapshot warmup
log2_bin count nblocks blocks_with_overflow micro expert steps_run tokens tokens_min
tokens_max clipped_steps clipped_values missing megatron_start megatron_end""".split())
_NAMES = frozenset("""tensor role recipe kind format amax_compute scope name layer gemm group
decided_by ratio_mode mode stream op source plan verdict label tensor_core
accumulation""".split())
_TEXT = frozenset(["note", "still_missing"])  # free text (still_missing: names joined by "; ")

_FP8_MAX = {"e4m3": 448.0, "e5m2": 57344.0}


class ResultsError(ValueError):
    """A run folder's file that cannot be read: the message names the file and the line."""


def config_label(df):
    """One label per row naming its configuration the way the report does: the recipe, and for
    delayed scaling `recipe L=<history_len> m=<margin> <amax_compute>`. A Series."""
    lab = df["recipe"].astype(str)
    if "history_len" not in df:
        return lab
    d = df["history_len"].notna()
    return lab.where(~d, lab + " L=" + df["history_len"].astype(str) + " m="
                     + df["margin"].astype(str) + " " + df["amax_compute"].astype(str))


def _open_text(path):
    if path.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


def _header(path, table):
    try:
        with _open_text(path) as f:
            head = next(csv.reader(f), None)
    except (OSError, UnicodeDecodeError, EOFError) as e:
        raise ResultsError("%s: %s" % (path, e)) from None
    if not head:
        raise ResultsError("%s: line 1: empty file, no header" % path)
    need = _REQUIRED[table]
    if tuple(head[:len(need)]) != need:
        raise ResultsError("%s: line 1: header %s is not %s.csv's (it starts %s)"
                           % (path, ",".join(head[:len(need)]), table, ",".join(need)))
    if len(set(head)) != len(head):
        raise ResultsError("%s: line 1: a column is named twice" % path)
    return head


def _types(head):
    return {c: ("Int64" if c in _INTS else "category") for c in head if c in _INTS or c in _NAMES}


def _locate(path, head, types):
    """The first field that makes the typed read fail: its line and column (slow: only after
    pandas said no)."""
    with _open_text(path) as f:
        rows = csv.reader(f)
        next(rows)
        for k, row in enumerate(rows, start=2):
            if len(row) != len(head):
                return "line %d: %d fields, the header has %d" % (k, len(row), len(head))
            for c, v in zip(head, row):
                if v == "" or c not in types or types[c] == "category":
                    continue
                if c in _INTS:
                    try:
                        int(v)
                    except ValueError:
                        return "line %d: column %s: %r is not an integer" % (k, c, v)
    return None


# Files up to this size are also read once with the csv module, which finds a row with too few
# fields (pandas fills it with missing values); larger ones (a big run's steps.csv) are not.
_CHECK_ROWS_BYTES = 64 << 20


def _read_csv(path, table):
    head = _header(path, table)
    types = _types(head)
    # empty is missing everywhere; "nan" too in the numeric columns (pandas' C parser reads
    # inf and -inf but leaves a column with "nan" as text when the defaults are off), never in
    # a name: a tensor may be called "nan"
    na = {c: ([""] if c in _NAMES or c in _TEXT else ["", "nan", "-nan"]) for c in head}
    try:
        df = pd.read_csv(path, dtype=types, keep_default_na=False, na_values=na,
                         compression="infer", engine="c", low_memory=False)
    except (ValueError, TypeError, pd.errors.ParserError, OSError, EOFError) as e:
        # (pandas raises TypeError for a decimal such as 2.5 in an integer column)
        where = _locate(path, head, types)
        raise ResultsError("%s: %s" % (path, where or str(e).strip().splitlines()[0])) from None
    if os.path.getsize(path) <= _CHECK_ROWS_BYTES:
        where = _locate(path, head, {})
        if where is not None:
            raise ResultsError("%s: %s" % (path, where))
    if list(df.columns) != head:  # pandas renames a duplicate or an empty column name
        raise ResultsError("%s: line 1: columns %s" % (path, ",".join(head)))
    return df


class Run:
    """One run folder (`fp8lab run --out DIR`, and `fp8lab report`'s files in it).

    Attributes: `path` (absolute), `info` (run.json as a dict; None in `fp8lab timeline`'s
    folder, which has timeline.csv and no run.json), one attribute per table of
    TABLES (a DataFrame read on first use, None when the run has no such file), and for a compact
    stream `stream_records` (stream.npy memory-mapped: a NumPy record array, fields step, micro,
    amax [T], te_scale [T], snapshot [T], warmup [T], scale [T, C]) with `stream_index`
    (stream.json: the T tensors and the C configurations); both None otherwise."""

    def __init__(self, path):
        self.path = os.path.abspath(os.fspath(path))
        if not os.path.isdir(self.path):
            raise FileNotFoundError("fp8lab.load: %s: no such folder" % self.path)
        rj = os.path.join(self.path, "run.json")
        try:
            with open(rj, encoding="utf-8") as f:
                self.info = json.load(f)
        except FileNotFoundError:
            if not os.path.isfile(os.path.join(self.path, "timeline.csv")):
                raise FileNotFoundError("fp8lab.load: %s: not a run folder (no run.json): fp8lab "
                                        "run --out DIR writes one" % self.path) from None
            self.info = None  # fp8lab timeline's folder: timeline.csv and no run.json
        except (ValueError, UnicodeDecodeError) as e:
            line = getattr(e, "lineno", None)
            raise ResultsError("%s: %s%s" % (rj, "line %d: " % line if line else "",
                                             getattr(e, "msg", e))) from None
        if self.info is not None and not isinstance(self.info, dict):
            raise ResultsError("%s: line 1: not a JSON object" % rj)
        self._tables = {}
        self._npy = None

    # ---------------------------------------------------------------- the files

    def file(self, table):
        """The path of a table's file in the folder (name.csv, else name.csv.gz), or None."""
        for ext in (".csv", ".csv.gz"):
            p = os.path.join(self.path, table + ext)
            if os.path.isfile(p):
                return p
        return None

    def tables(self):
        """The names of the tables this run has (TABLES' order)."""
        return [t for t in TABLES if self.file(t) is not None
                or (t == "stream" and self._has_npy())]

    def __getattr__(self, name):
        if name in TABLES:
            if name not in self._tables:
                self._tables[name] = self._load(name)
            return self._tables[name]
        raise AttributeError("%r has no attribute %r (tables: %s)"
                             % (type(self).__name__, name, ", ".join(TABLES)))

    def _load(self, table):
        if table == "stream" and self._has_npy():
            return self.stream_table()
        p = self.file(table)
        return _read_csv(p, table) if p is not None else None

    def __repr__(self):
        exp = (self.info or {}).get("experiment")
        name = exp.get("name") if isinstance(exp, dict) else None
        return "<fp8lab run %r at %s: %s>" % (name, self.path, ", ".join(self.tables()))

    # ---------------------------------------------------------------- the compact stream

    def _has_npy(self):
        return os.path.isfile(os.path.join(self.path, "stream.npy"))

    def _stream_npy(self):
        if self._npy is None:
            npy = os.path.join(self.path, "stream.npy")
            js = os.path.join(self.path, "stream.json")
            try:
                with open(js, encoding="utf-8") as f:
                    ix = json.load(f)
            except FileNotFoundError:
                raise ResultsError("%s: missing: stream.npy needs it" % js) from None
            except ValueError as e:
                raise ResultsError("%s: line %s: %s" % (js, getattr(e, "lineno", "?"),
                                                        getattr(e, "msg", e))) from None
            try:
                with open(npy, "rb") as f:  # the header first: a short file names its record
                    version = np.lib.format.read_magic(f)
                    read = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
                        np.lib.format.read_array_header_2_0
                    shape, _, dtype = read(f)
                    data = f.tell()
                size = os.path.getsize(npy)
                if len(shape) == 1 and dtype.itemsize and size != data + shape[0] * dtype.itemsize:
                    k = (size - data) // dtype.itemsize
                    raise ResultsError("%s: byte %d: %d bytes, the header's %d records of %d bytes "
                                       "need %d (record %d is %s)" % (
                                           npy, data + k * dtype.itemsize, size, shape[0],
                                           dtype.itemsize, data + shape[0] * dtype.itemsize, k,
                                           "cut short" if k < shape[0] else "one too many"))
                a = np.load(npy, mmap_mode="r", allow_pickle=False)
            except (ValueError, OSError, EOFError) as e:
                if isinstance(e, ResultsError):
                    raise
                raise ResultsError("%s: byte 0: %s" % (npy, e)) from None
            try:
                nt, nc = len(ix["tensors"]), len(ix["configs"])
                want = (int(ix["records"]),)
                for t in ix["tensors"]:
                    if len(t["formats"]) != nc:
                        raise ValueError("tensor %r has %d formats for %d configurations"
                                         % (t.get("name"), len(t["formats"]), nc))
            except (KeyError, TypeError, ValueError) as e:
                raise ResultsError("%s: not a stream index: %s" % (js, e)) from None
            fields = {"step": (), "micro": (), "amax": (nt,), "te_scale": (nt,),
                      "snapshot": (nt,), "warmup": (nt,), "scale": (nt, nc)}
            names = a.dtype.names or ()
            if a.shape != want or set(names) != set(fields) or any(
                    a.dtype.fields[k][0].shape != s for k, s in fields.items()):
                raise ResultsError("%s: byte 0: header (shape %s, fields %s) does not match %s "
                                   "(%d records of %d tensors, %d configurations)"
                                   % (npy, a.shape, a.dtype, js, want[0], nt, nc))
            self._npy = (a, ix)
        return self._npy

    @property
    def stream_records(self):
        """stream.npy, memory-mapped (read-only; nothing copied), or None without one."""
        return self._stream_npy()[0] if self._has_npy() else None

    @property
    def stream_index(self):
        """stream.json as a dict (records, tensors, configs), or None without stream.npy."""
        return self._stream_npy()[1] if self._has_npy() else None

    def stream_table(self, tensors=None):
        """stream.csv's rows as a DataFrame, from stream.csv or built from stream.npy (records in
        order, then tensors, then the configurations that apply). `tensors`: a list of tensor
        names to keep (a 70B run's stream has billions of rows: take the tensors you look at;
        the memory-mapped file is read only for them). overshoot is computed in double from the
        float32 amax and scale, as stream.csv's (which prints it with 9 digits)."""
        if not self._has_npy():
            df = self.stream
            if df is None or tensors is None:
                return df
            return df[df["tensor"].isin(list(tensors))].reset_index(drop=True)
        a, ix = self._stream_npy()
        names = [t["name"] for t in ix["tensors"]]
        want = None if tensors is None else set(tensors)
        keep = np.array([i for i, n in enumerate(names) if want is None or n in want],
                        dtype=np.intp)
        cf = ix["configs"]
        # per (kept tensor, configuration): the format's code (-1: does not apply) and its max;
        # the rows are then built from integer codes alone (a 70B stream has billions of rows)
        fmts = sorted({f for t in ix["tensors"] for f in t["formats"] if f})
        fcode = np.array([[fmts.index(f) if f else -1 for f in ix["tensors"][t]["formats"]]
                          for t in keep], dtype=np.int64).reshape(len(keep), len(cf))
        fmax = np.array([_FP8_MAX.get(f, math.nan) for f in fmts] + [math.nan])
        r, k, c = np.nonzero(np.broadcast_to(fcode >= 0, (len(a),) + fcode.shape))
        t = keep[k]
        amax = np.asarray(a["amax"][r, t], dtype=np.float64)
        scale = np.asarray(a["scale"][r, t, c], dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            overshoot = np.log2(amax * scale / fmax[fcode[k, c]])

        def cat(codes, values):  # a categorical from codes into values (None: missing)
            pos = {}
            for v in values:
                if v is not None:
                    pos.setdefault(v, len(pos))
            uniq = list(pos)
            m = np.array([pos[v] if v is not None else -1 for v in values] + [-1],
                         dtype=np.int64)
            return pd.Categorical.from_codes(m[codes], categories=uniq)

        def ints(values, codes):
            return pd.array(np.asarray(values)[codes], dtype="Int64")

        return pd.DataFrame({
            "tensor": cat(k, [names[i] for i in keep]),
            "role": cat(k, [ix["tensors"][i]["role"] or None for i in keep]),
            "step": ints(a["step"], r),
            "recipe": cat(c, [x["recipe"] for x in cf]),
            "format": pd.Categorical.from_codes(fcode[k, c], categories=fmts),
            "history_len": ints([x["history_len"] for x in cf], c),
            "margin": ints([x["margin"] for x in cf], c),
            "amax_compute": cat(c, [x["amax_compute"] for x in cf]),
            "snapshot": pd.array(np.asarray(a["snapshot"][r, t], dtype=np.int64), dtype="Int64"),
            "amax": amax,
            "scale": scale,
            "overshoot": overshoot,
            "warmup": pd.array(np.asarray(a["warmup"][r, t], dtype=np.int64), dtype="Int64"),
            "micro": ints(a["micro"], r),
            "te_scale": np.asarray(a["te_scale"][r, t], dtype=np.float64),
        }, copy=False)  # the columns are new arrays: no second copy of a large stream


def load(run_dir):
    """The run folder run_dir (a path) as a Run: run.json read now, every table on first use."""
    return Run(run_dir)
