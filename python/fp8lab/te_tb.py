#!/usr/bin/env python3
"""fp8lab.te_tb: TransformerEngine's debug statistics from TensorBoard, as an fp8lab trace.

(tools/te_tb_to_amax.py until issue 43.)

The lossless route beside `fp8lab import-te` (issue 28). TE's debug API logs each statistic to
a TensorBoard writer too, when one is given (nvidia-dlfw-inspect's TensorboardLogger:
`tb_writer.add_scalar(name, value, iteration)`, the same name <layer>_<tensor>_<stat> as the
text log). The text log prints four decimals (an amax below 5e-5 reads 0.0000); TensorBoard
keeps the float32 value. This reads the `<layer>_<tensor>_cur_amax` scalars with
TensorBoard's own record reader and event parsing (the `tensorboard` package, PyPI: the
maintained reader of that format) and writes what import-te writes:

    TRACEDIR/amax.csv              step,tensor,amax  (one RUN)
    TRACEDIR/rank_<r>/amax.csv     (several RUNs: RUN number r is rank r)
    TRACEDIR/te_log.json           source, files, written, intervals, per tensor (schema 2)

step = the event's step (TE's iteration); tensor = <layer>.<role> (activation input, weight
weight, output output, gradient grad_output, dgrad grad_input; wgrad is counted and left out:
TE does not cast it), a GroupedLinear's layer <name>.gemm_<i> named <name>.experts.<i>; the
name is split at its last _<tensor>_ (docs/semantics.md, "TransformerEngine debug logs"). The
value is the event's float32, written "%.9g" (exact). An amax of 0 is kept: in amax.csv it
means what it means in TE's tensor, nothing ran above zero (fp8lab replays it as a step the
tensor did not run).

Bad input is one line on stderr naming the event file (and the record's byte offset, or the
tag), exit 2, and nothing written (docs/capture.md, "te_tb_to_amax.py"):
  - a record cut off (a truncated file, or one still being written: its last record partial)
    or corrupt (a CRC-32C that does not match, bytes that are not an Event): TensorBoard's
    EventFileLoader stops there silently (it logs DataLossError at debug level), so this reads
    with the record reader it uses (tensorboard.compat.tensorflow_stub's PyRecordReader_New,
    its reader without TensorFlow) and checks that the reading reached the end of the file;
  - a name or step amax.csv would refuse (fp8lab's rules, src/trace: fp8_tensor_name_check and
    amaxcsv.c; NAME_RULES below): a name that is empty, over 200 bytes, holds a control
    character or a comma, starts with '/' or has a '..' segment; a negative step;
  - NaN or a negative amax; a (tensor, step) twice in one RUN (a restarted run's events: keep
    one run's files); no cur_amax scalar at all; a RUN, or an event file in it, that is not a
    regular file.
Runtime failure (a full disk): exit 1, nothing written.

The folder (the same rules as import-te: docs/capture.md, "What --force may replace"): the
trace is written into a fresh folder beside TRACEDIR, `.<base>.fp8lab-import.<pid>`, and moved
in at the end (rename; over an earlier import, an atomic swap with renameat2 RENAME_EXCHANGE,
the previous import then removed). A non-empty TRACEDIR needs --force, which replaces only a
folder an earlier import wrote (its te_log.json lists every entry). What a killed import left
beside TRACEDIR (its pid gone) is removed first.

Usage: python -m fp8lab.te_tb TRACEDIR RUN [RUN ...] [--force]
  RUN: a TensorBoard log folder (every events.out.tfevents.* file in it, not in its
  subfolders) or one event file. --force replaces an earlier import's folder (import-te's or
  this tool's) and nothing else. Exit status: 0 written, 1 runtime failure, 2 bad input or usage.
"""
import ctypes
import errno
import json
import math
import os
import re
import shutil
import stat
import struct
import sys

TE_TENSORS = ["activation", "weight", "output", "gradient", "dgrad", "wgrad"]
TE_ROLES = {"activation": "input", "weight": "weight", "output": "output",
            "gradient": "grad_output", "dgrad": "grad_input", "wgrad": None}
