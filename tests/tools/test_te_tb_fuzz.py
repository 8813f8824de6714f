#!/usr/bin/env python3
"""tools/te_tb_to_amax.py's reading, fuzzed (issue 41): a corpus of truncated and corrupted
event files, generated here from one valid file written by hand (tb_events.py), each run
through the tool. What each must give is worked out here from the file's framing, not from the
tool or TensorBoard:
  - every truncation length: at a record boundary (TFRecord has no end marker: such a file is a
    valid, shorter one) exit 0 with exactly the rows of the whole records (exit 2 "no ...
    cur_amax" when none holds one); anywhere else exit 2, "cut off" and the byte offset of the
    record the cut falls in;
  - every byte flipped once (a seeded non-zero mask), and 200 seeded draws of 2-4 flips: exit 2,
    "corrupt", the offset of the (first) record hit (CRC-32C catches every such change);
  - a record's length rewritten with its header CRC made valid again (shorter, longer, 0, past
    the end, 2^32, 2^40, 2^63 - 1): exit 2 at that record;
  - changes that keep both CRCs valid, which TensorBoard's reader accepts: an amax's float32
    rewritten (exit 0, that one row changed), the data replaced by seeded random bytes or a
    real event's cut at a random byte (exit 0 with the other records' rows when protobuf parses
    it as an Event without an amax, else exit 2 "not a TensorBoard event" at that record), an
    empty record (exit 0).
Every exit 2 is one line on stderr naming the file, never a traceback, and nothing is written
(no trace folder, no temporary folder beside it). The corpus runs in-process (the tool's main(),
imported: one interpreter, so each case costs milliseconds), a seeded sample of 12 through the
command line as well. Seed: FP8LAB_FUZZ_SEED (default 41).
Usage: test_te_tb_fuzz.py FP8LAB_BIN (not used). Needs the tensorboard package (exit 77 without
it unless FP8LAB_REQUIRE_PYDEPS=1).
"""
import os
import random
import shutil
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tb_events as TB  # noqa: E402
from tb_events import check  # noqa: E402

TB.need_tensorboard()
SEED = int(os.environ.get("FP8LAB_FUZZ_SEED", "41"))
STEPS = 6
TAGS = [("dec.0.fc1_activation_cur_amax", "dec.0.fc1.input"),
        ("dec.0.fc1_gradient_cur_amax", "dec.0.fc1.grad_output")]


def value(step, k):
    return TB.f32((1.25 + step) * (1e-3 if k else 1.0))


def events():
    return [TB.event(step=s, scalars=[("loss", 2.0 - s / 8.0)] +
                     [(tag, value(s, k)) for k, (tag, _) in enumerate(TAGS)])
            for s in range(STEPS)]


def frame(data):
    """(start, end) of each record of a well-formed file (its framing, by hand)."""
    out, off = [], 0
    while off < len(data):
        end = off + 12 + int.from_bytes(data[off:off + 8], "little") + 4
        out.append((off, end))
        off = end
    return out


def want_rows(records, skip=(), changed=None):
    """amax.csv's text for the events of the given record indices (record 0: the version),
    record i holding step i - 1; changed: {(step, name): value}."""
    rows = {}
    for i in records:
        if i == 0 or i in skip:
            continue
        for k, (_, name) in enumerate(TAGS):
            rows[(i - 1, name)] = value(i - 1, k)
    rows.update(changed or {})
    return "step,tensor,amax\n" + "".join("%d,%s,%.9g\n" % (s, n, rows[(s, n)])
                                          for s, n in sorted(rows))


class Runner:
    def __init__(self, tmp):
        self.tmp, self.tool, self.n, self.fails = tmp, TB.load_tool(), 0, 0
        self.path = os.path.join(tmp, "run", "events.out.tfevents.1700000000.host.1.0")
        os.makedirs(os.path.dirname(self.path))
        self.out = os.path.join(tmp, "trace")

    def run(self, data, cli=False):
        """(exit status, stderr, amax.csv text or None) of the tool on the file `data`."""
        with open(self.path, "wb") as f:
            f.write(data)
        if cli:
            rc, _, se = TB.tool([self.out, os.path.dirname(self.path)])
        else:
            rc, se = TB.run_main(self.tool, [self.out, os.path.dirname(self.path)])
        got = None
        if os.path.isdir(self.out):
            with open(os.path.join(self.out, "amax.csv")) as f:
                got = f.read()
            shutil.rmtree(self.out)
        return rc, se, got

    def expect(self, label, data, rows=None, offset=None, words=None, cli=False, names=None):
        """rows: exit 0 with that amax.csv; else exit 2, one line naming the file (or names),
        and (unless None) 'the record at byte <offset>' and words."""
        self.n += 1
        rc, se, got = self.run(data, cli)
        left = [n for n in os.listdir(self.tmp) if "fp8lab-" in n]
        ok = not left and "Traceback" not in se
        if rows is not None:
            ok = ok and rc == 0 and got == rows
        else:
            ok = ok and rc == 2 and got is None and se.count("\n") == 1 and (names or self.path) in se
            if offset is not None:
                ok = ok and ("the record at byte %d " % offset) in se
            if words:
                ok = ok and words in se
        if not ok and self.fails < 12:  # the first few, in full
            check(False, "%s: exit %s, stderr %r, amax.csv %r, left %s" % (label, rc, se, got,
                                                                          left))
        self.fails += not ok


