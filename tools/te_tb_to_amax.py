#!/usr/bin/env python3
"""te_tb_to_amax.py: TransformerEngine's debug statistics from TensorBoard, as an fp8lab trace.

The lossless route beside `fp8lab import-te` (issue 28). TE's debug API logs each statistic to
a TensorBoard writer too, when one is given (nvidia-dlfw-inspect's TensorboardLogger:
`tb_writer.add_scalar(name, value, iteration)`, the same name <layer>_<tensor>_<stat> as the
text log). The text log prints four decimals (an amax below 5e-5 reads 0.0000); TensorBoard
keeps the float32 value. This reads the `<layer>_<tensor>_cur_amax` scalars with
TensorBoard's own event reader (the `tensorboard` package, PyPI: the maintained reader of
that format) and writes what import-te writes:

    TRACEDIR/amax.csv              step,tensor,amax  (one RUN)
    TRACEDIR/rank_<r>/amax.csv     (several RUNs: RUN number r is rank r)
    TRACEDIR/te_log.json           source, files, interval, first/last iteration, per tensor

step = the event's step (TE's iteration); tensor = <layer>.<role> (activation input, weight
weight, output output, gradient grad_output, dgrad grad_input; wgrad is counted and left out:
TE does not cast it), a GroupedLinear's layer <name>.gemm_<i> named <name>.experts.<i>; the
name is split at its last _<tensor>_ (docs/semantics.md, "TransformerEngine debug logs"). The value is the event's float32, written "%.9g" (exact). An
amax of 0 is kept: in amax.csv it means what it means in TE's tensor, nothing ran above zero
(fp8lab replays it as a step the tensor did not run). NaN or a negative amax, a (tensor, step)
twice in one RUN (a restarted run's events: keep one run's files), a name fp8lab cannot take:
one line naming the event file and the tag, exit 2. Nothing is written then.

Usage: te_tb_to_amax.py TRACEDIR RUN [RUN ...] [--force]
  RUN: a TensorBoard log folder (every events.out.tfevents.* file in it, not in its
  subfolders) or one event file. --force replaces an earlier conversion's amax.csv,
  rank_<r>/amax.csv and te_log.json in a non-empty TRACEDIR.
"""
import json
import math
import os
import struct
import sys

TE_TENSORS = ["activation", "weight", "output", "gradient", "dgrad", "wgrad"]
TE_ROLES = {"activation": "input", "weight": "weight", "output": "output",
            "gradient": "grad_output", "dgrad": "grad_input", "wgrad": None}


class Bad(Exception):
    """Bad input: one line, exit 2."""


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


def event_files(run):
    if os.path.isfile(run):
        return [run]
    if not os.path.isdir(run):
        raise Bad("%s: no such folder or event file" % run)
    files = sorted(os.path.join(run, f) for f in os.listdir(run)
                   if f.startswith("events.out.tfevents.") and
                   os.path.isfile(os.path.join(run, f)))
    if not files:
        raise Bad("%s: no events.out.tfevents.* files" % run)
    return files


def scalars(path):
    """(tag, step, float32 value) of every scalar in one event file, in file order."""
    from tensorboard.backend.event_processing import event_file_loader
    from tensorboard.util import tensor_util
    try:
        for ev in event_file_loader.EventFileLoader(path).Load():
            if not ev.HasField("summary"):
                continue
            for v in ev.summary.value:
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
                yield v.tag, ev.step, x
    except Exception as e:  # a truncated or corrupt record: the reader's own words
        raise Bad("%s: cannot read the events: %s" % (path, str(e).splitlines()[0] if str(e) else
                                                       type(e).__name__))