SOURCE = "TransformerEngine debug statistics from TensorBoard events (cur_amax, float32)"
SOURCE_PREFIX = "TransformerEngine debug statistics"  # import-te's and this tool's te_log.json
TE_LOG = "te_log.json"

# amax.csv's rules for a name and a step, as fp8lab's reader applies them (tests/tools/
# test_te_tb_rules.py holds a table of names and steps to both and asserts they agree):
NAME_MAX = 200          # src/trace/trace.h FP8_NAME_MAX: bytes of UTF-8
STEP_MAX = 2 ** 63 - 1  # amaxcsv.c parse_step: a non-negative int64


def name_problem(name, comma=True):
    """Why amax.csv cannot hold the tensor name, or None. fp8_tensor_name_check
    (src/trace/trace_util.c: empty, longer than NAME_MAX bytes, not UTF-8, a control character
    (U+0000-U+001F, U+007F-U+009F), a leading '/', a '..' path segment) and amaxcsv.c's row (a
    comma splits the field: amax.csv has no quoting). comma=False: a statistic's name (a key of
    te_log.json, import-te's count_stat), which may hold one."""
    try:
        raw = name.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid UTF-8"
    if not raw:
        return "is empty"
    if len(raw) > NAME_MAX:
        return "is %d bytes long, at most %d" % (len(raw), NAME_MAX)
    for ch in name:
        if ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F:
            return "holds the control character %s" % ascii(ch)
    if comma and "," in name:
        return "holds a comma (amax.csv has no quoting)"
    if name.startswith("/"):
        return "starts with '/'"
    if ".." in name.split("/"):
        return "has a '..' path segment"
    return None


def step_problem(step):
    """Why amax.csv cannot hold the step, or None (amaxcsv.c parse_step)."""
    if step < 0:
        return "is negative (amax.csv's step is a non-negative integer)"
    if step > STEP_MAX:
        return "is too large (at most %d)" % STEP_MAX
    return None


class Bad(Exception):
    """Bad input: one line, exit 2."""


class Failed(Exception):
    """A runtime failure (a full disk, a write error): one line, exit 1."""


def os_error(e, what):
    """Bad or Failed for an OSError: a full disk, quota, I/O error or too large a file is the
    run's failure (exit 1), anything else the path's (fp8_write_errno_status)."""
    cls = Failed if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG) else Bad
    return cls("%s: %s" % (what, e.strerror or e))


def split_name(name):
    """<layer>_<tensor>_<stat> split at the last _<tensor>_, or None."""
    best = None
    for t in TE_TENSORS:
        i = name.rfind("_%s_" % t)
        while i > 0 and (best is None or i > best[0]):
            if i + len(t) + 2 < len(name):
                best = (i, t)
                break
            i = name.rfind("_%s_" % t, 0, i)
    if best is None:
        return None
    i, t = best
    return name[:i], t, name[i + len(t) + 2:]