def record_of(spans, pos):
    return next(i for i, (a, b) in enumerate(spans) if a <= pos < b)


def case_corpus(tmp):
    rnd = random.Random(SEED)
    R = Runner(tmp)
    data = TB.events_bytes(events())
    spans = frame(data)
    check(len(spans) == STEPS + 1 and spans[-1][1] == len(data), "the file's framing")
    everything = want_rows(range(len(spans)))
    R.expect("intact", data, rows=everything)
    R.expect("intact (command line)", data, rows=everything, cli=True)
    # every truncation length
    ends = {b: i for i, (_, b) in enumerate(spans)}
    for cut in range(len(data)):
        if cut in ends:  # a whole number of records: a valid, shorter file
            keep = range(ends[cut] + 1)
            if ends[cut] == 0:  # the version record only: the folder holds no amax
                R.expect("cut at %d" % cut, data[:cut], words="no <layer>_<tensor>_cur_amax",
                         names=os.path.dirname(R.path))
            else:
                R.expect("cut at %d" % cut, data[:cut], rows=want_rows(keep))
        elif cut == 0:
            R.expect("empty", b"", words="no <layer>_<tensor>_cur_amax",
                     names=os.path.dirname(R.path))
        else:
            i = record_of(spans, cut)
            R.expect("cut at %d" % cut, data[:cut], offset=spans[i][0], words="cut off")
    # every byte flipped once
    for pos in range(len(data)):
        d = bytearray(data)
        d[pos] ^= rnd.randrange(1, 256)
        R.expect("flip at %d" % pos, bytes(d), offset=spans[record_of(spans, pos)][0],
                 words="corrupt")
    # seeded draws of several flips: the first record hit is the one named
    for k in range(200):
        d = bytearray(data)
        hit = rnd.sample(range(len(data)), rnd.randrange(2, 5))
        for pos in hit:
            d[pos] ^= rnd.randrange(1, 256)
        R.expect("flips %s" % sorted(hit), bytes(d), offset=spans[record_of(spans, min(hit))][0],
                 words="corrupt")
    # a length rewritten, its header CRC valid again
    for i in (1, 3, STEPS):
        a, b = spans[i]
        n = b - a - 16
        for new in (n - 1, n + 1, n + 7, 0, len(data), 2 ** 32, 2 ** 40, 2 ** 63 - 1):
            head = struct.pack("<Q", new)
            d = data[:a] + head + struct.pack("<I", TB.masked(head)) + data[a + 12:]
            R.expect("record %d length %d" % (i, new), d, offset=a)
    # changes that keep both CRCs valid: TensorBoard's reader takes them
    def with_data(i, new):
        a, b = spans[i]
        return data[:a] + TB.record(new) + data[b:]
    for i in (1, 4):
        old = data[spans[i][0] + 12:spans[i][1] - 4]
        v_old = struct.pack("<f", value(i - 1, 0))
        check(old.count(v_old) == 1, "record %d holds its amax once" % i)
        R.expect("record %d amax rewritten" % i, with_data(i, old.replace(v_old, struct.pack(
            "<f", 1234.5))), rows=want_rows(range(len(spans)), changed={(i - 1, TAGS[0][1]):
                                                                       1234.5}))
    R.expect("empty record", with_data(2, b""), rows=want_rows(range(len(spans)), skip=(2,)))
    from google.protobuf.message import DecodeError
    from tensorboard.compat.proto import event_pb2
    parsed = 0
    for k in range(60):
        i = rnd.randrange(1, len(spans))
        junk = bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 40)))
        if k % 2:  # a real event's fields, cut or with junk after: parses more often
            real = data[spans[i][0] + 12:spans[i][1] - 4]
            junk = real[:rnd.randrange(len(real))] + junk[:rnd.randrange(3)]
        try:
            ev = event_pb2.Event.FromString(junk)
            ok = not ev.HasField("summary") or not any(v.tag.endswith("_cur_amax")
                                                       for v in ev.summary.value)
        except DecodeError:
            ok = None
        if ok is None:
            R.expect("record %d junk %s" % (i, junk.hex()), with_data(i, junk),
                     offset=spans[i][0], words="not a TensorBoard event")
        elif ok:
            parsed += 1
            R.expect("record %d junk %s" % (i, junk.hex()), with_data(i, junk),
                     rows=want_rows(range(len(spans)), skip=(i,)))
    # a sample through the command line: the exit status, one line, no traceback
    for k in range(12):
        if k % 3 == 0:
            cut = rnd.randrange(1, len(data))
            while cut in ends:
                cut = rnd.randrange(1, len(data))
            R.expect("cli cut at %d" % cut, data[:cut], cli=True,
                     offset=spans[record_of(spans, cut)][0], words="cut off")
        else:
            d = bytearray(data)
            pos = rnd.randrange(len(data))
            d[pos] ^= rnd.randrange(1, 256)
            R.expect("cli flip at %d" % pos, bytes(d), cli=True,
                     offset=spans[record_of(spans, pos)][0], words="corrupt")
    check(R.fails == 0, "%d of %d cases failed" % (R.fails, R.n))
    print("%d files of a %d-byte event file (seed %d; %d random records parsed as events): "
          "%d failed" % (R.n, len(data), SEED, parsed, R.fails))


def main():
    TB.run_cases("fp8lab-tb-fuzz-", [case_corpus], "te tensorboard fuzz")


if __name__ == "__main__":
    main()