def convert(tracedir, runs, force):
    ranks = []
    other, wgrad, other_tags = {}, 0, 0
    for r, run in enumerate(runs):
        rows, seen, files = {}, {}, event_files(run)
        for path in files:
            for tag, step, x in scalars(path):
                parts = split_name(tag)
                if parts is None:  # a scalar of the user's own (loss, learning rate)
                    other_tags += 1
                    continue
                layer, t, stat = parts
                if stat != "cur_amax":
                    other[stat] = other.get(stat, 0) + 1
                    continue
                if TE_ROLES[t] is None:
                    wgrad += 1
                    continue
                name = "%s.%s" % (trace_layer(layer), TE_ROLES[t])
                if math.isnan(x) or x < 0:
                    raise Bad("%s: %s at step %d is %s: an amax fp8lab can replay is a "
                              "non-negative number" % (path, tag, step, "NaN" if math.isnan(x)
                                                       else "negative"))
                if "," in name or any(ord(c) < 0x20 or ord(c) == 0x7f for c in name) or \
                        len(name.encode()) > 200:
                    raise Bad("%s: tag %r: the tensor name %r cannot go into amax.csv (a "
                              "comma, a control character, or over 200 bytes)" % (path, tag, name))
                key = (step, name)
                if key in rows:
                    raise Bad("%s: %s at step %d a second time (first in %s: a restarted run's "
                              "events? keep one run's files)" % (path, tag, step, seen[key]))
                rows[key] = x
                seen[key] = os.path.basename(path)
        ranks.append((rows, [os.path.basename(p) for p in files]))
    if not any(rows for rows, _ in ranks):
        raise Bad("%s: no <layer>_<tensor>_cur_amax scalars of activation, weight, output, "
                  "gradient or dgrad" % runs[0])
    if os.path.isdir(tracedir) and os.listdir(tracedir):
        if not force:
            raise Bad("%s: not empty (--force replaces its amax.csv, rank_<r>/amax.csv and "
                      "te_log.json)" % tracedir)
        for f in ("amax.csv", "te_log.json"):
            if os.path.exists(os.path.join(tracedir, f)):
                os.remove(os.path.join(tracedir, f))
        r = 0
        while os.path.exists(os.path.join(tracedir, "rank_%d" % r, "amax.csv")):
            os.remove(os.path.join(tracedir, "rank_%d" % r, "amax.csv"))
            try:
                os.rmdir(os.path.join(tracedir, "rank_%d" % r))
            except OSError:
                pass
            r += 1
    os.makedirs(tracedir, exist_ok=True)
    steps = sorted({s for rows, _ in ranks for s, _ in rows})
    g = 0
    for s in steps:
        g = math.gcd(g, s)
    tensors = {}
    for r, (rows, _) in enumerate(ranks):
        d = tracedir if len(ranks) == 1 else os.path.join(tracedir, "rank_%d" % r)
        os.makedirs(d, exist_ok=True)
        tmp = os.path.join(d, ".amax.csv.tmp.%d" % os.getpid())
        with open(tmp, "w") as f:
            f.write("step,tensor,amax\n")
            for (s, name) in sorted(rows):
                x = rows[(s, name)]
                f.write("%d,%s,%s\n" % (s, name, "inf" if math.isinf(x) else "%.9g" % x))
                if r == 0:
                    t = tensors.setdefault(name, {"tensor": name, "logged": 0, "zero_values": 0})
                    t["logged"] += 1
                    t["zero_values"] += x == 0
        os.replace(tmp, os.path.join(d, "amax.csv"))
    meta = {
        "source": "TransformerEngine debug statistics from TensorBoard events (cur_amax, float32)",
        "files": [{"rank": r, "files": files} for r, (_, files) in enumerate(ranks)],
        "interval": g if len(steps) > 1 else 0,
        "first_iteration": steps[0], "last_iteration": steps[-1],
        "ranks_identical": all(rows == ranks[0][0] for rows, _ in ranks),
        "amax_rows": sum(len(rows) for rows, _ in ranks),
        "zero_values": 0, "coarse_values": 0,  # float32: nothing lost to printing
        "wgrad_cur_amax_left_out": wgrad,
        "tensors": [tensors[k] for k in sorted(tensors)],
        "other_statistics": dict(sorted(other.items())),
        "other_scalars": other_tags,
    }
    tmp = os.path.join(tracedir, ".te_log.json.tmp.%d" % os.getpid())
    with open(tmp, "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    os.replace(tmp, os.path.join(tracedir, "te_log.json"))
    return meta


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
        meta = convert(args[0], args[1:], "--force" in argv)
    except Bad as e:
        sys.stderr.write("te_tb_to_amax.py: %s\n" % str(e).replace("\n", " "))
        return 2
    print("te_tb_to_amax.py: wrote %d amax rows of %d tensors from %d run%s (steps %d-%d%s) to %s"
          % (meta["amax_rows"], len(meta["tensors"]), len(args) - 1, "" if len(args) == 2 else "s",
             meta["first_iteration"], meta["last_iteration"],
             ", every %d" % meta["interval"] if meta["interval"] > 1 else "", args[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