def trace_layer(layer):
    """TE's GroupedLinear (TE >= 2.11) logs expert i's GEMM as `<name>.gemm_<i>`: the trace
    names it expert i of <name>, `<name>.experts.<i>`, as import-te does."""
    head, _, last = layer.rpartition(".")
    if last.startswith("gemm_") and len(last) > 5 and all("0" <= c <= "9" for c in last[5:]):
        return (head + "." if head else "") + "experts." + last[5:]
    return layer


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def regular(path):
    """Bad unless path is a regular file (a FIFO would block the reader: lstat never opens)."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise Bad("%s: %s" % (path, e.strerror))
    if not stat.S_ISREG(st.st_mode):
        raise Bad("%s: not a regular file" % path)
    return st.st_size


def event_files(run):
    try:
        st = os.stat(run)
    except OSError:
        raise Bad("%s: no such folder or event file" % run)
    if not stat.S_ISDIR(st.st_mode):
        regular(run)
        return [run]
    try:
        names = os.listdir(run)
    except OSError as e:
        raise Bad("%s: %s" % (run, e.strerror))
    files = sorted(os.path.join(run, f) for f in names if f.startswith("events.out.tfevents.")
                   and not os.path.isdir(os.path.join(run, f)))
    if not files:
        raise Bad("%s: no events.out.tfevents.* files" % run)
    for p in files:
        regular(p)
    return files


# ---------------------------------------------------------------- reading

def records(path):
    """(byte offset, bytes) of every record of the event file, in file order, with
    TensorBoard's own record reader: the one its EventFileLoader uses without TensorFlow.
    The loader ends at a DataLossError silently, so here a record cut off or corrupt is Bad
    with its offset, and the reading must end exactly at the end of the file."""
    from tensorboard.compat.tensorflow_stub import errors as tb_errors
    from tensorboard.compat.tensorflow_stub import pywrap_tensorflow
    size = regular(path)
    try:
        reader = pywrap_tensorflow.PyRecordReader_New(path, 0, None, None)
    except (OSError, tb_errors.OpError) as e:
        raise Bad("%s: cannot be read: %s" % (path, getattr(e, "strerror", None) or e))
    off = 0
    while True:
        try:
            reader.GetNext()
        except tb_errors.OutOfRangeError:  # nothing more: at the end of the file
            break
        except tb_errors.DataLossError as e:
            said = str(e.message or "").replace(path, "").strip()
            if "truncated" in said:
                raise Bad("%s: the record at byte %d is cut off (the file ends %d bytes into "
                          "it; TensorBoard's reader: %s): a truncated event file, or one still "
                          "being written (convert it once its writer closed it)"
                          % (path, off, size - off, said))
            raise Bad("%s: the record at byte %d is corrupt (TensorBoard's reader: %s)"
                      % (path, off, said))
        except (MemoryError, OverflowError):  # a length field far beyond the file
            raise Bad("%s: the record at byte %d is corrupt (its length cannot be read)"
                      % (path, off))
        except OSError as e:
            raise Bad("%s: the record at byte %d cannot be read: %s" % (path, off, e.strerror))
        rec = reader.record()
        yield off, rec
        off += 8 + 4 + len(rec) + 4
    now = regular(path)
    if off != now or now != size:
        raise Bad("%s: the file changed while it was read (%d bytes, then %d; the reading "
                  "ended at byte %d): one still being written (convert it once its writer "
                  "closed it)" % (path, size, now, off))


def scalars(path):
    """(tag, step, float32 value, offset) of every scalar in one event file, in file order,
    each record parsed as TensorBoard's EventFileLoader does (Event, then its compat layers);
    a record that does not parse is Bad with its offset."""
    from tensorboard import data_compat, dataclass_compat
    from tensorboard.compat.proto import event_pb2
    from tensorboard.util import tensor_util
    initial = {}
    for off, rec in records(path):
        out = []
        try:
            ev = event_pb2.Event.FromString(rec)
            for ev2 in dataclass_compat.migrate_event(data_compat.migrate_event(ev), initial):
                if not ev2.HasField("summary"):
                    continue
                for v in ev2.summary.value:
                    kind = v.WhichOneof("value")
                    if kind == "simple_value":
                        x = f32(v.simple_value)
                    elif kind == "tensor":
                        arr = tensor_util.make_ndarray(v.tensor)
                        if arr.size != 1 or arr.dtype.kind != "f":
                            continue  # not a scalar: not a statistic of TE's
                        x = f32(float(arr.reshape(-1)[0]))
                    else:
                        continue
                    out.append((v.tag, ev2.step, x, off))
        except Exception as e:  # noqa: BLE001  the record's bytes, whatever the parser says
            why = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise Bad("%s: the record at byte %d is not a TensorBoard event (%s)"
                      % (path, off, why))
        for s in out:
            yield s


# ---------------------------------------------------------------- the conversion

def interval(iters):
    """gcd of a set of logged iterations; 0 for one iteration (docs/semantics.md)."""
    g = 0
    for s in iters:
        g = math.gcd(g, s)
    return g if len(iters) > 1 else 0


def read_runs(runs):
    """Every RUN's rows, checked: ([(rows {(step, name): x}, files, run)], tensors, counts)."""
    ranks, tens, other, counts = [], {}, {}, {"wgrad": 0, "other_scalars": 0}
    for r, run in enumerate(runs):
        rows, seen, files = {}, {}, event_files(run)
        for path in files:
            for tag, step, x, off in scalars(path):
                parts = split_name(tag)
                if parts is None:  # a scalar of the user's own (loss, learning rate)
                    counts["other_scalars"] += 1
                    continue
                layer, t, stat_name = parts
                why = step_problem(step)
                if why:
                    raise Bad("%s: tag %s at byte %d: step %d %s" % (path, ascii(tag), off, step,
                                                                    why))
                if stat_name != "cur_amax":
                    why = name_problem(stat_name, comma=False)
                    if why:
                        raise Bad("%s: tag %s: the statistic name %s %s" % (path, ascii(tag),
                                                                           ascii(stat_name), why))
                    other[stat_name] = other.get(stat_name, 0) + 1
                if TE_ROLES[t] is None:
                    counts["wgrad"] += stat_name == "cur_amax"
                    continue
                name = "%s.%s" % (trace_layer(layer), TE_ROLES[t])
                why = name_problem(name)
                if why:
                    raise Bad("%s: tag %s: the tensor name %s %s: amax.csv cannot hold it"
                              % (path, ascii(tag), ascii(name), why))
                te = tens.setdefault(name, {"tensor": name, "te_layer": layer, "te_tensor": t,
                                            "role": TE_ROLES[t], "logged": 0, "zero_values": 0,
                                            "amax_iters": set(), "stats": {}})
                te["stats"].setdefault(stat_name, set()).add(step)
                if stat_name != "cur_amax":
                    continue
                if math.isnan(x) or x < 0:
                    raise Bad("%s: %s at step %d is %s: an amax fp8lab can replay is a "
                              "non-negative number" % (path, tag, step, "NaN" if math.isnan(x)
                                                       else "negative"))
                key = (step, name)
                if key in rows:
                    raise Bad("%s: %s at step %d a second time (first in %s: a restarted run's "
                              "events? keep one run's files)" % (path, tag, step, seen[key]))
                rows[key] = x + 0.0  # -0 -> 0
                seen[key] = os.path.basename(path)
                te["amax_iters"].add(step)
                if r == 0:
                    te["logged"] += 1
                    te["zero_values"] += x == 0
        ranks.append((rows, [os.path.basename(p) for p in files], run))
    if not any(rows for rows, _, _ in ranks):
        raise Bad("%s: no <layer>_<tensor>_cur_amax scalars of activation, weight, output, "
                  "gradient or dgrad" % runs[0])
    return ranks, tens, other, counts


def amax_text(rows):
    out = ["step,tensor,amax\n"]
    for (s, name) in sorted(rows):
        x = rows[(s, name)]
        out.append("%d,%s,%s\n" % (s, name, "inf" if math.isinf(x) else "%.9g" % x))
    return "".join(out)


def te_log(ranks, tens, other, counts, written):
    """te_log.json (schema 2: docs/semantics.md, "TransformerEngine debug logs")."""
    steps = sorted({s for rows, _, _ in ranks for s, _ in rows})
    entries = []
    for name in sorted(tens):
        t = tens[name]
        e = {k: t[k] for k in ("tensor", "te_layer", "te_tensor", "role", "logged",
                               "zero_values")}
        e["interval"] = interval(t["amax_iters"])
        if t["amax_iters"]:
            e["first_iteration"] = min(t["amax_iters"])
            e["last_iteration"] = max(t["amax_iters"])
        e["statistics"] = {s: interval(its) for s, its in sorted(t["stats"].items())}
        entries.append(e)
    own = {e["interval"] for e in entries if "first_iteration" in e}  # cur_amax logged
    return {
        "source": SOURCE,
        "files": [{"rank": r, "files": files} for r, (_, files, _) in enumerate(ranks)],
        "interval": interval(steps),
        "intervals_differ": len(own) > 1,
        "first_iteration": steps[0], "last_iteration": steps[-1],
        "ranks_identical": all(rows == ranks[0][0] for rows, _, _ in ranks),
        "amax_rows": sum(len(rows) for rows, _, _ in ranks),
        "zero_values": 0, "coarse_values": 0,  # float32: nothing lost to printing
        "wgrad_cur_amax_left_out": counts["wgrad"],
        "tensors": entries,
        "other_statistics": dict(sorted(other.items())),
        "other_scalars": counts["other_scalars"],
        "ranks_without_amax": without_amax(ranks),
        "cut_lines_dropped": 0,
        "written": written,
    }


def without_amax(ranks):
    """The ranks that gave no amax to replay: no cur_amax scalar, or every one exactly 0."""
    return [r for r, (rows, _, _) in enumerate(ranks) if not any(rows.values())]


# ---------------------------------------------------------------- the folder

TMP_IMPORT, TMP_OLD = ".fp8lab-import.", ".fp8lab-old."
FORCE_TAIL = ("--force replaces only a folder an earlier import wrote (te_log.json lists its "
              "files); move it away or import into another folder")
RANK_DIR = re.compile(r"rank_(0|[1-9][0-9]*)\Z")


def owned(written, nfiles, rel, is_dir):
    """Whether rel ('/'-separated, below the folder) is an entry an earlier import wrote: a
    file its te_log.json's "written" lists, or the rank_<r> folder of a listed rank_<r>/...;
    without "written" (an import older than that list): amax.csv, te_overflows.csv,
    te_log.json, rank_<r>/amax.csv for r below the length of "files"."""
    if written is not None:
        if is_dir:
            return RANK_DIR.match(rel) is not None and any(
                isinstance(w, str) and w.startswith(rel + "/") for w in written)
        return rel in [w for w in written if isinstance(w, str)]
    head, slash, tail = rel.partition("/")
    m = RANK_DIR.match(head)
    if is_dir:
        return not slash and m is not None and int(m.group(1)) < nfiles
    if not slash:
        return rel in ("amax.csv", "te_overflows.csv", TE_LOG)
    return m is not None and int(m.group(1)) < nfiles and tail == "amax.csv"


def foreign(path, rel, written, nfiles):
    """The first entry below path, in name order, depth first, that the import did not write
    (lstat: a link, FIFO or socket never is), or None."""
    try:
        names = sorted(os.listdir(path))
    except OSError:
        return rel or "."
    for n in names:
        sub, srel = os.path.join(path, n), (rel + "/" if rel else "") + n
        try:
            st = os.lstat(sub)
        except OSError:
            return srel
        is_dir = stat.S_ISDIR(st.st_mode)
        if not (is_dir or stat.S_ISREG(st.st_mode)) or not owned(written, nfiles, srel, is_dir):
            return srel
        if is_dir:
            f = foreign(sub, srel, written, nfiles)
            if f:
                return f
    return None


def check_owned(target, shown):
    """Bad unless the non-empty folder is an earlier import's, every entry in it listed."""
    log = os.path.join(target, TE_LOG)
    try:
        st = os.lstat(log)
    except OSError:
        bad = foreign(target, "", None, 1 << 62)
        if bad:
            raise Bad("%s: holds %s, which no import wrote: %s" % (shown, ascii(bad)[1:-1],
                                                                   FORCE_TAIL))
        raise Bad("%s: holds %s but no te_log.json: not a folder an import wrote: %s"
                  % (shown, sorted(os.listdir(target))[0], FORCE_TAIL))
    why, meta = None, None
    if not stat.S_ISREG(st.st_mode):
        why = "not a regular file"
    else:
        try:
            with open(log, encoding="utf-8") as f:
                meta = json.load(f)
        except (OSError, ValueError):
            why = "not JSON"
    if why is None and not isinstance(meta, dict):
        why = "not a JSON object"
    if why is None and not (isinstance(meta.get("source"), str) and
                            meta["source"].startswith(SOURCE_PREFIX)):
        why = "its \"source\" is not TransformerEngine's statistics"
    if why is None and "written" in meta and not isinstance(meta["written"], list):
        why = "its \"written\" is not a list"
    if why:
        raise Bad("%s: holds te_log.json, which no import wrote (%s): %s" % (shown, why,
                                                                             FORCE_TAIL))
    files = meta.get("files")
    bad = foreign(target, "", meta.get("written"), len(files) if isinstance(files, list) else 0)
    if bad:
        raise Bad("%s: holds %s, which no import wrote: %s" % (shown, ascii(bad)[1:-1],
                                                               FORCE_TAIL))


def pid_gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (OSError, OverflowError):
        return False
    return False


def remove_leftovers(parent, base, target):
    """A killed import's folders beside the target (their pid gone, or this process's own: a
    pid reused) removed; a swap's fallback killed half-way can leave the previous import only
    under .<base>.fp8lab-old.<pid> with no target: that one is moved back."""
    pat = re.compile(r"\.%s(%s|%s)([0-9]+)\Z" % (re.escape(base), re.escape(TMP_IMPORT),
                                                  re.escape(TMP_OLD)))
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for n in names:
        m = pat.match(n)
        if not m:
            continue
        pid = int(m.group(2))
        if pid > 0x7fffffff:  # no process has it: not a name an import made (as import-te)
            continue
        if pid != os.getpid() and not pid_gone(pid):
            continue
        p = os.path.join(parent, n)
        if not os.path.isdir(p) or os.path.islink(p):
            continue
        if m.group(1) == TMP_OLD and not os.path.lexists(target):
            try:
                os.rename(p, target)
                continue
            except OSError:
                pass
        shutil.rmtree(p, ignore_errors=True)


def rename_exchange(a, b):
    """Linux renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE): 0, or the errno."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return errno.ENOSYS
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    AT_FDCWD, RENAME_EXCHANGE = -100, 2
    if fn(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) == 0:
        return 0
    return ctypes.get_errno()


class Folder:
    """The trace folder the import owns: written into `tmp` beside it, then moved in."""

    def __init__(self, tracedir, force):
        self.shown, self.made, self.tmp, self.swap, self.mode = tracedir, [], None, False, None
        t = tracedir.rstrip("/") or "/"
        if os.path.basename(t) in (".", ".."):
            t = os.path.realpath(t)
        if not t or t == "/":
            raise Bad("%s: not a folder an import can write (it writes a folder of its own and "
                      "moves it there)" % tracedir)
        self.target = t
        self.parent = os.path.dirname(t) or "."
        base = os.path.basename(t)
        self.tmp_name = os.path.join(self.parent, ".%s%s%d" % (base, TMP_IMPORT, os.getpid()))
        self.old = os.path.join(self.parent, ".%s%s%d" % (base, TMP_OLD, os.getpid()))
        remove_leftovers(self.parent, base, t)
        try:
            st = os.lstat(t)
        except FileNotFoundError:
            self.mkdirs(self.parent)
        except OSError as e:
            raise Bad("%s: %s" % (tracedir, e.strerror))
        else:
            if stat.S_ISLNK(st.st_mode):
                raise Bad("%s: is a symbolic link: an import writes a folder of its own there; "
                          "give the folder itself or another path" % tracedir)
            if not stat.S_ISDIR(st.st_mode):
                raise Bad("%s: exists and is not a folder: move it away or import into "
                          "another folder" % tracedir)
            self.mode = stat.S_IMODE(st.st_mode)
            if os.listdir(t):
                if not force:
                    raise Bad("%s: not empty (--force replaces a folder an earlier import "
                              "wrote, and nothing else)" % tracedir)
                check_owned(t, tracedir)
                self.swap = True
        if not os.access(self.parent, os.W_OK):
            self.close()
            raise Bad("%s: the folder holding it is not writable" % tracedir)
        try:
            os.mkdir(self.tmp_name)
        except OSError as e:
            self.close()
            raise os_error(e, "%s: cannot create directory" % self.tmp_name)
        self.tmp = self.tmp_name

    def mkdirs(self, d):
        """mkdir -p d, remembering what it made (undone by close when the import fails)."""
        todo = []
        while d and not os.path.isdir(d):
            todo.append(d)
            up = os.path.dirname(d)
            if up == d:
                break
            d = up
        for p in reversed(todo):
            try:
                os.mkdir(p)
            except OSError as e:
                self.close()
                raise os_error(e, "%s: cannot create directory" % p)
            self.made.append(p)

    def write(self, rel, text):
        """rel (below the folder, '/'-separated) written in the temporary folder."""
        p = os.path.join(self.tmp, *rel.split("/"))
        try:
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "w", encoding="utf-8") as f:
                f.write(text)
        except OSError as e:
            raise os_error(e, "%s: cannot write %s (%s: unchanged)" % (p, rel, self.shown))

    def commit(self):
        if self.mode is not None:
            os.chmod(self.tmp, self.mode)  # the replaced folder's permissions
        try:
            if not self.swap:  # absent or empty: rename() makes it, or replaces the empty one
                os.rename(self.tmp, self.target)
            else:
                # the ownership again, now, and on the folder swapped out before its removal:
                # what was written into the target since the first check is not ours to remove
                check_owned(self.target, self.shown)
                e = rename_exchange(self.tmp, self.target)
                if e == 0:  # swapped: the previous import is under the temporary name now
                    try:
                        check_owned(self.tmp, self.shown)
                    except Bad:  # written in the instant between: swapped back, nothing replaced
                        if rename_exchange(self.tmp, self.target) != 0:
                            self.tmp = None  # the earlier folder stays whole there
                        raise
                    shutil.rmtree(self.tmp, ignore_errors=True)
                elif e in (errno.EINVAL, errno.ENOSYS):
                    os.rename(self.target, self.old)
                    try:
                        check_owned(self.old, self.shown)
                    except Bad:
                        os.rename(self.old, self.target)
                        raise
                    try:
                        os.rename(self.tmp, self.target)
                    except OSError:
                        os.rename(self.old, self.target)
                        raise
                    shutil.rmtree(self.old, ignore_errors=True)
                else:
                    raise OSError(e, os.strerror(e))
        except OSError as e:
            raise os_error(e, "%s: cannot move the import into place" % self.shown)
        self.tmp, self.made = None, []

    def close(self):
        """Undoes what an unfinished import made: its temporary folder, the parents made."""
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None
        for p in reversed(self.made):
            try:
                os.rmdir(p)
            except OSError:
                break
        self.made = []


def convert(tracedir, runs, force):
    ranks, tens, other, counts = read_runs(runs)
    folder = Folder(tracedir, force)
    try:
        written = []
        for r, (rows, _, _) in enumerate(ranks):
            rel = "amax.csv" if len(ranks) == 1 else "rank_%d/amax.csv" % r
            folder.write(rel, amax_text(rows))
            written.append(rel)
        meta = te_log(ranks, tens, other, counts, written + [TE_LOG])
        folder.write(TE_LOG, json.dumps(meta, indent=2) + "\n")
        folder.commit()
    finally:
        folder.close()
    return meta, ranks


def main(argv):
    args = [a for a in argv if a != "--force"]
    if len(args) < 2 or any(a.startswith("-") for a in args):
        sys.stderr.write(__doc__.split("\n\n")[-1] + "\n")
        return 2
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        sys.stderr.write("te_tb_to_amax.py: needs the tensorboard package (pip install "
                         "tensorboard)\n")
        return 1
    try:
        meta, ranks = convert(args[0], args[1:], "--force" in argv)
    except Bad as e:
        sys.stderr.write("te_tb_to_amax.py: %s\n" % str(e).replace("\n", " "))
        return 2
    except Failed as e:
        sys.stderr.write("te_tb_to_amax.py: %s\n" % str(e).replace("\n", " "))
        return 1
    for r in meta["ranks_without_amax"]:
        sys.stderr.write("te_tb_to_amax.py: warning: rank %d (%s) gave no amax to replay (no "
                         "cur_amax scalar, or every one 0): its amax.csv replays nothing\n"
                         % (r, ranks[r][2]))
    own = [t["interval"] for t in meta["tensors"] if "first_iteration" in t]
    if own and min(own) != max(own):  # TE's freq per tensor (import-te's summary says the same)
        every = (", each tensor logged at its own interval, %d to %d iterations" % (min(own), max(own))
                 if min(own) > 0 else ", each tensor logged at its own interval: te_log.json lists them")
    else:
        every = ", every %d" % meta["interval"] if meta["interval"] > 1 else ""
    print("te_tb_to_amax.py: wrote %d amax rows of %d tensors from %d run%s (steps %d-%d%s) to %s"
          % (meta["amax_rows"], len(own), len(args) - 1, "" if len(args) == 2 else "s",
             meta["first_iteration"], meta["last_iteration"], every, args[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
